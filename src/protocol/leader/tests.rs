//! The leader family's machines, driven by hand: a manager and three replicas of one shard
//! (n1 and n2 in zone a with the manager, n3 in zone b; n1 is the first primary), a wire that
//! delivers in the order the test chooses, cuts that lose messages, and crashes. The three
//! incidents of issue 33 are retold here step by step, with and without their fix.

use super::*;
use crate::config::{OpKind, PolicyPatch, Scenario, SourcedPolicy};
use crate::policy::detector::Health;
use crate::policy::leader::Blocked;
use crate::protocol::{Endpoint, Event, OpId, Outbox};

const N1: NodeId = 0;
const N2: NodeId = 1;
const N3: NodeId = 2;
const WRITER: u8 = 0;
const READER: u8 = 1;

/// A message on the wire.
#[derive(Clone, Copy, Debug)]
struct Wire {
    src: Endpoint,
    dst: Endpoint,
    msg: Msg,
}

/// A deterministic driver: it delivers, fires and ticks only when the test says so.
struct Cluster {
    cfg: Resolved,
    manager: Manager,
    replicas: Vec<Replica>,
    data: Vec<Vec<Stored>>,
    wire: Vec<Wire>,
    /// Nodes cut off from everyone, and pairs of nodes cut off from each other.
    isolated: Vec<NodeId>,
    cut: Vec<(NodeId, NodeId)>,
    down: Vec<bool>,
    /// Every response a client got, and every event, in order.
    responses: Vec<Msg>,
    events: Vec<LeaderEvent>,
}

/// The cluster under the leader family with `patch` (policy keys, TOML) over the test
/// scenario's policy.
/// How far a test follows a machine's quiet ticks.
const QUIET_PROBE_TICKS_MAX: u32 = 200;

fn cluster(patch: &str) -> Cluster {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/leader-machines.toml"));
    let scenario = Scenario::load(path).expect("the test scenario loads");
    let mut cfg = Resolved::new(&scenario, &scenario.base_policy).expect("it resolves");
    let over: PolicyPatch =
        toml::from_str(&format!("replication = \"leader\"\n{patch}")).expect("the patch is policy keys");
    let sourced = scenario.base_policy.then(&SourcedPolicy::new(over, "test"));
    cfg.policy = sourced.resolve_any_family(scenario.tick_ms, scenario.nodes.len()).expect("a valid policy");
    let nodes = cfg.nodes.len();
    Cluster {
        manager: Manager::new(&cfg),
        replicas: (0..nodes as NodeId).map(|n| Replica::new(&cfg, n)).collect(),
        data: vec![vec![Stored::default(); cfg.shard_names.len()]; nodes],
        wire: Vec::new(),
        isolated: Vec::new(),
        cut: Vec::new(),
        down: vec![false; nodes],
        responses: Vec::new(),
        events: Vec::new(),
        cfg,
    }
}

fn node_of(e: Endpoint) -> Option<NodeId> {
    match e {
        Endpoint::Node(n) => Some(n),
        _ => None,
    }
}

impl Cluster {
    fn blocked(&self, a: Endpoint, b: Endpoint) -> bool {
        let (na, nb) = (node_of(a), node_of(b));
        let isolated = |n: Option<NodeId>| n.is_some_and(|n| self.isolated.contains(&n));
        let cut = match (na, nb) {
            (Some(x), Some(y)) => self.cut.contains(&(x, y)) || self.cut.contains(&(y, x)),
            _ => false,
        };
        isolated(na) || isolated(nb) || cut
    }

    /// Put a step's outputs into the world: sends on the wire (lost across a cut), events kept.
    fn apply(&mut self, src: Endpoint, out: Outbox) {
        for (dst, msg) in out.sends {
            if !self.blocked(src, dst) {
                self.wire.push(Wire { src, dst, msg });
            }
        }
        for e in out.events {
            if let Event::Leader(e) = e {
                self.events.push(e);
            }
        }
    }

    /// Deliver the message at `i` (lost if a cut or a crash came in between).
    fn deliver(&mut self, i: usize) {
        let Wire { src, dst, msg } = self.wire.remove(i);
        if self.blocked(src, dst) || node_of(dst).is_some_and(|n| self.down[usize::from(n)]) {
            return;
        }
        let mut out = Outbox::default();
        match dst {
            Endpoint::Node(n) => {
                let i = usize::from(n);
                self.replicas[i].on_msg(&self.cfg, &mut self.data[i][..], src, msg, &mut out);
            }
            Endpoint::Coordinator(_) => self.manager.on_msg(&self.cfg, src, msg, &mut out),
            Endpoint::Client(_) => self.responses.push(msg),
        }
        self.apply(dst, out);
    }

    /// Fire every due timer, until none is. Whether any fired.
    fn fire_due(&mut self) -> bool {
        let mut fired = false;
        loop {
            let mut timers = Vec::new();
            self.manager.due(&self.cfg, &mut timers);
            for t in timers.iter().copied() {
                let mut out = Outbox::default();
                self.manager.on_timer(&self.cfg, t, &mut out);
                self.apply(Endpoint::LEADER, out);
            }
            let mut any = !timers.is_empty();
            for n in 0..self.replicas.len() {
                if self.down[n] {
                    continue;
                }
                let mut timers = Vec::new();
                self.replicas[n].due(&mut timers);
                for t in timers {
                    let mut out = Outbox::default();
                    self.replicas[n].on_timer(&self.cfg, &self.data[n][..], t, &mut out);
                    self.apply(Endpoint::Node(n as NodeId), out);
                    any = true;
                }
            }
            if !any {
                return fired;
            }
            fired = true;
        }
    }

    /// Deliver everything in order and fire what falls due, until nothing moves.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            if !self.wire.is_empty() {
                self.deliver(0);
            } else if !self.fire_due() {
                return;
            }
        }
        panic!("the cluster does not settle");
    }

    /// Time passes by one tick; nothing may be due. Each machine's `quiet_ticks` is checked
    /// on a copy first: that many ticks pass with no timer due.
    fn tick(&mut self) {
        assert!(self.manager.no_timer_due(&self.cfg), "time passes a due timer of the manager");
        let quiet = self.manager.quiet_ticks(&self.cfg).unwrap_or(QUIET_PROBE_TICKS_MAX);
        let mut copy = self.manager.clone();
        for k in 1..quiet.min(QUIET_PROBE_TICKS_MAX) {
            copy.tick(&self.cfg);
            assert!(copy.no_timer_due(&self.cfg), "the manager's timer due after {k} of {quiet} quiet ticks");
        }
        for n in (0..self.replicas.len()).filter(|&n| !self.down[n]) {
            let quiet = self.replicas[n].quiet_ticks().map_or(QUIET_PROBE_TICKS_MAX, u32::from);
            let mut copy = self.replicas[n].clone();
            for k in 1..quiet.min(QUIET_PROBE_TICKS_MAX) {
                copy.tick();
                assert!(copy.no_timer_due(), "node {n}'s timer due after {k} of {quiet} quiet ticks");
            }
        }
        self.manager.tick(&self.cfg);
        for n in (0..self.replicas.len()).filter(|&n| !self.down[n]) {
            assert!(self.replicas[n].no_timer_due(), "time passes a due timer of node {n}");
            self.replicas[n].tick();
        }
    }

    /// `n` ticks, each after everything in flight settled.
    fn run(&mut self, ticks: usize) {
        for _ in 0..ticks {
            self.settle();
            self.tick();
        }
        self.settle();
    }

    /// Run until `until` holds of the events, for at most `ticks_max` ticks.
    fn run_until(&mut self, ticks_max: usize, until: impl Fn(&[LeaderEvent]) -> bool) {
        for _ in 0..ticks_max {
            self.settle();
            if until(&self.events) {
                return;
            }
            self.tick();
        }
        panic!("not reached in {ticks_max} ticks: {:?}", self.events);
    }

    /// A client's request reaches the manager now (clients are never cut off).
    fn request(&mut self, client: u8, seq: u8, kind: OpKind) -> OpId {
        let op = OpId { client, seq };
        let msg =
            Msg::Request { op, attempt: 1, kind, shard: 0, key: (), value: op.write_value(), token: () };
        let mut out = Outbox::default();
        self.manager.on_msg(&self.cfg, Endpoint::Client(client), msg, &mut out);
        self.apply(Endpoint::LEADER, out);
        op
    }

    fn write(&mut self, seq: u8) -> OpId {
        self.request(WRITER, seq, OpKind::Write)
    }

    /// The client's answer to `op`, if one came: ok or not, and the value.
    fn answer(&self, op: OpId) -> Option<(bool, u8)> {
        self.responses.iter().find_map(|m| match *m {
            Msg::Response { op: o, ok, value, .. } if o == op => Some((ok, value)),
            _ => None,
        })
    }

    /// Take the messages matching `pick` off the wire (to lose them, or deliver them later).
    fn hold(&mut self, pick: impl Fn(&Wire) -> bool) -> Vec<Wire> {
        let (held, rest) = self.wire.iter().partition(|w| pick(w));
        self.wire = rest;
        held
    }

    fn crash(&mut self, n: NodeId) {
        self.down[usize::from(n)] = true;
    }

    fn register(&self, n: NodeId) -> Stored {
        self.data[usize::from(n)][0]
    }

    fn shard(&self, n: NodeId) -> &ReplicaShard {
        self.replicas[usize::from(n)].shards[0].as_ref().expect("a replica of s1")
    }

    fn promotions(&self) -> Vec<(NodeId, NodeId, u8, bool)> {
        self.events
            .iter()
            .filter_map(|e| match *e {
                LeaderEvent::Promoted { old, new, epoch, clean, .. } => Some((old, new, epoch, clean)),
                _ => None,
            })
            .collect()
    }

    /// The epochs of the writes the manager acknowledged, in order.
    fn acked_epochs(&self) -> Vec<u8> {
        self.events
            .iter()
            .filter_map(|e| match *e {
                LeaderEvent::WriteAcked { epoch, .. } => Some(epoch),
                _ => None,
            })
            .collect()
    }
}

fn promoted(events: &[LeaderEvent]) -> bool {
    events.iter().any(|e| matches!(e, LeaderEvent::Promoted { .. }))
}

/// `single_primary`'s second half: no write acknowledged in an epoch after a write of a newer
/// epoch was.
fn deposed_primary_acked_late(acked_epochs: &[u8]) -> bool {
    acked_epochs.windows(2).any(|w| w[1] < w[0])
}

fn appends_to(n: NodeId) -> impl Fn(&Wire) -> bool {
    move |w| w.dst == Endpoint::Node(n) && matches!(w.msg, Msg::Leader(LeaderMsg::Append { .. }))
}

#[test]
fn a_write_is_acked_once_every_in_sync_replica_holds_it() {
    let mut c = cluster("acks = \"in_sync\"\nmin_in_sync = 2");
    assert_eq!(c.shard(N1).role, Role::Primary);
    assert_eq!(c.shard(N2).role, Role::Follower { primary: Some(N1) });
    let w = c.write(0);
    c.deliver(0); // the write reaches n1, which appends to n2 and n3
    let to_n3 = c.hold(appends_to(N3));
    c.settle();
    assert_eq!(c.answer(w), None, "n3 is in sync and does not hold it yet");
    assert_eq!(c.register(N2).version, 1);
    c.wire.extend(to_n3);
    c.settle();
    assert_eq!(c.answer(w), Some((true, w.write_value())));
    assert_eq!(c.acked_epochs(), [0]);
}

// ---------------------------------------------------------------------------------------------
// Incident (a): asynchronous replication and a failover across a short cut.

/// n1 takes a write and is cut off before its appends leave; the detector judges it dead.
fn write_then_cut_off_the_primary(c: &mut Cluster) -> OpId {
    let w = c.write(0);
    c.deliver(0);
    c.hold(|w| matches!(w.msg, Msg::Leader(LeaderMsg::Append { .. })));
    c.settle();
    c.isolated.push(N1);
    w
}

#[test]
fn async_replication_loses_a_write_acked_before_the_failover() {
    let mut c = cluster("acks = \"leader\"");
    let w = write_then_cut_off_the_primary(&mut c);
    assert_eq!(c.answer(w), Some((true, w.write_value())), "acked by the primary alone");
    c.run_until(10, promoted);
    assert_eq!(c.promotions(), [(N1, N2, 1, true)], "n2: in sync, in n1's zone");
    assert_eq!(c.register(N2).version, 0, "the promoted follower never got the acked write");
    // n1 comes back as n2's follower and adopts n2's log: the write is gone everywhere.
    c.isolated.clear();
    c.run(2);
    assert_eq!(c.shard(N1).role, Role::Follower { primary: Some(N2) });
    assert!((0..3).all(|n| c.register(n).version == 0));
}

#[test]
fn in_sync_acks_with_two_copies_wait_for_the_followers() {
    let mut c = cluster("acks = \"in_sync\"\nmin_in_sync = 2");
    let w = write_then_cut_off_the_primary(&mut c);
    assert_eq!(c.answer(w), None, "no follower holds it: not acked");
    c.run_until(10, promoted);
    assert_eq!(c.register(N2).version, 0);
    c.run(10);
    assert_eq!(c.answer(w), Some((false, 0)), "the client is told the write failed");
    assert!(c.acked_epochs().is_empty(), "nothing acked, nothing lost");
}

// ---------------------------------------------------------------------------------------------
// Incident (b): the in-sync set shrinks to the primary, then an unclean election.

/// Cut n1 off from its followers (not from the manager), write, and let both followers lag
/// out of the in-sync set.
fn shrink_in_sync_to_the_primary(c: &mut Cluster) -> OpId {
    c.cut = vec![(N1, N2), (N1, N3)];
    let w = c.write(0);
    c.run_until(10, |es| es.iter().any(|e| matches!(e, LeaderEvent::InSyncChanged { in_sync: 0b001, .. })));
    assert_eq!(c.manager.shards[0].in_sync, 0b001, "persisted by the manager");
    w
}

#[test]
fn an_unclean_election_after_the_in_sync_set_shrank_loses_an_acked_write() {
    let mut c = cluster("acks = \"in_sync\"\nmin_in_sync = 1\nunclean_election = true");
    let w = shrink_in_sync_to_the_primary(&mut c);
    assert_eq!(c.answer(w), Some((true, w.write_value())), "min_in_sync = 1: the primary alone acks");
    c.crash(N1);
    c.run_until(10, promoted);
    assert_eq!(c.promotions(), [(N1, N2, 1, false)], "nobody in sync answered: unclean");
    assert_eq!(c.register(N2).version, 0, "the acked write is gone");
}

#[test]
fn two_in_sync_copies_and_clean_elections_ack_nothing_and_promote_nobody() {
    let mut c = cluster("acks = \"in_sync\"\nmin_in_sync = 2\nunclean_election = false");
    let w = shrink_in_sync_to_the_primary(&mut c);
    assert_eq!(c.answer(w), None, "one in-sync copy is not two");
    let refused = c.write(1);
    c.settle();
    assert_eq!(c.answer(refused), Some((false, 0)), "refused while the in-sync set is too small");
    assert!(c.events.contains(&LeaderEvent::RequestFailed {
        op: refused,
        why: LeaderFailure::Refused(Refusal::NotEnoughInSync)
    }));
    c.crash(N1);
    c.run_until(10, |es| es.iter().any(|e| matches!(e, LeaderEvent::FailoverBlocked { .. })));
    assert!(c.events.contains(&LeaderEvent::FailoverBlocked {
        shard: 0,
        primary: N1,
        why: Blocked::Unclean
    }));
    c.run(5);
    assert!(c.promotions().is_empty(), "no clean candidate: the shard stays unavailable");
    assert!(c.acked_epochs().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Incident (c): a deposed primary that never heard of the promotion.

/// A write is routed to n1 and delayed on the wire; n1 is cut off, n2 promoted, and a write in
/// the new epoch acked; then n1 is reachable again and the old write arrives.
fn a_late_write_reaches_the_deposed_primary(fencing: bool) -> (Cluster, OpId) {
    let mut c = cluster(&format!("acks = \"leader\"\nfencing = {fencing}"));
    let late = c.write(0);
    let delayed = c.hold(|w| w.dst == Endpoint::Node(N1));
    c.isolated.push(N1);
    c.run_until(10, promoted);
    assert_eq!(c.promotions(), [(N1, N2, 1, true)]);
    let w = c.write(1);
    c.settle();
    assert_eq!(c.answer(w), Some((true, w.write_value())));
    assert_eq!(c.acked_epochs(), [1]);
    c.isolated.clear();
    c.wire = delayed;
    c.deliver(0);
    assert_eq!(c.shard(N1).role, Role::Primary, "n1 never heard of epoch 1");
    assert!(c.events.contains(&LeaderEvent::WriteAccepted {
        shard: 0,
        node: N1,
        epoch: 0,
        version: 1,
        op: late
    }));
    (c, late)
}

#[test]
fn without_fencing_a_deposed_primary_acks_after_the_new_epoch_did() {
    let (mut c, late) = a_late_write_reaches_the_deposed_primary(false);
    let done = c.hold(|w| w.dst == Endpoint::LEADER);
    c.wire = done;
    c.settle();
    assert_eq!(c.answer(late), Some((true, late.write_value())));
    assert_eq!(c.acked_epochs(), [1, 0]);
    assert!(deposed_primary_acked_late(&c.acked_epochs()), "single_primary is broken");
}

#[test]
fn with_fencing_the_stale_ack_is_refused_and_the_deposed_primary_steps_down() {
    let (mut c, late) = a_late_write_reaches_the_deposed_primary(true);
    let done = c.hold(|w| w.dst == Endpoint::LEADER);
    c.wire.extend(done);
    c.settle();
    assert_eq!(c.answer(late), Some((false, 0)), "the manager refuses an ack of epoch 0");
    assert!(c.events.contains(&LeaderEvent::StaleRefused {
        shard: 0,
        by: Endpoint::LEADER,
        epoch: 0,
        own: 1
    }));
    assert!(!deposed_primary_acked_late(&c.acked_epochs()));
    // n1's appends of epoch 0 were refused by the followers of epoch 1, which told it so.
    assert!(c.events.contains(&LeaderEvent::StaleRefused {
        shard: 0,
        by: Endpoint::Node(N3),
        epoch: 0,
        own: 1
    }));
    assert_eq!((c.shard(N1).epoch, c.shard(N1).role), (1, Role::Follower { primary: Some(N2) }));
    assert_eq!(c.register(N3).version, 1, "n3 kept n2's write");
}

// ---------------------------------------------------------------------------------------------
// The in-sync set, failover rules, restarts, reads and time.

#[test]
fn a_lagging_follower_leaves_the_in_sync_set_and_rejoins_once_caught_up() {
    let mut c = cluster("acks = \"in_sync\"\nmin_in_sync = 1\nreplica_lag_timeout = \"300ms\"");
    c.cut = vec![(N1, N3)];
    let w = c.write(0);
    c.run(2);
    assert_eq!(c.answer(w), None, "n3 is still in sync: waited for");
    c.run(2);
    assert_eq!(c.answer(w), Some((true, w.write_value())), "n3 lagged out; n2 holds it");
    assert_eq!(c.manager.shards[0].in_sync, 0b011);
    c.cut.clear();
    let w2 = c.write(1);
    c.settle();
    assert_eq!(c.register(N3).version, 2, "caught up by a catch-up after its Behind");
    assert_eq!(c.answer(w2), Some((true, w2.write_value())));
    assert_eq!(c.manager.shards[0].in_sync, 0b111, "rejoined once caught up");
    let changes: Vec<NodeSet> = c
        .events
        .iter()
        .filter_map(|e| match *e {
            LeaderEvent::InSyncChanged { in_sync, .. } => Some(in_sync),
            _ => None,
        })
        .collect();
    assert_eq!(changes, [0b011, 0b111]);
}

#[test]
fn hearing_from_the_primary_before_the_failover_delay_ends_calls_it_off() {
    let mut c = cluster("failover_delay = \"500ms\"");
    c.isolated.push(N1);
    c.run_until(10, |es| es.iter().any(|e| matches!(e, LeaderEvent::FailoverStarted { .. })));
    c.isolated.clear();
    c.run(6);
    assert!(c.events.contains(&LeaderEvent::FailoverCalledOff { shard: 0, primary: N1 }));
    assert!(c.promotions().is_empty());
    assert_eq!(c.manager.health[usize::from(N1)], Health::Alive);
}

#[test]
fn without_cross_zone_failover_only_the_old_primary_s_zone_is_promoted() {
    for (cross, expect_blocked) in [(false, true), (true, false)] {
        let mut c = cluster(&format!("failover_cross_zone = {cross}"));
        c.crash(N1);
        c.crash(N2);
        // n2 never answers: the failover decides at the query's deadline.
        c.run_until(20, |es| {
            es.iter().any(|e| matches!(e, LeaderEvent::FailoverBlocked { .. } | LeaderEvent::Promoted { .. }))
        });
        let blocked = LeaderEvent::FailoverBlocked { shard: 0, primary: N1, why: Blocked::CrossZone };
        assert_eq!(c.events.contains(&blocked), expect_blocked);
        assert_eq!(c.promotions(), if cross { vec![(N1, N3, 1, true)] } else { vec![] });
    }
}

#[test]
fn coupled_detection_fails_over_after_a_missed_deadline() {
    let mut c = cluster("failure_detection = \"coupled\"\nacks = \"in_sync\"");
    c.isolated.push(N1);
    let w = c.write(0);
    c.run_until(12, promoted);
    assert_eq!(c.answer(w), Some((false, 0)));
    assert_eq!(c.promotions(), [(N1, N2, 1, true)]);
    let w2 = c.write(1);
    c.settle();
    assert_eq!(c.answer(w2), Some((true, w2.write_value())), "n2 and n3 in sync in epoch 1");
}

#[test]
fn a_restarted_manager_keeps_its_views_and_tells_roles_again() {
    let mut c = cluster("acks = \"leader\"");
    c.isolated.push(N1);
    c.run_until(10, promoted);
    let durable = c.manager.durable();
    c.manager = Manager::recover(&c.cfg, &durable);
    let r = &c.manager.shards[0];
    assert_eq!((r.epoch, r.primary, r.in_sync, r.role_acked), (1, N2, 0b110, 0));
    assert!(c.manager.ops.is_empty() && r.failover.is_none());
    c.run(1);
    assert_eq!(c.manager.shards[0].role_acked, 0b110, "n2 and n3 acked their roles again");
    assert_eq!(c.shard(N2).role, Role::Primary, "telling it again changes nothing");
}

#[test]
fn a_manager_recovered_in_epoch_0_knows_the_roles_every_replica_starts_in() {
    let mut c = cluster("acks = \"leader\"");
    c.manager = Manager::recover(&c.cfg, &c.manager.durable());
    assert_eq!(c.manager.shards[0].role_acked, 0b111, "Replica::new starts each in its epoch-0 role");
    let w = c.write(0);
    let told = |m: &Msg| matches!(m, Msg::Leader(LeaderMsg::Promote { .. } | LeaderMsg::Follow { .. }));
    // `settle`, watching the wire: every replica is heard from (the write's acks).
    for _ in 0..1000 {
        assert!(!c.wire.iter().any(|x| told(&x.msg)), "nobody is told a role it started in");
        if !c.wire.is_empty() {
            c.deliver(0);
        } else if !c.fire_due() {
            break;
        }
    }
    assert_eq!(c.answer(w), Some((true, w.write_value())));
}

#[test]
fn a_restarted_primary_resumes_from_what_it_persisted() {
    let mut c = cluster("acks = \"all\"");
    let w = c.write(0);
    c.settle();
    assert_eq!(c.answer(w), Some((true, w.write_value())));
    let durable = c.replicas[0].durable();
    let mut out = Outbox::default();
    c.replicas[0] = Replica::restart(&c.cfg, N1, &durable, &c.data[0][..], &mut out);
    c.apply(Endpoint::Node(N1), out);
    let s = c.shard(N1);
    assert_eq!((s.role, s.last.version, s.in_sync), (Role::Primary, 1, 0b111));
    assert!(s.followers.iter().all(|f| f.acked == Pos::<ModelData>::default() && f.lag_ticks.is_some()));
    c.settle();
    assert!(c.shard(N1).followers.iter().all(|f| f.acked.version == 1 && f.lag_ticks.is_none()));
}

#[test]
fn reads_from_followers_only_where_the_policy_allows() {
    for (read_from, served) in [("primary", false), ("any", true)] {
        let mut c = cluster(&format!("read_from = \"{read_from}\""));
        let mut out = Outbox::default();
        let read =
            LeaderMsg::Read { op: OpId { client: READER, seq: 0 }, attempt: 1, shard: 0, epoch: 0, key: () };
        c.replicas[2].on_msg(&c.cfg, &mut c.data[2][..], Endpoint::LEADER, Msg::Leader(read), &mut out);
        let answered = matches!(out.sends[0].1, Msg::Leader(LeaderMsg::ReadDone { .. }));
        assert_eq!(answered, served, "read_from = {read_from}");
    }
}

#[test]
fn a_late_in_sync_confirmation_does_not_undo_a_later_one() {
    let mut c = cluster("acks = \"in_sync\"");
    c.cut = vec![(N1, N3)];
    c.write(0);
    c.run_until(10, |es| es.iter().any(|e| matches!(e, LeaderEvent::InSyncChanged { .. })));
    let s = c.shard(N1);
    assert_eq!((s.in_sync, s.in_sync_seq, s.proposal), (0b011, 1, None));
    // A copy of an older confirmation, or one for another set, changes nothing.
    for (seq, in_sync) in [(1, 0b111), (2, 0b111), (0, 0b011)] {
        let stale = LeaderMsg::InSyncConfirmed { shard: 0, epoch: 0, seq, in_sync };
        let mut out = Outbox::default();
        c.replicas[0].on_msg(&c.cfg, &mut c.data[0][..], Endpoint::LEADER, Msg::Leader(stale), &mut out);
        assert_eq!((c.shard(N1).in_sync, c.shard(N1).in_sync_seq), (0b011, 1));
    }
    // And the manager takes a proposal only as the next change (a duplicate is confirmed again).
    let old = LeaderMsg::InSyncPropose { shard: 0, epoch: 0, seq: 1, in_sync: 0b111 };
    let mut out = Outbox::default();
    c.manager.on_msg(&c.cfg, Endpoint::Node(N1), Msg::Leader(old), &mut out);
    assert_eq!(c.manager.shards[0].in_sync, 0b011);
    assert!(out.sends.iter().all(|(_, m)| !matches!(m, Msg::Leader(LeaderMsg::InSyncConfirmed { .. }))));
}

#[test]
fn a_due_timer_stops_time() {
    let mut c = cluster("acks = \"in_sync\"\nreplica_lag_timeout = \"200ms\"");
    c.cut = vec![(N1, N3)];
    c.write(0);
    c.settle();
    c.tick();
    c.settle();
    c.tick();
    assert!(!c.replicas[0].no_timer_due(), "n3's lag timer is at zero");
    let mut due = Vec::new();
    c.replicas[0].due(&mut due);
    assert_eq!(due, [ReplicaTimer::LagExpired { shard: 0, follower: N3 }]);
    c.fire_due();
    assert!(c.replicas[0].no_timer_due());
    assert!(c.shard(N1).followers.iter().any(|f| f.node == N3 && f.lagging));
}

#[test]
fn the_leader_family_does_not_grow_the_quorum_model_s_messages_past_a_byte() {
    // Msg<ModelData> was 7 bytes before the leader family; its own enum costs one tag byte.
    assert!(std::mem::size_of::<Msg>() <= 8, "{} bytes", std::mem::size_of::<Msg>());
}

#[test]
fn the_answer_that_completes_a_failover_promotes_and_tells_each_replica_once() {
    let mut c = cluster("acks = \"leader\"");
    c.crash(N1);
    for _ in 0..10 {
        c.settle();
        c.tick();
        c.fire_due();
        if c.manager.shards[0].failover.is_some() {
            break;
        }
    }
    let is = |m: fn(&Msg) -> bool| move |w: &Wire| m(&w.msg);
    let queries = c.hold(is(|m| matches!(m, Msg::Leader(LeaderMsg::Query { .. }))));
    assert_eq!(queries.len(), 2, "n2 and n3 are asked");
    c.wire = queries;
    c.deliver(0);
    c.deliver(0);
    let positions = c.hold(is(|m| matches!(m, Msg::Leader(LeaderMsg::Position { .. }))));
    c.wire = positions;
    c.deliver(0); // n2's answer: n3 has not answered yet
    assert!(c.promotions().is_empty());
    let Wire { src, msg, .. } = c.wire.remove(0);
    assert_eq!(src, Endpoint::Node(N3));
    let mut out = Outbox::default();
    c.manager.on_msg(&c.cfg, src, msg, &mut out);
    let to = |n: NodeId| out.sends.iter().filter(|(d, _)| *d == Endpoint::Node(n)).count();
    assert_eq!((to(N1), to(N2), to(N3)), (1, 1, 1), "{:?}", out.sends);
    assert!(matches!(out.sends[0].1, Msg::Leader(LeaderMsg::Promote { epoch: 1, .. })));
}

/// Every epoch of the cluster (machines and wire) through `f`.
fn rename_epochs(c: &mut Cluster, f: impl Fn(u8) -> u8) {
    let mut g = |e: &mut u8| *e = f(*e);
    c.manager.for_each_epoch(&mut g);
    for r in &mut c.replicas {
        r.for_each_epoch(&mut g);
    }
    for w in &mut c.wire {
        if let Msg::Leader(m) = &mut w.msg {
            m.for_each_epoch(&mut g);
        }
    }
}

/// A driver may rename epochs by an order-preserving map that keeps 0 (the first epoch, and
/// the epoch of an empty log's position): renaming after a failover and running on gives the
/// renamed run, through a second failover, a restart and a catch-up.
#[test]
fn renaming_epochs_in_order_commutes_with_the_machines() {
    let up = |e: u8| if e == 0 { 0 } else { e + 3 };
    let down = |e: u8| if e == 0 { 0 } else { e - 3 };
    let mut plain = cluster("acks = \"leader\"");
    let mut renamed = cluster("acks = \"leader\"");
    for c in [&mut plain, &mut renamed] {
        write_then_cut_off_the_primary(c);
        c.run_until(10, promoted);
    }
    rename_epochs(&mut renamed, up);
    for c in [&mut plain, &mut renamed] {
        c.isolated.clear();
        c.run(3);
        c.write(1);
        c.settle();
        c.crash(N2);
        c.run_until(10, |e| e.iter().filter(|e| matches!(e, LeaderEvent::Promoted { .. })).count() == 2);
        c.run(3);
    }
    assert_eq!(renamed.shard(N1).epoch, 5, "two promotions: 1 + 3, then one more");
    rename_epochs(&mut renamed, down);
    assert_eq!(renamed.manager, plain.manager);
    assert_eq!(renamed.replicas, plain.replicas);
    assert_eq!(renamed.data, plain.data);
    let wire = |c: &Cluster| c.wire.iter().map(|w| (w.src, w.dst, w.msg)).collect::<Vec<_>>();
    assert_eq!(wire(&renamed), wire(&plain));
    assert_eq!(plain.promotions().len(), 2);
}
