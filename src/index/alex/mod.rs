//! `alex`: ALEX on disk (Ding et al., as Lan et al. move it to disk, §2.2,
//! §4.1, Table 2): an updatable learned tree of inner nodes (a linear model
//! and an array of child addresses; routing computes the slot, no search)
//! over data nodes (a linear model and a gapped array of records with a
//! bitmap), on the shared [`crate::pager`]. Lan's *Layout#2*: inner nodes
//! packed several to a page on pages of their own, each data node a run of
//! contiguous pages with its model, links and bitmap in the header at the
//! start of the run. Format: `docs/format/alex.md`.
//!
//! - `u64` keys and values; one file, `alex.db`, of fixed-size pages (4 KiB
//!   by default). A child address is `page * page_size + offset`: offset 0
//!   is a data node's head page, any other offset an inner node on an inner
//!   page. The root's address is in the pager's root slot.
//! - A data node holds records at (near) their predicted slots; gaps hold
//!   the next record's key, so the key array is sorted. Data nodes are
//!   linked in key order (previous and next head page).
//! - Parameter `max_node_pages` (default 16): the largest data node, in
//!   pages. The bulk load groups keys into data nodes of at most
//!   `max_cap * 0.7 / 2` records (`max_cap`: slots of the largest node) and
//!   builds nodes at density 0.7.
//!
//! # Operations and I/O
//!
//! With [`Residency::Index`] every inner page is read at open and kept in
//! memory (and updated on writes); with [`Residency::None`] each operation
//! reads the inner pages on its path (role `Inner`; one read when two nodes
//! on the path share a page). Data-node pages are read one at a time as
//! the algorithm touches them (role `Leaf`): the head page (model, bitmap),
//! then the key pages the exponential search probes, the value page.
//! - `get`/`lower_bound`: the path, then the model's slot and an
//!   exponential search from it; the bitmap skips gaps. `lower_bound`
//!   follows the next link when the node holds no larger key.
//! - `get_many`/`lower_bound_many`: keys sorted and deduplicated, then
//!   rounds of batched reads: the inner path level by level (not
//!   resident), the data nodes' head pages, the pages where the searches
//!   start, the value pages; a data node's pages are read once for all the
//!   keys in it, so never more pages than one lookup per key.
//! - `scan`/cursor: a seek as `lower_bound`, then slot by slot through the
//!   bitmap, each page read once, the next node through its sibling link.
//! - `insert`: as `get`; an existing key is updated in place (its value's
//!   page written). A new key goes to its predicted slot if that lies in
//!   the gaps between its neighbours, else the records between it and the
//!   nearest gap shift by one toward the gap. The header (count and
//!   statistics) and the pages touched are written.
//! - An insert that would take a data node above density 0.8 first runs
//!   one SMO (one `smo`, the whole node read in one call, the new nodes
//!   written to new pages, the parent's slots and the neighbours' links
//!   rewritten, the old pages freed to the pager), chosen by ALEX's cost
//!   model. Cost per insert = 20 × search iterations (key comparisons of
//!   the exponential and binary search) + 0.5 × shifted records. A node's
//!   *expected* cost is computed when it is built (the searches for every
//!   key it holds, and `L / 4` shifts for an insert into a run of `L`
//!   records); its *empirical* cost comes from the statistics of the
//!   inserts since (kept in its header, written with each insert; lookups
//!   write nothing, Lan §4.1); it *deviates* when above
//!   `1.5 × expected + 10` after at least 32 inserts. The SMO is an
//!   *expansion* (a node at density 0.7 with a retrained model) when that
//!   fits `max_node_pages` and the cost does not deviate; otherwise the
//!   cheapest by expected cost of the nodes it would build: expansion (if
//!   it fits), a *sideways split* (when the parent points to the node from
//!   two or more slots: each half of them gets a node; if both fit) and a
//!   *downward split* (a new inner node, fanout bringing its children to
//!   the bulk-load budget, plus 20 for the extra level on the path).
//! - `delete`: as `get`; the slot becomes a gap (no merges of data nodes).
//!
//! # Durability and failures
//!
//! As `btree`: pages are updated in place under the pager's rollback
//! journal; [`Index::sync`] is a checkpoint; dropping the index
//! checkpoints (best effort); a crash reopens exactly at the last
//! checkpoint. A failed operation leaves the index readable and makes it
//! refuse further writes and syncs until it is reopened.
//!
//! # Thread safety
//!
//! [`Alex`] is `Send + Sync`; readers share a lock, writers take it
//! exclusively. A cursor takes the lock per call: after a write through the
//! same index, seek again.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod build;
mod format;
mod node;
mod tree;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{Value, json};

pub use format::{MAX_NODE_PAGES, Meta};
pub use tree::VerifyReport;

use build::AlexLoader;
use format::{ALEX_FILE_ID, cap_for_pages, max_fanout};
use tree::AlexCursor;

use super::{
    BuildOptions, Cursor, Index, IndexKind, IndexStats, Manifest, OpenOptions, ParamDoc, Params, Record,
    Records, Residency,
};
use crate::pager::{Pager, WriteState};
use crate::storage::{AlignedBuf, Directory, IoContext, IoStats, PageCache};
use crate::{Error, Result};

/// File name of the index inside an index directory.
pub const ALEX_FILE: &str = "alex.db";
/// Default largest data node, in pages.
pub const DEFAULT_MAX_NODE_PAGES: u64 = 16;

/// The `alex` kind: parameter `max_node_pages` (largest data node in
/// pages, 1 to [`MAX_NODE_PAGES`], default 16).
#[derive(Debug)]
pub struct AlexKind;

fn params_of(params: &Params) -> Result<u32> {
    let p = params.u64("max_node_pages", DEFAULT_MAX_NODE_PAGES)?;
    if p == 0 || p > u64::from(MAX_NODE_PAGES) {
        return Err(Error::invalid(format!(
            "max_node_pages must be from 1 to {MAX_NODE_PAGES}, got {p}"
        )));
    }
    Ok(p as u32)
}

impl IndexKind for AlexKind {
    fn name(&self) -> &'static str {
        "alex"
    }

    /// Updated in place: one user at a time.
    fn dir_lock(&self) -> Option<crate::storage::LockMode> {
        Some(crate::storage::LockMode::Exclusive)
    }

    fn summary(&self) -> &'static str {
        "updatable on-disk ALEX: model-routed inner nodes over gapped-array data nodes with \
         bitmaps (Lan's Layout#2), expansions and splits by ALEX's cost model"
    }

    fn params(&self) -> Vec<ParamDoc> {
        vec![ParamDoc::new(
            "max_node_pages",
            "largest data node in pages, 1-1024 (a fuller node splits)",
        )]
    }

    fn build(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
        build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        let max_pages = params_of(params)?;
        let journal = crate::pager::journal_name(ALEX_FILE);
        if dir.exists(&journal) {
            dir.remove(&journal)?;
            dir.sync_dir()?;
        }
        let sink = dir.create_sink(ALEX_FILE, opts.page_size)?;
        let mut b = AlexLoader::new(sink, opts.page_size, max_pages, build_id)?;
        for (k, v) in records.iter() {
            b.push(k, v)?;
        }
        let meta = b.finish()?;
        Ok((
            vec![ALEX_FILE.to_string()],
            json!({
                "max_node_pages": meta.max_pages,
                "data_nodes": meta.data_nodes,
                "inner_nodes": meta.inner_nodes,
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
        let t = Alex::open(dir, io, opts.resident)?;
        manifest.check_paged(t.name(), t.meta().build_id, t.page_size)?;
        Ok(Box::new(t))
    }
}

/// Mutable state behind the index's lock.
#[derive(Debug)]
struct State {
    meta: Meta,
    /// Inner pages by page number (with [`Residency::Index`]).
    resident: Option<HashMap<u64, AlignedBuf>>,
    /// Dirty since the last checkpoint; poisoned after a failed write.
    w: WriteState,
}

impl AsMut<WriteState> for State {
    fn as_mut(&mut self) -> &mut WriteState {
        &mut self.w
    }
}

/// An open ALEX. See the module documentation for the I/O per operation,
/// thread safety and durability contracts.
#[derive(Debug)]
pub struct Alex {
    pager: Pager,
    dir: Arc<dyn Directory>,
    stats: Arc<IoStats>,
    cache: Option<Arc<PageCache>>,
    residency: Residency,
    page_size: usize,
    state: RwLock<State>,
}

impl Alex {
    /// Opens the index in `dir`: journal recovery, checkpoint checks, and
    /// with [`Residency::Index`] every inner page read.
    ///
    /// Errors: [`Error::Truncated`], [`Error::BadMagic`],
    /// [`Error::UnsupportedVersion`], [`Error::Corruption`] (naming the file
    /// and page), I/O errors.
    pub fn open(dir: Arc<dyn Directory>, mut io: IoContext, residency: Residency) -> Result<Alex> {
        let raw = dir.open(ALEX_FILE)?;
        let (pager, cp, _) = Pager::open_journaled(dir.clone(), ALEX_FILE, raw.clone(), &io, ALEX_FILE_ID)?;
        let meta = Meta::from_checkpoint(&cp);
        meta.check(raw.name())?;
        cp.check_file(raw.as_ref())?;
        io.page_size = meta.page_size;
        let mut t = Alex {
            pager,
            dir,
            stats: io.stats.clone(),
            cache: io.cache.clone(),
            residency,
            page_size: meta.page_size,
            state: RwLock::new(State {
                meta,
                resident: None,
                w: WriteState::new("ALEX", raw.name()),
            }),
        };
        if residency == Residency::Index {
            let pages = t.load_inner(&meta)?;
            t.state.get_mut().resident = Some(pages);
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

    /// Bytes held in memory: resident inner pages, the page cache's pages,
    /// the struct.
    pub fn memory_bytes(&self) -> u64 {
        let st = self.state.read();
        let inner = st
            .resident
            .as_ref()
            .map_or(0, |m| m.len() * (self.page_size + 32));
        let cache = self.cache.as_ref().map_or(0, |c| c.memory_bytes());
        std::mem::size_of::<Self>() as u64 + inner as u64 + cache
    }

    fn name(&self) -> &str {
        self.pager.name()
    }
}

impl Drop for Alex {
    fn drop(&mut self) {
        WriteState::close(self.state.get_mut(), |st| {
            self.pager.checkpoint(&st.meta.checkpoint())
        });
    }
}

impl Index for Alex {
    fn kind(&self) -> &str {
        "alex"
    }

    fn len(&self) -> u64 {
        self.state.read().meta.n
    }

    /// The path of inner nodes (read unless resident), the data node's head
    /// page and the key (and value) pages its exponential search touches.
    fn get(&self, key: u64) -> Result<Option<u64>> {
        self.get_impl(key)
    }

    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        let mut c = AlexCursor::new(self);
        c.seek(key)?;
        c.next()
    }

    /// Sorted and deduplicated, in rounds of batched reads: the inner path
    /// level by level when not resident, the data nodes' head pages, the
    /// pages where the searches start, the value pages; a data node's pages
    /// are read once for all the keys in it (never more pages than one
    /// `get` per key).
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        crate::index::batch::answer(keys, out, |keys| self.get_many_impl(keys))
    }

    /// As [`Index::get_many`]; a key past its node's last record follows
    /// the sibling links as the cursor does.
    fn lower_bound_many(&self, keys: &[u64], out: &mut Vec<Option<Record>>) -> Result<()> {
        crate::index::batch::answer(keys, out, |keys| self.lower_bound_many_impl(keys))
    }

    fn scan(&self, from: u64, count: usize, out: &mut Vec<Record>) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let mut c = AlexCursor::new(self);
        c.seek(from)?;
        c.next_batch(count, out)?;
        Ok(())
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(AlexCursor::new(self)))
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
            kind: "alex".into(),
            n: meta.n,
            memory_bytes: self.memory_bytes(),
            disk_bytes: self.dir.total_bytes()?,
            models: Some(u64::from(meta.data_nodes) + u64::from(meta.inner_nodes)),
            height: None,
            ..Default::default()
        };
        let e = &mut st.extra;
        e.insert("max_node_pages".into(), json!(meta.max_pages));
        e.insert("data_nodes".into(), json!(meta.data_nodes));
        e.insert("inner_nodes".into(), json!(meta.inner_nodes));
        e.insert(
            "max_node_slots".into(),
            json!(cap_for_pages(meta.max_pages as usize, self.page_size)),
        );
        e.insert("max_fanout".into(), json!(max_fanout(self.page_size)));
        e.insert("page_size".into(), json!(self.page_size));
        e.insert("pages".into(), json!(meta.space.page_count));
        e.insert("free_pages".into(), json!(meta.space.free_pages));
        e.insert("residency".into(), json!(self.residency.to_string()));
        e.insert("blocks".into(), self.pager.blocks().snapshot().to_json());
        Ok(st)
    }

    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let r = Alex::verify(self)?;
        progress(r.pages);
        Ok(r.pages)
    }

    fn io(&self) -> &Arc<IoStats> {
        &self.stats
    }
}
