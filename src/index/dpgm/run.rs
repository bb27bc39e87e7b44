//! Runs: building one (records → record pages and a recursive PGM model over
//! them), writing its pages, reading it whole for a merge, and searching it
//! (through the resident model or the model pages).
//!
//! Every search goes through [`partition`]: the model only chooses which
//! pages to read first; the answer comes from the keys on the pages, and a
//! window that turns out not to hold the answer (impossible for a correct
//! model) is widened, so a bad model costs reads, never a wrong answer.

use super::format::{
    Entry, MAX_MODEL_LEVELS, RunDesc, Seg, encode_model, encode_records, key_at, leaf_capacity, open_page,
    record_at, seg_at, segs_per_page,
};
use crate::format::page::PageType;
use crate::index::batch::runs_of;
use crate::model::optimal_pla;
use crate::pager::{Pager, Role};
use crate::storage::AlignedBuf;
use crate::{Error, Result};

/// Pages assembled per write call when a run is written.
pub(super) const WRITE_BATCH_PAGES: usize = 256;

/// A run in memory: its catalog entry and, with `Residency::Index`, its
/// decoded model levels (bottom first).
#[derive(Debug, Clone)]
pub(super) struct Run {
    /// What the catalog holds.
    pub desc: RunDesc,
    /// The model levels, when resident.
    pub model: Option<Vec<Vec<Seg>>>,
}

/// The segments of an optimal PLA of `keys` with error `eps`.
fn segments(keys: &[u64], eps: u64) -> Vec<Seg> {
    optimal_pla(keys, eps)
        .into_iter()
        .map(|s| Seg {
            key: s.first_key,
            slope: s.slope,
            intercept: s.intercept,
        })
        .collect()
}

/// The recursive PGM model of a run over `keys` (strictly increasing, not
/// empty): level 0 predicts record positions within `eps`; each level above
/// predicts positions in the level below (over its first keys) within
/// `eps_inner`, until a level fits one page of `page_size` bytes.
pub(super) fn build_model(keys: &[u64], eps: u64, eps_inner: u64, page_size: usize) -> Vec<Vec<Seg>> {
    let spp = segs_per_page(page_size).max(1);
    let mut levels = vec![segments(keys, eps)];
    while let Some(top) = levels.last() {
        if top.len() <= spp || levels.len() >= MAX_MODEL_LEVELS {
            break;
        }
        let ks: Vec<u64> = top.iter().map(|s| s.key).collect();
        levels.push(segments(&ks, eps_inner));
    }
    levels
}

/// Where [`emit_run`] sends each batch: `(first page, pages, role)`.
pub(super) type PageOut<'a> = dyn FnMut(u64, &[u8], Role) -> Result<()> + 'a;

/// Emits the pages of a run of `n` entries (`entry(i)`, keys strictly
/// increasing) with model `model`, numbered from `first`, in batches of
/// consecutive pages: `out(first page of the batch, pages, role)`.
pub(super) fn emit_run(
    n: usize,
    entry: &dyn Fn(usize) -> Entry,
    model: &[Vec<Seg>],
    first: u64,
    page_size: usize,
    out: &mut PageOut<'_>,
) -> Result<()> {
    let cap = leaf_capacity(page_size).max(1);
    let spp = segs_per_page(page_size).max(1);
    let mut batch = AlignedBuf::zeroed(page_size * WRITE_BATCH_PAGES);
    let mut used = 0usize;
    let mut batch_first = first;
    let mut page_no = first;
    let mut flush = |batch: &AlignedBuf, used: &mut usize, batch_first: &mut u64, role: Role| -> Result<()> {
        if *used > 0 {
            let bytes = batch
                .get(..*used * page_size)
                .ok_or_else(|| Error::invalid("run batch out of range"))?;
            out(*batch_first, bytes, role)?;
            *batch_first += *used as u64;
            *used = 0;
        }
        Ok(())
    };
    let mut page_entries = Vec::with_capacity(cap);
    for p in 0..n.div_ceil(cap) {
        page_entries.clear();
        page_entries.extend((p * cap..((p + 1) * cap).min(n)).map(entry));
        let slot = batch
            .get_mut(used * page_size..(used + 1) * page_size)
            .ok_or_else(|| Error::invalid("run batch slot out of range"))?;
        encode_records(slot, page_no, PageType::DpgmLeaf, &page_entries);
        used += 1;
        page_no += 1;
        if used == WRITE_BATCH_PAGES {
            flush(&batch, &mut used, &mut batch_first, Role::Leaf)?;
        }
    }
    flush(&batch, &mut used, &mut batch_first, Role::Leaf)?;
    for (j, level) in model.iter().enumerate() {
        for chunk in level.chunks(spp) {
            let slot = batch
                .get_mut(used * page_size..(used + 1) * page_size)
                .ok_or_else(|| Error::invalid("run batch slot out of range"))?;
            encode_model(slot, page_no, j, chunk);
            used += 1;
            page_no += 1;
            if used == WRITE_BATCH_PAGES {
                flush(&batch, &mut used, &mut batch_first, Role::Inner)?;
            }
        }
    }
    flush(&batch, &mut used, &mut batch_first, Role::Inner)
}

/// The catalog entry of a run of `entries` at `level` starting at `start`.
pub(super) fn describe(level: u32, start: u64, n: u64, min: u64, max: u64, model: &[Vec<Seg>]) -> RunDesc {
    RunDesc {
        level,
        start,
        n,
        min,
        max,
        model: model.iter().map(|l| l.len() as u64).collect(),
    }
}

/// A sorted array of fixed-size entries on consecutive pages of one type.
#[derive(Debug, Clone, Copy)]
pub(super) struct Paged {
    /// Page of entry 0.
    pub first: u64,
    /// Entries.
    pub len: u64,
    /// Entries per page (all pages full but the last).
    pub per_page: u64,
    /// Bytes per entry.
    pub stride: usize,
    /// Page type.
    pub kind: PageType,
    /// Role for the block counts.
    pub role: Role,
}

impl Paged {
    /// The record pages of `run`.
    pub(super) fn records(run: &RunDesc, page_size: usize) -> Paged {
        Paged {
            first: run.start,
            len: run.n,
            per_page: leaf_capacity(page_size).max(1) as u64,
            stride: 16,
            kind: PageType::DpgmLeaf,
            role: Role::Leaf,
        }
    }

    /// Model level `j` of `run`.
    pub(super) fn model(run: &RunDesc, page_size: usize, j: usize) -> Paged {
        Paged {
            first: run.model_first(page_size, j),
            len: run.model.get(j).copied().unwrap_or(0),
            per_page: segs_per_page(page_size).max(1) as u64,
            stride: 24,
            kind: PageType::DpgmModel,
            role: Role::Inner,
        }
    }

    /// Entries on array page `p`.
    fn count_on(&self, p: u64) -> usize {
        self.len.saturating_sub(p * self.per_page).min(self.per_page) as usize
    }

    /// Reads array pages `p0..p0 + np` into `buf` (grown as needed) in one
    /// call and verifies them.
    pub(super) fn read(&self, pager: &Pager, p0: u64, np: u64, buf: &mut AlignedBuf) -> Result<()> {
        let ps = pager.page_size();
        let bytes = np as usize * ps;
        if buf.len() < bytes {
            *buf = AlignedBuf::zeroed(bytes);
        }
        let region = buf
            .get_mut(..bytes)
            .ok_or_else(|| Error::invalid("read buffer out of range"))?;
        pager.read_page(self.role, self.first + p0, region)?;
        self.check(pager, p0, region)
    }

    /// Verifies array pages `p0..` held at the start of `region` (whole
    /// pages).
    fn check(&self, pager: &Pager, p0: u64, region: &[u8]) -> Result<()> {
        let ps = pager.page_size();
        for (k, page) in region.chunks_exact(ps).enumerate() {
            let p = p0 + k as u64;
            open_page(page, self.first + p, pager.name(), self.kind, self.count_on(p))?;
        }
        Ok(())
    }
}

/// What [`partition`] found: the partition point, and the pages it read
/// last (array pages `p0..p0 + np`, in the caller's buffer).
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    /// Index of the first entry whose key is not `below`.
    pub pp: u64,
    /// First array page held in the buffer.
    pub p0: u64,
    /// Pages held.
    pub np: u64,
}

impl Found {
    /// Where entry `i` is in `buf` (page index in it, slot): in the pages
    /// the search read last, or else in its page, read now (one read).
    fn hold(&self, pager: &Pager, arr: &Paged, i: u64, buf: &mut AlignedBuf) -> Result<(usize, usize)> {
        let p = i / arr.per_page;
        let slot = (i % arr.per_page) as usize;
        if p >= self.p0 && p < self.p0 + self.np {
            return Ok(((p - self.p0) as usize, slot));
        }
        arr.read(pager, p, 1, buf)?;
        Ok((0, slot))
    }
}

/// Finds the partition point of `below` (monotone: true, then false) over
/// the keys of `arr`, reading first the pages that hold entries `lo..hi`
/// (one read call) and then, only if those do not decide it, wider windows.
/// The pages of the last read stay in `buf`.
pub(super) fn partition(
    pager: &Pager,
    arr: &Paged,
    lo: u64,
    hi: u64,
    below: &dyn Fn(u64) -> bool,
    buf: &mut AlignedBuf,
) -> Result<Found> {
    partition_pre(pager, arr, lo, hi, below, buf, false)
}

/// The array pages [`partition`] reads first for `lo..hi`: `(p0, pages)`;
/// `None` when it reads nothing (an empty array).
fn first_window(arr: &Paged, lo: u64, hi: u64) -> Option<(u64, u64)> {
    if arr.len == 0 {
        return None;
    }
    let per = arr.per_page.max(1);
    let lo = lo.min(arr.len - 1);
    let hi = hi.clamp(lo + 1, arr.len);
    let (p0, p1) = (lo / per, (hi - 1) / per);
    Some((p0, p1 - p0 + 1))
}

/// [`partition`]; with `pre`, the pages of its first read
/// ([`first_window`]) are already in `buf` (they are verified, not read).
fn partition_pre(
    pager: &Pager,
    arr: &Paged,
    lo: u64,
    hi: u64,
    below: &dyn Fn(u64) -> bool,
    buf: &mut AlignedBuf,
    mut pre: bool,
) -> Result<Found> {
    let ps = pager.page_size();
    let (mut known_lo, mut known_hi) = (0u64, arr.len);
    let mut lo = lo.min(arr.len.saturating_sub(1));
    let mut hi = hi.clamp(lo + 1, arr.len.max(1));
    let mut width = arr.per_page;
    let mut found = Found { pp: 0, p0: 0, np: 0 };
    while known_lo < known_hi {
        let p0 = lo / arr.per_page;
        let p1 = (hi - 1) / arr.per_page;
        let np = p1 - p0 + 1;
        if pre {
            let region = buf
                .get(..np as usize * ps)
                .ok_or_else(|| Error::invalid("window not read"))?;
            arr.check(pager, p0, region)?;
            pre = false;
        } else {
            arr.read(pager, p0, np, buf)?;
        }
        found.p0 = p0;
        found.np = np;
        let a = p0 * arr.per_page;
        let b = ((p1 + 1) * arr.per_page).min(arr.len);
        let key = |i: u64| -> Option<u64> {
            let off = (i - a) / arr.per_page;
            let page = buf.get(off as usize * ps..(off as usize + 1) * ps)?;
            key_at(page, arr.stride, ((i - a) % arr.per_page) as usize)
        };
        // Binary search over [a, b).
        let (mut l, mut r) = (a, b);
        while l < r {
            let m = l + (r - l) / 2;
            let k = key(m)
                .ok_or_else(|| Error::corruption(pager.name(), arr.first + m / arr.per_page, "short page"))?;
            if below(k) {
                l = m + 1;
            } else {
                r = m;
            }
        }
        if l > a {
            known_lo = known_lo.max(l);
        }
        if l < b {
            known_hi = known_hi.min(l);
        }
        if known_lo >= known_hi {
            break;
        }
        width = width.saturating_mul(2);
        if l < b {
            // Every key read is not below: the point lies to the left.
            hi = known_hi;
            lo = hi.saturating_sub(width).max(known_lo);
        } else {
            lo = known_lo;
            hi = lo.saturating_add(width).min(known_hi);
        }
    }
    found.pp = known_lo.min(arr.len);
    Ok(found)
}

/// Decodes the records of record page `page` (`count` entries).
pub(super) fn decode_records(page: &[u8], count: usize, out: &mut Vec<Entry>) {
    out.clear();
    out.extend((0..count).filter_map(|i| record_at(page, i)));
}

/// The error bounds of a file's models: over records, and of the upper
/// model levels.
#[derive(Debug, Clone, Copy)]
pub(super) struct Errors {
    /// Over records (`epsilon`).
    pub eps: u64,
    /// Over segments (`epsilon_inner`).
    pub inner: u64,
}

impl Errors {
    /// The bounds `meta` records.
    pub(super) fn of(meta: &super::Meta) -> Errors {
        Errors {
            eps: meta.epsilon as u64,
            inner: meta.epsilon_inner as u64,
        }
    }
}

/// Record position of `x` in `run` predicted by the model: from the
/// resident model, or by reading one window of model pages per level.
fn predict(pager: &Pager, run: &Run, x: u64, err: Errors, buf: &mut AlignedBuf) -> Result<(u64, u64)> {
    let Errors {
        eps,
        inner: eps_inner,
    } = err;
    let ps = pager.page_size();
    let d = &run.desc;
    let seg = if let Some(levels) = &run.model {
        let bottom = levels.first().map(Vec::as_slice).unwrap_or(&[]);
        let i = bottom.partition_point(|s| s.key <= x).saturating_sub(1);
        bottom.get(i).copied()
    } else {
        let top = d.model.len().saturating_sub(1);
        let mut window = (0u64, d.model.last().copied().unwrap_or(0));
        let mut seg = None;
        for j in (0..=top).rev() {
            let arr = Paged::model(d, ps, j);
            let f = partition(pager, &arr, window.0, window.1, &|k| k <= x, buf)?;
            let i = f.pp.saturating_sub(1);
            let (pg, slot) = f.hold(pager, &arr, i, buf)?;
            let page = buf.get(pg * ps..(pg + 1) * ps).unwrap_or(&[]);
            let s = seg_at(page, slot)
                .ok_or_else(|| Error::corruption(pager.name(), arr.first, "short model page"))?;
            seg = Some(s);
            if j > 0 {
                let below = d.model.get(j - 1).copied().unwrap_or(0);
                let p = s.predict(x, below);
                window = (p.saturating_sub(eps_inner + 1), p.saturating_add(eps_inner + 2));
            }
        }
        seg
    };
    let p = seg.map_or(0, |s| s.predict(x, d.n));
    Ok((p.saturating_sub(eps + 1), p.saturating_add(eps + 2)))
}

/// The lower bound of `x` in `run` (`x` within `[min, max]`: otherwise the
/// caller knows the answer): its position and the record page holding it,
/// decoded into `page` (empty if the position is `n`), with its slot.
pub(super) fn seek(
    pager: &Pager,
    run: &Run,
    x: u64,
    err: Errors,
    buf: &mut AlignedBuf,
    page: &mut Vec<Entry>,
) -> Result<(u64, usize)> {
    let ps = pager.page_size();
    let (lo, hi) = predict(pager, run, x, err, buf)?;
    let arr = Paged::records(&run.desc, ps);
    let f = partition(pager, &arr, lo, hi, &|k| k < x, buf)?;
    page.clear();
    if f.pp >= arr.len {
        return Ok((f.pp, 0));
    }
    let (pg, slot) = f.hold(pager, &arr, f.pp, buf)?;
    let data = buf.get(pg * ps..(pg + 1) * ps).unwrap_or(&[]);
    decode_records(data, arr.count_on(f.pp / arr.per_page), page);
    Ok((f.pp, slot))
}

/// Reads record page `p` of `run` (one read) into `page`.
pub(super) fn read_records(
    pager: &Pager,
    run: &RunDesc,
    p: u64,
    buf: &mut AlignedBuf,
    page: &mut Vec<Entry>,
) -> Result<()> {
    let arr = Paged::records(run, pager.page_size());
    arr.read(pager, p, 1, buf)?;
    decode_records(buf.get(..pager.page_size()).unwrap_or(&[]), arr.count_on(p), page);
    Ok(())
}

/// Reads every record of `run` in order (batches of [`WRITE_BATCH_PAGES`]
/// pages per read call), checking that keys increase.
pub(super) fn read_all(pager: &Pager, run: &RunDesc, buf: &mut AlignedBuf) -> Result<Vec<Entry>> {
    let ps = pager.page_size();
    let arr = Paged::records(run, ps);
    let pages = run.leaf_pages(ps);
    let mut out = Vec::with_capacity(usize::try_from(run.n).unwrap_or(0));
    let mut page = Vec::new();
    let mut p = 0u64;
    while p < pages {
        let np = (pages - p).min(WRITE_BATCH_PAGES as u64);
        arr.read(pager, p, np, buf)?;
        for k in 0..np {
            let data = buf.get(k as usize * ps..(k as usize + 1) * ps).unwrap_or(&[]);
            decode_records(data, arr.count_on(p + k), &mut page);
            for e in &page {
                if out.last().is_some_and(|l: &Entry| l.key >= e.key) {
                    return Err(Error::corruption(
                        pager.name(),
                        run.start + p + k,
                        format!("key {} out of order", e.key),
                    ));
                }
                out.push(*e);
            }
        }
        p += np;
    }
    if out.first().map(|e| e.key) != Some(run.min) || out.last().map(|e| e.key) != Some(run.max) {
        return Err(Error::corruption(
            pager.name(),
            run.start,
            "run keys differ from the catalog's bounds",
        ));
    }
    Ok(out)
}

/// Reads and decodes every model level of `run` (one read call per level).
pub(super) fn load_model(pager: &Pager, run: &RunDesc, buf: &mut AlignedBuf) -> Result<Vec<Vec<Seg>>> {
    let ps = pager.page_size();
    let mut levels = Vec::with_capacity(run.model.len());
    for j in 0..run.model.len() {
        let arr = Paged::model(run, ps, j);
        let np = arr.len.div_ceil(arr.per_page);
        arr.read(pager, 0, np, buf)?;
        let mut segs = Vec::with_capacity(usize::try_from(arr.len).unwrap_or(0));
        for i in 0..arr.len {
            let (p, slot) = ((i / arr.per_page) as usize, (i % arr.per_page) as usize);
            let page = buf.get(p * ps..(p + 1) * ps).unwrap_or(&[]);
            let s = seg_at(page, slot)
                .ok_or_else(|| Error::corruption(pager.name(), arr.first, "short model page"))?;
            if segs.last().is_some_and(|l: &Seg| l.key >= s.key) {
                return Err(Error::corruption(
                    pager.name(),
                    arr.first + i / arr.per_page,
                    "segment keys not increasing",
                ));
            }
            segs.push(s);
        }
        if segs.first().map(|s| s.key) != Some(run.min) {
            return Err(Error::corruption(
                pager.name(),
                arr.first,
                "first segment key differs from the run's smallest key",
            ));
        }
        levels.push(segs);
    }
    Ok(levels)
}

/// Merges sorted entry lists, `sources[0]` newest: for a key in several,
/// the newest entry wins; tombstones are dropped when `drop_dead`.
pub(super) fn merge_newest(sources: Vec<Vec<Entry>>, drop_dead: bool) -> Vec<Entry> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let total: usize = sources.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(total);
    let mut iters: Vec<std::vec::IntoIter<Entry>> = sources.into_iter().map(Vec::into_iter).collect();
    let mut heap = BinaryHeap::new();
    for (s, it) in iters.iter_mut().enumerate() {
        if let Some(e) = it.next() {
            heap.push(Reverse((e.key, s, e.value, e.dead)));
        }
    }
    let mut last: Option<u64> = None;
    while let Some(Reverse((key, s, value, dead))) = heap.pop() {
        if let Some(e) = iters.get_mut(s).and_then(Iterator::next) {
            heap.push(Reverse((e.key, s, e.value, e.dead)));
        }
        if last == Some(key) {
            continue;
        }
        last = Some(key);
        if !(dead && drop_dead) {
            out.push(Entry { key, value, dead });
        }
    }
    out
}

/// Searches `(array, lo, hi)` of one role each, the first windows of all of
/// them read in one batch (identical adjacent windows once); `below(i, k)`
/// is the predicate of search `i`. Wider windows, rare, are read search by
/// search as [`partition`] reads them. Returns each search's result and the
/// pages it read last.
fn partition_many(
    pager: &Pager,
    searches: &[(Paged, u64, u64)],
    below: &dyn Fn(usize, u64) -> bool,
) -> Result<Vec<(Found, AlignedBuf)>> {
    let firsts: Vec<Option<(u64, u64)>> = searches
        .iter()
        .map(|(arr, lo, hi)| first_window(arr, *lo, *hi).map(|(p0, np)| (arr.first + p0, np)))
        .collect();
    let want: Vec<(u64, u64)> = firsts.iter().flatten().copied().collect();
    let (distinct, which) = runs_of(&want);
    let role = searches.first().map_or(Role::Leaf, |s| s.0.role);
    let bufs = pager.read_runs_many(role, &distinct)?;
    let mut which = which.into_iter();
    let mut out = Vec::with_capacity(searches.len());
    for (i, ((arr, lo, hi), first)) in searches.iter().zip(&firsts).enumerate() {
        let mut buf = match first {
            Some(_) => which
                .next()
                .and_then(|w| bufs.get(w))
                .cloned()
                .ok_or_else(|| Error::invalid("window not read"))?,
            None => AlignedBuf::zeroed(0),
        };
        let f = partition_pre(pager, arr, *lo, *hi, &|k| below(i, k), &mut buf, first.is_some())?;
        out.push((f, buf));
    }
    Ok(out)
}

/// [`seek`] of each of `xs` (ascending, each within the run's key range)
/// in `run`, in rounds: with the model on storage one round per model
/// level, then the record windows; each round's first windows in one
/// batch. Returns each key's position, slot and decoded record page.
pub(super) fn seek_many(
    pager: &Pager,
    run: &Run,
    xs: &[u64],
    err: Errors,
) -> Result<Vec<(u64, usize, Vec<Entry>)>> {
    let ps = pager.page_size();
    let d = &run.desc;
    let segs: Vec<Option<Seg>> = if let Some(levels) = &run.model {
        let bottom = levels.first().map(Vec::as_slice).unwrap_or(&[]);
        xs.iter()
            .map(|&x| {
                bottom
                    .get(bottom.partition_point(|s| s.key <= x).saturating_sub(1))
                    .copied()
            })
            .collect()
    } else {
        let top = d.model.len().saturating_sub(1);
        let mut windows = vec![(0u64, d.model.last().copied().unwrap_or(0)); xs.len()];
        let mut segs = vec![None; xs.len()];
        for j in (0..=top).rev() {
            let arr = Paged::model(d, ps, j);
            let searches: Vec<(Paged, u64, u64)> = windows.iter().map(|&(lo, hi)| (arr, lo, hi)).collect();
            let found = partition_many(pager, &searches, &|i, k| xs.get(i).is_some_and(|&x| k <= x))?;
            for (((&x, (f, mut buf)), window), seg) in
                xs.iter().zip(found).zip(windows.iter_mut()).zip(segs.iter_mut())
            {
                let (pg, slot) = f.hold(pager, &arr, f.pp.saturating_sub(1), &mut buf)?;
                let page = buf.get(pg * ps..(pg + 1) * ps).unwrap_or(&[]);
                let s = seg_at(page, slot)
                    .ok_or_else(|| Error::corruption(pager.name(), arr.first, "short model page"))?;
                *seg = Some(s);
                if j > 0 {
                    let below = d.model.get(j - 1).copied().unwrap_or(0);
                    let p = s.predict(x, below);
                    *window = (p.saturating_sub(err.inner + 1), p.saturating_add(err.inner + 2));
                }
            }
        }
        segs
    };
    let arr = Paged::records(d, ps);
    let searches: Vec<(Paged, u64, u64)> = xs
        .iter()
        .zip(&segs)
        .map(|(&x, seg)| {
            let p = seg.map_or(0, |s| s.predict(x, d.n));
            (arr, p.saturating_sub(err.eps + 1), p.saturating_add(err.eps + 2))
        })
        .collect();
    let found = partition_many(pager, &searches, &|i, k| xs.get(i).is_some_and(|&x| k < x))?;
    let mut out = Vec::with_capacity(xs.len());
    for (f, mut buf) in found {
        let mut page = Vec::new();
        if f.pp >= arr.len {
            out.push((f.pp, 0, page));
            continue;
        }
        let (pg, slot) = f.hold(pager, &arr, f.pp, &mut buf)?;
        let data = buf.get(pg * ps..(pg + 1) * ps).unwrap_or(&[]);
        decode_records(data, arr.count_on(f.pp / arr.per_page), &mut page);
        out.push((f.pp, slot, page));
    }
    Ok(out)
}
