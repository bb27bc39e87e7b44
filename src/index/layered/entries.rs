//! Fixed-width layer entries as the search reads them: the [`Entries`]
//! window (paged or resident) and the band entry format. Shared by the layer
//! search (`layer.rs`) and the compressed band (`compressed.rs`), which both
//! import it from here.

use crate::format::PagedRun;
use crate::format::bytes::get_u64;

/// Read access to a window of a layer's entries, resident or just read.
pub trait Entries {
    /// The `u64` at byte `field` of entry `i`.
    fn u64_at(&self, i: u64, field: usize) -> Option<u64>;
    /// The aux word of the page holding entry `i`.
    fn page_aux(&self, i: u64) -> Option<u64>;
    /// Entries `[lo, hi)` available.
    fn range(&self) -> (u64, u64);
}

impl Entries for PagedRun {
    fn u64_at(&self, i: u64, field: usize) -> Option<u64> {
        PagedRun::u64_at(self, i, field)
    }
    fn page_aux(&self, i: u64) -> Option<u64> {
        self.aux_of_page(i / self.per_page())
    }
    fn range(&self) -> (u64, u64) {
        self.entry_range()
    }
}

/// A layer held in memory: its entries back to back, and each page's aux.
#[derive(Debug, Clone)]
pub(crate) struct ResidentEntries {
    /// Entry bytes, `count * width`.
    pub flat: Vec<u8>,
    /// Aux word of each page of the layer file.
    pub aux: Vec<u64>,
    /// Entry width.
    pub width: usize,
    /// Entries per page of the layer file.
    pub per_page: u64,
    /// Number of entries.
    pub count: u64,
}

impl Entries for ResidentEntries {
    #[inline]
    fn u64_at(&self, i: u64, field: usize) -> Option<u64> {
        if i >= self.count {
            return None;
        }
        get_u64(&self.flat, i as usize * self.width + field)
    }
    fn page_aux(&self, i: u64) -> Option<u64> {
        self.aux.get((i / self.per_page) as usize).copied()
    }
    fn range(&self) -> (u64, u64) {
        (0, self.count)
    }
}

impl ResidentEntries {
    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> u64 {
        (self.flat.capacity() + self.aux.capacity() * 8) as u64
    }
}

/// Fixed-point scale of [`BandEntry::off`]: sixteenths of a unit.
pub(super) const OFF_SCALE: i128 = 16;

/// One segment of a band layer (24 bytes on storage):
///
/// ```text
/// 0  key   u64  first key (or a rough separator before it)
/// 8  slope f32  units per key, >= 0
/// 12 off   i32  intercept minus base, in sixteenths of a unit
/// 16 base  u64  first unit (position / granule) of the segment
/// ```
/// The prediction for `x` is `round(base + off/16 + slope * (x - key))`
/// (the product floored to sixteenths), clamped to `[base, next base]`: monotone in `x` across entries, and the
/// clamp never moves a prediction away from a key of the segment (every such
/// key's unit lies in `[base, next base]`), so it only ever shrinks errors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandEntry {
    /// Entry key.
    pub key: u64,
    /// Slope in units per key.
    pub slope: f32,
    /// Intercept relative to `base`, in sixteenths of a unit.
    pub off: i32,
    /// First unit of the segment.
    pub base: u64,
}

impl BandEntry {
    /// Reads entry `j`.
    #[inline]
    pub fn read(e: &dyn Entries, j: u64) -> Option<Self> {
        let w = e.u64_at(j, 8)?;
        Some(BandEntry {
            key: e.u64_at(j, 0)?,
            slope: f32::from_bits(w as u32),
            off: (w >> 32) as u32 as i32,
            base: e.u64_at(j, 16)?,
        })
    }

    /// The entry of its 24 bytes (as [`BandEntry::write`] wrote them).
    pub fn of_bytes(b: &[u8]) -> Option<Self> {
        let w = get_u64(b, 8)?;
        Some(BandEntry {
            key: get_u64(b, 0)?,
            slope: f32::from_bits(w as u32),
            off: (w >> 32) as u32 as i32,
            base: get_u64(b, 16)?,
        })
    }

    /// Writes the 24 bytes.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&self.slope.to_bits().to_le_bytes());
        out.extend_from_slice(&self.off.to_le_bytes());
        out.extend_from_slice(&self.base.to_le_bytes());
    }

    /// The prediction for `x`, in units, given the next entry's base (or the
    /// number of units for the last entry). The builder measures errors with
    /// this very function, so the stored bounds hold for it exactly.
    #[inline]
    pub fn predict(&self, x: u64, next_base: u64, max_unit: u64) -> u64 {
        let lo = self.base.min(max_unit);
        let hi = next_base.min(max_unit).max(lo);
        // In sixteenths of a unit: the intercept keeps 4 fractional bits, and
        // the prediction is rounded to the nearest unit (not floored), so a
        // key within `eps` units of the real line is within `eps` of `p`.
        let t = self.slope as f64 * x.saturating_sub(self.key) as f64 * OFF_SCALE as f64;
        // Saturating float-to-int conversion floors a non-negative t.
        let step = if t > 0.0 { t as u64 } else { 0 };
        // The same arithmetic in i64 when nothing overflows (every position
        // below 2^58), as i128 division is a slow library call.
        let fast = i64::try_from(self.base)
            .ok()
            .and_then(|b| b.checked_mul(OFF_SCALE as i64))
            .and_then(|b| b.checked_add(i64::from(self.off)))
            .and_then(|b| b.checked_add(i64::try_from(step).ok()?))
            .and_then(|q| q.checked_add(OFF_SCALE as i64 / 2));
        if let Some(q) = fast {
            let raw = q.div_euclid(OFF_SCALE as i64);
            return u64::try_from(raw).unwrap_or(0).clamp(lo, hi);
        }
        let q = (self.base as i128 * OFF_SCALE + self.off as i128).saturating_add(step as i128);
        let raw = (q + OFF_SCALE / 2).div_euclid(OFF_SCALE);
        raw.clamp(lo as i128, hi as i128) as u64
    }

    /// [`predict`](Self::predict) of many keys with the same `next_base`
    /// and `max_unit` (a segment's keys, in a build's passes).
    pub fn predictor(&self, next_base: u64, max_unit: u64) -> Predictor {
        let lo = self.base.min(max_unit);
        Predictor {
            e: *self,
            next_base,
            max_unit,
            lo,
            hi: next_base.min(max_unit).max(lo),
            slope16: self.slope as f64 * OFF_SCALE as f64,
            base: i64::try_from(self.base)
                .ok()
                .and_then(|b| b.checked_mul(OFF_SCALE as i64))
                .and_then(|b| b.checked_add(i64::from(self.off)))
                .and_then(|b| b.checked_add(OFF_SCALE as i64 / 2)),
        }
    }
}

/// [`BandEntry::predict`] for one entry, its next base and units, with what
/// does not depend on the key worked out once; it predicts exactly as
/// `predict` does (tested on edge values), in fewer instructions per key:
///
/// - `slope · 16 · d` equals `slope · d · 16` bit for bit (scaling by a
///   power of two is exact in binary floating point, and `slope` is an
///   `f32`, far from `f64`'s overflow and subnormal ranges);
/// - `d` and the product convert through `i64` when they fit (one
///   instruction each on x86-64, against a branchy `u64` conversion), to
///   the same values;
/// - the base, offset and half unit are summed once; the sum with the step
///   is the same integer, and `div_euclid(16)` of an `i64` is `>> 4`.
///
/// Anything that does not fit goes to `predict` itself.
#[derive(Debug, Clone, Copy)]
pub struct Predictor {
    e: BandEntry,
    next_base: u64,
    max_unit: u64,
    lo: u64,
    hi: u64,
    slope16: f64,
    /// `base · 16 + off + 8`, when it fits an `i64`.
    base: Option<i64>,
}

impl Predictor {
    /// `e.predict(x, next_base, max_unit)`.
    #[inline(always)]
    pub fn predict(&self, x: u64) -> u64 {
        const TWO_63: f64 = 9_223_372_036_854_775_808.0;
        let (Some(base), Ok(d)) = (self.base, i64::try_from(x.saturating_sub(self.e.key))) else {
            return self.exact(x);
        };
        let t = self.slope16 * d as f64;
        let step = if t > 0.0 {
            if t < TWO_63 {
                t as i64
            } else {
                return self.exact(x);
            }
        } else {
            0
        };
        match base.checked_add(step) {
            Some(q) => u64::try_from(q >> 4).unwrap_or(0).clamp(self.lo, self.hi),
            None => self.exact(x),
        }
    }

    /// What does not fit the `i64` arithmetic.
    #[cold]
    #[inline(never)]
    fn exact(&self, x: u64) -> u64 {
        self.e.predict(x, self.next_base, self.max_unit)
    }

    /// This predictor in `f64` lanes ([`LanePredictor`]), if its base and
    /// bounds are small enough for them (below 2^50).
    pub fn lanes(&self) -> Option<LanePredictor> {
        let base = self.base?;
        let small = |v: u64| v < 1 << 50;
        (small(base.unsigned_abs()) && small(self.hi)).then_some(LanePredictor {
            key: self.e.key,
            slope16: self.slope16,
            base: base as f64,
            lo: self.lo as f64,
            hi: self.hi as f64,
        })
    }
}

/// `1.5 · 2^52`: `(x + ROUNDER) - ROUNDER` is `x` rounded to the nearest
/// integer, exactly, for `|x| < 2^51`.
const ROUNDER: f64 = 6_755_399_441_055_744.0;

/// `x.floor()` for `|x| < 2^51`, without a branch or a call (`floor` is a
/// library call on x86-64's baseline, and a vector lane has no branch): `x`
/// rounded to the nearest integer, less one if that lies above `x`.
#[inline(always)]
pub(super) fn floor_lane(x: f64) -> f64 {
    let t = round_lane(x);
    t - if t > x { 1.0 } else { 0.0 }
}

/// `x` rounded to the nearest integer (ties to even), for `|x| < 2^51`.
#[inline(always)]
pub(super) fn round_lane(x: f64) -> f64 {
    (x + ROUNDER) - ROUNDER
}

/// [`Predictor::predict`] in `f64` arithmetic without a branch or an
/// integer conversion, so that many keys are predicted in vector lanes (a
/// build's passes): the same prediction, as an integer-valued `f64`, for
/// every key whose offset `slope · 16 · d` lies below 2^51.
///
/// - `d = key - e.key` (saturating) converts to the same `f64` from `u64`
///   as from `i64`, and the product is the same;
/// - the step, `t` truncated for `t > 0` (else 0), is `floor(t)`, exact;
/// - `base · 16 + off + 8` (below 2^50 in magnitude, [`Predictor::lanes`])
///   plus the step is an integer below 2^52, exact, and `>> 4` is the
///   floor of a sixteenth of it (scaling by a power of two is exact);
/// - a negative result becomes 0 before the clamp to `[lo, hi]`, `lo >= 0`:
///   the same as the larger of it and `lo`.
#[derive(Debug, Clone, Copy)]
pub struct LanePredictor {
    key: u64,
    slope16: f64,
    base: f64,
    lo: f64,
    hi: f64,
}

impl LanePredictor {
    /// [`Predictor::predict`] of `x`, and whether it is that (else the
    /// value is meaningless and `predict` must be asked).
    #[inline(always)]
    pub fn predict(&self, x: u64) -> (f64, bool) {
        const TWO_51: f64 = 2_251_799_813_685_248.0;
        let d = x.saturating_sub(self.key) as f64;
        let t = self.slope16 * d;
        // NaN fails the comparison, as does a `d` beyond `i64`.
        let exact = t < TWO_51 && d < TWO_51 * 2048.0;
        let step = floor_lane(if t > 0.0 && exact { t } else { 0.0 });
        let p = floor_lane((self.base + step) * 0.0625);
        (p.max(self.lo).min(self.hi), exact)
    }
}

// `Predictor::predict` divides by the scale with a shift.
const _: () = assert!(OFF_SCALE == 16);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn wide_u64() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..1_000,
            any::<u64>(),
            (0u32..64).prop_map(|b| 1u64 << b),
            (1u64..1_000).prop_map(|d| u64::MAX - d),
            Just(i64::MAX as u64),
            Just(i64::MAX as u64 + 1),
            (0u64..1 << 58),
        ]
    }

    fn slope() -> impl Strategy<Value = f32> {
        prop_oneof![
            any::<u32>().prop_map(f32::from_bits),
            0.0f32..4.0,
            1e-12f32..1e-3,
            Just(f32::INFINITY),
            Just(f32::NEG_INFINITY),
            Just(f32::NAN),
            Just(f32::MIN_POSITIVE / 4.0),
            Just(f32::MAX),
            Just(-0.0f32),
        ]
    }

    /// Whether the lanes' prediction of `x` is `want`, where they predict.
    fn lane_agrees(p: &Predictor, x: u64, want: u64) -> bool {
        match p.lanes().map(|l| l.predict(x)) {
            Some((v, true)) => v == want as f64,
            _ => true,
        }
    }

    /// Products at and around 2^63 and 2^64 (where the signed conversion
    /// stops), sums at the edge of `i64`, clamps at both ends.
    #[test]
    fn predictor_edges() {
        let mut cases = 0;
        for slope in [1.0f32, 0.5, 2.0, 1.0 - f32::EPSILON, 1.0 + f32::EPSILON] {
            for shift in [58u32, 59, 60, 63] {
                for dd in [-2i64, -1, 0, 1, 2] {
                    let x = (1u64 << shift).saturating_add_signed(dd);
                    for (base, off) in [(0u64, -8i32), (0, 0), (0, i32::MIN), (1, -24), (1 << 58, 0)] {
                        for max_unit in [u64::MAX, 1 << 60, 1 << 59, 10] {
                            let e = BandEntry {
                                key: 0,
                                slope,
                                off,
                                base,
                            };
                            let p = e.predictor(u64::MAX, max_unit);
                            let want = e.predict(x, u64::MAX, max_unit);
                            assert_eq!(p.predict(x), want, "{e:?} x {x} max {max_unit}");
                            assert!(lane_agrees(&p, x, want), "lanes: {e:?} x {x} max {max_unit}");
                            cases += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(cases, 5 * 4 * 5 * 5 * 4);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The per-entry predictor predicts exactly as `predict`, on edge
        /// values of every field and key.
        #[test]
        fn predictor_predicts_as_predict(
            key in wide_u64(),
            slope in slope(),
            off in prop_oneof![any::<i32>(), -64i32..64],
            base in wide_u64(),
            next_base in wide_u64(),
            max_unit in wide_u64(),
            xs in proptest::collection::vec(prop_oneof![wide_u64(), any::<u64>()], 1..16),
            near in proptest::collection::vec(0u64..1 << 20, 0..16),
        ) {
            let e = BandEntry { key, slope, off, base };
            let p = e.predictor(next_base, max_unit);
            for x in xs.into_iter().chain(near.into_iter().map(|d| key.saturating_add(d))) {
                let want = e.predict(x, next_base, max_unit);
                prop_assert_eq!(p.predict(x), want, "x = {}", x);
                prop_assert!(lane_agrees(&p, x, want), "lanes, x = {}", x);
            }
        }

        /// The lanes predict as `predict` wherever they say they do, and
        /// they do for offsets below 2^51 (bases, units below 2^50),
        /// including offsets around 2^51 and predictions clamped at both
        /// ends.
        #[test]
        fn lanes_predict_as_predict(
            key in prop_oneof![0u64..1_000, 0u64..1 << 50, any::<u64>()],
            slope in slope(),
            off in prop_oneof![any::<i32>(), -64i32..64],
            base in prop_oneof![0u64..1_000, 0u64..1 << 46],
            next_base in prop_oneof![0u64..1_000, 0u64..1 << 46, any::<u64>()],
            max_unit in prop_oneof![0u64..1 << 46, Just((1 << 50) - 1), any::<u64>()],
            ds in proptest::collection::vec(prop_oneof![0u64..1 << 20, 0u64..1 << 50, any::<u64>()], 1..16),
        ) {
            let e = BandEntry { key, slope, off, base };
            let p = e.predictor(next_base, max_unit);
            let lanes = p.lanes();
            let sum = i128::from(base) * 16 + i128::from(off) + 8;
            let hi = next_base.min(max_unit).max(base.min(max_unit));
            prop_assert_eq!(lanes.is_some(), sum.unsigned_abs() < 1 << 50 && hi < 1 << 50);
            // Offsets at 2^51 and just below, where they stop being exact.
            let edge = if slope > 0.0 && slope.is_finite() {
                let d = (2_251_799_813_685_248.0 / (f64::from(slope) * 16.0)) as u64;
                vec![d.saturating_sub(1), d, d.saturating_add(1)]
            } else {
                vec![]
            };
            for d in ds.into_iter().chain(edge) {
                let x = key.saturating_add(d);
                let want = e.predict(x, next_base, max_unit);
                if let Some((v, exact)) = lanes.map(|l| l.predict(x)) {
                    let t = f64::from(slope) * 16.0 * x.saturating_sub(key) as f64;
                    prop_assert_eq!(exact, t < 2_251_799_813_685_248.0 && ((x - key) as f64) < 4_611_686_018_427_387_904.0);
                    if exact {
                        prop_assert_eq!(v, want as f64, "x = {}", x);
                    }
                }
            }
        }
    }
}
