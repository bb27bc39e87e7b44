//! Node-space reads and writes, lookups, the cursor, inserts (with child
//! creation and LIPP's subtree rebuild), deletes and `verify` of LIPP (see
//! the module documentation for the I/O of each).

use std::collections::{HashMap, HashSet};

use super::build::{plan, seal_node_page, serialize};
use super::format::{
    MAX_DEPTH, Meta, Model, NODE_HDR_LEN, NodeHeader, SLOT_LEN, Slot, page_of, pages_for, payload,
};
use super::{LippIndex, State};
use crate::format::page::{self, PAGE_HEADER_LEN, PageType};
use crate::index::batch::runs_of;
use crate::index::{Cursor, Record};
use crate::pager::Role;
use crate::storage::AlignedBuf;
use crate::{Error, Result};

/// Pages a lookup or insert keeps for reuse within the operation.
const OP_PAGES: usize = 4;
/// Pages a cursor keeps for reuse between calls.
pub(crate) const CURSOR_PAGES: usize = 8;
/// Pages read per call by `verify`'s checksum pass.
const VERIFY_BATCH: u64 = 256;

/// What [`LippIndex::verify`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// Nodes reachable from the root.
    pub nodes: u64,
    /// Live records.
    pub records: u64,
    /// Deepest node (the root is depth 1).
    pub depth: u64,
    /// Node-space bytes of the reachable nodes.
    pub live_bytes: u64,
    /// Reachable nodes that cross a page boundary (a lookup may read two
    /// pages for them).
    pub crossing: u64,
    /// Pages in the file (checkpoint page included), all checked.
    pub pages: u64,
}

/// The most recently read node pages (checked), reused instead of read
/// again: Lan's "the last block fetched is reused", for a few blocks.
#[derive(Debug)]
pub(crate) struct Pages {
    cap: usize,
    /// `(page number, page)`, most recently used last.
    list: Vec<(u64, Vec<u8>)>,
    /// Every page put, none evicted ([`Pages::unbounded`]; `list` unused).
    all: Option<HashMap<u64, Vec<u8>>>,
}

impl Pages {
    pub(crate) fn new(cap: usize) -> Pages {
        Pages {
            cap: cap.max(2),
            list: Vec::new(),
            all: None,
        }
    }

    /// Pages that keep every page put (a batch's pages, until it ends).
    fn unbounded() -> Pages {
        Pages {
            cap: usize::MAX,
            list: Vec::new(),
            all: Some(HashMap::new()),
        }
    }

    fn has(&self, no: u64) -> bool {
        if let Some(m) = &self.all {
            return m.contains_key(&no);
        }
        self.list.iter().any(|(p, _)| *p == no)
    }

    /// Page `no`, marked most recently used.
    fn get(&mut self, no: u64) -> Option<&[u8]> {
        if let Some(m) = &self.all {
            return m.get(&no).map(Vec::as_slice);
        }
        let i = self.list.iter().position(|(p, _)| *p == no)?;
        let e = self.list.remove(i);
        self.list.push(e);
        self.list.last().map(|(_, b)| b.as_slice())
    }

    fn put(&mut self, no: u64, bytes: Vec<u8>) {
        if let Some(m) = &mut self.all {
            m.insert(no, bytes);
            return;
        }
        self.list.retain(|(p, _)| *p != no);
        self.list.push((no, bytes));
        while self.list.len() > self.cap {
            self.list.remove(0);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.list.clear();
        if let Some(m) = &mut self.all {
            m.clear();
        }
    }
}

/// One node on an insert's path: address, header, slot taken.
type Step = (u64, NodeHeader, u64);

impl LippIndex {
    pub(super) fn corrupt(&self, page: u64, what: impl Into<String>) -> Error {
        Error::corruption(self.pager.name(), page, what)
    }

    /// Reads node pages `first..=last` in one call and checks each.
    fn read_run(&self, meta: &Meta, role: Role, first: u64, last: u64) -> Result<AlignedBuf> {
        if first == 0 || last < first || last >= meta.space.page_count {
            return Err(self.corrupt(
                first,
                format!(
                    "LIPP node pages {first}..={last} outside the {} pages",
                    meta.space.page_count
                ),
            ));
        }
        let ps = self.page_size;
        let mut buf = AlignedBuf::zeroed((last - first + 1) as usize * ps);
        self.pager.read_page(role, first, &mut buf)?;
        for (j, pg) in buf.chunks(ps).enumerate() {
            page::open_typed(pg, first + j as u64, self.pager.name(), PageType::LippNode)?;
        }
        Ok(buf)
    }

    /// Makes node pages `first..=last` present in `pages`: if any is
    /// missing, all of them are read in one call.
    fn load(&self, meta: &Meta, pages: &mut Pages, role: Role, first: u64, last: u64) -> Result<()> {
        if (first..=last).all(|p| pages.has(p)) {
            return Ok(());
        }
        let run = self.read_run(meta, role, first, last)?;
        for (j, pg) in run.chunks(self.page_size).enumerate() {
            pages.put(first + j as u64, pg.to_vec());
        }
        Ok(())
    }

    /// Copies node-space bytes `[addr, addr + out.len())` into `out`,
    /// through `pages` (the covering pages read in one call if needed).
    fn read_bytes(
        &self,
        meta: &Meta,
        pages: &mut Pages,
        role: Role,
        addr: u64,
        out: &mut [u8],
    ) -> Result<()> {
        let len = out.len() as u64;
        if len == 0 {
            return Ok(());
        }
        let ps = self.page_size;
        let first = page_of(ps, addr);
        let last = page_of(ps, addr + len - 1);
        self.load(meta, pages, role, first, last)?;
        let p = payload(ps);
        let mut a = addr;
        let mut done = 0usize;
        while done < out.len() {
            let no = page_of(ps, a);
            let off = (a % p) as usize;
            let take = ((p as usize) - off).min(out.len() - done);
            let pg = pages
                .get(no)
                .ok_or_else(|| self.corrupt(no, "LIPP page evicted while read"))?;
            let src = pg
                .get(PAGE_HEADER_LEN + off..PAGE_HEADER_LEN + off + take)
                .ok_or_else(|| self.corrupt(no, "LIPP page shorter than its payload"))?;
            out.get_mut(done..done + take)
                .ok_or_else(|| self.corrupt(no, "LIPP read out of range"))?
                .copy_from_slice(src);
            done += take;
            a += take as u64;
        }
        Ok(())
    }

    /// Writes `data` at node-space address `addr`: the covering pages that
    /// exist are read (through `pages`), patched, resealed and written in
    /// one call; pages past the file's end are appended (zero-filled).
    fn write_bytes(
        &self,
        st: &mut State,
        pages: &mut Pages,
        role: Role,
        addr: u64,
        data: &[u8],
    ) -> Result<()> {
        let len = data.len() as u64;
        if len == 0 {
            return Ok(());
        }
        let ps = self.page_size;
        let p = payload(ps);
        let first = page_of(ps, addr);
        let last = page_of(ps, addr + len - 1);
        let existing = st.meta.space.page_count;
        let have = last.min(existing.saturating_sub(1));
        if first <= have {
            self.load(&st.meta, pages, role, first, have)?;
        }
        let mut buf = AlignedBuf::zeroed((last - first + 1) as usize * ps);
        for (j, pg) in buf.chunks_mut(ps).enumerate() {
            let no = first + j as u64;
            if no < existing {
                let old = pages
                    .get(no)
                    .ok_or_else(|| self.corrupt(no, "LIPP page evicted while written"))?;
                pg.copy_from_slice(old.get(..ps).unwrap_or(&[]));
            }
        }
        let mut a = addr;
        let mut done = 0usize;
        while done < data.len() {
            let j = (page_of(ps, a) - first) as usize;
            let off = (a % p) as usize;
            let take = ((p as usize) - off).min(data.len() - done);
            let at = j * ps + PAGE_HEADER_LEN + off;
            buf.get_mut(at..at + take)
                .ok_or_else(|| Error::invalid("LIPP write out of range"))?
                .copy_from_slice(data.get(done..done + take).unwrap_or(&[]));
            done += take;
            a += take as u64;
        }
        for (j, pg) in buf.chunks_mut(ps).enumerate() {
            seal_node_page(pg, first + j as u64);
        }
        self.pager.write_page(role, first, &buf)?;
        for (j, pg) in buf.chunks(ps).enumerate() {
            pages.put(first + j as u64, pg.to_vec());
        }
        if last >= existing {
            st.meta.space.page_count = last + 1;
        }
        Ok(())
    }

    /// The header of the node at `addr`: resident if cached, else read
    /// (role `Inner`) and, with [`Residency::Index`](crate::index::Residency),
    /// cached.
    pub(super) fn header(&self, meta: &Meta, pages: &mut Pages, addr: u64) -> Result<NodeHeader> {
        if let Some(c) = &self.headers {
            if let Some(h) = c.lock().get(&addr) {
                return Ok(*h);
            }
        }
        let mut b = [0u8; NODE_HDR_LEN as usize];
        self.read_bytes(meta, pages, Role::Inner, addr, &mut b)?;
        let h = NodeHeader::decode(
            &b,
            addr,
            meta.tail,
            self.pager.name(),
            page_of(self.page_size, addr),
        )?;
        if let Some(c) = &self.headers {
            c.lock().insert(addr, h);
        }
        Ok(h)
    }

    /// Slot `i` of the node at `addr` (role `Leaf`).
    pub(super) fn slot(&self, meta: &Meta, pages: &mut Pages, addr: u64, i: u64) -> Result<Slot> {
        let a = NodeHeader::slot_addr(addr, i);
        let mut b = [0u8; SLOT_LEN as usize];
        self.read_bytes(meta, pages, Role::Leaf, a, &mut b)?;
        Slot::decode(&b, meta.tail, self.pager.name(), page_of(self.page_size, a))
    }

    fn write_header(&self, st: &mut State, pages: &mut Pages, addr: u64, h: &NodeHeader) -> Result<()> {
        let mut b = [0u8; NODE_HDR_LEN as usize];
        h.encode(&mut b);
        self.write_bytes(st, pages, Role::Inner, addr, &b)?;
        if let Some(c) = &self.headers {
            c.lock().insert(addr, *h);
        }
        Ok(())
    }

    fn write_slot(&self, st: &mut State, pages: &mut Pages, addr: u64, i: u64, s: Slot) -> Result<()> {
        let mut b = [0u8; SLOT_LEN as usize];
        s.encode(&mut b);
        self.write_bytes(st, pages, Role::Leaf, NodeHeader::slot_addr(addr, i), &b)
    }

    /// The whole node at `addr`: header and slots, read in one call (role
    /// `Leaf`), not through the page reuse.
    fn read_node(&self, meta: &Meta, addr: u64) -> Result<(NodeHeader, Vec<Slot>)> {
        let mut pages = Pages::new(2);
        let h = {
            let mut b = [0u8; NODE_HDR_LEN as usize];
            self.read_bytes(meta, &mut pages, Role::Leaf, addr, &mut b)?;
            NodeHeader::decode(
                &b,
                addr,
                meta.tail,
                self.pager.name(),
                page_of(self.page_size, addr),
            )?
        };
        let ps = self.page_size;
        let len = h.bytes();
        let first = page_of(ps, addr);
        let last = page_of(ps, addr + len - 1);
        let run = self.read_run(meta, Role::Leaf, first, last)?;
        let p = payload(ps) as usize;
        let mut bytes = Vec::with_capacity((last - first + 1) as usize * p);
        for pg in run.chunks(ps) {
            bytes.extend_from_slice(pg.get(PAGE_HEADER_LEN..).unwrap_or(&[]));
        }
        let off = (addr % payload(ps)) as usize;
        let mut slots = Vec::with_capacity(h.slots as usize);
        for i in 0..h.slots {
            let o = off + (NODE_HDR_LEN + SLOT_LEN * i) as usize;
            let b = bytes
                .get(o..o + SLOT_LEN as usize)
                .ok_or_else(|| self.corrupt(first, "LIPP node cut short"))?;
            let pg = page_of(ps, NodeHeader::slot_addr(addr, i));
            slots.push(Slot::decode(b, meta.tail, self.pager.name(), pg)?);
        }
        Ok((h, slots))
    }

    pub(super) fn get_impl(&self, key: u64) -> Result<Option<u64>> {
        let st = self.state.read();
        let meta = st.meta;
        let mut pages = Pages::new(OP_PAGES);
        let mut addr = meta.root;
        self.lookups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for _ in 0..MAX_DEPTH {
            self.node_visits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let h = self.header(&meta, &mut pages, addr)?;
            let s = h.model.slot(key, h.slots);
            match self.slot(&meta, &mut pages, addr, s)? {
                Slot::Data(k, v) => return Ok((k == key).then_some(v)),
                Slot::Null => return Ok(None),
                Slot::Node(c) => addr = c,
            }
        }
        Err(self.corrupt(page_of(self.page_size, addr), "LIPP path deeper than the limit"))
    }

    pub(super) fn lower_bound_impl(&self, key: u64) -> Result<Option<Record>> {
        let st = self.state.read();
        let mut c = LippCursor::new(self);
        c.seek_locked(&st, key)?;
        c.next_locked(&st)
    }

    /// Writes the planned subtree over `recs` at the tail; returns its
    /// address and node count.
    fn append_subtree(&self, st: &mut State, pages: &mut Pages, recs: &[Record]) -> Result<(u64, u64)> {
        let node = plan(recs)?;
        let at = st.meta.tail;
        let mut bytes = Vec::new();
        serialize(&node, at, &mut bytes)?;
        self.write_bytes(st, pages, Role::Leaf, at, &bytes)?;
        st.meta.tail = at + bytes.len() as u64;
        st.meta.space.page_count = pages_for(self.page_size, st.meta.tail).max(st.meta.space.page_count);
        Ok((at, node.nodes))
    }

    pub(super) fn insert_locked(&self, st: &mut State, key: u64, value: u64) -> Result<Option<u64>> {
        let meta = st.meta;
        let mut pages = Pages::new(OP_PAGES);
        let mut path: Vec<Step> = Vec::new();
        let mut addr = meta.root;
        let conflict = loop {
            if path.len() >= MAX_DEPTH {
                return Err(self.corrupt(page_of(self.page_size, addr), "LIPP path deeper than the limit"));
            }
            let h = self.header(&meta, &mut pages, addr)?;
            let s = h.model.slot(key, h.slots);
            path.push((addr, h, s));
            match self.slot(&meta, &mut pages, addr, s)? {
                Slot::Node(c) => addr = c,
                Slot::Data(k, old) if k == key => {
                    self.write_slot(st, &mut pages, addr, s, Slot::Data(key, value))?;
                    return Ok(Some(old));
                }
                Slot::Data(k, v) => {
                    let recs = if k < key {
                        [(k, v), (key, value)]
                    } else {
                        [(key, value), (k, v)]
                    };
                    let (child, nodes) = self.append_subtree(st, &mut pages, &recs)?;
                    self.write_slot(st, &mut pages, addr, s, Slot::Node(child))?;
                    st.meta.nodes += nodes;
                    self.pager.blocks().smo();
                    break true;
                }
                Slot::Null => {
                    self.write_slot(st, &mut pages, addr, s, Slot::Data(key, value))?;
                    break false;
                }
            }
        };
        st.meta.n += 1;
        // Statistics on the insert path: every node above the new key.
        for (a, h, _) in path.iter_mut() {
            h.size += 1;
            h.inserts += 1;
            if conflict {
                h.conflicts += 1;
            }
            self.write_header(st, &mut pages, *a, h)?;
        }
        if let Some(j) = path.iter().position(|(_, h, _)| h.needs_rebuild()) {
            self.rebuild(st, &mut pages, &path, j)?;
        }
        Ok(None)
    }

    /// Rebuilds the subtree of `path[j]`: its records are collected in
    /// order, planned afresh and written at the tail, and the parent's slot
    /// (or the root) points at the new subtree; the old nodes become dead
    /// bytes. One structure modification.
    fn rebuild(&self, st: &mut State, pages: &mut Pages, path: &[Step], j: usize) -> Result<()> {
        let Some(&(addr, _, _)) = path.get(j) else {
            return Ok(());
        };
        let meta = st.meta;
        let mut recs = Vec::new();
        let (old_bytes, old_nodes) = self.collect(&meta, addr, &mut recs)?;
        let (at, nodes) = self.append_subtree(st, pages, &recs)?;
        match j.checked_sub(1).and_then(|p| path.get(p)) {
            Some(&(pa, _, ps)) => self.write_slot(st, pages, pa, ps, Slot::Node(at))?,
            None => st.meta.root = at,
        }
        st.meta.dead += old_bytes;
        st.meta.nodes = st.meta.nodes.saturating_sub(old_nodes) + nodes;
        self.pager.blocks().smo();
        Ok(())
    }

    /// Appends the records of the subtree at `addr` to `out` in key order;
    /// returns its node-space bytes and nodes.
    fn collect(&self, meta: &Meta, addr: u64, out: &mut Vec<Record>) -> Result<(u64, u64)> {
        let mut bytes = 0;
        let mut nodes = 0;
        // (slots of a node, next slot to visit)
        let mut stack: Vec<(Vec<Slot>, usize)> = Vec::new();
        let (h, slots) = self.read_node(meta, addr)?;
        bytes += h.bytes();
        nodes += 1;
        stack.push((slots, 0));
        while let Some((slots, i)) = stack.last_mut() {
            let Some(s) = slots.get(*i).copied() else {
                stack.pop();
                continue;
            };
            *i += 1;
            match s {
                Slot::Null => {}
                Slot::Data(k, v) => out.push((k, v)),
                Slot::Node(c) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(
                            self.corrupt(page_of(self.page_size, c), "LIPP path deeper than the limit")
                        );
                    }
                    let (h, slots) = self.read_node(meta, c)?;
                    bytes += h.bytes();
                    nodes += 1;
                    stack.push((slots, 0));
                }
            }
        }
        Ok((bytes, nodes))
    }

    pub(super) fn delete_locked(&self, st: &mut State, key: u64) -> Result<bool> {
        let meta = st.meta;
        let mut pages = Pages::new(OP_PAGES);
        let mut addr = meta.root;
        for _ in 0..MAX_DEPTH {
            let h = self.header(&meta, &mut pages, addr)?;
            let s = h.model.slot(key, h.slots);
            match self.slot(&meta, &mut pages, addr, s)? {
                Slot::Node(c) => addr = c,
                Slot::Data(k, _) if k == key => {
                    self.write_slot(st, &mut pages, addr, s, Slot::Null)?;
                    st.meta.n -= 1;
                    return Ok(true);
                }
                _ => return Ok(false),
            }
        }
        Err(self.corrupt(page_of(self.page_size, addr), "LIPP path deeper than the limit"))
    }

    /// Checks the whole file: every page's checksum and type, every node
    /// reachable from the root once (header, slots, child addresses), every
    /// key in the slot its node's model and every ancestor's model give it,
    /// keys strictly increasing in order, and the record and node counts
    /// against the checkpoint's.
    ///
    /// Errors: [`Error::Corruption`] naming the file and page.
    pub fn verify(&self) -> Result<VerifyReport> {
        let st = self.state.read();
        let meta = st.meta;
        meta.check(self.pager.name())?;
        let mut r = VerifyReport {
            pages: meta.space.page_count,
            ..VerifyReport::default()
        };
        let mut first = 1;
        while first < meta.space.page_count {
            let last = (first + VERIFY_BATCH - 1).min(meta.space.page_count - 1);
            self.read_run(&meta, Role::Other, first, last)?;
            first = last + 1;
        }
        let mut seen = HashSet::new();
        let mut prev: Option<u64> = None;
        let mut above: Vec<(Model, u64, u64)> = Vec::new();
        self.verify_node(&meta, meta.root, &mut above, &mut seen, &mut prev, &mut r)?;
        if r.records != meta.n || r.nodes != meta.nodes {
            return Err(self.corrupt(
                crate::pager::META_PAGE,
                format!(
                    "{} records and {} nodes reachable, the checkpoint says {} and {}",
                    r.records, r.nodes, meta.n, meta.nodes
                ),
            ));
        }
        if r.live_bytes.saturating_add(meta.dead) > meta.tail {
            return Err(self.corrupt(
                crate::pager::META_PAGE,
                format!(
                    "{} live and {} dead node bytes exceed the {} in use",
                    r.live_bytes, meta.dead, meta.tail
                ),
            ));
        }
        Ok(r)
    }

    /// Checks the subtree at `addr`; `above` holds each ancestor's model,
    /// slot count and the slot leading here.
    fn verify_node(
        &self,
        meta: &Meta,
        addr: u64,
        above: &mut Vec<(Model, u64, u64)>,
        seen: &mut HashSet<u64>,
        prev: &mut Option<u64>,
        r: &mut VerifyReport,
    ) -> Result<()> {
        let page = page_of(self.page_size, addr);
        if above.len() >= MAX_DEPTH {
            return Err(self.corrupt(page, "LIPP path deeper than the limit"));
        }
        if !seen.insert(addr) {
            return Err(self.corrupt(page, format!("LIPP node at {addr} reached twice")));
        }
        let (h, slots) = self.read_node(meta, addr)?;
        r.nodes += 1;
        r.live_bytes += h.bytes();
        if page_of(self.page_size, addr + h.bytes() - 1) != page {
            r.crossing += 1;
        }
        r.depth = r.depth.max(above.len() as u64 + 1);
        for (i, s) in slots.iter().enumerate() {
            let i = i as u64;
            match *s {
                Slot::Null => {}
                Slot::Data(k, _) => {
                    let here = h.model.slot(k, h.slots) == i;
                    if !here || above.iter().any(|(m, n, s)| m.slot(k, *n) != *s) {
                        return Err(self.corrupt(page, format!("LIPP key {k} in the wrong slot")));
                    }
                    if prev.is_some_and(|p| p >= k) {
                        return Err(self.corrupt(page, format!("LIPP key {k} out of order")));
                    }
                    *prev = Some(k);
                    r.records += 1;
                }
                Slot::Node(c) => {
                    above.push((h.model, h.slots, i));
                    let res = self.verify_node(meta, c, above, seen, prev, r);
                    above.pop();
                    res?;
                }
            }
        }
        Ok(())
    }
}

/// One node on the cursor's stack: address, header, next slot to visit.
#[derive(Debug)]
struct Frame {
    addr: u64,
    hdr: NodeHeader,
    next: u64,
}

/// The cursor: an in-order walk with a stack of (node, slot), reading a
/// node's slots page by page and descending into each child it meets
/// (Lan's O5: the gaps and children of LIPP cost leaf blocks per scan).
#[derive(Debug)]
pub(crate) struct LippCursor<'a> {
    t: &'a LippIndex,
    stack: Vec<Frame>,
    pages: Pages,
    /// Whether a seek happened (a fresh cursor starts before the first record).
    started: bool,
}

impl<'a> LippCursor<'a> {
    pub(crate) fn new(t: &'a LippIndex) -> Self {
        LippCursor {
            t,
            stack: Vec::new(),
            pages: Pages::new(CURSOR_PAGES),
            started: false,
        }
    }

    /// Descends as a lookup of `key` does, leaving on the stack each node
    /// passed with the slot after the one taken, and the last node at the
    /// slot holding `key` (or the one after, when that slot holds a smaller
    /// key or nothing).
    pub(super) fn seek_locked(&mut self, st: &State, key: u64) -> Result<()> {
        let t = self.t;
        let meta = st.meta;
        self.stack.clear();
        self.pages.clear();
        self.started = true;
        let mut addr = meta.root;
        loop {
            if self.stack.len() >= MAX_DEPTH {
                return Err(t.corrupt(page_of(t.page_size, addr), "LIPP path deeper than the limit"));
            }
            let hdr = t.header(&meta, &mut self.pages, addr)?;
            let s = hdr.model.slot(key, hdr.slots);
            let slot = t.slot(&meta, &mut self.pages, addr, s)?;
            let next = match slot {
                Slot::Data(k, _) if k >= key => s,
                _ => s + 1,
            };
            self.stack.push(Frame { addr, hdr, next });
            match slot {
                Slot::Node(c) => addr = c,
                _ => return Ok(()),
            }
        }
    }

    pub(super) fn next_locked(&mut self, st: &State) -> Result<Option<Record>> {
        let t = self.t;
        let meta = st.meta;
        if !self.started {
            self.seek_locked(st, 0)?;
        }
        while let Some(f) = self.stack.last_mut() {
            if f.next >= f.hdr.slots {
                self.stack.pop();
                continue;
            }
            let (addr, i) = (f.addr, f.next);
            f.next += 1;
            match t.slot(&meta, &mut self.pages, addr, i)? {
                Slot::Null => {}
                Slot::Data(k, v) => return Ok(Some((k, v))),
                Slot::Node(c) => {
                    if self.stack.len() >= MAX_DEPTH {
                        return Err(t.corrupt(page_of(t.page_size, c), "LIPP path deeper than the limit"));
                    }
                    let hdr = t.header(&meta, &mut self.pages, c)?;
                    self.stack.push(Frame {
                        addr: c,
                        hdr,
                        next: 0,
                    });
                }
            }
        }
        Ok(None)
    }
}

impl Cursor for LippCursor<'_> {
    /// Positions at the first record `>= key`: the pages a lookup of `key`
    /// reads.
    fn seek(&mut self, key: u64) -> Result<()> {
        let st = self.t.state.read();
        self.seek_locked(&st, key)
    }

    /// The next record: the slots after the position, page by page, each
    /// child entered at its first slot and left at its last.
    fn next(&mut self) -> Result<Option<Record>> {
        let st = self.t.state.read();
        self.next_locked(&st)
    }
}

/// A key of a batch on its way down: the node it is at, and the pages its
/// lookup touched, in order.
#[derive(Debug)]
struct Walk {
    key: u64,
    addr: u64,
    /// Nodes passed, with the slot after the one taken (a cursor's stack).
    stack: Vec<Frame>,
    /// The slot that ended the path (`None` while open).
    end: Option<Slot>,
    touched: Vec<u64>,
}

/// Batched lookups: one round per level of the keys still open, each with
/// one batch of the node headers not resident and one of the slots the
/// models give; a page read once serves every key of the batch.
impl LippIndex {
    /// Reads, in one batch, the node pages covering `[addr, addr + len)` for
    /// each of `want` that are not all in `pages` (identical runs once), and
    /// puts them in `pages`.
    fn load_many(&self, meta: &Meta, pages: &mut Pages, role: Role, want: &[(u64, u64)]) -> Result<()> {
        let ps = self.page_size;
        let runs: Vec<(u64, u64)> = want
            .iter()
            .filter(|&&(_, len)| len > 0)
            .map(|&(a, len)| (page_of(ps, a), page_of(ps, a + len - 1)))
            .filter(|&(f, l)| !(f..=l).all(|p| pages.has(p)))
            .collect();
        let (mut distinct, _) = runs_of(&runs);
        let mut seen = HashSet::new();
        distinct.retain(|r| seen.insert(*r));
        for &(first, last) in &distinct {
            if first == 0 || last < first || last >= meta.space.page_count {
                return Err(self.corrupt(
                    first,
                    format!(
                        "LIPP node pages {first}..={last} outside the {} pages",
                        meta.space.page_count
                    ),
                ));
            }
        }
        let reqs: Vec<(u64, u64)> = distinct.iter().map(|&(f, l)| (f, l - f + 1)).collect();
        let bufs = self.pager.read_runs_many(role, &reqs)?;
        for (&(first, _), buf) in distinct.iter().zip(&bufs) {
            for (j, pg) in buf.chunks(ps).enumerate() {
                page::open_typed(pg, first + j as u64, self.pager.name(), PageType::LippNode)?;
                pages.put(first + j as u64, pg.to_vec());
            }
        }
        Ok(())
    }

    /// Walks every key of `keys` (ascending, distinct) down to the slot
    /// that ends its path, level by level, each level's header and slot
    /// reads in one batch each; every page read is kept in `pages` for the
    /// whole batch.
    fn walk_many(&self, meta: &Meta, keys: &[u64], pages: &mut Pages) -> Result<Vec<Walk>> {
        let ps = self.page_size;
        let mut walks: Vec<Walk> = keys
            .iter()
            .map(|&key| Walk {
                key,
                addr: meta.root,
                stack: Vec::new(),
                end: None,
                touched: Vec::new(),
            })
            .collect();
        let span = |a: u64, len: u64| page_of(ps, a)..=page_of(ps, a + len - 1);
        for _ in 0..MAX_DEPTH {
            let open: Vec<usize> = (0..walks.len())
                .filter(|&i| walks.get(i).is_some_and(|w| w.end.is_none()))
                .collect();
            if open.is_empty() {
                return Ok(walks);
            }
            let cached = |addr: u64| {
                self.headers
                    .as_ref()
                    .is_some_and(|c| c.lock().contains_key(&addr))
            };
            let want: Vec<(u64, u64)> = open
                .iter()
                .filter_map(|&i| walks.get(i))
                .filter(|w| !cached(w.addr))
                .map(|w| (w.addr, NODE_HDR_LEN))
                .collect();
            self.load_many(meta, pages, Role::Inner, &want)?;
            let mut slots = Vec::with_capacity(open.len());
            for &i in &open {
                let w = walks.get_mut(i).ok_or_else(|| Error::invalid("lookup lost"))?;
                if !cached(w.addr) {
                    w.touched.extend(span(w.addr, NODE_HDR_LEN));
                }
                let hdr = self.header(meta, pages, w.addr)?;
                let s = hdr.model.slot(w.key, hdr.slots);
                slots.push((hdr, s));
            }
            let want: Vec<(u64, u64)> = open
                .iter()
                .zip(&slots)
                .filter_map(|(&i, &(_, s))| Some((NodeHeader::slot_addr(walks.get(i)?.addr, s), SLOT_LEN)))
                .collect();
            self.load_many(meta, pages, Role::Leaf, &want)?;
            for (&i, (hdr, s)) in open.iter().zip(slots) {
                let w = walks.get_mut(i).ok_or_else(|| Error::invalid("lookup lost"))?;
                self.node_visits
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                w.touched.extend(span(NodeHeader::slot_addr(w.addr, s), SLOT_LEN));
                let slot = self.slot(meta, pages, w.addr, s)?;
                let next = match slot {
                    Slot::Data(k, _) if k >= w.key => s,
                    _ => s + 1,
                };
                w.stack.push(Frame {
                    addr: w.addr,
                    hdr,
                    next,
                });
                match slot {
                    Slot::Node(c) => w.addr = c,
                    other => w.end = Some(other),
                }
            }
        }
        match walks.iter().find(|w| w.end.is_none()) {
            Some(w) => Err(self.corrupt(page_of(ps, w.addr), "LIPP path deeper than the limit")),
            None => Ok(walks),
        }
    }

    /// [`crate::index::Index::get`] of each of `keys` (ascending, distinct):
    /// [`LippIndex::walk_many`].
    pub(super) fn get_many_impl(&self, keys: &[u64]) -> Result<Vec<Option<u64>>> {
        let st = self.state.read();
        let meta = st.meta;
        self.lookups
            .fetch_add(keys.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let mut pages = Pages::unbounded();
        let walks = self.walk_many(&meta, keys, &mut pages)?;
        Ok(walks
            .iter()
            .map(|w| match w.end {
                Some(Slot::Data(k, v)) if k == w.key => Some(v),
                _ => None,
            })
            .collect())
    }

    /// [`crate::index::Index::lower_bound`] of each of `keys` (ascending,
    /// distinct): [`LippIndex::walk_many`], then each key's cursor from the
    /// node stack of its walk, holding the pages its own seek would hold;
    /// the slots after the position are read key by key as the cursor
    /// reads them.
    pub(super) fn lower_bound_many_impl(&self, keys: &[u64]) -> Result<Vec<Option<Record>>> {
        let st = self.state.read();
        let meta = st.meta;
        let mut pages = Pages::unbounded();
        let walks = self.walk_many(&meta, keys, &mut pages)?;
        let mut answers = Vec::with_capacity(keys.len());
        for w in walks {
            let mut c = LippCursor::new(self);
            for &p in &w.touched {
                if let Some(b) = pages.get(p) {
                    c.pages.put(p, b.to_vec());
                }
            }
            c.stack = w.stack;
            c.started = true;
            answers.push(c.next_locked(&st)?);
        }
        Ok(answers)
    }
}
