//! The k-way cursor: the buffer and every run merged in key order, the
//! newest entry of a key winning, tombstones skipped.

use super::format::Entry;
use super::run::{Errors, Run, read_records, seek};
use super::{Dpgm, State};
use crate::Result;
use crate::index::{Cursor, Record, Residency};
use crate::storage::AlignedBuf;

/// Positions run `i` for a cursor's seek: `(i, run, scratch buffer, the
/// page's entries)` to the position and slot ([`seek`]'s answer).
pub(super) type SeekRun<'a> =
    dyn FnMut(usize, &Run, &mut AlignedBuf, &mut Vec<Entry>) -> Result<(u64, usize)> + 'a;

/// One input of the merge: the records of one page (or of the buffer) from
/// the cursor's position on, and the next page of its run to read.
#[derive(Debug, Default)]
struct Source {
    /// Index of the run in the state (`None`: the buffer).
    run: Option<usize>,
    /// Entries held.
    entries: Vec<Entry>,
    /// Next entry in `entries`.
    at: usize,
    /// Next record page of the run to read (past the end: none).
    next_page: u64,
}

/// A [`Cursor`] over a [`Dpgm`]. A seek locates the key in the buffer and in
/// every run whose key range reaches it (the reads of a lookup per run);
/// `next` reads one record page of a run when the entries held from it are
/// used up. It holds the lock only during a call; when the index changed
/// since (its epoch moved), it seeks again after the last key returned.
#[derive(Debug)]
pub(super) struct DpgmCursor<'a> {
    idx: &'a Dpgm,
    /// Epoch of the state the sources were read from (`None`: not yet).
    epoch: Option<u64>,
    sources: Vec<Source>,
    /// Where to seek again after a change: the key after the last one
    /// returned (`None`: past `u64::MAX`, nothing is left).
    resume: Option<u64>,
    buf: AlignedBuf,
}

impl<'a> DpgmCursor<'a> {
    /// A cursor before the first record.
    pub(super) fn new(idx: &'a Dpgm) -> Self {
        DpgmCursor {
            idx,
            epoch: None,
            sources: Vec::new(),
            resume: Some(0),
            buf: AlignedBuf::zeroed(0),
        }
    }

    /// Positions every source at the lower bound of `key`.
    fn load(&mut self, st: &State, key: u64) -> Result<()> {
        let idx = self.idx;
        let buffer = match idx.residency {
            Residency::None if st.meta.buffer_count > 0 => idx.read_buffer(&st.meta, &mut self.buf)?,
            _ => st.buffer.clone(),
        };
        let err = Errors::of(&st.meta);
        self.load_with(st, key, buffer, &mut |_, r, buf, entries| {
            seek(&idx.pager, r, key, err, buf, entries)
        })
    }

    /// Positions every source at the lower bound of `key`, from the buffer's
    /// entries and `seek_run(i, run, scratch, entries)`, which positions run
    /// `i` (within its key range, above its first key) like
    /// [`seek`](super::run::seek): its position and slot, its page in
    /// `entries`.
    pub(super) fn load_with(
        &mut self,
        st: &State,
        key: u64,
        buffer: Vec<Entry>,
        seek_run: &mut SeekRun<'_>,
    ) -> Result<()> {
        let ps = self.idx.page_size;
        self.sources.clear();
        let from = buffer.partition_point(|e| e.key < key);
        self.sources.push(Source {
            run: None,
            entries: buffer,
            at: from,
            next_page: u64::MAX,
        });
        for (i, r) in st.runs.iter().enumerate() {
            let mut s = Source {
                run: Some(i),
                ..Default::default()
            };
            if key > r.desc.max {
                s.next_page = u64::MAX;
            } else if key > r.desc.min {
                let (pp, slot) = seek_run(i, r, &mut self.buf, &mut s.entries)?;
                s.at = slot;
                s.next_page = pp / super::format::leaf_capacity(ps).max(1) as u64 + 1;
            }
            self.sources.push(s);
        }
        self.epoch = Some(st.epoch);
        self.resume = Some(key);
        Ok(())
    }

    /// The next live record under the lock.
    pub(super) fn next_locked(&mut self, st: &State) -> Result<Option<Record>> {
        if self.epoch != Some(st.epoch) {
            match self.resume {
                Some(k) => self.load(st, k)?,
                None => return Ok(None),
            }
        }
        loop {
            let mut best: Option<(u64, usize)> = None;
            for i in 0..self.sources.len() {
                let Some(k) = self.head(st, i)? else { continue };
                if best.is_none_or(|(bk, _)| k < bk) {
                    best = Some((k, i));
                }
            }
            let Some((key, winner)) = best else {
                self.resume = None;
                return Ok(None);
            };
            let mut won = None;
            for (i, s) in self.sources.iter_mut().enumerate() {
                if s.entries.get(s.at).is_some_and(|e| e.key == key) {
                    if i == winner {
                        won = s.entries.get(s.at).copied();
                    }
                    s.at += 1;
                }
            }
            self.resume = key.checked_add(1);
            match won {
                Some(e) if !e.dead => return Ok(Some((e.key, e.value))),
                _ if self.resume.is_none() => return Ok(None),
                _ => {}
            }
        }
    }

    /// The key at the head of source `i`, reading its next page if needed.
    fn head(&mut self, st: &State, i: usize) -> Result<Option<u64>> {
        let idx = self.idx;
        let ps = idx.page_size;
        let Some(s) = self.sources.get_mut(i) else {
            return Ok(None);
        };
        while s.at >= s.entries.len() {
            let Some(r) = s.run.and_then(|r| st.runs.get(r)) else {
                return Ok(None);
            };
            if s.next_page >= r.desc.leaf_pages(ps) {
                return Ok(None);
            }
            read_records(&idx.pager, &r.desc, s.next_page, &mut self.buf, &mut s.entries)?;
            s.at = 0;
            s.next_page += 1;
        }
        Ok(s.entries.get(s.at).map(|e| e.key))
    }
}

impl Cursor for DpgmCursor<'_> {
    fn seek(&mut self, key: u64) -> Result<()> {
        let idx = self.idx;
        let st = idx.state.read();
        self.load(&st, key)
    }

    fn next(&mut self) -> Result<Option<Record>> {
        let idx = self.idx;
        let st = idx.state.read();
        self.next_locked(&st)
    }

    /// Takes the shared lock once for the whole batch.
    fn next_batch(&mut self, count: usize, out: &mut Vec<Record>) -> Result<usize> {
        let idx = self.idx;
        let st = idx.state.read();
        let mut n = 0;
        while n < count {
            match self.next_locked(&st)? {
                Some(r) => out.push(r),
                None => break,
            }
            n += 1;
        }
        Ok(n)
    }
}
