//! Flushes (a frozen memtable to an L0 table) and leveled compaction, run
//! by the background thread or inline.
//!
//! Compaction picks the level with the highest score (L0: tables over
//! [`Options::l0_compaction_trigger`](super::Options); L1..: bytes over the
//! level's target, `l1_bytes × level_ratio^(n-1)`), takes its input tables
//! (all of L0, or the next table of Ln round-robin) and the overlapping
//! tables of the next level, merges them and writes tables of at most
//! [`Options::target_file_bytes`](super::Options) cut at user-key
//! boundaries, keeping for every user key its newest version and every
//! version a live snapshot needs. A tombstone is dropped only where no
//! deeper level holds the key and no snapshot can see an older version. The
//! result is installed with one manifest edit; the input files are removed
//! afterwards.
//!
//! Under [`Granularity::Level`](super::Granularity) a compaction from Ln
//! (n >= 1) takes the whole of Ln and, from L0 on, the whole of the next
//! level, and its output is cut only at
//! [`LEVEL_TABLE_ENTRIES`](super::LEVEL_TABLE_ENTRIES): one table per level.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::log::wal_name;
use crate::lsm::key::{self, InternalIterator, ValueKind};
use crate::lsm::table::{Table, TableBuilder, TableMeta, TableOptions};
use crate::{Error, Result};

use super::iter::{LevelIter, MergingIter};
use super::manifest::{LsmEdit, NUM_LEVELS, TableRecord, table_name};
use super::options::{Granularity, LEVEL_TABLE_ENTRIES};
use super::version::{TableFile, Version};
use super::{Inner, Store};

/// How often (in entries) a compaction looks for a frozen memtable to flush.
const FLUSH_CHECK_EVERY: u64 = 1024;

/// One compaction: tables of `level` and the overlapping tables of
/// `out_level` (`level + 1`, or `level` itself for the rewrite of the
/// deepest level by `compact_range`).
#[derive(Debug)]
pub(super) struct Compaction {
    level: usize,
    out_level: usize,
    inputs: Vec<Arc<TableFile>>,
    next: Vec<Arc<TableFile>>,
}

impl Store {
    /// Freezes the memtable and flushes every frozen memtable to L0; returns
    /// when the tables and the manifest that names them are durable.
    pub fn flush(&self) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable()?;
        {
            let mut st = inner.state.lock();
            inner.freeze(&mut st)?;
        }
        let _w = inner.work.lock();
        while inner.flush_one()? {}
        drop(_w);
        inner.state_cv.notify_all();
        if !inner.opts.background {
            inner.run_due_work()?;
        }
        Ok(())
    }

    /// Flushes, then compacts every table whose user keys meet
    /// `[start, end]` (`None`: unbounded) level by level down to the deepest
    /// level holding such a table (at least into L1), and rewrites those
    /// tables of that level, so the range's overwritten versions and
    /// tombstones are dropped wherever no snapshot needs them.
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        let inner = &self.inner;
        let _w = inner.work.lock();
        let whole_levels = inner.opts.granularity == Granularity::Level;
        let overlaps = |t: &TableFile| {
            start.is_none_or(|s| t.rec.largest_user() >= s) && end.is_none_or(|e| t.rec.smallest_user() <= e)
        };
        let v = inner.version.load_full();
        let deepest = (1..NUM_LEVELS)
            .rev()
            .find(|&l| v.levels.get(l).is_some_and(|f| f.iter().any(|t| overlaps(t))))
            .unwrap_or(1);
        for level in 0..=deepest {
            let v = inner.version.load_full();
            // L0 tables overlap one another: moving some of them down while
            // an older one that shares keys with them stays in L0 would let
            // a lookup (L0 before L1) meet the older version first. So L0 is
            // compacted whole once any of its tables meets the range (as
            // `pick` does).
            let files = v.levels.get(level).map(Vec::as_slice).unwrap_or_default();
            let whole = level == 0 || whole_levels;
            let inputs: Vec<Arc<TableFile>> = if whole && files.iter().any(|t| overlaps(t)) {
                files.to_vec()
            } else {
                files.iter().filter(|t| overlaps(t)).cloned().collect()
            };
            if inputs.is_empty() {
                continue;
            }
            let c = if level == deepest {
                Compaction {
                    level,
                    out_level: level,
                    inputs,
                    next: Vec::new(),
                }
            } else {
                Compaction::with_next(&v, level, inputs, whole_levels)
            };
            inner.compact(c, true)?;
        }
        drop(_w);
        inner.state_cv.notify_all();
        Ok(())
    }
}

impl Compaction {
    /// `inputs` of `level` and the tables of `level + 1` they overlap
    /// (`whole_next`: every table of `level + 1`).
    fn with_next(v: &Version, level: usize, inputs: Vec<Arc<TableFile>>, whole_next: bool) -> Compaction {
        let lo = inputs
            .iter()
            .map(|t| t.rec.smallest_user())
            .min()
            .unwrap_or_default()
            .to_vec();
        let hi = inputs
            .iter()
            .map(|t| t.rec.largest_user())
            .max()
            .unwrap_or_default()
            .to_vec();
        let next = v
            .levels
            .get(level + 1)
            .map(|f| {
                f.iter()
                    .filter(|t| {
                        whole_next
                            || (t.rec.largest_user() >= lo.as_slice()
                                && t.rec.smallest_user() <= hi.as_slice())
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        Compaction {
            level,
            out_level: level + 1,
            inputs,
            next,
        }
    }
}

impl Inner {
    /// The target bytes of `level` (1..).
    pub(super) fn level_target(&self, level: usize) -> u64 {
        let mut t = self.opts.l1_bytes;
        for _ in 1..level {
            t = t.saturating_mul(self.opts.level_ratio);
        }
        t
    }

    /// The compaction due now, if any (the highest score of at least 1).
    pub(super) fn pick(&self, v: &Version, pointers: &[Vec<u8>]) -> Option<Compaction> {
        let mut best: Option<(f64, usize)> = None;
        for level in 0..NUM_LEVELS - 1 {
            let score = if level == 0 {
                v.l0_files() as f64 / self.opts.l0_compaction_trigger as f64
            } else {
                v.level_bytes(level) as f64 / self.level_target(level) as f64
            };
            if score >= 1.0 && best.is_none_or(|(s, _)| score > s) {
                best = Some((score, level));
            }
        }
        let (_, level) = best?;
        let files = v.levels.get(level)?;
        let whole_levels = self.opts.granularity == Granularity::Level;
        let inputs = if level == 0 || whole_levels {
            files.clone()
        } else {
            let ptr = pointers.get(level).map(Vec::as_slice).unwrap_or_default();
            let pick = files
                .iter()
                .find(|t| ptr.is_empty() || t.rec.smallest_user() > ptr)
                .or_else(|| files.first())?;
            vec![pick.clone()]
        };
        Some(Compaction::with_next(v, level, inputs, whole_levels))
    }

    /// Flushes and compacts until nothing is due (the caller holds no lock).
    pub(super) fn run_due_work(&self) -> Result<()> {
        let _w = self.work.lock();
        while self.flush_one()? {}
        loop {
            if self.health.shutdown.load(Ordering::SeqCst) {
                return Ok(());
            }
            let v = self.version.load_full();
            let c = {
                let st = self.state.lock();
                self.pick(&v, &st.compact_pointer)
            };
            let Some(c) = c else { return Ok(()) };
            self.compact(c, false)?;
        }
    }

    /// The background thread: flushes and compactions until shutdown.
    pub(super) fn background_loop(&self) {
        loop {
            {
                let mut st = self.state.lock();
                loop {
                    if self.health.shutdown.load(Ordering::SeqCst) {
                        return;
                    }
                    let v = self.version.load();
                    let due = self.health.failure().is_none()
                        && (!v.frozen.is_empty() || self.pick(&v, &st.compact_pointer).is_some());
                    if due {
                        break;
                    }
                    self.state_cv.wait_for(&mut st, Duration::from_millis(100));
                }
            }
            if let Err(e) = self.run_due_work() {
                if !self.health.is_killed() {
                    ::log::error!(
                        "{}: background flush or compaction failed: {e}",
                        self.dir.describe()
                    );
                }
                self.poison(&e);
            }
            self.state_cv.notify_all();
        }
    }

    pub(super) fn table_options(&self) -> TableOptions {
        TableOptions {
            build_id: crate::index::new_build_id(),
            ..self.opts.table.clone()
        }
    }

    pub(super) fn new_file_number(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::SeqCst)
    }

    /// Opens a table just written (through the store's I/O context).
    fn open_table(&self, rec: TableRecord) -> Result<Arc<TableFile>> {
        let raw = self.dir.open_read(&table_name(rec.number))?;
        let mut table = Table::open(self.io.wrap(raw), Some(rec.build_id))?.pinned(self.opts.pin_tables);
        if let Some(c) = &self.cache {
            table = table.with_cache(c.clone());
        }
        Ok(Arc::new(TableFile {
            rec,
            table: Arc::new(table),
        }))
    }

    fn record(number: u64, build_id: u64, meta: &TableMeta) -> TableRecord {
        TableRecord {
            number,
            size: meta.file_size,
            entries: meta.entries,
            smallest: meta.smallest.clone(),
            largest: meta.largest.clone(),
            build_id,
        }
    }

    fn note_table(&self, meta: &TableMeta) {
        self.counters
            .train_nanos
            .fetch_add(meta.train_nanos, Ordering::Relaxed);
    }

    /// Flushes the oldest frozen memtable to an L0 table; `false` if there
    /// is none. The caller holds `work`.
    pub(super) fn flush_one(&self) -> Result<bool> {
        if self.health.is_killed() {
            return Ok(false);
        }
        let Some(fr) = self.version.load().frozen.last().cloned() else {
            return Ok(false);
        };
        let t0 = Instant::now();
        let number = self.new_file_number();
        let opts = self.table_options();
        let name = table_name(number);
        let mut b = TableBuilder::new(self.dir.as_ref(), &name, &opts)?;
        let mut it = fr.mem.iter();
        it.seek_to_first()?;
        while it.valid() {
            b.add(it.key(), it.value())?;
            it.next()?;
        }
        let meta = b.finish()?;
        self.note_table(&meta);
        self.dir.sync_dir()?;
        let rec = Self::record(number, opts.build_id, &meta);
        let file = self.open_table(rec.clone())?;
        if self.health.is_killed() {
            return Ok(false);
        }
        let old_first;
        let new_first;
        {
            let mut st = self.state.lock();
            old_first = st.manifest.wal.first;
            st.manifest = st.manifest.commit(
                &[LsmEdit::Flush {
                    table: rec,
                    log_start: fr.log_end,
                    last_seq: fr.mem.max_seq(),
                }],
                self.dir.as_ref(),
            )?;
            new_first = st.manifest.wal.first;
            let cur = self.version.load_full();
            let mut frozen = cur.frozen.clone();
            if frozen.last().is_some_and(|f| Arc::ptr_eq(&f.mem, &fr.mem)) {
                frozen.pop();
            }
            let levels = cur.edited_levels(&[], &[(0, file)]);
            self.set_version(Version {
                active: cur.active.clone(),
                frozen,
                levels,
            });
            self.state_cv.notify_all();
        }
        for id in old_first..new_first {
            let n = wal_name(id);
            if self.dir.exists(&n) {
                self.dir.remove(&n)?;
            }
        }
        let c = &self.counters;
        c.flushes.fetch_add(1, Ordering::Relaxed);
        c.flush_bytes.fetch_add(meta.file_size, Ordering::Relaxed);
        c.flush_nanos
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(true)
    }

    /// Runs compaction `c` and installs its result. `manual`: from
    /// `compact_range` (a single table with nothing below is still
    /// rewritten, so its garbage is dropped). The caller holds `work`.
    pub(super) fn compact(&self, c: Compaction, manual: bool) -> Result<()> {
        let t0 = Instant::now();
        let flushed0 = self.counters.flush_nanos.load(Ordering::Relaxed);
        let out_level = c.out_level;
        let mut remove: Vec<(usize, u64)> = c.inputs.iter().map(|t| (c.level, t.rec.number)).collect();
        remove.extend(c.next.iter().map(|t| (out_level, t.rec.number)));
        let largest_input = c
            .inputs
            .iter()
            .map(|t| t.rec.largest_user().to_vec())
            .max()
            .unwrap_or_default();
        if !manual && c.level > 0 && c.inputs.len() == 1 && c.next.is_empty() {
            // A move: the table goes one level down unchanged.
            let t = c
                .inputs
                .first()
                .cloned()
                .ok_or_else(|| Error::invalid("empty compaction"))?;
            return self.install(&remove, vec![(out_level, t)], c.level, largest_input, t0, 0, 0);
        }
        // Reader floors: every live snapshot, and the newest visible
        // sequence number V. A plain read loads its version before its
        // sequence number, so a read of the version this compaction
        // installs reads at V or later; versions above V (perhaps not yet
        // visible) are all kept.
        let mut floors = self.snapshot_seqs_with_visible();
        floors.sort_unstable();
        floors.dedup();
        let v = self.version.load_full();
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        if c.level == 0 {
            for t in &c.inputs {
                children.push(Box::new(t.table.iter().without_cache_fill()));
            }
        } else {
            children.push(Box::new(LevelIter::for_compaction(c.inputs.clone())));
        }
        children.push(Box::new(LevelIter::for_compaction(c.next.clone())));
        let mut merged = MergingIter::new(children);
        merged.seek_to_first()?;
        let bottommost = |uk: &[u8]| {
            v.levels
                .iter()
                .skip(out_level + 1)
                .all(|files| !files.iter().any(|t| t.covers(uk)))
        };
        let mut outputs: Vec<(usize, Arc<TableFile>)> = Vec::new();
        let mut builder: Option<(u64, TableOptions, TableBuilder)> = None;
        let mut last_user: Option<Vec<u8>> = None;
        let mut last_stripe: Option<usize> = None;
        let mut bytes_read = 0u64;
        let mut seen = 0u64;
        while merged.valid() {
            if self.health.is_killed() {
                return Ok(());
            }
            seen += 1;
            if seen % FLUSH_CHECK_EVERY == 0 {
                while self.flush_one()? {}
            }
            let ikey = merged.key();
            let value = merged.value();
            bytes_read += (ikey.len() + value.len()) as u64;
            let p = key::parse(ikey).ok_or_else(|| {
                Error::corruption("lsm compaction", 0, "an internal key without a valid trailer")
            })?;
            let new_user = last_user.as_deref() != Some(p.user_key);
            if new_user {
                last_stripe = None;
            }
            // The stripe of a version: the oldest reader floor at or above it.
            let stripe = floors.partition_point(|&s| s < p.seq);
            let keep = if stripe == floors.len() {
                true // newer than every floor: a reader may need any of them
            } else if last_stripe == Some(stripe) {
                false // shadowed by a newer version every reader of this stripe sees
            } else {
                last_stripe = Some(stripe);
                !(p.kind == ValueKind::Delete && stripe == 0 && bottommost(p.user_key))
            };
            if keep {
                let cut = builder
                    .as_ref()
                    .is_some_and(|(_, _, b)| self.output_full(b) && new_user);
                if cut {
                    if let Some((n, o, b)) = builder.take() {
                        outputs.push((out_level, self.finish_output(n, &o, b)?));
                    }
                }
                if builder.is_none() {
                    let n = self.new_file_number();
                    let o = self.table_options();
                    let b = TableBuilder::new(self.dir.as_ref(), &table_name(n), &o)?;
                    builder = Some((n, o, b));
                }
                if let Some((_, _, b)) = builder.as_mut() {
                    b.add(ikey, value)?;
                }
            }
            if new_user {
                last_user = Some(p.user_key.to_vec());
            }
            merged.next()?;
        }
        if let Some((n, o, b)) = builder.take() {
            outputs.push((out_level, self.finish_output(n, &o, b)?));
        }
        self.dir.sync_dir()?;
        // The flushes run between entries count as flushes, not compaction.
        let flushed = self
            .counters
            .flush_nanos
            .load(Ordering::Relaxed)
            .saturating_sub(flushed0);
        let t0 = t0 + Duration::from_nanos(flushed).min(t0.elapsed());
        let written: u64 = outputs.iter().map(|(_, t)| t.rec.size).sum();
        self.install(&remove, outputs, c.level, largest_input, t0, bytes_read, written)?;
        // The inputs are in no version any more (readers still holding one
        // keep their open handles).
        for &(_, number) in &remove {
            let n = table_name(number);
            if self.dir.exists(&n) {
                self.dir.remove(&n)?;
            }
        }
        Ok(())
    }

    /// Whether an output table is complete: at the target file size, or
    /// under [`Granularity::Level`] at [`LEVEL_TABLE_ENTRIES`] entries.
    pub(super) fn output_full(&self, b: &TableBuilder) -> bool {
        match self.opts.granularity {
            Granularity::Table => b.estimated_size() >= self.opts.target_file_bytes,
            Granularity::Level => b.entries() >= LEVEL_TABLE_ENTRIES,
        }
    }

    pub(super) fn finish_output(
        &self,
        number: u64,
        o: &TableOptions,
        b: TableBuilder,
    ) -> Result<Arc<TableFile>> {
        let meta = b.finish()?;
        self.note_table(&meta);
        self.open_table(Self::record(number, o.build_id, &meta))
    }

    /// Publishes a compaction's manifest edit and swaps in the new version.
    #[expect(
        clippy::too_many_arguments,
        reason = "the figures of one compaction, used once"
    )]
    fn install(
        &self,
        remove: &[(usize, u64)],
        add: Vec<(usize, Arc<TableFile>)>,
        level: usize,
        largest_input: Vec<u8>,
        t0: Instant,
        read: u64,
        written: u64,
    ) -> Result<()> {
        if self.health.is_killed() {
            return Ok(());
        }
        let mut st = self.state.lock();
        let edit = LsmEdit::Compact {
            remove: remove.to_vec(),
            add: add.iter().map(|(l, t)| (*l, t.rec.clone())).collect(),
        };
        st.manifest = st.manifest.commit(&[edit], self.dir.as_ref())?;
        let cur = self.version.load_full();
        let next = Version {
            active: cur.active.clone(),
            frozen: cur.frozen.clone(),
            levels: cur.edited_levels(remove, &add),
        };
        next.check_levels()?;
        self.set_version(next);
        if let Some(p) = st.compact_pointer.get_mut(level) {
            *p = largest_input;
        }
        self.state_cv.notify_all();
        drop(st);
        let c = &self.counters;
        c.compactions.fetch_add(1, Ordering::Relaxed);
        c.compaction_bytes_read.fetch_add(read, Ordering::Relaxed);
        c.compaction_bytes_written.fetch_add(written, Ordering::Relaxed);
        c.compaction_nanos
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The live snapshots' sequence numbers and the newest visible one,
    /// read together (a snapshot registers under the same lock).
    fn snapshot_seqs_with_visible(&self) -> Vec<u64> {
        let snaps = self.snapshots.lock();
        let mut out: Vec<u64> = snaps.keys().copied().collect();
        out.push(self.visible.load(Ordering::SeqCst));
        out
    }
}
