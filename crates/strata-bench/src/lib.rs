//! The strata experiment runner.
//!
//! It builds every index configuration over the same records, runs the same
//! operations against each (interleaving configurations across repeats, so
//! drift on a noisy machine hits all of them alike), checks every answer, and
//! reports one JSON object per (configuration, workload) with the fields fixed
//! by `BENCHMARKS.md`: throughput, latency percentiles, pages/reads/bytes per
//! operation, modelled time under a storage profile, memory and disk bytes.
//! Peers (LMDB, RocksDB) plug in as index kinds behind cargo features.
//! [`kv`] is `kvbench`, the db_bench-style runner over byte-string
//! key-value engines (strata's stores, RocksDB, fjall, LevelDB).

pub mod kv;
pub mod peers;
mod report;
mod runner;

pub use report::{BenchRecord, IoPerOp, Latency, TABLE_HEADER, aligned_table, format_table};
pub use runner::{BenchOptions, Event, RUNNER_PARAMS, RunnerParam, run};
