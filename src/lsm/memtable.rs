//! The memtable: a concurrent skiplist of internal keys
//! (`crossbeam-skiplist`), ordered by [`key::compare`], with byte accounting.
//!
//! Writers insert concurrently; readers never block. Every entry is a
//! distinct internal key (each write of a batch has its own sequence
//! number), so an insert never replaces anything.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_skiplist::SkipMap;

use crate::Result;
use crate::lsm::key::{self, InternalIterator, ValueKind};

/// Bytes charged per entry on top of its key and value: the skiplist node
/// (tower pointers, reference count, lengths) and the two heap headers.
pub(super) const ENTRY_OVERHEAD: u64 = 80;

/// An internal key ordered by [`key::compare`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct IKey(pub(super) Vec<u8>);

impl Ord for IKey {
    fn cmp(&self, other: &Self) -> Ordering {
        key::compare(&self.0, &other.0)
    }
}

impl PartialOrd for IKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// What a lookup found for a user key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Found {
    /// The newest visible version is a value.
    Value(Vec<u8>),
    /// The newest visible version is a tombstone.
    Deleted,
}

impl Found {
    /// The lookup result of an entry of kind `kind` holding `value`.
    pub(super) fn of(kind: ValueKind, value: Vec<u8>) -> Found {
        match kind {
            ValueKind::Put => Found::Value(value),
            ValueKind::Delete => Found::Deleted,
        }
    }
}

/// A sorted in-memory table of internal keys.
#[derive(Debug, Default)]
pub(super) struct MemTable {
    map: SkipMap<IKey, Arc<[u8]>>,
    bytes: AtomicU64,
    max_seq: AtomicU64,
}

impl MemTable {
    /// An empty memtable.
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// Inserts one write.
    pub(super) fn insert(&self, user_key: &[u8], seq: u64, value: Option<&[u8]>) {
        let kind = if value.is_some() {
            ValueKind::Put
        } else {
            ValueKind::Delete
        };
        let ikey = key::encode(user_key, seq, kind);
        let v: Arc<[u8]> = Arc::from(value.unwrap_or_default());
        let charge = ikey.len() as u64 + v.len() as u64 + ENTRY_OVERHEAD;
        self.map.insert(IKey(ikey), v);
        self.bytes.fetch_add(charge, Relaxed);
        self.max_seq.fetch_max(seq, Relaxed);
    }

    /// The newest version of `user_key` with sequence number `<= seq`.
    pub(super) fn get(&self, user_key: &[u8], seq: u64) -> Option<Found> {
        let lookup = IKey(key::lookup_key(user_key, seq));
        let e = self.map.lower_bound(Bound::Included(&lookup))?;
        let p = key::parse(&e.key().0)?;
        (p.user_key == user_key).then(|| Found::of(p.kind, e.value().to_vec()))
    }

    /// Bytes charged (keys, values and per-entry overhead).
    pub(super) fn memory_bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    /// Whether the table holds nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The highest sequence number inserted (0 if none).
    pub(super) fn max_seq(&self) -> u64 {
        self.max_seq.load(Relaxed)
    }

    /// A forward iterator over the entries ([`MemIter`]).
    pub(super) fn iter(self: &Arc<Self>) -> MemIter {
        MemIter {
            table: self.clone(),
            chunk: std::collections::VecDeque::new(),
            more: false,
            next_len: FIRST_CHUNK,
        }
    }
}

/// Most entries a [`MemIter`] copies out per skiplist search: the first
/// chunk after a seek holds [`FIRST_CHUNK`], each next one twice as many
/// (a seek that reads one entry copies few; a scan soon copies 64).
const ITER_CHUNK: usize = 64;
const FIRST_CHUNK: usize = 4;

/// An [`InternalIterator`] over a memtable. It copies the entries out a
/// chunk at a time (one skiplist search per chunk of up to [`ITER_CHUNK`]
/// entries, not one per step), so an entry inserted behind the chunk after it was read may
/// be missed: reads at a sequence number never need one (every entry at or
/// below a visible sequence number is in the table before that number
/// becomes visible), and frozen memtables do not change.
#[derive(Debug)]
pub(super) struct MemIter {
    table: Arc<MemTable>,
    /// The current entry first.
    chunk: std::collections::VecDeque<(IKey, Arc<[u8]>)>,
    /// Whether the table may hold entries after the chunk.
    more: bool,
    /// Entries the next chunk copies.
    next_len: usize,
}

impl MemIter {
    /// Reads the chunk starting at `bound` (`first`: right after a seek).
    fn fill(&mut self, bound: Bound<&IKey>, first: bool) {
        let len = if first { FIRST_CHUNK } else { self.next_len };
        self.next_len = (len * 2).min(ITER_CHUNK);
        self.chunk.clear();
        self.chunk.extend(
            self.table
                .map
                .range((bound, Bound::Unbounded))
                .take(len)
                .map(|e| (e.key().clone(), e.value().clone())),
        );
        self.more = self.chunk.len() == len;
    }
}

impl InternalIterator for MemIter {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let t = IKey(target.to_vec());
        self.fill(Bound::Included(&t), true);
        Ok(())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.fill(Bound::Unbounded, true);
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if self.chunk.len() > 1 || !self.more {
            self.chunk.pop_front();
        } else if let Some((k, _)) = self.chunk.pop_front() {
            self.fill(Bound::Excluded(&k), false);
        }
        Ok(())
    }

    fn valid(&self) -> bool {
        !self.chunk.is_empty()
    }

    fn key(&self) -> &[u8] {
        self.chunk.front().map_or(&[], |(k, _)| &k.0)
    }

    fn value(&self) -> &[u8] {
        self.chunk.front().map_or(&[], |(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Iteration and seeks across chunk boundaries give every entry once,
    /// in order.
    #[test]
    fn iteration_crosses_chunks() {
        let m = Arc::new(MemTable::new());
        let n = 3 * ITER_CHUNK as u64 + 5;
        for i in 0..n {
            m.insert(&(i * 7 % n).to_be_bytes(), i + 1, Some(b"v"));
        }
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push(u64::from_be_bytes(key::user_key(it.key()).try_into().unwrap()));
            it.next().unwrap();
        }
        assert_eq!(seen, (0..n).collect::<Vec<_>>());
        for start in [0, 1, ITER_CHUNK as u64 - 1, ITER_CHUNK as u64, n - 1] {
            it.seek(&key::lookup_key(&start.to_be_bytes(), u64::MAX >> 8))
                .unwrap();
            let mut count = 0;
            while it.valid() {
                count += 1;
                it.next().unwrap();
            }
            assert_eq!(count, n - start, "from {start}");
        }
    }

    #[test]
    fn newest_visible_version_and_order() {
        let m = Arc::new(MemTable::new());
        m.insert(b"b", 1, Some(b"b1"));
        m.insert(b"a", 2, Some(b"a2"));
        m.insert(b"b", 3, None);
        m.insert(b"b", 5, Some(b"b5"));
        m.insert(b"ab", 4, Some(b"ab4"));
        assert_eq!(m.get(b"b", 10), Some(Found::Value(b"b5".to_vec())));
        assert_eq!(m.get(b"b", 4), Some(Found::Deleted));
        assert_eq!(m.get(b"b", 2), Some(Found::Value(b"b1".to_vec())));
        assert_eq!(m.get(b"b", 0), None);
        assert_eq!(m.get(b"c", 10), None);
        assert_eq!(m.get(b"", 10), None);
        assert_eq!(m.max_seq(), 5);
        assert!(m.memory_bytes() >= 5 * ENTRY_OVERHEAD);
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut seen = Vec::new();
        while it.valid() {
            let p = key::parse(it.key()).unwrap();
            seen.push((p.user_key.to_vec(), p.seq));
            it.next().unwrap();
        }
        let want: Vec<(Vec<u8>, u64)> = vec![
            (b"a".to_vec(), 2),
            (b"ab".to_vec(), 4),
            (b"b".to_vec(), 5),
            (b"b".to_vec(), 3),
            (b"b".to_vec(), 1),
        ];
        assert_eq!(seen, want);
        it.seek(&key::lookup_key(b"b", 4)).unwrap();
        assert_eq!(key::parse(it.key()).unwrap().seq, 3);
    }
}
