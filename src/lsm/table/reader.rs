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
//!
//! A table is *pinned* (the default: its block handles, index and Bloom
//! filter stay decoded in memory from open to drop) or *unpinned*
//! ([`Table::pinned`]`(false)`, RocksDB's `cache_index_and_filter_blocks`):
//! then it keeps only the footer's section locations and the properties,
//! and loads the handles and index (one read, both sections) or the filter
//! (one read) when a lookup needs them, through the block cache it reads
//! with, where they are charged their decoded bytes and evicted like data
//! blocks. A loaded section is checked (checksum, decoding) as at open.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use super::TableMemory;
use super::block::BlockView;
use super::bloom::Bloom;
use super::builder::show;
use super::cache::{BlockCache, CachedBlock, Entry, Part};
use super::layout::{FOOTER_LEN, Footer, HEADER_LEN, Props, check_header, section};
use super::sections::{FILTER, HANDLES, INDEX, IndexSections, PROPS, decode_filter, decode_index};
use crate::lsm::key::{self, InternalIterator};
use crate::storage::ReadStorage;
use crate::{Error, Result};

/// An open table: its properties and section locations always resident;
/// its block handles, index and filter resident when pinned (the default),
/// else loaded per lookup through the block cache ([`Table::pinned`]); data
/// blocks read on demand through the storage it was opened with. `Send +
/// Sync`: lookups and iterators may run on any number of threads.
#[derive(Debug)]
pub struct Table {
    storage: Arc<dyn ReadStorage>,
    name: String,
    props: Props,
    footer: Footer,
    /// Data blocks (as the handles checked at open say).
    blocks: usize,
    /// Whether the table has a Bloom filter (checked at open).
    has_filter: bool,
    /// The decoded sections of a pinned table; `None` when unpinned.
    pinned: Option<Pinned>,
    /// The store's block cache and this table's id in it.
    cache: Option<(Arc<BlockCache>, u64)>,
}

/// The resident sections of a pinned table.
#[derive(Debug)]
struct Pinned {
    index: Arc<IndexSections>,
    filter: Option<Arc<Bloom>>,
}

/// A section of a table: borrowed from a pinned table (no reference count
/// touched on a lookup), or loaded and shared with the cache.
enum Held<'a, T> {
    Pinned(&'a Arc<T>),
    Loaded(Arc<T>),
}

impl<T> Held<'_, T> {
    /// The section, to keep beyond the table's borrow.
    fn into_arc(self) -> Arc<T> {
        match self {
            Held::Pinned(a) => a.clone(),
            Held::Loaded(a) => a,
        }
    }
}

impl<T> std::ops::Deref for Held<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            Held::Pinned(a) => a,
            Held::Loaded(a) => a,
        }
    }
}

/// Consecutive data blocks, each checked (from the cache or one read).
#[derive(Debug)]
struct Run {
    /// Index of the first block.
    first: usize,
    blocks: Vec<Arc<CachedBlock>>,
}

impl Run {
    fn block(&self, b: usize) -> Option<(&[u8], BlockView)> {
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
    /// Opens a table, pinned. `storage` is already wrapped by the caller's
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
        let data_end = footer.sections[HANDLES].0;
        let meta_len = usize::try_from(footer_at - data_end)
            .map_err(|_| Error::corruption_at(&name, footer_at, "sections too large"))?;
        let mut meta = vec![0u8; meta_len];
        storage.read_at(data_end, &mut meta)?;
        let props = Props::decode(section(&meta, data_end, &footer, PROPS, &name)?, &name)?;
        let index = decode_index(&meta, data_end, &footer, &props, &name)?;
        let filter = decode_filter(&meta, data_end, &footer, &props, &name)?;
        Ok(Table {
            storage,
            name,
            props,
            footer,
            blocks: index.handles.blocks(),
            has_filter: filter.is_some(),
            pinned: Some(Pinned {
                index: Arc::new(index),
                filter: filter.map(Arc::new),
            }),
            cache: None,
        })
    }

    /// This table, reading its data blocks (and, unpinned, its sections)
    /// through `cache` (shared by the tables of a store; the table takes an
    /// id of its own in it).
    pub fn with_cache(mut self, cache: Arc<BlockCache>) -> Table {
        let id = cache.table_id();
        self.cache = Some((cache, id));
        self
    }

    /// This table with its block handles, index and filter resident
    /// (`pin`, as opened) or not: unpinned, it drops them and loads them
    /// when a lookup needs them, through its block cache (charged there,
    /// checked on every load from the file; without a cache, one load per
    /// lookup), and [`Table::memory`] reports 0. A load that finds a
    /// section corrupt is [`Error::CorruptionAt`] naming the file, as at
    /// open. Answers are the same either way.
    pub fn pinned(mut self, pin: bool) -> Table {
        if !pin {
            self.pinned = None;
        }
        self
    }

    /// The file's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the Bloom filter admits `user_key` (true without a filter).
    /// Unpinned, this loads the filter (from the cache or one read);
    /// errors: a corrupt filter section, or the read's.
    pub fn may_contain(&self, user_key: &[u8]) -> Result<bool> {
        Ok(self.filter()?.is_none_or(|f| f.may_contain(user_key)))
    }

    /// The first entry with internal key `>= lookup` (normally
    /// `key::lookup_key(user_key, seq)`) if its user key is `lookup`'s:
    /// `Some((ikey, value))`, the caller reading kind and sequence number
    /// from `ikey`. Uses the filter, the key range, then the index, and reads
    /// the blocks covering the index's range (one `read_at`, more only if the
    /// range does not hold the key; unpinned, one more for each of the filter
    /// and the index that the cache does not hold). Errors: corruption of
    /// the blocks or sections read.
    pub fn get(&self, lookup: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let user = key::user_key(lookup);
        if user < key::user_key(&self.props.smallest)
            || key::compare(lookup, &self.props.largest) == Ordering::Greater
            || !self.may_contain(user)?
        {
            return Ok(None);
        }
        let sections = self.index_sections(true)?;
        let r = Reader {
            t: self,
            s: &sections,
        };
        let Some((run, w)) = r.locate(lookup, true)? else {
            return Ok(None);
        };
        if key::user_key(&w.key) != user {
            return Ok(None);
        }
        let value = run
            .block(w.block)
            .and_then(|(bytes, _)| bytes.get(w.value.clone()))
            .ok_or_else(|| r.corrupt(w.block, "value outside its block"))?;
        Ok(Some((w.key, value.to_vec())))
    }

    /// [`Table::get`] for many lookup keys, with up to `queue_depth` reads
    /// in flight: each key's blocks (those the cache does not hold) read in
    /// one batch, one read per distinct run (keys needing the same blocks
    /// share it), then searched. A key whose index range does not hold the
    /// proof is looked up alone ([`Table::get`]). Answers in the order of
    /// `lookups`.
    #[allow(clippy::type_complexity)]
    pub fn get_many(&self, lookups: &[&[u8]], queue_depth: usize) -> Result<Vec<Option<(Vec<u8>, Vec<u8>)>>> {
        let mut out: Vec<Option<(Vec<u8>, Vec<u8>)>> = vec![None; lookups.len()];
        let mut wanted: Vec<(usize, u64, u64)> = Vec::new();
        for (i, &lookup) in lookups.iter().enumerate() {
            let user = key::user_key(lookup);
            if user < key::user_key(&self.props.smallest)
                || key::compare(lookup, &self.props.largest) == Ordering::Greater
                || !self.may_contain(user)?
            {
                continue;
            }
            wanted.push((i, 0, 0));
        }
        if wanted.is_empty() {
            return Ok(out);
        }
        let sections = self.index_sections(true)?;
        let r = Reader {
            t: self,
            s: &sections,
        };
        let h = &sections.handles;
        // Plans, and the distinct reads they need.
        let mut plans: Vec<(usize, u64, u64, RunPlan, Option<usize>)> = Vec::with_capacity(wanted.len());
        let mut reads: Vec<(u64, usize)> = Vec::new();
        let mut read_of: std::collections::HashMap<(u64, usize), usize> = std::collections::HashMap::new();
        for (i, _, _) in wanted {
            let lookup = lookups.get(i).copied().unwrap_or_default();
            let (s, e) = r.window(lookup)?;
            let plan = r.plan_run(h.block_of(s), h.block_of(e - 1))?;
            let w = plan.read.map(|rd| {
                *read_of.entry(rd).or_insert_with(|| {
                    reads.push(rd);
                    reads.len() - 1
                })
            });
            plans.push((i, s, e, plan, w));
        }
        let mut bufs: Vec<Vec<u8>> = reads.iter().map(|&(_, len)| vec![0u8; len]).collect();
        let mut reqs: Vec<crate::storage::ReadReq<'_>> = reads
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&(offset, _), buf)| crate::storage::ReadReq { offset, buf })
            .collect();
        self.storage.read_many(&mut reqs, queue_depth)?;
        drop(reqs);
        for (i, s, e, plan, w) in plans {
            let lookup = lookups.get(i).copied().unwrap_or_default();
            let bytes = w.and_then(|w| bufs.get(w)).map_or(&[][..], Vec::as_slice);
            let run = r.finish_run(plan, bytes, true)?;
            let answer = match r.search(run, lookup, s, e)? {
                Search::Found(run, w) => {
                    if key::user_key(&w.key) != key::user_key(lookup) {
                        None
                    } else {
                        let value = run
                            .block(w.block)
                            .and_then(|(bytes, _)| bytes.get(w.value.clone()))
                            .ok_or_else(|| r.corrupt(w.block, "value outside its block"))?;
                        Some((w.key, value.to_vec()))
                    }
                }
                Search::Past => None,
                Search::Widen(..) => self.get(lookup)?,
            };
            if let Some(o) = out.get_mut(i) {
                *o = answer;
            }
        }
        Ok(out)
    }

    /// A forward iterator over the table (unpositioned until a seek). An
    /// unpinned table's handles and index are loaded at its first seek and
    /// held by the iterator until it is dropped.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        TableIter {
            table: self.clone(),
            sections: None,
            run: None,
            at: Walker::default(),
            valid: false,
            error: None,
            fill_cache: true,
        }
    }

    /// Resident bytes of the index (with the block handles) and the filter;
    /// 0 for an unpinned table (what it holds in the block cache is the
    /// cache's).
    pub fn memory(&self) -> TableMemory {
        match &self.pinned {
            Some(p) => TableMemory {
                index_bytes: p.index.memory_bytes(),
                filter_bytes: p.filter.as_ref().map_or(0, |f| f.memory_bytes()),
            },
            None => TableMemory::default(),
        }
    }

    /// Whether the handles, index and filter are resident ([`Table::pinned`]).
    pub fn is_pinned(&self) -> bool {
        self.pinned.is_some()
    }

    /// Number of entries.
    pub fn entries(&self) -> u64 {
        self.props.entries
    }

    /// Number of data blocks.
    pub fn blocks(&self) -> usize {
        self.blocks
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
    /// lower bound (tests and tools; lookups check it). Unpinned, this
    /// loads the index as [`Table::get`] does.
    pub fn index_range(&self, t: &[u8]) -> Result<(u64, u64)> {
        self.index_sections(true)?.index.range(t)
    }

    /// The handles and index: resident, from the cache, or read, checked
    /// and (when `fill`) added to the cache.
    fn index_sections(&self, fill: bool) -> Result<Held<'_, IndexSections>> {
        if let Some(p) = &self.pinned {
            return Ok(Held::Pinned(&p.index));
        }
        self.load(
            Part::Index,
            (HANDLES, INDEX),
            fill,
            Entry::into_index,
            |bytes, base| {
                decode_index(bytes, base, &self.footer, &self.props, &self.name).map(|s| {
                    let s = Arc::new(s);
                    (s.clone(), Entry::Index(s))
                })
            },
        )
    }

    /// The filter (`None` if the table has none), as
    /// [`Table::index_sections`].
    fn filter(&self) -> Result<Option<Held<'_, Bloom>>> {
        if let Some(p) = &self.pinned {
            return Ok(p.filter.as_ref().map(Held::Pinned));
        }
        if !self.has_filter {
            return Ok(None);
        }
        let f = self.load(
            Part::Filter,
            (FILTER, FILTER),
            true,
            Entry::into_filter,
            |bytes, base| match decode_filter(bytes, base, &self.footer, &self.props, &self.name)? {
                Some(f) => {
                    let f = Arc::new(f);
                    Ok((f.clone(), Entry::Filter(f)))
                }
                None => Err(Error::corruption_at(
                    &self.name,
                    self.footer.sections[FILTER].0,
                    "the filter section is gone",
                )),
            },
        )?;
        Ok(Some(f))
    }

    /// Cache entry `part` of an unpinned table, sections `first..=last`:
    /// from the cache if it holds them (`hit` picks them out of the entry),
    /// else read in one call, decoded and checked by `decode` (given the
    /// bytes and their offset in the file), and added to the cache when
    /// `fill`.
    fn load<T>(
        &self,
        part: Part,
        (first, last): (usize, usize),
        fill: bool,
        hit: fn(Entry) -> Option<Arc<T>>,
        decode: impl FnOnce(&[u8], u64) -> Result<(Arc<T>, Entry)>,
    ) -> Result<Held<'_, T>> {
        if let Some(found) = self
            .cache
            .as_ref()
            .and_then(|(c, id)| c.get(*id, part))
            .and_then(hit)
        {
            return Ok(Held::Loaded(found));
        }
        let base = self.footer.sections.get(first).map_or(0, |s| s.0);
        let (off, len) = self.footer.sections.get(last).copied().unwrap_or_default();
        // The footer's checks at open bound every section by the file.
        let end = off + len + 4;
        let n = usize::try_from(end - base)
            .map_err(|_| Error::corruption_at(&self.name, base, "sections too large"))?;
        let mut bytes = vec![0u8; n];
        self.storage.read_at(base, &mut bytes)?;
        let (value, entry) = decode(&bytes, base)?;
        if let Some((cache, id)) = self.cache.as_ref().filter(|_| fill) {
            cache.insert(*id, part, entry);
        }
        Ok(Held::Loaded(value))
    }
}

/// A table with its handles and index at hand: the walk of lookups and
/// iterators.
struct Reader<'a> {
    t: &'a Table,
    s: &'a IndexSections,
}

impl Reader<'_> {
    fn corrupt(&self, b: usize, what: &str) -> Error {
        Error::corruption_at(
            &self.t.name,
            self.s.handles.offset(b),
            format!("data block {b}: {what}"),
        )
    }

    /// Blocks `[first, last]`, checked: those in the block cache from it,
    /// the others read in one call (from the first missing block to the
    /// last) and added to it when `fill`.
    fn read_run(&self, first: usize, last: usize, fill: bool) -> Result<Run> {
        let plan = self.plan_run(first, last)?;
        let mut bytes = vec![0u8; plan.read.map_or(0, |r| r.1)];
        if let Some((base, _)) = plan.read {
            self.t.storage.read_at(base, &mut bytes)?;
        }
        self.finish_run(plan, &bytes, fill)
    }

    /// What [`Reader::read_run`] takes from the cache and what it must read.
    fn plan_run(&self, first: usize, last: usize) -> Result<RunPlan> {
        let (t, h) = (self.t, &self.s.handles);
        let mut blocks: Vec<Option<Arc<CachedBlock>>> = Vec::with_capacity(last + 1 - first);
        let mut missing: Option<(usize, usize)> = None;
        for b in first..=last {
            let hit = t
                .cache
                .as_ref()
                .and_then(|(c, id)| c.get(*id, Part::Block(b as u64)))
                .and_then(Entry::into_block);
            if hit.is_none() {
                missing = Some(missing.map_or((b, b), |(lo, _)| (lo, b)));
            }
            blocks.push(hit);
        }
        let read = match missing {
            Some((lo, hi)) => {
                let base = h.offset(lo);
                let len =
                    usize::try_from(h.offset(hi + 1) - base).map_err(|_| self.corrupt(lo, "too large"))?;
                Some((base, len))
            }
            None => None,
        };
        Ok(RunPlan {
            first,
            blocks,
            missing,
            read,
        })
    }

    /// The run of `plan`, its missing blocks parsed out of `bytes` (what its
    /// read returned) and added to the cache when `fill`.
    fn finish_run(&self, plan: RunPlan, bytes: &[u8], fill: bool) -> Result<Run> {
        let (t, h) = (self.t, &self.s.handles);
        let RunPlan {
            first,
            mut blocks,
            missing,
            read,
        } = plan;
        if let (Some((lo, hi)), Some((base, _))) = (missing, read) {
            let interval = t.props.restart_interval as usize;
            for b in lo..=hi {
                let Some(slot @ None) = blocks.get_mut(b - first) else {
                    continue;
                };
                let start = (h.offset(b) - base) as usize;
                let stop = (h.offset(b + 1) - base) as usize;
                let block = bytes.get(start..stop).unwrap_or_default();
                let count = h.first(b + 1) - h.first(b);
                let view = BlockView::parse(block, count, interval, &t.name, h.offset(b))?;
                let c = Arc::new(CachedBlock {
                    bytes: block.into(),
                    view,
                });
                if let Some((cache, id)) = t.cache.as_ref().filter(|_| fill) {
                    cache.insert(*id, Part::Block(b as u64), Entry::Block(c.clone()));
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
        let h = &self.s.handles;
        let b = h.block_of(o);
        let (bytes, view) = run.block(b).ok_or_else(|| self.corrupt(b, "not in the run"))?;
        let k = (o - h.first(b)) as usize;
        let interval = self.t.props.restart_interval as usize;
        let r = k / interval;
        let mut w = Walker {
            block: b,
            next: view
                .restart(bytes, r)
                .ok_or_else(|| self.corrupt(b, "restart missing"))?,
            ordinal: h.first(b) + (r * interval) as u64,
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
        if o >= self.t.props.entries {
            return Ok(false);
        }
        let (bytes, view) = run
            .block(w.block)
            .ok_or_else(|| self.corrupt(w.block, "not in the run"))?;
        if o == self.s.handles.first(w.block + 1) {
            if w.next != view.data_end() {
                return Err(self.corrupt(w.block, "entries after the last one"));
            }
            let Some((bytes, view)) = run.block(w.block + 1) else {
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
        let h = &self.s.handles;
        let (mut s, mut e) = self.window(t)?;
        loop {
            let run = self.read_run(h.block_of(s), h.block_of(e - 1), fill)?;
            match self.search(run, t, s, e)? {
                Search::Found(run, w) => return Ok(Some((run, w))),
                Search::Past => return Ok(None),
                Search::Widen(s2, e2) => (s, e) = (s2, e2),
            }
        }
    }

    /// The ordinals `[s, e)` a lookup of `t` reads first: the index's range
    /// with the entry before it.
    fn window(&self, t: &[u8]) -> Result<(u64, u64)> {
        let n = self.t.props.entries;
        let (lo, hi) = self.s.index.range(t)?;
        let hi = hi.min(n);
        let s = lo.min(hi).saturating_sub(1).min(n - 1);
        let e = (hi + 1).min(n).max(s + 1);
        Ok((s, e))
    }

    /// Searches `run` (blocks covering ordinals `[s, e)`) for the lower
    /// bound of `t`. The entry before the range being `< t` and the last
    /// one `>= t` (or the table's ends) proves it is inside; otherwise the
    /// range to read next, doubled (never for a sound index).
    fn search(&self, run: Run, t: &[u8], s: u64, e: u64) -> Result<Search> {
        let n = self.t.props.entries;
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
            return Ok(if found {
                Search::Found(run, w)
            } else {
                Search::Past
            });
        }
        // The index's range missed: widen it.
        let width = e - s;
        let s = if left_ok { s } else { s.saturating_sub(width) };
        let e = if right_ok { e } else { (e + width).min(n) };
        Ok(Search::Widen(s, e))
    }
}

/// Blocks of a run: those the cache holds, and the one read (from the first
/// missing block to the last: their range and `(offset, length)`) that
/// fetches the others.
struct RunPlan {
    first: usize,
    blocks: Vec<Option<Arc<CachedBlock>>>,
    missing: Option<(usize, usize)>,
    read: Option<(u64, usize)>,
}

/// What [`Reader::search`] finds.
enum Search {
    /// The lower bound, in the run.
    Found(Run, Walker),
    /// Past the table's last entry.
    Past,
    /// Not proven: ordinals to read instead.
    Widen(u64, u64),
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
    /// The table's handles and index, taken at the first seek.
    sections: Option<Arc<IndexSections>>,
    run: Option<Run>,
    at: Walker,
    valid: bool,
    error: Option<Error>,
    fill_cache: bool,
}

impl TableIter {
    /// This iterator, not adding the blocks (or an unpinned table's
    /// sections) it reads to the block cache (it still uses what is
    /// there): for compactions, which read each block once.
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

    /// The table's handles and index: taken at the first seek (loaded, for
    /// an unpinned table, and added to the cache only if this iterator
    /// fills it), then held until the iterator is dropped.
    fn sections(&mut self) -> Result<Arc<IndexSections>> {
        if let Some(s) = &self.sections {
            return Ok(s.clone());
        }
        let s = self.table.index_sections(self.fill_cache)?.into_arc();
        self.sections = Some(s.clone());
        Ok(s)
    }

    fn advance(&mut self) -> Result<()> {
        let (Some(run), Some(s)) = (&self.run, &self.sections) else {
            self.valid = false;
            return Ok(());
        };
        let t = &self.table;
        let r = Reader { t, s };
        if r.step(run, &mut self.at)? {
            return Ok(());
        }
        let next = self.at.block + 1;
        if self.at.ordinal + 1 >= t.props.entries || next >= s.handles.blocks() {
            self.valid = false;
            return Ok(());
        }
        // Check the end of the current block before leaving the run.
        let (_, view) = run
            .block(self.at.block)
            .ok_or_else(|| r.corrupt(self.at.block, "not in the run"))?;
        if self.at.next != view.data_end() {
            return Err(r.corrupt(self.at.block, "entries after the last one"));
        }
        // A compaction (no cache fill) reads ahead: the blocks within
        // COMPACTION_READAHEAD bytes in one call.
        let h = &s.handles;
        let mut last = next;
        if !self.fill_cache {
            let limit = h.offset(next).saturating_add(COMPACTION_READAHEAD);
            while last + 1 < h.blocks() && h.offset(last + 2) <= limit {
                last += 1;
            }
        }
        let run = r.read_run(next, last, self.fill_cache)?;
        self.at = r.walk_to(&run, h.first(next))?;
        self.run = Some(run);
        Ok(())
    }

    /// Positions the iterator at the lower bound of `target` (`None`: at
    /// the first entry).
    fn position(&mut self, target: Option<&[u8]>) -> Result<()> {
        let s = self.sections()?;
        let r = Reader {
            t: &self.table,
            s: &s,
        };
        let found = match target {
            Some(t) => r.locate(t, self.fill_cache)?,
            None => {
                let run = r.read_run(0, 0, self.fill_cache)?;
                let w = r.walk_to(&run, 0)?;
                Some((run, w))
            }
        };
        match found {
            Some((run, w)) => {
                self.run = Some(run);
                self.at = w;
                self.valid = true;
            }
            None => {
                self.run = None;
                self.valid = false;
            }
        }
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
        match self.position(Some(target)) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.status()?;
        match self.position(None) {
            Ok(()) => Ok(()),
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
            .and_then(|r| r.block(self.at.block))
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
            self.blocks,
            self.props.kind,
            self.props.boundary,
            show(key::user_key(&self.props.smallest)),
            show(key::user_key(&self.props.largest))
        )
    }
}
