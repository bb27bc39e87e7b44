//! Index layers: what they store, how they are laid out in paged files, and
//! how one search step maps a key to a range of the layer below.
//!
//! Every layer is a sorted array of entries, each covering the keys from its
//! own key up to the next entry's key (AirIndex's piecewise layer). A search
//! step reads a window of entries (all of them at the root), picks the last
//! entry whose key is `<=` the query, and turns it into a position range in
//! the layer below:
//!
//! - `Step` entries `(key, start)`: the range is `[start_j, start_{j+1})`
//!   (AirIndex's step node, a B+-tree level);
//! - `Zone` entries `(key)` with implicit positions: entry `j` covers
//!   `[j * span, (j + 1) * span)` (a zone map: one key per data page);
//! - `Band` entries `(key, slope, intercept)`: a linear prediction with a
//!   measured error bound (AirIndex's band node, a PGM/FITing/RS segment);
//! - `Leaf` entries of an RMI, chosen directly by the root model.
//!
//! The successor value an entry needs (`start_{j+1}` of a step, the next
//! intercept of a band) is the next entry's field, or, for the last entry on a
//! page, the page's `aux` word, so one page always suffices.

use serde::{Deserialize, Serialize};

use super::compressed::Decoded;
use super::entries::{BandEntry, Entries};
use crate::format::{PageType, PagedSpec};
use crate::model::{RmiLeaf, RmiRoot, leaf_approx};
use crate::{Error, Result};

/// Magic number of an index layer file: `STRATALY`.
pub(super) const LAYER_MAGIC: u64 = u64::from_le_bytes(*b"STRATALY");
/// Format version of layer files.
pub(super) const LAYER_VERSION: u32 = 1;

/// The layer file spec for entries of `width` bytes.
pub fn layer_spec(width: usize) -> PagedSpec {
    PagedSpec {
        magic: LAYER_MAGIC,
        version: LAYER_VERSION,
        page_type: PageType::Layer,
        width,
        name: "strata index layer",
    }
}

/// What a layer is, with the parameters a search step needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum LayerKind {
    /// `(key u64, start u64)`; exact ranges `[start_j, start_{j+1})`.
    Step,
    /// `(key u64)`; entry `j` covers `[j * span, (j + 1) * span)`.
    Zone {
        /// Positions per entry (records per page for a zone map).
        span: u64,
    },
    /// `(key u64, slope f64, intercept u64)`: prediction `p` in units of
    /// `granule` positions; range `[(p - eps_lo) * granule, (p + eps_hi + 1) * granule)`,
    /// widened to whole pages of `zero_page` positions when that is non-zero
    /// (Zhang's disk-based zero intervals).
    Band {
        /// Positions per predicted unit (1 item level, records per page at page level).
        granule: u64,
        /// Page size in positions for zero-interval error, 0 for plain error.
        zero_page: u64,
        /// Measured bound below the prediction (for a sampled band, the
        /// samples' measured bound plus one: see `pgm_design::sampled_band`).
        eps_lo: u64,
        /// Measured bound above the prediction.
        eps_hi: u64,
    },
    /// A band layer compressed as one blob (Zhang G4, CprLeCo_PGM_D): keys
    /// and intercepts LeCo-compressed, slopes from a small shared table. Same
    /// prediction and bounds as `Band`; the entry is found by binary search.
    CprBand {
        /// As in `Band`.
        granule: u64,
        /// As in `Band`.
        zero_page: u64,
        /// As in `Band`.
        eps_lo: u64,
        /// As in `Band`.
        eps_hi: u64,
    },
    /// A zone map whose separators are LeCo-compressed, as one blob (Zhang
    /// G5): exact first keys (`lossy = false`, LeCo zone map) or rough
    /// separators inside each gap between pages (`lossy = true`, LeCo-Zonemap-D).
    LecoZone {
        /// Positions per entry (records per page).
        span: u64,
        /// Rough separators (-D variant).
        lossy: bool,
    },
    /// A zone map of rough separators, each chosen inside the gap before its
    /// page and stored gap-coded at the precision that gap allows
    /// ([`crate::model::GapArray`]), as one blob. Strata's own step past
    /// LeCo-Zonemap-D: the same separators' freedom, a code that uses it.
    GapZone {
        /// Positions per entry (records per page).
        span: u64,
    },
    /// A radix table over the layer below's keys (RadixSpline's root):
    /// entry `b` is the first entry below whose key has radix prefix `>= b`,
    /// prefix = `(key - min_key) >> shift`.
    Radix {
        /// Smallest key below.
        min_key: u64,
        /// Right shift giving the prefix.
        shift: u32,
    },
    /// The root of a two-layer RMI: one 48-byte entry
    /// `(min_key, max_key, slope f64, intercept f64, models, n)`; the range
    /// below is the one leaf the key is routed to.
    RmiRoot,
    /// RMI leaf models: `(base u64, slope f64, intercept f64, err_lo i32 | err_hi i32 << 32, first u64)`;
    /// the entry is chosen by the root, not by key.
    RmiLeaf {
        /// Number of records.
        n: u64,
        /// Smallest key.
        min_key: u64,
        /// Largest key.
        max_key: u64,
    },
}

impl LayerKind {
    /// Entry width in bytes.
    pub fn width(&self) -> usize {
        match self {
            LayerKind::Step => 16,
            LayerKind::Zone { .. } | LayerKind::Radix { .. } => 8,
            LayerKind::Band { .. } => 24,
            LayerKind::CprBand { .. } | LayerKind::LecoZone { .. } | LayerKind::GapZone { .. } => 1,
            LayerKind::RmiRoot => 48,
            LayerKind::RmiLeaf { .. } => 40,
        }
    }

    /// Whether the layer is one compressed blob, decoded as a whole (read
    /// whole from storage on every lookup when not resident).
    pub fn is_blob(&self) -> bool {
        matches!(
            self,
            LayerKind::CprBand { .. } | LayerKind::LecoZone { .. } | LayerKind::GapZone { .. }
        )
    }

    /// Whether ranges are exact (the wanted entry of an index layer below is
    /// inside the range); approximate layers' ranges are widened by one entry
    /// on each side when the layer below is an index layer.
    pub fn exact(&self) -> bool {
        matches!(
            self,
            LayerKind::Step
                | LayerKind::Zone { .. }
                | LayerKind::LecoZone { .. }
                | LayerKind::GapZone { .. }
                | LayerKind::RmiRoot
        )
    }

    /// Byte offset of the field whose successor value the entry needs.
    pub fn successor_field(&self) -> Option<usize> {
        match self {
            LayerKind::Step => Some(8),
            LayerKind::Band { .. } => Some(16),
            LayerKind::Radix { .. } => Some(0),
            LayerKind::RmiLeaf { .. } => Some(32),
            _ => None,
        }
    }

    /// Encodes the kind for the layer file header.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes a layer file header.
    pub fn decode(bytes: &[u8], file: &str) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| Error::corruption(file, 0, format!("layer header: {e}")))
    }
}

/// The value of `field` for the entry after `i`: the next entry's field if
/// the window holds it, else the aux word of `i`'s page.
#[inline]
fn successor(e: &dyn Entries, i: u64, field: usize) -> Option<u64> {
    e.u64_at(i + 1, field).or_else(|| e.page_aux(i))
}

/// Index of the last entry in `[lo, hi)` whose key is `<= key`, or `lo` if
/// every key is larger.
#[inline]
pub(super) fn last_le(e: &dyn Entries, key: u64, lo: u64, hi: u64) -> u64 {
    let (mut a, mut b) = (lo, hi);
    // Invariant: entries before `a` are <= key, entries from `b` are > key.
    while a < b {
        let mid = a + (b - a) / 2;
        match e.u64_at(mid, 0) {
            Some(k) if k <= key => a = mid + 1,
            _ => b = mid,
        }
    }
    if a > lo { a - 1 } else { lo }
}

/// Index of the last entry in `[from, hi)` whose key is `<= key`, given
/// that entry `from` is (or `from` is the first entry): a galloping search
/// forward from `from`, `O(log d)` for an answer `d` entries on. For keys
/// that increase (a join's probes) the answer of one key is where the
/// search of the next starts.
#[inline]
pub(super) fn last_le_from(e: &dyn Entries, key: u64, from: u64, hi: u64) -> u64 {
    let le = |i: u64| e.u64_at(i, 0).is_some_and(|k| k <= key);
    let mut step = 1u64;
    let mut a = from;
    // Invariant: entry `a` is <= key (or a == from); grow until one is not.
    loop {
        let probe = a.saturating_add(step);
        if probe >= hi || !le(probe) {
            return last_le(e, key, a, probe.min(hi));
        }
        a = probe;
        step = step.saturating_mul(2);
    }
}

/// Whether a search step in a layer of `kind` starts with [`last_le`] over
/// fixed-width entries (and so can start from a previous answer instead).
pub(crate) fn searches_last_le(kind: &LayerKind) -> bool {
    matches!(
        kind,
        LayerKind::Step | LayerKind::Zone { .. } | LayerKind::Band { .. }
    )
}

/// How a search step reaches a layer's entries.
#[derive(Clone, Copy)]
pub(crate) enum Access<'a> {
    /// Fixed-width entries (resident or just read).
    Entries(&'a dyn Entries),
    /// A decoded blob layer.
    Blob(&'a Decoded),
}

/// One search step in a layer: the range of positions in the layer below
/// (count `below`) for `key`, using entries `[lo, hi)` of the window.
pub(crate) fn step(
    kind: &LayerKind,
    access: Access<'_>,
    key: u64,
    lo: u64,
    hi: u64,
    below: u64,
) -> Result<(u64, u64)> {
    let corrupt = |j: u64| Error::corruption("index layer", 0, format!("entry {j} missing from the window"));
    let mismatch = || Error::corruption("index layer", 0, "layer kind and stored form disagree");
    match (kind, access) {
        (LayerKind::Step, Access::Entries(e)) => {
            let j = last_le(e, key, lo, hi);
            let start = e.u64_at(j, 8).ok_or_else(|| corrupt(j))?;
            let end = successor(e, j, 8).ok_or_else(|| corrupt(j))?;
            Ok((start.min(below), end.min(below).max(start.min(below))))
        }
        (LayerKind::Zone { span }, Access::Entries(e)) => {
            let j = last_le(e, key, lo, hi);
            Ok(span_range(j, *span, below))
        }
        (
            LayerKind::Band {
                granule,
                zero_page,
                eps_lo,
                eps_hi,
            },
            Access::Entries(e),
        ) => {
            let j = last_le(e, key, lo, hi);
            let entry = BandEntry::read(e, j).ok_or_else(|| corrupt(j))?;
            let next = successor(e, j, 16).ok_or_else(|| corrupt(j))?;
            let g = (*granule).max(1);
            let p = entry.predict(key, next, below.div_ceil(g));
            Ok(band_range(p, *eps_lo, *eps_hi, g, *zero_page, below))
        }
        (LayerKind::Radix { min_key, shift }, Access::Entries(e)) => {
            let (first, end) = e.range();
            if first >= end {
                return Err(corrupt(first));
            }
            let prefix = key.saturating_sub(*min_key).checked_shr(*shift).unwrap_or(0);
            let b = prefix.min(end - 1 - first) + first;
            let start = e.u64_at(b, 0).ok_or_else(|| corrupt(b))?;
            let stop = successor(e, b, 0).ok_or_else(|| corrupt(b))?;
            Ok((start.min(below), stop.min(below).max(start.min(below))))
        }
        (LayerKind::RmiRoot, Access::Entries(e)) => {
            let root = rmi_root(e, lo).ok_or_else(|| corrupt(lo))?;
            let leaf = root.route(key) as u64;
            Ok((leaf.min(below), (leaf + 1).min(below)))
        }
        (LayerKind::RmiLeaf { n, min_key, max_key }, Access::Entries(e)) => {
            let j = lo;
            let leaf = RmiLeaf {
                base: e.u64_at(j, 0).ok_or_else(|| corrupt(j))?,
                slope: f64::from_bits(e.u64_at(j, 8).ok_or_else(|| corrupt(j))?),
                intercept: f64::from_bits(e.u64_at(j, 16).ok_or_else(|| corrupt(j))?),
                err_lo: e.u64_at(j, 24).ok_or_else(|| corrupt(j))? as u32 as i32,
                err_hi: (e.u64_at(j, 24).ok_or_else(|| corrupt(j))? >> 32) as u32 as i32,
            };
            let first = e.u64_at(j, 32).ok_or_else(|| corrupt(j))?;
            let end = successor(e, j, 32).ok_or_else(|| corrupt(j))?;
            let root = RmiRoot {
                n: *n,
                min_key: *min_key,
                max_key: *max_key,
                slope: 0.0,
                intercept: 0.0,
                models: 0,
            };
            let (_, l, h) = leaf_approx(&root, &leaf, first, end, key);
            // `leaf_approx` promises lb in [l, h); the engine's contract is weaker.
            Ok((l.min(below), h.min(below).max(l.min(below))))
        }
        (LayerKind::LecoZone { span, .. }, Access::Blob(Decoded::Leco(z))) => {
            let j = z.upper_bound(key).saturating_sub(1) as u64;
            Ok(span_range(j, *span, below))
        }
        (LayerKind::GapZone { span }, Access::Blob(Decoded::Gap(z))) => {
            let j = z.upper_bound(key).saturating_sub(1) as u64;
            Ok(span_range(j, *span, below))
        }
        (
            LayerKind::CprBand {
                granule,
                zero_page,
                eps_lo,
                eps_hi,
            },
            Access::Blob(Decoded::Cpr(c)),
        ) => {
            let (entry, next) = c.find(key).ok_or_else(|| corrupt(0))?;
            let g = (*granule).max(1);
            let max_unit = below.div_ceil(g);
            let next = next.unwrap_or(max_unit);
            let p = entry.predict(key, next, max_unit);
            Ok(band_range(p, *eps_lo, *eps_hi, g, *zero_page, below))
        }
        _ => Err(mismatch()),
    }
}

/// The RMI root entry at `i`.
pub(super) fn rmi_root(e: &dyn Entries, i: u64) -> Option<RmiRoot> {
    Some(RmiRoot {
        min_key: e.u64_at(i, 0)?,
        max_key: e.u64_at(i, 8)?,
        slope: f64::from_bits(e.u64_at(i, 16)?),
        intercept: f64::from_bits(e.u64_at(i, 24)?),
        models: usize::try_from(e.u64_at(i, 32)?).ok()?,
        n: e.u64_at(i, 40)?,
    })
}

#[inline]
pub(crate) fn span_range(j: u64, span: u64, below: u64) -> (u64, u64) {
    let start = j.saturating_mul(span).min(below);
    (start, start.saturating_add(span).min(below))
}

/// The position range of a band prediction `p` (in granules).
#[inline]
pub(crate) fn band_range(
    p: u64,
    eps_lo: u64,
    eps_hi: u64,
    granule: u64,
    zero_page: u64,
    below: u64,
) -> (u64, u64) {
    let mut lo = p.saturating_sub(eps_lo).saturating_mul(granule);
    let mut hi = p.saturating_add(eps_hi).saturating_add(1).saturating_mul(granule);
    if let (Some(first), Some(last)) = (
        lo.checked_div(zero_page),
        hi.saturating_sub(1).checked_div(zero_page),
    ) {
        // Whole pages: from the page of `lo` to the page of `hi - 1`, inclusive.
        lo = first * zero_page;
        hi = last.saturating_add(1).saturating_mul(zero_page);
    }
    let lo = lo.min(below);
    (lo, hi.min(below).max(lo))
}

#[cfg(test)]
mod tests {
    use super::super::entries::OFF_SCALE;
    use super::*;

    #[test]
    fn band_range_rounds_to_pages() {
        // Plain: p=100, eps 3/4 → [97, 105).
        assert_eq!(band_range(100, 3, 4, 1, 0, 1000), (97, 105));
        // Zero intervals with 10-item pages: [90, 110).
        assert_eq!(band_range(100, 3, 4, 1, 10, 1000), (90, 110));
        // Page granularity: unit 10 items, p=5 → [50, 60).
        assert_eq!(band_range(5, 0, 0, 10, 0, 1000), (50, 60));
        // Clamped to the layer below.
        assert_eq!(band_range(0, 5, 5, 1, 0, 3), (0, 3));
        assert_eq!(band_range(u64::MAX, 5, 5, 1, 0, 3), (3, 3));
    }

    /// `BandEntry::predict` computed in i128 throughout (the definition).
    fn predict_i128(e: &BandEntry, x: u64, next_base: u64, max_unit: u64) -> u64 {
        let lo = e.base.min(max_unit);
        let hi = next_base.min(max_unit).max(lo);
        let t = e.slope as f64 * x.saturating_sub(e.key) as f64 * OFF_SCALE as f64;
        let step = if t > 0.0 { t as u64 } else { 0 };
        let q = (e.base as i128 * OFF_SCALE + e.off as i128).saturating_add(step as i128);
        let raw = (q + OFF_SCALE / 2).div_euclid(OFF_SCALE);
        raw.clamp(lo as i128, hi as i128) as u64
    }

    #[test]
    fn band_predict_fast_path_matches_i128() {
        let bases = [0, 1, 7, 1 << 20, (1 << 58) - 1, 1 << 59, u64::MAX / 16, u64::MAX];
        let offs = [i32::MIN, -17, -8, -1, 0, 7, 8, 9, i32::MAX];
        let slopes = [0.0f32, 1e-15, 1e-6, 0.5, 1.0, 3.7, 1e9, f32::MAX];
        let xs = [0, 1, 99, 1 << 32, u64::MAX / 3, u64::MAX];
        let mut checked = 0;
        for &base in &bases {
            for &off in &offs {
                for &slope in &slopes {
                    let e = BandEntry {
                        key: 5,
                        slope,
                        off,
                        base,
                    };
                    for &x in &xs {
                        for (next, max) in [
                            (base.saturating_add(1000), u64::MAX),
                            (u64::MAX, u64::MAX),
                            (10, 20),
                        ] {
                            assert_eq!(
                                e.predict(x, next, max),
                                predict_i128(&e, x, next, max),
                                "{e:?} x={x} next={next} max={max}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 10_000);
    }

    #[test]
    fn band_predict_is_monotone_and_clamped() {
        let e = BandEntry {
            key: 0,
            slope: 1e-15,
            off: 160,
            base: 0,
        };
        let mut prev = 0;
        for k in (0..1000u64).map(|i| i * (u64::MAX / 1000)) {
            let p = e.predict(k, 500, 10_000);
            assert!(p >= prev);
            assert!(p <= 500);
            prev = p;
        }
        // Intercept 7 - 3 = 4 units, one unit per key.
        let f = BandEntry {
            key: 100,
            slope: 1.0,
            off: -48,
            base: 7,
        };
        assert_eq!(
            f.predict(50, 1000, 10_000),
            7,
            "below the entry: clamped to its base"
        );
        assert_eq!(f.predict(110, 1000, 10_000), 14);
        assert_eq!(
            f.predict(u64::MAX, 1000, 10_000),
            1000,
            "clamped to the next base"
        );
        // Rounded to the nearest unit: 4 + 0.5 * 9 = 8.5 -> 9; 4 + 0.5 * 8 = 8.
        let h = BandEntry { slope: 0.5, ..f };
        assert_eq!(h.predict(109, 1000, 10_000), 9);
        assert_eq!(h.predict(108, 1000, 10_000), 8);
        let inf = BandEntry {
            slope: f32::INFINITY,
            ..f
        };
        assert_eq!(inf.predict(101, 1000, 500), 500);
        let mut b = Vec::new();
        f.write(&mut b);
        assert_eq!(b.len(), 24);
    }
}
