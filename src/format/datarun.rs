//! Data runs: sorted `(u64 key, u64 value)` records packed into checksummed pages.
//!
//! A data run is the data layer under every static index. Record `i` (its
//! *item index*, which a learned model predicts) lives on data page
//! `i / per_page` at slot `i % per_page`; data page `d` is file page `d + 1`
//! because file page 0 is the header. Any range of pages is read with one
//! read call. See `docs/format/datarun.md`.

use std::sync::Arc;

use super::bytes::{get_u64, put_u64};
use super::page::{PAGE_HEADER_LEN, PageType};
use super::paged::{
    PagedFile, PagedMeta, PagedRun, PagedSpec, PagedWriter, entries_per_page, paged_file_len,
};
use crate::storage::{Directory, ReadStorage, Sink};
use crate::{Error, Result};

/// Magic number of a data run file: the bytes `STRATADR`.
pub(crate) const DATA_RUN_MAGIC: u64 = u64::from_le_bytes(*b"STRATADR");
/// Format version of data run files written by this build.
pub(crate) const DATA_RUN_VERSION: u32 = 1;
/// Size of one record: key and value, both `u64` little-endian.
pub const RECORD_LEN: usize = 16;

/// The paged-array kind of a data run.
pub(crate) const DATA_RUN_SPEC: PagedSpec = PagedSpec {
    magic: DATA_RUN_MAGIC,
    version: DATA_RUN_VERSION,
    page_type: PageType::Data,
    width: RECORD_LEN,
    name: "strata data run",
};

/// Number of records a page of `page_size` bytes holds.
pub const fn records_per_page(page_size: usize) -> usize {
    entries_per_page(page_size, RECORD_LEN)
}

/// What the header of a data run says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRunMeta {
    /// Number of records.
    pub n: u64,
    /// Number of data pages (the file holds one more page, the header).
    pub pages: u64,
    /// Page size in bytes.
    pub page_size: usize,
    /// Records per full page.
    pub per_page: usize,
    /// Smallest key (0 when empty).
    pub first_key: u64,
    /// Largest key (0 when empty).
    pub last_key: u64,
    /// Build id of the index directory build that wrote it (0: none).
    pub build_id: u64,
}

impl DataRunMeta {
    /// Data page holding item `i`.
    #[inline]
    pub fn page_of(&self, i: u64) -> u64 {
        i / self.per_page as u64
    }

    /// Number of records on data page `d`.
    pub fn records_on(&self, d: u64) -> usize {
        let start = d.saturating_mul(self.per_page as u64);
        // At most `per_page`, which is a usize.
        (self.n.saturating_sub(start)).min(self.per_page as u64) as usize
    }

    /// File size implied by the header, `(pages + 1) * page_size`; `None`
    /// when that overflows a u64.
    pub fn file_len(&self) -> Option<u64> {
        paged_file_len(self.pages, self.page_size)
    }
}

/// Streams sorted records into a new data run.
#[derive(Debug)]
pub struct DataRunWriter {
    inner: PagedWriter,
    first_key: u64,
    last_key: Option<u64>,
}

/// File name of the data run inside an index directory (and inside each
/// generation of a `Db`).
pub const DATA_FILE: &str = "data.run";

/// Writes `records` (keys strictly increasing, else [`Error::OutOfOrder`])
/// as the data run [`DATA_FILE`] of `dir`, through a write-once sink, with
/// `build_id` (the index directory build's, 0 for none) in its header.
pub fn write_data_run(
    dir: &dyn Directory,
    records: impl IntoIterator<Item = (u64, u64)>,
    page_size: usize,
    build_id: u64,
) -> Result<DataRunMeta> {
    let mut w = DataRunWriter::create(dir, DATA_FILE, page_size)?;
    w.set_build_id(build_id);
    for (k, v) in records {
        w.push(k, v)?;
    }
    w.finish()
}

impl DataRunWriter {
    /// Starts the data run `name` in `dir` (see `PagedWriter::create`).
    pub fn create(dir: &dyn Directory, name: &str, page_size: usize) -> Result<Self> {
        Ok(Self::wrapping(PagedWriter::create(
            dir,
            name,
            DATA_RUN_SPEC,
            page_size,
        )?))
    }

    /// Starts a data run on a fresh `sink` whose reserved header region is
    /// one page (see `PagedWriter::new`).
    pub fn new(sink: Box<dyn Sink>, page_size: usize) -> Result<Self> {
        Ok(Self::wrapping(PagedWriter::new(sink, DATA_RUN_SPEC, page_size)?))
    }

    /// The build id [`finish`](Self::finish) writes into the header.
    pub fn build_id(&self) -> u64 {
        self.inner.build_id()
    }

    /// Sets the build id written into the header (0, the default: none).
    pub fn set_build_id(&mut self, build_id: u64) {
        self.inner.set_build_id(build_id);
    }

    fn wrapping(inner: PagedWriter) -> Self {
        DataRunWriter {
            inner,
            first_key: 0,
            last_key: None,
        }
    }

    /// Appends a record. Keys must be strictly increasing:
    /// [`Error::OutOfOrder`] names the position and both keys otherwise.
    pub fn push(&mut self, key: u64, value: u64) -> Result<()> {
        match self.last_key {
            Some(prev) if key <= prev => {
                return Err(Error::OutOfOrder {
                    position: self.inner.len(),
                    previous: prev,
                    got: key,
                });
            }
            None => self.first_key = key,
            _ => {}
        }
        let e = self.inner.next_entry_mut();
        put_u64(e, 0, key);
        put_u64(e, 8, value);
        self.inner.commit(0)?;
        self.last_key = Some(key);
        Ok(())
    }

    /// Appends records given as their bytes (16 each: key, value, little
    /// endian), e.g. a stretch of another run's page; keys must be strictly
    /// increasing and above every key pushed before ([`Error::OutOfOrder`]
    /// otherwise, and then nothing of `records` is appended).
    pub fn push_records(&mut self, records: &[u8]) -> Result<()> {
        if records.len() % RECORD_LEN != 0 {
            return Err(Error::invalid(format!(
                "{} bytes are not whole records of {RECORD_LEN} bytes",
                records.len()
            )));
        }
        let mut last = self.last_key;
        for (j, r) in records.chunks_exact(RECORD_LEN).enumerate() {
            let key = get_u64(r, 0).unwrap_or(0);
            if let Some(prev) = last {
                if key <= prev {
                    return Err(Error::OutOfOrder {
                        position: self.inner.len() + j as u64,
                        previous: prev,
                        got: key,
                    });
                }
            } else {
                self.first_key = key;
            }
            last = Some(key);
        }
        self.inner.push_entries(records, 0)?;
        self.last_key = last;
        Ok(())
    }

    /// Number of records pushed so far.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    /// Whether no record was pushed.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Writes the last page and the header, finishes the sink (the run is
    /// then complete and durable), and returns the header.
    pub fn finish(self) -> Result<DataRunMeta> {
        let mut extra = [0u8; 16];
        put_u64(&mut extra, 0, self.first_key);
        put_u64(&mut extra, 8, self.last_key.unwrap_or(0));
        let m = self.inner.finish(&extra)?;
        Ok(DataRunMeta {
            n: m.count,
            pages: m.pages,
            page_size: m.page_size,
            per_page: m.per_page,
            first_key: self.first_key,
            last_key: self.last_key.unwrap_or(0),
            build_id: m.build_id,
        })
    }
}

/// The data run header a paged-array header holds.
fn run_meta(m: &PagedMeta, file: &str) -> Result<DataRunMeta> {
    let (Some(first_key), Some(last_key)) = (get_u64(&m.extra, 0), get_u64(&m.extra, 8)) else {
        return Err(Error::corruption(file, 0, "data run header lacks its key range"));
    };
    Ok(DataRunMeta {
        n: m.count,
        pages: m.pages,
        page_size: m.page_size,
        per_page: m.per_page,
        first_key,
        last_key,
        build_id: m.build_id,
    })
}

/// Decodes and checks the header page `hdr` (page 0, exactly one page) of
/// the data run `file`: a pure function of the bytes (see
/// [`decode_paged_header`](super::decode_paged_header)); the file length is
/// checked by [`DataRun::open`].
///
/// Errors: [`Error::BadMagic`], [`Error::UnsupportedVersion`],
/// [`Error::Corruption`] naming `file` and page 0.
pub fn decode_data_run_header(hdr: &[u8], file: &str) -> Result<DataRunMeta> {
    run_meta(&super::paged::decode_header(hdr, &DATA_RUN_SPEC, file)?, file)
}

/// An open data run.
#[derive(Debug, Clone)]
pub struct DataRun {
    file: PagedFile,
    meta: DataRunMeta,
}

impl DataRun {
    /// Writes `keys` as the data run `name` of `dir`, where each key's value
    /// is its position (rank) — SOSD's lookup task, so every answer can be
    /// checked.
    pub fn write_ranked(
        dir: &dyn Directory,
        name: &str,
        keys: &[u64],
        page_size: usize,
    ) -> Result<DataRunMeta> {
        let mut w = DataRunWriter::create(dir, name, page_size)?;
        for (i, &k) in keys.iter().enumerate() {
            w.push(k, i as u64)?;
        }
        w.finish()
    }

    /// Opens a data run, checking the header page (magic, version, checksum,
    /// sizes against the file length).
    pub fn open(storage: Arc<dyn ReadStorage>) -> Result<Self> {
        let file = PagedFile::open(storage, DATA_RUN_SPEC)?;
        let meta = run_meta(file.meta(), file.storage().name())?;
        Ok(DataRun { file, meta })
    }

    /// The header.
    pub fn meta(&self) -> &DataRunMeta {
        &self.meta
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.meta.n
    }

    /// Whether the run holds no record.
    pub fn is_empty(&self) -> bool {
        self.meta.n == 0
    }

    /// The underlying storage.
    pub fn storage(&self) -> &Arc<dyn ReadStorage> {
        self.file.storage()
    }

    /// Reads data pages `[a, b)` in one read call and verifies each page.
    pub fn read_pages(&self, a: u64, b: u64) -> Result<PageRun> {
        Ok(PageRun {
            run: self.file.read_pages(a, b)?,
        })
    }

    /// Reads each page range `[a, b)` of `ranges` with up to `queue_depth`
    /// reads in flight, one read call per range
    /// ([`PagedFile::read_pages_many`]).
    pub fn read_pages_many(&self, ranges: &[(u64, u64)], queue_depth: usize) -> Result<Vec<PageRun>> {
        Ok(self
            .file
            .read_pages_many(ranges, queue_depth)?
            .into_iter()
            .map(|run| PageRun { run })
            .collect())
    }

    /// The read of data pages `[a, b)`, with `b` clipped to the run
    /// (returned), for a [`ReadStream`](crate::storage::ReadStream);
    /// [`DataRun::run_from`] checks what it read.
    pub fn range_read(&self, a: u64, b: u64) -> Result<(u64, crate::storage::StreamRead)> {
        self.file.range_read(a, b)
    }

    /// Verifies data pages `[a, b)` (as clipped by [`DataRun::range_read`])
    /// read into `buf` and wraps them, as [`DataRun::read_pages`] does.
    pub fn run_from(&self, a: u64, b: u64, buf: crate::storage::AlignedBuf) -> Result<PageRun> {
        Ok(PageRun {
            run: self.file.run_from(a, b, buf)?,
        })
    }

    /// Reads data page `d`.
    pub fn read_page(&self, d: u64) -> Result<PageRun> {
        self.read_pages(d, d + 1)
    }

    /// Reads every page (in large sequential reads) and checks checksums,
    /// record counts and that keys are strictly increasing across the run.
    pub fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let mut prev: Option<u64> = None;
        let step = 256u64;
        let mut d = 0;
        let name = self.storage().name().to_string();
        while d < self.meta.pages {
            let run = self.read_pages(d, d + step)?;
            let (lo, hi) = run.item_range();
            for i in lo..hi {
                let page = i / self.meta.per_page as u64 + 1;
                let k = run
                    .key(i)
                    .ok_or_else(|| Error::corruption(&name, page, "record out of page"))?;
                if let Some(p) = prev {
                    if k <= p {
                        return Err(Error::corruption(
                            &name,
                            page,
                            format!("keys out of order at item {i}: {k} after {p}"),
                        ));
                    }
                }
                prev = Some(k);
            }
            d += run.pages();
            progress(run.pages());
        }
        if self.meta.n > 0 && (prev != Some(self.meta.last_key)) {
            return Err(Error::corruption(&name, 0, "last key differs from the header"));
        }
        Ok(self.meta.pages + 1)
    }
}

/// A run of consecutive, verified data pages held in memory.
#[derive(Debug, Clone)]
pub struct PageRun {
    run: PagedRun,
}

impl PageRun {
    /// First data page of the run.
    pub fn first_page(&self) -> u64 {
        self.run.first_page()
    }

    /// Number of pages in the run.
    pub fn pages(&self) -> u64 {
        self.run.pages()
    }

    /// Item indexes `[lo, hi)` held by the run.
    pub fn item_range(&self) -> (u64, u64) {
        self.run.entry_range()
    }

    /// Key of item `i` (None if the run does not hold it).
    #[inline]
    pub fn key(&self, i: u64) -> Option<u64> {
        self.run.u64_at(i, 0)
    }

    /// The bytes of records `[i, i + n)` (16 each) when they lie in one
    /// page of the run.
    #[inline]
    pub fn records_in_page(&self, i: u64, n: u64) -> Option<&[u8]> {
        self.run.entries_in_page(i, n)
    }

    /// Records per page.
    pub fn per_page(&self) -> u64 {
        self.run.per_page()
    }

    /// Appends the keys of items `[lo, hi)` to `out`, a page's records at a
    /// time (no page located per key); `false` (with some appended) if the
    /// run does not hold them all.
    pub fn keys_into(&self, lo: u64, hi: u64, out: &mut Vec<u64>) -> bool {
        let per = self.per_page().max(1);
        let mut i = lo;
        while i < hi {
            let end = (i / per).saturating_add(1).saturating_mul(per).min(hi);
            let Some(bytes) = self.run.entries_in_page(i, end - i) else {
                return false;
            };
            out.extend(
                bytes
                    .chunks_exact(RECORD_LEN)
                    .map(|r| get_u64(r, 0).unwrap_or_default()),
            );
            i = end;
        }
        true
    }

    /// Record of item `i`.
    #[inline]
    pub fn record(&self, i: u64) -> Option<(u64, u64)> {
        let e = self.run.entry(i)?;
        Some((get_u64(e, 0)?, get_u64(e, 8)?))
    }

    /// First item index in `[lo, hi)` (clipped to the run) whose key is
    /// `>= key`, or the clipped `hi` if there is none. Binary search.
    pub fn lower_bound(&self, key: u64, lo: u64, hi: u64) -> u64 {
        let (rlo, rhi) = self.item_range();
        let (mut lo, mut hi) = (lo.max(rlo), hi.min(rhi));
        if lo >= hi {
            return hi.max(lo);
        }
        // Page by page: skip each page whose last key in the range is
        // smaller, then search the bytes of the page that holds the answer
        // directly instead of locating every probe.
        let per = self.per_page().max(1);
        while lo < hi {
            let end = (lo / per).saturating_add(1).saturating_mul(per).min(hi);
            match self.key(end - 1) {
                Some(k) if k < key => lo = end,
                Some(_) => match self.run.entries_in_page(lo, end - lo) {
                    Some(bytes) => return lo + search_records(bytes, (end - lo) as usize, key),
                    None => break,
                },
                None => break,
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid) {
                Some(k) if k < key => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }
}

/// Index of the first of the `n` records in `bytes` whose key is `>= key`
/// (`n` if none): a branch-free binary search.
#[inline]
/// The first of the `n` records in `bytes` whose key is `>= key` (`n` if
/// none), found by galloping from the first: `O(log d)` for an answer `d`
/// records on.
fn gallop_records(bytes: &[u8], n: usize, key: u64) -> usize {
    let below = |i: usize| get_u64(bytes, i * RECORD_LEN).is_some_and(|k| k < key);
    let (mut a, mut step) = (0usize, 1usize);
    // Every record before `a` has a smaller key.
    loop {
        let probe = a + step - 1;
        if probe >= n {
            let rest = bytes.get(a * RECORD_LEN..).unwrap_or_default();
            return a + search_records(rest, n - a, key) as usize;
        }
        if !below(probe) {
            let part = bytes.get(a * RECORD_LEN..probe * RECORD_LEN).unwrap_or_default();
            return a + search_records(part, probe - a, key) as usize;
        }
        a = probe + 1;
        step *= 2;
    }
}

fn search_records(bytes: &[u8], n: usize, key: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let (mut base, mut len) = (0usize, n);
    while len > 1 {
        let half = len / 2;
        let below = get_u64(bytes, (base + half - 1) * RECORD_LEN).is_some_and(|k| k < key);
        base = if below { base + half } else { base };
        len -= half;
    }
    let below = get_u64(bytes, base * RECORD_LEN).is_some_and(|k| k < key);
    (base + usize::from(below)) as u64
}

impl PageRun {
    /// [`PageRun::lower_bound`] for a key whose lower bound is expected
    /// near `lo` (the next of keys in ascending order): a galloping search
    /// forward from `lo`, `O(log d)` for an answer `d` items on, then the
    /// binary search of the range it found.
    pub fn lower_bound_near(&self, key: u64, lo: u64, hi: u64) -> u64 {
        let (rlo, rhi) = self.item_range();
        let (lo, hi) = (lo.max(rlo), hi.min(rhi));
        if lo >= hi {
            return hi.max(lo);
        }
        let mut a = lo;
        let mut step = 1u64;
        // Invariant: every item before `a` has a key `< key`.
        loop {
            let probe = a.saturating_add(step - 1);
            if probe >= hi {
                return self.lower_bound(key, a, hi);
            }
            match self.key(probe) {
                Some(k) if k < key => {
                    a = probe + 1;
                    step = step.saturating_mul(2);
                }
                _ => return self.lower_bound(key, a, probe + 1),
            }
        }
    }

    /// The first item at or after `from` whose key is `>= key`, with its
    /// record, or the run's end and `None`: a galloping search forward from
    /// `from` in the bytes of each page (the page located once, not per
    /// probe), for the next of keys in ascending order, whose lower bound is
    /// usually a few records on.
    pub fn seek_from(&self, key: u64, from: u64) -> (u64, Option<(u64, u64)>) {
        let (rlo, rhi) = self.item_range();
        let mut i = from.max(rlo);
        while i < rhi {
            let Some((bytes, end)) = self.run.entries_to_page_end(i) else {
                break;
            };
            let n = (end - i) as usize;
            let at = gallop_records(bytes, n, key);
            if at < n {
                let off = at * RECORD_LEN;
                let rec = get_u64(bytes, off).zip(get_u64(bytes, off + 8));
                return (i + at as u64, rec);
            }
            i = end;
        }
        if i >= rhi {
            return (rhi, None);
        }
        // Only a run not holding its pages' records whole gets here.
        let lb = self.lower_bound(key, i, rhi);
        (lb, self.record(lb))
    }
}

// The header layout is shared with every paged array; only the record width
// and the key-range extra are specific to data runs.
const _: () = assert!(PAGE_HEADER_LEN + RECORD_LEN <= 4096);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Directory, MemDirectory};

    fn build(keys: &[u64], ps: usize) -> (MemDirectory, DataRun) {
        let dir = MemDirectory::new();
        DataRun::write_ranked(&dir, "run", keys, ps).unwrap();
        let f = dir.open_read("run").unwrap();
        (dir, DataRun::open(f).unwrap())
    }

    #[test]
    fn roundtrip_many_pages() {
        for ps in [4096, 8192, 16384] {
            let keys: Vec<u64> = (0..10_000u64).map(|i| i * 3 + 1).collect();
            let (_d, run) = build(&keys, ps);
            let m = *run.meta();
            assert_eq!(m.per_page, (ps - 16) / 16);
            assert_eq!(m.n, 10_000);
            assert_eq!(m.pages, 10_000u64.div_ceil(m.per_page as u64));
            let all = run.read_pages(0, m.pages).unwrap();
            for (i, &k) in keys.iter().enumerate() {
                assert_eq!(all.record(i as u64), Some((k, i as u64)));
            }
            assert_eq!(all.lower_bound(0, 0, m.n), 0);
            assert_eq!(all.lower_bound(5, 0, m.n), 2);
            assert_eq!(all.lower_bound(u64::MAX, 0, m.n), m.n);
            // Ranges inside one page (the direct search) and across pages
            // agree with the oracle, binary and galloping.
            let pp = m.per_page as u64;
            for (lo, hi) in [
                (0, pp),
                (pp + 3, 2 * pp),
                (5, 6),
                (7, 7 + pp - 7),
                (m.n - 1, m.n),
                (pp - 2, 3 * pp + 5),
                (0, m.n),
            ] {
                for probe in (0..=keys.len()).step_by(97).chain([0, keys.len() - 1]) {
                    for key in [
                        keys[probe.min(keys.len() - 1)],
                        keys[probe.min(keys.len() - 1)] + 1,
                        0,
                    ] {
                        let want = (keys.partition_point(|&k| k < key) as u64).clamp(lo, hi);
                        assert_eq!(all.lower_bound(key, lo, hi), want, "{key} in [{lo}, {hi})");
                        assert_eq!(
                            all.lower_bound_near(key, lo, hi),
                            want,
                            "near: {key} in [{lo}, {hi})"
                        );
                        // From `lo` to the run's end, with the record.
                        let want = (keys.partition_point(|&k| k < key) as u64).max(lo);
                        assert_eq!(
                            all.seek_from(key, lo),
                            (want, all.record(want)),
                            "seek: {key} from {lo}"
                        );
                    }
                }
            }
            // From the middle of a page (a later run of pages: its first
            // item is not 0), to every answer distance.
            let part = run.read_pages(1, 3).unwrap();
            let (plo, phi) = part.item_range();
            for from in [0, plo, plo + 1, plo + pp - 1, plo + pp, phi - 1, phi, phi + 9] {
                for key in keys
                    .iter()
                    .step_by(13)
                    .flat_map(|&k| [k, k + 1])
                    .chain([0, u64::MAX])
                {
                    let want = (keys.partition_point(|&k| k < key) as u64)
                        .max(from)
                        .clamp(plo, phi);
                    assert_eq!(
                        part.seek_from(key, from),
                        (want, part.record(want)),
                        "{key} from {from}"
                    );
                }
            }
            assert_eq!(run.verify(&mut |_| {}).unwrap(), m.pages + 1);
        }
    }

    #[test]
    fn byte_stretches_write_the_same_run_as_records_one_by_one() {
        let keys: Vec<u64> = (0..3_000u64).map(|i| i * i + 7).collect();
        for ps in [4096, 8192] {
            let dir = MemDirectory::new();
            let mut one = DataRunWriter::create(&dir, "a", ps).unwrap();
            let mut many = DataRunWriter::new(dir.create_sink("b", ps).unwrap(), ps).unwrap();
            let (a, b) = (dir.open_read("a").unwrap(), dir.open_read("b").unwrap());
            let mut bytes = Vec::new();
            for &k in &keys {
                one.push(k, !k).unwrap();
                bytes.extend_from_slice(&k.to_le_bytes());
                bytes.extend_from_slice(&(!k).to_le_bytes());
            }
            // Stretches of 1, 2, 3, ... records, crossing page boundaries.
            let mut at = 0;
            for len in 1.. {
                let end = (at + len * RECORD_LEN).min(bytes.len());
                many.push_records(&bytes[at..end]).unwrap();
                at = end;
                if at == bytes.len() {
                    break;
                }
            }
            // Out of order (inside a stretch, or against the last key),
            // and partial records: refused, nothing appended.
            let last = keys[keys.len() - 1];
            let mut bad = Vec::new();
            for k in [last + 10, last + 5] {
                bad.extend_from_slice(&k.to_le_bytes());
                bad.extend_from_slice(&0u64.to_le_bytes());
            }
            assert!(matches!(many.push_records(&bad), Err(Error::OutOfOrder { got, .. }) if got == last + 5));
            assert!(matches!(
                many.push_records(&bytes[..16]),
                Err(Error::OutOfOrder { .. })
            ));
            assert!(many.push_records(&bytes[..8]).is_err());
            assert_eq!(many.len(), keys.len() as u64);
            assert_eq!(one.finish().unwrap(), many.finish().unwrap());
            let (la, lb) = (a.len().unwrap(), b.len().unwrap());
            let (mut ba, mut bb) = (vec![0u8; la as usize], vec![0u8; lb as usize]);
            a.read_at(0, &mut ba).unwrap();
            b.read_at(0, &mut bb).unwrap();
            assert!(ba == bb, "page size {ps}: the files differ");
            let run = DataRun::open(b).unwrap();
            assert_eq!(run.verify(&mut |_| {}).unwrap(), run.meta().pages + 1);
        }
    }

    #[test]
    fn out_of_order_names_position_and_keys() {
        let dir = MemDirectory::new();
        let mut w = DataRunWriter::create(&dir, "r", 4096).unwrap();
        w.push(1, 0).unwrap();
        w.push(5, 1).unwrap();
        match w.push(5, 2) {
            Err(Error::OutOfOrder {
                position,
                previous,
                got,
            }) => assert_eq!((position, previous, got), (2, 5, 5)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failed_or_abandoned_build_does_not_open() {
        let keys: Vec<u64> = (0..5_000).collect();
        let dir = crate::storage::FaultyDirectory::new();
        // Abandoned: dropped before finish.
        let mut w = DataRunWriter::create(&dir, "run", 4096).unwrap();
        for &k in &keys {
            w.push(k, k).unwrap();
        }
        drop(w);
        assert!(DataRun::open(dir.open_read("run").unwrap()).is_err());
        // Failed: the sync of finish fails after the header was written.
        dir.plan().inject(
            crate::storage::FaultOp::Sync,
            0,
            crate::storage::FaultKind::Eio,
            false,
        );
        assert!(DataRun::write_ranked(&dir, "run", &keys, 4096).is_err());
        assert!(DataRun::open(dir.open_read("run").unwrap()).is_err());
        // Crash before finish: nothing survives.
        dir.sync_dir().unwrap();
        let mut w = DataRunWriter::create(&dir, "run", 4096).unwrap();
        w.push(1, 1).unwrap();
        dir.crash();
        assert!(DataRun::open(dir.open_read("run").unwrap()).is_err());
        drop(w);
        // Finished: it opens.
        DataRun::write_ranked(&dir, "run", &keys, 4096).unwrap();
        assert_eq!(DataRun::open(dir.open_read("run").unwrap()).unwrap().len(), 5_000);
    }

    #[test]
    fn empty_run() {
        let (_d, run) = build(&[], 4096);
        assert_eq!(run.len(), 0);
        assert_eq!(run.meta().pages, 0);
        assert!(run.read_pages(0, 1).is_err());
        assert_eq!(run.verify(&mut |_| {}).unwrap(), 1);
    }

    #[test]
    fn corruption_is_detected() {
        let keys: Vec<u64> = (0..2000).collect();
        let (dir, run) = build(&keys, 4096);
        dir.file("run").unwrap().corrupt_byte(4096 * 3 + 100);
        let e = run.read_page(2).unwrap_err();
        assert!(matches!(e, Error::Corruption { page: 3, .. }), "{e}");
        assert!(run.read_page(1).is_ok());
        assert!(run.verify(&mut |_| {}).is_err());
        // Header corruption is caught at open.
        dir.file("run").unwrap().corrupt_byte(40);
        assert!(DataRun::open(dir.open("run").unwrap()).is_err());
    }

    #[test]
    fn bad_magic_version_truncation() {
        let keys: Vec<u64> = (0..600).collect();
        let (dir, _run) = build(&keys, 4096);
        let f = dir.open("run").unwrap();
        f.set_len(4096 * 2).unwrap();
        assert!(matches!(
            DataRun::open(f.clone()).unwrap_err(),
            Error::Truncated { .. }
        ));
        let g = dir.create("zero").unwrap();
        g.write_at(0, &[0u8; 4096]).unwrap();
        assert!(matches!(DataRun::open(g).unwrap_err(), Error::BadMagic { .. }));
    }

    /// Issue 16, failure 6: `(pages + 1) * page_size` of a data run header
    /// whose record count was rewritten (and page 0 resealed) overflows:
    /// corruption, not a panic or a wrapped size.
    #[test]
    fn huge_record_count_in_a_resealed_header_is_corruption() {
        let keys: Vec<u64> = (0..600).collect();
        let dir = MemDirectory::new();
        let mut w = DataRunWriter::create(&dir, "run", 4096).unwrap();
        w.set_build_id(5);
        for &k in &keys {
            w.push(k, k).unwrap();
        }
        assert_eq!(w.finish().unwrap().build_id, 5);
        let f = dir.open("run").unwrap();
        let mut hdr = vec![0u8; 4096];
        f.read_at(0, &mut hdr).unwrap();
        assert_eq!(decode_data_run_header(&hdr, "run").unwrap().build_id, 5);
        let count = u64::MAX - 3;
        put_u64(&mut hdr, PAGE_HEADER_LEN + 16, count);
        put_u64(
            &mut hdr,
            PAGE_HEADER_LEN + 24,
            count.div_ceil(records_per_page(4096) as u64),
        );
        let h = super::super::page::PageHeader {
            kind: PageType::FileHeader,
            flags: 0,
            count: 0,
            aux: 5,
        };
        super::super::page::seal(&mut hdr, 0, h);
        let meta = decode_data_run_header(&hdr, "run").unwrap();
        assert_eq!((meta.n, meta.file_len()), (count, None));
        f.write_at(0, &hdr).unwrap();
        let e = DataRun::open(dir.open_read("run").unwrap()).unwrap_err();
        assert!(matches!(e, Error::Corruption { page: 0, .. }), "{e}");
        assert_eq!(meta.records_on(meta.pages), 0);
    }
}
