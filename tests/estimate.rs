//! `check --estimate`: the knobs that drive a model's state count, measured on smaller scopes,
//! and the turned-down scopes that finish, with exact counts.

#[path = "support/bin.rs"]
mod bin;

use bin::{check_json, replicheck, stderr, stdout};
use serde_json::Value;

fn estimate(model: &str, variant: &str, cap: &str) -> Value {
    let args = ["check", model, "--variant", variant, "--estimate", "--max-states", cap, "--format", "json"];
    let out = replicheck(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("a JSON estimate");
    assert_eq!(doc.as_array().expect("one estimate per run").len(), 1);
    doc[0].clone()
}

fn probe_named<'a>(probes: &'a Value, scope: &str) -> Option<&'a Value> {
    probes.as_array().unwrap().iter().find(|p| p["scope"].as_str().unwrap().starts_with(scope))
}

#[test]
fn a_model_that_finishes_under_the_cap_is_counted_not_estimated() {
    let e = estimate("models/detector-timing.toml", "continuous", "1000000");
    let run = check_json("models/detector-timing.toml", "continuous", &[]);
    assert_eq!(e["as_written"]["finished"], true);
    assert_eq!(e["as_written"]["states"], run["unique_states"], "the probe is the check itself");
    assert!(e["drivers"].as_array().unwrap().is_empty(), "nothing is measured past a finished model");
}

#[test]
fn each_knob_is_raised_alone_and_turned_down_alone_with_exact_counts() {
    // coordinator-restart: fault budget 3 and a writer with 3 operations; 188k states as
    // written, so a 20k cap cuts it.
    let e = estimate("models/coordinator-restart.toml", "default", "20000");
    assert_eq!(e["as_written"]["finished"], false);
    assert!(e["as_written"]["states"].as_u64().unwrap() >= 20_000);
    let drivers = e["drivers"].as_array().unwrap();
    let knobs: Vec<&str> = drivers.iter().map(|d| d["knob"].as_str().unwrap()).collect();
    assert_eq!(knobs, ["faults.budget", "clients.writer.ops"], "biggest factor first");
    let base = e["base"]["states"].as_u64().unwrap();
    for d in drivers {
        let alone = d["alone"].as_array().unwrap();
        let (floor, written) = (d["floor"].as_u64().unwrap(), d["written"].as_u64().unwrap());
        assert_eq!(alone.len() as u64, written - floor, "{}: one probe per step above the floor", d["knob"]);
        let last = alone.last().unwrap()["states"].as_u64().unwrap();
        assert!((d["factor_alone"].as_f64().unwrap() - last as f64 / base as f64).abs() < 1e-9);
        // Turned down until a probe finishes: every probe before the last was cut.
        let down = d["turned_down"].as_array().unwrap();
        assert!(down[..down.len() - 1].iter().all(|p| p["finished"] == false));
        assert_eq!(down.last().unwrap()["complete"], true, "{}: the last one finished", d["knob"]);
    }
    // With two knobs, one turned down to its floor is the other raised alone to as written:
    // the same scope, so the same count, measured from two ends.
    let budget_floor =
        probe_named(&drivers[0]["turned_down"], "faults.budget = 1").expect("reached the floor");
    let ops_alone = probe_named(&drivers[1]["alone"], "clients.writer.ops = 3").unwrap();
    assert_eq!(budget_floor["finished"], true);
    assert_eq!(budget_floor["states"], ops_alone["states"]);
    // What finished is offered, nearest to the model as written (most states) first.
    let fits = e["changes_that_finish"].as_array().unwrap();
    assert!(!fits.is_empty());
    assert!(fits.iter().all(|p| p["finished"] == true));
    assert!(fits.windows(2).all(|w| w[0]["states"].as_u64() >= w[1]["states"].as_u64()));
}

#[test]
fn the_human_report_names_the_drivers_and_what_finishes() {
    let out = replicheck(&[
        "check",
        "models/detector-timing.toml",
        "--variant",
        "continuous",
        "--estimate",
        "--max-states",
        "20000",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "estimate: detector-timing / continuous",
        "as written: more than",
        "what each knob does alone",
        "latency ranges as written",
        "the model as written with one knob turned down:",
        "heartbeat_interval is 5 tick(s)",
        "degraded a<->b 300ms..700ms -> 300ms",
        "changes that finish (measured)",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    let refused = replicheck(&["check", "models/detector-timing.toml", "--estimate", "--simulate"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
}

#[test]
fn a_check_cut_by_the_memory_bound_points_to_the_estimate_which_runs_as_printed() {
    let out = replicheck(&[
        "check",
        "models/coordinator-restart.toml",
        "--variant",
        "default",
        "--memory-max",
        "1M",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("a JSON report");
    let stopped = doc["runs"][0]["stopped"].as_str().expect("the run says why it stopped");
    let command = stopped.split('`').nth(1).expect("a command in backquotes");
    let args: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(args[..2], ["replicheck", "check"], "{stopped}");
    assert!(args.ends_with(&["--estimate"]) && args.contains(&"default"), "{stopped}");
    let mut run: Vec<&str> = args[1..].to_vec();
    run.extend(["--max-states", "5000"]);
    let estimate = replicheck(&run);
    assert_eq!(estimate.status.code(), Some(0), "{}", stderr(&estimate));
    assert!(stdout(&estimate).contains("estimate: coordinator-restart / default"), "{}", stdout(&estimate));
}

/// A smaller model that finishes may have lost the bug: basic-quorum's `write-quorum-1` needs
/// both faults for its lost write, and with one the estimate says so beside the count.
#[test]
fn a_scope_that_finishes_names_the_verdicts_it_changes() {
    let e = estimate("models/basic-quorum.toml", "write-quorum-1", "50000");
    let fits = e["changes_that_finish"].as_array().unwrap();
    let one_fault = fits
        .iter()
        .find(|p| p["settings"] == serde_json::json!([{ "knob": "faults.budget", "value": 1 }]))
        .expect("one fault finishes");
    let differ: Vec<&str> =
        one_fault["verdicts_differ"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(differ.contains(&"acked_writes_persist: expected violated, found holds"), "{differ:?}");
    // The model as written was cut by the cap, and says so.
    assert_eq!(e["as_written"]["stopped"], "cut at --max-states");
}

/// When no knob turned down alone finishes, each pair is turned down one step, and each single
/// change is probed once more under four times the cap (a single change is the smallest, and
/// one just past the cap usually fits). quorum-rollout has two knobs (fault budget 2, the
/// reader's think time), so the pair is the base: the same scope reached from both ends, the
/// same count.
#[test]
fn when_no_single_change_finishes_pairs_and_a_second_look_are_tried() {
    let e = estimate("models/quorum-rollout.toml", "base", "5000");
    let singles = e["drivers"].as_array().unwrap().iter().flat_map(|d| d["turned_down"].as_array().unwrap());
    assert!(singles.clone().all(|p| p["finished"] == false), "no single change finishes under 5000 states");
    let pairs = e["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    assert_eq!(pairs[0]["scope"], "faults.budget = 1 and think times at their shortest");
    assert_eq!(pairs[0]["finished"], true);
    assert_eq!(pairs[0]["states"], e["base"]["states"]);
    assert_eq!(e["second_look_states_max"], 20_000);
    let second: Vec<&str> =
        e["second_look"].as_array().unwrap().iter().map(|p| p["scope"].as_str().unwrap()).collect();
    assert_eq!(second, ["faults.budget = 1", "think times at their shortest"]);
    let one_fault = &e["second_look"][0];
    assert_eq!(one_fault["complete"], true, "{one_fault}");
    // The count is the one `check` gives for that scope: the model with `budget = 1`.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("models/quorum-rollout.toml").unwrap();
    assert_eq!(text.matches("\nbudget = 2\n").count(), 1);
    let one = dir.path().join("quorum-rollout.toml");
    std::fs::write(&one, text.replace("\nbudget = 2\n", "\nbudget = 1\n")).unwrap();
    let out = replicheck(&["check", one.to_str().unwrap(), "--variant", "base", "--format", "json"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("a JSON report");
    assert_eq!(one_fault["states"], doc["runs"][0]["unique_states"]);
    // Everything that finished is offered, the single changes (more states) before the pair.
    let fits = e["changes_that_finish"].as_array().unwrap();
    let offered: Vec<&str> = fits.iter().map(|p| p["scope"].as_str().unwrap()).collect();
    let finished_singles =
        e["second_look"].as_array().unwrap().iter().filter(|p| p["finished"] == true).count();
    assert_eq!(fits.len(), finished_singles + 1, "{offered:?}");
    assert_eq!(offered.last(), Some(&"faults.budget = 1 and think times at their shortest"));
    assert!(fits.windows(2).all(|w| w[0]["states"].as_u64() >= w[1]["states"].as_u64()));
    // A single change that finished makes no second look: coordinator-restart at 20,000.
    let e = estimate("models/coordinator-restart.toml", "default", "20000");
    assert!(e["second_look"].as_array().unwrap().is_empty());
    assert!(e["second_look_states_max"].is_null());
}

/// A turned-down count against an independent check of the same scope: detector-timing's
/// fault durations at their shortest is `faults.degrade[0].duration=1s` through `--set`.
#[test]
fn a_turned_down_count_is_the_count_check_gives_for_that_scope() {
    let e = estimate("models/detector-timing.toml", "continuous", "20000");
    let durations = e["drivers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["knob"] == "fault durations")
        .expect("a fault-duration knob");
    assert_eq!(durations["ranges"][0], "degraded a<->b lasts 1s..3s -> 1s");
    let shortest = durations["turned_down"].as_array().unwrap().last().unwrap();
    assert_eq!(shortest["complete"], true);
    // A `--set` run is a what-if in which every property must hold: its exit code is the
    // verdicts', the count is what is compared.
    let out = replicheck(&[
        "check",
        "models/detector-timing.toml",
        "--variant",
        "continuous",
        "--set",
        "faults.degrade[0].duration=1s",
        "--format",
        "json",
    ]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("a JSON report");
    assert_eq!(doc["runs"][0]["complete"], true);
    assert_eq!(shortest["states"], doc["runs"][0]["unique_states"]);
}

/// A base cut by the cap gives no factors (its count is no denominator), and says so.
#[test]
fn a_cut_base_gives_no_factors() {
    let e = estimate("models/basic-quorum.toml", "default", "300");
    assert_eq!(e["base"]["complete"], false);
    assert!(e["drivers"].as_array().unwrap().iter().all(|d| d["factor_alone"].is_null()));
    let out = replicheck(&[
        "check",
        "models/basic-quorum.toml",
        "--variant",
        "default",
        "--estimate",
        "--max-states",
        "300",
    ]);
    assert!(stdout(&out).contains("the base did not complete"), "{}", stdout(&out));
}

/// Where every property is violated the check stops early, and so does a probe: its count is
/// not the scope's size, and the report says so instead of calling it exact.
#[test]
fn a_probe_that_stops_because_every_property_is_violated_is_not_an_exact_count() {
    let path = "tests/data/linearizable-only.toml";
    let e = estimate(path, "no-read-repair", "100000");
    let probes = e["drivers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["alone"].as_array().unwrap().iter().chain(d["turned_down"].as_array().unwrap()));
    let stopped = probes.filter(|p| p["finished"] == true && p["complete"] == false).count();
    assert!(stopped > 0, "some probe stops at its verdicts: {e}");
    let out =
        replicheck(&["check", path, "--variant", "no-read-repair", "--estimate", "--max-states", "100000"]);
    assert!(stdout(&out).contains("(all violated: stopped)"), "{}", stdout(&out));
}
