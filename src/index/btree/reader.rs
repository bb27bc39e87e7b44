//! Search: the descent from the root (through pinned inner nodes or pages
//! read from storage), point lookups, lower bounds, range scans along the
//! sibling links, the pinned inner nodes themselves, and a full structural
//! check ([`BTree::verify`]).
//!
//! Lookups search page bytes in place ([`LeafPage`], [`InnerPage`]) in a
//! per-thread aligned page buffer, so the lookup path allocates nothing and
//! its reads are valid `O_DIRECT` transfers.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use super::format::{InnerNode, InnerPage, LeafPage, META_PAGE, Meta, NO_PAGE};
use super::{BTree, State};
use crate::index::{Cursor, Record};
use crate::pager::Role;
use crate::storage::AlignedBuf;
use crate::{Error, Result};

/// Longest run of consecutive pages read with one call when pinning.
const PIN_READ_PAGES: usize = 256;

thread_local! {
    /// The page buffer of this thread's lookups (grown to the largest page
    /// size used).
    static PAGE_BUF: RefCell<AlignedBuf> = RefCell::new(AlignedBuf::zeroed(0));
}

/// Runs `f` on a page-sized, 4 KiB-aligned buffer: this thread's reusable
/// buffer, or a fresh one if it is busy (re-entrant use) or gone (thread
/// exit).
pub(super) fn with_page_buf<R>(page_size: usize, f: impl FnOnce(&mut [u8]) -> Result<R>) -> Result<R> {
    let mut f = Some(f);
    let done = PAGE_BUF
        .try_with(|cell| {
            let mut b = cell.try_borrow_mut().ok()?;
            if b.len() < page_size {
                *b = AlignedBuf::zeroed(page_size);
            }
            let buf = b.get_mut(..page_size)?;
            let f = f.take()?;
            Some(f(buf))
        })
        .ok()
        .flatten();
    match (done, f.take()) {
        (Some(r), _) => r,
        (None, Some(f)) => f(&mut AlignedBuf::zeroed(page_size)),
        (None, None) => Err(Error::invalid("page buffer unavailable")),
    }
}

/// One pinned (decoded, memory-resident) inner node.
#[derive(Debug, Clone, Default)]
pub(super) struct PNode {
    /// Its page number on storage.
    pub page: u64,
    /// Keys and child page numbers, as on its page.
    pub node: InnerNode,
    /// Arena slots of the children when they are inner nodes (levels >= 2);
    /// empty for nodes whose children are leaves.
    pub slots: Vec<u32>,
}

impl PNode {
    /// Releases spare capacity (pinned memory is what it holds).
    pub(super) fn shrink(&mut self) {
        self.node.keys.shrink_to_fit();
        self.node.children.shrink_to_fit();
        self.slots.shrink_to_fit();
    }
}

/// Every inner node of the tree, decoded, in an arena indexed by slot.
#[derive(Debug, Default)]
pub(super) struct Pinned {
    pub nodes: Vec<PNode>,
    /// Slots of released nodes, reused first.
    pub free_slots: Vec<u32>,
    /// Slot of the root.
    pub root: u32,
}

impl Pinned {
    /// Reads and decodes every inner node of the tree `meta` describes, level
    /// by level from the root, reading runs of consecutive pages with one
    /// call each (`read(first_page, buf)` fills `buf` with the pages from
    /// `first_page` on). Checks checksums, page types, that keys increase,
    /// that child pages are allocated and referenced once, and the node
    /// count; errors name file `name`.
    pub(super) fn load(
        name: &str,
        read: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
        meta: &Meta,
    ) -> Result<Pinned> {
        let ps = meta.page_size;
        let mut p = Pinned {
            nodes: Vec::with_capacity(usize::try_from(meta.inner).unwrap_or(0)),
            free_slots: Vec::new(),
            root: 0,
        };
        let mut level_pages: Vec<u64> = vec![meta.root];
        let mut parents: Vec<u32> = Vec::new();
        let mut buf = AlignedBuf::zeroed(0);
        for level in (1..meta.height).rev() {
            let mut sorted = level_pages.clone();
            sorted.sort_unstable();
            if let Some(w) = sorted.windows(2).find(|w| w.first() == w.get(1)) {
                let page = w.first().copied().unwrap_or(0);
                return Err(Error::corruption(
                    name,
                    page,
                    "inner page referenced by two parents",
                ));
            }
            let mut slot_of: HashMap<u64, u32> = HashMap::with_capacity(sorted.len());
            let mut i = 0;
            while let Some(&first) = sorted.get(i) {
                let mut len = 1;
                while len < PIN_READ_PAGES && sorted.get(i + len) == Some(&(first + len as u64)) {
                    len += 1;
                }
                if buf.len() < len * ps {
                    buf = AlignedBuf::zeroed(len * ps);
                }
                let run = buf
                    .get_mut(..len * ps)
                    .ok_or_else(|| Error::invalid("pin buffer"))?;
                read(first, run)?;
                for (k, page) in run.chunks_exact(ps).enumerate() {
                    let page_no = first + k as u64;
                    let view = InnerPage::open(page, page_no, name)?;
                    let node = view.decode();
                    check_inner(&node, page_no, meta, name)?;
                    slot_of.insert(page_no, p.nodes.len() as u32);
                    p.nodes.push(PNode {
                        page: page_no,
                        node,
                        slots: Vec::new(),
                    });
                }
                i += len;
            }
            for &ps_slot in &parents {
                let Some(parent) = p.nodes.get_mut(ps_slot as usize) else {
                    continue;
                };
                let mut slots = Vec::with_capacity(parent.node.children.len());
                for c in &parent.node.children {
                    let s = slot_of.get(c).copied().ok_or_else(|| {
                        Error::corruption(name, parent.page, "child missing from its level")
                    })?;
                    slots.push(s);
                }
                parent.slots = slots;
            }
            parents = level_pages
                .iter()
                .filter_map(|pg| slot_of.get(pg).copied())
                .collect();
            if level >= 2 {
                level_pages = parents
                    .iter()
                    .filter_map(|&s| p.nodes.get(s as usize))
                    .flat_map(|n| n.node.children.iter().copied())
                    .collect();
            }
        }
        if p.nodes.len() as u64 != meta.inner {
            return Err(Error::corruption(
                name,
                META_PAGE,
                format!(
                    "meta page counts {} inner nodes, the tree has {}",
                    meta.inner,
                    p.nodes.len()
                ),
            ));
        }
        Ok(p)
    }

    /// The leaf page whose key range holds `key` (`height >= 2`).
    #[inline]
    pub(super) fn leaf_for(&self, height: u32, key: u64) -> Option<u64> {
        let mut node = self.nodes.get(self.root as usize)?;
        for _ in 2..height {
            let i = node.node.route(key);
            node = self.nodes.get(*node.slots.get(i)? as usize)?;
        }
        node.node.children.get(node.node.route(key)).copied()
    }

    /// The pages of the `k` leaves after the leaf `key` routes to, in key
    /// order (fewer at the end of the tree; `height >= 2`).
    pub(super) fn leaves_after(&self, height: u32, key: u64, k: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(k);
        // The path from the root: (node slot, child index) per level.
        let mut path: Vec<(u32, usize)> = Vec::new();
        let mut slot = self.root;
        for level in (1..height).rev() {
            let Some(n) = self.nodes.get(slot as usize) else {
                return out;
            };
            let i = n.node.route(key);
            path.push((slot, i));
            if level > 1 {
                match n.slots.get(i) {
                    Some(&s) => slot = s,
                    None => return out,
                }
            }
        }
        // Step to the next leaf: the next child of the level-1 node, or up
        // to the first ancestor with a next child and down its left edge.
        while out.len() < k {
            let Some(up) = path.iter().rposition(|&(s, i)| {
                self.nodes
                    .get(s as usize)
                    .is_some_and(|n| i + 1 < n.node.children.len())
            }) else {
                break;
            };
            path.truncate(up + 1);
            if let Some(last) = path.last_mut() {
                last.1 += 1;
            }
            while path.len() < (height - 1) as usize {
                let Some(&(s, i)) = path.last() else { break };
                let Some(&child) = self.nodes.get(s as usize).and_then(|n| n.slots.get(i)) else {
                    return out;
                };
                path.push((child, 0));
            }
            let Some(&(s, i)) = path.last() else { break };
            match self.nodes.get(s as usize).and_then(|n| n.node.children.get(i)) {
                Some(&page) => out.push(page),
                None => break,
            }
        }
        out
    }

    /// Every leaf with its lower bound (the smallest key routed to it), in
    /// key order: the tree flattened (`height >= 2`).
    pub(super) fn leaves(&self, height: u32) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        // (slot, lower bound, level) of the nodes still to visit, the
        // leftmost on top.
        let mut stack = vec![(self.root, 0u64, height - 1)];
        while let Some((slot, lo, level)) = stack.pop() {
            let Some(n) = self.nodes.get(slot as usize) else {
                continue;
            };
            let bound = |i: usize| {
                if i == 0 {
                    lo
                } else {
                    n.node.keys.get(i - 1).copied().unwrap_or(lo)
                }
            };
            if level == 1 {
                out.extend(n.node.children.iter().enumerate().map(|(i, &c)| (bound(i), c)));
            } else {
                for (i, &s) in n.slots.iter().enumerate().rev() {
                    stack.push((s, bound(i), level - 1));
                }
            }
        }
        out
    }

    /// The node in `slot`.
    pub(super) fn get(&self, slot: u32) -> Option<&PNode> {
        self.nodes.get(slot as usize)
    }

    /// The node in `slot`, mutably.
    pub(super) fn get_mut(&mut self, slot: u32) -> Option<&mut PNode> {
        self.nodes.get_mut(slot as usize)
    }

    /// Stores a new node and returns its slot.
    pub(super) fn alloc(&mut self, mut n: PNode) -> u32 {
        n.shrink();
        if let Some(s) = self.free_slots.pop() {
            if let Some(dst) = self.nodes.get_mut(s as usize) {
                *dst = n;
                return s;
            }
        }
        self.nodes.push(n);
        (self.nodes.len() - 1) as u32
    }

    /// Drops the node in `slot`; the slot is reused later.
    pub(super) fn release(&mut self, slot: u32) {
        if let Some(n) = self.nodes.get_mut(slot as usize) {
            *n = PNode::default();
            self.free_slots.push(slot);
        }
    }

    /// Nodes held (released slots excluded).
    pub(super) fn live(&self) -> usize {
        self.nodes.len() - self.free_slots.len()
    }

    /// Bytes held, measured from the allocations.
    pub(super) fn memory_bytes(&self) -> u64 {
        let per_node: usize = self
            .nodes
            .iter()
            .map(|n| n.node.keys.capacity() * 8 + n.node.children.capacity() * 8 + n.slots.capacity() * 4)
            .sum();
        (std::mem::size_of::<Self>()
            + self.nodes.capacity() * std::mem::size_of::<PNode>()
            + self.free_slots.capacity() * 4
            + per_node) as u64
    }
}

/// Checks a decoded inner node: keys strictly increasing, children allocated.
fn check_inner(node: &InnerNode, page_no: u64, meta: &Meta, name: &str) -> Result<()> {
    if node.keys.windows(2).any(|w| w.first() >= w.get(1)) {
        return Err(Error::corruption(name, page_no, "separator keys not increasing"));
    }
    if let Some(c) = node
        .children
        .iter()
        .find(|&&c| c == NO_PAGE || c >= meta.space.page_count)
    {
        return Err(Error::corruption(
            name,
            page_no,
            format!(
                "child page {c} outside the {} allocated pages",
                meta.space.page_count
            ),
        ));
    }
    Ok(())
}

/// Where a page lies among the buffers of a batch: (buffer, byte offset).
type BufAt = (usize, usize);

/// Leaves a batched lookup reads in one call at most when they follow each
/// other on disk (as the layered kinds coalesce up to 16 data pages).
const MAX_LEAF_RUN: u64 = 16;

/// What [`BTree::verify`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyReport {
    /// Levels including the leaves.
    pub height: u32,
    /// Leaves reached from the root.
    pub leaves: u64,
    /// Inner nodes reached from the root.
    pub inner: u64,
    /// Records in the leaves.
    pub records: u64,
    /// Pages on the free list.
    pub free_pages: u64,
}

/// A node to visit during verification, with the key range it must cover.
#[derive(Debug, Clone, Copy)]
struct Visit {
    page: u64,
    lo: Option<u64>,
    hi: Option<u64>,
    slot: Option<u32>,
}

impl BTree {
    /// Checks a child link read from page `parent`.
    #[inline]
    pub(super) fn check_child(&self, meta: &Meta, parent: u64, child: Option<u64>) -> Result<u64> {
        match child {
            Some(c) if c != NO_PAGE && c < meta.space.page_count => Ok(c),
            _ => Err(Error::corruption(
                self.name(),
                parent,
                format!("child link {child:?} outside the {} pages", meta.space.page_count),
            )),
        }
    }

    /// The leaf page whose key range holds `key`, reading inner pages into
    /// `buf` unless they are pinned.
    #[inline]
    pub(super) fn leaf_for(&self, st: &State, key: u64, buf: &mut [u8]) -> Result<u64> {
        let meta = &st.meta;
        if let Some(d) = &st.ldir {
            return d
                .leaf_for(key)
                .ok_or_else(|| Error::corruption(self.name(), meta.root, "leaf directory is empty"));
        }
        if meta.height == 1 {
            return Ok(meta.root);
        }
        if let Some(p) = &st.pinned {
            return p.leaf_for(meta.height, key).ok_or_else(|| {
                Error::corruption(self.name(), meta.root, "pinned inner nodes are inconsistent")
            });
        }
        let mut page = meta.root;
        for _ in 1..meta.height {
            self.read_page(Role::Inner, page, buf)?;
            let inner = InnerPage::open(buf, page, self.name())?;
            page = self.check_child(meta, page, inner.child(inner.route(key)))?;
        }
        Ok(page)
    }

    /// The leaf page of each of `keys` (ascending): from memory when the
    /// inner nodes are pinned or the learned directory routes, otherwise
    /// level by level from the root, each level's distinct pages read in
    /// one batch (keys routed through one node share its read).
    fn leaves_for_many(&self, st: &State, keys: &[u64]) -> Result<Vec<u64>> {
        let meta = &st.meta;
        if st.ldir.is_some() || meta.height == 1 || st.pinned.is_some() {
            return with_page_buf(self.page_size, |buf| {
                keys.iter().map(|&k| self.leaf_for(st, k, buf)).collect()
            });
        }
        let mut at = vec![meta.root; keys.len()];
        for _ in 1..meta.height {
            let (pages, which) = crate::index::batch::runs_of(&at);
            let bufs = self.pager.read_pages_many(Role::Inner, &pages)?;
            for ((&key, page), &w) in keys.iter().zip(at.iter_mut()).zip(&which) {
                let (Some(&p), Some(buf)) = (pages.get(w), bufs.get(w)) else {
                    return Err(Error::invalid("inner page not read"));
                };
                let inner = InnerPage::open(buf, p, self.name())?;
                *page = self.check_child(meta, p, inner.child(inner.route(key)))?;
            }
        }
        Ok(at)
    }

    /// Reads the distinct leaf pages `pages` as one batch: pages that
    /// follow each other on disk (a bulk-loaded tree's leaves, probed by
    /// dense keys such as a join's) in one read call of up to
    /// [`MAX_LEAF_RUN`] pages, the rest one call each. Returns the buffers
    /// and, for each of `pages`, which buffer holds it at which offset.
    fn read_leaves_many(&self, pages: &[u64]) -> Result<(Vec<AlignedBuf>, Vec<BufAt>)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut at = Vec::with_capacity(pages.len());
        for &p in pages {
            let last = runs.len().saturating_sub(1);
            match runs.last_mut() {
                Some((first, n)) if *first + *n == p && *n < MAX_LEAF_RUN => {
                    at.push((last, *n as usize * self.page_size));
                    *n += 1;
                }
                _ => {
                    runs.push((p, 1));
                    at.push((runs.len() - 1, 0));
                }
            }
        }
        Ok((self.pager.read_runs_many(Role::Leaf, &runs)?, at))
    }

    /// [`Index::get`](crate::index::Index::get) of each of `keys`
    /// (ascending, distinct): their leaves found with
    /// [`BTree::leaves_for_many`], then every distinct leaf read in one
    /// batch ([`BTree::read_leaves_many`]).
    pub(super) fn get_many_impl(&self, keys: &[u64]) -> Result<Vec<Option<u64>>> {
        let st = self.state.read();
        let mut answers = Vec::with_capacity(keys.len());
        self.with_leaves_many(&st, keys, |_, key, leaf| {
            answers.push(
                leaf.record(leaf.lower_bound(key))
                    .filter(|r| r.0 == key)
                    .map(|r| r.1),
            );
            Ok(())
        })?;
        Ok(answers)
    }

    /// Calls `f(i, key, leaf)` for each of `keys` (ascending, distinct)
    /// with its leaf: the leaves found with [`BTree::leaves_for_many`],
    /// every distinct one read in one batch ([`BTree::read_leaves_many`])
    /// and opened (its checksum checked) once for all its keys.
    fn with_leaves_many(
        &self,
        st: &State,
        keys: &[u64],
        mut f: impl FnMut(usize, u64, &LeafPage<'_>) -> Result<()>,
    ) -> Result<()> {
        let leaves = self.leaves_for_many(st, keys)?;
        let (pages, which) = crate::index::batch::runs_of(&leaves);
        let (bufs, at) = self.read_leaves_many(&pages)?;
        let ps = self.page_size;
        let mut open: Option<(usize, LeafPage<'_>)> = None;
        for (i, (&key, &w)) in keys.iter().zip(&which).enumerate() {
            if open.as_ref().map(|o| o.0) != Some(w) {
                let (Some(&p), Some(buf)) = (
                    pages.get(w),
                    at.get(w).and_then(|&(b, off)| bufs.get(b)?.get(off..off + ps)),
                ) else {
                    return Err(Error::invalid("leaf page not read"));
                };
                open = Some((w, LeafPage::open(buf, p, self.name())?));
            }
            if let Some((_, leaf)) = &open {
                f(i, key, leaf)?;
            }
        }
        Ok(())
    }

    /// [`Index::lower_bound`](crate::index::Index::lower_bound) of each of
    /// `keys` (ascending, distinct), batched like
    /// [`BTree::get_many_impl`]; a key whose leaf holds nothing `>=` it
    /// (only after deletes) follows the sibling links one by one.
    pub(super) fn lower_bound_many_impl(&self, keys: &[u64]) -> Result<Vec<Option<Record>>> {
        let mut answers = Vec::with_capacity(keys.len());
        let mut later = Vec::new();
        {
            let st = self.state.read();
            self.with_leaves_many(&st, keys, |i, key, leaf| {
                match leaf.record(leaf.lower_bound(key)) {
                    Some(r) => answers.push(Some(r)),
                    None => {
                        if leaf.next() != NO_PAGE {
                            later.push(i);
                        }
                        answers.push(None);
                    }
                }
                Ok(())
            })?;
        }
        for i in later {
            if let (Some(&key), Some(a)) = (keys.get(i), answers.get_mut(i)) {
                *a = self.lower_bound_impl(key)?;
            }
        }
        Ok(answers)
    }

    /// Follows the sibling link of leaf `page`, guarding against cycles.
    fn next_leaf(&self, meta: &Meta, page: u64, next: u64, hops: &mut u64) -> Result<u64> {
        *hops += 1;
        if *hops > meta.leaves {
            return Err(Error::corruption(self.name(), page, "sibling links form a cycle"));
        }
        self.check_child(meta, page, Some(next))
    }

    pub(super) fn get_impl(&self, key: u64) -> Result<Option<u64>> {
        let st = self.state.read();
        with_page_buf(self.page_size, |buf| {
            let leaf_no = self.leaf_for(&st, key, buf)?;
            self.read_page(Role::Leaf, leaf_no, buf)?;
            let leaf = LeafPage::open(buf, leaf_no, self.name())?;
            let i = leaf.lower_bound(key);
            Ok(leaf.record(i).filter(|r| r.0 == key).map(|r| r.1))
        })
    }

    pub(super) fn lower_bound_impl(&self, key: u64) -> Result<Option<Record>> {
        let st = self.state.read();
        with_page_buf(self.page_size, |buf| {
            let mut page = self.leaf_for(&st, key, buf)?;
            let mut first = true;
            let mut hops = 0;
            loop {
                self.read_page(Role::Leaf, page, buf)?;
                let leaf = LeafPage::open(buf, page, self.name())?;
                let i = if first { leaf.lower_bound(key) } else { 0 };
                if let Some(r) = leaf.record(i) {
                    return Ok(Some(r));
                }
                if leaf.next() == NO_PAGE {
                    return Ok(None);
                }
                page = self.next_leaf(&st.meta, page, leaf.next(), &mut hops)?;
                first = false;
            }
        })
    }

    /// Reads every page of the tree from storage and checks the whole
    /// structure: checksums and page types per level, counts, keys strictly
    /// increasing and inside the range their parent routes to them, every
    /// sibling link pointing at the next leaf in key order, the pinned inner
    /// nodes equal to their pages, the learned leaf directory equal to the
    /// leaves and their lower bounds, the free list, and that the meta page's
    /// counts match and every allocated page is used exactly once.
    ///
    /// Takes the shared lock (writers wait); reads every page once. With
    /// the learned directory, first writes the splits only the directory
    /// knows into the inner nodes (as a checkpoint would; refused on a
    /// poisoned tree).
    pub fn verify(&self) -> Result<VerifyReport> {
        {
            let mut st = self.state.write();
            if !st.pending.is_empty() {
                st.w.check_writable()?;
                let r = self.apply_pending(&mut st);
                st.w.poison(r)?;
            }
        }
        let st = self.state.read();
        let meta = st.meta;
        let name = self.name();
        let bad = |page: u64, what: String| Error::corruption(name, page, what);
        let mut buf = AlignedBuf::zeroed(self.page_size);
        let mut seen: HashSet<u64> = HashSet::new();
        seen.insert(META_PAGE);
        let pinned = st.pinned.as_ref();
        let mut level = vec![Visit {
            page: meta.root,
            lo: None,
            hi: None,
            slot: pinned.map(|p| p.root),
        }];
        let mut inner = 0u64;
        let in_range = |k: u64, v: &Visit| v.lo.is_none_or(|lo| k >= lo) && v.hi.is_none_or(|hi| k < hi);
        for lvl in (1..meta.height).rev() {
            let mut next = Vec::new();
            for v in &level {
                if !seen.insert(v.page) {
                    return Err(bad(v.page, "page reachable twice".into()));
                }
                self.check_child(&meta, META_PAGE, Some(v.page))?;
                self.read_page(Role::Inner, v.page, &mut buf)?;
                let node = InnerPage::open(&buf, v.page, name)?.decode();
                check_inner(&node, v.page, &meta, name)?;
                if let Some(k) = node.keys.iter().find(|&&k| !in_range(k, v)) {
                    return Err(bad(v.page, format!("separator {k} outside its node's range")));
                }
                let pnode = match (pinned, v.slot) {
                    (Some(p), Some(s)) => {
                        let pn = p
                            .get(s)
                            .ok_or_else(|| bad(v.page, "pinned slot missing".into()))?;
                        if pn.page != v.page || pn.node != node {
                            return Err(bad(v.page, "pinned copy differs from the page".into()));
                        }
                        let want_slots = if lvl >= 2 { node.children.len() } else { 0 };
                        if pn.slots.len() != want_slots {
                            return Err(bad(v.page, "pinned child slots miscounted".into()));
                        }
                        Some(pn)
                    }
                    (Some(_), None) => return Err(bad(v.page, "node not pinned".into())),
                    _ => None,
                };
                for (i, &c) in node.children.iter().enumerate() {
                    let lo = if i == 0 {
                        v.lo
                    } else {
                        node.keys.get(i - 1).copied()
                    };
                    let hi = if i == node.keys.len() {
                        v.hi
                    } else {
                        node.keys.get(i).copied()
                    };
                    let slot = pnode.and_then(|pn| pn.slots.get(i).copied());
                    if let (Some(p), Some(s)) = (pinned, slot) {
                        if p.get(s).map(|n| n.page) != Some(c) {
                            return Err(bad(v.page, format!("pinned slot of child {i} is stale")));
                        }
                    }
                    next.push(Visit {
                        page: c,
                        lo,
                        hi,
                        slot,
                    });
                }
            }
            inner += level.len() as u64;
            level = next;
        }
        let mut records = 0u64;
        let mut prev: Option<u64> = None;
        for (j, v) in level.iter().enumerate() {
            if !seen.insert(v.page) {
                return Err(bad(v.page, "page reachable twice".into()));
            }
            self.check_child(&meta, META_PAGE, Some(v.page))?;
            self.read_page(Role::Leaf, v.page, &mut buf)?;
            let leaf = LeafPage::open(&buf, v.page, name)?;
            if leaf.count() == 0 && level.len() > 1 {
                return Err(bad(v.page, "empty leaf in a tree of several leaves".into()));
            }
            for i in 0..leaf.count() {
                let k = leaf.key(i).ok_or_else(|| bad(v.page, "short leaf".into()))?;
                if prev.is_some_and(|p| k <= p) {
                    return Err(bad(v.page, format!("key {k} out of order")));
                }
                if !in_range(k, v) {
                    return Err(bad(v.page, format!("key {k} outside its leaf's range")));
                }
                prev = Some(k);
            }
            records += leaf.count() as u64;
            let want = level.get(j + 1).map_or(NO_PAGE, |n| n.page);
            if leaf.next() != want {
                return Err(bad(
                    v.page,
                    format!("sibling link {} should be {want}", leaf.next()),
                ));
            }
        }
        let leaves = level.len() as u64;
        if (records, leaves, inner) != (meta.n, meta.leaves, meta.inner) {
            return Err(bad(
                META_PAGE,
                format!(
                    "meta counts (n {}, leaves {}, inner {}) differ from the tree ({records}, {leaves}, {inner})",
                    meta.n, meta.leaves, meta.inner
                ),
            ));
        }
        if let Some(p) = pinned {
            if p.live() as u64 != inner {
                return Err(bad(META_PAGE, "pinned node count differs".into()));
            }
        }
        if let Some(d) = &st.ldir {
            let tree = level.iter().map(|v| (v.lo.unwrap_or(0), v.page));
            if let Some((j, (want, got))) = tree.zip(d.leaves()).enumerate().find(|(_, (a, b))| a != b) {
                return Err(bad(
                    got.1,
                    format!("leaf directory entry {j} is {got:?}, the tree's leaf {want:?}"),
                ));
            }
            if d.len() as u64 != leaves {
                return Err(bad(META_PAGE, "leaf directory count differs".into()));
            }
        }
        let free = self.pager.walk_free_list(&meta.space, &mut buf, |f| {
            if seen.insert(f) {
                Ok(())
            } else {
                Err(bad(f, "free page is also in use".into()))
            }
        })?;
        if free != meta.space.free_pages || seen.len() as u64 != meta.space.page_count {
            return Err(bad(
                META_PAGE,
                format!(
                    "{} pages allocated, {} accounted for ({free} free)",
                    meta.space.page_count,
                    seen.len()
                ),
            ));
        }
        Ok(VerifyReport {
            height: meta.height,
            leaves,
            inner,
            records,
            free_pages: free,
        })
    }
}

/// Where a [`BTreeCursor`] goes once the records it holds are used up.
#[derive(Debug, Clone, Copy)]
enum Then {
    /// Descend from the root to the leaf of this key and start at its lower
    /// bound.
    Descend(u64),
    /// Read leaf `page`, the right sibling of leaf `from`. If the tree
    /// changed since `from` was read, descend from `resume` instead (the
    /// key after the last one `from` held; `None` if that was `u64::MAX`).
    Sibling {
        from: u64,
        page: u64,
        resume: Option<u64>,
    },
    /// No record is left.
    End,
}

/// Leaves a scan reads ahead in one batch at most (256 KiB of 4 KiB pages).
const READ_AHEAD_MAX: usize = 64;

/// A [`Cursor`] over a [`BTree`]: a seek descends like a lookup and reads
/// the key's leaf, [`Cursor::next`] follows the sibling link and reads one
/// leaf when the records of the last one are used up.
///
/// It holds the last leaf it read (its verified page, decoded record by
/// record as they are taken) and the tree's shared lock only during a call.
/// When the tree changed between two calls (its meta page differs), it
/// descends again from the key after the last leaf it read instead of
/// following a sibling link that may be stale.
#[derive(Debug)]
pub(super) struct BTreeCursor<'a> {
    tree: &'a BTree,
    /// The last leaf read (verified by [`LeafPage::open`]).
    leaf: AlignedBuf,
    /// Records on `leaf`.
    count: usize,
    /// Its sibling link.
    next: u64,
    /// Slot in `leaf` of the next record.
    at: usize,
    then: Then,
    /// The meta page when the last leaf was read.
    meta: Meta,
    /// Sibling links followed since the last descent (cycle guard).
    hops: u64,
    /// Leaves read ahead (page, verified later by [`LeafPage::open`]), the
    /// next to follow first: used when the sibling link leads to them.
    ahead: std::collections::VecDeque<(u64, AlignedBuf)>,
}

impl<'a> BTreeCursor<'a> {
    /// A cursor before the first record of `tree`.
    pub(super) fn new(tree: &'a BTree) -> Self {
        Self::with_meta(tree, tree.state.read().meta)
    }

    /// A cursor before the first record of `tree`, whose meta page is
    /// `meta` (the caller holds the lock).
    fn with_meta(tree: &'a BTree, meta: Meta) -> Self {
        BTreeCursor {
            tree,
            // Pooled: a scan (one cursor) reuses the last one's page.
            leaf: AlignedBuf::for_overwrite(tree.page_size),
            count: 0,
            next: NO_PAGE,
            at: 0,
            then: Then::Descend(0),
            meta,
            hops: 0,
            ahead: std::collections::VecDeque::new(),
        }
    }

    /// Appends up to `count` records with keys `>= from` to `out`: a seek
    /// and a batch under one shared lock (what [`Index::scan`] does).
    ///
    /// [`Index::scan`]: crate::index::Index::scan
    pub(super) fn scan(tree: &'a BTree, from: u64, count: usize, out: &mut Vec<Record>) -> Result<usize> {
        let st = tree.state.read();
        let mut c = Self::with_meta(tree, st.meta);
        with_page_buf(tree.page_size, |buf| {
            c.descend(&st, from, buf)?;
            let mut n = 0;
            while n < count && c.refill(&st, buf)? {
                n += c.drain(count - n, out);
                if n < count {
                    c.read_ahead(&st, count - n)?;
                }
            }
            Ok(n)
        })
    }

    /// With the leaves routed from memory (pinned inner nodes or the
    /// learned directory), reads the leaves that `need` more records take
    /// at least, after the one held, in one batch (`queue_depth` reads in
    /// flight): `ceil(need / capacity)` leaves (at most
    /// [`READ_AHEAD_MAX`], then again when they are used), never one that a scan
    /// following the sibling links would not read. Without them the next
    /// leaf is known only from the held one's link: nothing is read ahead.
    fn read_ahead(&mut self, st: &State, need: usize) -> Result<()> {
        if !self.ahead.is_empty() || self.count == 0 || st.meta.height < 2 {
            return Ok(());
        }
        let Then::Sibling { .. } = self.then else {
            return Ok(());
        };
        let k = need
            .div_ceil(super::format::node_capacity(self.tree.page_size).max(1))
            .min(READ_AHEAD_MAX);
        if k < 2 {
            // The next leaf alone: one read either way.
            return Ok(());
        }
        let Some(last) = self.held().key(self.count - 1) else {
            return Ok(());
        };
        let pages = match (&st.ldir, &st.pinned) {
            (Some(d), _) => d.leaves_after(last, k),
            (None, Some(p)) => p.leaves_after(st.meta.height, last, k),
            (None, None) => return Ok(()),
        };
        if pages.first() != Some(&self.next) {
            return Ok(());
        }
        let bufs = self.tree.pager.read_pages_many(Role::Leaf, &pages)?;
        self.ahead = pages.into_iter().zip(bufs).collect();
        Ok(())
    }

    /// The leaf held.
    fn held(&self) -> LeafPage<'_> {
        LeafPage::verified(&self.leaf, self.count, self.next)
    }

    /// Reads leaf `page` and holds it from the lower bound of `from` (from
    /// its first record when `None`). `resume` is where to descend from if
    /// the leaf holds no record and the tree changes.
    fn load(&mut self, st: &State, page: u64, from: Option<u64>, resume: Option<u64>) -> Result<()> {
        let tree = self.tree;
        self.count = 0;
        match self.ahead.pop_front() {
            Some((p, buf)) if p == page && from.is_none() => self.leaf = buf,
            _ => {
                self.ahead.clear();
                tree.read_page(Role::Leaf, page, &mut self.leaf)?;
            }
        }
        let leaf = LeafPage::open(&self.leaf, page, tree.name())?;
        let (count, next) = (leaf.count(), leaf.next());
        let start = from.map_or(0, |k| leaf.lower_bound(k));
        let resume = match count.checked_sub(1).and_then(|i| leaf.key(i)) {
            Some(last) if start < count => last.checked_add(1),
            _ => resume,
        };
        self.count = count;
        self.next = next;
        self.at = start;
        self.then = match next {
            NO_PAGE => Then::End,
            next => Then::Sibling {
                from: page,
                page: next,
                resume,
            },
        };
        self.meta = st.meta;
        Ok(())
    }

    /// Descends to the leaf of `key` and holds it from `key` on.
    fn descend(&mut self, st: &State, key: u64, buf: &mut [u8]) -> Result<()> {
        self.hops = 0;
        let page = self.tree.leaf_for(st, key, buf)?;
        self.load(st, page, Some(key), Some(key))
    }

    /// Reads leaves until a record is held; false at the end.
    fn refill(&mut self, st: &State, buf: &mut [u8]) -> Result<bool> {
        while self.at >= self.count {
            match self.then {
                Then::End => return Ok(false),
                Then::Descend(key) => self.descend(st, key, buf)?,
                Then::Sibling { resume, .. } if st.meta != self.meta => {
                    self.then = resume.map_or(Then::End, Then::Descend);
                }
                Then::Sibling { from, page, resume } => {
                    let page = self.tree.next_leaf(&st.meta, from, page, &mut self.hops)?;
                    self.load(st, page, None, resume)?;
                }
            }
        }
        Ok(true)
    }

    /// Appends up to `count` held records; returns how many.
    fn drain(&mut self, count: usize, out: &mut Vec<Record>) -> usize {
        let end = self.count.min(self.at.saturating_add(count));
        let leaf = self.held();
        for i in self.at..end {
            if let Some(r) = leaf.record(i) {
                out.push(r);
            }
        }
        let take = end.saturating_sub(self.at);
        self.at = end.max(self.at);
        take
    }
}

impl Cursor for BTreeCursor<'_> {
    fn seek(&mut self, key: u64) -> Result<()> {
        let tree = self.tree;
        let st = tree.state.read();
        with_page_buf(tree.page_size, |buf| self.descend(&st, key, buf))
    }

    fn next(&mut self) -> Result<Option<Record>> {
        if self.at < self.count {
            let r = self.held().record(self.at);
            self.at += 1;
            return Ok(r);
        }
        let tree = self.tree;
        let st = tree.state.read();
        if !with_page_buf(tree.page_size, |buf| self.refill(&st, buf))? {
            return Ok(None);
        }
        let r = self.held().record(self.at);
        self.at += 1;
        Ok(r)
    }

    /// Takes the shared lock once for the whole batch.
    fn next_batch(&mut self, count: usize, out: &mut Vec<Record>) -> Result<usize> {
        let mut n = self.drain(count, out);
        if n == count {
            return Ok(n);
        }
        let tree = self.tree;
        let st = tree.state.read();
        if st.meta != self.meta {
            // Leaves read ahead under another version of the tree.
            self.ahead.clear();
        }
        with_page_buf(tree.page_size, |buf| {
            while n < count && self.refill(&st, buf)? {
                n += self.drain(count - n, out);
                if n < count {
                    self.read_ahead(&st, count - n)?;
                }
            }
            Ok(n)
        })
    }
}
