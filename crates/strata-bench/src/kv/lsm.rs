//! strata's LSM store [`strata::lsm::Store`] as a `kvbench` engine: its
//! own memory split of the run's budget (`Options::with_memory`: a quarter
//! for the memtable, the rest for the block cache, which the store shrinks
//! by what frozen memtables and resident indexes and filters take), the run's sync mode, 4 KiB blocks and 10 bits/key
//! Bloom filters by default; written bytes as the store counts them (log,
//! flushes, compactions).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use strata::Result;
use strata::lsm::{Options, Store, WriteBatch};

use super::{BatchOp, KvEngine, KvEnv, MemoryUse, SyncMode, dir_bytes};

/// The store with the run's memory budget and sync mode, then the spec's
/// own options (`index=pgm,boundary=16,...`, see `Options::parse_spec`),
/// which may override them; `direct=true` under `--cold`.
pub struct LsmEngine {
    store: Store,
    dir: PathBuf,
    config: Map<String, Value>,
}

/// The option spec the store is opened with: the run's settings first, the
/// engine's parameters after them (so they win).
pub fn lsm_spec(params: &str, env: &KvEnv) -> String {
    let sync = match env.sync {
        SyncMode::Always => "always",
        SyncMode::Never => "never",
    };
    let mut s = format!("memory={},sync={sync}", env.memory_bytes);
    if env.direct_reads {
        s.push_str(",direct=true");
    }
    if !params.is_empty() {
        s.push(',');
        s.push_str(params);
    }
    s
}

impl LsmEngine {
    /// Opens (creating if missing) the store in `dir`.
    pub fn open(dir: &Path, params: &str, env: &KvEnv) -> Result<LsmEngine> {
        let spec = lsm_spec(params, env);
        let opts = Options::parse_spec(&spec)?;
        let mut config = Map::new();
        config.insert("options".into(), Value::from(spec));
        config.insert("memory_bytes".into(), Value::from(opts.memory_bytes));
        config.insert("write_buffer_bytes".into(), Value::from(opts.write_buffer_bytes));
        config.insert("block_cache_bytes".into(), Value::from(opts.block_cache_bytes));
        config.insert("max_immutable".into(), Value::from(opts.max_immutable as u64));
        config.insert("pin_tables".into(), Value::from(opts.pin_tables));
        config.insert("index".into(), Value::from(opts.index().kind.clone()));
        config.insert("boundary".into(), Value::from(opts.index().boundary as u64));
        config.insert("block".into(), Value::from(opts.table.block_size as u64));
        config.insert(
            "bloom_bits_per_key".into(),
            Value::from(opts.table.bloom_bits_per_key as u64),
        );
        let store = Store::open(dir, opts)?;
        Ok(LsmEngine {
            store,
            dir: dir.to_path_buf(),
            config,
        })
    }
}

impl KvEngine for LsmEngine {
    fn name(&self) -> &str {
        "lsm"
    }

    /// The options, and under `stats` the store's [`strata::lsm::StoreStats`]
    /// now (counters since the store was last opened: `train_nanos`,
    /// `compaction_nanos`, `flush_nanos`, levels, ...).
    fn config(&self) -> Map<String, Value> {
        let mut c = self.config.clone();
        if let Ok(v) = serde_json::to_value(self.store.stats()) {
            c.insert("stats".into(), v);
        }
        c
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.store.put(key, value)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.get(key)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.store.delete(key)
    }

    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        let mut b = WriteBatch::new();
        for op in ops {
            match *op {
                BatchOp::Put(k, v) => b.put(k, v),
                BatchOp::Delete(k) => b.delete(k),
            };
        }
        self.store.write_batch(&b)
    }

    fn scan(&self, from: &[u8], count: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize> {
        let mut it = self.store.iter()?;
        it.seek(from)?;
        let mut n = 0;
        while n < count && it.valid() {
            visit(it.key(), it.value());
            n += 1;
            it.next()?;
        }
        Ok(n)
    }

    fn flush(&self) -> Result<()> {
        self.store.flush()
    }

    fn memory(&self) -> Result<MemoryUse> {
        let s = self.store.stats();
        Ok(MemoryUse {
            memtable: s.memtable_bytes + s.immutable_bytes,
            block_cache: s.block_cache_bytes,
            index: Some(s.index_bytes),
            filter: Some(s.filter_bytes),
            note: None,
        })
    }

    fn disk_bytes(&self) -> Result<u64> {
        Ok(dir_bytes(&self.dir))
    }

    fn bytes_written(&self) -> Option<u64> {
        let s = self.store.stats();
        Some(s.wal_bytes + s.flush_bytes + s.compaction_bytes_written)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.store.close()
    }
}
