//! `replicheck store ...`: start a local cluster, run one node (internal), measure.

use crate::config::{self, Policy, SourcedPolicy};
use crate::policy::leader::Replication;
use crate::policy::NodeId;
use crate::store::bench::BenchConfig;
use crate::store::cluster::{Cluster, ClusterConfig, VALUE_BYTES_MAX_DEFAULT};
use crate::store::coordinator::clients::{self, ClientLimits};
use crate::store::coordinator::layout::{Layout, LoadFacts, PARTITIONS_MAX, WINDOW_MS_DEFAULT};
use crate::store::leader::cluster::{LeaderCluster, LeaderConfig};
use crate::store::StoreError;
use clap::Subcommand;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum StoreCommand {
    /// Start a local cluster: node processes and a coordinator serving RESP (redis-cli,
    /// redis-benchmark) until Ctrl-C, SIGTERM or SIGHUP, which stop the nodes. Started again
    /// on the same --data-dir, it restores the membership it had.
    Up {
        #[arg(long, default_value = "3", help = format!(
            "Storage nodes, 1 to {}; those beyond the replication factor are spares for eviction",
            crate::policy::NODE_COUNT_MAX
        ))]
        nodes: usize,
        /// A policy file (as for `check --policy`); durations are real milliseconds.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Overrides the policy's replication_factor.
        #[arg(long)]
        replication_factor: Option<u8>,
        /// The protocol family (default: the policy's `replication`, else quorum). `leader`: a
        /// primary per partition replicates to its followers, and the coordinator fails over
        /// (docs/reference.md#the-leader-family).
        #[arg(long, value_parser = ["quorum", "leader"])]
        replication: Option<String>,
        /// Partitions, each with its own replica set (partition i on nodes i, i+1, ...); a
        /// key's prefix (before `:`) picks its partition: `s2:x` is on s2, other prefixes hash.
        #[arg(long, default_value = "1")]
        partitions: usize,
        /// Each node's zone, comma-separated ("a,a,b"); replacements prefer the evicted
        /// node's zone. Default: all in one zone.
        #[arg(long, value_delimiter = ',')]
        zones: Vec<String>,
        /// Each node's ingest capacity as an ingest backend, comma-separated rates ("30/s,40/s,
        /// unlimited"): writes are then placed on backends by the policy's `placement`.
        #[arg(long, value_delimiter = ',')]
        write_capacity: Vec<String>,
        /// Each node's ingest load from traffic outside the store, comma-separated rates.
        #[arg(long, value_delimiter = ',')]
        base_load: Vec<String>,
        /// Replicas each node can hold at most (0 to 255), comma-separated, one per node, or
        /// one for every node ("1"); `unlimited` is allowed. A replacement needs a free slot.
        #[arg(long, value_delimiter = ',')]
        replica_slots: Vec<String>,
        /// Where nodes keep their data (node-N/ below it); default: a new directory under the
        /// system's temporary directory.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// The client (RESP) port on 127.0.0.1; coordinator i serves clients on this port + i.
        #[arg(long, default_value = "6379")]
        port: u16,
        /// Coordinators, each serving clients (at most 4). The first leads membership: the
        /// others propose evictions to it and learn each change from it (docs/reference.md#several-coordinators).
        #[arg(long, default_value = "1")]
        coordinators: usize,
        /// Largest value (and any argument) a client may send, in bytes (at least 64).
        #[arg(long, default_value_t = VALUE_BYTES_MAX_DEFAULT)]
        value_bytes_max: usize,
        /// Open client connections at most; one more is answered "max number of clients
        /// reached" and closed.
        #[arg(long, default_value_t = clients::CONNECTIONS_MAX_DEFAULT)]
        connections_max: usize,
        /// Close a client connection that neither sends nor reads its replies for this long
        /// ("5m", "30s"; "0s": never).
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        idle_timeout: Duration,
        /// Request bytes read but not yet executed, over all client connections; the
        /// connection that would pass it is answered "busy" and closed.
        #[arg(long, default_value_t = clients::REQUEST_BYTES_MAX_DEFAULT)]
        request_bytes_max: usize,
        /// Log every policy decision to this file (JSON lines) for `replicheck conform`.
        #[arg(long)]
        decision_log: Option<PathBuf>,
        /// Recreate node N's data, which is gone (its node.redb missing, emptied or replaced),
        /// from its partitions' other replicas before the cluster starts; repeatable. Without
        /// it such a node is refused: served as it is, it would lose what it acknowledged.
        #[arg(long = "rebuild-node", value_name = "N")]
        rebuild_nodes: Vec<crate::policy::NodeId>,
    },
    /// A leader-family storage node, as `store up --replication leader` starts it.
    #[command(hide = true)]
    LeaderNode {
        #[arg(long)]
        id: crate::policy::NodeId,
        #[arg(long)]
        data_dir: PathBuf,
        /// A listening socket on the node's address, inherited from `store up`.
        #[arg(long)]
        listen_fd: Option<i32>,
    },
    /// Run a model's environment against the store: its nodes, zones and link latencies (model
    /// ticks scaled to real milliseconds), its fault menu over time, client load, then heal and
    /// check (acked writes readable, linearizability per key, duplicate effects, evictions),
    /// beside the model's verdicts for the same policy. Exit 1 if the store violates a property
    /// the model says holds.
    Run {
        /// A model file (models/*.toml).
        model: std::path::PathBuf,
        /// The model's variant whose policy to run (default: its first).
        #[arg(long, conflicts_with = "policy")]
        variant: Option<String>,
        /// A policy file over the model's [policy] instead of a variant.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Real milliseconds per model tick (default: the model's tick).
        #[arg(long = "time-scale", value_name = "MS_PER_TICK")]
        time_scale: Option<u64>,
        /// How long the load runs ("4s", "1m").
        #[arg(long, default_value = "4s", value_parser = humantime::parse_duration)]
        duration: std::time::Duration,
        /// Client threads (default 3). A model with a capacity has one thread per model client,
        /// since a client's rate of writes is part of what is checked: `--clients` is refused
        /// there unless it says that number.
        #[arg(long)]
        clients: Option<usize>,
        /// Keys the clients share.
        #[arg(long, default_value = "3")]
        keys: usize,
        /// Share of writes among operations, in thousandths.
        #[arg(long, default_value = "500")]
        write_permille: u16,
        /// The model's verdicts: explore the model now (`check`), take the variant's declared
        /// verdicts (`declared`), or none (`skip`).
        #[arg(long, value_enum, default_value = "check")]
        model_verdicts: crate::store::run::ModelVerdicts,
        /// Keep the store's decision log here (for `replicheck conform`).
        #[arg(long)]
        decision_log: Option<PathBuf>,
        /// Write the clients' history here as Jepsen EDN (`replicheck history check` reads it,
        /// as do Knossos, Elle and Porcupine); a picture of a non-linearizable one goes beside
        /// it (`.html`).
        #[arg(long)]
        history: Option<PathBuf>,
        /// Keep the coordinator's trace here (JSON lines; `replicheck conform TRACE --model M`
        /// checks it against the model's latencies and faults, as the run's report does). With
        /// `--replay`: the simulated store's trace, of either family.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Seed for the proxies' delays and losses, the clients' choices and how long each
        /// fault with a `duration` lasts.
        #[arg(long, default_value = "1")]
        seed: u64,
        /// For a rollout variant: the order in which the coordinators take each stage, by
        /// name ("cb,ca": cb is the canary). Default: as `[[coordinators]]` lists them.
        #[arg(long, value_delimiter = ',')]
        rollout_order: Vec<String>,
        /// The faults to apply, in order, from the model's menu: `crash:NODE`,
        /// `crash:coordinator`, `partition:ZONE`, `degrade:ZONE-ZONE`, `drop`, or `none`
        /// (at most `faults.budget`). Default: one of each kind, up to the budget.
        #[arg(long, value_delimiter = ',')]
        faults: Vec<String>,
        /// Replay a counterexample of the model on the store instead: the one `check` finds
        /// for PROPERTY, or the first in FILE (`check --format json`). It is played on `store
        /// sim`'s simulated network and clock, where each message can be delivered or lost at
        /// the trace's moment (as `store sim MODEL --replay`). Exit 0 if the store shows the
        /// same violation, 1 if not.
        #[arg(long, value_name = "PROPERTY|FILE", conflicts_with_all = [
            "faults", "clients", "rollout_order", "decision_log", "seed", "duration", "keys",
            "write_permille", "model_verdicts",
        ])]
        replay: Option<String>,
    },
    /// The store's own code (the coordinator's shell and machine, each node's storage, the
    /// clients and the checks of `store run`) on a simulated network and clock, in one
    /// process: each seed draws a fault schedule from the model's menu and the same seed gives
    /// the same run, byte for byte. Prints each seed that violates a property, and the first
    /// that violates one the variant expects to hold. Exit 1 if a seed did.
    Sim(crate::store::sim::SimRequest),
    /// Replicated write throughput and latency: a fresh local cluster (fsync on every node),
    /// `--concurrency` connections sending SETs of `--value-size` bytes for `--duration`.
    Bench {
        #[arg(long, default_value = "100")]
        value_size: usize,
        #[arg(long, default_value = "16")]
        concurrency: usize,
        /// How long to write, e.g. "10s".
        #[arg(long, default_value = "10s")]
        duration: String,
        #[arg(long, default_value = "3")]
        nodes: usize,
        /// A policy file; default: replication_factor 3, write_quorum 2.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// The protocol family, as for `store up` (default: the policy's, else quorum).
        #[arg(long, value_parser = ["quorum", "leader"])]
        replication: Option<String>,
    },
    /// (internal) One storage node; `store up` spawns these.
    #[command(hide = true)]
    Node {
        #[arg(long)]
        id: u8,
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        data_dir: PathBuf,
    },
}

/// The policy for a store of `node_count` nodes: a policy file (or the defaults) with
/// `replication_factor` optionally overridden, durations in milliseconds.
pub fn store_policy(
    path: Option<&Path>,
    replication_factor: Option<u8>,
    node_count: usize,
) -> Result<Policy, String> {
    store_policy_sourced(path, replication_factor, node_count).map(|(policy, _)| policy)
}

fn store_policy_sourced(
    path: Option<&Path>,
    replication_factor: Option<u8>,
    node_count: usize,
) -> Result<(Policy, SourcedPolicy), String> {
    let mut sourced = match path {
        Some(path) => config::load_policy(path).map_err(|e| e.to_string())?,
        None => SourcedPolicy::default(),
    };
    if let Some(rf) = replication_factor {
        let patch = config::PolicyPatch { replication_factor: Some(rf), ..Default::default() };
        sourced = sourced.then(&SourcedPolicy::new(patch, "--replication-factor"));
    }
    let policy = sourced.resolve_ms()?;
    if usize::from(policy.replication_factor) > node_count {
        return Err(format!(
            "{}: key `replication_factor` = {}: exceeds --nodes {node_count}",
            sourced.origin("replication_factor"),
            policy.replication_factor
        ));
    }
    crate::store::coordinator::machine::policy_timers_fit(&policy)
        .map_err(|(key, ms)| crate::store::coordinator::machine::timer_too_long(&sourced, key, ms))?;
    Ok((policy, sourced))
}

/// `store up`'s partitions and capacities: `partitions` spread round-robin over the nodes,
/// the policy's partition and table capacities counted per 100 ms window.
pub fn store_layout(
    sourced: &SourcedPolicy,
    policy: &Policy,
    partitions: usize,
    node_count: usize,
    backends: &BackendFlags,
) -> Result<Layout, String> {
    if partitions == 0 || partitions > PARTITIONS_MAX {
        return Err(format!("--partitions {partitions}: must be 1 to {PARTITIONS_MAX}"));
    }
    let mut layout = Layout::round_robin(partitions, node_count, policy.replication_factor);
    layout.partition_write_capacity_per_window = sourced.rate_per_tick(
        "partition_write_capacity",
        &policy.partition_write_capacity,
        WINDOW_MS_DEFAULT,
    )?;
    layout.table_write_capacity_per_window =
        sourced.rate_per_tick("table_write_capacity", &policy.table_write_capacity, WINDOW_MS_DEFAULT)?;
    layout.node_write_capacity_per_window =
        per_node_rates("--write-capacity", &backends.write_capacity, node_count, true)?;
    layout.node_base_load_per_window = per_node_rates("--base-load", &backends.base_load, node_count, false)?
        .into_iter()
        .map(|load| load.expect("no `unlimited` base load"))
        .collect();
    layout.node_replica_slots = per_node_slots(&backends.replica_slots, node_count)?;
    layout.check(node_count, policy.replication_factor)?;
    Ok(layout)
}

/// `store up`'s per-node ingest capacities, base loads and replica slots, as written.
#[derive(Clone, Debug, Default)]
pub struct BackendFlags {
    pub write_capacity: Vec<String>,
    pub base_load: Vec<String>,
    pub replica_slots: Vec<String>,
}

/// `--replica-slots`: one count per node, or one for all (empty: unlimited).
fn per_node_slots(slots: &[String], node_count: usize) -> Result<Vec<Option<u8>>, String> {
    let parse = |text: &String| -> Result<Option<u8>, String> {
        match text.trim() {
            "unlimited" => Ok(None),
            t => t.parse::<u8>().map(Some).map_err(|_| {
                format!("--replica-slots {text}: a count of replicas, 0 to 255, or \"unlimited\"")
            }),
        }
    };
    let parsed = slots.iter().map(parse).collect::<Result<Vec<_>, _>>()?;
    match parsed.len() {
        0 => Ok(Vec::new()),
        1 => Ok(vec![parsed[0]; node_count]),
        n if n == node_count => Ok(parsed),
        n => Err(format!(
            "--replica-slots has {n} values for {node_count} nodes: give one per node, or one for all"
        )),
    }
}

/// One rate per node, in writes per 100 ms window (`None`: `unlimited`, where allowed).
fn per_node_rates(
    flag: &str,
    rates: &[String],
    node_count: usize,
    unlimited_ok: bool,
) -> Result<Vec<Option<u16>>, String> {
    if rates.is_empty() {
        return Ok(Vec::new());
    }
    if rates.len() != node_count {
        return Err(format!("{flag} lists {} rates for --nodes {node_count}: one per node", rates.len()));
    }
    rates
        .iter()
        .enumerate()
        .map(|(node, text)| {
            if unlimited_ok && text.trim() == "unlimited" {
                return Ok(None);
            }
            let rate =
                config::duration::Rate::parse(text).map_err(|e| format!("{flag} (node {node}): {e}"))?;
            rate.per_tick(WINDOW_MS_DEFAULT)
                .map(Some)
                .map_err(|e| format!("{flag} \"{text}\" (node {node}): {e}"))
        })
        .collect()
}

/// Zone indices from zone names, numbered in order of first appearance.
fn zone_indices(zones: &[String], node_count: usize) -> Result<Vec<u8>, String> {
    if zones.is_empty() {
        return Ok(vec![0; node_count]);
    }
    if zones.len() != node_count {
        return Err(format!("--zones lists {} zones for --nodes {node_count}: one per node", zones.len()));
    }
    let mut names: Vec<&str> = Vec::new();
    zones
        .iter()
        .map(|z| {
            let z = z.trim();
            if z.is_empty() {
                return Err("--zones: an empty zone name".to_string());
            }
            let i = names.iter().position(|n| *n == z).unwrap_or_else(|| {
                names.push(z);
                names.len() - 1
            });
            u8::try_from(i).map_err(|_| "--zones: more than 256 zones".to_string())
        })
        .collect()
}

/// A panic in any of the store's tasks (a coordinator's clock, a link, a node's handler) ends
/// the process, with the panic's message, instead of leaving tokio to drop that task while the
/// rest serves on: a coordinator that stopped mid-step holds half-updated state, and what it
/// then answers was never checked. The nodes die with it (parent-death signal); what they
/// stored survives, as after a SIGKILL.
fn stop_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        eprintln!("replicheck store: a task panicked; stopping the process rather than serve on without it");
        std::process::abort();
    }));
}

/// Run a store command. `check_model` explores a model for `store run --model-verdicts
/// check` (see [`crate::store::run::ModelChecker`]); `plan_replay` finds and plans the
/// counterexample of `--replay` (see [`crate::store::sim::ReplayPlanner`]).
/// `interrupt`: set by the first SIGINT or SIGTERM (the caller's handler); `store run` then
/// stops early and reports what ran.
pub fn run(
    command: StoreCommand,
    check_model: crate::store::run::ModelChecker,
    plan_replay: crate::store::sim::ReplayPlanner,
    interrupt: Option<&'static std::sync::atomic::AtomicBool>,
) -> Result<u8, StoreError> {
    stop_on_panic();
    match command {
        StoreCommand::Node { id, listen, data_dir } => {
            crate::store::node::run(id, listen, &data_dir)
                .map_err(|e| StoreError::Runtime(format!("node {id}: {e}")))?;
            Ok(0)
        }
        StoreCommand::Run {
            model,
            variant,
            policy,
            time_scale,
            history,
            trace,
            replay: Some(replay),
            ..
        } => {
            // `store sim --replay`'s defaults: the same replay prints the same report.
            let request = crate::store::sim::SimRequest {
                ms_per_tick: time_scale,
                history,
                trace,
                ..crate::store::sim::SimRequest::replay(model, variant, policy, replay)
            };
            sim(&request, plan_replay)
        }
        StoreCommand::Run {
            model,
            variant,
            policy,
            time_scale,
            duration,
            clients,
            keys,
            write_permille,
            model_verdicts,
            decision_log,
            history,
            trace,
            seed,
            rollout_order,
            faults,
            replay: None,
        } => {
            let request = crate::store::run::RunRequest {
                model,
                variant,
                policy,
                ms_per_tick: time_scale,
                duration,
                clients,
                keys,
                write_permille,
                model_verdicts,
                decision_log,
                history,
                trace,
                seed,
                faults,
                rollout_order,
                binary: this_binary()?,
                interrupt,
            };
            let mut out = String::new();
            let result = crate::store::run::run(&request, check_model, &mut out);
            emit(&out);
            let (outcome, model) = result?;
            Ok(crate::store::run::exit_code(&outcome, &model))
        }
        StoreCommand::Sim(request) => sim(&request, plan_replay),
        StoreCommand::Bench { value_size, concurrency, duration, nodes, policy, replication } => {
            let leader = leader_family(replication.as_deref(), policy.as_deref())?;
            bench(value_size, concurrency, &duration, nodes, policy.as_deref(), leader)
        }
        StoreCommand::LeaderNode { id, data_dir, listen_fd } => {
            crate::store::leader::node::run(id, &data_dir, listen_fd)
                .map_err(|e| StoreError::Runtime(format!("node {id}: {e}")))?;
            Ok(0)
        }
        StoreCommand::Up {
            nodes,
            policy,
            replication_factor,
            replication,
            partitions,
            zones,
            write_capacity,
            base_load,
            replica_slots,
            data_dir,
            port,
            coordinators,
            value_bytes_max,
            connections_max,
            idle_timeout,
            request_bytes_max,
            decision_log,
            rebuild_nodes,
        } => {
            let clients = ClientLimits {
                value_bytes_max,
                connections_max,
                idle_timeout_ms: u64::try_from(idle_timeout.as_millis()).unwrap_or(u64::MAX),
                request_bytes_max,
            };
            clients.check().map_err(StoreError::Input)?;
            let leader = leader_family(replication.as_deref(), policy.as_deref())?;
            if leader {
                let unsupported = [
                    ("--coordinators", coordinators != 1),
                    ("--write-capacity", !write_capacity.is_empty()),
                    ("--base-load", !base_load.is_empty()),
                    ("--replica-slots", !replica_slots.is_empty()),
                    ("--decision-log", decision_log.is_some()),
                    ("--rebuild-node", !rebuild_nodes.is_empty()),
                ];
                if let Some((flag, _)) = unsupported.iter().find(|(_, set)| *set) {
                    return Err(StoreError::Input(format!(
                        "{flag}: not with replication = \"leader\" (one coordinator, the failover manager, routes every request; capacities, decision logs and rebuilds are the quorum family's)"
                    )));
                }
                let config = LeaderConfig {
                    binary: this_binary()?,
                    node_count: nodes,
                    node_zones: zone_indices(&zones, nodes).map_err(StoreError::Input)?,
                    partitions,
                    replication_factor,
                    policy_file: policy,
                    data_dir: data_dir.unwrap_or_else(|| {
                        std::env::temp_dir().join(format!("replicheck-store-{}", std::process::id()))
                    }),
                    client_addr: SocketAddr::from(([127, 0, 0, 1], port)),
                    clients,
                    link_proxy_seed: None,
                    model: None,
                };
                return up_leader(config);
            }
            let (policy, sourced) = store_policy_sourced(policy.as_deref(), replication_factor, nodes)
                .map_err(StoreError::Input)?;
            let backends = BackendFlags { write_capacity, base_load, replica_slots };
            let layout =
                store_layout(&sourced, &policy, partitions, nodes, &backends).map_err(StoreError::Input)?;
            let node_zones = zone_indices(&zones, nodes).map_err(StoreError::Input)?;
            let data_dir = data_dir.unwrap_or_else(|| {
                std::env::temp_dir().join(format!("replicheck-store-{}", std::process::id()))
            });
            let config = ClusterConfig {
                binary: this_binary()?,
                node_count: nodes,
                node_zones,
                layout,
                policy,
                data_dir,
                client_addr: SocketAddr::from(([127, 0, 0, 1], port)),
                clients,
                decision_log,
                proxy_seed: 0,
                // Nothing sets faults on `store up`'s links: the coordinator dials its nodes.
                link_proxies: false,
                load: LoadFacts::default(),
                membership: None,
                trace: None,
                rebuild_nodes,
                coordinator_zones: vec![0; coordinators],
                epoch: std::time::Instant::now(),
            };
            up(config, &sourced)
        }
    }
}

/// Whether `--replication` (or else the policy file's `replication`) asks for the leader family.
fn leader_family(flag: Option<&str>, policy: Option<&Path>) -> Result<bool, StoreError> {
    let policy_family = match policy {
        Some(path) => config::load_policy(path)?.patch.replication,
        None => None,
    };
    match flag {
        Some("leader") => Ok(true),
        Some(_) if policy_family == Some(Replication::Leader) => Err(StoreError::Input(format!(
            "--replication quorum: {} sets replication = \"leader\"",
            policy.unwrap_or(Path::new("")).display()
        ))),
        Some(_) => Ok(false),
        None => Ok(policy_family == Some(Replication::Leader)),
    }
}

/// The running replicheck binary: node processes are started from it.
fn this_binary() -> Result<PathBuf, StoreError> {
    std::env::current_exe()
        .map_err(|e| StoreError::Runtime(format!("cannot find the replicheck binary: {e}")))
}

/// `store bench`: a write load on a fresh cluster, then throughput and latency.
fn bench(
    value_size: usize,
    concurrency: usize,
    duration: &str,
    nodes: usize,
    policy_file: Option<&Path>,
    leader: bool,
) -> Result<u8, StoreError> {
    let duration = config::Dur::parse(duration).map_err(|e| StoreError::Input(format!("--duration: {e}")))?;
    // The leader cluster resolves its policy file itself (and names it in its errors).
    let policy = if leader {
        crate::store::leader::policy_of(policy_file.unwrap_or(Path::new("")), None)
            .and_then(|sourced| sourced.resolve_ms_any_family())
    } else {
        store_policy(policy_file, None, nodes)
    }
    .map_err(StoreError::Input)?;
    let config = BenchConfig {
        binary: this_binary()?,
        node_count: nodes,
        policy: policy.clone(),
        value_size_bytes: value_size,
        concurrency,
        duration: Duration::from_millis(duration.ms),
        leader: leader.then(|| policy_file.map(Path::to_path_buf)),
    };
    let acks = match &policy.leader {
        Some(l) => format!(
            "replication leader, acks {}, min_in_sync {}",
            crate::store::coordinator::info::config_name(&l.acks),
            l.min_in_sync
        ),
        None => format!("write_quorum {}", policy.write_quorum),
    };
    println!(
        "store bench: {nodes} nodes, replication_factor {}, {acks}, fsync on, {value_size}-byte values, {concurrency} connections, {}",
        policy.replication_factor, duration.text
    );
    let r = crate::store::bench::run(&config).map_err(StoreError::Runtime)?;
    println!("  writes:      {} acked, {} errors in {:.1} s", r.writes, r.errors, r.elapsed.as_secs_f64());
    println!("  throughput:  {:.0} writes/s", r.writes_per_second());
    println!(
        "  latency:     p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        r.latency_us_p50 as f64 / 1000.0,
        r.latency_us_p99 as f64 / 1000.0,
        r.latency_us_max as f64 / 1000.0
    );
    Ok(0)
}

/// `store up`: start the cluster, say where everything is (nodes with their pids, the policy,
/// the client port), and serve until a signal.
fn up(config: ClusterConfig, sourced: &SourcedPolicy) -> Result<u8, StoreError> {
    // Before any node starts: from here SIGTERM, SIGHUP and SIGINT stop the cluster instead
    // of killing this process and leaving its nodes.
    let mut stop = StopSignals::install().map_err(StoreError::Runtime)?;
    let (nodes, partition_count, data_dir) =
        (config.node_count, config.layout.shards.len(), config.data_dir.clone());
    let mut cluster = Cluster::start(config)?;
    let addr = cluster.client_addr();
    println!(
        "replicheck store: {nodes} nodes, {partition_count} partition(s), data in {}",
        data_dir.display()
    );
    for node in 0..cluster.node_count() {
        let node = node as u8;
        let pid = cluster.node_pid(node).map_or("?".to_string(), |p| p.to_string());
        println!("  node {node}: {} pid {pid}", cluster.node_addr(node));
    }
    let set: Vec<String> = sourced.patch.describe().into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
    if set.is_empty() {
        println!("policy: the defaults (`replicheck lint` explains each key)");
    } else {
        println!("policy: {}; every other key at its default", set.join(", "));
    }
    println!("client port {}: connect with `redis-cli -p {}`", addr.port(), addr.port());
    for c in 1..cluster.coordinator_count() {
        let port = cluster.client_addr_of(c as u8).port();
        println!("  coordinator {c} (a follower of coordinator 0's membership): client port {port}");
    }
    println!("Ctrl-C (or SIGTERM, SIGHUP) stops the cluster; pid {}.", std::process::id());
    let signal = stop.wait(|| cluster.reap_exited());
    cluster.stop();
    println!("replicheck store: stopped ({signal})");
    Ok(0)
}

/// `store up --replication leader`: until a signal, as `up`.
fn up_leader(config: LeaderConfig) -> Result<u8, StoreError> {
    let mut stop = StopSignals::install().map_err(StoreError::Runtime)?;
    let (nodes, partitions) = (config.node_count, config.partitions);
    let mut cluster = LeaderCluster::start(config)?;
    let addr = cluster.client_addr();
    println!(
        "replicheck store: {nodes} nodes, {partitions} partition(s), replication = \"leader\", data in {}",
        cluster.data_dir().display()
    );
    for node in 0..cluster.node_count() {
        let node = node as NodeId;
        let pid = cluster.node_pid(node).map_or("?".to_string(), |p| p.to_string());
        println!("  node {node}: {} pid {pid}", cluster.node_addr(node));
    }
    let lp = cluster.config().policy.leader.expect("the leader family's policy");
    println!(
        "policy: acks = {}, min_in_sync = {}, fencing = {}, unclean_election = {} (INFO shows every partition's epoch, primary and in-sync set)",
        crate::store::coordinator::info::config_name(&lp.acks),
        lp.min_in_sync,
        lp.fencing,
        lp.unclean_election
    );
    println!("client port {}: connect with `redis-cli -p {}`", addr.port(), addr.port());
    println!("Ctrl-C (or SIGTERM, SIGHUP) stops the cluster; pid {}.", std::process::id());
    let signal = stop.wait(|| cluster.reap_exited());
    cluster.stop();
    println!("replicheck store: stopped ({signal})");
    Ok(0)
}

/// How often `store up` reaps node processes that exited while it waits for a signal.
const REAP_INTERVAL_MS: u64 = 200;

/// SIGINT, SIGTERM and SIGHUP, caught from `install` on (a signal that came during the
/// start is kept until `wait`).
struct StopSignals {
    runtime: tokio::runtime::Runtime,
    signals: Vec<(&'static str, tokio::signal::unix::Signal)>,
}

impl StopSignals {
    fn install() -> Result<StopSignals, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        let kinds = [
            ("SIGINT", SignalKind::interrupt()),
            ("SIGTERM", SignalKind::terminate()),
            ("SIGHUP", SignalKind::hangup()),
        ];
        let signals = runtime.block_on(async {
            kinds
                .into_iter()
                .map(|(name, kind)| {
                    signal(kind).map(|s| (name, s)).map_err(|e| format!("cannot catch {name}: {e}"))
                })
                .collect::<Result<Vec<_>, String>>()
        })?;
        Ok(StopSignals { runtime, signals })
    }

    /// Until a signal comes; meanwhile node processes that exit are reaped (and reported), so
    /// none is left a zombie. Returns the signal's name.
    fn wait(
        &mut self,
        mut reap_exited: impl FnMut() -> Vec<(NodeId, std::process::ExitStatus)>,
    ) -> &'static str {
        let signals = &mut self.signals;
        self.runtime.block_on(async {
            let mut reap = tokio::time::interval(Duration::from_millis(REAP_INTERVAL_MS));
            loop {
                let received = first_signal(signals);
                tokio::select! {
                    name = received => return name,
                    _ = reap.tick() => {
                        for (node, status) in reap_exited() {
                            eprintln!("replicheck store: node {node} exited ({status}); it stays down until the next `store up`");
                        }
                    }
                }
            }
        })
    }
}

/// The name of the first of `signals` to arrive.
async fn first_signal(signals: &mut [(&'static str, tokio::signal::unix::Signal)]) -> &'static str {
    std::future::poll_fn(|cx| {
        for (name, signal) in signals.iter_mut() {
            if signal.poll_recv(cx).is_ready() {
                return std::task::Poll::Ready(*name);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// `store sim`, and `store run --replay`: the report to stdout, the speed to stderr.
fn sim(
    request: &crate::store::sim::SimRequest,
    plan_replay: crate::store::sim::ReplayPlanner,
) -> Result<u8, StoreError> {
    let (mut out, mut speed) = (String::new(), String::new());
    let result = crate::store::sim::run(request, plan_replay, &mut out, &mut speed);
    emit(&out);
    let _ = std::io::Write::write_all(&mut std::io::stderr(), speed.as_bytes());
    Ok(u8::from(result?.first_failing.is_some()))
}

/// The report to stdout. A reader that stopped reading (`| head`) is no error: `print!` would
/// panic, and a store command's panic stops the process with an abort.
fn emit(out: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
}
