//! I/O accounting: counters that stay on in production.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

use super::profile::StorageProfile;

/// Counters of the I/O that passed through one or more storages.
///
/// All counters are relaxed atomics: cheap enough to stay on in production,
/// shared by every file of an index through an `Arc<IoStats>`. Page counts are
/// the number of distinct `page_size` pages a read touches, so they are
/// deterministic for a given sequence of reads.
#[derive(Debug, Default)]
pub struct IoStats {
    read_calls: AtomicU64,
    pages_read: AtomicU64,
    bytes_read: AtomicU64,
    write_calls: AtomicU64,
    bytes_written: AtomicU64,
    syncs: AtomicU64,
    modelled_read_ps: AtomicU64,
    journal_writes: AtomicU64,
    journal_bytes: AtomicU64,
    journal_syncs: AtomicU64,
}

impl IoStats {
    /// Fresh counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one read call of `bytes` bytes touching `pages` pages, charged
    /// `modelled_ps` picoseconds of modelled device time.
    pub fn record_read(&self, bytes: u64, pages: u64, modelled_ps: u64) {
        self.read_calls.fetch_add(1, Relaxed);
        self.bytes_read.fetch_add(bytes, Relaxed);
        self.pages_read.fetch_add(pages, Relaxed);
        self.modelled_read_ps.fetch_add(modelled_ps, Relaxed);
    }

    /// Charges `modelled_ps` picoseconds of modelled device time without a
    /// read call (a batch's reads are counted one by one with
    /// [`IoStats::record_read`] and charged their overlapped time here).
    pub fn record_modelled(&self, modelled_ps: u64) {
        self.modelled_read_ps.fetch_add(modelled_ps, Relaxed);
    }

    /// Counts one write call of `bytes` bytes.
    pub fn record_write(&self, bytes: u64) {
        self.write_calls.fetch_add(1, Relaxed);
        self.bytes_written.fetch_add(bytes, Relaxed);
    }

    /// Counts one sync (fsync/fdatasync).
    pub fn record_sync(&self) {
        self.syncs.fetch_add(1, Relaxed);
    }

    /// Counts one write call of `bytes` bytes to a rollback journal (the
    /// pager's; not counted in `write_calls`).
    pub fn record_journal_write(&self, bytes: u64) {
        self.journal_writes.fetch_add(1, Relaxed);
        self.journal_bytes.fetch_add(bytes, Relaxed);
    }

    /// Counts one sync or reset (truncate + sync) of a rollback journal (not
    /// counted in `syncs`).
    pub fn record_journal_sync(&self) {
        self.journal_syncs.fetch_add(1, Relaxed);
    }

    /// A consistent-enough copy of the counters (each counter is read once).
    pub fn snapshot(&self) -> IoSnapshot {
        IoSnapshot {
            read_calls: self.read_calls.load(Relaxed),
            pages_read: self.pages_read.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            write_calls: self.write_calls.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            syncs: self.syncs.load(Relaxed),
            modelled_read_ps: self.modelled_read_ps.load(Relaxed),
            journal_writes: self.journal_writes.load(Relaxed),
            journal_bytes: self.journal_bytes.load(Relaxed),
            journal_syncs: self.journal_syncs.load(Relaxed),
        }
    }

    /// Sets every counter back to zero.
    pub fn reset(&self) {
        for c in [
            &self.read_calls,
            &self.pages_read,
            &self.bytes_read,
            &self.write_calls,
            &self.bytes_written,
            &self.syncs,
            &self.modelled_read_ps,
            &self.journal_writes,
            &self.journal_bytes,
            &self.journal_syncs,
        ] {
            c.store(0, Relaxed);
        }
    }
}

/// A plain copy of [`IoStats`]; subtract two snapshots to get the I/O of an
/// interval.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoSnapshot {
    /// Number of read calls that reached the device layer.
    pub read_calls: u64,
    /// Number of distinct pages those reads touched.
    pub pages_read: u64,
    /// Bytes requested by those reads.
    pub bytes_read: u64,
    /// Number of write calls.
    pub write_calls: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Number of syncs.
    pub syncs: u64,
    /// Modelled device time of the reads, charged by `SimulatedStorage` under
    /// its profile, in picoseconds (so that summing many short reads does not
    /// accumulate rounding error).
    pub modelled_read_ps: u64,
    /// Write calls to a rollback journal (the pager's: one per page first
    /// written since the last checkpoint, see `docs/format/pager.md`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub journal_writes: u64,
    /// Bytes written to a rollback journal.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub journal_bytes: u64,
    /// Syncs of a rollback journal (including its reset at a checkpoint).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub journal_syncs: u64,
}

/// Serde helper: leaves the journal counters out of reports that have none.
fn is_zero(x: &u64) -> bool {
    *x == 0
}

impl IoSnapshot {
    /// The counters of `self` minus those of `earlier` (saturating).
    pub fn since(&self, earlier: &IoSnapshot) -> IoSnapshot {
        IoSnapshot {
            read_calls: self.read_calls.saturating_sub(earlier.read_calls),
            pages_read: self.pages_read.saturating_sub(earlier.pages_read),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            write_calls: self.write_calls.saturating_sub(earlier.write_calls),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            syncs: self.syncs.saturating_sub(earlier.syncs),
            modelled_read_ps: self.modelled_read_ps.saturating_sub(earlier.modelled_read_ps),
            journal_writes: self.journal_writes.saturating_sub(earlier.journal_writes),
            journal_bytes: self.journal_bytes.saturating_sub(earlier.journal_bytes),
            journal_syncs: self.journal_syncs.saturating_sub(earlier.journal_syncs),
        }
    }

    /// Modelled device time charged to these reads, in nanoseconds.
    pub fn modelled_read_ns(&self) -> f64 {
        self.modelled_read_ps as f64 / 1000.0
    }

    /// The modelled read time of these reads under another affine profile.
    ///
    /// Because `T(b) = latency + b / bandwidth` is affine, the sum over reads is
    /// `calls * latency + bytes / bandwidth`, so any profile can be evaluated
    /// after the fact from two counters.
    pub fn modelled_ns_under(&self, profile: &StorageProfile) -> f64 {
        self.read_calls as f64 * profile.latency_ns + self.bytes_read as f64 * profile.ns_per_byte()
    }
}
