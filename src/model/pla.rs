//! Piecewise linear approximation (PLA) of sorted keys under interval
//! constraints.
//!
//! Input is a stream of points `(x, lo, hi)`: a key `x` and the interval
//! `[lo, hi]` its prediction must fall in. The usual error-bounded case is
//! `[y - eps, y + eps]` for the key's position `y`; the disk-based *zero
//! intervals* of Zhang et al. (§6.1) widen it to whole pages; an upper layer
//! of an index uses the positions of the segments below it.
//!
//! - [`PlaStream`] / [`optimal_pla_points`]: the optimal streaming
//!   segmentation of the PGM-index (O'Rourke's algorithm). Each segment is
//!   extended while *some* line passes through every interval of it, so the
//!   number of segments is the minimum possible. O(1) amortised per point.
//! - [`PlaStream::push_run`]: a run of points sharing one interval (a
//!   page's keys under zero intervals) in O(log run) steps, the same
//!   segments.
//! - [`segment_part`] and [`PlaStitcher`]: the same segmentation made of
//!   partitions segmented independently (in parallel, by the caller) and
//!   stitched into exactly the sequential output.
//! - [`greedy_cone_points`]: the FITing-tree shrinking cone, a line anchored
//!   at the segment's first point; never fewer segments than the optimum.
//! - [`InterceptRange`] and [`min_slope_set`]: the slope compression of the
//!   compressed PGM-index (fewest distinct slopes, intercepts re-fitted).
//!
//! Every decision is made in exact integer arithmetic (see `exact`); only
//! the reported line is rounded to `f64`. Its prediction at a point of the
//! segment lies in `[lo - tol, hi + tol]` with
//! `tol = PREDICTION_TOLERANCE * scale` and `scale = max(1, |lo|, |hi|)`
//! over the segment's points; for positions below 2^46 this is below 1.
//!
//! Points must come with strictly increasing `x`. A point whose `x` is not
//! greater than its predecessor's starts a new segment (so the guarantee per
//! point still holds, but the segments' first keys are then not increasing;
//! validate input first).

use std::cmp::Ordering;

use super::exact::{Coord, P, Slope, Y64_LIMIT, clamp_y, orient};

/// A point of the segmentation input: key `x`, and the inclusive interval
/// `[lo, hi]` its prediction must fall in. Intervals with `lo > hi` are
/// swapped; coordinates are clamped to `±2^120`.
pub type IntervalPoint = (u64, i128, i128);

/// A run of points sharing one interval: keys `xs` (input indices
/// consecutive) and the interval `[lo, hi]` of each, as an [`IntervalPoint`]
/// (zero intervals give every key of a page the same one). Fed to a
/// [`PlaStream`] with [`PlaStream::push_run`].
pub type IntervalRun<'a> = (&'a [u64], i128, i128);

/// Points whose intervals step by one position from key to key: key
/// `xs[j]` with `[lo + j, hi + j]` (PGM's `[i - eps, i + eps]`; input indices
/// consecutive). Fed to a [`PlaStream`] with [`PlaStream::push_steps`].
#[derive(Debug, Clone, Copy)]
pub struct IntervalSteps<'a> {
    /// The keys.
    pub xs: &'a [u64],
    /// The first key's interval.
    pub lo: i128,
    /// The first key's interval's upper end.
    pub hi: i128,
}

/// What a segmentation is fed, one item at a time: an [`IntervalPoint`], an
/// [`IntervalRun`] or [`IntervalSteps`] (see [`segment_part`],
/// [`PlaStitcher::stitch`]).
pub trait PlaInput {
    /// Points in the item.
    fn points(&self) -> usize;
    /// Pushes the item's points into `stream`, handing every segment they
    /// finish to `out`, in order.
    fn feed(self, stream: &mut PlaStream, out: &mut impl FnMut(Segment));
}

impl PlaInput for IntervalPoint {
    fn points(&self) -> usize {
        1
    }
    #[inline]
    fn feed(self, stream: &mut PlaStream, out: &mut impl FnMut(Segment)) {
        if let Some(s) = stream.push(self.0, self.1, self.2) {
            out(s);
        }
    }
}

impl PlaInput for IntervalSteps<'_> {
    fn points(&self) -> usize {
        self.xs.len()
    }
    #[inline]
    fn feed(self, stream: &mut PlaStream, out: &mut impl FnMut(Segment)) {
        stream.push_steps(self.xs, self.lo, self.hi, out);
    }
}

impl PlaInput for IntervalRun<'_> {
    fn points(&self) -> usize {
        self.0.len()
    }
    #[inline]
    fn feed(self, stream: &mut PlaStream, out: &mut impl FnMut(Segment)) {
        stream.push_run(self.0, self.1, self.2, out);
    }
}

/// Relative tolerance of a segment's `f64` prediction: for every point of a
/// segment, `predict(x)` lies in `[lo - tol, hi + tol]` with
/// `tol = PREDICTION_TOLERANCE * max(1, max |lo|, max |hi|)` over the
/// segment's points. Equal to 2^-46 ≈ 1.4e-14 (the rounding analysis gives
/// about 42 units of 2^-53; this leaves a factor of 3 of margin).
pub(super) const PREDICTION_TOLERANCE: f64 = 1.0 / (1u64 << 46) as f64;

/// One linear piece of a segmentation.
///
/// It covers input points `start..start + len`, whose keys are `>= first_key`.
/// The line `predict(x) = intercept + slope * (x - first_key)` passes through
/// every point's interval (up to `PREDICTION_TOLERANCE`); every slope in
/// `[slope_lo, slope_hi]` admits such a line with some intercept (see
/// `InterceptRange`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Key of the first point (the segment's smallest key).
    pub first_key: u64,
    /// Index of the first point in the input.
    pub start: usize,
    /// Number of points covered (at least 1).
    pub len: usize,
    /// Slope of the chosen line (positions per key unit).
    pub slope: f64,
    /// Value of the chosen line at `first_key`.
    pub intercept: f64,
    /// Smallest feasible slope (`-inf` for a one-point segment).
    pub slope_lo: f64,
    /// Largest feasible slope (`+inf` for a one-point segment).
    pub slope_hi: f64,
}

impl Segment {
    /// The line's value at `x`; keys below `first_key` are treated as
    /// `first_key`. O(1).
    #[inline]
    pub fn predict(&self, x: u64) -> f64 {
        self.intercept + self.slope * x.saturating_sub(self.first_key) as f64
    }

    /// One past the index of the last point covered.
    pub fn end(&self) -> usize {
        self.start + self.len
    }
}

/// Normalises an input interval: swapped if reversed, clamped to `±2^120`.
#[inline]
fn normalize(lo: i128, hi: i128) -> (i128, i128) {
    let (lo, hi) = (clamp_y(lo), clamp_y(hi));
    if lo <= hi { (lo, hi) } else { (hi, lo) }
}

/// Picks a slope and intercept from two feasible lines `(m1, v1)` and
/// `(m2, v2)` (`m1 <= m2`, values taken at the same reference key): the
/// middle of the two, except that a negative middle slope is raised to 0 when
/// 0 lies in `[m1, m2]`. Any convex combination of feasible lines is feasible.
#[inline]
fn combine(m1: f64, v1: f64, m2: f64, v2: f64) -> (f64, f64) {
    let s = 0.5 * m1 + 0.5 * m2;
    if s < 0.0 && m2 >= 0.0 && m2 > m1 {
        // Weight w of line 1 such that w*m1 + (1-w)*m2 = 0.
        let w = (m2 / (m2 - m1)).clamp(0.0, 1.0);
        (0.0, w * v1 + (1.0 - w) * v2)
    } else {
        (s, 0.5 * v1 + 0.5 * v2)
    }
}

/// Tangent from `p` (right of every hull point) to the convex chain
/// `hull[start..]`: walks forward while the next point is at least as good,
/// i.e. while `p` is not strictly on the `stop` side of the edge. Returns the
/// index and the point. Amortised O(1): callers drop the points before it.
#[inline]
fn tangent<Y: Coord>(hull: &[P<Y>], start: usize, p: P<Y>, stop: Ordering) -> (usize, P<Y>) {
    let mut i = start;
    let mut t = hull.get(start).copied().unwrap_or(p);
    while let Some(&[a, b]) = hull.get(i..i + 2) {
        if orient(a, b, p) == stop {
            break;
        }
        i += 1;
        t = b;
    }
    (i, t)
}

/// Drops the dead prefix `hull[..start]` once it is at least half the vector
/// (amortised O(1)), so memory stays proportional to the live hull even for
/// very long segments. Returns the new start index.
#[inline]
fn compact<Y>(hull: &mut Vec<P<Y>>, start: usize) -> usize {
    if start >= 64 && 2 * start >= hull.len() {
        hull.drain(..start);
        0
    } else {
        start
    }
}

/// The streaming optimal PLA (PGM-index segmentation, O'Rourke's algorithm).
///
/// Push points with increasing `x`; whenever a point cannot join the current
/// segment (no line passes through all intervals), the finished segment is
/// returned and the point starts the next one. Because each segment is
/// extended as far as any line allows, the number of segments is minimal.
///
/// State: the lower convex hull of the upper endpoints `(x, hi)`, the upper
/// convex hull of the lower endpoints `(x, lo)`, and the two extreme feasible
/// lines (least and greatest slope), each through one upper and one lower
/// endpoint. An endpoint no feasible line passes through (outside the wedge
/// of the two lines when it comes) never joins its hull: the output is the
/// same, and most points skip the hull maintenance. O(1) amortised time per
/// point; memory O(hull size).
///
/// The hulls hold `i64` coordinates while every bound pushed lies within
/// `±(2^62 - 1)` and switch to `i128` (for good, until [`PlaStream::reset`]) at
/// the first bound beyond: the coordinates carry over unchanged and the
/// orientation predicates of both widths are exact, so the output is the same
/// bit for bit, only faster in the common case.
#[derive(Debug, Clone, Default)]
pub struct PlaStream {
    core: Core,
}

/// The hulls of a [`PlaStream`] at the width its bounds so far need.
#[derive(Debug, Clone)]
enum Core {
    Narrow(Hulls<i64>),
    Wide(Hulls<i128>),
}

impl Default for Core {
    fn default() -> Self {
        Core::Narrow(Hulls::default())
    }
}

/// Whether `y` is a valid `i64` hull coordinate (within `±Y64_LIMIT`).
#[inline]
fn fits_narrow(y: i128) -> bool {
    (-Y64_LIMIT..=Y64_LIMIT).contains(&y)
}

impl PlaStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty stream whose next point has input index `index` (the first
    /// point of a partition of a larger input, see [`segment_part`]).
    pub fn starting_at(index: usize) -> Self {
        PlaStream {
            core: Core::Narrow(Hulls {
                next: index,
                ..Hulls::default()
            }),
        }
    }

    /// Forgets all state (keeps allocations); the next point has index 0.
    pub fn reset(&mut self) {
        match &mut self.core {
            Core::Narrow(h) => h.reset(),
            Core::Wide(_) => self.core = Core::default(),
        }
    }

    /// Number of points in the segment under construction.
    pub fn pending(&self) -> usize {
        match &self.core {
            Core::Narrow(h) => h.pending(),
            Core::Wide(h) => h.pending(),
        }
    }

    /// Input index of the next point.
    pub fn next_index(&self) -> usize {
        match &self.core {
            Core::Narrow(h) => h.next,
            Core::Wide(h) => h.next,
        }
    }

    /// Input index of the first point of the segment under construction, if
    /// it has any point.
    fn pending_start(&self) -> Option<usize> {
        let (len, start) = match &self.core {
            Core::Narrow(h) => (h.len, h.start),
            Core::Wide(h) => (h.len, h.start),
        };
        (len > 0).then_some(start)
    }

    /// Adds the point `(x, lo, hi)` (a reversed interval is swapped,
    /// coordinates are clamped to `±2^120`). Returns the finished segment if
    /// the point starts a new one. O(1) amortised.
    #[inline]
    pub fn push(&mut self, x: u64, lo: i128, hi: i128) -> Option<Segment> {
        // The common case: an ordered interval within `±(2^62 - 1)` (then also
        // within the clamp), straight to the `i64` hulls.
        if let Core::Narrow(h) = &mut self.core {
            if lo <= hi && fits_narrow(lo) && fits_narrow(hi) {
                return h.push(x, lo as i64, hi as i64);
            }
        }
        self.push_other(x, lo, hi)
    }

    /// [`PlaStream::push`] of anything but an ordered interval within
    /// `±(2^62 - 1)` on `i64` hulls.
    #[cold]
    #[inline(never)]
    fn push_other(&mut self, x: u64, lo: i128, hi: i128) -> Option<Segment> {
        let (lo, hi) = normalize(lo, hi);
        match &mut self.core {
            Core::Narrow(h) if fits_narrow(lo) && fits_narrow(hi) => h.push(x, lo as i64, hi as i64),
            Core::Narrow(h) => {
                let mut wide = h.convert(i128::from);
                let seg = wide.push(x, lo, hi);
                self.core = Core::Wide(wide);
                seg
            }
            Core::Wide(h) => h.push(x, lo, hi),
        }
    }

    /// Pushes the points `(x, lo, hi)` of every `x` of `xs` (the next input
    /// indices, in order), handing each segment they finish to `out` (at
    /// most two: one ended by the first point, one inside the run). The same
    /// segments as pushing them one by one (every field; `prop_runs_equal_points`
    /// compares floats by their bits), at the same hull width.
    ///
    /// Strictly increasing keys of one interval take O(log |xs|) steps, not
    /// O(|xs|): a line within `[lo, hi]` at the run's first and last key
    /// stays within it at every key between (a linear function on an
    /// interval takes its extremes at the ends), so the feasible lines of a
    /// segment holding the run's first and `j`-th key are those of one
    /// holding every key up to the `j`-th. Only those two keys are pushed;
    /// the points between are counted. The keys after the first that join
    /// its segment are a prefix (a later key only narrows the lines), found
    /// by bisection with the stream's own admission test (the wedge of the
    /// extreme lines after the first key); the next key begins a segment,
    /// which the rest of the run joins whole (a horizontal line fits points
    /// of one interval). The lines of the extreme slopes are the same lines
    /// as one by one; only the hull points that represent them could be
    /// others on the same line.
    pub fn push_run(&mut self, xs: &[u64], lo: i128, hi: i128, out: &mut impl FnMut(Segment)) {
        if xs.len() < 3 || !xs.is_sorted_by(|a, b| a < b) {
            for &x in xs {
                if let Some(s) = self.push(x, lo, hi) {
                    out(s);
                }
            }
            return;
        }
        let (lo, hi) = normalize(lo, hi);
        let narrow = fits_narrow(lo) && fits_narrow(hi);
        if let Core::Narrow(h) = &self.core
            && !narrow
        {
            self.core = Core::Wide(h.convert(i128::from));
        }
        match &mut self.core {
            Core::Narrow(h) => h.push_run(xs, lo as i64, hi as i64, out),
            Core::Wide(h) => h.push_run(xs, lo, hi, out),
        }
    }

    /// Pushes the points `(xs[j], lo + j, hi + j)` (the next input indices,
    /// in order: intervals that step by one position from key to key, as
    /// PGM's `[i - eps, i + eps]` do), handing each segment they finish to
    /// `out`. The same segments as pushing them one by one (every field).
    ///
    /// Most of these points leave the state as it is: their lower endpoint
    /// lies strictly below both extreme lines and their upper endpoint
    /// strictly above both (about 4 in 10 on `osm-like` keys with `eps`
    /// 64), so the point is admitted, moves neither line and joins neither
    /// hull (see `Hulls::keep_all`). Such points are recognised in `f64`
    /// with a margin far above its rounding error (`Hulls::inner_prefix`)
    /// and only counted; every other point is pushed with the exact test.
    pub fn push_steps(&mut self, xs: &[u64], lo: i128, hi: i128, out: &mut impl FnMut(Segment)) {
        let steps = xs.len() as i128;
        let narrow = lo <= hi && fits_narrow(lo) && fits_narrow(hi.saturating_add(steps));
        match &mut self.core {
            Core::Narrow(h) if narrow => h.push_steps(xs, lo as i64, hi as i64, out),
            _ => {
                for (j, &x) in xs.iter().enumerate() {
                    let d = j as i128;
                    if let Some(s) = self.push(x, lo + d, hi + d) {
                        out(s);
                    }
                }
            }
        }
    }

    /// Finishes the current segment, if any. A point pushed afterwards starts
    /// a new segment; input indices keep counting (see [`PlaStream::reset`]).
    pub fn finish(&mut self) -> Option<Segment> {
        match &mut self.core {
            Core::Narrow(h) => h.finish(),
            Core::Wide(h) => h.finish(),
        }
    }
}

/// The segmentation of one partition of a larger input, made independently
/// of the partitions before it ([`segment_part`]) and joined to them by a
/// [`PlaStitcher`].
#[derive(Debug, Clone)]
pub struct PlaPart {
    /// Input index of the partition's first point.
    start: usize,
    /// The segments that ended inside the partition.
    segments: Vec<Segment>,
    /// The stream after the partition's last point: the segment it was
    /// building when the points ran out.
    tail: PlaStream,
}

impl PlaPart {
    /// Input index of the partition's first point.
    pub fn start(&self) -> usize {
        self.start
    }

    /// Input index one past the partition's last point.
    pub fn end(&self) -> usize {
        self.tail.next_index()
    }
}

/// Segments the points of one partition, the first of which has input index
/// `start`, as if the input began there: the segments that end inside the
/// partition and the one still open at its end (see [`PlaStitcher`] for how
/// partitions are joined into exactly the sequential segmentation). O(n);
/// partitions are independent, so they can be segmented in parallel.
pub fn segment_part<I>(start: usize, points: I) -> PlaPart
where
    I: IntoIterator,
    I::Item: PlaInput,
{
    let mut tail = PlaStream::starting_at(start);
    let mut segments = Vec::new();
    for item in points {
        item.feed(&mut tail, &mut |s| segments.push(s));
    }
    PlaPart {
        start,
        segments,
        tail,
    }
}

/// Joins independently segmented partitions ([`segment_part`]), in input
/// order, into exactly the segmentation [`optimal_pla_points`] makes of the
/// whole input: the same segments, starts, lines and slope ranges.
///
/// How. The stitcher carries the sequential stream's state at the end of the
/// partitions stitched so far. Into the next partition it pushes that
/// partition's points one by one, until the stream starts a segment at an
/// input index where the partition's own run started one too (its first
/// point, a finished segment's start, or its open segment's start): from
/// there it adopts the partition's remaining segments and its open segment
/// as they are, and skips the rest of the points. If no start coincides,
/// it has pushed the whole partition itself. The re-pushed points are
/// usually one segment's worth.
///
/// Why that is exact. A segment is begun by resetting every part of the
/// stream's state but the input index, so what the stream does from the
/// point where it begins a segment at index `s` on — which points join,
/// where the next segment begins, every hull point, the lines and slope
/// ranges reported — depends only on `s` and the points from `s` on. The
/// partition's run begins a segment at `s` and sees the same points from
/// there up to the partition's end as the sequential stream does, so the
/// two make the same segments from `s` to the end and end in the same
/// state (the hull width, `i64` or `i128`, changes no decision: both
/// predicates are exact). By induction over the partitions, the stitched
/// output is the sequential one: before convergence it *is* the sequential
/// stream, after it every adopted segment and the carried state are equal
/// to the sequential ones. (Adopting without convergence would be wrong: a
/// partition's first segment starts at its first point, where the
/// sequential segmentation usually does not start one.)
#[derive(Debug, Clone, Default)]
pub struct PlaStitcher {
    state: PlaStream,
    out: Vec<Segment>,
    repushed: usize,
}

impl PlaStitcher {
    /// A stitcher before the first partition (input index 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// Joins `part`, the next partition, made by [`segment_part`] from
    /// `points`, which must be given again here (the same points: only the
    /// prefix up to convergence is read). Errors if `part` does not start
    /// where the partitions stitched so far end. O(points re-pushed + segments
    /// adopted).
    pub fn stitch<I>(&mut self, part: PlaPart, points: I) -> crate::Result<()>
    where
        I: IntoIterator,
        I::Item: PlaInput,
    {
        let at = self.state.next_index();
        if part.start != at {
            return Err(crate::Error::invalid(format!(
                "partition starts at point {} but the segmentation has reached point {at}",
                part.start
            )));
        }
        let PlaPart {
            start,
            mut segments,
            tail,
        } = part;
        // Starts of the partition's own run, in order: its finished segments',
        // then its open segment's.
        let mut k = 0usize;
        let mut converged = self.state.pending() == 0;
        if !converged {
            for item in points {
                self.repushed += item.points();
                let out = &mut self.out;
                item.feed(&mut self.state, &mut |seg| {
                    // Segments after convergence (later in the same run) are
                    // the partition's, adopted below.
                    if converged {
                        return;
                    }
                    // The stream began a segment where `seg` ends: did the
                    // partition's run?
                    let idx = seg.end();
                    out.push(seg);
                    while segments.get(k).is_some_and(|s| s.start < idx) {
                        k += 1;
                    }
                    converged = match segments.get(k) {
                        Some(s) => s.start == idx,
                        None => tail.pending_start() == Some(idx),
                    };
                });
                if converged {
                    break;
                }
            }
        }
        if converged {
            self.out.extend(segments.drain(k..));
            self.state = tail;
        } else if self.state.next_index() != tail.next_index() {
            return Err(crate::Error::invalid(format!(
                "partition of points {start}..{} stitched with points up to {}",
                tail.next_index(),
                self.state.next_index()
            )));
        }
        Ok(())
    }

    /// Points the stitcher pushed itself (before convergence), over all
    /// partitions so far.
    pub fn repushed(&self) -> usize {
        self.repushed
    }

    /// Input index one past the last point stitched.
    pub fn next_index(&self) -> usize {
        self.state.next_index()
    }

    /// Finished segments so far (the open one not included).
    pub fn segments(&self) -> &[Segment] {
        &self.out
    }

    /// Takes the finished segments so far (a caller that measures them as
    /// they finish and keeps none): [`PlaStitcher::finish`] then returns
    /// only the later ones.
    pub fn take_segments(&mut self) -> Vec<Segment> {
        std::mem::take(&mut self.out)
    }

    /// Input index of the open segment's first point (the next point's if
    /// none is open): every finished segment ends at or before it.
    pub fn open_start(&self) -> usize {
        self.state
            .pending_start()
            .unwrap_or_else(|| self.state.next_index())
    }

    /// The segmentation of every point stitched.
    pub fn finish(mut self) -> Vec<Segment> {
        self.out.extend(self.state.finish());
        self.out
    }
}

/// The hull state of [`PlaStream`], generic over the y coordinate type (`i64`
/// when all bounds are within `±(2^62 - 1)`, else `i128`).
#[derive(Debug, Clone, Default)]
struct Hulls<Y: Coord> {
    /// Points in the current segment.
    len: usize,
    /// Input index of the current segment's first point.
    start: usize,
    /// Input index of the next point.
    next: usize,
    first_x: u64,
    first_lo: Y,
    first_hi: Y,
    last_x: u64,
    /// Lower hull of upper endpoints; `upper[u_start]` anchors `min_line`.
    upper: Vec<P<Y>>,
    /// Upper hull of lower endpoints; `lower[l_start]` anchors `max_line`.
    lower: Vec<P<Y>>,
    u_start: usize,
    l_start: usize,
    /// Least-slope feasible line: upper endpoint `.0`, lower endpoint `.1`.
    min_line: (P<Y>, P<Y>),
    /// Greatest-slope feasible line: lower endpoint `.0`, upper endpoint `.1`.
    max_line: (P<Y>, P<Y>),
    /// Whether every endpoint joins its hull (tests only; the output is the
    /// same either way). By default an upper endpoint `pu` strictly above
    /// the greatest-slope line (after the point's update) stays out of the
    /// upper hull, and a lower endpoint `pl` strictly below the least-slope
    /// line out of the lower hull. Why that changes nothing: no feasible line
    /// of the segment passes through such an endpoint, now or later. At the
    /// newest `x`, every feasible line lies on or below the greatest-slope
    /// line (which passes through an upper endpoint at or before `x`: a
    /// feasible line is below it there and rises no faster), and the
    /// feasible lines only become fewer as points join. The hull of upper
    /// endpoints serves only to find the tangent of a new least-slope line,
    /// a feasible line through the hull point of greatest slope towards the
    /// new lower endpoint; that point lies on a feasible line, so it is one
    /// kept, and the hull of the kept points (convex, and with the same
    /// collinear points dropped near the tangent) gives the same point.
    /// Symmetrically for lower endpoints. On `osm-like` keys this leaves out
    /// about 9 in 10 upper and 4 in 10 lower endpoints, and their hull
    /// maintenance: the segmentation runs about 1.7 times as fast (21.5 →
    /// 12.9 ns/key, `pla_throughput`).
    keep_all: bool,
    /// Whether the last point pushed past the first two of its segment
    /// changed nothing but the counts (see [`Hulls::inner_prefix`]): the
    /// next few likely do not either.
    quiet: bool,
}

impl<Y: Coord> Hulls<Y> {
    /// The same state with every y coordinate mapped by `f` (exact widening).
    fn convert<Z: Coord>(&self, f: impl Fn(Y) -> Z) -> Hulls<Z> {
        let p = |q: P<Y>| P::new(q.x, f(q.y));
        Hulls {
            len: self.len,
            start: self.start,
            next: self.next,
            first_x: self.first_x,
            first_lo: f(self.first_lo),
            first_hi: f(self.first_hi),
            last_x: self.last_x,
            upper: self.upper.iter().map(|&q| p(q)).collect(),
            lower: self.lower.iter().map(|&q| p(q)).collect(),
            u_start: self.u_start,
            l_start: self.l_start,
            min_line: (p(self.min_line.0), p(self.min_line.1)),
            max_line: (p(self.max_line.0), p(self.max_line.1)),
            keep_all: self.keep_all,
            quiet: self.quiet,
        }
    }

    fn reset(&mut self) {
        self.len = 0;
        self.start = 0;
        self.next = 0;
        self.upper.clear();
        self.lower.clear();
    }

    fn pending(&self) -> usize {
        self.len
    }

    fn begin(&mut self, idx: usize, x: u64, lo: Y, hi: Y) {
        self.len = 1;
        self.start = idx;
        self.first_x = x;
        self.first_lo = lo;
        self.first_hi = hi;
        self.last_x = x;
        self.upper.clear();
        self.lower.clear();
        self.upper.push(P::new(x, hi));
        self.lower.push(P::new(x, lo));
        self.u_start = 0;
        self.l_start = 0;
    }

    /// Adds a point with `lo <= hi` (and `|lo|, |hi|` within the limit of
    /// `Y`); returns the finished segment if the point starts a new one.
    #[inline(always)]
    fn push(&mut self, x: u64, lo: Y, hi: Y) -> Option<Segment> {
        let idx = self.next;
        self.next += 1;
        if self.len == 0 {
            self.begin(idx, x, lo, hi);
            return None;
        }
        if x <= self.last_x {
            return Some(self.restart(idx, x, lo, hi));
        }
        let pu = P::new(x, hi);
        let pl = P::new(x, lo);
        if self.len == 1 {
            // Two points with distinct x always admit a line.
            self.min_line = (P::new(self.first_x, self.first_hi), pl);
            self.max_line = (P::new(self.first_x, self.first_lo), pu);
            self.upper.push(pu);
            self.lower.push(pl);
            self.len = 2;
            self.last_x = x;
            return None;
        }
        // Feasible iff the interval meets the wedge between the extreme lines:
        // hi on or above the least-slope line, lo on or below the greatest.
        if orient(self.min_line.0, self.min_line.1, pu) == Ordering::Less
            || orient(self.max_line.0, self.max_line.1, pl) == Ordering::Greater
        {
            return Some(self.restart(idx, x, lo, hi));
        }
        let below_min = orient(self.min_line.0, self.min_line.1, pl);
        let above_max = orient(self.max_line.0, self.max_line.1, pu);
        self.quiet = below_min == Ordering::Less && above_max == Ordering::Greater;
        if below_min == Ordering::Greater {
            // The least slope rises: tangent from `pl` to the hull of upper
            // endpoints. Hull points left of the tangent are never needed again.
            let (i, t) = tangent(&self.upper, self.u_start, pl, Ordering::Less);
            self.min_line = (t, pl);
            self.u_start = compact(&mut self.upper, i);
        }
        if above_max == Ordering::Less {
            let (i, t) = tangent(&self.lower, self.l_start, pu, Ordering::Greater);
            self.max_line = (t, pu);
            self.l_start = compact(&mut self.lower, i);
        }
        // Keep the hulls convex; their first live point (the extreme line's
        // anchor) is never removed. An endpoint strictly outside the wedge
        // (`pu` above the greatest-slope line, `pl` below the least) is left
        // out of its hull: see `Hulls::keep_all`.
        if above_max != Ordering::Greater || self.keep_all {
            while self.upper.len() >= self.u_start + 2 {
                let [.., a, b] = self.upper[..] else { break };
                if orient(a, b, pu) == Ordering::Greater {
                    break;
                }
                self.upper.pop();
            }
            self.upper.push(pu);
        }
        if below_min != Ordering::Less || self.keep_all {
            while self.lower.len() >= self.l_start + 2 {
                let [.., a, b] = self.lower[..] else { break };
                if orient(a, b, pl) == Ordering::Less {
                    break;
                }
                self.lower.pop();
            }
            self.lower.push(pl);
        }
        self.len += 1;
        self.last_x = x;
        None
    }

    /// Whether the point `(x, lo, hi)` would join the segment (`push`'s
    /// test, without the push).
    #[inline]
    fn admits(&self, x: u64, lo: Y, hi: Y) -> bool {
        match self.len {
            0 => true,
            1 => x > self.last_x,
            _ => {
                x > self.last_x
                    && orient(self.min_line.0, self.min_line.1, P::new(x, hi)) != Ordering::Less
                    && orient(self.max_line.0, self.max_line.1, P::new(x, lo)) != Ordering::Greater
            }
        }
    }

    /// [`PlaStream::push_run`] of strictly increasing keys `xs` (at least
    /// 3) and `lo <= hi` within the limit of `Y`.
    fn push_run(&mut self, xs: &[u64], lo: Y, hi: Y, out: &mut impl FnMut(Segment)) {
        let [first, rest @ ..] = xs else { return };
        if let Some(s) = self.push(*first, lo, hi) {
            out(s);
        }
        // `rest` is not empty: `xs` has at least 3 keys.
        let last = rest.last().copied().unwrap_or(*first);
        if self.admits(last, lo, hi) {
            self.join(rest, lo, hi, out);
            return;
        }
        // The keys that join `first`'s segment: a prefix of `rest`, not all.
        let m = rest.partition_point(|&x| self.admits(x, lo, hi));
        let (joined, begins) = rest.split_at(m);
        self.join(joined, lo, hi, out);
        // `begins[0]` is refused (so it begins a segment), every later key
        // joins that one.
        self.join(begins.get(..1).unwrap_or_default(), lo, hi, out);
        self.join(begins.get(1..).unwrap_or_default(), lo, hi, out);
    }

    /// Pushes `xs` (strictly increasing, one interval), each of which
    /// `admits` (or refuses: only a lone key) in the state before the call:
    /// the last key pushed, the others counted (see
    /// [`PlaStream::push_run`]).
    fn join(&mut self, xs: &[u64], lo: Y, hi: Y, out: &mut impl FnMut(Segment)) {
        let Some((&last, between)) = xs.split_last() else {
            return;
        };
        self.next += between.len();
        match self.push(last, lo, hi) {
            None => self.len += between.len(),
            // Only a lone key is refused (`between` is then empty).
            Some(s) => out(s),
        }
    }

    /// The segment under construction, finished, and a new one begun at
    /// the point (off the hot path: one point in hundreds).
    #[cold]
    #[inline(never)]
    fn restart(&mut self, idx: usize, x: u64, lo: Y, hi: Y) -> Segment {
        let seg = self.segment();
        self.begin(idx, x, lo, hi);
        seg
    }

    fn finish(&mut self) -> Option<Segment> {
        if self.len == 0 {
            return None;
        }
        let seg = self.segment();
        self.len = 0;
        self.upper.clear();
        self.lower.clear();
        Some(seg)
    }

    /// The segment under construction, as it would be finished now.
    fn segment(&self) -> Segment {
        let mut seg = Segment {
            first_key: self.first_x,
            start: self.start,
            len: self.len,
            slope: 0.0,
            intercept: 0.5 * self.first_lo.to_f64() + 0.5 * self.first_hi.to_f64(),
            slope_lo: f64::NEG_INFINITY,
            slope_hi: f64::INFINITY,
        };
        if self.len >= 2 {
            let (a1, b1) = self.min_line;
            let (a2, b2) = self.max_line;
            let m1 = Slope::between(a1, b1).to_f64();
            let m2 = Slope::between(a2, b2).to_f64();
            // Values of both lines at first_x; anchors lie at or after it.
            let v1 = a1.y.to_f64() - m1 * (a1.x - self.first_x) as f64;
            let v2 = a2.y.to_f64() - m2 * (a2.x - self.first_x) as f64;
            let (s, c) = combine(m1, v1, m2, v2);
            seg.slope = s;
            seg.intercept = c;
            seg.slope_lo = m1;
            seg.slope_hi = m2;
        }
        seg
    }
}

/// Points [`Hulls::inner_prefix`] looks at per call, at most.
const INNER_BLOCK: usize = 32;

/// Relative margin of [`Hulls::inner_prefix`]'s `f64` test: `2^-48`, far
/// above the few units of `2^-53` its arithmetic can be off by.
const INNER_MARGIN: f64 = 1.0 / (1u64 << 48) as f64;

impl Hulls<i64> {
    /// [`PlaStream::push_steps`] on `i64` hulls: `lo + xs.len()` and `hi +
    /// xs.len()` lie within the limit, `lo <= hi`.
    fn push_steps(&mut self, xs: &[u64], lo: i64, hi: i64, out: &mut impl FnMut(Segment)) {
        let mut j = 0usize;
        self.quiet = false;
        while let Some(rest @ [x, ..]) = xs.get(j..) {
            let d = j as i64;
            if self.quiet && self.len >= 2 && !self.keep_all {
                // Admitted, no line moved, no hull changed: counted.
                let k = self.inner_prefix(rest, lo + d, hi + d);
                if let Some(&last) = k.checked_sub(1).and_then(|i| rest.get(i)) {
                    self.last_x = last;
                }
                self.len += k;
                self.next += k;
                j += k;
                // After a full block the next point may be one too; else it
                // is not (or may not be): the exact test decides.
                self.quiet = k == INNER_BLOCK;
                continue;
            }
            // `quiet` is false here; `push` sets it for a point past the
            // first two of a segment.
            if let Some(s) = self.push(*x, lo + d, hi + d) {
                out(s);
            }
            j += 1;
        }
    }

    /// How many of the points `(xs[j], lo + j, hi + j)` from the first on
    /// (at most [`INNER_BLOCK`]) would change nothing but the counts when
    /// pushed: keys strictly increasing from the last one, each lower
    /// endpoint strictly below both extreme lines and each upper endpoint
    /// strictly above both. Then `push` admits the point (its upper endpoint
    /// is above the least-slope line, its lower below the greatest), moves
    /// neither line (`below_min` is `Less`, `above_max` `Greater`) and puts
    /// neither endpoint in a hull. Requires `len >= 2` (both lines set).
    ///
    /// The test is made in `f64`: a line through `a` and `b` (`a.x < b.x`,
    /// both before the point) has the value `v = a.y + s · (x - a.x)` at `x`,
    /// `s = (b.y - a.y) / (b.x - a.x)`. Each of the conversions, the quotient,
    /// the product and the sum rounds once (relative error `2^-53` each), so
    /// the computed `v` is within `8 · 2^-53 · (|a.y| + |s · (x - a.x)|)` of
    /// the line's exact value and the computed `lo` within `2^-53 · |lo|`
    /// of the exact one; a lower endpoint is taken to be strictly below only
    /// when it lies below by more than `2^-48 · (|a.y| + |s · (x - a.x)| +
    /// |lo| + 1)`, far more than both errors together (and symmetrically
    /// above). A point the test does not take is pushed exactly.
    #[inline]
    fn inner_prefix(&self, xs: &[u64], lo: i64, hi: i64) -> usize {
        let line = |(a, b): (P<i64>, P<i64>)| {
            let run = b.x.wrapping_sub(a.x) as f64;
            let rise = b.y.wrapping_sub(a.y) as f64;
            (a.x, a.y as f64, rise / run)
        };
        let (x1, y1, s1) = line(self.min_line);
        let (x2, y2, s2) = line(self.max_line);
        if !(s1.is_finite() && s2.is_finite()) {
            return 0;
        }
        let mut prev = self.last_x;
        let mut k = 0usize;
        for (j, &x) in xs.iter().take(INNER_BLOCK).enumerate() {
            if x <= prev {
                break;
            }
            let (l, h) = ((lo + j as i64) as f64, (hi + j as i64) as f64);
            let t1 = s1 * x.wrapping_sub(x1) as f64;
            let t2 = s2 * x.wrapping_sub(x2) as f64;
            let (v1, v2) = (y1 + t1, y2 + t2);
            let m1 = (y1.abs() + t1.abs() + l.abs().max(h.abs()) + 1.0) * INNER_MARGIN;
            let m2 = (y2.abs() + t2.abs() + l.abs().max(h.abs()) + 1.0) * INNER_MARGIN;
            let inner = l < v1 - m1 && l < v2 - m2 && h > v1 + m1 && h > v2 + m2;
            if !inner {
                break;
            }
            prev = x;
            k += 1;
        }
        k
    }
}

/// Optimal PLA over general interval points (upper layers, LeCo, zone maps).
///
/// Returns the minimum number of segments such that each segment's line
/// passes through the interval of every point it covers. Segments partition
/// the input in order. O(n) time.
pub fn optimal_pla_points<I>(points: I) -> Vec<Segment>
where
    I: IntoIterator<Item = IntervalPoint>,
{
    let mut s = PlaStream::new();
    let mut out = Vec::new();
    for (x, lo, hi) in points {
        if let Some(seg) = s.push(x, lo, hi) {
            out.push(seg);
        }
    }
    out.extend(s.finish());
    out
}

/// Optimal PLA of sorted keys with error bound `eps`: key `i` must be
/// predicted within `[i - eps, i + eps]`. The fewest segments possible
/// (PGM-index). O(n) time; keys must be strictly increasing. The
/// intervals step by one position: pushed with [`PlaStream::push_steps`].
pub fn optimal_pla(keys: &[u64], eps: u64) -> Vec<Segment> {
    let e = i128::from(eps);
    let mut s = PlaStream::new();
    let mut out = Vec::new();
    s.push_steps(keys, -e, e, &mut |seg| out.push(seg));
    out.extend(s.finish());
    out
}

/// The interval of item `i` under disk-based zero intervals (Zhang §6.1): the
/// whole page `p = i / page_items` widened by `eps` on both sides,
/// `[p * page_items - eps, p * page_items + page_items - 1 + eps]`.
/// `page_items == 0` is treated as 1 (which gives `[i - eps, i + eps]`).
#[inline]
pub(crate) fn zero_interval(i: u64, eps: u64, page_items: u64) -> (i128, i128) {
    // A u64 division: an i128 one is a library call.
    let p = page_items.max(1);
    let page_start = ((i / p) * p) as i128;
    let p = p as i128;
    (page_start - eps as i128, page_start + p - 1 + eps as i128)
}

/// Optimal PLA of sorted keys with disk-based zero intervals (Zhang §6.1):
/// key `i` may be predicted anywhere on its page, widened by `eps`
/// (see `zero_interval`). Fetching the pages of `[pred - eps, pred + eps]`
/// then always includes the key's page. The fewest segments possible. O(n).
///
/// Every key of a page has the same interval: each page is pushed as one
/// run ([`PlaStream::push_run`]), O(log page_items) steps for a page of
/// strictly increasing keys.
pub fn optimal_pla_zero_interval(keys: &[u64], eps: u64, page_items: u64) -> Vec<Segment> {
    let per = usize::try_from(page_items.max(1)).unwrap_or(usize::MAX);
    let mut s = PlaStream::new();
    let mut out = Vec::new();
    for (p, xs) in keys.chunks(per).enumerate() {
        let (lo, hi) = zero_interval(p.saturating_mul(per) as u64, eps, page_items);
        s.push_run(xs, lo, hi, &mut |seg| out.push(seg));
    }
    out.extend(s.finish());
    out
}

/// The FITing-tree shrinking-cone segmentation over general interval points.
///
/// Each segment is anchored at its first point `(x0, a)`, `a` the midpoint of
/// its interval (rounded down); the cone of slopes whose line from the anchor
/// meets every interval so far narrows with each point, and a point that
/// leaves the cone empty starts a new segment. The chosen slope is the cone's
/// middle (raised to 0 if negative and 0 is in the cone); `slope_lo..slope_hi`
/// is the cone. Exact arithmetic; O(1) per point. Never fewer segments than
/// [`optimal_pla_points`].
pub(super) fn greedy_cone_points<I>(points: I) -> Vec<Segment>
where
    I: IntoIterator<Item = IntervalPoint>,
{
    let mut s = ConeStream::new();
    let mut out = Vec::new();
    for (x, lo, hi) in points {
        if let Some(seg) = s.push(x, lo, hi) {
            out.push(seg);
        }
    }
    out.extend(s.finish());
    out
}

/// The FITing-tree shrinking cone ([`greedy_cone`]) fed one point at a
/// time (a build streaming its keys): `push` returns a segment when the
/// point closes it, `finish` the last one.
#[derive(Debug, Clone, Default)]
pub struct ConeStream {
    cur: Option<Cone>,
    /// Input index of the next point.
    next: usize,
}

/// The open segment of a [`ConeStream`].
#[derive(Debug, Clone)]
struct Cone {
    x0: u64,
    a: i128,
    start: usize,
    len: usize,
    last_x: u64,
    lo: Option<Slope>,
    hi: Option<Slope>,
}

impl Cone {
    fn new(idx: usize, x: u64, lo: i128, hi: i128) -> Self {
        Cone {
            x0: x,
            a: (lo + hi).div_euclid(2),
            start: idx,
            len: 1,
            last_x: x,
            lo: None,
            hi: None,
        }
    }

    fn segment(&self) -> Segment {
        let mut seg = Segment {
            first_key: self.x0,
            start: self.start,
            len: self.len,
            slope: 0.0,
            intercept: self.a as f64,
            slope_lo: f64::NEG_INFINITY,
            slope_hi: f64::INFINITY,
        };
        if let (Some(l), Some(h)) = (self.lo, self.hi) {
            let (m1, m2) = (l.to_f64(), h.to_f64());
            let (s, _) = combine(m1, 0.0, m2, 0.0);
            seg.slope = s;
            seg.slope_lo = m1;
            seg.slope_hi = m2;
        }
        seg
    }
}

impl ConeStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next point; returns the segment it closes, if any.
    pub fn push(&mut self, x: u64, lo: i128, hi: i128) -> Option<Segment> {
        let idx = self.next;
        self.next += 1;
        let (lo, hi) = normalize(lo, hi);
        let Some(c) = self.cur.as_mut() else {
            self.cur = Some(Cone::new(idx, x, lo, hi));
            return None;
        };
        if x <= c.last_x {
            let done = c.segment();
            *c = Cone::new(idx, x, lo, hi);
            return Some(done);
        }
        let dx = x - c.x0;
        let s_lo = Slope {
            num: lo - c.a,
            den: dx,
        };
        let s_hi = Slope {
            num: hi - c.a,
            den: dx,
        };
        let fits_below = c.hi.is_none_or(|h| s_lo.cmp_exact(h) != Ordering::Greater);
        let fits_above = c.lo.is_none_or(|l| l.cmp_exact(s_hi) != Ordering::Greater);
        if !(fits_below && fits_above) {
            let done = c.segment();
            *c = Cone::new(idx, x, lo, hi);
            return Some(done);
        }
        if c.lo.is_none_or(|l| s_lo.cmp_exact(l) == Ordering::Greater) {
            c.lo = Some(s_lo);
        }
        if c.hi.is_none_or(|h| s_hi.cmp_exact(h) == Ordering::Less) {
            c.hi = Some(s_hi);
        }
        c.len += 1;
        c.last_x = x;
        None
    }

    /// The open segment, if any.
    pub fn finish(self) -> Option<Segment> {
        self.cur.map(|c| c.segment())
    }
}

/// The FITing-tree shrinking-cone segmentation of sorted keys with error
/// bound `eps` (intervals `[i - eps, i + eps]`, anchored at the first key's
/// position). O(n); never fewer segments than [`optimal_pla`].
pub fn greedy_cone(keys: &[u64], eps: u64) -> Vec<Segment> {
    let e = eps as i128;
    greedy_cone_points(
        keys.iter()
            .enumerate()
            .map(|(i, &k)| (k, i as i128 - e, i as i128 + e)),
    )
}

/// [`InterceptRange`] over `points` at once.
#[cfg(test)]
pub(crate) fn intercept_range<I>(points: I, first_key: u64, slope: f64) -> Option<(f64, f64)>
where
    I: IntoIterator<Item = IntervalPoint>,
{
    let mut r = InterceptRange::new(first_key, slope);
    for p in points {
        r.add(p);
    }
    r.finish()
}

/// For a fixed `slope`, the range `[c_lo, c_hi]` of intercepts `c` (values at
/// `first_key`) such that `c + slope * (x - first_key)` lies in `[lo, hi]` for
/// every point; `None` if no intercept works. O(len).
///
/// Computed in `f64`: when the exact range is empty or a single value, the
/// rounded bounds may cross; a crossing within the prediction tolerance
/// (see [`PREDICTION_TOLERANCE`]) is returned as the one-value range at its
/// midpoint. Keys below `first_key` count as `first_key`.
///
/// Points are added one at a time (keys read in passes), in any order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InterceptRange {
    first_key: u64,
    slope: f64,
    c_lo: f64,
    c_hi: f64,
    scale: f64,
}

impl InterceptRange {
    /// No point yet, for lines of `slope` anchored at `first_key`.
    pub(crate) fn new(first_key: u64, slope: f64) -> Self {
        InterceptRange {
            first_key,
            slope,
            c_lo: f64::NEG_INFINITY,
            c_hi: f64::INFINITY,
            scale: 1.0,
        }
    }

    /// The slope of the lines.
    pub(crate) fn slope(&self) -> f64 {
        self.slope
    }

    /// One more point.
    pub(crate) fn add(&mut self, (x, lo, hi): IntervalPoint) {
        let (lo, hi) = normalize(lo, hi);
        let t = self.slope * x.saturating_sub(self.first_key) as f64;
        let (lo, hi) = (lo as f64, hi as f64);
        self.c_lo = self.c_lo.max(lo - t);
        self.c_hi = self.c_hi.min(hi - t);
        self.scale = self.scale.max(lo.abs()).max(hi.abs()).max(t.abs());
    }

    /// The feasible intercepts of the points added.
    pub(crate) fn finish(self) -> Option<(f64, f64)> {
        let (c_lo, c_hi) = (self.c_lo, self.c_hi);
        if c_lo <= c_hi {
            Some((c_lo, c_hi))
        } else if c_lo - c_hi <= PREDICTION_TOLERANCE * self.scale {
            let m = 0.5 * c_lo + 0.5 * c_hi;
            Some((m, m))
        } else {
            None
        }
    }
}

/// The positive `f32` in `[lo, hi]` whose bit pattern has the most trailing
/// zeros (the fewest significant mantissa bits), if the interval is positive
/// and holds an `f32`. Bit patterns of positive floats order as the floats.
pub(super) fn roundest_f32(lo: f64, hi: f64) -> Option<f64> {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return None;
    }
    // The smallest f32 >= lo and the largest <= hi, as bit patterns.
    let up = |x: f64| -> u32 {
        let f = x as f32;
        if f64::from(f) < x {
            f.to_bits() + 1
        } else {
            f.to_bits()
        }
    };
    let down = |x: f64| -> u32 {
        let f = x as f32;
        if f64::from(f) > x {
            f.to_bits() - 1
        } else {
            f.to_bits()
        }
    };
    let (a, b) = (up(lo), down(hi.min(f64::from(f32::MAX))));
    if a > b {
        return None;
    }
    // The multiple of the largest power of two inside [a, b].
    let c = (0..32u32).rev().find_map(|k| {
        let p = 1u32 << k;
        let c = (b / p) * p;
        (c >= a).then_some(c)
    })?;
    let f = f64::from(f32::from_bits(c));
    (f.is_finite() && f >= lo && f <= hi).then_some(f)
}

/// The fewest distinct slopes such that every range `(lo, hi)` contains one
/// of them (greedy interval stabbing, optimal): returns the slopes in
/// increasing order and, for each range, the index of its slope.
///
/// Each chosen slope is the middle of the intersection of the ranges it
/// serves (not an endpoint), which keeps it robust to rounding. Infinite
/// endpoints are allowed (one-point segments have `(-inf, +inf)`); a slope
/// shared only by unbounded ranges is 0. An empty or NaN range gets a slope of
/// its own (its `lo`, or 0 for NaN). O(m log m).
pub(crate) fn min_slope_set(ranges: &[(f64, f64)]) -> (Vec<f64>, Vec<u32>) {
    // A shared slope may be any value in its group's intersection: the one
    // with the fewest significant bits (as an f32) compresses best.
    let mut slopes = Vec::new();
    let mut assign = vec![0u32; ranges.len()];
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (ranges.get(a), ranges.get(b));
        let ka = ra.map_or(f64::NAN, |r| r.1);
        let kb = rb.map_or(f64::NAN, |r| r.1);
        ka.total_cmp(&kb)
    });
    let pick = |lo: f64, hi: f64| -> f64 {
        match (lo.is_finite(), hi.is_finite()) {
            (true, true) => roundest_f32(lo, hi).unwrap_or(0.5 * lo + 0.5 * hi),
            (true, false) => lo.max(0.0),
            (false, true) => hi.min(0.0),
            (false, false) => 0.0,
        }
    };
    // Current group: stab point candidate `right` (first right endpoint) and
    // the largest left endpoint of the group.
    let mut group: Option<(f64, f64, Vec<usize>)> = None;
    let flush = |g: Option<(f64, f64, Vec<usize>)>, slopes: &mut Vec<f64>, assign: &mut [u32]| {
        if let Some((left, right, members)) = g {
            let id = slopes.len() as u32;
            slopes.push(pick(left, right));
            for m in members {
                if let Some(a) = assign.get_mut(m) {
                    *a = id;
                }
            }
        }
    };
    let mut singles = Vec::new();
    for &i in &order {
        let Some(&(lo, hi)) = ranges.get(i) else {
            continue;
        };
        if lo.is_nan() || hi.is_nan() || lo > hi {
            singles.push(i);
            continue;
        }
        match group.as_mut() {
            Some((left, right, members)) if lo <= *right => {
                *left = left.max(lo);
                members.push(i);
            }
            _ => {
                flush(group.take(), &mut slopes, &mut assign);
                group = Some((lo, hi, vec![i]));
            }
        }
    }
    flush(group, &mut slopes, &mut assign);
    for i in singles {
        let lo = ranges.get(i).map_or(0.0, |r| r.0);
        let id = slopes.len() as u32;
        slopes.push(if lo.is_nan() { 0.0 } else { lo });
        if let Some(a) = assign.get_mut(i) {
            *a = id;
        }
    }
    (slopes, assign)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    /// Brute-force feasibility of a set of interval points (distinct x):
    /// a line through all intervals exists iff every interval is non-empty and
    /// the largest lower slope bound over pairs does not exceed the smallest
    /// upper slope bound. Exact with i128 cross-multiplication (small inputs).
    fn feasible(p: &[(u64, i128, i128)]) -> bool {
        if p.iter().any(|&(_, l, h)| l > h) {
            return false;
        }
        // Bounds as fractions (num, den), den > 0.
        let mut best_lo: Option<(i128, i128)> = None;
        let mut best_hi: Option<(i128, i128)> = None;
        for i in 0..p.len() {
            for j in i + 1..p.len() {
                let (xi, li, hi_) = p[i];
                let (xj, lj, hj) = p[j];
                assert!(xj > xi);
                let d = (xj - xi) as i128;
                let lo_b = (lj - hi_, d);
                let hi_b = (hj - li, d);
                if best_lo.is_none_or(|(n, m)| lo_b.0 * m > n * lo_b.1) {
                    best_lo = Some(lo_b);
                }
                if best_hi.is_none_or(|(n, m)| hi_b.0 * m < n * hi_b.1) {
                    best_hi = Some(hi_b);
                }
            }
        }
        match (best_lo, best_hi) {
            (Some((a, b)), Some((c, d))) => a * d <= c * b,
            _ => true,
        }
    }

    #[test]
    fn roundest_floats_lie_in_their_interval() {
        for (lo, hi) in [
            (1.0, 1.0),
            (0.1, 0.2),
            (1e-5, 1.0001e-5),
            (3.0, 3.0000001),
            (1e-30, 1e-29),
        ] {
            let f = roundest_f32(lo, hi).unwrap();
            assert!(lo <= f && f <= hi, "{lo} {hi} {f}");
            assert_eq!(f64::from(f as f32), f);
        }
        // Powers of two are the roundest of all.
        assert_eq!(roundest_f32(0.3, 0.6), Some(0.5));
        assert_eq!(roundest_f32(0.0, 1.0), None);
        assert_eq!(roundest_f32(2.0, 1.0), None);
        // No f32 strictly between two neighbours.
        let x = f64::from(1.0f32);
        let next = f64::from(f32::from_bits(1.0f32.to_bits() + 1));
        assert_eq!(roundest_f32(x + 1e-12, next - 1e-12), None);
    }

    /// Minimum number of contiguous feasible pieces (dynamic programming).
    fn brute_min_segments(p: &[(u64, i128, i128)]) -> usize {
        let n = p.len();
        let mut dp = vec![usize::MAX; n + 1];
        dp[0] = 0;
        for j in 1..=n {
            for i in 0..j {
                if dp[i] != usize::MAX && feasible(&p[i..j]) {
                    dp[j] = dp[j].min(dp[i] + 1);
                }
            }
        }
        dp[n]
    }

    fn plain_points(keys: &[u64], eps: u64) -> Vec<(u64, i128, i128)> {
        keys.iter()
            .enumerate()
            .map(|(i, &k)| (k, i as i128 - eps as i128, i as i128 + eps as i128))
            .collect()
    }

    fn zero_points(keys: &[u64], eps: u64, page: u64) -> Vec<(u64, i128, i128)> {
        keys.iter()
            .enumerate()
            .map(|(i, &k)| {
                let (l, h) = zero_interval(i as u64, eps, page);
                (k, l, h)
            })
            .collect()
    }

    /// Checks partition, feasibility (exact), maximality and the f64 bound.
    fn check_segments(points: &[(u64, i128, i128)], segs: &[Segment], exact: bool) {
        let mut next = 0;
        for (si, s) in segs.iter().enumerate() {
            assert_eq!(s.start, next, "segments must partition the input");
            assert!(s.len >= 1);
            let pts = &points[s.start..s.end()];
            assert_eq!(s.first_key, pts[0].0);
            if exact {
                assert!(feasible(pts), "segment {si} infeasible");
                if s.end() < points.len() {
                    assert!(!feasible(&points[s.start..=s.end()]), "segment {si} not maximal");
                }
            }
            check_line(pts, s);
            next = s.end();
        }
        assert_eq!(next, points.len());
    }

    fn check_line(pts: &[(u64, i128, i128)], s: &Segment) {
        let scale = pts.iter().fold(1.0f64, |m, &(_, l, h)| {
            m.max((l as f64).abs()).max((h as f64).abs())
        });
        let tol = PREDICTION_TOLERANCE * scale;
        for &(x, l, h) in pts {
            let y = s.predict(x);
            assert!(
                y >= l as f64 - tol && y <= h as f64 + tol,
                "prediction {y} outside [{l}, {h}] (tol {tol}) for x={x}, seg {s:?}"
            );
        }
        assert!(
            s.slope_lo <= s.slope_hi
                || s.len == 1
                || (s.slope_lo - s.slope_hi).abs() <= 1e-12 * s.slope_hi.abs().max(s.slope_lo.abs())
        );
    }

    #[test]
    fn empty_and_single() {
        assert!(optimal_pla(&[], 4).is_empty());
        assert!(greedy_cone(&[], 4).is_empty());
        let s = optimal_pla(&[42], 0);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].predict(42), 0.0);
        assert_eq!(s[0].slope_lo, f64::NEG_INFINITY);
    }

    #[test]
    fn linear_keys_make_one_segment() {
        let keys: Vec<u64> = (0..10_000u64).map(|i| 1000 + 7 * i).collect();
        for eps in [0, 1, 8] {
            let s = optimal_pla(&keys, eps);
            assert_eq!(s.len(), 1, "eps {eps}");
            assert!((s[0].slope - 1.0 / 7.0).abs() < 1e-12);
            check_segments(&plain_points(&keys, eps), &s, false);
        }
    }

    #[test]
    fn zero_interval_fetch_covers_page() {
        // Zhang §6.1: fetching the pages of [pred - eps, pred + eps] (widened
        // by the rounding tolerance) always includes the key's page.
        let mut rng = Pcg64::seed_from_u64(31);
        let mut keys: Vec<u64> = (0..200_000).map(|_| rng.random::<u64>() >> 3).collect();
        keys.sort_unstable();
        keys.dedup();
        for (eps, page) in [(0u64, 256u64), (8, 256), (64, 64), (3, 5)] {
            let segs = optimal_pla_zero_interval(&keys, eps, page);
            for s in &segs {
                for (i, &k) in keys.iter().enumerate().take(s.end()).skip(s.start) {
                    let pred = s.predict(k);
                    let tol = PREDICTION_TOLERANCE * (i as f64 + page as f64 + eps as f64);
                    let first = ((pred - eps as f64 - tol).floor().max(0.0) as u64) / page;
                    let last = ((pred + eps as f64 + tol).floor().max(0.0) as u64) / page;
                    let p = i as u64 / page;
                    assert!(
                        first <= p && p <= last,
                        "key {i}: page {p} not in [{first}, {last}]"
                    );
                }
            }
        }
    }

    #[test]
    fn long_segments_compact_their_hulls() {
        // Concave, then linear data with a wide error: the lower hull keeps the
        // whole concave chain, then the tangent sweeps past it. The dead hull
        // prefix must stay below max(64, half the vector) at every step
        // (without compaction it reaches 92%).
        let n = 100_000u64;
        let mut h = Hulls::<i64>::default();
        let (mut moved, mut segments) = (0usize, 0usize);
        for i in 0..n {
            let k = if i < n / 2 {
                i * i
            } else {
                (n / 2) * (n / 2) + (i - n / 2) * n * 2
            };
            if h.push(k, i as i64 - 3000, i as i64 + 3000).is_some() {
                segments += 1;
            }
            for (start, len) in [(h.u_start, h.upper.len()), (h.l_start, h.lower.len())] {
                assert!(start < 64 || 2 * start < len, "dead prefix {start} of {len}");
            }
            moved = moved.max(h.l_start).max(h.u_start);
        }
        assert!(moved >= 32 && segments < 50, "moved {moved}, {segments} segments");
        // Exact check (feasibility and maximality) on a mid-size concave input
        // whose segments are long enough to compact.
        let mut rng = Pcg64::seed_from_u64(41);
        let mut keys: Vec<u64> = (0..3000u64).map(|i| i * i + rng.random_range(0..i + 1)).collect();
        keys.sort_unstable();
        keys.dedup();
        for eps in [100u64, 1000] {
            let pts = plain_points(&keys, eps);
            let segs = optimal_pla(&keys, eps);
            assert!(segs.iter().any(|s| s.len > 500));
            check_segments(&pts, &segs, true);
        }
    }

    #[test]
    fn compact_drops_prefix() {
        let mut v: Vec<P<i64>> = (0..200).map(|i| P::new(i, 0)).collect();
        assert_eq!(compact(&mut v, 10), 10);
        assert_eq!(v.len(), 200);
        assert_eq!(compact(&mut v, 120), 0);
        assert_eq!(v.len(), 80);
        assert_eq!(v[0].x, 120);
    }

    #[test]
    fn zero_interval_shape() {
        assert_eq!(zero_interval(0, 2, 8), (-2, 9));
        assert_eq!(zero_interval(9, 2, 8), (6, 17));
        assert_eq!(zero_interval(9, 2, 0), (7, 11));
        assert_eq!(zero_interval(9, 2, 1), (7, 11));
    }

    #[test]
    fn known_small_case() {
        // eps = 0: collinear runs only.
        let keys = [0u64, 1, 2, 10, 11, 12];
        let s = optimal_pla(&keys, 0);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].start, s[0].len), (0, 3));
        assert_eq!((s[1].start, s[1].len), (3, 3));
    }

    #[test]
    fn brute_force_agreement_random() {
        let mut rng = Pcg64::seed_from_u64(7);
        for case in 0..400 {
            let n = rng.random_range(1..=12usize);
            let range = [16u64, 64, 1000][case % 3];
            let mut keys: Vec<u64> = (0..n).map(|_| rng.random_range(0..range)).collect();
            keys.sort_unstable();
            keys.dedup();
            for eps in [0u64, 1, 2, 3] {
                let pts = plain_points(&keys, eps);
                let segs = optimal_pla(&keys, eps);
                assert_eq!(segs.len(), brute_min_segments(&pts), "keys {keys:?} eps {eps}");
                check_segments(&pts, &segs, true);
                let cone = greedy_cone(&keys, eps);
                assert!(cone.len() >= segs.len());
                check_segments(&pts, &cone, false);
                for page in [2u64, 3, 4] {
                    let zp = zero_points(&keys, eps, page);
                    let zs = optimal_pla_zero_interval(&keys, eps, page);
                    assert_eq!(
                        zs.len(),
                        brute_min_segments(&zp),
                        "keys {keys:?} eps {eps} page {page}"
                    );
                    check_segments(&zp, &zs, true);
                    assert!(zs.len() <= segs.len());
                }
            }
        }
    }

    #[test]
    fn brute_force_agreement_general_intervals() {
        // Arbitrary (non-monotone, wide-valued) intervals: exercises the wide
        // arithmetic path (y beyond i64) with small x so the brute force fits.
        let mut rng = Pcg64::seed_from_u64(11);
        for case in 0..400 {
            let n = rng.random_range(1..=10usize);
            let mut xs: Vec<u64> = (0..n).map(|_| rng.random_range(0..50u64)).collect();
            xs.sort_unstable();
            xs.dedup();
            let big: i128 = if case % 2 == 0 { 1 << 70 } else { 20 };
            let pts: Vec<(u64, i128, i128)> = xs
                .iter()
                .map(|&x| {
                    let c = rng.random_range(-big..=big);
                    let w = rng.random_range(0..=big / 4);
                    (x, c - w, c + w)
                })
                .collect();
            let segs = optimal_pla_points(pts.iter().copied());
            assert_eq!(segs.len(), brute_min_segments(&pts), "{pts:?}");
            check_segments(&pts, &segs, true);
            let cone = greedy_cone_points(pts.iter().copied());
            assert!(cone.len() >= segs.len());
            check_segments(&pts, &cone, false);
        }
    }

    #[test]
    fn adversarial_keys() {
        let mut keys = vec![0u64, 1, 2, 3];
        keys.extend((0..100).map(|i| (1u64 << 40) + i));
        keys.extend((0..50).map(|i| (1u64 << 63) + i * 1_000_000_007));
        keys.extend((0..100).map(|i| u64::MAX - 1000 + i * 10));
        keys.push(u64::MAX);
        keys.sort_unstable();
        keys.dedup();
        for eps in [0u64, 1, 4, 64, u64::MAX / 4] {
            let pts = plain_points(&keys, eps);
            let segs = optimal_pla(&keys, eps);
            check_segments(&pts, &segs, false);
            let cone = greedy_cone(&keys, eps);
            assert!(cone.len() >= segs.len());
            check_segments(&pts, &cone, false);
            for page in [4u64, 256] {
                let zp = zero_points(&keys, eps, page);
                check_segments(&zp, &optimal_pla_zero_interval(&keys, eps, page), false);
            }
        }
    }

    #[test]
    fn uniform_million_keys() {
        let mut rng = Pcg64::seed_from_u64(3);
        let mut keys: Vec<u64> = (0..1_000_000).map(|_| rng.random()).collect();
        keys.sort_unstable();
        keys.dedup();
        for eps in [16u64, 256] {
            let pts = plain_points(&keys, eps);
            let segs = optimal_pla(&keys, eps);
            check_segments(&pts, &segs, false);
            let cone = greedy_cone(&keys, eps);
            assert!(cone.len() >= segs.len());
        }
        let zp = zero_points(&keys, 8, 256);
        let zs = optimal_pla_zero_interval(&keys, 8, 256);
        check_segments(&zp, &zs, false);
        assert!(zs.len() < optimal_pla(&keys, 8).len());
    }

    #[test]
    fn huge_positions_hold_tolerance() {
        // Positions near 2^48 with keys spread over the whole u64 range.
        let base = 1i128 << 48;
        let mut rng = Pcg64::seed_from_u64(5);
        let mut xs: Vec<u64> = (0..5000).map(|_| rng.random()).collect();
        xs.sort_unstable();
        xs.dedup();
        let pts: Vec<_> = xs
            .iter()
            .enumerate()
            .map(|(i, &x)| (x, base + i as i128 * 1000 - 3, base + i as i128 * 1000 + 3))
            .collect();
        let segs = optimal_pla_points(pts.iter().copied());
        check_segments(&pts, &segs, false);
    }

    #[test]
    fn non_increasing_keys_do_not_panic() {
        let keys = [5u64, 5, 3, 9, 9, 1, u64::MAX, 0];
        let segs = optimal_pla(&keys, 1);
        let pts = plain_points(&keys, 1);
        let mut next = 0;
        for s in &segs {
            assert_eq!(s.start, next);
            check_line(&pts[s.start..s.end()], s);
            next = s.end();
        }
        assert_eq!(next, keys.len());
        let cone = greedy_cone(&keys, 1);
        assert_eq!(cone.iter().map(|s| s.len).sum::<usize>(), keys.len());
        // Reversed intervals are swapped, extreme ones clamped.
        let segs = optimal_pla_points([(1, 5, -5), (2, i128::MAX, i128::MIN), (3, 0, 0)]);
        assert!(!segs.is_empty());
    }

    #[test]
    fn monotone_slopes_are_non_negative() {
        let mut rng = Pcg64::seed_from_u64(9);
        for _ in 0..200 {
            let n = rng.random_range(1..200usize);
            let mut keys: Vec<u64> = (0..n).map(|_| rng.random_range(0..10_000u64)).collect();
            keys.sort_unstable();
            keys.dedup();
            for eps in [0u64, 2, 50] {
                for s in optimal_pla(&keys, eps)
                    .iter()
                    .chain(&optimal_pla_zero_interval(&keys, eps, 16))
                    .chain(&greedy_cone(&keys, eps))
                {
                    assert!(s.slope >= 0.0, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn slope_compression() {
        let mut rng = Pcg64::seed_from_u64(21);
        let mut keys: Vec<u64> = (0..20_000).map(|_| rng.random_range(0..1u64 << 40)).collect();
        keys.sort_unstable();
        keys.dedup();
        let eps = 32u64;
        let segs = optimal_pla(&keys, eps);
        let ranges: Vec<(f64, f64)> = segs.iter().map(|s| (s.slope_lo, s.slope_hi)).collect();
        let (slopes, assign) = min_slope_set(&ranges);
        assert!(slopes.len() <= segs.len());
        assert!(slopes.windows(2).all(|w| w[0] < w[1]));
        for (s, &a) in segs.iter().zip(&assign) {
            let m = slopes[a as usize];
            assert!(m >= s.slope_lo && m <= s.slope_hi);
            let pts = || {
                keys[s.start..s.end()].iter().enumerate().map(|(j, &k)| {
                    let i = (s.start + j) as i128;
                    (k, i - eps as i128, i + eps as i128)
                })
            };
            let (c_lo, c_hi) = intercept_range(pts(), s.first_key, m).unwrap();
            let c = 0.5 * (c_lo + c_hi);
            let line = Segment {
                slope: m,
                intercept: c,
                ..*s
            };
            check_line(&pts().collect::<Vec<_>>(), &line);
        }
    }

    #[test]
    fn min_slope_set_brute_force() {
        let mut rng = Pcg64::seed_from_u64(1);
        for _ in 0..300 {
            let m = rng.random_range(0..9usize);
            let ranges: Vec<(f64, f64)> = (0..m)
                .map(|_| {
                    let a = rng.random_range(0..20) as f64;
                    let b = a + rng.random_range(0..6) as f64;
                    (a, b)
                })
                .collect();
            let (slopes, assign) = min_slope_set(&ranges);
            for (r, &a) in ranges.iter().zip(&assign) {
                let s = slopes[a as usize];
                assert!(s >= r.0 && s <= r.1);
            }
            // Brute force: an optimal stabbing set can use right endpoints only;
            // try subsets of the distinct right endpoints by increasing size.
            let mut ends: Vec<f64> = ranges.iter().map(|r| r.1).collect();
            ends.sort_by(f64::total_cmp);
            ends.dedup();
            let mut best = usize::MAX;
            for mask in 0u32..(1 << ends.len()) {
                let k = mask.count_ones() as usize;
                if k >= best {
                    continue;
                }
                let stabs_all = ranges.iter().all(|r| {
                    (0..ends.len()).any(|b| mask & (1 << b) != 0 && ends[b] >= r.0 && ends[b] <= r.1)
                });
                if stabs_all {
                    best = k;
                }
            }
            assert_eq!(slopes.len(), best);
        }
        let (s, a) = min_slope_set(&[
            (f64::NEG_INFINITY, f64::INFINITY),
            (1.0, 2.0),
            (f64::NAN, 1.0),
            (3.0, 2.0),
        ]);
        assert_eq!(a.len(), 4);
        assert!(s.len() <= 4);
        assert_eq!(s[a[1] as usize], s[a[0] as usize]);
    }

    /// The segmentation of `points` cut into partitions at `cuts` (sorted,
    /// clamped to the input; repeated cuts make empty partitions), each
    /// segmented alone and stitched; with the points the stitcher re-pushed.
    fn stitched(points: &[IntervalPoint], cuts: &[usize]) -> (Vec<Segment>, usize) {
        let mut st = PlaStitcher::new();
        let mut b = 0;
        for &c in cuts.iter().chain([&points.len()]) {
            let c = c.clamp(b, points.len());
            let part = segment_part(b, points[b..c].iter().copied());
            assert_eq!((part.start(), part.end()), (b, c));
            st.stitch(part, points[b..c].iter().copied()).unwrap();
            assert_eq!(st.next_index(), c);
            b = c;
        }
        let re = st.repushed();
        (st.finish(), re)
    }

    /// Field by field, floats by their bits.
    fn assert_same_segments(got: &[Segment], want: &[Segment]) -> std::result::Result<(), String> {
        if got.len() != want.len() {
            return Err(format!("{} segments, want {}", got.len(), want.len()));
        }
        for (j, (a, b)) in got.iter().zip(want).enumerate() {
            let fa = [a.slope, a.intercept, a.slope_lo, a.slope_hi].map(f64::to_bits);
            let fb = [b.slope, b.intercept, b.slope_lo, b.slope_hi].map(f64::to_bits);
            if (a.first_key, a.start, a.len, fa) != (b.first_key, b.start, b.len, fb) {
                return Err(format!("segment {j}: {a:?}, want {b:?}"));
            }
        }
        Ok(())
    }

    /// Adversarial key sets: random, dense runs between huge gaps, the top
    /// of the key space (`u64::MAX`), small ranges.
    fn adversarial_key_sets() -> impl Strategy<Value = Vec<u64>> {
        prop_oneof![
            prop::collection::vec(any::<u64>(), 0..200),
            prop::collection::vec((any::<u64>(), 1u64..80, 1u64..4), 0..10).prop_map(|runs| {
                runs.into_iter()
                    .flat_map(|(b, len, step)| (0..len).map(move |i| b.saturating_add(i * step)))
                    .collect()
            }),
            prop::collection::vec((u64::MAX - 300)..=u64::MAX, 0..150),
            prop::collection::vec(0u64..400, 0..200),
        ]
        .prop_map(|mut v| {
            v.sort_unstable();
            v.dedup();
            v
        })
    }

    #[test]
    fn stitching_known_cases() {
        // Every cut of a small input, eps 0 (collinear runs only).
        let keys = [0u64, 1, 2, 10, 11, 12, 13, 40, 41, u64::MAX];
        let pts = plain_points(&keys, 0);
        let want = optimal_pla_points(pts.iter().copied());
        for a in 0..=keys.len() {
            for b in a..=keys.len() {
                let (got, _) = stitched(&pts, &[a, b]);
                assert_same_segments(&got, &want).unwrap();
            }
        }
        // One long segment across many partitions: never converges, every
        // point after the first partition is pushed by the stitcher.
        let line: Vec<u64> = (0..1000).map(|i| i * 3).collect();
        let pts = plain_points(&line, 1);
        let (got, re) = stitched(&pts, &[100, 300, 301, 700]);
        assert_eq!(got.len(), 1);
        assert_eq!(re, 900);
        // Many short segments: convergence within a segment or two.
        let mut rng = Pcg64::seed_from_u64(77);
        let mut keys: Vec<u64> = (0..50_000).map(|_| rng.random::<u64>() >> 20).collect();
        keys.sort_unstable();
        keys.dedup();
        let pts = plain_points(&keys, 4);
        let want = optimal_pla_points(pts.iter().copied());
        let cuts: Vec<usize> = (1..50).map(|c| c * 1000).collect();
        let (got, re) = stitched(&pts, &cuts);
        assert_same_segments(&got, &want).unwrap();
        assert!(re < 49 * 200, "re-pushed {re} points for {} segments", want.len());
    }

    #[test]
    fn stitching_out_of_order_is_an_error() {
        let pts = plain_points(&[1, 2, 3, 4, 5, 6], 0);
        let mut st = PlaStitcher::new();
        let e = st
            .stitch(
                segment_part(3, pts[3..].iter().copied()),
                pts[3..].iter().copied(),
            )
            .unwrap_err();
        assert!(e.to_string().contains("starts at point 3"), "{e}");
        st.stitch(
            segment_part(0, pts[..3].iter().copied()),
            pts[..3].iter().copied(),
        )
        .unwrap();
        // Fewer points than the partition was made of.
        let e = st
            .stitch(
                segment_part(3, pts[3..].iter().copied()),
                pts[3..4].iter().copied(),
            )
            .unwrap_err();
        assert!(e.to_string().contains("stitched with points up to 4"), "{e}");
    }

    /// The segmentation of `pts` by `i128` hulls throughout (ordered
    /// intervals within the clamp): the reference of the narrow hulls.
    fn wide_hulls_segments(pts: &[IntervalPoint]) -> Vec<Segment> {
        let mut wide = Hulls::<i128>::default();
        let mut out = Vec::new();
        for &(x, lo, hi) in pts {
            out.extend(wide.push(x, lo, hi));
        }
        out.extend(wide.finish());
        out
    }

    #[test]
    fn narrow_and_wide_hulls_agree_across_the_switch() {
        // Bounds within 2^62 first (i64 hulls), then beyond (i128), in the
        // middle of a segment: the same output as i128 hulls throughout.
        let mut rng = Pcg64::seed_from_u64(13);
        for case in 0..200 {
            let n = rng.random_range(1..300usize);
            let mut xs: Vec<u64> = (0..n).map(|_| rng.random()).collect();
            xs.sort_unstable();
            xs.dedup();
            let switch = rng.random_range(0..=xs.len());
            let w: i128 = [0, 3, 1000][case % 3];
            let pts: Vec<IntervalPoint> = xs
                .iter()
                .enumerate()
                .map(|(i, &x)| {
                    let y = if i < switch {
                        i as i128
                    } else {
                        (1i128 << 62) - 2 + i as i128
                    };
                    (x, y - w, y + w)
                })
                .collect();
            let want = wide_hulls_segments(&pts);
            let got = optimal_pla_points(pts.iter().copied());
            assert_same_segments(&got, &want).unwrap();
            let (st, _) = stitched(&pts, &[switch / 2, switch, switch + 1]);
            assert_same_segments(&st, &want).unwrap();
        }
    }

    #[test]
    fn narrow_hulls_at_their_limit_agree_with_wide_ones() {
        // Bounds at the very edge of the i64 hulls' range, `±Y64_LIMIT`:
        // differences of two bounds reach 2^63, which an `i64` cannot hold.
        // The output must be the i128 hulls' all the same.
        let mut rng = Pcg64::seed_from_u64(29);
        let edge = [-Y64_LIMIT, -Y64_LIMIT + 1, -1, 0, 1, Y64_LIMIT - 1, Y64_LIMIT];
        for _ in 0..2000 {
            let n = rng.random_range(2..12usize);
            let mut xs: Vec<u64> = (0..n).map(|_| rng.random_range(0..64)).collect();
            xs.sort_unstable();
            xs.dedup();
            let pts: Vec<IntervalPoint> = xs
                .iter()
                .map(|&x| {
                    let a = edge[rng.random_range(0..edge.len())];
                    let b = edge[rng.random_range(0..edge.len())];
                    (x, a.min(b), a.max(b))
                })
                .collect();
            let want = wide_hulls_segments(&pts);
            let got = optimal_pla_points(pts.iter().copied());
            assert_same_segments(&got, &want).unwrap_or_else(|e| panic!("{pts:?}: {e}"));
        }
    }

    /// ns/key of the streaming PLA: the old way (i128 hulls, the interval
    /// divided by a granule of 1 per key) against i64 hulls with the
    /// interval added, and partitions of 1M keys stitched. Keys from the SOSD
    /// file `STRATA_PLA_KEYS` (release build:
    /// `STRATA_PLA_KEYS=osm10m.keys cargo test --release --lib pla_throughput -- --ignored --nocapture`).
    #[test]
    #[ignore = "timing; needs STRATA_PLA_KEYS"]
    fn pla_throughput() {
        let Ok(path) = std::env::var("STRATA_PLA_KEYS") else {
            return;
        };
        let keys = crate::format::sosd::read_keys(std::path::Path::new(&path), Default::default()).unwrap();
        let n = keys.len() as f64;
        let eps = 64u64;
        let granule = std::hint::black_box(1u64);
        let time = |name: &str, f: &dyn Fn() -> usize| {
            let mut best = f64::MAX;
            let mut segs = 0;
            for _ in 0..3 {
                let t = std::time::Instant::now();
                segs = f();
                best = best.min(t.elapsed().as_secs_f64());
            }
            println!("{name}: {:.1} ns/key, {segs} segments", best * 1e9 / n);
            segs
        };
        let old = time("i128 hulls, divided interval", &|| {
            let mut h = Hulls::<i128>::default();
            let mut c = 0;
            for (i, &k) in keys.iter().enumerate() {
                let u = (i as u64 / granule) as i128;
                let e = (eps / granule) as i128;
                let (lo, hi) = normalize(u - e, u + e);
                c += usize::from(h.push(k, lo, hi).is_some());
            }
            c + usize::from(h.finish().is_some())
        });
        let new = time("PlaStream (i64 hulls), added interval", &|| {
            let mut s = PlaStream::new();
            let e = eps as i128;
            let mut c = 0;
            for (i, &k) in keys.iter().enumerate() {
                c += usize::from(s.push(k, i as i128 - e, i as i128 + e).is_some());
            }
            c + usize::from(s.finish().is_some())
        });
        fn pts(start: usize, ks: &[u64], eps: u64) -> impl Iterator<Item = IntervalPoint> + '_ {
            let e = eps as i128;
            ks.iter()
                .enumerate()
                .map(move |(j, &k)| (k, (start + j) as i128 - e, (start + j) as i128 + e))
        }
        let steps = time("PlaStream::push_steps, inner points counted", &|| {
            let mut s = PlaStream::new();
            let mut c = 0;
            for (p, ch) in keys.chunks(1 << 16).enumerate() {
                let i = (p << 16) as i128;
                s.push_steps(ch, i - eps as i128, i + eps as i128, &mut |_| c += 1);
            }
            c + usize::from(s.finish().is_some())
        });
        assert_eq!(new, steps);
        let parts = time("1M-key partitions segmented and stitched (one thread)", &|| {
            let mut st = PlaStitcher::new();
            for (p, c) in keys.chunks(1 << 20).enumerate() {
                let part = segment_part(p << 20, pts(p << 20, c, eps));
                st.stitch(part, pts(p << 20, c, eps)).unwrap();
            }
            st.finish().len()
        });
        assert_eq!((old, new), (new, parts));
        // Zero intervals of 255-key pages (16-byte records in 4 KiB pages).
        let zero_pts = time("zero intervals, point by point", &|| {
            optimal_pla_points(keys.iter().enumerate().map(|(i, &k)| {
                let (lo, hi) = zero_interval(i as u64, eps, 255);
                (k, lo, hi)
            }))
            .len()
        });
        let zero_runs = time("zero intervals, a run per page", &|| {
            optimal_pla_zero_interval(&keys, eps, 255).len()
        });
        assert_eq!(zero_pts, zero_runs);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Stitched partitions give exactly the sequential segmentation, for
        /// plain, zero-interval and general (wide) intervals and any cuts,
        /// down to partitions of one point and empty ones.
        #[test]
        fn prop_stitched_equals_sequential(
            keys in adversarial_key_sets(),
            eps in prop_oneof![0u64..4, 4u64..40],
            page in 1u64..9,
            cuts in prop::collection::vec(0usize..220, 0..40),
            wide in prop::collection::vec((-(1i128 << 70)..(1i128 << 70), 0i128..(1i128 << 66)), 0..60),
        ) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            let general: Vec<IntervalPoint> = keys
                .iter()
                .zip(&wide)
                .map(|(&k, &(c, w))| (k, c - w, c + w))
                .collect();
            for pts in [plain_points(&keys, eps), zero_points(&keys, eps, page), general] {
                let want = optimal_pla_points(pts.iter().copied());
                let (got, _) = stitched(&pts, &cuts);
                if let Err(e) = assert_same_segments(&got, &want) {
                    prop_assert!(false, "cuts {:?}: {}", cuts, e);
                }
            }
        }
    }

    /// The ranges `0..len` is cut into at `cuts` (sorted; clamped).
    fn cut_ranges(len: usize, cuts: &[usize]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut b = 0;
        for &c in cuts.iter().chain([&len]) {
            let c = c.clamp(b, len);
            out.push((b, c));
            b = c;
        }
        out
    }

    /// Points whose intervals come in runs: `runs` gives each run's length
    /// and interval `(centre, half width)`.
    fn run_points(keys: &[u64], runs: &[(usize, i128, i128)]) -> Vec<IntervalPoint> {
        let mut out = Vec::new();
        let mut it = keys.iter();
        for &(len, c, w) in runs.iter().cycle().take(keys.len().max(1)) {
            for &k in it.by_ref().take(len.max(1)) {
                out.push((k, c - w, c + w));
            }
        }
        out
    }

    /// Pushes `points` as runs: maximal runs of one interval between the
    /// cuts, each fed whole with [`PlaStream::push_run`].
    fn pushed_as_runs(keys: &[u64], points: &[IntervalPoint], cuts: &[usize]) -> Vec<Segment> {
        let mut s = PlaStream::new();
        let mut out = Vec::new();
        for (b, c) in cut_ranges(points.len(), cuts) {
            let mut i = b;
            while i < c {
                let (_, lo, hi) = points[i];
                let mut j = i + 1;
                while j < c && (points[j].1, points[j].2) == (lo, hi) {
                    j += 1;
                }
                s.push_run(&keys[i..j], lo, hi, &mut |seg| out.push(seg));
                i = j;
            }
        }
        out.extend(s.finish());
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Runs of one interval pushed whole give exactly the segments of
        /// their points pushed one by one: zero intervals of any page and
        /// window, runs of general and wide intervals (beyond the `i64`
        /// hulls), equal keys and cuts anywhere, and partitions of runs
        /// stitched.
        #[test]
        fn prop_runs_equal_points(
            keys in adversarial_key_sets(),
            dup in prop::collection::vec(0usize..200, 0..6),
            eps in prop_oneof![0u64..4, 4u64..40, Just(1u64 << 62)],
            page in 1u64..40,
            runs in prop::collection::vec(
                (1usize..30, -(1i128 << 64)..(1i128 << 64), prop_oneof![0i128..8, 0i128..(1i128 << 66)]),
                1..12,
            ),
            cuts in prop::collection::vec(0usize..220, 0..8),
        ) {
            let mut keys = keys;
            for d in dup {
                if let Some(&k) = keys.get(d) {
                    keys.insert(d, k);
                }
            }
            let mut cuts = cuts;
            cuts.sort_unstable();
            for pts in [zero_points(&keys, eps, page), run_points(&keys, &runs)] {
                let want = optimal_pla_points(pts.iter().copied());
                for cut in [&[][..], &cuts[..]] {
                    let got = pushed_as_runs(&keys, &pts, cut);
                    if let Err(e) = assert_same_segments(&got, &want) {
                        prop_assert!(false, "cuts {:?}: {}", cut, e);
                    }
                }
                // Partitions at the cuts, each fed as runs, stitched.
                let mut st = PlaStitcher::new();
                for (b, c) in cut_ranges(pts.len(), &cuts) {
                    let items = |b: usize, c: usize| {
                        let mut v: Vec<IntervalRun<'_>> = Vec::new();
                        let mut i = b;
                        while i < c {
                            let (lo, hi) = (pts[i].1, pts[i].2);
                            let mut j = i + 1;
                            while j < c && (pts[j].1, pts[j].2) == (lo, hi) {
                                j += 1;
                            }
                            v.push((&keys[i..j], lo, hi));
                            i = j;
                        }
                        v
                    };
                    let part = segment_part(b, items(b, c));
                    prop_assert_eq!((part.start(), part.end()), (b, c));
                    st.stitch(part, items(b, c)).unwrap();
                }
                if let Err(e) = assert_same_segments(&st.finish(), &want) {
                    prop_assert!(false, "stitched at {:?}: {}", cuts, e);
                }
            }
            if eps < 1 << 62 {
                let want = optimal_pla_points(zero_points(&keys, eps, page));
                if let Err(e) = assert_same_segments(&optimal_pla_zero_interval(&keys, eps, page), &want) {
                    prop_assert!(false, "optimal_pla_zero_interval: {}", e);
                }
            }
        }
    }

    /// A stream's hulls, lines and counts (not its `quiet` hint).
    fn hull_state(s: &PlaStream) -> String {
        let mut s = s.clone();
        match &mut s.core {
            Core::Narrow(h) => h.quiet = false,
            Core::Wide(h) => h.quiet = false,
        }
        format!("{:?}", s.core)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(8192))]

        /// Keys pushed a chunk at a time with intervals that step
        /// ([`PlaStream::push_steps`], points that change nothing counted)
        /// give exactly the segments of their points pushed one by one:
        /// every field, floats by their bits; windows from 0 to beyond the
        /// `i64` hulls, positions near the hulls' limit, equal keys, cuts
        /// anywhere, and partitions fed as steps and stitched.
        #[test]
        fn prop_steps_equal_points(
            keys in adversarial_key_sets(),
            dense in (any::<u64>(), 1u64..1000, 0usize..600, 0u64..4),
            walk in prop::collection::vec(1u64..4, 0..400),
            dup in prop::collection::vec(0usize..600, 0..4),
            base in prop_oneof![
                -100i128..100,
                ((1i128 << 62) - 2000)..(1i128 << 62),
                (-(1i128 << 62))..(-(1i128 << 62) + 2000),
            ],
            eps in prop_oneof![0i128..4, 4i128..300, Just(1i128 << 40), Just(1i128 << 62)],
            cuts in prop::collection::vec(0usize..620, 0..8),
        ) {
            // Dense keys (many points change nothing) or adversarial ones.
            // Jitter 0: collinear points (endpoints on the extreme lines).
            let (from, step, len, jitter) = dense;
            // Or a walk of small steps (many collinear endpoints).
            let mut keys = if !walk.is_empty() && len % 2 == 0 {
                walk.iter().scan(from >> 1, |k, &d| {
                    *k += d;
                    Some(*k)
                }).collect()
            } else if len > 0 {
                (0..len as u64)
                    .map(|i| from.saturating_add(i * step + (i * i * jitter) % step))
                    .collect()
            } else {
                keys
            };
            keys.dedup();
            for d in dup {
                if let Some(&k) = keys.get(d) {
                    keys.insert(d, k);
                }
            }
            let mut cuts = cuts;
            cuts.sort_unstable();
            let pts: Vec<IntervalPoint> = keys
                .iter()
                .enumerate()
                .map(|(j, &k)| (k, base + j as i128 - eps, base + j as i128 + eps))
                .collect();
            let want = optimal_pla_points(pts.iter().copied());
            let mut s = PlaStream::new();
            let mut one = PlaStream::new();
            let mut got = Vec::new();
            for (b, c) in cut_ranges(keys.len(), &cuts) {
                s.push_steps(&keys[b..c], pts.get(b).map_or(0, |p| p.1), pts.get(b).map_or(0, |p| p.2), &mut |seg| got.push(seg));
                // The very state of points pushed one by one: the points
                // counted changed nothing else.
                for &(x, lo, hi) in &pts[b..c] {
                    one.push(x, lo, hi);
                }
                prop_assert_eq!(hull_state(&s), hull_state(&one));
            }
            got.extend(s.finish());
            if let Err(e) = assert_same_segments(&got, &want) {
                prop_assert!(false, "cuts {:?}: {}", cuts, e);
            }
            let items = |b: usize, c: usize| {
                (b..c).step_by(7).map(|i| IntervalSteps {
                    xs: &keys[i..(i + 7).min(c)],
                    lo: pts[i].1,
                    hi: pts[i].2,
                }).collect::<Vec<_>>()
            };
            let mut st = PlaStitcher::new();
            for (b, c) in cut_ranges(keys.len(), &cuts) {
                let part = segment_part(b, items(b, c));
                prop_assert_eq!((part.start(), part.end()), (b, c));
                st.stitch(part, items(b, c)).unwrap();
            }
            if let Err(e) = assert_same_segments(&st.finish(), &want) {
                prop_assert!(false, "stitched at {:?}: {}", cuts, e);
            }
        }
    }

    /// The segmentation with every endpoint kept in its hull (the algorithm
    /// as published), on the exact `i128` path.
    fn with_full_hulls(points: &[IntervalPoint]) -> Vec<Segment> {
        let mut h = Hulls::<i128> {
            keep_all: true,
            ..Hulls::default()
        };
        let mut out = Vec::new();
        for &(x, lo, hi) in points {
            let (lo, hi) = normalize(lo, hi);
            out.extend(h.push(x, lo, hi));
        }
        out.extend(h.finish());
        out
    }

    #[test]
    fn hulls_without_outside_endpoints_known_case() {
        // The wedge closes to the line of slope 0.3 and later lower endpoints
        // fall on it: they must stay in the hull (the reported intercept
        // depends on which of them anchors the line).
        let keys = [
            0u64, 13, 14, 15, 16, 17, 18, 19, 21, 23, 24, 27, 30, 35, 37, 40, 43, 47, 50, 53, 57, 60, 63, 67,
            70, 93,
        ];
        let pts = plain_points(&keys, 3);
        assert_same_segments(&optimal_pla(&keys, 3), &with_full_hulls(&pts)).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Leaving the endpoints outside the wedge out of the hulls changes
        /// nothing: the same segments, lines and slope ranges, bit for bit.
        /// Plain, zero-interval and general intervals (wide and reversed,
        /// repeated keys), and collinear runs (ties at the tangents).
        #[test]
        fn prop_hulls_without_outside_endpoints_are_exact(
            keys in adversarial_key_sets(),
            eps in prop_oneof![0u64..4, 4u64..40],
            page in 1u64..9,
            wide in prop::collection::vec((-(1i128 << 70)..(1i128 << 70), -(1i128 << 66)..(1i128 << 66)), 0..60),
            narrow in prop::collection::vec((0u64..6, -3i128..40, 0i128..5), 0..120),
            (num, den, jitter) in (1u64..12, 1u64..5, prop::collection::vec(0u64..3, 0..150)),
        ) {
            // Keys near a line of rational slope, small eps: the wedge often
            // closes to one line, and later endpoints lie on it.
            let mut near_line: Vec<u64> =
                jitter.iter().enumerate().map(|(i, &j)| i as u64 * num / den + j).collect();
            near_line.dedup();
            let general: Vec<IntervalPoint> = keys
                .iter()
                .zip(&wide)
                .map(|(&k, &(c, w))| (k, c - w, c + w))
                .collect();
            // Small steps (some zero: a repeated key starts a segment) and
            // small integer intervals: many collinear endpoints.
            let mut x = 0u64;
            let ties: Vec<IntervalPoint> = narrow
                .iter()
                .map(|&(dx, y, w)| {
                    x += dx;
                    (x, y, y + w)
                })
                .collect();
            let on_line = plain_points(&near_line, eps % 4);
            for pts in [plain_points(&keys, eps), zero_points(&keys, eps, page), general, ties, on_line] {
                let got = optimal_pla_points(pts.iter().copied());
                if let Err(e) = assert_same_segments(&got, &with_full_hulls(&pts)) {
                    prop_assert!(false, "{}", e);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn prop_plain_and_zero(mut keys in prop::collection::vec(any::<u64>(), 0..300), eps in 0u64..40, page in 1u64..64) {
            keys.sort_unstable();
            keys.dedup();
            let pts = plain_points(&keys, eps);
            let segs = optimal_pla(&keys, eps);
            check_segments(&pts, &segs, false);
            // The i64 fast path and the general i128 path agree exactly.
            prop_assert_eq!(&segs, &optimal_pla_points(pts.iter().copied()));
            let cone = greedy_cone(&keys, eps);
            prop_assert!(cone.len() >= segs.len());
            check_segments(&pts, &cone, false);
            let zp = zero_points(&keys, eps, page);
            let zs = optimal_pla_zero_interval(&keys, eps, page);
            check_segments(&zp, &zs, false);
            prop_assert_eq!(&zs, &optimal_pla_points(zp.iter().copied()));
        }

        #[test]
        fn prop_dense_runs_and_gaps(runs in prop::collection::vec((any::<u64>(), 1usize..60, 1u64..4), 1..8), eps in 0u64..8) {
            let mut keys = Vec::new();
            for (base, len, step) in runs {
                for j in 0..len as u64 {
                    keys.push(base.saturating_add(j * step));
                }
            }
            keys.sort_unstable();
            keys.dedup();
            let pts = plain_points(&keys, eps);
            check_segments(&pts, &optimal_pla(&keys, eps), false);
            check_segments(&pts, &greedy_cone(&keys, eps), false);
        }

        #[test]
        fn prop_small_brute(mut keys in prop::collection::vec(0u64..40, 1..10), eps in 0u64..3, page in 1u64..5) {
            keys.sort_unstable();
            keys.dedup();
            let pts = zero_points(&keys, eps, page);
            let segs = optimal_pla_zero_interval(&keys, eps, page);
            prop_assert_eq!(segs.len(), brute_min_segments(&pts));
            check_segments(&pts, &segs, true);
        }
    }
}
