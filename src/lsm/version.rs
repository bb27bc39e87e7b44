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

impl TableFile {
    /// [`TableFile::get`] for the keys `at` of `user_keys` (with their
    /// lookup keys), their blocks read in one batch ([`Table::get_many`]):
    /// `(position in user_keys, what the table holds)` for each key found.
    pub(super) fn get_many(
        &self,
        user_keys: &[&[u8]],
        lookups: &[Vec<u8>],
        at: &[usize],
        queue_depth: usize,
    ) -> Result<Vec<(usize, Found)>> {
        let mut which: Vec<usize> = Vec::with_capacity(at.len());
        let mut batch: Vec<&[u8]> = Vec::with_capacity(at.len());
        for &i in at {
            if let (Some(&u), Some(l)) = (user_keys.get(i), lookups.get(i)) {
                if self.covers(u) {
                    which.push(i);
                    batch.push(l);
                }
            }
        }
        let got = self.table.get_many(&batch, queue_depth)?;
        let mut found = Vec::new();
        for (i, g) in which.into_iter().zip(got) {
            let Some((ikey, value)) = g else { continue };
            let p = key::parse(&ikey).ok_or_else(|| {
                Error::corruption(
                    super::manifest::table_name(self.rec.number),
                    0,
                    "an entry whose internal key has no valid trailer",
                )
            })?;
            if Some(&p.user_key) == user_keys.get(i) {
                found.push((i, Found::of(p.kind, value)));
            }
        }
        Ok(found)
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

    /// [`Version::get`] for many keys: the memtables, then each L0 table
    /// (newest first) and each level for the keys not found yet, every
    /// table's blocks for all its keys read in one batch with up to
    /// `queue_depth` reads in flight. Answers in the order of `user_keys`.
    pub(super) fn get_many(
        &self,
        user_keys: &[&[u8]],
        seq: u64,
        queue_depth: usize,
    ) -> Result<Vec<Option<Found>>> {
        let mut out: Vec<Option<Found>> = vec![None; user_keys.len()];
        // Keys not found yet, in key order (a table's reads then ascend).
        let mut open: Vec<usize> = Vec::with_capacity(user_keys.len());
        for (i, &k) in user_keys.iter().enumerate() {
            let hit = self
                .active
                .get(k, seq)
                .or_else(|| self.frozen.iter().find_map(|fr| fr.mem.get(k, seq)));
            match (hit, out.get_mut(i)) {
                (Some(f), Some(o)) => *o = Some(f),
                _ => open.push(i),
            }
        }
        open.sort_by(|&a, &b| user_keys.get(a).cmp(&user_keys.get(b)));
        let lookups: Vec<Vec<u8>> = user_keys.iter().map(|k| key::lookup_key(k, seq)).collect();
        let probe = |t: &TableFile, at: &[usize], out: &mut Vec<Option<Found>>| -> Result<()> {
            for (i, f) in t.get_many(user_keys, &lookups, at, queue_depth)? {
                if let Some(o) = out.get_mut(i) {
                    *o = Some(f);
                }
            }
            Ok(())
        };
        for (level, files) in self.levels.iter().enumerate() {
            if open.is_empty() {
                break;
            }
            if level == 0 {
                for t in files {
                    probe(t, &open, &mut out)?;
                    open.retain(|&i| out.get(i).is_some_and(Option::is_none));
                }
                continue;
            }
            // Each key's one table of the level; keys in order, so each
            // table's keys are consecutive.
            let mut from = 0;
            while from < open.len() {
                let table_of = |i: usize| {
                    let l = lookups.get(i).map_or(&[][..], Vec::as_slice);
                    files.partition_point(|t| key::compare(&t.rec.largest, l).is_lt())
                };
                let ti = table_of(open.get(from).copied().unwrap_or(0));
                let mut to = from + 1;
                while open.get(to).is_some_and(|&i| table_of(i) == ti) {
                    to += 1;
                }
                if let (Some(t), Some(at)) = (files.get(ti), open.get(from..to)) {
                    probe(t, at, &mut out)?;
                }
                from = to;
            }
            open.retain(|&i| out.get(i).is_some_and(Option::is_none));
        }
        Ok(out)
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
