//! `--shard I/N`: one of N jobs that split a batch (a check's runs, a simulation's walks, a
//! sweep's points) by index modulo N; `replicheck merge` puts the shards' reports together.

use serde::Serialize;

/// `--shard I/N`: this job takes the items whose index is I modulo N (I from 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard \"{text}\": expected I/N with 0 <= I < N, e.g. 0/4");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}
