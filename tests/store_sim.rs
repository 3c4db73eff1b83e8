//! `replicheck store sim`: the store's code on a simulated network and clock, through the real
//! binary. A seed gives the same run byte for byte; a correct shell fails no seed of a variant
//! whose properties hold; each deliberately broken shell (`REPLICHECK_SHELL_FAULT`) is found
//! within the 20 seeds docs/store-sim.md promises, on a variant where the unbroken shell fails
//! none; a variant the model says loses writes loses them in some seed. Every run here is a
//! fraction of a second: simulated time costs only its computation.

use std::process::{Command, Output};

fn sim(args: &[&str], shell_fault: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_replicheck"));
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args(["store", "sim"]).args(args);
    command.env_remove("REPLICHECK_SHELL_FAULT");
    if let Some(fault) = shell_fault {
        command.env("REPLICHECK_SHELL_FAULT", fault);
    }
    command.output().expect("run replicheck")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(out: &Output) -> String {
    format!("{}{}", stdout(out), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn a_seed_gives_the_same_run_twice_byte_for_byte() {
    let dir = std::env::temp_dir().join(format!("replicheck-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs: Vec<(String, [Vec<u8>; 2])> = (0..2)
        .map(|i| {
            let run_dir = dir.join(format!("run{i}"));
            std::fs::create_dir_all(&run_dir).unwrap();
            let (history, trace) = (run_dir.join("h.edn"), run_dir.join("t.jsonl"));
            let args =
                ["models/basic-quorum.toml", "--variant", "write-quorum-1", "--seed", "6", "--seeds", "1"];
            let kept =
                ["--every-seed", "--history", history.to_str().unwrap(), "--trace", trace.to_str().unwrap()];
            let out = sim(&[&args[..], &kept[..]].concat(), None);
            let shown = stdout(&out).replace(run_dir.to_str().unwrap(), "DIR");
            let files = [history, trace].map(|f| std::fs::read(f).expect("a kept file"));
            (shown, files)
        })
        .collect();
    assert_eq!(runs[0].0, runs[1].0, "the same seed printed two different runs");
    assert_eq!(runs[0].1[0], runs[1].1[0], "the same seed wrote two different histories");
    assert_eq!(runs[0].1[1], runs[1].1[1], "the same seed wrote two different traces");
    assert!(runs[0].0.contains("trace of seed 6 written to DIR/t.jsonl"), "{}", runs[0].0);
    // Seed 6 is one where the single-replica ack is read past (the model's counterexample).
    assert!(runs[0].0.contains("acked_writes_persist violated (as the model expects)"), "{}", runs[0].0);
    assert!(runs[0].1[0].len() > 100, "a history with operations");
    // Several seeds, the continuous load: the same lines again.
    let many = ["models/ack-timeout-eviction.toml", "--variant", "incident", "--seeds", "5", "--every-seed"];
    let (a, b) = (
        sim(&[&many[..], &["--load", "continuous"]].concat(), None),
        sim(&[&many[..], &["--load", "continuous"]].concat(), None),
    );
    assert_eq!(stdout(&a), stdout(&b));
    assert_eq!(stdout(&a).matches("\nseed ").count(), 5, "{}", stdout(&a));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_variant_that_loses_writes_loses_them_and_one_that_does_not_fails_no_seed() {
    let lossy = sim(&["models/basic-quorum.toml", "--variant", "write-quorum-1", "--seeds", "20"], None);
    let report = stdout(&lossy);
    assert_eq!(lossy.status.code(), Some(0), "expected violations are not failures:\n{}", text(&lossy));
    assert!(report.contains("acked_writes_persist   violated   1 of 20 (first: seed 6)"), "{report}");
    let sound = sim(&["models/basic-quorum.toml", "--variant", "default", "--seeds", "20"], None);
    let report = stdout(&sound);
    assert_eq!(sound.status.code(), Some(0), "{}", text(&sound));
    assert!(report.contains("acked_writes_persist   holds      none of 20"), "{report}");
    assert!(report.contains("trace against the model: diverges in 0 of 20 seeds"), "{report}");
    assert!(report.contains("no seed violated a property expected to hold"), "{report}");
}

/// Seed 71 arms the drop fault at 5.888 s and heals before a lossy message comes: the drop is
/// called off at the heal (it lost n4's ping reply at 6.8 s, after the heal, which no fault of
/// the model's schedule allows, and the trace diverged).
#[test]
fn a_drop_the_heal_did_not_spend_loses_nothing_after_it() {
    let args = [
        "models/ack-timeout-lossy-link.toml",
        "--variant",
        "fixed",
        "--seed",
        "71",
        "--seeds",
        "1",
        "--every-seed",
    ];
    let out = sim(&args, None);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(report.contains("drop (one message) from 5.888 s"), "{report}");
    assert!(report.contains("trace against the model: diverges in 0 of 1 seeds"), "{report}");
}

#[test]
fn several_coordinators_share_the_membership_and_the_capacities() {
    // Two routers, each writing within its own share: together they breach a partition's
    // capacity (the model's `incident`), and `fixed` counts the fleet's writes.
    let incident =
        sim(&["models/capacity-routing-two-routers.toml", "--variant", "incident", "--seeds", "10"], None);
    let report = stdout(&incident);
    assert_eq!(incident.status.code(), Some(0), "{}", text(&incident));
    assert!(report.contains("capacity_respected     violated   "), "{report}");
    assert!(!report.contains("capacity_respected     violated   none"), "{report}");
    // Each coordinator's requests, judged on the link from its own zone.
    assert!(report.contains("trace against the model: diverges in 0 of 10 seeds"), "{report}");
    let fixed =
        sim(&["models/capacity-routing-two-routers.toml", "--variant", "fixed", "--seeds", "10"], None);
    assert_eq!(fixed.status.code(), Some(0), "{}", text(&fixed));
    assert!(stdout(&fixed).contains("capacity_respected     holds      none of 10"), "{}", stdout(&fixed));
}

/// (shell fault, model, variant): the variant fails no seed with the store's shell, and the
/// broken shell fails one of the first 20.
const BROKEN_SHELLS: [(&str, &str, &str); 3] = [
    ("drop_late_replies", "models/ack-timeout-eviction-continuous.toml", "fixed"),
    ("wrong_node_replies", "models/remirror-storm.toml", "throttled"),
    ("fast_clock", "models/ack-timeout-eviction-continuous.toml", "rollback"),
];

#[test]
fn each_broken_shell_is_found_within_twenty_seeds() {
    for (fault, model, variant) in BROKEN_SHELLS {
        let args = [model, "--variant", variant, "--seeds", "20"];
        let sound = sim(&args, None);
        assert_eq!(sound.status.code(), Some(0), "{model} / {variant}, the store's shell:\n{}", text(&sound));
        let broken = sim(&args, Some(fault));
        let report = stdout(&broken);
        assert_eq!(
            broken.status.code(),
            Some(1),
            "{fault} on {model} / {variant} not found:\n{}",
            text(&broken)
        );
        assert!(report.contains("first failing seed: "), "{report}");
    }
    // How each shows: a trace the model's environment does not allow, a store that will not
    // answer after the heal, a healthy replica evicted.
    let shown = |i: usize| {
        stdout(&sim(
            &[BROKEN_SHELLS[i].1, "--variant", BROKEN_SHELLS[i].2, "--seeds", "20"],
            Some(BROKEN_SHELLS[i].0),
        ))
    };
    assert!(shown(0).contains("trace diverges from the model at line"), "{}", shown(0));
    assert!(shown(1).contains("the store is unavailable"), "{}", shown(1));
    assert!(shown(2).contains("no_healthy_eviction violated (the model expects it to hold)"), "{}", shown(2));
}

#[test]
fn what_it_cannot_run_is_refused_with_the_reason() {
    let cases: [(&[&str], &str); 4] = [
        (&["models/basic-quorum.toml", "--seeds", "0"], "--seeds 0: must be 1 to 100000"),
        (
            &["models/basic-quorum.toml", "--time-scale", "10000"],
            "--time-scale 10000: `replica_ack_timeout` = 100000 ms: the store's timers count at most 65535 ms",
        ),
        (
            &["models/detector-timing.toml", "--load", "continuous"],
            "the model has no clients to play a continuous load",
        ),
        (&["models/basic-quorum.toml", "--variant", "nope"], "no variant \"nope\""),
    ];
    for (args, expected) in cases {
        let out = sim(args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(expected), "{args:?}: {}", text(&out));
    }
    let out = sim(&["models/basic-quorum.toml", "--seeds", "1"], Some("slow_disk"));
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out).contains("REPLICHECK_SHELL_FAULT=slow_disk: not a shell fault"), "{}", text(&out));
}

/// A leader-family seed's trace, kept with `--trace`: `conform` finds every message's fate a
/// behaviour of the model, and names a delivery taken out of it.
#[test]
fn a_kept_leader_trace_is_checked_again_and_a_lost_message_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let model = "models/unfenced-primary.toml";
    let out = sim(&[model, "--seed", "3", "--seeds", "1", "--trace", trace.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let conform = |path: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["conform", path.to_str().unwrap(), "--model", model])
            .output()
            .expect("run replicheck")
    };
    let checked = conform(&trace);
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    assert!(
        stdout(&checked).contains("every message's fate is a behaviour of model unfenced-primary"),
        "{}",
        text(&checked)
    );
    // The first heartbeat the manager sent n2, never delivered: nothing in the model loses it.
    let kept = std::fs::read_to_string(&trace).unwrap();
    let ping = kept
        .lines()
        .position(|l| l.contains(r#""from":{"coordinator":0},"to":{"node":1},"msg":"ping""#))
        .expect("the manager pings n2");
    let id = kept.lines().nth(ping).unwrap().split(r#""id":"#).nth(1).unwrap().split(',').next().unwrap();
    let tampered: String = kept
        .lines()
        .filter(|l| !(l.starts_with(r#"{"deliver":"#) && l.ends_with(&format!(r#""id":{id}}}}}"#))))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(tampered.lines().count() + 1, kept.lines().count(), "one delivery taken out");
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, tampered).unwrap();
    let checked = conform(&broken);
    assert_eq!(checked.status.code(), Some(1), "{}", text(&checked));
    let expected = format!(
        "line {} is not a behaviour of model unfenced-primary: the ping the coordinator sent to n2",
        ping + 1
    );
    assert!(stdout(&checked).contains(&expected), "{}", text(&checked));
    assert!(stdout(&checked).contains("never reached n2's machine"), "{}", text(&checked));
}

/// The leader family's own code (each node's replica loop on its redb, the coordinator's
/// failover manager on its state file, as `store up --replication leader` runs them) on the
/// simulated network and clock: each incident's violation is met by a seed of the model's own
/// load, the variants the model says are safe fail no seed, and a seed gives the same run twice.
#[test]
fn the_leader_family_runs_on_the_simulated_store() {
    let met: [(&str, &str, &str); 3] = [
        // n2 down as the write arrives, n1 acks it alone, n1 crashes, n2 is promoted unclean.
        ("models/in-sync-unclean.toml", "862", "acked_writes_persist   violated   1 of 1 (first: seed 862)"),
        // The asynchronous ack, then the east cut before the follower has the write.
        ("models/async-failover.toml", "1280", "linearizable           violated   1 of 1 (first: seed 1280)"),
        // The slow link deposes a live primary, which still takes a write in the old epoch.
        ("models/unfenced-primary.toml", "3", "single_primary         violated   1 of 1 (first: seed 3)"),
    ];
    for (model, seed, expected) in met {
        let out = sim(&[model, "--variant", "default", "--seed", seed, "--seeds", "1"], None);
        let report = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{model}:\n{}", text(&out));
        assert!(report.contains(expected), "{model}:\n{report}");
        // Every message between the machines arrived within its link's latency, or was lost
        // where the model loses it (a receiver down, a cut, the run's end).
        assert!(report.contains("trace against the model: diverges in 0 of 1 seeds"), "{report}");
    }
    for (model, variant) in [
        ("models/async-failover.toml", "semi-sync"),
        ("models/in-sync-unclean.toml", "min-in-sync-2-clean"),
        ("models/unfenced-primary.toml", "fencing"),
    ] {
        for load in ["model", "continuous"] {
            let out = sim(&[model, "--variant", variant, "--seeds", "60", "--load", load], None);
            let report = stdout(&out);
            assert_eq!(out.status.code(), Some(0), "{model} {variant} {load}:\n{}", text(&out));
            assert!(report.contains("no seed violated a property expected to hold"), "{report}");
            assert!(report.contains("single_primary         holds      none of 60"), "{report}");
            assert!(report.contains("trace against the model: diverges in 0 of 60 seeds"), "{report}");
        }
    }
    // The unfenced primary's lost write is on no client's read: the clients' history stays
    // linearizable, as the model says (the checker's final reads judge acked_writes_persist).
    let args = ["models/unfenced-primary.toml", "--seeds", "120", "--every-seed"];
    let (a, b) = (sim(&args, None), sim(&args, None));
    assert_eq!(stdout(&a), stdout(&b), "the same seeds printed two different runs");
    assert!(
        stdout(&a).contains("acked_writes_persist   violated   4 of 120 (first: seed 12)"),
        "{}",
        stdout(&a)
    );
    assert!(stdout(&a).contains("linearizable           holds      none of 120"), "{}", stdout(&a));
}
