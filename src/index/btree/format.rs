//! On-disk layout of the B+-tree file: the B+-tree's fields of the meta page
//! (the pager's checkpoint page), leaves and inner nodes. Normative
//! description: `docs/format/btree.md`; the meta page and free pages belong
//! to [`crate::pager`] (`docs/format/pager.md`).
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

use crate::format::bytes::{get_u64, put_u64};
use crate::format::page::{self, PAGE_HEADER_LEN, PageHeader, PageType};
use crate::pager::{Checkpoint, FileId, PageSpace, RootSlot, SlotReader, SlotWriter};
pub(crate) use crate::pager::{META_PAGE, NO_PAGE};
use crate::storage::Storage;
use crate::{Error, Result};

/// Magic number of a B+-tree file: the bytes `STRATABT` (read as a `u64` LE).
pub(crate) const BTREE_MAGIC: u64 = u64::from_le_bytes(*b"STRATABT");
/// Format version of B+-tree files written by this build.
pub(crate) const BTREE_VERSION: u32 = 1;
/// The B+-tree's file kind for [`crate::pager`].
pub(crate) const BTREE_FILE_ID: FileId = FileId {
    magic: BTREE_MAGIC,
    version: BTREE_VERSION,
    what: "strata B+-tree",
};

/// Byte offset of the key array in leaves and inner nodes.
const KEYS_OFF: usize = PAGE_HEADER_LEN;

/// Slots per node for a page size: `(page_size - 16) / 16`, i.e. records
/// per leaf and separator keys per inner node (255 for 4 KiB, 511 for
/// 8 KiB, 1023 for 16 KiB).
/// A page shorter than its header has no slots.
pub(crate) const fn node_capacity(page_size: usize) -> usize {
    page_size.saturating_sub(PAGE_HEADER_LEN) / 16
}

/// Children per full inner node: `node_capacity + 1` (256 for 4 KiB, 512 for
/// 8 KiB, 1024 for 16 KiB).
pub(crate) const fn inner_fanout(page_size: usize) -> usize {
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
    /// Pages in the file and the free list (the pager's part).
    pub space: PageSpace,
    /// Build id of the index directory build that loaded the tree (0:
    /// none); the manifest's must match.
    pub build_id: u64,
}

impl Meta {
    /// Checks the counters against each other: every allocated page is the
    /// meta page, a leaf, an inner node or a free page.
    pub fn check(&self, file: &str) -> Result<()> {
        let bad = |what: String| Err(Error::corruption(file, META_PAGE, what));
        if self.height == 0 || self.height > 64 {
            return bad(format!("tree height {} out of range", self.height));
        }
        if self.root == NO_PAGE || self.root >= self.space.page_count {
            return bad(format!(
                "root page {} outside the {} allocated pages",
                self.root, self.space.page_count
            ));
        }
        if self.fill == 0 || self.fill > 100 {
            return bad(format!("fill factor {} out of range", self.fill));
        }
        let accounted = 1u64
            .checked_add(self.leaves)
            .and_then(|x| x.checked_add(self.inner))
            .and_then(|x| x.checked_add(self.space.free_pages));
        if accounted != Some(self.space.page_count) || self.leaves == 0 {
            return bad(format!(
                "page counts disagree: 1 + {} leaves + {} inner + {} free != {} pages",
                self.leaves, self.inner, self.space.free_pages, self.space.page_count
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

    /// The B+-tree's root fields as the pager's root slot: root (u64),
    /// height (u32), fill (u32), n, leaves, inner (u64 each).
    pub fn root_slot(&self) -> RootSlot {
        SlotWriter::new()
            .u64(self.root)
            .u32(self.height)
            .u32(self.fill)
            .u64(self.n)
            .u64(self.leaves)
            .u64(self.inner)
            .finish()
    }

    /// The meta page's contents as the pager's checkpoint.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint::of(self.page_size, self.root_slot(), self.space, self.build_id)
    }

    /// The meta page a checkpoint holds (not checked).
    pub fn from_checkpoint(cp: &Checkpoint) -> Meta {
        let mut r = SlotReader::new(&cp.root);
        Meta {
            page_size: cp.page_size,
            root: r.u64(),
            height: r.u32(),
            fill: r.u32(),
            n: r.u64(),
            leaves: r.u64(),
            inner: r.u64(),
            space: cp.space,
            build_id: cp.build_id,
        }
    }

    /// Encodes the meta page into `page` (a whole page) and seals it.
    pub fn encode(&self, page: &mut [u8]) {
        self.checkpoint().encode(&BTREE_FILE_ID, page);
    }

    /// Reads and checks the meta page of `storage`: length, magic, version,
    /// page size, checksum ([`Checkpoint::load`]), counters
    /// ([`Meta::check`]), and that the file holds every allocated page.
    ///
    /// Errors: [`Error::Truncated`], [`Error::BadMagic`],
    /// [`Error::UnsupportedVersion`], [`Error::Corruption`], or the storage's
    /// I/O error.
    pub fn read(storage: &dyn Storage) -> Result<Meta> {
        let cp = Checkpoint::load(storage, &BTREE_FILE_ID)?;
        let meta = Meta::from_checkpoint(&cp);
        meta.check(storage.name())?;
        cp.check_file(storage)?;
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
pub(crate) struct LeafPage<'a> {
    page: &'a [u8],
    count: usize,
    next: u64,
    cap: usize,
}

impl<'a> LeafPage<'a> {
    /// Verifies `page` (checksum with `page_no`, type, count <= capacity).
    pub(crate) fn open(page: &'a [u8], page_no: u64, file: &str) -> Result<Self> {
        let cap = node_capacity(page.len());
        let h = open_node(page, page_no, file, PageType::BTreeLeaf, cap)?;
        Ok(LeafPage {
            page,
            count: h.count as usize,
            next: h.aux,
            cap,
        })
    }

    /// A view of a page that [`LeafPage::open`] verified before, with the
    /// `count` and `next` it found (nothing is checked again; every access
    /// stays bounds-checked).
    #[inline]
    pub(crate) fn verified(page: &'a [u8], count: usize, next: u64) -> Self {
        LeafPage {
            page,
            count,
            next,
            cap: node_capacity(page.len()),
        }
    }

    /// Number of records.
    #[inline]
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Page number of the next leaf ([`NO_PAGE`] for the last leaf).
    #[inline]
    pub(crate) fn next(&self) -> u64 {
        self.next
    }

    /// Key at slot `i`.
    #[inline]
    pub(crate) fn key(&self, i: usize) -> Option<u64> {
        if i >= self.count {
            return None;
        }
        get_u64(self.page, KEYS_OFF + 8 * i)
    }

    /// Record at slot `i`.
    #[inline]
    pub(crate) fn record(&self, i: usize) -> Option<(u64, u64)> {
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
    pub(crate) fn lower_bound(&self, key: u64) -> usize {
        let keys = self.page.get(KEYS_OFF..).unwrap_or(&[]);
        partition(keys, self.count, |k| k < key)
    }
}

/// A verified inner-node page, read in place.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InnerPage<'a> {
    page: &'a [u8],
    count: usize,
    first_child: u64,
    cap: usize,
}

impl<'a> InnerPage<'a> {
    /// Verifies `page` (checksum with `page_no`, type, count <= capacity).
    pub(crate) fn open(page: &'a [u8], page_no: u64, file: &str) -> Result<Self> {
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
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Child `i` (`0..=count`).
    #[inline]
    pub(crate) fn child(&self, i: usize) -> Option<u64> {
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
    pub(crate) fn route(&self, key: u64) -> usize {
        let keys = self.page.get(KEYS_OFF..).unwrap_or(&[]);
        partition(keys, self.count, |k| k <= key)
    }

    /// Decodes the node.
    pub(crate) fn decode(&self) -> InnerNode {
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
pub(crate) struct InnerNode {
    /// Separator keys, strictly increasing.
    pub keys: Vec<u64>,
    /// Child page numbers.
    pub children: Vec<u64>,
}

impl InnerNode {
    /// Index of the child whose key range holds `key`.
    #[inline]
    pub(crate) fn route(&self, key: u64) -> usize {
        self.keys.partition_point(|&k| k <= key)
    }

    /// Encodes the node into `page` (a whole page) as page `page_no` and
    /// seals it. Fails if the node has more keys than the page has slots or
    /// an inconsistent shape.
    pub(crate) fn encode(&self, page: &mut [u8], page_no: u64) -> Result<()> {
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
/// The separator between a left child whose last key is `last` and a right
/// child whose first key is `first` (`last < first`; returns `first`
/// otherwise). Any value in `last + 1 ..= first` routes every stored key
/// correctly.
/// - `round == false`: `last + 1`, so that a key in the gap is routed to
///   the leaf holding its lower bound (`btree`: a lower bound reads one
///   leaf).
/// - `round == true`: the *roundest* value in the range, the one with the
///   most trailing zero bits (the common high bits of the two keys, then
///   the first bit where `first` has a one): the gaps between neighbouring
///   separators become cheap to gap-code (`btree-ld`'s directory), at the
///   price of a second leaf for a lower bound of a key in
///   `last + 1 .. separator`.
pub(crate) fn separator(last: u64, first: u64, round: bool) -> u64 {
    if last >= first {
        return first;
    }
    if !round {
        return last + 1;
    }
    let h = 63 - (last ^ first).leading_zeros();
    first & !((1u64 << h) - 1)
}

pub(crate) fn encode_leaf(page: &mut [u8], page_no: u64, records: &[(u64, u64)], next: u64) -> Result<()> {
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
pub(crate) fn seal_leaf(page: &mut [u8], page_no: u64, count: usize, next: u64) {
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
pub(crate) fn leaf_put(page: &mut [u8], i: usize, key: u64, value: u64) {
    let cap = node_capacity(page.len());
    put_u64(page, KEYS_OFF + 8 * i, key);
    put_u64(page, words_off(cap) + 8 * i, value);
}

/// Sets the value of slot `i` of a leaf page.
#[inline]
pub(crate) fn leaf_set_value(page: &mut [u8], i: usize, value: u64) {
    let cap = node_capacity(page.len());
    put_u64(page, words_off(cap) + 8 * i, value);
}

/// Inserts `(key, value)` at slot `i` of a leaf page holding `count < cap`
/// records, shifting slots `i..count` right by one. Does not seal.
pub(crate) fn leaf_insert(page: &mut [u8], count: usize, i: usize, key: u64, value: u64) -> Result<()> {
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
pub(crate) fn leaf_remove(page: &mut [u8], count: usize, i: usize) -> Result<()> {
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
