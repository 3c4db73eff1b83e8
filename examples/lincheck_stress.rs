//! Time the history checker on a synthetic single-register history with timeouts, the kind
//! the concrete store records under faults: `cargo run --release --example lincheck_stress --
//! OPS CLIENTS TIMEOUT_PERCENT SEED` (defaults 2000 5 10 7).
//!
//! The history comes from a real sequential execution (so it is linearizable): each operation
//! takes effect at a point inside its interval, in order. A timed-out operation has no return
//! and no output, and took effect with probability 1/2. Writes carry unique values.

use replicheck::lincheck::register::{Register, RegisterInput as In, RegisterOutput as Out};
use replicheck::lincheck::{check, Budget, Operation, SeqModel};
use std::time::Instant;

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("integer arguments")).collect();
    let arg = |i: usize, default: u64| args.get(i).copied().unwrap_or(default);
    let (op_count, clients, timeout_percent, seed) = (arg(0, 2000), arg(1, 5).max(1), arg(2, 10), arg(3, 7));
    let mut rng = seed.max(1);
    let mut rand = move |bound: u64| {
        // xorshift64: deterministic for a seed, no dependency.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % bound
    };
    let mut state = Register.init();
    let mut client_free_ns = vec![0u64; clients as usize];
    let mut last_effect_ns = 0u64;
    let mut history = Vec::new();
    for i in 0..op_count {
        let client = rand(clients) as usize;
        let call_ns = client_free_ns[client] + rand(50);
        let effect_ns = call_ns.max(last_effect_ns + 1) + rand(30);
        let return_ns = effect_ns + rand(50);
        last_effect_ns = effect_ns;
        let input = match rand(3) {
            0 => In::Read,
            1 => In::Write(Some(i)),
            _ => In::Cas { from: state, to: Some(i) },
        };
        let output = match input {
            In::Read => Out::Read(state),
            In::Write(_) => Out::WriteOk,
            In::Cas { from, .. } if from == state => Out::CasOk,
            In::Cas { .. } => Out::CasFail,
        };
        let timed_out = rand(100) < timeout_percent;
        if !timed_out || rand(2) == 0 {
            state = Register.step(&state, &input, &output).expect("the spec accepts its own output");
        }
        history.push(Operation {
            client: client as u64,
            call_ns,
            return_ns: (!timed_out).then_some(return_ns),
            input,
            output: (!timed_out).then_some(output),
        });
        client_free_ns[client] = return_ns;
    }
    let started = Instant::now();
    let verdict = check(&Register, &history, Budget::default());
    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    let verdict = match verdict {
        v if v.is_linearizable() => "linearizable".to_owned(),
        v => format!("{v:?}"),
    };
    println!(
        "{op_count} ops, {clients} clients, {timeout_percent}% timeouts: {verdict} in {elapsed_ms:.3} ms"
    );
}
