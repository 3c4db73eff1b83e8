//! The binary's outputs on the small test models: JSON and JUnit reports, exit codes, the
//! model listing, `--policy`, and the explorer's HTTP endpoint.

#[path = "support/bin.rs"]
mod bin;

use bin::{replicheck, stderr, stdout};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SMALL: &str = "tests/data/small-quorum.toml";
const WRONG: &str = "tests/data/small-wrong-expect.toml";
const POLICY_W1: &str = "tests/data/policy-w1.toml";

#[test]
fn json_report_of_the_small_model() {
    let out = replicheck(&["check", SMALL, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("stdout is JSON");
    assert_eq!(doc["exit_code"], 0);
    let runs = doc["runs"].as_array().expect("runs is an array");
    let variants: Vec<&str> = runs.iter().map(|r| r["variant"].as_str().unwrap()).collect();
    assert_eq!(variants, ["default", "write-quorum-1", "no-read-repair"]);
    for run in runs {
        assert_eq!(run["model"], "small-quorum");
        assert_eq!(run["complete"], true, "{} is complete", run["variant"]);
        assert!(run["unique_states"].as_u64().unwrap() > 0);
        let properties = run["properties"].as_array().expect("properties");
        assert_eq!(properties.len(), 7, "five safety and two liveness properties");
        for p in properties {
            assert_eq!(p["found"], p["expected"], "{} / {}", run["variant"], p["name"]);
            // A counterexample comes with every violation and only then.
            assert_eq!(p["counterexample"].is_null(), p["found"] == "holds");
        }
    }
    let w1_acked = &runs[1]["properties"][0];
    assert_eq!(w1_acked["name"], "acked_writes_persist");
    assert_eq!(w1_acked["found"], "violated");
    assert!(w1_acked["counterexample"]["explorer_url"]
        .as_str()
        .unwrap()
        .starts_with("http://127.0.0.1:3000/#/steps/0/"));
}

#[test]
fn junit_report_of_the_small_model() {
    let out = replicheck(&["check", SMALL, "--format", "junit"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let xml = stdout(&out);
    assert!(xml.starts_with("<?xml"));
    // Three variants, seven properties each: one test case per model/variant/property.
    assert_eq!(xml.matches("<testcase ").count(), 21, "{xml}");
    assert_eq!(xml.matches("<testsuite ").count(), 3, "{xml}");
    for variant in ["default", "write-quorum-1", "no-read-repair"] {
        for property in [
            "acked_writes_persist",
            "linearizable",
            "no_duplicate_effects",
            "no_healthy_eviction",
            "churn_bounded",
            "converges",
            "ops_complete",
        ] {
            // Dots separate packages in CI dashboards: no spaces, slashes or dashes.
            let classname = format!("replicheck.small_quorum.{}", variant.replace('-', "_"));
            let case = format!("<testcase classname=\"{classname}\" name=\"{property}\" time=\"");
            assert_eq!(xml.matches(&case).count(), 1, "{case} in {xml}");
        }
    }
    assert!(!xml.contains("<failure"), "{xml}");
    assert!(xml.contains("failures=\"0\""));
}

#[test]
fn wrong_expectation_fails_with_exit_1_and_a_junit_failure() {
    let out = replicheck(&["check", WRONG, "--format", "junit"]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr(&out));
    let xml = stdout(&out);
    assert_eq!(xml.matches("<failure").count(), 1, "{xml}");
    assert!(xml.contains("<failure message=\"expected holds, found violated\" type=\"verdict\">"), "{xml}");
    // The failure carries the trace and the explorer link.
    assert!(xml.contains("http://127.0.0.1:3000/#/steps/0/"), "{xml}");

    let human = replicheck(&["check", WRONG]);
    assert_eq!(human.status.code(), Some(1));
    assert!(stdout(&human).contains("FAIL acked_writes_persist"));
}

#[test]
fn models_lists_the_library() {
    let out = replicheck(&["models", "models/"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("models/basic-quorum.toml"))
        .unwrap_or_else(|| panic!("basic-quorum is listed: {text}"));
    assert!(line.contains("write-quorum-1"), "{line}");
}

#[test]
fn policy_that_breaks_a_property_exits_1_with_a_counterexample() {
    let out = replicheck(&["check", SMALL, "--policy", POLICY_W1]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("FAIL acked_writes_persist"), "{text}");
    assert!(text.contains("counterexample for acked_writes_persist"), "{text}");
    assert!(
        text.contains(&format!(
            "explore: replicheck explore {SMALL} --policy {POLICY_W1} --addr 127.0.0.1:3000"
        )),
        "{text}"
    );
    assert!(text.contains("then open http://127.0.0.1:3000/#/steps/0/"), "{text}");
}

/// Kills the explorer when the test ends, pass or fail.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A plain HTTP/1.0 GET: the status code and the body.
fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no header end in {response:?}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
    Ok((status, body.to_string()))
}

#[test]
fn explorer_serves_the_model() {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .args(["explore", SMALL, "--addr", &addr])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the explorer starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let (status, body) = loop {
        match http_get(&addr, "/.states/0") {
            Ok(answer) => break answer,
            Err(e) => {
                if let Some(exit) = child.0.try_wait().expect("child status") {
                    panic!("the explorer exited ({exit}) before answering");
                }
                assert!(Instant::now() < deadline, "no answer from {addr} in 20s: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    assert_eq!(status, 200, "{body}");
    // The successors of the initial state, each with the model's properties.
    let steps: serde_json::Value = serde_json::from_str(&body).expect("the answer is JSON");
    assert!(!steps.as_array().expect("a list of steps").is_empty());
    assert!(body.contains("acked_writes_persist"), "{body}");
    assert!(body.contains("\"state\""), "{body}");
}
