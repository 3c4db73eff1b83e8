//! The leader family in the world: crashes keep exactly what the replica persists, the ghost
//! sees both halves of `single_primary`, and epochs stay ranked through many promotions.

use super::*;
use crate::config::{Resolved, Scenario};
use crate::model::World;
use stateright::Model;

fn world(model: &str, variant: &str) -> World {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(model);
    let scenario = Scenario::load(&path).expect("the library model loads");
    let v = scenario.variant(variant).expect("the variant exists");
    World::new(Resolved::new(&scenario, &v.policy).expect("it resolves"))
}

fn step(w: &World, s: &WorldState, a: Action) -> WorldState {
    let mut actions = Vec::new();
    w.actions(s, &mut actions);
    assert!(actions.contains(&a), "{a:?} is enabled");
    w.next_state(s, a).expect("an enabled action")
}

#[test]
fn a_crash_keeps_what_the_replica_persists_and_a_restart_resumes_from_it() {
    let w = world("async-failover.toml", "default");
    let s = w.init_states().remove(0);
    let LeaderNode::Up(before) = &of(&s).unwrap().replicas[0] else { panic!("n1 starts up") };
    assert!(!before.shards[0].as_ref().unwrap().followers.is_empty(), "the primary tracks n2");
    let crashed = step(&w, &s, Action::Crash(0));
    assert!(!crashed.nodes[0].up);
    let LeaderNode::Down(kept) = &of(&crashed).unwrap().replicas[0] else { panic!("n1 is down") };
    assert_eq!(*kept, before.durable());
    assert_eq!(crashed.env.faults_left, s.env.faults_left - 1);
    let restarted = step(&w, &crashed, Action::Restart(0));
    let LeaderNode::Up(after) = &of(&restarted).unwrap().replicas[0] else { panic!("n1 is up again") };
    assert_eq!(after.durable(), *kept, "it resumes from what it persisted");
    // A restarted primary shows its followers its state (nobody tells them of a restart).
    assert!(restarted.net.iter().any(|e| e.src == Endpoint::Node(0) && e.dst == Endpoint::Node(1)));
}

#[test]
fn the_ghost_sees_two_primaries_in_an_epoch_and_a_deposed_primary_s_late_ack() {
    let fresh = |shards: usize| LeaderGhost {
        acked: filled(None, shards),
        acked_epoch_max: filled(None, shards),
        writers: filled(Vec::new(), shards),
        split_brain: None,
    };
    let op = crate::protocol::OpId { client: 0, seq: 0 };
    let mut g = fresh(1);
    observe(&mut g, LeaderEvent::WriteAccepted { shard: 0, node: 0, epoch: 0, version: 1, op });
    observe(&mut g, LeaderEvent::WriteAccepted { shard: 0, node: 1, epoch: 1, version: 2, op });
    assert_eq!(g.split_brain, None, "one writer per epoch");
    observe(&mut g, LeaderEvent::WriteAccepted { shard: 0, node: 0, epoch: 1, version: 2, op });
    assert_eq!(g.split_brain, Some(SplitBrain::TwoPrimaries { shard: 0, epoch: 1, first: 1, second: 0 }));

    let mut g = fresh(1);
    observe(&mut g, LeaderEvent::WriteAcked { shard: 0, node: 0, epoch: 0, version: 1 });
    observe(&mut g, LeaderEvent::WriteAcked { shard: 0, node: 1, epoch: 1, version: 1 });
    assert_eq!(g.split_brain, None, "acks in epoch order");
    assert_eq!(g.acked[0], Some(Position { epoch: 1, version: 1 }));
    observe(&mut g, LeaderEvent::WriteAcked { shard: 0, node: 0, epoch: 0, version: 2 });
    assert_eq!(g.split_brain, Some(SplitBrain::DeposedAck { shard: 0, node: 0, epoch: 0, newer: 1 }));
    assert_eq!(g.acked[0], Some(Position { epoch: 1, version: 1 }), "the newest position stays");
}

/// Every epoch in a state, sorted and without repeats.
fn epochs(s: &WorldState) -> Vec<u8> {
    let mut out = vec![0];
    let mut probe = (**s.leader.as_ref().unwrap()).clone();
    let mut net: Vec<Msg> = s.net.iter().map(|e| e.msg).collect();
    for_each_epoch(&mut probe, &mut net, &mut |e| out.push(*e));
    out.sort_unstable();
    out.dedup();
    out
}

/// Walks in which n1 and n2 crash in turns (each restarting before the other crashes) fail
/// over one way and back, three times, every other step chosen at random: every state's
/// epochs are their ranks (0..k), canonical states are fixed points, and the renaming lowers
/// the coordinator's epoch once an old epoch has left the state.
#[test]
fn walks_through_repeated_failovers_keep_epochs_ranked() {
    let mut w = world("async-failover.toml", "default");
    w.cfg.faults.budget = 4;
    w.cfg.faults.crash = vec![0, 1];
    w.cfg.faults.crash_duration = vec![None, None];
    // (tick, fault): after the app's write and read, n1 down for 1.4s, then n2, then n1 again.
    let script = [
        (8, Action::Crash(0)),
        (22, Action::Restart(0)),
        (36, Action::Crash(1)),
        (50, Action::Restart(1)),
        (64, Action::Crash(0)),
    ];
    let is_fault = |a: &Action| {
        matches!(
            a,
            Action::Crash(_)
                | Action::Restart(_)
                | Action::Partition(_)
                | Action::Heal(_)
                | Action::CoordinatorRestart
        )
    };
    let mut seed: u64 = 0x1ead_e4f0;
    let (mut twice, mut renamed, mut highest) = (0, 0, 0);
    for _ in 0..40 {
        let mut s = w.init_states().remove(0);
        let (mut ticks, mut next_fault, mut promotions) = (0, 0, 0);
        while ticks < 95 {
            let mut actions = Vec::new();
            w.actions(&s, &mut actions);
            let a = match script.get(next_fault) {
                Some((at, f)) if ticks >= *at && actions.contains(f) => {
                    next_fault += 1;
                    f.clone()
                }
                _ => {
                    let calm: Vec<&Action> = actions.iter().filter(|a| !is_fault(a)).collect();
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    calm[(seed >> 33) as usize % calm.len()].clone()
                }
            };
            ticks += usize::from(a == Action::Tick);
            let next = w.next_state(&s, a).expect("an enabled action");
            promotions += usize::from(primary_changed(&s, &next));
            let (before, after) =
                (of(&s).unwrap().manager.shards[0].epoch, of(&next).unwrap().manager.shards[0].epoch);
            renamed += usize::from(after < before);
            s = next;
            let e = epochs(&s);
            assert!(e.iter().enumerate().all(|(i, &x)| usize::from(x) == i), "ranked: {e:?}");
            highest = highest.max(*e.last().unwrap());
            let mut again = s.clone();
            canonicalize(&mut again);
            assert_eq!(again, s, "a canonical state is a fixed point");
        }
        twice += usize::from(promotions >= 2);
    }
    assert!(twice >= 20, "most walks failed over and back ({twice} of 40)");
    assert!(highest >= 2, "epochs past the first promotion were kept ({highest})");
    assert!(renamed > 0, "an old epoch left a state and the coordinator's was renamed");
}
