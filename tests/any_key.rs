//! `key_hash = "any"`: the checker chooses a client's key among every hash, one initial state
//! per partition it can land on. `models/hot-partition-any-key.toml` shows that write sharding
//! ends the retry storm but not the momentary breach of a suffix two customers share.

#[path = "support/bin.rs"]
mod bin;

use bin::{check_json, json_property, replicheck, root, stderr};
use replicheck::check::{self, PolicyChoice};
use replicheck::model::properties::capacity_respected;
use replicheck::model::{World, WorldConfig};
use serde_json::Value;

fn json_run(model: &str, variant: &str) -> Value {
    check_json(model, variant, &[])
}

fn found<'a>(run: &'a Value, name: &str) -> &'a Value {
    &json_property(run, name)["found"]
}

#[test]
fn the_fix_ends_the_storm_but_a_shared_suffix_breaches() {
    let r = json_run("models/hot-partition-any-key.toml", "fixed");
    assert_eq!(r["complete"], true);
    assert_eq!(found(&r, "ops_complete"), "holds");
    assert_eq!(found(&r, "capacity_respected"), "violated");
    let p = json_property(&r, "capacity_respected");
    let last = p["counterexample"]["final_state"].as_str().unwrap();
    assert!(last.contains("checkout-2 [key on p1]"), "the state names the checker's choice: {last}");
}

/// A choice that is not the first initial state: the explorer link starts with its index, and
/// following it reaches the breach.
#[test]
fn a_counterexample_from_another_initial_state_replays_in_the_explorer() {
    let dir = tempfile::tempdir().unwrap();
    // checkout-1 writes through suffix 1 (p2); checkout-2 meets it there in one behaviour.
    let text = std::fs::read_to_string(root().join("models/hot-partition-any-key.toml")).unwrap().replacen(
        "key_hash = 0",
        "key_hash = 1",
        1,
    );
    let file = dir.path().join("any-key-p2.toml");
    std::fs::write(&file, text).unwrap();
    let r = json_run(file.to_str().unwrap(), "fixed");
    let p = json_property(&r, "capacity_respected");
    let link = p["counterexample"]["explorer_url"].as_str().unwrap();
    let indices: Vec<usize> =
        link.split("#/steps/").nth(1).unwrap().split('/').map(|i| i.parse().unwrap()).collect();
    assert_eq!(indices[0], 1, "the second initial state: checkout-2's key on p2 ({link})");
    let jobs = check::plan(&[file], &PolicyChoice::Variants(Some("fixed".into()))).unwrap();
    let world = World::new(WorldConfig::new(&jobs[0].scenario, &jobs[0].policy).unwrap());
    let (states, _) = replicheck::explorer::follow(&world, &indices).expect("the link replays");
    assert!(!capacity_respected(states.last().unwrap()));
}

#[test]
fn a_key_hash_that_is_neither_a_number_nor_any_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root().join("models/hot-partition-any-key.toml"))
        .unwrap()
        .replace("key_hash = \"any\"", "key_hash = \"every\"");
    let file = dir.path().join("bad-key.toml");
    std::fs::write(&file, text).unwrap();
    let out = replicheck(&["check", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("bad-key.toml") && err.contains("clients[1].key_hash") && err.contains("every"),
        "{err}"
    );
}
