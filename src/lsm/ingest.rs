//! Bulk loading: [`Store::ingest`] writes sorted entries straight into
//! tables of one level, without the log, the memtable or compactions (as
//! RocksDB's external file ingestion and LevelDB's repair do).
//!
//! All the entries get one sequence number `S`, taken when the ingestion
//! starts, so they form one atomic write: until the manifest records the
//! tables, no reader sees any of them and a crash leaves only unreferenced
//! table files (removed at the next open); after it, all. Writes made while
//! an ingestion runs get numbers above `S` and are published after it
//! (they wait), so they are newer than every ingested entry, as their
//! order says.

use std::cmp::Ordering as CmpOrdering;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::key::{self, ValueKind};
use super::manifest::{LsmEdit, NUM_LEVELS, table_name};
use super::table::{TableBuilder, TableOptions};
use super::version::{TableFile, Version};
use super::{Inner, Store};
use crate::log::read_only_error;
use crate::{Error, Result};

/// What [`Store::ingest`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// Entries written.
    pub entries: u64,
    /// Tables written.
    pub tables: u64,
    /// Bytes of those tables.
    pub bytes: u64,
    /// The level that holds them (0 when nothing was ingested).
    pub level: usize,
    /// The sequence number every ingested entry carries.
    pub seq: u64,
}

impl Store {
    /// Whether the store holds nothing: no table and no memtable entry (what
    /// [`Store::ingest`] needs).
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Bulk-loads `entries` into an empty store: user keys must be strictly
    /// increasing, each key and value within the store's limits. They are
    /// written as tables (cut as compactions cut theirs: at
    /// [`super::Options::target_file_bytes`], or one table under
    /// [`super::Granularity::Level`]) and
    /// published at once into the shallowest level below L0 whose target
    /// holds them (the deepest level if none does), with one manifest
    /// update; the log is not written, and the tables are synced before the
    /// manifest names them, so the load is durable when this returns.
    ///
    /// A store holding anything (a table or a memtable entry) is
    /// [`Error::InvalidInput`], as is an unsorted or duplicate key or one
    /// over the limits, or an error of `entries`: then nothing is published
    /// and the tables written so far are removed.
    pub fn ingest<I>(&self, entries: I) -> Result<IngestReport>
    where
        I: IntoIterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
    {
        self.inner.ingest(entries.into_iter())
    }
}

impl Inner {
    fn is_empty(&self) -> bool {
        let v = self.version.load();
        v.active.is_empty() && v.frozen.iter().all(|f| f.mem.is_empty()) && v.levels.iter().all(Vec::is_empty)
    }

    fn ingest(&self, entries: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>) -> Result<IngestReport> {
        self.check_writable()?;
        let _work = self.work.lock();
        let seq = {
            // No writer is between its sequence number and its memtable
            // insert while the gate is held exclusively.
            let gate = self.gate.write();
            if gate.is_none() {
                return Err(read_only_error(self.dir.as_ref()));
            }
            if !self.is_empty() {
                return Err(Error::invalid(
                    "ingest loads an empty store only; this one holds data (write to it with put or write_batch)",
                ));
            }
            self.next_seq.fetch_add(1, Ordering::SeqCst)
        };
        let mut written = Vec::new();
        let mut created = Vec::new();
        let result = self.write_tables(entries, seq, &mut written, &mut created);
        let result = result.and_then(|report| self.publish_ingest(report, &written));
        if result.is_err() {
            drop(written);
            for &number in &created {
                let n = table_name(number);
                if self.dir.exists(&n) {
                    let _ = self.dir.remove(&n);
                }
            }
        }
        // Later writers wait for `seq` to be visible, whatever happened.
        self.publish(seq, seq);
        result
    }

    fn write_tables(
        &self,
        entries: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
        seq: u64,
        written: &mut Vec<Arc<TableFile>>,
        created: &mut Vec<u64>,
    ) -> Result<IngestReport> {
        let mut builder: Option<(u64, TableOptions, TableBuilder)> = None;
        let mut last: Option<Vec<u8>> = None;
        let mut ikey = Vec::new();
        let mut report = IngestReport {
            seq,
            ..IngestReport::default()
        };
        for (i, entry) in entries.enumerate() {
            if self.health.is_killed() {
                return Err(Error::invalid("the store was killed during an ingestion"));
            }
            let (k, v) = entry?;
            key::check_entry(&k, Some(&v))?;
            if let Some(prev) = &last {
                if prev.as_slice().cmp(&k) != CmpOrdering::Less {
                    return Err(Error::invalid(format!(
                        "ingest needs strictly increasing keys; entry {i} is not above the one before it"
                    )));
                }
            }
            let cut = builder.as_ref().is_some_and(|(_, _, b)| self.output_full(b));
            if cut {
                if let Some((n, o, b)) = builder.take() {
                    written.push(self.finish_output(n, &o, b)?);
                }
            }
            if builder.is_none() {
                let n = self.new_file_number();
                created.push(n);
                let o = self.table_options();
                let b = TableBuilder::new(self.dir.as_ref(), &table_name(n), &o)?;
                builder = Some((n, o, b));
            }
            ikey.clear();
            key::encode_into(&mut ikey, &k, seq, ValueKind::Put);
            if let Some((_, _, b)) = builder.as_mut() {
                b.add(&ikey, &v)?;
            }
            report.entries += 1;
            last = Some(k);
        }
        if let Some((n, o, b)) = builder.take() {
            written.push(self.finish_output(n, &o, b)?);
        }
        report.tables = written.len() as u64;
        report.bytes = written.iter().map(|t| t.rec.size).sum();
        Ok(report)
    }

    fn publish_ingest(&self, mut report: IngestReport, written: &[Arc<TableFile>]) -> Result<IngestReport> {
        if written.is_empty() {
            return Ok(report);
        }
        self.dir.sync_dir()?;
        let level = (1..NUM_LEVELS)
            .find(|&l| self.level_target(l) >= report.bytes)
            .unwrap_or(NUM_LEVELS - 1);
        report.level = level;
        let add: Vec<(usize, Arc<TableFile>)> = written.iter().map(|t| (level, t.clone())).collect();
        let mut st = self.state.lock();
        let cur = self.version.load_full();
        let next = Version {
            active: cur.active.clone(),
            frozen: cur.frozen.clone(),
            levels: cur.edited_levels(&[], &add),
        };
        next.check_levels()?;
        let edit = LsmEdit::Ingest {
            add: add.iter().map(|(l, t)| (*l, t.rec.clone())).collect(),
            last_seq: report.seq,
        };
        st.manifest = st.manifest.commit(&[edit], self.dir.as_ref())?;
        self.set_version(next);
        self.state_cv.notify_all();
        Ok(report)
    }
}
