//! Cycle analysis on the explored state graph: livelocks that stateright's `eventually`
//! cannot see (it only follows acyclic paths, so a behaviour that loops forever without
//! reaching the goal is silently accepted).
//!
//! A query asks for a reachable cycle whose every edge carries the labels `every_edge`, and
//! which, for each bit of `some_edge`, takes at least one edge carrying that bit. The timed
//! world labels `Tick` edges "time passes": a cycle without one is infinitely many steps in
//! no time, not a behaviour, and is never reported. Actor steps in the timed world are urgent
//! (a due message or timer blocks `Tick`), so any cycle that lets time pass is fair to the
//! actors; only the environment (a crashed node that never restarts) may stay unfair, which is
//! the "after faults stop" of the liveness properties.
//!
//! Strongly connected components are found with an iterative Tarjan pass (no recursion, so no
//! depth limit). A violation is reported as a lasso: the shortest path to the cycle's state
//! nearest the initial state, then a loop from it through the required edges and back.

use super::Graph;

/// What a violating cycle must look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CycleQuery {
    pub every_edge: u8,
    pub some_edge: u8,
    /// Weak fairness: a cycle counts only if every class (label bit) here is taken on it or
    /// disabled in one of its states. A class is enabled in a state when one of the state's
    /// edges carries its bit (labelers give state-preserving steps no class, as TLA's
    /// `ENABLED <<A>>_vars` asks).
    pub fair: u8,
    /// Every state on the cycle must have these classes enabled ("stays enabled forever").
    pub every_state_enabled: u8,
}

impl CycleQuery {
    /// Whether one closed walk is a cycle this query forbids, given the labels of its edges
    /// and, for each of its states, the classes enabled there. `enabled` is read only when the
    /// query asks for fairness or classes that stay enabled; otherwise it may be empty.
    pub fn forbids(&self, labels: &[u8], enabled: &[u8]) -> bool {
        assert!(
            (self.fair == 0 && self.every_state_enabled == 0) || enabled.len() == labels.len(),
            "fairness needs the classes enabled in each state of the walk"
        );
        let taken = labels.iter().fold(0u8, |acc, l| acc | l);
        let every = labels.iter().all(|l| l & self.every_edge == self.every_edge);
        let some = taken & self.some_edge == self.some_edge;
        // Each fair class is taken on the walk or disabled in one of its states.
        let fair = (0..8)
            .map(|b| 1u8 << b)
            .filter(|c| self.fair & c != 0)
            .all(|c| taken & c != 0 || enabled.iter().any(|e| e & c == 0));
        let stays_enabled = self.every_state_enabled == 0
            || enabled.iter().all(|e| e & self.every_state_enabled == self.every_state_enabled);
        every && some && fair && stays_enabled
    }
}

/// A cycle found: the state it starts and ends at, and the loop as (edge index, target) steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lasso {
    pub stem_end: u32,
    /// The loop's states after `stem_end`, ending with `stem_end` again.
    pub loop_states: Vec<u32>,
    /// The label each loop step must carry.
    pub loop_labels: Vec<u8>,
}

fn edge_ok(graph: &Graph, e: usize, every_edge: u8) -> bool {
    graph.labels[e] & every_edge == every_edge
}

/// The classes enabled in each expanded state: the union of its edges' labels.
pub fn enabled_classes(graph: &Graph) -> Vec<u8> {
    (0..graph.state_count() as u32)
        .map(|v| graph.edge_range(v).fold(0u8, |m, e| m | graph.labels[e]))
        .collect()
}

/// The edges a query may use: the label filter, and both ends in states with the required
/// classes enabled.
fn usable(graph: &Graph, enabled: &[u8], q: &CycleQuery, v: u32, e: usize) -> bool {
    let w = graph.targets[e] as usize;
    w < enabled.len()
        && edge_ok(graph, e, q.every_edge)
        && enabled[v as usize] & q.every_state_enabled == q.every_state_enabled
        && enabled[w] & q.every_state_enabled == q.every_state_enabled
}

/// Strongly connected components of the subgraph of edges carrying `every_edge`.
/// Returns the component id of every state (iterative Tarjan).
pub fn components(graph: &Graph, every_edge: u8) -> Vec<u32> {
    components_where(graph, |_, e| edge_ok(graph, e, every_edge))
}

/// Tarjan's per-state bookkeeping in one record, so visiting a successor touches one cache
/// line rather than three arrays. "On the stack" is "visited, no component yet".
#[derive(Clone, Copy)]
struct Visit {
    index: u32,
    low: u32,
    comp: u32,
}

/// Strongly connected components of the subgraph of edges `(v, e)` that `keep` accepts.
pub fn components_where(graph: &Graph, keep: impl Fn(u32, usize) -> bool) -> Vec<u32> {
    const NONE: u32 = u32::MAX;
    let n = graph.state_count();
    assert!((n as u64) < u64::from(NONE), "state indices fit in u32 below the NONE marker");
    let mut visit = vec![Visit { index: NONE, low: 0, comp: NONE }; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut next_index = 0u32;
    let mut next_comp = 0u32;
    // Explicit DFS stack: (state, position of the next edge to look at, end of its edges).
    let mut dfs: Vec<(u32, usize, usize)> = Vec::new();
    for root in 0..n as u32 {
        if visit[root as usize].index != NONE {
            continue;
        }
        let range = graph.edge_range(root);
        dfs.push((root, range.start, range.end));
        visit[root as usize] = Visit { index: next_index, low: next_index, comp: NONE };
        next_index += 1;
        stack.push(root);
        while let Some(&mut (v, ref mut e, end)) = dfs.last_mut() {
            if *e < end {
                let edge = *e;
                *e += 1;
                let w = graph.targets[edge];
                if (w as usize) >= n || !keep(v, edge) {
                    continue; // never expanded (exploration cut short), or filtered out
                }
                let wv = visit[w as usize];
                if wv.index == NONE {
                    visit[w as usize] = Visit { index: next_index, low: next_index, comp: NONE };
                    next_index += 1;
                    stack.push(w);
                    let range = graph.edge_range(w);
                    dfs.push((w, range.start, range.end));
                } else if wv.comp == NONE {
                    let low = &mut visit[v as usize].low;
                    *low = (*low).min(wv.index);
                }
            } else {
                dfs.pop();
                let vv = visit[v as usize];
                if let Some(&(parent, _, _)) = dfs.last() {
                    let low = &mut visit[parent as usize].low;
                    *low = (*low).min(vv.low);
                }
                if vv.low == vv.index {
                    loop {
                        let w = stack.pop().expect("Tarjan stack holds the component");
                        visit[w as usize].comp = next_comp;
                        if w == v {
                            break;
                        }
                    }
                    next_comp += 1;
                }
            }
        }
    }
    visit.into_iter().map(|v| v.comp).collect()
}

/// Find a cycle matching `query`, as a lasso from the state of the cycle nearest the initial
/// state (states are numbered in BFS order, so the smallest index is the nearest).
pub fn find(graph: &Graph, query: CycleQuery) -> Option<Lasso> {
    find_all(graph, &[query]).pop().flatten()
}

/// `find` for several queries: those that keep the same edges (same `every_edge` and
/// `every_state_enabled`) share one strongly-connected-components pass.
pub fn find_all(graph: &Graph, queries: &[CycleQuery]) -> Vec<Option<Lasso>> {
    let enabled = enabled_classes(graph);
    let mut found = vec![None; queries.len()];
    let mut done = vec![false; queries.len()];
    for i in 0..queries.len() {
        if done[i] {
            continue;
        }
        let q = queries[i];
        let keep = |v: u32, e: usize| usable(graph, &enabled, &q, v, e);
        let comp = components_where(graph, keep);
        let summary = summarize(graph, &comp, &enabled, keep);
        for j in i..queries.len() {
            let other = queries[j];
            if done[j]
                || (other.every_edge, other.every_state_enabled) != (q.every_edge, q.every_state_enabled)
            {
                continue;
            }
            done[j] = true;
            found[j] = summary.best(other).map(|c| {
                build_loop(graph, &comp, &enabled, c as u32, summary.first[c], other, summary.taken[c])
            });
        }
    }
    found
}

/// Per component: the labels its internal edges carry, the fair classes disabled in one of
/// its states, whether it has an internal edge at all, and its first (nearest) state.
struct Summary {
    taken: Vec<u8>,
    disabled: Vec<u8>,
    internal: Vec<bool>,
    first: Vec<u32>,
}

fn summarize(graph: &Graph, comp: &[u32], enabled: &[u8], keep: impl Fn(u32, usize) -> bool) -> Summary {
    let n = graph.state_count();
    let comp_count = comp.iter().filter(|c| **c != u32::MAX).map(|c| c + 1).max().unwrap_or(0) as usize;
    let mut s = Summary {
        taken: vec![0u8; comp_count],
        disabled: vec![0u8; comp_count],
        internal: vec![false; comp_count],
        first: vec![u32::MAX; comp_count],
    };
    for v in 0..n as u32 {
        let c = comp[v as usize] as usize;
        s.first[c] = s.first[c].min(v);
        s.disabled[c] |= !enabled[v as usize];
        for e in graph.edge_range(v) {
            let w = graph.targets[e];
            if (w as usize) < n && comp[w as usize] as usize == c && keep(v, e) {
                // An internal edge lies on a cycle: v and w are strongly connected.
                s.taken[c] |= graph.labels[e];
                s.internal[c] = true;
            }
        }
    }
    s
}

impl Summary {
    /// The qualifying component nearest the initial state.
    fn best(&self, query: CycleQuery) -> Option<usize> {
        // Weak fairness needs no further splitting: if a component fails it, some fair class
        // is enabled in all its states and taken on none of its edges, and so on every
        // sub-cycle.
        (0..self.first.len())
            .filter(|&c| self.internal[c] && self.taken[c] & query.some_edge == query.some_edge)
            .filter(|&c| (self.taken[c] | self.disabled[c]) & query.fair == query.fair)
            .min_by_key(|&c| self.first[c])
    }
}

/// A closed walk inside component `c` from `start`: it takes an edge with each `some_edge`
/// bit and, for each fair class, takes it or passes a state where it is disabled.
fn build_loop(
    graph: &Graph,
    comp: &[u32],
    enabled: &[u8],
    c: u32,
    start: u32,
    query: CycleQuery,
    taken: u8,
) -> Lasso {
    let n = graph.state_count();
    let inside = |v: u32, e: usize| {
        let w = graph.targets[e];
        (w as usize) < n && comp[w as usize] == c && usable(graph, enabled, &query, v, e)
    };
    let mut states = Vec::new();
    let mut labels = Vec::new();
    let mut at = start;
    // Fair classes the start state already has disabled are discharged there.
    let mut need_take = query.some_edge | (query.fair & taken);
    let mut need_disabled = query.fair & !taken & enabled[start as usize];
    need_take &= !(query.fair & !enabled[start as usize] & !query.some_edge);
    while need_take | need_disabled != 0 {
        let wanted = |e: usize| {
            graph.labels[e] & need_take != 0
                || !enabled[graph.targets[e] as usize] & (need_disabled | (need_take & query.fair)) != 0
        };
        let (path, edge) = bfs_to_edge(graph, at, &inside, query.every_edge, wanted)
            .expect("a qualifying component has every required edge and state inside it");
        for &(w, l) in &path {
            states.push(w);
            labels.push(l);
        }
        let w = graph.targets[edge];
        let l = graph.labels[edge];
        need_take &= !l;
        let off = !enabled[w as usize];
        need_disabled &= !off;
        need_take &= !(off & query.fair & !query.some_edge);
        states.push(w);
        labels.push(l & (query.some_edge | query.every_edge | query.fair));
        at = w;
    }
    // Back to the start (for a loop with nothing required, leave it at least once).
    if at != start || states.is_empty() {
        let (path, edge) = bfs_to_edge(graph, at, &inside, query.every_edge, |e| graph.targets[e] == start)
            .expect("the start is reachable inside its component");
        for &(w, l) in &path {
            states.push(w);
            labels.push(l);
        }
        states.push(start);
        labels.push(graph.labels[edge] & query.every_edge);
    }
    Lasso { stem_end: start, loop_states: states, loop_labels: labels }
}

/// Shortest walk (by BFS inside the component) from `from` to the source of an edge that
/// satisfies `want`; returns the states walked (with the labels their entering edges need)
/// and that edge.
fn bfs_to_edge(
    graph: &Graph,
    from: u32,
    inside: &dyn Fn(u32, usize) -> bool,
    every_edge: u8,
    want: impl Fn(usize) -> bool,
) -> Option<(Vec<(u32, u8)>, usize)> {
    use std::collections::{HashMap, VecDeque};
    let mut prev: HashMap<u32, (u32, usize)> = HashMap::new();
    let mut queue = VecDeque::from([from]);
    let mut visited = std::collections::HashSet::from([from]);
    while let Some(v) = queue.pop_front() {
        for e in graph.edge_range(v) {
            if !inside(v, e) {
                continue;
            }
            if want(e) {
                let mut path = Vec::new();
                let mut at = v;
                while at != from {
                    let (p, pe) = prev[&at];
                    path.push((at, graph.labels[pe] & every_edge));
                    at = p;
                }
                path.reverse();
                return Some((path, e));
            }
            let w = graph.targets[e];
            if visited.insert(w) {
                prev.insert(w, (v, e));
                queue.push_back(w);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_walk_is_judged_as_the_graph_search_judges_it() {
        const TICK: u8 = 1;
        const MOVE: u8 = 2;
        let converges = CycleQuery { every_edge: 0, some_edge: TICK | MOVE, ..CycleQuery::default() };
        assert!(converges.forbids(&[TICK, MOVE], &[]));
        assert!(!converges.forbids(&[TICK, TICK], &[]), "no move: the topology settles");
        let pending = CycleQuery { every_edge: MOVE, some_edge: TICK, ..CycleQuery::default() };
        assert!(!pending.forbids(&[TICK | MOVE, TICK], &[]), "one edge without the class");
        // Weak fairness: a class enabled in every state and never taken excuses the walk.
        let fair = CycleQuery { every_edge: 0, some_edge: TICK, fair: MOVE, every_state_enabled: 0 };
        assert!(!fair.forbids(&[TICK, TICK], &[MOVE | TICK, MOVE | TICK]));
        assert!(fair.forbids(&[TICK, TICK], &[MOVE | TICK, TICK]), "disabled once: not unfair");
    }

    const TICK: u8 = 1;
    const MOVE: u8 = 2;

    /// Build a graph from (from, to, label) edges over `n` states.
    fn graph(n: u32, edges: &[(u32, u32, u8)]) -> Graph {
        let mut g = Graph::default();
        let mut sorted = edges.to_vec();
        sorted.sort_by_key(|e| e.0);
        let mut k = 0;
        for v in 0..n {
            g.offsets.push(g.targets.len() as u64);
            while k < sorted.len() && sorted[k].0 == v {
                g.targets.push(sorted[k].1);
                g.labels.push(sorted[k].2);
                k += 1;
            }
        }
        g.offsets.push(g.targets.len() as u64);
        g
    }

    #[test]
    fn a_cycle_without_time_is_not_a_behaviour() {
        // 0 -> 1 -> 2 -> 1: the loop moves but never ticks.
        let g = graph(3, &[(0, 1, TICK), (1, 2, MOVE), (2, 1, MOVE)]);
        assert_eq!(
            find(&g, CycleQuery { every_edge: 0, some_edge: TICK | MOVE, ..CycleQuery::default() }),
            None
        );
        assert!(find(&g, CycleQuery { every_edge: 0, some_edge: MOVE, ..CycleQuery::default() }).is_some());
    }

    #[test]
    fn finds_a_ticking_moving_loop_with_its_lasso() {
        // 0 -> 1 -> 2 -(tick)-> 3 -(move)-> 1, plus a quiet tick self-loop at 4.
        let g = graph(5, &[(0, 1, 0), (1, 2, 0), (2, 3, TICK), (3, 1, MOVE), (0, 4, 0), (4, 4, TICK)]);
        let lasso = find(&g, CycleQuery { every_edge: 0, some_edge: TICK | MOVE, ..CycleQuery::default() })
            .expect("livelock");
        assert_eq!(lasso.stem_end, 1);
        assert_eq!(lasso.loop_states, vec![2, 3, 1]);
        assert_eq!(lasso.loop_labels[1], TICK, "the tick edge 2 -> 3 is required");
        // Time alone passing in a quiet state is found by a query for ticks only.
        let quiet = find(&g, CycleQuery { every_edge: 0, some_edge: TICK, ..CycleQuery::default() })
            .expect("tick loop");
        assert_eq!(quiet.stem_end, 1, "the moving loop also ticks and is nearer");
    }

    #[test]
    fn every_edge_restricts_the_cycle() {
        const PENDING: u8 = 4;
        // The loop 1 <-> 2 ticks, but its edge back is not PENDING.
        let g = graph(3, &[(0, 1, PENDING), (1, 2, TICK | PENDING), (2, 1, TICK)]);
        assert_eq!(
            find(&g, CycleQuery { every_edge: PENDING, some_edge: TICK, ..CycleQuery::default() }),
            None
        );
        assert!(find(&g, CycleQuery { every_edge: 0, some_edge: TICK, ..CycleQuery::default() }).is_some());
    }

    #[test]
    fn deep_graphs_need_no_recursion() {
        let n = 200_000;
        let mut edges: Vec<(u32, u32, u8)> = (0..n - 1).map(|i| (i, i + 1, 0)).collect();
        edges.push((n - 1, 0, TICK));
        let g = graph(n, &edges);
        assert_eq!(components(&g, 0).iter().filter(|c| **c == 0).count(), n as usize);
    }
}
