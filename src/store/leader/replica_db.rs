//! A leader-family replica's durable state in redb (`node-N/replica.redb`): its data, a key's
//! value per partition, and what the replica machine persists (per partition: the epoch it
//! knows, its role, its newest entry, the in-sync set). The data is also kept in memory (the
//! machine reads it, and a catch-up sends a partition whole); a step's writes are collected
//! and committed with the machine's durable state in one transaction (fsync) before the
//! step's sends leave.

use super::LeaderData;
use crate::policy::leader::{NodeSet, Position};
use crate::protocol::leader::{ReplicaDurable, Role, ShardDurable, Storage};
use crate::protocol::Stored;
use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

/// Key: the partition's index, then the key's bytes. Value: version (8 bytes, big-endian),
/// then 1 and the value's bytes, or 0 for nil.
const DATA: TableDefinition<&[u8], &[u8]> = TableDefinition::new("data");
/// `durable`: the machine's durable state (JSON); `cluster`: the cluster id (8 bytes).
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

pub const DATABASE_FILE: &str = "replica.redb";

/// One partition's durable fields, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ShardRecord {
    epoch: u64,
    role: Role,
    last: Position<u64, u64>,
    in_sync: NodeSet,
    in_sync_seq: u8,
}

pub struct ReplicaDb {
    /// Shared with the commit being written, which runs on a thread of its own.
    db: Arc<Database>,
    /// Per partition, every key's stored value.
    data: Vec<BTreeMap<Vec<u8>, Stored<LeaderData>>>,
    /// Written since the last commit.
    dirty: BTreeSet<(u8, Vec<u8>)>,
    /// Replaced whole since the last commit (a catch-up).
    restored: BTreeSet<u8>,
    /// What the machine persisted last, or what the commit being written persists.
    committed: Option<ReplicaDurable<LeaderData>>,
}

/// A key of the `DATA` table and its value, encoded.
type Row = (Vec<u8>, Vec<u8>);

/// A commit's writes, taken out of the replica's memory when the commit starts, so that the
/// replica can step on while they are written (the node sends nothing of those later steps
/// before a commit that holds them has ended).
pub struct Staged {
    db: Arc<Database>,
    /// Partitions replaced whole (a catch-up), with their contents, encoded.
    restored: Vec<(u8, Vec<Row>)>,
    /// Keys written since the last commit, with their values, encoded.
    writes: Vec<Row>,
    /// The machine's durable state, as `META`'s `durable` holds it.
    durable_json: Vec<u8>,
}

fn db_error(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn encode(stored: &Stored<LeaderData>) -> Vec<u8> {
    let mut out = stored.version.to_be_bytes().to_vec();
    match &stored.value {
        Some(v) => {
            out.push(1);
            out.extend_from_slice(v);
        }
        None => out.push(0),
    }
    out
}

fn decode(bytes: &[u8]) -> Result<Stored<LeaderData>, String> {
    if bytes.len() < 9 || bytes[8] > 1 {
        return Err(format!("a stored value of {} bytes is malformed", bytes.len()));
    }
    let version = u64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
    let value = (bytes[8] == 1).then(|| bytes[9..].to_vec());
    Ok(Stored { version, value })
}

fn db_key(shard: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(shard);
    k.extend_from_slice(key);
    k
}

impl ReplicaDb {
    /// Open (or create) the database in `dir` for a cluster of `partitions` partitions with id
    /// `cluster_id`; one of another cluster is refused.
    pub fn open(dir: &Path, cluster_id: u64, partitions: usize) -> Result<ReplicaDb, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join(DATABASE_FILE);
        // As a quorum node's: the node of a `store up` that was just killed may still hold it.
        let db = crate::store::node::storage::open_database(&path, true)?;
        let mut data = vec![BTreeMap::new(); partitions];
        let mut committed = None;
        {
            let txn = db.begin_write().map_err(db_error)?;
            {
                let mut meta = txn.open_table(META).map_err(db_error)?;
                let stamped = meta.get("cluster").map_err(db_error)?.map(|v| v.value().to_vec());
                match stamped {
                    Some(id) if id != cluster_id.to_be_bytes() => {
                        return Err(format!(
                            "{}: belongs to another cluster than this data directory's ({cluster_id:016x})",
                            path.display()
                        ))
                    }
                    Some(_) => {}
                    None => {
                        meta.insert("cluster", &cluster_id.to_be_bytes()[..]).map_err(db_error)?;
                    }
                }
                if let Some(json) = meta.get("durable").map_err(db_error)? {
                    let records: Vec<Option<ShardRecord>> = serde_json::from_slice(json.value())
                        .map_err(|e| format!("{}: the replica's state is malformed: {e}", path.display()))?;
                    if records.len() != partitions {
                        return Err(format!(
                            "{}: holds {} partitions, the cluster has {partitions}",
                            path.display(),
                            records.len()
                        ));
                    }
                    committed = Some(ReplicaDurable {
                        shards: records.into_iter().map(|r| r.map(shard_durable)).collect(),
                    });
                }
                let table = txn.open_table(DATA).map_err(db_error)?;
                for entry in table.iter().map_err(db_error)? {
                    let (key, value) = entry.map_err(db_error)?;
                    let key = key.value();
                    let shard = usize::from(key[0]);
                    if shard >= partitions {
                        return Err(format!(
                            "{}: a key of partition {shard}, the cluster has {partitions}",
                            path.display()
                        ));
                    }
                    data[shard].insert(key[1..].to_vec(), decode(value.value())?);
                }
            }
            txn.commit().map_err(db_error)?;
        }
        Ok(ReplicaDb { db: Arc::new(db), data, dirty: BTreeSet::new(), restored: BTreeSet::new(), committed })
    }

    /// What the machine persisted last, if it ever did (read when the node starts; while it
    /// runs, what its last staged commit persists, written or not).
    pub fn durable(&self) -> Option<&ReplicaDurable<LeaderData>> {
        self.committed.as_ref()
    }

    /// Make the writes since the last commit and `durable` durable together, if either changed.
    #[cfg(test)]
    pub fn commit(&mut self, durable: &ReplicaDurable<LeaderData>) -> Result<(), String> {
        self.stage(durable).map_or(Ok(()), |staged| staged.write())
    }

    /// The writes since the last commit and `durable`, to be written together ([`Staged::write`]),
    /// or `None` if neither changed. From here on they count as committed: a failed write ends
    /// the node.
    pub fn stage(&mut self, durable: &ReplicaDurable<LeaderData>) -> Option<Staged> {
        if self.dirty.is_empty() && self.restored.is_empty() && self.committed.as_ref() == Some(durable) {
            return None;
        }
        let restored = std::mem::take(&mut self.restored)
            .into_iter()
            .map(|shard| {
                let contents = self.data[usize::from(shard)]
                    .iter()
                    .map(|(key, stored)| (db_key(shard, key), encode(stored)))
                    .collect();
                (shard, contents)
            })
            .collect::<Vec<_>>();
        let writes = std::mem::take(&mut self.dirty)
            .into_iter()
            .filter(|(shard, _)| !restored.iter().any(|(r, _)| r == shard))
            .map(|(shard, key)| {
                let stored = &self.data[usize::from(shard)][&key];
                (db_key(shard, &key), encode(stored))
            })
            .collect();
        let records: Vec<Option<ShardRecord>> =
            durable.shards.iter().map(|s| s.as_ref().map(shard_record)).collect();
        let durable_json = serde_json::to_vec(&records).expect("records serialize");
        self.committed = Some(durable.clone());
        Some(Staged { db: Arc::clone(&self.db), restored, writes, durable_json })
    }

    /// The database, to hold its write lock from a test (a disk that stalls).
    #[cfg(test)]
    pub(crate) fn database(&self) -> Arc<Database> {
        Arc::clone(&self.db)
    }
}

impl Staged {
    /// Write the staged commit in one transaction (fsync).
    pub fn write(&self) -> Result<(), String> {
        Staged::write_all(std::slice::from_ref(self))
    }

    /// Write staged commits, in the order they were staged, in one transaction (fsync): a
    /// group commit of what was staged while the last one was written.
    pub fn write_all(group: &[Staged]) -> Result<(), String> {
        let Some(last) = group.last() else { return Ok(()) };
        let txn = last.db.begin_write().map_err(db_error)?;
        {
            let mut table = txn.open_table(DATA).map_err(db_error)?;
            for staged in group {
                for (shard, contents) in &staged.restored {
                    let stale: Vec<Vec<u8>> = table
                        .range(&[*shard][..]..)
                        .map_err(db_error)?
                        .map_while(|e| e.ok().map(|(k, _)| k.value().to_vec()))
                        .take_while(|k| k[0] == *shard)
                        .collect();
                    for k in stale {
                        table.remove(&k[..]).map_err(db_error)?;
                    }
                    for (key, value) in contents {
                        table.insert(&key[..], &value[..]).map_err(db_error)?;
                    }
                }
                for (key, value) in &staged.writes {
                    table.insert(&key[..], &value[..]).map_err(db_error)?;
                }
            }
            txn.open_table(META)
                .map_err(db_error)?
                .insert("durable", &last.durable_json[..])
                .map_err(db_error)?;
        }
        txn.commit().map_err(db_error)
    }
}

fn shard_record(s: &ShardDurable<LeaderData>) -> ShardRecord {
    ShardRecord { epoch: s.epoch, role: s.role, last: s.last, in_sync: s.in_sync, in_sync_seq: s.in_sync_seq }
}

fn shard_durable(r: ShardRecord) -> ShardDurable<LeaderData> {
    ShardDurable {
        epoch: r.epoch,
        role: r.role,
        last: r.last,
        in_sync: r.in_sync,
        in_sync_seq: r.in_sync_seq,
    }
}

impl Storage<LeaderData> for ReplicaDb {
    fn read(&self, shard: u8, key: &Vec<u8>) -> Stored<LeaderData> {
        self.data[usize::from(shard)].get(key).cloned().unwrap_or_default()
    }

    fn write(&mut self, shard: u8, key: &Vec<u8>, stored: Stored<LeaderData>) {
        self.data[usize::from(shard)].insert(key.clone(), stored);
        self.dirty.insert((shard, key.clone()));
    }

    fn snapshot(&self, shard: u8) -> Vec<(Vec<u8>, Stored<LeaderData>)> {
        self.data[usize::from(shard)].iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    fn restore(&mut self, shard: u8, snapshot: &Vec<(Vec<u8>, Stored<LeaderData>)>) {
        self.data[usize::from(shard)] = snapshot.iter().cloned().collect();
        self.restored.insert(shard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node started while the one before it (a killed `store up`'s) still holds the database
    /// waits for it rather than failing at once.
    #[test]
    fn a_database_still_held_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let held = ReplicaDb::open(dir.path(), 7, 1).unwrap();
        let released = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(held);
        });
        let opened = ReplicaDb::open(dir.path(), 7, 1);
        released.join().unwrap();
        assert!(opened.is_ok(), "{:?}", opened.err());
    }

    #[test]
    fn writes_and_a_catch_up_survive_a_reopen_only_once_committed() {
        let dir = std::env::temp_dir().join(format!("replicheck-replica-db-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let durable = |epoch: u64| ReplicaDurable {
            shards: [
                Some(ShardDurable {
                    epoch,
                    role: Role::Primary,
                    last: Position { epoch, version: 2 },
                    in_sync: 0b11,
                    in_sync_seq: 1,
                }),
                None,
            ]
            .into_iter()
            .collect(),
        };
        let v = |version: u64, s: &str| Stored::<LeaderData> { version, value: Some(s.as_bytes().to_vec()) };
        {
            let mut db = ReplicaDb::open(&dir, 9, 2).unwrap();
            assert!(db.durable().is_none());
            db.write(0, &b"a".to_vec(), v(1, "x"));
            db.write(0, &b"b".to_vec(), v(2, "y"));
            db.write(1, &b"c".to_vec(), v(1, "z"));
            db.commit(&durable(1)).unwrap();
            // Uncommitted: lost at the crash below.
            db.write(0, &b"d".to_vec(), v(3, "w"));
        }
        {
            let mut db = ReplicaDb::open(&dir, 9, 2).unwrap();
            assert_eq!(db.durable(), Some(&durable(1)));
            assert_eq!(db.read(0, &b"b".to_vec()), v(2, "y"));
            assert_eq!(db.read(0, &b"d".to_vec()), Stored::default());
            // A catch-up drops what its primary does not have.
            db.restore(0, &vec![(b"a".to_vec(), v(5, "q"))]);
            db.commit(&durable(2)).unwrap();
        }
        let db = ReplicaDb::open(&dir, 9, 2).unwrap();
        assert_eq!(db.snapshot(0), vec![(b"a".to_vec(), v(5, "q"))]);
        assert_eq!(db.read(1, &b"c".to_vec()), v(1, "z"), "the other partition is untouched");
        assert_eq!(db.durable(), Some(&durable(2)));
        drop(db);
        let other = ReplicaDb::open(&dir, 10, 2).err().expect("another cluster's database");
        assert!(other.contains("another cluster"), "{other}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
