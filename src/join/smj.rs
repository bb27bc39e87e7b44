//! Sort-merge join: both relations in key order (an external merge sort
//! within the budget where they are not sorted already), then one merge.

use std::sync::atomic::Ordering;

use super::spill::{self, SpillStats};
use super::{JoinOptions, JoinReport, JoinSink, Relation, repeated_inner};
use crate::Result;

/// Joins `outer` with `inner` (keys unique) into `sink`. The outer relation
/// is sorted first, with the whole budget for its runs; then the inner one;
/// the final merges of both share the budget's spill buffers.
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
    // own); each side's final merge half of the files the budget allows.
    let run = opts.budget.records(0.75);
    let fan_in = opts.budget.open_files(0.375);
    let outer_sorted = spill::sorted(outer, run, fan_in, space.path(), &stats, &mut passes)?;
    let inner_sorted = spill::sorted(inner, run, fan_in, space.path(), &stats, &mut passes)?;
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
    report.spill_bytes_written = stats.written.load(Ordering::Relaxed);
    report.spill_bytes_read = stats.read.load(Ordering::Relaxed);
    Ok(report)
}
