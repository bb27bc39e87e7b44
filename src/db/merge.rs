//! Merges: the frozen dynamic stage and the old static stage streamed into a
//! new static generation, published by the manifest (copy-on-write).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::MutexGuard;

use crate::format::DATA_FILE;
use crate::format::{DataRun, PageRun};
use crate::log::wal_id;
use crate::storage::{Directory, IoContext, PassThrough, Storage};
use crate::{Error, Result};

use super::manifest::DbEdit;
use super::memtable::Slot;
use super::prefix::PrefixDirectory;
use super::stage::{RunBuilder, StaticStage, gen_of, gen_prefix, page_bounds_suffice};
use super::{Db, Inner, MergeState, Version};

impl Db {
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
}

impl Inner {
    /// Hands a frozen stage to the merge thread, or merges it here.
    pub(super) fn run_frozen(&self, mut ms: MutexGuard<'_, MergeState>) -> Result<()> {
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

    pub(super) fn finish_merge(&self, r: &Result<()>) {
        if let Err(e) = r {
            if !self.health.is_killed() {
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

    pub(super) fn merge_loop(&self) {
        loop {
            let mut ms = self.merge.lock();
            while !ms.pending && !self.health.shutdown.load(Ordering::SeqCst) {
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

    pub(super) fn check_killed(&self) -> Result<()> {
        if self.health.is_killed() {
            return Err(Error::invalid("the store was killed during a merge"));
        }
        Ok(())
    }

    /// Stream-merges the frozen stage with the static stage into a new
    /// generation, stores the manifest, publishes the new version and deletes
    /// the files it replaced.
    pub(super) fn merge_frozen(&self) -> Result<()> {
        let t0 = Instant::now();
        let v = self.version.load_full();
        let Some(frozen) = v.frozen.clone() else {
            return Ok(());
        };
        let (manifest, log_start) = {
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
                let f = both.wrap(self.io.wrap(view.open_read(DATA_FILE)?));
                Some(DataRun::open(f)?)
            }
            None => None,
        };
        let old_n = old_run.as_ref().map_or(0, |r| r.len());
        let max_n = old_n + frozen.len();
        let decided = Some((manifest.static_kind.as_str(), manifest.auto_decided_n));
        // A zone map needs only its pages' bounds, a kind with a streaming
        // recipe reads the new run back: not 8 bytes per record.
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
        let build_id = b.build_id();
        let (spec, decided_n) = b.finish(&counted, &self.opts.static_kind, decided)?;
        self.check_killed()?;
        let manifest = manifest.commit(
            &[DbEdit::Merge {
                generation: new_gen,
                static_kind: spec.clone(),
                static_n: n,
                log_start,
                merged_seq: frozen_max,
                auto_decided_n: decided_n,
                static_build_id: Some(build_id),
            }],
            self.dir.as_ref(),
        )?;
        // The new generation is durable. Publish it.
        let view = PrefixDirectory::new(self.dir.clone(), gen_prefix(new_gen));
        let stage = Arc::new(StaticStage::open(
            view,
            new_gen,
            &spec,
            Some(build_id),
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
        self.b.wrap_rw(self.a.wrap_rw(storage))
    }
}
