//! `replicheck prove` and `prove --verify` through the binary, on a copy of the small test model
//! (`tests/data/small-quorum.toml`, two variants, well under a second each) in a temporary
//! directory: certificates are written with stable text, verify passes on them, and each kind of
//! change (scope, policy, a missing, stale or corrupt certificate, a verdict or the policy code
//! differing from what the certificate records) makes verify exit 1 naming the certificate and
//! the reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SMALL: &str = "tests/data/small-quorum.toml";
const MODEL: &str = "small-quorum.toml";

/// A temporary directory holding a copy of the small model, where the binary runs.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(SMALL);
        std::fs::copy(source, dir.path().join(MODEL)).expect("copy the small model");
        Workspace { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("the replicheck binary runs")
    }

    fn prove(&self) -> Output {
        self.run(&["prove", MODEL, "--out", "proofs"])
    }

    fn verify(&self) -> Output {
        self.run(&["prove", "--verify", MODEL, "--out", "proofs"])
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).expect("file exists")
    }

    /// Replace exactly one occurrence of `from` in a file of the workspace.
    fn edit(&self, rel: &str, from: &str, to: &str) {
        let text = self.read(rel);
        assert_eq!(text.matches(from).count(), 1, "{rel} has `{from}` once");
        std::fs::write(self.path(rel), text.replace(from, to)).expect("write");
    }

    /// A workspace whose certificates were just written.
    fn proved() -> Workspace {
        let ws = Workspace::new();
        let out = ws.prove();
        assert_eq!(out.status.code(), Some(0), "prove: {}", text(&out));
        ws
    }
}

/// stdout and stderr together.
fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

const DEFAULT_CERT: &str = "proofs/small-quorum/default.toml";
const W1_CERT: &str = "proofs/small-quorum/write-quorum-1.toml";

#[test]
fn prove_writes_one_certificate_per_variant_and_verify_passes() {
    let ws = Workspace::proved();
    let cert = ws.read(W1_CERT);
    for fragment in [
        "model = \"small-quorum\"",
        "variant = \"write-quorum-1\"",
        &format!("tool_version = \"{}\"", env!("CARGO_PKG_VERSION")),
        "[model_file]\npath = \"small-quorum.toml\"\nsha256 = \"",
        "[policy]\nsha256 = \"",
        "write_quorum = 1\n",
        "[policy_code]\nsha256 = \"",
        "\"src/policy/quorum.rs\" = \"",
        "nodes = { n1 = \"a\", n2 = \"b\", n3 = \"c\" }",
        "[scope.faults]\nbudget = 1\ncrash = [\"n1\"]",
        "reader = { zone = \"a\", shard = \"s1\", ops = [\"read\"], request_timeout = \"1500ms\", think_time = \"0ms..1s\" }",
        "[exploration]\ncomplete = true\nunique_states = ",
        "acked_writes_persist = { expected = \"violated\", found = \"violated\" }",
        "linearizable = { expected = \"holds\", found = \"holds\" }",
        "[counterexamples.acked_writes_persist]",
        "explore = \"replicheck explore small-quorum.toml --variant write-quorum-1\"",
        "{ step = 1, time_ms = 0, action = \"",
    ] {
        assert!(cert.contains(fragment), "certificate lacks {fragment:?}:\n{cert}");
    }
    let default = ws.read(DEFAULT_CERT);
    assert!(default.contains("write_quorum = 2\n"), "{default}");
    assert!(!default.contains("[counterexamples."), "every property holds: no trace\n{default}");
    // No timings, threads or addresses: nothing that varies between runs.
    assert!(!cert.contains("elapsed") && !cert.contains("127.0.0.1"), "{cert}");

    let out = ws.verify();
    assert_eq!(out.status.code(), Some(0), "verify: {}", text(&out));
    assert!(text(&out).contains("all 3 certificates in proofs match"), "{}", text(&out));

    // Proving again rewrites nothing: the text is stable.
    let again = ws.prove();
    assert_eq!(again.status.code(), Some(0));
    assert!(text(&again).contains("0 created, 0 updated, 3 unchanged"), "{}", text(&again));
    assert_eq!(ws.read(W1_CERT), cert);
}

#[test]
fn a_changed_scope_fails_naming_the_certificate_and_the_change() {
    let ws = Workspace::proved();
    ws.edit(MODEL, "budget = 1", "budget = 0");
    let out = ws.verify();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    for cert in [DEFAULT_CERT, W1_CERT] {
        assert!(t.contains(&format!("MISMATCH  {cert}:")), "{t}");
    }
    assert!(t.contains("model file changed (sha256 "), "{t}");
    assert!(t.contains("scope.faults.budget 1 -> 0"), "{t}");
    assert!(t.contains("state count changed: unique_states "), "{t}");
    assert!(t.contains("3 of 3 certificates in proofs do not match"), "{t}");

    // Regenerating makes them match again.
    assert_eq!(ws.prove().status.code(), Some(1), "without faults write-quorum-1 loses nothing");
    assert_eq!(ws.verify().status.code(), Some(0));
}

#[test]
fn a_changed_policy_value_fails_naming_it() {
    let ws = Workspace::proved();
    ws.edit(MODEL, "replica_ack_timeout = \"1s\"", "replica_ack_timeout = \"1200ms\"");
    let out = ws.verify();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains(&format!("MISMATCH  {DEFAULT_CERT}:")), "{t}");
    assert!(t.contains("policy changed: replica_ack_timeout \"1s\" -> \"1200ms\""), "{t}");
}

#[test]
fn a_missing_certificate_fails() {
    let ws = Workspace::proved();
    std::fs::remove_file(ws.path(DEFAULT_CERT)).expect("remove");
    let out = ws.verify();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains(&format!("MISSING   {DEFAULT_CERT}: no certificate for variant \"default\" of {MODEL}")),
        "{t}"
    );
    assert!(t.contains(&format!("ok        {W1_CERT}")), "{t}");
}

#[test]
fn a_certificate_for_a_removed_variant_is_stale_and_prove_removes_it() {
    let ws = Workspace::proved();
    let model = ws.read(MODEL);
    let cut = model.find("[variants.write-quorum-1]").expect("the model has the variant");
    std::fs::write(ws.path(MODEL), &model[..cut]).expect("write");
    let out = ws.verify();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains(&format!("STALE     {W1_CERT}: {MODEL} has no variant \"write-quorum-1\"")), "{t}");

    let out = ws.prove();
    assert!(text(&out).contains(&format!("removed   {W1_CERT}")), "{}", text(&out));
    assert!(!ws.path(W1_CERT).exists());
    assert_eq!(ws.verify().status.code(), Some(0));
}

#[test]
fn a_different_verdict_or_policy_code_fails_naming_it() {
    // As if the certificate had been written when the verdict, or a policy function, differed.
    let ws = Workspace::proved();
    ws.edit(
        W1_CERT,
        "linearizable = { expected = \"holds\", found = \"holds\" }",
        "linearizable = { expected = \"holds\", found = \"violated\" }",
    );
    let cert = ws.read(DEFAULT_CERT);
    let line = cert.lines().find(|l| l.starts_with("\"src/policy/quorum.rs\" = ")).expect("hashed");
    ws.edit(DEFAULT_CERT, line, "\"src/policy/quorum.rs\" = \"0000\"");
    let line = cert.lines().skip_while(|l| *l != "[policy_code]").nth(1).expect("the code hash");
    ws.edit(DEFAULT_CERT, line, "sha256 = \"1111\"");

    let out = ws.verify();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("verdict changed: linearizable violated -> holds"), "{t}");
    assert!(t.contains("policy code changed (sha256 1111 -> "), "{t}");
    assert!(t.contains("src/policy/quorum.rs modified"), "{t}");
}

#[test]
fn a_corrupt_certificate_fails_and_bad_input_exits_2() {
    let ws = Workspace::proved();
    std::fs::write(ws.path(DEFAULT_CERT), "<<<<<<< HEAD\n").expect("write");
    let out = ws.verify();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains(&format!("UNREADABLE {DEFAULT_CERT}: not a readable certificate")), "{t}");

    let out = ws.run(&["prove", "--verify", "no-such-model.toml", "--out", "proofs"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no-such-model.toml: no such file or directory"), "{}", text(&out));
}

/// Every file of `src/policy/` must be in the policy code hash, or changing it would not
/// invalidate the certificates.
#[test]
fn the_policy_code_hash_covers_every_policy_file() {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("src/policy is readable") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(root).expect("under the crate");
                let parts: Vec<String> =
                    rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                out.push(parts.join("/"));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut on_disk = Vec::new();
    walk(&root.join("src/policy"), root, &mut on_disk);
    walk(&root.join("src/protocol"), root, &mut on_disk);
    on_disk.sort();
    let mut listed: Vec<String> =
        replicheck::check::proofs::policy_source_files().iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        listed, on_disk,
        "POLICY_SOURCES in src/check/proofs.rs must list every file of src/policy/ and src/protocol/"
    );
}

/// Under one memory bound, a small model proved after a large one that reached the bound
/// completes: the pages the large run freed are not counted against it (they were, and the
/// small model stopped at its first level). A certificate of a run cut by the memory bound
/// records the bound, not the counts at the cut, which vary with what was resident: verify
/// at the same bound matches it.
#[test]
fn a_memory_bound_is_each_runs_own_and_its_cuts_verify() {
    let ws = Workspace::new();
    let big = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/basic-quorum.toml");
    std::fs::copy(big, ws.path("big.toml")).expect("copy basic-quorum");
    let args = ["prove", "big.toml", MODEL, "--out", "proofs", "--memory-max", "80M"];
    let out = ws.run(&args);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let certs = |dir: &str| -> Vec<String> {
        let entries = std::fs::read_dir(ws.path(dir)).expect("certificates written");
        entries.map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect()
    };
    let (big, small) = (certs("proofs/basic-quorum"), certs("proofs/small-quorum"));
    assert!(!big.is_empty() && !small.is_empty());
    for cert in &big {
        assert!(cert.contains("complete = false\nstopped = \"memory bound of 80 MiB reached\"\n"), "{cert}");
    }
    for cert in &small {
        assert!(cert.contains("complete = true"), "a small model after a large one: {cert}");
    }
    let verify = ws.run(&["prove", "--verify", "big.toml", MODEL, "--out", "proofs", "--memory-max", "80M"]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
}

/// `prove --memory-max`: a run cut short by the memory bound is incomplete (exit 3), and its
/// certificate records no verdict as held.
#[test]
fn prove_stops_at_the_memory_bound_and_says_so() {
    let ws = Workspace::new();
    let out = ws.run(&["prove", MODEL, "--out", "proofs", "--memory-max", "1M"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("INCOMPLETE: a run was cut short by a limit (states or memory)"), "{stdout}");
    let certs: Vec<String> = std::fs::read_dir(ws.path("proofs/small-quorum"))
        .expect("certificates written")
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(!certs.is_empty());
    for cert in &certs {
        assert!(
            cert.contains("complete = false") && cert.contains("memory bound of 1 MiB reached"),
            "{cert}"
        );
        assert!(!cert.contains("found = \"holds\""), "{cert}");
    }
}
