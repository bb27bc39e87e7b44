//! The block cache: checked data blocks of open tables, LRU, sized in bytes.
//!
//! A block enters the cache after its checksum and restart array were
//! checked, with its layout ([`BlockView`]); a hit therefore costs neither a
//! copy nor a checksum (as RocksDB's and LevelDB's block caches hold
//! uncompressed, verified blocks). Tables take an id of their own when they
//! open ([`BlockCache::table_id`]), so blocks of a removed table are never
//! found again; they age out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use lru::LruCache;
use parking_lot::Mutex;

use super::block::BlockView;

/// A checked data block.
#[derive(Debug)]
pub(super) struct CachedBlock {
    pub(super) bytes: Box<[u8]>,
    pub(super) view: BlockView,
}

/// Bytes a cached block is charged beyond its data (entry, map and
/// reference-count overhead), so that many small blocks cannot exceed the
/// budget unseen.
const ENTRY_OVERHEAD: u64 = 64;

/// An LRU cache of checked data blocks, shared by the tables of a store.
#[derive(Debug)]
pub struct BlockCache {
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    next_table: AtomicU64,
}

#[derive(Debug)]
struct State {
    lru: LruCache<(u64, u64), Arc<CachedBlock>>,
    bytes: u64,
    capacity: u64,
}

/// Counters and occupancy of a [`BlockCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCacheStats {
    /// Lookups that found their block.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Bytes charged for the blocks held now.
    pub bytes: u64,
    /// The most it may hold, in bytes.
    pub capacity: u64,
    /// Blocks held now.
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

    /// Changes the capacity, evicting the least recently used blocks
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

    /// Drops every block (counters are kept).
    pub fn clear(&self) {
        let mut s = self.state.lock();
        s.lru.clear();
        s.bytes = 0;
    }

    pub(super) fn get(&self, table: u64, block: u64) -> Option<Arc<CachedBlock>> {
        let hit = self.state.lock().lru.get(&(table, block)).cloned();
        match hit {
            Some(_) => self.hits.fetch_add(1, Relaxed),
            None => self.misses.fetch_add(1, Relaxed),
        };
        hit
    }

    pub(super) fn insert(&self, table: u64, block: u64, b: Arc<CachedBlock>) {
        let cost = charge(&b);
        let mut s = self.state.lock();
        if cost > s.capacity {
            return;
        }
        if let Some(old) = s.lru.put((table, block), b) {
            s.bytes -= charge(&old);
        }
        s.bytes += cost;
        s.evict();
    }
}

fn charge(b: &CachedBlock) -> u64 {
    b.bytes.len() as u64 + ENTRY_OVERHEAD
}

impl State {
    fn evict(&mut self) {
        while self.bytes > self.capacity {
            match self.lru.pop_lru() {
                Some((_, b)) => self.bytes -= charge(&b),
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

    fn block(len: usize) -> Arc<CachedBlock> {
        // A view of an empty block is not needed to test the accounting.
        Arc::new(CachedBlock {
            bytes: vec![7u8; len].into_boxed_slice(),
            view: BlockView::for_tests(),
        })
    }

    #[test]
    fn holds_at_most_its_capacity_and_evicts_the_least_recent() {
        let c = BlockCache::new(3 * (1000 + ENTRY_OVERHEAD));
        let t = c.table_id();
        for b in 0..3 {
            c.insert(t, b, block(1000));
        }
        assert!(c.get(t, 0).is_some()); // 0 is now the most recent
        c.insert(t, 3, block(1000));
        assert!(c.get(t, 1).is_none(), "the least recent goes first");
        assert!(c.get(t, 0).is_some() && c.get(t, 3).is_some());
        let s = c.stats();
        assert_eq!((s.blocks, s.bytes), (3, 3 * (1000 + ENTRY_OVERHEAD)));
        assert_eq!((s.hits, s.misses), (3, 1));
        c.resize(1000 + ENTRY_OVERHEAD);
        assert_eq!(c.stats().blocks, 1);
        c.insert(t, 9, block(5000)); // larger than the whole cache: not kept
        assert_eq!(c.stats().blocks, 1);
        c.insert(t, 3, block(1000)); // a replacement is charged once
        assert_eq!(c.stats().bytes, 1000 + ENTRY_OVERHEAD);
        c.clear();
        assert_eq!(c.stats().bytes, 0);
        assert_ne!(c.table_id(), t);
    }
}
