//! Reading records out of a data run: last-mile search and range scans,
//! shared by every static index kind.

use std::collections::VecDeque;

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

    /// The values of `keys` (ascending, distinct; each `None` if absent),
    /// the predicted range of key `i` given by `predict(i)`: the pages each
    /// key's one-by-one lookup reads ([`DataRunReader::locate`]), with
    /// all-at-once fetching each page once per batch however the ranges
    /// overlap ([`Sweep`]: the keys merged with their windows' pages), or
    /// page by page with one-by-one fetching ([`Lookups`]); up to
    /// `queue_depth` reads in flight, each key predicted as the storage
    /// asks for a read and searched as its pages arrive.
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
        if !keys.windows(2).all(|w| matches!(w, [a, b] if a < b)) {
            return Err(Error::invalid(
                "the keys of a batched lookup must be ascending and distinct",
            ));
        }
        match fetch {
            Fetch::AllAtOnce => {
                let mut stream = Sweep::new(self, keys, predict, goal);
                self.run.storage().read_stream(&mut stream, queue_depth)?;
                if stream.mk < keys.len() || !stream.after.is_empty() {
                    return Err(Error::invalid("a batched lookup ended with keys unanswered"));
                }
                Ok(stream.answers)
            }
            Fetch::OneByOne => {
                let mut stream = Lookups::new(self, keys, predict, goal);
                self.run.storage().read_stream(&mut stream, queue_depth)?;
                Ok(stream.answers)
            }
        }
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

/// Pages a read of a batched lookup grows to when it takes the new pages
/// of the keys after its first.
const MAX_COALESCED_PAGES: u64 = 16;

/// Keys an all-at-once batched lookup steps over without predicting them
/// when they are dense ([`Sweep`]).
const STRIDE: usize = 16;

/// Keys predicted one by one after a stride failed, before the next try.
const STRIDE_BACKOFF: usize = 64;

/// What a batched lookup answers for each key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// The record with the key, if any.
    Get,
    /// The first record at or after the key.
    LowerBound,
}

/// Where a key of a one-by-one batched lookup is.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Searching its predicted items `[lo, hi)`, pages `p..=last` still
    /// to read from `p`.
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

/// The lower bound key `.0` found in some pages, `.1`: a later key's is
/// at or after it.
type Hint = Option<(usize, u64)>;

/// Where key `i`'s search of items `[s, t)` in `run` may start: at `hint`
/// if a smaller key found its lower bound there, which is after `s`.
fn search_from(run: &PageRun, i: usize, key: u64, s: u64, t: u64, hint: &mut Hint) -> u64 {
    let lb = match *hint {
        Some((j, h)) if j < i && h > s => run.lower_bound_near(key, h.min(t), t),
        _ => run.lower_bound(key, s, t),
    };
    *hint = Some((i, lb));
    lb
}

/// The answer for `key` from the record at its lower bound.
fn answer_of(goal: Goal, key: u64, rec: Option<Record>) -> Option<Record> {
    match goal {
        Goal::Get => rec.filter(|r| r.0 == key),
        Goal::LowerBound => rec,
    }
}

/// The lookups of a batch fetching one by one, as a [`ReadStream`]: each
/// key reads its pages one at a time (keys in a row wanting the same page
/// share the read), as [`DataRunReader::locate`] does for one key.
struct Lookups<'r, P> {
    reader: &'r DataRunReader,
    keys: &'r [u64],
    predict: P,
    goal: Goal,
    /// The next key to predict.
    next_key: usize,
    /// A key predicted after the last read was made, for the next one.
    ahead: Option<(usize, Step)>,
    steps: Vec<Step>,
    /// Reads queued by `done`, issued before new keys are predicted.
    follow: VecDeque<PageReq>,
    /// Every read issued, by sequence number (keys taken when done).
    reqs: Vec<PageReq>,
    answers: Vec<Option<Record>>,
}

impl<P: FnMut(usize) -> Result<ApproxPos>> Lookups<'_, P> {
    fn new<'r>(reader: &'r DataRunReader, keys: &'r [u64], predict: P, goal: Goal) -> Lookups<'r, P> {
        Lookups {
            reader,
            keys,
            predict,
            goal,
            next_key: 0,
            ahead: None,
            steps: vec![Step::Done; keys.len()],
            follow: VecDeque::new(),
            reqs: Vec::new(),
            answers: vec![None; keys.len()],
        }
    }

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

    fn set_step(&mut self, i: usize, step: Step) {
        if let Some(s) = self.steps.get_mut(i) {
            *s = step;
        }
    }

    fn answer(&mut self, i: usize, answer: Option<Record>) {
        if let Some(a) = self.answers.get_mut(i) {
            *a = answer;
        }
        self.set_step(i, Step::Done);
    }

    fn missing(&self, lb: u64) -> Error {
        missing_record(self.reader, lb)
    }

    /// Key `i`'s answer from its lower bound `lb`, found in `run` (which
    /// may end before `lb`).
    fn settle(&mut self, i: usize, key: u64, lb: u64, run: &PageRun) {
        let n = self.reader.run.len();
        let answer = match (run.record(lb), self.goal) {
            (None, Goal::LowerBound) if lb < n => {
                let p = self.reader.run.meta().page_of(lb);
                self.set_step(i, Step::Fetch(lb));
                self.follow(p, p + 1, i);
                return;
            }
            (rec, goal) => answer_of(goal, key, rec),
        };
        self.answer(i, answer);
    }

    /// The next key: the one held back from the last read, or the next
    /// predicted.
    fn next_key(&mut self) -> Result<Option<(usize, Step)>> {
        if let Some(x) = self.ahead.take() {
            return Ok(Some(x));
        }
        if self.next_key >= self.keys.len() {
            return Ok(None);
        }
        let i = self.next_key;
        self.next_key += 1;
        Ok(Some((i, self.start(i)?)))
    }

    /// Key `i`'s step with the pages `run` holds (`hint`: the lower bound
    /// the key before found in them).
    fn visit(&mut self, i: usize, run: &PageRun, hint: &mut Hint) -> Result<()> {
        let key = self.keys.get(i).copied().unwrap_or(0);
        match self.steps.get(i).copied().unwrap_or(Step::Done) {
            Step::Search { lo, hi, p, last } => {
                let stop = hi.min(run.item_range().1);
                let lb = search_from(run, i, key, lo, stop, hint);
                if lb < stop || p == last {
                    self.settle(i, key, lb, run);
                } else {
                    self.set_step(
                        i,
                        Step::Search {
                            lo,
                            hi,
                            p: p + 1,
                            last,
                        },
                    );
                    self.follow(p + 1, p + 2, i);
                }
            }
            Step::Fetch(lb) => {
                let rec = run.record(lb).ok_or_else(|| self.missing(lb))?;
                self.answer(i, Some(rec));
            }
            Step::Done => {}
        }
        Ok(())
    }
}

impl<P: FnMut(usize) -> Result<ApproxPos>> ReadStream for Lookups<'_, P> {
    fn next(&mut self) -> Result<Option<StreamRead>> {
        if let Some(r) = self.follow.pop_front() {
            return self.issue(r).map(Some);
        }
        let mut cur: Option<PageReq> = None;
        while let Some((i, step)) = self.next_key()? {
            self.set_step(i, step);
            let (a, b) = match step {
                Step::Search { p, .. } => (p, p + 1),
                Step::Fetch(lb) => {
                    let p = self.reader.run.meta().page_of(lb);
                    (p, p + 1)
                }
                Step::Done => continue,
            };
            match &mut cur {
                None => cur = Some(PageReq { a, b, keys: vec![i] }),
                Some(c) if c.a == a && c.b == b => c.keys.push(i),
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
        // The keys waiting come in ascending order, so each one's lower
        // bound is at or after the one before's (Chesetti & Pandey's second
        // join optimisation): its search starts there.
        let mut hint = None;
        for i in waiting {
            self.visit(i, &run, &mut hint)?;
        }
        Ok(())
    }
}

fn missing_record(reader: &DataRunReader, i: u64) -> Error {
    Error::corruption(
        reader.run.storage().name(),
        reader.run.meta().page_of(i) + 1,
        "record missing from page",
    )
}

/// Pages `[a, b)` of a sweep's span, read or in flight.
#[derive(Debug)]
struct SpanRead {
    /// The span (an index into `Sweep::spans`).
    span: usize,
    a: u64,
    b: u64,
    /// One past the last item of the pages.
    end: u64,
    pages: Option<PageRun>,
}

/// Keys whose windows' pages follow each other without a gap: read as one
/// sequence of reads, searched as one sorted sequence.
#[derive(Debug, Clone, Copy)]
struct Span {
    /// The first item of the first key's window.
    lo: u64,
    /// The first key of the span.
    first_key: usize,
}

/// A read of a [`Sweep`], by sequence number.
#[derive(Debug)]
enum SweepReq {
    /// The `id`-th span read.
    Span(usize),
    /// The page holding item `item`, the lower bound of `keys` (the first
    /// item after their span's pages).
    After { item: u64, keys: Vec<usize> },
}

/// The lookups of a batch fetching all at once, as a [`ReadStream`]: a
/// merge of the sorted keys with the pages of their windows. The keys are
/// ascending and distinct ([`KeyBatch`](super::batch::KeyBatch)).
///
/// - `next` predicts keys in order. Keys whose windows' pages overlap or
///   touch (a join's dense probes, a sampled PGM's wide windows) form a
///   *span*: its pages are read once, in ascending reads that each take
///   the new pages of the keys after the first until they grow to
///   [`MAX_COALESCED_PAGES`] (a window wider than that is read whole, as
///   one key's lookup reads it). A key whose window starts after the
///   pages planned so far opens the next span. So the batch reads exactly
///   the pages of its keys' windows, each once.
/// - Keys ascend, so each key's lower bound is at or after the one
///   before's (Chesetti & Pandey's second join optimisation), and by the
///   windows' contract (`lb ∈ [lo, hi]`) within its span's pages or just
///   after them. The merge searches each key from the lower bound before
///   it (galloping, [`PageRun::lower_bound_near`]) through the span's
///   pages as they arrive, in whatever order the reads complete; no key
///   is located from scratch, and only span boundaries cost a model-guided
///   start.
/// - A lower bound just after its span's pages (a window ending on a page
///   boundary) takes one more read of that page, as one key's lookup does.
/// - Pages are dropped once the merge has passed them.
struct Sweep<'r, P> {
    reader: &'r DataRunReader,
    keys: &'r [u64],
    predict: P,
    goal: Goal,
    answers: Vec<Option<Record>>,
    /// Keys answered without a read (an empty window); the merge skips them.
    settled: Vec<bool>,
    /// The next key to predict.
    next_key: usize,
    /// A key predicted but not placed (its pages need another read), with
    /// its window `[lo, hi)`.
    ahead: Option<(usize, u64, u64)>,
    /// Every key is placed.
    planned_all: bool,
    /// Keys to place one by one before the next stride.
    stride_wait: usize,
    /// A key predicted ahead of its turn (a failed stride).
    early: Option<(usize, ApproxPos)>,
    /// One past the last page planned.
    frontier: u64,
    spans: Vec<Span>,
    /// Span reads not yet dropped; `held[0]` is the `base`-th.
    held: VecDeque<SpanRead>,
    base: usize,
    reqs: Vec<SweepReq>,
    /// Reads of the page after a span, to issue.
    after: VecDeque<(u64, Vec<usize>)>,
    /// The next key to merge, its span, and the smallest item its lower
    /// bound can be.
    mk: usize,
    ms: Option<usize>,
    cursor: u64,
    /// The span read the last lower bound was found in.
    at: usize,
}

impl<P: FnMut(usize) -> Result<ApproxPos>> Sweep<'_, P> {
    fn new<'r>(reader: &'r DataRunReader, keys: &'r [u64], predict: P, goal: Goal) -> Sweep<'r, P> {
        Sweep {
            reader,
            keys,
            predict,
            goal,
            answers: vec![None; keys.len()],
            settled: vec![false; keys.len()],
            next_key: 0,
            ahead: None,
            planned_all: false,
            stride_wait: 0,
            early: None,
            frontier: 0,
            spans: Vec::new(),
            held: VecDeque::new(),
            base: 0,
            reqs: Vec::new(),
            after: VecDeque::new(),
            mk: 0,
            ms: None,
            cursor: 0,
            at: 0,
        }
    }

    /// The items `[lo, hi)` that may hold the lower bound of a key
    /// predicted at `a` (its record's, for a lower bound at `lo`); `None`
    /// if no record can answer it: a get finds nothing (the key would lie
    /// in `[lo, hi)`), and a lower bound at the end is none.
    fn window(&self, a: ApproxPos) -> Option<(u64, u64)> {
        let n = self.reader.run.len();
        let lo = a.lo.min(n);
        let hi = a.hi.min(n).max(lo);
        if lo < hi {
            Some((lo, hi))
        } else if self.goal == Goal::LowerBound && lo < n {
            Some((lo, lo + 1))
        } else {
            None
        }
    }

    /// The next key and its window `[lo, hi)`, keys with an empty window
    /// answered on the way; `None` when every key is placed.
    ///
    /// Dense keys skip their predictions: when the key [`STRIDE`] on has
    /// its window's pages touching those planned, every key before it lies
    /// between the keys already placed and it (their lower bounds
    /// ascend), so the merge finds them in the span without a window; they
    /// count as placed. A failed try is kept for that key and the next try
    /// waits [`STRIDE_BACKOFF`] keys (sparse keys predict each key once,
    /// and once more in that many).
    fn next_window(&mut self) -> Result<Option<(usize, u64, u64)>> {
        if let Some(x) = self.ahead.take() {
            return Ok(Some(x));
        }
        if self.stride_wait == 0 && !self.spans.is_empty() && self.early.is_none() {
            let j = self.next_key + STRIDE;
            if j < self.keys.len() {
                let a = (self.predict)(j)?;
                match self.window(a) {
                    Some((lo, hi)) if self.reader.run.meta().page_of(lo) <= self.frontier => {
                        self.next_key = j + 1;
                        return Ok(Some((j, lo, hi)));
                    }
                    _ => {
                        self.early = Some((j, a));
                        self.stride_wait = STRIDE_BACKOFF;
                    }
                }
            }
        }
        while self.next_key < self.keys.len() {
            let i = self.next_key;
            self.next_key += 1;
            self.stride_wait = self.stride_wait.saturating_sub(1);
            let a = match self.early {
                Some((j, a)) if j == i => {
                    self.early = None;
                    a
                }
                _ => (self.predict)(i)?,
            };
            match self.window(a) {
                Some((lo, hi)) => return Ok(Some((i, lo, hi))),
                None => {
                    if let Some(s) = self.settled.get_mut(i) {
                        *s = true;
                    }
                }
            }
        }
        Ok(None)
    }

    /// One past the last item of the pages before page `b`.
    fn end_of(&self, b: u64) -> u64 {
        let meta = self.reader.run.meta();
        b.saturating_mul(meta.per_page as u64).min(meta.n)
    }

    /// A new span read of pages `[a, b)` for the last span: its id.
    fn push_read(&mut self, a: u64, b: u64) -> usize {
        let id = self.base + self.held.len();
        self.held.push_back(SpanRead {
            span: self.spans.len().saturating_sub(1),
            a,
            b,
            end: self.end_of(b),
            pages: None,
        });
        id
    }

    /// Places keys in order until one needs a read other than the one
    /// being built: that read's id, if any.
    fn plan(&mut self) -> Result<Option<usize>> {
        let meta = *self.reader.run.meta();
        let mut cur: Option<usize> = None;
        loop {
            let Some((i, lo, hi)) = self.next_window()? else {
                self.planned_all = true;
                break;
            };
            let (pf, pl) = (meta.page_of(lo), meta.page_of(hi - 1));
            if self.spans.is_empty() || pf > self.frontier {
                // A gap before its pages: the next span.
                if cur.is_some() {
                    self.ahead = Some((i, lo, hi));
                    break;
                }
                self.spans.push(Span { lo, first_key: i });
                cur = Some(self.push_read(pf, pl + 1));
                self.frontier = pl + 1;
                continue;
            }
            if pl < self.frontier {
                continue;
            }
            let end = self.end_of(pl + 1);
            match cur {
                None => cur = Some(self.push_read(self.frontier, pl + 1)),
                Some(_) => match self.held.back_mut() {
                    Some(r) if r.b == self.frontier && pl + 1 - r.a <= MAX_COALESCED_PAGES => {
                        r.b = pl + 1;
                        r.end = end;
                    }
                    _ => {
                        self.ahead = Some((i, lo, hi));
                        break;
                    }
                },
            }
            self.frontier = pl + 1;
        }
        Ok(cur)
    }

    fn held(&self, id: usize) -> Option<&SpanRead> {
        id.checked_sub(self.base).and_then(|k| self.held.get(k))
    }

    /// Whether span `s` has all its reads planned.
    fn closed(&self, s: usize) -> bool {
        s + 1 < self.spans.len() || (self.planned_all && self.ahead.is_none())
    }

    fn answer(&mut self, i: usize, a: Option<Record>) {
        if let Some(slot) = self.answers.get_mut(i) {
            *slot = a;
        }
    }

    /// Key `i`'s lower bound is item `end`, the first after its span's
    /// pages.
    fn after_span(&mut self, i: usize, end: u64) {
        if self.goal == Goal::Get || end >= self.reader.run.len() {
            self.answer(i, None);
            return;
        }
        match self.after.back_mut() {
            Some((item, keys)) if *item == end => keys.push(i),
            _ => self.after.push_back((end, vec![i])),
        }
    }

    /// Merges the keys placed so far with the pages read so far, in order,
    /// until a key needs pages still in flight or not yet planned; then
    /// drops the pages no key can need.
    fn advance(&mut self) -> Result<()> {
        let placed = self.ahead.map_or(self.next_key, |a| a.0);
        'keys: while self.mk < placed {
            let i = self.mk;
            if self.settled.get(i).copied().unwrap_or(true) {
                self.mk += 1;
                continue;
            }
            // The key's span: the last one starting at or before it.
            let mut s = self.ms.unwrap_or(0);
            while self.spans.get(s + 1).is_some_and(|sp| sp.first_key <= i) {
                s += 1;
            }
            if self.ms != Some(s) {
                self.ms = Some(s);
                self.cursor = self.spans.get(s).map_or(0, |sp| sp.lo);
                self.at = self.base;
            }
            let key = self.keys.get(i).copied().unwrap_or(0);
            let mut id = self.at.max(self.base);
            loop {
                let Some(r) = self.held(id) else {
                    // No further read of the span planned yet.
                    if self.closed(s) {
                        let end = self.cursor;
                        self.after_span(i, end);
                        self.mk += 1;
                        continue 'keys;
                    }
                    break 'keys;
                };
                if r.span < s || r.end <= self.cursor {
                    id += 1;
                    continue;
                }
                if r.span > s {
                    // The span ends before: the lower bound is just after
                    // its pages.
                    let end = self.cursor;
                    self.after_span(i, end);
                    self.mk += 1;
                    continue 'keys;
                }
                let Some(pages) = r.pages.as_ref() else {
                    break 'keys;
                };
                let (lb, rec) = pages.seek_from(key, self.cursor);
                let Some(rec) = rec else {
                    let rb = pages.item_range().1;
                    if lb < rb {
                        return Err(missing_record(self.reader, lb));
                    }
                    // Every key of these pages is smaller.
                    self.cursor = rb;
                    id += 1;
                    continue;
                };
                self.answer(i, answer_of(self.goal, key, Some(rec)));
                self.cursor = lb;
                self.at = id;
                self.mk += 1;
                continue 'keys;
            }
        }
        // Pages before the merge's position are not searched again: every
        // later key's lower bound is at or after it.
        let ms = self.ms.unwrap_or(0);
        while let Some(r) = self.held.front() {
            let passed = r.span < ms || r.end <= self.cursor;
            if !passed || r.pages.is_none() {
                break;
            }
            self.held.pop_front();
            self.base += 1;
        }
        Ok(())
    }

    fn issue_after(&mut self) -> Result<Option<StreamRead>> {
        let Some((item, keys)) = self.after.pop_front() else {
            return Ok(None);
        };
        let p = self.reader.run.meta().page_of(item);
        let (_, read) = self.reader.run.range_read(p, p + 1)?;
        self.reqs.push(SweepReq::After { item, keys });
        Ok(Some(read))
    }
}

impl<P: FnMut(usize) -> Result<ApproxPos>> ReadStream for Sweep<'_, P> {
    fn next(&mut self) -> Result<Option<StreamRead>> {
        if !self.after.is_empty() {
            return self.issue_after();
        }
        let cur = self.plan()?;
        // Keys placed on pages already read are answered now.
        self.advance()?;
        let Some(id) = cur else {
            return self.issue_after();
        };
        let (a, b) = match self.held(id) {
            Some(r) => (r.a, r.b),
            None => return Err(Error::invalid("span read out of range")),
        };
        let (b, read) = self.reader.run.range_read(a, b)?;
        let end = self.end_of(b);
        if let Some(r) = id.checked_sub(self.base).and_then(|k| self.held.get_mut(k)) {
            r.b = b;
            r.end = end;
        }
        self.reqs.push(SweepReq::Span(id));
        Ok(Some(read))
    }

    fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()> {
        match self.reqs.get_mut(seq) {
            Some(SweepReq::Span(id)) => {
                let id = *id;
                let Some(r) = id.checked_sub(self.base).and_then(|k| self.held.get(k)) else {
                    return Err(Error::invalid("completed read out of range"));
                };
                let pages = self.reader.run.run_from(r.a, r.b, buf)?;
                if let Some(r) = self.held.get_mut(id - self.base) {
                    r.pages = Some(pages);
                }
                self.advance()
            }
            Some(SweepReq::After { item, keys }) => {
                let (item, keys) = (*item, std::mem::take(keys));
                let p = self.reader.run.meta().page_of(item);
                let page = self.reader.run.run_from(p, p + 1, buf)?;
                let rec = page
                    .record(item)
                    .ok_or_else(|| missing_record(self.reader, item))?;
                for i in keys {
                    self.answer(i, Some(rec));
                }
                Ok(())
            }
            None => Err(Error::invalid("completed read out of range")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::Arc;

    use super::*;
    use crate::storage::testing::Reversed;
    use crate::storage::{Directory, MemDirectory, ReadStorage};

    /// 60,000 keys with gaps (a 4 KiB page holds 255 records), over storage
    /// whose batched reads complete in order or in reverse.
    fn readers() -> (Vec<u64>, Vec<(&'static str, DataRunReader)>) {
        let keys: Vec<u64> = (0..60_000u64).map(|i| i * 3 + (i / 1_000) * 50).collect();
        let dir = MemDirectory::new();
        DataRun::write_ranked(&dir, "r", &keys, 4096).unwrap();
        let plain: Arc<dyn ReadStorage> = dir.open_read("r").unwrap();
        let reversed: Arc<dyn ReadStorage> = Arc::new(Reversed(dir.open_read("r").unwrap()));
        let open = |s| DataRunReader::new(DataRun::open(s).unwrap());
        (
            keys,
            vec![("in order", open(plain)), ("reversed", open(reversed))],
        )
    }

    /// The windows of an exact model with error `eps` (the lower bound's
    /// rank ± eps), counting its predictions.
    fn predictor<'a>(
        keys: &'a [u64],
        batch: &'a [u64],
        eps: u64,
        calls: &'a Cell<usize>,
    ) -> impl FnMut(usize) -> Result<ApproxPos> + 'a {
        move |i| {
            calls.set(calls.get() + 1);
            let pos = keys.partition_point(|&k| k < batch[i]) as u64;
            Ok(ApproxPos {
                pos,
                lo: pos.saturating_sub(eps),
                hi: pos + eps + 1,
            })
        }
    }

    fn oracle(keys: &[u64], batch: &[u64], goal: Goal) -> Vec<Option<Record>> {
        batch
            .iter()
            .map(|&k| {
                let lb = keys.partition_point(|&x| x < k);
                let rec = keys.get(lb).map(|&x| (x, lb as u64));
                answer_of(goal, k, rec)
            })
            .collect()
    }

    /// All at once, dense keys (a join at ratio 1: every key present and
    /// absent in a stretch of the run) skip most predictions, sparse keys
    /// (one per page or fewer, and the ends of the key space) predict
    /// each key about once; every answer equals a sorted array's, whatever
    /// order the reads complete in and at every queue depth.
    #[test]
    fn a_sweep_merges_dense_keys_without_predicting_each() {
        let (keys, readers) = readers();
        let dense: Vec<u64> = keys[10_000..30_000].iter().flat_map(|&k| [k, k + 1]).collect();
        let sparse: Vec<u64> = keys.iter().step_by(700).map(|&k| k + (k % 2)).collect();
        let mut mixed: Vec<u64> = dense.iter().chain(&sparse).copied().collect();
        mixed.extend([0, 1, keys[59_999], keys[59_999] + 1, u64::MAX]);
        mixed.sort_unstable();
        mixed.dedup();
        for (what, reader) in &readers {
            for (name, batch) in [("dense", &dense), ("sparse", &sparse), ("mixed", &mixed)] {
                for eps in [0u64, 16, 600] {
                    for qd in [1usize, 4, 32] {
                        for goal in [Goal::Get, Goal::LowerBound] {
                            let calls = Cell::new(0);
                            let got = reader
                                .lookups(
                                    batch,
                                    predictor(&keys, batch, eps, &calls),
                                    Fetch::AllAtOnce,
                                    goal,
                                    qd,
                                )
                                .unwrap();
                            let case = format!("{what} {name} eps={eps} qd={qd} {goal:?}");
                            assert!(got == oracle(&keys, batch, goal), "{case}");
                            let n = batch.len();
                            if name == "dense" {
                                assert!(
                                    calls.get() <= n / STRIDE + 2,
                                    "{case}: {} predictions",
                                    calls.get()
                                );
                            } else if name == "sparse" {
                                assert!(
                                    calls.get() <= n + n / STRIDE_BACKOFF + 1,
                                    "{case}: {} predictions",
                                    calls.get()
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// A prediction whose window misses the key's lower bound (a model
    /// breaking its contract) gives a wrong answer but no panic, no error
    /// and no unanswered key; an empty window answers a get with nothing.
    #[test]
    fn a_sweep_survives_predictions_off_the_mark() {
        let (keys, readers) = readers();
        let batch: Vec<u64> = keys.iter().step_by(37).copied().collect();
        for (what, reader) in &readers {
            for goal in [Goal::Get, Goal::LowerBound] {
                for shift in [0u64, 300, 59_000] {
                    let predict = |i: usize| {
                        let pos = (i as u64 * 37 + shift) % 60_000;
                        Ok(ApproxPos {
                            pos,
                            lo: pos,
                            hi: pos + u64::from(i % 3 != 0) * 40,
                        })
                    };
                    let got = reader
                        .lookups(&batch, predict, Fetch::AllAtOnce, goal, 8)
                        .unwrap();
                    assert_eq!(got.len(), batch.len(), "{what}");
                    if shift == 0 {
                        // Right but for the empty windows.
                        for (i, (g, w)) in got.iter().zip(oracle(&keys, &batch, goal)).enumerate() {
                            if i % 3 != 0 || goal == Goal::LowerBound {
                                assert_eq!(*g, w, "{what} {goal:?} key {i}");
                            } else {
                                assert_eq!(*g, None, "{what} {goal:?} key {i}");
                            }
                        }
                    }
                }
            }
        }
    }
}
