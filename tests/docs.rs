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
        "src/cli/mod.rs",
        "src/cli/bench.rs",
        "src/cli/conform.rs",
        "src/cli/explore.rs",
        "src/cli/man.rs",
        "src/cli/simulate.rs",
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

/// A row of a reference table: the key, then its other cells.
type Row = (String, Vec<String>);

/// The keys docs/reference.md lists under each `<!-- table: NAME -->` marker: the first cell
/// of every row of the table that follows it.
fn reference_tables() -> Vec<(String, Vec<Row>)> {
    let doc = read(Path::new("docs/reference.md"));
    let mut tables: Vec<(String, Vec<Row>)> = Vec::new();
    let mut current: Option<usize> = None;
    for line in doc.lines() {
        if let Some(name) = line.strip_prefix("<!-- table: ").and_then(|l| l.strip_suffix(" -->")) {
            tables.push((name.to_string(), Vec::new()));
            current = Some(tables.len() - 1);
            continue;
        }
        let Some(at) = current else { continue };
        if !line.starts_with('|') {
            if !tables[at].1.is_empty() {
                current = None;
            }
            continue;
        }
        let cells: Vec<String> = line.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect();
        if cells[0] == "key" || cells[0].starts_with("---") {
            continue;
        }
        let key = cells[0].trim_matches('`').to_string();
        tables[at].1.push((key, cells[1..].to_vec()));
    }
    tables
}

#[test]
fn the_reference_lists_exactly_the_keys_the_parser_accepts() {
    let documented = reference_tables();
    let code = replicheck::config::model_tables();
    let names = |t: &str| if t.is_empty() { "(top level)".to_string() } else { t.to_string() };
    let documented_names: Vec<String> = documented.iter().map(|(n, _)| n.clone()).collect();
    let code_names: Vec<String> = code.iter().map(|(t, _)| names(t)).collect();
    assert_eq!(
        documented_names.iter().collect::<BTreeSet<_>>(),
        code_names.iter().collect::<BTreeSet<_>>(),
        "docs/reference.md's tables are the model file's tables"
    );
    for (table, keys) in code {
        let rows = &documented.iter().find(|(n, _)| *n == names(table)).expect("checked above").1;
        let listed: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            listed.iter().collect::<BTreeSet<_>>(),
            keys.iter().collect::<BTreeSet<_>>(),
            "docs/reference.md table `{}` against the parser's keys",
            names(table)
        );
    }
}

#[test]
fn the_reference_gives_the_policy_defaults_the_code_applies() {
    let documented = reference_tables();
    let rows = &documented.iter().find(|(n, _)| n == "policy").expect("a policy table").1;
    let effective: std::collections::BTreeMap<&str, String> =
        replicheck::config::SourcedPolicy::default().effective().into_iter().collect();
    for (key, cells) in rows {
        // Columns: type, default, meaning.
        let default = cells[1].trim_matches('`');
        match effective.get(key.as_str()) {
            Some(value) => {
                // Compared as TOML values: `1.0` and `1` are the same fraction.
                let as_toml = |v: &str| -> toml::Value {
                    let parsed: toml::Table = format!("v = {v}").parse().expect("a TOML value");
                    match &parsed["v"] {
                        toml::Value::Integer(i) if key.contains("fraction") || key.contains("threshold") => {
                            toml::Value::Float(*i as f64)
                        }
                        other => other.clone(),
                    }
                };
                assert_eq!(as_toml(default), as_toml(value), "docs/reference.md: default of `{key}`");
            }
            None => assert_eq!(default, "unset", "docs/reference.md: `{key}` has no default in the code"),
        }
    }
    assert!(rows.len() >= 30, "only {} policy keys documented", rows.len());
}

#[test]
fn the_reference_limits_are_the_code_constants() {
    use replicheck::policy as p;
    let expected: Vec<(&str, String)> = vec![
        ("zones", p::ZONE_COUNT_MAX.to_string()),
        ("nodes", p::NODE_COUNT_MAX.to_string()),
        ("shards", p::SHARD_COUNT_MAX.to_string()),
        ("clients", p::CLIENT_COUNT_MAX.to_string()),
        ("operations per client", p::CLIENT_OPS_MAX.to_string()),
        ("`replication_factor`", p::REPLICATION_FACTOR_MAX.to_string()),
        ("`max_attempts`", format!("{} (or `\"unlimited\"`)", p::MAX_ATTEMPTS_MAX)),
        ("faults in `faults.budget`", replicheck::config::FAULT_BUDGET_MAX.to_string()),
        ("entries in `faults.degrade`", replicheck::config::DEGRADE_MENU_MAX.to_string()),
        ("any duration, in ticks", p::TICKS_MAX.to_string()),
        ("any rate, in writes per tick", replicheck::config::duration::RATE_PER_TICK_MAX.to_string()),
        ("`write_shard_suffixes`", p::routing::WRITE_SHARD_SUFFIXES_MAX.to_string()),
        ("stages of a `rollout`", replicheck::config::ROLLOUT_STAGES_MAX.to_string()),
        ("`coordinator.work_per_tick`, `membership_update_work`, `copy_work`", {
            use p::coordinator_load::{CHANGE_WORK_MAX, WORK_PER_TICK_MAX};
            assert_eq!(WORK_PER_TICK_MAX, CHANGE_WORK_MAX, "one row documents both");
            WORK_PER_TICK_MAX.to_string()
        }),
        (
            "the coordinator's backlog",
            format!("{} ticks of its work", p::coordinator_load::BACKLOG_TICKS_MAX),
        ),
    ];
    let doc = read(Path::new("docs/reference.md"));
    let section = doc.split("\n## Limits").nth(1).expect("a Limits section");
    let section = section.split("\n## ").next().unwrap();
    let rows: Vec<(String, String)> = section
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("| what") && !l.starts_with("|---"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].to_string(), cells[1].to_string())
        })
        .collect();
    let expected: Vec<(String, String)> = expected.into_iter().map(|(w, v)| (w.to_string(), v)).collect();
    assert_eq!(rows, expected, "docs/reference.md's limits against the code's constants");
}

/// The guide's model, as printed in its last section.
fn guide_model() -> String {
    let doc = read(Path::new("docs/writing-a-model.md"));
    let after = doc.split("<!-- guide-model: two-zones.toml -->").nth(1).expect("the guide marks its model");
    let block = after.split("```toml\n").nth(1).expect("a toml block");
    block.split("```").next().unwrap().to_string()
}

#[test]
fn the_guides_excerpts_are_lines_of_its_model() {
    let doc = read(Path::new("docs/writing-a-model.md"));
    let model = guide_model();
    let lines: BTreeSet<&str> = model.lines().collect();
    let mut checked = 0;
    for excerpt in doc.lines().filter_map(|l| l.strip_prefix("    ")) {
        let toml_like = excerpt.contains(" = ") || excerpt.starts_with('[');
        if !toml_like || excerpt.starts_with('#') || excerpt.starts_with("replicheck") {
            continue;
        }
        if excerpt.starts_with("  ") || excerpt.contains("(expected:") {
            continue; // report output, not the model
        }
        assert!(
            lines.contains(excerpt),
            "docs/writing-a-model.md shows `{excerpt}`, which its model does not have"
        );
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} excerpt lines found");
}

#[test]
fn the_guides_model_gives_its_declared_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two-zones.toml");
    std::fs::write(&path, guide_model()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["check", path.to_str().unwrap()])
        .output()
        .expect("replicheck runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("2 of 2 runs gave the required verdicts"), "{stdout}");
    assert!(
        stdout.contains("no_healthy_eviction    violated               (expected: violated)"),
        "{stdout}"
    );
    // The guide quotes the counterexample's last step.
    let quoted = "fires => queued: evict s1 n3 -> n4; n3 is up and reachable: a healthy replica";
    assert!(stdout.contains(quoted), "{stdout}");
    let doc = read(Path::new("docs/writing-a-model.md"));
    assert!(doc.contains(quoted));

    // Every state count and step count the guide quotes is the one `check` prints (issue 36).
    let mut counts = 0;
    for line in doc.lines().map(str::trim) {
        let quoted_count = line
            .strip_prefix("variant ")
            .and_then(|rest| rest.split_once(" unique states"))
            .map(|(head, _)| head.to_string());
        let quoted_steps = line.strip_prefix("counterexample for ").filter(|l| l.ends_with("steps):"));
        if let Some(head) = quoted_count {
            assert!(
                stdout.contains(&format!("variant {head} unique states")),
                "the guide quotes `{line}`:\n{stdout}"
            );
            counts += 1;
        } else if let Some(rest) = quoted_steps {
            assert!(
                stdout.contains(&format!("counterexample for {rest}")),
                "the guide quotes `{line}`:\n{stdout}"
            );
            counts += 1;
        }
    }
    assert_eq!(counts, 3, "two variants' state counts and one counterexample's steps");
    // What lint says first, in the guide's words: each quoted `SEVERITY on `VARIANT``.
    let lint =
        doc.split("Lint runs first").nth(1).expect("the guide describes lint").split("Then:").next().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut said = 0;
    for (severity, word) in [("error", "an error on `"), ("warning", "a warning on `")] {
        for after in lint.split(word).skip(1) {
            let variant = after.split('`').next().unwrap();
            let printed = stdout
                .lines()
                .chain(stderr.lines())
                .any(|l| l.contains(&format!("{severity}[")) && l.contains(variant));
            assert!(printed, "the guide says lint gives {word}{variant}`; check printed:\n{stdout}{stderr}");
            said += 1;
        }
    }
    assert_eq!(said, 1, "the guide names lint's finding on short-timeout: {lint}");
}

/// Every `replicheck ...` command of the GitHub Actions example, shell variables replaced by
/// plausible values.
fn workflow_commands() -> Vec<Vec<String>> {
    let workflow = read(Path::new("docs/examples/github-actions.yml"));
    let mut commands = Vec::new();
    for line in workflow.lines() {
        let line = line.trim().trim_start_matches("run:").trim();
        if !line.starts_with("replicheck ") {
            continue;
        }
        // The command itself: up to a redirection or a shell operator.
        let command = line.split(['>', '|']).next().unwrap().trim();
        let words = command
            .split_whitespace()
            .map(|w| w.trim_matches('"').replace("$file", "policies/prod.toml"))
            .collect();
        commands.push(words);
    }
    commands
}

#[test]
fn the_ci_example_uses_commands_the_cli_accepts() {
    use clap::Parser;
    let commands = workflow_commands();
    for words in &commands {
        if let Err(e) = replicheck::cli::Cli::try_parse_from(words) {
            panic!(
                "docs/examples/github-actions.yml runs `{}`, which the CLI refuses:\n{e}",
                words.join(" ")
            );
        }
    }
    let subcommand = |name: &str| commands.iter().any(|w| w.get(1).map(String::as_str) == Some(name));
    for name in ["check", "prove", "lint", "diff"] {
        assert!(subcommand(name), "the CI example runs no `replicheck {name}`");
    }
    assert!(read(Path::new("docs/ci.md")).contains("examples/github-actions.yml"));
}

/// When health is judged (issue 36): the reference has the section, with each `health_check`
/// mode, and the README's store section says the same rather than "every heartbeat_interval".
#[test]
fn when_a_node_is_judged_is_said_in_the_reference_and_the_readme() {
    let reference = read(Path::new("docs/reference.md"));
    let section = reference
        .split("## When a node is judged")
        .nth(1)
        .expect("docs/reference.md has `## When a node is judged`")
        .split("\n## ")
        .next()
        .unwrap();
    for mode in ["health_check = \"rounds\"", "health_check = \"continuous\"", "at each heartbeat round"] {
        assert!(section.contains(mode), "the section does not say `{mode}`");
    }
    let readme = read(Path::new("README.md"));
    let store = readme.split("- **Failure detection and eviction**").nth(1).expect("the store's detector");
    let store = store.split("\n- **").next().unwrap();
    assert!(store.contains("health_check = \"rounds\"") && store.contains("\"continuous\""), "{store}");
    assert!(store.contains("When a node is judged"), "{store}");
}
