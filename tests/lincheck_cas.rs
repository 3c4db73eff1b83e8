//! Knossos's cas-register histories (issue 36): the format is recognised, read with Knossos's
//! semantics, and generated histories get their verdicts known by construction.

use replicheck::lincheck::knossos::{generate, Spec};
use std::process::Command;

fn check(dir: &std::path::Path, name: &str, text: &str, extra: &[&str]) -> (i32, String) {
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write");
    let mut args = vec!["history", "check", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck")).args(&args).output().expect("runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().expect("exit code"), text)
}

/// Small histories whose verdicts follow from Knossos's rules, one rule each.
#[test]
fn knossos_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, i32); 8] = [
        // The register starts at 0.
        ("starts-at-0", "[{:process 0, :type :invoke, :f :read, :value nil}\n {:process 0, :type :ok, :f :read, :value 0}]", 0),
        ("not-nil-at-start", "[{:process 0, :type :invoke, :f :read, :value nil}\n {:process 0, :type :ok, :f :read, :value 3}]", 1),
        // A read of 3 while 4 is being written over a completed 0: neither 0 nor 4.
        ("concurrent-read", "; a comment first\n({:type :invoke, :f :write, :value 0, :process 0}\n {:type :ok, :f :write, :value 0, :process 0}\n ; concurrently: write 4, read 3\n {:type :invoke, :f :read, :value nil, :process 1}\n {:type :invoke, :f :write, :value 4, :process 2}\n {:type :ok, :f :read, :value 3, :process 1}\n {:type :ok, :f :write, :value 4, :process 2})", 1),
        // A failed write did not happen.
        ("fail-did-not-happen", "[{:type :invoke, :process 1, :f :read, :value nil}\n{:type :invoke, :process 101, :f :write, :value 3}\n{:type :fail, :process 101, :f :write, :value 3, :error [:unavailable nil]}\n{:type :ok, :process 1, :f :read, :value 3}]", 1),
        // An :info write may have happened, later.
        ("info-may-happen", "[{:process 1, :type :invoke, :f :write, :value 3}\n {:process 1, :type :info, :f :write, :value 3}\n {:process 2, :type :invoke, :f :read, :value nil}\n {:process 2, :type :ok, :f :read, :value 0}\n {:process 2, :type :invoke, :f :read, :value nil}\n {:process 2, :type :ok, :f :read, :value 3}]", 0),
        // A cas succeeds only from its old value: from 0 to 2, then 2 is read; 1 never is.
        ("cas", "[{:process 0, :type :invoke, :f :cas, :value [0 2]}\n {:process 0, :type :ok, :f :cas, :value [0 2]}\n {:process 0, :type :invoke, :f :read, :value nil}\n {:process 0, :type :ok, :f :read, :value 2}]", 0),
        ("cas-from-wrong-value", "[{:process 0, :type :invoke, :f :cas, :value [1 2]}\n {:process 0, :type :ok, :f :cas, :value [1 2]}]", 1),
        // A read that returns nil matches any value; the nemesis is no client.
        ("nil-read-and-nemesis", "{:process :nemesis, :type :info, :f :start, :value nil}\n{:process 0, :type :invoke, :f :write, :value 5, :time 10}\n{:process 0, :type :ok, :f :write, :value 5, :time 20}\n{:process 1, :type :invoke, :f :read, :value nil, :time 30}\n{:process 1, :type :ok, :f :read, :value nil, :time 40}\n", 0),
    ];
    // Jepsen's records print as tagged maps; the tag is read past, as is a discarded form.
    let tagged = "#jepsen.history.Op{:index 0, :time 5, :type :invoke, :process 0, :f :write, :value 2}\n#jepsen.history.Op{:index 1, :time 9, :type :ok, :process 0, :f :write, :value #_ 7 2}\n#jepsen.history.Op{:index 2, :time 12, :type :invoke, :process 1, :f :read, :value nil}\n#jepsen.history.Op{:index 3, :time 14, :type :ok, :process 1, :f :read, :value 0}\n";
    let (got, out) = check(dir.path(), "tagged.edn", tagged, &["--json"]);
    assert_eq!(got, 1, "0 read after 2 was written: {out}");
    assert!(out.contains(r#""format":"cas-register""#), "{out}");
    for (name, text, code) in cases {
        let (got, out) = check(dir.path(), &format!("{name}.edn"), text, &["--json"]);
        assert_eq!(got, code, "{name}: {out}");
        assert!(out.contains(r#""format":"cas-register""#), "{name}: the format is recognised: {out}");
    }
    // Bad input names the line and the value.
    let (got, out) = check(dir.path(), "bad.edn", "[{:process 0, :type :invoke, :f :cas, :value 3}]", &[]);
    assert_eq!(got, 2, "{out}");
    assert!(out.contains("line 1") && out.contains("cas value `3` is not `[old new]`"), "{out}");
    let (got, out) = check(dir.path(), "open.edn", "[{:process 0, :type :invoke, :f :read, :value nil}", &[]);
    assert_eq!(got, 2, "{out}");
    assert!(out.contains("no closing `]`"), "{out}");
}

/// Generated histories: many clients, cas, crashed clients; linearizable as generated, not
/// with the stale read. Each is decided quickly, and the picture is drawn.
#[test]
fn generated_cas_histories_get_their_known_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 1..=6 {
        for stale_read in [false, true] {
            let spec = Spec { clients: 8, ops: 300, crashes: 2, stale_read, seed };
            let text = generate(&spec);
            assert!(text.contains(":f :cas") && text.contains(":type :info") && text.contains(":type :fail"));
            let name = format!("g{seed}-{stale_read}.edn");
            let (got, out) = check(dir.path(), &name, &text, &[]);
            assert_eq!(got, i32::from(stale_read), "seed {seed}, stale read {stale_read}: {out}");
        }
    }
    let text = generate(&Spec { clients: 8, ops: 300, crashes: 2, stale_read: true, seed: 1 });
    let html = dir.path().join("g.html");
    let (got, out) = check(dir.path(), "g.edn", &text, &["--html", html.to_str().unwrap()]);
    assert_eq!(got, 1, "{out}");
    let page = std::fs::read_to_string(&html).expect("the picture");
    assert_eq!(page.matches(r#"id="unplaced""#).count(), 1, "the stale read is marked");
}

/// `history generate --format cas-register` writes what the tests generate, for users'
/// own checkers; refused options are named.
#[test]
fn history_generate_writes_cas_register_histories() {
    let dir = tempfile::tempdir().unwrap();
    let run =
        |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_replicheck")).args(args).output().expect("runs");
    for (stale, verdict) in [(false, 0), (true, 1)] {
        let file = dir.path().join(format!("cas-{stale}.edn"));
        let mut args =
            vec!["history", "generate", "--format", "cas-register", "--clients", "8", "--ops", "300"];
        args.extend(["--crashes", "2", "--seed", "3", "-o", file.to_str().unwrap()]);
        if stale {
            args.push("--stale-read");
        }
        assert!(run(&args).status.success());
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text, generate(&Spec { clients: 8, ops: 300, crashes: 2, stale_read: stale, seed: 3 }));
        let checked = run(&["history", "check", file.to_str().unwrap()]);
        assert_eq!(checked.status.code(), Some(verdict), "{}", String::from_utf8_lossy(&checked.stdout));
    }
    let out = run(&["history", "generate", "--format", "cas-register", "--keys", "2", "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--keys and --hot-percent do not apply"));
}
