//! What users read must stand on its own: no pointer to files outside the repository
//! (`../shared/...`), every `docs/incidents.md#anchor` a heading of docs/incidents.md, and the
//! verdict tables of docs/incidents.md the ones the models declare.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &Path) -> String {
    std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", relative.display()))
}

/// Every file under `dir` (relative to the crate root), recursively.
fn files_under(dir: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::from(dir)];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(root().join(&d)).expect("readable directory") {
            let entry = entry.expect("directory entry");
            let relative = d.join(entry.file_name());
            if entry.file_type().expect("file type").is_dir() {
                stack.push(relative);
            } else {
                out.push(relative);
            }
        }
    }
    out.sort();
    out
}

/// The text users read: the README, the guides, the lint rules' messages, the CLI's help, the
/// certificates' README and the benchmark's crate documentation.
fn user_facing() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [
        "README.md",
        "src/lint/mod.rs",
        "src/lint/rules.rs",
        "src/lint/table.rs",
        "src/lint/render.rs",
        "src/cli.rs",
        "proofs/README.md",
        "src/bench/mod.rs",
        "src/bench/repl.rs",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    files.extend(files_under("docs"));
    files
}

#[test]
fn user_facing_text_points_at_nothing_outside_the_repository() {
    let mut found = Vec::new();
    for file in user_facing() {
        for (n, line) in read(&file).lines().enumerate() {
            if line.contains("../shared") {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "user-facing text points outside the repository:\n{}", found.join("\n"));
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, punctuation other than `-`
/// and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn incident_anchors() -> BTreeSet<String> {
    read(Path::new("docs/incidents.md"))
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| slug(line.trim_start_matches('#')))
        .collect()
}

/// The anchors of every `docs/incidents.md#anchor` in `text`.
fn referenced_anchors(text: &str) -> Vec<String> {
    const LINK: &str = "docs/incidents.md#";
    text.match_indices(LINK)
        .map(|(at, _)| {
            text[at + LINK.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn every_incident_anchor_is_a_heading() {
    let anchors = incident_anchors();
    for incident in [
        "ack-timeout-eviction-storm",
        "capacity-routing-bypass",
        "hot-partition-retry-storm",
        "rebalancer-compaction-oscillation",
    ] {
        assert!(anchors.contains(incident), "docs/incidents.md has no heading #{incident}: {anchors:?}");
    }
    let mut missing = Vec::new();
    for file in user_facing() {
        let referenced = referenced_anchors(&read(&file));
        let must_refer = ["README.md", "src/lint/table.rs"].iter().any(|f| file == Path::new(f));
        assert!(!must_refer || !referenced.is_empty(), "{} refers to no incident anchor", file.display());
        for anchor in referenced {
            if !anchors.contains(&anchor) {
                missing.push(format!("{}: docs/incidents.md#{anchor}", file.display()));
            }
        }
    }
    assert!(missing.is_empty(), "anchors with no heading in docs/incidents.md:\n{}", missing.join("\n"));
}

#[test]
fn incident_tables_are_the_models_declared_verdicts() {
    let doc = read(Path::new("docs/incidents.md"));
    let mut rows_checked = 0;
    for section in doc.split("\n### In replicheck").skip(1) {
        let section = section.split("\n## ").next().unwrap_or(section);
        let model = section
            .split('`')
            .find(|s| s.starts_with("models/") && s.ends_with(".toml"))
            .expect("the section names its model file");
        let model_toml: toml::Value = read(Path::new(model)).parse().expect("the model is TOML");
        let variants = model_toml["variants"].as_table().expect("[variants]");
        let mut header: Vec<String> = Vec::new();
        let mut documented = BTreeSet::new();
        for line in section.lines().filter(|l| l.starts_with('|')) {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            if cells[0] == "variant" {
                header = cells.iter().map(|c| c.to_string()).collect();
                continue;
            }
            if cells[0].starts_with("---") {
                continue;
            }
            let variant = cells[0].trim_matches('`');
            let expect = variants.get(variant).unwrap_or_else(|| panic!("{model} has no variant {variant}"))
                ["expect"]
                .as_table()
                .expect("an expect table");
            for (property, verdict) in header.iter().zip(&cells).skip(2) {
                let declared = expect.get(property).and_then(|v| v.as_str());
                assert_eq!(
                    declared,
                    Some(*verdict),
                    "docs/incidents.md says {model} variant {variant}: {property} {verdict}"
                );
            }
            assert_eq!(
                header.len() - 2,
                expect.len(),
                "{model} {variant}: every declared property in the table"
            );
            documented.insert(variant.to_string());
            rows_checked += 1;
        }
        let declared: BTreeSet<String> = variants.keys().cloned().collect();
        assert_eq!(documented, declared, "docs/incidents.md lists every variant of {model}");
    }
    assert!(rows_checked >= 14, "only {rows_checked} variant rows found in docs/incidents.md");
}
