//! What a data directory holds besides the nodes' data (`DIR/node-N/`), and who may use it:
//!
//! - `DIR/lock`: held (flock) by the process running a cluster on the directory, with its pid,
//!   so a second one is refused with the holder's pid instead of a redb lock error.
//! - `DIR/layout`: the partitions the keys were routed by (see [`check_layout`]).
//! - `DIR/coordinator-state`: the coordinator's membership and version floor, which the
//!   coordinator reads and writes itself (`coordinator::state`).
//! - `DIR/cluster-id`: the cluster's identity, also stamped into every node's database when
//!   the cluster first starts it (see [`check_identity`]), so that a node database that is
//!   gone, emptied or from elsewhere is refused instead of served as if it held its data.

use crate::policy::NodeId;
use crate::store::coordinator::layout::Layout;
use crate::store::coordinator::state::{write_durably, SavedState};
use crate::store::node::storage::{self, DataFile};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// A leader-family cluster's description (`store::leader::Spec`): a directory that has one is
/// refused by the quorum family's `store up`, and one with the quorum family's files by the
/// leader family's.
pub const LEADER_SPEC_FILE: &str = "leader.json";

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

/// Node `node`'s data directory.
pub fn node_dir(data_dir: &Path, node: NodeId) -> std::path::PathBuf {
    data_dir.join(format!("node-{node}"))
}

/// What [`check_identity`] found: the nodes whose data is gone and that the user asked to
/// rebuild (from their partitions' other replicas, before anything starts).
#[derive(Debug, PartialEq, Eq)]
pub struct Identity {
    pub cluster_id: u64,
    pub rebuild: Vec<NodeId>,
}

/// Refuse a data directory whose parts do not belong together, before any node serves it:
///
/// - node databases holding data beside no `coordinator-state`: the membership (evictions) and
///   version floor the file kept would be lost, and a replica evicted since would serve again;
/// - a node database of another cluster;
/// - a node database that is missing, empty, or not stamped with this cluster's id, in a
///   cluster that has run (`saved`, or any node holds data): its acknowledged writes are gone
///   from it, and serving it as a replica would read them stale. `rebuild` names the nodes to
///   recreate instead; a node asked for that still holds its data is refused.
///
/// A new directory gets its id here (written before any node is stamped, so a start cut short
/// is finished by the next one). A directory from before ids were kept is adopted as it is.
pub fn check_identity(
    data_dir: &Path,
    node_count: usize,
    saved: Option<&SavedState>,
    rebuild: &[NodeId],
) -> Result<Identity, String> {
    let id_path = data_dir.join("cluster-id");
    let recorded = match std::fs::read_to_string(&id_path) {
        Ok(text) => Some(u64::from_str_radix(text.trim(), 16).map_err(|_| {
            format!("{}: {:?} is not a cluster id (16 hex digits)", id_path.display(), text.trim())
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read {}: {e}", id_path.display())),
    };
    let mut nodes: Vec<DataFile> = (0..node_count)
        .map(|n| storage::inspect(&node_dir(data_dir, n as NodeId)))
        .collect::<Result<_, _>>()?;
    let db = |n: usize| node_dir(data_dir, n as NodeId).join(storage::DATABASE_FILE);
    let holding = nodes.iter().enumerate().find_map(|(n, f)| match f {
        DataFile::Database { max_version, .. } | DataFile::LogMissing { max_version, .. }
            if *max_version > 0 =>
        {
            Some((n, *max_version))
        }
        _ => None,
    });
    if let (None, Some((n, version))) = (saved, holding) {
        return Err(format!(
            "{} is missing, but {} holds data (versions up to {version}): the membership and version floor it kept would be lost, and a replica evicted since could serve stale values again; restore the file, or start with a new --data-dir",
            data_dir.join("coordinator-state").display(),
            db(n).display()
        ));
    }
    let has_run = saved.is_some() || holding.is_some();
    let cluster_id = match recorded {
        Some(id) => id,
        None => {
            let id = loop {
                let id: u64 = rand::random();
                if id != 0 {
                    break id;
                }
            };
            write_durably(&id_path, format!("{id:016x}\n").as_bytes())?;
            if has_run {
                // Written before ids were kept: every database present is this cluster's.
                for (n, f) in nodes.iter_mut().enumerate() {
                    if let DataFile::Database { cluster_id: c @ None, .. } = f {
                        storage::stamp(&node_dir(data_dir, n as NodeId), id)?;
                        *c = Some(id);
                    }
                }
            }
            id
        }
    };
    let mut to_rebuild = Vec::new();
    for (n, f) in nodes.iter().enumerate() {
        let asked = rebuild.contains(&(n as NodeId));
        let found = match f {
            DataFile::Database { cluster_id: Some(other), .. } | DataFile::LogMissing { cluster_id: Some(other), .. }
                if *other != cluster_id =>
            {
                return Err(format!(
                    "{} belongs to cluster {other:016x}, this data directory to {cluster_id:016x} ({}): a node's data was put here from another cluster",
                    db(n).display(),
                    id_path.display()
                ))
            }
            DataFile::Database { cluster_id: Some(_), max_version } => {
                if asked {
                    return Err(format!(
                        "--rebuild-node {n}: {} holds this cluster's data (versions up to {max_version}); --rebuild-node recreates a node whose data is gone",
                        db(n).display()
                    ));
                }
                continue;
            }
            DataFile::Missing => "is missing",
            DataFile::Empty => "is empty (0 bytes)",
            DataFile::LogMissing { .. } => "lost its write-ahead log (node.log is missing)",
            DataFile::Database { cluster_id: None, .. } => "was created after the cluster first started (it has no cluster id)",
        };
        // A database that logged has run, whatever else is here.
        let has_run = has_run || matches!(f, DataFile::LogMissing { .. });
        if asked {
            to_rebuild.push(n as NodeId);
        } else if has_run {
            return Err(format!(
                "{} {found}: node {n}'s data is gone, and serving it as a replica would lose or read stale what it had acknowledged; start with --rebuild-node {n} to recreate it from its partitions' other replicas, or restore the file",
                db(n).display()
            ));
        } else {
            storage::stamp(&node_dir(data_dir, n as NodeId), cluster_id)?;
        }
    }
    if let Some(n) = rebuild.iter().find(|&&n| usize::from(n) >= node_count) {
        return Err(format!("--rebuild-node {n}: there are {node_count} nodes (0 to {})", node_count - 1));
    }
    Ok(Identity { cluster_id, rebuild: to_rebuild })
}

/// Recreate `node`'s database from every other node's copies of the partitions it is a
/// replica of (now, or in the layout): each key at the newest version any of them holds, which
/// includes every acknowledged write that survives anywhere. `partition_of` routes a key.
/// Returns the entries copied.
pub fn rebuild_node(
    data_dir: &Path,
    node_count: usize,
    node: NodeId,
    cluster_id: u64,
    partitions: &[u8],
    partition_of: &dyn Fn(&[u8]) -> u8,
) -> Result<u64, String> {
    let dir = node_dir(data_dir, node);
    let path = dir.join(storage::DATABASE_FILE);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let keep = |key: &[u8]| partitions.contains(&partition_of(key));
    let mut copied = 0;
    for source in (0..node_count as NodeId).filter(|&s| s != node) {
        let from = node_dir(data_dir, source);
        if matches!(storage::inspect(&from)?, DataFile::Database { cluster_id: Some(id), .. } if id == cluster_id)
        {
            copied += storage::copy_newer(&from, &dir, &keep)?;
        }
    }
    // Stamped last: a rebuild cut short leaves a database without the id, refused next time.
    storage::stamp(&dir, cluster_id)?;
    Ok(copied)
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

    fn write(dir: &Path, entries: &[(&[u8], u64)]) {
        let s = crate::store::node::storage::Storage::open(dir).unwrap();
        for (key, version) in entries {
            s.write(key.to_vec(), *version, Some(version.to_string().into_bytes())).unwrap();
        }
    }

    fn stamped(dir: &Path) -> Option<u64> {
        match storage::inspect(dir).unwrap() {
            DataFile::Database { cluster_id, .. } => cluster_id,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_new_directory_is_stamped_and_a_wiped_node_refused_until_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let first = check_identity(data, 3, None, &[]).unwrap();
        assert!(first.rebuild.is_empty());
        for n in 0..3 {
            assert_eq!(stamped(&node_dir(data, n)), Some(first.cluster_id));
        }
        // The nodes take writes; node 2 holds only s0's key.
        write(&node_dir(data, 0), &[(b"a", 3), (b"b", 5)]);
        write(&node_dir(data, 1), &[(b"a", 4), (b"b", 5)]);
        write(&node_dir(data, 2), &[(b"a", 4)]);
        let saved = SavedState { version_floor: 100_000, ..SavedState::default() };
        assert_eq!(check_identity(data, 3, Some(&saved), &[]).unwrap(), first);

        // Data beside no coordinator-state.
        let e = check_identity(data, 3, None, &[]).unwrap_err();
        assert!(e.contains("coordinator-state is missing, but") && e.contains("versions up to 5"), "{e}");

        // Node 1's database gone, then emptied: refused unless rebuilt.
        let db1 = node_dir(data, 1).join(storage::DATABASE_FILE);
        std::fs::remove_file(&db1).unwrap();
        let e = check_identity(data, 3, Some(&saved), &[]).unwrap_err();
        assert!(e.contains("node-1/node.redb is missing") && e.contains("--rebuild-node 1"), "{e}");
        std::fs::write(&db1, b"").unwrap();
        let e = check_identity(data, 3, Some(&saved), &[]).unwrap_err();
        assert!(e.contains("node-1/node.redb is empty (0 bytes)"), "{e}");
        let e = check_identity(data, 3, Some(&saved), &[0, 1]).unwrap_err();
        assert!(
            e.contains("--rebuild-node 0: ") && e.contains("holds this cluster's data (versions up to 5)"),
            "{e}"
        );
        let plan = check_identity(data, 3, Some(&saved), &[1]).unwrap();
        assert_eq!(plan.rebuild, vec![1]);
        // Node 1 is a replica of the partition of "a" only: it gets a at its newest version.
        let only_a = |key: &[u8]| u8::from(key == b"b");
        let copied = rebuild_node(data, 3, 1, plan.cluster_id, &[0], &only_a).unwrap();
        assert!(copied >= 1, "{copied}");
        assert_eq!(stamped(&node_dir(data, 1)), Some(first.cluster_id));
        let s = crate::store::node::storage::Storage::open(&node_dir(data, 1)).unwrap();
        assert_eq!(s.read(b"a").unwrap(), (4, Some(b"4".to_vec())));
        assert_eq!(s.read(b"b").unwrap(), (0, None), "b is another partition's");
        assert_eq!(s.max_version(), 4);
        drop(s);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(check_identity(data, 3, Some(&saved), &[]).unwrap().rebuild, Vec::<NodeId>::new());
    }

    #[test]
    fn a_node_database_from_another_cluster_is_refused() {
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = check_identity(one.path(), 2, None, &[]).unwrap();
        let b = check_identity(two.path(), 2, None, &[]).unwrap();
        assert_ne!(a.cluster_id, b.cluster_id);
        let from = node_dir(two.path(), 0).join(storage::DATABASE_FILE);
        std::fs::copy(&from, node_dir(one.path(), 0).join(storage::DATABASE_FILE)).unwrap();
        let e = check_identity(one.path(), 2, None, &[]).unwrap_err();
        assert!(e.contains(&format!("belongs to cluster {:016x}", b.cluster_id)), "{e}");
        std::fs::write(one.path().join("cluster-id"), "not hex\n").unwrap();
        let e = check_identity(one.path(), 2, None, &[]).unwrap_err();
        assert!(e.contains("cluster-id: \"not hex\" is not a cluster id"), "{e}");
    }

    #[test]
    fn a_directory_from_before_ids_is_adopted() {
        let dir = tempfile::tempdir().unwrap();
        write(&node_dir(dir.path(), 0), &[(b"k", 7)]);
        storage::stamp(&node_dir(dir.path(), 1), 1).unwrap();
        let unstamp = node_dir(dir.path(), 2);
        std::fs::create_dir_all(&unstamp).unwrap();
        write(&unstamp, &[]);
        let saved = SavedState { version_floor: 100_000, ..SavedState::default() };
        // Node 1 claims another cluster; node 2, unstamped, is adopted; node 3 has no database.
        std::fs::remove_dir_all(node_dir(dir.path(), 1)).unwrap();
        let e = check_identity(dir.path(), 4, Some(&saved), &[]).unwrap_err();
        assert!(e.contains("node-1/node.redb is missing"), "{e}");
        let id = std::fs::read_to_string(dir.path().join("cluster-id")).unwrap();
        let id = u64::from_str_radix(id.trim(), 16).unwrap();
        assert_eq!(stamped(&node_dir(dir.path(), 0)), Some(id));
        assert_eq!(stamped(&node_dir(dir.path(), 2)), Some(id));
        let plan = check_identity(dir.path(), 4, Some(&saved), &[1, 3]).unwrap();
        assert_eq!((plan.cluster_id, plan.rebuild), (id, vec![1, 3]));
    }
}
