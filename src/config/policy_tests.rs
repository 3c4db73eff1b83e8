//! The leader family's keys: resolution into ticks, errors naming origin, key and value, the
//! reload rule, and which models may ask for `single_primary`; the detector keys that only
//! independent detection reads.

use super::*;
use crate::config::{reload_changes, PropertyName, Scenario};

fn sourced(text: &str) -> SourcedPolicy {
    let patch: PolicyPatch = toml::from_str(text).expect("policy keys");
    SourcedPolicy::new(patch, "p.toml")
}

fn leader(text: &str) -> Result<Policy, String> {
    sourced(&format!("replication = \"leader\"\n{text}")).resolve_any_family(100, 3)
}

#[test]
fn the_quorum_family_is_the_default_and_has_no_leader_knobs() {
    let p = SourcedPolicy::default().resolve(100, 3).expect("the defaults resolve");
    assert_eq!(p.replication(), Replication::Quorum);
    assert_eq!(p.leader, None);
    // Leader durations are not counted in ticks for the quorum family: a 250ms lag timeout
    // does not fit a 100ms tick, and nobody asked for it.
    assert!(sourced("replica_lag_timeout = \"250ms\"").resolve(100, 3).is_ok());
}

/// Heartbeat, suspect and dead durations are independent detection's: under coupled
/// detection their defaults at a 10 ms tick (3s is 300 ticks) or a `dead_after` below the
/// default `suspect_after` are no error; under independent detection they are, and a default
/// is named as one.
#[test]
fn detector_keys_are_checked_where_they_are_read() {
    assert!(SourcedPolicy::default().resolve(10, 3).is_ok());
    assert!(sourced("dead_after = \"1s\"").resolve(100, 3).is_ok());
    let independent = |text: &str, tick_ms| {
        sourced(&format!("failure_detection = \"independent\"\n{text}")).resolve(tick_ms, 3).unwrap_err()
    };
    let at_10ms = independent("", 10);
    assert!(
        at_10ms.starts_with("key `suspect_after` = \"3s\" (its default: set it in [policy])"),
        "{at_10ms}"
    );
    let order = independent("dead_after = \"1s\"", 100);
    assert!(
        order.contains("(its default: set it in [policy]): must not exceed dead_after = \"1s\""),
        "{order}"
    );
}

#[test]
fn the_leader_family_resolves_its_knobs_in_ticks() {
    let p = leader(
        "acks = \"all\"\nmin_in_sync = 2\nreplica_lag_timeout = \"500ms\"\nunclean_election = true\n\
         failover_cross_zone = false\nfailover_delay = \"300ms\"\nfencing = false\nread_from = \"any\"",
    )
    .expect("a valid leader policy");
    assert_eq!(p.replication(), Replication::Leader);
    assert_eq!(
        p.leader,
        Some(LeaderPolicy {
            acks: Acks::All,
            min_in_sync: 2,
            replica_lag_timeout_ticks: 5,
            unclean_election: true,
            failover_cross_zone: false,
            failover_delay_ticks: 3,
            fencing: false,
            read_from: ReadFrom::Any,
        })
    );
    let defaults = leader("").expect("the defaults resolve");
    let l = defaults.leader.expect("leader knobs");
    assert_eq!((l.acks, l.min_in_sync, l.replica_lag_timeout_ticks), (Acks::InSync, 1, 100));
    assert!(!l.unclean_election && l.failover_cross_zone && l.fencing && l.read_from == ReadFrom::Primary);
}

#[test]
fn bad_leader_values_name_origin_key_and_value() {
    let e = leader("min_in_sync = 4").unwrap_err();
    assert_eq!(
        e,
        "p.toml: key `min_in_sync` = 4: must be 1 (the primary alone) to replication_factor = 3 (the primary counts)"
    );
    // Refused in either family: a value no leader family could run.
    let e = sourced("min_in_sync = 0").resolve(100, 3).unwrap_err();
    assert!(e.starts_with("p.toml: key `min_in_sync` = 0: must be 1"), "{e}");
    let e = leader("replica_lag_timeout = \"0ms\"").unwrap_err();
    assert_eq!(
        e,
        "p.toml: key `replica_lag_timeout` = \"0ms\": must be positive with replication = \"leader\""
    );
    let e = leader("failover_delay = \"250ms\"").unwrap_err();
    assert!(e.starts_with("p.toml: key `failover_delay` = \"250ms\": "), "{e}");
    let e = leader("idempotency_tokens = true").unwrap_err();
    assert!(e.starts_with("p.toml: key `idempotency_tokens` = true: not supported with replication"), "{e}");
    let e = toml::from_str::<PolicyPatch>("acks = \"most\"").unwrap_err().to_string();
    assert!(e.contains("unknown variant `most`"), "{e}");
}

#[test]
fn the_store_refuses_the_leader_family_and_the_model_runs_it() {
    for resolved in [
        sourced("replication = \"leader\"").resolve(100, 3),
        sourced("replication = \"leader\"").resolve_ms(),
    ] {
        assert_eq!(
            resolved.unwrap_err(),
            "p.toml: key `replication` = \"leader\": in the store only `store up`, `store bench` and `store run` (without a rollout) run the leader family (CONFIG SET policy does not yet); the model checker does: `replicheck check` with a model"
        );
    }
    let model = sourced("replication = \"leader\"").resolve_for_model(100, 3).expect("the model runs it");
    assert_eq!(model.replication(), Replication::Leader);
}

#[test]
fn a_reload_may_not_change_the_replication_family() {
    let quorum = SourcedPolicy::default().resolve(100, 3).expect("quorum");
    let leader = leader("").expect("leader");
    assert_eq!(
        reload_changes(&quorum, &leader),
        Some(("replication", "\"quorum\"".to_string(), "\"leader\"".to_string()))
    );
    assert_eq!(reload_changes(&leader, &leader), None);
}

#[test]
fn the_new_keys_are_described_as_toml() {
    let effective: std::collections::BTreeMap<_, _> =
        SourcedPolicy::default().effective().into_iter().collect();
    assert_eq!(effective["replication"], "\"quorum\"");
    assert_eq!(effective["acks"], "\"in_sync\"");
    assert_eq!(effective["read_from"], "\"primary\"");
    assert_eq!(effective["replica_lag_timeout"], "\"10s\"");
}

/// The test scenario with `top` before it and `tables` after it (TOML), loaded from a
/// temporary file.
fn load_with(top: &str, tables: &str) -> Result<Scenario, String> {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/leader-machines.toml"));
    let text = std::fs::read_to_string(path).expect("the test scenario");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("m.toml");
    std::fs::write(&file, format!("{top}\n{text}\n{tables}")).expect("written");
    Scenario::load(&file).map_err(|e| e.message)
}

#[test]
fn quorum_models_keep_their_properties_and_may_not_ask_for_single_primary() {
    let s = load_with("", "").expect("loads");
    assert!(!s.properties.contains(&PropertyName::SinglePrimary), "{:?}", s.properties);
    assert_eq!(s.properties.len(), 7);
    let e = load_with("properties = [\"acked_writes_persist\", \"single_primary\"]", "").unwrap_err();
    assert_eq!(
        e,
        "key `properties[1]` = \"single_primary\": a property of `replication = \"leader\"`; this model's [policy] runs `replication = \"quorum\"`"
    );
}

#[test]
fn a_variant_may_not_change_the_replication_family() {
    let e = load_with(
        "",
        "[variants.leader]\npolicy = { replication = \"leader\" }\nexpect = { acked_writes_persist = \"holds\" }",
    )
    .unwrap_err();
    assert_eq!(
        e,
        "key `variants.leader.policy.replication` = \"leader\": a variant may not change the protocol family (the model's [policy] runs `replication = \"quorum\"`)"
    );
}

#[test]
fn a_patch_written_as_toml_reads_back_the_same_with_its_durations_scaled() {
    let text =
        "replication = \"leader\"\nacks = \"in_sync\"\nmin_in_sync = 1\nreplica_lag_timeout = \"400ms\"\n\
                heartbeat_interval = \"200ms\"\nmax_attempts = \"unlimited\"\nfencing = false\n\
                backoff = \"exponential_jitter\"\nmax_dead_fraction = 0.5\n";
    let patch: PolicyPatch = toml::from_str(text).expect("a policy");
    let same: PolicyPatch = toml::from_str(&patch.to_toml()).expect("its TOML reads back");
    assert_eq!(same, patch);
    // `store run --time-scale 50` on a model with a 100 ms tick: every duration halves.
    let half: PolicyPatch = toml::from_str(&patch.time_scaled(50, 100).to_toml()).expect("reads back");
    assert_eq!(half.replica_lag_timeout.as_ref().map(|d| d.ms), Some(200));
    assert_eq!(half.heartbeat_interval.as_ref().map(|d| d.ms), Some(100));
    assert_eq!(half.min_in_sync, Some(1));
    assert_eq!(half.fencing, Some(false));
    assert_eq!(half.max_dead_fraction, Some(0.5));
}

/// What a file is, told by its top level: the directory scan passes over policy files and the
/// policy loader names a model given in a policy's place.
#[test]
fn a_file_is_a_model_a_policy_or_neither() {
    use crate::config::{file_kind, FileKind};
    assert_eq!(file_kind("zones = [\"a\"]\nreplica_ack_timeout = \"2s\""), FileKind::Model);
    assert_eq!(file_kind("replica_ack_timeout = \"2s\""), FileKind::Policy);
    assert_eq!(file_kind(""), FileKind::Other);
    assert_eq!(file_kind("replica_ack_timout = \"2s\""), FileKind::Other);
    assert_eq!(file_kind("not toml ="), FileKind::Other);
}
