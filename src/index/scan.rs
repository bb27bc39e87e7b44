//! Reading records out of a data run: last-mile search and range scans,
//! shared by every static index kind.

use std::collections::VecDeque;
use std::rc::Rc;

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
    /// overlap, up to `queue_depth` reads in flight, each key predicted as
    /// the storage asks for a read and searched as its pages arrive
    /// ([`Lookups`]).
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
        let mut stream = Lookups::new(self, keys, predict, fetch, goal)?;
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

/// Pages a window read of a batched lookup grows to when it takes the new
/// pages of the keys after its first.
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
    /// One by one: searching its predicted items `[lo, hi)`, pages
    /// `p..=last` still to read from `p`.
    Search { lo: u64, hi: u64, p: u64, last: u64 },
    /// All at once: searching items `[lo, hi)`, whose pages `pending`
    /// window reads still in flight hold; `best` is the smallest lower
    /// bound found in the pages searched so far, with its record if they
    /// hold it.
    Window {
        lo: u64,
        hi: u64,
        pending: u32,
        best: Option<(u64, Option<Record>)>,
    },
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

/// A window read's pages: in flight (the read's sequence number), or read.
#[derive(Debug, Clone)]
enum Held {
    Pending(usize),
    Read(Rc<PageRun>),
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

/// Data pages `[a, b)` read for the windows of a batch (all at once).
#[derive(Debug)]
struct Win {
    a: u64,
    b: u64,
    held: Held,
    /// The lower bound the last key searching these pages found in them (a
    /// start for the next key's search).
    hint: Hint,
}

/// The lookups of a batch as a [`ReadStream`]; the keys are ascending and
/// distinct ([`KeyBatch`](super::batch::KeyBatch)). `next` predicts keys in
/// order until one needs a read the read being built cannot take; `done`
/// searches the pages read for the keys waiting for them.
///
/// With [`Fetch::OneByOne`] each key reads its pages one at a time (keys
/// in a row wanting the same page share the read).
///
/// With [`Fetch::AllAtOnce`] every data page is read at most once per
/// batch, however wide the windows (a sampled PGM's window spans 16 pages
/// or more, and a join's dense probes overlap each other's windows):
/// - Keys ascend, so a key's lower bound is at or after every earlier
///   key's: its window starts no earlier than the largest window start
///   and lower bound found so far (`floor`).
/// - The pages of the batch are read in ascending, disjoint *window reads*
///   up to the `frontier`, the end of the last. A key's window needs only
///   its pages past the frontier read: they extend the read being built
///   (contiguous, up to [`MAX_COALESCED_PAGES`]) or start the next one.
///   The pages from its window's start to the frontier are in window reads
///   made for earlier keys: the key that moved the frontier there had a
///   window starting no later, all of whose pages were read. (A prediction
///   breaking its contract could leave a gap: that key reads its window on
///   its own.)
/// - So a key searches its window in pieces, one per window read: at once
///   in the pages already read (held until `floor` passes them: about one
///   window's worth), and when each read in flight completes. Its lower
///   bound is the first piece's that is not at its piece's end; it is
///   answered when the last piece is searched.
/// - A lower bound after the key's window (at its `hi`, on the next page)
///   is taken from a window read that holds it, or read on its own.
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
    follow: VecDeque<PageReq>,
    /// Every read issued, by sequence number (keys taken when done).
    reqs: Vec<PageReq>,
    answers: Vec<Option<Record>>,
    /// Window reads whose pages a later key may still search, ascending.
    wins: VecDeque<Win>,
    /// End of the last window read (data page).
    frontier: u64,
    /// A lower limit of the next key's lower bound (item index).
    floor: u64,
}

impl<P: FnMut(usize) -> Result<ApproxPos>> Lookups<'_, P> {
    fn new<'r>(
        reader: &'r DataRunReader,
        keys: &'r [u64],
        predict: P,
        fetch: Fetch,
        goal: Goal,
    ) -> Result<Lookups<'r, P>> {
        if !keys.windows(2).all(|w| matches!(w, [a, b] if a < b)) {
            return Err(Error::invalid(
                "the keys of a batched lookup must be ascending and distinct",
            ));
        }
        Ok(Lookups {
            reader,
            keys,
            predict,
            fetch,
            goal,
            next_key: 0,
            ahead: None,
            steps: vec![Step::Done; keys.len()],
            follow: VecDeque::new(),
            reqs: Vec::new(),
            answers: vec![None; keys.len()],
            wins: VecDeque::new(),
            frontier: 0,
            floor: 0,
        })
    }

    /// Key `i`'s first step for items `[lo, hi)` (`lo <= hi <= n`), or
    /// `Done` if it needs no read.
    fn shape(&self, lo: u64, hi: u64) -> Step {
        let n = self.reader.run.len();
        if lo == hi {
            // The lower bound is `lo` without a read; a get finds nothing
            // (the key would lie in `[lo, hi)`).
            return match self.goal {
                Goal::LowerBound if lo < n => Step::Fetch(lo),
                _ => Step::Done,
            };
        }
        let meta = self.reader.run.meta();
        match self.fetch {
            Fetch::AllAtOnce => Step::Window {
                lo,
                hi,
                pending: 0,
                best: None,
            },
            Fetch::OneByOne => Step::Search {
                lo,
                hi,
                p: meta.page_of(lo),
                last: meta.page_of(hi - 1),
            },
        }
    }

    /// Predicts key `i`: its predicted items, or `Done` if it needs none.
    fn start(&mut self, i: usize) -> Result<Step> {
        let n = self.reader.run.len();
        let a = (self.predict)(i)?;
        let lo = a.lo.min(n);
        let hi = a.hi.min(n).max(lo);
        Ok(match self.fetch {
            // Clamped and shaped when placed.
            Fetch::AllAtOnce => Step::Window {
                lo,
                hi,
                pending: 0,
                best: None,
            },
            Fetch::OneByOne => self.shape(lo, hi),
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
        Error::corruption(
            self.reader.run.storage().name(),
            self.reader.run.meta().page_of(lb) + 1,
            "record missing from page",
        )
    }

    /// One by one: key `i`'s answer from its lower bound `lb`, found in
    /// `run` (which may end before `lb`).
    fn settle(&mut self, i: usize, key: u64, lb: u64, run: &PageRun) {
        let n = self.reader.run.len();
        let answer = match (run.record(lb), self.goal) {
            (Some(r), Goal::Get) => (r.0 == key).then_some(r),
            (Some(r), Goal::LowerBound) => Some(r),
            (None, Goal::LowerBound) if lb < n => {
                let p = self.reader.run.meta().page_of(lb);
                self.set_step(i, Step::Fetch(lb));
                self.follow(p, p + 1, i);
                return;
            }
            (None, _) => None,
        };
        self.answer(i, answer);
    }

    /// All at once: key `i`'s answer once every piece of its window
    /// `[.., hi)` is searched, `best` the lower bound they found.
    fn finish(&mut self, i: usize, key: u64, hi: u64, best: Option<(u64, Option<Record>)>) -> Result<()> {
        let n = self.reader.run.len();
        let (lb, rec) = best.unwrap_or((hi, None));
        self.floor = self.floor.max(lb);
        let answer = match (rec, self.goal) {
            (Some(r), Goal::Get) => (r.0 == key).then_some(r),
            (Some(r), Goal::LowerBound) => Some(r),
            (None, Goal::LowerBound) if lb < n => return self.fetch_record(i, lb),
            (None, _) => None,
        };
        self.answer(i, answer);
        Ok(())
    }

    /// Key `i`'s lower bound is `lb`, past the pages it searched: its
    /// record from the window read holding it (at once if read, else when
    /// it completes), or from a read of its own.
    fn fetch_record(&mut self, i: usize, lb: u64) -> Result<()> {
        let p = self.reader.run.meta().page_of(lb);
        self.set_step(i, Step::Fetch(lb));
        let k = self.wins.partition_point(|w| w.b <= p);
        match self.wins.get(k).filter(|w| w.a <= p).map(|w| w.held.clone()) {
            Some(Held::Read(run)) => {
                let rec = run.record(lb).ok_or_else(|| self.missing(lb))?;
                self.answer(i, Some(rec));
            }
            Some(Held::Pending(seq)) => match self.reqs.get_mut(seq) {
                Some(r) => r.keys.push(i),
                None => return Err(Error::invalid("window read out of range")),
            },
            None => self.follow(p, p + 1, i),
        }
        Ok(())
    }

    /// Searches the piece of window `[lo, hi)` that `run` holds for `key`,
    /// from `hint` (the lower bound of the key before, in the same pages)
    /// if it is later: the smaller of `best` and what the piece finds.
    fn search_piece(
        i: usize,
        key: u64,
        lo: u64,
        hi: u64,
        best: Option<(u64, Option<Record>)>,
        run: &PageRun,
        hint: &mut Hint,
    ) -> Option<(u64, Option<Record>)> {
        let (rlo, rhi) = run.item_range();
        let (s, t) = (lo.max(rlo), hi.min(rhi));
        if s >= t {
            return best;
        }
        let lb = search_from(run, i, key, s, t, hint);
        // At the piece's end the lower bound is in a later piece, unless
        // this piece ends the window.
        if lb == t && t < hi {
            return best;
        }
        match best {
            Some(b) if b.0 <= lb => Some(b),
            _ => Some((lb, run.record(lb))),
        }
    }

    /// Places key `i` (all at once): its window clamped at `floor`, its
    /// pages past the frontier added to the read being built (`cur`, a
    /// sequence number) or starting it, the pieces already read searched.
    /// `false` if its pages need another read than `cur`.
    fn place(&mut self, i: usize, step: Step, cur: &mut Option<usize>) -> Result<bool> {
        let meta = *self.reader.run.meta();
        let step = match step {
            Step::Window { lo, hi, .. } => self.shape(lo.max(self.floor).min(hi), hi),
            s => s,
        };
        let (lo, a, b) = match step {
            Step::Window { lo, hi, .. } => (lo, meta.page_of(lo), meta.page_of(hi - 1) + 1),
            Step::Fetch(lb) => (lb, meta.page_of(lb), meta.page_of(lb) + 1),
            Step::Search { .. } | Step::Done => {
                self.set_step(i, Step::Done);
                return Ok(true);
            }
        };
        let start = self.wins.partition_point(|w| w.b <= a);
        // Pages before the frontier must be in the window reads; they are
        // unless a prediction broke its contract: then a read of its own.
        let covered = b.min(self.frontier);
        let mut at = a;
        for w in self.wins.range(start..) {
            if at >= covered || w.a > at {
                break;
            }
            at = w.b;
        }
        if at < covered {
            if let Step::Window { lo, hi, .. } = step {
                self.set_step(
                    i,
                    Step::Window {
                        lo,
                        hi,
                        pending: 1,
                        best: None,
                    },
                );
            } else {
                self.set_step(i, step);
            }
            self.follow(a, b, i);
            return Ok(true);
        }
        let new = a.max(self.frontier);
        if new < b {
            match *cur {
                Some(seq) => {
                    let extends = matches!(self.wins.back(), Some(w) if matches!(w.held, Held::Pending(s) if s == seq) && w.b == new && b - w.a <= MAX_COALESCED_PAGES);
                    if !extends {
                        return Ok(false);
                    }
                    if let Some(w) = self.wins.back_mut() {
                        w.b = b;
                    }
                    if let Some(r) = self.reqs.get_mut(seq) {
                        r.b = b;
                    }
                }
                None => {
                    let seq = self.reqs.len();
                    self.reqs.push(PageReq {
                        a: new,
                        b,
                        keys: Vec::new(),
                    });
                    self.wins.push_back(Win {
                        a: new,
                        b,
                        held: Held::Pending(seq),
                        hint: None,
                    });
                    *cur = Some(seq);
                }
            }
            self.frontier = b;
        }
        self.floor = self.floor.max(lo);
        // The window reads holding the key's pages (the last one may have
        // just been extended to them): searched now if read.
        let start = self.wins.partition_point(|w| w.b <= a);
        let key = self.keys.get(i).copied().unwrap_or(0);
        let mut best = None;
        let mut fetched = None;
        let mut pending = 0u32;
        for k in start..self.wins.len() {
            let Some(w) = self.wins.get_mut(k).filter(|w| w.a < b) else {
                break;
            };
            match (&w.held, step) {
                (Held::Read(run), Step::Window { lo, hi, .. }) => {
                    best = Self::search_piece(i, key, lo, hi, best, run, &mut w.hint);
                }
                (Held::Read(run), Step::Fetch(lb)) => fetched = Some(run.record(lb)),
                (Held::Read(_), _) => {}
                (Held::Pending(seq), _) => {
                    let seq = *seq;
                    match self.reqs.get_mut(seq) {
                        Some(r) => r.keys.push(i),
                        None => return Err(Error::invalid("window read out of range")),
                    }
                    pending += 1;
                }
            }
        }
        match step {
            Step::Window { lo, hi, .. } if pending > 0 => self.set_step(
                i,
                Step::Window {
                    lo,
                    hi,
                    pending,
                    best,
                },
            ),
            Step::Window { hi, .. } => self.finish(i, key, hi, best)?,
            Step::Fetch(lb) => match fetched {
                Some(rec) => {
                    let rec = rec.ok_or_else(|| self.missing(lb))?;
                    self.answer(i, Some(rec));
                }
                None => self.set_step(i, step),
            },
            Step::Search { .. } | Step::Done => {}
        }
        // No later key searches pages before `floor`'s.
        let fp = meta.page_of(self.floor);
        while self.wins.front().is_some_and(|w| w.b <= fp) {
            self.wins.pop_front();
        }
        Ok(true)
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

    /// The next read, one by one: keys in a row wanting the same page
    /// share it.
    fn next_one_by_one(&mut self) -> Result<Option<StreamRead>> {
        let mut cur: Option<PageReq> = None;
        while let Some((i, step)) = self.next_key()? {
            self.set_step(i, step);
            let (a, b) = match step {
                Step::Search { p, .. } => (p, p + 1),
                Step::Fetch(lb) => {
                    let p = self.reader.run.meta().page_of(lb);
                    (p, p + 1)
                }
                Step::Window { .. } | Step::Done => continue,
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

    /// The next read, all at once: the window read that keys take while
    /// their new pages extend it ([`Lookups::place`]).
    fn next_window(&mut self) -> Result<Option<StreamRead>> {
        let mut cur: Option<usize> = None;
        while let Some((i, step)) = self.next_key()? {
            if !self.place(i, step, &mut cur)? {
                self.ahead = Some((i, step));
                break;
            }
        }
        match cur {
            Some(seq) => {
                let (a, b) = match self.reqs.get(seq) {
                    Some(r) => (r.a, r.b),
                    None => return Err(Error::invalid("window read out of range")),
                };
                let (b, read) = self.reader.run.range_read(a, b)?;
                if let Some(r) = self.reqs.get_mut(seq) {
                    r.b = b;
                }
                Ok(Some(read))
            }
            // Keys answered from pages already read may have queued reads.
            None => self.follow.pop_front().map(|r| self.issue(r)).transpose(),
        }
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
            Step::Window {
                lo,
                hi,
                pending,
                best,
            } => {
                let best = Self::search_piece(i, key, lo, hi, best, run, hint);
                let pending = pending.saturating_sub(1);
                if pending == 0 {
                    self.finish(i, key, hi, best)?;
                } else {
                    self.set_step(
                        i,
                        Step::Window {
                            lo,
                            hi,
                            pending,
                            best,
                        },
                    );
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
        match self.fetch {
            Fetch::AllAtOnce => self.next_window(),
            Fetch::OneByOne => self.next_one_by_one(),
        }
    }

    fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()> {
        let (a, b, waiting) = match self.reqs.get_mut(seq) {
            Some(r) => (r.a, r.b, std::mem::take(&mut r.keys)),
            None => return Err(Error::invalid("completed read out of range")),
        };
        let run = Rc::new(self.reader.run.run_from(a, b, buf)?);
        // A window read is held for the keys after (before the keys
        // waiting are searched: one may want a record in it).
        let win = self.wins.binary_search_by_key(&a, |w| w.a).ok().filter(
            |&k| matches!(self.wins.get(k), Some(w) if matches!(w.held, Held::Pending(s) if s == seq)),
        );
        let mut hint = None;
        if let Some(w) = win.and_then(|k| self.wins.get_mut(k)) {
            w.held = Held::Read(Rc::clone(&run));
            hint = w.hint;
        }
        // The keys waiting come in ascending order, so each one's lower
        // bound is at or after the one before's (Chesetti & Pandey's second
        // join optimisation): its search starts there.
        for i in waiting {
            self.visit(i, &run, &mut hint)?;
        }
        if let Some(w) = win.and_then(|k| self.wins.get_mut(k)) {
            w.hint = hint;
        }
        Ok(())
    }
}
