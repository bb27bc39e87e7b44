//! Fault injection: EIO, ENOSPC, short reads and torn writes on chosen calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{Directory, MemDirectory, PassThrough, ReadStorage, Storage};
use crate::{Error, Result};

/// Which call a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// `read_at`.
    Read,
    /// `write_at`.
    Write,
    /// `sync` of a file, and the directory sync ([`Directory::sync_dir`],
    /// the last step of a publish) too.
    Sync,
    /// [`Directory::rename`] (a publish renames its temporary file).
    Rename,
    /// [`Directory::sync_dir`] only. A directory sync checks `SyncDir` rules
    /// first and then `Sync` rules, so both count it.
    SyncDir,
}

/// What happens when a fault fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The call fails with an I/O error (EIO) and has no effect.
    Eio,
    /// A read returns success but only the first half of the buffer (rounded
    /// down to 512 bytes) holds the file's bytes; the rest is zeroed. Models a
    /// layer that silently returns short data: checksums must catch it.
    ShortRead,
    /// A write persists only its first half (rounded down to 512 bytes) and
    /// then fails, as a write interrupted by power loss. (On other calls: as
    /// `Eio`.)
    TornWrite,
    /// The call fails with `ENOSPC` ("No space left on device", kind
    /// [`std::io::ErrorKind::StorageFull`]) and has no effect, as on a full
    /// disk; meant for writes, syncs (delayed allocation) and renames.
    NoSpace,
}

/// The error a fault of `kind` returns for a call `what` on `file`.
fn injected(kind: FaultKind, file: &str, what: &str) -> Error {
    let source = match kind {
        FaultKind::NoSpace => std::io::Error::from_raw_os_error(libc::ENOSPC),
        FaultKind::TornWrite => std::io::Error::other(format!("injected EIO on {what} (torn)")),
        FaultKind::Eio | FaultKind::ShortRead => std::io::Error::other(format!("injected EIO on {what}")),
    };
    Error::Io {
        file: file.to_string(),
        source,
    }
}

#[derive(Debug, Clone)]
struct Rule {
    op: FaultOp,
    /// Number of calls of `op` still allowed to pass before the fault fires.
    countdown: u64,
    kind: FaultKind,
    /// Fire on every call once triggered (otherwise once).
    sticky: bool,
}

/// A shared, mutable set of fault rules. Every [`FaultyStorage`] holding the
/// same plan obeys it; rules can be added and cleared while files are open.
#[derive(Debug, Default, Clone)]
pub struct FaultPlan {
    rules: Arc<Mutex<Vec<Rule>>>,
    /// Faults fired so far (over every rule, cleared ones included).
    fired: Arc<AtomicU64>,
}

impl FaultPlan {
    /// A plan with no faults.
    pub fn new() -> Self {
        Self::default()
    }

    /// After `after` more calls of `op` pass, the next one fails with `kind`
    /// (and, if `sticky`, every one after it too).
    pub fn inject(&self, op: FaultOp, after: u64, kind: FaultKind, sticky: bool) {
        self.rules.lock().push(Rule {
            op,
            countdown: after,
            kind,
            sticky,
        });
    }

    /// How many calls have failed (or read short) by this plan so far.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::SeqCst)
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.rules.lock().clear();
    }

    /// Decides the fate of one call of `op`.
    fn check(&self, op: FaultOp) -> Option<FaultKind> {
        let mut rules = self.rules.lock();
        let mut fired = None;
        rules.retain_mut(|r| {
            if r.op != op || fired.is_some() {
                return true;
            }
            if r.countdown > 0 {
                r.countdown -= 1;
                return true;
            }
            fired = Some(r.kind);
            r.sticky
        });
        if fired.is_some() {
            self.fired.fetch_add(1, Ordering::SeqCst);
        }
        fired
    }
}

/// A storage that obeys a [`FaultPlan`].
#[derive(Debug)]
pub struct FaultyStorage {
    inner: Arc<dyn Storage>,
    plan: FaultPlan,
}

impl FaultyStorage {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Storage>, plan: FaultPlan) -> Self {
        FaultyStorage { inner, plan }
    }

    fn fault(&self, kind: FaultKind, what: &str) -> Error {
        injected(kind, self.inner.name(), what)
    }
}

fn half_sectors(len: usize) -> usize {
    (len / 2) / 512 * 512
}

impl ReadStorage for FaultyStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        match self.plan.check(FaultOp::Read) {
            None => self.inner.read_at(offset, buf),
            Some(FaultKind::ShortRead) => {
                let keep = half_sectors(buf.len());
                let (head, tail) = buf.split_at_mut(keep);
                self.inner.read_at(offset, head)?;
                tail.fill(0);
                Ok(())
            }
            Some(kind) => Err(self.fault(kind, "read")),
        }
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

impl Storage for FaultyStorage {
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<()> {
        match self.plan.check(FaultOp::Write) {
            None => self.inner.write_at(offset, buf),
            Some(FaultKind::TornWrite) => {
                let keep = half_sectors(buf.len());
                if let Some(head) = buf.get(..keep) {
                    self.inner.write_at(offset, head)?;
                }
                Err(self.fault(FaultKind::TornWrite, "write"))
            }
            Some(kind) => Err(self.fault(kind, "write")),
        }
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }

    fn sync(&self) -> Result<()> {
        match self.plan.check(FaultOp::Sync) {
            None => self.inner.sync(),
            Some(kind) => Err(self.fault(kind, "sync")),
        }
    }

    // write_behind: the default (nothing); unsynced data stays droppable.
}

/// A [`MemDirectory`] whose files obey a shared [`FaultPlan`]; `crash()`
/// drops everything not synced.
#[derive(Debug, Clone, Default)]
pub struct FaultyDirectory {
    inner: MemDirectory,
    plan: FaultPlan,
}

impl FaultyDirectory {
    /// An empty in-memory directory with an empty plan.
    pub fn new() -> Self {
        Self::default()
    }

    /// The plan shared by every file of this directory.
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// The underlying memory directory (to corrupt bytes directly).
    pub fn mem(&self) -> &MemDirectory {
        &self.inner
    }

    /// Simulates power loss (see [`MemDirectory::crash`]). Clears the plan.
    pub fn crash(&self) {
        self.plan.clear();
        self.inner.crash();
    }
}

impl PassThrough for FaultyDirectory {
    fn inner(&self) -> &dyn Directory {
        &self.inner
    }
    fn wrap_storage(&self, storage: Arc<dyn Storage>) -> Arc<dyn Storage> {
        Arc::new(FaultyStorage::new(storage, self.plan.clone()))
    }
    fn sync_inner_dir(&self) -> Result<()> {
        let fired = self
            .plan
            .check(FaultOp::SyncDir)
            .or_else(|| self.plan.check(FaultOp::Sync));
        match fired {
            None => self.inner.sync_dir(),
            Some(kind) => Err(injected(kind, "<memory directory>", "directory sync")),
        }
    }
    fn rename_inner(&self, from: &str, to: &str) -> Result<()> {
        match self.plan.check(FaultOp::Rename) {
            None => self.inner.rename(from, to),
            Some(kind) => Err(injected(kind, from, &format!("rename to {to}"))),
        }
    }
    fn describe_wrapped(&self) -> String {
        "<faulty memory>".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eio_fires_after_countdown_once() {
        let dir = FaultyDirectory::new();
        let f = dir.create("f").unwrap();
        f.write_at(0, &[7u8; 4096]).unwrap();
        dir.plan().inject(FaultOp::Read, 2, FaultKind::Eio, false);
        let mut b = [0u8; 16];
        f.read_at(0, &mut b).unwrap();
        f.read_at(0, &mut b).unwrap();
        assert!(f.read_at(0, &mut b).is_err());
        f.read_at(0, &mut b).unwrap(); // not sticky
        assert_eq!(b, [7u8; 16]);
        assert_eq!(dir.plan().fired(), 1);
    }

    #[test]
    fn sticky_write_and_sync_faults() {
        let dir = FaultyDirectory::new();
        let f = dir.create("f").unwrap();
        dir.plan().inject(FaultOp::Write, 0, FaultKind::Eio, true);
        assert!(f.write_at(0, b"a").is_err());
        assert!(f.write_at(0, b"a").is_err());
        assert_eq!(f.len().unwrap(), 0, "failed writes have no effect");
        dir.plan().clear();
        f.write_at(0, b"a").unwrap();
        dir.plan().inject(FaultOp::Sync, 0, FaultKind::Eio, false);
        assert!(f.sync().is_err());
        f.sync().unwrap();
    }

    #[test]
    fn rename_sync_dir_and_no_space_faults() {
        let dir = FaultyDirectory::new();
        dir.create("a").unwrap().write_at(0, b"x").unwrap();
        dir.plan().inject(FaultOp::Rename, 0, FaultKind::Eio, false);
        assert!(dir.rename("a", "b").is_err());
        assert!(
            dir.exists("a") && !dir.exists("b"),
            "a failed rename has no effect"
        );
        dir.rename("a", "b").unwrap();
        // SyncDir counts directory syncs only; Sync counts both.
        dir.plan().inject(FaultOp::SyncDir, 1, FaultKind::Eio, false);
        dir.open("b").unwrap().sync().unwrap();
        dir.sync_dir().unwrap();
        assert!(dir.sync_dir().is_err());
        dir.plan().inject(FaultOp::Sync, 1, FaultKind::Eio, false);
        dir.open("b").unwrap().sync().unwrap();
        assert!(dir.sync_dir().is_err());
        // ENOSPC on a write: the disk-full error, nothing written.
        dir.plan().inject(FaultOp::Write, 0, FaultKind::NoSpace, false);
        let f = dir.open("b").unwrap();
        let e = f.write_at(1, b"yz").unwrap_err();
        assert!(e.to_string().contains("No space left on device"), "{e}");
        match e {
            Error::Io { source, .. } => assert_eq!(source.kind(), std::io::ErrorKind::StorageFull),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.len().unwrap(), 1);
        // A publish fails at its rename and leaves the old contents.
        dir.publish("m", b"old").unwrap();
        dir.plan().inject(FaultOp::Rename, 0, FaultKind::NoSpace, false);
        assert!(dir.publish("m", b"new").is_err());
        dir.crash();
        assert_eq!(dir.mem().file("m").unwrap().contents(), b"old");
    }

    #[test]
    fn short_read_zeroes_tail() {
        let dir = FaultyDirectory::new();
        let f = dir.create("f").unwrap();
        f.write_at(0, &[9u8; 4096]).unwrap();
        dir.plan().inject(FaultOp::Read, 0, FaultKind::ShortRead, false);
        let mut b = vec![0u8; 4096];
        f.read_at(0, &mut b).unwrap();
        assert!(b[..2048].iter().all(|&x| x == 9));
        assert!(b[2048..].iter().all(|&x| x == 0));
    }

    #[test]
    fn torn_write_then_crash_keeps_only_synced() {
        let dir = FaultyDirectory::new();
        let f = dir.create("f").unwrap();
        f.write_at(0, &[1u8; 4096]).unwrap();
        f.sync().unwrap();
        dir.sync_dir().unwrap();
        dir.plan().inject(FaultOp::Write, 0, FaultKind::TornWrite, false);
        assert!(f.write_at(0, &[2u8; 4096]).is_err());
        let mut b = vec![0u8; 4096];
        f.read_at(0, &mut b).unwrap();
        assert!(b[..2048].iter().all(|&x| x == 2), "torn prefix is visible");
        assert!(b[2048..].iter().all(|&x| x == 1));
        dir.crash();
        let f = dir.open("f").unwrap();
        f.read_at(0, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 1), "crash restores the synced image");
    }
}
