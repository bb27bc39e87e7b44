//! What a store built on the log shares with its threads: the shutdown and
//! kill flags, the first failure (after which it refuses writes), its
//! background threads and the periodic log sync. `db` and `lsm` use it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::storage::Directory;
use crate::{Error, Result};

use super::record::LogRecord;
use super::segments::Dropped;
use super::sync::SyncThread;
use super::writer::{SyncPolicy, WalWriter};

/// A store's state as its threads see it.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Set once the store is closing: threads finish and exit.
    pub(crate) shutdown: AtomicBool,
    /// Set by a simulated process exit: no more I/O at all.
    pub(crate) killed: AtomicBool,
    /// Why the store refuses writes, if it does.
    poisoned: Mutex<Option<String>>,
}

impl Health {
    /// Records the first failure; later writes are refused.
    pub(crate) fn poison(&self, e: &Error) {
        let mut p = self.poisoned.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
    }

    /// The failure that poisoned the store, if any.
    pub(crate) fn failure(&self) -> Option<String> {
        self.poisoned.lock().clone()
    }

    /// Whether the store was killed (crash tests).
    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// `Ok` if the store in `dir` may take a write: not closed
    /// ([`closed_error`]), not read-only ([`read_only_error`]), not poisoned
    /// (an I/O error naming the failure).
    pub(crate) fn check_writable(&self, dir: &dyn Directory, read_only: bool) -> Result<()> {
        if self.shutdown.load(Ordering::SeqCst) {
            return Err(closed_error());
        }
        if read_only {
            return Err(read_only_error(dir));
        }
        match self.failure() {
            Some(e) => Err(Error::Io {
                file: dir.describe(),
                source: std::io::Error::other(format!(
                    "the store refuses writes after an earlier failure (reopen it to recover): {e}"
                )),
            }),
            None => Ok(()),
        }
    }
}

/// The error of a write to a closed store.
fn closed_error() -> Error {
    Error::invalid("the store is closed")
}

/// The error of a write to a store opened read-only in `dir`.
pub(crate) fn read_only_error(dir: &dyn Directory) -> Error {
    Error::Unsupported(format!(
        "the store in {} is open read-only; open it without read_only to write",
        dir.describe()
    ))
}

/// A store's background threads and its periodic sync.
#[derive(Debug)]
pub(crate) struct Workers {
    threads: Mutex<Vec<JoinHandle<()>>>,
    syncer: Mutex<Option<SyncThread>>,
    stopped: AtomicBool,
}

impl Workers {
    /// The threads of an open store.
    pub(crate) fn new(threads: Vec<JoinHandle<()>>, syncer: Option<SyncThread>) -> Self {
        Workers {
            threads: Mutex::new(threads),
            syncer: Mutex::new(syncer),
            stopped: AtomicBool::new(false),
        }
    }

    /// The first call sets `health.shutdown`, runs `wake` (which notifies
    /// the threads), stops the sync thread, joins the others and returns
    /// true; later calls return false at once.
    pub(crate) fn stop(&self, health: &Health, wake: impl FnOnce()) -> bool {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return false;
        }
        health.shutdown.store(true, Ordering::SeqCst);
        wake();
        if let Some(mut t) = self.syncer.lock().take() {
            t.stop();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        true
    }
}

/// Starts the periodic sync of [`SyncPolicy::EveryMs`] (`None` under
/// another policy or when `read_only`): every period it syncs the log
/// `writer()` returns, unless that log failed before; a failed sync goes to
/// `failed`.
pub(crate) fn spawn_sync<R: LogRecord + 'static>(
    name: &str,
    policy: SyncPolicy,
    read_only: bool,
    writer: impl Fn() -> Option<Arc<WalWriter<R>>> + Send + 'static,
    failed: impl Fn(&Error) + Send + 'static,
) -> Result<Option<SyncThread>> {
    let SyncPolicy::EveryMs(ms) = policy else {
        return Ok(None);
    };
    if read_only {
        return Ok(None);
    }
    let t = SyncThread::spawn(name, Duration::from_millis(ms), move || {
        if let Some(w) = writer().filter(|w| !w.is_failed()) {
            if let Err(e) = w.sync() {
                failed(&e);
            }
        }
    })?;
    Ok(Some(t))
}

/// Logs a warning when recovery of the log in `dir` dropped anything.
pub(crate) fn warn_dropped(dir: &dyn Directory, dropped: &Dropped) {
    if *dropped != Dropped::default() {
        ::log::warn!(
            "{}: recovery dropped {} log frame(s) failing their checksum and {} byte(s) from the end of the newest log segment",
            dir.describe(),
            dropped.frames,
            dropped.bytes
        );
    }
}

/// Starts the background thread `name` running `f`.
pub(crate) fn spawn_thread(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map_err(|e| Error::io(name, e))
}
