//! The block cache: checked data blocks of open tables, and the decoded
//! handles, indexes and filters of unpinned tables, LRU, sized in bytes.
//!
//! A block enters the cache after its checksum and restart array were
//! checked, with its layout ([`BlockView`]); a hit therefore costs neither a
//! copy nor a checksum (as RocksDB's and LevelDB's block caches hold
//! uncompressed, verified blocks). An unpinned table's sections enter it
//! decoded, after their checksums and decoding were checked, charged their
//! decoded bytes (RocksDB's `cache_index_and_filter_blocks`). Tables take
//! an id of their own when they open ([`BlockCache::table_id`]), so entries
//! of a removed table are never found again; they age out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use lru::LruCache;
use parking_lot::Mutex;

use super::block::BlockView;
use super::bloom::Bloom;
use super::sections::IndexSections;

/// A checked data block.
#[derive(Debug)]
pub(super) struct CachedBlock {
    pub(super) bytes: Box<[u8]>,
    pub(super) view: BlockView,
}

/// What a cache entry holds of its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Part {
    /// Data block number `n`.
    Block(u64),
    /// The block handles and the index (one entry: lookups need both).
    Index,
    /// The Bloom filter.
    Filter,
}

/// A cache entry.
#[derive(Debug, Clone)]
pub(super) enum Entry {
    /// A checked data block.
    Block(Arc<CachedBlock>),
    /// An unpinned table's decoded handles and index.
    Index(Arc<IndexSections>),
    /// An unpinned table's decoded filter.
    Filter(Arc<Bloom>),
}

impl Entry {
    /// The block, if this is one.
    pub(super) fn into_block(self) -> Option<Arc<CachedBlock>> {
        match self {
            Entry::Block(b) => Some(b),
            _ => None,
        }
    }

    /// The handles and index, if this is them.
    pub(super) fn into_index(self) -> Option<Arc<IndexSections>> {
        match self {
            Entry::Index(s) => Some(s),
            _ => None,
        }
    }

    /// The filter, if this is one.
    pub(super) fn into_filter(self) -> Option<Arc<Bloom>> {
        match self {
            Entry::Filter(f) => Some(f),
            _ => None,
        }
    }

    /// Bytes charged: the data or decoded bytes, plus [`ENTRY_OVERHEAD`].
    fn charge(&self) -> u64 {
        ENTRY_OVERHEAD
            + match self {
                Entry::Block(b) => b.bytes.len() as u64,
                Entry::Index(s) => s.memory_bytes(),
                Entry::Filter(f) => f.memory_bytes(),
            }
    }
}

/// Bytes a cache entry is charged beyond its data (entry, map and
/// reference-count overhead), so that many small blocks cannot exceed the
/// budget unseen.
const ENTRY_OVERHEAD: u64 = 64;

/// An LRU cache of checked data blocks (and unpinned tables' sections),
/// shared by the tables of a store.
#[derive(Debug)]
pub struct BlockCache {
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    next_table: AtomicU64,
}

#[derive(Debug)]
struct State {
    lru: LruCache<(u64, Part), Entry>,
    bytes: u64,
    capacity: u64,
}

/// Counters and occupancy of a [`BlockCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCacheStats {
    /// Lookups that found their block (or sections).
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Bytes charged for the entries held now.
    pub bytes: u64,
    /// The most it may hold, in bytes.
    pub capacity: u64,
    /// Entries held now (data blocks, and unpinned tables' sections).
    pub blocks: u64,
}

impl BlockCache {
    /// An empty cache holding at most `capacity` bytes.
    pub fn new(capacity: u64) -> BlockCache {
        BlockCache {
            state: Mutex::new(State {
                lru: LruCache::unbounded(),
                bytes: 0,
                capacity,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            next_table: AtomicU64::new(1),
        }
    }

    /// A fresh id for a table that reads through this cache.
    pub fn table_id(&self) -> u64 {
        self.next_table.fetch_add(1, Relaxed)
    }

    /// Changes the capacity, evicting the least recently used entries
    /// beyond it.
    pub fn resize(&self, capacity: u64) {
        let mut s = self.state.lock();
        s.capacity = capacity;
        s.evict();
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> BlockCacheStats {
        let s = self.state.lock();
        BlockCacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            bytes: s.bytes,
            capacity: s.capacity,
            blocks: s.lru.len() as u64,
        }
    }

    /// Drops every entry (counters are kept).
    pub fn clear(&self) {
        let mut s = self.state.lock();
        s.lru.clear();
        s.bytes = 0;
    }

    /// Entry `part` of table `table`, if held (it becomes the most recent).
    pub(super) fn get(&self, table: u64, part: Part) -> Option<Entry> {
        let hit = self.state.lock().lru.get(&(table, part)).cloned();
        match hit {
            Some(_) => self.hits.fetch_add(1, Relaxed),
            None => self.misses.fetch_add(1, Relaxed),
        };
        hit
    }

    /// Adds entry `part` of table `table` (replacing one held), evicting
    /// the least recent beyond the capacity; an entry larger than the whole
    /// capacity is not kept.
    pub(super) fn insert(&self, table: u64, part: Part, e: Entry) {
        let cost = e.charge();
        let mut s = self.state.lock();
        if cost > s.capacity {
            return;
        }
        if let Some(old) = s.lru.put((table, part), e) {
            s.bytes -= old.charge();
        }
        s.bytes += cost;
        s.evict();
    }
}

impl State {
    fn evict(&mut self) {
        while self.bytes > self.capacity {
            match self.lru.pop_lru() {
                Some((_, e)) => self.bytes -= e.charge(),
                None => {
                    self.bytes = 0;
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(len: usize) -> Entry {
        // A view of an empty block is not needed to test the accounting.
        Entry::Block(Arc::new(CachedBlock {
            bytes: vec![7u8; len].into_boxed_slice(),
            view: BlockView::for_tests(),
        }))
    }

    fn b(n: u64) -> Part {
        Part::Block(n)
    }

    #[test]
    fn holds_at_most_its_capacity_and_evicts_the_least_recent() {
        let c = BlockCache::new(3 * (1000 + ENTRY_OVERHEAD));
        let t = c.table_id();
        for i in 0..3 {
            c.insert(t, b(i), block(1000));
        }
        assert!(c.get(t, b(0)).is_some()); // 0 is now the most recent
        c.insert(t, b(3), block(1000));
        assert!(c.get(t, b(1)).is_none(), "the least recent goes first");
        assert!(c.get(t, b(0)).is_some() && c.get(t, b(3)).is_some());
        let s = c.stats();
        assert_eq!((s.blocks, s.bytes), (3, 3 * (1000 + ENTRY_OVERHEAD)));
        assert_eq!((s.hits, s.misses), (3, 1));
        c.resize(1000 + ENTRY_OVERHEAD);
        assert_eq!(c.stats().blocks, 1);
        c.insert(t, b(9), block(5000)); // larger than the whole cache: not kept
        assert_eq!(c.stats().blocks, 1);
        c.insert(t, b(3), block(1000)); // a replacement is charged once
        assert_eq!(c.stats().bytes, 1000 + ENTRY_OVERHEAD);
        c.clear();
        assert_eq!(c.stats().bytes, 0);
        assert_ne!(c.table_id(), t);
    }

    /// A table's filter and index entries are keyed apart from its blocks
    /// (and from other tables'), charged their decoded bytes, and evicted
    /// like blocks.
    #[test]
    fn sections_have_a_key_space_of_their_own_and_are_charged_decoded_bytes() {
        let c = BlockCache::new(10_000);
        let (t, u) = (c.table_id(), c.table_id());
        let hashes: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let f = Arc::new(Bloom::build(&hashes, 10));
        let want = f.memory_bytes() + ENTRY_OVERHEAD;
        c.insert(t, Part::Filter, Entry::Filter(f));
        assert_eq!(c.stats().bytes, want);
        assert!(c.get(t, b(0)).is_none() && c.get(t, Part::Index).is_none());
        assert!(c.get(u, Part::Filter).is_none());
        let hit = c.get(t, Part::Filter).unwrap();
        assert!(hit.clone().into_block().is_none() && hit.clone().into_index().is_none());
        assert!(hit.into_filter().is_some());
        c.insert(t, b(0), block(10_000 - 2 * ENTRY_OVERHEAD as usize - 100));
        assert!(c.get(t, Part::Filter).is_none(), "evicted for the block");
        assert!(c.stats().bytes <= 10_000);
    }
}
