//! Sort-merge join: both relations in key order (sorted within the budget
//! where they are not sorted already, by [`JoinOptions::sort`]: an external
//! merge sort or learned partitioning), then one merge.

use super::spill::SpillStats;
use super::{
    JoinOptions, JoinReport, JoinSink, Relation, SortMethod, repeated_inner, report_spill, sort_relation,
};
use crate::Result;

/// Joins `outer` with `inner` (keys unique) into `sink`. The outer relation
/// is sorted first, then the inner one, each with three eighths of the
/// budget for its runs (three quarters for a partitioning pass); the final
/// merges of both (or the partitions read back) share three quarters of
/// the budget.
pub fn join(
    outer: &dyn Relation,
    inner: &dyn Relation,
    sink: &mut dyn JoinSink,
    opts: &JoinOptions,
) -> Result<JoinReport> {
    let space = opts.spill_space()?;
    let stats = SpillStats::default();
    let mut passes = 0;
    // Each side's final merge (or partitions read back) gets 3/8 of the
    // budget. The external sort keeps a side that fits its runs in memory
    // through the merge, so its runs get 3/8 too (both sides held at once
    // stay within 3/4); learned partitioning frees its pass memory before
    // reading back, so its pass may take 3/4.
    let run_share = match opts.sort {
        SortMethod::External => 0.375,
        SortMethod::Learned => 0.75,
    };
    let outer_sorted = sort_relation(outer, opts, run_share, 0.375, space.path(), &stats, &mut passes)?;
    let inner_sorted = sort_relation(inner, opts, run_share, 0.375, space.path(), &stats, &mut passes)?;
    let mut report = JoinReport {
        passes,
        ..JoinReport::default()
    };
    let mut outer_it = outer_sorted.peekable();
    let mut prev: Option<u64> = None;
    for r in inner_sorted {
        let (k, pi) = r?;
        report.inner_records += 1;
        if prev == Some(k) {
            return Err(repeated_inner(&inner.name(), k));
        }
        prev = Some(k);
        while let Some(o) = outer_it.peek() {
            let (ok, po) = match o {
                Ok(x) => *x,
                Err(_) => match outer_it.next() {
                    Some(Err(e)) => return Err(e),
                    _ => break,
                },
            };
            if ok > k {
                break;
            }
            outer_it.next();
            report.outer_records += 1;
            if ok == k {
                sink.emit(k, po, pi)?;
            }
        }
        if outer_it.peek().is_none() {
            break;
        }
    }
    // The rest of the outer relation (past the inner's last key) is not
    // read: it cannot match.
    drop(outer_it);
    report_spill(&mut report, &stats, !outer.sorted() || !inner.sorted(), opts);
    Ok(report)
}
