//! Parsers for recorded histories. Both use a logical clock when the log has no timestamps:
//! an event's time is its line number, so the order of the lines is the real-time order.
//!
//! Jepsen's completion types mean: `:ok` the operation took effect with that result; `:fail`
//! it did not take effect; `:info` (or no completion at all) its outcome is unknown.

use super::kv::{KvInput, KvOutput};
use super::register::{RegisterInput, RegisterOutput};
use super::Operation;
use std::collections::HashMap;
use std::fmt;

/// A line that could not be read: where, what it said, and why it was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// The offending line, as written.
    pub text: String,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}: `{}`", self.line, self.message, self.text.trim())
    }
}

impl std::error::Error for ParseError {}

/// Builds operations from invoke/complete events, one open operation per process.
struct Builder<I, O> {
    ops: Vec<Operation<I, O>>,
    /// `:fail` completions: the operation did not happen and is left out.
    failed: Vec<bool>,
    /// Process -> its open operation and the line that invoked it.
    open: HashMap<u64, (usize, usize)>,
}

impl<I, O> Builder<I, O> {
    fn new() -> Builder<I, O> {
        Builder { ops: Vec::new(), failed: Vec::new(), open: HashMap::new() }
    }

    fn invoke(&mut self, process: u64, time_ns: u64, input: I, line: usize) -> Result<(), String> {
        if let Some(&(_, invoked_at)) = self.open.get(&process) {
            return Err(format!(
                "process {process} invokes an operation while its operation from line {invoked_at} is still open"
            ));
        }
        self.open.insert(process, (self.ops.len(), line));
        self.ops.push(Operation { client: process, call_ns: time_ns, return_ns: None, input, output: None });
        self.failed.push(false);
        Ok(())
    }

    /// The open operation of `process`, now closed.
    fn close(&mut self, process: u64) -> Result<usize, String> {
        match self.open.remove(&process) {
            Some((k, _)) => Ok(k),
            None => Err(format!("process {process} completes an operation it never invoked")),
        }
    }

    fn finish(self) -> Vec<Operation<I, O>> {
        // Operations still open at the end keep an unknown outcome.
        self.ops.into_iter().zip(self.failed).filter(|(_, failed)| !failed).map(|(op, _)| op).collect()
    }
}

/// Parse a Jepsen etcd register log: lines `INFO jepsen.util - PROCESS :TYPE :F VALUE` with
/// `:F` one of `:read` (VALUE `nil` or an integer), `:write V` and `:cas [FROM TO]`.
///
/// `:ok` gives the result; `:fail :cas` means the compare failed (a completed cas with no
/// effect); `:fail :read` (e.g. `:timed-out`) and `:info` mean the outcome is unknown, as does
/// an invoke that never completes; `:fail :write` means the write did not happen. Blank lines
/// are skipped; any other line is an error.
pub fn jepsen_etcd(text: &str) -> Result<Vec<Operation<RegisterInput, RegisterOutput>>, ParseError> {
    const MARK: &str = "jepsen.util - ";
    let mut b: Builder<RegisterInput, RegisterOutput> = Builder::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let error = |message: String| ParseError { line, text: raw.to_owned(), message };
        if raw.trim().is_empty() {
            continue;
        }
        let Some(at) = raw.find(MARK) else {
            return Err(error(
                "not a Jepsen history line (`INFO jepsen.util - PROCESS :TYPE :F VALUE`)".into(),
            ));
        };
        let mut tokens = raw[at + MARK.len()..].split_whitespace();
        let (Some(process), Some(kind), Some(f)) = (tokens.next(), tokens.next(), tokens.next()) else {
            return Err(error("expected PROCESS :TYPE :F VALUE after `jepsen.util -`".into()));
        };
        let value = tokens.collect::<Vec<_>>().join(" ");
        let process: u64 = process
            .parse()
            .map_err(|_| error(format!("process `{process}` is not a non-negative integer")))?;
        let time_ns = line as u64;
        match kind {
            ":invoke" => {
                let input = match f {
                    ":read" => RegisterInput::Read,
                    ":write" => RegisterInput::Write(register_value(&value).map_err(error)?),
                    ":cas" => {
                        let (from, to) = cas_pair(&value).map_err(error)?;
                        RegisterInput::Cas { from, to }
                    }
                    other => {
                        return Err(error(format!(
                            "unknown operation `{other}` (expected :read, :write or :cas)"
                        )))
                    }
                };
                b.invoke(process, time_ns, input, line).map_err(error)?;
            }
            ":ok" | ":fail" | ":info" => {
                let k = b.close(process).map_err(error)?;
                let input = b.ops[k].input;
                let invoked = match input {
                    RegisterInput::Read => ":read",
                    RegisterInput::Write(_) => ":write",
                    RegisterInput::Cas { .. } => ":cas",
                };
                if f != invoked {
                    return Err(error(format!(
                        "completes a `{f}`, but process {process} invoked a `{invoked}`"
                    )));
                }
                let output = match (kind, input) {
                    (":info", _) | (":fail", RegisterInput::Read) => None,
                    (":ok", RegisterInput::Read) => {
                        Some(RegisterOutput::Read(register_value(&value).map_err(error)?))
                    }
                    (":ok", RegisterInput::Write(written)) => {
                        same_value(register_value(&value).map_err(error)?, written).map_err(error)?;
                        Some(RegisterOutput::WriteOk)
                    }
                    (":ok" | ":fail", RegisterInput::Cas { from, to }) => {
                        same_value(cas_pair(&value).map_err(error)?, (from, to)).map_err(error)?;
                        Some(if kind == ":ok" { RegisterOutput::CasOk } else { RegisterOutput::CasFail })
                    }
                    (_, RegisterInput::Write(_)) => {
                        b.failed[k] = true;
                        None
                    }
                    _ => unreachable!("every (completion, operation) pair is matched above"),
                };
                if output.is_some() {
                    b.ops[k].return_ns = Some(time_ns);
                    b.ops[k].output = output;
                }
            }
            other => {
                return Err(error(format!("unknown type `{other}` (expected :invoke, :ok, :fail or :info)")))
            }
        }
    }
    Ok(b.finish())
}

fn same_value<T: PartialEq + fmt::Debug>(completed: T, invoked: T) -> Result<(), String> {
    if completed == invoked {
        Ok(())
    } else {
        Err(format!("completion value {completed:?} differs from the invoked {invoked:?}"))
    }
}

/// `nil` or a non-negative integer.
fn register_value(text: &str) -> Result<Option<u64>, String> {
    if text == "nil" {
        return Ok(None);
    }
    text.parse().map(Some).map_err(|_| format!("value `{text}` is neither nil nor a non-negative integer"))
}

/// `[FROM TO]`.
fn cas_pair(text: &str) -> Result<(Option<u64>, Option<u64>), String> {
    let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'));
    let parts: Vec<&str> = inner.map(|t| t.split_whitespace().collect()).unwrap_or_default();
    match parts[..] {
        [from, to] => Ok((register_value(from)?, register_value(to)?)),
        _ => Err(format!("cas value `{text}` is not `[FROM TO]`")),
    }
}

/// A value of the EDN subset the kv histories use.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Edn {
    Nil,
    Int(i64),
    Keyword(String),
    Str(String),
}

/// Parse a key-value history: one EDN map per line, `{:process P, :type :invoke|:ok|:fail|:info,
/// :f :get|:put|:append, :key "K", :value "V"}` (`:value nil` on a get's invoke). An optional
/// integer `:time` (ns) on every line is used as the clock; without it the line number is.
/// A get of an absent key returns "" (`nil` in an `:ok` get reads as ""). Other keys (such as
/// `:index`) are ignored.
pub fn kv_edn(text: &str) -> Result<Vec<Operation<KvInput, KvOutput>>, ParseError> {
    kv_edn_timed(text).map(|(ops, _)| ops)
}

/// [`kv_edn`], also saying whether the times are the file's `:time`s (true) or line numbers.
pub fn kv_edn_timed(text: &str) -> Result<(Vec<Operation<KvInput, KvOutput>>, bool), ParseError> {
    let mut b: Builder<KvInput, KvOutput> = Builder::new();
    let mut timed: Option<bool> = None;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let error = |message: String| ParseError { line, text: raw.to_owned(), message };
        if raw.trim().is_empty() {
            continue;
        }
        let map = edn_map(raw).map_err(error)?;
        let field = |name: &str| map.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        let required = |name: &str| field(name).ok_or_else(|| error(format!("missing `:{name}`")));
        let process = match required("process")? {
            Edn::Int(p) if *p >= 0 => *p as u64,
            other => return Err(error(format!("`:process {other:?}` is not a non-negative integer"))),
        };
        let time_ns = match (field("time"), timed) {
            (Some(Edn::Int(t)), None | Some(true)) if *t >= 0 => *t as u64,
            (None, None | Some(false)) => line as u64,
            (Some(other), None | Some(true)) => {
                return Err(error(format!("`:time {other:?}` is not a non-negative integer")))
            }
            (Some(_), Some(false)) => {
                return Err(error("`:time` here, but not on the first operation".into()))
            }
            (None, Some(true)) => return Err(error("missing `:time` (the first operation has one)".into())),
        };
        timed = Some(field("time").is_some());
        let keyword = |name: &str| match required(name)? {
            Edn::Keyword(k) => Ok(k.as_str()),
            other => Err(error(format!("`:{name} {other:?}` is not a keyword"))),
        };
        let (kind, f) = (keyword("type")?, keyword("f")?);
        let key = match required("key")? {
            Edn::Str(k) => k.clone(),
            Edn::Int(k) => k.to_string(),
            other => return Err(error(format!("`:key {other:?}` is not a string or integer"))),
        };
        let value = match field("value") {
            None | Some(Edn::Nil) => None,
            Some(Edn::Str(v)) => Some(v.clone()),
            Some(other) => return Err(error(format!("`:value {other:?}` is not a string or nil"))),
        };
        match kind {
            "invoke" => {
                let written =
                    || value.clone().ok_or_else(|| error(format!("`:{f}` without a string `:value`")));
                let input = match f {
                    "get" => KvInput::Get { key },
                    "put" => KvInput::Put { key, value: written()? },
                    "append" => KvInput::Append { key, value: written()? },
                    other => {
                        return Err(error(format!("unknown `:f :{other}` (expected :get, :put or :append)")))
                    }
                };
                b.invoke(process, time_ns, input, line).map_err(error)?;
            }
            "ok" | "fail" | "info" => {
                let k = b.close(process).map_err(error)?;
                let op = &mut b.ops[k];
                let invoked = match &op.input {
                    KvInput::Get { .. } => "get",
                    KvInput::Put { .. } => "put",
                    KvInput::Append { .. } => "append",
                };
                if f != invoked || key != op.input.key() {
                    return Err(error(format!(
                        "completes `:{f}` of key {key:?}, but process {process} invoked `:{invoked}` of key {:?}",
                        op.input.key()
                    )));
                }
                match kind {
                    "ok" => {
                        op.output = Some(match &op.input {
                            KvInput::Get { .. } => KvOutput::Value(value.unwrap_or_default()),
                            KvInput::Put { value: v, .. } | KvInput::Append { value: v, .. } => {
                                same_value(value.as_ref(), Some(v)).map_err(error)?;
                                KvOutput::Written
                            }
                        });
                        op.return_ns = Some(time_ns);
                        if time_ns < op.call_ns {
                            return Err(error(format!("completes at :time {time_ns}, before its invoke")));
                        }
                    }
                    "fail" => b.failed[k] = true,
                    _ => {} // :info: outcome unknown
                }
            }
            other => {
                return Err(error(format!(
                    "unknown `:type :{other}` (expected :invoke, :ok, :fail or :info)"
                )))
            }
        }
    }
    Ok((b.finish(), timed == Some(true)))
}

/// One flat EDN map of keywords to nil, integers, keywords and strings.
fn edn_map(line: &str) -> Result<Vec<(String, Edn)>, String> {
    let mut chars = line.trim().chars().peekable();
    let skip = |chars: &mut std::iter::Peekable<std::str::Chars>| {
        while chars.next_if(|c| c.is_whitespace() || *c == ',').is_some() {}
    };
    let word = |chars: &mut std::iter::Peekable<std::str::Chars>| {
        let mut w = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && !matches!(c, ',' | '}' | '{' | '"')) {
            w.push(c);
        }
        w
    };
    if chars.next() != Some('{') {
        return Err("not an EDN map (expected `{`)".into());
    }
    let mut map = Vec::new();
    loop {
        skip(&mut chars);
        match chars.next() {
            Some('}') => break,
            Some(':') => {}
            Some(c) => return Err(format!("expected a keyword, found `{c}`")),
            None => return Err("unterminated map (no `}`)".into()),
        }
        let key = word(&mut chars);
        if key.is_empty() {
            return Err("empty keyword".into());
        }
        skip(&mut chars);
        let value = match chars.peek() {
            Some('"') => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some(c @ ('"' | '\\')) => s.push(c),
                            other => {
                                return Err(format!(
                                    "unsupported escape `\\{}` in :{key}",
                                    other.unwrap_or(' ')
                                ))
                            }
                        },
                        Some(c) => s.push(c),
                        None => return Err(format!("unterminated string in :{key}")),
                    }
                }
                Edn::Str(s)
            }
            Some(':') => {
                chars.next();
                Edn::Keyword(word(&mut chars))
            }
            Some(_) => {
                let w = word(&mut chars);
                if w.is_empty() {
                    return Err(format!("`:{key}` has no value"));
                } else if w == "nil" {
                    Edn::Nil
                } else {
                    Edn::Int(w.parse().map_err(|_| format!("unsupported value `{w}` for :{key}"))?)
                }
            }
            None => return Err(format!("`:{key}` has no value")),
        };
        map.push((key, value));
    }
    skip(&mut chars);
    match chars.next() {
        None => Ok(map),
        Some(c) => Err(format!("unexpected `{c}` after the map")),
    }
}
