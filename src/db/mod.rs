//! `strata::Db`: the durable hybrid store (Zhang et al. §9, G6).
//!
//! A store is a *dynamic stage* (an in-memory ordered map of recent writes,
//! `memtable`) in front of a *static stage* (a layered learned index over a
//! sorted data run on storage, `stage`). Every write is appended to the
//! write-ahead log (`wal`) and then applied to the dynamic stage. When the
//! dynamic stage passes its share of the memory budget it is *frozen*: a new
//! dynamic stage and a new log segment take the writes while a background
//! thread stream-merges the frozen stage with the old data run into a new
//! data run and trains a new static index (copy-on-write: new files, synced,
//! then an atomic manifest rename; old files and the covered log segments are
//! deleted afterwards). Readers see the dynamic, frozen and static stages of
//! one immutable *version*; a merge publishes its result with one atomic
//! version swap, so readers never wait for it.
//!
//! A merge streams at the disk's write bandwidth: the frozen stage is a
//! compacted copy (full chunks); stretches of old records between two frozen
//! keys are copied as bytes; a second thread reads the next 1 MiB of the old
//! run ahead; every 1 MiB written is queued for write-back at once
//! ([`crate::storage::Storage::write_behind`]) so the final sync waits only
//! for the tail; and a zone-map static stage is built from each new page's
//! first and last key, so the merge holds 2 keys per page, not every key.
//!
//! # Contracts
//!
//! - **Durability.** With [`SyncPolicy::Always`] (the default) a write that
//!   returned `Ok` is on stable storage and survives a crash. With
//!   [`SyncPolicy::EveryMs`] it survives a crash once the background sync that
//!   follows it ran (at most that many milliseconds later); with
//!   [`SyncPolicy::Never`], after [`Db::sync`], [`Db::flush`] or
//!   [`Db::close`]. A crash never leaves a partial batch visible
//!   ([`Db::write_batch`] is atomic) and never loses a write that an
//!   acknowledged write depends on (the log is replayed in order).
//! - **Thread-safety.** `Db` is `Send + Sync`; every method takes `&self`
//!   (except [`Db::close`]). Reads never block on writers or merges; writers
//!   share log writes and syncs (group commit); a writer waits only when the
//!   dynamic stage is full while a merge is still running (back-pressure).
//! - **Ordering.** Every batch gets a sequence number; the newest sequence
//!   number of a key wins, in memory and on recovery alike, so concurrent
//!   writers to one key end in the same state after a crash as before it.
//! - **Locking.** One writer or any number of read-only users
//!   ([`Options::read_only`]) have a store open at a time, never both: a
//!   writer holds the directory's exclusive lock, a reader its shared lock
//!   ([`crate::storage::Directory::lock`], `flock` on a `LOCK` file), until
//!   the `Db` is closed or dropped. An open that conflicts, from another
//!   process or another `Db` in this one, is [`Error::Locked`] at once; so a
//!   read-only user never sees a store a writer is changing (it is refused
//!   instead). A read-only store changes no byte on storage; its writes,
//!   [`Db::flush`] and [`Db::wait_for_merge`] are [`Error::Unsupported`].
//! - **Failures.** After a failed log write or sync, or a failed merge, the
//!   store refuses writes (reads go on) until it is reopened; nothing that was
//!   acknowledged is lost. Corrupt files are reported as
//!   [`Error::Corruption`] and friends, never returned as data.
//!
//! The on-disk layout and the recovery protocol are specified in
//! `docs/format/db.md`.

mod kind;
mod manifest;
mod memtable;
mod merge;
mod open;
mod options;
mod prefix;
mod range;
mod stage;
mod wal;
mod write;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, RwLock};
use serde::Serialize;

pub use crate::log::wal_id;
pub use kind::DbKind;
pub(crate) use kind::{blind_param, sync_param};
pub use manifest::{DB_MANIFEST_FILE, DbManifest};
pub(crate) use memtable::{MemTable, Slot};
pub use options::{MergeTrigger, Options};
pub use range::DbRange;
pub use stage::StaticKind;
pub(crate) use stage::gen_of;
pub use wal::{SyncPolicy, WalOp, WalWriter, replay};
pub use write::{MAX_BATCH_OPS, WriteBatch};

use crate::log::{Health, Workers, read_only_error};
use crate::storage::{DirLock, Directory, IoContext, IoSnapshot, IoStats};
use crate::{Error, Result};
use stage::StaticStage;

/// Sizes and counters of a store, measured from its structures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DbStats {
    /// Bytes of the dynamic stages (the writable one and the one being merged).
    pub dynamic_bytes: u64,
    /// Keys in the writable dynamic stage (puts and tombstones).
    pub active_entries: u64,
    /// Keys in the frozen stage being merged (0 when no merge runs).
    pub frozen_entries: u64,
    /// Records in the static stage.
    pub static_records: u64,
    /// Bytes the static index holds in memory.
    pub static_index_bytes: u64,
    /// Spec of the static index (empty before the first merge or bulk load).
    pub static_kind: String,
    /// Current static generation.
    pub generation: u64,
    /// Memory now: dynamic stages + static index.
    pub memory_bytes: u64,
    /// The largest `memory_bytes` seen since open.
    pub peak_memory_bytes: u64,
    /// Bytes of every file of the store.
    pub disk_bytes: u64,
    /// All I/O of the store since open (lookups, log, merges).
    pub io: IoSnapshot,
    /// The part of `io` done by merges.
    pub merge_io: IoSnapshot,
    /// Merges completed since open.
    pub merges: u64,
    /// Wall-clock seconds spent in merges since open.
    pub merge_seconds: f64,
    /// Whether a merge is running.
    pub merging: bool,
    /// Highest sequence number handed out.
    pub last_seq: u64,
    /// Complete log frames the last open dropped from the end of the newest
    /// log segment because their payload failed its checksum (a crash
    /// during their write, or damage to an acknowledged write: see
    /// [`Options::strict_recovery`]). 0 after a clean recovery.
    pub recovery_dropped_frames: u64,
    /// Bytes the last open dropped from the end of the newest log segment:
    /// those frames and any torn (incomplete, never acknowledged) tail.
    pub recovery_dropped_bytes: u64,
}

/// One immutable view of the stages; readers load it with one atomic read.
struct Version {
    active: Arc<MemTable>,
    frozen: Option<Arc<MemTable>>,
    stat: Option<Arc<StaticStage>>,
}

struct WalState {
    /// The segment taking writes; `None` in a read-only store.
    wal: Option<Arc<WalWriter>>,
}

impl WalState {
    /// The log writer, or the error of a read-only store in `dir`.
    fn writer(&self, dir: &dyn Directory) -> Result<&Arc<WalWriter>> {
        self.wal.as_ref().ok_or_else(|| read_only_error(dir))
    }
}

struct MergeState {
    /// The manifest as last stored.
    manifest: DbManifest,
    /// A frozen stage exists and its merge has not finished.
    running: bool,
    /// The frozen stage waits for the background thread.
    pending: bool,
    /// First log segment of the writable stage (the merge's `log_start`).
    log_start_after: u64,
    /// Id of the next log segment to create.
    next_segment: u64,
}

struct Inner {
    dir: Arc<dyn Directory>,
    opts: Options,
    page_size: usize,
    io: IoContext,
    merge_io: IoContext,
    version: ArcSwap<Version>,
    gate: RwLock<WalState>,
    next_seq: AtomicU64,
    merge: Mutex<MergeState>,
    merge_cv: Condvar,
    /// Shutdown and kill flags, and why the store refuses writes, if it does.
    health: Health,
    peak_memory: AtomicU64,
    /// What recovery dropped from the end of the log when the store opened,
    /// and the segment it was dropped from.
    recovery_dropped: crate::log::Dropped,
    recovery_segment: String,
    merges: AtomicU64,
    merge_ns: AtomicU64,
}

/// The durable hybrid store: `u64` keys and values. See the module docs for
/// its durability, ordering and thread-safety contracts.
pub struct Db {
    inner: Arc<Inner>,
    /// The merge thread and the background log sync under [`SyncPolicy::EveryMs`].
    workers: Workers,
    /// The directory lock (exclusive for a writer, shared read-only),
    /// released when the store is dropped, after `shutdown`.
    _lock: DirLock,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.inner.dir.describe())
            .finish()
    }
}

impl Db {
    /// The value of `key`, if present: the writable dynamic stage, then the
    /// frozen one, then the static stage (one predicted page range read).
    pub fn get(&self, key: u64) -> Result<Option<u64>> {
        let v = self.inner.version.load();
        if let Some(s) = v.active.get(key) {
            return Ok(s.value());
        }
        if let Some(s) = v.frozen.as_ref().and_then(|f| f.get(key)) {
            return Ok(s.value());
        }
        match &v.stat {
            Some(st) => st.index.get(key),
            None => Ok(None),
        }
    }

    /// Appends the value of each of `keys` (any order, repeats allowed; `None`
    /// if absent) to `out`: a key in a dynamic stage is answered from
    /// memory, the others from the static stage in one batch
    /// ([`Index::get_many`](crate::index::Index::get_many): their pages read with many in flight). All
    /// answers come from one version of the store. On an error `out` is
    /// left as it was.
    pub fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        let v = self.inner.version.load();
        let start = out.len();
        let mut rest: Vec<u64> = Vec::new();
        let mut rest_at: Vec<usize> = Vec::new();
        for &k in keys {
            let hit = v
                .active
                .get(k)
                .or_else(|| v.frozen.as_ref().and_then(|f| f.get(k)));
            match hit {
                Some(s) => out.push(s.value()),
                None => {
                    rest_at.push(out.len());
                    rest.push(k);
                    out.push(None);
                }
            }
        }
        if let (Some(st), false) = (&v.stat, rest.is_empty()) {
            let mut got = Vec::with_capacity(rest.len());
            if let Err(e) = st.index.get_many(&rest, &mut got) {
                out.truncate(start);
                return Err(e);
            }
            for (&at, g) in rest_at.iter().zip(got) {
                if let Some(slot) = out.get_mut(at) {
                    *slot = g;
                }
            }
        }
        Ok(())
    }

    /// Stops the background threads (a running merge finishes first) and
    /// syncs the log. Dropping the store does the same, ignoring errors.
    pub fn close(self) -> Result<()> {
        self.shutdown(true)
    }

    /// Simulates a process exit for crash tests: stops the background
    /// threads (a running merge is abandoned at its next step, before its
    /// manifest is written) and does no further I/O — the log is not synced.
    #[doc(hidden)]
    pub fn kill(self) {
        self.inner.health.killed.store(true, Ordering::SeqCst);
        let _ = self.shutdown(false);
    }

    fn shutdown(&self, sync: bool) -> Result<()> {
        let inner = &self.inner;
        let wake = || {
            let _ms = inner.merge.lock();
            inner.merge_cv.notify_all();
        };
        if !self.workers.stop(&inner.health, wake) {
            return Ok(());
        }
        if sync && inner.health.failure().is_none() {
            if let Some(wal) = self.inner.gate.read().wal.clone() {
                wal.sync()?;
            }
        }
        Ok(())
    }

    /// Number of live records. Costs one static-stage lookup per key of the
    /// dynamic stages (their keys may or may not already be static).
    pub fn count(&self) -> Result<u64> {
        let v = self.inner.version.load_full();
        let mut n = v.stat.as_ref().map_or(0, |s| s.n) as i128;
        let mut seen: Vec<Slot> = Vec::new();
        let mut keys = std::collections::BTreeMap::new();
        for t in [Some(&v.active), v.frozen.as_ref()].into_iter().flatten() {
            seen.clear();
            t.range_from(0, usize::MAX, &mut seen);
            for s in &seen {
                keys.entry(s.key).or_insert(s.value().is_some());
            }
        }
        for (k, live) in keys {
            let in_static = match &v.stat {
                Some(st) => st.index.get(k)?.is_some(),
                None => false,
            };
            n += i128::from(live) - i128::from(in_static);
        }
        Ok(u64::try_from(n.max(0)).unwrap_or(u64::MAX))
    }

    /// Sizes and counters.
    pub fn stats(&self) -> Result<DbStats> {
        let inner = &self.inner;
        let v = inner.version.load_full();
        let dynamic = v.active.memory_bytes() + v.frozen.as_ref().map_or(0, |f| f.memory_bytes());
        let static_bytes = v.stat.as_ref().map_or(0, |s| s.memory_bytes);
        let merging = inner.merge.lock().running;
        Ok(DbStats {
            dynamic_bytes: dynamic,
            active_entries: v.active.len(),
            frozen_entries: v.frozen.as_ref().map_or(0, |f| f.len()),
            static_records: v.stat.as_ref().map_or(0, |s| s.n),
            static_index_bytes: static_bytes,
            static_kind: v.stat.as_ref().map(|s| s.spec.clone()).unwrap_or_default(),
            generation: v.stat.as_ref().map_or(0, |s| s.generation),
            memory_bytes: dynamic + static_bytes,
            peak_memory_bytes: inner
                .peak_memory
                .load(Ordering::Relaxed)
                .max(dynamic + static_bytes),
            disk_bytes: inner.dir_bytes()?,
            io: inner.io.stats.snapshot(),
            merge_io: inner.merge_io.stats.snapshot(),
            merges: inner.merges.load(Ordering::Relaxed),
            merge_seconds: inner.merge_ns.load(Ordering::Relaxed) as f64 / 1e9,
            merging,
            last_seq: inner.next_seq.load(Ordering::SeqCst).saturating_sub(1),
            recovery_dropped_frames: inner.recovery_dropped.frames,
            recovery_dropped_bytes: inner.recovery_dropped.bytes,
        })
    }

    /// The counters every file of the store reports into.
    pub fn io(&self) -> &Arc<IoStats> {
        &self.inner.io.stats
    }

    /// Reads every page of the static stage and checks its checksums;
    /// returns the pages checked. If the open that made this handle dropped a
    /// complete log frame failing its checksum (see
    /// [`Options::strict_recovery`]), that is reported first, as
    /// [`Error::CorruptionAt`] naming the segment and the byte offset: the
    /// store answers, but maybe without an acknowledged write.
    pub fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let d = self.inner.recovery_dropped;
        if d.frames > 0 {
            return Err(Error::corruption_at(
                self.inner.recovery_segment.clone(),
                d.offset,
                format!(
                    "recovery dropped {} complete log frame(s) ({} bytes) whose payload failed its checksum; \
                     an acknowledged write may be lost (open with strict recovery to refuse such a store)",
                    d.frames, d.bytes
                ),
            ));
        }
        match &self.inner.version.load().stat {
            Some(s) => s.index.verify(progress),
            None => Ok(0),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown(true);
    }
}

impl Inner {
    fn dir_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for n in self.dir.list()? {
            if n == DB_MANIFEST_FILE || gen_of(&n).is_some() || wal_id(&n).is_some() {
                // A file removed by a merge since the listing is not an error.
                if let Ok(f) = self.dir.open(&n) {
                    total += f.len().unwrap_or(0);
                }
            }
        }
        Ok(total)
    }

    fn note_memory(&self) {
        let v = self.version.load();
        let m = v.active.memory_bytes()
            + v.frozen.as_ref().map_or(0, |f| f.memory_bytes())
            + v.stat.as_ref().map_or(0, |s| s.memory_bytes);
        self.peak_memory.fetch_max(m, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod tests;
