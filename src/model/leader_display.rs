//! How the leader family's messages, timers, states and promotions read in counterexamples
//! and in the explorer.

use super::display::op_name;
use super::leader::{self, LeaderActors, LeaderNode, Position, SplitBrain};
use super::{WorldConfig, WorldState};
use crate::config::duration::format_ms;
use crate::policy::leader::NodeSet;
use crate::protocol::leader::{LeaderMsg, ManagerTimer, Refusal, ReplicaTimer, Role};
use std::fmt::Write;

fn node(cfg: &WorldConfig, n: u8) -> String {
    cfg.nodes[usize::from(n)].name.clone()
}

fn shard(cfg: &WorldConfig, s: u8) -> String {
    cfg.shard_names[usize::from(s)].clone()
}

/// A set of nodes, `[n1, n2]`.
pub fn nodes(cfg: &WorldConfig, set: NodeSet) -> String {
    let names: Vec<String> =
        (0..cfg.nodes.len() as u8).filter(|&n| set & (1 << n) != 0).map(|n| node(cfg, n)).collect();
    format!("[{}]", names.join(", "))
}

/// A log position: `e1v2` (epoch 1, version 2); `e0v0` is an empty log.
pub fn pos(p: Position) -> String {
    format!("e{}v{}", p.epoch, p.version)
}

fn refusal(r: Refusal) -> &'static str {
    match r {
        Refusal::NotPrimary => "not primary",
        Refusal::StaleEpoch => "stale epoch (fenced)",
        Refusal::NotEnoughInSync => "fewer in-sync replicas than min_in_sync",
        Refusal::Deposed => "deposed while the write waited for acks",
        Refusal::Busy => "too many writes waiting",
    }
}

pub fn msg(cfg: &WorldConfig, m: &LeaderMsg) -> String {
    match *m {
        LeaderMsg::Write { op, attempt, shard: s, epoch, value, .. } => {
            format!(
                "Write {} epoch {epoch} value={value} ({} attempt={attempt})",
                shard(cfg, s),
                op_name(cfg, op)
            )
        }
        LeaderMsg::Read { op, attempt, shard: s, epoch, .. } => {
            format!("Read {} epoch {epoch} ({} attempt={attempt})", shard(cfg, s), op_name(cfg, op))
        }
        LeaderMsg::WriteDone { op, attempt, epoch, version } => {
            format!("WriteDone {} ({} attempt={attempt})", pos(Position { epoch, version }), op_name(cfg, op))
        }
        LeaderMsg::ReadDone { op, attempt, epoch, version, value } => {
            format!("ReadDone v{version}={value} epoch {epoch} ({} attempt={attempt})", op_name(cfg, op))
        }
        LeaderMsg::Refused { op, attempt, epoch, why } => {
            format!("Refused ({}) epoch {epoch} ({} attempt={attempt})", refusal(why), op_name(cfg, op))
        }
        LeaderMsg::Append { shard: s, epoch, prev, version, value, .. } => format!(
            "Append {} {}={value} after {}",
            shard(cfg, s),
            pos(Position { epoch, version }),
            pos(prev)
        ),
        LeaderMsg::CatchUp { shard: s, last, data, .. } => {
            format!("CatchUp {} up to {} (v{}={})", shard(cfg, s), pos(last), data.version, data.value)
        }
        LeaderMsg::Appended { shard: s, pos: p, .. } => {
            format!("Appended {} holds {}", shard(cfg, s), pos(p))
        }
        LeaderMsg::Behind { shard: s, epoch } => {
            format!("Behind {} epoch {epoch}: catch me up", shard(cfg, s))
        }
        LeaderMsg::Stale { shard: s, epoch } => format!("Stale {}: my epoch is {epoch}", shard(cfg, s)),
        LeaderMsg::Promote { shard: s, epoch, in_sync } => {
            format!("Promote {} epoch {epoch}, in sync {}", shard(cfg, s), nodes(cfg, in_sync))
        }
        LeaderMsg::Follow { shard: s, epoch, primary } => {
            format!("Follow {} epoch {epoch}: primary {}", shard(cfg, s), node(cfg, primary))
        }
        LeaderMsg::RoleAck { shard: s, epoch } => format!("RoleAck {} epoch {epoch}", shard(cfg, s)),
        LeaderMsg::InSyncPropose { shard: s, epoch, seq, in_sync } => {
            format!("InSyncPropose {} epoch {epoch} #{seq}: {}", shard(cfg, s), nodes(cfg, in_sync))
        }
        LeaderMsg::InSyncConfirmed { shard: s, epoch, seq, in_sync } => {
            format!("InSyncConfirmed {} epoch {epoch} #{seq}: {}", shard(cfg, s), nodes(cfg, in_sync))
        }
        LeaderMsg::Query { shard: s, epoch } => {
            format!("Query {} epoch {epoch}: where are you?", shard(cfg, s))
        }
        LeaderMsg::Position { shard: s, epoch, pos: p } => {
            format!("Position {} holds {} (knows epoch {epoch})", shard(cfg, s), pos(p))
        }
    }
}

pub fn manager_timer(cfg: &WorldConfig, t: &ManagerTimer) -> String {
    let name = &cfg.coordinators[0].name;
    match *t {
        ManagerTimer::Deadline { op, attempt } => format!(
            "{name}: deadline ({}) of {} attempt={attempt} fires",
            format_ms(u64::from(cfg.policy.replica_ack_timeout_ticks) * cfg.tick_ms),
            op_name(cfg, op)
        ),
        ManagerTimer::Heartbeat => format!("{name}: heartbeat round (health from silence, pings)"),
        ManagerTimer::SilenceCrossed { node: n } => {
            format!("{name}: {}'s silence reached a detector threshold (continuous check)", node(cfg, n))
        }
        ManagerTimer::Failover { shard: s } => format!("{name}: the failover of {} decides", shard(cfg, s)),
    }
}

pub fn replica_timer(cfg: &WorldConfig, n: u8, t: &ReplicaTimer) -> String {
    let ReplicaTimer::LagExpired { shard: s, follower } = *t;
    format!(
        "{}: {} has lagged on {} for replica_lag_timeout ({}): out of sync",
        node(cfg, n),
        node(cfg, follower),
        shard(cfg, s),
        format_ms(
            u64::from(cfg.policy.leader.expect("leader policy").replica_lag_timeout_ticks) * cfg.tick_ms
        )
    )
}

/// A readable summary of a leader-family state.
pub fn state(cfg: &WorldConfig, s: &WorldState, l: &LeaderActors) -> String {
    let mut out = String::new();
    for (i, r) in l.replicas.iter().enumerate() {
        let data: Vec<String> = s.nodes[i]
            .shards
            .iter()
            .enumerate()
            .map(|(k, st)| format!("{}=v{}:{}", cfg.shard_names[k], st.version, st.value))
            .collect();
        let roles: Vec<String> = (0..cfg.shard_names.len() as u8).filter_map(|k| role(cfg, r, k)).collect();
        let _ = writeln!(
            out,
            "{} [{}] {} {}  {}  health={:?}",
            cfg.nodes[i].name,
            cfg.zones[usize::from(cfg.nodes[i].zone)],
            if s.nodes[i].up { "up" } else { "DOWN" },
            data.join(" "),
            roles.join("; "),
            l.manager.health[i]
        );
    }
    for (k, r) in l.manager.shards.iter().enumerate() {
        let failover = match &r.failover {
            Some(f) => {
                format!("; failover under way ({} of {} answered)", f.answers.len(), f.asked.count_ones())
            }
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "{}: {} epoch {} primary {} in sync {}{failover}",
            cfg.coordinators[0].name,
            cfg.shard_names[k],
            r.epoch,
            node(cfg, r.primary),
            nodes(cfg, r.in_sync)
        );
    }
    let _ = writeln!(out, "{}: requests in progress: {}", cfg.coordinators[0].name, l.manager.ops.len());
    for (i, c) in s.clients.iter().enumerate() {
        let _ = writeln!(out, "{}: {}", cfg.clients[i].name, super::display::client_progress(c));
    }
    let acked: Vec<String> = l
        .ghost
        .acked
        .iter()
        .enumerate()
        .filter_map(|(k, a)| a.map(|a| format!("{} {}", cfg.shard_names[k], pos(a))))
        .collect();
    if !acked.is_empty() {
        let _ = writeln!(out, "newest acknowledged: {}", acked.join(", "));
    }
    if let Some(b) = l.ghost.split_brain {
        let _ = writeln!(out, "SPLIT BRAIN: {}", split_brain(cfg, b));
    }
    let _ = writeln!(out, "in flight: {} messages, faults left: {}", s.net.len(), s.env.faults_left);
    for f in &s.env.ending {
        let what = match f.fault {
            crate::config::MenuFault::Crash(n) => format!("{} restarts", node(cfg, n)),
            crate::config::MenuFault::Partition(z) => format!("zone {} heals", cfg.zones[usize::from(z)]),
            crate::config::MenuFault::Degrade(i) => {
                let d = &cfg.faults.degrade[usize::from(i)];
                let zone = |z: u8| &cfg.zones[usize::from(z)];
                format!("link {}<->{} is restored", zone(d.zones.0), zone(d.zones.1))
            }
        };
        let _ = writeln!(out, "{what} by itself in {}..{} ticks", f.earliest_ticks, f.latest_ticks);
    }
    out
}

/// A replica's role in shard `k`, as its machine (or, crashed, its durable state) has it.
fn role(cfg: &WorldConfig, r: &LeaderNode, k: u8) -> Option<String> {
    let (last, epoch) = r.shard(k)?;
    let role = match r.role(k)? {
        Role::Primary => {
            let in_sync = match r {
                LeaderNode::Up(r) => r.shards[usize::from(k)].as_ref().map(|s| {
                    let proposal =
                        s.proposal.map_or(String::new(), |p| format!(", proposed {}", nodes(cfg, p)));
                    format!(" in sync {}{proposal}, {} waiting", nodes(cfg, s.in_sync), s.pending.len())
                }),
                LeaderNode::Down(d) => {
                    d.shards[usize::from(k)].as_ref().map(|s| format!(" in sync {}", nodes(cfg, s.in_sync)))
                }
            };
            format!("PRIMARY{}", in_sync.unwrap_or_default())
        }
        Role::Follower { primary: Some(p) } => format!("follows {}", node(cfg, p)),
        Role::Follower { primary: None } => "deposed".to_string(),
    };
    Some(format!("{} epoch {epoch} {role}, holds {}", shard(cfg, k), pos(last)))
}

fn split_brain(cfg: &WorldConfig, b: SplitBrain) -> String {
    match b {
        SplitBrain::TwoPrimaries { shard: s, epoch, first, second } => format!(
            "{} and {} both took writes of {} as primary of epoch {epoch}",
            node(cfg, first),
            node(cfg, second),
            shard(cfg, s)
        ),
        SplitBrain::DeposedAck { shard: s, node: n, epoch, newer } => format!(
            "a write of {} stored by {} as primary of epoch {epoch} was acknowledged after epoch {newer} had acknowledged one: a deposed primary's write reached a client",
            shard(cfg, s),
            node(cfg, n)
        ),
    }
}

/// What a step changed that a reader of the incident needs: promotions, failovers blocked,
/// in-sync sets, and the moment a property broke.
pub fn changes(cfg: &WorldConfig, before: &WorldState, after: &WorldState) -> Vec<String> {
    let (Some(a), Some(b)) = (leader::of(before), leader::of(after)) else { return Vec::new() };
    let mut notes = Vec::new();
    for (k, (x, y)) in a.manager.shards.iter().zip(&b.manager.shards).enumerate() {
        if x.primary != y.primary {
            let clean = if x.in_sync & (1 << y.primary) != 0 {
                "from the in-sync set"
            } else {
                "UNCLEAN: outside the in-sync set"
            };
            let held =
                leader::primary_last(b, k as u8).map_or(String::new(), |p| format!(", it holds {}", pos(p)));
            notes.push(format!(
                "PROMOTED {} to primary of {} in epoch {} ({clean}{held})",
                node(cfg, y.primary),
                cfg.shard_names[k],
                y.epoch
            ));
        } else if x.in_sync != y.in_sync {
            notes.push(format!("{} in-sync set now {}", cfg.shard_names[k], nodes(cfg, y.in_sync)));
        }
        if x.failover.is_some() && y.failover.is_none() && x.primary == y.primary {
            notes.push(format!(
                "no promotion of {}: the failover found no replica it may promote, or heard from the primary",
                cfg.shard_names[k]
            ));
        }
    }
    for (k, (x, y)) in a.ghost.acked.iter().zip(&b.ghost.acked).enumerate() {
        if x != y {
            if let Some(p) = y {
                notes.push(format!("acknowledged: {} {}", cfg.shard_names[k], pos(*p)));
            }
        }
    }
    if a.ghost.split_brain.is_none() {
        if let Some(sb) = b.ghost.split_brain {
            notes.push(format!("SPLIT BRAIN: {}", split_brain(cfg, sb)));
        }
    }
    notes
}

/// Why `acked_writes_persist` holds or not, per shard: the newest acknowledged position, the
/// primary the manager routes to, and what it holds.
pub fn explain_acked(cfg: &WorldConfig, s: &WorldState) -> String {
    let l = leader::of(s).expect("a leader-family world");
    let mut parts = Vec::new();
    for (k, acked) in l.ghost.acked.iter().enumerate() {
        let name = &cfg.shard_names[k];
        let Some(acked) = acked else {
            parts.push(format!("shard {name}: no write acknowledged yet"));
            continue;
        };
        let primary = l.manager.shards[k].primary;
        let held = leader::primary_last(l, k as u8).map_or("nothing".to_string(), pos);
        let verdict = match leader::primary_in_role(l, k as u8) {
            None => "has not taken the role yet (it serves nothing until it has)",
            Some(p) if p >= *acked => "holds it",
            Some(_) => "misses it, and as primary takes no older epoch's log: the acknowledged write is lost",
        };
        parts.push(format!(
            "shard {name}: newest acknowledged {}; the manager's primary {} (epoch {}) holds {held} and {verdict}",
            pos(*acked),
            node(cfg, primary),
            l.manager.shards[k].epoch
        ));
    }
    parts.join("\n")
}

/// Why `single_primary` holds or not.
pub fn explain_single_primary(cfg: &WorldConfig, s: &WorldState) -> String {
    let l = leader::of(s).expect("a leader-family world");
    match l.ghost.split_brain {
        Some(b) => split_brain(cfg, b),
        None => "one primary per shard and epoch took writes, and no write of an older epoch was acknowledged after one of a newer".into(),
    }
}
