//! The write path: batches, the log append, and freezing a full dynamic stage.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::log::create_segment;
use crate::{Error, Result};

use super::manifest::DbEdit;
use super::memtable::MemTable;
use super::options::{MIN_DYNAMIC_BYTES, MIN_RATIO_ENTRIES, MergeTrigger};
use super::wal::WalOp;
use super::{Db, Inner, MergeState, Version};

/// Most operations one batch may hold.
pub const MAX_BATCH_OPS: usize = 1 << 20;

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

/// Applies the operations of batch `seq` to a dynamic stage, in order.
pub(super) fn apply_ops(table: &MemTable, seq: u64, ops: &[WalOp]) {
    for op in ops {
        match *op {
            WalOp::Put(k, v) => table.apply(k, seq, Some(v)),
            WalOp::Delete(k) => table.apply(k, seq, None),
        }
    }
}

impl Db {
    /// Inserts or overwrites `key`. Durable on return under
    /// [`SyncPolicy::Always`](super::SyncPolicy::Always).
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
        if let Err(e) = gate.writer(inner.dir.as_ref())?.append(seq, ops) {
            inner.poison(&e);
            return Err(e);
        }
        // The version cannot change while the gate is held: freezes take it
        // exclusively, so this write lands in the stage its log segment covers.
        let v = inner.version.load();
        apply_ops(&v.active, seq, ops);
        drop(v);
        drop(gate);
        inner.note_memory();
        Ok(())
    }

    /// Makes every acknowledged write durable (syncs the log).
    pub fn sync(&self) -> Result<()> {
        let wal = self.inner.gate.read().wal.clone();
        match wal {
            Some(wal) => wal.sync().inspect_err(|e| self.inner.poison(e)),
            None => Ok(()), // read-only: nothing to make durable
        }
    }
}

impl Inner {
    pub(super) fn poison(&self, e: &Error) {
        self.health.poison(e);
    }

    pub(super) fn check_writable(&self) -> Result<()> {
        self.health.check_writable(self.dir.as_ref(), self.opts.read_only)
    }

    pub(super) fn should_freeze(&self, v: &Version) -> bool {
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
    pub(super) fn make_room(&self) -> Result<()> {
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

    /// Freezes the writable stage and rotates the log, in the order that
    /// keeps a crash safe: the new segment is created (header synced, entry
    /// synced); in-flight writes finish and the old segment is synced; the
    /// manifest is published recording the old segment as sealed (its length
    /// and last sequence number) and the new one as the newest; only then do
    /// writes go to the new segment.
    pub(super) fn freeze(&self, ms: &mut MergeState) -> Result<()> {
        let Some(chain) = ms.manifest.wal.clone() else {
            return Err(Error::invalid("the store's manifest records no log chain"));
        };
        let next = chain.sealed_at(0, 0);
        let w = create_segment(self.dir.as_ref(), &next, 0, self.opts.sync, &|s| {
            self.io.wrap_rw(s)
        })
        .inspect_err(|e| self.poison(e))?;
        let id = next.newest;
        ms.next_segment = id + 1;
        let mut g = self.gate.write();
        // In-flight writers are done (they hold the gate shared): the old
        // segment is complete; make it durable before the manifest seals it.
        let old = g.writer(self.dir.as_ref())?.clone();
        old.sync().inspect_err(|e| self.poison(e))?;
        let sealed = chain.sealed_at(old.len(), old.last_seq());
        w.raise_floor(old.last_seq());
        ms.manifest = ms
            .manifest
            .commit(&[DbEdit::Wal(sealed)], self.dir.as_ref())
            .inspect_err(|e| self.poison(e))?;
        g.wal = Some(Arc::new(w));
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
}
