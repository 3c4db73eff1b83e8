//! Bad input through the real binary: every malformed model, policy file or argument must end
//! with exit code 2 (never a panic, never a report on stdout) and an error that names the file,
//! the offending key and the offending value, so a user can fix it without reading the source.
//!
//! The malformed models in `tests/data/bad/` are `models/basic-quorum.toml` with one thing
//! changed each (the first comment line of every file says what).

use std::path::Path;
use std::process::{Command, Output};

const BAD: &str = "tests/data/bad";
const MODEL: &str = "models/basic-quorum.toml";

/// Run replicheck from the crate root, so paths in messages are the relative ones passed here.
fn replicheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run replicheck")
}

fn bad(name: &str) -> String {
    format!("{BAD}/{name}")
}

/// What a rejection must say.
struct Rejection<'a> {
    /// The file (or directory) the error is about; the message must start with it.
    file: &'a str,
    /// The offending key, as the message quotes it.
    key: &'a str,
    /// The offending value, as the message quotes it.
    value: &'a str,
    /// Anything else the message must say (the reason, a suggestion).
    also: &'a [&'a str],
}

/// Assert `args` are rejected as bad input as described; returns stderr.
fn rejects(args: &[&str], want: Rejection) -> String {
    let out = replicheck(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let context = format!(
        "replicheck {}\n--- exit: {:?}\n--- stderr:\n{stderr}\n--- stdout:\n{stdout}",
        args.join(" "),
        out.status.code()
    );
    assert!(!stderr.contains("panicked"), "panicked:\n{context}");
    assert_eq!(out.status.code(), Some(2), "exit code:\n{context}");
    assert!(stdout.is_empty(), "bad input printed a report:\n{context}");
    let prefix = format!("replicheck: error: {}", want.file);
    assert!(stderr.starts_with(&prefix), "the error does not start with {prefix:?}:\n{context}");
    for (what, needle) in
        [("key", want.key), ("value", want.value)].into_iter().chain(want.also.iter().map(|s| ("text", *s)))
    {
        assert!(stderr.contains(needle), "the error does not name the {what} {needle:?}:\n{context}");
    }
    stderr
}

/// `replicheck check FILE` where FILE is one of the bad models.
fn rejects_model(name: &str, key: &str, value: &str, also: &[&str]) -> String {
    let file = bad(name);
    rejects(&["check", &file], Rejection { file: &file, key, value, also })
}

// ---------------------------------------------------------------------------------------------
// TOML syntax and shape: errors from parsing, with line, dotted key, value and the line itself.

#[test]
fn invalid_toml_syntax() {
    let stderr = rejects_model(
        "syntax-error.toml",
        "key `policy.replica_ack_timeout`",
        "\"1s",
        &["line 53, column 26", "invalid basic string"],
    );
    // The offending line is quoted with a caret under the error.
    assert!(stderr.contains("53 | replica_ack_timeout = \"1s\n"), "{stderr}");
}

#[test]
fn unknown_top_level_key_suggests_the_nearest() {
    rejects_model(
        "unknown-top-level-key.toml",
        "key `descripton`",
        "= \"3 nodes in 3 zones",
        &["unknown key `descripton`", "help: did you mean `description`?"],
    );
}

#[test]
fn unknown_policy_key_suggests_the_nearest() {
    rejects_model(
        "unknown-policy-key.toml",
        "key `policy.replica_ack_timout`",
        "= \"1s\"",
        &["unknown key `replica_ack_timout`", "help: did you mean `replica_ack_timeout`?"],
    );
}

#[test]
fn unknown_key_in_a_variant_inline_policy() {
    rejects_model(
        "unknown-variant-policy-key.toml",
        "key `variants.write-quorum-1.policy.write_qourum`",
        "= 1",
        &["help: did you mean `write_quorum`?"],
    );
}

#[test]
fn unknown_enum_value_suggests_the_nearest() {
    rejects_model(
        "unknown-enum-value.toml",
        "key `policy.failure_detection`",
        "= \"coupld\"",
        &["unknown value `coupld`, expected `coupled` or `independent`", "help: did you mean `coupled`?"],
    );
}

#[test]
fn value_of_the_wrong_type() {
    rejects_model(
        "wrong-type.toml",
        "key `policy.write_quorum`",
        "= \"2\"",
        &["expected an integer from 0 to 255"],
    );
}

#[test]
fn burst_ends_must_be_a_boolean() {
    rejects_model(
        "burst-ends-not-boolean.toml",
        "key `shards[0].burst_ends`",
        "= \"yes\"",
        &["expected a boolean"],
    );
}

#[test]
fn compaction_drain_must_be_whole_points_per_tick() {
    rejects_model(
        "compaction-drain-not-whole.toml",
        "key `compaction_debt_drain`",
        "= \"15/s\"",
        &["whole number of percentage points per tick", "tick = 100 ms"],
    );
}

#[test]
fn compaction_debt_per_write_is_a_percentage() {
    rejects_model(
        "compaction-per-write-over-100.toml",
        "key `compaction_debt_per_write_pct`",
        "= 150",
        &["a percentage, 0 to 100"],
    );
}

#[test]
fn slow_compaction_debt_is_a_percentage() {
    rejects_model(
        "slow-compaction-debt-over-100.toml",
        "key `slow_compaction_debt_pct`",
        "= 150",
        &["a percentage, 0 to 100"],
    );
}

#[test]
fn key_hash_is_a_byte_or_any() {
    for (file, value) in [("key-hash-out-of-range.toml", "= 256"), ("key-hash-not-an-integer.toml", "= 1.5")]
    {
        rejects_model(file, "key `clients[0].key_hash`", value, &["must be an integer 0 to 255 or \"any\""]);
    }
}

/// The policy functions compare fractions in thousandths: a finer one is refused, not rounded
/// into a policy other than the one written (0.2499 would have run as 0.25).
#[test]
fn fractions_finer_than_thousandths_are_refused() {
    rejects_model(
        "fraction-finer-than-thousandths.toml",
        "key `max_dead_fraction`",
        "= 0.2499",
        &["at most three decimals"],
    );
    let policy = bad("policy-spill-finer-than-thousandths.toml");
    rejects(
        &["check", MODEL, "--policy", &policy],
        Rejection { file: &policy, key: "key `spill_threshold`", value: "= 0.9996", also: &["thousandths"] },
    );
}

/// A rebalancer key no rebalancer could run is refused with the rebalancer off too.
#[test]
fn rebalancer_percentages_are_checked_with_the_rebalancer_off() {
    let policy = bad("policy-watermark-over-100-rebalancer-off.toml");
    rejects(
        &["check", MODEL, "--policy", &policy],
        Rejection {
            file: &policy,
            key: "key `disk_high_watermark`",
            value: "= 150",
            also: &["a percentage"],
        },
    );
}

#[test]
fn compaction_drain_needs_growth() {
    rejects_model(
        "compaction-drain-alone.toml",
        "key `compaction_debt_drain`",
        "= \"100/s\"",
        &["without `compaction_debt_per_write_pct`", "set both"],
    );
}

#[test]
fn burst_ends_needs_a_burst() {
    rejects_model(
        "burst-ends-without-burst.toml",
        "key `shards[0].burst_ends`",
        "= true",
        &["shard \"s1\" has no burst to end", "burst_writes"],
    );
}

// ---------------------------------------------------------------------------------------------
// Durations.

#[test]
fn duration_not_a_whole_number_of_ticks() {
    rejects_model(
        "duration-not-tick-multiple.toml",
        "key `replica_ack_timeout`",
        "\"550ms\"",
        // The message says which table set the key.
        &["duration-not-tick-multiple.toml [policy]", "not a whole number of ticks (tick = 100ms)"],
    );
}

#[test]
fn unitless_duration_string() {
    rejects_model(
        "duration-unitless-string.toml",
        "key `policy.replica_ack_timeout`",
        "= \"5\"",
        &["a duration needs a unit, e.g. \"5ms\" or \"5s\""],
    );
}

#[test]
fn unitless_duration_integer() {
    rejects_model(
        "duration-unitless-integer.toml",
        "key `policy.replica_ack_timeout`",
        "= 5:",
        &["a duration is a string with a unit, e.g. \"5ms\""],
    );
}

#[test]
fn negative_duration() {
    rejects_model(
        "duration-negative.toml",
        "key `policy.replica_ack_timeout`",
        "= \"-5s\"",
        &["durations cannot be negative"],
    );
}

// ---------------------------------------------------------------------------------------------
// Policy values that parse but make no sense.

#[test]
fn write_quorum_above_replication_factor() {
    rejects_model(
        "write-quorum-exceeds-rf.toml",
        "key `write_quorum`",
        "= 4",
        &["write-quorum-exceeds-rf.toml [policy]", "must not exceed replication_factor = 3"],
    );
}

#[test]
fn read_quorum_zero() {
    rejects_model(
        "read-quorum-zero.toml",
        "key `read_quorum`",
        "= 0",
        &["read-quorum-zero.toml [policy]", "must be at least 1"],
    );
}

#[test]
fn a_state_limit_of_zero() {
    rejects_model("max-states-zero.toml", "key `limits.max_states`", "= 0", &["must be at least 1"]);
}

#[test]
fn suspect_after_above_dead_after() {
    rejects_model(
        "suspect-after-exceeds-dead-after.toml",
        "key `suspect_after`",
        "= \"6s\"",
        &["must not exceed dead_after = \"5s\""],
    );
}

// ---------------------------------------------------------------------------------------------
// Names that refer to nothing.

#[test]
fn a_name_that_cannot_be_read_is_refused() {
    rejects_model("empty-node-name.toml", "key `nodes[1].name`", "= \"\"", &["a name must be non-empty"]);
}

/// A model's and a variant's name name a certificate's file under `prove --out`.
#[test]
fn a_name_that_is_a_path_is_refused() {
    rejects_model("model-name-climbs-out.toml", "key `name`", "= \"../basic-quorum\"", &["may not hold `/`"]);
    rejects_model(
        "variant-name-is-a-path.toml",
        "key `variants.\"/tmp/write-quorum-1\"`",
        "= \"/tmp/write-quorum-1\"",
        &["names a certificate's file"],
    );
}

/// A second entry for what must be one: it was taken silently (a client's name reused, a
/// property reported twice, a link's second entry overriding its first).
#[test]
fn a_duplicate_entry_is_refused() {
    rejects_model("duplicate-client.toml", "key `clients[1].name`", "= \"writer\"", &["client listed twice"]);
    rejects_model(
        "duplicate-property.toml",
        "key `properties[2]`",
        "= \"acked_writes_persist\"",
        &["listed twice"],
    );
    rejects_model(
        "duplicate-link.toml",
        "key `network.links[1].zones`",
        "= [\"a\", \"edge\"]",
        &["already `network.links[0]`"],
    );
}

/// Initial replica sets against the policy: the key named is the list that disagrees.
#[test]
fn replicas_listed_against_the_replication_factor() {
    rejects(
        &[
            "check",
            MODEL,
            "--set",
            "replication_factor=2",
            "--set",
            "write_quorum=1",
            "--set",
            "read_quorum=1",
        ],
        Rejection {
            file: MODEL,
            key: "key `shards[0].replicas`",
            value: "lists 3 replicas",
            also: &["replication_factor = 2"],
        },
    );
}

#[test]
fn node_in_an_unknown_zone() {
    rejects_model("unknown-zone.toml", "key `nodes[2].zone`", "= \"d\"", &["no such zone (zones: a, b, c)"]);
}

#[test]
fn fault_menu_names_an_unknown_node() {
    rejects_model("unknown-crash-node.toml", "key `faults.crash[2]`", "= \"n4\"", &["no such node"]);
}

#[test]
fn unknown_property_in_expect_suggests_the_nearest() {
    rejects_model(
        "unknown-property.toml",
        "key `expect.acked_write_persist`",
        "= \"holds\"",
        &["no such property `acked_write_persist`", "did you mean `acked_writes_persist`?"],
    );
}

#[test]
fn property_without_a_declared_verdict() {
    // The value is what is missing: the message says which key to add and what it may be.
    rejects_model(
        "missing-verdict.toml",
        "key `expect.churn_bounded` is missing",
        "`churn_bounded = \"holds\"` or `\"violated\"`",
        &["table `[expect]` declares no verdict for property `churn_bounded`"],
    );
}

// ---------------------------------------------------------------------------------------------
// Files and directories that are not there, or hold no models.

#[test]
fn missing_model_file() {
    let file = bad("does-not-exist.toml");
    // The path is the offending value; there is no key.
    rejects(
        &["check", &file],
        Rejection { file: &file, key: "", value: &file, also: &["no such file or directory"] },
    );
}

#[test]
fn directory_without_models() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("notes.txt"), "not a model\n").expect("write");
    let path = dir.path().display().to_string();
    rejects(
        &["check", &path],
        Rejection { file: &path, key: "", value: &path, also: &["no .toml model files in this directory"] },
    );
}

// ---------------------------------------------------------------------------------------------
// `--policy` files and `--variant` names.

#[test]
fn policy_file_with_an_unknown_key() {
    let policy = bad("policy-unknown-key.toml");
    rejects(
        &["check", MODEL, "--policy", &policy],
        Rejection {
            file: &policy,
            key: "key `write_quorom`",
            value: "= 2",
            also: &["line 2, column 1", "unknown key `write_quorom`", "help: did you mean `write_quorum`?"],
        },
    );
}

#[test]
fn policy_file_duration_not_a_whole_number_of_ticks() {
    let policy = bad("policy-duration-not-tick-multiple.toml");
    rejects(
        &["check", MODEL, "--policy", &policy],
        Rejection {
            file: &policy,
            key: "key `replica_ack_timeout`",
            value: "\"550ms\"",
            also: &[
                // The model whose tick it does not divide.
                MODEL,
                "not a whole number of ticks (tick = 100ms)",
            ],
        },
    );
}

#[test]
fn missing_policy_file() {
    let policy = bad("no-such-policy.toml");
    rejects(
        &["check", MODEL, "--policy", &policy],
        Rejection { file: &policy, key: "", value: &policy, also: &["cannot read file"] },
    );
}

#[test]
fn unknown_variant_name() {
    rejects(
        &["check", MODEL, "--variant", "incidnt"],
        Rejection {
            file: MODEL,
            key: "variant",
            value: "\"incidnt\"",
            // The variants there are, so the user can pick one.
            also: &["variants: default"],
        },
    );
}

/// Every file under tests/data/bad stays bad: rejected with exit code 2, without a panic,
/// naming itself (a policy file given as a model lacks the model's keys).
#[test]
fn every_bad_file_is_rejected() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(BAD);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/data/bad")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 17, "only {} bad files", names.len());
    for name in names {
        let file = bad(&name);
        rejects(&["check", &file], Rejection { file: &file, key: "key `", value: "", also: &[] });
    }
}

// ---------------------------------------------------------------------------------------------
// A state limit: the run is incomplete (exit 3), and no property is reported to hold.

#[test]
fn state_limit_gives_incomplete_and_no_holds() {
    let args = ["check", MODEL, "--variant", "default", "--max-states", "1000"];
    let out = replicheck(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = format!("exit: {:?}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}", out.status.code());
    assert!(!stderr.contains("panicked"), "{context}");
    assert_eq!(out.status.code(), Some(3), "{context}");
    assert!(stdout.contains("exploration INCOMPLETE: state limit of 1000 reached"), "{context}");
    // Property lines: "    ??   linearizable   unknown (incomplete)   (expected: holds)". The
    // found verdict is what precedes "(expected: ...)".
    let mut properties = 0;
    for line in stdout.lines() {
        let Some((before, _expected)) = line.split_once("(expected:") else {
            continue;
        };
        properties += 1;
        let found = before.split_whitespace().skip(2).collect::<Vec<_>>().join(" ");
        assert!(
            found == "unknown (incomplete)" || found == "violated",
            "an incomplete run reported {found:?} in {line:?}\n{context}"
        );
        assert!(!found.contains("holds"), "{line:?}\n{context}");
    }
    assert!(properties >= 5, "no property lines\n{context}");

    // The same in JSON: incomplete, and "unknown" (never "holds") for every property not
    // violated.
    let mut json_args = args.to_vec();
    json_args.extend(["--format", "json"]);
    let out = replicheck(&json_args);
    assert_eq!(out.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(doc["exit_code"], 3);
    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["complete"], false);
    for p in runs[0]["properties"].as_array().expect("properties") {
        let found = p["found"].as_str().expect("found");
        assert!(found == "unknown" || found == "violated", "{p}");
    }
}

/// `lint --model` cut short by a limit, having found no violation, confirms nothing: exit 3,
/// as `check` (a CI gate on lint must not pass a policy the checker did not finish with).
#[test]
fn lint_cut_short_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("empty.toml");
    std::fs::write(&policy, "").unwrap();
    let policy = policy.to_str().unwrap();
    let out = replicheck(&["lint", policy, "--model", MODEL, "--max-states", "1000"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("INCOMPLETE"), "{stdout}");
    let out = replicheck(&["lint", policy, "--model", MODEL, "--max-states", "1000", "--format", "json"]);
    assert_eq!(out.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(doc["exit_code"], 3);
    assert_eq!(doc["checked"]["complete"], false);
    // Complete, the same lint exits 0 (warnings only).
    let out = replicheck(&["lint", policy, "--model", MODEL]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}

// ---------------------------------------------------------------------------------------------
// `store up`: its partitions, zones, capacities and data directory are checked before any
// process starts.

/// Run `replicheck store up ARGS` and expect it to refuse at once; a cluster that started
/// would serve until killed, so give up after 30 s.
fn store_up_refuses(args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["store", "up", "--port", "0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run replicheck");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("store up {args:?} started instead of refusing");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "store up {args:?}:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn store_up_checks_partitions_zones_and_capacities() {
    let stderr = store_up_refuses(&["--partitions", "0"]);
    assert!(stderr.contains("--partitions 0: must be 1 to 64"), "{stderr}");
    let stderr = store_up_refuses(&["--partitions", "65"]);
    assert!(stderr.contains("--partitions 65: must be 1 to 64"), "{stderr}");
    let stderr = store_up_refuses(&["--nodes", "3", "--zones", "a,b"]);
    assert!(stderr.contains("--zones lists 2 zones for --nodes 3"), "{stderr}");
    // 25 writes per second is 2.5 per 100 ms capacity window.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("capacity.toml");
    std::fs::write(&policy, "partition_write_capacity = \"25/s\"\n").unwrap();
    let stderr = store_up_refuses(&["--policy", policy.to_str().unwrap()]);
    for needle in [policy.to_str().unwrap(), "partition_write_capacity", "\"25/s\""] {
        assert!(stderr.contains(needle), "does not name {needle}:\n{stderr}");
    }
}

/// Coordinator i serves on --port + i: a port run past 65535 is refused before anything
/// starts (it was saturated to 65535 for both, then failed as "address in use").
#[test]
fn store_up_refuses_coordinator_ports_beyond_65535() {
    let out = replicheck(&["store", "up", "--port", "65535", "--coordinators", "2"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--port 65535: coordinator 1 would serve on port 65536"), "{stderr}");
}

#[test]
fn store_up_refuses_a_data_directory_written_with_another_layout() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("layout"), "partitions s0=0,1,2\nwrite_shard_suffixes 1\n").unwrap();
    let stderr = store_up_refuses(&["--data-dir", dir.path().to_str().unwrap(), "--partitions", "2"]);
    assert!(stderr.contains("this data directory was written with another layout"), "{stderr}");
    assert!(stderr.contains("partitions s0=0,1,2 s1=1,2,0"), "{stderr}");
}

#[test]
fn store_up_names_a_bad_backend_rate() {
    let stderr = store_up_refuses(&["--nodes", "3", "--write-capacity", "25/s,40/s,40/s"]);
    assert!(stderr.contains("--write-capacity \"25/s\" (node 0)"), "{stderr}");
    assert!(stderr.contains("not a whole number of writes per tick"), "{stderr}");
    let stderr = store_up_refuses(&["--nodes", "3", "--base-load", "10/s"]);
    assert!(stderr.contains("--base-load lists 1 rates for --nodes 3"), "{stderr}");
    let stderr = store_up_refuses(&["--nodes", "3", "--base-load", "unlimited,0/s,0/s"]);
    assert!(stderr.contains("--base-load (node 0): invalid rate \"unlimited\""), "{stderr}");
}

#[test]
fn store_up_refuses_a_coordinator_state_naming_a_node_beyond_nodes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("layout"), "partitions s0=0,1,2\nwrite_shard_suffixes 1\n").unwrap();
    // Written by a 4-node cluster that replaced node 1 by node 3.
    let state = "replicheck coordinator state v1\nmembership_epoch 2\nversion_floor 100001\npartition s0 epoch 1\nmember 0 joined 0 caught_up\nmember 3 joined 1 caught_up\nmember 2 joined 0 caught_up\n";
    std::fs::write(dir.path().join("coordinator-state"), state).unwrap();
    let stderr = store_up_refuses(&["--data-dir", dir.path().to_str().unwrap(), "--nodes", "3"]);
    assert!(
        stderr.contains("coordinator-state: partition s0 names node 3, but there are 3 nodes"),
        "{stderr}"
    );
    std::fs::write(
        dir.path().join("coordinator-state"),
        state.replace("version_floor 100001", "version_floor x"),
    )
    .unwrap();
    let stderr = store_up_refuses(&["--data-dir", dir.path().to_str().unwrap(), "--nodes", "4"]);
    assert!(stderr.contains("coordinator-state line 3: version_floor: not a number"), "{stderr}");
}

#[test]
fn explore_refuses_a_malformed_address_as_input_and_a_busy_one_as_a_runtime_failure() {
    let out = replicheck(&["explore", MODEL, "--addr", "notanaddr"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"notanaddr\" is not HOST:PORT"), "{stderr}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = taken.local_addr().unwrap().to_string();
    let out = replicheck(&["explore", MODEL, "--addr", &addr]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains(&format!("cannot listen on {addr}")) && !stderr.contains("panicked"), "{stderr}");
}

/// `store run` loads its model like `check` does: a bad model is bad input that names the file
/// and the key (not a store failure under a made-up "store" path).
#[test]
fn store_run_names_the_model_file_and_key() {
    let file = bad("unknown-zone.toml");
    let stderr = rejects(
        &["store", "run", &file, "--duration", "1s"],
        Rejection { file: &file, key: "key `nodes[2].zone`", value: "= \"d\"", also: &["no such zone"] },
    );
    assert!(!stderr.contains("store:"), "{stderr}");
}
