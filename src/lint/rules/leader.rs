//! The leader family's rules: asynchronous acks with failover (RC022), unclean elections
//! (RC023, RC024), failover without fencing (RC025), the lag timeout against the replication
//! round trip (RC026), `min_in_sync = 1` (RC027), a failover that never promotes (RC028).
//! Each asks `policy::leader` (when is a write acknowledged, whom does a failover promote)
//! rather than restating it.

use super::*;
use crate::policy::leader::{
    self, bit, Acks, Blocked, Candidate, LeaderPolicy, NodeSet, Position, Promotion,
};

fn acks_text(acks: Acks) -> &'static str {
    match acks {
        Acks::All => "\"all\"",
        Acks::InSync => "\"in_sync\"",
        Acks::Leader => "\"leader\"",
    }
}

/// Replicas 0..k as a set: the primary is replica 0.
fn first(k: u8) -> NodeSet {
    (0..k).fold(0, |set, n| set | bit(n))
}

/// Does the primary acknowledge a write that an in-sync follower does not hold yet? (Every
/// replica in sync, the write on the primary alone.) Then even a clean promotion can lose it.
fn acks_ahead_of_in_sync(p: &Policy, l: &LeaderPolicy) -> bool {
    let replicas = first(p.replication_factor);
    p.replication_factor > 1 && leader::write_acked(l.acks, l.min_in_sync, replicas, replicas, bit(0))
}

/// The fewest replicas an acknowledged write may be on: the smallest holders (the primary
/// first) the primary takes a write with and acknowledges it on, once the in-sync set shrank
/// to them.
fn fewest_copies_acked(p: &Policy, l: &LeaderPolicy) -> u8 {
    let replicas = first(p.replication_factor);
    (1..=p.replication_factor)
        .find(|&k| {
            let held = first(k);
            leader::admits_write(l.acks, l.min_in_sync, held)
                && leader::write_acked(l.acks, l.min_in_sync, replicas, held, held)
        })
        .expect("a write every replica holds is acknowledged")
}

/// Why a dead primary is never failed over, or `None` when a failover can promote someone:
/// with a model, no shard's first failover (from its initial primary, every other replica
/// answering, in sync) promotes anyone under the promotion rules; without one, there is no
/// follower.
fn failover_blocked(i: &Input, l: &LeaderPolicy) -> Option<String> {
    if i.policy.replication_factor < 2 {
        return Some("replication_factor = 1: there is no follower to promote".into());
    }
    let w = i.world?;
    let rules = leader::PromotionRules {
        unclean_election: l.unclean_election,
        failover_cross_zone: l.failover_cross_zone,
    };
    let mut why = None;
    for members in &w.initial_members {
        let Some((&primary, followers)) = members.split_first() else { continue };
        let mut followers = followers.to_vec();
        followers.sort();
        let candidates: Vec<Candidate<u8, u8>> = followers
            .iter()
            .map(|&n| Candidate {
                node: n,
                zone: w.node_zone(n),
                answered: true,
                position: Position::default(),
                in_sync: true,
            })
            .collect();
        match leader::choose_promotion(rules, w.node_zone(primary), &candidates) {
            Promotion::Promote { .. } => return None,
            Promotion::Blocked(b) => why = why.or(Some(b)),
        }
    }
    Some(match why {
        Some(Blocked::CrossZone) => "failover_cross_zone = false and no shard has a follower in its primary's zone: a dead primary is never failed over".into(),
        _ => "no shard has a follower a failover may promote".into(),
    })
}

/// Without a model, `failover_cross_zone = false` stops failover only where no follower shares
/// its primary's zone, which only the model tells.
fn zone_caveat(i: &Input, l: &LeaderPolicy) -> &'static str {
    if i.world.is_none() && !l.failover_cross_zone {
        " (failover_cross_zone = false stops it only where no follower is in the primary's zone: give --model to tell)"
    } else {
        ""
    }
}

pub(in crate::lint) fn async_acks_with_failover(i: &Input) -> Vec<String> {
    let (p, Some(l)) = (i.policy, &i.policy.leader) else { return vec![] };
    if !acks_ahead_of_in_sync(p, l) || failover_blocked(i, l).is_some() {
        return vec![];
    }
    vec![format!(
        "acks = {} (asynchronous replication) with automatic failover{}: the primary acknowledges a write once it stored it, before any of its replication_factor - 1 = {} follower(s) holds it, so a follower promoted when the primary is judged dead may lack it: the acknowledged write is lost, and a read from the new primary returns the older value",
        acks_text(l.acks),
        zone_caveat(i, l),
        p.replication_factor - 1
    )]
}

pub(in crate::lint) fn unclean_election_single_copy(i: &Input) -> Vec<String> {
    let (p, Some(l)) = (i.policy, &i.policy.leader) else { return vec![] };
    // Asynchronous acks lose writes with clean elections too: RC022 says so.
    if !l.unclean_election || acks_ahead_of_in_sync(p, l) || failover_blocked(i, l).is_some() {
        return vec![];
    }
    if p.replication_factor < 2 || fewest_copies_acked(p, l) > 1 {
        return vec![];
    }
    vec![format!(
        "unclean_election = true with acks = {} and min_in_sync = {}{}: once a follower lags for replica_lag_timeout = {} the in-sync set shrinks to the primary, which acknowledges writes alone; when the primary then fails, the unclean election promotes a follower outside the set that lacks them: acknowledged writes are lost after one failure",
        acks_text(l.acks),
        l.min_in_sync,
        zone_caveat(i, l),
        i.dur(l.replica_lag_timeout_ticks)
    )]
}

pub(in crate::lint) fn unclean_election_minority(i: &Input) -> Vec<String> {
    let (p, Some(l)) = (i.policy, &i.policy.leader) else { return vec![] };
    if !l.unclean_election || acks_ahead_of_in_sync(p, l) || failover_blocked(i, l).is_some() {
        return vec![];
    }
    let fewest = fewest_copies_acked(p, l);
    // One copy is RC023's; on every replica, no follower lacks an acknowledged write.
    if fewest <= 1 || fewest >= p.replication_factor {
        return vec![];
    }
    vec![format!(
        "unclean_election = true with acks = {} and min_in_sync = {} of replication_factor = {}: an acknowledged write may be on {fewest} replicas only, and if those {fewest} fail an unclean election promotes a follower outside the in-sync set that lacks it: the acknowledged write is lost",
        acks_text(l.acks),
        l.min_in_sync,
        p.replication_factor
    )]
}

/// How this model can make a primary that is alive look dead long enough to be failed over,
/// or `None` when none of its latencies and faults can.
fn live_primary_deposed(i: &Input, l: &LeaderPolicy) -> Option<String> {
    let (p, s) = (i.policy, i.scenario?);
    let delay = l.failover_delay_ticks;
    // Hearing from the primary before the failover decides calls it off, so the silence must
    // outlast the judgement and the delay (an answer due in the tick the delay ends is heard
    // first: unfenced-primary holds at failover_delay = 1s and fails at 900ms).
    if let Some(silence) = worst_silence(i) {
        if silence.ticks >= p.dead_after_ticks && silence.gap_ticks > p.dead_after_ticks + delay {
            return Some(format!(
                "a healthy primary may be silent {} (heartbeat_interval = {} and {}), past dead_after + failover_delay = {} + {}",
                i.dur(silence.gap_ticks),
                i.dur(p.heartbeat_interval_ticks),
                silence.rtt.describe(i),
                i.dur(p.dead_after_ticks),
                i.dur(delay)
            ));
        }
    }
    if detector::health_after_deadline_miss(p.failure_detection) == Some(Health::Dead) {
        let rtt = worst_round_trip(s);
        if p.replica_ack_timeout_ticks + delay < rtt.ticks {
            return Some(format!(
                "a request to the primary may take {}, past replica_ack_timeout + failover_delay = {} + {}",
                rtt.describe(i),
                i.dur(p.replica_ack_timeout_ticks),
                i.dur(delay)
            ));
        }
        if let Some(link) = lossy_link(s) {
            return Some(format!("{link}, and a lost request or reply is a missed deadline"));
        }
    }
    // A cut primary is alive on its side of the cut.
    let cut = s.faults.partition.iter().find(|&&z| {
        i.world.is_none_or(|w| w.initial_members.iter().any(|m| m.iter().any(|&n| w.node_zone(n) == z)))
    })?;
    Some(format!(
        "the fault menu cuts zone {} off, and a primary there stays alive",
        s.zones[usize::from(*cut)]
    ))
}

pub(in crate::lint) fn failover_without_fencing(i: &Input) -> Vec<String> {
    let Some(l) = &i.policy.leader else { return vec![] };
    if l.fencing || failover_blocked(i, l).is_some() {
        return vec![];
    }
    let model = match (i.scenario, live_primary_deposed(i, l)) {
        (None, _) => String::new(),
        (Some(_), Some(how)) => format!("; in this model {how}"),
        (Some(_), None) => "; in this model no latency or fault of the menu makes a live primary look dead for dead_after + failover_delay, so only a slower network or a new fault would".into(),
    };
    vec![format!(
        "fencing = false with automatic failover{}: a primary judged dead while it is alive (slow, or cut off) is not refused for its old epoch, so it keeps taking the writes already on their way to it, and their acknowledgements are relayed after the new primary's: two primaries acknowledge writes, and the deposed one's are not in the new primary's log{model}",
        zone_caveat(i, l)
    )]
}

/// The worst round trip between two replicas of one shard (any of them may be primary): a
/// replication append and its answer, the fault menu's degradations included.
fn worst_replication_round_trip(i: &Input) -> Option<(Ticks, String)> {
    let (s, w) = (i.scenario?, i.world?);
    let mut worst: Option<(Ticks, String)> = None;
    for members in &w.initial_members {
        for &a in members {
            for &b in members.iter().filter(|&&b| b > a) {
                let (za, zb) = (w.node_zone(a), w.node_zone(b));
                let ticks = 2 * s.worst_latency_ticks(za, zb);
                if worst.as_ref().is_none_or(|(t, _)| ticks > *t) {
                    let slowed =
                        if s.worst_latency_ticks(za, zb) > s.latency[usize::from(za)][usize::from(zb)].hi {
                            " under the fault menu's degradations"
                        } else {
                            ""
                        };
                    let text = format!(
                        "the worst replication round trip, {}, between {} and {}{slowed}",
                        i.dur(ticks),
                        node_text(s, usize::from(a)),
                        node_text(s, usize::from(b))
                    );
                    worst = Some((ticks, text));
                }
            }
        }
    }
    worst
}

pub(in crate::lint) fn lag_timeout_within_replication_round_trip(i: &Input) -> Vec<String> {
    let (p, Some(l)) = (i.policy, &i.policy.leader) else { return vec![] };
    if p.replication_factor < 2 {
        return vec![];
    }
    let lag = l.replica_lag_timeout_ticks;
    // A follower catches up once the append reaches it and its answer is back: a round trip.
    // Without a model, the time the detector itself gives a node before taking it for dead
    // stands in for it (a heuristic: the rule is a warning).
    let (bound, text) = match worst_replication_round_trip(i) {
        Some(worst) => worst,
        None => match p.failure_detection {
            FailureDetection::Independent => (
                p.dead_after_ticks,
                format!(
                    "dead_after = {}, the silence the detector still takes for a live node",
                    i.dur(p.dead_after_ticks)
                ),
            ),
            FailureDetection::Coupled => (
                p.replica_ack_timeout_ticks,
                format!(
                    "replica_ack_timeout = {}, the round trip the detector still takes for a live node",
                    i.dur(p.replica_ack_timeout_ticks)
                ),
            ),
        },
    };
    // A follower's answer due in the tick its lag timer fires may come second: equal is short.
    if lag > bound {
        return vec![];
    }
    let then = match l.acks {
        Acks::InSync if fewest_copies_acked(p, l) == 1 => {
            format!("with min_in_sync = {} the primary then acknowledges writes alone", l.min_in_sync)
        }
        Acks::InSync => format!(
            "with fewer than min_in_sync = {} in sync the primary then refuses writes",
            l.min_in_sync
        ),
        Acks::All | Acks::Leader => {
            "and a follower out of sync is no clean candidate: a failover then has no one to promote unless unclean_election allows it".into()
        }
    };
    vec![format!(
        "replica_lag_timeout = {} is not above {text}: a healthy follower that is merely slow leaves the in-sync set, and {then}",
        i.dur(lag)
    )]
}

pub(in crate::lint) fn min_in_sync_one(i: &Input) -> Vec<String> {
    let (p, Some(l)) = (i.policy, &i.policy.leader) else { return vec![] };
    // Asynchronous acks are RC022's, an unclean election on top RC023's.
    if p.replication_factor < 2 || acks_ahead_of_in_sync(p, l) || l.unclean_election {
        return vec![];
    }
    if fewest_copies_acked(p, l) > 1 {
        return vec![];
    }
    vec![format!(
        "acks = {} with min_in_sync = {} and replication_factor = {}: once the followers lag for replica_lag_timeout = {} the in-sync set is the primary alone, and an acknowledged write may be on that one replica: one failure from loss",
        acks_text(l.acks),
        l.min_in_sync,
        p.replication_factor,
        i.dur(l.replica_lag_timeout_ticks)
    )]
}

pub(in crate::lint) fn failover_never_promotes(i: &Input) -> Vec<String> {
    let Some(l) = &i.policy.leader else { return vec![] };
    let Some(why) = failover_blocked(i, l) else { return vec![] };
    // In a model, only where a primary can fail at all: crash or cut off.
    if let Some(w) = i.world {
        let primaries: Vec<NodeId> = w.initial_members.iter().filter_map(|m| m.first().copied()).collect();
        let fails = primaries
            .iter()
            .any(|&n| w.faults.crash.contains(&n) || w.faults.partition.contains(&w.node_zone(n)));
        if !fails {
            return vec![];
        }
    }
    vec![format!(
        "{why}: while a primary is down its shard takes no writes, and a client's retries wait for it for as long as it stays down"
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PolicyPatch, SourcedPolicy};

    fn policy(text: &str) -> Policy {
        let patch: PolicyPatch = toml::from_str(&format!("replication = \"leader\"\n{text}")).unwrap();
        SourcedPolicy::new(patch, "p.toml").resolve_ms_any_family().unwrap()
    }

    fn input(p: &Policy) -> Input<'_> {
        Input { policy: p, tick_ms: 1, scenario: None, world: None }
    }

    #[test]
    fn the_fewest_copies_of_an_acknowledged_write_follow_the_ack_rule() {
        let fewest = |text: &str| {
            let p = policy(text);
            fewest_copies_acked(&p, p.leader.as_ref().unwrap())
        };
        assert_eq!(fewest("replication_factor = 3\nacks = \"leader\""), 1);
        assert_eq!(fewest("replication_factor = 3\nacks = \"all\"\nmin_in_sync = 1"), 3);
        for min in 1..=3 {
            assert_eq!(
                fewest(&format!("replication_factor = 3\nacks = \"in_sync\"\nmin_in_sync = {min}")),
                min
            );
        }
    }

    #[test]
    fn only_asynchronous_acks_run_ahead_of_the_in_sync_set() {
        for (acks, ahead) in [("leader", true), ("in_sync", false), ("all", false)] {
            let p = policy(&format!("acks = \"{acks}\""));
            assert_eq!(acks_ahead_of_in_sync(&p, p.leader.as_ref().unwrap()), ahead, "{acks}");
        }
    }

    #[test]
    fn each_unclean_election_is_one_rule_s_finding() {
        let fired = |text: &str| {
            let p = policy(text);
            let i = input(&p);
            [
                ("RC022", async_acks_with_failover(&i)),
                ("RC023", unclean_election_single_copy(&i)),
                ("RC024", unclean_election_minority(&i)),
                ("RC027", min_in_sync_one(&i)),
            ]
            .into_iter()
            .filter(|(_, found)| !found.is_empty())
            .map(|(id, _)| id)
            .collect::<Vec<_>>()
        };
        let unclean = "replication_factor = 3\nunclean_election = true\n";
        assert_eq!(fired(&format!("{unclean}acks = \"leader\"")), ["RC022"]);
        assert_eq!(fired(&format!("{unclean}acks = \"in_sync\"\nmin_in_sync = 1")), ["RC023"]);
        assert_eq!(fired(&format!("{unclean}acks = \"in_sync\"\nmin_in_sync = 2")), ["RC024"]);
        assert!(fired(&format!("{unclean}acks = \"all\"")).is_empty());
        assert_eq!(fired("replication_factor = 3\nacks = \"in_sync\"\nmin_in_sync = 1"), ["RC027"]);
    }
}
