//! A local cluster's config for the tests that start one from Rust: this build's binary, a
//! policy from TOML text, nodes in a data directory.

use replicheck::store::cli::store_policy;
use replicheck::store::cluster::ClusterConfig;
use std::path::{Path, PathBuf};

/// `nodes` nodes with their data in `data`, under `policy_toml` (written to `dir/policy.toml`
/// and loaded as `store up --policy` does).
pub fn local_config(dir: &Path, policy_toml: &str, nodes: usize, data: PathBuf) -> ClusterConfig {
    let path = dir.join("policy.toml");
    std::fs::write(&path, policy_toml).unwrap();
    let policy = store_policy(Some(&path), None, nodes).expect("policy loads");
    ClusterConfig::local(PathBuf::from(env!("CARGO_BIN_EXE_replicheck")), nodes, policy, data)
}
