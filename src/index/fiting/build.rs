//! Bulk load: sorted records in, a `fiting` file out, in one sequential pass.
//!
//! Records stream through the streaming optimal PLA ([`PlaStream`], error
//! `epsilon`); each finished segment's records are written as a run of full
//! segment pages right after the previous segment (pages `1..`), so each
//! segment's sibling link is the page after its run (the last one has
//! none). No insert buffer is allocated yet. Then the directory is written
//! bottom-up (full nodes, root last) and the checkpoint page last, through
//! [`Sink::finish`].

use super::format::{
    DirNode, Entry, FITING_FILE_ID, Meta, SegInfo, dir_capacity, encode_seg_page, seg_capacity,
};
use crate::format::page::check_page_size;
use crate::model::{PlaStream, Segment};
use crate::pager::{NO_PAGE, PageSpace};
use crate::storage::{AlignedBuf, Sink};
use crate::{Error, Result};

/// Pages assembled per write call.
const WRITE_BATCH_PAGES: usize = 256;

/// Appends whole pages to a sink in batches (shared with `alex`'s bulk
/// load).
#[derive(Debug)]
pub(crate) struct PageWriter {
    sink: Box<dyn Sink>,
    ps: usize,
    batch: AlignedBuf,
    len: usize,
    /// Page number of batch slot 0.
    first: u64,
}

impl PageWriter {
    /// A writer on `sink`, which must have reserved page 0 (one page).
    pub(crate) fn new(sink: Box<dyn Sink>, ps: usize) -> Result<Self> {
        if sink.position() != ps as u64 {
            return Err(Error::invalid(format!(
                "a paged index sink must reserve one {ps}-byte page for the checkpoint ({})",
                sink.name()
            )));
        }
        Ok(PageWriter {
            sink,
            ps,
            batch: AlignedBuf::zeroed(ps * WRITE_BATCH_PAGES),
            len: 0,
            first: 1,
        })
    }

    /// The sink's name (for errors).
    pub(crate) fn name(&self) -> &str {
        self.sink.name()
    }

    /// Flushes, then finishes the sink with the checkpoint page `page`.
    pub(crate) fn finish(mut self, page: &[u8]) -> Result<()> {
        self.flush()?;
        self.sink.finish(page)
    }

    /// Number the next page gets.
    pub(crate) fn next_page(&self) -> u64 {
        self.first + self.len as u64
    }

    /// Takes the next page slot: its number and bytes.
    pub(crate) fn page(&mut self) -> Result<(u64, &mut [u8])> {
        if self.len == WRITE_BATCH_PAGES {
            self.flush()?;
        }
        let no = self.next_page();
        let s = self.len * self.ps;
        self.len += 1;
        let p = self
            .batch
            .get_mut(s..s + self.ps)
            .ok_or_else(|| Error::invalid("bulk load batch slot out of range"))?;
        Ok((no, p))
    }

    /// Writes the batched pages.
    pub(crate) fn flush(&mut self) -> Result<()> {
        let bytes = self.len * self.ps;
        let part = self
            .batch
            .get(..bytes)
            .ok_or_else(|| Error::invalid("bulk load batch out of range"))?;
        if !part.is_empty() {
            self.sink.append(part)?;
            self.sink.write_behind()?;
        }
        self.first += self.len as u64;
        self.len = 0;
        Ok(())
    }
}

/// Streams strictly increasing records into a new `fiting` file.
#[derive(Debug)]
pub(crate) struct FitingLoader {
    out: PageWriter,
    eps: u64,
    buffer: u32,
    pla: PlaStream,
    /// Records not yet written; `pending[0]` has global index `pending_start`.
    pending: Vec<(u64, u64)>,
    pending_start: usize,
    n: u64,
    last_key: Option<u64>,
    entries: Vec<Entry>,
    build_id: u64,
}

impl FitingLoader {
    /// Starts a file on `sink` (one page reserved for the checkpoint) with
    /// `page_size`-byte pages, error bound `eps` and buffers of `buffer`
    /// records.
    pub(crate) fn new(
        sink: Box<dyn Sink>,
        page_size: usize,
        eps: u64,
        buffer: u32,
        build_id: u64,
    ) -> Result<Self> {
        check_page_size(page_size)?;
        Ok(FitingLoader {
            out: PageWriter::new(sink, page_size)?,
            eps,
            buffer,
            pla: PlaStream::new(),
            pending: Vec::new(),
            pending_start: 0,
            n: 0,
            last_key: None,
            entries: Vec::new(),
            build_id,
        })
    }

    /// Appends a record; keys must be strictly increasing
    /// ([`Error::OutOfOrder`] otherwise).
    pub(crate) fn push(&mut self, key: u64, value: u64) -> Result<()> {
        if let Some(prev) = self.last_key {
            if key <= prev {
                return Err(Error::OutOfOrder {
                    position: self.n,
                    previous: prev,
                    got: key,
                });
            }
        }
        self.last_key = Some(key);
        let i = self.n as i128;
        let e = self.eps as i128;
        self.pending.push((key, value));
        self.n += 1;
        if let Some(seg) = self.pla.push(key, i - e, i + e) {
            self.write_segment(&seg, true)?;
        }
        Ok(())
    }

    /// Writes the pending records of `seg` as one segment.
    fn write_segment(&mut self, seg: &Segment, more: bool) -> Result<()> {
        let from = seg.start.saturating_sub(self.pending_start);
        let to = from + seg.len;
        let recs: Vec<(u64, u64)> = self
            .pending
            .get(from..to)
            .ok_or_else(|| Error::invalid("PLA segment outside the pending records"))?
            .to_vec();
        self.pending.drain(..to);
        self.pending_start = seg.end();
        let local = Segment {
            intercept: seg.intercept - seg.start as f64,
            ..*seg
        };
        let key = if self.entries.is_empty() { 0 } else { seg.first_key };
        self.emit(key, &local, &recs, more)
    }

    /// Writes one segment of `recs` with model `seg` (local positions).
    fn emit(&mut self, key: u64, seg: &Segment, recs: &[(u64, u64)], more: bool) -> Result<()> {
        let cap = seg_capacity(self.out.ps);
        let pages = recs.len().div_ceil(cap).max(1);
        let head = self.out.next_page();
        let entry = Entry {
            key,
            page: head,
            first_key: seg.first_key,
            slope: seg.slope,
            intercept: seg.intercept,
            data_pages: u32::try_from(pages).map_err(|_| Error::invalid("segment too long"))?,
            buffer: NO_PAGE,
        };
        let next = if more { head + pages as u64 } else { NO_PAGE };
        let info = SegInfo::of(&entry, next);
        for p in 0..pages {
            let part = recs.get(p * cap..).unwrap_or(&[]);
            let part = part.get(..cap.min(part.len())).unwrap_or(&[]);
            let (no, page) = self.out.page()?;
            encode_seg_page(page, no, p as u32, &info, part)?;
        }
        self.entries.push(entry);
        Ok(())
    }

    /// Writes the last segment, the directory and the checkpoint page;
    /// returns the file's state.
    pub(crate) fn finish(mut self) -> Result<Meta> {
        match self.pla.finish() {
            Some(seg) => self.write_segment(&seg, false)?,
            None => {
                let empty = Segment {
                    first_key: 0,
                    start: 0,
                    len: 0,
                    slope: 0.0,
                    intercept: 0.0,
                    slope_lo: 0.0,
                    slope_hi: 0.0,
                };
                self.emit(0, &empty, &[], false)?;
            }
        }
        let ps = self.out.ps;
        let cap = dir_capacity(ps);
        let segments = self.entries.len() as u64;
        let mut level = std::mem::take(&mut self.entries);
        let mut leaf = true;
        let mut height = 0u32;
        let mut nodes = 0u32;
        let root = loop {
            let mut up = Vec::with_capacity(level.len().div_ceil(cap));
            for chunk in level.chunks(cap) {
                let node = DirNode {
                    leaf,
                    entries: chunk.to_vec(),
                };
                let (no, page) = self.out.page()?;
                node.encode(page, no)?;
                up.push(Entry::child(chunk.first().map_or(0, |e| e.key), no));
                nodes += 1;
            }
            height += 1;
            leaf = false;
            if up.len() == 1 {
                break up.first().map_or(NO_PAGE, |e| e.page);
            }
            level = up;
        };
        self.out.flush()?;
        let meta = Meta {
            page_size: ps,
            root,
            n: self.n,
            segments,
            epsilon: u32::try_from(self.eps).map_err(|_| Error::invalid("epsilon too large"))?,
            buffer: self.buffer,
            height,
            dir_nodes: nodes,
            space: PageSpace {
                page_count: self.out.first,
                free_head: NO_PAGE,
                free_pages: 0,
            },
            build_id: self.build_id,
        };
        meta.check(self.out.sink.name())?;
        let mut page = AlignedBuf::zeroed(ps);
        meta.checkpoint().encode(&FITING_FILE_ID, &mut page);
        self.out.sink.finish(&page)?;
        Ok(meta)
    }
}
