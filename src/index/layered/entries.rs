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
}
