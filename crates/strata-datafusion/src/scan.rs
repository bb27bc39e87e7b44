//! Every strata table ([`ScanTable`]) and its scan plan node
//! ([`ScanExec`]), generic over what they read ([`ScanSource`]: an index,
//! an LSM store).
//!
//! The table answers filters on the key exactly when the source's key sets
//! can say which keys they select, and pushes the projection and the limit
//! into the scan.
//!
//! A scan's partitions are *data*: its one child is an in-memory source of
//! part descriptors (what each partition reads: key ranges, keys to look
//! up), one partition each, and the scan has as many partitions as that
//! child. Keeping them as data of an ordinary source, rather than inside
//! the scan, lets a distributed engine hand each task its partitions:
//! Ballista restricts in-memory sources to a task's partitions, and would
//! leave a custom leaf whole, so every task would read every partition.
//! Each partition collects its descriptors, then reads on one of tokio's
//! blocking threads, sending record batches through a channel of two.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::expressions::Column;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream,
};

use crate::{KEY, df_err};

/// What a [`ScanExec`] reads: a cheap handle to an index or a store, and
/// how its key sets become partitions and its partitions rows.
pub trait ScanSource: Clone + Send + Sync + 'static {
    /// The keys a scan returns.
    type Keys: Clone + PartialEq + fmt::Debug + Send + Sync + 'static;
    /// What a partition reads (or a piece of it).
    type Part: Send + 'static;
    /// The plan node's name.
    const NAME: &'static str;
    /// The table's schema (column 0 the key, 1 the value).
    fn table_schema() -> SchemaRef;
    /// The schema of the part descriptors.
    fn part_schema() -> SchemaRef;
    /// The parts of a scan of `keys`, up to `n` partitions (one, the first
    /// rows in key order, when a limit makes the scan stop early).
    fn split(keys: &Self::Keys, limit: Option<usize>, n: usize) -> Vec<Self::Part>;
    /// The descriptor batch of `parts`.
    fn part_batch(parts: &[Self::Part]) -> DfResult<RecordBatch>;
    /// The parts of descriptor batches.
    fn parts_of(batches: &[RecordBatch]) -> DfResult<Vec<Self::Part>>;
    /// Reads `part`, handing `emit` batches of rows (the `columns` of the
    /// table, in key order), `left` rows at most (counting it down).
    fn read(
        &self,
        part: &Self::Part,
        left: &mut usize,
        schema: &SchemaRef,
        columns: &[usize],
        emit: &mut dyn FnMut(DfResult<RecordBatch>) -> strata::Result<()>,
    ) -> strata::Result<()>;
    /// What `EXPLAIN` says it reads, e.g. `index=LOCATION (KIND)`.
    fn describe(&self, location: &str) -> String;
    /// The keys as `EXPLAIN` shows them.
    fn show_keys(keys: &Self::Keys) -> String;
    /// Every key.
    fn all_keys() -> Self::Keys;
    /// The keys a filter on the key column selects, if it is one answered
    /// exactly.
    fn keys_of_filter(e: &Expr) -> Option<Self::Keys>;
    /// The keys in both.
    fn intersect(a: &Self::Keys, b: &Self::Keys) -> Self::Keys;
}

/// A strata index or store as a table sorted by key, columns `key` and
/// `value` (their types: [`ScanSource::table_schema`]).
pub struct ScanTable<S: ScanSource> {
    pub(crate) source: S,
    location: String,
    schema: SchemaRef,
}

impl<S: ScanSource> fmt::Debug for ScanTable<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScanTable")
            .field("source", &self.source.describe(&self.location))
            .finish()
    }
}

impl<S: ScanSource> ScanTable<S> {
    /// A table over `source`; `location` names it in plans and, for a
    /// plan sent to another process, says where to open it.
    pub fn with_source(source: S, location: String) -> Self {
        ScanTable {
            source,
            location,
            schema: S::table_schema(),
        }
    }

    /// Where the index or store is: the path or URL it was opened from.
    pub fn location(&self) -> &str {
        &self.location
    }
}

#[async_trait]
impl<S: ScanSource> TableProvider for ScanTable<S> {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match S::keys_of_filter(f) {
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
        let mut keys = S::all_keys();
        for f in filters {
            let set = S::keys_of_filter(f)
                .ok_or_else(|| DataFusionError::Internal(format!("filter not pushed down exactly: {f}")))?;
            keys = S::intersect(&keys, &set);
        }
        let columns: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        Ok(Arc::new(ScanExec::new(
            self.source.clone(),
            self.location.clone(),
            columns,
            keys,
            limit,
            state.config().target_partitions().max(1),
        )?))
    }
}

/// The scan of a strata table: its input says what each partition reads
/// (see the module documentation), the source reads it.
pub struct ScanExec<S: ScanSource> {
    source: S,
    location: String,
    /// The projected schema.
    schema: SchemaRef,
    /// Columns of the table's schema, in output order.
    columns: Vec<usize>,
    keys: S::Keys,
    limit: Option<usize>,
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl<S: ScanSource> fmt::Debug for ScanExec<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(S::NAME)
            .field("location", &self.location)
            .field("keys", &self.keys)
            .field("columns", &self.columns)
            .field("limit", &self.limit)
            .finish()
    }
}

impl<S: ScanSource> ScanExec<S> {
    /// The scan of `keys` in `source` in up to `target_partitions`
    /// partitions.
    pub(crate) fn new(
        source: S,
        location: String,
        columns: Vec<usize>,
        keys: S::Keys,
        limit: Option<usize>,
        target_partitions: usize,
    ) -> DfResult<Self> {
        let batches = S::split(&keys, limit, target_partitions)
            .iter()
            .map(|p| S::part_batch(std::slice::from_ref(p)))
            .collect::<DfResult<Vec<_>>>()?;
        let input = parts_input(S::part_schema(), batches)?;
        Self::with_input(source, location, columns, keys, limit, input)
    }

    /// The scan of `keys` in `source` whose partitions read what `input`'s
    /// say (as a decoded plan has it: [`crate::wire`]).
    pub(crate) fn with_input(
        source: S,
        location: String,
        columns: Vec<usize>,
        keys: S::Keys,
        limit: Option<usize>,
        input: Arc<dyn ExecutionPlan>,
    ) -> DfResult<Self> {
        let table = S::table_schema();
        if let Some(&c) = columns.iter().find(|&&c| c >= table.fields().len()) {
            return Err(DataFusionError::Plan(format!("{}: no column {c}", S::NAME)));
        }
        if input.schema() != S::part_schema() {
            return Err(DataFusionError::Plan(format!(
                "{}: its input is not part descriptors: {}",
                S::NAME,
                input.schema()
            )));
        }
        let schema = Arc::new(table.project(&columns)?);
        let parts = input.properties().output_partitioning().partition_count();
        let properties = scan_properties(&schema, &columns, parts);
        Ok(ScanExec {
            source,
            location,
            schema,
            columns,
            keys,
            limit,
            input,
            properties,
        })
    }

    /// What the scan reads from.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Where the index or store is: the path or URL it was opened from.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The keys the scan returns.
    pub fn keys(&self) -> &S::Keys {
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

/// The input of a scan: one partition per entry of `batches` (each a
/// partition's descriptors), held in memory; with none, one partition that
/// reads nothing.
pub(crate) fn parts_input(schema: SchemaRef, batches: Vec<RecordBatch>) -> DfResult<Arc<dyn ExecutionPlan>> {
    let partitions: Vec<Vec<RecordBatch>> = if batches.is_empty() {
        vec![vec![RecordBatch::new_empty(schema.clone())]]
    } else {
        batches.into_iter().map(|b| vec![b]).collect()
    };
    Ok(MemorySourceConfig::try_new_exec(&partitions, schema, None)?)
}

/// The error a reader returns when the query stopped reading its batches.
fn stopped() -> strata::Error {
    strata::Error::invalid("the query stopped reading")
}

impl<S: ScanSource> DisplayAs for ScanExec<S> {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = S::show_keys(&self.keys);
        let columns: Vec<&str> = self.schema.fields().iter().map(|f| f.name().as_str()).collect();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "{}: {}, keys={keys}, projection=[{}], partitions={}",
                    S::NAME,
                    self.source.describe(&self.location),
                    columns.join(", "),
                    self.properties.output_partitioning().partition_count()
                )?;
                if let Some(l) = self.limit {
                    write!(f, ", limit={l}")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "{}", self.source.describe(&self.location))?;
                write!(f, "keys={keys}")
            }
        }
    }
}

impl<S: ScanSource> ExecutionPlan for ScanExec<S> {
    fn name(&self) -> &'static str {
        S::NAME
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
            return Err(DataFusionError::Internal(format!("{} has one child", S::NAME)));
        };
        Ok(Arc::new(ScanExec::with_input(
            self.source.clone(),
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
        ScanExec::new(
            self.source.clone(),
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
        use futures::{StreamExt, TryStreamExt};
        let descriptors = self.input.execute(partition, context)?;
        let (source, columns, limit) = (self.source.clone(), self.columns.clone(), self.limit);
        let schema = self.schema.clone();
        let stream = futures::stream::once(async move {
            let batches: Vec<RecordBatch> = descriptors.try_collect().await?;
            let parts = S::parts_of(&batches)?;
            let (tx, mut rx) = tokio::sync::mpsc::channel::<DfResult<RecordBatch>>(2);
            tokio::task::spawn_blocking(move || {
                let mut left = limit.unwrap_or(usize::MAX);
                for part in &parts {
                    let mut emit = |b: DfResult<RecordBatch>| {
                        if tx.blocking_send(b).is_ok() {
                            Ok(())
                        } else {
                            Err(stopped())
                        }
                    };
                    if let Err(e) = source.read(part, &mut left, &schema, &columns, &mut emit) {
                        let _ = tx.blocking_send(Err(df_err(e)));
                        return;
                    }
                }
            });
            Ok::<_, DataFusionError>(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
        })
        .try_flatten()
        .boxed();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }
}
