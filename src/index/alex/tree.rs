//! The tree: inner pages, the descent, inserts and deletes with their SMOs,
//! the planner shared by the bulk load and the downward split, the cursor
//! and `verify` (see the module documentation for the I/O of each).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::format::{
    INIT_DENSITY, InnerNode, Meta, TRAVERSAL_WEIGHT, cap_for_keys, cap_for_pages, max_fanout, node_pages,
    open_inner, route_in, seal_inner,
};
use super::node::{DataNode, Insert, build_node, place};
use super::{Alex, State};
use crate::format::page::PAGE_HEADER_LEN;
use crate::index::batch::runs_of;
use crate::index::{Cursor, Record};
use crate::pager::{NO_PAGE, Pager, Role};
use crate::storage::AlignedBuf;
use crate::{Error, Result};

/// Path from the root to a data node: (inner node address, slot taken).
type Path = Vec<(u64, usize)>;

/// Deepest tree accepted (a deeper one is corrupt).
const MAX_DEPTH: usize = 64;

/// What [`Alex::verify`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// Inner nodes reached from the root.
    pub inner_nodes: u64,
    /// Pages holding them.
    pub inner_pages: u64,
    /// Data nodes.
    pub data_nodes: u64,
    /// Their pages.
    pub data_pages: u64,
    /// Records.
    pub records: u64,
    /// Inner levels above the deepest data node.
    pub depth: u32,
    /// Pages on the free list.
    pub free_pages: u64,
    /// Pages in the file (checkpoint page included).
    pub pages: u64,
}

/// A node of a plan: data nodes cover a range of the planned records.
#[derive(Debug, Clone)]
pub(crate) enum Plan {
    /// A data node of records `lo..hi`.
    Data { lo: usize, hi: usize },
    /// An inner node: its model and, per slot, the planned child.
    Inner {
        model: super::format::Model,
        children: Vec<usize>,
    },
}

/// Plans a subtree over sorted records: a data node if they fit the
/// budget, else an inner node whose fanout is the power of two (2 to the
/// page's largest) bringing its slots to the budget, its slots grouped
/// greedily left to right into children of at most the budget (a child
/// then fills several adjacent slots), larger slots planned recursively.
#[derive(Debug)]
pub(crate) struct Planner<'r> {
    recs: &'r [Record],
    budget: usize,
    fanout: usize,
    /// Planned nodes; children refer to indices.
    pub nodes: Vec<Plan>,
}

impl<'r> Planner<'r> {
    /// A planner over `recs` with data nodes of at most `budget` records
    /// and inner nodes of at most `fanout` slots.
    pub(crate) fn new(recs: &'r [Record], budget: usize, fanout: usize) -> Self {
        Planner {
            recs,
            budget: budget.max(1),
            fanout: fanout.max(2),
            nodes: Vec::new(),
        }
    }

    /// Plans records `lo..hi`; `force_inner` makes the top an inner node.
    pub(crate) fn plan(&mut self, lo: usize, hi: usize, force_inner: bool) -> usize {
        let n = hi.saturating_sub(lo);
        if !force_inner && n <= self.budget {
            self.nodes.push(Plan::Data { lo, hi });
            return self.nodes.len() - 1;
        }
        let key = |i: usize| self.recs.get(i).map_or(0, |r| r.0);
        let (first, last) = (key(lo), key(hi.saturating_sub(1)).max(key(lo)));
        let f = n.div_ceil(self.budget).next_power_of_two().clamp(2, self.fanout);
        let model = super::format::Model::spread(first, last, f);
        // bounds[s]: first record routed to slot >= s.
        let mut bounds = Vec::with_capacity(f + 1);
        let mut i = lo;
        for s in 0..f {
            while i < hi && model.slot(key(i), f) < s {
                i += 1;
            }
            bounds.push(i);
        }
        bounds.push(hi);
        let b = |s: usize| bounds.get(s).copied().unwrap_or(hi);
        let mut children = vec![usize::MAX; f];
        let mut s = 0;
        while s < f {
            let mut e = s + 1;
            while e < f && b(e + 1) - b(s) <= self.budget {
                e += 1;
            }
            let child = self.plan(b(s), b(e), false);
            for c in children.iter_mut().take(e).skip(s) {
                *c = child;
            }
            s = e;
        }
        self.nodes.push(Plan::Inner { model, children });
        self.nodes.len() - 1
    }

    /// Data nodes under `root` in key order.
    fn data_order(&self, root: usize, out: &mut Vec<usize>) {
        match self.nodes.get(root) {
            Some(Plan::Data { .. }) => out.push(root),
            Some(Plan::Inner { children, .. }) => {
                let mut last = usize::MAX;
                for &c in children {
                    if c != last {
                        self.data_order(c, out);
                        last = c;
                    }
                }
            }
            None => {}
        }
    }

    /// Inner nodes under `root` (pre-order).
    fn inner_order(&self, root: usize, out: &mut Vec<usize>) {
        if let Some(Plan::Inner { children, .. }) = self.nodes.get(root) {
            out.push(root);
            let mut last = usize::MAX;
            for &c in children {
                if c != last {
                    self.inner_order(c, out);
                    last = c;
                }
            }
        }
    }
}

/// Where materialized nodes go: the bulk load's sink or the open file.
pub(crate) trait Out {
    /// Reserves a run of `pages` pages for a data node: its head page.
    fn alloc_data(&mut self, pages: usize) -> Result<u64>;
    /// Reserves `len` bytes on an inner page: the node's address.
    fn alloc_inner(&mut self, len: usize) -> Result<u64>;
    /// Writes a data node's sealed pages.
    fn put_data(&mut self, head: u64, image: &[u8]) -> Result<()>;
    /// Writes an inner node at its address.
    fn put_inner(&mut self, addr: u64, node: &InnerNode) -> Result<()>;
}

/// Addresses and counts of materialized subtrees.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    /// Root address per planned root.
    pub roots: Vec<u64>,
    /// Head page of the first and last data node in key order.
    pub first: u64,
    pub last: u64,
    /// Data and inner nodes written.
    pub data_nodes: u32,
    pub inner_nodes: u32,
}

/// Writes the planned subtrees `roots` (in key order) through `out`: every
/// data node first (reserved in key order, so a bulk load writes them
/// sequentially), then every inner node; the data nodes are linked in key
/// order, the first to `prev` and the last to `next`.
pub(crate) fn materialize(
    plan: &Planner<'_>,
    roots: &[usize],
    out: &mut dyn Out,
    ps: usize,
    prev: u64,
    next: u64,
) -> Result<Placed> {
    let mut data = Vec::new();
    let mut inner = Vec::new();
    for &r in roots {
        plan.data_order(r, &mut data);
        plan.inner_order(r, &mut inner);
    }
    let mut addr: HashMap<usize, u64> = HashMap::new();
    let mut heads = Vec::with_capacity(data.len());
    for &d in &data {
        let Some(Plan::Data { lo, hi }) = plan.nodes.get(d) else {
            return Err(Error::invalid("planned data node missing"));
        };
        let cap = cap_for_keys(hi - lo + 1, INIT_DENSITY, ps);
        let head = out.alloc_data(node_pages(cap, ps))?;
        heads.push((head, cap, *lo, *hi));
        addr.insert(d, head * ps as u64);
    }
    for &i in &inner {
        let Some(Plan::Inner { children, .. }) = plan.nodes.get(i) else {
            return Err(Error::invalid("planned inner node missing"));
        };
        addr.insert(
            i,
            out.alloc_inner(super::format::INNER_HDR_LEN + 8 * children.len())?,
        );
    }
    for (j, &(head, cap, lo, hi)) in heads.iter().enumerate() {
        let p = if j == 0 {
            prev
        } else {
            heads.get(j - 1).map_or(NO_PAGE, |h| h.0)
        };
        let n = heads.get(j + 1).map_or(next, |h| h.0);
        let recs = plan
            .recs
            .get(lo..hi)
            .ok_or_else(|| Error::invalid("planned records out of range"))?;
        let (_, image) = build_node(recs, cap, head, p, n, ps)?;
        out.put_data(head, &image)?;
    }
    for &i in &inner {
        if let Some(Plan::Inner { model, children }) = plan.nodes.get(i) {
            let node = InnerNode {
                model: *model,
                children: children
                    .iter()
                    .map(|c| addr.get(c).copied().unwrap_or(0))
                    .collect(),
            };
            let a = addr.get(&i).copied().unwrap_or(0);
            out.put_inner(a, &node)?;
        }
    }
    Ok(Placed {
        roots: roots.iter().map(|r| addr.get(r).copied().unwrap_or(0)).collect(),
        first: heads.first().map_or(NO_PAGE, |h| h.0),
        last: heads.last().map_or(NO_PAGE, |h| h.0),
        data_nodes: heads.len() as u32,
        inner_nodes: inner.len() as u32,
    })
}

/// [`Out`] on the open file: runs from the pager, inner nodes appended to
/// the tail inner page; inner pages changed are kept until [`FileOut::finish`].
struct FileOut<'a> {
    t: &'a Alex,
    st: &'a mut State,
    /// Changed inner pages: (bytes, nodes, used).
    inner: BTreeMap<u64, (AlignedBuf, usize, usize)>,
}

impl<'a> FileOut<'a> {
    fn new(t: &'a Alex, st: &'a mut State) -> Self {
        FileOut {
            t,
            st,
            inner: BTreeMap::new(),
        }
    }

    /// Inner page `page`, loaded into the changed set.
    fn page(&mut self, page: u64) -> Result<&mut (AlignedBuf, usize, usize)> {
        if !self.inner.contains_key(&page) {
            let buf = self.t.inner_page(self.st, page)?;
            let (nodes, used) = open_inner(&buf, page, self.t.name())?;
            self.inner.insert(page, (buf, nodes, used));
        }
        self.inner
            .get_mut(&page)
            .ok_or_else(|| Error::invalid("inner page not loaded"))
    }

    /// Points slots `from..to` of the inner node at `addr` to `child`.
    fn set_children(&mut self, addr: u64, from: usize, to: usize, child: u64) -> Result<()> {
        let ps = self.t.page_size as u64;
        let (page, off) = (addr / ps, (addr % ps) as usize);
        let name = self.t.name().to_string();
        let (buf, _, used) = self.page(page)?;
        let mut node = InnerNode::decode(buf, page, off, *used, &name)?;
        for c in node.children.iter_mut().take(to).skip(from) {
            *c = child;
        }
        node.encode(buf, off)
    }

    /// Seals and writes the changed inner pages (role `Inner`).
    fn finish(self) -> Result<()> {
        for (page, (mut buf, nodes, used)) in self.inner {
            seal_inner(&mut buf, page, nodes, used);
            self.t.pager.write_page(Role::Inner, page, &buf)?;
            if let Some(m) = &mut self.st.resident {
                m.insert(page, buf);
            }
        }
        Ok(())
    }
}

impl Out for FileOut<'_> {
    fn alloc_data(&mut self, pages: usize) -> Result<u64> {
        self.t.pager.allocate_run(&mut self.st.meta.space, pages)
    }

    fn alloc_inner(&mut self, len: usize) -> Result<u64> {
        let ps = self.t.page_size;
        let tail = self.st.meta.tail;
        if tail != NO_PAGE {
            let (_, nodes, used) = self.page(tail)?;
            if *used + len <= ps {
                let a = tail * ps as u64 + *used as u64;
                *used += len;
                *nodes += 1;
                return Ok(a);
            }
        }
        if PAGE_HEADER_LEN + len > ps {
            return Err(Error::invalid("inner node larger than a page"));
        }
        let mut buf = AlignedBuf::zeroed(ps);
        let page = self
            .t
            .pager
            .allocate(&mut self.st.meta.space, 1, &mut buf)?
            .first()
            .copied()
            .ok_or_else(|| Error::invalid("no page allocated"))?;
        buf.fill(0);
        self.inner.insert(page, (buf, 1, PAGE_HEADER_LEN + len));
        self.st.meta.tail = page;
        Ok(page * ps as u64 + PAGE_HEADER_LEN as u64)
    }

    fn put_data(&mut self, head: u64, image: &[u8]) -> Result<()> {
        self.t.pager.write_page(Role::Leaf, head, image)
    }

    fn put_inner(&mut self, addr: u64, node: &InnerNode) -> Result<()> {
        let ps = self.t.page_size as u64;
        let (buf, _, _) = self.page(addr / ps)?;
        node.encode(buf, (addr % ps) as usize)
    }
}

impl Alex {
    pub(super) fn corrupt(&self, page: u64, what: impl Into<String>) -> Error {
        Error::corruption(self.name(), page, what)
    }

    /// Data nodes' record budget of the bulk load and the downward split.
    pub(super) fn budget(ps: usize, max_pages: u32) -> usize {
        ((cap_for_pages(max_pages as usize, ps) as f64 * INIT_DENSITY / 2.0) as usize).max(1)
    }

    /// Reads every inner page reachable from the root (role `Inner`).
    pub(super) fn load_inner(&self, meta: &Meta) -> Result<HashMap<u64, AlignedBuf>> {
        let ps = self.page_size as u64;
        let mut pages: HashMap<u64, AlignedBuf> = HashMap::new();
        let mut stack = vec![(meta.root, 0usize)];
        let mut seen = HashSet::new();
        while let Some((addr, depth)) = stack.pop() {
            let (page, off) = (addr / ps, (addr % ps) as usize);
            if off == 0 || !seen.insert(addr) {
                continue;
            }
            if depth > MAX_DEPTH {
                return Err(self.corrupt(page, "inner nodes deeper than 64 levels"));
            }
            let buf = match pages.entry(page) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    if page == NO_PAGE || page >= meta.space.page_count {
                        return Err(self.corrupt(page, "inner link outside the file"));
                    }
                    let mut buf = AlignedBuf::zeroed(self.page_size);
                    self.pager.read_page(Role::Inner, page, &mut buf)?;
                    e.insert(buf)
                }
            };
            let (_, used) = open_inner(buf, page, self.name())?;
            let node = InnerNode::decode(buf, page, off, used, self.name())?;
            stack.extend(node.children.iter().map(|&c| (c, depth + 1)));
        }
        Ok(pages)
    }

    /// Inner page `page`: the resident copy or a read (role `Inner`).
    fn inner_page(&self, st: &State, page: u64) -> Result<AlignedBuf> {
        if page == NO_PAGE || page >= st.meta.space.page_count {
            return Err(self.corrupt(page, "inner link outside the file"));
        }
        let mut buf = AlignedBuf::zeroed(self.page_size);
        match st.resident.as_ref().and_then(|m| m.get(&page)) {
            Some(p) => buf.copy_from_slice(p),
            None => self.pager.read_page(Role::Inner, page, &mut buf)?,
        }
        Ok(buf)
    }

    /// Descends from the root to the data node routing `key`: its head
    /// page, with the path when `path` is given. Reads each inner page on
    /// the path once (unless resident).
    fn descend(&self, st: &State, key: u64, mut path: Option<&mut Path>) -> Result<u64> {
        let ps = self.page_size as u64;
        let mut addr = st.meta.root;
        let mut held: Option<(u64, AlignedBuf)> = None;
        for _ in 0..=MAX_DEPTH {
            let (page, off) = (addr / ps, (addr % ps) as usize);
            if off == 0 {
                return Ok(page);
            }
            let resident = st.resident.as_ref().and_then(|m| m.get(&page));
            let bytes: &[u8] = match resident {
                Some(p) => p,
                None => {
                    if held.as_ref().is_none_or(|h| h.0 != page) {
                        if page == NO_PAGE || page >= st.meta.space.page_count {
                            return Err(self.corrupt(page, "inner link outside the file"));
                        }
                        let mut buf = AlignedBuf::zeroed(self.page_size);
                        self.pager.read_page(Role::Inner, page, &mut buf)?;
                        held = Some((page, buf));
                    }
                    held.as_ref().map_or(&[][..], |h| &h.1[..])
                }
            };
            let (_, used) = open_inner(bytes, page, self.name())?;
            let (slot, child) = route_in(bytes, page, off, used, key, self.name())?;
            if let Some(p) = path.as_deref_mut() {
                p.push((addr, slot));
            }
            addr = child;
        }
        Err(self.corrupt(addr / ps, "inner nodes deeper than 64 levels"))
    }

    pub(super) fn get_impl(&self, key: u64) -> Result<Option<u64>> {
        let st = self.state.read();
        let head = self.descend(&st, key, None)?;
        DataNode::open(&self.pager, head, st.meta.space.page_count)?.get_value(key)
    }

    pub(super) fn insert_locked(&self, st: &mut State, key: u64, value: u64) -> Result<Option<u64>> {
        // One SMO makes room unless the node is replaced by one as full
        // (a split whose halves are lopsided): then the next round splits.
        for _ in 0..=MAX_DEPTH {
            let mut path = Path::new();
            let head = self.descend(st, key, Some(&mut path))?;
            let mut node = DataNode::open(&self.pager, head, st.meta.space.page_count)?;
            match node.insert(key, value)? {
                Insert::Updated(old) => {
                    node.flush()?;
                    return Ok(Some(old));
                }
                Insert::Inserted => {
                    node.flush()?;
                    st.meta.n += 1;
                    return Ok(None);
                }
                Insert::Full => {
                    let hdr = node.hdr;
                    let recs = node.records()?;
                    drop(node);
                    self.smo(st, head, hdr, recs, &path)?;
                }
            }
        }
        Err(self.corrupt(
            st.meta.root / self.page_size as u64,
            "insert found no room after 64 SMOs",
        ))
    }

    pub(super) fn delete_locked(&self, st: &mut State, key: u64) -> Result<bool> {
        let head = self.descend(st, key, None)?;
        let mut node = DataNode::open(&self.pager, head, st.meta.space.page_count)?;
        if !node.delete(key)? {
            return Ok(false);
        }
        node.flush()?;
        st.meta.n = st.meta.n.saturating_sub(1);
        Ok(true)
    }

    /// The slots `from..to` of the parent at the end of `path` that point
    /// to `child`.
    fn parent_range(&self, st: &State, path: &Path, child: u64) -> Result<Option<(u64, usize, usize)>> {
        let Some(&(addr, slot)) = path.last() else {
            return Ok(None);
        };
        let ps = self.page_size as u64;
        let page = addr / ps;
        let buf = self.inner_page(st, page)?;
        let (_, used) = open_inner(&buf, page, self.name())?;
        let node = InnerNode::decode(&buf, page, (addr % ps) as usize, used, self.name())?;
        let is = |i: usize| node.children.get(i) == Some(&child);
        if !is(slot) {
            return Err(self.corrupt(page, "inner slot does not point to the data node routed"));
        }
        let mut from = slot;
        while from > 0 && is(from - 1) {
            from -= 1;
        }
        let mut to = slot + 1;
        while is(to) {
            to += 1;
        }
        Ok(Some((addr, from, to)))
    }

    /// One SMO on the full data node at `head` (header `hdr`, records
    /// `recs`, reached by `path`): expansion, sideways split or downward
    /// split (see the module documentation); the old run is freed.
    fn smo(
        &self,
        st: &mut State,
        head: u64,
        hdr: super::format::DataHeader,
        recs: Vec<Record>,
        path: &Path,
    ) -> Result<()> {
        let ps = self.page_size;
        self.pager.blocks().smo();
        let max_cap = cap_for_pages(st.meta.max_pages as usize, ps);
        let want = cap_for_keys(recs.len() + 1, INIT_DENSITY, ps);
        let range = self.parent_range(st, path, head * ps as u64)?;
        let budget = Self::budget(ps, st.meta.max_pages);
        let fanout = max_fanout(ps);
        let keys: Vec<u64> = recs.iter().map(|r| r.0).collect();
        let fits = |n: usize| cap_for_keys(n + 1, INIT_DENSITY, ps) <= max_cap;
        // The candidates and their expected cost per insert (ALEX's cost
        // model, see the module documentation).
        let expand = if want <= max_cap {
            Some(expected_of(&keys, 0, keys.len(), ps)?)
        } else {
            None
        };
        let mut sideways = None;
        if let Some((paddr, from, to)) = range.filter(|r| r.2 - r.1 >= 2) {
            let mid = from + (to - from) / 2;
            let ppage = paddr / ps as u64;
            let pbuf = self.inner_page(st, ppage)?;
            let (_, used) = open_inner(&pbuf, ppage, self.name())?;
            let parent = InnerNode::decode(&pbuf, ppage, (paddr % ps as u64) as usize, used, self.name())?;
            let split = recs.partition_point(|r| parent.route(r.0) < mid);
            if fits(split) && fits(recs.len() - split) {
                let cost = (expected_of(&keys, 0, split, ps)? * split as f64
                    + expected_of(&keys, split, keys.len(), ps)? * (keys.len() - split) as f64)
                    / keys.len().max(1) as f64;
                sideways = Some((split, mid, cost));
            }
        }
        let mut planner = Planner::new(&recs, usize::MAX, fanout);
        // (planned root, parent slots it takes; 0..0: all of them)
        let mut parts: Vec<(usize, usize, usize)> = Vec::new();
        let choice = match (expand, sideways) {
            (Some(_), _) if !hdr.deviates() => Smo::Expand,
            (e, s) => {
                let mut down = Planner::new(&recs, budget, fanout);
                let root = down.plan(0, recs.len(), true);
                let mut order = Vec::new();
                down.data_order(root, &mut order);
                let mut sum = 0.0;
                for d in order {
                    if let Some(Plan::Data { lo, hi }) = down.nodes.get(d) {
                        sum += expected_of(&keys, *lo, *hi, ps)? * (hi - lo) as f64;
                    }
                }
                let down_cost = sum / keys.len().max(1) as f64 + TRAVERSAL_WEIGHT;
                let mut best = (Smo::Downward, down_cost);
                if let Some(c) = e.filter(|&c| c < best.1) {
                    best = (Smo::Expand, c);
                }
                if let Some((split, mid, c)) = s.filter(|x| x.2 <= best.1) {
                    best = (Smo::Sideways(split, mid), c);
                }
                best.0
            }
        };
        match (choice, range) {
            (Smo::Sideways(split, mid), Some((_, from, to))) => {
                let a = planner.plan(0, split, false);
                let b = planner.plan(split, recs.len(), false);
                parts.push((a, from, mid));
                parts.push((b, mid, to));
            }
            (Smo::Expand, _) => {
                let r = planner.plan(0, recs.len(), false);
                parts.push((r, 0, 0));
            }
            _ => {
                planner.budget = budget;
                let r = planner.plan(0, recs.len(), true);
                parts.push((r, 0, 0));
            }
        }
        let roots: Vec<usize> = parts.iter().map(|p| p.0).collect();
        let mut out = FileOut::new(self, st);
        let placed = materialize(&planner, &roots, &mut out, ps, hdr.prev, hdr.next)?;
        match range {
            Some((paddr, from, to)) => {
                for (&(_, f, t), &addr) in parts.iter().zip(&placed.roots) {
                    let (f, t) = if t == 0 { (from, to) } else { (f, t) };
                    out.set_children(paddr, f, t, addr)?;
                }
            }
            None => {
                out.st.meta.root = placed.roots.first().copied().unwrap_or(out.st.meta.root);
            }
        }
        out.st.meta.data_nodes = out.st.meta.data_nodes.saturating_sub(1) + placed.data_nodes;
        out.st.meta.inner_nodes += placed.inner_nodes;
        out.finish()?;
        let pc = st.meta.space.page_count;
        if hdr.prev != NO_PAGE {
            let mut n = DataNode::open(&self.pager, hdr.prev, pc)?;
            n.set_links(None, Some(placed.first));
            n.flush()?;
        }
        if hdr.next != NO_PAGE {
            let mut n = DataNode::open(&self.pager, hdr.next, pc)?;
            n.set_links(Some(placed.last), None);
            n.flush()?;
        }
        self.pager
            .free_run(&mut st.meta.space, head, u64::from(hdr.pages))
    }

    /// Checks the whole file: every inner node and data node reachable from
    /// the root, sorted keys across the sibling chain, the first and last
    /// key of every data node routed to it, the counts of the root slot,
    /// and every page accounted for (checkpoint, inner, data, free).
    pub fn verify(&self) -> Result<VerifyReport> {
        let st = self.state.read();
        let meta = st.meta;
        let ps = self.page_size as u64;
        let mut r = VerifyReport::default();
        let mut inner_pages = HashSet::new();
        let mut data = Vec::new();
        let mut seen_inner = HashSet::new();
        let mut stack = vec![(meta.root, 0u32)];
        // Depth-first, children in slot order (pushed reversed).
        while let Some((addr, depth)) = stack.pop() {
            let (page, off) = (addr / ps, (addr % ps) as usize);
            if depth as usize > MAX_DEPTH {
                return Err(self.corrupt(page, "inner nodes deeper than 64 levels"));
            }
            if off == 0 {
                if data.last() != Some(&page) {
                    data.push(page);
                }
                r.depth = r.depth.max(depth);
                continue;
            }
            if !seen_inner.insert(addr) {
                return Err(self.corrupt(page, "inner node reached twice"));
            }
            let buf = self.inner_page(&st, page)?;
            let (_, used) = open_inner(&buf, page, self.name())?;
            let node = InnerNode::decode(&buf, page, off, used, self.name())?;
            inner_pages.insert(page);
            for &c in node.children.iter().rev() {
                stack.push((c, depth + 1));
            }
        }
        let unique: HashSet<u64> = data.iter().copied().collect();
        if unique.len() != data.len() {
            return Err(self.corrupt(meta.root / ps, "a data node is pointed to from slots apart"));
        }
        let mut prev = NO_PAGE;
        let mut last_key: Option<u64> = None;
        for (j, &head) in data.iter().enumerate() {
            let mut node = DataNode::open(&self.pager, head, meta.space.page_count)?;
            let recs = node.verify()?;
            if node.hdr.prev != prev {
                return Err(self.corrupt(head, "previous-node link out of order"));
            }
            if let (Some(l), Some(f)) = (last_key, recs.first()) {
                if f.0 <= l {
                    return Err(self.corrupt(head, "keys not increasing across data nodes"));
                }
            }
            for k in [recs.first(), recs.last()].into_iter().flatten() {
                if self.descend(&st, k.0, None)? != head {
                    return Err(self.corrupt(head, format!("key {} is not routed to its data node", k.0)));
                }
            }
            let next = node.hdr.next;
            let expect = data.get(j + 1).copied().unwrap_or(NO_PAGE);
            if next != expect {
                return Err(self.corrupt(head, "next-node link out of order"));
            }
            last_key = recs.last().map(|x| x.0).or(last_key);
            r.records += recs.len() as u64;
            r.data_pages += u64::from(node.hdr.pages);
            prev = head;
        }
        r.data_nodes = data.len() as u64;
        r.inner_nodes = seen_inner.len() as u64;
        r.inner_pages = inner_pages.len() as u64;
        if r.records != meta.n
            || r.data_nodes != u64::from(meta.data_nodes)
            || r.inner_nodes != u64::from(meta.inner_nodes)
        {
            return Err(self.corrupt(
                crate::pager::META_PAGE,
                format!(
                    "{} records, {} data and {} inner nodes found; {}, {} and {} counted",
                    r.records, r.data_nodes, r.inner_nodes, meta.n, meta.data_nodes, meta.inner_nodes
                ),
            ));
        }
        if meta.tail != NO_PAGE && !inner_pages.contains(&meta.tail) {
            return Err(self.corrupt(meta.tail, "inner tail page holds no reachable inner node"));
        }
        r.free_pages = self
            .pager
            .check_accounting(&meta.space, r.inner_pages + r.data_pages)?;
        r.pages = meta.space.page_count;
        Ok(r)
    }
}

/// An SMO chosen for a full data node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Smo {
    /// A larger node, retrained.
    Expand,
    /// Two nodes: records before `.0` take the parent's slots before `.1`.
    Sideways(usize, usize),
    /// A new inner node over new data nodes.
    Downward,
}

/// Expected cost per insert of a data node built from `keys[lo..hi]`.
fn expected_of(keys: &[u64], lo: usize, hi: usize, ps: usize) -> Result<f64> {
    let part = keys
        .get(lo..hi)
        .ok_or_else(|| Error::invalid("key range out of bounds"))?;
    Ok(place(part, cap_for_keys(part.len() + 1, INIT_DENSITY, ps))?.expected)
}

/// The cursor: slot by slot through a data node's bitmap, then the next
/// data node through its sibling link.
#[derive(Debug)]
pub(crate) struct AlexCursor<'a> {
    t: &'a Alex,
    node: Option<DataNode<'a>>,
    slot: usize,
    started: bool,
}

impl<'a> AlexCursor<'a> {
    pub(crate) fn new(t: &'a Alex) -> Self {
        AlexCursor {
            t,
            node: None,
            slot: 0,
            started: false,
        }
    }

    fn pager(&self) -> &'a Pager {
        &self.t.pager
    }
}

impl Cursor for AlexCursor<'_> {
    /// Positions at the first record `>= key`: the path, the data node's
    /// head page and the key pages of its search.
    fn seek(&mut self, key: u64) -> Result<()> {
        let t = self.t;
        let st = t.state.read();
        let head = t.descend(&st, key, None)?;
        let mut node = DataNode::open(self.pager(), head, st.meta.space.page_count)?;
        self.slot = node.lower_bound(key)?.map_or(node.hdr.cap as usize, |(q, _)| q);
        self.node = Some(node);
        self.started = true;
        Ok(())
    }

    /// The next record: the pages of the current node as its slots are
    /// reached, then the next node's head page through the sibling link.
    fn next(&mut self) -> Result<Option<Record>> {
        if !self.started {
            self.seek(0)?;
        }
        let pc = self.t.state.read().meta.space.page_count;
        let pager = self.pager();
        loop {
            let Some(node) = self.node.as_mut() else {
                return Ok(None);
            };
            if let Some(q) = node.next_occupied(self.slot)? {
                self.slot = q + 1;
                return Ok(Some((node.key(q)?, node.value(q)?)));
            }
            let next = node.hdr.next;
            if next == NO_PAGE {
                self.node = None;
                return Ok(None);
            }
            self.node = Some(DataNode::open(pager, next, pc)?);
            self.slot = 0;
        }
    }
}

/// What [`Alex::locate_many`] finds: the data nodes opened, each key's node
/// (an index among them), and each key's first slot `>=` it with that
/// slot's key.
type Located<'p> = (Vec<DataNode<'p>>, Vec<usize>, Vec<Option<(usize, u64)>>);

/// Where a key of a batch finds its inner node in a round.
#[derive(Debug, Clone, Copy)]
enum InnerSrc {
    /// The data node is reached: no inner node left.
    Done,
    /// Page `i` of the pages held from earlier rounds.
    Held(usize),
    /// The next of the pages read in this round.
    Read,
}

/// Batched lookups: the path level by level (inner pages not resident),
/// then the data nodes' head pages, the pages the searches start on, and
/// the value pages, each round's distinct pages in one batch.
impl Alex {
    /// The data node (head page) of each of `keys` (ascending): from the
    /// resident inner pages, or else level by level, each level's distinct
    /// inner pages read in one batch; a key whose next node lies on the page
    /// it holds from the previous level reads nothing (as
    /// [`Alex::descend`] holds it).
    fn descend_many(&self, st: &State, keys: &[u64]) -> Result<Vec<u64>> {
        if st.resident.is_some() {
            return keys.iter().map(|&k| self.descend(st, k, None)).collect();
        }
        let ps = self.page_size as u64;
        let mut addr = vec![st.meta.root; keys.len()];
        let mut held: Vec<Option<usize>> = vec![None; keys.len()];
        let mut pool: Vec<(u64, AlignedBuf)> = Vec::new();
        for _ in 0..=MAX_DEPTH {
            let mut src = Vec::with_capacity(keys.len());
            let mut want = Vec::new();
            for (&a, h) in addr.iter().zip(&held) {
                let (page, off) = (a / ps, a % ps);
                if off == 0 {
                    src.push(InnerSrc::Done);
                } else if let Some(j) = h.filter(|&j| pool.get(j).is_some_and(|p| p.0 == page)) {
                    src.push(InnerSrc::Held(j));
                } else {
                    if page == NO_PAGE || page >= st.meta.space.page_count {
                        return Err(self.corrupt(page, "inner link outside the file"));
                    }
                    src.push(InnerSrc::Read);
                    want.push(page);
                }
            }
            if want.is_empty() && src.iter().all(|s| matches!(s, InnerSrc::Done)) {
                return Ok(addr.iter().map(|&a| a / ps).collect());
            }
            let (distinct, which) = runs_of(&want);
            let base = pool.len();
            let bufs = if distinct.is_empty() {
                Vec::new()
            } else {
                self.pager.read_pages_many(Role::Inner, &distinct)?
            };
            pool.extend(distinct.iter().copied().zip(bufs));
            let mut which = which.into_iter();
            for (((&key, a), h), s) in keys.iter().zip(addr.iter_mut()).zip(held.iter_mut()).zip(src) {
                let j = match s {
                    InnerSrc::Done => continue,
                    InnerSrc::Read => {
                        base + which
                            .next()
                            .ok_or_else(|| Error::invalid("inner page not read"))?
                    }
                    InnerSrc::Held(j) => j,
                };
                let (page, off) = (*a / ps, (*a % ps) as usize);
                let bytes = pool
                    .get(j)
                    .map(|p| &p.1[..])
                    .ok_or_else(|| Error::invalid("inner page not read"))?;
                let (_, used) = open_inner(bytes, page, self.name())?;
                let (_, child) = route_in(bytes, page, off, used, key, self.name())?;
                *a = child;
                *h = Some(j);
            }
        }
        let deep = addr
            .iter()
            .find(|&&a| a % ps != 0)
            .copied()
            .unwrap_or(st.meta.root);
        Err(self.corrupt(deep / ps, "inner nodes deeper than 64 levels"))
    }

    /// Reads, in one batch, page `page` of node `node` for each
    /// `(node, page)` of `want` (adjacent duplicates once) and hands each
    /// to its node.
    fn feed(&self, nodes: &mut [DataNode<'_>], want: &[(usize, usize)]) -> Result<()> {
        if want.is_empty() {
            return Ok(());
        }
        let (distinct, _) = runs_of(want);
        let pages = distinct
            .iter()
            .map(|&(n, p)| {
                nodes
                    .get(n)
                    .map(|d| d.head + p as u64)
                    .ok_or_else(|| Error::invalid("data node not open"))
            })
            .collect::<Result<Vec<_>>>()?;
        let bufs = self.pager.read_pages_many(Role::Leaf, &pages)?;
        for (&(n, p), b) in distinct.iter().zip(bufs) {
            if let Some(d) = nodes.get_mut(n) {
                d.offer(p, b)?;
            }
        }
        Ok(())
    }

    /// The slot and key of the first record `>= key` in its data node, for
    /// each of `keys` (ascending, distinct), with the nodes they were found
    /// in (`which`: each key's node): the path, then one batch of head
    /// pages, one of the pages where the searches start; pages further
    /// along a search are read as it reaches them.
    fn locate_many<'p>(&'p self, st: &State, keys: &[u64]) -> Result<Located<'p>> {
        let pc = st.meta.space.page_count;
        let heads = self.descend_many(st, keys)?;
        let (distinct, which) = runs_of(&heads);
        if let Some(&h) = distinct.iter().find(|&&h| h == NO_PAGE || h >= pc) {
            return Err(self.corrupt(h, "data-node link outside the file"));
        }
        let bufs = self.pager.read_pages_many(Role::Leaf, &distinct)?;
        let mut nodes = distinct
            .iter()
            .zip(bufs)
            .map(|(&h, b)| DataNode::open_from(&self.pager, h, pc, b))
            .collect::<Result<Vec<_>>>()?;
        let want: Vec<(usize, usize)> = keys
            .iter()
            .zip(&which)
            .filter_map(|(&k, &n)| {
                let d = nodes.get(n)?;
                let p = d.search_page(k);
                d.wants(p).then_some((n, p))
            })
            .collect();
        self.feed(&mut nodes, &want)?;
        let mut found = Vec::with_capacity(keys.len());
        for (&k, &n) in keys.iter().zip(&which) {
            let d = nodes
                .get_mut(n)
                .ok_or_else(|| Error::invalid("data node not open"))?;
            found.push(match d.lower_slot(k)? {
                Some(q) => Some((q, d.key(q)?)),
                None => None,
            });
        }
        Ok((nodes, which, found))
    }

    /// Reads the value pages of the slots `(key index, slot)` of `at` in
    /// one batch, then the values.
    fn values_of(
        &self,
        nodes: &mut [DataNode<'_>],
        which: &[usize],
        at: &[(usize, usize)],
    ) -> Result<Vec<u64>> {
        let want: Vec<(usize, usize)> = at
            .iter()
            .filter_map(|&(i, q)| {
                let n = *which.get(i)?;
                let d = nodes.get(n)?;
                let p = d.value_page(q);
                d.wants(p).then_some((n, p))
            })
            .collect();
        self.feed(nodes, &want)?;
        at.iter()
            .map(|&(i, q)| {
                let n = which.get(i).copied().unwrap_or(usize::MAX);
                nodes
                    .get_mut(n)
                    .ok_or_else(|| Error::invalid("data node not open"))?
                    .value(q)
            })
            .collect()
    }

    /// [`crate::index::Index::get`] of each of `keys` (ascending, distinct)
    /// in rounds: the path ([`Alex::descend_many`]), the head pages, the
    /// pages where the searches start, the value pages of the keys found;
    /// each round's distinct pages in one batch, a data node's pages read
    /// once for all the keys in it.
    pub(super) fn get_many_impl(&self, keys: &[u64]) -> Result<Vec<Option<u64>>> {
        let st = self.state.read();
        let (mut nodes, which, found) = self.locate_many(&st, keys)?;
        let at: Vec<(usize, usize)> = found
            .iter()
            .zip(keys)
            .enumerate()
            .filter_map(|(i, (f, &k))| f.filter(|&(_, fk)| fk == k).map(|(q, _)| (i, q)))
            .collect();
        let values = self.values_of(&mut nodes, &which, &at)?;
        let mut answers = vec![None; keys.len()];
        for (&(i, _), v) in at.iter().zip(values) {
            if let Some(a) = answers.get_mut(i) {
                *a = Some(v);
            }
        }
        Ok(answers)
    }

    /// [`crate::index::Index::lower_bound`] of each of `keys` (ascending,
    /// distinct): the rounds of [`Alex::get_many_impl`]; a key whose data
    /// node holds nothing `>=` it follows the sibling links node by node,
    /// as the cursor does.
    pub(super) fn lower_bound_many_impl(&self, keys: &[u64]) -> Result<Vec<Option<Record>>> {
        let st = self.state.read();
        let pc = st.meta.space.page_count;
        let (mut nodes, which, found) = self.locate_many(&st, keys)?;
        let at: Vec<(usize, usize)> = found
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.map(|(q, _)| (i, q)))
            .collect();
        let values = self.values_of(&mut nodes, &which, &at)?;
        let mut answers: Vec<Option<Record>> = vec![None; keys.len()];
        for (&(i, _), v) in at.iter().zip(values) {
            if let (Some(a), Some(Some((_, k)))) = (answers.get_mut(i), found.get(i)) {
                *a = Some((*k, v));
            }
        }
        for ((f, &n), a) in found.iter().zip(&which).zip(answers.iter_mut()) {
            if f.is_some() {
                continue;
            }
            let mut next = nodes.get(n).map_or(NO_PAGE, |d| d.hdr.next);
            while next != NO_PAGE {
                let mut d = DataNode::open(&self.pager, next, pc)?;
                if let Some(q) = d.next_occupied(0)? {
                    *a = Some((d.key(q)?, d.value(q)?));
                    break;
                }
                next = d.hdr.next;
            }
        }
        Ok(answers)
    }
}
