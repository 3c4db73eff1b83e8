//! Issue 32: faults that end. A fault with a `duration` heals by itself within its window,
//! and time cannot pass its end, so no behaviour keeps it in force for ever: liveness is then
//! a question about a world that is healthy again.

#[path = "support/bin.rs"]
mod bin;

use bin::{check_json, json_property, lasso, replicheck, root, stderr};
use replicheck::config::{MenuFault, Resolved, Scenario};
use replicheck::engine::cycles::{self, CycleQuery};
use replicheck::engine::{self, Limits};
use replicheck::model::{Action, World, WorldState};
use stateright::Model;

const TIMED: &str = "tests/data/timed-faults.toml";
const TICK: u8 = 1;
const FAULT_IN_FORCE: u8 = 2;

fn scenario(path: &str) -> Scenario {
    Scenario::load(&root().join(path)).expect("the model loads")
}

fn world(scenario: &Scenario) -> World {
    World::new(Resolved::new(scenario, &scenario.variants[0].policy).expect("it resolves"))
}

/// Whether some fault of the menu is in force in `s`.
fn fault_in_force(s: &WorldState) -> bool {
    s.env.partitioned != 0 || s.env.degraded != 0 || s.nodes.iter().any(|n| !n.up)
}

/// Whether the explored graph has a cycle that passes time with a fault in force all along.
fn fault_kept_open_forever(world: &World) -> bool {
    let label = |from: &WorldState, a: &Action, _: &WorldState| {
        u8::from(*a == Action::Tick) * TICK + u8::from(fault_in_force(from)) * FAULT_IN_FORCE
    };
    let labeler: engine::EdgeLabeler<World> = &label;
    let e = engine::explore_labelled(world, &[], &Limits::default(), Some(labeler));
    assert!(e.complete());
    let query = CycleQuery { every_edge: FAULT_IN_FORCE, some_edge: TICK, ..CycleQuery::default() };
    cycles::find(e.graph.as_ref().expect("a labelled graph"), query).is_some()
}

#[test]
fn no_behaviour_keeps_a_fault_with_a_duration_in_force_for_ever() {
    let timed = scenario(TIMED);
    assert!(timed.faults.any_duration());
    assert!(!fault_kept_open_forever(&world(&timed)), "every timed fault ends");
    // The same menu without durations: a cut, a crash or a slow link may last for ever.
    let mut untimed = timed.clone();
    untimed.faults.crash_duration.iter_mut().for_each(|d| *d = None);
    untimed.faults.partition_duration.iter_mut().for_each(|d| *d = None);
    untimed.faults.degrade.iter_mut().for_each(|d| d.duration = None);
    assert!(fault_kept_open_forever(&world(&untimed)));
}

#[test]
fn a_timed_fault_ends_within_its_window_and_time_waits_for_it() {
    let timed = scenario(TIMED);
    let w = world(&timed);
    // Zone c (index 2) is cut off for 300ms to 600ms: 3 to 6 ticks.
    let c = 2;
    assert_eq!(timed.faults.duration(MenuFault::Partition(c)).map(|d| (d.lo, d.hi)), Some((3, 6)));
    let actions = |s: &WorldState| {
        let mut a = Vec::new();
        w.actions(s, &mut a);
        a
    };
    // Take every step due now but the cut's end, until time may pass (or nothing else is left).
    let settle = |mut s: WorldState| loop {
        let a = actions(&s);
        let Some(step) = a.iter().find(|a| !matches!(a, Action::Heal(_) | Action::Tick)) else { return s };
        if a.contains(&Action::Tick) {
            return s;
        }
        s = w.next_state(&s, step.clone()).expect("a step");
    };
    let mut s = w.next_state(&w.init_states().remove(0), Action::Partition(c)).expect("the cut");
    let mut ticks = 0;
    loop {
        s = settle(s);
        let a = actions(&s);
        let heal = a.contains(&Action::Heal(c));
        assert_eq!(heal, ticks >= 3, "the cut may heal from 3 ticks on, not before (at {ticks})");
        if !a.contains(&Action::Tick) {
            assert!(heal && ticks == 6, "time stops only at the window's end (at {ticks}): {a:?}");
            break;
        }
        s = w.next_state(&s, Action::Tick).expect("a tick");
        ticks += 1;
    }
    let healed = w.next_state(&s, Action::Heal(c)).expect("the heal");
    assert_eq!(healed.env.partitioned, 0);
    assert!(healed.env.ending.is_empty());
}

#[test]
fn the_remirror_storm_outlives_the_cut_with_every_fault_over() {
    let run = check_json("models/remirror-storm.toml", "incident", &[]);
    let (_, loop_actions) = lasso(&run, "converges");
    assert!(
        loop_actions.iter().any(|a| a.contains("queued: evict")),
        "the loop re-mirrors: {loop_actions:?}"
    );
    assert!(
        !loop_actions.iter().any(|a| a.contains("FAULT")),
        "no fault starts on the loop: {loop_actions:?}"
    );
    let cx = &json_property(&run, "converges")["counterexample"];
    let final_state = cx["final_state"].as_str().unwrap();
    assert!(!final_state.contains("DOWN") && !final_state.contains("by itself"), "{final_state}");
}

#[test]
fn durations_are_checked_where_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(root().join(TIMED)).unwrap();
    let cases = [
        (
            r#"crash = [{ node = "n1", duration = "200ms..500ms" }]"#,
            r#"crash = [{ node = "n1", duration = "250ms" }]"#,
            "faults.crash[0].duration",
        ),
        (
            r#"crash = [{ node = "n1", duration = "200ms..500ms" }]"#,
            r#"crash = ["coordinator", { node = "coordinator", duration = "1s" }]"#,
            "faults.crash[1].duration",
        ),
        (
            r#"partition = [{ zone = "c", duration = "300ms..600ms" }]"#,
            r#"partition = [{ zone = "c", duration = "600ms..300ms" }]"#,
            "faults.partition[0].duration",
        ),
        (
            r#"partition = [{ zone = "c", duration = "300ms..600ms" }]"#,
            r#"partition = ["c", { zone = "c", duration = "1s" }]"#,
            "faults.partition[1]",
        ),
        (
            r#"partition = [{ zone = "c", duration = "300ms..600ms" }]"#,
            r#"partition = [{ zone = "c", duration = "30s" }]"#,
            "faults.partition[0].duration",
        ),
        (
            r#"partition = [{ zone = "c", duration = "300ms..600ms" }]"#,
            r#"partition = [{ zone = "c", lasts = "1s" }]"#,
            "lasts",
        ),
    ];
    for (from, to, named) in cases {
        assert!(base.contains(from), "{from}");
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, base.replace(from, to)).unwrap();
        let out = replicheck(&["check", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{to}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(named) && err.contains("bad.toml"), "{to}: {err}");
    }
}

/// `store run` plays a model's durations and its coordinator's work queue: the cut ends by
/// itself, a crashed node restarts, and every request's fate is one the model allows.
#[test]
fn the_store_ends_each_timed_fault_as_the_model_does() {
    let dir = tempfile::tempdir().unwrap();
    let run =
        |model: &'static str, variant: Option<&'static str>, fault: &'static str, secs: &'static str| {
            let trace = dir.path().join(format!("{fault}-{}.jsonl", variant.unwrap_or("first")));
            std::thread::spawn(move || {
                // Seed 2 draws a cut of 800ms, no longer than the incident's 800ms ack deadline:
                // a write sent to n2 during the cut misses its deadline after the cut ended.
                let mut args =
                    vec!["store", "run", model, "--faults", fault, "--duration", secs, "--seed", "2"];
                if let Some(v) = variant {
                    args.extend(["--variant", v]);
                }
                let trace = trace.to_str().unwrap().to_string();
                let mut args: Vec<String> = args.into_iter().map(str::to_string).collect();
                args.extend(["--trace".to_string(), trace]);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let out = replicheck(&args);
                let report = String::from_utf8_lossy(&out.stdout).to_string() + &stderr(&out);
                assert_eq!(out.status.code(), Some(0), "{report}");
                assert!(report.contains("trace: every request's fate is a behaviour of model"), "{report}");
                assert!(report.contains("acked writes lost: 0"), "{report}");
                report
            })
        };
    // The runs at once (ephemeral ports, separate directories): a third of the wall time.
    let cut = run("models/remirror-storm.toml", Some("throttled"), "partition:b", "12s");
    let storm = run("models/remirror-storm.toml", Some("incident"), "partition:b", "12s");
    let crash = run("tests/data/timed-faults.toml", None, "crash:n1", "6s");
    let at = |report: &str, what: &str| -> u64 {
        let line =
            report.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("no `{what}`:\n{report}"));
        line.split_whitespace().next().unwrap().parse().unwrap()
    };
    let report = cut.join().unwrap();
    let lasted = at(&report, "END zone b reachable again") - at(&report, "FAULT zone b partitioned");
    assert!((450..=2_150).contains(&lasted), "the cut lasts 500ms..2s, not {lasted} ms:\n{report}");
    assert!(at(&report, "HEAL") >= at(&report, "END zone b"), "{report}");
    assert!(report.contains("coordinator work (the model's queue: 1 unit(s) per model tick"), "{report}");
    // Throttled: n2 is back long before its 3s down/out interval is over, so it keeps its place.
    assert!(
        report.contains("re-replication after the faults ended") && report.contains("none began"),
        "{report}"
    );
    // The incident: re-mirroring at once, n2 is replaced after the network came back.
    let report = storm.join().unwrap();
    let ended = at(&report, "END zone b reachable again");
    let line = report.lines().find(|l| l.starts_with("re-replication after the faults ended")).unwrap();
    // n2's re-mirror begins once n2 was cut off: after the cut ended when the write that misses
    // its deadline was sent during the cut, within it when one was in flight as the cut began
    // (the cut and the deadline are both 800ms: real time decides; both are behaviours of the
    // model). Only the first is "after the faults ended".
    let cut_at = at(&report, "FAULT zone b partitioned");
    assert!(ended > cut_at, "{report}");
    let evicted_at = at(&report, "evict n2 -> n4");
    assert!(evicted_at >= cut_at, "the re-mirror starts once n2 is cut off:\n{report}");
    if evicted_at >= ended {
        assert!(line.contains("began: n2 -> n4 in v1 at"), "{report}");
    }
    let report = crash.join().unwrap();
    let down = at(&report, "END n1 restarts") - at(&report, "FAULT crash n1");
    assert!((150..=650).contains(&down), "n1 is down 200ms..500ms, not {down} ms:\n{report}");
}

const DETECTOR: &str = "models/detector-timing.toml";

/// `sweep` over a fault's window answers "the longest slow link this detector survives": with
/// `dead_after` 1.8s checked continuously, a link that stays slow for 1s or more makes n2
/// silent for 1.9s (evicted, healthy), and 900ms does not; checked at rounds, every length is
/// safe. The points' windows nest (each starts at the knob's smallest value), so the verdict is
/// monotone and the boundary is between neighbouring values.
#[test]
fn sweep_finds_the_longest_slow_link_a_detector_survives() {
    let sweep = |variant: &str| {
        let out = replicheck(&[
            "sweep",
            DETECTOR,
            "--variant",
            variant,
            "--vary",
            "faults.degrade[0].duration=100ms..3s",
            "--format",
            "json",
            "--threads",
            "1",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("a JSON report")
    };
    let eviction = |doc: &serde_json::Value| {
        doc["properties"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "no_healthy_eviction")
            .unwrap()
            .clone()
    };
    let continuous = sweep("continuous");
    assert_eq!(continuous["points"], 30);
    let boundaries = eviction(&continuous)["boundaries"].as_array().unwrap().clone();
    assert_eq!(boundaries.len(), 1, "{boundaries:?}");
    let b = &boundaries[0];
    assert_eq!((b["violated_at"].as_str(), b["holds_at"].as_str()), (Some("1s"), Some("900ms")));
    assert_eq!(b["adjacent"], true);
    let explore = b["counterexample"]["explore_command"].as_str().unwrap();
    assert!(
        explore.contains("--variant continuous --set 'faults.degrade[0].duration=100ms..1s'"),
        "the point reopens with its window: {explore}"
    );
    let rounds = sweep("rounds");
    let p = eviction(&rounds);
    assert!(p["boundaries"].as_array().unwrap().is_empty(), "{p}");
    assert!(p["cells"].as_array().unwrap().iter().all(|c| c == "holds" || c == "inferred_holds"), "{p}");
}

/// `check --set` is a what-if over a fault's window or a policy key: every property must hold,
/// and a setting the model cannot take is an error naming the model, the key and the value.
#[test]
fn check_set_changes_a_window_or_a_key_for_one_run() {
    let check = |sets: &[&str]| {
        let mut args = vec!["check", DETECTOR, "--variant", "continuous", "-q"];
        for s in sets {
            args.extend_from_slice(&["--set", s]);
        }
        replicheck(&args)
    };
    assert_eq!(check(&["faults.degrade[0].duration=900ms"]).status.code(), Some(0));
    let out = check(&["faults.degrade[0].duration=1s"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // The safe dead_after for a link slow for 1s, continuously checked: above the 1.9s silence.
    assert_eq!(check(&["faults.degrade[0].duration=1s", "dead_after=2s"]).status.code(), Some(0));
    for (set, message) in [
        (
            "faults.degrade[1].duration=1s",
            "--set faults.degrade[1].duration: \"1\" is not on the model's fault menu",
        ),
        ("faults.degrade[0].duration=150ms", "\"150ms\" is not a whole number of ticks"),
        ("dead_aftr=2s", "unknown policy key `dead_aftr`"),
        ("dead_after=500ms", "dead_after"),
    ] {
        let out = check(&[set]);
        assert_eq!(out.status.code(), Some(2), "{set}");
        let err = stderr(&out);
        assert!(err.contains("models/detector-timing.toml") && err.contains(message), "{set}: {err}");
    }
    let out = replicheck(&["explore", DETECTOR, "--set", "faults.crash[n1].duration=1s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("\"n1\" is not on the model's fault menu (crashes: n2)"),
        "{}",
        stderr(&out)
    );
}

/// The store's detector checked continuously (the same protocol code as the model's): a crashed
/// replica is declared dead as soon as its silence passes `dead_after` (3s), not at the next
/// heartbeat round (1s apart), and replaced; nothing healthy is evicted and every request's fate
/// is a behaviour of the model under that policy.
#[test]
fn the_store_judges_silence_continuously_when_the_policy_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("continuous.toml");
    std::fs::write(&policy, "health_check = \"continuous\"\n").unwrap();
    let trace = dir.path().join("trace.jsonl");
    let out = replicheck(&[
        "store",
        "run",
        "tests/data/dead-replaced.toml",
        "--policy",
        policy.to_str().unwrap(),
        "--faults",
        "crash:n2",
        "--duration",
        "10s",
        "--seed",
        "1",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    let report = String::from_utf8_lossy(&out.stdout).to_string() + &stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("trace: every request's fate is a behaviour of model"), "{report}");
    let at = |what: &str| -> u64 {
        let line =
            report.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("no `{what}`:\n{report}"));
        line.split_whitespace().next().unwrap().parse().unwrap()
    };
    let crashed = at("FAULT crash n2");
    let evicted = at("evict n2 -> n4 in s1: after a fault hit it");
    // n2 was last heard at most at its crash: dead 3s later, within a tick and the store's slack.
    assert!(
        evicted >= crashed + 1_700 && evicted <= crashed + 3_000 + 100 + 400,
        "n2 crashed at {crashed} ms, evicted at {evicted} ms:\n{report}"
    );
    assert!(report.contains("evictions: 1 (0 healthy)"), "{report}");
}

/// A degradation's latency reads as written: one value stays one value.
#[test]
fn a_degradation_to_one_latency_is_named_as_written() {
    let fixed = scenario("models/unfenced-primary.toml");
    assert_eq!(fixed.faults.degrade[0].text, "600ms");
    let range = scenario("models/ack-timeout-eviction.toml");
    assert_eq!(range.faults.degrade[0].text, "300ms..700ms");
}
