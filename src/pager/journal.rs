//! The pager's rollback journal: before a page that existed at the last
//! checkpoint is first overwritten in place, its checkpoint image is appended
//! to `<file>-journal` and the journal is synced; a checkpoint resets it;
//! recovery on open writes the images back. Normative description:
//! `docs/format/pager.md` ("Rollback journal").
//!
//! Journal header ([`HEADER_LEN`] bytes): magic `STRATAJL`, version (u32),
//! page size (u32), the checkpoint number it protects (u64), the build id of
//! the file (u64), crc32c of the 32 bytes before it (u32), 4 zero bytes.
//! Record ([`record_len`] bytes): page number (u64), the page image, crc32c
//! (u32) of the checkpoint number, build id, page number and image.

use std::collections::HashSet;
use std::sync::Arc;

use super::format::{Checkpoint, FileId, META_PAGE};
use crate::format::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::format::page::check_page_size;
use crate::storage::{AlignedBuf, Directory, IoStats, ReadStorage, Storage};
use crate::{Error, Result};

/// Magic number of a journal file.
const MAGIC: u64 = u64::from_le_bytes(*b"STRATAJL");
/// Journal format version.
const VERSION: u32 = 1;
/// Bytes of the journal header.
pub(super) const HEADER_LEN: usize = 40;

/// The journal's name beside data file `name`.
pub fn journal_name(name: &str) -> String {
    format!("{name}-journal")
}

/// Bytes of one record for `page_size`-byte pages.
pub(super) const fn record_len(page_size: usize) -> usize {
    page_size + 12
}

/// Which checkpoint of which file a journal protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    page_size: usize,
    number: u64,
    build_id: u64,
}

impl Header {
    fn encode(&self, out: &mut [u8]) {
        put_u64(out, 0, MAGIC);
        put_u32(out, 8, VERSION);
        put_u32(out, 12, self.page_size as u32);
        put_u64(out, 16, self.number);
        put_u64(out, 24, self.build_id);
        let crc = crc32c::crc32c(out.get(..32).unwrap_or(&[]));
        put_u32(out, 32, crc);
        put_u32(out, 36, 0);
    }

    /// The header in `b`, or `None` if it is not a valid one.
    fn decode(b: &[u8]) -> Option<Header> {
        let crc = crc32c::crc32c(b.get(..32)?);
        if get_u64(b, 0)? != MAGIC || get_u32(b, 8)? != VERSION || get_u32(b, 32)? != crc {
            return None;
        }
        let page_size = get_u32(b, 12)? as usize;
        check_page_size(page_size).ok()?;
        Some(Header {
            page_size,
            number: get_u64(b, 16)?,
            build_id: get_u64(b, 24)?,
        })
    }

    fn record_crc(&self, page_no: u64, image: &[u8]) -> u32 {
        let mut c = crc32c::crc32c(&self.number.to_le_bytes());
        c = crc32c::crc32c_append(c, &self.build_id.to_le_bytes());
        c = crc32c::crc32c_append(c, &page_no.to_le_bytes());
        crc32c::crc32c_append(c, image)
    }

    /// Appends the record of `image` as page `page_no` to `out`.
    fn push_record(&self, out: &mut Vec<u8>, page_no: u64, image: &[u8]) {
        out.extend_from_slice(&page_no.to_le_bytes());
        out.extend_from_slice(image);
        out.extend_from_slice(&self.record_crc(page_no, image).to_le_bytes());
    }
}

/// What recovery found in the journal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Page images written back (0 if the journal was absent, empty, stale
    /// or not valid).
    pub pages_restored: u64,
    /// A journal was there but protected another checkpoint or build (or
    /// its header failed its check): ignored.
    pub ignored: bool,
}

/// A journal's header and its valid records: page number and image.
type Records = (Header, Vec<(u64, AlignedBuf)>);

/// The valid records of `journal` (up to the first that fails its check: a
/// torn tail) and its header, or `None` if it has no valid header.
fn read_records(journal: &dyn ReadStorage) -> Result<Option<Records>> {
    let len = journal.len()?;
    if len < HEADER_LEN as u64 {
        return Ok(None);
    }
    let mut hb = [0u8; HEADER_LEN];
    journal.read_at(0, &mut hb)?;
    let Some(h) = Header::decode(&hb) else {
        return Ok(None);
    };
    let rec = record_len(h.page_size);
    let mut records = Vec::new();
    let mut seen = HashSet::new();
    let mut off = HEADER_LEN as u64;
    let mut buf = vec![0u8; rec];
    while off.saturating_add(rec as u64) <= len {
        journal.read_at(off, &mut buf)?;
        let page_no = get_u64(&buf, 0).unwrap_or(u64::MAX);
        let image = buf.get(8..8 + h.page_size).unwrap_or(&[]);
        let crc = get_u32(&buf, 8 + h.page_size).unwrap_or(0);
        if crc != h.record_crc(page_no, image) {
            break;
        }
        // The first image of a page is its checkpoint image.
        if seen.insert(page_no) {
            let mut img = AlignedBuf::zeroed(h.page_size);
            img.copy_from_slice(image);
            records.push((page_no, img));
        }
        off += rec as u64;
    }
    Ok(Some((h, records)))
}

/// Rolls data file `raw` back to the checkpoint `journal` protects, if it
/// does: when the journal's header is valid and names the checkpoint number
/// and build id page 0 holds (or page 0 fails its check and the journal
/// holds page 0), writes every valid record's image back, syncs `raw`, then
/// resets the journal (truncate to 0, sync). A journal that protects another
/// checkpoint, or has no valid header, is reset without writing `raw`.
///
/// Errors: the storages' I/O errors.
pub(super) fn recover(raw: &dyn Storage, journal: &dyn Storage, id: &FileId) -> Result<Recovery> {
    let mut out = Recovery::default();
    if journal.len()? == 0 {
        return Ok(out);
    }
    match read_records(journal)? {
        None => out.ignored = true,
        Some((h, records)) => {
            let applies = match Checkpoint::load(raw, id) {
                Ok(cp) => cp.number == h.number && cp.build_id == h.build_id && cp.page_size == h.page_size,
                Err(_) => records.iter().any(|(p, _)| *p == META_PAGE),
            };
            if applies {
                for (page_no, img) in &records {
                    let off = page_no.checked_mul(h.page_size as u64).ok_or_else(|| {
                        Error::corruption(journal.name(), *page_no, "journal record page number overflows")
                    })?;
                    raw.write_at(off, img)?;
                }
                raw.sync()?;
                out.pages_restored = records.len() as u64;
            } else {
                out.ignored = true;
            }
        }
    }
    journal.set_len(0)?;
    journal.sync()?;
    Ok(out)
}

/// Whether `journal` holds records that would roll `raw` back (what a
/// read-only open refuses).
///
/// Errors: the storages' I/O errors.
pub(super) fn pending(raw: &dyn Storage, journal: &dyn ReadStorage, id: &FileId) -> Result<bool> {
    let Some((h, records)) = read_records(journal)? else {
        return Ok(false);
    };
    if records.is_empty() {
        return Ok(false);
    }
    Ok(match Checkpoint::load(raw, id) {
        Ok(cp) => cp.number == h.number && cp.build_id == h.build_id,
        Err(_) => true,
    })
}

/// The journal of one open pager: which pages of the current checkpoint
/// interval it holds.
#[derive(Debug)]
pub(super) struct Journal {
    dir: Arc<dyn Directory>,
    name: String,
    /// The journal file, opened or created at its first use.
    file: Option<Arc<dyn Storage>>,
    /// The data file, unwrapped: reads of checkpoint images bypass the
    /// cache and the counters.
    raw: Arc<dyn Storage>,
    stats: Arc<IoStats>,
    header: Header,
    /// Pages in the file at the checkpoint: only they are journaled.
    pages_at_checkpoint: u64,
    /// Pages journaled since the checkpoint.
    journaled: HashSet<u64>,
    /// Bytes in the journal (0: the interval has not started).
    len: u64,
    /// An I/O error left the journal in an unknown state: no more writes.
    failed: bool,
}

impl Journal {
    /// A journal for data file `raw` (named `name` in `dir`), whose
    /// checkpoint `cp` was just loaded; `file` is the journal if it exists
    /// (recovered, so empty).
    pub(super) fn new(
        dir: Arc<dyn Directory>,
        name: &str,
        file: Option<Arc<dyn Storage>>,
        raw: Arc<dyn Storage>,
        stats: Arc<IoStats>,
        cp: &Checkpoint,
    ) -> Journal {
        Journal {
            dir,
            name: journal_name(name),
            file,
            raw,
            stats,
            header: Header {
                page_size: cp.page_size,
                number: cp.number,
                build_id: cp.build_id,
            },
            pages_at_checkpoint: cp.space.page_count,
            journaled: HashSet::new(),
            len: 0,
            failed: false,
        }
    }

    /// The checkpoint number the journal protects.
    pub(super) fn number(&self) -> u64 {
        self.header.number
    }

    fn check(&self) -> Result<()> {
        if self.failed {
            return Err(Error::Unsupported(format!(
                "rollback journal {} failed earlier; reopen the file",
                self.name
            )));
        }
        Ok(())
    }

    /// Makes sure the checkpoint images of pages `first .. first + count`
    /// (those below the checkpoint's page count and not yet journaled) are
    /// in the journal and durable: one append and one sync for all of them
    /// (none if every page is journaled already). The first append of an
    /// interval also writes the header and page 0's image.
    pub(super) fn protect(&mut self, first: u64, count: u64) -> Result<()> {
        self.check()?;
        let mut pages: Vec<u64> = (first..first.saturating_add(count))
            .filter(|p| *p < self.pages_at_checkpoint && !self.journaled.contains(p))
            .collect();
        if pages.is_empty() {
            return Ok(());
        }
        if self.len == 0 && !self.journaled.contains(&META_PAGE) && !pages.contains(&META_PAGE) {
            pages.insert(0, META_PAGE);
        }
        let r = self.append(&pages);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn append(&mut self, pages: &[u64]) -> Result<()> {
        let ps = self.header.page_size;
        let mut out = Vec::with_capacity(HEADER_LEN + pages.len() * record_len(ps));
        if self.len == 0 {
            out.resize(HEADER_LEN, 0);
            self.header.encode(&mut out);
        }
        let mut img = AlignedBuf::zeroed(ps);
        let file_len = self.raw.len()?;
        for &p in pages {
            // A page allocated but never written has no image to keep.
            if (p + 1) * ps as u64 > file_len {
                continue;
            }
            self.raw.read_at(p * ps as u64, &mut img)?;
            self.header.push_record(&mut out, p, &img);
        }
        let file = match &self.file {
            Some(f) => f.clone(),
            None => {
                let f = self.dir.create(&self.name)?;
                self.dir.sync_dir()?;
                self.file = Some(f.clone());
                f
            }
        };
        file.write_at(self.len, &out)?;
        self.stats.record_journal_write(out.len() as u64);
        file.sync()?;
        self.stats.record_journal_sync();
        self.len += out.len() as u64;
        self.journaled.extend(pages.iter().copied());
        Ok(())
    }

    /// After checkpoint `number` with `page_count` pages is durable: empties
    /// the journal (truncate, sync) and starts a new interval.
    pub(super) fn reset(&mut self, number: u64, page_count: u64) -> Result<()> {
        self.check()?;
        if let Some(f) = &self.file {
            if self.len > 0 {
                let r = f.set_len(0).and_then(|()| f.sync());
                if r.is_err() {
                    self.failed = true;
                    return r;
                }
                self.stats.record_journal_sync();
            }
        }
        self.header.number = number;
        self.pages_at_checkpoint = page_count;
        self.journaled.clear();
        self.len = 0;
        Ok(())
    }

    /// Marks the journal failed (an I/O error in the checkpoint it was part of).
    pub(super) fn fail(&mut self) {
        self.failed = true;
    }
}
