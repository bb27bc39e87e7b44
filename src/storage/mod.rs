//! The only code in strata that touches files.
//!
//! Three ways to use a file, for three kinds of file:
//!
//! - [`ReadStorage`]: the read side (`read_at`, `len`, `name`). Every reader
//!   takes it: data runs, index layers, manifests. It is the trait a remote or
//!   read-only store implements, and where batched reads will go.
//! - [`Storage`]: read-write (`write_at` at any offset, `set_len`, `sync`,
//!   `write_behind`), for structures updated in place on local files: the
//!   B+-tree and the write-ahead log. It extends [`ReadStorage`], so an
//!   `Arc<dyn Storage>` is also an `Arc<dyn ReadStorage>` (trait upcasting).
//! - [`Sink`]: a file built once: `append`, then `finish` with the header of
//!   a region reserved at its start. Until `finish` returns the file does not
//!   look complete. Static index files and data runs are built this way
//!   (`format::PagedWriter`), so they can later go to an object store (a
//!   multipart put). [`StorageSink`] is the local, in-place implementation.
//!
//! [`Directory`]: named files: `create`/`open` (read-write), `open_read`,
//! `create_sink`, and `publish`, which atomically replaces a small file such as
//! a manifest (locally: temporary file, sync, rename, directory sync; on an
//! object store, a conditional put). The provided methods are built on the
//! required ones, so every directory and wrapper has them.
//!
//! - [`FsDirectory`] / [`FileStorage`]: local files with `pread`/`pwrite`, and
//!   reads through `O_DIRECT` with 4 KiB-aligned buffers when asked;
//!   `open_read` opens the file read-only.
//! - [`MemDirectory`] / [`MemStorage`]: in memory, with a crash model (drop
//!   everything not synced); [`FaultyDirectory`]: injects EIO, short reads and
//!   torn writes (a sink's appends and header are writes, its finish a sync).
//! - [`Directory::lock`] / [`DirLock`]: a shared or exclusive lock on the
//!   whole directory (`flock` on a `LOCK` file locally), so that one writer
//!   or many readers use a store or an index directory at a time.
//! - [`PassThrough`]: a directory that forwards to an inner one, overriding
//!   only name mapping, storage wrapping, sync or description.
//! - [`SimulatedStorage`]: counts every call into [`IoStats`] and charges the
//!   modelled time `T(bytes)` of a [`StorageProfile`] per read call (it never
//!   sleeps). [`CachedStorage`] + [`PageCache`]: an LRU buffer pool. Both wrap
//!   a read side ([`IoContext::wrap`]) or a read-write storage
//!   ([`IoContext::wrap_rw`], for the B+-tree and the WAL).
//! - [`profile_device`]: measures latency and bandwidth of a real device.
//! - `ObjectDirectory` (cargo feature `s3`): the objects under an
//!   `s3://bucket/prefix`, read by ranged GETs, built by multipart uploads,
//!   published by conditional puts ([`remote_url`] tells such a location
//!   from a local path, [`open_remote`] opens it).
//!
//! Byte order everywhere is little-endian; this module never interprets bytes.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod aligned;
mod batch;
mod cache;
mod fault;
mod file;
mod lock;
mod memory;
#[cfg(feature = "s3")]
mod object;
mod profile;
mod profiler;
mod simulated;
mod sink;
mod stats;
#[cfg(test)]
pub(crate) mod testing;
mod wrap;

use std::fmt::Debug;
use std::sync::Arc;

pub use aligned::{ALIGN, AlignedBuf};
pub use batch::{
    DEFAULT_QUEUE_DEPTH, IoEngine, MAX_QUEUE_DEPTH, ReadReq, ReadStream, StreamRead, uring_available,
};
pub use cache::{CacheStats, CachedStorage, PageCache};
pub use fault::{FaultKind, FaultOp, FaultPlan, FaultyDirectory, FaultyStorage};
pub use file::{FileStorage, FsDirectory, remove_created_dirs};
pub use lock::{DirLock, LOCK_FILE, LockMode};
pub use memory::{MemDirectory, MemStorage};
#[cfg(feature = "s3")]
pub use object::{ObjectDirectory, ObjectOptions, ObjectStats};
pub use profile::{PRESETS, StorageProfile};
pub use profiler::{ProfileOptions, ProfileReport, profile_device, profile_directory};
pub use simulated::SimulatedStorage;
pub use sink::StorageSink;
pub use stats::{IoSnapshot, IoStats};
pub use wrap::PassThrough;

use crate::Result;

/// Default page size of strata files: 4 KiB.
pub const DEFAULT_PAGE_SIZE: usize = 4096;

/// The read side of a file: positioned reads and its length.
///
/// Every reader of strata takes this trait: static files (data runs, index
/// layers) need nothing else, so they can live on read-only or write-once
/// storage (an object store). Implementations are thread-safe: concurrent
/// `read_at` calls are allowed and are the common case.
///
/// Batched reads ([`ReadStorage::read_stream`], and
/// [`ReadStorage::read_many`] on top of it) are provided methods whose
/// default issues the `read_at` calls one by one, so that every
/// implementation and wrapper has them; local files override `read_stream`
/// with io_uring (or a pool of threads), the accounting and caching
/// wrappers forward it.
pub trait ReadStorage: Send + Sync + Debug {
    /// Reads exactly `buf.len()` bytes starting at `offset`, or fails (a read
    /// past the end is an error).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Reads every request of `reqs` (as [`read_at`](ReadStorage::read_at)
    /// would) with up to `queue_depth` of them in flight at once, completing
    /// in any order. Returns once all are done; on an error, which requests
    /// were filled is unspecified. Every request counts as one read call.
    ///
    /// Provided, on top of [`read_stream`](ReadStorage::read_stream) (each
    /// read's bytes copied into its buffer); implementations override
    /// `read_stream`.
    fn read_many(&self, reqs: &mut [ReadReq<'_>], queue_depth: usize) -> Result<()> {
        self.read_stream(&mut batch::ManyStream::new(reqs), queue_depth)
    }
    /// Serves the reads `stream` asks for with up to `queue_depth` in
    /// flight, handing each one's bytes back as it completes while the
    /// others are still being read ([`ReadStream`]). Returns once the stream
    /// has no more reads and every read is handed back; on an error (a
    /// read's or the stream's), the reads in flight are waited for first.
    /// Every read counts as one read call.
    ///
    /// Provided: one `read_at` after another.
    fn read_stream(&self, stream: &mut dyn ReadStream, queue_depth: usize) -> Result<()> {
        let _ = queue_depth;
        batch::stream_one_by_one(self, stream)
    }
    /// Current length in bytes.
    fn len(&self) -> Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// A name for error messages (usually the file name).
    fn name(&self) -> &str;
}

/// A read-write file: the read side plus writes at any offset, truncation
/// and sync.
///
/// For structures updated in place on local files: the B+-tree (and the
/// pager under the updatable trees) and the write-ahead log. Files that are
/// built once and then only read are written through a [`Sink`] instead.
/// An `Arc<dyn Storage>` converts to an `Arc<dyn ReadStorage>` (trait
/// upcasting).
pub trait Storage: ReadStorage {
    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<()>;
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
}

/// A file being built once: appended to, then finished.
///
/// Created by [`Directory::create_sink`] with a reserved *header region* of
/// `header_len` bytes at the start: the bytes of [`append`](Sink::append)
/// follow it, and [`finish`](Sink::finish) supplies the header (known only at
/// the end, e.g. the count and page number of a paged file).
///
/// Contract for every implementation:
/// - until `finish` returns `Ok`, the file under the sink's name does not
///   look complete: it is absent, empty, or its header region is all zero
///   bytes (no strata file has a zero header: its magic number is there);
/// - when `finish` returns `Ok`, the file is complete and its contents are
///   durable; its directory entry is durable after the directory's next
///   [`Directory::sync_dir`] (or [`Directory::publish`], which ends with one);
/// - if a call fails, or the sink is dropped without `finish`, the build is
///   abandoned: what is left under the name is absent or empty (see
///   [`StorageSink`] for local directories).
///
/// A local directory writes in place ([`StorageSink`]: `pwrite` of the header
/// at 0, then sync); an object store would stream the parts after the header
/// (a multipart put), keep the header part in memory and complete the put at
/// `finish`, so nothing is visible until then.
pub trait Sink: Send + Debug {
    /// Appends `buf` after everything appended so far.
    fn append(&mut self, buf: &[u8]) -> Result<()>;
    /// A hint that everything appended so far will be made durable by
    /// `finish`: start writing it back now. Changes no contents and no
    /// durability promise (long sequential builds call it after each batch).
    fn write_behind(&mut self) -> Result<()>;
    /// Offset at which the next append lands (the header region included).
    fn position(&self) -> u64;
    /// Writes `header` into the reserved region and makes the file complete
    /// and durable. `header` must be exactly as long as the region reserved.
    fn finish(self: Box<Self>, header: &[u8]) -> Result<()>;
    /// A name for error messages (usually the file name).
    fn name(&self) -> &str;
}

/// A directory of named files: what an index, a store or a log lives in.
///
/// `rename` atomically replaces the target; `sync_dir` makes creations,
/// renames and removals durable (files' contents need their own `sync`).
/// Files built once go through [`create_sink`](Directory::create_sink) and
/// are read through [`open_read`](Directory::open_read); small files replaced
/// as a whole (manifests) through [`publish`](Directory::publish). The
/// provided methods are written with the required ones, so a wrapper that
/// forwards the required methods gets them right.
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
    /// Locks the directory in `mode` until the returned guard is dropped:
    /// one [`LockMode::Exclusive`] holder (a writer) or any number of
    /// [`LockMode::Shared`] ones (read-only users), never both. A lock held
    /// elsewhere, in another process or through another handle in this one,
    /// is [`Error::Locked`](crate::Error::Locked) at once (no waiting). A
    /// shared lock creates no file.
    fn lock(&self, mode: LockMode) -> Result<DirLock>;

    /// Opens an existing file for reading only. The default opens it for
    /// reading and writing and hands out only its read side.
    fn open_read(&self, name: &str) -> Result<Arc<dyn ReadStorage>> {
        Ok(self.open(name)?)
    }

    /// Opens an existing file as [`open`](Directory::open) does, but reading
    /// through the OS page cache where this directory reads around it
    /// (`O_DIRECT`): for passes over a file just written, whose pages are
    /// still cached. The default is [`open`](Directory::open).
    fn open_cached(&self, name: &str) -> Result<Arc<dyn Storage>> {
        self.open(name)
    }

    /// Starts building the file `name` (replacing an existing one) through a
    /// [`Sink`] with `header_len` bytes reserved at its start. The default
    /// writes in place: a [`StorageSink`] on [`create`](Directory::create).
    fn create_sink(&self, name: &str, header_len: usize) -> Result<Box<dyn Sink>> {
        Ok(Box::new(StorageSink::new(self.create(name)?, header_len)?))
    }

    /// Atomically replaces the small file `name` by `bytes`: after a crash at
    /// any point, `name` holds either its old or its new contents, never a mix
    /// (and once this returns `Ok`, the new contents are durable). The
    /// default writes `name.tmp`, syncs it, renames it over `name` and syncs
    /// the directory; an object store would use a conditional put. A failed
    /// call may leave `name.tmp` behind.
    fn publish(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let tmp = format!("{name}.tmp");
        let f = self.create(&tmp)?;
        f.write_at(0, bytes)?;
        f.sync()?;
        drop(f);
        self.rename(&tmp, name)?;
        self.sync_dir()
    }

    /// Where the build named `build` writes its files when this directory
    /// cannot replace files atomically (an object store has no rename): a
    /// directory of that build's own, which no other build writes into
    /// (on an object store, the sub-prefix `build`). `None` (the default,
    /// local directories): builds write under temporary names and rename
    /// them into place.
    fn build_dir(&self, build: &str) -> Option<Arc<dyn Directory>> {
        let _ = build;
        None
    }

    /// Total size in bytes of all files in the directory.
    fn total_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for name in self.list()? {
            total += self.open_read(&name)?.len()?;
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
    /// Reads in flight at most when a reader batches them
    /// ([`ReadStorage::read_many`]).
    pub queue_depth: usize,
}

impl Default for IoContext {
    fn default() -> Self {
        IoContext {
            stats: Arc::new(IoStats::new()),
            profile: None,
            cache: None,
            page_size: DEFAULT_PAGE_SIZE,
            queue_depth: DEFAULT_QUEUE_DEPTH,
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

    /// Wraps the read side of a file with accounting (and the cache, if
    /// any): what every reader of a static file uses.
    pub fn wrap(&self, raw: Arc<dyn ReadStorage>) -> Arc<dyn ReadStorage> {
        let counted = Arc::new(self.counted(raw));
        match &self.cache {
            Some(cache) => Arc::new(CachedStorage::new(counted, cache.clone())),
            None => counted,
        }
    }

    /// [`wrap`](IoContext::wrap) for a read-write file (the B+-tree, the
    /// WAL): writes pass through the counters (and update cached pages).
    pub fn wrap_rw(&self, raw: Arc<dyn Storage>) -> Arc<dyn Storage> {
        let counted = Arc::new(self.counted(raw));
        match &self.cache {
            Some(cache) => Arc::new(CachedStorage::new(counted, cache.clone())),
            None => counted,
        }
    }

    fn counted<S: ReadStorage + ?Sized>(&self, raw: Arc<S>) -> SimulatedStorage<S> {
        SimulatedStorage::new(raw, self.stats.clone(), self.profile.clone(), self.page_size)
    }
}

/// The URL scheme of object-store locations.
pub const S3_SCHEME: &str = "s3://";

/// The `s3://bucket/prefix` URL `path` is, if it is one: wherever strata
/// takes a directory path it also takes such a URL ([`open_remote`]).
pub fn remote_url(path: &std::path::Path) -> Option<&str> {
    path.to_str().filter(|s| s.starts_with(S3_SCHEME))
}

/// The object-store directory at `url` (`s3://bucket/prefix`), configured
/// from the environment (`ObjectDirectory::open`, `ObjectOptions::from_env`).
/// In a build without the cargo feature `s3`, [`Error::Unsupported`](crate::Error::Unsupported).
pub fn open_remote(url: &str) -> Result<Arc<dyn Directory>> {
    #[cfg(feature = "s3")]
    {
        Ok(Arc::new(ObjectDirectory::open(url, ObjectOptions::from_env()?)?))
    }
    #[cfg(not(feature = "s3"))]
    {
        Err(crate::Error::Unsupported(format!(
            "{url}: this strata was built without object storage (cargo feature `s3`)"
        )))
    }
}

/// Reads `len` bytes at `offset` into a fresh 4 KiB-aligned buffer.
pub fn read_aligned(storage: &dyn ReadStorage, offset: u64, len: usize) -> Result<AlignedBuf> {
    let mut buf = AlignedBuf::zeroed(len);
    storage.read_at(offset, &mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole contents of `name` (also used by the sink's tests).
    pub(super) fn contents(dir: &dyn Directory, name: &str) -> Vec<u8> {
        let f = dir.open_read(name).unwrap();
        let mut b = vec![0u8; f.len().unwrap() as usize];
        f.read_at(0, &mut b).unwrap();
        b
    }

    #[test]
    fn publish_replaces_atomically_on_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = FsDirectory::create_all(tmp.path()).unwrap();
        dir.publish("m", b"first").unwrap();
        dir.publish("m", b"second, longer").unwrap();
        assert_eq!(contents(&dir, "m"), b"second, longer");
        assert_eq!(dir.list().unwrap(), vec!["m".to_string()]);
    }

    /// A crash at any step of a publish leaves the old or the new contents,
    /// never a mix: the write, the file's sync or the directory sync (after
    /// the rename) fails, then power is lost.
    #[test]
    fn crash_at_any_step_of_publish_leaves_old_or_new() {
        let old: &[u8] = &[1u8; 3000];
        let new: &[u8] = &[2u8; 5000];
        let cases = [
            (FaultOp::Write, 0, FaultKind::Eio),
            (FaultOp::Write, 0, FaultKind::TornWrite),
            (FaultOp::Sync, 0, FaultKind::Eio), // the temporary file's sync
            (FaultOp::Sync, 1, FaultKind::Eio), // the directory sync after the rename
        ];
        for (op, after, kind) in cases {
            let dir = FaultyDirectory::new();
            dir.publish("m", old).unwrap();
            dir.plan().inject(op, after, kind, false);
            assert!(dir.publish("m", new).is_err(), "{op:?} {after} {kind:?}");
            let live = contents(&dir, "m");
            assert!(
                live == old || live == new,
                "{op:?} {after} {kind:?}: live view mixed"
            );
            dir.crash();
            assert_eq!(contents(&dir, "m"), old, "{op:?} {after} {kind:?}");
        }
        // Without a fault, the new contents survive the crash.
        let dir = FaultyDirectory::new();
        dir.publish("m", old).unwrap();
        dir.publish("m", new).unwrap();
        dir.crash();
        assert_eq!(contents(&dir, "m"), new);
        // A crash right after the rename, before the directory sync: old.
        let mem = MemDirectory::new();
        mem.publish("m", old).unwrap();
        let f = mem.create("m.tmp").unwrap();
        f.write_at(0, new).unwrap();
        f.sync().unwrap();
        mem.rename("m.tmp", "m").unwrap();
        mem.crash();
        assert_eq!(contents(&mem, "m"), old);
    }

    #[test]
    fn wrap_counts_reads_and_wrap_rw_writes() {
        let ctx = IoContext {
            cache: Some(Arc::new(PageCache::new(4, 4096))),
            ..IoContext::default()
        };
        let mem = MemDirectory::new();
        let rw = ctx.wrap_rw(mem.create("f").unwrap());
        rw.write_at(0, &[3u8; 8192]).unwrap();
        rw.sync().unwrap();
        let r = ctx.wrap(mem.open_read("f").unwrap());
        let mut b = [0u8; 100];
        r.read_at(4000, &mut b).unwrap();
        r.read_at(4000, &mut b).unwrap(); // served by the cache
        let s = ctx.stats.snapshot();
        assert_eq!((s.write_calls, s.syncs, s.read_calls, s.pages_read), (1, 1, 1, 2));
        assert_eq!(r.len().unwrap(), 8192);
    }
}
