//! `prove` (write every variant's certificate) and `prove --verify` (check every certificate
//! against a fresh run), with their reports.

use super::cert::Certificate;
use super::explain::{explain, format_changed};
use super::{
    certificate_path, certificates_in, parse_certificate, planned, read_text, same_file, Content, OnDisk,
    Planned, FORMAT,
};
use crate::check::{model_files, RunOptions, RunResult};
use crate::config::ConfigError;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// What `prove` did with one certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    Created,
    Updated,
    Unchanged,
}

#[derive(Debug)]
pub struct ProveReport {
    pub out: PathBuf,
    pub results: Vec<RunResult>,
    pub certificates: Vec<(PathBuf, Written)>,
    /// Certificates of the proved models for variants they no longer have.
    pub removed: Vec<PathBuf>,
}

impl ProveReport {
    /// As `check`: 1 if a verdict differs from the model's declaration, 3 if a run was cut
    /// short by a limit, else 0. The certificates are written in every case, recording what
    /// was found.
    pub fn exit_code(&self) -> u8 {
        crate::check::exit_code(&self.results)
    }

    pub fn human(&self) -> String {
        let mut out = String::new();
        for (path, w) in &self.certificates {
            let what = match w {
                Written::Created => "created",
                Written::Updated => "updated",
                Written::Unchanged => "unchanged",
            };
            let _ = writeln!(out, "{what:<9} {}", path.display());
        }
        for path in &self.removed {
            let _ = writeln!(out, "{:<9} {} (its variant is gone)", "removed", path.display());
        }
        let count = |w: Written| self.certificates.iter().filter(|(_, x)| *x == w).count();
        let _ = writeln!(
            out,
            "{} certificates in {}: {} created, {} updated, {} unchanged, {} removed",
            self.certificates.len(),
            self.out.display(),
            count(Written::Created),
            count(Written::Updated),
            count(Written::Unchanged),
            self.removed.len()
        );
        match self.exit_code() {
            1 => out.push_str(
                "FAIL: a verdict differs from the model's declared expectation (see the certificates' [verdicts]; `replicheck check` shows the counterexamples)\n",
            ),
            3 => out.push_str(
                "INCOMPLETE: a run was cut short by a limit (states or memory); its certificates record verdicts as unknown\n",
            ),
            _ => {}
        }
        out
    }
}

/// One line per finished run, as `check` prints them.
fn run_line(r: &RunResult, cert: &Path) -> String {
    let verdict = if r.as_expected() { "ok" } else { "FAIL" };
    format!(
        "{verdict}: {} / {} ({} states, {:.2}s) -> {}",
        r.model,
        r.variant,
        r.unique_states,
        r.elapsed_ms as f64 / 1000.0,
        cert.display()
    )
}

/// Check every variant of the models in `paths` and write its certificate under `out`.
/// Certificates in `out/MODEL/` of the same model file for variants it no longer has are
/// removed. `on_run` receives one line per finished run.
pub fn prove(
    paths: &[PathBuf],
    out: &Path,
    opts: &RunOptions,
    on_run: &mut dyn FnMut(&str),
) -> Result<ProveReport, ConfigError> {
    let files = model_files(paths)?;
    let planned = planned(&files, out)?;
    let mut report = ProveReport {
        out: out.to_path_buf(),
        results: Vec::new(),
        certificates: Vec::new(),
        removed: Vec::new(),
    };
    for p in &planned {
        let model_text = read_text(&p.job.scenario.path)?;
        let result = crate::check::run(&p.job, &unreduced(opts))?;
        let text = Certificate::new(&p.job, &result, &model_text)?.to_text();
        on_run(&run_line(&result, &p.path));
        let before = std::fs::read_to_string(&p.path).ok();
        let written = match before {
            Some(b) if b == text => Written::Unchanged,
            Some(_) => Written::Updated,
            None => Written::Created,
        };
        if written != Written::Unchanged {
            let dir = p.path.parent().expect("a certificate path has a directory");
            std::fs::create_dir_all(dir)
                .map_err(|e| ConfigError::new(dir, format!("cannot create directory: {e}")))?;
            std::fs::write(&p.path, &text)
                .map_err(|e| ConfigError::new(&p.path, format!("cannot write: {e}")))?;
        }
        report.certificates.push((p.path.clone(), written));
        report.results.push(result);
    }
    // Stale certificates of the models just proved: same model file, a variant it lost.
    let current: BTreeSet<&Path> = planned.iter().map(|p| p.path.as_path()).collect();
    for path in certificates_in(out)? {
        if current.contains(path.as_path()) {
            continue;
        }
        let Ok(cert) = parse_certificate(&path) else {
            continue;
        };
        let ours = files.iter().any(|f| same_file(f, &cert.model_file));
        if ours {
            std::fs::remove_file(&path)
                .map_err(|e| ConfigError::new(&path, format!("cannot remove: {e}")))?;
            report.removed.push(path);
        }
    }
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// prove --verify

/// Why a certificate does not match what the tool finds now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A variant of a checked model has no certificate.
    Missing { model_file: PathBuf, variant: String },
    /// A certificate that no current model variant writes.
    Stale { why: String },
    /// A file where a certificate belongs that is not one (corrupt, or edited into invalid
    /// TOML, or a merge conflict).
    Unreadable { why: String },
    /// The certificate differs from a fresh run: one reason per line.
    Differs { reasons: Vec<String> },
}

#[derive(Clone, Debug)]
pub struct Finding {
    pub certificate: PathBuf,
    pub problem: Option<Problem>,
}

#[derive(Debug)]
pub struct VerifyReport {
    pub out: PathBuf,
    pub paths: Vec<PathBuf>,
    pub findings: Vec<Finding>,
}

impl VerifyReport {
    pub fn mismatches(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.problem.is_some())
    }

    /// 0 when every certificate matches, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.mismatches().next().is_some() {
            1
        } else {
            0
        }
    }

    pub fn human(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let path = f.certificate.display();
            match &f.problem {
                None => {
                    let _ = writeln!(out, "ok        {path}");
                }
                Some(Problem::Missing { model_file, variant }) => {
                    let _ = writeln!(
                        out,
                        "MISSING   {path}: no certificate for variant \"{variant}\" of {}",
                        model_file.display()
                    );
                }
                Some(Problem::Stale { why }) => {
                    let _ = writeln!(out, "STALE     {path}: {why}");
                }
                Some(Problem::Unreadable { why }) => {
                    let _ = writeln!(
                        out,
                        "UNREADABLE {path}: {why} (delete it, or regenerate it with `replicheck prove`)"
                    );
                }
                Some(Problem::Differs { reasons }) => {
                    let _ = writeln!(out, "MISMATCH  {path}:");
                    for r in reasons {
                        let _ = writeln!(out, "            - {r}");
                    }
                }
            }
        }
        let bad = self.mismatches().count();
        let total = self.findings.len();
        if bad == 0 {
            let _ = writeln!(out, "all {total} certificates in {} match", self.out.display());
        } else {
            let paths: Vec<String> = self.paths.iter().map(|p| p.display().to_string()).collect();
            let _ = writeln!(
                out,
                "{bad} of {total} certificates in {} do not match; if the change is intended, regenerate them with `replicheck prove {} --out {}` and review the diff",
                self.out.display(),
                paths.join(" "),
                self.out.display()
            );
        }
        out
    }
}

/// Re-run every certificate under `out` and every variant of the models in `paths`, and say
/// for each certificate whether it still matches.
pub fn verify(
    paths: &[PathBuf],
    out: &Path,
    opts: &RunOptions,
    on_run: &mut dyn FnMut(&str),
) -> Result<VerifyReport, ConfigError> {
    let mut files = model_files(paths)?;
    let mut findings = Vec::new();
    let mut on_disk: Vec<OnDisk> = Vec::new();
    let mut unreadable: BTreeSet<PathBuf> = BTreeSet::new();
    for path in certificates_in(out)? {
        match parse_certificate(&path) {
            Ok(cert) => on_disk.push(cert),
            Err(e) => {
                unreadable.insert(path.clone());
                findings.push(Finding {
                    certificate: path,
                    problem: Some(Problem::Unreadable { why: e.message }),
                });
            }
        }
    }
    // A certificate of a model outside `paths` is checked too, against its own model file.
    let mut gone: BTreeSet<PathBuf> = BTreeSet::new();
    for cert in &on_disk {
        if files.iter().any(|f| same_file(f, &cert.model_file)) {
            continue;
        }
        if cert.model_file.exists() {
            files.push(cert.model_file.clone());
        } else {
            gone.insert(cert.model_file.clone());
        }
    }
    let planned = planned(&files, out)?;
    let by_path: BTreeMap<&Path, &OnDisk> = on_disk.iter().map(|c| (c.path.as_path(), c)).collect();
    for p in planned.iter().filter(|p| !unreadable.contains(&p.path)) {
        let problem = match by_path.get(p.path.as_path()) {
            Some(cert) => check_one(p, cert, opts, on_run)?,
            None => Some(Problem::Missing {
                model_file: p.job.scenario.path.clone(),
                variant: p.job.variant.clone(),
            }),
        };
        findings.push(Finding { certificate: p.path.clone(), problem });
    }
    let expected: BTreeSet<&Path> = planned.iter().map(|p| p.path.as_path()).collect();
    for cert in on_disk.iter().filter(|c| !expected.contains(c.path.as_path())) {
        let why = stale_reason(cert, &planned, &gone, out);
        findings.push(Finding { certificate: cert.path.clone(), problem: Some(Problem::Stale { why }) });
    }
    findings.sort_by(|a, b| a.certificate.cmp(&b.certificate));
    Ok(VerifyReport { out: out.to_path_buf(), paths: paths.to_vec(), findings })
}

/// Run one planned variant and compare what it finds with its certificate on disk.
fn check_one(
    p: &Planned,
    cert: &OnDisk,
    opts: &RunOptions,
    on_run: &mut dyn FnMut(&str),
) -> Result<Option<Problem>, ConfigError> {
    let model_text = read_text(&p.job.scenario.path)?;
    let result = crate::check::run(&p.job, &unreduced(opts))?;
    let mut fresh = Certificate::new(&p.job, &result, &model_text)?;
    if let Content::Current(old) = &cert.content {
        let by_memory = matches!(result.cut, Some(crate::engine::Cut::MemoryLimit { .. }));
        fresh.exploration.counts_at_the_same_memory_cut(by_memory, &old.exploration);
    }
    let problem = match &cert.content {
        Content::Current(old) if **old == fresh => None,
        Content::Current(old) => Some(Problem::Differs { reasons: explain(old, &fresh) }),
        Content::OtherFormat(format) => {
            Some(Problem::Differs { reasons: vec![format_changed(*format, FORMAT)] })
        }
    };
    let mark = if problem.is_none() { "ok" } else { "MISMATCH" };
    on_run(&format!(
        "{mark}: {} / {} ({} states, {:.2}s) {}",
        result.model,
        result.variant,
        result.unique_states,
        result.elapsed_ms as f64 / 1000.0,
        p.path.display()
    ));
    Ok(problem)
}

/// Why no current model variant writes this certificate.
fn stale_reason(cert: &OnDisk, planned: &[Planned], gone: &BTreeSet<PathBuf>, out: &Path) -> String {
    if gone.contains(&cert.model_file) {
        return format!(
            "its model file {} no longer exists; delete the certificate",
            cert.model_file.display()
        );
    }
    let Some(p) = planned.iter().find(|p| same_file(&p.job.scenario.path, &cert.model_file)) else {
        return "no model variant writes this certificate".to_string();
    };
    let model = &p.job.scenario;
    if model.variant(&cert.variant).is_none() {
        format!(
            "{} has no variant \"{}\" any more (variants: {}); `replicheck prove {}` removes it",
            model.path.display(),
            cert.variant,
            model.variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", "),
            model.path.display()
        )
    } else {
        format!(
            "{} (model \"{}\") writes this variant's certificate to {}; delete this one",
            model.path.display(),
            model.name,
            certificate_path(out, &model.name, &cert.variant).display()
        )
    }
}

/// Certificates record the full state graph's counts, whatever reduction a check would use:
/// a certificate then changes only when the model or the sources do.
fn unreduced(opts: &RunOptions) -> RunOptions {
    RunOptions { reduction: crate::model::Reduction::None, ..opts.clone() }
}
