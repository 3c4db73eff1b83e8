//! What the partitions and backends take from every coordinator of the store together.
//!
//! Each coordinator routes by its own count of the writes it offered this window, as a real
//! router does (`protocol::coordinator::Coordinator::admit_write`); two routers that each see
//! a backend's one free slot both take it. The backend is offered the sum. The meter adds the
//! coordinators' counts up after every step, as the model's ghost does
//! (`protocol::coordinator::fleet_loads`, one function for both), and counts every write
//! offered above a capacity by the fleet. It only measures: no coordinator reads it.
//!
//! The coordinators' windows start when each coordinator does (within milliseconds of each
//! other in `store up`), so the sum is over windows that overlap but need not coincide.

use crate::config::Resolved;
use crate::protocol::coordinator::{fleet_loads, CapacityBreach, RouterLoad};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One coordinator's last reported counts: per partition, per backend.
type Counts = (Vec<u16>, Vec<u16>);

pub struct FleetMeter {
    counts: Mutex<Vec<Counts>>,
    breaches: AtomicU64,
    first: Mutex<Option<(CapacityBreach, u128)>>,
}

impl FleetMeter {
    pub fn new(coordinators: usize) -> FleetMeter {
        assert!(coordinators >= 1, "a fleet has a coordinator");
        FleetMeter {
            counts: Mutex::new(vec![(Vec::new(), Vec::new()); coordinators]),
            breaches: AtomicU64::new(0),
            first: Mutex::new(None),
        }
    }

    /// Coordinator `me` counts `partition_load` and `backend_load` now (its window's writes)
    /// and sees `background` on the partitions; `at_ms`: the time, for the first breach. Each
    /// write `me` offered since its last report to a unit the fleet has now taken beyond
    /// its capacity is a breach.
    pub fn report(
        &self,
        cfg: &Resolved,
        me: u8,
        background: &[u16],
        partition_load: &[u16],
        backend_load: &[u16],
        at_ms: u128,
    ) {
        if cfg.partition_capacity_per_tick.is_none() && !cfg.backends_modelled {
            return;
        }
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let me = usize::from(me);
        // Most steps (the clock's) offer nothing new: nothing to add up.
        if counts[me].0 == partition_load && counts[me].1 == backend_load {
            return;
        }
        let before = std::mem::replace(&mut counts[me], (partition_load.to_vec(), backend_load.to_vec()));
        // A coordinator not heard from yet has offered nothing.
        let empty: Counts = (vec![0; partition_load.len()], vec![0; backend_load.len()]);
        let fleet: Vec<RouterLoad<'_>> = counts
            .iter()
            .map(|c| {
                if c.0.len() == partition_load.len() && c.1.len() == backend_load.len() {
                    c
                } else {
                    &empty
                }
            })
            .map(|(p, b)| (&p[..], &b[..]))
            .collect();
        let grown = |now: &[u16], then: &[u16], i: usize| {
            u64::from(now[i].saturating_sub(then.get(i).copied().unwrap_or(0)))
        };
        let mut new_breaches = 0;
        for u in fleet_loads(cfg, background, &fleet) {
            let Some(capacity) = u.capacity.filter(|&cap| u.offered > cap) else { continue };
            let added = match u.unit {
                crate::protocol::CapacityUnit::Partition(p) => {
                    grown(partition_load, &before.0, usize::from(p))
                }
                crate::protocol::CapacityUnit::Backend(n) => grown(backend_load, &before.1, usize::from(n)),
            };
            if added == 0 {
                continue;
            }
            new_breaches += added;
            let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert((CapacityBreach { unit: u.unit, offered: u.offered, capacity }, at_ms));
        }
        self.breaches.fetch_add(new_breaches, Ordering::Relaxed);
    }

    /// Writes the fleet offered above a capacity so far.
    pub fn breaches(&self) -> u64 {
        self.breaches.load(Ordering::Relaxed)
    }

    /// The first such write: the unit, what the fleet offered it, and when (ms since start).
    pub fn first_breach(&self) -> Option<(CapacityBreach, u128)> {
        *self.first.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-router model: n1 takes 3 writes per tick and has 2 of base load.
    fn two_routers() -> Resolved {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/capacity-routing-two-routers.toml");
        let scenario = crate::config::Scenario::load(&path).expect("the library model loads");
        let v = scenario.variant("fixed-full").expect("the variant exists");
        Resolved::new(&scenario, &v.policy).expect("it resolves")
    }

    #[test]
    fn a_backend_filled_by_two_routers_is_a_breach_neither_sees() {
        let cfg = two_routers();
        assert_eq!((cfg.nodes[0].write_capacity_per_tick, cfg.nodes[0].base_load_per_tick), (Some(3), 2));
        assert_eq!(cfg.nodes[2].base_load_per_tick, 1);
        let meter = FleetMeter::new(2);
        meter.report(&cfg, 0, &[0], &[0], &[1, 0, 0, 0], 10);
        assert_eq!(meter.breaches(), 0, "2 base + 1 fits in 3");
        // rb's own count is 1 too: n1 takes 4.
        meter.report(&cfg, 1, &[0], &[0], &[1, 0, 0, 0], 11);
        assert_eq!(meter.breaches(), 1);
        let (b, at_ms) = meter.first_breach().expect("the breach");
        assert_eq!((b.offered, b.capacity, at_ms), (4, 3, 11));
        // A report that adds nothing to n1 counts nothing more, however long it stays over.
        meter.report(&cfg, 0, &[0], &[0], &[1, 1, 0, 0], 12);
        assert_eq!(meter.breaches(), 1);
        // A new window of ra's: its count falls back, the fleet is at 3 again.
        meter.report(&cfg, 0, &[0], &[0], &[0, 0, 0, 0], 20);
        meter.report(&cfg, 1, &[0], &[0], &[0, 0, 0, 0], 21);
        meter.report(&cfg, 1, &[0], &[0], &[1, 0, 0, 0], 22);
        assert_eq!(meter.breaches(), 1, "2 base + 1");
    }
}
