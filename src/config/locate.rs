//! Where a TOML error points: the dotted key (`policy.replica_ack_timeout`, `nodes[2].zone`,
//! `variants.incident.policy.write_quorum`) and the value as written, found by scanning the
//! document up to the error's byte offset. Used only to word error messages, so it is lenient:
//! on text it does not understand it still returns a location, with or without a key.

use std::collections::HashMap;
use std::ops::Range;

/// What the error's span starts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A key (e.g. an unknown key): `path` ends with it, `value` is what it is set to.
    Key,
    /// A value: `path` is the key it is assigned to (with `[i]` for array elements).
    Value,
    /// A table header (or inline table): `path` is that table.
    Table,
    /// Anything else (syntax errors between tokens): `path` is the enclosing key, if any.
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Located {
    /// 1-based line and column (in characters) of the span's start.
    pub line: usize,
    pub column: usize,
    pub target: Target,
    /// Dotted key path; empty if none could be determined (or at the document root).
    pub path: Vec<String>,
    /// The value as written, shortened to one line.
    pub value: Option<String>,
}

impl Located {
    pub fn key(&self) -> Option<String> {
        if self.path.is_empty() {
            None
        } else {
            Some(self.path.join("."))
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Key,
    Value,
    AfterValue,
}

/// A container opened by a value: an inline table or an array.
struct Frame {
    /// The key that opened it (empty for an inline table that is an array element).
    key: Vec<String>,
    /// For arrays, the index of the current element.
    index: Option<usize>,
}

const VALUE_MAX_CHARS: usize = 60;

pub(crate) fn locate(text: &str, span: Range<usize>) -> Located {
    let start = floor_char_boundary(text, span.start.min(text.len()));
    let end = floor_char_boundary(text, span.end.clamp(start, text.len()));
    let (line, column) = line_column(text, start);
    let whole_document = start == 0 && end >= text.trim_end().len();
    let mut located = Located { line, column, target: Target::Other, path: Vec::new(), value: None };
    if whole_document {
        located.target = Target::Table;
        return located;
    }

    let b = text.as_bytes();
    let mut header: Vec<String> = Vec::new();
    let mut aot_counts: HashMap<String, usize> = HashMap::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut cur_key: Vec<String> = Vec::new();
    let mut mode = Mode::Key;
    let mut i = 0;
    // The start of the token the span falls in (the span's start, unless it is inside a token).
    let mut at = start;
    // The last scalar value read, for errors just after it (an unterminated string).
    let mut last_value: Option<Range<usize>> = None;

    while i < start {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'\n' => {
                if frames.is_empty() {
                    mode = Mode::Key;
                    cur_key.clear();
                }
                i += 1;
                continue;
            }
            b'#' => {
                i = skip_line(b, i);
                continue;
            }
            _ => {}
        }
        let token_start = i;
        match mode {
            Mode::Key => {
                if c == b'[' && frames.is_empty() {
                    let (segments, aot, next) = parse_header(text, i);
                    i = next;
                    if aot {
                        *aot_counts.entry(segments.join(".")).or_insert(0) += 1;
                    }
                    header = annotate(&segments, &aot_counts);
                    cur_key.clear();
                } else if c == b'}' {
                    cur_key = pop_frame(&mut frames);
                    mode = Mode::AfterValue;
                    i += 1;
                } else if c == b'=' {
                    mode = Mode::Value;
                    i += 1;
                } else {
                    let (key, next) = parse_key(text, i);
                    if next == i {
                        i += 1; // not a key: skip it
                    } else {
                        cur_key = key;
                        i = next;
                    }
                }
            }
            Mode::Value => match c {
                b'[' => {
                    frames.push(Frame { key: std::mem::take(&mut cur_key), index: Some(0) });
                    i += 1;
                }
                b'{' => {
                    frames.push(Frame { key: std::mem::take(&mut cur_key), index: None });
                    mode = Mode::Key;
                    i += 1;
                }
                b']' => {
                    cur_key = pop_frame(&mut frames);
                    mode = Mode::AfterValue;
                    i += 1;
                }
                _ => {
                    i = skip_scalar(b, i);
                    last_value = Some(token_start..i);
                    mode = Mode::AfterValue;
                }
            },
            Mode::AfterValue => {
                match c {
                    b',' => match frames.last_mut() {
                        Some(Frame { index: Some(n), .. }) => {
                            *n += 1;
                            mode = Mode::Value;
                        }
                        Some(_) => {
                            cur_key.clear();
                            mode = Mode::Key;
                        }
                        None => {}
                    },
                    b']' | b'}' => cur_key = pop_frame(&mut frames),
                    _ => {}
                }
                i += 1;
            }
        }
        if i > start {
            // The span starts inside this token: report the token.
            at = token_start;
            break;
        }
    }

    let mut base = header;
    let innermost_is_array = frames.last().is_some_and(|f| f.index.is_some());
    for f in &frames {
        push_segments(&mut base, &f.key);
        if let Some(n) = f.index {
            push_index(&mut base, n);
        }
    }
    let rest = &text[at..];
    match mode {
        Mode::Key if rest.starts_with('[') && frames.is_empty() => {
            let (segments, aot, _) = parse_header(text, at);
            if aot {
                *aot_counts.entry(segments.join(".")).or_insert(0) += 1;
            }
            located.target = Target::Table;
            located.path = annotate(&segments, &aot_counts);
        }
        Mode::Key => {
            let (key, next) = parse_key(text, at);
            if key.is_empty() {
                located.path = base;
            } else {
                located.target = Target::Key;
                push_segments(&mut base, &key);
                located.path = base;
                let after = skip_spaces(b, next);
                if b.get(after) == Some(&b'=') {
                    let v = skip_spaces(b, after + 1);
                    located.value = Some(shorten(&text[v..skip_value(b, v)]));
                }
            }
        }
        Mode::Value => {
            if !innermost_is_array {
                push_segments(&mut base, &cur_key);
            }
            located.path = base;
            if rest.starts_with('{') {
                located.target = Target::Table;
            } else {
                located.target = Target::Value;
                let end = skip_value(b, at).max(end.min(line_end(b, at)));
                located.value = Some(shorten(&text[at..end]));
            }
        }
        Mode::AfterValue => {
            if !innermost_is_array {
                push_segments(&mut base, &cur_key);
            }
            located.path = base;
            if let Some(v) = last_value.filter(|v| !text[v.end..at].contains('\n')) {
                located.value = Some(shorten(&text[v]));
            }
        }
    }
    located
}

fn pop_frame(frames: &mut Vec<Frame>) -> Vec<String> {
    frames.pop().map(|f| f.key).unwrap_or_default()
}

fn push_segments(path: &mut Vec<String>, key: &[String]) {
    path.extend(key.iter().cloned());
}

fn push_index(path: &mut Vec<String>, n: usize) {
    match path.last_mut() {
        Some(last) => last.push_str(&format!("[{n}]")),
        None => path.push(format!("[{n}]")),
    }
}

/// Header segments with the current element index of every array of tables they go through,
/// e.g. `clients.retry` under the second `[[clients]]` as `clients[1]`, `retry`.
fn annotate(segments: &[String], aot_counts: &HashMap<String, usize>) -> Vec<String> {
    let mut out = Vec::new();
    for (n, s) in segments.iter().enumerate() {
        let mut seg = s.clone();
        if let Some(count) = aot_counts.get(&segments[..=n].join(".")) {
            seg.push_str(&format!("[{}]", count.saturating_sub(1)));
        }
        out.push(seg);
    }
    out
}

/// `[a.b]` or `[[a.b]]` at `i`: the segments, whether it is an array of tables, and the
/// offset after it.
fn parse_header(text: &str, i: usize) -> (Vec<String>, bool, usize) {
    let b = text.as_bytes();
    let aot = b.get(i + 1) == Some(&b'[');
    let from = if aot { i + 2 } else { i + 1 };
    let (segments, next) = parse_key(text, skip_spaces(b, from));
    let mut j = skip_spaces(b, next);
    while j < b.len() && b[j] == b']' {
        j += 1;
    }
    (segments, aot, j)
}

/// A dotted key at `i` (bare or quoted segments); empty if there is none.
fn parse_key(text: &str, mut i: usize) -> (Vec<String>, usize) {
    let b = text.as_bytes();
    let mut segments = Vec::new();
    loop {
        let seg_start = i;
        match b.get(i) {
            Some(b'"') | Some(b'\'') => {
                let q = b[i];
                let mut j = i + 1;
                while j < b.len() && b[j] != q && b[j] != b'\n' {
                    if q == b'"' && b[j] == b'\\' {
                        j += 1;
                    }
                    j += 1;
                }
                let inner = &text[(i + 1).min(j)..j.min(text.len())];
                segments.push(format!("\"{inner}\""));
                i = (j + 1).min(b.len());
            }
            Some(c) if is_bare(*c) => {
                let mut j = i;
                while j < b.len() && is_bare(b[j]) {
                    j += 1;
                }
                segments.push(text[i..j].to_string());
                i = j;
            }
            _ => {
                if segments.is_empty() {
                    return (segments, seg_start);
                }
                break;
            }
        }
        let j = skip_spaces(b, i);
        if b.get(j) == Some(&b'.') {
            i = skip_spaces(b, j + 1);
        } else {
            break;
        }
    }
    (segments, i)
}

fn is_bare(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    i
}

fn skip_line(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] != b'\n' {
        i += 1;
    }
    i
}

fn line_end(b: &[u8], i: usize) -> usize {
    let mut e = skip_line(b, i);
    if e > i && b[e - 1] == b'\r' {
        e -= 1;
    }
    e
}

/// One scalar (string of any kind, number, boolean, date) starting at `i`; an unterminated
/// string ends at the end of its line.
fn skip_scalar(b: &[u8], i: usize) -> usize {
    match b[i] {
        q @ (b'"' | b'\'') => {
            let triple = b.len() >= i + 3 && b[i + 1] == q && b[i + 2] == q;
            if triple {
                let mut j = i + 3;
                while j < b.len() {
                    if q == b'"' && b[j] == b'\\' {
                        j += 2;
                        continue;
                    }
                    if b.len() >= j + 3 && b[j] == q && b[j + 1] == q && b[j + 2] == q {
                        return j + 3;
                    }
                    j += 1;
                }
                b.len()
            } else {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'\n' {
                    if q == b'"' && b[j] == b'\\' {
                        j += 2;
                        continue;
                    }
                    if b[j] == q {
                        return j + 1;
                    }
                    j += 1;
                }
                line_end(b, i)
            }
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b']' | b'}' | b'#' | b'\n' | b'\r') {
                j += 1;
            }
            // Trailing spaces are not part of the value.
            while j > i && (b[j - 1] == b' ' || b[j - 1] == b'\t') {
                j -= 1;
            }
            j.max(i + 1).min(b.len())
        }
    }
}

/// A whole value starting at `i`: a scalar, or an array or inline table with what it holds.
fn skip_value(b: &[u8], i: usize) -> usize {
    if i >= b.len() {
        return i;
    }
    if b[i] != b'[' && b[i] != b'{' {
        return skip_scalar(b, i);
    }
    let mut depth = 0usize;
    let mut j = i;
    while j < b.len() {
        match b[j] {
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j + 1;
                }
            }
            b'"' | b'\'' => {
                j = skip_scalar(b, j);
                continue;
            }
            b'#' => {
                j = skip_line(b, j);
                continue;
            }
            _ => {}
        }
        j += 1;
    }
    b.len()
}

/// The value as written, on one line and at most a few dozen characters.
fn shorten(raw: &str) -> String {
    let first_line = raw.lines().next().unwrap_or("").trim_end();
    let more_lines = raw.trim_end().contains('\n');
    let mut out: String = first_line.chars().take(VALUE_MAX_CHARS).collect();
    if more_lines || first_line.chars().count() > VALUE_MAX_CHARS {
        out.push('…');
    }
    out
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|n| n + 1).unwrap_or(0);
    (line, text[line_start..offset].chars().count() + 1)
}

/// The line of `offset` with carets under the span (its first line only), as rustc and toml
/// print them.
pub(crate) fn snippet(text: &str, span: Range<usize>) -> String {
    let start = floor_char_boundary(text, span.start.min(text.len()));
    let end = floor_char_boundary(text, span.end.clamp(start, text.len()));
    let (line, column) = line_column(text, start);
    let line_start = text[..start].rfind('\n').map(|n| n + 1).unwrap_or(0);
    let line_end = line_end(text.as_bytes(), start).max(start);
    let line_text = text[line_start..line_end].replace('\t', " ");
    let width = text[start..end.min(line_end)].chars().count().max(1);
    let gutter = " ".repeat(line.to_string().len());
    format!("{gutter} |\n{line} | {line_text}\n{gutter} | {}{}", " ".repeat(column - 1), "^".repeat(width))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, needle: &str) -> Located {
        let i = text.find(needle).expect("needle in text");
        locate(text, i..i + needle.len())
    }

    const DOC: &str = r#"# comment
name = "x"
tick = "100ms"

[[nodes]]
name = "n1"
zone = "a"

[[nodes]]
name = "n2"
zone = "d"

[policy]
replica_ack_timout = "1s"
suspect_after = "-5s"

[variants.w1]
policy = { write_quorum = 1, backof = "fixed" }
expect = { linearizable = "hold" }

[[clients]]
ops = ["write",
  "writ"]
"#;

    #[test]
    fn keys_and_values() {
        let l = at(DOC, "replica_ack_timout");
        assert_eq!(l.target, Target::Key);
        assert_eq!(l.key().unwrap(), "policy.replica_ack_timout");
        assert_eq!(l.value.as_deref(), Some("\"1s\""));
        assert_eq!((l.line, l.column), (14, 1));

        let l = at(DOC, "\"-5s\"");
        assert_eq!(l.target, Target::Value);
        assert_eq!(l.key().unwrap(), "policy.suspect_after");
        assert_eq!(l.value.as_deref(), Some("\"-5s\""));

        let l = at(DOC, "\"d\"");
        assert_eq!(l.key().unwrap(), "nodes[1].zone");

        let l = at(DOC, "backof");
        assert_eq!(l.key().unwrap(), "variants.w1.policy.backof");
        assert_eq!(l.value.as_deref(), Some("\"fixed\""));

        let l = at(DOC, "\"hold\"");
        assert_eq!(l.key().unwrap(), "variants.w1.expect.linearizable");

        let l = at(DOC, "\"writ\"");
        assert_eq!(l.key().unwrap(), "clients[0].ops[1]");
        assert_eq!(l.value.as_deref(), Some("\"writ\""));
    }

    #[test]
    fn tables_and_unterminated_strings() {
        let i = DOC.find("[policy]").unwrap();
        let l = locate(DOC, i..i + 20);
        assert_eq!(l.target, Target::Table);
        assert_eq!(l.key().unwrap(), "policy");

        let l = locate(DOC, 0..DOC.len());
        assert_eq!(l.target, Target::Table);
        assert!(l.path.is_empty());

        let text = "[policy]\nreplica_ack_timeout = \"1s\nx = 1\n";
        let i = text.find("1s").unwrap() + 2;
        let l = locate(text, i..i + 1);
        assert_eq!(l.key().unwrap(), "policy.replica_ack_timeout");
        assert_eq!(l.value.as_deref(), Some("\"1s"));
    }

    #[test]
    fn snippet_points_at_the_span() {
        let text = "a = 1\nwrite_quorum = \"2\"\n";
        let i = text.find("\"2\"").unwrap();
        assert_eq!(snippet(text, i..i + 3), "  |\n2 | write_quorum = \"2\"\n  |                ^^^");
    }
}
