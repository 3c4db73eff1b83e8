//! How steps and states read in counterexamples and in the explorer.

use super::{Action, ClientPhase, ClientState, Endpoint, Envelope, Msg, WorldConfig, WorldState};
use crate::config::duration::format_ms;
use crate::config::OpKind;
use crate::protocol::coordinator::{fleet_loads, RouterLoad};
use std::fmt::Write;

pub fn endpoint(cfg: &WorldConfig, e: Endpoint) -> String {
    match e {
        Endpoint::Node(n) => cfg.nodes[usize::from(n)].name.clone(),
        Endpoint::Coordinator(c) => cfg.coordinators[usize::from(c)].name.clone(),
        Endpoint::Client(c) => cfg.clients[usize::from(c)].name.clone(),
    }
}

pub(super) fn op_name(cfg: &WorldConfig, op: super::OpId) -> String {
    let c = &cfg.clients[usize::from(op.client)];
    let kind = match c.op_kind(op.seq) {
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
            match cfg.clients[usize::from(op.client)].op_kind(op.seq) {
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
        Msg::Refused { op, attempt, .. } => format!("Refused ({} attempt={attempt})", op_name(cfg, op)),
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
        Msg::View { shard: s, epoch, members, join } => {
            let set: Vec<String> = (0..8).filter(|n| members & (1 << n) != 0).map(node).collect();
            let change = match join {
                Some(j) if j.swapping => {
                    format!(
                        ", {} replacing {}, caught up (reads go to it)",
                        node(j.replacement),
                        node(j.evicted)
                    )
                }
                Some(j) => format!(", {} joining in place of {}", node(j.replacement), node(j.evicted)),
                None => String::new(),
            };
            format!("View {} #{epoch} [{}]{change}", shard(s), set.join(", "))
        }
        Msg::ViewAck { shard: s, epoch } => format!("ViewAck {} #{epoch}", shard(s)),
        Msg::Propose { shard: s, evicted, replacement } => {
            format!("Propose {}: evict {}, replace with {}", shard(s), node(evicted), node(replacement))
        }
        Msg::LoadQuery => "LoadQuery".into(),
        Msg::LoadReport { compaction_debt_pct } => format!("LoadReport debt={compaction_debt_pct}%"),
        Msg::Leader(l) => super::leader_display::msg(cfg, &l),
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
        Action::FanOut { op, attempt } => format!(
            "coordinator: works through its backlog to {} attempt={attempt}, sends it to the replicas",
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
        Action::BurstEnds(p) => format!("the burst on {} ends", cfg.shard_names[usize::from(*p)]),
        Action::Tick => format!("tick (+{})", format_ms(cfg.tick_ms)),
        Action::PeerTimer { coord, timer } => {
            let name = &cfg.coordinators[usize::from(*coord)].name;
            let what = match timer {
                super::Timer::AckDeadline { op, attempt } => {
                    format!("ack deadline of {} attempt={attempt} fires", op_name(cfg, *op))
                }
                super::Timer::Heartbeat => "heartbeat round (health from silence, pings)".into(),
                super::Timer::SilenceCrossed { node: n } => {
                    format!("{}'s silence reached a detector threshold (continuous check)", node(*n))
                }
                super::Timer::ViewResend { shard } => {
                    format!(
                        "view of {} not acked by all in time, sends it again",
                        cfg.shard_names[usize::from(*shard)]
                    )
                }
                other => format!("{other:?}"),
            };
            format!("{name}: {what}")
        }
        Action::ManagerTimer(t) => super::leader_display::manager_timer(cfg, t),
        Action::ReplicaTimer { node: n, timer } => super::leader_display::replica_timer(cfg, *n, timer),
        Action::Upgrade(c) | Action::Rollback(c) => {
            let r = cfg.rollout.as_ref().expect("rollout steps need a rollout");
            let name = &cfg.coordinators[usize::from(*c)].name;
            match a {
                Action::Upgrade(_) => {
                    format!("ROLLOUT: {name} moves on to the next policy (stages: {})", r.names.join(" -> "))
                }
                _ => format!(
                    "ROLLBACK: {name} goes back a stage ({} stages: {})",
                    r.names.len(),
                    r.names.join(" -> ")
                ),
            }
        }
    }
}

/// A compact, readable summary of a state.
pub fn state(cfg: &WorldConfig, s: &WorldState) -> String {
    if let Some(l) = super::leader::of(s) {
        return super::leader_display::state(cfg, s, l);
    }
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
            // With debt as node state the coordinator knows only what the node last reported.
            let now = if cfg.compaction.dynamic() {
                format!(" reported (now {}%)", n.debt_pct)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "    disk {}%, compaction debt {}%{now}{}",
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
    // Per-partition and per-backend load this tick: totals hide a hot partition. With several
    // routers, what the unit takes from all of them (each counts only its own).
    let fleet: Vec<RouterLoad<'_>> =
        s.coordinators().map(|c| (&c.partition_load[..], &c.backend_load[..])).collect();
    let (mut partitions, mut backends) = (Vec::new(), Vec::new());
    for u in fleet_loads(cfg, &s.coord.background, &fleet) {
        let cap = u.capacity.map_or("unlimited".to_string(), |c| c.to_string());
        let flag = if u.capacity.is_some_and(|c| u.offered > c) { " OVER" } else { "" };
        match u.unit {
            super::CapacityUnit::Partition(p) => partitions.push(format!(
                "{} {}/{cap} (burst {}){flag}",
                cfg.shard_names[usize::from(p)],
                u.offered,
                u.background
            )),
            super::CapacityUnit::Backend(n) => backends.push(format!(
                "{} {}/{cap} (base {}){flag}",
                cfg.nodes[usize::from(n)].name,
                u.offered,
                u.background
            )),
        }
    }
    if !partitions.is_empty() {
        let _ = writeln!(out, "partition writes this tick: {}", partitions.join(", "));
    }
    if !backends.is_empty() {
        let _ = writeln!(out, "backend writes this tick: {}", backends.join(", "));
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
    // With several coordinators the leader holds the queue; each line below has its requests.
    let _ = writeln!(
        out,
        "membership queue{}: {}/{}  requests in progress: {}",
        if cfg.coordinators.len() > 1 {
            format!(" (leader {})", cfg.coordinators[0].name)
        } else {
            String::new()
        },
        s.coord.queue.len(),
        cfg.coordinator.membership_queue_capacity,
        s.coord.ops.len()
    );
    if let Some(w) = cfg.coordinator.work {
        let waiting = s.coord.ops.iter().filter(|o| o.fan_out_ticks.is_some()).count();
        let _ = writeln!(
            out,
            "coordinator backlog: {} units of work ({}/tick), requests waiting behind it: {waiting}",
            s.coord.backlog_work, w.work_per_tick
        );
    }
    for c in 0..cfg.coordinators.len() as u8 {
        let stage = cfg.rollout.as_ref().map(|r| {
            let st = s.stages[usize::from(c)];
            format!(
                " policy {}{}",
                r.names[usize::from(st.index)],
                if st.back { " (rolled back)" } else { "" }
            )
        });
        if c == 0 && cfg.coordinators.len() == 1 && stage.is_none() {
            break;
        }
        let k = s.coordinator(c);
        let views: Vec<String> = k
            .shards
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let members: Vec<&str> =
                    v.members.iter().map(|&m| cfg.nodes[usize::from(m)].name.as_str()).collect();
                let join = v.join.as_ref().map_or(String::new(), |j| {
                    format!(
                        " +{}{}",
                        cfg.nodes[usize::from(j.replacement)].name,
                        if j.swapping { " (reads)" } else { "" }
                    )
                });
                format!("{} #{} [{}]{join}", cfg.shard_names[i], v.epoch, members.join(","))
            })
            .collect();
        let _ = writeln!(
            out,
            "{}{}: views {}  requests {}",
            cfg.coordinators[usize::from(c)].name,
            stage.unwrap_or_default(),
            views.join("; "),
            k.ops.len()
        );
    }
    for (i, c) in s.clients.iter().enumerate() {
        // A key partition the checker chose is part of the behaviour: say which.
        let key = match cfg.client_partitions[i].len() {
            1 => String::new(),
            _ => format!(" [key on {}]", cfg.shard_names[usize::from(c.partition)]),
        };
        let _ = writeln!(out, "{}{key}: {}", cfg.clients[i].name, client_progress(c));
    }
    let _ = writeln!(out, "in flight: {} messages, faults left: {}", s.net.len(), s.env.faults_left);
    for f in &s.env.ending {
        let what = match f.fault {
            crate::config::MenuFault::Crash(n) => format!("{} restarts", cfg.nodes[usize::from(n)].name),
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

/// A sequence diagram of a path: one lane per actor, time flowing down, a line per tick.
pub fn svg(cfg: &WorldConfig, path: stateright::Path<WorldState, Action>) -> String {
    svg_of_steps(cfg, &path.into_vec())
}

/// What identifies a message in flight across ticks (its latency window counts down).
type MsgKey = (Endpoint, Endpoint, Msg, u8);

fn msg_key(e: &Envelope) -> MsgKey {
    (e.src, e.dst, e.msg, e.sender_epoch)
}

fn count(net: &[Envelope], key: &MsgKey) -> usize {
    net.iter().filter(|e| msg_key(e) == *key).count()
}

/// The sequence diagram of `steps` (each state with the action taken from it; the last has
/// none). Every message is drawn from the row of the step that sent it: a message sent again
/// later (a retry, a loop's next round) gets its own arrow. Dark text on its own white
/// background, wide enough for its longest label; a path that ends in a state it was in
/// before (a lasso) has its loop marked.
pub fn svg_of_steps(cfg: &WorldConfig, steps: &[(WorldState, Option<Action>)]) -> String {
    let mut diagram = Diagram::new(cfg, steps.len());
    for (i, (state, action)) in steps.iter().enumerate() {
        let y = Diagram::ROW_Y0 + Diagram::ROW * i;
        let Some(action) = action else { continue };
        let next = steps.get(i + 1).map(|(s, _)| s);
        match action {
            Action::Tick => diagram.tick(y),
            Action::Deliver(e) => diagram.message(e, y, false),
            Action::Lose(e) => diagram.message(e, y, true),
            a => diagram.local_event(a, state, next, y),
        }
        if let Some(next) = next {
            diagram.track_sends(action, state, next, y);
        }
    }
    // A lasso: the last state was visited before; the steps after that visit repeat forever.
    if let Some((last, _)) = steps.last() {
        if let Some(j) = steps[..steps.len() - 1].iter().position(|(s, _)| s == last) {
            diagram.loop_mark(j, steps.len() - 1);
        }
    }
    diagram.finish()
}

/// A sequence diagram being drawn, row by row.
struct Diagram<'a> {
    cfg: &'a WorldConfig,
    lanes: Vec<Endpoint>,
    height: usize,
    /// The rightmost x any text reaches so far (the picture's width follows it).
    right: usize,
    body: String,
    /// The dashed tick lines, drawn under everything, across the final width.
    rules: String,
    ticks: u64,
    /// Messages sent and not yet delivered, lost or dropped, oldest first, with their send row.
    pending: Vec<(MsgKey, usize)>,
}

impl<'a> Diagram<'a> {
    const ROW: usize = 22;
    const ROW_Y0: usize = 40;
    /// A generous width per character of 10px monospace text, so no label is clipped.
    const CHAR_W: usize = 7;

    fn new(cfg: &'a WorldConfig, rows: usize) -> Diagram<'a> {
        let mut lanes: Vec<Endpoint> = (0..cfg.clients.len() as u8).map(Endpoint::Client).collect();
        lanes.extend((0..cfg.coordinators.len() as u8).map(Endpoint::Coordinator));
        lanes.extend((0..cfg.nodes.len() as u8).map(Endpoint::Node));
        let height = 60 + Self::ROW * rows;
        let right = 80 + 120 * lanes.len();
        let mut d = Diagram {
            cfg,
            lanes,
            height,
            right,
            body: String::new(),
            rules: String::new(),
            ticks: 0,
            pending: Vec::new(),
        };
        for l in d.lanes.clone() {
            let x = d.lane_x(l);
            let _ = write!(
                d.body,
                "<line x1='{x}' y1='30' x2='{x}' y2='{height}' class='svg-actor-timeline' stroke='#999' />"
            );
            let _ = write!(
                d.body,
                "<text x='{x}' y='20' class='svg-actor-label' text-anchor='middle' font-size='12' font-weight='bold' fill='#111'>{}</text>",
                xml_escape(&endpoint(cfg, l))
            );
        }
        d
    }

    fn lane_x(&self, e: Endpoint) -> usize {
        80 + 120 * self.lanes.iter().position(|l| *l == e).unwrap_or(0)
    }

    fn tick(&mut self, y: usize) {
        self.ticks += 1;
        let _ = write!(
            self.rules,
            "<line x1='40' y1='{y}' x2='{{RIGHT}}' y2='{y}' stroke='#bbb' stroke-dasharray='4' />"
        );
        let _ = write!(
            self.body,
            "<text x='0' y='{}' font-size='10' fill='#444'>{}</text>",
            y + 4,
            format_ms(self.ticks * self.cfg.tick_ms)
        );
    }

    /// A delivery (or a loss) at row `y`: an arrow from the row that sent the message.
    fn message(&mut self, e: &Envelope, y: usize, lost: bool) {
        let key = msg_key(e);
        let from_y = match self.pending.iter().position(|(k, _)| *k == key) {
            Some(p) => self.pending.remove(p).1,
            None => y,
        };
        let color = if lost { "#c00" } else { "#111" };
        let (sx, dx) = (self.lane_x(e.src), self.lane_x(e.dst));
        let _ = write!(
            self.body,
            "<line x1='{sx}' x2='{dx}' y1='{from_y}' y2='{y}' stroke='{color}' marker-end='url(#arrow)' class='svg-event-line' />"
        );
        let text = format!("{}{}", if lost { "LOST " } else { "" }, msg(self.cfg, &e.msg));
        // Along the arrow, ending at its head: a message to a lane on the right stays inside
        // the picture instead of running off past the last lane.
        let w = Self::CHAR_W * text.chars().count();
        let (x, anchor) = if dx > sx && dx >= w + 46 { (dx - 6, "end") } else { (dx + 4, "start") };
        self.right = self.right.max(if anchor == "end" { x + 10 } else { x + w + 10 });
        let _ = write!(
            self.body,
            "<text x='{x}' y='{}' font-size='10' fill='{color}' text-anchor='{anchor}' class='svg-event-label'>{}</text>",
            y - 2,
            xml_escape(&text)
        );
    }

    /// A step of one actor or of the environment: a dot on its lane, with what it changed.
    fn local_event(&mut self, a: &Action, state: &WorldState, next: Option<&WorldState>, y: usize) {
        let lane = match a {
            Action::ClientInvoke(c) | Action::ClientTimeout(c) | Action::ClientRetry(c) => {
                Endpoint::Client(*c)
            }
            Action::Crash(n) | Action::Restart(n) | Action::ReplicaTimer { node: n, .. } => {
                Endpoint::Node(*n)
            }
            Action::PeerTimer { coord, .. } => Endpoint::Coordinator(*coord),
            Action::Upgrade(c) | Action::Rollback(c) => Endpoint::Coordinator(*c),
            _ => Endpoint::LEADER,
        };
        let mut text = action_short(self.cfg, a);
        if let Some(next) = next {
            let changes = topology_changes(self.cfg, state, next);
            if !changes.is_empty() {
                text = format!("{text} => {changes}");
            }
        }
        let x = self.lane_x(lane) + 6;
        self.right = self.right.max(x + Self::CHAR_W * text.chars().count() + 10);
        let _ = write!(self.body, "<circle cx='{}' cy='{y}' r='4' fill='#e80' />", self.lane_x(lane));
        let _ = write!(
            self.body,
            "<text x='{x}' y='{}' font-size='10' fill='#111'>{}</text>",
            y + 3,
            xml_escape(&text)
        );
    }

    /// What the step at row `y` sent: the messages of `next` beyond those left of `state`.
    fn track_sends(&mut self, action: &Action, state: &WorldState, next: &WorldState, y: usize) {
        let delivered = match action {
            Action::Deliver(e) | Action::Lose(e) => Some(msg_key(e)),
            _ => None,
        };
        let mut keys: Vec<MsgKey> = next.net.iter().map(msg_key).collect();
        keys.extend(state.net.iter().map(msg_key));
        keys.sort();
        keys.dedup();
        for key in keys {
            let kept = count(&state.net, &key) - usize::from(delivered == Some(key));
            let now = count(&next.net, &key);
            for _ in kept..now {
                self.pending.push((key, y));
            }
            // Dropped without a delivery (a crash, a restart): forget the oldest sends.
            while self.pending.iter().filter(|(k, _)| *k == key).count() > now {
                let p = self.pending.iter().position(|(k, _)| *k == key).expect("counted above");
                self.pending.remove(p);
            }
        }
    }

    /// The bar and caption of a lasso whose last state is the state after step `j`.
    fn loop_mark(&mut self, j: usize, last: usize) {
        let (y0, y1) = (Self::ROW_Y0 + Self::ROW * j, Self::ROW_Y0 + Self::ROW * last);
        let _ = write!(
            self.body,
            "<rect x='-18' y='{y0}' width='8' height='{}' fill='#36c' class='svg-loop' />",
            y1 - y0
        );
        let _ = write!(
            self.body,
            "<text x='40' y='{}' font-size='11' font-weight='bold' fill='#36c' class='svg-loop-label'>loop: the last state is the state after step {j}; steps {}-{last} repeat forever</text>",
            y1 + 18,
            j + 1,
        );
        self.right = self.right.max(40 + Self::CHAR_W * 80);
    }

    fn finish(self) -> String {
        let width = self.right + 10;
        let height = self.height + 10;
        let mut out = format!(
            "<svg version='1.1' baseProfile='full' width='{}' height='{}' viewBox='-20 -10 {} {}' xmlns='http://www.w3.org/2000/svg' style='background:#fff'>",
            width + 20,
            height + 10,
            width + 20,
            height + 10
        );
        out.push_str("<defs><marker class='svg-event-shape' id='arrow' markerUnits='userSpaceOnUse' markerWidth='9' markerHeight='7' refX='9' refY='3.5' orient='auto'><polygon points='0 0, 9 3.5, 0 7' fill='#111' /></marker></defs>");
        let _ = write!(
            out,
            "<rect x='-20' y='-10' width='{}' height='{}' fill='#fff' />",
            width + 20,
            height + 10
        );
        out.push_str(&self.rules.replace("{RIGHT}", &(width - 20).to_string()));
        out.push_str(&self.body);
        out.push_str("</svg>");
        out
    }
}

fn action_short(cfg: &WorldConfig, a: &Action) -> String {
    action(cfg, a)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('\'', "&apos;")
}

/// What a step changed in the topology, for counterexamples: queued membership changes,
/// joins started and replica sets switched. Empty when nothing changed.
pub fn topology_changes(cfg: &WorldConfig, before: &WorldState, after: &WorldState) -> String {
    if before.leader.is_some() {
        return super::leader_display::changes(cfg, before, after).join("; ");
    }
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

/// Where a client is in its workload: the operation it is at and that operation's phase, or,
/// once every operation is done, how many there were ("op 2 done" read as a second
/// operation of a one-operation client).
pub(super) fn client_progress(c: &ClientState) -> String {
    match c.phase {
        ClientPhase::Done => format!("done ({} op{})", c.next_op, if c.next_op == 1 { "" } else { "s" }),
        _ => format!("op {} {}", c.next_op + 1, client_phase(&c.phase)),
    }
}

/// A client's phase as the state display shows it.
pub(super) fn client_phase(phase: &ClientPhase) -> String {
    match *phase {
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
    }
}
