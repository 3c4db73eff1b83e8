//! The two linearizability checkers must agree: the model's per-state register check
//! (`model::history`, tiny histories, exhaustive) and the history checker the store and
//! `history check` use (`lincheck`, Porcupine-style search). Random register histories with
//! concurrent, pending (given-up) and stale operations are checked by both.

use proptest::prelude::*;
use replicheck::lincheck::register::{Register, RegisterInput, RegisterOutput};
use replicheck::lincheck::{check, Budget, Operation, Verdict};
use replicheck::model::history::{History, RegisterOp};
use replicheck::policy::CLIENT_OPS_MAX;

const CLIENTS: u8 = 3;

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Idle,
    Pending,
    GaveUp,
}

/// Play `choices` as a schedule: each byte picks the next client to act and, for a read's
/// return, which value it saw. Returns both checkers' views of the same history.
fn play(kinds: &[Vec<bool>], choices: &[u8]) -> (History, Vec<Operation<RegisterInput, RegisterOutput>>) {
    let mut model = History::default();
    let mut ops: Vec<Operation<RegisterInput, RegisterOutput>> = Vec::new();
    let mut phase = vec![Phase::Idle; kinds.len()];
    let mut next = vec![0usize; kinds.len()];
    let mut open: Vec<Option<usize>> = vec![None; kinds.len()];
    let mut written: Vec<u8> = vec![0];
    for (t, &choice) in choices.iter().enumerate() {
        let c = usize::from(choice) % kinds.len();
        let now = t as u64 * 10;
        match phase[c] {
            Phase::Idle if next[c] < kinds[c].len() => {
                let seq = next[c] as u8;
                let is_write = kinds[c][next[c]];
                let value = 1 + c as u8 * CLIENT_OPS_MAX as u8 + seq;
                let op = if is_write { RegisterOp::Write(value) } else { RegisterOp::Read(0) };
                model.invoke(c as u8, seq, op);
                if is_write {
                    written.push(value);
                }
                let input =
                    if is_write { RegisterInput::Write(Some(u64::from(value))) } else { RegisterInput::Read };
                ops.push(Operation { client: c as u64, call_ns: now, return_ns: None, input, output: None });
                open[c] = Some(ops.len() - 1);
                phase[c] = Phase::Pending;
            }
            Phase::Pending if choice & 0x80 != 0 && choice & 0x40 != 0 => phase[c] = Phase::GaveUp,
            Phase::Pending => {
                let i = open[c].take().expect("pending");
                let seen = written[usize::from(choice >> 2) % written.len()];
                model.ret(c as u8, seen);
                let op = &mut ops[i];
                op.return_ns = Some(now);
                op.output = Some(match op.input {
                    RegisterInput::Read => RegisterOutput::Read((seen != 0).then_some(u64::from(seen))),
                    _ => RegisterOutput::WriteOk,
                });
                next[c] += 1;
                phase[c] = Phase::Idle;
            }
            _ => {}
        }
    }
    (model, ops)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    #[test]
    fn both_checkers_give_the_same_verdict(
        kinds in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 1..=3), 1..=CLIENTS as usize),
        choices in proptest::collection::vec(any::<u8>(), 0..30),
    ) {
        let (model, ops) = play(&kinds, &choices);
        let by_model = model.linearizable();
        let by_lincheck = match check(&Register, &ops, Budget::unlimited()) {
            Verdict::Linearizable => true,
            Verdict::NotLinearizable { .. } => false,
            other => panic!("unbounded search gave {other:?}"),
        };
        prop_assert_eq!(by_model, by_lincheck, "history: {:?}", ops);
    }
}

#[test]
fn a_stale_read_after_a_write_returned_is_rejected_by_both() {
    // Client 0 writes and returns; then client 1 reads the initial value.
    let kinds = vec![vec![true], vec![false]];
    let (model, ops) = play(&kinds, &[0, 0, 1, 1]);
    assert!(ops[1].output == Some(RegisterOutput::Read(None)));
    assert!(!model.linearizable());
    assert!(matches!(check(&Register, &ops, Budget::unlimited()), Verdict::NotLinearizable { .. }));
}

/// The generator reaches both verdicts and pending operations (else the property above
/// would compare nothing interesting).
#[test]
fn schedules_cover_both_verdicts_and_given_up_operations() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut byte = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 24) as u8
    };
    let (mut yes, mut no, mut pending) = (0, 0, 0);
    for _ in 0..500 {
        let kinds: Vec<Vec<bool>> = (0..3).map(|_| (0..3).map(|_| byte() & 1 == 1).collect()).collect();
        let choices: Vec<u8> = (0..24).map(|_| byte()).collect();
        let (model, ops) = play(&kinds, &choices);
        let by_lincheck = matches!(check(&Register, &ops, Budget::unlimited()), Verdict::Linearizable);
        assert_eq!(model.linearizable(), by_lincheck, "{ops:?}");
        if by_lincheck {
            yes += 1;
        } else {
            no += 1;
        }
        pending += ops.iter().filter(|o| o.return_ns.is_none()).count();
    }
    assert!(yes > 50 && no > 50 && pending > 50, "linearizable {yes}, not {no}, pending ops {pending}");
}
