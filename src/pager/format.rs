//! The pager's pages: the checkpoint (meta) page, page 0, and free pages.
//! Normative description: `docs/format/pager.md`.
//!
//! Both start with the 16-byte header of [`crate::format::page`]. The
//! checkpoint page holds, after the header: the owning structure's magic,
//! format version and the page size (bytes 16..32), the owner's root slot
//! (bytes 32..72), the page space (bytes 72..96: pages in the file, free-list
//! head, free-list length), the checkpoint number (bytes 96..104), zeros to
//! the end of the page. All integers are
//! little-endian.

use crate::format::bytes::{get_u64, put_u32, put_u64};
use crate::format::page::{self, MIN_PAGE_SIZE, PAGE_HEADER_LEN, PageHeader, PageType};
use crate::storage::{AlignedBuf, Storage};
use crate::{Error, Result};

/// The checkpoint page is page 0; page number 0 is therefore never handed
/// out and serves as the null link (no next page, empty free list).
pub const META_PAGE: u64 = 0;
/// The null page link.
pub const NO_PAGE: u64 = 0;
/// Bytes of the owner's root slot in the checkpoint page.
pub const ROOT_SLOT_LEN: usize = 40;
/// The owning structure's root fields, as bytes (encoded by the owner).
pub type RootSlot = [u8; ROOT_SLOT_LEN];

/// Byte offset of the magic number in the checkpoint page.
const MAGIC_OFF: usize = PAGE_HEADER_LEN;
/// Byte offset of the root slot.
const SLOT_OFF: usize = PAGE_HEADER_LEN + 16;
/// Byte offset of the page space (`page_count`, `free_head`, `free_pages`).
const SPACE_OFF: usize = SLOT_OFF + ROOT_SLOT_LEN;
/// Byte offset of the checkpoint number (bytes 96..104; zero in files
/// written before the rollback journal, which read as checkpoint 0).
const NUMBER_OFF: usize = SPACE_OFF + 24;

/// What kind of file a pager runs: the owner's magic number, format version
/// and a name for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// Magic number, stored at byte 16 of page 0.
    pub magic: u64,
    /// Format version written and accepted, stored at byte 24 of page 0.
    pub version: u32,
    /// What the file is, for [`Error::BadMagic`] (e.g. `"strata B+-tree"`).
    pub what: &'static str,
}

impl FileId {
    /// The identification fields its checkpoint page carries.
    pub fn ident(&self) -> page::FileIdent {
        page::FileIdent {
            magic: self.magic,
            version: self.version,
            what: self.what,
        }
    }
}

/// Which pages of the file are in use: the pager's allocation state.
///
/// Invariant kept by [`super::Pager`]: pages `1..page_count` are either in
/// use by the owner or on the free list, which starts at `free_head` and
/// holds `free_pages` pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSpace {
    /// Pages allocated in the file, the checkpoint page included: the next
    /// page number to append.
    pub page_count: u64,
    /// First page of the free list ([`NO_PAGE`] if empty).
    pub free_head: u64,
    /// Pages on the free list.
    pub free_pages: u64,
}

impl PageSpace {
    /// The space of a file holding only its checkpoint page.
    pub const fn new() -> Self {
        PageSpace {
            page_count: 1,
            free_head: NO_PAGE,
            free_pages: 0,
        }
    }
}

impl Default for PageSpace {
    fn default() -> Self {
        PageSpace::new()
    }
}

/// One consistent state of a paged file, as its checkpoint page holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// Page size in bytes.
    pub page_size: usize,
    /// The owner's root fields.
    pub root: RootSlot,
    /// The pager's allocation state.
    pub space: PageSpace,
    /// Build id of the index directory build that created the file (the
    /// page header's `aux` word; 0: none, e.g. a file from before build
    /// ids). Kept by every checkpoint.
    pub build_id: u64,
    /// Checkpoint number: 0 for a freshly built or created file, one more
    /// with every checkpoint a journaled [`super::Pager`] writes (which
    /// sets it itself). The rollback journal names the checkpoint it
    /// protects by this number.
    pub number: u64,
}

impl Checkpoint {
    /// The checkpoint of an owner's root fields and page space, numbered 0
    /// (a journaled pager numbers the ones it writes).
    pub fn of(page_size: usize, root: RootSlot, space: PageSpace, build_id: u64) -> Checkpoint {
        Checkpoint {
            page_size,
            root,
            space,
            build_id,
            number: 0,
        }
    }

    /// Encodes the checkpoint page of file kind `id` into `page` (a whole
    /// page) and seals it as page 0.
    pub fn encode(&self, id: &FileId, page: &mut [u8]) {
        page.fill(0);
        put_u64(page, MAGIC_OFF, id.magic);
        put_u32(page, MAGIC_OFF + 8, id.version);
        put_u32(page, MAGIC_OFF + 12, self.page_size as u32);
        if let Some(slot) = page.get_mut(SLOT_OFF..SPACE_OFF) {
            slot.copy_from_slice(&self.root);
        }
        put_u64(page, SPACE_OFF, self.space.page_count);
        put_u64(page, SPACE_OFF + 8, self.space.free_head);
        put_u64(page, SPACE_OFF + 16, self.space.free_pages);
        put_u64(page, NUMBER_OFF, self.number);
        page::seal(
            page,
            META_PAGE,
            PageHeader {
                kind: PageType::FileHeader,
                flags: 0,
                count: 0,
                aux: self.build_id,
            },
        );
    }

    /// Writes the checkpoint page to `storage` and syncs it: the one write
    /// that moves the file from its previous checkpoint to this one.
    pub fn write(&self, id: &FileId, storage: &dyn Storage) -> Result<()> {
        let mut page = AlignedBuf::zeroed(self.page_size);
        self.encode(id, &mut page);
        storage.write_at(META_PAGE, &page)?;
        storage.sync()
    }

    /// Reads the checkpoint page of `storage` and checks, in this order:
    /// the file holds one minimal page, the magic, the version, the page
    /// size, that the file holds the whole page, and its checksum. The
    /// owner checks its root slot next, then [`Checkpoint::check_file`].
    ///
    /// Errors: [`Error::Truncated`], [`Error::BadMagic`],
    /// [`Error::UnsupportedVersion`], [`Error::Corruption`], or the
    /// storage's I/O error.
    pub fn load(storage: &dyn Storage, id: &FileId) -> Result<Checkpoint> {
        let name = storage.name().to_string();
        let file_len = storage.len()?;
        let min = MIN_PAGE_SIZE as u64;
        if file_len < min {
            return Err(Error::Truncated {
                file: name,
                expected: min,
                found: file_len,
            });
        }
        // Every supported page size is at least 4 KiB, which holds every field.
        let mut first = AlignedBuf::zeroed(MIN_PAGE_SIZE);
        storage.read_at(0, &mut first)?;
        let page_size = page::check_file_ident(&first, &name, &id.ident())?;
        if page_size as u64 > file_len {
            return Err(Error::Truncated {
                file: name,
                expected: page_size as u64,
                found: file_len,
            });
        }
        let mut hdr = AlignedBuf::zeroed(page_size);
        storage.read_at(0, &mut hdr)?;
        Checkpoint::decode(&hdr, id, &name)
    }

    /// Decodes and checks a checkpoint page `hdr` (page 0 of `file`, exactly
    /// one page): identification fields, checksum, type, and that the page
    /// space is self-consistent (`page_count >= 1`, free list inside it).
    /// A pure function of the bytes.
    ///
    /// Errors: [`Error::BadMagic`], [`Error::UnsupportedVersion`],
    /// [`Error::Corruption`] naming `file` and page 0.
    pub fn decode(hdr: &[u8], id: &FileId, file: &str) -> Result<Checkpoint> {
        let (page_size, h) = page::open_file_header(hdr, file, &id.ident())?;
        let mut root = [0u8; ROOT_SLOT_LEN];
        if let Some(slot) = hdr.get(SLOT_OFF..SPACE_OFF) {
            root.copy_from_slice(slot);
        }
        let u64_at = |off: usize| get_u64(hdr, SPACE_OFF + off).unwrap_or(0);
        let space = PageSpace {
            page_count: u64_at(0),
            free_head: u64_at(8),
            free_pages: u64_at(16),
        };
        if space.page_count == 0
            || space.free_pages >= space.page_count
            || space.free_head >= space.page_count
            || (space.free_head == NO_PAGE) != (space.free_pages == 0)
        {
            return Err(Error::corruption(
                file,
                META_PAGE,
                format!(
                    "page space is inconsistent: {} pages, free list of {} from page {}",
                    space.page_count, space.free_pages, space.free_head
                ),
            ));
        }
        Ok(Checkpoint {
            page_size,
            root,
            space,
            build_id: h.aux,
            number: get_u64(hdr, NUMBER_OFF).unwrap_or(0),
        })
    }

    /// Checks that `storage` holds every allocated page.
    ///
    /// Errors: [`Error::Truncated`], or the storage's I/O error.
    pub fn check_file(&self, storage: &dyn Storage) -> Result<()> {
        let file_len = storage.len()?;
        let need = self
            .space
            .page_count
            .checked_mul(self.page_size as u64)
            .ok_or_else(|| {
                Error::corruption(
                    storage.name(),
                    META_PAGE,
                    format!(
                        "checkpoint says {} pages of {} bytes: the size overflows",
                        self.space.page_count, self.page_size
                    ),
                )
            })?;
        if file_len < need {
            return Err(Error::Truncated {
                file: storage.name().to_string(),
                expected: need,
                found: file_len,
            });
        }
        Ok(())
    }
}

/// Writes a free-list page (`next` = following free page) into `page` as
/// page `page_no` and seals it.
pub(crate) fn encode_free(page: &mut [u8], page_no: u64, next: u64) {
    page.fill(0);
    page::seal(
        page,
        page_no,
        PageHeader {
            kind: PageType::Free,
            flags: 0,
            count: 0,
            aux: next,
        },
    );
}

/// Verifies a free-list page (checksum with `page_no`, type) and returns its
/// next link.
///
/// Errors: [`Error::Corruption`] naming `file` and `page_no`.
pub(crate) fn open_free(page: &[u8], page_no: u64, file: &str) -> Result<u64> {
    Ok(page::open_typed(page, page_no, file, PageType::Free)?.aux)
}
