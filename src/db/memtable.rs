//! The dynamic stage: an in-memory ordered map from key to the newest write.
//!
//! Entries live in sorted chunks of at most [`CHUNK`] slots (a two-level
//! B+-tree: a sorted vector of chunk start keys over sorted chunks), under one
//! reader-writer lock. Every chunk is allocated with a fixed capacity, so the
//! memory the table holds is measured from the structure itself:
//! `chunks × (CHUNK + 1) × 24` bytes plus the two outer vectors.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{RwLock, RwLockReadGuard};

/// Slots per chunk before it splits.
pub(super) const CHUNK: usize = 256;
/// The top bit of a slot's sequence word marks a tombstone.
const TOMBSTONE: u64 = 1 << 63;

/// One key's newest write in a dynamic stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The key.
    pub key: u64,
    seq: u64,
    value: u64,
}

impl Slot {
    fn new(key: u64, seq: u64, value: Option<u64>) -> Self {
        match value {
            Some(v) => Slot { key, seq, value: v },
            None => Slot {
                key,
                seq: seq | TOMBSTONE,
                value: 0,
            },
        }
    }

    /// Sequence number of the write.
    pub(crate) fn seq(&self) -> u64 {
        self.seq & !TOMBSTONE
    }

    /// The value written, or `None` for a delete (a tombstone).
    pub(crate) fn value(&self) -> Option<u64> {
        (self.seq & TOMBSTONE == 0).then_some(self.value)
    }
}

#[derive(Debug, Default)]
struct Chunks {
    /// First key of every chunk (sorted).
    firsts: Vec<u64>,
    /// Chunks of slots, each sorted, each non-empty, key ranges disjoint.
    chunks: Vec<Vec<Slot>>,
}

impl Chunks {
    fn memory_bytes(&self) -> u64 {
        let slots = self.chunks.len() * (CHUNK + 1) * std::mem::size_of::<Slot>();
        let outer = self.firsts.capacity() * 8 + self.chunks.capacity() * std::mem::size_of::<Vec<Slot>>();
        (slots + outer) as u64
    }

    /// Index of the chunk that holds (or would hold) `key`.
    fn chunk_of(&self, key: u64) -> usize {
        self.firsts.partition_point(|&f| f <= key).saturating_sub(1)
    }
}

/// A dynamic stage: concurrent readers, writers serialised by a lock held
/// only for the in-memory insert. `Send + Sync`.
#[derive(Debug, Default)]
pub(crate) struct MemTable {
    inner: RwLock<Chunks>,
    bytes: AtomicU64,
    len: AtomicU64,
}

/// A read guard over a table that no longer changes (a frozen stage), for
/// streaming it in key order.
pub(crate) struct MemReadGuard<'a> {
    guard: RwLockReadGuard<'a, Chunks>,
}

impl MemReadGuard<'_> {
    /// Every slot in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.guard.chunks.iter().flatten()
    }
}

impl MemTable {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records a write of sequence number `seq` (`None` = delete). The write
    /// replaces the key's slot if `seq` is at least the slot's sequence, so
    /// the outcome does not depend on the order concurrent writers insert in,
    /// and later operations of one batch (same `seq`) win.
    pub(crate) fn apply(&self, key: u64, seq: u64, value: Option<u64>) {
        let new = Slot::new(key, seq, value);
        let mut c = self.inner.write();
        if c.chunks.is_empty() {
            let mut first = Vec::with_capacity(CHUNK + 1);
            first.push(new);
            c.chunks.push(first);
            c.firsts.push(key);
            self.len.store(1, Ordering::Relaxed);
            self.bytes.store(c.memory_bytes(), Ordering::Relaxed);
            return;
        }
        let ci = c.chunk_of(key);
        let last_chunk = ci + 1 == c.chunks.len();
        let Some(chunk) = c.chunks.get_mut(ci) else {
            return;
        };
        let pos = match chunk.binary_search_by_key(&key, |s| s.key) {
            Ok(i) => {
                if let Some(slot) = chunk.get_mut(i) {
                    if seq >= slot.seq() {
                        *slot = new;
                    }
                }
                return;
            }
            Err(i) => i,
        };
        chunk.insert(pos, new);
        let appended = last_chunk && pos + 1 == chunk.len();
        let split = if chunk.len() > CHUNK {
            // Appends fill the left chunk completely (sequential loads keep
            // chunks full); other inserts split in the middle.
            let at = if appended { CHUNK } else { chunk.len() / 2 };
            let mut right = Vec::with_capacity(CHUNK + 1);
            right.extend(chunk.drain(at..));
            Some(right)
        } else {
            None
        };
        if pos == 0 {
            if let Some(f) = c.firsts.get_mut(ci) {
                *f = key;
            }
        }
        if let Some(right) = split {
            let first = right.first().map_or(key, |s| s.key);
            c.chunks.insert(ci + 1, right);
            c.firsts.insert(ci + 1, first);
        }
        self.len.fetch_add(1, Ordering::Relaxed);
        self.bytes.store(c.memory_bytes(), Ordering::Relaxed);
    }

    /// The newest write of `key` in this table.
    pub(crate) fn get(&self, key: u64) -> Option<Slot> {
        let c = self.inner.read();
        let chunk = c.chunks.get(c.chunk_of(key))?;
        chunk
            .binary_search_by_key(&key, |s| s.key)
            .ok()
            .and_then(|i| chunk.get(i))
            .copied()
    }

    /// Appends to `out` up to `max` slots with keys `>= from`, in key order.
    pub(crate) fn range_from(&self, from: u64, max: usize, out: &mut Vec<Slot>) {
        let c = self.inner.read();
        let mut ci = c.chunk_of(from);
        let mut taken = 0;
        while let Some(chunk) = c.chunks.get(ci) {
            let start = chunk.partition_point(|s| s.key < from);
            for s in chunk.iter().skip(start) {
                if taken == max {
                    return;
                }
                out.push(*s);
                taken += 1;
            }
            ci += 1;
        }
    }

    /// Streams the table in key order while it is read-locked (writers to it
    /// wait); meant for frozen tables, which have no writers.
    pub(crate) fn read(&self) -> MemReadGuard<'_> {
        MemReadGuard {
            guard: self.inner.read(),
        }
    }

    /// A copy with every chunk full (the last one may be partial): ~24 bytes
    /// per key instead of the ~33 a table grown by random inserts holds (its
    /// chunks split in halves). For a table that no longer changes (a frozen
    /// stage); writers to `self` wait while it is copied.
    pub(crate) fn compacted(&self) -> MemTable {
        let c = self.inner.read();
        let mut out = Chunks::default();
        let mut cur: Vec<Slot> = Vec::with_capacity(CHUNK + 1);
        for s in c.chunks.iter().flatten() {
            if cur.len() == CHUNK {
                let full = std::mem::replace(&mut cur, Vec::with_capacity(CHUNK + 1));
                out.firsts.push(full.first().map_or(0, |f| f.key));
                out.chunks.push(full);
            }
            cur.push(*s);
        }
        if let Some(f) = cur.first() {
            out.firsts.push(f.key);
            out.chunks.push(cur);
        }
        out.firsts.shrink_to_fit();
        out.chunks.shrink_to_fit();
        MemTable {
            bytes: AtomicU64::new(out.memory_bytes()),
            len: AtomicU64::new(self.len()),
            inner: RwLock::new(out),
        }
    }

    /// Bytes the table holds in memory (measured from its chunks).
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Number of keys (puts and tombstones).
    pub(crate) fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether the table holds no key.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    #[test]
    fn matches_a_btreemap_and_keeps_the_highest_sequence() {
        let t = MemTable::new();
        let mut model: BTreeMap<u64, (u64, Option<u64>)> = BTreeMap::new();
        let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        for i in 0..60_000u64 {
            let key = if i % 3 == 0 { i } else { r.random_range(0..20_000) };
            let seq = r.random_range(0..1_000_000);
            let value = (r.random_range(0..4) != 0).then_some(r.random::<u64>());
            t.apply(key, seq, value);
            let e = model.entry(key).or_insert((seq, value));
            if seq >= e.0 {
                *e = (seq, value);
            }
        }
        assert_eq!(t.len(), model.len() as u64);
        let all: Vec<(u64, u64, Option<u64>)> =
            t.read().iter().map(|s| (s.key, s.seq(), s.value())).collect();
        let want: Vec<(u64, u64, Option<u64>)> = model.iter().map(|(&k, &(s, v))| (k, s, v)).collect();
        assert_eq!(all, want);
        for k in [0u64, 1, 2, 19_999, 20_000, 59_997, u64::MAX] {
            assert_eq!(t.get(k).map(|s| s.value()), model.get(&k).map(|e| e.1), "{k}");
        }
        let mut out = Vec::new();
        t.range_from(10_000, 500, &mut out);
        let want: Vec<u64> = model.range(10_000..).take(500).map(|(&k, _)| k).collect();
        assert_eq!(out.iter().map(|s| s.key).collect::<Vec<_>>(), want);
        assert!(t.memory_bytes() >= t.len() * 24);
    }

    #[test]
    fn compacted_copy_holds_the_same_slots_in_full_chunks() {
        let t = MemTable::new();
        let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(5);
        for i in 0..50_000u64 {
            let k = r.random::<u64>() >> 1;
            t.apply(k, i, (i % 9 != 0).then_some(i));
        }
        t.apply(u64::MAX, 1, Some(1));
        let c = t.compacted();
        let a: Vec<Slot> = t.read().iter().copied().collect();
        let b: Vec<Slot> = c.read().iter().copied().collect();
        assert!(a == b);
        assert_eq!(c.len(), t.len());
        for s in a.iter().step_by(97).chain(a.last()) {
            assert_eq!(c.get(s.key), Some(*s));
            assert_eq!(c.get(s.key.wrapping_add(1)), t.get(s.key.wrapping_add(1)));
        }
        let (per_key_t, per_key_c) = (
            t.memory_bytes() as f64 / t.len() as f64,
            c.memory_bytes() as f64 / c.len() as f64,
        );
        assert!(
            per_key_t > 30.0 && per_key_c < 24.5,
            "{per_key_t} -> {per_key_c} bytes per key"
        );
        let mut out = Vec::new();
        c.range_from(a[1000].key, 300, &mut out);
        assert!(out[..] == a[1000..1300]);
        assert!(MemTable::new().compacted().is_empty());
    }

    #[test]
    fn sequential_appends_fill_chunks() {
        let t = MemTable::new();
        for k in 0..(CHUNK as u64 * 40) {
            t.apply(k, k, Some(k));
        }
        let per_key = t.memory_bytes() as f64 / t.len() as f64;
        assert!(per_key < 26.0, "{per_key} bytes per key");
        t.apply(u64::MAX, 0, None);
        assert_eq!(t.get(u64::MAX).unwrap().value(), None);
    }
}
