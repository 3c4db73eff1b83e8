//! Simulation (`check --simulate`): random walks find the library's incident violations from
//! a seed, report nothing false on the fixed policies, are deterministic by seed, and give
//! counterexamples that are behaviours of the model (replayed through the explorer's indices).

#[path = "support/bin.rs"]
mod bin;

use replicheck::check::simulate::{self, SimOptions, SimResult};
use replicheck::check::{plan, PolicyChoice};
use replicheck::config::{Found, PropertyName};
use replicheck::model::{properties, World, WorldConfig};
use stateright::Model;
use std::path::PathBuf;

fn sim(model: &str, variant: &str, opts: &SimOptions) -> SimResult {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let jobs = plan(&[root.join(model)], &PolicyChoice::Variants(Some(variant.into()))).unwrap();
    assert_eq!(jobs.len(), 1);
    simulate::simulate(&jobs[0], opts).unwrap()
}

fn found(r: &SimResult, name: PropertyName) -> Found {
    r.properties.iter().find(|p| p.name == name).unwrap().found
}

fn opts(runs: u64) -> SimOptions {
    SimOptions { runs, depth_steps: 300, ..SimOptions::default() }
}

#[test]
fn walks_find_the_basic_quorum_w1_violation() {
    let r = sim("models/basic-quorum.toml", "write-quorum-1", &opts(5000));
    assert_eq!(found(&r, PropertyName::AckedWritesPersist), Found::Violated, "{r:#?}");
    assert_eq!(simulate::exit_code(std::slice::from_ref(&r)), 0, "{r:#?}");
}

#[test]
fn walks_find_the_ack_timeout_incident() {
    let r = sim("models/ack-timeout-eviction.toml", "incident", &opts(5000));
    assert_eq!(found(&r, PropertyName::NoHealthyEviction), Found::Violated, "{r:#?}");
    assert_eq!(found(&r, PropertyName::ChurnBounded), Found::Violated, "{r:#?}");
}

#[test]
fn walks_report_nothing_on_the_fixed_policies() {
    for (model, variant) in [
        ("models/basic-quorum.toml", "default"),
        ("models/ack-timeout-eviction.toml", "fixed"),
        ("models/rebalancer-compaction.toml", "fixed"),
    ] {
        let r = sim(model, variant, &SimOptions { swarm: true, ..opts(1000) });
        assert!(r.properties.iter().all(|p| !p.contradicts()), "{model} {variant}: {r:#?}");
        assert!(r.runs == 1000 && r.steps > 1000, "{model} {variant}: {r:#?}");
    }
}

#[test]
fn walks_find_the_rebalancer_livelock_as_a_lasso() {
    let r = sim("models/rebalancer-compaction.toml", "incident", &opts(2000));
    let converges = r.properties.iter().find(|p| p.name == PropertyName::Converges).unwrap();
    assert_eq!(converges.found, Found::Violated, "{r:#?}");
    let cx = converges.counterexample.as_ref().unwrap();
    let loop_from = cx.loop_from_step.expect("a lasso marks its loop");
    assert!(loop_from >= 1 && loop_from <= cx.steps.len(), "{cx:#?}");
}

#[test]
fn the_same_seed_gives_the_same_walks() {
    let a = sim("models/ack-timeout-eviction.toml", "incident", &opts(300));
    let b = sim("models/ack-timeout-eviction.toml", "incident", &opts(300));
    let c = sim("models/ack-timeout-eviction.toml", "incident", &SimOptions { seed: 7, ..opts(300) });
    let key = |r: &SimResult| {
        (
            r.runs,
            r.steps,
            r.properties
                .iter()
                .map(|p| (p.run, p.counterexample.as_ref().map(|c| c.explorer_url.clone())))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(key(&a), key(&b));
    assert_ne!(key(&a), key(&c), "another seed walks elsewhere");
}

/// A safety counterexample's explorer path, replayed index by index in the model, ends in a
/// state that violates the property.
#[test]
fn a_walks_counterexample_is_a_behaviour_of_the_model() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let jobs = plan(
        &[root.join("models/basic-quorum.toml")],
        &PolicyChoice::Variants(Some("write-quorum-1".into())),
    )
    .unwrap();
    let r = simulate::simulate(&jobs[0], &SimOptions { swarm: true, ..opts(5000) }).unwrap();
    let p = r.properties.iter().find(|p| p.name == PropertyName::AckedWritesPersist).unwrap();
    let cx = p.counterexample.as_ref().expect("found in swarm mode too");
    let world = World::new(WorldConfig::new(&jobs[0].scenario, &jobs[0].policy).unwrap());
    let indices: Vec<usize> =
        cx.explorer_url.split("#/steps/").nth(1).unwrap().split('/').map(|i| i.parse().unwrap()).collect();
    let mut state = world.init_states().remove(indices[0]);
    for &i in &indices[1..] {
        let mut actions = Vec::new();
        world.actions(&state, &mut actions);
        state = world.next_state(&state, actions[i].clone()).unwrap();
    }
    assert!(!properties::holds(PropertyName::AckedWritesPersist, &world.cfg, &state));
    assert_eq!(indices.len() - 1, cx.steps.len());
}

/// The binary's exit code, stdout and stderr.
fn replicheck(args: &[&str]) -> (Option<i32>, String, String) {
    let out = bin::replicheck(args);
    (out.status.code(), bin::stdout(&out), bin::stderr(&out))
}

#[test]
fn check_simulate_reports_walks_and_their_exit_codes() {
    let (code, stdout, stderr) = replicheck(&[
        "check",
        "models/basic-quorum.toml",
        "--variant",
        "write-quorum-1",
        "--simulate",
        "--runs",
        "3000",
        "--seed",
        "1",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let run = &doc["simulations"][0];
    assert_eq!(run["variant"], "write-quorum-1");
    let acked =
        run["properties"].as_array().unwrap().iter().find(|p| p["name"] == "acked_writes_persist").unwrap();
    assert_eq!(acked["found"], "violated", "{stdout}");
    assert!(acked["counterexample"]["explorer_url"].as_str().unwrap().contains("#/steps/0/"));
    // Declared violations that no walk finds leave the verdict unconfirmed: exit 3, never "holds".
    let (code, stdout, _) = replicheck(&[
        "check",
        "models/basic-quorum.toml",
        "--variant",
        "write-quorum-1",
        "--simulate",
        "--runs",
        "1",
        "--depth",
        "3",
    ]);
    assert_eq!(code, Some(3), "{stdout}");
    assert!(stdout.contains("no violation in 1 walks") && !stdout.contains(" holds  "), "{stdout}");
    // Simulation flags need --simulate; JUnit is not produced for walks.
    assert_eq!(replicheck(&["check", "models/basic-quorum.toml", "--runs", "5"]).0, Some(2));
    let (code, _, stderr) =
        replicheck(&["check", "models/basic-quorum.toml", "--simulate", "--format", "junit"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("junit is not produced for --simulate"), "{stderr}");
}

#[test]
fn a_run_stops_at_the_memory_bound_with_a_partial_report() {
    let mut args = vec!["check", bin::SLOW_MODEL];
    args.extend(bin::SLOW_OPTIONS);
    args.extend(["--memory-max", "300M", "--format", "json"]);
    let (code, stdout, stderr) = replicheck(&args);
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let run = &doc["runs"][0];
    assert_eq!(run["complete"], false);
    let stopped = run["stopped"].as_str().unwrap();
    assert!(stopped.starts_with("memory bound of 300 MiB reached"), "{stopped}");
    assert!(stopped.contains("states in the frontier"), "{stopped}");
    assert!(run["unique_states"].as_u64().unwrap() > 10_000, "{run}");
    assert!(run["properties"].as_array().unwrap().iter().all(|p| p["found"] == "unknown"), "{run}");
    let (code, _, stderr) = replicheck(&["check", "models/basic-quorum.toml", "--memory-max", "lots"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--memory-max") && stderr.contains("lots"), "{stderr}");
}

fn json_of(args: &[&str], expect: i32) -> serde_json::Value {
    let (code, stdout, stderr) = replicheck(args);
    assert_eq!(code, Some(expect), "{args:?}: {stdout}{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// The parts of a run that do not depend on timing.
fn verdicts(run: &serde_json::Value) -> serde_json::Value {
    serde_json::json!([
        run["model"],
        run["variant"],
        run["unique_states"],
        run["transitions"],
        run["properties"]
    ])
}

#[test]
fn shards_merge_into_the_unsharded_report() {
    let dir = tempfile::tempdir().unwrap();
    let base =
        ["check", "models/basic-quorum.toml", "models/rebalancer-compaction.toml", "--format", "json", "-q"];
    let whole = json_of(&base, 0);
    let mut files = Vec::new();
    for (i, shard) in ["1/3", "0/3", "2/3"].iter().enumerate() {
        let doc = json_of(&[&base[..], &["--shard", shard]].concat(), 0);
        assert_eq!(doc["shard"]["runs_total"], whole["runs"].as_array().unwrap().len());
        let path = dir.path().join(format!("shard{i}.json"));
        std::fs::write(&path, doc.to_string()).unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    let merged =
        json_of(&[&["merge"][..], &files.iter().map(String::as_str).collect::<Vec<_>>()].concat(), 0);
    let runs = |d: &serde_json::Value| d["runs"].as_array().unwrap().iter().map(verdicts).collect::<Vec<_>>();
    assert_eq!(runs(&merged), runs(&whole), "merged shards are the unsharded check");
    assert!(merged.get("shard").is_none());
    // A missing shard, or one given twice, is named.
    let (code, _, stderr) = replicheck(&["merge", &files[0], &files[1]]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("shards missing: 2/3"), "{stderr}");
    let (code, _, stderr) = replicheck(&["merge", &files[0], &files[0], &files[1]]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("again"), "{stderr}");
    // A damaged report is an error naming it, not a panic (a huge count was a Vec of that
    // many slots) or a wrapped exit code (256 merged to 0).
    let damaged = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&files[1]).unwrap()).unwrap();
        edit(&mut doc);
        let path = dir.path().join("damaged.json");
        std::fs::write(&path, doc.to_string()).unwrap();
        path.to_str().unwrap().to_string()
    };
    let huge = damaged(&|d| d["shard"]["count"] = serde_json::json!(u64::MAX));
    let (code, _, stderr) = replicheck(&["merge", &huge]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("damaged.json") && stderr.contains("shards missing"), "{stderr}");
    let wrapped = damaged(&|d| d["exit_code"] = serde_json::json!(256));
    let (code, _, stderr) = replicheck(&["merge", &files[0], &wrapped, &files[2]]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("damaged.json") && stderr.contains("\"exit_code\" = 256"), "{stderr}");
}

#[test]
fn simulation_shards_merge_into_the_unsharded_simulation() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "check",
        "models/ack-timeout-eviction.toml",
        "--simulate",
        "--runs",
        "600",
        "--seed",
        "3",
        "--format",
        "json",
        "-q",
    ];
    let whole = json_of(&base, 0);
    let mut files = Vec::new();
    for shard in ["0/2", "1/2"] {
        let doc = json_of(&[&base[..], &["--shard", shard]].concat(), 0);
        let path = dir.path().join(format!("sim{}.json", &shard[..1]));
        std::fs::write(&path, doc.to_string()).unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    let merged = json_of(&["merge", &files[0], &files[1]], 0);
    let found = |d: &serde_json::Value| -> Vec<serde_json::Value> {
        d["simulations"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["properties"].as_array().unwrap().clone())
            .map(|p| {
                serde_json::json!([p["name"], p["found"], p["run"], p["counterexample"]["explorer_url"]])
            })
            .collect()
    };
    assert_eq!(found(&merged), found(&whole), "the same first violations, from the same walks");
}

/// A sweep's shards merge into the report of the whole sweep checked point by point:
/// boundaries between points of different shards included, each with its counterexample.
#[test]
fn sweep_shards_merge_into_the_exhaustive_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "sweep",
        "models/hot-partition-retry-storm.toml",
        "--variant",
        "incident",
        "--vary",
        "write_shard_suffixes=1..4",
        "--vary",
        "retry_budget=0..3",
        "--format",
        "json",
        "-q",
    ];
    let without_timing = |mut d: serde_json::Value| {
        d.as_object_mut().unwrap().remove("elapsed_ms");
        for c in d["checked"].as_array_mut().unwrap() {
            c.as_object_mut().unwrap().remove("elapsed_ms");
        }
        d
    };
    let whole = without_timing(json_of(&[&base[..], &["--exhaustive"]].concat(), 0));
    let mut files = Vec::new();
    for shard in ["2/3", "0/3", "1/3"] {
        let doc = json_of(&[&base[..], &["--shard", shard]].concat(), 0);
        let path = dir.path().join(format!("sweep{}.json", &shard[..1]));
        std::fs::write(&path, doc.to_string()).unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    let merged = without_timing(json_of(&["merge", &files[0], &files[1], &files[2]], 0));
    let boundaries: usize = whole["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["boundaries"].as_array().unwrap().len())
        .sum();
    assert!(boundaries > 0, "the sweep crosses a boundary: {whole}");
    assert_eq!(merged, whole, "merged sweep shards are the exhaustive sweep");

    // Shards of another sweep do not mix in.
    let other_args: Vec<&str> =
        base.iter().map(|&a| if a == "retry_budget=0..3" { "retry_budget=0..2" } else { a }).collect();
    let other = json_of(&[&other_args[..], &["--shard", "0/3"]].concat(), 0);
    let other_path = dir.path().join("other.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let (code, _, stderr) = replicheck(&["merge", other_path.to_str().unwrap(), &files[0], &files[2]]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("differs") && stderr.contains("different sweeps"), "{stderr}");
}
