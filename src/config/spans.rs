//! Where a TOML error points, from the parser's spans: the error's span (from `toml`'s
//! deserializer) is looked up in the document as `toml_edit` parsed it, with the span of every
//! key, value and table header, to name the dotted key (`policy.replica_ack_timeout`,
//! `nodes[2].zone`, `variants.incident.policy.write_quorum`) and the value as written. A
//! document that does not parse (a syntax error) has no keys to name: only its line and column.

use std::ops::Range;
use toml_edit::{Item, Key, TableLike, Value};

/// The longest value quoted in a message, in characters.
const VALUE_MAX_CHARS: usize = 40;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Located {
    /// 1-based line and column (in characters) of the span's start.
    pub line: usize,
    pub column: usize,
    /// Dotted key path, `[i]` for an element of an array; `None` at the root or when the
    /// document does not parse.
    pub key: Option<String>,
    /// The value as written, shortened to one line.
    pub value: Option<String>,
}

/// What the span starting at `at` lies in, found by descending the document.
struct Hit {
    key: String,
    value: Option<String>,
}

fn contains(span: Option<Range<usize>>, at: usize) -> bool {
    span.is_some_and(|s| s.start <= at && (at < s.end || s.is_empty() && at == s.start))
}

fn joined(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
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

fn written(text: &str, span: Option<Range<usize>>) -> Option<String> {
    span.and_then(|s| text.get(s)).map(shorten)
}

/// In a table (or inline table), the key, value or table header the offset `at` is on.
fn in_table(table: &dyn TableLike, prefix: &str, at: usize, text: &str) -> Option<Hit> {
    for (name, item) in table.iter() {
        let key: Option<&Key> = table.get_key_value(name).map(|(k, _)| k);
        let path = joined(prefix, name);
        if contains(key.and_then(Key::span), at) {
            let value = item.as_value().and_then(|v| written(text, v.span()));
            return Some(Hit { key: path, value });
        }
        let hit = match item {
            Item::Value(v) if contains(v.span(), at) => Some(in_value(v, path, at, text)),
            // A table's span runs from its header over its keys: what it holds first.
            Item::Table(t) => in_table(t, &path, at, text)
                .or_else(|| contains(t.span(), at).then_some(Hit { key: path, value: None })),
            Item::ArrayOfTables(tables) => tables.iter().enumerate().find_map(|(i, t)| {
                let path = format!("{path}[{i}]");
                in_table(t, &path, at, text)
                    .or_else(|| contains(t.span(), at).then_some(Hit { key: path, value: None }))
            }),
            _ => None,
        };
        if hit.is_some() {
            return hit;
        }
    }
    None
}

/// In a value known to hold `at`: the innermost element or inline-table entry that does.
fn in_value(value: &Value, path: String, at: usize, text: &str) -> Hit {
    let inner = match value {
        Value::InlineTable(t) => in_table(t, &path, at, text),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find(|(_, v)| contains(v.span(), at))
            .map(|(i, v)| in_value(v, format!("{path}[{i}]"), at, text)),
        _ => None,
    };
    inner.unwrap_or_else(|| Hit { key: path, value: written(text, value.span()) })
}

/// The table whose header starts last in `table` (at or under `prefix`), with its start.
fn last_header(table: &dyn TableLike, prefix: &str, best: &mut Option<(usize, String)>) {
    let mut consider = |t: &toml_edit::Table, path: String| {
        if let Some(start) = t.span().map(|s| s.start) {
            if best.as_ref().is_none_or(|(b, _)| start >= *b) {
                *best = Some((start, path.clone()));
            }
        }
        last_header(t, &path, best);
    };
    for (name, item) in table.iter() {
        let path = joined(prefix, name);
        match item {
            Item::Table(t) => consider(t, path),
            Item::ArrayOfTables(tables) => {
                for (i, t) in tables.iter().enumerate() {
                    consider(t, format!("{path}[{i}]"));
                }
            }
            _ => {}
        }
    }
}

/// For a document that does not parse (a syntax error at `at`): the `key = value` on the
/// error's line, in the table of the last header before that line (from the text before it,
/// which does parse).
fn on_line(text: &str, at: usize) -> Option<Hit> {
    let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |n| at + n);
    let (key, value) = text[line_start..line_end].split_once('=')?;
    let key: Vec<String> = Key::parse(key.trim()).ok()?.iter().map(|k| k.get().to_string()).collect();
    let before = toml_edit::ImDocument::parse(&text[..line_start]).ok()?;
    let mut table = None;
    last_header(before.as_table(), "", &mut table);
    let prefix = table.map(|(_, path)| path).unwrap_or_default();
    Some(Hit { key: joined(&prefix, &key.join(".")), value: Some(shorten(value.trim())) })
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|n| n + 1).unwrap_or(0);
    (line, text[line_start..offset].chars().count() + 1)
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Where `span` (from an error on `text`) starts: its line and column and, when the document
/// parses, the key it is on and that key's value as written.
pub(crate) fn locate(text: &str, span: Range<usize>) -> Located {
    let at = floor_char_boundary(text, span.start.min(text.len()));
    let (line, column) = line_column(text, at);
    let hit = match toml_edit::ImDocument::parse(text) {
        Ok(doc) => in_table(doc.as_table(), "", at, text),
        Err(_) => on_line(text, at),
    };
    Located { line, column, key: hit.as_ref().map(|h| h.key.clone()), value: hit.and_then(|h| h.value) }
}

/// The line of `span`'s start with carets under the span (its first line only), as rustc and
/// toml print them.
pub(crate) fn snippet(text: &str, span: Range<usize>) -> String {
    let start = floor_char_boundary(text, span.start.min(text.len()));
    let end = floor_char_boundary(text, span.end.clamp(start, text.len()));
    let (line, column) = line_column(text, start);
    let line_start = text[..start].rfind('\n').map(|n| n + 1).unwrap_or(0);
    let line_end = text[start..].find('\n').map_or(text.len(), |n| start + n);
    let line_text = text[line_start..line_end].trim_end_matches('\r').replace('\t', " ");
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
        assert_eq!(l.key.as_deref(), Some("policy.replica_ack_timout"));
        assert_eq!(l.value.as_deref(), Some("\"1s\""));
        assert_eq!((l.line, l.column), (14, 1));

        let l = at(DOC, "\"-5s\"");
        assert_eq!(l.key.as_deref(), Some("policy.suspect_after"));
        assert_eq!(l.value.as_deref(), Some("\"-5s\""));

        assert_eq!(at(DOC, "\"d\"").key.as_deref(), Some("nodes[1].zone"));

        let l = at(DOC, "backof");
        assert_eq!(l.key.as_deref(), Some("variants.w1.policy.backof"));
        assert_eq!(l.value.as_deref(), Some("\"fixed\""));

        assert_eq!(at(DOC, "\"hold\"").key.as_deref(), Some("variants.w1.expect.linearizable"));

        let l = at(DOC, "\"writ\"");
        assert_eq!(l.key.as_deref(), Some("clients[0].ops[1]"));
        assert_eq!(l.value.as_deref(), Some("\"writ\""));
    }

    #[test]
    fn tables_and_syntax_errors() {
        let i = DOC.find("[policy]").unwrap();
        assert_eq!(locate(DOC, i..i + 20).key.as_deref(), Some("policy"));
        let i = DOC.find("[[clients]]").unwrap();
        assert_eq!(locate(DOC, i..i + 5).key.as_deref(), Some("clients[0]"));

        // In text that does not parse, the key on the error's line, in its table.
        let text = "[[nodes]]\nzone = \"a\"\n[[nodes]]\n[policy]\nreplica_ack_timeout = \"1s\nx = 1\n";
        let i = text.find("1s").unwrap() + 2;
        let l = locate(text, i..i + 1);
        assert_eq!((l.line, l.column), (5, 26));
        assert_eq!(l.key.as_deref(), Some("policy.replica_ack_timeout"));
        assert_eq!(l.value.as_deref(), Some("\"1s"));
        let text = "[[nodes]]\n[[nodes]]\nzone = 'a\n";
        assert_eq!(at(text, "'a").key.as_deref(), Some("nodes[1].zone"));
    }

    #[test]
    fn snippet_points_at_the_span() {
        let text = "a = 1\nwrite_quorum = \"2\"\n";
        let i = text.find("\"2\"").unwrap();
        assert_eq!(snippet(text, i..i + 3), "  |\n2 | write_quorum = \"2\"\n  |                ^^^");
    }
}
