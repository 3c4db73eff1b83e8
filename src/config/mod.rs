//! Scenario and policy files: raw TOML (serde, unknown keys rejected), then validated,
//! typed values in ticks. Every error names the file, the key and the value.

pub mod duration;
pub mod policy;
mod scenario;

pub use duration::{Dur, LatencyRange};
pub use policy::{Policy, PolicyPatch, SourcedPolicy};
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
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    pub fn new(path: &Path, message: impl Into<String>) -> ConfigError {
        ConfigError {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// Read a file, naming it in the error.
pub fn read_file(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(path, format!("cannot read file: {e}")))
}

/// Parse TOML into `T`, turning serde's messages into ones that suggest the key meant.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let mut message = e.to_string().trim_end().to_string();
        if let Some(hint) = did_you_mean(&message) {
            message.push_str(&format!("\n{hint}"));
        }
        ConfigError::new(path, message)
    })
}

/// Load a `--policy` file: policy keys only, top level.
pub fn load_policy(path: &Path) -> Result<SourcedPolicy, ConfigError> {
    let text = read_file(path)?;
    let patch: PolicyPatch = parse_toml(path, &text)?;
    Ok(SourcedPolicy::new(patch, &path.display().to_string()))
}

/// From serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown variant"), the
/// closest expected name, as a hint line.
pub fn did_you_mean(message: &str) -> Option<String> {
    let start = message
        .find("unknown field `")
        .map(|i| i + "unknown field `".len())
        .or_else(|| {
            message
                .find("unknown variant `")
                .map(|i| i + "unknown variant `".len())
        })?;
    let rest = &message[start..];
    let end = rest.find('`')?;
    let unknown = &rest[..end];
    let expected_part = &rest[end..];
    let candidates: Vec<&str> = expected_part.split('`').skip(1).step_by(2).collect();
    let best = candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(unknown, c), *c))
        .min()?;
    let limit = (unknown.len() / 3).max(2);
    if best.0 <= limit {
        Some(format!("help: did you mean `{}`?", best.1))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_nearest_field() {
        let msg = "unknown field `replica_ack_timout`, expected one of `replication_factor`, `replica_ack_timeout`";
        assert_eq!(
            did_you_mean(msg).unwrap(),
            "help: did you mean `replica_ack_timeout`?"
        );
        assert!(did_you_mean("unknown field `zzzzzzzzzz`, expected `a` or `b`").is_none());
    }
}
