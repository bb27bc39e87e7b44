//! What a store reports about itself ([`StoreStats`]) and the checks of
//! [`Store::verify`] ([`VerifyReport`]).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

use crate::Error;
use crate::Result;
use crate::lsm::key::{self, InternalIterator};
use crate::storage::IoSnapshot;

use super::Store;
use super::manifest::table_name;

/// Counters of a store's work since it was opened.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) user_bytes_written: AtomicU64,
    pub(super) wal_bytes: AtomicU64,
    pub(super) flush_bytes: AtomicU64,
    pub(super) flushes: AtomicU64,
    pub(super) compactions: AtomicU64,
    pub(super) compaction_bytes_read: AtomicU64,
    pub(super) compaction_bytes_written: AtomicU64,
    pub(super) compaction_nanos: AtomicU64,
    pub(super) flush_nanos: AtomicU64,
    pub(super) train_nanos: AtomicU64,
    pub(super) stall_micros: AtomicU64,
    pub(super) slowdown_writes: AtomicU64,
}

/// One level's tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LevelStats {
    /// Tables.
    pub files: u64,
    /// Bytes of their files.
    pub bytes: u64,
    /// Entries (internal keys, tombstones and old versions included).
    pub entries: u64,
    /// Resident index bytes of its tables (block handles included).
    pub index_bytes: u64,
    /// Resident Bloom filter bytes of its tables.
    pub filter_bytes: u64,
}

/// A store's memory by component, its levels, and its work since it was
/// opened (counters start at 0 on every open).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StoreStats {
    /// The configured budget ([`super::Options::memory_bytes`]).
    pub memory_budget: u64,
    /// Bytes of the active memtable.
    pub memtable_bytes: u64,
    /// Frozen memtables waiting for their flush.
    pub immutable_memtables: u64,
    /// Bytes of the frozen memtables.
    pub immutable_bytes: u64,
    /// Resident index bytes of every open table (0 for unpinned tables,
    /// [`super::Options::pin_tables`]: what they load is in
    /// `block_cache_bytes`).
    pub index_bytes: u64,
    /// Resident Bloom filter bytes of every open table (0 when unpinned).
    pub filter_bytes: u64,
    /// Bytes the block cache holds now (data blocks, and the decoded
    /// handles, indexes and filters of unpinned tables).
    pub block_cache_bytes: u64,
    /// The block cache's capacity in bytes.
    pub block_cache_capacity: u64,
    /// Block cache hits and misses (pages).
    pub block_cache_hits: u64,
    /// Pages read from storage because the cache did not hold them.
    pub block_cache_misses: u64,
    /// Per level L0..L6.
    pub levels: Vec<LevelStats>,
    /// Bytes of keys and values written by the user.
    pub user_bytes_written: u64,
    /// Bytes appended to the log (records and batch headers).
    pub wal_bytes: u64,
    /// Bytes of the tables flushes wrote.
    pub flush_bytes: u64,
    /// Bytes of entries compactions read.
    pub compaction_bytes_read: u64,
    /// Bytes of the tables compactions wrote.
    pub compaction_bytes_written: u64,
    /// Compactions (moves included).
    pub compactions: u64,
    /// Flushes.
    pub flushes: u64,
    /// Time spent training table indexes (flushes and compactions): fitting
    /// (or, for `fp`, encoding) each table's index once its entries are
    /// written; Bloom filters and I/O not included.
    pub train_nanos: u64,
    /// Time spent in compactions, from the pick to the installed version:
    /// merging, table writes and syncs, training, the manifest edit; the
    /// flushes a long compaction runs between its entries are not included
    /// (they are in `flush_nanos`).
    pub compaction_nanos: u64,
    /// Time spent in flushes (memtable to L0 table, training and manifest
    /// edit included). `train_nanos / (compaction_nanos + flush_nanos)` is
    /// the share of all table-building work spent training (Liu §5.4).
    pub flush_nanos: u64,
    /// Time writers waited for room (frozen memtables or L0 at its stop).
    pub stall_micros: u64,
    /// Write batches that slept at the L0 slowdown threshold.
    pub slowdown_writes: u64,
    /// The newest visible sequence number.
    pub last_seq: u64,
    /// I/O of tables and log since the open.
    pub io: IoSnapshot,
    /// Log frames recovery dropped at open (see `strict_recovery`).
    pub recovery_dropped_frames: u64,
}

impl StoreStats {
    /// Memory held now: memtables, block cache, indexes and filters.
    pub fn memory_bytes(&self) -> u64 {
        self.memtable_bytes
            + self.immutable_bytes
            + self.block_cache_bytes
            + self.index_bytes
            + self.filter_bytes
    }

    /// Bytes written to storage per byte the user wrote (log, flushes,
    /// compactions); 0 before any write.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        (self.wal_bytes + self.flush_bytes + self.compaction_bytes_written) as f64
            / self.user_bytes_written as f64
    }
}

/// What [`Store::verify`] checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Tables read.
    pub tables: u64,
    /// Entries read.
    pub entries: u64,
    /// Bytes of the tables.
    pub bytes: u64,
    /// Tables per level.
    pub levels: Vec<u64>,
}

impl Store {
    /// Memory by component, levels and counters.
    pub fn stats(&self) -> StoreStats {
        let inner = &self.inner;
        let v = inner.version.load();
        let c = &inner.counters;
        let mut s = StoreStats {
            memory_budget: inner.opts.memory_bytes,
            memtable_bytes: v.active.memory_bytes(),
            immutable_memtables: v.frozen.len() as u64,
            immutable_bytes: v.frozen.iter().map(|f| f.mem.memory_bytes()).sum(),
            user_bytes_written: c.user_bytes_written.load(Relaxed),
            wal_bytes: c.wal_bytes.load(Relaxed),
            flush_bytes: c.flush_bytes.load(Relaxed),
            compaction_bytes_read: c.compaction_bytes_read.load(Relaxed),
            compaction_bytes_written: c.compaction_bytes_written.load(Relaxed),
            compactions: c.compactions.load(Relaxed),
            flushes: c.flushes.load(Relaxed),
            train_nanos: c.train_nanos.load(Relaxed),
            compaction_nanos: c.compaction_nanos.load(Relaxed),
            flush_nanos: c.flush_nanos.load(Relaxed),
            stall_micros: c.stall_micros.load(Relaxed),
            slowdown_writes: c.slowdown_writes.load(Relaxed),
            last_seq: inner.visible.load(std::sync::atomic::Ordering::SeqCst),
            io: inner.io.stats.snapshot(),
            recovery_dropped_frames: inner.recovery_dropped_frames,
            ..StoreStats::default()
        };
        if let Some(cache) = &inner.cache {
            let cs = cache.stats();
            s.block_cache_bytes = cs.bytes;
            s.block_cache_capacity = cs.capacity;
            s.block_cache_hits = cs.hits;
            s.block_cache_misses = cs.misses;
        }
        for files in &v.levels {
            let mut l = LevelStats::default();
            for t in files {
                l.files += 1;
                l.bytes += t.rec.size;
                l.entries += t.rec.entries;
                let m = t.table.memory();
                l.index_bytes += m.index_bytes;
                l.filter_bytes += m.filter_bytes;
            }
            s.index_bytes += l.index_bytes;
            s.filter_bytes += l.filter_bytes;
            s.levels.push(l);
        }
        s
    }

    /// Reads every table of the current version in full (every block and
    /// its checksum) and checks that its entries are in strictly increasing
    /// order, parse, number what the manifest records and lie within its
    /// recorded bounds, and the level invariants (L0 newest first; L1..
    /// sorted and non-overlapping). The first violation is an error naming
    /// the table.
    pub fn verify(&self) -> Result<VerifyReport> {
        let v = self.inner.version.load_full();
        v.check_levels()?;
        let mut r = VerifyReport::default();
        for files in &v.levels {
            r.levels.push(files.len() as u64);
            for t in files {
                let name = table_name(t.rec.number);
                let bad = |what: String| Error::corruption(&name, 0, what);
                let mut it = t.table.iter();
                it.seek_to_first()?;
                let mut prev: Option<Vec<u8>> = None;
                let mut n = 0u64;
                while it.valid() {
                    let k = it.key();
                    if key::parse(k).is_none() {
                        return Err(bad(format!("entry {n}: internal key without a valid trailer")));
                    }
                    match &prev {
                        None if k != t.rec.smallest.as_slice() => {
                            return Err(bad("first entry is not the recorded smallest key".into()));
                        }
                        Some(p) if !key::compare(p, k).is_lt() => {
                            return Err(bad(format!("entry {n} is not after the one before it")));
                        }
                        _ => {}
                    }
                    prev = Some(k.to_vec());
                    n += 1;
                    it.next()?;
                }
                if n != t.rec.entries || prev.as_deref() != Some(t.rec.largest.as_slice()) {
                    return Err(bad(format!(
                        "{n} entries ending before or after the recorded largest key; the manifest records {}",
                        t.rec.entries
                    )));
                }
                r.tables += 1;
                r.entries += n;
                r.bytes += t.rec.size;
            }
        }
        Ok(r)
    }
}
