//! The 16-byte page header and its checksum.
//!
//! ```text
//! offset size field
//!      0    4 crc32c of (page number as u64 LE) ++ bytes[4 .. page_size]
//!      4    1 page type (PageType)
//!      5    1 flags (0; reserved)
//!      6    2 record count (u16 LE)
//!      8    8 aux: type-specific (u64 LE)
//!     16    . payload
//! ```
//! Seeding the checksum with the page number catches misdirected reads and
//! writes (a valid page at the wrong place fails its check).

use super::bytes::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use crate::{Error, Result};

/// Size of the page header in bytes.
pub const PAGE_HEADER_LEN: usize = 16;

/// Smallest and largest supported page sizes.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Largest supported page size (the record count is a u16).
pub const MAX_PAGE_SIZE: usize = 65536;

/// What a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageType {
    /// A file header page (page 0 of a paged file).
    FileHeader = 1,
    /// Sorted `(u64, u64)` records of a data run.
    Data = 2,
    /// A B+-tree leaf.
    BTreeLeaf = 3,
    /// A B+-tree inner node.
    BTreeInner = 4,
    /// A page of a serialized index layer.
    Layer = 5,
    /// A freed page (B+-tree free list).
    Free = 6,
}

impl PageType {
    /// Decodes a page-type byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => PageType::FileHeader,
            2 => PageType::Data,
            3 => PageType::BTreeLeaf,
            4 => PageType::BTreeInner,
            5 => PageType::Layer,
            6 => PageType::Free,
            _ => return None,
        })
    }
}

/// The decoded header of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// Page type.
    pub kind: PageType,
    /// Flags byte (0 in version 1).
    pub flags: u8,
    /// Number of records on the page.
    pub count: u16,
    /// Type-specific word (next-leaf link of B+-tree leaves, ...).
    pub aux: u64,
}

/// Checks that `page_size` is a supported page size: a power of two between
/// 4 KiB and 64 KiB.
pub fn check_page_size(page_size: usize) -> Result<()> {
    if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(Error::invalid(format!(
            "page size must be a power of two from 4096 to 65536 bytes, got {page_size}"
        )));
    }
    Ok(())
}

fn checksum(page_no: u64, page: &[u8]) -> u32 {
    let seed = crc32c::crc32c(&page_no.to_le_bytes());
    crc32c::crc32c_append(seed, page.get(4..).unwrap_or(&[]))
}

/// Writes the header into `page` and seals it with its checksum. `page` is a
/// whole page whose payload has been filled in already.
pub fn seal(page: &mut [u8], page_no: u64, header: PageHeader) {
    if page.len() < PAGE_HEADER_LEN {
        return;
    }
    put_u16(page, 6, header.count);
    if let Some(b) = page.get_mut(4) {
        *b = header.kind as u8;
    }
    if let Some(b) = page.get_mut(5) {
        *b = header.flags;
    }
    put_u64(page, 8, header.aux);
    let crc = checksum(page_no, page);
    put_u32(page, 0, crc);
}

/// Verifies the checksum of `page` (page number `page_no` of `file`) and
/// decodes its header. A mismatch is [`Error::Corruption`].
pub fn open(page: &[u8], page_no: u64, file: &str) -> Result<PageHeader> {
    let stored =
        get_u32(page, 0).ok_or_else(|| Error::corruption(file, page_no, "page shorter than its header"))?;
    let actual = checksum(page_no, page);
    if stored != actual {
        return Err(Error::corruption(
            file,
            page_no,
            format!("checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"),
        ));
    }
    let kind_byte = page.get(4).copied().unwrap_or(0);
    let kind = PageType::from_u8(kind_byte)
        .ok_or_else(|| Error::corruption(file, page_no, format!("unknown page type {kind_byte}")))?;
    Ok(PageHeader {
        kind,
        flags: page.get(5).copied().unwrap_or(0),
        count: get_u16(page, 6).unwrap_or(0),
        aux: get_u64(page, 8).unwrap_or(0),
    })
}

/// Like [`open`], and also checks the page type.
pub fn open_typed(page: &[u8], page_no: u64, file: &str, expect: PageType) -> Result<PageHeader> {
    let h = open(page, page_no, file)?;
    if h.kind != expect {
        return Err(Error::corruption(
            file,
            page_no,
            format!("expected a {expect:?} page, found {:?}", h.kind),
        ));
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_roundtrip_and_detects_flips() {
        let mut page = vec![0u8; 4096];
        page[100] = 42;
        let h = PageHeader {
            kind: PageType::Data,
            flags: 0,
            count: 255,
            aux: 7,
        };
        seal(&mut page, 3, h);
        assert_eq!(open(&page, 3, "f").unwrap(), h);
        // Wrong page number (misdirected read).
        assert!(open(&page, 4, "f").unwrap_err().is_corruption());
        // Any flipped byte is caught.
        for pos in [0, 4, 6, 8, 16, 100, 4095] {
            let mut p = page.clone();
            p[pos] ^= 1;
            assert!(open(&p, 3, "f").unwrap_err().is_corruption(), "flip at {pos}");
        }
        assert!(open_typed(&page, 3, "f", PageType::BTreeLeaf).is_err());
    }

    #[test]
    fn page_sizes() {
        assert!(check_page_size(4096).is_ok());
        assert!(check_page_size(16384).is_ok());
        assert!(check_page_size(512).is_err());
        assert!(check_page_size(5000).is_err());
    }
}
