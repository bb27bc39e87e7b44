//! The write path: batches, the log append, the memtable insert, freezing a
//! full memtable, and waiting for room.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::log::create_segment;
use crate::lsm::key;
use crate::{Error, Result};

use super::manifest::LsmEdit;
use super::memtable::MemTable;
use super::version::{Frozen, Version};
use super::wal::LsmOp;
use crate::log::read_only_error;

use super::{Inner, State, Store};

/// Most bytes one batch may encode to in the log (its frame length is a
/// u32; concurrent batches share frames, so one batch takes at most a
/// quarter of that).
pub const MAX_BATCH_BYTES: usize = 1 << 30;

/// Writes applied atomically by [`Store::write_batch`], in order (a later
/// write to a key wins over an earlier one in the same batch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<LsmOp>,
    bytes: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put of `key` with `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.push(LsmOp::Put(key.to_vec(), value.to_vec()))
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.push(LsmOp::Delete(key.to_vec()))
    }

    fn push(&mut self, op: LsmOp) -> &mut Self {
        self.bytes = self.bytes.saturating_add(op.encoded_len());
        self.ops.push(op);
        self
    }

    /// Number of writes.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every write.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.bytes = 0;
    }

    /// The writes, in order.
    pub fn ops(&self) -> &[LsmOp] {
        &self.ops
    }
}

impl Store {
    /// Inserts or overwrites `key`. Durable on return under
    /// [`SyncPolicy::Always`](crate::log::SyncPolicy::Always). A key over
    /// 64 KiB or a value over 64 MiB is [`Error::InvalidInput`] and nothing
    /// is written.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        key::check_entry(key, Some(value))?;
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.inner.write(&b)
    }

    /// Deletes `key` (a tombstone until compaction drops it at the bottom).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        key::check_entry(key, None)?;
        let mut b = WriteBatch::new();
        b.delete(key);
        self.inner.write(&b)
    }

    /// Applies a batch atomically: after a crash all of it or none of it is
    /// visible, and readers see all of it or none. Every key and value is
    /// checked first; one over the limits fails the whole batch.
    pub fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        for op in &batch.ops {
            key::check_entry(op.key(), op.value())?;
        }
        self.inner.write(batch)
    }
}

impl Inner {
    fn write(&self, batch: &WriteBatch) -> Result<()> {
        let ops = &batch.ops;
        if ops.is_empty() {
            return Ok(());
        }
        if batch.bytes > MAX_BATCH_BYTES {
            return Err(Error::invalid(format!(
                "a batch encodes to at most {MAX_BATCH_BYTES} bytes, this one to {}",
                batch.bytes
            )));
        }
        self.check_writable()?;
        self.make_room()?;
        let n = ops.len() as u64;
        let gate = self.gate.read();
        let Some(wal) = gate.as_ref() else {
            return Err(read_only_error(self.dir.as_ref()));
        };
        let first = self.next_seq.fetch_add(n, Ordering::SeqCst);
        let last = first + n - 1;
        let logged = wal.append(last, ops);
        if logged.is_ok() {
            // The version cannot change while the gate is held (a freeze
            // takes it exclusively): these writes land in the memtable
            // their log segment covers.
            let v = self.version.load();
            for (seq, op) in (first..).zip(ops) {
                v.active.insert(op.key(), seq, op.value());
            }
        }
        drop(gate);
        self.publish(first, last);
        if let Err(e) = logged {
            self.poison(&e);
            return Err(e);
        }
        let c = &self.counters;
        c.user_bytes_written.fetch_add(
            ops.iter()
                .map(|o| (o.key().len() + o.value().map_or(0, <[u8]>::len)) as u64)
                .sum(),
            Ordering::Relaxed,
        );
        c.wal_bytes.fetch_add(batch.bytes as u64 + 12, Ordering::Relaxed);
        Ok(())
    }

    /// Makes sequence numbers `first..=last` visible once every lower one is.
    pub(super) fn publish(&self, first: u64, last: u64) {
        let mut g = self.publish.lock();
        while self.visible.load(Ordering::SeqCst) + 1 != first {
            self.publish_cv.wait(&mut g);
        }
        self.visible.store(last, Ordering::SeqCst);
        self.publish_cv.notify_all();
    }

    /// Before a write: freezes a full memtable; waits while too many frozen
    /// memtables or L0 tables wait for the background thread (or does that
    /// work inline when there is none); sleeps 1 ms once from the L0
    /// slowdown threshold.
    fn make_room(&self) -> Result<()> {
        let mut slept = false;
        loop {
            let v = self.version.load();
            let o = &self.opts;
            let full = v.active.memory_bytes() >= o.write_buffer_bytes;
            let stall = v.l0_files() >= o.l0_stop || (full && v.frozen.len() >= o.max_immutable);
            if stall {
                if !o.background {
                    self.run_due_work()?;
                    continue;
                }
                let t0 = std::time::Instant::now();
                let mut st = self.state.lock();
                self.check_writable()?;
                self.state_cv.notify_all();
                self.state_cv.wait_for(&mut st, Duration::from_millis(10));
                drop(st);
                self.counters
                    .stall_micros
                    .fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
                continue;
            }
            if full {
                let mut st = self.state.lock();
                self.check_writable()?;
                if self.version.load().active.memory_bytes() >= o.write_buffer_bytes {
                    self.freeze(&mut st)?;
                }
                drop(st);
                if o.background {
                    self.state_cv.notify_all();
                } else {
                    self.run_due_work()?;
                }
                continue;
            }
            if v.l0_files() >= o.l0_slowdown && !slept {
                slept = true;
                self.counters.slowdown_writes.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            return Ok(());
        }
    }

    /// Freezes the active memtable (if it holds anything) and rotates the
    /// log, in the order that keeps a crash safe: the new segment is created
    /// (header and directory synced); in-flight writes finish and the old
    /// segment is synced; the manifest is published recording the old
    /// segment as sealed and the new one as the newest; only then do writes
    /// go to the new segment and memtable.
    pub(super) fn freeze(&self, st: &mut State) -> Result<()> {
        if self.version.load().active.is_empty() {
            return Ok(());
        }
        let chain = st.manifest.wal.clone();
        let next = chain.sealed_at(0, 0);
        let w = create_segment(self.dir.as_ref(), &next, 0, self.opts.sync, &|s| {
            self.wal_io.wrap_rw(s)
        })
        .inspect_err(|e| self.poison(e))?;
        let mut g = self.gate.write();
        let Some(old) = g.clone() else {
            return Err(read_only_error(self.dir.as_ref()));
        };
        old.sync().inspect_err(|e| self.poison(e))?;
        let sealed = chain.sealed_at(old.len(), old.last_seq());
        w.raise_floor(old.last_seq());
        st.manifest = st
            .manifest
            .commit(&[LsmEdit::Wal(sealed)], self.dir.as_ref())
            .inspect_err(|e| self.poison(e))?;
        *g = Some(Arc::new(w));
        let cur = self.version.load_full();
        let mut frozen = cur.frozen.clone();
        frozen.insert(
            0,
            Frozen {
                mem: cur.active.clone(),
                log_end: next.newest,
            },
        );
        self.set_version(Version {
            active: Arc::new(MemTable::new()),
            frozen,
            levels: cur.levels.clone(),
        });
        drop(g);
        Ok(())
    }
}
