//! Seeded hard key-value histories with verdicts known by construction, for benchmarks and
//! regression tests of the checker's worst case (`replicheck history bench`, `history generate`).
//!
//! Every client runs operations back to back; each operation takes effect at a point inside
//! its interval, and the outputs come from applying the effects in time order to [`Kv`]: the
//! history is linearizable by construction. Some clients crash: their last operation never
//! returns (outcome unknown), took effect with probability 1/2, possibly long after its call,
//! and a fresh process takes over the client's remaining operations. Many clients on few keys
//! make the operations overlap.
//!
//! The non-linearizable variant adds one *stale read* late in the history: a get, called after
//! a completed write W returned, that returns the value the key had just before W took effect.
//! Values are unique, `.`-terminated tokens (`p17.` for a put, `a18.` for an append), so a
//! state spells out the put it started from and the appends since. Every state after W
//! contains W's token or starts with a put made after W, and the stale value has neither (its
//! leading put, if any, returned before W was called), so no linearization can explain the
//! read, whatever the crashed operations did. Everything else is unchanged, so this read is the
//! only anomaly.

use super::kv::{Kv, KvInput, KvOutput};
use super::{Operation, SeqModel};

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub clients: usize,
    /// Operations in all, before the stale read.
    pub ops: usize,
    pub keys: usize,
    /// Percent of the operations on key `k0`, the hot key (the others spread evenly over the
    /// other keys); 0: every key alike. The stale read is never on the hot key, so a checker
    /// that finishes each key before the next spends its time on the hot key first.
    pub hot_percent: u64,
    /// Clients that crash once, leaving an operation open.
    pub crashes: usize,
    /// Add the stale read: the history is then not linearizable.
    pub stale_read: bool,
    pub seed: u64,
}

impl Spec {
    /// The file name `history bench` shows for it.
    pub fn name(&self) -> String {
        format!(
            "c{}-n{}-k{}-hot{}-x{}-s{}-{}",
            self.clients,
            self.ops,
            self.keys,
            self.hot_percent,
            self.crashes,
            self.seed,
            if self.stale_read { "bad" } else { "ok" }
        )
    }

    /// The generated histories `history bench` runs beside the reference ones: 40 clients and
    /// 2000 operations with 8 crashed clients, over ten keys alike and over ten keys with a
    /// hot one; and 10 clients, 600 operations on a single key; each linearizable and not.
    pub fn bench_set() -> Vec<Spec> {
        let mut specs = Vec::new();
        for (clients, ops, keys, hot_percent, crashes) in
            [(40, 2000, 10, 0, 8), (40, 2000, 10, 20, 8), (10, 600, 1, 0, 3)]
        {
            for stale_read in [false, true] {
                specs.push(Spec { clients, ops, keys, hot_percent, crashes, stale_read, seed: 1 });
            }
        }
        specs
    }
}

/// xorshift64*: deterministic for a seed, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound.max(1)
    }
}

/// One planned operation: when it is called, takes effect (if ever) and returns (if ever).
struct Planned {
    client: u64,
    call_ns: u64,
    effect_ns: Option<u64>,
    return_ns: Option<u64>,
    input: KvInput,
}

/// Generate the history `spec` describes. Times are nanoseconds; operations are in call order.
pub fn generate(spec: &Spec) -> Vec<Operation<KvInput, KvOutput>> {
    let mut rng = Rng::new(spec.seed);
    let (mut plan, next_process) = plan_calls(spec, &mut rng);
    let (mut outputs, before) = apply_effects(&plan);
    if spec.stale_read {
        add_stale_read(spec, &mut plan, &mut outputs, &before, next_process);
    }
    let mut ops: Vec<Operation<KvInput, KvOutput>> = plan
        .into_iter()
        .zip(outputs)
        .map(|(p, output)| Operation {
            client: p.client,
            call_ns: p.call_ns,
            return_ns: p.return_ns,
            output: if p.return_ns.is_some() { output } else { None },
            input: p.input,
        })
        .collect();
    ops.sort_by_key(|op| (op.call_ns, op.client));
    ops
}

/// Each client's calls, one after another, with their inputs and effect times; a crashed
/// call has no return and its client continues as a new process. Returns the calls and the
/// next unused process number.
fn plan_calls(spec: &Spec, rng: &mut Rng) -> (Vec<Planned>, u64) {
    let clients = spec.clients.max(1);
    let keys = spec.keys.max(1) as u64;
    // Which operation (counted per client) of each client crashes, if any.
    let per_client = spec.ops.div_ceil(clients);
    let mut crash_at = vec![None; clients];
    for slot in crash_at.iter_mut().take(spec.crashes) {
        *slot = Some(rng.below(per_client as u64) as usize);
    }
    let mut plan: Vec<Planned> = Vec::with_capacity(spec.ops + 1);
    let mut next_process = clients as u64;
    for (c, &crash) in crash_at.iter().enumerate() {
        let mut process = c as u64;
        let mut free_ns = rng.below(100);
        for i in 0..per_client {
            if plan.len() >= spec.ops {
                break;
            }
            let call_ns = free_ns + 1 + rng.below(20);
            let duration = 10 + rng.below(90);
            let key = if keys == 1 {
                0
            } else if spec.hot_percent > 0 {
                if rng.below(100) < spec.hot_percent {
                    0
                } else {
                    1 + rng.below(keys - 1)
                }
            } else {
                rng.below(keys)
            };
            let key = format!("k{key}");
            let id = plan.len();
            let input = match rng.below(4) {
                0 | 1 => KvInput::Get { key },
                2 => KvInput::Append { key, value: format!("a{id}.") },
                _ => KvInput::Put { key, value: format!("p{id}.") },
            };
            if crash == Some(i) {
                // Took effect or not, at any time after the call; the client is gone and a new
                // process continues its work a while later.
                let effect = (rng.below(2) == 0).then(|| call_ns + 1 + rng.below(2000));
                plan.push(Planned { client: process, call_ns, effect_ns: effect, return_ns: None, input });
                process = next_process;
                next_process += 1;
                free_ns = call_ns + 200 + rng.below(200);
                continue;
            }
            let effect_ns = call_ns + 1 + rng.below(duration - 1);
            let return_ns = call_ns + duration;
            plan.push(Planned {
                client: process,
                call_ns,
                effect_ns: Some(effect_ns),
                return_ns: Some(return_ns),
                input,
            });
            free_ns = return_ns;
        }
    }
    (plan, next_process)
}

/// For a write: the value before it, and the leading put of that value.
type Before = Option<(String, Option<usize>)>;

/// Apply the effects in time order: each call's output, and for each write the value before
/// it and the leading put of that value.
fn apply_effects(plan: &[Planned]) -> (Vec<Option<KvOutput>>, Vec<Before>) {
    let mut order: Vec<usize> = (0..plan.len()).filter(|&i| plan[i].effect_ns.is_some()).collect();
    order.sort_by_key(|&i| (plan[i].effect_ns, i));
    let mut state = Kv.init();
    let mut outputs: Vec<Option<KvOutput>> = vec![None; plan.len()];
    // Per key, the put the current value starts from.
    let mut leading_put: std::collections::HashMap<String, usize> = Default::default();
    let mut before: Vec<Before> = vec![None; plan.len()];
    for &i in &order {
        let p = &plan[i];
        let key = p.input.key().to_owned();
        match &p.input {
            KvInput::Get { .. } => outputs[i] = Some(KvOutput::Value(state.get(&key).to_owned())),
            KvInput::Put { .. } | KvInput::Append { .. } => {
                before[i] = Some((state.get(&key).to_owned(), leading_put.get(&key).copied()));
                if matches!(p.input, KvInput::Put { .. }) {
                    leading_put.insert(key, i);
                }
                outputs[i] = Some(KvOutput::Written);
            }
        }
        state = Kv.apply(&state, &p.input);
    }
    (outputs, before)
}

/// A late read that returns the value from before a completed write W: late is after 90% of
/// the calls; W is the last completed write that returned well before then whose value before
/// it has a leading put returned before W was called.
fn add_stale_read(
    spec: &Spec,
    plan: &mut Vec<Planned>,
    outputs: &mut Vec<Option<KvOutput>>,
    before: &[Before],
    process: u64,
) {
    let mut calls: Vec<u64> = plan.iter().map(|p| p.call_ns).collect();
    calls.sort_unstable();
    let late_ns = calls[calls.len() * 9 / 10];
    let w = (0..plan.len())
        .filter(|&i| {
            let p = &plan[i];
            let Some(ret) = p.return_ns else { return false };
            let Some((_, lead)) = &before[i] else { return false };
            ret + 50 < late_ns
                && (spec.hot_percent == 0 || spec.keys <= 1 || p.input.key() != "k0")
                && lead.is_none_or(|l| plan[l].return_ns.is_some_and(|r| r < p.call_ns))
        })
        .max_by_key(|&i| plan[i].return_ns);
    if let Some(w) = w {
        let (stale, _) = before[w].clone().expect("a write");
        let key = plan[w].input.key().to_owned();
        plan.push(Planned {
            client: process,
            call_ns: late_ns,
            effect_ns: None,
            return_ns: Some(late_ns + 30),
            input: KvInput::Get { key },
        });
        outputs.push(Some(KvOutput::Value(stale)));
    }
}

/// The history as the kv EDN format `history check` reads, with `:time`s: invokes and
/// completions in time order. Jepsen's convention for an operation of unknown outcome: it is
/// completed with `:info` and its process retired, so a client that goes on after one
/// continues under a fresh process number (a reused process would have two open operations).
/// The `:info` comes at the client's next call, or at the end of the history.
pub fn to_edn(ops: &[Operation<KvInput, KvOutput>]) -> String {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| (ops[i].call_ns, ops[i].client));
    let end_ns = ops.iter().map(|op| op.return_ns.unwrap_or(op.call_ns)).max().unwrap_or(0);
    let mut next_process = ops.iter().map(|op| op.client + 1).max().unwrap_or(0);
    // Per client: its current process, and its open unknown-outcome operation if any.
    let mut current: std::collections::HashMap<u64, (u64, Option<usize>)> = Default::default();
    let mut process = vec![0; ops.len()];
    let mut info_ns = vec![end_ns; ops.len()];
    for &i in &order {
        let op = &ops[i];
        let entry = current.entry(op.client).or_insert((op.client, None));
        if let Some(open) = entry.1.take() {
            info_ns[open] = op.call_ns;
            entry.0 = next_process;
            next_process += 1;
        }
        process[i] = entry.0;
        if op.return_ns.is_none() {
            entry.1 = Some(i);
        }
    }
    // (time, is a completion, op): calls before completions at the same instant.
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        events.push((op.call_ns, false, i));
        events.push((op.return_ns.unwrap_or(info_ns[i].max(op.call_ns)), true, i));
    }
    events.sort_unstable();
    let mut out = String::new();
    for (time, is_return, i) in events {
        let op = &ops[i];
        let (f, key, value) = match &op.input {
            KvInput::Get { key } => ("get", key, None),
            KvInput::Put { key, value } => ("put", key, Some(value)),
            KvInput::Append { key, value } => ("append", key, Some(value)),
        };
        let known = op.return_ns.is_some();
        let value = match (is_return && known, value, &op.output) {
            (_, Some(v), _) => format!("\"{v}\""),
            (true, None, Some(KvOutput::Value(v))) => format!("\"{v}\""),
            _ => "nil".to_owned(),
        };
        let kind = match (is_return, known) {
            (false, _) => "invoke",
            (true, true) => "ok",
            (true, false) => "info",
        };
        out.push_str(&format!(
            "{{:process {}, :type :{kind}, :f :{f}, :key \"{key}\", :value {value}, :time {time}}}\n",
            process[i]
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lincheck::parse;

    fn op(
        client: u64,
        input: KvInput,
        call_ns: u64,
        output: Option<(u64, KvOutput)>,
    ) -> Operation<KvInput, KvOutput> {
        let (return_ns, output) = output.map_or((None, None), |(r, o)| (Some(r), Some(o)));
        Operation { client, call_ns, return_ns, input, output }
    }

    /// A store client whose put got no answer goes on with a get: the put is completed with
    /// `:info` and the get is another process's, so the file reads back with the same ops.
    #[test]
    fn an_unknown_outcome_is_info_and_retires_its_process() {
        let put = |v: &str| KvInput::Put { key: "k".into(), value: v.into() };
        let get = || KvInput::Get { key: "k".into() };
        let ops = vec![
            op(0, put("1"), 0, None),
            op(0, get(), 50, Some((60, KvOutput::Value("1".into())))),
            op(0, put("2"), 70, None),
            op(1, get(), 5, Some((8, KvOutput::Value(String::new())))),
        ];
        let text = to_edn(&ops);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8, "{text}");
        let info: Vec<&&str> = lines.iter().filter(|l| l.contains(":type :info")).collect();
        assert_eq!(info.len(), 2, "{text}");
        assert!(info[0].starts_with("{:process 0,") && info[0].contains(":time 50}"), "{text}");
        assert!(info[1].starts_with("{:process 2,") && info[1].contains(":time 70}"), "{text}");
        let back = parse::kv_edn(&text).expect("reads back");
        let clients: Vec<(u64, u64)> = back.iter().map(|o| (o.call_ns, o.client)).collect();
        assert_eq!(clients, vec![(0, 0), (5, 1), (50, 2), (70, 2)]);
        for (got, want) in back.iter().zip([&ops[0], &ops[3], &ops[1], &ops[2]]) {
            assert_eq!((&got.input, &got.output, got.return_ns), (&want.input, &want.output, want.return_ns));
        }
    }
}
