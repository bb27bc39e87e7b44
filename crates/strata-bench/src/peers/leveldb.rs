//! LevelDB (Liu et al.'s base) as a `kvbench` engine, through its C API
//! (`leveldb/c.h`) as the `leveldb-sys` crate declares it.
//!
//! Which LevelDB: Debian's `libleveldb` (1.23, package `libleveldb-dev`),
//! linked by overriding the build script of `leveldb-sys` as
//! `scripts/peers.sh` does (`--config
//! 'target.<triple>.leveldb.rustc-link-lib=["leveldb"]'`). Without the
//! override `leveldb-sys` compiles the LevelDB 1.22 sources it bundles with
//! cmake, which fails here with GCC 12 (its CMake file passes clang's
//! `-Wthread-safety`). The record's config names the version linked.
//!
//! Configuration: block cache (LRU) = the budget less the write buffer
//! ([`MemorySplit`]), write buffer of that size (LevelDB keeps one
//! immutable memtable besides), 4 KiB blocks, no compression, Bloom filter
//! policy of 10 bits/key; `sync=always` sets `WriteOptions::sync`.
//!
//! What it lacks beside RocksDB: LevelDB reads tables through `mmap` on
//! 64-bit Linux (up to 1000 tables; the limit is not settable through the C
//! API), and blocks read from a mapping bypass the block cache, so its reads
//! are served by the OS page cache, whatever the budget (measured: 4 KiB in
//! the cache after 10k random reads; cold runs drop the page cache first);
//! index and filter blocks cannot go into the
//! block cache (each open table holds them, in the table cache of up to
//! 1000 tables), so they are outside the budget and LevelDB reports no
//! figure for them; memory is one figure (`leveldb.approximate-memory-usage`:
//! block cache + memtables); no O_DIRECT reads; no count of bytes written.

use std::ffi::{CStr, CString, c_char};
use std::path::{Path, PathBuf};
use std::ptr;

use leveldb_sys as ffi;
use serde_json::{Map, Value};
use strata::{Error, Result};

use crate::kv::{self, BatchOp, KvEngine, KvEnv, MemorySplit, MemoryUse, SyncMode, dir_bytes};

/// Takes a LevelDB error string (freeing it) into an [`Error`].
fn take_err(dir: &Path, what: &str, e: *mut c_char) -> Result<()> {
    if e.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null error pointer from LevelDB is a NUL-terminated
    // string it allocated; we copy it and free it once with leveldb_free.
    let msg = unsafe {
        let m = CStr::from_ptr(e).to_string_lossy().into_owned();
        ffi::leveldb_free(e.cast());
        m
    };
    Err(Error::Io {
        file: dir.display().to_string(),
        source: std::io::Error::other(format!("leveldb {what}: {msg}")),
    })
}

/// Opens (creating if missing) LevelDB in `dir`.
pub(crate) fn open_kv(dir: &Path, env: &KvEnv) -> Result<Box<dyn KvEngine>> {
    let split = MemorySplit::of(env.memory_bytes);
    let path = dir.join("leveldb");
    let cpath = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::invalid(format!("path {} has a NUL byte", path.display())))?;
    // SAFETY: plain constructors of the C API; every object is owned by the
    // `LevelKv` below and destroyed once in its Drop, after the database.
    let mut db = unsafe {
        LevelKv {
            db: ptr::null_mut(),
            options: ffi::leveldb_options_create(),
            cache: ffi::leveldb_cache_create_lru(split.block_cache as usize),
            filter: ffi::leveldb_filterpolicy_create_bloom(kv::BLOOM_BITS_PER_KEY as i32),
            read: ffi::leveldb_readoptions_create(),
            write: ffi::leveldb_writeoptions_create(),
            dir: dir.to_path_buf(),
            config: Map::new(),
        }
    };
    let mut e: *mut c_char = ptr::null_mut();
    // SAFETY: the pointers were just created and are valid; `cpath` outlives the call.
    unsafe {
        ffi::leveldb_options_set_create_if_missing(db.options, 1);
        ffi::leveldb_options_set_cache(db.options, db.cache);
        ffi::leveldb_options_set_filter_policy(db.options, db.filter);
        ffi::leveldb_options_set_write_buffer_size(db.options, split.write_buffer as usize);
        ffi::leveldb_options_set_block_size(db.options, kv::BLOCK_SIZE);
        ffi::leveldb_options_set_compression(db.options, ffi::Compression::No);
        ffi::leveldb_writeoptions_set_sync(db.write, (env.sync == SyncMode::Always) as u8);
        db.db = ffi::leveldb_open(db.options, cpath.as_ptr(), &mut e);
    }
    take_err(dir, "open", e)?;
    if db.db.is_null() {
        return Err(Error::invalid(format!(
            "leveldb open of {} returned no database",
            path.display()
        )));
    }
    // SAFETY: version getters take no arguments.
    let version = unsafe {
        format!(
            "{}.{}",
            ffi::leveldb_major_version(),
            ffi::leveldb_minor_version()
        )
    };
    split.config(&mut db.config);
    db.config.insert("leveldb_version".into(), Value::from(version));
    db.config.insert("direct_reads".into(), Value::from(false));
    db.config
        .insert("index_filter_in_cache".into(), Value::from(false));
    db.config.insert(
        "table_reads".into(),
        Value::from("mmap (bypasses the block cache)"),
    );
    db.config.insert(
        "sync".into(),
        serde_json::to_value(env.sync).unwrap_or(Value::Null),
    );
    Ok(Box::new(db))
}

struct LevelKv {
    db: *mut ffi::leveldb_t,
    options: *mut ffi::leveldb_options_t,
    cache: *mut ffi::leveldb_cache_t,
    filter: *mut ffi::leveldb_filterpolicy_t,
    read: *mut ffi::leveldb_readoptions_t,
    write: *mut ffi::leveldb_writeoptions_t,
    dir: PathBuf,
    config: Map<String, Value>,
}

// SAFETY: a LevelDB database handle may be used from several threads at
// once (LevelDB's documented contract); the option objects are only read
// after open, and iterators and batches are made and destroyed per call.
unsafe impl Send for LevelKv {}
// SAFETY: as above.
unsafe impl Sync for LevelKv {}

impl Drop for LevelKv {
    fn drop(&mut self) {
        // SAFETY: each pointer was created once by the C API and is destroyed
        // once here, the database first (it uses the others).
        unsafe {
            if !self.db.is_null() {
                ffi::leveldb_close(self.db);
            }
            ffi::leveldb_options_destroy(self.options);
            ffi::leveldb_filterpolicy_destroy(self.filter);
            ffi::leveldb_cache_destroy(self.cache);
            ffi::leveldb_readoptions_destroy(self.read);
            ffi::leveldb_writeoptions_destroy(self.write);
        }
    }
}

impl LevelKv {
    fn property(&self, name: &str) -> Option<String> {
        let cname = CString::new(name).ok()?;
        // SAFETY: db is open; a non-null result is a malloc'ed string we free.
        unsafe {
            let p = ffi::leveldb_property_value(self.db, cname.as_ptr());
            if p.is_null() {
                return None;
            }
            let s = CStr::from_ptr(p).to_string_lossy().into_owned();
            ffi::leveldb_free(p.cast());
            Some(s)
        }
    }
}

impl KvEngine for LevelKv {
    fn name(&self) -> &str {
        "leveldb"
    }

    fn config(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut e = ptr::null_mut();
        // SAFETY: db is open; the slices outlive the call (LevelDB copies them).
        unsafe {
            ffi::leveldb_put(
                self.db,
                self.write,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut e,
            )
        };
        take_err(&self.dir, "put", e)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut e = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: db is open; a non-null result is a malloc'ed buffer of
        // `len` bytes that we copy and free.
        let v = unsafe {
            let p = ffi::leveldb_get(
                self.db,
                self.read,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut e,
            );
            if p.is_null() {
                None
            } else {
                let v = std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec();
                ffi::leveldb_free(p.cast());
                Some(v)
            }
        };
        take_err(&self.dir, "get", e)?;
        Ok(v)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        let mut e = ptr::null_mut();
        // SAFETY: db is open; the key outlives the call.
        unsafe { ffi::leveldb_delete(self.db, self.write, key.as_ptr().cast(), key.len(), &mut e) };
        take_err(&self.dir, "delete", e)
    }

    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        let mut e = ptr::null_mut();
        // SAFETY: the batch is created, filled (LevelDB copies the bytes),
        // written and destroyed here.
        unsafe {
            let b = ffi::leveldb_writebatch_create();
            for op in ops {
                match *op {
                    BatchOp::Put(k, v) => {
                        ffi::leveldb_writebatch_put(b, k.as_ptr().cast(), k.len(), v.as_ptr().cast(), v.len())
                    }
                    BatchOp::Delete(k) => ffi::leveldb_writebatch_delete(b, k.as_ptr().cast(), k.len()),
                }
            }
            ffi::leveldb_write(self.db, self.write, b, &mut e);
            ffi::leveldb_writebatch_destroy(b);
        }
        take_err(&self.dir, "write", e)
    }

    fn scan(&self, from: &[u8], count: usize, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize> {
        let mut n = 0;
        let mut e: *const c_char = ptr::null();
        // SAFETY: the iterator is created and destroyed here; key and value
        // pointers are valid until the next move of the iterator, and are
        // only read before it.
        unsafe {
            let it = ffi::leveldb_create_iterator(self.db, self.read);
            ffi::leveldb_iter_seek(it, from.as_ptr().cast(), from.len());
            while n < count && ffi::leveldb_iter_valid(it) != 0 {
                let (mut kl, mut vl) = (0usize, 0usize);
                let k = ffi::leveldb_iter_key(it, ptr::addr_of_mut!(kl));
                let v = ffi::leveldb_iter_value(it, ptr::addr_of_mut!(vl));
                visit(
                    std::slice::from_raw_parts(k.cast::<u8>(), kl),
                    std::slice::from_raw_parts(v.cast::<u8>(), vl),
                );
                n += 1;
                ffi::leveldb_iter_next(it);
            }
            ffi::leveldb_iter_get_error(it, ptr::addr_of_mut!(e));
            ffi::leveldb_iter_destroy(it);
        }
        take_err(&self.dir, "scan", e.cast_mut())?;
        Ok(n)
    }

    fn flush(&self) -> Result<()> {
        // LevelDB has no flush call, but CompactRange writes the memtable
        // out first; the range [empty key, empty key] overlaps no table
        // (no key here is empty), so no level is compacted. Then one synced
        // empty batch makes the log durable.
        let empty: &[u8] = &[];
        // SAFETY: db is open; non-null start and limit of length 0 are the
        // empty key (null would mean the whole range).
        unsafe { ffi::leveldb_compact_range(self.db, empty.as_ptr().cast(), 0, empty.as_ptr().cast(), 0) };
        let mut e = ptr::null_mut();
        // SAFETY: a synced write of an empty batch, created and destroyed here.
        unsafe {
            let w = ffi::leveldb_writeoptions_create();
            ffi::leveldb_writeoptions_set_sync(w, 1);
            let b = ffi::leveldb_writebatch_create();
            ffi::leveldb_write(self.db, w, b, &mut e);
            ffi::leveldb_writebatch_destroy(b);
            ffi::leveldb_writeoptions_destroy(w);
        }
        take_err(&self.dir, "sync", e)
    }

    fn memory(&self) -> Result<MemoryUse> {
        let total = self
            .property("leveldb.approximate-memory-usage")
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        Ok(MemoryUse {
            memtable: 0,
            block_cache: total,
            index: None,
            filter: None,
            note: Some(
                "one figure (approximate-memory-usage: block cache + memtables) under block_cache; \
                 tables are read through mmap, bypassing the block cache; index and filter blocks are \
                 held by open tables, outside the cache and not reported"
                    .into(),
            ),
        })
    }

    fn disk_bytes(&self) -> Result<u64> {
        Ok(dir_bytes(&self.dir))
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}
