//! Jepsen's register histories as Knossos's `cas-register` model reads them: an EDN vector or
//! list of operation maps (or the maps one after another, as Jepsen's `history.edn`), with
//! `;` comments, `:f` one of `:read`, `:write` and `:cas` on a single register, `:type` one of
//! `:invoke`, `:ok`, `:fail` and `:info`, and any other keys (`:time`, `:index`, `:error`)
//! ignored.
//!
//! Knossos's semantics: the register starts at the initial value (0 unless told otherwise); a
//! `:cas` carries `[old new]` and sets `new` only if the value is `old`; an `:ok` read of `nil`
//! matches any value (it constrains nothing and changes nothing, so it is left out); `:fail`
//! did not happen; `:info`, or an invoke never completed, may or may not have happened; an
//! operation of a process that is not an integer (the nemesis) is not a client's and is left
//! out. The file's order is the real-time order.

use super::parse::ParseError;
use super::register::{RegisterInput, RegisterOutput};
use super::Operation;
use std::collections::HashMap;

/// An EDN value, as far as these histories use EDN.
#[derive(Clone, Debug, PartialEq)]
enum Edn {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Keyword(String),
    Str(String),
    Symbol(String),
    /// A vector, list or set.
    Seq(Vec<Edn>),
    Map(Vec<(Edn, Edn)>),
}

impl Edn {
    fn show(&self) -> String {
        match self {
            Edn::Nil => "nil".into(),
            Edn::Bool(b) => b.to_string(),
            Edn::Int(n) => n.to_string(),
            Edn::Float(x) => x.to_string(),
            Edn::Keyword(k) => format!(":{k}"),
            Edn::Str(s) => format!("{s:?}"),
            Edn::Symbol(s) => s.clone(),
            Edn::Seq(items) => format!("[{}]", items.iter().map(Edn::show).collect::<Vec<_>>().join(" ")),
            Edn::Map(_) => "{...}".into(),
        }
    }
}

/// A reader over the text that knows its line.
struct Reader<'a> {
    text: &'a str,
    at: usize,
    line: usize,
}

impl Reader<'_> {
    fn error(&self, line: usize, message: String) -> ParseError {
        let text = self.text.lines().nth(line.saturating_sub(1)).unwrap_or("").to_owned();
        ParseError { line, text, message }
    }

    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    /// Skip whitespace, commas and `;` comments.
    fn skip(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() || c == ',' {
                self.bump();
            } else if c == ';' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else {
                break;
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Edn, ParseError> {
        if depth > 64 {
            return Err(self.error(self.line, "nested too deeply".into()));
        }
        self.skip();
        let line = self.line;
        let Some(c) = self.peek() else {
            return Err(self.error(line, "unexpected end of the file".into()));
        };
        match c {
            '[' | '(' => {
                self.bump();
                Ok(Edn::Seq(self.items(if c == '[' { ']' } else { ')' }, depth)?))
            }
            '#' if self.text[self.at..].starts_with("#{") => {
                self.at += 2;
                Ok(Edn::Seq(self.items('}', depth)?))
            }
            '#' if self.text[self.at..].starts_with("#_") => {
                // A discarded form, then the value that follows it.
                self.at += 2;
                self.value(depth + 1)?;
                self.value(depth)
            }
            '#' => {
                // A tagged literal (`#jepsen.history.Op{...}`, `#inst "..."`): its form.
                while self.peek().is_some_and(|c| !c.is_whitespace() && !"[](){},;\"".contains(c)) {
                    self.bump();
                }
                self.value(depth + 1)
            }
            '{' => {
                self.bump();
                let items = self.items('}', depth)?;
                if items.len() % 2 != 0 {
                    return Err(self.error(line, "a map with an odd number of forms".into()));
                }
                let mut pairs = Vec::with_capacity(items.len() / 2);
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Ok(Edn::Map(pairs))
            }
            '"' => {
                self.bump();
                let mut s = String::new();
                loop {
                    match self.bump() {
                        Some('"') => break,
                        Some('\\') => match self.bump() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some(c) => s.push(c),
                            None => return Err(self.error(line, "unterminated string".into())),
                        },
                        Some(c) => s.push(c),
                        None => return Err(self.error(line, "unterminated string".into())),
                    }
                }
                Ok(Edn::Str(s))
            }
            ']' | ')' | '}' => Err(self.error(line, format!("unexpected `{c}`"))),
            _ => {
                let start = self.at;
                while self.peek().is_some_and(|c| !c.is_whitespace() && !"[](){},;\"".contains(c)) {
                    self.bump();
                }
                let word = &self.text[start..self.at];
                Ok(if let Some(k) = word.strip_prefix(':') {
                    Edn::Keyword(k.to_owned())
                } else if word == "nil" {
                    Edn::Nil
                } else if word == "true" || word == "false" {
                    Edn::Bool(word == "true")
                } else if let Ok(n) = word.trim_end_matches('N').parse::<i64>() {
                    Edn::Int(n)
                } else if let Ok(x) = word.trim_end_matches('M').parse::<f64>() {
                    Edn::Float(x)
                } else {
                    Edn::Symbol(word.to_owned())
                })
            }
        }
    }

    /// The forms up to `close`, which is consumed.
    fn items(&mut self, close: char, depth: usize) -> Result<Vec<Edn>, ParseError> {
        let line = self.line;
        let mut items = Vec::new();
        loop {
            self.skip();
            match self.peek() {
                Some(c) if c == close => {
                    self.bump();
                    return Ok(items);
                }
                None => return Err(self.error(line, format!("unterminated form: no closing `{close}`"))),
                _ => items.push(self.value(depth + 1)?),
            }
        }
    }
}

/// Does the text look like a Knossos register history: its first form a vector or list, or
/// maps with a `:read`, `:write` or `:cas` `:f` and no `:key` in the first lines?
pub fn looks_like(text: &str) -> bool {
    let mut r = Reader { text, at: 0, line: 1 };
    r.skip();
    match r.peek() {
        Some('[' | '(') => true,
        Some('{' | '#') => {
            // The first lines (a nemesis op may come first): register ops and no `:key`.
            let head: Vec<&str> = text[r.at..].lines().take(20).collect();
            let register =
                |l: &&str| [":read", ":write", ":cas"].iter().any(|f| l.contains(&format!(":f {f}")));
            !head.iter().any(|l| l.contains(":key")) && head.iter().any(register)
        }
        _ => false,
    }
}

/// One event: its line, and the operation map.
struct Event {
    line: usize,
    map: Vec<(Edn, Edn)>,
}

fn events(text: &str) -> Result<Vec<Event>, ParseError> {
    let mut r = Reader { text, at: 0, line: 1 };
    let mut out = Vec::new();
    let mut push = |r: &Reader, line: usize, form: Edn| match form {
        Edn::Map(map) => {
            out.push(Event { line, map });
            Ok(())
        }
        other => Err(r.error(line, format!("expected an operation map, found `{}`", other.show()))),
    };
    r.skip();
    let wrapped = matches!(r.peek(), Some('[' | '('));
    if wrapped {
        let close = if r.bump() == Some('[') { ']' } else { ')' };
        let start = r.line;
        loop {
            r.skip();
            match r.peek() {
                Some(c) if c == close => {
                    r.bump();
                    break;
                }
                None => return Err(r.error(start, format!("the history has no closing `{close}`"))),
                _ => {
                    let line = r.line;
                    let form = r.value(1)?;
                    push(&r, line, form)?;
                }
            }
        }
        r.skip();
        if r.peek().is_some() {
            return Err(r.error(r.line, "text after the history's closing bracket".into()));
        }
    } else {
        loop {
            r.skip();
            if r.peek().is_none() {
                break;
            }
            let line = r.line;
            let form = r.value(0)?;
            push(&r, line, form)?;
        }
    }
    Ok(out)
}

/// A register value: `nil` (absent) or a non-negative integer.
fn value(v: &Edn) -> Result<Option<u64>, String> {
    match v {
        Edn::Nil => Ok(None),
        Edn::Int(n) if *n >= 0 => Ok(Some(*n as u64)),
        other => Err(format!("value `{}` is neither nil nor a non-negative integer", other.show())),
    }
}

/// A cas's `[old new]`.
fn pair(v: &Edn) -> Result<(Option<u64>, Option<u64>), String> {
    match v {
        Edn::Seq(items) if items.len() == 2 => Ok((value(&items[0])?, value(&items[1])?)),
        other => Err(format!("cas value `{}` is not `[old new]`", other.show())),
    }
}

/// Parse a Knossos `cas-register` history. Times are line numbers when every event has a line
/// of its own, else the events' positions (1-based); the flag says which. The register's start
/// value `initial` becomes a write completed before the first event (time 0), so the history's
/// own times start at 1.
pub fn cas_register(
    text: &str,
    initial: Option<u64>,
) -> Result<(Vec<Operation<RegisterInput, RegisterOutput>>, bool), ParseError> {
    let events = events(text)?;
    let by_line = events.windows(2).all(|w| w[0].line != w[1].line);
    let mut ops: Vec<Operation<RegisterInput, RegisterOutput>> = vec![Operation {
        client: 0,
        call_ns: 0,
        return_ns: Some(0),
        input: RegisterInput::Write(initial),
        output: Some(RegisterOutput::WriteOk),
    }];
    // Left out: failed operations, and reads with nothing to say.
    let mut dropped = vec![false];
    // Process -> its open operation and the line that invoked it.
    let mut open: HashMap<u64, (usize, usize)> = HashMap::new();
    for (n, e) in events.iter().enumerate() {
        let error = |message: String| {
            let text = text.lines().nth(e.line - 1).unwrap_or("").to_owned();
            ParseError { line: e.line, text, message }
        };
        let field = |name: &str| e.map.iter().find(|(k, _)| *k == Edn::Keyword(name.into())).map(|(_, v)| v);
        let keyword = |name: &str| match field(name) {
            Some(Edn::Keyword(k)) => Ok(k.as_str()),
            Some(other) => Err(error(format!("`:{name} {}` is not a keyword", other.show()))),
            None => Err(error(format!("missing `:{name}`"))),
        };
        let process = match field("process") {
            Some(Edn::Int(p)) if *p >= 0 => *p as u64,
            // The nemesis and other non-client processes: not operations on the register.
            Some(Edn::Keyword(_) | Edn::Symbol(_)) => continue,
            Some(other) => {
                return Err(error(format!("`:process {}` is not a non-negative integer", other.show())))
            }
            None => return Err(error("missing `:process`".into())),
        };
        let (kind, f) = (keyword("type")?, keyword("f")?);
        let v = field("value").unwrap_or(&Edn::Nil);
        let time = if by_line { e.line as u64 } else { n as u64 + 1 };
        match kind {
            "invoke" => {
                if let Some(&(_, invoked_at)) = open.get(&process) {
                    return Err(error(format!(
                        "process {process} invokes an operation while its operation from line {invoked_at} is still open"
                    )));
                }
                let input = match f {
                    "read" => RegisterInput::Read,
                    "write" => RegisterInput::Write(value(v).map_err(error)?),
                    "cas" => {
                        let (from, to) = pair(v).map_err(error)?;
                        RegisterInput::Cas { from, to }
                    }
                    other => {
                        return Err(error(format!("unknown `:f :{other}` (expected :read, :write or :cas)")))
                    }
                };
                open.insert(process, (ops.len(), e.line));
                ops.push(Operation { client: process, call_ns: time, return_ns: None, input, output: None });
                dropped.push(false);
            }
            "ok" | "fail" | "info" => {
                let Some((k, _)) = open.remove(&process) else {
                    return Err(error(format!("process {process} completes an operation it never invoked")));
                };
                let invoked = match ops[k].input {
                    RegisterInput::Read => "read",
                    RegisterInput::Write(_) => "write",
                    RegisterInput::Cas { .. } => "cas",
                };
                if f != invoked {
                    return Err(error(format!(
                        "completes a `:{f}`, but process {process} invoked a `:{invoked}`"
                    )));
                }
                let read = matches!(ops[k].input, RegisterInput::Read);
                match kind {
                    "fail" => dropped[k] = true,
                    "info" => dropped[k] = read,
                    _ => {
                        let output = match ops[k].input {
                            RegisterInput::Read => match value(v).map_err(error)? {
                                None => {
                                    dropped[k] = true;
                                    continue;
                                }
                                some => RegisterOutput::Read(some),
                            },
                            RegisterInput::Write(_) => RegisterOutput::WriteOk,
                            RegisterInput::Cas { .. } => RegisterOutput::CasOk,
                        };
                        ops[k].output = Some(output);
                        ops[k].return_ns = Some(time);
                    }
                }
            }
            other => {
                return Err(error(format!(
                    "unknown `:type :{other}` (expected :invoke, :ok, :fail or :info)"
                )))
            }
        }
    }
    // A read never completed has no effect: left out as well.
    for &(k, _) in open.values() {
        if matches!(ops[k].input, RegisterInput::Read) {
            dropped[k] = true;
        }
    }
    // The start value's writer: a process of its own.
    ops[0].client = ops.iter().skip(1).map(|op| op.client + 1).max().unwrap_or(0);
    let ops = ops.into_iter().zip(dropped).filter(|(_, d)| !d).map(|(op, _)| op).collect();
    Ok((ops, by_line))
}

/// What [`generate`] writes: a cas-register history whose verdict is known by construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub clients: usize,
    pub ops: usize,
    /// Clients whose operation at some point never completes (`:info`); they continue as a
    /// new process.
    pub crashes: usize,
    /// Add one late read of a value overwritten before the read was called: not linearizable.
    pub stale_read: bool,
    pub seed: u64,
}

/// One planned operation; `effect` is when it takes effect, if ever.
struct Planned {
    process: u64,
    call: u64,
    ret: Option<u64>,
    effect: Option<u64>,
    f: &'static str,
    /// A write's value, a cas's new value.
    value: u64,
}

/// A Knossos cas-register history (register starting at 0) as an EDN vector with `:time`s.
/// Operations take effect at a point inside their interval and their outputs come from
/// applying the effects in time order; written and cas'd values are unique, so the value a
/// read returns names the operation that set it. A cas compares with the value current at its
/// effect half of the time (it succeeds) and with a value never written otherwise (`:fail`). A
/// crashed operation takes effect with probability 1/2, at any time after its call. The stale
/// read returns the value a completed write W overwrote, called after W returned, where that
/// value was set by an operation completed before W was called (or is the start value): every
/// linearization has that operation, then W, then the read, and no value repeats, so nothing
/// explains it.
pub fn generate(spec: &Spec) -> String {
    let mut rng = spec.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut below = |n: u64| {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    };
    let clients = spec.clients.max(1);
    let per_client = spec.ops.div_ceil(clients);
    let mut plan: Vec<Planned> = Vec::new();
    let mut next_process = clients as u64;
    for c in 0..clients {
        let crash_at = (c < spec.crashes).then(|| below(per_client as u64) as usize);
        let mut process = c as u64;
        let mut free = below(50);
        for i in 0..per_client {
            if plan.len() >= spec.ops {
                break;
            }
            let call = free + 1 + below(10);
            let duration = 5 + below(40);
            let f = ["read", "read", "write", "cas", "cas"][below(5) as usize];
            let value = plan.len() as u64 + 1;
            if crash_at == Some(i) {
                let effect = (below(2) == 0).then(|| call + 1 + below(400));
                plan.push(Planned { process, call, ret: None, effect, f, value });
                process = next_process;
                next_process += 1;
                free = call + 100 + below(100);
                continue;
            }
            let effect = Some(call + 1 + below(duration - 1));
            plan.push(Planned { process, call, ret: Some(call + duration), effect, f, value });
            free = call + duration;
        }
    }
    // Apply the effects in time order: each op's outcome, and for writes that took effect the
    // value before them and the op that set it (None: the start value).
    let mut order: Vec<usize> = (0..plan.len()).filter(|&i| plan[i].effect.is_some()).collect();
    order.sort_by_key(|&i| (plan[i].effect, i));
    let mut state = 0u64;
    let mut set_by: Option<usize> = None;
    // Per op: (read value | cas old, succeeded), and for a write that took effect its "before".
    let mut outcome: Vec<(u64, bool)> = plan.iter().map(|_| (0, false)).collect();
    let mut before: Vec<Option<(u64, Option<usize>)>> = vec![None; plan.len()];
    for &i in &order {
        match plan[i].f {
            "read" => outcome[i] = (state, true),
            "write" => {
                before[i] = Some((state, set_by));
                state = plan[i].value;
                set_by = Some(i);
                outcome[i] = (0, true);
            }
            _ => {
                if below(2) == 0 {
                    before[i] = Some((state, set_by));
                    outcome[i] = (state, true);
                    state = plan[i].value;
                    set_by = Some(i);
                } else {
                    // A value no operation writes: the compare fails.
                    outcome[i] = (1_000_000 + plan[i].value, false);
                }
            }
        }
    }
    // A cas that never took effect (crashed, not applied) still shows some compare value.
    for (i, p) in plan.iter().enumerate() {
        if p.f == "cas" && p.effect.is_none() {
            outcome[i] = (1_000_000 + p.value, false);
        }
    }
    if spec.stale_read {
        let mut calls: Vec<u64> = plan.iter().map(|p| p.call).collect();
        calls.sort_unstable();
        let late = calls[calls.len() * 9 / 10];
        let w = (0..plan.len())
            .filter(|&i| {
                let (Some(ret), Some((_, lead))) = (plan[i].ret, before[i]) else { return false };
                ret + 20 < late && lead.is_none_or(|l| plan[l].ret.is_some_and(|r| r < plan[i].call))
            })
            .max_by_key(|&i| plan[i].ret);
        if let Some(w) = w {
            let stale = before[w].expect("a write").0;
            plan.push(Planned {
                process: next_process,
                call: late,
                ret: Some(late + 15),
                effect: None,
                f: "read",
                value: 0,
            });
            outcome.push((stale, true));
        }
    }
    // Events: invokes before completions at the same time.
    // A crashed operation's `:info` comes at the end.
    let end = plan.iter().map(|q| q.ret.unwrap_or(q.call)).max().unwrap_or(0) + 1;
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (i, p) in plan.iter().enumerate() {
        events.push((p.call, false, i));
        events.push((p.ret.unwrap_or(end), true, i));
    }
    events.sort_unstable();
    let mut out = String::from("[");
    for (n, (time, done, i)) in events.into_iter().enumerate() {
        let p = &plan[i];
        let (cas_old, ok) = outcome[i];
        let kind = match (done, p.ret.is_some(), p.f, ok) {
            (false, ..) => "invoke",
            (true, false, ..) => "info",
            (true, true, "cas", false) => "fail",
            _ => "ok",
        };
        let value = match (p.f, kind) {
            ("read", "ok") => cas_old.to_string(),
            ("read", _) => "nil".into(),
            ("write", _) => p.value.to_string(),
            _ => format!("[{cas_old} {}]", p.value),
        };
        if n > 0 {
            out.push_str("\n ");
        }
        out.push_str(&format!(
            "{{:process {}, :type :{kind}, :f :{}, :value {value}, :time {time}}}",
            p.process, p.f
        ));
    }
    out.push_str("]\n");
    out
}
