//! The JSON record of one (engine, workload, repeat) run and the summary table.

use serde::Serialize;
use serde_json::{Map, Value};

use super::MemoryUse;
use crate::report::{IoPerOp, Latency};

/// Operations a run did, counted by the driver (deterministic for a seed,
/// except the writer of `readwhilewriting`, which is not counted here).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct KvCounts {
    /// Point reads (those of read-modify-writes included).
    pub gets: u64,
    /// Point reads that found their key.
    pub found: u64,
    /// Puts (those of read-modify-writes included).
    pub puts: u64,
    /// Deletes.
    pub deletes: u64,
    /// Seeks (each followed by nexts).
    pub seeks: u64,
    /// Entries the seeks and nexts handed back.
    pub scanned: u64,
    /// Read-modify-writes.
    pub rmws: u64,
}

/// One line of `strata kvbench` output: the fields of `BENCHMARKS.md` first
/// (`index` is the engine; `dataset` names key and value sizes; I/O figures
/// the process cannot attribute are null), then kvbench's own.
#[derive(Debug, Clone, Serialize)]
pub struct KvRecord {
    /// Engine name (`db`, `lsm`, `rocksdb`, `fjall`, `leveldb`).
    pub index: String,
    /// The engine's resolved configuration.
    pub config: Map<String, Value>,
    /// `kv-<key size>-<value size>`.
    pub dataset: String,
    /// Keys loaded (`--num`).
    pub n: u64,
    /// Workload name.
    pub workload: String,
    /// Operations timed (reads only, for `readwhilewriting`).
    pub ops: u64,
    /// No modelled storage: `measured`.
    pub profile: String,
    /// `cold` (page cache dropped before the workload) or `os`.
    pub cache: String,
    /// Operations per second.
    pub throughput_ops_s: f64,
    /// Latency percentiles of single operations.
    pub latency_ns: Latency,
    /// Per operation: read and write calls and bytes read from the device,
    /// from `/proc/self/io` (whole process, background threads included).
    pub io: IoPerOp,
    /// Memory the engine holds after the run (all components).
    pub memory_bytes: u64,
    /// `8 * memory_bytes / n`.
    pub bits_per_key: f64,
    /// Bytes of the engine's files after the run.
    pub disk_bytes: u64,
    /// Seconds of the untimed load before the first non-fill workload (0 if none).
    pub build_s: f64,
    /// Keys per second of that load.
    pub build_keys_per_s: f64,
    /// Always null (not a learned index).
    pub models: Option<u64>,
    /// Reads whose answer was wrong (a present key not found, a missing key
    /// found, or a value of another key). Must be 0.
    pub wrong: u64,
    /// The engine spec as given.
    pub spec: String,
    /// Repeat number (0-based); engines are interleaved within a repeat.
    pub repeat: usize,
    /// Key bytes (with a key file, its mean key length, rounded).
    pub key_size: usize,
    /// Value bytes.
    pub value_size: usize,
    /// Worker threads (readers, for `readwhilewriting`).
    pub threads: usize,
    /// `always` or `never`.
    pub sync: String,
    /// What the driver did.
    pub counts: KvCounts,
    /// Writes of the background writer of `readwhilewriting` (0 otherwise).
    pub background_writes: u64,
    /// Memory per component after the run.
    pub memory: MemoryUse,
    /// Live keys after the run.
    pub live_keys: u64,
    /// Key and value bytes the workload wrote (deletes: key bytes).
    pub user_bytes_written: u64,
    /// Bytes written to storage during the run and the flush after it.
    pub bytes_written: u64,
    /// Where `bytes_written` comes from: `engine`, `device`
    /// (`/proc/self/io` write_bytes) or `syscalls` (wchar, when the device
    /// figure is 0, e.g. on tmpfs).
    pub bytes_written_source: String,
    /// `bytes_written / user_bytes_written` (null for read-only workloads).
    pub write_amp: Option<f64>,
    /// `disk_bytes / (live_keys * (key_size + value_size))` (null when empty).
    pub space_amp: Option<f64>,
    /// Notes on the run (a cold run that could not drop the page cache, ...).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Median of `v` (0 for none).
fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// A readable table: per workload and engine (in run order), the median
/// throughput over repeats, its spread (max − min as a share of the median),
/// the ratio of the median to the first engine's, and the median run's
/// latencies, amplifications and memory.
pub fn format_kv_table(records: &[KvRecord]) -> String {
    let mut groups: Vec<((String, String), Vec<&KvRecord>)> = Vec::new();
    for r in records {
        let key = (r.workload.clone(), r.spec.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    // Workloads in first-seen order, engines in first-seen order within.
    let mut order: Vec<String> = Vec::new();
    for ((w, _), _) in &groups {
        if !order.contains(w) {
            order.push(w.clone());
        }
    }
    let header = format!(
        "{:<24} {:<16} {:>10} {:>7} {:>7} {:>9} {:>9} {:>9} {:>7} {:>7} {:>8} {:>5}\n",
        "engine",
        "workload",
        "kops/s",
        "spread",
        "ratio",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "w-amp",
        "s-amp",
        "mem MiB",
        "wrong"
    );
    let mut out = header.clone();
    out.push_str(&"-".repeat(header.chars().count().saturating_sub(1)));
    out.push('\n');
    for w in &order {
        let mut base: Option<f64> = None;
        for ((gw, spec), rs) in groups.iter().filter(|((gw, _), _)| gw == w) {
            let mut tp: Vec<f64> = rs.iter().map(|r| r.throughput_ops_s).collect();
            let med = median(&mut tp);
            let spread = match (tp.first(), tp.last()) {
                (Some(lo), Some(hi)) if med > 0.0 => (hi - lo) / med,
                _ => 0.0,
            };
            let b = *base.get_or_insert(med);
            let ratio = if b > 0.0 { med / b } else { 0.0 };
            // The run closest to the median stands for the latencies.
            let Some(mid) = rs.iter().min_by(|a, c| {
                (a.throughput_ops_s - med)
                    .abs()
                    .total_cmp(&(c.throughput_ops_s - med).abs())
            }) else {
                continue;
            };
            let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
            let mut name = spec.clone();
            if name.chars().count() > 24 {
                name = name.chars().take(23).collect::<String>() + "…";
            }
            out.push_str(&format!(
                "{:<24} {:<16} {:>10.1} {:>6.0}% {:>6.2}x {:>9.1} {:>9.1} {:>9.1} {:>7} {:>7} {:>8.2} {:>5}\n",
                name,
                gw,
                med / 1e3,
                spread * 100.0,
                ratio,
                mid.latency_ns.p50 as f64 / 1e3,
                mid.latency_ns.p99 as f64 / 1e3,
                mid.latency_ns.p999 as f64 / 1e3,
                f(mid.write_amp),
                f(mid.space_amp),
                mid.memory_bytes as f64 / (1u64 << 20) as f64,
                rs.iter().map(|r| r.wrong).sum::<u64>(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }
}
