//! `binary`: no index at all. Binary search over the data run's pages on
//! storage, about `log2(pages)` page reads per lookup.
//!
//! It is the floor every index must beat, and a check of the accounting: its
//! page count per lookup is known in closed form.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    ApproxPos, BuildOptions, Cursor, DataRunCursor, Index, IndexKind, IndexStats, Located, Manifest,
    OpenOptions, Params, Record, Records,
};
use crate::Result;
use crate::format::{DATA_FILE, DataRun, PageRun};
use crate::storage::{Directory, IoContext, IoStats};

/// The `binary` kind.
#[derive(Debug)]
pub struct BinaryKind;

impl IndexKind for BinaryKind {
    fn name(&self) -> &'static str {
        "binary"
    }

    fn summary(&self) -> &'static str {
        "no index: binary search over the data pages on storage (log2 pages per lookup)"
    }

    fn build(
        &self,
        _params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
        build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        let meta = super::write_records_run(dir, records, opts.page_size, build_id)?;
        Ok((vec![DATA_FILE.to_string()], json!({ "pages": meta.pages })))
    }

    fn streams_build(&self) -> bool {
        true
    }

    fn open(
        &self,
        m: &Manifest,
        dir: Arc<dyn Directory>,
        io: IoContext,
        _opts: &OpenOptions,
    ) -> Result<Box<dyn Index>> {
        let run = DataRun::open(io.wrap(dir.open_read(DATA_FILE)?))?;
        m.check_data_run(&run)?;
        Ok(Box::new(BinaryIndex {
            run,
            stats: io.stats.clone(),
            dir,
            queue_depth: io.queue_depth,
        }))
    }
}

/// Each key's lower bound with the index of the page holding it, and the
/// pages read ([`BinaryIndex::locate_many`]).
type Located2 = (Vec<(u64, Option<usize>)>, Vec<PageRun>);

/// Binary search over the pages of a data run.
#[derive(Debug)]
pub struct BinaryIndex {
    run: DataRun,
    stats: Arc<IoStats>,
    dir: Arc<dyn Directory>,
    /// Reads in flight at most in batched lookups.
    queue_depth: usize,
}

impl BinaryIndex {
    /// Finds the lower bound of `key`: returns its item index and the page
    /// holding it (None if every key is smaller).
    fn locate(&self, key: u64) -> Result<(u64, Option<PageRun>)> {
        let meta = *self.run.meta();
        // Invariant: the page holding the lower bound is in [lo, hi); `best`
        // holds page `hi` when hi < pages (the last probe that moved hi).
        let (mut lo, mut hi) = (0u64, meta.pages);
        let mut best: Option<PageRun> = None;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let page = self.run.read_page(mid)?;
            let (plo, phi) = page.item_range();
            let last = page.key(phi - 1).unwrap_or(u64::MAX);
            if last < key {
                lo = mid + 1;
                continue;
            }
            let first = page.key(plo).unwrap_or(0);
            if first <= key || mid == 0 {
                let lb = page.lower_bound(key, plo, phi);
                return Ok((lb, Some(page)));
            }
            hi = mid;
            best = Some(page);
        }
        match best {
            // Every key of page `lo - 1` is smaller and page `lo` starts above:
            // the lower bound is the first record of page `lo`.
            Some(page) if lo < meta.pages => Ok((page.item_range().0, Some(page))),
            _ => Ok((meta.n, None)),
        }
    }
}

impl BinaryIndex {
    /// [`BinaryIndex::locate`] for many keys, the binary searches in lock
    /// step: each round reads the middle page of every search still open
    /// in one batch (a page several searches probe in the same round once).
    /// Returns each key's lower bound and the index in the returned pages
    /// of the page holding it.
    fn locate_many(&self, keys: &[u64]) -> Result<Located2> {
        let meta = *self.run.meta();
        let mut runs: Vec<PageRun> = Vec::new();
        let mut found: Vec<(u64, Option<usize>)> = vec![(meta.n, None); keys.len()];
        // (key index, lo, hi, best): as in `locate`.
        let mut open: Vec<(usize, u64, u64, Option<usize>)> = (0..keys.len())
            .filter(|_| meta.pages > 0)
            .map(|i| (i, 0, meta.pages, None))
            .collect();
        while !open.is_empty() {
            let mut set = super::batch::RangeSet::default();
            let wanted: Vec<usize> = open
                .iter()
                .map(|&(_, lo, hi, _)| {
                    let mid = lo + (hi - lo) / 2;
                    set.add(mid, mid + 1)
                })
                .collect();
            let base = runs.len();
            runs.extend(set.read(|r| self.run.read_pages_many(r, self.queue_depth))?);
            let mut still = Vec::new();
            for (&(i, lo, hi, best), w) in open.iter().zip(wanted) {
                let key = keys.get(i).copied().unwrap_or(0);
                let mid = lo + (hi - lo) / 2;
                let Some(page) = runs.get(base + w) else { continue };
                let (plo, phi) = page.item_range();
                let last = page.key(phi - 1).unwrap_or(u64::MAX);
                let (lo, hi, best) = if last < key {
                    (mid + 1, hi, best)
                } else if page.key(plo).unwrap_or(0) <= key || mid == 0 {
                    if let Some(f) = found.get_mut(i) {
                        *f = (page.lower_bound(key, plo, phi), Some(base + w));
                    }
                    continue;
                } else {
                    (lo, mid, Some(base + w))
                };
                if lo < hi {
                    still.push((i, lo, hi, best));
                } else if let (Some(b), true) = (best, lo < meta.pages) {
                    if let (Some(f), Some(p)) = (found.get_mut(i), runs.get(b)) {
                        *f = (p.item_range().0, Some(b));
                    }
                }
            }
            open = still;
        }
        Ok((found, runs))
    }
}

impl Index for BinaryIndex {
    fn kind(&self) -> &str {
        "binary"
    }

    fn len(&self) -> u64 {
        self.run.len()
    }

    fn get(&self, key: u64) -> Result<Option<u64>> {
        let (lb, page) = self.locate(key)?;
        Ok(page
            .and_then(|p| p.record(lb))
            .filter(|r| r.0 == key)
            .map(|r| r.1))
    }

    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        let (lb, page) = self.locate(key)?;
        Ok(page.and_then(|p| p.record(lb)))
    }

    /// The binary searches of the sorted, distinct keys in lock step
    /// (one batch of reads per step), as many pages per key as one by one.
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        super::batch::answer(keys, out, |keys| {
            let (found, runs) = self.locate_many(keys)?;
            let answers: Vec<Option<u64>> = keys
                .iter()
                .zip(&found)
                .map(|(&k, &(lb, run))| {
                    run.and_then(|r| runs.get(r))
                        .and_then(|p| p.record(lb))
                        .filter(|r| r.0 == k)
                        .map(|r| r.1)
                })
                .collect();
            Ok(answers)
        })
    }

    /// As [`Index::get_many`].
    fn lower_bound_many(&self, keys: &[u64], out: &mut Vec<Option<Record>>) -> Result<()> {
        super::batch::answer(keys, out, |keys| {
            let (found, runs) = self.locate_many(keys)?;
            let answers: Vec<Option<Record>> = found
                .iter()
                .map(|&(lb, run)| run.and_then(|r| runs.get(r)).and_then(|p| p.record(lb)))
                .collect();
            Ok(answers)
        })
    }

    /// Seeks with the binary search over pages, then reads page by page; a
    /// scan reads the pages it still needs in one call.
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(DataRunCursor::new(&self.run, |key| {
            let (lb, run) = self.locate(key)?;
            Ok(Located { lb, run })
        })))
    }

    fn approx(&self, _key: u64) -> Result<Option<ApproxPos>> {
        Ok(None)
    }

    fn stats(&self) -> Result<IndexStats> {
        let mut st = IndexStats {
            kind: "binary".into(),
            n: self.run.len(),
            memory_bytes: std::mem::size_of::<Self>() as u64,
            disk_bytes: self.dir.total_bytes()?,
            models: None,
            height: Some(0),
            ..Default::default()
        };
        st.extra.insert("pages".into(), json!(self.run.meta().pages));
        Ok(st)
    }

    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        self.run.verify(progress)
    }

    fn io(&self) -> &Arc<IoStats> {
        &self.stats
    }
}
