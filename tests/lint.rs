//! `replicheck lint` through the binary (issue #5): each rule fires on a policy that breaks it
//! and stays quiet on one that does not (static, `--static`: every finding a warning), exit
//! codes (1 on an error, which only the checker's confirmation makes; 0 with warnings only; 2
//! on bad input), the JSON report, the ack-timeout incident's two policies against its model
//! with the checker behind them, and `check` printing lint findings above its results.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MODEL: &str = "models/ack-timeout-eviction.toml";

/// A policy no rule objects to, with or without the ack-timeout model (worst round trip 1.4s:
/// 2 x 700ms over the degraded a<->b link). Tests change one key at a time.
const CLEAN: &str = r#"replication_factor = 3
write_quorum = 2
read_quorum = 2
replica_ack_timeout = "500ms"
failure_detection = "independent"
heartbeat_interval = "1s"
suspect_after = "2500ms"
dead_after = "3s"
eviction_enabled = true
max_dead_fraction = 0.34
max_attempts = 3
backoff = "exponential_jitter"
backoff_base = "500ms"
backoff_max = "2s"
retry_budget = 2
idempotency_tokens = true
"#;

/// `CLEAN` with each `(key, value)` replacing that key's line; `None` removes the key.
fn policy(changes: &[(&str, Option<&str>)]) -> String {
    let mut lines: Vec<String> = CLEAN.lines().map(str::to_string).collect();
    for (key, value) in changes {
        let at = lines.iter().position(|l| l.split(" = ").next() == Some(key));
        match (at, value) {
            (Some(i), Some(v)) => lines[i] = format!("{key} = {v}"),
            (Some(i), None) => {
                lines.remove(i);
            }
            (None, Some(v)) => lines.push(format!("{key} = {v}")),
            (None, None) => {}
        }
    }
    lines.join("\n") + "\n"
}

fn replicheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the replicheck binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// A policy file in its own temporary directory (kept alive by the returned guard).
fn policy_file(toml: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, toml).unwrap();
    (dir, path)
}

/// The outcome of `lint --format json`: exit code and the parsed report.
struct Lint {
    code: Option<i32>,
    doc: serde_json::Value,
}

impl Lint {
    fn ids(&self) -> Vec<String> {
        self.doc["findings"]
            .as_array()
            .expect("findings is an array")
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_string())
            .collect()
    }

    fn count(&self, id: &str) -> usize {
        self.ids().iter().filter(|i| *i == id).count()
    }

    fn has(&self, id: &str) -> bool {
        self.count(id) > 0
    }

    fn not_run(&self) -> Vec<String> {
        self.doc["not_run"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    }
}

/// `lint --format json`, static (`--static` with a model): what the rules say.
fn lint_path(path: &Path, model: Option<&str>) -> Lint {
    lint_args(path, model, &["--static"])
}

/// `lint --model` with the checker behind the findings.
fn lint_checked(path: &Path, model: &str) -> Lint {
    lint_args(path, Some(model), &[])
}

fn lint_args(path: &Path, model: Option<&str>, with_model: &[&str]) -> Lint {
    let path = path.display().to_string();
    let mut args = vec!["lint", path.as_str(), "--format", "json"];
    if let Some(m) = model {
        args.extend(["--model", m]);
        args.extend(with_model);
    }
    let out = replicheck(&args);
    let stdout = text(&out.stdout);
    let doc: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is JSON ({e}):\n{stdout}\nstderr:\n{}", text(&out.stderr)));
    let code = out.status.code();
    assert_eq!(doc["exit_code"].as_i64().map(|c| c as i32), code, "exit_code in the report is the exit code");
    Lint { code, doc }
}

fn lint(toml: &str, model: Option<&str>) -> Lint {
    let (_dir, path) = policy_file(toml);
    lint_path(&path, model)
}

/// Exit code and stderr of a lint that must be rejected as bad input.
fn rejected(args: &[&str]) -> String {
    let out = replicheck(args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "bad input exits 2: {args:?}\nstderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn a_clean_policy_has_no_finding_with_or_without_the_model() {
    let alone = lint(CLEAN, None);
    assert_eq!(alone.code, Some(0));
    assert!(alone.ids().is_empty(), "{}", alone.doc);
    assert_eq!(
        alone.not_run(),
        ["RC003", "RC005", "RC006", "RC015", "RC019", "RC020", "RC021"],
        "rules that need the environment"
    );
    let with_model = lint(CLEAN, Some(MODEL));
    assert_eq!(with_model.code, Some(0));
    assert!(with_model.ids().is_empty(), "{}", with_model.doc);
    assert!(with_model.not_run().is_empty());
}

#[test]
fn rc001_write_quorum_at_most_half_the_replication_factor() {
    let w1 = lint(&policy(&[("write_quorum", Some("1")), ("read_quorum", Some("3"))]), None);
    assert!(w1.has("RC001"), "{}", w1.doc);
    assert!(!w1.has("RC002"), "W + R = 4 > 3: reads and writes still meet");
    assert_eq!(w1.code, Some(0), "static: a candidate error, reported as a warning");
    assert_eq!(w1.doc["findings"][0]["rule_severity"], "error");
    assert_eq!(w1.doc["findings"][0]["severity"], "warning");
    assert_eq!(w1.doc["findings"][0]["checker"]["verdict"], "not_run");
    // With an even replication factor, half is already too few: two halves can both acknowledge.
    let half = lint(
        &policy(&[
            ("replication_factor", Some("4")),
            ("write_quorum", Some("2")),
            ("read_quorum", Some("3")),
        ]),
        None,
    );
    assert!(half.has("RC001"), "{}", half.doc);
    let majority = lint(
        &policy(&[
            ("replication_factor", Some("4")),
            ("write_quorum", Some("3")),
            ("read_quorum", Some("2")),
        ]),
        None,
    );
    assert!(!majority.has("RC001"), "{}", majority.doc);
    assert!(!lint(CLEAN, None).has("RC001"));
}

#[test]
fn rc002_read_and_write_quorums_that_need_not_meet() {
    let r1 = lint(&policy(&[("read_quorum", Some("1"))]), None);
    assert!(r1.has("RC002"), "{}", r1.doc);
    assert!(!r1.has("RC001"), "W = 2 of 3 is a majority");
    assert_eq!(r1.code, Some(0), "static");
    let r2 = lint(&policy(&[("read_quorum", Some("2"))]), None);
    assert!(!r2.has("RC002"), "{}", r2.doc);
}

#[test]
fn rc003_the_incident_change_is_an_error_and_production_is_not() {
    let incident = lint_checked(Path::new("examples/policies/ack-timeout-500ms.toml"), MODEL);
    assert!(incident.has("RC003"), "{}", incident.doc);
    assert_eq!(incident.code, Some(1));
    assert_eq!(incident.doc["checked"]["complete"], true, "{}", incident.doc);
    let finding = &incident.doc["findings"][incident.ids().iter().position(|i| i == "RC003").unwrap()];
    assert_eq!(finding["severity"], "error");
    assert_eq!(finding["checker"]["verdict"], "violated", "{finding}");
    assert_eq!(finding["checker"]["property"], "no_healthy_eviction", "{finding}");
    let message = finding["message"].as_str().unwrap();
    for needle in ["500ms", "1400ms", "n2 (zone b)", "a<->b 300ms..700ms"] {
        assert!(message.contains(needle), "names {needle}: {message}");
    }

    let production = lint_checked(Path::new("examples/policies/production-2s.toml"), MODEL);
    assert!(!production.has("RC003"), "{}", production.doc);
    // Its one error is not the deadline: without idempotency tokens a retried write is applied
    // twice (RC010 warns; the checker finds it, so RC000 makes it an error).
    let errors: Vec<String> = production.doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| format!("{} {}", f["id"].as_str().unwrap(), f["checker"]["property"].as_str().unwrap()))
        .collect();
    assert_eq!(errors, ["RC000 no_duplicate_effects"], "{}", production.doc);
    let rc007 =
        production.doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "RC007").unwrap().clone();
    assert_eq!(rc007["checker"]["verdict"], "holds", "2s deadlines evict nobody healthy here: {rc007}");
}

#[test]
fn rc003_bound_is_the_worst_round_trip_itself() {
    // Equal is too short: the reply can arrive on the tick the deadline fires (tests/ack_timeout.rs
    // shows the eviction at 1400ms, none at 1500ms).
    let coupled = |timeout: &str| {
        policy(&[("failure_detection", Some("\"coupled\"")), ("replica_ack_timeout", Some(timeout))])
    };
    assert!(lint(&coupled("\"1400ms\""), Some(MODEL)).has("RC003"));
    let above = lint(&coupled("\"1500ms\""), Some(MODEL));
    assert!(!above.has("RC003"), "{}", above.doc);
    assert_eq!(above.code, Some(0));
}

#[test]
fn rc003_needs_coupled_detection_eviction_and_a_model() {
    // Independent detection: a missed deadline is not evidence of death.
    assert!(!lint(CLEAN, Some(MODEL)).has("RC003"));
    let coupled_no_eviction =
        policy(&[("failure_detection", Some("\"coupled\"")), ("eviction_enabled", Some("false"))]);
    assert!(!lint(&coupled_no_eviction, Some(MODEL)).has("RC003"), "nothing is evicted");
    let alone = lint_path(Path::new("examples/policies/ack-timeout-500ms.toml"), None);
    assert!(!alone.has("RC003"));
    assert!(alone.not_run().contains(&"RC003".to_string()));
}

#[test]
fn rc004_detection_thresholds_not_above_the_request_deadline() {
    let both = lint(
        &policy(&[
            ("replica_ack_timeout", Some("\"2s\"")),
            ("suspect_after", Some("\"1s\"")),
            ("dead_after", Some("\"2s\"")),
        ]),
        None,
    );
    assert_eq!(both.count("RC004"), 2, "dead_after and suspect_after, each a finding: {}", both.doc);
    assert_eq!(both.code, Some(0), "a warning");
    let suspect_only = lint(
        &policy(&[
            ("replica_ack_timeout", Some("\"2s\"")),
            ("suspect_after", Some("\"2s\"")),
            ("dead_after", Some("\"5s\"")),
        ]),
        None,
    );
    assert_eq!(suspect_only.count("RC004"), 1, "{}", suspect_only.doc);
    assert!(!lint(CLEAN, None).has("RC004"), "2.5s and 3s are above 500ms");
    let coupled = lint(
        &policy(&[
            ("failure_detection", Some("\"coupled\"")),
            ("replica_ack_timeout", Some("\"2s\"")),
            ("suspect_after", Some("\"1s\"")),
            ("dead_after", Some("\"2s\"")),
        ]),
        None,
    );
    assert!(!coupled.has("RC004"), "the thresholds are unused under coupled detection");
}

#[test]
fn rc005_dead_after_within_a_heartbeat_and_a_worst_round_trip() {
    let dead = |check: &str, dead_after: &str| {
        lint(
            &policy(&[
                ("health_check", Some(check)),
                ("suspect_after", Some("\"1s\"")),
                ("dead_after", Some(dead_after)),
            ]),
            Some(MODEL),
        )
    };
    // Checked continuously: heartbeat 1s + worst round trip 1.4s = 2.4s of normal silence.
    let short = dead("\"continuous\"", "\"2400ms\"");
    assert!(short.has("RC005"), "{}", short.doc);
    assert_eq!(short.code, Some(0), "static: a candidate");
    let message = short.message("RC005");
    assert!(message.contains("1s + 1400ms = 2400ms") && !message.contains("rounds"), "{message}");
    // A bound, not a fact: the checker may find that this model never reaches it (issue 36).
    assert!(
        message.ends_with(
            "a healthy replica may be silent that long, and would then be declared dead and evicted"
        ),
        "{message}"
    );
    // 2.5s: tests/ack_timeout.rs checks that no healthy replica is evicted.
    let enough = dead("\"continuous\"", "\"2500ms\"");
    assert!(!enough.has("RC005"), "{}", enough.doc);
    // Judged at rounds (1s apart, the first 1s after the start), the silence is seen at 2s
    // at most, before the pong due at 2.4s: 2s evicts a healthy replica, 2.1s does not (the
    // checker agrees: tests/lint_agreement.rs).
    let rounds = dead("\"rounds\"", "\"2s\"");
    let message = rounds.message("RC005");
    assert!(
        message.contains("= 2400ms") && message.contains("the longest silence a round sees is 2s"),
        "{message}"
    );
    assert!(!dead("\"rounds\"", "\"2100ms\"").has("RC005"));
    let alone = lint(&policy(&[("suspect_after", Some("\"1s\"")), ("dead_after", Some("\"2400ms\""))]), None);
    assert!(!alone.has("RC005") && alone.not_run().contains(&"RC005".to_string()));
}

#[test]
fn rc006_suspect_after_within_a_heartbeat_and_a_worst_round_trip() {
    // The ack-timeout model's `fixed` variant: suspect after 2s, dead after 3s.
    let fixed = lint(&policy(&[("suspect_after", Some("\"2s\""))]), Some(MODEL));
    assert!(fixed.has("RC006"), "{}", fixed.doc);
    assert!(!fixed.has("RC005"));
    assert_eq!(fixed.code, Some(0), "a warning");
    assert!(!lint(CLEAN, Some(MODEL)).has("RC006"), "2.5s is above 2.4s");
}

#[test]
fn rc007_eviction_without_a_circuit_breaker() {
    let open = lint(&policy(&[("max_dead_fraction", Some("1.0"))]), None);
    assert!(open.has("RC007"), "{}", open.doc);
    assert_eq!(open.code, Some(0));
    assert!(!lint(CLEAN, None).has("RC007"), "0.34 trips");
    let disabled =
        lint(&policy(&[("max_dead_fraction", Some("1.0")), ("eviction_enabled", Some("false"))]), None);
    assert!(!disabled.has("RC007"), "no eviction, nothing to break");
}

#[test]
fn rc008_retries_without_jitter() {
    let fixed = lint(&policy(&[("backoff", Some("\"fixed\"")), ("backoff_max", Some("\"500ms\""))]), None);
    assert!(fixed.has("RC008"), "{}", fixed.doc);
    assert_eq!(fixed.code, Some(0));
    // Jitter in name only: the window never widens.
    let flat = lint(&policy(&[("backoff_max", Some("\"500ms\""))]), None);
    assert!(flat.has("RC008"), "{}", flat.doc);
    // Even a single retry is jittered: the first retry's window is [base, 2 x base].
    let one_retry = lint(&policy(&[("max_attempts", Some("2"))]), None);
    assert!(!one_retry.has("RC008"), "{}", one_retry.doc);
    assert!(!lint(CLEAN, None).has("RC008"), "the first retry waits 500ms..1s");
    let no_retries = lint(&policy(&[("backoff", Some("\"fixed\"")), ("max_attempts", Some("1"))]), None);
    assert!(!no_retries.has("RC008"), "nothing is retried");
}

#[test]
fn rc009_retries_without_a_budget() {
    let unbudgeted = lint(&policy(&[("retry_budget", None)]), None);
    assert!(unbudgeted.has("RC009"), "{}", unbudgeted.doc);
    assert_eq!(unbudgeted.code, Some(0));
    assert!(!lint(CLEAN, None).has("RC009"));
    // A budget of 0 allows no retry at all: no retry rule applies.
    let zero = lint(
        &policy(&[
            ("retry_budget", Some("0")),
            ("backoff", Some("\"fixed\"")),
            ("idempotency_tokens", Some("false")),
        ]),
        None,
    );
    for id in ["RC008", "RC009", "RC010"] {
        assert!(!zero.has(id), "{id}: {}", zero.doc);
    }
}

#[test]
fn rc010_retries_without_idempotency_tokens() {
    let tokenless = lint(&policy(&[("idempotency_tokens", Some("false"))]), None);
    assert!(tokenless.has("RC010"), "{}", tokenless.doc);
    assert_eq!(tokenless.code, Some(0));
    assert!(!lint(CLEAN, None).has("RC010"));
    let single = lint(&policy(&[("idempotency_tokens", Some("false")), ("max_attempts", Some("1"))]), None);
    assert!(!single.has("RC010"), "no retry, no duplicate");
}

/// `CLEAN` with the rebalancer on, compaction-aware and with a growing, capped cooldown.
fn rebalancing(changes: &[(&str, Option<&str>)]) -> String {
    let mut all = vec![
        ("rebalance_enabled", Some("true")),
        ("scoring", Some("\"disk_and_compaction\"")),
        ("compaction_debt_max", Some("30")),
        ("move_cooldown", Some("\"2s\"")),
        ("cooldown_backoff", Some("2")),
        ("cooldown_max", Some("\"8s\"")),
    ];
    all.extend_from_slice(changes);
    policy(&all)
}

#[test]
fn rc011_rebalancer_scoring_blind_to_compaction() {
    let blind = lint(&rebalancing(&[("scoring", Some("\"disk\""))]), None);
    assert!(blind.has("RC011"), "{}", blind.doc);
    assert_eq!(blind.code, Some(0), "a warning");
    assert!(!lint(&rebalancing(&[]), None).has("RC011"));
    // Without a debt limit the aware scoring still ranks targets by disk plus debt.
    let no_limit = lint(&rebalancing(&[("compaction_debt_max", Some("100"))]), None);
    assert!(!no_limit.has("RC011"), "{}", no_limit.doc);
    let off = lint(&policy(&[("scoring", Some("\"disk\""))]), None);
    assert!(!off.has("RC011"), "no rebalancer, nothing to oscillate");
}

#[test]
fn rc012_rebalancer_cooldown_zero_or_unable_to_grow() {
    let zero =
        lint(&rebalancing(&[("move_cooldown", Some("\"0ms\"")), ("cooldown_max", Some("\"0ms\""))]), None);
    assert!(zero.has("RC012"), "{}", zero.doc);
    assert_eq!(zero.code, Some(0));
    let flat = lint(&rebalancing(&[("cooldown_max", Some("\"1s\""))]), None);
    assert!(flat.has("RC012"), "the cap is below the base: {}", flat.doc);
    assert!(!lint(&rebalancing(&[]), None).has("RC012"), "2s doubling to 8s");
    let no_backoff =
        lint(&rebalancing(&[("cooldown_backoff", Some("1")), ("cooldown_max", Some("\"0ms\""))]), None);
    assert!(!no_backoff.has("RC012"), "a flat cooldown asked for as such: {}", no_backoff.doc);
}

#[test]
fn rc013_sorted_placement() {
    let sorted = lint(&policy(&[("placement", Some("\"sorted\""))]), None);
    assert!(sorted.has("RC013"), "{}", sorted.doc);
    assert_eq!(sorted.code, Some(0), "static: a candidate");
    assert!(!sorted.has("RC014"));
    let aware = lint(&policy(&[("placement", Some("\"capacity_aware\""))]), None);
    assert!(!aware.has("RC013"), "{}", aware.doc);
}

#[test]
fn rc014_upload_planner_bypassing_capacity() {
    let planner = lint(&policy(&[("upload_planner", Some("\"smallest_first\""))]), None);
    assert!(planner.has("RC014"), "{}", planner.doc);
    assert_eq!(planner.code, Some(0), "static: a candidate");
    assert!(!planner.has("RC013"), "placement itself is capacity-aware");
    let both = lint(
        &policy(&[("upload_planner", Some("\"smallest_first\"")), ("placement", Some("\"sorted\""))]),
        None,
    );
    assert!(both.has("RC013") && both.has("RC014"), "{}", both.doc);
    assert!(!lint(&policy(&[("upload_planner", Some("\"capacity_aware\""))]), None).has("RC014"));
}

#[test]
fn rc015_a_hot_prefix_that_fills_its_partition() {
    const HOT: &str = "models/hot-partition-retry-storm.toml";
    let (_dir, one_file) = policy_file("write_shard_suffixes = 1\n");
    let one = lint_checked(&one_file, HOT);
    assert!(one.has("RC015"), "{}", one.doc);
    assert_eq!(one.code, Some(1), "the checker confirms it: {}", one.doc);
    let rc015 = one.doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "RC015").unwrap().clone();
    assert_eq!(rc015["severity"], "error");
    assert_eq!(rc015["checker"]["property"], "capacity_respected", "{rc015}");
    let message = one.doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "RC015").unwrap()
        ["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("partition p1") && message.contains("write_shard_suffixes = 2 would spread it"),
        "{message}"
    );
    // More table capacity does not help: the per-partition cap stays.
    let table = lint("write_shard_suffixes = 1\ntable_write_capacity = \"160/s\"\n", Some(HOT));
    assert!(table.has("RC015"), "{}", table.doc);
    // A higher per-partition cap leaves the burst room, but not the two checkout clients whose
    // keys share p1 (the checker finds 4 writes offered in one tick for 3).
    let (_raised_dir, raised_file) = policy_file(
        "write_shard_suffixes = 1\npartition_write_capacity = \"30/s\"\ntable_write_capacity = \"120/s\"\n",
    );
    let raised = lint_checked(&raised_file, HOT);
    assert!(raised.has("RC015"), "{}", raised.doc);
    assert_eq!(raised.code, Some(1), "the checker confirms it: {}", raised.doc);
    let text = raised.doc.to_string();
    assert!(text.contains("checkout-1, checkout-2 may each write to it in the same tick"), "{text}");
    assert!(text.contains("4 for a capacity of 3"), "{text}");
    // Room for the burst's share and both clients: no finding.
    let roomy = lint(
        "write_shard_suffixes = 1\npartition_write_capacity = \"40/s\"\ntable_write_capacity = \"160/s\"\n",
        Some(HOT),
    );
    assert!(!roomy.has("RC015"), "{}", roomy.doc);
    assert!(!lint("write_shard_suffixes = 4\n", Some(HOT)).has("RC015"));
    assert!(!lint("write_shard_suffixes = 2\n", Some(HOT)).has("RC015"));
}

#[test]
fn every_finding_is_reported_not_just_the_first() {
    let bad = policy(&[
        ("write_quorum", Some("1")),
        ("read_quorum", Some("1")),
        ("failure_detection", Some("\"coupled\"")),
        ("max_dead_fraction", Some("1.0")),
        ("backoff", Some("\"fixed\"")),
        ("retry_budget", None),
        ("idempotency_tokens", Some("false")),
    ]);
    let l = lint(&bad, Some(MODEL));
    assert_eq!(l.ids(), ["RC001", "RC002", "RC003", "RC007", "RC008", "RC009", "RC010"], "{}", l.doc);
    assert_eq!(l.doc["errors"], 0, "static: nothing confirmed");
    assert_eq!(l.doc["warnings"], 7);
    assert_eq!(l.code, Some(0));
    let candidates =
        l.doc["findings"].as_array().unwrap().iter().filter(|f| f["rule_severity"] == "error").count();
    assert_eq!(candidates, 3, "RC001, RC002, RC003 would be errors if the checker confirmed them");
}

#[test]
fn json_findings_carry_the_rule() {
    let l = lint_path(Path::new("examples/policies/ack-timeout-500ms.toml"), Some(MODEL));
    assert_eq!(l.doc["policy"], "examples/policies/ack-timeout-500ms.toml");
    assert_eq!(l.doc["model"], MODEL);
    for f in l.doc["findings"].as_array().unwrap() {
        for key in ["id", "name", "severity", "message", "origin", "explanation"] {
            assert!(f[key].as_str().is_some_and(|s| !s.is_empty()), "{key} in {f}");
        }
        assert!(!f["protects"].as_array().unwrap().is_empty(), "{f}");
    }
    let rc003 = &l.doc["findings"][0];
    assert_eq!(rc003["id"], "RC003");
    assert_eq!(rc003["protects"][0], "no_healthy_eviction");
    assert!(rc003["origin"].as_str().unwrap().contains("docs/incidents.md#ack-timeout-eviction-storm"));
}

#[test]
fn human_report_explains_each_rule() {
    let out = replicheck(&["lint", "examples/policies/ack-timeout-500ms.toml", "--model", MODEL]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("error[RC003] ack-deadline-within-round-trip: replica_ack_timeout = 500ms"),
        "{stdout}"
    );
    assert!(stdout.contains("protects: no_healthy_eviction"), "{stdout}");
    assert!(stdout.contains("origin: docs/incidents.md#ack-timeout-eviction-storm"), "{stdout}");
    assert!(stdout.contains("checker: violated in this model: no_healthy_eviction ("), "{stdout}");
    // RC010 is only a warning, but the checker finds its property violated: RC000 says so.
    assert!(
        stdout.contains("error[RC000] checker-violation: no_duplicate_effects is violated in this model under this policy, and only warnings flag it (RC010)"),
        "{stdout}"
    );
    assert!(stdout.contains("2 error(s), 4 warning(s)"), "{stdout}");

    let out = replicheck(&["lint", "examples/policies/production-2s.toml"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("not run: RC003, RC005, RC006"), "{stdout}");
}

#[test]
fn bad_input_exits_2() {
    let (_dir, unknown) = policy_file("replica_ack_timout = \"1s\"\n");
    let stderr = rejected(&["lint", unknown.to_str().unwrap()]);
    assert!(stderr.contains("did you mean `replica_ack_timeout`?"), "{stderr}");

    let (_dir, inverted) = policy_file("suspect_after = \"5s\"\ndead_after = \"1s\"\n");
    let stderr = rejected(&["lint", inverted.to_str().unwrap()]);
    assert!(stderr.contains("suspect_after"), "{stderr}");

    let (_dir, over) = policy_file("write_quorum = 4\n");
    rejected(&["lint", over.to_str().unwrap()]);

    // Valid alone, not against the model's tick.
    let (_dir, off_tick) = policy_file("replica_ack_timeout = \"450ms\"\n");
    assert_eq!(replicheck(&["lint", off_tick.to_str().unwrap()]).status.code(), Some(0));
    let stderr = rejected(&["lint", off_tick.to_str().unwrap(), "--model", MODEL]);
    assert!(stderr.contains("not a whole number of ticks"), "{stderr}");

    rejected(&["lint", "no/such/policy.toml"]);
    rejected(&["lint", "examples/policies/production-2s.toml", "--model", "no/such/model.toml"]);
    rejected(&["lint", "examples/policies/production-2s.toml", "--format", "junit"]);
}

#[test]
fn long_durations_lint_without_a_model() {
    // 300 of the finest tick that divides them: too many for a model, fine for lint.
    let l = lint(&policy(&[("backoff_base", Some("\"100ms\"")), ("backoff_max", Some("\"30s\""))]), None);
    assert_eq!(l.code, Some(0), "{}", l.doc);
}

#[test]
fn check_prints_lint_findings_above_the_results() {
    let out = replicheck(&["check", "tests/data/small-quorum.toml"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "lint findings do not change check's exit code:\n{stderr}");
    // Static findings (the run below is the checker's verdict): warnings.
    let first_lint = stderr.find("lint small-quorum / write-quorum-1: warning[RC001] write-quorum-minority:");
    let first_run = stderr.find("ok: small-quorum /");
    assert!(first_lint.is_some() && first_run.is_some(), "{stderr}");
    assert!(first_lint < first_run, "lint comes first:\n{stderr}");
    assert!(stderr.contains("lint small-quorum / write-quorum-1: warning[RC002]"), "{stderr}");
    assert!(!stderr.contains("lint small-quorum / default: error"), "{stderr}");
    assert!(!text(&out.stdout).contains("lint "), "the report on stdout is unchanged");

    let json = replicheck(&["check", "tests/data/small-quorum.toml", "--format", "json"]);
    assert!(!text(&json.stderr).contains("lint "), "human format only");
    serde_json::from_slice::<serde_json::Value>(&json.stdout).expect("stdout stays one JSON document");
}

#[test]
fn rc016_reads_without_repair() {
    let off = lint(CLEAN, None);
    assert!(!off.has("RC016"), "read repair is on by default: {}", off.doc);
    let no_repair = lint(&format!("{CLEAN}read_repair = false\n"), None);
    assert!(no_repair.has("RC016"), "{}", no_repair.doc);
    let read_all = lint(&format!("{}read_repair = false\n", policy(&[("read_quorum", Some("3"))])), None);
    assert!(!read_all.has("RC016"), "a read of every replica needs no repair: {}", read_all.doc);
}

#[test]
fn rc017_membership_in_memory() {
    let in_memory = lint(&format!("{CLEAN}durable_membership = false\n"), None);
    assert!(in_memory.has("RC017"), "{}", in_memory.doc);
    let fixed = lint(
        &format!("{}durable_membership = false\n", policy(&[("eviction_enabled", Some("false"))])),
        None,
    );
    assert!(!fixed.has("RC017"), "no eviction, no rebalancing: membership never changes: {}", fixed.doc);
    // Confirmed by the checker on the model made for it.
    let (_dir, file) = policy_file("durable_membership = false\n");
    let checked = lint_checked(&file, "models/coordinator-restart.toml");
    let rc017 = findings_of(&checked, "RC017");
    assert_eq!(rc017["severity"], "error", "{rc017}");
    assert_eq!(checked.code, Some(1));
}

fn findings_of(l: &Lint, id: &str) -> serde_json::Value {
    l.doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {}", l.doc))
        .clone()
}

impl Lint {
    /// The message of the first finding of rule `id`.
    fn message(&self, id: &str) -> String {
        let findings = self.doc["findings"].as_array().unwrap();
        let f = findings.iter().find(|f| f["id"] == id).unwrap_or_else(|| panic!("no {id}: {}", self.doc));
        f["message"].as_str().unwrap().to_string()
    }
}

/// The do-nothing policies and the incidents' missing links (issue #14), rule by rule, on
/// both sides of each bound. tests/lint_agreement.rs holds the same policies to the checker.
#[test]
fn rules_for_the_missing_links_and_the_do_nothing_properties() {
    // RC018: a crashed replica that is never replaced.
    const DEAD: &str = "tests/data/dead-replaced.toml";
    assert!(!lint("", Some(DEAD)).has("RC018"), "independent detection replaces it");
    assert!(lint("eviction_enabled = false\n", Some(DEAD))
        .message("RC018")
        .contains("eviction_enabled = false"));
    assert!(lint("max_concurrent_evictions = 0\n", Some(DEAD)).has("RC018"));
    assert!(lint("max_recoveries_per_node = 0\n", Some(DEAD))
        .message("RC018")
        .contains("max_recoveries_per_node = 0"));
    assert!(
        !lint("max_recoveries_per_node = 1\n", Some(DEAD)).has("RC018"),
        "one copy at a time still replaces it"
    );
    // One dead node in four is 25%: a breaker at 20% stops it, at 25% lets it through.
    assert!(lint("max_dead_fraction = 0.2\n", Some(DEAD))
        .message("RC018")
        .contains("below one dead node in 4"));
    assert!(!lint("max_dead_fraction = 0.25\n", Some(DEAD)).has("RC018"));
    let coupled = lint("failure_detection = \"coupled\"\n", Some(DEAD));
    assert!(coupled.message("RC018").contains("shard s1 (no client writes it for ever)"), "{}", coupled.doc);
    // Where nothing can be replaced (no spare), a policy that never evicts is no finding.
    assert!(!lint("eviction_enabled = false\n", Some("models/hot-partition-retry-storm.toml")).has("RC018"));

    // RC019: a hot shard on a slow node.
    const SLOW: &str = "tests/data/hot-shard-slow-node.toml";
    assert!(!lint("", Some(SLOW)).has("RC019"), "the rebalancer moves it to n1");
    assert!(lint("rebalance_enabled = false\n", Some(SLOW))
        .message("RC019")
        .contains("nothing moves it off"));
    let full = lint("disk_high_watermark = 55\n", Some(SLOW));
    assert!(full.message("RC019").contains("finds it no target"), "{}", full.doc);
    assert!(!lint("disk_high_watermark = 60\n", Some(SLOW)).has("RC019"), "50% + 10% fits under 60%");
    // With debt as node state: 60 points a write every 4 ticks outrun 10 compacted a tick, on
    // any node; compacting 20 a tick keeps up.
    const DEBT: &str = "models/rebalancer-compaction-debt.toml";
    let fixed = "scoring = \"disk_and_compaction\"\ncompaction_debt_max = 30\nmove_cooldown = \"2s\"\n";
    assert!(lint(fixed, Some(DEBT))
        .message("RC019")
        .contains("a write every 4 tick(s) (15.00 points of compaction debt a tick at 60 a write) where a node compacts 10 a tick"));
    let text = std::fs::read_to_string(DEBT).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fast = dir.path().join("fast-compaction.toml");
    std::fs::write(
        &fast,
        text.replace("compaction_debt_drain = \"100/s\"", "compaction_debt_drain = \"200/s\""),
    )
    .unwrap();
    assert!(!lint(fixed, Some(&fast.display().to_string())).has("RC019"), "20 a tick keeps up with 15");

    // RC020: the wait behind the coordinator's backlog plus the worst round trip (1.4s) against
    // the 2s deadline, at one unit per tick: 5 units fit, 6 do not.
    const SATURATION: &str = "models/ack-timeout-coordinator-saturation.toml";
    let ceiling = |c: u16| {
        lint(&format!("replica_ack_timeout = \"2s\"\ncoordinator_load_ceiling = {c}\n"), Some(SATURATION))
    };
    assert!(!ceiling(5).has("RC020"));
    let six = ceiling(6);
    assert!(six.message("RC020").contains("a coordinator_load_ceiling of at most 5 units"), "{}", six.doc);
    assert!(lint("replica_ack_timeout = \"2s\"\n", Some(SATURATION))
        .message("RC020")
        .contains("no coordinator_load_ceiling"));
    assert!(!lint("", Some("models/ack-timeout-eviction.toml")).has("RC020"), "no work queue modelled");
    // Five replicas at 64 units an update and a copy: 384 units an eviction, and 171 at once
    // is past 65535 units. The backlog stays at its most, far past a 15s deadline.
    let text = std::fs::read_to_string(SATURATION).unwrap();
    let five = text
        .replace(
            "[[shards]]",
            "[[nodes]]\nname = \"n5\"\nzone = \"a\"\n\n[[nodes]]\nname = \"n6\"\nzone = \"b\"\n\n[[shards]]",
        )
        .replace("replicas = [\"n1\", \"n2\", \"n3\"]", "replicas = [\"n1\", \"n2\", \"n3\", \"n5\", \"n6\"]")
        .replace("membership_update_work = 8", "membership_update_work = 64")
        .replace("copy_work = 4", "copy_work = 64")
        .replace(
            "replication_factor = 3\nwrite_quorum = 2\nread_quorum = 2",
            "replication_factor = 5\nwrite_quorum = 3\nread_quorum = 3",
        );
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("five-replicas.toml");
    std::fs::write(&model, five).unwrap();
    let model = model.display().to_string();
    for evictions in [170, 171, 255] {
        let many = lint(
            &format!("replica_ack_timeout = \"15s\"\nmax_concurrent_evictions = {evictions}\nidempotency_tokens = true\n"),
            Some(&model),
        );
        assert!(many.has("RC020"), "{evictions} evictions at once: {}", many.doc);
    }

    // RC021: two routers and n1 (capacity 3, 2 from outside): at 100% each takes its last slot.
    const ROUTERS: &str = "models/capacity-routing-two-routers.toml";
    let aware = |spill: &str| {
        lint(
            &format!("placement = \"capacity_aware\"\nupload_planner = \"capacity_aware\"\nspill_threshold = {spill}\n"),
            Some(ROUTERS),
        )
    };
    let full = aware("1.0");
    assert!(full
        .message("RC021")
        .contains("ra puts 1 and rb puts 1 on n1 (capacity 3, 2 from outside), so together they offer it 4"));
    for spill in ["0.75", "0.999"] {
        assert!(
            !aware(spill).has("RC021"),
            "n2 stays under {spill} for all three writes: {}",
            aware(spill).doc
        );
    }
    // Backends of one write a tick: one write passes any threshold, so past it everywhere each
    // router fills the least full backend to capacity, and both pick n1.
    let text = std::fs::read_to_string(ROUTERS).unwrap();
    let small: String = text
        .lines()
        .filter(|l| !l.starts_with("base_load"))
        .map(|l| {
            if l.starts_with("write_capacity") {
                "write_capacity = \"10/s\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dir = tempfile::tempdir().unwrap();
    let small_model = dir.path().join("small-backends.toml");
    std::fs::write(&small_model, small).unwrap();
    let half = lint(
        "placement = \"capacity_aware\"\nupload_planner = \"capacity_aware\"\nspill_threshold = 0.5\n",
        Some(&small_model.display().to_string()),
    );
    assert!(
        half.message("RC021").contains("ra puts 1 and rb puts 1 on n1 (capacity 1, 0 from outside)"),
        "{}",
        half.doc
    );
    // The checker agrees: an error, and no violation left to RC000.
    let (_policy_dir, policy) = policy_file(
        "placement = \"capacity_aware\"\nupload_planner = \"capacity_aware\"\nspill_threshold = 0.5\n",
    );
    let checked = lint_checked(&policy, &small_model.display().to_string());
    assert_eq!(checked.code, Some(1), "{}", checked.doc);
    assert!(checked.has("RC021") && !checked.has("RC000"), "{}", checked.doc);
    assert!(
        !aware("0.5").has("RC021"),
        "at 50% each router leaves every backend half its room: {}",
        aware("0.5").doc
    );
    let one_router =
        "placement = \"capacity_aware\"\nupload_planner = \"capacity_aware\"\nspill_threshold = 1.0\n";
    assert!(!lint(one_router, Some("models/capacity-routing-bypass.toml")).has("RC021"));

    // RC003 and RC005 on the lossy link: a lost request is a miss at any deadline; one more
    // heartbeat interval per message the budget may lose (1s x 2 + 1.4s with the degradation).
    const LOSSY: &str = "models/ack-timeout-lossy-link.toml";
    assert!(lint("replica_ack_timeout = \"2s\"\n", Some(LOSSY))
        .message("RC003")
        .contains("may lose a message"));
    let heartbeats = |check: &str, dead: &str| {
        lint(
            &format!("replica_ack_timeout = \"2s\"\nfailure_detection = \"independent\"\nheartbeat_interval = \"1s\"\nsuspect_after = \"2s\"\ndead_after = \"{dead}\"\nhealth_check = \"{check}\"\n"),
            Some(LOSSY),
        )
    };
    assert!(
        heartbeats("continuous", "3400ms").message("RC005").contains("1 lost message(s)"),
        "{}",
        heartbeats("continuous", "3400ms").doc
    );
    assert!(!heartbeats("continuous", "3500ms").has("RC005"));
    // At rounds the 3.4s silence is seen at 3s at most.
    assert!(heartbeats("rounds", "3s").message("RC005").contains("a round sees is 3s"));
    assert!(!heartbeats("rounds", "3100ms").has("RC005"));
}

/// A leader-family policy with keys the quorum rules object to (a minority write quorum, no
/// read repair, no breaker, retries without tokens): none of them applies to a primary.
const LEADER: &str = r#"replication = "leader"
replication_factor = 3
write_quorum = 1
read_repair = false
max_dead_fraction = 1.0
max_attempts = 3
backoff = "exponential_jitter"
backoff_base = "500ms"
backoff_max = "2s"
retry_budget = 2
"#;

/// The quorum family's own rules, none of which may judge a leader policy.
const QUORUM_ONLY: &[&str] = &[
    "RC001", "RC002", "RC007", "RC010", "RC011", "RC012", "RC013", "RC014", "RC015", "RC016", "RC017",
    "RC018", "RC019", "RC020", "RC021",
];

#[test]
fn a_leader_policy_lints_without_a_model_and_quorum_rules_stay_silent() {
    let (_dir, path) = policy_file(&format!("{LEADER}acks = \"leader\"\nfencing = false\n"));
    let l = lint_path(&path, None);
    assert_eq!(l.code, Some(0), "static findings are warnings: {}", l.doc);
    assert_eq!(l.ids(), ["RC022", "RC025"], "{}", l.doc);
    assert!(l.message("RC022").contains("acks = \"leader\""));
    assert!(l.message("RC025").contains("fencing = false"));
    assert_eq!(
        l.not_run(),
        ["RC003", "RC005", "RC006"],
        "only the detector's network rules wait for a model"
    );
    // The same keys on a quorum policy do set the quorum rules off.
    let quorum = lint(&LEADER.replace("replication = \"leader\"\n", ""), None);
    for id in ["RC001", "RC002", "RC007", "RC010", "RC016"] {
        assert!(quorum.has(id), "{id} on the quorum policy: {}", quorum.doc);
    }
    // Human output names the new rules, and counts only the leader family's.
    let out = replicheck(&["lint", path.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("warning[RC022] async-acks-with-failover"), "{stdout}");
    assert!(stdout.contains("warning[RC025] failover-without-fencing"), "{stdout}");
    assert!(stdout.contains("(10 rules run)"), "13 leader-family rules, 3 need the model: {stdout}");
}

#[test]
fn leader_rules_on_both_sides_of_their_bounds() {
    let leader = |extra: &str| lint(&format!("{LEADER}{extra}"), None);
    // RC022: only acks that run ahead of the in-sync set.
    for acks in ["in_sync", "all"] {
        assert!(!leader(&format!("acks = \"{acks}\"\n")).has("RC022"), "{acks}");
    }
    // RC023 (error class) with min_in_sync = 1, RC024 (warning class) above it, neither with
    // every replica needed; RC027 only with clean elections.
    let unclean = |acks: &str, min: u8| {
        leader(&format!("acks = \"{acks}\"\nmin_in_sync = {min}\nunclean_election = true\n"))
    };
    assert!(unclean("in_sync", 1).message("RC023").contains("min_in_sync = 1"));
    assert!(!unclean("in_sync", 1).has("RC024") && !unclean("in_sync", 1).has("RC027"));
    let two = unclean("in_sync", 2);
    assert!(!two.has("RC023"), "{}", two.doc);
    assert!(two.message("RC024").contains("may be on 2 replicas only"), "{}", two.doc);
    for (acks, min) in [("in_sync", 3), ("all", 1)] {
        let every = unclean(acks, min);
        assert!(!every.has("RC023") && !every.has("RC024"), "{acks} {min}: {}", every.doc);
    }
    let clean = leader("acks = \"in_sync\"\nmin_in_sync = 1\n");
    assert!(clean.message("RC027").contains("min_in_sync = 1 and replication_factor = 3"), "{}", clean.doc);
    assert!(!leader("acks = \"in_sync\"\nmin_in_sync = 2\n").has("RC027"));
    assert!(!leader("acks = \"all\"\nmin_in_sync = 1\n").has("RC027"), "all waits for every replica");
    // RC026 without a model: the detector's dead time (coupled: replica_ack_timeout, 2s).
    assert!(leader("replica_lag_timeout = \"2s\"\n").message("RC026").contains("replica_ack_timeout = 2s"));
    assert!(!leader("replica_lag_timeout = \"2001ms\"\n").has("RC026"));
    // RC028: no follower at all; RC022 and RC025 then have no failover to speak of.
    let one = LEADER.replace("replication_factor = 3", "replication_factor = 1\nread_quorum = 1");
    let alone = lint(&format!("{one}acks = \"leader\"\nfencing = false\n"), None);
    assert!(alone.message("RC028").contains("replication_factor = 1"), "{}", alone.doc);
    assert!(!alone.has("RC022") && !alone.has("RC025"), "{}", alone.doc);
}

#[test]
fn leader_models_lint_with_their_links_and_the_quorum_rules_stay_silent() {
    // With the model: a follower in the same zone as n1 (100ms links) lags at 200ms, not 300ms.
    const UNCLEAN: &str = "models/in-sync-unclean.toml";
    let lag = |t: &str| lint(&format!("replica_lag_timeout = \"{t}\"\n"), Some(UNCLEAN));
    assert!(lag("200ms")
        .message("RC026")
        .contains("the worst replication round trip, 200ms, between n1 (zone a) and n2 (zone a)"));
    assert!(!lag("300ms").has("RC026"));
    // RC025 says whether the model deposes a live primary: the 1.4s silence over the degraded
    // a<->c link against dead_after (400ms) + failover_delay.
    const UNFENCED: &str = "models/unfenced-primary.toml";
    let delay = |d: &str| lint(&format!("failover_delay = \"{d}\"\n"), Some(UNFENCED));
    assert!(delay("900ms").message("RC025").contains("a healthy primary may be silent 1400ms"));
    assert!(delay("1s").message("RC025").contains("no latency or fault of the menu"));
    // failover_cross_zone = false with the follower in another region: no failover, so no
    // asynchronous loss (RC022) but a primary down for good stops writes (RC028).
    const ASYNC: &str = "models/async-failover.toml";
    let no_failover = lint("failover_cross_zone = false\n", Some(ASYNC));
    assert!(!no_failover.has("RC022") && no_failover.has("RC028"), "{}", no_failover.doc);
    assert!(lint("", Some(ASYNC)).has("RC022"));
    // The detector rules speak of failover, not eviction; the quorum rules say nothing.
    for model in [ASYNC, UNCLEAN, UNFENCED] {
        let l = lint("", Some(model));
        for id in QUORUM_ONLY {
            assert!(!l.has(id), "{id} on {model}: {}", l.doc);
        }
        for f in l.doc["findings"].as_array().unwrap() {
            assert!(!f["message"].as_str().unwrap().contains("evict"), "{model}: {f}");
        }
    }
    assert!(lint("", Some(UNFENCED))
        .message("RC005")
        .contains("a primary declared dead is failed over while it is alive"));
}
