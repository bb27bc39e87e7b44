//! On-disk layout of the `fiting` file: the root slot, segment pages, insert
//! buffer pages and segment-directory nodes. Normative description:
//! `docs/format/fiting.md`; the checkpoint page and free pages belong to
//! [`crate::pager`] (`docs/format/pager.md`).
//!
//! Every page starts with the 16-byte header of [`crate::format::page`]
//! (crc32c seeded with the page number, type, count, aux). All integers are
//! little-endian; `f64`s are stored as their IEEE-754 bits.

use crate::format::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::format::page::{self, PAGE_HEADER_LEN, PageHeader, PageType};
use crate::pager::{Checkpoint, FileId, NO_PAGE, PageSpace, RootSlot, SlotReader, SlotWriter};
use crate::{Error, Result};

/// Magic number of a `fiting` file: the bytes `STRATAFT` (read as a `u64` LE).
pub(crate) const FITING_MAGIC: u64 = u64::from_le_bytes(*b"STRATAFT");
/// Format version of `fiting` files written by this build.
pub(crate) const FITING_VERSION: u32 = 1;
/// The `fiting` file kind for [`crate::pager`].
pub(crate) const FITING_FILE_ID: FileId = FileId {
    magic: FITING_MAGIC,
    version: FITING_VERSION,
    what: "strata FITing-tree",
};

/// Bytes of the segment-info area after the header of every segment page.
const SEG_INFO_LEN: usize = 48;
/// Byte offset of the key array of a segment page.
const SEG_KEYS_OFF: usize = PAGE_HEADER_LEN + SEG_INFO_LEN;
/// Bytes of one directory entry.
const ENTRY_LEN: usize = 56;

/// Records per segment page: `(page_size - 64) / 16` (252 on 4 KiB pages).
pub(crate) const fn seg_capacity(page_size: usize) -> usize {
    page_size.saturating_sub(SEG_KEYS_OFF) / 16
}

/// Records per insert-buffer page: `(page_size - 16) / 16` (255 on 4 KiB).
pub(crate) const fn buf_capacity(page_size: usize) -> usize {
    page_size.saturating_sub(PAGE_HEADER_LEN) / 16
}

/// Entries per directory node: `(page_size - 16) / 56` (72 on 4 KiB).
pub(crate) const fn dir_capacity(page_size: usize) -> usize {
    page_size.saturating_sub(PAGE_HEADER_LEN) / ENTRY_LEN
}

/// Pages of one insert buffer of `buffer` records.
pub(crate) fn buffer_pages(page_size: usize, buffer: usize) -> usize {
    buffer.div_ceil(buf_capacity(page_size).max(1)).max(1)
}

/// The root slot of the checkpoint page plus the pager's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Page size in bytes.
    pub page_size: usize,
    /// Page number of the directory root.
    pub root: u64,
    /// Number of live records.
    pub n: u64,
    /// Number of segments.
    pub segments: u64,
    /// Error bound of the segments.
    pub epsilon: u32,
    /// Insert-buffer capacity per segment, in records.
    pub buffer: u32,
    /// Directory levels (1: the root holds the segment entries).
    pub height: u32,
    /// Directory nodes.
    pub dir_nodes: u32,
    /// Pages in the file and the free list (the pager's part).
    pub space: PageSpace,
    /// Build id of the index directory build that loaded the file.
    pub build_id: u64,
}

impl Meta {
    /// Checks the fields against each other and the file's page count.
    pub fn check(&self, file: &str) -> Result<()> {
        let bad = |what: String| Err(Error::corruption(file, crate::pager::META_PAGE, what));
        if self.height == 0 || self.height > 64 {
            return bad(format!("directory height {} out of range", self.height));
        }
        if self.root == NO_PAGE || self.root >= self.space.page_count {
            return bad(format!(
                "directory root {} outside the {} pages",
                self.root, self.space.page_count
            ));
        }
        if self.buffer == 0 || self.segments == 0 || u64::from(self.dir_nodes) < u64::from(self.height) {
            return bad(format!(
                "buffer {}, {} segments, {} directory nodes for height {}",
                self.buffer, self.segments, self.dir_nodes, self.height
            ));
        }
        if self.segments.saturating_add(u64::from(self.dir_nodes)) >= self.space.page_count {
            return bad(format!(
                "{} segments and {} directory nodes do not fit {} pages",
                self.segments, self.dir_nodes, self.space.page_count
            ));
        }
        Ok(())
    }

    /// The root slot: root, n, segments (u64 each), epsilon, buffer, height,
    /// directory nodes (u32 each).
    pub fn root_slot(&self) -> RootSlot {
        SlotWriter::new()
            .u64(self.root)
            .u64(self.n)
            .u64(self.segments)
            .u32(self.epsilon)
            .u32(self.buffer)
            .u32(self.height)
            .u32(self.dir_nodes)
            .finish()
    }

    /// The checkpoint this state is written as.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint::of(self.page_size, self.root_slot(), self.space, self.build_id)
    }

    /// The state a checkpoint holds (not checked).
    pub fn from_checkpoint(cp: &Checkpoint) -> Meta {
        let mut r = SlotReader::new(&cp.root);
        Meta {
            page_size: cp.page_size,
            root: r.u64(),
            n: r.u64(),
            segments: r.u64(),
            epsilon: r.u32(),
            buffer: r.u32(),
            height: r.u32(),
            dir_nodes: r.u32(),
            space: cp.space,
            build_id: cp.build_id,
        }
    }
}

/// One directory entry. In a directory leaf (`PageType::FitDirLeaf`) it
/// describes a segment: its routing key, head page, model and buffer; in an
/// inner node (`PageType::FitDirInner`) only `key` and `page` (a child) are
/// used and the rest is zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Entry {
    /// Smallest key routed here (entry 0 of a node also takes smaller keys).
    pub key: u64,
    /// Segment head page, or child node.
    pub page: u64,
    /// Key the model is anchored at (the segment's first key when fitted).
    pub first_key: u64,
    /// Positions per key unit.
    pub slope: f64,
    /// Predicted position of `first_key`.
    pub intercept: f64,
    /// Data pages of the segment (contiguous from `page`).
    pub data_pages: u32,
    /// First page of the segment's insert buffer ([`NO_PAGE`]: none yet).
    pub buffer: u64,
}

impl Entry {
    /// An inner-node entry for child `page`.
    pub(crate) fn child(key: u64, page: u64) -> Entry {
        Entry {
            key,
            page,
            first_key: 0,
            slope: 0.0,
            intercept: 0.0,
            data_pages: 0,
            buffer: NO_PAGE,
        }
    }

    /// Predicted position of `key` in the segment (keys below `first_key`
    /// are predicted at `first_key`).
    #[inline]
    pub(crate) fn predict(&self, key: u64) -> f64 {
        self.intercept + self.slope * key.saturating_sub(self.first_key) as f64
    }

    /// The segment pages `[first, last]` holding positions
    /// `[pred - eps - 1, pred + eps + 1]` (one more on each side for the
    /// rounding of the `f64` prediction), clamped to the segment.
    pub(crate) fn window(&self, key: u64, eps: u64, cap: usize) -> (u64, u64) {
        let pred = self.predict(key);
        let last_pos = (u64::from(self.data_pages.max(1)) * cap as u64).saturating_sub(1);
        let clamp = |p: f64| -> u64 {
            if p.is_nan() || p <= 0.0 {
                0
            } else if p >= last_pos as f64 {
                last_pos
            } else {
                p as u64
            }
        };
        let lo = clamp(pred.floor() - eps as f64 - 1.0);
        let hi = clamp(pred.ceil() + eps as f64 + 1.0);
        let cap = cap.max(1) as u64;
        (lo / cap, hi / cap)
    }
}

/// A decoded directory node.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct DirNode {
    /// Whether the entries are segments (else children).
    pub leaf: bool,
    /// Entries by increasing key.
    pub entries: Vec<Entry>,
}

impl DirNode {
    /// Index of the entry routing `key`: the last with `entry.key <= key`,
    /// or 0.
    #[inline]
    pub(crate) fn route(&self, key: u64) -> usize {
        self.entries.partition_point(|e| e.key <= key).saturating_sub(1)
    }

    /// Encodes the node as page `page_no` into `page` (a whole page) and
    /// seals it.
    pub(crate) fn encode(&self, page: &mut [u8], page_no: u64) -> Result<()> {
        let cap = dir_capacity(page.len());
        if self.entries.len() > cap || self.entries.is_empty() {
            return Err(Error::invalid(format!(
                "directory node of {} entries for a page of {cap}",
                self.entries.len()
            )));
        }
        page.fill(0);
        for (i, e) in self.entries.iter().enumerate() {
            let o = PAGE_HEADER_LEN + ENTRY_LEN * i;
            put_u64(page, o, e.key);
            put_u64(page, o + 8, e.page);
            put_u64(page, o + 16, e.first_key);
            put_u64(page, o + 24, e.slope.to_bits());
            put_u64(page, o + 32, e.intercept.to_bits());
            put_u32(page, o + 40, e.data_pages);
            put_u64(page, o + 48, e.buffer);
        }
        let kind = if self.leaf {
            PageType::FitDirLeaf
        } else {
            PageType::FitDirInner
        };
        seal(page, page_no, kind, self.entries.len(), 0);
        Ok(())
    }

    /// Verifies and decodes page `page_no` of `file`: checksum, a directory
    /// type, `1..=capacity` entries with strictly increasing keys, segment
    /// entries with at least one data page and a finite model.
    pub(crate) fn decode(page: &[u8], page_no: u64, file: &str) -> Result<DirNode> {
        let h = page::open(page, page_no, file)?;
        let leaf = match h.kind {
            PageType::FitDirLeaf => true,
            PageType::FitDirInner => false,
            other => {
                return Err(Error::corruption(
                    file,
                    page_no,
                    format!("expected a FITing-tree directory node, found {other:?}"),
                ));
            }
        };
        let count = h.count as usize;
        if count == 0 || count > dir_capacity(page.len()) {
            return Err(Error::corruption(
                file,
                page_no,
                format!("{count} entries in a directory node"),
            ));
        }
        let bad = |what: &str| Error::corruption(file, page_no, what.to_string());
        let mut entries = Vec::with_capacity(count);
        for i in 0..count {
            let o = PAGE_HEADER_LEN + ENTRY_LEN * i;
            let word = |d: usize| get_u64(page, o + d).ok_or_else(|| bad("entry outside the page"));
            let e = Entry {
                key: word(0)?,
                page: word(8)?,
                first_key: word(16)?,
                slope: f64::from_bits(word(24)?),
                intercept: f64::from_bits(word(32)?),
                data_pages: get_u32(page, o + 40).ok_or_else(|| bad("entry outside the page"))?,
                buffer: word(48)?,
            };
            if e.page == NO_PAGE {
                return Err(bad("directory entry without a page"));
            }
            if leaf && (e.data_pages == 0 || !e.slope.is_finite() || !e.intercept.is_finite()) {
                return Err(bad("segment entry without data pages or with a non-finite model"));
            }
            if entries.last().is_some_and(|p: &Entry| p.key >= e.key) {
                return Err(bad("directory keys not increasing"));
            }
            entries.push(e);
        }
        Ok(DirNode { leaf, entries })
    }
}

/// The segment fields of a segment's head page (bytes 16..64).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SegInfo {
    /// Key the model is anchored at.
    pub first_key: u64,
    /// Model slope.
    pub slope: f64,
    /// Model intercept.
    pub intercept: f64,
    /// Data pages of the segment.
    pub data_pages: u32,
    /// Insert buffer's first page ([`NO_PAGE`]: none).
    pub buffer: u64,
    /// Next segment's head page ([`NO_PAGE`] for the last segment).
    pub next: u64,
}

impl SegInfo {
    /// The fields of a directory entry and a sibling link.
    pub(crate) fn of(e: &Entry, next: u64) -> SegInfo {
        SegInfo {
            first_key: e.first_key,
            slope: e.slope,
            intercept: e.intercept,
            data_pages: e.data_pages,
            buffer: e.buffer,
            next,
        }
    }

    /// Whether `e` describes the same segment model, size and buffer.
    pub(crate) fn matches(&self, e: &Entry) -> bool {
        self.first_key == e.first_key
            && self.slope.to_bits() == e.slope.to_bits()
            && self.intercept.to_bits() == e.intercept.to_bits()
            && self.data_pages == e.data_pages
            && self.buffer == e.buffer
    }
}

/// A verified segment page, read in place.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegPage<'a> {
    page: &'a [u8],
    count: usize,
    /// The sibling link (`aux`; head pages only, else [`NO_PAGE`]).
    pub next: u64,
    /// Position of this page in its segment.
    pub index: u32,
}

impl<'a> SegPage<'a> {
    /// Verifies `page` as page `page_no` of `file`: checksum, type, count.
    pub(crate) fn open(page: &'a [u8], page_no: u64, file: &str) -> Result<Self> {
        let h = page::open_typed(page, page_no, file, PageType::FitSegment)?;
        let count = h.count as usize;
        if count > seg_capacity(page.len()) {
            return Err(Error::corruption(
                file,
                page_no,
                format!("{count} records on a segment page"),
            ));
        }
        Ok(SegPage {
            page,
            count,
            next: h.aux,
            index: get_u32(page, PAGE_HEADER_LEN + 28).unwrap_or(u32::MAX),
        })
    }

    /// Records on the page.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The segment fields (meaningful on the head page, index 0).
    pub(crate) fn info(&self) -> SegInfo {
        let w = |o: usize| get_u64(self.page, PAGE_HEADER_LEN + o).unwrap_or(0);
        SegInfo {
            first_key: w(0),
            slope: f64::from_bits(w(8)),
            intercept: f64::from_bits(w(16)),
            data_pages: get_u32(self.page, PAGE_HEADER_LEN + 24).unwrap_or(0),
            buffer: w(32),
            next: self.next,
        }
    }

    /// Key at slot `i`.
    #[inline]
    pub(crate) fn key(&self, i: usize) -> Option<u64> {
        if i >= self.count {
            return None;
        }
        get_u64(self.page, SEG_KEYS_OFF + 8 * i)
    }

    /// Record at slot `i`.
    #[inline]
    pub(crate) fn record(&self, i: usize) -> Option<(u64, u64)> {
        let cap = seg_capacity(self.page.len());
        Some((self.key(i)?, get_u64(self.page, SEG_KEYS_OFF + 8 * (cap + i))?))
    }

    /// Slot of the first key `>= key` (`count` if none).
    pub(crate) fn lower_bound(&self, key: u64) -> usize {
        let (mut lo, mut hi) = (0usize, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.key(mid).is_some_and(|k| k < key) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// All records on the page.
    pub(crate) fn records(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.count).filter_map(|i| self.record(i))
    }
}

/// Writes segment page `index` of a segment (records sorted, at most
/// [`seg_capacity`]) as page `page_no`: `info`, and with it the sibling link
/// `info.next`, is written on the head page (index 0) only.
pub(crate) fn encode_seg_page(
    page: &mut [u8],
    page_no: u64,
    index: u32,
    info: &SegInfo,
    records: &[(u64, u64)],
) -> Result<()> {
    let cap = seg_capacity(page.len());
    if records.len() > cap {
        return Err(Error::invalid(format!(
            "{} records do not fit a segment page of {cap}",
            records.len()
        )));
    }
    page.fill(0);
    if index == 0 {
        put_u64(page, PAGE_HEADER_LEN, info.first_key);
        put_u64(page, PAGE_HEADER_LEN + 8, info.slope.to_bits());
        put_u64(page, PAGE_HEADER_LEN + 16, info.intercept.to_bits());
        put_u32(page, PAGE_HEADER_LEN + 24, info.data_pages);
        put_u64(page, PAGE_HEADER_LEN + 32, info.buffer);
    }
    put_u32(page, PAGE_HEADER_LEN + 28, index);
    for (i, &(k, v)) in records.iter().enumerate() {
        put_u64(page, SEG_KEYS_OFF + 8 * i, k);
        put_u64(page, SEG_KEYS_OFF + 8 * (cap + i), v);
    }
    let next = if index == 0 { info.next } else { NO_PAGE };
    seal(page, page_no, PageType::FitSegment, records.len(), next);
    Ok(())
}

/// Rewrites the head-page fields of a verified segment head page in place
/// (buffer and sibling link) and reseals it.
pub(crate) fn patch_seg_head(page: &mut [u8], page_no: u64, count: usize, buffer: u64, next: u64) {
    put_u64(page, PAGE_HEADER_LEN + 32, buffer);
    seal(page, page_no, PageType::FitSegment, count, next);
}

/// Removes slot `i` of a segment page holding `count` records (shifting the
/// rest left) and reseals it with `next` as `page_no`.
pub(crate) fn seg_remove(page: &mut [u8], page_no: u64, count: usize, i: usize, next: u64) -> Result<()> {
    let cap = seg_capacity(page.len());
    if i >= count || count > cap {
        return Err(Error::invalid("segment remove out of range"));
    }
    for base in [SEG_KEYS_OFF, SEG_KEYS_OFF + 8 * cap] {
        page.copy_within(base + 8 * (i + 1)..base + 8 * count, base + 8 * i);
        put_u64(page, base + 8 * (count - 1), 0);
    }
    seal(page, page_no, PageType::FitSegment, count - 1, next);
    Ok(())
}

/// Sets the value of slot `i` of a segment page and reseals it.
pub(crate) fn seg_set_value(page: &mut [u8], page_no: u64, count: usize, i: usize, value: u64, next: u64) {
    let cap = seg_capacity(page.len());
    put_u64(page, SEG_KEYS_OFF + 8 * (cap + i), value);
    seal(page, page_no, PageType::FitSegment, count, next);
}

fn seal(page: &mut [u8], page_no: u64, kind: PageType, count: usize, aux: u64) {
    page::seal(
        page,
        page_no,
        PageHeader {
            kind,
            flags: 0,
            count: count as u16,
            aux,
        },
    );
}

/// Encodes an insert buffer (sorted records) into `pages` (a whole number
/// of `ps`-byte pages, the buffer's run starting at page `first`), owned by
/// segment `head`: records fill the pages in order.
pub(crate) fn encode_buffer(
    pages: &mut [u8],
    ps: usize,
    first: u64,
    head: u64,
    records: &[(u64, u64)],
) -> Result<()> {
    let cap = buf_capacity(ps);
    let n_pages = pages.len() / ps.max(1);
    if records.len() > cap * n_pages {
        return Err(Error::invalid("insert buffer overflows its pages"));
    }
    for (j, page) in pages.chunks_exact_mut(ps.max(1)).enumerate() {
        page.fill(0);
        let part = records.get(j * cap..).unwrap_or(&[]);
        let part = part.get(..cap.min(part.len())).unwrap_or(&[]);
        for (i, &(k, v)) in part.iter().enumerate() {
            put_u64(page, PAGE_HEADER_LEN + 8 * i, k);
            put_u64(page, PAGE_HEADER_LEN + 8 * (cap + i), v);
        }
        seal(page, first + j as u64, PageType::FitBuffer, part.len(), head);
    }
    Ok(())
}

/// Verifies and decodes an insert buffer run read into `pages` (pages of
/// `ps` bytes starting at page `first`, owned by segment `head`): checksum,
/// type, owner, counts, keys strictly increasing, pages filled in order.
pub(crate) fn decode_buffer(
    pages: &[u8],
    ps: usize,
    first: u64,
    head: u64,
    file: &str,
) -> Result<Vec<(u64, u64)>> {
    let cap = buf_capacity(ps);
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut short = false;
    for (j, page) in pages.chunks_exact(ps.max(1)).enumerate() {
        let page_no = first + j as u64;
        let h = page::open_typed(page, page_no, file, PageType::FitBuffer)?;
        let count = h.count as usize;
        let bad = |what: &str| Error::corruption(file, page_no, what.to_string());
        if h.aux != head {
            return Err(bad("insert buffer page of another segment"));
        }
        if count > cap || (short && count > 0) {
            return Err(bad("insert buffer page count out of place"));
        }
        short = count < cap;
        for i in 0..count {
            let k = get_u64(page, PAGE_HEADER_LEN + 8 * i).ok_or_else(|| bad("short page"))?;
            let v = get_u64(page, PAGE_HEADER_LEN + 8 * (cap + i)).ok_or_else(|| bad("short page"))?;
            if out.last().is_some_and(|&(p, _)| p >= k) {
                return Err(bad("insert buffer keys not increasing"));
            }
            out.push((k, v));
        }
    }
    Ok(out)
}
