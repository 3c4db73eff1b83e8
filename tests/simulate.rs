//! Simulation (`check --simulate`): random walks find the library's incident violations from
//! a seed, report nothing false on the fixed policies, are deterministic by seed, and give
//! counterexamples that are behaviours of the model (replayed through the explorer's indices).

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
