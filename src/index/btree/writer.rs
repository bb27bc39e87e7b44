//! Inserts, updates and deletes.
//!
//! Every write operation runs under the exclusive lock in two phases:
//! a *prepare* phase that only reads (descent, the leaf, pages taken from the
//! free list) and can fail without any effect, and an *apply* phase of page
//! writes ordered so that the tree on storage is valid after each single
//! write: new pages are written before the pages that point to them, and
//! pages that shrink are rewritten last. The pinned inner nodes are updated
//! right after their page is written. If a write of the apply phase fails,
//! the tree is left readable and consistent and is *poisoned*: it refuses
//! further writes and syncs until reopened.
//!
//! Split policy: a full leaf (255 records on 4 KiB) receiving a new record
//! splits evenly (128 + 128); its separator is the last key of the left half
//! plus one. A full inner node splits around its middle key, which moves up;
//! a root split adds a level. One exception keeps sequential loads dense: a
//! record appended past the last key of the rightmost leaf goes alone into
//! the new right leaf (the left leaf stays full), and the inner nodes on the
//! rightmost path split the same way.
//!
//! Delete policy: no rebalancing or merging. A leaf that keeps at least one
//! record is rewritten in place. A leaf that becomes empty (when the tree
//! has other leaves) is unlinked from its left sibling, removed from its
//! parent and put on the free list; parents left without children are freed
//! the same way, and a root left with a single child is replaced by it.

use super::format::{
    InnerNode, InnerPage, LeafPage, NO_PAGE, encode_leaf, leaf_insert, leaf_remove, leaf_set_value,
    node_capacity, seal_leaf, separator,
};
use super::reader::{PNode, Pinned};
use super::{BTree, Routing, State};
use crate::pager::Role;
use crate::storage::AlignedBuf;
use crate::{Error, Result};

/// Page buffers the writer reuses across operations.
#[derive(Debug)]
pub(super) struct Scratch {
    /// The leaf being changed.
    leaf: AlignedBuf,
    /// A second page: a new or shrunk node, a sibling, a free page.
    other: AlignedBuf,
    /// Inner pages of the current path, root first (without pinning).
    path: Vec<AlignedBuf>,
    /// Records of a leaf being split.
    records: Vec<(u64, u64)>,
}

impl Scratch {
    pub(super) fn new(page_size: usize) -> Self {
        Scratch {
            leaf: AlignedBuf::zeroed(page_size),
            other: AlignedBuf::zeroed(page_size),
            path: Vec::new(),
            records: Vec::new(),
        }
    }

    /// Bytes held by the buffers.
    pub(super) fn memory_bytes(&self) -> u64 {
        let pages: usize = [&self.leaf, &self.other]
            .into_iter()
            .chain(self.path.iter())
            .map(|b| b.capacity())
            .sum();
        (pages + self.path.capacity() * std::mem::size_of::<AlignedBuf>() + self.records.capacity() * 16)
            as u64
    }
}

/// No pinned slot.
const NO_SLOT: u32 = u32::MAX;

/// Most splits the learned directory holds before the inner nodes learn
/// them ([`BTree::apply_pending`]); 16 KiB.
pub(super) const PENDING_MAX: usize = 512;

/// A leaf split the learned directory routes but the inner nodes do not
/// know yet: the new leaf `right`, the keys from `sep` on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    sep: u64,
    right: u64,
    append: bool,
}

/// One inner node on the path from the root to a leaf.
#[derive(Debug, Clone, Copy)]
struct Step {
    /// Its page.
    page: u64,
    /// Its pinned slot ([`NO_SLOT`] without pinning).
    slot: u32,
    /// The child taken.
    idx: usize,
    /// Its number of keys.
    keys: usize,
}

fn path_buf(path: &mut Vec<AlignedBuf>, depth: usize, page_size: usize) -> Result<&mut [u8]> {
    while path.len() <= depth {
        path.push(AlignedBuf::zeroed(page_size));
    }
    path.get_mut(depth)
        .map(|b| &mut b[..])
        .ok_or_else(|| Error::invalid("writer path buffer"))
}

impl BTree {
    fn corrupt(&self, page: u64, what: impl Into<String>) -> Error {
        Error::corruption(self.name(), page, what)
    }

    /// Descends to the leaf for `key`, recording the inner nodes passed.
    fn descend_for_write(&self, st: &mut State, key: u64) -> Result<(Vec<Step>, u64)> {
        let State {
            meta,
            pinned,
            scratch,
            ..
        } = st;
        let height = meta.height;
        let mut path = Vec::with_capacity(height as usize);
        if height == 1 {
            return Ok((path, meta.root));
        }
        if let Some(p) = pinned {
            let mut slot = p.root;
            for level in (1..height).rev() {
                let pn = p
                    .get(slot)
                    .ok_or_else(|| self.corrupt(meta.root, "pinned slot missing"))?;
                let i = pn.node.route(key);
                path.push(Step {
                    page: pn.page,
                    slot,
                    idx: i,
                    keys: pn.node.keys.len(),
                });
                if level == 1 {
                    let leaf = pn.node.children.get(i).copied();
                    return Ok((path, self.check_child(meta, pn.page, leaf)?));
                }
                slot = pn
                    .slots
                    .get(i)
                    .copied()
                    .ok_or_else(|| self.corrupt(pn.page, "pinned child slot missing"))?;
            }
            return Err(self.corrupt(meta.root, "pinned descent did not reach a leaf"));
        }
        let mut page = meta.root;
        for depth in 0..(height - 1) as usize {
            let buf = path_buf(&mut scratch.path, depth, self.page_size)?;
            self.read_page(Role::Inner, page, buf)?;
            let inner = InnerPage::open(buf, page, self.name())?;
            let i = inner.route(key);
            path.push(Step {
                page,
                slot: NO_SLOT,
                idx: i,
                keys: inner.count(),
            });
            page = self.check_child(meta, page, inner.child(i))?;
        }
        Ok((path, page))
    }

    /// The node of `step` (at `depth` on the path) as it is now, with its
    /// pinned child slots (empty without pinning or at level 1).
    fn load_node(&self, st: &State, depth: usize, step: &Step) -> Result<(InnerNode, Vec<u32>)> {
        if let Some(p) = &st.pinned {
            let pn = p
                .get(step.slot)
                .ok_or_else(|| self.corrupt(step.page, "pinned slot missing"))?;
            return Ok((pn.node.clone(), pn.slots.clone()));
        }
        let buf = st
            .scratch
            .path
            .get(depth)
            .ok_or_else(|| self.corrupt(step.page, "path page missing"))?;
        Ok((InnerPage::open(buf, step.page, self.name())?.decode(), Vec::new()))
    }

    /// Takes `k` pages from the pager (free list first, then the end of
    /// the file). Reads only; the meta counters change only if all `k`
    /// succeed.
    fn allocate(&self, st: &mut State, k: usize) -> Result<Vec<u64>> {
        self.pager.allocate(&mut st.meta.space, k, &mut st.scratch.other)
    }

    /// Encodes `node` as page `page` and writes it.
    fn write_inner(&self, st: &mut State, page: u64, node: &InnerNode) -> Result<()> {
        node.encode(&mut st.scratch.other, page)?;
        self.pager.write_page(Role::Inner, page, &st.scratch.other)
    }

    /// Writes the leaf buffer as page `page`.
    fn write_leaf_buf(&self, st: &State, page: u64) -> Result<()> {
        self.pager.write_page(Role::Leaf, page, &st.scratch.leaf)
    }

    /// Replaces the pinned copy of the node in `slot`.
    fn pin_replace(st: &mut State, slot: u32, node: InnerNode, slots: Vec<u32>) {
        if let Some(pn) = st.pinned.as_mut().and_then(|p| p.get_mut(slot)) {
            pn.node = node;
            pn.slots = slots;
            pn.shrink();
        }
    }

    /// Puts `page` on the free list.
    fn free_page(&self, st: &mut State, page: u64) -> Result<()> {
        self.pager.free(&mut st.meta.space, page, &mut st.scratch.other)
    }

    pub(super) fn insert_impl(&self, key: u64, value: u64) -> Result<Option<u64>> {
        let mut guard = self.state.write();
        let st = &mut *guard;
        st.w.check_writable()?;
        let (path, leaf_no) = self.route_for_write(st, key)?;
        self.read_page(Role::Leaf, leaf_no, &mut st.scratch.leaf)?;
        let (count, next, i, existing) = {
            let leaf = LeafPage::open(&st.scratch.leaf, leaf_no, self.name())?;
            let i = leaf.lower_bound(key);
            let existing = leaf.record(i).filter(|r| r.0 == key).map(|r| r.1);
            (leaf.count(), leaf.next(), i, existing)
        };
        if let Some(old) = existing {
            if old != value {
                leaf_set_value(&mut st.scratch.leaf, i, value);
                seal_leaf(&mut st.scratch.leaf, leaf_no, count, next);
                let r = self.write_leaf_buf(st, leaf_no);
                st.w.poison(r)?;
                st.w.mark_dirty();
            }
            return Ok(Some(old));
        }
        if count < node_capacity(self.page_size) {
            leaf_insert(&mut st.scratch.leaf, count, i, key, value)?;
            seal_leaf(&mut st.scratch.leaf, leaf_no, count + 1, next);
            let r = self.write_leaf_buf(st, leaf_no);
            st.w.poison(r)?;
            st.meta.n += 1;
            st.w.mark_dirty();
            return Ok(None);
        }
        self.pager.blocks().smo();
        let (sep, right) = self.split_insert(st, path.as_deref(), leaf_no, next, i, key, value)?;
        if let Some(d) = st.ldir.as_mut() {
            let r = d.split(key, leaf_no, sep, right);
            st.w.poison(r)?;
            if st.pending.len() >= PENDING_MAX {
                let r = self.apply_pending(st);
                st.w.poison(r)?;
            }
        }
        Ok(None)
    }

    /// The leaf for `key`, and the path to it when the tree is descended
    /// (`None` with the learned directory, which finds the leaf without
    /// reading inner nodes).
    fn route_for_write(&self, st: &mut State, key: u64) -> Result<(Option<Vec<Step>>, u64)> {
        match &st.ldir {
            Some(d) => {
                let leaf = d
                    .leaf_for(key)
                    .ok_or_else(|| self.corrupt(st.meta.root, "leaf directory is empty"))?;
                Ok((None, leaf))
            }
            None => {
                let (path, leaf) = self.descend_for_write(st, key)?;
                Ok((Some(path), leaf))
            }
        }
    }

    /// Fills in the path to `leaf_no` (the leaf of `key`) if
    /// [`Self::route_for_write`] left it out: a descent through the inner
    /// pages on storage, which must reach the same leaf (a directory that
    /// disagrees with the tree poisons it: the caller passes the error to
    /// [`WriteState::poison`](crate::pager::WriteState::poison)).
    fn path_for_write(
        &self,
        st: &mut State,
        key: u64,
        leaf_no: u64,
        path: &mut Option<Vec<Step>>,
    ) -> Result<()> {
        if path.is_none() {
            let (p, leaf) = self.descend_for_write(st, key)?;
            if leaf != leaf_no {
                return Err(self.corrupt(
                    leaf,
                    format!("the inner nodes route key {key} here, the leaf directory to page {leaf_no}"),
                ));
            }
            *path = Some(p);
        }
        Ok(())
    }

    /// Inserts into the full leaf `leaf_no` (in the leaf buffer) by splitting
    /// it, and the splits it causes up the path.
    #[expect(
        clippy::too_many_arguments,
        reason = "the split carries the path and both halves; a struct would only rename them"
    )]
    fn split_insert(
        &self,
        st: &mut State,
        path: Option<&[Step]>,
        leaf_no: u64,
        next: u64,
        i: usize,
        key: u64,
        value: u64,
    ) -> Result<(u64, u64)> {
        let cap = node_capacity(self.page_size);
        // Prepare: the records of both halves, and the pages the split needs.
        {
            let leaf = LeafPage::open(&st.scratch.leaf, leaf_no, self.name())?;
            let recs = &mut st.scratch.records;
            recs.clear();
            recs.extend((0..leaf.count()).filter_map(|j| leaf.record(j)));
            if recs.len() != leaf.count() || i > recs.len() {
                return Err(self.corrupt(leaf_no, "leaf records unreadable"));
            }
            recs.insert(i, (key, value));
        }
        // Appending past the last key of the rightmost leaf (sequential
        // inserts) keeps the left leaf full; any other split is even.
        let append = i + 1 == st.scratch.records.len() && next == NO_PAGE;
        let mid = if append { i } else { st.scratch.records.len() / 2 };
        let sep = match (
            st.scratch.records.get(mid.wrapping_sub(1)),
            st.scratch.records.get(mid),
        ) {
            // Left keys < sep <= right keys.
            (Some(l), Some(r)) => separator(l.0, r.0, self.routing == Routing::Learned),
            _ => return Err(self.corrupt(leaf_no, "split of a short leaf")),
        };
        let Some(path) = path else {
            // The learned directory routes the new leaf at once; the inner
            // nodes learn it before the next checkpoint (`apply_pending`).
            let right = self
                .allocate(st, 1)?
                .first()
                .copied()
                .ok_or_else(|| Error::invalid("split page count"))?;
            let r = self
                .write_right_half(st, next, mid, right)
                .and_then(|()| self.write_left_half(st, leaf_no, mid, right));
            st.w.poison(r)?;
            st.meta.n += 1;
            st.meta.leaves += 1;
            st.w.mark_dirty();
            st.pending.push(Pending { sep, right, append });
            return Ok((sep, right));
        };
        let splits = path.iter().rev().take_while(|s| s.keys >= cap).count();
        let root_split = splits == path.len();
        let pages = self.allocate(st, 1 + splits + usize::from(root_split))?;
        let right = pages
            .first()
            .copied()
            .ok_or_else(|| Error::invalid("split page count"))?;
        // The old leaf is rewritten last: until then every read still finds
        // all its records there (a failed write leaves the tree readable).
        let r = self
            .write_right_half(st, next, mid, right)
            .and_then(|()| self.insert_separator(st, path, sep, right, append, pages.get(1..).unwrap_or(&[])))
            .and_then(|()| self.write_left_half(st, leaf_no, mid, right));
        st.w.poison(r)?;
        st.meta.n += 1;
        st.meta.leaves += 1;
        st.meta.inner += (splits + usize::from(root_split)) as u64;
        st.w.mark_dirty();
        Ok((sep, right))
    }

    /// Writes records `mid..` of the split buffer to the new leaf `right`
    /// (linked to `next`).
    fn write_right_half(&self, st: &mut State, next: u64, mid: usize, right: u64) -> Result<()> {
        let Scratch { other, records, .. } = &mut st.scratch;
        encode_leaf(other, right, records.get(mid..).unwrap_or(&[]), next)?;
        self.pager.write_page(Role::Leaf, right, &st.scratch.other)
    }

    /// Writes records `..mid` of the split buffer to the split leaf
    /// `leaf_no` (linked to `right`).
    fn write_left_half(&self, st: &mut State, leaf_no: u64, mid: usize, right: u64) -> Result<()> {
        let Scratch { leaf, records, .. } = &mut st.scratch;
        encode_leaf(leaf, leaf_no, records.get(..mid).unwrap_or(&[]), right)?;
        self.write_leaf_buf(st, leaf_no)
    }

    /// Writes the splits the learned directory holds but the inner nodes do
    /// not yet ([`State::pending`]) into the inner nodes, in separator order
    /// (each new leaf goes right after the leaf its separator routes to,
    /// which is its left neighbour once every smaller separator is in).
    /// With more pending splits than inner pages per descent, the inner
    /// nodes are read once (runs of consecutive pages) and pinned for the
    /// batch; otherwise each split descends from the root.
    pub(super) fn apply_pending(&self, st: &mut State) -> Result<()> {
        if st.pending.is_empty() {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut st.pending);
        pending.sort_unstable_by_key(|p| p.sep);
        let cap = node_capacity(self.page_size);
        let height = u64::from(st.meta.height);
        let pin = height >= 2 && pending.len() as u64 * (height - 1) > st.meta.inner;
        if pin {
            let meta = st.meta;
            let mut read = |first: u64, buf: &mut [u8]| self.pager.read_page(Role::Inner, first, buf);
            st.pinned = Some(Pinned::load(self.name(), &mut read, &meta)?);
        }
        let r = (|| {
            for p in &pending {
                let (path, leaf) = self.descend_for_write(st, p.sep)?;
                let want = st.ldir.as_ref().and_then(|d| d.leaf_for(p.sep.saturating_sub(1)));
                if want != Some(leaf) {
                    return Err(self.corrupt(
                        leaf,
                        format!(
                            "the inner nodes route separator {} here, the leaf directory to {want:?}",
                            p.sep
                        ),
                    ));
                }
                let splits = path.iter().rev().take_while(|s| s.keys >= cap).count();
                let root_split = splits == path.len();
                let pages = self.allocate(st, splits + usize::from(root_split))?;
                self.insert_separator(st, &path, p.sep, p.right, p.append, &pages)?;
                st.meta.inner += (splits + usize::from(root_split)) as u64;
            }
            Ok(())
        })();
        if pin {
            st.pinned = None;
        }
        r
    }

    /// Inserts separator `sep` with the new child `right` into the last node
    /// of `path` (right after the child the path took), splitting full nodes
    /// up the path and the root if it is full, with the `pages` those splits
    /// take (one per split node, one more for a new root).
    fn insert_separator(
        &self,
        st: &mut State,
        path: &[Step],
        sep: u64,
        right_leaf: u64,
        append: bool,
        pages: &[u64],
    ) -> Result<()> {
        let cap = node_capacity(self.page_size);
        let mut pages = pages.iter().copied();
        let mut take = || pages.next().ok_or_else(|| Error::invalid("split page count"));
        // Separators up the path; new right halves are written at once,
        // shrunk left halves after their parent knows the right half.
        let mut up_key = sep;
        let mut up_page = right_leaf;
        let mut up_slot: Option<u32> = None;
        let mut shrunk: Vec<(u64, u32, InnerNode, Vec<u32>)> = Vec::new();
        let mut absorbed = false;
        for depth in (0..path.len()).rev() {
            let step = *path
                .get(depth)
                .ok_or_else(|| Error::invalid("split path depth"))?;
            let (mut node, mut slots) = self.load_node(st, depth, &step)?;
            if step.idx > node.keys.len() {
                return Err(self.corrupt(step.page, "child index out of range"));
            }
            node.keys.insert(step.idx, up_key);
            node.children.insert(step.idx + 1, up_page);
            if let Some(s) = up_slot {
                if step.idx < slots.len() {
                    slots.insert(step.idx + 1, s);
                }
            }
            if node.keys.len() <= cap {
                self.write_inner(st, step.page, &node)?;
                Self::pin_replace(st, step.slot, node, slots);
                absorbed = true;
                break;
            }
            // After an append the new separator is the node's last key:
            // the left node stays full and the right one starts with one
            // child; otherwise the middle key moves up.
            let m = if append {
                node.keys.len() - 1
            } else {
                node.keys.len() / 2
            };
            let right = InnerNode {
                keys: node.keys.split_off(m + 1),
                children: node.children.split_off(m + 1),
            };
            let right_slots = if slots.len() > m {
                slots.split_off(m + 1)
            } else {
                Vec::new()
            };
            let up = node
                .keys
                .pop()
                .ok_or_else(|| Error::invalid("inner split without a middle key"))?;
            let rp = take()?;
            self.write_inner(st, rp, &right)?;
            up_slot = st.pinned.as_mut().map(|p| {
                p.alloc(PNode {
                    page: rp,
                    node: right,
                    slots: right_slots,
                })
            });
            shrunk.push((step.page, step.slot, node, slots));
            up_key = up;
            up_page = rp;
        }
        if !absorbed {
            // The root split: a new root above the old one.
            let root_page = take()?;
            let old_root = st.meta.root;
            let node = InnerNode {
                keys: vec![up_key],
                children: vec![old_root, up_page],
            };
            self.write_inner(st, root_page, &node)?;
            let old_height = st.meta.height;
            st.meta.root = root_page;
            st.meta.height += 1;
            if self.routing == Routing::Pinned || st.pinned.is_some() {
                let p = st.pinned.get_or_insert_with(Pinned::default);
                let slots = match up_slot {
                    Some(s) if old_height >= 2 => vec![p.root, s],
                    _ => Vec::new(),
                };
                p.root = p.alloc(PNode {
                    page: root_page,
                    node,
                    slots,
                });
            }
        }
        // Shrunk inner nodes, top-down.
        for (page, slot, node, slots) in shrunk.into_iter().rev() {
            self.write_inner(st, page, &node)?;
            Self::pin_replace(st, slot, node, slots);
        }
        Ok(())
    }

    pub(super) fn delete_impl(&self, key: u64) -> Result<bool> {
        let mut guard = self.state.write();
        let st = &mut *guard;
        st.w.check_writable()?;
        let (mut path, leaf_no) = self.route_for_write(st, key)?;
        self.read_page(Role::Leaf, leaf_no, &mut st.scratch.leaf)?;
        let (count, next, i) = {
            let leaf = LeafPage::open(&st.scratch.leaf, leaf_no, self.name())?;
            let i = leaf.lower_bound(key);
            if leaf.key(i) != Some(key) {
                return Ok(false);
            }
            (leaf.count(), leaf.next(), i)
        };
        leaf_remove(&mut st.scratch.leaf, count, i)?;
        seal_leaf(&mut st.scratch.leaf, leaf_no, count - 1, next);
        if count > 1 || st.meta.leaves == 1 {
            let r = self.write_leaf_buf(st, leaf_no);
            st.w.poison(r)?;
            st.meta.n = st.meta.n.saturating_sub(1);
            st.w.mark_dirty();
            return Ok(true);
        }
        // The leaf becomes empty and the tree has other leaves: free it.
        // Prepare: the deepest ancestor that keeps a child, the left sibling.
        let r = self
            .apply_pending(st)
            .and_then(|()| self.path_for_write(st, key, leaf_no, &mut path));
        st.w.poison(r)?;
        let path = path.unwrap_or_default();
        let stop = path
            .iter()
            .rposition(|s| s.keys >= 1)
            .ok_or_else(|| self.corrupt(leaf_no, "several leaves but a single path"))?;
        let left = match path.iter().rposition(|s| s.idx > 0) {
            Some(d) => Some(self.rightmost_leaf_left_of(st, &path, d)?),
            None => None,
        };
        let left_count = match left {
            Some(l) => {
                self.read_page(Role::Leaf, l, &mut st.scratch.other)?;
                let lp = LeafPage::open(&st.scratch.other, l, self.name())?;
                if lp.next() != leaf_no {
                    return Err(self.corrupt(l, "left sibling does not link to its neighbour"));
                }
                lp.count()
            }
            None => 0,
        };
        let r = self.apply_free_leaf(st, &path, leaf_no, next, stop, left.map(|l| (l, left_count)));
        st.w.poison(r)?;
        st.w.mark_dirty();
        if let Some(d) = st.ldir.as_mut() {
            // The ancestor at `stop` dropped the leaf's own lower bound when
            // the leaf was not its first child, else the next leaf's.
            let to_left = path.get(stop).is_some_and(|s| s.idx > 0);
            let r = d.remove(key, leaf_no, to_left);
            st.w.poison(r)?;
        }
        Ok(true)
    }

    /// The rightmost leaf under child `idx - 1` of the path node at `depth`.
    fn rightmost_leaf_left_of(&self, st: &mut State, path: &[Step], depth: usize) -> Result<u64> {
        let step = *path
            .get(depth)
            .ok_or_else(|| Error::invalid("delete path depth"))?;
        let (node, slots) = self.load_node(st, depth, &step)?;
        let c = step.idx - 1;
        let mut page = self.check_child(&st.meta, step.page, node.children.get(c).copied())?;
        // Levels below the child: height - 2 - depth of them are inner.
        let mut inner_levels = (st.meta.height as usize).saturating_sub(2 + depth);
        if let Some(p) = &st.pinned {
            let mut slot = slots.get(c).copied();
            while inner_levels > 0 {
                let pn = slot
                    .and_then(|s| p.get(s))
                    .ok_or_else(|| self.corrupt(page, "pinned slot missing"))?;
                page = self.check_child(&st.meta, pn.page, pn.node.children.last().copied())?;
                slot = pn.slots.last().copied();
                inner_levels -= 1;
            }
            return Ok(page);
        }
        while inner_levels > 0 {
            self.read_page(Role::Inner, page, &mut st.scratch.other)?;
            let inner = InnerPage::open(&st.scratch.other, page, self.name())?;
            page = self.check_child(&st.meta, page, inner.child(inner.count()))?;
            inner_levels -= 1;
        }
        Ok(page)
    }

    /// Apply phase of freeing the empty leaf `leaf_no` (its emptied image is
    /// in the leaf buffer): write it empty, relink the left sibling, remove
    /// it from the ancestor at `stop`, free it and the ancestors below
    /// `stop`, and collapse a root left with one child.
    fn apply_free_leaf(
        &self,
        st: &mut State,
        path: &[Step],
        leaf_no: u64,
        next: u64,
        stop: usize,
        left: Option<(u64, usize)>,
    ) -> Result<()> {
        // a. The record disappears: the leaf is now empty but still linked.
        self.write_leaf_buf(st, leaf_no)?;
        st.meta.n = st.meta.n.saturating_sub(1);
        // b. The left sibling skips it (its page is in the `other` buffer).
        if let Some((l, count)) = left {
            seal_leaf(&mut st.scratch.other, l, count, next);
            self.pager.write_page(Role::Leaf, l, &st.scratch.other)?;
        }
        // c. The ancestor at `stop` forgets the child on the path.
        let step = *path
            .get(stop)
            .ok_or_else(|| Error::invalid("delete path depth"))?;
        let (mut node, mut slots) = self.load_node(st, stop, &step)?;
        let idx = step.idx;
        if idx >= node.children.len() || node.keys.is_empty() {
            return Err(self.corrupt(step.page, "child index out of range"));
        }
        node.children.remove(idx);
        node.keys.remove(idx.saturating_sub(1));
        if idx < slots.len() {
            slots.remove(idx);
        }
        self.write_inner(st, step.page, &node)?;
        let collapse = stop == 0 && node.keys.is_empty();
        Self::pin_replace(st, step.slot, node, slots);
        // d. Free the leaf and the ancestors that had only this child.
        self.free_page(st, leaf_no)?;
        st.meta.leaves = st.meta.leaves.saturating_sub(1);
        for s in path.get(stop + 1..).unwrap_or(&[]) {
            self.free_page(st, s.page)?;
            st.meta.inner = st.meta.inner.saturating_sub(1);
            if let Some(p) = st.pinned.as_mut() {
                p.release(s.slot);
            }
        }
        // e. A root with a single child is replaced by the child.
        if collapse {
            self.collapse_root(st)?;
        }
        Ok(())
    }

    /// While the root is an inner node without keys, makes its only child
    /// the root and frees the old root.
    fn collapse_root(&self, st: &mut State) -> Result<()> {
        while st.meta.height > 1 {
            let old = st.meta.root;
            let (child, child_slot) = match &st.pinned {
                Some(p) => {
                    let pn = p
                        .get(p.root)
                        .ok_or_else(|| self.corrupt(old, "pinned root missing"))?;
                    if !pn.node.keys.is_empty() {
                        return Ok(());
                    }
                    (pn.node.children.first().copied(), pn.slots.first().copied())
                }
                None => {
                    self.read_page(Role::Inner, old, &mut st.scratch.other)?;
                    let inner = InnerPage::open(&st.scratch.other, old, self.name())?;
                    if inner.count() > 0 {
                        return Ok(());
                    }
                    (inner.child(0), None)
                }
            };
            let child = self.check_child(&st.meta, old, child)?;
            st.meta.root = child;
            st.meta.height = st.meta.height.saturating_sub(1);
            st.meta.inner = st.meta.inner.saturating_sub(1);
            if let Some(p) = st.pinned.as_mut() {
                let old_slot = p.root;
                p.release(old_slot);
                match child_slot {
                    Some(s) => p.root = s,
                    None => st.pinned = None,
                }
            }
            self.free_page(st, old)?;
        }
        Ok(())
    }
}
