//! `fiting`: the updatable FITing-tree on disk (Galakatos et al., as Lan et
//! al. move it to disk, §2.1, §4.2, Table 2): segments fitted with error
//! `epsilon` by the streaming optimal PLA of [`crate::model`], each with a
//! sorted insert buffer (Lan's Delta Insert Strategy), under a B+-tree of
//! segment entries (the *directory*), on the shared [`crate::pager`].
//!
//! - `u64` keys and values; one file, `fiting.db`, of fixed-size pages
//!   (4 KiB by default). Format: `docs/format/fiting.md`.
//! - A segment is a run of contiguous segment pages (252 records each on
//!   4 KiB), full when written; its head page holds the model (first key,
//!   slope, intercept), the page count, the buffer's page and, like every
//!   page of the run, the sibling link to the next segment. A key fitted at
//!   position `p` stays on page `p / 252` of its segment until the segment is
//!   refitted: deletes remove it from its page in place.
//! - A segment's insert buffer (`buffer` records, default 256: two 4 KiB
//!   pages) is allocated at the first insert into the segment.
//! - The directory is a B+-tree whose bottom nodes hold one entry per
//!   segment (routing key, head page, model, page count, buffer page) and
//!   whose upper nodes hold (key, child); nodes are searched by binary
//!   search. Keys below the first segment's first key are routed to the
//!   first segment and wait in its buffer: that buffer plays the role of
//!   Lan's extra buffer (there is no separate one).
//!
//! # I/O per operation
//!
//! The checkpoint page is held in memory. With [`Residency::Index`] every
//! directory node is read at open and kept in memory (and updated on
//! writes); with [`Residency::None`] each operation reads the directory from
//! the root down, `height` pages (role `Inner`), one call per level.
//! - `get`: the directory, then the segment pages holding positions
//!   `[pred - ε - 1, pred + ε + 1]` in one read call (1 or 2 pages for
//!   ε ≤ 124 on 4 KiB pages), then, only when the key is not there and the
//!   segment has a buffer, the buffer's pages in one call. The directory
//!   entry tells whether a buffer exists, so lookups after a bulk load never
//!   read a buffer. (Keeping per-segment buffer summaries resident instead
//!   would cost one buffer read per segment at open or a directory write per
//!   insert; the entry's buffer link costs one directory write per segment.)
//! - `lower_bound`: as `get`, plus the buffer if there is one, plus one page
//!   per further page or segment while none holds a key `>= key` (only after
//!   deletes), and a page before the window in the rare case the answer is
//!   the window's first record.
//! - `scan`/cursor: a seek as `lower_bound`; then one page per read along
//!   the segment, the next segment's head through the sibling link, and
//!   each segment's buffer in one call, merged with the segment's records.
//! - `insert`: as `get` (window, then the buffer if any); an update writes
//!   the one page holding the key; a new key is written into the buffer (its
//!   pages in one call). The first insert into a segment allocates its
//!   buffer and rewrites the head page and the directory node. A full buffer
//!   triggers the *resegment* (one `smo`): the segment's pages are read in
//!   one call, merged with the buffer and refitted with ε, the new segments
//!   written (one call each), the previous segment's sibling link and the
//!   directory updated (a directory split is one more `smo` each), and the
//!   old pages freed. Runs are taken from the free list when its head holds
//!   a run of the size needed (its pages are read, role `Other`), else
//!   appended to the file.
//! - `get_many`/`lower_bound_many`: keys sorted and deduplicated, then
//!   rounds of batched reads ([`Pager::read_runs_many`]): the directory
//!   level by level when not resident (a node once per level for the keys
//!   routed through it), every key's window, the buffers the keys need;
//!   the rare pages past a window are read key by key, as one by one. The
//!   pages of one `get`/`lower_bound` per key, identical ranges once.
//! - `delete`: as `get`; removes the key from its segment page in place or
//!   from the buffer (no tombstones) and writes that page (or the buffer).
//!
//! # Durability and failures
//!
//! As `btree`: pages are updated in place under the pager's rollback
//! journal; [`Index::sync`] is a checkpoint; dropping the index checkpoints
//! (best effort); a crash reopens exactly at the last checkpoint. A failed
//! operation leaves the index readable and makes it refuse further writes
//! and syncs until it is reopened.
//!
//! # Thread safety
//!
//! [`FitingTree`] is `Send + Sync`; readers share a lock, writers take it
//! exclusively. A cursor takes the lock per call: after a write through the
//! same index, seek again.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod build;
mod format;
mod ops;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{Value, json};

pub use format::Meta;
pub use ops::VerifyReport;

pub(crate) use build::PageWriter;

use build::FitingLoader;
use format::{DirNode, FITING_FILE_ID, buf_capacity, dir_capacity, seg_capacity};
use ops::FitingCursor;

use super::{
    BuildOptions, Cursor, Index, IndexKind, IndexStats, Manifest, OpenOptions, ParamDoc, Params, Record,
    Records, Residency,
};
use crate::pager::{Pager, WriteState};
use crate::storage::{Directory, IoContext, IoStats, PageCache};
use crate::{Error, Result};

/// File name of the index inside an index directory.
pub const FITING_FILE: &str = "fiting.db";
/// Default error bound of the segments.
pub const DEFAULT_EPSILON: u64 = 64;
/// Default insert-buffer capacity per segment, in records.
pub const DEFAULT_BUFFER: u64 = 256;
/// Largest accepted `epsilon`.
pub const MAX_EPSILON: u64 = 1 << 20;
/// Largest accepted `buffer`.
pub const MAX_BUFFER: u64 = 1 << 16;

/// The `fiting` kind: parameters `epsilon` (default 64) and `buffer`
/// (records per segment's insert buffer, default 256).
#[derive(Debug)]
pub struct FitingKind;

/// Reads and checks `epsilon` and `buffer`.
fn params_of(params: &Params) -> Result<(u64, u32)> {
    let eps = params.u64("epsilon", DEFAULT_EPSILON)?;
    let buffer = params.u64("buffer", DEFAULT_BUFFER)?;
    if eps > MAX_EPSILON {
        return Err(Error::invalid(format!(
            "epsilon must be at most {MAX_EPSILON}, got {eps}"
        )));
    }
    if buffer == 0 || buffer > MAX_BUFFER {
        return Err(Error::invalid(format!(
            "buffer must be from 1 to {MAX_BUFFER} records, got {buffer}"
        )));
    }
    Ok((eps, buffer as u32))
}

impl IndexKind for FitingKind {
    fn name(&self) -> &'static str {
        "fiting"
    }

    /// Updated in place: one user at a time.
    fn dir_lock(&self) -> Option<crate::storage::LockMode> {
        Some(crate::storage::LockMode::Exclusive)
    }

    fn summary(&self) -> &'static str {
        "updatable on-disk FITing-tree: PLA segments (epsilon) with insert buffers under a B+-tree \
         directory; 1-2 segment pages per lookup with the directory resident"
    }

    fn params(&self) -> Vec<ParamDoc> {
        vec![
            ParamDoc::new("epsilon", "error bound of the PLA segments, at most 1048576"),
            ParamDoc::new("buffer", "records of each segment's insert buffer, 1-65536"),
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
        let (eps, buffer) = params_of(params)?;
        let journal = crate::pager::journal_name(FITING_FILE);
        if dir.exists(&journal) {
            dir.remove(&journal)?;
            dir.sync_dir()?;
        }
        let sink = dir.create_sink(FITING_FILE, opts.page_size)?;
        let mut b = FitingLoader::new(sink, opts.page_size, eps, buffer, build_id)?;
        for (k, v) in records.iter() {
            b.push(k, v)?;
        }
        let meta = b.finish()?;
        Ok((
            vec![FITING_FILE.to_string()],
            json!({
                "epsilon": meta.epsilon,
                "buffer": meta.buffer,
                "segments": meta.segments,
                "height": meta.height,
                "dir_nodes": meta.dir_nodes,
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
        let t = FitingTree::open(dir, io, opts.resident)?;
        manifest.check_paged(t.name(), t.meta().build_id, t.page_size)?;
        Ok(Box::new(t))
    }
}

/// Mutable state behind the index's lock.
#[derive(Debug)]
struct State {
    meta: Meta,
    /// Decoded directory nodes by page (with [`Residency::Index`]).
    resident: Option<HashMap<u64, DirNode>>,
    /// Dirty since the last checkpoint; poisoned after a failed write.
    w: WriteState,
}

impl AsMut<WriteState> for State {
    fn as_mut(&mut self) -> &mut WriteState {
        &mut self.w
    }
}

/// An open FITing-tree. See the module documentation for the I/O per
/// operation, thread safety and durability contracts.
#[derive(Debug)]
pub struct FitingTree {
    pager: Pager,
    dir: Arc<dyn Directory>,
    stats: Arc<IoStats>,
    cache: Option<Arc<PageCache>>,
    residency: Residency,
    page_size: usize,
    state: RwLock<State>,
}

impl FitingTree {
    /// Opens the index in `dir`: journal recovery, checkpoint checks, and
    /// with [`Residency::Index`] every directory node read and decoded.
    ///
    /// Errors: [`Error::Truncated`], [`Error::BadMagic`],
    /// [`Error::UnsupportedVersion`], [`Error::Corruption`] (naming the file
    /// and page), I/O errors.
    pub fn open(dir: Arc<dyn Directory>, mut io: IoContext, residency: Residency) -> Result<FitingTree> {
        let raw = dir.open(FITING_FILE)?;
        let (pager, cp, _) =
            Pager::open_journaled(dir.clone(), FITING_FILE, raw.clone(), &io, FITING_FILE_ID)?;
        let meta = Meta::from_checkpoint(&cp);
        meta.check(raw.name())?;
        cp.check_file(raw.as_ref())?;
        io.page_size = meta.page_size;
        let mut t = FitingTree {
            pager,
            dir,
            stats: io.stats.clone(),
            cache: io.cache.clone(),
            residency,
            page_size: meta.page_size,
            state: RwLock::new(State {
                meta,
                resident: None,
                w: WriteState::new("FITing-tree", raw.name()),
            }),
        };
        if residency == Residency::Index {
            let nodes = t.load_directory(&meta)?;
            t.state.get_mut().resident = Some(nodes);
        }
        Ok(t)
    }

    /// A copy of the checkpoint fields as held in memory (current counts).
    pub fn meta(&self) -> Meta {
        self.state.read().meta
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Bytes held in memory: resident directory nodes, the page cache's
    /// pages, the struct.
    pub fn memory_bytes(&self) -> u64 {
        let st = self.state.read();
        let nodes = st.resident.as_ref().map_or(0, |m| {
            m.values()
                .map(|n| 64 + n.entries.capacity() * std::mem::size_of::<format::Entry>())
                .sum::<usize>()
        });
        let cache = self.cache.as_ref().map_or(0, |c| c.memory_bytes());
        std::mem::size_of::<Self>() as u64 + nodes as u64 + cache
    }

    fn name(&self) -> &str {
        self.pager.name()
    }
}

impl Drop for FitingTree {
    fn drop(&mut self) {
        WriteState::close(self.state.get_mut(), |st| {
            self.pager.checkpoint(&st.meta.checkpoint())
        });
    }
}

impl Index for FitingTree {
    fn kind(&self) -> &str {
        "fiting"
    }

    fn len(&self) -> u64 {
        self.state.read().meta.n
    }

    /// The directory (`height` pages unless resident), the key's window of
    /// segment pages in one call, and the buffer only if the key is not in
    /// the window and the segment has one.
    fn get(&self, key: u64) -> Result<Option<u64>> {
        self.get_impl(key)
    }

    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        self.lower_bound_impl(key)
    }

    /// Sorted and deduplicated, in rounds of batched reads: the directory
    /// level by level when not resident, then every key's window of
    /// segment pages, then the insert buffers the keys need; the same pages
    /// as one `get` per key, each distinct range once per round.
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        crate::index::batch::answer(keys, out, |keys| self.get_many_impl(keys))
    }

    /// As [`Index::get_many`]; pages past the window (rare: after deletes,
    /// or a key past its segment's last record) are read key by key.
    fn lower_bound_many(&self, keys: &[u64], out: &mut Vec<Option<Record>>) -> Result<()> {
        crate::index::batch::answer(keys, out, |keys| self.lower_bound_many_impl(keys))
    }

    fn scan(&self, from: u64, count: usize, out: &mut Vec<Record>) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let mut c = FitingCursor::new(self);
        c.seek(from)?;
        c.next_batch(count, out)?;
        Ok(())
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(FitingCursor::new(self)))
    }

    fn supports_updates(&self) -> bool {
        true
    }

    fn insert(&self, key: u64, value: u64) -> Result<Option<u64>> {
        self.write_op(|t, st| t.insert_locked(st, key, value))
    }

    fn delete(&self, key: u64) -> Result<bool> {
        self.write_op(|t, st| t.delete_locked(st, key))
    }

    /// Checkpoints: every completed insert and delete is durable when this
    /// returns. Fails if an earlier write failed.
    fn sync(&self) -> Result<()> {
        WriteState::sync(&mut *self.state.write(), |st| {
            self.pager.checkpoint(&st.meta.checkpoint())
        })
    }

    fn stats(&self) -> Result<IndexStats> {
        let meta = self.meta();
        let mut st = IndexStats {
            kind: "fiting".into(),
            n: meta.n,
            memory_bytes: self.memory_bytes(),
            disk_bytes: self.dir.total_bytes()?,
            models: Some(meta.segments),
            height: Some(meta.height),
            ..Default::default()
        };
        let e = &mut st.extra;
        e.insert("epsilon".into(), json!(meta.epsilon));
        e.insert("buffer".into(), json!(meta.buffer));
        e.insert("segments".into(), json!(meta.segments));
        e.insert("dir_nodes".into(), json!(meta.dir_nodes));
        e.insert("segment_capacity".into(), json!(seg_capacity(self.page_size)));
        e.insert("buffer_page_capacity".into(), json!(buf_capacity(self.page_size)));
        e.insert("dir_fanout".into(), json!(dir_capacity(self.page_size)));
        e.insert("page_size".into(), json!(self.page_size));
        e.insert("pages".into(), json!(meta.space.page_count));
        e.insert("free_pages".into(), json!(meta.space.free_pages));
        e.insert("residency".into(), json!(self.residency.to_string()));
        e.insert("blocks".into(), self.pager.blocks().snapshot().to_json());
        Ok(st)
    }

    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let r = FitingTree::verify(self)?;
        progress(r.pages);
        Ok(r.pages)
    }

    fn io(&self) -> &Arc<IoStats> {
        &self.stats
    }
}
