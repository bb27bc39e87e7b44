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

/// The default of [`ReadStorage::read_many`]: one `read_at` after another.
pub(crate) fn read_one_by_one<S: ReadStorage + ?Sized>(s: &S, reqs: &mut [ReadReq<'_>]) -> Result<()> {
    for r in reqs.iter_mut() {
        s.read_at(r.offset, r.buf)?;
    }
    Ok(())
}

/// Reads each request with `read_at` on a pool of threads, `queue_depth`
/// requests at a time at most (the pool's size bounds it too).
pub(crate) fn read_on_threads<S: ReadStorage + ?Sized>(
    s: &S,
    reqs: &mut [ReadReq<'_>],
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
    let workers = queue_depth.min(POOL_THREADS).min(reqs.len());
    let Some(pool) = pool.as_ref().filter(|_| workers > 1) else {
        return read_one_by_one(s, reqs);
    };
    let per = reqs.len().div_ceil(workers);
    let results: Vec<Result<()>> = pool.install(|| {
        use rayon::prelude::*;
        reqs.par_chunks_mut(per)
            .map(|chunk| read_one_by_one(s, chunk))
            .collect()
    });
    results.into_iter().collect()
}

/// One read handed to the ring: `buf[done..]` is still to be filled from
/// `offset + done`; it is complete once `done >= min` (a direct read into
/// an aligned bounce buffer may stop at the end of the file past `min`).
pub(crate) struct RingRead<'a> {
    pub(crate) file: &'a File,
    pub(crate) offset: u64,
    pub(crate) buf: &'a mut [u8],
    pub(crate) min: usize,
    pub(crate) done: usize,
}

thread_local! {
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// Serves `reads` through this thread's io_uring with up to `queue_depth`
/// in flight. On an error the reads already submitted are still reaped
/// before it returns; the error names the first failed read's index.
pub(crate) fn read_on_ring(
    reads: &mut [RingRead<'_>],
    queue_depth: usize,
) -> std::result::Result<(), (usize, std::io::Error)> {
    let mut run = |ring: &mut IoUring| drive(ring, reads, queue_depth);
    RING.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            if slot.is_none() {
                *slot = Some(IoUring::new(MAX_QUEUE_DEPTH as u32).map_err(|e| (0, e))?);
            }
            match slot.as_mut() {
                Some(ring) => run(ring),
                None => Err((0, std::io::Error::other("no io_uring"))),
            }
        }
        // Never reached (nothing here calls back into a read), but a ring
        // of its own is always correct.
        Err(_) => run(&mut IoUring::new(MAX_QUEUE_DEPTH as u32).map_err(|e| (0, e))?),
    })
}

fn drive(
    ring: &mut IoUring,
    reads: &mut [RingRead<'_>],
    queue_depth: usize,
) -> std::result::Result<(), (usize, std::io::Error)> {
    let qd = queue_depth.clamp(1, MAX_QUEUE_DEPTH);
    let mut next = 0usize;
    let mut again: Vec<usize> = Vec::new();
    let mut in_flight = 0usize;
    let mut failed: Option<(usize, std::io::Error)> = None;
    loop {
        // Fill the ring up to the queue depth (not after a failure).
        while failed.is_none() && in_flight < qd {
            let i = match again.pop() {
                Some(i) => i,
                None if next < reads.len() => {
                    next += 1;
                    next - 1
                }
                None => break,
            };
            let Some(r) = reads.get_mut(i) else { break };
            let Some(rest) = r.buf.get_mut(r.done..) else {
                break;
            };
            let len = u32::try_from(rest.len()).unwrap_or(!4095);
            let entry = opcode::Read::new(types::Fd(r.file.as_raw_fd()), rest.as_mut_ptr(), len)
                .offset(r.offset + r.done as u64)
                .build()
                .user_data(i as u64);
            // SAFETY: the entry points into `reads[i].buf`, which the caller
            // lends for the whole call, and this function reaps every
            // submitted entry before it returns.
            if unsafe { ring.submission().push(&entry) }.is_err() {
                again.push(i);
                break;
            }
            in_flight += 1;
        }
        if in_flight == 0 {
            break;
        }
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => break,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) => {}
                Err(e) => {
                    // The ring itself failed with reads in flight: their
                    // buffers cannot be handed back safely.
                    log::error!("io_uring_enter failed with {in_flight} reads in flight: {e}");
                    std::process::abort();
                }
            }
        }
        let completions: Vec<(u64, i32)> = ring.completion().map(|c| (c.user_data(), c.result())).collect();
        for (data, res) in completions {
            in_flight -= 1;
            let i = data as usize;
            let Some(r) = reads.get_mut(i) else { continue };
            if res < 0 {
                let e = std::io::Error::from_raw_os_error(-res);
                if matches!(-res, libc::EINTR | libc::EAGAIN) {
                    again.push(i);
                } else if failed.is_none() {
                    failed = Some((i, e));
                }
            } else if res == 0 {
                if r.done < r.min && failed.is_none() {
                    failed = Some((
                        i,
                        std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            format!(
                                "read of {} bytes at offset {} passes the end of the file",
                                r.min, r.offset
                            ),
                        ),
                    ));
                }
            } else {
                r.done += res as usize;
                if r.done < r.min {
                    again.push(i);
                }
            }
        }
    }
    match failed {
        Some(f) => Err(f),
        None => Ok(()),
    }
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
