//! Layer builders (AirIndex §5.2, Appendix A.1) producing strata layers.
//!
//! A builder turns the *outline* of a layer — its entry keys, entry `i` at
//! position `i` — into a new layer above it. AirIndex measures granularity
//! `λ` in bytes of the layer below; strata's layers are paged arrays of
//! fixed-width entries read in whole pages, so each builder maps `λ` to a
//! parameter in positions of the layer below (`w` = its entry width: 16 for
//! data records, 16/8/24 for step/zone/band entries):
//!
//! | builder | AirIndex | strata layer | `λ` maps to |
//! |---|---|---|---|
//! | `gstep` | GStep(p, λ) | `Step` `(key, start)` | pieces of `q = max(1, ⌊λ / page⌋)` whole pages below |
//! | `gband` | GBand(λ) | `Band` | optimal PLA with `ε = max(1, ⌊(λ/w − 1)/2⌋)`: a window of `2ε+1` positions ≈ `λ` bytes |
//! | `eband` | EBand(λ) | `Band` | groups of `max(2, ⌊λ/w⌋)` positions, each with a fitted line |
//! | `zone` | — | `Zone` `(key)` | as `gstep`, starts implicit (all pieces are equal) |
//! | `zband` | — | `Band` with zero intervals | as `gband`, error counted outside the key's page (data only) |
//! | `leco` | — | `LecoZone` | a LeCo-compressed zone map, pieces as `gstep` (root only) |
//! | `leco-d` | — | `LecoZone` lossy | with rough separators (data only, root only) |
//! | `cpr` | — | `CprBand` | a compressed band, `ε` as `zband` over data, as `gband` above (root only) |
//!
//! How `p` and `λ` of GStep map: a step piece covering part of a page reads
//! the whole page anyway, and pieces with the same number of whole pages all
//! read the same, so pieces are page-aligned runs of `q` pages (the greedy
//! packing of fixed-width positions under `λ` bytes). `p`, the pieces per
//! node, is the node the layer *above* reads: a window of this layer's
//! entries, read in whole pages — so it is set by the granularity of the
//! layer above, not by this builder. A `Band` layer holds one pair of error
//! bounds for all its segments (strata's format), so EBand's per-group fit
//! costs the worst group's error everywhere; GBand does not suffer from it.
//!
//! Every builder reads the layer below in passes ([`Keys`]): over the data
//! run a streamed build never holds its keys. Builders with the same
//! segmentation (`zband` and `cpr` over the data) or the same pieces
//! (`gstep`, `zone`, `leco`, `leco-d` at one span) share one pass for it
//! ([`Shared`]); a shared segmentation is written to a spill past the
//! tuner's limit (`layered::Segs`), so it is held as a few partitions at a
//! time however many segments it has. Builders over more than a million
//! positions segment 1M-position partitions in parallel (page-aligned for
//! zero intervals, each read into memory in turn) and merge the segments;
//! the bands (`gband`, `eband`, `zband`) are fitted and measured one
//! partition at a time (`layered::band_in_parts`), the compressed band over
//! the merged segmentation a window of segments at a time, its error
//! bounds measured with the query arithmetic, so every layer is valid
//! whatever the partitioning.

use std::sync::Arc;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::index::layered::{
    HeldLayer, Keys, LayerBuild, LayerKind, PartLines, SegmentLine, Segs, SegsWriter, band_in_parts,
    compressed_band, leco_zone_layer, lines_of, step_layer_of_firsts, zone_layer,
};
use crate::model::Segment;
use crate::{Error, Result};

/// Keys a part of the parallel equal-group pass covers at least (whole
/// groups). Small in unit tests, so that passes there are cut into parts.
const EQUAL_PART: usize = if cfg!(test) { 64 } else { 1 << 18 };

/// Positions per partition of the parallel segmentation. Small in unit
/// tests, so that their key sets are cut into several.
pub(super) const PARTITION: usize = if cfg!(test) { 1 << 13 } else { 1 << 20 };

/// A family of layer builders.
/// Serialised by [`Family::name`] (`gstep`, `gband`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Greedy step (AirIndex GStep): `Step` entries over page-aligned pieces.
    #[serde(rename = "gstep")]
    GStep,
    /// Greedy band (AirIndex GBand): optimal PLA with a byte precision.
    #[serde(rename = "gband")]
    GBand,
    /// Equal band (AirIndex EBand): equal position groups, fitted lines.
    #[serde(rename = "eband")]
    EBand,
    /// Step with implicit starts (a zone map over any layer): `Zone` entries.
    Zone,
    /// Zero-interval PLA band over the data (Zhang G3).
    #[serde(rename = "zband")]
    ZBand,
    /// LeCo-compressed zone map (Zhang G5), root only.
    Leco,
    /// LeCo zone map with rough separators (Zhang LeCo-Zonemap-D), data only, root only.
    LecoD,
    /// Compressed band (Zhang G4, CprLeCo_PGM_D), root only.
    Cpr,
}

impl Family {
    /// Every family, in the order candidates are listed.
    pub const ALL: [Family; 8] = [
        Family::GStep,
        Family::GBand,
        Family::EBand,
        Family::Zone,
        Family::ZBand,
        Family::Leco,
        Family::LecoD,
        Family::Cpr,
    ];

    /// AirIndex's three builders.
    pub const AIRINDEX: [Family; 3] = [Family::GStep, Family::GBand, Family::EBand];

    /// The name used in parameters and reports.
    pub fn name(self) -> &'static str {
        match self {
            Family::GStep => "gstep",
            Family::GBand => "gband",
            Family::EBand => "eband",
            Family::Zone => "zone",
            Family::ZBand => "zband",
            Family::Leco => "leco",
            Family::LecoD => "leco-d",
            Family::Cpr => "cpr",
        }
    }

    /// Parses one name.
    pub fn parse(s: &str) -> Result<Self> {
        Family::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
            Error::invalid(format!(
                "unknown layer builder {s:?}; known: {}, all, airindex",
                names.join(", ")
            ))
        })
    }

    /// Parses a list separated by `+` (or `,` or spaces): family names,
    /// `all` or `airindex` (gstep+gband+eband). Duplicates are dropped.
    pub fn parse_list(s: &str) -> Result<Vec<Self>> {
        let mut out: Vec<Family> = Vec::new();
        for part in s.split(['+', ',', ' ']).filter(|p| !p.is_empty()) {
            let add: Vec<Family> = match part {
                "all" => Family::ALL.to_vec(),
                "airindex" => Family::AIRINDEX.to_vec(),
                other => vec![Family::parse(other)?],
            };
            for f in add {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
        if out.is_empty() {
            return Err(Error::invalid("no layer builder given"));
        }
        out.sort();
        Ok(out)
    }

    /// Whether the layer is a compressed blob: read whole wherever it sits,
    /// so it is only ever a root.
    pub fn root_only(self) -> bool {
        matches!(self, Family::Leco | Family::LecoD | Family::Cpr)
    }

    /// Whether the builder applies over the data only.
    pub fn data_only(self) -> bool {
        matches!(self, Family::ZBand | Family::LecoD)
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The layer a builder builds over: its entry keys (strictly increasing,
/// entry `i` at position `i`), entry width and entries per page.
#[derive(Debug, Clone, Copy)]
pub struct Outline<'a> {
    /// Entry keys (record keys for the data: in memory or a data run).
    pub keys: Keys<'a>,
    /// Bytes per entry.
    pub width: usize,
    /// Entries per page.
    pub per_page: u64,
    /// Whether this is the data run.
    pub is_data: bool,
}

/// A builder's parameter in positions of the layer below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Param {
    /// Positions per entry (whole pages below).
    Span(u64),
    /// Error bound in positions.
    Eps(u64),
    /// Positions per equal group.
    Group(u64),
}

/// One layer builder: a family at a granularity `λ` (bytes of the layer below).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Builder {
    /// The family.
    pub family: Family,
    /// Granularity in bytes.
    pub lambda: u64,
}

impl Builder {
    /// The builder's parameter over `below`, or `None` when the family does
    /// not apply there or the layer would not be smaller than `below`.
    pub fn param(&self, below: &Outline<'_>, page_size: usize) -> Option<Param> {
        let count = below.keys.len() as u64;
        let w = below.width.max(1) as u64;
        let per_page = below.per_page.max(1);
        if count < 2 || (self.family.data_only() && !below.is_data) {
            return None;
        }
        let positions = self.lambda / w;
        let eps = (positions.saturating_sub(1) / 2).max(1);
        let param = match self.family {
            Family::GStep | Family::Zone | Family::Leco | Family::LecoD => {
                let q = (self.lambda / page_size.max(1) as u64).max(1);
                Param::Span(q.saturating_mul(per_page))
            }
            Family::GBand => Param::Eps(eps),
            Family::EBand => Param::Group(positions.max(2)),
            Family::ZBand => Param::Eps(positions.saturating_sub(1) / 2),
            Family::Cpr if below.is_data => Param::Eps(positions.saturating_sub(1) / 2),
            Family::Cpr => Param::Eps(eps),
        };
        let useful = match (self.family, param) {
            (_, Param::Span(s)) | (_, Param::Group(s)) => s < count,
            // A zero-interval band needs more than one page to point into.
            (Family::ZBand, Param::Eps(_)) => count > per_page,
            (Family::Cpr, Param::Eps(e)) if below.is_data => count > per_page && 2 * e + 1 < count,
            (_, Param::Eps(e)) => 2 * e + 1 < count,
        };
        useful.then_some(param)
    }

    /// The input the builder with parameter `param` over `below` starts
    /// from that other builders may share (one pass computes it for all).
    pub fn shared(&self, param: Param, below: &Outline<'_>) -> Option<Shared> {
        let segments = |eps, page| Some(Shared::Segments { eps, page });
        match (self.family, param) {
            (Family::GStep | Family::Zone | Family::Leco | Family::LecoD, Param::Span(span)) => {
                Some(Shared::Bounds { span })
            }
            (Family::ZBand, Param::Eps(e)) => segments(e, below.per_page.max(1)),
            (Family::Cpr, Param::Eps(e)) => {
                segments(e, if below.is_data { below.per_page.max(1) } else { 0 })
            }
            _ => None,
        }
    }

    /// Builds the layer over `below`. Fails if the builder does not apply
    /// (see [`Builder::param`]).
    pub fn build(&self, below: &Outline<'_>, page_size: usize) -> Result<LayerBuild> {
        self.build_with(
            below,
            page_size,
            &|need| Ok(Arc::new(prepare(below.keys, need, usize::MAX)?)),
            usize::MAX,
        )?
        .into_build()
    }

    /// [`Builder::build`] taking its shared input from `inputs`, so
    /// builders that share one compute it once (`inputs(need)` must return
    /// [`prepare`]`(below.keys, need, spill)`), and spilling the entries of a step,
    /// zone or band layer past `spill` bytes to a temporary file (a
    /// `layered::SpillWriter`).
    pub(crate) fn build_with(
        &self,
        below: &Outline<'_>,
        page_size: usize,
        inputs: &dyn Fn(Shared) -> Result<Arc<Input>>,
        spill: usize,
    ) -> Result<HeldLayer> {
        let param = self.param(below, page_size).ok_or_else(|| {
            Error::invalid(format!(
                "builder {}({}) does not apply over this layer",
                self.family, self.lambda
            ))
        })?;
        let keys = below.keys;
        let n = keys.len() as u64;
        let pp = below.per_page.max(1);
        let input = match self.shared(param, below) {
            Some(need) => Some(inputs(need)?),
            None => None,
        };
        let mismatch = || Error::invalid("builder family and parameter disagree");
        let banded = |part: usize, zero_page: u64, lines: &PartLines<'_>| {
            band_in_parts(keys, part, zero_page, lines, spill)
        };
        let layer = match (self.family, param) {
            // The bands that may be as large as their layer below is fine:
            // fitted in parts into a spill, the partitions those of `segment`.
            (Family::GBand, Param::Eps(e)) => {
                return banded(PARTITION, 0, &|a, part| {
                    Ok(lines_of(&shifted(crate::model::optimal_pla(part, e), a)))
                });
            }
            (Family::EBand, Param::Group(g)) => {
                let g = to_usize(g)?.max(1);
                return banded((EQUAL_PART / g).max(1) * g, 0, &|a, part| {
                    Ok(part
                        .chunks(g)
                        .enumerate()
                        .map(|(t, group)| group_line(a + t * g, group).0)
                        .collect())
                });
            }
            (Family::GStep | Family::Zone | Family::Leco | Family::LecoD, Param::Span(s)) => {
                let Some(Input::Bounds(bounds)) = input.as_deref() else {
                    return Err(mismatch());
                };
                // `bounds` holds each piece's first and last key (each key
                // once for pieces of one position): over it a piece is
                // `local` positions, and the builders read the first key of a
                // piece and the key before it at the same offsets. A step
                // layer covers two positions at least, as `step_layer`.
                let local = to_usize(s.min(2))?;
                let mut layer = match self.family {
                    Family::GStep => {
                        step_layer_of_firsts(bounds.iter().step_by(2).copied(), to_usize(s.max(2))?, n)
                    }
                    Family::Zone => zone_layer(bounds, local),
                    lossy => leco_zone_layer(bounds, local, lossy == Family::LecoD)?,
                };
                if let LayerKind::Zone { span } | LayerKind::LecoZone { span, .. } = &mut layer.kind {
                    *span = s;
                }
                Ok(layer)
            }
            // A zero-interval band too, over the partitions of its (shared,
            // maybe spilled) segmentation, whole pages. Its lines are the
            // segments': with no page budget a page-aware line keeps its
            // segment's own.
            (Family::ZBand, Param::Eps(_)) => {
                let Some(Input::Segments { segs, firsts }) = input.as_deref() else {
                    return Err(mismatch());
                };
                let part = partition_of_pages(pp);
                return banded(part, pp, &|a, _| {
                    let p = a / part;
                    let from = firsts.get(p).copied().unwrap_or(segs.len());
                    let to = firsts.get(p + 1).copied().unwrap_or(segs.len());
                    Ok(lines_of(&segs.range(from..to)?))
                });
            }
            (Family::Cpr, Param::Eps(e)) => {
                let Some(Input::Segments { segs, .. }) = input.as_deref() else {
                    return Err(mismatch());
                };
                let zp = if below.is_data { pp } else { 0 };
                compressed_band(keys, segs, e, zp, f64::INFINITY)
            }
            _ => Err(mismatch()),
        }?;
        match layer.kind {
            // Entry layers that may be large (a step or zone entry per page
            // below) are measured from a spill like the bands.
            LayerKind::Step | LayerKind::Zone { .. } => HeldLayer::spilled_past(layer, spill),
            _ => Ok(layer.into()),
        }
    }
}

/// An input several builders over one layer may share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shared {
    /// The optimal PLA segmentation with error `eps` and zero intervals of
    /// `page` positions (0: none).
    Segments {
        /// Error bound in positions.
        eps: u64,
        /// Zero-interval page in positions (0: plain).
        page: u64,
    },
    /// Every piece's first key then its last key, for pieces of `span`
    /// positions ([`Keys::page_bounds`]).
    Bounds {
        /// Positions per piece.
        span: u64,
    },
}

/// A shared input, computed ([`prepare`]).
#[derive(Debug)]
pub(crate) enum Input {
    /// A segmentation ([`segment_held`]).
    Segments {
        /// The segments, spilled when large.
        segs: Segs,
        /// The index of each partition's first segment.
        firsts: Vec<usize>,
    },
    /// Piece bounds.
    Bounds(Vec<u64>),
}

/// Computes `need` over `keys` in one pass; a segmentation is spilled past
/// `spill` bytes.
pub(super) fn prepare(keys: Keys<'_>, need: Shared, spill: usize) -> Result<Input> {
    match need {
        Shared::Segments { eps, page } => {
            let (segs, firsts) = segment_held(keys, eps, page, spill)?;
            Ok(Input::Segments { segs, firsts })
        }
        Shared::Bounds { span } => Ok(Input::Bounds(keys.page_bounds(to_usize(span)?)?)),
    }
}

fn to_usize(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::invalid(format!("layer parameter {v} too large")))
}

/// `λ_low · base^i` for `i = 0, 1, …` up to `λ_high` (AirIndex's granularity
/// exponentiation), rounded to whole bytes, without duplicates.
pub(super) fn granularity_grid(low: u64, high: u64, base: f64) -> Result<Vec<u64>> {
    if low == 0 || high < low {
        return Err(Error::invalid(format!(
            "granularity bounds must satisfy 0 < low <= high, got {low} and {high}"
        )));
    }
    if !(base.is_finite() && base > 1.0) {
        return Err(Error::invalid(format!(
            "granularity base must be greater than 1, got {base}"
        )));
    }
    let mut out: Vec<u64> = Vec::new();
    let mut x = low as f64;
    while x <= high as f64 * (1.0 + 1e-9) && out.len() < 4096 {
        let v = x.round() as u64;
        if out.last() != Some(&v) {
            out.push(v);
        }
        x *= base;
    }
    Ok(out)
}

/// Optimal PLA of `keys` (positions = indexes) with error `eps`, with zero
/// intervals of `page` positions when `page > 0`; partitions of about
/// [`PARTITION`] positions (whole pages) are segmented in parallel, as many
/// as threads at once, and the segments (starts and intercepts made
/// absolute) written in order to a [`SegsWriter`] spilled past `spill`
/// bytes. A partition of a data run is read into memory while it is
/// segmented. Returns the segments and the index of each partition's first.
pub(super) fn segment_held(keys: Keys<'_>, eps: u64, page: u64, spill: usize) -> Result<(Segs, Vec<usize>)> {
    let part = partition_of_pages(page);
    let n = keys.len();
    let starts: Vec<usize> = (0..n).step_by(part.max(1)).collect();
    let mut out = SegsWriter::new(spill);
    let mut firsts = Vec::with_capacity(starts.len());
    let mut count = 0;
    for batch in starts.chunks(rayon::current_num_threads().max(1)) {
        let done: Vec<Result<Vec<Segment>>> = batch
            .par_iter()
            .map(|&a| {
                let b = (a + part).min(n);
                let held = keys.range_in_memory(a..b)?;
                let slice: &[u64] = &held;
                Ok(shifted(
                    if page > 0 {
                        crate::model::optimal_pla_zero_interval(slice, eps, page)
                    } else {
                        crate::model::optimal_pla(slice, eps)
                    },
                    a,
                ))
            })
            .collect();
        for d in done {
            let segs = d?;
            firsts.push(count);
            count += segs.len();
            out.push(&segs)?;
        }
    }
    Ok((out.finish()?, firsts))
}

/// [`segment_held`]'s segments in memory.
#[cfg(test)]
pub(super) fn segment(keys: Keys<'_>, eps: u64, page: u64) -> Result<Vec<Segment>> {
    let (segs, _) = segment_held(keys, eps, page, usize::MAX)?;
    Ok(segs.range(0..segs.len())?.into_owned())
}

/// The segments of a part of the keys starting at position `a`, made
/// absolute.
fn shifted(mut segs: Vec<Segment>, a: usize) -> Vec<Segment> {
    for s in &mut segs {
        s.start += a;
        s.intercept += a as f64;
    }
    segs
}

/// Positions per partition of a segmentation with zero intervals of `page`
/// positions (0: none): whole pages, about [`PARTITION`].
fn partition_of_pages(page: u64) -> usize {
    match (PARTITION as u64).checked_div(page) {
        Some(pages) => (pages.max(1) * page) as usize,
        None => PARTITION,
    }
}

/// EBand's lines over `keys` in memory or in a data run: groups of `group`
/// positions, each with the line through its end points shifted to the
/// middle of its residuals (the minimax intercept for that slope); and each
/// group's first key. Parts of whole groups are read in parallel. The
/// builder fits them part by part ([`band_in_parts`]); this is its test's
/// reference.
#[cfg(test)]
pub(super) fn equal_lines(keys: Keys<'_>, group: usize) -> Result<(Vec<SegmentLine>, Vec<u64>)> {
    let group = group.max(1);
    let n = keys.len();
    let per_part = (EQUAL_PART / group).max(1) * group;
    let starts: Vec<usize> = (0..n).step_by(per_part).collect();
    let parts: Vec<Result<Vec<(SegmentLine, u64)>>> = starts
        .par_iter()
        .map(|&a| {
            let b = (a + per_part).min(n);
            let mut out = Vec::with_capacity((b - a).div_ceil(group));
            let mut buf: Vec<u64> = Vec::with_capacity(group.min(b - a));
            keys.for_each_chunk(a..b, |_, mut c| {
                while !c.is_empty() {
                    let take = (group - buf.len()).min(c.len());
                    let (head, rest) = c.split_at(take);
                    buf.extend_from_slice(head);
                    c = rest;
                    if buf.len() == group {
                        out.push(group_line(a + out.len() * group, &buf));
                        buf.clear();
                    }
                }
                Ok(())
            })?;
            if !buf.is_empty() {
                out.push(group_line(a + out.len() * group, &buf));
            }
            Ok(out)
        })
        .collect();
    let mut lines = Vec::with_capacity(n.div_ceil(group));
    let mut firsts = Vec::with_capacity(n.div_ceil(group));
    for p in parts {
        for (l, k) in p? {
            lines.push(l);
            firsts.push(k);
        }
    }
    Ok((lines, firsts))
}

/// The line of one equal group (keys `part`, the first at position `a`)
/// and its first key.
fn group_line(a: usize, part: &[u64]) -> (SegmentLine, u64) {
    let (Some(&k0), Some(&kl)) = (part.first(), part.last()) else {
        let flat = SegmentLine {
            start: a,
            slope: 0.0,
            intercept: a as f64,
        };
        return (flat, 0);
    };
    let slope = if kl > k0 && part.len() > 1 {
        (part.len() - 1) as f64 / (kl - k0) as f64
    } else {
        0.0
    };
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (i, &k) in part.iter().enumerate() {
        let r = i as f64 - slope * (k - k0) as f64;
        lo = lo.min(r);
        hi = hi.max(r);
    }
    let line = SegmentLine {
        start: a,
        slope,
        intercept: a as f64 + 0.5 * (lo + hi),
    };
    (line, k0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::layered::{LayerKind, band_layer_in, first_key_of, page_aware_lines_over};

    fn outline(keys: &[u64]) -> Outline<'_> {
        Outline {
            keys: Keys::Slice(keys),
            width: 16,
            per_page: 255,
            is_data: true,
        }
    }

    #[test]
    fn family_names_serialise_as_their_names() {
        for f in Family::ALL {
            assert_eq!(serde_json::to_value(f).unwrap(), serde_json::json!(f.name()));
        }
    }

    #[test]
    fn grid_and_names() {
        assert_eq!(
            granularity_grid(256, 4096, 2.0).unwrap(),
            vec![256, 512, 1024, 2048, 4096]
        );
        assert_eq!(granularity_grid(100, 100, 2.0).unwrap(), vec![100]);
        assert!(granularity_grid(0, 10, 2.0).is_err());
        assert!(granularity_grid(10, 5, 2.0).is_err());
        assert!(granularity_grid(10, 50, 1.0).is_err());
        let g = granularity_grid(256, 1 << 20, 1.5).unwrap();
        assert!(g.windows(2).all(|w| w[0] < w[1]));
        for f in Family::ALL {
            assert_eq!(Family::parse(f.name()).unwrap(), f);
        }
        assert_eq!(
            Family::parse_list("gband+gstep+gband").unwrap(),
            vec![Family::GStep, Family::GBand]
        );
        assert_eq!(Family::parse_list("airindex").unwrap(), Family::AIRINDEX.to_vec());
        assert_eq!(Family::parse_list("all").unwrap().len(), Family::ALL.len());
        assert!(Family::parse_list("btree").is_err());
        assert!(Family::parse_list("").is_err());
    }

    #[test]
    fn lambda_maps_to_whole_pages_and_error_windows() {
        let keys: Vec<u64> = (0..100_000u64).map(|i| i * 7 + (i % 13)).collect();
        let o = outline(&keys);
        let b = |family, lambda| Builder { family, lambda }.param(&o, 4096);
        // Sub-page steps read a page anyway: all map to one page.
        assert_eq!(b(Family::GStep, 256), Some(Param::Span(255)));
        assert_eq!(b(Family::GStep, 4096), Some(Param::Span(255)));
        assert_eq!(b(Family::Zone, 3 * 4096 + 5), Some(Param::Span(3 * 255)));
        assert_eq!(b(Family::GBand, 256), Some(Param::Eps(7)));
        assert_eq!(b(Family::GBand, 4096), Some(Param::Eps(127)));
        assert_eq!(b(Family::EBand, 4096), Some(Param::Group(256)));
        assert_eq!(b(Family::ZBand, 16), Some(Param::Eps(0)));
        // Too coarse to shrink the layer: not a candidate.
        assert_eq!(b(Family::GStep, 1 << 30), None);
        // Data-only builders do not apply over an index layer.
        let upper = Outline { is_data: false, ..o };
        assert_eq!(
            Builder {
                family: Family::ZBand,
                lambda: 4096
            }
            .param(&upper, 4096),
            None
        );
        assert_eq!(
            Builder {
                family: Family::LecoD,
                lambda: 4096
            }
            .param(&upper, 4096),
            None
        );
        assert!(
            Builder {
                family: Family::ZBand,
                lambda: 4096
            }
            .build(&upper, 4096)
            .is_err()
        );
    }

    #[test]
    fn a_band_builder_keeps_its_error_window() {
        // Longer than the partitions of a parallel segmentation: the
        // measured bounds stay within eps.
        let n = (1 << 18) + 77;
        let keys: Vec<u64> = (0..n as u64).map(|i| i * 3 + (i * i % 97)).collect();
        let band = Builder {
            family: Family::GBand,
            lambda: 1024,
        }
        .build(&outline(&keys), 4096)
        .unwrap();
        let LayerKind::Band { eps_lo, eps_hi, .. } = band.kind else {
            panic!()
        };
        assert!(eps_lo <= 32 && eps_hi <= 32, "{eps_lo} {eps_hi}");
        let segs = segment(Keys::Slice(&keys), 31, 0).unwrap();
        assert_eq!(segs.len() as u64, band.count());
        // Partitions cut the segmentation: segments tile the keys in order,
        // each within its error on its own keys, a few more than optimal.
        let mut next = 0;
        for s in &segs {
            assert_eq!(s.start, next);
            next = s.end();
        }
        assert_eq!(next, n);
        for s in &segs {
            for (i, &k) in keys.iter().enumerate().take(s.end()).skip(s.start) {
                let p = s.predict(k);
                assert!((p - i as f64).abs() <= 31.0 + 1e-6, "{i} {p}");
            }
        }
        let optimal = crate::model::optimal_pla(&keys, 31).len();
        assert!(
            segs.len() >= optimal && segs.len() <= optimal + n.div_ceil(PARTITION),
            "{}",
            segs.len()
        );
    }

    #[test]
    fn pieces_of_one_position_are_built_from_every_key() {
        // A layer of one entry per page (an SSTable's boundary of one record):
        // span 1; a step entry covers two positions at least.
        let keys: Vec<u64> = (0..1_001u64).map(|i| i * 5 + 1).collect();
        let one = Outline {
            per_page: 1,
            ..outline(&keys)
        };
        let b = |family| Builder { family, lambda: 16 };
        assert_eq!(b(Family::GStep).param(&one, 4096), Some(Param::Span(1)));
        let step = b(Family::GStep).build(&one, 4096).unwrap();
        let entries: Vec<(u64, u64)> = step
            .flat
            .chunks_exact(16)
            .map(|c| {
                (
                    u64::from_le_bytes(c[..8].try_into().unwrap()),
                    u64::from_le_bytes(c[8..].try_into().unwrap()),
                )
            })
            .collect();
        let want: Vec<(u64, u64)> = (0..1_001u64).step_by(2).map(|i| (keys[i as usize], i)).collect();
        assert_eq!(entries, want);
        assert_eq!(step.last_successor, 1_001);
        let zone = b(Family::Zone).build(&one, 4096).unwrap();
        assert_eq!(zone.kind, LayerKind::Zone { span: 1 });
        assert_eq!(zone.keys(), keys);
        for (f, lossy) in [(Family::Leco, false), (Family::LecoD, true)] {
            let l = b(f).build(&one, 4096).unwrap();
            assert_eq!(l.kind, LayerKind::LecoZone { span: 1, lossy });
            assert_eq!(l.flat, leco_zone_layer(&keys, 1, lossy).unwrap().flat);
        }
    }

    /// GBand and EBand fit their bands part by part into a spill; the
    /// layer is the band of the whole segmentation's lines (the partitions
    /// of [`segment`]) and of [`equal_lines`], as built before, at every
    /// spill limit.
    #[test]
    fn bands_fitted_in_parts_are_the_bands_of_their_lines() {
        let near_line = |i: u64| i * 1_100 + (i * i % 1009);
        // Steps and curves, where zero-interval lines move off their middle.
        let curved = |i: u64| i * 100 + i * i / 64 + (i / 500) * 70_000 + (i * 7919 % 61);
        for (n, f) in [
            (2usize, &near_line as &dyn Fn(u64) -> u64),
            (1000, &near_line),
            (3 * PARTITION + 77, &near_line),
            (3 * PARTITION + 300, &curved),
        ] {
            let keys: Vec<u64> = (0..n as u64).map(f).collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]));
            let o = outline(&keys);
            for (family, lambda) in [
                (Family::GBand, 256u64),
                (Family::GBand, 4096),
                (Family::EBand, 256),
                (Family::EBand, 5000),
                (Family::ZBand, 256),
                (Family::ZBand, 1024),
            ] {
                let b = Builder { family, lambda };
                let Some(p) = b.param(&o, 4096) else {
                    continue;
                };
                let k = Keys::Slice(&keys);
                let pp = o.per_page;
                let want = match p {
                    Param::Eps(e) if family == Family::ZBand => {
                        let segs = segment(k, e, pp).unwrap();
                        let lines = page_aware_lines_over(k, &segs, e, pp, f64::INFINITY).unwrap();
                        band_layer_in(k, &lines, &|i| first_key_of(&segs, i), None, 1, pp).unwrap()
                    }
                    Param::Eps(e) => {
                        let segs = segment(k, e, 0).unwrap();
                        band_layer_in(k, &lines_of(&segs), &|i| first_key_of(&segs, i), None, 1, 0).unwrap()
                    }
                    Param::Group(g) => {
                        let g = g as usize;
                        let (lines, firsts) = equal_lines(k, g).unwrap();
                        band_layer_in(k, &lines, &|i| firsts[i / g], None, 1, 0).unwrap()
                    }
                    Param::Span(_) => unreachable!(),
                };
                for spill in [0, 4096, usize::MAX] {
                    let got = b
                        .build_with(&o, 4096, &|need| Ok(Arc::new(prepare(k, need, spill)?)), spill)
                        .unwrap()
                        .into_build()
                        .unwrap();
                    assert_eq!(
                        (&got.kind, &got.flat, got.last_successor),
                        (&want.kind, &want.flat, want.last_successor),
                        "{family}({lambda}) over {n} keys, spilled past {spill}"
                    );
                }
            }
        }
    }

    #[test]
    fn equal_lines_fit_their_groups() {
        let keys: Vec<u64> = (0..10_000u64).map(|i| i * i).collect();
        let (ls, firsts) = equal_lines(Keys::Slice(&keys), 100).unwrap();
        assert_eq!(firsts, keys.iter().step_by(100).copied().collect::<Vec<_>>());
        assert_eq!(ls.len(), 100);
        assert!(ls.windows(2).all(|w| w[0].start + 100 == w[1].start));
        let first = |i: usize| keys[i];
        let band = band_layer_in(Keys::Slice(&keys), &ls, &first, None, 1, 0).unwrap();
        let LayerKind::Band { eps_lo, eps_hi, .. } = band.kind else {
            panic!()
        };
        assert!(eps_lo < 100 && eps_hi < 100);
    }
}
