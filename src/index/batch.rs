//! Batched lookups (`Index::get_many`, `Index::lower_bound_many`): the
//! batch's keys sorted and deduplicated, the page ranges they need read with
//! many reads in flight ([`ReadStorage::read_many`](crate::storage::ReadStorage::read_many)),
//! and the answers put back in the caller's order.
//!
//! A kind answers a batch in rounds: each round finds, from what is in
//! memory and what the previous round read, the next page range of every
//! key still open, reads all of them at once (identical ranges once), and
//! searches them. A kind whose lookup is one read after the resident layers
//! (a zone map, PGM with its layers resident, the B+-tree with its inner
//! nodes pinned) needs one round; a kind with levels on storage needs one
//! round per level (the B+-tree with `resident=none`, layers read from
//! storage). Every key reads the pages its one-by-one lookup reads, so pages
//! and bytes per lookup are the same; keys repeated in a batch, and keys
//! whose lookups read the same range in the same round, share one read (the
//! layered kinds read each data page once per batch however their keys'
//! ranges overlap: `Lookups` in `index/scan.rs`).

use std::collections::HashMap;

use crate::Result;

/// The distinct keys of a batch, ascending, and where each input key's
/// answer is among them.
#[derive(Debug)]
pub(crate) struct KeyBatch {
    /// Distinct keys, ascending.
    pub(crate) keys: Vec<u64>,
    /// For each input key, the index of its key in `keys`.
    slot: Vec<usize>,
}

impl KeyBatch {
    /// Sorts and deduplicates `keys`.
    pub(crate) fn new(keys: &[u64]) -> Self {
        if keys.windows(2).all(|w| matches!(w, [a, b] if a <= b)) {
            // Already in order (a join's probes): one pass.
            let (keys, slot) = runs_of(keys);
            return KeyBatch { keys, slot };
        }
        let mut sorted: Vec<u64> = keys.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let slot = keys.iter().map(|k| sorted.partition_point(|x| x < k)).collect();
        KeyBatch { keys: sorted, slot }
    }

    /// Appends the answer of each input key, in input order, from the
    /// answers of the distinct keys.
    pub(crate) fn scatter<T: Clone>(&self, answers: &[T], out: &mut Vec<T>) {
        out.reserve(self.slot.len());
        out.extend(self.slot.iter().filter_map(|&s| answers.get(s).cloned()));
    }
}

/// The distinct values of `at` where equal values are adjacent (the page
/// ranges of keys in order), and for each element the index of its value.
pub(crate) fn runs_of<T: PartialEq + Copy>(at: &[T]) -> (Vec<T>, Vec<usize>) {
    let mut distinct: Vec<T> = Vec::new();
    let which = at
        .iter()
        .map(|&p| {
            if distinct.last() != Some(&p) {
                distinct.push(p);
            }
            distinct.len() - 1
        })
        .collect();
    (distinct, which)
}

/// Answers a batch: `answer` gets the distinct keys of `keys`, ascending,
/// and returns one answer each; they are appended to `out` in the order of
/// `keys` (repeats answered once). An empty batch calls nothing. What every
/// kind's `Index::get_many` and `Index::lower_bound_many` do around its
/// own rounds of reads.
pub(crate) fn answer<T: Clone>(
    keys: &[u64],
    out: &mut Vec<T>,
    answer: impl FnOnce(&[u64]) -> Result<Vec<T>>,
) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let batch = KeyBatch::new(keys);
    let answers = answer(&batch.keys)?;
    batch.scatter(&answers, out);
    Ok(())
}

/// Page ranges wanted in one round, each read once however many keys want
/// it.
#[derive(Debug, Default)]
pub(crate) struct RangeSet {
    ranges: Vec<(u64, u64)>,
    index: HashMap<(u64, u64), usize>,
}

impl RangeSet {
    /// The position of `[a, b)` among the ranges to read, adding it.
    pub(crate) fn add(&mut self, a: u64, b: u64) -> usize {
        let next = self.ranges.len();
        *self.index.entry((a, b)).or_insert_with(|| {
            self.ranges.push((a, b));
            next
        })
    }

    /// Reads every range with `read` (one batch) and returns what it read,
    /// in the order of the positions [`RangeSet::add`] handed out.
    pub(crate) fn read<T>(&self, read: impl FnOnce(&[(u64, u64)]) -> Result<Vec<T>>) -> Result<Vec<T>> {
        if self.ranges.is_empty() {
            return Ok(Vec::new());
        }
        read(&self.ranges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_batch_sorts_dedups_and_scatters_back() {
        let b = KeyBatch::new(&[5, 1, 5, 9, 1, 0]);
        assert_eq!(b.keys, vec![0, 1, 5, 9]);
        let answers: Vec<u64> = b.keys.iter().map(|k| k * 10).collect();
        let mut out = vec![7];
        b.scatter(&answers, &mut out);
        assert_eq!(out, vec![7, 50, 10, 50, 90, 10, 0]);
        let empty = KeyBatch::new(&[]);
        let mut out: Vec<u64> = Vec::new();
        empty.scatter(&[], &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn range_set_reads_each_range_once() {
        let mut s = RangeSet::default();
        assert_eq!(s.add(3, 4), 0);
        assert_eq!(s.add(7, 9), 1);
        assert_eq!(s.add(3, 4), 0);
        let got = s
            .read(|r| Ok(r.iter().map(|&(a, b)| a * 100 + b).collect()))
            .unwrap();
        assert_eq!(got, vec![304, 709]);
    }
}
