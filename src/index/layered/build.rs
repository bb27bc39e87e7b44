//! Building layers: step (B+-tree levels), zone maps and bands (linear
//! segments with measured error bounds), and writing them as layer files.

use super::layer::{LayerKind, band_predict, layer_spec};
use crate::format::PagedWriter;
use crate::format::bytes::put_u64;
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

/// Writes a layer as the paged file `name`; each page's aux word is the
/// successor value of its last entry.
pub fn write_layer(dir: &dyn Directory, name: &str, layer: &LayerBuild, page_size: usize) -> Result<()> {
    let width = layer.kind.width();
    let mut w = PagedWriter::new(dir.create(name)?, layer_spec(width), page_size)?;
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
pub fn zone_layer(keys: &[u64], per_page: usize) -> LayerBuild {
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
pub fn step_layer(below_keys: &[u64], fanout: usize) -> LayerBuild {
    let fanout = fanout.max(2);
    let mut flat = Vec::with_capacity(below_keys.len().div_ceil(fanout) * 16);
    for (j, k) in below_keys.iter().step_by(fanout).enumerate() {
        flat.extend_from_slice(&k.to_le_bytes());
        flat.extend_from_slice(&((j * fanout) as u64).to_le_bytes());
    }
    LayerBuild {
        kind: LayerKind::Step,
        flat,
        last_successor: below_keys.len() as u64,
    }
}

/// Stacks step layers (a B+-tree over `below`) until the top fits in one
/// page of `page_size`; returns them bottom-up.
pub fn step_stack(below: &LayerBuild, page_size: usize) -> Vec<LayerBuild> {
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
pub struct SegmentLine {
    /// Index of its first point.
    pub start: usize,
    /// Slope in positions (granules) per key unit.
    pub slope: f64,
    /// Predicted position (granules) at its first key.
    pub intercept: f64,
}

/// Builds a band layer over points `(keys[i], i)` with lines from a
/// segmentation, predicting in units of `granule` positions, measuring the
/// error bounds with the exact query-time arithmetic ([`band_predict`]).
/// With `zero_page > 0` (item granularity only), the error of a prediction in
/// the key's own page of `zero_page` positions is zero (Zhang §6.1).
/// `below` is the number of positions in the layer below (`keys.len()`).
pub fn band_layer(
    keys: &[u64],
    segments: &[SegmentLine],
    granule: u64,
    zero_page: u64,
) -> Result<LayerBuild> {
    let n = keys.len() as u64;
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
    // Integer intercepts, made non-decreasing so clamping by the next
    // intercept keeps predictions monotone across entries.
    let mut intercepts: Vec<u64> = Vec::with_capacity(m);
    let mut prev = 0u64;
    for s in segments {
        let c = if s.intercept.is_finite() && s.intercept > 0.0 {
            s.intercept.round() as u64
        } else {
            0
        };
        let c = c.min(max_unit).max(prev);
        intercepts.push(c);
        prev = c;
    }
    let mut flat = vec![0u8; m * 24];
    let (mut eps_lo, mut eps_hi) = (0u64, 0u64);
    for (j, s) in segments.iter().enumerate() {
        let end = segments.get(j + 1).map_or(keys.len(), |t| t.start);
        let first_key = *keys
            .get(s.start)
            .ok_or_else(|| Error::invalid("segment start out of range"))?;
        let slope = if s.slope.is_finite() && s.slope > 0.0 {
            s.slope
        } else {
            0.0
        };
        let c = intercepts[j];
        let next = intercepts.get(j + 1).copied().unwrap_or(max_unit);
        for (i, &k) in keys.iter().enumerate().take(end).skip(s.start) {
            let p = band_predict(first_key, slope, c, next, k, max_unit);
            let y = i as u64;
            if let Some(page) = y.checked_div(zero_page) {
                let page_start = page * zero_page;
                let page_last = page_start + zero_page - 1;
                eps_hi = eps_hi.max(page_start.saturating_sub(p));
                eps_lo = eps_lo.max(p.saturating_sub(page_last));
            } else {
                let u = y / g;
                eps_hi = eps_hi.max(u.saturating_sub(p));
                eps_lo = eps_lo.max(p.saturating_sub(u));
            }
        }
        put_u64(&mut flat, j * 24, first_key);
        put_u64(&mut flat, j * 24 + 8, slope.to_bits());
        put_u64(&mut flat, j * 24 + 16, c);
    }
    Ok(LayerBuild {
        kind: LayerKind::Band {
            granule: g,
            zero_page,
            eps_lo,
            eps_hi,
        },
        flat,
        last_successor: max_unit,
    })
}
