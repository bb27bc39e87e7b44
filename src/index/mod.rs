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
    BuildOptions, BuildReport, IndexKind, OpenOptions, PAGE_PARAM, Registry, Residency, registry,
};
pub(crate) use scan::{DataRunCursor, DataRunReader, Fetch, Located};

use crate::storage::IoStats;
use crate::{Error, Result};

/// A `(key, value)` pair.
pub type Record = (u64, u64);

/// Sorted records to build an index from: strictly increasing keys, and
/// values (by default each key's rank, SOSD's lookup task).
#[derive(Debug, Clone, Copy)]
pub struct Records<'a> {
    keys: &'a [u64],
    values: Option<&'a [u64]>,
}

impl<'a> Records<'a> {
    /// Keys whose values are their ranks.
    pub fn ranked(keys: &'a [u64]) -> Self {
        Records { keys, values: None }
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
            keys,
            values: Some(values),
        })
    }

    /// The keys.
    pub fn keys(&self) -> &'a [u64] {
        self.keys
    }

    /// The value of record `i`.
    #[inline]
    pub fn value(&self, i: usize) -> u64 {
        match self.values {
            Some(v) => v.get(i).copied().unwrap_or(i as u64),
            None => i as u64,
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// `(key, value)` pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = Record> + '_ {
        self.keys.iter().enumerate().map(|(i, &k)| (k, self.value(i)))
    }
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
