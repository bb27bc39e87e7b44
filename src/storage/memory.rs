//! In-memory storage with a crash model, for tests.
//!
//! A [`MemDirectory`] remembers, per file, the bytes as of its last sync and,
//! per directory, the entries as of the last `sync_dir`; [`MemDirectory::crash`]
//! throws the rest away, as power loss does. A *power cut*
//! ([`MemDirectory::cut_power_after`]) turns the machine off after a chosen
//! number of mutating calls, so a crash can fall inside any operation, not
//! only between two; [`MemDirectory::crash_torn`] then also lets the last
//! unsynced write of each file survive in part (whole 512-byte sectors) or
//! whole, as a disk that wrote some sectors back before power went does
//! (LevelDB's fault-injection `Env`, redb's crash backend).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use super::lock::{LockTable, lock_mem};
use super::{DirLock, Directory, LockMode, ReadStorage, Storage};
use crate::{Error, Result};

/// Sector size of the torn-write model: a torn write keeps whole sectors.
const SECTOR: usize = 512;

/// The power switch shared by a directory and its files: counts mutating
/// calls and, once the budget is spent, fails every call.
#[derive(Debug)]
struct Power {
    /// Mutating calls since the directory was made (or last crashed).
    calls: AtomicU64,
    /// Mutating calls allowed; the next one turns the power off.
    budget: AtomicU64,
    off: AtomicBool,
}

impl Default for Power {
    fn default() -> Self {
        Power {
            calls: AtomicU64::new(0),
            budget: AtomicU64::new(u64::MAX),
            off: AtomicBool::new(false),
        }
    }
}

impl Power {
    fn off_error(file: &str) -> Error {
        Error::Io {
            file: file.to_string(),
            source: std::io::Error::other("the power is off (simulated power cut)"),
        }
    }

    /// Any call: fails once the power is off.
    fn check(&self, file: &str) -> Result<()> {
        if self.off.load(Ordering::SeqCst) {
            return Err(Self::off_error(file));
        }
        Ok(())
    }

    /// A mutating call: counted; the one past the budget turns the power off
    /// and fails (with no effect), like every call after it.
    fn mutate(&self, file: &str) -> Result<()> {
        self.check(file)?;
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n > self.budget.load(Ordering::SeqCst) {
            self.off.store(true, Ordering::SeqCst);
            return Err(Self::off_error(file));
        }
        Ok(())
    }

    fn restore(&self) {
        self.calls.store(0, Ordering::SeqCst);
        self.budget.store(u64::MAX, Ordering::SeqCst);
        self.off.store(false, Ordering::SeqCst);
    }
}

/// What a crash does with the last unsynced write of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tear {
    /// Lost, like every other unsynced write.
    Drop,
    /// Its first `n` bytes (a whole number of sectors) reached the disk.
    Prefix(usize),
}

/// A 64-bit mix (splitmix64): the deterministic randomness of torn writes.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The tear of a `len`-byte write in file `name` under `seed`: a third of
/// the files lose it, a third keep a sector prefix (possibly empty), a third
/// keep it whole.
fn tear_of(seed: u64, name: &str, len: usize) -> Tear {
    let h = name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    });
    let r = mix(seed ^ h);
    match r % 3 {
        0 => Tear::Drop,
        1 => {
            let sectors = len.div_ceil(SECTOR) as u64;
            let keep = (mix(r) % (sectors + 1)) as usize;
            Tear::Prefix((keep * SECTOR).min(len))
        }
        _ => Tear::Prefix(len),
    }
}

/// An in-memory file.
///
/// It keeps two images: the current bytes, and the bytes as of the last
/// [`Storage::sync`]. [`MemDirectory::crash`] throws away every unsynced
/// write by restoring the synced image ([`MemDirectory::crash_torn`] may
/// keep part of the last one).
#[derive(Debug)]
pub struct MemStorage {
    name: String,
    data: RwLock<Vec<u8>>,
    durable: Mutex<Vec<u8>>,
    /// The last write since the last sync (offset, length), if the last
    /// mutating call of the file was a write: its bytes are still in `data`.
    last_write: Mutex<Option<(u64, usize)>>,
    power: Arc<Power>,
}

impl MemStorage {
    /// An empty file called `name` (its power is never cut).
    pub fn new(name: impl Into<String>) -> Self {
        Self::powered(name.into(), Arc::new(Power::default()))
    }

    fn powered(name: String, power: Arc<Power>) -> Self {
        MemStorage {
            name,
            data: RwLock::new(Vec::new()),
            durable: Mutex::new(Vec::new()),
            last_write: Mutex::new(None),
            power,
        }
    }

    /// Restores the image of the last sync (what a crash leaves), then
    /// applies the part of the last unsynced write that `tear` keeps.
    fn crash(&self, tear: impl Fn(&str, usize) -> Tear) {
        let mut image = self.durable.lock().clone();
        if let Some((offset, len)) = self.last_write.lock().take() {
            if let Tear::Prefix(n) = tear(&self.name, len) {
                let data = self.data.read();
                let kept = usize::try_from(offset)
                    .ok()
                    .and_then(|s| Some(s..s.checked_add(n)?))
                    .and_then(|r| data.get(r));
                if let Some(kept) = kept {
                    put_bytes(&mut image, offset, kept);
                }
            }
        }
        *self.durable.lock() = image.clone();
        *self.data.write() = image;
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

/// Writes `buf` into `image` at `offset`, extending it with zeros if needed.
/// An offset past the address space is ignored (callers check it first).
fn put_bytes(image: &mut Vec<u8>, offset: u64, buf: &[u8]) {
    let Some(end) = usize::try_from(offset)
        .ok()
        .and_then(|s| s.checked_add(buf.len()))
    else {
        return;
    };
    if image.len() < end {
        image.resize(end, 0);
    }
    if let Some(dst) = image.get_mut(end - buf.len()..end) {
        dst.copy_from_slice(buf);
    }
}

impl ReadStorage for MemStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.power.check(&self.name)?;
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
        self.power.check(&self.name)?;
        Ok(self.data.read().len() as u64)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl Storage for MemStorage {
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<()> {
        usize::try_from(offset)
            .ok()
            .and_then(|s| s.checked_add(buf.len()))
            .ok_or_else(|| Error::invalid("offset overflows usize"))?;
        self.power.mutate(&self.name)?;
        put_bytes(&mut self.data.write(), offset, buf);
        *self.last_write.lock() = Some((offset, buf.len()));
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let len = usize::try_from(len).map_err(|_| Error::invalid("length overflows usize"))?;
        self.power.mutate(&self.name)?;
        self.data.write().resize(len, 0);
        *self.last_write.lock() = None;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.power.mutate(&self.name)?;
        let d = self.data.read();
        let mut durable = self.durable.lock();
        // In place: a log synced after every frame reuses one allocation.
        durable.clear();
        durable.extend_from_slice(&d);
        *self.last_write.lock() = None;
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
/// renames and removals only if `sync_dir` ran after them. Creating a file
/// that exists truncates it (the same file, as `O_TRUNC` does): its synced
/// image stays what survives a crash until it is synced again.
///
/// Power cuts: [`cut_power_after`](MemDirectory::cut_power_after) lets a
/// number of mutating calls through (`write_at`, `set_len`, `sync` of any
/// file; `create`, `rename`, `remove`, `sync_dir`; a publish is several of
/// them), then fails that call and every later call of any kind with an I/O
/// error until [`crash`](MemDirectory::crash) (or
/// [`crash_torn`](MemDirectory::crash_torn)) turns the power back on.
#[derive(Debug, Default, Clone)]
pub struct MemDirectory {
    state: Arc<Mutex<DirState>>,
    /// Shared by clones, like the directory; survives a crash (the process
    /// holding the lock keeps running in the model).
    locks: Arc<Mutex<LockTable>>,
    power: Arc<Power>,
}

impl MemDirectory {
    /// An empty directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulates power loss: every unsynced write, creation, rename and
    /// removal is lost, and the power is back on (the call count restarts
    /// at 0, no cut armed). Handles opened before the crash must not be used
    /// afterwards; open the files again.
    pub fn crash(&self) {
        self.crash_with(|_, _| Tear::Drop);
    }

    /// [`crash`](MemDirectory::crash), except that the last unsynced write
    /// of each file (if its last mutating call was a write) may survive: per
    /// file, chosen deterministically from `seed` and the file's name, it is
    /// lost, or a prefix of whole 512-byte sectors of it survives (possibly
    /// none), or it survives whole. Earlier unsynced writes are lost.
    pub fn crash_torn(&self, seed: u64) {
        self.crash_with(|name, len| tear_of(seed, name, len));
    }

    fn crash_with(&self, tear: impl Fn(&str, usize) -> Tear) {
        let mut st = self.state.lock();
        st.live = st.durable.clone();
        for f in st.live.values() {
            f.crash(&tear);
        }
        self.power.restore();
    }

    /// Arms a power cut: `calls` more mutating calls succeed (counted from
    /// now, over the directory and all its files), the next one fails with
    /// an I/O error and has no effect, and so does every call after it.
    pub fn cut_power_after(&self, calls: u64) {
        let done = self.power.calls.load(Ordering::SeqCst);
        self.power
            .budget
            .store(done.saturating_add(calls), Ordering::SeqCst);
    }

    /// Mutating calls since the directory was made or last crashed (what a
    /// dry run of a workload counts to choose cut points).
    pub fn mutating_calls(&self) -> u64 {
        self.power.calls.load(Ordering::SeqCst)
    }

    /// Whether an armed power cut has happened (and no crash followed yet).
    pub fn is_powered_off(&self) -> bool {
        self.power.off.load(Ordering::SeqCst)
    }

    /// The file called `name`, for tests that corrupt bytes directly.
    pub fn file(&self, name: &str) -> Option<Arc<MemStorage>> {
        self.state.lock().live.get(name).cloned()
    }

    fn missing(name: &str) -> Error {
        Error::NotFound(format!("file {name} in memory directory"))
    }
}

impl Directory for MemDirectory {
    fn create(&self, name: &str) -> Result<Arc<dyn Storage>> {
        self.power.mutate(name)?;
        let mut st = self.state.lock();
        if let Some(f) = st.live.get(name) {
            f.data.write().clear();
            *f.last_write.lock() = None;
            return Ok(f.clone());
        }
        let f = Arc::new(MemStorage::powered(name.to_string(), self.power.clone()));
        st.live.insert(name.to_string(), f.clone());
        Ok(f)
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Storage>> {
        self.power.check(name)?;
        match self.state.lock().live.get(name) {
            Some(f) => Ok(f.clone()),
            None => Err(Self::missing(name)),
        }
    }

    fn exists(&self, name: &str) -> bool {
        self.state.lock().live.contains_key(name)
    }

    fn remove(&self, name: &str) -> Result<()> {
        let mut st = self.state.lock();
        if !st.live.contains_key(name) {
            return Err(Self::missing(name));
        }
        self.power.mutate(name)?;
        st.live.remove(name);
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let mut st = self.state.lock();
        if !st.live.contains_key(from) {
            return Err(Self::missing(from));
        }
        self.power.mutate(from)?;
        if let Some(f) = st.live.remove(from) {
            st.live.insert(to.to_string(), f);
        }
        Ok(())
    }

    fn list(&self) -> Result<Vec<String>> {
        self.power.check("<memory directory>")?;
        Ok(self.state.lock().live.keys().cloned().collect())
    }

    fn sync_dir(&self) -> Result<()> {
        self.power.mutate("<memory directory>")?;
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
        assert!(f.write_at(u64::MAX, &buf).is_err());
    }

    fn bytes(dir: &MemDirectory, name: &str) -> Vec<u8> {
        dir.file(name).unwrap().contents()
    }

    #[test]
    fn create_of_an_existing_file_truncates_it_in_place() {
        let dir = MemDirectory::new();
        let f = dir.create("f").unwrap();
        f.write_at(0, b"old").unwrap();
        f.sync().unwrap();
        dir.sync_dir().unwrap();
        let g = dir.create("f").unwrap();
        assert_eq!(f.len().unwrap(), 0, "the same file");
        g.write_at(0, b"new!").unwrap();
        dir.crash();
        assert_eq!(bytes(&dir, "f"), b"old", "unsynced truncation is lost");
        let g = dir.create("f").unwrap();
        g.write_at(0, b"new!").unwrap();
        g.sync().unwrap(); // no sync_dir needed: the entry was durable
        dir.crash();
        assert_eq!(bytes(&dir, "f"), b"new!");
    }

    /// Every kind of mutating call counts; the one past the budget and every
    /// later call fail without effect; a crash turns the power back on.
    #[test]
    fn power_cut_after_k_calls() {
        type Step = fn(&MemDirectory) -> Result<()>;
        let steps: [Step; 8] = [
            |d| d.create("a").map(drop),
            |d| d.open("a")?.write_at(0, b"abc"),
            |d| d.open("a")?.sync(),
            |d| d.sync_dir(),
            |d| d.open("a")?.set_len(2),
            |d| d.rename("a", "b"),
            |d| d.create("c").map(drop),
            |d| d.remove("c"),
        ];
        // A dry run counts the calls.
        let dry = MemDirectory::new();
        for s in &steps {
            s(&dry).unwrap();
        }
        assert_eq!(dry.mutating_calls(), steps.len() as u64);
        for k in 0..=steps.len() {
            let dir = MemDirectory::new();
            dir.cut_power_after(k as u64);
            for (i, s) in steps.iter().enumerate() {
                assert_eq!(s(&dir).is_ok(), i < k, "cut after {k}: step {i}");
            }
            assert_eq!(dir.is_powered_off(), k < steps.len());
            if k < steps.len() {
                assert!(dir.list().is_err() && dir.file("a").is_none_or(|f| f.len().is_err()));
            }
            dir.crash();
            assert!(!dir.is_powered_off());
            let names = dir.list().unwrap();
            // Durable: "a" with "abc" once its sync and the sync_dir ran.
            if k >= 4 {
                assert_eq!(names, vec!["a".to_string()], "cut after {k}");
                assert_eq!(bytes(&dir, "a"), b"abc", "cut after {k}");
            } else {
                assert!(names.is_empty(), "cut after {k}: {names:?}");
            }
            // The power stays on after the crash.
            dir.create("z").unwrap().write_at(0, b"1").unwrap();
        }
    }

    #[test]
    fn torn_crash_keeps_a_sector_prefix_of_the_last_write_or_nothing() {
        let old = vec![1u8; 4096];
        let new = vec![2u8; 4096];
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let dir = MemDirectory::new();
            let f = dir.create("f").unwrap();
            f.write_at(0, &old).unwrap();
            f.sync().unwrap();
            dir.sync_dir().unwrap();
            f.write_at(0, &[3u8; 4096]).unwrap(); // unsynced, not the last: lost
            f.write_at(0, &new).unwrap();
            dir.crash_torn(seed);
            let got = bytes(&dir, "f");
            assert_eq!(got.len(), 4096);
            let kept = got.iter().take_while(|&&b| b == 2).count();
            assert_eq!(kept % SECTOR, 0, "seed {seed}: whole sectors");
            assert!(
                got[kept..].iter().all(|&b| b == 1),
                "seed {seed}: old bytes after the prefix"
            );
            seen.insert(kept);
            // Deterministic from the seed.
            let again = MemDirectory::new();
            let f = again.create("f").unwrap();
            f.write_at(0, &old).unwrap();
            f.sync().unwrap();
            again.sync_dir().unwrap();
            f.write_at(0, &new).unwrap();
            again.crash_torn(seed);
            assert_eq!(bytes(&again, "f"), got, "seed {seed}");
        }
        assert!(
            seen.contains(&0) && seen.contains(&4096) && seen.len() > 3,
            "{seen:?}"
        );
        // A synced write is never torn; a write followed by set_len is not
        // the last mutating call and is lost.
        let dir = MemDirectory::new();
        let f = dir.create("f").unwrap();
        dir.sync_dir().unwrap();
        f.write_at(0, &new).unwrap();
        f.sync().unwrap();
        f.write_at(4096, &old).unwrap();
        f.set_len(5000).unwrap();
        for seed in 0..8 {
            dir.crash_torn(seed);
            assert_eq!(bytes(&dir, "f"), new, "seed {seed}");
        }
    }
}
