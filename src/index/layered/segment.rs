//! The optimal segmentation (PGM's PLA) of every key of a design's first
//! pass, cut into partitions segmented in parallel while later keys still
//! arrive, and stitched into exactly the sequential result (issue 23's
//! parallel segmentation; the stitching and its proof: `model::PlaStitcher`).
//!
//! Over a piped or stored run ([`Keys::Piped`], [`Keys::Run`]) the keys are
//! gathered into partitions of [`PART_KEYS`] keys as the pass hands them
//! over; each full partition is segmented on a rayon worker while the pass
//! goes on, and the partitions are stitched in order as their segmentations
//! come back. Memory: at most [`PARTS_IN_FLIGHT`] partitions handed to
//! workers and not yet stitched, the one being filled, up to [`HELD_PARTS`]
//! stitched ones a fold still reads ([`optimal_segments_folded`]) and
//! stitched ones kept for reuse (a buffer is allocated only when none is
//! free): at most `(PARTS_IN_FLIGHT + 1 + HELD_PARTS) × PART_KEYS × 8`
//! bytes = 28 MiB whatever the number of keys, plus the segments (the
//! model). Keys in memory ([`Keys::Slice`]) are segmented in place,
//! partitions in parallel. With one rayon thread it is the plain sequential
//! pass, holding at most the open segment's keys for a fold.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use rayon::prelude::*;

use super::keys::Keys;
use crate::model::{
    IntervalPoint, IntervalRun, IntervalSteps, PlaPart, PlaStitcher, PlaStream, Segment, segment_part,
};
use crate::{Error, Result};

/// Keys per partition segmented on a worker (4 MiB of keys).
pub(super) const PART_KEYS: usize = 1 << 19;

/// Partitions handed to workers and not yet stitched, at most.
pub(super) const PARTS_IN_FLIGHT: usize = 4;

/// Stitched partitions kept for the segment still open across them, at
/// most: a segment of up to `PART_KEYS + 1` keys is folded from them; a
/// longer one, and one longer than `2 × PART_KEYS` on one thread, is read
/// again after the pass (see [`optimal_segments_folded`]).
const HELD_PARTS: usize = 2;

/// Work done over each finished segment's keys while a segmentation pass
/// holds them ([`optimal_segments_folded`]), so that measuring the model
/// (a band's error bounds, its pages per lookup) needs no pass of its own.
/// The accumulators must add up to the same value whatever the grouping and
/// order of the segments (maxima, sums).
pub(super) trait SegmentFold: Sync {
    /// What the work adds up to.
    type Acc: Send;
    /// Whether [`SegmentFold::add`] reads the keys at all (else none are held).
    const KEYS: bool = true;
    /// An accumulator of nothing.
    fn empty(&self) -> Self::Acc;
    /// Keys `first..first + keys.len()` of `seg`: each segment's keys come
    /// in one or more calls, in order, every key once. `last`: `seg` is the
    /// input's last segment (the number of keys is `seg.end()`; over a run
    /// being written it is unknown before).
    fn add(&self, acc: &mut Self::Acc, seg: &Segment, last: bool, first: usize, keys: &[u64]);
    /// Two accumulators as one.
    fn merge(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
}

/// The interval of every key of a segmentation: key `i`'s prediction must
/// fall in `interval(i)`. A closure of the index is one, each key its own
/// run; intervals that come in runs (zero intervals: a page's keys share
/// one) say where each run ends, and a run is pushed whole
/// ([`PlaStream::push_run`]: O(log run) steps, the same segments).
pub(super) trait Intervals: Sync {
    /// Key `i`'s interval `(lo, hi)`.
    fn interval(&self, i: usize) -> (i128, i128);
    /// Whether the intervals come in runs ([`Intervals::run_end`]).
    fn runs(&self) -> bool {
        false
    }
    /// One past the last key, from `i` on, whose interval is key `i`'s (at
    /// least `i + 1`).
    fn run_end(&self, i: usize) -> usize {
        i + 1
    }
    /// Whether key `i + 1`'s interval is key `i`'s moved up by one, for
    /// every `i` (PGM's `[i - eps, i + eps]`): the keys are then pushed a
    /// chunk at a time ([`PlaStream::push_steps`], the same segments).
    fn steps(&self) -> bool {
        false
    }
}

impl<F: Fn(usize) -> (i128, i128) + Sync> Intervals for F {
    #[inline]
    fn interval(&self, i: usize) -> (i128, i128) {
        self(i)
    }
}

/// The fold that does nothing (a segmentation alone).
struct NoFold;

impl SegmentFold for NoFold {
    type Acc = ();
    const KEYS: bool = false;
    fn empty(&self) {}
    fn add(&self, _: &mut (), _: &Segment, _: bool, _: usize, _: &[u64]) {}
    fn merge(&self, _: (), _: ()) {}
}

/// The optimal PLA of `keys`, key `i` with the interval `interval(i)`, in
/// one pass over them (over a run being written: as it is written). The
/// same segments as [`crate::model::optimal_pla_points`] over all points,
/// whatever the threads. O(n) work, spread over the rayon pool's threads.
pub(super) fn optimal_segments<F>(keys: Keys<'_>, interval: F) -> Result<Vec<Segment>>
where
    F: Intervals,
{
    Ok(optimal_segments_with(
        keys,
        &interval,
        &NoFold,
        true,
        PART_KEYS,
        PARTS_IN_FLIGHT,
        &mut |_, _| {},
    )?
    .0)
}

/// [`optimal_segments`], and `fold` over every segment's keys in the same
/// pass: a finished segment is folded from the keys the pass still holds
/// (on one thread the open segment's, up to `2 × PART_KEYS`; else the
/// partitions stitched, up to [`HELD_PARTS`] of them for a segment open
/// across them). The rare segment longer than that is folded after the
/// pass, from its own keys read again. The same accumulator whatever the
/// threads and sources.
pub(super) fn optimal_segments_folded<F, M>(
    keys: Keys<'_>,
    interval: F,
    fold: &M,
) -> Result<(Vec<Segment>, M::Acc)>
where
    F: Intervals,
    M: SegmentFold,
{
    let (segs, _, acc) = optimal_segments_with(
        keys,
        &interval,
        fold,
        true,
        PART_KEYS,
        PARTS_IN_FLIGHT,
        &mut |_, _| {},
    )?;
    Ok((segs, acc))
}

/// [`optimal_segments_folded`] without the segments (a measure of a
/// segmentation that is not kept: held only while its keys are, not until
/// the pass ends): how many there are and the fold; `beside(i, chunk)` sees
/// every key of the pass once, in order, on the pass's own thread (another
/// segmentation of the same keys in the same pass: [`RunSegmenter`]).
pub(super) fn fold_segments_beside<F, M>(
    keys: Keys<'_>,
    interval: F,
    fold: &M,
    beside: &mut (dyn FnMut(usize, &[u64]) + Send),
) -> Result<(usize, M::Acc)>
where
    F: Intervals,
    M: SegmentFold,
{
    let (_, count, acc) =
        optimal_segments_with(keys, &interval, fold, false, PART_KEYS, PARTS_IN_FLIGHT, beside)?;
    Ok((count, acc))
}

/// The optimal segmentation of keys fed a chunk at a time, in order, under
/// intervals that come in runs (each run pushed whole: O(log run) steps,
/// cheap enough for a pass's own thread beside its other work).
pub(super) struct RunSegmenter<G> {
    pla: PlaStream,
    intervals: G,
}

impl<G: Intervals> RunSegmenter<G> {
    pub(super) fn new(intervals: G) -> Self {
        RunSegmenter {
            pla: PlaStream::new(),
            intervals,
        }
    }

    /// Keys `i..i + chunk.len()` (the next ones); `out` gets each segment
    /// they finish.
    pub(super) fn push(&mut self, i: usize, chunk: &[u64], out: &mut impl FnMut(Segment)) {
        for (xs, lo, hi) in runs(i, chunk, &self.intervals) {
            self.pla.push_run(xs, lo, hi, out);
        }
    }

    /// The last segment, once every key was pushed.
    pub(super) fn finish(mut self) -> Option<Segment> {
        self.pla.finish()
    }
}

/// [`optimal_segments_folded`] (with `keep`; else [`fold_segments_beside`]: no
/// segments, their number) with partitions of `part_keys` keys and at most
/// `in_flight` of them unstitched (both at least 1); `beside(i, chunk)`
/// sees every key of the pass once, in order, on the pass's thread.
/// Intervals in runs are segmented on that thread too: a run costs a few
/// steps, less than handing its keys to a worker.
#[allow(clippy::too_many_arguments)]
fn optimal_segments_with<F, M>(
    keys: Keys<'_>,
    interval: &F,
    fold: &M,
    keep: bool,
    part_keys: usize,
    in_flight: usize,
    beside: &mut (dyn FnMut(usize, &[u64]) + Send),
) -> Result<(Vec<Segment>, usize, M::Acc)>
where
    F: Intervals,
    M: SegmentFold,
{
    let part_keys = part_keys.max(1);
    // The segments (if kept), how many, the keys, the fold, and the
    // segments whose keys were let go before they finished.
    let (segs, count, n, acc, later) = if rayon::current_num_threads() <= 1 || interval.runs() {
        sequential(keys, interval, fold, keep, 2 * part_keys, beside)?
    } else if let Keys::Slice(all) = keys {
        beside(0, all);
        let parts: Vec<PlaPart> = all
            .par_chunks(part_keys)
            .enumerate()
            .map(|(p, c)| part_of(p * part_keys, c, interval))
            .collect();
        let mut st = PlaStitcher::new();
        for (p, (part, c)) in parts.into_iter().zip(all.chunks(part_keys)).enumerate() {
            stitch(&mut st, part, p * part_keys, c, interval)?;
        }
        let segs = st.finish();
        // Every key is at hand: the segments in parallel groups.
        let acc = if M::KEYS {
            segs.par_chunks(256)
                .map(|group| {
                    let mut acc = fold.empty();
                    for s in group {
                        let own = all.get(s.start..s.end()).ok_or_else(outside)?;
                        fold.add(&mut acc, s, s.end() == all.len(), s.start, own);
                    }
                    Ok(acc)
                })
                .try_reduce(|| fold.empty(), |a, b| Ok(fold.merge(a, b)))?
        } else {
            fold.empty()
        };
        let count = segs.len();
        (
            if keep { segs } else { Vec::new() },
            count,
            all.len(),
            acc,
            Vec::new(),
        )
    } else {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut pipeline = Pipeline {
            interval,
            fold,
            part_keys,
            in_flight: in_flight.max(1),
            stitcher: PlaStitcher::new(),
            spawned: 0,
            stitched: 0,
            done: BTreeMap::new(),
            spare: Vec::new(),
            held: Held::default(),
            keep,
            forgot: 0,
            tx,
            rx,
        };
        rayon::scope(|s| pipeline.run(s, keys, beside))?;
        let Pipeline {
            stitcher,
            mut held,
            forgot,
            ..
        } = pipeline;
        let n = stitcher.next_index();
        let segs = stitcher.finish();
        // The last segment, open until the end.
        held.fold_from(&segs, fold, true);
        let count = forgot + segs.len();
        (
            if keep { segs } else { Vec::new() },
            count,
            n,
            held.acc.unwrap_or_else(|| fold.empty()),
            held.later,
        )
    };
    // Segments longer than the keys held: their keys read again.
    let mut acc = acc;
    for s in &later {
        keys.for_each_chunk(s.start..s.end(), |i, chunk| {
            fold.add(&mut acc, s, s.end() == n, i, chunk);
            Ok(())
        })?;
    }
    Ok((segs, count, acc))
}

fn outside() -> Error {
    Error::invalid("a segment reaches past the keys")
}

/// The plain sequential pass (one thread), folding each segment from the
/// keys held since it began (up to `hold`); returns the segments (if
/// `keep`), their number, the number of keys, the fold and the segments too
/// long to hold.
#[allow(clippy::type_complexity)]
fn sequential<F, M>(
    keys: Keys<'_>,
    interval: &F,
    fold: &M,
    keep: bool,
    hold: usize,
    beside: &mut (dyn FnMut(usize, &[u64]) + Send),
) -> Result<(Vec<Segment>, usize, usize, M::Acc, Vec<Segment>)>
where
    F: Intervals,
    M: SegmentFold,
{
    let mut pla = PlaStream::new();
    let (mut segs, mut count) = (Vec::new(), 0usize);
    let mut acc = fold.empty();
    let mut later = Vec::new();
    // The open segment's keys from earlier chunks (`own_start` the first),
    // unless it outgrew `hold`; its keys in the chunk at hand are folded
    // from the chunk itself.
    let mut own: Vec<u64> = Vec::new();
    let (mut own_start, mut outgrown) = (0usize, false);
    let mut finished =
        |s: Segment, last: bool, own: &[u64], own_start: usize, outgrown: bool, here: &[u64]| {
            if M::KEYS {
                if !outgrown && own_start == s.start && own.len() + here.len() == s.len {
                    if !own.is_empty() {
                        fold.add(&mut acc, &s, last, s.start, own);
                    }
                    if !here.is_empty() {
                        fold.add(&mut acc, &s, last, s.start + own.len(), here);
                    }
                } else {
                    later.push(s);
                }
            }
            count += 1;
            if keep {
                segs.push(s);
            }
        };
    keys.for_each_all(|i, c| {
        beside(i, c);
        // The open segment's first key in this chunk.
        let mut from = 0usize;
        // A segment finished: the next begins at its end, key `j` of `c`.
        let mut on_segment = |s: Segment| {
            let j = s.end().saturating_sub(i).min(c.len());
            finished(
                s,
                false,
                &own,
                own_start,
                outgrown,
                c.get(from..j).unwrap_or_default(),
            );
            own.clear();
            (own_start, outgrown, from) = (i + j, false, j);
        };
        if interval.runs() {
            for (xs, lo, hi) in runs(i, c, interval) {
                pla.push_run(xs, lo, hi, &mut on_segment);
            }
        } else if interval.steps() {
            let (lo, hi) = interval.interval(i);
            pla.push_steps(c, lo, hi, &mut on_segment);
        } else {
            for (j, &k) in c.iter().enumerate() {
                let (lo, hi) = interval.interval(i + j);
                if let Some(s) = pla.push(k, lo, hi) {
                    on_segment(s);
                }
            }
        }
        if M::KEYS && !outgrown {
            let rest = c.get(from..).unwrap_or_default();
            if own.len() + rest.len() <= hold {
                own.extend_from_slice(rest);
            } else {
                outgrown = true;
                own = Vec::new();
            }
        }
        Ok(())
    })?;
    let n = pla.next_index();
    if let Some(s) = pla.finish() {
        finished(s, true, &own, own_start, outgrown, &[]);
    }
    Ok((segs, count, n, acc, later))
}

/// The keys a pipeline still holds after stitching, for the segments that
/// finish in them, and what it folded.
struct Held<A> {
    /// Stitched partitions, in order and adjacent: (first key's index, keys).
    parts: std::collections::VecDeque<(usize, Vec<u64>)>,
    /// Segments folded (a prefix of the segmentation).
    folded: usize,
    acc: Option<A>,
    /// Segments whose keys were let go before they finished.
    later: Vec<Segment>,
}

impl<A> Default for Held<A> {
    fn default() -> Self {
        Held {
            parts: Default::default(),
            folded: 0,
            acc: None,
            later: Vec::new(),
        }
    }
}

impl<A> Held<A> {
    /// Folds the segments of `segs` not folded yet, from the keys held (or
    /// marks them for later); `ended`: `segs` is the whole segmentation.
    fn fold_from<M: SegmentFold<Acc = A>>(&mut self, segs: &[Segment], fold: &M, ended: bool) {
        let acc = self.acc.get_or_insert_with(|| fold.empty());
        let n = segs.len();
        for (j, s) in segs.iter().enumerate().skip(self.folded) {
            let last = ended && j + 1 == n;
            let covered = matches!(
                (self.parts.front(), self.parts.back()),
                (Some((a, _)), Some((b, last))) if *a <= s.start && s.end() <= b + last.len()
            );
            if !covered {
                self.later.push(*s);
                continue;
            }
            for (p0, keys) in &self.parts {
                let (a, b) = (s.start.max(*p0), s.end().min(p0 + keys.len()));
                if let Some(piece) = keys.get(a.saturating_sub(*p0)..b.saturating_sub(*p0))
                    && a < b
                {
                    fold.add(acc, s, last, a, piece);
                }
            }
        }
        self.folded = segs.len();
    }

    /// The held partitions no segment needs any more (all before `open`,
    /// the open segment's start), and the oldest beyond [`HELD_PARTS`].
    fn release(&mut self, open: usize) -> Vec<Vec<u64>> {
        let mut out = Vec::new();
        while let Some((p0, keys)) = self.parts.front() {
            if p0 + keys.len() <= open || self.parts.len() > HELD_PARTS {
                out.extend(self.parts.pop_front().map(|(_, k)| k));
            } else {
                break;
            }
        }
        out
    }
}

/// The points of `keys`, the first of which is key `start` of the input.
fn points<'a, F>(start: usize, keys: &'a [u64], interval: &'a F) -> impl Iterator<Item = IntervalPoint> + 'a
where
    F: Intervals,
{
    keys.iter().enumerate().map(move |(j, &k)| {
        let (lo, hi) = interval.interval(start + j);
        (k, lo, hi)
    })
}

/// Keys a stitcher is fed at a time as [`IntervalSteps`]: it checks whether
/// the segmentations met between items, and pushes the rest of an item
/// after they did.
const STEP_ITEM: usize = 256;

/// `keys` (key `start` of the input first) as [`IntervalSteps`] of
/// [`STEP_ITEM`] keys, for intervals that step ([`Intervals::steps`]).
fn steps<'a, F>(
    start: usize,
    keys: &'a [u64],
    interval: &'a F,
) -> impl Iterator<Item = IntervalSteps<'a>> + 'a
where
    F: Intervals,
{
    keys.chunks(STEP_ITEM).enumerate().map(move |(c, xs)| {
        let (lo, hi) = interval.interval(start + c * STEP_ITEM);
        IntervalSteps { xs, lo, hi }
    })
}

/// The runs of `keys` (key `start` of the input first) with their intervals
/// ([`Intervals::run_end`]), cut at the end of `keys`.
fn runs<'a, F>(start: usize, keys: &'a [u64], interval: &'a F) -> impl Iterator<Item = IntervalRun<'a>> + 'a
where
    F: Intervals,
{
    let mut j = 0usize;
    std::iter::from_fn(move || {
        if j >= keys.len() {
            return None;
        }
        let i = start + j;
        let end = interval
            .run_end(i)
            .saturating_sub(start)
            .max(j + 1)
            .min(keys.len());
        let xs = keys.get(j..end)?;
        let (lo, hi) = interval.interval(i);
        j = end;
        Some((xs, lo, hi))
    })
}

/// [`segment_part`] of `keys`, key `start` of the input first, by runs
/// when the intervals come in runs.
fn part_of<F: Intervals>(start: usize, keys: &[u64], interval: &F) -> PlaPart {
    if interval.runs() {
        segment_part(start, runs(start, keys, interval))
    } else if interval.steps() {
        segment_part(start, steps(start, keys, interval))
    } else {
        segment_part(start, points(start, keys, interval))
    }
}

/// [`PlaStitcher::stitch`] of the partition `part` of `keys` (key `start`
/// first), fed as [`part_of`] made it.
fn stitch<F: Intervals>(
    st: &mut PlaStitcher,
    part: PlaPart,
    start: usize,
    keys: &[u64],
    interval: &F,
) -> Result<()> {
    if interval.runs() {
        st.stitch(part, runs(start, keys, interval))
    } else if interval.steps() {
        st.stitch(part, steps(start, keys, interval))
    } else {
        st.stitch(part, points(start, keys, interval))
    }
}

/// A partition's number, its keys, and its segmentation (`None`: the
/// worker failed).
type Done = (usize, Vec<u64>, Option<PlaPart>);

/// Partitions gathered from a pass, segmented on workers, stitched in order
/// (and folded from, see [`Held`]).
struct Pipeline<'f, F, M: SegmentFold> {
    interval: &'f F,
    fold: &'f M,
    part_keys: usize,
    in_flight: usize,
    stitcher: PlaStitcher,
    /// Partitions handed out (the next one's number).
    spawned: usize,
    /// Partitions stitched (the next one to stitch).
    stitched: usize,
    /// Segmented partitions waiting for the ones before them.
    done: BTreeMap<usize, (Vec<u64>, PlaPart)>,
    /// Stitched partitions' buffers, for the next ones.
    spare: Vec<Vec<u64>>,
    /// Stitched partitions still folded from.
    held: Held<M::Acc>,
    /// Whether the segments are kept (else counted once folded).
    keep: bool,
    forgot: usize,
    tx: Sender<Done>,
    rx: Receiver<Done>,
}

impl<'f, F, M> Pipeline<'f, F, M>
where
    F: Intervals,
    M: SegmentFold,
{
    fn run<'s>(
        &mut self,
        s: &rayon::Scope<'s>,
        keys: Keys<'_>,
        beside: &mut (dyn FnMut(usize, &[u64]) + Send),
    ) -> Result<()>
    where
        'f: 's,
    {
        let mut buf: Vec<u64> = Vec::with_capacity(self.part_keys);
        let mut buf_start = 0usize;
        keys.for_each_all(|i, chunk| {
            beside(i, chunk);
            let mut pos = i;
            let mut rest = chunk;
            while !rest.is_empty() {
                if buf.is_empty() {
                    buf_start = pos;
                }
                let take = (self.part_keys - buf.len()).min(rest.len());
                let (head, tail) = rest.split_at(take);
                buf.extend_from_slice(head);
                (pos, rest) = (pos + take, tail);
                if buf.len() == self.part_keys {
                    let next = self
                        .spare
                        .pop()
                        .unwrap_or_else(|| Vec::with_capacity(self.part_keys));
                    let full = std::mem::replace(&mut buf, next);
                    self.spawn(s, buf_start, full);
                    while self.spawned - self.stitched >= self.in_flight {
                        self.receive(true)?;
                    }
                }
            }
            // Stitch what is ready, so its keys are freed early.
            self.receive(false)
        })?;
        // The last, partial partition: segmented here, meanwhile the
        // workers finish theirs.
        if !buf.is_empty() {
            let part = part_of(buf_start, &buf, self.interval);
            self.done.insert(self.spawned, (buf, part));
            self.spawned += 1;
        }
        while self.stitched < self.spawned {
            self.receive(true)?;
        }
        Ok(())
    }

    /// Hands partition `keys` (key `start` first) to a worker.
    fn spawn<'s>(&mut self, s: &rayon::Scope<'s>, start: usize, keys: Vec<u64>)
    where
        'f: 's,
    {
        let (no, tx, interval) = (self.spawned, self.tx.clone(), self.interval);
        self.spawned += 1;
        s.spawn(move |_| {
            let part = catch_unwind(AssertUnwindSafe(|| part_of(start, &keys, interval))).ok();
            // The receiver lives until every partition is stitched.
            let _ = tx.send((no, keys, part));
        });
    }

    /// Takes the segmentations that came back (with `block`, waiting for one
    /// if the next partition to stitch is not among them yet), and stitches
    /// every partition whose predecessors are stitched.
    fn receive(&mut self, block: bool) -> Result<()> {
        let mut next = if block && !self.done.contains_key(&self.stitched) {
            Some(self.wait()?)
        } else {
            None
        };
        loop {
            let got = match next.take() {
                Some(d) => d,
                None => match self.rx.try_recv() {
                    Ok(d) => d,
                    Err(_) => break,
                },
            };
            let (no, keys, part) = got;
            let part = part.ok_or_else(|| Error::invalid(format!("segmenting key partition {no} failed")))?;
            self.done.insert(no, (keys, part));
        }
        while let Some((keys, part)) = self.done.remove(&self.stitched) {
            let start = part.start();
            stitch(&mut self.stitcher, part, start, &keys, self.interval)?;
            self.stitched += 1;
            let free = if M::KEYS {
                self.held.parts.push_back((start, keys));
                self.held.fold_from(self.stitcher.segments(), self.fold, false);
                if !self.keep {
                    self.forgot += self.stitcher.take_segments().len();
                    self.held.folded = 0;
                }
                self.held.release(self.stitcher.open_start())
            } else {
                vec![keys]
            };
            // Buffers are kept for the partitions to come (allocated and
            // freed by the hundred, the allocator would hold far more than
            // the pipeline uses); never more than are in flight at once.
            for mut keys in free {
                if self.spare.len() < self.in_flight {
                    keys.clear();
                    self.spare.push(keys);
                }
            }
        }
        Ok(())
    }

    /// The next segmentation to come back. On a rayon worker (the pipeline
    /// runs on one) it runs queued partitions itself while it waits, so a
    /// pool whose other threads are busy still makes progress.
    fn wait(&self) -> Result<Done> {
        recv_helping(&self.rx).ok_or_else(|| Error::invalid("a key partition's worker is gone"))
    }
}

/// The next message on `rx`, waiting for it; a thread of the rayon pool
/// runs the pool's pending work meanwhile (the message may come from work
/// only it would run). `None` once every sender is gone.
pub(super) fn recv_helping<T>(rx: &Receiver<T>) -> Option<T> {
    loop {
        match rx.try_recv() {
            Ok(d) => return Some(d),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        match rayon::yield_now() {
            Some(rayon::Yield::Executed) => {}
            None => return rx.recv().ok(),
            Some(_) => match rx.recv_timeout(Duration::from_millis(1)) {
                Ok(d) => return Some(d),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::DataRun;
    use crate::index::layered::keys::Pipe;
    use crate::storage::{Directory, MemDirectory};

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    /// Segments `keys` in memory, from a run, and piped (uneven chunks)
    /// with `threads` threads and tiny partitions; each must equal the
    /// sequential segmentation.
    fn check(keys: &[u64], eps: i128, threads: usize, part_keys: usize, in_flight: usize) {
        let interval = move |i: usize| (i as i128 - eps, i as i128 + eps);
        check_with(keys, &interval, threads, part_keys, in_flight);
        // The same intervals said to step: pushed a chunk at a time.
        check_with(keys, &Stepped(eps), threads, part_keys, in_flight);
        // Zero intervals (runs of a page's keys), pages of 3 and 64 keys.
        for page in [3, 64] {
            let paged = Paged { eps, page };
            check_with(keys, &paged, threads, part_keys, in_flight);
        }
    }

    /// PGM's intervals `[i - eps, i + eps]`, which step by one.
    struct Stepped(i128);

    impl Intervals for Stepped {
        fn interval(&self, i: usize) -> (i128, i128) {
            (i as i128 - self.0, i as i128 + self.0)
        }
        fn steps(&self) -> bool {
            true
        }
    }

    /// Zero intervals of `page` keys widened by `eps`, in runs.
    struct Paged {
        eps: i128,
        page: usize,
    }

    impl Intervals for Paged {
        fn interval(&self, i: usize) -> (i128, i128) {
            let first = (i / self.page * self.page) as i128;
            (first - self.eps, first + self.page as i128 - 1 + self.eps)
        }
        fn runs(&self) -> bool {
            true
        }
        fn run_end(&self, i: usize) -> usize {
            (i / self.page + 1) * self.page
        }
    }

    /// [`check`] of the intervals `interval`, against the points pushed one
    /// by one.
    fn check_with<I: Intervals>(
        keys: &[u64],
        interval: &I,
        threads: usize,
        part_keys: usize,
        in_flight: usize,
    ) {
        let want = crate::model::optimal_pla_points(points(0, keys, interval));
        let dir = MemDirectory::new();
        DataRun::write_ranked(&dir, "r", keys, 4096).unwrap();
        let run = DataRun::open(dir.open_read("r").unwrap()).unwrap();
        let fold = Digest;
        let want_digest: u64 = want
            .iter()
            .map(|s| Digest::of(s, s.end() == keys.len(), s.start, &keys[s.start..s.end()]))
            .fold(0, u64::wrapping_add);
        pool(threads).install(|| {
            let seg = |k: Keys<'_>| {
                let (segs, _, digest) =
                    optimal_segments_with(k, interval, &fold, true, part_keys, in_flight, &mut |_, _| {})
                        .unwrap();
                let source = match k {
                    Keys::Slice(_) => "slice",
                    Keys::Run(_) => "run",
                    Keys::Piped(_) => "piped",
                    Keys::Spill(_) => "spill",
                };
                assert_eq!(
                    digest,
                    want_digest,
                    "the fold over the {source}: {} keys, {threads} threads, partitions of {part_keys}",
                    keys.len()
                );
                assert_eq!(
                    optimal_segments_with(k, interval, &NoFold, true, part_keys, in_flight, &mut |_, _| {})
                        .unwrap()
                        .0,
                    segs
                );
                let (none, count, forgetful) =
                    optimal_segments_with(k, interval, &fold, false, part_keys, in_flight, &mut |_, _| {})
                        .unwrap();
                assert!(none.is_empty());
                assert_eq!(
                    (count, forgetful),
                    (segs.len(), digest),
                    "not kept, over the {source}"
                );
                segs
            };
            assert_eq!(seg(Keys::Slice(keys)), want, "slice");
            assert_eq!(seg(Keys::Run(&run)), want, "run");
            let (pipe, tx) = Pipe::new();
            let piped = std::thread::scope(|s| {
                s.spawn(|| {
                    let (mut i, mut step) = (0, 1);
                    while i < keys.len() {
                        let j = (i + step).min(keys.len());
                        let _ = tx.send(keys[i..j].to_vec());
                        i = j;
                        step = step * 7 % 997 + 1;
                    }
                    drop(tx);
                    pipe.finish(dir.open_read("r").and_then(DataRun::open));
                });
                let got = seg(Keys::Piped(&pipe));
                pipe.close();
                got
            });
            assert_eq!(piped, want, "piped");
        });
    }

    /// A fold whose sum depends on every key's segment, index and value,
    /// once each (a key folded twice, missed or under another segment
    /// changes it).
    struct Digest;

    impl Digest {
        fn of(s: &Segment, last: bool, first: usize, keys: &[u64]) -> u64 {
            keys.iter().enumerate().fold(0u64, |a, (d, &k)| {
                let i = (first + d) as u64;
                let x = k
                    ^ i.rotate_left(29)
                    ^ (s.start as u64).rotate_left(43)
                    ^ s.slope.to_bits()
                    ^ u64::from(last);
                a.wrapping_add(x.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (x >> 31))
            })
        }
    }

    impl SegmentFold for Digest {
        type Acc = u64;
        fn empty(&self) -> u64 {
            0
        }
        fn add(&self, acc: &mut u64, seg: &Segment, last: bool, first: usize, keys: &[u64]) {
            *acc = acc.wrapping_add(Self::of(seg, last, first, keys));
        }
        fn merge(&self, a: u64, b: u64) -> u64 {
            a.wrapping_add(b)
        }
    }

    fn keys_of(n: usize, seed: u64, shift: u32) -> Vec<u64> {
        let mut x = seed | 1;
        let mut v: Vec<u64> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x >> shift
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn parallel_segments_equal_sequential_ones() {
        for (n, shift) in [(0usize, 0u32), (1, 0), (5_000, 40), (30_000, 0), (30_000, 44)] {
            let keys = keys_of(n, n as u64 + 3, shift);
            for (threads, part, fl) in [(1, 100, 2), (2, 1, 1), (2, 37, 1), (3, 1_000, 2), (4, 4_096, 4)] {
                for eps in [0i128, 4, 64] {
                    check(&keys, eps, threads, part, fl);
                }
            }
        }
        // Dense runs between huge gaps, and the top of the key space.
        let mut runs: Vec<u64> = (0..30u64)
            .flat_map(|r| (0..500u64).map(move |i| r * (1 << 58) + i * 3))
            .collect();
        runs.extend((0..700u64).map(|i| u64::MAX - 700 + i));
        runs.push(u64::MAX);
        runs.dedup();
        check(&runs, 2, 3, 333, 2);
        // One segment across every partition: the stitcher pushes them all.
        let line: Vec<u64> = (0..20_000u64).map(|i| i * 5).collect();
        check(&line, 1, 2, 999, 3);
    }

    #[test]
    fn a_failed_pass_is_an_error() {
        let (pipe, tx) = Pipe::new();
        pipe.finish(Err(Error::invalid("no run here")));
        drop(tx);
        let e = pool(2)
            .install(|| {
                optimal_segments_with(
                    Keys::Piped(&pipe),
                    &|i: usize| (i as i128, i as i128),
                    &NoFold,
                    true,
                    4,
                    2,
                    &mut |_, _| {},
                )
            })
            .unwrap_err();
        assert!(e.to_string().contains("no run here"), "{e}");
    }
}
