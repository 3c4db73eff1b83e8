//! `check --workers W [--processes P --process I --hostfile FILE]`: the runs of a check on
//! timely dataflow workers (see [`crate::engine::distributed`]). Every worker runs every job
//! through [`super::run_with`], so all make the same explorations in the same order; process
//! 0's worker 0 has the whole results (liveness included) and makes the report.

use super::{run_with, DistributedRun, Explorer, Job, RunOptions, RunResult};
use crate::config::ConfigError;
use crate::engine::{self, distributed::WorkerStats, EdgeLabeler, Exploration, Limits};
use crate::model::{Reduction, World};
use std::path::Path;
use std::sync::Arc;
use timely::worker::Worker;

/// Where this process is in a distributed run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Worker threads in this process.
    pub workers: usize,
    pub processes: usize,
    /// This process, 0 to `processes - 1`.
    pub process: usize,
    /// `host:port` of every process, in process order (empty for one process).
    pub addresses: Vec<String>,
    /// Frontier states per worker before the levels stop being run by every worker.
    pub shared_frontier_per_worker: usize,
}

impl Cluster {
    /// The cluster the flags describe: a hostfile of one `host:port` per line, as timely's own
    /// `--hostfile`, with at least `processes` lines (the first `processes` are used).
    pub fn new(
        workers: usize,
        processes: usize,
        process: usize,
        hostfile: Option<&Path>,
    ) -> Result<Cluster, ConfigError> {
        if workers == 0 {
            return Err(ConfigError::new(Path::new("--workers"), "0: must be at least 1"));
        }
        if processes == 0 {
            return Err(ConfigError::new(Path::new("--processes"), "0: must be at least 1"));
        }
        if process >= processes {
            return Err(ConfigError::new(
                Path::new("--process"),
                format!("{process}: must be below --processes {processes} (processes are numbered from 0)"),
            ));
        }
        let addresses = match (processes, hostfile) {
            (1, None) => Vec::new(),
            (_, None) => {
                return Err(ConfigError::new(
                    Path::new("--hostfile"),
                    format!("missing: --processes {processes} needs a hostfile (one host:port per line, in process order)"),
                ))
            }
            (_, Some(file)) => read_hostfile(file, processes)?,
        };
        Ok(Cluster {
            workers,
            processes,
            process,
            addresses,
            shared_frontier_per_worker: engine::distributed::SHARED_FRONTIER_PER_WORKER,
        })
    }

    pub fn total_workers(&self) -> usize {
        self.workers * self.processes
    }

    fn config(&self) -> timely::Config {
        let communication = if self.processes == 1 {
            timely::CommunicationConfig::Process(self.workers)
        } else {
            timely::CommunicationConfig::Cluster {
                threads: self.workers,
                process: self.process,
                addresses: self.addresses.clone(),
                report: false,
                zerocopy: false,
            }
        };
        timely::Config { communication, worker: timely::WorkerConfig::default() }
    }
}

/// The first `processes` lines of a hostfile (blank lines and `#` comments skipped), each a
/// `host:port`.
fn read_hostfile(file: &Path, processes: usize) -> Result<Vec<String>, ConfigError> {
    let flag = |m: String| ConfigError::new(file, format!("--hostfile: {m}"));
    let text = std::fs::read_to_string(file).map_err(|e| flag(format!("cannot read: {e}")))?;
    let mut addresses = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        super::args::parse_addr(line).map_err(|m| flag(format!("line {}: \"{line}\": {m}", n + 1)))?;
        addresses.push(line.to_string());
    }
    if addresses.len() < processes {
        return Err(flag(format!(
            "{} address(es), but --processes {processes} needs one host:port line per process",
            addresses.len()
        )));
    }
    addresses.truncate(processes);
    Ok(addresses)
}

/// The explorations of one timely worker.
struct TimelyExplorer<'w> {
    worker: &'w mut Worker,
    processes: usize,
    shared_frontier_per_worker: usize,
    /// The statistics of the run's explorations so far (the model's first).
    stats: Vec<WorkerStats>,
}

impl Explorer for TimelyExplorer<'_> {
    fn ample_sets(&self) -> bool {
        false
    }

    fn explore(
        &mut self,
        world: &World,
        properties: &[stateright::Property<World>],
        limits: &Limits,
        labeler: Option<EdgeLabeler<World>>,
        reduction: Reduction,
    ) -> Exploration {
        let regions = super::regions(world, reduction);
        let canonical = regions.as_ref().map(|r| r as _);
        let hooks = engine::Hooks { labeler, canonical, ample: None, compact: None };
        let (exploration, stats) = engine::distributed::explore(
            self.worker,
            world,
            properties,
            limits,
            hooks,
            self.shared_frontier_per_worker,
        );
        self.stats.push(stats);
        exploration
    }

    fn describe(&mut self, has_liveness: bool) -> Option<DistributedRun> {
        let first = self.stats.first().cloned().unwrap_or_default();
        self.stats.clear();
        Some(DistributedRun {
            processes: self.processes,
            workers: self.worker.peers(),
            liveness: has_liveness.then(|| "graph gathered to process 0".to_string()),
            shared_levels: first.shared_levels,
            states_kept_per_worker: first.kept_per_worker,
        })
    }
}

/// What one worker hands back: the check's results on process 0's worker 0, nothing elsewhere.
struct WorkerOutcome {
    results: Option<Result<Vec<RunResult>, ConfigError>>,
}

/// Why a distributed check failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The input (a model, a policy) is bad: the same error on every worker.
    #[error(transparent)]
    Input(#[from] ConfigError),
    /// The workers could not start (a port in use, a peer unreachable) or one of them died.
    #[error("{0}")]
    Runtime(String),
}

/// Run `jobs` on the cluster: the results on process 0 (`None` on the others, which make no
/// report). A job stops at the first error, on every worker alike.
pub fn run(jobs: Vec<Job>, opts: &RunOptions, cluster: &Cluster) -> Result<Option<Vec<RunResult>>, Failure> {
    let jobs = Arc::new(jobs);
    let opts = opts.clone();
    let processes = cluster.processes;
    let shared_frontier_per_worker = cluster.shared_frontier_per_worker;
    let config = cluster.config();
    // Timely prints its connection progress ("awaiting connections", "error connecting ...;
    // retrying") on stdout, where the report goes: send it to stderr while connecting.
    let _stdout_to_stderr = StdoutToStderr::new();
    let guards = timely::execute(config, move |worker| {
        let leader = worker.index() == 0;
        // Progress lines from worker 0 only.
        let opts = RunOptions { progress: opts.progress.filter(|_| leader), ..opts.clone() };
        let mut explorer =
            TimelyExplorer { worker, processes, shared_frontier_per_worker, stats: Vec::new() };
        let mut results = Vec::new();
        for job in jobs.iter() {
            // An interrupt reaches every worker through the next level's stop flag.
            match run_with(job, &opts, &mut explorer) {
                Ok(r) => results.push(r),
                Err(e) => return WorkerOutcome { results: leader.then_some(Err(e)) },
            }
        }
        WorkerOutcome { results: leader.then_some(Ok(results)) }
    })
    .map_err(|e| setup_error(cluster, e))?;
    drop(_stdout_to_stderr);
    let mut mine = None;
    for outcome in guards.join() {
        let outcome = outcome.map_err(|e| Failure::Runtime(format!("check: a timely worker failed: {e}")))?;
        if let Some(r) = outcome.results {
            mine = Some(r?);
        }
    }
    Ok(mine)
}

fn setup_error(cluster: &Cluster, message: String) -> Failure {
    let what = match cluster.addresses.get(cluster.process) {
        Some(addr) => format!("process {} of {} ({addr})", cluster.process, cluster.processes),
        None => format!("{} workers", cluster.workers),
    };
    Failure::Runtime(format!("check: cannot start the timely workers of {what}: {message}"))
}

/// While alive, file descriptor 1 (stdout) writes to stderr; dropping it puts stdout back.
struct StdoutToStderr {
    saved: libc::c_int,
}

impl StdoutToStderr {
    fn new() -> Option<StdoutToStderr> {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // SAFETY: dup and dup2 on the process's own standard descriptors; on failure nothing
        // is redirected.
        let saved = unsafe { libc::dup(1) };
        if saved < 0 {
            return None;
        }
        if unsafe { libc::dup2(2, 1) } < 0 {
            unsafe { libc::close(saved) };
            return None;
        }
        Some(StdoutToStderr { saved })
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // SAFETY: `saved` is the duplicate of stdout made in `new`, closed only here.
        unsafe {
            libc::dup2(self.saved, 1);
            libc::close(self.saved);
        }
    }
}
