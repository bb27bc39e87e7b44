//! On-disk layout of the `alex` file: the root slot, data-node page runs
//! and inner-node pages. Normative description: `docs/format/alex.md`; the
//! checkpoint page and free pages belong to [`crate::pager`]
//! (`docs/format/pager.md`).
//!
//! Every page starts with the 16-byte header of [`crate::format::page`].
//! A data node is a run of contiguous pages whose payloads (the bytes after
//! each page's header) form one byte stream, the node's *image*: the node
//! header (model, capacity, sibling links, statistics), the bitmap, the
//! key array and the value array. All integers are little-endian; `f64`s
//! are stored as their IEEE-754 bits.

use crate::format::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::format::page::{self, PAGE_HEADER_LEN, PageHeader, PageType};
use crate::pager::{Checkpoint, FileId, NO_PAGE, PageSpace, RootSlot, SlotReader, SlotWriter};
use crate::{Error, Result};

/// Magic number of an `alex` file: the bytes `STRATAAX` (read as a `u64` LE).
pub(crate) const ALEX_MAGIC: u64 = u64::from_le_bytes(*b"STRATAAX");
/// Format version of `alex` files written by this build.
pub(crate) const ALEX_VERSION: u32 = 1;
/// The `alex` file kind for [`crate::pager`].
pub(crate) const ALEX_FILE_ID: FileId = FileId {
    magic: ALEX_MAGIC,
    version: ALEX_VERSION,
    what: "strata ALEX",
};

/// Density a data node is built (and expanded) to.
pub(crate) const INIT_DENSITY: f64 = 0.7;
/// Density bound: an insert that would exceed it triggers an SMO first.
pub(crate) const MAX_DENSITY: f64 = 0.8;
/// Cost-model weight of one search iteration (a key comparison of the
/// exponential or binary search).
pub(crate) const SEARCH_WEIGHT: f64 = 20.0;
/// Cost-model weight of one shifted record.
pub(crate) const SHIFT_WEIGHT: f64 = 0.5;
/// Cost-model weight of one more inner node on the path (a downward
/// split's price).
pub(crate) const TRAVERSAL_WEIGHT: f64 = 20.0;
/// A node's empirical cost *deviates* when it exceeds its expected cost
/// times this factor plus [`DEVIATION_SLACK`].
pub(crate) const DEVIATION_FACTOR: f64 = 1.5;
/// Absolute slack of the deviation test (half a search iteration).
pub(crate) const DEVIATION_SLACK: f64 = 10.0;
/// Inserts a node must have seen before its empirical cost is trusted.
pub(crate) const MIN_INSERTS_FOR_COST: u64 = 32;

/// Bytes of the data-node header at the start of the image.
pub(crate) const DATA_HDR_LEN: usize = 96;
/// Bytes of an inner node's header (children follow).
pub(crate) const INNER_HDR_LEN: usize = 32;

/// Payload bytes of a page (after its header).
pub(crate) const fn payload(ps: usize) -> usize {
    ps.saturating_sub(PAGE_HEADER_LEN)
}

/// Image bytes of a data node of `cap` slots (`cap` a multiple of 64).
pub(crate) const fn image_len(cap: usize) -> usize {
    DATA_HDR_LEN + cap / 8 + 16 * cap
}

/// Pages of a data node of `cap` slots.
pub(crate) fn node_pages(cap: usize, ps: usize) -> usize {
    image_len(cap).div_ceil(payload(ps).max(1)).max(1)
}

/// Slots of a data node filling `pages` pages: the largest multiple of 64
/// whose image fits (each 64 slots take 8 bitmap bytes and 1024 bytes of
/// keys and values).
pub(crate) fn cap_for_pages(pages: usize, ps: usize) -> usize {
    (pages * payload(ps)).saturating_sub(DATA_HDR_LEN) / 1032 * 64
}

/// Slots of the smallest data node holding `n` records at `density` or
/// below, rounded up to fill its last page.
pub(crate) fn cap_for_keys(n: usize, density: f64, ps: usize) -> usize {
    let want = ((n as f64 / density).ceil() as usize).max(n + 1).max(64);
    let want = want.div_ceil(64) * 64;
    cap_for_pages(node_pages(want, ps), ps).max(want)
}

/// Largest inner-node fanout on pages of `ps` bytes: the largest power of
/// two whose node fits a page beside the page header.
pub(crate) fn max_fanout(ps: usize) -> usize {
    let room = payload(ps).saturating_sub(INNER_HDR_LEN) / 8;
    if room < 2 {
        return 2;
    }
    1usize << (usize::BITS - 1 - room.leading_zeros())
}

/// Image offset of the bitmap word holding slot `i`.
pub(crate) const fn bitmap_off(i: usize) -> usize {
    DATA_HDR_LEN + (i / 64) * 8
}

/// Image offset of key `i` of a node of `cap` slots.
pub(crate) const fn key_off(cap: usize, i: usize) -> usize {
    DATA_HDR_LEN + cap / 8 + 8 * i
}

/// Image offset of value `i` of a node of `cap` slots.
pub(crate) const fn value_off(cap: usize, i: usize) -> usize {
    DATA_HDR_LEN + cap / 8 + 8 * cap + 8 * i
}

/// (page index in the run, byte offset in that page) of image offset `off`.
#[inline]
pub(crate) fn locate(off: usize, ps: usize) -> (usize, usize) {
    let p = payload(ps).max(1);
    (off / p, PAGE_HEADER_LEN + off % p)
}

/// A linear model `pos = intercept + slope * (key - anchor)` (keys below
/// `anchor` are predicted at `anchor`), clamped to `0..size`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Model {
    /// Key the model is anchored at.
    pub anchor: u64,
    /// Positions per key unit (never negative).
    pub slope: f64,
    /// Predicted position of `anchor`.
    pub intercept: f64,
}

impl Model {
    /// Predicted slot in `0..size` (0 when `size` is 0). Monotone in `key`.
    #[inline]
    pub(crate) fn slot(&self, key: u64, size: usize) -> usize {
        let p = self.intercept + self.slope * key.saturating_sub(self.anchor) as f64;
        if p.is_nan() || p <= 0.0 || size == 0 {
            0
        } else if p >= (size - 1) as f64 {
            size - 1
        } else {
            p as usize
        }
    }

    /// Least-squares fit of `keys[i] -> i * size / keys.len()` (ALEX trains
    /// a data node's model on ranks and scales it to the capacity).
    pub(crate) fn fit(keys: &[u64], size: usize) -> Model {
        let anchor = keys.first().copied().unwrap_or(0);
        let (slope, intercept) = crate::model::least_squares(|| {
            keys.iter()
                .enumerate()
                .map(|(i, &k)| ((k - anchor) as f64, i as f64))
        });
        let scale = size as f64 / keys.len().max(1) as f64;
        let m = Model {
            anchor,
            slope: slope * scale,
            intercept: intercept * scale,
        };
        if m.slope.is_finite() && m.intercept.is_finite() && m.slope >= 0.0 {
            m
        } else {
            Model {
                anchor,
                slope: 0.0,
                intercept: 0.0,
            }
        }
    }

    /// The routing model of an inner node of `fanout` slots over keys
    /// `first..=last`: `first` goes to slot 0 and `last` to slot
    /// `fanout - 1` (`first < last`).
    pub(crate) fn spread(first: u64, last: u64, fanout: usize) -> Model {
        let range = last.saturating_sub(first).max(1) as f64;
        Model {
            anchor: first,
            slope: fanout as f64 / range * (1.0 - 1e-12),
            intercept: 0.0,
        }
    }

    /// Whether both fields are finite and the slope is not negative.
    pub(crate) fn is_valid(&self) -> bool {
        self.slope.is_finite() && self.intercept.is_finite() && self.slope >= 0.0
    }
}

/// The fields of a data node's header (image bytes `0..96`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct DataHeader {
    /// The node's model (key to slot).
    pub model: Model,
    /// Slots (a multiple of 64).
    pub cap: u32,
    /// Pages of the run.
    pub pages: u32,
    /// Occupied slots.
    pub num_keys: u32,
    /// Head page of the previous data node in key order ([`NO_PAGE`]: first).
    pub prev: u64,
    /// Head page of the next data node in key order ([`NO_PAGE`]: last).
    pub next: u64,
    /// Inserts of new keys since the node was built (cost statistics).
    pub inserts: u64,
    /// Search iterations of those inserts.
    pub iters: u64,
    /// Records shifted by those inserts.
    pub shifts: u64,
    /// Expected cost per insert when the node was built.
    pub expected: f64,
}

impl DataHeader {
    /// Writes the header into the first [`DATA_HDR_LEN`] image bytes,
    /// through `put(offset, word)`.
    pub(crate) fn store(&self, mut put: impl FnMut(usize, u64) -> Result<()>) -> Result<()> {
        put(0, self.model.anchor)?;
        put(8, self.model.slope.to_bits())?;
        put(16, self.model.intercept.to_bits())?;
        put(24, u64::from(self.cap) | (u64::from(self.pages) << 32))?;
        put(32, u64::from(self.num_keys))?;
        put(40, self.prev)?;
        put(48, self.next)?;
        put(56, self.inserts)?;
        put(64, self.iters)?;
        put(72, self.shifts)?;
        put(80, self.expected.to_bits())?;
        put(88, 0)
    }

    /// Reads the header through `get(offset)`.
    pub(crate) fn load(mut get: impl FnMut(usize) -> Result<u64>) -> Result<DataHeader> {
        let cp = get(24)?;
        Ok(DataHeader {
            model: Model {
                anchor: get(0)?,
                slope: f64::from_bits(get(8)?),
                intercept: f64::from_bits(get(16)?),
            },
            cap: cp as u32,
            pages: (cp >> 32) as u32,
            num_keys: get(32)? as u32,
            prev: get(40)?,
            next: get(48)?,
            inserts: get(56)?,
            iters: get(64)?,
            shifts: get(72)?,
            expected: f64::from_bits(get(80)?),
        })
    }

    /// Checks the header of the node at `head` against the page size, the
    /// file's page count and the largest node.
    pub(crate) fn check(&self, head: u64, ps: usize, page_count: u64, file: &str) -> Result<()> {
        let bad = |what: String| Err(Error::corruption(file, head, what));
        let cap = self.cap as usize;
        if cap == 0 || cap % 64 != 0 || self.pages as usize != node_pages(cap, ps) {
            return bad(format!("data node of {} slots in {} pages", self.cap, self.pages));
        }
        if self.num_keys > self.cap || !self.model.is_valid() || !self.expected.is_finite() {
            return bad(format!(
                "data node with {} keys in {} slots or a bad model",
                self.num_keys, self.cap
            ));
        }
        if head.saturating_add(u64::from(self.pages)) > page_count {
            return bad("data node runs past the end of the file".to_string());
        }
        for link in [self.prev, self.next] {
            if link != NO_PAGE && link >= page_count {
                return bad(format!("sibling link {link} outside the file"));
            }
        }
        Ok(())
    }

    /// Empirical cost per insert from the statistics (ALEX's cost model:
    /// search iterations and shifts, weighted).
    pub(crate) fn empirical_cost(&self) -> f64 {
        let n = self.inserts.max(1) as f64;
        SEARCH_WEIGHT * self.iters as f64 / n + SHIFT_WEIGHT * self.shifts as f64 / n
    }

    /// Whether the node's cost deviates from what was expected when it
    /// was built (ALEX's "significant cost deviation").
    pub(crate) fn deviates(&self) -> bool {
        self.inserts >= MIN_INSERTS_FOR_COST
            && self.empirical_cost() > DEVIATION_FACTOR * self.expected + DEVIATION_SLACK
    }
}

/// Seals data-node page `index` of the node at `head` as page `page_no`.
pub(crate) fn seal_data(page: &mut [u8], page_no: u64, head: u64, index: usize) {
    seal(page, page_no, PageType::AlexData, index, head);
}

/// Seals an inner page holding `nodes` nodes in its first `used` bytes.
pub(crate) fn seal_inner(page: &mut [u8], page_no: u64, nodes: usize, used: usize) {
    seal(page, page_no, PageType::AlexInner, nodes, used as u64);
}

fn seal(page: &mut [u8], page_no: u64, kind: PageType, count: usize, aux: u64) {
    page::seal(
        page,
        page_no,
        PageHeader {
            kind,
            flags: 0,
            count: count.min(usize::from(u16::MAX)) as u16,
            aux,
        },
    );
}

/// Verifies page `page_no` as page `index` of the data node at `head`.
pub(crate) fn open_data(page: &[u8], page_no: u64, head: u64, index: usize, file: &str) -> Result<()> {
    let h = page::open_typed(page, page_no, file, PageType::AlexData)?;
    if h.aux != head || usize::from(h.count) != index {
        return Err(Error::corruption(
            file,
            page_no,
            format!(
                "data-node page {} of node {} where page {index} of node {head} belongs",
                h.count, h.aux
            ),
        ));
    }
    Ok(())
}

/// Verifies an inner page: checksum, type, its used bytes; returns
/// `(nodes, used)`.
pub(crate) fn open_inner(page: &[u8], page_no: u64, file: &str) -> Result<(usize, usize)> {
    let h = page::open_typed(page, page_no, file, PageType::AlexInner)?;
    let used = h.aux as usize;
    if used < PAGE_HEADER_LEN || used > page.len() {
        return Err(Error::corruption(
            file,
            page_no,
            format!("inner page claims {used} bytes used"),
        ));
    }
    Ok((usize::from(h.count), used))
}

/// A decoded inner node.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct InnerNode {
    /// Routing model (key to child slot).
    pub model: Model,
    /// Child addresses, one per slot (a child may fill several adjacent
    /// slots).
    pub children: Vec<u64>,
}

impl InnerNode {
    /// Bytes of the node on its page.
    pub(crate) fn len(&self) -> usize {
        INNER_HDR_LEN + 8 * self.children.len()
    }

    /// Slot routing `key`.
    #[inline]
    pub(crate) fn route(&self, key: u64) -> usize {
        self.model.slot(key, self.children.len())
    }

    /// Writes the node at byte `off` of `page` (not sealed).
    pub(crate) fn encode(&self, page: &mut [u8], off: usize) -> Result<()> {
        if off < PAGE_HEADER_LEN || off + self.len() > page.len() {
            return Err(Error::invalid("inner node outside its page"));
        }
        put_u64(page, off, self.model.anchor);
        put_u64(page, off + 8, self.model.slope.to_bits());
        put_u64(page, off + 16, self.model.intercept.to_bits());
        put_u32(page, off + 24, self.children.len() as u32);
        put_u32(page, off + 28, 0);
        for (i, c) in self.children.iter().enumerate() {
            put_u64(page, off + INNER_HDR_LEN + 8 * i, *c);
        }
        Ok(())
    }

    /// Decodes the node at byte `off` of verified inner page `page_no`
    /// (`used` bytes used): a valid model, a power-of-two fanout from 2,
    /// within the used bytes.
    pub(crate) fn decode(
        page: &[u8],
        page_no: u64,
        off: usize,
        used: usize,
        file: &str,
    ) -> Result<InnerNode> {
        let (model, fanout) = inner_header(page, page_no, off, used, file)?;
        let w = |d: usize| {
            get_u64(page, off + d).ok_or_else(|| {
                Error::corruption(file, page_no, format!("inner node at {off}: outside the page"))
            })
        };
        let mut children = Vec::with_capacity(fanout);
        for i in 0..fanout {
            children.push(w(INNER_HDR_LEN + 8 * i)?);
        }
        Ok(InnerNode { model, children })
    }
}

/// The root slot of the checkpoint page plus the pager's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Page size in bytes.
    pub page_size: usize,
    /// Address of the root node (`page * page_size + offset`; offset 0: a
    /// data node's head page, else an inner node on an inner page).
    pub root: u64,
    /// Number of live records.
    pub n: u64,
    /// Inner page new inner nodes are appended to ([`NO_PAGE`]: none yet).
    pub tail: u64,
    /// Data nodes.
    pub data_nodes: u32,
    /// Inner nodes.
    pub inner_nodes: u32,
    /// Largest data node, in pages (the `max_node_pages` parameter).
    pub max_pages: u32,
    /// Pages in the file and the free list (the pager's part).
    pub space: PageSpace,
    /// Build id of the index directory build that loaded the file.
    pub build_id: u64,
}

impl Meta {
    /// Checks the fields against each other and the file's page count.
    pub fn check(&self, file: &str) -> Result<()> {
        let bad = |what: String| Err(Error::corruption(file, crate::pager::META_PAGE, what));
        let ps = self.page_size.max(1) as u64;
        if self.root / ps == NO_PAGE || self.root / ps >= self.space.page_count {
            return bad(format!(
                "root {} outside the {} pages",
                self.root, self.space.page_count
            ));
        }
        if self.tail != NO_PAGE && self.tail >= self.space.page_count {
            return bad(format!("inner tail page {} outside the file", self.tail));
        }
        if self.data_nodes == 0 || self.max_pages == 0 || self.max_pages > MAX_NODE_PAGES {
            return bad(format!(
                "{} data nodes, largest node {} pages",
                self.data_nodes, self.max_pages
            ));
        }
        if u64::from(self.data_nodes) >= self.space.page_count {
            return bad(format!(
                "{} data nodes do not fit {} pages",
                self.data_nodes, self.space.page_count
            ));
        }
        Ok(())
    }

    /// The root slot: root, n, tail (u64 each), data nodes, inner nodes,
    /// largest node pages (u32 each).
    pub fn root_slot(&self) -> RootSlot {
        SlotWriter::new()
            .u64(self.root)
            .u64(self.n)
            .u64(self.tail)
            .u32(self.data_nodes)
            .u32(self.inner_nodes)
            .u32(self.max_pages)
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
            tail: r.u64(),
            data_nodes: r.u32(),
            inner_nodes: r.u32(),
            max_pages: r.u32(),
            space: cp.space,
            build_id: cp.build_id,
        }
    }
}

/// Largest accepted `max_node_pages`.
pub const MAX_NODE_PAGES: u32 = 1024;

/// The model and fanout of the inner node at byte `off` of verified inner
/// page `page_no` (`used` bytes used): a valid model, a power-of-two
/// fanout from 2, the children within the used bytes.
fn inner_header(page: &[u8], page_no: u64, off: usize, used: usize, file: &str) -> Result<(Model, usize)> {
    let bad = |what: &str| Error::corruption(file, page_no, format!("inner node at {off}: {what}"));
    if off < PAGE_HEADER_LEN || off + INNER_HDR_LEN > used {
        return Err(bad("outside the used bytes"));
    }
    let w = |d: usize| get_u64(page, off + d).ok_or_else(|| bad("outside the page"));
    let model = Model {
        anchor: w(0)?,
        slope: f64::from_bits(w(8)?),
        intercept: f64::from_bits(w(16)?),
    };
    let fanout = get_u32(page, off + 24).ok_or_else(|| bad("outside the page"))? as usize;
    if !model.is_valid() || fanout < 2 || !fanout.is_power_of_two() {
        return Err(bad("bad model or fanout"));
    }
    if off + INNER_HDR_LEN + 8 * fanout > used {
        return Err(bad("children past the used bytes"));
    }
    Ok((model, fanout))
}

/// Routes `key` through the inner node at byte `off` of verified inner
/// page `page_no` (`used` bytes used) reading only its header and one
/// child: `(slot, child address)`.
pub(crate) fn route_in(
    page: &[u8],
    page_no: u64,
    off: usize,
    used: usize,
    key: u64,
    file: &str,
) -> Result<(usize, u64)> {
    let (model, fanout) = inner_header(page, page_no, off, used, file)?;
    let slot = model.slot(key, fanout);
    let child = get_u64(page, off + INNER_HDR_LEN + 8 * slot)
        .ok_or_else(|| Error::corruption(file, page_no, format!("inner node at {off}: outside the page")))?;
    Ok((slot, child))
}
