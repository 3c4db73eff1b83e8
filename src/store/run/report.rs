//! The run's report: each property beside the model's verdict, and why they differ.

use super::*;

/// The model's worst cases for a node no fault crashed or cut off, in real ms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelBounds {
    /// Per node: twice the worst one-way latency between the coordinator's zone and the
    /// node's, the fault menu's degradations included.
    pub round_trip_max_ms: Vec<u64>,
    /// `heartbeat_interval` (pings go out that often under independent detection).
    pub heartbeat_interval_ms: u64,
    pub dead_after_ms: u64,
    pub ack_timeout_ms: u64,
    pub independent: bool,
}

impl ModelBounds {
    pub(super) fn of(scenario: &Scenario, policy: &Policy, ms_per_tick: u64) -> ModelBounds {
        let coordinator = scenario.coordinator.zone;
        ModelBounds {
            round_trip_max_ms: scenario
                .nodes
                .iter()
                .map(|n| 2 * u64::from(scenario.worst_latency_ticks(n.zone, coordinator)) * ms_per_tick)
                .collect(),
            heartbeat_interval_ms: u64::from(policy.heartbeat_interval_ticks),
            dead_after_ms: u64::from(policy.dead_after_ticks),
            ack_timeout_ms: u64::from(policy.replica_ack_timeout_ticks),
            independent: policy.failure_detection == FailureDetection::Independent,
        }
    }

    /// The longest silence of a reachable node in the model: the next ping goes out one
    /// heartbeat interval after the last, and its pong may take the worst round trip.
    pub fn silence_max_ms(&self, node: NodeId) -> Option<u64> {
        let rtt = self.round_trip_max_ms.get(usize::from(node))?;
        self.independent.then_some(self.heartbeat_interval_ms + rtt)
    }
}

pub(super) fn model_verdicts(
    scenario: &Scenario,
    req: &RunRequest,
    label: &str,
    check_model: ModelChecker,
) -> Result<Vec<(PropertyName, Found)>, crate::config::ConfigError> {
    match req.model_verdicts {
        ModelVerdicts::Skip => Ok(Vec::new()),
        ModelVerdicts::Declared => {
            let variant = scenario.variant(label).expect("chosen above");
            Ok(variant
                .expect
                .iter()
                .map(|(p, v)| (*p, if *v == config::Verdict::Holds { Found::Holds } else { Found::Violated }))
                .collect())
        }
        ModelVerdicts::Check => check_model(&req.model, req.policy.as_deref(), label),
    }
}

/// Why the store and the model disagree on a property, in one line: what was measured where
/// the run measures the cause, else what usually explains it.
pub(super) fn disagreement(
    property: PropertyName,
    store: Found,
    model: Found,
    o: &RunOutcome,
    scenario: &Scenario,
) -> String {
    if (property, store, model) == (PropertyName::NoHealthyEviction, Found::Violated, Found::Holds) {
        return healthy_eviction_facts(o, scenario);
    }
    if o.rollout && (store, model) == (Found::Holds, Found::Violated) {
        // A rollout's counterexample hangs on when each coordinator reloads relative to the
        // writes, reads and faults; a run plays one order at evenly spread moments.
        return "the model found a moment for a coordinator's reload (with the writes, reads and faults around it) that violates it; this run's one order and moments did not hit it (another --rollout-order, --duration or --time-scale moves them)".into();
    }
    disagreement_usual(property, store, model).to_string()
}

/// For each node evicted while healthy: why the detector declared it dead, and its round
/// trips and silence against the model's bounds. Delays are said to exceed the model's range
/// only when a round trip was measured above it.
pub(super) fn healthy_eviction_facts(o: &RunOutcome, scenario: &Scenario) -> String {
    let b = &o.bounds;
    let mut nodes: Vec<(NodeId, Option<DeathEvidence>)> = Vec::new();
    for (e, because) in o.evictions.iter().zip(&o.evicted_because) {
        if e.healthy && !nodes.iter().any(|(n, _)| *n == e.node) {
            nodes.push((e.node, *because));
        }
    }
    let facts: Vec<String> = nodes
        .iter()
        .map(|&(node, because)| {
            let name = &scenario.nodes[usize::from(node)].name;
            let link = o.links.get(usize::from(node)).copied().unwrap_or_default();
            let rtt_max_ms = b.round_trip_max_ms.get(usize::from(node)).copied().unwrap_or(0);
            let verdict = match because {
                Some(DeathEvidence::Silence { silence_ms }) => {
                    format!("declared dead after {silence_ms} ms of silence (dead_after {} ms)", b.dead_after_ms)
                }
                Some(DeathEvidence::DeadlineMiss) => {
                    format!("declared dead for missing a {} ms ack deadline (coupled detection)", b.ack_timeout_ms)
                }
                None => "declared dead (no verdict in the decision log)".to_string(),
            };
            let delays = if link.max_round_trip_ms > rtt_max_ms {
                format!(
                    "its round trips (the node's own processing included) reached {} ms, {} ms above the model's worst {rtt_max_ms} ms: real delays exceeded the model's latency range",
                    link.max_round_trip_ms,
                    link.max_round_trip_ms - rtt_max_ms
                )
            } else {
                format!(
                    "its round trips stayed within the model's worst ({} ms <= {rtt_max_ms} ms), so the delays were the model's",
                    link.max_round_trip_ms
                )
            };
            let silence = match b.silence_max_ms(node) {
                Some(bound_ms) => format!(
                    "; its longest silence was {} ms, the model's bound for a reachable node {bound_ms} ms (heartbeat_interval + worst round trip)",
                    link.max_silence_ms
                ),
                None => String::new(),
            };
            format!("{name} {verdict}; {delays}{silence}")
        })
        .collect();
    if facts.is_empty() {
        return "a node was evicted although the schedule never crashed or cut it off".into();
    }
    facts.join("; ")
}

pub(super) fn disagreement_usual(property: PropertyName, store: Found, model: Found) -> &'static str {
    match (property, store, model) {
        (_, Found::Holds, Found::Violated) => {
            "the model found a schedule that violates it; this run's one schedule did not hit it (run longer, or the timing it needs, a fault's moment or writes that meet in one window, did not occur)"
        }
        (PropertyName::Converges, Found::Violated, Found::Holds) => {
            "an eviction or move started late in the healed phase or was still catching up at the end: if it followed a fault, detection (dead_after) and the catch-up copy need more time than half the healed phase (run longer); if it repeats, the store oscillates where the model settles"
        }
        (PropertyName::OpsComplete, Found::Violated, Found::Holds) => {
            "an operation begun before the heal was still being retried when the load ended: the policy's retries outlasted the run (run longer), or the store kept refusing it"
        }
        (PropertyName::NoDuplicateEffects, Found::Violated, Found::Holds) => {
            "a retry was sequenced again: the store forgot the token (token memory limit) or the model's scope hides this retry"
        }
        (_, Found::Violated, Found::Holds) => {
            "the store broke what the model proves: a store bug, or an environment outside the model's scope"
        }
        _ => "",
    }
}

/// Per node, the coordinator's measured round trips and silences beside the model's bounds.
pub(super) fn write_links(out: &mut String, scenario: &Scenario, o: &RunOutcome) {
    let b = &o.bounds;
    let silence_bound = if b.independent {
        "; a bound on a reachable node's silence in the model: heartbeat_interval + worst round trip"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "links (measured by the coordinator over the run, faults included; model's worst round trip, degradations included{silence_bound}):"
    );
    for (n, link) in o.links.iter().enumerate() {
        let node = n as NodeId;
        let rtt_max_ms = b.round_trip_max_ms.get(n).copied().unwrap_or(0);
        let silence = match b.silence_max_ms(node) {
            Some(bound_ms) => format!("max silence {} ms (model {bound_ms} ms)", link.max_silence_ms),
            None => format!("max silence {} ms", link.max_silence_ms),
        };
        let _ = writeln!(
            out,
            "  {:<6} max round trip {} ms (model {rtt_max_ms} ms), {silence}, {} replies after their deadline",
            scenario.nodes[n].name, link.max_round_trip_ms, link.late_replies
        );
    }
}

/// Moves per second of the run, one figure per whole second that had any, e.g. "1s: 2, 3s: 1".
pub(super) fn moves_per_second(o: &RunOutcome) -> String {
    let mut per_second: BTreeMap<u64, usize> = BTreeMap::new();
    for (at_ms, ..) in &o.moves {
        *per_second.entry(at_ms / 1000).or_default() += 1;
    }
    if per_second.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = per_second.iter().map(|(s, n)| format!("{s}s: {n}")).collect();
    format!("per second since start: {}", parts.join(", "))
}

/// The re-replication that began once every fault was over: in a re-mirroring storm, the
/// store replacing replicas that are back (the incident's "when the network came back, every
/// node that had lost its mirror re-mirrored at once").
pub(super) fn after_the_faults(scenario: &Scenario, o: &RunOutcome, over_ms: u64) -> String {
    if o.leader {
        let after: Vec<String> = o
            .promotions
            .iter()
            .filter(|p| p.0 >= over_ms)
            .map(|(at, what)| format!("{at} ms: {what}"))
            .collect();
        return format!(
            "promotions after the faults ended ({over_ms} ms): {}{}",
            after.len(),
            if after.is_empty() { String::new() } else { format!(" ({})", after.join(", ")) }
        );
    }
    let name = |n: NodeId| scenario.nodes[usize::from(n)].name.clone();
    let after: Vec<String> = o
        .evictions
        .iter()
        .filter(|e| e.at_ms >= over_ms)
        .map(|e| {
            let shard = &scenario.shards[usize::from(e.shard)].name;
            format!("{} -> {} in {shard} at {} ms", name(e.node), name(e.replacement), e.at_ms)
        })
        .collect();
    if after.is_empty() {
        format!("re-replication after the faults ended ({over_ms} ms): none began")
    } else {
        format!(
            "re-replication after the faults ended ({over_ms} ms): {} began: {}",
            after.len(),
            after.join(", ")
        )
    }
}

pub(super) fn report(out: &mut String, scenario: &Scenario, o: &RunOutcome, model: &[(PropertyName, Found)]) {
    let _ = writeln!(out, "timeline (ms since start):");
    let mut timeline: Vec<(u64, String)> = o.events.iter().map(|e| (e.at_ms, e.what.clone())).collect();
    for e in &o.evictions {
        let name = |n: NodeId| scenario.nodes[usize::from(n)].name.clone();
        let how = if e.healthy { "healthy (never crashed or cut off)" } else { "after a fault hit it" };
        let shard = &scenario.shards[usize::from(e.shard)].name;
        timeline
            .push((e.at_ms, format!("evict {} -> {} in {shard}: {how}", name(e.node), name(e.replacement))));
    }
    let name = |n: &NodeId| scenario.nodes[usize::from(*n)].name.clone();
    for (at_ms, shard, stays) in &o.changes_rejected {
        let shard = scenario.shards.get(usize::from(*shard)).map_or("?", |s| s.name.as_str());
        timeline
            .push((*at_ms, format!("change of {} in {shard} dropped: membership queue full", name(stays))));
    }
    for (at_ms, shard, from, to) in &o.moves {
        let shard = scenario.shards.get(usize::from(*shard)).map_or("?", |s| s.name.as_str());
        timeline.push((*at_ms, format!("move {shard} {} -> {}", name(from), name(to))));
    }
    timeline.sort();
    for (at_ms, what) in &timeline {
        let _ = writeln!(out, "  {at_ms:>7}  {what}");
    }
    let _ = writeln!(
        out,
        "operations: {} ({} ok, {} writes with unknown outcome, {} reads failed), {} retries",
        o.ops, o.ops_ok, o.writes_unknown, o.reads_failed, o.retries
    );
    if o.leader {
        write_leader_facts(out, o);
    } else {
        write_quorum_facts(out, scenario, o);
    }
    if let Some(v) = &o.trace_verdict {
        let _ = writeln!(out, "trace: {}", trace::describe(v, &scenario.name));
    }
    let _ = writeln!(out, "acked writes lost: {}", o.acked_writes_lost.len());
    for line in &o.acked_writes_lost {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(
        out,
        "linearizability per key: {} not linearizable, {} undecided",
        o.not_linearizable.len(),
        o.undecided.len()
    );
    for key in &o.not_linearizable {
        let _ = writeln!(out, "  not linearizable: {key}");
    }
    for line in &o.history_files {
        let _ = writeln!(out, "  {line}");
    }
    for why in &o.undecided {
        let _ = writeln!(out, "  undecided: {why}");
    }
    if !o.leader {
        let _ =
            writeln!(out, "duplicate effects (a retried token given a new version): {}", o.duplicate_effects);
        let _ = writeln!(
            out,
            "capacity: {} writes offered above a capacity, {} throttled{}",
            o.capacity_breaches,
            o.writes_throttled,
            o.first_capacity_breach
                .as_ref()
                .map(|b| format!("; first: {}", with_model_names(b, scenario)))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(
        out,
        "operations begun before the heal and still retried at the end: {}{}",
        o.ops_never_completed.len(),
        o.ops_complete_unjudged.as_ref().map(|why| format!(" (ops_complete {why})")).unwrap_or_default()
    );
    for line in o.ops_never_completed.iter().take(5) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(over_ms) = o.faults_over_at_ms {
        let _ = writeln!(out, "{}", after_the_faults(scenario, o, over_ms));
    }
    let _ = writeln!(
        out,
        "{} after the settle point ({} ms): {}; in progress at the end: {}",
        if o.leader { "promotions" } else { "membership changes" },
        o.settle_at_ms,
        o.changes_after_settle.len(),
        o.changes_in_progress_at_end
    );
    for (at_ms, what) in o.changes_after_settle.iter().take(5) {
        let _ = writeln!(out, "  {at_ms} ms: {what}");
    }
    let _ = writeln!(out, "{:<22} {:<10} {:<10}", "property", "store", "model");
    let mut properties: Vec<PropertyName> = scenario.properties.clone();
    for extra in [PropertyName::Linearizable] {
        if !properties.contains(&extra) {
            properties.push(extra);
        }
    }
    for property in properties {
        let store = o.verdict(property);
        let modelled = model.iter().find(|(p, _)| *p == property).map(|(_, f)| *f);
        let show = |f: Option<Found>| f.map(|f| f.to_string()).unwrap_or_else(|| "-".into());
        let _ = write!(out, "{:<22} {:<10} {:<10}", property.as_str(), show(store), show(modelled));
        if let (Some(s), Some(m)) = (store, modelled) {
            let why = disagreement(property, s, m, o, scenario);
            if !why.is_empty() {
                let _ = write!(out, " DIFFERS: {why}");
            }
        }
        let _ = writeln!(out);
    }
}

/// The quorum family's coordinators at the end of the run: decisions, evictions, links, moves.
fn write_quorum_facts(out: &mut String, scenario: &Scenario, o: &RunOutcome) {
    let info: Vec<String> =
        ["evictions", "moves", "membership_changes", "catchups_completed", "joins_abandoned"]
            .iter()
            .filter_map(|name| o.info_counters.get(*name).map(|n| format!("{name} {n}")))
            .collect();
    let _ = writeln!(
        out,
        "decisions logged: {}; deadline misses taken as death: {}; evictions: {} ({} healthy); \
         changes dropped by a full queue: {}; INFO (changes taken on): {}",
        o.decisions,
        o.deadline_deaths,
        o.evictions.len(),
        o.healthy_evictions(),
        o.changes_rejected.len(),
        info.join(", "),
    );
    if let (Some(peak), Some(w)) = (o.info_counters.get("backlog_work_peak"), scenario.coordinator.work) {
        let _ = writeln!(
            out,
            "coordinator work (the model's queue: {} unit(s) per model tick, a membership update {}, a copy {}): peak backlog {peak} units",
            w.work_per_tick, w.membership_update_work, w.copy_work
        );
    }
    write_links(out, scenario, o);
    let _ = writeln!(
        out,
        "moves: {} ({}); leader changes: none possible ({})",
        o.moves.len(),
        moves_per_second(o),
        if scenario.coordinators.len() > 1 {
            "the first coordinator leads throughout"
        } else {
            "one coordinator"
        }
    );
}

/// The leader family's coordinator at the end of the run (its promotions are on the timeline).
fn write_leader_facts(out: &mut String, o: &RunOutcome) {
    let counter = |name: &str| o.info_counters.get(name).copied().unwrap_or(0);
    let _ = writeln!(
        out,
        "failovers (the coordinator's INFO, since its last start): {} promotions ({} unclean), {} blocked; {} answers refused as stale by fencing; over the whole run, writes acked by a deposed primary after a newer epoch's: {}",
        counter("promotions"),
        counter("unclean_promotions"),
        counter("failovers_blocked"),
        counter("stale_refused"),
        o.late_epoch_acks
    );
    let _ = writeln!(
        out,
        "partitions with two primaries taking writes in one epoch (the nodes' own records): {}{}",
        o.two_primaries.len(),
        if o.two_primaries.is_empty() { String::new() } else { format!(" ({})", o.two_primaries.join("; ")) }
    );
}
/// The store's text about a backend ("backend node 2 offered ...") with the model's node name
/// added ("backend n3 (node 2) offered ...").
pub(super) fn with_model_names(text: &str, scenario: &Scenario) -> String {
    let mut out = text.to_string();
    // Highest index first, so that "node 1" does not match inside "node 12".
    for (i, node) in scenario.nodes.iter().enumerate().rev() {
        out = out.replace(&format!("backend node {i} "), &format!("backend {} (node {i}) ", node.name));
    }
    out
}

/// The history as Jepsen EDN where `--history` asks for it, and, when some key is not
/// linearizable, a picture of it (`history check --html`'s page) beside that file or in the
/// temporary directory. Returns one report line per file written.
pub(crate) fn write_history_files(
    load: &LoadReport,
    finals: &[Op],
    history: Option<&std::path::Path>,
    not_linearizable: bool,
) -> Result<Vec<String>, String> {
    let ops: Vec<_> = load.history.iter().chain(finals).filter_map(|op| op.as_kv_op()).collect();
    let mut lines = Vec::new();
    if let Some(path) = history {
        std::fs::write(path, lincheck::generate::to_edn(&ops))
            .map_err(|e| format!("cannot write --history {}: {e}", path.display()))?;
        lines.push(format!(
            "history (Jepsen EDN, for `replicheck history check`, Knossos, Elle): {}",
            path.display()
        ));
    }
    if not_linearizable {
        let options = lincheck::Options { threads: 1, every_key: false };
        let checked = lincheck::report::check_kv(&ops, true, Budget::steps(LINCHECK_STEPS_MAX), options);
        let path = match history {
            Some(edn) => edn.with_extension("html"),
            None => std::env::temp_dir().join(format!("replicheck-store-run-{}.html", std::process::id())),
        };
        std::fs::write(&path, lincheck::html::page("store run history", &checked))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        lines.push(format!("picture of the non-linearizable history: {}", path.display()));
    }
    Ok(lines)
}
