//! On-disk layout of the B+-tree file: the meta page, leaves, inner nodes and
//! free pages. Normative description: `docs/format/btree.md`.
//!
//! Every page starts with the 16-byte header of [`crate::format::page`]
//! (crc32c seeded with the page number, type, count, aux). Leaves and inner
//! nodes share one shape: `C = (page_size - 16) / 16` slots, a key array
//! `keys[C]` at byte 16 and a second `u64` array `words[C]` at byte `16 + 8C`
//! (values in a leaf, right children in an inner node). All integers are
//! little-endian.
//!
//! Readers work on page bytes directly ([`LeafPage`], [`InnerPage`]); nothing
//! is decoded that a lookup does not need. Writers mutate leaf bytes in place
//! ([`leaf_insert`], [`leaf_remove`], ...) and encode owned [`InnerNode`]s.

use crate::format::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::format::page::{self, PAGE_HEADER_LEN, PageHeader, PageType, check_page_size};
use crate::storage::{AlignedBuf, Storage};
use crate::{Error, Result};

/// Magic number of a B+-tree file: the bytes `STRATABT` (read as a `u64` LE).
pub const BTREE_MAGIC: u64 = u64::from_le_bytes(*b"STRATABT");
/// Format version of B+-tree files written by this build.
pub const BTREE_VERSION: u32 = 1;
/// The meta page is page 0; page number 0 is therefore never a node and
/// serves as the null link (no next leaf, empty free list).
pub const META_PAGE: u64 = 0;
/// The null page link.
pub const NO_PAGE: u64 = 0;

/// Byte offset of the key array in leaves and inner nodes.
const KEYS_OFF: usize = PAGE_HEADER_LEN;

/// Slots per node for a page size: `(page_size - 16) / 16`, i.e. records
/// per leaf and separator keys per inner node (255 for 4 KiB, 511 for
/// 8 KiB, 1023 for 16 KiB).
pub const fn node_capacity(page_size: usize) -> usize {
    (page_size - PAGE_HEADER_LEN) / 16
}

/// Children per full inner node: `node_capacity + 1` (256 for 4 KiB, 512 for
/// 8 KiB, 1024 for 16 KiB).
pub const fn inner_fanout(page_size: usize) -> usize {
    node_capacity(page_size) + 1
}

/// Byte offset of the second array (values / right children).
#[inline]
const fn words_off(cap: usize) -> usize {
    KEYS_OFF + 8 * cap
}

/// The contents of the meta page (page 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Page size in bytes.
    pub page_size: usize,
    /// Page number of the root (a leaf when `height == 1`).
    pub root: u64,
    /// Levels including the leaf level (>= 1).
    pub height: u32,
    /// Fill factor (percent) the tree was bulk loaded with.
    pub fill: u32,
    /// Number of records.
    pub n: u64,
    /// Number of leaf pages in the tree.
    pub leaves: u64,
    /// Number of inner-node pages in the tree.
    pub inner: u64,
    /// Pages allocated in the file, the meta page included: the next page
    /// number to append.
    pub page_count: u64,
    /// First page of the free list ([`NO_PAGE`] if empty).
    pub free_head: u64,
    /// Pages on the free list.
    pub free_pages: u64,
}

impl Meta {
    /// Checks the counters against each other: every allocated page is the
    /// meta page, a leaf, an inner node or a free page.
    pub fn check(&self, file: &str) -> Result<()> {
        let bad = |what: String| Err(Error::corruption(file, META_PAGE, what));
        if self.height == 0 || self.height > 64 {
            return bad(format!("tree height {} out of range", self.height));
        }
        if self.root == NO_PAGE || self.root >= self.page_count {
            return bad(format!(
                "root page {} outside the {} allocated pages",
                self.root, self.page_count
            ));
        }
        if self.fill == 0 || self.fill > 100 {
            return bad(format!("fill factor {} out of range", self.fill));
        }
        let accounted = 1u64
            .checked_add(self.leaves)
            .and_then(|x| x.checked_add(self.inner))
            .and_then(|x| x.checked_add(self.free_pages));
        if accounted != Some(self.page_count) || self.leaves == 0 {
            return bad(format!(
                "page counts disagree: 1 + {} leaves + {} inner + {} free != {} pages",
                self.leaves, self.inner, self.free_pages, self.page_count
            ));
        }
        if (self.height == 1) != (self.inner == 0) {
            return bad(format!("height {} with {} inner nodes", self.height, self.inner));
        }
        let cap = node_capacity(self.page_size) as u64;
        if self.n > self.leaves.saturating_mul(cap) {
            return bad(format!("{} records do not fit in {} leaves", self.n, self.leaves));
        }
        Ok(())
    }

    /// Encodes the meta page into `page` (a whole page) and seals it.
    pub fn encode(&self, page: &mut [u8]) {
        page.fill(0);
        let o = PAGE_HEADER_LEN;
        put_u64(page, o, BTREE_MAGIC);
        put_u32(page, o + 8, BTREE_VERSION);
        put_u32(page, o + 12, self.page_size as u32);
        put_u64(page, o + 16, self.root);
        put_u32(page, o + 24, self.height);
        put_u32(page, o + 28, self.fill);
        put_u64(page, o + 32, self.n);
        put_u64(page, o + 40, self.leaves);
        put_u64(page, o + 48, self.inner);
        put_u64(page, o + 56, self.page_count);
        put_u64(page, o + 64, self.free_head);
        put_u64(page, o + 72, self.free_pages);
        page::seal(
            page,
            META_PAGE,
            PageHeader {
                kind: PageType::FileHeader,
                flags: 0,
                count: 0,
                aux: 0,
            },
        );
    }

    /// Reads and checks the meta page of `storage`: length, magic, version,
    /// page size, checksum, counters, and that the file holds every
    /// allocated page.
    ///
    /// Errors: [`Error::Truncated`], [`Error::BadMagic`],
    /// [`Error::UnsupportedVersion`], [`Error::Corruption`], or the storage's
    /// I/O error.
    pub fn read(storage: &dyn Storage) -> Result<Meta> {
        let name = storage.name().to_string();
        let file_len = storage.len()?;
        let min = crate::format::page::MIN_PAGE_SIZE as u64;
        if file_len < min {
            return Err(Error::Truncated {
                file: name,
                expected: min,
                found: file_len,
            });
        }
        // Every supported page size is at least 4 KiB, which holds every field.
        let mut first = AlignedBuf::zeroed(min as usize);
        storage.read_at(0, &mut first)?;
        let o = PAGE_HEADER_LEN;
        let magic = get_u64(&first, o).unwrap_or(0);
        if magic != BTREE_MAGIC {
            return Err(Error::BadMagic {
                file: name,
                expected: "strata B+-tree",
                found: magic,
            });
        }
        let version = get_u32(&first, o + 8).unwrap_or(0);
        if version != BTREE_VERSION {
            return Err(Error::UnsupportedVersion {
                file: name,
                found: version,
                supported: BTREE_VERSION,
            });
        }
        let page_size = get_u32(&first, o + 12).unwrap_or(0) as usize;
        check_page_size(page_size)
            .map_err(|_| Error::corruption(&name, 0, format!("bad page size {page_size}")))?;
        if page_size as u64 > file_len {
            return Err(Error::Truncated {
                file: name,
                expected: page_size as u64,
                found: file_len,
            });
        }
        let mut hdr = AlignedBuf::zeroed(page_size);
        storage.read_at(0, &mut hdr)?;
        page::open_typed(&hdr, META_PAGE, &name, PageType::FileHeader)?;
        let u64_at = |off: usize| get_u64(&hdr, o + off).unwrap_or(0);
        let u32_at = |off: usize| get_u32(&hdr, o + off).unwrap_or(0);
        let meta = Meta {
            page_size,
            root: u64_at(16),
            height: u32_at(24),
            fill: u32_at(28),
            n: u64_at(32),
            leaves: u64_at(40),
            inner: u64_at(48),
            page_count: u64_at(56),
            free_head: u64_at(64),
            free_pages: u64_at(72),
        };
        meta.check(&name)?;
        let need = meta.page_count.saturating_mul(page_size as u64);
        if file_len < need {
            return Err(Error::Truncated {
                file: name,
                expected: need,
                found: file_len,
            });
        }
        Ok(meta)
    }
}

/// Verifies a node page and checks its type and count.
fn open_node(page: &[u8], page_no: u64, file: &str, kind: PageType, cap: usize) -> Result<PageHeader> {
    let h = page::open_typed(page, page_no, file, kind)?;
    if h.count as usize > cap {
        return Err(Error::corruption(
            file,
            page_no,
            format!("{} entries on a page with {cap} slots", h.count),
        ));
    }
    Ok(h)
}

/// Index of the first of the `count` keys at the start of `keys` for which
/// `below(key)` is false (keys are sorted, `below` is monotone).
#[inline]
fn partition(keys: &[u8], count: usize, below: impl Fn(u64) -> bool) -> usize {
    let (mut lo, mut len) = (0usize, count);
    while len > 0 {
        let half = len / 2;
        let mid = lo + half;
        // A missing key (impossible for a verified page) stops the search.
        let below_mid = get_u64(keys, 8 * mid).is_some_and(&below);
        if below_mid {
            lo = mid + 1;
            len -= half + 1;
        } else {
            len = half;
        }
    }
    lo
}

/// A verified leaf page, read in place.
#[derive(Debug, Clone, Copy)]
pub struct LeafPage<'a> {
    page: &'a [u8],
    count: usize,
    next: u64,
    cap: usize,
}

impl<'a> LeafPage<'a> {
    /// Verifies `page` (checksum with `page_no`, type, count <= capacity).
    pub fn open(page: &'a [u8], page_no: u64, file: &str) -> Result<Self> {
        let cap = node_capacity(page.len());
        let h = open_node(page, page_no, file, PageType::BTreeLeaf, cap)?;
        Ok(LeafPage {
            page,
            count: h.count as usize,
            next: h.aux,
            cap,
        })
    }

    /// Number of records.
    #[inline]
    pub fn count(&self) -> usize {
        self.count
    }

    /// Page number of the next leaf ([`NO_PAGE`] for the last leaf).
    #[inline]
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Key at slot `i`.
    #[inline]
    pub fn key(&self, i: usize) -> Option<u64> {
        if i >= self.count {
            return None;
        }
        get_u64(self.page, KEYS_OFF + 8 * i)
    }

    /// Record at slot `i`.
    #[inline]
    pub fn record(&self, i: usize) -> Option<(u64, u64)> {
        if i >= self.count {
            return None;
        }
        Some((
            get_u64(self.page, KEYS_OFF + 8 * i)?,
            get_u64(self.page, words_off(self.cap) + 8 * i)?,
        ))
    }

    /// Slot of the first key `>= key` (`count` if none).
    #[inline]
    pub fn lower_bound(&self, key: u64) -> usize {
        let keys = self.page.get(KEYS_OFF..).unwrap_or(&[]);
        partition(keys, self.count, |k| k < key)
    }
}

/// A verified inner-node page, read in place.
#[derive(Debug, Clone, Copy)]
pub struct InnerPage<'a> {
    page: &'a [u8],
    count: usize,
    first_child: u64,
    cap: usize,
}

impl<'a> InnerPage<'a> {
    /// Verifies `page` (checksum with `page_no`, type, count <= capacity).
    pub fn open(page: &'a [u8], page_no: u64, file: &str) -> Result<Self> {
        let cap = node_capacity(page.len());
        let h = open_node(page, page_no, file, PageType::BTreeInner, cap)?;
        Ok(InnerPage {
            page,
            count: h.count as usize,
            first_child: h.aux,
            cap,
        })
    }

    /// Number of separator keys (children = keys + 1).
    #[inline]
    pub fn count(&self) -> usize {
        self.count
    }

    /// Separator key `i`.
    #[inline]
    pub fn key(&self, i: usize) -> Option<u64> {
        if i >= self.count {
            return None;
        }
        get_u64(self.page, KEYS_OFF + 8 * i)
    }

    /// Child `i` (`0..=count`).
    #[inline]
    pub fn child(&self, i: usize) -> Option<u64> {
        if i == 0 {
            return Some(self.first_child);
        }
        if i > self.count {
            return None;
        }
        get_u64(self.page, words_off(self.cap) + 8 * (i - 1))
    }

    /// Index of the child whose key range holds `key`: the number of
    /// separators `<= key`.
    #[inline]
    pub fn route(&self, key: u64) -> usize {
        let keys = self.page.get(KEYS_OFF..).unwrap_or(&[]);
        partition(keys, self.count, |k| k <= key)
    }

    /// Decodes the node.
    pub fn decode(&self) -> InnerNode {
        let mut n = InnerNode {
            keys: Vec::with_capacity(self.count),
            children: Vec::with_capacity(self.count + 1),
        };
        n.children.push(self.first_child);
        for i in 0..self.count {
            n.keys.push(get_u64(self.page, KEYS_OFF + 8 * i).unwrap_or(0));
            n.children
                .push(get_u64(self.page, words_off(self.cap) + 8 * i).unwrap_or(0));
        }
        n
    }
}

/// A decoded inner node: `keys.len() + 1 == children.len()`. Child `i`
/// holds the keys in `[keys[i-1], keys[i])` (unbounded at the ends).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InnerNode {
    /// Separator keys, strictly increasing.
    pub keys: Vec<u64>,
    /// Child page numbers.
    pub children: Vec<u64>,
}

impl InnerNode {
    /// Index of the child whose key range holds `key`.
    #[inline]
    pub fn route(&self, key: u64) -> usize {
        self.keys.partition_point(|&k| k <= key)
    }

    /// Encodes the node into `page` (a whole page) as page `page_no` and
    /// seals it. Fails if the node has more keys than the page has slots or
    /// an inconsistent shape.
    pub fn encode(&self, page: &mut [u8], page_no: u64) -> Result<()> {
        let cap = node_capacity(page.len());
        let count = self.keys.len();
        if count > cap || self.children.len() != count + 1 {
            return Err(Error::invalid(format!(
                "inner node with {count} keys and {} children does not fit a page of {cap} slots",
                self.children.len()
            )));
        }
        page.fill(0);
        for (i, (&k, &c)) in self.keys.iter().zip(self.children.iter().skip(1)).enumerate() {
            put_u64(page, KEYS_OFF + 8 * i, k);
            put_u64(page, words_off(cap) + 8 * i, c);
        }
        page::seal(
            page,
            page_no,
            PageHeader {
                kind: PageType::BTreeInner,
                flags: 0,
                count: count as u16,
                aux: self.children.first().copied().unwrap_or(NO_PAGE),
            },
        );
        Ok(())
    }
}

/// Writes a leaf holding `records` (sorted) with next link `next` into
/// `page` as page `page_no`, and seals it. Records beyond the capacity are
/// an error.
pub fn encode_leaf(page: &mut [u8], page_no: u64, records: &[(u64, u64)], next: u64) -> Result<()> {
    let cap = node_capacity(page.len());
    if records.len() > cap {
        return Err(Error::invalid(format!(
            "{} records do not fit a leaf of {cap} slots",
            records.len()
        )));
    }
    page.fill(0);
    for (i, &(k, v)) in records.iter().enumerate() {
        put_u64(page, KEYS_OFF + 8 * i, k);
        put_u64(page, words_off(cap) + 8 * i, v);
    }
    seal_leaf(page, page_no, records.len(), next);
    Ok(())
}

/// Seals a leaf page whose slots are filled in.
pub fn seal_leaf(page: &mut [u8], page_no: u64, count: usize, next: u64) {
    page::seal(
        page,
        page_no,
        PageHeader {
            kind: PageType::BTreeLeaf,
            flags: 0,
            count: count as u16,
            aux: next,
        },
    );
}

/// Puts record `(key, value)` into slot `i` of a leaf page (no shifting).
#[inline]
pub fn leaf_put(page: &mut [u8], i: usize, key: u64, value: u64) {
    let cap = node_capacity(page.len());
    put_u64(page, KEYS_OFF + 8 * i, key);
    put_u64(page, words_off(cap) + 8 * i, value);
}

/// Sets the value of slot `i` of a leaf page.
#[inline]
pub fn leaf_set_value(page: &mut [u8], i: usize, value: u64) {
    let cap = node_capacity(page.len());
    put_u64(page, words_off(cap) + 8 * i, value);
}

/// Inserts `(key, value)` at slot `i` of a leaf page holding `count < cap`
/// records, shifting slots `i..count` right by one. Does not seal.
pub fn leaf_insert(page: &mut [u8], count: usize, i: usize, key: u64, value: u64) -> Result<()> {
    let cap = node_capacity(page.len());
    if count >= cap || i > count {
        return Err(Error::invalid("leaf insert out of range"));
    }
    for base in [KEYS_OFF, words_off(cap)] {
        page.copy_within(base + 8 * i..base + 8 * count, base + 8 * (i + 1));
    }
    leaf_put(page, i, key, value);
    Ok(())
}

/// Removes slot `i` of a leaf page holding `count` records, shifting slots
/// `i+1..count` left and zeroing the vacated last slot. Does not seal.
pub fn leaf_remove(page: &mut [u8], count: usize, i: usize) -> Result<()> {
    let cap = node_capacity(page.len());
    if i >= count || count > cap {
        return Err(Error::invalid("leaf remove out of range"));
    }
    for base in [KEYS_OFF, words_off(cap)] {
        page.copy_within(base + 8 * (i + 1)..base + 8 * count, base + 8 * i);
    }
    leaf_put(page, count - 1, 0, 0);
    Ok(())
}

/// Writes a free-list page (`next` = following free page) into `page` as
/// page `page_no` and seals it.
pub fn encode_free(page: &mut [u8], page_no: u64, next: u64) {
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

/// Verifies a free-list page and returns its next link.
pub fn open_free(page: &[u8], page_no: u64, file: &str) -> Result<u64> {
    Ok(page::open_typed(page, page_no, file, PageType::Free)?.aux)
}
