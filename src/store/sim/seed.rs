//! One seed of `store sim`: its fault schedule, its store (nodes, network, coordinators, the
//! records they keep), the faults applied to it, and what was measured.

use super::*;
use crate::store::clock::ModelTicks;

/// One seed, on a runtime of its own whose clock is paused.
pub(super) fn run_seed(setup: &Setup, seed: u64) -> Result<SeedRun, String> {
    let dir = ScratchDir::under(&setup.scratch_base, "store-sim")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| format!("cannot start the simulation's runtime: {e}"))?;
    runtime.block_on(simulate(setup, seed, &dir.path))
}

/// A decision log kept in memory, read back at the end.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The seed's fault timeline: one to `faults.budget` faults of the menu, each at a moment of
/// the fault phase, lasting a draw from its window or until the heal; and the heal's moment.
fn schedule(setup: &Setup, rng: &mut StdRng) -> Result<(Vec<(u64, Step)>, u64), String> {
    let scenario = &setup.scenario;
    let mut menu: Vec<Fault> = menu(scenario).into_iter().flatten().collect();
    let most = usize::from(scenario.faults.budget).min(menu.len());
    let count = if most == 0 { 0 } else { rng.random_range(1..=most) };
    let (calm_ms, heal_ms) = setup.fault_window_ms;
    let mut steps = Vec::new();
    let mut last_end_ms = 0;
    for _ in 0..count {
        let fault = menu.swap_remove(rng.random_range(0..menu.len()));
        // A quarter of the faults are in force from the window's first moment (the model's
        // checker may inject one before the first message), the rest start anywhere in it.
        let start_ms = if rng.random_ratio(1, 4) { calm_ms } else { rng.random_range(calm_ms..heal_ms) };
        if let Some(lasts_ms) = fault.drawn_duration_ms(scenario, setup.ms_per_tick, rng) {
            last_end_ms = last_end_ms.max(start_ms + lasts_ms);
            steps.push((start_ms + lasts_ms, Step::End(fault.clone())));
        } else if matches!(fault, Fault::Crash(_) | Fault::Partition(_) | Fault::Degrade { .. })
            && rng.random_bool(0.5)
        {
            // A fault without a duration may end at any moment, or never (before the heal).
            steps.push((rng.random_range(start_ms + 1..=heal_ms), Step::End(fault.clone())));
        }
        steps.push((start_ms, Step::Fault(fault)));
    }
    let heal_at_ms = heal_ms.max(last_end_ms);
    if heal_at_ms >= setup.duration_ms {
        return Err(format!(
            "a fault of the model lasts until {heal_at_ms} ms into a simulated run of {} ms: simulate longer (--duration)",
            setup.duration_ms
        ));
    }
    steps.push((heal_at_ms, Step::Heal));
    steps.sort_by_key(|(at, step)| (*at, step.rank()));
    Ok((steps, heal_at_ms))
}

/// The store of one seed: its nodes, network, coordinator and what it records.
struct World<'a> {
    setup: &'a Setup,
    seed: u64,
    dir: &'a Path,
    net: Arc<SimNet>,
    front: Arc<Front>,
    log: DecisionLog,
    /// Every request or message and its delivery, and the faults (`store::trace`).
    trace: TraceWriter,
    /// Every coordinator's shell, for the messages between them.
    shells: Arc<Mutex<Vec<std::sync::Weak<crate::store::coordinator::shell::Shell>>>>,
    fleet: Arc<crate::store::coordinator::fleet::FleetMeter>,
    epoch: Instant,
    active: Vec<Fault>,
    /// When the schedule first crashed or cut off each node.
    faulted_at_ms: BTreeMap<NodeId, u64>,
    restarts: u64,
    /// The policy each coordinator runs now (a rollout's stage; a restart keeps it).
    policies: Vec<crate::config::Policy>,
    /// The leader family's nodes and manager (the quorum family's are `net.nodes` and `front`).
    leader: Option<leader::LeaderWorld>,
}

impl World<'_> {
    /// Step `i` of the rollout (the trace's, in a replay): one coordinator reloads its stage's
    /// policy, as `CONFIG SET policy` does.
    fn take_stage(&mut self, i: usize) -> Result<(), String> {
        let s = self.setup;
        let rollout = s.rollout.as_ref().ok_or("a rollout step, and the policy is not a rollout")?;
        let (c, stage) = match &s.replay {
            Some(plan) => plan.stages[i],
            None => rollout.steps[i],
        };
        let policy = rollout.policies[stage].clone();
        self.front.get(c).quorum().reload(policy.clone())?;
        self.policies[usize::from(c)] = policy;
        Ok(())
    }

    /// Each client key's replicas now (`replay::Holding`).
    fn holdings(&self) -> Result<Vec<Holding>, String> {
        let shell = self.front.get(0).quorum().shell();
        let mut keys: Vec<&String> =
            self.setup.workload.roles.iter().filter_map(|r| r.keys.first()).collect();
        keys.sort_unstable();
        keys.dedup();
        keys.into_iter()
            .map(|key| {
                let shard = usize::from(shell.partition_of(key.as_bytes()));
                let members: Vec<NodeId> =
                    shell.machine(|m| m.shards[shard].members.iter().copied().collect());
                let members = members
                    .into_iter()
                    .map(|n| {
                        self.net.nodes[usize::from(n)].stored(key.as_bytes()).map(|(v, value)| (n, v, value))
                    })
                    .collect::<Result<_, String>>()?;
                Ok(Holding { key: key.clone(), members })
            })
            .collect()
    }
}

impl World<'_> {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Until `at`; the leader family's manager is looked at every tick meanwhile, for its
    /// promotions (as `store run` looks at its INFO).
    async fn wait_until(&mut self, at: Instant) {
        let Some(leader) = &mut self.leader else { return tokio::time::sleep_until(at).await };
        let tick = Duration::from_millis(self.setup.ms_per_tick);
        loop {
            leader.look(self.epoch.elapsed().as_millis() as u64, &self.setup.scenario);
            if Instant::now() >= at {
                return;
            }
            tokio::time::sleep_until(at.min(Instant::now() + tick)).await;
        }
    }

    /// Coordinator `me`, on the state file in the seed's directory (fresh or saved; only the
    /// membership leader, coordinator 0, keeps it).
    async fn coordinator(&self, me: u8) -> Result<Arc<Coordinator>, String> {
        let s = self.setup;
        let zones: Vec<u8> = s.scenario.coordinators.iter().map(|c| c.zone).collect();
        let zone = zones[usize::from(me)];
        let links: Vec<Arc<dyn NodeChannel>> = (0..s.scenario.nodes.len() as NodeId)
            .map(|n| self.net.link(me, zone, n) as Arc<dyn NodeChannel>)
            .collect();
        let state_file = StateFile::in_dir(self.dir);
        let saved = state_file.load().map_err(|e| e.to_string())?;
        let node_zones: Vec<u8> = s.scenario.nodes.iter().map(|n| n.zone).collect();
        let shell = start_shell(
            &self.policies[usize::from(me)],
            links,
            &node_zones,
            self.log.clone(),
            &load_facts(&s.scenario),
            s.layout.clone(),
            &s.membership,
            Some((state_file, saved)),
            Some(self.trace.clone()),
            &Peering {
                me,
                simulated: (zones.len() > 1).then(|| {
                    Arc::new(SimPeers::new(&self.net, me, zones.clone(), &self.shells))
                        as Arc<dyn PeerChannel>
                }),
                zones,
                addrs: Vec::new(),
                listener: None,
                fleet: Arc::clone(&self.fleet),
            },
        )
        .await?;
        self.shells.lock().unwrap_or_else(|p| p.into_inner())[usize::from(me)] = Arc::downgrade(&shell);
        // A replay fires the timers due at one moment in the order the trace fires them.
        if let Some(plan) = &s.replay {
            let (timers, epoch, ms_per_tick) = (plan.timers.clone(), self.epoch, s.ms_per_tick);
            shell.order_due_timers(Box::new(move |due| {
                let tick = epoch.elapsed().as_millis() as u64 / ms_per_tick;
                replay::order_as_traced(&timers, me, tick, due);
            }));
        }
        // Before the clock task first runs: it is spawned, and nothing has yielded since.
        shell.seed_windows(self.seed.wrapping_add(self.restarts).wrapping_add(u64::from(me) << 32));
        Ok(Coordinator::around(shell))
    }

    fn traced(&self, fault: TraceFault) {
        self.trace.fault(fault);
    }

    fn mark_faulted(&mut self, node: NodeId) {
        let at = self.now_ms();
        self.faulted_at_ms.entry(node).or_insert(at);
    }

    async fn apply(&mut self, fault: Fault) -> Result<(), String> {
        let scenario = &self.setup.scenario;
        match &fault {
            Fault::Crash(node) => {
                self.traced(TraceFault::Crash { node: *node });
                match &mut self.leader {
                    Some(leader) => leader.crash_node(*node).await,
                    None => self.net.nodes[usize::from(*node)].crash(),
                }
                self.mark_faulted(*node);
            }
            Fault::CoordinatorCrash if self.leader.is_some() => {
                self.traced(TraceFault::CoordinatorRestart);
                let manager = self.leader.as_mut().expect("matched").restart_manager()?;
                self.front.replace(0, Served::Leader(manager));
            }
            Fault::CoordinatorCrash => {
                self.traced(TraceFault::CoordinatorRestart);
                self.front.get(0).crash();
                self.restarts += 1;
                let restarted = self.coordinator(0).await?;
                self.front.replace(0, Served::Quorum(restarted));
            }
            Fault::Partition(zone) => {
                self.traced(TraceFault::Partition { zone: *zone });
                // Cut off from a coordinator: on the far side of the cut from it.
                for (n, spec) in scenario.nodes.iter().enumerate() {
                    if scenario.coordinators.iter().any(|c| (spec.zone == *zone) != (c.zone == *zone)) {
                        self.mark_faulted(n as NodeId);
                    }
                }
            }
            Fault::Degrade { index, .. } => self.traced(TraceFault::Degrade { index: *index }),
            Fault::Drop => {
                self.traced(TraceFault::Drop);
                self.net.arm_drop();
            }
        }
        if fault != Fault::CoordinatorCrash {
            self.active.push(fault);
        }
        self.net.set_faults(&self.active);
        Ok(())
    }

    fn end(&mut self, fault: &Fault) -> Result<(), String> {
        self.active.retain(|f| f != fault);
        self.net.set_faults(&self.active);
        match fault {
            Fault::Crash(node) => {
                // Traced first: what the restarted node sends comes after it.
                self.traced(TraceFault::Restart { node: *node });
                match &mut self.leader {
                    Some(leader) => leader.start_node(*node)?,
                    None => self.net.nodes[usize::from(*node)].restart()?,
                }
            }
            Fault::Partition(zone) => self.traced(TraceFault::Healed { zone: *zone }),
            Fault::Degrade { index, .. } => self.traced(TraceFault::Restored { index: *index }),
            Fault::CoordinatorCrash | Fault::Drop => unreachable!("a fault without a duration ended"),
        }
        Ok(())
    }

    fn heal(&mut self) -> Result<(), String> {
        self.traced(TraceFault::Heal);
        self.active.clear();
        self.net.set_faults(&[]);
        if let Some(leader) = &mut self.leader {
            leader.restart_all()?;
        }
        for node in &self.net.nodes {
            node.restart()?;
        }
        Ok(())
    }
}

fn fault_text(scenario: &Scenario, fault: &Fault, at_ms: u64, lasts_ms: Option<u64>) -> String {
    let lasts =
        lasts_ms.map_or("until the heal".to_string(), |ms| format!("for {:.3} s", ms as f64 / 1000.0));
    match fault {
        Fault::CoordinatorCrash => format!("{} at {:.3} s", fault.name(scenario), at_ms as f64 / 1000.0),
        Fault::Drop => format!("drop (one message) from {:.3} s", at_ms as f64 / 1000.0),
        _ => format!("{} at {:.3} s {lasts}", fault.name(scenario), at_ms as f64 / 1000.0),
    }
}

async fn simulate(setup: &Setup, seed: u64, dir: &Path) -> Result<SeedRun, String> {
    let scenario = &setup.scenario;
    let epoch = Instant::now();
    // A replay's machines read the time in the trace's ticks (`ModelTicks`).
    let _model_ticks = setup.replay.is_some().then(|| ModelTicks::set(setup.ms_per_tick, epoch));
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_fa17_0000_0000);
    // The timeline: the seed's draw, or the trace's faults and a heal after its last step.
    let (steps, heal_at_ms): (Vec<(Duration, Step)>, u64) = match &setup.replay {
        None => {
            let (mut steps, heal_at_ms) = schedule(setup, &mut rng)?;
            // A rollout's waves while the faults may strike (as `store run` spreads them).
            if let Some(rollout) = &setup.rollout {
                let times = rollout.times_ms(setup.fault_window_ms);
                steps.extend(times.into_iter().enumerate().map(|(i, at)| (at, Step::Rollout(i))));
                steps.sort_by_key(|(at, step)| (*at, step.rank()));
            }
            (steps.into_iter().map(|(ms, step)| (Duration::from_millis(ms), step)).collect(), heal_at_ms)
        }
        Some(plan) => {
            let mut steps: Vec<(Duration, Step)> =
                plan.env.iter().map(|(at, step)| (at.offset(setup.ms_per_tick), step.clone())).collect();
            let trace_end = plan.end(setup.ms_per_tick);
            // A lasso loops for ever under the faults in force when it closes: they stay until
            // the load ends (then heal, for the final reads), and the run is judged in two
            // phases from the trace's end, as a seed's are from its heal.
            let heal = match plan.looped {
                Some(_) => Duration::from_millis(setup.duration_ms),
                None => trace_end,
            };
            steps.push((heal, Step::Heal));
            (steps, trace_end.as_millis() as u64)
        }
    };
    let ms = |d: &Duration| d.as_millis() as u64;
    let faults: Vec<String> = steps
        .iter()
        .filter_map(|(at, step)| match step {
            Step::Fault(f) => {
                let end = steps
                    .iter()
                    .find_map(|(e, s)| matches!(s, Step::End(g) if g == f && e > at).then(|| ms(e) - ms(at)));
                Some(fault_text(scenario, f, ms(at), end))
            }
            _ => None,
        })
        .collect();
    let replayer = setup
        .replay
        .as_ref()
        .map(|plan| Arc::new(Mutex::new(Replayer::new(plan.clone(), setup.ms_per_tick))));
    let leader_family = setup.leader_policy.is_some();
    // The quorum family's nodes answer the coordinator's requests on the network's side; the
    // leader family's run their own loops (`leader`).
    let quorum_nodes = if leader_family { 0 } else { scenario.nodes.len() as NodeId };
    let nodes = (0..quorum_nodes)
        .map(|n| SimNode::start(n, dir.join(format!("node{n}"))).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let net = Arc::new(SimNet::new(scenario, setup.ms_per_tick, epoch, nodes, seed, replayer.clone()));
    let log_text = Buffer::default();
    let log = DecisionLog::to_writer(Box::new(log_text.clone()), "coordinator");
    let trace_path = dir.join("trace.jsonl");
    let coordinators = scenario.coordinators.len();
    // A simulated trip is its latencies exactly; a tick covers the model's rounding.
    let trace = TraceWriter::create(&trace_path, setup.ms_per_tick, setup.ms_per_tick, epoch)?;
    let mut world = World {
        setup,
        seed,
        dir,
        net: Arc::clone(&net),
        front: Arc::new(Front::new(Vec::new())),
        log: log.clone(),
        trace,
        shells: Arc::new(Mutex::new((0..coordinators).map(|_| std::sync::Weak::new()).collect())),
        fleet: Arc::new(crate::store::coordinator::fleet::FleetMeter::new(coordinators)),
        epoch,
        active: Vec::new(),
        faulted_at_ms: BTreeMap::new(),
        restarts: 0,
        policies: vec![setup.policy.clone(); coordinators],
        leader: None,
    };
    if leader_family {
        let leader = leader::LeaderWorld::start(setup, dir, Arc::clone(&net), world.trace.clone()).await?;
        world.front = Arc::new(Front::new(vec![Served::Leader(Arc::clone(&leader.manager))]));
        world.leader = Some(leader);
    } else {
        let mut started = Vec::new();
        for c in 0..coordinators as u8 {
            started.push(world.coordinator(c).await?);
        }
        world.front = Arc::new(Front::new(started.into_iter().map(Served::Quorum).collect()));
    }
    let acked = Arc::new(Mutex::new(Vec::new()));
    let load = SimLoad {
        roles: setup.workload.roles.clone(),
        coordinator_of: scenario.clients.iter().map(|c| c.coordinator).collect(),
        zones: scenario
            .clients
            .iter()
            .map(|c| (c.zone, scenario.coordinators[usize::from(c.coordinator)].zone))
            .collect(),
        clients: setup.workload.threads,
        acked: Arc::clone(&acked),
        replay: setup.replay.as_ref().map(|plan| {
            let offsets = |steps: &Vec<(Moment, ClientStep)>| -> Vec<(Duration, ClientStep)> {
                steps.iter().map(|(at, step)| (at.offset(setup.ms_per_tick), *step)).collect()
            };
            Arc::new(load::ReplayLoad {
                steps: plan.clients.iter().map(offsets).collect(),
                end: plan.end(setup.ms_per_tick),
            })
        }),
        request_timeout_ms: setup.request_timeout_ms,
        retry: setup.policy.retry,
        // The leader family's primary keeps no token table.
        tokens: !leader_family,
        seed,
        scripts: (setup.load == LoadShape::Model)
            .then(|| scenario.clients.iter().map(|c| (c.ops.clone(), c.repeat)).collect()),
    };
    let end = epoch + Duration::from_millis(setup.duration_ms);
    let front = Arc::clone(&world.front);
    let clients =
        tokio::spawn(load::run_load(front, Arc::clone(&net), load, log.with_actor("client"), epoch, end));
    let mut held = None;
    for (at, step) in steps {
        world.wait_until(epoch + at).await;
        match step {
            Step::Fault(fault) => world.apply(fault).await?,
            Step::End(fault) => world.end(&fault)?,
            Step::Heal => {
                // A replay's trace ends here: the store's state then, as the model judges states.
                let trace_ends = setup.replay.as_ref().is_some_and(|plan| plan.looped.is_none());
                if trace_ends && held.is_none() && world.leader.is_none() {
                    held = Some(world.holdings()?);
                }
                world.heal()?
            }
            Step::Rollout(i) => world.take_stage(i)?,
        }
    }
    // The model's clients stop by themselves: the run goes on to its end, so that what the
    // faults set off has the healed phase to settle in (and `converges` its second half).
    world.wait_until(end).await;
    let history = clients.await.map_err(|e| format!("the simulated clients: {e}"))?;
    let load_end_ms = world.now_ms();
    world.trace.line(&TraceLine::End { at_ms: world.trace.now_ms() });
    world.trace.flush()?;
    // Complete: the writer writes nothing after the end line.
    let trace_text = std::fs::read_to_string(&trace_path)
        .map_err(|e| format!("cannot read {}: {e}", trace_path.display()))?;
    // Let the last catch-up copies and deadlines run out before the final reads.
    let ack_timeout_ms = u64::from(setup.policy.replica_ack_timeout_ticks);
    world.wait_until(Instant::now() + Duration::from_millis(2 * ack_timeout_ms + 200)).await;
    let timeout = Duration::from_millis(setup.request_timeout_ms.max(1000));
    let zone = scenario.coordinator.zone;
    let finals = match load::final_reads(
        &world.front,
        &net,
        zone,
        &history,
        timeout,
        FINAL_READ_ATTEMPTS,
        epoch,
    )
    .await
    {
        Ok(finals) => finals,
        Err(unavailable) => {
            let (messages_sent, messages_lost) = net.counts();
            let count = |f: &dyn Fn(&Op) -> bool| history.history.iter().filter(|op| f(op)).count();
            let outcome = RunOutcome {
                ops: history.history.len(),
                ops_ok: count(&|op| matches!(op.outcome, Outcome::Ok { .. })),
                writes_unknown: count(&|op| op.outcome == Outcome::Unknown),
                reads_failed: count(&|op| op.outcome == Outcome::Failed),
                retries: history.retries,
                ..RunOutcome::default()
            };
            return Ok(SeedRun {
                seed,
                outcome,
                verdicts: Vec::new(),
                faults,
                messages_sent,
                messages_lost,
                simulated_ms: world.now_ms(),
                unavailable: Some(unavailable),
                history,
                finals: Vec::new(),
                trace: trace_text,
                replayed: replayer,
                held,
                acked: take(&acked),
            });
        }
    };
    let info = world.front.get(0).info();
    let followers: Vec<String> = (1..coordinators as u8).map(|c| world.front.get(c).info()).collect();
    log.flush().map_err(|e| format!("decision log: {e}"))?;
    let text = String::from_utf8_lossy(&log_text.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
    let mut outcome = measure(&history, &finals, &text, &world.faulted_at_ms)?;
    outcome.trace_verdict = Some(trace::validate(scenario, &trace_text)?);
    match &mut world.leader {
        Some(leader) => {
            leader.look(world.epoch.elapsed().as_millis() as u64, scenario);
            read_leader_info(
                &mut outcome,
                &info,
                leader.watch.late_epoch_acks,
                leader.two_primaries(scenario)?,
            );
            outcome.promotions = std::mem::take(&mut leader.watch.promotions);
        }
        None => read_info(&mut outcome, &info, &followers, scenario.nodes.len())?,
    }
    let retry_round_ms = run::retry_round_ms(&setup.policy, setup.request_timeout_ms);
    judge_phases(&mut outcome, &history, heal_at_ms, load_end_ms, retry_round_ms);
    outcome.churn_budget_ms =
        scenario.coordinator.churn_budget.map(|(n, ticks)| (n, u64::from(ticks) * setup.ms_per_tick));
    let verdicts = scenario.properties.iter().filter_map(|p| outcome.verdict(*p).map(|f| (*p, f))).collect();
    let (messages_sent, messages_lost) = net.counts();
    let simulated_ms = world.now_ms();
    for c in 0..coordinators as u8 {
        world.front.get(c).crash(); // its clock task ends with the runtime
    }
    if let Some(leader) = &mut world.leader {
        leader.stop();
    }
    Ok(SeedRun {
        seed,
        outcome,
        verdicts,
        faults,
        messages_sent,
        messages_lost,
        simulated_ms,
        unavailable: None,
        history,
        finals,
        trace: trace_text,
        replayed: replayer,
        held,
        acked: take(&acked),
    })
}

fn take<T>(shared: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()))
}
