//! Spill files (sorted runs, partitions) and the external merge sort.
//!
//! A spill file is a bare sequence of records, 16 bytes each (key, payload,
//! little-endian), written once and read once through a
//! [`SPILL_BUFFER`]-byte buffer, inside the join's temporary directory
//! (removed with it). The files never outlive the join, so they carry no
//! header.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::{JoinRecord, RECORD_BYTES, Relation, SPILL_BUFFER};
use crate::{Error, Result};

/// Bytes written to and read from spill files, and what the learned
/// partitioning ([`super::partition`]) made.
#[derive(Debug, Default)]
pub struct SpillStats {
    pub(crate) written: AtomicU64,
    pub(crate) read: AtomicU64,
    /// Partitions written by learned partitioning, every level.
    pub(crate) partitions: AtomicU64,
    /// The deepest level of learned partitioning (1: the relation
    /// partitioned once, every partition read back in memory).
    pub(crate) levels: AtomicU32,
    /// Files made so far (for unique names).
    files: AtomicU64,
}

impl SpillStats {
    /// A fresh path for a spill file in `dir`.
    pub(crate) fn path(&self, dir: &Path, what: &str) -> PathBuf {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        dir.join(format!("{what}-{n:06}.spill"))
    }
}

/// Writes a spill file.
pub(crate) struct SpillWriter<'s> {
    path: PathBuf,
    out: BufWriter<File>,
    records: u64,
    stats: &'s SpillStats,
}

impl<'s> SpillWriter<'s> {
    pub(crate) fn create(path: PathBuf, stats: &'s SpillStats) -> Result<Self> {
        let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
        Ok(SpillWriter {
            out: BufWriter::with_capacity(SPILL_BUFFER, f),
            path,
            records: 0,
            stats,
        })
    }

    pub(crate) fn push(&mut self, (k, p): JoinRecord) -> Result<()> {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&k.to_le_bytes());
        b[8..].copy_from_slice(&p.to_le_bytes());
        self.out.write_all(&b).map_err(|e| Error::io(&self.path, e))?;
        self.records += 1;
        Ok(())
    }

    /// Flushes the file (no sync: it is gone after the join).
    pub(crate) fn finish(mut self) -> Result<SpillFile> {
        // The file is removed on an error too (dropped with `file`).
        let file = SpillFile {
            path: std::mem::take(&mut self.path),
            records: self.records,
        };
        self.out.flush().map_err(|e| Error::io(&file.path, e))?;
        self.stats
            .written
            .fetch_add(self.records * RECORD_BYTES, Ordering::Relaxed);
        Ok(file)
    }
}

/// A finished spill file.
#[derive(Debug)]
pub(crate) struct SpillFile {
    pub(crate) path: PathBuf,
    pub(crate) records: u64,
}

impl SpillFile {
    /// Its records, from the first; the file is removed when the reader is
    /// dropped.
    pub(crate) fn read(self, stats: &SpillStats) -> Result<SpillReader<'_>> {
        let mut r = self.reader(stats)?;
        r.owned = Some(self);
        Ok(r)
    }

    /// Its records, from the first, keeping the file (to read it again).
    pub(crate) fn reader<'s>(&self, stats: &'s SpillStats) -> Result<SpillReader<'s>> {
        let f = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
        Ok(SpillReader {
            r: BufReader::with_capacity(SPILL_BUFFER, f),
            left: self.records,
            path: self.path.clone(),
            owned: None,
            stats,
        })
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads a spill file ([`SpillFile::read`], [`SpillFile::reader`]).
pub(crate) struct SpillReader<'s> {
    r: BufReader<File>,
    left: u64,
    path: PathBuf,
    /// The file, removed with the reader, when it was read by value.
    owned: Option<SpillFile>,
    stats: &'s SpillStats,
}

impl Iterator for SpillReader<'_> {
    type Item = Result<JoinRecord>;

    fn next(&mut self) -> Option<Result<JoinRecord>> {
        if self.left == 0 {
            return None;
        }
        let mut b = [0u8; 16];
        if let Err(e) = self.r.read_exact(&mut b) {
            self.left = 0;
            return Some(Err(Error::io(&self.path, e)));
        }
        self.left -= 1;
        self.stats.read.fetch_add(RECORD_BYTES, Ordering::Relaxed);
        let k = u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
        let p = u64::from_le_bytes(b[8..].try_into().unwrap_or([0; 8]));
        Some(Ok((k, p)))
    }
}

/// A stream of records in key order.
pub(crate) type Sorted<'a> = Box<dyn Iterator<Item = Result<JoinRecord>> + 'a>;

/// The records of `rel` in key order (ties by payload), sorted in memory
/// when they fit in `run_records`, else by an external merge sort: runs of
/// `run_records` sorted in memory and spilled, merged `fan_in` at a time
/// (extra passes while more than `fan_in` runs are left), the last merge
/// streamed. A relation already sorted is read as it is. `passes` counts
/// the merge passes written to disk.
pub(crate) fn sorted<'a>(
    rel: &'a dyn Relation,
    run_records: usize,
    fan_in: usize,
    dir: &Path,
    stats: &'a SpillStats,
    passes: &mut u32,
) -> Result<Sorted<'a>> {
    if rel.sorted() {
        return rel.scan();
    }
    let run_records = run_records.max(1);
    let fan_in = fan_in.max(2);
    let mut it = rel.scan()?;
    let mut runs: Vec<SpillFile> = Vec::new();
    let mut buf: Vec<JoinRecord> =
        Vec::with_capacity(run_records.min(usize::try_from(rel.len()).unwrap_or(usize::MAX)));
    loop {
        buf.clear();
        for r in it.by_ref() {
            buf.push(r?);
            if buf.len() == run_records {
                break;
            }
        }
        let last = buf.len() < run_records;
        buf.sort_unstable();
        if last && runs.is_empty() {
            // Everything fitted: no spill.
            let all = std::mem::take(&mut buf);
            return Ok(Box::new(all.into_iter().map(Ok)));
        }
        if !buf.is_empty() {
            let mut w = SpillWriter::create(stats.path(dir, "run"), stats)?;
            for &r in &buf {
                w.push(r)?;
            }
            runs.push(w.finish()?);
        }
        if last {
            break;
        }
    }
    drop(buf);
    while runs.len() > fan_in {
        *passes += 1;
        let mut next = Vec::with_capacity(runs.len().div_ceil(fan_in));
        let mut rest = runs.into_iter().peekable();
        while rest.peek().is_some() {
            let group: Vec<SpillFile> = rest.by_ref().take(fan_in).collect();
            let mut w = SpillWriter::create(stats.path(dir, "run"), stats)?;
            for r in merge(group, stats)? {
                w.push(r?)?;
            }
            next.push(w.finish()?);
        }
        runs = next;
    }
    Ok(Box::new(merge(runs, stats)?))
}

/// The records of `runs` (each sorted) merged into one sorted stream.
fn merge(runs: Vec<SpillFile>, stats: &SpillStats) -> Result<Merge<'_>> {
    let mut readers = Vec::with_capacity(runs.len());
    for r in runs {
        readers.push(r.read(stats)?);
    }
    let mut m = Merge {
        readers,
        heap: BinaryHeap::new(),
        failed: None,
    };
    for i in 0..m.readers.len() {
        m.refill(i);
    }
    Ok(m)
}

/// A k-way merge of spill readers (a heap of each reader's next record).
struct Merge<'s> {
    readers: Vec<SpillReader<'s>>,
    heap: BinaryHeap<Reverse<(JoinRecord, usize)>>,
    failed: Option<Error>,
}

impl Merge<'_> {
    fn refill(&mut self, i: usize) {
        match self.readers.get_mut(i).and_then(Iterator::next) {
            Some(Ok(r)) => self.heap.push(Reverse((r, i))),
            Some(Err(e)) => self.failed = Some(e),
            None => {}
        }
    }
}

impl Iterator for Merge<'_> {
    type Item = Result<JoinRecord>;

    fn next(&mut self) -> Option<Result<JoinRecord>> {
        if let Some(e) = self.failed.take() {
            self.heap.clear();
            return Some(Err(e));
        }
        let Reverse((r, i)) = self.heap.pop()?;
        self.refill(i);
        Some(Ok(r))
    }
}
