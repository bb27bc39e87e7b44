//! fjall (crates.io, a Rust LSM tree on `lsm-tree`) as a `kvbench` engine.
//!
//! Configuration, as close to the other engines as fjall allows:
//! - one keyspace `kv`; block cache = the budget less the write buffer
//!   ([`MemorySplit`]); one memtable of the write-buffer size (sealed
//!   memtables waiting for their flush are not capped: fjall's cap on all
//!   write buffers is deprecated, hidden, and refuses less than 1 MiB);
//! - data blocks of 4 KiB, no compression (built without the `lz4`
//!   feature, and the policies say `None` for data and index blocks);
//! - Bloom filters of 10 bits/key on every level;
//! - index and filter blocks not pinned, so they live in the block cache
//!   as RocksDB's do with `cache_index_and_filter_blocks`;
//! - `sync=always`: every write is followed by `persist(SyncData)` (fjall
//!   has no sync flag per write, and no group commit across threads);
//!   `never`: the journal is handed to the OS at every write (fjall's
//!   default), not synced.
//!
//! What it lacks beside RocksDB: no O_DIRECT reads (a cold run relies on
//! dropping the page cache), no figure for index or filter memory apart
//! from the cache, no count of bytes written.

use std::path::{Path, PathBuf};

use fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
    PinningPolicy,
};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use serde_json::{Map, Value};
use strata::{Error, Result};

use crate::kv::{self, BatchOp, KvEngine, KvEnv, MemorySplit, MemoryUse, SyncMode, dir_bytes};

fn err(dir: &Path, what: &str, e: fjall::Error) -> Error {
    Error::Io {
        file: dir.display().to_string(),
        source: std::io::Error::other(format!("fjall {what}: {e}")),
    }
}

/// Opens (creating if missing) fjall in `dir`.
pub(crate) fn open_kv(dir: &Path, env: &KvEnv) -> Result<Box<dyn KvEngine>> {
    let split = MemorySplit::of(env.memory_bytes);
    let db = Database::builder(dir.join("fjall"))
        .cache_size(split.block_cache)
        .open()
        .map_err(|e| err(dir, "open", e))?;
    let none = || CompressionPolicy::all(CompressionType::None);
    let ks = db
        .keyspace("kv", || {
            KeyspaceCreateOptions::default()
                .max_memtable_size(split.write_buffer)
                .data_block_size_policy(BlockSizePolicy::all(kv::BLOCK_SIZE as u32))
                .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                    BloomConstructionPolicy::BitsPerKey(kv::BLOOM_BITS_PER_KEY as f32),
                )))
                .data_block_compression_policy(none())
                .index_block_compression_policy(none())
                .filter_block_pinning_policy(PinningPolicy::all(false))
                .index_block_pinning_policy(PinningPolicy::all(false))
        })
        .map_err(|e| err(dir, "keyspace", e))?;
    let mut config = Map::new();
    split.config(&mut config);
    config.insert("pinned_index_filter".into(), Value::from(false));
    config.insert("direct_reads".into(), Value::from(false));
    config.insert(
        "sync".into(),
        serde_json::to_value(env.sync).unwrap_or(Value::Null),
    );
    Ok(Box::new(FjallKv {
        db,
        ks,
        dir: dir.to_path_buf(),
        sync: env.sync == SyncMode::Always,
        config,
    }))
}

struct FjallKv {
    db: Database,
    ks: Keyspace,
    dir: PathBuf,
    sync: bool,
    config: Map<String, Value>,
}

impl FjallKv {
    fn e(&self, what: &str, x: fjall::Error) -> Error {
        err(&self.dir, what, x)
    }

    fn after_write(&self) -> Result<()> {
        if self.sync {
            self.db
                .persist(PersistMode::SyncData)
                .map_err(|e| self.e("persist", e))?;
        }
        Ok(())
    }
}

impl KvEngine for FjallKv {
    fn name(&self) -> &str {
        "fjall"
    }

    fn config(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.ks.insert(key, value).map_err(|e| self.e("insert", e))?;
        self.after_write()
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .ks
            .get(key)
            .map_err(|e| self.e("get", e))?
            .map(|v| v.to_vec()))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.ks.remove(key).map_err(|e| self.e("remove", e))?;
        self.after_write()
    }

    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        let mut b = self.db.batch();
        for op in ops {
            match *op {
                BatchOp::Put(k, v) => b.insert(&self.ks, k, v),
                BatchOp::Delete(k) => b.remove(&self.ks, k),
            }
        }
        b.commit().map_err(|e| self.e("batch", e))?;
        self.after_write()
    }

    fn scan(&self, from: &[u8], count: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize> {
        let mut n = 0;
        for guard in self.ks.range(from..).take(count) {
            let (k, v) = guard.into_inner().map_err(|e| self.e("scan", e))?;
            visit(&k, &v);
            n += 1;
        }
        Ok(n)
    }

    fn flush(&self) -> Result<()> {
        self.ks
            .rotate_memtable_and_wait()
            .map_err(|e| self.e("flush", e))?;
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| self.e("persist", e))
    }

    fn memory(&self) -> Result<MemoryUse> {
        Ok(MemoryUse {
            memtable: self.db.write_buffer_size(),
            block_cache: self.db.cache_size(),
            index: None,
            filter: None,
            note: Some("index and filter blocks are in the block cache (not pinned)".into()),
        })
    }

    fn disk_bytes(&self) -> Result<u64> {
        Ok(dir_bytes(&self.dir))
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| self.e("persist", e))
    }
}
