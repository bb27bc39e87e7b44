//! On-disk layout of the `lipp` file: the root slot, the node space and the
//! node format, and the node model (FMCD). Normative description:
//! `docs/format/lipp.md`; the checkpoint page belongs to [`crate::pager`]
//! (`docs/format/pager.md`).
//!
//! Pages `1..page_count` are node pages (`PageType::LippNode`): after the
//! 16-byte page header each holds `page_size - 16` bytes of the *node
//! space*, a byte array addressed by node addresses; byte `a` of it lives in
//! page `1 + a / (page_size - 16)` at offset `16 + a % (page_size - 16)`.
//! Nodes are packed back to back in it and may cross pages. All integers
//! are little-endian; `f64`s are stored as their IEEE-754 bits.

use crate::format::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::format::page::PAGE_HEADER_LEN;
use crate::pager::{Checkpoint, FileId, PageSpace, RootSlot, SlotReader, SlotWriter};
use crate::{Error, Result};

/// Magic number of a `lipp` file: the bytes `STRATALP` (read as a `u64` LE).
pub(crate) const LIPP_MAGIC: u64 = u64::from_le_bytes(*b"STRATALP");
/// Format version of `lipp` files written by this build.
pub(crate) const LIPP_VERSION: u32 = 1;
/// The `lipp` file kind for [`crate::pager`].
pub(crate) const LIPP_FILE_ID: FileId = FileId {
    magic: LIPP_MAGIC,
    version: LIPP_VERSION,
    what: "strata LIPP",
};

/// Bytes of a node header (slot count, model, statistics).
pub(crate) const NODE_HDR_LEN: u64 = 64;
/// Bytes of one slot: the type byte, then two u64 words.
pub(crate) const SLOT_LEN: u64 = 17;
/// Slot type: empty.
pub(crate) const SLOT_NULL: u8 = 0;
/// Slot type: a record (key, value).
pub(crate) const SLOT_DATA: u8 = 1;
/// Slot type: a child node (its address, 0).
pub(crate) const SLOT_NODE: u8 = 2;
/// Deepest node path accepted: deeper is a corrupt (cyclic) tree. FMCD
/// shrinks a node's key range or count by a constant factor per level, and
/// a chain of two-key children grown by inserts below (or above) a node's
/// keys is rebuilt once its top holds 64 keys (LIPP's rule): sequential
/// inserts reach depth 48 at 100,000 keys; valid trees stay far below
/// this.
pub(crate) const MAX_DEPTH: usize = 1024;
/// Most slots of one node.
pub(crate) const MAX_SLOTS: u64 = 1 << 32;

/// Node-space bytes per page: `page_size - 16`.
#[inline]
pub(crate) const fn payload(page_size: usize) -> u64 {
    page_size.saturating_sub(PAGE_HEADER_LEN) as u64
}

/// The page holding node-space byte `addr`.
#[inline]
pub(crate) fn page_of(page_size: usize, addr: u64) -> u64 {
    1 + addr / payload(page_size).max(1)
}

/// Pages needed for `tail` node-space bytes, the checkpoint page included.
#[inline]
pub(crate) fn pages_for(page_size: usize, tail: u64) -> u64 {
    1 + tail.div_ceil(payload(page_size).max(1))
}

/// Slots a node built over `n` keys gets (Lan §6: LIPP allocates 5× the
/// keys below 100,000 keys, 2× from there; at least 8).
pub(crate) fn slots_for(n: usize) -> u64 {
    let n = n as u64;
    if n < 100_000 { (5 * n).max(8) } else { 2 * n }
}

/// Bytes of a node of `slots` slots.
#[inline]
pub(crate) fn node_bytes(slots: u64) -> u64 {
    NODE_HDR_LEN + SLOT_LEN * slots
}

/// The root slot of the checkpoint page plus the pager's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Page size in bytes.
    pub page_size: usize,
    /// Node-space address of the root node.
    pub root: u64,
    /// Number of live records.
    pub n: u64,
    /// Node-space bytes in use: new nodes are appended here.
    pub tail: u64,
    /// Node-space bytes of nodes no longer reachable (replaced by a subtree
    /// rebuild); never reused.
    pub dead: u64,
    /// Nodes reachable from the root.
    pub nodes: u64,
    /// Pages in the file (the pager's part; the free list stays empty).
    pub space: PageSpace,
    /// Build id of the index directory build that loaded the file.
    pub build_id: u64,
}

impl Meta {
    /// Checks the fields against each other and the file's page count.
    pub fn check(&self, file: &str) -> Result<()> {
        let bad = |what: String| Err(Error::corruption(file, crate::pager::META_PAGE, what));
        if self.space.page_count != pages_for(self.page_size, self.tail) || self.space.free_pages != 0 {
            return bad(format!(
                "{} node-space bytes in {} pages ({} free)",
                self.tail, self.space.page_count, self.space.free_pages
            ));
        }
        if self.root.saturating_add(node_bytes(8)) > self.tail || self.nodes == 0 {
            return bad(format!(
                "root node at {} of {} node-space bytes, {} nodes",
                self.root, self.tail, self.nodes
            ));
        }
        if self.dead > self.tail || self.nodes.saturating_mul(node_bytes(1)) > self.tail {
            return bad(format!(
                "{} dead bytes and {} nodes in {} node-space bytes",
                self.dead, self.nodes, self.tail
            ));
        }
        Ok(())
    }

    /// The root slot: root, n, tail, dead, nodes (u64 each).
    pub fn root_slot(&self) -> RootSlot {
        SlotWriter::new()
            .u64(self.root)
            .u64(self.n)
            .u64(self.tail)
            .u64(self.dead)
            .u64(self.nodes)
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
            dead: r.u64(),
            nodes: r.u64(),
            space: cp.space,
            build_id: cp.build_id,
        }
    }
}

/// A node's linear model: slot of `key` = `floor(slope * (key - base) +
/// intercept)` clamped to `[0, slots - 1]`, with `key - base` computed
/// signed in `f64`. Monotone in `key` (slope `>= 0`), and the same function
/// places a key at build, insert and lookup, so a key is found exactly
/// where it was put.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Model {
    pub base: u64,
    pub slope: f64,
    pub intercept: f64,
}

impl Model {
    /// The slot of `key` among `slots`.
    #[inline]
    pub(crate) fn slot(&self, key: u64, slots: u64) -> u64 {
        let d = if key >= self.base {
            (key - self.base) as f64
        } else {
            -((self.base - key) as f64)
        };
        let p = (self.slope * d + self.intercept).floor();
        let last = slots.saturating_sub(1);
        if p.is_nan() || p <= 0.0 {
            0
        } else if p >= last as f64 {
            last
        } else {
            p as u64
        }
    }

    /// The model from the first to the last key: `keys[0]` to slot 0,
    /// `keys[n-1]` to slot `slots - 1` (or `slots - 2` after rounding), so
    /// two distinct keys always land in different slots.
    fn endpoints(first: u64, last: u64, slots: u64) -> Model {
        let span = last.saturating_sub(first);
        let slope = if span == 0 {
            0.0
        } else {
            (slots.saturating_sub(1)) as f64 / span as f64
        };
        Model {
            base: first,
            slope,
            intercept: 0.0,
        }
    }

    /// FMCD (Wu et al., LIPP): the model of smallest conflict degree found
    /// in one pass over the sorted `keys` for `slots` slots. With conflict
    /// degree `d`, the `d` smallest and largest keys may clamp to the end
    /// slots and the keys from `keys[d]` (slot 1) to `keys[n-1-d]` (slot
    /// `slots - 2`) are spread at one slot per `ut = (keys[n-1-d] -
    /// keys[d]) / (slots - 3)` key units; while some `d + 1`
    /// consecutive keys span less than `ut`, `d` grows (and `ut` with it).
    /// Past `d >= n / 3` (or for fewer than 8 keys) the endpoint model is
    /// used. If the model puts the first and last key into one slot, the
    /// endpoint model is used instead, so every child gets fewer keys.
    pub(crate) fn fmcd(keys: &dyn Fn(usize) -> u64, n: usize, slots: u64) -> Model {
        let Some(last) = n.checked_sub(1).map(keys) else {
            return Model {
                base: 0,
                slope: 0.0,
                intercept: 0.0,
            };
        };
        let first = keys(0);
        if n == 1 {
            return Model {
                base: first,
                slope: 0.0,
                intercept: (slots / 2) as f64,
            };
        }
        let fallback = Model::endpoints(first, last, slots);
        if n < 8 || slots < 4 {
            return fallback;
        }
        let width = (slots - 3) as f64;
        let ut_of = |d: usize| keys(n - 1 - d).saturating_sub(keys(d)) as f64 / width;
        let mut d = 1usize;
        let mut ut = ut_of(d);
        let mut i = 0usize;
        while i + d < n {
            if keys(i + d).saturating_sub(keys(i)) as f64 >= ut {
                i += 1;
                continue;
            }
            d += 1;
            if d * 3 > n {
                return fallback;
            }
            ut = ut_of(d);
        }
        if ut.is_nan() || ut <= 0.0 || !ut.is_finite() {
            return fallback;
        }
        let m = Model {
            base: keys(d),
            slope: 1.0 / ut,
            intercept: 1.0,
        };
        if !m.slope.is_finite() || m.slot(first, slots) == m.slot(last, slots) {
            return fallback;
        }
        m
    }
}

/// A decoded node header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NodeHeader {
    /// Slots of the node.
    pub slots: u64,
    /// The node's model.
    pub model: Model,
    /// Keys in the subtree as the insert path counts them: the keys it was
    /// built with plus the new keys inserted since (deletes do not count).
    pub size: u64,
    /// Keys the subtree was built with.
    pub build_size: u64,
    /// New keys inserted into the subtree since it was built.
    pub inserts: u64,
    /// Of those, inserts that met a DATA slot and created a child node.
    pub conflicts: u64,
}

impl NodeHeader {
    /// The header of a node built over `n` keys with `slots` slots.
    pub(crate) fn built(slots: u64, model: Model, n: u64) -> NodeHeader {
        NodeHeader {
            slots,
            model,
            size: n,
            build_size: n,
            inserts: 0,
            conflicts: 0,
        }
    }

    /// The node's bytes (header and slots).
    pub(crate) fn bytes(&self) -> u64 {
        node_bytes(self.slots)
    }

    /// Node-space address of slot `i` of the node at `addr`.
    #[inline]
    pub(crate) fn slot_addr(addr: u64, i: u64) -> u64 {
        addr + NODE_HDR_LEN + SLOT_LEN * i
    }

    /// LIPP's rebuild rule (Wu et al.): the subtree has grown to at least
    /// 4× the keys it was built with, holds at least 64, and at least one in
    /// ten of the inserts since its build created a child node.
    pub(crate) fn needs_rebuild(&self) -> bool {
        self.size >= 64
            && self.size >= self.build_size.saturating_mul(4)
            && self.conflicts.saturating_mul(10) >= self.inserts
    }

    /// Encodes the header into `b` (at least [`NODE_HDR_LEN`] bytes).
    pub(crate) fn encode(&self, b: &mut [u8]) {
        put_u32(b, 0, self.slots.saturating_sub(1) as u32);
        put_u32(b, 4, 0);
        put_u64(b, 8, self.model.base);
        put_u64(b, 16, self.model.slope.to_bits());
        put_u64(b, 24, self.model.intercept.to_bits());
        put_u64(b, 32, self.size);
        put_u64(b, 40, self.build_size);
        put_u64(b, 48, self.inserts);
        put_u64(b, 56, self.conflicts);
    }

    /// Decodes and checks the header of the node at `addr` from `b`; the
    /// node must end within `tail`. `page` names the page for errors.
    pub(crate) fn decode(b: &[u8], addr: u64, tail: u64, file: &str, page: u64) -> Result<NodeHeader> {
        let bad = |what: String| Error::corruption(file, page, format!("LIPP node at {addr}: {what}"));
        let field = |o: usize| get_u64(b, o).ok_or_else(|| bad("header cut short".into()));
        let slots = u64::from(get_u32(b, 0).ok_or_else(|| bad("header cut short".into()))?) + 1;
        let h = NodeHeader {
            slots,
            model: Model {
                base: field(8)?,
                slope: f64::from_bits(field(16)?),
                intercept: f64::from_bits(field(24)?),
            },
            size: field(32)?,
            build_size: field(40)?,
            inserts: field(48)?,
            conflicts: field(56)?,
        };
        if get_u32(b, 4) != Some(0) {
            return Err(bad("nonzero reserved word".into()));
        }
        if !h.model.slope.is_finite() || h.model.slope < 0.0 || !h.model.intercept.is_finite() {
            return Err(bad(format!(
                "model slope {} intercept {}",
                h.model.slope, h.model.intercept
            )));
        }
        if addr.saturating_add(h.bytes()) > tail {
            return Err(bad(format!(
                "{} slots run past the {tail} node-space bytes",
                slots
            )));
        }
        Ok(h)
    }
}

/// A decoded slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Empty.
    Null,
    /// A record.
    Data(u64, u64),
    /// A child node at this address.
    Node(u64),
}

impl Slot {
    /// Encodes the slot into `b` (at least [`SLOT_LEN`] bytes).
    pub(crate) fn encode(&self, b: &mut [u8]) {
        let (t, x, y) = match *self {
            Slot::Null => (SLOT_NULL, 0, 0),
            Slot::Data(k, v) => (SLOT_DATA, k, v),
            Slot::Node(a) => (SLOT_NODE, a, 0),
        };
        if let Some(p) = b.first_mut() {
            *p = t;
        }
        put_u64(b, 1, x);
        put_u64(b, 9, y);
    }

    /// Decodes a slot; an unknown type or a child address outside `tail`
    /// is [`Error::Corruption`] naming `page`.
    pub(crate) fn decode(b: &[u8], tail: u64, file: &str, page: u64) -> Result<Slot> {
        let bad = |what: String| Error::corruption(file, page, format!("LIPP slot: {what}"));
        let x = get_u64(b, 1).ok_or_else(|| bad("cut short".into()))?;
        let y = get_u64(b, 9).ok_or_else(|| bad("cut short".into()))?;
        match b.first().copied() {
            Some(SLOT_NULL) => Ok(Slot::Null),
            Some(SLOT_DATA) => Ok(Slot::Data(x, y)),
            Some(SLOT_NODE) if x.saturating_add(node_bytes(1)) <= tail => Ok(Slot::Node(x)),
            Some(SLOT_NODE) => Err(bad(format!("child at {x} outside the {tail} node-space bytes"))),
            t => Err(bad(format!("unknown slot type {t:?}"))),
        }
    }
}
