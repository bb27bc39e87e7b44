//! Opening a store (recovery) and bulk loading a new one.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::log::{self, Health, LogSpec, Recovery, WAL_HEADER_LEN, WalChain, Workers, wal_id};
use crate::storage::{Directory, FsDirectory, IoContext, IoStats, LockMode};
use crate::{Error, Result};

use super::manifest::{DB_MANIFEST_FILE, DB_MANIFEST_TMP, DbEdit, DbManifest};
use super::memtable::MemTable;
use super::options::Options;
use super::prefix::PrefixDirectory;
use super::stage::{RunBuilder, StaticStage, gen_of, gen_prefix, page_bounds_suffice};
use super::wal::WalOp;
use super::write::apply_ops;
use super::{Db, Inner, MergeState, Version, WalState};

impl Db {
    /// Opens the store in the local directory `path`, creating the directory
    /// and an empty store if [`Options::create_if_missing`] is set and the
    /// store is not read-only; otherwise a missing directory is
    /// [`Error::NotFound`] naming it, and nothing is created.
    pub fn open_path(path: impl AsRef<std::path::Path>, opts: Options) -> Result<Db> {
        // Options the store refuses create no directory.
        opts.check()?;
        let dir: Arc<dyn Directory> = if opts.create_if_missing && !opts.read_only {
            Arc::new(FsDirectory::create_all(path.as_ref())?)
        } else {
            Arc::new(FsDirectory::open(path.as_ref())?)
        };
        Db::open(dir, opts)
    }

    /// Opens the store in `dir`, creating an empty one if `dir` holds none
    /// (unless [`Options::create_if_missing`] is false or the store is
    /// [`Options::read_only`]: then that is [`Error::NotFound`]).
    ///
    /// Locking: a writer holds `dir`'s exclusive lock, a read-only store its
    /// shared lock, until the `Db` is closed or dropped (also after
    /// [`Db::kill`]); a lock held elsewhere, in another process or by
    /// another `Db` in this one, is [`Error::Locked`]. So a read-only open is
    /// refused while a writer runs (it never reads a state a writer is
    /// changing), and a writer is refused while readers have the store open.
    ///
    /// Recovery: reads and checks the manifest, removes the files of an
    /// interrupted merge and the log segments a finished merge covered, opens
    /// the static generation, and replays every remaining log segment in
    /// order into the dynamic stage. A torn frame at the end of the newest
    /// segment is dropped (it was never acknowledged); any other damage is an
    /// error. A read-only store replays the same log into memory but skips a
    /// torn tail without truncating it, and removes no leftover file.
    pub fn open(dir: Arc<dyn Directory>, opts: Options) -> Result<Db> {
        let io = IoContext::with_profile(opts.profile.clone());
        Db::open_with_io(dir, opts, io)
    }

    /// [`Db::open`] with the store's I/O counted into `io` (its page cache,
    /// if any, is not used: the store's memory is its budget).
    pub fn open_with_io(dir: Arc<dyn Directory>, opts: Options, io: IoContext) -> Result<Db> {
        opts.check()?;
        let read_only = opts.read_only;
        let lock = dir.lock(if read_only {
            LockMode::Shared
        } else {
            LockMode::Exclusive
        })?;
        let io = IoContext { cache: None, ..io };
        let merge_io = IoContext {
            stats: Arc::new(IoStats::new()),
            ..io.clone()
        };
        let mut names = dir.list()?;
        let mut manifest = match DbManifest::load(dir.as_ref())? {
            Some(m) => m,
            None => {
                if !creation_leftovers(dir.as_ref(), &names)? {
                    if let Some(n) = names.iter().find(|n| wal_id(n).is_some() || gen_of(n).is_some()) {
                        return Err(Error::corruption(
                            format!("{}/{DB_MANIFEST_FILE}", dir.describe()),
                            0,
                            format!("the store's manifest is missing but its file {n} exists"),
                        ));
                    }
                }
                if read_only || !opts.create_if_missing {
                    return Err(Error::NotFound(format!("no store in {}", dir.describe())));
                }
                // A new store: its first segment, then the manifest that
                // records it (a crash between leaves a header-only segment
                // and no manifest: the leftover of a creation, removed here).
                for n in names.iter().filter(|n| wal_id(n).is_some()) {
                    dir.remove(n)?;
                }
                let chain = WalChain::new(WalChain::new_store_id(), 1);
                log::create_segment::<WalOp>(dir.as_ref(), &chain, 0, opts.sync, &|s| s)?;
                let mut m = DbManifest::empty(opts.page_size);
                m.wal = Some(chain);
                m.store(dir.as_ref())?;
                names = dir.list()?;
                m
            }
        };
        let manifest_path = format!("{}/{DB_MANIFEST_FILE}", dir.describe());
        if let Some(c) = &manifest.wal {
            c.check(&manifest_path)?;
            if c.first != manifest.log_start {
                return Err(Error::corruption(
                    manifest_path,
                    0,
                    format!(
                        "log chain starts at segment {}, log_start is {}",
                        c.first, manifest.log_start
                    ),
                ));
            }
        }
        crate::format::page::check_page_size(manifest.page_size)?;
        // Leftovers: an unfinished manifest, an interrupted merge's files,
        // segments a finished merge covered.
        let mut removed = false;
        for n in names.iter().filter(|_| !read_only) {
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
                manifest.static_build_id,
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
        let active = Arc::new(MemTable::new());
        let wrap = |s| io.wrap_rw(s);
        let apply = |b: &log::LogBatch<WalOp>| apply_ops(&active, b.seq, &b.ops);
        let spec = LogSpec {
            names: &names,
            chain: manifest.wal.as_ref(),
            log_start: manifest.log_start,
            floor: manifest.last_seq,
            recovery: if opts.strict_recovery {
                Recovery::Strict
            } else {
                Recovery::Lenient
            },
            wrap: &wrap,
        };
        let (wal, segment, max_seq, dropped) = if read_only {
            let r = log::replay_segments(dir.as_ref(), &spec, apply)?;
            (
                None,
                manifest.wal.as_ref().map_or(manifest.log_start, |c| c.newest),
                r.max_seq,
                r.dropped,
            )
        } else {
            let rec = log::recover::<WalOp>(dir.as_ref(), &spec, opts.sync, apply)?;
            if rec.upgraded {
                manifest = manifest.commit(&[DbEdit::Wal(rec.chain.clone())], dir.as_ref())?;
            }
            (Some(Arc::new(rec.writer)), rec.segment, rec.max_seq, rec.dropped)
        };
        log::warn_dropped(dir.as_ref(), &dropped);
        let recovery_segment = format!("{}/{}", dir.describe(), log::wal_name(segment));
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
            gate: RwLock::new(WalState { wal }),
            next_seq: AtomicU64::new(max_seq + 1),
            merge: Mutex::new(MergeState {
                manifest,
                running: false,
                pending: false,
                log_start_after: segment,
                next_segment: segment + 1,
            }),
            merge_cv: Condvar::new(),
            health: Health::default(),
            peak_memory: AtomicU64::new(0),
            recovery_dropped: dropped,
            recovery_segment,
            merges: AtomicU64::new(0),
            merge_ns: AtomicU64::new(0),
            opts,
        });
        inner.note_memory();
        let mut threads = Vec::new();
        if inner.opts.background_merge && !read_only {
            let i = inner.clone();
            threads.push(log::spawn_thread("strata-db-merge", move || i.merge_loop())?);
        }
        let (w, p) = (inner.clone(), inner.clone());
        let syncer = log::spawn_sync(
            "strata-db-sync",
            inner.opts.sync,
            read_only,
            move || w.gate.read().wal.clone(),
            move |e| p.poison(e),
        )?;
        Ok(Db {
            inner,
            workers: Workers::new(threads, syncer),
            _lock: lock,
        })
    }

    /// Bulk-loads sorted records (strictly increasing keys) as the static
    /// stage of a new store in `dir`. Fails if `dir` already holds a store
    /// that has been written to (an empty one, as a crash during a load
    /// leaves, takes the load). The empty store is created first and the
    /// load committed by its manifest, written last after every file is
    /// synced, so a crash leaves no store, an empty one, or the whole load.
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
    /// store afterwards (or the empty store it was given).
    pub fn try_bulk_load(
        dir: &dyn Directory,
        opts: &Options,
        records: impl IntoIterator<Item = Result<(u64, u64)>>,
    ) -> Result<u64> {
        opts.check()?;
        if opts.read_only {
            return Err(Error::invalid("a bulk load cannot be read-only"));
        }
        let _lock = dir.lock(LockMode::Exclusive)?;
        let leftovers = |dir: &dyn Directory, also_store: bool| -> Result<()> {
            for n in dir.list()? {
                let store_file = n == DB_MANIFEST_FILE || wal_id(&n).is_some();
                if n == DB_MANIFEST_TMP || gen_of(&n).is_some() || (also_store && store_file) {
                    dir.remove(&n)?;
                }
            }
            Ok(())
        };
        // The empty store comes first (its log segment, then its manifest),
        // and the load is committed to it by one more manifest edit: a crash
        // during the load leaves an empty store whose next open removes the
        // load's files (they belong to no generation of the manifest), and a
        // retried load goes into that empty store.
        let (base, fresh) = match DbManifest::load(dir)? {
            Some(m) if untouched(dir, &m, opts)? => {
                leftovers(dir, false)?;
                (m, false)
            }
            Some(_) => {
                return Err(Error::invalid(format!(
                    "{} already holds a store; bulk loads go into a new one (use put or write_batch)",
                    dir.describe()
                )));
            }
            None => {
                leftovers(dir, true)?;
                let chain = WalChain::new(WalChain::new_store_id(), 1);
                log::create_segment::<WalOp>(dir, &chain, 0, opts.sync, &|s| s)?;
                let m = DbManifest::empty(opts.page_size).commit(&[DbEdit::Wal(chain)], dir)?;
                (m, true)
            }
        };
        let load = || -> Result<(u64, String, u64, u64)> {
            let view = PrefixDirectory::new(dir, gen_prefix(1));
            let iter = records.into_iter();
            let bounds = page_bounds_suffice(&opts.static_kind, None, u64::MAX);
            let mut b = RunBuilder::new(&view, opts.page_size, iter.size_hint().0, bounds)?;
            for r in iter {
                let (k, v) = r?;
                b.push(k, v)?;
            }
            let n = b.len();
            let build_id = b.build_id();
            let (spec, decided_n) = b.finish(&view, &opts.static_kind, None)?;
            Ok((n, spec, decided_n, build_id))
        };
        let committed = load().and_then(|(n, spec, decided_n, build_id)| {
            base.commit(
                &[DbEdit::BulkLoad {
                    static_kind: spec,
                    static_n: n,
                    auto_decided_n: decided_n,
                    static_build_id: Some(build_id),
                }],
                dir,
            )?;
            Ok(n)
        });
        match committed {
            Ok(n) => Ok(n),
            Err(e) => {
                // Best effort: the error is what the caller needs to see. A
                // store this load created goes again; an empty one it was
                // given stays.
                let _ = leftovers(dir, fresh);
                Err(e)
            }
        }
    }
}

/// Whether the store of manifest `m` is one a bulk load may still go into:
/// empty and never written (no generation, no merge, no sequence number, one
/// log segment of only its header) — what a load interrupted by a crash
/// leaves — with the page size of `opts`.
fn untouched(dir: &dyn Directory, m: &DbManifest, opts: &Options) -> Result<bool> {
    let Some(chain) = &m.wal else { return Ok(false) };
    if m.generation != 0 || m.merges != 0 || m.last_seq != 0 || m.page_size != opts.page_size {
        return Ok(false);
    }
    if !chain.sealed.is_empty() || chain.first != chain.newest {
        return Ok(false);
    }
    let name = log::wal_name(chain.newest);
    Ok(dir.exists(&name) && dir.open(&name)?.len()? <= WAL_HEADER_LEN)
}

/// Whether `names` (a directory without a manifest) hold only what an
/// interrupted creation leaves: log segments of at most a header, and no
/// generation file. Such a directory holds no store.
fn creation_leftovers(dir: &dyn Directory, names: &[String]) -> Result<bool> {
    if names.iter().any(|n| gen_of(n).is_some()) {
        return Ok(false);
    }
    for n in names.iter().filter(|n| wal_id(n).is_some()) {
        if dir.open(n)?.len()? > WAL_HEADER_LEN {
            return Ok(false);
        }
    }
    Ok(true)
}
