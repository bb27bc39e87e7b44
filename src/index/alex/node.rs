//! Data nodes: a paged accessor that reads the pages of a node's run only
//! as the algorithms touch them (role `Leaf`, one page per read), the
//! exponential search, inserts with shifts toward the nearest gap, deletes,
//! and the image of a freshly built node.
//!
//! Gaps hold the key of the next occupied slot to their right (`u64::MAX`
//! after the last one), so the key array is sorted and a search needs no
//! bitmap; the bitmap tells records from gaps.

use std::collections::{BTreeMap, BTreeSet};

use super::format::{
    DataHeader, MAX_DENSITY, Model, SEARCH_WEIGHT, SHIFT_WEIGHT, bitmap_off, image_len, key_off, locate,
    node_pages, open_data, seal_data, value_off,
};
use crate::format::bytes::{get_u64, put_u64};
use crate::index::Record;
use crate::pager::{Pager, Role};
use crate::storage::AlignedBuf;
use crate::{Error, Result};

/// The first slot in `0..=cap` whose key is `>= key` (`cap`: none), by an
/// exponential search from `pred` then a binary search, reading keys
/// through `key_at`; returns it with the number of key comparisons made.
pub(crate) fn exp_search(
    cap: usize,
    pred: usize,
    key: u64,
    mut key_at: impl FnMut(usize) -> Result<u64>,
) -> Result<(usize, u64)> {
    if cap == 0 {
        return Ok((0, 0));
    }
    let pred = pred.min(cap - 1);
    let mut iters = 1u64;
    let (mut lo, mut hi);
    if key_at(pred)? >= key {
        hi = pred;
        lo = 0;
        let mut step = 1usize;
        while step <= pred {
            let probe = pred - step;
            iters += 1;
            if key_at(probe)? < key {
                lo = probe + 1;
                break;
            }
            hi = probe;
            step *= 2;
        }
    } else {
        lo = pred + 1;
        hi = cap;
        let mut step = 1usize;
        while pred + step < cap {
            let probe = pred + step;
            iters += 1;
            if key_at(probe)? >= key {
                hi = probe;
                break;
            }
            lo = probe + 1;
            step *= 2;
        }
    }
    // The answer is in [lo, hi]: keys before lo are < key, key at hi >= key.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        iters += 1;
        if key_at(mid)? < key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok((lo, iters))
}

/// What [`DataNode::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Insert {
    /// The key was there: its old value (replaced in place).
    Updated(u64),
    /// A new record.
    Inserted,
    /// The node is at its density bound: nothing was changed.
    Full,
}

/// A data node on disk, its pages read as they are touched and written
/// back by [`DataNode::flush`].
#[derive(Debug)]
pub(crate) struct DataNode<'p> {
    pager: &'p Pager,
    /// Head page of the run.
    pub head: u64,
    /// The header (written back by [`DataNode::flush`] when changed).
    pub hdr: DataHeader,
    ps: usize,
    pages: BTreeMap<usize, AlignedBuf>,
    dirty: BTreeSet<usize>,
    hdr_dirty: bool,
}

impl<'p> DataNode<'p> {
    /// Opens the node at `head`: reads and verifies its head page (the
    /// header and the start of the bitmap) and checks the header.
    pub(crate) fn open(pager: &'p Pager, head: u64, page_count: u64) -> Result<DataNode<'p>> {
        let ps = pager.page_size();
        if head == crate::pager::NO_PAGE || head >= page_count {
            return Err(Error::corruption(
                pager.name(),
                head,
                "data-node link outside the file",
            ));
        }
        let mut n = DataNode::unloaded(pager, head, ps);
        n.load(0)?;
        let hdr = DataHeader::load(|o| n.get(o))?;
        hdr.check(head, ps, page_count, pager.name())?;
        n.hdr = hdr;
        Ok(n)
    }

    /// A node with nothing read yet (its header still to be loaded).
    fn unloaded(pager: &'p Pager, head: u64, ps: usize) -> DataNode<'p> {
        DataNode {
            pager,
            head,
            hdr: DataHeader::default(),
            ps,
            pages: BTreeMap::new(),
            dirty: BTreeSet::new(),
            hdr_dirty: false,
        }
    }

    /// As [`DataNode::open`], with the head page already read into `page0`
    /// (verified here).
    pub(crate) fn open_from(
        pager: &'p Pager,
        head: u64,
        page_count: u64,
        page0: AlignedBuf,
    ) -> Result<DataNode<'p>> {
        let ps = pager.page_size();
        let mut n = DataNode::unloaded(pager, head, ps);
        n.offer(0, page0)?;
        let hdr = DataHeader::load(|o| n.get(o))?;
        hdr.check(head, ps, page_count, pager.name())?;
        n.hdr = hdr;
        Ok(n)
    }

    /// Keeps page `i` of the run, read by the caller, unless it is held
    /// already (after verifying it).
    pub(crate) fn offer(&mut self, i: usize, page: AlignedBuf) -> Result<()> {
        if self.pages.contains_key(&i) {
            return Ok(());
        }
        let no = self.head + i as u64;
        open_data(&page, no, self.head, i, self.pager.name())?;
        self.pages.insert(i, page);
        Ok(())
    }

    /// Whether page `i` of the run is needed and not held: a page
    /// [`DataNode::offer`] would take (inside the run).
    pub(crate) fn wants(&self, i: usize) -> bool {
        !self.pages.contains_key(&i) && i < self.hdr.pages as usize
    }

    /// The run page holding the first key the search for `key` reads (the
    /// model's slot).
    pub(crate) fn search_page(&self, key: u64) -> usize {
        let cap = self.cap();
        let pred = self.hdr.model.slot(key, cap).min(cap.saturating_sub(1));
        locate(key_off(cap, pred), self.ps).0
    }

    /// The run page holding the value of slot `i`.
    pub(crate) fn value_page(&self, i: usize) -> usize {
        locate(value_off(self.cap(), i), self.ps).0
    }

    /// The first occupied slot whose key is `>= key` (the slot
    /// [`DataNode::lower_bound`] answers from), reading no value.
    pub(crate) fn lower_slot(&mut self, key: u64) -> Result<Option<usize>> {
        let (_, p, _) = self.search(key)?;
        self.next_occupied(p)
    }

    /// Reads every page of the run not read yet, in one call.
    pub(crate) fn load_all(&mut self) -> Result<()> {
        let pages = self.hdr.pages as usize;
        let mut buf = AlignedBuf::zeroed(pages * self.ps);
        self.pager.read_page(Role::Leaf, self.head, &mut buf)?;
        for (i, chunk) in buf.chunks_exact(self.ps).enumerate() {
            if self.pages.contains_key(&i) {
                continue;
            }
            open_data(chunk, self.head + i as u64, self.head, i, self.pager.name())?;
            let mut p = AlignedBuf::zeroed(self.ps);
            p.copy_from_slice(chunk);
            self.pages.insert(i, p);
        }
        Ok(())
    }

    fn load(&mut self, i: usize) -> Result<()> {
        if self.pages.contains_key(&i) {
            return Ok(());
        }
        if i > 0 && i >= self.hdr.pages as usize {
            return Err(Error::corruption(
                self.pager.name(),
                self.head,
                "slot outside the data node",
            ));
        }
        let mut p = AlignedBuf::zeroed(self.ps);
        let no = self.head + i as u64;
        self.pager.read_page(Role::Leaf, no, &mut p)?;
        open_data(&p, no, self.head, i, self.pager.name())?;
        self.pages.insert(i, p);
        Ok(())
    }

    fn get(&mut self, off: usize) -> Result<u64> {
        let (i, o) = locate(off, self.ps);
        self.load(i)?;
        self.pages
            .get(&i)
            .and_then(|p| get_u64(p, o))
            .ok_or_else(|| Error::corruption(self.pager.name(), self.head, "word outside the data node"))
    }

    fn put(&mut self, off: usize, v: u64) -> Result<()> {
        let (i, o) = locate(off, self.ps);
        self.load(i)?;
        let p = self
            .pages
            .get_mut(&i)
            .ok_or_else(|| Error::invalid("data-node page not loaded"))?;
        put_u64(p, o, v);
        self.dirty.insert(i);
        Ok(())
    }

    fn cap(&self) -> usize {
        self.hdr.cap as usize
    }

    /// Key of slot `i`.
    pub(crate) fn key(&mut self, i: usize) -> Result<u64> {
        self.get(key_off(self.cap(), i))
    }

    /// Value of slot `i`.
    pub(crate) fn value(&mut self, i: usize) -> Result<u64> {
        self.get(value_off(self.cap(), i))
    }

    fn set_key(&mut self, i: usize, k: u64) -> Result<()> {
        self.put(key_off(self.cap(), i), k)
    }

    fn set_value(&mut self, i: usize, v: u64) -> Result<()> {
        self.put(value_off(self.cap(), i), v)
    }

    fn set_bit(&mut self, i: usize, on: bool) -> Result<()> {
        let w = self.get(bitmap_off(i))?;
        let b = 1u64 << (i % 64);
        self.put(bitmap_off(i), if on { w | b } else { w & !b })
    }

    /// The first slot `>= from` whose bit is `want` (occupied or gap).
    fn next_with(&mut self, from: usize, want: bool) -> Result<Option<usize>> {
        let cap = self.cap();
        let mut i = from;
        while i < cap {
            let w = self.get(bitmap_off(i))?;
            let w = if want { w } else { !w };
            let masked = w & (u64::MAX << (i % 64));
            if masked != 0 {
                let s = (i / 64) * 64 + masked.trailing_zeros() as usize;
                return Ok((s < cap).then_some(s));
            }
            i = (i / 64 + 1) * 64;
        }
        Ok(None)
    }

    /// The last slot `< before` whose bit is `want`.
    fn prev_with(&mut self, before: usize, want: bool) -> Result<Option<usize>> {
        let mut end = before.min(self.cap());
        while end > 0 {
            let i = end - 1;
            let w = self.get(bitmap_off(i))?;
            let w = if want { w } else { !w };
            let keep = i % 64;
            let mask = if keep == 63 {
                u64::MAX
            } else {
                (1u64 << (keep + 1)) - 1
            };
            let masked = w & mask;
            if masked != 0 {
                return Ok(Some((i / 64) * 64 + 63 - masked.leading_zeros() as usize));
            }
            end = (i / 64) * 64;
        }
        Ok(None)
    }

    /// The first occupied slot `>= from`.
    pub(crate) fn next_occupied(&mut self, from: usize) -> Result<Option<usize>> {
        self.next_with(from, true)
    }

    /// The model's slot for `key` and the first slot whose key is `>= key`,
    /// with the search iterations.
    fn search(&mut self, key: u64) -> Result<(usize, usize, u64)> {
        let cap = self.cap();
        let pred = self.hdr.model.slot(key, cap);
        let (p, iters) = exp_search(cap, pred, key, |i| self.key(i))?;
        Ok((pred, p, iters))
    }

    /// The first record with a key `>= key` in this node (slot, record).
    pub(crate) fn lower_bound(&mut self, key: u64) -> Result<Option<(usize, Record)>> {
        let (_, p, _) = self.search(key)?;
        match self.next_occupied(p)? {
            Some(q) => Ok(Some((q, (self.key(q)?, self.value(q)?)))),
            None => Ok(None),
        }
    }

    /// The value of `key`.
    pub(crate) fn get_value(&mut self, key: u64) -> Result<Option<u64>> {
        Ok(self
            .lower_bound(key)?
            .filter(|(_, r)| r.0 == key)
            .map(|(_, r)| r.1))
    }

    /// Inserts or updates `key` (see [`Insert`]); call [`DataNode::flush`]
    /// to write the changes.
    pub(crate) fn insert(&mut self, key: u64, value: u64) -> Result<Insert> {
        let cap = self.cap();
        let (pred, p, iters) = self.search(key)?;
        let q = self.next_occupied(p)?;
        if let Some(q) = q {
            if self.key(q)? == key {
                let old = self.value(q)?;
                self.set_value(q, value)?;
                return Ok(Insert::Updated(old));
            }
        }
        if f64::from(self.hdr.num_keys + 1) > cap as f64 * MAX_DENSITY {
            return Ok(Insert::Full);
        }
        let prev = self.prev_with(p, true)?;
        let lo = prev.map_or(0, |x| x + 1);
        let hi = q.unwrap_or(cap);
        let mut shifts = 0u64;
        if lo < hi {
            // Gaps lo..hi: place at the predicted slot, clamped to them.
            let pos = pred.clamp(lo, hi - 1);
            for i in lo..=pos {
                self.set_key(i, key)?;
            }
            self.set_value(pos, value)?;
            self.set_bit(pos, true)?;
        } else {
            let right = self.next_with(hi, false)?;
            let left = self.prev_with(lo, false)?;
            let go_right = match (left, right) {
                (Some(l), Some(r)) => r - hi <= lo - 1 - l,
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (None, None) => {
                    return Err(Error::corruption(
                        self.pager.name(),
                        self.head,
                        "data node without a gap",
                    ));
                }
            };
            if let (true, Some(r)) = (go_right, right) {
                for i in (hi..r).rev() {
                    let (k, v) = (self.key(i)?, self.value(i)?);
                    self.set_key(i + 1, k)?;
                    self.set_value(i + 1, v)?;
                }
                self.set_bit(r, true)?;
                self.set_key(hi, key)?;
                self.set_value(hi, value)?;
                shifts = (r - hi) as u64;
            } else if let Some(l) = left {
                for i in l + 1..lo {
                    let (k, v) = (self.key(i)?, self.value(i)?);
                    self.set_key(i - 1, k)?;
                    self.set_value(i - 1, v)?;
                }
                self.set_bit(l, true)?;
                self.set_key(lo - 1, key)?;
                self.set_value(lo - 1, value)?;
                shifts = (lo - 1 - l) as u64;
            }
        }
        self.hdr.num_keys += 1;
        self.hdr.inserts += 1;
        self.hdr.iters += iters;
        self.hdr.shifts += shifts;
        self.hdr_dirty = true;
        Ok(Insert::Inserted)
    }

    /// Removes `key`; whether it was there. Its slot and the gaps before it
    /// take the next record's key.
    pub(crate) fn delete(&mut self, key: u64) -> Result<bool> {
        let Some((q, (k, _))) = self.lower_bound(key)? else {
            return Ok(false);
        };
        if k != key {
            return Ok(false);
        }
        let fill = match self.next_occupied(q + 1)? {
            Some(x) => self.key(x)?,
            None => u64::MAX,
        };
        let lo = self.prev_with(q, true)?.map_or(0, |x| x + 1);
        for i in lo..=q {
            self.set_key(i, fill)?;
        }
        self.set_value(q, 0)?;
        self.set_bit(q, false)?;
        self.hdr.num_keys = self.hdr.num_keys.saturating_sub(1);
        self.hdr_dirty = true;
        Ok(true)
    }

    /// Sets the sibling links (written by [`DataNode::flush`]).
    pub(crate) fn set_links(&mut self, prev: Option<u64>, next: Option<u64>) {
        if let Some(p) = prev {
            self.hdr.prev = p;
        }
        if let Some(n) = next {
            self.hdr.next = n;
        }
        self.hdr_dirty = true;
    }

    /// Every record, in key order (reads the whole run in one call).
    pub(crate) fn records(&mut self) -> Result<Vec<Record>> {
        self.load_all()?;
        let mut out = Vec::with_capacity(self.hdr.num_keys as usize);
        let mut i = 0;
        while let Some(q) = self.next_occupied(i)? {
            out.push((self.key(q)?, self.value(q)?));
            i = q + 1;
        }
        Ok(out)
    }

    /// Checks the node (every page read): the bitmap counts `num_keys`
    /// records, the key array is sorted with records strictly increasing
    /// and gaps holding the next record's key. Returns the records.
    pub(crate) fn verify(&mut self) -> Result<Vec<Record>> {
        let recs = self.records()?;
        let (pager, head) = (self.pager, self.head);
        let bad = |what: &str| Error::corruption(pager.name(), head, what.to_string());
        if recs.len() != self.hdr.num_keys as usize {
            return Err(bad("bitmap disagrees with the key count"));
        }
        if recs.windows(2).any(|w| matches!(w, [a, b] if a.0 >= b.0)) {
            return Err(bad("data-node keys not increasing"));
        }
        let mut next = u64::MAX;
        for i in (0..self.cap()).rev() {
            let k = self.key(i)?;
            let occ = self.next_occupied(i)? == Some(i);
            if occ {
                next = k;
            } else if k != next {
                return Err(bad("a gap does not hold the next record's key"));
            }
        }
        Ok(recs)
    }

    /// Writes the changed pages (header first sealed into page 0), one
    /// write call per page.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.hdr_dirty {
            let hdr = self.hdr;
            hdr.store(|o, v| self.put(o, v))?;
            self.hdr_dirty = false;
        }
        for i in std::mem::take(&mut self.dirty) {
            let no = self.head + i as u64;
            if let Some(p) = self.pages.get_mut(&i) {
                seal_data(p, no, self.head, i);
                self.pager.write_page(Role::Leaf, no, p)?;
            }
        }
        Ok(())
    }
}

/// Where a built data node puts its keys.
#[derive(Debug)]
pub(crate) struct Placement {
    /// The node's model.
    pub model: Model,
    /// Per slot, the index of the key it holds.
    pub occupied: Vec<Option<usize>>,
    /// Per slot, its key (gaps: the next key, `u64::MAX` after the last).
    pub slot_keys: Vec<u64>,
    /// Expected cost per insert (see [`build_node`]).
    pub expected: f64,
}

/// ALEX's model-based placement of `keys` (strictly increasing, fewer than
/// `cap`) in `cap` slots, with the expected cost per insert.
pub(crate) fn place(keys: &[u64], cap: usize) -> Result<Placement> {
    let n = keys.len();
    if n >= cap || cap % 64 != 0 {
        return Err(Error::invalid(format!(
            "{n} records for a data node of {cap} slots"
        )));
    }
    let model = Model::fit(keys, cap);
    let mut slot_keys = vec![u64::MAX; cap];
    let mut occupied = vec![None::<usize>; cap];
    let mut last: Option<usize> = None;
    for (i, &k) in keys.iter().enumerate() {
        let mut pos = model.slot(k, cap);
        if let Some(l) = last {
            pos = pos.max(l + 1);
        }
        pos = pos.min(cap - (n - i));
        if let Some(s) = occupied.get_mut(pos) {
            *s = Some(i);
        }
        last = Some(pos);
    }
    let mut next_key = u64::MAX;
    for i in (0..cap).rev() {
        if let Some(Some(r)) = occupied.get(i) {
            next_key = keys.get(*r).copied().unwrap_or(u64::MAX);
        }
        if let Some(s) = slot_keys.get_mut(i) {
            *s = next_key;
        }
    }
    let mut iters = 0u64;
    for &k in keys {
        let pred = model.slot(k, cap);
        iters += exp_search(cap, pred, k, |i| {
            Ok(slot_keys.get(i).copied().unwrap_or(u64::MAX))
        })?
        .1;
    }
    let (mut run, mut shift_sum) = (0u64, 0f64);
    for s in occupied.iter().chain(std::iter::once(&None)) {
        if s.is_some() {
            run += 1;
        } else {
            shift_sum += (run * run) as f64 / 4.0;
            run = 0;
        }
    }
    let nn = n.max(1) as f64;
    let expected = SEARCH_WEIGHT * iters as f64 / nn + SHIFT_WEIGHT * shift_sum / nn;
    Ok(Placement {
        model,
        occupied,
        slot_keys,
        expected,
    })
}

/// Builds a data node of `cap` slots from `recs` (strictly increasing,
/// fewer than `cap`) at head page `head` with sibling links `prev`/`next`:
/// ALEX's model-based placement (each record at its predicted slot, or the
/// first free slot after the previous record, leaving room for the rest),
/// gaps filled with the next key; the expected cost per insert from the
/// search iterations of every key and the runs of records (an insert into
/// a run of `L` records shifts about `L / 4`). Returns the header and the
/// run's pages, sealed.
pub(crate) fn build_node(
    recs: &[Record],
    cap: usize,
    head: u64,
    prev: u64,
    next: u64,
    ps: usize,
) -> Result<(DataHeader, AlignedBuf)> {
    let n = recs.len();
    let keys: Vec<u64> = recs.iter().map(|r| r.0).collect();
    let Placement {
        model,
        occupied,
        slot_keys,
        expected,
    } = place(&keys, cap)?;
    let pages = node_pages(cap, ps);
    let hdr = DataHeader {
        model,
        cap: cap as u32,
        pages: pages as u32,
        num_keys: n as u32,
        prev,
        next,
        inserts: 0,
        iters: 0,
        shifts: 0,
        expected,
    };
    let mut image = AlignedBuf::zeroed(pages * ps);
    let mut put = |off: usize, v: u64| -> Result<()> {
        let (p, o) = locate(off, ps);
        if off + 8 > image_len(cap) {
            return Err(Error::invalid("data-node word outside its image"));
        }
        put_u64(&mut image, p * ps + o, v);
        Ok(())
    };
    hdr.store(&mut put)?;
    for w in 0..cap / 64 {
        let mut word = 0u64;
        for b in 0..64 {
            if matches!(occupied.get(w * 64 + b), Some(Some(_))) {
                word |= 1 << b;
            }
        }
        put(bitmap_off(w * 64), word)?;
    }
    for (i, k) in slot_keys.iter().enumerate() {
        put(key_off(cap, i), *k)?;
        if let Some(Some(r)) = occupied.get(i) {
            put(value_off(cap, i), recs.get(*r).map_or(0, |x| x.1))?;
        }
    }
    for (i, chunk) in image.chunks_exact_mut(ps).enumerate() {
        seal_data(chunk, head + i as u64, head, i);
    }
    Ok((hdr, image))
}
