//! RadixSpline: a linear spline over the key-position CDF plus a radix table.
//!
//! Build (one pass, Kipf et al.): spline points are data points chosen by the
//! greedy spline corridor, so that linear interpolation between consecutive
//! spline points is within `eps` of the position of every key between them
//! (exact rational arithmetic). A radix table over the top `r` bits of
//! `x - min_key` narrows the binary search for a query's spline segment.
//!
//! Lookup returns a range with the contract of `index::ApproxPos`: for any
//! `u64` query `x`, present or not, the lower bound of `x` in the keys lies in
//! `[lo, hi)`, `hi <= n + 1`. The range is derived from the integer
//! prediction `p(x) = floor(spline(x))`, which is monotone in `x`, and the
//! error bounds of `p` over all keys measured at build time, so no
//! floating-point slack is needed; its width is at most `2 * eps + 2`.

use std::mem::size_of;

use super::KeyPasses;
use super::bitpack::bits_needed;
use super::codec::{self, Writer};
use super::exact::{Pt, Slope, floor_i64};
use crate::{Error, Result};

const KIND: &str = "radix spline";
/// Magic number of a RadixSpline encoding: the bytes `STRATARS`.
pub(crate) const RADIX_SPLINE_MAGIC: u64 = u64::from_le_bytes(*b"STRATARS");
/// Format version of RadixSpline encodings written by this build.
pub(crate) const RADIX_SPLINE_VERSION: u32 = 1;
/// Largest radix table: `2^MAX_RADIX_BITS + 1` entries of 4 bytes.
pub(crate) const MAX_RADIX_BITS: u32 = 28;

/// A RadixSpline over strictly increasing `u64` keys.
///
/// Immutable after build; `Send + Sync`. Memory: 16 bytes per spline point
/// plus `4 * (2^r + 1)` bytes of radix table, `r <= radix_bits` and
/// `2^r <= 16 * 2^ceil(log2(spline points))`.
#[derive(Debug, Clone, PartialEq)]
pub struct RadixSpline {
    n: u64,
    eps: u64,
    radix_bits: u32,
    /// Spline keys (strictly increasing; first and last are the min and max key).
    keys: Vec<u64>,
    /// Spline positions (strictly increasing; first 0, last n - 1).
    pos: Vec<u64>,
    /// `table[b]`: first spline point whose radix prefix is `>= b`.
    table: Vec<u32>,
    shift: u32,
    /// Bounds of `i - p(key_i)` over all keys.
    err_lo: i64,
    err_hi: i64,
}

/// The knots of a greedy spline corridor: keys (strictly increasing) and
/// their positions (strictly increasing; first 0, last `n - 1`); empty for
/// no keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SplinePoints {
    /// The knots' keys.
    pub keys: Vec<u64>,
    /// The knots' positions.
    pub pos: Vec<u64>,
}

/// Position `i` may be interpolated anywhere within `eps` of it.
fn within(eps: u64) -> impl Fn(usize) -> (i128, i128) {
    let e = eps as i128;
    move |i: usize| (i as i128 - e, i as i128 + e)
}

/// Position `i` may be interpolated anywhere on its page of `page_items`
/// positions, widened by `eps` (`pla::zero_interval`).
fn on_page(eps: u64, page_items: u64) -> impl Fn(usize) -> (i128, i128) {
    // The page of the last position asked for, stepped to the next one
    // without a division (positions come in order; any other divides).
    let page = page_items.max(1);
    let start = std::cell::Cell::new(0u64);
    move |i: usize| {
        let i = i as u64;
        let mut s = start.get();
        if i.wrapping_sub(s) >= page {
            s = if i.wrapping_sub(s).wrapping_sub(page) < page {
                s + page
            } else {
                i / page * page
            };
            start.set(s);
        }
        let (s, p, e) = (s as i128, page as i128, eps as i128);
        (s - e, s + p - 1 + e)
    }
}

/// The corridor over keys read in one pass, with the number of keys.
fn corridor_passes(
    keys: &dyn KeyPasses,
    interval: impl Fn(usize) -> (i128, i128),
) -> Result<(usize, SplinePoints)> {
    let mut c = Corridor::default();
    let n = keys.pass_all(&mut |i, chunk| {
        for (j, &k) in chunk.iter().enumerate() {
            c.push(i + j, k, &interval);
        }
    })?;
    Ok((n, c.finish().into()))
}

impl From<(Vec<u64>, Vec<u64>)> for SplinePoints {
    fn from((keys, pos): (Vec<u64>, Vec<u64>)) -> Self {
        SplinePoints { keys, pos }
    }
}

/// The radix bits a RadixSpline over spline keys `points` uses when asked
/// for `radix_bits` (what [`RadixSpline::radix_bits_used`] reports): at most
/// [`MAX_RADIX_BITS`], the bits of the keys' range and 16 slots per point.
pub(crate) fn radix_bits_for(points: &[u64], radix_bits: u32) -> u32 {
    let (Some(&min), Some(&max)) = (points.first(), points.last()) else {
        return 0;
    };
    // More than 16 slots per spline point buys nothing and would let a
    // tiny (or corrupt) model allocate a huge table.
    radix_bits
        .min(MAX_RADIX_BITS)
        .min(bits_needed(max - min))
        .min(bits_needed(points.len() as u64) + 4)
}

/// First index whose key is not greater than its predecessor, as an error.
pub(crate) fn check_strictly_increasing(keys: &[u64]) -> Result<()> {
    for (i, w) in keys.windows(2).enumerate() {
        if let [a, b] = *w
            && b <= a
        {
            return Err(Error::OutOfOrder {
                position: i as u64 + 1,
                previous: a,
                got: b,
            });
        }
    }
    Ok(())
}

impl RadixSpline {
    /// Builds a RadixSpline with error bound `eps` (positions) and a radix
    /// table of at most `radix_bits` bits (clamped to `MAX_RADIX_BITS`, to
    /// the bits of the key range, and to 16 slots per spline point).
    ///
    /// Keys must be strictly increasing ([`Error::OutOfOrder`] names the first
    /// offending position). O(n) time plus O(2^r) for the table.
    pub fn build(keys: &[u64], eps: u64, radix_bits: u32) -> Result<Self> {
        check_strictly_increasing(keys)?;
        Self::build_from(keys, eps, radix_bits, spline_corridor(keys, eps))
    }

    /// Like [`RadixSpline::build`], with Zhang's disk-based zero intervals:
    /// key `i` may be interpolated anywhere on its page of `page_items`
    /// positions, widened by `eps` (see `pla::zero_interval`). The spline
    /// needs fewer points; its plain error bounds are then up to a page wider
    /// (an on-disk index measures page-level bounds instead).
    pub fn build_zero_interval(keys: &[u64], eps: u64, radix_bits: u32, page_items: u64) -> Result<Self> {
        check_strictly_increasing(keys)?;
        let corridor = spline_corridor_with(keys, on_page(eps, page_items));
        Self::build_from(keys, eps, radix_bits, corridor)
    }

    /// [`RadixSpline::build`] over strictly increasing keys read in passes
    /// (from storage: not checked again): one pass lays the corridor, one
    /// measures the errors. The same model as over the keys in memory.
    pub fn build_passes(keys: &dyn KeyPasses, eps: u64, radix_bits: u32) -> Result<Self> {
        Self::passes_with(keys, eps, radix_bits, within(eps))
    }

    /// [`RadixSpline::build_zero_interval`] over strictly increasing keys
    /// read in passes (as [`RadixSpline::build_passes`]).
    pub fn build_zero_interval_passes(
        keys: &dyn KeyPasses,
        eps: u64,
        radix_bits: u32,
        page_items: u64,
    ) -> Result<Self> {
        Self::passes_with(keys, eps, radix_bits, on_page(eps, page_items))
    }

    /// The spline points of [`RadixSpline::build_passes`] alone, in one
    /// pass: keys and positions of the knots the greedy corridor lays
    /// (`eps` around each position). No radix table and no error pass: for
    /// a caller that measures its own bounds over the points (an on-disk
    /// band); `radix_bits_for` gives the table's bits.
    pub fn points_passes(keys: &dyn KeyPasses, eps: u64) -> Result<SplinePoints> {
        Ok(corridor_passes(keys, within(eps))?.1)
    }

    /// [`RadixSpline::points_passes`] with zero intervals of `page_items`
    /// positions (the knots of [`RadixSpline::build_zero_interval_passes`]).
    pub fn zero_interval_points_passes(
        keys: &dyn KeyPasses,
        eps: u64,
        page_items: u64,
    ) -> Result<SplinePoints> {
        Ok(corridor_passes(keys, on_page(eps, page_items))?.1)
    }

    /// [`RadixSpline::points_passes`] and
    /// [`RadixSpline::zero_interval_points_passes`] at the same `eps`, both
    /// in one pass (two corridors fed key by key).
    pub fn points_and_zero_interval_points_passes(
        keys: &dyn KeyPasses,
        eps: u64,
        page_items: u64,
    ) -> Result<(SplinePoints, SplinePoints)> {
        let (plain, zero) = (within(eps), on_page(eps, page_items));
        let (mut p, mut z) = (Corridor::default(), Corridor::default());
        keys.pass_all(&mut |i, chunk| {
            for (j, &k) in chunk.iter().enumerate() {
                p.push(i + j, k, &plain);
                z.push(i + j, k, &zero);
            }
        })?;
        Ok((p.finish().into(), z.finish().into()))
    }

    fn passes_with(
        keys: &dyn KeyPasses,
        eps: u64,
        radix_bits: u32,
        interval: impl Fn(usize) -> (i128, i128),
    ) -> Result<Self> {
        let (n, points) = corridor_passes(keys, interval)?;
        let mut rs = Self::model(n as u64, eps, radix_bits, (points.keys, points.pos))?;
        let mut m = ErrorMeter::default();
        keys.pass(0..n, &mut |i, chunk| {
            for (j, &k) in chunk.iter().enumerate() {
                m.push(&rs, i + j, k);
            }
        })?;
        (rs.err_lo, rs.err_hi) = (m.lo, m.hi);
        Ok(rs)
    }

    fn build_from(keys: &[u64], eps: u64, radix_bits: u32, corridor: (Vec<u64>, Vec<u64>)) -> Result<Self> {
        let mut rs = Self::model(keys.len() as u64, eps, radix_bits, corridor)?;
        rs.measure_errors(keys);
        Ok(rs)
    }

    /// The spline and its radix table, errors not yet measured.
    fn model(n: u64, eps: u64, radix_bits: u32, corridor: (Vec<u64>, Vec<u64>)) -> Result<Self> {
        let (spline_keys, spline_pos) = corridor;
        if spline_keys.len() >= u32::MAX as usize {
            return Err(Error::invalid("radix spline: more than 2^32 - 1 spline points"));
        }
        let mut rs = RadixSpline {
            n,
            eps,
            radix_bits,
            keys: spline_keys,
            pos: spline_pos,
            table: Vec::new(),
            shift: 0,
            err_lo: 0,
            err_hi: 0,
        };
        rs.build_table();
        Ok(rs)
    }

    fn build_table(&mut self) {
        let (Some(&min), Some(&max)) = (self.keys.first(), self.keys.last()) else {
            self.table = vec![0, 0];
            self.shift = 0;
            return;
        };
        let range_bits = bits_needed(max - min);
        let r = radix_bits_for(&self.keys, self.radix_bits);
        self.shift = range_bits - r;
        let slots = 1usize << r;
        let mut table = Vec::with_capacity(slots + 1);
        let mut idx = 0usize;
        for b in 0..=slots as u64 {
            while self
                .keys
                .get(idx)
                .is_some_and(|&k| (k - min).checked_shr(self.shift).unwrap_or(0) < b)
            {
                idx += 1;
            }
            table.push(idx as u32);
        }
        self.table = table;
    }

    fn measure_errors(&mut self, keys: &[u64]) {
        let mut m = ErrorMeter::default();
        for (i, &k) in keys.iter().enumerate() {
            m.push(self, i, k);
        }
        (self.err_lo, self.err_hi) = (m.lo, m.hi);
    }

    /// Spline value at `x` on segment `j` (spline points `j - 1` and `j`,
    /// `key[j-1] < x <= key[j]`). Monotone in `x` within and across segments:
    /// clamped to the segment's end value.
    #[inline]
    fn interpolate(&self, j: usize, x: u64) -> f64 {
        let (Some(&xb), Some(&yb)) = (self.keys.get(j), self.pos.get(j)) else {
            return 0.0;
        };
        if x >= xb {
            return yb as f64;
        }
        let Some(a) = j.checked_sub(1) else {
            return yb as f64;
        };
        let (Some(&xa), Some(&ya)) = (self.keys.get(a), self.pos.get(a)) else {
            return 0.0;
        };
        let dy = yb.saturating_sub(ya) as f64;
        let t = x.saturating_sub(xa) as f64 * dy / xb.saturating_sub(xa).max(1) as f64;
        (ya as f64 + t).min(yb as f64)
    }

    /// Index of the first spline point with key `>= x`, for `min < x <= max`.
    #[inline]
    fn find_segment(&self, x: u64) -> usize {
        let min = self.keys.first().copied().unwrap_or(0);
        let b = usize::try_from((x - min).checked_shr(self.shift).unwrap_or(0)).unwrap_or(usize::MAX);
        let lo = self.table.get(b).copied().unwrap_or(0) as usize;
        let ns = self.keys.len();
        let hi = (self.table.get(b.saturating_add(1)).copied().unwrap_or(0) as usize)
            .min(ns.saturating_sub(1))
            .max(lo);
        let j = match self.keys.get(lo..=hi) {
            Some(window) => lo + window.partition_point(|&k| k < x),
            None => self.keys.partition_point(|&k| k < x),
        };
        j.clamp(1, ns.saturating_sub(1).max(1))
    }

    /// The range `[lo, hi)` holding the lower bound of `x` (index of the first
    /// key `>= x`, or `n`), for any `x`: `lo < hi <= n + 1`, and
    /// `hi - lo <= err_hi - err_lo + 2 <= 2 * eps + 2`. Queries at or below
    /// the smallest key and above the largest are answered exactly.
    /// O(log(spline points per radix slot)).
    pub fn predict_range(&self, x: u64) -> (u64, u64) {
        let (_, lo, hi) = self.approx(x);
        (lo, hi)
    }

    /// The point prediction `pos` for `x` together with the range of
    /// [`RadixSpline::predict_range`]: `(pos, lo, hi)` with
    /// `lo <= pos < hi` (the fields of `index::ApproxPos`). O(log(spline
    /// points per radix slot)).
    pub fn approx(&self, x: u64) -> (u64, u64, u64) {
        let n = self.n;
        let (Some(&min), Some(&max)) = (self.keys.first(), self.keys.last()) else {
            return (0, 0, 1);
        };
        if x <= min {
            return (0, 0, 1);
        }
        if x > max {
            return (n, n, n + 1);
        }
        let j = self.find_segment(x);
        let p = floor_i64(self.interpolate(j, x)) as i128;
        let lo = (p + self.err_lo as i128).max(1);
        let hi = (p + self.err_hi as i128 + 2).min(n as i128);
        if lo < hi {
            (p.clamp(lo, hi - 1) as u64, lo as u64, hi as u64)
        } else {
            (0, 0, n + 1)
        }
    }

    /// The point prediction for `x`, inside [`RadixSpline::predict_range`].
    pub fn predict(&self, x: u64) -> u64 {
        self.approx(x).0
    }

    /// Number of keys.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether built over no key.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The error bound the spline was built with.
    pub fn eps(&self) -> u64 {
        self.eps
    }

    /// Number of spline points.
    pub fn num_spline_points(&self) -> usize {
        self.keys.len()
    }

    /// The spline points `(key, position)`.
    pub fn spline_points(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.keys.iter().copied().zip(self.pos.iter().copied())
    }

    /// The spline points' keys (strictly increasing).
    pub fn spline_keys(&self) -> &[u64] {
        &self.keys
    }

    /// The spline points' positions (strictly increasing), one per key of
    /// [`RadixSpline::spline_keys`].
    pub fn spline_positions(&self) -> &[u64] {
        &self.pos
    }

    /// Number of radix bits actually used.
    pub fn radix_bits_used(&self) -> u32 {
        self.table.len().saturating_sub(1).trailing_zeros()
    }

    /// Bounds of `i - floor(spline(key_i))` over the keys (`lo <= 0 <= hi`).
    pub fn error_bounds(&self) -> (i64, i64) {
        (self.err_lo, self.err_hi)
    }

    /// Bytes of memory held, measured from the allocations.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Self>()
            + self.keys.capacity() * size_of::<u64>()
            + self.pos.capacity() * size_of::<u64>()
            + self.table.capacity() * size_of::<u32>()
    }

    /// Encodes the spline (the radix table is rebuilt on decode).
    ///
    /// Layout, little-endian: magic `STRATARS` (u64), version (u32), n (u64),
    /// eps (u64), radix_bits (u32), err_lo (i64), err_hi (i64), m (u64),
    /// m spline keys (u64), m spline positions (u64), crc32c of all
    /// preceding bytes (u32).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(RADIX_SPLINE_MAGIC, RADIX_SPLINE_VERSION);
        w.reserve(56 + 16 * self.keys.len());
        w.u64(self.n);
        w.u64(self.eps);
        w.u32(self.radix_bits);
        w.i64(self.err_lo);
        w.i64(self.err_hi);
        w.u64(self.keys.len() as u64);
        for &k in &self.keys {
            w.u64(k);
        }
        for &p in &self.pos {
            w.u64(p);
        }
        w.finish()
    }

    /// Decodes [`RadixSpline::to_bytes`] output, validating every structural
    /// invariant. Corrupt or truncated input is an error
    /// ([`Error::is_corruption`]), never a panic. O(m + 2^r).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut c = codec::open(bytes, KIND, RADIX_SPLINE_MAGIC, RADIX_SPLINE_VERSION)?;
        let n = codec::need(c.u64(), KIND, "n")?;
        let eps = codec::need(c.u64(), KIND, "eps")?;
        let radix_bits = codec::need(c.u32(), KIND, "radix_bits")?;
        let err_lo = codec::need(c.u64(), KIND, "err_lo")? as i64;
        let err_hi = codec::need(c.u64(), KIND, "err_hi")? as i64;
        let m = codec::count(&mut c, KIND, "spline points", 16)?;
        let mut keys = Vec::with_capacity(m);
        let mut pos = Vec::with_capacity(m);
        for _ in 0..m {
            keys.push(codec::need(c.u64(), KIND, "spline key")?);
        }
        for _ in 0..m {
            pos.push(codec::need(c.u64(), KIND, "spline position")?);
        }
        codec::expect_end(&c, KIND)?;
        let bad = |d: &str| Err(codec::corrupt(KIND, d.to_string()));
        // Ranges end at `n + 1`: a count of `u64::MAX` would overflow them.
        if (n == 0) != (m == 0) || m as u64 > n || m >= u32::MAX as usize || n == u64::MAX {
            return bad("spline point count inconsistent with n");
        }
        if m > 0 {
            if pos.first() != Some(&0) || pos.last() != Some(&(n - 1)) {
                return bad("spline does not span positions 0..n-1");
            }
            if n > 1 && m < 2 {
                return bad("fewer than two spline points");
            }
        }
        let not_increasing = |v: &[u64]| v.windows(2).any(|w| matches!(w, [a, b] if a >= b));
        if not_increasing(&keys) || not_increasing(&pos) {
            return bad("spline points not strictly increasing");
        }
        let limit = n.min(i64::MAX as u64 / 4) as i64 + 1;
        if err_lo > 0 || err_hi < 0 || err_lo < -limit || err_hi > limit {
            return bad("error bounds out of range");
        }
        let mut rs = RadixSpline {
            n,
            eps,
            radix_bits,
            keys,
            pos,
            table: Vec::new(),
            shift: 0,
            err_lo,
            err_hi,
        };
        rs.build_table();
        Ok(rs)
    }
}

/// The greedy spline corridor: spline points `(key, position)` such that
/// interpolating between consecutive points is within `eps` of every key's
/// position. Always includes the first and last key. Exact arithmetic.
fn spline_corridor(keys: &[u64], eps: u64) -> (Vec<u64>, Vec<u64>) {
    spline_corridor_with(keys, within(eps))
}

/// The greedy spline corridor where point `i` may be interpolated anywhere
/// in `interval(i)` (which must contain `i`): knots are data points at their
/// positions; a new knot starts when the corridor of slopes from the last
/// knot closes.
fn spline_corridor_with(keys: &[u64], interval: impl Fn(usize) -> (i128, i128)) -> (Vec<u64>, Vec<u64>) {
    let mut c = Corridor::default();
    for (i, &k) in keys.iter().enumerate() {
        c.push(i, k, &interval);
    }
    c.finish()
}

/// The error bounds of a spline, measured key by key in order (every key
/// after the first, on the segment that holds it).
#[derive(Debug)]
struct ErrorMeter {
    lo: i64,
    hi: i64,
    j: usize,
}

impl Default for ErrorMeter {
    fn default() -> Self {
        ErrorMeter { lo: 0, hi: 0, j: 1 }
    }
}

impl ErrorMeter {
    #[inline]
    fn push(&mut self, rs: &RadixSpline, i: usize, k: u64) {
        if i == 0 {
            return;
        }
        while rs.keys.get(self.j).is_some_and(|&s| s < k) {
            self.j += 1;
        }
        let e = i as i64 - floor_i64(rs.interpolate(self.j, k));
        self.lo = self.lo.min(e);
        self.hi = self.hi.max(e);
    }
}

/// The greedy spline corridor fed one key at a time, in order (keys `0..n`
/// at their positions): the same knots whether the keys come from memory or
/// storage.
#[derive(Debug, Default)]
struct Corridor {
    sk: Vec<u64>,
    sp: Vec<u64>,
    base: Pt,
    base_idx: usize,
    /// Corridor of slopes `[lower, upper]` from the base point.
    lower: Option<(Slope, Slope)>,
    /// The previous key (the next knot if the corridor closes).
    prev: Option<(usize, u64)>,
}

impl Corridor {
    #[inline(always)]
    fn push(&mut self, i: usize, k: u64, interval: &impl Fn(usize) -> (i128, i128)) {
        if self.prev.is_none() {
            // The first key is the first knot.
            self.sk.push(k);
            self.sp.push(i as u64);
            self.base = Pt::new(k, i as i128);
            self.base_idx = i;
            self.prev = Some((i, k));
            return;
        }
        let p = Pt::new(k, i as i128);
        let s = Slope::between(self.base, p);
        let (lo_i, hi_i) = interval(i);
        // From the slope through point `i`, the slopes through the ends of
        // its interval (same denominator: same x).
        let widen = |s: Slope| {
            (
                Slope {
                    num: s.num - (i as i128 - lo_i),
                    den: s.den,
                },
                Slope {
                    num: s.num + (hi_i - i as i128),
                    den: s.den,
                },
            )
        };
        match self.lower {
            _ if i == self.base_idx + 1 => self.lower = Some(widen(s)),
            Some((lower, upper)) => {
                let (l, u) = widen(s);
                match narrowed(lower, upper, s, l, u) {
                    Some(c) => self.lower = Some(c),
                    None => {
                        // The previous point becomes a spline point and the
                        // new base.
                        self.knot_at_prev(i, k);
                        self.lower = Some(widen(Slope::between(self.base, p)));
                    }
                }
            }
            None => self.lower = Some(widen(s)),
        }
        self.prev = Some((i, k));
    }

    /// The previous key (before key `i`, `k`) as a knot and the new base
    /// (off the hot path: one key in hundreds).
    #[cold]
    #[inline(never)]
    fn knot_at_prev(&mut self, i: usize, k: u64) {
        let (prev, pk) = self.prev.unwrap_or((i - 1, k));
        self.sk.push(pk);
        self.sp.push(prev as u64);
        self.base = Pt::new(pk, prev as i128);
        self.base_idx = prev;
    }

    /// The knots: keys and positions (the last key is always one).
    fn finish(mut self) -> (Vec<u64>, Vec<u64>) {
        if let Some((last, k)) = self.prev {
            if self.base_idx != last {
                self.sk.push(k);
                self.sp.push(last as u64);
            }
        }
        (self.sk, self.sp)
    }
}

/// The corridor of slopes `[lower, upper]` narrowed by a point whose slope
/// from the base is `s` and whose interval's ends give the slopes `l <= s <=
/// u` (over the same denominator as `s`): `[max(lower, l), min(upper, u)]`,
/// or `None` if `s` lies outside the corridor. Exact, as
/// [`Slope::cmp_exact`]; when every numerator fits an `i64`, the products of
/// the corridor's numerators with `s`'s denominator serve two comparisons
/// each (six products, not eight).
#[inline(always)]
fn narrowed(lower: Slope, upper: Slope, s: Slope, l: Slope, u: Slope) -> Option<(Slope, Slope)> {
    use std::cmp::Ordering::{Greater, Less};
    let fit = |x: i128| i64::try_from(x).ok();
    if let (Some(ln), Some(un), Some(sn), Some(lo), Some(hi)) =
        (fit(lower.num), fit(upper.num), fit(s.num), fit(l.num), fit(u.num))
    {
        // |a * b| < 2^63 * 2^64: exact in an i128.
        let w = |a: i64, b: u64| a as i128 * b as i128;
        let (xl, xu) = (w(ln, s.den), w(un, s.den));
        if w(sn, upper.den) > xu || w(sn, lower.den) < xl {
            return None;
        }
        let lower = if w(lo, lower.den) > xl { l } else { lower };
        let upper = if w(hi, upper.den) < xu { u } else { upper };
        return Some((lower, upper));
    }
    if s.cmp_exact(upper) == Greater || s.cmp_exact(lower) == Less {
        return None;
    }
    Some((
        if l.cmp_exact(lower) == Greater { l } else { lower },
        if u.cmp_exact(upper) == Less { u } else { upper },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    fn lower_bound(keys: &[u64], x: u64) -> u64 {
        keys.partition_point(|&k| k < x) as u64
    }

    /// Checks the contract at every key, between keys, and at the extremes.
    fn check_contract(keys: &[u64], rs: &RadixSpline) {
        let n = keys.len() as u64;
        let mut queries = vec![0u64, 1, u64::MAX, u64::MAX - 1];
        for &k in keys {
            queries.extend([k, k.wrapping_sub(1), k.wrapping_add(1)]);
        }
        for w in keys.windows(2) {
            queries.push(w[0] + (w[1] - w[0]) / 2);
        }
        for x in queries {
            let (lo, hi) = rs.predict_range(x);
            let lb = lower_bound(keys, x);
            assert!(lo < hi && hi <= n + 1, "bad range [{lo},{hi}) n={n}");
            assert!(lo <= lb && lb < hi, "x={x}: lb {lb} not in [{lo},{hi})");
            assert!(hi - lo <= 2 * rs.eps() + 2, "range too wide: {}", hi - lo);
            let p = rs.predict(x);
            assert!(p >= lo && p < hi);
            assert_eq!(rs.approx(x), (p, lo, hi));
        }
    }

    /// The spline's exact guarantee: interpolation within eps at every key.
    fn check_spline_eps(keys: &[u64], rs: &RadixSpline) {
        let pts: Vec<(u64, u64)> = rs.spline_points().collect();
        assert_eq!(pts.first().map(|p| p.1), Some(0));
        assert_eq!(pts.last().map(|p| p.1), Some(keys.len() as u64 - 1));
        for w in pts.windows(2) {
            let ((xa, ya), (xb, yb)) = (w[0], w[1]);
            for i in ya..=yb {
                let x = keys[i as usize];
                // |ya + (x-xa)(yb-ya)/(xb-xa) - i| <= eps, exactly.
                let lhs = ya as i128 * (xb - xa) as i128 + (x - xa) as i128 * (yb - ya) as i128
                    - i as i128 * (xb - xa) as i128;
                assert!(lhs.abs() <= rs.eps() as i128 * (xb - xa) as i128);
            }
        }
    }

    #[test]
    fn empty_single_and_tiny() {
        let rs = RadixSpline::build(&[], 4, 8).unwrap();
        assert_eq!(rs.predict_range(5), (0, 1));
        let rs = RadixSpline::build(&[7], 0, 8).unwrap();
        check_contract(&[7], &rs);
        let rs = RadixSpline::build(&[0, u64::MAX], 0, 18).unwrap();
        check_contract(&[0, u64::MAX], &rs);
    }

    #[test]
    fn regression_full_range_shift_64() {
        // Found by prop_clustered: zero radix bits over a 64-bit key range
        // made the prefix shift 64 (overflow).
        let keys = [0u64, 5, 1 << 40, u64::MAX - 3, u64::MAX];
        for r in [0u32, 1, 3] {
            let rs = RadixSpline::build(&keys, 0, r).unwrap();
            check_contract(&keys, &rs);
        }
    }

    #[test]
    fn rejects_unsorted_and_duplicates() {
        match RadixSpline::build(&[1, 5, 5], 2, 4) {
            Err(Error::OutOfOrder {
                position: 2,
                previous: 5,
                got: 5,
            }) => {}
            other => panic!("{other:?}"),
        }
        assert!(RadixSpline::build(&[3, 2], 2, 4).is_err());
    }

    #[test]
    fn linear_keys_two_points() {
        let keys: Vec<u64> = (0..10_000).map(|i| 5 + 3 * i).collect();
        let rs = RadixSpline::build(&keys, 0, 10).unwrap();
        assert_eq!(rs.num_spline_points(), 2);
        check_contract(&keys, &rs);
    }

    #[test]
    fn random_and_adversarial() {
        let mut rng = Pcg64::seed_from_u64(17);
        for case in 0..60 {
            let n = rng.random_range(1..3000usize);
            let mut keys: Vec<u64> = match case % 4 {
                0 => (0..n).map(|_| rng.random()).collect(),
                1 => (0..n).map(|_| rng.random_range(0..100_000)).collect(),
                2 => (0..n).map(|_| u64::MAX - rng.random_range(0..10_000)).collect(),
                _ => (0..n)
                    .map(|i| {
                        if i % 2 == 0 {
                            rng.random_range(0..1000)
                        } else {
                            rng.random_range(u64::MAX - 1000..=u64::MAX)
                        }
                    })
                    .collect(),
            };
            keys.sort_unstable();
            keys.dedup();
            for (eps, r) in [(0u64, 0u32), (1, 4), (8, 12), (64, 20), (3, 64)] {
                let rs = RadixSpline::build(&keys, eps, r).unwrap();
                check_contract(&keys, &rs);
                check_spline_eps(&keys, &rs);
                let back = RadixSpline::from_bytes(&rs.to_bytes()).unwrap();
                assert_eq!(back, rs);
            }
        }
    }

    #[test]
    fn uniform_many_keys() {
        let mut rng = Pcg64::seed_from_u64(2);
        let mut keys: Vec<u64> = (0..200_000).map(|_| rng.random()).collect();
        keys.sort_unstable();
        keys.dedup();
        let rs = RadixSpline::build(&keys, 32, 18).unwrap();
        assert!(rs.num_spline_points() < keys.len() / 8);
        assert_eq!(
            rs.radix_bits_used(),
            18.min(bits_needed(rs.num_spline_points() as u64) + 4)
        );
        let small = RadixSpline::build(&keys[..100], 32, 28).unwrap();
        assert!(small.radix_bits_used() <= 7 + 4);
        for i in (0..keys.len()).step_by(97) {
            for x in [keys[i], keys[i] - 1, keys[i] + 1] {
                let (lo, hi) = rs.predict_range(x);
                let lb = lower_bound(&keys, x);
                assert!(lo <= lb && lb < hi);
            }
        }
        assert!(rs.memory_bytes() >= 16 * rs.num_spline_points() + 4 * (1 << rs.radix_bits_used()));
    }

    #[test]
    fn corrupt_bytes_are_errors() {
        let keys: Vec<u64> = (0..500u64).map(|i| i * i).collect();
        let rs = RadixSpline::build(&keys, 4, 8).unwrap();
        let b = rs.to_bytes();
        for cut in [0, 1, 11, 12, 20, b.len() / 2, b.len() - 1] {
            assert!(RadixSpline::from_bytes(&b[..cut]).is_err());
        }
        for i in 0..b.len() {
            let mut g = b.clone();
            g[i] ^= 0x41;
            let e = RadixSpline::from_bytes(&g).unwrap_err();
            assert!(
                e.is_corruption() || matches!(e, Error::UnsupportedVersion { .. }),
                "{e}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn prop_contract(mut keys in prop::collection::vec(any::<u64>(), 1..400), eps in 0u64..20, r in 0u32..24) {
            keys.sort_unstable();
            keys.dedup();
            let rs = RadixSpline::build(&keys, eps, r).unwrap();
            check_contract(&keys, &rs);
            check_spline_eps(&keys, &rs);
        }

        #[test]
        fn prop_clustered(runs in prop::collection::vec((any::<u64>(), 1usize..80, 1u64..5), 1..6), eps in 0u64..6, r in 0u32..16, qs in prop::collection::vec(any::<u64>(), 0..50)) {
            let mut keys = Vec::new();
            for (b, len, step) in runs {
                for j in 0..len as u64 {
                    keys.push(b.saturating_add(j * step));
                }
            }
            keys.sort_unstable();
            keys.dedup();
            let rs = RadixSpline::build(&keys, eps, r).unwrap();
            check_contract(&keys, &rs);
            for x in qs {
                let (lo, hi) = rs.predict_range(x);
                let lb = lower_bound(&keys, x);
                prop_assert!(lo <= lb && lb < hi);
            }
        }

        #[test]
        fn prop_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = RadixSpline::from_bytes(&bytes);
            // A valid frame around garbage must be rejected or usable.
            let mut w = Writer::new(RADIX_SPLINE_MAGIC, RADIX_SPLINE_VERSION);
            for &b in &bytes {
                w.u8(b);
            }
            if let Ok(rs) = RadixSpline::from_bytes(&w.finish()) {
                for x in [0u64, 1, 1 << 40, u64::MAX] {
                    let (lo, hi) = rs.predict_range(x);
                    prop_assert!(lo < hi && hi <= rs.len() + 1);
                }
            }
        }
    }

    /// A valid encoding (checksum recomputed) whose key count is
    /// `u64::MAX`: ranges end at `n + 1`, so it is refused, not a panic in
    /// `approx` (or a wrapped range in release).
    #[test]
    fn a_huge_key_count_is_corruption() {
        let mut w = Writer::new(RADIX_SPLINE_MAGIC, RADIX_SPLINE_VERSION);
        w.u64(u64::MAX); // n
        w.u64(4); // eps
        w.u32(8); // radix bits
        w.i64(0);
        w.i64(0);
        w.u64(2); // spline points
        w.u64(1);
        w.u64(10);
        w.u64(0);
        w.u64(u64::MAX - 1);
        let e = RadixSpline::from_bytes(&w.finish()).unwrap_err();
        assert!(
            e.is_corruption() && e.to_string().contains("inconsistent with n"),
            "{e}"
        );
    }

    #[test]
    fn zero_interval_spline_needs_fewer_points_and_stays_in_pages() {
        let mut k = 0u64;
        let keys: Vec<u64> = (0..50_000u64)
            .map(|i| {
                k += 1 + (i * 7919) % 97 + if i % 1000 == 0 { 10_000 } else { 0 };
                k
            })
            .collect();
        for eps in [1u64, 16, 64] {
            let plain = RadixSpline::build(&keys, eps, 12).unwrap();
            let zero = RadixSpline::build_zero_interval(&keys, eps, 12, 255).unwrap();
            assert!(zero.num_spline_points() <= plain.num_spline_points(), "eps {eps}");
            let pts: Vec<(u64, u64)> = zero.spline_points().collect();
            let mut j = 0usize;
            for (i, &x) in keys.iter().enumerate() {
                while j + 1 < pts.len() && pts[j + 1].0 <= x {
                    j += 1;
                }
                let (k0, p0) = pts[j];
                let y = if j + 1 < pts.len() {
                    let (k1, p1) = pts[j + 1];
                    p0 as f64 + (p1 - p0) as f64 * (x - k0) as f64 / (k1 - k0) as f64
                } else {
                    p0 as f64
                };
                let page = (i as u64 / 255) * 255;
                assert!(y >= page as f64 - eps as f64 - 1e-6, "key {i}: {y}");
                assert!(y <= (page + 254 + eps) as f64 + 1e-6, "key {i}: {y}");
            }
        }
        assert!(RadixSpline::build_zero_interval(&[3, 2], 4, 8, 255).is_err());
    }

    proptest! {
        #[test]
        fn prop_build_passes_is_the_same_spline(
            mut keys in prop::collection::vec(any::<u64>(), 0..1500),
            shift in 0u32..64,
            eps in 0u64..40,
            bits in 0u32..20,
        ) {
            for k in &mut keys {
                *k >>= shift;
            }
            keys.sort_unstable();
            keys.dedup();
            let want = RadixSpline::build(&keys, eps, bits).unwrap();
            let got = RadixSpline::build_passes(&crate::model::Chunked(&keys), eps, bits).unwrap();
            prop_assert_eq!(want.to_bytes(), got.to_bytes());
            prop_assert_eq!(want.error_bounds(), got.error_bounds());
            // The points alone (what the layered designs take): the model's
            // knots, and the radix bits its table uses.
            let points_of = |rs: &RadixSpline| SplinePoints {
                keys: rs.spline_keys().to_vec(),
                pos: rs.spline_positions().to_vec(),
            };
            let chunked = crate::model::Chunked(&keys);
            let plain = RadixSpline::points_passes(&chunked, eps).unwrap();
            prop_assert_eq!(&plain, &points_of(&want));
            prop_assert_eq!(radix_bits_for(&plain.keys, bits), want.radix_bits_used());
            for page in [1u64, 7, 255] {
                let want = RadixSpline::build_zero_interval(&keys, eps, bits, page).unwrap();
                let got = RadixSpline::build_zero_interval_passes(&chunked, eps, bits, page).unwrap();
                prop_assert_eq!(want.to_bytes(), got.to_bytes());
                prop_assert_eq!(want.error_bounds(), got.error_bounds());
                let zero = RadixSpline::zero_interval_points_passes(&chunked, eps, page).unwrap();
                prop_assert_eq!(&zero, &points_of(&want));
                let both = RadixSpline::points_and_zero_interval_points_passes(&chunked, eps, page).unwrap();
                prop_assert_eq!(&both.0, &plain);
                prop_assert_eq!(&both.1, &zero);
            }
        }
    }

    proptest! {
        /// The stepped page of `on_page` is `zero_interval`'s, positions in
        /// order or not.
        #[test]
        fn prop_on_page_steps_as_it_divides(
            eps in 0u64..100,
            page in 0u64..300,
            start in prop_oneof![0usize..1000, Just(usize::MAX - 2000)],
            jumps in prop::collection::vec(prop_oneof![0usize..3, 0usize..700, Just(usize::MAX)], 1..200),
        ) {
            let f = on_page(eps, page);
            let mut i = start;
            for j in jumps {
                i = if j == usize::MAX { i / 2 } else { i.saturating_add(j) };
                prop_assert_eq!(f(i), super::super::pla::zero_interval(i as u64, eps, page), "at {}", i);
            }
        }
    }

    /// [`narrowed`] by comparisons one at a time (`Slope::cmp_exact`).
    fn narrowed_reference(
        lower: Slope,
        upper: Slope,
        s: Slope,
        l: Slope,
        u: Slope,
    ) -> Option<(Slope, Slope)> {
        use std::cmp::Ordering::{Greater, Less};
        if s.cmp_exact(upper) == Greater || s.cmp_exact(lower) == Less {
            return None;
        }
        let lower = if l.cmp_exact(lower) == Greater { l } else { lower };
        let upper = if u.cmp_exact(upper) == Less { u } else { upper };
        Some((lower, upper))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]
        /// The shared products decide as the comparisons one at a time:
        /// numerators small, near and past the `i64` range, denominators up
        /// to `u64::MAX`, slopes equal to the corridor's ends.
        #[test]
        fn prop_narrowed_is_exact(
            nums in prop::array::uniform5(prop_oneof![
                -300i128..300,
                any::<i64>().prop_map(i128::from),
                (-3i128..3).prop_map(|d| i128::from(i64::MAX) + d),
                (-3i128..3).prop_map(|d| i128::from(i64::MIN) + d),
                (-(1i128 << 100))..(1i128 << 100),
            ]),
            dens in prop::array::uniform3(prop_oneof![1u64..50, any::<u64>().prop_map(|d| d.max(1)), Just(u64::MAX)]),
            equal in 0u8..4,
        ) {
            let [ln, un, sn, lo, hi] = nums;
            let lower = Slope { num: ln, den: dens[0] };
            let upper = Slope { num: un, den: dens[1] };
            let d = dens[2];
            // `s` equal to an end of the corridor (same value, other terms).
            let sn = match equal {
                1 => ln,
                2 => un,
                _ => sn,
            };
            let (s, d) = if equal == 3 { (upper, upper.den) } else { (Slope { num: sn, den: d }, d) };
            let (l, u) = (Slope { num: s.num.min(lo).min(hi), den: d }, Slope { num: s.num.max(lo).max(hi), den: d });
            prop_assert_eq!(narrowed(lower, upper, s, l, u), narrowed_reference(lower, upper, s, l, u));
        }
    }

    /// Speed of the spline corridors of `rs-disk`'s first pass (plain and
    /// zero-interval, eps 64, pages of 255 keys, fed key by key). Keys from
    /// the SOSD file `STRATA_PLA_KEYS` (release build:
    /// `STRATA_PLA_KEYS=osm10m.keys cargo test --release --lib corridor_throughput -- --ignored --nocapture`).
    #[test]
    #[ignore = "timing; needs STRATA_PLA_KEYS"]
    fn corridor_throughput() {
        let Ok(path) = std::env::var("STRATA_PLA_KEYS") else {
            return;
        };
        let keys = crate::format::sosd::read_keys(std::path::Path::new(&path), Default::default()).unwrap();
        let n = keys.len() as f64;
        let mut best = f64::MAX;
        let mut points = (0, 0);
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let (p, z) =
                RadixSpline::points_and_zero_interval_points_passes(&keys.as_slice(), 64, 255).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            points = (p.keys.len(), z.keys.len());
        }
        println!(
            "two corridors: {:.1} ns/key, {} and {} points",
            best * 1e9 / n,
            points.0,
            points.1
        );
    }
}
