//! The LSM-tree key-value store (Liu et al.): byte-string keys and values,
//! a write-ahead log on [`crate::log`], a concurrent memtable, SSTables whose
//! index is pluggable (fence pointers or a learned kind of the layered
//! engine over keys mapped to integers), Bloom filters, leveled compaction.
//! Formats: `docs/format/sstable.md`, `docs/format/lsm.md`.
//!
//! [`Store`] is LevelDB's structure: every write batch is appended to the
//! log (group commit) and inserted into the *memtable*, a skiplist of
//! internal keys ([`key`]). A full memtable is frozen (the log rotates to a
//! new segment) and *flushed* into an L0 table; L0 tables are compacted into
//! L1, and a level holding more than its target into the next one (size
//! ratio [`Options::level_ratio`]). Readers see one immutable version
//! (memtables and tables per level) swapped atomically, so they never wait.
//!
//! **Memory.** [`Options::memory_bytes`] is shared by the memtables, the
//! block cache, and the tables' block handles, indexes and Bloom filters;
//! the cache gets what the others leave (resized at every version swap), and
//! [`Store::stats`] reports each part. By default (`pin=true`,
//! [`Options::pin_tables`]) every open table keeps its handles, index and
//! filter resident, so many tables at a small budget can exceed it. With
//! `pin=false` a table keeps only its properties and section locations and
//! loads the others through the block cache when a lookup needs them
//! (RocksDB's `cache_index_and_filter_blocks`): they are charged to the
//! cache at their decoded size, read and checked again from the file once
//! evicted, and the store stays within its budget whatever it holds, at
//! the cost of those reads. Iterators take a table's handles and index at
//! their first seek and hold them; compactions' iterators do not fill the
//! cache.
//!
//! # Contracts
//!
//! - **Durability.** With [`SyncPolicy::Always`](crate::log::SyncPolicy)
//!   (the default) a write that returned `Ok` survives a crash; with
//!   `EveryMs` once the background sync after it ran; with `Never` after
//!   [`Store::close`]. A batch is atomic: after a crash all of it or none of
//!   it is visible, and the log is replayed in order.
//! - **Visibility.** Every write of a batch gets its own sequence number; a
//!   batch becomes visible to readers at once, after every batch with lower
//!   numbers. A read sees one sequence number: the newest visible when it
//!   starts, or its [`Snapshot`]'s.
//! - **Thread-safety.** `Store` is `Send + Sync`; every method takes `&self`
//!   except [`Store::close`]. Writers wait only when the memtables are full
//!   or L0 reaches [`Options::l0_stop`] (and sleep 1 ms per batch from
//!   [`Options::l0_slowdown`]).
//! - **Locking.** A writer holds the directory's exclusive lock, a read-only
//!   store its shared lock, until it is closed or dropped; a conflicting
//!   open is [`crate::Error::Locked`].
//! - **Failures.** After a failed log write, sync, flush or compaction the
//!   store refuses writes (reads go on) until it is reopened; nothing
//!   acknowledged is lost. Corrupt files are errors, never data.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod compaction;
mod ingest;
mod iter;
pub mod key;
pub mod kind;
mod manifest;
mod memtable;
mod open;
mod options;
mod stats;
pub mod table;
mod version;
mod wal;
mod write;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::log::{Health, Workers};
use crate::storage::{DirLock, Directory, IoContext};
use crate::{Error, Result};

pub use ingest::IngestReport;
pub use iter::StoreIter;
pub use manifest::{
    LSM_MANIFEST_FILE, LSM_MANIFEST_VERSION, LsmEdit, LsmManifest, NUM_LEVELS, TableRecord, table_name,
    table_number,
};
pub use options::{Granularity, LEVEL_TABLE_ENTRIES, Options};
pub use stats::{LevelStats, StoreStats, VerifyReport};
pub use wal::LsmOp;
pub use write::{MAX_BATCH_BYTES, WriteBatch};

use memtable::Found;
use stats::Counters;
use version::Version;

/// The log writer of this store.
type LsmWal = crate::log::WalWriter<LsmOp>;

/// An LSM-tree key-value store over a [`Directory`]. See the module docs.
pub struct Store {
    inner: Arc<Inner>,
    /// The background thread and the periodic log sync.
    workers: Workers,
    _lock: DirLock,
}

/// What the store's threads share.
struct Inner {
    dir: Arc<dyn Directory>,
    opts: Options,
    /// Tables are read through this (counters + the block cache).
    io: IoContext,
    /// The log's storage: the same counters, no cache.
    wal_io: IoContext,
    /// The block cache (`None` when its size is 0).
    cache: Option<Arc<table::BlockCache>>,
    version: ArcSwap<Version>,
    /// The log writer (`None` when read-only). Writers hold it shared while
    /// they append and insert; a freeze holds it exclusively.
    gate: RwLock<Option<Arc<LsmWal>>>,
    /// The next sequence number to hand out.
    next_seq: AtomicU64,
    /// The newest sequence number readers see (batches publish in order).
    visible: AtomicU64,
    /// Writers waiting for lower sequence numbers to publish wait here.
    publish: Mutex<()>,
    publish_cv: Condvar,
    /// The manifest and the compaction pointers.
    state: Mutex<State>,
    /// Wakes the background thread and writers waiting for room.
    state_cv: Condvar,
    /// Held by whoever runs a flush or compaction (one at a time).
    work: Mutex<()>,
    /// The next table number.
    next_file: AtomicU64,
    /// Live snapshots: sequence number -> count.
    snapshots: Mutex<BTreeMap<u64, usize>>,
    /// Shutdown and kill flags, and why the store refuses writes, if it does.
    health: Health,
    counters: Counters,
    recovery_dropped_frames: u64,
}

struct State {
    manifest: LsmManifest,
    /// Per level, the largest user key of the last compaction's input (the
    /// next one starts after it, round-robin).
    compact_pointer: Vec<Vec<u8>>,
}

/// A consistent read view of a store at one sequence number. Compactions
/// keep every version it needs while it lives; dropping it releases them.
pub struct Snapshot {
    inner: Arc<Inner>,
    seq: u64,
    registration: Arc<SnapshotGuard>,
}

/// Unregisters a snapshot's sequence number when the last holder (the
/// snapshot or an iterator made from it) is dropped.
struct SnapshotGuard {
    inner: Arc<Inner>,
    seq: u64,
}

impl Drop for SnapshotGuard {
    fn drop(&mut self) {
        let mut s = self.inner.snapshots.lock();
        if let Some(n) = s.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                s.remove(&self.seq);
            }
        }
    }
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The value of `key` as of the snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get_in(&self.inner.version.load(), key, self.seq)
    }

    /// An iterator over the store as of the snapshot.
    pub fn iter(&self) -> Result<StoreIter> {
        let pin: Arc<dyn Send + Sync> = self.registration.clone();
        Ok(StoreIter::new(
            iter::merged(&self.inner.version.load()),
            self.seq,
            Some(pin),
        ))
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seq", &self.seq).finish()
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.dir.describe())
            .finish()
    }
}

impl Store {
    /// The value of `key`: the newest visible version, `None` if it was
    /// never written or is deleted. A key longer than 64 KiB is
    /// [`Error::InvalidInput`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        // The version first, then the sequence number: every compaction in
        // that version started at a visible sequence number <= `seq` and
        // kept everything newer (see `compaction.rs`), so `seq`'s versions
        // are all there.
        let v = self.inner.version.load();
        let seq = self.inner.visible.load(Ordering::SeqCst);
        self.inner.get_in(&v, key, seq)
    }

    /// The values of many keys, as [`Store::get`] would return them, all
    /// from one version of the store: the memtables first, then each
    /// table's blocks for all its keys read in one batch with up to
    /// [`Options::queue_depth`] reads in flight (a level's tables one after
    /// another). Answers in the order of `keys`. A key longer than 64 KiB is
    /// [`Error::InvalidInput`].
    pub fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        for k in keys {
            key::check_entry(k, None)?;
        }
        let v = self.inner.version.load();
        let seq = self.inner.visible.load(Ordering::SeqCst);
        Ok(v.get_many(keys, seq, self.inner.io.queue_depth)?
            .into_iter()
            .map(|f| match f {
                Some(Found::Value(v)) => Some(v),
                Some(Found::Deleted) | None => None,
            })
            .collect())
    }

    /// A snapshot at the newest visible sequence number.
    pub fn snapshot(&self) -> Snapshot {
        let inner = &self.inner;
        let mut snaps = inner.snapshots.lock();
        let seq = inner.visible.load(Ordering::SeqCst);
        *snaps.entry(seq).or_insert(0) += 1;
        drop(snaps);
        Snapshot {
            inner: inner.clone(),
            seq,
            registration: Arc::new(SnapshotGuard {
                inner: inner.clone(),
                seq,
            }),
        }
    }

    /// An iterator over the store at the newest visible sequence number
    /// (user keys ascending; unpositioned until a seek).
    pub fn iter(&self) -> Result<StoreIter> {
        // The version first, then the sequence number (as `get`).
        let merged = iter::merged(&self.inner.version.load());
        let seq = self.inner.visible.load(Ordering::SeqCst);
        Ok(StoreIter::new(merged, seq, None))
    }

    /// Makes every acknowledged write durable (syncs the log).
    pub fn sync(&self) -> Result<()> {
        let wal = self.inner.gate.read().clone();
        match wal {
            Some(w) => w.sync().inspect_err(|e| self.inner.poison(e)),
            None => Ok(()),
        }
    }

    /// Closes the store: stops the background threads (a flush or
    /// compaction under way finishes first), syncs the log, and releases the
    /// lock. Returns the error that poisoned the store, if any.
    pub fn close(self) -> Result<()> {
        self.shutdown(true)
    }

    /// Simulates a process exit for crash tests: stops the background
    /// threads (a compaction under way is abandoned before its manifest
    /// edit) and does no further I/O: the log is not synced.
    #[doc(hidden)]
    pub fn kill(self) {
        self.inner.health.killed.store(true, Ordering::SeqCst);
        let _ = self.shutdown(false);
    }

    fn shutdown(&self, sync: bool) -> Result<()> {
        let inner = &self.inner;
        let wake = || {
            let _st = inner.state.lock();
            inner.state_cv.notify_all();
        };
        if !self.workers.stop(&inner.health, wake) {
            return Ok(());
        }
        if let Some(e) = inner.health.failure() {
            return Err(Error::Io {
                file: self.inner.dir.describe(),
                source: std::io::Error::other(format!("the store failed earlier: {e}")),
            });
        }
        if sync {
            if let Some(w) = self.inner.gate.read().clone() {
                w.sync()?;
            }
        }
        Ok(())
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.shutdown(!self.inner.health.is_killed());
    }
}

impl Inner {
    /// The value of `key` at `seq` in version `v`.
    fn get_in(&self, v: &Version, key: &[u8], seq: u64) -> Result<Option<Vec<u8>>> {
        key::check_entry(key, None)?;
        Ok(match v.get(key, seq)? {
            Some(Found::Value(v)) => Some(v),
            Some(Found::Deleted) | None => None,
        })
    }

    fn poison(&self, e: &Error) {
        self.health.poison(e);
        self.state_cv.notify_all();
    }

    fn check_writable(&self) -> Result<()> {
        self.health.check_writable(self.dir.as_ref(), self.opts.read_only)
    }

    /// Swaps in `v` and refits the block cache to it.
    fn set_version(&self, v: Version) {
        self.version.store(Arc::new(v));
        self.fit_cache();
    }

    /// Sizes the block cache to what the budget leaves: the memory budget
    /// less a full active memtable, the frozen memtables, and the resident
    /// indexes and filters of every table, at most
    /// [`Options::block_cache_bytes`]. The resident indexes and filters
    /// never shrink it below [`MIN_CACHE_BYTES`] (or the configured size, if
    /// smaller); the memtables may (to 0 while a flush is due). So
    /// memtables + cache + indexes + filters stay within
    /// [`Options::memory_bytes`] whenever the indexes and filters alone
    /// leave room for the floor; `stats()` shows it.
    fn fit_cache(&self) {
        let Some(cache) = &self.cache else { return };
        let v = self.version.load();
        let memtables =
            self.opts.write_buffer_bytes + v.frozen.iter().map(|f| f.mem.memory_bytes()).sum::<u64>();
        let mut resident = 0;
        for t in v.levels.iter().flatten() {
            let m = t.table.memory();
            resident += m.index_bytes + m.filter_bytes;
        }
        let ceiling = self.opts.block_cache_bytes;
        let room = self.opts.memory_bytes.saturating_sub(memtables);
        let floor = MIN_CACHE_BYTES.min(ceiling).min(room);
        cache.resize(room.saturating_sub(resident).clamp(floor, ceiling));
    }
}

/// The block cache is never shrunk below this (256 KiB), so that a store
/// whose indexes and filters outgrow its budget still caches a few blocks.
pub const MIN_CACHE_BYTES: u64 = 256 << 10;

#[cfg(test)]
mod tests;
