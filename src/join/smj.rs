//! Sort-merge join: both relations in key order (sorted within the budget
//! where they are not sorted already, by [`JoinOptions::sort`]: an external
//! merge sort or learned partitioning), then one merge.

use super::spill::SpillStats;
use super::{JoinOptions, JoinReport, JoinSink, Relation, repeated_inner, report_spill, sort_relation};
use crate::Result;

/// Joins `outer` with `inner` (keys unique) into `sink`. The outer relation
/// is sorted first, with three quarters of the budget for its runs (or its
/// partitioning pass); then the inner one; the final merges of both (or
/// the partitions read back) share three quarters of the budget.
pub fn join(
    outer: &dyn Relation,
    inner: &dyn Relation,
    sink: &mut dyn JoinSink,
    opts: &JoinOptions,
) -> Result<JoinReport> {
    let space = opts.spill_space()?;
    let stats = SpillStats::default();
    let mut passes = 0;
    // Sort runs take 3/4 of the budget (the rest: buffers, the program's
    // own); each side's final merge 3/8.
    let outer_sorted = sort_relation(outer, opts, 0.75, 0.375, space.path(), &stats, &mut passes)?;
    let inner_sorted = sort_relation(inner, opts, 0.75, 0.375, space.path(), &stats, &mut passes)?;
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
