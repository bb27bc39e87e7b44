//! RocksDB through the `rocksdb` crate: an LSM tree of block-based SSTables.
//!
//! Configuration (stated in `docs/results/peers.md`):
//! - keys `u64` big-endian (byte order = numeric order), values `u64`
//!   little-endian;
//! - bulk load: the sorted records are written with `SstFileWriter` into one
//!   SSTable and ingested (`IngestExternalFile`), RocksDB's bulk-load path;
//! - blocks of the run's page size (4 KiB), no compression (strata's pages are
//!   not compressed), bloom filters 10 bits/key (full filters);
//! - block cache (LRU) = the memory budget (that of the strata index it stands
//!   beside, or `cache_mb=`), created empty at every open; index and filter
//!   blocks are held by the table readers (RocksDB's default) and counted in
//!   `memory_bytes` with the block cache usage and the memtables;
//! - cold runs: `use_direct_reads` (O_DIRECT, no OS page cache);
//! - writes: WAL on, not synced per write (durable at `sync()`); because
//!   `Index::insert` returns the previous value, a write first asks the
//!   memtables and bloom filters (`key_may_exist`) and reads the key only if
//!   it may exist.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rocksdb::{
    BlockBasedOptions, Cache, DB, DBCompressionType, Direction, IteratorMode, Options, SstFileWriter,
    WriteBatch, WriteOptions,
};
use serde_json::{Map, Value};
use strata::index::{BuildReport, Index, IndexSpec, IndexStats, Record, Records};
use strata::storage::IoStats;
use strata::{Error, Result};

use super::{Opened, Peer, PeerEnv};
use crate::kv::{self, BatchOp, KvEngine, KvEnv, MemorySplit, MemoryUse, SyncMode, dir_bytes};

const BLOOM_BITS_PER_KEY: f64 = 10.0;
const BULK_FILE: &str = "bulk.sst";
/// Smallest block cache (bytes), so a tiny budget still holds a few blocks.
const MIN_CACHE: u64 = 64 << 10;

fn err(dir: &Path, what: &str, e: rocksdb::Error) -> Error {
    Error::Io {
        file: dir.display().to_string(),
        source: std::io::Error::other(format!("rocksdb {what}: {e}")),
    }
}

fn budget(spec: &IndexSpec, env: &PeerEnv) -> Result<u64> {
    let mb = spec.params.u64("cache_mb", 0)?;
    Ok(if mb > 0 { mb << 20 } else { env.memory_budget }.max(MIN_CACHE))
}

fn options(dir: &Path, cache: &Cache, env: &PeerEnv) -> Options {
    let mut t = BlockBasedOptions::default();
    t.set_block_size(env.page_size);
    t.set_block_cache(cache);
    t.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
    t.set_cache_index_and_filter_blocks(false);
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_compression_type(DBCompressionType::None);
    o.set_block_based_table_factory(&t);
    o.set_use_direct_reads(env.cold);
    o.set_db_log_dir(dir);
    o
}

/// The `rocksdb` peer.
pub struct RocksDb;

impl Peer for RocksDb {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn summary(&self) -> &'static str {
        "peer: RocksDB, LSM tree, bulk-loaded by SSTable ingestion; block cache = memory budget, bloom 10 bits/key"
    }

    fn build(
        &self,
        spec: &IndexSpec,
        records: Records<'_>,
        dir: &Path,
        env: &PeerEnv,
    ) -> Result<BuildReport> {
        let cache_bytes = budget(spec, env)?;
        spec.params.finish("rocksdb")?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let t0 = Instant::now();
        let cache = Cache::new_lru_cache(cache_bytes as usize).map_err(|e| err(dir, "cache", e))?;
        let opts = options(dir, &cache, env);
        let db = DB::open(&opts, dir.join("db")).map_err(|e| err(dir, "open", e))?;
        if !records.is_empty() {
            let sst = dir.join(BULK_FILE);
            let mut w = SstFileWriter::create(&opts);
            w.open(&sst).map_err(|e| err(dir, "sst open", e))?;
            for (k, v) in records.iter() {
                w.put(k.to_be_bytes(), v.to_le_bytes())
                    .map_err(|e| err(dir, "sst put", e))?;
            }
            w.finish().map_err(|e| err(dir, "sst finish", e))?;
            db.ingest_external_file(vec![&sst])
                .map_err(|e| err(dir, "ingest", e))?;
            // Ingestion moves (links) the file into the DB; drop our name.
            let _ = std::fs::remove_file(&sst);
        }
        db.flush_wal(true).map_err(|e| err(dir, "sync", e))?;
        let build_s = t0.elapsed().as_secs_f64();
        drop(db);
        let n = records.len() as u64;
        Ok(BuildReport {
            index: "rocksdb".into(),
            config: config(cache_bytes, env),
            n,
            memory_bytes: 0,
            bits_per_key: 0.0,
            disk_bytes: dir_bytes(dir),
            build_s,
            build_keys_per_s: if build_s > 0.0 { n as f64 / build_s } else { 0.0 },
            models: None,
            height: None,
        })
    }

    fn open(&self, spec: &IndexSpec, dir: &Path, env: &PeerEnv) -> Result<Opened> {
        let cache_bytes = budget(spec, env)?;
        let cache = Cache::new_lru_cache(cache_bytes as usize).map_err(|e| err(dir, "cache", e))?;
        let opts = options(dir, &cache, env);
        let db = DB::open(&opts, dir.join("db")).map_err(|e| err(dir, "open", e))?;
        let n = db
            .property_int_value("rocksdb.estimate-num-keys")
            .map_err(|e| err(dir, "property", e))?
            .unwrap_or(0);
        Ok(Opened {
            index: Box::new(RocksIndex {
                db,
                cache,
                dir: dir.to_path_buf(),
                n: std::sync::atomic::AtomicU64::new(n),
                io: Arc::new(IoStats::new()),
                write: {
                    let mut w = WriteOptions::default();
                    w.set_sync(false);
                    w
                },
            }),
            cooler: None,
        })
    }
}

/// An integer property of `db` (0 when RocksDB has none).
fn int_prop(db: &DB, dir: &Path, name: &str) -> Result<u64> {
    Ok(db
        .property_int_value(name)
        .map_err(|e| err(dir, "property", e))?
        .unwrap_or(0))
}

fn config(cache_bytes: u64, env: &PeerEnv) -> Map<String, Value> {
    let mut c = Map::new();
    c.insert("block_cache_bytes".into(), Value::from(cache_bytes));
    c.insert("bloom_bits_per_key".into(), Value::from(BLOOM_BITS_PER_KEY));
    c.insert("block".into(), Value::from(env.page_size));
    c.insert("compression".into(), Value::from("none"));
    c.insert("direct_reads".into(), Value::from(env.cold));
    c.insert("bulk".into(), Value::from("SstFileWriter + ingest"));
    c
}

struct RocksIndex {
    db: DB,
    cache: Cache,
    dir: PathBuf,
    n: std::sync::atomic::AtomicU64,
    io: Arc<IoStats>,
    write: WriteOptions,
}

impl RocksIndex {
    fn e(&self, what: &str, x: rocksdb::Error) -> Error {
        err(&self.dir, what, x)
    }

    fn prop(&self, name: &str) -> Result<u64> {
        int_prop(&self.db, &self.dir, name)
    }
}

fn decode(k: &[u8], v: &[u8]) -> Option<Record> {
    Some((
        u64::from_be_bytes(k.try_into().ok()?),
        u64::from_le_bytes(v.try_into().ok()?),
    ))
}

impl Index for RocksIndex {
    fn kind(&self) -> &str {
        "rocksdb"
    }

    fn len(&self) -> u64 {
        self.n.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn get(&self, key: u64) -> Result<Option<u64>> {
        match self
            .db
            .get_pinned(key.to_be_bytes())
            .map_err(|e| self.e("get", e))?
        {
            None => Ok(None),
            Some(v) => {
                let b: [u8; 8] = v.as_ref().try_into().map_err(|_| {
                    Error::corruption(
                        self.dir.display().to_string(),
                        0,
                        format!("value of {key} is not 8 bytes"),
                    )
                })?;
                Ok(Some(u64::from_le_bytes(b)))
            }
        }
    }

    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        let mut out = Vec::with_capacity(1);
        self.scan(key, 1, &mut out)?;
        Ok(out.first().copied())
    }

    fn scan(&self, from: u64, count: usize, out: &mut Vec<Record>) -> Result<()> {
        let start = from.to_be_bytes();
        let it = self.db.iterator(IteratorMode::From(&start, Direction::Forward));
        for item in it.take(count) {
            let (k, v) = item.map_err(|e| self.e("scan", e))?;
            let rec = decode(&k, &v).ok_or_else(|| {
                Error::corruption(self.dir.display().to_string(), 0, "record is not 8+8 bytes")
            })?;
            out.push(rec);
        }
        Ok(())
    }

    fn supports_updates(&self) -> bool {
        true
    }

    fn insert(&self, key: u64, value: u64) -> Result<Option<u64>> {
        let kb = key.to_be_bytes();
        let prev = if self.db.key_may_exist(kb) {
            self.get(key)?
        } else {
            None
        };
        self.db
            .put_opt(kb, value.to_le_bytes(), &self.write)
            .map_err(|e| self.e("put", e))?;
        if prev.is_none() {
            self.n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(prev)
    }

    fn delete(&self, key: u64) -> Result<bool> {
        let had = self.get(key)?.is_some();
        if had {
            self.db
                .delete_opt(key.to_be_bytes(), &self.write)
                .map_err(|e| self.e("delete", e))?;
            self.n.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(had)
    }

    fn sync(&self) -> Result<()> {
        self.db.flush_wal(true).map_err(|e| self.e("sync", e))
    }

    fn stats(&self) -> Result<IndexStats> {
        let cache = self.cache.get_usage() as u64;
        let readers = self.prop("rocksdb.estimate-table-readers-mem")?;
        let memtables = self.prop("rocksdb.cur-size-all-mem-tables")?;
        let mut extra = BTreeMap::new();
        extra.insert("block_cache_usage".into(), Value::from(cache));
        extra.insert("table_readers_mem".into(), Value::from(readers));
        extra.insert("memtables".into(), Value::from(memtables));
        let mut files = 0;
        for level in 0..7 {
            files += self.prop(&format!("rocksdb.num-files-at-level{level}"))?;
        }
        extra.insert("sst_files".into(), Value::from(files));
        Ok(IndexStats {
            kind: "rocksdb".into(),
            n: self.len(),
            memory_bytes: cache + readers + memtables,
            disk_bytes: dir_bytes(&self.dir),
            models: None,
            height: None,
            extra,
        })
    }

    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let mut n = 0u64;
        let mut prev: Option<u64> = None;
        for item in self.db.iterator(IteratorMode::Start) {
            let (k, v) = item.map_err(|e| self.e("verify", e))?;
            let (k, _) = decode(&k, &v).ok_or_else(|| {
                Error::corruption(self.dir.display().to_string(), 0, "record is not 8+8 bytes")
            })?;
            if prev.is_some_and(|p| p >= k) {
                return Err(Error::corruption(
                    self.dir.display().to_string(),
                    0,
                    format!("key {k} after {prev:?}"),
                ));
            }
            prev = Some(k);
            n += 1;
        }
        progress(n);
        Ok(n)
    }

    fn io(&self) -> &Arc<IoStats> {
        &self.io
    }
}

/// RocksDB as a `kvbench` engine (see [`crate::kv`]): block-based tables of
/// 4 KiB blocks, no compression, full Bloom filters of 10 bits/key, index and
/// filter blocks in the LRU block cache (`cache_index_and_filter_blocks`),
/// write buffer + block cache = the run's memory ([`MemorySplit`]), two
/// memtables at most (one taking writes, one being flushed), WAL on and
/// synced per write under `sync=always` only; O_DIRECT reads if asked.
pub(crate) fn open_kv(dir: &Path, env: &KvEnv) -> Result<Box<dyn KvEngine>> {
    let split = MemorySplit::of(env.memory_bytes);
    let cache = Cache::new_lru_cache(split.block_cache as usize).map_err(|e| err(dir, "cache", e))?;
    let mut t = BlockBasedOptions::default();
    t.set_block_size(kv::BLOCK_SIZE);
    t.set_block_cache(&cache);
    t.set_bloom_filter(kv::BLOOM_BITS_PER_KEY as f64, false);
    t.set_cache_index_and_filter_blocks(true);
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_compression_type(DBCompressionType::None);
    o.set_block_based_table_factory(&t);
    o.set_write_buffer_size(split.write_buffer as usize);
    o.set_max_write_buffer_number(2);
    o.set_use_direct_reads(env.direct_reads);
    o.set_db_log_dir(dir);
    let db = DB::open(&o, dir.join("db")).map_err(|e| err(dir, "open", e))?;
    let mut write = WriteOptions::default();
    write.set_sync(env.sync == SyncMode::Always);
    write.disable_wal(false);
    let mut config = Map::new();
    split.config(&mut config);
    config.insert("cache_index_and_filter_blocks".into(), Value::from(true));
    config.insert("max_write_buffer_number".into(), Value::from(2));
    config.insert("direct_reads".into(), Value::from(env.direct_reads));
    config.insert(
        "sync".into(),
        serde_json::to_value(env.sync).unwrap_or(Value::Null),
    );
    Ok(Box::new(RocksKv {
        db,
        cache,
        dir: dir.to_path_buf(),
        write,
        config,
    }))
}

struct RocksKv {
    db: DB,
    cache: Cache,
    dir: PathBuf,
    write: WriteOptions,
    config: Map<String, Value>,
}

impl RocksKv {
    fn e(&self, what: &str, x: rocksdb::Error) -> Error {
        err(&self.dir, what, x)
    }

    fn prop(&self, name: &str) -> Result<u64> {
        int_prop(&self.db, &self.dir, name)
    }
}

impl KvEngine for RocksKv {
    fn name(&self) -> &str {
        "rocksdb"
    }

    fn config(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db
            .put_opt(key, value, &self.write)
            .map_err(|e| self.e("put", e))
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .db
            .get_pinned(key)
            .map_err(|e| self.e("get", e))?
            .map(|v| v.as_ref().to_vec()))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db
            .delete_opt(key, &self.write)
            .map_err(|e| self.e("delete", e))
    }

    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        let mut b = WriteBatch::default();
        for op in ops {
            match *op {
                BatchOp::Put(k, v) => b.put(k, v),
                BatchOp::Delete(k) => b.delete(k),
            }
        }
        self.db.write_opt(b, &self.write).map_err(|e| self.e("write", e))
    }

    fn scan(&self, from: &[u8], count: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize> {
        let mut it = self.db.raw_iterator();
        it.seek(from);
        let mut n = 0;
        while n < count {
            match (it.key(), it.value()) {
                (Some(k), Some(v)) => visit(k, v),
                _ => break,
            }
            n += 1;
            it.next();
        }
        it.status().map_err(|e| self.e("scan", e))?;
        Ok(n)
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(|e| self.e("flush", e))?;
        self.db.flush_wal(true).map_err(|e| self.e("sync", e))
    }

    fn memory(&self) -> Result<MemoryUse> {
        Ok(MemoryUse {
            memtable: self.prop("rocksdb.cur-size-all-mem-tables")?,
            block_cache: self.cache.get_usage() as u64,
            index: Some(self.prop("rocksdb.estimate-table-readers-mem")?),
            filter: None,
            note: Some(
                "index and filter blocks are in the block cache; index = table readers' own memory".into(),
            ),
        })
    }

    fn disk_bytes(&self) -> Result<u64> {
        Ok(dir_bytes(&self.dir))
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.cancel_all_background_work(true);
        Ok(())
    }
}
