//! Requests: routing a write against capacity, replicating and reading at a quorum (with
//! the learner's extra ack during a join, and read repair), and the ack deadline.

use super::*;

impl<D: Data> Coordinator<D> {
    /// The backends as the load balancer sees them now, in preference order (the scenario's).
    pub fn backend_loads(&self, cfg: &Resolved) -> Vec<BackendLoad> {
        cfg.nodes
            .iter()
            .enumerate()
            .map(|(n, spec)| BackendLoad {
                node: n as NodeId,
                up: self.health[n] != Health::Dead,
                capacity_per_tick: spec.write_capacity_per_tick,
                load_per_tick: spec.base_load_per_tick.saturating_add(self.backend_load[n]),
            })
            .collect()
    }

    /// Count one write offered to a partition or backend, and note a breach.
    pub(super) fn offer(
        &mut self,
        unit: CapacityUnit,
        offered_before: u16,
        capacity: Option<u16>,
        io: &mut impl Io<D>,
    ) {
        let offered = offered_before.saturating_add(1);
        let load = match unit {
            CapacityUnit::Partition(p) => &mut self.partition_load[usize::from(p)],
            CapacityUnit::Backend(n) => &mut self.backend_load[usize::from(n)],
        };
        *load = load.saturating_add(1);
        if let Some(cap) = capacity.filter(|&cap| offered > cap) {
            io.event(Event::CapacityBreached(CapacityBreach { unit, offered, capacity: cap }));
        }
    }

    /// Route a write (`routing::route_write`) and count the load it offered.
    pub(super) fn admit_write(&mut self, cfg: &Resolved, partition: u8, io: &mut impl Io<D>) -> WriteRoute {
        let p = usize::from(partition);
        let before = self.background[p].saturating_add(self.partition_load[p]);
        let loads = cfg.backends_modelled.then(|| self.backend_loads(cfg));
        let route = routing::route_write(
            &cfg.policy.routing,
            before,
            cfg.partition_capacity_per_tick,
            loads.as_deref(),
        );
        if cfg.partition_capacity_per_tick.is_some() {
            self.offer(CapacityUnit::Partition(partition), before, cfg.partition_capacity_per_tick, io);
        }
        if let (Some(b), Some(loads)) = (route.backend_offered(), &loads) {
            let l = loads[usize::from(b)];
            self.offer(CapacityUnit::Backend(b), l.load_per_tick, l.capacity_per_tick, io);
        }
        route
    }

    pub(super) fn on_request(&mut self, cfg: &Resolved, r: Request<D>, io: &mut impl Io<D>) {
        let Request { op, attempt, kind, shard, key, value, token } = r;
        if kind == OpKind::Write {
            let route = self.admit_write(cfg, shard, io);
            if !route.admitted() {
                io.event(Event::RequestFailed { op, why: Failure::Throttled(route) });
                let value = D::Value::default();
                io.send(Endpoint::Client(D::client(op)), Msg::Response { op, attempt, ok: false, value });
                return;
            }
        }
        let p = &cfg.policy;
        let mut querying = false;
        let mut version = D::Version::default();
        let token = token.filter(|_| p.retry.idempotency_tokens && kind == OpKind::Write);
        if kind == OpKind::Write {
            let known = self.token_version(&token);
            if known.is_none() && cfg.coordinators.len() > 1 {
                // The version comes from what a read quorum holds (see `views`).
                querying = true;
            } else {
                let view = &mut self.shards[usize::from(shard)];
                let next = view.next_version;
                version = retry::version_for_attempt(p.retry.idempotency_tokens, known, next);
                if version == next {
                    view.next_version = D::next_version(next);
                    self.remember_token(cfg, token.clone(), version);
                }
            }
        }
        let mut o = CoordOp {
            op,
            attempt,
            kind,
            shard,
            key,
            version,
            value,
            asked: 0,
            learner: None,
            answered: 0,
            refused: 0,
            heard: 0,
            responded: false,
            best: Stored::default(),
            holders: 0,
            repairing: false,
            deadline_ticks: ticks(p.replica_ack_timeout_ticks),
            querying,
            token: if querying { token } else { None },
            fan_out_ticks: None,
            queued_behind_work: self.backlog_work,
        };
        // A saturated coordinator gets to the request only after the work queued ahead of it;
        // the deadline runs from now.
        let wait = self.wait_ticks(cfg);
        if wait > 0 {
            o.fan_out_ticks = Some(wait);
        } else {
            self.send_request(cfg, &mut o, io);
        }
        self.ops.push(o);
    }

    /// Send a request to the replicas: a write at its version, or a read (or a write's version
    /// query) to the read set.
    fn send_request(&self, cfg: &Resolved, o: &mut CoordOp<D>, io: &mut impl Io<D>) {
        if o.kind == OpKind::Write && !o.querying {
            self.send_replicates(o, io);
        } else {
            o.asked = self.read_set(o.shard);
            let (op, attempt, shard) = (o.op, o.attempt, o.shard);
            for n in (0..cfg.nodes.len() as NodeId).filter(|&n| o.asked & bit(n) != 0) {
                io.send(Endpoint::Node(n), Msg::ReadReq { op, attempt, shard, key: o.key.clone() });
            }
        }
    }

    /// A request that waited behind the backlog reaches the front of the work queue: it goes to
    /// the replica set (and learner) there is now.
    pub(super) fn on_fan_out(&mut self, cfg: &Resolved, op: D::Op, attempt: u8, io: &mut impl Io<D>) {
        let i = self
            .ops
            .iter()
            .position(|o| o.op == op && o.attempt == attempt)
            .expect("the fan-out of a live request");
        let mut o = self.ops[i].clone();
        assert_eq!(o.fan_out_ticks, Some(0), "a request is sent once, when its wait is over");
        o.fan_out_ticks = None;
        self.send_request(cfg, &mut o, io);
        self.ops[i] = o;
    }

    /// The version a write with this idempotency token was sequenced at, if it was.
    fn token_version(&self, token: &Option<D::TokenId>) -> Option<D::Version> {
        let t = token.as_ref()?;
        self.tokens.iter().find(|(o, _)| o == t).map(|(_, v)| *v)
    }

    /// Remember the version a write with an idempotency token got.
    fn remember_token(&mut self, cfg: &Resolved, token: Option<D::TokenId>, version: D::Version) {
        let Some(t) = token else { return };
        let at = self.tokens.partition_point(|(o, _)| *o < t);
        self.tokens.insert(at, (t, version));
        if self.tokens.len() > cfg.tokens_max {
            // The oldest version is forgotten first.
            let oldest = (0..self.tokens.len()).min_by_key(|&i| self.tokens[i].1).expect("non-empty");
            self.tokens.remove(oldest);
        }
    }

    /// Send a write at its version to the members and, during a join, the learner: it also
    /// reaches a joining replica so that it misses nothing, and needs its ack or one more
    /// member's.
    fn send_replicates(&self, o: &mut CoordOp<D>, io: &mut impl Io<D>) {
        let view = &self.shards[usize::from(o.shard)];
        o.learner = view.join.as_ref().map(|j| j.replacement);
        o.asked = view.members.iter().fold(0u8, |m, &n| m | bit(n)) | o.learner.map_or(0, bit);
        for n in (0..8).filter(|&n| o.asked & bit(n) != 0) {
            let (op, attempt, shard) = (o.op, o.attempt, o.shard);
            let msg = Msg::Replicate {
                op,
                attempt,
                shard,
                key: o.key.clone(),
                version: o.version,
                value: o.value.clone(),
            };
            io.send(Endpoint::Node(n), msg);
        }
    }

    /// Several coordinators: a write's read quorum answered; it takes a version above every
    /// one they hold and is sent as any write, with a deadline of its own.
    fn begin_write(&mut self, cfg: &Resolved, i: usize, io: &mut impl Io<D>) {
        let (shard, seen) = (self.ops[i].shard, self.ops[i].best.version);
        let token = self.ops[i].token.take();
        // Another attempt with the token may have finished its query first: this one then
        // writes that attempt's version, so the write takes effect once.
        let version = match self.token_version(&token) {
            Some(version) => version,
            None => {
                let version = self.version_above(cfg, shard, seen);
                self.remember_token(cfg, token, version);
                version
            }
        };
        let mut o = self.ops[i].clone();
        o.querying = false;
        o.version = version;
        // Those that answered the query were heard from since the request left.
        o.heard |= o.answered;
        o.answered = 0;
        o.refused = 0;
        o.best = Stored::default();
        o.deadline_ticks = ticks(cfg.policy.replica_ack_timeout_ticks);
        self.send_replicates(&mut o, io);
        self.ops[i] = o;
    }

    pub(super) fn on_answer(
        &mut self,
        cfg: &Resolved,
        op: D::Op,
        attempt: u8,
        n: NodeId,
        read: Option<Stored<D>>,
        io: &mut impl Io<D>,
    ) {
        // An answer after the deadline finds no request: it only proved the node alive.
        let Some(i) = self.ops.iter().position(|o| o.op == op && o.attempt == attempt) else {
            return;
        };
        let p = &cfg.policy;
        let o = &mut self.ops[i];
        // A write-back counts acks only; a read reply that comes after it began is too late
        // (and a write's version query is over once the write is sent).
        let writing = o.repairing || (o.kind == OpKind::Write && !o.querying);
        if o.asked & bit(n) == 0 || (writing && read.is_some()) {
            return;
        }
        if o.querying {
            let r = read.expect("a version query is answered by reads");
            o.answered |= bit(n);
            o.heard &= !bit(n);
            if r.version > o.best.version {
                o.best = r;
            }
            if quorum::quorum_reached(o.answered.count_ones() as usize, o.needed(cfg)) {
                self.begin_write(cfg, i, io);
            }
            return;
        }
        o.answered |= bit(n);
        o.heard &= !bit(n);
        if let (Some(r), false) = (read, o.repairing) {
            if r.version > o.best.version || o.answered.count_ones() == 1 {
                o.best = r;
                o.holders = if p.read_repair { bit(n) } else { 0 };
            } else if p.read_repair && r.version == o.best.version {
                o.holders |= bit(n);
            }
        }
        if !o.responded && quorum::quorum_reached(o.answered.count_ones() as usize, o.needed(cfg)) {
            let repair = o.kind == OpKind::Read
                && !o.repairing
                && p.read_repair
                && o.best.version > D::Version::default()
                && !quorum::quorum_reached(o.holders.count_ones() as usize, p.write_quorum);
            if repair {
                // Once a reader saw a value, every later read quorum must meet a member that
                // holds it: write it back to a write quorum first (ABD's second phase), and to
                // a joining replica as writes are.
                let shard = o.shard;
                let learner = self.shards[usize::from(shard)].join.as_ref().map(|j| j.replacement);
                let o = &mut self.ops[i];
                o.repairing = true;
                o.learner = learner;
                o.asked |= learner.map_or(0, bit);
                // Those that answered the read were heard from since the request left.
                o.heard |= o.answered & !o.holders;
                o.answered = o.holders;
                o.refused = 0;
                o.deadline_ticks = ticks(p.replica_ack_timeout_ticks);
                let to = o.asked & !o.holders;
                io.event(Event::ReadRepairStarted { op, shard });
                for m in (0..cfg.nodes.len() as NodeId).filter(|&m| to & bit(m) != 0) {
                    let (key, best) = (o.key.clone(), o.best.clone());
                    let msg =
                        Msg::Replicate { op, attempt, shard, key, version: best.version, value: best.value };
                    io.send(Endpoint::Node(m), msg);
                }
                return;
            }
            o.responded = true;
            let (kind, shard, version) = (o.kind, o.shard, o.version);
            let response_value = match kind {
                OpKind::Write => o.value.clone(),
                OpKind::Read => o.best.value.clone(),
            };
            if kind == OpKind::Write {
                io.event(Event::WriteAcked { shard, version });
            }
            io.send(
                Endpoint::Client(D::client(op)),
                Msg::Response { op, attempt, ok: true, value: response_value },
            );
            let o = &self.ops[i];
            let done = o.answered == o.asked;
            if done {
                // Nothing more to learn from this request.
                self.ops.remove(i);
            }
            self.start_copies_when_clear(cfg, shard, io);
            return;
        }
        let o = &self.ops[i];
        if o.responded && o.answered == o.asked {
            self.ops.remove(i);
        }
    }

    /// Node `n` could not do its part (`heard_from` has run: it is alive). Once too few of
    /// those asked could still answer, the client is told at once; the request stays until
    /// its deadline all the same, a write whose acks may still come (a member that did not
    /// refuse may yet apply it).
    pub(super) fn on_refused(
        &mut self,
        cfg: &Resolved,
        op: D::Op,
        attempt: u8,
        n: NodeId,
        io: &mut impl Io<D>,
    ) {
        let Some(o) = self.ops.iter_mut().find(|o| o.op == op && o.attempt == attempt) else {
            return;
        };
        if (o.asked & !o.answered & !o.refused) & bit(n) == 0 || o.fan_out_ticks.is_some() {
            return;
        }
        let was_possible = o.quorum_possible(cfg);
        o.refused |= bit(n);
        if o.responded || !was_possible || o.quorum_possible(cfg) {
            return;
        }
        let why = Failure::Refused {
            answered: o.answered.count_ones() as u8,
            needed: o.needed(cfg),
            refused: o.refused,
            missing: o.asked & !o.answered & !o.refused,
            repairing: o.repairing,
        };
        io.event(Event::RequestFailed { op, why });
        let value = D::Value::default();
        io.send(Endpoint::Client(D::client(op)), Msg::Response { op, attempt, ok: false, value });
    }

    pub(super) fn on_deadline(&mut self, cfg: &Resolved, op: D::Op, attempt: u8, io: &mut impl Io<D>) {
        let i = self
            .ops
            .iter()
            .position(|o| o.op == op && o.attempt == attempt)
            .expect("deadline of a live request");
        let o = self.ops.remove(i);
        // A request refusals left too few to answer was failed when that became so.
        if !o.responded && !o.refused_out(cfg) {
            let why = Failure::Deadline {
                answered: o.answered.count_ones() as u8,
                needed: o.needed(cfg),
                missing: o.asked & !o.answered,
                repairing: o.repairing,
            };
            io.event(Event::RequestFailed { op, why });
            let value = D::Value::default();
            io.send(Endpoint::Client(D::client(op)), Msg::Response { op, attempt, ok: false, value });
        }
        // A node heard from since the request left is alive, if slow or missing this one
        // message; the learner is no member yet: the detector judges it once it is one.
        let missing = o.asked & !o.answered & !o.heard & !o.learner.map_or(0, bit);
        if let Some(h) = detector::health_after_deadline_miss(cfg.policy.failure_detection) {
            for n in 0..cfg.nodes.len() as NodeId {
                if missing & bit(n) != 0 {
                    if h == Health::Dead && self.health[usize::from(n)] != Health::Dead {
                        io.event(Event::DeclaredDead { node: n, silence_ticks: None });
                    }
                    self.believe(cfg, n, h);
                }
            }
            // A request the coordinator kept waiting missed its deadline under the load it
            // waited behind: the policy's load ceiling reads that load, not only today's.
            self.consider_evictions(cfg, self.backlog_work.max(o.queued_behind_work), io);
        }
        self.start_copies_when_clear(cfg, o.shard, io);
    }
}
