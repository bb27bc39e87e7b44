//! `pgm-disk`'s zero-interval band at window `epsilon`, lines and measure,
//! made in the first pass over the keys, before its page budget is known
//! (issue 23: else a pass after the budget reads the whole run back for
//! them, and at one thread the build waits for that pass after the run is
//! written).
//!
//! What the budget decides. [`super::page_aware_line`] keeps a segment's middle
//! line when it crosses at most `budget × len` page boundaries, else the
//! grid's best line ([`better_line`]); the crossings and the grid's line do
//! not depend on the budget, only the choice between them does. The budget
//! is plain PGM's measured pages plus the slack, so at least the slack: a
//! segment within the slack keeps its middle line whatever the budget, as
//! does one the grid cannot better. Every other segment is *open*: it goes
//! to a bucket by its crossings per key, `r = crossings / len`
//! ([`bucket_of`]: 0.5 % apart), each bucket with a tally ([`Meter`]) for
//! its segments' middle lines and one for their grid lines. Which line a
//! segment is metered with is guessed from the budget plain PGM's pages so
//! far suggest (`super::Guess`): the middle line (its grid not searched)
//! below `guess / MARGIN`, the grid's above `guess × MARGIN`, both in
//! between, or before a guess. Once the budget is known, a bucket whose
//! open segments all choose alike adds that choice's tally, and its
//! segments metered only with the other line (a wrong guess) are metered
//! again with the right one; the one bucket the budget splits has all its
//! segments metered again. Those read their keys from the run: a few
//! hundred segments of 90k at 100M `osm-like` keys. The tallies add up
//! (largest errors, histograms, the ends' predictions), so the band, its
//! bounds and its pages are exactly those of [`super::lines_measured_within`] with
//! that budget (`lines_ahead_equal_lines_after_the_budget` pins it, wrong
//! guesses included); a guess only moves work.
//!
//! Where the work runs. With one rayon thread, on the pass's own thread as
//! the segments become ready; with more, in parts of at least
//! [`PART_KEYS_AHEAD`] keys spawned on the pool, at most [`PARTS_OUT`] out
//! at a time (else the pass's thread works on the next part itself).
//!
//! What a meter needs of the key count, unknown while the run is written:
//! an entry's clamp floor is its page's middle, at most half a page past
//! its start, and a prediction lies between its entry's floor and the next
//! one's; so once `page + reach + 2` keys follow a segment's end, its
//! entry, its clamps and which of its predictions fall near the far end of
//! the keys are what they will be with every key. A finished segment waits
//! (its keys held) until then, or the end of the pass.
//!
//! Memory: the open segment's keys and those of segments waiting for their
//! meter (a segment longer than [`HOLD`] keys is let go, its lines and
//! meter made from the run after the pass), the parts out on the pool, the
//! segments, 56 B per open segment and, per bucket in use, two tallies of
//! a page's histogram each (2 KiB for 255 records a page).

use std::collections::VecDeque;

use rayon::prelude::*;

use super::super::build::{LayerBuild, SegmentLine, band_entries, band_entry_of};
use super::super::keys::{Keys, Win};
use super::super::segment::{PART_KEYS, RunSegmenter, recv_helping};
use super::{
    Measured, Meter, Tally, Tolerance, better_line, first_key_of, middle_cost, middle_line, slope_grid,
};
use crate::Result;
use crate::model::Segment;

/// Keys of one segment the pass holds at most (8 MiB).
const HOLD: usize = 2 * PART_KEYS;

/// Keys the pass feeds the segmentation at a time.
const PIECE: usize = 1 << 12;

/// Buckets of open segments, by crossings per key.
const BUCKETS: usize = 2048;

/// Crossings per key of the first bucket's upper end.
const RATIO_FLOOR: f64 = 1e-4;

/// The ratio of one bucket's upper end to the one before.
const RATIO_STEP: f64 = 1.005;

/// The bucket of a segment with `r` crossings per key: the first up to
/// [`RATIO_FLOOR`], then one per [`RATIO_STEP`], the last open-ended.
fn bucket_of(r: f64) -> u16 {
    if r.is_nan() || r <= RATIO_FLOOR {
        return 0;
    }
    let k = ((r / RATIO_FLOOR).ln() / RATIO_STEP.ln()) as usize;
    k.saturating_add(1).min(BUCKETS - 1) as u16
}

/// How far from the guessed budget a segment's crossings per key must lie
/// for its line to be guessed (else both are metered): a factor.
const MARGIN: f64 = 1.02;

/// [`Open::metered`]: the middle line's tally, the grid line's.
const MIDDLE: u8 = 1;
const GRID: u8 = 2;

/// A segment whose line waits for the budget: its middle line's crossings,
/// its bucket, the grid's line as slope and intercept (if searched:
/// `searched`; a segment whose grid found none better is not open) and the
/// lines whose tallies of its bucket it was metered into (48 B).
struct Open {
    j: usize,
    cost: u64,
    line: Option<(f64, f64)>,
    bucket: u16,
    searched: bool,
    metered: u8,
}

impl Open {
    fn grid_line(&self, s: &Segment) -> Option<SegmentLine> {
        self.line.map(|(slope, intercept)| SegmentLine {
            start: s.start,
            slope,
            intercept,
        })
    }
}

/// The zero-interval segmentation at window `epsilon` (`tol`: zero
/// intervals of `page` positions), fed every key of the first pass in
/// order ([`Ahead::push`]), with its lines and tallies (see the module).
pub(in super::super) struct Ahead {
    segmenter: RunSegmenter<Tolerance>,
    cfg: Cfg,
    hold: usize,
    segs: Vec<Segment>,
    /// What the work on the segments found.
    found: Found,
    /// Keys from `buf_start` on: those of the segments waiting for their
    /// meter and of the open one, unless it outgrew `hold`.
    buf: Vec<u64>,
    buf_start: usize,
    /// The open segment outgrew `hold`: only the latest piece is held.
    outgrown: bool,
    /// Finished segments waiting for their lines and meters.
    pending: VecDeque<usize>,
    /// Segments let go: lines and meter after the pass.
    later: Vec<usize>,
    /// Keys pushed.
    seen: usize,
    /// The plain segmentation's extra pages per key so far, from which
    /// the budget is guessed to spare work (a wrong guess costs a second
    /// meter, never a different band).
    guess: super::Guess,
    /// Parts worked on the rayon pool (with more than one thread), and how
    /// many are still out.
    parts: (
        crossbeam_channel::Sender<Found>,
        crossbeam_channel::Receiver<Found>,
    ),
    out: usize,
    /// Every key was pushed ([`Ahead::segments`] finished the pass).
    done: bool,
}

/// What a part's work needs to know.
#[derive(Clone, Copy)]
struct Cfg {
    tol: Tolerance,
    reach: u64,
    /// The least the budget can be (the slack).
    floor: f64,
}

/// A finished segment whose lines and meters no longer depend on the key
/// count, and the next segment's start and first key (none for the last).
#[derive(Clone, Copy)]
struct Item {
    j: usize,
    s: Segment,
    next: Option<(usize, u64)>,
}

/// Parts on the pool at most: past that the pass's thread works on the next
/// part itself (its keys copied for none), so the pass never runs ahead of
/// the pool by more than this many parts' keys.
const PARTS_OUT: usize = 2;

/// Keys of the segments a part of the work on the pool takes, at least.
const PART_KEYS_AHEAD: usize = 1 << 16;

/// What the work on segments found: the tally of the lines that do not
/// wait for the budget, the open segments, and per bucket the tallies of
/// its segments' middle and grid lines.
struct Found {
    certain: Tally,
    open: Vec<Open>,
    buckets: Vec<Option<Box<[Tally; 2]>>>,
}

impl Found {
    fn new(page: u64) -> Found {
        Found {
            certain: Tally::new(page),
            open: Vec::new(),
            buckets: (0..BUCKETS).map(|_| None).collect(),
        }
    }

    /// Adds what another part found.
    fn absorb(&mut self, other: Found) {
        let c = std::mem::replace(&mut self.certain, Tally::new(0));
        self.certain = c.merge(other.certain);
        self.open.extend(other.open);
        for (slot, theirs) in self.buckets.iter_mut().zip(other.buckets) {
            *slot = match (slot.take(), theirs) {
                (Some(a), Some(b)) => {
                    let ([a0, a1], [b0, b1]) = (*a, *b);
                    Some(Box::new([a0.merge(b0), a1.merge(b1)]))
                }
                (a, b) => a.or(b),
            };
        }
    }
}

/// The lines of `items` (their keys `keys`, the first at position `base`)
/// and their meters, the budget guessed at `budget`, added to `found`.
fn work(cfg: Cfg, items: &[Item], base: usize, keys: &[u64], at: At, budget: Option<f64>, found: &mut Found) {
    let page = cfg.tol.zero_page;
    for it in items {
        let s = &it.s;
        let from = s.start.saturating_sub(base);
        let Some(own) = keys.get(from..from + s.len) else {
            continue;
        };
        let win = Win::held_at(s.start, own);
        let cost = middle_cost(win, s, cfg.tol);
        let middle = middle_line(s);
        if cost as f64 <= cfg.floor * s.len as f64 {
            meter(&mut found.certain, s, &middle, it.next, own, page, at);
            continue;
        }
        let r = cost as f64 / s.len as f64;
        let mut open = Open {
            j: it.j,
            cost,
            bucket: bucket_of(r),
            line: None,
            searched: false,
            metered: MIDDLE,
        };
        if !budget.is_some_and(|b| r * MARGIN <= b) {
            open.searched = true;
            open.line = better_line(win, s, cfg.tol, &slope_grid(s), cost).map(|l| (l.slope, l.intercept));
            if open.line.is_none() {
                // The middle line whatever the budget.
                meter(&mut found.certain, s, &middle, it.next, own, page, at);
                continue;
            }
            open.metered = if budget.is_some_and(|b| r > b * MARGIN) {
                GRID
            } else {
                MIDDLE | GRID
            };
        }
        let Some(slot) = found.buckets.get_mut(usize::from(open.bucket)) else {
            continue;
        };
        let [mid, alt] = &mut **slot.get_or_insert_with(|| Box::new([Tally::new(page), Tally::new(page)]));
        if open.metered & MIDDLE != 0 {
            meter(mid, s, &middle, it.next, own, page, at);
        }
        if let Some(line) = open.grid_line(s).filter(|_| open.metered & GRID != 0) {
            meter(alt, s, &line, it.next, own, page, at);
        }
        found.open.push(open);
    }
}

impl Ahead {
    /// For window `eps` around zero intervals of `page` positions, lines
    /// measured with reach `reach`, a budget of at least `floor`, guessed
    /// from `guess` (see [`super::TallyFold`]).
    pub(in super::super) fn new(eps: u64, page: u64, reach: u64, floor: f64, guess: super::Guess) -> Ahead {
        Ahead::holding(eps, page, reach, floor, HOLD, guess)
    }

    pub(super) fn holding(
        eps: u64,
        page: u64,
        reach: u64,
        floor: f64,
        hold: usize,
        guess: super::Guess,
    ) -> Ahead {
        let tol = Tolerance::items(eps, page);
        Ahead {
            segmenter: RunSegmenter::new(tol),
            cfg: Cfg { tol, reach, floor },
            hold: hold.max(1),
            segs: Vec::new(),
            found: Found::new(page),
            buf: Vec::new(),
            buf_start: 0,
            outgrown: false,
            pending: VecDeque::new(),
            later: Vec::new(),
            seen: 0,
            guess,
            parts: crossbeam_channel::unbounded(),
            out: 0,
            done: false,
        }
    }

    /// Keys `i..i + chunk.len()`, the next ones.
    pub(in super::super) fn push(&mut self, i: usize, chunk: &[u64]) {
        for (p, piece) in chunk.chunks(PIECE).enumerate() {
            let at = i + p * PIECE;
            if self.outgrown {
                self.buf.clear();
                self.buf_start = at;
            }
            self.buf.extend_from_slice(piece);
            self.seen = at + piece.len();
            let mut finished = Vec::new();
            self.segmenter.push(at, piece, &mut |s| finished.push(s));
            for s in finished {
                self.finished(s);
            }
            self.work_ready(None);
            if !self.outgrown && self.buf.len() > self.hold {
                // The open segment is longer than can be held: segments
                // still waiting go after the pass too (with a segment this
                // long after them, none does).
                self.later.extend(self.pending.drain(..));
                self.outgrown = true;
                self.buf.clear();
                self.buf_start = self.seen;
            }
        }
        while let Ok(part) = self.parts.1.try_recv() {
            self.out -= 1;
            self.found.absorb(part);
        }
    }

    /// Every key was pushed: the last segment and the waiting work.
    fn finish(&mut self) {
        let segmenter = std::mem::replace(&mut self.segmenter, RunSegmenter::new(self.cfg.tol));
        if let Some(s) = segmenter.finish() {
            self.finished(s);
        }
        self.work_ready(Some(self.seen));
        self.buf = Vec::new();
        while self.out > 0 {
            let Some(part) = recv_helping(&self.parts.1) else {
                break;
            };
            self.out -= 1;
            self.found.absorb(part);
        }
    }

    /// The zero-interval segments at window `epsilon` (every key pushed).
    pub(in super::super) fn segments(&mut self) -> &[Segment] {
        if !self.done {
            self.finish();
            self.done = true;
        }
        &self.segs
    }

    /// Segment `s` finished: it waits for its work, or (its keys let go)
    /// for the end of the pass.
    fn finished(&mut self, s: Segment) {
        let j = self.segs.len();
        self.segs.push(s);
        if self.outgrown || s.start < self.buf_start {
            self.later.push(j);
            self.outgrown = false;
        } else {
            self.pending.push_back(j);
        }
    }

    /// Works on the waiting segments whose meters no longer depend on the
    /// key count (all of them once it is known: `n`), on the pool's threads
    /// when it has more than one, and lets their keys go.
    fn work_ready(&mut self, n: Option<usize>) {
        let page = self.cfg.tol.zero_page;
        let mut items = Vec::new();
        while let Some(&j) = self.pending.front() {
            let Some(s) = self.segs.get(j).copied() else {
                break;
            };
            let end = s.end();
            if n.is_none() && (end as u64).saturating_add(page + self.cfg.reach + 2) > self.seen as u64 {
                break;
            }
            let next = end
                .checked_sub(self.buf_start)
                .and_then(|a| self.buf.get(a))
                .map(|&k| (end, k))
                .filter(|_| n != Some(end));
            items.push(Item { j, s, next });
            self.pending.pop_front();
        }
        if let (Some(first), Some(last)) = (items.first(), items.last()) {
            let at = At::new(n, self.cfg.reach);
            let budget = self.guess.get().map(|g| g + self.cfg.floor);
            let (lo, hi) = (
                first.s.start.saturating_sub(self.buf_start),
                last.s.end().saturating_sub(self.buf_start),
            );
            let keys = self.buf.get(lo..hi).unwrap_or_default();
            let threads = rayon::current_num_threads();
            if threads <= 1 {
                work(self.cfg, &items, first.s.start, keys, at, budget, &mut self.found);
            } else {
                // Parts of at least `PART_KEYS_AHEAD` keys, each with its keys.
                let mut from = 0;
                while from < items.len() {
                    let start = items.get(from).map_or(0, |it| it.s.start);
                    let mut to = from;
                    while let Some(it) = items.get(to) {
                        to += 1;
                        if it.s.end() - start >= PART_KEYS_AHEAD {
                            break;
                        }
                    }
                    let group = items.get(from..to).unwrap_or_default();
                    let end = group.last().map_or(start, |it| it.s.end());
                    let own = keys
                        .get(start - first.s.start..end - first.s.start)
                        .unwrap_or_default();
                    // While the pool has as many parts as threads, this
                    // thread works too (it would else wait for keys).
                    while let Ok(part) = self.parts.1.try_recv() {
                        self.out -= 1;
                        self.found.absorb(part);
                    }
                    if self.out >= PARTS_OUT {
                        work(self.cfg, group, start, own, at, budget, &mut self.found);
                    } else {
                        let (group, own) = (group.to_vec(), own.to_vec());
                        let (cfg, tx) = (self.cfg, self.parts.0.clone());
                        self.out += 1;
                        rayon::spawn(move || {
                            let mut found = Found::new(cfg.tol.zero_page);
                            work(cfg, &group, start, &own, at, budget, &mut found);
                            let _ = tx.send(found);
                        });
                    }
                    from = to;
                }
            }
        }
        // The keys before the first one still needed, once they are many.
        let needed = match self.pending.front() {
            Some(&j) => self.segs.get(j).map_or(self.seen, |s| s.start),
            None if self.outgrown => self.buf_start,
            None => self.segs.last().map_or(0, Segment::end),
        };
        let dead = needed.saturating_sub(self.buf_start).min(self.buf.len());
        if dead > self.buf.len() / 2 && dead >= PIECE {
            self.buf.drain(..dead);
            self.buf_start += dead;
        }
    }

    /// The band of the lines `budget` chooses and its extra pages per
    /// lookup: [`super::lines_measured_within`] of these segments, `tol`,
    /// `budget` and `reach`, made from what the pass metered (`keys`: every
    /// key, read for the segments a split bucket or the pass let go).
    pub(in super::super) fn resolve(mut self, keys: Keys<'_>, budget: f64) -> Result<(LayerBuild, f64)> {
        self.segments();
        let page = self.cfg.tol.zero_page;
        let n = self.seen;
        let keeps_middle = |cost: u64, s: &Segment| cost as f64 <= budget * s.len as f64;
        let chosen = |o: &Open| match self.segs.get(o.j) {
            Some(s) if !keeps_middle(o.cost, s) => GRID,
            _ => MIDDLE,
        };
        // Which lines each bucket's segments take (bits as `Open::metered`).
        let mut ways = vec![0u8; BUCKETS];
        let open = std::mem::take(&mut self.found.open);
        for o in &open {
            if let Some(w) = ways.get_mut(usize::from(o.bucket)) {
                *w |= chosen(o);
            }
        }
        let mut tally = std::mem::replace(&mut self.found.certain, Tally::new(0));
        for (b, &w) in self.found.buckets.iter_mut().zip(&ways) {
            if let Some(pair) = b.take() {
                let [mid, alt] = *pair;
                match w {
                    MIDDLE => tally = tally.merge(mid),
                    GRID => tally = tally.merge(alt),
                    _ => {}
                }
            }
        }
        let mut lines: Vec<SegmentLine> = self.segs.iter().map(middle_line).collect();
        // Segments metered again: those of a bucket the budget splits, and
        // those not metered with the line chosen (a wrong guess).
        let mut again: Vec<(usize, bool)> = Vec::new();
        for o in &open {
            let c = chosen(o);
            if c == GRID
                && let (Some(l), Some((slope, intercept))) = (lines.get_mut(o.j), o.line)
            {
                (l.slope, l.intercept) = (slope, intercept);
            }
            if ways.get(usize::from(o.bucket)) != Some(&c) || o.metered & c == 0 {
                // With the grid's line not searched yet: search it.
                again.push((o.j, c == GRID && !o.searched));
            }
        }
        drop(open);
        // The segments let go: searched now, with the budget.
        again.extend(self.later.iter().map(|&j| (j, true)));
        let (tol, segs, lines_now) = (self.cfg.tol, &self.segs, &lines);
        let at = At::new(Some(n), self.cfg.reach);
        let redone = again
            .par_iter()
            .map(|&(j, search)| {
                let s = *segs.get(j).ok_or_else(lost)?;
                let end = (s.end() + 1).min(n);
                keys.window(s.start..end, |win| {
                    let line = if search {
                        let cost = middle_cost(win, &s, tol);
                        if keeps_middle(cost, &s) {
                            None
                        } else {
                            better_line(win, &s, tol, &slope_grid(&s), cost)
                        }
                    } else {
                        None
                    };
                    let used = line
                        .or_else(|| lines_now.get(j).copied())
                        .unwrap_or_else(|| middle_line(&s));
                    let next = win.get(s.end()).filter(|_| s.end() < n).map(|k| (s.end(), k));
                    let mut t = Tally::new(page);
                    let m = Metering::new(&s, &used, next, page, at);
                    win.each(s.start..s.end(), |i, c| {
                        m.add(&mut t, i, c);
                        true
                    });
                    (j, line, t)
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for (j, line, t) in redone {
            if let (Some(line), Some(slot)) = (line, lines.get_mut(j)) {
                *slot = line;
            }
            tally = tally.merge(t);
        }
        let segs = &self.segs;
        let (entries, _) = band_entries(n, &lines, &|i| first_key_of(segs, i), None, 1, page)?;
        tally.finish(keys, &entries, page, page, self.cfg.reach)
    }

    /// Whether [`Ahead::resolve`] makes `lines_measured_within`'s band: the
    /// segments' first keys in order (else the keys were not sorted; that
    /// pass says what it makes of them).
    pub(in super::super) fn resolves(&mut self) -> bool {
        let segs = self.segments();
        !segs
            .windows(2)
            .any(|w| matches!(w, [a, b] if a.first_key > b.first_key))
            && segs.first().is_none_or(|s| s.start == 0)
    }
}

fn lost() -> crate::Error {
    crate::Error::invalid("a segment the first pass let go is missing")
}

/// What a meter takes of the key count: the clamp it gives the entries and
/// where the far end begins (none while it is unknown).
#[derive(Clone, Copy)]
struct At {
    max_unit: u64,
    far_end: u64,
    reach: u64,
}

impl At {
    fn new(n: Option<usize>, reach: u64) -> At {
        match n {
            Some(n) => At {
                max_unit: n as u64,
                far_end: (n as u64).saturating_sub(1).saturating_sub(reach),
                reach,
            },
            None => At {
                max_unit: u64::MAX,
                far_end: u64::MAX,
                reach,
            },
        }
    }
}

/// One segment's band entry and the next one's (its key and clamp floor:
/// a [`Meter`] reads no more of it), as [`super::lines_measured_within`] meters a
/// window's segments.
struct Metering {
    starts: [usize; 2],
    entries: [super::super::entries::BandEntry; 2],
    used: usize,
    start: usize,
    page: u64,
    at: At,
}

impl Metering {
    fn new(s: &Segment, line: &SegmentLine, next: Option<(usize, u64)>, page: u64, at: At) -> Metering {
        let entry = |l: &SegmentLine, key: u64| band_entry_of(l, key, None, 1, page, at.max_unit);
        let own = entry(line, s.first_key);
        let (used, after) = match next {
            Some((start, key)) => (
                2,
                entry(
                    &SegmentLine {
                        start,
                        slope: 0.0,
                        intercept: 0.0,
                    },
                    key,
                ),
            ),
            None => (1, own),
        };
        Metering {
            starts: [s.start, next.map_or(usize::MAX, |(start, _)| start)],
            entries: [own, after],
            used,
            start: s.start,
            page,
            at,
        }
    }

    /// Adds the segment's keys `i..i + chunk.len()` to `t`.
    fn add(&self, t: &mut Tally, i: usize, chunk: &[u64]) {
        let band = Measured {
            starts: self.starts.get(..self.used).unwrap_or_default(),
            entries: self.entries.get(..self.used).unwrap_or_default(),
            zero_page: self.page,
        };
        let taken = std::mem::replace(t, Tally::new(0));
        let mut m = Meter::with_tally(&band, self.start.max(i), self.at.max_unit, self.page, taken);
        m.add(i, chunk, self.at.reach, self.at.far_end);
        *t = m.t;
    }
}

/// Adds a segment's keys, predicted by `line`, to `t`.
fn meter(
    t: &mut Tally,
    s: &Segment,
    line: &SegmentLine,
    next: Option<(usize, u64)>,
    keys: &[u64],
    page: u64,
    at: At,
) {
    Metering::new(s, line, next, page, at).add(t, s.start, keys);
}
