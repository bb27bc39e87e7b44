//! Scratch directories of `strata bench` and `strata kvbench`: made for one
//! run and removed after it, however the run ends.
//!
//! - The run returns (results or an error): [`Scratch`]'s `Drop`.
//! - SIGINT, SIGTERM or SIGHUP (Ctrl-C, `kill`, a closed terminal): the
//!   thread started by [`watch_signals`] removes every live scratch
//!   directory at once, whatever the runner is doing, and then ends the
//!   process by the same signal (its parent sees the signal, as it would
//!   without the handler).
//! - SIGKILL, a crash, a power cut: nothing of the process runs, so the next
//!   run cleans up. Each scratch directory holds a file `lock` that its
//!   process keeps `flock`ed; the kernel drops the lock when the process
//!   dies, and [`Scratch::create`] first removes the directories of the same
//!   prefix beside the new one whose lock it can take.
//!
//! A flag set by a signal handler and checked by the runner was not enough:
//! the runner would see it only between operations, and a build of a
//! large index (or a peer's bulk load in C++) runs for tens of seconds
//! without returning; SIGKILL can be neither caught nor flagged.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, Once};

/// The lock file in a scratch directory, `flock`ed while its run lives.
const LOCK: &str = "lock";
/// The signals after which the scratch directories are removed.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Live scratch directories. The signal thread holds this lock from the
/// signal until the process ends, so no directory is created or dropped
/// (and no error of a run whose files vanished is printed) meanwhile.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A directory made for one run; removed when dropped, on SIGINT, SIGTERM
/// and SIGHUP (with [`watch_signals`]), and by a later run after SIGKILL.
#[derive(Debug)]
pub(crate) struct Scratch {
    path: PathBuf,
    /// Open and `flock`ed while the run lives: the kernel releases the lock
    /// when the process ends, however it ends.
    _lock: File,
}

impl Scratch {
    /// Removes the stale directories `parent/prefix*` (see [`sweep`]), then
    /// makes a new one there holding a locked `lock` file.
    pub(crate) fn create(parent: &Path, prefix: &str) -> std::io::Result<Scratch> {
        sweep(parent, prefix);
        let path = {
            // Registered before anything else happens to it: a signal now
            // removes it too.
            let mut live = live();
            let path = tempfile::Builder::new().prefix(prefix).tempdir_in(parent)?.keep();
            live.push(path.clone());
            path
        };
        let lock = match lock_file(&path) {
            Ok(f) => f,
            Err(e) => {
                remove(&path);
                return Err(e);
            }
        };
        Ok(Scratch { path, _lock: lock })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// `dir/lock`, created and locked under another name and then renamed, so
/// that a sweep never finds a `lock` that nobody holds yet.
fn lock_file(dir: &Path) -> std::io::Result<File> {
    let new = dir.join(format!("{LOCK}.new"));
    let f = File::create(&new)?;
    if !try_lock(&f)? {
        return Err(std::io::Error::other("a new scratch directory is locked"));
    }
    let _ = std::io::Write::write_all(&mut &f, format!("{}\n", std::process::id()).as_bytes());
    std::fs::rename(&new, dir.join(LOCK))?;
    Ok(f)
}

/// Takes an exclusive `flock` on `f` without waiting: false if another open
/// file holds it.
fn try_lock(f: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a file descriptor that `f` owns for the call.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mut live = live();
        remove(&self.path);
        live.retain(|p| p != &self.path);
    }
}

/// Removes `dir`, again if something wrote into it meanwhile.
fn remove(dir: &Path) {
    for _ in 0..10 {
        let _ = std::fs::remove_dir_all(dir);
        if !dir.exists() {
            return;
        }
    }
}

/// Removes the directories `parent/prefix*` left by runs that died without
/// removing them (SIGKILL, a crash): those whose `lock` file no process
/// holds. A directory without a `lock` (being made, or not made by a
/// scratch) is left alone. Returns how many were removed.
pub(crate) fn sweep(parent: &Path, prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let stale = entry.file_name().to_str().is_some_and(|n| n.starts_with(prefix))
            && entry.file_type().is_ok_and(|t| t.is_dir())
            && File::open(entry.path().join(LOCK)).is_ok_and(|f| try_lock(&f).unwrap_or(false));
        if stale {
            remove(&entry.path());
            removed += 1;
        }
    }
    removed
}

/// Starts the thread that removes the live scratch directories on SIGINT,
/// SIGTERM and SIGHUP and then ends the process by that signal. Call it
/// before the command starts any thread: the signals are blocked in the
/// calling thread, and threads started later inherit the mask, so that only
/// this thread receives them (children started with `std::process` get the
/// default mask back). Once per process; later calls do nothing.
pub(crate) fn watch_signals() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let set = signal_set(&SIGNALS);
        // SAFETY: `set` is an initialised signal set; blocking signals in
        // this thread has no other effect.
        unsafe {
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        let spawned = std::thread::Builder::new()
            .name("strata-signals".into())
            .spawn(move || {
                loop {
                    let mut sig: libc::c_int = 0;
                    // SAFETY: `set` and `sig` are valid for the call.
                    if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
                        stop(sig);
                    }
                }
            });
        if spawned.is_err() {
            // No watcher: let the signals act as they did.
            // SAFETY: as above.
            unsafe {
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            }
        }
    });
}

fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; sigaddset takes valid signals.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for &s in signals {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        set.assume_init()
    }
}

/// Removes the live scratch directories and ends the process by `sig`.
fn stop(sig: libc::c_int) -> ! {
    // Held until the end: nothing else creates, drops or reports meanwhile.
    let live = live();
    for dir in live.iter() {
        remove(dir);
    }
    let one = signal_set(&[sig]);
    // SAFETY: restoring the default action of a signal and unblocking it in
    // this thread, then raising it here: the process ends as if the signal
    // had found no handler.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory whose lock nobody holds is removed by the next sweep; a
    /// live one, one without a lock and one of another prefix stay.
    #[test]
    fn sweep_removes_only_unlocked_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let live = Scratch::create(tmp.path(), ".t-").unwrap();
        let dead = tmp.path().join(".t-dead");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(LOCK), "1\n").unwrap();
        std::fs::write(dead.join("data"), "x").unwrap();
        let unlocked = tmp.path().join(".t-nolock");
        std::fs::create_dir(&unlocked).unwrap();
        let other = tmp.path().join(".u-dead");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join(LOCK), "1\n").unwrap();
        assert_eq!(sweep(tmp.path(), ".t-"), 1);
        assert!(!dead.exists());
        assert!(live.path().join(LOCK).exists() && unlocked.exists() && other.exists());
        let path = live.path().to_path_buf();
        drop(live);
        assert!(!path.exists());
    }
}
