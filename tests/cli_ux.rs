//! The command line as users meet it: numeric and address flags checked by clap (exit 2
//! naming the flag and the value), `--quiet`, one `--variant` across the library, shell
//! completions and the man page, and the partial report on SIGINT/SIGTERM.

#[path = "support/bin.rs"]
mod bin;

use bin::{replicheck, root, stderr, stdout};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SMALL: &str = "tests/data/small-quorum.toml";
const POLICY_W1: &str = "tests/data/policy-w1.toml";

#[test]
fn bad_numbers_and_addresses_are_refused_naming_the_flag_and_the_value() {
    let commands: [&[&str]; 4] = [
        &["check", SMALL],
        &["diff", SMALL, "--base", POLICY_W1, "--candidate", POLICY_W1],
        &["sweep", SMALL, "--vary", "write_quorum=1..2"],
        &["prove", SMALL, "--verify"],
    ];
    let bad: [(&str, &str, &str); 8] = [
        ("--threads", "0", "1..=1024"),
        ("--threads", "5000", "1..=1024"),
        ("--threads", "-3", "invalid digit"),
        ("--max-states", "0", "at least 1"),
        ("--max-states", "many", "not a count"),
        ("--addr", "notanaddr", "HOST:PORT"),
        ("--addr", "127.0.0.1:0", "not a port"),
        ("--addr", "has space:3000", "not a host"),
    ];
    for command in commands {
        for (flag, value, why) in bad {
            // prove takes --threads only.
            if command[0] == "prove" && flag != "--threads" {
                continue;
            }
            // FLAG=VALUE, so a value starting with `-` is read as one.
            let joined = format!("{flag}={value}");
            let mut args = command.to_vec();
            args.push(&joined);
            let out = replicheck(&args);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(flag) && err.contains(value) && err.contains(why), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            assert!(stdout(&out).is_empty(), "{args:?}: nothing ran");
        }
    }
    // The bounds themselves are accepted.
    for args in [
        ["check", SMALL, "--threads", "1", "--max-states", "1", "--addr", "localhost:1"],
        ["check", SMALL, "--threads", "1024", "--max-states", "1", "--addr", "[::1]:65535"],
    ] {
        let out = replicheck(&args);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn quiet_keeps_the_report_and_drops_the_chatter() {
    let loud = replicheck(&["check", SMALL]);
    assert_eq!(loud.status.code(), Some(0));
    assert!(stderr(&loud).contains("lint small-quorum / default: warning["), "{}", stderr(&loud));
    assert!(stderr(&loud).contains("ok: small-quorum / default"), "{}", stderr(&loud));
    let quiet = replicheck(&["check", SMALL, "--quiet"]);
    assert_eq!(quiet.status.code(), Some(0));
    assert_eq!(stderr(&quiet), "", "no lint lines, no per-run lines");
    let (quiet_report, loud_report) = (stdout(&quiet), stdout(&loud));
    assert_eq!(untimed(&quiet_report), untimed(&loud_report), "the same report");
    assert_eq!(quiet_report.lines().count(), loud_report.lines().count());
    assert!(stdout(&quiet).contains("3 of 3 runs gave the required verdicts"));
    // A failure still reaches stderr, and errors always do.
    let failing = replicheck(&["check", SMALL, "-q", "--policy", POLICY_W1]);
    assert_eq!(failing.status.code(), Some(1));
    assert!(
        stderr(&failing).starts_with("FAIL: small-quorum / policy tests/data/policy-w1.toml"),
        "{}",
        stderr(&failing)
    );
    // sweep and prove too: the per-point and per-certificate lines go, the report stays.
    let sweep = ["sweep", SMALL, "--vary", "write_quorum=1..2"];
    let loud = replicheck(&sweep);
    let quiet = replicheck(&[&sweep[..], &["--quiet"]].concat());
    assert_eq!((loud.status.code(), quiet.status.code()), (Some(0), Some(0)), "{}", stderr(&quiet));
    assert!(!stderr(&loud).is_empty());
    assert_eq!(stderr(&quiet), "");
    assert_eq!(untimed(&stdout(&quiet)), untimed(&stdout(&loud)));
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let prove = replicheck(&["prove", SMALL, "--out", out_dir, "--quiet"]);
    assert_eq!(prove.status.code(), Some(0), "{}", stderr(&prove));
    assert_eq!(stderr(&prove), "");
    assert!(!stdout(&prove).is_empty(), "the report");
    let missing = replicheck(&["check", "no-such-model.toml", "--quiet"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no-such-model.toml"));
}

/// A report without its timing lines (seconds and states/s vary from run to run).
fn untimed(report: &str) -> Vec<&str> {
    report.lines().filter(|l| !l.contains("states/s") && !l.contains(" checked in ")).collect()
}

/// Models of the library with a variant named `name`, from `replicheck models`.
fn models_with_variant(name: &str) -> Vec<String> {
    let out = replicheck(&["models", "models/"]);
    stdout(&out)
        .lines()
        .filter(|l| {
            l.split("[variants: ")
                .nth(1)
                .is_some_and(|v| v.trim_end_matches(']').split(", ").any(|v| v == name))
        })
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn one_variant_name_runs_across_the_library() {
    let expected = models_with_variant("fixed");
    assert!(expected.len() >= 2, "the library has several `fixed` variants: {expected:?}");
    let out =
        replicheck(&["check", "models/", "--variant", "fixed", "--format", "json", "--max-states", "200"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let runs = doc["runs"].as_array().unwrap();
    let files: Vec<&str> = runs.iter().map(|r| r["file"].as_str().unwrap()).collect();
    assert_eq!(files, expected);
    assert!(runs.iter().all(|r| r["variant"] == "fixed"));

    // A name no model has: exit 2, every variant there is, and the nearest.
    let out = replicheck(&["check", "models/", "--variant", "fixd"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--variant: \"fixd\": none of the"), "{err}");
    for v in ["default", "fixed", "incident", "write-quorum-1"] {
        assert!(err.contains(v), "{v} is listed: {err}");
    }
    assert!(err.contains("did you mean `fixed`?"), "{err}");
    // One model: that model's variants.
    let out = replicheck(&["check", "models/basic-quorum.toml", "--variant", "nope"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("models/basic-quorum.toml: --variant \"nope\": no such variant (variants: default, write-quorum-1"),
        "{err}"
    );
}

#[test]
fn completions_for_each_shell_and_the_man_page() {
    let bash = replicheck(&["completions", "bash"]);
    assert_eq!(bash.status.code(), Some(0));
    let text = stdout(&bash);
    assert!(text.contains("complete -F _replicheck"), "a bash completion function");
    for sub in ["check", "diff", "sweep", "lint", "explore", "prove", "completions", "man"] {
        assert!(text.contains(&format!("cmd=\"replicheck__subcmd__{sub}\"")), "bash completes `{sub}`");
    }
    assert!(text.contains("--max-states") && text.contains("--quiet"), "and their flags");
    for (shell, marker) in [
        ("zsh", "#compdef replicheck"),
        ("fish", "complete -c replicheck"),
        ("elvish", "replicheck"),
        ("powershell", "replicheck"),
    ] {
        let out = replicheck(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        assert!(stdout(&out).contains(marker), "{shell}");
    }
    let out = replicheck(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("tcsh") && stderr(&out).contains("bash"), "{}", stderr(&out));

    let man = replicheck(&["man"]);
    assert_eq!(man.status.code(), Some(0));
    let roff = stdout(&man);
    assert!(roff.contains(".TH replicheck 1"), "{roff}");
    assert!(roff.contains(".SH SUBCOMMANDS"), "{roff}");
    for sub in ["check", "diff", "sweep", "prove", "completions"] {
        assert!(roff.contains(&format!("replicheck\\-{sub}(1)")), "the page lists `{sub}`");
    }
    assert!(!roff.contains("bench\\-one"), "hidden commands stay hidden");
    let page = stdout(&replicheck(&["man", "check"]));
    assert!(page.contains(".TH replicheck-check 1") && page.contains("max\\-states"), "{page}");
    let out = replicheck(&["man", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no command \"nope\""));
    // A subcommand's page, however it is named; its flags are on it.
    for args in [&["man", "store up"][..], &["man", "store", "up"], &["man", "store-up"]] {
        let page = stdout(&replicheck(args));
        assert!(
            page.contains(".TH replicheck-store-up 1") && page.contains("rebuild\\-node"),
            "{args:?}: {page}"
        );
    }
    let out = replicheck(&["man", "store", "down"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no command \"down\" in \"store\" (commands: up, run, sim, bench)"),
        "{}",
        stderr(&out)
    );
}

/// Start a check of a model big enough to still be exploring (about 4M states unreduced, one
/// thread), wait until it is past its lint lines and a few seconds into exploring, send
/// `signal`, and return its output. Fails if it is not done 60s later.
fn interrupted_check(signal: libc::c_int, format: &str) -> (Output, Duration) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["check", bin::SLOW_MODEL])
        .args(bin::SLOW_OPTIONS)
        .args(["--format", format])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("replicheck starts");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    if format == "human" {
        // The lint lines come before exploration starts.
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.starts_with("lint ack-timeout-eviction"), "{line}");
    }
    std::thread::sleep(Duration::from_secs(3));
    assert!(child.try_wait().unwrap().is_none(), "still exploring after 3s");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
    let sent = Instant::now();
    let mut out_text = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out_text).unwrap();
    let mut err_text = Vec::new();
    err.read_to_end(&mut err_text).unwrap();
    let status = child.wait().unwrap();
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(60), "stopped {took:?} after the signal");
    (Output { status, stdout: out_text, stderr: err_text }, took)
}

#[test]
fn sigint_stops_the_check_with_a_partial_report_and_exit_3() {
    let (out, _) = interrupted_check(libc::SIGINT, "human");
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(3), "{report}\n{}", stderr(&out));
    assert!(report.contains("exploration INCOMPLETE: interrupted (SIGINT or SIGTERM)"), "{report}");
    // The states and depth reached, and a verdict per property (unknown: nothing violated yet).
    let line = report.lines().find(|l| l.contains("variant fixed:")).expect("the run's line");
    let states: u64 =
        line.split("variant fixed: ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(states > 1000 && states < 4_000_000, "{line}");
    assert!(line.contains("max depth "), "{line}");
    assert_eq!(report.matches("??   ").count(), 6, "{report}");
    assert!(report.contains("interrupted: 0 of 1 runs not started"), "{report}");
    assert!(stderr(&out).contains("replicheck: interrupted: stopping after the current level"));
    assert!(stderr(&out).contains("INCOMPLETE: ack-timeout-eviction / fixed"));
}

#[test]
fn sigterm_gives_the_partial_json_report_and_exit_3() {
    let (out, _) = interrupted_check(libc::SIGTERM, "json");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    assert_eq!(doc["exit_code"], 3);
    assert_eq!(doc["interrupted"], true);
    let run = &doc["runs"][0];
    assert_eq!(run["complete"], false);
    assert_eq!(run["stopped"], "interrupted (SIGINT or SIGTERM)");
    assert!(run["unique_states"].as_u64().unwrap() > 1000);
    assert!(run["properties"].as_array().unwrap().iter().all(|p| p["found"] == "unknown"));
}

#[test]
fn the_progress_estimate_counts_towards_the_state_count_proofs_records() {
    use replicheck::check::{self, proofs::recorded_states, PolicyChoice, RunOptions};
    let proofs = root().join("proofs");
    let model = root().join("models/basic-quorum.toml");
    let variant = PolicyChoice::Variants(Some("write-quorum-1".into()));
    let jobs = check::plan(std::slice::from_ref(&model), &variant).unwrap();
    let recorded =
        recorded_states(&proofs, &jobs[0]).expect("basic-quorum / write-quorum-1 has a certificate");
    // Certificates record the unreduced count, and the estimate is shown only for a run that
    // explores the unreduced graph (`--reduce none`).
    let opts =
        RunOptions { threads: 2, reduction: replicheck::model::Reduction::None, ..RunOptions::default() };
    let run = check::run(&jobs[0], &opts).unwrap();
    assert_eq!(recorded, run.unique_states);
    // A policy file's run has no certificate, and an edited model no longer matches its own.
    let file = PolicyChoice::File {
        path: root().join(POLICY_W1),
        policy: Box::new(replicheck::config::load_policy(&root().join(POLICY_W1)).unwrap()),
    };
    assert_eq!(recorded_states(&proofs, &check::plan(std::slice::from_ref(&model), &file).unwrap()[0]), None);
    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("basic-quorum.toml");
    std::fs::write(&edited, std::fs::read_to_string(&model).unwrap() + "\n# edited\n").unwrap();
    let jobs = check::plan(&[edited], &variant).unwrap();
    assert_eq!(recorded_states(&proofs, &jobs[0]), None);
}

/// A report whose reader went away (`replicheck check models/ | head`) ends the process as it
/// ends a Unix filter, by SIGPIPE, not with a panic and exit 101 on the failed write.
#[test]
fn a_closed_pipe_ends_a_report_quietly() {
    use std::os::unix::process::ExitStatusExt;
    for args in [
        &["check", "models/capacity-routing-bypass.toml"][..],
        &["lint", POLICY_W1, "--model", SMALL][..],
        &["models", "models/"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .args(args)
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("replicheck starts");
        // Both readers gone before the first line: every write fails.
        drop(child.stdout.take());
        drop(child.stderr.take());
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGPIPE), "replicheck {args:?}: {status:?}");
    }
}

/// `models DIR` with one bad file (issue 36): the good models are still listed, the bad file
/// is named with its key on stderr, and the exit code is 2.
#[test]
fn models_lists_the_good_files_beside_a_bad_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(root().join(SMALL), dir.path().join("a-good.toml")).expect("copy");
    let bad = dir.path().join("b-bad.toml");
    std::fs::write(&bad, "name = \"bad\"\ntick = \"100ms\"\nnodez = 3\n").expect("write");
    let out = replicheck(&["models", dir.path().to_str().unwrap()]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "{text}{err}");
    assert!(text.contains("a-good.toml"), "{text}");
    assert!(!text.contains("b-bad.toml"), "{text}");
    assert!(err.contains("b-bad.toml") && err.contains("nodez"), "{err}");
    assert!(err.contains("1 model file(s)"), "{err}");
}

/// A policy file kept beside the models (README's rollout example does) is no model: `models
/// DIR` and `check DIR` pass over it; named on its own it is still refused.
#[test]
fn a_policy_file_in_a_model_directory_is_passed_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(root().join(SMALL), dir.path().join("a-model.toml")).expect("copy");
    std::fs::copy(root().join(POLICY_W1), dir.path().join("w1.toml")).expect("copy");
    let out = replicheck(&["models", dir.path().to_str().unwrap()]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{text}{err}");
    assert!(text.contains("a-model.toml") && !text.contains("w1.toml"), "{text}");
    let out = replicheck(&["check", dir.path().join("w1.toml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // And a model where a policy is expected says which it is.
    let out = replicheck(&["lint", SMALL]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("a model file (it has `zones` or `nodes`) where a policy file is expected"));
}

/// `bench` on the library gives each row's speed-up over the first thread count and ends with
/// the library's line: its time per thread count and speed-up, and bytes per state.
#[test]
fn bench_reports_the_speed_up_and_the_librarys_bytes_per_state() {
    let out = replicheck(&["bench", SMALL, "--skip-repl", "--threads", "1,2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let header = text.lines().find(|l| l.starts_with("model")).expect("a header");
    assert!(header.contains("speedup") && header.contains("B/st"), "{header}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("small-quorum")).collect();
    // Per variant, two reductions at two thread counts.
    assert!(!rows.is_empty() && rows.len().is_multiple_of(4), "{text}");
    for row in &rows {
        let cols: Vec<&str> = row.split_whitespace().collect();
        let speedup = cols.iter().find(|c| c.ends_with('x')).expect("a speed-up column");
        if cols[3] == "1" {
            assert_eq!(*speedup, "1.00x", "the first thread count is the yardstick: {row}");
        } else {
            let x: f64 = speedup.trim_end_matches('x').parse().unwrap();
            assert!(x > 0.0, "{row}");
        }
    }
    let summary = text.lines().last().expect("a summary line");
    assert!(summary.starts_with("library, safety only, por: 1 thread(s) "), "{summary}");
    assert!(summary.contains("(1.00x), 2 thread(s) "), "{summary}");
    assert!(summary.contains("bytes per state at 1 thread(s): median "), "{summary}");
    assert!(summary.contains("largest variant ("), "{summary}");
}
