//! The relations a join reads: key files, indexes, records in memory.

use std::path::{Path, PathBuf};

use super::JoinRecord;
use crate::Result;
use crate::format::sosd::{KeyFileOptions, KeyReader};
use crate::index::Index;

/// A stream of records `(key, payload)` a join reads, once or more.
pub trait Relation: Send + Sync {
    /// A name for reports and errors.
    fn name(&self) -> String;
    /// Number of records.
    fn len(&self) -> u64;
    /// Whether it holds no record.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether the records come in non-decreasing key order (then the
    /// sort-merge join reads them as they are; a record out of order is an
    /// error when they are read).
    fn sorted(&self) -> bool;
    /// The records, from the first.
    fn scan(&self) -> Result<Box<dyn Iterator<Item = Result<JoinRecord>> + '_>>;
    /// The index over the records, if the relation is one (the inner
    /// relation of an index nested-loop join).
    fn index(&self) -> Option<&dyn Index> {
        None
    }
}

/// A SOSD key file as a relation: each key's payload is its position in
/// the file (for a sorted file of distinct keys, the value an index built
/// from it holds: its rank).
#[derive(Debug, Clone)]
pub struct KeyFile {
    path: PathBuf,
    len: u64,
    sorted: bool,
    opts: KeyFileOptions,
}

impl KeyFile {
    /// Opens `path` (its header and size checked). With `sorted`, keys must
    /// be non-decreasing (repeats allowed) and a key out of order is an
    /// [`crate::Error::InvalidInput`] naming the file and position when it
    /// is read; else any order.
    pub fn open(path: &Path, sorted: bool, opts: KeyFileOptions) -> Result<KeyFile> {
        let r = KeyReader::open(path, opts)?;
        Ok(KeyFile {
            path: path.to_path_buf(),
            len: r.total(),
            sorted,
            opts,
        })
    }
}

impl Relation for KeyFile {
    fn name(&self) -> String {
        self.path.display().to_string()
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn sorted(&self) -> bool {
        self.sorted
    }

    fn scan(&self) -> Result<Box<dyn Iterator<Item = Result<JoinRecord>> + '_>> {
        let r = KeyReader::open(&self.path, self.opts)?;
        let r = if self.sorted {
            r.with_repeats()
        } else {
            r.any_order()
        };
        let name = self.name();
        Ok(Box::new(r.enumerate().map(move |(i, k)| match k {
            Ok(k) => Ok((k, i as u64)),
            Err(crate::Error::OutOfOrder {
                position,
                previous,
                got,
            }) => Err(crate::Error::invalid(format!(
                "{name} is not sorted: key {got} at position {position} follows {previous} (declare the relation unsorted)"
            ))),
            Err(e) => Err(e),
        })))
    }
}

/// Records an [`IndexRelation`] scan reads per call: 256 KiB of 16-byte
/// records, 64 pages.
pub const SCAN_BATCH: usize = 16 * 1024;

/// An open index as a relation: its records in key order (scanned with a
/// cursor), and the index itself for an index nested-loop join.
pub struct IndexRelation<'a> {
    name: String,
    index: &'a dyn Index,
}

impl<'a> IndexRelation<'a> {
    /// The records of `index`, called `name` in reports.
    pub fn new(name: impl Into<String>, index: &'a dyn Index) -> Self {
        IndexRelation {
            name: name.into(),
            index,
        }
    }
}

impl Relation for IndexRelation<'_> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn len(&self) -> u64 {
        self.index.len()
    }

    fn sorted(&self) -> bool {
        true
    }

    /// Reads [`SCAN_BATCH`] records per [`Cursor::next_batch`](crate::index::Cursor::next_batch) call (kinds
    /// over a data run read their pages in one large sequential read).
    fn scan(&self) -> Result<Box<dyn Iterator<Item = Result<JoinRecord>> + '_>> {
        let mut c = self.index.cursor()?;
        c.seek(0)?;
        let mut buf: Vec<JoinRecord> = Vec::with_capacity(SCAN_BATCH);
        let mut at = 0usize;
        let mut done = false;
        Ok(Box::new(std::iter::from_fn(move || {
            if at == buf.len() {
                if done {
                    return None;
                }
                buf.clear();
                at = 0;
                match c.next_batch(SCAN_BATCH, &mut buf) {
                    Ok(n) => done = n < SCAN_BATCH,
                    Err(e) => {
                        done = true;
                        return Some(Err(e));
                    }
                }
            }
            let r = buf.get(at).copied();
            at += 1;
            r.map(Ok)
        })))
    }

    fn index(&self) -> Option<&dyn Index> {
        Some(self.index)
    }
}

/// Records in memory (tests and small relations).
#[derive(Debug, Clone)]
pub struct MemRelation {
    name: String,
    records: Vec<JoinRecord>,
    sorted: bool,
}

impl MemRelation {
    /// `records` as a relation (sorted if their keys do not decrease).
    pub fn new(name: impl Into<String>, records: Vec<JoinRecord>) -> Self {
        let sorted = records.windows(2).all(|w| matches!(w, [a, b] if a.0 <= b.0));
        MemRelation {
            name: name.into(),
            records,
            sorted,
        }
    }

    /// Keys with their positions as payloads (as a [`KeyFile`] reads them).
    pub fn of_keys(name: impl Into<String>, keys: &[u64]) -> Self {
        MemRelation::new(
            name,
            keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect(),
        )
    }

    /// The records.
    pub fn records(&self) -> &[JoinRecord] {
        &self.records
    }
}

impl Relation for MemRelation {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn len(&self) -> u64 {
        self.records.len() as u64
    }

    fn sorted(&self) -> bool {
        self.sorted
    }

    fn scan(&self) -> Result<Box<dyn Iterator<Item = Result<JoinRecord>> + '_>> {
        Ok(Box::new(self.records.iter().map(|&r| Ok(r))))
    }
}
