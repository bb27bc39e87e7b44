//! `btree`: a page-based B+-tree over [`Storage`](crate::storage::Storage) and the page cache — the
//! baseline every strata index is measured against (Lan et al. §4–6,
//! AirIndex's B-TREE: 4 KiB nodes, fanout 255/256).
//!
//! - `u64` keys and values; one file, `btree.db`, of fixed-size pages
//!   (4 KiB by default; 8/16 KiB with the `page` parameter). Page 0 is the
//!   meta page; leaves hold 255 records on 4 KiB pages (511 on 8 KiB, 1023 on
//!   16 KiB) and link to their right sibling; inner nodes hold up to 255
//!   separators and 256 children (512 / 1024). Every page is checksummed.
//!   The format is specified in `docs/format/btree.md`. Pages are allocated,
//!   freed, read, written and checkpointed by the shared [`crate::pager`].
//! - Bulk load from sorted keys with a fill factor (`fill`, percent, default
//!   100), written sequentially in large writes (`BulkLoader`).
//! - Point lookups, lower bounds and range scans (following sibling links);
//!   inserts with splits up to the root; updates; deletes without
//!   rebalancing, freeing a leaf (and inner nodes left without children) when
//!   it becomes empty; freed pages are reused by later splits.
//!
//! # Residency and I/O per operation
//!
//! The meta page is always held in memory.
//! - [`Residency::Index`] (the papers' *hybrid* case): every inner node is
//!   read and decoded at open and kept in memory (and kept consistent on
//!   writes); only leaves are read from storage. A point lookup reads exactly
//!   one page in one read call; a scan reads one page per leaf it touches.
//! - [`Residency::None`] (the *disk-resident* case): nothing but the meta page
//!   is in memory; every operation reads each level from the root down, so a
//!   point lookup reads `height` pages in `height` calls.
//! - With `cache_pages > 0` an LRU page cache sits in front of the file (see
//!   [`IoContext::wrap`]); only its misses are counted as reads.
//!
//! An insert or delete that changes only its leaf reads the same pages as a
//! lookup and writes one page; a split writes one new page per level it
//! reaches plus the pages it shrinks (Table 2: about `2 log_B N`).
//!
//! # Thread safety
//!
//! [`BTree`] is `Send + Sync`; every method takes `&self`. Readers run
//! concurrently under a shared lock; writers are serialised by an exclusive
//! lock and never expose a half-done change to a reader. The lock is per
//! [`BTree`]: a file must not be updated through one instance while another
//! instance has it open (the other's meta page and pinned nodes would be
//! stale).
//!
//! # Durability and failures
//!
//! Pages are updated in place under the pager's rollback journal
//! (`btree.db-journal`, see `docs/format/pager.md`). [`Index::sync`] is a
//! checkpoint: it writes the meta page last and syncs, making every
//! completed operation durable; dropping the tree does the same (best
//! effort). A crash (power loss included, torn page writes included) at any
//! point reopens the tree exactly at its last checkpoint: the open rolls
//! back every page written since. The cost: the first write to a page in a
//! checkpoint interval also appends its old image to the journal and syncs
//! it (one page write and one sync), and a checkpoint syncs the file twice
//! and empties the journal. Within a process, a write that fails leaves the
//! tree readable and consistent (new pages are written before the pages that
//! point to them, shrunk pages last), and the tree then refuses further
//! writes and syncs until it is reopened.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod builder;
pub(crate) mod format;
mod ldir;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{Value, json};

pub(crate) use builder::{BulkLoader, check_fill, load_ranked};
pub(crate) use format::{BTREE_FILE_ID, Meta, inner_fanout, node_capacity};
pub use reader::VerifyReport;

use ldir::LeafDir;
use reader::{BTreeCursor, Pinned};
use writer::{Pending, Scratch};

use super::{
    BuildOptions, Cursor, Index, IndexKind, IndexStats, Manifest, OpenOptions, ParamDoc, Params, Record,
    Records, Residency,
};
use crate::pager::{META_PAGE, Pager, Role, WriteState};
use crate::storage::{Directory, IoContext, IoStats, PageCache};
use crate::{Error, Result};

/// File name of the tree inside an index directory.
pub const BTREE_FILE: &str = "btree.db";
/// Default fill factor (percent) of a bulk load.
pub const DEFAULT_FILL: u32 = 100;

/// The `btree` kind ([`BTreeKind::PLAIN`]) and `btree-ld`, the same tree
/// under a learned leaf directory ([`BTreeKind::LEARNED`]): parameters
/// `page` (page size, default 4096) and `fill` (bulk-load fill factor in
/// percent, default 100).
#[derive(Debug)]
pub struct BTreeKind {
    learned: bool,
}

impl BTreeKind {
    /// `btree`.
    pub const PLAIN: BTreeKind = BTreeKind { learned: false };
    /// `btree-ld`: the leaves and inner nodes of `btree` on storage, the
    /// learned leaf directory in memory (`docs/format/btree-ld.md`).
    pub const LEARNED: BTreeKind = BTreeKind { learned: true };
}

impl IndexKind for BTreeKind {
    fn name(&self) -> &'static str {
        if self.learned { "btree-ld" } else { "btree" }
    }

    /// Updated in place: one user at a time.
    fn dir_lock(&self) -> Option<crate::storage::LockMode> {
        Some(crate::storage::LockMode::Exclusive)
    }

    fn summary(&self) -> &'static str {
        if self.learned {
            "updatable B+-tree under a learned leaf directory in memory (gap-coded round \
             separators, LeCo page numbers: ~3-5 B per leaf); 1 page per lookup and per \
             insert without a split"
        } else {
            "updatable page-based B+-tree (255 records per 4 KiB leaf, fanout 256); \
             1 page per lookup with inner nodes resident, `height` pages without"
        }
    }

    fn params(&self) -> Vec<ParamDoc> {
        vec![ParamDoc::new(
            "fill",
            "percent of each leaf the bulk load fills, 1-100 (room left for inserts without splits)",
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
        let fill = check_fill(params.u64("fill", DEFAULT_FILL as u64)?)?;
        let sink = dir.create_sink(BTREE_FILE, opts.page_size)?;
        let mut b = BulkLoader::new(sink, opts.page_size, fill)?;
        b.set_build_id(build_id);
        b.set_round_separators(self.learned);
        records.try_for_each(|k, v| b.push(k, v))?;
        let meta = b.finish()?;
        Ok((
            vec![BTREE_FILE.to_string()],
            json!({
                "height": meta.height,
                "leaves": meta.leaves,
                "inner_nodes": meta.inner,
                "fill": meta.fill,
                "leaf_capacity": node_capacity(meta.page_size),
                "fanout": inner_fanout(meta.page_size),
            }),
        ))
    }

    fn streams_build(&self) -> bool {
        true
    }

    fn open(
        &self,
        manifest: &Manifest,
        dir: Arc<dyn Directory>,
        io: IoContext,
        opts: &OpenOptions,
    ) -> Result<Box<dyn Index>> {
        let routing = if self.learned {
            Routing::Learned
        } else {
            Routing::from(opts.resident)
        };
        let t = BTree::open_routed(dir, io, routing)?;
        // The record count and the pages change with every update: only the
        // build id is compared.
        manifest.check_paged(t.name(), t.meta().build_id, t.page_size)?;
        Ok(Box::new(t))
    }
}

/// Mutable state behind the tree's lock.
#[derive(Debug)]
struct State {
    meta: Meta,
    /// Decoded inner nodes (with [`Routing::Pinned`] and height >= 2).
    pinned: Option<Pinned>,
    /// The learned leaf directory (with [`Routing::Learned`]).
    ldir: Option<LeafDir>,
    /// Leaf splits the directory routes and the inner nodes do not know
    /// yet (with [`Routing::Learned`]; written before every checkpoint).
    pending: Vec<Pending>,
    /// Dirty since the last checkpoint; poisoned after a failed write.
    w: WriteState,
    /// Buffers of the writer.
    scratch: Scratch,
}

/// An open B+-tree. See the module documentation for the I/O per operation,
/// thread safety and durability contracts.
#[derive(Debug)]
pub struct BTree {
    pager: Pager,
    dir: Arc<dyn Directory>,
    stats: Arc<IoStats>,
    cache: Option<Arc<PageCache>>,
    routing: Routing,
    page_size: usize,
    state: RwLock<State>,
}

/// How a [`BTree`] finds the leaf of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// Through the inner nodes, decoded and pinned in memory at open
    /// ([`Residency::Index`]).
    Pinned,
    /// Through the inner nodes on storage, read on every descent
    /// ([`Residency::None`]).
    Disk,
    /// Through the learned leaf directory in memory, built at open from
    /// the inner nodes (`btree-ld`); inner pages are read by splits and
    /// leaf frees only.
    Learned,
}

impl From<Residency> for Routing {
    fn from(r: Residency) -> Routing {
        match r {
            Residency::Index => Routing::Pinned,
            Residency::None => Routing::Disk,
        }
    }
}

impl BTree {
    /// Bulk loads `keys` (strictly increasing; value = rank) into a new
    /// [`BTREE_FILE`] in `dir` with `page_size`-byte pages and `fill`
    /// percent fill. Returns the meta page.
    /// A journal left by the tree this one replaces is removed first (a build
    /// through the registry instead gives the tree a new build id, which no
    /// old journal names).
    pub fn create_ranked(dir: &dyn Directory, keys: &[u64], page_size: usize, fill: u32) -> Result<Meta> {
        let journal = crate::pager::journal_name(BTREE_FILE);
        if dir.exists(&journal) {
            dir.remove(&journal)?;
            dir.sync_dir()?;
        }
        load_ranked(dir.create_sink(BTREE_FILE, page_size)?, keys, page_size, fill)
    }

    /// Opens the tree in `dir`. Every read goes through `io` (accounting,
    /// and its page cache if it has one; its `page_size` is set to the
    /// tree's). With [`Residency::Index`] all inner nodes are read (one read
    /// call per run of consecutive pages) and decoded now.
    ///
    /// Errors: [`Error::Truncated`], [`Error::BadMagic`],
    /// [`Error::UnsupportedVersion`], [`Error::Corruption`] (a page fails its
    /// checksum or structure check), I/O errors.
    pub fn open(dir: Arc<dyn Directory>, io: IoContext, residency: Residency) -> Result<BTree> {
        BTree::open_routed(dir, io, Routing::from(residency))
    }

    /// [`BTree::open`] with any [`Routing`]. With [`Routing::Learned`] the
    /// inner nodes are read as for [`Residency::Index`], flattened into the
    /// leaf directory and dropped.
    pub fn open_routed(dir: Arc<dyn Directory>, mut io: IoContext, routing: Routing) -> Result<BTree> {
        let raw = dir.open(BTREE_FILE)?;
        let (pager, cp, _) = Pager::open_journaled(dir.clone(), BTREE_FILE, raw.clone(), &io, BTREE_FILE_ID)?;
        let meta = Meta::from_checkpoint(&cp);
        meta.check(raw.name())?;
        cp.check_file(raw.as_ref())?;
        io.page_size = meta.page_size;
        let mut tree = BTree {
            pager,
            dir,
            stats: io.stats.clone(),
            cache: io.cache.clone(),
            routing,
            page_size: meta.page_size,
            state: RwLock::new(State {
                meta,
                pinned: None,
                ldir: None,
                pending: Vec::new(),
                w: WriteState::new("B+-tree", raw.name()),
                scratch: Scratch::new(meta.page_size),
            }),
        };
        if routing != Routing::Disk && meta.height >= 2 {
            // Counted, but not through the page cache: pinned pages would
            // only take cache slots from leaves.
            let uncached = IoContext {
                cache: None,
                ..io.clone()
            }
            .wrap_rw(raw);
            let ps = meta.page_size as u64;
            let blocks = tree.pager.blocks();
            let mut read = |first: u64, buf: &mut [u8]| {
                blocks.read(Role::Inner, buf.len() as u64 / ps);
                uncached.read_at(first * ps, buf)
            };
            let pinned = Pinned::load(uncached.name(), &mut read, &meta)?;
            tree.state.get_mut().pinned = Some(pinned);
        }
        if routing == Routing::Learned {
            let name = tree.pager.name().to_string();
            let st = tree.state.get_mut();
            let leaves = match st.pinned.take() {
                Some(p) => p.leaves(meta.height),
                None => vec![(0, meta.root)],
            };
            if leaves.len() as u64 != meta.leaves {
                return Err(Error::corruption(
                    &name,
                    META_PAGE,
                    format!(
                        "meta page counts {} leaves, the inner nodes {}",
                        meta.leaves,
                        leaves.len()
                    ),
                ));
            }
            let d = LeafDir::new(&leaves).map_err(|e| Error::corruption(&name, META_PAGE, e.to_string()))?;
            st.ldir = Some(d);
        }
        Ok(tree)
    }

    /// A copy of the meta page as held in memory (current counts).
    pub fn meta(&self) -> Meta {
        self.state.read().meta
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// How leaves are found.
    pub fn routing(&self) -> Routing {
        self.routing
    }

    /// Bytes held in memory by the tree's structures: the pinned inner nodes,
    /// the writer's page buffers, the struct itself, and the pages resident
    /// in the page cache if one is configured.
    pub fn memory_bytes(&self) -> u64 {
        let st = self.state.read();
        let pinned = st.pinned.as_ref().map_or(0, Pinned::memory_bytes);
        let ldir = st.ldir.as_ref().map_or(0, LeafDir::memory_bytes)
            + (st.pending.capacity() * std::mem::size_of::<Pending>()) as u64;
        let cache = self.cache.as_ref().map_or(0, |c| c.memory_bytes());
        std::mem::size_of::<Self>() as u64 + pinned + ldir + st.scratch.memory_bytes() + cache
    }

    fn name(&self) -> &str {
        self.pager.name()
    }

    /// Writes the pending splits into the inner nodes, then the meta page,
    /// and syncs.
    fn checkpoint(&self, st: &mut State) -> Result<()> {
        self.apply_pending(st)?;
        self.pager.checkpoint(&st.meta.checkpoint())
    }

    /// `btree`, or `btree-ld` with the learned directory.
    fn kind_name(&self) -> &'static str {
        if self.routing == Routing::Learned {
            "btree-ld"
        } else {
            "btree"
        }
    }

    /// Reads page `page_no` into `buf` (one page).
    #[inline]
    fn read_page(&self, role: Role, page_no: u64, buf: &mut [u8]) -> Result<()> {
        self.pager.read_page(role, page_no, buf)
    }
}

impl AsMut<WriteState> for State {
    fn as_mut(&mut self) -> &mut WriteState {
        &mut self.w
    }
}

impl Drop for BTree {
    fn drop(&mut self) {
        WriteState::close(&mut *self.state.write(), |st| self.checkpoint(st));
    }
}

impl Index for BTree {
    fn kind(&self) -> &str {
        self.kind_name()
    }

    fn len(&self) -> u64 {
        self.state.read().meta.n
    }

    /// Reads 1 page with [`Residency::Index`], `height` pages otherwise.
    fn get(&self, key: u64) -> Result<Option<u64>> {
        self.get_impl(key)
    }

    /// Like [`Index::get`], plus one page per following leaf when the
    /// routed leaf holds no key `>= key` (only after deletes).
    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        self.lower_bound_impl(key)
    }

    /// Sorted and deduplicated; the inner levels on storage read level by
    /// level, then the leaves, each level's distinct pages in one batch of
    /// `queue_depth` reads in flight.
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        crate::index::batch::answer(keys, out, |keys| self.get_many_impl(keys))
    }

    /// As [`Index::get_many`].
    fn lower_bound_many(&self, keys: &[u64], out: &mut Vec<Option<Record>>) -> Result<()> {
        crate::index::batch::answer(keys, out, |keys| self.lower_bound_many_impl(keys))
    }

    /// Descends like [`Index::get`], then reads one page per further leaf;
    /// reads nothing when `count` is 0.
    fn scan(&self, from: u64, count: usize, out: &mut Vec<Record>) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        out.reserve(count.min(usize::try_from(self.len()).unwrap_or(usize::MAX)));
        BTreeCursor::scan(self, from, count, out)?;
        Ok(())
    }

    /// A seek descends like [`Index::get`] (reading the key's leaf); `next`
    /// follows the sibling links, one leaf page per read.
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(BTreeCursor::new(self)))
    }

    fn supports_updates(&self) -> bool {
        true
    }

    fn insert(&self, key: u64, value: u64) -> Result<Option<u64>> {
        self.insert_impl(key, value)
    }

    fn delete(&self, key: u64) -> Result<bool> {
        self.delete_impl(key)
    }

    /// Writes the meta page and syncs: every completed insert and delete is
    /// durable when this returns. Fails if an earlier write failed.
    fn sync(&self) -> Result<()> {
        WriteState::sync(&mut *self.state.write(), |st| self.checkpoint(st))
    }

    fn stats(&self) -> Result<IndexStats> {
        let meta = self.meta();
        let mut st = IndexStats {
            kind: self.kind_name().into(),
            n: meta.n,
            memory_bytes: self.memory_bytes(),
            disk_bytes: self.dir.total_bytes()?,
            models: None,
            height: Some(meta.height),
            ..Default::default()
        };
        let e = &mut st.extra;
        e.insert("leaves".into(), json!(meta.leaves));
        e.insert("inner_nodes".into(), json!(meta.inner));
        e.insert("fill".into(), json!(meta.fill));
        e.insert("fanout".into(), json!(inner_fanout(self.page_size)));
        e.insert("leaf_capacity".into(), json!(node_capacity(self.page_size)));
        e.insert("page_size".into(), json!(self.page_size));
        e.insert("free_pages".into(), json!(meta.space.free_pages));
        e.insert(
            "routing".into(),
            json!(format!("{:?}", self.routing).to_lowercase()),
        );
        if let Some(d) = self.state.read().ldir.as_ref() {
            e.insert("directory_bytes".into(), json!(d.memory_bytes()));
            e.insert("directory_leaves".into(), json!(d.len()));
        }
        e.insert("blocks".into(), self.pager.blocks().snapshot().to_json());
        Ok(st)
    }

    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let r = BTree::verify(self)?;
        let pages = 1 + r.leaves + r.inner + r.free_pages;
        progress(pages);
        Ok(pages)
    }

    fn io(&self) -> &Arc<IoStats> {
        &self.stats
    }
}
