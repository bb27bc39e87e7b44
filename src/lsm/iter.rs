//! Iterators over internal keys: the merge of several sources, the
//! concatenation of a level's tables, and the user-facing [`StoreIter`]
//! (newest visible version per user key, tombstones hidden).

use std::sync::Arc;

use crate::lsm::key::{self, InternalIterator, ValueKind};
use crate::lsm::table::TableIter;
use crate::{Error, Result};

use super::version::{TableFile, Version};

/// A merging iterator over every source of `v`, newest first: the active
/// memtable, the frozen ones, each L0 table, one [`LevelIter`] per level below.
pub(super) fn merged(v: &Version) -> MergingIter {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    children.push(Box::new(v.active.iter()));
    for fr in &v.frozen {
        children.push(Box::new(fr.mem.iter()));
    }
    for (level, files) in v.levels.iter().enumerate() {
        if level == 0 {
            for t in files {
                children.push(Box::new(t.table.iter()));
            }
        } else if !files.is_empty() {
            children.push(Box::new(LevelIter::new(files.clone())));
        }
    }
    MergingIter::new(children)
}

/// The merge of several [`InternalIterator`]s in [`key::compare`] order.
/// Among equal keys the child listed first wins (sources are listed newest
/// first); equal internal keys never occur in a consistent store.
pub(super) struct MergingIter {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
}

impl MergingIter {
    /// The merge of `children`, newest source first.
    pub(super) fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIter {
            children,
            current: None,
        }
    }

    fn pick(&mut self) {
        let mut best: Option<(usize, &[u8])> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            let k = c.key();
            if best.is_none_or(|(_, b)| key::compare(k, b).is_lt()) {
                best = Some((i, k));
            }
        }
        self.current = best.map(|(i, _)| i);
    }
}

impl InternalIterator for MergingIter {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        for c in &mut self.children {
            c.seek(target)?;
        }
        self.pick();
        Ok(())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_first()?;
        }
        self.pick();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.and_then(|i| self.children.get_mut(i)) {
            c.next()?;
        }
        self.pick();
        Ok(())
    }

    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn key(&self) -> &[u8] {
        self.current
            .and_then(|i| self.children.get(i))
            .map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current
            .and_then(|i| self.children.get(i))
            .map_or(&[], |c| c.value())
    }
}

/// The tables of one level below L0 (sorted, non-overlapping) as one
/// iterator; a table is opened for iteration only when it is reached.
pub(super) struct LevelIter {
    files: Vec<Arc<TableFile>>,
    index: usize,
    iter: Option<TableIter>,
    /// Whether the blocks read go into the block cache.
    fill_cache: bool,
}

impl LevelIter {
    /// An iterator over `files` (sorted by key, non-overlapping).
    pub(super) fn new(files: Vec<Arc<TableFile>>) -> Self {
        LevelIter {
            files,
            index: 0,
            iter: None,
            fill_cache: true,
        }
    }

    /// The same, for a compaction: the blocks it reads once do not push
    /// the readers' blocks out of the cache.
    pub(super) fn for_compaction(files: Vec<Arc<TableFile>>) -> Self {
        LevelIter {
            fill_cache: false,
            ..LevelIter::new(files)
        }
    }

    fn open(&self, f: &Arc<TableFile>) -> TableIter {
        let it = f.table.iter();
        if self.fill_cache {
            it
        } else {
            it.without_cache_fill()
        }
    }

    /// Moves on to later files until one holds an entry.
    fn skip_empty(&mut self) -> Result<()> {
        while !self.iter.as_ref().is_some_and(|i| i.valid()) {
            self.index += 1;
            let Some(f) = self.files.get(self.index) else {
                self.iter = None;
                return Ok(());
            };
            let mut it = self.open(f);
            it.seek_to_first()?;
            self.iter = Some(it);
        }
        Ok(())
    }
}

impl InternalIterator for LevelIter {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.index = self
            .files
            .partition_point(|f| key::compare(&f.rec.largest, target).is_lt());
        self.iter = match self.files.get(self.index) {
            Some(f) => {
                let mut it = self.open(f);
                it.seek(target)?;
                Some(it)
            }
            None => None,
        };
        if self.iter.is_some() {
            self.skip_empty()?;
        }
        Ok(())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.index = 0;
        self.iter = match self.files.first() {
            Some(f) => {
                let mut it = self.open(f);
                it.seek_to_first()?;
                Some(it)
            }
            None => None,
        };
        if self.iter.is_some() {
            self.skip_empty()?;
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(it) = &mut self.iter {
            it.next()?;
            self.skip_empty()?;
        }
        Ok(())
    }

    fn valid(&self) -> bool {
        self.iter.as_ref().is_some_and(|i| i.valid())
    }

    fn key(&self) -> &[u8] {
        self.iter.as_ref().map_or(&[], |i| i.key())
    }

    fn value(&self) -> &[u8] {
        self.iter.as_ref().map_or(&[], |i| i.value())
    }
}

/// A forward iterator over the user keys of a store at one sequence number:
/// for every user key its newest version visible there, tombstones hidden.
/// It reads the memtables and tables of the version it was made from, so
/// later writes, flushes and compactions do not change what it returns.
/// Errors (a corrupt block, an I/O error) are returned by the call that hit
/// them; the iterator is then invalid.
pub struct StoreIter {
    inner: MergingIter,
    seq: u64,
    current: Option<(Vec<u8>, Vec<u8>)>,
    /// Keeps the snapshot (if any) registered while the iterator lives.
    _pin: Option<Arc<dyn Send + Sync>>,
}

impl StoreIter {
    pub(super) fn new(inner: MergingIter, seq: u64, pin: Option<Arc<dyn Send + Sync>>) -> Self {
        StoreIter {
            inner,
            seq,
            current: None,
            _pin: pin,
        }
    }

    /// The sequence number the iterator reads at.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Positions at the first user key `>= target`.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.current = None;
        self.inner.seek(&key::lookup_key(target, self.seq))?;
        self.settle(None)
    }

    /// Positions at the first user key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.current = None;
        self.inner.seek_to_first()?;
        self.settle(None)
    }

    /// Moves to the next user key.
    #[expect(
        clippy::should_implement_trait,
        reason = "a fallible cursor step (LevelDB's iterator), not an Iterator"
    )]
    pub fn next(&mut self) -> Result<()> {
        let Some((k, _)) = self.current.take() else {
            return Ok(());
        };
        self.inner.next()?;
        self.settle(Some(k))
    }

    /// Whether the iterator is at a key.
    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    /// The current user key (empty when not [`valid`](Self::valid)).
    pub fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(k, _)| k)
    }

    /// The current value (empty when not [`valid`](Self::valid)).
    pub fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v)
    }

    /// Finds the next visible live entry whose user key is not `skip`.
    fn settle(&mut self, mut skip: Option<Vec<u8>>) -> Result<()> {
        while self.inner.valid() {
            let ikey = self.inner.key();
            let p = key::parse(ikey).ok_or_else(|| {
                Error::corruption("lsm iterator", 0, "an internal key without a valid trailer")
            })?;
            if p.seq > self.seq || skip.as_deref() == Some(p.user_key) {
                self.inner.next()?;
                continue;
            }
            let uk = p.user_key.to_vec();
            if p.kind == ValueKind::Delete {
                skip = Some(uk);
                self.inner.next()?;
                continue;
            }
            self.current = Some((uk, self.inner.value().to_vec()));
            return Ok(());
        }
        Ok(())
    }
}

impl std::fmt::Debug for StoreIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreIter")
            .field("seq", &self.seq)
            .field("key", &self.current.as_ref().map(|(k, _)| k))
            .finish()
    }
}
