//! Lookups, the cursor, inserts, deletes, the resegment, directory updates
//! and `verify` of the FITing-tree (see the module documentation for the
//! I/O of each).

use std::borrow::Cow;
use std::collections::HashMap;

use super::format::{
    DirNode, Entry, Meta, SegInfo, SegPage, buffer_pages, decode_buffer, dir_capacity, encode_buffer,
    encode_seg_page, patch_seg_head, seg_capacity, seg_remove, seg_set_value,
};
use super::{FitingTree, State};
use crate::index::batch::runs_of;
use crate::index::{Cursor, Record};
use crate::model::optimal_pla;
use crate::pager::{NO_PAGE, Role, WriteState};
use crate::storage::AlignedBuf;
use crate::{Error, Result};

/// Path from the directory root to a segment entry: (node page, entry index).
type Path = Vec<(u64, usize)>;

/// What [`FitingTree::verify`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// Directory levels.
    pub height: u32,
    /// Directory nodes reached from the root.
    pub dir_nodes: u64,
    /// Segments.
    pub segments: u64,
    /// Segment data pages.
    pub data_pages: u64,
    /// Insert-buffer pages.
    pub buffer_pages: u64,
    /// Live records (segments and buffers).
    pub records: u64,
    /// Records waiting in buffers.
    pub buffered: u64,
    /// Pages on the free list.
    pub free_pages: u64,
    /// Pages in the file (checkpoint page included).
    pub pages: u64,
}

/// Where [`FitingTree::probe`] found a key.
#[derive(Debug, Clone, Copy)]
struct Hit {
    /// Page of the window.
    j: usize,
    page_no: u64,
    slot: usize,
    count: usize,
    next: u64,
    value: u64,
}

/// A position in a segment: the page and the records from a slot on.
#[derive(Debug, Default)]
struct SegPos {
    /// Page index in the segment.
    page: u32,
    /// Records of that page from the position on.
    records: Vec<Record>,
}

impl FitingTree {
    fn corrupt(&self, page: u64, what: impl Into<String>) -> Error {
        Error::corruption(self.name(), page, what)
    }

    /// Pages of one insert buffer.
    fn buffer_run(&self, meta: &Meta) -> usize {
        buffer_pages(self.page_size, meta.buffer as usize)
    }

    /// Reads and decodes every directory node (breadth-first, role `Inner`).
    pub(super) fn load_directory(&self, meta: &Meta) -> Result<HashMap<u64, DirNode>> {
        let mut nodes = HashMap::new();
        let mut level = vec![meta.root];
        let mut buf = AlignedBuf::zeroed(self.page_size);
        for depth in 0..meta.height {
            let mut next = Vec::new();
            for page in level {
                if page == NO_PAGE || page >= meta.space.page_count || nodes.contains_key(&page) {
                    return Err(self.corrupt(page, "directory link out of place"));
                }
                self.pager.read_page(Role::Inner, page, &mut buf)?;
                let node = DirNode::decode(&buf, page, self.name())?;
                if node.leaf != (depth + 1 == meta.height) {
                    return Err(self.corrupt(page, "directory node at the wrong level"));
                }
                if !node.leaf {
                    next.extend(node.entries.iter().map(|e| e.page));
                }
                nodes.insert(page, node);
            }
            level = next;
        }
        Ok(nodes)
    }

    /// Directory node `page`: resident, or read (role `Inner`) and decoded.
    fn node<'a>(&self, st: &'a State, page: u64) -> Result<Cow<'a, DirNode>> {
        if let Some(m) = &st.resident {
            return m
                .get(&page)
                .map(Cow::Borrowed)
                .ok_or_else(|| self.corrupt(page, "link to a page that is not a directory node"));
        }
        if page == NO_PAGE || page >= st.meta.space.page_count {
            return Err(self.corrupt(page, "directory link outside the file"));
        }
        let mut buf = AlignedBuf::zeroed(self.page_size);
        self.pager.read_page(Role::Inner, page, &mut buf)?;
        Ok(Cow::Owned(DirNode::decode(&buf, page, self.name())?))
    }

    /// Descends to the segment entry routing `key`, recording the path.
    fn find(&self, st: &State, key: u64, path: &mut Path) -> Result<Entry> {
        path.clear();
        let mut page = st.meta.root;
        for depth in 0..st.meta.height {
            let node = self.node(st, page)?;
            let last = depth + 1 == st.meta.height;
            if node.leaf != last {
                return Err(self.corrupt(page, "directory node at the wrong level"));
            }
            let i = node.route(key);
            let e = *node
                .entries
                .get(i)
                .ok_or_else(|| self.corrupt(page, "empty directory node"))?;
            path.push((page, i));
            if last {
                if e.page >= st.meta.space.page_count {
                    return Err(self.corrupt(page, "segment outside the file"));
                }
                return Ok(e);
            }
            page = e.page;
        }
        Err(self.corrupt(st.meta.root, "directory without segments"))
    }

    /// Reads segment pages `first..=last` of the segment at `head` in one
    /// call (role `Leaf`).
    fn read_seg(&self, head: u64, first: u64, last: u64) -> Result<AlignedBuf> {
        let n = (last.saturating_sub(first) + 1) as usize;
        let mut buf = AlignedBuf::zeroed(n * self.page_size);
        self.pager.read_page(Role::Leaf, head + first, &mut buf)?;
        Ok(buf)
    }

    /// Verifies page `j` (segment page index `index`) of a buffer read by
    /// [`Self::read_seg`] starting at segment page `first`.
    fn seg_page<'b>(&self, buf: &'b [u8], head: u64, first: u64, j: usize) -> Result<SegPage<'b>> {
        let ps = self.page_size;
        let bytes = buf
            .get(j * ps..(j + 1) * ps)
            .ok_or_else(|| Error::invalid("segment page outside the read"))?;
        let no = head + first + j as u64;
        let p = SegPage::open(bytes, no, self.name())?;
        if u64::from(p.index) != first + j as u64 {
            return Err(self.corrupt(
                no,
                format!("segment page {} where {} belongs", p.index, first + j as u64),
            ));
        }
        Ok(p)
    }

    /// The insert buffer of segment `head` starting at page `first`.
    fn read_buffer(&self, meta: &Meta, head: u64, first: u64) -> Result<Vec<Record>> {
        let pages = self.check_buffer(meta, head, first)?;
        let mut buf = AlignedBuf::zeroed(pages as usize * self.page_size);
        self.pager.read_page(Role::Leaf, first, &mut buf)?;
        self.decode_buffer_of(meta, &buf, head, first)
    }

    /// Checks that the insert buffer of segment `head` starting at page
    /// `first` lies in the file; returns its pages.
    fn check_buffer(&self, meta: &Meta, head: u64, first: u64) -> Result<u64> {
        let pages = self.buffer_run(meta) as u64;
        if first == NO_PAGE || first.saturating_add(pages) > meta.space.page_count {
            return Err(self.corrupt(head, "insert buffer outside the file"));
        }
        Ok(pages)
    }

    /// Decodes the insert buffer of segment `head` read from page `first`.
    fn decode_buffer_of(&self, meta: &Meta, buf: &[u8], head: u64, first: u64) -> Result<Vec<Record>> {
        let recs = decode_buffer(buf, self.page_size, first, head, self.name())?;
        if recs.len() > meta.buffer as usize {
            return Err(self.corrupt(first, "insert buffer holds more than its capacity"));
        }
        Ok(recs)
    }

    /// Checks the segment entry's pages lie in the file.
    fn check_entry(&self, meta: &Meta, e: &Entry) -> Result<()> {
        if e.page.saturating_add(u64::from(e.data_pages)) > meta.space.page_count {
            return Err(self.corrupt(e.page, "segment runs past the end of the file"));
        }
        Ok(())
    }

    /// Reads the window of `key` in segment `e` (one call) and finds the
    /// key in it: the pages read, and the key's place if it is there.
    fn probe(&self, meta: &Meta, e: &Entry, key: u64) -> Result<(AlignedBuf, Option<Hit>)> {
        let (p0, p1) = self.window_of(meta, e, key)?;
        let w = self.read_seg(e.page, p0, p1)?;
        let hit = self.probe_in(e, p0, p1, &w, key)?;
        Ok((w, hit))
    }

    /// The first and last segment page of `key`'s window in segment `e`,
    /// after checking that the segment lies in the file.
    fn window_of(&self, meta: &Meta, e: &Entry, key: u64) -> Result<(u64, u64)> {
        self.check_entry(meta, e)?;
        Ok(e.window(key, u64::from(meta.epsilon), seg_capacity(self.page_size)))
    }

    /// Finds `key` in the window `p0..=p1` of segment `e`, read into `w`.
    fn probe_in(&self, e: &Entry, p0: u64, p1: u64, w: &[u8], key: u64) -> Result<Option<Hit>> {
        for j in 0..=p1.saturating_sub(p0) as usize {
            let p = self.seg_page(w, e.page, p0, j)?;
            let slot = p.lower_bound(key);
            if let Some((k, value)) = p.record(slot) {
                if k == key {
                    let hit = Hit {
                        j,
                        page_no: e.page + p0 + j as u64,
                        slot,
                        count: p.count(),
                        next: p.next,
                        value,
                    };
                    return Ok(Some(hit));
                }
            }
        }
        Ok(None)
    }

    /// The bytes of page `j` of a window read by [`Self::probe`].
    fn window_page<'b>(&self, w: &'b mut AlignedBuf, j: usize) -> Result<&'b mut [u8]> {
        let ps = self.page_size;
        w.get_mut(j * ps..(j + 1) * ps)
            .ok_or_else(|| Error::invalid("segment page outside the read"))
    }

    pub(super) fn get_impl(&self, key: u64) -> Result<Option<u64>> {
        let st = self.state.read();
        let mut path = Path::new();
        let e = self.find(&st, key, &mut path)?;
        if let (_, Some(hit)) = self.probe(&st.meta, &e, key)? {
            return Ok(Some(hit.value));
        }
        if e.buffer == NO_PAGE {
            return Ok(None);
        }
        let b = self.read_buffer(&st.meta, e.page, e.buffer)?;
        Ok(b.binary_search_by_key(&key, |r| r.0)
            .ok()
            .and_then(|i| b.get(i))
            .map(|r| r.1))
    }

    /// Position of the first record `>= key` among the segment's pages (not
    /// its buffer), and the segment's sibling link if the head page was read.
    fn seg_lower_bound(&self, meta: &Meta, e: &Entry, key: u64) -> Result<(Option<SegPos>, Option<u64>)> {
        let (p0, p1) = self.window_of(meta, e, key)?;
        let buf = self.read_seg(e.page, p0, p1)?;
        self.seg_lower_bound_in(e, key, p0, p1, &buf)
    }

    /// [`Self::seg_lower_bound`] with the window `p0..=p1` already read into
    /// `buf`: reads only the pages before or after it that the answer needs.
    fn seg_lower_bound_in(
        &self,
        e: &Entry,
        key: u64,
        p0: u64,
        p1: u64,
        buf: &[u8],
    ) -> Result<(Option<SegPos>, Option<u64>)> {
        let mut next = None;
        let mut found: Option<SegPos> = None;
        let mut seen_smaller = false;
        for j in 0..=p1.saturating_sub(p0) as usize {
            let p = self.seg_page(buf, e.page, p0, j)?;
            if p.index == 0 {
                next = Some(p.next);
            }
            let (pos, smaller) = seg_pos(&p, p0 + j as u64, key);
            seen_smaller |= smaller;
            if pos.is_some() {
                found = pos;
                break;
            }
        }
        // Nothing in the window is below `key`: records of earlier pages may
        // still be >= key (a model that is not monotone, or empty pages).
        let mut j = p0;
        while !seen_smaller && j > 0 {
            j -= 1;
            let b = self.read_seg(e.page, j, j)?;
            let (pos, smaller) = seg_pos(&self.seg_page(&b, e.page, j, 0)?, j, key);
            if pos.is_some() {
                found = pos;
            }
            seen_smaller = smaller;
        }
        let mut j = p1 + 1;
        while found.is_none() && j < u64::from(e.data_pages) {
            let b = self.read_seg(e.page, j, j)?;
            found = seg_pos(&self.seg_page(&b, e.page, j, 0)?, j, key).0;
            j += 1;
        }
        Ok((found, next))
    }

    /// Reads the head page of the segment at `head`: its fields.
    fn seg_head(&self, meta: &Meta, head: u64) -> Result<(SegInfo, Vec<Record>)> {
        if head == NO_PAGE || head >= meta.space.page_count {
            return Err(self.corrupt(head, "sibling link outside the file"));
        }
        let b = self.read_seg(head, 0, 0)?;
        let p = self.seg_page(&b, head, 0, 0)?;
        let info = p.info();
        if info.data_pages == 0 || head.saturating_add(u64::from(info.data_pages)) > meta.space.page_count {
            return Err(self.corrupt(head, "segment runs past the end of the file"));
        }
        Ok((info, p.records().collect()))
    }

    pub(super) fn lower_bound_impl(&self, key: u64) -> Result<Option<Record>> {
        let st = self.state.read();
        let mut c = FitingCursor::new(self);
        c.seek_locked(&st, key)?;
        c.next_locked(&st)
    }

    /// Runs a write under the exclusive lock: refused once poisoned; an
    /// error poisons.
    pub(super) fn write_op<R>(&self, f: impl FnOnce(&FitingTree, &mut State) -> Result<R>) -> Result<R> {
        // Any page may have been written (an update in place changes no
        // count): the next sync or drop checkpoints.
        WriteState::write(&mut *self.state.write(), |st| f(self, st))
    }

    /// Takes `k` contiguous pages ([`crate::pager::Pager::allocate_run`]).
    fn alloc_run(&self, st: &mut State, k: usize) -> Result<u64> {
        self.pager.allocate_run(&mut st.meta.space, k)
    }

    /// Frees pages `first..first + k`.
    fn free_run(&self, st: &mut State, first: u64, k: u64) -> Result<()> {
        self.pager.free_run(&mut st.meta.space, first, k)
    }

    /// Writes directory node `node` as page `page` (role `Inner`) and keeps
    /// the resident copy current.
    fn write_node(&self, st: &mut State, page: u64, node: DirNode) -> Result<()> {
        let mut buf = AlignedBuf::zeroed(self.page_size);
        node.encode(&mut buf, page)?;
        self.pager.write_page(Role::Inner, page, &buf)?;
        if let Some(m) = &mut st.resident {
            m.insert(page, node);
        }
        Ok(())
    }

    /// Writes `records` as the insert buffer at `first` of segment `head`.
    fn write_buffer(&self, st: &State, head: u64, first: u64, records: &[Record]) -> Result<()> {
        let mut buf = AlignedBuf::zeroed(self.buffer_run(&st.meta) * self.page_size);
        encode_buffer(&mut buf, self.page_size, first, head, records)?;
        self.pager.write_page(Role::Leaf, first, &buf)
    }

    pub(super) fn insert_locked(&self, st: &mut State, key: u64, value: u64) -> Result<Option<u64>> {
        let mut path = Path::new();
        let e = self.find(st, key, &mut path)?;
        if let (mut w, Some(hit)) = self.probe(&st.meta, &e, key)? {
            let page = self.window_page(&mut w, hit.j)?;
            seg_set_value(page, hit.page_no, hit.count, hit.slot, value, hit.next);
            self.pager.write_page(Role::Leaf, hit.page_no, page)?;
            return Ok(Some(hit.value));
        }
        if e.buffer == NO_PAGE {
            let run = self.buffer_run(&st.meta);
            let first = self.alloc_run(st, run)?;
            self.write_buffer(st, e.page, first, &[(key, value)])?;
            let mut hb = self.read_seg(e.page, 0, 0)?;
            let hp = self.seg_page(&hb, e.page, 0, 0)?;
            let (count, next) = (hp.count(), hp.next);
            patch_seg_head(&mut hb, e.page, count, first, next);
            self.pager.write_page(Role::Leaf, e.page, &hb)?;
            let (leaf, idx) = *path
                .last()
                .ok_or_else(|| Error::invalid("empty directory path"))?;
            let mut node = self.node(st, leaf)?.into_owned();
            let slot = node
                .entries
                .get_mut(idx)
                .ok_or_else(|| self.corrupt(leaf, "directory entry vanished"))?;
            slot.buffer = first;
            self.write_node(st, leaf, node)?;
            st.meta.n += 1;
            return Ok(None);
        }
        let mut recs = self.read_buffer(&st.meta, e.page, e.buffer)?;
        match recs.binary_search_by_key(&key, |r| r.0) {
            Ok(i) => {
                let slot = recs.get_mut(i).ok_or_else(|| Error::invalid("buffer slot"))?;
                let old = slot.1;
                slot.1 = value;
                self.write_buffer(st, e.page, e.buffer, &recs)?;
                Ok(Some(old))
            }
            Err(i) => {
                recs.insert(i, (key, value));
                if recs.len() <= st.meta.buffer as usize {
                    self.write_buffer(st, e.page, e.buffer, &recs)?;
                } else {
                    self.resegment(st, &path, &e, &recs)?;
                }
                st.meta.n += 1;
                Ok(None)
            }
        }
    }

    pub(super) fn delete_locked(&self, st: &mut State, key: u64) -> Result<bool> {
        let mut path = Path::new();
        let e = self.find(st, key, &mut path)?;
        if let (mut w, Some(hit)) = self.probe(&st.meta, &e, key)? {
            let page = self.window_page(&mut w, hit.j)?;
            seg_remove(page, hit.page_no, hit.count, hit.slot, hit.next)?;
            self.pager.write_page(Role::Leaf, hit.page_no, page)?;
            st.meta.n -= 1;
            return Ok(true);
        }
        if e.buffer == NO_PAGE {
            return Ok(false);
        }
        let mut recs = self.read_buffer(&st.meta, e.page, e.buffer)?;
        let Ok(i) = recs.binary_search_by_key(&key, |r| r.0) else {
            return Ok(false);
        };
        recs.remove(i);
        self.write_buffer(st, e.page, e.buffer, &recs)?;
        st.meta.n -= 1;
        Ok(true)
    }

    /// Head page of the segment before the one at the end of `path`
    /// (`None` for the first segment).
    fn prev_segment(&self, st: &State, path: &Path) -> Result<Option<u64>> {
        for level in (0..path.len()).rev() {
            let Some(&(page, idx)) = path.get(level) else {
                break;
            };
            if idx == 0 {
                continue;
            }
            let node = self.node(st, page)?;
            let mut e = *node
                .entries
                .get(idx - 1)
                .ok_or_else(|| self.corrupt(page, "directory entry vanished"))?;
            for _ in level + 1..path.len() {
                let n = self.node(st, e.page)?;
                e = *n
                    .entries
                    .last()
                    .ok_or_else(|| self.corrupt(e.page, "empty directory node"))?;
            }
            return Ok(Some(e.page));
        }
        Ok(None)
    }

    /// The resegment: merges segment `e`'s records with `buffered` (its
    /// buffer plus the new record, sorted), refits them with ε, writes the
    /// new segments, relinks the previous segment, updates the directory and
    /// frees the old pages.
    fn resegment(&self, st: &mut State, path: &Path, e: &Entry, buffered: &[Record]) -> Result<()> {
        self.pager.blocks().smo();
        let ps = self.page_size;
        let cap = seg_capacity(ps);
        let all = self.read_seg(e.page, 0, u64::from(e.data_pages) - 1)?;
        let mut seg: Vec<Record> = Vec::new();
        let mut old_next = NO_PAGE;
        for j in 0..e.data_pages as usize {
            let p = self.seg_page(&all, e.page, 0, j)?;
            if j == 0 {
                old_next = p.next;
            }
            seg.extend(p.records());
        }
        let mut recs = Vec::with_capacity(seg.len() + buffered.len());
        let (mut a, mut b) = (seg.iter().peekable(), buffered.iter().peekable());
        loop {
            let r = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 < y.0 => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            recs.extend(r.copied());
        }
        let keys: Vec<u64> = recs.iter().map(|r| r.0).collect();
        let segs = optimal_pla(&keys, u64::from(st.meta.epsilon));
        let mut entries = Vec::with_capacity(segs.len());
        for s in &segs {
            let pages = s.len.div_ceil(cap).max(1);
            let head = self.alloc_run(st, pages)?;
            entries.push(Entry {
                key: if entries.is_empty() { e.key } else { s.first_key },
                page: head,
                first_key: s.first_key,
                slope: s.slope,
                intercept: s.intercept - s.start as f64,
                data_pages: u32::try_from(pages).map_err(|_| Error::invalid("segment too long"))?,
                buffer: NO_PAGE,
            });
        }
        for (i, (s, en)) in segs.iter().zip(&entries).enumerate() {
            let next = entries.get(i + 1).map_or(old_next, |x| x.page);
            let info = SegInfo::of(en, next);
            let part = recs.get(s.start..s.end()).unwrap_or(&[]);
            let mut buf = AlignedBuf::zeroed(en.data_pages as usize * ps);
            for (j, page) in buf.chunks_exact_mut(ps).enumerate() {
                let rp = part.get(j * cap..).unwrap_or(&[]);
                let rp = rp.get(..cap.min(rp.len())).unwrap_or(&[]);
                encode_seg_page(page, en.page + j as u64, j as u32, &info, rp)?;
            }
            self.pager.write_page(Role::Leaf, en.page, &buf)?;
        }
        let first_new = entries.first().map_or(NO_PAGE, |x| x.page);
        if let Some(prev) = self.prev_segment(st, path)? {
            let mut hb = self.read_seg(prev, 0, 0)?;
            let hp = self.seg_page(&hb, prev, 0, 0)?;
            let (count, buffer) = (hp.count(), hp.info().buffer);
            if hp.next != e.page {
                return Err(self.corrupt(prev, "sibling link does not lead to the next segment"));
            }
            patch_seg_head(&mut hb, prev, count, buffer, first_new);
            self.pager.write_page(Role::Leaf, prev, &hb)?;
        }
        let added = entries.len() as u64;
        self.replace_entry(st, path, entries)?;
        self.free_run(st, e.page, u64::from(e.data_pages))?;
        if e.buffer != NO_PAGE {
            let run = self.buffer_run(&st.meta) as u64;
            self.free_run(st, e.buffer, run)?;
        }
        st.meta.segments = st.meta.segments - 1 + added;
        Ok(())
    }

    /// Replaces the segment entry at the end of `path` by `repl` (the first
    /// keeps the old routing key), splitting full directory nodes up to the
    /// root (one `smo` each) and growing a new root when the root splits.
    fn replace_entry(&self, st: &mut State, path: &Path, mut repl: Vec<Entry>) -> Result<()> {
        let cap = dir_capacity(self.page_size);
        for level in (0..path.len()).rev() {
            let Some(&(page, idx)) = path.get(level) else {
                break;
            };
            let mut node = self.node(st, page)?.into_owned();
            let old_key = node
                .entries
                .get(idx)
                .map(|x| x.key)
                .ok_or_else(|| self.corrupt(page, "directory entry vanished"))?;
            if let Some(first) = repl.first_mut() {
                first.key = old_key;
            }
            node.entries.splice(idx..=idx, repl);
            if node.entries.len() <= cap {
                return self.write_node(st, page, node);
            }
            repl = self.split_node(st, Some(page), node)?;
        }
        // The root split: grow new roots until one node holds the level.
        loop {
            let node = DirNode {
                leaf: false,
                entries: repl,
            };
            if node.entries.len() <= cap {
                let root = self.alloc_run(st, 1)?;
                self.write_node(st, root, node)?;
                st.meta.root = root;
                st.meta.height += 1;
                st.meta.dir_nodes += 1;
                return Ok(());
            }
            repl = self.split_node(st, None, node)?;
            st.meta.height += 1;
        }
    }

    /// Writes `node` (over full) as several nodes of at most the capacity,
    /// the first at `page` if given; returns the entries pointing at them.
    fn split_node(&self, st: &mut State, page: Option<u64>, node: DirNode) -> Result<Vec<Entry>> {
        self.pager.blocks().smo();
        let cap = dir_capacity(self.page_size);
        let parts = node.entries.len().div_ceil(cap);
        let per = node.entries.len().div_ceil(parts.max(1)).max(1);
        let chunks: Vec<Vec<Entry>> = node.entries.chunks(per).map(<[Entry]>::to_vec).collect();
        let mut pages = Vec::with_capacity(chunks.len());
        for i in 0..chunks.len() {
            match (i, page) {
                (0, Some(p)) => pages.push(p),
                _ => {
                    pages.push(self.alloc_run(st, 1)?);
                    st.meta.dir_nodes += 1;
                }
            }
        }
        let mut out = Vec::with_capacity(chunks.len());
        // New pages first, the reused page last.
        for (c, &p) in chunks.iter().zip(&pages).rev() {
            out.push(Entry::child(c.first().map_or(0, |x| x.key), p));
            self.write_node(
                st,
                p,
                DirNode {
                    leaf: node.leaf,
                    entries: c.clone(),
                },
            )?;
        }
        out.reverse();
        Ok(out)
    }

    /// Checks the whole file: directory shape and keys, every segment's
    /// pages, head fields, sibling links and error bound (every record lies
    /// on a page its window covers), every buffer, the record count and the
    /// page accounting (checkpoint + directory + segments + buffers + free
    /// list = pages).
    ///
    /// Errors: [`Error::Corruption`] naming the file and page.
    pub fn verify(&self) -> Result<VerifyReport> {
        let st = self.state.read();
        let meta = st.meta;
        let mut r = VerifyReport {
            height: meta.height,
            ..VerifyReport::default()
        };
        // Depth-first, left to right: collect the segment entries in order
        // with the routing bound above each.
        let mut segs: Vec<Entry> = Vec::new();
        let mut stack: Vec<(u64, u32, Option<u64>)> = vec![(meta.root, 0, None)];
        let mut seen = std::collections::HashSet::new();
        while let Some((page, depth, parent_key)) = stack.pop() {
            if !seen.insert(page) {
                return Err(self.corrupt(page, "directory node reached twice"));
            }
            let node = self.node(&st, page)?;
            r.dir_nodes += 1;
            if node.leaf != (depth + 1 == meta.height) {
                return Err(self.corrupt(page, "directory node at the wrong level"));
            }
            if let (Some(k), Some(f)) = (parent_key, node.entries.first()) {
                if f.key != k {
                    return Err(self.corrupt(page, "first key differs from the parent's entry"));
                }
            }
            if node.leaf {
                segs.extend(node.entries.iter().copied());
            } else {
                for e in node.entries.iter().rev() {
                    stack.push((e.page, depth + 1, Some(e.key)));
                }
            }
        }
        if r.dir_nodes != u64::from(meta.dir_nodes) {
            return Err(self.corrupt(
                meta.root,
                format!("{} directory nodes, {} counted", r.dir_nodes, meta.dir_nodes),
            ));
        }
        if segs
            .windows(2)
            .any(|w| w.first().map(|a| a.key) >= w.get(1).map(|b| b.key))
        {
            return Err(self.corrupt(meta.root, "segment keys not increasing across nodes"));
        }
        let cap = seg_capacity(self.page_size);
        let run = self.buffer_run(&meta) as u64;
        let eps = u64::from(meta.epsilon);
        let mut last_key: Option<u64> = None;
        for (i, e) in segs.iter().enumerate() {
            self.check_entry(&meta, e)?;
            let hi = segs.get(i + 1).map(|x| x.key);
            let next = segs.get(i + 1).map_or(NO_PAGE, |x| x.page);
            let all = self.read_seg(e.page, 0, u64::from(e.data_pages) - 1)?;
            let mut keys = Vec::new();
            for j in 0..e.data_pages as usize {
                let p = self.seg_page(&all, e.page, 0, j)?;
                let no = e.page + j as u64;
                let link = if j == 0 { next } else { NO_PAGE };
                if j == 0 && !p.info().matches(e) {
                    return Err(self.corrupt(no, "segment head differs from its directory entry"));
                }
                if p.next != link {
                    return Err(self.corrupt(no, "sibling link does not lead to the next segment"));
                }
                for (k, _) in p.records() {
                    if last_key.is_some_and(|l| l >= k) || k < e.key || hi.is_some_and(|h| k >= h) {
                        return Err(self.corrupt(no, format!("key {k} out of order or outside its segment")));
                    }
                    let (w0, w1) = e.window(k, eps, cap);
                    if !(w0..=w1).contains(&(j as u64)) {
                        return Err(self.corrupt(no, format!("key {k} outside its error window")));
                    }
                    last_key = Some(k);
                    keys.push(k);
                }
                r.records += p.count() as u64;
            }
            r.data_pages += u64::from(e.data_pages);
            if e.buffer != NO_PAGE {
                let b = self.read_buffer(&meta, e.page, e.buffer)?;
                for &(k, _) in &b {
                    if k < e.key && i > 0 || hi.is_some_and(|h| k >= h) || keys.binary_search(&k).is_ok() {
                        return Err(
                            self.corrupt(e.buffer, format!("buffered key {k} outside its segment or twice"))
                        );
                    }
                }
                r.buffered += b.len() as u64;
                r.records += b.len() as u64;
                r.buffer_pages += run;
            }
        }
        r.segments = segs.len() as u64;
        if r.segments != meta.segments || r.records != meta.n {
            return Err(self.corrupt(
                crate::pager::META_PAGE,
                format!(
                    "{} segments and {} records found, {} and {} counted",
                    r.segments, r.records, meta.segments, meta.n
                ),
            ));
        }
        r.free_pages = self
            .pager
            .check_accounting(&meta.space, r.dir_nodes + r.data_pages + r.buffer_pages)?;
        r.pages = meta.space.page_count;
        Ok(r)
    }
}

/// The records of segment page `page` (verified as `p`) from the first key
/// `>= key` on (`None` if there is none), and whether a record `< key`
/// precedes them on the page.
fn seg_pos(p: &SegPage<'_>, page: u64, key: u64) -> (Option<SegPos>, bool) {
    let i = p.lower_bound(key);
    let pos = (i < p.count()).then(|| SegPos {
        page: page as u32,
        records: (i..p.count()).filter_map(|s| p.record(s)).collect(),
    });
    (pos, i > 0)
}

/// The cursor: segment by segment along the sibling links, each segment's
/// pages merged with its buffer.
#[derive(Debug)]
pub(crate) struct FitingCursor<'a> {
    t: &'a FitingTree,
    /// Current segment's head page, data pages and sibling link.
    head: u64,
    data_pages: u32,
    /// `None` until the head page is read.
    next_seg: Option<u64>,
    /// Next segment page to read.
    page: u32,
    recs: Vec<Record>,
    ri: usize,
    buf: Vec<Record>,
    bi: usize,
    active: bool,
    /// Whether a seek happened (a fresh cursor starts before the first record).
    started: bool,
}

impl<'a> FitingCursor<'a> {
    pub(crate) fn new(t: &'a FitingTree) -> Self {
        FitingCursor {
            t,
            head: NO_PAGE,
            data_pages: 0,
            next_seg: None,
            page: 0,
            recs: Vec::new(),
            ri: 0,
            buf: Vec::new(),
            bi: 0,
            active: false,
            started: false,
        }
    }

    pub(super) fn seek_locked(&mut self, st: &State, key: u64) -> Result<()> {
        let t = self.t;
        let mut path = Path::new();
        let e = t.find(st, key, &mut path)?;
        let (pos, next) = t.seg_lower_bound(&st.meta, &e, key)?;
        let buffered = if e.buffer == NO_PAGE {
            Vec::new()
        } else {
            t.read_buffer(&st.meta, e.page, e.buffer)?
        };
        self.place(&e, key, pos, next, buffered);
        Ok(())
    }

    /// Positions the cursor at `key` in segment `e`, from what a seek read:
    /// the position in the segment's pages and its sibling link
    /// ([`FitingTree::seg_lower_bound`]), and the segment's buffer.
    fn place(
        &mut self,
        e: &Entry,
        key: u64,
        pos: Option<SegPos>,
        next: Option<u64>,
        mut buffered: Vec<Record>,
    ) {
        self.head = e.page;
        self.data_pages = e.data_pages;
        self.next_seg = next;
        match pos {
            Some(p) => {
                self.page = p.page + 1;
                self.recs = p.records;
            }
            None => {
                self.page = e.data_pages;
                self.recs = Vec::new();
            }
        }
        self.ri = 0;
        let i = buffered.partition_point(|r| r.0 < key);
        buffered.drain(..i);
        self.buf = buffered;
        self.bi = 0;
        self.active = true;
        self.started = true;
    }

    pub(super) fn next_locked(&mut self, st: &State) -> Result<Option<Record>> {
        let t = self.t;
        if !self.started {
            self.seek_locked(st, 0)?;
        }
        while self.active {
            if self.ri == self.recs.len() && self.page < self.data_pages {
                let j = u64::from(self.page);
                let b = t.read_seg(self.head, j, j)?;
                let p = t.seg_page(&b, self.head, j, 0)?;
                self.recs = p.records().collect();
                self.ri = 0;
                self.page += 1;
                continue;
            }
            let a = self.recs.get(self.ri).copied();
            let b = self.buf.get(self.bi).copied();
            match (a, b) {
                (Some(x), Some(y)) if x.0 < y.0 => {
                    self.ri += 1;
                    return Ok(Some(x));
                }
                (_, Some(y)) => {
                    self.bi += 1;
                    return Ok(Some(y));
                }
                (Some(x), None) => {
                    self.ri += 1;
                    return Ok(Some(x));
                }
                (None, None) => {
                    let head = match self.next_seg {
                        Some(h) => h,
                        None => t.seg_head(&st.meta, self.head)?.0.next,
                    };
                    if head == NO_PAGE {
                        self.active = false;
                        return Ok(None);
                    }
                    let (info, recs) = t.seg_head(&st.meta, head)?;
                    self.buf = if info.buffer == NO_PAGE {
                        Vec::new()
                    } else {
                        t.read_buffer(&st.meta, head, info.buffer)?
                    };
                    self.bi = 0;
                    self.head = head;
                    self.data_pages = info.data_pages;
                    self.next_seg = Some(info.next);
                    self.recs = recs;
                    self.ri = 0;
                    self.page = 1;
                }
            }
        }
        Ok(None)
    }
}

impl Cursor for FitingCursor<'_> {
    /// Positions at the first record `>= key`: reads like
    /// [`crate::index::Index::lower_bound`] without following segments.
    fn seek(&mut self, key: u64) -> Result<()> {
        let t = self.t;
        let st = t.state.read();
        self.seek_locked(&st, key)
    }

    /// The next record: one segment page per read along a segment; the
    /// next segment's head page (and buffer) through the sibling link.
    fn next(&mut self) -> Result<Option<Record>> {
        let t = self.t;
        let st = t.state.read();
        self.next_locked(&st)
    }
}

/// What [`FitingTree::read_windows`] returns: each key's window `(p0, p1)`,
/// the distinct windows read, and each key's index among them.
type Windows = (Vec<(u64, u64)>, Vec<AlignedBuf>, Vec<usize>);

/// Batched lookups: each round reads, for every key still open, its next
/// pages with many reads in flight ([`crate::pager::Pager::read_runs_many`]).
impl FitingTree {
    /// The segment entry of each of `keys` (ascending): from memory with the
    /// directory resident; otherwise level by level from the root, each
    /// level's distinct nodes read in one batch (keys routed through one
    /// node share its read).
    fn find_many(&self, st: &State, keys: &[u64]) -> Result<Vec<Entry>> {
        let meta = &st.meta;
        if st.resident.is_some() {
            let mut path = Path::new();
            return keys.iter().map(|&k| self.find(st, k, &mut path)).collect();
        }
        let mut at = vec![meta.root; keys.len()];
        let mut found: Vec<Option<Entry>> = vec![None; keys.len()];
        for depth in 0..meta.height {
            let last = depth + 1 == meta.height;
            let (pages, which) = runs_of(&at);
            if let Some(&p) = pages
                .iter()
                .find(|&&p| p == NO_PAGE || p >= meta.space.page_count)
            {
                return Err(self.corrupt(p, "directory link outside the file"));
            }
            let bufs = self.pager.read_pages_many(Role::Inner, &pages)?;
            let nodes = pages
                .iter()
                .zip(&bufs)
                .map(|(&p, b)| DirNode::decode(b, p, self.name()))
                .collect::<Result<Vec<_>>>()?;
            for (((&key, &w), page), slot) in keys.iter().zip(&which).zip(at.iter_mut()).zip(found.iter_mut())
            {
                let (Some(node), Some(&p)) = (nodes.get(w), pages.get(w)) else {
                    return Err(Error::invalid("directory node not read"));
                };
                if node.leaf != last {
                    return Err(self.corrupt(p, "directory node at the wrong level"));
                }
                let e = *node
                    .entries
                    .get(node.route(key))
                    .ok_or_else(|| self.corrupt(p, "empty directory node"))?;
                if last {
                    if e.page >= meta.space.page_count {
                        return Err(self.corrupt(p, "segment outside the file"));
                    }
                    *slot = Some(e);
                } else {
                    *page = e.page;
                }
            }
        }
        found
            .into_iter()
            .map(|e| e.ok_or_else(|| self.corrupt(meta.root, "directory without segments")))
            .collect()
    }

    /// The window `(p0, p1)` of each key in its segment, and the windows'
    /// pages read in one batch (identical windows, adjacent for keys in
    /// order, once): the windows, the buffers read, and for each key the
    /// index of its buffer.
    fn read_windows(&self, meta: &Meta, keys: &[u64], entries: &[Entry]) -> Result<Windows> {
        let wins = keys
            .iter()
            .zip(entries)
            .map(|(&k, e)| self.window_of(meta, e, k))
            .collect::<Result<Vec<_>>>()?;
        let runs: Vec<(u64, u64)> = wins
            .iter()
            .zip(entries)
            .map(|(&(p0, p1), e)| (e.page + p0, p1.saturating_sub(p0) + 1))
            .collect();
        let (distinct, which) = runs_of(&runs);
        let bufs = self.pager.read_runs_many(Role::Leaf, &distinct)?;
        Ok((wins, bufs, which))
    }

    /// The insert buffers of the segments `(head, first buffer page)` of
    /// `want` (adjacent duplicates read once), decoded, in one batch; and
    /// for each element the index of its buffer.
    fn read_buffers(&self, meta: &Meta, want: &[(u64, u64)]) -> Result<(Vec<Vec<Record>>, Vec<usize>)> {
        let (distinct, which) = runs_of(want);
        let runs = distinct
            .iter()
            .map(|&(head, first)| Ok((first, self.check_buffer(meta, head, first)?)))
            .collect::<Result<Vec<_>>>()?;
        let bufs = self.pager.read_runs_many(Role::Leaf, &runs)?;
        let decoded = distinct
            .iter()
            .zip(&bufs)
            .map(|(&(head, first), b)| self.decode_buffer_of(meta, b, head, first))
            .collect::<Result<Vec<_>>>()?;
        Ok((decoded, which))
    }

    /// [`crate::index::Index::get`] of each of `keys` (ascending, distinct),
    /// in rounds: the directory levels not resident, then every key's
    /// window, then the buffers of the keys not in their window whose
    /// segment has one; each round's distinct reads in one batch.
    pub(super) fn get_many_impl(&self, keys: &[u64]) -> Result<Vec<Option<u64>>> {
        let st = self.state.read();
        let meta = &st.meta;
        let entries = self.find_many(&st, keys)?;
        let (wins, bufs, which) = self.read_windows(meta, keys, &entries)?;
        let mut answers = Vec::with_capacity(keys.len());
        let mut open = Vec::new();
        for (i, (((&key, e), &(p0, p1)), &w)) in keys.iter().zip(&entries).zip(&wins).zip(&which).enumerate()
        {
            let buf = bufs
                .get(w)
                .ok_or_else(|| Error::invalid("segment window not read"))?;
            match self.probe_in(e, p0, p1, buf, key)? {
                Some(hit) => answers.push(Some(hit.value)),
                None => {
                    if e.buffer != NO_PAGE {
                        open.push((i, (e.page, e.buffer)));
                    }
                    answers.push(None);
                }
            }
        }
        let want: Vec<(u64, u64)> = open.iter().map(|&(_, hb)| hb).collect();
        let (buffers, which) = self.read_buffers(meta, &want)?;
        for (&(i, _), &w) in open.iter().zip(&which) {
            let (Some(&key), Some(b), Some(a)) = (keys.get(i), buffers.get(w), answers.get_mut(i)) else {
                return Err(Error::invalid("insert buffer not read"));
            };
            *a = b
                .binary_search_by_key(&key, |r| r.0)
                .ok()
                .and_then(|j| b.get(j))
                .map(|r| r.1);
        }
        Ok(answers)
    }

    /// [`crate::index::Index::lower_bound`] of each of `keys` (ascending,
    /// distinct): the rounds of [`Self::get_many_impl`] (directory, windows,
    /// buffers of every key whose segment has one); the rare further pages
    /// (before or after the window, the next segment when the key's
    /// segment holds nothing `>=` it) are read key by key, as the cursor
    /// reads them one by one.
    pub(super) fn lower_bound_many_impl(&self, keys: &[u64]) -> Result<Vec<Option<Record>>> {
        let st = self.state.read();
        let meta = &st.meta;
        let entries = self.find_many(&st, keys)?;
        let (wins, bufs, which) = self.read_windows(meta, keys, &entries)?;
        let mut seeks = Vec::with_capacity(keys.len());
        for (((&key, e), &(p0, p1)), &w) in keys.iter().zip(&entries).zip(&wins).zip(&which) {
            let buf = bufs
                .get(w)
                .ok_or_else(|| Error::invalid("segment window not read"))?;
            seeks.push(Some(self.seg_lower_bound_in(e, key, p0, p1, buf)?));
        }
        let want: Vec<(u64, u64)> = entries
            .iter()
            .filter(|e| e.buffer != NO_PAGE)
            .map(|e| (e.page, e.buffer))
            .collect();
        let (buffers, bwhich) = self.read_buffers(meta, &want)?;
        let mut bwhich = bwhich.into_iter();
        let mut answers = Vec::with_capacity(keys.len());
        for ((&key, e), seek) in keys.iter().zip(&entries).zip(seeks.iter_mut()) {
            let buffered = if e.buffer == NO_PAGE {
                Vec::new()
            } else {
                let w = bwhich
                    .next()
                    .ok_or_else(|| Error::invalid("insert buffer not read"))?;
                buffers.get(w).cloned().unwrap_or_default()
            };
            let (pos, next) = seek.take().unwrap_or_default();
            let mut c = FitingCursor::new(self);
            c.place(e, key, pos, next, buffered);
            answers.push(c.next_locked(&st)?);
        }
        Ok(answers)
    }
}
