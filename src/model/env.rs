//! The environment: links with latency, partitions, degradations, crashes, message loss.

use super::shared::Shared;
use super::{Action, Ending, Endpoint, Envelope, Msg, WorldConfig, WorldState};
use crate::config::{LatencyTicks, MenuFault};

/// The zone an endpoint is in.
pub fn zone_of(cfg: &WorldConfig, e: Endpoint) -> u8 {
    match e {
        Endpoint::Node(n) => cfg.node_zone(n),
        Endpoint::Coordinator(c) => cfg.coordinators[usize::from(c)].zone,
        Endpoint::Client(c) => cfg.clients[usize::from(c)].zone,
    }
}

/// Whether every burst that ends has ended: liveness is asked of the time after (a behaviour
/// in which such a burst lasts for ever is not one of the model's).
pub fn bursts_settled(cfg: &WorldConfig, s: &WorldState) -> bool {
    cfg.bursts_ending() & !s.env.bursts_ended == 0
}

/// Whether zones `a` and `b` can talk: a partitioned zone talks only to itself.
pub fn connected(s: &WorldState, a: u8, b: u8) -> bool {
    a == b || (s.env.partitioned & (1 << a) == 0 && s.env.partitioned & (1 << b) == 0)
}

/// The one-way latency window from zone a to zone b now, degradations included.
pub fn latency(cfg: &WorldConfig, s: &WorldState, a: u8, b: u8) -> LatencyTicks {
    latency_under(cfg, s.env.degraded, a, b)
}

/// The one-way latency window from zone a to zone b with the degradations `degraded` (bit i:
/// degradation i) in force.
pub fn latency_under(cfg: &WorldConfig, degraded: u8, a: u8, b: u8) -> LatencyTicks {
    for (i, d) in cfg.faults.degrade.iter().enumerate() {
        if degraded & (1 << i) != 0 && d.joins(a, b) {
            return d.latency;
        }
    }
    cfg.latency[usize::from(a)][usize::from(b)]
}

/// Put a message on the wire. Across a cut it is lost at once.
pub fn send(cfg: &WorldConfig, s: &mut WorldState, src: Endpoint, dst: Endpoint, msg: Msg) {
    let (za, zb) = (zone_of(cfg, src), zone_of(cfg, dst));
    if !connected(s, za, zb) {
        return;
    }
    let l = latency(cfg, s, za, zb);
    let sender_epoch = match src {
        Endpoint::Node(n) => s.ghost.fault_epoch[usize::from(n)],
        _ => 0,
    };
    s.net.push(Envelope {
        earliest_ticks: l.lo as u8,
        latest_ticks: l.hi as u8,
        src,
        dst,
        msg,
        sender_epoch,
        slack_ticks: 0,
    });
}

/// Whether a message arriving now reaches its receiver's handler.
pub fn deliverable(cfg: &WorldConfig, s: &WorldState, e: &Envelope) -> bool {
    let up = |ep: Endpoint| match ep {
        Endpoint::Node(n) => s.nodes[usize::from(n)].up,
        _ => true,
    };
    up(e.dst) && connected(s, zone_of(cfg, e.src), zone_of(cfg, e.dst))
}

pub fn tick(s: &mut WorldState) {
    for e in &mut s.net {
        assert!(e.latest_ticks > 0, "Tick is disabled while a message is due");
        e.earliest_ticks = e.earliest_ticks.saturating_sub(1);
        e.latest_ticks -= 1;
        e.slack_ticks = e.slack_ticks.saturating_sub(1);
    }
    for f in &mut s.env.ending {
        assert!(f.latest_ticks > 0, "Tick is disabled while a fault must end");
        f.earliest_ticks = f.earliest_ticks.saturating_sub(1);
        f.latest_ticks -= 1;
    }
}

/// Whether a fault in force may end now: one without a duration at any moment, one with a
/// duration once its window has opened.
fn may_end(s: &WorldState, fault: MenuFault) -> bool {
    s.env.ending.iter().find(|f| f.fault == fault).is_none_or(|f| f.earliest_ticks == 0)
}

/// A fault starts: one with a duration starts counting down to its end.
fn begin(cfg: &WorldConfig, s: &mut WorldState, fault: MenuFault) {
    s.env.faults_left -= 1;
    if let Some(d) = cfg.faults.duration(fault) {
        let ticks = |t: crate::policy::Ticks| u8::try_from(t).expect("fault durations fit the state");
        let ending = Ending { fault, earliest_ticks: ticks(d.lo), latest_ticks: ticks(d.hi) };
        let at = s.env.ending.partition_point(|f| *f < ending);
        s.env.ending.insert(at, ending);
    }
}

/// A fault ends.
fn end(s: &mut WorldState, fault: MenuFault) {
    s.env.ending.retain(|f| f.fault != fault);
}

/// A tick of compaction on every node that is up, when debt is node state.
pub fn compact(cfg: &WorldConfig, s: &mut WorldState) {
    if !cfg.compaction.dynamic() || s.nodes.iter().all(|n| !n.up || n.debt_pct == 0) {
        return;
    }
    for n in Shared::make_mut(&mut s.nodes).iter_mut().filter(|n| n.up) {
        n.debt_pct = crate::protocol::compaction::debt_after_tick(&cfg.compaction, n.debt_pct);
    }
}

pub fn fault_actions(cfg: &WorldConfig, s: &WorldState, actions: &mut Vec<Action>) {
    let budget = s.env.faults_left > 0;
    for &n in &cfg.faults.crash {
        let up = s.nodes[usize::from(n)].up;
        if up && budget {
            actions.push(Action::Crash(n));
        }
        if !up && may_end(s, MenuFault::Crash(n)) {
            actions.push(Action::Restart(n));
        }
    }
    if cfg.faults.crash_coordinator && budget {
        actions.push(Action::CoordinatorRestart);
    }
    for &z in &cfg.faults.partition {
        let cut = s.env.partitioned & (1 << z) != 0;
        if !cut && budget {
            actions.push(Action::Partition(z));
        }
        if cut && may_end(s, MenuFault::Partition(z)) {
            actions.push(Action::Heal(z));
        }
    }
    for i in 0..cfg.faults.degrade.len() as u8 {
        let on = s.env.degraded & (1 << i) != 0;
        if !on && budget {
            actions.push(Action::Degrade(i));
        }
        if on && may_end(s, MenuFault::Degrade(i)) {
            actions.push(Action::Restore(i));
        }
    }
    // A burst that ends may end at any moment; it uses no budget (it is no fault) and ends once.
    let unended = cfg.bursts_ending() & !s.env.bursts_ended;
    for p in (0..cfg.shards.len() as u8).filter(|p| unended & (1 << p) != 0) {
        actions.push(Action::BurstEnds(p));
    }
    if cfg.faults.drop && budget {
        let mut last = None;
        for e in &s.net {
            let lossy = cfg.lossy[usize::from(zone_of(cfg, e.src))][usize::from(zone_of(cfg, e.dst))];
            if lossy && last != Some(e) {
                actions.push(Action::Lose(*e));
            }
            last = Some(e);
        }
    }
}

pub fn apply_fault(cfg: &WorldConfig, s: &mut WorldState, fault: Action) {
    match fault {
        Action::Crash(n) => {
            begin(cfg, s, MenuFault::Crash(n));
            Shared::make_mut(&mut s.nodes)[usize::from(n)].up = false;
            // Every coordinator sees the crash.
            let all = ((1u16 << cfg.coordinators.len()) - 1) as u8;
            mark_faulted(s, n, all);
        }
        Action::Restart(n) => {
            end(s, MenuFault::Crash(n));
            Shared::make_mut(&mut s.nodes)[usize::from(n)].up = true
        }
        Action::CoordinatorRestart => {
            s.env.faults_left -= 1;
            let stage_cfg = cfg.for_stage(s.stage(0));
            let durable = s.coord.durable(stage_cfg);
            let mut coord = crate::protocol::Coordinator::recover(stage_cfg, 0, &durable);
            // The restarted router sees the background as it is now, not as configured.
            if s.env.bursts_ended != 0 {
                coord.on_background(&cfg.partition_background_after(s.env.bursts_ended));
            }
            s.coord = Shared::new(coord);
        }
        Action::BurstEnds(p) => {
            s.env.bursts_ended |= 1 << p;
            let background = cfg.partition_background_after(s.env.bursts_ended);
            // Every router sees the burst end.
            for c in 0..cfg.coordinators.len() as u8 {
                s.coordinator_mut(c).on_background(&background);
            }
        }
        Action::Partition(z) => {
            begin(cfg, s, MenuFault::Partition(z));
            // Per node, the coordinators it can reach.
            let reach = |s: &WorldState, zone: u8| {
                cfg.coordinators
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| connected(s, zone, c.zone))
                    .fold(0u8, |m, (c, _)| m | (1 << c))
            };
            let before: Vec<u8> = cfg.nodes.iter().map(|n| reach(s, n.zone)).collect();
            s.env.partitioned |= 1 << z;
            for (i, n) in cfg.nodes.iter().enumerate() {
                let lost = before[i] & !reach(s, n.zone);
                if lost != 0 {
                    mark_faulted(s, i as u8, lost);
                }
            }
        }
        Action::Heal(z) => {
            end(s, MenuFault::Partition(z));
            s.env.partitioned &= !(1 << z)
        }
        Action::Degrade(i) => {
            begin(cfg, s, MenuFault::Degrade(i));
            s.env.degraded |= 1 << i;
        }
        Action::Restore(i) => {
            end(s, MenuFault::Degrade(i));
            s.env.degraded &= !(1 << i)
        }
        other => unreachable!("not a fault: {other:?}"),
    }
}

/// Ghost: node `n` had a fault seen by the coordinators in `coordinators` (a bit each); until
/// one of them hears from its new epoch, its evicting the node is not evicting a healthy
/// replica.
fn mark_faulted(s: &mut WorldState, n: u8, coordinators: u8) {
    let i = usize::from(n);
    let g = s.ghost_mut();
    g.faulted_since_heard[i] |= coordinators;
    g.fault_epoch[i] += 1;
}

/// The rollout's steps: each coordinator may move to the next stage, or (with a rollback)
/// back to the previous one, at any moment, subject to the rollout's order. Not faults: they
/// spend no budget, and each coordinator goes forward, then at most back, so they end.
pub fn rollout_actions(cfg: &WorldConfig, s: &WorldState, actions: &mut Vec<Action>) {
    let Some(r) = &cfg.rollout else { return };
    // Compared as usize: no conversion per state (config keeps stages to ROLLOUT_STAGES_MAX).
    let last = r.stages.len() - 1;
    let waves = r.order == crate::config::RolloutOrder::StageByStage;
    let lowest = s.stages.iter().map(|st| st.index).min().unwrap_or(0);
    let highest = s.stages.iter().map(|st| st.index).max().unwrap_or(0);
    for (c, st) in s.stages.iter().enumerate() {
        if !st.back && usize::from(st.index) < last && (!waves || st.index == lowest) {
            actions.push(Action::Upgrade(c as u8));
        }
        if r.rollback && st.index > 0 && (!waves || st.index == highest) {
            actions.push(Action::Rollback(c as u8));
        }
    }
}

/// Coordinator `c` changes stage. Its state stays as it is: a policy reload, not a restart.
pub fn change_stage(cfg: &crate::config::Resolved, s: &mut WorldState, action: &Action, c: u8) {
    let from = s.stage(c);
    let st = &mut s.stages[usize::from(c)];
    match action {
        Action::Upgrade(_) => st.index += 1,
        Action::Rollback(_) => {
            st.index -= 1;
            st.back = true;
        }
        other => unreachable!("not a rollout step: {other:?}"),
    }
    let to = s.stage(c);
    s.coordinator_mut(c).reload(cfg.for_stage(from), cfg.for_stage(to));
}
