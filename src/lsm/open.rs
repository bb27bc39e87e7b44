//! Opening a store: locking, the manifest, leftovers, tables, log replay.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::log::{self, Health, LogBatch, LogSpec, Recovery, WAL_HEADER_LEN, WalChain, Workers, wal_id};
use crate::lsm::table::{BlockCache, Table};
use crate::storage::{Directory, FsDirectory, IoContext, IoStats, LockMode};
use crate::{Error, Result};

use super::manifest::{
    LSM_MANIFEST_FILE, LSM_MANIFEST_TMP, LsmManifest, NUM_LEVELS, table_name, table_number,
};
use super::memtable::MemTable;
use super::options::{CACHE_PAGE, Options};
use super::stats::Counters;
use super::version::{TableFile, Version};
use super::wal::LsmOp;
use super::{Inner, State, Store};

impl Store {
    /// Opens the store in the local directory `path`, creating the directory
    /// and an empty store if missing (unless [`Options::read_only`]: then a
    /// missing store is [`Error::NotFound`]). Tables are read with
    /// `O_DIRECT` if [`Options::direct_io`].
    pub fn open(path: &Path, opts: Options) -> Result<Store> {
        // Options the store refuses create no directory.
        opts.check()?;
        let dir = if opts.read_only {
            FsDirectory::open(path)?
        } else {
            FsDirectory::create_all(path)?
        };
        Store::open_in(Arc::new(dir.with_direct(opts.direct_io)), opts)
    }

    /// Opens the store in `dir` (any [`Directory`]: a `MemDirectory` in
    /// tests), creating an empty one if `dir` holds none and the store is
    /// not read-only.
    ///
    /// Recovery: takes the lock (exclusive, or shared when read-only; held
    /// elsewhere: [`Error::Locked`]), reads and checks the manifest, removes
    /// files no manifest names (tables of an interrupted flush or
    /// compaction, covered log segments), opens every table (checking its
    /// build id), and replays the log chain into a memtable: a torn tail of
    /// the newest segment is dropped, any other damage is an error. A
    /// read-only store changes nothing on storage.
    pub fn open_in(dir: Arc<dyn Directory>, opts: Options) -> Result<Store> {
        opts.check()?;
        let read_only = opts.read_only;
        let lock = dir.lock(if read_only {
            LockMode::Shared
        } else {
            LockMode::Exclusive
        })?;
        let cache = (opts.block_cache_bytes > 0).then(|| Arc::new(BlockCache::new(opts.block_cache_bytes)));
        let io = IoContext {
            stats: Arc::new(IoStats::new()),
            profile: None,
            // Tables read through the store's block cache, not a page cache.
            cache: None,
            page_size: CACHE_PAGE,
            queue_depth: opts.queue_depth.clamp(1, crate::storage::MAX_QUEUE_DEPTH),
        };
        let wal_io = IoContext {
            cache: None,
            ..io.clone()
        };
        let manifest_path = format!("{}/{LSM_MANIFEST_FILE}", dir.describe());
        let mut names = dir.list()?;
        let manifest = match LsmManifest::load(dir.as_ref())? {
            Some(m) => m,
            None => {
                if read_only {
                    return Err(Error::NotFound(format!("no lsm store in {}", dir.describe())));
                }
                // Without a manifest nothing was ever committed: a creation
                // interrupted after its first segment leaves only a
                // header-sized segment; anything more is a store whose
                // manifest is gone.
                for n in &names {
                    let store_file = wal_id(n).is_some() || table_number(n).is_some();
                    if store_file && (table_number(n).is_some() || dir.open(n)?.len()? > WAL_HEADER_LEN) {
                        return Err(Error::corruption(
                            manifest_path,
                            0,
                            format!("the store's manifest is missing but its file {n} exists"),
                        ));
                    }
                }
                for n in names.iter().filter(|n| wal_id(n).is_some()) {
                    dir.remove(n)?;
                }
                let chain = WalChain::new(WalChain::new_store_id(), 1);
                log::create_segment::<LsmOp>(dir.as_ref(), &chain, 0, opts.sync, &|s| s)?;
                let m = LsmManifest::empty(chain);
                m.store(dir.as_ref())?;
                names = dir.list()?;
                m
            }
        };
        let live: BTreeSet<u64> = manifest.levels.iter().flatten().map(|t| t.number).collect();
        if !read_only {
            let mut removed = false;
            for n in &names {
                let stale = n == LSM_MANIFEST_TMP
                    || table_number(n).is_some_and(|t| !live.contains(&t))
                    || wal_id(n).is_some_and(|id| id < manifest.wal.first);
                if stale {
                    dir.remove(n)?;
                    removed = true;
                }
            }
            if removed {
                dir.sync_dir()?;
                names = dir.list()?;
            }
        }
        let mut levels: Vec<Vec<Arc<TableFile>>> = Vec::with_capacity(NUM_LEVELS);
        for (level, recs) in manifest.levels.iter().enumerate() {
            let mut files = Vec::with_capacity(recs.len());
            for rec in recs {
                let name = table_name(rec.number);
                if !dir.exists(&name) {
                    return Err(Error::corruption(
                        &manifest_path,
                        0,
                        format!("table {name} of L{level} is missing"),
                    ));
                }
                let mut table =
                    Table::open(io.wrap(dir.open_read(&name)?), Some(rec.build_id))?.pinned(opts.pin_tables);
                if let Some(c) = &cache {
                    table = table.with_cache(c.clone());
                }
                if table.entries() != rec.entries
                    || table.smallest() != rec.smallest.as_slice()
                    || table.largest() != rec.largest.as_slice()
                {
                    return Err(Error::corruption(
                        format!("{}/{name}", dir.describe()),
                        0,
                        "the table's entries or key bounds differ from what the manifest records",
                    ));
                }
                files.push(Arc::new(TableFile {
                    rec: rec.clone(),
                    table: Arc::new(table),
                }));
            }
            levels.push(files);
        }
        // Replay the log.
        let active = Arc::new(MemTable::new());
        let mut bad_batch: Option<u64> = None;
        let apply = |b: &LogBatch<LsmOp>| {
            let n = b.ops.len() as u64;
            match b.seq.checked_sub(n.saturating_sub(1)) {
                Some(first) if n > 0 => {
                    for (seq, op) in (first..).zip(&b.ops) {
                        active.insert(op.key(), seq, op.value());
                    }
                }
                Some(_) => {}
                None => bad_batch = Some(b.seq),
            }
        };
        let wrap = |s| wal_io.wrap_rw(s);
        let spec = LogSpec {
            names: &names,
            chain: Some(&manifest.wal),
            log_start: manifest.wal.first,
            floor: manifest.last_seq,
            recovery: if opts.strict_recovery {
                Recovery::Strict
            } else {
                Recovery::Lenient
            },
            wrap: &wrap,
        };
        let (wal, max_seq, dropped) = if read_only {
            let r = log::replay_segments(dir.as_ref(), &spec, apply)?;
            (None, r.max_seq, r.dropped)
        } else {
            let rec = log::recover::<LsmOp>(dir.as_ref(), &spec, opts.sync, apply)?;
            (Some(Arc::new(rec.writer)), rec.max_seq, rec.dropped)
        };
        if let Some(seq) = bad_batch {
            return Err(Error::corruption(
                format!("{}/{}", dir.describe(), log::wal_name(manifest.wal.newest)),
                0,
                format!("a log batch ending at sequence number {seq} holds more writes than that"),
            ));
        }
        log::warn_dropped(dir.as_ref(), &dropped);
        let next_file = manifest.next_file;
        let inner = Arc::new(Inner {
            dir,
            io,
            wal_io,
            cache,
            version: ArcSwap::from_pointee(Version::new(active, levels)),
            gate: RwLock::new(wal),
            next_seq: AtomicU64::new(max_seq + 1),
            visible: AtomicU64::new(max_seq),
            publish: Mutex::new(()),
            publish_cv: Condvar::new(),
            state: Mutex::new(State {
                manifest,
                compact_pointer: vec![Vec::new(); NUM_LEVELS],
            }),
            state_cv: Condvar::new(),
            work: Mutex::new(()),
            next_file: AtomicU64::new(next_file),
            snapshots: Mutex::new(BTreeMap::new()),
            health: Health::default(),
            counters: Counters::default(),
            recovery_dropped_frames: dropped.frames,
            opts,
        });
        inner.fit_cache();
        let mut threads = Vec::new();
        if inner.opts.background && !read_only {
            let i = inner.clone();
            threads.push(log::spawn_thread("strata-lsm-bg", move || i.background_loop())?);
        }
        let (w, p) = (inner.clone(), inner.clone());
        let syncer = log::spawn_sync(
            "strata-lsm-sync",
            inner.opts.sync,
            read_only,
            move || w.gate.read().clone(),
            move |e| p.poison(e),
        )?;
        let store = Store {
            inner,
            workers: Workers::new(threads, syncer),
            _lock: lock,
        };
        if !store.inner.opts.background && !read_only {
            store.inner.run_due_work()?;
        }
        Ok(store)
    }
}
