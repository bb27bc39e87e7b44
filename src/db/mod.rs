//! `strata::Db`: the durable hybrid store (Zhang et al. §9, G6).
//!
//! A store is a *dynamic stage* (an in-memory ordered map of recent writes,
//! `memtable`) in front of a *static stage* (a layered learned index over a
//! sorted data run on storage, `stage`). Every write is appended to the
//! write-ahead log ([`wal`]) and then applied to the dynamic stage. When the
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
mod prefix;
mod stage;
pub mod wal;

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use serde::Serialize;

pub use kind::DbKind;
pub use manifest::{DB_MANIFEST_FILE, DB_MANIFEST_MAGIC, DB_MANIFEST_VERSION, DbManifest};
pub use memtable::{MemTable, Slot};
pub use prefix::{DirHandle, PrefixDirectory};
pub use stage::{StaticKind, gen_of, gen_prefix};
pub use wal::{SyncPolicy, WalOp};

use crate::format::{DataRun, PageRun};
use crate::index::Residency;
use crate::index::binary::DATA_FILE;
use crate::storage::{Directory, FsDirectory, IoContext, IoSnapshot, IoStats, PassThrough, Storage, StorageProfile};
use crate::{Error, Result};
use manifest::DB_MANIFEST_TMP;
use stage::{RunBuilder, StaticStage, page_bounds_suffice};
use wal::{WAL_HEADER_LEN, WalWriter, replay};

/// Most operations one batch may hold.
pub const MAX_BATCH_OPS: usize = 1 << 20;
/// The dynamic stage never gets less than this share of the budget.
const MIN_DYNAMIC_BYTES: u64 = 16 << 10;
/// A ratio trigger never merges fewer entries than this.
const MIN_RATIO_ENTRIES: u64 = 1024;

/// File name of log segment `id`.
pub fn wal_name(id: u64) -> String {
    format!("wal-{id:06}.log")
}

/// The segment id of a log file name.
pub fn wal_id(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// When the dynamic stage is frozen and merged (Zhang §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeTrigger {
    /// From the memory budget: the dynamic stages (the one taking writes and
    /// the one being merged) share what the static index leaves of
    /// [`Options::memory_budget`]: a merge starts when the writable stage
    /// reaches two thirds of that share, and while it runs the new writable
    /// stage may grow until both stages together fill the share (writers
    /// then wait for the merge). Bigger merges than halves, same bound.
    #[default]
    Budget,
    /// A constant trigger: merge when the writable stage holds this many bytes.
    Constant(u64),
    /// A ratio trigger: merge when the writable stage holds `1/r` as many
    /// entries as the static stage (at least 1024).
    Ratio(u64),
}

/// How a store is opened.
#[derive(Debug, Clone)]
pub struct Options {
    /// When log writes are synced (default: every write).
    pub sync: SyncPolicy,
    /// Memory for the dynamic stages plus the static index, in bytes
    /// (default 64 MiB).
    pub memory_budget: u64,
    /// When to merge (default: from the budget).
    pub trigger: MergeTrigger,
    /// The static index a merge builds (default: automatic, Zhang G5).
    pub static_kind: StaticKind,
    /// Page size of a new store's static files (an existing store keeps its own).
    pub page_size: usize,
    /// Merge in a background thread (default). When false the writer that
    /// fills the dynamic stage runs the merge itself (Zhang's single-threaded
    /// mode, with its tail latency).
    pub background_merge: bool,
    /// Profile whose modelled time is charged per read call.
    pub profile: Option<StorageProfile>,
    /// Whether the static index's models stay in memory (default) or are
    /// read from storage on every lookup.
    pub resident: Residency,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync: SyncPolicy::Always,
            memory_budget: 64 << 20,
            trigger: MergeTrigger::Budget,
            static_kind: StaticKind::default(),
            page_size: 4096,
            background_merge: true,
            profile: None,
            resident: Residency::Index,
        }
    }
}

impl Options {
    fn check(&self) -> Result<()> {
        crate::format::page::check_page_size(self.page_size)?;
        if self.memory_budget == 0 {
            return Err(Error::invalid("the memory budget must be positive"));
        }
        match self.trigger {
            MergeTrigger::Constant(0) => {
                return Err(Error::invalid("a constant merge trigger must be positive"));
            }
            MergeTrigger::Ratio(0) => return Err(Error::invalid("a merge ratio must be positive")),
            _ => {}
        }
        if let SyncPolicy::EveryMs(0) = self.sync {
            return Err(Error::invalid("a sync interval must be at least 1 ms"));
        }
        stage::check_static_kind(&self.static_kind)
    }
}

/// Writes applied atomically by [`Db::write_batch`], in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<WalOp>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: u64, value: u64) -> &mut Self {
        self.ops.push(WalOp::Put(key, value));
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: u64) -> &mut Self {
        self.ops.push(WalOp::Delete(key));
        self
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.ops.clear();
    }

    /// The operations.
    pub fn ops(&self) -> &[WalOp] {
        &self.ops
    }
}

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
}

/// One immutable view of the stages; readers load it with one atomic read.
struct Version {
    active: Arc<MemTable>,
    frozen: Option<Arc<MemTable>>,
    stat: Option<Arc<StaticStage>>,
}

struct WalState {
    wal: Arc<WalWriter>,
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
    /// Why the store refuses writes, if it does.
    poisoned: Mutex<Option<String>>,
    shutdown: AtomicBool,
    killed: AtomicBool,
    peak_memory: AtomicU64,
    merges: AtomicU64,
    merge_ns: AtomicU64,
}

/// The durable hybrid store: `u64` keys and values. See the module docs for
/// its durability, ordering and thread-safety contracts.
pub struct Db {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.inner.dir.describe())
            .finish()
    }
}

fn closed_error() -> Error {
    Error::invalid("the store is closed")
}

impl Db {
    /// Opens (or creates) the store in the local directory `path`.
    pub fn open_path(path: impl AsRef<std::path::Path>, opts: Options) -> Result<Db> {
        let dir: Arc<dyn Directory> = Arc::new(FsDirectory::create_all(path.as_ref())?);
        Db::open(dir, opts)
    }

    /// Opens the store in `dir`, creating an empty one if `dir` holds none.
    ///
    /// Recovery: reads and checks the manifest, removes the files of an
    /// interrupted merge and the log segments a finished merge covered, opens
    /// the static generation, and replays every remaining log segment in
    /// order into the dynamic stage. A torn frame at the end of the newest
    /// segment is dropped (it was never acknowledged); any other damage is an
    /// error.
    pub fn open(dir: Arc<dyn Directory>, opts: Options) -> Result<Db> {
        let io = IoContext::with_profile(opts.profile.clone());
        Db::open_with_io(dir, opts, io)
    }

    /// [`Db::open`] with the store's I/O counted into `io` (its page cache,
    /// if any, is not used: the store's memory is its budget).
    pub fn open_with_io(dir: Arc<dyn Directory>, opts: Options, io: IoContext) -> Result<Db> {
        opts.check()?;
        let io = IoContext { cache: None, ..io };
        let merge_io = IoContext {
            stats: Arc::new(IoStats::new()),
            ..io.clone()
        };
        let names = dir.list()?;
        let manifest = match DbManifest::load(dir.as_ref())? {
            Some(m) => m,
            None => {
                if let Some(n) = names.iter().find(|n| wal_id(n).is_some() || gen_of(n).is_some()) {
                    return Err(Error::corruption(
                        format!("{}/{DB_MANIFEST_FILE}", dir.describe()),
                        0,
                        format!("the store's manifest is missing but its file {n} exists"),
                    ));
                }
                let m = DbManifest::empty(opts.page_size);
                m.store(dir.as_ref())?;
                m
            }
        };
        crate::format::page::check_page_size(manifest.page_size)?;
        // Leftovers: an unfinished manifest, an interrupted merge's files,
        // segments a finished merge covered.
        let mut removed = false;
        for n in &names {
            let stale = n == DB_MANIFEST_TMP
                || gen_of(n).is_some_and(|g| g != manifest.generation)
                || wal_id(n).is_some_and(|id| id < manifest.log_start);
            if stale {
                dir.remove(n)?;
                removed = true;
            }
        }
        if removed {
            dir.sync_dir()?;
        }
        let stat = if manifest.generation > 0 {
            let view = PrefixDirectory::new(dir.clone(), gen_prefix(manifest.generation));
            Some(Arc::new(StaticStage::open(
                view,
                manifest.generation,
                &manifest.static_kind,
                opts.resident,
                io.clone(),
            )?))
        } else {
            None
        };
        if let Some(s) = &stat {
            if s.n != manifest.static_n {
                return Err(Error::corruption(
                    format!("{}/{DB_MANIFEST_FILE}", dir.describe()),
                    0,
                    format!(
                        "manifest says the static stage holds {} records, its data run {}",
                        manifest.static_n, s.n
                    ),
                ));
            }
        }
        // Replay the log.
        let mut segs: Vec<u64> = names
            .iter()
            .filter_map(|n| wal_id(n))
            .filter(|&id| id >= manifest.log_start)
            .collect();
        segs.sort_unstable();
        for (want, &id) in (manifest.log_start..).zip(&segs) {
            if id != want {
                return Err(Error::corruption(
                    format!("{}/{}", dir.describe(), wal_name(want)),
                    0,
                    format!("log segment {want} is missing (segment {id} exists)"),
                ));
            }
        }
        let active = Arc::new(MemTable::new());
        let mut max_seq = manifest.last_seq;
        let mut tail = None;
        for (i, &id) in segs.iter().enumerate() {
            let last = i + 1 == segs.len();
            let storage = io.wrap(dir.open(&wal_name(id))?);
            let r = replay(storage.as_ref(), last)?;
            for b in &r.batches {
                for op in &b.ops {
                    match *op {
                        WalOp::Put(k, v) => active.apply(k, b.seq, Some(v)),
                        WalOp::Delete(k) => active.apply(k, b.seq, None),
                    }
                }
                max_seq = max_seq.max(b.seq);
            }
            if last {
                tail = Some((id, storage, r.valid_len));
            }
        }
        let (wal, segment) = match tail {
            Some((id, st, len)) if len >= WAL_HEADER_LEN => (WalWriter::reopen(st, opts.sync, len)?, id),
            Some((id, st, _)) => (WalWriter::create(st, opts.sync)?, id),
            None => {
                let id = manifest.log_start;
                let st = io.wrap(dir.create(&wal_name(id))?);
                let w = WalWriter::create(st, opts.sync)?;
                dir.sync_dir()?;
                (w, id)
            }
        };
        let page_size = manifest.page_size;
        let inner = Arc::new(Inner {
            dir,
            page_size,
            io,
            merge_io,
            version: ArcSwap::from_pointee(Version {
                active,
                frozen: None,
                stat,
            }),
            gate: RwLock::new(WalState { wal: Arc::new(wal) }),
            next_seq: AtomicU64::new(max_seq + 1),
            merge: Mutex::new(MergeState {
                manifest,
                running: false,
                pending: false,
                log_start_after: segment,
                next_segment: segment + 1,
            }),
            merge_cv: Condvar::new(),
            poisoned: Mutex::new(None),
            shutdown: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            peak_memory: AtomicU64::new(0),
            merges: AtomicU64::new(0),
            merge_ns: AtomicU64::new(0),
            opts,
        });
        inner.note_memory();
        let mut threads = Vec::new();
        if inner.opts.background_merge {
            let i = inner.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("strata-db-merge".into())
                    .spawn(move || i.merge_loop())
                    .map_err(|e| Error::io("merge thread", e))?,
            );
        }
        if let SyncPolicy::EveryMs(ms) = inner.opts.sync {
            let i = inner.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("strata-db-sync".into())
                    .spawn(move || i.sync_loop(ms))
                    .map_err(|e| Error::io("sync thread", e))?,
            );
        }
        Ok(Db {
            inner,
            threads: Mutex::new(threads),
            closed: AtomicBool::new(false),
        })
    }

    /// Bulk-loads sorted records (strictly increasing keys) as the static
    /// stage of a new store in `dir`. Fails if `dir` already holds a store.
    /// Every file is synced and the manifest is written last, so a crash
    /// leaves either no store or the whole load.
    pub fn bulk_load(
        dir: &dyn Directory,
        opts: &Options,
        records: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<u64> {
        Self::try_bulk_load(dir, opts, records.into_iter().map(Ok))
    }

    /// [`bulk_load`](Self::bulk_load) from fallible records, e.g. a key file
    /// read as a stream ([`crate::format::KeyReader`]): the first error (of
    /// the records, or keys out of order) ends the load before its manifest
    /// is written, and the files it wrote are removed, so `dir` holds no
    /// store afterwards.
    pub fn try_bulk_load(
        dir: &dyn Directory,
        opts: &Options,
        records: impl IntoIterator<Item = Result<(u64, u64)>>,
    ) -> Result<u64> {
        opts.check()?;
        if DbManifest::load(dir)?.is_some() {
            return Err(Error::invalid(format!(
                "{} already holds a store; bulk loads go into a new one (use put or write_batch)",
                dir.describe()
            )));
        }
        let leftovers = |dir: &dyn Directory| -> Result<()> {
            for n in dir.list()? {
                if n == DB_MANIFEST_TMP || gen_of(&n).is_some() || wal_id(&n).is_some() {
                    dir.remove(&n)?;
                }
            }
            Ok(())
        };
        leftovers(dir)?;
        let load = || -> Result<(u64, String, u64)> {
            let view = PrefixDirectory::new(dir, gen_prefix(1));
            let iter = records.into_iter();
            let bounds = page_bounds_suffice(&opts.static_kind, None, u64::MAX);
            let mut b = RunBuilder::new(&view, opts.page_size, iter.size_hint().0, bounds)?;
            for r in iter {
                let (k, v) = r?;
                b.push(k, v)?;
            }
            let n = b.len();
            let (spec, decided_n) = b.finish(&view, &opts.static_kind, None)?;
            Ok((n, spec, decided_n))
        };
        let (n, spec, decided_n) = match load() {
            Ok(done) => done,
            Err(e) => {
                // Best effort: the error is what the caller needs to see.
                let _ = leftovers(dir);
                return Err(e);
            }
        };
        let mut m = DbManifest::empty(opts.page_size);
        m.generation = 1;
        m.static_kind = spec;
        m.static_n = n;
        m.auto_decided_n = decided_n;
        m.store(dir)?;
        Ok(n)
    }

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

    /// Inserts or overwrites `key`. Durable on return under
    /// [`SyncPolicy::Always`].
    pub fn put(&self, key: u64, value: u64) -> Result<()> {
        self.write_ops(&[WalOp::Put(key, value)])
    }

    /// Removes `key` (a tombstone until the next merge drops it).
    pub fn delete(&self, key: u64) -> Result<()> {
        self.write_ops(&[WalOp::Delete(key)])
    }

    /// Applies a batch atomically: after a crash either all of it or none of
    /// it is visible. Later operations on a key win over earlier ones.
    pub fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.write_ops(&batch.ops)
    }

    fn write_ops(&self, ops: &[WalOp]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        if ops.len() > MAX_BATCH_OPS {
            return Err(Error::invalid(format!(
                "a batch holds at most {MAX_BATCH_OPS} operations, got {}",
                ops.len()
            )));
        }
        let inner = &self.inner;
        inner.check_writable()?;
        inner.make_room()?;
        let gate = inner.gate.read();
        let seq = inner.next_seq.fetch_add(1, Ordering::SeqCst);
        if let Err(e) = gate.wal.append(seq, ops) {
            inner.poison(&e);
            return Err(e);
        }
        // The version cannot change while the gate is held: freezes take it
        // exclusively, so this write lands in the stage its log segment covers.
        let v = inner.version.load();
        for op in ops {
            match *op {
                WalOp::Put(k, val) => v.active.apply(k, seq, Some(val)),
                WalOp::Delete(k) => v.active.apply(k, seq, None),
            }
        }
        drop(v);
        drop(gate);
        inner.note_memory();
        Ok(())
    }

    /// Records with keys in `range`, ascending, newest value of each key,
    /// deleted keys skipped. The iterator holds one version: the static stage
    /// it started with stays readable through later merges. It sees every
    /// write acknowledged before the call and may see concurrent ones.
    pub fn range(&self, range: impl RangeBounds<u64>) -> DbRange {
        let v = self.inner.version.load_full();
        let start = match range.start_bound() {
            Bound::Included(&k) => Some(k),
            Bound::Excluded(&k) => k.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&k) => Bound::Included(k),
            Bound::Excluded(&k) => Bound::Excluded(k),
            Bound::Unbounded => Bound::Unbounded,
        };
        DbRange {
            active: MemCursor::new(v.active.clone(), start),
            frozen: v.frozen.clone().map(|f| MemCursor::new(f, start)),
            stat: StaticCursor {
                stage: v.stat.clone(),
                next: start,
                buf: Vec::new(),
                pos: 0,
            },
            end,
            done: start.is_none(),
        }
    }

    /// Makes every acknowledged write durable (syncs the log).
    pub fn sync(&self) -> Result<()> {
        let wal = self.inner.gate.read().wal.clone();
        wal.sync().inspect_err(|e| self.inner.poison(e))
    }

    /// Merges the dynamic stage into the static stage and waits for it: on
    /// return every write acknowledged before the call is in the static
    /// stage's files and the log segments it covered are deleted.
    pub fn flush(&self) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable()?;
        let mut ms = inner.merge.lock();
        // Finish a merge already under way first.
        while ms.running {
            inner.merge_cv.wait(&mut ms);
        }
        inner.check_writable()?;
        if inner.version.load().active.is_empty() {
            return Ok(());
        }
        inner.freeze(&mut ms)?;
        inner.run_frozen(ms)?;
        let mut ms = inner.merge.lock();
        while ms.running {
            inner.merge_cv.wait(&mut ms);
        }
        drop(ms);
        inner.check_writable()
    }

    /// Waits until a merge under way (or handed to the background thread)
    /// has finished, without starting one; returns the store's state (an
    /// error if that merge failed).
    pub fn wait_for_merge(&self) -> Result<()> {
        let inner = &self.inner;
        let mut ms = inner.merge.lock();
        while ms.running {
            inner.merge_cv.wait(&mut ms);
        }
        drop(ms);
        inner.check_writable()
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
        self.inner.killed.store(true, Ordering::SeqCst);
        let _ = self.shutdown(false);
    }

    fn shutdown(&self, sync: bool) -> Result<()> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.shutdown.store(true, Ordering::SeqCst);
        {
            let _ms = self.inner.merge.lock();
            self.inner.merge_cv.notify_all();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        if sync && self.inner.poisoned.lock().is_none() {
            let wal = self.inner.gate.read().wal.clone();
            wal.sync()?;
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
        })
    }

    /// The counters every file of the store reports into.
    pub fn io(&self) -> &Arc<IoStats> {
        &self.inner.io.stats
    }

    /// Reads every page of the static stage and checks its checksums;
    /// returns the pages checked.
    pub fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
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
    fn poison(&self, e: &Error) {
        let mut p = self.poisoned.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
    }

    fn check_writable(&self) -> Result<()> {
        if self.shutdown.load(Ordering::SeqCst) {
            return Err(closed_error());
        }
        match &*self.poisoned.lock() {
            Some(e) => Err(Error::Io {
                file: self.dir.describe(),
                source: std::io::Error::other(format!(
                    "the store refuses writes after an earlier failure (reopen it to recover): {e}"
                )),
            }),
            None => Ok(()),
        }
    }

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

    fn should_freeze(&self, v: &Version) -> bool {
        let a = &v.active;
        if a.is_empty() {
            return false;
        }
        match self.opts.trigger {
            MergeTrigger::Budget => {
                let stat = v.stat.as_ref().map_or(0, |s| s.memory_bytes);
                let share = self
                    .opts
                    .memory_budget
                    .saturating_sub(stat)
                    .max(MIN_DYNAMIC_BYTES);
                // Two thirds of the share per merge; while one runs, the new
                // writable stage may fill what the frozen one (compacted to
                // ~75% of its size) leaves.
                match v.frozen.as_ref() {
                    Some(f) => a.memory_bytes().saturating_add(f.memory_bytes()) >= share,
                    None => a.memory_bytes().saturating_mul(3) >= share.saturating_mul(2),
                }
            }
            MergeTrigger::Constant(b) => a.memory_bytes() >= b,
            MergeTrigger::Ratio(r) => {
                let n = v.stat.as_ref().map_or(0, |s| s.n);
                a.len().saturating_mul(r) >= n.max(MIN_RATIO_ENTRIES.saturating_mul(r))
            }
        }
    }

    /// Before a write: freezes a full dynamic stage, or waits while it is
    /// full and a merge is still running.
    fn make_room(&self) -> Result<()> {
        loop {
            if !self.should_freeze(&self.version.load()) {
                return Ok(());
            }
            let mut ms = self.merge.lock();
            self.check_writable()?;
            if ms.running {
                self.merge_cv.wait(&mut ms);
                continue;
            }
            if !self.should_freeze(&self.version.load()) {
                return Ok(());
            }
            self.freeze(&mut ms)?;
            return self.run_frozen(ms);
        }
    }

    /// Hands a frozen stage to the merge thread, or merges it here.
    fn run_frozen(&self, mut ms: MutexGuard<'_, MergeState>) -> Result<()> {
        if self.opts.background_merge {
            ms.pending = true;
            self.merge_cv.notify_all();
            return Ok(());
        }
        drop(ms);
        let r = self.merge_frozen();
        self.finish_merge(&r);
        r
    }

    /// Freezes the writable stage: a new log segment (synced, its entry
    /// synced) takes the writes from now on; the old segment is synced.
    fn freeze(&self, ms: &mut MergeState) -> Result<()> {
        let id = ms.next_segment;
        let run = || -> Result<WalWriter> {
            let st = self.io.wrap(self.dir.create(&wal_name(id))?);
            let w = WalWriter::create(st, self.opts.sync)?;
            self.dir.sync_dir()?;
            Ok(w)
        };
        let w = run().inspect_err(|e| self.poison(e))?;
        ms.next_segment = id + 1;
        let mut g = self.gate.write();
        // In-flight writers are done (they hold the gate shared): the old
        // segment is complete; make it durable before the next one is used.
        g.wal.sync().inspect_err(|e| self.poison(e))?;
        g.wal = Arc::new(w);
        let cur = self.version.load_full();
        // No writer can reach the old writable stage any more: freeze a
        // compacted copy of it (full chunks, ~3/4 of its bytes), which leaves
        // the new writable stage more of the budget while the merge runs.
        self.version.store(Arc::new(Version {
            active: Arc::new(MemTable::new()),
            frozen: Some(Arc::new(cur.active.compacted())),
            stat: cur.stat.clone(),
        }));
        drop(g);
        ms.log_start_after = id;
        ms.running = true;
        Ok(())
    }

    fn finish_merge(&self, r: &Result<()>) {
        if let Err(e) = r {
            if !self.killed.load(Ordering::SeqCst) {
                log::error!("merge failed: {e}");
            }
            self.poison(e);
        }
        let mut ms = self.merge.lock();
        // A failed merge keeps its frozen stage readable (and its log
        // segments on disk); the store refuses writes until reopened.
        ms.running = false;
        self.merge_cv.notify_all();
    }

    fn merge_loop(&self) {
        loop {
            let mut ms = self.merge.lock();
            while !ms.pending && !self.shutdown.load(Ordering::SeqCst) {
                self.merge_cv.wait(&mut ms);
            }
            if !ms.pending {
                return;
            }
            ms.pending = false;
            drop(ms);
            let r = self.merge_frozen();
            self.finish_merge(&r);
        }
    }

    fn sync_loop(&self, ms: u64) {
        let period = Duration::from_millis(ms);
        loop {
            {
                let mut g = self.merge.lock();
                if self.shutdown.load(Ordering::SeqCst) {
                    return;
                }
                self.merge_cv.wait_for(&mut g, period);
                if self.shutdown.load(Ordering::SeqCst) {
                    return;
                }
            }
            let wal = self.gate.read().wal.clone();
            if !wal.is_failed() {
                if let Err(e) = wal.sync() {
                    self.poison(&e);
                }
            }
        }
    }

    fn check_killed(&self) -> Result<()> {
        if self.killed.load(Ordering::SeqCst) {
            return Err(Error::invalid("the store was killed during a merge"));
        }
        Ok(())
    }

    /// Stream-merges the frozen stage with the static stage into a new
    /// generation, stores the manifest, publishes the new version and deletes
    /// the files it replaced.
    fn merge_frozen(&self) -> Result<()> {
        let t0 = Instant::now();
        let v = self.version.load_full();
        let Some(frozen) = v.frozen.clone() else {
            return Ok(());
        };
        let (mut manifest, log_start) = {
            let ms = self.merge.lock();
            (ms.manifest.clone(), ms.log_start_after)
        };
        let new_gen = manifest.generation + 1;
        // Merge I/O counts both as the store's and as merge I/O.
        let both = self.merge_io.clone();
        let out_view = PrefixDirectory::new(self.dir.clone(), gen_prefix(new_gen));
        let counted = CountedDir {
            inner: out_view,
            a: self.io.clone(),
            b: both.clone(),
        };
        let old_run = match &v.stat {
            Some(s) => {
                let view = PrefixDirectory::new(self.dir.clone(), gen_prefix(s.generation));
                let f = both.wrap(self.io.wrap(view.open(DATA_FILE)?));
                Some(DataRun::open(f)?)
            }
            None => None,
        };
        let old_n = old_run.as_ref().map_or(0, |r| r.len());
        let max_n = old_n + frozen.len();
        let decided = Some((manifest.static_kind.as_str(), manifest.auto_decided_n));
        // A zone map needs only its pages' bounds, not 8 bytes per record.
        let bounds = page_bounds_suffice(&self.opts.static_kind, decided, max_n);
        let mut b = RunBuilder::new(&counted, self.page_size, max_n as usize, bounds)?;
        let mut frozen_max = 0u64;
        {
            let guard = frozen.read();
            let mut fit = guard.iter().peekable();
            let mut emit = |s: &Slot, b: &mut RunBuilder| -> Result<()> {
                frozen_max = frozen_max.max(s.seq());
                match s.value() {
                    Some(val) => b.push(s.key, val),
                    None => Ok(()),
                }
            };
            let mut merge_chunk = |chunk: &PageRun, name: &str, b: &mut RunBuilder| -> Result<()> {
                let (lo, hi) = chunk.item_range();
                let per_page = chunk.per_page().max(1);
                let mut i = lo;
                while i < hi {
                    let k = chunk.key(i).ok_or_else(|| {
                        Error::corruption(name, i / per_page + 1, "record missing from page")
                    })?;
                    while let Some(s) = fit.next_if(|s| s.key < k) {
                        emit(s, b)?;
                    }
                    if let Some(s) = fit.next_if(|s| s.key == k) {
                        emit(s, b)?;
                        i += 1;
                        continue;
                    }
                    // Old records up to the next frozen key (or the page's
                    // end) go over unchanged, copied as bytes.
                    let page_end = hi.min((i / per_page + 1) * per_page);
                    let stop = fit
                        .peek()
                        .map_or(page_end, |s| chunk.lower_bound(s.key, i, page_end))
                        .max(i + 1);
                    let bytes = chunk.records_in_page(i, stop - i).ok_or_else(|| {
                        Error::corruption(name, i / per_page + 1, "records missing from page")
                    })?;
                    b.push_records(bytes)?;
                    i = stop;
                }
                Ok(())
            };
            if let Some(run) = old_run.as_ref() {
                let name = run.storage().name().to_string();
                let pages = run.meta().pages;
                let step = (MERGE_READ_BYTES / run.meta().page_size.max(1) as u64).max(1);
                // A reader thread fetches the next chunk while this one merges
                // (at most three chunks are in memory: read, queued, merged).
                std::thread::scope(|scope| -> Result<()> {
                    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<PageRun>>(1);
                    std::thread::Builder::new()
                        .name("strata-db-merge-read".into())
                        .spawn_scoped(scope, move || {
                            let mut page = 0u64;
                            while page < pages {
                                let r = run.read_pages(page, (page + step).min(pages));
                                page = match &r {
                                    Ok(c) => page + c.pages().max(1),
                                    Err(_) => pages,
                                };
                                if tx.send(r).is_err() {
                                    return;
                                }
                            }
                        })
                        .map_err(|e| Error::Io {
                            file: name.clone(),
                            source: e,
                        })?;
                    for chunk in rx {
                        self.check_killed()?;
                        merge_chunk(&chunk?, &name, &mut b)?;
                    }
                    Ok(())
                })?;
            }
            for s in fit {
                emit(s, &mut b)?;
            }
        }
        self.check_killed()?;
        let n = b.len();
        let (spec, decided_n) = b.finish(&counted, &self.opts.static_kind, decided)?;
        self.check_killed()?;
        manifest.generation = new_gen;
        manifest.static_kind = spec.clone();
        manifest.static_n = n;
        manifest.log_start = log_start;
        manifest.last_seq = manifest.last_seq.max(frozen_max);
        manifest.merges += 1;
        manifest.auto_decided_n = decided_n;
        manifest.store(self.dir.as_ref())?;
        // The new generation is durable. Publish it.
        let view = PrefixDirectory::new(self.dir.clone(), gen_prefix(new_gen));
        let stage = Arc::new(StaticStage::open(
            view,
            new_gen,
            &spec,
            self.opts.resident,
            self.io.clone(),
        )?);
        {
            let mut ms = self.merge.lock();
            ms.manifest = manifest;
            let cur = self.version.load_full();
            self.version.store(Arc::new(Version {
                active: cur.active.clone(),
                frozen: None,
                stat: Some(stage),
            }));
        }
        self.merges.fetch_add(1, Ordering::Relaxed);
        self.note_memory();
        // Delete what the new generation replaced; readers still holding the
        // old version keep their open handles.
        let mut removed = false;
        for n in self.dir.list()? {
            let old = gen_of(&n).is_some_and(|g| g < new_gen) || wal_id(&n).is_some_and(|id| id < log_start);
            if old {
                if let Err(e) = self.dir.remove(&n) {
                    log::warn!("could not remove {n} after a merge: {e}");
                }
                removed = true;
            }
        }
        if removed {
            if let Err(e) = self.dir.sync_dir() {
                log::warn!("directory sync after a merge failed: {e}");
            }
        }
        self.merge_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// Bytes a merge reads per call from the run it replaces.
const MERGE_READ_BYTES: u64 = 1 << 20;

/// A directory whose files count their I/O into two contexts (the store's
/// total and the merge's share).
#[derive(Debug)]
struct CountedDir {
    inner: PrefixDirectory<Arc<dyn Directory>>,
    a: IoContext,
    b: IoContext,
}

impl PassThrough for CountedDir {
    fn inner(&self) -> &dyn Directory {
        &self.inner
    }
    fn wrap_storage(&self, storage: Arc<dyn Storage>) -> Arc<dyn Storage> {
        self.b.wrap(self.a.wrap(storage))
    }
}

/// A cursor over one dynamic stage, fetching slots in chunks.
struct MemCursor {
    table: Arc<MemTable>,
    next: Option<u64>,
    buf: Vec<Slot>,
    pos: usize,
}

const CURSOR_CHUNK: usize = 256;

impl MemCursor {
    fn new(table: Arc<MemTable>, start: Option<u64>) -> Self {
        MemCursor {
            table,
            next: start,
            buf: Vec::new(),
            pos: 0,
        }
    }

    fn peek(&mut self) -> Option<Slot> {
        if self.pos >= self.buf.len() {
            let from = self.next?;
            self.buf.clear();
            self.pos = 0;
            self.table.range_from(from, CURSOR_CHUNK, &mut self.buf);
            self.next = match self.buf.last() {
                Some(s) if self.buf.len() == CURSOR_CHUNK => s.key.checked_add(1),
                _ => None,
            };
        }
        self.buf.get(self.pos).copied()
    }

    fn skip(&mut self, key: u64) {
        if self.peek().is_some_and(|s| s.key == key) {
            self.pos += 1;
        }
    }
}

/// A cursor over the static stage, scanning records in chunks.
struct StaticCursor {
    stage: Option<Arc<StaticStage>>,
    next: Option<u64>,
    buf: Vec<(u64, u64)>,
    pos: usize,
}

impl StaticCursor {
    fn peek(&mut self) -> Result<Option<(u64, u64)>> {
        if self.pos >= self.buf.len() {
            let (Some(stage), Some(from)) = (&self.stage, self.next) else {
                return Ok(None);
            };
            self.buf.clear();
            self.pos = 0;
            stage.index.scan(from, CURSOR_CHUNK, &mut self.buf)?;
            self.next = match self.buf.last() {
                Some(r) if self.buf.len() == CURSOR_CHUNK => r.0.checked_add(1),
                _ => None,
            };
        }
        Ok(self.buf.get(self.pos).copied())
    }

    fn skip(&mut self, key: u64) -> Result<()> {
        if self.peek()?.is_some_and(|r| r.0 == key) {
            self.pos += 1;
        }
        Ok(())
    }
}

/// An iterator over a key range of a store (see [`Db::range`]). Yields
/// `Err` once and then ends if a read fails.
pub struct DbRange {
    active: MemCursor,
    frozen: Option<MemCursor>,
    stat: StaticCursor,
    end: Bound<u64>,
    done: bool,
}

impl DbRange {
    fn step(&mut self) -> Result<Option<(u64, u64)>> {
        loop {
            let a = self.active.peek();
            let f = self.frozen.as_mut().and_then(MemCursor::peek);
            let s = self.stat.peek()?;
            let key = [a.map(|x| x.key), f.map(|x| x.key), s.map(|x| x.0)]
                .into_iter()
                .flatten()
                .min();
            let Some(key) = key else { return Ok(None) };
            let past = match self.end {
                Bound::Included(e) => key > e,
                Bound::Excluded(e) => key >= e,
                Bound::Unbounded => false,
            };
            if past {
                return Ok(None);
            }
            // Newest stage first: writable, frozen, static.
            let value = match (a, f, s) {
                (Some(x), _, _) if x.key == key => x.value(),
                (_, Some(x), _) if x.key == key => x.value(),
                (_, _, Some(r)) => Some(r.1),
                _ => None,
            };
            self.active.skip(key);
            if let Some(c) = self.frozen.as_mut() {
                c.skip(key);
            }
            self.stat.skip(key)?;
            if let Some(v) = value {
                return Ok(Some((key, v)));
            }
            if key == u64::MAX {
                return Ok(None);
            }
        }
    }
}

impl Iterator for DbRange {
    type Item = Result<(u64, u64)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests;
