//! Reading records out of a data run: last-mile search and range scans,
//! shared by every static index kind.

use super::{ApproxPos, Cursor, Record};
use crate::format::{DataRun, PageRun};
use crate::{Error, Result};

/// How the pages of a predicted range are fetched (Zhang G1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fetch {
    /// All pages of the predicted range in one read call.
    #[default]
    AllAtOnce,
    /// Page after page from the start of the range until the key's page.
    OneByOne,
}

impl std::str::FromStr for Fetch {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "all-at-once" | "all" => Ok(Fetch::AllAtOnce),
            "one-by-one" | "one" => Ok(Fetch::OneByOne),
            _ => Err(Error::invalid(format!(
                "fetch must be all-at-once or one-by-one, got {s:?}"
            ))),
        }
    }
}

/// Where a key's lower bound is, with the pages read to find it.
#[derive(Debug)]
pub(crate) struct Located {
    /// Item index of the first key `>=` the query (`n` if none).
    pub lb: u64,
    /// The pages read last; they hold `lb` unless `lb` is at `hi` of the
    /// predicted range and on the next page.
    pub run: Option<PageRun>,
}

/// Where many keys' lower bounds are ([`DataRunReader::locate_many`]).
#[derive(Debug)]
pub(crate) struct LocatedMany {
    /// Lower bound of each key.
    pub lb: Vec<u64>,
    /// The run (in `runs`) each key read last, if it read any.
    pub run_of: Vec<Option<usize>>,
    /// The page runs read.
    pub runs: Vec<PageRun>,
}

impl LocatedMany {
    /// The record at key `i`'s lower bound, if the pages it read hold it.
    pub(crate) fn record(&self, i: usize) -> Option<Record> {
        let lb = *self.lb.get(i)?;
        let run = self.runs.get((*self.run_of.get(i)?)?)?;
        run.record(lb)
    }
}

/// Last-mile search and scans over a [`DataRun`].
#[derive(Debug, Clone)]
pub(crate) struct DataRunReader {
    run: DataRun,
}

impl DataRunReader {
    /// Wraps an open data run.
    pub(crate) fn new(run: DataRun) -> Self {
        DataRunReader { run }
    }

    /// The data run.
    pub(crate) fn run(&self) -> &DataRun {
        &self.run
    }

    /// Number of records.
    pub(crate) fn len(&self) -> u64 {
        self.run.len()
    }

    /// Finds the lower bound of `key` given a range that contains it:
    /// `lb ∈ [approx.lo, approx.hi]`. Reads only pages overlapping
    /// `[lo, hi)` (plus, with one-by-one, stops at the key's page).
    pub(crate) fn locate(&self, key: u64, approx: ApproxPos, fetch: Fetch) -> Result<Located> {
        let n = self.run.len();
        let lo = approx.lo.min(n);
        let hi = approx.hi.min(n).max(lo);
        if lo == hi {
            return Ok(Located { lb: lo, run: None });
        }
        let meta = *self.run.meta();
        let first = meta.page_of(lo);
        let last = meta.page_of(hi - 1);
        match fetch {
            Fetch::AllAtOnce => {
                let run = self.run.read_pages(first, last + 1)?;
                let lb = run.lower_bound(key, lo, hi);
                Ok(Located { lb, run: Some(run) })
            }
            Fetch::OneByOne => {
                let mut p = first;
                loop {
                    let run = self.run.read_page(p)?;
                    let (_, page_hi) = run.item_range();
                    let stop = hi.min(page_hi);
                    let lb = run.lower_bound(key, lo, stop);
                    if lb < stop || p == last {
                        return Ok(Located { lb, run: Some(run) });
                    }
                    p += 1;
                }
            }
        }
    }

    /// [`DataRunReader::locate`] for many keys at once (any order), each
    /// with its predicted range: the same pages per key, read in rounds
    /// with up to `queue_depth` reads in flight (one round with all at
    /// once, one per page visited with one by one).
    pub(crate) fn locate_many(
        &self,
        keys: &[u64],
        approx: &[ApproxPos],
        fetch: Fetch,
        queue_depth: usize,
    ) -> Result<LocatedMany> {
        let n = self.run.len();
        let meta = *self.run.meta();
        let mut out = LocatedMany {
            lb: vec![0; keys.len()],
            run_of: vec![None; keys.len()],
            runs: Vec::new(),
        };
        // Keys still open: (key index, next page, last page, lo, hi).
        let mut open: Vec<(usize, u64, u64, u64, u64)> = Vec::new();
        for (i, (&key, a)) in keys.iter().zip(approx).enumerate() {
            let _ = key;
            let lo = a.lo.min(n);
            let hi = a.hi.min(n).max(lo);
            if lo == hi {
                if let Some(lb) = out.lb.get_mut(i) {
                    *lb = lo;
                }
                continue;
            }
            open.push((i, meta.page_of(lo), meta.page_of(hi - 1), lo, hi));
        }
        while !open.is_empty() {
            let mut set = super::batch::RangeSet::default();
            let wanted: Vec<usize> = open
                .iter()
                .map(|&(_, p, last, _, _)| match fetch {
                    Fetch::AllAtOnce => set.add(p, last + 1),
                    Fetch::OneByOne => set.add(p, p + 1),
                })
                .collect();
            let base = out.runs.len();
            out.runs
                .extend(set.read(|r| self.run.read_pages_many(r, queue_depth))?);
            let mut still = Vec::new();
            for (&(i, p, last, lo, hi), w) in open.iter().zip(wanted) {
                let Some(run) = out.runs.get(base + w) else {
                    continue;
                };
                let key = keys.get(i).copied().unwrap_or(0);
                let stop = match fetch {
                    Fetch::AllAtOnce => hi,
                    Fetch::OneByOne => hi.min(run.item_range().1),
                };
                let lb = run.lower_bound(key, lo, stop);
                if fetch == Fetch::AllAtOnce || lb < stop || p == last {
                    if let (Some(l), Some(r)) = (out.lb.get_mut(i), out.run_of.get_mut(i)) {
                        *l = lb;
                        *r = Some(base + w);
                    }
                } else {
                    still.push((i, p + 1, last, lo, hi));
                }
            }
            open = still;
        }
        Ok(out)
    }

    /// The values of `keys` (each `None` if absent), from
    /// [`DataRunReader::locate_many`]'s reads.
    pub(crate) fn get_many(
        &self,
        keys: &[u64],
        approx: &[ApproxPos],
        fetch: Fetch,
        queue_depth: usize,
    ) -> Result<Vec<Option<u64>>> {
        let loc = self.locate_many(keys, approx, fetch, queue_depth)?;
        Ok(keys
            .iter()
            .enumerate()
            .map(|(i, &key)| loc.record(i).filter(|r| r.0 == key).map(|r| r.1))
            .collect())
    }

    /// The lower bounds of `keys`: [`DataRunReader::locate_many`], then one
    /// more batch for the keys whose lower bound is on the page after the
    /// pages they read (as [`DataRunReader::record_at`] reads it).
    pub(crate) fn lower_bound_many(
        &self,
        keys: &[u64],
        approx: &[ApproxPos],
        fetch: Fetch,
        queue_depth: usize,
    ) -> Result<Vec<Option<Record>>> {
        let loc = self.locate_many(keys, approx, fetch, queue_depth)?;
        let n = self.run.len();
        let mut answers: Vec<Option<Record>> = Vec::with_capacity(keys.len());
        let mut set = super::batch::RangeSet::default();
        let mut later: Vec<(usize, usize)> = Vec::new();
        for i in 0..keys.len() {
            let lb = loc.lb.get(i).copied().unwrap_or(n);
            match loc.record(i) {
                Some(r) => answers.push(Some(r)),
                None if lb >= n => answers.push(None),
                None => {
                    let p = self.run.meta().page_of(lb);
                    later.push((i, set.add(p, p + 1)));
                    answers.push(None);
                }
            }
        }
        let pages = set.read(|r| self.run.read_pages_many(r, queue_depth))?;
        for (i, w) in later {
            let lb = loc.lb.get(i).copied().unwrap_or(n);
            let rec = pages.get(w).and_then(|p| p.record(lb)).ok_or_else(|| {
                Error::corruption(
                    self.run.storage().name(),
                    self.run.meta().page_of(lb) + 1,
                    "record missing from page",
                )
            })?;
            if let Some(a) = answers.get_mut(i) {
                *a = Some(rec);
            }
        }
        Ok(answers)
    }

    /// The record at item `i`, reusing `run` if it holds it.
    pub(crate) fn record_at(&self, i: u64, run: Option<&PageRun>) -> Result<Option<Record>> {
        if i >= self.run.len() {
            return Ok(None);
        }
        if let Some(r) = run.and_then(|r| r.record(i)) {
            return Ok(Some(r));
        }
        let page = self.run.read_page(self.run.meta().page_of(i))?;
        Ok(page.record(i))
    }

    /// Point lookup with a predicted range.
    pub(crate) fn get(&self, key: u64, approx: ApproxPos, fetch: Fetch) -> Result<Option<u64>> {
        let loc = self.locate(key, approx, fetch)?;
        Ok(loc
            .run
            .as_ref()
            .and_then(|r| r.record(loc.lb))
            .filter(|r| r.0 == key)
            .map(|r| r.1))
    }

    /// Lower bound with a predicted range.
    pub(crate) fn lower_bound(&self, key: u64, approx: ApproxPos, fetch: Fetch) -> Result<Option<Record>> {
        let loc = self.locate(key, approx, fetch)?;
        self.record_at(loc.lb, loc.run.as_ref())
    }

    /// A cursor over the run that seeks with `predict` and `fetch`: the
    /// pages a [`DataRunReader::lower_bound`] reads, then page by page.
    pub(crate) fn cursor<'a>(
        &'a self,
        fetch: Fetch,
        predict: impl Fn(u64) -> Result<ApproxPos> + 'a,
    ) -> DataRunCursor<'a, impl Fn(u64) -> Result<Located> + 'a> {
        DataRunCursor::new(&self.run, move |key| self.locate(key, predict(key)?, fetch))
    }
}

/// A position in a data run with the pages read last.
#[derive(Debug)]
struct RunPosition<'a> {
    run: &'a DataRun,
    /// The pages read last (they may or may not hold `pos`).
    pages: Option<PageRun>,
    /// Item index of the next record.
    pos: u64,
}

impl RunPosition<'_> {
    fn missing(&self, i: u64) -> Error {
        Error::corruption(
            self.run.storage().name(),
            self.run.meta().page_of(i) + 1,
            "record missing from page",
        )
    }

    /// The record at `pos`, reading its page (one page) if the pages held
    /// do not have it.
    fn next(&mut self) -> Result<Option<Record>> {
        let i = self.pos;
        if i >= self.run.len() {
            return Ok(None);
        }
        let rec = match self.pages.as_ref().and_then(|r| r.record(i)) {
            Some(rec) => rec,
            None => {
                let page = self.run.read_page(self.run.meta().page_of(i))?;
                let rec = page.record(i).ok_or_else(|| self.missing(i))?;
                self.pages = Some(page);
                rec
            }
        };
        self.pos = i + 1;
        Ok(Some(rec))
    }

    /// Appends up to `count` records: those in the pages held, then the
    /// rest from one read call covering every page they need.
    fn next_batch(&mut self, count: usize, out: &mut Vec<Record>) -> Result<usize> {
        let end = self.pos.saturating_add(count as u64).min(self.run.len());
        let start = self.pos;
        if start >= end {
            return Ok(0);
        }
        let mut i = start;
        if let Some(r) = &self.pages {
            let (_, rhi) = r.item_range();
            while i < end && i < rhi {
                match r.record(i) {
                    Some(rec) => out.push(rec),
                    None => break,
                }
                i += 1;
            }
        }
        if i < end {
            let meta = self.run.meta();
            let rest = self.run.read_pages(meta.page_of(i), meta.page_of(end - 1) + 1)?;
            while i < end {
                let rec = rest.record(i).ok_or_else(|| self.missing(i))?;
                out.push(rec);
                i += 1;
            }
            self.pages = Some(rest);
        }
        self.pos = end;
        Ok((end - start) as usize)
    }
}

/// A [`Cursor`] over a data run: `seek` calls the kind's `locate` (its
/// model's prediction and last-mile search, or a binary search), `next`
/// reads one page when the pages held are used up, and `next_batch` reads
/// every further page it needs in one call.
pub(crate) struct DataRunCursor<'a, F> {
    at: RunPosition<'a>,
    locate: F,
}

impl<F> std::fmt::Debug for DataRunCursor<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataRunCursor")
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

impl<'a, F: Fn(u64) -> Result<Located>> DataRunCursor<'a, F> {
    /// A cursor over `run`, before its first record; `locate(key)` must
    /// return the lower bound of `key` in `run` (with the pages it read).
    pub(crate) fn new(run: &'a DataRun, locate: F) -> Self {
        DataRunCursor {
            at: RunPosition {
                run,
                pages: None,
                pos: 0,
            },
            locate,
        }
    }
}

impl<F: Fn(u64) -> Result<Located>> Cursor for DataRunCursor<'_, F> {
    fn seek(&mut self, key: u64) -> Result<()> {
        let loc = (self.locate)(key)?;
        self.at.pos = loc.lb;
        self.at.pages = loc.run;
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Record>> {
        self.at.next()
    }

    fn next_batch(&mut self, count: usize, out: &mut Vec<Record>) -> Result<usize> {
        self.at.next_batch(count, out)
    }
}
