//! `strata.LsmStore`: the LSM-tree store [`strata::lsm::Store`] (byte-string
//! keys and values; write-ahead log, memtables, leveled SSTables with
//! learned indexes), plus uint64 conveniences over numpy arrays.

use std::borrow::Cow;
use std::path::PathBuf;

use numpy::PyArray1;
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use strata::Error;
use strata::log::SyncPolicy;
use strata::lsm::{Options, Store, WriteBatch};

use crate::convert::to_py_via_json;
use crate::db::{size_param, sync_policy};
use crate::errors::{Detach, IntoPyResult, InvalidInputError};
use crate::index::{key_slice, u64_array};

/// Records per write batch of `put_u64` (each batch is atomic).
const U64_BATCH: usize = 65_536;

/// A durable, ordered map of byte-string keys (up to 64 KiB) to byte-string
/// values (up to 64 MiB) in a directory: an LSM tree (Liu et al.) whose
/// tables carry learned indexes. Writes go to a write-ahead log and a
/// memtable; full memtables are flushed to level-0 tables and compacted into
/// larger levels in the background. Thread-safe: methods release the GIL
/// while they read or write storage.
#[pyclass(module = "strata._strata", name = "LsmStore", frozen, weakref)]
pub struct PyLsmStore {
    inner: RwLock<Option<Store>>,
    path: PathBuf,
    sync: String,
}

impl PyLsmStore {
    /// Runs `f` on the open store with the GIL released; InvalidInputError
    /// if it was closed.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Store) -> strata::Result<T> + Send,
    ) -> PyResult<T> {
        py.run_detached(|| {
            let g = self.inner.read();
            match g.as_ref() {
                Some(s) => f(s),
                None => Err(Error::invalid(format!("store {} is closed", self.path.display()))),
            }
        })
    }
}

/// The `u64` an 8-byte big-endian value holds (as `put_u64` writes them).
fn value_u64(key: u64, v: &[u8]) -> strata::Result<u64> {
    let b: [u8; 8] = v.try_into().map_err(|_| {
        Error::invalid(format!(
            "the value of key {key} is {} bytes, not the 8 bytes of a uint64 (written by put_u64?)",
            v.len()
        ))
    })?;
    Ok(u64::from_be_bytes(b))
}

#[pymethods]
impl PyLsmStore {
    /// Opens the store in directory `path`, creating an empty one if there
    /// is none (the directory too); the log is replayed on open.
    ///
    /// - `index`: the index of the tables the store writes: `"fp"` (fence
    ///   pointers) or a learned kind: `"pgm"` (default), `"rs"`, `"rmi"`,
    ///   `"plr"`, `"fiting"`, `"gap-zonemap-d"`, `"air"`.
    /// - `boundary`: the position boundary of that index (entries a lookup
    ///   searches after it; default 16).
    /// - `memory`: total budget for memtables, block cache, index and filter
    ///   (int or `"64M"`).
    /// - `sync`: `"never"` (default: durable after `flush()` or `close()`),
    ///   `"always"` (or `"every"`: a write is on stable storage when it
    ///   returns) or a period in milliseconds, an int or `"10ms"`: a
    ///   background sync every that many milliseconds.
    /// - `read_only`: open an existing store for reading only (a shared
    ///   lock: `LockedError` while a writer has it open).
    ///
    /// A writer holds the store's exclusive lock until `close()`: a second
    /// `LsmStore` on the same path, in this process or another, raises
    /// `LockedError`.
    #[new]
    #[pyo3(signature = (path, index = "pgm", boundary = 16, memory = None, sync = None, read_only = false))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        index: &str,
        boundary: u64,
        memory: Option<Bound<'_, PyAny>>,
        sync: Option<Bound<'_, PyAny>>,
        read_only: bool,
    ) -> PyResult<PyLsmStore> {
        let memory = match memory {
            Some(m) => size_param("memory", &m)?,
            None => 64 << 20,
        };
        let sync = match sync {
            Some(s) => sync_policy(&s)?,
            None => SyncPolicy::Never,
        };
        let sync_text = match sync {
            SyncPolicy::Always => "always".to_string(),
            SyncPolicy::Never => "never".to_string(),
            SyncPolicy::EveryMs(ms) => format!("{ms} ms"),
        };
        let mut opts =
            Options::parse_spec(&format!("index={index},boundary={boundary},memory={memory}")).py()?;
        opts.sync = sync;
        opts.read_only = read_only;
        if read_only && !path.is_dir() {
            return Err(Error::NotFound(format!("no store at {}", path.display()))).py();
        }
        let store = py.run_detached(|| Store::open(&path, opts))?;
        Ok(PyLsmStore {
            inner: RwLock::new(Some(store)),
            path,
            sync: sync_text,
        })
    }

    /// The store directory.
    #[getter]
    fn path(&self) -> String {
        self.path.display().to_string()
    }

    /// Whether the store was closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().is_none()
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed " } else { "" };
        format!(
            "<strata.LsmStore {state}path={:?} sync={}>",
            self.path.display(),
            self.sync
        )
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the store (see `close`); exceptions of the block propagate.
    fn __exit__(
        &self,
        py: Python<'_>,
        _ty: Option<Bound<'_, PyAny>>,
        _value: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// Stops the background work (a running flush or compaction finishes
    /// first) and makes every acknowledged write durable. Further calls
    /// raise InvalidInputError; closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.run_detached(|| match self.inner.write().take() {
            Some(s) => s.close(),
            None => Ok(()),
        })
    }

    fn __contains__(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        Ok(self.with(py, |s| s.get(key))?.is_some())
    }

    /// The value of `key` (bytes), or None.
    fn get<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let v = self.with(py, |s| s.get(key))?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }

    /// The values of `keys` (a sequence of bytes), a list of bytes or None
    /// in the same order: all from one version of the store, each table's
    /// blocks for the batch read with many reads in flight.
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: Bound<'py, PyAny>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let mut ks: Vec<Vec<u8>> = Vec::new();
        for k in keys.try_iter()? {
            ks.push(k?.extract::<Vec<u8>>()?);
        }
        let got = self.with(py, |s| {
            let refs: Vec<&[u8]> = ks.iter().map(Vec::as_slice).collect();
            s.get_many(&refs)
        })?;
        Ok(got.into_iter().map(|v| v.map(|v| PyBytes::new(py, &v))).collect())
    }

    /// Inserts or overwrites `key` (bytes) with `value` (bytes).
    /// InvalidInputError for a key over 64 KiB or a value over 64 MiB.
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<()> {
        self.with(py, |s| s.put(key, value))
    }

    /// Removes `key` (absent keys are fine).
    fn delete(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        self.with(py, |s| s.delete(key))
    }

    /// Applies `ops`, a sequence of `(key, value)` pairs (`value=None`
    /// deletes the key), as one atomic write batch: after a crash all of it
    /// or none of it is visible; a later repeat of a key wins.
    fn write_batch(&self, py: Python<'_>, ops: Bound<'_, PyAny>) -> PyResult<()> {
        let mut b = WriteBatch::new();
        for item in ops.try_iter()? {
            let item = item?;
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item
                .extract()
                .map_err(|_| InvalidInputError::new_err("write_batch takes (key, value or None) pairs"))?;
            let k = k.extract::<Cow<'_, [u8]>>()?;
            if v.is_none() {
                b.delete(&k);
            } else {
                b.put(&k, &v.extract::<Cow<'_, [u8]>>()?);
            }
        }
        self.with(py, |s| s.write_batch(&b))
    }

    /// The records with key >= `start` (from the smallest key if None), at
    /// most `limit` of them (all if None), as a list of `(key, value)` bytes
    /// pairs in key order.
    #[pyo3(signature = (start = None, limit = None))]
    fn scan<'py>(
        &self,
        py: Python<'py>,
        start: Option<&[u8]>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let recs = self.with(py, |s| {
            let mut it = s.iter()?;
            match start {
                Some(k) => it.seek(k)?,
                None => it.seek_to_first()?,
            }
            let mut out = Vec::new();
            while it.valid() && limit.is_none_or(|l| out.len() < l) {
                out.push((it.key().to_vec(), it.value().to_vec()));
                it.next()?;
            }
            Ok(out)
        })?;
        let items = recs
            .iter()
            .map(|(k, v)| PyTuple::new(py, [PyBytes::new(py, k), PyBytes::new(py, v)]))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Writes the memtable to a level-0 table and waits: on return every
    /// earlier write is durable, whatever `sync`.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.flush())
    }

    /// Flushes, then compacts every level into the last one and waits.
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| {
            s.flush()?;
            s.compact_range(None, None)
        })
    }

    /// Sizes and counters as a dict: memtable, index, filter and block cache
    /// bytes, tables per level, bytes written, flushes, compactions, I/O.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let st = self.with(py, |s| Ok(s.stats()))?;
        let d = to_py_via_json(py, &st)?;
        d.set_item("sync", &self.sync)?;
        Ok(d)
    }

    /// Reads every table's blocks and checks checksums, order and the level
    /// invariants; returns what it checked as a dict (tables, entries,
    /// bytes, tables per level). CorruptionError if a check fails.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = self.with(py, |s| s.verify())?;
        to_py_via_json(py, &r)
    }

    /// Puts `keys[i] -> values[i]` (uint64 arrays of one length) as 8-byte
    /// big-endian keys and values, in atomic write batches of up to 65,536
    /// records (no Python loop; the GIL is released).
    fn put_u64<'py>(
        &self,
        py: Python<'py>,
        keys: Bound<'py, PyAny>,
        values: Bound<'py, PyAny>,
    ) -> PyResult<()> {
        let keys = u64_array(&keys, "keys")?;
        let values = u64_array(&values, "values")?;
        let (mut ok, mut ov) = (Vec::new(), Vec::new());
        let ks = key_slice(&keys, &mut ok);
        let vs = key_slice(&values, &mut ov);
        if ks.len() != vs.len() {
            return Err(InvalidInputError::new_err(format!(
                "put_u64 needs as many values as keys, got {} keys and {} values",
                ks.len(),
                vs.len()
            )));
        }
        self.with(py, |s| {
            for (kc, vc) in ks.chunks(U64_BATCH).zip(vs.chunks(U64_BATCH)) {
                let mut b = WriteBatch::new();
                for (k, v) in kc.iter().zip(vc) {
                    b.put(&k.to_be_bytes(), &v.to_be_bytes());
                }
                s.write_batch(&b)?;
            }
            Ok(())
        })
    }

    /// Looks up uint64 `keys` (8-byte big-endian, as `put_u64` writes them):
    /// returns `(found, values)`, a bool array and a uint64 array (0 where
    /// not found). InvalidInputError if a found value is not 8 bytes.
    fn get_u64<'py>(&self, py: Python<'py>, keys: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
        let keys = u64_array(&keys, "keys")?;
        let mut owned = Vec::new();
        let ks = key_slice(&keys, &mut owned);
        let (found, values) = self.with(py, |s| {
            let (mut found, mut values) = (Vec::with_capacity(ks.len()), Vec::with_capacity(ks.len()));
            for &k in ks {
                let v = s.get(&k.to_be_bytes())?;
                found.push(v.is_some());
                values.push(v.map(|v| value_u64(k, &v)).transpose()?.unwrap_or(0));
            }
            Ok((found, values))
        })?;
        PyTuple::new(
            py,
            [
                PyArray1::from_vec(py, found).into_any(),
                PyArray1::from_vec(py, values).into_any(),
            ],
        )
    }
}

/// Adds `LsmStore` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLsmStore>()
}
