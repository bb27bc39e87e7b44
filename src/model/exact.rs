//! Exact geometric predicates on integer points, shared by the builders.
//!
//! Every feasibility decision of the segmentation algorithms (PLA, cone,
//! spline corridor, minimax fit) is one of the predicates below, evaluated
//! without rounding: x coordinates are `u64`, y coordinates `i128` (callers
//! clamp them to `±Y_LIMIT`), and products are compared exactly in up to 192
//! bits, so results never depend on floating-point luck.

use std::cmp::Ordering;

/// Largest magnitude of a y coordinate accepted by the predicates. Builders
/// clamp their inputs to `[-Y_LIMIT, Y_LIMIT]`, so differences of two y
/// coordinates always fit in an `i128`.
pub(crate) const Y_LIMIT: i128 = 1 << 120;

/// Clamps a y coordinate into `[-Y_LIMIT, Y_LIMIT]`.
#[inline]
pub(crate) fn clamp_y(y: i128) -> i128 {
    y.clamp(-Y_LIMIT, Y_LIMIT)
}

/// A point with an unsigned x and a signed y coordinate of type `Y`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct P<Y> {
    pub x: u64,
    pub y: Y,
}

impl<Y> P<Y> {
    #[inline]
    pub(crate) fn new(x: u64, y: Y) -> Self {
        P { x, y }
    }
}

/// A point with an `i128` y coordinate (within `±Y_LIMIT`).
pub(crate) type Pt = P<i128>;

/// A y coordinate type with an exact orientation predicate.
pub(crate) trait Coord: Copy + Default + PartialEq + std::fmt::Debug {
    /// See [`orient`].
    fn orient(a: P<Self>, b: P<Self>, c: P<Self>) -> Ordering;
    /// The value as `i128`.
    fn wide(self) -> i128;
    /// The nearest `f64`.
    fn to_f64(self) -> f64;
}

impl Coord for i128 {
    #[inline]
    fn orient(a: Pt, b: Pt, c: Pt) -> Ordering {
        mul_cmp(b.x.wrapping_sub(a.x), c.y - a.y, c.x.wrapping_sub(a.x), b.y - a.y)
    }
    #[inline]
    fn wide(self) -> i128 {
        self
    }
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
}

/// Largest magnitude of an `i64` y coordinate, `2^62 - 1`: differences of
/// two then lie within `±(2^63 - 2)` and fit in `i64` (at `2^62` itself the
/// difference `2^62 - (-2^62)` wrapped to `-2^63` and turned an orientation
/// round), and products with a `u64` fit in `i128`.
pub(crate) const Y64_LIMIT: i128 = (1 << 62) - 1;

impl Coord for i64 {
    /// Requires `|y| <= 2^62 - 1` (see [`Y64_LIMIT`]).
    #[inline]
    fn orient(a: P<i64>, b: P<i64>, c: P<i64>) -> Ordering {
        let (dx1, dy2) = (b.x.wrapping_sub(a.x), c.y.wrapping_sub(a.y));
        let (dx2, dy1) = (c.x.wrapping_sub(a.x), b.y.wrapping_sub(a.y));
        (dx1 as i128 * dy2 as i128).cmp(&(dx2 as i128 * dy1 as i128))
    }
    #[inline]
    fn wide(self) -> i128 {
        self as i128
    }
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
}

/// Compares `a * b` with `c * d` exactly, for any `a, c: u64` and `b, d: i128`.
#[inline]
pub(crate) fn mul_cmp(a: u64, b: i128, c: u64, d: i128) -> Ordering {
    match (i64::try_from(b), i64::try_from(d)) {
        // |a * b| < 2^64 * 2^63 = 2^127: no overflow. The i64 operands let
        // the compiler use one widening multiply per product.
        (Ok(b), Ok(d)) => (a as i128 * b as i128).cmp(&(c as i128 * d as i128)),
        _ => wide_mul_cmp(a, b, c, d),
    }
}

/// The 192-bit magnitude `a * m` as `(high, low)` 128-bit halves.
#[inline]
fn mul_wide(a: u64, m: u128) -> (u128, u128) {
    let lo = a as u128 * (m as u64) as u128;
    let mid = a as u128 * ((m >> 64) as u64) as u128;
    let (low, carry) = lo.overflowing_add(mid << 64);
    ((mid >> 64) + carry as u128, low)
}

/// An unsigned 256-bit integer: exact sums of squares and products of
/// `u64` keys (the RMI root's least squares). Ordered as numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct U256 {
    hi: u128,
    lo: u128,
}

impl U256 {
    /// The value `x`.
    pub(crate) fn from_u128(x: u128) -> Self {
        U256 { hi: 0, lo: x }
    }

    /// `a * b`, exactly.
    pub(crate) fn mul(a: u128, b: u128) -> Self {
        let (a0, a1) = (a as u64 as u128, a >> 64);
        let (b0, b1) = (b as u64 as u128, b >> 64);
        let (p01, p10) = (a0 * b1, a1 * b0);
        U256 {
            hi: a1 * b1,
            lo: a0 * b0,
        }
        .add(U256 {
            hi: p01 >> 64,
            lo: p01 << 64,
        })
        .add(U256 {
            hi: p10 >> 64,
            lo: p10 << 64,
        })
    }

    /// `self * c` (wrapping past 2^256).
    pub(crate) fn mul_u64(self, c: u64) -> Self {
        let low = Self::mul(self.lo, c as u128);
        U256 {
            hi: low.hi.wrapping_add(self.hi.wrapping_mul(c as u128)),
            lo: low.lo,
        }
    }

    /// `self + o` (wrapping past 2^256).
    pub(crate) fn add(self, o: Self) -> Self {
        let (lo, carry) = self.lo.overflowing_add(o.lo);
        U256 {
            hi: self.hi.wrapping_add(o.hi).wrapping_add(carry as u128),
            lo,
        }
    }

    /// `self - o` (wrapping below 0).
    pub(crate) fn sub(self, o: Self) -> Self {
        let (lo, borrow) = self.lo.overflowing_sub(o.lo);
        U256 {
            hi: self.hi.wrapping_sub(o.hi).wrapping_sub(borrow as u128),
            lo,
        }
    }

    /// The nearest `f64` (within two roundings).
    pub(crate) fn to_f64(self) -> f64 {
        self.hi as f64 * 2f64.powi(128) + self.lo as f64
    }
}

#[cold]
fn wide_mul_cmp(a: u64, b: i128, c: u64, d: i128) -> Ordering {
    let sign = |x: u64, y: i128| -> i8 {
        if x == 0 || y == 0 {
            0
        } else if y > 0 {
            1
        } else {
            -1
        }
    };
    let (s1, s2) = (sign(a, b), sign(c, d));
    if s1 != s2 {
        return s1.cmp(&s2);
    }
    if s1 == 0 {
        return Ordering::Equal;
    }
    let m1 = mul_wide(a, b.unsigned_abs());
    let m2 = mul_wide(c, d.unsigned_abs());
    if s1 > 0 { m1.cmp(&m2) } else { m2.cmp(&m1) }
}

/// Orientation of `c` relative to the line through `a` and `b`, for
/// `a.x < b.x` and `a.x <= c.x`: `Greater` if `c` lies strictly above the
/// line, `Less` if strictly below, `Equal` if on it. (This is the sign of the
/// cross product `(b - a) x (c - a)`.)
#[inline]
pub(crate) fn orient<Y: Coord>(a: P<Y>, b: P<Y>, c: P<Y>) -> Ordering {
    Y::orient(a, b, c)
}

/// `floor(x)` as an `i64`, saturating at the `i64` range (NaN gives 0).
/// Exact and monotone non-decreasing in `x`; avoids the `floor` library call
/// on targets without SSE4.1.
#[inline]
pub(crate) fn floor_i64(x: f64) -> i64 {
    let t = x as i64; // truncation toward zero, saturating
    if (t as f64) > x { t.saturating_sub(1) } else { t }
}

/// A rational slope `num / den` with `den > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slope {
    pub num: i128,
    pub den: u64,
}

impl Slope {
    /// The slope of the line through `a` and `b` (`a.x < b.x`).
    #[inline]
    pub(crate) fn between<Y: Coord>(a: P<Y>, b: P<Y>) -> Self {
        Slope {
            num: b.y.wide() - a.y.wide(),
            den: b.x.wrapping_sub(a.x),
        }
    }

    /// Exact comparison of two slopes.
    #[inline]
    pub(crate) fn cmp_exact(self, other: Slope) -> Ordering {
        // num1/den1 vs num2/den2  <=>  num1*den2 vs num2*den1 (dens > 0).
        mul_cmp(other.den, self.num, self.den, other.num)
    }

    /// The nearest `f64`.
    #[inline]
    pub(crate) fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reference: exact signed product as little-endian 32-bit limbs.
    fn product_limbs(a: u64, b: i128) -> (bool, Vec<u64>) {
        let neg = b < 0 && a != 0;
        let mag = b.unsigned_abs();
        let xa = [a as u32 as u64, a >> 32];
        let xb = [
            mag as u32 as u64,
            (mag >> 32) as u32 as u64,
            (mag >> 64) as u32 as u64,
            (mag >> 96) as u32 as u64,
        ];
        let mut out = vec![0u64; 7];
        for (i, &p) in xa.iter().enumerate() {
            let mut carry = 0u64;
            for (j, &q) in xb.iter().enumerate() {
                let t = out[i + j] + p * q + carry;
                out[i + j] = t & 0xffff_ffff;
                carry = t >> 32;
            }
            let mut k = i + xb.len();
            while carry > 0 {
                let t = out[k] + carry;
                out[k] = t & 0xffff_ffff;
                carry = t >> 32;
                k += 1;
            }
        }
        let zero = out.iter().all(|&l| l == 0);
        (neg && !zero, out)
    }

    fn reference_cmp(a: u64, b: i128, c: u64, d: i128) -> Ordering {
        let (n1, l1) = product_limbs(a, b);
        let (n2, l2) = product_limbs(c, d);
        let mag = |l: &Vec<u64>| l.iter().rev().copied().collect::<Vec<_>>();
        match (n1, n2) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => mag(&l1).cmp(&mag(&l2)),
            (true, true) => mag(&l2).cmp(&mag(&l1)),
        }
    }

    #[test]
    fn extremes() {
        let cases = [
            (u64::MAX, i128::MAX, u64::MAX, i128::MAX),
            (u64::MAX, i128::MIN, u64::MAX, i128::MAX),
            (u64::MAX, i128::MIN, u64::MAX, i128::MIN),
            (0, i128::MIN, 1, 0),
            (u64::MAX, 1 << 100, u64::MAX - 1, (1 << 100) + 1),
            (3, -(1 << 70), 2, -(1 << 70)),
        ];
        for (a, b, c, d) in cases {
            assert_eq!(mul_cmp(a, b, c, d), reference_cmp(a, b, c, d), "{a} {b} {c} {d}");
        }
    }

    #[test]
    fn floor_i64_matches_floor() {
        let xs = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.0,
            -1.0,
            2.5,
            -2.5,
            1e15 + 0.5,
            -1e15 - 0.5,
            9.007_199_254_740_993e15,
            4.0e18,
            9.3e18,
            -9.3e18,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
        ];
        for x in xs {
            let want = if x.is_nan() { 0 } else { x.floor() as i64 };
            assert_eq!(floor_i64(x), want, "{x}");
        }
    }

    #[test]
    fn u256_products_at_the_edges() {
        let max = u128::MAX;
        // (2^128 - 1)^2 = 2^256 - 2^129 + 1.
        assert_eq!(U256::mul(max, max), U256 { hi: max - 1, lo: 1 });
        assert_eq!(U256::mul(1 << 64, 1 << 64), U256 { hi: 1, lo: 0 });
        assert_eq!(U256::mul(0, max), U256::default());
        assert_eq!(
            U256::from_u128(max).mul_u64(u64::MAX),
            U256::mul(max, u64::MAX as u128)
        );
        assert_eq!(
            U256::from_u128(max).add(U256::from_u128(1)),
            U256 { hi: 1, lo: 0 }
        );
        assert_eq!(
            U256 { hi: 1, lo: 0 }.sub(U256::from_u128(1)),
            U256::from_u128(max)
        );
        assert_eq!(U256 { hi: 1, lo: 0 }.to_f64(), 2f64.powi(128));
        assert_eq!(U256::mul(3 << 100, 5 << 100).to_f64(), 15.0 * 2f64.powi(200));
    }

    proptest! {
        #[test]
        fn prop_u256_matches_exact_comparisons_and_inverts(
            a in any::<u64>(), b in any::<u128>(), c in any::<u64>(), d in any::<u128>(), e in any::<u128>(),
        ) {
            let (b, d) = (b >> 1, d >> 1);
            let (x, y) = (U256::mul(a as u128, b), U256::mul(c as u128, d));
            prop_assert_eq!(x.cmp(&y), mul_cmp(a, b as i128, c, d as i128));
            prop_assert_eq!(x, U256::from_u128(b).mul_u64(a));
            prop_assert_eq!(x.add(y).sub(y), x);
            prop_assert_eq!(U256::mul(e, b), U256::mul(b, e));
            if let Some(p) = e.checked_mul(b) {
                prop_assert_eq!(U256::mul(e, b), U256::from_u128(p));
            }
            let f = x.to_f64();
            let want = a as f64 * b as f64;
            prop_assert!((f - want).abs() <= want * 1e-15, "{} {}", f, want);
        }
    }

    proptest! {
        #[test]
        fn orient_i64_matches_i128(
            xs in prop::array::uniform3(any::<u64>()),
            ys in prop::array::uniform3(-(1i64 << 62)..=(1i64 << 62)),
        ) {
            let mut xs = xs;
            xs.sort_unstable();
            let p64 = |k: usize| P::new(xs[k], ys[k]);
            let p128 = |k: usize| Pt::new(xs[k], ys[k] as i128);
            prop_assert_eq!(
                orient(p64(0), p64(1), p64(2)),
                orient(p128(0), p128(1), p128(2))
            );
        }

        #[test]
        fn floor_i64_prop(x: f64, y: f64) {
            let want = if x.is_nan() { 0 } else { x.floor() as i64 };
            prop_assert_eq!(floor_i64(x), want);
            if x <= y {
                prop_assert!(floor_i64(x) <= floor_i64(y));
            }
        }

        #[test]
        fn matches_reference(a: u64, b: i128, c: u64, d: i128, shift in 0u32..128) {
            prop_assert_eq!(mul_cmp(a, b, c, d), reference_cmp(a, b, c, d));
            let (b2, d2) = (b >> shift, d >> shift);
            prop_assert_eq!(mul_cmp(a, b2, c, d2), reference_cmp(a, b2, c, d2));
        }
    }
}
