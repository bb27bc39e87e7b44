//! On-disk layout of the dynamic-PGM file: the root slot of the checkpoint
//! page, record pages (runs and the insert buffer), model pages and the
//! catalog. Normative description: `docs/format/dpgm.md`; the checkpoint page
//! belongs to [`crate::pager`] (`docs/format/pager.md`).
//!
//! Every page starts with the 16-byte header of [`crate::format::page`]. All
//! integers are little-endian.

use crate::format::bytes::{Cursor as ByteCursor, get_u64, put_u64};
use crate::format::page::{self, PAGE_HEADER_LEN, PageHeader, PageType};
use crate::pager::{Checkpoint, FileId, META_PAGE, PageSpace, RootSlot, SlotReader, SlotWriter};
use crate::{Error, Result};

/// Magic number of a dynamic-PGM file: the bytes `STRATADP` (as a `u64` LE).
pub(crate) const DPGM_MAGIC: u64 = u64::from_le_bytes(*b"STRATADP");
/// Format version of dynamic-PGM files written by this build.
pub(crate) const DPGM_VERSION: u32 = 1;
/// The dynamic PGM's file kind for [`crate::pager`].
pub(crate) const DPGM_FILE_ID: FileId = FileId {
    magic: DPGM_MAGIC,
    version: DPGM_VERSION,
    what: "strata dynamic PGM",
};

/// Pages of the catalog (a fixed extent written at every checkpoint).
pub(crate) const CATALOG_PAGES: u64 = 4;
/// Most model levels a run may have.
pub(crate) const MAX_MODEL_LEVELS: usize = 32;
/// Most levels of runs.
pub(crate) const MAX_LEVELS: u32 = 48;
/// Bytes of one segment on a model page: first key, slope, intercept.
const SEG_BYTES: usize = 24;
/// Bytes of one record on a record page: key, value.
const REC_BYTES: usize = 16;

/// Records per record page: `⌊(page_size − 16) · 8 / 129⌋` (16 bytes and one
/// tombstone bit each): 253 on 4 KiB pages.
pub(crate) const fn leaf_capacity(page_size: usize) -> usize {
    page_size.saturating_sub(PAGE_HEADER_LEN) * 8 / (REC_BYTES * 8 + 1)
}

/// Segments per model page: `⌊(page_size − 16) / 24⌋` (170 on 4 KiB pages).
pub(crate) const fn segs_per_page(page_size: usize) -> usize {
    page_size.saturating_sub(PAGE_HEADER_LEN) / SEG_BYTES
}

/// One record of a run or the buffer: a value, or a tombstone (`dead`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The key.
    pub key: u64,
    /// The value (0 for a tombstone).
    pub value: u64,
    /// Whether this is a tombstone (the key was deleted).
    pub dead: bool,
}

/// One linear model of a PGM level: predicts the position of a key `>= key`
/// as `intercept + slope · (x − key)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Seg {
    /// Smallest key the segment covers.
    pub key: u64,
    /// Positions per key unit.
    pub slope: f64,
    /// Position predicted for `key`.
    pub intercept: f64,
}

impl Seg {
    /// The predicted position of `x`, rounded down and clamped to
    /// `[0, len − 1]` (0 for a non-finite prediction).
    #[inline]
    pub(crate) fn predict(&self, x: u64, len: u64) -> u64 {
        let p = self.intercept + self.slope * x.saturating_sub(self.key) as f64;
        if !p.is_finite() || p <= 0.0 {
            return 0;
        }
        (p as u64).min(len.saturating_sub(1))
    }
}

/// The dynamic PGM's root fields (the pager's root slot, 40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Page size in bytes.
    pub page_size: usize,
    /// Live records (tombstones and shadowed versions not counted).
    pub n: u64,
    /// First page of the catalog (four pages).
    pub catalog: u64,
    /// First page of the insert buffer.
    pub buffer_first: u64,
    /// Error bound of the models over records.
    pub epsilon: u32,
    /// Capacity of the insert buffer in records.
    pub buffer_cap: u32,
    /// Growth factor between level capacities.
    pub ratio: u16,
    /// Error bound of the models over segments (upper model levels).
    pub epsilon_inner: u16,
    /// Entries in the insert buffer.
    pub buffer_count: u32,
    /// Pages in the file (the pager's part; its free list stays empty).
    pub space: PageSpace,
    /// Build id of the index directory build (0: none).
    pub build_id: u64,
}

impl Meta {
    /// Pages of the insert buffer.
    pub(crate) fn buffer_pages(&self) -> u64 {
        (self.buffer_cap as u64).div_ceil(leaf_capacity(self.page_size).max(1) as u64)
    }

    /// Capacity in entries of level `i`: `buffer_cap · ratio^(i+1)`
    /// (saturating).
    pub(crate) fn level_cap(&self, i: u32) -> u64 {
        let mut c = self.buffer_cap as u64;
        for _ in 0..=i {
            c = c.saturating_mul(self.ratio as u64);
        }
        c
    }

    /// Checks the fields against each other and the page space.
    pub fn check(&self, file: &str) -> Result<()> {
        let bad = |what: String| Err(Error::corruption(file, META_PAGE, what));
        check_params(
            self.epsilon as u64,
            self.buffer_cap as u64,
            self.ratio as u64,
            self.epsilon_inner as u64,
        )
        .or_else(|e| bad(e.to_string()))?;
        if self.buffer_count > self.buffer_cap {
            return bad(format!(
                "{} entries in a buffer of {}",
                self.buffer_count, self.buffer_cap
            ));
        }
        let pc = self.space.page_count;
        if self.catalog == META_PAGE || self.catalog.saturating_add(CATALOG_PAGES) > pc {
            return bad(format!("catalog at page {} outside the {pc} pages", self.catalog));
        }
        if self.buffer_first == META_PAGE || self.buffer_first.saturating_add(self.buffer_pages()) > pc {
            return bad(format!(
                "buffer at page {} outside the {pc} pages",
                self.buffer_first
            ));
        }
        if self.space.free_pages != 0 {
            return bad("the pager's free list is not used by dpgm".into());
        }
        Ok(())
    }

    /// The root slot: n (u64), catalog (u64), buffer_first (u64), epsilon
    /// (u32), buffer_cap (u32), ratio (u16), epsilon_inner (u16),
    /// buffer_count (u32).
    pub fn root_slot(&self) -> RootSlot {
        SlotWriter::new()
            .u64(self.n)
            .u64(self.catalog)
            .u64(self.buffer_first)
            .u32(self.epsilon)
            .u32(self.buffer_cap)
            .u16(self.ratio)
            .u16(self.epsilon_inner)
            .u32(self.buffer_count)
            .finish()
    }

    /// The checkpoint holding these fields.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint::of(self.page_size, self.root_slot(), self.space, self.build_id)
    }

    /// The fields a checkpoint holds (not checked).
    pub fn from_checkpoint(cp: &Checkpoint) -> Meta {
        let mut r = SlotReader::new(&cp.root);
        Meta {
            page_size: cp.page_size,
            n: r.u64(),
            catalog: r.u64(),
            buffer_first: r.u64(),
            epsilon: r.u32(),
            buffer_cap: r.u32(),
            ratio: r.u16(),
            epsilon_inner: r.u16(),
            buffer_count: r.u32(),
            space: cp.space,
            build_id: cp.build_id,
        }
    }
}

/// Checks the parameters: `epsilon` in `1..=2^20`, `buffer` in `1..=2^20`,
/// `ratio` in `2..=64`, `epsilon_inner` in `1..=1024`.
pub(crate) fn check_params(epsilon: u64, buffer: u64, ratio: u64, epsilon_inner: u64) -> Result<()> {
    if !(1..=1 << 20).contains(&epsilon) {
        return Err(Error::invalid(format!(
            "epsilon must be from 1 to 1048576, got {epsilon}"
        )));
    }
    if !(1..=1 << 20).contains(&buffer) {
        return Err(Error::invalid(format!(
            "buffer must be from 1 to 1048576 records, got {buffer}"
        )));
    }
    if !(2..=64).contains(&ratio) {
        return Err(Error::invalid(format!("ratio must be from 2 to 64, got {ratio}")));
    }
    if !(1..=1024).contains(&epsilon_inner) {
        return Err(Error::invalid(format!(
            "epsilon_inner must be from 1 to 1024, got {epsilon_inner}"
        )));
    }
    Ok(())
}

/// Byte offset of the tombstone bitmap on a record page.
#[inline]
fn bitmap_off(cap: usize) -> usize {
    PAGE_HEADER_LEN + REC_BYTES * cap
}

/// Writes `entries` (at most [`leaf_capacity`]) as a record page of type
/// `kind` numbered `page_no` into `page` (a whole page) and seals it.
pub(crate) fn encode_records(page: &mut [u8], page_no: u64, kind: PageType, entries: &[Entry]) {
    let cap = leaf_capacity(page.len());
    page.fill(0);
    let bm = bitmap_off(cap);
    for (i, e) in entries.iter().take(cap).enumerate() {
        put_u64(page, PAGE_HEADER_LEN + REC_BYTES * i, e.key);
        put_u64(page, PAGE_HEADER_LEN + REC_BYTES * i + 8, e.value);
        if e.dead {
            if let Some(b) = page.get_mut(bm + i / 8) {
                *b |= 1 << (i % 8);
            }
        }
    }
    page::seal(
        page,
        page_no,
        PageHeader {
            kind,
            flags: 0,
            count: entries.len().min(cap) as u16,
            aux: 0,
        },
    );
}

/// Key of entry `i` of a page of `stride`-byte entries (records or
/// segments: the key comes first in both).
#[inline]
pub(crate) fn key_at(page: &[u8], stride: usize, i: usize) -> Option<u64> {
    get_u64(page, PAGE_HEADER_LEN + stride * i)
}

/// Entry `i` of a verified record page.
#[inline]
pub(crate) fn record_at(page: &[u8], i: usize) -> Option<Entry> {
    let cap = leaf_capacity(page.len());
    if i >= cap {
        return None;
    }
    let off = PAGE_HEADER_LEN + REC_BYTES * i;
    let bit = page.get(bitmap_off(cap) + i / 8)? >> (i % 8) & 1;
    Some(Entry {
        key: get_u64(page, off)?,
        value: get_u64(page, off + 8)?,
        dead: bit == 1,
    })
}

/// Writes `segs` (at most [`segs_per_page`]) as model page `page_no` of
/// model level `level` into `page` and seals it.
pub(crate) fn encode_model(page: &mut [u8], page_no: u64, level: usize, segs: &[Seg]) {
    let cap = segs_per_page(page.len());
    page.fill(0);
    for (i, s) in segs.iter().take(cap).enumerate() {
        let off = PAGE_HEADER_LEN + SEG_BYTES * i;
        put_u64(page, off, s.key);
        put_u64(page, off + 8, s.slope.to_bits());
        put_u64(page, off + 16, s.intercept.to_bits());
    }
    page::seal(
        page,
        page_no,
        PageHeader {
            kind: PageType::DpgmModel,
            flags: 0,
            count: segs.len().min(cap) as u16,
            aux: level as u64,
        },
    );
}

/// Segment `i` of a verified model page.
#[inline]
pub(crate) fn seg_at(page: &[u8], i: usize) -> Option<Seg> {
    let off = PAGE_HEADER_LEN + SEG_BYTES * i;
    Some(Seg {
        key: get_u64(page, off)?,
        slope: f64::from_bits(get_u64(page, off + 8)?),
        intercept: f64::from_bits(get_u64(page, off + 16)?),
    })
}

/// Verifies page `page_no` (checksum, type `kind`) and that it holds
/// exactly `count` entries.
pub(crate) fn open_page(
    page: &[u8],
    page_no: u64,
    file: &str,
    kind: PageType,
    count: usize,
) -> Result<PageHeader> {
    let h = page::open_typed(page, page_no, file, kind)?;
    if h.count as usize != count {
        return Err(Error::corruption(
            file,
            page_no,
            format!("{} entries on a page that should hold {count}", h.count),
        ));
    }
    Ok(h)
}

/// One run as the catalog describes it: its extent, its records and the
/// segments per model level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunDesc {
    /// Level of the run (0 newest).
    pub level: u32,
    /// First page of its extent: record pages, then model pages level by
    /// level (bottom first), each level starting on a fresh page.
    pub start: u64,
    /// Entries (tombstones included).
    pub n: u64,
    /// Smallest and largest key.
    pub min: u64,
    /// Largest key.
    pub max: u64,
    /// Segments per model level, bottom (over records) first; the top level
    /// fits one page.
    pub model: Vec<u64>,
}

impl RunDesc {
    /// Record pages.
    pub(crate) fn leaf_pages(&self, page_size: usize) -> u64 {
        self.n.div_ceil(leaf_capacity(page_size).max(1) as u64)
    }

    /// First page of model level `j` (relative to nothing: absolute).
    pub(crate) fn model_first(&self, page_size: usize, j: usize) -> u64 {
        let spp = segs_per_page(page_size).max(1) as u64;
        self.start
            + self.leaf_pages(page_size)
            + self.model.iter().take(j).map(|&c| c.div_ceil(spp)).sum::<u64>()
    }

    /// Pages of the whole extent.
    pub(crate) fn pages(&self, page_size: usize) -> u64 {
        self.model_first(page_size, self.model.len()) - self.start
    }

    /// Checks the description against the page size and file.
    fn check(&self, page_size: usize, page_count: u64, file: &str) -> Result<()> {
        let bad = |w: String| Err(Error::corruption(file, META_PAGE, format!("catalog: {w}")));
        let spp = segs_per_page(page_size) as u64;
        if self.n == 0 || self.min > self.max || self.level >= MAX_LEVELS {
            return bad(format!(
                "run at page {} with {} entries, keys {}..{}, level {}",
                self.start, self.n, self.min, self.max, self.level
            ));
        }
        if self.model.is_empty() || self.model.len() > MAX_MODEL_LEVELS {
            return bad(format!(
                "run at page {} with {} model levels",
                self.start,
                self.model.len()
            ));
        }
        let mut below = self.n;
        for &c in &self.model {
            if c == 0 || c > below {
                return bad(format!(
                    "run at page {}: model level of {c} segments over {below}",
                    self.start
                ));
            }
            below = c;
        }
        if self.model.last().is_some_and(|&t| t > spp) {
            return bad(format!(
                "run at page {}: top model level exceeds a page",
                self.start
            ));
        }
        if self.start == META_PAGE
            || self
                .start
                .checked_add(self.pages(page_size))
                .is_none_or(|e| e > page_count)
        {
            return bad(format!(
                "run at page {} outside the {page_count} pages",
                self.start
            ));
        }
        Ok(())
    }
}

/// The catalog: runs (newest level first) and free extents `(start, pages)`
/// sorted by start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Catalog {
    /// The runs, by level ascending.
    pub runs: Vec<RunDesc>,
    /// Free extents, sorted by first page, not adjacent.
    pub free: Vec<(u64, u64)>,
}

impl Catalog {
    /// The catalog as bytes: run count (u32), free-extent count (u32), each
    /// run (level u32, model levels u32, start, n, min, max u64, then a u64
    /// per model level), each free extent (start, pages u64).
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(self.runs.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.free.len() as u32).to_le_bytes());
        for r in &self.runs {
            b.extend_from_slice(&r.level.to_le_bytes());
            b.extend_from_slice(&(r.model.len() as u32).to_le_bytes());
            for v in [r.start, r.n, r.min, r.max].iter().chain(r.model.iter()) {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        for &(s, l) in &self.free {
            b.extend_from_slice(&s.to_le_bytes());
            b.extend_from_slice(&l.to_le_bytes());
        }
        b
    }

    /// Bytes the catalog pages hold.
    pub(crate) fn capacity(page_size: usize) -> usize {
        CATALOG_PAGES as usize * page_size.saturating_sub(PAGE_HEADER_LEN)
    }

    /// Encodes the catalog into `pages` ([`CATALOG_PAGES`] whole pages,
    /// numbered from `first`) and seals them. Fails if it does not fit.
    pub(crate) fn encode(&self, pages: &mut [u8], first: u64, page_size: usize, file: &str) -> Result<()> {
        let bytes = self.to_bytes();
        if bytes.len() > Self::capacity(page_size) {
            return Err(Error::Unsupported(format!(
                "dynamic PGM {file}: catalog of {} runs and {} free extents exceeds its {CATALOG_PAGES} pages",
                self.runs.len(),
                self.free.len()
            )));
        }
        let per = page_size - PAGE_HEADER_LEN;
        for (i, page) in pages.chunks_exact_mut(page_size).enumerate() {
            page.fill(0);
            let part = bytes.get(i * per..).unwrap_or(&[]);
            let part = part.get(..per.min(part.len())).unwrap_or(&[]);
            if let Some(d) = page.get_mut(PAGE_HEADER_LEN..PAGE_HEADER_LEN + part.len()) {
                d.copy_from_slice(part);
            }
            page::seal(
                page,
                first + i as u64,
                PageHeader {
                    kind: PageType::DpgmCatalog,
                    flags: 0,
                    count: i as u16,
                    aux: bytes.len() as u64,
                },
            );
        }
        Ok(())
    }

    /// Verifies and decodes the catalog pages (numbered from `first`) and
    /// checks every run and extent against `meta`.
    pub(crate) fn decode(pages: &[u8], first: u64, meta: &Meta, file: &str) -> Result<Catalog> {
        let ps = meta.page_size;
        let per = ps - PAGE_HEADER_LEN;
        let mut bytes = Vec::with_capacity(Self::capacity(ps));
        let mut total = 0u64;
        for (i, page) in pages.chunks_exact(ps).enumerate() {
            let page_no = first + i as u64;
            let h = page::open_typed(page, page_no, file, PageType::DpgmCatalog)?;
            if h.count as usize != i || (i > 0 && h.aux != total) {
                return Err(Error::corruption(file, page_no, "catalog pages out of order"));
            }
            total = h.aux;
            bytes.extend_from_slice(page.get(PAGE_HEADER_LEN..PAGE_HEADER_LEN + per).unwrap_or(&[]));
        }
        let short = || Error::corruption(file, first, "catalog shorter than its counts");
        let body = bytes
            .get(..usize::try_from(total).unwrap_or(usize::MAX))
            .ok_or_else(short)?;
        let mut c = ByteCursor::new(body);
        let runs = c.u32().ok_or_else(short)?;
        let free = c.u32().ok_or_else(short)?;
        let mut cat = Catalog::default();
        for _ in 0..runs {
            let level = c.u32().ok_or_else(short)?;
            let levels = c.u32().ok_or_else(short)? as usize;
            if levels > MAX_MODEL_LEVELS {
                return Err(Error::corruption(
                    file,
                    first,
                    format!("catalog: run with {levels} model levels"),
                ));
            }
            let mut w = [0u64; 4];
            for v in &mut w {
                *v = c.u64().ok_or_else(short)?;
            }
            let mut model = Vec::with_capacity(levels);
            for _ in 0..levels {
                model.push(c.u64().ok_or_else(short)?);
            }
            let [start, n, min, max] = w;
            let r = RunDesc {
                level,
                start,
                n,
                min,
                max,
                model,
            };
            r.check(ps, meta.space.page_count, file)?;
            if cat.runs.last().is_some_and(|p| p.level >= level) {
                return Err(Error::corruption(
                    file,
                    first,
                    "catalog: runs not by increasing level",
                ));
            }
            cat.runs.push(r);
        }
        for _ in 0..free {
            let s = c.u64().ok_or_else(short)?;
            let l = c.u64().ok_or_else(short)?;
            if s == META_PAGE || l == 0 || s.checked_add(l).is_none_or(|e| e > meta.space.page_count) {
                return Err(Error::corruption(
                    file,
                    first,
                    format!("catalog: free extent {s}+{l} outside the file"),
                ));
            }
            if cat.free.last().is_some_and(|&(ps0, pl)| ps0 + pl >= s) {
                return Err(Error::corruption(
                    file,
                    first,
                    "catalog: free extents unsorted or adjacent",
                ));
            }
            cat.free.push((s, l));
        }
        cat.check_accounting(meta, file)?;
        Ok(cat)
    }

    /// Checks that every page is accounted for exactly once: page 0, the
    /// catalog, the buffer, the runs' extents and the free extents.
    pub(crate) fn check_accounting(&self, meta: &Meta, file: &str) -> Result<()> {
        let ps = meta.page_size;
        let mut ext: Vec<(u64, u64)> = vec![
            (META_PAGE, 1),
            (meta.catalog, CATALOG_PAGES),
            (meta.buffer_first, meta.buffer_pages()),
        ];
        ext.extend(self.runs.iter().map(|r| (r.start, r.pages(ps))));
        ext.extend(self.free.iter().copied());
        ext.retain(|e| e.1 > 0);
        ext.sort_unstable();
        let mut next = 0u64;
        for &(s, l) in &ext {
            if s != next {
                return Err(Error::corruption(
                    file,
                    META_PAGE,
                    format!(
                        "pages from {} are {} (overlap or gap in the page accounting)",
                        next.min(s),
                        if s < next { "used twice" } else { "unaccounted for" }
                    ),
                ));
            }
            next = s + l;
        }
        if next != meta.space.page_count {
            return Err(Error::corruption(
                file,
                META_PAGE,
                format!(
                    "{next} pages accounted for, the file has {}",
                    meta.space.page_count
                ),
            ));
        }
        Ok(())
    }
}
