//! The CI workflow a team copies (docs/examples/github-actions.yml) works in a repository
//! that holds only models and policy files (issue 36): its steps' scripts, as the workflow
//! file has them, run in a scratch git repository against the replicheck built here.

use std::path::{Path, PathBuf};
use std::process::Command;

const WORKFLOW: &str = "docs/examples/github-actions.yml";

/// One step of a job: its name and its `run` script.
struct Step {
    job: String,
    name: String,
    run: String,
}

/// The workflow's top-level `env` and every step with a `run`, in order. The file's layout is
/// the one GitHub's docs use (two-space indents, `- name:` starting a step, `run: |` blocks).
fn parse_workflow(text: &str) -> (Vec<(String, String)>, Vec<Step>) {
    let mut env = Vec::new();
    let mut steps = Vec::new();
    let (mut section, mut job, mut name) = (String::new(), String::new(), String::new());
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        i += 1;
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if indent == 0 {
            section = trimmed.trim_end_matches(':').to_string();
            continue;
        }
        if section == "env" && indent == 2 {
            let (key, value) = trimmed.split_once(':').expect("KEY: value");
            env.push((key.trim().to_string(), value.trim().to_string()));
        }
        if section == "jobs" && indent == 2 {
            job = trimmed.trim_end_matches(':').to_string();
        }
        if let Some(rest) = trimmed.strip_prefix("- ") {
            name.clear();
            if let Some(n) = rest.strip_prefix("name: ") {
                name = n.to_string();
            }
            continue;
        }
        if let Some(n) = trimmed.strip_prefix("name: ") {
            name = n.to_string();
        }
        if let Some(run) = trimmed.strip_prefix("run:") {
            let run = run.trim();
            let script = if run == "|" {
                let mut block = Vec::new();
                while i < lines.len()
                    && (lines[i].trim().is_empty() || lines[i].len() - lines[i].trim_start().len() > indent)
                {
                    block.push(lines[i].get(indent + 2..).unwrap_or(""));
                    i += 1;
                }
                block.join("\n")
            } else {
                run.to_string()
            };
            steps.push(Step { job: job.clone(), name: name.clone(), run: script });
        }
    }
    (env, steps)
}

struct Repo {
    dir: tempfile::TempDir,
    runner_temp: tempfile::TempDir,
    env: Vec<(String, String)>,
    steps: Vec<Step>,
}

impl Repo {
    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(self.dir.path())
            .args(["-c", "user.name=ci", "-c", "user.email=ci@example.com", "-c", "commit.gpgsign=false"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Run the step `name` of `job` as the workflow has it; its exit code and output.
    fn step(&self, job: &str, name: &str, base_sha: Option<&str>) -> (i32, String) {
        let step = self
            .steps
            .iter()
            .find(|s| s.job == job && s.name == name)
            .unwrap_or_else(|| panic!("{WORKFLOW} has no step `{name}` in job `{job}`"));
        let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_replicheck")).parent().unwrap().to_path_buf();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        let mut command = Command::new("bash");
        command
            .current_dir(self.dir.path())
            .args(["-e", "-c", &step.run])
            .env("PATH", path)
            .env("RUNNER_TEMP", self.runner_temp.path());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        if let Some(sha) = base_sha {
            command.env("BASE_SHA", sha);
        }
        let out = command.output().expect("bash runs");
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code().unwrap_or(-1), text)
    }
}

fn repo() -> Repo {
    let (env, steps) = parse_workflow(&std::fs::read_to_string(WORKFLOW).expect("the workflow"));
    let repo =
        Repo { dir: tempfile::tempdir().unwrap(), runner_temp: tempfile::tempdir().unwrap(), env, steps };
    repo.git(&["init", "-q"]);
    let models = repo.env.iter().find(|(k, _)| k == "MODELS").expect("MODELS in env").1.clone();
    let model = std::fs::read_to_string(Path::new("tests/data/small-quorum.toml")).unwrap();
    repo.write(&format!("{models}/small.toml"), &model);
    repo
}

#[test]
fn the_workflow_runs_in_a_repository_of_only_models_and_policies() {
    let repo = repo();
    assert!(repo.steps.iter().any(|s| s.name == "Install replicheck" && s.run.contains("--git")));
    repo.write("policies/prod.toml", "write_quorum = 2\n");
    repo.write("policies/old.toml", "write_quorum = 2\n");
    let base = repo.commit("models and policies");

    // The library job: verdicts as JUnit; no proofs/ yet is said, not failed.
    let (code, out) = repo.step("models", "Check the model library", None);
    assert_eq!(code, 0, "{out}");
    let junit = std::fs::read_to_string(repo.dir.path().join("replicheck-junit.xml")).unwrap();
    assert!(junit.contains("<testsuites") && junit.contains("small_quorum"), "{junit}");
    let (code, out) = repo.step("models", "Verify the certificates", None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no proofs/ yet: run 'replicheck prove models'"), "{out}");
    // Created as the step says, the certificates are verified.
    let prove = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(repo.dir.path())
        .args(["prove", "models", "--quiet"])
        .output()
        .unwrap();
    assert!(prove.status.success(), "{}", String::from_utf8_lossy(&prove.stderr));
    let (code, out) = repo.step("models", "Verify the certificates", None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("certificates in proofs match"), "{out}");

    // A pull request: prod.toml weakened, old.toml deleted, new.toml added.
    repo.write("policies/prod.toml", "write_quorum = 1\n");
    std::fs::remove_file(repo.dir.path().join("policies/old.toml")).unwrap();
    repo.write("policies/new.toml", "write_quorum = 2\n");
    let head = repo.commit("weaken prod");
    let (code, out) = repo.step("policy-change", "Lint and compare changed policies", Some(&base));
    assert_eq!(code, 1, "the regression fails the job:\n{out}");
    assert!(
        out.contains("::group::policies/prod.toml") && out.contains("::group::policies/new.toml"),
        "{out}"
    );
    assert!(!out.contains("old.toml"), "a deleted policy has nothing to check:\n{out}");
    assert!(out.contains("acked_writes_persist"), "the regression is named:\n{out}");

    // Restored, it is a fix against the weakened base: the job passes.
    repo.write("policies/prod.toml", "write_quorum = 2\n");
    repo.commit("restore prod");
    let (code, out) = repo.step("policy-change", "Lint and compare changed policies", Some(&head));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("::group::policies/prod.toml") && !out.contains("new.toml"), "{out}");
}
