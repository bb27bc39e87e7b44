//! LeCo: learned compression of `u64` sequences with O(1) random access
//! (Liu et al.; used by Zhang et al. §7 for model keys and intercepts, and
//! §8.2.1 for the LeCo zone map).
//!
//! The sequence is cut into partitions of a fixed length `L` (a power of two,
//! chosen among 32..=4096 to minimise the total size). Each partition stores a
//! linear model — a slope `θ1` and a base `θ0` — and, for its `j`-th value, a
//! residual `δ_j` of `b` bits (`b` per partition):
//!
//! ```text
//! value_j = θ0 + trunc(θ1 * j) + δ_j        (mod 2^64, 0 <= δ_j < 2^b)
//! ```
//!
//! The slope is the minimax (Chebyshev) fit of the partition, found exactly
//! from its upper and lower convex hulls, so `b` is the bit width of the
//! smallest possible residual range; `θ0` absorbs the intercept and the
//! smallest residual, so every `δ_j >= 0`. Arithmetic is wrapping in `u64`,
//! which makes the encoding lossless for any `u64` sequence.
//!
//! The lossy `-D` variant ([`LecoArray::encode_bounded`], Zhang §8.2.1)
//! stores for each `i` some value in `[lo_i, hi_i]`: the partition's line is
//! fitted to the intervals and its prediction clamped into each interval, so
//! a residual is 0 wherever the line passes through the interval.

use std::cmp::Ordering;
use std::mem::size_of;

use super::bitpack::{BitWriter, bits_needed, read_bits};
use super::codec::{self, Writer};
use super::exact::{Pt, Slope, orient};
use super::pla::PlaStream;
use crate::{Error, Result};

const KIND: &str = "leco";
/// Magic number of a LeCo encoding: the bytes `STRATALC`.
pub(super) const LECO_MAGIC: u64 = u64::from_le_bytes(*b"STRATALC");
/// Format version of LeCo encodings written by this build.
pub(super) const LECO_VERSION: u32 = 1;
/// Partition lengths tried by the encoders: `2^MIN_LOG2_PART..=2^MAX_LOG2_PART`.
pub(super) const MIN_LOG2_PART: u32 = 5;
/// See [`MIN_LOG2_PART`].
pub(super) const MAX_LOG2_PART: u32 = 12;
/// Largest partition length accepted by the explicit-length encoders and the
/// decoder (`2^24`).
pub(super) const LIMIT_LOG2_PART: u32 = 24;
/// Bytes of one partition header: base, slope, and offset/width.
const PART_BYTES: u64 = size_of::<Part>() as u64;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Part {
    /// `θ0` plus the smallest residual (mod 2^64).
    base: u64,
    /// `θ1`.
    slope: f64,
    /// Bit offset of the residuals `<< 8 | width`.
    meta: u64,
}

impl Part {
    #[inline]
    fn width(&self) -> u32 {
        (self.meta & 0xff) as u32
    }
    #[inline]
    fn offset(&self) -> u64 {
        self.meta >> 8
    }
}

/// The model's prediction offset for the `j`-th value of a partition. Encoder
/// and decoder share this exact expression (IEEE multiply, saturating cast).
#[inline]
fn pred(slope: f64, j: usize) -> i64 {
    (slope * j as f64) as i64
}

/// A LeCo-compressed sequence of `u64` values.
///
/// Immutable; `Send + Sync`. `get` is O(1); `lower_bound`/`upper_bound` are
/// O(log n) gets.
#[derive(Debug, Clone, PartialEq)]
pub struct LecoArray {
    len: u64,
    log2_part: u32,
    parts: Vec<Part>,
    /// Bit-packed residuals, plus one zero padding word.
    words: Vec<u64>,
}

/// One partition's chosen encoding.
#[derive(Debug, Clone, Copy)]
struct Fit {
    slope: f64,
    /// Integer intercept `c`: the stored value is `c + pred + r_j`.
    c: i128,
    /// Smallest residual `r_j`.
    min_r: i128,
    width: u32,
}

/// Scratch space shared by the partition fits.
#[derive(Debug, Default)]
struct Fitter {
    up: Vec<Pt>,
    dn: Vec<Pt>,
    pla: PlaStream,
}

impl Fitter {
    /// The slope minimising `max_j (y_j - s*j) - min_j (y_j - s*j)`, exactly
    /// (as the nearest `f64` of the optimal rational slope). O(len).
    fn minimax_slope(&mut self, len: usize, y: impl Fn(usize) -> i128) -> f64 {
        if len < 2 {
            return 0.0;
        }
        let (up, dn) = (&mut self.up, &mut self.dn);
        up.clear();
        dn.clear();
        for j in 0..len {
            let p = Pt::new(j as u64, y(j));
            while let [.., a, b] = up[..] {
                if orient(a, b, p) == Ordering::Less {
                    break;
                }
                up.pop();
            }
            up.push(p);
            while let [.., a, b] = dn[..] {
                if orient(a, b, p) == Ordering::Greater {
                    break;
                }
                dn.pop();
            }
            dn.push(p);
        }
        // Sweep the slope upwards from -inf: the maximum of y - s*j moves left
        // along the upper hull, the minimum right along the lower hull; the
        // width's derivative is j_min - j_max, so stop when it turns >= 0.
        let mut a = up.len() - 1;
        let mut b = 0usize;
        let mut best = Slope { num: 0, den: 1 };
        while let (Some(&pa), Some(&pb)) = (up.get(a), dn.get(b)) {
            if pa.x <= pb.x {
                break;
            }
            let ue = a
                .checked_sub(1)
                .and_then(|k| up.get(k))
                .map(|&q| Slope::between(q, pa));
            let le = dn.get(b + 1).map(|&q| Slope::between(pb, q));
            match (ue, le) {
                (Some(u), Some(l)) if u.cmp_exact(l) != Ordering::Greater => {
                    a -= 1;
                    best = u;
                }
                (_, Some(l)) => {
                    b += 1;
                    best = l;
                }
                (Some(u), None) => {
                    a -= 1;
                    best = u;
                }
                (None, None) => break,
            }
        }
        best.to_f64()
    }

    /// Lossless fit of `v`.
    fn fit_exact(&mut self, v: &[u64]) -> Fit {
        let s = self.minimax_slope(v.len(), |j| v.get(j).map_or(0, |&x| x as i128));
        let range = |s: f64| {
            v.iter()
                .enumerate()
                .fold((i128::MAX, i128::MIN), |(lo, hi), (j, &x)| {
                    let d = x as i128 - pred(s, j) as i128;
                    (lo.min(d), hi.max(d))
                })
        };
        let (mut slope, (mut lo, mut hi)) = (s, range(s));
        if hi - lo > u64::MAX as i128 {
            slope = 0.0;
            (lo, hi) = range(0.0);
        }
        if v.is_empty() {
            (lo, hi) = (0, 0);
        }
        Fit {
            slope,
            c: 0,
            min_r: lo,
            width: bits_needed((hi - lo) as u64),
        }
    }

    /// Evaluates a bounded-variant line: stored `s_j = clamp(c + pred_j,
    /// lo_j, hi_j)`, residual `r_j = s_j - (c + pred_j)`. `None` if the
    /// residual range does not fit in 64 bits.
    fn eval_bounded(lo: &[u64], hi: &[u64], slope: f64, c: i128) -> Option<Fit> {
        let (mut mn, mut mx) = (i128::MAX, i128::MIN);
        for (j, (&l, &h)) in lo.iter().zip(hi).enumerate() {
            let q = c + pred(slope, j) as i128;
            let r = q.clamp(l as i128, h as i128) - q;
            mn = mn.min(r);
            mx = mx.max(r);
        }
        if lo.is_empty() {
            (mn, mx) = (0, 0);
        }
        (mx - mn <= u64::MAX as i128).then(|| Fit {
            slope,
            c,
            min_r: mn,
            width: bits_needed((mx - mn) as u64),
        })
    }

    /// The minimax line of `y` with its intercept centred, so the residual
    /// range of `y` contains 0 (falls back to slope 0 like [`Self::fit_exact`]).
    fn centred_line(&mut self, len: usize, y: impl Fn(usize) -> i128) -> (f64, i128) {
        let s = self.minimax_slope(len, &y);
        let range = |s: f64| {
            (0..len).fold((i128::MAX, i128::MIN), |(lo, hi), j| {
                let d = y(j) - pred(s, j) as i128;
                (lo.min(d), hi.max(d))
            })
        };
        let (mut slope, (mut lo, mut hi)) = (s, range(s));
        if hi - lo > u64::MAX as i128 {
            slope = 0.0;
            (lo, hi) = range(0.0);
        }
        (slope, (lo + hi).div_euclid(2))
    }

    /// A line through the intervals widened to residual range `w` (split
    /// evenly below and above), found with the interval PLA; `None` if no
    /// single line passes through them.
    fn stab_line(&mut self, lo: &[u64], hi: &[u64], w: u128) -> Option<(f64, i128)> {
        let alpha = (w / 2) as i128;
        let beta = w as i128 - alpha;
        self.pla.reset();
        for (j, (&l, &h)) in lo.iter().zip(hi).enumerate() {
            let (mut a, mut b) = (l as i128 - beta, h as i128 + alpha);
            // Keep up to 2 units of slack for rounding the line to integers.
            let m = ((b - a) / 2).min(2);
            a += m;
            b -= m;
            if self.pla.push(j as u64, a, b).is_some() {
                return None;
            }
        }
        let seg = self.pla.finish()?;
        Some((seg.slope, seg.intercept.round() as i128))
    }

    /// Bounded (`-D`) fit: the best of the minimax lines of `hi`, `lo` and
    /// the midpoints, and of lines stabbing the widened intervals, judged by
    /// the exact residual width. The `hi` candidate alone never needs more
    /// bits than the lossless encoding of `hi`.
    fn fit_bounded(&mut self, lo: &[u64], hi: &[u64]) -> Fit {
        let len = lo.len().min(hi.len());
        let (lo, hi) = (lo.get(..len).unwrap_or(&[]), hi.get(..len).unwrap_or(&[]));
        let at = |v: &[u64], j: usize| v.get(j).map_or(0, |&x| x as i128);
        fn consider(best: &mut Option<Fit>, f: Option<Fit>) {
            if let Some(f) = f
                && best.is_none_or(|b| f.width < b.width)
            {
                *best = Some(f);
            }
        }
        let mut best: Option<Fit> = None;
        let (s, c) = self.centred_line(len, |j| at(hi, j));
        consider(&mut best, Self::eval_bounded(lo, hi, s, c));
        if best.is_some_and(|b| b.width > 0) {
            let (s, c) = self.centred_line(len, |j| at(lo, j));
            consider(&mut best, Self::eval_bounded(lo, hi, s, c));
            let (s, c) = self.centred_line(len, |j| (at(lo, j) + at(hi, j)).div_euclid(2));
            consider(&mut best, Self::eval_bounded(lo, hi, s, c));
        }
        // Binary search on the width for a line through the widened intervals.
        let (mut lo_b, mut hi_b) = (0u32, best.map_or(64, |b| b.width));
        while lo_b < hi_b {
            let mid = (lo_b + hi_b) / 2;
            let w = (1u128 << mid) - 1;
            match self.stab_line(lo, hi, w) {
                Some((s, c)) => {
                    consider(&mut best, Self::eval_bounded(lo, hi, s, c));
                    hi_b = mid;
                }
                None => lo_b = mid + 1,
            }
        }
        best.unwrap_or(Fit {
            slope: 0.0,
            c: 0,
            min_r: 0,
            width: 64,
        })
    }
}

/// Total bytes of an encoding with the given partition widths.
fn encoded_bytes(parts: u64, payload_bits: u64) -> u64 {
    parts * PART_BYTES + (payload_bits.div_ceil(64) + 1) * 8 + size_of::<LecoArray>() as u64
}

impl LecoArray {
    /// Losslessly compresses `values`, choosing the partition length among
    /// `2^5..=2^12` that minimises the total size. Any `u64` sequence is
    /// accepted. O(n) per candidate length.
    pub fn encode(values: &[u64]) -> Self {
        let mut f = Fitter::default();
        let best = Self::choose(values.len(), |p| {
            let mut bits = 0u64;
            for chunk in values.chunks(p) {
                bits += chunk.len() as u64 * f.fit_exact(chunk).width as u64;
            }
            bits
        });
        Self::encode_with_partition_len(values, best)
    }

    /// Losslessly compresses `values` with partitions of `2^log2_len` values
    /// (`log2_len` clamped to `0..=24`). O(n).
    pub fn encode_with_partition_len(values: &[u64], log2_len: u32) -> Self {
        let log2 = log2_len.min(LIMIT_LOG2_PART);
        let mut f = Fitter::default();
        Self::assemble(values.len(), log2, |start, end| {
            let chunk = values.get(start..end).unwrap_or(&[]);
            let fit = f.fit_exact(chunk);
            (fit, chunk.iter().map(|&v| v as i128).collect())
        })
    }

    /// The lossy `-D` encoding (Zhang §8.2.1): stores, for each `i`, some
    /// `s_i` with `lo[i] <= s_i <= hi[i]`, chosen to keep residuals small, and
    /// [`LecoArray::get`] returns exactly `s_i`. If the intervals are disjoint
    /// and increasing, the stored values are increasing.
    ///
    /// Never larger than the lossless encoding of `hi` (each partition's line
    /// can be the one the lossless encoder would use for `hi`, and the
    /// clamped residuals then lie between 0 and the lossless ones).
    ///
    /// Errors: [`Error::InvalidInput`] if the lengths differ or some
    /// `lo[i] > hi[i]`. O(n) per candidate length (a few passes per
    /// partition).
    pub fn encode_bounded(lo: &[u64], hi: &[u64]) -> Result<Self> {
        Self::check_bounds(lo, hi)?;
        let mut f = Fitter::default();
        let best = Self::choose(lo.len(), |p| {
            lo.chunks(p)
                .zip(hi.chunks(p))
                .map(|(l, h)| l.len() as u64 * f.fit_bounded(l, h).width as u64)
                .sum()
        });
        Self::encode_bounded_with_partition_len(lo, hi, best)
    }

    /// [`LecoArray::encode_bounded`] with partitions of `2^log2_len` values
    /// (`log2_len` clamped to `0..=24`).
    pub fn encode_bounded_with_partition_len(lo: &[u64], hi: &[u64], log2_len: u32) -> Result<Self> {
        Self::check_bounds(lo, hi)?;
        let log2 = log2_len.min(LIMIT_LOG2_PART);
        let mut f = Fitter::default();
        Ok(Self::assemble(lo.len(), log2, |start, end| {
            let (l, h) = (
                lo.get(start..end).unwrap_or(&[]),
                hi.get(start..end).unwrap_or(&[]),
            );
            let fit = f.fit_bounded(l, h);
            let stored = l
                .iter()
                .zip(h)
                .enumerate()
                .map(|(j, (&a, &b))| {
                    let q = fit.c + pred(fit.slope, j) as i128;
                    q.clamp(a as i128, b as i128)
                })
                .collect();
            (fit, stored)
        }))
    }

    fn check_bounds(lo: &[u64], hi: &[u64]) -> Result<()> {
        if lo.len() != hi.len() {
            return Err(Error::invalid(format!(
                "leco bounded encoding: {} lower bounds but {} upper bounds",
                lo.len(),
                hi.len()
            )));
        }
        if let Some(i) = lo.iter().zip(hi).position(|(a, b)| a > b) {
            return Err(Error::invalid(format!(
                "leco bounded encoding: lower bound exceeds upper bound at position {i}"
            )));
        }
        Ok(())
    }

    /// The `log2` partition length minimising the total size, given the
    /// payload bits of each candidate length.
    fn choose(n: usize, mut payload_bits: impl FnMut(usize) -> u64) -> u32 {
        let mut best = (u64::MAX, MIN_LOG2_PART);
        for log2 in MIN_LOG2_PART..=MAX_LOG2_PART {
            let p = 1usize << log2;
            let parts = n.div_ceil(p) as u64;
            let bytes = encoded_bytes(parts, payload_bits(p));
            if bytes < best.0 {
                best = (bytes, log2);
            }
            if p >= n {
                break; // longer partitions give the same single partition
            }
        }
        best.1
    }

    /// Builds the array from per-partition fits and the values to store.
    fn assemble(n: usize, log2: u32, mut fit: impl FnMut(usize, usize) -> (Fit, Vec<i128>)) -> Self {
        let p = 1usize << log2;
        let mut parts = Vec::with_capacity(n.div_ceil(p));
        let mut bw = BitWriter::new();
        let mut start = 0usize;
        while start < n {
            let end = (start + p).min(n);
            let (f, stored) = fit(start, end);
            parts.push(Part {
                base: (f.c + f.min_r) as u64,
                slope: f.slope,
                meta: (bw.bit_len() << 8) | f.width as u64,
            });
            for (j, &s) in stored.iter().enumerate() {
                let r = s - (f.c + pred(f.slope, j) as i128);
                bw.push((r - f.min_r) as u64, f.width);
            }
            start = end;
        }
        parts.shrink_to_fit();
        LecoArray {
            len: n as u64,
            log2_part: log2,
            parts,
            words: bw.finish(),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the array holds no value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Values per partition.
    pub fn partition_len(&self) -> usize {
        1 << self.log2_part
    }

    /// Number of partitions.
    pub fn num_partitions(&self) -> usize {
        self.parts.len()
    }

    /// Total bits of the residual payload.
    pub fn payload_bits(&self) -> u64 {
        let n = self.len;
        let p = 1u64 << self.log2_part;
        self.parts
            .iter()
            .enumerate()
            .map(|(k, part)| (n - k as u64 * p).min(p) * part.width() as u64)
            .sum()
    }

    /// The value at index `i`, or `None` if `i >= len()`. O(1): one partition
    /// header, one or two words.
    #[inline]
    pub fn get(&self, i: usize) -> Option<u64> {
        ((i as u64) < self.len).then(|| self.value(i))
    }

    #[inline]
    fn value(&self, i: usize) -> u64 {
        let j = i & ((1usize << self.log2_part) - 1);
        let Some(part) = self.parts.get(i >> self.log2_part) else {
            return 0;
        };
        let w = part.width();
        let delta = read_bits(&self.words, part.offset() + j as u64 * w as u64, w);
        part.base
            .wrapping_add(pred(part.slope, j) as u64)
            .wrapping_add(delta)
    }

    /// Index of the first value for which `below` is false, assuming `below`
    /// holds for a prefix of the sequence. O(log n) gets.
    fn partition_point(&self, below: impl Fn(u64) -> bool) -> usize {
        let p = self.log2_part;
        // Partitions whose first value is below: the answer lies after them.
        let (mut lo, mut hi) = (0usize, self.parts.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(self.value(mid << p)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return 0;
        }
        let (mut a, mut b) = (((lo - 1) << p) + 1, (lo << p).min(self.len()));
        while a < b {
            let mid = a + (b - a) / 2;
            if below(self.value(mid)) {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        a
    }

    /// For a non-decreasing sequence: the index of the first value `>= x`, or
    /// `len()`. O(log n). (Unspecified, but no panic, for other sequences.)
    pub fn lower_bound(&self, x: u64) -> usize {
        self.partition_point(|v| v < x)
    }

    /// For a non-decreasing sequence: the index of the first value `> x`, or
    /// `len()`. O(log n).
    pub fn upper_bound(&self, x: u64) -> usize {
        self.partition_point(|v| v <= x)
    }

    /// All values, in order. O(n).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        (0..self.len()).map(|i| self.value(i))
    }

    /// Bytes of memory held, measured from the allocations.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Self>()
            + self.parts.capacity() * size_of::<Part>()
            + self.words.capacity() * size_of::<u64>()
    }

    /// Encodes the array.
    ///
    /// Layout, little-endian: magic `STRATALC` (u64), version (u32), len
    /// (u64), log2 partition length (u32), partition count (u64), per
    /// partition base (u64), slope (f64), bit offset << 8 | width (u64);
    /// word count (u64), words (u64); crc32c of all preceding bytes (u32).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(LECO_MAGIC, LECO_VERSION);
        w.reserve(40 + 24 * self.parts.len() + 8 * self.words.len());
        w.u64(self.len);
        w.u32(self.log2_part);
        w.u64(self.parts.len() as u64);
        for p in &self.parts {
            w.u64(p.base);
            w.f64(p.slope);
            w.u64(p.meta);
        }
        w.u64(self.words.len() as u64);
        for &x in &self.words {
            w.u64(x);
        }
        w.finish()
    }

    /// Decodes [`LecoArray::to_bytes`] output, validating every partition
    /// against the payload. Corrupt or truncated input is an error, never a
    /// panic. O(partitions + words).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut c = codec::open(bytes, KIND, LECO_MAGIC, LECO_VERSION)?;
        let len = codec::need(c.u64(), KIND, "len")?;
        let log2_part = codec::need(c.u32(), KIND, "log2 partition length")?;
        let np = codec::count(&mut c, KIND, "partitions", 24)?;
        let mut parts = Vec::with_capacity(np);
        for _ in 0..np {
            parts.push(Part {
                base: codec::need(c.u64(), KIND, "partition base")?,
                slope: codec::need(c.f64(), KIND, "partition slope")?,
                meta: codec::need(c.u64(), KIND, "partition meta")?,
            });
        }
        let nw = codec::count(&mut c, KIND, "words", 8)?;
        let mut words = Vec::with_capacity(nw);
        for _ in 0..nw {
            words.push(codec::need(c.u64(), KIND, "word")?);
        }
        codec::expect_end(&c, KIND)?;
        let bad = |d: String| Err(codec::corrupt(KIND, d));
        if log2_part > LIMIT_LOG2_PART {
            return bad(format!("partition length 2^{log2_part} too large"));
        }
        if usize::try_from(len).is_err() || len.div_ceil(1 << log2_part) != np as u64 {
            return bad(format!("{np} partitions do not cover {len} values"));
        }
        let total_bits = nw as u64 * 64;
        let p = 1u64 << log2_part;
        for (k, part) in parts.iter().enumerate() {
            let plen = (len - k as u64 * p).min(p);
            let end = (plen as u128) * part.width() as u128 + part.offset() as u128;
            if part.width() > 64 || end > total_bits as u128 || !part.slope.is_finite() {
                return bad(format!("partition {k} is malformed"));
            }
        }
        Ok(LecoArray {
            len,
            log2_part,
            parts,
            words,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    fn roundtrip(values: &[u64]) -> LecoArray {
        let a = LecoArray::encode(values);
        assert_eq!(a.len(), values.len());
        for (i, &v) in values.iter().enumerate() {
            assert_eq!(a.get(i), Some(v), "index {i}");
        }
        assert_eq!(a.get(values.len()), None);
        assert_eq!(a.iter().collect::<Vec<_>>(), values);
        let b = LecoArray::from_bytes(&a.to_bytes()).unwrap();
        assert_eq!(b, a);
        for log2 in [0u32, 3, 7] {
            let c = LecoArray::encode_with_partition_len(values, log2);
            assert_eq!(c.iter().collect::<Vec<_>>(), values);
        }
        a
    }

    /// Brute-force minimax residual range over a grid of rational slopes.
    fn brute_min_range(v: &[u64]) -> i128 {
        let mut best = i128::MAX;
        for i in 0..v.len() {
            for j in i + 1..v.len() {
                // Candidate slopes are pairwise slopes; evaluate exactly as
                // max/min of (v_k * d - num * k) / d.
                let num = v[j] as i128 - v[i] as i128;
                let d = (j - i) as i128;
                let vals: Vec<i128> = v
                    .iter()
                    .enumerate()
                    .map(|(k, &x)| x as i128 * d - num * k as i128)
                    .collect();
                let r = vals.iter().max().unwrap() - vals.iter().min().unwrap();
                best = best.min(r / d + 1);
            }
        }
        if v.len() < 2 { 0 } else { best }
    }

    #[test]
    fn minimax_is_optimal_on_small_inputs() {
        let mut rng = Pcg64::seed_from_u64(8);
        let mut f = Fitter::default();
        for _ in 0..300 {
            let n = rng.random_range(2..12usize);
            let v: Vec<u64> = (0..n).map(|_| rng.random_range(0..1000)).collect();
            let fit = f.fit_exact(&v);
            // Real-valued optimum (rounded up) plus at most 2 for the integer
            // truncation of the prediction.
            let opt = brute_min_range(&v);
            let got = v
                .iter()
                .enumerate()
                .map(|(j, &x)| x as i128 - pred(fit.slope, j) as i128);
            let range = got.clone().max().unwrap() - got.min().unwrap();
            assert!(range <= opt + 2, "{v:?}: range {range} vs optimum ~{opt}");
        }
    }

    #[test]
    fn empty_single_and_extremes() {
        roundtrip(&[]);
        roundtrip(&[0]);
        roundtrip(&[u64::MAX]);
        roundtrip(&[u64::MAX, 0, u64::MAX, 0, 1, u64::MAX - 1]);
        roundtrip(&(0..1000).map(|i| u64::MAX - i).collect::<Vec<_>>());
        roundtrip(
            &(0..1000)
                .map(|i| if i % 2 == 0 { 0 } else { u64::MAX })
                .collect::<Vec<_>>(),
        );
    }

    #[test]
    fn monotone_sequences_compress() {
        let v: Vec<u64> = (0..100_000u64).map(|i| 1_000_000 + 37 * i).collect();
        let a = roundtrip(&v);
        assert_eq!(a.payload_bits(), 0);
        assert!(a.memory_bytes() < 100_000 * 8 / 50);
        let mut rng = Pcg64::seed_from_u64(1);
        let mut acc = 0u64;
        let v: Vec<u64> = (0..100_000)
            .map(|_| {
                acc += rng.random_range(0..64);
                acc
            })
            .collect();
        let a = roundtrip(&v);
        assert!(a.memory_bytes() < 200_000, "{}", a.memory_bytes());
        for x in [0u64, 1, 500, acc / 2, acc, acc + 1, u64::MAX] {
            assert_eq!(a.lower_bound(x), v.partition_point(|&y| y < x), "x={x}");
            assert_eq!(a.upper_bound(x), v.partition_point(|&y| y <= x), "x={x}");
        }
        for i in (0..v.len()).step_by(113) {
            assert_eq!(a.lower_bound(v[i]), v.partition_point(|&y| y < v[i]));
        }
    }

    /// Zone map of pages of `per_page` keys: the separator of page `i` may be
    /// anything in (last key of page i-1, first key of page i].
    fn zone_map(keys: &[u64], per_page: usize) -> (Vec<u64>, Vec<u64>) {
        let pages: Vec<&[u64]> = keys.chunks(per_page).collect();
        let hi: Vec<u64> = pages.iter().map(|p| p[0]).collect();
        let lo: Vec<u64> = (0..pages.len())
            .map(|i| {
                if i == 0 {
                    0
                } else {
                    pages[i - 1][pages[i - 1].len() - 1] + 1
                }
            })
            .collect();
        (lo, hi)
    }

    fn check_zone_map(keys: &[u64], lo: &[u64], hi: &[u64], d: &LecoArray) {
        let stored: Vec<u64> = d.iter().collect();
        for i in 0..stored.len() {
            assert!(lo[i] <= stored[i] && stored[i] <= hi[i]);
        }
        // Same page as the exact zone map for every present key; an absent
        // key falling in a gap may be sent to the next page instead.
        for &k in keys.iter().step_by(7) {
            assert_eq!(d.upper_bound(k), hi.partition_point(|&s| s <= k));
            for q in [k.wrapping_sub(1), k.wrapping_add(1)] {
                let exact = hi.partition_point(|&s| s <= q);
                let got = d.upper_bound(q);
                assert!(got == exact || (got == exact + 1 && lo[exact] <= q), "q={q}");
            }
        }
        assert_eq!(&LecoArray::from_bytes(&d.to_bytes()).unwrap(), d);
    }

    #[test]
    fn bounded_zone_map_uniform() {
        // Uniform keys: page-boundary jitter dwarfs the gaps, so -D can only
        // match the lossless size; it must never exceed it.
        let mut rng = Pcg64::seed_from_u64(12);
        let mut keys: Vec<u64> = (0..256 * 2000).map(|_| rng.random::<u64>() >> 8).collect();
        keys.sort_unstable();
        keys.dedup();
        let (lo, hi) = zone_map(&keys, 256);
        let d = LecoArray::encode_bounded(&lo, &hi).unwrap();
        let exact = LecoArray::encode(&hi);
        assert!(d.memory_bytes() <= exact.memory_bytes());
        check_zone_map(&keys, &lo, &hi, &d);
    }

    #[test]
    fn bounded_zone_map_periodic_bursts() {
        // Page-sized bursts of dense keys starting at jittered multiples of
        // 2^20 (e.g. batches of events per time slot): a line through the
        // separator intervals exists, the true page minima are 16-bit noisy.
        let mut rng = Pcg64::seed_from_u64(13);
        let mut keys = Vec::new();
        for p in 1..4000u64 {
            let mut at = (p << 20) + rng.random_range(0..1u64 << 16);
            for _ in 0..256 {
                at += rng.random_range(1..50);
                keys.push(at);
            }
        }
        let (lo, hi) = zone_map(&keys, 256);
        let d = LecoArray::encode_bounded(&lo, &hi).unwrap();
        let exact = LecoArray::encode(&hi);
        assert!(
            4 * d.memory_bytes() < exact.memory_bytes(),
            "{} vs {}",
            d.memory_bytes(),
            exact.memory_bytes()
        );
        check_zone_map(&keys, &lo, &hi, &d);
    }

    #[test]
    fn bounded_rejects_bad_input() {
        assert!(LecoArray::encode_bounded(&[1, 2], &[1]).is_err());
        assert!(matches!(
            LecoArray::encode_bounded(&[1, 5], &[2, 4]),
            Err(Error::InvalidInput(_))
        ));
        let e = LecoArray::encode_bounded(&[], &[]).unwrap();
        assert!(e.is_empty());
        let full = LecoArray::encode_bounded(&[0, 0, 0], &[u64::MAX; 3]).unwrap();
        assert_eq!(full.payload_bits(), 0);
    }

    #[test]
    fn corrupt_bytes_are_errors() {
        let v: Vec<u64> = (0..3000u64).map(|i| i * i).collect();
        let a = LecoArray::encode(&v);
        let b = a.to_bytes();
        for cut in [0, 3, 12, 16, 40, b.len() / 2, b.len() - 1] {
            assert!(LecoArray::from_bytes(&b[..cut]).is_err());
        }
        for i in (0..b.len()).step_by(7) {
            let mut g = b.clone();
            g[i] ^= 0x80;
            assert!(LecoArray::from_bytes(&g).is_err());
        }
    }

    fn bounded_check(lo: &[u64], hi: &[u64]) {
        let d = LecoArray::encode_bounded(lo, hi).unwrap();
        let s: Vec<u64> = d.iter().collect();
        assert_eq!(s.len(), lo.len());
        for i in 0..s.len() {
            assert!(
                lo[i] <= s[i] && s[i] <= hi[i],
                "i={i}: {} not in [{}, {}]",
                s[i],
                lo[i],
                hi[i]
            );
        }
        let exact = LecoArray::encode(hi);
        assert!(d.memory_bytes() <= exact.memory_bytes());
        assert_eq!(LecoArray::from_bytes(&d.to_bytes()).unwrap(), d);
        // Per partition length, never more payload than lossless `hi`.
        for log2 in [2u32, 5, 8] {
            let db = LecoArray::encode_bounded_with_partition_len(lo, hi, log2).unwrap();
            let ex = LecoArray::encode_with_partition_len(hi, log2);
            assert!(db.payload_bits() <= ex.payload_bits());
            assert!(
                db.iter()
                    .zip(lo.iter().zip(hi))
                    .all(|(s, (&l, &h))| l <= s && s <= h)
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn prop_roundtrip_any(v in prop::collection::vec(any::<u64>(), 0..600)) {
            roundtrip(&v);
        }

        #[test]
        fn prop_roundtrip_monotone(start: u64, steps in prop::collection::vec(0u64..1 << 20, 0..2000)) {
            let mut acc = start;
            let v: Vec<u64> = steps.iter().map(|&s| { acc = acc.saturating_add(s); acc }).collect();
            let a = roundtrip(&v);
            for &x in v.iter().step_by(31).chain([0, u64::MAX].iter()) {
                prop_assert_eq!(a.lower_bound(x), v.partition_point(|&y| y < x));
                prop_assert_eq!(a.upper_bound(x), v.partition_point(|&y| y <= x));
            }
        }

        #[test]
        fn prop_roundtrip_near_extremes(v in prop::collection::vec(prop_oneof![0u64..16, (u64::MAX - 16)..=u64::MAX, any::<u64>()], 0..300)) {
            roundtrip(&v);
        }

        #[test]
        fn prop_bounded_any(pairs in prop::collection::vec((any::<u64>(), any::<u64>()), 0..300)) {
            let lo: Vec<u64> = pairs.iter().map(|&(a, b)| a.min(b)).collect();
            let hi: Vec<u64> = pairs.iter().map(|&(a, b)| a.max(b)).collect();
            bounded_check(&lo, &hi);
        }

        #[test]
        fn prop_bounded_increasing(gaps in prop::collection::vec((1u64..1 << 30, 0u64..1 << 20), 0..1500), start in 0u64..1 << 40) {
            let (mut lo, mut hi) = (Vec::new(), Vec::new());
            let mut at = start;
            for (gap, width) in gaps {
                let l = at + 1;
                let h = l + width;
                lo.push(l);
                hi.push(h);
                at = h + gap;
            }
            bounded_check(&lo, &hi);
            let s: Vec<u64> = LecoArray::encode_bounded(&lo, &hi).unwrap().iter().collect();
            prop_assert!(s.windows(2).all(|w| w[0] < w[1]));
        }

        #[test]
        fn prop_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = LecoArray::from_bytes(&bytes);
            let mut w = Writer::new(LECO_MAGIC, LECO_VERSION);
            for &b in &bytes {
                w.u8(b);
            }
            if let Ok(a) = LecoArray::from_bytes(&w.finish()) {
                for i in 0..a.len().min(100) {
                    let _ = a.get(i);
                }
                let _ = a.lower_bound(12345);
            }
        }
    }
}
