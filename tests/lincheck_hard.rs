//! The checker's worst case (issue 19): generated hard key-value histories with verdicts known
//! by construction, the step and memory bounds that keep a non-linearizable history of many
//! clients cheap, the first-failure stop, the picture (`--html`) and several files in one run.

use replicheck::lincheck::generate::{generate, to_edn, Spec};
use replicheck::lincheck::kv::{check_per_key_with, KvInput};
use replicheck::lincheck::report::check_kv;
use replicheck::lincheck::{parse, Budget, Options, Verdict, NOT_DECIDED};
use std::path::Path;
use std::process::Command;

fn replicheck(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run replicheck")
}

/// 40 clients, 2000 operations, ten keys of which one (k0) takes a fifth of the operations,
/// eight crashed clients; with the stale read if `bad`.
fn hot(seed: u64, bad: bool) -> Spec {
    Spec { clients: 40, ops: 2000, keys: 10, hot_percent: 20, crashes: 8, stale_read: bad, seed }
}

const ONE_THREAD: Options = Options { threads: 1, every_key: false };

#[test]
fn generated_histories_get_their_known_verdicts_and_the_stale_read_is_named() {
    let mut specs = Spec::bench_set();
    for seed in 2..=4 {
        specs.push(Spec {
            clients: 20,
            ops: 1000,
            keys: 8,
            hot_percent: 0,
            crashes: 5,
            stale_read: false,
            seed,
        });
        specs.push(Spec {
            clients: 20,
            ops: 1000,
            keys: 8,
            hot_percent: 0,
            crashes: 5,
            stale_read: true,
            seed,
        });
    }
    for spec in specs {
        let ops = generate(&spec);
        assert_eq!(ops.len(), spec.ops + usize::from(spec.stale_read), "{}", spec.name());
        let crashed = ops.iter().filter(|op| op.return_ns.is_none()).count();
        assert_eq!(crashed, spec.crashes, "{}: one open operation per crashed client", spec.name());
        let c = check_kv(&ops, true, Budget::default(), ONE_THREAD);
        assert_eq!(c.verdict.is_linearizable(), !spec.stale_read, "{}: {:?}", spec.name(), c.verdict);
        if spec.stale_read {
            // The stale read is the only anomaly, by a process of its own (the last one).
            let Verdict::NotLinearizable { unplaced_op, .. } = c.verdict else { panic!("{}", spec.name()) };
            let stale = ops.iter().map(|op| op.client).max().expect("ops");
            assert_eq!(ops[unplaced_op].client, stale, "{}: {:?}", spec.name(), ops[unplaced_op]);
            assert!(matches!(ops[unplaced_op].input, KvInput::Get { .. }));
        }
    }
}

#[test]
fn the_generated_kv_file_reads_back_and_history_check_gives_its_verdict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = Spec { clients: 12, ops: 300, keys: 3, hot_percent: 0, crashes: 2, stale_read: true, seed: 9 };
    let ops = generate(&spec);
    let (parsed, timed) = parse::kv_edn_timed(&to_edn(&ops)).expect("parses");
    assert!(timed);
    let mut expected = ops.clone();
    let mut got = parsed;
    expected.sort_by_key(|op| (op.call_ns, op.client));
    got.sort_by_key(|op| (op.call_ns, op.client));
    assert_eq!(got, expected);

    for (bad, code) in [(false, 0), (true, 1)] {
        let file = dir.path().join(format!("h-{bad}.txt"));
        let mut args = vec!["history", "generate", "-o", file.to_str().unwrap(), "--clients", "12"];
        args.extend(["--ops", "300", "--keys", "3", "--crashes", "2", "--seed", "9"]);
        if bad {
            args.push("--stale-read");
        }
        assert_eq!(replicheck(&args).status.code(), Some(0));
        let out = replicheck(&["history", "check", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stdout));
    }
}

/// The regression test of issue 19: a non-linearizable history of 40 clients x 2000 operations
/// is decided in a few hundred thousand steps and a few MiB, although finishing each key before
/// the next (the old order) spends millions of steps on the hot key first.
#[test]
fn a_non_linearizable_history_of_40_clients_is_decided_within_a_small_step_budget() {
    for seed in 1..=3 {
        let ops = generate(&hot(seed, true));
        let c = check_per_key_with(&ops, Budget::default(), ONE_THREAD);
        let bad: Vec<_> =
            c.per_key.iter().filter(|(_, v)| matches!(v, Verdict::NotLinearizable { .. })).collect();
        assert_eq!(bad.len(), 1, "seed {seed}: {:?}", c.per_key);
        assert_ne!(bad[0].0, "k0", "the stale read is never on the hot key");
        assert!(c.steps <= 400_000, "seed {seed}: {} steps", c.steps);
        assert!(c.cache_bytes_peak <= 16 << 20, "seed {seed}: {} cache bytes", c.cache_bytes_peak);
        // Keys left undecided say why.
        assert!(c.per_key.iter().any(|(_, v)| *v == Verdict::Unknown { reason: NOT_DECIDED.to_owned() }));
    }
    // What the old order costs: the hot key alone, to its verdict.
    let ops = generate(&hot(1, true));
    let hot_key: Vec<_> = ops.iter().filter(|op| op.input.key() == "k0").cloned().collect();
    let alone = check_per_key_with(&hot_key, Budget::default(), ONE_THREAD);
    assert!(alone.per_key[0].1.is_linearizable());
    assert!(alone.steps >= 2_000_000, "the hot key takes {} steps", alone.steps);
}

#[test]
fn every_key_decides_every_key_and_threads_agree() {
    let ops = generate(&hot(2, true));
    let every = Options { threads: 1, every_key: true };
    let c = check_per_key_with(&ops, Budget::default(), every);
    assert_eq!(c.per_key.len(), 10);
    let bad = c.per_key.iter().filter(|(_, v)| matches!(v, Verdict::NotLinearizable { .. })).count();
    let good = c.per_key.iter().filter(|(_, v)| v.is_linearizable()).count();
    assert_eq!((bad, good), (1, 9), "{:?}", c.per_key);
    let two = check_per_key_with(&ops, Budget::default(), Options { threads: 2, every_key: true });
    assert_eq!(two.per_key, c.per_key);
    let first = check_per_key_with(&ops, Budget::default(), Options { threads: 2, every_key: false });
    let stopped = first.per_key.iter().find(|(_, v)| matches!(v, Verdict::NotLinearizable { .. }));
    assert_eq!(stopped, c.per_key.iter().find(|(_, v)| matches!(v, Verdict::NotLinearizable { .. })));
}

#[test]
fn the_memory_bound_ends_in_unknown_instead_of_exhausting_the_machine() {
    // One key, 40 clients: far beyond what the search can decide.
    let spec =
        Spec { clients: 40, ops: 2000, keys: 1, hot_percent: 0, crashes: 8, stale_read: true, seed: 1 };
    let ops = generate(&spec);
    let bound = 8 << 20;
    let budget = Budget { steps_max: u64::MAX, time_max: None, cache_bytes_max: bound };
    let c = check_per_key_with(&ops, budget, ONE_THREAD);
    let Verdict::Unknown { reason } = &c.per_key[0].1 else { panic!("{:?}", c.per_key[0].1) };
    assert!(reason.contains(&format!("{bound} cache bytes")), "{reason}");
    // Past the bound by at most one growth of the cache's tables.
    assert!(c.cache_bytes_peak <= 2 * bound, "{} bytes", c.cache_bytes_peak);
    assert!(c.cache_bytes_peak >= bound / 2, "{} bytes", c.cache_bytes_peak);
    // The bound is on all keys together.
    let spec = Spec { keys: 4, ..spec };
    let c = check_per_key_with(&generate(&spec), budget, Options { threads: 1, every_key: true });
    assert!(c.cache_bytes_peak <= 2 * bound, "{} bytes", c.cache_bytes_peak);
}

fn reference(relative: &str) -> Option<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/histories").join(relative);
    if path.is_file() {
        return Some(format!("../shared/histories/{relative}"));
    }
    assert!(std::env::var_os("REPLICHECK_REQUIRE_HISTORIES").is_none(), "{} is missing", path.display());
    eprintln!("SKIPPED: {} is missing", path.display());
    None
}

#[test]
fn the_html_picture_marks_the_operation_that_cannot_be_linearized() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(etcd) = reference("jepsen-etcd/etcd_000.log") else { return };
    let Some(kv) = reference("kv/c10-bad.txt") else { return };
    for (file, op, prefix) in [(etcd, 43, 41), (kv, 83, 9)] {
        let out_path = dir.path().join("out.html");
        let out = replicheck(&["history", "check", &file, "--html", out_path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        let html = std::fs::read_to_string(&out_path).expect("the page");
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains(&format!("longest linearizable prefix: {prefix} operations")), "{file}");
        // Exactly one operation is marked, and it is the one the verdict names.
        assert_eq!(html.matches(r#"id="unplaced""#).count(), 1);
        let marked = html.split(r#"id="unplaced"><title>"#).nth(1).expect("marked op");
        assert!(marked.starts_with(&format!("op {op}, ")), "{}", &marked[..80]);
        assert!(html.contains(r#"class="op unplaced""#));
        assert_eq!(html.matches("class=\"op prefix").count(), prefix, "{file}: the prefix, numbered");
        assert!(html.contains("cannot be linearized by here"));
        // Self-contained: nothing is fetched.
        for fetched in ["<script src", "<link", "http://", "https://", "@import"] {
            let outside = html.replace("http://www.w3.org/2000/svg", "");
            assert!(!outside.contains(fetched), "{file}: {fetched}");
        }
    }
    // A linearizable history draws too, with nothing marked.
    let out_path = dir.path().join("ok.html");
    let Some(ok) = reference("kv/c10-ok.txt") else { return };
    let out = replicheck(&["history", "check", &ok, "--html", out_path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let html = std::fs::read_to_string(&out_path).expect("the page");
    assert!(!html.contains(r#"id="unplaced""#) && html.contains("linearizable"));
    // --html draws one file.
    let out = replicheck(&["history", "check", &ok, &ok, "--html", out_path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn an_unreadable_or_empty_file_is_reported_and_the_others_still_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, "").expect("write");
    let missing = dir.path().join("missing.log");
    let ok = dir.path().join("ok.txt");
    let bad = dir.path().join("bad.txt");
    let small =
        |stale_read| Spec { clients: 6, ops: 100, keys: 2, hot_percent: 0, crashes: 1, stale_read, seed: 3 };
    std::fs::write(&ok, to_edn(&generate(&small(false)))).expect("write");
    std::fs::write(&bad, to_edn(&generate(&small(true)))).expect("write");
    let files = [&empty, &ok, &missing, &bad].map(|p| p.to_str().unwrap().to_owned());
    let mut args = vec!["history", "check"];
    args.extend(files.iter().map(String::as_str));
    let out = replicheck(&args);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("{}: 100 ops, 2 keys, linearizable", files[1])), "{stdout}");
    assert!(stdout.contains(&format!("{}: 101 ops, 2 keys, NOT linearizable", files[3])), "{stdout}");
    assert!(stderr.contains(&format!("{}: empty history", files[0])), "{stderr}");
    assert!(stderr.contains(&format!("{}: cannot read", files[2])), "{stderr}");
    // Reported in order, between the others.
    assert!(stdout.find(&files[1]) < stdout.find(&files[3]));

    args.push("--json");
    let out = replicheck(&args);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["exit_code"], 2);
    assert!(doc["files"][0]["error"].as_str().expect("error").contains("empty history"));
    assert_eq!(doc["files"][1]["verdict"], "linearizable");
    assert!(doc["files"][2]["error"].as_str().expect("error").contains("cannot read"));
    assert_eq!(doc["files"][3]["verdict"], "not_linearizable");
    assert!(doc["files"][3]["steps"].as_u64().expect("steps") > 0);
}

/// `store run --history` (issue 36): a client's SET got no answer and the client went on. The
/// file must complete that SET with `:info` and continue the client under a new process, so
/// `history check` decides it (0 or 1) instead of refusing it (2).
#[test]
fn a_store_history_with_an_unknown_write_then_more_ops_is_checked() {
    use replicheck::store::run::client::{Input, Op, Outcome};
    let op = |client, input, call_ns, outcome| Op {
        client,
        key: "p1:k".into(),
        input,
        call_ns,
        outcome,
        attempts: 1,
        cut_off: false,
    };
    let read = |return_ns, v| Outcome::Ok { return_ns, read: v };
    let dir = tempfile::tempdir().expect("tempdir");
    // Client 0's write of 7 may have happened; its reads then see 7, or 7 and then nothing.
    for (later, code) in [(Some(7), 0), (None, 1)] {
        let history = [
            op(0, Input::Write(7), 0, Outcome::Unknown),
            op(1, Input::Read, 5, read(9, None)),
            op(0, Input::Read, 50, read(60, Some(7))),
            op(0, Input::Read, 70, read(80, later)),
        ];
        let ops: Vec<_> = history.iter().filter_map(Op::as_kv_op).collect();
        let file = dir.path().join(format!("h{code}.edn"));
        std::fs::write(&file, to_edn(&ops)).expect("write");
        let out = replicheck(&["history", "check", file.to_str().unwrap()]);
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(code), "{text}");
    }
}
