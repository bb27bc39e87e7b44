//! Building LIPP subtrees: the plan (FMCD models, keys placed by them,
//! conflicting keys in child nodes built the same way), its bytes in the
//! node space (nodes in pre-order, each followed by its children's
//! subtrees), and the bulk load of a whole file through a [`Sink`].
//!
//! The same plan builds the bulk-loaded tree, the two-key child an insert
//! creates on a conflict, and the subtree a rebuild writes.

use super::format::{LIPP_FILE_ID, MAX_SLOTS, Meta, Model, NodeHeader, Slot, pages_for, payload, slots_for};
use crate::format::page::{self, PAGE_HEADER_LEN, PageHeader, PageType, check_page_size};
use crate::index::Record;
use crate::pager::{NO_PAGE, PageSpace};
use crate::storage::{AlignedBuf, Sink};
use crate::{Error, Result};

/// Pages assembled per sink append.
const WRITE_BATCH_PAGES: usize = 256;

/// What a planned slot holds (empty slots are not listed).
#[derive(Debug)]
pub(crate) enum Planned {
    /// One record.
    Data(u64, u64),
    /// Conflicting records: a child node.
    Child(Box<PlanNode>),
}

/// A planned node and its subtree.
#[derive(Debug)]
pub(crate) struct PlanNode {
    pub hdr: NodeHeader,
    /// Non-empty slots by increasing slot.
    pub entries: Vec<(u64, Planned)>,
    /// Node-space bytes of the whole subtree.
    pub bytes: u64,
    /// Nodes of the whole subtree.
    pub nodes: u64,
}

/// Plans a subtree over `recs` (keys strictly increasing).
///
/// Errors: [`Error::InvalidInput`] for more keys than one node can hold.
pub(crate) fn plan(recs: &[Record]) -> Result<PlanNode> {
    let n = recs.len();
    let slots = slots_for(n);
    if slots > MAX_SLOTS {
        return Err(Error::invalid(format!(
            "a LIPP node over {n} keys needs too many slots"
        )));
    }
    let key = |i: usize| recs.get(i).map_or(0, |r| r.0);
    let model = Model::fmcd(&key, n, slots);
    let hdr = NodeHeader::built(slots, model, n as u64);
    let mut entries = Vec::new();
    let mut bytes = hdr.bytes();
    let mut nodes = 1;
    let mut i = 0;
    while let Some(&(k, v)) = recs.get(i) {
        let s = model.slot(k, slots);
        let mut j = i + 1;
        while recs.get(j).is_some_and(|r| model.slot(r.0, slots) == s) {
            j += 1;
        }
        if j == i + 1 {
            entries.push((s, Planned::Data(k, v)));
        } else {
            let group = recs.get(i..j).unwrap_or(&[]);
            if group.len() == n {
                return Err(Error::invalid(format!(
                    "LIPP model puts all {n} keys from {k} into one slot"
                )));
            }
            let child = plan(group)?;
            bytes += child.bytes;
            nodes += child.nodes;
            entries.push((s, Planned::Child(Box::new(child))));
        }
        i = j;
    }
    Ok(PlanNode {
        hdr,
        entries,
        bytes,
        nodes,
    })
}

/// Appends the bytes of the subtree `node`, placed at node-space address
/// `addr`, to `out`: the node, then each child's subtree in slot order.
pub(crate) fn serialize(node: &PlanNode, addr: u64, out: &mut Vec<u8>) -> Result<()> {
    let start = out.len();
    let len = usize::try_from(node.hdr.bytes()).map_err(|_| Error::invalid("LIPP node too large"))?;
    out.resize(start + len, 0);
    let b = out
        .get_mut(start..start + len)
        .ok_or_else(|| Error::invalid("LIPP node buffer out of range"))?;
    node.hdr.encode(b);
    let mut next = addr + node.hdr.bytes();
    for (s, e) in &node.entries {
        let slot = match e {
            Planned::Data(k, v) => Slot::Data(*k, *v),
            Planned::Child(c) => {
                let at = next;
                next += c.bytes;
                Slot::Node(at)
            }
        };
        let o = (NodeHeader::slot_addr(0, *s)) as usize;
        let sb = b
            .get_mut(o..)
            .ok_or_else(|| Error::invalid("LIPP slot outside its node"))?;
        slot.encode(sb);
    }
    let mut next = addr + node.hdr.bytes();
    for (_, e) in &node.entries {
        if let Planned::Child(c) = e {
            serialize(c, next, out)?;
            next += c.bytes;
        }
    }
    Ok(())
}

/// Seals `page` (a whole page, payload filled in) as node page `page_no`.
pub(crate) fn seal_node_page(page: &mut [u8], page_no: u64) {
    page::seal(
        page,
        page_no,
        PageHeader {
            kind: PageType::LippNode,
            flags: 0,
            count: 0,
            aux: 0,
        },
    );
}

/// Writes a new `lipp` file on `sink` (one page reserved for the
/// checkpoint) over `recs` (keys strictly increasing, checked): the planned
/// tree at node-space address 0, its pages in batches, then the checkpoint
/// page through [`Sink::finish`]. Returns the file's state.
pub(crate) fn bulk_load(mut sink: Box<dyn Sink>, ps: usize, recs: &[Record], build_id: u64) -> Result<Meta> {
    check_page_size(ps)?;
    if sink.position() != ps as u64 {
        return Err(Error::invalid(format!(
            "a LIPP sink must reserve one {ps}-byte page for the checkpoint ({})",
            sink.name()
        )));
    }
    for (i, w) in recs.windows(2).enumerate() {
        if let [a, b] = w {
            if b.0 <= a.0 {
                return Err(Error::OutOfOrder {
                    position: i as u64 + 1,
                    previous: a.0,
                    got: b.0,
                });
            }
        }
    }
    let root = plan(recs)?;
    let mut bytes = Vec::new();
    serialize(&root, 0, &mut bytes)?;
    let tail = bytes.len() as u64;
    let p = payload(ps) as usize;
    let mut batch = AlignedBuf::zeroed(ps * WRITE_BATCH_PAGES);
    let mut page_no = 1u64;
    for chunk in bytes.chunks(WRITE_BATCH_PAGES * p) {
        let pages = chunk.len().div_ceil(p);
        batch.fill(0);
        for (j, part) in chunk.chunks(p).enumerate() {
            let pg = batch
                .get_mut(j * ps..(j + 1) * ps)
                .ok_or_else(|| Error::invalid("LIPP bulk load batch out of range"))?;
            pg.get_mut(PAGE_HEADER_LEN..PAGE_HEADER_LEN + part.len())
                .ok_or_else(|| Error::invalid("LIPP page payload out of range"))?
                .copy_from_slice(part);
            seal_node_page(pg, page_no + j as u64);
        }
        let used = batch
            .get(..pages * ps)
            .ok_or_else(|| Error::invalid("LIPP bulk load batch out of range"))?;
        sink.append(used)?;
        sink.write_behind()?;
        page_no += pages as u64;
    }
    let meta = Meta {
        page_size: ps,
        root: 0,
        n: recs.len() as u64,
        tail,
        dead: 0,
        nodes: root.nodes,
        space: PageSpace {
            page_count: pages_for(ps, tail),
            free_head: NO_PAGE,
            free_pages: 0,
        },
        build_id,
    };
    meta.check(sink.name())?;
    let mut page = AlignedBuf::zeroed(ps);
    meta.checkpoint().encode(&LIPP_FILE_ID, &mut page);
    sink.finish(&page)?;
    Ok(meta)
}
