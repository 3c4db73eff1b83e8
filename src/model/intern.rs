//! Hash-consing of a world state's shared parts, for the states the engine keeps.
//!
//! A state holds its nodes and its coordinator behind `Arc`s, shared with its parent when a
//! step leaves them alone. Siblings and cousins that reach equal coordinators by different
//! steps still hold a copy each: on a 5-node model with heartbeats, 200,000 states of one
//! level held 1,354 distinct coordinators and 64 distinct node vectors, about 1 KB of heap per
//! state. Interning a fresh copy against the equal ones seen recently on this thread makes
//! them one allocation. Equality sees through the pointers and a part's hash is its contents'
//! (`model::shared`), so fingerprints, state counts and every verdict are unchanged: this
//! only changes which allocation a pointer names.

use super::shared::Shared;
use super::state::{Ghost, NodeState, WorldState};
use crate::protocol::{Coordinator, PerNode};
use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::Hash;

/// Entries per table and thread before it is emptied: it holds recent parts only, so its own
/// memory stays bounded (a few MB) however large the exploration.
const INTERNED_MAX: usize = 1 << 14;

type Table<T> = RefCell<HashSet<Shared<T>, foldhash::fast::FixedState>>;

thread_local! {
    static COORDINATORS: Table<Coordinator> = RefCell::default();
    static NODES: Table<PerNode<NodeState>> = RefCell::default();
    static GHOSTS: Table<Ghost> = RefCell::default();
}

/// Point `x` at an equal part interned earlier on this thread, or intern it.
fn intern<T: Hash + Eq>(table: &'static std::thread::LocalKey<Table<T>>, x: &mut Shared<T>) {
    // A part still shared (with the parent state) was interned when that state was kept.
    if Shared::strong_count(x) != 1 {
        return;
    }
    table.with(|t| {
        let mut t = t.borrow_mut();
        if let Some(equal) = t.get(x) {
            *x = equal.clone();
            return;
        }
        if t.len() >= INTERNED_MAX {
            t.clear();
        }
        t.insert(x.clone());
    });
}

/// Make a state that the engine keeps (a frontier state) as small as it can be: its
/// coordinator, nodes and ghost variables interned, its message buffer without spare capacity.
pub fn compact(s: &mut WorldState) {
    intern(&COORDINATORS, &mut s.coord);
    intern(&NODES, &mut s.nodes);
    intern(&GHOSTS, &mut s.ghost);
    s.net.shrink_to_fit();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_parts_become_one_allocation_and_the_state_is_unchanged() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/detector-timing.toml");
        let scenario = crate::config::Scenario::load(&path).expect("the library model loads");
        let cfg = crate::config::Resolved::new(&scenario, &scenario.variants[0].policy).expect("it resolves");
        let world = crate::model::World::new(cfg);
        let init = stateright::Model::init_states(&world).remove(0);
        assert!(!init.coord.silence_ticks.is_empty(), "a model with independent detection");
        let (mut a, mut b) = (init.clone(), init.clone());
        // Two fresh, equal copies (as two different steps would make them).
        a.coord = Shared::new((*a.coord).clone());
        b.coord = Shared::new((*b.coord).clone());
        a.nodes = Shared::new((*a.nodes).clone());
        b.nodes = Shared::new((*b.nodes).clone());
        drop(init);
        compact(&mut a);
        compact(&mut b);
        assert!(Shared::ptr_eq(&a.coord, &b.coord), "equal coordinators share one allocation");
        assert!(Shared::ptr_eq(&a.nodes, &b.nodes), "equal node vectors share one allocation");
        assert_eq!(a, b);
        // A different coordinator is not merged with them.
        let mut c = a.clone();
        let mut other = (*c.coord).clone();
        other.silence_ticks.iter_mut().for_each(|t| *t += 1);
        c.coord = Shared::new(other);
        compact(&mut c);
        assert!(!Shared::ptr_eq(&a.coord, &c.coord));
        assert_ne!(a, c);
    }
}
