//! Data runs: sorted `(u64 key, u64 value)` records packed into checksummed pages.
//!
//! A data run is the data layer under every static index. Record `i` (its
//! *item index*, which a learned model predicts) lives on data page
//! `i / per_page` at slot `i % per_page`; data page `d` is file page `d + 1`
//! because file page 0 is the header. Any range of pages is read with one
//! read call. See `docs/format/datarun.md`.

use std::sync::Arc;

use super::bytes::{get_u32, get_u64, put_u32, put_u64};
use super::page::{self, PAGE_HEADER_LEN, PageHeader, PageType, check_page_size};
use crate::storage::{AlignedBuf, Storage};
use crate::{Error, Result};

/// Magic number of a data run file: the bytes `STRATADR`.
pub const DATA_RUN_MAGIC: u64 = u64::from_le_bytes(*b"STRATADR");
/// Format version of data run files written by this build.
pub const DATA_RUN_VERSION: u32 = 1;
/// Size of one record: key and value, both `u64` little-endian.
pub const RECORD_LEN: usize = 16;
/// Pages written per write call while building.
const WRITE_BATCH_PAGES: usize = 256;

/// Number of records a page of `page_size` bytes holds.
pub const fn records_per_page(page_size: usize) -> usize {
    (page_size - PAGE_HEADER_LEN) / RECORD_LEN
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
}

impl DataRunMeta {
    /// Data page holding item `i`.
    pub fn page_of(&self, i: u64) -> u64 {
        i / self.per_page as u64
    }

    /// Number of records on data page `d`.
    pub fn records_on(&self, d: u64) -> usize {
        let start = d * self.per_page as u64;
        (self.n.saturating_sub(start)).min(self.per_page as u64) as usize
    }

    /// File size implied by the header.
    pub fn file_len(&self) -> u64 {
        (self.pages + 1) * self.page_size as u64
    }
}

/// Streams sorted records into a new data run.
#[derive(Debug)]
pub struct DataRunWriter {
    storage: Arc<dyn Storage>,
    page_size: usize,
    per_page: usize,
    batch: AlignedBuf,
    /// Pages completed in `batch`.
    batch_pages: usize,
    /// Records on the page being filled.
    in_page: usize,
    /// Data pages already written to storage.
    written_pages: u64,
    n: u64,
    first_key: u64,
    last_key: Option<u64>,
}

impl DataRunWriter {
    /// Starts a data run on an empty `storage`.
    pub fn new(storage: Arc<dyn Storage>, page_size: usize) -> Result<Self> {
        check_page_size(page_size)?;
        storage.set_len(0)?;
        Ok(DataRunWriter {
            storage,
            page_size,
            per_page: records_per_page(page_size),
            batch: AlignedBuf::zeroed(page_size * WRITE_BATCH_PAGES),
            batch_pages: 0,
            in_page: 0,
            written_pages: 0,
            n: 0,
            first_key: 0,
            last_key: None,
        })
    }

    /// Appends a record. Keys must be strictly increasing:
    /// [`Error::OutOfOrder`] names the position and both keys otherwise.
    pub fn push(&mut self, key: u64, value: u64) -> Result<()> {
        if let Some(prev) = self.last_key {
            if key <= prev {
                return Err(Error::OutOfOrder {
                    position: self.n,
                    previous: prev,
                    got: key,
                });
            }
        } else {
            self.first_key = key;
        }
        let off = self.batch_pages * self.page_size + PAGE_HEADER_LEN + self.in_page * RECORD_LEN;
        put_u64(&mut self.batch, off, key);
        put_u64(&mut self.batch, off + 8, value);
        self.in_page += 1;
        self.n += 1;
        self.last_key = Some(key);
        if self.in_page == self.per_page {
            self.seal_page()?;
        }
        Ok(())
    }

    fn seal_page(&mut self) -> Result<()> {
        let start = self.batch_pages * self.page_size;
        let file_page = self.written_pages + self.batch_pages as u64 + 1;
        let count = u16::try_from(self.in_page).map_err(|_| Error::invalid("page record count overflows"))?;
        if let Some(page) = self.batch.get_mut(start..start + self.page_size) {
            page::seal(
                page,
                file_page,
                PageHeader {
                    kind: PageType::Data,
                    flags: 0,
                    count,
                    aux: 0,
                },
            );
        }
        self.batch_pages += 1;
        self.in_page = 0;
        if self.batch_pages == WRITE_BATCH_PAGES {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> Result<()> {
        if self.batch_pages == 0 {
            return Ok(());
        }
        let bytes = self.batch_pages * self.page_size;
        let off = (self.written_pages + 1) * self.page_size as u64;
        let part = self.batch.get(..bytes).ok_or_else(|| Error::invalid("batch"))?;
        self.storage.write_at(off, part)?;
        self.written_pages += self.batch_pages as u64;
        self.batch_pages = 0;
        self.batch.fill(0);
        Ok(())
    }

    /// Number of records pushed so far.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether no record was pushed.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Writes the last page and the header, syncs, and returns the header.
    pub fn finish(mut self) -> Result<DataRunMeta> {
        if self.in_page > 0 {
            self.seal_page()?;
        }
        self.flush_batch()?;
        let meta = DataRunMeta {
            n: self.n,
            pages: self.written_pages,
            page_size: self.page_size,
            per_page: self.per_page,
            first_key: self.first_key,
            last_key: self.last_key.unwrap_or(0),
        };
        let mut hdr = AlignedBuf::zeroed(self.page_size);
        encode_header(&mut hdr, &meta);
        self.storage.write_at(0, &hdr)?;
        self.storage.sync()?;
        Ok(meta)
    }
}

fn encode_header(page: &mut [u8], m: &DataRunMeta) {
    let o = PAGE_HEADER_LEN;
    put_u64(page, o, DATA_RUN_MAGIC);
    put_u32(page, o + 8, DATA_RUN_VERSION);
    put_u32(page, o + 12, m.page_size as u32);
    put_u64(page, o + 16, m.n);
    put_u64(page, o + 24, m.pages);
    put_u64(page, o + 32, m.first_key);
    put_u64(page, o + 40, m.last_key);
    put_u32(page, o + 48, m.per_page as u32);
    page::seal(
        page,
        0,
        PageHeader {
            kind: PageType::FileHeader,
            flags: 0,
            count: 0,
            aux: 0,
        },
    );
}

/// An open data run.
#[derive(Debug, Clone)]
pub struct DataRun {
    storage: Arc<dyn Storage>,
    meta: DataRunMeta,
}

impl DataRun {
    /// Writes `keys` as a data run where each key's value is its position
    /// (rank) — SOSD's lookup task, so every answer can be checked.
    pub fn write_ranked(storage: Arc<dyn Storage>, keys: &[u64], page_size: usize) -> Result<DataRunMeta> {
        let mut w = DataRunWriter::new(storage, page_size)?;
        for (i, &k) in keys.iter().enumerate() {
            w.push(k, i as u64)?;
        }
        w.finish()
    }

    /// Opens a data run, checking the header page (magic, version, checksum,
    /// sizes against the file length).
    pub fn open(storage: Arc<dyn Storage>) -> Result<Self> {
        let name = storage.name().to_string();
        let file_len = storage.len()?;
        if file_len < 4096 {
            return Err(Error::Truncated {
                file: name,
                expected: 4096,
                found: file_len,
            });
        }
        // The smallest page size is 4 KiB: the header fields fit in it.
        let mut first = AlignedBuf::zeroed(4096);
        storage.read_at(0, &mut first)?;
        let o = PAGE_HEADER_LEN;
        let magic = get_u64(&first, o).unwrap_or(0);
        if magic != DATA_RUN_MAGIC {
            return Err(Error::BadMagic {
                file: name,
                expected: "strata data run",
                found: magic,
            });
        }
        let version = get_u32(&first, o + 8).unwrap_or(0);
        if version != DATA_RUN_VERSION {
            return Err(Error::UnsupportedVersion {
                file: name,
                found: version,
                supported: DATA_RUN_VERSION,
            });
        }
        let page_size = get_u32(&first, o + 12).unwrap_or(0) as usize;
        check_page_size(page_size)
            .map_err(|_| Error::corruption(&name, 0, format!("bad page size {page_size}")))?;
        let mut hdr = AlignedBuf::zeroed(page_size);
        storage.read_at(0, &mut hdr)?;
        page::open_typed(&hdr, 0, &name, PageType::FileHeader)?;
        let field = |off: usize| get_u64(&hdr, o + off).unwrap_or(0);
        let meta = DataRunMeta {
            n: field(16),
            pages: field(24),
            page_size,
            per_page: get_u32(&hdr, o + 48).unwrap_or(0) as usize,
            first_key: field(32),
            last_key: field(40),
        };
        if meta.per_page != records_per_page(page_size) || meta.pages != meta.n.div_ceil(meta.per_page as u64)
        {
            return Err(Error::corruption(&name, 0, "header counts are inconsistent"));
        }
        if file_len < meta.file_len() {
            return Err(Error::Truncated {
                file: name,
                expected: meta.file_len(),
                found: file_len,
            });
        }
        Ok(DataRun { storage, meta })
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
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Reads data pages `[a, b)` in one read call and verifies each page.
    pub fn read_pages(&self, a: u64, b: u64) -> Result<PageRun> {
        let b = b.min(self.meta.pages);
        if a >= b {
            return Err(Error::invalid(format!(
                "empty or out-of-range page range [{a}, {b}) of a run with {} pages",
                self.meta.pages
            )));
        }
        let ps = self.meta.page_size;
        let count = (b - a) as usize;
        let mut buf = AlignedBuf::zeroed(count * ps);
        self.storage.read_at((a + 1) * ps as u64, &mut buf)?;
        for i in 0..count {
            let d = a + i as u64;
            let page = buf
                .get(i * ps..(i + 1) * ps)
                .ok_or_else(|| Error::invalid("page slice"))?;
            let h = page::open_typed(page, d + 1, self.storage.name(), PageType::Data)?;
            if h.count as usize != self.meta.records_on(d) {
                return Err(Error::corruption(
                    self.storage.name(),
                    d + 1,
                    format!(
                        "page holds {} records, expected {}",
                        h.count,
                        self.meta.records_on(d)
                    ),
                ));
            }
        }
        Ok(PageRun {
            buf,
            first_page: a,
            pages: b - a,
            page_size: ps,
            per_page: self.meta.per_page as u64,
            n: self.meta.n,
        })
    }

    /// Reads data page `d`.
    pub fn read_page(&self, d: u64) -> Result<PageRun> {
        self.read_pages(d, d + 1)
    }

    /// Reads every page (in large sequential reads) and checks checksums,
    /// record counts and that keys are strictly increasing across the run.
    pub fn verify(&self, mut progress: impl FnMut(u64)) -> Result<u64> {
        let mut prev: Option<u64> = None;
        let step = 256u64;
        let mut d = 0;
        while d < self.meta.pages {
            let run = self.read_pages(d, d + step)?;
            let (lo, hi) = run.item_range();
            for i in lo..hi {
                let k = run.key(i).ok_or_else(|| {
                    Error::corruption(self.storage.name(), run.file_page_of(i), "record out of page")
                })?;
                if let Some(p) = prev {
                    if k <= p {
                        return Err(Error::corruption(
                            self.storage.name(),
                            run.file_page_of(i),
                            format!("keys out of order at item {i}: {k} after {p}"),
                        ));
                    }
                }
                prev = Some(k);
            }
            d += run.pages;
            progress(run.pages);
        }
        if self.meta.n > 0 && (prev != Some(self.meta.last_key)) {
            return Err(Error::corruption(
                self.storage.name(),
                0,
                "last key differs from the header",
            ));
        }
        Ok(self.meta.pages)
    }
}

/// A run of consecutive, verified data pages held in memory.
#[derive(Debug, Clone)]
pub struct PageRun {
    buf: AlignedBuf,
    first_page: u64,
    pages: u64,
    page_size: usize,
    per_page: u64,
    n: u64,
}

impl PageRun {
    /// First data page of the run.
    pub fn first_page(&self) -> u64 {
        self.first_page
    }

    /// Number of pages in the run.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Item indexes `[lo, hi)` held by the run.
    pub fn item_range(&self) -> (u64, u64) {
        let lo = self.first_page * self.per_page;
        let hi = ((self.first_page + self.pages) * self.per_page).min(self.n);
        (lo, hi)
    }

    fn offset_of(&self, i: u64) -> Option<usize> {
        let (lo, hi) = self.item_range();
        if i < lo || i >= hi {
            return None;
        }
        let page = i / self.per_page - self.first_page;
        let slot = i % self.per_page;
        Some(page as usize * self.page_size + PAGE_HEADER_LEN + slot as usize * RECORD_LEN)
    }

    fn file_page_of(&self, i: u64) -> u64 {
        i / self.per_page + 1
    }

    /// Key of item `i` (None if the run does not hold it).
    #[inline]
    pub fn key(&self, i: u64) -> Option<u64> {
        get_u64(&self.buf, self.offset_of(i)?)
    }

    /// Record of item `i`.
    #[inline]
    pub fn record(&self, i: u64) -> Option<(u64, u64)> {
        let off = self.offset_of(i)?;
        Some((get_u64(&self.buf, off)?, get_u64(&self.buf, off + 8)?))
    }

    /// First item index in `[lo, hi)` (clipped to the run) whose key is
    /// `>= key`, or the clipped `hi` if there is none. Binary search.
    pub fn lower_bound(&self, key: u64, lo: u64, hi: u64) -> u64 {
        let (rlo, rhi) = self.item_range();
        let (mut lo, mut hi) = (lo.max(rlo), hi.min(rhi));
        if lo >= hi {
            return hi.max(lo);
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::storage::{Directory, MemDirectory};

    fn build(keys: &[u64], ps: usize) -> (MemDirectory, DataRun) {
        let dir = MemDirectory::new();
        let f = dir.create("run").unwrap();
        DataRun::write_ranked(f.clone(), keys, ps).unwrap();
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
            assert_eq!(run.verify(|_| {}).unwrap(), m.pages);
        }
    }

    #[test]
    fn out_of_order_names_position_and_keys() {
        let dir = MemDirectory::new();
        let mut w = DataRunWriter::new(dir.create("r").unwrap(), 4096).unwrap();
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
    fn empty_run() {
        let (_d, run) = build(&[], 4096);
        assert_eq!(run.len(), 0);
        assert_eq!(run.meta().pages, 0);
        assert!(run.read_pages(0, 1).is_err());
        assert_eq!(run.verify(|_| {}).unwrap(), 0);
    }

    #[test]
    fn corruption_is_detected() {
        let keys: Vec<u64> = (0..2000).collect();
        let (dir, run) = build(&keys, 4096);
        dir.file("run").unwrap().corrupt_byte(4096 * 3 + 100);
        let e = run.read_page(2).unwrap_err();
        assert!(matches!(e, Error::Corruption { page: 3, .. }), "{e}");
        assert!(run.read_page(1).is_ok());
        assert!(run.verify(|_| {}).is_err());
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
}
