//! A node's write-ahead log: what makes a write durable between two durable commits of redb.
//!
//! A durable redb commit writes a dozen scattered pages and syncs them; with three nodes
//! syncing at once on one disk that took 350 us, against 210 us for appending the same writes
//! to a file whose blocks are already written and syncing only its data. So a group of writes
//! is appended here and synced before it is acked, applied to redb without a sync, and redb
//! is committed durably only every few groups (a checkpoint), after which the log starts over.
//!
//! Which records count: each carries the database's log id and the log generation it was
//! written in. redb holds both (`log_id`, `log_generation`), and a checkpoint raises the
//! generation in the same durable commit that makes every applied write durable, so records
//! of an earlier generation (still in the file, past the new ones) are never read again.
//! Reading stops at the first record that is torn, of another id or generation: records are
//! appended in order, so nothing after it was acked. Replaying a record twice is harmless: a
//! write keeps the newest version of its key. Each group starts on a block of its own
//! (`BLOCK_BYTES`), so appending a group never rewrites a block that holds an acked one.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The log in a node's data directory.
pub const LOG_FILE: &str = "node.log";
/// The log's size: written with zeros once, so that appending never allocates blocks and a
/// data sync need not commit the file system's journal.
pub const LOG_BYTES: u64 = 1 << 20;
/// Groups start at multiples of this: a torn write of the next group cannot touch the blocks
/// of an acked one.
const BLOCK_BYTES: u64 = 4096;
/// A record's header: payload length, CRC-32 of the payload.
const HEADER_BYTES: usize = 8;
/// log id, generation, key length.
const FIXED_PAYLOAD_BYTES: usize = 8 + 8 + 4;

/// One logged write: a key and its record as redb stores it (its version and value, in
/// `storage`'s encoding, which the log does not read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    pub key: Vec<u8>,
    pub record: Vec<u8>,
}

/// The log file and where the next record goes.
pub struct WriteLog {
    path: PathBuf,
    file: File,
    /// Bytes of the current generation's records.
    end: u64,
    log_id: u64,
    generation: u64,
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> String {
    format!("{} ({what} {})", super::storage::cause(&e), path.display())
}

/// Create the log in `dir`, zero-filled, unless it exists (its records are read first, then
/// `WriteLog::open` gives it its size).
pub fn create_if_missing(dir: &Path) -> Result<(), String> {
    let path = dir.join(LOG_FILE);
    match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(file) => zero_fill(&path, &file, dir),
        // Perhaps created just before a crash: its name is made durable all the same.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => sync_dir(dir),
        Err(e) => Err(io_error(&path, "create", e)),
    }
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_error(dir, "sync", e))
}

fn zero_fill(path: &Path, file: &File, dir: &Path) -> Result<(), String> {
    file.set_len(0).map_err(|e| io_error(path, "truncate", e))?;
    let zeros = vec![0u8; LOG_BYTES as usize];
    (&*file).write_all(&zeros).map_err(|e| io_error(path, "write", e))?;
    file.sync_all().map_err(|e| io_error(path, "sync", e))?;
    // The file's name is durable too: a database that logged is never without its log.
    sync_dir(dir)
}

impl WriteLog {
    /// Open (or create, zero-filled) the log in `dir`, for records of `log_id` in
    /// `generation`, empty: the caller replayed what was in it (`read_records`) into a
    /// durable commit that moved to `generation`. A log of another size is zero-filled anew.
    pub fn open(dir: &Path, log_id: u64, generation: u64) -> Result<WriteLog, String> {
        let path = dir.join(LOG_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io_error(&path, "open", e))?;
        let len = file.metadata().map_err(|e| io_error(&path, "read", e))?.len();
        if len != LOG_BYTES {
            zero_fill(&path, &file, dir)?;
        }
        Ok(WriteLog { path, file, end: 0, log_id, generation })
    }

    /// Whether a group of `bytes` more fits.
    pub fn fits(&self, bytes: usize) -> bool {
        self.end + bytes as u64 <= LOG_BYTES
    }

    /// Append `writes` as one group and sync it: durable once this returns `Ok`. On an error
    /// the group's first header is zeroed again (and synced), so that no replay applies a
    /// write that was refused; if even that fails, the error says the write may be applied.
    pub fn append(&mut self, writes: &[&Logged]) -> Result<(), String> {
        let mut bytes = Vec::new();
        for w in writes {
            encode(&mut bytes, self.log_id, self.generation, w);
        }
        // Padded with zeros to the block's end: what an earlier generation left there is
        // not read as the next record.
        bytes.resize((bytes.len() as u64).next_multiple_of(BLOCK_BYTES) as usize, 0);
        debug_assert!(self.fits(bytes.len()), "the caller checks room first");
        let appended = self
            .file
            .write_all_at(&bytes, self.end)
            .map_err(|e| io_error(&self.path, "write", e))
            .and_then(|()| self.file.sync_data().map_err(|e| io_error(&self.path, "sync", e)));
        if let Err(why) = appended {
            let zeroed =
                self.file.write_all_at(&[0u8; HEADER_BYTES], self.end).and_then(|()| self.file.sync_data());
            return Err(match zeroed {
                Ok(()) => why,
                Err(_) => format!("{why}; the write may still be applied when the node restarts"),
            });
        }
        self.end += bytes.len() as u64;
        Ok(())
    }

    /// A checkpoint made every logged write durable in redb, now at `generation`: start over.
    pub fn restart(&mut self, generation: u64) {
        assert!(generation > self.generation, "generations only grow");
        self.generation = generation;
        self.end = 0;
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// The bytes `writes` take in the log as one group, padded to its last block's end.
pub fn encoded_bytes(writes: &[&Logged]) -> usize {
    let records: usize = writes.iter().map(|w| record_bytes(w)).sum();
    (records as u64).next_multiple_of(BLOCK_BYTES) as usize
}

fn record_bytes(w: &Logged) -> usize {
    HEADER_BYTES + FIXED_PAYLOAD_BYTES + w.key.len() + w.record.len()
}

fn encode(out: &mut Vec<u8>, log_id: u64, generation: u64, w: &Logged) {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_BYTES]);
    out.extend_from_slice(&log_id.to_be_bytes());
    out.extend_from_slice(&generation.to_be_bytes());
    out.extend_from_slice(&u32::try_from(w.key.len()).expect("keys are bounded").to_be_bytes());
    out.extend_from_slice(&w.key);
    out.extend_from_slice(&w.record);
    let payload_len = out.len() - start - HEADER_BYTES;
    let crc = crc32fast::hash(&out[start + HEADER_BYTES..]);
    out[start..start + 4].copy_from_slice(&u32::try_from(payload_len).expect("bounded").to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
}

/// The records of `log_id` in `generation` at the start of the log in `dir`, in the order
/// they were written (none if there is no log).
pub fn read_records(dir: &Path, log_id: u64, generation: u64) -> Result<Vec<Logged>, String> {
    let path = dir.join(LOG_FILE);
    let mut bytes = Vec::new();
    match File::open(&path) {
        Ok(mut f) => f.read_to_end(&mut bytes).map_err(|e| io_error(&path, "read", e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(&path, "open", e)),
    };
    let mut records = Vec::new();
    let mut at = 0;
    while let Some(header) = bytes.get(at..at + HEADER_BYTES) {
        if header == [0u8; HEADER_BYTES] {
            // A group's padding: the next group starts on the next block. A zero header at
            // the start of a block: no group was appended there, the log ends.
            let next = (at as u64).next_multiple_of(BLOCK_BYTES) as usize;
            if next == at {
                break;
            }
            at = next;
            continue;
        }
        let len = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(header[4..].try_into().expect("4 bytes"));
        let Some(payload) = bytes.get(at + HEADER_BYTES..at + HEADER_BYTES + len) else { break };
        if len < FIXED_PAYLOAD_BYTES + 1 || crc32fast::hash(payload) != crc {
            break;
        }
        let u64_at = |i: usize| u64::from_be_bytes(payload[i..i + 8].try_into().expect("8 bytes"));
        if u64_at(0) != log_id || u64_at(8) != generation {
            break;
        }
        let key_len = u32::from_be_bytes(payload[16..20].try_into().expect("4 bytes")) as usize;
        let Some(key) = payload.get(20..20 + key_len) else { break };
        records.push(Logged { key: key.to_vec(), record: payload[20 + key_len..].to_vec() });
        at += HEADER_BYTES + len;
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(i: u64) -> Logged {
        Logged { key: format!("k{i}").into_bytes(), record: vec![i as u8; 9 + (i % 3) as usize * 20] }
    }

    /// What was appended in this generation is read back; a torn record ends the log, and so
    /// do the records of an earlier generation behind the new ones and another database's.
    #[test]
    fn records_of_this_generation_are_read_back_up_to_the_first_torn_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = WriteLog::open(dir.path(), 7, 1).unwrap();
        let first: Vec<Logged> = (1..=5).map(write).collect();
        log.append(&first.iter().collect::<Vec<_>>()).unwrap();
        log.append(&[&write(6)]).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join(LOG_FILE)).unwrap().len(), LOG_BYTES);
        let all: Vec<Logged> = (1..=6).map(write).collect();
        assert_eq!(read_records(dir.path(), 7, 1).unwrap(), all);
        assert!(read_records(dir.path(), 8, 1).unwrap().is_empty(), "another database's log");
        assert!(read_records(dir.path(), 7, 2).unwrap().is_empty(), "an earlier generation");

        // After a checkpoint, two new records over the old ones: the old ones behind are not read.
        log.restart(2);
        log.append(&[&write(10), &write(11)]).unwrap();
        assert_eq!(read_records(dir.path(), 7, 2).unwrap(), vec![write(10), write(11)]);

        // Groups start on blocks of their own: the third group on the second block.
        log.append(&[&write(12)]).unwrap();
        log.append(&[&write(13)]).unwrap();
        assert_eq!(log.end, 3 * BLOCK_BYTES);
        let all = vec![write(10), write(11), write(12), write(13)];
        assert_eq!(read_records(dir.path(), 7, 2).unwrap(), all);
        // A record torn by a crash (its last byte never written) ends the log there.
        let end = BLOCK_BYTES + record_bytes(&write(12)) as u64;
        let f = OpenOptions::new().write(true).open(dir.path().join(LOG_FILE)).unwrap();
        f.write_all_at(&[0xff], end - 1).unwrap();
        assert_eq!(read_records(dir.path(), 7, 2).unwrap(), vec![write(10), write(11)]);

        // Reopened (as after a replay): same size, empty for the new generation.
        let log = WriteLog::open(dir.path(), 7, 3).unwrap();
        assert!(log.fits(LOG_BYTES as usize) && !log.fits(LOG_BYTES as usize + 1));
        assert!(read_records(dir.path(), 7, 3).unwrap().is_empty());
    }

    #[test]
    fn no_log_is_an_empty_log() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_records(dir.path(), 1, 0).unwrap().is_empty());
    }
}
