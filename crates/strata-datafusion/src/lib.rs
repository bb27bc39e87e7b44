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
//! The scan ([`StrataScanExec`]) runs strata's blocking reads on tokio's
//! blocking threads, sending record batches of up to [`BATCH_ROWS`] rows
//! through a channel of two.

#![deny(clippy::unwrap_used, clippy::expect_used)]

mod keys;

use std::any::Any;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::TableType;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::{EquivalenceProperties, LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::expressions::Column;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream,
};
use strata::index::{Index, OpenOptions, Record};

pub use keys::KeySet;

/// Rows per record batch a scan sends.
pub const BATCH_ROWS: usize = 8192;

/// The name of the key column.
pub const KEY: &str = "key";
/// The name of the value column.
pub const VALUE: &str = "value";

fn df_err(e: strata::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// A static strata index as a table `(key UInt64, value UInt64)`.
pub struct StrataTable {
    index: Arc<dyn Index>,
    location: String,
    schema: SchemaRef,
}

impl fmt::Debug for StrataTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StrataTable")
            .field("location", &self.location)
            .field("kind", &self.index.kind())
            .finish()
    }
}

impl StrataTable {
    /// The index at `path` (a local directory or `s3://bucket/prefix`),
    /// opened with `opts`.
    pub fn open(path: &Path, opts: &OpenOptions) -> strata::Result<Self> {
        let index = strata::registry::open(path, opts)?;
        Ok(Self::new(Arc::from(index), path.display().to_string()))
    }

    /// A table over an open index; `location` names it in plans.
    pub fn new(index: Arc<dyn Index>, location: String) -> Self {
        let schema = Arc::new(Schema::new(vec![
            Field::new(KEY, DataType::UInt64, false),
            Field::new(VALUE, DataType::UInt64, false),
        ]));
        StrataTable {
            index,
            location,
            schema,
        }
    }

    /// The index (its I/O counters: [`Index::io`]).
    pub fn index(&self) -> &Arc<dyn Index> {
        &self.index
    }
}

#[async_trait]
impl TableProvider for StrataTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match KeySet::of_filter(f, KEY) {
                Some(_) => TableProviderFilterPushDown::Exact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        // DataFusion hands over only the filters answered exactly.
        let mut keys = KeySet::ALL;
        for f in filters {
            let set = KeySet::of_filter(f, KEY)
                .ok_or_else(|| DataFusionError::Internal(format!("filter not pushed down exactly: {f}")))?;
            keys = keys.intersect(&set);
        }
        let columns: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let parts = state.config().target_partitions().max(1);
        Ok(Arc::new(StrataScanExec::new(
            self.index.clone(),
            self.location.clone(),
            self.schema.clone(),
            columns,
            keys,
            limit,
            parts,
        )?))
    }
}

/// What one partition of a scan reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// These keys, by batched lookups.
    Points(Vec<u64>),
    /// Keys `lo..=hi`, by a cursor.
    Range(u64, u64),
}

/// The scan of a [`StrataTable`]: partitions of points or key ranges.
pub struct StrataScanExec {
    index: Arc<dyn Index>,
    location: String,
    /// The table's schema.
    table_schema: SchemaRef,
    /// The projected schema.
    schema: SchemaRef,
    /// Columns of the table's schema, in output order.
    columns: Vec<usize>,
    keys: KeySet,
    limit: Option<usize>,
    parts: Vec<Part>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for StrataScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StrataScanExec")
            .field("location", &self.location)
            .field("keys", &self.keys)
            .field("columns", &self.columns)
            .field("limit", &self.limit)
            .field("parts", &self.parts.len())
            .finish()
    }
}

impl StrataScanExec {
    fn new(
        index: Arc<dyn Index>,
        location: String,
        table_schema: SchemaRef,
        columns: Vec<usize>,
        keys: KeySet,
        limit: Option<usize>,
        target_partitions: usize,
    ) -> DfResult<Self> {
        let schema = Arc::new(table_schema.project(&columns)?);
        let parts = split(&keys, limit, target_partitions);
        let mut eq = EquivalenceProperties::new(schema.clone());
        // Rows come in key order within every partition.
        if let Some(pos) = columns.iter().position(|&c| c == 0) {
            let sort =
                PhysicalSortExpr::new_default(Arc::new(Column::new(KEY, pos)) as Arc<dyn PhysicalExpr>);
            if let Some(ordering) = LexOrdering::new(vec![sort]) {
                eq.add_orderings(vec![ordering]);
            }
        }
        let properties = PlanProperties::new(
            eq,
            Partitioning::UnknownPartitioning(parts.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(StrataScanExec {
            index,
            location,
            table_schema,
            schema,
            columns,
            keys,
            limit,
            parts,
            properties: Arc::new(properties),
        })
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

impl DisplayAs for StrataScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = match &self.keys {
            k if *k == KeySet::ALL => "all".to_string(),
            KeySet::Range { lo, hi } => format!("{lo}..={hi}"),
            KeySet::Points(p) => format!("{} points", p.len()),
        };
        let columns: Vec<&str> = self.schema.fields().iter().map(|f| f.name().as_str()).collect();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "StrataScanExec: index={} ({}), keys={keys}, projection=[{}], partitions={}",
                    self.location,
                    self.index.kind(),
                    columns.join(", "),
                    self.parts.len()
                )?;
                if let Some(l) = self.limit {
                    write!(f, ", limit={l}")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "index={}", self.location)?;
                write!(f, "keys={keys}")
            }
        }
    }
}

impl ExecutionPlan for StrataScanExec {
    fn name(&self) -> &'static str {
        "StrataScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(DataFusionError::Internal("StrataScanExec has no children".into()))
        }
    }

    fn fetch(&self) -> Option<usize> {
        self.limit
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let limit = match (self.limit, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        StrataScanExec::new(
            self.index.clone(),
            self.location.clone(),
            self.table_schema.clone(),
            self.columns.clone(),
            self.keys.clone(),
            limit,
            self.parts.len().max(1),
        )
        .ok()
        .map(|e| Arc::new(e) as Arc<dyn ExecutionPlan>)
    }

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> DfResult<SendableRecordBatchStream> {
        let schema = self.schema.clone();
        let Some(part) = self.parts.get(partition).cloned() else {
            if self.parts.is_empty() && partition == 0 {
                return Ok(Box::pin(RecordBatchStreamAdapter::new(
                    schema,
                    futures::stream::empty(),
                )));
            }
            return Err(DataFusionError::Internal(format!(
                "StrataScanExec: no partition {partition} of {}",
                self.parts.len()
            )));
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel::<DfResult<RecordBatch>>(2);
        let (index, columns, limit) = (self.index.clone(), self.columns.clone(), self.limit);
        let out_schema = schema.clone();
        tokio::task::spawn_blocking(move || {
            let send = |b: DfResult<RecordBatch>| tx.blocking_send(b).is_ok();
            if let Err(e) = read_part(index.as_ref(), &part, limit, &mut |recs: &[Record]| {
                if send(batch(&out_schema, &columns, recs)) {
                    Ok(())
                } else {
                    Err(strata::Error::invalid("the query stopped reading"))
                }
            }) {
                let _ = send(Err(df_err(e)));
            }
        });
        let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Reads `part`, handing `emit` the records in key order, batch by batch,
/// `limit` of them at most.
fn read_part(
    index: &dyn Index,
    part: &Part,
    limit: Option<usize>,
    emit: &mut dyn FnMut(&[Record]) -> strata::Result<()>,
) -> strata::Result<()> {
    let mut left = limit.unwrap_or(usize::MAX);
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
                        .take(left),
                );
                left -= recs.len();
                if !recs.is_empty() {
                    emit(&recs)?;
                }
                if left == 0 {
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
            let mut recs = Vec::with_capacity(BATCH_ROWS.min(left));
            while left > 0 {
                match cursor.next()? {
                    Some(r) if r.0 <= hi => {
                        recs.push(r);
                        left -= 1;
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

/// `Any` for downcasts of the plan (DataFusion's `ExecutionPlan` is `Any`).
pub fn as_scan(plan: &dyn ExecutionPlan) -> Option<&StrataScanExec> {
    (plan as &dyn Any).downcast_ref::<StrataScanExec>()
}

/// What [`run_sql`] returns: the rows as a text table, and per table its
/// name, the pages and the read calls its index read.
#[derive(Debug, Clone)]
pub struct SqlOutput {
    /// The result, formatted as a table.
    pub text: String,
    /// `(table, pages read, read calls)` of each table.
    pub io: Vec<(String, u64, u64)>,
}

/// Runs `sql` over the strata indexes `tables` (name, location: a directory
/// or `s3://bucket/prefix`) with `partitions` target partitions, on a
/// runtime of its own.
pub fn run_sql(
    tables: &[(String, std::path::PathBuf)],
    sql: &str,
    partitions: usize,
) -> strata::Result<SqlOutput> {
    use datafusion::prelude::{SessionConfig, SessionContext};
    let err = |e: DataFusionError| strata::Error::invalid(format!("SQL: {e}"));
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions.max(1)));
    let mut indexes = Vec::new();
    for (name, path) in tables {
        let t = StrataTable::open(path, &OpenOptions::default())?;
        indexes.push((name.clone(), t.index().clone()));
        ctx.register_table(name.as_str(), Arc::new(t)).map_err(err)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| strata::Error::io("tokio runtime", e))?;
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
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
        .map_err(|e| strata::Error::invalid(format!("SQL result: {e}")))?
        .to_string();
    let io = indexes
        .iter()
        .map(|(n, i)| {
            let s = i.io().snapshot();
            (n.clone(), s.pages_read, s.read_calls)
        })
        .collect();
    Ok(SqlOutput { text, io })
}
