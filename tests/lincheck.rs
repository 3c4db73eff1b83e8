//! The linearizability checker: against the independently established verdicts of real
//! histories (`../shared/histories`, Porcupine's test data), on tiny hand-made histories whose
//! verdict is obvious, against a brute-force checker on random small histories, and through
//! `replicheck history check`.

use proptest::prelude::*;
use replicheck::lincheck::kv::{self, Kv, KvInput, KvOutput};
use replicheck::lincheck::register::{Register, RegisterInput as In, RegisterOutput as Out};
use replicheck::lincheck::{
    check, check_partitions, overall, parse, partition_pairs, Budget, Operation, SeqModel, Verdict,
};
use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------------------------
// Real histories

/// The reference histories live beside the repository, not in it. Where they are absent (a
/// checkout without `../shared`), the tests that need them say so on stderr and pass: the
/// hand-made, brute-force and CLI tests below still run. `REPLICHECK_REQUIRE_HISTORIES=1`
/// makes their absence a failure.
fn histories_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/histories");
    if dir.join("README.md").is_file() {
        return Some(dir);
    }
    let message = format!(
        "{} is missing: the checks against the reference histories (Jepsen etcd and kv histories \
         with known verdicts) did not run; they are not in the repository",
        dir.display()
    );
    assert!(std::env::var_os("REPLICHECK_REQUIRE_HISTORIES").is_none(), "{message}");
    eprintln!("SKIPPED: {message}");
    None
}

/// (file, expected linearizable) from `DIR/verdicts.tsv`.
fn verdicts(dir: &Path) -> Vec<(PathBuf, bool)> {
    let tsv = std::fs::read_to_string(dir.join("verdicts.tsv")).expect("verdicts.tsv");
    let rows: Vec<(PathBuf, bool)> = tsv
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (file, verdict) = l.split_once('\t').expect("FILE<TAB>yes|no");
            assert!(verdict == "yes" || verdict == "no", "bad verdict in {l:?}");
            (dir.join(file), verdict == "yes")
        })
        .collect();
    assert!(!rows.is_empty());
    rows
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_jepsen_etcd_history_gets_its_known_verdict() {
    let Some(dir) = histories_dir() else { return };
    let rows = verdicts(&dir.join("jepsen-etcd"));
    assert_eq!(rows.len(), 50);
    let mut wrong = Vec::new();
    for (path, linearizable) in &rows {
        let ops = parse::jepsen_etcd(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(ops.len() > 50, "{}: only {} operations parsed", path.display(), ops.len());
        let verdict = check(&Register, &ops, Budget::default());
        assert!(!matches!(verdict, Verdict::Unknown { .. }), "{}: {verdict:?}", path.display());
        if verdict.is_linearizable() != *linearizable {
            wrong.push(path.display().to_string());
        }
        if let Verdict::NotLinearizable { longest_prefix, unplaced_op } = &verdict {
            // The diagnostics name a completed operation that is not in the prefix.
            assert!(ops[*unplaced_op].return_ns.is_some());
            assert!(!longest_prefix.contains(unplaced_op));
        }
    }
    assert!(wrong.is_empty(), "verdicts differ from verdicts.tsv for {wrong:?}");
    // Both kinds are present, so neither "always yes" nor "always no" passes.
    assert!(rows.iter().any(|r| r.1) && rows.iter().any(|r| !r.1));
}

#[test]
fn every_kv_history_gets_its_known_verdict_per_key_and_whole() {
    let Some(dir) = histories_dir() else { return };
    let rows = verdicts(&dir.join("kv"));
    assert_eq!(rows.len(), 4);
    for (path, linearizable) in &rows {
        let ops = parse::kv_edn(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for threads in [1, 2] {
            let per_key = kv::check_per_key(&ops, Budget::default(), threads);
            assert!(per_key.len() > 1, "{}: keys {}", path.display(), per_key.len());
            let linearized = overall(&per_key).is_none();
            assert_eq!(linearized, *linearizable, "{} with {threads} threads", path.display());
            if let Some((key, Verdict::NotLinearizable { unplaced_op, .. })) = overall(&per_key) {
                // Indices refer to the whole history: the op is on the key named.
                assert_eq!(ops[*unplaced_op].input.key(), key);
            }
        }
    }
    // The single-client histories are small enough to check unpartitioned too: same verdicts.
    for (path, linearizable) in rows.iter().filter(|r| r.0.to_string_lossy().contains("c01")) {
        let ops = parse::kv_edn(&read(path)).expect("parses");
        assert_eq!(
            check(&Kv, &ops, Budget::default()).is_linearizable(),
            *linearizable,
            "{}",
            path.display()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Hand-made histories

type RegOp = Operation<In, Out>;

fn done(client: u64, call_ns: u64, return_ns: u64, input: In, output: Out) -> RegOp {
    Operation { client, call_ns, return_ns: Some(return_ns), input, output: Some(output) }
}

/// Called, never returned: outcome unknown.
fn crashed(client: u64, call_ns: u64, input: In) -> RegOp {
    Operation { client, call_ns, return_ns: None, input, output: None }
}

fn register(history: &[RegOp]) -> Verdict {
    check(&Register, history, Budget::default())
}

#[test]
fn a_stale_read_is_caught_and_named() {
    let history = [
        done(1, 0, 10, In::Write(Some(1)), Out::WriteOk),
        done(1, 20, 30, In::Write(Some(2)), Out::WriteOk),
        done(2, 40, 50, In::Read, Out::Read(Some(1))),
    ];
    assert_eq!(register(&history), Verdict::NotLinearizable { longest_prefix: vec![0, 1], unplaced_op: 2 });
    // The same read overlapping the second write is fine.
    let overlapping = [history[0].clone(), history[1].clone(), done(2, 25, 50, In::Read, Out::Read(Some(1)))];
    assert_eq!(register(&overlapping), Verdict::Linearizable);
}

#[test]
fn a_read_concurrent_with_a_write_may_see_either_value() {
    for seen in [None, Some(7)] {
        let history =
            [done(1, 0, 10, In::Write(Some(7)), Out::WriteOk), done(2, 5, 15, In::Read, Out::Read(seen))];
        assert_eq!(register(&history), Verdict::Linearizable, "read {seen:?}");
    }
    // Not a value nobody wrote.
    let history =
        [done(1, 0, 10, In::Write(Some(7)), Out::WriteOk), done(2, 5, 15, In::Read, Out::Read(Some(8)))];
    assert!(!register(&history).is_linearizable());
    // Intervals that touch at one instant are concurrent: either order.
    let touching =
        [done(2, 0, 10, In::Read, Out::Read(Some(7))), done(1, 10, 20, In::Write(Some(7)), Out::WriteOk)];
    assert_eq!(register(&touching), Verdict::Linearizable);
}

#[test]
fn an_unknown_write_may_show_up_later() {
    let history = [
        crashed(1, 0, In::Write(Some(3))),
        done(2, 10, 20, In::Read, Out::Read(None)),
        done(2, 30, 40, In::Read, Out::Read(Some(3))),
        done(2, 50, 60, In::Read, Out::Read(Some(3))),
    ];
    assert_eq!(register(&history), Verdict::Linearizable);
}

#[test]
fn an_unknown_write_may_never_show_up() {
    let history = [
        crashed(1, 0, In::Write(Some(3))),
        crashed(3, 1, In::Cas { from: None, to: Some(4) }),
        done(2, 10, 20, In::Read, Out::Read(None)),
        done(2, 30, 40, In::Read, Out::Read(None)),
    ];
    assert_eq!(register(&history), Verdict::Linearizable);
}

#[test]
fn an_unknown_write_takes_effect_after_its_call_and_only_once() {
    // Seen before it was called.
    let early = [done(2, 0, 10, In::Read, Out::Read(Some(3))), crashed(1, 20, In::Write(Some(3)))];
    assert!(!register(&early).is_linearizable());
    // Seen, then gone with nobody writing in between.
    let undone = [
        crashed(1, 0, In::Write(Some(3))),
        done(2, 10, 20, In::Read, Out::Read(Some(3))),
        done(2, 30, 40, In::Read, Out::Read(None)),
    ];
    assert!(!register(&undone).is_linearizable());
    // ... unless an earlier write (the first crashed one) explains the first read and the second
    // crashed write came later. Twins: equal inputs, both unknown.
    let twins = [
        crashed(1, 0, In::Write(Some(3))),
        crashed(3, 5, In::Write(Some(3))),
        done(2, 10, 20, In::Read, Out::Read(Some(3))),
        done(4, 25, 26, In::Write(None), Out::WriteOk),
        done(2, 30, 40, In::Read, Out::Read(Some(3))),
    ];
    assert_eq!(register(&twins), Verdict::Linearizable);
    let one_only = [twins[0].clone(), twins[2].clone(), twins[3].clone(), twins[4].clone()];
    assert!(!register(&one_only).is_linearizable());
}

#[test]
fn a_timed_out_operation_that_returned_must_take_effect_within_its_interval() {
    // Returned (at 20) but its output was lost: it took effect by then.
    let history = [
        Operation { client: 1, call_ns: 0, return_ns: Some(20), input: In::Write(Some(5)), output: None },
        done(2, 30, 40, In::Read, Out::Read(None)),
    ];
    assert!(!register(&history).is_linearizable());
}

#[test]
fn cas_succeeds_only_on_a_match_and_fails_only_on_a_mismatch() {
    let w = done(1, 0, 10, In::Write(Some(1)), Out::WriteOk);
    let cas =
        |from, to, ok| done(2, 20, 30, In::Cas { from, to }, if ok { Out::CasOk } else { Out::CasFail });
    let read = |v| done(3, 40, 50, In::Read, Out::Read(v));
    assert_eq!(register(&[w.clone(), cas(Some(1), Some(2), true), read(Some(2))]), Verdict::Linearizable);
    assert_eq!(register(&[w.clone(), cas(Some(9), Some(2), false), read(Some(1))]), Verdict::Linearizable);
    // A successful cas whose compare could not hold, a failed one whose compare held, and a
    // failed cas that changed the value.
    assert!(!register(&[w.clone(), cas(Some(9), Some(2), true)]).is_linearizable());
    assert!(!register(&[w.clone(), cas(Some(1), Some(2), false)]).is_linearizable());
    assert!(!register(&[w.clone(), cas(Some(9), Some(2), false), read(Some(2))]).is_linearizable());
    // Cas from absent (create if missing), and delete.
    assert_eq!(register(&[cas(None, Some(4), true), read(Some(4))]), Verdict::Linearizable);
    let delete = done(4, 12, 15, In::Write(None), Out::WriteOk);
    assert_eq!(register(&[w, delete, cas(None, Some(4), true), read(Some(4))]), Verdict::Linearizable);
}

#[test]
fn kv_appends_concatenate_and_partition_indices_refer_to_the_whole_history() {
    let op = |client, call_ns, return_ns, input, output| Operation {
        client,
        call_ns,
        return_ns: Some(return_ns),
        input,
        output: Some(output),
    };
    let append = |key: &str, value: &str| KvInput::Append { key: key.into(), value: value.into() };
    let get = |key: &str| KvInput::Get { key: key.into() };
    let history = vec![
        op(1, 0, 10, append("a", "x"), KvOutput::Written),
        op(2, 0, 10, append("b", "1"), KvOutput::Written),
        op(1, 20, 30, append("a", "y"), KvOutput::Written),
        op(2, 20, 30, get("b"), KvOutput::Value("1".into())),
        op(3, 40, 50, get("a"), KvOutput::Value("xy".into())),
        op(3, 60, 70, get("c"), KvOutput::Value("".into())),
    ];
    let per_key = kv::check_per_key(&history, Budget::default(), 2);
    assert_eq!(per_key.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
    assert!(overall(&per_key).is_none());
    assert!(check(&Kv, &history, Budget::default()).is_linearizable());
    let mut wrong = history.clone();
    wrong[4].output = Some(KvOutput::Value("yx".into()));
    let per_key = kv::check_per_key(&wrong, Budget::default(), 1);
    assert_eq!(
        overall(&per_key),
        Some(&("a".to_owned(), Verdict::NotLinearizable { longest_prefix: vec![0, 2], unplaced_op: 4 }))
    );
    let parts = kv::partition_by_key(&history);
    assert_eq!(parts[0].history_index, [0, 2, 4]);
    assert_eq!(parts[1].history_index, [1, 3]);
}

#[test]
fn a_store_of_registers_is_checked_per_key() {
    let history = vec![
        ("k1", done(1, 0, 10, In::Write(Some(1)), Out::WriteOk)),
        ("k2", done(2, 0, 10, In::Write(Some(2)), Out::WriteOk)),
        ("k2", done(2, 20, 30, In::Read, Out::Read(Some(2)))),
        // Stale on k1 only: k2's value is not k1's.
        ("k1", done(1, 20, 30, In::Read, Out::Read(Some(2)))),
    ];
    let parts = partition_pairs(history);
    let per_key = check_partitions(&Register, &parts, Budget::default(), 2);
    assert_eq!(per_key[1], ("k2", Verdict::Linearizable));
    assert_eq!(
        overall(&per_key),
        Some(&("k1", Verdict::NotLinearizable { longest_prefix: vec![0], unplaced_op: 3 }))
    );
}

#[test]
fn a_spent_budget_and_a_malformed_history_are_unknown_not_a_verdict() {
    let history = [
        done(1, 0, 10, In::Write(Some(1)), Out::WriteOk),
        done(2, 0, 10, In::Write(Some(2)), Out::WriteOk),
        done(3, 20, 30, In::Read, Out::Read(Some(2))),
    ];
    assert!(
        matches!(check(&Register, &history, Budget::steps(1)), Verdict::Unknown { reason } if reason.contains("1 search steps"))
    );
    assert_eq!(check(&Register, &history, Budget::steps(1_000)), Verdict::Linearizable);
    let small_cache = Budget { cache_bytes_max: 1, ..Budget::default() };
    assert!(
        matches!(check(&Register, &history, small_cache), Verdict::Unknown { reason } if reason.contains("1 cache bytes"))
    );
    let backwards = [done(1, 10, 5, In::Read, Out::Read(None))];
    assert!(matches!(register(&backwards), Verdict::Unknown { reason } if reason.contains("malformed")));
    assert_eq!(register(&[]), Verdict::Linearizable);
}

// ---------------------------------------------------------------------------------------------
// Parsers

#[test]
fn jepsen_etcd_parsing_follows_the_completion_types() {
    let log = "\
INFO  jepsen.util - 0\t:invoke\t:write\t4
INFO  jepsen.util - 1\t:invoke\t:read\tnil
INFO  jepsen.util - 2\t:invoke\t:cas\t[4 1]
INFO  jepsen.util - 3\t:invoke\t:cas\t[0 2]
INFO  jepsen.util - 0\t:ok\t:write\t4

INFO  jepsen.util - 1\t:fail\t:read\t:timed-out
INFO  jepsen.util - 2\t:ok\t:cas\t[4 1]
INFO  jepsen.util - 3\t:fail\t:cas\t[0 2]
INFO  jepsen.util - 4\t:invoke\t:write\t3
INFO  jepsen.util - 4\t:info\t:write\t:timed-out
INFO  jepsen.util - 5\t:invoke\t:read\tnil
INFO  jepsen.util - 5\t:ok\t:read\t1
INFO  jepsen.util - 6\t:invoke\t:write\t0
";
    let ops = parse::jepsen_etcd(log).expect("parses");
    let summary: Vec<_> = ops.iter().map(|o| (o.client, o.call_ns, o.return_ns, o.input, o.output)).collect();
    assert_eq!(
        summary,
        [
            (0, 1, Some(5), In::Write(Some(4)), Some(Out::WriteOk)),
            (1, 2, None, In::Read, None),
            (2, 3, Some(8), In::Cas { from: Some(4), to: Some(1) }, Some(Out::CasOk)),
            (3, 4, Some(9), In::Cas { from: Some(0), to: Some(2) }, Some(Out::CasFail)),
            (4, 10, None, In::Write(Some(3)), None),
            (5, 12, Some(13), In::Read, Some(Out::Read(Some(1)))),
            (6, 14, None, In::Write(Some(0)), None),
        ]
    );
    assert!(register(&ops).is_linearizable());
}

#[test]
fn parse_errors_name_the_line_and_its_text() {
    let cases = [
        (
            "INFO  jepsen.util - 0\t:invoke\t:write\t4\nINFO  jepsen.util - 0\t:ok\t:write\tx\n",
            2,
            "neither nil",
        ),
        ("INFO  jepsen.util - 0\t:ok\t:write\t4\n", 1, "never invoked"),
        ("\nsomething else\n", 2, "not a Jepsen history line"),
        ("INFO  jepsen.util - 0\t:invoke\t:cas\t[1]\n", 1, "not `[FROM TO]`"),
        (
            "INFO  jepsen.util - 0\t:invoke\t:write\t4\nINFO  jepsen.util - 0\t:invoke\t:read\tnil\n",
            2,
            "still open",
        ),
        (
            "INFO  jepsen.util - 0\t:invoke\t:write\t4\nINFO  jepsen.util - 0\t:ok\t:read\t4\n",
            2,
            "invoked a `:write`",
        ),
        ("INFO  jepsen.util - 0\t:invoke\t:write\t4\nINFO  jepsen.util - 0\t:ok\t:write\t5\n", 2, "differs"),
        ("INFO  jepsen.util - 0\t:started\t:write\t4\n", 1, "unknown type"),
    ];
    for (text, line, says) in cases {
        let e = parse::jepsen_etcd(text).expect_err(text);
        assert_eq!(e.line, line, "{e}");
        assert_eq!(e.text, text.lines().nth(line - 1).unwrap());
        assert!(e.to_string().contains(says), "{e} should say {says:?}");
        assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
    }
    let kv_cases = [
        (
            "{:process 0, :type :invoke, :f :get, :key \"1\", :value nil}\n{:process 0 :type}\n",
            2,
            "`:type` has no value",
        ),
        ("{:process 0, :type :invoke, :f :inc, :key \"1\", :value nil}\n", 1, "unknown `:f :inc`"),
        ("{:process 0, :type :ok, :f :get, :key \"1\", :value \"\"}\n", 1, "never invoked"),
        ("{:process 0, :type :invoke, :f :get, :key \"1\", :value nil\n", 1, "unterminated map"),
        ("{:process 0, :type :invoke, :f :put, :key \"1\", :value nil}\n", 1, "without a string `:value`"),
        ("{:process 0, :type :invoke, :f :get, :value nil}\n", 1, "missing `:key`"),
        ("{:process -1, :type :invoke, :f :get, :key \"1\"}\n", 1, "non-negative"),
    ];
    for (text, line, says) in kv_cases {
        let e = parse::kv_edn(text).expect_err(text);
        assert_eq!(e.line, line, "{e}");
        assert!(e.to_string().contains(says), "{e} should say {says:?}");
    }
}

#[test]
fn kv_parsing_reads_times_failures_and_unknown_outcomes() {
    let text = r#"{:process 0, :type :invoke, :f :put, :key "k", :value "a\"b", :time 100}
{:process 1, :type :invoke, :f :append, :key "k", :value "c", :time 110}
{:process 0, :type :ok, :f :put, :key "k", :value "a\"b", :time 120, :index 3}
{:process 1, :type :fail, :f :append, :key "k", :value "c", :time 130}
{:process 2, :type :invoke, :f :append, :key "k", :value "d", :time 140}
{:process 2, :type :info, :f :append, :key "k", :value "d", :time 150}
{:process 3, :type :invoke, :f :get, :key "k", :value nil, :time 160}
{:process 3, :type :ok, :f :get, :key "k", :value "a\"bd", :time 170}
"#;
    let ops = parse::kv_edn(text).expect("parses");
    // The failed append is gone; the :info one has no return.
    assert_eq!(ops.len(), 3);
    assert_eq!((ops[0].call_ns, ops[0].return_ns), (100, Some(120)));
    assert_eq!(ops[0].input, KvInput::Put { key: "k".into(), value: "a\"b".into() });
    assert_eq!((ops[1].call_ns, ops[1].return_ns, &ops[1].output), (140, None, &None));
    assert_eq!(ops[2].output, Some(KvOutput::Value("a\"bd".into())));
    assert!(check(&Kv, &ops, Budget::default()).is_linearizable());
    let mixed = "{:process 0, :type :invoke, :f :get, :key \"1\", :time 5}\n{:process 0, :type :ok, :f :get, :key \"1\", :value \"\"}\n";
    assert!(parse::kv_edn(mixed).expect_err("mixed clocks").message.contains("missing `:time`"));
}

// ---------------------------------------------------------------------------------------------
// Random histories

#[derive(Clone, Debug)]
struct Planned {
    input: In,
    /// 0: completes; 1: outcome unknown and took effect; 2: unknown and never took effect.
    fate: u8,
    before_ns: u64,
    after_ns: u64,
}

fn arb_input() -> impl Strategy<Value = In> {
    let value = prop_oneof![Just(None), (0u64..3).prop_map(Some)];
    prop_oneof![
        Just(In::Read),
        value.clone().prop_map(In::Write),
        (value.clone(), value).prop_map(|(from, to)| In::Cas { from, to }),
    ]
}

fn arb_planned() -> impl Strategy<Value = Planned> {
    (arb_input(), prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)], 0u64..400, 0u64..400)
        .prop_map(|(input, fate, before_ns, after_ns)| Planned { input, fate, before_ns, after_ns })
}

/// Run the plan sequentially (operation i takes effect at 100 i + 500, if at all) and record
/// each operation with an interval around that point.
fn sequential_history(plan: &[Planned]) -> Vec<RegOp> {
    let mut state = Register.init();
    let mut history = Vec::new();
    for (i, p) in plan.iter().enumerate() {
        let at_ns = 100 * i as u64 + 500;
        let output = match (p.input, state) {
            (In::Read, v) => Out::Read(v),
            (In::Write(_), _) => Out::WriteOk,
            (In::Cas { from, .. }, v) if v == from => Out::CasOk,
            (In::Cas { .. }, _) => Out::CasFail,
        };
        if p.fate != 2 {
            state = Register.step(&state, &p.input, &output).expect("the spec accepts its own output");
        }
        let completes = p.fate == 0;
        history.push(Operation {
            client: i as u64,
            call_ns: at_ns - p.before_ns,
            return_ns: completes.then_some(at_ns + p.after_ns),
            input: p.input,
            output: completes.then_some(output),
        });
    }
    history
}

/// Every order of every subset of the unknown-outcome operations with all completed ones, as
/// the definition says. Exponential; for a handful of operations.
fn brute_force(history: &[RegOp]) -> bool {
    fn extend(history: &[RegOp], used: &mut Vec<bool>, order: &mut Vec<usize>, state: Option<u64>) -> bool {
        let all_completed_placed =
            history.iter().zip(used.iter()).all(|(op, &u)| u || op.return_ns.is_none());
        if all_completed_placed {
            return true;
        }
        for i in 0..history.len() {
            // i may go next if no unplaced operation returned before i was called.
            let must_wait = history.iter().enumerate().any(|(j, other)| {
                !used[j] && j != i && other.return_ns.is_some_and(|r| r < history[i].call_ns)
            });
            if used[i] || must_wait {
                continue;
            }
            let op = &history[i];
            let next = match &op.output {
                Some(out) => Register.step(&state, &op.input, out),
                None => Some(Register.apply(&state, &op.input)),
            };
            if let Some(next) = next {
                used[i] = true;
                order.push(i);
                if extend(history, used, order, next) {
                    return true;
                }
                order.pop();
                used[i] = false;
            }
        }
        false
    }
    extend(history, &mut vec![false; history.len()], &mut Vec::new(), Register.init())
}

fn arb_small_history() -> impl Strategy<Value = Vec<RegOp>> {
    let output = prop_oneof![
        prop_oneof![Just(None), (0u64..2).prop_map(Some)].prop_map(Out::Read),
        Just(Out::WriteOk),
        Just(Out::CasOk),
        Just(Out::CasFail),
    ];
    let value = prop_oneof![Just(None), (0u64..2).prop_map(Some)];
    let input = prop_oneof![
        Just(In::Read),
        value.clone().prop_map(In::Write),
        (value.clone(), value).prop_map(|(from, to)| In::Cas { from, to }),
    ];
    let op =
        (input, output, 0u64..12, 0u64..8, 0u8..8).prop_map(|(input, output, call_ns, length_ns, fate)| {
            // Make outputs fit their inputs most of the time, so both verdicts are common.
            let output = match (input, output) {
                (In::Read, o @ Out::Read(_)) => o,
                (In::Read, _) => Out::Read(None),
                (In::Write(_), _) => Out::WriteOk,
                (In::Cas { .. }, o @ (Out::CasOk | Out::CasFail)) => o,
                (In::Cas { .. }, _) => Out::CasFail,
            };
            Operation {
                client: 0,
                call_ns,
                // fate 0: crashed; 1: returned without output; else completed.
                return_ns: (fate != 0).then_some(call_ns + length_ns),
                input,
                output: (fate > 1).then_some(output),
            }
        });
    proptest::collection::vec(op, 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Intervals around the points of a real sequential execution always admit it.
    #[test]
    fn histories_of_a_sequential_execution_are_linearizable(
        plan in proptest::collection::vec(arb_planned(), 0..60),
        order in any::<prop::sample::Index>(),
    ) {
        let mut history = sequential_history(&plan);
        // The position of an operation in the history carries no meaning: rotate it.
        if !history.is_empty() {
            let at = order.index(history.len());
            history.rotate_left(at);
        }
        prop_assert_eq!(check(&Register, &history, Budget::default()), Verdict::Linearizable);
    }

    /// The same for the kv model, checked per key and whole.
    #[test]
    fn kv_histories_of_a_sequential_execution_are_linearizable(
        plan in proptest::collection::vec(
            (0u8..3, 0u8..3, prop_oneof!["", "a", "b", "ab"], 0u8..8, 0u64..400, 0u64..400),
            0..40,
        ),
    ) {
        let mut state = Kv.init();
        let mut history = Vec::new();
        for (i, (kind, key, value, fate, before_ns, after_ns)) in plan.into_iter().enumerate() {
            let at_ns = 100 * i as u64 + 500;
            let key = key.to_string();
            let input = match kind {
                0 => KvInput::Get { key },
                1 => KvInput::Put { key, value },
                _ => KvInput::Append { key, value },
            };
            let output = match &input {
                KvInput::Get { key } => KvOutput::Value(state.get(key).to_owned()),
                _ => KvOutput::Written,
            };
            // fate 0: unknown, took effect; 1: unknown, never did; else completed.
            if fate != 1 {
                state = Kv.step(&state, &input, &output).expect("the spec accepts its own output");
            }
            let completes = fate > 1;
            history.push(Operation {
                client: i as u64,
                call_ns: at_ns - before_ns,
                return_ns: completes.then_some(at_ns + after_ns),
                input,
                output: completes.then_some(output),
            });
        }
        prop_assert!(overall(&kv::check_per_key(&history, Budget::default(), 1)).is_none());
        prop_assert_eq!(check(&Kv, &history, Budget::default()), Verdict::Linearizable);
    }

    /// The search agrees with the definition on small histories, both verdicts included.
    #[test]
    fn the_search_agrees_with_brute_force(history in arb_small_history()) {
        let verdict = check(&Register, &history, Budget::default());
        let unknown = matches!(verdict, Verdict::Unknown { .. });
        prop_assert!(!unknown, "{:?}", verdict);
        prop_assert_eq!(verdict.is_linearizable(), brute_force(&history), "{:?}", history);
    }
}

// ---------------------------------------------------------------------------------------------
// The CLI

fn replicheck(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run replicheck")
}

#[test]
fn history_check_exit_codes_and_output() {
    if histories_dir().is_none() {
        return;
    }
    let yes = "../shared/histories/jepsen-etcd/etcd_002.log";
    let no = "../shared/histories/jepsen-etcd/etcd_000.log";
    let kv_ok = "../shared/histories/kv/c10-ok.txt";
    let out = replicheck(&["history", "check", yes, kv_ok]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(&format!("{yes}: 77 ops, 1 key, linearizable")), "{stdout}");
    assert!(stdout.contains(&format!("{kv_ok}: 337 ops, 10 keys, linearizable")), "{stdout}");

    let out = replicheck(&["history", "check", yes, no, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["exit_code"], 1);
    assert_eq!(doc["files"][0]["verdict"], "linearizable");
    assert_eq!(doc["files"][1]["verdict"], "not_linearizable");
    assert_eq!(doc["files"][1]["format"], "jepsen-etcd");
    let unplaced = doc["files"][1]["unplaced"].as_str().expect("the unplaced operation, described");
    assert!(unplaced.contains("invoked on line"), "{unplaced}");

    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.log");
    std::fs::write(
        &bad,
        "INFO  jepsen.util - 0\t:invoke\t:write\t4\nINFO  jepsen.util - 0\t:ok\t:write\tfour\n",
    )
    .expect("write");
    let out = replicheck(&["history", "check", bad.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{}: line 2: ", bad.display())), "{stderr}");
    assert!(stderr.contains("four"), "{stderr}");
    // A kv file read as Jepsen: the format is wrong, and the error says where.
    let out = replicheck(&["history", "check", kv_ok, "--format", "jepsen-etcd"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1: not a Jepsen history line"));
}
