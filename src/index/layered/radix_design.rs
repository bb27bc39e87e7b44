//! Designs with a root over one model layer: RadixSpline (kinds `rs`,
//! `rs-disk`: spline points as a band, a radix table above, zero intervals
//! chosen against a measured page budget) and a two-layer RMI (`rmi`).

use serde_json::{Value, json};

use super::build::{LayerBuild, SegmentLine, band_entries, band_of_entries_in, radix_layer, rmi_layers};
use super::design::Design;
use super::entries::BandEntry;
use super::keys::Keys;
use super::pgm_design::{Measured, measured_band_within, measured_bands, widest_window, window_reach};
use crate::Result;
use crate::index::{ParamDoc, Params};
use crate::model::radix_spline::radix_bits_for;
use crate::model::{RadixSpline, SplinePoints};

/// Lines `range` of a spline as band lines: segment `j` interpolates
/// between spline points `j` and `j + 1`.
fn spline_lines(spline: &SplinePoints, range: std::ops::Range<usize>) -> Vec<SegmentLine> {
    let (keys, pos) = (&spline.keys, &spline.pos);
    range
        .filter_map(|j| {
            let (&k, &p) = (keys.get(j)?, pos.get(j)?);
            Some(SegmentLine {
                start: p as usize,
                slope: match (keys.get(j + 1), pos.get(j + 1)) {
                    (Some(&k2), Some(&p2)) if k2 > k => (p2 - p) as f64 / (k2 - k) as f64,
                    _ => 0.0,
                },
                intercept: p as f64,
            })
        })
        .collect()
}

/// What [`rs`] and [`rs_disk`] read.
pub(super) const RS_PARAMS: &[ParamDoc] = &[
    ParamDoc::new("epsilon", "error bound of the spline points"),
    ParamDoc::new("radix_bits", "bits of the key prefix the radix table indexes"),
];

/// What [`rmi`] reads.
pub(super) const RMI_PARAMS: &[ParamDoc] = &[ParamDoc::new("models", "leaf models of the second layer")];

/// RadixSpline over keys in memory or in a data run: the corridor's points
/// in one pass (over a run being written: while it is written), the band's
/// bounds in a pass over the run; with `zero`, the zero-interval
/// window chosen against plain RadixSpline's measured pages (Zhang G3), the
/// plain band and the first window's measured together in one pass, any
/// other window tried in passes of its own.
fn rs_family(p: &Params, keys: Keys<'_>, per_page: usize, zero: bool) -> Result<Design> {
    let eps = p.u64("epsilon", 64)?;
    let radix_bits = p.u64("radix_bits", 18)? as u32;
    let page = per_page as u64;
    // The spline's points only: the band measures its own bounds, so the
    // spline's error pass (a full pass over the run) would be thrown away.
    // With zero intervals, the first window tried (`eps`, always built:
    // see `widest_window`) is laid in the same pass.
    let (spline, first_zero) = if zero {
        let (p, z) = RadixSpline::points_and_zero_interval_points_passes(&keys, eps, page)?;
        (p, Some(z))
    } else {
        (RadixSpline::points_passes(&keys, eps)?, None)
    };
    if spline.keys.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: Some(0),
            notes: Value::Null,
        });
    }
    let plain_points = spline.keys.len() as u64;
    let radix_bits_used = radix_bits_for(&spline.keys, radix_bits);
    let (band, models, notes) = match first_zero {
        Some(z) => {
            let (band, w, extra, budget, points) = zero_interval_band(keys, spline, z, eps, page)?;
            let notes = json!({
                "zero_interval_window": w,
                "expected_pages": 1.0 + extra,
                "page_budget": 1.0 + budget,
                "rs_points_at_epsilon": plain_points,
            });
            (band, points, notes)
        }
        None => (spline_band(keys, spline, 0)?, plain_points, Value::Null),
    };
    let root = radix_layer(&band.keys(), radix_bits_used);
    Ok(Design {
        layers: vec![band, root],
        models: Some(models),
        notes,
    })
}

/// Zero intervals (Zhang G3 applied to RadixSpline): the band of the widest
/// window `w <= eps` whose measured pages per lookup stay within plain
/// RadixSpline's at `eps` (+ 0.002), with `w`, its extra pages per lookup,
/// the budget and its spline points. `plain` is plain RadixSpline's spline,
/// `at_eps` the zero-interval spline of window `eps`, the first one tried
/// (see [`widest_window`]): both bands are measured, and their pages counted,
/// in one pass ([`measured_bands`]).
fn zero_interval_band(
    keys: Keys<'_>,
    plain: SplinePoints,
    at_eps: SplinePoints,
    eps: u64,
    page: u64,
) -> Result<(LayerBuild, u64, f64, f64, u64)> {
    let reach = window_reach(eps.saturating_mul(2), page);
    let points_at_eps = at_eps.keys.len() as u64;
    let (plain_entries, plain_starts) = spline_entries(keys.len(), plain, 0)?;
    let (zero_entries, zero_starts) = spline_entries(keys.len(), at_eps, page)?;
    let plain_band = Measured {
        starts: &plain_starts,
        entries: &plain_entries,
        zero_page: 0,
    };
    let zero_band = Measured {
        starts: &zero_starts,
        entries: &zero_entries,
        zero_page: page,
    };
    let mut measured = measured_bands(keys, &[plain_band, zero_band], page, reach)?.into_iter();
    let (Some(plain), Some(zero)) = (measured.next(), measured.next()) else {
        return Err(crate::Error::invalid("two bands measured, fewer returned"));
    };
    // Plain RadixSpline's pages only (its layer is not laid), then the
    // zero-interval layer, once the plain entries are gone.
    let plain_extra = plain.extra(keys, &plain_band, page, reach)?;
    drop((plain_entries, plain_starts));
    let (band, extra) = zero.finish(keys, &zero_band, page, reach)?;
    drop((zero_entries, zero_starts));
    let budget = plain_extra + 0.002;
    let mut at_eps = Some(((band, points_at_eps), extra));
    let ((band, points), w, extra) = widest_window(eps, eps, budget, |w, limit| {
        if w == eps
            && let Some(built) = at_eps.take()
        {
            return Ok(Some(built));
        }
        let z = RadixSpline::zero_interval_points_passes(&keys, w, page)?;
        let points = z.keys.len() as u64;
        let (entries, starts) = spline_entries(keys.len(), z, page)?;
        Ok(
            measured_band_within(keys, &starts, &entries, page, page, reach, limit)?
                .map(|(band, extra)| ((band, points), extra)),
        )
    })?;
    Ok((band, w, extra, budget, points))
}

/// The band layer of a spline over its keys, measured in one pass (zero
/// intervals of `zero_page` positions, or none).
fn spline_band(keys: Keys<'_>, spline: SplinePoints, zero_page: u64) -> Result<LayerBuild> {
    let (entries, starts) = spline_entries(keys.len(), spline, zero_page)?;
    band_of_entries_in(keys, &starts, &entries, 1, zero_page)
}

/// The band entries of a spline over `n` keys and each one's first
/// position.
///
/// What is built is held, not what it was built from: the lines are laid
/// [`LINES_AT_ONCE`] at a time (all of them at once would hold 24 bytes per
/// spline point next to the entries), and the points go before the
/// measuring pass (at 200M keys 13 MB, against a model of 21 MB).
fn spline_entries(n: usize, spline: SplinePoints, zero_page: u64) -> Result<(Vec<BandEntry>, Vec<usize>)> {
    let m = spline.keys.len();
    let (mut entries, mut starts) = (Vec::with_capacity(m), Vec::with_capacity(m));
    let (points, pos) = (&spline.keys, &spline.pos);
    let first_key = |i: usize| {
        points
            .get(pos.partition_point(|&p| (p as usize) < i))
            .map_or(0, |&k| k)
    };
    for a in (0..m).step_by(LINES_AT_ONCE) {
        let lines = spline_lines(&spline, a..(a + LINES_AT_ONCE).min(m));
        let (e, s) = band_entries(n, &lines, &first_key, None, 1, zero_page)?;
        entries.extend(e);
        starts.extend(s);
    }
    Ok((entries, starts))
}

/// Spline lines laid at once by [`spline_band`] (1.5 MiB of lines).
const LINES_AT_ONCE: usize = 1 << 16;

/// [`rs`] over keys in memory or in a data run (see [`rs_family`]).
pub(super) fn rs_in(p: &Params, keys: Keys<'_>, per_page: usize, _ps: usize) -> Result<Design> {
    rs_family(p, keys, per_page, false)
}

/// [`rs_disk`] over keys in memory or in a data run (see [`rs_family`]).
pub(super) fn rs_disk_in(p: &Params, keys: Keys<'_>, per_page: usize, _ps: usize) -> Result<Design> {
    rs_family(p, keys, per_page, true)
}

pub(super) fn rs(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    crate::model::radix_spline::check_strictly_increasing(keys)?;
    rs_family(p, keys.into(), per_page, false)
}

pub(super) fn rs_disk(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    crate::model::radix_spline::check_strictly_increasing(keys)?;
    rs_family(p, keys.into(), per_page, true)
}

pub(super) fn rmi(p: &Params, keys: &[u64], per_page: usize, ps: usize) -> Result<Design> {
    crate::model::radix_spline::check_strictly_increasing(keys)?;
    rmi_in(p, keys.into(), per_page, ps)
}

/// [`rmi`] over keys in memory or in a data run (`Rmi::build_from`): the
/// root's sums taken in the first pass (over a run being written, as it is
/// written), then one pass that routes the keys and fits the leaves, in
/// parallel parts, holding one leaf's keys at most per part.
pub(super) fn rmi_in(p: &Params, keys: Keys<'_>, _per_page: usize, _ps: usize) -> Result<Design> {
    let models = p.usize("models", 1 << 16)?;
    // Not `keys.is_empty()` first: over a piped run that waits for the
    // writer, and the first pass would no longer overlap the write.
    let r = crate::model::Rmi::build_from(&keys, models)?;
    if r.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: Some(0),
            notes: Value::Null,
        });
    }
    let (leaves, root) = rmi_layers(&r);
    Ok(Design {
        layers: vec![leaves, root],
        models: Some(r.num_models() as u64 + 1),
        notes: Value::Null,
    })
}
