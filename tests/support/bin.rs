//! The replicheck binary as tests run it: from the crate root, so the relative paths of
//! models and reports resolve as they do for a user in a checkout.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn replicheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the replicheck binary runs")
}

/// A model, and the options, of a check still exploring a few seconds in (about 4M states
/// unreduced, one thread): for the tests that interrupt one or bound its memory.
pub const SLOW_MODEL: &str = "models/ack-timeout-eviction.toml";
pub const SLOW_OPTIONS: [&str; 6] = ["--variant", "fixed", "--threads", "1", "--reduce", "none"];

/// The rebalancer's endless moves (models/rebalancer-compaction.toml) with a crashable node
/// and independent detection judged at heartbeat rounds: lassos under silence regions. The
/// file is written into `dir`; its path.
pub fn rebalancer_with_rounds_detection(dir: &Path) -> std::path::PathBuf {
    let text =
        std::fs::read_to_string(root().join("models/rebalancer-compaction.toml")).expect("the library model");
    let text = text.replacen(
        "[policy]\n",
        "[faults]\nbudget = 1\ncrash = [\"n2\"]\n\n[policy]\nfailure_detection = \"independent\"\n\
         heartbeat_interval = \"300ms\"\nsuspect_after = \"700ms\"\ndead_after = \"1s\"\n",
        1,
    );
    let file = dir.join("rebalancer-independent.toml");
    std::fs::write(&file, text).expect("written");
    file
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

/// `check MODEL --variant VARIANT --format json EXTRA...`, which must exit 0: its one run.
pub fn check_json(model: &str, variant: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["check", model, "--variant", variant, "--format", "json"];
    args.extend_from_slice(extra);
    let out = replicheck(&args);
    assert_eq!(out.status.code(), Some(0), "{model} / {variant}: {}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("a JSON report");
    doc["runs"][0].clone()
}

/// A property's entry in a JSON run.
pub fn json_property<'a>(run: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    run["properties"].as_array().unwrap().iter().find(|p| p["name"] == name).expect("the property is checked")
}

/// The actions of a lasso's stem and loop, from a JSON run's property `name`.
pub fn lasso(run: &serde_json::Value, name: &str) -> (Vec<String>, Vec<String>) {
    let cx = &json_property(run, name)["counterexample"];
    let from = cx["loop_from_step"].as_u64().expect("a lasso") as usize;
    let actions: Vec<String> =
        cx["steps"].as_array().unwrap().iter().map(|s| s["action"].as_str().unwrap().to_string()).collect();
    (actions[..from - 1].to_vec(), actions[from - 1..].to_vec())
}
