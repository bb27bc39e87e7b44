//! The background sync of a log under [`SyncPolicy::EveryMs`](super::SyncPolicy::EveryMs).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::{Error, Result};

#[derive(Debug, Default)]
struct Stop {
    stopped: Mutex<bool>,
    cv: Condvar,
}

/// A thread that calls a function every period until stopped (or dropped).
///
/// The function syncs a log: it runs at most one period after the previous
/// call ended, so a write is durable at most one period (plus one sync) after
/// it was acknowledged. [`stop`](SyncThread::stop) wakes the thread at once
/// and waits for it; a call under way finishes first.
#[derive(Debug)]
pub(crate) struct SyncThread {
    stop: Arc<Stop>,
    handle: Option<JoinHandle<()>>,
}

impl SyncThread {
    /// Starts the thread `name`, calling `tick` every `period`.
    pub(crate) fn spawn(
        name: &str,
        period: Duration,
        mut tick: impl FnMut() + Send + 'static,
    ) -> Result<SyncThread> {
        let stop = Arc::new(Stop::default());
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                loop {
                    {
                        let mut stopped = s.stopped.lock();
                        if *stopped {
                            return;
                        }
                        s.cv.wait_for(&mut stopped, period);
                        if *stopped {
                            return;
                        }
                    }
                    tick();
                }
            })
            .map_err(|e| Error::io("sync thread", e))?;
        Ok(SyncThread {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the thread and waits for it to end.
    pub(crate) fn stop(&mut self) {
        *self.stop.stopped.lock() = true;
        self.stop.cv.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for SyncThread {
    fn drop(&mut self) {
        self.stop();
    }
}
