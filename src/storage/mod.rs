//! The only code in strata that touches files.
//!
//! - [`Storage`]: one file-like object (`read_at`, `write_at`, `len`,
//!   `set_len`, `sync`); [`Directory`]: named files in a directory, with
//!   atomic rename and directory sync for manifests.
//! - [`FsDirectory`] / [`FileStorage`]: local files with `pread`/`pwrite`, and
//!   reads through `O_DIRECT` with 4 KiB-aligned buffers when asked.
//! - [`MemDirectory`] / [`MemStorage`]: in memory, with a crash model (drop
//!   everything not synced); [`FaultyDirectory`]: injects EIO, short reads and
//!   torn writes.
//! - [`PassThrough`]: a directory that forwards to an inner one, overriding
//!   only name mapping, storage wrapping, sync or description.
//! - [`SimulatedStorage`]: counts every call into [`IoStats`] and charges the
//!   modelled time `T(bytes)` of a [`StorageProfile`] per read call (it never
//!   sleeps). [`CachedStorage`] + [`PageCache`]: an LRU buffer pool.
//! - [`profile_device`]: measures latency and bandwidth of a real device.
//!
//! Byte order everywhere is little-endian; this module never interprets bytes.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod aligned;
mod cache;
mod fault;
mod file;
mod memory;
mod profile;
mod profiler;
mod simulated;
mod stats;
mod wrap;

use std::fmt::Debug;
use std::sync::Arc;

pub use aligned::{ALIGN, AlignedBuf};
pub use cache::{CacheStats, CachedStorage, PageCache};
pub use fault::{FaultKind, FaultOp, FaultPlan, FaultyDirectory, FaultyStorage};
pub use file::{FileStorage, FsDirectory};
pub use memory::{MemDirectory, MemStorage};
pub use profile::{PRESETS, StorageProfile};
pub use profiler::{ProfileOptions, ProfileReport, profile_device};
pub use simulated::SimulatedStorage;
pub use stats::{IoSnapshot, IoStats};
pub use wrap::PassThrough;

use crate::Result;

/// Default page size of strata files: 4 KiB.
pub const DEFAULT_PAGE_SIZE: usize = 4096;

/// A file-like object: positioned reads and writes, length, sync.
///
/// Implementations are thread-safe: concurrent `read_at` calls are allowed and
/// are the common case. `read_at` reads exactly `buf.len()` bytes or fails.
pub trait Storage: Send + Sync + Debug {
    /// Reads exactly `buf.len()` bytes starting at `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<()>;
    /// Current length in bytes.
    fn len(&self) -> Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Truncates or extends the file to `len` bytes.
    fn set_len(&self, len: u64) -> Result<()>;
    /// Makes every completed write durable.
    fn sync(&self) -> Result<()>;
    /// A hint that `[offset, offset + len)` is written and will be synced:
    /// start writing it back now, without waiting (so that a long sequential
    /// writer's final [`sync`](Storage::sync) has little left to do). Changes
    /// no contents and no durability promise; the default does nothing.
    fn write_behind(&self, _offset: u64, _len: u64) -> Result<()> {
        Ok(())
    }
    /// A name for error messages (usually the file name).
    fn name(&self) -> &str;
}

/// A directory of named files: what an index, a store or a log lives in.
///
/// `rename` atomically replaces the target; `sync_dir` makes creations,
/// renames and removals durable (files' contents need their own `sync`).
pub trait Directory: Send + Sync + Debug {
    /// Creates `name` (truncating an existing file) for reading and writing.
    fn create(&self, name: &str) -> Result<Arc<dyn Storage>>;
    /// Opens an existing file for reading and writing.
    fn open(&self, name: &str) -> Result<Arc<dyn Storage>>;
    /// Whether `name` exists.
    fn exists(&self, name: &str) -> bool;
    /// Removes `name`.
    fn remove(&self, name: &str) -> Result<()>;
    /// Atomically renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// Names of all files, sorted.
    fn list(&self) -> Result<Vec<String>>;
    /// Makes the directory's entries durable.
    fn sync_dir(&self) -> Result<()>;
    /// A description for error messages (usually the path).
    fn describe(&self) -> String;

    /// Total size in bytes of all files in the directory.
    fn total_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for name in self.list()? {
            total += self.open(&name)?.len()?;
        }
        Ok(total)
    }
}

/// How the files of an index are read: accounting, modelled cost, caching.
///
/// Every storage an index opens is wrapped by [`IoContext::wrap`]: first in a
/// [`SimulatedStorage`] that counts into the shared [`IoStats`] and charges the
/// profile's modelled time, then (if a [`PageCache`] is set) in a
/// [`CachedStorage`] in front of it, so only cache misses reach the counters.
#[derive(Debug, Clone)]
pub struct IoContext {
    /// Counters shared by every file of the index.
    pub stats: Arc<IoStats>,
    /// The profile whose modelled time is charged per read call.
    pub profile: Option<StorageProfile>,
    /// An optional buffer pool in front of the device.
    pub cache: Option<Arc<PageCache>>,
    /// Page size used to count pages touched by a read.
    pub page_size: usize,
}

impl Default for IoContext {
    fn default() -> Self {
        IoContext {
            stats: Arc::new(IoStats::new()),
            profile: None,
            cache: None,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

impl IoContext {
    /// A context with fresh counters and the given profile.
    pub fn with_profile(profile: Option<StorageProfile>) -> Self {
        IoContext {
            profile,
            ..IoContext::default()
        }
    }

    /// Wraps a raw storage with accounting (and the cache, if any).
    pub fn wrap(&self, raw: Arc<dyn Storage>) -> Arc<dyn Storage> {
        let counted: Arc<dyn Storage> = Arc::new(SimulatedStorage::new(
            raw,
            self.stats.clone(),
            self.profile.clone(),
            self.page_size,
        ));
        match &self.cache {
            Some(cache) => Arc::new(CachedStorage::new(counted, cache.clone())),
            None => counted,
        }
    }
}

/// Reads `len` bytes at `offset` into a fresh 4 KiB-aligned buffer.
pub fn read_aligned(storage: &dyn Storage, offset: u64, len: usize) -> Result<AlignedBuf> {
    let mut buf = AlignedBuf::zeroed(len);
    storage.read_at(offset, &mut buf)?;
    Ok(buf)
}
