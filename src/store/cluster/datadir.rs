//! What a data directory holds besides the nodes' data (`DIR/node-N/`), and who may use it:
//!
//! - `DIR/lock`: held (flock) by the process running a cluster on the directory, with its pid,
//!   so a second one is refused with the holder's pid instead of a redb lock error.
//! - `DIR/layout`: the partitions the keys were routed by (see [`check_layout`]).
//! - `DIR/coordinator-state`: the coordinator's membership and version floor, which the
//!   coordinator reads and writes itself (`coordinator::state`).

use crate::store::coordinator::layout::Layout;
use crate::store::coordinator::state::write_durably;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// The directory's lock, released when dropped or when the process dies (flock), so a
/// crashed holder never leaves it locked.
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Lock `data_dir` (created if missing) for this process, or say which process holds it.
    pub fn acquire(data_dir: &Path) -> Result<DirLock, String> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| format!("cannot create {}: {e}", data_dir.display()))?;
        let path = data_dir.join("lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        if !try_flock(&file).map_err(|e| format!("cannot lock {}: {e}", path.display()))? {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = match text.trim().parse::<u32>() {
                Ok(pid) => format!("pid {pid} ({})", process_name(pid)),
                Err(_) => "another process (its pid is not written yet)".to_string(),
            };
            return Err(format!(
                "data directory {} is in use by {holder}; stop it first",
                data_dir.display()
            ));
        }
        let written = file
            .set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| writeln!(file, "{}", std::process::id()))
            .and_then(|_| file.flush());
        written.map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(DirLock { _file: file })
    }
}

/// `Ok(false)`: another open file (another process) holds the lock.
fn try_flock(file: &File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a file descriptor this function borrows; no memory is involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// "replicheck store up" for a pid running `…/replicheck store up --port …` (its program name
/// and the words before the first option), or "not running" if it is gone.
fn process_name(pid: u32) -> String {
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => {
            let mut words = cmdline.split(|b| *b == 0).map(|w| String::from_utf8_lossy(w).into_owned());
            let program = words.next().unwrap_or_default();
            let program = program.rsplit('/').next().unwrap_or_default().to_string();
            let mut name = vec![program];
            name.extend(words.take_while(|w| !w.is_empty() && !w.starts_with('-')).take(2));
            name.join(" ")
        }
        Err(_) => "no longer running".to_string(),
    }
}

/// A data directory keeps the layout it was first written with: keys are stored on the
/// partition their prefix and suffix route to, so changing the partitions or suffixes would
/// make stored keys unreachable. The layout is recorded in `DIR/layout` and checked.
pub fn check_layout(data_dir: &Path, layout: &Layout, write_shard_suffixes: u8) -> Result<(), String> {
    let path = data_dir.join("layout");
    let replicas: Vec<String> = layout
        .shards
        .iter()
        .map(|s| {
            let nodes: Vec<String> = s.replicas.iter().map(|n| n.to_string()).collect();
            format!("{}={}", s.name, nodes.join(","))
        })
        .collect();
    let now = format!("partitions {}\nwrite_shard_suffixes {write_shard_suffixes}\n", replicas.join(" "));
    match std::fs::read_to_string(&path) {
        Ok(before) if before == now => Ok(()),
        Ok(before) => Err(format!(
            "{}: this data directory was written with another layout:\n{before}now asked for:\n{now}keys would be routed to partitions that do not hold them; use a new --data-dir, or the same --partitions, --replication-factor, --nodes and write_shard_suffixes",
            path.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(data_dir).map_err(|e| format!("cannot create {}: {e}", data_dir.display()))?;
            write_durably(&path, now.as_bytes())
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = DirLock::acquire(dir.path()).unwrap();
        let e = DirLock::acquire(dir.path()).err().expect("held");
        let pid = std::process::id();
        assert!(e.contains(&format!("is in use by pid {pid} (")), "{e}");
        drop(held);
        DirLock::acquire(dir.path()).expect("released on drop");
    }
}
