//! The layering of `src/lib.rs`, enforced: every `crate::` path in a module names a module
//! that layer may use. A new edge is either allowed here on purpose or a design mistake.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What each top-level module may use (besides itself).
fn allowed() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("policy", &[][..]),
        ("config", &["policy"][..]),
        ("protocol", &["policy", "config"][..]),
        ("model", &["policy", "config", "protocol"][..]),
        ("engine", &[][..]),
        ("lincheck", &["config"][..]),
        ("check", &["policy", "config", "protocol", "model", "engine", "lint"][..]),
        ("lint", &["policy", "config", "model"][..]),
        ("explorer", &["policy", "config", "model", "engine", "check"][..]),
        ("store", &["policy", "config", "protocol", "lincheck"][..]),
        ("bench", &["engine"][..]),
        (
            "cli",
            &[
                "policy", "config", "model", "engine", "lincheck", "check", "lint", "store", "bench",
                "explorer",
            ][..],
        ),
    ])
}

/// The modules named by `crate::a`, `crate::{a, b::c}` in `text`.
fn used_modules(text: &str) -> BTreeSet<String> {
    used_under(text, "crate::")
}

/// The names that follow `prefix` in `text`: `PREFIXa`, `PREFIX{a, b::c}`.
fn used_under(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        rest = &rest[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String =
                    item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            out.insert(name);
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable") {
        let p = entry.expect("entry").path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_module_uses_a_layer_above_it_or_beside_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed = allowed();
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).expect("under src");
        let top = rel.components().next().expect("a component").as_os_str().to_string_lossy();
        let module = top.trim_end_matches(".rs");
        if module == "lib" || module == "main" {
            continue;
        }
        let may =
            allowed.get(module).unwrap_or_else(|| panic!("src/{module} has no layer in tests/layers.rs"));
        let text = std::fs::read_to_string(&file).expect("readable");
        for used in used_modules(&text) {
            if used != module && !may.contains(&used.as_str()) {
                wrong.push(format!("{} uses crate::{used}", rel.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "edges the layering does not allow:\n{}", wrong.join("\n"));
}

#[test]
fn the_scanner_sees_grouped_and_plain_paths() {
    let uses = used_modules("use crate::{config::Resolved, policy};\nlet x = crate::model::World::new(c);");
    assert_eq!(uses, BTreeSet::from(["config".to_string(), "policy".to_string(), "model".to_string()]));
}

/// What every room of the store may use: the records it writes (the decision log and the
/// trace) and the clock its machines run on.
const RECORDS: [&str; 3] = ["decision", "trace", "clock"];

/// The store's rooms, each using only the rooms below it: `sim` plays a model on the
/// coordinator and the nodes' storage (or the `leader` room's replicas and manager, in a data
/// directory laid out as the `cluster`'s) over a simulated network, with `run`'s clients and
/// checks; `run` plays a model on a `cluster`,
/// which starts the `coordinator` and the `node`s (or, for the leader family, on the `leader`
/// room's cluster); the coordinator talks to the nodes. The
/// store's other files are commands over the rooms (`cli`, `bench`) or the records that
/// every room may write ([`RECORDS`]), which use no room. A room names another as `crate::store::ROOM`;
/// `super::` inside a room stays in it.
fn store_rooms() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("node", &[][..]),
        ("coordinator", &["node"][..]),
        ("cluster", &["coordinator", "node"][..]),
        ("run", &["cluster", "coordinator", "node", "leader"][..]),
        ("sim", &["run", "cluster", "coordinator", "node", "leader"][..]),
        ("leader", &["cluster", "coordinator", "node"][..]),
        ("decision", &[][..]),
        ("trace", &[][..]),
        ("clock", &[][..]),
        ("cli", &["run", "sim", "cluster", "coordinator", "node", "bench", "leader"][..]),
        ("bench", &["cluster", "coordinator", "node", "leader"][..]),
        ("mod", &[][..]),
    ])
}

#[test]
fn no_store_room_uses_a_room_above_it() {
    let store = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    let rooms = store_rooms();
    let mut files = Vec::new();
    walk(&store, &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&store).expect("under src/store");
        let top = rel.components().next().expect("a component").as_os_str().to_string_lossy();
        let room = top.trim_end_matches(".rs");
        let may =
            rooms.get(room).unwrap_or_else(|| panic!("src/store/{room} has no room in tests/layers.rs"));
        let text = std::fs::read_to_string(&file).expect("readable");
        for used in used_under(&text, "crate::store::") {
            let a_room = rooms.contains_key(used.as_str()) && !RECORDS.contains(&used.as_str());
            if used != room && a_room && !may.contains(&used.as_str()) {
                wrong.push(format!("src/store/{} uses crate::store::{used}", rel.display()));
            }
        }
        if text.contains("super::super::") {
            wrong.push(format!("src/store/{} leaves its room by super::super", rel.display()));
        }
    }
    assert!(wrong.is_empty(), "edges between the store's rooms that are not allowed:\n{}", wrong.join("\n"));
}
