//! The explorer tells the truth: for every counterexample of the model library (each variant
//! with a declared `violated` verdict), `replicheck explore` serves the check report's link,
//! and a headless browser shows the violated property as violated at the link's last state,
//! and a lasso's loop with the step it returns to.
//!
//! The browser is Chromium (`REPLICHECK_CHROMIUM` if set, else `chromium` or
//! `chromium-browser` on the PATH, else /usr/bin/chromium). Without one, the browser checks say so on stderr and
//! the rest (the explorer's JSON, served by the same process) still runs;
//! `REPLICHECK_REQUIRE_BROWSER=1` makes a missing browser a failure (CI sets it).

use replicheck::check::{self, PolicyChoice};
use replicheck::config::Verdict;
use replicheck::model::{display, World, WorldConfig};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_replicheck");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn chromium() -> Option<PathBuf> {
    // Named: that one or none (a name that is no file stands for "no browser").
    if let Some(p) = std::env::var_os("REPLICHECK_CHROMIUM") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            if dir.join(name).is_file() {
                return Some(dir.join(name));
            }
        }
    }
    let fixed = PathBuf::from("/usr/bin/chromium");
    fixed.is_file().then_some(fixed)
}

/// The browser, or a note on stderr (a failure under `REPLICHECK_REQUIRE_BROWSER=1`).
fn browser_or_skip() -> Option<PathBuf> {
    if let Some(b) = chromium() {
        return Some(b);
    }
    let message = "no Chromium found (REPLICHECK_CHROMIUM, chromium or chromium-browser on the PATH, \
                   /usr/bin/chromium): the explorer's pages were not loaded in a browser";
    assert!(std::env::var_os("REPLICHECK_REQUIRE_BROWSER").is_none(), "{message}");
    eprintln!("SKIPPED: {message}");
    None
}

/// A running `replicheck explore`, stopped when dropped.
struct Explorer {
    child: Child,
    port: u16,
}

impl Drop for Explorer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn explore(file: &Path, variant: &str) -> Explorer {
    explore_args(&[file.to_str().unwrap(), "--variant", variant], false)
}

/// `replicheck explore ARGS`, once it serves; its stderr piped (else dropped).
fn explore_args(args: &[&str], pipe_stderr: bool) -> Explorer {
    // A port free a moment ago may be taken by the time the explorer binds it: try again.
    for _ in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(BIN)
            .current_dir(root())
            .arg("explore")
            .args(args)
            .arg("--addr")
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(if pipe_stderr { Stdio::piped() } else { Stdio::null() })
            .spawn()
            .expect("replicheck explore starts");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if get(port, "/.status").0 == 200 {
                return Explorer { child, port };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("replicheck explore {} did not come up", args.join(" "));
}

/// One HTTP/1.0 GET: (status, body); status 0 if nothing answered.
fn get(port: u16, url: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return (0, String::new()) };
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    if write!(s, "GET {url} HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
        return (0, String::new());
    }
    let mut raw = String::new();
    if s.read_to_string(&mut raw).is_err() {
        return (0, String::new());
    }
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

/// The page at `url` as the browser rendered it. The virtual-time budget covers the longest
/// library counterexample (about 620 steps, rebalancer-compaction-debt), whose page loads
/// every step's state.
fn dump_dom(browser: &Path, url: &str) -> String {
    let profile = tempfile::tempdir().expect("a profile directory");
    let mut child = Command::new(browser)
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--virtual-time-budget=30000", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        let _ = out.read_to_string(&mut dom);
        dom
    });
    let start = Instant::now();
    loop {
        if child.try_wait().expect("chromium runs").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish loading {url} in 120s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The attributes of the first start tag containing `marker`.
fn tag_with(dom: &str, marker: &str) -> Option<String> {
    let at = dom.find(marker)?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    Some(dom[start..=end].to_string())
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    Some(tag[at..at + tag[at..].find('"')?].to_string())
}

/// Every (model file, variant) with a declared `violated` verdict.
fn violated_variants() -> Vec<(PathBuf, String)> {
    let files = check::model_files(&[root().join("models")]).expect("the model library");
    let jobs = check::plan(&files, &PolicyChoice::Variants(None)).expect("the library loads");
    jobs.into_iter()
        .filter(|j| j.expect.values().any(|v| *v == Verdict::Violated))
        .map(|j| (j.scenario.path.clone(), j.variant.clone()))
        .collect()
}

/// A counterexample as `check --format json` reports it.
struct Cx {
    property: String,
    link: String,
    steps: usize,
    loop_from_step: Option<usize>,
}

fn counterexamples(file: &Path, variant: &str) -> (String, Vec<Cx>) {
    let out = Command::new(BIN)
        .current_dir(root())
        .args(["check", file.to_str().unwrap(), "--variant", variant, "--format", "json"])
        .output()
        .expect("replicheck check runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let run = &doc["runs"][0];
    let mut cxs = Vec::new();
    for p in run["properties"].as_array().expect("properties") {
        let Some(cx) = p["counterexample"].as_object() else { continue };
        assert_eq!(p["found"], "violated", "{p}");
        cxs.push(Cx {
            property: p["name"].as_str().unwrap().to_string(),
            link: cx["explorer_url"].as_str().unwrap().to_string(),
            steps: cx["steps"].as_array().unwrap().len(),
            loop_from_step: cx["loop_from_step"].as_u64().map(|n| n as usize),
        });
    }
    (run["model"].as_str().unwrap().to_string(), cxs)
}

#[test]
fn every_library_counterexample_shows_its_violation_at_its_last_state() {
    let browser = browser_or_skip();
    let variants = violated_variants();
    assert!(variants.len() >= 10, "the library has its violated variants: {variants:?}");
    let (mut seen, mut lassos, mut pages) = (0, 0, 0);
    // Every path report is checked; the browser loads the first counterexample of each property
    // (a page takes 1-10 s, and pages of one property differ only in their data; the page
    // code is the same for every model and family).
    let mut rendered = std::collections::BTreeSet::new();
    // The checks run one variant ahead of the pages: each is a full exploration.
    let (found, checked) = std::sync::mpsc::sync_channel(1);
    let files = variants.clone();
    let checker = std::thread::spawn(move || {
        for (file, variant) in &files {
            if found.send(counterexamples(file, variant)).is_err() {
                return;
            }
        }
    });
    for ((file, variant), (model, cxs)) in variants.iter().zip(checked.iter()) {
        assert!(!cxs.is_empty(), "{} {variant} declares a violation: a counterexample", file.display());
        let explorer = explore(file, variant);
        for cx in &cxs {
            seen += 1;
            let what = format!("{model} {variant} {}", cx.property);
            let path = cx.link.split("#/steps/").nth(1).unwrap_or_else(|| panic!("{what}: link {}", cx.link));
            // What replicheck hands the page.
            let (status, body) = get(explorer.port, &format!("/.replicheck/path/{path}"));
            assert_eq!(status, 200, "{what}: {body}");
            let report: Value = serde_json::from_str(&body).expect("a path report");
            assert_eq!(report["model"], model.as_str());
            assert_eq!(report["variant"], variant.as_str());
            let last = report["steps"].as_array().unwrap().last().unwrap().clone();
            assert_eq!(last["step"], cx.steps, "{what}: the link's last state is the report's last step");
            let prop = last["properties"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == cx.property.as_str())
                .unwrap_or_else(|| panic!("{what}: the property is listed"))
                .clone();
            assert_eq!(prop["status"], "violated", "{what}: {prop}");
            // The reason names what was read.
            let reason = prop["reason"].as_str().unwrap();
            let names = match cx.property.as_str() {
                "acked_writes_persist" => "misses it",
                "linearizable" => "no order of these operations",
                "capacity_respected" => "was offered",
                "no_healthy_eviction" => "was evicted while up",
                "churn_bounded" => "membership changes",
                "no_duplicate_effects" => "second, different version",
                "single_primary" => "as primary of epoch",
                _ => "repeat forever",
            };
            assert!(reason.contains(names), "{what}: the reason says why: {reason}");
            match cx.loop_from_step {
                Some(first) => {
                    lassos += 1;
                    let l = &report["loop"];
                    assert_eq!(l["first"], first, "{what}: the loop starts where check says: {l}");
                    assert_eq!(l["returns_to"], first - 1, "{what}: {l}");
                    assert_eq!(l["last"], cx.steps, "{what}: {l}");
                }
                None => assert!(report["loop"].is_null(), "{what}: a safety counterexample has no loop"),
            }
            let Some(browser) = &browser else { continue };
            if !rendered.insert(cx.property.clone()) {
                continue;
            }
            let url = cx.link.replace("127.0.0.1:3000", &format!("127.0.0.1:{}", explorer.port));
            let dom = dump_dom(browser, &url);
            pages += 1;
            let list = tag_with(&dom, "id=\"state-properties\"")
                .unwrap_or_else(|| panic!("{what}: the page lists properties at the state:\n{dom}"));
            assert_eq!(
                attr(&list, "data-step").as_deref(),
                Some(cx.steps.to_string().as_str()),
                "{what}: the selected state is the link's last"
            );
            let li = tag_with(&dom, &format!("data-property=\"{}\"", cx.property))
                .unwrap_or_else(|| panic!("{what}: the property is on the page"));
            assert_eq!(attr(&li, "data-status").as_deref(), Some("violated"), "{what}: {li}");
            let title = format!("{model} (variant {variant})");
            assert!(dom.contains(&title), "{what}: the page names the model and variant");
            assert!(dom.contains("<svg"), "{what}: the sequence diagram is drawn");
            match cx.loop_from_step {
                Some(first) => {
                    let banner = tag_with(&dom, "id=\"loop-banner\"")
                        .unwrap_or_else(|| panic!("{what}: the page shows the loop"));
                    assert_eq!(attr(&banner, "data-returns-to"), Some((first - 1).to_string()), "{what}");
                    assert_eq!(attr(&banner, "data-loop-last"), Some(cx.steps.to_string()), "{what}");
                    let start = tag_with(&dom, &format!("data-step=\"{}\"", first - 1))
                        .unwrap_or_else(|| panic!("{what}: the loop's start is in the path"));
                    assert!(start.contains("loop-start"), "{what}: the loop's start is marked: {start}");
                    assert!(dom.contains("loop start: step"), "{what}");
                }
                None => assert!(!dom.contains("id=\"loop-banner\""), "{what}: no loop on a safety path"),
            }
        }
    }
    assert!(lassos >= 2, "the library has lassos (ops_complete, converges): {lassos}");
    checker.join().expect("every variant was checked");
    if browser.is_some() {
        assert!(pages >= rendered.len(), "every property's page was loaded: {pages}");
    }
    eprintln!("{seen} counterexamples, {lassos} lassos, {pages} pages loaded in a browser");
}

/// A path the model cannot follow is refused with a 404, and the explorer goes on serving
/// (stateright's own server would panic rebuilding such a path).
#[test]
fn the_explorer_refuses_paths_the_model_cannot_follow_and_keeps_serving() {
    let explorer = explore(&root().join("models/capacity-routing-bypass.toml"), "incident");
    for bad in [
        "/.states/0/99",
        "/.states/7",
        "/.states/0/x",
        "/.replicheck/path/0/99",
        "/.replicheck/path/",
        "/nope",
    ] {
        let (status, body) = get(explorer.port, bad);
        assert_eq!(status, 404, "{bad}: {body}");
    }
    let (status, body) = get(explorer.port, "/.states/0");
    assert_eq!(status, 200, "{body}");
    let next: Value = serde_json::from_str(&body).expect("stateright's JSON, forwarded");
    let first = &next.as_array().expect("the next steps")[0];
    // The state rendering is replicheck's, with names, not a Debug dump of indices.
    let state = first["state"].as_str().unwrap();
    assert!(state.contains("messages in flight:") && !state.contains("NodeState"), "{state}");
    let (status, page) = get(explorer.port, "/");
    assert_eq!(status, 200);
    assert!(page.contains("Properties at the selected state"), "replicheck's page, not stateright's");
}

/// Every message arrow starts at its own send: a message sent again later (identical to one
/// sent earlier, as a loop's next heartbeat round is) gets its own arrow, not one from the
/// first send.
#[test]
fn the_sequence_diagram_draws_each_message_from_its_own_send() {
    let out = Command::new(BIN)
        .current_dir(root())
        .args(["check", "models/rebalancer-compaction.toml", "--variant", "incident", "--format", "json"])
        .output()
        .expect("replicheck check runs");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let link = doc["runs"][0]["properties"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "converges")
        .and_then(|p| p["counterexample"]["explorer_url"].as_str())
        .expect("the converges lasso")
        .to_string();
    let indices: Vec<usize> = link
        .split("#/steps/")
        .nth(1)
        .unwrap()
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|i| i.parse().unwrap())
        .collect();
    let jobs = check::plan(
        &[root().join("models/rebalancer-compaction.toml")],
        &PolicyChoice::Variants(Some("incident".into())),
    )
    .unwrap();
    let world = World::new(WorldConfig::new(&jobs[0].scenario, &jobs[0].policy).unwrap());
    let (states, actions) = replicheck::explorer::follow(&world, &indices).expect("the link replays");
    let steps: Vec<_> =
        states.into_iter().zip(actions.into_iter().map(Some).chain(std::iter::once(None))).collect();
    let svg = display::svg_of_steps(&world.cfg, &steps);
    // (y1, y2, label) per arrow: the line, then its label.
    let mut arrows: Vec<(u32, u32, String)> = Vec::new();
    for part in svg.split("<line ").skip(1) {
        if !part.contains("svg-event-line") {
            continue;
        }
        let num = |k: &str| -> u32 {
            let at = part.find(&format!("{k}='")).unwrap() + k.len() + 2;
            part[at..at + part[at..].find('\'').unwrap()].parse().unwrap()
        };
        let label_at = part.find("class='svg-event-label'>").unwrap() + "class='svg-event-label'>".len();
        let label = part[label_at..label_at + part[label_at..].find('<').unwrap()].to_string();
        let (x1, x2) = (num("x1"), num("x2"));
        arrows.push((num("y1"), num("y2"), format!("{x1}->{x2} {label}")));
    }
    assert!(arrows.len() > 20, "the lasso delivers messages: {}", arrows.len());
    for (y1, y2, label) in &arrows {
        assert!(y1 < y2, "{label}: sent ({y1}) before it is delivered ({y2})");
    }
    let mut repeated = 0;
    for (i, (y1, _, label)) in arrows.iter().enumerate() {
        for (y1b, _, label_b) in &arrows[i + 1..] {
            if label == label_b {
                repeated += 1;
                assert_ne!(y1, y1b, "{label}: two deliveries drawn from one send");
            }
        }
    }
    assert!(repeated > 0, "the lasso repeats some message (the test means something)");
    assert!(svg.contains("svg-loop-label"), "the lasso's loop is marked in the diagram");
}

/// `explore --memory-max`: the explorer serves within the bound, and stops with exit 3 and the
/// bound named once "Run to completion" takes it past (stateright's checker behind it has no
/// bound of its own). Without the watch the explorer runs on past the bound.
#[test]
fn run_to_completion_stops_at_the_memory_bound() {
    // It serves within the bound while idle (else it would not come up).
    let mut explorer = explore_args(&["models/basic-quorum.toml", "--memory-max", "40M"], true);
    let child = &mut explorer.child;
    let mut s = TcpStream::connect(("127.0.0.1", explorer.port)).unwrap();
    write!(s, "POST /.runtocompletion HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    // basic-quorum's 1.3M states take the checker past 40 MiB in about a second here.
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the explorer ran past its memory bound for a minute");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("memory bound of 40 MiB reached"), "{stderr}");
}
