//! How steps and states read in counterexamples and in the explorer.

use super::{Action, ClientPhase, Endpoint, Envelope, Msg, WorldConfig, WorldState};
use crate::config::duration::format_ms;
use crate::config::OpKind;
use std::fmt::Write;

pub fn endpoint(cfg: &WorldConfig, e: Endpoint) -> String {
    match e {
        Endpoint::Node(n) => cfg.nodes[usize::from(n)].name.clone(),
        Endpoint::Coordinator => "coordinator".into(),
        Endpoint::Client(c) => cfg.clients[usize::from(c)].name.clone(),
    }
}

fn op_name(cfg: &WorldConfig, op: super::OpId) -> String {
    let c = &cfg.clients[usize::from(op.client)];
    let kind = match c.ops[usize::from(op.seq)] {
        OpKind::Write => "write",
        OpKind::Read => "read",
    };
    format!("{}.{}#{}", c.name, kind, op.seq + 1)
}

pub fn msg(cfg: &WorldConfig, m: &Msg) -> String {
    let shard = |s: u8| cfg.shard_names[usize::from(s)].clone();
    let node = |n: u8| cfg.nodes[usize::from(n)].name.clone();
    match *m {
        Msg::Request { op, attempt, value, kind, .. } => match kind {
            OpKind::Write => format!("Request {} value={value} attempt={attempt}", op_name(cfg, op)),
            OpKind::Read => format!("Request {} attempt={attempt}", op_name(cfg, op)),
        },
        Msg::Response { op, attempt, ok, value } => {
            let verdict = if ok { "ok" } else { "FAILED (503)" };
            match cfg.clients[usize::from(op.client)].ops[usize::from(op.seq)] {
                OpKind::Read if ok => {
                    format!("Response {} attempt={attempt} {verdict} value={value}", op_name(cfg, op))
                }
                _ => format!("Response {} attempt={attempt} {verdict}", op_name(cfg, op)),
            }
        }
        Msg::Replicate { op, attempt, shard: s, version, value, .. } => {
            format!("Replicate {} v{version}={value} ({} attempt={attempt})", shard(s), op_name(cfg, op))
        }
        Msg::ReplicateAck { op, attempt, .. } => {
            format!("ReplicateAck ({} attempt={attempt})", op_name(cfg, op))
        }
        Msg::ReadReq { op, attempt, shard: s, .. } => {
            format!("ReadReq {} ({} attempt={attempt})", shard(s), op_name(cfg, op))
        }
        Msg::ReadReply { version, value, op, .. } => {
            format!("ReadReply v{version}={value} ({})", op_name(cfg, op))
        }
        Msg::CopyRequest { shard: s, to } => format!("CopyRequest {} to {}", shard(s), node(to)),
        Msg::CopyData { shard: s, data, .. } => {
            format!("CopyData {} v{}={}", shard(s), data.version, data.value)
        }
        Msg::CopyAck { shard: s, from } => {
            format!("CopyAck {} from {}", shard(s), node(from))
        }
        Msg::Ping => "Ping".into(),
        Msg::Pong => "Pong".into(),
    }
}

fn envelope(cfg: &WorldConfig, e: &Envelope) -> String {
    format!("{} -> {}: {}", endpoint(cfg, e.src), endpoint(cfg, e.dst), msg(cfg, &e.msg))
}

pub fn action(cfg: &WorldConfig, a: &Action) -> String {
    let node = |n: u8| cfg.nodes[usize::from(n)].name.clone();
    let zone = |z: u8| cfg.zones[usize::from(z)].clone();
    let client = |c: u8| cfg.clients[usize::from(c)].name.clone();
    match a {
        Action::Deliver(e) => format!("deliver {}", envelope(cfg, e)),
        Action::AckDeadline { op, attempt } => format!(
            "coordinator: ack deadline ({}) of {} attempt={attempt} fires",
            format_ms(u64::from(cfg.policy.replica_ack_timeout_ticks) * cfg.tick_ms),
            op_name(cfg, *op)
        ),
        Action::ApplyMembershipUpdate => {
            "coordinator: applies the next membership update (the replacement joins as a learner)".into()
        }
        Action::CopyRetry(s) => {
            format!(
                "coordinator: the catch-up copy of {} ran out of time, asks again",
                cfg.shard_names[usize::from(*s)]
            )
        }
        Action::Heartbeat => "coordinator: heartbeat round (health from silence, pings)".into(),
        Action::Rebalance => "rebalancer: runs (may move one shard)".into(),
        Action::ClientInvoke(c) => format!("{}: invokes its next operation", client(*c)),
        Action::ClientTimeout(c) => format!("{}: request timeout fires", client(*c)),
        Action::ClientRetry(c) => format!("{}: backoff over, retries", client(*c)),
        Action::Crash(n) => format!("FAULT: {} crashes", node(*n)),
        Action::Restart(n) => format!("{} restarts", node(*n)),
        Action::CoordinatorRestart => {
            "FAULT: the coordinator crashes and restarts with what it persisted".into()
        }
        Action::Partition(z) => format!("FAULT: zone {} is partitioned from the others", zone(*z)),
        Action::Heal(z) => format!("zone {} heals", zone(*z)),
        Action::Degrade(i) => {
            let d = &cfg.faults.degrade[usize::from(*i)];
            format!("FAULT: link {}<->{} degrades to {} one-way", zone(d.zones.0), zone(d.zones.1), d.text)
        }
        Action::Restore(i) => {
            let d = &cfg.faults.degrade[usize::from(*i)];
            format!("link {}<->{} restored", zone(d.zones.0), zone(d.zones.1))
        }
        Action::Lose(e) => format!("FAULT: lossy link loses {}", envelope(cfg, e)),
        Action::Tick => format!("tick (+{})", format_ms(cfg.tick_ms)),
    }
}

/// A compact, readable summary of a state.
pub fn state(cfg: &WorldConfig, s: &WorldState) -> String {
    let mut out = String::new();
    let loads = cfg.policy.rebalance.as_ref().map(|_| s.coord.node_loads(cfg));
    for (i, n) in s.nodes.iter().enumerate() {
        let data: Vec<String> = n
            .shards
            .iter()
            .enumerate()
            .map(|(k, st)| format!("{}=v{}:{}", cfg.shard_names[k], st.version, st.value))
            .collect();
        let _ = writeln!(
            out,
            "{} [{}] {} {}  health={:?}",
            cfg.nodes[i].name,
            cfg.zones[usize::from(cfg.nodes[i].zone)],
            if n.up { "up" } else { "DOWN" },
            data.join(" "),
            s.coord.health[i]
        );
        if let Some(loads) = &loads {
            let l = loads[i];
            let _ = writeln!(
                out,
                "    disk {}%, compaction debt {}%{}",
                l.disk_pct,
                l.compaction_debt_pct,
                if l.slow { ", SLOW (hot shard on compaction debt)" } else { "" }
            );
        }
    }
    for (k, v) in s.coord.shards.iter().enumerate() {
        let members: Vec<String> =
            v.members.iter().map(|&m| cfg.nodes[usize::from(m)].name.clone()).collect();
        let join = match &v.join {
            Some(j) => format!(
                " joining: {} replaces {}",
                cfg.nodes[usize::from(j.replacement)].name,
                cfg.nodes[usize::from(j.evicted)].name
            ),
            None => String::new(),
        };
        let _ = writeln!(out, "shard {}: replicas [{}]{join}", cfg.shard_names[k], members.join(", "));
    }
    // Per-partition and per-backend load this tick: totals hide a hot partition.
    if cfg.partition_capacity_per_tick.is_some() {
        let cap = cfg.partition_capacity_per_tick.map_or("unlimited".to_string(), |c| c.to_string());
        let parts: Vec<String> = (0..cfg.shard_names.len())
            .map(|p| {
                let background = cfg.partition_background[p];
                let offered = background + s.coord.partition_load[p];
                let flag =
                    if cfg.partition_capacity_per_tick.is_some_and(|c| offered > c) { " OVER" } else { "" };
                format!("{} {offered}/{cap} (burst {background}){flag}", cfg.shard_names[p])
            })
            .collect();
        let _ = writeln!(out, "partition writes this tick: {}", parts.join(", "));
    }
    if cfg.backends_modelled {
        let loads = s.coord.backend_loads(cfg);
        let parts: Vec<String> = loads
            .iter()
            .map(|b| {
                let spec = &cfg.nodes[usize::from(b.node)];
                let cap = b.capacity_per_tick.map_or("unlimited".to_string(), |c| c.to_string());
                let flag =
                    if b.capacity_per_tick.is_some_and(|c| b.load_per_tick > c) { " OVER" } else { "" };
                format!("{} {}/{cap} (base {}){flag}", spec.name, b.load_per_tick, spec.base_load_per_tick)
            })
            .collect();
        let _ = writeln!(out, "backend writes this tick: {}", parts.join(", "));
    }
    if let Some(b) = s.ghost.capacity_breach {
        let unit = match b.unit {
            super::CapacityUnit::Partition(p) => format!("partition {}", cfg.shard_names[usize::from(p)]),
            super::CapacityUnit::Backend(n) => format!("backend {}", cfg.nodes[usize::from(n)].name),
        };
        let _ = writeln!(
            out,
            "capacity exceeded: {unit} was offered {} writes in one tick, capacity {}",
            b.offered, b.capacity
        );
    }
    let _ = writeln!(
        out,
        "membership queue: {}/{}  requests in progress: {}",
        s.coord.queue.len(),
        cfg.coordinator.membership_queue_capacity,
        s.coord.ops.len()
    );
    for (i, c) in s.clients.iter().enumerate() {
        let phase = match c.phase {
            ClientPhase::Idle { earliest_ticks, latest_ticks } => {
                format!("idle (next op in {earliest_ticks}..{latest_ticks} ticks)")
            }
            ClientPhase::Waiting { attempt, timeout_ticks } => {
                format!("waiting (attempt {attempt}, timeout in {timeout_ticks} ticks)")
            }
            ClientPhase::Backoff { attempt, earliest_ticks, latest_ticks } => {
                format!("backing off after attempt {attempt} ({earliest_ticks}..{latest_ticks} ticks)")
            }
            ClientPhase::Done => "done".to_string(),
        };
        let _ = writeln!(out, "{}: op {} {phase}", cfg.clients[i].name, c.next_op + 1);
    }
    let _ = writeln!(out, "in flight: {} messages, faults left: {}", s.net.len(), s.env.faults_left);
    out
}

/// A sequence diagram of a path: one lane per actor, time flowing down, a line per tick.
pub fn svg(cfg: &WorldConfig, path: stateright::Path<WorldState, Action>) -> String {
    let mut lanes: Vec<Endpoint> = (0..cfg.clients.len() as u8).map(Endpoint::Client).collect();
    lanes.push(Endpoint::Coordinator);
    lanes.extend((0..cfg.nodes.len() as u8).map(Endpoint::Node));
    let lane_x = |e: Endpoint| 80 + 110 * lanes.iter().position(|l| *l == e).unwrap_or(0);
    let steps = path.into_vec();
    let row = 22;
    let height = 60 + row * steps.len();
    let width = 80 + 110 * lanes.len();
    let mut out = format!("<svg version='1.1' baseProfile='full' width='{width}' height='{height}' viewbox='-20 -20 {} {}' xmlns='http://www.w3.org/2000/svg'>", width + 20, height + 20);
    out.push_str("<defs><marker class='svg-event-shape' id='arrow' markerWidth='12' markerHeight='10' refX='12' refY='5' orient='auto'><polygon points='0 0, 12 5, 0 10' /></marker></defs>");
    for &l in &lanes {
        let x = lane_x(l);
        let _ = write!(
            out,
            "<line x1='{x}' y1='30' x2='{x}' y2='{height}' class='svg-actor-timeline' stroke='black' />"
        );
        let _ = write!(
            out,
            "<text x='{x}' y='20' class='svg-actor-label' text-anchor='middle'>{}</text>",
            endpoint(cfg, l)
        );
    }
    let mut ticks = 0u64;
    let mut sent_at: Vec<(Envelope, usize)> = Vec::new();
    for (i, (state, action)) in steps.iter().enumerate() {
        let y = 40 + row * i;
        for e in &state.net {
            if !sent_at.iter().any(|(x, _)| x == e) {
                sent_at.push((*e, y));
            }
        }
        match action {
            Some(Action::Tick) => {
                ticks += 1;
                let _ = write!(
                    out,
                    "<line x1='40' y1='{y}' x2='{}' y2='{y}' stroke='#ccc' stroke-dasharray='4' />",
                    width - 20
                );
                let _ = write!(
                    out,
                    "<text x='0' y='{}' font-size='10'>{}</text>",
                    y + 4,
                    format_ms(ticks * cfg.tick_ms)
                );
            }
            Some(Action::Deliver(e)) | Some(Action::Lose(e)) => {
                let from_y = sent_at
                    .iter()
                    .rev()
                    .find(|(x, _)| x.src == e.src && x.dst == e.dst && x.msg == e.msg)
                    .map(|(_, y)| *y)
                    .unwrap_or(y);
                let color = if matches!(action, Some(Action::Lose(_))) { "red" } else { "black" };
                let _ = write!(
                    out,
                    "<line x1='{}' x2='{}' y1='{from_y}' y2='{y}' stroke='{color}' marker-end='url(#arrow)' class='svg-event-line' />",
                    lane_x(e.src),
                    lane_x(e.dst)
                );
                let _ = write!(
                    out,
                    "<text x='{}' y='{}' font-size='9' class='svg-event-label'>{}</text>",
                    lane_x(e.dst) + 4,
                    y - 2,
                    msg(cfg, &e.msg)
                );
            }
            Some(a) => {
                let lane = match a {
                    Action::ClientInvoke(c) | Action::ClientTimeout(c) | Action::ClientRetry(c) => {
                        Endpoint::Client(*c)
                    }
                    Action::Crash(n) | Action::Restart(n) => Endpoint::Node(*n),
                    _ => Endpoint::Coordinator,
                };
                let _ = write!(out, "<circle cx='{}' cy='{y}' r='4' fill='orange' />", lane_x(lane));
                let _ = write!(
                    out,
                    "<text x='{}' y='{}' font-size='9'>{}</text>",
                    lane_x(lane) + 6,
                    y + 3,
                    xml_escape(&action_short(cfg, a))
                );
            }
            None => {}
        }
    }
    out.push_str("</svg>");
    out
}

fn action_short(cfg: &WorldConfig, a: &Action) -> String {
    action(cfg, a)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// What a step changed in the topology, for counterexamples: queued membership changes,
/// joins started and replica sets switched. Empty when nothing changed.
pub fn topology_changes(cfg: &WorldConfig, before: &WorldState, after: &WorldState) -> String {
    let node = |n: u8| cfg.nodes[usize::from(n)].name.clone();
    let mut notes = Vec::new();
    for u in after.coord.queue.iter().filter(|u| !before.coord.queue.contains(u)) {
        let what = if u.is_move { "move" } else { "evict" };
        notes.push(format!(
            "queued: {what} {} {} -> {}",
            cfg.shard_names[usize::from(u.shard)],
            node(u.evicted),
            node(u.replacement)
        ));
    }
    if after.ghost.churn_exceeded && !before.ghost.churn_exceeded {
        notes.push("coordinator over its churn budget".into());
    }
    if let (Some(n), None) = (after.ghost.healthy_evicted, before.ghost.healthy_evicted) {
        notes.push(format!("{} is up and reachable: a healthy replica", node(n)));
    }
    for (k, (a, b)) in before.coord.shards.iter().zip(&after.coord.shards).enumerate() {
        let members =
            |v: &super::ShardView| v.members.iter().map(|&m| node(m)).collect::<Vec<_>>().join(", ");
        if a.members != b.members {
            notes.push(format!("{} replicas now [{}]", cfg.shard_names[k], members(b)));
        } else if a.join.is_none() && b.join.is_some() {
            let j = b.join.as_ref().unwrap();
            notes.push(format!("{} copying to {}", cfg.shard_names[k], node(j.replacement)));
        }
    }
    notes.join("; ")
}
