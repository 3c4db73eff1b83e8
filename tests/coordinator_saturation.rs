//! A coordinator whose work queue fills under eviction traffic (issue 14): with
//! `coordinator.work_per_tick`, membership updates and catch-up copies queue work, a request
//! behind more than a tick's work waits before it is sent, and `coordinator_load_ceiling`
//! pauses evictions under load. `models/ack-timeout-coordinator-saturation.toml` is the
//! library's model; the same file without the work keys (or with twice the capacity) is its
//! control.

#[path = "support/bin.rs"]
mod bin;

use bin::{check_json, json_property, lasso, replicheck, stderr, stdout};
use serde_json::Value;
use std::path::{Path, PathBuf};

const MODEL: &str = "models/ack-timeout-coordinator-saturation.toml";

fn found(run: &Value, name: &str) -> String {
    assert_eq!(run["complete"], true, "{} / {}", run["model"], run["variant"]);
    json_property(run, name)["found"].as_str().unwrap().to_string()
}

/// The library model with `edit` applied, written to `dir`.
fn edited(dir: &Path, edit: impl Fn(&str) -> String) -> PathBuf {
    let text = std::fs::read_to_string(bin::root().join(MODEL)).unwrap();
    let changed = edit(&text);
    assert_ne!(changed, text, "the edit changes the model");
    let path = dir.join("model.toml");
    std::fs::write(&path, changed).unwrap();
    path
}

/// The model without the coordinator's load: `work_per_tick` and its two costs removed.
fn without_work(text: &str) -> String {
    text.lines()
        .filter(|l| {
            !["work_per_tick", "membership_update_work", "copy_work"].iter().any(|k| l.starts_with(k))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `check MODEL --variant VARIANT --format json` on an edited model, whose declared verdicts
/// need not match (exit 1 then); its one run, which must be complete.
fn check_edited(model: &Path, variant: &str) -> Value {
    let out = replicheck(&["check", model.to_str().unwrap(), "--variant", variant, "--format", "json"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("a JSON report");
    doc["runs"][0].clone()
}

#[test]
fn saturation_turns_one_rightful_eviction_into_a_storm() {
    let saturated = check_json(MODEL, "rollback", &[]);
    assert_eq!(found(&saturated, "no_healthy_eviction"), "violated");
    assert_eq!(found(&saturated, "converges"), "violated");
    // The storm's loop: requests wait behind the backlog, miss the deadline, and evict.
    let (stem, loop_) = lasso(&saturated, "converges");
    assert!(stem.iter().any(|a| a == "FAULT: n2 crashes"), "a crash starts it: {stem:?}");
    assert!(loop_.iter().any(|a| a.starts_with("tick")), "time passes on the loop: {loop_:?}");
    assert!(loop_.iter().any(|a| a.contains("works through its backlog")), "requests wait: {loop_:?}");
    assert!(loop_.iter().any(|a| a.contains("queued: evict")), "and evict: {loop_:?}");

    // The same world without the coordinator's load, and with twice its capacity: the crashed
    // n2 is evicted, and that is all.
    let dir = tempfile::tempdir().unwrap();
    let unloaded = edited(dir.path(), without_work);
    let run = check_edited(&unloaded, "rollback");
    assert_eq!(found(&run, "no_healthy_eviction"), "holds");
    assert_eq!(found(&run, "converges"), "holds");
    let dir = tempfile::tempdir().unwrap();
    let faster = edited(dir.path(), |t| t.replace("work_per_tick = 1\n", "work_per_tick = 2\n"));
    let run = check_edited(&faster, "rollback");
    assert_eq!(found(&run, "no_healthy_eviction"), "holds");
    assert_eq!(found(&run, "converges"), "holds");
}

#[test]
fn the_load_ceiling_stops_the_storm_only_below_the_load_that_causes_misses() {
    let ceiling = check_json(MODEL, "rollback-load-ceiling", &[]);
    assert_eq!(found(&ceiling, "no_healthy_eviction"), "holds");
    assert_eq!(found(&ceiling, "converges"), "holds");
    // A ceiling the backlog never crosses pauses nothing: the same graph as no ceiling.
    let high = check_json(MODEL, "rollback-ceiling-too-high", &[]);
    let none = check_json(MODEL, "rollback", &[]);
    assert_eq!(found(&high, "converges"), "violated");
    assert_eq!(high["unique_states"], none["unique_states"]);
    assert_eq!(none["unique_states"], 18_096, "re-pin deliberately when the model changes");
    assert_eq!(found(&check_json(MODEL, "fixed", &[]), "converges"), "holds");
}

#[test]
fn without_the_work_keys_the_ceiling_changes_nothing() {
    // No modelled load: the backlog is 0, and a policy with a ceiling explores the same graph.
    let dir = tempfile::tempdir().unwrap();
    let unloaded = edited(dir.path(), without_work);
    let with = check_edited(&unloaded, "rollback-load-ceiling");
    let without = check_edited(&unloaded, "rollback");
    assert_eq!(found(&with, "converges"), "holds");
    assert_eq!(with["unique_states"], without["unique_states"]);
}

/// `check MODEL` must refuse the model at `path` as bad input naming `needles`.
fn refused(path: &Path, needles: &[&str]) {
    let p = path.to_str().unwrap();
    let out = replicheck(&["check", p]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(err.contains(p), "names the file: {err}");
    for n in needles {
        assert!(err.contains(n), "names {n:?}: {err}");
    }
}

#[test]
fn bad_work_keys_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for (from, to, needles) in [
        ("work_per_tick = 1\n", "work_per_tick = 0\n", &["`coordinator.work_per_tick` = 0", "1 to 64"][..]),
        ("work_per_tick = 1\n", "work_per_tick = 65\n", &["`coordinator.work_per_tick` = 65", "1 to 64"][..]),
        ("copy_work = 4\n", "copy_work = 0\n", &["`coordinator.copy_work` = 0"][..]),
        (
            "membership_update_work = 8\n",
            "membership_update_work = 100\n",
            &["`coordinator.membership_update_work` = 100"][..],
        ),
        ("copy_work = 4\n", "", &["go together", "coordinator.copy_work"][..]),
        (
            "coordinator_load_ceiling = 5 }",
            "coordinator_load_ceiling = 16000 }",
            &["`coordinator_load_ceiling` = 16000"][..],
        ),
    ] {
        let path = edited(dir.path(), |t| t.replacen(from, to, 1));
        refused(&path, needles);
    }
}
