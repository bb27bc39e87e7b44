//! `strata-ballista`: a Ballista scheduler or executor that knows strata's
//! tables, and a client that runs SQL on such a cluster.
//!
//! ```text
//! strata-ballista scheduler --port 50050
//! strata-ballista executor --scheduler-port 50050 --flight-port 50051 --grpc-port 50052
//! strata-ballista sql --scheduler df://127.0.0.1:50050 --table t=s3://bucket/idx "SELECT …"
//! ```
//!
//! Everything binds to 127.0.0.1 unless `--host` says otherwise. Indexes
//! at `s3://` locations are read with the `AWS_*` environment of each
//! process. Logs go to stderr (`RUST_LOG`, default `warn`).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, Subcommand};
use strata::index::OpenOptions;
use strata_ballista::{
    ExecutorAddr, connect, executor_config, run_executor, run_scheduler, scheduler_config,
};
use strata_datafusion::StrataTable;

#[derive(Parser)]
#[command(
    name = "strata-ballista",
    version,
    about = "strata tables on a Ballista cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a scheduler with strata's codecs.
    Scheduler {
        /// The host to bind and advertise.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// The port clients and executors reach it at.
        #[arg(long, default_value_t = 50050)]
        port: u16,
    },
    /// Runs an executor with strata's codecs.
    Executor {
        /// The host to bind and advertise.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// The port of its Arrow Flight service (shuffle data).
        #[arg(long, default_value_t = 50051)]
        flight_port: u16,
        /// The port of its gRPC service (tasks).
        #[arg(long, default_value_t = 50052)]
        grpc_port: u16,
        /// The scheduler's host.
        #[arg(long, default_value = "127.0.0.1")]
        scheduler_host: String,
        /// The scheduler's port.
        #[arg(long, default_value_t = 50050)]
        scheduler_port: u16,
        /// Tasks it runs at a time (0: one per core).
        #[arg(long, default_value_t = 0)]
        task_slots: usize,
        /// Where it keeps shuffle files (default: a temporary directory).
        #[arg(long)]
        work_dir: Option<String>,
    },
    /// Runs a query on a cluster over strata indexes and prints the rows.
    Sql {
        /// The scheduler, `df://host:port`.
        #[arg(long, default_value = "df://127.0.0.1:50050")]
        scheduler: String,
        /// `NAME=LOCATION`: an index (a directory every executor reaches,
        /// or `s3://bucket/prefix`) as table NAME; repeatable.
        #[arg(long = "table", required = true)]
        tables: Vec<String>,
        /// Target partitions of each scan.
        #[arg(long, default_value_t = 2)]
        partitions: usize,
        /// The query.
        query: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Ballista logs through `log`: RUST_LOG=info shows its tasks.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strata-ballista: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: Result<(), String> = runtime.block_on(async {
        match cli.command {
            Command::Scheduler { host, port } => run_scheduler(scheduler_config(&host, port))
                .await
                .map_err(|e| e.to_string()),
            Command::Executor {
                host,
                flight_port,
                grpc_port,
                scheduler_host,
                scheduler_port,
                task_slots,
                work_dir,
            } => {
                let addr = ExecutorAddr {
                    host,
                    flight_port,
                    grpc_port,
                    scheduler_host,
                    scheduler_port,
                };
                run_executor(executor_config(&addr, task_slots, work_dir))
                    .await
                    .map_err(|e| e.to_string())
            }
            Command::Sql {
                scheduler,
                tables,
                partitions,
                query,
            } => sql(&scheduler, &tables, partitions, &query).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-ballista: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn sql(scheduler: &str, tables: &[String], partitions: usize, query: &str) -> Result<(), String> {
    let ctx = connect(scheduler, partitions).await.map_err(|e| e.to_string())?;
    for t in tables {
        let Some((name, location)) = t.split_once('=') else {
            return Err(format!("--table {t}: expected NAME=LOCATION"));
        };
        let table = StrataTable::open(Path::new(location), &OpenOptions::default())
            .map_err(|e| format!("table {name} at {location}: {e}"))?;
        ctx.register_table(name, Arc::new(table))
            .map_err(|e| e.to_string())?;
    }
    let t0 = Instant::now();
    let batches = ctx
        .sql(query)
        .await
        .map_err(|e| e.to_string())?
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches).map_err(|e| e.to_string())?;
    println!("{text}");
    eprintln!("{rows} rows in {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
    Ok(())
}
