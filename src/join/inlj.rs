//! Index nested-loop join: the outer relation read in batches, each batch's
//! keys looked up in the inner relation's index with its batched lookups
//! ([`Index::get_many`]: sorted and deduplicated, every key's pages read
//! with `queue_depth` reads in flight, the kinds' own rounds for dependent
//! reads). The probes come in increasing key order, batch after batch, so
//! consecutive probes reuse the pages they share: an unsorted outer
//! relation is sorted first, as Chesetti's joins on unsorted tables do,
//! by [`JoinOptions::sort`] (an external merge sort, or learned
//! partitioning whose partitions are read back in key order), with half
//! the budget for its runs or partitioning pass and a quarter for its
//! final merge or the partition in memory while the batches probe.

use super::spill::SpillStats;
use super::{JoinOptions, JoinRecord, JoinReport, JoinSink, Relation, report_spill, sort_relation};
use crate::Result;
use crate::index::Index;

/// Joins `outer` with the records of `index` into `sink`.
pub fn join(
    outer: &dyn Relation,
    index: &dyn Index,
    sink: &mut dyn JoinSink,
    opts: &JoinOptions,
) -> Result<JoinReport> {
    // A batch holds its records, keys and answers (about 40 B per record):
    // at most a quarter of the budget per worker.
    let threads = opts.threads.max(1);
    let cap = (opts.budget.bytes() / 4 / 40 / threads as u64).max(1);
    let batch = opts.batch.clamp(1, usize::try_from(cap).unwrap_or(usize::MAX));
    let mut report = JoinReport::default();
    let stats = SpillStats::default();
    // Declared before the scan, so that it outlives it.
    let space = if outer.sorted() {
        None
    } else {
        Some(opts.spill_space()?)
    };
    let mut scan = match &space {
        None => outer.scan()?,
        Some(space) => sort_relation(outer, opts, 0.5, 0.25, space.path(), &stats, &mut report.passes)?,
    };
    let mut outer_records = 0u64;
    let batches = std::iter::from_fn(|| {
        let mut b: Vec<JoinRecord> = Vec::with_capacity(batch);
        for r in scan.by_ref() {
            match r {
                Ok(r) => b.push(r),
                Err(e) => return Some(Err(e)),
            }
            if b.len() == batch {
                break;
            }
        }
        outer_records += b.len() as u64;
        (!b.is_empty()).then_some(Ok(b))
    });
    let probe = |b: Vec<JoinRecord>, emit: &mut dyn FnMut(u64, u64, u64) -> Result<()>| -> Result<()> {
        let keys: Vec<u64> = b.iter().map(|r| r.0).collect();
        let mut got = Vec::with_capacity(keys.len());
        index.get_many(&keys, &mut got)?;
        for (&(k, po), v) in b.iter().zip(got) {
            if let Some(pi) = v {
                emit(k, po, pi)?;
            }
        }
        Ok(())
    };
    if threads == 1 {
        for b in batches {
            probe(b?, &mut |k, o, i| sink.emit(k, o, i))?;
        }
    } else {
        super::parallel::run(batches, threads, sink, probe)?;
    }
    drop(scan);
    report.outer_records = outer_records;
    report.inner_records = outer_records;
    report_spill(&mut report, &stats, space.is_some(), opts);
    Ok(report)
}
