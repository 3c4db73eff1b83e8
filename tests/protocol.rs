//! The protocol's machines as the model drives them: read repair (basic-quorum) and what a
//! coordinator keeps across its own crash (coordinator-restart). Each test runs a library
//! model and asserts the verdicts that the feature decides: without it they differ.

use replicheck::check::{self, Found, PolicyChoice, RunOptions, RunResult};
use replicheck::config::PropertyName;
use std::path::PathBuf;

fn run(model: &str, variant: &str) -> RunResult {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(model);
    let jobs =
        check::plan(&[path], &PolicyChoice::Variants(Some(variant.to_string()))).expect("the model loads");
    assert_eq!(jobs.len(), 1);
    let r = check::run(&jobs[0], &RunOptions::default()).expect("the model runs");
    assert!(r.complete, "{model} / {variant}: exploration must complete");
    r
}

fn found(r: &RunResult, name: PropertyName) -> Found {
    r.properties.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{name:?} is checked")).found
}

fn steps(r: &RunResult, name: PropertyName) -> Vec<String> {
    let p = r.properties.iter().find(|p| p.name == name).expect("checked");
    let c = p.counterexample.as_ref().expect("a violation has a counterexample");
    c.steps.iter().map(|s| s.action.clone()).collect()
}

#[test]
fn a_restarted_coordinator_keeps_the_replica_sets_it_persisted() {
    let durable = run("models/coordinator-restart.toml", "default");
    for p in &durable.properties {
        assert_eq!(p.found, Found::Holds, "{:?} must hold with durable membership", p.name);
    }
}

#[test]
fn a_coordinator_with_replica_sets_in_memory_reads_a_stale_quorum_after_a_restart() {
    let r = run("models/coordinator-restart.toml", "membership-in-memory");
    assert_eq!(found(&r, PropertyName::AckedWritesPersist), Found::Violated);
    assert_eq!(found(&r, PropertyName::Linearizable), Found::Violated);
    let trace = steps(&r, PropertyName::AckedWritesPersist);
    // The story: an eviction changed the replica set, then the coordinator restarted and lost it.
    let evicted = trace.iter().position(|s| s.contains("queued: evict")).expect("an eviction");
    let restarted = trace
        .iter()
        .position(|s| s.contains("the coordinator crashes and restarts"))
        .expect("a coordinator restart");
    assert!(evicted < restarted, "{trace:#?}");
    assert!(trace[restarted].contains("replicas now [n1, n2, n3]"), "{}", trace[restarted]);
}

#[test]
fn reads_without_repair_are_not_linearizable_and_with_it_they_are() {
    let repaired = run("models/basic-quorum.toml", "default");
    assert_eq!(found(&repaired, PropertyName::Linearizable), Found::Holds);
    let plain = run("models/basic-quorum.toml", "no-read-repair");
    assert_eq!(found(&plain, PropertyName::Linearizable), Found::Violated);
    assert_eq!(found(&plain, PropertyName::AckedWritesPersist), Found::Holds);
    // Two reads of one reader disagree: the first saw the pending write, the second did not.
    let trace = steps(&plain, PropertyName::Linearizable);
    let reads: Vec<&String> = trace.iter().filter(|s| s.contains("-> reader: Response")).collect();
    assert_eq!(reads.len(), 2, "{trace:#?}");
    assert!(reads[0].contains("value=1") && reads[1].contains("value=0"), "{reads:?}");
}
