//! Load the coordinator learns from outside: the background writes on each partition, and
//! the nodes' compaction debt. And its own load (`coordinator.work_per_tick`): membership
//! updates and catch-up copies queue work, a tick's capacity drains it, and a request or a
//! membership update that arrives behind more than a tick's work waits
//! ([`coordinator_load`]).
//!
//! The coordinator keeps no clock and no memory of how long a burst has lasted. Traffic from
//! clients outside the model (a promotion's cohort) is an input: the router sees it as load,
//! and a driver reports what it sees now. The model's environment ends a burst at a moment the
//! checker chooses and reports the background after it; the store has no way to end a burst
//! and keeps the configured background.

use super::{ticks, Coordinator, Data, Endpoint, Io, Msg, TimerTicks};
use crate::config::Resolved;
use crate::policy::coordinator_load::{self, WorkCapacity};

impl<D: Data> Coordinator<D> {
    /// The background writes per tick the router sees on each partition changed.
    pub fn on_background(&mut self, background: &[u16]) {
        assert_eq!(background.len(), self.background.len(), "one background per partition");
        self.background = background.iter().copied().collect();
    }
}

impl<D: Data> Coordinator<D> {
    /// Ticks something new waits behind the backlog (0 where the load is not modelled): the
    /// rounds of work ahead of it, each `work_round_ticks` long.
    pub(super) fn wait_ticks(&self, cfg: &Resolved) -> TimerTicks {
        cfg.coordinator.work.map_or(0, |w| {
            let rounds = coordinator_load::foreground_wait_ticks(w, self.backlog_work);
            rounds.saturating_mul(cfg.coordinator.work_round_ticks)
        })
    }

    /// Queue the control-plane work `cost` says a step costs (nothing where the load is not
    /// modelled).
    pub(super) fn add_work(&mut self, cfg: &Resolved, cost: impl Fn(WorkCapacity) -> u16) {
        if let Some(w) = cfg.coordinator.work {
            self.backlog_work = coordinator_load::backlog_after_adding(w, self.backlog_work, cost(w));
        }
    }

    /// The remedy: no new membership change while the backlog is above the policy's ceiling.
    pub(super) fn changes_paused(&self, cfg: &Resolved) -> bool {
        coordinator_load::changes_paused(self.backlog_work, cfg.policy.eviction.coordinator_load_ceiling_work)
    }

    /// The head of the membership queue is applied after the update time, and after the
    /// work ahead of it.
    pub(super) fn membership_update_ticks(&self, cfg: &Resolved) -> TimerTicks {
        ticks(cfg.coordinator.membership_update_ticks) + self.wait_ticks(cfg)
    }

    /// A node reported its compaction debt: the rebalancer's next round reads it.
    pub(super) fn on_load_report(&mut self, n: crate::policy::NodeId, debt_pct: u8) {
        assert!(debt_pct <= 100, "debt is a percentage");
        self.debt_pct[usize::from(n)] = debt_pct;
    }

    /// Each rebalancer round, when debt is node state, asks every node for its debt; the round
    /// decides on what it knows now, and the answers serve the next one.
    pub(super) fn ask_loads(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        if !cfg.compaction.dynamic() {
            return;
        }
        for n in 0..cfg.nodes.len() as crate::policy::NodeId {
            io.send(Endpoint::Node(n), Msg::LoadQuery);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Resolved, Scenario};
    use crate::policy::routing::WriteRoute;
    use crate::protocol::{Coordinator, Endpoint, Msg, Outbox};

    fn resolved(model: &str, variant: &str) -> Resolved {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(model);
        let scenario = Scenario::load(&path).expect("the library model loads");
        let v = scenario.variant(variant).expect("the variant exists");
        Resolved::new(&scenario, &v.policy).expect("it resolves")
    }

    #[test]
    fn the_router_admits_by_the_background_it_was_told() {
        // p1 takes 2 writes per tick and the burst offers 2: a checkout write is over.
        let cfg = resolved("hot-partition-burst-ends.toml", "incident");
        let mut c: Coordinator = Coordinator::new(&cfg, 0);
        assert_eq!(c.background.as_slice(), &[2, 0, 0, 0]);
        let throttled = c.admit_write(&cfg, 0, &mut Outbox::default());
        assert_eq!(throttled, WriteRoute::PartitionThrottled);
        // The burst ended: the world says so, and the next tick's write goes through.
        c.on_background(&cfg.partition_background_after(cfg.bursts_ending()));
        assert_eq!(c.background.as_slice(), &[0, 0, 0, 0]);
        c.tick(&cfg);
        assert!(c.admit_write(&cfg, 0, &mut Outbox::default()).admitted());
        // A restart forgets it (the world tells the new coordinator again).
        let restarted: Coordinator = Coordinator::recover(&cfg, 0, &c.durable(&cfg));
        assert_eq!(restarted.background.as_slice(), &[2, 0, 0, 0]);
    }

    #[test]
    fn the_rebalancer_moves_nothing_while_the_coordinator_is_above_its_load_ceiling() {
        let mut cfg = resolved("rebalancer-compaction.toml", "incident");
        let work = crate::policy::coordinator_load::WorkCapacity {
            work_per_tick: 1,
            membership_update_work: 8,
            copy_work: 4,
        };
        cfg.coordinator.work = Some(work);
        cfg.policy.eviction.coordinator_load_ceiling_work = Some(3);
        for (backlog_work, moves) in [(3, true), (4, false)] {
            let mut c: Coordinator = Coordinator::new(&cfg, 0);
            c.backlog_work = backlog_work;
            c.on_rebalance(&cfg, &mut Outbox::default());
            assert_eq!(c.queue.len() == 1, moves, "backlog {backlog_work}: {:?}", c.queue);
        }
    }

    #[test]
    fn the_rebalancer_reads_the_debt_a_node_reported() {
        let cfg = resolved("rebalancer-compaction-debt.toml", "fixed");
        let mut c: Coordinator = Coordinator::new(&cfg, 0);
        // Until n2 reports, the coordinator knows its configured backlog.
        assert_eq!(c.node_loads(&cfg)[1].compaction_debt_pct, 60);
        let report = Msg::LoadReport { compaction_debt_pct: 0 };
        c.on_msg(&cfg, Endpoint::Node(1), report, &mut Outbox::default());
        assert_eq!(c.node_loads(&cfg)[1].compaction_debt_pct, 0);
        // Each rebalancer round asks every node again.
        let mut out = Outbox::default();
        c.ask_loads(&cfg, &mut out);
        let asked: Vec<Endpoint> =
            out.sends.iter().filter(|(_, m)| *m == Msg::LoadQuery).map(|(to, _)| *to).collect();
        assert_eq!(asked, vec![Endpoint::Node(0), Endpoint::Node(1)]);
    }
}
