//! The rules over load: a hot shard on a slow node (RC019), the coordinator's backlog against
//! the deadline (RC020), routers that each count only their own writes (RC021).

use super::*;

pub(in crate::lint) fn hot_shard_stays_on_slow_node(i: &Input) -> Vec<String> {
    let (Some(s), Some(w)) = (i.scenario, i.world) else { return vec![] };
    let nodes = initial_node_loads(w);
    let mut out = Vec::new();
    for (k, shard) in w.shards.iter().enumerate().filter(|(_, shard)| shard.hot) {
        // With debt as node state any holder may become slow; otherwise the initial ones are.
        let slow: Vec<usize> = w.initial_members[k]
            .iter()
            .map(|&n| usize::from(n))
            .filter(|&n| nodes[n].slow || w.compaction.dynamic())
            .collect();
        let Some(&first) = slow.first() else { continue };
        let why = if w.compaction.dynamic() {
            format!("{} may fall behind on compaction under its writes", s.nodes[first].name)
        } else {
            format!(
                "it starts on {}, slow (compaction debt {}% above {}% while it hosts a hot shard)",
                s.nodes[first].name, nodes[first].compaction_debt_pct, w.slow_compaction_debt_pct
            )
        };
        let Some(r) = &i.policy.rebalance else {
            out.push(format!(
                "rebalance_enabled = false with hot shard {}: {why}, and nothing moves it off",
                shard.name
            ));
            continue;
        };
        if w.compaction.dynamic() {
            out.extend(debt_outruns_compaction(s, w, k));
            continue;
        }
        let shards: Vec<ShardLoad> = (0..w.shards.len())
            .map(|j| ShardLoad {
                shard: j as u8,
                holders: w.initial_members[j].clone(),
                size_pct: w.shards[j].size_pct,
                hot: w.shards[j].hot,
                resting: false,
            })
            .collect();
        let moves_off = rebalancer::choose_move(&nodes, &shards, &r.policy)
            .is_some_and(|m| usize::from(m.shard) == k && slow.contains(&usize::from(m.from)));
        if !moves_off {
            out.push(format!(
                "hot shard {}: {why}, and the rebalancer finds it no target (with disk_high_watermark = {}% and scoring = \"{}\" no other node can take it)",
                shard.name,
                r.policy.disk_high_watermark_pct,
                match r.policy.scoring {
                    rebalancer::Scoring::Disk => "disk",
                    rebalancer::Scoring::DiskAndCompaction => "disk_and_compaction",
                }
            ));
        }
    }
    out
}

/// With debt as node state: the hot shard's endless writers can add debt faster than a node
/// compacts it, so whichever node holds the shard falls behind. A move only takes the debt
/// along (the next node grows slow), and staying leaves it slow: no placement policy ends it.
fn debt_outruns_compaction(s: &Scenario, w: &crate::config::Resolved, k: usize) -> Option<String> {
    let per_write = u32::from(w.compaction.debt_per_write_pct);
    let drain = u32::from(w.compaction.debt_drain_pct_per_tick);
    let coordinator = |c: &crate::config::ClientSpec| s.coordinators[usize::from(c.coordinator)].zone;
    // A writer's fastest cycle: to its coordinator, to the replica and back, back to the
    // client, then its shortest think time (one write in flight at a time).
    let cycles: Vec<u32> = w
        .clients
        .iter()
        .enumerate()
        .filter(|(c, client)| {
            client.repeat
                && client.ops.contains(&OpKind::Write)
                && w.client_partitions[*c].contains(&(k as u8))
        })
        .map(|(_, client)| {
            let lo = |a: u8, b: u8| s.latency[usize::from(a)][usize::from(b)].lo;
            let to_node = w.initial_members[k]
                .iter()
                .map(|&n| lo(coordinator(client), s.nodes[usize::from(n)].zone))
                .min()
                .unwrap_or(0);
            let think = client.think_ticks.lo;
            (2 * lo(client.zone, coordinator(client)) + 2 * to_node + think).max(1)
        })
        .collect();
    // Debt per tick, in hundredths of a point: per_write / cycle, summed over the writers.
    let added: u32 = cycles.iter().map(|&cycle| per_write * 100 / cycle).sum();
    if cycles.is_empty() || added <= drain * 100 {
        return None;
    }
    Some(format!(
        "hot shard {}: its endless writers may apply a write every {} tick(s) ({}.{:02} points of compaction debt a tick at {per_write} a write) where a node compacts {drain} a tick, so whichever node holds it falls behind (slow above {}%): a move takes the debt along to the next node (the moves never end) and staying keeps it slow; no placement policy ends it, only more compaction or the shard's writes spread",
        w.shards[k].name,
        cycles.iter().min().expect("a writer"),
        added / 100,
        added % 100,
        w.slow_compaction_debt_pct
    ))
}

pub(in crate::lint) fn coordinator_backlog_within_deadline(i: &Input) -> Vec<String> {
    let (p, Some(s), Some(w)) = (i.policy, i.scenario, i.world) else { return vec![] };
    let Some(work) = w.coordinator.work else { return vec![] };
    if detector::health_after_deadline_miss(p.failure_detection) != Some(Health::Dead) || !evicts(p) {
        return vec![];
    }
    let rtt = worst_round_trip(s);
    // A replica blamed for a miss had its request sent before the deadline, so its reply comes
    // within a round trip of it: a down/out interval longer than that hears it before it is out.
    if p.recovery.down_out_interval_ticks > rtt.ticks {
        return vec![];
    }
    // The most work a request can wait behind while the eviction its miss asks for still goes
    // ahead: the ceiling (changes pause only above it), or without one a backlog of every
    // eviction the policy allows at once, each an update and a copy from every other replica.
    // In u32: a large update or copy cost times many evictions is past u16 (the backlog is not).
    let per_change =
        u32::from(work.membership_update_work) + u32::from(work.copy_work) * u32::from(p.replication_factor);
    let all_at_once = per_change * u32::from(p.eviction.max_concurrent_evictions.max(1));
    let no_ceiling_work = all_at_once.min(u32::from(work.backlog_work_max())) as u16;
    let load =
        p.eviction.coordinator_load_ceiling_work.unwrap_or(no_ceiling_work).min(work.backlog_work_max());
    let wait = coordinator_load::foreground_wait_ticks(work, load);
    if Ticks::from(wait) + rtt.ticks < p.replica_ack_timeout_ticks {
        return vec![];
    }
    // The largest ceiling whose wait still fits before the deadline.
    let fits = (0..=work.backlog_work_max())
        .take_while(|&c| {
            Ticks::from(coordinator_load::foreground_wait_ticks(work, c)) + rtt.ticks
                < p.replica_ack_timeout_ticks
        })
        .last();
    let advice = match fits {
        Some(c) => format!(
            "a coordinator_load_ceiling of at most {c} units keeps every such wait inside the deadline"
        ),
        None => "no ceiling does: the worst round trip alone reaches the deadline".into(),
    };
    let behind = match p.eviction.coordinator_load_ceiling_work {
        Some(c) => format!("coordinator_load_ceiling = {c}: a request may wait behind {c} units of the coordinator's own work"),
        None => format!("no coordinator_load_ceiling: a request may wait behind {load} units of the coordinator's own work (every eviction allowed at once)"),
    };
    vec![format!(
        "{behind}, {} at {} units per tick, and then take {}: {} in all, not below replica_ack_timeout = {}, and detection is coupled, so the miss the coordinator's own load caused evicts a healthy replica; {advice}",
        i.dur(Ticks::from(wait)),
        work.work_per_tick,
        rtt.describe(i),
        i.dur(Ticks::from(wait) + rtt.ticks),
        i.dur(p.replica_ack_timeout_ticks)
    )]
}

pub(in crate::lint) fn routers_overcommit_a_backend(i: &Input) -> Vec<String> {
    let (Some(s), Some(w)) = (i.scenario, i.world) else { return vec![] };
    let routers = w.coordinators.len();
    let r = &i.policy.routing;
    if routers < 2 || !w.backends_modelled || r.placement == Placement::Sorted {
        return vec![];
    }
    // Each router places the writes of its writing clients in one tick (a client has one
    // write in flight at a time) as placement does, one at a time, knowing only the load from
    // outside and its own: under spill_threshold where it can, and past it everywhere on the
    // least full backend that still admits one.
    let writers = |c: usize| {
        w.clients.iter().filter(|k| usize::from(k.coordinator) == c && k.ops.contains(&OpKind::Write)).count()
    };
    let placed: Vec<Vec<u16>> = (0..routers)
        .map(|c| {
            let mut own = vec![0u16; w.nodes.len()];
            for _ in 0..writers(c) {
                let loads: Vec<BackendLoad> = w
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(n, node)| BackendLoad {
                        node: n as NodeId,
                        up: true,
                        capacity_per_tick: node.write_capacity_per_tick,
                        load_per_tick: node.base_load_per_tick + own[n],
                    })
                    .collect();
                if let Some(b) = routing::choose_backend(r, &loads) {
                    own[usize::from(b)] += 1;
                }
            }
            own
        })
        .collect();
    let mut out = Vec::new();
    for (n, node) in w.nodes.iter().enumerate() {
        let Some(cap) = node.write_capacity_per_tick else { continue };
        let each: Vec<u16> = placed.iter().map(|own| own[n]).collect();
        let offered = node.base_load_per_tick + each.iter().sum::<u16>();
        if offered <= cap || each.iter().filter(|&&k| k > 0).count() < 2 {
            continue;
        }
        let shares: Vec<String> = each
            .iter()
            .enumerate()
            .filter(|(_, &k)| k > 0)
            .map(|(c, k)| format!("{} puts {k}", w.coordinators[c].name))
            .collect();
        out.push(format!(
            "{routers} routers each count only the writes they placed: in one tick, with their clients' writes placed by spill_threshold = {:?}, {} on {} (capacity {cap}, {} from outside), so together they offer it {offered}",
            f64::from(r.spill_threshold_permille) / 1000.0,
            shares.join(" and "),
            s.nodes[n].name,
            node.base_load_per_tick
        ));
    }
    out
}
