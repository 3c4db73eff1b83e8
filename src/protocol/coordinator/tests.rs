use super::*;
use crate::config::Scenario;
use crate::protocol::{OpId, Outbox};

pub(super) fn resolved(variant: &str) -> Resolved {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/models/coordinator-restart.toml"));
    let scenario = Scenario::load(path).expect("the library model loads");
    let v = scenario.variant(variant).expect("the variant exists");
    Resolved::new(&scenario, &v.policy).expect("it resolves")
}

/// How far a test follows a coordinator's quiet ticks.
const QUIET_PROBE_TICKS_MAX: TimerTicks = 200;

/// One tick passes, nothing due; `quiet_ticks` checked on a copy first: that many ticks pass
/// with no timer due and no window open.
pub(super) fn tick_probed(cfg: &Resolved, c: &mut Coordinator) {
    assert!(c.no_timer_due(cfg), "time passes a due timer");
    c.probe_quiet_ticks(cfg, QUIET_PROBE_TICKS_MAX);
    c.tick(cfg);
}

/// A coordinator that sequenced one write (token kept) and replaced n1 (node 0) by n4.
fn after_a_write_and_a_replacement(cfg: &Resolved) -> Coordinator {
    let mut c = Coordinator::new(cfg, 0);
    c.on_msg(cfg, Endpoint::Client(0), write(0), &mut Outbox::default());
    c.shards[0].members = [1, 2, 3].into_iter().collect();
    c
}

#[test]
fn a_restart_keeps_what_is_durable_and_forgets_the_rest() {
    let cfg = resolved("default");
    let before = after_a_write_and_a_replacement(&cfg);
    assert_eq!(before.ops.len(), 1);
    let after = Coordinator::recover(&cfg, 0, &before.durable(&cfg));
    assert_eq!(after.shards[0].members.as_slice(), &[1, 2, 3]);
    assert_eq!(after.shards[0].next_version, 2, "version 1 was handed out: never again");
    assert_eq!(after.tokens, before.tokens, "idempotency tokens are promised");
    assert!(after.ops.is_empty(), "requests in flight are lost");
}

#[test]
fn replica_sets_in_memory_are_lost_on_restart_but_versions_never_go_back() {
    let cfg = resolved("membership-in-memory");
    let before = after_a_write_and_a_replacement(&cfg);
    let after = Coordinator::recover(&cfg, 0, &before.durable(&cfg));
    assert_eq!(after.shards[0].members.as_slice(), cfg.initial_members[0].as_slice());
    assert_eq!(after.shards[0].next_version, 2);
}

pub(super) fn write(seq: u8) -> Msg {
    let op = OpId { client: 0, seq };
    Msg::Request {
        op,
        attempt: 1,
        kind: OpKind::Write,
        shard: 0,
        key: (),
        value: op.write_value(),
        token: (),
    }
}

fn ack(seq: u8) -> Msg {
    Msg::ReplicateAck { op: OpId { client: 0, seq }, attempt: 1, shard: 0 }
}

/// Queue "n4 replaces n1" in shard 0 and apply it now; what the step sent.
pub(super) fn start_join(cfg: &Resolved, c: &mut Coordinator) -> Outbox {
    let mut out = Outbox::default();
    c.enqueue(cfg, MembershipUpdate { shard: 0, evicted: 0, replacement: 3, is_move: false }, &mut out);
    let mut out = Outbox::default();
    c.on_timer(cfg, Timer::ApplyMembershipUpdate, &mut out);
    out
}

pub(super) fn copy_requests(out: &Outbox) -> Vec<NodeId> {
    out.sends
        .iter()
        .filter_map(|(dst, m)| match (dst, m) {
            (Endpoint::Node(n), Msg::CopyRequest { .. }) => Some(*n),
            _ => None,
        })
        .collect()
}

fn responded(out: &Outbox) -> bool {
    out.sends.iter().any(|(_, m)| matches!(m, Msg::Response { ok: true, .. }))
}

#[test]
fn a_write_during_a_join_reaches_the_learner_and_needs_one_more_ack() {
    let cfg = resolved("default");
    let mut c = Coordinator::new(&cfg, 0);
    assert_eq!(copy_requests(&start_join(&cfg, &mut c)), [1, 2], "no earlier write: copies at once");
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Client(0), write(0), &mut out);
    let to: Vec<Endpoint> = out.sends.iter().map(|(d, _)| *d).collect();
    assert_eq!(to, [Endpoint::Node(0), Endpoint::Node(1), Endpoint::Node(2), Endpoint::Node(3)]);
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(1), ack(0), &mut out);
    c.on_msg(&cfg, Endpoint::Node(2), ack(0), &mut out);
    assert!(!responded(&out), "W = 2 acks are not enough while n4 joins");
    c.on_msg(&cfg, Endpoint::Node(3), ack(0), &mut out);
    assert!(responded(&out), "W + 1 acks from the members and the learner");
}

#[test]
fn the_copies_wait_for_the_writes_that_began_before_the_join() {
    let cfg = resolved("default");
    let mut c = Coordinator::new(&cfg, 0);
    c.on_msg(&cfg, Endpoint::Client(0), write(0), &mut Outbox::default());
    assert!(
        copy_requests(&start_join(&cfg, &mut c)).is_empty(),
        "a write that missed the learner is in flight"
    );
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(1), ack(0), &mut out);
    assert!(copy_requests(&out).is_empty());
    c.on_msg(&cfg, Endpoint::Node(2), ack(0), &mut out);
    assert!(responded(&out), "acked by W members (it began before the join)");
    assert_eq!(copy_requests(&out), [1, 2], "the write ended: its acks are on the sources");
}

#[test]
fn a_copy_round_out_of_time_asks_a_source_again_when_it_is_heard_from() {
    let cfg = resolved("default");
    let mut c = Coordinator::new(&cfg, 0);
    start_join(&cfg, &mut c);
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(3), Msg::CopyAck { shard: 0, from: 1 }, &mut out);
    assert!(c.shards[0].join.is_some(), "one copy of the two needed");
    for _ in 0..cfg.policy.replica_ack_timeout_ticks {
        let mut due = Vec::new();
        c.due(&cfg, &mut due);
        assert!(due.is_empty(), "{due:?}");
        tick_probed(&cfg, &mut c);
    }
    let mut due = Vec::new();
    c.due(&cfg, &mut due);
    assert_eq!(due, [Timer::CopyRetry { shard: 0 }]);
    let mut out = Outbox::default();
    c.on_timer(&cfg, Timer::CopyRetry { shard: 0 }, &mut out);
    assert!(out.sends.is_empty() && c.no_timer_due(&cfg), "parked: no retry per tick");
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(1), Msg::Pong, &mut out);
    assert!(copy_requests(&out).is_empty(), "n2 copied already");
    c.on_msg(&cfg, Endpoint::Node(2), Msg::Pong, &mut out);
    assert_eq!(copy_requests(&out), [2], "n3, still to copy, is asked again");
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(3), Msg::CopyAck { shard: 0, from: 2 }, &mut out);
    assert_eq!(c.shards[0].members.as_slice(), &[1, 2, 3]);
    assert!(c.shards[0].join.is_none());
}

#[test]
fn a_node_heard_from_since_a_request_left_is_not_declared_dead_at_its_deadline() {
    let cfg = resolved("default");
    assert_eq!(cfg.policy.failure_detection, FailureDetection::Coupled);
    let mut c = Coordinator::new(&cfg, 0);
    c.on_msg(&cfg, Endpoint::Client(0), write(0), &mut Outbox::default());
    c.on_msg(&cfg, Endpoint::Client(0), write(1), &mut Outbox::default());
    // n1 answers the second write only, n3 the first only.
    for (n, seq) in [(1, 0), (2, 0), (0, 1), (1, 1)] {
        c.on_msg(&cfg, Endpoint::Node(n), ack(seq), &mut Outbox::default());
    }
    for _ in 0..cfg.policy.replica_ack_timeout_ticks {
        tick_probed(&cfg, &mut c);
    }
    let mut out = Outbox::default();
    c.on_timer(&cfg, Timer::AckDeadline { op: OpId { client: 0, seq: 0 }, attempt: 1 }, &mut out);
    assert_eq!(c.health[0], Health::Alive, "n1 missed write 0 but answered write 1 since it left");
    c.on_timer(&cfg, Timer::AckDeadline { op: OpId { client: 0, seq: 1 }, attempt: 1 }, &mut out);
    assert_eq!(c.health[2], Health::Alive, "n3 missed write 1 but answered write 0 after it left");
    // A third write: n3 is silent from the moment it leaves.
    c.on_msg(&cfg, Endpoint::Client(0), write(2), &mut Outbox::default());
    for n in [0, 1] {
        c.on_msg(&cfg, Endpoint::Node(n), ack(2), &mut Outbox::default());
    }
    for _ in 0..cfg.policy.replica_ack_timeout_ticks {
        tick_probed(&cfg, &mut c);
    }
    c.on_timer(&cfg, Timer::AckDeadline { op: OpId { client: 0, seq: 2 }, attempt: 1 }, &mut out);
    assert_eq!(c.health[2], Health::Dead, "coupled detection: a silent miss is a death");
}

/// The coordinator-restart scenario with a second coordinator, in zone a.
fn two_coordinators() -> Resolved {
    let mut cfg = resolved("default");
    cfg.coordinators.push(crate::config::CoordinatorPlace { name: "cb".into(), zone: 0 });
    cfg
}

fn views_sent(out: &Outbox) -> Vec<(Endpoint, u8, Option<JoinView>)> {
    out.sends
        .iter()
        .filter_map(|(dst, m)| match m {
            Msg::View { epoch, join, .. } => Some((*dst, *epoch, *join)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_leader_moves_a_change_on_only_once_every_coordinator_acked_its_view() {
    let cfg = two_coordinators();
    let mut leader = Coordinator::new(&cfg, 0);
    let mut follower: Coordinator = Coordinator::new(&cfg, 1);
    // The follower has a write in flight that began before the join.
    follower.on_msg(&cfg, Endpoint::Client(0), write(0), &mut Outbox::default());
    assert!(follower.ops[0].querying, "with two coordinators a write first reads the versions");

    let out = start_join(&cfg, &mut leader);
    let sent = views_sent(&out);
    assert_eq!(sent.len(), 1);
    let (dst, epoch, join) = sent[0];
    assert_eq!(dst, Endpoint::Coordinator(1));
    assert!(join.is_some_and(|j| !j.swapping));
    assert!(
        !out.sends.iter().any(|(_, m)| matches!(m, Msg::CopyRequest { .. })),
        "no copy before the other coordinator acked the join"
    );

    // The follower takes the view but owes the ack while its earlier write is in flight.
    let members = leader.shards[0].members.iter().fold(0u8, |m, &n| m | 1 << n);
    let mut fout = Outbox::default();
    follower.on_msg(&cfg, Endpoint::LEADER, Msg::View { shard: 0, epoch, members, join }, &mut fout);
    assert!(fout.sends.is_empty(), "the ack waits for the earlier write");
    assert!(follower.shards[0].ack_owed);
    // Its deadline ends the write: now it acks.
    let mut fout = Outbox::default();
    let op = follower.ops[0].op;
    follower.on_timer(&cfg, Timer::AckDeadline { op, attempt: 1 }, &mut fout);
    let ack = *fout.sends.iter().find(|(_, m)| matches!(m, Msg::ViewAck { .. })).expect("the ack");
    assert_eq!(ack.0, Endpoint::LEADER);

    let mut out = Outbox::default();
    leader.on_msg(&cfg, Endpoint::Coordinator(1), ack.1, &mut out);
    assert!(out.sends.iter().any(|(_, m)| matches!(m, Msg::CopyRequest { .. })), "copies once all acked");

    // Enough copies: the leader publishes the swapping view, and swaps only on its ack.
    let replacement = leader.shards[0].join.as_ref().unwrap().replacement;
    let sources: Vec<NodeId> = leader.shards[0].members.iter().copied().filter(|&m| m != 0).collect();
    let mut out = Outbox::default();
    for s in sources {
        leader.on_msg(&cfg, Endpoint::Node(replacement), Msg::CopyAck { shard: 0, from: s }, &mut out);
    }
    let sent = views_sent(&out);
    assert!(sent.last().is_some_and(|(_, _, j)| j.is_some_and(|j| j.swapping)), "{sent:?}");
    assert!(leader.shards[0].join.is_some(), "no swap before the ack of the swapping view");
    assert_eq!(leader.read_set(0) & (1 << replacement), 1 << replacement, "reads go to the new set");
    let epoch = leader.shards[0].epoch;
    let mut out = Outbox::default();
    leader.on_msg(&cfg, Endpoint::Coordinator(1), Msg::ViewAck { shard: 0, epoch }, &mut out);
    assert!(leader.shards[0].join.is_none());
    assert!(leader.shards[0].members.contains(&replacement));
    assert!(views_sent(&out).iter().any(|(_, _, j)| j.is_none()), "the final view goes out");
}

#[test]
fn versions_of_two_coordinators_never_collide_and_follow_what_was_read() {
    let cfg = two_coordinators();
    let mut a: Coordinator = Coordinator::new(&cfg, 0);
    let mut b: Coordinator = Coordinator::new(&cfg, 1);
    let va = a.version_above(&cfg, 0, 0);
    let vb = b.version_above(&cfg, 0, 0);
    assert_ne!(va, vb);
    assert_eq!((va % 2, vb % 2), (0, 1), "each coordinator in its own class");
    // b read a's version: its next one is above it.
    assert!(b.version_above(&cfg, 0, va) > va);
    assert!(a.version_above(&cfg, 0, 0) > va, "and above what it handed out itself");
}

#[test]
fn a_reload_keeps_what_the_coordinator_knows_and_starts_only_the_timers_the_new_policy_needs() {
    let coupled = resolved("default");
    let mut independent = coupled.clone();
    independent.policy.failure_detection = FailureDetection::Independent;
    independent.policy.heartbeat_interval_ticks = 3;
    independent.policy.dead_after_ticks = 9;
    let mut c = after_a_write_and_a_replacement(&coupled);
    c.health[2] = Health::Dead;
    let before = c.clone();
    c.reload(&coupled, &independent);
    assert_eq!(
        (c.ops.clone(), c.shards.clone(), c.health.clone()),
        (before.ops, before.shards, before.health)
    );
    assert_eq!(c.silence_ticks.len(), coupled.nodes.len(), "independent detection counts silence per node");
    assert_eq!(c.heartbeat_ticks, 3);
    let mut due = Vec::new();
    c.due(&independent, &mut due);
    assert!(!due.contains(&Timer::Heartbeat), "a full interval to the first heartbeat");
    // And back: the counters go; a reload to the same policy changes nothing.
    let again = c.clone();
    c.reload(&independent, &independent);
    assert_eq!(c, again);
    c.reload(&independent, &coupled);
    assert!(c.silence_ticks.is_empty());
    assert_eq!(c.heartbeat_ticks, 0);
}

#[test]
fn a_retry_sent_while_the_first_attempt_reads_versions_writes_the_same_version() {
    let cfg = two_coordinators();
    assert!(cfg.policy.retry.idempotency_tokens);
    let mut c: Coordinator = Coordinator::new(&cfg, 0);
    let op = OpId { client: 0, seq: 0 };
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Client(0), write(0), &mut out);
    // The client times out and retries with the same token before any node answered.
    let Msg::Request { kind, shard, key, value, token, .. } = write(0) else { unreachable!() };
    c.on_msg(
        &cfg,
        Endpoint::Client(0),
        Msg::Request { op, attempt: 2, kind, shard, key, value, token },
        &mut out,
    );
    assert_eq!(c.ops.len(), 2);
    assert!(c.ops.iter().all(|o| o.querying));
    for attempt in [1, 2] {
        for n in [0, 1] {
            let reply = Msg::ReadReply { op, attempt, shard: 0, version: 0, value: 0 };
            c.on_msg(&cfg, Endpoint::Node(n), reply, &mut out);
        }
    }
    let versions: std::collections::BTreeSet<u8> = out
        .sends
        .iter()
        .filter_map(|(_, m)| match m {
            Msg::Replicate { version, .. } => Some(*version),
            _ => None,
        })
        .collect();
    assert_eq!(versions.len(), 1, "both attempts replicate one version: {versions:?}");
}

/// The library's saturation model: one unit of work per tick, an update 8 units, a copy 4.
fn saturation(variant: &str) -> Resolved {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/ack-timeout-coordinator-saturation.toml");
    let scenario = Scenario::load(std::path::Path::new(path)).expect("the library model loads");
    let v = scenario.variant(variant).expect("the variant exists");
    Resolved::new(&scenario, &v.policy).expect("it resolves")
}

/// n4 (node 3) replaced n2 (node 1) in s1 and the copies reached it: 16 units of work queued.
fn after_an_eviction(cfg: &Resolved) -> Coordinator {
    let mut c: Coordinator = Coordinator::new(cfg, 0);
    let mut out = Outbox::default();
    c.enqueue(cfg, MembershipUpdate { shard: 0, evicted: 1, replacement: 3, is_move: false }, &mut out);
    c.on_timer(cfg, Timer::ApplyMembershipUpdate, &mut out);
    for from in [0, 2] {
        c.on_msg(cfg, Endpoint::Node(3), Msg::CopyAck { shard: 0, from }, &mut out);
    }
    assert_eq!(c.shards[0].members.as_slice(), &[0, 2, 3]);
    assert_eq!(c.backlog_work, 8 + 2 * 4, "an update and two copies");
    c
}

/// A write arrives behind the backlog, waits it out, is sent, and n1 and n3 ack it; what the
/// fan-out sent.
fn a_write_that_waited(cfg: &Resolved, c: &mut Coordinator) -> Outbox {
    let mut out = Outbox::default();
    c.on_msg(cfg, Endpoint::Client(0), write(0), &mut out);
    assert!(out.sends.is_empty(), "the write waits behind 16 units: nothing is sent");
    assert_eq!(c.ops[0].fan_out_ticks, Some(16));
    assert_eq!(c.ops[0].deadline_ticks, 20, "the deadline runs from the arrival");
    for _ in 0..16 {
        tick_probed(cfg, c);
    }
    assert_eq!(c.backlog_work, 0);
    let mut due = Vec::new();
    c.due(cfg, &mut due);
    let op = OpId { client: 0, seq: 0 };
    assert_eq!(due, [Timer::FanOut { op, attempt: 1 }]);
    let mut fan_out = Outbox::default();
    c.on_timer(cfg, Timer::FanOut { op, attempt: 1 }, &mut fan_out);
    for n in [0, 2] {
        c.on_msg(cfg, Endpoint::Node(n), ack(0), &mut Outbox::default());
    }
    fan_out
}

#[test]
fn a_request_behind_the_backlog_is_sent_when_the_work_ahead_is_done() {
    let cfg = saturation("rollback");
    let mut c = after_an_eviction(&cfg);
    let out = a_write_that_waited(&cfg, &mut c);
    let sent: Vec<Endpoint> = out.sends.iter().map(|(to, _)| *to).collect();
    assert_eq!(
        sent,
        [Endpoint::Node(0), Endpoint::Node(2), Endpoint::Node(3)],
        "the replica set there is now"
    );
    assert_eq!(c.ops[0].deadline_ticks, 4, "16 of its 20 ticks were spent waiting");
}

#[test]
fn a_miss_the_coordinators_own_queue_caused_evicts_only_without_a_ceiling() {
    let op = OpId { client: 0, seq: 0 };
    for (variant, evicts) in [("rollback", true), ("rollback-load-ceiling", false)] {
        let cfg = saturation(variant);
        let mut c = after_an_eviction(&cfg);
        a_write_that_waited(&cfg, &mut c);
        for _ in 0..4 {
            tick_probed(&cfg, &mut c);
        }
        // n4's ack is late: the deadline fires with the backlog long drained, but the write
        // waited behind 16 units.
        let mut out = Outbox::default();
        c.on_timer(&cfg, Timer::AckDeadline { op, attempt: 1 }, &mut out);
        assert_eq!(c.health[3], Health::Dead, "{variant}: the detector still blames n4");
        let suppressed = out.events.iter().any(|e| {
            matches!(
                e,
                Event::EvictionSuppressed { node: 3, why: eviction::Suppressed::CoordinatorOverloaded, .. }
            )
        });
        assert_eq!(c.queue.len() == 1, evicts, "{variant}: {:?}", out.events);
        assert_eq!(suppressed, !evicts, "{variant}: {:?}", out.events);
    }
}

/// The store's coordinators run for ever, so view epochs wrap: a view published after 255 is
/// still newer to the follower, its ack still counts, and a stale re-send of 255 is ignored.
#[test]
fn view_epochs_wrap_and_stay_ordered() {
    let cfg = two_coordinators();
    let mut leader: Coordinator = Coordinator::new(&cfg, 0);
    let mut follower: Coordinator = Coordinator::new(&cfg, 1);
    leader.shards[0].epoch = 255;
    follower.shards[0].epoch = 255;
    let mut out = Outbox::default();
    leader.publish(&cfg, 0, &mut out);
    let (dst, view) = *out.sends.iter().find(|(_, m)| matches!(m, Msg::View { .. })).expect("a view");
    assert_eq!(dst, Endpoint::Coordinator(1));
    assert!(matches!(view, Msg::View { epoch: 0, .. }), "{view:?}");
    let mut fout = Outbox::default();
    follower.on_msg(&cfg, Endpoint::LEADER, view, &mut fout);
    assert_eq!(follower.shards[0].epoch, 0, "epoch 0 after 255 is the newer view");
    let ack = fout.sends.iter().find(|(_, m)| matches!(m, Msg::ViewAck { .. })).expect("the ack").1;
    let mut out = Outbox::default();
    leader.on_msg(&cfg, Endpoint::Coordinator(1), ack, &mut out);
    assert_eq!(leader.shards[0].acked, views::followers(&cfg), "the ack of epoch 0 counts");
    // A re-send of the old view, overtaken on the way: ignored, not acked.
    let members = follower.shards[0].members.iter().fold(0u8, |m, &n| m | 1 << n);
    let mut fout = Outbox::default();
    let stale = Msg::View { shard: 0, epoch: 255, members: members & !1, join: None };
    follower.on_msg(&cfg, Endpoint::LEADER, stale, &mut fout);
    assert!(fout.sends.is_empty(), "{:?}", fout.sends);
    assert_eq!(follower.shards[0].epoch, 0);
    assert_eq!(follower.shards[0].members.iter().fold(0u8, |m, &n| m | 1 << n), members);
    for (a, b, after) in [(1u8, 0u8, true), (0, 255, true), (255, 0, false), (3, 3, false), (2, 254, true)] {
        assert_eq!(views::epoch_after(a, b), after, "{a} after {b}");
    }
}

/// A coordinator with independent detection: heartbeats every 5 ticks, suspect after 3, dead
/// after 4 ticks of silence, judged by `check`.
fn independent_detection(check: HealthCheck) -> Resolved {
    let mut cfg = resolved("default");
    cfg.policy.failure_detection = FailureDetection::Independent;
    cfg.policy.health_check = check;
    cfg.policy.heartbeat_interval_ticks = 5;
    cfg.policy.suspect_after_ticks = 3;
    cfg.policy.dead_after_ticks = 4;
    cfg
}

/// Let `ticks` ticks pass, firing every due timer first; the nodes declared dead, with the
/// tick (counted from 1) at which each was.
fn run_silent(cfg: &Resolved, c: &mut Coordinator, ticks: u32) -> Vec<(NodeId, u32)> {
    let mut dead = Vec::new();
    for t in 0..=ticks {
        loop {
            let mut due = Vec::new();
            c.due(cfg, &mut due);
            let Some(timer) = due.first().copied() else { break };
            let mut out = Outbox::default();
            c.on_timer(cfg, timer, &mut out);
            for e in out.events {
                if let Event::DeclaredDead { node, .. } = e {
                    dead.push((node, t));
                }
            }
        }
        if t < ticks {
            tick_probed(cfg, c);
        }
    }
    dead
}

#[test]
fn rounds_judge_silence_only_at_heartbeat_rounds() {
    let cfg = independent_detection(HealthCheck::Rounds);
    let mut c = Coordinator::new(&cfg, 0);
    // Silent from the start: silence reaches dead_after (4) at tick 4, but the first round is at 5.
    let dead = run_silent(&cfg, &mut c, 6);
    assert!(dead.iter().all(|&(_, t)| t == 5), "{dead:?}");
    assert_eq!(dead.len(), cfg.nodes.len());
}

#[test]
fn continuous_checking_judges_at_the_tick_silence_reaches_a_threshold() {
    let cfg = independent_detection(HealthCheck::Continuous);
    let mut c = Coordinator::new(&cfg, 0);
    let dead = run_silent(&cfg, &mut c, 3);
    assert!(dead.is_empty(), "nobody is dead before dead_after: {dead:?}");
    assert!(c.health.iter().all(|h| *h == Health::Suspect), "suspect at suspect_after: {:?}", c.health);
    let dead = run_silent(&cfg, &mut c, 1);
    assert_eq!(dead.len(), cfg.nodes.len(), "dead at the tick silence reaches dead_after");
    // Hearing from a node makes it alive at once, and its silence starts again.
    c.on_msg(&cfg, Endpoint::Node(1), Msg::Pong, &mut Outbox::default());
    assert_eq!(c.health[1], Health::Alive);
    let mut due = Vec::new();
    c.due(&cfg, &mut due);
    assert!(!due.contains(&Timer::SilenceCrossed { node: 1 }));
    assert!(c.no_timer_due(&cfg));
}

fn refused(seq: u8) -> Msg {
    Msg::Refused { op: OpId { client: 0, seq }, attempt: 1, shard: 0 }
}

fn failures(out: &Outbox) -> Vec<Failure> {
    out.events
        .iter()
        .filter_map(|e| match e {
            Event::RequestFailed { why, .. } => Some(*why),
            _ => None,
        })
        .collect()
}

/// W = 2 of 3: one refusal leaves a quorum possible (the others' acks answer the client);
/// a second fails the write at once, naming both, and its deadline later sends no second
/// answer and judges neither refusing node dead (coupled detection: they were heard from).
#[test]
fn a_write_fails_once_too_few_can_still_ack_and_refusers_are_alive() {
    let cfg = resolved("default");
    let mut c = Coordinator::new(&cfg, 0);
    c.on_msg(&cfg, Endpoint::Client(0), write(0), &mut Outbox::default());
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(0), refused(0), &mut out);
    assert!(out.sends.is_empty() && out.events.is_empty(), "two may still ack: {out:?}");
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(1), refused(0), &mut out);
    assert_eq!(
        failures(&out),
        [Failure::Refused { answered: 0, needed: 2, refused: 0b011, missing: 0b100, repairing: false }]
    );
    assert!(out
        .sends
        .iter()
        .any(|(dst, m)| *dst == Endpoint::Client(0) && matches!(m, Msg::Response { ok: false, .. })));
    // The late ack of the third is no success, and the refusals are not repeated.
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(2), ack(0), &mut out);
    c.on_msg(&cfg, Endpoint::Node(1), refused(0), &mut out);
    assert!(out.sends.is_empty() && out.events.is_empty(), "{out:?}");
    assert_eq!(c.ops.len(), 1, "kept until its deadline: a write whose acks may still come");
    let mut out = Outbox::default();
    c.on_timer(&cfg, Timer::AckDeadline { op: OpId { client: 0, seq: 0 }, attempt: 1 }, &mut out);
    assert!(out.sends.is_empty() && failures(&out).is_empty(), "answered once: {out:?}");
    assert!(c.health.iter().all(|&h| h != Health::Dead), "{:?}", c.health);

    // One refusal, then two acks: the write succeeds.
    let mut c = Coordinator::new(&cfg, 0);
    c.on_msg(&cfg, Endpoint::Client(0), write(1), &mut Outbox::default());
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(2), refused(1), &mut out);
    c.on_msg(&cfg, Endpoint::Node(0), ack(1), &mut out);
    c.on_msg(&cfg, Endpoint::Node(1), ack(1), &mut out);
    assert!(responded(&out) && failures(&out).is_empty());

    // Asked fewer than a quorum from the start: a refusal changes nothing, the deadline
    // answers (as it does in every model, where nothing refuses).
    let mut c: Coordinator = Coordinator::new(&cfg, 0);
    c.shards[0].members = [0].into_iter().collect();
    c.on_msg(&cfg, Endpoint::Client(0), write(2), &mut Outbox::default());
    let mut out = Outbox::default();
    c.on_msg(&cfg, Endpoint::Node(0), refused(2), &mut out);
    assert!(failures(&out).is_empty());
    c.on_timer(&cfg, Timer::AckDeadline { op: OpId { client: 0, seq: 2 }, attempt: 1 }, &mut out);
    assert!(matches!(failures(&out)[..], [Failure::Deadline { answered: 0, needed: 2, .. }]), "{out:?}");
}
