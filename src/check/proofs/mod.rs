//! Verification certificates: `replicheck prove` writes one per model variant, saying what was
//! checked (the model file and its hash, the effective policy and its hash, the hash of the
//! policy code, the scope), and with what result (each property's verdict, the state space,
//! whether exploration was complete, each counterexample's timed steps).
//! `replicheck prove --verify` re-runs every certificate and names each that no longer
//! matches, and why.
//!
//! A certificate is a typed value (`cert::Certificate`) written as TOML by the `toml` crate's
//! serializer, with a fixed layout (which tables have a `[header]`): the same model, policy
//! and tool give the same bytes, so certificates are committed and read in review as diffs.
//! It holds nothing that varies between runs (no timings, no thread count, no explorer
//! address). Verification builds a fresh certificate for each variant, reads the committed one
//! back into the same type, and compares the two field by field; when they differ,
//! `explain` names each difference.
//!
//! Hashes are SHA-256 over text with line endings normalised to `\n`, so a checkout with
//! Windows line endings verifies too.

mod cert;
mod explain;
mod run;
#[cfg(test)]
mod tests;

pub use cert::Certificate;
pub use explain::explain;
pub use run::{prove, verify, Finding, Problem, ProveReport, VerifyReport, Written};

use super::{plan, Job, PolicyChoice};
use crate::config::ConfigError;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Component, Path, PathBuf};

/// The certificate format. Bump it when the layout changes; verification then asks for
/// regeneration instead of reporting every key as changed.
pub const FORMAT: i64 = 1;

/// The checked code, embedded at build time: every file of `src/policy/` and `src/protocol/`.
/// The pure policy functions and the protocol machines that call them decide what the model
/// (and the store) does, so a change to any of them invalidates every certificate even when
/// the state count happens to stay the same. tests/proofs.rs fails when a file of either
/// folder is missing from this list.
const POLICY_SOURCES: &[(&str, &str)] = &[
    ("src/policy/coordinator_load.rs", include_str!("../../policy/coordinator_load.rs")),
    ("src/policy/detector.rs", include_str!("../../policy/detector.rs")),
    ("src/policy/eviction.rs", include_str!("../../policy/eviction.rs")),
    ("src/policy/leader.rs", include_str!("../../policy/leader.rs")),
    ("src/policy/mod.rs", include_str!("../../policy/mod.rs")),
    ("src/policy/rebalancer.rs", include_str!("../../policy/rebalancer.rs")),
    ("src/policy/quorum.rs", include_str!("../../policy/quorum.rs")),
    ("src/policy/recovery.rs", include_str!("../../policy/recovery.rs")),
    ("src/policy/retry.rs", include_str!("../../policy/retry.rs")),
    ("src/policy/routing.rs", include_str!("../../policy/routing.rs")),
    ("src/protocol/compaction.rs", include_str!("../../protocol/compaction.rs")),
    ("src/protocol/coordinator/load.rs", include_str!("../../protocol/coordinator/load.rs")),
    ("src/protocol/coordinator/membership.rs", include_str!("../../protocol/coordinator/membership.rs")),
    ("src/protocol/coordinator/mod.rs", include_str!("../../protocol/coordinator/mod.rs")),
    ("src/protocol/coordinator/recovery.rs", include_str!("../../protocol/coordinator/recovery.rs")),
    (
        "src/protocol/coordinator/recovery_tests.rs",
        include_str!("../../protocol/coordinator/recovery_tests.rs"),
    ),
    ("src/protocol/coordinator/requests.rs", include_str!("../../protocol/coordinator/requests.rs")),
    ("src/protocol/coordinator/tests.rs", include_str!("../../protocol/coordinator/tests.rs")),
    ("src/protocol/coordinator/views.rs", include_str!("../../protocol/coordinator/views.rs")),
    ("src/protocol/leader/epochs.rs", include_str!("../../protocol/leader/epochs.rs")),
    ("src/protocol/leader/manager.rs", include_str!("../../protocol/leader/manager.rs")),
    ("src/protocol/leader/mod.rs", include_str!("../../protocol/leader/mod.rs")),
    ("src/protocol/leader/replica.rs", include_str!("../../protocol/leader/replica.rs")),
    ("src/protocol/leader/tests.rs", include_str!("../../protocol/leader/tests.rs")),
    ("src/protocol/mod.rs", include_str!("../../protocol/mod.rs")),
    ("src/protocol/msg.rs", include_str!("../../protocol/msg.rs")),
    ("src/protocol/data.rs", include_str!("../../protocol/data.rs")),
    ("src/protocol/node.rs", include_str!("../../protocol/node.rs")),
];

/// The files that make up the policy code, as listed in `POLICY_SOURCES`.
pub fn policy_source_files() -> Vec<&'static str> {
    POLICY_SOURCES.iter().map(|(path, _)| *path).collect()
}

fn sha256_hex(text: &str) -> String {
    let normalised = text.replace("\r\n", "\n");
    let digest = Sha256::digest(normalised.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in digest {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// The hash of every policy source file, in `POLICY_SOURCES` order.
pub fn policy_code_file_hashes() -> Vec<(&'static str, String)> {
    POLICY_SOURCES.iter().map(|(path, text)| (*path, sha256_hex(text))).collect()
}

/// One hash for the whole policy code: over each file's path and hash.
pub fn policy_code_hash() -> String {
    let mut listing = String::new();
    for (path, hash) in policy_code_file_hashes() {
        let _ = writeln!(listing, "{path} {hash}");
    }
    sha256_hex(&listing)
}

/// A model path as certificates record it: `./` dropped, `/` as the separator.
fn display_path(path: &Path) -> String {
    let parts: Vec<String> = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let joined = parts.join("/");
    // An absolute path's root component is "/" itself: do not double it.
    joined.replacen("//", "/", 1)
}

/// A model path as certificates record it: relative to the current directory when it is
/// under it (so `prove /repo/models` and `prove models` from `/repo` write the same text).
fn recorded_path(path: &Path) -> String {
    if path.is_absolute() {
        if let Ok(cwd) = std::env::current_dir() {
            if let Ok(rel) = path.strip_prefix(&cwd) {
                return display_path(rel);
            }
        }
    }
    display_path(path)
}

/// The same file however it was named (`models/x.toml`, `./models/x.toml`, an absolute path).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => display_path(a) == display_path(b),
    }
}

/// The state count the certificate under `dir` records for `job`, when there is one written
/// for the same model file and its exploration was complete: what a progress line can count
/// towards. None for a policy file's run (no certificate) or a changed model.
pub fn recorded_states(dir: &Path, job: &Job) -> Option<u64> {
    let text = std::fs::read_to_string(certificate_path(dir, &job.scenario.name, &job.variant)).ok()?;
    let cert = Certificate::from_text(&text).ok()?;
    let model_text = std::fs::read_to_string(&job.scenario.path).ok()?;
    let same_model = cert.model_file.sha256 == sha256_hex(&model_text) && cert.variant == job.variant;
    (same_model && cert.exploration.complete).then_some(cert.exploration.unique_states)
}

/// Where `prove` writes the certificate of one model variant.
pub fn certificate_path(out: &Path, model: &str, variant: &str) -> PathBuf {
    out.join(model).join(format!("{variant}.toml"))
}

// ---------------------------------------------------------------------------------------------
// Planning: which certificates a set of models has.

/// One certificate to write or check: a variant of a model, and where its certificate lives.
struct Planned {
    job: Job,
    path: PathBuf,
}

fn planned(files: &[PathBuf], out: &Path) -> Result<Vec<Planned>, ConfigError> {
    let jobs = plan(files, &PolicyChoice::Variants(None))?;
    let mut seen: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    let mut result = Vec::new();
    for job in jobs {
        let path = certificate_path(out, &job.scenario.name, &job.variant);
        if let Some(other) = seen.get(&path) {
            if !same_file(other, &job.scenario.path) {
                return Err(ConfigError::new(
                    &job.scenario.path,
                    format!(
                        "model name \"{}\" is also the name of {}: certificates are written per model name, so names must differ",
                        job.scenario.name,
                        other.display()
                    ),
                ));
            }
            continue;
        }
        seen.insert(path.clone(), job.scenario.path.clone());
        result.push(Planned { job, path });
    }
    Ok(result)
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::new(path, format!("cannot read file: {e}")))
}

/// A certificate file as found on disk.
struct OnDisk {
    path: PathBuf,
    /// The model file it certifies, as recorded.
    model_file: PathBuf,
    variant: String,
    content: Content,
}

/// What a certificate file holds past its header.
enum Content {
    Current(Box<Certificate>),
    /// A certificate of another format, which this tool does not read further.
    OtherFormat(i64),
}

/// Read a certificate: its header (the format, the variant, the model file), then, if it is of
/// this format, the whole certificate. The error says why the file is not one.
fn parse_certificate(path: &Path) -> Result<OnDisk, ConfigError> {
    let text = read_text(path)?;
    let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        ConfigError::new(path, format!("not a readable certificate: {}", e.message().trim()))
    })?;
    let not_one = |e: toml::de::Error| {
        ConfigError::new(path, format!("not a replicheck certificate: {}", plain(&text, &e)))
    };
    let header: cert::Header = toml::Value::Table(doc).try_into().map_err(not_one)?;
    let content = if header.format == FORMAT {
        Content::Current(Box::new(Certificate::from_text(&text).map_err(not_one)?))
    } else {
        Content::OtherFormat(header.format)
    };
    Ok(OnDisk {
        path: path.to_path_buf(),
        model_file: PathBuf::from(header.model_file.path),
        variant: header.variant,
        content,
    })
}

/// serde's message in a file's words (keys, not fields), with its line when it has one.
fn plain(text: &str, e: &toml::de::Error) -> String {
    let message = e
        .message()
        .trim()
        .replace("missing field `", "missing key `")
        .replace("unknown field `", "unknown key `");
    match e.span() {
        Some(span) => format!("line {}: {message}", text[..span.start].matches('\n').count() + 1),
        None => message,
    }
}

/// Every `OUT/MODEL/VARIANT.toml`, sorted. A missing `out` has no certificates.
fn certificates_in(out: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    if !out.exists() {
        return Ok(Vec::new());
    }
    let list = |dir: &Path| -> Result<Vec<PathBuf>, ConfigError> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| ConfigError::new(dir, format!("cannot read directory: {e}")))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        Ok(entries)
    };
    let mut found = Vec::new();
    for dir in list(out)?.into_iter().filter(|p| p.is_dir()) {
        found.extend(
            list(&dir)?.into_iter().filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "toml")),
        );
    }
    Ok(found)
}
