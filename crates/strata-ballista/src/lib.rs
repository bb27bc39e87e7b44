//! strata tables on a [Ballista](https://datafusion.apache.org/ballista/)
//! cluster (issue 22).
//!
//! A Ballista client sends its logical plan to the scheduler, which plans
//! it and sends the stages' physical plans to the executors. A
//! [`StrataTable`] in the logical plan and a [`StrataScanExec`] in the
//! physical one cross those process boundaries through strata's codecs,
//! [`StrataLogicalCodec`] and [`StrataPhysicalCodec`]: they carry the
//! table's location and the scan's plan ([`strata_datafusion::wire`]) and
//! hand every other node to Ballista's own codecs. Every process opens the
//! index itself, so the index must be where all of them reach it: an
//! `s3://bucket/prefix` (each process takes its credentials from its own
//! `AWS_*` environment; none travel in a plan).
//!
//! The codecs must be registered on the client ([`session_state`]), the
//! scheduler ([`scheduler_config`]) and every executor
//! ([`executor_config`]); the `strata-ballista` binary runs a scheduler or
//! an executor with them, and runs queries as a client.

#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::any::Any;
use std::net::SocketAddr;
use std::sync::Arc;

use ballista::extension::{SessionConfigExt, SessionContextExt};
use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result as DfResult, TableReference};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::execution::TaskContext;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::{Extension, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use strata_datafusion::wire::{self, Decoded};
use strata_datafusion::{StrataLsmTable, StrataTable, as_lsm_scan, as_scan};

pub use strata_datafusion::StrataScanExec;

/// Ballista's logical codec, plus [`StrataTable`]s.
#[derive(Debug, Default)]
pub struct StrataLogicalCodec {
    inner: BallistaLogicalExtensionCodec,
}

impl LogicalExtensionCodec for StrataLogicalCodec {
    fn try_decode(&self, buf: &[u8], inputs: &[LogicalPlan], ctx: &TaskContext) -> DfResult<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> DfResult<()> {
        self.inner.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> DfResult<Arc<dyn TableProvider>> {
        if wire::is_strata(buf) {
            let table: Arc<dyn TableProvider> = match wire::decode(buf, &[])? {
                Decoded::Table(t) => Arc::new(t),
                Decoded::LsmTable(t) => Arc::new(t),
                Decoded::Scan(_) | Decoded::LsmScan(_) => {
                    return Err(DataFusionError::Internal(format!(
                        "table {table_ref}: a strata scan where a table was expected"
                    )));
                }
            };
            if table.schema() != schema {
                return Err(DataFusionError::Plan(format!(
                    "table {table_ref}: the strata table has not the schema the plan was made for"
                )));
            }
            Ok(table)
        } else {
            self.inner.try_decode_table_provider(buf, table_ref, schema, ctx)
        }
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> DfResult<()> {
        let any = node.as_ref() as &dyn Any;
        if let Some(t) = any.downcast_ref::<StrataTable>() {
            wire::encode_table(t, buf);
            Ok(())
        } else if let Some(t) = any.downcast_ref::<StrataLsmTable>() {
            wire::encode_lsm_table(t, buf);
            Ok(())
        } else {
            self.inner.try_encode_table_provider(table_ref, node, buf)
        }
    }

    fn try_decode_file_format(&self, buf: &[u8], ctx: &TaskContext) -> DfResult<Arc<dyn FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(&self, buf: &mut Vec<u8>, node: Arc<dyn FileFormatFactory>) -> DfResult<()> {
        self.inner.try_encode_file_format(buf, node)
    }
}

/// Ballista's physical codec, plus [`StrataScanExec`]s.
#[derive(Debug, Default)]
pub struct StrataPhysicalCodec {
    inner: BallistaPhysicalExtensionCodec,
}

impl PhysicalExtensionCodec for StrataPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if wire::is_strata(buf) {
            match wire::decode(buf, inputs)? {
                Decoded::Scan(s) => Ok(Arc::new(s)),
                Decoded::LsmScan(s) => Ok(Arc::new(s)),
                Decoded::Table(_) | Decoded::LsmTable(_) => Err(DataFusionError::Internal(
                    "a strata table where a scan was expected".into(),
                )),
            }
        } else {
            self.inner.try_decode(buf, inputs, ctx, proto_converter)
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<()> {
        if let Some(scan) = as_scan(node.as_ref()) {
            wire::encode_scan(scan, buf);
            Ok(())
        } else if let Some(scan) = as_lsm_scan(node.as_ref()) {
            wire::encode_lsm_scan(scan, buf);
            Ok(())
        } else {
            self.inner.try_encode(node, buf, proto_converter)
        }
    }
}

/// A client's session state for a Ballista cluster: `target_partitions`
/// partitions per scan, strata's codecs registered.
pub fn session_state(target_partitions: usize) -> SessionState {
    let config = SessionConfig::new_with_ballista()
        .with_target_partitions(target_partitions.max(1))
        .with_ballista_logical_extension_codec(Arc::new(StrataLogicalCodec::default()))
        .with_ballista_physical_extension_codec(Arc::new(StrataPhysicalCodec::default()));
    SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build()
}

/// A session on the cluster whose scheduler is at `url`
/// (`df://host:port`).
pub async fn connect(url: &str, target_partitions: usize) -> DfResult<SessionContext> {
    SessionContext::remote_with_state(url, session_state(target_partitions)).await
}

/// A scheduler's configuration: bound to `host:port`, strata's codecs
/// registered.
pub fn scheduler_config(host: &str, port: u16) -> SchedulerConfig {
    SchedulerConfig {
        bind_host: host.to_string(),
        external_host: host.to_string(),
        bind_port: port,
        override_logical_codec: Some(Arc::new(StrataLogicalCodec::default())),
        override_physical_codec: Some(Arc::new(StrataPhysicalCodec::default())),
        ..Default::default()
    }
}

/// Runs a scheduler with `config` until the process ends.
pub async fn run_scheduler(config: SchedulerConfig) -> ballista_core::error::Result<()> {
    let addr: SocketAddr = format!("{}:{}", config.bind_host, config.bind_port)
        .parse()
        .map_err(|e| ballista_core::error::BallistaError::Configuration(format!("scheduler address: {e}")))?;
    let cluster = BallistaCluster::new_from_config(&config).await?;
    start_server(cluster, addr, Arc::new(config)).await
}

/// Where an executor listens and whom it serves.
#[derive(Debug, Clone)]
pub struct ExecutorAddr {
    /// The host it binds and advertises.
    pub host: String,
    /// Its Arrow Flight port (shuffle data).
    pub flight_port: u16,
    /// Its gRPC port (tasks).
    pub grpc_port: u16,
    /// The scheduler's host.
    pub scheduler_host: String,
    /// The scheduler's port.
    pub scheduler_port: u16,
}

/// An executor's configuration: `addr`, `task_slots` tasks at a time
/// (0: one per core), shuffle files under `work_dir`, strata's codecs
/// registered.
pub fn executor_config(
    addr: &ExecutorAddr,
    task_slots: usize,
    work_dir: Option<String>,
) -> ExecutorProcessConfig {
    ExecutorProcessConfig {
        bind_host: addr.host.clone(),
        external_host: Some(addr.host.clone()),
        port: addr.flight_port,
        grpc_port: addr.grpc_port,
        scheduler_host: addr.scheduler_host.clone(),
        scheduler_port: addr.scheduler_port,
        scheduler_connect_timeout_seconds: 30,
        vcores: task_slots,
        work_dir,
        print_thread_info: false,
        override_logical_codec: Some(Arc::new(StrataLogicalCodec::default())),
        override_physical_codec: Some(Arc::new(StrataPhysicalCodec::default())),
        ..Default::default()
    }
}

/// Runs an executor with `config` until the process ends.
pub async fn run_executor(config: ExecutorProcessConfig) -> ballista_core::error::Result<()> {
    start_executor_process(Arc::new(config)).await
}
