//! A two-layer linear recursive model index (RMI, Kraska et al.), top-down.
//!
//! A linear root model (least squares on `key -> leaf`) routes a key to one of
//! `m` leaf models; each leaf is a least-squares line `key -> position` over
//! the keys routed to it. Because the root's slope is clamped to `>= 0` and
//! every step of its `f64` evaluation is monotone, routing is monotone in the
//! key, so the keys routed to leaf `i` are exactly the positions
//! `[first_i, end_i)`, and any query routed to leaf `i` (present or not) has
//! its lower bound in `[first_i, end_i]`. Leaf slopes are clamped to `>= 0`,
//! so a leaf's integer prediction `p(x) = floor(line(x))` is monotone too, and
//! the signed bounds of `i - p(key_i)` measured at build time bound the lower
//! bound of every query routed there. Empty leaves answer exactly.

use std::mem::size_of;

use super::KeyPasses;
use super::codec::{self, Writer};
use super::exact::floor_i64;
use super::radix_spline::check_strictly_increasing;
use crate::Result;

const KIND: &str = "rmi";
/// Magic number of an RMI encoding: the bytes `STRATRMI`.
pub(super) const RMI_MAGIC: u64 = u64::from_le_bytes(*b"STRATRMI");
/// Format version of RMI encodings written by this build.
pub(super) const RMI_VERSION: u32 = 1;
/// Largest number of leaf models.
pub(super) const MAX_MODELS: usize = 1 << 28;

/// Error bound meaning "unbounded below" (use the leaf's first position).
const UNBOUNDED_LO: i32 = i32::MIN;
/// Error bound meaning "unbounded above" (use the leaf's end position).
const UNBOUNDED_HI: i32 = i32::MAX;

/// A leaf model of an RMI.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmiLeaf {
    /// Reference key: the line is `intercept + slope * (x - base)`.
    pub base: u64,
    /// Slope (>= 0).
    pub slope: f64,
    /// Value of the line at `base`.
    pub intercept: f64,
    /// Lower bound of `i - p(key_i)` over the leaf's keys (`i32::MIN`: unbounded).
    pub err_lo: i32,
    /// Upper bound of `i - p(key_i)` over the leaf's keys (`i32::MAX`: unbounded).
    pub err_hi: i32,
}

/// Internal name kept short.
type Leaf = RmiLeaf;

impl RmiLeaf {
    /// The leaf's integer prediction `floor(line(x))`; monotone in `x`.
    #[inline]
    pub fn predict_floor(&self, x: u64) -> i64 {
        floor_i64(self.intercept + self.slope * x.saturating_sub(self.base) as f64)
    }
}

/// The root model of an RMI and the facts every query needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmiRoot {
    /// Number of keys.
    pub n: u64,
    /// Smallest key.
    pub min_key: u64,
    /// Largest key.
    pub max_key: u64,
    /// Root slope (leaves per key unit, >= 0).
    pub slope: f64,
    /// Root intercept (leaf at `min_key`).
    pub intercept: f64,
    /// Number of leaf models.
    pub models: usize,
}

impl RmiRoot {
    /// The leaf `x` is routed to; monotone non-decreasing in `x`.
    #[inline]
    pub fn route(&self, x: u64) -> usize {
        let t = floor_i64(self.intercept + self.slope * x.saturating_sub(self.min_key) as f64);
        t.clamp(0, self.models.saturating_sub(1) as i64) as usize
    }
}

/// `(pos, lo, hi)` for `x` routed to `leaf`, which owns positions
/// `[first, end)`: the lower bound of `x` lies in `[lo, hi)`, `lo <= pos < hi`.
/// Shared by [`Rmi::approx`] and the on-disk layout of an RMI.
pub(crate) fn leaf_approx(root: &RmiRoot, leaf: &RmiLeaf, first: u64, end: u64, x: u64) -> (u64, u64, u64) {
    // `n`, `first` and `end` may come from a file's entries (the on-disk
    // layout): range ends saturate rather than overflow, and the caller
    // clamps them to the layer below.
    if root.n == 0 || x <= root.min_key {
        return (0, 0, 1);
    }
    if x > root.max_key {
        return (root.n, root.n, root.n.saturating_add(1));
    }
    if first >= end {
        return (first, first, first.saturating_add(1));
    }
    // The lower bound lies in [first, end] (monotone routing). The model
    // bound p + err_lo holds when the leaf has a key >= x (else the answer
    // is `end`), p + err_hi + 1 when it has a key <= x (else `first`), so
    // clamping both into [first, end] keeps the answer and lo <= last.
    let (f, e) = (first as i128, end as i128);
    let p = leaf.predict_floor(x) as i128;
    let lo = if leaf.err_lo == UNBOUNDED_LO {
        f
    } else {
        (p + leaf.err_lo as i128).clamp(f, e)
    };
    let last = if leaf.err_hi == UNBOUNDED_HI {
        e
    } else {
        (p + leaf.err_hi as i128 + 1).clamp(f, e)
    };
    if lo <= last {
        (
            p.clamp(lo, last) as u64,
            lo as u64,
            (last as u64).saturating_add(1),
        )
    } else {
        (first, first, end.saturating_add(1))
    }
}

/// A two-layer linear RMI over strictly increasing `u64` keys.
///
/// Immutable after build; `Send + Sync`. Memory: 40 bytes per leaf model.
#[derive(Debug, Clone, PartialEq)]
pub struct Rmi {
    n: u64,
    min_key: u64,
    max_key: u64,
    root_slope: f64,
    root_intercept: f64,
    leaves: Vec<Leaf>,
    /// `bounds[i]`: first position routed to leaf `i`; `bounds[m] = n`.
    bounds: Vec<u64>,
}

/// Least-squares line `y = a + b * x` with `b >= 0`, over `(x, y)` pairs
/// given by two passes of `pts`. Returns `(b, a)`.
pub(crate) fn least_squares<F, I>(pts: F) -> (f64, f64)
where
    F: Fn() -> I,
    I: Iterator<Item = (f64, f64)>,
{
    let mut ls = LeastSquares::default();
    for (x, y) in pts() {
        ls.first(x, y);
    }
    ls.middle();
    for (x, y) in pts() {
        ls.second(x, y);
    }
    ls.line()
}

/// The sums of [`least_squares`], fed in two passes (`first` for every
/// point, then `middle`, then `second` for every point in the same order):
/// the same arithmetic whether the points come from memory or storage.
#[derive(Debug, Default, Clone, Copy)]
struct LeastSquares {
    n: f64,
    sx: f64,
    sy: f64,
    mx: f64,
    my: f64,
    sxx: f64,
    sxy: f64,
}

impl LeastSquares {
    #[inline]
    fn first(&mut self, x: f64, y: f64) {
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
    }

    fn middle(&mut self) {
        if self.n > 0.0 {
            (self.mx, self.my) = (self.sx / self.n, self.sy / self.n);
        }
    }

    #[inline]
    fn second(&mut self, x: f64, y: f64) {
        let dx = x - self.mx;
        self.sxx += dx * dx;
        self.sxy += dx * (y - self.my);
    }

    /// `(b, a)`.
    fn line(&self) -> (f64, f64) {
        if self.n == 0.0 {
            return (0.0, 0.0);
        }
        let (sxx, sxy, mx, my) = (self.sxx, self.sxy, self.mx, self.my);
        let b = if sxx > 0.0 && sxy > 0.0 && (sxy / sxx).is_finite() {
            sxy / sxx
        } else {
            0.0
        };
        let a = my - b * mx;
        if a.is_finite() { (b, a) } else { (0.0, my) }
    }

    /// The line over the keys `range` of `keys`, point `(x, y) = pt(i, key)`,
    /// in two passes.
    fn over(
        keys: &dyn KeyPasses,
        range: std::ops::Range<usize>,
        pt: impl Fn(usize, u64) -> (f64, f64),
    ) -> Result<(f64, f64)> {
        let mut ls = LeastSquares::default();
        keys.pass(range.clone(), &mut |i, c| {
            for (j, &k) in c.iter().enumerate() {
                let (x, y) = pt(i + j, k);
                ls.first(x, y);
            }
        })?;
        ls.middle();
        keys.pass(range, &mut |i, c| {
            for (j, &k) in c.iter().enumerate() {
                let (x, y) = pt(i + j, k);
                ls.second(x, y);
            }
        })?;
        Ok(ls.line())
    }
}

/// Leaves of up to this many keys are fitted from a copy of their keys;
/// larger ones (skewed routing) by passes over their range of the keys, so
/// a build over keys on storage holds at most this many.
const LEAF_BUFFER: usize = if cfg!(test) { 40 } else { 1 << 20 };

impl Rmi {
    /// Builds an RMI with `models` leaf models (clamped to `1..=max(1, n)` and
    /// to `MAX_MODELS`). Keys must be strictly increasing
    /// ([`crate::Error::OutOfOrder`] otherwise). O(n + m) time.
    pub fn build(keys: &[u64], models: usize) -> Result<Self> {
        check_strictly_increasing(keys)?;
        Self::build_from(&keys, models)
    }

    /// [`build`](Self::build) over strictly increasing keys read in passes
    /// (from storage: the keys are not checked again): two passes fit the
    /// root, one routes the keys and fits the leaves from a copy of each
    /// leaf's keys (up to `LEAF_BUFFER`; larger leaves take three passes
    /// over their range). The same model as over the keys in memory.
    pub fn build_from(keys: &dyn KeyPasses, models: usize) -> Result<Self> {
        let n = keys.count()?;
        let m = models.clamp(1, n.max(1)).min(MAX_MODELS);
        let key_at = |i: usize| -> Result<u64> {
            let mut out = 0;
            keys.pass(i..i + 1, &mut |_, c| out = c.first().copied().unwrap_or(0))?;
            Ok(out)
        };
        let (min_key, max_key) = if n == 0 {
            (0, 0)
        } else {
            (key_at(0)?, key_at(n - 1)?)
        };
        let scale = m as f64 / n.max(1) as f64;
        // The root is fitted to the keys without the 0.1 % at each end: a few
        // far outliers (SOSD fb has them) would otherwise squeeze every other
        // key into the first leaf. Routing stays monotone; outliers land in
        // the first or last leaf, whose bounds cover them.
        let trim = n / 1000;
        let (root_slope, root_intercept) =
            LeastSquares::over(keys, trim..trim + n.saturating_sub(2 * trim), |i, k| {
                ((k - min_key) as f64, i as f64 * scale)
            })?;
        let mut rmi = Rmi {
            n: n as u64,
            min_key,
            max_key,
            root_slope,
            root_intercept,
            leaves: Vec::with_capacity(m),
            bounds: Vec::with_capacity(m + 1),
        };
        // Monotone routing: leaves own contiguous position ranges, closed as
        // the first key of a later leaf arrives.
        let root = RmiRoot {
            models: m,
            ..rmi.root()
        };
        let mut buf: Vec<u64> = Vec::new();
        let mut large: Vec<(usize, usize, usize)> = Vec::new();
        let (mut leaf, mut start, mut spilled) = (0usize, 0usize, false);
        let mut close =
            |rmi: &mut Rmi, buf: &mut Vec<u64>, leaf: usize, start: usize, end: usize, spilled: bool| {
                rmi.bounds.push(start as u64);
                if spilled {
                    large.push((leaf, start, end));
                    rmi.leaves.push(fit_leaf(&[], start));
                } else {
                    rmi.leaves.push(fit_leaf(buf, start));
                }
                buf.clear();
            };
        keys.pass(0..n, &mut |i, c| {
            for (j, &k) in c.iter().enumerate() {
                let pos = i + j;
                let r = root.route(k);
                while leaf < r {
                    close(&mut rmi, &mut buf, leaf, start, pos, spilled);
                    (leaf, start, spilled) = (leaf + 1, pos, false);
                }
                if !spilled {
                    buf.push(k);
                    if buf.len() > LEAF_BUFFER {
                        spilled = true;
                        buf.clear();
                    }
                }
            }
        })?;
        while leaf < m {
            close(&mut rmi, &mut buf, leaf, start, n, spilled);
            (leaf, start, spilled) = (leaf + 1, n, false);
        }
        rmi.bounds.push(n as u64);
        for (i, a, b) in large {
            let fitted = fit_leaf_passes(keys, a, b, key_at(a)?)?;
            if let Some(l) = rmi.leaves.get_mut(i) {
                *l = fitted;
            }
        }
        Ok(rmi)
    }

    /// The leaf a key is routed to; monotone non-decreasing in `x`.
    #[inline]
    fn route(&self, x: u64) -> usize {
        self.route_among(x, self.leaves.len())
    }

    /// The leaf `x` is routed to among `m` leaves.
    #[inline]
    fn route_among(&self, x: u64, m: usize) -> usize {
        RmiRoot {
            models: m,
            ..self.root()
        }
        .route(x)
    }

    /// The range `[lo, hi)` holding the lower bound of `x` (index of the first
    /// key `>= x`, or `n`), for any `x`: `lo < hi <= n + 1`. The width is at
    /// most the routed leaf's `err_hi - err_lo + 2`, and never more than its
    /// key count plus one. Queries at or below the smallest key and above the
    /// largest are answered exactly. O(1).
    pub fn predict_range(&self, x: u64) -> (u64, u64) {
        let (_, lo, hi) = self.approx(x);
        (lo, hi)
    }

    /// The point prediction `pos` for `x` together with the range of
    /// [`Rmi::predict_range`]: `(pos, lo, hi)` with `lo <= pos < hi` (the
    /// fields of `index::ApproxPos`). O(1).
    pub fn approx(&self, x: u64) -> (u64, u64, u64) {
        if self.n == 0 || self.leaves.is_empty() || x <= self.min_key {
            return (0, 0, 1);
        }
        if x > self.max_key {
            return (self.n, self.n, self.n + 1);
        }
        let i = self.route(x);
        let (Some(&first), Some(&end), Some(leaf)) =
            (self.bounds.get(i), self.bounds.get(i + 1), self.leaves.get(i))
        else {
            return (0, 0, self.n + 1);
        };
        leaf_approx(&self.root(), leaf, first, end, x)
    }

    /// The root model.
    pub fn root(&self) -> RmiRoot {
        RmiRoot {
            n: self.n,
            min_key: self.min_key,
            max_key: self.max_key,
            slope: self.root_slope,
            intercept: self.root_intercept,
            models: self.leaves.len(),
        }
    }

    /// The leaf models.
    pub fn leaves(&self) -> &[RmiLeaf] {
        &self.leaves
    }

    /// `bounds[i]`: first position routed to leaf `i`; `bounds[models] = n`.
    pub fn bounds(&self) -> &[u64] {
        &self.bounds
    }

    /// The point prediction for `x`, inside [`Rmi::predict_range`].
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

    /// Number of leaf models.
    pub fn num_models(&self) -> usize {
        self.leaves.len()
    }

    /// Largest range width over the leaves (`err_hi - err_lo + 2`, capped by
    /// the leaf size plus one).
    pub fn max_range_width(&self) -> u64 {
        self.leaves
            .iter()
            .zip(self.bounds.windows(2))
            .map(|(l, w)| {
                let size = match w {
                    [a, b] => b.saturating_sub(*a),
                    _ => 0,
                };
                let model = (l.err_hi as i64 - l.err_lo as i64 + 2) as u64;
                model.min(size + 1)
            })
            .max()
            .unwrap_or(1)
    }

    /// Bytes of memory held, measured from the allocations.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Self>()
            + self.leaves.capacity() * size_of::<Leaf>()
            + self.bounds.capacity() * size_of::<u64>()
    }

    /// Encodes the model.
    ///
    /// Layout, little-endian: magic `STRATRMI` (u64), version (u32), n (u64),
    /// min_key (u64), max_key (u64), root slope (f64), root intercept (f64), m (u64), m
    /// leaves of (base u64, slope f64, intercept f64, err_lo i32, err_hi i32),
    /// m + 1 leaf bounds (u64), crc32c of all preceding bytes (u32).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(RMI_MAGIC, RMI_VERSION);
        w.reserve(48 + 40 * self.leaves.len());
        w.u64(self.n);
        w.u64(self.min_key);
        w.u64(self.max_key);
        w.f64(self.root_slope);
        w.f64(self.root_intercept);
        w.u64(self.leaves.len() as u64);
        for l in &self.leaves {
            w.u64(l.base);
            w.f64(l.slope);
            w.f64(l.intercept);
            w.u32(l.err_lo as u32);
            w.u32(l.err_hi as u32);
        }
        for &b in &self.bounds {
            w.u64(b);
        }
        w.finish()
    }

    /// Decodes [`Rmi::to_bytes`] output, validating every structural
    /// invariant. Corrupt or truncated input is an error, never a panic. O(m).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut c = codec::open(bytes, KIND, RMI_MAGIC, RMI_VERSION)?;
        let n = codec::need(c.u64(), KIND, "n")?;
        let min_key = codec::need(c.u64(), KIND, "min_key")?;
        let max_key = codec::need(c.u64(), KIND, "max_key")?;
        let root_slope = codec::need(c.f64(), KIND, "root slope")?;
        let root_intercept = codec::need(c.f64(), KIND, "root intercept")?;
        let m = codec::count(&mut c, KIND, "models", 40)?;
        let mut leaves = Vec::with_capacity(m);
        for _ in 0..m {
            leaves.push(Leaf {
                base: codec::need(c.u64(), KIND, "leaf base")?,
                slope: codec::need(c.f64(), KIND, "leaf slope")?,
                intercept: codec::need(c.f64(), KIND, "leaf intercept")?,
                err_lo: codec::need(c.u32(), KIND, "leaf err_lo")? as i32,
                err_hi: codec::need(c.u32(), KIND, "leaf err_hi")? as i32,
            });
        }
        let mut bounds = Vec::with_capacity(m + 1);
        for _ in 0..=m {
            bounds.push(codec::need(c.u64(), KIND, "leaf bound")?);
        }
        codec::expect_end(&c, KIND)?;
        let bad = |d: &str| Err(codec::corrupt(KIND, d.to_string()));
        if m == 0 || m > MAX_MODELS {
            return bad("model count out of range");
        }
        // Ranges end at `n + 1`: a count of `u64::MAX` would overflow them.
        if n == u64::MAX {
            return bad("key count out of range");
        }
        if bounds.first() != Some(&0)
            || bounds.last() != Some(&n)
            || bounds.windows(2).any(|w| matches!(w, [a, b] if a > b))
        {
            return bad("leaf bounds not a partition of 0..n");
        }
        if !(root_slope.is_finite() && root_slope >= 0.0 && root_intercept.is_finite()) {
            return bad("root model not finite and non-decreasing");
        }
        if leaves.iter().any(|l| {
            !(l.slope.is_finite() && l.slope >= 0.0 && l.intercept.is_finite()) || l.err_lo > l.err_hi
        }) {
            return bad("leaf model not finite and non-decreasing");
        }
        if min_key > max_key {
            return bad("min_key exceeds max_key");
        }
        Ok(Rmi {
            n,
            min_key,
            max_key,
            root_slope,
            root_intercept,
            leaves,
            bounds,
        })
    }
}

/// [`fit_leaf`] over the keys `a..b` of `keys` (first key `base`), in three
/// passes: the same leaf.
fn fit_leaf_passes(keys: &dyn KeyPasses, a: usize, b: usize, base: u64) -> Result<Leaf> {
    let (slope, intercept) = LeastSquares::over(keys, a..b, |i, k| ((k - base) as f64, i as f64))?;
    let mut leaf = Leaf {
        base,
        slope,
        intercept,
        err_lo: 0,
        err_hi: 0,
    };
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    keys.pass(a..b, &mut |i, c| {
        for (j, &k) in c.iter().enumerate() {
            let e = (i + j) as i64 - leaf.predict_floor(k);
            lo = lo.min(e);
            hi = hi.max(e);
        }
    })?;
    set_bounds(&mut leaf, lo, hi);
    Ok(leaf)
}

/// Stores measured error bounds, saturating to the unbounded markers.
fn set_bounds(leaf: &mut Leaf, lo: i64, hi: i64) {
    leaf.err_lo = if lo <= UNBOUNDED_LO as i64 {
        UNBOUNDED_LO
    } else {
        lo as i32
    };
    leaf.err_hi = if hi >= UNBOUNDED_HI as i64 {
        UNBOUNDED_HI
    } else {
        hi as i32
    };
}

/// Fits a leaf over `keys` at positions `first..first + keys.len()` and
/// measures its integer error bounds.
fn fit_leaf(keys: &[u64], first: usize) -> Leaf {
    let Some(&base) = keys.first() else {
        return Leaf {
            base: 0,
            slope: 0.0,
            intercept: first as f64,
            err_lo: 0,
            err_hi: 0,
        };
    };
    let (slope, intercept) = least_squares(|| {
        keys.iter()
            .enumerate()
            .map(|(j, &k)| ((k - base) as f64, (first + j) as f64))
    });
    let mut leaf = Leaf {
        base,
        slope,
        intercept,
        err_lo: 0,
        err_hi: 0,
    };
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for (j, &k) in keys.iter().enumerate() {
        let e = (first + j) as i64 - leaf.predict_floor(k);
        lo = lo.min(e);
        hi = hi.max(e);
    }
    set_bounds(&mut leaf, lo, hi);
    leaf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    fn lower_bound(keys: &[u64], x: u64) -> u64 {
        keys.partition_point(|&k| k < x) as u64
    }

    fn check_contract(keys: &[u64], rmi: &Rmi, extra: &[u64]) {
        let n = keys.len() as u64;
        let mut queries = vec![0u64, 1, u64::MAX, u64::MAX - 1];
        queries.extend_from_slice(extra);
        for &k in keys {
            queries.extend([k, k.wrapping_sub(1), k.wrapping_add(1)]);
        }
        for w in keys.windows(2) {
            queries.push(w[0] + (w[1] - w[0]) / 2);
        }
        let max_width = rmi.max_range_width();
        for x in queries {
            let (lo, hi) = rmi.predict_range(x);
            let lb = lower_bound(keys, x);
            assert!(lo < hi && hi <= n + 1, "bad range [{lo},{hi}) n={n}");
            assert!(lo <= lb && lb < hi, "x={x}: lb {lb} not in [{lo},{hi})");
            assert!(hi - lo <= max_width);
            let p = rmi.predict(x);
            assert!(p >= lo && p < hi);
            assert_eq!(rmi.approx(x), (p, lo, hi));
        }
    }

    #[test]
    fn empty_and_single() {
        let r = Rmi::build(&[], 10).unwrap();
        assert_eq!(r.predict_range(3), (0, 1));
        let r = Rmi::build(&[9], 10).unwrap();
        assert_eq!(r.num_models(), 1);
        check_contract(&[9], &r, &[]);
        assert!(matches!(Rmi::build(&[2, 2], 1), Err(Error::OutOfOrder { .. })));
    }

    #[test]
    fn regression_routing_during_build_and_far_queries() {
        // Found by random_and_adversarial: routing during build used the
        // number of leaves built so far; queries far beyond a leaf's last key
        // must fall back to the leaf's end, not the model's (huge) bound.
        let keys: Vec<u64> = (0..1000).map(|i| 100 + 10 * i).collect();
        let r = Rmi::build(&keys, 16).unwrap();
        assert_eq!(r.predict_range(u64::MAX), (1000, 1001));
        assert_eq!(r.predict_range(0), (0, 1));
        check_contract(&keys, &r, &[]);
    }

    #[test]
    fn linear_keys_are_exact() {
        let keys: Vec<u64> = (0..10_000).map(|i| 100 + 10 * i).collect();
        let r = Rmi::build(&keys, 16).unwrap();
        check_contract(&keys, &r, &[]);
        assert!(r.max_range_width() <= 3);
    }

    #[test]
    fn random_and_adversarial() {
        let mut rng = Pcg64::seed_from_u64(23);
        for case in 0..60 {
            let n = rng.random_range(1..3000usize);
            let mut keys: Vec<u64> = match case % 4 {
                0 => (0..n).map(|_| rng.random()).collect(),
                1 => (0..n).map(|_| rng.random_range(0..50_000)).collect(),
                2 => (0..n).map(|i| (i as u64).pow(3)).collect(),
                _ => (0..n)
                    .map(|i| {
                        if i % 3 == 0 {
                            rng.random_range(0..100)
                        } else {
                            u64::MAX - rng.random_range(0..100_000)
                        }
                    })
                    .collect(),
            };
            keys.sort_unstable();
            keys.dedup();
            for m in [1usize, 2, 7, 64, 5000] {
                let r = Rmi::build(&keys, m).unwrap();
                check_contract(&keys, &r, &[]);
                let back = Rmi::from_bytes(&r.to_bytes()).unwrap();
                assert_eq!(back, r);
            }
        }
    }

    #[test]
    fn many_uniform_keys() {
        let mut rng = Pcg64::seed_from_u64(4);
        let mut keys: Vec<u64> = (0..200_000).map(|_| rng.random()).collect();
        keys.sort_unstable();
        keys.dedup();
        let r = Rmi::build(&keys, 1 << 12).unwrap();
        assert_eq!(r.num_models(), 1 << 12);
        for i in (0..keys.len()).step_by(101) {
            for x in [keys[i], keys[i] - 1, keys[i] + 1] {
                let (lo, hi) = r.predict_range(x);
                let lb = lower_bound(&keys, x);
                assert!(lo <= lb && lb < hi);
            }
        }
        assert_eq!(r.memory_bytes(), size_of::<Rmi>() + 40 * (1 << 12) + 8);
    }

    #[test]
    fn corrupt_bytes_are_errors() {
        let keys: Vec<u64> = (0..300u64).map(|i| i * i * 7).collect();
        let r = Rmi::build(&keys, 8).unwrap();
        let b = r.to_bytes();
        for cut in [0, 5, 12, 30, b.len() / 2, b.len() - 1] {
            assert!(Rmi::from_bytes(&b[..cut]).is_err());
        }
        for i in 0..b.len() {
            let mut g = b.clone();
            g[i] = g[i].wrapping_add(1);
            assert!(Rmi::from_bytes(&g).is_err());
        }
    }

    /// `leaf_approx` on fields read from a file (the layered RMI's entries):
    /// extreme counts and bounds give saturated ranges, never an overflow.
    #[test]
    fn leaf_approx_saturates_on_extreme_fields() {
        let root = RmiRoot {
            n: u64::MAX,
            min_key: 0,
            max_key: 100,
            slope: 0.0,
            intercept: 0.0,
            models: 1,
        };
        let leaf = RmiLeaf {
            base: 0,
            slope: 0.0,
            intercept: 0.0,
            err_lo: 0,
            err_hi: 0,
        };
        assert_eq!(
            leaf_approx(&root, &leaf, 0, 5, 200),
            (u64::MAX, u64::MAX, u64::MAX)
        );
        assert_eq!(
            leaf_approx(&root, &leaf, u64::MAX, 5, 50),
            (u64::MAX, u64::MAX, u64::MAX)
        );
        let (_, lo, hi) = leaf_approx(&root, &leaf, u64::MAX - 1, u64::MAX, 50);
        assert!(lo < hi, "{lo} {hi}");
    }

    /// A valid encoding (checksum recomputed) whose key count is
    /// `u64::MAX`: ranges end at `n + 1`, so it is refused, not a panic in
    /// `approx` (or a wrapped range in release).
    #[test]
    fn a_huge_key_count_is_corruption() {
        let mut w = Writer::new(RMI_MAGIC, RMI_VERSION);
        w.u64(u64::MAX); // n
        w.u64(1); // min_key
        w.u64(10); // max_key
        w.f64(0.0);
        w.f64(0.0);
        w.u64(1); // one leaf
        w.u64(1);
        w.f64(0.0);
        w.f64(0.0);
        w.u32(0);
        w.u32(0);
        w.u64(0); // bounds
        w.u64(u64::MAX);
        let e = Rmi::from_bytes(&w.finish()).unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains("key count"), "{e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn prop_contract(mut keys in prop::collection::vec(any::<u64>(), 1..300), m in 1usize..80, qs in prop::collection::vec(any::<u64>(), 0..40)) {
            keys.sort_unstable();
            keys.dedup();
            let r = Rmi::build(&keys, m).unwrap();
            check_contract(&keys, &r, &qs);
        }

        #[test]
        fn prop_clustered(runs in prop::collection::vec((any::<u64>(), 1usize..100, 1u64..1000), 1..6), m in 1usize..50) {
            let mut keys = Vec::new();
            for (b, len, step) in runs {
                for j in 0..len as u64 {
                    keys.push(b.saturating_add(j * step));
                }
            }
            keys.sort_unstable();
            keys.dedup();
            let r = Rmi::build(&keys, m).unwrap();
            check_contract(&keys, &r, &[]);
        }

        #[test]
        fn prop_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = Rmi::from_bytes(&bytes);
            let mut w = Writer::new(RMI_MAGIC, RMI_VERSION);
            for &b in &bytes {
                w.u8(b);
            }
            if let Ok(r) = Rmi::from_bytes(&w.finish()) {
                for x in [0u64, 1, 1 << 40, u64::MAX] {
                    let (lo, hi) = r.predict_range(x);
                    prop_assert!(lo < hi && hi <= r.len() + 1);
                }
            }
        }
    }

    use crate::model::Chunked;

    proptest! {
        #[test]
        fn prop_build_from_passes_is_the_same_model(
            mut keys in prop::collection::vec(any::<u64>(), 0..1500),
            shift in 0u32..64,
            models in 1usize..200,
            skew in 0usize..400,
        ) {
            for k in &mut keys {
                *k >>= shift;
            }
            // A dense run squeezed into few leaves: leaves larger than the
            // copy buffer (40 keys in tests) are fitted by passes.
            keys.extend((0..skew as u64).map(|i| (1u64 << 40) + i));
            keys.sort_unstable();
            keys.dedup();
            let want = Rmi::build(&keys, models).unwrap();
            let got = Rmi::build_from(&Chunked(&keys), models).unwrap();
            prop_assert_eq!(want, got);
            // A leaf fitted by passes equals one fitted from a copy.
            if keys.len() > 3 {
                let (a, b) = (keys.len() / 3, keys.len() - 1);
                prop_assert_eq!(
                    fit_leaf_passes(&Chunked(&keys), a, b, keys[a]).unwrap(),
                    fit_leaf(&keys[a..b], a)
                );
            }
        }
    }
}
