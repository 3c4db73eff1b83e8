//! The re-replication throttles, on coordinator-restart's cluster: n1, n2, n3 hold shard s1,
//! n4 is the spare; coupled detection, so a missed deadline declares a replica dead.

use super::super::tests::{copy_requests, resolved, start_join, tick_probed, write};
use super::*;
use crate::policy::eviction::Suppressed;
use crate::policy::recovery::{CopyRetry, RecoveryPolicy};
use crate::policy::retry::Backoff;
use crate::protocol::{OpId, Outbox};

/// The default policy with other re-replication throttles.
fn with(recovery: RecoveryPolicy) -> Resolved {
    let mut cfg = resolved("default");
    cfg.policy.recovery = recovery;
    cfg
}

/// A write acked by n2 and n3 whose deadline then fires: n1, never heard from, is dead.
fn n1_misses_a_deadline(cfg: &Resolved, c: &mut Coordinator) -> Outbox {
    c.on_msg(cfg, Endpoint::Client(0), write(0), &mut Outbox::default());
    let ack = Msg::ReplicateAck { op: OpId { client: 0, seq: 0 }, attempt: 1, shard: 0 };
    c.on_msg(cfg, Endpoint::Node(1), ack, &mut Outbox::default());
    c.on_msg(cfg, Endpoint::Node(2), ack, &mut Outbox::default());
    let mut out = Outbox::default();
    c.on_timer(cfg, Timer::AckDeadline { op: OpId { client: 0, seq: 0 }, attempt: 1 }, &mut out);
    assert_eq!(c.health[0], Health::Dead);
    out
}

fn requested(out: &Outbox) -> Option<MembershipUpdate> {
    out.events.iter().find_map(|e| match e {
        Event::ChangeRequested(u) => Some(*u),
        _ => None,
    })
}

fn suppressed(out: &Outbox) -> Option<Suppressed> {
    out.events.iter().find_map(|e| match e {
        Event::EvictionSuppressed { why, .. } => Some(*why),
        _ => None,
    })
}

/// Fire every due timer, then let a tick pass; `ticks` times. Everything the steps did.
fn run(cfg: &Resolved, c: &mut Coordinator, ticks: u32) -> Outbox {
    let mut all = Outbox::default();
    for _ in 0..ticks {
        let mut due = Vec::new();
        c.due(cfg, &mut due);
        for timer in due {
            let mut out = Outbox::default();
            c.on_timer(cfg, timer, &mut out);
            all.sends.extend(out.sends);
            all.events.extend(out.events);
        }
        tick_probed(cfg, c);
    }
    all
}

#[test]
fn without_a_down_out_interval_a_dead_member_is_replaced_at_once() {
    let cfg = resolved("default");
    let mut c = Coordinator::new(&cfg, 0);
    let out = n1_misses_a_deadline(&cfg, &mut c);
    assert_eq!(
        requested(&out),
        Some(MembershipUpdate { shard: 0, evicted: 0, replacement: 3, is_move: false })
    );
    assert!(c.down_out_ticks.is_empty(), "no state kept without the knob");
}

#[test]
fn a_member_heard_from_within_the_down_out_interval_keeps_its_place() {
    let cfg = with(RecoveryPolicy { down_out_interval_ticks: 5, ..RecoveryPolicy::UNTHROTTLED });
    let mut c = Coordinator::new(&cfg, 0);
    let out = n1_misses_a_deadline(&cfg, &mut c);
    assert_eq!(requested(&out), None, "dead, but not out yet");
    assert_eq!(c.down_out_ticks[0], Some(5));
    let out = run(&cfg, &mut c, 3);
    assert_eq!(requested(&out), None);
    c.on_msg(&cfg, Endpoint::Node(0), Msg::Pong, &mut Outbox::default());
    assert_eq!((c.health[0], c.down_out_ticks[0]), (Health::Alive, None), "heard from: in again");
    let out = run(&cfg, &mut c, 10);
    assert_eq!(requested(&out), None, "nothing is copied for a node that came back");
}

#[test]
fn a_member_dead_for_the_whole_interval_is_out_and_replaced() {
    let cfg = with(RecoveryPolicy { down_out_interval_ticks: 5, ..RecoveryPolicy::UNTHROTTLED });
    let mut c = Coordinator::new(&cfg, 0);
    n1_misses_a_deadline(&cfg, &mut c);
    let out = run(&cfg, &mut c, 5);
    assert_eq!(requested(&out), None, "out at the 5th tick's end, not before");
    let mut due = Vec::new();
    c.due(&cfg, &mut due);
    assert_eq!(due, [Timer::DownOut { node: 0 }]);
    let mut out = Outbox::default();
    c.on_timer(&cfg, Timer::DownOut { node: 0 }, &mut out);
    assert_eq!(requested(&out).map(|u| (u.evicted, u.replacement)), Some((0, 3)));
}

#[test]
fn a_spare_without_a_free_replica_slot_is_no_replacement() {
    let mut cfg = resolved("default");
    cfg.nodes[3].replica_slots = Some(0);
    let mut c = Coordinator::new(&cfg, 0);
    let out = n1_misses_a_deadline(&cfg, &mut c);
    assert_eq!((requested(&out), suppressed(&out)), (None, Some(Suppressed::NoReplacement)));
    cfg.nodes[3].replica_slots = Some(1);
    let mut c = Coordinator::new(&cfg, 0);
    let out = n1_misses_a_deadline(&cfg, &mut c);
    assert_eq!(requested(&out).map(|u| u.replacement), Some(3), "one slot: room for the replica");
}

#[test]
fn sources_at_the_recovery_limit_hold_the_eviction() {
    let mut cfg = resolved("default");
    cfg.policy.eviction.max_recoveries_per_node = Some(0);
    let mut c = Coordinator::new(&cfg, 0);
    let out = n1_misses_a_deadline(&cfg, &mut c);
    assert_eq!((requested(&out), suppressed(&out)), (None, Some(Suppressed::RecoveryLimit)));
    // A join under way counts for its replacement and its sources.
    cfg.policy.eviction.max_recoveries_per_node = Some(1);
    let mut c = Coordinator::new(&cfg, 0);
    start_join(&cfg, &mut c);
    assert_eq!((c.recoveries(3), c.recoveries(1), c.recoveries(0)), (1, 1, 0), "n1 leaves: it sends nothing");
    assert!(!c
        .candidates(&cfg, 0)
        .iter()
        .any(|k| k.node == 3 && recovery::may_recover(k.recoveries, Some(1))));
}

/// A join of n4 in n1's place whose copy round ran out of time, with one copy (n2's) in.
fn join_parked(cfg: &Resolved) -> Coordinator {
    let mut c = Coordinator::new(cfg, 0);
    start_join(cfg, &mut c);
    c.on_msg(cfg, Endpoint::Node(3), Msg::CopyAck { shard: 0, from: 1 }, &mut Outbox::default());
    run(cfg, &mut c, cfg.policy.replica_ack_timeout_ticks);
    let mut due = Vec::new();
    c.due(cfg, &mut due);
    assert_eq!(due, [Timer::CopyRetry { shard: 0 }]);
    c.on_timer(cfg, Timer::CopyRetry { shard: 0 }, &mut Outbox::default());
    assert!(c.shards[0].join.as_ref().unwrap().parked);
    c
}

#[test]
fn with_a_copy_backoff_contact_does_not_retry_the_copy_the_window_does() {
    let backoff = CopyRetry::Backoff { backoff: Backoff::ExponentialJitter, base_ticks: 2, max_ticks: 8 };
    let cfg = with(RecoveryPolicy { copy_retry: backoff, ..RecoveryPolicy::UNTHROTTLED });
    let mut c = join_parked(&cfg);
    assert_eq!(c.shards[0].join.as_ref().unwrap().retry_ticks, Some((2, 4)), "first failure: [base, 2 base]");
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(2), Msg::Pong, &mut out);
    assert!(copy_requests(&out).is_empty(), "a sign of life is no retry under a backoff");
    run(&cfg, &mut c, 2);
    let mut ready = Vec::new();
    c.ready(&mut ready);
    assert_eq!(ready, [(Timer::CopyBackoffOver { shard: 0 }, 2)], "the window is open for 2 more ticks");
    assert!(c.no_timer_due(&cfg), "and time may pass meanwhile");
    let out = run(&cfg, &mut c, 2);
    assert!(copy_requests(&out).is_empty(), "the window may run to its end");
    let mut due = Vec::new();
    c.due(&cfg, &mut due);
    assert_eq!(due, [Timer::CopyBackoffOver { shard: 0 }], "at its end the retry is due");
    let out = run(&cfg, &mut c, 1);
    assert_eq!(copy_requests(&out), [2], "the missing source is asked again");
    // The next failure doubles the window's end.
    run(&cfg, &mut c, cfg.policy.replica_ack_timeout_ticks - 1);
    let mut due = Vec::new();
    c.due(&cfg, &mut due);
    assert_eq!(due, [Timer::CopyRetry { shard: 0 }]);
    c.on_timer(&cfg, Timer::CopyRetry { shard: 0 }, &mut Outbox::default());
    assert_eq!(c.shards[0].join.as_ref().unwrap().retry_ticks, Some((2, 8)));
}

#[test]
fn on_contact_a_parked_copy_is_asked_again_at_the_next_sign_of_life() {
    let cfg = resolved("default");
    let mut c = join_parked(&cfg);
    assert_eq!(c.shards[0].join.as_ref().unwrap().retry_ticks, None);
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(2), Msg::Pong, &mut out);
    assert_eq!(copy_requests(&out), [2]);
}

#[test]
fn a_join_out_of_time_is_abandoned_the_member_stays_and_the_target_is_not_tried_again() {
    let mut cfg = with(RecoveryPolicy { join_timeout_ticks: Some(6), ..RecoveryPolicy::UNTHROTTLED });
    cfg.nodes.push(cfg.nodes[3].clone());
    cfg.nodes[4].name = "n5".into();
    let mut c = Coordinator::new(&cfg, 0);
    n1_misses_a_deadline(&cfg, &mut c);
    let out = run(&cfg, &mut c, 6);
    assert!(out.events.iter().any(|e| matches!(e, Event::ChangeStarted(u) if u.replacement == 3)));
    let out = run(&cfg, &mut c, 6);
    let abandoned: Vec<_> = out.events.iter().filter(|e| matches!(e, Event::ChangeAbandoned(_))).collect();
    assert_eq!(abandoned.len(), 1, "{:?}", out.events);
    assert_eq!(c.shards[0].members.as_slice(), &[0, 1, 2], "n1 never left");
    assert_eq!(c.shards[0].abandoned_targets, 1 << 3);
    // n1 is still dead: another target is tried, never n4.
    let retried = out.events.iter().filter_map(|e| match e {
        Event::ChangeRequested(u) => Some(u.replacement),
        _ => None,
    });
    assert_eq!(retried.collect::<Vec<_>>(), [4]);
}

#[test]
fn a_join_abandoned_after_the_member_returned_takes_it_back() {
    let cfg = with(RecoveryPolicy { join_timeout_ticks: Some(6), ..RecoveryPolicy::UNTHROTTLED });
    let mut c = Coordinator::new(&cfg, 0);
    n1_misses_a_deadline(&cfg, &mut c);
    run(&cfg, &mut c, 2);
    assert!(c.shards[0].join.is_some());
    c.on_msg(&cfg, Endpoint::Node(0), Msg::Pong, &mut Outbox::default());
    let out = run(&cfg, &mut c, 6);
    assert!(out.events.iter().any(|e| matches!(e, Event::ChangeAbandoned(_))));
    assert!(c.shards[0].join.is_none() && c.queue.is_empty(), "n1 is alive: nothing to replace");
    assert_eq!(c.shards[0].members.as_slice(), &[0, 1, 2]);
}
