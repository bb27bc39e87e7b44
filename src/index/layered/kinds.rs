//! The named static index kinds: each is a recipe for a stack of layers.

use std::sync::Arc;

use rayon::prelude::*;
use serde_json::{Value, json};

use super::build::{
    LayerBuild, SegmentLine, band_layer, band_layer_keyed, band_of_entries, blob_layer, gap_zone_layer,
    leco_zone_layer, lines_of, radix_layer, rmi_layers, separator_bounds, step_layer, step_stack,
    write_layer, zone_layer,
};
use super::compressed::CprBand;
use super::layer::LayerKind;
use super::{LayeredIndex, layer_file};
use crate::index::binary::{DATA_FILE, write_data_run};
use crate::index::{
    BuildOptions, Fetch, Index, IndexKind, Manifest, OpenOptions, Params, Records, Residency,
};
use crate::storage::{Directory, IoContext};
use crate::{Error, Result};

/// A built design: the layers bottom-up and the number of models.
#[derive(Debug)]
pub struct Design {
    /// Layers, bottom (over the data) first.
    pub layers: Vec<LayerBuild>,
    /// Models/segments of the learned layers (None for non-learned designs).
    pub models: Option<u64>,
    /// What the recipe chose and measured (stored in the manifest).
    pub notes: Value,
}

/// Builds a design over sorted keys with `per_page` records per data page.
pub type DesignFn = fn(&Params, &[u64], usize, usize) -> Result<Design>;

/// A named layered kind.
pub struct LayeredKind {
    /// Kind name.
    pub name: &'static str,
    /// One line for `strata list`.
    pub summary: &'static str,
    /// The recipe: (params, keys, records per page, page size) -> design.
    pub design: DesignFn,
}

impl std::fmt::Debug for LayeredKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayeredKind").field("name", &self.name).finish()
    }
}

fn fetch_param(params: &Params) -> Result<Fetch> {
    params.str("fetch", "all-at-once")?.parse()
}

impl IndexKind for LayeredKind {
    fn name(&self) -> &'static str {
        self.name
    }

    fn summary(&self) -> &'static str {
        self.summary
    }

    fn build(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
    ) -> Result<(Vec<String>, Value)> {
        fetch_param(params)?;
        let meta = write_data_run(dir, records, opts.page_size)?;
        let design = (self.design)(params, records.keys(), meta.per_page, opts.page_size)?;
        let mut files = vec![DATA_FILE.to_string()];
        let mut layers = Vec::new();
        for (i, l) in design.layers.iter().enumerate() {
            let name = layer_file(i);
            write_layer(dir, &name, l, opts.page_size)?;
            layers.push(json!({ "kind": l.kind, "entries": l.count(), "bytes": l.flat.len() }));
            files.push(name);
        }
        Ok((
            files,
            json!({ "data_pages": meta.pages, "layers": layers, "models": design.models, "notes": design.notes }),
        ))
    }

    fn open(
        &self,
        m: &Manifest,
        dir: Arc<dyn Directory>,
        io: IoContext,
        opts: &OpenOptions,
    ) -> Result<Box<dyn Index>> {
        let layers = m
            .description
            .get("layers")
            .and_then(Value::as_array)
            .map_or(0, |a| a.len());
        let models = m.description.get("models").and_then(Value::as_u64);
        let fetch: Fetch = m
            .config
            .get("fetch")
            .and_then(Value::as_str)
            .unwrap_or("all-at-once")
            .parse()?;
        // With `resident=index` every layer is pinned, unless the design says
        // how many top layers fit its memory budget (`air:memory_budget`).
        let pinned = match opts.resident {
            Residency::Index => m
                .description
                .get("notes")
                .and_then(|n| n.get("resident_layers"))
                .and_then(Value::as_u64)
                .map_or(layers, |r| usize::try_from(r).unwrap_or(layers).min(layers)),
            Residency::None => 0,
        };
        let idx = LayeredIndex::open_pinned(self.name, dir, &io, layers, pinned, fetch, models)?;
        Ok(Box::new(idx))
    }
}

fn zonemap(_p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    Ok(Design {
        layers: if keys.is_empty() {
            vec![]
        } else {
            vec![zone_layer(keys, per_page)]
        },
        models: None,
        notes: Value::Null,
    })
}

fn btree_static(p: &Params, keys: &[u64], per_page: usize, page_size: usize) -> Result<Design> {
    // AirIndex's B-TREE: GStep(p = 255, 4 KiB) — one (key, position) entry
    // per data page, then one entry per page of each level up to a one-page root.
    let fanout = p.usize("fanout", 0)?;
    if keys.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: None,
            notes: Value::Null,
        });
    }
    let first = step_layer(keys, per_page);
    let mut layers = vec![first];
    if fanout == 0 {
        let above = step_stack(&layers[0], page_size);
        layers.extend(above);
    } else {
        if fanout < 2 {
            return Err(Error::invalid("btree-static fanout must be at least 2"));
        }
        while layers.last().map_or(0, |l| l.count() as usize) > fanout {
            let keys = layers.last().map(|l| l.keys()).unwrap_or_default();
            layers.push(step_layer(&keys, fanout));
        }
    }
    Ok(Design {
        layers,
        models: None,
        notes: Value::Null,
    })
}

/// Every layered kind of this build.
pub static LAYERED_KINDS: &[LayeredKind] = &[
    LayeredKind {
        name: "zonemap",
        summary: "zone map: the first key of every data page in memory; exactly one page per lookup",
        design: zonemap,
    },
    LayeredKind {
        name: "btree-static",
        summary: "AirIndex's B-TREE: step layers of 4 KiB nodes (fanout 255) over the data pages",
        design: btree_static,
    },
    LayeredKind {
        name: "leco-zonemap",
        summary: "zone map compressed with LeCo (Zhang G5); exactly one page per lookup",
        design: leco_zonemap,
    },
    LayeredKind {
        name: "leco-zonemap-d",
        summary: "LeCo zone map with rough separators (Zhang LeCo-Zonemap-D); one page per lookup",
        design: leco_zonemap_d,
    },
    LayeredKind {
        name: "gap-zonemap-d",
        summary: "zone map of rough separators gap-coded at the precision each gap allows (block); one page per lookup",
        design: gap_zonemap_d,
    },
    LayeredKind {
        name: "pgm",
        summary: "PGM-index: optimal PLA with error epsilon, recursive layers with epsilon_rec",
        design: pgm,
    },
    LayeredKind {
        name: "pgm-disk",
        summary: "PGM with disk-based zero intervals (Zhang G3): fewer models, same pages",
        design: pgm_disk,
    },
    LayeredKind {
        name: "pgm-disk-cpr",
        summary: "CprLeCo_PGM_D (Zhang G3+G4): zero intervals, gap-coded rough separators, rounded intercepts, shared slopes",
        design: pgm_disk_cpr,
    },
    LayeredKind {
        name: "rs",
        summary: "RadixSpline: spline points within epsilon and a radix table of radix_bits",
        design: rs,
    },
    LayeredKind {
        name: "rs-disk",
        summary: "RadixSpline with disk-based zero intervals (Zhang G3): fewer spline points, same pages",
        design: rs_disk,
    },
    LayeredKind {
        name: "rmi",
        summary: "two-layer linear RMI with `models` leaf models and per-leaf error bounds",
        design: rmi,
    },
    LayeredKind {
        name: "fiting-static",
        summary: "FITing-tree (static): greedy shrinking-cone segments with epsilon, B+-tree over them",
        design: fiting_static,
    },
    LayeredKind {
        name: "air",
        summary: "AirIndex: layers chosen by AirTune for a storage profile (profile, top_k, memory_budget)",
        design: crate::tune::air_design,
    },
];

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
    fn interval(&self, i: usize) -> (i128, i128) {
        if self.zero_page > 0 {
            crate::model::zero_interval(i as u64, self.eps, self.zero_page)
        } else {
            let u = (i as u64 / self.granule) as i128;
            let e = (self.eps / self.granule) as i128;
            (u - e, u + e)
        }
    }

    fn points<'a>(
        &'a self,
        keys: &'a [u64],
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = crate::model::IntervalPoint> + 'a {
        range.filter_map(move |i| {
            let (lo, hi) = self.interval(i);
            keys.get(i).map(|&k| (k, lo, hi))
        })
    }
}

/// Intercept roundings tried for compressed zero-interval bands, coarsest
/// first, in sixteenths of a position (32, 16, 8, 4, 2 and 1 positions).
const OFF_UNITS: [i32; 6] = [512, 256, 128, 64, 32, 16];

/// Entries with every offset rounded down or up to a multiple of `unit`,
/// whichever keeps the segment's keys within `tol.eps` plus half a unit of
/// their pages with fewer page-crossing search windows.
fn rounded_offsets(
    keys: &[u64],
    starts: &[usize],
    entries: &[super::layer::BandEntry],
    unit: i32,
    tol: Tolerance,
) -> Vec<super::layer::BandEntry> {
    let page = tol.zero_page.max(1);
    let max_unit = keys.len() as u64;
    // Nearest rounding moves a prediction by at most half a unit (in
    // positions: unit / 32): allow that much, no more.
    let cap = tol.eps + (unit as u64).div_ceil(32);
    // (max error, extra pages) of entry `j` with offset `off`.
    let cost = |j: usize, off: i32| -> (u64, u64) {
        let Some(e) = entries.get(j) else {
            return (u64::MAX, u64::MAX);
        };
        let e = super::layer::BandEntry { off, ..*e };
        let next = entries.get(j + 1).map_or(max_unit, |f| f.base);
        let (start, end) = (
            starts.get(j).copied().unwrap_or(0),
            starts.get(j + 1).copied().unwrap_or(keys.len()),
        );
        let (mut worst, mut extra) = (0u64, 0u64);
        for (i, &k) in keys.iter().enumerate().take(end).skip(start) {
            let p = e.predict(k, next, max_unit);
            let first = (i as u64 / page) * page;
            worst = worst
                .max(first.saturating_sub(p))
                .max(p.saturating_sub(first + page - 1));
            extra += (p + tol.eps) / page - p.saturating_sub(tol.eps) / page;
        }
        (worst, extra)
    };
    // Each entry's rounding is its own: chosen in parallel, in order.
    entries
        .par_iter()
        .enumerate()
        .map(|(j, e)| {
            let u = i64::from(unit.max(1));
            let down = i64::from(e.off).div_euclid(u) * u;
            let pick = [down, down + u]
                .into_iter()
                .filter_map(|o| i32::try_from(o).ok())
                .map(|o| (o, cost(j, o)))
                .min_by_key(|&(o, (worst, extra))| {
                    (worst > cap, extra, (i64::from(o) - i64::from(e.off)).abs())
                })
                .map_or(e.off, |(o, _)| o);
            super::layer::BandEntry { off: pick, ..*e }
        })
        .collect()
}

/// A compressed band layer (CprLeCo_PGM_D): shared slopes, intercepts re-fitted
/// for them, rough separators as entry keys, all measured as a plain band.
fn cpr_band(
    keys: &[u64],
    segs: &[crate::model::Segment],
    tol: Tolerance,
    budget: f64,
) -> Result<(LayerBuild, LayerBuild)> {
    let ranges: Vec<(f64, f64)> = segs.iter().map(|s| (s.slope_lo, s.slope_hi)).collect();
    let (table, assign) = crate::model::min_slope_set(&ranges);
    let mut lines = Vec::with_capacity(segs.len());
    for (s, &a) in segs.iter().zip(&assign) {
        let slope = table.get(a as usize).copied().unwrap_or(s.slope);
        let line = match crate::model::intercept_range(tol.points(keys, s.start..s.end()), s.first_key, slope)
        {
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
                    page_aware_line(keys, &mid, tol, &[slope], budget)
                } else {
                    SegmentLine {
                        start: s.start,
                        slope,
                        intercept: mid.intercept,
                    }
                }
            }
            None => SegmentLine {
                start: s.start,
                slope: s.slope,
                intercept: s.intercept,
            },
        };
        lines.push(line);
    }
    let starts: Vec<usize> = segs.iter().map(|s| s.start).collect();
    let (mut lo, hi) = separator_bounds(keys, &starts);
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
    let entry_keys: Vec<u64> = seps.iter().collect();
    let band = band_layer_keyed(keys, &lines, Some(&entry_keys), tol.granule, tol.zero_page)?;
    let entries: Vec<super::layer::BandEntry> = band.flat.chunks_exact(24).map(band_entry).collect();
    // With zero intervals the page budget usually leaves room: intercepts
    // rounded to whole units (a few positions) cost a few bits less each and
    // move predictions by at most half a unit. Keep the coarsest rounding
    // whose measured pages stay within the budget.
    let mut chosen = (1, band, entries);
    if tol.zero_page > 0 && budget.is_finite() {
        for unit in OFF_UNITS {
            let q = rounded_offsets(keys, &starts, &chosen.2, unit, tol);
            let b = band_of_entries(keys, &starts, &q, tol.granule, tol.zero_page);
            if extra_pages(keys, &b, tol.zero_page) <= budget + 1e-12 {
                chosen = (unit, b, q);
                break;
            }
        }
    }
    let (off_unit, band, entries) = chosen;
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
    Ok((band, blob))
}

/// Fractions of a feasible range tried by [`page_aware_line`].
const LINE_GRID: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];

/// Extra pages the lookups of the keys `range` read with the line `(slope,
/// intercept)` anchored at `first`: the window `[p - eps, p + eps]` around a
/// prediction spans one page more for every page boundary inside it.
fn crossings(
    keys: &[u64],
    range: std::ops::Range<usize>,
    first: u64,
    slope: f64,
    intercept: f64,
    eps: u64,
    page: u64,
) -> u64 {
    let page = page.max(1) as i64;
    let eps = eps as i64;
    let mut extra = 0u64;
    for &k in keys.get(range).unwrap_or_default() {
        let p = (intercept + slope * k.saturating_sub(first) as f64).floor() as i64;
        extra += ((p + eps).div_euclid(page) - (p - eps).div_euclid(page)) as u64;
    }
    extra
}

/// A line of a zero-interval segment whose search windows cross few page
/// boundaries.
///
/// A maximal zero-interval segment's feasible lines hug the edges of its
/// keys' pages, and clustered keys then get predictions within `eps` of a
/// page boundary, where the window `[p - eps, p + eps]` spans two pages. Any
/// feasible line keeps the guarantee, so when the middle line reads more than
/// `budget` extra pages per key, this tries a small grid of feasible slopes
/// (`slopes`) and intercepts and keeps the line with the fewest crossings.
fn page_aware_line(
    keys: &[u64],
    seg: &crate::model::Segment,
    tol: Tolerance,
    slopes: &[f64],
    budget: f64,
) -> SegmentLine {
    let page = tol.zero_page.max(1);
    let mut best = SegmentLine {
        start: seg.start,
        slope: seg.slope,
        intercept: seg.intercept,
    };
    let range = seg.start..seg.end();
    let mut best_cost = crossings(
        keys,
        range.clone(),
        seg.first_key,
        seg.slope,
        seg.intercept,
        tol.eps,
        page,
    );
    if best_cost as f64 <= budget * seg.len as f64 {
        return best;
    }
    for &slope in slopes {
        if !slope.is_finite() || slope < 0.0 {
            continue;
        }
        let Some((lo, hi)) =
            crate::model::intercept_range(tol.points(keys, range.clone()), seg.first_key, slope)
        else {
            continue;
        };
        for f in LINE_GRID {
            let c = lo + f * (hi - lo);
            let cost = crossings(keys, range.clone(), seg.first_key, slope, c, tol.eps, page);
            if cost < best_cost {
                best_cost = cost;
                best = SegmentLine {
                    start: seg.start,
                    slope,
                    intercept: c,
                };
                if best_cost == 0 {
                    return best;
                }
            }
        }
    }
    best
}

/// Candidate slopes of a segment: a grid over its feasible slope range.
fn slope_grid(seg: &crate::model::Segment) -> Vec<f64> {
    if seg.slope_lo.is_finite() && seg.slope_hi.is_finite() {
        [0.25, 0.5, 0.75]
            .iter()
            .map(|f| seg.slope_lo + f * (seg.slope_hi - seg.slope_lo))
            .collect()
    } else {
        vec![seg.slope]
    }
}

/// Lines for zero-interval segments (`segs`, starts absolute in `keys`,
/// built with window `eps` around pages of `page` positions) whose search
/// windows cross few page boundaries: each segment keeps its middle line
/// unless that reads more than `budget` extra pages per key, in which case
/// the feasible line with the fewest crossings on a small grid of slopes and
/// intercepts is used. Any returned line keeps the zero-interval guarantee.
pub fn page_aware_lines(
    keys: &[u64],
    segs: &[crate::model::Segment],
    eps: u64,
    page: u64,
    budget: f64,
) -> Vec<SegmentLine> {
    let tol = Tolerance {
        eps,
        granule: 1,
        zero_page: page,
    };
    segs.iter()
        .map(|s| page_aware_line(keys, s, tol, &slope_grid(s), budget))
        .collect()
}

/// A compressed band layer (CprLeCo_PGM_D, Zhang G4) over `keys` from a
/// segmentation `segs` (starts absolute) made with error `eps` and, when
/// `zero_page > 0`, zero intervals of that many positions: slopes shared,
/// intercepts re-fitted, rough separators as keys, errors measured with the
/// query arithmetic. `budget` is the extra pages per key a zero-interval
/// line may cause before other feasible lines are tried. One blob layer.
pub fn compressed_band(
    keys: &[u64],
    segs: &[crate::model::Segment],
    eps: u64,
    zero_page: u64,
    budget: f64,
) -> Result<LayerBuild> {
    let tol = Tolerance {
        eps,
        granule: 1,
        zero_page,
    };
    cpr_band(keys, segs, tol, budget).map(|(_, blob)| blob)
}

/// Mean extra pages (beyond the first) a lookup of a present key reads with
/// a band layer over `keys` — measured with the query path's own arithmetic.
fn extra_pages(keys: &[u64], band: &LayerBuild, page: u64) -> f64 {
    let LayerKind::Band {
        granule,
        zero_page,
        eps_lo,
        eps_hi,
    } = band.kind
    else {
        return f64::INFINITY;
    };
    let n = keys.len() as u64;
    let entries: Vec<super::layer::BandEntry> = band.flat.chunks_exact(24).map(band_entry).collect();
    let max_unit = n.div_ceil(granule.max(1));
    // Chunks of keys in parallel, each starting at the entry that covers its
    // first key (the last one whose key is <= it, or the first); an integer
    // sum, so the same whatever the threads.
    let extra: u64 = keys
        .par_chunks(1 << 16)
        .map(|chunk| {
            let Some(&first) = chunk.first() else { return 0 };
            let mut j = entries.partition_point(|e| e.key <= first).saturating_sub(1);
            let mut extra = 0u64;
            for &k in chunk {
                while entries.get(j + 1).is_some_and(|e| e.key <= k) {
                    j += 1;
                }
                let Some(e) = entries.get(j) else { break };
                let next = entries.get(j + 1).map_or(max_unit, |f| f.base);
                let (lo, hi) = super::layer::band_range(
                    e.predict(k, next, max_unit),
                    eps_lo,
                    eps_hi,
                    granule,
                    zero_page,
                    n,
                );
                if hi > lo {
                    extra += (hi - 1) / page - lo / page;
                }
            }
            extra
        })
        .sum();
    extra as f64 / n.max(1) as f64
}

fn band_entry(e: &[u8]) -> super::layer::BandEntry {
    super::layer::BandEntry {
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
/// `build(w)` returns the built value and its measured extra pages per
/// lookup. Window 0 (predict the page) always fits a budget of 0 extra pages.
fn widest_window<T>(
    eps: u64,
    max_window: u64,
    budget: f64,
    mut build: impl FnMut(u64) -> Result<(T, f64)>,
) -> Result<(T, u64, f64)> {
    let fits = |e: f64| e <= budget + 1e-12;
    let (first, extra) = build(eps)?;
    if eps == 0 || (fits(extra) && max_window <= eps) {
        return Ok((first, eps, extra));
    }
    // Invariant: `best_w` fits (or is 0), `bad` does not (or lies past the
    // largest window allowed).
    let (mut best, mut best_w, mut best_extra, mut bad) = if fits(extra) {
        (first, eps, extra, max_window.saturating_add(1))
    } else {
        let (t, e) = build(0)?;
        (t, 0, e, eps)
    };
    let tolerance = (eps / 32).max(1);
    while bad - best_w > tolerance {
        let mid = best_w + (bad - best_w) / 2;
        let (t, e) = build(mid)?;
        if fits(e) {
            (best, best_w, best_extra) = (t, mid, e);
        } else {
            bad = mid;
        }
    }
    Ok((best, best_w, best_extra))
}

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
fn zero_interval_band(
    keys: &[u64],
    eps: u64,
    per_page: usize,
    compress: bool,
    slack: Option<f64>,
) -> Result<ZeroBand> {
    let page = per_page as u64;
    // Plain PGM's measured expected extra pages at `eps` is the budget.
    let plain = Tolerance {
        eps,
        granule: 1,
        zero_page: 0,
    };
    let plain_segs = crate::model::optimal_pla_points(plain.points(keys, 0..keys.len()));
    let budget =
        extra_pages(keys, &band_layer(keys, &lines_of(&plain_segs), 1, 0)?, page) + slack.unwrap_or(0.002);
    let max_window = if slack.is_some() {
        eps.saturating_mul(2)
    } else {
        eps
    };
    let ((band, blob, segments), window, extra) = widest_window(eps, max_window, budget, |w| {
        let tol = Tolerance {
            eps: w,
            granule: 1,
            zero_page: page,
        };
        let segs = crate::model::optimal_pla_points(tol.points(keys, 0..keys.len()));
        let (band, blob) = if compress {
            let (b, blob) = cpr_band(keys, &segs, tol, budget)?;
            (b, Some(blob))
        } else {
            let lines: Vec<SegmentLine> = segs
                .iter()
                .map(|s| page_aware_line(keys, s, tol, &slope_grid(s), budget))
                .collect();
            (band_layer(keys, &lines, 1, page)?, None)
        };
        let extra = extra_pages(keys, &band, page);
        Ok(((band, blob, segs.len()), extra))
    })?;
    Ok(ZeroBand {
        band,
        blob,
        segments,
        window,
        extra,
        budget,
        plain_segments: plain_segs.len(),
    })
}

fn pgm_family(p: &Params, keys: &[u64], per_page: usize, zero: bool, compress: bool) -> Result<Design> {
    let eps = p.u64("epsilon", 64)?;
    let eps_rec = p.u64("epsilon_rec", 4)?;
    let granule = granularity(p, per_page)?;
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
    if keys.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: Some(0),
            notes: Value::Null,
        });
    }
    let mut notes_out = Value::Null;
    let (bottom, mut models) = if zero {
        let ZeroBand {
            band,
            blob,
            segments: segs,
            window,
            extra,
            budget,
            plain_segments,
        } = zero_interval_band(keys, eps, per_page, compress, slack)?;
        let mut notes = json!({
            "zero_interval_window": window,
            "expected_pages": 1.0 + extra,
            "page_budget": 1.0 + budget,
            "pgm_segments_at_epsilon": plain_segments,
        });
        if let Some(blob) = blob {
            if let Ok(c) = CprBand::from_bytes(&blob.flat, "build") {
                notes["parts"] = json!(
                    c.part_bytes()
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v))
                        .collect::<std::collections::BTreeMap<_, _>>()
                );
                notes["distinct_slopes"] = json!(c.distinct_slopes());
                notes["offset_unit_positions"] = json!(f64::from(c.off_unit()) / 16.0);
            }
            return Ok(Design {
                layers: vec![blob],
                models: Some(segs as u64),
                notes,
            });
        }
        notes_out = notes;
        (band, segs as u64)
    } else {
        let tol = Tolerance {
            eps,
            granule,
            zero_page: 0,
        };
        let segs = crate::model::optimal_pla_points(tol.points(keys, 0..keys.len()));
        if compress {
            let (_, blob) = cpr_band(keys, &segs, tol, f64::INFINITY)?;
            return Ok(Design {
                layers: vec![blob],
                models: Some(segs.len() as u64),
                notes: Value::Null,
            });
        }
        (band_layer(keys, &lines_of(&segs), granule, 0)?, segs.len() as u64)
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

fn pgm(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    pgm_family(p, keys, per_page, false, false)
}

fn pgm_disk(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    pgm_family(p, keys, per_page, true, false)
}

fn pgm_disk_cpr(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    pgm_family(p, keys, per_page, true, true)
}

fn fiting_static(p: &Params, keys: &[u64], _per_page: usize, page_size: usize) -> Result<Design> {
    let eps = p.u64("epsilon", 64)?;
    if keys.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: Some(0),
            notes: Value::Null,
        });
    }
    let segs = crate::model::greedy_cone(keys, eps);
    let bottom = band_layer(keys, &lines_of(&segs), 1, 0)?;
    let above = step_stack(&bottom, page_size);
    let mut layers = vec![bottom];
    layers.extend(above);
    Ok(Design {
        layers,
        models: Some(segs.len() as u64),
        notes: Value::Null,
    })
}

/// The spline of a RadixSpline as band lines: segment `j` interpolates
/// between spline points `j` and `j + 1`.
fn spline_lines(spline: &crate::model::RadixSpline) -> Vec<SegmentLine> {
    let points: Vec<(u64, u64)> = spline.spline_points().collect();
    points
        .iter()
        .enumerate()
        .map(|(j, &(k, pos))| SegmentLine {
            start: pos as usize,
            slope: match points.get(j + 1) {
                Some(&(k2, p2)) if k2 > k => (p2 - pos) as f64 / (k2 - k) as f64,
                _ => 0.0,
            },
            intercept: pos as f64,
        })
        .collect()
}

fn rs_family(p: &Params, keys: &[u64], per_page: usize, zero: bool) -> Result<Design> {
    let eps = p.u64("epsilon", 64)?;
    let radix_bits = p.u64("radix_bits", 18)? as u32;
    if keys.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: Some(0),
            notes: Value::Null,
        });
    }
    let spline = crate::model::RadixSpline::build(keys, eps, radix_bits)?;
    let mut band = band_layer(keys, &spline_lines(&spline), 1, 0)?;
    let mut models = spline.num_spline_points() as u64;
    let mut notes = Value::Null;
    if zero {
        // Zero intervals (Zhang G3 applied to RadixSpline): the widest window
        // whose measured pages stay within plain RadixSpline's at `eps`.
        let page = per_page as u64;
        let budget = extra_pages(keys, &band, page) + 0.002;
        let ((zb, points), w, extra) = widest_window(eps, eps, budget, |w| {
            let z = crate::model::RadixSpline::build_zero_interval(keys, w, radix_bits, page)?;
            let zb = band_layer(keys, &spline_lines(&z), 1, page)?;
            let extra = extra_pages(keys, &zb, page);
            Ok(((zb, z.num_spline_points() as u64), extra))
        })?;
        notes = json!({
            "zero_interval_window": w,
            "expected_pages": 1.0 + extra,
            "page_budget": 1.0 + budget,
            "rs_points_at_epsilon": models,
        });
        models = points;
        band = zb;
    }
    let root = radix_layer(&band.keys(), spline.radix_bits_used());
    Ok(Design {
        layers: vec![band, root],
        models: Some(models),
        notes,
    })
}

fn rs(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    rs_family(p, keys, per_page, false)
}

fn rs_disk(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    rs_family(p, keys, per_page, true)
}

fn rmi(p: &Params, keys: &[u64], _per_page: usize, _ps: usize) -> Result<Design> {
    let models = p.usize("models", 1 << 16)?;
    if keys.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: Some(0),
            notes: Value::Null,
        });
    }
    let r = crate::model::Rmi::build(keys, models)?;
    let (leaves, root) = rmi_layers(&r);
    Ok(Design {
        layers: vec![leaves, root],
        models: Some(r.num_models() as u64 + 1),
        notes: Value::Null,
    })
}

/// Kinds whose design reads only the first and last key of every data page
/// (the zone maps), so that a builder may keep 2 keys per page instead of
/// all of them; see [`design_from_page_bounds`].
pub const PAGE_BOUND_KINDS: &[&str] = &["zonemap", "leco-zonemap", "leco-zonemap-d", "gap-zonemap-d"];

/// The design of `kind` (one of [`PAGE_BOUND_KINDS`]) over a data run of
/// `per_page` records per page, from `bounds`: every page's first key then
/// its last key (the last page's last key may be left out). Builds the same
/// layers as `kind.design` over all the keys. `None` for other kinds.
pub fn design_from_page_bounds(
    kind: &LayeredKind,
    params: &Params,
    bounds: &[u64],
    per_page: usize,
    page_size: usize,
) -> Result<Option<Design>> {
    if !PAGE_BOUND_KINDS.contains(&kind.name) {
        return Ok(None);
    }
    // Over `bounds` each page is two "records": the zone builders read the
    // first key of a page and the key before it, which `bounds` holds at the
    // same offsets. Only the span recorded in the layers changes back.
    let mut d = (kind.design)(params, bounds, 2, page_size)?;
    let span = per_page as u64;
    for l in &mut d.layers {
        match &mut l.kind {
            LayerKind::Zone { span: s }
            | LayerKind::LecoZone { span: s, .. }
            | LayerKind::GapZone { span: s } => *s = span,
            other => {
                return Err(Error::invalid(format!(
                    "{}: a page-bound design built a {other:?} layer",
                    kind.name
                )));
            }
        }
    }
    Ok(Some(d))
}

fn leco_zonemap(_p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    Ok(Design {
        layers: if keys.is_empty() {
            vec![]
        } else {
            vec![leco_zone_layer(keys, per_page, false)?]
        },
        models: None,
        notes: Value::Null,
    })
}

fn gap_zonemap_d(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    // Separators per block: a lookup decodes up to one block (more memory
    // for the block heads with smaller blocks, more decoding with larger).
    let block = p.u64("block", 32)?;
    if !block.is_power_of_two() || !(2..=1 << 16).contains(&block) {
        return Err(Error::invalid(format!(
            "block must be a power of two in 2..=65536, got {block}"
        )));
    }
    Ok(Design {
        layers: if keys.is_empty() {
            vec![]
        } else {
            vec![gap_zone_layer(keys, per_page, block.trailing_zeros())?]
        },
        models: None,
        notes: Value::Null,
    })
}

fn leco_zonemap_d(_p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    Ok(Design {
        layers: if keys.is_empty() {
            vec![]
        } else {
            vec![leco_zone_layer(keys, per_page, true)?]
        },
        models: None,
        notes: Value::Null,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

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
            let segs = crate::model::optimal_pla_points(tol.points(&keys, 0..keys.len()));
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
            let entries: Vec<super::super::layer::BandEntry> =
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
            assert_eq!(extra_pages(&keys, &band, per_page), want, "{dist}");
        }
    }

    /// Every page's first and last key, as the store's run builder keeps them.
    fn page_bounds(keys: &[u64], per_page: usize) -> Vec<u64> {
        let mut out = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            let r = i % per_page;
            if r == 0 {
                out.push(k);
            }
            if r + 1 == per_page {
                out.push(k);
            }
        }
        out
    }

    #[test]
    fn zone_maps_from_page_bounds_equal_zone_maps_from_all_keys() {
        let clustered: Vec<u64> = (0..5_000u64)
            .map(|i| ((i / 100) << 40) | ((i % 100) * 3))
            .collect();
        let gaps: Vec<u64> = (0..3_001u64)
            .map(|i| if i < 3_000 { i * i * 1_000_003 } else { u64::MAX })
            .collect();
        let dense: Vec<u64> = (0..2_000u64).collect();
        for keys in [&clustered, &gaps, &dense, &vec![7u64], &vec![0, u64::MAX]] {
            for per_page in [1usize, 2, 3, 255] {
                let bounds = page_bounds(keys, per_page);
                for kind in LAYERED_KINDS.iter() {
                    let params = Params::default();
                    let got = design_from_page_bounds(kind, &params, &bounds, per_page, 4096).unwrap();
                    let Some(got) = got else {
                        assert!(!PAGE_BOUND_KINDS.contains(&kind.name), "{}", kind.name);
                        continue;
                    };
                    let want = (kind.design)(&params, keys, per_page, 4096).unwrap();
                    assert_eq!(got.layers.len(), want.layers.len(), "{}", kind.name);
                    for (g, w) in got.layers.iter().zip(&want.layers) {
                        assert_eq!(g.kind, w.kind, "{} per page {per_page}", kind.name);
                        assert!(
                            g.flat == w.flat,
                            "{} per page {per_page}: layer bytes differ",
                            kind.name
                        );
                        assert_eq!(g.last_successor, w.last_successor);
                    }
                }
            }
        }
        assert_eq!(PAGE_BOUND_KINDS.len(), 4);
    }
}
