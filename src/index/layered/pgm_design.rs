//! PGM-family designs (kinds `pgm`, `pgm-disk`, `pgm-disk-cpr`): optimal
//! PLA band layers with PGM's recursion, zero intervals (Zhang G3) chosen
//! against a measured page budget, compressed bands (Zhang G4) and lines
//! whose search windows cross few page boundaries.

use serde_json::{Value, json};

use super::build::{
    BoundsFold, LayerBuild, SegmentLine, band_entries, band_layer, band_layer_in, band_of_bounds,
    band_of_entries_in, blob_layer, lines_of,
};
use super::compressed::CprBand;
use super::design::Design;
use super::entries::{floor_lane, round_lane};
use super::keys::{Keys, Win};
use super::layer::LayerKind;
use super::segment::{RunSegmenter, SegmentFold};
use super::spill::Segs;
use crate::index::{ParamDoc, Params};
use crate::{Error, Result};

mod ahead;

/// The prediction granularity (Zhang G2): `item` (1), `page` (records per
/// page) or a number of records (mini-page).
fn granularity(p: &Params, per_page: usize) -> Result<u64> {
    let g = match p.str("granularity", "item")?.as_str() {
        "item" => 1,
        "page" => per_page as u64,
        other => other.parse::<u64>().map_err(|_| {
            Error::invalid(format!(
                "granularity must be item, page or a number, got {other:?}"
            ))
        })?,
    };
    if g == 0 {
        return Err(Error::invalid("granularity must be at least 1"));
    }
    Ok(g)
}

/// The interval each key's prediction must fall in, in prediction units.
#[derive(Debug, Clone, Copy)]
struct Tolerance {
    eps: u64,
    granule: u64,
    zero_page: u64,
}

impl Tolerance {
    /// Item-level error `eps` (granule 1), zero intervals of `zero_page`
    /// positions when it is > 0.
    fn items(eps: u64, zero_page: u64) -> Self {
        Tolerance {
            eps,
            granule: 1,
            zero_page,
        }
    }

    fn interval(&self, i: usize) -> (i128, i128) {
        if self.zero_page > 0 {
            crate::model::zero_interval(i as u64, self.eps, self.zero_page)
        } else {
            let u = (i as u64 / self.granule) as i128;
            let e = (self.eps / self.granule) as i128;
            (u - e, u + e)
        }
    }

    /// One past the last key from `i` on whose interval is key `i`'s: the
    /// end of its page with zero intervals, of its granule otherwise.
    fn run_end(&self, i: usize) -> usize {
        let run = if self.zero_page > 0 {
            self.zero_page
        } else {
            self.granule.max(1)
        };
        let run = usize::try_from(run).unwrap_or(usize::MAX);
        (i / run).saturating_add(1).saturating_mul(run)
    }

    /// The feasible intercepts of lines of `slope` anchored at `first` over
    /// the keys `range` (as [`crate::model::InterceptRange`] over
    /// [`Tolerance::points`]). With zero intervals, every key of a page has
    /// the same interval, and for a slope `>= 0` the bounds `lo - t` and
    /// `hi - t` (`t = slope · (key - first)`, growing with the key) are
    /// tightest at the page's first and last key of the range: only those
    /// two points per page are read, for the same result.
    fn intercepts(
        &self,
        keys: Win<'_>,
        range: std::ops::Range<usize>,
        first: u64,
        slope: f64,
    ) -> Option<(f64, f64)> {
        let mut r = [crate::model::InterceptRange::new(first, slope)];
        self.intercepts_of(keys, range, &mut r);
        r[0].finish()
    }

    /// [`Tolerance::intercepts`] of several slopes in one pass over the
    /// keys: `ranges` holds one [`crate::model::InterceptRange`] per slope,
    /// each fed the points its slope needs.
    fn intercepts_of(
        &self,
        keys: Win<'_>,
        range: std::ops::Range<usize>,
        ranges: &mut [crate::model::InterceptRange],
    ) {
        let page = usize::try_from(self.zero_page).unwrap_or(usize::MAX);
        keys.each(range, |at, chunk| {
            for r in ranges.iter_mut() {
                let slope = r.slope();
                if self.zero_page == 0 || slope.is_nan() || slope < 0.0 {
                    for (d, &k) in chunk.iter().enumerate() {
                        let (lo, hi) = self.interval(at + d);
                        r.add((k, lo, hi));
                    }
                    continue;
                }
                // Each page's first and last key of every chunk (a page cut
                // by a chunk's end adds two keys between them, which bind no
                // tighter).
                let end = at + chunk.len();
                let mut i = at;
                while i < end {
                    let last = (i / page).saturating_add(1).saturating_mul(page).min(end) - 1;
                    let (lo, hi) = self.interval(i);
                    if let (Some(&a), Some(&b)) = (chunk.get(i - at), chunk.get(last - at)) {
                        r.add((a, lo, hi));
                        r.add((b, lo, hi));
                    }
                    i = last + 1;
                }
            }
            true
        });
    }

    /// Every key of `keys` with its interval, key `i` at position `i`.
    fn points<'a>(&'a self, keys: &'a [u64]) -> impl Iterator<Item = crate::model::IntervalPoint> + 'a {
        keys.iter().enumerate().map(|(i, &k)| {
            let (lo, hi) = self.interval(i);
            (k, lo, hi)
        })
    }
}

/// Zero intervals give a page's keys one interval, and a granule of `g`
/// records its `g` keys one: those come in runs.
impl super::segment::Intervals for Tolerance {
    #[inline]
    fn interval(&self, i: usize) -> (i128, i128) {
        Tolerance::interval(self, i)
    }
    fn runs(&self) -> bool {
        self.zero_page > 1 || (self.zero_page == 0 && self.granule > 1)
    }
    fn run_end(&self, i: usize) -> usize {
        Tolerance::run_end(self, i)
    }
    fn steps(&self) -> bool {
        self.zero_page == 0 && self.granule == 1
    }
}

/// Intercept roundings tried for compressed zero-interval bands, coarsest
/// first, in sixteenths of a position (32, 16, 8, 4, 2 and 1 positions).
const OFF_UNITS: [i32; 6] = [512, 256, 128, 64, 32, 16];

/// The rank of a rounding: (max error over the cap, extra pages, distance
/// from the original offset), smaller is better.
type Rank = (bool, u64, i64);

/// The [`Rank`] of entry `j` of `entries` (its keys `starts[j]..starts[j +
/// 1]`, in `win`) with offset `off`, `dist` from the original, against a
/// cap of `cap` positions on the error. The rank only grows along the keys,
/// so counting stops (`None`) once it reaches `beat`, a rank already found.
/// With `preds`, the predictions made are left there.
#[allow(clippy::too_many_arguments)]
fn rounding_rank(
    win: Win<'_>,
    starts: &[usize],
    entries: &[super::entries::BandEntry],
    j: usize,
    off: i32,
    dist: i64,
    beat: Option<Rank>,
    tol: Tolerance,
    cap: u64,
    mut preds: Option<&mut Vec<u64>>,
) -> Option<Rank> {
    if let Some(p) = preds.as_mut() {
        p.clear();
    }
    let page = tol.zero_page.max(1);
    let n = win.n();
    let max_unit = n as u64;
    let e = super::entries::BandEntry {
        off,
        ..*entries.get(j)?
    };
    let next = entries.get(j + 1).map_or(max_unit, |f| f.base);
    let (start, end) = (
        starts.get(j).copied().unwrap_or(0),
        starts.get(j + 1).copied().unwrap_or(n),
    );
    let (mut worst, mut extra) = (0u64, 0u64);
    let (mut own, mut up, mut down) = (PageDiv::new(page), PageDiv::new(page), PageDiv::new(page));
    let e = e.predictor(next, max_unit);
    let lanes = RankLanes::new(&e, page, tol.eps, cap);
    let mut over = false;
    let mut buf = [0u64; RANK_BLOCK];
    let mut beaten = false;
    // The rank only grows along the keys: checked after each block, it is
    // beaten at a block's end exactly if it was beaten within the block.
    win.each(start..end, |at, chunk| {
        for (b, block) in chunk.chunks(RANK_BLOCK).enumerate() {
            let i0 = at + b * RANK_BLOCK;
            let counted = lanes.and_then(|l| l.block_dispatched(block, i0, &mut buf));
            if let Some((o, x)) = counted {
                over |= o;
                extra += x;
                if let Some(v) = preds.as_mut() {
                    v.extend_from_slice(buf.get(..block.len()).unwrap_or_default());
                }
            } else {
                for (d, &k) in block.iter().enumerate() {
                    let i = i0 + d;
                    let p = e.predict(k);
                    if let Some(v) = preds.as_mut() {
                        v.push(p);
                    }
                    let first = own.div_u(i as u64) * page;
                    worst = worst
                        .max(first.saturating_sub(p))
                        .max(p.saturating_sub(first + page - 1));
                    extra += up.div_u(p + tol.eps) - down.div_u(p.saturating_sub(tol.eps));
                }
            }
            over |= worst > cap;
            if beat.is_some_and(|b| (over, extra, dist) >= b) {
                beaten = true;
                return false;
            }
        }
        true
    });
    (!beaten).then_some((over, extra, dist))
}

/// Entries with every offset rounded down or up to a multiple of `unit`,
/// whichever keeps the segment's keys within `tol.eps` plus half a unit of
/// their pages with fewer page-crossing search windows.
fn rounded_offsets(
    keys: Keys<'_>,
    starts: &[usize],
    entries: &[super::entries::BandEntry],
    unit: i32,
    tol: Tolerance,
) -> Result<Vec<super::entries::BandEntry>> {
    // Nearest rounding moves a prediction by at most half a unit (in
    // positions: unit / 32): allow that much, no more.
    let cap = tol.eps + (unit as u64).div_ceil(32);
    let cost = |win: Win<'_>, j: usize, off: i32, dist: i64, beat: Option<Rank>| {
        rounding_rank(win, starts, entries, j, off, dist, beat, tol, cap, None)
    };
    // Each entry's rounding is its own: chosen in parallel, in order. Of
    // equal ranks the rounding down is kept.
    let used = starts.len().min(entries.len());
    let groups = keys.by_groups(starts.get(..used).unwrap_or_default(), |win, js| {
        let mut out = Vec::with_capacity(js.len());
        for j in js {
            let Some(e) = entries.get(j) else { continue };
            let u = i64::from(unit.max(1));
            let down = i64::from(e.off).div_euclid(u) * u;
            let mut best: Option<(i32, Rank)> = None;
            for o in [down, down + u] {
                let Ok(o) = i32::try_from(o) else { continue };
                let dist = (i64::from(o) - i64::from(e.off)).abs();
                if let Some(r) = cost(win, j, o, dist, best.map(|b| b.1)) {
                    best = Some((o, r));
                }
            }
            out.push(super::entries::BandEntry {
                off: best.map_or(e.off, |b| b.0),
                ..*e
            });
        }
        out
    })?;
    let mut out: Vec<super::entries::BandEntry> = groups.into_iter().flatten().collect();
    // Entries past the starts (none in a design) keep their offsets.
    out.extend(entries.iter().skip(used).copied());
    Ok(out)
}

/// [`rounded_offsets`] with `unit` and [`measured_band`] of the rounded
/// entries (zero intervals of `tol.zero_page`, pages of as many positions)
/// in one pass over the keys: each segment's predictions with its winning
/// rounding, recorded while that rounding was ranked, are tallied. Ranks
/// are counted nearest rounding first (the likelier winner, so the other's
/// count stops early more often); the same rounding wins as in
/// [`rounded_offsets`].
#[cfg(test)]
fn rounded_band(
    keys: Keys<'_>,
    starts: &[usize],
    entries: &[super::entries::BandEntry],
    unit: i32,
    tol: Tolerance,
    reach: u64,
) -> Result<(Vec<super::entries::BandEntry>, LayerBuild, f64)> {
    rounded_band_within(keys, starts, entries, unit, tol, reach, f64::INFINITY)?
        .ok_or_else(|| Error::invalid("a band measured without a limit stopped"))
}

/// [`rounded_band`], or `None` as soon as the keys counted prove the
/// rounded band reads more than `limit` extra pages per lookup ([`Stop`]).
fn rounded_band_within(
    keys: Keys<'_>,
    starts: &[usize],
    entries: &[super::entries::BandEntry],
    unit: i32,
    tol: Tolerance,
    reach: u64,
    limit: f64,
) -> Result<Option<(Vec<super::entries::BandEntry>, LayerBuild, f64)>> {
    let page = tol.zero_page;
    if starts.len() != entries.len() || !one_pass(starts, entries, page, page) || page == 0 {
        let q = rounded_offsets(keys, starts, entries, unit, tol)?;
        let measured = measured_band_within(keys, starts, &q, page, page, reach, limit)?;
        return Ok(measured.map(|(b, extra)| (q, b, extra)));
    }
    let len = keys.len();
    let n = len as u64;
    let stop = Stop::new(n, limit);
    let max_unit = n;
    let cap = tol.eps + (unit as u64).div_ceil(32);
    let far_end = n.saturating_sub(1).saturating_sub(reach);
    // `rounding_rank`, the predictions left in `preds` (all of them unless
    // it stopped at `beat`).
    let cost =
        |win: Win<'_>, j: usize, off: i32, dist: i64, beat: Option<Rank>, preds: Option<&mut Vec<u64>>| {
            rounding_rank(win, starts, entries, j, off, dist, beat, tol, cap, preds)
        };
    let (parts, tallies): (Vec<Vec<super::entries::BandEntry>>, Vec<Tally>) = keys
        .by_groups(starts, |win, js| {
            let mut t = Tally::new(page);
            let (mut cur, mut won) = (Vec::new(), Vec::new());
            let (mut own, mut at) = (PageDiv::new(page), PageDiv::new(page));
            let mut out = Vec::with_capacity(js.len());
            let (mut told, mut since) = (0u64, 0usize);
            let js = if stop.over() { 0..0 } else { js };
            for j in js {
                let Some(e) = entries.get(j) else { continue };
                if since >= STOP_EVERY {
                    since = 0;
                    if stop.report(&t, page, reach, &mut told) {
                        break;
                    }
                }
                let u = i64::from(unit.max(1));
                let off = i64::from(e.off);
                let down = off.div_euclid(u) * u;
                // Nearest first; of equal distances, down first (it wins ties).
                let order = if down + u - off < off - down {
                    [down + u, down]
                } else {
                    [down, down + u]
                };
                let start = starts.get(j).copied().unwrap_or(0);
                let end = starts.get(j + 1).copied().unwrap_or(len);
                // The predictions of an entry the window holds are kept from
                // its ranking; those of an entry read in passes are made again.
                let held = win.held(start..end);
                let mut best: Option<(i32, Rank)> = None;
                for o in order {
                    let Ok(o) = i32::try_from(o) else { continue };
                    let dist = (i64::from(o) - off).abs();
                    let preds = held.is_some().then_some(&mut cur);
                    if let Some(r) = cost(win, j, o, dist, best.map(|b| b.1), preds) {
                        // Of equal ranks the one counted first is kept (the
                        // later one stops at `beat`): down first on a tie.
                        best = Some((o, r));
                        std::mem::swap(&mut cur, &mut won);
                    }
                }
                let e = super::entries::BandEntry {
                    off: best.map_or(e.off, |b| b.0),
                    ..*e
                };
                let next_key = entries.get(j + 1).map(|f| f.key);
                since += end.saturating_sub(start);
                let mut count = |i: usize, p: u64, k: u64| {
                    // `extra_pages` routes by entry keys: the same entry, or
                    // the count is made there.
                    if e.key > k && j > 0 || next_key.is_some_and(|nk| nk <= k) {
                        t.whole = false;
                    }
                    t.add(i as u64, p, page, &mut own, &mut at, reach, far_end);
                };
                match held {
                    Some(held) if best.is_some() => {
                        for (d, (&p, &k)) in won.iter().zip(held).enumerate() {
                            count(start + d, p, k);
                        }
                    }
                    _ => {
                        // No rounding fits an offset (the entry as it is), or
                        // its keys are read in passes.
                        let next = entries.get(j + 1).map_or(max_unit, |f| f.base);
                        let e = e.predictor(next, max_unit);
                        win.each(start..end, |i, chunk| {
                            for (d, &k) in chunk.iter().enumerate() {
                                count(i + d, e.predict(k), k);
                            }
                            true
                        });
                    }
                }
                out.push(e);
            }
            stop.report(&t, page, reach, &mut told);
            (out, t)
        })?
        .into_iter()
        .unzip();
    if stop.over() {
        return Ok(None);
    }
    let q: Vec<super::entries::BandEntry> = parts.into_iter().flatten().collect();
    let tally = tallies.into_iter().fold(Tally::new(page), Tally::merge);
    let (b, extra) = tally.finish(keys, &q, page, page, reach)?;
    Ok(Some((q, b, extra)))
}

/// A compressed band layer (CprLeCo_PGM_D): shared slopes, intercepts re-fitted
/// for them, rough separators as entry keys, all measured as a plain band.
/// Returns that band, the blob layer and, with zero intervals and a finite
/// budget, the band's extra pages per lookup; `None` once it is proven to
/// read more than `limit` extra pages per lookup.
fn cpr_band(
    keys: Keys<'_>,
    segs: &Segs,
    tol: Tolerance,
    budget: f64,
    limit: f64,
) -> Result<Option<(LayerBuild, LayerBuild, Option<f64>)>> {
    // What the design holds per segment goes as soon as it is used: at 200M
    // keys (180k segments) these are tens of MB next to a 1 MB model. A
    // spilled segmentation is read a group of segments at a time.
    let mut ranges: Vec<(f64, f64)> = Vec::with_capacity(segs.len());
    let mut seg_starts: Vec<usize> = Vec::with_capacity(segs.len());
    segs.for_each(|_, s| {
        ranges.push((s.slope_lo, s.slope_hi));
        seg_starts.push(s.start);
    })?;
    let (table, assign) = crate::model::min_slope_set(&ranges);
    drop(ranges);
    // Each segment's line is its own: found in parallel, in order, with the
    // bounds of its rough separator: `[last key before it + 1, its first
    // key]` (`[0, first]` for the first).
    let line = |keys: Win<'_>, s: &crate::model::Segment, a: u32| {
        let slope = table.get(a as usize).copied().unwrap_or(s.slope);
        match tol.intercepts(keys, s.start..s.end(), s.first_key, slope) {
            // The shared slope through the middle of its feasible intercepts;
            // with zero intervals, other intercepts if that crosses too many
            // page boundaries.
            Some((lo, hi)) => {
                let mid = crate::model::Segment {
                    slope,
                    intercept: 0.5 * lo + 0.5 * hi,
                    ..*s
                };
                if tol.zero_page > 0 {
                    page_aware_line(keys, &mid, tol, &[(slope, Some((lo, hi)))], budget)
                } else {
                    SegmentLine {
                        start: s.start,
                        slope,
                        intercept: mid.intercept,
                    }
                }
            }
            None => middle_line(s),
        }
    };
    let groups = keys.by_groups(&seg_starts, |win, js| -> Result<Vec<_>> {
        let mut out = Vec::with_capacity(js.len());
        let group = segs.range(js.clone())?;
        for (s, j) in group.iter().zip(js) {
            let Some(&a) = assign.get(j) else {
                continue;
            };
            let lo = match s.start.checked_sub(1) {
                None => 0,
                Some(b) => win.get(b).map_or(0, |k| k + 1),
            };
            let hi = win.get(s.start).unwrap_or(u64::MAX);
            out.push((line(win, s, a), lo, hi));
        }
        Ok(out)
    })?;
    drop(assign);
    let groups = groups.into_iter().collect::<Result<Vec<_>>>()?;
    let m = groups.iter().map(Vec::len).sum();
    let (mut lines, mut lo, mut hi) = (
        Vec::with_capacity(m),
        Vec::with_capacity(m),
        Vec::with_capacity(m),
    );
    for (l, a, b) in groups.into_iter().flatten() {
        lines.push(l);
        lo.push(a);
        hi.push(b);
    }
    // A separator far before its segment's first key moves the line's anchor
    // and so its stored intercept by slope × distance: keep separators within
    // about one position's worth of keys of the first key, so intercepts stay
    // narrow (a wide gap before a segment still leaves a coarse separator).
    for ((l, &h), line) in lo.iter_mut().zip(&hi).zip(&lines) {
        let reach = if line.slope > 0.0 && line.slope.is_finite() {
            (1.0 / line.slope).min(u64::MAX as f64) as u64
        } else {
            u64::MAX
        };
        *l = (*l).max(h.saturating_sub(reach));
    }
    let seps = crate::model::GapArray::encode_bounded(&lo, &hi)?;
    drop(lo);
    let entry_keys: Vec<u64> = seps.iter().collect();
    // A separator's upper bound is its segment's first key.
    let first_key = |i: usize| {
        hi.get(seg_starts.partition_point(|&s| s < i))
            .copied()
            .unwrap_or(0)
    };
    let (entries, starts) = band_entries(
        keys.len(),
        &lines,
        &first_key,
        Some(&entry_keys),
        tol.granule,
        tol.zero_page,
    )?;
    drop((lines, entry_keys, hi, seg_starts));
    // With zero intervals the page budget usually leaves room: intercepts
    // rounded to whole units (a few positions) cost a few bits less each and
    // move predictions by at most half a unit. Keep the coarsest rounding
    // whose measured pages stay within the budget (else none).
    let (off_unit, band, entries, extra) = if tol.zero_page > 0 && budget.is_finite() {
        let page = tol.zero_page;
        let reach = window_reach(tol.eps, page);
        let mut chosen = None;
        for unit in OFF_UNITS {
            // A rounding over the budget is not kept: its count stops there.
            let rounded = rounded_band_within(keys, &starts, &entries, unit, tol, reach, budget)?;
            if let Some((q, b, extra)) = rounded
                && extra <= budget + 1e-12
            {
                chosen = Some((unit, b, q, Some(extra)));
                break;
            }
        }
        match chosen {
            Some(c) => c,
            None => match measured_band_within(keys, &starts, &entries, page, page, reach, limit)? {
                Some((b, extra)) => (1, b, entries, Some(extra)),
                None => return Ok(None),
            },
        }
    } else {
        let b = band_of_entries_in(keys, &starts, &entries, tol.granule, tol.zero_page)?;
        (1, b, entries, None)
    };
    let LayerKind::Band {
        granule,
        zero_page,
        eps_lo,
        eps_hi,
    } = band.kind
    else {
        return Err(Error::invalid("band layer expected"));
    };
    let cpr = CprBand::from_parts(seps, &entries, tol.zero_page.max(1), tol.zero_page / 2, off_unit)?;
    let blob = blob_layer(
        LayerKind::CprBand {
            granule,
            zero_page,
            eps_lo,
            eps_hi,
        },
        cpr.to_bytes(),
    );
    Ok(Some((band, blob, extra)))
}

/// Key `i` for `i` a segment's start: its first key.
pub(crate) fn first_key_of(segs: &[crate::model::Segment], i: usize) -> u64 {
    segs.get(segs.partition_point(|s| s.start < i))
        .map_or(0, |s| s.first_key)
}

/// Errors a zero-interval band is expected to stay within (window plus a
/// page, twice, and some): [`measured_band`] counts pages in one pass for
/// bands that do.
pub(super) fn window_reach(eps: u64, page: u64) -> u64 {
    eps.saturating_add(page).saturating_mul(2).saturating_add(64)
}

/// Fractions of a feasible range tried by [`page_aware_line`].
const LINE_GRID: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];

/// `v.div_euclid(page)` for a run of mostly increasing values, without a
/// division per value: the page last found is kept and stepped forward by
/// one; anything else divides. Exact for any order of values.
struct PageDiv {
    page: i64,
    q: i64,
    start: i64,
}

impl PageDiv {
    fn new(page: u64) -> PageDiv {
        let page = i64::try_from(page.max(1)).unwrap_or(i64::MAX);
        PageDiv { page, q: 0, start: 0 }
    }

    fn div(&mut self, v: i64) -> i64 {
        match v.checked_sub(self.start) {
            Some(d) if (0..self.page).contains(&d) => {}
            Some(d) if d >= self.page && d - self.page < self.page => {
                self.q += 1;
                self.start += self.page;
            }
            _ => {
                self.q = v.div_euclid(self.page);
                self.start = self.q * self.page;
            }
        }
        self.q
    }

    /// The page size.
    fn page_u(&self) -> u64 {
        self.page as u64
    }

    /// `v / page` for `v` below `i64::MAX` (larger values divide).
    fn div_u(&mut self, v: u64) -> u64 {
        match i64::try_from(v) {
            Ok(v) => self.div(v) as u64,
            Err(_) => v / self.page as u64,
        }
    }
}

/// Extra pages the lookups of the keys `range` read with the line `(slope,
/// intercept)` anchored at `first`: the window `[p - eps, p + eps]` around a
/// prediction spans one page more for every page boundary inside it.
/// Counting stops once `limit` is reached (the count is then `>= limit`).
#[allow(clippy::too_many_arguments)]
fn crossings(
    keys: Win<'_>,
    range: std::ops::Range<usize>,
    first: u64,
    slope: f64,
    intercept: f64,
    eps: u64,
    page: u64,
    limit: u64,
) -> u64 {
    let mut c = Crossings::new(first, slope, intercept, eps, page, limit);
    keys.each(range, |_, chunk| c.add(chunk));
    c.extra
}

/// The count of [`crossings`], a chunk of keys at a time.
struct Crossings {
    first: u64,
    slope: f64,
    intercept: f64,
    eps: i64,
    at: PageDiv,
    page: i64,
    whole: i64,
    part: i64,
    limit: u64,
    extra: u64,
    /// The branch-free block count's constants, when every value it meets
    /// is exact in `f64` (`eps`, `page` below 2^40).
    fast: Option<FastCount>,
}

/// Keys a block of [`Crossings`]' branch-free count takes before it checks
/// the limit.
const COUNT_BLOCK: usize = 256;

/// Predictions up to this magnitude are counted by [`FastCount`]: their
/// floors, `eps` and `page` are then integers `f64` holds exactly, and
/// rounding by adding and subtracting `1.5 · 2^52` is exact.
const FAST_RANGE: f64 = (1u64 << 50) as f64;

/// The constants of [`Crossings`]' branch-free count of a block: the same
/// count as [`Crossings::count`] per key, in `f64` arithmetic without a
/// branch or a division, so that it runs in vector lanes.
#[derive(Clone, Copy)]
struct FastCount {
    eps: f64,
    page: f64,
    inv_page: f64,
    threshold: f64,
}

/// `a.rem_euclid(page)` of an integer `a`, `|a| < 2^51`, `page >= 1`
/// below 2^40 with `inv_page = 1 / page`, without a division: `q`, `a /
/// page` rounded to the nearest integer, is the floor of `a / page` or one
/// more (the product is off by far less than half), so `a - q · page` is
/// the remainder or the remainder less `page` (all integers below 2^53).
#[inline(always)]
fn mod_lane(a: f64, page: f64, inv_page: f64) -> f64 {
    let q = round_lane(a * inv_page);
    let r = a - q * page;
    if r < 0.0 { r + page } else { r }
}

/// `a.div_euclid(page)` of an integer `a`, as [`mod_lane`] finds it.
#[inline(always)]
fn div_lane(a: f64, page: f64, inv_page: f64) -> f64 {
    let q = round_lane(a * inv_page);
    q - if a - q * page < 0.0 { 1.0 } else { 0.0 }
}

impl FastCount {
    /// Keys whose window `[p - eps, p + eps]` crosses one boundary more than
    /// `whole`: `r = (floor(p) - eps) mod page` at least `page - part`, for
    /// `p = intercept + m` over `ms`. Every `|p|` must lie below
    /// [`FAST_RANGE`] ([`floor_lane`], [`mod_lane`]); `None` if a
    /// prediction lies out of that range (or is NaN).
    #[inline(always)]
    fn hits(self, intercept: f64, ms: impl Iterator<Item = f64>) -> Option<u64> {
        let mut hits = 0u64;
        let mut inside = true;
        for m in ms {
            let p = intercept + m;
            inside &= p.abs() < FAST_RANGE;
            let r = mod_lane(floor_lane(p) - self.eps, self.page, self.inv_page);
            hits += u64::from(r >= self.threshold);
        }
        inside.then_some(hits)
    }

    /// [`FastCount::hits`] of `block`'s predictions `intercept + m(x)`, in
    /// AVX2's four lanes where the processor has them.
    fn block_hits<T: Copy>(self, intercept: f64, block: &[T], m: impl Fn(T) -> f64 + Copy) -> Option<u64> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2 (checked just above).
            return unsafe { self.hits_avx2(intercept, block, m) };
        }
        self.hits(intercept, block.iter().map(|&x| m(x)))
    }

    /// [`FastCount::hits`] compiled for AVX2 (the same arithmetic: no
    /// operation is fused or reordered).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn hits_avx2<T: Copy>(self, intercept: f64, block: &[T], m: impl Fn(T) -> f64 + Copy) -> Option<u64> {
        self.hits(intercept, block.iter().map(|&x| m(x)))
    }
}

/// `2^52`: `(v + TWO_52).to_bits() - TWO_52.to_bits()` is the integer `v`,
/// `0 <= v < 2^52`, as a `u64` (a vector lane has no such conversion).
const TWO_52: f64 = 4_503_599_627_370_496.0;

/// Keys [`rounding_rank`] counts in lanes between two checks of its rank.
const RANK_BLOCK: usize = 256;

/// [`rounding_rank`]'s count of a block of keys in `f64` lanes
/// ([`super::entries::LanePredictor`], [`div_lane`], [`mod_lane`]): every
/// value is an integer below 2^51, exact. The window `[p - eps, p + eps]`
/// of a prediction `p >= eps` spans `whole` extra pages, one more if `(p -
/// eps) mod page >= threshold` ([`Crossings`]).
#[derive(Clone, Copy)]
struct RankLanes {
    pred: super::entries::LanePredictor,
    page: f64,
    inv_page: f64,
    eps: f64,
    cap: f64,
    whole: u64,
    threshold: f64,
}

impl RankLanes {
    /// Lanes for `e` with windows of `eps` around zero intervals of `page`
    /// positions and a cap of `cap` on the error, if their values fit.
    fn new(e: &super::entries::Predictor, page: u64, eps: u64, cap: u64) -> Option<RankLanes> {
        let pred = e.lanes()?;
        let fits = (1..1 << 40).contains(&page) && eps < 1 << 40 && cap < 1 << 50;
        fits.then(|| RankLanes {
            pred,
            page: page as f64,
            inv_page: 1.0 / page as f64,
            eps: eps as f64,
            cap: cap as f64,
            whole: 2 * eps / page,
            threshold: (page - 2 * eps % page) as f64,
        })
    }

    /// Whether a prediction of the keys `keys` (positions from `i0` on)
    /// lies more than `cap` from its key's page, and their extra pages,
    /// their predictions left in `out`; `None` if a key does not fit the
    /// lanes (or is predicted below `eps`).
    #[inline(always)]
    fn block(self, keys: &[u64], i0: usize, out: &mut [u64]) -> Option<(bool, u64)> {
        let (mut fits, mut over, mut hits) = (i0 < 1 << 50, false, 0u64);
        let (page, inv) = (self.page, self.inv_page);
        let i0 = i0 as f64;
        for (d, (&k, o)) in keys.iter().zip(out.iter_mut()).enumerate() {
            let (p, exact) = self.pred.predict(k);
            fits &= exact & (p >= self.eps);
            let first = div_lane(i0 + d as f64, page, inv) * page;
            over |= (first - p > self.cap) | (p - (first + page - 1.0) > self.cap);
            hits += u64::from(mod_lane(p - self.eps, page, inv) >= self.threshold);
            *o = (p + TWO_52).to_bits().wrapping_sub(TWO_52.to_bits());
        }
        fits.then_some((over, self.whole * keys.len() as u64 + hits))
    }

    /// [`RankLanes::block`], in AVX2's four lanes where the processor has
    /// them.
    fn block_dispatched(self, keys: &[u64], i0: usize, out: &mut [u64]) -> Option<(bool, u64)> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2 (checked just above).
            return unsafe { self.block_avx2(keys, i0, out) };
        }
        self.block(keys, i0, out)
    }

    /// [`RankLanes::block`] compiled for AVX2 (the same arithmetic).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn block_avx2(self, keys: &[u64], i0: usize, out: &mut [u64]) -> Option<(bool, u64)> {
        self.block(keys, i0, out)
    }
}

impl Crossings {
    fn new(first: u64, slope: f64, intercept: f64, eps: u64, page: u64, limit: u64) -> Self {
        let eps = i64::try_from(eps).unwrap_or(i64::MAX / 4);
        // The window's last page minus its first: with `r = (p - eps) mod
        // page`, `(r + 2 eps) / page`, i.e. `whole` plus one when `r + part
        // >= page`.
        let page_i = i64::try_from(page.max(1)).unwrap_or(i64::MAX);
        let two = eps.saturating_mul(2);
        Crossings {
            first,
            slope,
            intercept,
            eps,
            at: PageDiv::new(page),
            page: page_i,
            whole: two / page_i,
            part: two % page_i,
            limit,
            extra: 0,
            fast: (eps < 1 << 40 && page_i < 1 << 40).then(|| FastCount {
                eps: eps as f64,
                page: page_i as f64,
                inv_page: 1.0 / page_i as f64,
                threshold: (page_i - two % page_i) as f64,
            }),
        }
    }

    /// Counts the keys of `items` by their predictions `intercept + m(x)`,
    /// a block at a time with [`FastCount`] (a block with a prediction out
    /// of its range key by key); whether the count is still below the limit.
    fn add_blocks<T: Copy>(&mut self, items: &[T], m: impl Fn(T) -> f64 + Copy) -> bool {
        let whole = self.whole as u64;
        for block in items.chunks(COUNT_BLOCK) {
            match self.fast.and_then(|f| f.block_hits(self.intercept, block, m)) {
                Some(hits) => {
                    self.extra = self
                        .extra
                        .saturating_add(whole.saturating_mul(block.len() as u64))
                        .saturating_add(hits);
                    if self.extra >= self.limit {
                        return false;
                    }
                }
                None => {
                    for &x in block {
                        if !self.count(self.intercept + m(x)) {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    /// Counts one key by its prediction; whether the count is still below
    /// the limit.
    #[inline]
    fn count(&mut self, prediction: f64) -> bool {
        let a = floor_i64(prediction).saturating_sub(self.eps);
        let r = a - self.at.div(a) * self.page;
        self.extra += (self.whole + i64::from(r >= self.page - self.part)) as u64;
        self.extra < self.limit
    }

    /// Counts the keys of `chunk` (the next ones); whether the count is
    /// still below the limit.
    fn add(&mut self, chunk: &[u64]) -> bool {
        let (first, slope) = (self.first, self.slope);
        self.add_blocks(chunk, move |k: u64| slope * k.saturating_sub(first) as f64)
    }

    /// [`Crossings::add`] of keys given by their `slope * (key - first)`
    /// (the same count: the prediction is the same sum).
    fn add_offsets(&mut self, offsets: &[f64]) {
        self.add_blocks(offsets, |m| m);
    }
}

/// Keys of a segment whose offsets [`page_aware_line`] computes once for a
/// slope's intercepts (8 B each, at most 512 KiB).
const OFFSETS_MAX: usize = 1 << 16;

/// `v.floor() as i64` without a call to `floor` (the float-to-int cast
/// truncates and saturates; one less below a fractional negative value).
fn floor_i64(v: f64) -> i64 {
    let t = v as i64;
    if (t as f64) > v { t.saturating_sub(1) } else { t }
}

/// A line of a zero-interval segment whose search windows cross few page
/// boundaries.
///
/// A maximal zero-interval segment's feasible lines hug the edges of its
/// keys' pages, and clustered keys then get predictions within `eps` of a
/// page boundary, where the window `[p - eps, p + eps]` spans two pages. Any
/// feasible line keeps the guarantee, so when the middle line reads more than
/// `budget` extra pages per key, this tries a small grid of feasible slopes
/// (`slopes`, each with its feasible intercepts when already known) and
/// intercepts and keeps the line with the fewest crossings.
fn page_aware_line(
    keys: Win<'_>,
    seg: &crate::model::Segment,
    tol: Tolerance,
    slopes: &[(f64, Option<(f64, f64)>)],
    budget: f64,
) -> SegmentLine {
    let middle = middle_line(seg);
    let cost = middle_cost(keys, seg, tol);
    if cost as f64 <= budget * seg.len as f64 {
        return middle;
    }
    better_line(keys, seg, tol, slopes, cost).unwrap_or(middle)
}

/// A segment's own line (the middle of its feasible ones).
fn middle_line(seg: &crate::model::Segment) -> SegmentLine {
    SegmentLine {
        start: seg.start,
        slope: seg.slope,
        intercept: seg.intercept,
    }
}

/// The crossings of a segment's own line ([`page_aware_line`]'s middle
/// line), counted whole.
fn middle_cost(keys: Win<'_>, seg: &crate::model::Segment, tol: Tolerance) -> u64 {
    crossings(
        keys,
        seg.start..seg.end(),
        seg.first_key,
        seg.slope,
        seg.intercept,
        tol.eps,
        tol.zero_page.max(1),
        u64::MAX,
    )
}

/// [`page_aware_line`]'s search after the middle line, which crosses
/// `middle_cost` page boundaries: the line of the grid with the fewest
/// crossings, if one has fewer than the middle line (the first such in
/// the grid's order). It does not depend on the budget, only whether the
/// search is made does.
fn better_line(
    keys: Win<'_>,
    seg: &crate::model::Segment,
    tol: Tolerance,
    slopes: &[(f64, Option<(f64, f64)>)],
    middle_cost: u64,
) -> Option<SegmentLine> {
    let page = tol.zero_page.max(1);
    let mut best = None;
    let mut best_cost = middle_cost;
    let range = seg.start..seg.end();
    let Some(held) = keys.held(range.clone()) else {
        return lines_in_passes(keys, seg, tol, slopes, best_cost);
    };
    // `slope * (key - first)` of every key, computed once for a slope's
    // intercepts (the same f64 each count would compute), for a segment of
    // at most `OFFSETS_MAX` keys.
    let mut offsets: Vec<f64> = Vec::new();
    for &(slope, known) in slopes {
        if !slope.is_finite() || slope < 0.0 {
            continue;
        }
        let Some((lo, hi)) = known.or_else(|| tol.intercepts(keys, range.clone(), seg.first_key, slope))
        else {
            continue;
        };
        offsets.clear();
        if held.len() <= OFFSETS_MAX {
            offsets.extend(
                held.iter()
                    .map(|&k| slope * k.saturating_sub(seg.first_key) as f64),
            );
        }
        for f in LINE_GRID {
            let c = lo + f * (hi - lo);
            // Only a line with fewer crossings than the best is kept: stop
            // counting at the best's.
            let cost = if offsets.is_empty() {
                crossings(
                    keys,
                    range.clone(),
                    seg.first_key,
                    slope,
                    c,
                    tol.eps,
                    page,
                    best_cost,
                )
            } else {
                let mut count = Crossings::new(seg.first_key, slope, c, tol.eps, page, best_cost);
                count.add_offsets(&offsets);
                count.extra
            };
            if cost < best_cost {
                best_cost = cost;
                best = Some(SegmentLine {
                    start: seg.start,
                    slope,
                    intercept: c,
                });
                if best_cost == 0 {
                    return best;
                }
            }
        }
    }
    best
}

/// [`better_line`] (after a middle line with `best_cost` crossings) over a segment longer than a window, whose keys
/// are read in passes: the feasible intercepts of every slope in one pass
/// and the crossings of every line of the grid in another, instead of a pass
/// for each. The same line as the search one line at a time: each count
/// stops at the middle line's (a line is kept only with fewer crossings than
/// the best, which never exceeds it), and the lines are taken in the same
/// order, each kept if it has fewer crossings than the best so far.
fn lines_in_passes(
    keys: Win<'_>,
    seg: &crate::model::Segment,
    tol: Tolerance,
    slopes: &[(f64, Option<(f64, f64)>)],
    mut best_cost: u64,
) -> Option<SegmentLine> {
    let mut best = None;
    let page = tol.zero_page.max(1);
    let range = seg.start..seg.end();
    let usable = || slopes.iter().filter(|(s, _)| s.is_finite() && *s >= 0.0);
    let mut unknown: Vec<crate::model::InterceptRange> = usable()
        .filter(|(_, known)| known.is_none())
        .map(|&(slope, _)| crate::model::InterceptRange::new(seg.first_key, slope))
        .collect();
    if !unknown.is_empty() {
        tol.intercepts_of(keys, range.clone(), &mut unknown);
    }
    let mut found = unknown.into_iter().map(|r| r.finish());
    let lines: Vec<(f64, f64)> = usable()
        .filter_map(|&(slope, known)| {
            let r = match known {
                Some(r) => Some(r),
                None => found.next().flatten(),
            };
            r.map(|r| (slope, r))
        })
        .flat_map(|(slope, (lo, hi))| LINE_GRID.iter().map(move |f| (slope, lo + f * (hi - lo))))
        .collect();
    let mut counts: Vec<Crossings> = lines
        .iter()
        .map(|&(slope, c)| Crossings::new(seg.first_key, slope, c, tol.eps, page, best_cost))
        .collect();
    keys.each(range, |_, chunk| {
        let mut open = false;
        for c in counts.iter_mut().filter(|c| c.extra < c.limit) {
            open |= c.add(chunk);
        }
        open
    });
    for (&(slope, intercept), count) in lines.iter().zip(&counts) {
        if count.extra < best_cost {
            best_cost = count.extra;
            best = Some(SegmentLine {
                start: seg.start,
                slope,
                intercept,
            });
            if best_cost == 0 {
                break;
            }
        }
    }
    best
}

/// Candidate slopes of a segment: a grid over its feasible slope range.
fn slope_grid(seg: &crate::model::Segment) -> Vec<(f64, Option<(f64, f64)>)> {
    if seg.slope_lo.is_finite() && seg.slope_hi.is_finite() {
        [0.25, 0.5, 0.75]
            .iter()
            .map(|f| (seg.slope_lo + f * (seg.slope_hi - seg.slope_lo), None))
            .collect()
    } else {
        vec![(seg.slope, None)]
    }
}

/// Lines for zero-interval segments (`segs`, starts absolute in `keys`,
/// built with window `eps` around pages of `page` positions) whose search
/// windows cross few page boundaries: each segment keeps its middle line
/// unless that reads more than `budget` extra pages per key, in which case
/// the feasible line with the fewest crossings on a small grid of slopes and
/// intercepts is used. Any returned line keeps the zero-interval guarantee.
/// (The tests' reference for [`page_aware_lines_over`].)
#[cfg(test)]
fn page_aware_lines(
    keys: &[u64],
    segs: &[crate::model::Segment],
    eps: u64,
    page: u64,
    budget: f64,
) -> Vec<SegmentLine> {
    use rayon::prelude::*;
    let tol = Tolerance::items(eps, page);
    segs.par_iter()
        .map(|s| page_aware_line(Win::all(keys), s, tol, &slope_grid(s), budget))
        .collect()
}

/// [`page_aware_lines`] over keys in memory or in a data run, a window of
/// segments at a time (AirTune's zero-interval band over a data run).
#[cfg(test)]
pub(crate) fn page_aware_lines_over(
    keys: Keys<'_>,
    segs: &[crate::model::Segment],
    eps: u64,
    page: u64,
    budget: f64,
) -> Result<Vec<SegmentLine>> {
    let tol = Tolerance::items(eps, page);
    page_aware_lines_in(keys, segs, tol, budget)
}

/// [`page_aware_lines`] over keys in memory or in a data run, a window of
/// segments at a time.
fn page_aware_lines_in(
    keys: Keys<'_>,
    segs: &[crate::model::Segment],
    tol: Tolerance,
    budget: f64,
) -> Result<Vec<SegmentLine>> {
    let starts: Vec<usize> = segs.iter().map(|s| s.start).collect();
    let groups = keys.by_groups(&starts, |win, js| {
        segs.get(js)
            .unwrap_or_default()
            .iter()
            .map(|s| page_aware_line(win, s, tol, &slope_grid(s), budget))
            .collect::<Vec<_>>()
    })?;
    Ok(groups.into_iter().flatten().collect())
}

/// A compressed band layer (CprLeCo_PGM_D, Zhang G4) over `keys` from a
/// segmentation `segs` (starts absolute) made with error `eps` and, when
/// `zero_page > 0`, zero intervals of that many positions: slopes shared,
/// intercepts re-fitted, rough separators as keys, errors measured with the
/// query arithmetic. `budget` is the extra pages per key a zero-interval
/// line may cause before other feasible lines are tried. One blob layer.
pub(crate) fn compressed_band(
    keys: Keys<'_>,
    segs: &Segs,
    eps: u64,
    zero_page: u64,
    budget: f64,
) -> Result<LayerBuild> {
    let tol = Tolerance::items(eps, zero_page);
    cpr_band(keys, segs, tol, budget, f64::INFINITY)?
        .map(|(_, blob, _)| blob)
        .ok_or_else(|| Error::invalid("a band built without a limit stopped"))
}

/// Mean extra pages (beyond the first) a lookup of a present key reads with
/// a band layer over `keys` — measured with the query path's own arithmetic.
pub(super) fn extra_pages(keys: Keys<'_>, band: &LayerBuild, page: u64) -> Result<f64> {
    let LayerKind::Band {
        granule,
        zero_page,
        eps_lo,
        eps_hi,
    } = band.kind
    else {
        return Ok(f64::INFINITY);
    };
    let n = keys.len() as u64;
    let entries: Vec<super::entries::BandEntry> = band.flat.chunks_exact(24).map(band_entry).collect();
    let max_unit = n.div_ceil(granule.max(1));
    // Chunks of keys in parallel, each starting at the entry that covers its
    // first key (the last one whose key is <= it, or the first); an integer
    // sum, so the same whatever the threads.
    let count = |chunk: &[u64]| {
        let Some(&first) = chunk.first() else { return 0 };
        let mut j = entries.partition_point(|e| e.key <= first).saturating_sub(1);
        let mut extra = 0u64;
        // `band_range` and the page arithmetic with the divisions by
        // pages stepped (predictions mostly increase).
        let (mut z_lo, mut z_hi) = (PageDiv::new(zero_page), PageDiv::new(zero_page));
        let (mut p_lo, mut p_hi) = (PageDiv::new(page), PageDiv::new(page));
        let predictor = |j: usize| {
            let next = entries.get(j + 1).map_or(max_unit, |f| f.base);
            entries.get(j).map(|e| e.predictor(next, max_unit))
        };
        let mut e = predictor(j);
        for &k in chunk {
            if entries.get(j + 1).is_some_and(|e| e.key <= k) {
                while entries.get(j + 1).is_some_and(|e| e.key <= k) {
                    j += 1;
                }
                e = predictor(j);
            }
            let Some(e) = e else { break };
            let p = e.predict(k);
            let mut lo = p.saturating_sub(eps_lo).saturating_mul(granule);
            let mut hi = p.saturating_add(eps_hi).saturating_add(1).saturating_mul(granule);
            if zero_page > 0 {
                let (first, last) = (z_lo.div_u(lo), z_hi.div_u(hi.saturating_sub(1)));
                lo = first * zero_page;
                hi = last.saturating_add(1).saturating_mul(zero_page);
            }
            let lo = lo.min(n);
            let hi = hi.min(n).max(lo);
            if hi > lo {
                extra += p_hi.div_u(hi - 1) - p_lo.div_u(lo);
            }
        }
        extra
    };
    let parts = keys.map_parts(1 << 16, |range| {
        let mut extra = 0u64;
        keys.for_each_chunk(range, |_, chunk| {
            extra += count(chunk);
            Ok(())
        })?;
        Ok(extra)
    })?;
    let extra: u64 = parts.into_iter().sum();
    Ok(extra as f64 / n.max(1) as f64)
}

/// What one pass over a band's keys measures: its error bounds (as
/// [`band_of_entries_in`] measures them) and what [`extra_pages`] needs to
/// count the pages of every search window once those bounds are known.
///
/// A window `[p - eps_lo, p + eps_hi]` (whole pages of `page` positions with
/// zero intervals of a page, positions without) away from both ends of the
/// keys spans `(r + eps_hi) div page - (r - eps_lo) div page` extra pages,
/// `r = p mod page`: a histogram of `r` gives them all. Predictions within
/// `reach` of either end are kept as they are and counted exactly.
pub(super) struct Tally {
    /// Largest error below and above (`eps_lo`, `eps_hi`).
    lo: u64,
    hi: u64,
    /// Predictions at least `reach` from both ends, by `p mod page`.
    hist: Vec<u64>,
    /// Predictions nearer an end.
    ends: Vec<u64>,
    /// Whether `hist` and `ends` hold every key's prediction, routed as
    /// [`extra_pages`] routes it (else that count is made separately).
    whole: bool,
}

impl Tally {
    fn new(page: u64) -> Tally {
        Tally {
            lo: 0,
            hi: 0,
            hist: vec![0; usize::try_from(page).unwrap_or(0)],
            ends: Vec::new(),
            whole: true,
        }
    }

    /// Key `y` (item position) predicted at `p`, with zero intervals of
    /// `zero_page` positions (`own` steps `y` through them) or none; `at`
    /// steps `p` through pages; predictions below `reach` or above
    /// `far_end` are kept.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn add(
        &mut self,
        y: u64,
        p: u64,
        zero_page: u64,
        own: &mut PageDiv,
        at: &mut PageDiv,
        reach: u64,
        far_end: u64,
    ) {
        if zero_page > 0 {
            let page_start = own.div_u(y) * zero_page;
            self.hi = self.hi.max(page_start.saturating_sub(p));
            self.lo = self.lo.max(p.saturating_sub(page_start + zero_page - 1));
        } else {
            self.hi = self.hi.max(y.saturating_sub(p));
            self.lo = self.lo.max(p.saturating_sub(y));
        }
        if p >= reach && p <= far_end {
            let r = p - at.div_u(p) * at.page_u();
            if let Some(h) = self.hist.get_mut(r as usize) {
                *h += 1;
            }
        } else if self.ends.len() < MAX_ENDS {
            self.ends.push(p);
        } else {
            self.whole = false;
        }
    }

    /// The band layer of `entries` over `keys` with the measured bounds, and
    /// its extra pages per lookup (`extra_pages`'s count, from the tally when
    /// it holds every key and the bounds are within `reach`).
    fn finish(
        self,
        keys: Keys<'_>,
        entries: &[super::entries::BandEntry],
        zero_page: u64,
        page: u64,
        reach: u64,
    ) -> Result<(LayerBuild, f64)> {
        let n = keys.len() as u64;
        let band = self.layer(n, entries, zero_page);
        match self.counted(n, zero_page, page, reach) {
            Some(extra) => Ok((band, extra)),
            None => {
                let extra = extra_pages(keys, &band, page)?;
                Ok((band, extra))
            }
        }
    }

    /// The band layer of `entries` over `n` keys with the measured bounds.
    fn layer(&self, n: u64, entries: &[super::entries::BandEntry], zero_page: u64) -> LayerBuild {
        let mut flat = Vec::with_capacity(entries.len() * 24);
        for e in entries {
            e.write(&mut flat);
        }
        LayerBuild {
            kind: LayerKind::Band {
                granule: 1,
                zero_page,
                eps_lo: self.lo,
                eps_hi: self.hi,
            },
            flat,
            last_successor: n,
        }
    }

    /// The extra pages per lookup of `n` keys from the tally, if it holds
    /// every key and the bounds are within `reach` (else `None`: count them
    /// with [`extra_pages`]).
    fn counted(&self, n: u64, zero_page: u64, page: u64, reach: u64) -> Option<f64> {
        if !self.whole || self.lo > reach || self.hi > reach {
            return None;
        }
        let mut extra = self.hist_pages(page);
        for &q in &self.ends {
            let (lo, hi) = super::layer::band_range(q, self.lo, self.hi, 1, zero_page, n);
            if hi > lo {
                extra += (hi - 1) / page - lo / page;
            }
        }
        Some(extra as f64 / n.max(1) as f64)
    }

    /// The extra pages of the predictions in the histogram, with the
    /// bounds as they stand.
    fn hist_pages(&self, page: u64) -> u64 {
        let (el, eh) = (self.lo as i64, self.hi as i64);
        let p = page as i64;
        self.hist
            .iter()
            .enumerate()
            .map(|(r, &c)| {
                let r = r as i64;
                c * ((r + eh).div_euclid(p) - (r - el).div_euclid(p)) as u64
            })
            .sum()
    }

    /// A lower bound on the extra pages ([`extra_pages`]'s count, not per
    /// key) of the finished band, from the keys tallied so far, while the
    /// tally is whole and its bounds within `reach`: each histogram entry
    /// is a key routed to the entry that predicted it, at least `reach` from
    /// both ends; its window `[p - lo, p + hi]` lies inside the keys and
    /// can only widen as the bounds grow (the finished band's window holds
    /// it, clipped to the keys or not), and the ends add pages, never
    /// remove any.
    fn lower_bound(&self, page: u64, reach: u64) -> Option<u64> {
        (self.whole && self.lo <= reach && self.hi <= reach).then(|| self.hist_pages(page))
    }

    fn merge(mut self, other: Tally) -> Tally {
        self.lo = self.lo.max(other.lo);
        self.hi = self.hi.max(other.hi);
        for (a, b) in self.hist.iter_mut().zip(&other.hist) {
            *a += b;
        }
        self.ends.extend(other.ends);
        self.whole &= other.whole;
        self
    }
}

/// Predictions a part of a measuring pass keeps near the ends before it
/// gives up on the histogram (a band predicting far off its keys).
const MAX_ENDS: usize = 1 << 16;

/// Stops the parts of a measuring pass once the extra pages they have
/// counted ([`Tally::lower_bound`], added up) prove the band reads more than
/// `limit` extra pages per lookup: a band that does not fit its budget
/// need not be measured whole. The proof is exact, so the pass reaches the
/// same verdict it would have reached at its end.
struct Stop {
    n: u64,
    limit: f64,
    spent: std::sync::atomic::AtomicU64,
}

/// Keys a part of a measuring pass tallies between two reports to its
/// [`Stop`].
const STOP_EVERY: usize = if cfg!(test) { 64 } else { 1 << 14 };

impl Stop {
    fn new(n: u64, limit: f64) -> Stop {
        Stop {
            n,
            limit,
            spent: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Whether what has been counted already exceeds the limit (never with
    /// an infinite limit).
    fn over(&self) -> bool {
        let spent = self.spent.load(std::sync::atomic::Ordering::Relaxed);
        spent as f64 / self.n.max(1) as f64 > self.limit + 1e-12
    }

    /// Reports a part's tally (`told`: its lower bound reported before),
    /// and whether the pass is over the limit.
    fn report(&self, t: &Tally, page: u64, reach: u64, told: &mut u64) -> bool {
        if self.limit.is_finite()
            && let Some(lb) = t.lower_bound(page, reach)
        {
            let more = lb.saturating_sub(*told);
            self.spent.fetch_add(more, std::sync::atomic::Ordering::Relaxed);
            *told = (*told).max(lb);
        }
        self.over()
    }
}

/// [`measured_band`]'s tally of a band without zero intervals whose entries
/// are its segments' (keyed at their first keys, item predictions), folded
/// segment by segment in the segmentation pass
/// ([`super::segment::optimal_segments_folded`]): plain PGM's measured
/// pages, the zero-interval kinds' budget, without a pass of their own.
///
/// The far end of the keys (predictions past `n - 1 - reach` are counted
/// exactly, not by the histogram) is unknown while a run is being written:
/// every prediction from `reach` on goes to the histogram, the last
/// [`TAIL`] of them are kept, and once `n` is known those past the far end
/// move from the histogram to the ends ([`TallyAcc::into_tally`]). If an
/// earlier one lies past it too (a band off by more than the tail), the
/// tally is not whole and the pages are counted in a pass of their own.
struct TallyFold {
    page: u64,
    reach: u64,
    /// Where the pass's extra pages per key so far are published (as `f64`
    /// bits; NaN before the first report) for work that guesses the budget
    /// ([`ahead::Ahead`]: a guess only spares work, it decides nothing).
    guess: Guess,
}

/// An `f64` shared between threads: a [`TallyFold`]'s running figure.
#[derive(Clone)]
struct Guess(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Default for Guess {
    fn default() -> Self {
        Guess(std::sync::Arc::new(std::sync::atomic::AtomicU64::new(
            f64::NAN.to_bits(),
        )))
    }
}

impl Guess {
    fn set(&self, v: f64) {
        self.0.store(v.to_bits(), std::sync::atomic::Ordering::Relaxed);
    }

    /// The figure, if one was published.
    fn get(&self) -> Option<f64> {
        let v = f64::from_bits(self.0.load(std::sync::atomic::Ordering::Relaxed));
        (!v.is_nan()).then_some(v)
    }
}

/// Keys a [`TallyFold`] accumulator adds between two reports to its guess.
const GUESS_EVERY: u64 = 1 << 18;

/// Predictions a [`TallyFold`] keeps from the end of the keys (a few in
/// unit tests, so that bands off by more than the tail are met there).
const TAIL: usize = if cfg!(test) { 512 } else { 1 << 12 };

/// The last [`TAIL`] predictions of a [`TallyFold`], a ring once full.
#[derive(Default)]
struct Tail {
    buf: Vec<u64>,
    /// Once full: the oldest, the next to be replaced.
    next: usize,
}

impl Tail {
    /// Adds `p`; returns the oldest if it made room for it.
    #[inline]
    fn push(&mut self, p: u64) -> Option<u64> {
        if self.buf.len() < TAIL {
            self.buf.push(p);
            return None;
        }
        let old = self.buf.get_mut(self.next).map(|o| std::mem::replace(o, p));
        self.next = (self.next + 1) % TAIL;
        old
    }

    /// The predictions held, oldest first.
    fn in_order(self) -> impl DoubleEndedIterator<Item = u64> {
        let Tail { mut buf, next } = self;
        let oldest = next.min(buf.len());
        buf.rotate_left(oldest);
        buf.into_iter()
    }
}

/// What a [`TallyFold`] adds up.
struct TallyAcc {
    t: Tally,
    /// The last predictions that went to the histogram, in key order.
    tail: Tail,
    /// The largest of the others.
    gone: Option<u64>,
    /// Keys added, and how many when the guess is reported next.
    keys: u64,
    report_at: u64,
}

impl TallyAcc {
    /// Keeps prediction `p` in the tail (the oldest, if it makes room, to
    /// `gone`).
    #[inline]
    fn keep(&mut self, p: u64) {
        if let Some(old) = self.tail.push(p) {
            self.gone = self.gone.max(Some(old));
        }
    }

    /// The tally of `n` keys.
    fn into_tally(self, n: u64, reach: u64) -> Tally {
        let TallyAcc {
            mut t, tail, gone, ..
        } = self;
        let far_end = n.saturating_sub(1).saturating_sub(reach);
        if gone.is_some_and(|g| g > far_end) {
            t.whole = false;
        }
        let page = t.hist.len() as u64;
        for p in tail.in_order().filter(|&p| p > far_end) {
            if let Some(h) = p.checked_rem(page).and_then(|r| t.hist.get_mut(r as usize)) {
                *h = h.saturating_sub(1);
            }
            if t.ends.len() < MAX_ENDS {
                t.ends.push(p);
            } else {
                t.whole = false;
            }
        }
        t
    }
}

impl super::segment::SegmentFold for TallyFold {
    type Acc = TallyAcc;

    fn empty(&self) -> TallyAcc {
        TallyAcc {
            t: Tally::new(self.page),
            tail: Tail::default(),
            gone: None,
            keys: 0,
            report_at: GUESS_EVERY,
        }
    }

    fn add(&self, acc: &mut TallyAcc, seg: &crate::model::Segment, last: bool, first: usize, keys: &[u64]) {
        // As `band_entries` makes the entry, and `measured_band` predicts.
        let (max_unit, next) = if last {
            (seg.end() as u64, seg.end() as u64)
        } else {
            (u64::MAX, seg.end() as u64)
        };
        let line = middle_line(seg);
        let e =
            super::build::band_entry_of(&line, seg.first_key, None, 1, 0, max_unit).predictor(next, max_unit);
        let mut at = PageDiv::new(self.page);
        let mut own = PageDiv::new(0);
        for (d, &k) in keys.iter().enumerate() {
            let p = e.predict(k);
            // Every prediction from `reach` on to the histogram (the far end
            // is settled in `into_tally`).
            acc.t
                .add((first + d) as u64, p, 0, &mut own, &mut at, self.reach, u64::MAX);
            if p >= self.reach {
                acc.keep(p);
            }
        }
        acc.keys += keys.len() as u64;
        if acc.keys >= acc.report_at {
            acc.report_at = acc.keys + GUESS_EVERY;
            self.guess
                .set(acc.t.hist_pages(self.page) as f64 / acc.keys as f64);
        }
    }

    fn merge(&self, a: TallyAcc, b: TallyAcc) -> TallyAcc {
        // `a` covers the keys before `b`'s: `b`'s tail stays the tail.
        let TallyAcc {
            t,
            tail,
            gone,
            keys,
            report_at,
        } = a;
        let mut gone = gone.max(b.gone);
        let mut merged = Tail::default();
        let mut a_tail = tail.in_order();
        let b_tail: Vec<u64> = b.tail.in_order().collect();
        let room = TAIL.saturating_sub(b_tail.len());
        let mut kept: Vec<u64> = a_tail.by_ref().rev().take(room).collect();
        kept.reverse();
        gone = gone.max(a_tail.max());
        for p in kept.into_iter().chain(b_tail) {
            merged.push(p);
        }
        TallyAcc {
            t: t.merge(b.t),
            tail: merged,
            gone,
            keys: keys + b.keys,
            report_at: report_at.max(b.report_at),
        }
    }
}

/// A band layer of `entries` over `keys` (entry `j`'s keys start at
/// `starts[j]`) with its measured error bounds, and its mean extra pages per
/// lookup of a present key with pages of `page` positions: exactly
/// [`band_of_entries_in`] and [`extra_pages`] of it, in one pass over the keys
/// for item predictions with zero intervals of a page or none (in two for
/// anything else, or if the bounds come out wider than `reach`).
fn measured_band(
    keys: Keys<'_>,
    starts: &[usize],
    entries: &[super::entries::BandEntry],
    zero_page: u64,
    page: u64,
    reach: u64,
) -> Result<(LayerBuild, f64)> {
    measured_band_within(keys, starts, entries, zero_page, page, reach, f64::INFINITY)?
        .ok_or_else(|| Error::invalid("a band measured without a limit stopped"))
}

/// [`measured_band`], or `None` as soon as the keys counted prove the band
/// reads more than `limit` extra pages per lookup ([`Stop`]).
pub(super) fn measured_band_within(
    keys: Keys<'_>,
    starts: &[usize],
    entries: &[super::entries::BandEntry],
    zero_page: u64,
    page: u64,
    reach: u64,
    limit: f64,
) -> Result<Option<(LayerBuild, f64)>> {
    let separate = || -> Result<Option<(LayerBuild, f64)>> {
        let band = band_of_entries_in(keys, starts, entries, 1, zero_page)?;
        let extra = extra_pages(keys, &band, page)?;
        Ok(Some((band, extra)))
    };
    let n = keys.len() as u64;
    let used = starts.len().min(entries.len());
    let (starts, entries) = (
        starts.get(..used).unwrap_or_default(),
        entries.get(..used).unwrap_or_default(),
    );
    if !one_pass(starts, entries, zero_page, page) {
        return separate();
    }
    let stop = Stop::new(n, limit);
    let band = Measured {
        starts,
        entries,
        zero_page,
    };
    // A group of entries at a time (each entry's keys in order), in
    // parallel; the tallies add up the same whatever the groups.
    let tally = keys
        .by_groups(starts, |win, js| {
            let first = starts.get(js.start).copied().unwrap_or(n as usize);
            let end = starts.get(js.end).copied().unwrap_or(n as usize);
            // Parts after the limit is passed count nothing.
            if stop.over() {
                return Tally::new(page);
            }
            metered(&band, win, first..end, n, page, reach, &stop)
        })?
        .into_iter()
        .fold(Tally::new(page), Tally::merge);
    if stop.over() {
        return Ok(None);
    }
    tally.finish(keys, entries, zero_page, page, reach).map(Some)
}

/// The tally of the keys `range` of `win` (of `n`) as `band` predicts
/// them, reported to `stop` every [`STOP_EVERY`] keys; the count ends once
/// `stop` is over its limit.
fn metered(
    band: &Measured<'_>,
    win: Win<'_>,
    range: std::ops::Range<usize>,
    n: u64,
    page: u64,
    reach: u64,
    stop: &Stop,
) -> Tally {
    let far_end = n.saturating_sub(1).saturating_sub(reach);
    let mut m = Meter::at(band, range.start, n, page);
    let mut told = 0u64;
    win.each(range, |i, chunk| {
        let mut at = i;
        for part in chunk.chunks(STOP_EVERY) {
            m.add(at, part, reach, far_end);
            at += part.len();
            if stop.report(&m.t, page, reach, &mut told) {
                return false;
            }
        }
        true
    });
    stop.report(&m.t, page, reach, &mut told);
    m.t
}

/// [`page_aware_lines_in`] and then [`measured_band_within`] of the band of
/// its lines (zero intervals of `page` positions, item predictions), in one
/// pass over the keys instead of two: each window of segments gets its
/// lines, and their entries ([`band_entry_of`], which reads only the
/// segment's own line and start) are measured from the same window. A
/// [`Meter`] reads only a key's own entry and the next entry's key and
/// clamp floor, which follow from the next segment's first key and start
/// alone, so a window's meter is given its own entries and that one. The
/// same lines, layer and count as the two passes (or `None`, over the
/// limit, as they would stop); falls back to them where the measure would
/// not be made in one pass ([`one_pass`]).
fn lines_measured_within(
    keys: Keys<'_>,
    segs: &[crate::model::Segment],
    tol: Tolerance,
    budget: f64,
    reach: u64,
    limit: f64,
) -> Result<Option<(LayerBuild, f64)>> {
    let page = tol.zero_page;
    let n = keys.len();
    let separate = || -> Result<Option<(LayerBuild, f64)>> {
        let lines = page_aware_lines_in(keys, segs, tol, budget)?;
        let (entries, starts) = band_entries(n, &lines, &|i| first_key_of(segs, i), None, 1, page)?;
        measured_band_within(keys, &starts, &entries, page, page, reach, limit)
    };
    let starts: Vec<usize> = segs.iter().map(|s| s.start).collect();
    let increasing = !segs
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.first_key > b.first_key));
    let ends_inside = segs.last().is_none_or(|s| s.start < n);
    if tol.granule != 1
        || page == 0
        || page > 1 << 16
        || starts.first() != Some(&0)
        || !increasing
        || !ends_inside
    {
        return separate();
    }
    let max_unit = n as u64;
    let entry = |line: &SegmentLine, s: &crate::model::Segment| {
        super::build::band_entry_of(line, s.first_key, None, 1, page, max_unit)
    };
    let stop = Stop::new(max_unit, limit);
    let groups = keys.by_groups(&starts, |win, js| {
        let group = segs.get(js.clone()).unwrap_or_default();
        let lines: Vec<SegmentLine> = group
            .iter()
            .map(|s| page_aware_line(win, s, tol, &slope_grid(s), budget))
            .collect();
        if stop.over() {
            return (lines, Tally::new(page));
        }
        // The window's entries and the next segment's (its key and clamp
        // floor: its line is never used here).
        let mut entries: Vec<super::entries::BandEntry> =
            lines.iter().zip(group).map(|(l, s)| entry(l, s)).collect();
        let mut local: Vec<usize> = group.iter().map(|s| s.start).collect();
        if let Some(next) = segs.get(js.end) {
            entries.push(entry(&middle_line(next), next));
            local.push(next.start);
        }
        let band = Measured {
            starts: &local,
            entries: &entries,
            zero_page: page,
        };
        let first = local.first().copied().unwrap_or(n);
        let end = segs.get(js.end).map_or(n, |s| s.start);
        (
            lines,
            metered(&band, win, first..end, max_unit, page, reach, &stop),
        )
    })?;
    if stop.over() {
        return Ok(None);
    }
    let mut lines = Vec::with_capacity(segs.len());
    let mut tally = Tally::new(page);
    for (l, t) in groups {
        lines.extend(l);
        tally = tally.merge(t);
    }
    let (entries, _) = band_entries(n, &lines, &|i| first_key_of(segs, i), None, 1, page)?;
    tally.finish(keys, &entries, page, page, reach).map(Some)
}

/// Whether [`measured_band`] can measure `entries` in one pass.
fn one_pass(starts: &[usize], entries: &[super::entries::BandEntry], zero_page: u64, page: u64) -> bool {
    // Keys before the first start belong to no entry when measuring and to
    // the first when counting pages: only a band from the first key on is
    // measured in one pass; `extra_pages` finds entries by key: they must
    // be in order.
    (zero_page == 0 || zero_page == page)
        && page > 0
        && page <= 1 << 16
        && starts.first() == Some(&0)
        && !entries.windows(2).any(|w| matches!(w, [a, b] if a.key > b.key))
}

/// A band to measure: entry `j` covers the keys from `starts[j]` on, with
/// zero intervals of `zero_page` positions or none.
#[derive(Clone, Copy)]
pub(super) struct Measured<'a> {
    pub starts: &'a [usize],
    pub entries: &'a [super::entries::BandEntry],
    pub zero_page: u64,
}

/// The tally of a band measured in one pass ([`Tally`]), fed its keys in
/// order from any position on.
struct Meter<'a> {
    band: &'a Measured<'a>,
    /// The entry covering the next key, and its predictor.
    j: usize,
    predictor: Option<super::entries::Predictor>,
    max_unit: u64,
    own: PageDiv,
    at: PageDiv,
    t: Tally,
}

impl<'a> Meter<'a> {
    /// A meter whose first key is key `i` of `n` (the band's entries start
    /// at key 0: [`one_pass`]).
    fn at(band: &'a Measured<'a>, i: usize, n: u64, page: u64) -> Meter<'a> {
        Meter::with_tally(band, i, n, page, Tally::new(page))
    }

    /// [`Meter::at`] adding to the tally `t`.
    fn with_tally(band: &'a Measured<'a>, i: usize, n: u64, page: u64, t: Tally) -> Meter<'a> {
        let mut m = Meter {
            band,
            j: band.starts.partition_point(|&s| s <= i).saturating_sub(1),
            predictor: None,
            max_unit: n,
            own: PageDiv::new(band.zero_page),
            at: PageDiv::new(page),
            t,
        };
        m.predictor = m.predictor_of(m.j);
        m
    }

    fn predictor_of(&self, j: usize) -> Option<super::entries::Predictor> {
        let next = self.band.entries.get(j + 1).map_or(self.max_unit, |f| f.base);
        self.band.entries.get(j).map(|e| e.predictor(next, self.max_unit))
    }

    /// Keys `i..i + chunk.len()`, a run of keys of one entry at a time.
    #[inline]
    fn add(&mut self, i: usize, chunk: &[u64], reach: u64, far_end: u64) {
        let Measured {
            starts,
            entries,
            zero_page,
        } = *self.band;
        let (mut y, mut rest) = (i, chunk);
        while !rest.is_empty() {
            let mut next_start = starts.get(self.j + 1).copied().unwrap_or(usize::MAX);
            if y >= next_start {
                while starts.get(self.j + 1).is_some_and(|&s| s <= y) {
                    self.j += 1;
                }
                self.predictor = self.predictor_of(self.j);
                next_start = starts.get(self.j + 1).copied().unwrap_or(usize::MAX);
            }
            let (run, tail) = rest.split_at(rest.len().min(next_start - y));
            if let (Some(p), Some(e)) = (self.predictor, entries.get(self.j)) {
                // `extra_pages` routes by entry keys: the same entry, or the
                // count is made there.
                let lo_key = if self.j > 0 { e.key } else { 0 };
                let (has_next, next_key) = entries.get(self.j + 1).map_or((false, 0), |f| (true, f.key));
                let mut routed = true;
                for (d, &k) in run.iter().enumerate() {
                    routed &= (k >= lo_key) & (!has_next | (k < next_key));
                    self.t.add(
                        (y + d) as u64,
                        p.predict(k),
                        zero_page,
                        &mut self.own,
                        &mut self.at,
                        reach,
                        far_end,
                    );
                }
                self.t.whole &= routed;
            }
            y += run.len();
            rest = tail;
        }
    }
}

impl Measured<'_> {
    /// The entries that have a start (and the starts that have an entry).
    fn trimmed(&self) -> Measured<'_> {
        let used = self.starts.len().min(self.entries.len());
        Measured {
            starts: self.starts.get(..used).unwrap_or_default(),
            entries: self.entries.get(..used).unwrap_or_default(),
            zero_page: self.zero_page,
        }
    }
}

/// What [`measured_bands`] measured of one band: its tally, finished with
/// the band's entries when the layer is wanted, or (a band not measured in
/// one pass) the layer and its extra pages per lookup.
pub(super) enum BandMeasure {
    Tallied(Tally),
    Built(LayerBuild, f64),
}

impl BandMeasure {
    /// The band's extra pages per lookup (with pages of `page` positions),
    /// without laying the layer when the tally counts them.
    pub(super) fn extra(&self, keys: Keys<'_>, band: &Measured<'_>, page: u64, reach: u64) -> Result<f64> {
        let n = keys.len() as u64;
        match self {
            BandMeasure::Built(_, extra) => Ok(*extra),
            BandMeasure::Tallied(t) => match t.counted(n, band.zero_page, page, reach) {
                Some(extra) => Ok(extra),
                None => extra_pages(keys, &t.layer(n, band.trimmed().entries, band.zero_page), page),
            },
        }
    }

    /// The band layer and its extra pages per lookup: [`measured_band`]'s.
    pub(super) fn finish(
        self,
        keys: Keys<'_>,
        band: &Measured<'_>,
        page: u64,
        reach: u64,
    ) -> Result<(LayerBuild, f64)> {
        match self {
            BandMeasure::Built(layer, extra) => Ok((layer, extra)),
            BandMeasure::Tallied(t) => t.finish(keys, band.trimmed().entries, band.zero_page, page, reach),
        }
    }
}

/// [`measured_band`] of several bands over the same keys, to be finished
/// band by band ([`BandMeasure`]): in one pass over the keys when every
/// band can be measured in one ([`one_pass`]), else each in passes of its
/// own. The same bands and counts either way.
pub(super) fn measured_bands(
    keys: Keys<'_>,
    bands: &[Measured<'_>],
    page: u64,
    reach: u64,
) -> Result<Vec<BandMeasure>> {
    let trimmed: Vec<Measured<'_>> = bands.iter().map(Measured::trimmed).collect();
    if !trimmed
        .iter()
        .all(|b| one_pass(b.starts, b.entries, b.zero_page, page))
    {
        return trimmed
            .iter()
            .map(|b| {
                let (layer, extra) = measured_band(keys, b.starts, b.entries, b.zero_page, page, reach)?;
                Ok(BandMeasure::Built(layer, extra))
            })
            .collect();
    }
    let n = keys.len() as u64;
    let far_end = n.saturating_sub(1).saturating_sub(reach);
    let parts = keys.map_parts(super::build::MEASURE_PART, |range| {
        let mut meters: Vec<Meter<'_>> = trimmed
            .iter()
            .map(|b| Meter::at(b, range.start, n, page))
            .collect();
        keys.for_each_chunk(range, |i, chunk| {
            for m in &mut meters {
                m.add(i, chunk, reach, far_end);
            }
            Ok(())
        })?;
        Ok(meters.into_iter().map(|m| m.t).collect::<Vec<_>>())
    })?;
    let mut tallies: Vec<Tally> = trimmed.iter().map(|_| Tally::new(page)).collect();
    for part in parts {
        tallies = tallies.into_iter().zip(part).map(|(a, b)| a.merge(b)).collect();
    }
    Ok(tallies.into_iter().map(BandMeasure::Tallied).collect())
}

fn band_entry(e: &[u8]) -> super::entries::BandEntry {
    super::entries::BandEntry {
        key: crate::format::bytes::get_u64(e, 0).unwrap_or(0),
        slope: f32::from_bits(crate::format::bytes::get_u32(e, 8).unwrap_or(0)),
        off: crate::format::bytes::get_u32(e, 12).unwrap_or(0) as i32,
        base: crate::format::bytes::get_u64(e, 16).unwrap_or(0),
    }
}

/// The widest zero-interval window `w <= max_window` whose build stays
/// within the page budget: `eps` if it fits and `max_window == eps`,
/// otherwise a binary search (extra pages grow with the window) to within
/// `eps / 32` — over `[0, eps)` when `eps` does not fit, over
/// `(eps, max_window]` when it fits and wider windows are allowed.
/// `build(w, limit)` returns the built value and its measured extra pages
/// per lookup, or `None` once it has counted more than `limit` extra pages
/// per lookup (a window that does not fit need not be built whole). Window
/// 0 (predict the page) always fits a budget of 0 extra pages: it is built
/// last, with no limit, and only if no wider window fits.
pub(super) fn widest_window<T>(
    eps: u64,
    max_window: u64,
    budget: f64,
    mut build: impl FnMut(u64, f64) -> Result<Option<(T, f64)>>,
) -> Result<(T, u64, f64)> {
    let fits = |e: f64| e <= budget + 1e-12;
    // `build(w, limit)` may stop (`None`) once it has proven that window
    // `w` reads more than `limit` extra pages per lookup; given no limit it
    // builds.
    let full =
        |r: Option<(T, f64)>| r.ok_or_else(|| Error::invalid("a window built without a limit stopped"));
    if eps == 0 {
        let (t, e) = full(build(0, f64::INFINITY)?)?;
        return Ok((t, 0, e));
    }
    // Invariant: `best_w` fits (window 0 always does: it is built only if
    // no wider window fits), `bad` does not (or lies past the largest
    // window allowed).
    let (mut best, mut best_w, mut best_extra, mut bad) = match build(eps, budget)?.filter(|r| fits(r.1)) {
        Some((t, e)) if max_window <= eps => return Ok((t, eps, e)),
        Some((t, e)) => (Some(t), eps, e, max_window.saturating_add(1)),
        None => (None, 0, 0.0, eps),
    };
    let tolerance = (eps / 32).max(1);
    while bad - best_w > tolerance {
        let mid = best_w + (bad - best_w) / 2;
        match build(mid, budget)?.filter(|r| fits(r.1)) {
            Some((t, e)) => (best, best_w, best_extra) = (Some(t), mid, e),
            None => bad = mid,
        }
    }
    match best {
        Some(t) => Ok((t, best_w, best_extra)),
        None => {
            let (t, e) = full(build(0, f64::INFINITY)?)?;
            Ok((t, 0, e))
        }
    }
}

/// The zero intervals' page budget beyond plain PGM's measured pages when
/// `page_slack` is not given (measurement slack).
const SLACK: f64 = 0.002;

/// What [`zero_interval_band`] built and measured.
struct ZeroBand {
    band: LayerBuild,
    blob: Option<LayerBuild>,
    segments: usize,
    window: u64,
    extra: f64,
    budget: f64,
    plain_segments: usize,
}

/// A zero-interval band over the data (pgm-disk): the widest zero-interval
/// window `w <= eps` whose measured pages per lookup stay within plain PGM's
/// measured pages at `eps` (+ 0.002) — Zhang's G3 promise of fewer models at
/// the same expected I/O, checked on the actual keys. With `slack`, the
/// budget is plain PGM's pages + `slack` and windows up to `2 eps` are
/// tried. Returns the band, its segments and the window chosen.
///
/// `plain` is plain PGM's segmentation at `eps` (dropped once it has set
/// the budget), or its pages tallied in the segmentation pass
/// ([`TallyFold`]; else they are measured in a pass of their own);
/// `at_eps` the zero-interval segmentation at window `eps` if that pass made
/// it too (else it is made when window `eps` is tried). Every step reads
/// the keys in passes ([`Keys::by_groups`], [`Keys::map_parts`]): over a
/// data run, a window of keys per thread at a time.
fn zero_interval_band(
    keys: Keys<'_>,
    plain: Plain,
    mut at_eps: Option<AtEps>,
    eps: u64,
    per_page: usize,
    compress: bool,
    slack: Option<f64>,
) -> Result<ZeroBand> {
    let page = per_page as u64;
    let n = keys.len();
    // Plain PGM's measured expected extra pages at `eps` is the budget.
    let reach = window_reach(eps.saturating_mul(2), page);
    let tol = Tolerance {
        eps,
        granule: 1,
        zero_page: 0,
    };
    let measure = |segs: &[crate::model::Segment]| -> Result<f64> {
        let first_key = |i: usize| first_key_of(segs, i);
        let (entries, starts) = band_entries(n, &lines_of(segs), &first_key, None, 1, 0)?;
        Ok(measured_band(keys, &starts, &entries, 0, page, reach)?.1)
    };
    // The tally counts the pages unless a band is off by more than it
    // holds: then plain PGM is segmented again and measured in a pass.
    let (plain_segments, extra) = match plain {
        Plain::Tallied(count, t) => match t.into_tally(n as u64, reach).counted(n as u64, 0, page, reach) {
            Some(extra) => (count, extra),
            None => (count, measure(&segment_stream(keys, tol)?)?),
        },
        Plain::Segments(segs) => (segs.len(), measure(&segs)?),
    };
    let budget = extra + slack.unwrap_or(SLACK);
    let max_window = if slack.is_some() {
        eps.saturating_mul(2)
    } else {
        eps
    };
    let ((band, blob, segments), window, extra) = widest_window(eps, max_window, budget, |w, limit| {
        let tol = Tolerance {
            eps: w,
            granule: 1,
            zero_page: page,
        };
        // Window `eps` segmented in the first pass, if it was, and (without
        // compression) lined and measured.
        let segs = match at_eps.take() {
            Some(AtEps::Ahead(mut a)) if w == eps => {
                if !compress && a.resolves() {
                    let count = a.segments().len();
                    let (band, extra) = a.resolve(keys, budget)?;
                    return Ok(Some(((band, None, count), extra)));
                }
                a.segments().to_vec()
            }
            Some(AtEps::Segments(segs)) if w == eps => segs,
            _ => segment_stream(keys, tol)?,
        };
        let count = segs.len();
        let built = if compress {
            cpr_band(keys, &Segs::Memory(segs), tol, budget, limit)?
                .map(|(b, blob, extra)| (b, Some(blob), extra))
        } else {
            lines_measured_within(keys, &segs, tol, budget, reach, limit)?
                .map(|(band, extra)| (band, None, Some(extra)))
        };
        let Some((band, blob, extra)) = built else {
            return Ok(None);
        };
        let extra = match extra {
            Some(e) => e,
            None => extra_pages(keys, &band, page)?,
        };
        Ok(Some(((band, blob, count), extra)))
    })?;
    Ok(ZeroBand {
        band,
        blob,
        segments,
        window,
        extra,
        budget,
        plain_segments,
    })
}

/// What [`pgm`] reads.
pub(super) const PGM_PARAMS: &[ParamDoc] = &[
    ParamDoc::new(
        "epsilon",
        "error bound of the segments over the data (in predictions)",
    ),
    ParamDoc::new("epsilon_rec", "error bound of the recursive layers above"),
    ParamDoc::new(
        "granularity",
        "what a prediction points to: item (a record), page (a data page) or a number of records",
    ),
    ParamDoc::new(
        "sample",
        "train on every sample-th key only (Chesetti & Pandey's sampled PGM): epsilon then counts \
         samples and a lookup's window is (2 epsilon + 2) x sample records at most; 1 trains on \
         every key; granularity item only",
    ),
];

/// What [`pgm_disk`] and [`pgm_disk_cpr`] read: [`PGM_PARAMS`] (granularity
/// item only) and `page_slack`.
pub(super) const PGM_DISK_PARAMS: &[ParamDoc] = &[
    ParamDoc::new(
        "epsilon",
        "error bound of plain PGM, whose pages per lookup the zero intervals keep",
    ),
    ParamDoc::new("epsilon_rec", "error bound of the recursive layers above"),
    ParamDoc::new(
        "granularity",
        "what a prediction points to: item only (zero intervals predict items)",
    ),
    ParamDoc::new(
        "page_slack",
        "pages per lookup the zero intervals may read beyond plain PGM's, 0-1, with windows up to \
         2 epsilon (unset: 0.002 of measurement slack, windows up to epsilon)",
    ),
];

/// Chesetti & Pandey's sampled PGM (§4, "Constructing learned indexes
/// using sampling"): the bottom band layer trained on the samples
/// `s_j = keys[j·k]` only, `j < m = ceil(n / k)`, with error `eps` in
/// samples, and stored as a band of granule `k` records whose lower bound
/// is one sample wider than the samples' measured one. Returns the layer,
/// its segments and the design notes.
///
/// Why that range holds every lower bound. Let `p = p(x)` be the layer's
/// prediction (in samples) for a query `x`: monotone in `x` and at most
/// `m` (the last entry's clamp, `ceil(below / granule)` at query time),
/// and let `e_lo`, `e_hi` be the bounds measured on the samples with the
/// query arithmetic, `j - e_hi <= p(s_j) <= j + e_lo`. Let
/// `r = lb(x) = #{i : keys[i] < x}`.
///
/// - `x <= s_0`: `r = 0`; the layer's first entry predicts `p(s_0)` for
///   any key at or before its own, so `p <= e_lo` and `r > (p - e_lo - 1)·k`.
/// - otherwise let `a` be the last sample `< x`. Then `keys[a·k] < x`, so
///   `r >= a·k + 1`, and `r <= (a + 1)·k`: if `a + 1 < m`, `s_{a+1} >= x`;
///   else `r <= n <= m·k`. Monotonicity gives `p >= p(s_a) >= a - e_hi`,
///   so `a <= p + e_hi`, and `p <= p(s_{a+1}) <= a + 1 + e_lo` (or
///   `p <= m = a + 1`), so `a >= p - e_lo - 1`.
///
/// Hence `(p - e_lo - 1)·k < r <= (p + e_hi + 1)·k`. The band range
/// `[(p - eps_lo)·k, (p + eps_hi + 1)·k)` with `eps_lo = e_lo + 1`,
/// `eps_hi = e_hi` holds `r` in `[lo, hi]` (the `ApproxPos` contract), and
/// a present key `keys[i]` inside `[lo, hi)`: `i = hi` would make it the
/// sample `j = p + e_hi + 1` with `p(s_j) = p`, against `j <= p(s_j) + e_hi`.
/// Chesetti's `[k·(p - eps), k·(p + eps)]` misses a sample's worth of
/// positions at each end for keys between samples.
///
/// Tightness: the range has `(e_lo + e_hi + 2)·k` positions, as many as
/// the exact set above, shifted down by one (`lo` itself is never a lower
/// bound). That one position never costs a page when `k` divides the
/// records per page or they divide `k` (`lo`, a multiple of `k`, is then
/// never the last record of a page), and folding it into `eps_lo` keeps
/// the layer an ordinary band: same header, same reader, no format change.
fn sampled_band(samples: &[u64], eps: u64, k: u64) -> Result<(LayerBuild, u64, Value)> {
    let tol = Tolerance {
        eps,
        granule: 1,
        zero_page: 0,
    };
    let segs = crate::model::optimal_pla_points(tol.points(samples));
    // Units are sample indexes: `base_j` = first sample of the segment, and
    // the last successor `m` = ceil(n / k) units, what the query computes
    // from granule `k` over the `n` records below.
    let band = band_layer(samples, &lines_of(&segs), 1, 0)?;
    let LayerKind::Band { eps_lo, eps_hi, .. } = band.kind else {
        return Err(Error::invalid("band layer expected"));
    };
    let window = eps_lo.saturating_add(eps_hi).saturating_add(2).saturating_mul(k);
    let notes = json!({
        "sample": k,
        "sampled_keys": samples.len(),
        "sample_eps_lo": eps_lo,
        "sample_eps_hi": eps_hi,
        "window_records": window,
    });
    let layer = LayerBuild {
        kind: LayerKind::Band {
            granule: k,
            zero_page: 0,
            eps_lo: eps_lo.saturating_add(1),
            eps_hi,
        },
        ..band
    };
    Ok((layer, segs.len() as u64, notes))
}

/// The PGM family over keys in memory or in a data run. Plain and sampled
/// PGM stream (a segmentation pass and a measuring pass over the keys, the
/// model in memory); zero intervals and compressed bands still read every
/// key into memory.
fn pgm_family(p: &Params, keys: Keys<'_>, per_page: usize, zero: bool, compress: bool) -> Result<Design> {
    let eps = p.u64("epsilon", 64)?;
    let eps_rec = p.u64("epsilon_rec", 4)?;
    let granule = granularity(p, per_page)?;
    // Sampling is plain `pgm`'s (the zero-interval kinds do not take it).
    let sample = if zero { 1 } else { p.u64("sample", 1)? };
    if sample == 0 {
        return Err(Error::invalid(
            "sample must be at least 1 (1 trains on every key)",
        ));
    }
    if sample > 1 && granule != 1 {
        return Err(Error::invalid(format!(
            "sample={sample} predicts in units of {sample} records: granularity must be item, got \
             {granule} records"
        )));
    }
    // Zero intervals: pages a lookup may read beyond plain PGM's at `epsilon`
    // (default: none, i.e. 0.002 of measurement slack, and windows <= epsilon).
    let slack = if zero && p.given().contains_key("page_slack") {
        let s = p.f64("page_slack", 0.002)?;
        if !(0.0..=1.0).contains(&s) {
            return Err(Error::invalid(format!("page_slack must be in [0, 1], got {s}")));
        }
        Some(s)
    } else {
        None
    };
    if zero && granule != 1 {
        return Err(Error::invalid(
            "zero intervals (pgm-disk) predict items: granularity must be item",
        ));
    }
    // The first pass over the keys (over a run being written: while it is
    // written): the samples, or the segmentation (with zero intervals: plain
    // PGM's at `epsilon`, which sets the page budget).
    let tol = Tolerance {
        eps,
        granule,
        zero_page: 0,
    };
    let first = if sample > 1 {
        // Training reads n / k keys: the point of sampling.
        First::Samples(keys.every(usize::try_from(sample).unwrap_or(usize::MAX))?)
    } else if zero {
        // Plain PGM's measured pages (the zero intervals' budget) in the
        // same pass.
        // same pass; its segments are not kept (plain PGM is not built).
        let page = per_page as u64;
        if page == 0 || page > 1 << 16 {
            First::Segments(segment_stream(keys, tol)?, None)
        } else {
            let fold = TallyFold {
                page,
                reach: window_reach(eps.saturating_mul(2), page),
                guess: Guess::default(),
            };
            // The zero intervals' first window, `epsilon`, does not depend on
            // the budget: segmented in the same pass (a run per page); for
            // `pgm-disk`, its lines and measure too, for any budget
            // (`ahead`). `pgm-disk-cpr`'s lines share slopes chosen over
            // all segments: they wait.
            if compress {
                let mut segmenter = RunSegmenter::new(Tolerance::items(eps, page));
                let mut segs = Vec::new();
                let (count, tally) = super::segment::fold_segments_beside(keys, tol, &fold, &mut |i, c| {
                    segmenter.push(i, c, &mut |s| segs.push(s))
                })?;
                segs.extend(segmenter.finish());
                First::Tallied(count, tally, AtEps::Segments(segs))
            } else {
                let mut lines =
                    ahead::Ahead::new(eps, page, fold.reach, slack.unwrap_or(SLACK), fold.guess.clone());
                let (count, tally) =
                    super::segment::fold_segments_beside(keys, tol, &fold, &mut |i, c| lines.push(i, c))?;
                First::Tallied(count, tally, AtEps::Ahead(Box::new(lines)))
            }
        }
    } else {
        // The band's error bounds measured in the same pass, segment by
        // segment (no measuring pass of its own).
        let fold = BoundsFold { granule };
        let (segs, bounds) = segment_stream_folded(keys, tol, &fold)?;
        First::Segments(segs, Some(bounds))
    };
    if first.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: Some(0),
            notes: Value::Null,
        });
    }
    let mut notes_out = Value::Null;
    let (bottom, mut models) = match (zero, first) {
        (true, first @ (First::Segments(..) | First::Tallied(..))) => {
            let (plain, at_eps) = match first {
                First::Tallied(count, tally, at_eps) => (Plain::Tallied(count, tally), Some(at_eps)),
                First::Segments(segs, _) => (Plain::Segments(segs), None),
                First::Samples(_) => return Err(Error::invalid("zero intervals take no samples")),
            };
            let ZeroBand {
                band,
                blob,
                segments: segs,
                window,
                extra,
                budget,
                plain_segments,
            } = zero_interval_band(keys, plain, at_eps, eps, per_page, compress, slack)?;
            let mut notes = json!({
                "zero_interval_window": window,
                "expected_pages": 1.0 + extra,
                "page_budget": 1.0 + budget,
                "pgm_segments_at_epsilon": plain_segments,
            });
            if let Some(blob) = blob {
                if let (Ok(c), Some(o)) = (CprBand::from_bytes(&blob.flat, "build"), notes.as_object_mut()) {
                    let parts: std::collections::BTreeMap<_, _> =
                        c.part_bytes().iter().map(|(k, v)| (k.to_string(), *v)).collect();
                    o.insert("parts".into(), json!(parts));
                    o.insert("distinct_slopes".into(), json!(c.distinct_slopes()));
                    o.insert(
                        "offset_unit_positions".into(),
                        json!(f64::from(c.off_unit()) / 16.0),
                    );
                }
                return Ok(Design {
                    layers: vec![blob],
                    models: Some(segs as u64),
                    notes,
                });
            }
            notes_out = notes;
            (band, segs as u64)
        }
        (_, First::Samples(samples)) => {
            let (band, segs, notes) = sampled_band(&samples, eps, sample)?;
            notes_out = notes;
            (band, segs)
        }
        (_, First::Tallied(..)) => return Err(Error::invalid("a tally without zero intervals")),
        (_, First::Segments(segs, bounds)) => {
            let first_key = |i: usize| first_key_of(&segs, i);
            let band = match bounds {
                Some(bounds) => {
                    let (entries, _) =
                        band_entries(keys.len(), &lines_of(&segs), &first_key, None, granule, 0)?;
                    let max_unit = (keys.len() as u64).div_ceil(granule.max(1));
                    band_of_bounds(&entries, granule.max(1), 0, bounds, max_unit)
                }
                None => band_layer_in(keys, &lines_of(&segs), &first_key, None, granule, 0)?,
            };
            (band, segs.len() as u64)
        }
    };
    let mut layers = vec![bottom];
    // PGM's recursion: segment the segments' keys with epsilon_rec until one remains.
    while let Some(top) = layers.last().filter(|l| l.count() > 1) {
        let ks = top.keys();
        let up = crate::model::optimal_pla(&ks, eps_rec.max(1));
        if up.len() >= ks.len() {
            break;
        }
        models += up.len() as u64;
        layers.push(band_layer(&ks, &lines_of(&up), 1, 0)?);
    }
    Ok(Design {
        layers,
        models: Some(models),
        notes: notes_out,
    })
}

/// What the PGM family's first pass over the keys produced.
enum First {
    /// Every `sample`-th key.
    Samples(Vec<u64>),
    /// The segmentation of every key, and the error bounds of its band if
    /// they were measured in the same pass.
    Segments(Vec<crate::model::Segment>, Option<(u64, u64)>),
    /// How many segments plain PGM has, and the tally of its pages
    /// ([`TallyFold`]; the segments are not kept); and the zero-interval
    /// segmentation at `epsilon`.
    Tallied(usize, TallyAcc, AtEps),
}

/// The zero-interval segmentation at window `epsilon` the first pass made:
/// its segments, or (`pgm-disk`) those with their lines and measure for
/// any budget ([`ahead::Ahead`]).
enum AtEps {
    Segments(Vec<crate::model::Segment>),
    Ahead(Box<ahead::Ahead>),
}

/// What sets the page budget of the zero intervals: plain PGM's
/// segmentation, or its segment count and page tally.
enum Plain {
    Segments(Vec<crate::model::Segment>),
    Tallied(usize, TallyAcc),
}

impl First {
    fn is_empty(&self) -> bool {
        match self {
            First::Samples(k) => k.is_empty(),
            First::Segments(s, _) => s.is_empty(),
            First::Tallied(count, ..) => *count == 0,
        }
    }
}

/// [`segment_stream`] folding `fold` over the segments' keys in the same
/// pass ([`super::segment::optimal_segments_folded`]).
fn segment_stream_folded<M: SegmentFold>(
    keys: Keys<'_>,
    tol: Tolerance,
    fold: &M,
) -> Result<(Vec<crate::model::Segment>, M::Acc)> {
    if tol.zero_page == 0 && tol.granule == 1 {
        let e = i128::from(tol.eps);
        super::segment::optimal_segments_folded(keys, move |i| (i as i128 - e, i as i128 + e), fold)
    } else {
        super::segment::optimal_segments_folded(keys, tol, fold)
    }
}

/// The optimal segmentation of `keys` under `tol`, in one pass, its
/// partitions segmented in parallel (`segment::optimal_segments`). The
/// common intervals `[i - eps, i + eps]` are computed without a division.
fn segment_stream(keys: Keys<'_>, tol: Tolerance) -> Result<Vec<crate::model::Segment>> {
    if tol.zero_page == 0 && tol.granule == 1 {
        let e = i128::from(tol.eps);
        super::segment::optimal_segments(keys, move |i| (i as i128 - e, i as i128 + e))
    } else {
        super::segment::optimal_segments(keys, tol)
    }
}

pub(super) fn pgm(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    pgm_family(p, keys.into(), per_page, false, false)
}

pub(super) fn pgm_disk(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    pgm_family(p, keys.into(), per_page, true, false)
}

pub(super) fn pgm_disk_cpr(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    pgm_family(p, keys.into(), per_page, true, true)
}

/// [`pgm_disk`] over keys in memory or in a data run: plain PGM's
/// segmentation in the first pass, every later step in passes over the run
/// a window at a time.
pub(super) fn pgm_disk_in(p: &Params, keys: Keys<'_>, per_page: usize, _ps: usize) -> Result<Design> {
    pgm_family(p, keys, per_page, true, false)
}

/// [`pgm_disk_cpr`] over keys in memory or in a data run (as
/// [`pgm_disk_in`]).
pub(super) fn pgm_disk_cpr_in(p: &Params, keys: Keys<'_>, per_page: usize, _ps: usize) -> Result<Design> {
    pgm_family(p, keys, per_page, true, true)
}

/// [`pgm`] over keys in memory or in a data run (see [`pgm_family`]).
pub(super) fn pgm_in(p: &Params, keys: Keys<'_>, per_page: usize, _ps: usize) -> Result<Design> {
    pgm_family(p, keys, per_page, false, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::layered::LAYERED_KINDS;

    /// The compressed design measures and rounds in parallel: one thread or
    /// several give the same bytes and figures.
    #[test]
    fn parallel_design_is_deterministic() {
        let per_page = crate::format::records_per_page(4096);
        for dist in ["fb-like", "books-like"] {
            let keys = crate::data::generate(dist.parse().unwrap(), 300_000, 5).unwrap();
            let design = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| {
                    let mut m = serde_json::Map::new();
                    m.insert("epsilon".into(), 8.into());
                    let k = LAYERED_KINDS.iter().find(|k| k.name == "pgm-disk-cpr").unwrap();
                    let d = (k.design)(&Params::from_map(m), &keys, per_page, 4096).unwrap();
                    let bytes: Vec<Vec<u8>> = d.layers.iter().map(|l| l.flat.clone()).collect();
                    (bytes, d.notes.to_string())
                })
            };
            let one = design(1);
            assert!(!one.0.is_empty() && one.1.contains("expected_pages"), "{dist}");
            assert_eq!(design(3), one, "{dist}");
        }
    }

    /// `extra_pages` counts key chunks in parallel, each starting at the
    /// entry that covers its first key: the same count as one pass over all
    /// keys, across chunk edges and with separators equal to keys.
    #[test]
    fn chunked_extra_pages_count_as_one_pass() {
        let per_page = crate::format::records_per_page(4096) as u64;
        for (dist, eps) in [("fb-like", 8), ("books-like", 32), ("uniform", 4)] {
            let keys = crate::data::generate(dist.parse().unwrap(), 400_000, 9).unwrap();
            let tol = Tolerance {
                eps,
                granule: 1,
                zero_page: per_page,
            };
            let segs = crate::model::optimal_pla_points(tol.points(&keys));
            let band = band_layer(&keys, &lines_of(&segs), 1, per_page).unwrap();
            let LayerKind::Band {
                granule,
                zero_page,
                eps_lo,
                eps_hi,
            } = band.kind
            else {
                panic!("band expected")
            };
            let entries: Vec<super::super::entries::BandEntry> =
                band.flat.chunks_exact(24).map(band_entry).collect();
            assert!(entries.len() > 100, "{dist}: {} entries", entries.len());
            let n = keys.len() as u64;
            let (mut extra, mut j) = (0u64, 0usize);
            for &k in &keys {
                while entries.get(j + 1).is_some_and(|e| e.key <= k) {
                    j += 1;
                }
                let e = &entries[j];
                let next = entries.get(j + 1).map_or(n, |f| f.base);
                let (lo, hi) = super::super::layer::band_range(
                    e.predict(k, next, n),
                    eps_lo,
                    eps_hi,
                    granule,
                    zero_page,
                    n,
                );
                if hi > lo {
                    extra += (hi - 1) / per_page - lo / per_page;
                }
            }
            let want = extra as f64 / n as f64;
            assert!(want > 0.0, "{dist}: no page crossing to count");
            assert_eq!(
                extra_pages(Keys::Slice(&keys), &band, per_page).unwrap(),
                want,
                "{dist}"
            );
        }
    }

    /// The `pgm` design with `params` over `keys`, as a resident stack.
    fn pgm_stack(params: &[(&str, serde_json::Value)], keys: &[u64]) -> (Design, super::super::LayerStack) {
        let m: serde_json::Map<String, Value> =
            params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let d = pgm(&Params::from_map(m), keys, 256, 4096).unwrap();
        let s = super::super::LayerStack::from_design(&d, keys.len() as u64).unwrap();
        (d, s)
    }

    /// Every query a sampled window must answer: each key, its neighbours,
    /// the extremes, points between samples, random keys.
    fn queries(keys: &[u64], extra: &[u64]) -> Vec<u64> {
        let mut q = vec![0, 1, u64::MAX, u64::MAX - 1, 1 << 63];
        for &k in keys {
            q.extend([k, k.wrapping_add(1), k.wrapping_sub(1)]);
        }
        for w in keys.windows(2) {
            if let [a, b] = *w {
                q.push(a + (b - a) / 2);
            }
        }
        q.extend_from_slice(extra);
        q
    }

    /// Checks the `ApproxPos` contract of a sampled stack over `keys`
    /// (strictly increasing) for `queries`, and that the window is the
    /// promised `(e_lo + e_hi + 2)·k` records at most.
    fn check_sampled_windows(keys: &[u64], k: u64, eps: u64, qs: &[u64]) -> std::result::Result<(), String> {
        let (d, s) = pgm_stack(
            &[
                ("sample", k.into()),
                ("epsilon", eps.into()),
                ("epsilon_rec", 2.into()),
            ],
            keys,
        );
        let n = keys.len() as u64;
        let window = d.notes.get("window_records").and_then(Value::as_u64);
        if n > 0 {
            let Some(LayerKind::Band {
                granule,
                eps_lo,
                eps_hi,
                ..
            }) = d.layers.first().map(|l| l.kind.clone())
            else {
                return Err("no band at the bottom".into());
            };
            if k > 1 && (granule != k || window != Some((eps_lo + eps_hi + 1) * k)) {
                return Err(format!(
                    "granule {granule}, window {window:?}, eps {eps_lo}/{eps_hi}"
                ));
            }
            // The samples' own bounds stay near epsilon (rounding: one unit).
            if eps_lo > eps + 2 || eps_hi > eps + 1 {
                return Err(format!("measured bounds {eps_lo}/{eps_hi} at epsilon {eps}"));
            }
        }
        for &q in qs {
            let a = s.predict(q).map_err(|e| e.to_string())?;
            let lb = keys.partition_point(|&x| x < q) as u64;
            let present = keys.get(lb as usize) == Some(&q);
            if !(a.lo <= lb && lb <= a.hi && a.hi <= n) || (present && lb >= a.hi) {
                return Err(format!(
                    "k={k} eps={eps} n={n}: query {q} (lb {lb}, present {present}) not in {a:?}"
                ));
            }
            if let Some(w) = window.filter(|_| k > 1) {
                if a.hi - a.lo > w {
                    return Err(format!("window {} > {w} for {q}", a.hi - a.lo));
                }
            }
        }
        Ok(())
    }

    /// Sampled windows hold every lower bound and every present key, for
    /// random keys (clustered, spread, at both ends of the key space),
    /// every stride from 1 to past `n`, small and zero epsilon.
    mod sampled {
        use super::*;
        use proptest::prelude::*;

        fn key_sets() -> impl Strategy<Value = Vec<u64>> {
            prop_oneof![
                prop::collection::vec(any::<u64>(), 0..700),
                // Dense runs at random bases, some at the top of the key space.
                prop::collection::vec((any::<u64>(), 1u64..60, 1u64..4), 0..12).prop_map(|runs| {
                    runs.into_iter()
                        .flat_map(|(b, len, step)| (0..len).map(move |i| b.saturating_add(i * step)))
                        .collect()
                }),
                prop::collection::vec(0u64..2_000, 0..400),
                prop::collection::vec((u64::MAX - 500)..=u64::MAX, 0..200),
            ]
            .prop_map(|mut v| {
                v.sort_unstable();
                v.dedup();
                v
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// The tail of a [`TallyFold`] keeps the last [`TAIL`] predictions in
            /// order and the largest of the others, however the keys are split
            /// into accumulators merged in order.
            #[test]
            fn tally_tails_merge_in_order(
                preds in proptest::collection::vec(any::<u64>(), 0..3 * TAIL),
                cuts in proptest::collection::vec(0usize..3 * TAIL, 0..6),
            ) {
                use crate::index::layered::segment::SegmentFold;
                let fold = TallyFold {
                    page: 8,
                    reach: 0,
                    guess: Guess::default(),
                };
                let mut cuts = cuts;
                cuts.sort_unstable();
                let mut acc = fold.empty();
                let mut b = 0;
                for &c in cuts.iter().chain([&preds.len()]) {
                    let c = c.clamp(b, preds.len());
                    let mut part = fold.empty();
                    for &p in &preds[b..c] {
                        part.keep(p);
                    }
                    acc = fold.merge(acc, part);
                    b = c;
                }
                let split = preds.len().saturating_sub(TAIL);
                prop_assert_eq!(acc.gone, preds[..split].iter().copied().max());
                prop_assert_eq!(acc.tail.in_order().collect::<Vec<_>>(), preds[split..].to_vec());
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn prop_sampled_windows_hold_the_lower_bound(
                keys in key_sets(),
                k in prop_oneof![1u64..9, 9u64..300, Just(128u64), 1_000u64..5_000],
                eps in prop_oneof![0u64..4, 4u64..40],
                extra in prop::collection::vec(any::<u64>(), 0..50),
            ) {
                let qs = queries(&keys, &extra);
                if let Err(e) = check_sampled_windows(&keys, k, eps, &qs) {
                    prop_assert!(false, "{}", e);
                }
            }
        }
    }

    /// Fixed edge cases: no key, one key, `n < k`, `n = k`, `n = k + 1`,
    /// `u64::MAX` as a key, and fb-like data at Chesetti's setting.
    #[test]
    fn sampled_windows_on_edges_and_fb_like() {
        let fb = crate::data::generate("fb-like".parse().unwrap(), 100_000, 3).unwrap();
        let cases: Vec<(Vec<u64>, u64, u64)> = vec![
            (vec![], 4, 1),
            (vec![7], 4, 0),
            (vec![u64::MAX], 3, 1),
            (vec![0, u64::MAX], 3, 1),
            ((0..5).map(|i| i * 1000).collect(), 8, 0),
            ((0..8).map(|i| i * 1000).collect(), 8, 0),
            ((0..9).map(|i| i * 1000).chain([u64::MAX]).collect(), 8, 0),
            ((0..64).map(|i| 1u64 << i).collect(), 3, 1),
            (fb.clone(), 128, 2),
            (fb.clone(), 3, 1),
        ];
        for (keys, k, eps) in cases {
            let qs = queries(&keys, &[]);
            check_sampled_windows(&keys, k, eps, &qs).unwrap();
        }
        // Chesetti's setting trains on n / 128 keys: a much smaller index.
        let (full, _) = pgm_stack(&[("epsilon", 256.into())], &fb);
        let (sampled, _) = pgm_stack(&[("sample", 128.into()), ("epsilon", 2.into())], &fb);
        let bytes = |d: &Design| d.layers.iter().map(|l| l.flat.len()).sum::<usize>();
        assert_eq!(sampled.notes["sampled_keys"], 100_000usize.div_ceil(128));
        assert!(
            bytes(&sampled) <= bytes(&full),
            "{} > {}",
            bytes(&sampled),
            bytes(&full)
        );
    }

    /// `sample=1` is today's PGM, byte for byte; bad values are refused.
    #[test]
    fn sample_one_is_plain_pgm_and_bad_samples_are_refused() {
        let keys = crate::data::generate("books-like".parse().unwrap(), 50_000, 4).unwrap();
        let (plain, _) = pgm_stack(&[("epsilon", 16.into())], &keys);
        let (one, _) = pgm_stack(&[("epsilon", 16.into()), ("sample", 1.into())], &keys);
        let flat = |d: &Design| {
            d.layers
                .iter()
                .map(|l| (l.kind.clone(), l.flat.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(flat(&plain), flat(&one));
        assert_eq!(one.notes, Value::Null);
        let design = |params: &[(&str, Value)]| {
            let m: serde_json::Map<String, Value> =
                params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
            pgm(&Params::from_map(m), &keys, 256, 4096)
        };
        let e = design(&[("sample", 0.into())]).unwrap_err().to_string();
        assert!(e.contains("sample must be at least 1"), "{e}");
        for g in ["page", "32"] {
            let e = design(&[("sample", 4.into()), ("granularity", g.into())])
                .unwrap_err()
                .to_string();
            assert!(e.contains("granularity must be item"), "{e}");
        }
        // With granularity item given explicitly, sampling is fine.
        design(&[("sample", 4.into()), ("granularity", "item".into())]).unwrap();
    }

    /// The stepped page division, the division-free crossing count, the
    /// two-points-per-page intercept range and the stepped `extra_pages`
    /// agree with their plain definitions.
    #[test]
    fn stepped_arithmetic_matches_definitions() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        // A runner per property: one counts its cases across its runs, and
        // a second run on it would try none.
        let runner = || TestRunner::new(Config::with_cases(200));
        let strat = (proptest::collection::vec(-3000i64..3000, 1..60), 1u64..300);
        runner()
            .run(&strat, |(vs, page)| {
                let mut d = PageDiv::new(page);
                for v in vs {
                    prop_assert_eq!(d.div(v), v.div_euclid(page as i64));
                }
                Ok(())
            })
            .unwrap();
        // Predictions near zero, and (slopes up to 2^40, intercepts up to
        // 2^52) beyond the branch-free count's range, where its blocks are
        // counted key by key; runs longer than a block.
        let strat = (
            proptest::collection::vec(0u64..5000, 1..700),
            prop_oneof![0.0f64..2.0, 0.0f64..1_099_511_627_776.0],
            prop_oneof![
                -600.0f64..600.0,
                -4.5e15f64..4.5e15,
                Just(1_125_899_906_842_623.5)
            ],
            0u64..300,
            1u64..300,
        );
        runner()
            .run(&strat, |(mut keys, slope, c, eps, page)| {
                keys.sort_unstable();
                let first = keys[0];
                let (pg, e) = (page as i64, eps as i64);
                let want: u64 = keys
                    .iter()
                    .map(|&k| {
                        let p = (c + slope * (k - first) as f64).floor() as i64;
                        ((p + e).div_euclid(pg) - (p - e).div_euclid(pg)) as u64
                    })
                    .sum();
                let all = 0..keys.len();
                prop_assert_eq!(
                    crossings(Win::all(&keys), all.clone(), first, slope, c, eps, page, u64::MAX),
                    want
                );
                let capped = crossings(Win::all(&keys), all.clone(), first, slope, c, eps, page, 3);
                prop_assert!(capped == want || (capped >= 3 && want >= 3));
                // By offsets, as `page_aware_line` counts a held segment.
                let offsets: Vec<f64> = keys.iter().map(|&k| slope * (k - first) as f64).collect();
                let mut by_offsets = Crossings::new(first, slope, c, eps, page, u64::MAX);
                by_offsets.add_offsets(&offsets);
                prop_assert_eq!(by_offsets.extra, want);
                // The portable lanes too (the count above takes AVX2's where
                // the processor has them).
                let fast = by_offsets.fast.and_then(|f| f.hits(c, offsets.iter().copied()));
                if let Some(hits) = fast {
                    prop_assert_eq!(hits + by_offsets.whole as u64 * keys.len() as u64, want);
                }
                let tol = Tolerance {
                    eps,
                    granule: 1,
                    zero_page: page,
                };
                let sub = keys.len() / 3..keys.len();
                let plain = crate::model::intercept_range(tol.points(&keys).skip(sub.start), first, slope);
                prop_assert_eq!(tol.intercepts(Win::all(&keys), sub, first, slope), plain);
                Ok(())
            })
            .unwrap();
        // Windows ending on a page's last position, starting on its first
        // and crossing one boundary: [0, 9], [10, 19] and [4, 10] of pages of 10.
        for (c, want) in [(3.0, 0), (13.0, 0), (7.0, 1), (-3.0, 1)] {
            assert_eq!(
                crossings(Win::all(&[5]), 0..1, 5, 0.0, c, 3, 10, u64::MAX),
                want,
                "{c}"
            );
        }
        for v in [-2.5, -1.0, -0.0, 0.3, 7.0, 1e30, -1e30, f64::NAN, f64::INFINITY] {
            assert_eq!(floor_i64(v), v.floor() as i64, "{v}");
        }
        // extra_pages against `band_range` per key.
        let keys = crate::data::generate("osm-like".parse().unwrap(), 50_000, 3).unwrap();
        for (eps, zero) in [(8u64, 0u64), (64, 255), (3, 100)] {
            let tol = Tolerance {
                eps,
                granule: 1,
                zero_page: zero,
            };
            let segs = crate::model::optimal_pla_points(tol.points(&keys));
            let band = band_layer(&keys, &lines_of(&segs), 1, zero).unwrap();
            let LayerKind::Band { eps_lo, eps_hi, .. } = band.kind else {
                panic!("band expected")
            };
            let entries: Vec<_> = band.flat.chunks_exact(24).map(band_entry).collect();
            let n = keys.len() as u64;
            let mut want = 0u64;
            for (i, &k) in keys.iter().enumerate() {
                let j = segs.partition_point(|s| s.start <= i) - 1;
                let next = entries.get(j + 1).map_or(n, |f| f.base);
                let (lo, hi) = super::super::layer::band_range(
                    entries[j].predict(k, next, n),
                    eps_lo,
                    eps_hi,
                    1,
                    zero,
                    n,
                );
                if hi > lo {
                    want += (hi - 1) / 255 - lo / 255;
                }
            }
            assert_eq!(
                extra_pages(Keys::Slice(&keys), &band, 255).unwrap(),
                want as f64 / n as f64,
                "eps {eps} zero {zero}"
            );
        }
    }

    /// What the zero-interval designs choose on fixed data sets, pinned:
    /// the window, the models, the expected pages and a digest of the layer
    /// bytes (FNV-1a). Speed-ups of the design must leave all of it as is.
    #[test]
    fn zero_interval_choices_are_pinned() {
        let per_page = crate::format::records_per_page(4096);
        let mut got = Vec::new();
        for (dist, n) in [
            ("osm-like", 200_000),
            ("fb-like", 150_000),
            ("books-like", 150_000),
            ("wiki-like", 150_000),
        ] {
            let keys = crate::data::generate(dist.parse().unwrap(), n, 7).unwrap();
            for kind in ["pgm-disk", "pgm-disk-cpr"] {
                for (eps, slack) in [(64u64, None), (16, Some(0.05))] {
                    let mut m = serde_json::Map::new();
                    m.insert("epsilon".into(), eps.into());
                    if let Some(s) = slack {
                        m.insert("page_slack".into(), s.into());
                    }
                    let k = LAYERED_KINDS.iter().find(|k| k.name == kind).unwrap();
                    let d = (k.design)(&Params::from_map(m), &keys, per_page, 4096).unwrap();
                    let mut h = 0xcbf2_9ce4_8422_2325u64;
                    for b in d.layers.iter().flat_map(|l| l.flat.iter()) {
                        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
                    }
                    got.push(format!(
                        "{dist} {kind} {eps} w={} models={} pages={} h={h:016x}",
                        d.notes["zero_interval_window"],
                        d.models.unwrap_or(0),
                        d.notes["expected_pages"],
                    ));
                }
            }
        }
        let want: &[&str] = &[
            "osm-like pgm-disk 64 w=64 models=179 pages=1.473865 h=843ee4eb4befc409",
            "osm-like pgm-disk 16 w=18 models=295 pages=1.17326 h=24a9f8ce69c8436d",
            "osm-like pgm-disk-cpr 64 w=64 models=174 pages=1.50065 h=778367dc5b612154",
            "osm-like pgm-disk-cpr 16 w=16 models=289 pages=1.173005 h=5cdf5c4ccf66e9b6",
            "fb-like pgm-disk 64 w=64 models=174 pages=1.4483333333333333 h=6dadb73877688e70",
            "fb-like pgm-disk 16 w=13 models=242 pages=1.1736866666666668 h=031326a2eb137451",
            "fb-like pgm-disk-cpr 64 w=64 models=173 pages=1.4886933333333334 h=e4762153f20c15c6",
            "fb-like pgm-disk-cpr 16 w=10 models=240 pages=1.1709133333333333 h=5c041012888fdb3d",
            "books-like pgm-disk 64 w=64 models=38 pages=1.48914 h=184fb22319197f77",
            "books-like pgm-disk 16 w=23 models=103 pages=1.1710533333333333 h=c1e2d499320791ff",
            "books-like pgm-disk-cpr 64 w=64 models=37 pages=1.5045133333333334 h=1739d893153f13cc",
            "books-like pgm-disk-cpr 16 w=23 models=102 pages=1.1723933333333334 h=bda1ede569ecab17",
            "wiki-like pgm-disk 64 w=64 models=83 pages=1.4872266666666667 h=3b3b4f283a8b35a5",
            "wiki-like pgm-disk 16 w=21 models=151 pages=1.1752666666666667 h=cb1d683fe64389da",
            "wiki-like pgm-disk-cpr 64 w=64 models=80 pages=1.4939733333333334 h=6a15b9c6a8b6a899",
            "wiki-like pgm-disk-cpr 16 w=21 models=147 pages=1.1724533333333333 h=f2587805c5ea0827",
        ];
        assert_eq!(got, want);
    }

    /// The one-pass `measured_band` gives exactly `band_of_entries` and
    /// `extra_pages` of it: plain and zero-interval bands, offsets moved by
    /// up to a few pages (wider bounds than the reach: counted separately),
    /// flat entries predicting one value (every prediction near an end),
    /// small reaches, and pages other than the zero intervals'.
    #[test]
    fn measured_band_matches_separate_passes() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let mut sets: Vec<Vec<u64>> = [("osm-like", 3u64), ("books-like", 5), ("fb-like", 9)]
            .iter()
            .map(|&(d, seed)| crate::data::generate(d.parse().unwrap(), 20_000, seed).unwrap())
            .collect();
        // Repeated keys: a segment may start inside a run of equal keys,
        // which `extra_pages` routes to the entry of that key.
        let repeated: Vec<u64> = sets[0]
            .iter()
            .take(6_000)
            .enumerate()
            .flat_map(|(i, &k)| std::iter::repeat_n(k, 1 + (i * 7 % 5)))
            .collect();
        sets.push(repeated);
        let strat = (
            0usize..sets.len(),
            prop_oneof![0u64..4, 4u64..80],
            prop_oneof![Just(0u64), Just(64), 1u64..300],
            prop_oneof![Just(None), (1u64..400).prop_map(Some)],
            prop_oneof![Just(0i32), 1i32..200, 200i32..100_000],
            0u64..2_000,
            any::<bool>(),
        );
        let mut runner = TestRunner::new(Config::with_cases(96));
        let stopped = std::cell::Cell::new(0usize);
        runner
            .run(&strat, |(set, eps, zero, other_page, jitter, reach, flat)| {
                let keys = &sets[set];
                let tol = Tolerance {
                    eps,
                    granule: 1,
                    zero_page: zero,
                };
                let segs = crate::model::optimal_pla_points(tol.points(keys));
                let first_key = |i: usize| keys.get(i).copied().unwrap_or(0);
                let (mut entries, starts) =
                    band_entries(keys.len(), &lines_of(&segs), &first_key, None, 1, zero).unwrap();
                for (j, e) in entries.iter_mut().enumerate() {
                    // Deterministic moves of every third entry.
                    if j % 3 == 1 {
                        e.off = e.off.saturating_add(jitter * if j % 2 == 0 { 1 } else { -1 });
                    }
                    if flat && j % 5 == 0 {
                        e.slope = 0.0;
                    }
                }
                let page = other_page.unwrap_or(zero.max(1));
                let (band, extra) =
                    measured_band(Keys::Slice(keys), &starts, &entries, zero, page, reach).unwrap();
                let want = band_of_entries_in(Keys::Slice(keys), &starts, &entries, 1, zero).unwrap();
                prop_assert_eq!(format!("{:?}", band.kind), format!("{:?}", want.kind));
                prop_assert_eq!(&band.flat, &want.flat);
                prop_assert_eq!(band.last_successor, want.last_successor);
                prop_assert_eq!(extra, extra_pages(Keys::Slice(keys), &want, page).unwrap());
                // Measured together with plain PGM's band at `eps + 3` (in
                // one pass when both can be), each the same as alone.
                let plain = crate::model::optimal_pla(keys, eps + 3);
                let first_plain = |i: usize| first_key_of(&plain, i);
                let (plain_entries, plain_starts) =
                    band_entries(keys.len(), &lines_of(&plain), &first_plain, None, 1, 0).unwrap();
                let bands = [
                    Measured {
                        starts: &plain_starts,
                        entries: &plain_entries,
                        zero_page: 0,
                    },
                    Measured {
                        starts: &starts,
                        entries: &entries,
                        zero_page: zero,
                    },
                ];
                let both = measured_bands(Keys::Slice(keys), &bands, page, reach).unwrap();
                prop_assert_eq!(both.len(), 2);
                let want_plain =
                    band_of_entries_in(Keys::Slice(keys), &plain_starts, &plain_entries, 1, 0).unwrap();
                let mut finished = Vec::new();
                for (m, band) in both.into_iter().zip(&bands) {
                    let alone = m.extra(Keys::Slice(keys), band, page, reach).unwrap();
                    let (b, e) = m.finish(Keys::Slice(keys), band, page, reach).unwrap();
                    prop_assert_eq!(alone, e);
                    finished.push((b, e));
                }
                for ((b, e), (w, we)) in finished.iter().zip([
                    (
                        &want_plain,
                        extra_pages(Keys::Slice(keys), &want_plain, page).unwrap(),
                    ),
                    (&want, extra),
                ]) {
                    prop_assert_eq!(format!("{:?}", b.kind), format!("{:?}", w.kind));
                    prop_assert_eq!(&b.flat, &w.flat);
                    prop_assert_eq!(*e, we);
                }
                // With a limit: stopped only over it, else the same band.
                for f in [0.0, 0.3, 0.9, 0.999, 1.0, 1.5] {
                    let limit = extra * f;
                    match measured_band_within(Keys::Slice(keys), &starts, &entries, zero, page, reach, limit)
                        .unwrap()
                    {
                        None => {
                            prop_assert!(extra > limit + 1e-12, "stopped at {limit}, extra {extra}");
                            stopped.set(stopped.get() + 1);
                        }
                        Some((b, e)) => {
                            prop_assert_eq!(&b.flat, &band.flat);
                            prop_assert_eq!(format!("{:?}", b.kind), format!("{:?}", band.kind));
                            prop_assert_eq!(e, extra);
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
        // The limits below the count stopped some passes early.
        assert!(stopped.get() > 0);
    }

    /// A data run of 4 KiB pages of each key set.
    fn runs_of(sets: &[Vec<u64>]) -> Vec<crate::format::DataRun> {
        use crate::format::DataRun;
        use crate::storage::{Directory, MemDirectory};
        let dir = MemDirectory::new();
        sets.iter()
            .enumerate()
            .map(|(i, k)| {
                DataRun::write_ranked(&dir, &format!("r{i}"), k, 4096).unwrap();
                DataRun::open(dir.open_read(&format!("r{i}")).unwrap()).unwrap()
            })
            .collect()
    }

    /// Page-aware lines of segments longer than a window (64 keys in unit
    /// tests), whose keys a run hands over in passes (`lines_in_passes`,
    /// `Tolerance::intercepts_of`), are the lines found over the keys in
    /// memory, bit for bit.
    #[test]
    fn page_aware_lines_read_in_passes_equal_those_in_memory() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let mut sets: Vec<Vec<u64>> = [("osm-like", 5u64), ("wiki-like", 7), ("fb-like", 9)]
            .iter()
            .map(|&(d, seed)| crate::data::generate(d.parse().unwrap(), 20_000, seed).unwrap())
            .collect();
        // Clusters on a line: long segments whose middle lines sit at page
        // edges.
        sets.push((0..20_000u64).map(|i| i * 256 + (i % 16) * (i % 16)).collect());
        let runs = runs_of(&sets);
        let strat = (
            0usize..sets.len(),
            1u64..48,
            prop_oneof![8u64..300, Just(255)],
            prop_oneof![Just(0.0), Just(0.01), Just(0.2)],
        );
        let (long, moved) = (std::cell::Cell::new(0usize), std::cell::Cell::new(0usize));
        let mut runner = TestRunner::new(Config::with_cases(40));
        runner
            .run(&strat, |(set, eps, page, budget)| {
                let keys = &sets[set];
                let segs = crate::model::optimal_pla_zero_interval(keys, eps, page);
                let tol = Tolerance {
                    eps,
                    granule: 1,
                    zero_page: page,
                };
                let want = page_aware_lines(keys, &segs, eps, page, budget);
                let got = page_aware_lines_in(Keys::Run(&runs[set]), &segs, tol, budget).unwrap();
                prop_assert_eq!(got.len(), want.len());
                for ((g, w), s) in got.iter().zip(&want).zip(&segs) {
                    prop_assert_eq!(
                        (g.start, g.slope.to_bits(), g.intercept.to_bits()),
                        (w.start, w.slope.to_bits(), w.intercept.to_bits()),
                        "segment at {} of {} keys",
                        s.start,
                        s.len
                    );
                    if s.len > super::super::keys::WINDOW_KEYS {
                        long.set(long.get() + 1);
                        let off = w.slope != s.slope || w.intercept != s.intercept;
                        moved.set(moved.get() + usize::from(off));
                    }
                }
                Ok(())
            })
            .unwrap();
        // Segments read in passes, and among them lines moved off the middle.
        let (long, moved) = (long.get(), moved.get());
        assert!(
            long > 100 && moved > 10,
            "{long} long segments, {moved} lines moved"
        );
    }

    /// 20,000 keys of each `(dataset, seed)`, and a long line (one
    /// segment) ending in a jump: predictions past the far end far from the
    /// last keys.
    fn measure_sets(of: &[(&str, u64)]) -> Vec<Vec<u64>> {
        let mut sets: Vec<Vec<u64>> = of
            .iter()
            .map(|&(d, seed)| crate::data::generate(d.parse().unwrap(), 20_000, seed).unwrap())
            .collect();
        let mut line: Vec<u64> = (0..6_000u64).map(|i| i * 10).collect();
        line.extend((0..40u64).map(|i| 1 << 40 | i));
        sets.push(line);
        sets
    }

    /// What a test of zero-interval lines over `keys` needs: the reach of
    /// a measure, a pool of `threads`, the intervals (window `eps`, pages
    /// of `page`) and their segmentation.
    fn zero_case(
        keys: &[u64],
        eps: u64,
        page: u64,
        threads: usize,
    ) -> (u64, rayon::ThreadPool, Tolerance, Vec<crate::model::Segment>) {
        let reach = window_reach(eps.saturating_mul(2), page);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let tol = Tolerance::items(eps, page);
        let segs = crate::model::optimal_pla_points(tol.points(keys));
        (reach, pool, tol, segs)
    }

    /// `lines_measured_within` gives the lines, layer and count (or the
    /// stop) of `page_aware_lines_in` followed by `measured_band_within`:
    /// zero intervals of any page, windows, budgets and limits, keys in
    /// memory and in a run, 1–3 threads.
    #[test]
    fn fused_lines_and_measure_match_two_passes() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let sets = measure_sets(&[("osm-like", 5), ("books-like", 7), ("fb-like", 9)]);
        let runs = runs_of(&sets);
        let strat = (
            0usize..sets.len(),
            prop_oneof![0u64..4, 4u64..80],
            prop_oneof![2u64..300, Just(100), Just(255)],
            1usize..4,
            prop_oneof![Just(0.0f64), 0.0f64..1.0, Just(f64::INFINITY)],
            prop_oneof![Just(f64::INFINITY), 0.0f64..0.6],
        );
        let mut runner = TestRunner::new(Config::with_cases(48));
        runner
            .run(&strat, |(set, eps, page, threads, budget, limit)| {
                let keys = &sets[set];
                let n = keys.len();
                let (reach, pool, tol, segs) = zero_case(keys, eps, page, threads);
                for source in [Keys::Slice(keys), Keys::Run(&runs[set])] {
                    let want = pool
                        .install(|| -> Result<Option<(LayerBuild, f64)>> {
                            let lines = page_aware_lines_in(source, &segs, tol, budget)?;
                            let (entries, starts) =
                                band_entries(n, &lines, &|i| first_key_of(&segs, i), None, 1, page)?;
                            measured_band_within(source, &starts, &entries, page, page, reach, limit)
                        })
                        .unwrap();
                    let got = pool
                        .install(|| lines_measured_within(source, &segs, tol, budget, reach, limit))
                        .unwrap();
                    match (got, want) {
                        (None, None) => {}
                        (Some((g, ge)), Some((w, we))) => {
                            prop_assert_eq!(&g.flat, &w.flat);
                            prop_assert_eq!(g.kind, w.kind);
                            prop_assert_eq!(ge, we);
                        }
                        (g, w) => prop_assert!(false, "stopped {} vs {}", g.is_none(), w.is_none()),
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    /// The zero-interval band `ahead::Ahead` lines and meters during the
    /// first pass, before the budget is known, is `lines_measured_within`'s
    /// over the same segments once it is, bit for bit (layer, bounds, extra
    /// pages): budgets anywhere, also exactly at a segment's crossings per
    /// key and its bucket's edges, guesses of the budget missing, right or
    /// wrong, floors up to the budget, keys fed in any chunks, segments
    /// longer than what the pass holds, keys in memory and in a run, 1–3
    /// threads.
    #[test]
    fn lines_ahead_equal_lines_after_the_budget() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let mut sets = measure_sets(&[("osm-like", 5), ("books-like", 7), ("fb-like", 9)]);
        // Dense stretches between jumps, and a set whose first segment
        // holds most of the keys.
        sets.push((0..9_000u64).map(|i| i * 2 + (i / 500) * 1_000_000).collect());
        sets.push(
            (0..8_000u64)
                .map(|i| if i < 7_000 { i * 3 } else { (1 << 50) | (i * i) })
                .collect(),
        );
        let runs = runs_of(&sets);
        let strat = (
            (
                0usize..sets.len(),
                prop_oneof![1u64..8, 8u64..80],
                prop_oneof![2u64..300, Just(255)],
            ),
            (
                1usize..4,
                prop_oneof![Just(usize::MAX), 30usize..3_000],
                1usize..5_000,
            ),
            (0usize..4, 0.0f64..1.0, any::<usize>(), 0.0f64..1.0),
            (0usize..4, 0.0f64..1.5),
        );
        let mut runner = TestRunner::new(Config::with_cases(256));
        runner
            .run(
                &strat,
                |((set, eps, page), (threads, hold, chunk), (how, x, pick, u), (guessed, g))| {
                    let keys = &sets[set];
                    let (reach, pool, tol, segs) = zero_case(keys, eps, page, threads);
                    let budget = match how {
                        0 => x,
                        1 => {
                            // Exactly a segment's crossings per key.
                            let s = &segs[pick % segs.len()];
                            middle_cost(Win::all(keys), s, tol) as f64 / s.len as f64
                        }
                        2 => 0.0,
                        _ => f64::INFINITY,
                    };
                    let floor = if budget.is_finite() { budget * u } else { u };
                    let guess = Guess::default();
                    match guessed {
                        0 => {}
                        1 => guess.set((budget - floor).max(0.0)),
                        _ => guess.set(g),
                    }
                    for source in [Keys::Slice(keys), Keys::Run(&runs[set])] {
                        let want = pool
                            .install(|| {
                                lines_measured_within(source, &segs, tol, budget, reach, f64::INFINITY)
                            })
                            .unwrap()
                            .unwrap();
                        let (got, got_segs) = pool
                            .install(|| -> Result<_> {
                                let mut a =
                                    ahead::Ahead::holding(eps, page, reach, floor, hold, guess.clone());
                                for (c, part) in keys.chunks(chunk).enumerate() {
                                    a.push(c * chunk, part);
                                }
                                let got_segs = a.segments().to_vec();
                                Ok((a.resolve(source, budget)?, got_segs))
                            })
                            .unwrap();
                        prop_assert_eq!(&got_segs, &segs);
                        prop_assert_eq!(&got.0.flat, &want.0.flat);
                        prop_assert_eq!(got.0.kind, want.0.kind);
                        prop_assert_eq!(got.1.to_bits(), want.1.to_bits());
                    }
                    Ok(())
                },
            )
            .unwrap();
    }

    /// The one-pass `rounded_band` rounds as `rounded_offsets` and measures
    /// as `measured_band` of its entries: every unit, offsets moved (some to
    /// exactly half a unit, where rounding down must win a tie), small
    /// reaches and windows.
    #[test]
    fn folded_measures_match_separate_passes() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let sets = measure_sets(&[("osm-like", 4), ("wiki-like", 6), ("fb-like", 8)]);
        let runs = runs_of(&sets);
        // Pages that divide the numbers of keys too: windows past the last
        // key then reach a page of their own unless cut at the end.
        let strat = (
            0usize..sets.len(),
            prop_oneof![0u64..4, 4u64..80],
            prop_oneof![1u64..300, Just(100), Just(125), Just(151), Just(250)],
            1usize..4,
            0u64..3,
        );
        let mut runner = TestRunner::new(Config::with_cases(48));
        runner
            .run(&strat, |(set, eps, page, threads, granule)| {
                let keys = &sets[set];
                let n = keys.len();
                let reach = window_reach(eps.saturating_mul(2), page);
                let g = granule.max(1);
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                for source in [Keys::Slice(keys), Keys::Run(&runs[set])] {
                    let tol = Tolerance {
                        eps,
                        granule: 1,
                        zero_page: 0,
                    };
                    let segs = crate::model::optimal_pla_points(tol.points(keys));
                    let first_key = |i: usize| first_key_of(&segs, i);
                    let (entries, starts) =
                        band_entries(n, &lines_of(&segs), &first_key, None, 1, 0).unwrap();
                    let want = measured_band(source, &starts, &entries, 0, page, reach).unwrap();
                    let fold = TallyFold {
                        page,
                        reach,
                        guess: Guess::default(),
                    };
                    let (got_segs, acc) = pool
                        .install(|| segment_stream_folded(source, tol, &fold))
                        .unwrap();
                    prop_assert_eq!(&got_segs, &segs);
                    let got = acc
                        .into_tally(n as u64, reach)
                        .finish(source, &entries, 0, page, reach)
                        .unwrap();
                    prop_assert_eq!(&got.0.flat, &want.0.flat);
                    prop_assert_eq!(got.0.kind, want.0.kind);
                    prop_assert_eq!(got.1, want.1, "extra pages, page {}, reach {}", page, reach);
                    // The segments not kept: their number, and the same tally;
                    // beside them, the zero-interval segmentation at `eps`.
                    let e = i128::from(eps);
                    let interval = move |i: usize| (i as i128 - e, i as i128 + e);
                    let zero = Tolerance::items(eps, page);
                    let (count, acc, beside) = pool
                        .install(|| -> Result<_> {
                            let mut other = RunSegmenter::new(zero);
                            let mut beside = Vec::new();
                            let (count, acc) = crate::index::layered::segment::fold_segments_beside(
                                source,
                                interval,
                                &fold,
                                &mut |i, c| other.push(i, c, &mut |s| beside.push(s)),
                            )?;
                            beside.extend(other.finish());
                            Ok((count, acc, beside))
                        })
                        .unwrap();
                    prop_assert_eq!(count, segs.len());
                    prop_assert_eq!(beside, crate::model::optimal_pla_points(zero.points(keys)));
                    if let Some(extra) = acc.into_tally(n as u64, reach).counted(n as u64, 0, page, reach) {
                        prop_assert_eq!(extra, want.1);
                    }
                    // The bounds of a band in units of `g` records.
                    let tol = Tolerance {
                        eps,
                        granule: g,
                        zero_page: 0,
                    };
                    let segs = crate::model::optimal_pla_points(tol.points(keys));
                    let first_key = |i: usize| first_key_of(&segs, i);
                    let want = band_layer_in(source, &lines_of(&segs), &first_key, None, g, 0).unwrap();
                    let (got_segs, bounds) = pool
                        .install(|| segment_stream_folded(source, tol, &BoundsFold { granule: g }))
                        .unwrap();
                    prop_assert_eq!(&got_segs, &segs);
                    let LayerKind::Band { eps_lo, eps_hi, .. } = want.kind else {
                        panic!("a band")
                    };
                    prop_assert_eq!(bounds, (eps_lo, eps_hi), "granule {}", g);
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn rounded_band_matches_separate_passes() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let sets: Vec<Vec<u64>> = [("osm-like", 4u64), ("wiki-like", 6), ("fb-like", 8)]
            .iter()
            .map(|&(d, seed)| crate::data::generate(d.parse().unwrap(), 20_000, seed).unwrap())
            .collect();
        let strat = (
            0usize..3,
            prop_oneof![0u64..4, 4u64..80],
            prop_oneof![Just(255u64), 1u64..300],
            0usize..OFF_UNITS.len(),
            prop_oneof![Just(0i32), 1i32..2_000],
            0u64..2_000,
        );
        let mut runner = TestRunner::new(Config::with_cases(64));
        let stopped = std::cell::Cell::new(0usize);
        runner
            .run(&strat, |(set, eps, page, u, jitter, reach)| {
                let keys = &sets[set];
                let tol = Tolerance {
                    eps,
                    granule: 1,
                    zero_page: page,
                };
                let unit = OFF_UNITS[u];
                let segs = crate::model::optimal_pla_points(tol.points(keys));
                let first_key = |i: usize| keys.get(i).copied().unwrap_or(0);
                let (mut entries, starts) =
                    band_entries(keys.len(), &lines_of(&segs), &first_key, None, 1, page).unwrap();
                for (j, e) in entries.iter_mut().enumerate() {
                    match j % 4 {
                        1 => e.off = e.off.saturating_add(jitter),
                        2 => e.off = e.off.div_euclid(unit) * unit + unit / 2,
                        _ => {}
                    }
                }
                // Each entry's rank, counted in lanes where they fit, as the
                // plain per-key definition counts it, and stopped by it.
                let cap = eps + (unit as u64).div_ceil(32);
                let n = keys.len();
                for j in (0..entries.len()).step_by(7) {
                    for (off, dist) in [(entries[j].off, 0), (entries[j].off.saturating_add(unit), 3)] {
                        let e = super::super::entries::BandEntry { off, ..entries[j] };
                        let next = entries.get(j + 1).map_or(n as u64, |f| f.base);
                        let pg = page.max(1);
                        let (mut worst, mut extra, mut want_preds) = (0u64, 0u64, Vec::new());
                        let end = starts.get(j + 1).copied().unwrap_or(n);
                        for (i, &k) in keys.iter().enumerate().take(end).skip(starts[j]) {
                            let p = e.predict(k, next, n as u64);
                            want_preds.push(p);
                            let first = i as u64 / pg * pg;
                            worst = worst
                                .max(first.saturating_sub(p))
                                .max(p.saturating_sub(first + pg - 1));
                            extra += (p + eps) / pg - p.saturating_sub(eps) / pg;
                        }
                        let want = (worst > cap, extra, dist);
                        let rank = |beat: Option<Rank>, preds: Option<&mut Vec<u64>>| {
                            rounding_rank(
                                Win::all(keys),
                                &starts,
                                &entries,
                                j,
                                off,
                                dist,
                                beat,
                                tol,
                                cap,
                                preds,
                            )
                        };
                        let mut preds = Vec::new();
                        prop_assert_eq!(rank(None, Some(&mut preds)), Some(want));
                        prop_assert_eq!(&preds, &want_preds);
                        prop_assert_eq!(rank(Some(want), None), None);
                        prop_assert_eq!(rank(Some((want.0, want.1 + 1, dist)), None), Some(want));
                    }
                }
                let (q, band, extra) =
                    rounded_band(Keys::Slice(keys), &starts, &entries, unit, tol, reach).unwrap();
                let want_q = rounded_offsets(Keys::Slice(keys), &starts, &entries, unit, tol).unwrap();
                let (want, want_extra) =
                    measured_band(Keys::Slice(keys), &starts, &want_q, page, page, reach).unwrap();
                prop_assert_eq!(&q, &want_q);
                prop_assert_eq!(format!("{:?}", band.kind), format!("{:?}", want.kind));
                prop_assert_eq!(&band.flat, &want.flat);
                prop_assert_eq!(extra, want_extra);
                for f in [0.0, 0.3, 0.9, 0.999, 1.0, 1.5] {
                    let limit = extra * f;
                    match rounded_band_within(Keys::Slice(keys), &starts, &entries, unit, tol, reach, limit)
                        .unwrap()
                    {
                        None => {
                            prop_assert!(extra > limit + 1e-12, "stopped at {limit}, extra {extra}");
                            stopped.set(stopped.get() + 1);
                        }
                        Some((q2, b, e)) => {
                            prop_assert_eq!(&q2, &q);
                            prop_assert_eq!(&b.flat, &band.flat);
                            prop_assert_eq!(e, extra);
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
        assert!(stopped.get() > 0);
    }

    /// The window search with window 0 built last, and builds that stop
    /// over their limit, finds the same window, value and extra pages as
    /// the search that builds window 0 up front and every window whole; it
    /// builds window 0 only when no wider window fits, never with a limit.
    #[test]
    fn lazy_window_search_matches_the_eager_one() {
        use proptest::prelude::*;
        // The search as it was: window 0 built as soon as `eps` fails.
        fn eager(eps: u64, max_window: u64, budget: f64, extra: &dyn Fn(u64) -> f64) -> (u64, u64, f64) {
            let fits = |e: f64| e <= budget + 1e-12;
            let first = extra(eps);
            if eps == 0 || (fits(first) && max_window <= eps) {
                return (eps, eps, first);
            }
            let (mut best_w, mut best_extra, mut bad) = if fits(first) {
                (eps, first, max_window.saturating_add(1))
            } else {
                (0, extra(0), eps)
            };
            let tolerance = (eps / 32).max(1);
            while bad - best_w > tolerance {
                let mid = best_w + (bad - best_w) / 2;
                let e = extra(mid);
                if fits(e) {
                    (best_w, best_extra) = (mid, e);
                } else {
                    bad = mid;
                }
            }
            (best_w, best_w, best_extra)
        }
        let strat = (
            0u64..200,
            0u64..200,
            proptest::collection::vec(0.0f64..1.0, 1..8),
            0.0f64..1.0,
            any::<bool>(),
        );
        proptest::test_runner::TestRunner::new(proptest::test_runner::Config::with_cases(256))
            .run(&strat, |(eps, more, steps, budget, stop)| {
                let max_window = eps + more % 3 * more;
                // Extra pages growing with the window, in steps (0 at 0).
                let extra = |w: u64| -> f64 {
                    if w == 0 {
                        return 0.0;
                    }
                    let at = (w as usize * steps.len()) / (max_window as usize + 1);
                    steps.iter().take(at + 1).sum::<f64>() / steps.len() as f64
                };
                let built = std::cell::RefCell::new(Vec::new());
                let got = widest_window(eps, max_window, budget, |w, limit| {
                    built.borrow_mut().push((w, limit));
                    let e = extra(w);
                    // A build over its limit may stop.
                    Ok(if stop && e > limit + 1e-12 {
                        None
                    } else {
                        Some((w, e))
                    })
                })
                .unwrap();
                prop_assert_eq!(got, eager(eps, max_window, budget, &extra));
                let built = built.into_inner();
                for &(w, limit) in &built {
                    if w == 0 {
                        prop_assert!(limit.is_infinite());
                        prop_assert_eq!(got.1, 0, "window 0 built though {} fits", got.1);
                    }
                }
                Ok(())
            })
            .unwrap();
    }
}
