//! Bulk load: sorted records in, a packed B+-tree file out.
//!
//! Leaves are written first, in key order, as pages `1..=L` (each leaf links
//! to the page after it), then each inner level above them, bottom-up, with
//! the root last. Pages are assembled in a buffer of [`WRITE_BATCH_PAGES`]
//! pages and written with one call per full buffer, so the build is a single
//! sequential pass. The meta page (page 0) is written last, after the nodes
//! are synced, and then synced itself.

use super::format::{
    BTREE_FILE_ID, InnerNode, Meta, NO_PAGE, inner_fanout, leaf_put, node_capacity, seal_leaf, separator,
};
use crate::format::page::check_page_size;
use crate::pager::PageSpace;
use crate::storage::{AlignedBuf, Sink};
use crate::{Error, Result};

/// Pages assembled per write call.
pub(super) const WRITE_BATCH_PAGES: usize = 256;

/// Records per leaf and children per inner node for a page size and fill
/// factor (percent, `1..=100`): `max(1, ⌊255·fill/100⌋)` records and
/// `max(2, ⌊256·fill/100⌋)` children on 4 KiB pages.
pub(super) fn fill_targets(page_size: usize, fill: u32) -> (usize, usize) {
    let f = fill.clamp(1, 100) as usize;
    let leaf = (node_capacity(page_size) * f / 100).max(1);
    let inner = (inner_fanout(page_size) * f / 100).max(2);
    (leaf, inner)
}

/// Checks a fill factor: an integer percent in `1..=100`.
pub(crate) fn check_fill(fill: u64) -> Result<u32> {
    if !(1..=100).contains(&fill) {
        return Err(Error::invalid(format!(
            "fill must be a percentage from 1 to 100, got {fill}"
        )));
    }
    Ok(fill as u32)
}

/// Streams strictly increasing records into a new B+-tree file.
///
/// Each leaf receives `⌊capacity · fill / 100⌋` records (the last leaf the
/// remainder), each inner node `⌊fanout · fill / 100⌋` children (the last
/// node of a level the remainder). The separator between two neighbouring
/// children is *last key of the left child + 1*, so a lookup of any key
/// between two stored keys is routed to the leaf holding its lower bound
/// (or, for `btree-ld`, the roundest value up to the right child's first
/// key: [`separator`]).
#[derive(Debug)]
pub(crate) struct BulkLoader {
    sink: Box<dyn Sink>,
    page_size: usize,
    fill: u32,
    leaf_target: usize,
    inner_target: usize,
    batch: AlignedBuf,
    /// Page number of batch slot 0.
    batch_first: u64,
    /// Batch slots in use; when a leaf is open it is the last one.
    batch_len: usize,
    /// Records on the open leaf.
    in_leaf: usize,
    leaves: u64,
    n: u64,
    last_key: Option<u64>,
    /// Separator of each leaf (the smallest key routed to it); `seps[0]`
    /// is unused.
    seps: Vec<u64>,
    /// Written into the meta page (0: none).
    build_id: u64,
    /// Separators by [`separator`]'s rule for `round`.
    round: bool,
}

impl BulkLoader {
    /// Starts a tree on `sink`, which must have one page reserved at its
    /// start for the meta page (see [`Directory::create_sink`](crate::storage::Directory::create_sink)), with pages
    /// of `page_size` bytes and fill factor `fill` percent. The pages are
    /// appended in order; [`finish`](BulkLoader::finish) writes the meta page
    /// into the reserved page and makes the file durable.
    pub(crate) fn new(sink: Box<dyn Sink>, page_size: usize, fill: u32) -> Result<Self> {
        check_page_size(page_size)?;
        let fill = check_fill(fill as u64)?;
        let (leaf_target, inner_target) = fill_targets(page_size, fill);
        if sink.position() != page_size as u64 {
            return Err(Error::invalid(format!(
                "a B+-tree sink must reserve one {page_size}-byte page for the meta page, not {} bytes ({})",
                sink.position(),
                sink.name()
            )));
        }
        Ok(BulkLoader {
            sink,
            page_size,
            fill,
            leaf_target,
            inner_target,
            batch: AlignedBuf::zeroed(page_size * WRITE_BATCH_PAGES),
            batch_first: 1,
            batch_len: 0,
            in_leaf: 0,
            leaves: 0,
            n: 0,
            last_key: None,
            seps: Vec::new(),
            build_id: 0,
            round: false,
        })
    }

    /// Sets the build id the meta page carries (0, the default: none).
    pub(crate) fn set_build_id(&mut self, build_id: u64) {
        self.build_id = build_id;
    }

    /// Picks round separators ([`round_separator`], for `btree-ld`) instead
    /// of *last key + 1*.
    pub(crate) fn set_round_separators(&mut self, round: bool) {
        self.round = round;
    }

    /// Appends a record. Keys must be strictly increasing:
    /// [`Error::OutOfOrder`] names the position and both keys otherwise.
    #[inline]
    pub(crate) fn push(&mut self, key: u64, value: u64) -> Result<()> {
        match self.last_key {
            Some(prev) if key <= prev => {
                return Err(Error::OutOfOrder {
                    position: self.n,
                    previous: prev,
                    got: key,
                });
            }
            Some(prev) if self.in_leaf == self.leaf_target => {
                self.start_leaf(separator(prev, key, self.round))?
            }
            None => self.start_leaf(0)?,
            Some(_) => {}
        }
        let start = self.batch_len.saturating_sub(1) * self.page_size;
        let page = self
            .batch
            .get_mut(start..start + self.page_size)
            .ok_or_else(|| Error::invalid("bulk load batch slot out of range"))?;
        leaf_put(page, self.in_leaf, key, value);
        self.in_leaf += 1;
        self.n += 1;
        self.last_key = Some(key);
        Ok(())
    }

    /// The batch slot `i` as a page.
    fn slot(&mut self, i: usize) -> Result<&mut [u8]> {
        let start = i * self.page_size;
        self.batch
            .get_mut(start..start + self.page_size)
            .ok_or_else(|| Error::invalid("bulk load batch slot out of range"))
    }

    /// Takes the next batch slot (flushing a full batch first) and zeroes it.
    fn next_slot(&mut self) -> Result<usize> {
        if self.batch_len == WRITE_BATCH_PAGES {
            self.flush()?;
        }
        let i = self.batch_len;
        self.batch_len += 1;
        self.slot(i)?.fill(0);
        Ok(i)
    }

    /// Seals the open leaf (linking it to the page after it when `more`).
    fn seal_open_leaf(&mut self, more: bool) -> Result<()> {
        let i = self.batch_len.saturating_sub(1);
        let page_no = self.batch_first + i as u64;
        let count = self.in_leaf;
        let next = if more { page_no + 1 } else { NO_PAGE };
        seal_leaf(self.slot(i)?, page_no, count, next);
        Ok(())
    }

    /// Opens a new leaf whose separator is `sep`.
    fn start_leaf(&mut self, sep: u64) -> Result<()> {
        if self.leaves > 0 {
            self.seal_open_leaf(true)?;
        }
        self.next_slot()?;
        self.leaves += 1;
        self.in_leaf = 0;
        self.seps.push(sep);
        Ok(())
    }

    /// Writes the sealed batch slots.
    fn flush(&mut self) -> Result<()> {
        if self.batch_len == 0 {
            return Ok(());
        }
        let bytes = self.batch_len * self.page_size;
        let part = self
            .batch
            .get(..bytes)
            .ok_or_else(|| Error::invalid("bulk load batch out of range"))?;
        if self.sink.position() != self.batch_first * self.page_size as u64 {
            return Err(Error::invalid("bulk load batch out of order"));
        }
        self.sink.append(part)?;
        self.batch_first += self.batch_len as u64;
        self.batch_len = 0;
        Ok(())
    }

    /// Writes the last leaf, the inner levels and the meta page, syncs, and
    /// returns the meta page's contents.
    pub(crate) fn finish(mut self) -> Result<Meta> {
        if self.leaves == 0 {
            // An empty tree is one empty leaf.
            self.start_leaf(0)?;
        }
        self.seal_open_leaf(false)?;
        let mut level_first = 1u64;
        let mut level_count = self.leaves;
        let mut seps = std::mem::take(&mut self.seps);
        let mut height = 1u32;
        let mut inner = 0u64;
        let mut node = InnerNode::default();
        while level_count > 1 {
            let next_first = self.batch_first + self.batch_len as u64;
            let nodes = level_count.div_ceil(self.inner_target as u64);
            let mut next_seps = Vec::with_capacity(nodes as usize);
            for j in 0..nodes {
                let a = j * self.inner_target as u64;
                let b = (a + self.inner_target as u64).min(level_count);
                node.keys.clear();
                node.children.clear();
                for c in a..b {
                    node.children.push(level_first + c);
                    if c > a {
                        node.keys.push(seps.get(c as usize).copied().unwrap_or(0));
                    }
                }
                next_seps.push(seps.get(a as usize).copied().unwrap_or(0));
                let i = self.next_slot()?;
                let page_no = self.batch_first + i as u64;
                node.encode(self.slot(i)?, page_no)?;
            }
            inner += nodes;
            height += 1;
            level_first = next_first;
            level_count = nodes;
            seps = next_seps;
        }
        self.flush()?;
        let meta = Meta {
            page_size: self.page_size,
            root: level_first,
            height,
            fill: self.fill,
            n: self.n,
            leaves: self.leaves,
            inner,
            space: PageSpace {
                page_count: self.batch_first,
                free_head: NO_PAGE,
                free_pages: 0,
            },
            build_id: self.build_id,
        };
        meta.check(self.sink.name())?;
        let mut page = AlignedBuf::zeroed(self.page_size);
        meta.checkpoint().encode(&BTREE_FILE_ID, &mut page);
        self.sink.finish(&page)?;
        Ok(meta)
    }
}

/// Bulk loads `keys` (strictly increasing) with each key's rank as its value.
pub(crate) fn load_ranked(sink: Box<dyn Sink>, keys: &[u64], page_size: usize, fill: u32) -> Result<Meta> {
    let mut b = BulkLoader::new(sink, page_size, fill)?;
    for (i, &k) in keys.iter().enumerate() {
        b.push(k, i as u64)?;
    }
    b.finish()
}
