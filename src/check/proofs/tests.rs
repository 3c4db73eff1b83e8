//! The certificate's text (its layout, and that it reads back as written), what `explain` says
//! for each kind of change, and the capacity and routing facts of `[scope]`: built from real
//! model files, and a change to any of them explained as a scope change.

use super::cert::{Certificate, CounterexampleSummary, Step, Verdicts};
use super::explain::quote;
use super::*;
use crate::check::Found;
use crate::config::Verdict;
use std::path::Path;

#[test]
fn sha256_is_the_standard_one_and_ignores_line_endings() {
    assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_eq!(sha256_hex("a\r\nb\n"), sha256_hex("a\nb\n"));
}

#[test]
fn quoting_round_trips_through_toml() {
    for s in ["plain", "with \"quotes\" and \\", "tab\tnew\nline", "\u{1}ctl", "ünï"] {
        let doc: toml::Table = format!("k = {}\n", quote(s)).parse().expect("valid TOML");
        assert_eq!(doc["k"].as_str(), Some(s));
    }
}

#[test]
fn durations_read_as_a_scenario_writes_them() {
    assert_eq!(cert::duration_text(0), "0ms");
    assert_eq!(cert::duration_text(1500), "1500ms");
    assert_eq!(cert::duration_text(2000), "2s");
    assert_eq!(display_path(Path::new("./models/x.toml")), "models/x.toml");
    assert_eq!(display_path(Path::new("/tmp/x.toml")), "/tmp/x.toml");
}

/// The certificate of the basic-quorum model's default variant, with an empty run.
fn basic() -> Certificate {
    let dir = tempfile::tempdir().expect("a temporary directory");
    scope_tests::certificate(dir.path(), &scope_tests::library_model("basic-quorum.toml"), "default")
}

fn trace(actions: &[(u64, &str)]) -> CounterexampleSummary {
    CounterexampleSummary {
        explore: "replicheck explore m.toml --variant v".into(),
        explorer_path: "#/steps/0/1".into(),
        steps: actions
            .iter()
            .enumerate()
            .map(|(i, (t, a))| Step { step: i as u64 + 1, time_ms: *t, action: a.to_string() })
            .collect(),
    }
}

#[test]
fn a_certificate_reads_back_as_written_in_its_layout() {
    let mut cert = basic();
    cert.counterexamples
        .insert("linearizable".into(), trace(&[(0, "FAULT: n1 crashes"), (100, "a \"quoted\" \\ action")]));
    let text = cert.to_text();
    assert_eq!(Certificate::from_text(&text).expect("it reads back"), cert);
    assert!(text.starts_with("# replicheck verification certificate"), "{text}");
    for fragment in [
        "\n\nformat = 1\nmodel = \"basic-quorum\"\n",
        "\n\n[model_file]\npath = \"",
        "\n\n[policy.values]\nreplication_factor = 3\n",
        "\n\n[policy_code.files]\n\"src/policy/coordinator_load.rs\" = \"",
        "nodes = { n1 = \"a\", n2 = \"b\", n3 = \"c\" }\n",
        "\n\n[scope.network]\nlatency = { a-a = \"100ms\",",
        "\n\n[verdicts]\n",
        "\n\n[counterexamples.linearizable]\nexplore = ",
        "steps = [\n  { step = 1, time_ms = 0, action = \"FAULT: n1 crashes\" },\n  { step = 2, time_ms = 100, action = ",
        " },\n]\n",
    ] {
        assert!(text.contains(fragment), "{fragment:?} not in\n{text}");
    }
    assert!(!text.contains("[counterexamples]") && !text.contains("[scope.partitions]"), "{text}");
}

#[test]
fn a_hand_added_key_makes_the_certificate_unreadable_naming_its_line() {
    let text = basic().to_text().replace("[exploration]\n", "[exploration]\nextra = true\n");
    let e = Certificate::from_text(&text).expect_err("unknown keys are refused");
    assert!(e.message().contains("unknown field `extra`"), "{e}");
}

#[test]
fn explains_each_kind_of_change() {
    let mut old = basic();
    let holds = Verdicts { expected: Verdict::Holds, found: Found::Holds };
    old.verdicts.insert("acked_writes_persist".into(), holds);
    let mut new = old.clone();
    new.model_file.sha256 = "bbbbbbbbbbbbbbbb".into();
    new.scope.faults.budget = 3;
    new.policy.sha256 = "p2".into();
    new.policy.values.insert("write_quorum".into(), toml::Value::Integer(1));
    new.policy.values.shift_remove("read_repair");
    new.policy_code.sha256 = "c2".into();
    new.policy_code.files.insert("src/policy/quorum.rs".into(), "q2".into());
    new.policy_code.files.insert("src/policy/new.rs".into(), "n1".into());
    new.verdicts["acked_writes_persist"].found = Found::Violated;
    new.exploration.unique_states = 250;
    new.exploration.max_depth = 12;
    new.counterexamples.insert("acked_writes_persist".into(), trace(&[(0, "FAULT: n1 crashes")]));
    let r = explain(&old, &new);
    let all = r.join("\n");
    let old_hash = &old.model_file.sha256[..12];
    assert!(
        all.contains(&format!(
            "model file changed (sha256 {old_hash} -> bbbbbbbbbbbb): scope.faults.budget 2 -> 3"
        )),
        "{all}"
    );
    assert!(all.contains("policy changed: read_repair true -> (absent), write_quorum 2 -> 1"), "{all}");
    assert!(all.contains("): src/policy/new.rs added, src/policy/quorum.rs modified"), "{all}");
    assert!(all.contains("verdict changed: acked_writes_persist holds -> violated"), "{all}");
    assert!(all.contains("state count changed: unique_states 0 -> 250, max_depth 0 -> 12"), "{all}");
    assert!(all.contains("counterexample for acked_writes_persist: none -> 1 steps"), "{all}");
    assert_eq!(r.len(), 6, "{all}");
    assert!(explain(&old, &old).is_empty());
}

#[test]
fn explains_a_changed_trace_by_its_first_differing_step() {
    let mut old = basic();
    let mut new = old.clone();
    old.counterexamples.insert("linearizable".into(), trace(&[(0, "a"), (100, "b")]));
    new.counterexamples.insert("linearizable".into(), trace(&[(0, "a"), (100, "c"), (100, "d")]));
    assert_eq!(
        explain(&old, &new),
        vec![
            "counterexample for linearizable changed: 2 steps -> 3 steps; first difference at step 2: \"t=100ms b\" -> \"t=100ms c\""
        ]
    );
    let mut moved = old.clone();
    moved.counterexamples["linearizable"].explorer_path = "#/steps/9".into();
    assert_eq!(
        explain(&old, &moved),
        vec!["counterexample for linearizable changed: explorer_path \"#/steps/0/1\" -> \"#/steps/9\""]
    );
}

/// The capacity and routing facts of `[scope]`: built from real model files, and a change to
/// any of them explained as a scope change.
mod scope_tests {
    use super::super::cert::{Capacity, Certificate};
    use super::super::*;
    use crate::check::{plan, PolicyChoice, RunResult};
    use std::path::Path;

    /// A model file of the library, as text.
    pub(super) fn library_model(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name);
        std::fs::read_to_string(&path).expect("the model library has the file")
    }

    /// `text` with `from` (present exactly once) replaced by `to`.
    fn edited(text: &str, from: &str, to: &str) -> String {
        assert_eq!(text.matches(from).count(), 1, "the model has `{from}` once");
        text.replace(from, to)
    }

    /// The certificate of `variant` of the model `text`, saved as `dir/model.toml`. Nothing is
    /// explored: the scope does not depend on the run, so an empty result stands in for it.
    pub(super) fn certificate(dir: &Path, text: &str, variant: &str) -> Certificate {
        let path = dir.join("model.toml");
        std::fs::write(&path, text).expect("write the model");
        let jobs =
            plan(&[path], &PolicyChoice::Variants(Some(variant.to_string()))).expect("the model loads");
        assert_eq!(jobs.len(), 1);
        let job = &jobs[0];
        let result = RunResult {
            model: job.scenario.name.clone(),
            file: job.scenario.path.clone(),
            variant: job.variant.clone(),
            description: job.description.clone(),
            policy: Vec::new(),
            properties: Vec::new(),
            unique_states: 0,
            transitions: 0,
            max_depth: 0,
            complete: true,
            stopped: None,
            cut: None,
            elapsed_ms: 0,
            states_per_second: 0.0,
            fingerprint_collision_probability: 0.0,
            reduction: crate::model::Reduction::None,
            silence_regions: false,
            arrival_slack: false,
            ample_states: 0,
            ample_sets_refused: None,
            distributed: None,
        };
        Certificate::new(job, &result, text).expect("the certificate builds")
    }

    /// Why the certificate of `variant` changes when the model's `from` becomes `to`.
    fn explain_edit(model: &str, variant: &str, from: &str, to: &str) -> Vec<String> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let text = library_model(model);
        let old = certificate(dir.path(), &text, variant);
        let new = certificate(dir.path(), &edited(&text, from, to), variant);
        explain(&old, &new)
    }

    #[test]
    fn backends_are_recorded_only_when_modelled() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cert =
            certificate(dir.path(), &library_model("capacity-routing-bypass.toml"), "incident").to_text();
        assert!(
            cert.contains(
                "[scope.backends]\n\
                 preference_order = [\"n1\", \"n2\", \"n3\", \"n4\"]\n\
                 write_capacity_per_tick = { n1 = 3, n2 = 4, n3 = 2, n4 = 4 }\n\
                 base_load_per_tick = { n1 = 2, n2 = 0, n3 = 1, n4 = 0 }\n"
            ),
            "{cert}"
        );
        // One suffix, no partition capacity, no burst: a client's partition is its shard.
        assert!(!cert.contains("[scope.partitions]") && !cert.contains("key_hash"), "{cert}");

        // A model with no capacity anywhere gets neither table.
        let plain = certificate(dir.path(), &library_model("basic-quorum.toml"), "default").to_text();
        for absent in ["[scope.backends]", "[scope.partitions]", "key_hash", "_per_tick"] {
            assert!(!plain.contains(absent), "{absent} in\n{plain}");
        }
    }

    #[test]
    fn partitions_and_where_each_key_lands_are_recorded() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let text = library_model("hot-partition-retry-storm.toml");
        let incident = certificate(dir.path(), &text, "incident").to_text();
        assert!(
            incident.contains(
                "[scope.partitions]\n\
                 write_capacity_per_tick = 2\n\
                 burst_writes_per_tick = { p1 = 2, p2 = 0, p3 = 0, p4 = 0 }\n\
                 background_writes_per_tick = { p1 = 2, p2 = 0, p3 = 0, p4 = 0 }\n"
            ),
            "{incident}"
        );
        // One suffix: both keys land on their prefix's partition.
        assert!(incident
            .contains("checkout-2 = { zone = \"a\", shard = \"p1\", key_hash = 1, partition = \"p1\","));
        // Four suffixes: key hash 1 lands on p2, and the burst is spread over p1 and p2.
        let fixed = certificate(dir.path(), &text, "fixed").to_text();
        assert!(
            fixed.contains("checkout-2 = { zone = \"a\", shard = \"p1\", key_hash = 1, partition = \"p2\",")
        );
        assert!(
            fixed.contains("background_writes_per_tick = { p1 = 1, p2 = 1, p3 = 0, p4 = 0 }\n"),
            "{fixed}"
        );
        assert!(!fixed.contains("[scope.backends]"), "no node has a write capacity\n{fixed}");
    }

    #[test]
    fn a_changed_backend_capacity_is_a_scope_change() {
        let r = explain_edit(
            "capacity-routing-bypass.toml",
            "incident",
            "write_capacity = \"30/s\"",
            "write_capacity = \"40/s\"",
        );
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].starts_with("model file changed (sha256 "), "{r:?}");
        assert!(r[0].ends_with("): scope.backends.write_capacity_per_tick.n1 3 -> 4"), "{r:?}");

        let r = explain_edit(
            "capacity-routing-bypass.toml",
            "fixed",
            "base_load = \"10/s\"",
            "base_load = \"0/s\"",
        );
        assert!(r[0].ends_with("): scope.backends.base_load_per_tick.n3 1 -> 0"), "{r:?}");
    }

    #[test]
    fn a_changed_partition_capacity_or_burst_is_a_scope_change() {
        // The partition cap is a policy value; the capacity it resolves to is scope.
        let model = "hot-partition-retry-storm.toml";
        let r = explain_edit(
            model,
            "incident",
            "partition_write_capacity = \"20/s\"",
            "partition_write_capacity = \"10/s\"",
        );
        let all = r.join("\n");
        assert!(all.contains("): scope.partitions.write_capacity_per_tick 2 -> 1"), "{all}");
        assert!(all.contains("policy changed: partition_write_capacity \"20/s\" -> \"10/s\""), "{all}");

        let r = explain_edit(model, "incident", "burst_writes = \"20/s\"", "burst_writes = \"10/s\"");
        assert!(
            r[0].ends_with(
                "): scope.partitions.background_writes_per_tick.p1 2 -> 1; scope.partitions.burst_writes_per_tick.p1 2 -> 1"
            ),
            "{r:?}"
        );

        let r = explain_edit(model, "fixed", "key_hash = 1", "key_hash = 2");
        assert!(
            r[0].ends_with(
                "): scope.clients.checkout-2.key_hash 1 -> 2; scope.clients.checkout-2.partition \"p2\" -> \"p3\""
            ),
            "{r:?}"
        );
    }

    #[test]
    fn the_rebalancers_inputs_and_the_churn_budget_are_recorded_and_diffed() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let model = "rebalancer-compaction.toml";
        let cert = certificate(dir.path(), &library_model(model), "incident").to_text();
        assert!(
            cert.contains(
                "[scope.rebalancer]\n\
                 disk_used_pct = { n1 = 70, n2 = 40 }\n\
                 compaction_debt_pct = { n1 = 0, n2 = 60 }\n\
                 shard_size_pct = { hot = 10 }\n\
                 hot_shards = [\"hot\"]\n\
                 slow_compaction_debt_pct = 50\n"
            ),
            "{cert}"
        );
        assert!(cert.contains(", max_changes_per_window = 2, change_window = \"5s\" }\n"), "{cert}");
        let plain = certificate(dir.path(), &library_model("basic-quorum.toml"), "default").to_text();
        assert!(!plain.contains("[scope.rebalancer]") && !plain.contains("change_window"), "{plain}");

        let r = explain_edit(model, "incident", "compaction_debt_pct = 60", "compaction_debt_pct = 40");
        assert!(r[0].ends_with("): scope.rebalancer.compaction_debt_pct.n2 60 -> 40"), "{r:?}");
        let r = explain_edit(model, "incident", "change_window = \"5s\"", "change_window = \"3s\"");
        assert!(r[0].ends_with("): scope.coordinator.change_window \"5s\" -> \"3s\""), "{r:?}");
    }

    #[test]
    fn a_derived_scope_change_with_the_same_model_file_is_named() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let old = certificate(dir.path(), &library_model("hot-partition-retry-storm.toml"), "incident");
        let mut new = old.clone();
        let partitions = new.scope.partitions.as_mut().expect("the model has partitions");
        partitions.write_capacity_per_tick = Capacity::PerTick(4);
        assert_eq!(
            explain(&old, &new),
            vec!["scope changed with the same model file: scope.partitions.write_capacity_per_tick 2 -> 4"]
        );
    }
}
