//! Building layers: step (B+-tree levels), zone maps and bands (linear
//! segments with measured error bounds), and writing them as layer files.

use super::entries::BandEntry;
use super::keys::Keys;
use super::layer::{LayerKind, layer_spec};
use super::spill::{Held, SpillWriter};
use crate::format::PagedWriter;
use crate::format::paged::entries_per_page;
use crate::storage::Directory;
use crate::{Error, Result};

/// A layer ready to be written: its kind and entries back to back.
#[derive(Debug, Clone)]
pub struct LayerBuild {
    /// What the layer is (with measured bounds for bands).
    pub kind: LayerKind,
    /// Entries, `count * kind.width()` bytes.
    pub flat: Vec<u8>,
    /// Successor value of the last entry (the layer below's count for steps,
    /// the sentinel intercept for bands).
    pub last_successor: u64,
}

impl LayerBuild {
    /// Number of entries.
    pub fn count(&self) -> u64 {
        (self.flat.len() / self.kind.width()) as u64
    }

    /// Key of entry `i`.
    pub fn key(&self, i: usize) -> u64 {
        crate::format::bytes::get_u64(&self.flat, i * self.kind.width()).unwrap_or(u64::MAX)
    }

    /// All entry keys.
    pub fn keys(&self) -> Vec<u64> {
        (0..self.count() as usize).map(|i| self.key(i)).collect()
    }
}

/// Writes a layer as the paged file `name`, with `build_id` (the index
/// directory build's, 0 for none) in its header; each page's aux word is
/// the successor value of its last entry.
pub(crate) fn write_layer(
    dir: &dyn Directory,
    name: &str,
    layer: &LayerBuild,
    page_size: usize,
    build_id: u64,
) -> Result<()> {
    let width = layer.kind.width();
    let mut w = PagedWriter::create(dir, name, layer_spec(width), page_size)?;
    w.set_build_id(build_id);
    let count = layer.count() as usize;
    let succ_field = layer.kind.successor_field();
    for i in 0..count {
        let entry = layer
            .flat
            .get(i * width..(i + 1) * width)
            .ok_or_else(|| Error::invalid("layer entry"))?;
        let aux = match succ_field {
            Some(f) if i + 1 < count => crate::format::bytes::get_u64(&layer.flat, (i + 1) * width + f)
                .unwrap_or(layer.last_successor),
            Some(_) => layer.last_successor,
            None => 0,
        };
        w.push(entry, aux)?;
    }
    w.finish(&layer.kind.encode())?;
    Ok(())
}

/// A zone layer over the pages of a data run: the first key of every page.
pub(crate) fn zone_layer(keys: &[u64], per_page: usize) -> LayerBuild {
    let mut flat = Vec::with_capacity(keys.len().div_ceil(per_page) * 8);
    for k in keys.iter().step_by(per_page.max(1)) {
        flat.extend_from_slice(&k.to_le_bytes());
    }
    LayerBuild {
        kind: LayerKind::Zone {
            span: per_page as u64,
        },
        flat,
        last_successor: 0,
    }
}

/// A step layer with one entry per `fanout` entries (or records) below:
/// entry `j` = (key of position `j * fanout`, `j * fanout`). Over a layer
/// whose pages hold `fanout` entries, each step covers exactly one page.
pub(crate) fn step_layer(below_keys: &[u64], fanout: usize) -> LayerBuild {
    let fanout = fanout.max(2);
    step_layer_of_firsts(
        below_keys.iter().step_by(fanout).copied(),
        fanout,
        below_keys.len() as u64,
    )
}

/// [`step_layer`] from the first key of every group of `fanout` positions
/// below (`below` positions in all): entry `j` = (`firsts[j]`, `j * fanout`).
pub(crate) fn step_layer_of_firsts(
    firsts: impl ExactSizeIterator<Item = u64>,
    fanout: usize,
    below: u64,
) -> LayerBuild {
    let mut flat = Vec::with_capacity(firsts.len() * 16);
    for (j, k) in firsts.enumerate() {
        flat.extend_from_slice(&k.to_le_bytes());
        flat.extend_from_slice(&((j * fanout) as u64).to_le_bytes());
    }
    LayerBuild {
        kind: LayerKind::Step,
        flat,
        last_successor: below,
    }
}

/// Stacks step layers (a B+-tree over `below`) until the top fits in one
/// page of `page_size`; returns them bottom-up.
pub(super) fn step_stack(below: &LayerBuild, page_size: usize) -> Vec<LayerBuild> {
    let fanout = entries_per_page(page_size, LayerKind::Step.width());
    let mut out: Vec<LayerBuild> = Vec::new();
    let mut keys = below.keys();
    // Entries per page of the current top layer; each step entry covers one
    // page of the layer below, so a search reads exactly one page per level.
    let mut per_page = entries_per_page(page_size, below.kind.width());
    while keys.len() > per_page {
        let l = step_layer(&keys, per_page);
        keys = l.keys();
        out.push(l);
        per_page = fanout;
    }
    out
}

/// One linear segment of a band layer: its first point and its line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegmentLine {
    /// Index of its first point.
    pub start: usize,
    /// Slope in positions (granules) per key unit.
    pub slope: f64,
    /// Predicted position (granules) at its first key.
    pub intercept: f64,
}

/// Builds a band layer over points `(keys[i], i)` with lines from a
/// segmentation, predicting in units of `granule` positions, measuring the
/// error bounds with the exact query-time arithmetic ([`BandEntry::predict`]).
/// With `zero_page > 0` (item granularity only), the error of a prediction in
/// the key's own page of `zero_page` positions is zero (Zhang §6.1).
pub(crate) fn band_layer(
    keys: &[u64],
    segments: &[SegmentLine],
    granule: u64,
    zero_page: u64,
) -> Result<LayerBuild> {
    band_layer_keyed(keys, segments, None, granule, zero_page)
}

/// [`band_layer`] with explicit entry keys: entry `j` is keyed by
/// `entry_keys[j]`, any value in `(last key of segment j-1, first key of
/// segment j]` (a rough separator, Zhang §8.2.1), and its line is re-anchored
/// there. Routing of present keys is unchanged; keys in the gap before a
/// segment may be routed to it, whose prediction then saturates at its
/// intercept — still inside the measured bounds of its first key.
pub(super) fn band_layer_keyed(
    keys: &[u64],
    segments: &[SegmentLine],
    entry_keys: Option<&[u64]>,
    granule: u64,
    zero_page: u64,
) -> Result<LayerBuild> {
    let first_key = |i: usize| keys.get(i).copied().unwrap_or(0);
    band_layer_in(
        Keys::Slice(keys),
        segments,
        &first_key,
        entry_keys,
        granule,
        zero_page,
    )
}

/// [`band_layer_keyed`] over keys in memory or in a data run (measured in
/// one parallel pass); `first_key(i)` is key `i` for every segment start `i`.
pub(crate) fn band_layer_in(
    keys: Keys<'_>,
    segments: &[SegmentLine],
    first_key: &dyn Fn(usize) -> u64,
    entry_keys: Option<&[u64]>,
    granule: u64,
    zero_page: u64,
) -> Result<LayerBuild> {
    let (entries, starts) = band_entries(keys.len(), segments, first_key, entry_keys, granule, zero_page)?;
    band_of_entries_in(keys, &starts, &entries, granule.max(1), zero_page)
}

/// The entries (and their segments' starts) [`band_layer_in`] builds over
/// `n` keys, before it measures their error bounds.
pub(crate) fn band_entries(
    n: usize,
    segments: &[SegmentLine],
    first_key: &dyn Fn(usize) -> u64,
    entry_keys: Option<&[u64]>,
    granule: u64,
    zero_page: u64,
) -> Result<(Vec<BandEntry>, Vec<usize>)> {
    let len = n;
    let n = n as u64;
    let g = granule.max(1);
    if zero_page > 0 && g != 1 {
        return Err(Error::invalid(
            "zero intervals apply to item-level prediction only",
        ));
    }
    let max_unit = n.div_ceil(g);
    let m = segments.len();
    if m == 0 && n > 0 {
        return Err(Error::invalid(
            "a band layer over keys needs at least one segment",
        ));
    }
    if entry_keys.is_some_and(|e| e.len() != m) {
        return Err(Error::invalid("one entry key per segment"));
    }
    if segments
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.start >= b.start))
        || segments.last().is_some_and(|s| s.start >= len)
    {
        return Err(Error::invalid(
            "segments must start at increasing positions inside the keys",
        ));
    }
    let entries: Vec<BandEntry> = segments
        .iter()
        .enumerate()
        .map(|(j, s)| {
            band_entry_of(
                s,
                first_key(s.start),
                entry_keys.and_then(|e| e.get(j)).copied(),
                g,
                zero_page,
                max_unit,
            )
        })
        .collect();
    let starts: Vec<usize> = segments.iter().map(|s| s.start).collect();
    Ok((entries, starts))
}

/// The band entry of segment line `s` whose first key is `first`, keyed at
/// `entry_key` if given and not above `first` (a rough separator: the line
/// re-anchored there), else at `first`; predictions in units of `g`
/// records of `max_unit`, or with zero intervals of `zero_page` records.
pub(super) fn band_entry_of(
    s: &SegmentLine,
    first: u64,
    entry_key: Option<u64>,
    g: u64,
    zero_page: u64,
    max_unit: u64,
) -> BandEntry {
    // Entry key and the line's value there (re-anchored at a rough separator).
    let (key, icpt) = match entry_key {
        Some(e) if e <= first => (e, s.intercept - s.slope * (first - e) as f64),
        _ => (first, s.intercept),
    };
    let base = band_base(s.start, g, zero_page, max_unit);
    let scale = super::entries::OFF_SCALE as f64;
    let off = if icpt.is_finite() {
        ((icpt - base as f64) * scale).round()
    } else {
        0.0
    };
    let off = off.clamp(i32::MIN as f64, i32::MAX as f64) as i32;
    let slope = if s.slope.is_finite() && s.slope > 0.0 {
        s.slope as f32
    } else {
        0.0
    };
    BandEntry {
        key,
        slope: if slope.is_finite() { slope } else { f32::MAX },
        off,
        base,
    }
}

/// The clamp floor of an entry whose segment starts at record `start`: the
/// segment's first unit, or with zero intervals the middle of its first
/// key's page. Any value in that page is as good for the page-metric error
/// (it lies between the pages of the segment's keys); the middle keeps
/// clamped predictions' windows inside one page, and values
/// `page * P + P / 2` compress well.
pub(super) fn band_base(start: usize, g: u64, zero_page: u64, max_unit: u64) -> u64 {
    match (start as u64).checked_div(zero_page) {
        Some(page) => page * zero_page + zero_page / 2,
        None => start as u64 / g.max(1),
    }
    .min(max_unit)
}

/// The error bounds of a band without zero intervals over a segmentation's
/// keys ([`band_of_entries_in`]'s), measured segment by segment while the
/// segmentation holds its keys ([`super::segment::optimal_segments_folded`]):
/// each segment's entry ([`band_entry_of`], keyed at its first key) and the
/// next one's clamp floor follow from the segment alone. The number of keys,
/// unknown over a run being written, only clamps the last segment's
/// predictions (every other clamp floor lies below it).
pub(super) struct BoundsFold {
    /// Records a prediction's unit holds.
    pub granule: u64,
}

impl super::segment::SegmentFold for BoundsFold {
    type Acc = (u64, u64);

    fn empty(&self) -> (u64, u64) {
        (0, 0)
    }

    fn add(&self, acc: &mut (u64, u64), seg: &crate::model::Segment, last: bool, first: usize, keys: &[u64]) {
        let g = self.granule.max(1);
        let (max_unit, next) = if last {
            let m = (seg.end() as u64).div_ceil(g);
            (m, m)
        } else {
            (u64::MAX, band_base(seg.end(), g, 0, u64::MAX))
        };
        let line = SegmentLine {
            start: seg.start,
            slope: seg.slope,
            intercept: seg.intercept,
        };
        let e = band_entry_of(&line, seg.first_key, None, g, 0, max_unit).predictor(next, max_unit);
        let (mut lo, mut hi) = *acc;
        for (d, &k) in keys.iter().enumerate() {
            let p = e.predict(k);
            (lo, hi) = error_at(lo, hi, (first + d) as u64, p, g, 0);
        }
        *acc = (lo, hi);
    }

    fn merge(&self, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
        (a.0.max(b.0), a.1.max(b.1))
    }
}

/// The error bounds `(lo, hi)` widened by record `y` predicted at `p`
/// (units of `g` records, or with zero intervals of `zero_page` records).
#[inline]
fn error_at(lo: u64, hi: u64, y: u64, p: u64, g: u64, zero_page: u64) -> (u64, u64) {
    if let Some(page) = y.checked_div(zero_page) {
        let page_start = page * zero_page;
        let page_last = page_start + zero_page - 1;
        (
            lo.max(p.saturating_sub(page_last)),
            hi.max(page_start.saturating_sub(p)),
        )
    } else {
        let u = y / g;
        (lo.max(p.saturating_sub(u)), hi.max(u.saturating_sub(p)))
    }
}

/// Keys a part of a parallel measuring pass covers at least.
// Small in unit tests, so that every measuring pass there is cut into parts.
pub(super) const MEASURE_PART: usize = if cfg!(test) { 64 } else { 1 << 18 };

/// A band layer of given entries over keys in memory or in a data run
/// (entry `j`'s keys start at `starts[j]`), its error bounds measured with
/// the query-time arithmetic ([`BandEntry::predict`]), as [`band_layer`]
/// measures them. The keys are cut
/// into parts measured in parallel, each walking the entries from the one
/// that covers its first key; the maxima are the same whatever the threads.
pub(crate) fn band_of_entries_in(
    keys: Keys<'_>,
    starts: &[usize],
    entries: &[BandEntry],
    granule: u64,
    zero_page: u64,
) -> Result<LayerBuild> {
    let g = granule.max(1);
    let n = keys.len();
    let max_unit = (n as u64).div_ceil(g);
    let used = starts.len().min(entries.len());
    let (starts, entries) = (
        starts.get(..used).unwrap_or_default(),
        entries.get(..used).unwrap_or_default(),
    );
    let parts = keys.map_parts(MEASURE_PART, |range| {
        let (mut lo, mut hi) = (0u64, 0u64);
        // Entries starting at or before the key: the last of them covers it
        // (keys before the first entry's start belong to none and are skipped).
        let mut j = starts.partition_point(|&s| s <= range.start);
        // Entry `j - 1`'s predictor, made again when `j` moves.
        let predictor = |j: usize| {
            let next = entries.get(j).map_or(max_unit, |f| f.base);
            j.checked_sub(1)
                .and_then(|c| entries.get(c))
                .map(|e| e.predictor(next, max_unit))
        };
        let mut e = predictor(j);
        keys.for_each(range, |i, k| {
            if starts.get(j).is_some_and(|&s| s <= i) {
                while starts.get(j).is_some_and(|&s| s <= i) {
                    j += 1;
                }
                e = predictor(j);
            }
            let Some(e) = e else {
                return;
            };
            let p = e.predict(k);
            (lo, hi) = error_at(lo, hi, i as u64, p, g, zero_page);
        })?;
        Ok((lo, hi))
    })?;
    let (eps_lo, eps_hi) = parts
        .into_iter()
        .fold((0, 0), |a: (u64, u64), b| (a.0.max(b.0), a.1.max(b.1)));
    Ok(band_of_bounds(entries, g, zero_page, (eps_lo, eps_hi), max_unit))
}

/// The lines of one part of the keys (its first position, its keys), starts
/// absolute: what [`band_in_parts`] fits.
pub(crate) type PartLines<'a> = dyn Fn(usize, &[u64]) -> Result<Vec<SegmentLine>> + Sync + 'a;

/// A band layer over `keys` (granule 1, zero intervals of `zero_page`
/// positions, 0: none) fitted part by
/// part, so that no more than a few parts' keys and lines are held however
/// large the layer: the keys are cut into parts of `part` keys (a multiple
/// of `zero_page`), each read
/// into memory in turn and fitted by `lines(a, part_keys)` (lines with
/// absolute starts, the first at `a`, increasing); every segment's entry is
/// made and its keys' errors measured (with the query-time arithmetic, as
/// [`band_of_entries_in`]) while its part is held, and the entries go to
/// a [`SpillWriter`] in order (spilled past `spill`
/// bytes). As many parts as threads are fitted at once. The layer is
/// [`band_layer_in`]'s over the same lines.
pub(crate) fn band_in_parts(
    keys: Keys<'_>,
    part: usize,
    zero_page: u64,
    lines: &PartLines<'_>,
    spill: usize,
) -> Result<HeldLayer> {
    let kind = LayerKind::Band {
        granule: 1,
        zero_page,
        eps_lo: 0,
        eps_hi: 0,
    };
    if zero_page > 0 && part as u64 % zero_page != 0 {
        return Err(Error::invalid(
            "parts of a zero-interval band must be whole pages",
        ));
    }
    let mut out = SpillWriter::new(kind.width(), spill);
    use rayon::prelude::*;
    let n = keys.len();
    let max_unit = n as u64;
    let part = part.max(1);
    let starts: Vec<usize> = (0..n).step_by(part).collect();
    let (mut lo, mut hi) = (0u64, 0u64);
    for batch in starts.chunks(rayon::current_num_threads().max(1)) {
        let done: Vec<Result<(Vec<u8>, u64, u64)>> = batch
            .par_iter()
            .map(|&a| {
                let b = (a + part).min(n);
                let held = keys.range_in_memory(a..b)?;
                let slice: &[u64] = &held;
                let ls = lines(a, slice)?;
                let mut flat = Vec::with_capacity(ls.len() * 24);
                let (mut lo, mut hi) = (0u64, 0u64);
                let mut at = a;
                for (t, l) in ls.iter().enumerate() {
                    let end = ls.get(t + 1).map_or(b, |m| m.start);
                    let seg = (l.start == at && end > l.start && end <= b)
                        .then(|| slice.get(l.start - a..end - a))
                        .flatten()
                        .ok_or_else(|| {
                            Error::invalid("segments must start at increasing positions inside the keys")
                        })?;
                    let first = seg.first().copied().unwrap_or(0);
                    let e = band_entry_of(l, first, None, 1, zero_page, max_unit);
                    // The clamp floor: the next segment's base (past the
                    // last, the end of the keys).
                    let next = if end < n {
                        band_base(end, 1, zero_page, max_unit)
                    } else {
                        max_unit
                    };
                    let predictor = e.predictor(next, max_unit);
                    for (d, &k) in seg.iter().enumerate() {
                        (lo, hi) = error_at(lo, hi, (l.start + d) as u64, predictor.predict(k), 1, zero_page);
                    }
                    e.write(&mut flat);
                    at = end;
                }
                if at != b {
                    return Err(Error::invalid("a part's segments do not cover its keys"));
                }
                Ok((flat, lo, hi))
            })
            .collect();
        for d in done {
            let (flat, l, h) = d?;
            (lo, hi) = (lo.max(l), hi.max(h));
            out.push(&flat)?;
        }
    }
    Ok(HeldLayer {
        kind: LayerKind::Band {
            granule: 1,
            zero_page,
            eps_lo: lo,
            eps_hi: hi,
        },
        held: out.finish()?,
        last_successor: max_unit,
    })
}

/// A band layer of `entries` with error bounds `(eps_lo, eps_hi)` measured
/// already.
pub(super) fn band_of_bounds(
    entries: &[BandEntry],
    granule: u64,
    zero_page: u64,
    (eps_lo, eps_hi): (u64, u64),
    last_successor: u64,
) -> LayerBuild {
    let mut flat = Vec::with_capacity(entries.len() * 24);
    for e in entries {
        e.write(&mut flat);
    }
    LayerBuild {
        kind: LayerKind::Band {
            granule,
            zero_page,
            eps_lo,
            eps_hi,
        },
        flat,
        last_successor,
    }
}

/// The lines of a segmentation.
pub(crate) fn lines_of(segs: &[crate::model::Segment]) -> Vec<SegmentLine> {
    segs.iter()
        .map(|s| SegmentLine {
            start: s.start,
            slope: s.slope,
            intercept: s.intercept,
        })
        .collect()
}

/// A layer holding one blob (a compressed layer).
pub(super) fn blob_layer(kind: LayerKind, bytes: Vec<u8>) -> LayerBuild {
    LayerBuild {
        kind,
        flat: bytes,
        last_successor: 0,
    }
}

/// Separator bounds for rough separators: entry `j` may be keyed anywhere
/// in `[last key before it + 1, its first key]` (`[0, first]` for `j = 0`).
pub(super) fn separator_bounds(keys: &[u64], starts: &[usize]) -> (Vec<u64>, Vec<u64>) {
    let lo = starts
        .iter()
        .map(|&s| {
            if s == 0 {
                0
            } else {
                keys.get(s - 1).map_or(0, |k| k + 1)
            }
        })
        .collect();
    let hi = starts
        .iter()
        .map(|&s| keys.get(s).copied().unwrap_or(u64::MAX))
        .collect();
    (lo, hi)
}

/// A LeCo-compressed zone map over data pages of `per_page` records: exact
/// first keys, or (`lossy`) rough separators chosen inside each gap between
/// pages to shrink the residuals (Zhang §8, LeCo-Zonemap-D).
pub(crate) fn leco_zone_layer(keys: &[u64], per_page: usize, lossy: bool) -> Result<LayerBuild> {
    let starts: Vec<usize> = (0..keys.len()).step_by(per_page.max(1)).collect();
    let leco = if lossy {
        let (lo, hi) = separator_bounds(keys, &starts);
        crate::model::LecoArray::encode_bounded(&lo, &hi)?
    } else {
        let firsts: Vec<u64> = starts.iter().filter_map(|&s| keys.get(s).copied()).collect();
        crate::model::LecoArray::encode(&firsts)
    };
    Ok(blob_layer(
        LayerKind::LecoZone {
            span: per_page as u64,
            lossy,
        },
        leco.to_bytes(),
    ))
}

/// A zone map over data pages of `per_page` records whose rough separators
/// are gap-coded ([`crate::model::GapArray`]): each lies in the gap before
/// its page, stored at the precision that gap allows, in blocks of
/// `2^block_log2` separators.
pub(super) fn gap_zone_layer(keys: &[u64], per_page: usize, block_log2: u32) -> Result<LayerBuild> {
    let starts: Vec<usize> = (0..keys.len()).step_by(per_page.max(1)).collect();
    let (lo, hi) = separator_bounds(keys, &starts);
    let gaps = crate::model::GapArray::encode_bounded_with_block(&lo, &hi, block_log2)?;
    Ok(blob_layer(
        LayerKind::GapZone {
            span: per_page as u64,
        },
        gaps.to_bytes(),
    ))
}

/// A radix table over `below_keys` (RadixSpline's root) with at most
/// `2^radix_bits` buckets: entry `b` = first position whose key has prefix
/// `(key - min) >> shift >= b`.
pub(super) fn radix_layer(below_keys: &[u64], radix_bits: u32) -> LayerBuild {
    let min = below_keys.first().copied().unwrap_or(0);
    let max = below_keys.last().copied().unwrap_or(0);
    let span_bits = 64 - (max - min).leading_zeros();
    let shift = span_bits.saturating_sub(radix_bits.min(crate::model::radix_spline::MAX_RADIX_BITS));
    let buckets = ((max - min).checked_shr(shift).unwrap_or(0) + 1) as usize;
    let mut flat = Vec::with_capacity(buckets * 8);
    let mut i = 0usize;
    for b in 0..buckets as u64 {
        while below_keys
            .get(i)
            .is_some_and(|&k| (k - min).checked_shr(shift).unwrap_or(0) < b)
        {
            i += 1;
        }
        flat.extend_from_slice(&(i as u64).to_le_bytes());
    }
    LayerBuild {
        kind: LayerKind::Radix { min_key: min, shift },
        flat,
        last_successor: below_keys.len() as u64,
    }
}

/// The two layers of an RMI: leaves (over the data) and the one-entry root.
pub(super) fn rmi_layers(rmi: &crate::model::Rmi) -> (LayerBuild, LayerBuild) {
    let root = rmi.root();
    let mut leaves = Vec::with_capacity(rmi.leaves().len() * 40);
    for (leaf, first) in rmi.leaves().iter().zip(rmi.bounds()) {
        leaves.extend_from_slice(&leaf.base.to_le_bytes());
        leaves.extend_from_slice(&leaf.slope.to_bits().to_le_bytes());
        leaves.extend_from_slice(&leaf.intercept.to_bits().to_le_bytes());
        let errs = (leaf.err_lo as u32 as u64) | ((leaf.err_hi as u32 as u64) << 32);
        leaves.extend_from_slice(&errs.to_le_bytes());
        leaves.extend_from_slice(&first.to_le_bytes());
    }
    let mut top = Vec::with_capacity(48);
    for v in [
        root.min_key,
        root.max_key,
        root.slope.to_bits(),
        root.intercept.to_bits(),
        root.models as u64,
        root.n,
    ] {
        top.extend_from_slice(&v.to_le_bytes());
    }
    (
        LayerBuild {
            kind: LayerKind::RmiLeaf {
                n: root.n,
                min_key: root.min_key,
                max_key: root.max_key,
            },
            flat: leaves,
            last_successor: root.n,
        },
        LayerBuild {
            kind: LayerKind::RmiRoot,
            flat: top,
            last_successor: 0,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The error bounds of a band, measured key by key with the query
    /// arithmetic (the reference for the parallel pass).
    fn brute_bounds(
        keys: &[u64],
        starts: &[usize],
        entries: &[BandEntry],
        g: u64,
        zero_page: u64,
    ) -> (u64, u64) {
        let max_unit = (keys.len() as u64).div_ceil(g);
        let (mut lo, mut hi) = (0u64, 0u64);
        for (j, e) in entries.iter().enumerate() {
            let next = entries.get(j + 1).map_or(max_unit, |f| f.base);
            let end = starts.get(j + 1).copied().unwrap_or(keys.len());
            for (i, &k) in keys.iter().enumerate().take(end).skip(starts[j]) {
                let p = e.predict(k, next, max_unit);
                let (a, b) = match (i as u64).checked_div(zero_page) {
                    Some(page) => (page * zero_page, page * zero_page + zero_page - 1),
                    None => (i as u64 / g, i as u64 / g),
                };
                hi = hi.max(a.saturating_sub(p));
                lo = lo.max(p.saturating_sub(b));
            }
        }
        (lo, hi)
    }

    proptest! {
        #[test]
        fn prop_parallel_measure_equals_brute_force(
            mut keys in prop::collection::vec(any::<u64>(), 1..2000),
            shift in 0u32..60,
            eps in 0u64..20,
            g in 1u64..5,
            zero in any::<bool>(),
        ) {
            for k in &mut keys {
                *k >>= shift;
            }
            keys.sort_unstable();
            keys.dedup();
            let (g, zero_page) = if zero { (1, 16) } else { (g, 0) };
            let segs = crate::model::optimal_pla(&keys, eps);
            let band = band_layer(&keys, &lines_of(&segs), g, zero_page).unwrap();
            let entries: Vec<BandEntry> = band
                .flat
                .chunks_exact(24)
                .map(|e| BandEntry {
                    key: crate::format::bytes::get_u64(e, 0).unwrap(),
                    slope: f32::from_bits(crate::format::bytes::get_u32(e, 8).unwrap()),
                    off: crate::format::bytes::get_u32(e, 12).unwrap() as i32,
                    base: crate::format::bytes::get_u64(e, 16).unwrap(),
                })
                .collect();
            let starts: Vec<usize> = segs.iter().map(|s| s.start).collect();
            let LayerKind::Band { eps_lo, eps_hi, .. } = band.kind else { panic!("band") };
            prop_assert_eq!((eps_lo, eps_hi), brute_bounds(&keys, &starts, &entries, g, zero_page));
        }
    }
}

/// A built layer whose entries are in memory or spilled.
#[derive(Debug)]
pub(crate) struct HeldLayer {
    /// What the layer is.
    pub(crate) kind: LayerKind,
    /// Its entries.
    pub(crate) held: Held,
    /// Successor value of its last entry (see [`LayerBuild`]).
    pub(crate) last_successor: u64,
}

impl HeldLayer {
    /// `layer`, its entries moved to a spill when they pass `limit` bytes.
    pub(crate) fn spilled_past(layer: LayerBuild, limit: usize) -> Result<Self> {
        if layer.flat.len() <= limit || layer.kind.is_blob() {
            return Ok(layer.into());
        }
        let mut w = SpillWriter::new(layer.kind.width(), limit);
        w.push(&layer.flat)?;
        Ok(HeldLayer {
            kind: layer.kind,
            held: w.finish()?,
            last_successor: layer.last_successor,
        })
    }

    /// The layer with its entries in memory (read back when spilled).
    pub(crate) fn into_build(self) -> Result<LayerBuild> {
        Ok(LayerBuild {
            kind: self.kind,
            flat: self.held.into_vec()?,
            last_successor: self.last_successor,
        })
    }
}

impl From<LayerBuild> for HeldLayer {
    fn from(l: LayerBuild) -> Self {
        HeldLayer {
            kind: l.kind,
            held: Held::Memory(l.flat),
            last_successor: l.last_successor,
        }
    }
}
