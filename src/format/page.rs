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
    /// A FITing-tree segment page (`fiting`).
    FitSegment = 16,
    /// A FITing-tree insert-buffer page (`fiting`).
    FitBuffer = 17,
    /// A FITing-tree directory node above the segments (`fiting`).
    FitDirLeaf = 18,
    /// A FITing-tree directory node above directory nodes (`fiting`).
    FitDirInner = 19,
    /// A record page of a dynamic-PGM run (`dpgm`).
    DpgmLeaf = 24,
    /// A model (segment) page of a dynamic-PGM run (`dpgm`).
    DpgmModel = 25,
    /// A page of the dynamic PGM's insert buffer (`dpgm`).
    DpgmBuffer = 26,
    /// A page of the dynamic PGM's catalog of runs (`dpgm`).
    DpgmCatalog = 27,
    /// A page of LIPP's node space: node bytes, nodes packed back to back
    /// and crossing pages (`lipp`).
    LippNode = 40,
    /// An ALEX data-node page (`alex`): a page of a data node's run.
    AlexData = 32,
    /// An ALEX inner page (`alex`): several inner nodes.
    AlexInner = 33,
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
            16 => PageType::FitSegment,
            17 => PageType::FitBuffer,
            18 => PageType::FitDirLeaf,
            19 => PageType::FitDirInner,
            24 => PageType::DpgmLeaf,
            25 => PageType::DpgmModel,
            26 => PageType::DpgmBuffer,
            27 => PageType::DpgmCatalog,
            40 => PageType::LippNode,
            32 => PageType::AlexData,
            33 => PageType::AlexInner,
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

/// Byte offset, in a file's header page, of the fields that open every
/// header page after the page header: the file kind's magic number (u64),
/// its format version (u32) and the page size (u32).
pub const FILE_IDENT_OFF: usize = PAGE_HEADER_LEN;

/// What kind of file a header page must announce: the fields at
/// [`FILE_IDENT_OFF`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdent {
    /// Magic number (8 ASCII bytes as a little-endian u64).
    pub magic: u64,
    /// The format version accepted.
    pub version: u32,
    /// What the file is, for [`Error::BadMagic`] (e.g. `"strata data run"`).
    pub what: &'static str,
}

/// Checks the identification fields at [`FILE_IDENT_OFF`] of `first` (the
/// start of `file`'s header page, at least [`MIN_PAGE_SIZE`] bytes: every
/// supported page holds them) and returns the page size it announces. The
/// caller then reads the whole header page and calls [`open_file_header`].
///
/// Errors: [`Error::BadMagic`], [`Error::UnsupportedVersion`], and
/// [`Error::Corruption`] for an unsupported page size.
pub fn check_file_ident(first: &[u8], file: &str, id: &FileIdent) -> Result<usize> {
    let magic = get_u64(first, FILE_IDENT_OFF).unwrap_or(0);
    if magic != id.magic {
        return Err(Error::BadMagic {
            file: file.to_string(),
            expected: id.what,
            found: magic,
        });
    }
    let version = get_u32(first, FILE_IDENT_OFF + 8).unwrap_or(0);
    if version != id.version {
        return Err(Error::UnsupportedVersion {
            file: file.to_string(),
            found: version,
            supported: id.version,
        });
    }
    let page_size = get_u32(first, FILE_IDENT_OFF + 12).unwrap_or(0) as usize;
    check_page_size(page_size)
        .map_err(|_| Error::corruption(file, 0, format!("bad page size {page_size}")))?;
    Ok(page_size)
}

/// Checks a whole header page (page 0 of `file`): its identification
/// fields ([`check_file_ident`]), that `hdr` is exactly one page of the
/// size they announce, its checksum and its type. Returns the page size
/// and the page header, whose `aux` word is the build id of the file.
///
/// Errors: as [`check_file_ident`]; [`Error::Corruption`] naming page 0.
pub fn open_file_header(hdr: &[u8], file: &str, id: &FileIdent) -> Result<(usize, PageHeader)> {
    let page_size = check_file_ident(hdr, file, id)?;
    if hdr.len() != page_size {
        return Err(Error::corruption(
            file,
            0,
            format!("header page of {} bytes, its header says {page_size}", hdr.len()),
        ));
    }
    Ok((page_size, open_typed(hdr, 0, file, PageType::FileHeader)?))
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
