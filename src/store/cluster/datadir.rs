//! What a data directory holds besides the nodes' data (`DIR/node-N/`), and who may use it:
//!
//! - `DIR/lock`: held (flock) by the process running a cluster on the directory, with its pid,
//!   so a second one is refused with the holder's pid instead of a redb lock error.
//! - `DIR/layout`: the partitions the keys were routed by (see [`check_layout`]).
//! - `DIR/coordinator-state`: the coordinator's membership and version floor
//!   ([`SavedState`]), written before a change takes effect, so a restarted coordinator
//!   reads where it wrote last.

use crate::policy::NodeId;
use crate::store::coordinator::layout::Layout;
use crate::store::StoreError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

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

/// Replace `path` with `bytes` so that a crash leaves the old or the new content, never a mix:
/// a temporary file, fsync, rename over, fsync the directory (which makes the rename durable).
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let err = |what: &str, p: &Path, e: std::io::Error| format!("cannot {what} {}: {e}", p.display());
    let mut file = File::create(&tmp).map_err(|e| err("create", &tmp, e))?;
    file.write_all(bytes).map_err(|e| err("write", &tmp, e))?;
    file.sync_all().map_err(|e| err("fsync", &tmp, e))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| err("rename over", path, e))?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| err("fsync the directory", dir, e))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedMember {
    pub node: NodeId,
    /// The membership epoch its replica set was first saved in with it (0: an initial
    /// member). A member is saved once it caught up: a join under way is not persisted, the
    /// restarted coordinator's detector starts it again.
    pub joined_epoch: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedShard {
    pub name: String,
    pub epoch: u64,
    /// In replica-set order.
    pub members: Vec<SavedMember>,
}

/// What the coordinator must find again after a restart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedState {
    /// Bumped by every saved membership change.
    pub membership_epoch: u64,
    /// Every version used so far is below this: a restarted coordinator starts here or
    /// higher. The coordinator reserves blocks of versions and saves the block's end first.
    pub version_floor: u64,
    pub shards: Vec<SavedShard>,
}

const STATE_HEADER: &str = "replicheck coordinator state v2";
/// The format before membership changes were the protocol's: readable unless it saved a
/// catch-up under way.
const STATE_HEADER_V1: &str = "replicheck coordinator state v1";

impl SavedState {
    fn to_text(&self) -> String {
        let mut out = format!(
            "{STATE_HEADER}\nmembership_epoch {}\nversion_floor {}\n",
            self.membership_epoch, self.version_floor
        );
        for s in &self.shards {
            out.push_str(&format!("partition {} epoch {}\n", s.name, s.epoch));
            for m in &s.members {
                out.push_str(&format!("member {} joined {}\n", m.node, m.joined_epoch));
            }
        }
        out
    }

    fn parse(text: &str, path: &Path) -> Result<SavedState, String> {
        let bad = |line: usize, why: &str| format!("{} line {line}: {why}", path.display());
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        match lines.next() {
            Some((_, STATE_HEADER | STATE_HEADER_V1)) => {}
            Some((n, other)) => {
                return Err(bad(
                    n,
                    &format!("expected \"{STATE_HEADER}\", found {other:?} (written by another version?)"),
                ))
            }
            None => return Err(format!("{}: empty", path.display())),
        }
        let mut state = SavedState::default();
        let number = |n: usize, word: Option<&str>, what: &str| -> Result<u64, String> {
            word.and_then(|w| w.parse::<u64>().ok()).ok_or_else(|| bad(n, &format!("{what}: not a number")))
        };
        let node = |n: usize, word: Option<&str>| -> Result<NodeId, String> {
            word.and_then(|w| w.parse::<NodeId>().ok()).ok_or_else(|| bad(n, "not a node id"))
        };
        let (mut seen_epoch, mut seen_floor) = (false, false);
        for (n, line) in lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["membership_epoch", v] => {
                    state.membership_epoch = number(n, Some(v), "membership_epoch")?;
                    seen_epoch = true;
                }
                ["version_floor", v] => {
                    state.version_floor = number(n, Some(v), "version_floor")?;
                    seen_floor = true;
                }
                ["partition", name, "epoch", e] => state.shards.push(SavedShard {
                    name: name.to_string(),
                    epoch: number(n, Some(e), "epoch")?,
                    members: Vec::new(),
                }),
                ["member", id, "joined", e, rest @ ..] => {
                    match rest {
                        [] | ["caught_up"] => {}
                        ["catching_up", ..] => {
                            return Err(bad(
                                n,
                                "a catch-up under way saved by an older replicheck cannot be resumed; \
                                 remove this file to start from the layout's replica sets",
                            ))
                        }
                        _ => return Err(bad(n, &format!("unknown member state {:?}", rest.join(" ")))),
                    }
                    let member =
                        SavedMember { node: node(n, Some(id))?, joined_epoch: number(n, Some(e), "joined")? };
                    state
                        .shards
                        .last_mut()
                        .ok_or_else(|| bad(n, "a member before any partition"))?
                        .members
                        .push(member);
                }
                [] => {}
                _ => return Err(bad(n, &format!("cannot read {line:?}"))),
            }
        }
        if !seen_epoch || !seen_floor {
            return Err(format!(
                "{}: membership_epoch or version_floor missing (a torn write?)",
                path.display()
            ));
        }
        Ok(state)
    }

    /// The saved partitions must be the layout's, with `node_count` nodes: a state written for
    /// another cluster would put keys' replicas on the wrong nodes.
    pub fn check(&self, layout: &Layout, node_count: usize, path: &Path) -> Result<(), String> {
        let names: Vec<&str> = self.shards.iter().map(|s| s.name.as_str()).collect();
        let expected: Vec<&str> = layout.shards.iter().map(|s| s.name.as_str()).collect();
        if names != expected {
            return Err(format!(
                "{}: saved partitions {names:?}, but the layout has {expected:?}; use the data directory's own layout",
                path.display()
            ));
        }
        for (saved, spec) in self.shards.iter().zip(&layout.shards) {
            if saved.members.len() != spec.replicas.len() {
                return Err(format!(
                    "{}: partition {} has {} saved members, the layout {} replicas",
                    path.display(),
                    saved.name,
                    saved.members.len(),
                    spec.replicas.len()
                ));
            }
            for (i, m) in saved.members.iter().enumerate() {
                if usize::from(m.node) >= node_count {
                    let n = m.node;
                    return Err(format!(
                        "{}: partition {} names node {n}, but there are {node_count} nodes (--nodes was larger when it was written)",
                        path.display(),
                        saved.name
                    ));
                }
                if saved.members[..i].iter().any(|o| o.node == m.node) {
                    return Err(format!(
                        "{}: partition {} lists node {} twice",
                        path.display(),
                        saved.name,
                        m.node
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `DIR/coordinator-state`.
#[derive(Clone, Debug)]
pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    pub fn in_dir(data_dir: &Path) -> StateFile {
        StateFile { path: data_dir.join("coordinator-state") }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `None`: no state saved yet (a new directory, or one from before the state was kept).
    /// A file that cannot be read is a runtime failure; one that does not parse is bad input
    /// (a data directory written by something else: the user picks another or clears it).
    pub fn load(&self) -> Result<Option<SavedState>, StoreError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => SavedState::parse(&text, &self.path).map(Some).map_err(StoreError::Input),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Runtime(format!("cannot read {}: {e}", self.path.display()))),
        }
    }

    /// Durable once this returns.
    pub fn save(&self, state: &SavedState) -> Result<(), String> {
        write_durably(&self.path, state.to_text().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> SavedState {
        SavedState {
            membership_epoch: 4,
            version_floor: 200_001,
            shards: vec![
                SavedShard {
                    name: "s0".into(),
                    epoch: 2,
                    members: vec![
                        SavedMember { node: 0, joined_epoch: 0 },
                        SavedMember { node: 3, joined_epoch: 2 },
                        SavedMember { node: 2, joined_epoch: 0 },
                    ],
                },
                SavedShard {
                    name: "s1".into(),
                    epoch: 1,
                    members: vec![
                        SavedMember { node: 1, joined_epoch: 0 },
                        SavedMember { node: 0, joined_epoch: 1 },
                        SavedMember { node: 3, joined_epoch: 0 },
                    ],
                },
            ],
        }
    }

    #[test]
    fn the_state_survives_a_save_and_a_load() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::in_dir(dir.path());
        assert_eq!(file.load().unwrap(), None);
        file.save(&state()).unwrap();
        assert_eq!(file.load().unwrap(), Some(state()));
        assert!(!dir.path().join("coordinator-state.tmp").exists());
        let layout = Layout::round_robin(2, 4, 3);
        assert_eq!(state().check(&layout, 4, file.path()), Ok(()));
        let fewer_nodes = state().check(&layout, 3, file.path()).unwrap_err();
        assert!(fewer_nodes.contains("names node 3, but there are 3 nodes"), "{fewer_nodes}");
        let other = state().check(&Layout::round_robin(1, 4, 3), 4, file.path()).unwrap_err();
        assert!(other.contains("saved partitions [\"s0\", \"s1\"]"), "{other}");
    }

    #[test]
    fn a_damaged_state_file_is_refused_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::in_dir(dir.path());
        let text = state().to_text().replace("joined 2\n", "joined 2 maybe\n");
        std::fs::write(file.path(), text).unwrap();
        let e = file.load().unwrap_err().to_string();
        assert!(e.contains("coordinator-state line 6: unknown member state \"maybe\""), "{e}");
        let v1 = state()
            .to_text()
            .replace("state v2", "state v1")
            .replace("joined 2\n", "joined 2 catching_up eviction\n");
        std::fs::write(file.path(), v1).unwrap();
        let e = file.load().unwrap_err().to_string();
        assert!(e.contains("line 6: a catch-up under way saved by an older replicheck"), "{e}");
        std::fs::write(file.path(), "partition s0 epoch 0\n").unwrap();
        assert!(file.load().unwrap_err().to_string().contains("line 1: expected"));
    }

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
