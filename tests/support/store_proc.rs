//! `replicheck store up` as a child process, as a user runs it: its node pids and client port
//! read from what it prints, signals sent to it with kill(2).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long `store up` may take to print its client port (a loaded 2-core machine).
const START_LIMIT_MS: u64 = 60_000;

pub struct StoreProc {
    pub child: Child,
    pub addr: SocketAddr,
    /// Each node's process id, by node id, as `store up` printed them.
    pub node_pids: Vec<u32>,
    /// Where each node listens (not through the coordinator's proxy).
    pub node_addrs: Vec<SocketAddr>,
}

impl StoreProc {
    /// `store up --data-dir DIR --port PORT ARGS...`; waits for its client port.
    pub fn start(data_dir: &Path, port: u16, args: &[&str]) -> StoreProc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .args(["store", "up", "--port", &port.to_string(), "--data-dir"])
            .arg(data_dir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run replicheck store up");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_millis(START_LIMIT_MS);
        let (mut node_pids, mut node_addrs) = (Vec::new(), Vec::new());
        let port = loop {
            assert!(Instant::now() < deadline, "store up did not print its client port");
            let Some(Ok(line)) = lines.next() else {
                let status = child.wait().unwrap();
                panic!("store up exited before serving ({status})");
            };
            // `  node 0: 127.0.0.1:40117 pid 4243 (coordinator link via proxy)`
            if let Some((head, pid)) = line.trim().strip_prefix("node ").and_then(|l| l.split_once(" pid ")) {
                node_pids.push(pid.split_whitespace().next().unwrap().parse::<u32>().unwrap());
                node_addrs.push(head.split_once(": ").unwrap().1.parse::<SocketAddr>().unwrap());
            }
            if let Some(rest) = line.strip_prefix("client port ") {
                break rest.split(':').next().unwrap().parse::<u16>().unwrap();
            }
        };
        // Keep reading what it prints, so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        StoreProc { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), node_pids, node_addrs }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, signal: libc::c_int) {
        signal_pid(self.pid(), signal);
    }

    /// Wait for it to exit (and reap it); panics after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "store up (pid {}) still running after {limit:?}", self.pid());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for StoreProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal(libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(20);
            while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn signal_pid(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a pid this test started; no memory is involved.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// The state letter of a process (`R`, `S`, `Z` for a zombie, ...), or `None` if there is no
/// such process (exited and reaped).
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ...`: the state follows the last `)`.
    stat.rsplit(')').next()?.split_whitespace().next()?.chars().next()
}

/// Wait until `pid` is gone (`reaped`: not even a zombie), or at least not running.
pub fn wait_gone(pid: u32, reaped: bool, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let state = process_state(pid);
        let gone = match state {
            None => true,
            Some('Z') => !reaped,
            Some(_) => false,
        };
        if gone {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("pid {pid} is still in state {state:?} after {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A port on 127.0.0.1 free right now, for a `store up` that must keep its port across
/// restarts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
