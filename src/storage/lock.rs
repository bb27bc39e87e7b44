//! Directory locks: who may open a store or an index directory.
//!
//! A writer takes an [`LockMode::Exclusive`] lock, a read-only reader a
//! [`LockMode::Shared`] one; a lock held elsewhere (in another process, or
//! through another handle in this one) is [`Error::Locked`]. The lock is held
//! by a [`DirLock`] and released when it is dropped (also when a process
//! dies: the operating system drops its locks).
//!
//! Local directories ([`FsDirectory`](super::FsDirectory)) use `flock(2)`
//! (through the `fs4` crate; `std::fs::File::try_lock` once the
//! minimum Rust version reaches 1.89): a writer creates the file
//! [`LOCK_FILE`] and locks it and the directory itself exclusively; a reader
//! locks `LOCK` shared, or the directory itself if `LOCK` does not exist (a
//! read never creates a file). Each lock call opens its own file
//! descriptions, so two handles in one process conflict like two processes.
//! [`MemDirectory`](super::MemDirectory) keeps an in-process table with the
//! same semantics.

use std::any::Any;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};

use fs4::{FileExt, TryLockError};
use std::path::Path;

use crate::{Error, Result};

/// The name of the lock file in a locked local directory (empty; its
/// presence means nothing: only the `flock` on it does).
pub const LOCK_FILE: &str = "LOCK";

/// How a directory is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Read-only users: any number at once, never with a writer.
    Shared,
    /// One writer, alone.
    Exclusive,
}

/// A held directory lock, released when dropped.
pub struct DirLock {
    mode: LockMode,
    _guard: Box<dyn Any + Send + Sync>,
}

impl Debug for DirLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirLock").field("mode", &self.mode).finish()
    }
}

impl DirLock {
    /// A lock held in `mode` for as long as `guard` lives (dropping the
    /// `DirLock` drops `guard`, which must release the lock).
    pub fn new(mode: LockMode, guard: impl Any + Send + Sync) -> Self {
        DirLock {
            mode,
            _guard: Box::new(guard),
        }
    }

    /// The mode the lock is held in.
    pub fn mode(&self) -> LockMode {
        self.mode
    }
}

/// Takes `mode` on the open file `file` (a file description of its own), or
/// [`Error::Locked`] naming `dir` if it is held elsewhere.
fn try_flock(file: &File, mode: LockMode, dir: &Path) -> Result<()> {
    let got = match mode {
        LockMode::Shared => FileExt::try_lock_shared(file),
        LockMode::Exclusive => FileExt::try_lock(file),
    };
    match got {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => {
            // A shared request fails only under a writer; an exclusive one
            // fails under either: probe which (the probe is released when
            // `file` is dropped by the caller).
            let exclusive = mode == LockMode::Shared || FileExt::try_lock_shared(file).is_err();
            Err(Error::Locked {
                dir: dir.display().to_string(),
                exclusive,
            })
        }
        Err(TryLockError::Error(e)) => Err(Error::io(dir.join(LOCK_FILE), e)),
    }
}

/// Locks the local directory `root` in `mode` (see the module docs).
pub(super) fn lock_fs(root: &Path, mode: LockMode) -> Result<DirLock> {
    let dir_file = File::open(root).map_err(|e| Error::io(root, e))?;
    let path = root.join(LOCK_FILE);
    match mode {
        LockMode::Exclusive => {
            let lock_file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            try_flock(&dir_file, mode, root)?;
            try_flock(&lock_file, mode, root)?;
            Ok(DirLock::new(mode, (dir_file, lock_file)))
        }
        LockMode::Shared => match File::open(&path) {
            Ok(lock_file) => {
                try_flock(&lock_file, mode, root)?;
                Ok(DirLock::new(mode, lock_file))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                try_flock(&dir_file, mode, root)?;
                Ok(DirLock::new(mode, dir_file))
            }
            Err(e) => Err(Error::io(&path, e)),
        },
    }
}

/// The in-process lock table of a memory directory: readers and whether a
/// writer holds it.
#[derive(Debug, Default)]
pub(super) struct LockTable {
    readers: usize,
    writer: bool,
}

/// Releases one entry of a [`LockTable`] when dropped.
struct MemGuard {
    table: std::sync::Arc<parking_lot::Mutex<LockTable>>,
    mode: LockMode,
}

impl Drop for MemGuard {
    fn drop(&mut self) {
        let mut t = self.table.lock();
        match self.mode {
            LockMode::Shared => t.readers = t.readers.saturating_sub(1),
            LockMode::Exclusive => t.writer = false,
        }
    }
}

/// Locks a memory directory's `table` in `mode`, with `Locked` naming `dir`.
pub(super) fn lock_mem(
    table: &std::sync::Arc<parking_lot::Mutex<LockTable>>,
    mode: LockMode,
    dir: String,
) -> Result<DirLock> {
    let mut t = table.lock();
    if t.writer {
        return Err(Error::Locked { dir, exclusive: true });
    }
    match mode {
        LockMode::Shared => t.readers += 1,
        LockMode::Exclusive if t.readers > 0 => {
            return Err(Error::Locked {
                dir,
                exclusive: false,
            });
        }
        LockMode::Exclusive => t.writer = true,
    }
    drop(t);
    Ok(DirLock::new(
        mode,
        MemGuard {
            table: table.clone(),
            mode,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Directory, FaultyDirectory, FsDirectory, MemDirectory};

    fn locked(r: Result<DirLock>) -> Option<bool> {
        match r {
            Err(Error::Locked { exclusive, .. }) => Some(exclusive),
            _ => None,
        }
    }

    /// The semantics every directory shares; `a` and `b` are two handles on
    /// one directory.
    fn check(a: &dyn Directory, b: &dyn Directory) {
        use LockMode::{Exclusive, Shared};
        let w = a.lock(Exclusive).unwrap();
        assert_eq!(w.mode(), Exclusive);
        assert_eq!(locked(b.lock(Exclusive)), Some(true));
        assert_eq!(locked(a.lock(Exclusive)), Some(true));
        assert_eq!(locked(b.lock(Shared)), Some(true));
        drop(w);
        let r1 = b.lock(Shared).unwrap();
        let r2 = a.lock(Shared).unwrap();
        assert_eq!(locked(a.lock(Exclusive)), Some(false));
        drop(r1);
        assert_eq!(locked(b.lock(Exclusive)), Some(false));
        drop(r2);
        let w = b.lock(Exclusive).unwrap();
        drop(w);
        drop(a.lock(Exclusive).unwrap());
    }

    #[test]
    fn fs_locks_conflict_between_handles_of_one_process() {
        let tmp = tempfile::tempdir().unwrap();
        let a = FsDirectory::create_all(tmp.path()).unwrap();
        let b = FsDirectory::open(tmp.path()).unwrap();
        check(&a, &b);
        let msg = {
            let _w = a.lock(LockMode::Exclusive).unwrap();
            b.lock(LockMode::Shared).unwrap_err().to_string()
        };
        assert!(msg.contains(&tmp.path().display().to_string()), "{msg}");
    }

    #[test]
    fn fs_shared_lock_creates_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let d = FsDirectory::open(tmp.path()).unwrap();
        let r = d.lock(LockMode::Shared).unwrap();
        assert!(d.list().unwrap().is_empty());
        // A writer is refused by a reader that locked the directory itself.
        assert_eq!(locked(d.lock(LockMode::Exclusive)), Some(false));
        drop(r);
        drop(d.lock(LockMode::Exclusive).unwrap());
        assert_eq!(d.list().unwrap(), vec![LOCK_FILE.to_string()]);
    }

    #[test]
    fn memory_and_wrapped_locks_share_the_semantics() {
        let mem = MemDirectory::new();
        check(&mem, &mem.clone());
        let faulty = FaultyDirectory::new();
        check(&faulty, &faulty);
    }
}
