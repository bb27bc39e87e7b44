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

use rayon::prelude::*;

use super::KeyPasses;
use super::codec::{self, Writer};
use super::exact::{U256, floor_i64};
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

/// Keys between two prefix sums of the root's fit ([`Rmi::build_from`]).
const ROOT_BLOCK: usize = if cfg!(test) { 16 } else { 1 << 16 };

/// Exact sums over keys at positions `i`, `x` = key − smallest key: what
/// the root's least-squares line over `(x, i · scale)` needs. Integers, so
/// sums over ranges are differences of prefix sums and do not depend on the
/// order they were added in.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct RootSums {
    /// `Σ x` (< 2^128 for fewer than 2^64 keys).
    sx: u128,
    /// `Σ x²`.
    sxx: U256,
    /// `Σ x · i`.
    sxi: U256,
}

impl RootSums {
    #[inline]
    fn add(&mut self, i: usize, x: u64) {
        let x = x as u128;
        self.sx = self.sx.wrapping_add(x);
        self.sxx = self.sxx.add(U256::from_u128(x * x));
        self.sxi = self.sxi.add(U256::from_u128(x * i as u128));
    }

    /// The sums over a range: `self` over `0..b` minus `o` over `0..a`.
    fn minus(self, o: Self) -> Self {
        RootSums {
            sx: self.sx.wrapping_sub(o.sx),
            sxx: self.sxx.sub(o.sxx),
            sxi: self.sxi.sub(o.sxi),
        }
    }

    /// The least-squares line `y = intercept + slope · x` over the points
    /// `(x, i · scale)` of positions `a..b` (these sums), slope `>= 0`:
    /// `slope = scale · (c·Σxi − Σx·Σi) / (c·Σx² − (Σx)²)` with `c = b − a`,
    /// both differences exact (256-bit), then one division in `f64`.
    /// Returns `(slope, intercept)`.
    fn line(&self, a: usize, b: usize, scale: f64) -> (f64, f64) {
        let c = b.saturating_sub(a) as u64;
        if c == 0 {
            return (0.0, 0.0);
        }
        // Σ i over a..b: c · (a + b − 1) / 2, an integer.
        let si = (a as u128 + b as u128 - 1) * c as u128 / 2;
        let (mx, my) = (self.sx as f64 / c as f64, si as f64 / c as f64 * scale);
        let d = self.sxx.mul_u64(c).sub(U256::mul(self.sx, self.sx));
        let (xi, x_i) = (self.sxi.mul_u64(c), U256::mul(self.sx, si));
        let slope = if d > U256::default() && xi > x_i {
            scale * (xi.sub(x_i).to_f64() / d.to_f64())
        } else {
            0.0
        };
        let slope = if slope.is_finite() { slope } else { 0.0 };
        let intercept = my - slope * mx;
        if intercept.is_finite() {
            (slope, intercept)
        } else {
            (0.0, my)
        }
    }
}

impl Rmi {
    /// Builds an RMI with `models` leaf models (clamped to `1..=max(1, n)` and
    /// to `MAX_MODELS`). Keys must be strictly increasing
    /// ([`crate::Error::OutOfOrder`] otherwise). O(n + m) time.
    pub fn build(keys: &[u64], models: usize) -> Result<Self> {
        check_strictly_increasing(keys)?;
        Self::build_from(&keys, models)
    }

    /// [`build`](Self::build) over strictly increasing keys read in passes
    /// (from storage: the keys are not checked again). One pass over all
    /// keys sums what the root's least squares needs, exactly (`RootSums`;
    /// over a data run being written it reads the keys as they are written);
    /// one more routes the keys and fits the leaves from a copy of each
    /// leaf's keys (up to `LEAF_BUFFER`; larger leaves take three passes
    /// over their range), in parallel parts with more than one thread. The
    /// same model as over the keys in memory, whatever the threads.
    pub fn build_from(keys: &(dyn KeyPasses + Sync), models: usize) -> Result<Self> {
        // Prefix sums every `ROOT_BLOCK` keys: the root's sums over any range
        // then take at most two partial blocks read again.
        let mut prefix: Vec<RootSums> = Vec::new();
        let mut acc = RootSums::default();
        let (mut min_key, mut max_key) = (None::<u64>, 0u64);
        let n = keys.pass_all(&mut |i, c| {
            let Some(&first) = c.first() else { return };
            let min = *min_key.get_or_insert(first);
            for (j, &k) in c.iter().enumerate() {
                let p = i + j;
                if p % ROOT_BLOCK == 0 {
                    prefix.push(acc);
                }
                acc.add(p, k.saturating_sub(min));
            }
            max_key = c.last().copied().unwrap_or(max_key);
        })?;
        let min_key = min_key.unwrap_or(0);
        let m = models.clamp(1, n.max(1)).min(MAX_MODELS);
        // The sums over positions `0..pos`.
        let sums_to = |pos: usize| -> Result<RootSums> {
            let b = pos / ROOT_BLOCK;
            let Some(&at) = prefix.get(b).filter(|_| pos < n) else {
                return Ok(acc);
            };
            let mut s = at;
            keys.pass(b * ROOT_BLOCK..pos, &mut |i, c| {
                for (j, &k) in c.iter().enumerate() {
                    s.add(i + j, k.saturating_sub(min_key));
                }
            })?;
            Ok(s)
        };
        let scale = m as f64 / n.max(1) as f64;
        // The root is fitted to the keys without the 0.1 % at each end: a few
        // far outliers (SOSD fb has them) would otherwise squeeze every other
        // key into the first leaf. Routing stays monotone; outliers land in
        // the first or last leaf, whose bounds cover them.
        let trim = n / 1000;
        let (a, b) = (trim, n - trim);
        let (root_slope, root_intercept) = sums_to(b)?.minus(sums_to(a)?).line(a, b, scale);
        let mut rmi = Rmi {
            n: n as u64,
            min_key,
            max_key,
            root_slope,
            root_intercept,
            leaves: Vec::with_capacity(m),
            bounds: Vec::with_capacity(m + 1),
        };
        // Monotone routing: leaves own contiguous position ranges. With more
        // than one thread the leaves are cut into parts routed in parallel
        // (`route_parts`); every leaf is fitted from the same keys as in one
        // pass, so the model is the same.
        let root = RmiRoot {
            models: m,
            ..rmi.root()
        };
        let mut large: Vec<(usize, usize, usize)> = Vec::new();
        for part in route_parts(keys, &root, n)? {
            rmi.bounds.extend(part.bounds);
            rmi.leaves.extend(part.leaves);
            large.extend(part.large);
        }
        rmi.bounds.push(n as u64);
        for (i, a, b) in large {
            let fitted = fit_leaf_passes(keys, a, b, key_at(keys, a)?)?;
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

/// Key `i` of `keys` (one pass of one key).
fn key_at(keys: &dyn KeyPasses, i: usize) -> Result<u64> {
    let mut out = 0;
    keys.pass(i..i + 1, &mut |_, c| out = c.first().copied().unwrap_or(0))?;
    Ok(out)
}

/// Keys at least this many are routed in parallel parts.
const PARALLEL_ROUTING: usize = if cfg!(test) { 64 } else { 1 << 22 };

/// The leaves of one part of the routing pass, in order: `bounds[j]` is the
/// first position of leaf `leaves.start + j`; `large` the leaves too large
/// to fit from a copy (leaf, first, end), fitted afterwards by passes.
struct Routed {
    bounds: Vec<u64>,
    leaves: Vec<Leaf>,
    large: Vec<(usize, usize, usize)>,
}

/// Routes the `n` keys with `root` and fits every leaf: one part on one
/// thread, or with more threads (and at least `PARALLEL_ROUTING` keys) one
/// part per thread, cut at leaves. Leaf `l` starts at the first position
/// routed to `l` or later (monotone routing), found by a binary search; a
/// part routes its positions exactly as the single pass would, so the
/// leaves are the same.
fn route_parts(keys: &(dyn KeyPasses + Sync), root: &RmiRoot, n: usize) -> Result<Vec<Routed>> {
    let m = root.models;
    let parts = rayon::current_num_threads().min(m);
    if parts <= 1 || n < PARALLEL_ROUTING {
        return Ok(vec![route_part(keys, root, 0..m, 0..n)?]);
    }
    // The first position routed to leaf `l` or later (`n` if none).
    let start_of = |l: usize| -> Result<usize> {
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if root.route(key_at(keys, mid)?) >= l {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    };
    let cuts: Vec<(usize, usize)> = (0..=parts)
        .map(|j| {
            let l = m * j / parts;
            let start = match l {
                0 => 0,
                l if l >= m => n,
                l => start_of(l)?,
            };
            Ok((l, start))
        })
        .collect::<Result<_>>()?;
    cuts.par_windows(2)
        .map(|w| match w {
            [(la, pa), (lb, pb)] => route_part(keys, root, *la..*lb, *pa..*pb),
            _ => Err(crate::Error::invalid("routing cut into no parts")),
        })
        .collect()
}

/// Routes the keys `pos` (every one routed into `leaves`) and fits the
/// leaves `leaves` from them: a leaf is closed as the first key of a later
/// leaf arrives (leaves nothing is routed to start there and are empty).
fn route_part(
    keys: &(dyn KeyPasses + Sync),
    root: &RmiRoot,
    leaves: std::ops::Range<usize>,
    pos: std::ops::Range<usize>,
) -> Result<Routed> {
    let mut out = Routed {
        bounds: Vec::with_capacity(leaves.len()),
        leaves: Vec::with_capacity(leaves.len()),
        large: Vec::new(),
    };
    let mut buf: Vec<u64> = Vec::new();
    let close =
        |out: &mut Routed, buf: &mut Vec<u64>, leaf: usize, start: usize, end: usize, spilled: bool| {
            out.bounds.push(start as u64);
            if spilled {
                out.large.push((leaf, start, end));
                out.leaves.push(fit_leaf(&[], start));
            } else {
                out.leaves.push(fit_leaf(buf, start));
            }
            buf.clear();
        };
    let (mut leaf, mut start, mut spilled) = (leaves.start, pos.start, false);
    keys.pass(pos.clone(), &mut |i, c| {
        for (j, &k) in c.iter().enumerate() {
            let p = i + j;
            // Routing never leaves the part's leaves (its cuts are where
            // routing reaches them), even over keys out of order.
            let r = root.route(k).min(leaves.end - 1);
            while leaf < r {
                close(&mut out, &mut buf, leaf, start, p, spilled);
                (leaf, start, spilled) = (leaf + 1, p, false);
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
    while leaf < leaves.end {
        close(&mut out, &mut buf, leaf, start, pos.end, spilled);
        (leaf, start, spilled) = (leaf + 1, pos.end, false);
    }
    Ok(out)
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

    /// `keys` shifted right by `shift` plus a dense run of `skew` keys
    /// squeezed into few leaves (leaves larger than the copy buffer, 40 keys
    /// in tests, are fitted by passes), sorted and deduplicated.
    fn skewed(mut keys: Vec<u64>, shift: u32, skew: usize) -> Vec<u64> {
        for k in &mut keys {
            *k >>= shift;
        }
        keys.extend((0..skew as u64).map(|i| (1u64 << 40) + i));
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    proptest! {
        #[test]
        fn prop_build_from_passes_is_the_same_model(
            keys in prop::collection::vec(any::<u64>(), 0..1500),
            shift in 0u32..64,
            models in 1usize..200,
            skew in 0usize..400,
        ) {
            let keys = skewed(keys, shift, skew);
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

        #[test]
        fn prop_root_line_is_the_least_squares_line(
            mut keys in prop::collection::vec(0u64..1 << 40, 2..2000),
            a in 0usize..50,
            scale in 0.001f64..10.0,
        ) {
            keys.sort_unstable();
            keys.dedup();
            prop_assume!(keys.len() > a + 1);
            let b = keys.len();
            let mut sums = RootSums::default();
            for (i, &k) in keys.iter().enumerate().skip(a) {
                sums.add(i, k - keys[0]);
            }
            let (slope, icpt) = sums.line(a, b, scale);
            // Against the two-pass floating-point fit, on inputs it is
            // accurate for.
            let (want_slope, want_icpt) = least_squares(|| {
                keys.iter().enumerate().skip(a).map(|(i, &k)| ((k - keys[0]) as f64, i as f64 * scale))
            });
            let tol = |w: f64| 1e-6 * (1.0 + w.abs());
            prop_assert!((slope - want_slope).abs() <= tol(want_slope), "{} {}", slope, want_slope);
            prop_assert!((icpt - want_icpt).abs() <= tol(want_icpt) * (1.0 + b as f64), "{} {}", icpt, want_icpt);
            // Prefix sums: a range is the difference of two prefixes.
            let mut head = RootSums::default();
            for (i, &k) in keys.iter().enumerate().take(a) {
                head.add(i, k - keys[0]);
            }
            let mut all = head;
            for (i, &k) in keys.iter().enumerate().skip(a) {
                all.add(i, k - keys[0]);
            }
            prop_assert_eq!(all.minus(head), sums);
        }

        #[test]
        fn prop_routing_in_parallel_parts_is_the_same_model(
            keys in prop::collection::vec(any::<u64>(), 0..3000),
            shift in 0u32..64,
            models in 1usize..300,
            skew in 0usize..400,
            threads in 2usize..6,
        ) {
            let keys = skewed(keys, shift, skew);
            let pool = |t: usize| rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap();
            let want = pool(1).install(|| Rmi::build(&keys, models)).unwrap();
            let (slice, passes) = pool(threads).install(|| {
                (Rmi::build(&keys, models), Rmi::build_from(&Chunked(&keys), models))
            });
            prop_assert_eq!(&want, &slice.unwrap());
            prop_assert_eq!(&want, &passes.unwrap());
        }
    }
}
