//! Reading a table: open (header, footer, the four sections), point
//! lookups and forward iteration.
//!
//! A lookup of internal key `t` asks the index for `[lo, hi]`, the ordinals
//! that may be `t`'s lower bound, reads the data blocks covering ordinals
//! `[lo - 1, hi]` in one `read_at`, and walks them from the restart point
//! before `lo - 1`. The entry before the range being `< t` and the last one
//! `>= t` (or the table's ends) proves that the lower bound is inside; if an
//! index's range does not hold that proof, the range is doubled and read
//! again, so an index can cost reads but never give a wrong answer.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use super::TableMemory;
use super::block::BlockView;
use super::bloom::Bloom;
use super::builder::show;
use super::cache::{BlockCache, CachedBlock};
use super::index::TableIndex;
use super::layout::{FOOTER_LEN, Footer, HEADER_LEN, Handles, Props, check_header, section};
use crate::lsm::key::{self, InternalIterator};
use crate::storage::ReadStorage;
use crate::{Error, Result};

/// An open table: index, block handles and filter resident; data blocks
/// read on demand through the storage it was opened with. `Send + Sync`:
/// lookups and iterators may run on any number of threads.
#[derive(Debug)]
pub struct Table {
    storage: Arc<dyn ReadStorage>,
    name: String,
    props: Props,
    handles: Handles,
    index: TableIndex,
    filter: Option<Bloom>,
    /// The store's block cache and this table's id in it.
    cache: Option<(Arc<BlockCache>, u64)>,
}

/// Consecutive data blocks, each checked (from the cache or one read).
#[derive(Debug)]
struct Run {
    /// Index of the first block.
    first: usize,
    blocks: Vec<Arc<CachedBlock>>,
}

impl Run {
    fn block(&self, _table: &Table, b: usize) -> Option<(&[u8], BlockView)> {
        let c = self.blocks.get(b.checked_sub(self.first)?)?;
        Some((&c.bytes, c.view))
    }
}

/// A position at one entry of a run.
#[derive(Debug, Clone, Default)]
struct Walker {
    block: usize,
    /// Offset of the next entry in the block.
    next: usize,
    key: Vec<u8>,
    value: Range<usize>,
    ordinal: u64,
}

impl Table {
    /// Opens a table. `storage` is already wrapped by the caller's
    /// `IoContext` (counting, and the shared page cache as the block cache).
    /// Checks the magic number and version (header and footer), the footer's
    /// and every section's checksum and every size against the file, and the
    /// build id when `build_id` is `Some`. Three reads: header, footer, and
    /// the sections together.
    ///
    /// Errors: [`Error::BadMagic`], [`Error::UnsupportedVersion`],
    /// [`Error::CorruptionAt`] naming the file (a wrong build id too).
    pub fn open(storage: Arc<dyn ReadStorage>, build_id: Option<u64>) -> Result<Table> {
        let name = storage.name().to_string();
        let len = storage.len()?;
        let min = (HEADER_LEN + FOOTER_LEN) as u64;
        if len < min {
            return Err(Error::Truncated {
                file: name,
                expected: min,
                found: len,
            });
        }
        let mut h = [0u8; HEADER_LEN];
        storage.read_at(0, &mut h)?;
        check_header(&h, &name)?;
        let mut f = [0u8; FOOTER_LEN];
        let footer_at = len - FOOTER_LEN as u64;
        storage.read_at(footer_at, &mut f)?;
        let footer = Footer::decode(&f, len, &name)?;
        if let Some(want) = build_id {
            if want != footer.build_id {
                return Err(Error::corruption_at(
                    &name,
                    footer_at,
                    format!(
                        "written by build {:#x}, expected build {want:#x}",
                        footer.build_id
                    ),
                ));
            }
        }
        let data_end = footer.sections.first().map_or(0, |s| s.0);
        let meta_len = usize::try_from(footer_at - data_end)
            .map_err(|_| Error::corruption_at(&name, footer_at, "sections too large"))?;
        let mut meta = vec![0u8; meta_len];
        storage.read_at(data_end, &mut meta)?;
        let props = Props::decode(section(&meta, &footer, 3, &name)?, &name)?;
        let handles = Handles::decode(section(&meta, &footer, 0, &name)?, props.entries, data_end, &name)?;
        let index = TableIndex::decode(section(&meta, &footer, 1, &name)?, props.entries, &name)?;
        if matches!(index, TableIndex::Fences(_)) != (props.kind == "fp") {
            return Err(Error::corruption_at(
                &name,
                data_end,
                "index section and kind disagree",
            ));
        }
        let filter_bytes = section(&meta, &footer, 2, &name)?;
        let filter = match (props.bloom_bits_per_key, filter_bytes.is_empty()) {
            (0, true) => None,
            (b, false) if b > 0 => Some(Bloom::decode(filter_bytes, &name)?),
            _ => {
                return Err(Error::corruption_at(
                    &name,
                    data_end,
                    "filter section and properties disagree",
                ));
            }
        };
        Ok(Table {
            storage,
            name,
            props,
            handles,
            index,
            filter,
            cache: None,
        })
    }

    /// This table, reading its data blocks through `cache` (shared by the
    /// tables of a store; the table takes an id of its own in it).
    pub fn with_cache(mut self, cache: Arc<BlockCache>) -> Table {
        let id = cache.table_id();
        self.cache = Some((cache, id));
        self
    }

    /// The file's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the Bloom filter admits `user_key` (true without a filter).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// The first entry with internal key `>= lookup` (normally
    /// `key::lookup_key(user_key, seq)`) if its user key is `lookup`'s:
    /// `Some((ikey, value))`, the caller reading kind and sequence number
    /// from `ikey`. Uses the filter, the key range, then the index, and reads
    /// the blocks covering the index's range (one `read_at`, more only if the
    /// range does not hold the key). Errors: corruption of the blocks read.
    pub fn get(&self, lookup: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let user = key::user_key(lookup);
        if !self.may_contain(user)
            || user < key::user_key(&self.props.smallest)
            || key::compare(lookup, &self.props.largest) == Ordering::Greater
        {
            return Ok(None);
        }
        let Some((run, w)) = self.locate(lookup, true)? else {
            return Ok(None);
        };
        if key::user_key(&w.key) != user {
            return Ok(None);
        }
        let value = run
            .block(self, w.block)
            .and_then(|(bytes, _)| bytes.get(w.value.clone()))
            .ok_or_else(|| self.corrupt(w.block, "value outside its block"))?;
        Ok(Some((w.key, value.to_vec())))
    }

    /// A forward iterator over the table (unpositioned until a seek).
    pub fn iter(self: &Arc<Self>) -> TableIter {
        TableIter {
            table: self.clone(),
            run: None,
            at: Walker::default(),
            valid: false,
            error: None,
            fill_cache: true,
        }
    }

    /// Resident bytes of the index (with the block handles) and the filter.
    pub fn memory(&self) -> TableMemory {
        TableMemory {
            index_bytes: self.index.memory_bytes() + self.handles.memory_bytes(),
            filter_bytes: self.filter.as_ref().map_or(0, Bloom::memory_bytes),
        }
    }

    /// Number of entries.
    pub fn entries(&self) -> u64 {
        self.props.entries
    }

    /// Number of data blocks.
    pub fn blocks(&self) -> usize {
        self.handles.blocks()
    }

    /// Smallest internal key.
    pub fn smallest(&self) -> &[u8] {
        &self.props.smallest
    }

    /// Largest internal key.
    pub fn largest(&self) -> &[u8] {
        &self.props.largest
    }

    /// The index kind (`fp`, `pgm`, ...).
    pub fn index_kind(&self) -> &str {
        &self.props.kind
    }

    /// The position boundary the index was built with.
    pub fn boundary(&self) -> u32 {
        self.props.boundary
    }

    /// The index's claim for `t`: ordinals `[lo, hi]` that may hold its
    /// lower bound (tests and tools; lookups check it).
    pub fn index_range(&self, t: &[u8]) -> Result<(u64, u64)> {
        self.index.range(t)
    }

    fn corrupt(&self, b: usize, what: &str) -> Error {
        Error::corruption_at(
            &self.name,
            self.handles.offset(b),
            format!("data block {b}: {what}"),
        )
    }

    /// Blocks `[first, last]`, checked: those in the block cache from it,
    /// the others read in one call (from the first missing block to the
    /// last) and added to it.
    fn read_run(&self, first: usize, last: usize, fill: bool) -> Result<Run> {
        let mut blocks: Vec<Option<Arc<CachedBlock>>> = Vec::with_capacity(last + 1 - first);
        let mut missing: Option<(usize, usize)> = None;
        for b in first..=last {
            let hit = self.cache.as_ref().and_then(|(c, id)| c.get(*id, b as u64));
            if hit.is_none() {
                missing = Some(missing.map_or((b, b), |(lo, _)| (lo, b)));
            }
            blocks.push(hit);
        }
        if let Some((lo, hi)) = missing {
            let base = self.handles.offset(lo);
            let end = self.handles.offset(hi + 1);
            let len = usize::try_from(end - base).map_err(|_| self.corrupt(lo, "too large"))?;
            let mut bytes = vec![0u8; len];
            self.storage.read_at(base, &mut bytes)?;
            let interval = self.props.restart_interval as usize;
            for b in lo..=hi {
                let Some(slot @ None) = blocks.get_mut(b - first) else {
                    continue;
                };
                let start = (self.handles.offset(b) - base) as usize;
                let stop = (self.handles.offset(b + 1) - base) as usize;
                let block = bytes.get(start..stop).unwrap_or_default();
                let count = self.handles.first(b + 1) - self.handles.first(b);
                let view = BlockView::parse(block, count, interval, &self.name, self.handles.offset(b))?;
                let c = Arc::new(CachedBlock {
                    bytes: block.into(),
                    view,
                });
                if let Some((cache, id)) = self.cache.as_ref().filter(|_| fill) {
                    cache.insert(*id, b as u64, c.clone());
                }
                *slot = Some(c);
            }
        }
        let blocks = blocks
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| self.corrupt(first, "a block of the run was not read"))?;
        Ok(Run { first, blocks })
    }

    /// A walker at ordinal `o` of `run` (from the restart point before it).
    fn walk_to(&self, run: &Run, o: u64) -> Result<Walker> {
        let b = self.handles.block_of(o);
        let (bytes, view) = run
            .block(self, b)
            .ok_or_else(|| self.corrupt(b, "not in the run"))?;
        let k = (o - self.handles.first(b)) as usize;
        let interval = self.props.restart_interval as usize;
        let r = k / interval;
        let mut w = Walker {
            block: b,
            next: view
                .restart(bytes, r)
                .ok_or_else(|| self.corrupt(b, "restart missing"))?,
            ordinal: self.handles.first(b) + (r * interval) as u64,
            ..Walker::default()
        };
        self.decode(bytes, view, &mut w)?;
        while w.ordinal < o {
            w.ordinal += 1;
            self.decode(bytes, view, &mut w)?;
        }
        Ok(w)
    }

    fn decode(&self, bytes: &[u8], view: BlockView, w: &mut Walker) -> Result<()> {
        let (next, value) = view
            .decode(bytes, w.next, &mut w.key)
            .ok_or_else(|| self.corrupt(w.block, &format!("entry {} is malformed", w.ordinal)))?;
        w.next = next;
        w.value = value;
        Ok(())
    }

    /// Moves `w` to the next entry if it is in `run`: `Ok(false)` at the end
    /// of the run (or of the table).
    fn step(&self, run: &Run, w: &mut Walker) -> Result<bool> {
        let o = w.ordinal + 1;
        if o >= self.props.entries {
            return Ok(false);
        }
        let (bytes, view) = run
            .block(self, w.block)
            .ok_or_else(|| self.corrupt(w.block, "not in the run"))?;
        if o == self.handles.first(w.block + 1) {
            if w.next != view.data_end() {
                return Err(self.corrupt(w.block, "entries after the last one"));
            }
            let Some((bytes, view)) = run.block(self, w.block + 1) else {
                return Ok(false);
            };
            w.block += 1;
            w.next = 0;
            w.ordinal = o;
            w.key.clear();
            self.decode(bytes, view, w)?;
        } else {
            w.ordinal = o;
            self.decode(bytes, view, w)?;
        }
        Ok(true)
    }

    /// The lower bound of `t`: `None` past the last entry, else the run read
    /// and a walker at the first entry `>= t`.
    fn locate(&self, t: &[u8], fill: bool) -> Result<Option<(Run, Walker)>> {
        let n = self.props.entries;
        let (lo, hi) = self.index.range(t)?;
        let hi = hi.min(n);
        let mut s = lo.min(hi).saturating_sub(1).min(n - 1);
        let mut e = (hi + 1).min(n).max(s + 1);
        loop {
            let run = self.read_run(self.handles.block_of(s), self.handles.block_of(e - 1), fill)?;
            let mut w = self.walk_to(&run, s)?;
            let left_ok = s == 0 || key::compare(&w.key, t) == Ordering::Less;
            let found = loop {
                if key::compare(&w.key, t) != Ordering::Less {
                    break true;
                }
                if w.ordinal + 1 >= e || !self.step(&run, &mut w)? {
                    break false;
                }
            };
            let right_ok = found || e == n;
            if left_ok && right_ok {
                return Ok(found.then_some((run, w)));
            }
            // The index's range missed: widen it (never for a sound index).
            let width = e - s;
            if !left_ok {
                s = s.saturating_sub(width);
            }
            if !right_ok {
                e = (e + width).min(n);
            }
        }
    }
}

/// Bytes of data blocks a compaction's table iterator reads per call (one
/// block at a time would be one system call, and with O_DIRECT one device
/// read, per 4 KiB; RocksDB reads 2 MiB ahead in compactions). Transient
/// memory: one such run per input table of a compaction.
pub const COMPACTION_READAHEAD: u64 = 256 << 10;

/// A forward iterator over a table ([`InternalIterator`]). `seek` uses the
/// index like [`Table::get`]; `next` reads the following block when it
/// leaves the blocks read so far. The first error is kept: the iterator is
/// then invalid, and every later `seek`/`next` returns the same error
/// (also from [`TableIter::status`]).
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    run: Option<Run>,
    at: Walker,
    valid: bool,
    error: Option<Error>,
    fill_cache: bool,
}

impl TableIter {
    /// This iterator, not adding the blocks it reads to the block cache
    /// (it still uses the blocks there): for compactions, which read each
    /// block once.
    pub fn without_cache_fill(mut self) -> TableIter {
        self.fill_cache = false;
        self
    }

    /// The first error met, if any.
    pub fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(again(e)),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: Error) -> Result<()> {
        self.valid = false;
        self.run = None;
        self.error = Some(again(&e));
        Err(e)
    }

    fn advance(&mut self) -> Result<()> {
        let t = &self.table;
        let Some(run) = &self.run else {
            self.valid = false;
            return Ok(());
        };
        if t.step(run, &mut self.at)? {
            return Ok(());
        }
        let next = self.at.block + 1;
        if self.at.ordinal + 1 >= t.props.entries || next >= t.handles.blocks() {
            self.valid = false;
            return Ok(());
        }
        // Check the end of the current block before leaving the run.
        let (_, view) = run
            .block(t, self.at.block)
            .ok_or_else(|| t.corrupt(self.at.block, "not in the run"))?;
        if self.at.next != view.data_end() {
            return Err(t.corrupt(self.at.block, "entries after the last one"));
        }
        // A compaction (no cache fill) reads ahead: the blocks within
        // COMPACTION_READAHEAD bytes in one call.
        let mut last = next;
        if !self.fill_cache {
            let limit = t.handles.offset(next).saturating_add(COMPACTION_READAHEAD);
            while last + 1 < t.handles.blocks() && t.handles.offset(last + 2) <= limit {
                last += 1;
            }
        }
        let run = t.read_run(next, last, self.fill_cache)?;
        self.at = t.walk_to(&run, t.handles.first(next))?;
        self.run = Some(run);
        Ok(())
    }
}

/// `e` again (errors are not `Clone`: an I/O error keeps its kind and text).
fn again(e: &Error) -> Error {
    match e {
        Error::Io { file, source } => Error::Io {
            file: file.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        Error::Corruption { file, page, detail } => Error::corruption(file, *page, detail),
        Error::CorruptionAt { file, offset, detail } => Error::corruption_at(file, *offset, detail),
        Error::Truncated {
            file,
            expected,
            found,
        } => Error::Truncated {
            file: file.clone(),
            expected: *expected,
            found: *found,
        },
        Error::Injected(m) => Error::Injected(m.clone()),
        other => Error::invalid(format!("an earlier error: {other}")),
    }
}

impl InternalIterator for TableIter {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.status()?;
        match self.table.locate(target, self.fill_cache) {
            Ok(Some((run, w))) => {
                self.run = Some(run);
                self.at = w;
                self.valid = true;
                Ok(())
            }
            Ok(None) => {
                self.run = None;
                self.valid = false;
                Ok(())
            }
            Err(e) => self.fail(e),
        }
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.status()?;
        let run = match self.table.read_run(0, 0, self.fill_cache) {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        match self.table.walk_to(&run, 0) {
            Ok(w) => {
                self.at = w;
                self.run = Some(run);
                self.valid = true;
                Ok(())
            }
            Err(e) => self.fail(e),
        }
    }

    fn next(&mut self) -> Result<()> {
        self.status()?;
        if !self.valid {
            return Ok(());
        }
        match self.advance() {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn valid(&self) -> bool {
        self.valid
    }

    fn key(&self) -> &[u8] {
        &self.at.key
    }

    fn value(&self) -> &[u8] {
        self.run
            .as_ref()
            .and_then(|r| r.block(&self.table, self.at.block))
            .and_then(|(bytes, _)| bytes.get(self.at.value.clone()))
            .unwrap_or_default()
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} entries in {} blocks, {} index (boundary {}), keys {} .. {}",
            self.name,
            self.props.entries,
            self.handles.blocks(),
            self.props.kind,
            self.props.boundary,
            show(key::user_key(&self.props.smallest)),
            show(key::user_key(&self.props.largest))
        )
    }
}
