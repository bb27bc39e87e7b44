//! The sorted keys a design reads: in memory, or read back from the data run
//! just written, in sequential passes of bounded memory (issue 23's streaming
//! builds). A design that streams holds its model and one chunk of keys per
//! thread, not 8 bytes per key.

use std::borrow::Cow;
use std::ops::Range;

use rayon::prelude::*;

use std::sync::{Condvar, Mutex, OnceLock};

use crossbeam_channel::{Receiver, Sender};

use super::spill::Spill;
use crate::format::DataRun;
use crate::storage::{AlignedBuf, ReadStream, StreamRead};
use crate::{Error, Result};

/// Pages of one read of a pass over a run: 64 KiB at 4 KiB pages, small
/// enough for the buffers to be reused from read to read
/// ([`AlignedBuf`]'s pool; larger ones freed and allocated again by the
/// thousand leave the allocator holding far more than is in use).
const PASS_READ_PAGES: u64 = 16;

/// Reads of [`PASS_READ_PAGES`] pages a pass over a run keeps in flight:
/// the device reads ahead while the design works (storage read directly,
/// as the hybrid store's, would otherwise wait for each read in turn).
const PASS_QUEUE_DEPTH: usize = 8;

/// A pass over the keys `range` of a run as a [`ReadStream`]: reads of
/// [`PASS_READ_PAGES`] pages issued in order with [`PASS_QUEUE_DEPTH`] in
/// flight, each checked as it arrives and handed to `f` in order (reads
/// that arrive early wait for the ones before them, at most the queue
/// depth's worth).
struct Pass<'r, 'f, F> {
    run: &'r DataRun,
    range: Range<u64>,
    /// First page of the next read, and the last page of the pass.
    next_page: u64,
    last: u64,
    /// Pages `[a, b)` of each read issued.
    planned: Vec<(u64, u64)>,
    /// Reads arrived before an earlier one.
    arrived: std::collections::BTreeMap<usize, crate::format::PageRun>,
    /// Reads handed to `f`.
    handed: usize,
    /// `f` asked to stop: nothing more is read or handed on.
    stopped: bool,
    buf: Vec<u64>,
    f: &'f mut F,
}

impl<F: FnMut(usize, &[u64]) -> Result<bool>> ReadStream for Pass<'_, '_, F> {
    fn next(&mut self) -> Result<Option<StreamRead>> {
        // Never more than the queue depth's worth read and not yet handed on.
        if self.stopped
            || self.next_page > self.last
            || self.planned.len() - self.handed >= 2 * PASS_QUEUE_DEPTH
        {
            return Ok(None);
        }
        let (b, read) = self.run.range_read(
            self.next_page,
            (self.next_page + PASS_READ_PAGES).min(self.last + 1),
        )?;
        self.planned.push((self.next_page, b));
        self.next_page = b.max(self.next_page + 1);
        Ok(Some(read))
    }

    fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()> {
        let &(a, b) = self
            .planned
            .get(seq)
            .ok_or_else(|| Error::invalid("a read the pass did not ask for"))?;
        if self.stopped {
            // Reads still in flight when `f` stopped the pass.
            return Ok(());
        }
        self.arrived.insert(seq, self.run.run_from(a, b, buf)?);
        while let Some(pages) = self.arrived.remove(&self.handed) {
            self.handed += 1;
            let (lo, hi) = pages.item_range();
            let (lo, hi) = (lo.max(self.range.start), hi.min(self.range.end));
            self.buf.clear();
            if !pages.keys_into(lo, hi, &mut self.buf) {
                let i = lo + self.buf.len() as u64;
                return Err(Error::corruption(
                    self.run.storage().name(),
                    self.run.meta().page_of(i) + 1,
                    "record missing from page",
                ));
            }
            if !(self.f)(lo as usize, &self.buf)? {
                self.stopped = true;
                self.arrived.clear();
                break;
            }
        }
        Ok(())
    }
}

/// Keys a pass hands over at once from memory (as many as 256
/// pages of 4 KiB hold), so both sources call back at a similar rate.
const SLICE_CHUNK: usize = 1 << 16;

/// Sorted keys, in memory or in a data run on storage.
#[derive(Debug, Clone, Copy)]
pub enum Keys<'a> {
    /// All keys in memory.
    Slice(&'a [u64]),
    /// The keys of a data run, read back page by page as a pass needs them.
    Run(&'a DataRun),
    /// The keys of a data run being written: the first pass over all of
    /// them reads them as they are written, later passes the finished run.
    Piped(&'a Pipe),
    /// The entry keys (each entry's first 8 bytes) of a layer spilled to a
    /// temporary file: the outline a tuner builds the next layer over.
    Spill(&'a Spill),
}

/// Key chunks handed from the thread writing a data run to the design, and
/// then the run itself ([`Keys::Piped`]). The first pass that reads every
/// key ([`Keys::for_each_all`]) takes the chunks as they come; anything else
/// waits for the run (closing the pipe first, so the writer never waits on
/// a design that stopped reading).
#[derive(Debug)]
pub struct Pipe {
    rx: Mutex<Option<Receiver<Vec<u64>>>>,
    run: OnceLock<std::result::Result<DataRun, String>>,
    /// The run's error, handed to the first reader as it was.
    failed: Mutex<Option<Error>>,
    done: Mutex<bool>,
    ready: Condvar,
}

/// Chunks in flight between the writer and the design.
const PIPE_CHUNKS: usize = 8;

impl Pipe {
    /// A pipe and the sender its writer feeds.
    pub fn new() -> (Pipe, Sender<Vec<u64>>) {
        let (tx, rx) = crossbeam_channel::bounded(PIPE_CHUNKS);
        (
            Pipe {
                rx: Mutex::new(Some(rx)),
                run: OnceLock::new(),
                failed: Mutex::new(None),
                done: Mutex::new(false),
                ready: Condvar::new(),
            },
            tx,
        )
    }

    /// The writer's end: the finished run, or the error writing it ended
    /// with. Wakes the readers waiting for it.
    pub fn finish(&self, run: Result<DataRun>) {
        let run = run.map_err(|e| {
            let text = e.to_string();
            if let Ok(mut f) = self.failed.lock() {
                *f = Some(e);
            }
            text
        });
        let _ = self.run.set(run);
        if let Ok(mut d) = self.done.lock() {
            *d = true;
        }
        self.ready.notify_all();
    }

    /// Stops taking chunks (the writer's sends then fail and it goes on
    /// writing alone).
    pub fn close(&self) {
        if let Ok(mut rx) = self.rx.lock() {
            rx.take();
        }
    }

    /// The finished run (waits for the writer).
    fn run(&self) -> Result<&DataRun> {
        self.close();
        let mut done = self
            .done
            .lock()
            .map_err(|_| Error::invalid("data run writer failed"))?;
        while !*done {
            done = self
                .ready
                .wait(done)
                .map_err(|_| Error::invalid("data run writer failed"))?;
        }
        match self.run.get() {
            Some(Ok(r)) => Ok(r),
            Some(Err(text)) => Err(self
                .failed
                .lock()
                .ok()
                .and_then(|mut f| f.take())
                .unwrap_or_else(|| Error::invalid(text.clone()))),
            None => Err(Error::invalid("the data run was not written")),
        }
    }
}

impl<'a> From<&'a [u64]> for Keys<'a> {
    fn from(keys: &'a [u64]) -> Self {
        Keys::Slice(keys)
    }
}

impl<'a> Keys<'a> {
    /// Number of keys.
    pub fn len(&self) -> usize {
        match self {
            Keys::Slice(k) => k.len(),
            Keys::Run(r) => usize::try_from(r.len()).unwrap_or(usize::MAX),
            Keys::Spill(s) => usize::try_from(s.count()).unwrap_or(usize::MAX),
            // Unknown until the run is written (0 if writing it failed: the
            // build reports that error).
            Keys::Piped(p) => p
                .run()
                .map_or(0, |r| usize::try_from(r.len()).unwrap_or(usize::MAX)),
        }
    }

    /// Keys of a finished run: a piped source waits for it.
    fn settled(&self) -> Result<Keys<'a>> {
        match *self {
            Keys::Piped(p) => p.run().map(Keys::Run),
            k => Ok(k),
        }
    }

    /// Calls `f(i, chunk)` for all keys in order (see
    /// [`for_each_chunk`](Self::for_each_chunk)); returns their number. Over a
    /// piped run the first such pass reads the keys as they are written.
    pub fn for_each_all(&self, mut f: impl FnMut(usize, &[u64]) -> Result<()>) -> Result<usize> {
        if let Keys::Piped(p) = *self {
            let rx = p.rx.lock().ok().and_then(|mut r| r.take());
            if let Some(rx) = rx {
                let mut i = 0usize;
                for chunk in rx {
                    f(i, &chunk)?;
                    i += chunk.len();
                }
                // The writer closed the pipe: the run is written (or failed).
                let n = p.run()?.len();
                if n != i as u64 {
                    return Err(Error::invalid(format!("{i} keys piped but the run holds {n}")));
                }
                return Ok(i);
            }
        }
        let k = self.settled()?;
        let n = k.len();
        k.for_each_chunk(0..n, f)?;
        Ok(n)
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All keys in memory: borrowed from a slice, or read from the run (8
    /// bytes per key: for designs that do not stream yet).
    pub fn to_vec(&self) -> Result<Cow<'a, [u64]>> {
        match *self {
            Keys::Slice(k) => Ok(Cow::Borrowed(k)),
            _ => {
                let mut out = Vec::new();
                self.for_each_all(|_, c| {
                    out.extend_from_slice(c);
                    Ok(())
                })?;
                Ok(Cow::Owned(out))
            }
        }
    }

    /// Keys `range` in memory: borrowed from a slice, read from any other
    /// source (a partition a design works on whole).
    pub fn range_in_memory(&self, range: Range<usize>) -> Result<Cow<'a, [u64]>> {
        if let Keys::Slice(k) = *self {
            return Ok(Cow::Borrowed(k.get(range).unwrap_or_default()));
        }
        let mut held = Vec::with_capacity(range.len());
        self.for_each_chunk(range, |_, c| {
            held.extend_from_slice(c);
            Ok(())
        })?;
        Ok(Cow::Owned(held))
    }

    /// Calls `f(i, chunk)` for the keys `range` in order, `chunk` holding keys
    /// `i..i + chunk.len()`; stops at the first error `f` or a read returns.
    pub fn for_each_chunk(
        &self,
        range: Range<usize>,
        mut f: impl FnMut(usize, &[u64]) -> Result<()>,
    ) -> Result<()> {
        self.for_each_chunk_while(range, |i, c| f(i, c).map(|()| true))
    }

    /// [`for_each_chunk`](Self::for_each_chunk) until `f` returns `false`:
    /// the keys after that chunk are not read.
    pub fn for_each_chunk_while(
        &self,
        range: Range<usize>,
        mut f: impl FnMut(usize, &[u64]) -> Result<bool>,
    ) -> Result<()> {
        let keys = self.settled()?;
        let end = range.end.min(keys.len());
        if range.start >= end {
            return Ok(());
        }
        match keys {
            Keys::Piped(_) => Err(Error::invalid("a piped run is settled first")),
            Keys::Slice(k) => {
                let mut i = range.start;
                while i < end {
                    let j = (i + SLICE_CHUNK).min(end);
                    if !f(i, k.get(i..j).unwrap_or_default())? {
                        break;
                    }
                    i = j;
                }
                Ok(())
            }
            Keys::Spill(s) => {
                let w = s.width();
                let mut chunk = Vec::new();
                s.for_each_block_while(range.start as u64, |j, block| {
                    let j = usize::try_from(j).unwrap_or(usize::MAX);
                    chunk.clear();
                    let take = end.saturating_sub(j);
                    for e in block.chunks_exact(w).take(take) {
                        chunk.push(crate::format::bytes::get_u64(e, 0).unwrap_or(u64::MAX));
                    }
                    Ok(f(j, &chunk)? && j + chunk.len() < end)
                })
            }
            Keys::Run(run) => {
                let meta = run.meta();
                let (first, last) = (meta.page_of(range.start as u64), meta.page_of(end as u64 - 1));
                let mut pass = Pass {
                    run,
                    range: range.start as u64..end as u64,
                    next_page: first,
                    last,
                    planned: Vec::new(),
                    arrived: std::collections::BTreeMap::new(),
                    handed: 0,
                    stopped: false,
                    buf: Vec::with_capacity((PASS_READ_PAGES as usize) * meta.per_page.max(1)),
                    f: &mut f,
                };
                run.storage().read_stream(&mut pass, PASS_QUEUE_DEPTH)?;
                if !pass.stopped && pass.handed < pass.planned.len() {
                    return Err(Error::invalid("a pass over the data run ended early"));
                }
                Ok(())
            }
        }
    }

    /// Calls `f(i, key)` for every key of `range` in order.
    pub fn for_each(&self, range: Range<usize>, mut f: impl FnMut(usize, u64)) -> Result<()> {
        self.for_each_chunk(range, |i, c| {
            for (j, &k) in c.iter().enumerate() {
                f(i + j, k);
            }
            Ok(())
        })
    }

    /// Key `i` (one page read from a run).
    pub fn get(&self, i: usize) -> Result<u64> {
        let mut out = None;
        self.for_each_chunk(i..i + 1, |_, c| {
            out = c.first().copied();
            Ok(())
        })?;
        out.ok_or_else(|| Error::invalid(format!("key {i} of {} requested", self.len())))
    }

    /// Every `stride`-th key, from the first (`ceil(n / stride)` keys).
    pub fn every(&self, stride: usize) -> Result<Vec<u64>> {
        let stride = stride.max(1);
        let mut out = Vec::new();
        self.for_each_all(|i, c| {
            // The first multiple of `stride` at or after `i`.
            let skip = (stride - i % stride) % stride;
            out.extend(c.iter().skip(skip).step_by(stride));
            Ok(())
        })?;
        Ok(out)
    }

    /// Every page's first key, then its last key, for pages of `per_page`
    /// keys (the last page's last key left out when it is its first): the
    /// input the zone maps are designed from.
    pub fn page_bounds(&self, per_page: usize) -> Result<Vec<u64>> {
        let per_page = per_page.max(1);
        let mut out = Vec::new();
        self.for_each_all(|i, c| {
            // The chunk's keys at offsets that start or end a page, in order:
            // from the first page start at or after `i` on, a page at a time.
            let mut j = (per_page - i % per_page) % per_page;
            if let Some(&k) = j.checked_sub(1).and_then(|e| c.get(e)) {
                // The chunk starts inside a page that ends at `j - 1`.
                if per_page > 1 {
                    out.push(k);
                }
            }
            while let Some(&k) = c.get(j) {
                out.push(k);
                if let Some(&l) = c.get(j + per_page - 1).filter(|_| per_page > 1) {
                    out.push(l);
                }
                j += per_page;
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// `f` over the keys cut into about `parts` ranges of at least
    /// `min_part` keys, in parallel (rayon), results in order.
    pub fn map_parts<T: Send>(
        &self,
        min_part: usize,
        f: impl Fn(Range<usize>) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        let n = self.len();
        let parts = (rayon::current_num_threads() * 4).clamp(1, n.div_ceil(min_part.max(1)).max(1));
        let step = n.div_ceil(parts).max(1);
        (0..parts)
            .into_par_iter()
            .map(|p| f((p * step).min(n)..((p + 1) * step).min(n)))
            .collect()
    }
}

/// Keys a window of [`Keys::by_groups`] holds at most (more only when one
/// entry alone covers more). Small in unit tests, so that every grouped step
/// there is cut into several windows.
pub(crate) const WINDOW_KEYS: usize = if cfg!(test) { 64 } else { 1 << 19 };

/// Keys `base..base + len` of `n` sorted keys, in memory: what one step of a
/// design reads ([`Keys::by_groups`]); all of them for keys in memory.
/// Indices are those of all the keys. An entry longer than a window is not
/// held: its keys are read from the run as a step asks for them, in passes
/// ([`Win::each`]), so a step over it holds a read's worth of keys.
#[derive(Debug, Clone, Copy)]
pub struct Win<'a> {
    base: usize,
    keys: &'a [u64],
    n: usize,
    /// Where keys outside `keys` are read from, and the first read that
    /// failed, for [`Keys::by_groups`] to return (the step's result is then
    /// dropped).
    src: Option<(Keys<'a>, &'a Mutex<Option<Error>>)>,
}

impl<'a> Win<'a> {
    /// All keys, in memory.
    pub fn all(keys: &'a [u64]) -> Win<'a> {
        Win {
            base: 0,
            keys,
            n: keys.len(),
            src: None,
        }
    }

    /// Keys `base..base + keys.len()` of an input whose length is not known
    /// yet (a pass still under way): the window's end stands for it.
    pub fn held_at(base: usize, keys: &'a [u64]) -> Win<'a> {
        Win {
            base,
            keys,
            n: base + keys.len(),
            src: None,
        }
    }

    /// Number of keys in all (not in the window).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Key `i`, if there is one (and, in memory, if the window holds it).
    pub fn get(&self, i: usize) -> Option<u64> {
        if let Some(k) = i.checked_sub(self.base).and_then(|d| self.keys.get(d)) {
            return Some(*k);
        }
        let (src, failed) = self.src?;
        if i >= self.n {
            return None;
        }
        src.get(i).map_err(|e| keep_first(failed, e)).ok()
    }

    /// Keys `r` if the window holds them all in memory.
    pub fn held(&self, r: Range<usize>) -> Option<&'a [u64]> {
        let lo = r.start.checked_sub(self.base)?;
        let hi = r.end.checked_sub(self.base)?;
        self.keys.get(lo..hi.max(lo))
    }

    /// Calls `f(i, chunk)` over the keys `r` in order (clipped to the
    /// window, or to all keys for an entry read in passes), `chunk` holding
    /// keys `i..i + chunk.len()`, until `f` returns `false`.
    pub fn each(&self, r: Range<usize>, mut f: impl FnMut(usize, &[u64]) -> bool) {
        match self.src {
            Some((src, failed)) if self.held(r.clone()).is_none() => {
                let r = r.start.min(self.n)..r.end.min(self.n);
                if let Err(e) = src.for_each_chunk_while(r, |i, c| Ok(f(i, c))) {
                    keep_first(failed, e);
                }
            }
            _ => {
                debug_assert!(
                    r.start >= self.base || r.start >= r.end,
                    "keys {r:?} before the window at {}",
                    self.base
                );
                let lo = r.start.saturating_sub(self.base).min(self.keys.len());
                let hi = r.end.saturating_sub(self.base).min(self.keys.len()).max(lo);
                if hi > lo {
                    f(self.base + lo, self.keys.get(lo..hi).unwrap_or_default());
                }
            }
        }
    }
}

/// Keeps `e` in `cell` unless an error is there already.
fn keep_first(cell: &Mutex<Option<Error>>, e: Error) {
    if let Ok(mut c) = cell.lock() {
        c.get_or_insert(e);
    }
}

impl<'a> Keys<'a> {
    /// `f(win, js)` for groups `js` of consecutive entries, entry `j`
    /// covering the keys `starts[j]..starts[j + 1]` (the last one to the
    /// end), with `win` holding the group's keys and the key before them: in
    /// parallel, results in order. Groups hold at most `WINDOW_KEYS` keys;
    /// keys in memory are not copied, keys of a run are read a window at a
    /// time, so a pass holds a window per thread. An entry that alone covers
    /// more keys than a window is a group of its own whose keys are read
    /// from the run as `f` asks for them (`Win::each`, `Win::get`).
    pub fn by_groups<T: Send>(
        &self,
        starts: &[usize],
        f: impl Fn(Win<'_>, Range<usize>) -> T + Sync,
    ) -> Result<Vec<T>> {
        let keys = self.settled()?;
        let n = keys.len();
        let end_of = |j: usize| starts.get(j + 1).copied().unwrap_or(n);
        let mut groups = Vec::new();
        let mut j = 0;
        while let Some(&first) = starts.get(j) {
            let mut k = j + 1;
            while k < starts.len() && end_of(k).saturating_sub(first) <= WINDOW_KEYS {
                k += 1;
            }
            groups.push(j..k);
            j = k;
        }
        // A window buffer is reused from group to group (not allocated for
        // each: freed and allocated again on other threads, the allocator
        // would keep them all).
        groups
            .into_par_iter()
            .map_init(Vec::new, |buf: &mut Vec<u64>, js| {
                let lo = starts.get(js.start).copied().unwrap_or(n).saturating_sub(1);
                let hi = end_of(js.end.saturating_sub(1)).max(lo);
                keys.in_window(lo..hi, buf, |win| f(win, js))
            })
            .collect()
    }

    /// `f(win)` with `win` holding the keys `r` (settled keys): all keys
    /// for keys in memory; else `r` read into `buf`, or, for more keys than
    /// a window, read from the run as `f` asks for them ([`Win::each`]).
    fn in_window<T>(&self, r: Range<usize>, buf: &mut Vec<u64>, f: impl FnOnce(Win<'_>) -> T) -> Result<T> {
        let n = self.len();
        let (lo, hi) = (r.start, r.end.max(r.start));
        match *self {
            Keys::Slice(all) => Ok(f(Win::all(all))),
            keys if hi - lo > WINDOW_KEYS + 1 => {
                // One entry longer than a window: read in passes.
                let failed = Mutex::new(None);
                let win = Win {
                    base: lo,
                    keys: &[],
                    n,
                    src: Some((keys, &failed)),
                };
                let out = f(win);
                match failed.into_inner() {
                    Ok(None) => Ok(out),
                    Ok(Some(e)) => Err(e),
                    Err(_) => Err(Error::invalid("a design step panicked")),
                }
            }
            keys => {
                buf.clear();
                buf.reserve(hi - lo);
                keys.for_each_chunk(lo..hi, |_, c| {
                    buf.extend_from_slice(c);
                    Ok(())
                })?;
                Ok(f(Win {
                    base: lo,
                    keys: buf.as_slice(),
                    n,
                    src: None,
                }))
            }
        }
    }

    /// `f(win)` with `win` holding the keys `r` (see `in_window`), the keys
    /// settled first.
    pub fn window<T>(&self, r: Range<usize>, f: impl FnOnce(Win<'_>) -> T) -> Result<T> {
        self.settled()?.in_window(r, &mut Vec::new(), f)
    }
}

impl crate::model::KeyPasses for Keys<'_> {
    fn count(&self) -> Result<usize> {
        Ok(self.settled()?.len())
    }

    fn pass(&self, range: Range<usize>, f: &mut dyn FnMut(usize, &[u64])) -> Result<()> {
        self.for_each_chunk(range, |i, c| {
            f(i, c);
            Ok(())
        })
    }

    fn pass_all(&self, f: &mut dyn FnMut(usize, &[u64])) -> Result<usize> {
        self.for_each_all(|i, c| {
            f(i, c);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Directory, MemDirectory};
    use std::sync::Arc;

    fn run_of(keys: &[u64], page_size: usize) -> DataRun {
        let dir = MemDirectory::new();
        DataRun::write_ranked(&dir, "r", keys, page_size).unwrap();
        DataRun::open(dir.open_read("r").unwrap()).unwrap()
    }

    #[test]
    fn run_passes_match_the_slice() {
        let keys: Vec<u64> = (0..20_000u64).map(|i| i * 7 + (i % 3)).collect();
        let run = run_of(&keys, 4096);
        let (s, r) = (Keys::Slice(&keys), Keys::Run(&run));
        assert_eq!(r.len(), keys.len());
        assert_eq!(&*r.to_vec().unwrap(), &keys[..]);
        for range in [0..0, 0..1, 5..300, 255..257, 1000..19_999, 19_000..25_000] {
            let mut a = Vec::new();
            let mut b = Vec::new();
            s.for_each(range.clone(), |i, k| a.push((i, k))).unwrap();
            r.for_each(range.clone(), |i, k| b.push((i, k))).unwrap();
            assert_eq!(a, b, "{range:?}");
            let want: Vec<(usize, u64)> = keys
                .iter()
                .copied()
                .enumerate()
                .take(range.end)
                .skip(range.start)
                .collect();
            assert_eq!(a, want, "{range:?}");
        }
        assert_eq!(r.get(12_345).unwrap(), keys[12_345]);
        assert!(r.get(20_000).is_err());
        assert_eq!(r.every(128).unwrap(), s.every(128).unwrap());
        assert_eq!(r.every(128).unwrap().len(), 20_000usize.div_ceil(128));
        assert_eq!(r.page_bounds(255).unwrap(), s.page_bounds(255).unwrap());
        // Page bounds against the definition, pages cut by chunks of either
        // source anywhere (a run hands a read of pages, a slice 65,536 keys).
        // The definition: keys that start or end a page.
        let bounds_of = |keys: &[u64], per_page: usize| -> Vec<u64> {
            keys.iter()
                .enumerate()
                .filter(|(i, _)| i % per_page == 0 || i % per_page + 1 == per_page)
                .map(|(_, &k)| k)
                .collect()
        };
        for per_page in [1usize, 2, 3, 254, 255, 256, 510, 7_000, 19_999, 20_000, 30_000] {
            let want = bounds_of(&keys, per_page);
            assert_eq!(s.page_bounds(per_page).unwrap(), want, "{per_page}");
            assert_eq!(r.page_bounds(per_page).unwrap(), want, "{per_page}");
        }
        let big: Vec<u64> = (0..200_000u64).map(|i| i * 5).collect();
        for per_page in [255usize, 1000, 65_535, 65_537] {
            let want = bounds_of(&big, per_page);
            assert_eq!(
                Keys::Slice(&big).page_bounds(per_page).unwrap(),
                want,
                "{per_page}"
            );
        }
    }

    #[test]
    fn a_pass_hands_reads_on_in_order_whatever_order_they_complete_in() {
        let keys: Vec<u64> = (0..300_000u64).map(|i| i * 3 + (i % 2)).collect();
        let dir = MemDirectory::new();
        DataRun::write_ranked(&dir, "r", &keys, 4096).unwrap();
        let run = DataRun::open(Arc::new(crate::storage::testing::Reversed(
            dir.open_read("r").unwrap(),
        )))
        .unwrap();
        let r = Keys::Run(&run);
        assert_eq!(&*r.to_vec().unwrap(), &keys[..]);
        let mut got = Vec::new();
        r.for_each(1_000..250_001, |i, k| got.push((i, k))).unwrap();
        let want: Vec<(usize, u64)> = keys
            .iter()
            .copied()
            .enumerate()
            .take(250_001)
            .skip(1_000)
            .collect();
        assert!(got == want);
        // An error from the caller stops the pass and is returned.
        let mut calls = 0;
        let e = r
            .for_each_chunk(0..keys.len(), |_, _| {
                calls += 1;
                if calls == 3 {
                    Err(Error::invalid("stop"))
                } else {
                    Ok(())
                }
            })
            .unwrap_err();
        assert!(e.to_string().contains("stop") && calls == 3, "{e}");
        // So does the caller's `false`, without an error, and the pass after
        // it reads everything again.
        let (mut calls, mut seen) = (0, Vec::new());
        r.for_each_chunk_while(0..keys.len(), |i, c| {
            calls += 1;
            seen.push((i, c.len()));
            Ok(calls < 3)
        })
        .unwrap();
        assert_eq!(calls, 3);
        assert!(seen.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0), "{seen:?}");
        assert_eq!(&*r.to_vec().unwrap(), &keys[..]);
    }

    #[test]
    fn a_corrupt_page_is_an_error() {
        let keys: Vec<u64> = (0..5_000u64).collect();
        let dir = MemDirectory::new();
        DataRun::write_ranked(&dir, "r", &keys, 4096).unwrap();
        let f = dir.open_read("r").unwrap();
        let mut bytes = vec![0u8; f.len().unwrap() as usize];
        f.read_at(0, &mut bytes).unwrap();
        bytes[3 * 4096 + 100] ^= 1;
        let bad = MemDirectory::new();
        bad.create("r").unwrap().write_at(0, &bytes).unwrap();
        let run = DataRun::open(bad.open_read("r").unwrap()).unwrap();
        let e = Keys::Run(&run).to_vec().unwrap_err();
        assert!(
            e.to_string().contains("checksum") || e.to_string().contains("corrupt"),
            "{e}"
        );
        // A step over one entry longer than a window reads it in passes
        // (`Win::each`, `Win::get`): the read's error is the pass's, whatever
        // the step made of the keys it got. Only the group of that entry
        // reads its keys: a window holds its own group's keys only (asking
        // another group's window for them trips a debug assertion, which
        // made this test fail now and then in debug builds, when the last
        // group ran before the long one's error stopped the pass).
        for step in 0..2 {
            let e = Keys::Run(&run)
                .by_groups(&[0, 10, 4_990], |win, js| {
                    let mut keys = 0usize;
                    if !js.contains(&1) {
                        return (js, keys);
                    }
                    if step == 0 {
                        win.each(10..4_990, |_, c| {
                            keys += c.len();
                            true
                        });
                    } else {
                        keys += (10..4_990).filter(|&i| win.get(i).is_some()).count();
                    }
                    (js, keys)
                })
                .unwrap_err();
            assert!(e.to_string().contains("corrupt"), "{step}: {e}");
        }
        let _: Arc<dyn Directory> = Arc::new(bad);
    }
}

#[cfg(test)]
mod design_tests {
    //! Every layered kind designs the same layers over keys in memory, read
    //! back from a data run, and piped from the thread writing the run.
    use super::*;
    use crate::index::Params;
    use crate::index::layered::{Design, LAYERED_KINDS};
    use crate::storage::{Directory, MemDirectory};
    use proptest::prelude::*;

    fn same(a: &Design, b: &Design) -> std::result::Result<(), String> {
        if a.layers.len() != b.layers.len() || a.models != b.models {
            return Err(format!(
                "{} vs {} layers, models {:?} vs {:?}",
                a.layers.len(),
                b.layers.len(),
                a.models,
                b.models
            ));
        }
        for (i, (x, y)) in a.layers.iter().zip(&b.layers).enumerate() {
            if x.kind != y.kind || x.flat != y.flat || x.last_successor != y.last_successor {
                return Err(format!("layer {i} differs: {:?} vs {:?}", x.kind, y.kind));
            }
        }
        Ok(())
    }

    /// Designs of every kind (and the sampled PGM) over `keys` three ways.
    fn check(keys: &[u64], page_size: usize) -> std::result::Result<(), String> {
        let dir = MemDirectory::new();
        DataRun::write_ranked(&dir, "r", keys, page_size).map_err(|e| e.to_string())?;
        let run = DataRun::open(dir.open_read("r").map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        let per_page = run.meta().per_page;
        let specs: Vec<(&LayeredKind, Params)> = LAYERED_KINDS
            .iter()
            .map(|k| (k, Params::default()))
            .chain(LAYERED_KINDS.iter().filter(|k| k.name == "pgm").map(|k| {
                (
                    k,
                    "pgm:sample=8,epsilon=2"
                        .parse::<crate::index::IndexSpec>()
                        .map(|s| s.params)
                        .unwrap_or_default(),
                )
            }))
            .collect();
        for (k, params) in specs {
            let want =
                (k.design)(&params, keys, per_page, page_size).map_err(|e| format!("{}: {e}", k.name))?;
            let from_run = k
                .design_in(&params, Keys::Run(&run), per_page, page_size)
                .map_err(|e| e.to_string())?;
            same(&want, &from_run).map_err(|e| format!("{} from the run: {e}", k.name))?;
            // Piped: a writer thread sends the keys in uneven chunks, then
            // hands over the run.
            let (pipe, tx) = Pipe::new();
            let (piped, refused) = std::thread::scope(|s| {
                let w = s.spawn(|| {
                    let (mut i, mut step, mut refused) = (0, 1, 0);
                    while i < keys.len() {
                        let j = (i + step).min(keys.len());
                        refused += tx.send(keys.get(i..j).unwrap_or_default().to_vec()).is_err() as usize;
                        i = j;
                        step = step * 3 % 1000 + 1;
                    }
                    drop(tx);
                    pipe.finish(dir.open_read("r").and_then(DataRun::open));
                    refused
                });
                let d = k.design_in(&params, Keys::Piped(&pipe), per_page, page_size);
                pipe.close();
                (d, w.join().unwrap_or(usize::MAX))
            });
            same(&want, &piped.map_err(|e| e.to_string())?).map_err(|e| format!("{} piped: {e}", k.name))?;
            // Its first pass took every chunk as it was written: no design
            // waits for the whole run before reading.
            if refused > 0 {
                return Err(format!("{}: {refused} chunks not taken from the pipe", k.name));
            }
        }
        Ok(())
    }

    use crate::index::layered::LayeredKind;

    #[test]
    fn streamed_designs_equal_in_memory_ones() {
        let mut rng = 7u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut cases: Vec<Vec<u64>> = vec![
            vec![],
            vec![0],
            vec![u64::MAX],
            (0..5_000).collect(),
            (0..3_000u64).map(|i| u64::MAX - 3_000 + i).collect(),
        ];
        let mut fb: Vec<u64> = (0..40_000).map(|_| next() >> (next() % 40)).collect();
        fb.sort_unstable();
        fb.dedup();
        cases.push(fb);
        // Dense runs separated by huge gaps.
        cases.push(
            (0..20u64)
                .flat_map(|r| (0..700u64).map(move |i| r * (1 << 58) + i * 3))
                .collect(),
        );
        for keys in &cases {
            check(keys, 4096).unwrap();
        }
        check(cases.last().map(Vec::as_slice).unwrap_or_default(), 16384).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn prop_streamed_designs(mut keys in prop::collection::vec(any::<u64>(), 0..3000), shift in 0u32..60) {
            for k in &mut keys {
                *k >>= shift;
            }
            keys.sort_unstable();
            keys.dedup();
            prop_assert_eq!(check(&keys, 4096), Ok(()));
        }
    }

    #[test]
    fn a_design_that_stops_reading_never_blocks_the_writer() {
        let (pipe, tx) = Pipe::new();
        let sent = std::thread::scope(|s| {
            let w = s.spawn(|| {
                let mut sent = 0;
                for i in 0..1_000u64 {
                    if tx.send(vec![i]).is_ok() {
                        sent += 1;
                    }
                }
                sent
            });
            let mut seen = 0;
            let r = Keys::Piped(&pipe).for_each_all(|_, _| {
                seen += 1;
                if seen == 3 {
                    Err(Error::invalid("stop"))
                } else {
                    Ok(())
                }
            });
            assert!(r.is_err());
            pipe.close();
            w.join().unwrap()
        });
        assert!(sent < 1_000, "the writer went on alone after the pipe closed");
        pipe.finish(Err(Error::invalid("no run")));
        assert!(
            Keys::Piped(&pipe)
                .to_vec()
                .unwrap_err()
                .to_string()
                .contains("no run")
        );
    }
}
