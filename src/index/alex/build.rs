//! Bulk load: sorted records in, an `alex` file out, written sequentially
//! through a [`Sink`].
//!
//! The records are planned top-down by [`Planner`] (ALEX's bulk load
//! builds inner nodes whose slots group keys greedily; here the data-node
//! budget is `max_cap * 0.7 / 2` records, see the module documentation),
//! then the data nodes are written in key order from page 1 (each a run of
//! pages, linked to its neighbours), the inner nodes packed into the pages
//! after them, and the checkpoint page last, through [`Sink::finish`].

use std::collections::BTreeMap;

use super::Alex;
use super::format::{ALEX_FILE_ID, InnerNode, Meta, max_fanout, seal_inner};
use super::tree::{Out, Planner, materialize};
use crate::format::page::{PAGE_HEADER_LEN, check_page_size};
use crate::index::Record;
use crate::index::fiting::PageWriter;
use crate::pager::{NO_PAGE, PageSpace};
use crate::storage::{AlignedBuf, Sink};
use crate::{Error, Result};

/// Streams strictly increasing records into a new `alex` file.
#[derive(Debug)]
pub(crate) struct AlexLoader {
    out: PageWriter,
    ps: usize,
    max_pages: u32,
    recs: Vec<Record>,
    build_id: u64,
}

impl AlexLoader {
    /// Starts a file on `sink` (one page reserved for the checkpoint) with
    /// `page_size`-byte pages and data nodes of at most `max_pages` pages.
    pub(crate) fn new(sink: Box<dyn Sink>, page_size: usize, max_pages: u32, build_id: u64) -> Result<Self> {
        check_page_size(page_size)?;
        Ok(AlexLoader {
            out: PageWriter::new(sink, page_size)?,
            ps: page_size,
            max_pages,
            recs: Vec::new(),
            build_id,
        })
    }

    /// Appends a record; keys must be strictly increasing
    /// ([`Error::OutOfOrder`] otherwise).
    pub(crate) fn push(&mut self, key: u64, value: u64) -> Result<()> {
        if let Some(&(prev, _)) = self.recs.last() {
            if key <= prev {
                return Err(Error::OutOfOrder {
                    position: self.recs.len() as u64,
                    previous: prev,
                    got: key,
                });
            }
        }
        self.recs.push((key, value));
        Ok(())
    }

    /// Writes the nodes and the checkpoint page; returns the file's state.
    pub(crate) fn finish(self) -> Result<Meta> {
        let ps = self.ps;
        let budget = Alex::budget(ps, self.max_pages);
        let mut planner = Planner::new(&self.recs, budget, max_fanout(ps));
        let root = planner.plan(0, self.recs.len(), false);
        let mut out = SinkOut {
            w: self.out,
            ps,
            next: 1,
            tail: NO_PAGE,
            inner: BTreeMap::new(),
        };
        let placed = materialize(&planner, &[root], &mut out, ps, NO_PAGE, NO_PAGE)?;
        for (page, (mut buf, nodes, used)) in std::mem::take(&mut out.inner) {
            let (no, slot) = out.w.page()?;
            if no != page {
                return Err(Error::invalid("inner pages out of order in the bulk load"));
            }
            seal_inner(&mut buf, page, nodes, used);
            slot.copy_from_slice(&buf);
        }
        let meta = Meta {
            page_size: ps,
            root: placed.roots.first().copied().unwrap_or(0),
            n: self.recs.len() as u64,
            tail: out.tail,
            data_nodes: placed.data_nodes,
            inner_nodes: placed.inner_nodes,
            max_pages: self.max_pages,
            space: PageSpace {
                page_count: out.next,
                free_head: NO_PAGE,
                free_pages: 0,
            },
            build_id: self.build_id,
        };
        meta.check(out.w.name())?;
        let mut page = AlignedBuf::zeroed(ps);
        meta.checkpoint().encode(&ALEX_FILE_ID, &mut page);
        out.w.finish(&page)?;
        Ok(meta)
    }
}

/// [`Out`] on the sink: pages numbered in the order they are reserved.
struct SinkOut {
    w: PageWriter,
    ps: usize,
    /// Next page to reserve.
    next: u64,
    /// Inner page being filled.
    tail: u64,
    /// Inner pages: (bytes, nodes, used).
    inner: BTreeMap<u64, (AlignedBuf, usize, usize)>,
}

impl Out for SinkOut {
    fn alloc_data(&mut self, pages: usize) -> Result<u64> {
        if self.tail != NO_PAGE {
            return Err(Error::invalid(
                "data node reserved after inner nodes in the bulk load",
            ));
        }
        let head = self.next;
        self.next += pages as u64;
        Ok(head)
    }

    fn alloc_inner(&mut self, len: usize) -> Result<u64> {
        let ps = self.ps;
        if let Some((_, nodes, used)) = self.inner.get_mut(&self.tail) {
            if *used + len <= ps {
                let a = self.tail * ps as u64 + *used as u64;
                *used += len;
                *nodes += 1;
                return Ok(a);
            }
        }
        if PAGE_HEADER_LEN + len > ps {
            return Err(Error::invalid("inner node larger than a page"));
        }
        let page = self.next;
        self.next += 1;
        self.tail = page;
        self.inner
            .insert(page, (AlignedBuf::zeroed(ps), 1, PAGE_HEADER_LEN + len));
        Ok(page * ps as u64 + PAGE_HEADER_LEN as u64)
    }

    fn put_data(&mut self, head: u64, image: &[u8]) -> Result<()> {
        for (i, chunk) in image.chunks_exact(self.ps).enumerate() {
            let (no, slot) = self.w.page()?;
            if no != head + i as u64 {
                return Err(Error::invalid("data nodes out of order in the bulk load"));
            }
            slot.copy_from_slice(chunk);
        }
        Ok(())
    }

    fn put_inner(&mut self, addr: u64, node: &InnerNode) -> Result<()> {
        let ps = self.ps as u64;
        let (buf, _, _) = self
            .inner
            .get_mut(&(addr / ps))
            .ok_or_else(|| Error::invalid("inner node on a page not reserved"))?;
        node.encode(buf, (addr % ps) as usize)
    }
}
