//! Paged arrays: fixed-width entries packed into checksummed pages.
//!
//! The common container of strata's static files: a data run is a paged
//! array of 16-byte records, an index layer a paged array of its entries (or
//! of bytes, for a compressed layer stored as one blob). Entry `i` lives on
//! data page `i / per_page` (file page `i / per_page + 1`; file page 0 is the
//! header), so any range of entries is read with one aligned read call. Each
//! data page carries an `aux` word in its header, chosen by the writer (index
//! layers store the end position of the page's last entry there). See
//! `docs/format/paged.md`.
//!
//! A [`PagedWriter`] builds the file through a write-once [`Sink`] with file
//! page 0 reserved: data pages are appended in batches, and the header, known
//! only at the end, is supplied by [`PagedWriter::finish`]. A [`PagedFile`]
//! reads it through the read side ([`ReadStorage`]) only.

use std::sync::Arc;

use super::bytes::{get_u32, get_u64, put_u32, put_u64};
use super::page::{self, MIN_PAGE_SIZE, PAGE_HEADER_LEN, PageHeader, PageType, check_page_size};
use crate::storage::{AlignedBuf, Directory, ReadStorage, ReadStream, Sink, StreamRead};
use crate::{Error, Result};

/// Pages written per write call while building.
const WRITE_BATCH_PAGES: usize = 256;
/// Offset of the kind-specific header fields in the header page.
const EXTRA_OFFSET: usize = 64;
/// Largest kind-specific header.
pub(crate) const MAX_EXTRA: usize = 1024;

/// What kind of paged file: its magic, version, data page type and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagedSpec {
    /// Magic number (8 ASCII bytes as a little-endian u64).
    pub magic: u64,
    /// Format version.
    pub version: u32,
    /// Page type of the data pages.
    pub page_type: PageType,
    /// Entry width in bytes; 0 when opening accepts any width (the header's).
    pub width: usize,
    /// Name for error messages ("strata data run", ...).
    pub name: &'static str,
}

impl PagedSpec {
    /// The identification fields its header page carries.
    pub fn ident(&self) -> page::FileIdent {
        page::FileIdent {
            magic: self.magic,
            version: self.version,
            what: self.name,
        }
    }
}

/// The header of a paged array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagedMeta {
    /// Number of entries.
    pub count: u64,
    /// Number of data pages.
    pub pages: u64,
    /// Page size in bytes.
    pub page_size: usize,
    /// Entry width in bytes.
    pub width: usize,
    /// Entries per full page.
    pub per_page: usize,
    /// Kind-specific header bytes.
    pub extra: Vec<u8>,
    /// Build id of the index directory build that wrote the file (the
    /// header page's `aux` word; 0: written before build ids, or outside
    /// an index directory).
    pub build_id: u64,
}

impl PagedMeta {
    /// Data page holding entry `i`.
    #[inline]
    pub fn page_of(&self, i: u64) -> u64 {
        i / self.per_page as u64
    }

    /// Entries on data page `d`.
    pub fn entries_on(&self, d: u64) -> usize {
        let start = d.saturating_mul(self.per_page as u64);
        // At most `per_page`, which is a usize.
        self.count.saturating_sub(start).min(self.per_page as u64) as usize
    }

    /// File size implied by the header: `(pages + 1) * page_size`, or
    /// `None` when that overflows a u64 (a header no file can match).
    pub fn file_len(&self) -> Option<u64> {
        paged_file_len(self.pages, self.page_size)
    }
}

/// `(pages + 1) * page_size` (a header page and `pages` data pages), or
/// `None` on overflow.
pub(crate) fn paged_file_len(pages: u64, page_size: usize) -> Option<u64> {
    pages.checked_add(1)?.checked_mul(page_size as u64)
}

/// Entries per page for a page size and entry width.
pub(crate) const fn entries_per_page(page_size: usize, width: usize) -> usize {
    (page_size - PAGE_HEADER_LEN) / width
}

/// Decodes and checks the header page `hdr` (page 0, exactly one page) of
/// `file`, a paged array of kind `spec` (width 0: any width): magic,
/// version, page size, checksum, page type, and the fields against each
/// other (width, entries per page, pages for the count, extra length). A
/// pure function of the bytes; the file length is checked by
/// [`PagedFile::open`].
///
/// Errors: [`Error::BadMagic`], [`Error::UnsupportedVersion`],
/// [`Error::Corruption`] naming `file` and page 0.
pub fn decode_header(hdr: &[u8], spec: &PagedSpec, file: &str) -> Result<PagedMeta> {
    let (page_size, h) = page::open_file_header(hdr, file, &spec.ident())?;
    let o = PAGE_HEADER_LEN;
    let field = |off: usize| get_u64(hdr, off).unwrap_or(0);
    let field32 = |off: usize| get_u32(hdr, off).map_or(0, |v| v as usize);
    let count = field(o + 16);
    let pages = field(o + 24);
    let width = field32(o + 32);
    let per_page = field32(o + 36);
    let page_type = hdr.get(o + 40).copied().unwrap_or(0);
    let extra_len = field32(EXTRA_OFFSET);
    if (spec.width != 0 && width != spec.width)
        || width == 0
        || width > page_size - PAGE_HEADER_LEN
        || page_type != spec.page_type as u8
        || per_page != entries_per_page(page_size, width)
        || pages != count.div_ceil(per_page as u64)
        || extra_len > MAX_EXTRA
    {
        return Err(Error::corruption(file, 0, "header fields are inconsistent"));
    }
    let extra = hdr
        .get(EXTRA_OFFSET + 4..EXTRA_OFFSET + 4 + extra_len)
        .ok_or_else(|| Error::corruption(file, 0, "header extra out of page"))?
        .to_vec();
    Ok(PagedMeta {
        count,
        pages,
        page_size,
        width,
        per_page,
        extra,
        build_id: h.aux,
    })
}

/// Streams entries into a new paged array.
///
/// Until [`finish`](PagedWriter::finish) returns, the file does not look
/// complete (its header page is zero; see [`Sink`]); dropping the writer
/// abandons the build.
#[derive(Debug)]
pub(crate) struct PagedWriter {
    sink: Box<dyn Sink>,
    spec: PagedSpec,
    page_size: usize,
    per_page: usize,
    batch: AlignedBuf,
    batch_pages: usize,
    in_page: usize,
    page_aux: u64,
    written_pages: u64,
    count: u64,
    build_id: u64,
}

impl PagedWriter {
    /// Starts the paged array `name` in `dir`, through a sink with the
    /// header page reserved.
    pub(crate) fn create(dir: &dyn Directory, name: &str, spec: PagedSpec, page_size: usize) -> Result<Self> {
        check_page_size(page_size)?;
        Self::new(dir.create_sink(name, page_size)?, spec, page_size)
    }

    /// Starts a paged array on a fresh `sink` whose reserved header region
    /// is one page of `page_size` bytes.
    pub(crate) fn new(sink: Box<dyn Sink>, spec: PagedSpec, page_size: usize) -> Result<Self> {
        check_page_size(page_size)?;
        if spec.width == 0 || spec.width > page_size - PAGE_HEADER_LEN {
            return Err(Error::invalid(format!(
                "entry width {} does not fit a page",
                spec.width
            )));
        }
        if sink.position() != page_size as u64 {
            return Err(Error::invalid(format!(
                "sink {} reserves {} header bytes, not one page of {page_size}",
                sink.name(),
                sink.position()
            )));
        }
        Ok(PagedWriter {
            sink,
            spec,
            page_size,
            per_page: entries_per_page(page_size, spec.width),
            batch: AlignedBuf::zeroed(page_size * WRITE_BATCH_PAGES),
            batch_pages: 0,
            in_page: 0,
            page_aux: 0,
            written_pages: 0,
            count: 0,
            build_id: 0,
        })
    }

    /// The build id [`finish`](Self::finish) writes into the header.
    pub(crate) fn build_id(&self) -> u64 {
        self.build_id
    }

    /// Sets the build id [`finish`](Self::finish) writes into the header
    /// (0, the default, means none).
    pub(crate) fn set_build_id(&mut self, build_id: u64) {
        self.build_id = build_id;
    }

    /// Entries per page.
    #[cfg(test)]
    pub(crate) fn per_page(&self) -> usize {
        self.per_page
    }

    /// Number of entries pushed.
    pub(crate) fn len(&self) -> u64 {
        self.count
    }

    /// Whether nothing was pushed.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends an entry of exactly `width` bytes. `aux` becomes the page's
    /// aux word if this entry turns out to be the last one on its page.
    pub(crate) fn push(&mut self, entry: &[u8], aux: u64) -> Result<()> {
        if entry.len() != self.spec.width {
            return Err(Error::invalid(format!(
                "entry of {} bytes in a paged array of width {}",
                entry.len(),
                self.spec.width
            )));
        }
        let off = self.batch_pages * self.page_size + PAGE_HEADER_LEN + self.in_page * self.spec.width;
        if let Some(dst) = self.batch.get_mut(off..off + entry.len()) {
            dst.copy_from_slice(entry);
        }
        self.in_page += 1;
        self.count += 1;
        self.page_aux = aux;
        if self.in_page == self.per_page {
            self.seal_page()?;
        }
        Ok(())
    }

    /// Appends whole entries (`entries.len()` a multiple of the width), each
    /// with aux word `aux`: [`push`](Self::push) for many entries at once,
    /// copying page-sized pieces.
    pub(crate) fn push_entries(&mut self, mut entries: &[u8], aux: u64) -> Result<()> {
        let w = self.spec.width;
        if entries.len() % w != 0 {
            return Err(Error::invalid(format!(
                "{} bytes are not whole entries of width {w}",
                entries.len()
            )));
        }
        while !entries.is_empty() {
            let room = (self.per_page - self.in_page) * w;
            let (now, rest) = entries.split_at(room.min(entries.len()));
            let off = self.batch_pages * self.page_size + PAGE_HEADER_LEN + self.in_page * w;
            if let Some(dst) = self.batch.get_mut(off..off + now.len()) {
                dst.copy_from_slice(now);
            }
            let n = now.len() / w;
            self.in_page += n;
            self.count += n as u64;
            self.page_aux = aux;
            if self.in_page == self.per_page {
                self.seal_page()?;
            }
            entries = rest;
        }
        Ok(())
    }

    /// Mutable access to the bytes of the entry being written next (for
    /// writers that fill fields in place): call [`PagedWriter::commit`] after.
    pub(crate) fn next_entry_mut(&mut self) -> &mut [u8] {
        let off = self.batch_pages * self.page_size + PAGE_HEADER_LEN + self.in_page * self.spec.width;
        let w = self.spec.width;
        self.batch.get_mut(off..off + w).unwrap_or_default()
    }

    /// Commits the entry filled through [`PagedWriter::next_entry_mut`].
    pub(crate) fn commit(&mut self, aux: u64) -> Result<()> {
        self.in_page += 1;
        self.count += 1;
        self.page_aux = aux;
        if self.in_page == self.per_page {
            self.seal_page()?;
        }
        Ok(())
    }

    fn seal_page(&mut self) -> Result<()> {
        let start = self.batch_pages * self.page_size;
        let file_page = self.written_pages + self.batch_pages as u64 + 1;
        let count = u16::try_from(self.in_page).map_err(|_| Error::invalid("page entry count overflows"))?;
        if let Some(page) = self.batch.get_mut(start..start + self.page_size) {
            page::seal(
                page,
                file_page,
                PageHeader {
                    kind: self.spec.page_type,
                    flags: 0,
                    count,
                    aux: self.page_aux,
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
        let part = self.batch.get(..bytes).ok_or_else(|| Error::invalid("batch"))?;
        self.sink.append(part)?;
        // Long runs are synced at the end: let the device start on them now.
        self.sink.write_behind()?;
        self.written_pages += self.batch_pages as u64;
        self.batch_pages = 0;
        self.batch.fill(0);
        Ok(())
    }

    /// Writes the last page and the header (with `extra` kind-specific
    /// bytes), finishes the sink (the file is then complete and durable), and
    /// returns the header.
    pub(crate) fn finish(mut self, extra: &[u8]) -> Result<PagedMeta> {
        if extra.len() > MAX_EXTRA || EXTRA_OFFSET + 4 + extra.len() > self.page_size {
            return Err(Error::invalid("paged array header too large"));
        }
        if self.in_page > 0 {
            self.seal_page()?;
        }
        self.flush_batch()?;
        let meta = PagedMeta {
            count: self.count,
            pages: self.written_pages,
            page_size: self.page_size,
            width: self.spec.width,
            per_page: self.per_page,
            extra: extra.to_vec(),
            build_id: self.build_id,
        };
        let mut hdr = AlignedBuf::zeroed(self.page_size);
        let o = PAGE_HEADER_LEN;
        put_u64(&mut hdr, o, self.spec.magic);
        put_u32(&mut hdr, o + 8, self.spec.version);
        put_u32(&mut hdr, o + 12, meta.page_size as u32);
        put_u64(&mut hdr, o + 16, meta.count);
        put_u64(&mut hdr, o + 24, meta.pages);
        put_u32(&mut hdr, o + 32, meta.width as u32);
        put_u32(&mut hdr, o + 36, meta.per_page as u32);
        if let Some(b) = hdr.get_mut(o + 40) {
            *b = self.spec.page_type as u8;
        }
        put_u32(&mut hdr, EXTRA_OFFSET, extra.len() as u32);
        if let Some(dst) = hdr.get_mut(EXTRA_OFFSET + 4..EXTRA_OFFSET + 4 + extra.len()) {
            dst.copy_from_slice(extra);
        }
        page::seal(
            &mut hdr,
            0,
            PageHeader {
                kind: PageType::FileHeader,
                flags: 0,
                count: 0,
                aux: self.build_id,
            },
        );
        self.sink.finish(&hdr)?;
        Ok(meta)
    }
}

/// An open paged array.
#[derive(Debug, Clone)]
pub struct PagedFile {
    storage: Arc<dyn ReadStorage>,
    meta: PagedMeta,
    spec: PagedSpec,
}

impl PagedFile {
    /// Opens a paged array of kind `spec`: checks magic, version, checksum,
    /// width and sizes ([`decode_header`]) and that the file holds every
    /// page the header announces.
    pub fn open(storage: Arc<dyn ReadStorage>, spec: PagedSpec) -> Result<Self> {
        let name = storage.name().to_string();
        let file_len = storage.len()?;
        if file_len < MIN_PAGE_SIZE as u64 {
            return Err(Error::Truncated {
                file: name,
                expected: MIN_PAGE_SIZE as u64,
                found: file_len,
            });
        }
        let mut first = AlignedBuf::zeroed(MIN_PAGE_SIZE);
        storage.read_at(0, &mut first)?;
        let page_size = page::check_file_ident(&first, &name, &spec.ident())?;
        let mut hdr = AlignedBuf::zeroed(page_size);
        storage.read_at(0, &mut hdr)?;
        let meta = decode_header(&hdr, &spec, &name)?;
        let need = meta.file_len().ok_or_else(|| {
            Error::corruption(
                &name,
                0,
                format!(
                    "header says {} pages of {} bytes: the size overflows",
                    meta.pages, meta.page_size
                ),
            )
        })?;
        if file_len < need {
            return Err(Error::Truncated {
                file: name,
                expected: need,
                found: file_len,
            });
        }
        let width = meta.width;
        Ok(PagedFile {
            storage,
            meta,
            spec: PagedSpec { width, ..spec },
        })
    }

    /// The header.
    pub fn meta(&self) -> &PagedMeta {
        &self.meta
    }

    /// The storage.
    pub fn storage(&self) -> &Arc<dyn ReadStorage> {
        &self.storage
    }

    /// Reads data pages `[a, b)` (clipped to the file) in one read call and
    /// verifies each page's checksum, type and entry count.
    pub fn read_pages(&self, a: u64, b: u64) -> Result<PagedRun> {
        let (offset, b, mut buf) = self.range_buf(a, b)?;
        self.storage.read_at(offset, &mut buf)?;
        self.checked_run(a, b, buf)
    }

    /// Reads each page range `[a, b)` of `ranges` (clipped to the file) as
    /// [`PagedFile::read_pages`] does, with up to `queue_depth` reads in
    /// flight ([`ReadStorage::read_many`]): one read call per range.
    pub fn read_pages_many(&self, ranges: &[(u64, u64)], queue_depth: usize) -> Result<Vec<PagedRun>> {
        struct Ranges<'f> {
            file: &'f PagedFile,
            ranges: &'f [(u64, u64)],
            planned: Vec<(u64, u64)>,
            runs: Vec<Option<PagedRun>>,
        }
        impl ReadStream for Ranges<'_> {
            fn next(&mut self) -> Result<Option<StreamRead>> {
                let Some(&(a, b)) = self.ranges.get(self.planned.len()) else {
                    return Ok(None);
                };
                let (b, read) = self.file.range_read(a, b)?;
                self.planned.push((a, b));
                self.runs.push(None);
                Ok(Some(read))
            }
            fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()> {
                let &(a, b) = self
                    .planned
                    .get(seq)
                    .ok_or_else(|| Error::invalid("read out of range"))?;
                let run = self.file.run_from(a, b, buf)?;
                if let Some(slot) = self.runs.get_mut(seq) {
                    *slot = Some(run);
                }
                Ok(())
            }
        }
        let mut stream = Ranges {
            file: self,
            ranges,
            planned: Vec::with_capacity(ranges.len()),
            runs: Vec::with_capacity(ranges.len()),
        };
        self.storage.read_stream(&mut stream, queue_depth)?;
        stream
            .runs
            .into_iter()
            .map(|r| r.ok_or_else(|| Error::invalid("page range not read")))
            .collect()
    }

    /// The read of pages `[a, b)`, with `b` clipped to the file (returned),
    /// for a [`ReadStream`]; [`PagedFile::run_from`] checks what it read.
    pub fn range_read(&self, a: u64, b: u64) -> Result<(u64, StreamRead)> {
        let (offset, b, len) = self.range_span(a, b)?;
        Ok((b, StreamRead { offset, len }))
    }

    /// Verifies the pages `[a, b)` (as clipped by [`PagedFile::range_read`])
    /// read into `buf` and wraps them, as [`PagedFile::read_pages`] does.
    pub fn run_from(&self, a: u64, b: u64, buf: AlignedBuf) -> Result<PagedRun> {
        let (_, _, len) = self.range_span(a, b)?;
        if buf.len() != len {
            return Err(Error::invalid(format!(
                "a read of pages [{a}, {b}) holds {} bytes, expected {len}",
                buf.len()
            )));
        }
        self.checked_run(a, b, buf)
    }

    /// The offset and an uninitialised buffer for pages `[a, b)`, with `b`
    /// clipped to the file.
    fn range_buf(&self, a: u64, b: u64) -> Result<(u64, u64, AlignedBuf)> {
        let (offset, b, bytes) = self.range_span(a, b)?;
        // A read fills all of it or fails: no need to zero it first.
        Ok((offset, b, AlignedBuf::for_overwrite(bytes)))
    }

    /// The offset, clipped end and byte length of pages `[a, b)`.
    fn range_span(&self, a: u64, b: u64) -> Result<(u64, u64, usize)> {
        let b = b.min(self.meta.pages);
        if a >= b {
            return Err(Error::invalid(format!(
                "empty or out-of-range page range [{a}, {b}) of {} ({} pages)",
                self.storage.name(),
                self.meta.pages
            )));
        }
        let ps = self.meta.page_size;
        let name = self.storage.name();
        let too_large = || Error::corruption(name, a + 1, format!("pages [{a}, {b}) do not fit in memory"));
        let n_pages = usize::try_from(b - a).map_err(|_| too_large())?;
        let bytes = n_pages.checked_mul(ps).ok_or_else(too_large)?;
        // Below the file length checked at open: `(a + 1) * ps` fits.
        let offset = paged_file_len(a, ps).ok_or_else(too_large)?;
        Ok((offset, b, bytes))
    }

    /// Verifies the pages `[a, b)` read into `buf` and wraps them.
    fn checked_run(&self, a: u64, b: u64, buf: AlignedBuf) -> Result<PagedRun> {
        let ps = self.meta.page_size;
        for d in a..b {
            let i = (d - a) as usize;
            let pg = buf
                .get(i * ps..(i + 1) * ps)
                .ok_or_else(|| Error::invalid("page slice"))?;
            let h = page::open_typed(pg, d + 1, self.storage.name(), self.spec.page_type)?;
            if h.count as usize != self.meta.entries_on(d) {
                return Err(Error::corruption(
                    self.storage.name(),
                    d + 1,
                    format!(
                        "page holds {} entries, expected {}",
                        h.count,
                        self.meta.entries_on(d)
                    ),
                ));
            }
        }
        Ok(PagedRun {
            buf,
            first_page: a,
            pages: b - a,
            page_size: ps,
            width: self.meta.width,
            per_page: self.meta.per_page as u64,
            count: self.meta.count,
        })
    }

    /// Reads the pages holding entries `[lo, hi)` in one call.
    pub fn read_entries(&self, lo: u64, hi: u64) -> Result<PagedRun> {
        let hi = hi.min(self.meta.count);
        if lo >= hi {
            return Err(Error::invalid(format!("empty entry range [{lo}, {hi})")));
        }
        self.read_pages(self.meta.page_of(lo), self.meta.page_of(hi - 1) + 1)
    }

    /// Reads every page (in large sequential reads) and returns the entries
    /// concatenated and each page's aux word.
    pub fn read_all(&self) -> Result<(Vec<u8>, Vec<u64>)> {
        let m = &self.meta;
        let (bytes, pages) = usize::try_from(m.count)
            .ok()
            .and_then(|c| c.checked_mul(m.width))
            .zip(usize::try_from(m.pages).ok())
            .ok_or_else(|| {
                Error::corruption(
                    self.storage.name(),
                    0,
                    format!(
                        "header says {} entries of {} bytes: more than memory can hold",
                        m.count, m.width
                    ),
                )
            })?;
        let mut flat = Vec::with_capacity(bytes);
        let mut aux = Vec::with_capacity(pages);
        let mut d = 0;
        while d < self.meta.pages {
            let run = self.read_pages(d, d + 256)?;
            for p in 0..run.pages {
                aux.push(run.aux_of_page(run.first_page + p).unwrap_or(0));
            }
            let (lo, hi) = run.entry_range();
            for i in lo..hi {
                flat.extend_from_slice(run.entry(i).unwrap_or_default());
            }
            d += run.pages;
        }
        Ok((flat, aux))
    }

    /// Reads and verifies every page; returns the number of pages.
    pub fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let mut d = 0;
        while d < self.meta.pages {
            let run = self.read_pages(d, d + 256)?;
            d += run.pages;
            progress(run.pages);
        }
        Ok(self.meta.pages + 1)
    }
}

/// Consecutive verified pages of a paged array, held in memory.
#[derive(Debug, Clone)]
pub struct PagedRun {
    buf: AlignedBuf,
    first_page: u64,
    pages: u64,
    page_size: usize,
    width: usize,
    per_page: u64,
    count: u64,
}

impl PagedRun {
    /// First data page of the run.
    pub fn first_page(&self) -> u64 {
        self.first_page
    }

    /// Number of pages.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Entry indexes `[lo, hi)` held by the run.
    pub fn entry_range(&self) -> (u64, u64) {
        let lo = self.first_page * self.per_page;
        let hi = ((self.first_page + self.pages) * self.per_page).min(self.count);
        (lo, hi)
    }

    /// Byte offset of entry `i` in the run's buffer.
    #[inline]
    pub fn offset_of(&self, i: u64) -> Option<usize> {
        let (lo, hi) = self.entry_range();
        if i < lo || i >= hi {
            return None;
        }
        let page = i / self.per_page - self.first_page;
        let slot = i % self.per_page;
        Some(page as usize * self.page_size + PAGE_HEADER_LEN + slot as usize * self.width)
    }

    /// The bytes of entry `i`.
    #[inline]
    pub fn entry(&self, i: u64) -> Option<&[u8]> {
        let off = self.offset_of(i)?;
        self.buf.get(off..off + self.width)
    }

    /// The bytes of entries `[i, i + n)`, contiguous when they lie in one
    /// page (None otherwise, or when the run does not hold them).
    #[inline]
    pub fn entries_in_page(&self, i: u64, n: u64) -> Option<&[u8]> {
        let (_, hi) = self.entry_range();
        if n == 0 || i % self.per_page + n > self.per_page || i.checked_add(n)? > hi {
            return None;
        }
        let off = self.offset_of(i)?;
        self.buf.get(off..off + n as usize * self.width)
    }

    /// The bytes of entries `i..end` and `end`, where `end` is one past the
    /// last entry of `i`'s page in the run (None if the run does not hold
    /// `i`): one division to locate the page, for a search that walks a
    /// page's entries.
    #[inline]
    pub fn entries_to_page_end(&self, i: u64) -> Option<(&[u8], u64)> {
        let (lo, hi) = self.entry_range();
        if i < lo || i >= hi {
            return None;
        }
        let page = i / self.per_page;
        let start = page * self.per_page;
        let end = (start + self.per_page).min(hi);
        let off = (page - self.first_page) as usize * self.page_size
            + PAGE_HEADER_LEN
            + (i - start) as usize * self.width;
        let bytes = self.buf.get(off..off + (end - i) as usize * self.width)?;
        Some((bytes, end))
    }

    /// The `u64` at byte `field` of entry `i`.
    #[inline]
    pub fn u64_at(&self, i: u64, field: usize) -> Option<u64> {
        get_u64(&self.buf, self.offset_of(i)? + field)
    }

    /// The aux word of data page `d` (if the run holds it).
    pub fn aux_of_page(&self, d: u64) -> Option<u64> {
        if d < self.first_page || d >= self.first_page + self.pages {
            return None;
        }
        get_u64(&self.buf, (d - self.first_page) as usize * self.page_size + 8)
    }

    /// Entries per page.
    pub fn per_page(&self) -> u64 {
        self.per_page
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Directory, MemDirectory};

    const SPEC: PagedSpec = PagedSpec {
        magic: u64::from_le_bytes(*b"TESTPAGD"),
        version: 3,
        page_type: PageType::Layer,
        width: 24,
        name: "test paged array",
    };

    #[test]
    fn roundtrip_with_aux_and_extra() {
        let dir = MemDirectory::new();
        let mut w = PagedWriter::create(&dir, "a", SPEC, 4096).unwrap();
        let f = dir.open_read("a").unwrap();
        assert_eq!(w.per_page(), (4096 - 16) / 24);
        for i in 0..1000u64 {
            let mut e = [0u8; 24];
            e[..8].copy_from_slice(&i.to_le_bytes());
            e[16..].copy_from_slice(&(i * 3).to_le_bytes());
            w.push(&e, i + 1).unwrap();
        }
        let meta = w.finish(b"hello").unwrap();
        let p = PagedFile::open(f, SPEC).unwrap();
        assert_eq!(p.meta(), &meta);
        assert_eq!(p.meta().extra, b"hello");
        let run = p.read_entries(100, 400).unwrap();
        for i in 100..400 {
            assert_eq!(run.u64_at(i, 0), Some(i));
            assert_eq!(run.u64_at(i, 16), Some(i * 3));
        }
        // aux of a page = aux given with its last entry = index of the next entry.
        let pp = meta.per_page as u64;
        // Entries of one page are contiguous; a span across pages is not.
        let page_of_100 = run.entries_in_page(pp, pp).unwrap();
        assert_eq!(page_of_100.len(), pp as usize * 24);
        assert_eq!(
            page_of_100,
            (pp..2 * pp)
                .flat_map(|i| run.entry(i).unwrap().to_vec())
                .collect::<Vec<u8>>()
        );
        assert!(run.entries_in_page(pp - 1, 2).is_none());
        let (_, end) = run.entry_range();
        assert!(run.entries_in_page(end, 1).is_none(), "not in the run");
        assert!(run.entries_in_page(end - 1, 2).is_none(), "past the run");
        assert!(run.entries_in_page(pp, 0).is_none());
        assert_eq!(run.aux_of_page(1), Some(2 * pp));
        let (flat, aux) = p.read_all().unwrap();
        assert_eq!(flat.len(), 1000 * 24);
        assert_eq!(aux.len() as u64, meta.pages);
        assert_eq!(*aux.last().unwrap(), 1000);
        assert_eq!(p.verify(&mut |_| {}).unwrap(), meta.pages + 1);
    }

    #[test]
    fn wrong_kind_and_corruption() {
        let dir = MemDirectory::new();
        let mut w = PagedWriter::create(&dir, "a", SPEC, 4096).unwrap();
        let f = dir.open_read("a").unwrap();
        for _ in 0..500 {
            w.push(&[7u8; 24], 0).unwrap();
        }
        w.finish(&[]).unwrap();
        let other = PagedSpec { magic: 1, ..SPEC };
        assert!(matches!(
            PagedFile::open(f.clone(), other).unwrap_err(),
            Error::BadMagic { .. }
        ));
        let newer = PagedSpec { version: 4, ..SPEC };
        assert!(matches!(
            PagedFile::open(f.clone(), newer).unwrap_err(),
            Error::UnsupportedVersion { .. }
        ));
        let wider = PagedSpec { width: 16, ..SPEC };
        assert!(PagedFile::open(f.clone(), wider).unwrap_err().is_corruption());
        dir.file("a").unwrap().corrupt_byte(4096 * 2 + 500);
        let p = PagedFile::open(f, SPEC).unwrap();
        assert!(p.read_pages(0, 1).is_ok());
        assert!(matches!(
            p.read_pages(1, 2).unwrap_err(),
            Error::Corruption { page: 2, .. }
        ));
        assert!(p.read_all().is_err());
        assert!(PagedWriter::create(&dir, "b", PagedSpec { width: 0, ..SPEC }, 4096).is_err());
        // The sink must reserve exactly the header page.
        assert!(PagedWriter::new(dir.create_sink("c", 512).unwrap(), SPEC, 4096).is_err());
    }

    /// Writes a small valid paged array `a` with build id 77 and returns
    /// its directory and header page.
    fn small_file() -> (MemDirectory, Vec<u8>) {
        let dir = MemDirectory::new();
        let mut w = PagedWriter::create(&dir, "a", SPEC, 4096).unwrap();
        w.set_build_id(77);
        for _ in 0..500 {
            w.push(&[7u8; 24], 0).unwrap();
        }
        w.finish(b"x").unwrap();
        let mut hdr = vec![0u8; 4096];
        dir.open_read("a").unwrap().read_at(0, &mut hdr).unwrap();
        (dir, hdr)
    }

    /// Rewrites header fields (u64 at each offset) and reseals page 0, so
    /// that the parser, not the checksum, sees them.
    fn rewrite(hdr: &[u8], fields: &[(usize, u64)]) -> Vec<u8> {
        let mut h = hdr.to_vec();
        for &(off, v) in fields {
            put_u64(&mut h, off, v);
        }
        let ph = page::open(hdr, 0, "a").unwrap();
        page::seal(&mut h, 0, ph);
        h
    }

    #[test]
    fn build_id_is_in_the_header() {
        let (dir, hdr) = small_file();
        let p = PagedFile::open(dir.open_read("a").unwrap(), SPEC).unwrap();
        assert_eq!(p.meta().build_id, 77);
        assert_eq!(decode_header(&hdr, &SPEC, "a").unwrap(), *p.meta());
    }

    /// Issue 16, failure 6: a count whose pages overflow `(pages + 1) *
    /// page_size`, with a recomputed checksum, is corruption (it panicked
    /// in debug builds and wrapped in release).
    #[test]
    fn huge_count_in_a_resealed_header_is_corruption() {
        let (dir, hdr) = small_file();
        let per_page = entries_per_page(4096, 24) as u64;
        for count in [u64::MAX, u64::MAX / 2, 1 << 60] {
            let h = rewrite(
                &hdr,
                &[
                    (PAGE_HEADER_LEN + 16, count),
                    (PAGE_HEADER_LEN + 24, count.div_ceil(per_page)),
                ],
            );
            // The header on its own is consistent...
            let meta = decode_header(&h, &SPEC, "a").unwrap();
            assert_eq!(meta.file_len(), None, "{count}");
            // ... but no file can hold it.
            dir.open("a").unwrap().write_at(0, &h).unwrap();
            let e = PagedFile::open(dir.open_read("a").unwrap(), SPEC).unwrap_err();
            assert!(matches!(e, Error::Corruption { page: 0, .. }), "{count}: {e}");
        }
        // Inconsistent fields are refused before any arithmetic.
        let h = rewrite(&hdr, &[(PAGE_HEADER_LEN + 24, u64::MAX)]);
        assert!(decode_header(&h, &SPEC, "a").unwrap_err().is_corruption());
        // Any bytes: an error or a header, never a panic.
        for len in [0, 16, 100, 4095, 4097] {
            assert!(decode_header(&vec![0xffu8; len], &SPEC, "a").is_err());
        }
    }
}
