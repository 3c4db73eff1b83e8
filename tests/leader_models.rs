//! Issue 33, phase 2a: the library's leader-family models give their declared verdicts, every
//! run complete and the same on one thread as on two, and their counterexamples read as the
//! incidents: a promotion of a follower that missed an acknowledged write, an unclean one, and
//! a deposed primary's write acknowledged after the new epoch's.

use replicheck::check::{plan, run, Counterexample, Found, PolicyChoice, RunOptions, RunResult};
use replicheck::config::PropertyName;
use std::path::PathBuf;

/// Every variant of `model`, on `threads` threads.
fn check(model: &str, threads: usize) -> Vec<RunResult> {
    let jobs = plan(&[PathBuf::from(model)], &PolicyChoice::Variants(None)).expect("the model loads");
    jobs.iter()
        .map(|job| run(job, &RunOptions { threads, ..RunOptions::default() }).expect("the model runs"))
        .collect()
}

fn variant<'a>(results: &'a [RunResult], name: &str) -> &'a RunResult {
    results.iter().find(|r| r.variant == name).unwrap_or_else(|| panic!("variant {name}"))
}

fn found(r: &RunResult, p: PropertyName) -> Found {
    r.properties.iter().find(|x| x.name == p).unwrap_or_else(|| panic!("{p} is checked")).found
}

fn counterexample(r: &RunResult, p: PropertyName) -> &Counterexample {
    let result = r.properties.iter().find(|x| x.name == p).expect("checked");
    result
        .counterexample
        .as_ref()
        .unwrap_or_else(|| panic!("{} / {}: a counterexample for {p}", r.model, r.variant))
}

/// The index of the first step whose text contains `needle`.
fn step(cx: &Counterexample, needle: &str) -> usize {
    cx.steps
        .iter()
        .position(|s| s.action.contains(needle))
        .unwrap_or_else(|| panic!("no step with {needle:?} in {:#?}", cx.steps))
}

/// Each run complete and as the model declares; the same counts on one thread and on two.
fn checked(model: &str) -> Vec<RunResult> {
    let two = check(model, 2);
    let one = check(model, 1);
    for (a, b) in two.iter().zip(&one) {
        assert!(a.complete, "{} / {} is explored completely", a.model, a.variant);
        assert!(
            a.properties.iter().all(|p| p.as_expected()),
            "{} / {}: {:?}",
            a.model,
            a.variant,
            a.properties
        );
        assert_eq!(
            (a.unique_states, a.transitions, a.max_depth),
            (b.unique_states, b.transitions, b.max_depth),
            "{} / {}: the same state space on one thread as on two",
            a.model,
            a.variant
        );
        assert_eq!(a.reduction.as_str(), "none", "the leader family is explored without reduction");
    }
    two
}

#[test]
fn async_failover_loses_an_acked_write_semi_sync_keeps_it_and_no_failover_stalls() {
    let runs = checked("models/async-failover.toml");
    let r = variant(&runs, "default");
    assert_eq!(found(r, PropertyName::AckedWritesPersist), Found::Violated);
    let cx = counterexample(r, PropertyName::AckedWritesPersist);
    // Acknowledged by the primary alone, then the cut, then the follower promoted without it.
    let acked = step(cx, "acknowledged: s1 e0v1");
    let cut = step(cx, "FAULT: zone east is partitioned");
    let promoted = step(cx, "PROMOTED n2 to primary of s1 in epoch 1");
    assert!(acked < promoted && cut < promoted, "{:#?}", cx.steps);
    assert!(cx.steps[promoted].action.contains("it holds e0v0"), "n2 never got the write");
    assert!(cx.final_state.contains("newest acknowledged: s1 e0v1"), "{}", cx.final_state);
    let read = counterexample(r, PropertyName::Linearizable);
    assert!(step(read, "PROMOTED n2") < step(read, "Response app.read#2 attempt=2 ok value=0"));

    let semi = variant(&runs, "semi-sync");
    for p in [PropertyName::AckedWritesPersist, PropertyName::Linearizable, PropertyName::SinglePrimary] {
        assert_eq!(found(semi, p), Found::Holds, "{p}");
    }
    let manual = variant(&runs, "no-auto-failover");
    assert_eq!(found(manual, PropertyName::AckedWritesPersist), Found::Holds);
    let stall = counterexample(manual, PropertyName::OpsComplete);
    let from = stall.loop_from_step.expect("a lasso");
    assert!(
        stall.steps[from..].iter().any(|s| s.action.contains("no promotion of s1")),
        "{:#?}",
        stall.steps
    );
    assert!(stall.steps[..from].iter().any(|s| s.action.contains("FAULT: n1 crashes")));
}

#[test]
fn an_unclean_election_after_the_in_sync_set_shrank_loses_an_acked_write() {
    let runs = checked("models/in-sync-unclean.toml");
    let r = variant(&runs, "default");
    let cx = counterexample(r, PropertyName::AckedWritesPersist);
    let shrunk = step(cx, "s1 in-sync set now [n1]");
    let acked = step(cx, "acknowledged: s1 e0v1");
    let unclean = step(cx, "UNCLEAN: outside the in-sync set");
    assert!(shrunk < acked && acked < unclean, "{:#?}", cx.steps);
    assert_eq!(found(r, PropertyName::Linearizable), Found::Violated);
    let clean = variant(&runs, "min-in-sync-2-clean");
    for p in [PropertyName::AckedWritesPersist, PropertyName::Linearizable] {
        assert_eq!(found(clean, p), Found::Holds, "{p}");
    }
}

#[test]
fn without_fencing_the_deposed_primary_acks_after_the_promotion() {
    let runs = checked("models/unfenced-primary.toml");
    let r = variant(&runs, "default");
    let cx = counterexample(r, PropertyName::SinglePrimary);
    let promoted = step(cx, "PROMOTED n2 to primary of s1 in epoch 1");
    let new_epoch_ack = step(cx, "acknowledged: s1 e1");
    let split = step(cx, "SPLIT BRAIN");
    assert!(promoted < new_epoch_ack && new_epoch_ack < split, "{:#?}", cx.steps);
    assert!(
        cx.steps[split].action.contains("deliver n1 -> coordinator: WriteDone e0"),
        "n1, deposed, acks in epoch 0"
    );
    assert_eq!(found(r, PropertyName::AckedWritesPersist), Found::Violated);
    let fenced = variant(&runs, "fencing");
    for p in [
        PropertyName::AckedWritesPersist,
        PropertyName::Linearizable,
        PropertyName::SinglePrimary,
        PropertyName::Converges,
        PropertyName::OpsComplete,
    ] {
        assert_eq!(found(fenced, p), Found::Holds, "{p}");
    }
}

/// The quorum family's properties of eviction, membership, tokens and capacity are not the
/// leader family's: its models are checked for the family's own, single_primary included.
#[test]
fn leader_models_check_their_family_s_properties() {
    let jobs = plan(&[PathBuf::from("models/async-failover.toml")], &PolicyChoice::Variants(None)).unwrap();
    let names = &jobs[0].scenario.properties;
    assert!(names.contains(&PropertyName::SinglePrimary));
    for p in [PropertyName::NoHealthyEviction, PropertyName::ChurnBounded, PropertyName::NoDuplicateEffects] {
        assert!(!names.contains(&p), "{p}");
    }
}
