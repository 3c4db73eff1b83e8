//! `check --workers/--processes`: distributed exploration on timely dataflow gives the counts,
//! verdicts and counterexample lengths of a plain `check`, with worker threads in one process
//! and with separate processes on loopback; bad cluster flags are refused with exit 2.

#[path = "support/bin.rs"]
mod bin;

use bin::{replicheck, root, stderr, stdout};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

/// Short library models (each well under a second), with the variant to run if not all.
const MODELS: [(&str, Option<&str>); 4] = [
    ("models/rebalancer-compaction.toml", None),
    ("models/capacity-routing-bypass.toml", None),
    ("models/hot-partition-retry-storm.toml", None),
    ("models/ack-timeout-eviction.toml", Some("rollback")),
];

/// One worker per state in the shared levels: the frontier is split as early as it can be, so
/// these small models really are explored across the workers.
const SHARED_FRONTIER: &str = "1";

fn args<'a>(model: &'a str, variant: Option<&'a str>, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["check", model, "--format", "json", "--quiet"];
    if let Some(v) = variant {
        a.extend(["--variant", v]);
    }
    a.extend(extra);
    a
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("a JSON report ({e}): {text}"))
}

/// What must not change with the worker or process count: per run its counts, verdicts and
/// the length of each counterexample (and where a lasso's loop starts).
fn comparable(report: &Value) -> Vec<Value> {
    report["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            let properties: Vec<Value> = r["properties"]
                .as_array()
                .expect("properties")
                .iter()
                .map(|p| {
                    let cx = &p["counterexample"];
                    serde_json::json!({
                        "name": p["name"],
                        "found": p["found"],
                        "steps": cx["steps"].as_array().map(Vec::len),
                        "loop_from_step": cx["loop_from_step"],
                    })
                })
                .collect();
            serde_json::json!({
                "variant": r["variant"],
                "unique_states": r["unique_states"],
                "transitions": r["transitions"],
                "max_depth": r["max_depth"],
                "complete": r["complete"],
                "properties": properties,
            })
        })
        .collect()
}

/// The one-process engine, unreduced: the distributed engine has no partial-order reduction,
/// and none of these models has silence regions (coupled or continuous detection), so this is
/// the graph it explores.
fn plain(model: &str, variant: Option<&str>) -> Value {
    let out = replicheck(&args(model, variant, &["--reduce", "none"]));
    assert!(out.status.code().is_some_and(|c| c <= 1), "{model}: {}", stderr(&out));
    json(&stdout(&out))
}

/// Every run of `report` was spread over `workers` workers in `processes` processes, past the
/// shared levels, with its liveness properties decided on process 0.
fn assert_distributed(report: &Value, processes: u64, workers: u64, what: &str) {
    for r in report["runs"].as_array().expect("runs") {
        let d = &r["distributed"];
        assert_eq!(d["processes"], processes, "{what}: {d}");
        assert_eq!(d["workers"], workers, "{what}: {d}");
        let has_liveness = r["properties"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "converges" || p["name"] == "ops_complete");
        let expected = if has_liveness { Value::from("graph gathered to process 0") } else { Value::Null };
        assert_eq!(d["liveness"], expected, "{what}: {d}");
        assert!(
            d["shared_levels"].as_u64().unwrap() < r["max_depth"].as_u64().unwrap(),
            "{what}: every level was run by every worker, nothing was distributed: {d}"
        );
    }
}

#[test]
fn two_workers_in_one_process_match_plain_check() {
    for (model, variant) in MODELS {
        let expected = plain(model, variant);
        let out =
            replicheck(&args(model, variant, &["--workers", "2", "--shared-frontier", SHARED_FRONTIER]));
        assert_eq!(
            out.status.code(),
            Some(expected["exit_code"].as_i64().unwrap() as i32),
            "{}",
            stderr(&out)
        );
        let report = json(&stdout(&out));
        assert_eq!(comparable(&report), comparable(&expected), "{model} --workers 2");
        assert_distributed(&report, 1, 2, model);
        assert!(expected["runs"][0].get("distributed").is_none(), "a plain check has no `distributed`");
        for r in report["runs"].as_array().unwrap() {
            assert_eq!(r["reduction"], "none", "a distributed check says it did not reduce");
        }
    }
}

/// A model large enough that the shared levels grow memory and the frontier is split with the
/// default `--shared-frontier`: the per-level checks (the memory bound among them) must not
/// stop it, and the work must be shared.
#[test]
fn a_larger_model_on_two_workers_matches_plain_check_and_is_shared() {
    let (model, variant) = ("models/coordinator-restart.toml", Some("default"));
    let expected = plain(model, variant);
    let out = replicheck(&args(model, variant, &["--workers", "2"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json(&stdout(&out));
    assert_eq!(comparable(&report), comparable(&expected), "{model} --workers 2");
    assert_distributed(&report, 1, 2, model);
    let kept: Vec<u64> = report["runs"][0]["distributed"]["states_kept_per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_u64().unwrap())
        .collect();
    let (least, most) = (*kept.iter().min().unwrap(), *kept.iter().max().unwrap());
    assert!(least * 3 >= most * 2, "the workers' shares are within 2:3 of each other: {kept:?}");
}

/// Silence regions are a quotient of the fingerprints alone, so the distributed engine uses
/// them as the one-process engine does (it has no ample sets). Where ample sets do not apply
/// (the leader family) a distributed check explores exactly a plain check's graph; where they
/// do (the rebalancer's endless moves, rounds-judged detection, a crashable node) it explores
/// fewer states than unreduced, with the same verdicts and safety counterexamples, and lassos
/// that still close.
#[test]
fn the_distributed_engine_explores_silence_regions() {
    let (model, variant) = ("models/async-failover.toml", Some("default"));
    let expected = json(&stdout(&replicheck(&args(model, variant, &[]))));
    let out = replicheck(&args(model, variant, &["--workers", "2", "--shared-frontier", SHARED_FRONTIER]));
    let report = json(&stdout(&out));
    assert_eq!(comparable(&report), comparable(&expected), "{model} --workers 2");
    assert_distributed(&report, 1, 2, model);
    // `--reduce none` turns the regions off in the distributed engine too.
    let out = replicheck(&args(model, variant, &["--workers", "2", "--reduce", "none"]));
    let unreduced = json(&stdout(&out));
    assert_eq!(comparable(&unreduced), comparable(&plain(model, variant)), "{model} --reduce none");
    assert_eq!(unreduced["runs"][0]["silence_regions"], false);
    assert!(
        unreduced["runs"][0]["unique_states"].as_u64() > report["runs"][0]["unique_states"].as_u64(),
        "regions merge states of this model"
    );
    for r in [&report, &expected] {
        assert_eq!(r["runs"][0]["reduction"], "none", "{model}: the leader family has no ample sets");
        assert_eq!(r["runs"][0]["silence_regions"], true, "{model}: its manager judges silence at rounds");
        assert_eq!(r["runs"][0]["ample_sets_refused"], "the leader family's machines");
    }

    let dir = tempfile::tempdir().unwrap();
    let file = bin::rebalancer_with_rounds_detection(dir.path());
    let model = file.to_str().unwrap();
    let variant = Some("incident");
    let unreduced = json(&stdout(&replicheck(&args(model, variant, &["--reduce", "none"]))));
    let out = replicheck(&args(model, variant, &["--workers", "2", "--shared-frontier", SHARED_FRONTIER]));
    assert_eq!(out.status.code(), Some(unreduced["exit_code"].as_i64().unwrap() as i32), "{}", stderr(&out));
    let report = json(&stdout(&out));
    assert_distributed(&report, 1, 2, model);
    let (r, u) = (&report["runs"][0], &unreduced["runs"][0]);
    assert_eq!((&r["reduction"], &r["silence_regions"]), (&"none".into(), &true.into()), "{r}");
    assert_eq!(r["ample_sets_refused"], "the distributed engine", "{r}");
    assert!(r["unique_states"].as_u64() < u["unique_states"].as_u64(), "states are merged: {r}");
    let mut lassos = 0;
    for (p, q) in r["properties"].as_array().unwrap().iter().zip(u["properties"].as_array().unwrap()) {
        assert_eq!((&p["name"], &p["found"]), (&q["name"], &q["found"]), "the same verdict");
        let (cx, cq) = (&p["counterexample"], &q["counterexample"]);
        assert_eq!(cx.is_null(), cq.is_null(), "{}: a counterexample both ways or neither", p["name"]);
        if cq["loop_from_step"].is_null() {
            // A bisimulation keeps the shortest distance to a violation.
            assert_eq!(
                cx["steps"].as_array().map(Vec::len),
                cq["steps"].as_array().map(Vec::len),
                "{}",
                p["name"]
            );
        } else {
            assert!(cx["loop_from_step"].is_u64(), "{}: a lasso: {cx}", p["name"]);
            lassos += 1;
        }
    }
    assert!(lassos >= 1, "the incident's endless moves are a lasso");
}

/// `bench --distributed` times both engines on one graph, the unreduced one: on a model with
/// silence regions (which only the distributed engine's default would merge) every row still
/// has the same counts, so it reports instead of refusing.
#[test]
fn bench_distributed_compares_one_graph_where_silence_regions_apply() {
    let args =
        ["bench", "--distributed", "models/detector-timing.toml", "--variant", "rounds", "--processes", "1"];
    let out = replicheck(&args);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    let unreduced = plain("models/detector-timing.toml", Some("rounds"));
    let states = unreduced["runs"][0]["unique_states"].to_string();
    let rows: Vec<&str> =
        text.lines().filter(|l| l.starts_with("engine") || l.contains("process(es)")).collect();
    assert_eq!(rows.len(), 2, "the engine's row and one process's: {text}");
    for row in rows {
        assert!(row.split_whitespace().any(|w| w == states), "{states} states in: {row}");
    }
}

/// `count` distinct free ports on loopback: all held until each is chosen (one released before
/// the next bind could be handed out again), then released for the processes to bind.
fn free_ports(count: usize) -> Vec<u16> {
    let held: Vec<_> = (0..count).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// Run `check` as `processes` OS processes of one timely computation on 127.0.0.1; process
/// 0's report, after checking that the others exit 0 with nothing on stdout.
fn run_processes(model: &str, variant: Option<&str>, processes: usize, dir: &Path) -> Value {
    let hostfile = dir.join(format!("hosts-{processes}"));
    let hosts: Vec<String> = free_ports(processes).iter().map(|port| format!("127.0.0.1:{port}")).collect();
    std::fs::write(&hostfile, hosts.join("\n") + "\n").unwrap();
    let hostfile = hostfile.to_str().unwrap().to_string();
    let n = processes.to_string();
    let children: Vec<_> = (0..processes)
        .map(|i| {
            let i = i.to_string();
            let extra =
                ["--processes", &n, "--process", &i, "--hostfile", &hostfile, "--shared-frontier", "1"];
            Command::new(env!("CARGO_BIN_EXE_replicheck"))
                .args(args(model, variant, &extra))
                .current_dir(root())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("replicheck starts")
        })
        .collect();
    let mut report = None;
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("replicheck finishes");
        if i == 0 {
            assert!(out.status.code().is_some_and(|c| c <= 1), "process 0: {}", stderr(&out));
            report = Some(json(&stdout(&out)));
        } else {
            assert_eq!(out.status.code(), Some(0), "process {i}: {}", stderr(&out));
            assert_eq!(stdout(&out), "", "process {i} prints no report");
        }
    }
    report.expect("process 0 reports")
}

#[test]
fn two_and_four_processes_on_loopback_match_plain_check() {
    let dir = tempfile::tempdir().unwrap();
    for (model, variant) in MODELS {
        let expected = plain(model, variant);
        for processes in [2, 4] {
            let report = run_processes(model, variant, processes, dir.path());
            assert_eq!(report["exit_code"], expected["exit_code"], "{model} --processes {processes}");
            assert_eq!(comparable(&report), comparable(&expected), "{model} --processes {processes}");
            assert_distributed(&report, processes as u64, processes as u64, model);
        }
    }
}

#[test]
fn bad_cluster_flags_are_refused_naming_the_flag_or_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = MODELS[0].0;
    let malformed = dir.path().join("malformed");
    std::fs::write(&malformed, "127.0.0.1:7001\nnot an address\n").unwrap();
    let short = dir.path().join("short");
    std::fs::write(&short, "127.0.0.1:7001\n").unwrap();
    let missing = dir.path().join("missing");
    let (malformed, short, missing) =
        (malformed.to_str().unwrap(), short.to_str().unwrap(), missing.to_str().unwrap());
    let directory = dir.path().to_str().unwrap();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["--workers", "0"], vec!["--workers", "0"]),
        (
            vec!["--processes", "2", "--process", "2", "--hostfile", short],
            vec!["--process", "2", "--processes 2"],
        ),
        (vec!["--processes", "2", "--process", "0"], vec!["--hostfile", "missing"]),
        (
            vec!["--processes", "2", "--process", "0", "--hostfile", missing],
            vec![missing, "--hostfile", "cannot read"],
        ),
        (
            vec!["--processes", "2", "--process", "0", "--hostfile", directory],
            vec![directory, "--hostfile", "cannot read"],
        ),
        (
            vec!["--processes", "2", "--process", "1", "--hostfile", malformed],
            vec![malformed, "--hostfile", "line 2", "not an address"],
        ),
        (
            vec!["--processes", "2", "--process", "1", "--hostfile", short],
            vec![short, "1 address(es)", "--processes 2"],
        ),
        (vec!["--workers", "2", "--threads", "2"], vec!["--workers", "--threads"]),
    ];
    for (flags, names) in cases {
        let out = replicheck(&args(model, None, &flags));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(!err.contains("panicked"), "{flags:?}: {err}");
        assert_eq!(stdout(&out), "", "{flags:?}");
        for name in names {
            assert!(err.contains(name), "{flags:?}: the error names `{name}`: {err}");
        }
    }
}
