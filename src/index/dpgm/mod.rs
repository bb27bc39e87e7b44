//! `dpgm`: the dynamic PGM-index on disk (Lan et al. §2.1 "Arbitrary
//! Insert", Fig. 1(b), §4.2, Table 2, O6) — the logarithmic method over
//! static PGM runs, on the shared [`crate::pager`].
//!
//! - `u64` keys and values; one file, `dpgm.db`, of fixed-size pages (4 KiB
//!   by default). Page 0 is the pager's checkpoint page; a catalog of four
//!   pages lists the runs and the free extents; the insert buffer (a sorted
//!   array of `buffer` records, one page's worth by default) has pages of its
//!   own; each run is one extent of consecutive pages: its records (253 per
//!   4 KiB page, with a tombstone bit each) and then its PGM model, level by
//!   level. Every page is checksummed. Format: `docs/format/dpgm.md`.
//! - Levels: level `i` holds at most `buffer · ratio^(i+1)` entries (ratio
//!   2 by default). A full buffer is merged with levels `0..=i` into level
//!   `i`, the first level where the buffer and those levels fit; the merge
//!   is one structure modification. Lower levels are newer: a key's newest
//!   version is in the buffer, then level 0, 1, ...
//! - A run's model: the optimal PLA of its keys with error `epsilon`
//!   (default 64, `crate::model`), then PLAs over the segments' first keys
//!   with error `epsilon_inner` (default 4), until a level fits one page.
//! - Deletes are tombstones; a merge into the deepest level drops them.
//!   Updates are newer versions that shadow older ones.
//! - `len` is exact: an insert or delete first looks the key up (which
//!   [`Index::insert`] and [`Index::delete`] need for their answers anyway,
//!   and Lan's cost model allows), so the count changes only when a key
//!   appears or disappears.
//! - Bulk load ([`IndexKind::build`]): the records become one run in the
//!   last level (the first whose capacity holds them), written sequentially
//!   through a [`crate::storage::Sink`].
//!
//! # Residency and I/O per operation
//!
//! The checkpoint fields and the catalog are always in memory, and so is a
//! copy of the buffer (what the writer changes).
//! - [`Residency::Index`]: the models of every run are read at open and kept
//!   in memory, and lookups search the buffer in memory. A lookup in one run
//!   reads the record pages holding `[pred − ε − 1, pred + ε + 1]` in one
//!   read call (one or two pages); a run whose key range excludes the key is
//!   skipped without I/O.
//! - [`Residency::None`]: lookups read the buffer's pages (one call, when it
//!   holds entries) and, per run, one window of model pages per model level
//!   (the top level is one page) and then the record window.
//! - `get` searches the buffer, then the runs from newest to oldest, and
//!   stops at the first entry for the key (a tombstone: absent).
//!   `lower_bound`, `scan` and the cursor merge all runs (k-way): a seek
//!   locates the key in every run whose range can hold it, `next` reads one
//!   record page of a run when its records are used up.
//! - `get_many`/`lower_bound_many`: keys sorted and deduplicated; the
//!   buffer once for the batch; each run searched for the keys still open
//!   in its key range in rounds (a model level on storage per round, then
//!   the record windows), each round's first windows in one batch of
//!   `queue_depth` reads in flight; lower bounds start each key's merge
//!   from the positions found. The pages of one lookup per key at most.
//! - An insert or delete reads what a `get` reads (the lookup that gives
//!   its answer and keeps `len` exact: for a new key, one window per run
//!   whose key range holds it) and, with [`Residency::None`], writes the
//!   buffer pages from the changed one on (one page with the default
//!   buffer); with [`Residency::Index`] the buffer pages are written at the
//!   next checkpoint instead. One in `buffer` fills the buffer and merges: it
//!   reads the runs merged (sequentially, 256 pages per call) and writes the
//!   new run (amortised `O(log_r(N/B) / C)` pages per insert, Table 2). A
//!   merge holds the entries it merges in memory (24 bytes each, inputs and
//!   output).
//! - With `cache_pages > 0` an LRU page cache sits in front of the file
//!   ([`IoContext::wrap`](crate::storage::IoContext::wrap)); block counts
//!   (`stats().extra["blocks"]`) count pages as Lan does, cached or not.
//!
//! # Space
//!
//! The pager's free list is not used: freed run extents go to the catalog's
//! free-extent list (coalesced with their neighbours). A new run takes the
//! first free extent large enough, else grows the file (extending a free
//! extent at its end if there is one). The logarithmic method keeps the live
//! runs within about twice the data, so the file does not grow without bound.
//!
//! # Thread safety and durability
//!
//! [`Dpgm`] is `Send + Sync`; readers share a lock, writers hold it
//! exclusively. A cursor holds no lock between calls; when the structure
//! changed in between, it seeks again after the last key it returned.
//! Pages are written in place under the pager's rollback journal
//! (`dpgm.db-journal`); [`Index::sync`] writes the catalog and the
//! checkpoint page (a pager checkpoint); dropping syncs (best effort). A
//! crash reopens exactly at the last checkpoint. A write that fails leaves
//! the index readable; it then refuses writes and syncs until reopened.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod cursor;
pub(crate) mod format;
mod run;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{Value, json};

pub use format::Meta;

use cursor::DpgmCursor;
use format::{
    CATALOG_PAGES, Catalog, DPGM_FILE_ID, Entry, MAX_LEVELS, check_params, encode_records, leaf_capacity,
    open_page, segs_per_page,
};
use run::{Run, build_model, decode_records, describe, emit_run, load_model, merge_newest, read_all};

use super::batch;
use super::{
    BuildOptions, Cursor, Index, IndexKind, IndexStats, Manifest, OpenOptions, ParamDoc, Params, Record,
    Records, Residency,
};
use crate::format::page::PageType;
use crate::pager::{META_PAGE, PageSpace, Pager, Role, WriteState};
use crate::storage::{AlignedBuf, Directory, IoContext, IoStats, PageCache};
use crate::{Error, Result};

/// File name of the index inside an index directory.
pub const DPGM_FILE: &str = "dpgm.db";
/// Default error bound of the models over records.
pub const DEFAULT_EPSILON: u64 = 64;
/// Default error bound of the upper model levels.
pub const DEFAULT_EPSILON_INNER: u64 = 4;
/// Default growth factor between levels.
pub const DEFAULT_RATIO: u64 = 2;

/// The `dpgm` kind: parameters `page` (page size, default 4096), `epsilon`
/// (default 64), `epsilon_inner` (default 4), `buffer` (records, default
/// one page's worth: 253 on 4 KiB pages) and `ratio` (default 2).
#[derive(Debug)]
pub struct DpgmKind;

/// The parameters of a build, checked.
fn read_params(params: &Params, page_size: usize) -> Result<(u64, u64, u64, u64)> {
    let eps = params.u64("epsilon", DEFAULT_EPSILON)?;
    let buffer = params.u64("buffer", leaf_capacity(page_size) as u64)?;
    let ratio = params.u64("ratio", DEFAULT_RATIO)?;
    let eps_inner = params.u64("epsilon_inner", DEFAULT_EPSILON_INNER)?;
    check_params(eps, buffer, ratio, eps_inner)?;
    Ok((eps, buffer, ratio, eps_inner))
}

impl IndexKind for DpgmKind {
    fn name(&self) -> &'static str {
        "dpgm"
    }

    /// Updated in place: one user at a time.
    fn dir_lock(&self) -> Option<crate::storage::LockMode> {
        Some(crate::storage::LockMode::Exclusive)
    }

    fn summary(&self) -> &'static str {
        "updatable dynamic PGM-index (logarithmic method over PGM runs, insert buffer, \
         tombstones); per run 1-2 record pages per lookup with models resident"
    }

    fn params(&self) -> Vec<ParamDoc> {
        vec![
            ParamDoc::new("epsilon", "error bound of the models over records, 1-1048576"),
            ParamDoc::new("epsilon_inner", "error bound of the upper model levels, 1-1024"),
            ParamDoc::new(
                "buffer",
                "records the insert buffer holds before it is merged into the runs, 1-1048576 \
                 (default: one page's worth)",
            ),
            ParamDoc::new(
                "ratio",
                "growth factor between the runs of the logarithmic method, 2-64",
            ),
        ]
    }

    fn build(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
        build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        let ps = opts.page_size;
        crate::format::page::check_page_size(ps)?;
        let (eps, buffer, ratio, eps_inner) = read_params(params, ps)?;
        let journal = crate::pager::journal_name(DPGM_FILE);
        if dir.exists(&journal) {
            dir.remove(&journal)?;
            dir.sync_dir()?;
        }
        let mut sink = dir.create_sink(DPGM_FILE, ps)?;
        let mut meta = Meta {
            page_size: ps,
            n: records.len() as u64,
            catalog: 0,
            buffer_first: 1,
            epsilon: eps as u32,
            buffer_cap: buffer as u32,
            ratio: ratio as u16,
            epsilon_inner: eps_inner as u16,
            buffer_count: 0,
            space: PageSpace::new(),
            build_id,
        };
        let mut page = AlignedBuf::zeroed(ps);
        for p in 0..meta.buffer_pages() {
            encode_records(&mut page, meta.buffer_first + p, PageType::DpgmBuffer, &[]);
            sink.append(&page)?;
        }
        let start = meta.buffer_first + meta.buffer_pages();
        let mut cat = Catalog::default();
        let keys = records.keys();
        if let (Some(&min), Some(&max)) = (keys.first(), keys.last()) {
            let level = (0..MAX_LEVELS)
                .find(|&l| meta.level_cap(l) >= meta.n)
                .unwrap_or(MAX_LEVELS - 1);
            let model = build_model(keys, eps, eps_inner, ps);
            let entry = |i: usize| Entry {
                key: keys.get(i).copied().unwrap_or(0),
                value: records.value(i),
                dead: false,
            };
            emit_run(
                keys.len(),
                &entry,
                &model,
                start,
                ps,
                &mut |first, bytes, _role| {
                    if sink.position() != first * ps as u64 {
                        return Err(Error::invalid("dpgm bulk load out of order"));
                    }
                    sink.append(bytes)
                },
            )?;
            cat.runs.push(describe(level, start, meta.n, min, max, &model));
        }
        meta.catalog = sink.position() / ps as u64;
        let mut cpages = AlignedBuf::zeroed(CATALOG_PAGES as usize * ps);
        cat.encode(&mut cpages, meta.catalog, ps, sink.name())?;
        sink.append(&cpages)?;
        meta.space.page_count = meta.catalog + CATALOG_PAGES;
        meta.check(sink.name())?;
        cat.check_accounting(&meta, sink.name())?;
        meta.checkpoint().encode(&DPGM_FILE_ID, &mut page);
        sink.finish(&page)?;
        Ok((
            vec![DPGM_FILE.to_string()],
            json!({
                "epsilon": eps,
                "epsilon_inner": eps_inner,
                "buffer": buffer,
                "ratio": ratio,
                "runs": cat.runs.len(),
                "segments": cat.runs.first().and_then(|r| r.model.first()).copied().unwrap_or(0),
                "model_levels": cat.runs.first().map_or(0, |r| r.model.len()),
            }),
        ))
    }

    fn open(
        &self,
        manifest: &Manifest,
        dir: Arc<dyn Directory>,
        io: IoContext,
        opts: &OpenOptions,
    ) -> Result<Box<dyn Index>> {
        let t = Dpgm::open(dir, io, opts.resident)?;
        manifest.check_paged(t.pager.name(), t.meta().build_id, t.page_size)?;
        Ok(Box::new(t))
    }
}

/// Mutable state behind the index's lock.
#[derive(Debug)]
struct State {
    meta: Meta,
    /// The runs, by level ascending (newest first).
    runs: Vec<Run>,
    /// Free extents `(first page, pages)`, sorted, coalesced.
    free: Vec<(u64, u64)>,
    /// The insert buffer (sorted by key; as on its pages).
    buffer: Vec<Entry>,
    /// Dirty since the last checkpoint; poisoned after a failed write.
    w: WriteState,
    /// The buffer pages lag the buffer in memory (with
    /// [`Residency::Index`] they are written at checkpoints only).
    buffer_stale: bool,
    /// Bumped by every change (cursors seek again when it moved).
    epoch: u64,
}

impl AsMut<WriteState> for State {
    fn as_mut(&mut self) -> &mut WriteState {
        &mut self.w
    }
}

/// An open dynamic PGM. See the module documentation for the I/O per
/// operation, thread safety and durability contracts.
#[derive(Debug)]
pub struct Dpgm {
    pager: Pager,
    dir: Arc<dyn Directory>,
    stats: Arc<IoStats>,
    cache: Option<Arc<PageCache>>,
    residency: Residency,
    page_size: usize,
    state: RwLock<State>,
}

impl Dpgm {
    /// Opens the index in `dir`: journal recovery, the checkpoint, the
    /// catalog and the buffer pages; with [`Residency::Index`] also every
    /// run's model pages.
    ///
    /// Errors: [`Error::Truncated`], [`Error::BadMagic`],
    /// [`Error::UnsupportedVersion`], [`Error::Corruption`] (naming the file
    /// and page), I/O errors.
    pub fn open(dir: Arc<dyn Directory>, io: IoContext, residency: Residency) -> Result<Dpgm> {
        let raw = dir.open(DPGM_FILE)?;
        let (pager, cp, _) = Pager::open_journaled(dir.clone(), DPGM_FILE, raw.clone(), &io, DPGM_FILE_ID)?;
        let meta = Meta::from_checkpoint(&cp);
        let name = pager.name().to_string();
        meta.check(&name)?;
        cp.check_file(raw.as_ref())?;
        let ps = meta.page_size;
        let mut buf = AlignedBuf::zeroed(CATALOG_PAGES as usize * ps);
        pager.read_page(Role::Other, meta.catalog, &mut buf)?;
        let cat = Catalog::decode(&buf, meta.catalog, &meta, &name)?;
        let mut runs = Vec::with_capacity(cat.runs.len());
        for desc in cat.runs {
            let model = match residency {
                Residency::Index => Some(load_model(&pager, &desc, &mut buf)?),
                Residency::None => None,
            };
            runs.push(Run { desc, model });
        }
        let mut d = Dpgm {
            pager,
            dir,
            stats: io.stats.clone(),
            cache: io.cache.clone(),
            residency,
            page_size: ps,
            state: RwLock::new(State {
                meta,
                runs,
                free: cat.free,
                buffer: Vec::new(),
                w: WriteState::new("dynamic PGM", raw.name()),
                buffer_stale: false,
                epoch: 0,
            }),
        };
        let buffer = d.read_buffer(&meta, &mut buf)?;
        d.state.get_mut().buffer = buffer;
        Ok(d)
    }

    /// A copy of the checkpoint fields as held in memory (current counts).
    pub fn meta(&self) -> Meta {
        self.state.read().meta
    }

    /// Bytes held in memory: the buffer copy, the resident models, the
    /// catalog, the struct, and the page cache if one is configured.
    pub fn memory_bytes(&self) -> u64 {
        let st = self.state.read();
        let models: usize = st
            .runs
            .iter()
            .map(|r| {
                std::mem::size_of::<Run>()
                    + r.desc.model.capacity() * 8
                    + r.model
                        .as_ref()
                        .map_or(0, |m| m.iter().map(|l| l.capacity() * 24).sum())
            })
            .sum();
        let cache = self.cache.as_ref().map_or(0, |c| c.memory_bytes());
        (std::mem::size_of::<Self>()
            + st.buffer.capacity() * std::mem::size_of::<Entry>()
            + models
            + st.free.capacity() * 16) as u64
            + cache
    }

    /// Reads and checks the buffer pages holding `meta.buffer_count` entries
    /// (one read call; nothing when the buffer is empty).
    fn read_buffer(&self, meta: &Meta, buf: &mut AlignedBuf) -> Result<Vec<Entry>> {
        let ps = self.page_size;
        let cap = leaf_capacity(ps).max(1);
        let count = meta.buffer_count as usize;
        let pages = count.div_ceil(cap);
        let mut out = Vec::with_capacity(meta.buffer_cap as usize);
        if pages == 0 {
            return Ok(out);
        }
        if buf.len() < pages * ps {
            *buf = AlignedBuf::zeroed(pages * ps);
        }
        let region = buf
            .get_mut(..pages * ps)
            .ok_or_else(|| Error::invalid("buffer read out of range"))?;
        self.pager.read_page(Role::Leaf, meta.buffer_first, region)?;
        let mut page_entries = Vec::new();
        for (p, page) in region.chunks_exact(ps).enumerate() {
            let page_no = meta.buffer_first + p as u64;
            let on = (count - p * cap).min(cap);
            open_page(page, page_no, self.pager.name(), PageType::DpgmBuffer, on)?;
            decode_records(page, on, &mut page_entries);
            for e in &page_entries {
                if out.last().is_some_and(|l: &Entry| l.key >= e.key) {
                    return Err(Error::corruption(
                        self.pager.name(),
                        page_no,
                        "buffer keys out of order",
                    ));
                }
                out.push(*e);
            }
        }
        Ok(out)
    }

    /// The newest entry for `key` (a tombstone included), searching the
    /// buffer and then the runs newest first.
    fn lookup(&self, st: &State, key: u64) -> Result<Option<Entry>> {
        let mut buf = AlignedBuf::zeroed(0);
        let from_pages;
        let buffer: &[Entry] = match self.residency {
            Residency::None if st.meta.buffer_count > 0 => {
                from_pages = self.read_buffer(&st.meta, &mut buf)?;
                &from_pages
            }
            _ => &st.buffer,
        };
        if let Ok(i) = buffer.binary_search_by_key(&key, |e| e.key) {
            return Ok(buffer.get(i).copied());
        }
        let mut page = Vec::new();
        let err = run::Errors::of(&st.meta);
        for r in &st.runs {
            if key < r.desc.min || key > r.desc.max {
                continue;
            }
            let (_, slot) = run::seek(&self.pager, r, key, err, &mut buf, &mut page)?;
            if let Some(e) = page.get(slot).filter(|e| e.key == key) {
                return Ok(Some(*e));
            }
        }
        Ok(None)
    }

    /// The entries of the buffer as a lookup sees them: read from its
    /// pages (one call) with [`Residency::None`] when it holds entries,
    /// else the copy in memory.
    fn buffer_of(&self, st: &State) -> Result<Vec<Entry>> {
        match self.residency {
            Residency::None if st.meta.buffer_count > 0 => {
                self.read_buffer(&st.meta, &mut AlignedBuf::zeroed(0))
            }
            _ => Ok(st.buffer.clone()),
        }
    }

    /// The newest entry of each of `keys` (ascending, distinct), as
    /// [`Dpgm::lookup`] finds it: the buffer (read once for the batch when
    /// not resident), then the runs newest first, each run searched for
    /// the keys still open in its key range in rounds
    /// ([`run::seek_many`]: model levels on storage, then record windows,
    /// each round in one batch).
    fn lookup_many(&self, st: &State, keys: &[u64]) -> Result<Vec<Option<Entry>>> {
        let buffer = self.buffer_of(st)?;
        let mut found: Vec<Option<Entry>> = keys
            .iter()
            .map(|&k| {
                buffer
                    .binary_search_by_key(&k, |e| e.key)
                    .ok()
                    .and_then(|i| buffer.get(i).copied())
            })
            .collect();
        let err = run::Errors::of(&st.meta);
        for r in &st.runs {
            let open: Vec<usize> = (0..keys.len())
                .filter(|&i| {
                    found.get(i).is_some_and(Option::is_none)
                        && keys.get(i).is_some_and(|&k| k >= r.desc.min && k <= r.desc.max)
                })
                .collect();
            if open.is_empty() {
                continue;
            }
            let xs: Vec<u64> = open.iter().filter_map(|&i| keys.get(i).copied()).collect();
            let seeks = run::seek_many(&self.pager, r, &xs, err)?;
            for ((&i, &x), (_, slot, page)) in open.iter().zip(&xs).zip(&seeks) {
                if let (Some(e), Some(f)) = (page.get(*slot).filter(|e| e.key == x), found.get_mut(i)) {
                    *f = Some(*e);
                }
            }
        }
        Ok(found)
    }

    /// The lower bound of each of `keys` (ascending, distinct): the buffer
    /// (read once when not resident), every run positioned for the keys
    /// above its first key and within its range ([`run::seek_many`], in
    /// rounds of batched reads), then the k-way cursor of each key started
    /// from those positions (pages it reads further, rare, one by one).
    fn lower_bound_many_impl(&self, keys: &[u64]) -> Result<Vec<Option<Record>>> {
        let st = self.state.read();
        let buffer = self.buffer_of(&st)?;
        let err = run::Errors::of(&st.meta);
        // Per run: (key index, its position, slot and page), keys ascending.
        type Positions = std::vec::IntoIter<(usize, (u64, usize, Vec<Entry>))>;
        let mut seeks: Vec<Positions> = Vec::new();
        for r in &st.runs {
            let open: Vec<usize> = (0..keys.len())
                .filter(|&i| keys.get(i).is_some_and(|&k| k > r.desc.min && k <= r.desc.max))
                .collect();
            let xs: Vec<u64> = open.iter().filter_map(|&i| keys.get(i).copied()).collect();
            let got = if xs.is_empty() {
                Vec::new()
            } else {
                run::seek_many(&self.pager, r, &xs, err)?
            };
            seeks.push(open.into_iter().zip(got).collect::<Vec<_>>().into_iter());
        }
        let mut answers = Vec::with_capacity(keys.len());
        for (i, &key) in keys.iter().enumerate() {
            let mut c = DpgmCursor::new(self);
            c.load_with(&st, key, buffer.clone(), &mut |ri, _, _, entries| {
                let (j, (pp, slot, page)) = seeks
                    .get_mut(ri)
                    .and_then(Iterator::next)
                    .ok_or_else(|| Error::invalid("run not positioned"))?;
                if j != i {
                    return Err(Error::invalid("run positioned for another key"));
                }
                *entries = page;
                Ok((pp, slot))
            })?;
            answers.push(c.next_locked(&st)?);
        }
        Ok(answers)
    }

    /// Runs a write step (which marks the state dirty when it changes
    /// something); a failure poisons the index.
    fn guarded<T>(&self, st: &mut State, f: impl FnOnce(&Self, &mut State) -> Result<T>) -> Result<T> {
        st.w.check_writable()?;
        let r = f(self, st);
        st.w.poison(r)
    }

    /// Puts `e` into the buffer (replacing an entry for its key), writes the
    /// changed buffer pages, and merges when the buffer is full.
    fn put(&self, st: &mut State, e: Entry) -> Result<()> {
        let cap = leaf_capacity(self.page_size).max(1);
        let from = match st.buffer.binary_search_by_key(&e.key, |x| x.key) {
            Ok(i) => {
                if let Some(slot) = st.buffer.get_mut(i) {
                    *slot = e;
                }
                let p = i / cap;
                (p, p + 1)
            }
            Err(i) => {
                st.buffer.insert(i, e);
                (i / cap, st.buffer.len().div_ceil(cap))
            }
        };
        st.meta.buffer_count = st.buffer.len() as u32;
        st.w.mark_dirty();
        st.epoch += 1;
        if st.buffer.len() >= st.meta.buffer_cap as usize {
            return self.merge(st);
        }
        if self.residency == Residency::Index {
            // Lookups search the buffer in memory: its pages are written at
            // the next checkpoint.
            st.buffer_stale = true;
            return Ok(());
        }
        write_buffer_pages(&self.pager, st, from.0, from.1)
    }

    /// Takes `pages` consecutive pages: the first free extent large enough,
    /// else the end of the file (extending a free extent that ends there).
    fn alloc(&self, st: &mut State, pages: u64) -> Result<u64> {
        if let Some(i) = st.free.iter().position(|&(_, l)| l >= pages) {
            let (s, l) = st.free.get(i).copied().unwrap_or((0, 0));
            if l == pages {
                st.free.remove(i);
            } else if let Some(x) = st.free.get_mut(i) {
                *x = (s + pages, l - pages);
            }
            return Ok(s);
        }
        let mut need = pages;
        let mut start = st.meta.space.page_count;
        if let Some(&(s, l)) = st.free.last() {
            if s + l == st.meta.space.page_count {
                st.free.pop();
                need -= l;
                start = s;
            }
        }
        let mut buf = AlignedBuf::zeroed(self.page_size);
        let got = self.pager.allocate(
            &mut st.meta.space,
            usize::try_from(need).unwrap_or(usize::MAX),
            &mut buf,
        )?;
        if got
            .iter()
            .enumerate()
            .any(|(k, &p)| p != start + (pages - need) + k as u64)
        {
            return Err(Error::corruption(
                self.pager.name(),
                META_PAGE,
                "pager handed out non-consecutive pages",
            ));
        }
        Ok(start)
    }

    /// Merges the full buffer with levels `0..=i` into level `i`, the first
    /// level whose capacity holds them all (one SMO); frees the old runs.
    fn merge(&self, st: &mut State) -> Result<()> {
        let ps = self.page_size;
        let meta = st.meta;
        let size = |st: &State, l: u32| -> u64 {
            st.runs
                .iter()
                .filter(|r| r.desc.level == l)
                .map(|r| r.desc.n)
                .sum()
        };
        let mut total = st.buffer.len() as u64;
        let mut target = 0u32;
        loop {
            total += size(st, target);
            if total <= meta.level_cap(target) || target + 1 >= MAX_LEVELS {
                break;
            }
            target += 1;
        }
        let deepest = !st.runs.iter().any(|r| r.desc.level > target);
        let mut buf = AlignedBuf::zeroed(0);
        let mut sources = vec![st.buffer.clone()];
        for r in st.runs.iter().filter(|r| r.desc.level <= target) {
            sources.push(read_all(&self.pager, &r.desc, &mut buf)?);
        }
        let merged = merge_newest(sources, deepest);
        let new_run = match (merged.first(), merged.last()) {
            (Some(first), Some(last)) => {
                let keys: Vec<u64> = merged.iter().map(|e| e.key).collect();
                let model = build_model(&keys, meta.epsilon as u64, meta.epsilon_inner as u64, ps);
                let mut desc = describe(target, 0, merged.len() as u64, first.key, last.key, &model);
                desc.start = self.alloc(st, desc.pages(ps))?;
                let entry = |i: usize| merged.get(i).copied().unwrap_or(*first);
                emit_run(
                    merged.len(),
                    &entry,
                    &model,
                    desc.start,
                    ps,
                    &mut |p, bytes, role| self.pager.write_page(role, p, bytes),
                )?;
                let model = (self.residency == Residency::Index).then_some(model);
                Some(Run { desc, model })
            }
            _ => None,
        };
        let old: Vec<(u64, u64)> = st
            .runs
            .iter()
            .filter(|r| r.desc.level <= target)
            .map(|r| (r.desc.start, r.desc.pages(ps)))
            .collect();
        for (s, l) in old {
            free_extent(&mut st.free, s, l);
        }
        st.runs.retain(|r| r.desc.level > target);
        if let Some(r) = new_run {
            st.runs.insert(0, r);
        }
        st.buffer.clear();
        st.buffer_stale = false;
        st.meta.buffer_count = 0;
        st.w.mark_dirty();
        st.epoch += 1;
        self.pager.blocks().smo();
        Ok(())
    }

    /// The catalog as the state holds it.
    fn catalog(st: &State) -> Catalog {
        Catalog {
            runs: st.runs.iter().map(|r| r.desc.clone()).collect(),
            free: st.free.clone(),
        }
    }

    /// Writes the catalog pages and the checkpoint page (a pager checkpoint).
    fn checkpoint(&self, st: &mut State) -> Result<()> {
        write_checkpoint(&self.pager, st)
    }

    /// Reads every page in use and checks the whole structure: the catalog
    /// and the page accounting, the buffer, every run's record pages (keys
    /// increasing, bounds as the catalog says) and model pages (the resident
    /// copy equal to them), the level rule, and that the live records number
    /// `len()`. Returns the pages read.
    pub fn verify_all(&self) -> Result<u64> {
        let st = self.state.read();
        let meta = st.meta;
        let name = self.pager.name();
        let ps = self.page_size;
        let mut buf = AlignedBuf::zeroed(CATALOG_PAGES as usize * ps);
        self.pager.read_page(Role::Other, meta.catalog, &mut buf)?;
        if st.w.is_dirty() {
            // Written at the next checkpoint: only its pages are checked.
            for (i, page) in buf.chunks_exact(ps).enumerate() {
                crate::format::page::open_typed(page, meta.catalog + i as u64, name, PageType::DpgmCatalog)?;
            }
        } else if Catalog::decode(&buf, meta.catalog, &meta, name)? != Self::catalog(&st) {
            return Err(Error::corruption(
                name,
                meta.catalog,
                "catalog differs from the one in memory",
            ));
        }
        let mut pages = 1 + CATALOG_PAGES;
        let buffer = if st.buffer_stale {
            st.buffer.clone()
        } else {
            self.read_buffer(&meta, &mut buf)?
        };
        pages += (meta.buffer_count as u64).div_ceil(leaf_capacity(ps).max(1) as u64);
        if buffer != st.buffer && !st.buffer_stale {
            return Err(Error::corruption(
                name,
                meta.buffer_first,
                "buffer pages differ from the buffer in memory",
            ));
        }
        Self::catalog(&st).check_accounting(&meta, name)?;
        let mut sources = vec![buffer];
        for r in &st.runs {
            if r.desc.n > meta.level_cap(r.desc.level) {
                return Err(Error::corruption(
                    name,
                    r.desc.start,
                    format!(
                        "run of {} entries exceeds level {}'s capacity {}",
                        r.desc.n,
                        r.desc.level,
                        meta.level_cap(r.desc.level)
                    ),
                ));
            }
            let model = load_model(&self.pager, &r.desc, &mut buf)?;
            if r.model.as_ref().is_some_and(|m| *m != model) {
                return Err(Error::corruption(
                    name,
                    r.desc.start,
                    "resident model differs from its pages",
                ));
            }
            sources.push(read_all(&self.pager, &r.desc, &mut buf)?);
            pages += r.desc.pages(ps);
        }
        let live = merge_newest(sources, true).len() as u64;
        if live != meta.n {
            return Err(Error::corruption(
                name,
                META_PAGE,
                format!("{live} live records, the checkpoint counts {}", meta.n),
            ));
        }
        Ok(pages)
    }
}

/// Adds extent `(s, l)` to the sorted free list, coalescing neighbours.
fn free_extent(free: &mut Vec<(u64, u64)>, s: u64, l: u64) {
    if l == 0 {
        return;
    }
    let i = free.partition_point(|e| e.0 < s);
    free.insert(i, (s, l));
    if let (Some(&(a, al)), Some(&(b, bl))) = (free.get(i), free.get(i + 1)) {
        if a + al == b {
            if let Some(x) = free.get_mut(i) {
                *x = (a, al + bl);
            }
            free.remove(i + 1);
        }
    }
    if i > 0 {
        if let (Some(&(a, al)), Some(&(b, bl))) = (free.get(i - 1), free.get(i)) {
            if a + al == b {
                if let Some(x) = free.get_mut(i - 1) {
                    *x = (a, al + bl);
                }
                free.remove(i);
            }
        }
    }
}

impl Drop for Dpgm {
    fn drop(&mut self) {
        WriteState::close(self.state.get_mut(), |st| write_checkpoint(&self.pager, st));
    }
}

/// Writes buffer pages `p0..p1` (page indices in the buffer) from `st`'s
/// buffer in one call.
fn write_buffer_pages(pager: &Pager, st: &State, p0: usize, p1: usize) -> Result<()> {
    let ps = pager.page_size();
    let cap = leaf_capacity(ps).max(1);
    let mut pages = AlignedBuf::zeroed(p1.saturating_sub(p0) * ps);
    for (k, page) in pages.chunks_exact_mut(ps).enumerate() {
        let p = p0 + k;
        let part = st
            .buffer
            .get(p * cap..((p + 1) * cap).min(st.buffer.len()))
            .unwrap_or(&[]);
        encode_records(page, st.meta.buffer_first + p as u64, PageType::DpgmBuffer, part);
    }
    if pages.is_empty() {
        return Ok(());
    }
    pager.write_page(Role::Leaf, st.meta.buffer_first + p0 as u64, &pages)
}

/// Writes the buffer pages if only the memory copy is current, the catalog
/// pages of `st`, and then the checkpoint page (a pager checkpoint).
fn write_checkpoint(pager: &Pager, st: &mut State) -> Result<()> {
    let ps = pager.page_size();
    if st.buffer_stale {
        let pages = st.buffer.len().div_ceil(leaf_capacity(ps).max(1));
        write_buffer_pages(pager, st, 0, pages)?;
        st.buffer_stale = false;
    }
    let mut pages = AlignedBuf::zeroed(CATALOG_PAGES as usize * ps);
    Dpgm::catalog(st).encode(&mut pages, st.meta.catalog, ps, pager.name())?;
    pager.write_page(Role::Other, st.meta.catalog, &pages)?;
    pager.checkpoint(&st.meta.checkpoint())
}

impl Index for Dpgm {
    fn kind(&self) -> &str {
        "dpgm"
    }

    fn len(&self) -> u64 {
        self.state.read().meta.n
    }

    /// Searches the buffer, then the runs newest first; stops at the first
    /// entry for `key`.
    fn get(&self, key: u64) -> Result<Option<u64>> {
        let st = self.state.read();
        Ok(self.lookup(&st, key)?.filter(|e| !e.dead).map(|e| e.value))
    }

    /// A cursor seek and one `next` (k-way over the buffer and every run).
    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        let mut c = DpgmCursor::new(self);
        c.seek(key)?;
        c.next()
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(DpgmCursor::new(self)))
    }

    /// Sorted and deduplicated: the buffer once, then each run for the keys
    /// still open in its range, in rounds of batched reads (model levels on
    /// storage, then record windows); the pages one `get` per key reads,
    /// each distinct window once per round.
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        batch::answer(keys, out, |keys| {
            let found = {
                let st = self.state.read();
                self.lookup_many(&st, keys)?
            };
            let answers: Vec<Option<u64>> = found
                .into_iter()
                .map(|e| e.filter(|e| !e.dead).map(|e| e.value))
                .collect();
            Ok(answers)
        })
    }

    /// As [`Index::get_many`], every run whose range holds a key
    /// positioned for it, then each key's merge from there.
    fn lower_bound_many(&self, keys: &[u64], out: &mut Vec<Option<Record>>) -> Result<()> {
        batch::answer(keys, out, |keys| self.lower_bound_many_impl(keys))
    }

    fn supports_updates(&self) -> bool {
        true
    }

    /// Looks the key up, puts the new version into the buffer (merging when
    /// it is full).
    fn insert(&self, key: u64, value: u64) -> Result<Option<u64>> {
        let mut st = self.state.write();
        self.guarded(&mut st, |d, st| {
            let prev = d.lookup(st, key)?.filter(|e| !e.dead).map(|e| e.value);
            d.put(
                st,
                Entry {
                    key,
                    value,
                    dead: false,
                },
            )?;
            if prev.is_none() {
                st.meta.n += 1;
            }
            Ok(prev)
        })
    }

    /// Looks the key up; if present, puts a tombstone into the buffer.
    fn delete(&self, key: u64) -> Result<bool> {
        let mut st = self.state.write();
        self.guarded(&mut st, |d, st| {
            if d.lookup(st, key)?.is_none_or(|e| e.dead) {
                return Ok(false);
            }
            d.put(
                st,
                Entry {
                    key,
                    value: 0,
                    dead: true,
                },
            )?;
            st.meta.n = st.meta.n.saturating_sub(1);
            Ok(true)
        })
    }

    /// Writes the catalog and the checkpoint page: every completed insert
    /// and delete is durable when this returns. Fails if a write failed.
    fn sync(&self) -> Result<()> {
        WriteState::sync(&mut *self.state.write(), |st| self.checkpoint(st))
    }

    fn stats(&self) -> Result<IndexStats> {
        let memory_bytes = self.memory_bytes();
        let st = self.state.read();
        let meta = st.meta;
        let segments: u64 = st.runs.iter().filter_map(|r| r.desc.model.first()).sum();
        let mut s = IndexStats {
            kind: "dpgm".into(),
            n: meta.n,
            memory_bytes,
            disk_bytes: self.dir.total_bytes()?,
            models: Some(segments),
            height: Some(
                st.runs
                    .iter()
                    .map(|r| r.desc.model.len() as u32)
                    .max()
                    .unwrap_or(0)
                    + 1,
            ),
            ..Default::default()
        };
        let e = &mut s.extra;
        e.insert(
            "runs".into(),
            json!(st
                .runs
                .iter()
                .map(|r| json!({"level": r.desc.level, "entries": r.desc.n, "pages": r.desc.pages(self.page_size), "model_levels": r.desc.model}))
                .collect::<Vec<_>>()),
        );
        e.insert("epsilon".into(), json!(meta.epsilon));
        e.insert("epsilon_inner".into(), json!(meta.epsilon_inner));
        e.insert("buffer".into(), json!(meta.buffer_cap));
        e.insert("buffer_count".into(), json!(meta.buffer_count));
        e.insert("ratio".into(), json!(meta.ratio));
        e.insert("page_size".into(), json!(self.page_size));
        e.insert("leaf_capacity".into(), json!(leaf_capacity(self.page_size)));
        e.insert("segments_per_page".into(), json!(segs_per_page(self.page_size)));
        e.insert(
            "free_pages".into(),
            json!(st.free.iter().map(|f| f.1).sum::<u64>()),
        );
        e.insert("residency".into(), json!(self.residency.to_string()));
        e.insert("blocks".into(), self.pager.blocks().snapshot().to_json());
        Ok(s)
    }

    /// [`Dpgm::verify_all`], reporting the pages read at the end.
    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let pages = self.verify_all()?;
        progress(pages);
        Ok(pages)
    }

    fn io(&self) -> &Arc<IoStats> {
        &self.stats
    }
}
