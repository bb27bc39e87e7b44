//! Reading records out of a data run: last-mile search and range scans,
//! shared by every static index kind.

use super::{ApproxPos, Cursor, Record};
use crate::format::{DataRun, PageRun};
use crate::storage::{AlignedBuf, ReadStream, StreamRead};
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

    /// The values of `keys` (ascending; each `None` if absent), the
    /// predicted range of key `i` given by `predict(i)`: the pages each
    /// key's one-by-one lookup reads ([`DataRunReader::locate`]), up to
    /// `queue_depth` reads in flight, each key predicted as the storage asks
    /// for a read and searched as its pages arrive ([`Lookups`]).
    pub(crate) fn get_many(
        &self,
        keys: &[u64],
        predict: impl FnMut(usize) -> Result<ApproxPos>,
        fetch: Fetch,
        queue_depth: usize,
    ) -> Result<Vec<Option<u64>>> {
        let answers = self.lookups(keys, predict, fetch, Goal::Get, queue_depth)?;
        Ok(answers.into_iter().map(|r| r.map(|r| r.1)).collect())
    }

    /// The lower bounds of `keys` (ascending), as [`DataRunReader::get_many`]
    /// finds them, plus a read of the next page for the keys whose lower
    /// bound lies after the pages they read (as
    /// [`DataRunReader::record_at`] reads it).
    pub(crate) fn lower_bound_many(
        &self,
        keys: &[u64],
        predict: impl FnMut(usize) -> Result<ApproxPos>,
        fetch: Fetch,
        queue_depth: usize,
    ) -> Result<Vec<Option<Record>>> {
        self.lookups(keys, predict, fetch, Goal::LowerBound, queue_depth)
    }

    fn lookups(
        &self,
        keys: &[u64],
        predict: impl FnMut(usize) -> Result<ApproxPos>,
        fetch: Fetch,
        goal: Goal,
        queue_depth: usize,
    ) -> Result<Vec<Option<Record>>> {
        let mut stream = Lookups {
            reader: self,
            keys,
            predict,
            fetch,
            goal,
            next_key: 0,
            ahead: None,
            steps: vec![Step::Done; keys.len()],
            follow: std::collections::VecDeque::new(),
            reqs: Vec::new(),
            answers: vec![None; keys.len()],
        };
        self.run.storage().read_stream(&mut stream, queue_depth)?;
        Ok(stream.answers)
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

/// Pages a read of a batched lookup may grow to when it takes the
/// overlapping ranges of the keys after the first.
const MAX_COALESCED_PAGES: u64 = 16;

/// What a batched lookup answers for each key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// The record with the key, if any.
    Get,
    /// The first record at or after the key.
    LowerBound,
}

/// Where a key of a batched lookup is.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Searching its predicted items `[lo, hi)`: pages `p..=last` are
    /// still to read (all at once, or from `p` one by one).
    Search { lo: u64, hi: u64, p: u64, last: u64 },
    /// Its lower bound is item `lb`, on a page still to read.
    Fetch(u64),
    /// Answered.
    Done,
}

/// One read of a batched lookup: data pages `[a, b)` and the keys waiting
/// for them.
#[derive(Debug)]
struct PageReq {
    a: u64,
    b: u64,
    keys: Vec<usize>,
}

/// The lookups of a batch as a [`ReadStream`]: `next` predicts keys in
/// order until one needs other pages than the keys before it (keys needing
/// the same pages share one read, and with all-at-once fetching keys whose
/// ranges overlap or touch share a read of their union, up to
/// [`MAX_COALESCED_PAGES`]), `done` searches the pages for their
/// keys and queues the reads some still need (the next page with
/// [`Fetch::OneByOne`], a lower bound's page after its range).
struct Lookups<'r, P> {
    reader: &'r DataRunReader,
    keys: &'r [u64],
    predict: P,
    fetch: Fetch,
    goal: Goal,
    /// The next key to predict.
    next_key: usize,
    /// A key predicted after the last read was made, for the next one.
    ahead: Option<(usize, Step)>,
    steps: Vec<Step>,
    /// Reads queued by `done`, issued before new keys are predicted.
    follow: std::collections::VecDeque<PageReq>,
    /// Every read issued, by sequence number (keys taken when done).
    reqs: Vec<PageReq>,
    answers: Vec<Option<Record>>,
}

impl<P: FnMut(usize) -> Result<ApproxPos>> Lookups<'_, P> {
    /// Predicts key `i`: its first step, or `Done` if it needs no read.
    fn start(&mut self, i: usize) -> Result<Step> {
        let n = self.reader.run.len();
        let a = (self.predict)(i)?;
        let lo = a.lo.min(n);
        let hi = a.hi.min(n).max(lo);
        if lo == hi {
            // The lower bound is `lo` without a read; a get finds nothing
            // (the key would lie in `[lo, hi)`).
            return Ok(match self.goal {
                Goal::LowerBound if lo < n => Step::Fetch(lo),
                _ => Step::Done,
            });
        }
        let meta = self.reader.run.meta();
        Ok(Step::Search {
            lo,
            hi,
            p: meta.page_of(lo),
            last: meta.page_of(hi - 1),
        })
    }

    /// The pages `[a, b)` a step reads next.
    fn pages(&self, step: Step) -> Option<(u64, u64)> {
        match step {
            Step::Search { p, last, .. } => Some(match self.fetch {
                Fetch::AllAtOnce => (p, last + 1),
                Fetch::OneByOne => (p, p + 1),
            }),
            Step::Fetch(lb) => {
                let p = self.reader.run.meta().page_of(lb);
                Some((p, p + 1))
            }
            Step::Done => None,
        }
    }

    /// Queues a read of pages `[a, b)` for key `i` (sharing the last queued
    /// read if it is the same).
    fn follow(&mut self, a: u64, b: u64, i: usize) {
        match self.follow.back_mut() {
            Some(r) if r.a == a && r.b == b => r.keys.push(i),
            _ => self.follow.push_back(PageReq { a, b, keys: vec![i] }),
        }
    }

    fn issue(&mut self, r: PageReq) -> Result<StreamRead> {
        let (b, read) = self.reader.run.range_read(r.a, r.b)?;
        self.reqs.push(PageReq { b, ..r });
        Ok(read)
    }

    /// Key `i`'s answer from its lower bound `lb`, found in `run` (which
    /// may end before `lb`).
    fn settle(&mut self, i: usize, key: u64, lb: u64, run: &PageRun) {
        let n = self.reader.run.len();
        let answer = match (run.record(lb), self.goal) {
            (Some(r), Goal::Get) => (r.0 == key).then_some(r),
            (Some(r), Goal::LowerBound) => Some(r),
            (None, Goal::LowerBound) if lb < n => {
                let p = self.reader.run.meta().page_of(lb);
                if let Some(s) = self.steps.get_mut(i) {
                    *s = Step::Fetch(lb);
                }
                self.follow(p, p + 1, i);
                return;
            }
            (None, _) => None,
        };
        if let Some(a) = self.answers.get_mut(i) {
            *a = answer;
        }
        if let Some(s) = self.steps.get_mut(i) {
            *s = Step::Done;
        }
    }
}

impl<P: FnMut(usize) -> Result<ApproxPos>> ReadStream for Lookups<'_, P> {
    fn next(&mut self) -> Result<Option<StreamRead>> {
        if let Some(r) = self.follow.pop_front() {
            return self.issue(r).map(Some);
        }
        let mut cur: Option<PageReq> = None;
        loop {
            let (i, step) = match self.ahead.take() {
                Some(x) => x,
                None => {
                    let Some(i) = (self.next_key < self.keys.len()).then_some(self.next_key) else {
                        break;
                    };
                    self.next_key += 1;
                    (i, self.start(i)?)
                }
            };
            if let Some(s) = self.steps.get_mut(i) {
                *s = step;
            }
            let Some((a, b)) = self.pages(step) else {
                continue;
            };
            match &mut cur {
                None => cur = Some(PageReq { a, b, keys: vec![i] }),
                Some(c) if c.a == a && c.b == b => c.keys.push(i),
                // Keys in order whose ranges overlap or touch (dense probes,
                // such as a join's): one read of their union, each page read
                // once.
                Some(c)
                    if self.fetch == Fetch::AllAtOnce
                        && c.a <= a
                        && a <= c.b
                        && b.max(c.b) - c.a <= MAX_COALESCED_PAGES =>
                {
                    c.b = c.b.max(b);
                    c.keys.push(i);
                }
                Some(_) => {
                    self.ahead = Some((i, step));
                    break;
                }
            }
        }
        cur.map(|c| self.issue(c)).transpose()
    }

    fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()> {
        let (a, b, waiting) = match self.reqs.get_mut(seq) {
            Some(r) => (r.a, r.b, std::mem::take(&mut r.keys)),
            None => return Err(Error::invalid("completed read out of range")),
        };
        let run = self.reader.run.run_from(a, b, buf)?;
        // The keys waiting for a read come in ascending order, so each one's
        // lower bound is at or after the one before's (Chesetti & Pandey's
        // second join optimisation): its search starts there.
        let mut floor = 0u64;
        for i in waiting {
            let key = self.keys.get(i).copied().unwrap_or(0);
            match self.steps.get(i).copied().unwrap_or(Step::Done) {
                Step::Search { lo, hi, p, last } => {
                    let stop = match self.fetch {
                        Fetch::AllAtOnce => hi,
                        Fetch::OneByOne => hi.min(run.item_range().1),
                    };
                    let lb = if floor > lo {
                        run.lower_bound_near(key, floor.min(stop), stop)
                    } else {
                        run.lower_bound(key, lo, stop)
                    };
                    floor = lb;
                    if self.fetch == Fetch::AllAtOnce || lb < stop || p == last {
                        self.settle(i, key, lb, &run);
                    } else {
                        if let Some(s) = self.steps.get_mut(i) {
                            *s = Step::Search {
                                lo,
                                hi,
                                p: p + 1,
                                last,
                            };
                        }
                        self.follow(p + 1, p + 2, i);
                    }
                }
                Step::Fetch(lb) => {
                    let rec = run.record(lb).ok_or_else(|| {
                        Error::corruption(
                            self.reader.run.storage().name(),
                            self.reader.run.meta().page_of(lb) + 1,
                            "record missing from page",
                        )
                    })?;
                    if let Some(a) = self.answers.get_mut(i) {
                        *a = Some(rec);
                    }
                    if let Some(s) = self.steps.get_mut(i) {
                        *s = Step::Done;
                    }
                }
                Step::Done => {}
            }
        }
        Ok(())
    }
}
