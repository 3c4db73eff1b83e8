//! `replicheck store bench`: replicated write throughput and latency of a local cluster.

use crate::config::Policy;
use crate::store::cluster::{Cluster, ClusterConfig};
use crate::store::coordinator::resp::{Client, Reply};
use crate::store::leader::cluster::{LeaderCluster, LeaderConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Distinct keys the bench writes, so writes spread over many keys as in a real load.
const BENCH_KEYS: u64 = 10_000;
pub const CONCURRENCY_MAX: usize = 256;

#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub binary: PathBuf,
    pub node_count: usize,
    pub policy: Policy,
    pub value_size_bytes: usize,
    pub concurrency: usize,
    pub duration: Duration,
    /// `Some(policy file)`: the leader family (`store up --replication leader`) with that
    /// policy (or the defaults); `None`: the quorum family with `policy`.
    pub leader: Option<Option<PathBuf>>,
}

#[derive(Clone, Debug)]
pub struct BenchResult {
    pub writes: u64,
    pub errors: u64,
    pub elapsed: Duration,
    pub latency_us_p50: u64,
    pub latency_us_p99: u64,
    pub latency_us_max: u64,
}

impl BenchResult {
    pub fn writes_per_second(&self) -> f64 {
        self.writes as f64 / self.elapsed.as_secs_f64()
    }
}

/// The `q`-quantile (0..=1) of sorted samples, nearest rank.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    assert!(!sorted.is_empty());
    assert!((0.0..=1.0).contains(&q));
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Start a cluster in a temporary directory and drive SETs from `concurrency` connections.
pub fn run(config: &BenchConfig) -> Result<BenchResult, String> {
    if config.concurrency == 0 || config.concurrency > CONCURRENCY_MAX {
        return Err(format!("--concurrency {}: must be 1 to {CONCURRENCY_MAX}", config.concurrency));
    }
    let dir = std::env::temp_dir().join(format!("replicheck-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(policy_file) = &config.leader {
        let cluster = LeaderCluster::start(LeaderConfig {
            binary: config.binary.clone(),
            node_count: config.node_count,
            node_zones: vec![0; config.node_count],
            partitions: 1,
            replication_factor: None,
            policy_file: policy_file.clone(),
            data_dir: dir.clone(),
            client_addr: "127.0.0.1:0".parse().expect("an address"),
            clients: crate::store::coordinator::clients::ClientLimits {
                value_bytes_max: crate::store::cluster::VALUE_BYTES_MAX_DEFAULT.max(config.value_size_bytes),
                ..Default::default()
            },
            link_proxy_seed: None,
            model: None,
        })
        .map_err(|e| e.to_string())?;
        let result = drive(cluster.client_addr(), config);
        drop(cluster);
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    let mut cluster_config =
        ClusterConfig::local(config.binary.clone(), config.node_count, config.policy.clone(), dir.clone());
    // As `store up` runs: no fault controls on the links.
    cluster_config.link_proxies = false;
    cluster_config.clients.value_bytes_max =
        cluster_config.clients.value_bytes_max.max(config.value_size_bytes);
    let cluster = Cluster::start(cluster_config).map_err(|e| e.to_string())?;
    let result = drive(cluster.client_addr(), config);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn drive(addr: SocketAddr, config: &BenchConfig) -> Result<BenchResult, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let workers: Vec<_> = (0..config.concurrency as u64)
        .map(|worker| {
            let (stop, value) = (Arc::clone(&stop), vec![b'x'; config.value_size_bytes]);
            let concurrency = config.concurrency as u64;
            std::thread::spawn(move || -> Result<(Vec<u64>, u64), String> {
                let mut client = Client::connect(addr).map_err(|e| format!("connect to {addr}: {e}"))?;
                let (mut latencies_us, mut errors) = (Vec::new(), 0u64);
                let mut key = worker;
                while !stop.load(Ordering::Relaxed) {
                    let name = format!("bench:{}", key % BENCH_KEYS);
                    key += concurrency;
                    let sent = Instant::now();
                    match client.call(&[b"SET", name.as_bytes(), &value]) {
                        Ok(Reply::Simple(_)) => latencies_us.push(sent.elapsed().as_micros() as u64),
                        Ok(_) => errors += 1,
                        Err(e) => return Err(format!("connection to {addr}: {e}")),
                    }
                }
                Ok((latencies_us, errors))
            })
        })
        .collect();
    std::thread::sleep(config.duration);
    stop.store(true, Ordering::Relaxed);
    let mut latencies_us = Vec::new();
    let mut errors = 0;
    for worker in workers {
        let (mut l, e) = worker.join().map_err(|_| "a bench worker panicked".to_string())??;
        latencies_us.append(&mut l);
        errors += e;
    }
    let elapsed = start.elapsed();
    if latencies_us.is_empty() {
        return Err(format!("no write succeeded ({errors} errors)"));
    }
    latencies_us.sort_unstable();
    Ok(BenchResult {
        writes: latencies_us.len() as u64,
        errors,
        elapsed,
        latency_us_p50: quantile(&latencies_us, 0.50),
        latency_us_p99: quantile(&latencies_us, 0.99),
        latency_us_max: *latencies_us.last().expect("non-empty"),
    })
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn nearest_rank_quantiles() {
        let samples: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&samples, 0.5), 50);
        assert_eq!(quantile(&samples, 0.99), 99);
        assert_eq!(quantile(&samples, 1.0), 100);
        assert_eq!(quantile(&[7], 0.0), 7);
    }
}
