//! Batched reads: many positioned reads in flight at once.
//!
//! A cold lookup costs one read of a few KiB; one thread issuing them one
//! after another leaves an SSD mostly idle (it serves 3x or more reads per
//! second with 16-32 in flight). [`ReadStorage::read_many`] takes a batch of
//! reads and a queue depth; local files serve it through **io_uring**
//! ([`IoEngine::Uring`]), or, where the kernel refuses io_uring, through a
//! small pool of threads issuing `pread` ([`IoEngine::Threads`]).
//! [`IoEngine::Sync`] reads one request after another (the one-by-one path).
//!
//! The io_uring path keeps one ring per thread (created on first use, 256
//! entries, ~25 KiB) and never returns while the kernel still writes into a
//! caller's buffer: every submitted read is reaped before `read_many`
//! returns, on success and on error.

use std::cell::RefCell;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

use io_uring::{IoUring, opcode, types};
use serde::{Deserialize, Serialize};

use super::ReadStorage;
use super::aligned::{ALIGN, AlignedBuf};
use crate::{Error, Result};

/// One read of a batch: fill all of `buf` from `offset`.
#[derive(Debug)]
pub struct ReadReq<'a> {
    /// Byte offset in the file.
    pub offset: u64,
    /// Where the bytes go; the read fails if the file ends before it is full.
    pub buf: &'a mut [u8],
}

/// How a local file serves [`ReadStorage::read_many`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoEngine {
    /// io_uring when this kernel offers it (probed once per process), else
    /// a pool of `pread` threads.
    #[default]
    Auto,
    /// io_uring; opening a file fails if the kernel refuses it.
    Uring,
    /// A pool of threads, each issuing `pread`.
    Threads,
    /// One `pread` after another: queue depth 1 whatever is asked.
    Sync,
}

impl IoEngine {
    /// The engine `Auto` stands for on this machine; errors if `Uring` is
    /// asked for and the kernel refuses it.
    pub fn resolve(self) -> Result<IoEngine> {
        match self {
            IoEngine::Auto if uring_available() => Ok(IoEngine::Uring),
            IoEngine::Auto => Ok(IoEngine::Threads),
            IoEngine::Uring if !uring_available() => Err(Error::Unsupported(
                "io_uring is not available on this kernel (io_uring_setup failed); use --io threads".into(),
            )),
            e => Ok(e),
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::Auto => "auto",
            IoEngine::Uring => "uring",
            IoEngine::Threads => "threads",
            IoEngine::Sync => "sync",
        }
    }
}

impl std::str::FromStr for IoEngine {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(IoEngine::Auto),
            "uring" | "io-uring" | "io_uring" => Ok(IoEngine::Uring),
            "threads" => Ok(IoEngine::Threads),
            "sync" => Ok(IoEngine::Sync),
            _ => Err(Error::invalid(format!(
                "io engine must be auto, uring, threads or sync, got {s:?}"
            ))),
        }
    }
}

/// Queue depth of batched reads unless an index is opened with another.
pub const DEFAULT_QUEUE_DEPTH: usize = 32;
/// The largest queue depth served (the io_uring ring's size).
pub const MAX_QUEUE_DEPTH: usize = 256;
/// Threads of the fallback pool (reads in flight at most on that path).
const POOL_THREADS: usize = 64;

/// Whether io_uring works here (a ring can be set up); probed once.
pub fn uring_available() -> bool {
    static PROBE: OnceLock<bool> = OnceLock::new();
    *PROBE.get_or_init(|| match IoUring::new(8) {
        Ok(_) => true,
        Err(e) => {
            log::info!("io_uring is not available ({e}); batched reads use a pool of threads");
            false
        }
    })
}

/// One read of a stream: `len` bytes from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamRead {
    /// Byte offset in the file.
    pub offset: u64,
    /// Bytes to read; the read fails if the file ends before them.
    pub len: usize,
}

/// A batched read whose requests are made while earlier ones are in flight
/// ([`ReadStorage::read_stream`]): the storage asks for the next read
/// whenever fewer than the queue depth are in flight, and hands each
/// completed read's bytes back at once, while the others are still being
/// read. A lookup batch predicts each key's pages in `next` and searches
/// them in `done`, so the device is busy while the CPU works.
pub trait ReadStream {
    /// The next read to issue, or `None` if there is none for now. After a
    /// `None`, the storage asks again once it has handed back a completed
    /// read (`done` may make new reads: a key's next page); the stream ends
    /// when `next` returns `None` with no read in flight or undelivered.
    fn next(&mut self) -> Result<Option<StreamRead>>;
    /// The `seq`-th read `next` returned (counting from 0) is complete:
    /// `buf` holds its `len` bytes. An error stops the stream: no further
    /// read is issued, the reads in flight are waited for, and
    /// `read_stream` returns it.
    fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()>;
}

/// [`ReadStorage::read_many`] as a stream: the requests in order, each
/// read's bytes copied into its buffer.
pub(crate) struct ManyStream<'r, 'a> {
    reqs: &'r mut [ReadReq<'a>],
    next: usize,
}

impl<'r, 'a> ManyStream<'r, 'a> {
    pub(crate) fn new(reqs: &'r mut [ReadReq<'a>]) -> Self {
        ManyStream { reqs, next: 0 }
    }
}

impl ReadStream for ManyStream<'_, '_> {
    fn next(&mut self) -> Result<Option<StreamRead>> {
        let Some(r) = self.reqs.get(self.next) else {
            return Ok(None);
        };
        self.next += 1;
        Ok(Some(StreamRead {
            offset: r.offset,
            len: r.buf.len(),
        }))
    }

    fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()> {
        let r = self
            .reqs
            .get_mut(seq)
            .ok_or_else(|| Error::invalid("completed read out of range"))?;
        if r.buf.len() != buf.len() {
            return Err(Error::invalid("completed read of the wrong length"));
        }
        r.buf.copy_from_slice(&buf);
        Ok(())
    }
}

/// The default of [`ReadStorage::read_stream`]: one `read_at` after another.
pub(crate) fn stream_one_by_one<S: ReadStorage + ?Sized>(s: &S, stream: &mut dyn ReadStream) -> Result<()> {
    let mut seq = 0;
    while let Some(r) = stream.next()? {
        let mut buf = AlignedBuf::for_overwrite(r.len);
        s.read_at(r.offset, &mut buf)?;
        stream.done(seq, buf)?;
        seq += 1;
    }
    Ok(())
}

/// Serves a stream on a pool of threads issuing `read_at`: requests are
/// taken a few queue depths at a time, read in parallel (up to
/// `queue_depth` at once), then handed back in order.
pub(crate) fn stream_on_threads<S: ReadStorage + ?Sized>(
    s: &S,
    stream: &mut dyn ReadStream,
    queue_depth: usize,
) -> Result<()> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(POOL_THREADS)
            .thread_name(|i| format!("strata-io-{i}"))
            .build()
            .map_err(|e| log::warn!("no I/O thread pool ({e}); batched reads run one by one"))
            .ok()
    });
    let Some(pool) = pool.as_ref().filter(|_| queue_depth > 1) else {
        return stream_one_by_one(s, stream);
    };
    let chunk = queue_depth.saturating_mul(4);
    let mut seq = 0;
    loop {
        let mut reads: Vec<StreamRead> = Vec::with_capacity(chunk);
        while reads.len() < chunk {
            match stream.next()? {
                Some(r) => reads.push(r),
                None => break,
            }
        }
        if reads.is_empty() {
            return Ok(());
        }
        let workers = queue_depth.min(POOL_THREADS).min(reads.len());
        let per = reads.len().div_ceil(workers);
        let bufs: Vec<Result<Vec<AlignedBuf>>> = pool.install(|| {
            use rayon::prelude::*;
            reads
                .par_chunks(per)
                .map(|part| {
                    part.iter()
                        .map(|r| {
                            let mut buf = AlignedBuf::for_overwrite(r.len);
                            s.read_at(r.offset, &mut buf)?;
                            Ok(buf)
                        })
                        .collect()
                })
                .collect()
        });
        for part in bufs {
            for buf in part? {
                stream.done(seq, buf)?;
                seq += 1;
            }
        }
    }
}

thread_local! {
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// Why [`stream_on_ring`] failed.
pub(crate) enum RingError {
    /// This thread could not set up a ring (a limit on locked memory, too
    /// many rings): nothing was asked of the stream, so the caller may use
    /// another engine.
    NoRing(std::io::Error),
    /// A read failed.
    Read(std::io::Error),
    /// The stream's `next` or `done` failed.
    Other(Error),
    /// The ring itself failed (io_uring_enter) with reads in flight: their
    /// buffers were leaked.
    Broken(std::io::Error),
}

/// Serves `stream` from `file` through this thread's io_uring with up to
/// `queue_depth` reads in flight. With `direct`, every read is widened to
/// 4 KiB-aligned offsets and lengths (as `O_DIRECT` requires) into an
/// aligned buffer. On an error the reads already submitted are still
/// reaped before it returns.
pub(crate) fn stream_on_ring(
    file: &File,
    direct: bool,
    stream: &mut dyn ReadStream,
    queue_depth: usize,
) -> std::result::Result<(), RingError> {
    let mut run = |ring: &mut IoUring| drive(ring, file, direct, stream, queue_depth);
    RING.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            if slot.is_none() {
                *slot = Some(IoUring::new(MAX_QUEUE_DEPTH as u32).map_err(RingError::NoRing)?);
            }
            let r = match slot.as_mut() {
                Some(ring) => run(ring),
                None => Err(RingError::NoRing(std::io::Error::other("no io_uring"))),
            };
            if let Err(RingError::Broken(_)) = &r {
                // The ring may be broken (io_uring_enter failed): a new one
                // next time.
                *slot = None;
            }
            r
        }
        // A stream that reads in a batch from `next` or `done` (nested):
        // a ring of its own.
        Err(_) => run(&mut IoUring::new(MAX_QUEUE_DEPTH as u32).map_err(RingError::NoRing)?),
    })
}

/// A read in flight: the request, its buffer, and what is read so far.
struct Slot {
    seq: usize,
    req: StreamRead,
    buf: AlignedBuf,
    /// File offset of `buf[0]` (the request's offset, rounded down when
    /// direct).
    start: u64,
    /// Bytes of `buf` before the request's first byte.
    head: usize,
    /// Bytes of `buf` read so far; complete at `head + req.len`.
    got: usize,
}

impl Slot {
    fn complete(&self) -> bool {
        self.got >= self.head + self.req.len
    }

    /// The request's bytes, in a buffer of their own when the read was
    /// widened.
    fn into_buf(self) -> AlignedBuf {
        if self.head == 0 {
            return self.buf;
        }
        let mut out = AlignedBuf::for_overwrite(self.req.len);
        if let Some(src) = self.buf.get(self.head..self.head + self.req.len) {
            out.copy_from_slice(src);
        }
        out
    }
}

/// Reads queued in the ring but not yet submitted before it submits them.
const SUBMIT_BATCH: usize = 8;

fn drive(
    ring: &mut IoUring,
    file: &File,
    direct: bool,
    stream: &mut dyn ReadStream,
    queue_depth: usize,
) -> std::result::Result<(), RingError> {
    let qd = queue_depth.clamp(1, MAX_QUEUE_DEPTH);
    let mut slots: Vec<Option<Slot>> = Vec::with_capacity(qd);
    let mut free: Vec<usize> = Vec::new();
    // Slots whose read is complete (handed back next) or to be resubmitted.
    let mut finished: Vec<usize> = Vec::new();
    let mut again: Vec<usize> = Vec::new();
    let mut in_flight = 0usize;
    let mut seq = 0usize;
    let mut failed: Option<RingError> = None;
    let mut completions: Vec<(u64, i32)> = Vec::with_capacity(qd);
    loop {
        // Fill the ring up to the queue depth (not after a failure).
        let mut queued = 0usize;
        while failed.is_none() && in_flight < qd {
            let k = match again.pop() {
                Some(k) => k,
                None => match stream.next() {
                    Ok(Some(req)) => {
                        let (start, head) = if direct {
                            let start = req.offset - req.offset % ALIGN as u64;
                            (start, (req.offset - start) as usize)
                        } else {
                            (req.offset, 0)
                        };
                        let slot = Slot {
                            seq,
                            req,
                            buf: AlignedBuf::for_overwrite(head + req.len),
                            start,
                            head,
                            got: 0,
                        };
                        seq += 1;
                        let k = match free.pop() {
                            Some(k) => {
                                if let Some(s) = slots.get_mut(k) {
                                    *s = Some(slot);
                                }
                                k
                            }
                            None => {
                                slots.push(Some(slot));
                                slots.len() - 1
                            }
                        };
                        if req.len == 0 {
                            finished.push(k);
                            continue;
                        }
                        k
                    }
                    Ok(None) => break,
                    Err(e) => {
                        failed = Some(RingError::Other(e));
                        break;
                    }
                },
            };
            let Some(Some(s)) = slots.get_mut(k) else { break };
            let Some(rest) = s.buf.full_mut().get_mut(s.got..) else {
                break;
            };
            // Longer than 4 GiB: read the first aligned part, then the rest.
            let len = u32::try_from(rest.len()).unwrap_or(!4095);
            let entry = opcode::Read::new(types::Fd(file.as_raw_fd()), rest.as_mut_ptr(), len)
                .offset(s.start + s.got as u64)
                .build()
                .user_data(k as u64);
            // SAFETY: the entry points into the buffer of `slots[k]`, which
            // stays there (not moved, not dropped) until its completion is
            // reaped; every submitted entry is reaped before this function
            // returns, or its buffer is leaked.
            if unsafe { ring.submission().push(&entry) }.is_err() {
                again.push(k);
                break;
            }
            in_flight += 1;
            queued += 1;
            if queued >= SUBMIT_BATCH {
                submit(ring, &mut slots, in_flight)?;
                queued = 0;
            }
        }
        if queued > 0 {
            submit(ring, &mut slots, in_flight)?;
        }
        // Hand back what completed while the ring works on the rest.
        if !finished.is_empty() {
            for k in std::mem::take(&mut finished) {
                let Some(slot) = slots.get_mut(k).and_then(Option::take) else {
                    continue;
                };
                free.push(k);
                if failed.is_none() {
                    let seq = slot.seq;
                    if let Err(e) = stream.done(seq, slot.into_buf()) {
                        failed = Some(RingError::Other(e));
                    }
                }
            }
            continue;
        }
        if in_flight == 0 {
            break;
        }
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => break,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) => {}
                Err(e) => return Err(abandon(&mut slots, e)),
            }
        }
        completions.clear();
        completions.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        for &(data, res) in &completions {
            in_flight -= 1;
            let k = data as usize;
            let Some(Some(s)) = slots.get_mut(k) else { continue };
            if res < 0 {
                if matches!(-res, libc::EINTR | libc::EAGAIN) {
                    again.push(k);
                } else {
                    if failed.is_none() {
                        failed = Some(RingError::Read(std::io::Error::from_raw_os_error(-res)));
                    }
                    finished.push(k);
                }
            } else if res == 0 {
                if !s.complete() && failed.is_none() {
                    failed = Some(RingError::Read(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!(
                            "read of {} bytes at offset {} passes the end of the file",
                            s.req.len, s.req.offset
                        ),
                    )));
                }
                finished.push(k);
            } else {
                s.got += res as usize;
                if s.complete() {
                    finished.push(k);
                } else {
                    again.push(k);
                }
            }
        }
        if failed.is_some() {
            // Resubmit nothing after a failure; the rest drains.
            again.clear();
        }
    }
    match failed {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// Submits the queued entries; a ring that fails with reads in flight
/// gives their buffers up ([`abandon`]).
fn submit(
    ring: &mut IoUring,
    slots: &mut [Option<Slot>],
    in_flight: usize,
) -> std::result::Result<(), RingError> {
    loop {
        match ring.submit() {
            Ok(_) => return Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) => {}
            Err(e) => {
                log::error!("io_uring_enter failed with {in_flight} reads in flight: {e}");
                return Err(abandon(slots, e));
            }
        }
    }
}

/// The ring failed with reads possibly in flight: the kernel may still
/// write into their buffers, so they are leaked, never freed or reused.
fn abandon(slots: &mut [Option<Slot>], e: std::io::Error) -> RingError {
    for s in slots.iter_mut().filter_map(Option::take) {
        std::mem::forget(s.buf);
    }
    RingError::Broken(e)
}

/// `pread` until `buf` holds at least `min` bytes or the file ends.
pub(crate) fn pread_at_least(file: &File, buf: &mut [u8], offset: u64, min: usize) -> std::io::Result<usize> {
    let mut done = 0;
    while done < min {
        let Some(rest) = buf.get_mut(done..) else {
            break;
        };
        match file.read_at(rest, offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}
