//! strata's LSM store ([`strata::lsm::Store`]) as a table `(key Binary,
//! value Binary)`, sorted by key: the filters, plans and partitions of
//! [`crate::StrataTable`] over byte-string keys.
//!
//! Filters on the key compared with a binary (or string) literal are
//! pushed down exactly ([`ByteKeySet`]); points and `IN` lists are batched
//! lookups ([`Store::get_many`]), ranges are iterators, one per partition,
//! each over a slice of the key range (cut at keys interpolated on the
//! range's first eight bytes).

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BinaryArray, BooleanArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{Expr, Operator};
use strata::lsm::{Options, Store};

use crate::keys::{FilterSet, of_filter};
use crate::scan::{ScanExec, ScanSource, ScanTable};
use crate::{BATCH_ROWS, KEY, VALUE};

/// The upper end of a byte-key range: the key, and whether it is included.
pub type Upper = Option<(Vec<u8>, bool)>;

/// A set of byte-string keys: a range, or a list of points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ByteKeySet {
    /// Keys `>= lo` and below `hi` (`None`: no upper end).
    Range {
        /// Least key (the empty key: no lower end).
        lo: Vec<u8>,
        /// Upper end.
        hi: Upper,
    },
    /// These keys, sorted, without duplicates.
    Points(Vec<Vec<u8>>),
}

/// Whether `k` is below the upper end `hi`.
fn below(k: &[u8], hi: &Upper) -> bool {
    match hi {
        None => true,
        Some((h, true)) => k <= h.as_slice(),
        Some((h, false)) => k < h.as_slice(),
    }
}

/// The lower of two upper ends.
fn min_upper(a: &Upper, b: &Upper) -> Upper {
    match (a, b) {
        (None, x) | (x, None) => x.clone(),
        (Some((x, xi)), Some((y, yi))) => Some(match x.cmp(y) {
            std::cmp::Ordering::Less => (x.clone(), *xi),
            std::cmp::Ordering::Greater => (y.clone(), *yi),
            std::cmp::Ordering::Equal => (x.clone(), *xi && *yi),
        }),
    }
}

impl ByteKeySet {
    /// Every key.
    pub fn all() -> ByteKeySet {
        ByteKeySet::Range {
            lo: Vec::new(),
            hi: None,
        }
    }

    /// No key.
    pub const NONE: ByteKeySet = ByteKeySet::Points(Vec::new());

    /// Whether the set holds no key.
    pub fn is_empty(&self) -> bool {
        match self {
            ByteKeySet::Range { lo, hi } => !below(lo, hi),
            ByteKeySet::Points(p) => p.is_empty(),
        }
    }

    /// Whether `key` is in the set.
    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            ByteKeySet::Range { lo, hi } => key >= lo.as_slice() && below(key, hi),
            ByteKeySet::Points(p) => p.binary_search_by(|x| x.as_slice().cmp(key)).is_ok(),
        }
    }

    /// The keys in both sets.
    pub fn intersect(&self, other: &ByteKeySet) -> ByteKeySet {
        match (self, other) {
            (ByteKeySet::Range { lo: a, hi: b }, ByteKeySet::Range { lo: c, hi: d }) => ByteKeySet::Range {
                lo: a.max(c).clone(),
                hi: min_upper(b, d),
            },
            (ByteKeySet::Points(p), s) | (s, ByteKeySet::Points(p)) => {
                ByteKeySet::Points(p.iter().filter(|k| s.contains(k)).cloned().collect())
            }
        }
    }

    /// The keys in either set, if both are lists of points (a range of one
    /// key is one); `None` otherwise.
    pub fn union(&self, other: &ByteKeySet) -> Option<ByteKeySet> {
        let points = |s: &ByteKeySet| -> Option<Vec<Vec<u8>>> {
            match s {
                ByteKeySet::Points(p) => Some(p.clone()),
                _ if s.is_empty() => Some(Vec::new()),
                ByteKeySet::Range {
                    lo,
                    hi: Some((h, true)),
                } if lo == h => Some(vec![lo.clone()]),
                ByteKeySet::Range { .. } => None,
            }
        };
        match (points(self), points(other)) {
            (Some(mut p), Some(q)) => {
                p.extend(q);
                Some(ByteKeySet::points(p))
            }
            (None, Some(q)) if q.is_empty() => Some(self.clone()),
            (Some(p), None) if p.is_empty() => Some(other.clone()),
            _ => None,
        }
    }

    /// The set a filter selects, or `None` if the filter is not one of the
    /// shapes answered exactly: the key compared by `=`, `<`, `<=`, `>`,
    /// `>=` with a binary or string literal, `BETWEEN`, `IN`, and `AND`s
    /// (and `OR`s of points) of those.
    pub fn of_filter(e: &Expr, key: &str) -> Option<ByteKeySet> {
        of_filter(e, key)
    }
}

impl FilterSet for ByteKeySet {
    type Lit = Vec<u8>;
    type Key = Vec<u8>;

    fn none() -> Self {
        ByteKeySet::NONE
    }

    fn literal(e: &Expr) -> Option<Option<Vec<u8>>> {
        match e {
            Expr::Literal(v, _) => bytes(v),
            // A string cast to binary is its UTF-8 bytes.
            Expr::Cast(c)
                if matches!(
                    c.field.data_type(),
                    DataType::Binary | DataType::LargeBinary | DataType::BinaryView
                ) =>
            {
                Self::literal(&c.expr)
            }
            _ => None,
        }
    }

    fn compare(op: Operator, v: Vec<u8>) -> Option<Self> {
        Some(match op {
            Operator::Eq => ByteKeySet::Range {
                hi: Some((v.clone(), true)),
                lo: v,
            },
            Operator::Lt => ByteKeySet::Range {
                lo: Vec::new(),
                hi: Some((v, false)),
            },
            Operator::LtEq => ByteKeySet::Range {
                lo: Vec::new(),
                hi: Some((v, true)),
            },
            // The least key above v: v followed by a zero byte.
            Operator::Gt => ByteKeySet::Range {
                lo: [v.as_slice(), &[0]].concat(),
                hi: None,
            },
            Operator::GtEq => ByteKeySet::Range { lo: v, hi: None },
            _ => return None,
        })
    }

    fn key_of(v: Vec<u8>) -> Option<Vec<u8>> {
        Some(v)
    }

    fn points(mut p: Vec<Vec<u8>>) -> Self {
        p.sort_unstable();
        p.dedup();
        ByteKeySet::Points(p)
    }

    fn and(&self, other: &Self) -> Self {
        self.intersect(other)
    }

    fn or(&self, other: &Self) -> Option<Self> {
        self.union(other)
    }
}

fn bytes(v: &ScalarValue) -> Option<Option<Vec<u8>>> {
    Some(match v {
        ScalarValue::Null => None,
        ScalarValue::Binary(b) | ScalarValue::LargeBinary(b) | ScalarValue::BinaryView(b) => b.clone(),
        ScalarValue::FixedSizeBinary(_, b) => b.clone(),
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => {
            s.as_ref().map(|s| s.as_bytes().to_vec())
        }
        _ => return None,
    })
}

/// The schema of an [`StrataLsmTable`]: `key Binary, value Binary`.
pub(crate) fn lsm_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY, DataType::Binary, false),
        Field::new(VALUE, DataType::Binary, false),
    ]))
}

/// An LSM store as a table `(key Binary, value Binary)`.
pub type StrataLsmTable = ScanTable<LsmSource>;

/// Opens the LSM store at `path` read-only (a shared lock: writers wait
/// until it is closed; other readers, in this process or others, do not).
pub(crate) fn open_store(path: &Path) -> strata::Result<Store> {
    Store::open(
        path,
        Options {
            read_only: true,
            ..Options::default()
        },
    )
}

impl ScanTable<LsmSource> {
    /// The LSM store at `path` (a local directory), opened read-only.
    pub fn open(path: &Path) -> strata::Result<Self> {
        Ok(Self::new(Arc::new(open_store(path)?), path.display().to_string()))
    }

    /// A table over an open store; `location` names it in plans (and, for
    /// a plan sent to another process, says where to open it).
    pub fn new(store: Arc<Store>, location: String) -> Self {
        Self::with_source(LsmSource { store }, location)
    }

    /// The store (its I/O counters: `store.stats().io`).
    pub fn store(&self) -> &Arc<Store> {
        &self.source.store
    }
}

/// What one partition of an LSM scan reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BytePart {
    /// These keys, by batched lookups.
    Points(Vec<Vec<u8>>),
    /// Keys `>= lo` below `hi`, by an iterator.
    Range(Vec<u8>, Upper),
}

/// The first eight bytes of `k` as a big-endian number (zeros after its
/// end).
fn prefix(k: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    for (d, s) in a.iter_mut().zip(k) {
        *d = *s;
    }
    u64::from_be_bytes(a)
}

/// The partitions of a scan of `keys`: points in up to `n` runs of
/// consecutive keys; a range in up to `n` slices cut at keys spread evenly
/// over the range's eight-byte prefixes (one slice when a limit makes the
/// scan stop early).
pub(crate) fn split(keys: &ByteKeySet, limit: Option<usize>, n: usize) -> Vec<BytePart> {
    if keys.is_empty() || limit == Some(0) {
        return Vec::new();
    }
    let n = if limit.is_some() { 1 } else { n.max(1) };
    match keys {
        ByteKeySet::Points(p) => {
            let per = p.len().div_ceil(n).max(1);
            p.chunks(per).map(|c| BytePart::Points(c.to_vec())).collect()
        }
        ByteKeySet::Range { lo, hi } => {
            if let Some((h, true)) = hi
                && h == lo
            {
                return vec![BytePart::Points(vec![lo.clone()])];
            }
            let a = u128::from(prefix(lo));
            let b = u128::from(hi.as_ref().map_or(u64::MAX, |(h, _)| prefix(h)));
            let mut cuts: Vec<Vec<u8>> = Vec::new();
            for i in 1..n as u128 {
                let cut = (a + (b.saturating_sub(a)) * i / n as u128) as u64;
                let mut c = cut.to_be_bytes().to_vec();
                while c.last() == Some(&0) {
                    c.pop();
                }
                // Strictly increasing, above lo and below the upper end.
                if c.as_slice() > lo.as_slice()
                    && below(&c, hi)
                    && cuts.last().is_none_or(|l| l.as_slice() < c.as_slice())
                {
                    cuts.push(c);
                }
            }
            let mut parts = Vec::with_capacity(cuts.len() + 1);
            let mut start = lo.clone();
            for c in cuts {
                parts.push(BytePart::Range(
                    std::mem::replace(&mut start, c.clone()),
                    Some((c, false)),
                ));
            }
            parts.push(BytePart::Range(start, hi.clone()));
            parts
        }
    }
}

/// The scan of a [`StrataLsmTable`] (see [`crate::ScanExec`]).
pub type StrataLsmScanExec = ScanExec<LsmSource>;

/// What a [`StrataLsmScanExec`] reads: an LSM store.
#[derive(Clone)]
pub struct LsmSource {
    pub(crate) store: Arc<Store>,
}

impl LsmSource {
    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
}

/// A key for plans: printable bytes as text, others in hex.
fn show(k: &[u8]) -> String {
    if k.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("'{}'", String::from_utf8_lossy(k))
    } else {
        let hex: String = k.iter().map(|b| format!("{b:02x}")).collect();
        format!("x'{hex}'")
    }
}

impl ScanSource for LsmSource {
    type Keys = ByteKeySet;
    type Part = BytePart;
    const NAME: &'static str = "StrataLsmScanExec";

    fn table_schema() -> SchemaRef {
        lsm_schema()
    }

    /// A row per key range (`point` false; `hi` null: no upper end) or per
    /// key to look up (`point` true, `lo == hi`).
    fn part_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("lo", DataType::Binary, false),
            Field::new("hi", DataType::Binary, true),
            Field::new("hi_inclusive", DataType::Boolean, false),
            Field::new("point", DataType::Boolean, false),
        ]))
    }

    fn split(keys: &ByteKeySet, limit: Option<usize>, n: usize) -> Vec<BytePart> {
        split(keys, limit, n)
    }

    fn part_batch(parts: &[BytePart]) -> DfResult<RecordBatch> {
        let mut lo: Vec<&[u8]> = Vec::new();
        let mut hi: Vec<Option<&[u8]>> = Vec::new();
        let (mut inclusive, mut point) = (Vec::new(), Vec::new());
        for p in parts {
            match p {
                BytePart::Points(keys) => {
                    for k in keys {
                        lo.push(k);
                        hi.push(Some(k));
                        inclusive.push(true);
                        point.push(true);
                    }
                }
                BytePart::Range(a, b) => {
                    lo.push(a);
                    hi.push(b.as_ref().map(|(h, _)| h.as_slice()));
                    inclusive.push(b.as_ref().is_some_and(|(_, i)| *i));
                    point.push(false);
                }
            }
        }
        Ok(RecordBatch::try_new(
            Self::part_schema(),
            vec![
                Arc::new(BinaryArray::from_vec(lo)),
                Arc::new(BinaryArray::from_opt_vec(hi)),
                Arc::new(BooleanArray::from(inclusive)),
                Arc::new(BooleanArray::from(point)),
            ],
        )?)
    }

    /// Runs of points become one part.
    fn parts_of(batches: &[RecordBatch]) -> DfResult<Vec<BytePart>> {
        let mut parts = Vec::new();
        let mut points = Vec::new();
        for b in batches {
            let col = |i: usize| b.columns().get(i).map(|c| c.as_any());
            let (Some(lo), Some(hi), Some(inclusive), Some(point)) = (
                col(0).and_then(|c| c.downcast_ref::<BinaryArray>()),
                col(1).and_then(|c| c.downcast_ref::<BinaryArray>()),
                col(2).and_then(|c| c.downcast_ref::<BooleanArray>()),
                col(3).and_then(|c| c.downcast_ref::<BooleanArray>()),
            ) else {
                return Err(DataFusionError::Internal(format!(
                    "StrataLsmScanExec: its input is not part descriptors: {}",
                    b.schema()
                )));
            };
            for r in 0..b.num_rows() {
                if point.value(r) {
                    points.push(lo.value(r).to_vec());
                } else {
                    if !points.is_empty() {
                        parts.push(BytePart::Points(std::mem::take(&mut points)));
                    }
                    let upper = (!hi.is_null(r)).then(|| (hi.value(r).to_vec(), inclusive.value(r)));
                    parts.push(BytePart::Range(lo.value(r).to_vec(), upper));
                }
            }
        }
        if !points.is_empty() {
            parts.push(BytePart::Points(points));
        }
        Ok(parts)
    }

    fn read(
        &self,
        part: &BytePart,
        left: &mut usize,
        schema: &SchemaRef,
        columns: &[usize],
        emit: &mut dyn FnMut(DfResult<RecordBatch>) -> strata::Result<()>,
    ) -> strata::Result<()> {
        read_part(&self.store, part, left, &mut |recs: &[Entry]| {
            emit(batch(schema, columns, recs))
        })
    }

    fn describe(&self, location: &str) -> String {
        format!("store={location}")
    }

    fn show_keys(keys: &ByteKeySet) -> String {
        match keys {
            ByteKeySet::Range { lo, hi } => {
                let hi = match hi {
                    None => String::new(),
                    Some((h, true)) => format!("={}", show(h)),
                    Some((h, false)) => show(h),
                };
                format!("{}..{hi}", show(lo))
            }
            ByteKeySet::Points(p) => format!("{} points", p.len()),
        }
    }

    fn all_keys() -> ByteKeySet {
        ByteKeySet::all()
    }

    fn keys_of_filter(e: &Expr) -> Option<ByteKeySet> {
        ByteKeySet::of_filter(e, KEY)
    }

    fn intersect(a: &ByteKeySet, b: &ByteKeySet) -> ByteKeySet {
        a.intersect(b)
    }
}

type Entry = (Vec<u8>, Vec<u8>);

/// Reads `part`, handing `emit` the entries in key order, batch by batch,
/// `left` of them at most (counting `left` down).
fn read_part(
    store: &Store,
    part: &BytePart,
    left: &mut usize,
    emit: &mut dyn FnMut(&[Entry]) -> strata::Result<()>,
) -> strata::Result<()> {
    if *left == 0 {
        return Ok(());
    }
    let mut recs: Vec<Entry> = Vec::with_capacity(BATCH_ROWS.min(*left));
    match part {
        BytePart::Points(keys) => {
            for chunk in keys.chunks(BATCH_ROWS) {
                let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
                let values = store.get_many(&refs)?;
                recs.clear();
                recs.extend(
                    chunk
                        .iter()
                        .zip(values)
                        .filter_map(|(k, v)| v.map(|v| (k.clone(), v)))
                        .take(*left),
                );
                *left -= recs.len();
                if !recs.is_empty() {
                    emit(&recs)?;
                }
                if *left == 0 {
                    break;
                }
            }
        }
        BytePart::Range(lo, hi) => {
            let mut it = store.iter()?;
            it.seek(lo)?;
            while *left > 0 && it.valid() && below(it.key(), hi) {
                recs.push((it.key().to_vec(), it.value().to_vec()));
                *left -= 1;
                if recs.len() == BATCH_ROWS {
                    emit(&recs)?;
                    recs.clear();
                }
                it.next()?;
            }
            if !recs.is_empty() {
                emit(&recs)?;
            }
        }
    }
    Ok(())
}

fn batch(schema: &SchemaRef, columns: &[usize], recs: &[Entry]) -> DfResult<RecordBatch> {
    let arrays: Vec<ArrayRef> = columns
        .iter()
        .map(|&c| -> ArrayRef {
            if c == 0 {
                Arc::new(BinaryArray::from_iter_values(recs.iter().map(|r| r.0.as_slice())))
            } else {
                Arc::new(BinaryArray::from_iter_values(recs.iter().map(|r| r.1.as_slice())))
            }
        })
        .collect();
    let opts = RecordBatchOptions::new().with_row_count(Some(recs.len()));
    Ok(RecordBatch::try_new_with_options(schema.clone(), arrays, &opts)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn of(e: Expr) -> Option<ByteKeySet> {
        ByteKeySet::of_filter(&e, "key")
    }

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn byte_filters() {
        let k = |s: &str| lit(ScalarValue::Binary(Some(b(s))));
        assert_eq!(
            of(col("key").eq(k("ab"))),
            Some(ByteKeySet::Range {
                lo: b("ab"),
                hi: Some((b("ab"), true))
            })
        );
        let gt = of(col("key").gt(k("ab"))).unwrap();
        assert!(!gt.contains(b"ab") && gt.contains(b"ab\0") && gt.contains(b"b"));
        let lt = of(k("ab").gt(col("key"))).unwrap();
        assert!(lt.contains(b"aa") && lt.contains(b"a") && !lt.contains(b"ab"));
        let r = of(col("key").between(k("b"), k("d"))).unwrap();
        assert!(r.contains(b"b") && r.contains(b"d") && !r.contains(b"d\0") && !r.contains(b"a"));
        assert_eq!(
            of(col("key").in_list(vec![k("z"), k("a"), k("z")], false)),
            Some(ByteKeySet::Points(vec![b("a"), b("z")]))
        );
        assert_eq!(
            of(col("key").eq(k("a")).or(col("key").eq(lit("c")))),
            Some(ByteKeySet::Points(vec![b("a"), b("c")]))
        );
        assert!(
            of(col("key").gt_eq(k("b")).and(col("key").lt(k("b"))))
                .unwrap()
                .is_empty()
        );
        assert_eq!(of(col("value").eq(k("a"))), None);
        assert_eq!(of(col("key").lt(k("a")).or(col("key").gt(k("b")))), None);
        assert_eq!(of(col("key").eq(lit(3u64))), None);
    }

    #[test]
    fn ranges_split_into_ordered_slices_covering_them() {
        let keys: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| format!("k{:05}", i * 37 % 2000).into_bytes())
            .chain([vec![], vec![0], vec![255; 9], b"k".to_vec()])
            .collect();
        let sets = [
            ByteKeySet::all(),
            ByteKeySet::Range {
                lo: b("k00100"),
                hi: Some((b("k01500"), false)),
            },
            ByteKeySet::Range {
                lo: b("k"),
                hi: Some((b("k"), true)),
            },
            ByteKeySet::Range {
                lo: vec![0],
                hi: Some((vec![0, 0, 1], true)),
            },
        ];
        for set in &sets {
            for n in [1, 2, 3, 8] {
                let parts = split(set, None, n);
                assert!(parts.len() <= n.max(1), "{set:?} {n}: {parts:?}");
                for k in &keys {
                    let holders = parts
                        .iter()
                        .filter(|p| match p {
                            BytePart::Points(p) => p.contains(k),
                            BytePart::Range(lo, hi) => k >= lo && below(k, hi),
                        })
                        .count();
                    assert_eq!(
                        holders,
                        usize::from(set.contains(k)),
                        "{set:?} {n}: {k:?} in {parts:?}"
                    );
                }
            }
        }
        assert_eq!(split(&ByteKeySet::all(), None, 4).len(), 4);
    }
}
