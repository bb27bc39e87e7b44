//! Grace hash join: when the inner relation's hash table does not fit the
//! budget, both relations are scattered by a hash of the key into
//! partitions on disk, each inner partition small enough for its table,
//! and each pair of partitions is joined in memory (the table built from
//! the inner one, the outer one streamed past it). A partition still too
//! large is partitioned again with another hash (the inner keys are unique,
//! so every level splits them). With several threads, pairs of partitions
//! are joined in parallel, each with its share of the budget.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::spill::{SpillFile, SpillStats, SpillWriter};
use super::{JoinOptions, JoinRecord, JoinReport, JoinSink, Relation, repeated_inner};
use crate::Result;

/// Bytes a hash table entry is charged: 16 B of record, the table's control
/// byte and its load factor (7/8), rounded up for capacity doubling.
pub const TABLE_BYTES_PER_RECORD: u64 = 40;

/// Most partitioning levels (each divides a partition by the fan-out).
const MAX_LEVELS: u32 = 8;

fn bucket(key: u64, level: u32, parts: usize) -> usize {
    let h = super::sink::checksum_of(key, u64::from(level), 0x5bd1_e995);
    (h % parts.max(1) as u64) as usize
}

/// Joins `outer` with `inner` (keys unique) into `sink`.
pub fn join(
    outer: &dyn Relation,
    inner: &dyn Relation,
    sink: &mut dyn JoinSink,
    opts: &JoinOptions,
) -> Result<JoinReport> {
    let threads = opts.threads.max(1);
    // Each worker's table gets an equal share of half the budget.
    let table_bytes = opts.budget.bytes() / 2 / threads as u64;
    let fan_out = opts.budget.open_files(0.25);
    let mut report = JoinReport::default();
    if inner.len().saturating_mul(TABLE_BYTES_PER_RECORD) <= opts.budget.bytes() / 2 {
        // One table for the whole inner relation: no spill.
        let table = build(inner.scan()?, &inner.name())?;
        report.inner_records = table.len() as u64;
        for r in outer.scan()? {
            let (k, po) = r?;
            report.outer_records += 1;
            if let Some(&pi) = table.get(&k) {
                sink.emit(k, po, pi)?;
            }
        }
        return Ok(report);
    }
    let space = opts.spill_space()?;
    let stats = SpillStats::default();
    let parts = usize::try_from(
        inner
            .len()
            .saturating_mul(TABLE_BYTES_PER_RECORD)
            .div_ceil(table_bytes.max(1)),
    )
    .unwrap_or(usize::MAX)
    .clamp(2, fan_out);
    let mut pairs: Vec<(SpillFile, SpillFile, u32)> = Vec::new();
    let inner_parts = scatter(
        inner.scan()?,
        parts,
        0,
        space.path(),
        &stats,
        "inner",
        &mut report.inner_records,
    )?;
    let outer_parts = scatter(
        outer.scan()?,
        parts,
        0,
        space.path(),
        &stats,
        "outer",
        &mut report.outer_records,
    )?;
    report.passes = 1;
    let mut todo: Vec<(SpillFile, SpillFile, u32)> = inner_parts
        .into_iter()
        .zip(outer_parts)
        .map(|(i, o)| (i, o, 1))
        .collect();
    // Split what is still too large.
    while let Some((i, o, level)) = todo.pop() {
        if i.records.saturating_mul(TABLE_BYTES_PER_RECORD) <= table_bytes || i.records <= 1 {
            pairs.push((i, o, level));
            continue;
        }
        if level >= MAX_LEVELS {
            // Uneven hashing at a tiny budget: joined in table-sized
            // chunks of the inner partition instead.
            pairs.push((i, o, level));
            continue;
        }
        report.passes = report.passes.max(level + 1);
        let sub = usize::try_from(
            i.records
                .saturating_mul(TABLE_BYTES_PER_RECORD)
                .div_ceil(table_bytes.max(1)),
        )
        .unwrap_or(usize::MAX)
        .clamp(2, fan_out);
        let mut n = 0;
        let ip = scatter(i.read(&stats)?, sub, level, space.path(), &stats, "inner", &mut n)?;
        let op = scatter(o.read(&stats)?, sub, level, space.path(), &stats, "outer", &mut n)?;
        todo.extend(ip.into_iter().zip(op).map(|(i, o)| (i, o, level + 1)));
    }
    let name = inner.name();
    let chunk = usize::try_from(table_bytes / TABLE_BYTES_PER_RECORD)
        .unwrap_or(usize::MAX)
        .max(1);
    if threads == 1 {
        for (i, o, _) in pairs {
            join_pair(i, o, chunk, &stats, &name, &mut |k, po, pi| sink.emit(k, po, pi))?;
        }
    } else {
        super::parallel::run(
            pairs.into_iter().map(|(i, o, _)| Ok((i, o))),
            threads,
            sink,
            |(i, o), emit| join_pair(i, o, chunk, &stats, &name, emit),
        )?;
    }
    report.spill_bytes_written = stats.written.load(Ordering::Relaxed);
    report.spill_bytes_read = stats.read.load(Ordering::Relaxed);
    Ok(report)
}

/// The table of an inner partition; a repeated key is an error.
fn build(records: impl Iterator<Item = Result<JoinRecord>>, name: &str) -> Result<HashMap<u64, u64>> {
    let mut table = HashMap::new();
    for r in records {
        let (k, p) = r?;
        if table.insert(k, p).is_some() {
            return Err(repeated_inner(name, k));
        }
    }
    Ok(table)
}

/// Joins one pair of partitions in memory: a table of the inner partition
/// (of each `chunk` records of it, if it holds more: the outer partition is
/// then read once per chunk), the outer partition streamed past it.
fn join_pair(
    inner: SpillFile,
    outer: SpillFile,
    chunk: usize,
    stats: &SpillStats,
    name: &str,
    emit: &mut dyn FnMut(u64, u64, u64) -> Result<()>,
) -> Result<()> {
    let mut inner_it = inner.read(stats)?;
    let mut seen_chunks = 0usize;
    loop {
        let table = build(inner_it.by_ref().take(chunk), name)?;
        if table.is_empty() && seen_chunks > 0 {
            return Ok(());
        }
        seen_chunks += 1;
        let last = table.len() < chunk;
        for r in outer.reader(stats)? {
            let (k, po) = r?;
            if let Some(&pi) = table.get(&k) {
                emit(k, po, pi)?;
            }
        }
        if last {
            return Ok(());
        }
    }
}

/// Writes `records` into `parts` spill files by the hash of each key at
/// `level`; counts them into `n`.
fn scatter<'s>(
    records: impl Iterator<Item = Result<JoinRecord>>,
    parts: usize,
    level: u32,
    dir: &Path,
    stats: &'s SpillStats,
    what: &str,
    n: &mut u64,
) -> Result<Vec<SpillFile>> {
    let mut writers: Vec<SpillWriter<'s>> = Vec::with_capacity(parts);
    for _ in 0..parts {
        writers.push(SpillWriter::create(stats.path(dir, what), stats)?);
    }
    for r in records {
        let r = r?;
        *n += 1;
        if let Some(w) = writers.get_mut(bucket(r.0, level, parts)) {
            w.push(r)?;
        }
    }
    writers.into_iter().map(SpillWriter::finish).collect()
}
