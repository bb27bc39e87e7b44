//! `kvbench`: a db_bench-style benchmark of byte-string key-value stores.
//!
//! - [`KvEngine`]: what a store must offer (put, get, delete, batches, a
//!   forward scan, flush, memory per component, disk and written bytes);
//! - [`EngineSpec`] and [`open_engine`]: engines by name: strata's `db`
//!   (u64 → u64, 8-byte keys and values only), its LSM store `lsm`
//!   (`lsm:index=pgm,boundary=16`), and the peers compiled into
//!   this build (`rocksdb`, `fjall`, `leveldb`, each behind its feature);
//! - [`KvWorkload`] and [`Plan`]: the db_bench and YCSB workloads as
//!   deterministic operation lists over ids (`fillseq` ... `ycsb-f`);
//! - [`run`]: loads each engine once per repeat, runs the workloads with the
//!   engines interleaved (A B C A B C ...), and reports one [`KvRecord`] per
//!   (engine, workload, repeat), JSON Lines with the fields of
//!   `BENCHMARKS.md`, and [`format_kv_table`] with medians, spread and the
//!   ratio of each engine to the first.
//!
//! Keys are ids: the store holds the even ids `2 i` (i < `num`); `readmissing`
//! asks odd ids, which fall between present keys, so filters and indexes do
//! the work a range check alone could not. A key is the id big-endian,
//! zero-padded in front to the key size (8, 16 or 24 bytes); a value starts
//! with the id big-endian (so every read is checked: `wrong` must be 0) and
//! continues with bytes drawn from the id and the write's generation.
//!
//! With a text key file ([`KeyFile`], `--key-file`), key index `i` is the
//! file's `i`-th smallest key instead, and the odd id after it that key
//! followed by a zero byte (see [`KeyFile::key`]).

mod driver;
mod engines;
mod keys;
mod lsm;
mod report;
mod workload;

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};
use strata::{Error, Result};

pub use driver::{KvEvent, KvOptions, run};
pub use engines::{EngineSpec, engine_names, missing_engines, open_engine};
pub use keys::{KeyFile, MAX_FILE_KEY};
pub use lsm::{LsmEngine, lsm_spec};
pub use report::{KvCounts, KvRecord, format_kv_table};
pub use workload::{KvWorkload, Live, Plan, PlanOp};

/// One operation of a write batch.
#[derive(Debug, Clone, Copy)]
pub enum BatchOp<'a> {
    /// Set `key` to `value`.
    Put(&'a [u8], &'a [u8]),
    /// Remove `key`.
    Delete(&'a [u8]),
}

/// Memory an engine holds, per component, in bytes, as the engine itself
/// reports it (`None`: the engine does not tell this component apart; it is
/// then counted in another one, which `note` names).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct MemoryUse {
    /// Memtables (active and immutable).
    pub memtable: u64,
    /// Bytes held in the block cache (what is cached now, not its capacity).
    pub block_cache: u64,
    /// Index bytes held outside the block cache.
    pub index: Option<u64>,
    /// Filter bytes held outside the block cache.
    pub filter: Option<u64>,
    /// Where a component without its own figure is counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl MemoryUse {
    /// All components together.
    pub fn total(&self) -> u64 {
        self.memtable + self.block_cache + self.index.unwrap_or(0) + self.filter.unwrap_or(0)
    }
}

/// How writes are made durable; the same meaning for every engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// Every write is synced to the device before it returns (a WAL sync
    /// per write or batch).
    Always,
    /// Writes go to the engine's log, which is not synced per write.
    #[default]
    Never,
}

impl std::str::FromStr for SyncMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            // `every` as for the stores' `--sync` (`SyncPolicy`).
            "always" | "every" => Ok(SyncMode::Always),
            "never" | "none" => Ok(SyncMode::Never),
            _ => Err(Error::invalid(format!(
                "sync must be always (or every) or never, got {s:?}"
            ))),
        }
    }
}

/// The run's settings every engine is opened with.
#[derive(Debug, Clone)]
pub struct KvEnv {
    /// Total memory of the engine: memtables + block cache + index + filter.
    pub memory_bytes: u64,
    /// Durability of writes.
    pub sync: SyncMode,
    /// Bytes of every key (of generated keys; ignored with `key_file`).
    pub key_size: usize,
    /// Keys from a text key file instead of generated fixed-size ones.
    pub key_file: Option<Arc<KeyFile>>,
    /// Bytes of every value.
    pub value_size: usize,
    /// Read table files with O_DIRECT where the engine can.
    pub direct_reads: bool,
}

impl KvEnv {
    /// The key of `id`: from the key file if there is one, else
    /// [`key_of`] at `key_size` bytes.
    pub fn key(&self, id: u64, out: &mut Vec<u8>) {
        match &self.key_file {
            Some(f) => f.key(id, out),
            None => key_of(id, self.key_size, out),
        }
    }

    /// Mean bytes of a key (`key_size`, or the key file's mean).
    pub fn mean_key_len(&self) -> f64 {
        self.key_file
            .as_ref()
            .map_or(self.key_size as f64, |f| f.mean_len())
    }

    /// Whether `(key, value)` is an entry the run wrote: the value carries
    /// an id and the key is that id's.
    pub fn entry_matches(&self, key: &[u8], value: &[u8]) -> bool {
        let vs = self.value_size;
        match &self.key_file {
            None => value_matches(id_of(key), value, vs),
            Some(f) => {
                // The value starts with the id big-endian (8 bytes or fewer).
                let id = id_of(value.get(..vs.min(8)).unwrap_or_default());
                let mut want = Vec::with_capacity(key.len());
                f.key(id, &mut want);
                vs >= 8 && want == key && value_matches(id, value, vs)
            }
        }
    }
}

/// Bloom filter bits per key of every engine.
pub const BLOOM_BITS_PER_KEY: u32 = 10;
/// Data block size of every engine.
pub const BLOCK_SIZE: usize = 4096;

/// The memory split every peer uses: a quarter of the budget for the write
/// buffer (one memtable, as `strata::lsm::Options::with_memory`), the rest
/// for the block cache, which also holds the index and filter blocks where
/// the engine can put them there (strata's LSM keeps its indexes and
/// filters resident in a quarter and caches blocks in half: the same total).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySplit {
    /// Bytes of one memtable.
    pub write_buffer: u64,
    /// Bytes of the block cache.
    pub block_cache: u64,
}

impl MemorySplit {
    /// The split of `budget` bytes (at least 64 KiB of memtable and of cache).
    pub fn of(budget: u64) -> MemorySplit {
        let write_buffer = (budget / 4).max(64 << 10);
        MemorySplit {
            write_buffer,
            block_cache: budget.saturating_sub(write_buffer).max(64 << 10),
        }
    }

    /// The split as config fields of a report.
    pub fn config(&self, out: &mut Map<String, Value>) {
        out.insert("write_buffer_bytes".into(), Value::from(self.write_buffer));
        out.insert("block_cache_bytes".into(), Value::from(self.block_cache));
        out.insert("bloom_bits_per_key".into(), Value::from(BLOOM_BITS_PER_KEY));
        out.insert("block".into(), Value::from(BLOCK_SIZE));
        out.insert("compression".into(), Value::from("none"));
    }
}

/// A key-value store under test. Every method may be called from several
/// threads at once; errors are the store's, mapped to [`strata::Error`].
pub trait KvEngine: Send + Sync {
    /// The engine's name in reports (`db`, `rocksdb`, ...).
    fn name(&self) -> &str;
    /// The resolved configuration (memory split, filter, block size, sync).
    fn config(&self) -> Map<String, Value>;
    /// Sets `key` to `value`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// The value of `key`, if present.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Removes `key` (absent keys are not an error).
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Applies `ops` in order; atomically where the engine has batches (the
    /// default is a loop of single writes).
    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        for op in ops {
            match *op {
                BatchOp::Put(k, v) => self.put(k, v)?,
                BatchOp::Delete(k) => self.delete(k)?,
            }
        }
        Ok(())
    }
    /// Seeks to the first key `>= from`, then steps forward: hands up to
    /// `count` entries in key order to `visit` and returns how many it handed.
    fn scan(&self, from: &[u8], count: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize>;
    /// Makes every acknowledged write durable and moves memtables to tables
    /// where the engine can (returns when done).
    fn flush(&self) -> Result<()>;
    /// Memory held now, per component.
    fn memory(&self) -> Result<MemoryUse>;
    /// Bytes of the engine's files.
    fn disk_bytes(&self) -> Result<u64>;
    /// Bytes the engine wrote to its files since open, if it counts them
    /// (else the driver measures the process's device writes).
    fn bytes_written(&self) -> Option<u64> {
        None
    }
    /// Closes the engine, waiting for its background work.
    fn close(self: Box<Self>) -> Result<()>;
}

/// Bytes of every file under `dir` (0 for a missing directory); a sparse
/// file counts the bytes it has allocated, not its holes (fjall sizes its
/// journal ahead with `set_len`).
pub fn dir_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fn walk(p: &Path) -> u64 {
        match std::fs::read_dir(p) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => walk(&e.path()),
                    _ => e.metadata().map(|m| m.len().min(m.blocks() * 512)).unwrap_or(0),
                })
                .sum(),
            Err(_) => 0,
        }
    }
    walk(dir)
}

/// The key of `id` at `size` bytes: the id big-endian, zero-padded in front
/// (sizes below 8 keep the low bytes).
pub fn key_of(id: u64, size: usize, out: &mut Vec<u8>) {
    out.clear();
    let be = id.to_be_bytes();
    if size >= 8 {
        out.resize(size - 8, 0);
        out.extend_from_slice(&be);
    } else {
        out.extend_from_slice(&be[8 - size..]);
    }
}

/// The id of a key made by [`key_of`] (its last 8 bytes, or fewer).
pub fn id_of(key: &[u8]) -> u64 {
    let tail = &key[key.len().saturating_sub(8)..];
    tail.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64)
}

/// The value of `id` written in generation `generation`, `size` bytes: the
/// id big-endian first (cut to `size`), then bytes of a 64-bit mix of id and
/// generation.
pub fn value_of(id: u64, generation: u32, size: usize, out: &mut Vec<u8>) {
    out.clear();
    let be = id.to_be_bytes();
    out.extend_from_slice(&be[..size.min(8)]);
    let mut x = id ^ ((generation as u64) << 48) ^ 0x9e37_79b9_7f4a_7c15;
    while out.len() < size {
        // splitmix64
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let take = (size - out.len()).min(8);
        out.extend_from_slice(&z.to_be_bytes()[..take]);
    }
}

/// Whether `value` is one that [`value_of`] makes for `id` (any generation).
pub fn value_matches(id: u64, value: &[u8], size: usize) -> bool {
    value.len() == size && value[..size.min(8)] == id.to_be_bytes()[..size.min(8)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_padded_big_endian_and_ordered() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for size in [8, 16, 24] {
            key_of(2, size, &mut a);
            key_of(256, size, &mut b);
            assert_eq!(a.len(), size);
            assert!(a < b);
            assert_eq!(id_of(&a), 2);
            assert_eq!(id_of(&b), 256);
            assert!(a[..size - 8].iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn values_carry_their_id() {
        let mut v = Vec::new();
        for size in [8, 100, 1000] {
            value_of(77, 3, size, &mut v);
            assert_eq!(v.len(), size);
            assert!(value_matches(77, &v, size));
            assert!(!value_matches(78, &v, size));
            let mut w = Vec::new();
            value_of(77, 4, size, &mut w);
            assert_eq!(v[..8], w[..8]);
            if size > 8 {
                assert_ne!(v, w, "generations differ past the id");
            }
        }
    }

    #[test]
    fn memory_split_is_a_quarter_for_the_memtable() {
        let s = MemorySplit::of(4 << 20);
        assert_eq!(s.write_buffer, 1 << 20);
        assert_eq!(s.block_cache, 3 << 20);
    }
}
