//! Which keys a conjunction of filters on the key column selects.
//!
//! Filters of these shapes are answered exactly (`Exact` pushdown): the
//! key column compared with an integer literal by `=`, `<`, `<=`, `>`,
//! `>=` (either side), `key BETWEEN a AND b`, `key IN (…)` of literals,
//! and `AND`s of those. Anything else (a cast of the key, `NOT`, `OR`,
//! another column) is left to DataFusion (`Unsupported`), which filters the
//! rows the scan returns.

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator, expr::InList};

/// A set of u64 keys: all keys of an inclusive range, or a list of points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySet {
    /// Keys `lo..=hi` (empty if `lo > hi`).
    Range {
        /// Least key.
        lo: u64,
        /// Greatest key.
        hi: u64,
    },
    /// These keys, sorted, without duplicates.
    Points(Vec<u64>),
}

impl KeySet {
    /// Every key.
    pub const ALL: KeySet = KeySet::Range { lo: 0, hi: u64::MAX };
    /// No key.
    pub const NONE: KeySet = KeySet::Points(Vec::new());

    /// Whether the set holds no key.
    pub fn is_empty(&self) -> bool {
        match self {
            KeySet::Range { lo, hi } => lo > hi,
            KeySet::Points(p) => p.is_empty(),
        }
    }

    /// Whether `key` is in the set.
    pub fn contains(&self, key: u64) -> bool {
        match self {
            KeySet::Range { lo, hi } => *lo <= key && key <= *hi,
            KeySet::Points(p) => p.binary_search(&key).is_ok(),
        }
    }

    /// The keys in both sets.
    pub fn intersect(&self, other: &KeySet) -> KeySet {
        match (self, other) {
            (KeySet::Range { lo: a, hi: b }, KeySet::Range { lo: c, hi: d }) => KeySet::Range {
                lo: *a.max(c),
                hi: *b.min(d),
            },
            (KeySet::Points(p), r @ KeySet::Range { .. }) | (r @ KeySet::Range { .. }, KeySet::Points(p)) => {
                KeySet::Points(p.iter().copied().filter(|&k| r.contains(k)).collect())
            }
            (KeySet::Points(p), q @ KeySet::Points(_)) => {
                KeySet::Points(p.iter().copied().filter(|&k| q.contains(k)).collect())
            }
        }
    }

    /// The keys in either set, if they are a range or a list of points:
    /// two lists, or two ranges that overlap or touch (a list and a range,
    /// or two ranges apart, are `None`).
    pub fn union(&self, other: &KeySet) -> Option<KeySet> {
        if self.is_empty() {
            return Some(other.clone());
        }
        if other.is_empty() {
            return Some(self.clone());
        }
        // A single key is a list of one.
        let single = |s: &KeySet| match s {
            &KeySet::Range { lo, hi } if lo == hi => KeySet::Points(vec![lo]),
            s => s.clone(),
        };
        match (&single(self), &single(other)) {
            (KeySet::Points(p), KeySet::Points(q)) => {
                let mut all: Vec<u64> = p.iter().chain(q).copied().collect();
                all.sort_unstable();
                all.dedup();
                Some(KeySet::Points(all))
            }
            (&KeySet::Range { lo: a, hi: b }, &KeySet::Range { lo: c, hi: d })
                if u128::from(a.max(c)) <= u128::from(b.min(d)) + 1 =>
            {
                Some(KeySet::Range {
                    lo: a.min(c),
                    hi: b.max(d),
                })
            }
            _ => None,
        }
    }

    /// The set a filter selects, or `None` if the filter is not one of the
    /// shapes answered exactly (see the module documentation).
    pub fn of_filter(e: &Expr, key: &str) -> Option<KeySet> {
        of_filter(e, key)
    }
}

impl FilterSet for KeySet {
    type Lit = i128;
    type Key = u64;

    fn none() -> Self {
        KeySet::NONE
    }

    fn literal(e: &Expr) -> Option<Option<i128>> {
        literal(e)
    }

    fn compare(op: Operator, v: i128) -> Option<Self> {
        compare(op, v)
    }

    fn key_of(v: i128) -> Option<u64> {
        // Values out of u64 match no key.
        u64::try_from(v).ok()
    }

    fn points(mut p: Vec<u64>) -> Self {
        p.sort_unstable();
        p.dedup();
        KeySet::Points(p)
    }

    fn and(&self, other: &Self) -> Self {
        self.intersect(other)
    }

    fn or(&self, other: &Self) -> Option<Self> {
        self.union(other)
    }
}

/// A set of keys a conjunction of filters can select: what
/// [`of_filter`] needs of it. [`KeySet`] (u64 keys) and
/// [`crate::lsm::ByteKeySet`] (byte strings) are two.
pub(crate) trait FilterSet: Sized {
    /// A literal's value as a comparison sees it.
    type Lit;
    /// A key.
    type Key;
    /// No key.
    fn none() -> Self;
    /// The value of a literal of the key's type (possibly cast):
    /// `Some(None)` for a NULL, `None` if `e` is not one.
    fn literal(e: &Expr) -> Option<Option<Self::Lit>>;
    /// The keys `key op v` selects (`None`: an operator not answered).
    fn compare(op: Operator, v: Self::Lit) -> Option<Self>;
    /// The key equal to `v`, if any key is.
    fn key_of(v: Self::Lit) -> Option<Self::Key>;
    /// These keys (in any order, duplicates allowed).
    fn points(p: Vec<Self::Key>) -> Self;
    /// The keys in both.
    fn and(&self, other: &Self) -> Self;
    /// The keys in either, if the set can hold them.
    fn or(&self, other: &Self) -> Option<Self>;
}

/// The set a filter on the column `key` selects, or `None` if the filter is
/// not one of the shapes answered exactly (see the module documentation).
pub(crate) fn of_filter<S: FilterSet>(e: &Expr, key: &str) -> Option<S> {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => Some(of_filter::<S>(left, key)?.and(&of_filter(right, key)?)),
        // DataFusion writes a short `IN` list as `key = a OR key = b …`.
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => of_filter::<S>(left, key)?.or(&of_filter(right, key)?),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (op, lit) = if is_key(left, key) {
                (*op, S::literal(right)?)
            } else if is_key(right, key) {
                (op.swap()?, S::literal(left)?)
            } else {
                return None;
            };
            // A comparison with NULL is never true.
            let Some(v) = lit else { return Some(S::none()) };
            S::compare(op, v)
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) if is_key(expr, key) => {
            let (Some(lo), Some(hi)) = (S::literal(low)?, S::literal(high)?) else {
                return Some(S::none());
            };
            Some(S::compare(Operator::GtEq, lo)?.and(&S::compare(Operator::LtEq, hi)?))
        }
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) if is_key(expr, key) => {
            let mut points = Vec::with_capacity(list.len());
            for item in list {
                // NULLs in the list match nothing.
                if let Some(k) = S::literal(item)?.and_then(S::key_of) {
                    points.push(k);
                }
            }
            Some(S::points(points))
        }
        _ => None,
    }
}

/// The keys `key op v` selects, `v` any integer.
fn compare(op: Operator, v: i128) -> Option<KeySet> {
    let max = i128::from(u64::MAX);
    let range = |lo: i128, hi: i128| {
        let (lo, hi) = (lo.max(0), hi.min(max));
        if lo > hi {
            KeySet::NONE
        } else {
            // Both within 0..=u64::MAX here.
            KeySet::Range {
                lo: lo as u64,
                hi: hi as u64,
            }
        }
    };
    Some(match op {
        Operator::Eq => range(v, v),
        Operator::Lt => range(0, v - 1),
        Operator::LtEq => range(0, v),
        Operator::Gt => range(v + 1, max),
        Operator::GtEq => range(v, max),
        _ => return None,
    })
}

/// Whether `e` is the key column itself (no cast: a cast of the key
/// changes which rows compare true).
fn is_key(e: &Expr, key: &str) -> bool {
    matches!(e, Expr::Column(c) if c.name == key)
}

/// The value of an integer literal (possibly cast to another integer
/// type): `Some(None)` for a NULL, `None` if `e` is not one.
fn literal(e: &Expr) -> Option<Option<i128>> {
    match e {
        Expr::Literal(v, _) => integer(v),
        Expr::Cast(c) => literal(&c.expr),
        _ => None,
    }
}

fn integer(v: &ScalarValue) -> Option<Option<i128>> {
    Some(match v {
        ScalarValue::Null => None,
        ScalarValue::UInt8(x) => x.map(i128::from),
        ScalarValue::UInt16(x) => x.map(i128::from),
        ScalarValue::UInt32(x) => x.map(i128::from),
        ScalarValue::UInt64(x) => x.map(i128::from),
        ScalarValue::Int8(x) => x.map(i128::from),
        ScalarValue::Int16(x) => x.map(i128::from),
        ScalarValue::Int32(x) => x.map(i128::from),
        ScalarValue::Int64(x) => x.map(i128::from),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn of(e: Expr) -> Option<KeySet> {
        KeySet::of_filter(&e, "key")
    }

    fn range(lo: u64, hi: u64) -> Option<KeySet> {
        Some(KeySet::Range { lo, hi })
    }

    #[test]
    fn comparisons_on_either_side() {
        assert_eq!(of(col("key").eq(lit(5u64))), range(5, 5));
        assert_eq!(of(lit(5i64).eq(col("key"))), range(5, 5));
        assert_eq!(of(col("key").lt(lit(5i32))), range(0, 4));
        assert_eq!(of(lit(5i32).gt(col("key"))), range(0, 4));
        assert_eq!(
            of(col("key").lt_eq(lit(5u8))),
            range(5, 5).map(|_| KeySet::Range { lo: 0, hi: 5 })
        );
        assert_eq!(of(col("key").gt(lit(u64::MAX))), Some(KeySet::NONE));
        assert_eq!(of(col("key").gt_eq(lit(u64::MAX))), range(u64::MAX, u64::MAX));
        assert_eq!(of(col("key").lt(lit(0u64))), Some(KeySet::NONE));
        assert_eq!(of(col("key").gt(lit(-3i64))), Some(KeySet::ALL));
        assert_eq!(of(col("key").eq(lit(-3i64))), Some(KeySet::NONE));
        assert_eq!(
            of(col("key").eq(lit(ScalarValue::UInt64(None)))),
            Some(KeySet::NONE)
        );
        // Not answered exactly: another column, a cast key, another operator, OR.
        assert_eq!(of(col("value").eq(lit(5u64))), None);
        assert_eq!(of(col("key").not_eq(lit(5u64))), None);
        assert_eq!(
            of(col("key")
                .eq(lit(5u64))
                .or(col("key").eq(lit(7u64)))
                .or(col("key").eq(lit(5u64)))),
            Some(KeySet::Points(vec![5, 7]))
        );
        assert_eq!(
            of(col("key").lt(lit(5u64)).or(col("key").gt_eq(lit(5u64)))),
            Some(KeySet::ALL)
        );
        assert_eq!(of(col("key").lt(lit(5u64)).or(col("key").gt(lit(5u64)))), None);
        assert_eq!(of(col("key").lt(lit(5u64)).or(col("key").eq(lit(9u64)))), None);
        assert_eq!(of(col("key").eq(lit(5u64)).or(col("value").eq(lit(7u64)))), None);
        assert_eq!(of(lit("a").eq(col("key"))), None);
    }

    #[test]
    fn between_in_and_conjunctions() {
        assert_eq!(of(col("key").between(lit(3u64), lit(9u64))), range(3, 9));
        assert_eq!(
            of(col("key").between(lit(9u64), lit(3u64))).map(|s| s.is_empty()),
            Some(true)
        );
        assert_eq!(of(col("key").not_between(lit(3u64), lit(9u64))), None);
        assert_eq!(
            of(col("key").in_list(vec![lit(9u64), lit(3u64), lit(9u64), lit(-1i64)], false)),
            Some(KeySet::Points(vec![3, 9]))
        );
        assert_eq!(of(col("key").in_list(vec![lit(3u64)], true)), None);
        assert_eq!(
            of(col("key").gt(lit(2u64)).and(col("key").lt_eq(lit(7u64)))),
            range(3, 7)
        );
        assert_eq!(
            of(col("key")
                .in_list(vec![lit(1u64), lit(5u64), lit(8u64)], false)
                .and(col("key").between(lit(2u64), lit(8u64)))),
            Some(KeySet::Points(vec![5, 8]))
        );
        // A conjunction with a part not answered exactly is not answered.
        assert_eq!(of(col("key").gt(lit(2u64)).and(col("value").lt(lit(7u64)))), None);
    }

    #[test]
    fn sets_intersect_and_contain() {
        let r = KeySet::Range { lo: 3, hi: 9 };
        assert!(r.contains(3) && r.contains(9) && !r.contains(10));
        assert_eq!(
            r.intersect(&KeySet::Points(vec![1, 3, 10])),
            KeySet::Points(vec![3])
        );
        assert!(r.intersect(&KeySet::Range { lo: 10, hi: 20 }).is_empty());
        assert!(KeySet::NONE.is_empty() && !KeySet::ALL.is_empty());
    }
}
