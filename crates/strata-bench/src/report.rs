//! The JSON record of one (configuration, workload) run, and the table.

use serde::Serialize;
use serde_json::{Map, Value};

/// Latency percentiles of single operations, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
}

/// I/O per operation (deterministic for a given index and operation stream).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct IoPerOp {
    /// Distinct pages read per operation (null for peers that do not expose it).
    pub pages_per_op: Option<f64>,
    /// Read calls per operation.
    pub reads_per_op: Option<f64>,
    /// Bytes read per operation.
    pub bytes_per_op: Option<f64>,
    /// Modelled device time per operation under the run's profile (µs).
    pub modelled_us_per_op: Option<f64>,
    /// Write calls per operation.
    pub writes_per_op: Option<f64>,
    /// Rollback-journal appends per operation (the pager's: an updatable
    /// paged index's first write to a page after a checkpoint); left out
    /// when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_writes_per_op: Option<f64>,
    /// Rollback-journal syncs (and resets) per operation; left out when
    /// there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_syncs_per_op: Option<f64>,
}

/// Blocks per operation of a page-based updatable index, split as Lan et
/// al.'s Table 4 (logical fetches through its pager: pages served by a page
/// cache count too), and the structure modifications of the run.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BlocksPerOp {
    /// Inner pages fetched per operation.
    pub inner_read_per_op: f64,
    /// Leaf (record) pages fetched per operation.
    pub leaf_read_per_op: f64,
    /// Inner pages written per operation.
    pub inner_written_per_op: f64,
    /// Leaf pages written per operation.
    pub leaf_written_per_op: f64,
    /// Bookkeeping pages (free list) fetched and written per operation.
    pub other_per_op: f64,
    /// Structure modifications in the run (splits, expansions, merges).
    pub smo: u64,
}

/// One line of `strata bench` output. The first fields are fixed by
/// `BENCHMARKS.md`; the ones after `wrong` are additions.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRecord {
    /// Index kind.
    pub index: String,
    /// Resolved configuration of the index.
    pub config: Map<String, Value>,
    /// Data set name.
    pub dataset: String,
    /// Number of keys in the data set.
    pub n: u64,
    /// Workload name.
    pub workload: String,
    /// Operations run.
    pub ops: u64,
    /// Storage profile of the modelled time.
    pub profile: String,
    /// Cache state: `cold` (O_DIRECT, no cache), `os` (OS page cache), `lru:N`.
    pub cache: String,
    /// Operations per second (median over repeats).
    pub throughput_ops_s: f64,
    /// Latency percentiles (of the median run).
    pub latency_ns: Latency,
    /// I/O per operation.
    pub io: IoPerOp,
    /// Bytes held in memory after the run.
    pub memory_bytes: u64,
    /// `8 * memory_bytes / n`.
    pub bits_per_key: f64,
    /// Bytes on storage after the run.
    pub disk_bytes: u64,
    /// Build (bulk load) time.
    pub build_s: f64,
    /// Keys per second of the build.
    pub build_keys_per_s: f64,
    /// Models/segments of a learned index (null for others).
    pub models: Option<u64>,
    /// Answers that differed from the expected ones. Must be 0.
    pub wrong: u64,
    /// The index spec as given.
    pub spec: String,
    /// Residency mode.
    pub resident: String,
    /// Worker threads.
    pub threads: usize,
    /// Lookups per `get_many` call, when batched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// Reads in flight at most in a batch, when batched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<usize>,
    /// The engine that served batched reads (`uring`, `threads`, `sync`),
    /// when batched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_engine: Option<String>,
    /// Key choice (uniform / zipfian).
    pub key_choice: String,
    /// Records bulk-loaded before the operations.
    pub bulk_n: u64,
    /// Throughput of every repeat, in run order.
    pub throughput_runs: Vec<f64>,
    /// Height of the index (levels or layers), when it has one.
    pub height: Option<u32>,
    /// Page cache hit ratio, when a cache was used.
    pub cache_hit_ratio: Option<f64>,
    /// The `db` store's merge activity in the median run: `merges` done,
    /// `merge_s` spent merging, whether a merge was still `merging` when the
    /// last operation returned, and the `static_kind` in use; the `lsm`
    /// store's `StoreStats` (`index_bytes`, `filter_bytes`, `levels`,
    /// `train_nanos`, ...) after the median run; absent for other kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<serde_json::Value>,
    /// Blocks per operation by role, for kinds on the pager (`btree`,
    /// `fiting`, `dpgm`, `alex`, `lipp`, ...); absent for others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<BlocksPerOp>,
}

/// The columns of [`format_table`] (and of the demo's tables).
pub const TABLE_HEADER: [&str; 12] = [
    "index",
    "workload",
    "kops/s",
    "ratio",
    "p50 µs",
    "p99 µs",
    "pages",
    "reads",
    "model µs",
    "mem MiB",
    "bits/key",
    "wrong",
];

/// Lays out `rows` under `header`: every column as wide as its longest
/// cell, two spaces between columns, the first `left` columns left-aligned
/// and the others right-aligned, a rule under the header. Nothing is cut.
pub fn aligned_table(header: &[&str], left: usize, rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .chain(header.get(c).map(|h| h.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |row: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (c, (cell, &w)) in row.zip(&widths).enumerate() {
            if c > 0 {
                s.push_str("  ");
            }
            if c < left {
                s.push_str(&format!("{cell:<w$}"));
            } else {
                s.push_str(&format!("{cell:>w$}"));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&mut header.iter().copied());
    out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1)));
    out.push('\n');
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

/// A readable table of records, with throughput ratios to the first index of
/// each workload: [`TABLE_HEADER`], laid out by [`aligned_table`].
pub fn format_table(records: &[BenchRecord]) -> String {
    let mut base: Option<(String, f64)> = None;
    let f = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |x| format!("{x:.prec$}"));
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            if base.as_ref().map(|b| b.0 != r.workload).unwrap_or(true) {
                base = Some((r.workload.clone(), r.throughput_ops_s));
            }
            let ratio = base
                .as_ref()
                .map(|b| if b.1 > 0.0 { r.throughput_ops_s / b.1 } else { 0.0 })
                .unwrap_or(1.0);
            vec![
                r.spec.clone(),
                r.workload.clone(),
                format!("{:.1}", r.throughput_ops_s / 1e3),
                format!("{ratio:.2}x"),
                format!("{:.1}", r.latency_ns.p50 as f64 / 1e3),
                format!("{:.1}", r.latency_ns.p99 as f64 / 1e3),
                f(r.io.pages_per_op, 2),
                f(r.io.reads_per_op, 2),
                f(r.io.modelled_us_per_op, 1),
                format!("{:.3}", r.memory_bytes as f64 / (1u64 << 20) as f64),
                format!("{:.2}", r.bits_per_key),
                r.wrong.to_string(),
            ]
        })
        .collect();
    aligned_table(&TABLE_HEADER, 2, &rows)
}
