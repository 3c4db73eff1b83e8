//! `DIR/coordinator-state`: what the coordinator must find again after a restart (its
//! membership and version floor, [`SavedState`]), written durably before a change takes
//! effect, so a restarted coordinator reads where it wrote last.

use super::layout::Layout;
use crate::policy::NodeId;
use crate::store::StoreError;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

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
/// A version floor above this is refused: versions are u64 and grow by blocks, so a floor
/// near 2^64 would wrap and later writes would carry versions below the stored ones (and be
/// dropped as older). 2^62 versions is far more than a data directory can use.
pub const VERSION_FLOOR_MAX: u64 = 1 << 62;
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
        if self.version_floor > VERSION_FLOOR_MAX {
            return Err(format!(
                "{}: version_floor {} is above {VERSION_FLOOR_MAX} (2^62): versions would wrap and later writes be dropped as older; the file is damaged",
                path.display(),
                self.version_floor
            ));
        }
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
    /// A file that cannot be read is a runtime failure; one that is not text or does not parse
    /// is bad input
    /// (a data directory written by something else: the user picks another or clears it).
    pub fn load(&self) -> Result<Option<SavedState>, StoreError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => SavedState::parse(&text, &self.path).map(Some).map_err(StoreError::Input),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            // Not text, or not a file: damaged like a file that does not parse (exit 2).
            Err(e)
                if matches!(e.kind(), std::io::ErrorKind::InvalidData | std::io::ErrorKind::IsADirectory) =>
            {
                Err(StoreError::Input(format!("{}: damaged: {e}", self.path.display())))
            }
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
        let wraps = SavedState { version_floor: u64::MAX - 5, ..state() };
        let e = wraps.check(&layout, 4, file.path()).unwrap_err();
        assert!(e.contains("version_floor 18446744073709551610 is above"), "{e}");
        let highest = SavedState { version_floor: VERSION_FLOOR_MAX, ..state() };
        assert_eq!(highest.check(&layout, 4, file.path()), Ok(()));
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
        // Every kind of damage is bad input (exit 2), whatever it is.
        for damage in [&b"partition s0 epoch 0\n"[..], b"\xff\xfe", b""] {
            std::fs::write(file.path(), damage).unwrap();
            assert!(matches!(file.load(), Err(StoreError::Input(_))), "{damage:?}");
        }
        std::fs::remove_file(file.path()).unwrap();
        std::fs::create_dir(file.path()).unwrap();
        assert!(matches!(file.load(), Err(StoreError::Input(_))), "a directory");
    }
}
