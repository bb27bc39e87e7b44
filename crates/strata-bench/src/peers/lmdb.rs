//! LMDB through `heed`: a copy-on-write B+-tree read through a read-only mmap.
//!
//! Configuration (stated in `docs/results/peers.md`):
//! - keys `u64` big-endian (so LMDB's byte order is numeric order), values
//!   `u64` little-endian, one unnamed database, 4 KiB pages (LMDB's page size
//!   is the OS page size);
//! - bulk load: one write transaction, sorted puts with `MDB_APPEND` (full
//!   leaves, like a bulk-loaded B+-tree at fill 100);
//! - `MDB_NORDAHEAD` (no read-ahead around random reads), `MDB_NOSYNC` +
//!   `MDB_NOMETASYNC` (durability at `sync()`, as strata's trees), one write
//!   transaction per insert/delete;
//! - cold runs: branch pages stay in the page cache, leaf pages are evicted
//!   (`madvise(MADV_DONTNEED)` on LMDB's map, then
//!   `posix_fadvise(POSIX_FADV_DONTNEED)` on the file) before the run and
//!   every `COLD_EVERY` operations, outside the timed region;
//! - memory: bytes of the data file resident in the OS page cache (measured
//!   with `mincore`), which is all the memory LMDB's reads use.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use heed::byteorder::{BigEndian, LittleEndian};
use heed::types::U64;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, PutFlags, WithoutTls};
use serde_json::{Map, Value};
use strata::index::{BuildReport, Index, IndexSpec, IndexStats, Record, Records};
use strata::storage::IoStats;
use strata::{Error, Result};

use super::{Cooler, Opened, Peer, PeerEnv};

type Db = Database<U64<BigEndian>, U64<LittleEndian>>;

const DATA_FILE: &str = "data.mdb";
const LOCK_FILE: &str = "lock.mdb";
/// LMDB page flags (mdb.c): branch, leaf, overflow, meta.
const P_BRANCH: u16 = 0x01;

fn err(what: &str, dir: &Path, e: heed::Error) -> Error {
    Error::Io {
        file: dir.join(DATA_FILE).display().to_string(),
        source: std::io::Error::other(format!("lmdb {what}: {e}")),
    }
}

/// The map size for `n` records: virtual address space only (the file grows
/// as pages are written), room for the bulk load and as many inserts again,
/// with slack; at least 1 GiB. Rounded up to a multiple of `page` (LMDB
/// refuses any other size: `map size (1200000000) must be a multiple of the
/// system page size (4096)` for 9.4M records).
fn map_size(n: usize, page: usize) -> usize {
    let page = page.max(1);
    let want = n.saturating_mul(128).max(1 << 30);
    want.div_ceil(page)
        .checked_mul(page)
        .unwrap_or(usize::MAX / page * page)
}

/// The OS page size (4096 if `sysconf` does not say).
fn os_page_size() -> usize {
    // SAFETY: sysconf reads a configuration value; it has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(v).ok().filter(|&p| p > 0).unwrap_or(4096)
}

fn open_env(dir: &Path, n: usize) -> Result<(Env<WithoutTls>, Db)> {
    let mut o = EnvOpenOptions::new().read_txn_without_tls();
    o.map_size(map_size(n, os_page_size())).max_dbs(1);
    // SAFETY: NO_SYNC/NO_META_SYNC only weaken durability (writes become
    // durable at `sync`, as in strata's trees); NO_READ_AHEAD is safe. The
    // directory is used by this process alone.
    let env = unsafe {
        o.flags(EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC | EnvFlags::NO_READ_AHEAD);
        o.open(dir)
    }
    .map_err(|e| err("open", dir, e))?;
    let mut w = env.write_txn().map_err(|e| err("txn", dir, e))?;
    let db: Db = env
        .create_database(&mut w, None)
        .map_err(|e| err("create database", dir, e))?;
    w.commit().map_err(|e| err("commit", dir, e))?;
    Ok((env, db))
}

fn config(env: &PeerEnv) -> Map<String, Value> {
    let mut c = Map::new();
    c.insert("page".into(), Value::from(4096));
    c.insert("bulk".into(), Value::from("MDB_APPEND"));
    c.insert("flags".into(), Value::from("NOSYNC|NOMETASYNC|NORDAHEAD"));
    c.insert(
        "cold".into(),
        Value::from(if env.cold {
            "leaves evicted (madvise+fadvise DONTNEED)"
        } else {
            "os cache"
        }),
    );
    c
}

/// The `lmdb` peer.
pub struct Lmdb;

impl Peer for Lmdb {
    fn name(&self) -> &'static str {
        "lmdb"
    }

    fn summary(&self) -> &'static str {
        "peer: LMDB (heed), mmap B+-tree, bulk-loaded with MDB_APPEND"
    }

    fn build(
        &self,
        spec: &IndexSpec,
        records: Records<'_>,
        dir: &Path,
        env: &PeerEnv,
    ) -> Result<BuildReport> {
        spec.params.finish("lmdb")?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let t0 = Instant::now();
        let (e, db) = open_env(dir, records.len())?;
        let mut w = e.write_txn().map_err(|x| err("txn", dir, x))?;
        for (k, v) in records.iter() {
            db.put_with_flags(&mut w, PutFlags::APPEND, &k, &v)
                .map_err(|x| err("put", dir, x))?;
        }
        w.commit().map_err(|x| err("commit", dir, x))?;
        e.force_sync().map_err(|x| err("sync", dir, x))?;
        let build_s = t0.elapsed().as_secs_f64();
        let n = records.len() as u64;
        let disk = disk_bytes(dir);
        drop(e);
        Ok(BuildReport {
            index: "lmdb".into(),
            config: config(env),
            n,
            memory_bytes: 0,
            bits_per_key: 0.0,
            disk_bytes: disk,
            build_s,
            build_keys_per_s: if build_s > 0.0 { n as f64 / build_s } else { 0.0 },
            models: None,
            height: None,
        })
    }

    fn open(&self, _spec: &IndexSpec, dir: &Path, env: &PeerEnv) -> Result<Opened> {
        let (e, db) = open_env(dir, 0)?;
        let n = {
            let r = e.read_txn().map_err(|x| err("txn", dir, x))?;
            db.len(&r).map_err(|x| err("len", dir, x))?
        };
        let map_addr = mapping_of(&dir.join(DATA_FILE))?;
        let lmdb = Arc::new(LmdbIndex {
            env: e,
            db,
            dir: dir.to_path_buf(),
            n: std::sync::atomic::AtomicU64::new(n),
            io: Arc::new(IoStats::new()),
        });
        let cooler: Option<Cooler> = if env.cold {
            let mut ev = LeafEvictor::new(dir, map_addr)?;
            ev.evict()?;
            Some(Box::new(move || ev.evict()))
        } else {
            None
        };
        Ok(Opened {
            index: Box::new(ArcIndex(lmdb)),
            cooler,
        })
    }
}

fn disk_bytes(dir: &Path) -> u64 {
    [DATA_FILE, LOCK_FILE]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

/// Start address of this process's mapping of `path` (LMDB's map), from
/// `/proc/self/maps`. (`mdb_env_info`'s `me_mapaddr` is only set for
/// `MDB_FIXEDMAP`.)
fn mapping_of(path: &Path) -> Result<usize> {
    let want = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    let want = want.to_string_lossy();
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| Error::io("/proc/self/maps", e))?;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(_perms), Some(offset)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let name = f.nth(2).unwrap_or("");
        if name == want && u64::from_str_radix(offset, 16) == Ok(0) {
            if let Some((start, _)) = range.split_once('-') {
                if let Ok(a) = usize::from_str_radix(start, 16) {
                    return Ok(a);
                }
            }
        }
    }
    Err(Error::NotFound(format!(
        "no mapping of {want} in /proc/self/maps"
    )))
}

/// Evicts LMDB's non-branch pages from the page cache.
struct LeafEvictor {
    file: File,
    path: PathBuf,
    map_addr: usize,
    /// `(offset, len)` byte ranges of non-branch pages (leaves, overflow, free).
    ranges: Vec<(u64, u64)>,
}

impl LeafEvictor {
    fn new(dir: &Path, map_addr: usize) -> Result<Self> {
        let path = dir.join(DATA_FILE);
        let mut file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        const PAGE: u64 = 4096;
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        let mut branches: Vec<u64> = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut off = 0u64;
        // Pages 0 and 1 are LMDB's meta pages: keep them.
        while off < len {
            let want = ((len - off) as usize).min(buf.len());
            let chunk = buf
                .get_mut(..want)
                .ok_or_else(|| Error::invalid("lmdb scan buffer"))?;
            file.read_exact(chunk).map_err(|e| Error::io(&path, e))?;
            for (i, page) in chunk.chunks(PAGE as usize).enumerate() {
                let pgno = off / PAGE + i as u64;
                let flags = match page.get(10..12) {
                    Some(b) => u16::from_le_bytes([b[0], b[1]]),
                    None => 0,
                };
                if pgno < 2 || flags & P_BRANCH != 0 {
                    branches.push(pgno * PAGE);
                    continue;
                }
                let start = pgno * PAGE;
                match ranges.last_mut() {
                    Some(r) if r.0 + r.1 == start => r.1 += PAGE,
                    _ => ranges.push((start, PAGE)),
                }
            }
            off += want as u64;
        }
        let mut ev = LeafEvictor {
            file,
            path,
            map_addr,
            ranges: vec![(0, len)],
        };
        // The scan read the file through the page cache in large folios; a
        // folio that holds a branch page and its neighbouring leaves cannot be
        // dropped by a DONTNEED on the leaves alone. So drop everything, turn
        // read-ahead off and read the branch pages back one 4 KiB page each:
        // they then sit in page-sized folios of their own.
        ev.evict()?;
        let fd = ev.file.as_raw_fd();
        // SAFETY: plain syscall on an open descriptor.
        let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM) };
        if rc != 0 {
            return Err(Error::io(&ev.path, std::io::Error::from_raw_os_error(rc)));
        }
        let mut page = [0u8; PAGE as usize];
        for &off in &branches {
            std::os::unix::fs::FileExt::read_exact_at(&ev.file, &mut page, off)
                .map_err(|e| Error::io(&ev.path, e))?;
        }
        ev.ranges = ranges;
        Ok(ev)
    }

    fn evict(&mut self) -> Result<()> {
        let fd = self.file.as_raw_fd();
        for &(off, len) in &self.ranges {
            // SAFETY: the range lies inside LMDB's read-only shared file
            // mapping (it is inside the file, and the map covers the file);
            // MADV_DONTNEED on a shared file mapping only drops this
            // process's page-table entries: the next access faults the page
            // in again from the page cache or the file, contents unchanged.
            let rc = unsafe {
                libc::madvise(
                    (self.map_addr + off as usize) as *mut libc::c_void,
                    len as usize,
                    libc::MADV_DONTNEED,
                )
            };
            if rc != 0 {
                return Err(Error::io(&self.path, std::io::Error::last_os_error()));
            }
            // SAFETY: plain syscall on an open descriptor.
            let rc = unsafe { libc::posix_fadvise(fd, off as i64, len as i64, libc::POSIX_FADV_DONTNEED) };
            if rc != 0 {
                return Err(Error::io(&self.path, std::io::Error::from_raw_os_error(rc)));
            }
        }
        Ok(())
    }
}

/// Bytes of `path` resident in the OS page cache (`mincore` over a private
/// read-only mapping of the file).
fn resident_bytes(path: &Path) -> Result<u64> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len() as usize;
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: a fresh read-only shared mapping of an open file, unmapped below;
    // mincore only reads page-table state into `vec`, which has one byte per page.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(Error::io(path, std::io::Error::last_os_error()));
        }
        let pages = len.div_ceil(4096);
        let mut vec = vec![0u8; pages];
        let rc = libc::mincore(p, len, vec.as_mut_ptr());
        libc::munmap(p, len);
        if rc != 0 {
            return Err(Error::io(path, std::io::Error::last_os_error()));
        }
        Ok(vec.iter().filter(|&&b| b & 1 != 0).count() as u64 * 4096)
    }
}

struct LmdbIndex {
    env: Env<WithoutTls>,
    db: Db,
    dir: PathBuf,
    n: std::sync::atomic::AtomicU64,
    io: Arc<IoStats>,
}

/// `Index` over a shared `LmdbIndex`.
struct ArcIndex(Arc<LmdbIndex>);

impl ArcIndex {
    fn e(&self, what: &str, x: heed::Error) -> Error {
        err(what, &self.0.dir, x)
    }
}

impl Index for ArcIndex {
    fn kind(&self) -> &str {
        "lmdb"
    }

    fn len(&self) -> u64 {
        self.0.n.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn get(&self, key: u64) -> Result<Option<u64>> {
        let r = self.0.env.read_txn().map_err(|x| self.e("txn", x))?;
        self.0.db.get(&r, &key).map_err(|x| self.e("get", x))
    }

    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        let r = self.0.env.read_txn().map_err(|x| self.e("txn", x))?;
        self.0
            .db
            .get_greater_than_or_equal_to(&r, &key)
            .map_err(|x| self.e("lower bound", x))
    }

    fn scan(&self, from: u64, count: usize, out: &mut Vec<Record>) -> Result<()> {
        let r = self.0.env.read_txn().map_err(|x| self.e("txn", x))?;
        let it = self.0.db.range(&r, &(from..)).map_err(|x| self.e("range", x))?;
        for item in it.take(count) {
            out.push(item.map_err(|x| self.e("scan", x))?);
        }
        Ok(())
    }

    fn supports_updates(&self) -> bool {
        true
    }

    fn insert(&self, key: u64, value: u64) -> Result<Option<u64>> {
        let mut w = self.0.env.write_txn().map_err(|x| self.e("txn", x))?;
        let prev = self.0.db.get(&w, &key).map_err(|x| self.e("get", x))?;
        self.0
            .db
            .put(&mut w, &key, &value)
            .map_err(|x| self.e("put", x))?;
        w.commit().map_err(|x| self.e("commit", x))?;
        if prev.is_none() {
            self.0.n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(prev)
    }

    fn delete(&self, key: u64) -> Result<bool> {
        let mut w = self.0.env.write_txn().map_err(|x| self.e("txn", x))?;
        let had = self.0.db.delete(&mut w, &key).map_err(|x| self.e("delete", x))?;
        w.commit().map_err(|x| self.e("commit", x))?;
        if had {
            self.0.n.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(had)
    }

    fn sync(&self) -> Result<()> {
        self.0.env.force_sync().map_err(|x| self.e("sync", x))
    }

    fn stats(&self) -> Result<IndexStats> {
        let r = self.0.env.read_txn().map_err(|x| self.e("txn", x))?;
        let st = self.0.db.stat(&r).map_err(|x| self.e("stat", x))?;
        let mut extra = BTreeMap::new();
        extra.insert("branch_pages".into(), Value::from(st.branch_pages));
        extra.insert("leaf_pages".into(), Value::from(st.leaf_pages));
        extra.insert("overflow_pages".into(), Value::from(st.overflow_pages));
        extra.insert("page_size".into(), Value::from(st.page_size));
        Ok(IndexStats {
            kind: "lmdb".into(),
            n: st.entries as u64,
            memory_bytes: resident_bytes(&self.0.dir.join(DATA_FILE))?,
            disk_bytes: disk_bytes(&self.0.dir),
            models: None,
            height: Some(st.depth),
            extra,
        })
    }

    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let r = self.0.env.read_txn().map_err(|x| self.e("txn", x))?;
        let mut prev: Option<u64> = None;
        let mut n = 0u64;
        for item in self.0.db.iter(&r).map_err(|x| self.e("iter", x))? {
            let (k, _) = item.map_err(|x| self.e("iter", x))?;
            if prev.is_some_and(|p| p >= k) {
                return Err(Error::corruption(DATA_FILE, 0, format!("key {k} after {prev:?}")));
            }
            prev = Some(k);
            n += 1;
        }
        progress(n);
        Ok(n)
    }

    fn io(&self) -> &Arc<IoStats> {
        &self.0.io
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10M keys of ycsb-write-only bulk-load 9,375,000: 128 bytes each is
    /// 1,200,000,000, which LMDB refused; every size is now a multiple of the
    /// page size, at least what the records need and at least 1 GiB.
    #[test]
    fn map_size_is_a_multiple_of_the_page_size() {
        for page in [4096, 16_384, 65_536, 3000, 1] {
            for n in [
                0,
                1,
                9_375_000,
                10_000_000,
                123_456_789,
                usize::MAX / 64,
                usize::MAX,
            ] {
                let m = map_size(n, page);
                assert_eq!(m % page, 0, "n {n}, page {page}: {m}");
                assert!(m >= 1 << 30, "n {n}, page {page}: {m}");
                let want = n.saturating_mul(128).max(1 << 30);
                if want <= usize::MAX - page {
                    // The next multiple of the page size, no more.
                    assert!(m >= want && m - want < page, "n {n}, page {page}: {m}");
                } else {
                    // Past the last multiple: the largest one.
                    assert!(m > usize::MAX - page, "n {n}, page {page}: {m}");
                }
            }
        }
        assert_eq!(map_size(9_375_000, 4096), 1_200_001_024);
        assert_eq!(map_size(0, 4096), 1 << 30);
        // A page size of 0 (a broken sysconf) is taken as 1, not a division by zero.
        assert_eq!(map_size(9_375_000, 0), 1_200_000_000);
        assert_eq!(os_page_size() % 1024, 0);
    }
}
