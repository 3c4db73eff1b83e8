//! Trace validation (`replicheck conform TRACE --model M`): a run of the model's own machines
//! conforms; the same run with a reply dropped on a link that does not lose messages, or a step
//! the model never takes, is named at its first divergent step.

use replicheck::check::trace::{self, Conformance, Step, TraceStep};
use replicheck::config::Scenario;
use replicheck::model::{Action, Msg, World, WorldConfig};
use stateright::Model;
use std::path::Path;
use std::process::Command;

const MODEL: &str = "models/basic-quorum.toml";

fn world(variant: &str) -> World {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(MODEL);
    let scenario = Scenario::load(&path).expect("loads");
    let v = scenario.variant(variant).expect("variant");
    World::new(WorldConfig::new(&scenario, &v.policy).expect("resolves"))
}

/// A seeded walk through the model: no faults, until every client is done or `steps_max`.
fn walk(world: &World, seed: u64, steps_max: usize) -> Vec<Action> {
    let mut rng = seed | 1;
    let mut s = world.init_states().remove(0);
    let mut path = Vec::new();
    for _ in 0..steps_max {
        let mut actions = Vec::new();
        world.actions(&s, &mut actions);
        actions.retain(|a| {
            !matches!(
                a,
                Action::Crash(_) | Action::Partition(_) | Action::Lose(_) | Action::CoordinatorRestart
            )
        });
        if actions.is_empty() {
            break;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let a = actions[(rng % actions.len() as u64) as usize].clone();
        s = world.next_state(&s, a.clone()).expect("an enabled action has a next state");
        path.push(a);
    }
    path
}

fn is_ack(step: &TraceStep) -> bool {
    matches!(step.step, Step::Deliver { msg: Msg::ReplicateAck { .. }, .. })
}

#[test]
fn runs_of_the_model_conform_to_it() {
    let w = world("default");
    for seed in 1..=20 {
        let steps = trace::trace_of(&walk(&w, seed, 120));
        assert!(steps.len() > 10);
        match trace::validate(&w, &steps) {
            Conformance::Conforms { steps: n, .. } => assert_eq!(n, steps.len()),
            other => panic!("seed {seed}: {other:?}"),
        }
    }
}

#[test]
fn a_dropped_reply_on_a_link_that_loses_nothing_is_the_first_divergent_step() {
    let w = world("default");
    let steps = trace::trace_of(&walk(&w, 7, 120));
    let dropped = steps.iter().position(is_ack).expect("the walk delivers an ack");
    let mut broken = steps.clone();
    broken.remove(dropped);
    // The ack had to arrive within its latency window: the first later step at a later tick
    // cannot happen, since time may not pass while it is due.
    let tick = steps[dropped].tick;
    let first_later = broken.iter().position(|s| s.tick > tick).expect("the run goes on");
    match trace::validate(&w, &broken) {
        Conformance::Diverges { index, why, allowed, .. } => {
            assert!(index <= first_later, "diverged at {index}, after {first_later}: {why}");
            assert!(index >= dropped, "nothing before the drop diverges: {index} < {dropped}");
            assert!(allowed.iter().any(|a| a.contains("ReplicateAck")), "{allowed:#?}");
        }
        other => panic!("a dropped ack must not conform: {other:?}"),
    }
}

#[test]
fn a_step_the_model_never_takes_is_named() {
    let w = world("default");
    let mut steps = trace::trace_of(&walk(&w, 3, 60));
    let at = steps.len() / 2;
    let tick = steps[at].tick;
    // A heartbeat round: coupled failure detection never runs one.
    let bogus = Step::Heartbeat;
    steps.insert(at, TraceStep { tick, step: bogus });
    match trace::validate(&w, &steps) {
        Conformance::Diverges { index, why, .. } => {
            assert_eq!(index, at);
            assert!(why.contains("allows no such step"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

/// A step far in the future: once time changes nothing the validation jumps to it (it
/// stepped a tick at a time, for days), and where time still changes the states a gap past
/// the limit is named.
#[test]
fn a_step_a_trillion_ticks_later() {
    let w = world("default");
    let mut steps = trace::trace_of(&walk(&w, 11, 120));
    let last = steps.last().expect("a walk").tick;
    let far = last + 1_000_000_000_000;
    steps.push(TraceStep { tick: far, step: Step::Crash { node: 0 } });
    match trace::validate(&w, &steps) {
        Conformance::Conforms { .. } => {}
        other => panic!("a crash after every client is done: {other:?}"),
    }
    // A client still thinking: invoking is due within its think time, so time cannot pass.
    let first = vec![TraceStep { tick: trace::TICK_GAP_MAX * 2, step: Step::Crash { node: 0 } }];
    match trace::validate(&w, &first) {
        Conformance::Diverges { index: 0, why, .. } => {
            assert!(why.contains("something is due first"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn conform_on_the_command_line() {
    let w = world("default");
    let steps = trace::trace_of(&walk(&w, 11, 120));
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("good.jsonl");
    let lines: Vec<String> = steps.iter().map(|s| serde_json::to_string(s).expect("serialises")).collect();
    std::fs::write(&good, lines.join("\n")).expect("write");
    let bin = env!("CARGO_BIN_EXE_replicheck");
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(bin)
        .current_dir(root)
        .args(["conform"])
        .arg(&good)
        .args(["--model", MODEL])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("every one a step of model basic-quorum"));

    let dropped = steps.iter().position(is_ack).expect("an ack");
    let mut broken_lines = lines.clone();
    broken_lines.remove(dropped);
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, broken_lines.join("\n")).expect("write");
    let out = Command::new(bin)
        .current_dir(root)
        .args(["conform"])
        .arg(&bad)
        .args(["--model", MODEL])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("is not a behaviour of model basic-quorum")
            && text.contains("the model allowed instead"),
        "{text}"
    );

    let garbage = dir.path().join("garbage.jsonl");
    std::fs::write(&garbage, "{\"tick\": 0, \"teleport\": {}}\n").expect("write");
    let out = Command::new(bin)
        .current_dir(root)
        .args(["conform"])
        .arg(&garbage)
        .args(["--model", MODEL])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("garbage.jsonl:1"), "{err}");
}
