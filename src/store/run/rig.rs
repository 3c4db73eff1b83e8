//! The run's environment: the fault schedule from the model's menu, and the rig that applies
//! faults to the cluster's proxies and processes and undoes them.

use super::*;
use crate::config::MenuFault;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One fault of the schedule, as applied.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Fault {
    Crash(NodeId),
    /// The coordinator crashes and a new one starts from what it saved.
    CoordinatorCrash,
    Partition(u8),
    /// `faults.degrade[index]`.
    Degrade {
        index: u8,
        zones: (u8, u8),
        latency: LatencyTicks,
        text: String,
    },
    Drop,
}

impl Fault {
    /// How `--faults` names it: `crash:n2`, `crash:coordinator`, `partition:b`,
    /// `degrade:a-b`, `drop`.
    pub(crate) fn name(&self, scenario: &Scenario) -> String {
        let zone = |z: u8| scenario.zones[usize::from(z)].clone();
        match self {
            Fault::Crash(node) => format!("crash:{}", scenario.nodes[usize::from(*node)].name),
            Fault::CoordinatorCrash => "crash:coordinator".into(),
            Fault::Partition(z) => format!("partition:{}", zone(*z)),
            Fault::Degrade { zones, .. } => format!("degrade:{}-{}", zone(zones.0), zone(zones.1)),
            Fault::Drop => "drop".into(),
        }
    }

    /// The fault as the model's menu names it, where it may carry a duration.
    pub(crate) fn on_menu(&self) -> Option<MenuFault> {
        match self {
            Fault::Crash(node) => Some(MenuFault::Crash(*node)),
            Fault::Partition(zone) => Some(MenuFault::Partition(*zone)),
            Fault::Degrade { index, .. } => Some(MenuFault::Degrade(*index)),
            Fault::CoordinatorCrash | Fault::Drop => None,
        }
    }

    /// How long the fault lasts in this run (ms), drawn from the model's `duration` window
    /// as the checker may choose any moment of it; `None`: until the heal.
    pub(crate) fn drawn_duration_ms(
        &self,
        scenario: &Scenario,
        ms_per_tick: u64,
        rng: &mut StdRng,
    ) -> Option<u64> {
        let window = scenario.faults.duration(self.on_menu()?)?;
        let ticks = rng.random_range(window.lo..=window.hi);
        Some(u64::from(ticks) * ms_per_tick)
    }
}

/// What the run does to the cluster at a moment of its timeline.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Fault(Fault),
    /// A fault with a duration ends by itself.
    End(Fault),
    Heal,
    /// Step `i` of the rollout (`RolloutRun::steps`).
    Rollout(usize),
}

impl Step {
    /// Which goes first when two steps fall on one moment.
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Step::Fault(_) => 0,
            Step::End(_) => 1,
            Step::Heal => 2,
            Step::Rollout(_) => 3,
        }
    }
}

/// The run's timeline: each scheduled fault at its start, the end of each one that has a
/// duration, the heal (at `heal_at_ms`, or once the last timed fault has ended) and the
/// rollout's steps, in order (at a tie: faults, ends, the heal, then a rollout step).
pub(super) fn timeline(
    scenario: &Scenario,
    faults: &[Fault],
    duration_ms: u64,
    ms_per_tick: u64,
    seed: u64,
    rollout_times_ms: &[u64],
) -> Result<(Vec<(u64, Step)>, u64), String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xfa17_5eed);
    let mut steps: Vec<(u64, Step)> = Vec::new();
    let mut last_end_ms = 0;
    for (i, fault) in faults.iter().cloned().enumerate() {
        let start_ms = duration_ms * (CALM_PERMILLE + FAULT_STAGGER_PERMILLE * i as u64) / 1000;
        if let Some(lasts_ms) = fault.drawn_duration_ms(scenario, ms_per_tick, &mut rng) {
            let end_ms = start_ms + lasts_ms;
            last_end_ms = last_end_ms.max(end_ms);
            steps.push((end_ms, Step::End(fault.clone())));
        }
        steps.push((start_ms, Step::Fault(fault)));
    }
    // The heal waits for the timed faults: the model lets each last its full window.
    let heal_at_ms = (duration_ms * HEAL_PERMILLE / 1000).max(last_end_ms);
    if heal_at_ms >= duration_ms {
        return Err(format!(
            "a fault of the model lasts until {heal_at_ms} ms into a run of {duration_ms} ms: run longer (--duration) or scale time down (--time-scale)"
        ));
    }
    steps.push((heal_at_ms, Step::Heal));
    steps.extend(rollout_times_ms.iter().enumerate().map(|(i, &at)| (at, Step::Rollout(i))));
    steps.sort_by_key(|(at, step)| (*at, step.rank()));
    Ok((steps, heal_at_ms))
}

/// The scheduled faults, at most `budget`: those `--faults` names, in its order, or else the
/// first of each kind on the menu (crash, partition, degrade, drop), then the second of each,
/// and so on, so that a budget of two on a menu of crashes and partitions gives one of each
/// rather than two crashes.
pub(super) fn schedule(scenario: &Scenario, chosen: &[String]) -> Result<Vec<Fault>, String> {
    let menu = menu(scenario);
    if chosen.is_empty() {
        let kinds = menu;
        let rounds = kinds.iter().map(Vec::len).max().unwrap_or(0);
        let mut picked: Vec<Fault> = (0..rounds)
            .flat_map(|round| kinds.iter().filter_map(move |kind| kind.get(round).cloned()))
            .collect();
        picked.truncate(usize::from(scenario.faults.budget));
        return Ok(picked);
    }
    if chosen == ["none"] {
        return Ok(Vec::new());
    }
    if chosen.iter().any(|c| c.trim() == "none") {
        return Err(format!(
            "--faults {}: `none` means no fault and stands alone; name the faults without it",
            chosen.join(",")
        ));
    }
    let all: Vec<Fault> = menu.into_iter().flatten().collect();
    let names: Vec<String> = all.iter().map(|f| f.name(scenario)).collect();
    let mut picked = Vec::new();
    for name in chosen {
        let at = names.iter().position(|n| n == name.trim()).ok_or_else(|| {
            format!("--faults {name}: not on the model's fault menu; it has: {}", names.join(", "))
        })?;
        if picked.contains(&all[at]) {
            return Err(format!("--faults {name}: named twice (each fault of the menu happens once)"));
        }
        picked.push(all[at].clone());
    }
    let budget = usize::from(scenario.faults.budget);
    if picked.len() > budget {
        return Err(format!(
            "--faults names {} faults; the model's `faults.budget` is {budget}: the model injects at most that many in one behaviour",
            picked.len()
        ));
    }
    Ok(picked)
}

/// The model's fault menu by kind: crashes, partitions, degradations, drop.
pub(crate) fn menu(scenario: &Scenario) -> [Vec<Fault>; 4] {
    let f = &scenario.faults;
    [
        f.crash
            .iter()
            .map(|n| Fault::Crash(*n))
            .chain(f.crash_coordinator.then_some(Fault::CoordinatorCrash))
            .collect(),
        f.partition.iter().map(|z| Fault::Partition(*z)).collect(),
        f.degrade
            .iter()
            .enumerate()
            .map(|(i, d)| Fault::Degrade {
                index: i as u8,
                zones: d.zones,
                latency: d.latency,
                text: d.text.clone(),
            })
            .collect(),
        if f.drop { vec![Fault::Drop] } else { Vec::new() },
    ]
}

/// The store a run plays the model on: the quorum family's cluster, or the leader family's
/// (as the policy's `replication` says).
pub(super) enum Store {
    Quorum(Box<Cluster>),
    Leader(Box<LeaderCluster>),
}

impl Store {
    fn kill(&mut self, node: NodeId) -> Result<(), String> {
        match self {
            Store::Quorum(c) => c.kill(node),
            Store::Leader(c) => c.kill(node),
        }
    }

    fn restart(&mut self, node: NodeId) -> Result<(), String> {
        match self {
            Store::Quorum(c) => c.restart(node),
            Store::Leader(c) => c.restart(node),
        }
    }

    fn is_running(&self, node: NodeId) -> bool {
        match self {
            Store::Quorum(c) => c.is_running(node),
            Store::Leader(c) => c.is_running(node),
        }
    }

    fn restart_coordinator(&mut self) -> Result<(), String> {
        match self {
            Store::Quorum(c) => c.restart_coordinator(),
            Store::Leader(c) => c.restart_manager(),
        }
    }

    /// Where a final read asks (the first coordinator, without a proxy).
    pub(super) fn client_addr(&self) -> std::net::SocketAddr {
        match self {
            Store::Quorum(c) => c.client_addr(),
            Store::Leader(c) => c.client_addr(),
        }
    }

    pub(super) fn info(&self) -> String {
        match self {
            Store::Quorum(c) => c.info(),
            Store::Leader(c) => c.info(),
        }
    }

    /// The quorum family's cluster: only it has a decision log, a trace, several coordinators
    /// and live policy reloads.
    pub(super) fn quorum(&self) -> Option<&Cluster> {
        match self {
            Store::Quorum(c) => Some(c),
            Store::Leader(_) => None,
        }
    }
}

/// A link the run controls: its proxy, the zones of its two ends, and the node at one end.
pub(super) struct Link {
    pub(super) proxy: ProxyHandle,
    pub(super) zones: (u8, u8),
    pub(super) node: Option<NodeId>,
}

/// Everything `run_store` starts, so that faults can be applied and undone.
pub(super) struct Rig<'a> {
    pub(super) scenario: &'a Scenario,
    pub(super) cluster: Store,
    /// The clients' links to coordinator `c` go through `client_proxies[c]`.
    pub(super) client_proxies: Vec<Proxy>,
    pub(super) ms_per_tick: u64,
    pub(super) started: Instant,
    /// First time (ms since start) each node was crashed or cut off by the schedule.
    pub(super) node_faulted_at_ms: BTreeMap<NodeId, u64>,
    /// The faults in force, in the order they started (the heal clears them).
    pub(super) active: Vec<Fault>,
    /// Since when (ms since start) no fault has been in force, once the first one happened
    /// (a coordinator crash is over once it restarted).
    pub(super) faults_over_at_ms: Option<u64>,
    /// The run's schedule.
    pub(super) faults: Vec<Fault>,
    pub(super) events: Vec<Event>,
    pub(super) promotions: PromotionWatch,
}

/// Leader family: INFO's `promotions` and `late_epoch_acks` when last looked at, each
/// promotion seen (ms, the partitions' routes after it), and the late acks over every start
/// of the coordinator (a restarted coordinator counts from zero again).
#[derive(Default)]
pub(crate) struct PromotionWatch {
    promotions_seen: u64,
    pub(crate) promotions: Vec<(u64, String)>,
    late_epoch_acks_seen: u64,
    pub(crate) late_epoch_acks: u64,
}

impl PromotionWatch {
    /// Look at the coordinator's INFO at `at_ms`: the promotions since the last look, as the
    /// timeline's line, if there were any.
    pub(crate) fn look(&mut self, info: &str, at_ms: u64, scenario: &Scenario) -> Option<String> {
        let counters = info_counters(info);
        let since = |seen: &mut u64, name: &str| {
            let now = counters.get(name).copied().unwrap_or(0);
            let new = if now >= *seen { now - *seen } else { now };
            *seen = now;
            new
        };
        self.late_epoch_acks += since(&mut self.late_epoch_acks_seen, "late_epoch_acks");
        let promoted = since(&mut self.promotions_seen, "promotions");
        if promoted == 0 {
            return None;
        }
        let routes: Vec<String> = info
            .lines()
            .filter_map(|line| line.trim().strip_prefix("partition_"))
            .map(|route| leader_route_text(route, scenario))
            .collect();
        let what = format!("PROMOTION ({promoted} since the last look): {}", routes.join("; "));
        self.promotions.push((at_ms, what.clone()));
        Some(what)
    }
}

impl Rig<'_> {
    pub(super) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub(super) fn event(&mut self, what: String) {
        let at_ms = self.now_ms();
        self.events.push(Event { at_ms, what });
    }

    pub(super) fn link_latency(&self, a: u8, b: u8) -> LatencyTicks {
        self.scenario.latency[usize::from(a)][usize::from(b)]
    }

    pub(super) fn set_latency(&self, proxy: &ProxyHandle, latency: LatencyTicks) -> Result<(), String> {
        proxy.set_latency_ms(
            u64::from(latency.lo) * self.ms_per_tick,
            u64::from(latency.hi) * self.ms_per_tick,
        )
    }

    /// The zone the clients of coordinator `c` are in (its first client's; the coordinator's
    /// own if it has none).
    pub(super) fn client_zone(&self, c: u8) -> u8 {
        let s = self.scenario;
        s.clients
            .iter()
            .find(|cl| cl.coordinator == c)
            .map_or(s.coordinators[usize::from(c)].zone, |cl| cl.zone)
    }

    /// Every link the run controls, with the zones at its two ends: each coordinator's links
    /// to the nodes, its clients' link to it, and its links to the other coordinators; in the
    /// leader family every link between two machines, each way (a primary sends its followers
    /// their appends itself).
    pub(super) fn links(&self) -> Vec<Link> {
        let s = self.scenario;
        let mut links = Vec::new();
        for (c, place) in s.coordinators.iter().enumerate() {
            let c8 = c as u8;
            let proxy = self.client_proxies[c].handle();
            links.push(Link { proxy, zones: (self.client_zone(c8), place.zone), node: None });
            let Store::Quorum(cluster) = &self.cluster else { continue };
            for (n, node) in s.nodes.iter().enumerate() {
                let proxy = cluster.proxy_of(c8, n as NodeId);
                links.push(Link { proxy, zones: (place.zone, node.zone), node: Some(n as NodeId) });
            }
            for (d, other) in s.coordinators.iter().enumerate() {
                if let Some(proxy) = cluster.peer_proxy(c8, d as u8) {
                    links.push(Link { proxy, zones: (place.zone, other.zone), node: None });
                }
            }
        }
        if let Store::Leader(cluster) = &self.cluster {
            let ends: Vec<Endpoint> =
                (0..s.nodes.len() as NodeId).map(Endpoint::Node).chain([Endpoint::LEADER]).collect();
            let zone = |e: Endpoint| match e {
                Endpoint::Node(n) => s.nodes[usize::from(n)].zone,
                _ => s.coordinators[0].zone,
            };
            for &from in &ends {
                for &to in ends.iter().filter(|&&to| to != from) {
                    let proxy = cluster.link(from, to).expect("store run starts every link with a proxy");
                    // A node at either end: the first one is the one a fault touches first.
                    let node = [from, to].into_iter().find_map(|e| match e {
                        Endpoint::Node(n) => Some(n),
                        _ => None,
                    });
                    links.push(Link { proxy, zones: (zone(from), zone(to)), node });
                }
            }
        }
        links
    }

    /// Leader family: look at the coordinator's INFO for promotions and deposed primaries'
    /// acks since the last look (a restarted coordinator counts from zero again), and put each
    /// promotion on the timeline with the routes it left (the run's `converges` counts those
    /// after the settle point).
    pub(super) fn watch_promotions(&mut self) {
        let Store::Leader(cluster) = &self.cluster else { return };
        let info = cluster.info();
        let at_ms = self.now_ms();
        if let Some(what) = self.promotions.look(&info, at_ms, self.scenario) {
            self.events.push(Event { at_ms, what });
        }
    }

    pub(super) fn mark_faulted(&mut self, node: NodeId) {
        let now = self.now_ms();
        self.node_faulted_at_ms.entry(node).or_insert(now);
    }

    /// A fault's moment, in the trace and on the timeline (`what`) alike: one reading of the
    /// clock (both count from the run's start), so the two agree to the millisecond.
    pub(super) fn record(&mut self, fault: TraceFault, what: String) {
        let at_ms = self.now_ms();
        if let Some(t) = self.cluster.quorum().and_then(Cluster::trace) {
            t.fault_at(at_ms, fault);
        }
        self.events.push(Event { at_ms, what });
    }

    pub(super) fn apply(&mut self, fault: &Fault) -> Result<(), String> {
        let zone = |i: u8| self.scenario.zones[usize::from(i)].clone();
        let (traced, what) = match fault {
            Fault::Crash(node) => (
                TraceFault::Crash { node: *node },
                format!("FAULT crash {}", self.scenario.nodes[usize::from(*node)].name),
            ),
            Fault::CoordinatorCrash => (
                TraceFault::CoordinatorRestart,
                "FAULT the coordinator crashes and restarts with what it saved".to_string(),
            ),
            Fault::Partition(z) => {
                (TraceFault::Partition { zone: *z }, format!("FAULT zone {} partitioned", zone(*z)))
            }
            Fault::Degrade { index, zones, text, .. } => (
                TraceFault::Degrade { index: *index },
                format!("FAULT link {}<->{} degraded to {text} one way", zone(zones.0), zone(zones.1)),
            ),
            Fault::Drop => (TraceFault::Drop, format!("FAULT lossy links drop {DROP_PERMILLE}/1000 chunks")),
        };
        self.active.push(fault.clone());
        self.faults_over_at_ms = None;
        if let Fault::CoordinatorCrash = fault {
            // What the coordinator counted is lost with it: read it first (and its promotions
            // go on the timeline before the crash).
            self.watch_promotions();
        }
        // Before the fault: a message it loses is then excused by it.
        self.record(traced, what);
        match fault {
            Fault::Crash(node) => {
                self.cluster.kill(*node)?;
                self.mark_faulted(*node);
            }
            Fault::CoordinatorCrash => {
                self.cluster.restart_coordinator()?;
                self.note_if_faults_over();
            }
            Fault::Partition(zone) => {
                for link in self.links() {
                    if (link.zones.0 == *zone) != (link.zones.1 == *zone) {
                        link.proxy.set_partitioned(true);
                        if let Some(node) = link.node {
                            self.mark_faulted(node);
                        }
                    }
                }
            }
            Fault::Degrade { zones, latency, .. } => {
                for link in self.links() {
                    let (a, b) = link.zones;
                    if (a, b) == *zones || (b, a) == *zones {
                        self.set_latency(&link.proxy, *latency)?;
                    }
                }
            }
            Fault::Drop => {
                let lossy = &self.scenario.lossy;
                for link in self.links() {
                    if lossy[usize::from(link.zones.0)][usize::from(link.zones.1)] {
                        link.proxy.set_drop_permille(DROP_PERMILLE)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Every link at its scenario latency, no loss, no partition.
    pub(super) fn set_scenario_links(&self) -> Result<(), String> {
        for link in self.links() {
            link.proxy.clear();
            self.set_latency(&link.proxy, self.link_latency(link.zones.0, link.zones.1))?;
        }
        Ok(())
    }

    /// A fault with a duration ends by itself: the node restarts, the zone's links carry
    /// traffic again, the link's latency is back, each as far as no other fault in force
    /// still holds it. Nothing to do if the heal came first.
    pub(super) fn end(&mut self, fault: &Fault, lasted_ms: u64) -> Result<(), String> {
        let Some(at) = self.active.iter().position(|f| f == fault) else {
            return Ok(());
        };
        self.active.remove(at);
        let lasted = crate::config::duration::format_ms(lasted_ms);
        match fault {
            Fault::Crash(node) => {
                if !self.cluster.is_running(*node) {
                    self.cluster.restart(*node)?;
                }
                // Once it listens again (a restart takes a while, the model's is at once): a
                // request sent before that is lost to the crash, not by an up node.
                let name = &self.scenario.nodes[usize::from(*node)].name;
                self.record(
                    TraceFault::Restart { node: *node },
                    format!("END {name} restarts (down {lasted})"),
                );
            }
            Fault::Partition(zone) => {
                let name = &self.scenario.zones[usize::from(*zone)];
                self.record(
                    TraceFault::Healed { zone: *zone },
                    format!("END zone {name} reachable again (cut {lasted})"),
                );
                for link in self.links() {
                    let crosses = |z: u8| (link.zones.0 == z) != (link.zones.1 == z);
                    let still_cut =
                        self.active.iter().any(|f| matches!(f, Fault::Partition(z) if crosses(*z)));
                    if crosses(*zone) && !still_cut {
                        link.proxy.set_partitioned(false);
                    }
                }
            }
            Fault::Degrade { index, zones, .. } => {
                let z = |i: u8| self.scenario.zones[usize::from(i)].clone();
                let what = format!(
                    "END link {}<->{} back to its latency (degraded {lasted})",
                    z(zones.0),
                    z(zones.1)
                );
                self.record(TraceFault::Restored { index: *index }, what);
                let on = |(a, b): (u8, u8), z: (u8, u8)| (a, b) == z || (b, a) == z;
                for link in self.links() {
                    if !on(link.zones, *zones) {
                        continue;
                    }
                    let base = self.link_latency(link.zones.0, link.zones.1);
                    let latency = self
                        .active
                        .iter()
                        .filter_map(|f| match f {
                            Fault::Degrade { zones: z, latency, .. } if on(link.zones, *z) => Some(*latency),
                            _ => None,
                        })
                        .fold(base, |worst, l| if l.hi > worst.hi { l } else { worst });
                    self.set_latency(&link.proxy, latency)?;
                }
            }
            Fault::CoordinatorCrash | Fault::Drop => unreachable!("a fault without a duration ended"),
        }
        self.note_if_faults_over();
        Ok(())
    }

    /// Record the moment the last fault in force is over.
    fn note_if_faults_over(&mut self) {
        if self.active.iter().all(|f| *f == Fault::CoordinatorCrash) && self.faults_over_at_ms.is_none() {
            self.faults_over_at_ms = Some(self.now_ms());
        }
    }

    /// Every fault undone: links as in the scenario, crashed nodes restarted.
    pub(super) fn heal(&mut self) -> Result<(), String> {
        self.active.clear();
        self.set_scenario_links()?;
        for node in 0..self.scenario.nodes.len() as NodeId {
            if !self.cluster.is_running(node) {
                self.cluster.restart(node)?;
            }
        }
        let what = if self.faults.is_empty() {
            "HEAL (no fault was scheduled: the load goes on)"
        } else {
            "HEAL every fault undone"
        };
        self.record(TraceFault::Heal, what.into());
        if !self.faults.is_empty() {
            self.note_if_faults_over();
        }
        Ok(())
    }
}

/// A leader route as INFO shows it (`s1:epoch=2,primary=1,in_sync=0|1,failover=none`) with the
/// model's node names (`s1: epoch 2, primary n2, in sync n1 n2`).
fn leader_route_text(route: &str, scenario: &Scenario) -> String {
    let name = |n: &str| {
        n.parse::<usize>().ok().and_then(|i| scenario.nodes.get(i)).map_or(n.to_string(), |x| x.name.clone())
    };
    let Some((shard, fields)) = route.split_once(':') else { return route.to_string() };
    let mut parts = vec![format!("{shard}:")];
    for field in fields.split(',') {
        match field.split_once('=') {
            Some(("epoch", e)) => parts.push(format!("epoch {e}")),
            Some(("primary", n)) => parts.push(format!("primary {}", name(n))),
            Some(("in_sync", set)) => {
                let members: Vec<String> = set.split('|').filter(|m| !m.is_empty()).map(name).collect();
                parts.push(format!("in sync {}", members.join(" ")))
            }
            Some(("failover", "under_way")) => parts.push("failover under way".into()),
            _ => {}
        }
    }
    parts.join(" ")
}

/// The client threads of a run, and what each plays.
/// Client threads of a model without a capacity, unless `--clients` says otherwise.
pub const CLIENT_THREADS_DEFAULT: usize = 3;

pub(crate) struct Workload {
    pub(crate) threads: usize,
    /// The model has a capacity: one thread per model client, whatever `--clients` says.
    pub(crate) rate_checked: bool,
    pub(crate) roles: Vec<ClientRole>,
}

impl Workload {
    /// One role per model client. Clients whose keys land on the same partition through the
    /// same suffix (same shard, and `key_hash` the same modulo `write_shard_suffixes`) share
    /// keys, as they share a register in the model (its register is the partition); each group
    /// gets `keys / groups` keys (at least one), of its first client's hash. A client with
    /// `key_hash = "any"` writes keys of any hash.
    /// `asked`: the keys, the share of writes (thousandths) and the client threads asked for.
    pub(crate) fn of_model(
        scenario: &Scenario,
        layout: &Layout,
        (keys, write_permille, clients): (usize, u16, Option<usize>),
        ms_per_tick: u64,
        write_shard_suffixes: u8,
    ) -> Workload {
        let group_of = |c: &crate::config::ClientSpec| {
            (c.shard, c.key_hash.map(|h| routing::write_suffix(h, write_shard_suffixes)))
        };
        let mut groups: Vec<(u8, Option<u8>)> = scenario.clients.iter().map(group_of).collect();
        groups.sort_unstable();
        groups.dedup();
        // The hash a group's keys have: its first client's.
        let hash_of = |group: (u8, Option<u8>)| {
            scenario.clients.iter().find(|c| group_of(c) == group).and_then(|c| c.key_hash)
        };
        let keys_per_group = (keys / groups.len().max(1)).max(1);
        let keys_of = |shard: u8, hash: Option<routing::KeyHash>| -> Vec<String> {
            let name = &layout.shards[usize::from(shard)].name;
            (0u32..)
                .map(|j| format!("{name}:{j}"))
                .filter(|key| hash.is_none_or(|h| routing::key_hash(key.as_bytes()) == h))
                .take(keys_per_group)
                .collect()
        };
        let roles: Vec<ClientRole> = scenario
            .clients
            .iter()
            .map(|c| {
                let (reads, writes) = (c.ops.contains(&OpKind::Read), c.ops.contains(&OpKind::Write));
                ClientRole {
                    keys: keys_of(c.shard, hash_of(group_of(c))),
                    write_permille: match (reads, writes) {
                        (true, true) => write_permille,
                        (false, _) => 1000,
                        (true, false) => 0,
                    },
                    think_lo_ms: u64::from(c.think_ticks.lo) * ms_per_tick,
                    think_hi_ms: u64::from(c.think_ticks.hi) * ms_per_tick,
                    // Set once the coordinators' client proxies are up.
                    addr: None,
                }
            })
            .collect();
        let has_capacity = layout.partition_write_capacity_per_window.is_some()
            || layout.table_write_capacity_per_window.is_some()
            || layout.backends_modelled();
        let threads = if has_capacity { roles.len() } else { clients.unwrap_or(CLIENT_THREADS_DEFAULT) };
        Workload { threads, rate_checked: has_capacity, roles }
    }

    pub(crate) fn key_count(&self) -> usize {
        let mut keys: Vec<&String> = self.roles.iter().flat_map(|r| &r.keys).collect();
        keys.sort_unstable();
        keys.dedup();
        keys.len()
    }
}
