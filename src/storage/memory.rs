//! In-memory storage with a crash model, for tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::lock::{LockTable, lock_mem};
use super::{DirLock, Directory, LockMode, ReadStorage, Storage};
use crate::{Error, Result};

/// An in-memory file.
///
/// It keeps two images: the current bytes, and the bytes as of the last
/// [`Storage::sync`]. [`MemDirectory::crash`] throws away every unsynced
/// write by restoring the synced image.
#[derive(Debug)]
pub struct MemStorage {
    name: String,
    data: RwLock<Vec<u8>>,
    durable: Mutex<Vec<u8>>,
}

impl MemStorage {
    /// An empty file called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        MemStorage {
            name: name.into(),
            data: RwLock::new(Vec::new()),
            durable: Mutex::new(Vec::new()),
        }
    }

    /// Restores the image of the last sync (what a crash leaves).
    fn crash(&self) {
        let durable = self.durable.lock().clone();
        *self.data.write() = durable;
    }

    /// A copy of the current bytes.
    pub fn contents(&self) -> Vec<u8> {
        self.data.read().clone()
    }

    /// Flips bits of byte `offset` (to test checksums). Out-of-range offsets
    /// are ignored.
    pub fn corrupt_byte(&self, offset: u64) {
        let mut d = self.data.write();
        if let Some(b) = usize::try_from(offset).ok().and_then(|o| d.get_mut(o)) {
            *b ^= 0xA5;
        }
    }
}

impl ReadStorage for MemStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let d = self.data.read();
        let start = usize::try_from(offset).map_err(|_| Error::invalid("offset overflows usize"))?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| d.get(start..end))
            .ok_or_else(|| Error::Io {
                file: self.name.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "read of {} bytes at offset {offset} passes the end ({} bytes)",
                        buf.len(),
                        d.len()
                    ),
                ),
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.data.read().len() as u64)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl Storage for MemStorage {
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<()> {
        let mut d = self.data.write();
        let start = usize::try_from(offset).map_err(|_| Error::invalid("offset overflows usize"))?;
        let end = start + buf.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        if let Some(dst) = d.get_mut(start..end) {
            dst.copy_from_slice(buf);
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let len = usize::try_from(len).map_err(|_| Error::invalid("length overflows usize"))?;
        self.data.write().resize(len, 0);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let d = self.data.read().clone();
        *self.durable.lock() = d;
        Ok(())
    }
}

#[derive(Debug, Default)]
struct DirState {
    /// What a running program sees.
    live: BTreeMap<String, Arc<MemStorage>>,
    /// What survives a crash: the entries as of the last `sync_dir`.
    durable: BTreeMap<String, Arc<MemStorage>>,
}

/// An in-memory directory with the crash model of a careful filesystem:
/// file contents survive a crash only up to their last `sync`, and creations,
/// renames and removals only if `sync_dir` ran after them.
#[derive(Debug, Default, Clone)]
pub struct MemDirectory {
    state: Arc<Mutex<DirState>>,
    /// Shared by clones, like the directory; survives a crash (the process
    /// holding the lock keeps running in the model).
    locks: Arc<Mutex<LockTable>>,
}

impl MemDirectory {
    /// An empty directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulates power loss: every unsynced write, creation, rename and
    /// removal is lost. Handles opened before the crash must not be used
    /// afterwards; open the files again.
    pub fn crash(&self) {
        let mut st = self.state.lock();
        st.live = st.durable.clone();
        for f in st.live.values() {
            f.crash();
        }
    }

    /// The file called `name`, for tests that corrupt bytes directly.
    pub fn file(&self, name: &str) -> Option<Arc<MemStorage>> {
        self.state.lock().live.get(name).cloned()
    }
}

impl Directory for MemDirectory {
    fn create(&self, name: &str) -> Result<Arc<dyn Storage>> {
        let f = Arc::new(MemStorage::new(name));
        self.state.lock().live.insert(name.to_string(), f.clone());
        Ok(f)
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Storage>> {
        match self.state.lock().live.get(name) {
            Some(f) => Ok(f.clone()),
            None => Err(Error::NotFound(format!("file {name} in memory directory"))),
        }
    }

    fn exists(&self, name: &str) -> bool {
        self.state.lock().live.contains_key(name)
    }

    fn remove(&self, name: &str) -> Result<()> {
        match self.state.lock().live.remove(name) {
            Some(_) => Ok(()),
            None => Err(Error::NotFound(format!("file {name} in memory directory"))),
        }
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let mut st = self.state.lock();
        let f = st
            .live
            .remove(from)
            .ok_or_else(|| Error::NotFound(format!("file {from} in memory directory")))?;
        st.live.insert(to.to_string(), f);
        Ok(())
    }

    fn list(&self) -> Result<Vec<String>> {
        Ok(self.state.lock().live.keys().cloned().collect())
    }

    fn sync_dir(&self) -> Result<()> {
        let mut st = self.state.lock();
        st.durable = st.live.clone();
        Ok(())
    }

    fn describe(&self) -> String {
        "<memory>".to_string()
    }

    fn lock(&self, mode: LockMode) -> Result<DirLock> {
        lock_mem(&self.locks, mode, self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_drops_unsynced_writes_and_entries() {
        let dir = MemDirectory::new();
        let a = dir.create("a").unwrap();
        a.write_at(0, b"hello").unwrap();
        a.sync().unwrap();
        dir.sync_dir().unwrap();
        a.write_at(5, b" world").unwrap(); // not synced
        let b = dir.create("b").unwrap(); // entry not synced
        b.write_at(0, b"x").unwrap();
        b.sync().unwrap();
        dir.crash();
        let a = dir.open("a").unwrap();
        assert_eq!(a.len().unwrap(), 5);
        let mut buf = [0u8; 5];
        a.read_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        assert!(!dir.exists("b"));
        // rename is durable only after sync_dir
        dir.rename("a", "c").unwrap();
        dir.crash();
        assert!(dir.exists("a") && !dir.exists("c"));
        dir.rename("a", "c").unwrap();
        dir.sync_dir().unwrap();
        dir.crash();
        assert!(!dir.exists("a") && dir.exists("c"));
    }

    #[test]
    fn read_past_end_is_error() {
        let f = MemStorage::new("f");
        f.write_at(0, &[1, 2, 3]).unwrap();
        let mut buf = [0u8; 4];
        assert!(f.read_at(0, &mut buf).is_err());
        assert!(f.read_at(u64::MAX, &mut buf).is_err());
    }
}
