//! Unit tests of what a run measures and how it is judged.

use super::{
    disagreement, measure, DeathEvidence, Found, LinkFacts, ModelBounds, PropertyName, RunOutcome,
    StoreEviction,
};

/// A stale read: client 1 reads the initial (absent) value after client 0's write of 7
/// returned. The EDN reads back as the same history, and the picture marks the read.
#[test]
fn history_files_are_edn_and_a_picture_of_the_anomaly() {
    use super::client::{Input, LoadReport, Op, Outcome};
    let op = |client, input, call_ns, return_ns, read| Op {
        client,
        key: "p1:k".into(),
        input,
        call_ns,
        outcome: Outcome::Ok { return_ns, read },
        attempts: 1,
        cut_off: false,
    };
    let load = LoadReport {
        history: vec![op(0, Input::Write(7), 0, 10, None), op(1, Input::Read, 20, 30, None)],
        retries: 0,
        give_ups: 0,
    };
    let dir = tempfile::tempdir().unwrap();
    let edn = dir.path().join("h.edn");
    let req = super::RunRequest {
        model: "m.toml".into(),
        variant: None,
        policy: None,
        ms_per_tick: None,
        duration: std::time::Duration::from_secs(1),
        clients: Some(1),
        keys: 1,
        write_permille: 500,
        model_verdicts: super::ModelVerdicts::Skip,
        decision_log: None,
        history: Some(edn.clone()),
        trace: None,
        seed: 1,
        faults: Vec::new(),
        rollout_order: Vec::new(),
        binary: "replicheck".into(),
        interrupt: None,
    };
    let lines = super::write_history_files(&load, &[], req.history.as_deref(), true).unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let text = std::fs::read_to_string(&edn).unwrap();
    let back = crate::lincheck::parse::kv_edn(&text).unwrap();
    let ops: Vec<_> = load.history.iter().filter_map(|o| o.as_kv_op()).collect();
    assert_eq!(back.len(), 2);
    assert_eq!(
        back.iter().map(|o| &o.input).collect::<Vec<_>>(),
        ops.iter().map(|o| &o.input).collect::<Vec<_>>()
    );
    let html = std::fs::read_to_string(dir.path().join("h.html")).unwrap();
    assert_eq!(html.matches(r#"id="unplaced""#).count(), 1, "the stale read is marked");
    assert!(html.contains("cannot be linearized by here"));
}

#[test]
fn churn_counts_moves_and_evictions_within_one_window() {
    let o = RunOutcome {
        moves: vec![(1_000, 0, 0, 1), (2_000, 0, 1, 0), (9_000, 0, 0, 1)],
        evictions: vec![StoreEviction { at_ms: 5_500, shard: 0, node: 1, replacement: 2, healthy: false }],
        ..RunOutcome::default()
    };
    // 1000, 2000, 5500 are three changes within 5 s.
    assert!(o.churn_exceeded(2, 5_000));
    // No three within 4.5 s.
    assert!(!o.churn_exceeded(2, 4_500));
    assert!(!o.churn_exceeded(4, 60_000));
    // A change dropped by a full queue is a saturated coordinator, whatever the window.
    let dropped = RunOutcome { changes_rejected: vec![(5_600, 0, 2)], ..o };
    assert!(dropped.churn_exceeded(4, 60_000));
    assert_eq!(dropped.verdict(PropertyName::ChurnBounded), Some(Found::Violated), "no budget: the queue's");
    let kept = RunOutcome { changes_rejected: vec![], ..dropped };
    assert_eq!(kept.verdict(PropertyName::ChurnBounded), Some(Found::Holds));
}

#[test]
fn a_dropped_change_is_parsed_from_the_decision_log() {
    let parsed = measure::ProtocolEvent::parse("change_rejected shard=1 evicted=2");
    assert!(matches!(parsed, Some(measure::ProtocolEvent::ChangeRejected { shard: 1, evicted: 2 })));
    assert!(measure::ProtocolEvent::parse("change_rejected shard=1").is_none(), "malformed");
}

fn ack_timeout_fixed() -> crate::config::Scenario {
    crate::config::Scenario::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/ack-timeout-eviction.toml"
    )))
    .unwrap()
}

/// n2 evicted while healthy after 3.2 s of silence, its round trips at `rtt_ms`.
fn evicted_n2(rtt_ms: u64) -> RunOutcome {
    let link = LinkFacts { max_silence_ms: 3_200, max_round_trip_ms: rtt_ms, late_replies: 4 };
    RunOutcome {
        evictions: vec![
            StoreEviction { at_ms: 9_000, shard: 0, node: 1, replacement: 3, healthy: true },
            StoreEviction { at_ms: 9_000, shard: 1, node: 1, replacement: 3, healthy: true },
        ],
        evicted_because: vec![Some(DeathEvidence::Silence { silence_ms: 3_150 }); 2],
        links: vec![LinkFacts::default(), link, LinkFacts::default(), LinkFacts::default()],
        bounds: ModelBounds {
            round_trip_max_ms: vec![200, 1_400, 200, 1_400],
            heartbeat_interval_ms: 1_000,
            dead_after_ms: 3_000,
            ack_timeout_ms: 500,
            independent: true,
        },
        ..RunOutcome::default()
    }
}

#[test]
fn a_healthy_eviction_is_explained_by_what_was_measured() {
    let scenario = ack_timeout_fixed();
    let (holds, violated) = (Found::Holds, Found::Violated);
    let within =
        disagreement(PropertyName::NoHealthyEviction, violated, holds, &evicted_n2(1_380), &scenario);
    assert_eq!(
        within,
        "n2 declared dead after 3150 ms of silence (dead_after 3000 ms); its round trips stayed within the model's worst (1380 ms <= 1400 ms), so the delays were the model's; its longest silence was 3200 ms, the model's bound for a reachable node 2400 ms (heartbeat_interval + worst round trip)"
    );
    assert!(!within.contains("exceeded"), "no round trip was measured above the range");
    let above = disagreement(PropertyName::NoHealthyEviction, violated, holds, &evicted_n2(1_650), &scenario);
    assert!(
        above.contains("reached 1650 ms, 250 ms above the model's worst 1400 ms: real delays exceeded the model's latency range"),
        "{above}"
    );
}

#[test]
fn the_model_bounds_are_the_scenarios_worst_round_trips() {
    let scenario = ack_timeout_fixed();
    let fixed = scenario.variant("fixed").unwrap().policy.resolve(scenario.tick_ms, 4).unwrap();
    let bounds = ModelBounds::of(&scenario, &super::policy_in_ms(&fixed, 100), 100);
    // n1, n3 in the coordinator's zone at 100 ms; n2, n4 across a<->b, degradable to 700 ms.
    assert_eq!(bounds.round_trip_max_ms, [200, 1_400, 200, 1_400]);
    assert_eq!((bounds.dead_after_ms, bounds.ack_timeout_ms), (3_000, 500));
    // The model file's own figure: "dead after 3s of silence, well above the worst of 2.4s".
    assert_eq!((bounds.silence_max_ms(1), bounds.silence_max_ms(0)), (Some(2_400), Some(1_200)));
}

#[test]
fn a_breach_names_the_models_node() {
    let scenario = crate::config::Scenario::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/capacity-routing-bypass.toml"
    )))
    .unwrap();
    assert_eq!(
        super::with_model_names("backend node 2 offered 3 > capacity 2 at 104 ms", &scenario),
        "backend n3 (node 2) offered 3 > capacity 2 at 104 ms"
    );
    assert_eq!(super::with_model_names("partition p1 offered 3", &scenario), "partition p1 offered 3");
}

/// remirror-storm's faults have durations: n2 is down 4-5 s, zone b cut 0.5-2 s.
fn remirror_storm() -> crate::config::Scenario {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/remirror-storm.toml");
    crate::config::Scenario::load(std::path::Path::new(path)).unwrap()
}

#[test]
fn each_timed_fault_ends_within_its_window_and_the_heal_waits_for_it() {
    use super::rig::{schedule, timeline, Fault, Step};
    let scenario = remirror_storm();
    let mut partition_ends = std::collections::BTreeSet::new();
    for seed in 0..40 {
        let faults = schedule(&scenario, &[]).unwrap();
        let (steps, heal_at_ms) = timeline(&scenario, &faults, 20_000, 100, seed, &[]).unwrap();
        assert!(steps.windows(2).all(|w| w[0].0 <= w[1].0), "in time order");
        let start = |f: &Fault| steps.iter().find(|(_, s)| matches!(s, Step::Fault(g) if g == f)).unwrap().0;
        let ends: Vec<(u64, &Fault)> = steps
            .iter()
            .filter_map(|(at, s)| match s {
                Step::End(f) => Some((*at, f)),
                _ => None,
            })
            .collect();
        assert_eq!(ends.len(), 2, "both faults of the menu have a duration");
        for (at, fault) in ends {
            let lasted = at - start(fault);
            let window = match fault {
                Fault::Crash(1) => 4_000..=5_000,
                Fault::Partition(1) => {
                    partition_ends.insert(lasted);
                    500..=2_000
                }
                other => panic!("{other:?} is not on the menu"),
            };
            assert!(window.contains(&lasted), "{fault:?} lasted {lasted} ms");
            assert!(heal_at_ms >= at, "the heal at {heal_at_ms} ms comes after the end at {at} ms");
        }
        let again = timeline(&scenario, &faults, 20_000, 100, seed, &[]).unwrap();
        assert_eq!(again.1, heal_at_ms);
        assert_eq!(
            again.0.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
            steps.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
            "a seed gives one timeline"
        );
    }
    assert!(partition_ends.len() > 3, "the duration is drawn from the window: {partition_ends:?}");
}

#[test]
fn a_run_too_short_for_a_faults_duration_is_refused() {
    let scenario = remirror_storm();
    let faults = super::rig::schedule(&scenario, &[]).unwrap();
    let err = super::rig::timeline(&scenario, &faults, 4_000, 100, 1, &[]).expect_err("refused");
    assert!(err.contains("run longer") && err.contains("4000 ms"), "{err}");
}

#[test]
fn faults_can_be_chosen_from_the_menu_by_name() {
    use super::rig::{schedule, Fault};
    let scenario = remirror_storm();
    let names = |chosen: &[&str]| {
        let chosen: Vec<String> = chosen.iter().map(|s| s.to_string()).collect();
        schedule(&scenario, &chosen)
            .map(|faults| faults.iter().map(|f| f.name(&scenario)).collect::<Vec<_>>())
    };
    // By default one of each kind, crashes first.
    assert_eq!(names(&[]).unwrap(), ["crash:n2", "partition:b"]);
    assert_eq!(names(&["partition:b"]).unwrap(), ["partition:b"]);
    assert_eq!(names(&["partition:b", "crash:n2"]).unwrap(), ["partition:b", "crash:n2"]);
    assert_eq!(names(&["none"]).unwrap(), Vec::<String>::new());
    let err = names(&["none", "crash:n2"]).unwrap_err();
    assert!(err.contains("--faults none,crash:n2: `none` means no fault and stands alone"), "{err}");
    let err = names(&["partition:a"]).unwrap_err();
    assert!(err.contains("--faults partition:a") && err.contains("crash:n2, partition:b"), "{err}");
    assert!(names(&["crash:n2", "crash:n2"]).unwrap_err().contains("named twice"));
    let mut one = scenario.clone();
    one.faults.budget = 1;
    let chosen = ["crash:n2".to_string(), "partition:b".to_string()];
    let err = schedule(&one, &chosen).unwrap_err();
    assert!(err.contains("`faults.budget` is 1"), "{err}");
    assert!(matches!(schedule(&one, &chosen[1..]).unwrap()[..], [Fault::Partition(1)]));
}

/// What a leader store's processes read from the policy file `store run` writes is the
/// variant's policy at the run's time scale, every duration scaled, the defaults' included
/// (a model that leaves `dead_after` to its default runs it scaled too).
#[test]
fn a_leader_store_runs_the_variants_policy_at_the_runs_time_scale() {
    use crate::config::{PolicyPatch, Scenario, SourcedPolicy};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for model in ["async-failover", "in-sync-unclean", "unfenced-primary"] {
        let scenario = Scenario::load(&root.join("models").join(format!("{model}.toml"))).unwrap();
        for variant in &scenario.variants {
            let ticks = variant.policy.resolve_for_model(scenario.tick_ms, scenario.nodes.len()).unwrap();
            for ms_per_tick in [50, scenario.tick_ms, 200] {
                let text = super::leader_policy_file(&variant.policy, ms_per_tick, scenario.tick_ms);
                let patch: PolicyPatch = toml::from_str(&text).unwrap();
                let store = SourcedPolicy::new(patch, "store").resolve_ms_any_family().unwrap();
                let want = super::policy_in_ms(&ticks, ms_per_tick);
                let at = format!("{model} / {} at {ms_per_tick} ms per tick:\n{text}", variant.name);
                assert_eq!(store.leader, want.leader, "{at}");
                assert_eq!(store.retry, want.retry, "{at}");
                let timers = |p: &crate::config::Policy| {
                    [
                        p.replica_ack_timeout_ticks,
                        p.heartbeat_interval_ticks,
                        p.suspect_after_ticks,
                        p.dead_after_ticks,
                    ]
                };
                assert_eq!(timers(&store), timers(&want), "{at}");
                assert_eq!(
                    (store.failure_detection, store.health_check, store.replication_factor),
                    (want.failure_detection, want.health_check, want.replication_factor),
                    "{at}"
                );
            }
        }
    }
}

/// An operation still retried when the load ended, begun before the heal, violates
/// `ops_complete` only if the load ran on after the heal for longer than one attempt and its
/// backoff: a shorter healed phase cannot tell it from a retry that was about to succeed.
#[test]
fn ops_complete_is_judged_only_when_the_healed_phase_outlasts_a_retry() {
    use super::client::{Input, LoadReport, Op, Outcome};
    let load = LoadReport {
        history: vec![Op {
            client: 0,
            key: "s1:0".into(),
            input: Input::Write(3),
            call_ns: 500_000_000,
            outcome: Outcome::Unknown,
            attempts: 2,
            cut_off: true,
        }],
        retries: 1,
        give_ups: 0,
    };
    let judged = |load_end_ms: u64| {
        let mut o = RunOutcome::default();
        // Healed at 2 s; one attempt and its backoff: 4.4 s.
        super::measure::judge_phases(&mut o, &load, 2_000, load_end_ms, 4_400);
        o
    };
    let short = judged(4_000);
    assert_eq!(short.verdict(PropertyName::OpsComplete), None);
    assert!(short.ops_complete_unjudged.as_deref().is_some_and(|why| why.contains("2000 ms after the heal")));
    let long = judged(9_000);
    assert_eq!(long.verdict(PropertyName::OpsComplete), Some(Found::Violated));
    assert_eq!(long.ops_never_completed.len(), 1);
    // Nothing outstanding: holds, however short the healed phase.
    let done = LoadReport {
        history: vec![Op {
            outcome: Outcome::Ok { return_ns: 600_000_000, read: None },
            cut_off: false,
            ..load.history[0].clone()
        }],
        ..load
    };
    let mut o = RunOutcome::default();
    super::measure::judge_phases(&mut o, &done, 2_000, 2_500, 4_400);
    assert_eq!(o.ops_complete_unjudged, None);
    assert_eq!(o.verdict(PropertyName::OpsComplete), Some(Found::Holds));
}

/// Clients share keys exactly when the model gives them one register: their keys land on the
/// same partition. basic-quorum's writer and reader have key hashes 0 and 1 (their indices)
/// and one suffix per prefix, so one partition, one register, one key: the stale read the model
/// finds is a read of the writer's key. With two suffixes the hashes land on two partitions.
#[test]
fn clients_share_keys_where_the_model_shares_a_register() {
    let scenario = crate::config::Scenario::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/basic-quorum.toml"
    )))
    .unwrap();
    let layout =
        crate::store::coordinator::layout::Layout::of_model(&scenario, &scenario.base_policy, 3, 100)
            .unwrap();
    let keys = |suffixes: u8| {
        let load = super::Workload::of_model(&scenario, &layout, (1, 500, None), 100, suffixes);
        load.roles.iter().map(|r| r.keys.clone()).collect::<Vec<_>>()
    };
    let one = keys(1);
    assert_eq!(one.len(), 2);
    assert_eq!(one[0], one[1], "writer and reader share the model's register: {one:?}");
    let two = keys(2);
    assert_ne!(two[0], two[1], "hashes 0 and 1 land on two suffixes: {two:?}");
}

/// A time scale out of range names where it came from: the flag, or the model's tick when
/// no flag was given (it named `--time-scale` either way).
#[test]
fn a_time_scale_out_of_range_names_its_source() {
    use super::validate_load;
    let flag = validate_load(60_000, None, None, 1, 500).unwrap_err();
    assert_eq!(flag, "--time-scale 60000: must be 1 to 10000 ms per tick");
    let tick = validate_load(60_000, Some(std::path::Path::new("m.toml")), None, 1, 500).unwrap_err();
    assert!(tick.starts_with("m.toml: key `tick` = 60000ms") && tick.contains("--time-scale"), "{tick}");
    assert!(validate_load(100, Some(std::path::Path::new("m.toml")), None, 1, 500).is_ok());
}
