//! `strata.Db`: the durable hybrid store [`strata::Db`] (write-ahead log +
//! in-memory dynamic stage + learned static stage, background merges).

use std::path::PathBuf;

use numpy::PyArray2;
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyType;
use strata::db::{MAX_BATCH_OPS, MergeTrigger, Options, StaticKind, SyncPolicy, WriteBatch};
use strata::index::{Params, Residency};
use strata::storage::StorageProfile;
use strata::{Db, Error};

use crate::convert::{py_to_param, to_py_via_json};
use crate::errors::{Detach, IntoPyResult, InvalidInputError};
use crate::index::{key_slice, lookup_many, records_array, u64_array, values_and_found};

/// A byte count from Python: an int, or a string with a unit (`"64M"`).
pub(crate) fn size_param(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    let mut map = serde_json::Map::new();
    map.insert(name.to_string(), py_to_param(name, v)?);
    Params::from_map(map).u64(name, 0).py()
}

/// `"always"` (or `"every"`), `"never"`, a period such as `"10ms"`, or a
/// number of milliseconds (int): the words of the CLI's `--sync` and the
/// kinds' `sync=` ([`SyncPolicy`]'s parser, and its error).
pub(crate) fn sync_policy(v: &Bound<'_, PyAny>) -> PyResult<SyncPolicy> {
    if let Ok(s) = v.extract::<String>() {
        return s.parse::<SyncPolicy>().py();
    }
    match v.extract::<u64>() {
        Ok(ms) if !v.is_instance_of::<pyo3::types::PyBool>() => Ok(SyncPolicy::EveryMs(ms)),
        _ => Err(InvalidInputError::new_err(format!(
            "sync must be \"always\" (or \"every\"), \"never\", or a period in milliseconds (an int, or \"10ms\"), got {}",
            v.repr()?
        ))),
    }
}

/// `"budget"`, `"constant:BYTES"` or `"ratio:R"`.
fn merge_trigger(s: &str) -> strata::Result<MergeTrigger> {
    let bad = || {
        Error::invalid(format!(
            "trigger must be \"budget\", \"constant:BYTES\" or \"ratio:R\", got {s:?}"
        ))
    };
    match s.split_once(':') {
        None if s == "budget" => Ok(MergeTrigger::Budget),
        Some(("constant", b)) => {
            let mut map = serde_json::Map::new();
            map.insert("trigger".into(), serde_json::Value::from(b));
            Ok(MergeTrigger::Constant(Params::from_map(map).u64("trigger", 0)?))
        }
        Some(("ratio", r)) => Ok(MergeTrigger::Ratio(r.parse().map_err(|_| bad())?)),
        _ => Err(bad()),
    }
}

/// The durable hybrid store: an ordered map of `uint64` keys to `uint64`
/// values in a directory. Writes go to a write-ahead log and an in-memory
/// dynamic stage; when that stage fills its share of `memory`, a background
/// merge writes it into a new static stage (a learned index over a sorted
/// data run on disk). Thread-safe: methods release the GIL while they read
/// or write storage, so several Python threads can use one store at once.
#[pyclass(module = "strata._strata", name = "Db", frozen, weakref)]
pub struct PyDb {
    inner: RwLock<Option<Db>>,
    path: PathBuf,
    sync: String,
}

impl PyDb {
    /// Runs `f` on the open store with the GIL released; InvalidInputError
    /// if it was closed.
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&Db) -> strata::Result<T> + Send) -> PyResult<T> {
        py.run_detached(|| {
            let g = self.inner.read();
            match g.as_ref() {
                Some(db) => f(db),
                None => Err(Error::invalid(format!("store {} is closed", self.path.display()))),
            }
        })
    }
}

#[pymethods]
impl PyDb {
    /// Opens the store in directory `path`, creating an empty one if there is
    /// none (the directory is created too). On open, the log is replayed.
    ///
    /// - `memory`: budget in bytes for the dynamic stages plus the static
    ///   index (int or `"64M"`); a merge starts when the writable stage holds
    ///   half of what the static index leaves.
    /// - `sync`: `"always"` (or `"every"`; default: a write is on stable
    ///   storage when it returns), `"never"` (durable after `sync()`,
    ///   `flush()` or `close()`) or a period in milliseconds, an int or
    ///   `"10ms"`: a background sync every that many milliseconds.
    /// - `static`: the static index merges build: `"auto"` (default: the
    ///   smaller of a LeCo zone map and `pgm-disk-cpr` at `epsilon`) or a
    ///   layered kind spec such as `"pgm-disk-cpr:epsilon=16"`.
    /// - `trigger`: `"budget"` (default), `"constant:BYTES"` or `"ratio:R"`.
    /// - `background_merge`: merge in a background thread (default) or in
    ///   the writer that fills the dynamic stage.
    /// - `resident`: `"index"` keeps the static index's models in memory;
    ///   `"none"` reads them from storage on every lookup.
    /// - `profile`: storage profile whose modelled time `stats()["io"]` reports.
    /// - `page_size`: page size of a new store's static files.
    /// - `read_only`: open an existing store for reading only (a shared
    ///   lock: refused with `LockedError` while a writer has it open; writes
    ///   raise `UnsupportedError`; a missing store raises `NotFoundError`).
    ///
    /// A writer holds the store's exclusive lock until `close()`: a second
    /// `Db` on the same path, in this process or another, raises
    /// `LockedError`.
    #[new]
    #[pyo3(signature = (path, memory = None, sync = None, r#static = "auto", epsilon = 8,
                        trigger = "budget", background_merge = true, resident = "index",
                        profile = None, page_size = 4096, read_only = false))]
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the Python keyword arguments one for one"
    )]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        memory: Option<Bound<'_, PyAny>>,
        sync: Option<Bound<'_, PyAny>>,
        r#static: &str,
        epsilon: u64,
        trigger: &str,
        background_merge: bool,
        resident: &str,
        profile: Option<&str>,
        page_size: usize,
        read_only: bool,
    ) -> PyResult<PyDb> {
        let defaults = Options::default();
        let memory_budget = match memory {
            Some(m) => size_param("memory", &m)?,
            None => defaults.memory_budget,
        };
        let sync = match sync {
            Some(s) => sync_policy(&s)?,
            None => defaults.sync,
        };
        let sync_text = match sync {
            SyncPolicy::Always => "always".to_string(),
            SyncPolicy::Never => "never".to_string(),
            SyncPolicy::EveryMs(ms) => format!("{ms} ms"),
        };
        let static_kind = if r#static == "auto" {
            StaticKind::Auto { epsilon }
        } else {
            StaticKind::Spec(r#static.to_string())
        };
        let opts = Options {
            sync,
            memory_budget,
            trigger: merge_trigger(trigger).py()?,
            static_kind,
            page_size,
            background_merge,
            profile: profile.map(StorageProfile::named).transpose().py()?,
            resident: resident.parse::<Residency>().py()?,
            read_only,
            create_if_missing: !read_only,
            strict_recovery: false,
        };
        let db = py.run_detached(|| Db::open_path(&path, opts))?;
        Ok(PyDb {
            inner: RwLock::new(Some(db)),
            path,
            sync: sync_text,
        })
    }

    /// Same as the constructor: `Db.open(path, **options)`.
    #[classmethod]
    #[pyo3(signature = (path, *args, **kwargs))]
    fn open<'py>(
        cls: &Bound<'py, PyType>,
        path: Bound<'py, PyAny>,
        args: Bound<'py, pyo3::types::PyTuple>,
        kwargs: Option<Bound<'py, pyo3::types::PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut all = vec![path];
        all.extend(args.iter());
        let t = pyo3::types::PyTuple::new(cls.py(), all)?;
        cls.call(t, kwargs.as_ref())
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
            "<strata.Db {state}path={:?} sync={}>",
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

    /// Stops the background threads (a running merge finishes first) and
    /// syncs the log, so every acknowledged write is durable. Further calls
    /// raise InvalidInputError; closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.run_detached(|| match self.inner.write().take() {
            Some(db) => db.close(),
            None => Ok(()),
        })
    }

    /// Number of live records (exact; costs one static lookup per key held
    /// in the dynamic stages).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.with(py, |db| db.count())? as usize)
    }

    fn __contains__(&self, py: Python<'_>, key: u64) -> PyResult<bool> {
        Ok(self.with(py, |db| db.get(key))?.is_some())
    }

    /// The value of `key`, or None.
    fn get(&self, py: Python<'_>, key: u64) -> PyResult<Option<u64>> {
        self.with(py, |db| db.get(key))
    }

    /// Values of many keys in one call (no Python loop; the GIL is released).
    ///
    /// Returns a uint64 array of the same length; absent keys get `missing`.
    /// With `with_found=True`, returns `(values, found)` where `found` is a
    /// bool array.
    #[pyo3(signature = (keys, missing = u64::MAX, with_found = false))]
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: Bound<'py, PyAny>,
        missing: u64,
        with_found: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let keys = u64_array(&keys, "keys")?;
        let mut owned = Vec::new();
        let ks = key_slice(&keys, &mut owned);
        let (values, found) = self.with(py, |db| {
            lookup_many(ks, missing, with_found, |k, out| db.get_many(k, out))
        })?;
        values_and_found(py, values, found, with_found)
    }

    /// Inserts or overwrites `key` (durable on return with `sync="always"`).
    fn put(&self, py: Python<'_>, key: u64, value: u64) -> PyResult<()> {
        self.with(py, |db| db.put(key, value))
    }

    /// Removes `key` (absent keys are fine).
    fn delete(&self, py: Python<'_>, key: u64) -> PyResult<()> {
        self.with(py, |db| db.delete(key))
    }

    /// Puts `keys[i] -> values[i]` for every i as one atomic write batch
    /// (one log record: after a crash all of it or none of it is visible);
    /// a later repeat of a key wins. At most 2**20 records per call.
    fn put_many<'py>(
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
                "put_many needs as many values as keys, got {} keys and {} values",
                ks.len(),
                vs.len()
            )));
        }
        self.with(py, |db| {
            let mut b = WriteBatch::new();
            for (&k, &v) in ks.iter().zip(vs) {
                b.put(k, v);
            }
            db.write_batch(&b)
        })
    }

    /// Removes every key of `keys` as one atomic write batch (at most 2**20).
    fn delete_many<'py>(&self, py: Python<'py>, keys: Bound<'py, PyAny>) -> PyResult<()> {
        let keys = u64_array(&keys, "keys")?;
        let mut ok = Vec::new();
        let ks = key_slice(&keys, &mut ok);
        self.with(py, |db| {
            let mut b = WriteBatch::new();
            for &k in ks {
                b.delete(k);
            }
            db.write_batch(&b)
        })
    }

    /// Up to `count` records with key >= `start`, as an `(m, 2)` uint64 array
    /// (column 0 keys, column 1 values), as `Index.scan`.
    fn scan<'py>(&self, py: Python<'py>, start: u64, count: usize) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let recs = self.with(py, |db| {
            db.range(start..).take(count).collect::<strata::Result<Vec<_>>>()
        })?;
        records_array(py, &recs)
    }

    /// All records with `lo <= key < hi` (`hi=None`: to the end, `2**64-1`
    /// included), as an `(m, 2)` uint64 array (column 0 keys, column 1
    /// values), as `Index.range`. Deleted keys are skipped; the newest value
    /// of each key is returned.
    #[pyo3(signature = (lo = 0, hi = None))]
    fn range<'py>(&self, py: Python<'py>, lo: u64, hi: Option<u64>) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let recs = self.with(py, |db| match hi {
            Some(h) => db.range(lo..h).collect::<strata::Result<Vec<_>>>(),
            None => db.range(lo..).collect(),
        })?;
        records_array(py, &recs)
    }

    /// Makes every acknowledged write durable (syncs the log).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |db| db.sync())
    }

    /// Merges the dynamic stage into the static stage and waits: on return
    /// every earlier write is in the static stage's files and the log
    /// segments it covered are deleted.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |db| db.flush())
    }

    /// Sizes and counters as a dict: dynamic_bytes, active_entries,
    /// frozen_entries, static_records, static_index_bytes, static_kind,
    /// generation, memory_bytes, peak_memory_bytes, disk_bytes, io and
    /// merge_io (I/O counters), merges, merge_seconds, merging, last_seq.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let st = self.with(py, |db| db.stats())?;
        let d = to_py_via_json(py, &st)?;
        d.set_item("sync", &self.sync)?;
        Ok(d)
    }

    /// Reads every page of the static stage and checks its checksums;
    /// returns the pages checked. CorruptionError if a check fails.
    fn verify(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |db| db.verify(&mut |_| {}))
    }
}

/// Adds `Db` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDb>()?;
    m.add("DB_MAX_BATCH", MAX_BATCH_OPS)?;
    Ok(())
}
