//! `Coordinator::quiet_ticks` is a lower bound: on random walks through every quorum model
//! of the library, from every state reached, each coordinator left alone for fewer ticks than
//! it said has no timer due and no window open. The store's coordinator sleeps that long.

use super::*;
use crate::config::{Resolved, Scenario};
use stateright::Model;

/// How far a copy of a coordinator is followed.
const PROBE_TICKS_MAX: u16 = 120;
const WALKS_PER_VARIANT: usize = 8;
const WALK_STEPS: usize = 400;

#[test]
fn quiet_ticks_is_a_lower_bound_on_every_quorum_model_of_the_library() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let (mut seed, mut probed_ticks, mut variants) = (0x9e37_79b9_u64, 0u64, 0);
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "toml")) {
        let scenario = Scenario::load(path).expect("the library model loads");
        for v in &scenario.variants {
            let cfg = Resolved::new(&scenario, &v.policy).expect("it resolves");
            if cfg.policy.leader.is_some() {
                continue;
            }
            variants += 1;
            // Shown with a failing probe's panic: which model it walked.
            eprintln!("walking {} / {}", path.display(), v.name);
            let w = World::new(cfg);
            for _ in 0..WALKS_PER_VARIANT {
                let mut s = w.init_states().remove(0);
                for _ in 0..WALK_STEPS {
                    for c in 0..w.cfg.coordinators.len() as u8 {
                        let cfg = w.cfg.for_stage(s.stage(c));
                        probed_ticks += s.coordinator(c).probe_quiet_ticks(cfg, PROBE_TICKS_MAX);
                    }
                    let mut actions = Vec::new();
                    w.actions(&s, &mut actions);
                    if actions.is_empty() {
                        break;
                    }
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let a = actions.swap_remove((seed >> 33) as usize % actions.len());
                    s = w.next_state(&s, a).expect("an enabled action");
                }
            }
        }
    }
    assert!(variants >= 40, "the library's quorum variants were walked ({variants})");
    assert!(probed_ticks >= 100_000, "the coordinators were quiet for a while ({probed_ticks} ticks probed)");
}
