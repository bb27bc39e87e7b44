//! strata indexes as DataFusion tables (issue 22).
//!
//! [`StrataTable`] is a [`TableProvider`] over a static strata index (any
//! kind `strata::registry::open` opens, on a local disk or at
//! `s3://bucket/prefix`), with the columns `key UInt64` and `value UInt64`,
//! sorted by key:
//!
//! - filters on the key (`=`, `<`, `<=`, `>`, `>=`, `BETWEEN`, `IN` and
//!   their `AND`s; [`KeySet`]) are pushed down **exactly**: the scan returns
//!   only the rows they select, so DataFusion adds no filter of its own;
//! - points and `IN` lists are answered by batched lookups
//!   ([`strata::index::Index::get_many`]); ranges by cursors, one per
//!   partition, each over a slice of the key range;
//! - the projection and the limit are pushed down (a limited range is one
//!   partition, read in key order until the limit);
//! - every partition's rows are in key order, and the plan says so.
//!
//! [`StrataLsmTable`] does the same over strata's LSM store, with the
//! columns `key Binary` and `value Binary` ([`ByteKeySet`]).
//!
//! The scans ([`StrataScanExec`], [`StrataLsmScanExec`]) run strata's
//! blocking reads on tokio's blocking threads, sending record batches of up
//! to [`BATCH_ROWS`] rows through a channel of two. [`wire`] carries tables
//! and scans to other processes (`strata-ballista` runs them on a
//! Ballista cluster).

#![deny(clippy::unwrap_used, clippy::expect_used)]

mod keys;
mod lsm;
mod scan;
pub mod wire;

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use strata::index::{Index, OpenOptions, Record};

pub use keys::KeySet;
pub use lsm::{ByteKeySet, BytePart, LsmSource, StrataLsmScanExec, StrataLsmTable, Upper};
pub use scan::{ScanExec, ScanSource, ScanTable};

/// Rows per record batch a scan sends.
pub const BATCH_ROWS: usize = 8192;

/// The name of the key column.
pub const KEY: &str = "key";
/// The name of the value column.
pub const VALUE: &str = "value";

fn df_err(e: strata::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// The schema of a [`StrataTable`]: `key UInt64, value UInt64`.
fn table_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY, DataType::UInt64, false),
        Field::new(VALUE, DataType::UInt64, false),
    ]))
}

/// A static strata index as a table `(key UInt64, value UInt64)`.
pub type StrataTable = ScanTable<IndexSource>;

impl ScanTable<IndexSource> {
    /// The index at `path` (a local directory or `s3://bucket/prefix`),
    /// opened with `opts`.
    pub fn open(path: &Path, opts: &OpenOptions) -> strata::Result<Self> {
        let index = strata::registry::open(path, opts)?;
        Ok(Self::new(Arc::from(index), path.display().to_string()))
    }

    /// A table over an open index; `location` names it in plans.
    pub fn new(index: Arc<dyn Index>, location: String) -> Self {
        Self::with_source(IndexSource { index }, location)
    }

    /// The index (its I/O counters: [`Index::io`]).
    pub fn index(&self) -> &Arc<dyn Index> {
        &self.source.index
    }
}

/// What one partition of an index scan reads (or a piece of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// These keys, by batched lookups.
    Points(Vec<u64>),
    /// Keys `lo..=hi`, by a cursor.
    Range(u64, u64),
}

/// The scan of a [`StrataTable`] (see [`scan`](crate::ScanExec)).
pub type StrataScanExec = ScanExec<IndexSource>;

/// What a [`StrataScanExec`] reads: an index.
#[derive(Clone)]
pub struct IndexSource {
    pub(crate) index: Arc<dyn Index>,
}

impl IndexSource {
    /// The index (its I/O counters: [`Index::io`]).
    pub fn index(&self) -> &Arc<dyn Index> {
        &self.index
    }
}

impl ScanSource for IndexSource {
    type Keys = KeySet;
    type Part = Part;
    const NAME: &'static str = "StrataScanExec";

    fn table_schema() -> SchemaRef {
        table_schema()
    }

    /// A row per key range (`point` false) or per key to look up (`point`
    /// true, `lo == hi`).
    fn part_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("lo", DataType::UInt64, false),
            Field::new("hi", DataType::UInt64, false),
            Field::new("point", DataType::Boolean, false),
        ]))
    }

    fn split(keys: &KeySet, limit: Option<usize>, n: usize) -> Vec<Part> {
        split(keys, limit, n)
    }

    fn part_batch(parts: &[Part]) -> DfResult<RecordBatch> {
        let (mut lo, mut hi, mut point) = (Vec::new(), Vec::new(), Vec::new());
        for p in parts {
            match p {
                Part::Points(keys) => {
                    lo.extend_from_slice(keys);
                    hi.extend_from_slice(keys);
                    point.extend(std::iter::repeat_n(true, keys.len()));
                }
                &Part::Range(a, b) => {
                    lo.push(a);
                    hi.push(b);
                    point.push(false);
                }
            }
        }
        Ok(RecordBatch::try_new(
            Self::part_schema(),
            vec![
                Arc::new(UInt64Array::from(lo)),
                Arc::new(UInt64Array::from(hi)),
                Arc::new(BooleanArray::from(point)),
            ],
        )?)
    }

    /// Runs of points become one part.
    fn parts_of(batches: &[RecordBatch]) -> DfResult<Vec<Part>> {
        let mut parts = Vec::new();
        let mut points = Vec::new();
        for b in batches {
            let col = |i: usize| b.columns().get(i).map(|c| c.as_any());
            let (Some(lo), Some(hi), Some(point)) = (
                col(0).and_then(|c| c.downcast_ref::<UInt64Array>()),
                col(1).and_then(|c| c.downcast_ref::<UInt64Array>()),
                col(2).and_then(|c| c.downcast_ref::<BooleanArray>()),
            ) else {
                return Err(DataFusionError::Internal(format!(
                    "StrataScanExec: its input is not part descriptors: {}",
                    b.schema()
                )));
            };
            for r in 0..b.num_rows() {
                if point.value(r) {
                    points.push(lo.value(r));
                } else {
                    if !points.is_empty() {
                        parts.push(Part::Points(std::mem::take(&mut points)));
                    }
                    parts.push(Part::Range(lo.value(r), hi.value(r)));
                }
            }
        }
        if !points.is_empty() {
            parts.push(Part::Points(points));
        }
        Ok(parts)
    }

    fn read(
        &self,
        part: &Part,
        left: &mut usize,
        schema: &SchemaRef,
        columns: &[usize],
        emit: &mut dyn FnMut(DfResult<RecordBatch>) -> strata::Result<()>,
    ) -> strata::Result<()> {
        read_part(self.index.as_ref(), part, left, &mut |recs: &[Record]| {
            emit(batch(schema, columns, recs))
        })
    }

    fn describe(&self, location: &str) -> String {
        format!("index={location} ({})", self.index.kind())
    }

    fn show_keys(keys: &KeySet) -> String {
        match keys {
            k if *k == KeySet::ALL => "all".to_string(),
            KeySet::Range { lo, hi } => format!("{lo}..={hi}"),
            KeySet::Points(p) => format!("{} points", p.len()),
        }
    }

    fn all_keys() -> KeySet {
        KeySet::ALL
    }

    fn keys_of_filter(e: &Expr) -> Option<KeySet> {
        KeySet::of_filter(e, KEY)
    }

    fn intersect(a: &KeySet, b: &KeySet) -> KeySet {
        a.intersect(b)
    }
}

/// The partitions of a scan of `keys`: points in up to `n` runs of
/// consecutive keys; a range in up to `n` slices of equal key width (one,
/// when a limit makes the scan stop early: the first rows in key order
/// are the ones wanted).
fn split(keys: &KeySet, limit: Option<usize>, n: usize) -> Vec<Part> {
    if keys.is_empty() || limit == Some(0) {
        return Vec::new();
    }
    match keys {
        // One key: a lookup, which reads no page past the key's.
        &KeySet::Range { lo, hi } if lo == hi => vec![Part::Points(vec![lo])],
        KeySet::Points(p) => {
            let per = p.len().div_ceil(if limit.is_some() { 1 } else { n });
            p.chunks(per.max(1)).map(|c| Part::Points(c.to_vec())).collect()
        }
        &KeySet::Range { lo, hi } => {
            let n = if limit.is_some() { 1 } else { n };
            let width = (u128::from(hi) - u128::from(lo) + 1).div_ceil(n as u128);
            let mut parts = Vec::with_capacity(n);
            let mut at = u128::from(lo);
            while at <= u128::from(hi) {
                let end = (at + width - 1).min(u128::from(hi));
                // Both within lo..=hi.
                parts.push(Part::Range(at as u64, end as u64));
                at = end + 1;
            }
            parts
        }
    }
}

/// Reads `part`, handing `emit` the records in key order, batch by batch,
/// `left` of them at most (counting `left` down).
fn read_part(
    index: &dyn Index,
    part: &Part,
    left: &mut usize,
    emit: &mut dyn FnMut(&[Record]) -> strata::Result<()>,
) -> strata::Result<()> {
    if *left == 0 {
        return Ok(());
    }
    match part {
        Part::Points(keys) => {
            let mut values = Vec::with_capacity(BATCH_ROWS);
            let mut recs = Vec::with_capacity(BATCH_ROWS);
            for chunk in keys.chunks(BATCH_ROWS) {
                values.clear();
                index.get_many(chunk, &mut values)?;
                recs.clear();
                recs.extend(
                    chunk
                        .iter()
                        .zip(&values)
                        .filter_map(|(&k, v)| v.map(|v| (k, v)))
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
        &Part::Range(lo, hi) => {
            // Record by record (the cursor reads a page when it enters it), so
            // the pages read are those of the range and, to see it end, the
            // one holding the first key past it.
            let mut cursor = index.cursor()?;
            cursor.seek(lo)?;
            let mut recs = Vec::with_capacity(BATCH_ROWS.min(*left));
            while *left > 0 {
                match cursor.next()? {
                    Some(r) if r.0 <= hi => {
                        recs.push(r);
                        *left -= 1;
                        if recs.len() == BATCH_ROWS {
                            emit(&recs)?;
                            recs.clear();
                        }
                    }
                    _ => break,
                }
            }
            if !recs.is_empty() {
                emit(&recs)?;
            }
        }
    }
    Ok(())
}

/// A record batch of `recs` with the `columns` (0: key, 1: value) of
/// `schema`.
fn batch(schema: &SchemaRef, columns: &[usize], recs: &[Record]) -> DfResult<RecordBatch> {
    let arrays: Vec<ArrayRef> = columns
        .iter()
        .map(|&c| -> ArrayRef {
            if c == 0 {
                Arc::new(UInt64Array::from_iter_values(recs.iter().map(|r| r.0)))
            } else {
                Arc::new(UInt64Array::from_iter_values(recs.iter().map(|r| r.1)))
            }
        })
        .collect();
    let opts = RecordBatchOptions::new().with_row_count(Some(recs.len()));
    Ok(RecordBatch::try_new_with_options(schema.clone(), arrays, &opts)?)
}

/// The plan as a [`StrataScanExec`], if it is one.
pub fn as_scan(plan: &dyn ExecutionPlan) -> Option<&StrataScanExec> {
    (plan as &dyn Any).downcast_ref::<StrataScanExec>()
}

/// The plan as a [`StrataLsmScanExec`], if it is one.
pub fn as_lsm_scan(plan: &dyn ExecutionPlan) -> Option<&StrataLsmScanExec> {
    (plan as &dyn Any).downcast_ref::<StrataLsmScanExec>()
}

/// Whether `path` is an LSM store's directory (it holds the store's
/// manifest).
pub fn is_lsm(path: &Path) -> bool {
    path.join(strata::lsm::LSM_MANIFEST_FILE).is_file()
}

/// What [`run_sql`] returns: the rows as a text table, and per table its
/// name, the pages and the read calls its index read.
#[derive(Debug, Clone)]
pub struct SqlOutput {
    /// The result, formatted as a table.
    pub text: String,
    /// `(table, pages read, read calls)` of each table (from its opening
    /// on).
    pub io: Vec<(String, u64, u64)>,
    /// The rows of the result.
    pub rows: usize,
    /// The query's time, from planning to the last row (the tables were
    /// opened before).
    pub elapsed: std::time::Duration,
}

/// Runs `sql` over the strata indexes and LSM stores `tables` (name,
/// location: an index directory or `s3://bucket/prefix`, or an LSM store's
/// directory) with `partitions` target partitions, on a runtime of its own.
pub fn run_sql(
    tables: &[(String, std::path::PathBuf)],
    sql: &str,
    partitions: usize,
) -> strata::Result<SqlOutput> {
    use datafusion::prelude::{SessionConfig, SessionContext};
    let err = |e: DataFusionError| strata::Error::invalid(format!("SQL: {e}"));
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions.max(1)));
    let mut io: Vec<(String, Box<dyn Fn() -> strata::storage::IoSnapshot>)> = Vec::new();
    for (name, path) in tables {
        if is_lsm(path) {
            let t = StrataLsmTable::open(path)?;
            let store = t.store().clone();
            io.push((name.clone(), Box::new(move || store.stats().io)));
            ctx.register_table(name.as_str(), Arc::new(t)).map_err(err)?;
        } else {
            let t = StrataTable::open(path, &OpenOptions::default())?;
            let index = t.index().clone();
            io.push((name.clone(), Box::new(move || index.io().snapshot())));
            ctx.register_table(name.as_str(), Arc::new(t)).map_err(err)?;
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| strata::Error::io("tokio runtime", e))?;
    let t0 = std::time::Instant::now();
    let batches = runtime.block_on(async {
        let df = ctx.sql(sql).await?;
        df.collect().await
    });
    let batches = batches.map_err(|e| match e {
        DataFusionError::External(inner) => match inner.downcast::<strata::Error>() {
            Ok(e) => *e,
            Err(other) => strata::Error::invalid(format!("SQL: {other}")),
        },
        e => err(e),
    })?;
    let elapsed = t0.elapsed();
    let rows = batches.iter().map(RecordBatch::num_rows).sum();
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
        .map_err(|e| strata::Error::invalid(format!("SQL result: {e}")))?
        .to_string();
    let io = io
        .iter()
        .map(|(n, snap)| {
            let s = snap();
            (n.clone(), s.pages_read, s.read_calls)
        })
        .collect();
    Ok(SqlOutput {
        text,
        io,
        rows,
        elapsed,
    })
}
