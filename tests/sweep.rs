//! `replicheck sweep` through the real binary (issue 17): the boundary it reports on the
//! incident model, its grid, its picture, its shards, limits, and its errors on bad input.

use serde_json::Value;
use std::process::{Command, Output};

const ACK: &str = "models/ack-timeout-eviction.toml";
const HOT: &str = "models/hot-partition-retry-storm.toml";

fn replicheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run replicheck")
}

fn json(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["sweep"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json", "--threads", "1"]);
    let out = replicheck(&all);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exit code"), doc)
}

fn property<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["properties"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .expect("the property is reported")
}

/// Every checked point's verdict is the cell the report shows there: nothing inferred or
/// claimed contradicts a point that was checked.
fn assert_cells_agree_with_checked_points(doc: &Value) {
    for point in doc["checked"].as_array().unwrap() {
        let index = point["point"].as_u64().unwrap() as usize;
        for (name, verdict) in point["verdicts"].as_object().unwrap() {
            assert_eq!(property(doc, name)["cells"][index], *verdict, "{name} at point {index}");
        }
    }
}

/// Coupled detection (the incident variant: the ack deadline is the failure detector): the
/// deadline must exceed the worst round trip over the degraded cross-zone link, 2 x 700ms.
/// A deadline equal to it is not enough: the reply may arrive in the very tick the deadline
/// fires, and the model explores both orders, so 1400ms evicts the healthy n2 and 1500ms is
/// the first safe value.
#[test]
fn ack_timeout_boundary_is_just_above_the_worst_round_trip() {
    let (code, doc) = json(&[ACK, "--variant", "incident", "--vary", "replica_ack_timeout=300ms..3s"]);
    assert_eq!(code, 0);
    assert_eq!(doc["points"], 28);
    let checked = doc["checked"].as_array().unwrap().len();
    assert!(checked < 12, "bisection, not every point: {checked} checked");
    assert_cells_agree_with_checked_points(&doc);
    for name in ["no_healthy_eviction", "churn_bounded"] {
        let p = property(&doc, name);
        assert_eq!(p["monotone"], true, "{name}");
        let boundaries = p["boundaries"].as_array().unwrap();
        assert_eq!(boundaries.len(), 1, "{name}: {boundaries:?}");
        let b = &boundaries[0];
        assert_eq!(
            (b["violated_at"].as_str(), b["holds_at"].as_str()),
            (Some("1400ms"), Some("1500ms")),
            "{name}"
        );
        assert_eq!(b["adjacent"], true);
        assert_eq!(b["inferred"], false);
        assert_eq!(b["violated_policy"], "replica_ack_timeout = \"1400ms\"\n");
        // The safe region: 1500ms..3s, the last 16 values.
        let safe: Vec<u64> =
            p["safe_points"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(safe, (12..28).collect::<Vec<u64>>(), "{name}");
    }
    // The counterexample at 1400ms: the deadline fires at the tick n2's ack is due.
    let b = &property(&doc, "no_healthy_eviction")["boundaries"][0];
    let steps = b["counterexample"]["steps"].as_array().expect("a counterexample at the unsafe side");
    let last = steps.last().unwrap()["action"].as_str().unwrap();
    assert!(last.contains("ack deadline (1400ms)") && last.contains("healthy"), "{last}");
    assert!(b["counterexample"]["explorer_url"].as_str().unwrap().contains("#/steps/"));
    // The properties the knob does not touch: the same verdict everywhere, no boundary.
    assert_eq!(property(&doc, "acked_writes_persist")["boundaries"].as_array().unwrap().len(), 0);
    let duplicates = property(&doc, "no_duplicate_effects");
    assert!(duplicates["cells"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c == "violated" || c == "inferred_violated"));
}

#[test]
fn the_text_report_and_the_picture_show_the_boundary() {
    let svg = std::env::temp_dir().join(format!("replicheck-sweep-{}.svg", std::process::id()));
    let out = replicheck(&[
        "sweep",
        ACK,
        "--variant",
        "incident",
        "--vary",
        "replica_ack_timeout=1s..2s",
        "--threads",
        "1",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("boundary: violated at replica_ack_timeout=1400ms, holds at replica_ack_timeout=1500ms (neighbouring values, both checked)"),
        "{text}"
    );
    assert!(text.contains("no_healthy_eviction: holds for replica_ack_timeout in 1500ms..2s"), "{text}");
    assert!(
        text.contains("explore: replicheck explore models/ack-timeout-eviction.toml --variant incident --set replica_ack_timeout=1400ms --addr"),
        "{text}"
    );
    let picture = std::fs::read_to_string(&svg).expect("the picture is written");
    std::fs::remove_file(&svg).ok();
    assert!(picture.starts_with("<svg"));
    // One cell per property and value (6 properties x 11 values), plus the legend's six.
    assert_eq!(picture.matches("<rect x=").count(), 6 * 11 + 6, "{picture}");
    // Boundaries drawn for no_healthy_eviction and churn_bounded, plus the legend's.
    assert_eq!(picture.matches("stroke-width=\"3\"").count(), 3);
}

/// Two knobs: the search along the first knob for each value of the second; the cells it
/// infers are the verdicts an exhaustive sweep finds.
#[test]
fn a_grid_agrees_with_the_exhaustive_sweep() {
    let args = [
        HOT,
        "--variant",
        "incident",
        "--vary",
        "write_shard_suffixes=1..8",
        "--vary",
        "partition_write_capacity=10/s..30/s",
    ];
    let (code, searched) = json(&args);
    assert_eq!(code, 0);
    // A range of rates steps by one write per tick, in the unit it was written in.
    assert_eq!(searched["knobs"][1]["values"], serde_json::json!(["10/s", "20/s", "30/s"]));
    let mut all = args.to_vec();
    all.push("--exhaustive");
    let (_, exhaustive) = json(&all);
    assert_eq!(exhaustive["checked"].as_array().unwrap().len(), 24);
    assert!(searched["checked"].as_array().unwrap().len() < 24);
    for p in exhaustive["properties"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let other = property(&searched, name);
        for (i, cell) in p["cells"].as_array().unwrap().iter().enumerate() {
            let inferred = other["cells"][i].as_str().unwrap().trim_start_matches("inferred_").to_string();
            assert_eq!(Some(inferred.as_str()), cell.as_str(), "{name} at point {i}");
        }
    }
    // capacity_respected: one suffix overloads the hot partition at every cap; two or more
    // suffixes keep within 20/s and 30/s caps but not 10/s.
    let cells = property(&exhaustive, "capacity_respected")["cells"].as_array().unwrap().clone();
    let row =
        |r: usize| cells[r * 8..r * 8 + 8].iter().map(|c| c.as_str().unwrap() == "holds").collect::<Vec<_>>();
    assert_eq!(row(0), vec![false; 8]);
    for r in [1, 2] {
        assert_eq!(row(r), [vec![false], vec![true; 7]].concat());
    }
}

/// `--shard I/N` checks every N-th point from I; the shards together are the exhaustive sweep.
#[test]
fn shards_partition_the_points() {
    let mut union = Vec::new();
    for i in 0..3 {
        let shard = format!("{i}/3");
        let (code, doc) =
            json(&[ACK, "--variant", "incident", "--vary", "replica_ack_timeout=1s..2s", "--shard", &shard]);
        assert_eq!(code, 0);
        assert_eq!(doc["shard"]["index"], i);
        for point in doc["checked"].as_array().unwrap() {
            let index = point["point"].as_u64().unwrap();
            assert_eq!(index % 3, i as u64);
            // Another shard's points are not inferred.
            union.push((index, point["verdicts"]["no_healthy_eviction"].as_str().unwrap().to_string()));
        }
        let cells = property(&doc, "no_healthy_eviction")["cells"].as_array().unwrap().clone();
        assert!(cells.iter().all(|c| !c.as_str().unwrap().starts_with("inferred")));
    }
    union.sort();
    let expected: Vec<(u64, String)> =
        (0..11).map(|i| (i, if i < 5 { "violated" } else { "holds" }.to_string())).collect();
    assert_eq!(union, expected);
}

/// The memory bound cuts a point short as the state bound does (a 1 MiB bound is below what
/// the process already holds: the first level does not fit).
#[test]
fn a_point_over_the_memory_bound_is_incomplete() {
    let (code, doc) =
        json(&[ACK, "--variant", "incident", "--vary", "replica_ack_timeout=1s", "--memory-max", "1M"]);
    assert_eq!(code, 3, "{doc}");
    let point = &doc["checked"][0];
    assert_eq!(point["complete"], false, "{point}");
    assert!(point["verdicts"].as_object().unwrap().values().all(|v| v != "holds"), "{point}");
    let out = replicheck(&["sweep", ACK, "--vary", "replica_ack_timeout=1s", "--memory-max", "lots"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--memory-max") && stderr.contains("lots"), "{stderr}");
}

/// A point cut short by a limit is incomplete, never "holds", and the sweep exits 3.
#[test]
fn a_point_cut_short_is_incomplete() {
    let (code, doc) =
        json(&[ACK, "--variant", "incident", "--vary", "replica_ack_timeout=1s,2s", "--max-states", "200"]);
    assert_eq!(code, 3);
    let first = &doc["checked"][0];
    assert_eq!(first["complete"], false);
    assert_eq!(property(&doc, "acked_writes_persist")["cells"][0], "incomplete");
    for point in doc["checked"].as_array().unwrap() {
        if point["complete"] == false {
            assert!(point["verdicts"].as_object().unwrap().values().all(|v| v != "holds"), "{point}");
        }
    }
}

fn rejected(args: &[&str]) -> String {
    let mut all = vec!["sweep", ACK];
    all.extend_from_slice(args);
    let out = replicheck(&all);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn an_unknown_key_is_named_with_a_suggestion() {
    let err = rejected(&["--vary", "replica_ack_timout=300ms..3s"]);
    assert!(
        err.contains("--vary replica_ack_timout=300ms..3s: unknown policy key `replica_ack_timout`"),
        "{err}"
    );
    assert!(err.contains("did you mean `replica_ack_timeout`?"), "{err}");
}

#[test]
fn a_range_off_the_tick_is_named_with_its_value_and_the_tick() {
    let err = rejected(&["--vary", "replica_ack_timeout=350ms..3s"]);
    assert!(err.contains("key `replica_ack_timeout` = \"350ms\""), "{err}");
    assert!(err.contains("not a whole number of ticks (tick = 100ms)"), "{err}");
    let err = rejected(&["--vary", "replica_ack_timeout=500ms,1250ms"]);
    assert!(err.contains("key `replica_ack_timeout` = \"1250ms\""), "{err}");
    let err = rejected(&["--vary", "write_quorum=1..4"]);
    assert!(err.contains("key `write_quorum` = 4: must not exceed replication_factor = 3"), "{err}");
}

const PROD: &str = "examples/policies/production-2s.toml";
const CUT: &str = "examples/policies/ack-timeout-500ms.toml";

fn explain(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["sweep", ACK];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json", "--threads", "1"]);
    let out = replicheck(&all);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exit code"), doc)
}

/// `sweep --from BASE --to CANDIDATE` on the incident's rollout. The two policy files differ
/// in one knob only, replica_ack_timeout 2s -> 500ms (the rest equal, and equal to the
/// model's [policy]). Under coupled detection the deadline must exceed the worst round trip
/// of 1.4s: moving from 2s, 1400ms is the first value that breaks no_healthy_eviction and
/// churn_bounded (1500ms holds); moving back from 500ms, 1500ms is the first that restores
/// both. Both ends of each boundary are checked; bisection keeps the checked points few.
#[test]
fn explain_finds_the_smallest_breaking_move_and_the_nearest_safe_candidate() {
    let (code, doc) = explain(&["--from", PROD, "--to", CUT]);
    assert_eq!(code, 1, "a regression, as diff: {doc:#}");
    assert_eq!(doc["exit_code"], 1);
    let knobs = doc["knobs"].as_array().unwrap();
    assert_eq!(knobs.len(), 1, "{knobs:?}");
    assert_eq!(
        (knobs[0]["key"].as_str(), knobs[0]["base"].as_str()),
        (Some("replica_ack_timeout"), Some("2s"))
    );
    assert_eq!(knobs[0]["candidate"], "500ms");
    assert_eq!(knobs[0]["path"].as_array().unwrap().len(), 16);
    assert_eq!(doc["regressions"], serde_json::json!(["no_healthy_eviction", "churn_bounded"]));
    let checked = doc["checked"].as_array().unwrap().len();
    assert!(checked <= 12, "bisection, not every point of both walks: {checked} checked");

    let breaking = &doc["breaking"][0];
    assert_eq!(breaking["knob"], "replica_ack_timeout");
    for name in ["no_healthy_eviction", "churn_bounded"] {
        let r = &breaking["results"][name];
        assert_eq!(r["result"], "found", "{name}: {r}");
        assert_eq!((r["at"].as_str(), r["before"].as_str()), (Some("1400ms"), Some("1500ms")), "{name}");
        assert_eq!((r["checked"].as_bool(), r["before_checked"].as_bool()), (Some(true), Some(true)));
        // Every value from 2s down to 1500ms holds (checked or inferred), 1400ms on is violated.
        let cells: Vec<&str> =
            breaking["cells"][name].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        assert!(cells[..6].iter().all(|c| c.ends_with("holds")), "{name}: {cells:?}");
        assert!(cells[6..].iter().all(|c| c.ends_with("violated")), "{name}: {cells:?}");
    }
    assert!(breaking["explore_command"].as_str().unwrap().contains("1400ms"));

    let restoring = &doc["restoring"][0];
    assert_eq!((restoring["from"].as_str(), restoring["to"].as_str()), (Some("500ms"), Some("2s")));
    let r = &restoring["results"]["all"];
    assert_eq!(r["result"], "found", "{r}");
    assert_eq!((r["at"].as_str(), r["before"].as_str()), (Some("1500ms"), Some("1400ms")));
    assert_eq!((r["checked"].as_bool(), r["before_checked"].as_bool()), (Some(true), Some(true)));
}

/// The text report says it in a sentence each; swapped, the change is a fix: exit 0.
#[test]
fn explain_text_and_no_regression() {
    let out = replicheck(&["sweep", ACK, "--from", PROD, "--to", CUT, "--threads", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("replica_ack_timeout 2s -> 1400ms already breaks no_healthy_eviction, churn_bounded"),
        "{text}"
    );
    assert!(
        text.contains("replica_ack_timeout 500ms -> 1500ms restores no_healthy_eviction, churn_bounded"),
        "{text}"
    );

    let (code, doc) = explain(&["--from", CUT, "--to", PROD]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["regressions"], serde_json::json!([]));
    assert_eq!(doc["breaking"], serde_json::json!([]));
}

/// A limit that cuts the explorations short leaves no verdict: incomplete, exit 3, never holds.
#[test]
fn explain_cut_short_is_incomplete() {
    let (code, doc) = explain(&["--from", PROD, "--to", CUT, "--max-states", "300"]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["regressions"], serde_json::json!([]));
    for p in doc["properties"].as_array().unwrap() {
        assert_ne!(p["candidate"], "holds", "{p}");
    }
}

/// Bad input: exit 2 and a message naming the file, the key and the value; never a panic.
#[test]
fn explain_bad_input_is_named() {
    let dir = std::env::temp_dir().join(format!("replicheck-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let typo = dir.join("typo.toml");
    std::fs::write(&typo, "replica_ack_timout = \"1s\"\n").unwrap();
    let quorum = dir.join("quorum.toml");
    std::fs::write(&quorum, "write_quorum = 4\n").unwrap();
    let cases: [(&str, Vec<&str>); 3] = [
        ("examples/policies/missing.toml", vec!["missing.toml"]),
        (
            typo.to_str().unwrap(),
            vec!["typo.toml", "replica_ack_timout", "did you mean `replica_ack_timeout`"],
        ),
        (quorum.to_str().unwrap(), vec!["quorum.toml", "write_quorum", "4"]),
    ];
    for (file, words) in cases {
        let out = replicheck(&["sweep", ACK, "--from", PROD, "--to", file]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        for w in words {
            assert!(err.contains(w), "{file}: `{w}` not in {err}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Two knobs differ: the candidate also lowers max_concurrent_evictions to 1. The regression
/// (no_healthy_eviction; churn_bounded now holds under the candidate) is the ack timeout's
/// doing alone: max_concurrent_evictions alone never breaks it, and moving it alone back does
/// not restore it; the ack timeout's walks give 1400ms and 1500ms as before.
#[test]
fn explain_names_the_knob_that_does_not_matter() {
    let dir = std::env::temp_dir().join(format!("replicheck-explain-two-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let two = dir.join("two.toml");
    std::fs::write(&two, "replica_ack_timeout = \"500ms\"\nmax_concurrent_evictions = 1\n").unwrap();
    let (code, doc) = explain(&["--from", PROD, "--to", two.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["regressions"], serde_json::json!(["no_healthy_eviction"]));
    let keys: Vec<&str> =
        doc["knobs"].as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap()).collect();
    assert_eq!(keys, vec!["replica_ack_timeout", "max_concurrent_evictions"]);
    let breaking = doc["breaking"].as_array().unwrap();
    assert_eq!(breaking[0]["results"]["no_healthy_eviction"]["at"], "1400ms");
    assert_eq!(breaking[1]["results"]["no_healthy_eviction"]["result"], "never");
    let restoring = doc["restoring"].as_array().unwrap();
    assert_eq!(restoring[0]["results"]["all"]["at"], "1500ms");
    assert_eq!(restoring[1]["results"]["all"]["result"], "never");
}

/// The walk crosses a rule between keys (issue 36), on the detector model (heartbeats every
/// 500ms): the base detects with suspect_after 1s and dead_after 1600ms, the candidate with
/// 800ms and 800ms. Walking dead_after alone from 1600ms down, with suspect_after at the base's
/// 1s, reaches 900ms and 800ms, which are not policies; walking suspect_after back up to 1s
/// with dead_after at 800ms likewise. Those values are skipped and listed, never blamed on a
/// file, and the sweep finishes with its explanation.
#[test]
fn explain_skips_generated_points_that_break_a_rule_between_keys() {
    const DETECTOR: &str = "models/detector-timing.toml";
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.toml");
    std::fs::write(&base, "suspect_after = \"1s\"\ndead_after = \"1600ms\"\n").unwrap();
    let candidate = dir.path().join("candidate.toml");
    std::fs::write(&candidate, "suspect_after = \"800ms\"\ndead_after = \"800ms\"\n").unwrap();
    let (base, candidate) = (base.to_str().unwrap(), candidate.to_str().unwrap());
    let (code, doc) = json(&[DETECTOR, "--from", base, "--to", candidate, "--samples", "0"]);
    assert_eq!(code, 1, "a regression: {doc:#}");
    assert_eq!(doc["regressions"], serde_json::json!(["no_healthy_eviction"]));
    let walk = |side: &str, knob: &str| -> Value {
        let walks = doc[side].as_array().unwrap();
        walks.iter().find(|w| w["knob"] == knob).unwrap_or_else(|| panic!("{doc:#}")).clone()
    };
    let skipped = |w: &Value| -> Vec<String> {
        w["skipped"].as_array().unwrap().iter().map(|s| s["value"].as_str().unwrap().to_string()).collect()
    };
    // dead_after 1600ms -> 800ms over suspect_after = 1s: 900ms and 800ms are not policies.
    let down = walk("breaking", "dead_after");
    assert_eq!(skipped(&down), ["900ms", "800ms"]);
    assert_eq!(down["values"].as_array().unwrap().len(), 7, "1600ms..1s: {down}");
    assert_eq!(down["results"]["no_healthy_eviction"]["at"], "1500ms", "{down}");
    let reason = down["skipped"][0]["reason"].as_str().unwrap();
    assert_eq!(reason, "key `suspect_after` = \"1s\": must not exceed dead_after = \"900ms\"");
    // suspect_after 800ms -> 1s over dead_after = 800ms: 900ms and 1s are not policies.
    let up = walk("restoring", "suspect_after");
    assert_eq!(skipped(&up), ["900ms", "1s"]);
    assert_eq!(up["results"]["all"]["result"], "never");
    // The walks that stay valid skip nothing.
    assert!(skipped(&walk("breaking", "suspect_after")).is_empty());
    assert!(skipped(&walk("restoring", "dead_after")).is_empty());
    for c in doc["checked"].as_array().unwrap() {
        assert!(!c["point"].as_str().unwrap().contains("dead_after=900ms"), "{c}");
    }

    let out = replicheck(&[
        "sweep",
        DETECTOR,
        "--from",
        base,
        "--to",
        candidate,
        "--threads",
        "1",
        "--samples",
        "0",
    ]);
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    assert!(
        text.contains("skipped 2 values of dead_after, not a valid policy with the other knobs at the base: 900ms, 800ms"),
        "{text}"
    );
    assert!(
        text.contains("skipped 2 values of suspect_after, not a valid policy with the other knobs at the candidate: 900ms, 1s"),
        "{text}"
    );
    assert!(text.contains(", 4 skipped (not valid policies)"), "{text}");
    assert!(!err.contains("error"), "{err}");
}
