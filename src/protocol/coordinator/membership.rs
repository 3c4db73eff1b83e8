//! Membership: failure detection, evictions through the bounded queue, the rebalancer's
//! moves, and the join of a replacement (copies after earlier writes, parked copy rounds).

use super::*;

impl<D: Data> Coordinator<D> {
    /// Disk use (outside data plus the shards a node holds or is receiving), compaction debt
    /// and slowness of every node, as the coordinator knows them.
    pub fn node_loads(&self, cfg: &Resolved) -> Vec<NodeLoad> {
        let holds = |shard: usize, n: NodeId| {
            let v = &self.shards[shard];
            v.members.contains(&n) || v.join.as_ref().is_some_and(|j| j.replacement == n)
        };
        (0..cfg.nodes.len() as NodeId)
            .map(|n| {
                let held: D::Shards<(u8, bool)> = (0..cfg.shards.len())
                    .filter(|&k| holds(k, n))
                    .map(|k| (cfg.shards[k].size_pct, cfg.shards[k].hot))
                    .collect();
                let spec = &cfg.nodes[usize::from(n)];
                let debt_pct = self.debt_pct[usize::from(n)];
                let room = self.slot_free(cfg, n)
                    && crate::policy::recovery::may_recover(
                        self.recoveries(n),
                        cfg.policy.eviction.max_recoveries_per_node,
                    );
                rebalancer::node_load(
                    n,
                    spec.disk_used_pct,
                    &held,
                    debt_pct,
                    cfg.slow_compaction_debt_pct,
                    room,
                )
            })
            .collect()
    }

    /// The rebalancer: sees disk use, compaction debt and latency per node as the coordinator
    /// knows them, asks the policy for a move, and queues it as a membership change.
    pub(super) fn on_rebalance(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        let r = cfg.policy.rebalance.as_ref().expect("the rebalancer runs only when enabled");
        self.rebalance_ticks = ticks(r.interval_ticks);
        self.ask_loads(cfg, io);
        if self.changes_paused(cfg) {
            return;
        }
        let nodes = self.node_loads(cfg);
        let shards: Vec<ShardLoad> = (0..cfg.shards.len())
            .map(|k| {
                let v = &self.shards[k];
                ShardLoad {
                    shard: k as u8,
                    holders: v
                        .members
                        .iter()
                        .copied()
                        .chain(v.join.as_ref().map(|j| j.replacement))
                        .collect(),
                    size_pct: cfg.shards[k].size_pct,
                    hot: cfg.shards[k].hot,
                    resting: v.cooldown_ticks > 0
                        || v.join.is_some()
                        || self.queue.iter().any(|u| usize::from(u.shard) == k)
                        // Every holder sends a copy of a move: none may be at its limit.
                        || v.members.iter().any(|&m| {
                            !crate::policy::recovery::may_recover(
                                self.recoveries(m),
                                cfg.policy.eviction.max_recoveries_per_node,
                            )
                        }),
                }
            })
            .collect();
        let Some(m) = rebalancer::choose_move(&nodes, &shards, &r.policy) else { return };
        let v = &mut self.shards[usize::from(m.shard)];
        let len = rebalancer::next_cooldown_ticks(
            u32::from(v.cooldown_len_ticks),
            r.move_cooldown_ticks,
            r.cooldown_backoff,
            r.cooldown_max_ticks,
        );
        v.cooldown_len_ticks = ticks(len);
        v.cooldown_ticks = ticks(len);
        let update = MembershipUpdate { shard: m.shard, evicted: m.from, replacement: m.to, is_move: true };
        self.enqueue(cfg, update, io);
    }

    /// A parked copy round whose missing source `n` was just heard from asks `n` again.
    pub(super) fn unpark_copies(&mut self, cfg: &Resolved, n: NodeId, io: &mut impl Io<D>) {
        // With a copy backoff a parked round waits for its window, whatever is heard.
        if cfg.policy.recovery.copy_retry != crate::policy::recovery::CopyRetry::OnContact {
            return;
        }
        for shard in 0..self.shards.len() as u8 {
            let view = &self.shards[usize::from(shard)];
            let waits_for_n = view.join.as_ref().is_some_and(|j| {
                j.parked
                    && view.members.contains(&n)
                    && (j.is_move || n != j.evicted)
                    && j.copied_from & bit(n) == 0
            });
            if waits_for_n {
                self.request_copies_from(cfg, shard, Some(n), io);
            }
        }
    }

    pub(super) fn on_heartbeat(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        let p = &cfg.policy;
        self.heartbeat_ticks = ticks(p.heartbeat_interval_ticks);
        for n in 0..cfg.nodes.len() as NodeId {
            if p.health_check == HealthCheck::Rounds {
                self.judge(cfg, n, io);
            }
            io.send(Endpoint::Node(n), Msg::Ping);
        }
        self.consider_evictions(cfg, self.backlog_work, io);
    }

    /// Continuous checking: `n`'s silence crossed a threshold between rounds.
    pub(super) fn on_silence_crossed(&mut self, cfg: &Resolved, n: NodeId, io: &mut impl Io<D>) {
        self.judge(cfg, n, io);
        self.consider_evictions(cfg, self.backlog_work, io);
    }

    /// The independent detector's judgement of `n`'s silence now.
    fn judge(&mut self, cfg: &Resolved, n: NodeId, io: &mut impl Io<D>) {
        let p = &cfg.policy;
        let i = usize::from(n);
        let silence = u32::from(self.silence_ticks[i]);
        let health = detector::health_from_silence(silence, p.suspect_after_ticks, p.dead_after_ticks);
        if health == Health::Dead && self.health[i] != Health::Dead {
            io.event(Event::DeclaredDead { node: n, silence_ticks: Some(self.silence_ticks[i]) });
        }
        self.believe(cfg, n, health);
    }

    /// Continuous checking: the nodes whose silence crossed a threshold the detector has not
    /// acted on yet (judged at once: time may not pass first).
    pub(super) fn silences_crossed<'a>(&'a self, cfg: &'a Resolved) -> impl Iterator<Item = NodeId> + 'a {
        let p = &cfg.policy;
        let continuous = independent(cfg) && p.health_check == HealthCheck::Continuous;
        (0..if continuous { self.silence_ticks.len() } else { 0 }).filter_map(move |i| {
            let crossed = detector::judge_now(
                p.health_check,
                false,
                self.health[i],
                u32::from(self.silence_ticks[i]),
                p.suspect_after_ticks,
                p.dead_after_ticks,
            );
            crossed.then_some(i as NodeId)
        })
    }

    /// Continuous checking: the ticks until each node's silence reaches the next threshold
    /// (`suspect_after`, `dead_after`) it has not reached.
    pub(super) fn silence_quiet(&self, cfg: &Resolved, at: &mut impl FnMut(TimerTicks)) {
        let p = &cfg.policy;
        if !(independent(cfg) && p.health_check == HealthCheck::Continuous) {
            return;
        }
        for &silence in self.silence_ticks.iter() {
            let silence = u32::from(silence);
            if let Some(next) =
                [p.suspect_after_ticks, p.dead_after_ticks].into_iter().filter(|&t| t > silence).min()
            {
                at(TimerTicks::try_from(next - silence).unwrap_or(TimerTicks::MAX));
            }
        }
    }

    /// Ask the eviction policy about every member the detector declared dead; queue the
    /// membership updates it decides on. One membership change per shard at a time.
    /// `load_work` is the coordinator's load behind the evidence: its backlog now, or more.
    pub(super) fn consider_evictions(&mut self, cfg: &Resolved, load_work: u16, io: &mut impl Io<D>) {
        for shard in 0..self.shards.len() as u8 {
            let view = &self.shards[usize::from(shard)];
            if view.join.is_some() || self.queue.iter().any(|u| u.shard == shard) {
                continue;
            }
            // Dead and out (at once, or after `down_out_interval`).
            let dead: PerNode<NodeId> = view.members.iter().copied().filter(|&m| self.out(m)).collect();
            let excluded = view.abandoned_targets;
            for m in dead {
                let cluster = ClusterView {
                    dead_nodes: self.health.iter().filter(|h| **h == Health::Dead).count(),
                    total_nodes: cfg.nodes.len(),
                    evictions_in_progress: self.queue.len()
                        + self.shards.iter().filter(|v| v.join.is_some()).count(),
                    coordinator_load_work: load_work,
                    busiest_source_recoveries: self.busiest_source(shard, m),
                };
                let candidates = self.candidates(cfg, shard);
                let zone = cfg.node_zone(m);
                match eviction::decide_eviction(cfg.policy.eviction, cluster, zone, &candidates, excluded) {
                    EvictionDecision::Suppressed(why) => {
                        io.event(Event::EvictionSuppressed { shard, node: m, why });
                        continue;
                    }
                    EvictionDecision::Evict { replacement } => {
                        let update = MembershipUpdate { shard, evicted: m, replacement, is_move: false };
                        io.event(Event::ChangeProposed(update));
                        if self.me == 0 {
                            self.enqueue(cfg, update, io);
                        } else {
                            // The leader orders every change: it decides whether this one goes.
                            io.send(Endpoint::LEADER, Msg::Propose { shard, evicted: m, replacement });
                        }
                        break;
                    }
                }
            }
        }
    }

    pub(super) fn candidates(&self, cfg: &Resolved, shard: u8) -> Vec<Candidate> {
        let view = &self.shards[usize::from(shard)];
        (0..cfg.nodes.len() as NodeId)
            .map(|n| Candidate {
                node: n,
                zone: cfg.node_zone(n),
                health: self.health[usize::from(n)],
                is_member: view.members.contains(&n)
                    || view.join.as_ref().is_some_and(|j| j.replacement == n)
                    || self.queue.iter().any(|u| u.shard == shard && u.replacement == n),
                slot_free: self.slot_free(cfg, n),
                recoveries: self.recoveries(n),
            })
            .collect()
    }

    pub(super) fn enqueue(&mut self, cfg: &Resolved, update: MembershipUpdate, io: &mut impl Io<D>) {
        io.event(Event::ChangeRequested(update));
        if self.queue.len() >= usize::from(cfg.coordinator.membership_queue_capacity) {
            io.event(Event::ChangeRejected(update));
            return;
        }
        if self.queue.is_empty() {
            self.queue_ticks = self.membership_update_ticks(cfg);
        }
        self.queue.push(update);
    }

    pub(super) fn on_apply_membership(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        let u = self.queue.remove(0);
        self.add_work(cfg, |w| w.membership_update_work);
        if !self.queue.is_empty() {
            self.queue_ticks = self.membership_update_ticks(cfg);
        }
        let view = &mut self.shards[usize::from(u.shard)];
        assert!(view.join.is_none(), "one membership change per shard at a time");
        let timeout_ticks = cfg.policy.recovery.join_timeout_ticks.map(ticks);
        view.join = Some(Join { timeout_ticks, ..Join::learning(u.evicted, u.replacement, u.is_move) });
        io.event(Event::ChangeStarted(u));
        self.publish(cfg, u.shard, io);
        self.start_copies_when_clear(cfg, u.shard, io);
    }

    /// The copies of a join start once no write that began before it (and so missed the
    /// learner) is still waiting for its acks.
    /// With several coordinators the leader also waits until every other one acked the join's
    /// view (each acks once its own earlier writes have ended); another coordinator sends
    /// that ack here.
    pub(super) fn start_copies_when_clear(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        if self.me != 0 {
            self.ack_when_clear(shard, io);
            return;
        }
        let view = &self.shards[usize::from(shard)];
        let Some(join) = view.join.as_ref() else { return };
        if join.copying || view.acked != views::followers(cfg) {
            return;
        }
        if self.earlier_write_in_flight(shard, join.replacement) {
            return;
        }
        self.request_copies(cfg, shard, io);
    }

    /// Whether a write (or write-back) of `shard` that began before the join, and so missed
    /// the learner `replacement`, is still waiting for its acks.
    pub(super) fn earlier_write_in_flight(&self, shard: u8, replacement: NodeId) -> bool {
        self.ops.iter().any(|o| o.shard == shard && o.writing() && o.learner != Some(replacement))
    }

    /// Catch-up copy: every remaining member that has not copied yet sends its data to the
    /// replacement; a read quorum of them is enough. A moving replica is healthy and sends its
    /// copy too.
    pub(super) fn request_copies(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        self.request_copies_from(cfg, shard, None, io);
    }

    /// A copy round asking every source still to copy, or only `only`.
    pub(super) fn request_copies_from(
        &mut self,
        cfg: &Resolved,
        shard: u8,
        only: Option<NodeId>,
        io: &mut impl Io<D>,
    ) {
        let view = &mut self.shards[usize::from(shard)];
        let join = view.join.as_mut().expect("a join is in progress");
        join.copying = true;
        join.parked = false;
        join.copy_ticks = ticks(cfg.policy.replica_ack_timeout_ticks);
        let to = join.replacement;
        let mut asked = 0;
        for &src in view.members.iter() {
            let still_to_copy = (join.is_move || src != join.evicted) && join.copied_from & bit(src) == 0;
            if still_to_copy && only.is_none_or(|o| o == src) {
                io.send(Endpoint::Node(src), Msg::CopyRequest { shard, to });
                asked += 1;
            }
        }
        // Data movement: every copy asked for is work for the coordinator.
        self.add_work(cfg, |w| w.copy_work * asked);
    }

    /// The replacement takes the leaving replica's place once a read quorum of copies reached
    /// it.
    pub(super) fn on_copy_ack(
        &mut self,
        cfg: &Resolved,
        shard: u8,
        from: NodeId,
        sender: NodeId,
        io: &mut impl Io<D>,
    ) {
        let view = &mut self.shards[usize::from(shard)];
        // A copy ack of an earlier join of this shard says nothing about this one.
        let Some(join) = view.join.as_mut().filter(|j| j.copying && j.replacement == sender) else {
            return;
        };
        let sources = if join.is_move { view.members.len() } else { view.members.len() - 1 };
        let needed = usize::from(quorum::copies_needed(cfg.policy.read_quorum, sources));
        join.copied_from |= bit(from);
        if (join.copied_from.count_ones() as usize) < needed {
            return;
        }
        if views::followers(cfg) != 0 {
            // Reads move to the new replica set first, everywhere, before the swap.
            if !join.swapping {
                join.swapping = true;
                self.publish(cfg, shard, io);
            }
            return;
        }
        self.complete_join(cfg, shard, io);
    }

    /// The replacement takes the leaving replica's place.
    pub(super) fn complete_join(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        let view = &mut self.shards[usize::from(shard)];
        let join = view.join.as_ref().expect("a join is in progress");
        let update = MembershipUpdate {
            shard,
            evicted: join.evicted,
            replacement: join.replacement,
            is_move: join.is_move,
        };
        view.members.retain(|m| *m != update.evicted);
        view.members.push(update.replacement);
        view.members.sort();
        view.join = None;
        // Late copy acks of an abandoned join can no longer be mistaken for this one's.
        view.abandoned_targets = 0;
        io.event(Event::ChangeCompleted(update));
        self.publish(cfg, shard, io);
    }
}
