//! Scenario and policy files: raw TOML (serde, unknown keys rejected), then validated,
//! typed values in ticks. Every error names the file, the key and the value.

pub mod duration;
pub mod keys;
pub mod policy;
mod resolved;
mod scenario;
pub mod setting;
mod spans;

pub use duration::{Dur, LatencyRange};
pub use policy::{Policy, PolicyPatch, RolloutOrder, RolloutPlan, SourcedPolicy};
pub use resolved::{reload_changes, Resolved, Rollout};
pub use scenario::*;

use std::fmt;
use std::path::{Path, PathBuf};

/// A problem with a user's file: always reported with the file's path, exit code 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display().to_string();
        // Messages about a policy key already start with where the key was set
        // ("models/x.toml [policy]: key ..."): do not name the same file twice.
        let named = self.message.strip_prefix(&path).is_some_and(|rest| {
            // "file.jsonl:12: ..." names a line of the file.
            let line_number =
                rest.strip_prefix(':').is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
            rest.starts_with(" [") || rest.starts_with(": ") || line_number
        });
        if named {
            f.write_str(&self.message)
        } else {
            write!(f, "{path}: {}", self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    pub fn new(path: &Path, message: impl Into<String>) -> ConfigError {
        ConfigError { path: path.to_path_buf(), message: message.into() }
    }
}

/// Read a file, naming it in the error.
pub fn read_file(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::new(path, format!("cannot read file: {e}")))
}

/// Parse TOML into `T`. Errors give the line and column, the dotted key (`policy.write_quorum`,
/// `nodes[2].zone`) and the value as written, then the line itself, and for an unknown key or
/// value the closest known one:
///
/// ```text
/// line 53, column 1: key `policy.replica_ack_timout` = "1s": unknown key `replica_ack_timout`, expected one of ...
///    |
/// 53 | replica_ack_timout = "1s"
///    | ^^^^^^^^^^^^^^^^^^
/// help: did you mean `replica_ack_timeout`?
/// ```
pub fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        // A key is top-level if a document of that key alone does not call it unknown.
        let top_level = |key: &str, value: &str| {
            toml::from_str::<T>(&format!("{key} = {value}"))
                .err()
                .is_none_or(|e| !e.message().contains(&format!("unknown field `{key}`")))
        };
        ConfigError::new(path, toml_message(text, &e, &top_level))
    })
}

/// For an unknown key inside a table that is a top-level key of the document (written after a
/// table header, TOML puts it in that table): the hint that top-level keys come first.
fn misplaced_hint(
    key: Option<&str>,
    value: Option<&str>,
    raw: &str,
    top_level: &dyn Fn(&str, &str) -> bool,
) -> Option<String> {
    let (table, name) = key?.rsplit_once('.')?;
    let unknown = raw.strip_prefix("unknown field `")?.split('`').next()?;
    // `nodes[2]` is the third `[[nodes]]`.
    let header = match table.split_once('[') {
        Some((array, _)) => format!("[[{array}]]"),
        None => format!("[{table}]"),
    };
    (unknown == name && top_level(name, value.unwrap_or("0"))).then(|| {
        format!("help: `{name}` is a top-level key, but written after `{header}` it belongs to that table: move it above the first table")
    })
}

fn toml_message(text: &str, e: &toml::de::Error, top_level: &dyn Fn(&str, &str) -> bool) -> String {
    let raw = e.message().trim();
    let hint = did_you_mean(raw);
    let message = plain_words(&raw.lines().collect::<Vec<_>>().join(": "));
    let Some(span) = e.span() else {
        let mut out = e.to_string().trim_end().to_string();
        if let Some(hint) = hint {
            out.push_str(&format!("\n{hint}"));
        }
        return out;
    };
    let at = spans::locate(text, span.clone());
    let mut out = format!("line {}, column {}: ", at.line, at.column);
    let missing = raw.strip_prefix("missing field `").and_then(|r| r.split('`').next());
    // A key missing from the top level is reported with an empty span at the start, or one
    // over the first keys; a table's span starts at its header.
    let root = span.start == 0 && (span.is_empty() || !text.starts_with('['));
    let table = if missing.is_some() && root { None } else { at.key.clone() };
    let misplaced = misplaced_hint(at.key.as_deref(), at.value.as_deref(), raw, top_level);
    match (missing, table) {
        (Some(field), Some(table)) => {
            out.push_str(&format!("key `{table}.{field}` is missing"));
        }
        (Some(field), None) => out.push_str(&format!("key `{field}` is missing")),
        (None, Some(key)) => {
            out.push_str(&format!("key `{key}`"));
            if let Some(value) = &at.value {
                out.push_str(&format!(" = {value}"));
            }
            out.push_str(&format!(": {message}"));
        }
        (None, None) => out.push_str(&message),
    }
    out.push('\n');
    out.push_str(&spans::snippet(text, span));
    if let Some(hint) = misplaced.or(hint) {
        out.push_str(&format!("\n{hint}"));
    }
    out
}

/// serde's words in the user's: a TOML file has keys and values, not fields and variants
/// (and "variant" means something else here), and `u8` is an integer from 0 to 255.
pub(crate) fn plain_words(message: &str) -> String {
    message
        .replace("unknown field `", "unknown key `")
        .replace("missing field `", "missing key `")
        .replace("unknown variant `", "unknown value `")
        .replace("expected u8", "expected an integer from 0 to 255")
        .replace("expected u16", "expected an integer from 0 to 65535")
        .replace("expected u32", "expected an integer from 0 to 4294967295")
        .replace("expected usize", "expected a non-negative integer")
        .replace("number too large to fit in target type", "the number is too large")
        .replace("expected u64", "expected a non-negative integer")
        .replace("expected f64", "expected a number")
        .replace("expected a sequence", "expected an array")
        .replace("expected a map", "expected a table")
        .replace("there are no fields", "no keys are allowed here")
}

/// What a TOML file is, told by its top level: a model has `zones` or `nodes`; a policy file
/// holds policy keys only, at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Model,
    Policy,
    /// Neither, or not TOML: loading it as either says what is wrong.
    Other,
}

pub fn file_kind(text: &str) -> FileKind {
    let Ok(table) = text.parse::<toml::Table>() else { return FileKind::Other };
    if ["zones", "nodes"].into_iter().any(|k| table.contains_key(k)) {
        FileKind::Model
    } else if !table.is_empty() && toml::Value::Table(table).try_into::<PolicyPatch>().is_ok() {
        FileKind::Policy
    } else {
        FileKind::Other
    }
}

/// Load a `--policy` file: policy keys only, top level.
pub fn load_policy(path: &Path) -> Result<SourcedPolicy, ConfigError> {
    let text = read_file(path)?;
    if file_kind(&text) == FileKind::Model {
        return Err(ConfigError::new(
            path,
            "a model file (it has `zones` or `nodes`) where a policy file is expected (policy keys only, as a model's [policy] holds them); a model goes where the command takes one: `check MODEL`, `lint POLICY --model MODEL`",
        ));
    }
    let patch: PolicyPatch = parse_toml(path, &text)?;
    Ok(SourcedPolicy::new(patch, &path.display().to_string()))
}

/// The known name nearest to `unknown`, if it is near enough to be what was meant: at most a
/// third of the name's length in edits (at least 2). The one "did you mean" of every message:
/// unknown keys and values, properties, variants.
pub fn nearest<'a>(unknown: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let (distance, best) = known.into_iter().map(|k| (strsim::damerau_levenshtein(unknown, k), k)).min()?;
    let limit = (unknown.chars().count() / 3).max(2);
    (distance <= limit).then_some(best)
}

/// From serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown variant"), the
/// closest expected name, as a hint line.
pub fn did_you_mean(message: &str) -> Option<String> {
    let start = message
        .find("unknown field `")
        .map(|i| i + "unknown field `".len())
        .or_else(|| message.find("unknown variant `").map(|i| i + "unknown variant `".len()))?;
    let rest = &message[start..];
    let end = rest.find('`')?;
    let unknown = &rest[..end];
    // After the closing quote: ", expected one of `a`, `b`" (or "expected `a` or `b`"): the
    // names are every other piece between backquotes.
    let candidates = rest[end + 1..].split('`').skip(1).step_by(2);
    nearest(unknown, candidates).map(|best| format!("help: did you mean `{best}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_nearest_field() {
        let msg =
            "unknown field `replica_ack_timout`, expected one of `replication_factor`, `replica_ack_timeout`";
        assert_eq!(did_you_mean(msg).unwrap(), "help: did you mean `replica_ack_timeout`?");
        assert!(did_you_mean("unknown field `zzzzzzzzzz`, expected `a` or `b`").is_none());
        assert_eq!(
            did_you_mean("unknown variant `coupld`, expected `coupled` or `independent`").unwrap(),
            "help: did you mean `coupled`?"
        );
        assert!(did_you_mean("unknown field `x`, there are no fields").is_none());
        assert_eq!(nearest("incidnt", ["incident", "fixed"]), Some("incident"));
        assert_eq!(
            nearest("acked_write_persist", ["linearizable", "acked_writes_persist"]),
            Some("acked_writes_persist")
        );
        assert_eq!(nearest("zzzzzz", ["incident", "fixed"]), None);
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        tick: Dur,
        #[serde(default)]
        policy: PolicyPatch,
    }

    fn message(text: &str) -> String {
        parse_toml::<Doc>(Path::new("x.toml"), text).unwrap_err().to_string()
    }

    #[test]
    fn toml_errors_name_file_key_and_value() {
        let m = message("tick = \"100ms\"\n[policy]\nreplica_ack_timout = \"1s\"\n");
        assert!(m.starts_with("x.toml: line 3, column 1: key `policy.replica_ack_timout` = \"1s\": unknown key `replica_ack_timout`, expected one of"), "{m}");
        assert!(m.ends_with("help: did you mean `replica_ack_timeout`?"), "{m}");

        let m = message("tick = \"100ms\"\n[policy]\nfailure_detection = \"coupld\"\n");
        assert!(m.contains("key `policy.failure_detection` = \"coupld\": unknown value `coupld`"), "{m}");
        assert!(m.ends_with("help: did you mean `coupled`?"), "{m}");

        // A top-level key written after a table is that table's unknown key.
        let m = message("[policy]\nwrite_quorum = 2\ntick = \"100ms\"\n");
        assert!(m.contains("key `policy.tick` = \"100ms\": unknown key `tick`"), "{m}");
        assert!(m.ends_with("help: `tick` is a top-level key, but written after `[policy]` it belongs to that table: move it above the first table"), "{m}");
        let m = message("tick = \"100ms\"\n[policy]\ntock = 1\n");
        assert!(!m.contains("top-level"), "{m}");

        let m = message("tick = 5\n");
        assert!(m.contains("line 1, column 8: key `tick` = 5: invalid duration 5"), "{m}");

        let m = message("[policy]\nwrite_quorum = 2\n");
        assert!(m.contains("key `tick` is missing"), "{m}");

        let m = message("tick = \"100ms\"\n[policy]\nwrite_quorum = 300\n");
        assert!(m.contains("key `policy.write_quorum` = 300: invalid value: integer `300`, expected an integer from 0 to 255"), "{m}");
    }

    #[test]
    fn the_file_is_named_once() {
        let e = ConfigError::new(Path::new("m.toml"), "m.toml [policy]: key `w` = 0: bad");
        assert_eq!(e.to_string(), "m.toml [policy]: key `w` = 0: bad");
        let e = ConfigError::new(Path::new("m.toml"), "key `w` = 0: bad");
        assert_eq!(e.to_string(), "m.toml: key `w` = 0: bad");
        let e = ConfigError::new(Path::new("m.toml"), "m.tomlx: odd");
        assert_eq!(e.to_string(), "m.toml: m.tomlx: odd");
    }
}
