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
/// How long a start on a fixed port that is busy is tried again.
const PORT_BUSY_RETRY_MS: u64 = 10_000;

pub struct StoreProc {
    pub child: Child,
    pub addr: SocketAddr,
    /// Each node's process id, by node id, as `store up` printed them.
    pub node_pids: Vec<u32>,
    /// Where each node listens (not through the coordinator's proxy).
    pub node_addrs: Vec<SocketAddr>,
}

impl StoreProc {
    /// `store up --data-dir DIR --port PORT ARGS...`; waits for its client port. A fixed port
    /// can be held for a moment by another test's outgoing connection (the kernel hands out
    /// ephemeral ports from the same range): such a start is tried again, for a while.
    pub fn start(data_dir: &Path, port: u16, args: &[&str]) -> StoreProc {
        let deadline = Instant::now() + Duration::from_millis(PORT_BUSY_RETRY_MS);
        loop {
            match StoreProc::try_start(data_dir, port, args) {
                Ok(up) => return up,
                Err(stderr)
                    if port != 0
                        && stderr.contains("Address already in use")
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(stderr) => panic!("store up exited before serving: {stderr}"),
            }
        }
    }

    fn try_start(data_dir: &Path, port: u16, args: &[&str]) -> Result<StoreProc, String> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_replicheck"));
        command.args(["store", "up", "--port", &port.to_string(), "--data-dir"]).arg(data_dir).args(args);
        StoreProc::start_command(command)
    }

    /// `command` runs `store up` (perhaps through a wrapper that execs it); waits for its
    /// client port, or returns its exit status and stderr.
    pub fn start_command(mut command: Command) -> Result<StoreProc, String> {
        let mut child =
            command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run replicheck store up");
        let mut errors = BufReader::new(child.stderr.take().unwrap());
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_millis(START_LIMIT_MS);
        let (mut node_pids, mut node_addrs) = (Vec::new(), Vec::new());
        let port = loop {
            assert!(Instant::now() < deadline, "store up did not print its client port");
            let Some(Ok(line)) = lines.next() else {
                let status = child.wait().unwrap();
                let mut stderr = String::new();
                let _ = std::io::Read::read_to_string(&mut errors, &mut stderr);
                return Err(format!("({status}) {stderr}"));
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
        // Keep reading what it prints, so it never blocks on a full pipe; its stderr goes on
        // to the test's.
        std::thread::spawn(move || for _ in lines {});
        std::thread::spawn(move || {
            for line in errors.lines().map_while(Result::ok) {
                eprintln!("{line}");
            }
        });
        Ok(StoreProc { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), node_pids, node_addrs })
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
    free_port_run(1)
}

/// The first of `count` consecutive ports on 127.0.0.1 free right now (coordinator i of a
/// `store up --coordinators N` serves on `--port` + i).
pub fn free_port_run(count: u16) -> u16 {
    loop {
        let first = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let free = (1..count).all(|i| {
            first.checked_add(i).is_some_and(|port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        });
        if free {
            return first;
        }
    }
}

/// `store up STORE_ARGS...` in a private mount namespace, after `script` (a shell script run
/// with `script_args`, then `exec "$@"`) mounted what it needs: `None` (and a note) where
/// namespaces or mounts are not allowed, unless REPLICHECK_REQUIRE_MOUNT is set.
pub fn start_in_private_mounts(
    dir: &Path,
    script: &str,
    script_args: &[&std::ffi::OsStr],
    store_args: &[&std::ffi::OsStr],
) -> Option<StoreProc> {
    let wrapper = dir.join("wrap.sh");
    std::fs::write(&wrapper, script).unwrap();
    let mut command = Command::new("unshare");
    command.args(["-m", "--propagation", "private", "sh"]).arg(&wrapper).args(script_args);
    command.arg(env!("CARGO_BIN_EXE_replicheck")).args(["store", "up", "--port", "0"]).args(store_args);
    match StoreProc::start_command(command) {
        Ok(up) => Some(up),
        Err(why) if std::env::var_os("REPLICHECK_REQUIRE_MOUNT").is_none() => {
            eprintln!("skipped: cannot run the store on a private tmpfs here: {why}");
            None
        }
        Err(why) => panic!("cannot run the store on a private tmpfs: {why}"),
    }
}

/// `path` as the process `pid` sees it (through its mount namespace).
pub fn seen_by(pid: u32, path: &Path) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/proc/{pid}/root")).join(path.strip_prefix("/").unwrap())
}
