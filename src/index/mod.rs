//! Index kinds behind one trait.
//!
//! Every index kind maps `u64` keys to `u64` values and answers point lookups,
//! lower bounds and range scans through the [`Index`] trait; updatable kinds
//! also take inserts and deletes. Kinds are built into an index *directory*
//! (a [`Directory`](crate::storage::Directory) holding a manifest, `strata-index.json`, and the kind's
//! files) and opened from it by name through a [`Registry`], so the CLI, the
//! benchmark runner and the Python bindings treat every kind alike. This
//! module's [`registry()`] holds the kinds defined here; kinds defined above
//! (`air` in `tune`, `db`) join them in `strata::registry`, the top of the
//! crate, so that nothing here names a module above it.

pub mod alex;
mod batch;
pub mod binary;
pub mod btree;
mod cursor;
pub mod dpgm;
pub mod fiting;
pub mod layered;
pub mod lipp;
mod manifest;
mod params;
mod registry;
pub(crate) use registry::check_keys;
mod scan;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

pub use cursor::{Cursor, LowerBoundCursor};
pub use manifest::{MANIFEST_FILE, Manifest, new_build_id};
pub use params::{IndexSpec, KindParam, ParamDoc, Params, parse_size};
pub use registry::{
    BuildOptions, BuildReport, IndexKind, OpenOptions, PAGE_PARAM, Registry, Residency, files_dir, registry,
};
pub(crate) use scan::{DataRunCursor, DataRunReader, Fetch, Located};

use crate::storage::IoStats;
use crate::{Error, Result};

/// A `(key, value)` pair.
pub type Record = (u64, u64);

/// Sorted records to build an index from: strictly increasing keys, and
/// values (by default each key's rank, SOSD's lookup task), in memory or as
/// a [`RecordStream`] read once (a key file, a merge) by the kinds that
/// stream their build, and read into memory for the others.
#[derive(Debug, Clone, Copy)]
pub struct Records<'a> {
    src: Src<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Src<'a> {
    Slice {
        keys: &'a [u64],
        values: Option<&'a [u64]>,
    },
    Stream(&'a dyn StreamSource),
}

/// What [`Records`] asks of a [`RecordStream`] (its iterator's lifetime erased).
trait StreamSource: Sync + std::fmt::Debug {
    fn drain(&self, f: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<()>;
    fn all(&self) -> Result<&(Vec<u64>, Vec<u64>)>;
    fn all_read(&self) -> Option<usize>;
    fn count(&self) -> u64;
}

/// Every key and value of a stream read into memory.
type KeysAndValues = (Vec<u64>, Vec<u64>);

/// The fallible iterator of record chunks behind a [`RecordStream`].
type ChunkIter<'a> = Box<dyn Iterator<Item = Result<Vec<Record>>> + Send + 'a>;

/// Records a [`RecordStream`] made from single records groups per chunk.
const STREAM_CHUNK: usize = 1 << 12;

/// Records coming from an iterator, read once: a build that streams holds
/// none of them; a kind that needs them all reads them into memory (8 bytes
/// per key and per value) on first use. Keys are checked to be strictly
/// increasing as they pass ([`Error::OutOfOrder`]).
pub struct RecordStream<'a> {
    iter: std::sync::Mutex<Option<ChunkIter<'a>>>,
    /// Records handed out so far, and the last key.
    seen: std::sync::Mutex<(u64, Option<u64>)>,
    all: std::sync::OnceLock<std::result::Result<KeysAndValues, String>>,
    /// The error reading the stream into memory ended with, handed to the
    /// first caller as it was (later callers get its text).
    failed: std::sync::Mutex<Option<Error>>,
}

impl std::fmt::Debug for RecordStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordStream").field("seen", &self.seen).finish()
    }
}

impl<'a> RecordStream<'a> {
    /// Records from `iter`, in key order.
    pub fn new(iter: impl Iterator<Item = Result<Record>> + Send + 'a) -> Self {
        let mut iter = iter.fuse();
        // An error ends the stream, after the records read before it.
        let mut pending: Option<Error> = None;
        Self::from_chunks(std::iter::from_fn(move || {
            if let Some(e) = pending.take() {
                return Some(Err(e));
            }
            let mut chunk = Vec::with_capacity(STREAM_CHUNK);
            for r in iter.by_ref() {
                match r {
                    Ok(rec) => chunk.push(rec),
                    Err(e) if chunk.is_empty() => return Some(Err(e)),
                    Err(e) => {
                        pending = Some(e);
                        break;
                    }
                }
                if chunk.len() == STREAM_CHUNK {
                    break;
                }
            }
            (!chunk.is_empty()).then_some(Ok(chunk))
        }))
    }

    /// Records from an iterator of chunks (each in key order, and after the
    /// chunk before): less work per record than [`new`](Self::new).
    pub fn from_chunks(iter: impl Iterator<Item = Result<Vec<Record>>> + Send + 'a) -> Self {
        RecordStream {
            iter: std::sync::Mutex::new(Some(Box::new(iter))),
            seen: std::sync::Mutex::new((0, None)),
            all: std::sync::OnceLock::new(),
            failed: std::sync::Mutex::new(None),
        }
    }

    /// Records handed out so far.
    pub fn count(&self) -> u64 {
        self.seen.lock().map_or(0, |s| s.0)
    }
}

impl StreamSource for RecordStream<'_> {
    /// Calls `f` for every chunk of records once, checking the order.
    fn drain(&self, f: &mut dyn FnMut(&[Record]) -> Result<()>) -> Result<()> {
        let mut iter = self
            .iter
            .lock()
            .map_err(|_| Error::invalid("record stream poisoned"))?
            .take()
            .ok_or_else(|| Error::invalid("a record stream is read once"))?;
        let mut seen = self
            .seen
            .lock()
            .map_err(|_| Error::invalid("record stream poisoned"))?;
        for chunk in &mut iter {
            let chunk = chunk?;
            let mut prev = seen.1;
            for (i, &(k, _)) in chunk.iter().enumerate() {
                if let Some(p) = prev.filter(|&p| k <= p) {
                    return Err(Error::OutOfOrder {
                        position: seen.0 + i as u64,
                        previous: p,
                        got: k,
                    });
                }
                prev = Some(k);
            }
            f(&chunk)?;
            *seen = (seen.0 + chunk.len() as u64, prev);
        }
        Ok(())
    }

    /// Every record in memory (read on first use).
    fn all(&self) -> Result<&(Vec<u64>, Vec<u64>)> {
        self.all
            .get_or_init(|| {
                let (mut keys, mut values) = (Vec::new(), Vec::new());
                self.drain(&mut |chunk| {
                    keys.extend(chunk.iter().map(|r| r.0));
                    values.extend(chunk.iter().map(|r| r.1));
                    Ok(())
                })
                .map(|()| (keys, values))
                .map_err(|e| {
                    let text = e.to_string();
                    if let Ok(mut f) = self.failed.lock() {
                        *f = Some(e);
                    }
                    text
                })
            })
            .as_ref()
            .map_err(|text| {
                self.failed
                    .lock()
                    .ok()
                    .and_then(|mut f| f.take())
                    .unwrap_or_else(|| Error::invalid(text.clone()))
            })
    }

    fn all_read(&self) -> Option<usize> {
        match self.all.get() {
            Some(Ok(a)) => Some(a.0.len()),
            _ => None,
        }
    }

    fn count(&self) -> u64 {
        RecordStream::count(self)
    }
}

impl<'a> Records<'a> {
    /// Keys whose values are their ranks.
    pub fn ranked(keys: &'a [u64]) -> Self {
        Records {
            src: Src::Slice { keys, values: None },
        }
    }

    /// Keys with explicit values (same length).
    pub fn new(keys: &'a [u64], values: &'a [u64]) -> Result<Self> {
        if keys.len() != values.len() {
            return Err(Error::invalid(format!(
                "{} keys but {} values",
                keys.len(),
                values.len()
            )));
        }
        Ok(Records {
            src: Src::Slice {
                keys,
                values: Some(values),
            },
        })
    }

    /// Records read once from `stream`.
    pub fn stream(stream: &'a RecordStream<'_>) -> Self {
        Records {
            src: Src::Stream(stream),
        }
    }

    /// Whether the records are in memory (a slice, or a stream already read
    /// into memory): [`keys`](Self::keys) then costs nothing.
    pub fn in_memory(&self) -> bool {
        match self.src {
            Src::Slice { .. } => true,
            Src::Stream(s) => s.all_read().is_some(),
        }
    }

    /// The keys (a stream is read into memory first; empty if reading it
    /// failed, which [`try_keys`](Self::try_keys) reports).
    pub fn keys(&self) -> &'a [u64] {
        self.try_keys().unwrap_or_default()
    }

    /// The keys, or the error that reading the stream ended with.
    pub fn try_keys(&self) -> Result<&'a [u64]> {
        match self.src {
            Src::Slice { keys, .. } => Ok(keys),
            Src::Stream(s) => s.all().map(|a| a.0.as_slice()),
        }
    }

    /// The value of record `i`.
    #[inline]
    pub fn value(&self, i: usize) -> u64 {
        let values = match self.src {
            Src::Slice { values, .. } => values,
            Src::Stream(s) => s.all().ok().map(|a| a.1.as_slice()),
        };
        match values {
            Some(v) => v.get(i).copied().unwrap_or(i as u64),
            None => i as u64,
        }
    }

    /// Number of records (of a stream: those read so far, all once it has
    /// been read).
    pub fn len(&self) -> usize {
        match self.src {
            Src::Slice { keys, .. } => keys.len(),
            Src::Stream(s) => s
                .all_read()
                .unwrap_or_else(|| usize::try_from(s.count()).unwrap_or(usize::MAX)),
        }
    }

    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(key, value)` pairs in order (a stream is read into memory first).
    pub fn iter(&self) -> impl Iterator<Item = Record> + '_ {
        let keys = self.keys();
        keys.iter().enumerate().map(|(i, &k)| (k, self.value(i)))
    }

    /// Calls `f` for every record in order without holding them: a stream
    /// is read once (checking the order), records in memory are walked.
    pub fn try_for_each(&self, mut f: impl FnMut(u64, u64) -> Result<()>) -> Result<()> {
        self.try_for_each_chunk(|chunk| {
            for &(k, v) in chunk {
                f(k, v)?;
            }
            Ok(())
        })
    }

    /// [`try_for_each`](Self::try_for_each) a chunk of records at a time.
    pub fn try_for_each_chunk(&self, mut f: impl FnMut(&[Record]) -> Result<()>) -> Result<()> {
        match self.src {
            Src::Stream(s) if !self.in_memory() => s.drain(&mut f),
            _ => {
                let mut chunk = Vec::with_capacity(STREAM_CHUNK);
                for r in self.iter() {
                    chunk.push(r);
                    if chunk.len() == STREAM_CHUNK {
                        f(&chunk)?;
                        chunk.clear();
                    }
                }
                if !chunk.is_empty() {
                    f(&chunk)?;
                }
                Ok(())
            }
        }
    }
}

/// Writes `records` as the data run of `dir` (read once if they stream),
/// with `build_id` in its header.
pub(crate) fn write_records_run(
    dir: &dyn crate::storage::Directory,
    records: Records<'_>,
    page_size: usize,
    build_id: u64,
) -> Result<crate::format::DataRunMeta> {
    write_records_run_with(dir, records, page_size, build_id, |_| {})
}

/// [`write_records_run`] calling `seen` with every chunk of records after
/// writing it.
pub(crate) fn write_records_run_with(
    dir: &dyn crate::storage::Directory,
    records: Records<'_>,
    page_size: usize,
    build_id: u64,
    mut seen: impl FnMut(&[Record]),
) -> Result<crate::format::DataRunMeta> {
    let mut w = crate::format::DataRunWriter::create(dir, crate::format::DATA_FILE, page_size)?;
    w.set_build_id(build_id);
    records.try_for_each_chunk(|chunk| {
        for &(k, v) in chunk {
            w.push(k, v)?;
        }
        seen(chunk);
        Ok(())
    })?;
    w.finish()
}

/// An approximate position, as a learned model predicts it.
///
/// Contract, for a query key `x` over `n` sorted keys: if `x` is present, its
/// item index lies in `[lo, hi)`; in any case its lower bound (the index of
/// the first key `>= x`, or `n`) lies in `[lo, hi]`, with `lo <= hi <= n`.
/// Reading items `[lo, hi)` therefore answers a point lookup; a lower bound
/// equal to `hi` (a key in the gap after the range) needs the record at `hi`.
/// Models may promise more (`lb < hi`); the engine relies only on this.
/// `pos` is the point prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ApproxPos {
    /// Point prediction.
    pub pos: u64,
    /// First item index that may hold the key.
    pub lo: u64,
    /// One past the last item index that may hold the key.
    pub hi: u64,
}

/// Sizes and shape of an index, measured from its structures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IndexStats {
    /// Index kind name.
    pub kind: String,
    /// Number of records.
    pub n: u64,
    /// Bytes the index holds in RAM: models, pinned nodes, cached pages.
    pub memory_bytes: u64,
    /// Bytes of all its files on storage.
    pub disk_bytes: u64,
    /// Number of models/segments of a learned index (None for others).
    pub models: Option<u64>,
    /// Height: tree levels or index layers above the data (None if n/a).
    pub height: Option<u32>,
    /// Kind-specific figures (layer sizes, fill, ...).
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// An ordered `u64 -> u64` index.
///
/// Thread-safety: all methods take `&self`; implementations allow concurrent
/// readers (and serialise writers internally where they support writes).
/// Every read of storage is counted in [`Index::io`].
pub trait Index: Send + Sync {
    /// The kind name (`binary`, `btree`, `pgm`, ...).
    fn kind(&self) -> &str;

    /// Number of records.
    fn len(&self) -> u64;

    /// Whether the index holds no record.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key`, if present.
    fn get(&self, key: u64) -> Result<Option<u64>>;

    /// The first record whose key is `>= key`.
    fn lower_bound(&self, key: u64) -> Result<Option<Record>>;

    /// Appends to `out` up to `count` records with keys `>= from`, ascending.
    ///
    /// Provided: [`Cursor::seek`] to `from`, then [`Cursor::next_batch`] of
    /// `count` on [`Index::cursor`], so a scan reads what the kind's cursor
    /// reads.
    fn scan(&self, from: u64, count: usize, out: &mut Vec<Record>) -> Result<()> {
        let mut c = self.cursor()?;
        c.seek(from)?;
        c.next_batch(count, out)?;
        Ok(())
    }

    /// A cursor over the records in ascending key order, positioned before
    /// the first record (see [`Cursor`] for its contract). It borrows the
    /// index and holds no lock between calls.
    ///
    /// Provided: a [`LowerBoundCursor`] (one [`Index::lower_bound`] per
    /// record); kinds over pages return a cursor that reads page by page.
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(LowerBoundCursor::new(self)))
    }

    /// Appends to `out` the value of each of `keys` (`None` if absent), in
    /// the order of `keys`; `keys` may come in any order and repeat. On an
    /// error, `out` holds the answers of a prefix of `keys`.
    ///
    /// Provided: one [`Index::get`] per key, with that call's I/O.
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        out.reserve(keys.len());
        for &k in keys {
            out.push(self.get(k)?);
        }
        Ok(())
    }

    /// Appends to `out` the lower bound of each of `keys` (the first record
    /// whose key is `>=` it, `None` if there is none), in the order of
    /// `keys`; `keys` may come in any order and repeat. On an error, `out`
    /// holds the answers of a prefix of `keys`.
    ///
    /// Provided: one [`Index::lower_bound`] per key, with that call's I/O.
    fn lower_bound_many(&self, keys: &[u64], out: &mut Vec<Option<Record>>) -> Result<()> {
        out.reserve(keys.len());
        for &k in keys {
            out.push(self.lower_bound(k)?);
        }
        Ok(())
    }

    /// The model's prediction for `key` (learned kinds only).
    fn approx(&self, _key: u64) -> Result<Option<ApproxPos>> {
        Ok(None)
    }

    /// Whether [`Index::insert`] and [`Index::delete`] are supported.
    fn supports_updates(&self) -> bool {
        false
    }

    /// Inserts or updates `key`; returns the previous value.
    fn insert(&self, _key: u64, _value: u64) -> Result<Option<u64>> {
        Err(Error::Unsupported(format!(
            "index kind {} is static (no inserts)",
            self.kind()
        )))
    }

    /// Removes `key`; returns whether it was present.
    fn delete(&self, _key: u64) -> Result<bool> {
        Err(Error::Unsupported(format!(
            "index kind {} is static (no deletes)",
            self.kind()
        )))
    }

    /// Makes all completed writes durable.
    fn sync(&self) -> Result<()> {
        Ok(())
    }

    /// Waits until background work that earlier writes started (a store's
    /// merge) has finished, so that a benchmark charges it to the writes.
    /// Kinds without background work return at once.
    fn settle(&self) -> Result<()> {
        Ok(())
    }

    /// Sizes and shape.
    fn stats(&self) -> Result<IndexStats>;

    /// Reads every page of every file of the index and checks checksums and
    /// structure; returns the number of pages checked. `progress` is called
    /// with the number of pages checked since its last call.
    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64>;

    /// The I/O counters of every file of the index.
    fn io(&self) -> &Arc<IoStats>;
}
