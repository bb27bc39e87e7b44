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
pub mod wire;

use std::any::Any;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::TableType;
use datafusion::datasource::memory::MemorySourceConfig;
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
pub use lsm::{ByteKeySet, BytePart, StrataLsmScanExec, StrataLsmTable, Upper};

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
        let schema = table_schema();
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

    /// Where the index is: the path or URL it was opened from.
    pub fn location(&self) -> &str {
        &self.location
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
            columns,
            keys,
            limit,
            parts,
        )?))
    }
}

/// What one partition of a scan reads (or a piece of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// These keys, by batched lookups.
    Points(Vec<u64>),
    /// Keys `lo..=hi`, by a cursor.
    Range(u64, u64),
}

/// The schema of an index scan's part descriptors: a row per key range
/// (`point` false) or per key to look up (`point` true, `lo == hi`).
fn part_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("lo", DataType::UInt64, false),
        Field::new("hi", DataType::UInt64, false),
        Field::new("point", DataType::Boolean, false),
    ]))
}

/// The descriptor batch of one partition's parts.
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
        part_schema(),
        vec![
            Arc::new(UInt64Array::from(lo)),
            Arc::new(UInt64Array::from(hi)),
            Arc::new(BooleanArray::from(point)),
        ],
    )?)
}

/// The parts of descriptor batches (runs of points become one part).
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

/// The input of a scan: one partition per entry of `batches` (each a
/// partition's descriptors), held in memory. Keeping what each partition
/// reads as *data* of an ordinary source, rather than inside the scan,
/// lets a distributed engine hand each task its partitions: Ballista
/// restricts in-memory sources to a task's partitions, and a custom leaf
/// it would leave whole, so every task would read every partition.
fn parts_input(schema: SchemaRef, batches: Vec<RecordBatch>) -> DfResult<Arc<dyn ExecutionPlan>> {
    let partitions: Vec<Vec<RecordBatch>> = if batches.is_empty() {
        // One partition that reads nothing.
        vec![vec![RecordBatch::new_empty(schema.clone())]]
    } else {
        batches.into_iter().map(|b| vec![b]).collect()
    };
    Ok(MemorySourceConfig::try_new_exec(&partitions, schema, None)?)
}

/// The scan of a [`StrataTable`]: its input says what each partition reads
/// (points or key ranges; see `parts_input`), the scan reads them.
pub struct StrataScanExec {
    index: Arc<dyn Index>,
    location: String,
    /// The projected schema.
    schema: SchemaRef,
    /// Columns of the table's schema, in output order.
    columns: Vec<usize>,
    keys: KeySet,
    limit: Option<usize>,
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for StrataScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StrataScanExec")
            .field("location", &self.location)
            .field("keys", &self.keys)
            .field("columns", &self.columns)
            .field("limit", &self.limit)
            .finish()
    }
}

impl StrataScanExec {
    fn new(
        index: Arc<dyn Index>,
        location: String,
        columns: Vec<usize>,
        keys: KeySet,
        limit: Option<usize>,
        target_partitions: usize,
    ) -> DfResult<Self> {
        let batches = split(&keys, limit, target_partitions)
            .iter()
            .map(|p| part_batch(std::slice::from_ref(p)))
            .collect::<DfResult<Vec<_>>>()?;
        let input = parts_input(part_schema(), batches)?;
        Self::with_input(index, location, columns, keys, limit, input)
    }

    /// The scan of `keys` in `index` whose partitions read what `input`'s
    /// say (as a decoded plan has it: [`wire`]).
    fn with_input(
        index: Arc<dyn Index>,
        location: String,
        columns: Vec<usize>,
        keys: KeySet,
        limit: Option<usize>,
        input: Arc<dyn ExecutionPlan>,
    ) -> DfResult<Self> {
        let table = table_schema();
        if let Some(&c) = columns.iter().find(|&&c| c >= table.fields().len()) {
            return Err(DataFusionError::Plan(format!("StrataScanExec: no column {c}")));
        }
        if input.schema() != part_schema() {
            return Err(DataFusionError::Plan(format!(
                "StrataScanExec: its input is not part descriptors: {}",
                input.schema()
            )));
        }
        let schema = Arc::new(table.project(&columns)?);
        let parts = input.properties().output_partitioning().partition_count();
        let properties = scan_properties(&schema, &columns, parts);
        Ok(StrataScanExec {
            index,
            location,
            schema,
            columns,
            keys,
            limit,
            input,
            properties,
        })
    }

    /// Where the index is: the path or URL it was opened from.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The keys the scan returns.
    pub fn keys(&self) -> &KeySet {
        &self.keys
    }

    /// The pushed-down limit (of every partition).
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// The table's columns the scan returns (0: key, 1: value), in order.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }
}

/// The properties of a scan returning `columns` (0: the key) of a table
/// in `parts` partitions, each in key order.
fn scan_properties(schema: &SchemaRef, columns: &[usize], parts: usize) -> Arc<PlanProperties> {
    let mut eq = EquivalenceProperties::new(schema.clone());
    if let Some(pos) = columns.iter().position(|&c| c == 0) {
        let sort = PhysicalSortExpr::new_default(Arc::new(Column::new(KEY, pos)) as Arc<dyn PhysicalExpr>);
        if let Some(ordering) = LexOrdering::new(vec![sort]) {
            eq.add_orderings(vec![ordering]);
        }
    }
    Arc::new(PlanProperties::new(
        eq,
        Partitioning::UnknownPartitioning(parts),
        EmissionType::Incremental,
        Boundedness::Bounded,
    ))
}

/// A stream of the batches `work` makes on one of tokio's blocking threads:
/// `work` hands each to `send`, which says whether the query still reads
/// (a channel of two batches between them).
fn blocking_stream<W>(schema: SchemaRef, work: W) -> SendableRecordBatchStream
where
    W: FnOnce(&mut dyn FnMut(DfResult<RecordBatch>) -> bool) + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel::<DfResult<RecordBatch>>(2);
    tokio::task::spawn_blocking(move || work(&mut |b| tx.blocking_send(b).is_ok()));
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

/// The stream of partition `partition` of a scan over `input`: the
/// partition's descriptors collected from `input`, turned into parts by
/// `decode`, then read by `read` on a blocking thread.
fn scan_stream<P, D, R>(
    schema: SchemaRef,
    input: &Arc<dyn ExecutionPlan>,
    partition: usize,
    context: Arc<TaskContext>,
    decode: D,
    read: R,
) -> DfResult<SendableRecordBatchStream>
where
    P: Send + 'static,
    D: FnOnce(&[RecordBatch]) -> DfResult<P> + Send + 'static,
    R: FnOnce(P, &mut dyn FnMut(DfResult<RecordBatch>) -> bool) + Send + 'static,
{
    use futures::{StreamExt, TryStreamExt};
    let descriptors = input.execute(partition, context)?;
    let out = schema.clone();
    let stream = futures::stream::once(async move {
        let batches: Vec<RecordBatch> = descriptors.try_collect().await?;
        let parts = decode(&batches)?;
        Ok::<_, DataFusionError>(blocking_stream(out, move |send| read(parts, send)))
    })
    .try_flatten()
    .boxed();
    Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
}

/// The error a reader returns when the query stopped reading its batches.
fn stopped() -> strata::Error {
    strata::Error::invalid("the query stopped reading")
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
                    self.properties.output_partitioning().partition_count()
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
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        // Its input's partitions are the scan's: never repartition them.
        vec![false]
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
        let [input] = children.as_slice() else {
            return Err(DataFusionError::Internal("StrataScanExec has one child".into()));
        };
        Ok(Arc::new(StrataScanExec::with_input(
            self.index.clone(),
            self.location.clone(),
            self.columns.clone(),
            self.keys.clone(),
            self.limit,
            input.clone(),
        )?))
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
            self.columns.clone(),
            self.keys.clone(),
            limit,
            self.properties.output_partitioning().partition_count(),
        )
        .ok()
        .map(|e| Arc::new(e) as Arc<dyn ExecutionPlan>)
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> DfResult<SendableRecordBatchStream> {
        let (index, columns, limit) = (self.index.clone(), self.columns.clone(), self.limit);
        let out_schema = self.schema.clone();
        scan_stream(
            self.schema.clone(),
            &self.input,
            partition,
            context,
            parts_of,
            move |parts: Vec<Part>, send| {
                let mut left = limit.unwrap_or(usize::MAX);
                for part in &parts {
                    let r = read_part(index.as_ref(), part, &mut left, &mut |recs: &[Record]| {
                        if send(batch(&out_schema, &columns, recs)) {
                            Ok(())
                        } else {
                            Err(stopped())
                        }
                    });
                    if let Err(e) = r {
                        send(Err(df_err(e)));
                        return;
                    }
                }
            },
        )
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
