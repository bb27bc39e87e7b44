//! Engines by name, and strata's `db` as a key-value engine.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use strata::db::{Options as DbOptions, SyncPolicy};
use strata::{Db, Error, Result};

use super::{KvEngine, KvEnv, MemoryUse, SyncMode};

/// An engine and its parameters, as given on the command line
/// (`db`, `rocksdb`, `lsm:index=pgm,boundary=16`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSpec {
    /// The spec as given.
    pub spec: String,
    /// Engine name (before the first `:`).
    pub kind: String,
    /// Parameters after the `:` (empty if none), passed to the engine.
    pub params: String,
}

impl EngineSpec {
    /// Parses one spec.
    pub fn parse(s: &str) -> Result<EngineSpec> {
        let (kind, params) = s.split_once(':').unwrap_or((s, ""));
        if kind.is_empty() {
            return Err(Error::invalid(format!("engine spec {s:?} has no engine name")));
        }
        Ok(EngineSpec {
            spec: s.to_string(),
            kind: kind.to_string(),
            params: params.to_string(),
        })
    }

    /// Parses a comma-separated list in which an engine's own parameters
    /// are comma-separated too: a part with `=` and no `:` before it belongs
    /// to the engine before it (`lsm:index=pgm,boundary=16,rocksdb` is two
    /// engines).
    pub fn parse_list(s: &str) -> Result<Vec<EngineSpec>> {
        let mut parts: Vec<String> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let is_param = match (part.find('='), part.find(':')) {
                (Some(eq), Some(colon)) => eq < colon,
                (Some(_), None) => true,
                _ => false,
            };
            match parts.last_mut() {
                Some(last) if is_param => {
                    last.push(',');
                    last.push_str(part);
                }
                _ if is_param => {
                    return Err(Error::invalid(format!(
                        "engine parameter {part:?} has no engine before it"
                    )));
                }
                _ => parts.push(part.to_string()),
            }
        }
        if parts.is_empty() {
            return Err(Error::invalid("no engine given"));
        }
        parts.iter().map(|p| EngineSpec::parse(p)).collect()
    }
}

/// Every engine name this build can open.
pub fn engine_names() -> Vec<&'static str> {
    let mut v = vec!["db", "lsm"];
    if cfg!(feature = "rocksdb") {
        v.push("rocksdb");
    }
    if cfg!(feature = "fjall") {
        v.push("fjall");
    }
    if cfg!(feature = "leveldb") {
        v.push("leveldb");
    }
    v
}

/// The peers this build lacks, each with the cargo feature that adds it.
pub fn missing_engines() -> Vec<(&'static str, &'static str)> {
    ["rocksdb", "fjall", "leveldb"]
        .into_iter()
        .filter(|n| !engine_names().contains(n))
        .map(|n| (n, n))
        .collect()
}

/// Opens (creating if missing) the engine of `spec` in directory `dir`.
pub fn open_engine(spec: &EngineSpec, dir: &Path, env: &KvEnv) -> Result<Box<dyn KvEngine>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let no_params = || {
        if spec.params.is_empty() {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "engine {} takes no parameters (the run sets memory, sync, bloom bits and block size), got {:?}",
                spec.kind, spec.params
            )))
        }
    };
    match spec.kind.as_str() {
        "db" => {
            no_params()?;
            Ok(Box::new(DbEngine::open(dir, env)?))
        }
        "lsm" => Ok(Box::new(super::LsmEngine::open(dir, &spec.params, env)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => {
            no_params()?;
            crate::peers::rocksdb::open_kv(dir, env)
        }
        #[cfg(feature = "fjall")]
        "fjall" => {
            no_params()?;
            crate::peers::fjall::open_kv(dir, env)
        }
        #[cfg(feature = "leveldb")]
        "leveldb" => {
            no_params()?;
            crate::peers::leveldb::open_kv(dir, env)
        }
        other => {
            let missing = missing_engines();
            if let Some((_, feature)) = missing.iter().find(|(n, _)| *n == other) {
                Err(Error::Unsupported(format!(
                    "engine {other} is not in this build: build strata with --features {feature}"
                )))
            } else {
                Err(Error::invalid(format!(
                    "unknown engine {other:?}; this build has {}",
                    engine_names().join(", ")
                )))
            }
        }
    }
}

/// strata's hybrid store [`Db`] (u64 → u64) as an engine: 8-byte keys and
/// values only, both big-endian; memory budget = the run's, log synced per
/// write under `sync=always`, not synced otherwise.
pub struct DbEngine {
    db: Db,
    dir: PathBuf,
    memory: u64,
    sync: SyncMode,
}

impl DbEngine {
    /// Opens the store in `dir`; other key or value sizes than 8 are refused.
    pub fn open(dir: &Path, env: &KvEnv) -> Result<DbEngine> {
        if let Some(f) = &env.key_file {
            return Err(Error::invalid(format!(
                "engine db stores u64 -> u64: it needs 8-byte keys, and the keys of key file {} vary in length (mean {:.1} bytes; readmissing's are one byte longer)",
                f.name(),
                f.mean_len()
            )));
        }
        if env.key_size != 8 || env.value_size != 8 {
            return Err(Error::invalid(format!(
                "engine db stores u64 -> u64: it needs 8-byte keys and values, got {}-byte keys and {}-byte values",
                env.key_size, env.value_size
            )));
        }
        let opts = DbOptions {
            memory_budget: env.memory_bytes,
            sync: match env.sync {
                SyncMode::Always => SyncPolicy::Always,
                SyncMode::Never => SyncPolicy::Never,
            },
            ..DbOptions::default()
        };
        Ok(DbEngine {
            db: Db::open_path(dir, opts)?,
            dir: dir.to_path_buf(),
            memory: env.memory_bytes,
            sync: env.sync,
        })
    }

    fn word(&self, b: &[u8], what: &str) -> Result<u64> {
        let a: [u8; 8] = b
            .try_into()
            .map_err(|_| Error::invalid(format!("engine db needs 8-byte {what}s, got {} bytes", b.len())))?;
        Ok(u64::from_be_bytes(a))
    }
}

impl KvEngine for DbEngine {
    fn name(&self) -> &str {
        "db"
    }

    fn config(&self) -> Map<String, Value> {
        let mut c = Map::new();
        c.insert("memory_budget".into(), Value::from(self.memory));
        c.insert(
            "sync".into(),
            serde_json::to_value(self.sync).unwrap_or(Value::Null),
        );
        c.insert("dir".into(), Value::from(self.dir.display().to_string()));
        c
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.put(self.word(key, "key")?, self.word(value, "value")?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .db
            .get(self.word(key, "key")?)?
            .map(|v| v.to_be_bytes().to_vec()))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db.delete(self.word(key, "key")?)
    }

    fn write_batch(&self, ops: &[super::BatchOp<'_>]) -> Result<()> {
        let mut b = strata::db::WriteBatch::new();
        for op in ops {
            match *op {
                super::BatchOp::Put(k, v) => b.put(self.word(k, "key")?, self.word(v, "value")?),
                super::BatchOp::Delete(k) => b.delete(self.word(k, "key")?),
            };
        }
        self.db.write_batch(&b)
    }

    fn scan(&self, from: &[u8], count: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize> {
        let mut n = 0;
        for item in self.db.range(self.word(from, "key")?..).take(count) {
            let (k, v) = item?;
            visit(&k.to_be_bytes(), &v.to_be_bytes());
            n += 1;
        }
        Ok(n)
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        self.db.sync()
    }

    fn memory(&self) -> Result<MemoryUse> {
        let s = self.db.stats()?;
        Ok(MemoryUse {
            memtable: s.dynamic_bytes,
            block_cache: 0,
            index: Some(s.static_index_bytes),
            filter: Some(0),
            note: Some("no block cache and no filters: data pages are read through the OS".into()),
        })
    }

    fn disk_bytes(&self) -> Result<u64> {
        Ok(self.db.stats()?.disk_bytes)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_at_engine_names() {
        let v =
            EngineSpec::parse_list("lsm:index=pgm,boundary=16,rocksdb,db").unwrap_or_else(|e| panic!("{e}"));
        let kinds: Vec<&str> = v.iter().map(|s| s.kind.as_str()).collect();
        assert_eq!(kinds, ["lsm", "rocksdb", "db"]);
        assert_eq!(v[0].params, "index=pgm,boundary=16");
        assert!(EngineSpec::parse_list("index=pgm").is_err());
        assert!(EngineSpec::parse_list("").is_err());
    }

    #[test]
    fn db_refuses_other_sizes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let env = KvEnv {
            memory_bytes: 1 << 20,
            sync: SyncMode::Never,
            key_size: 16,
            key_file: None,
            value_size: 8,
            direct_reads: false,
        };
        let e = DbEngine::open(dir.path(), &env)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("8-byte keys and values"), "{e}");
    }
}
