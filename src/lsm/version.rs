//! Versions: an immutable view of the store (the memtable taking writes,
//! the frozen ones waiting for their flush, the tables of every level),
//! swapped atomically so readers never wait for writers, flushes or
//! compactions.

use std::sync::Arc;

use crate::lsm::key;
use crate::lsm::table::Table;
use crate::{Error, Result};

use super::manifest::{NUM_LEVELS, TableRecord};
use super::memtable::{Found, MemTable};

/// An open table and what the manifest records about it.
pub(super) struct TableFile {
    pub(super) rec: TableRecord,
    pub(super) table: Arc<Table>,
}

impl TableFile {
    /// Whether the table's user-key range contains `user_key`.
    pub(super) fn covers(&self, user_key: &[u8]) -> bool {
        self.rec.smallest_user() <= user_key && user_key <= self.rec.largest_user()
    }

    /// The newest version of `user_key` at `lookup` in this table (the
    /// table checks its filter).
    pub(super) fn get(&self, user_key: &[u8], lookup: &[u8]) -> Result<Option<Found>> {
        if !self.covers(user_key) {
            return Ok(None);
        }
        let Some((ikey, value)) = self.table.get(lookup)? else {
            return Ok(None);
        };
        let p = key::parse(&ikey).ok_or_else(|| {
            Error::corruption(
                super::manifest::table_name(self.rec.number),
                0,
                "an entry whose internal key has no valid trailer",
            )
        })?;
        Ok((p.user_key == user_key).then(|| Found::of(p.kind, value)))
    }
}

impl std::fmt::Debug for TableFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFile").field("rec", &self.rec).finish()
    }
}

/// A frozen memtable and the first log segment it does not cover.
#[derive(Debug, Clone)]
pub(super) struct Frozen {
    pub(super) mem: Arc<MemTable>,
    /// Every write of `mem` is in a segment before this one.
    pub(super) log_end: u64,
}

/// What readers see: one consistent state of the store.
#[derive(Debug, Clone)]
pub(super) struct Version {
    pub(super) active: Arc<MemTable>,
    /// Frozen memtables, newest first.
    pub(super) frozen: Vec<Frozen>,
    /// Tables per level: L0 newest first, L1.. sorted by key.
    pub(super) levels: Vec<Vec<Arc<TableFile>>>,
}

impl Version {
    /// An empty version with `levels` (each sorted as the manifest keeps them).
    pub(super) fn new(active: Arc<MemTable>, levels: Vec<Vec<Arc<TableFile>>>) -> Self {
        Version {
            active,
            frozen: Vec::new(),
            levels,
        }
    }

    /// The newest version of `user_key` with sequence number `<= seq`:
    /// the memtables newest first, L0 newest first, then one table per level.
    pub(super) fn get(&self, user_key: &[u8], seq: u64) -> Result<Option<Found>> {
        if let Some(f) = self.active.get(user_key, seq) {
            return Ok(Some(f));
        }
        for fr in &self.frozen {
            if let Some(f) = fr.mem.get(user_key, seq) {
                return Ok(Some(f));
            }
        }
        let lookup = key::lookup_key(user_key, seq);
        for (level, files) in self.levels.iter().enumerate() {
            if level == 0 {
                for t in files {
                    if let Some(f) = t.get(user_key, &lookup)? {
                        return Ok(Some(f));
                    }
                }
            } else {
                let i = files.partition_point(|t| key::compare(&t.rec.largest, &lookup).is_lt());
                if let Some(t) = files.get(i) {
                    if let Some(f) = t.get(user_key, &lookup)? {
                        return Ok(Some(f));
                    }
                }
            }
        }
        Ok(None)
    }

    /// The levels after removing `remove` (`(level, number)`) and adding
    /// `add`, each level kept in its order.
    pub(super) fn edited_levels(
        &self,
        remove: &[(usize, u64)],
        add: &[(usize, Arc<TableFile>)],
    ) -> Vec<Vec<Arc<TableFile>>> {
        let mut levels = self.levels.clone();
        for &(level, number) in remove {
            if let Some(l) = levels.get_mut(level) {
                l.retain(|t| t.rec.number != number);
            }
        }
        for (level, t) in add {
            if let Some(l) = levels.get_mut(*level) {
                if *level == 0 {
                    let at = l.partition_point(|x| x.rec.number > t.rec.number);
                    l.insert(at, t.clone());
                } else {
                    let at = l.partition_point(|x| key::compare(&x.rec.smallest, &t.rec.smallest).is_lt());
                    l.insert(at, t.clone());
                }
            }
        }
        levels
    }

    /// Bytes of the tables of `level`.
    pub(super) fn level_bytes(&self, level: usize) -> u64 {
        self.levels
            .get(level)
            .map_or(0, |l| l.iter().map(|t| t.rec.size).sum())
    }

    /// Tables of L0.
    pub(super) fn l0_files(&self) -> usize {
        self.levels.first().map_or(0, Vec::len)
    }

    /// The level invariants: every table's bounds in order; L0 newest first;
    /// each level below L0 sorted by key and non-overlapping in user keys
    /// (a user key lives in one table per level). A violation is
    /// [`Error::Corruption`].
    pub(super) fn check_levels(&self) -> Result<()> {
        if self.levels.len() != NUM_LEVELS {
            return Err(Error::corruption("lsm version", 0, "wrong number of levels"));
        }
        for (level, files) in self.levels.iter().enumerate() {
            for t in files {
                if key::compare(&t.rec.smallest, &t.rec.largest).is_gt() {
                    return Err(Error::corruption(
                        super::manifest::table_name(t.rec.number),
                        0,
                        format!("L{level}: smallest key after largest"),
                    ));
                }
            }
            for w in files.windows(2) {
                let [a, b] = w else { continue };
                let ok = if level == 0 {
                    a.rec.number > b.rec.number
                } else {
                    a.rec.largest_user() < b.rec.smallest_user()
                };
                if !ok {
                    return Err(Error::corruption(
                        "lsm version",
                        0,
                        format!(
                            "L{level}: tables {} and {} overlap or are out of order",
                            a.rec.number, b.rec.number
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
