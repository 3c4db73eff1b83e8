//! Lint against the checker (issue #14): policies on both sides of every bound a rule talks
//! about (quorums, deadlines against the round trip, the breaker, retries, cooldowns, caps,
//! suffixes, placement), each linted with `--model` and checked with `check --policy` on the
//! same model. It fails when
//! - lint reports an error the checker contradicts (every error must be a violation found),
//! - the checker finds a violation and lint reports no error for it,
//! - a violation has no static finding at all (no rule protects the property) and the case is
//!   not listed in README.md's table of what is out of lint's reach.
//!
//! It also prints how often the static rules' candidate errors were confirmed and refuted.

#[path = "support/bin.rs"]
mod bin;

use serde_json::Value;
use std::collections::BTreeSet;

/// (model, policy over the model's [policy]): each bound with a point on either side.
fn points() -> Vec<(&'static str, String)> {
    let mut points = Vec::new();
    // Quorums: every W and R on 3 replicas (RC001, RC002).
    for w in 1..=3 {
        for r in 1..=3 {
            points.push(("tests/data/small-quorum.toml", format!("write_quorum = {w}\nread_quorum = {r}\n")));
        }
    }
    // Reads that return what they saw without writing it back first.
    points.push(("models/basic-quorum.toml", "read_repair = false\n".into()));
    // A coordinator that keeps membership in memory only, and one that persists it.
    for durable in [false, true] {
        points.push(("models/coordinator-restart.toml", format!("durable_membership = {durable}\n")));
    }
    // The ack deadline against the 1400ms worst round trip, coupled detection (RC003); the
    // breaker at 0.24 (trips on one of three) and 1.0 (never: RC007); tokens on and off (RC010).
    const ACK: &str = "models/ack-timeout-eviction.toml";
    for timeout in ["500ms", "1400ms", "1500ms", "2s"] {
        points.push((ACK, format!("replica_ack_timeout = \"{timeout}\"\n")));
    }
    points.push((ACK, "replica_ack_timeout = \"500ms\"\nmax_dead_fraction = 0.24\n".into()));
    points.push((ACK, "replica_ack_timeout = \"2s\"\nidempotency_tokens = true\n".into()));
    // Hot partition: suffixes around the cap (RC015), retries with and without jitter and a
    // budget (RC008, RC009), a partition cap of 30/s.
    const HOT: &str = "models/hot-partition-retry-storm.toml";
    for suffixes in [1, 2, 4] {
        points.push((HOT, format!("write_shard_suffixes = {suffixes}\n")));
        points.push((
            HOT,
            format!(
                "write_shard_suffixes = {suffixes}\nbackoff = \"exponential_jitter\"\nbackoff_max = \"800ms\"\nretry_budget = 2\nmax_attempts = 4\n"
            ),
        ));
    }
    points.push((HOT, "partition_write_capacity = \"30/s\"\n".into()));
    // Rebalancer: blind scoring with no cooldown, a flat cooldown, a doubling one capped, and
    // compaction-aware scoring (RC011, RC012).
    const REB: &str = "models/rebalancer-compaction.toml";
    points.push((REB, String::new()));
    points.push((REB, "move_cooldown = \"2s\"\ncooldown_backoff = 1\ncooldown_max = \"2s\"\n".into()));
    points.push((REB, "move_cooldown = \"1s\"\ncooldown_backoff = 2\ncooldown_max = \"8s\"\n".into()));
    points.push((
        REB,
        "scoring = \"disk_and_compaction\"\ncompaction_debt_max = 30\nmove_cooldown = \"2s\"\ncooldown_backoff = 2\ncooldown_max = \"8s\"\n".into(),
    ));
    // Routing: placement and planner each way (RC013, RC014), the spill threshold at both ends.
    const CAP: &str = "models/capacity-routing-bypass.toml";
    for placement in ["sorted", "capacity_aware"] {
        for planner in ["smallest_first", "capacity_aware"] {
            points.push((CAP, format!("placement = \"{placement}\"\nupload_planner = \"{planner}\"\n")));
        }
    }
    for spill in ["0.1", "1.0"] {
        points.push((
            CAP,
            format!("placement = \"capacity_aware\"\nupload_planner = \"capacity_aware\"\nspill_threshold = {spill}\n"),
        ));
    }
    // The incidents' missing links (issue #14). Loss on the degraded link: coupled detection
    // at any deadline (RC003), dead_after around one lost heartbeat (RC005).
    const LOSSY: &str = "models/ack-timeout-lossy-link.toml";
    points.push((LOSSY, "replica_ack_timeout = \"2s\"\n".into()));
    for dead in ["3s", "3100ms"] {
        points.push((
            LOSSY,
            format!(
                "replica_ack_timeout = \"2s\"\nfailure_detection = \"independent\"\nheartbeat_interval = \"1s\"\nsuspect_after = \"2s\"\ndead_after = \"{dead}\"\n"
            ),
        ));
    }
    // When the detector looks (RC005): at rounds 500ms apart it sees 1.5s of the 1.9s silence
    // a slow link makes; checked continuously, all of it.
    const DETECTOR: &str = "models/detector-timing.toml";
    for (check, dead) in
        [("rounds", "1500ms"), ("rounds", "1600ms"), ("continuous", "1900ms"), ("continuous", "2s")]
    {
        points.push((DETECTOR, format!("health_check = \"{check}\"\ndead_after = \"{dead}\"\n")));
    }
    // A coordinator with a work queue: the load ceiling around the deadline (RC020).
    const SATURATION: &str = "models/ack-timeout-coordinator-saturation.toml";
    points.push((SATURATION, "replica_ack_timeout = \"2s\"\n".into()));
    for ceiling in [5, 12, 13] {
        points.push((
            SATURATION,
            format!("replica_ack_timeout = \"2s\"\ncoordinator_load_ceiling = {ceiling}\n"),
        ));
    }
    // Endless load: the eviction storm as a livelock (RC003 protects converges).
    const CONTINUOUS: &str = "models/ack-timeout-eviction-continuous.toml";
    for timeout in ["500ms", "1400ms", "1500ms"] {
        points.push((CONTINUOUS, format!("replica_ack_timeout = \"{timeout}\"\n")));
    }
    // A dead replica replaced, or not (RC018): eviction off or never allowed, a breaker that
    // stops one eviction, coupled detection with nothing more to send.
    const DEAD: &str = "tests/data/dead-replaced.toml";
    for policy in [
        "",
        "eviction_enabled = false\n",
        "max_concurrent_evictions = 0\n",
        "max_recoveries_per_node = 0\n",
        "max_recoveries_per_node = 1\n",
        "max_dead_fraction = 0.2\n",
        "max_dead_fraction = 0.25\n",
        "failure_detection = \"coupled\"\n",
        // The fastest join: 100ms to a source, 100ms to n4, 100ms back.
        "join_timeout = \"300ms\"\n",
        "join_timeout = \"400ms\"\n",
    ] {
        points.push((DEAD, policy.into()));
    }
    // The re-mirroring storm (RC020): at once, and after a down/out interval above the worst
    // round trip (200ms), and at it.
    const STORM: &str = "models/remirror-storm.toml";
    for policy in ["", "down_out_interval = \"200ms\"\n", "down_out_interval = \"300ms\"\n"] {
        points.push((STORM, policy.into()));
    }
    // The spare has no replica slot free (RC018 in a model).
    points.push(("tests/data/dead-replaced-no-room.toml", String::new()));
    // A hot shard on a slow node (RC019): no rebalancer, no room, room.
    const SLOW: &str = "tests/data/hot-shard-slow-node.toml";
    for policy in
        ["", "rebalance_enabled = false\n", "disk_high_watermark = 55\n", "disk_high_watermark = 60\n"]
    {
        points.push((SLOW, policy.into()));
    }
    // Debt as node state that the hot writes outrun (RC019): the fix, and no rebalancer.
    const DEBT: &str = "models/rebalancer-compaction-debt.toml";
    points.push((
        DEBT,
        "scoring = \"disk_and_compaction\"\ncompaction_debt_max = 30\nmove_cooldown = \"2s\"\ncooldown_backoff = 2\ncooldown_max = \"8s\"\n".into(),
    ));
    points.push((DEBT, "rebalance_enabled = false\n".into()));
    // Keys the checker chooses (RC015's shared partitions), a burst that ends.
    const ANY_KEY: &str = "models/hot-partition-any-key.toml";
    points.push((ANY_KEY, String::new()));
    points.push((
        ANY_KEY,
        "write_shard_suffixes = 4\nbackoff = \"exponential_jitter\"\nbackoff_max = \"800ms\"\nretry_budget = 2\nmax_attempts = 4\n".into(),
    ));
    points.push(("models/hot-partition-burst-ends.toml", String::new()));
    points.push(("models/hot-partition-burst-ends.toml", "partition_write_capacity = \"10/s\"\n".into()));
    // Two routers that count only their own writes (RC021).
    const ROUTERS: &str = "models/capacity-routing-two-routers.toml";
    for spill in ["0.8", "1.0"] {
        points.push((
            ROUTERS,
            format!("placement = \"capacity_aware\"\nupload_planner = \"capacity_aware\"\nspill_threshold = {spill}\n"),
        ));
    }
    points
}

fn json(args: &[&str]) -> Value {
    let out = bin::replicheck(args);
    let text = bin::stdout(&out);
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("replicheck {args:?}: not JSON ({e}):\n{text}\n{}", bin::stderr(&out)))
}

/// (model stem, property) pairs README.md lists as out of lint's reach.
fn out_of_reach() -> BTreeSet<(String, String)> {
    let readme = std::fs::read_to_string(bin::root().join("README.md")).unwrap();
    let start = readme.find("<!-- out-of-lint-reach -->").expect("README.md has the out-of-reach table");
    let end = readme[start..].find("<!-- /out-of-lint-reach -->").expect("the table ends") + start;
    readme[start..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(|c| c.trim().trim_matches('`')).collect();
            (cells[1].to_string(), cells[2].to_string())
        })
        .collect()
}

fn findings(doc: &Value) -> &Vec<Value> {
    doc["findings"].as_array().expect("findings")
}

#[test]
fn lint_errors_are_violations_and_violations_are_lint_errors() {
    let reach = out_of_reach();
    let mut failures = Vec::new();
    let (mut candidates, mut confirmed, mut refuted, mut rc000, mut violations) = (0, 0, 0, 0, 0);
    let mut reach_used = BTreeSet::new();
    let dir = tempfile::tempdir().unwrap();
    let points = points();
    for (i, (model, policy)) in points.iter().enumerate() {
        let file = dir.path().join(format!("policy-{i}.toml"));
        std::fs::write(&file, policy).unwrap();
        let file = file.to_str().unwrap();
        let what = format!("{model} with {{{}}}", policy.trim().replace('\n', ", "));
        let check = json(&["check", model, "--policy", file, "--format", "json", "-q"]);
        let run = &check["runs"][0];
        assert_eq!(run["complete"], true, "{what}: the check completes");
        let violated: BTreeSet<String> = run["properties"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["found"] == "violated")
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect();
        violations += violated.len();
        let lint = json(&["lint", file, "--model", model, "--format", "json", "-q"]);
        assert_eq!(
            lint["checked"]["unique_states"], run["unique_states"],
            "{what}: lint explored the same space"
        );
        let stat = json(&["lint", file, "--model", model, "--static", "--format", "json"]);

        let mut errors_for = BTreeSet::new();
        for f in findings(&lint) {
            if f["severity"] == "error" {
                let backed: Vec<String> = f["checker"]["violated"]
                    .as_array()
                    .map(|v| v.iter().map(|p| p.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default();
                if backed.is_empty() || backed.iter().any(|p| !violated.contains(p)) {
                    failures.push(format!(
                        "{what}: lint error {} on {backed:?}, not what the checker finds",
                        f["id"]
                    ));
                }
                errors_for.extend(backed);
                if f["id"] == "RC000" {
                    rc000 += 1;
                }
            }
            if f["rule_severity"] == "error" {
                candidates += 1;
                match f["checker"]["verdict"].as_str() {
                    Some("violated") => confirmed += 1,
                    Some("holds") => refuted += 1,
                    _ => {}
                }
            }
        }
        let stem = model.rsplit('/').next().unwrap().trim_end_matches(".toml").to_string();
        for p in &violated {
            if !errors_for.contains(p) {
                failures
                    .push(format!("{what}: the checker finds {p} violated and lint reports no error for it"));
            }
            let statically = findings(&stat)
                .iter()
                .any(|f| f["protects"].as_array().unwrap().iter().any(|q| q.as_str() == Some(p.as_str())));
            if !statically {
                if reach.contains(&(stem.clone(), p.clone())) {
                    reach_used.insert((stem.clone(), p.clone()));
                } else {
                    failures.push(format!(
                        "{what}: the checker finds {p} violated, no rule flags it, and README.md does not list ({stem}, {p}) as out of lint's reach"
                    ));
                }
            }
        }
    }
    eprintln!(
        "{} policies: {violations} violations found by the checker; {candidates} static candidate errors, {confirmed} confirmed, {refuted} refuted by a complete exploration; {rc000} violations reported by RC000 alone; out-of-reach cases met: {reach_used:?}",
        points.len()
    );
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
    // Every listed case must still be one: a rule that learns to see it takes it off the list.
    let stale: Vec<_> = reach.difference(&reach_used).collect();
    assert!(stale.is_empty(), "README.md lists cases no policy here produces: {stale:?}");
    assert!(confirmed > 0 && refuted > 0, "the points reach both sides of the rules' bounds");
}

/// One leader-family case: the policy over the model's [policy] (a library variant's keys, or
/// a point beside a bound), the rules lint must report as errors, the properties the checker
/// must find violated, and rules that must be there as warnings.
struct LeaderCase {
    model: &'static str,
    policy: &'static str,
    errors: &'static [&'static str],
    violated: &'static [&'static str],
    warnings: &'static [&'static str],
}

/// Every variant of the three leader models (the policy is the variant's, as the model file
/// writes it) and points on either side of RC025's and RC026's bounds. The verdicts are the
/// models' declared ones, measured.
fn leader_cases() -> Vec<LeaderCase> {
    const ASYNC: &str = "models/async-failover.toml";
    const UNCLEAN: &str = "models/in-sync-unclean.toml";
    const UNFENCED: &str = "models/unfenced-primary.toml";
    let case =
        |model, policy, errors, violated, warnings| LeaderCase { model, policy, errors, violated, warnings };
    vec![
        case(ASYNC, "", &["RC022"], &["acked_writes_persist", "linearizable"], &[]),
        // semi-sync: min_in_sync = 1 is only a warning, and every property holds.
        case(ASYNC, "acks = \"in_sync\"\nmin_in_sync = 1\n", &[], &[], &["RC027"]),
        // no-auto-failover: nothing lost, but a primary that never returns stops the writes.
        case(ASYNC, "failover_cross_zone = false\n", &["RC028"], &["ops_complete"], &[]),
        case(UNCLEAN, "", &["RC023"], &["acked_writes_persist", "linearizable"], &[]),
        // min-in-sync-2-clean.
        case(UNCLEAN, "min_in_sync = 2\nunclean_election = false\n", &[], &[], &[]),
        // The follower lags out at the 200ms round trip: writes are refused, nothing is lost.
        case(
            UNCLEAN,
            "min_in_sync = 2\nunclean_election = false\nreplica_lag_timeout = \"200ms\"\n",
            &[],
            &[],
            &["RC026"],
        ),
        case(UNFENCED, "", &["RC022", "RC025"], &["acked_writes_persist", "single_primary"], &[]),
        // fencing: asynchronous acks stay a candidate the checker refutes in this model.
        case(UNFENCED, "fencing = true\n", &[], &[], &["RC022"]),
        // A failover delay the 1.4s silence outlasts deposes the live primary; one it does not,
        // never (the checker agrees on both sides).
        case(UNFENCED, "failover_delay = \"900ms\"\n", &["RC022", "RC025"], &["acked_writes_persist"], &[]),
        case(UNFENCED, "failover_delay = \"1s\"\n", &[], &[], &["RC022", "RC025"]),
    ]
}

#[test]
fn leader_models_lint_errors_are_the_checkers_violations() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (i, c) in leader_cases().iter().enumerate() {
        let file = dir.path().join(format!("leader-{i}.toml"));
        std::fs::write(&file, c.policy).unwrap();
        let file = file.to_str().unwrap();
        let what = format!("{} with {{{}}}", c.model, c.policy.trim().replace('\n', ", "));
        let check = json(&["check", c.model, "--policy", file, "--format", "json", "-q"]);
        let run = &check["runs"][0];
        assert_eq!(run["complete"], true, "{what}: the check completes");
        let violated: BTreeSet<String> = run["properties"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["found"] == "violated")
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect();
        let expected: BTreeSet<String> = c.violated.iter().map(|p| p.to_string()).collect();
        if violated != expected {
            failures.push(format!("{what}: the checker finds {violated:?} violated, expected {expected:?}"));
        }
        let lint = json(&["lint", file, "--model", c.model, "--format", "json", "-q"]);
        assert_eq!(
            lint["checked"]["unique_states"], run["unique_states"],
            "{what}: lint explored the same space"
        );
        let with = |severity: &str| -> BTreeSet<String> {
            findings(&lint)
                .iter()
                .filter(|f| f["severity"] == severity)
                .map(|f| f["id"].as_str().unwrap().to_string())
                .collect()
        };
        let errors = with("error");
        let expected_errors: BTreeSet<String> = c.errors.iter().map(|id| id.to_string()).collect();
        if errors != expected_errors {
            failures.push(format!("{what}: lint errors {errors:?}, expected {expected_errors:?}"));
        }
        let warnings = with("warning");
        for id in c.warnings {
            if !warnings.contains(*id) {
                failures.push(format!("{what}: no warning {id} (warnings: {warnings:?})"));
            }
        }
        // Each error is backed by a property the checker found violated, and each violation
        // by an error of a named rule (RC000 would be in `errors` above).
        for f in findings(&lint).iter().filter(|f| f["severity"] == "error") {
            let backed = f["checker"]["violated"].as_array().cloned().unwrap_or_default();
            if backed.is_empty() || backed.iter().any(|p| !violated.contains(p.as_str().unwrap())) {
                failures.push(format!(
                    "{what}: lint error {} on {backed:?}, not what the checker finds",
                    f["id"]
                ));
            }
        }
        for p in &violated {
            let flagged = findings(&lint).iter().any(|f| {
                f["severity"] == "error"
                    && f["checker"]["violated"].as_array().is_some_and(|v| v.iter().any(|q| q == p.as_str()))
            });
            if !flagged {
                failures
                    .push(format!("{what}: the checker finds {p} violated and lint reports no error for it"));
            }
        }
    }
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}
