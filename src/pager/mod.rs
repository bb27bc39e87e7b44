//! `pager`: fixed-size pages of one read-write file, shared by every
//! page-based updatable structure (the B+-tree; later the FITing-tree,
//! dynamic PGM, ALEX and LIPP).
//!
//! The pager owns what is not specific to one structure: page 0, the
//! *checkpoint page* (the owner's magic, version and page size, a
//! [`ROOT_SLOT_LEN`]-byte slot for the owner's root fields, and the
//! [`PageSpace`]: pages in the file and the free list), the free-page
//! format, allocation and freeing, and page reads and writes through the
//! [`IoContext`] (counted in its [`IoStats`](crate::storage::IoStats), served
//! by its page cache if it has one). Node formats, splits and the meaning of
//! the root slot stay with the owner. Format: `docs/format/pager.md`.
//!
//! # Owner's protocol
//!
//! - Create: [`Pager::create`] writes a checkpoint of an empty file; a bulk
//!   loader may instead write its pages directly and finish with
//!   [`Checkpoint::write`].
//! - Open: [`Pager::open_journaled`] (journal recovery, then
//!   [`Checkpoint::load`]'s header checks), the owner checks its root slot,
//!   then [`Checkpoint::check_file`]. ([`Checkpoint::load`] then
//!   [`Pager::open`] gives a pager without a journal.)
//! - Update: [`Pager::allocate`] and [`Pager::free`] change a [`PageSpace`]
//!   the owner keeps beside its root fields (under the owner's lock, so one
//!   checkpoint captures both consistently); pages are written in place with
//!   [`Pager::write_page`].
//! - Checkpoint: [`Pager::checkpoint`] writes page 0 and then syncs the
//!   file. Every page write before it is durable when it returns.
//!
//! # Durability
//!
//! With a journal ([`Pager::open_journaled`]) the file is crash-safe at
//! checkpoints: before a page that existed at the last checkpoint is first
//! overwritten, its checkpoint image goes to `<file>-journal` and the journal
//! is synced; a checkpoint syncs the file, writes page 0 with the next
//! checkpoint number, syncs, and empties the journal; opening rolls back to
//! the checkpoint the journal protects. A crash at any point (power loss, a
//! torn page write) reopens exactly at the last checkpoint. Cost: one
//! journal append and sync per write call that first touches old pages in a
//! checkpoint interval, one more sync and a journal reset per checkpoint
//! (counted as `journal_*` in [`IoStats`](crate::storage::IoStats)). Format
//! and recovery rules: `docs/format/pager.md`. A read-only user cannot
//! recover and refuses a file with a pending journal
//! ([`Pager::journal_pending`]).
//!
//! Without a journal ([`Pager::open`]) a crash between checkpoints can leave
//! a mix of old and new pages.
//!
//! # Thread safety
//!
//! [`Pager`] is `Send + Sync` and holds no mutable state: reads and writes
//! take `&self`; the [`PageSpace`] is passed in by the owner, who serialises
//! writers.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod blocks;
mod format;
mod journal;
mod owner;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use parking_lot::Mutex;

pub use blocks::{BlockCounts, BlockSnapshot, Role};
pub use format::{Checkpoint, FileId, META_PAGE, NO_PAGE, PageSpace, ROOT_SLOT_LEN, RootSlot};
pub(crate) use format::{encode_free, open_free};
pub use journal::{Recovery, journal_name};
pub use owner::{SlotReader, SlotWriter, WriteState};

use journal::Journal;

use crate::format::page::check_page_size;
use crate::storage::{AlignedBuf, Directory, IoContext, ReadReq, Storage};
use crate::{Error, Result};

/// The pages of one read-write file of fixed-size pages. See the module
/// documentation for the protocol an owner follows.
#[derive(Debug, Clone)]
pub struct Pager {
    storage: Arc<dyn Storage>,
    page_size: usize,
    id: FileId,
    /// The rollback journal ([`Pager::open_journaled`]); `None`: pages are
    /// overwritten without one.
    journal: Option<Arc<Mutex<Journal>>>,
    /// Pages fetched and written per [`Role`] (shared by clones).
    blocks: Arc<BlockCounts>,
    /// Reads in flight at most in [`Pager::read_pages_many`].
    queue_depth: usize,
}

impl Pager {
    /// Starts an empty file on `raw` (truncated first): writes and syncs a
    /// checkpoint with an all-zero root slot and no pages but page 0, then
    /// opens it through `io`. Returns the pager and that checkpoint.
    ///
    /// The file starts at checkpoint 0 with build id 0: a rollback journal
    /// left beside a file replaced this way would match it, so the caller
    /// removes it first.
    ///
    /// Errors: [`Error::InvalidInput`] for an unsupported page size or a
    /// page cache of another page size; the storage's I/O error.
    pub fn create(
        raw: Arc<dyn Storage>,
        io: &IoContext,
        id: FileId,
        page_size: usize,
    ) -> Result<(Pager, Checkpoint)> {
        check_page_size(page_size)?;
        let cp = Checkpoint {
            page_size,
            root: [0; ROOT_SLOT_LEN],
            space: PageSpace::new(),
            build_id: 0,
            number: 0,
        };
        raw.set_len(0)?;
        cp.write(&id, raw.as_ref())?;
        Ok((Pager::open(raw, io, id, page_size)?, cp))
    }

    /// A pager over `raw`, a file of `page_size`-byte pages whose checkpoint
    /// was loaded and checked (see the module documentation). Every read and
    /// write goes through `io` (its `page_size` is set to the file's).
    ///
    /// Errors: [`Error::InvalidInput`] if `io` has a page cache of another
    /// page size.
    pub fn open(raw: Arc<dyn Storage>, io: &IoContext, id: FileId, page_size: usize) -> Result<Pager> {
        if let Some(c) = &io.cache {
            if c.page_size() != page_size {
                return Err(Error::invalid(format!(
                    "page cache of {}-byte pages for a file of {}-byte pages",
                    c.page_size(),
                    page_size
                )));
            }
        }
        let io = IoContext {
            page_size,
            ..io.clone()
        };
        Ok(Pager {
            storage: io.wrap_rw(raw),
            page_size,
            id,
            journal: None,
            blocks: Arc::default(),
            queue_depth: io.queue_depth,
        })
    }

    /// Opens data file `name` of `dir` (already opened as `raw`) for
    /// writing with a rollback journal, `<name>-journal` beside it: first
    /// recovers (if the journal protects the checkpoint in page 0, or page 0
    /// fails its check and the journal holds it, writes the journaled images
    /// back and syncs; then empties the journal), then loads the checkpoint
    /// ([`Checkpoint::load`]) and opens the pager. The owner then checks its
    /// root slot and calls [`Checkpoint::check_file`]. Every later
    /// [`Pager::write_page`] and [`Pager::free`] journals first, and
    /// [`Pager::checkpoint`] numbers the checkpoints, so a crash at any point
    /// reopens at the last checkpoint.
    ///
    /// A rollback that restored pages is logged (`log::info`).
    ///
    /// Errors: those of [`Checkpoint::load`] and [`Pager::open`]; the
    /// storages' I/O errors.
    pub fn open_journaled(
        dir: Arc<dyn Directory>,
        name: &str,
        raw: Arc<dyn Storage>,
        io: &IoContext,
        id: FileId,
    ) -> Result<(Pager, Checkpoint, Recovery)> {
        let jname = journal_name(name);
        let (file, recovery) = if dir.exists(&jname) {
            let f = dir.open(&jname)?;
            let r = journal::recover(raw.as_ref(), f.as_ref(), &id)?;
            (Some(f), r)
        } else {
            (None, Recovery::default())
        };
        let cp = Checkpoint::load(raw.as_ref(), &id)?;
        if recovery.pages_restored > 0 {
            log::info!(
                "{} {}: rolled back {} pages to checkpoint {}",
                id.what,
                raw.name(),
                recovery.pages_restored,
                cp.number
            );
        }
        let mut pager = Pager::open(raw.clone(), io, id, cp.page_size)?;
        let j = Journal::new(dir, name, file, raw, io.stats.clone(), &cp);
        pager.journal = Some(Arc::new(Mutex::new(j)));
        Ok((pager, cp, recovery))
    }

    /// Whether the rollback journal beside data file `name` of `dir` (opened
    /// as `raw`) holds images that recovery would write back: a read-only
    /// user, who must not write, refuses such a file (see
    /// `docs/format/pager.md`).
    ///
    /// Errors: the storages' I/O errors.
    pub fn journal_pending(dir: &dyn Directory, name: &str, raw: &dyn Storage, id: &FileId) -> Result<bool> {
        let jname = journal_name(name);
        if !dir.exists(&jname) {
            return Ok(false);
        }
        journal::pending(raw, dir.open_read(&jname)?.as_ref(), id)
    }

    /// The file's name (for errors).
    pub fn name(&self) -> &str {
        self.storage.name()
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The file kind.
    pub fn id(&self) -> &FileId {
        &self.id
    }

    /// Byte offset of page `page_no`.
    #[inline]
    fn offset(&self, page_no: u64) -> u64 {
        page_no * self.page_size as u64
    }

    /// Reads page `page_no` into `buf` (one page; several consecutive pages
    /// if `buf` is longer) in one read call.
    #[inline]
    pub fn read_page(&self, role: Role, page_no: u64, buf: &mut [u8]) -> Result<()> {
        self.blocks.read(role, self.pages_in(buf.len()));
        self.storage.read_at(self.offset(page_no), buf)
    }

    /// Reads each page of `pages` (one page each) with up to the
    /// context's `queue_depth` reads in flight ([`ReadStorage::read_many`](crate::storage::ReadStorage::read_many)):
    /// the pages `read_page` would read one after another, one read call
    /// each, into fresh aligned buffers in the order of `pages`.
    pub fn read_pages_many(&self, role: Role, pages: &[u64]) -> Result<Vec<AlignedBuf>> {
        let mut bufs: Vec<AlignedBuf> = pages
            .iter()
            .map(|_| AlignedBuf::for_overwrite(self.page_size))
            .collect();
        let mut reqs: Vec<ReadReq<'_>> = pages
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&p, b)| ReadReq {
                offset: self.offset(p),
                buf: &mut b[..],
            })
            .collect();
        self.blocks.read(role, pages.len() as u64);
        self.storage.read_many(&mut reqs, self.queue_depth)?;
        drop(reqs);
        Ok(bufs)
    }

    /// Reads each run `(first, count)` of `runs` (`count` consecutive pages
    /// from page `first`, at least one) in one read call, with up to the
    /// context's `queue_depth` calls in flight: what [`Pager::read_page`]
    /// with a buffer of `count` pages would read for each, one after
    /// another, into fresh aligned buffers in the order of `runs`.
    pub fn read_runs_many(&self, role: Role, runs: &[(u64, u64)]) -> Result<Vec<AlignedBuf>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let mut bufs: Vec<AlignedBuf> = runs
            .iter()
            .map(|&(_, n)| AlignedBuf::for_overwrite(n.max(1) as usize * self.page_size))
            .collect();
        let mut reqs: Vec<ReadReq<'_>> = runs
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&(p, _), b)| ReadReq {
                offset: self.offset(p),
                buf: &mut b[..],
            })
            .collect();
        let pages: u64 = runs.iter().map(|&(_, n)| n.max(1)).sum();
        self.blocks.read(role, pages);
        self.storage.read_many(&mut reqs, self.queue_depth)?;
        drop(reqs);
        Ok(bufs)
    }

    /// Pages in `len` bytes (a partial page counts as one).
    #[inline]
    fn pages_in(&self, len: usize) -> u64 {
        len.div_ceil(self.page_size.max(1)) as u64
    }

    /// Pages fetched and written per [`Role`] since the pager was opened,
    /// and the structure modifications its owner counted.
    pub fn blocks(&self) -> &BlockCounts {
        &self.blocks
    }

    /// Writes `buf` (one sealed page, or several consecutive ones) as page
    /// `page_no` in one write call. Not durable before the next
    /// [`Pager::checkpoint`]. With a journal, the checkpoint images of the
    /// pages written that existed at the last checkpoint and were not
    /// written since are appended to it and synced first.
    ///
    /// Errors: the storage's I/O error; with a journal, its I/O error, or
    /// [`Error::Unsupported`] once an earlier journal write failed.
    #[inline]
    pub fn write_page(&self, role: Role, page_no: u64, buf: &[u8]) -> Result<()> {
        self.blocks.written(role, self.pages_in(buf.len()));
        if let Some(j) = &self.journal {
            let pages = buf.len().div_ceil(self.page_size) as u64;
            j.lock().protect(page_no, pages)?;
        }
        self.storage.write_at(self.offset(page_no), buf)
    }

    /// Checks that `page` is a page number handed out in `space` (not the
    /// checkpoint page, below `page_count`); `from` names the page the link
    /// was read from.
    fn check_link(&self, space: &PageSpace, from: u64, page: u64) -> Result<u64> {
        if page == NO_PAGE || page >= space.page_count {
            return Err(Error::corruption(
                self.name(),
                from,
                format!("free-list link {page} outside the {} pages", space.page_count),
            ));
        }
        Ok(page)
    }

    /// Takes `k` pages: from the free list first (reading each free page
    /// into `buf`, one page, to find the next), then from the end of the
    /// file. Reads only; `space` changes only if all `k` succeed.
    ///
    /// Errors: [`Error::Corruption`] for a free-list link outside the file,
    /// a free page failing its check, or a free list longer than counted;
    /// the storage's I/O error.
    pub fn allocate(&self, space: &mut PageSpace, k: usize, buf: &mut [u8]) -> Result<Vec<u64>> {
        let mut head = space.free_head;
        let mut free = space.free_pages;
        let mut count = space.page_count;
        let mut pages = Vec::with_capacity(k);
        for _ in 0..k {
            if head != NO_PAGE {
                let page = self.check_link(space, META_PAGE, head)?;
                self.read_page(Role::Other, page, buf)?;
                let next = open_free(buf, page, self.name())?;
                free = free.checked_sub(1).ok_or_else(|| {
                    Error::corruption(self.name(), META_PAGE, "free list longer than counted")
                })?;
                pages.push(page);
                head = next;
            } else {
                pages.push(count);
                count += 1;
            }
        }
        space.free_head = head;
        space.free_pages = free;
        space.page_count = count;
        Ok(pages)
    }

    /// Takes `k` contiguous pages and returns the first: from the head of
    /// the free list if its first `k` pages form a run (a run freed by
    /// [`Pager::free_run`] comes back that way: freed in ascending order,
    /// popped in descending order; the `k` free pages are read, role
    /// `Other`, to find out), else at the end of the file.
    ///
    /// Errors: as [`Pager::allocate`].
    pub fn allocate_run(&self, space: &mut PageSpace, k: usize) -> Result<u64> {
        if space.free_pages >= k as u64 {
            let mut buf = crate::storage::AlignedBuf::zeroed(self.page_size);
            let mut trial = *space;
            let pages = self.allocate(&mut trial, k, &mut buf)?;
            let lo = pages.iter().copied().min().unwrap_or(NO_PAGE);
            let hi = pages.iter().copied().max().unwrap_or(NO_PAGE);
            if pages.len() == k && hi - lo + 1 == k as u64 {
                *space = trial;
                return Ok(lo);
            }
        }
        let p = space.page_count;
        space.page_count += k as u64;
        Ok(p)
    }

    /// Frees pages `first..first + k` in ascending order (see
    /// [`Pager::free`]).
    pub fn free_run(&self, space: &mut PageSpace, first: u64, k: u64) -> Result<()> {
        let mut buf = crate::storage::AlignedBuf::zeroed(self.page_size);
        for p in first..first + k {
            self.free(space, p, &mut buf)?;
        }
        Ok(())
    }

    /// Puts `page` (no longer used by the owner) at the head of the free
    /// list: writes it as a free page (encoded in `buf`, one page), then
    /// updates `space`.
    ///
    /// Errors: [`Error::InvalidInput`] for the checkpoint page or a page
    /// outside the file (nothing is written); the storage's I/O error
    /// (`space` unchanged).
    pub fn free(&self, space: &mut PageSpace, page: u64, buf: &mut [u8]) -> Result<()> {
        if page == META_PAGE || page >= space.page_count {
            return Err(Error::invalid(format!(
                "cannot free page {page} of a file of {} pages",
                space.page_count
            )));
        }
        encode_free(buf, page, space.free_head);
        self.write_page(Role::Other, page, buf)?;
        space.free_head = page;
        space.free_pages += 1;
        Ok(())
    }

    /// Walks the free list of `space`, reading each page into `buf` (one
    /// page) and calling `visit` with its number before it is read; returns
    /// the pages walked.
    ///
    /// Errors: [`Error::Corruption`] for a list longer than counted, a link
    /// outside the file or a page failing its check; the storage's I/O error
    /// or `visit`'s error.
    pub fn walk_free_list(
        &self,
        space: &PageSpace,
        buf: &mut [u8],
        mut visit: impl FnMut(u64) -> Result<()>,
    ) -> Result<u64> {
        let mut walked = 0u64;
        let mut f = space.free_head;
        while f != NO_PAGE {
            if walked >= space.free_pages {
                return Err(Error::corruption(self.name(), f, "free list longer than counted"));
            }
            self.check_link(space, META_PAGE, f)?;
            visit(f)?;
            self.read_page(Role::Other, f, buf)?;
            f = open_free(buf, f, self.name())?;
            walked += 1;
        }
        Ok(walked)
    }

    /// Walks the free list of `space` and checks that the checkpoint page,
    /// the owner's `in_use` pages and the free pages add up to the file's
    /// pages; returns the free pages.
    ///
    /// Errors: [`Error::Corruption`] (naming page 0) when they do not, or as
    /// [`Pager::walk_free_list`].
    pub fn check_accounting(&self, space: &PageSpace, in_use: u64) -> Result<u64> {
        let mut buf = crate::storage::AlignedBuf::zeroed(self.page_size);
        let free = self.walk_free_list(space, &mut buf, |_| Ok(()))?;
        let used = 1 + in_use + free;
        if used != space.page_count {
            return Err(Error::corruption(
                self.name(),
                META_PAGE,
                format!(
                    "page counts disagree: {used} pages accounted, {} in the file",
                    space.page_count
                ),
            ));
        }
        Ok(free)
    }

    /// Makes `cp` the file's state: writes the checkpoint page, then syncs
    /// the file, so every page written before this call is durable with it.
    ///
    /// With a journal: syncs the file, journals page 0 if this interval has
    /// not, writes the checkpoint page numbered one more than the last
    /// (`cp.number` is ignored), syncs, then empties the journal. Without
    /// one, `cp` is written as it is.
    ///
    /// Errors: [`Error::InvalidInput`] if `cp` has another page size;
    /// the storage's I/O error (the previous checkpoint may or may not be
    /// replaced on storage; with a journal, reopening recovers either).
    pub fn checkpoint(&self, cp: &Checkpoint) -> Result<()> {
        if cp.page_size != self.page_size {
            return Err(Error::invalid(format!(
                "checkpoint of {}-byte pages for a file of {}-byte pages",
                cp.page_size, self.page_size
            )));
        }
        let Some(j) = &self.journal else {
            return cp.write(&self.id, self.storage.as_ref());
        };
        let mut j = j.lock();
        j.protect(META_PAGE, 1)?;
        let next = Checkpoint {
            number: j.number().wrapping_add(1),
            ..*cp
        };
        let r = self
            .storage
            .sync()
            .and_then(|()| next.write(&self.id, self.storage.as_ref()));
        if r.is_err() {
            j.fail();
        }
        r?;
        j.reset(next.number, next.space.page_count)
    }
}
