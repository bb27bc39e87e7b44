//! External-memory equi-joins of `u64`-keyed relations, after Chesetti &
//! Pandey, *Evaluating Learned Indexes for External Memory Joins*.
//!
//! A relation is a stream of records `(key, payload)` ([`Relation`]): a SOSD
//! key file (the payload of a key is its position in the file), an index
//! (its records), or records in memory. The **inner** relation maps each key
//! to one payload (its keys are unique: an index's records); the **outer**
//! one may repeat keys and come in any order. The join emits
//! `(key, outer payload, inner payload)` for every outer record whose key the
//! inner relation holds, into a [`JoinSink`]: a count with an
//! order-independent checksum ([`CountSink`]), or a file of the triples
//! ([`PairFile`]).
//!
//! Three algorithms, each within a [`MemoryBudget`]:
//!
//! - **Index nested-loop join** ([`inlj`]): the outer relation in batches,
//!   each probed with the inner index's batched lookups
//!   ([`Index::get_many`](crate::index::Index::get_many): sorted,
//!   deduplicated, `queue_depth` reads in flight). An unsorted outer
//!   relation is sorted first, so the probes come in key order.
//! - **Sort-merge join** ([`smj`]): both sides sorted (when they are not
//!   sorted already), then merged.
//! - **Grace hash join** ([`hash`]): both sides scattered by a hash of the
//!   key into partitions on disk small enough for the inner one's table to
//!   fit the budget, then each partition joined in memory.
//!
//! An unsorted relation is sorted by one of two methods
//! ([`JoinOptions::sort`], [`SortMethod`]): an **external merge sort**
//! ([`spill`]: runs sorted in memory, spilled, merged), or **learned
//! partitioning** ([`partition`], Chesetti's way for unsorted tables: a PGM
//! trained on a 1 % sample predicts each key's rank, which scatters the
//! records in one pass into key-ordered partitions that are then each
//! sorted in memory). Both give the same records in key order (ties in any
//! order) within the same budget; [`JoinReport`] says which ran, with its
//! passes or partitions and the bytes it spilled.
//!
//! Spill files live in a temporary directory under the caller's choice and
//! are removed when the join ends, on errors too.

pub mod hash;
pub mod inlj;
pub mod input;
mod parallel;
pub mod partition;
pub mod sink;
pub mod smj;
pub mod spill;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use serde::Serialize;

pub use input::{IndexRelation, KeyFile, MemRelation, Relation};
pub use sink::{CountSink, JoinSink, PairFile, checksum_of};

use crate::{Error, Result};

/// A record of a relation: `(key, payload)`.
pub type JoinRecord = (u64, u64);

/// Bytes of one record in memory and in spill files.
pub const RECORD_BYTES: u64 = 16;

/// The memory a join may use for its buffers (sort runs, partitions' write
/// buffers, hash tables, probe batches). What the process holds besides
/// (the inner index's resident models, the program) is not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryBudget {
    bytes: u64,
}

/// The smallest budget a join accepts: 1 MiB.
pub const MIN_BUDGET: u64 = 1 << 20;

/// Bytes of each spill file's read or write buffer.
pub const SPILL_BUFFER: usize = 64 << 10;

impl MemoryBudget {
    /// A budget of `bytes` (at least [`MIN_BUDGET`]).
    pub fn new(bytes: u64) -> Result<MemoryBudget> {
        if bytes < MIN_BUDGET {
            return Err(Error::invalid(format!(
                "a join needs a memory budget of at least {MIN_BUDGET} bytes, got {bytes}"
            )));
        }
        Ok(MemoryBudget { bytes })
    }

    /// The budget of a join in a process whose resident memory must stay
    /// within `limit` bytes: `limit` less what the process holds now (on
    /// Linux its resident set, which counts the program and the resident
    /// models of the indexes it has open) and a reserve for read buffers
    /// and allocator slack ([`PROCESS_RESERVE`] plus 1/32 of `limit`).
    ///
    /// Errors: [`Error::InvalidInput`] if less than [`MIN_BUDGET`] is left.
    pub fn within_process(limit: u64) -> Result<MemoryBudget> {
        let held = resident_bytes().unwrap_or(0);
        let reserve = PROCESS_RESERVE + limit / 32;
        let left = limit.saturating_sub(held).saturating_sub(reserve);
        if left < MIN_BUDGET {
            return Err(Error::invalid(format!(
                "a memory limit of {limit} bytes leaves {left} bytes for the join's buffers: the process \
                 already holds {held} bytes and {reserve} are kept for reads and allocator slack; \
                 a join needs at least {MIN_BUDGET} (raise the limit)"
            )));
        }
        MemoryBudget::new(left)
    }

    /// The budget in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Records that fit in `share` of the budget (`share` in `(0, 1]`).
    pub fn records(&self, share: f64) -> usize {
        let r = (self.bytes as f64 * share / RECORD_BYTES as f64) as u64;
        usize::try_from(r.max(1)).unwrap_or(usize::MAX)
    }

    /// Spill files that may be open at once, each with a
    /// [`SPILL_BUFFER`], within `share` of the budget (at least 2).
    pub fn open_files(&self, share: f64) -> usize {
        let n = (self.bytes as f64 * share / SPILL_BUFFER as f64) as u64;
        usize::try_from(n.max(2)).unwrap_or(usize::MAX)
    }
}

/// Bytes [`MemoryBudget::within_process`] keeps apart for reads in flight
/// and allocator slack, besides 1/32 of the limit: 4 MiB.
pub const PROCESS_RESERVE: u64 = 4 << 20;

/// The resident memory of this process in bytes (Linux: `VmRSS` of
/// `/proc/self/status`); `None` where it cannot be read.
pub fn resident_bytes() -> Option<u64> {
    proc_status_bytes("VmRSS:")
}

/// The peak resident memory of this process in bytes (Linux: `VmHWM`),
/// since it started or since [`reset_peak_resident`]; `None` where it cannot
/// be read.
pub fn peak_resident_bytes() -> Option<u64> {
    proc_status_bytes("VmHWM:")
}

/// Resets the peak resident memory to the current one (Linux:
/// `/proc/self/clear_refs`); returns whether it could.
pub fn reset_peak_resident() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A `kB` field of `/proc/self/status`, in bytes.
fn proc_status_bytes(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Outer keys per probe batch of the index nested-loop join by default:
/// 65,536 (about 2.5 MiB of buffers). Larger batches keep more reads in
/// flight between the batches' drains.
pub const DEFAULT_BATCH: usize = 65_536;

/// A join algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algo {
    /// Index nested-loop join over the inner relation's index.
    Inlj,
    /// Sort-merge join.
    SortMerge,
    /// Grace hash join.
    Hash,
}

impl Algo {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Inlj => "inlj",
            Algo::SortMerge => "smj",
            Algo::Hash => "hash",
        }
    }
}

/// How a join sorts a relation that is not sorted (both sides of a
/// sort-merge join, the outer side of an index nested-loop join).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SortMethod {
    /// An external merge sort ([`spill`]): runs of the budget sorted in
    /// memory and spilled, then merged (in passes, when there are more
    /// runs than the budget's buffers).
    #[default]
    External,
    /// Learned partitioning ([`partition`]): a PGM trained on a 1 % sample
    /// scatters the records into key-ordered partitions in one pass; each
    /// is sorted in memory when read back (split again if too large).
    Learned,
}

impl SortMethod {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SortMethod::External => "external",
            SortMethod::Learned => "learned",
        }
    }
}

impl FromStr for SortMethod {
    type Err = Error;

    /// `external` or `learned`.
    fn from_str(s: &str) -> Result<SortMethod> {
        match s {
            "external" => Ok(SortMethod::External),
            "learned" => Ok(SortMethod::Learned),
            other => Err(Error::invalid(format!(
                "the sort method must be external or learned, got {other:?}"
            ))),
        }
    }
}

/// How a join runs.
#[derive(Debug, Clone)]
pub struct JoinOptions {
    /// The memory its buffers may use.
    pub budget: MemoryBudget,
    /// Where spill files go (a temporary directory is made inside it and
    /// removed at the end); default: the system's temporary directory.
    pub spill_dir: Option<PathBuf>,
    /// Worker threads for partitions (hash join) and sort runs (default 1).
    pub threads: usize,
    /// Outer keys per probe batch of the index nested-loop join (default
    /// [`DEFAULT_BATCH`]; at most what the budget holds).
    pub batch: usize,
    /// How a relation that is not sorted is sorted (default: the external
    /// merge sort).
    pub sort: SortMethod,
}

impl JoinOptions {
    /// Options with `budget`, every other field at its default.
    pub fn with_budget(budget: MemoryBudget) -> JoinOptions {
        JoinOptions {
            budget,
            spill_dir: None,
            threads: 1,
            batch: DEFAULT_BATCH,
            sort: SortMethod::External,
        }
    }

    /// A fresh temporary directory for spill files (removed on drop).
    pub(crate) fn spill_space(&self) -> Result<tempfile::TempDir> {
        let mut b = tempfile::Builder::new();
        b.prefix("strata-join-");
        match &self.spill_dir {
            Some(d) => b.tempdir_in(d).map_err(|e| Error::io(d, e)),
            None => b
                .tempdir()
                .map_err(|e| Error::io(std::env::temp_dir().as_path(), e)),
        }
    }
}

/// What a join did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JoinReport {
    /// Output records.
    pub count: u64,
    /// Order-independent checksum of the output ([`checksum_of`]).
    pub checksum: u64,
    /// Outer records read.
    pub outer_records: u64,
    /// Inner records read (scans) or probes answered (index nested loop).
    pub inner_records: u64,
    /// Bytes written to spill files.
    pub spill_bytes_written: u64,
    /// Bytes read back from spill files.
    pub spill_bytes_read: u64,
    /// Merge passes written by the external sort (0: one streamed merge,
    /// or the input was sorted or fitted in memory); the deepest level of
    /// learned partitioning (1: each partition was read back in memory;
    /// more: some were split again; 0: nothing was partitioned); or
    /// partitioning levels of the hash join.
    pub passes: u32,
    /// How unsorted relations were sorted: `None` when nothing was sorted
    /// (the hash join, or every relation it had to sort was sorted).
    pub sort: Option<SortMethod>,
    /// Partitions learned partitioning wrote, over every level and both
    /// sides (0 for the external sort).
    pub partitions: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Runs `algo` joining `outer` with `inner` into `sink`. For
/// [`Algo::Inlj`] `inner` must be an [`IndexRelation`] (the index is
/// probed); the other algorithms read any relation.
pub fn join(
    algo: Algo,
    outer: &dyn Relation,
    inner: &dyn Relation,
    sink: &mut dyn JoinSink,
    opts: &JoinOptions,
) -> Result<JoinReport> {
    let t = Instant::now();
    let mut report = match algo {
        Algo::Inlj => {
            let index = inner.index().ok_or_else(|| {
                Error::invalid(format!(
                    "an index nested-loop join needs an index over the inner relation; {} is not one",
                    inner.name()
                ))
            })?;
            inlj::join(outer, index, sink, opts)?
        }
        Algo::SortMerge => smj::join(outer, inner, sink, opts)?,
        Algo::Hash => hash::join(outer, inner, sink, opts)?,
    };
    report.count = sink.count();
    report.checksum = sink.checksum();
    report.seconds = t.elapsed().as_secs_f64();
    Ok(report)
}

/// The records of `rel` in key order, sorted by `opts.sort` if it is not
/// sorted: the external sort's runs (or the learned partitioning's pass)
/// take `run_share` of the budget, its final merge (or a partition read
/// back) `merge_share`; spill files in `dir`. External merge passes are
/// added to `passes`; learned partitions and levels are counted in `stats`.
pub(crate) fn sort_relation<'a>(
    rel: &'a dyn Relation,
    opts: &JoinOptions,
    run_share: f64,
    merge_share: f64,
    dir: &Path,
    stats: &'a spill::SpillStats,
    passes: &mut u32,
) -> Result<spill::Sorted<'a>> {
    match opts.sort {
        SortMethod::External => spill::sorted(
            rel,
            opts.budget.records(run_share),
            opts.budget.open_files(merge_share),
            dir,
            stats,
            passes,
        ),
        SortMethod::Learned => {
            let share = |s: f64| (opts.budget.bytes() as f64 * s) as u64;
            let mem = partition::LearnedMemory {
                pass: share(run_share),
                read: share(merge_share),
            };
            partition::sorted(rel, mem, dir, stats)
        }
    }
}

/// Fills the report's spill and sort fields from `stats`; `sorted`: whether
/// a relation was sorted.
pub(crate) fn report_spill(
    report: &mut JoinReport,
    stats: &spill::SpillStats,
    sorted: bool,
    opts: &JoinOptions,
) {
    use std::sync::atomic::Ordering;
    report.spill_bytes_written = stats.written.load(Ordering::Relaxed);
    report.spill_bytes_read = stats.read.load(Ordering::Relaxed);
    report.partitions = stats.partitions.load(Ordering::Relaxed);
    report.passes += stats.levels.load(Ordering::Relaxed);
    report.sort = sorted.then_some(opts.sort);
}

/// The error for a repeated key in the inner relation.
pub(crate) fn repeated_inner(name: &str, key: u64) -> Error {
    Error::invalid(format!(
        "the inner relation {name} repeats key {key}: its keys must be unique (swap the sides, or deduplicate it)"
    ))
}
