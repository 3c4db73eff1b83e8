//! `Repl.tla`, the Repl TLA+ benchmark spec, as a `stateright::Model`, for replicheck's engine.
//!
//! The spec: `Nodes` replicas buffer client writes of each key in memory, flush them to disk,
//! crash (memory falls back to disk) and restart; a key's version is acknowledged once a
//! majority quorum has it on disk (with `Buggy`, once a quorum has *any* version on disk).
//! `Durable`: every acknowledged version is on the disk of some node.
//!
//! The constants are those of the benchmark: `Nodes = {n1, n2, n3}` and `Keys = {k1, k2}` are
//! fixed ([`NODES`], [`KEYS`]); `MaxVer` (1 to 3) and `Buggy` are parameters. With
//! `MaxVer = 3` the space has 2,427,180 distinct states; the longest shortest path from the
//! initial state is 20 steps (TLC's "depth 21" counts the initial state as depth 1).
//!
//! # The state
//!
//! One packed `u64` (35 bits used), so hashing a state is hashing one word and the frontier
//! holds 16 bytes per state (index + state):
//!
//! | bits    | field                                     |
//! |---------|-------------------------------------------|
//! | 0..12   | `mem[n][k]`, 2 bits each at `2 * (n * KEYS + k)` |
//! | 12..24  | `disk[n][k]`, same order                  |
//! | 24..28  | `acked[k]`, 2 bits each                   |
//! | 28..32  | `next[k] - 1`, 2 bits each (`next[k]` is 1 to `MaxVer + 1`) |
//! | 32..35  | `alive`, bit `n` for node `n`              |
//!
//! # `Ack(k)` and the transition count
//!
//! `Ack(k)` is `\E v : (\E Q \in Quorum : ...) /\ acked' = [acked EXCEPT ![k] = v]`: the
//! successor depends on `v` only. [`AckEnumeration::PerValue`] (the default) offers one action
//! per `v` that has a quorum: 15,880,950 transitions. [`AckEnumeration::PerWitness`] offers
//! one per `(v, Q)` pair that satisfies the body, as TLC enumerates it: 19,065,906
//! transitions. (The benchmark's published figures are TLC's "states generated", 15,880,951 and
//! 19,065,907, which also count the initial state.) Both reach the same distinct states with
//! the same depth; per-witness only adds duplicate successors (more work for the engine,
//! nothing new to check), so the benchmark uses per-value.

use stateright::{Model, Property};
use std::fmt;

/// `Cardinality(Nodes)`.
pub const NODES: usize = 3;
/// `Cardinality(Keys)`.
pub const KEYS: usize = 2;

const MEM: u32 = 0;
const DISK: u32 = MEM + 2 * (NODES * KEYS) as u32;
const ACKED: u32 = DISK + 2 * (NODES * KEYS) as u32;
const NEXT: u32 = ACKED + 2 * KEYS as u32;
const ALIVE: u32 = NEXT + 2 * KEYS as u32;
const ALL_ALIVE: u64 = (1 << NODES) - 1;
const _: () = assert!(ALIVE as usize + NODES <= 64, "the state must fit one u64");

/// How `Ack(k)` is turned into actions (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AckEnumeration {
    /// One action per acknowledged version `v` (15,880,950 transitions at `MaxVer = 3`).
    #[default]
    PerValue,
    /// One action per witness `(v, Q)`, as TLC generates them (19,065,906 transitions).
    PerWitness,
}

/// The constants of `Repl.tla` that are not fixed here, and how `Ack` is enumerated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repl {
    /// `MaxVer`, 1 to 3 (versions are stored in 2 bits).
    pub max_ver: u8,
    /// `Buggy`: acknowledge once a quorum has any version on disk.
    pub buggy: bool,
    pub ack: AckEnumeration,
}

impl Default for Repl {
    /// The benchmark's configuration: `MaxVer = 3`, `Buggy = FALSE`, per-value `Ack`.
    fn default() -> Self {
        Repl { max_ver: 3, buggy: false, ack: AckEnumeration::PerValue }
    }
}

/// A state of `Repl.tla`: `mem`, `disk`, `acked`, `alive` and `next`, packed in one word.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReplState(u64);

impl ReplState {
    #[inline]
    fn get(self, at: u32) -> u8 {
        ((self.0 >> at) & 3) as u8
    }
    #[inline]
    fn set(&mut self, at: u32, value: u8) {
        debug_assert!(value <= 3);
        self.0 = (self.0 & !(3 << at)) | (u64::from(value) << at);
    }

    /// `mem[n][k]`.
    #[inline]
    pub fn mem(self, n: usize, k: usize) -> u8 {
        self.get(MEM + 2 * (n * KEYS + k) as u32)
    }
    /// `disk[n][k]`.
    #[inline]
    pub fn disk(self, n: usize, k: usize) -> u8 {
        self.get(DISK + 2 * (n * KEYS + k) as u32)
    }
    /// `acked[k]`.
    #[inline]
    pub fn acked(self, k: usize) -> u8 {
        self.get(ACKED + 2 * k as u32)
    }
    /// `next[k]`.
    #[inline]
    pub fn next(self, k: usize) -> u8 {
        self.get(NEXT + 2 * k as u32) + 1
    }
    /// `alive`, as a bit set over the nodes.
    #[inline]
    pub fn alive_set(self) -> u8 {
        ((self.0 >> ALIVE) & ALL_ALIVE) as u8
    }
    /// `n \in alive`.
    #[inline]
    pub fn alive(self, n: usize) -> bool {
        self.alive_set() & (1 << n) != 0
    }

    #[inline]
    fn set_mem(&mut self, n: usize, k: usize, v: u8) {
        self.set(MEM + 2 * (n * KEYS + k) as u32, v)
    }
    #[inline]
    fn set_disk(&mut self, n: usize, k: usize, v: u8) {
        self.set(DISK + 2 * (n * KEYS + k) as u32, v)
    }
    #[inline]
    fn set_acked(&mut self, k: usize, v: u8) {
        self.set(ACKED + 2 * k as u32, v)
    }
    #[inline]
    fn set_next(&mut self, k: usize, v: u8) {
        self.set(NEXT + 2 * k as u32, v - 1)
    }
    #[inline]
    fn toggle_alive(&mut self, n: usize) {
        self.0 ^= 1 << (ALIVE + n as u32);
    }

    /// The packed word (the layout is in the module documentation).
    pub fn bits(self) -> u64 {
        self.0
    }

    /// Node `n`'s fields (`mem[n]`, `disk[n]`, `n \in alive`) as one record: what a
    /// permutation of the nodes moves around.
    #[inline]
    fn node_record(self, n: usize) -> u16 {
        let mut r = u16::from(self.alive(n));
        for k in 0..KEYS {
            r = (r << 4) | u16::from(self.mem(n, k)) << 2 | u16::from(self.disk(n, k));
        }
        r
    }

    #[inline]
    fn set_node_record(&mut self, n: usize, mut r: u16) {
        for k in (0..KEYS).rev() {
            self.set_disk(n, k, (r & 3) as u8);
            self.set_mem(n, k, ((r >> 2) & 3) as u8);
            r >>= 4;
        }
        if self.alive(n) != (r & 1 == 1) {
            self.toggle_alive(n);
        }
    }

    /// The representative of this state's class under permutations of the nodes: the nodes'
    /// records in ascending order. `Nodes` is a symmetry set of `Repl.tla` (`Sym`): `Init`,
    /// `Next` (quorums are all majorities), `Durable` and the set of fairness conditions are
    /// unchanged by renaming nodes, so states of one class satisfy the same properties.
    pub fn canonical(self) -> ReplState {
        let mut records: [u16; NODES] = std::array::from_fn(|n| self.node_record(n));
        records.sort_unstable();
        let mut t = self;
        for (n, &r) in records.iter().enumerate() {
            t.set_node_record(n, r);
        }
        t
    }

    /// The nodes (as a bit set) whose disk holds version `at_least` of `k` or a later one.
    #[inline]
    fn disk_at_least(self, k: usize, at_least: u8) -> u8 {
        (0..NODES).filter(|&n| self.disk(n, k) >= at_least).fold(0, |set, n| set | 1 << n)
    }
}

impl fmt::Debug for ReplState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = *self;
        let table = |field: fn(ReplState, usize, usize) -> u8| {
            (0..NODES)
                .map(|n| {
                    let row: Vec<String> = (0..KEYS).map(|k| field(s, n, k).to_string()).collect();
                    format!("n{}:[{}]", n + 1, row.join(","))
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let per_key = |field: fn(ReplState, usize) -> u8| {
            (0..KEYS).map(|k| field(s, k).to_string()).collect::<Vec<_>>().join(",")
        };
        let alive: Vec<String> = (0..NODES).filter(|&n| s.alive(n)).map(|n| format!("n{}", n + 1)).collect();
        write!(
            f,
            "mem {{{}}} disk {{{}}} acked [{}] next [{}] alive {{{}}}",
            table(ReplState::mem),
            table(ReplState::disk),
            per_key(ReplState::acked),
            per_key(ReplState::next),
            alive.join(",")
        )
    }
}

/// The actions of `Next` (nodes and keys numbered from 0: `n1` is 0, `k1` is 0).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplAction {
    Write {
        key: u8,
    },
    Flush {
        node: u8,
        key: u8,
    },
    /// `Ack(k)` choosing `v = version`; `quorum` (a node bit set) is the witness `Q` under
    /// [`AckEnumeration::PerWitness`], `None` under per-value enumeration.
    Ack {
        key: u8,
        version: u8,
        quorum: Option<u8>,
    },
    Crash {
        node: u8,
    },
    Restart {
        node: u8,
    },
}

impl fmt::Debug for ReplAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ReplAction::Write { key } => write!(f, "Write(k{})", key + 1),
            ReplAction::Flush { node, key } => write!(f, "Flush(n{}, k{})", node + 1, key + 1),
            ReplAction::Ack { key, version, quorum } => {
                write!(f, "Ack(k{}) with v = {version}", key + 1)?;
                if let Some(q) = quorum {
                    let q: Vec<String> =
                        (0..NODES).filter(|n| q & (1 << n) != 0).map(|n| format!("n{}", n + 1)).collect();
                    write!(f, ", Q = {{{}}}", q.join(", "))?;
                }
                Ok(())
            }
            ReplAction::Crash { node } => write!(f, "Crash(n{})", node + 1),
            ReplAction::Restart { node } => write!(f, "Restart(n{})", node + 1),
        }
    }
}

/// `Quorum`: the node sets with more than half of the nodes, as bit sets (in numeric order).
pub fn quorums() -> impl Iterator<Item = u8> {
    (1u8..1 << NODES).filter(|q| 2 * q.count_ones() as usize > NODES)
}

/// The weak-fairness classes of `Fairness`: `Flush(n, k)` is class `n * KEYS + k`, `Ack(k)` is
/// class `NODES * KEYS + k` (eight classes: one `u8` bit each). `Write`, `Crash` and `Restart`
/// are not fair.
pub const FAIR_CLASSES: usize = NODES * KEYS + KEYS;
const _: () = assert!(FAIR_CLASSES <= 8);

impl Repl {
    pub fn new(max_ver: u8, buggy: bool, ack: AckEnumeration) -> Repl {
        assert!((1..=3).contains(&max_ver), "MaxVer must be 1 to 3 (versions are stored in 2 bits)");
        Repl { max_ver, buggy, ack }
    }

    /// The benchmark's bug-free configuration (`MaxVer = 3`), per-value `Ack`.
    pub fn benchmark() -> Repl {
        Repl::default()
    }

    /// The version a quorum's disks must hold for `Ack(k)` to choose `v`.
    #[inline]
    fn ack_threshold(&self, v: u8) -> u8 {
        if self.buggy {
            1
        } else {
            v
        }
    }

    /// `Durable == \A k \in Keys : acked[k] > 0 => \E n \in Nodes : disk[n][k] >= acked[k]`.
    pub fn durable(s: &ReplState) -> bool {
        (0..KEYS).all(|k| s.acked(k) == 0 || (0..NODES).any(|n| s.disk(n, k) >= s.acked(k)))
    }

    /// The `Durable` invariant as a stateright property.
    pub fn durable_property() -> Property<Repl> {
        Property::always("Durable", |_, s| Repl::durable(s))
    }

    /// The fairness class of an action (see [`FAIR_CLASSES`]), `None` for unfair actions.
    pub fn fair_class(action: &ReplAction) -> Option<usize> {
        match *action {
            ReplAction::Flush { node, key } => Some(node as usize * KEYS + key as usize),
            ReplAction::Ack { key, .. } => Some(NODES * KEYS + key as usize),
            _ => None,
        }
    }

    /// The edge label for weak-fairness analysis: the action's class bit, or 0 for an unfair
    /// action or a step that leaves the state unchanged (TLA's `<<A>>_vars` is a change).
    pub fn fairness_label(from: &ReplState, action: &ReplAction, to: &ReplState) -> u8 {
        match Repl::fair_class(action) {
            Some(class) if from != to => 1 << class,
            _ => 0,
        }
    }

    /// The class bit of `Ack(k)`.
    pub fn ack_class_bit(key: usize) -> u8 {
        1 << (NODES * KEYS + key)
    }

    /// The fairness classes enabled in `s`, one bit per class (for weak-fairness analysis).
    pub fn enabled_classes(&self, s: &ReplState) -> u8 {
        let mut bits = 0u8;
        for n in 0..NODES {
            for k in 0..KEYS {
                if s.alive(n) && s.disk(n, k) < s.mem(n, k) {
                    bits |= 1 << (n * KEYS + k);
                }
            }
        }
        for k in 0..KEYS {
            if self.ack_versions(s, k).next().is_some() {
                bits |= 1 << (NODES * KEYS + k);
            }
        }
        bits
    }

    /// The versions `v` that `Ack(k)` may choose in `s`.
    fn ack_versions(&self, s: &ReplState, k: usize) -> impl Iterator<Item = u8> + '_ {
        let s = *s;
        (s.acked(k) + 1..s.next(k))
            .filter(move |&v| 2 * s.disk_at_least(k, self.ack_threshold(v)).count_ones() as usize > NODES)
    }
}

impl Model for Repl {
    type State = ReplState;
    type Action = ReplAction;

    fn init_states(&self) -> Vec<ReplState> {
        let mut s = ReplState(ALL_ALIVE << ALIVE);
        for k in 0..KEYS {
            s.set_next(k, 1);
        }
        vec![s]
    }

    /// In the order of `Next`: per key `Write(k)`, `Ack(k)`; per node `Crash(n)`, `Restart(n)`,
    /// `Flush(n, k)` per key. Only enabled actions are offered.
    fn actions(&self, s: &ReplState, actions: &mut Vec<ReplAction>) {
        let s = *s;
        for k in 0..KEYS {
            let key = k as u8;
            if s.next(k) <= self.max_ver {
                actions.push(ReplAction::Write { key });
            }
            for v in s.acked(k) + 1..s.next(k) {
                let holding = s.disk_at_least(k, self.ack_threshold(v));
                match self.ack {
                    AckEnumeration::PerValue => {
                        if 2 * holding.count_ones() as usize > NODES {
                            actions.push(ReplAction::Ack { key, version: v, quorum: None });
                        }
                    }
                    AckEnumeration::PerWitness => {
                        for q in quorums() {
                            if q & holding == q {
                                actions.push(ReplAction::Ack { key, version: v, quorum: Some(q) });
                            }
                        }
                    }
                }
            }
        }
        let alive = s.alive_set();
        for n in 0..NODES {
            let node = n as u8;
            if s.alive(n) {
                if alive.count_ones() > 1 {
                    actions.push(ReplAction::Crash { node });
                }
            } else {
                actions.push(ReplAction::Restart { node });
            }
            if s.alive(n) {
                for k in 0..KEYS {
                    if s.disk(n, k) < s.mem(n, k) {
                        actions.push(ReplAction::Flush { node, key: k as u8 });
                    }
                }
            }
        }
    }

    fn next_state(&self, s: &ReplState, action: ReplAction) -> Option<ReplState> {
        let mut t = *s;
        match action {
            ReplAction::Write { key } => {
                let k = key as usize;
                let v = s.next(k);
                for n in 0..NODES {
                    if s.alive(n) {
                        t.set_mem(n, k, v);
                    }
                }
                t.set_next(k, v + 1);
            }
            ReplAction::Flush { node, key } => {
                let (n, k) = (node as usize, key as usize);
                t.set_disk(n, k, s.mem(n, k));
            }
            ReplAction::Ack { key, version, .. } => t.set_acked(key as usize, version),
            ReplAction::Crash { node } => {
                let n = node as usize;
                t.toggle_alive(n);
                for k in 0..KEYS {
                    t.set_mem(n, k, s.disk(n, k));
                }
            }
            ReplAction::Restart { node } => t.toggle_alive(node as usize),
        }
        Some(t)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![Repl::durable_property()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_is_all_zero_all_alive_next_one() {
        let s = Repl::default().init_states()[0];
        assert_eq!(s.alive_set(), 0b111);
        assert!((0..KEYS).all(|k| s.next(k) == 1 && s.acked(k) == 0));
        assert!((0..NODES).all(|n| (0..KEYS).all(|k| s.mem(n, k) == 0 && s.disk(n, k) == 0)));
        assert_eq!(format!("{s:?}"), "mem {n1:[0,0] n2:[0,0] n3:[0,0]} disk {n1:[0,0] n2:[0,0] n3:[0,0]} acked [0,0] next [1,1] alive {n1,n2,n3}");
    }

    #[test]
    fn canonical_sorts_nodes_and_is_invariant_under_renaming() {
        let m = Repl::default();
        let s = m.init_states()[0];
        let s = m.next_state(&s, ReplAction::Crash { node: 0 }).unwrap();
        let s = m.next_state(&s, ReplAction::Write { key: 1 }).unwrap();
        let s = m.next_state(&s, ReplAction::Flush { node: 2, key: 1 }).unwrap();
        // The same history with nodes renamed 0 -> 1 -> 2 -> 0.
        let t = m.init_states()[0];
        let t = m.next_state(&t, ReplAction::Crash { node: 1 }).unwrap();
        let t = m.next_state(&t, ReplAction::Write { key: 1 }).unwrap();
        let t = m.next_state(&t, ReplAction::Flush { node: 0, key: 1 }).unwrap();
        assert_ne!(s, t);
        assert_eq!(s.canonical(), t.canonical());
        assert_eq!(s.canonical().canonical(), s.canonical(), "idempotent");
        let c = s.canonical();
        // Per-key fields and the multiset of node records are unchanged.
        assert_eq!((c.next(1), c.acked(1), c.alive_set().count_ones()), (2, 0, 2));
        let mut records: Vec<u16> = (0..NODES).map(|n| s.node_record(n)).collect();
        records.sort_unstable();
        assert_eq!(records, (0..NODES).map(|n| c.node_record(n)).collect::<Vec<_>>());
    }

    #[test]
    fn quorums_are_the_majorities() {
        assert_eq!(quorums().collect::<Vec<_>>(), vec![0b011, 0b101, 0b110, 0b111]);
    }

    #[test]
    fn write_flush_ack_crash_restart() {
        let m = Repl { ack: AckEnumeration::PerWitness, ..Repl::default() };
        let s = m.init_states()[0];
        let s = m.next_state(&s, ReplAction::Crash { node: 2 }).unwrap();
        let s = m.next_state(&s, ReplAction::Write { key: 1 }).unwrap();
        assert_eq!((s.mem(0, 1), s.mem(1, 1), s.mem(2, 1), s.next(1)), (1, 1, 0, 2));
        let s = m.next_state(&s, ReplAction::Flush { node: 0, key: 1 }).unwrap();
        let s = m.next_state(&s, ReplAction::Flush { node: 1, key: 1 }).unwrap();
        let mut acts = Vec::new();
        m.actions(&s, &mut acts);
        let acks: Vec<_> = acts.iter().filter(|a| matches!(a, ReplAction::Ack { .. })).collect();
        assert_eq!(acks, [&ReplAction::Ack { key: 1, version: 1, quorum: Some(0b011) }]);
        assert!(acts.contains(&ReplAction::Restart { node: 2 }));
        let s = m.next_state(&s, ReplAction::Ack { key: 1, version: 1, quorum: Some(0b011) }).unwrap();
        assert_eq!(s.acked(1), 1);
        assert!(Repl::durable(&s));
        // A crash reverts memory to disk.
        let s = m.next_state(&s, ReplAction::Write { key: 0 }).unwrap();
        let s = m.next_state(&s, ReplAction::Crash { node: 0 }).unwrap();
        assert_eq!((s.mem(0, 0), s.mem(1, 0), s.alive_set()), (0, 1, 0b010));
        let mut acts = Vec::new();
        m.actions(&s, &mut acts);
        assert!(!acts.contains(&ReplAction::Crash { node: 1 }), "the last alive node cannot crash");
        assert_eq!(Repl::fair_class(&ReplAction::Flush { node: 1, key: 0 }), Some(2));
        assert_eq!(m.enabled_classes(&s), 1 << 2, "only Flush(n2, k1) is enabled");
    }
}
