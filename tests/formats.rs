//! The machine-readable reports against their published schemas: `check` and `diff` JSON
//! against docs/schemas/*.schema.json (with a JSON Schema validator), JUnit against what
//! docs/schemas/junit.xsd requires (checked structurally here; `.ci/run` also runs
//! `xmllint --schema`), and docs/output-formats.md naming every JSON field.

#[path = "support/bin.rs"]
mod bin;

use bin::{replicheck, root, stdout};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SMALL: &str = "tests/data/small-quorum.toml";
const WRONG: &str = "tests/data/small-wrong-expect.toml";
const POLICY_W1: &str = "tests/data/policy-w1.toml";
const SCHEMA_BASE: &str = "https://replicheck.invalid/schemas/";

fn schema_file(name: &str) -> Value {
    let text = std::fs::read_to_string(root().join("docs/schemas").join(name)).expect("the schema is there");
    serde_json::from_str(&text).expect("the schema is JSON")
}

/// Serves `https://replicheck.invalid/schemas/NAME` from docs/schemas/NAME, so the diff
/// schema's references into the check schema resolve without a network.
struct LocalSchemas;

impl jsonschema::Retrieve for LocalSchemas {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let name = uri
            .as_str()
            .strip_prefix(SCHEMA_BASE)
            .ok_or_else(|| format!("not one of replicheck's schemas: {}", uri.as_str()))?;
        Ok(schema_file(name))
    }
}

fn validator(name: &str) -> jsonschema::Validator {
    jsonschema::options()
        .with_retriever(LocalSchemas)
        .build(&schema_file(name))
        .unwrap_or_else(|e| panic!("{name} is a valid schema: {e}"))
}

/// Every error the schema finds in `doc`, as text (empty: valid).
fn schema_errors(schema: &str, doc: &Value) -> Vec<String> {
    validator(schema).iter_errors(doc).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("stdout is JSON ({e}): {}", stdout(out)))
}

/// A base policy under which small-quorum keeps acknowledged writes (the candidate, w=1, does
/// not).
fn base_policy(dir: &Path) -> PathBuf {
    let path = dir.join("w2.toml");
    std::fs::write(&path, "write_quorum = 2\n").unwrap();
    path
}

#[test]
fn check_json_matches_its_schema_complete_incomplete_and_with_counterexamples() {
    for args in [
        vec!["check", SMALL, "--format", "json"],
        vec!["check", SMALL, "--format", "json", "--max-states", "50"],
        vec!["check", SMALL, "--format", "json", "--policy", POLICY_W1, "--addr", "localhost:8080"],
        vec!["check", WRONG, "--format", "json"],
        // Distributed: the run's `distributed` object (docs/distributed.md).
        vec!["check", SMALL, "--format", "json", "--workers", "2", "--shared-frontier", "1"],
    ] {
        let out = replicheck(&args);
        let doc = json_of(&out);
        assert_eq!(doc["exit_code"].as_i64(), out.status.code().map(i64::from), "{args:?}");
        let errors = schema_errors("check.schema.json", &doc);
        assert!(errors.is_empty(), "{args:?}: {errors:#?}");
    }
    // The schema is a guard, not a formality: the old name of the link is refused.
    let mut doc = json_of(&replicheck(&["check", SMALL, "--format", "json", "--variant", "write-quorum-1"]));
    let cx = doc["runs"][0]["properties"][0]["counterexample"].as_object_mut().expect("a counterexample");
    assert!(cx["explorer_url"].as_str().unwrap().starts_with("http://127.0.0.1:3000/#/steps/0/"));
    let url = cx.remove("explorer_url").unwrap();
    cx.insert("explorer_path".into(), url);
    assert!(!schema_errors("check.schema.json", &doc).is_empty(), "explorer_path is no longer a field");
}

#[test]
fn check_json_policy_is_an_object_of_typed_values() {
    let doc = json_of(&replicheck(&["check", SMALL, "--format", "json", "--variant", "write-quorum-1"]));
    let policy = &doc["runs"][0]["policy"];
    assert_eq!(policy["write_quorum"], 1, "{policy}");
    assert_eq!(policy["read_repair"], true, "{policy}");
    assert!(policy["replica_ack_timeout"].as_str().is_some_and(|d| d.ends_with('s')), "{policy}");
    assert_eq!(doc["interrupted"], false);
    assert_eq!(doc["runs_not_started"], 0);
}

/// A run that asked for `por` and got no ample sets says why, in both reports; one that asked
/// for `none`, or got them, says nothing more.
#[test]
fn a_run_without_ample_sets_says_why() {
    let model = "models/quorum-rollout.toml";
    let run = |extra: &[&str]| {
        let mut args = vec!["check", model, "--variant", "base", "--quiet"];
        args.extend(extra);
        let out = replicheck(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stdout(&out));
        out
    };
    let doc = json_of(&run(&["--format", "json"]));
    let errors = schema_errors("check.schema.json", &doc);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(doc["runs"][0]["reduction"], "none");
    assert_eq!(doc["runs"][0]["ample_sets_refused"], "several coordinators");
    let human = stdout(&run(&[]));
    assert!(human.contains("reduction none (no ample sets: several coordinators);"), "{human}");

    let doc = json_of(&run(&["--format", "json", "--reduce", "none"]));
    assert!(doc["runs"][0].get("ample_sets_refused").is_none(), "{doc}");
    let human = stdout(&run(&["--reduce", "none"]));
    assert!(human.contains("reduction none;"), "{human}");

    let out = replicheck(&["check", SMALL, "--format", "json", "--quiet"]);
    let doc = json_of(&out);
    assert_eq!(doc["runs"][0]["reduction"], "por", "{doc}");
    assert!(doc["runs"][0].get("ample_sets_refused").is_none(), "{doc}");
}

#[test]
fn diff_json_matches_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_policy(dir.path());
    let base = base.to_str().unwrap();
    for (args, code) in [
        (vec!["diff", SMALL, "--base", base, "--candidate", POLICY_W1, "--format", "json"], 1),
        (vec!["diff", SMALL, "--base", POLICY_W1, "--candidate", base, "--format", "json"], 0),
        (
            vec![
                "diff",
                SMALL,
                "--base",
                base,
                "--candidate",
                POLICY_W1,
                "--format",
                "json",
                "--max-states",
                "40",
            ],
            3,
        ),
    ] {
        let out = replicheck(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let doc = json_of(&out);
        let errors = schema_errors("diff.schema.json", &doc);
        assert!(errors.is_empty(), "{args:?}: {errors:#?}");
        if code == 1 {
            let regression = &doc["models"][0]["regressions"][0];
            assert_eq!(regression["property"], "acked_writes_persist");
            assert!(regression["counterexample"]["explorer_url"].is_string());
        }
    }
}

/// `time` attributes: a non-negative decimal (xs:decimal, no exponent).
fn assert_decimal(what: &str, value: Option<&str>) {
    let v = value.unwrap_or_else(|| panic!("{what} has a time"));
    let ok = !v.is_empty()
        && v.chars().all(|c| c.is_ascii_digit() || c == '.')
        && v.matches('.').count() <= 1
        && v.parse::<f64>().is_ok();
    assert!(ok, "{what}: time={v:?} is not a decimal");
}

fn int_attr(node: roxmltree::Node, name: &str) -> usize {
    node.attribute(name)
        .unwrap_or_else(|| panic!("<{}> has {name}", node.tag_name().name()))
        .parse()
        .unwrap_or_else(|e| panic!("<{}> {name} is an integer: {e}", node.tag_name().name()))
}

/// The JUnit document's shape, as docs/schemas/junit.xsd requires, and its counts: the totals
/// of `<testsuites>` and of each `<testsuite>` are those of their test cases. Returns the test
/// cases as (classname, name, outcome) with outcome `passed`, `failure`, `error` or
/// `skipped`.
fn validate_junit(xml: &str) -> Vec<(String, String, String)> {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("well-formed XML ({e}):\n{xml}"));
    let suites = doc.root_element();
    assert_eq!(suites.tag_name().name(), "testsuites");
    let classname_ok = |c: &str| {
        c.split('.').all(|part| {
            part.chars().next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
                && part.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        })
    };
    let mut all = Vec::new();
    let mut totals = [0usize; 4];
    let mut total_time = 0.0;
    for suite in suites.children().filter(|n| n.is_element()) {
        assert_eq!(suite.tag_name().name(), "testsuite", "only test suites under <testsuites>");
        let name = suite.attribute("name").expect("a suite has a name");
        assert!(!name.trim().is_empty());
        assert_decimal(name, suite.attribute("time"));
        total_time += suite.attribute("time").unwrap().parse::<f64>().unwrap();
        let mut counts = [0usize; 4];
        for case in suite.children().filter(|n| n.is_element()) {
            assert_eq!(case.tag_name().name(), "testcase", "only test cases in a suite");
            let classname = case.attribute("classname").expect("a test case has a classname");
            assert!(classname_ok(classname), "classname {classname:?}: dot-separated identifiers");
            let case_name = case.attribute("name").expect("a test case has a name");
            assert!(!case_name.is_empty());
            assert_decimal(case_name, case.attribute("time"));
            let children: Vec<_> = case.children().filter(|n| n.is_element()).collect();
            assert!(children.len() <= 1, "at most one outcome per test case");
            let outcome = match children.first().map(|c| c.tag_name().name()) {
                None => "passed",
                Some("failure") => "failure",
                Some("error") => "error",
                Some("skipped") => "skipped",
                Some(other) => panic!("unexpected <{other}> in a test case"),
            };
            if let Some(c) = children.first() {
                assert!(c.attribute("message").is_some_and(|m| !m.is_empty()), "<{outcome}> has a message");
                if outcome != "skipped" {
                    assert!(c.attribute("type").is_some(), "<{outcome}> has a type");
                }
            }
            counts[0] += 1;
            counts[1] += usize::from(outcome == "failure");
            counts[2] += usize::from(outcome == "error");
            counts[3] += usize::from(outcome == "skipped");
            all.push((classname.to_string(), case_name.to_string(), outcome.to_string()));
        }
        assert_eq!(
            [
                int_attr(suite, "tests"),
                int_attr(suite, "failures"),
                int_attr(suite, "errors"),
                int_attr(suite, "skipped")
            ],
            counts,
            "suite {name}"
        );
        for i in 0..4 {
            totals[i] += counts[i];
        }
    }
    assert_eq!(
        [
            int_attr(suites, "tests"),
            int_attr(suites, "failures"),
            int_attr(suites, "errors"),
            int_attr(suites, "skipped")
        ],
        totals,
        "the totals of <testsuites>"
    );
    assert_decimal("testsuites", suites.attribute("time"));
    let stated: f64 = suites.attribute("time").unwrap().parse().unwrap();
    assert!((stated - total_time).abs() < 0.01, "testsuites time {stated} is the suites' {total_time}");
    all
}

#[test]
fn check_junit_has_valid_classnames_times_and_counts() {
    let out = replicheck(&["check", SMALL, "--format", "junit"]);
    assert_eq!(out.status.code(), Some(0));
    let cases = validate_junit(&stdout(&out));
    assert_eq!(cases.len(), 21);
    assert!(cases.iter().any(|(c, n, o)| c == "replicheck.small_quorum.write_quorum_1"
        && n == "acked_writes_persist"
        && o == "passed"));

    // A policy file's run: its path becomes identifiers, no slashes or spaces.
    let out = replicheck(&["check", SMALL, "--format", "junit", "--policy", POLICY_W1]);
    assert_eq!(out.status.code(), Some(1));
    let cases = validate_junit(&stdout(&out));
    let failed: Vec<_> = cases.iter().filter(|(_, _, o)| o == "failure").collect();
    assert_eq!(failed.len(), 1, "{cases:?}");
    assert_eq!(failed[0].0, "replicheck.small_quorum.policy_tests_data_policy_w1_toml");
    assert_eq!(failed[0].1, "acked_writes_persist");

    // Cut short: the verdicts left unknown are errors, not failures.
    let out =
        replicheck(&["check", SMALL, "--format", "junit", "--max-states", "50", "--variant", "default"]);
    assert_eq!(out.status.code(), Some(3));
    let cases = validate_junit(&stdout(&out));
    assert!(cases.iter().any(|(_, _, o)| o == "error"), "{cases:?}");
    assert!(cases.iter().all(|(_, _, o)| o != "failure"), "{cases:?}");

    let out = replicheck(&["check", WRONG, "--format", "junit"]);
    assert_eq!(out.status.code(), Some(1));
    let cases = validate_junit(&stdout(&out));
    assert_eq!(cases.iter().filter(|(_, _, o)| o == "failure").count(), 1);
}

#[test]
fn diff_junit_is_junit_with_regressions_as_failures() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_policy(dir.path());
    let out = replicheck(&[
        "diff",
        SMALL,
        "--base",
        base.to_str().unwrap(),
        "--candidate",
        POLICY_W1,
        "--format",
        "junit",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let xml = stdout(&out);
    assert!(xml.starts_with("<?xml"), "{xml}");
    let cases = validate_junit(&xml);
    assert_eq!(cases.len(), 7, "one test case per property");
    let failures: Vec<_> = cases.iter().filter(|(_, _, o)| o == "failure").collect();
    assert_eq!(failures.len(), 1, "{cases:?}");
    assert_eq!(failures[0].0, "replicheck.small_quorum.diff");
    assert_eq!(failures[0].1, "acked_writes_persist");
    assert!(xml.contains("/#/steps/0/"), "the regression carries its trace's link: {xml}");
}

#[test]
fn interrupted_junit_has_the_cut_run_as_errors_and_the_runs_not_started_as_skipped() {
    // The same model twice: the first run is cut by SIGINT, the second never starts.
    let model = bin::SLOW_MODEL;
    let mut child = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["check", model, model])
        .args(bin::SLOW_OPTIONS)
        .args(["--format", "junit"])
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("replicheck starts");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(child.try_wait().unwrap().is_none(), "still exploring after 3s");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let cases = validate_junit(&stdout(&out));
    let outcomes: Vec<&str> = cases.iter().map(|(_, _, o)| o.as_str()).collect();
    assert_eq!(outcomes.len(), 12, "{cases:?}");
    assert!(outcomes[..6].iter().all(|o| *o == "error"), "{cases:?}");
    assert!(outcomes[6..].iter().all(|o| *o == "skipped"), "{cases:?}");
    assert!(cases.iter().all(|(c, _, _)| c == "replicheck.ack_timeout_eviction.fixed"));
}

/// Every field name the JSON schemas define (object property names, recursively).
fn schema_fields(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get("properties") {
                for (name, sub) in props {
                    out.push(name.clone());
                    schema_fields(sub, out);
                }
            }
            for (key, sub) in map {
                if key != "properties" {
                    schema_fields(sub, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| schema_fields(i, out)),
        _ => {}
    }
}

#[test]
fn output_formats_doc_names_every_json_field_and_the_readme_no_stale_one() {
    let doc = std::fs::read_to_string(root().join("docs/output-formats.md")).expect("docs/output-formats.md");
    for schema in ["check.schema.json", "diff.schema.json"] {
        let mut fields = Vec::new();
        schema_fields(&schema_file(schema), &mut fields);
        assert!(fields.len() > 10, "{schema}: {fields:?}");
        for f in fields {
            assert!(
                doc.contains(&format!("`{f}`")),
                "docs/output-formats.md does not document `{f}` ({schema})"
            );
        }
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains("docs/output-formats.md"), "the README links the field reference");
    for stale in ["explorer_path", "timing,"] {
        assert!(!readme.contains(stale), "the README still names `{stale}`");
    }
}
