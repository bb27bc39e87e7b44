//! `lipp`: LIPP on disk (Wu et al., as Lan et al. move it to disk, §2.2,
//! §4.2, Table 2): one node type, a linear model over an array of slots,
//! each DATA (a record), NULL or NODE (a child's address), found by the
//! model's precise position with no search; on the shared
//! [`crate::pager`].
//!
//! - `u64` keys and values; one file, `lipp.db`, of fixed-size pages (4 KiB
//!   by default). Format: `docs/format/lipp.md`.
//! - The nodes live in a *node space*: the payloads of pages `1..`
//!   concatenated (4080 bytes per 4 KiB page). A node is a 64-byte header
//!   (slot count, model, statistics) and 17-byte slots, each a type byte
//!   (Lan's slot flag, replacing LIPP's bitmaps) and two words; nodes are
//!   packed back to back, so a node may cross pages, and small nodes share
//!   pages. The bulk load writes the tree in pre-order (each node followed
//!   by its children's subtrees); new nodes are appended at the tail.
//! - Node models come from FMCD (Fastest Minimum Conflict Degree, Wu et
//!   al.); keys that share a slot go to a child node built the same way. A
//!   node over `n` keys has `5n` slots below 100,000 keys, `2n` from there
//!   (Lan §6), at least 8.
//!
//! # I/O per operation
//!
//! The checkpoint page is held in memory; with [`Residency::Index`] every
//! node header read is kept in memory (and updated on writes). Reads of a
//! node header are role `Inner`, reads of slots role `Leaf`; an operation
//! reuses the last few pages it read (Lan's "the last block fetched is
//! reused"), so a node whose header and slot share a page costs one block.
//! - `get`: per node on the path: its header (unless resident) and the one
//!   slot its model gives, 1-2 pages each; DATA or NULL ends the path.
//! - `get_many`/`lower_bound_many`: keys sorted and deduplicated, one round
//!   per level for the keys still open: the headers not resident in one
//!   batch, the slots the models give in another. Every page read is held
//!   for the rest of the batch (a few pages per key), so a page serves all
//!   the keys that reach it.
//! - `lower_bound`/cursor: a seek reads what `get` reads; then slots in
//!   order, page by page, descending into each child met (its header and
//!   slots) and back: Lan's O5, LIPP's scans read many leaf blocks.
//! - `insert`: the `get` path; then the slot is written (NULL → DATA), or
//!   an update of the key's value in place, or, on a DATA slot holding
//!   another key, a new child node of the two keys is appended at the tail
//!   and the slot becomes NODE (one `smo`). A new key then updates the
//!   statistics in the header of every node on its path (one header write
//!   each: Lan's S3 statistics overhead) and checks LIPP's rebuild rule
//!   top-down: the highest node whose subtree has grown to 4× the keys it
//!   was built with (and at least 64) with at least one in ten of its
//!   inserts having created a child is rebuilt: its records are read in
//!   order, planned afresh by FMCD and written at the tail in one call, and
//!   its parent's slot (or the root) is pointed at it (one `smo`). The old
//!   nodes become dead bytes, never reused.
//! - `delete`: the `get` path; the DATA slot becomes NULL. Statistics are
//!   updated on the insert path only; a child emptied by deletes stays (its
//!   NULL slots take later inserts) until a rebuild of an ancestor drops it.
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
//! [`LippIndex`] is `Send + Sync`; readers share a lock, writers take it
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
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};

pub use format::Meta;
pub use ops::VerifyReport;

use format::{LIPP_FILE_ID, NodeHeader};
use ops::LippCursor;

use super::{
    BuildOptions, Cursor, Index, IndexKind, IndexStats, Manifest, OpenOptions, Params, Record, Records,
    Residency,
};
use crate::Result;
use crate::pager::{Pager, WriteState};
use crate::storage::{Directory, IoContext, IoStats, PageCache};

/// File name of the index inside an index directory.
pub const LIPP_FILE: &str = "lipp.db";

/// The `lipp` kind: no parameters but the page size.
#[derive(Debug)]
pub struct LippKind;

impl IndexKind for LippKind {
    fn name(&self) -> &'static str {
        "lipp"
    }

    /// Updated in place: one user at a time.
    fn dir_lock(&self) -> Option<crate::storage::LockMode> {
        Some(crate::storage::LockMode::Exclusive)
    }

    fn summary(&self) -> &'static str {
        "updatable on-disk LIPP: FMCD-modelled nodes of DATA/NULL/NODE slots, precise positions, \
         child nodes on conflicts, subtree rebuilds; node header and slot per level"
    }

    fn build(
        &self,
        _params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
        build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        let journal = crate::pager::journal_name(LIPP_FILE);
        if dir.exists(&journal) {
            dir.remove(&journal)?;
            dir.sync_dir()?;
        }
        let recs: Vec<Record> = records.iter().collect();
        let sink = dir.create_sink(LIPP_FILE, opts.page_size)?;
        let meta = build::bulk_load(sink, opts.page_size, &recs, build_id)?;
        Ok((
            vec![LIPP_FILE.to_string()],
            json!({
                "nodes": meta.nodes,
                "node_bytes": meta.tail,
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
        let t = LippIndex::open(dir, io, opts.resident)?;
        manifest.check_paged(t.pager.name(), t.meta().build_id, t.page_size)?;
        Ok(Box::new(t))
    }
}

/// Mutable state behind the index's lock.
#[derive(Debug)]
struct State {
    meta: Meta,
    /// Dirty since the last checkpoint; poisoned after a failed write.
    w: WriteState,
}

impl AsMut<WriteState> for State {
    fn as_mut(&mut self) -> &mut WriteState {
        &mut self.w
    }
}

/// An open LIPP. See the module documentation for the I/O per operation,
/// thread safety and durability contracts.
#[derive(Debug)]
pub struct LippIndex {
    pager: Pager,
    dir: Arc<dyn Directory>,
    stats: Arc<IoStats>,
    cache: Option<Arc<PageCache>>,
    residency: Residency,
    page_size: usize,
    state: RwLock<State>,
    /// Node headers by address, kept once read (with [`Residency::Index`]).
    /// Addresses are never reused, so an entry never goes stale.
    headers: Option<Mutex<HashMap<u64, NodeHeader>>>,
    /// Point lookups answered, and the nodes they visited.
    lookups: AtomicU64,
    node_visits: AtomicU64,
}

impl LippIndex {
    /// Opens the index in `dir`: journal recovery and checkpoint checks.
    ///
    /// Errors: [`crate::Error::Truncated`], [`crate::Error::BadMagic`],
    /// [`crate::Error::UnsupportedVersion`], [`crate::Error::Corruption`]
    /// (naming the file and page), I/O errors.
    pub fn open(dir: Arc<dyn Directory>, mut io: IoContext, residency: Residency) -> Result<LippIndex> {
        let raw = dir.open(LIPP_FILE)?;
        let (pager, cp, _) = Pager::open_journaled(dir.clone(), LIPP_FILE, raw.clone(), &io, LIPP_FILE_ID)?;
        let meta = Meta::from_checkpoint(&cp);
        meta.check(raw.name())?;
        cp.check_file(raw.as_ref())?;
        io.page_size = meta.page_size;
        Ok(LippIndex {
            pager,
            dir,
            stats: io.stats.clone(),
            cache: io.cache.clone(),
            residency,
            page_size: meta.page_size,
            state: RwLock::new(State {
                meta,
                w: WriteState::new("LIPP", raw.name()),
            }),
            headers: (residency == Residency::Index).then(|| Mutex::new(HashMap::new())),
            lookups: AtomicU64::new(0),
            node_visits: AtomicU64::new(0),
        })
    }

    /// A copy of the checkpoint fields as held in memory (current counts).
    pub fn meta(&self) -> Meta {
        self.state.read().meta
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Bytes held in memory: resident node headers, the page cache's pages,
    /// the struct.
    pub fn memory_bytes(&self) -> u64 {
        let headers = self.headers.as_ref().map_or(0, |h| {
            h.lock().len() * (std::mem::size_of::<NodeHeader>() + std::mem::size_of::<u64>())
        });
        let cache = self.cache.as_ref().map_or(0, |c| c.memory_bytes());
        std::mem::size_of::<Self>() as u64 + headers as u64 + cache
    }
}

impl Drop for LippIndex {
    fn drop(&mut self) {
        WriteState::close(self.state.get_mut(), |st| {
            self.pager.checkpoint(&st.meta.checkpoint())
        });
    }
}

impl Index for LippIndex {
    fn kind(&self) -> &str {
        "lipp"
    }

    fn len(&self) -> u64 {
        self.state.read().meta.n
    }

    /// Per node on the path: its header (unless resident) and one slot.
    fn get(&self, key: u64) -> Result<Option<u64>> {
        self.get_impl(key)
    }

    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        self.lower_bound_impl(key)
    }

    /// Sorted and deduplicated: one round per level for the keys still
    /// open, the node headers not resident in one batch and the slots the
    /// models give in another; a page read once serves every key of the
    /// batch (held until the batch ends).
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        crate::index::batch::answer(keys, out, |keys| self.get_many_impl(keys))
    }

    /// As [`Index::get_many`], then each key's cursor continues from its
    /// path (slots after the position read key by key).
    fn lower_bound_many(&self, keys: &[u64], out: &mut Vec<Option<Record>>) -> Result<()> {
        crate::index::batch::answer(keys, out, |keys| self.lower_bound_many_impl(keys))
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(LippCursor::new(self)))
    }

    fn supports_updates(&self) -> bool {
        true
    }

    fn insert(&self, key: u64, value: u64) -> Result<Option<u64>> {
        WriteState::write(&mut *self.state.write(), |st| self.insert_locked(st, key, value))
    }

    fn delete(&self, key: u64) -> Result<bool> {
        WriteState::write(&mut *self.state.write(), |st| self.delete_locked(st, key))
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
            kind: "lipp".into(),
            n: meta.n,
            memory_bytes: self.memory_bytes(),
            disk_bytes: self.dir.total_bytes()?,
            models: Some(meta.nodes),
            height: None,
            ..Default::default()
        };
        let e = &mut st.extra;
        e.insert("nodes".into(), json!(meta.nodes));
        e.insert("node_bytes".into(), json!(meta.tail));
        e.insert("dead_bytes".into(), json!(meta.dead));
        e.insert("lookups".into(), json!(self.lookups.load(Ordering::Relaxed)));
        e.insert(
            "node_visits".into(),
            json!(self.node_visits.load(Ordering::Relaxed)),
        );
        e.insert("page_size".into(), json!(self.page_size));
        e.insert("pages".into(), json!(meta.space.page_count));
        e.insert("residency".into(), json!(self.residency.to_string()));
        e.insert("blocks".into(), self.pager.blocks().snapshot().to_json());
        Ok(st)
    }

    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let r = LippIndex::verify(self)?;
        progress(r.pages);
        Ok(r.pages)
    }

    fn io(&self) -> &Arc<IoStats> {
        &self.stats
    }
}
