//! `strata.Index`: an opened index directory, and the functions that build
//! and open one.

use std::path::PathBuf;
use std::sync::Arc;

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use strata::index::{BuildOptions, Index, IndexSpec, OpenOptions, Records, Residency};
use strata::storage::StorageProfile;

use crate::convert::{py_to_param, to_py_via_json};
use crate::errors::{Detach, IntoPyResult, InvalidInputError};

/// Records fetched per `Index::scan` call while collecting a range.
const RANGE_BATCH: usize = 4096;

/// An opened index (any kind). Thread-safe: methods release the GIL while
/// they read storage, so several Python threads can query one index at once.
#[pyclass(module = "strata._strata", name = "Index", frozen, weakref)]
pub struct PyIndex {
    inner: RwLock<Option<Arc<dyn Index>>>,
    path: PathBuf,
    report: Option<Py<PyDict>>,
}

impl PyIndex {
    /// The directory, for names in reports.
    pub(crate) fn path_string(&self) -> String {
        self.path.display().to_string()
    }

    pub(crate) fn idx(&self) -> PyResult<Arc<dyn Index>> {
        self.inner
            .read()
            .clone()
            .ok_or_else(|| InvalidInputError::new_err(format!("index {} is closed", self.path.display())))
    }
}

/// A key or value array: a uint64 numpy array as it is (borrowed), anything
/// else (lists, other integer dtypes) through `strata.as_keys`.
pub fn u64_array<'py>(v: &Bound<'py, PyAny>, name: &str) -> PyResult<PyReadonlyArray1<'py, u64>> {
    if let Ok(a) = v.extract::<PyReadonlyArray1<'py, u64>>() {
        return Ok(a);
    }
    let conv = v.py().import("strata")?.getattr("as_keys")?.call1((v, name))?;
    conv.extract::<PyReadonlyArray1<'py, u64>>()
}

/// The keys of a numpy array: borrowed when C-contiguous, copied otherwise.
pub fn key_slice<'a>(keys: &'a PyReadonlyArray1<'_, u64>, owned: &'a mut Vec<u64>) -> &'a [u64] {
    match keys.as_slice() {
        Ok(s) => s,
        Err(_) => {
            *owned = keys.as_array().iter().copied().collect();
            owned
        }
    }
}

/// Looks up every key of `ks` through `get_many` (the batched path: reads
/// with many in flight), 4,096 keys per call: the values (`missing` for
/// absent keys) and, with `with_found`, whether each key was present.
/// Shared by `Index.get_many` and `Db.get_many`.
pub fn lookup_many(
    ks: &[u64],
    missing: u64,
    with_found: bool,
    mut get_many: impl FnMut(&[u64], &mut Vec<Option<u64>>) -> strata::Result<()>,
) -> strata::Result<(Vec<u64>, Vec<bool>)> {
    let mut values = Vec::with_capacity(ks.len());
    let mut found = Vec::with_capacity(if with_found { ks.len() } else { 0 });
    let mut got = Vec::with_capacity(ks.len().min(4096));
    for chunk in ks.chunks(4096) {
        got.clear();
        get_many(chunk, &mut got)?;
        for v in &got {
            values.push(v.unwrap_or(missing));
            if with_found {
                found.push(v.is_some());
            }
        }
    }
    Ok((values, found))
}

/// The result of a `get_many`: the values array, or `(values, found)`.
pub fn values_and_found<'py>(
    py: Python<'py>,
    values: Vec<u64>,
    found: Vec<bool>,
    with_found: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let values = PyArray1::from_vec(py, values).into_any();
    if with_found {
        let found = PyArray1::from_vec(py, found).into_any();
        Ok((values, found).into_pyobject(py)?.into_any())
    } else {
        Ok(values)
    }
}

/// Records as an `(m, 2)` uint64 array: column 0 keys, column 1 values.
pub fn records_array<'py>(py: Python<'py>, recs: &[(u64, u64)]) -> PyResult<Bound<'py, PyArray2<u64>>> {
    let mut flat = Vec::with_capacity(recs.len() * 2);
    for &(k, v) in recs {
        flat.push(k);
        flat.push(v);
    }
    PyArray1::from_vec(py, flat).reshape([recs.len(), 2])
}

#[pymethods]
impl PyIndex {
    /// The kind name (`btree`, `pgm-disk-cpr`, ...).
    #[getter]
    fn kind(&self) -> PyResult<String> {
        Ok(self.idx()?.kind().to_string())
    }

    /// The index directory.
    #[getter]
    fn path(&self) -> String {
        self.path.display().to_string()
    }

    /// What `build` reported (sizes, build time), or None for an index opened with `open`.
    #[getter]
    fn build_report(&self, py: Python<'_>) -> Option<Py<PyDict>> {
        self.report.as_ref().map(|r| r.clone_ref(py))
    }

    /// Whether the index was closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().is_none()
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.idx()?.len() as usize)
    }

    fn __contains__(&self, py: Python<'_>, key: u64) -> PyResult<bool> {
        let idx = self.idx()?;
        Ok(py.run_detached(|| idx.get(key))?.is_some())
    }

    fn __repr__(&self) -> String {
        match self.inner.read().as_ref() {
            Some(i) => format!(
                "<strata.Index kind={} n={} path={:?}>",
                i.kind(),
                i.len(),
                self.path.display()
            ),
            None => format!("<strata.Index closed path={:?}>", self.path.display()),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        _ty: Option<Bound<'_, PyAny>>,
        _value: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> bool {
        self.close();
        false
    }

    /// Releases the index's files. Further calls raise InvalidInputError.
    fn close(&self) {
        self.inner.write().take();
    }

    /// The value of `key`, or None.
    fn get(&self, py: Python<'_>, key: u64) -> PyResult<Option<u64>> {
        let idx = self.idx()?;
        py.run_detached(|| idx.get(key))
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
        let idx = self.idx()?;
        let mut owned = Vec::new();
        let ks = key_slice(&keys, &mut owned);
        let (values, found) =
            py.run_detached(|| lookup_many(ks, missing, with_found, |k, out| idx.get_many(k, out)))?;
        values_and_found(py, values, found, with_found)
    }

    /// The first record with key >= `key`, as `(key, value)`, or None.
    fn lower_bound(&self, py: Python<'_>, key: u64) -> PyResult<Option<(u64, u64)>> {
        let idx = self.idx()?;
        py.run_detached(|| idx.lower_bound(key))
    }

    /// Up to `count` records with key >= `start`, as an `(m, 2)` uint64 array
    /// (column 0 keys, column 1 values).
    fn scan<'py>(&self, py: Python<'py>, start: u64, count: usize) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let idx = self.idx()?;
        let recs = py.run_detached(|| {
            let mut out = Vec::with_capacity(count.min(1 << 20));
            idx.scan(start, count, &mut out).map(|_| out)
        })?;
        records_array(py, &recs)
    }

    /// All records with `lo <= key < hi`, as an `(m, 2)` uint64 array
    /// (column 0 keys, column 1 values).
    fn range<'py>(&self, py: Python<'py>, lo: u64, hi: u64) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let idx = self.idx()?;
        let recs = py.run_detached(|| -> strata::Result<Vec<(u64, u64)>> {
            let mut out: Vec<(u64, u64)> = Vec::new();
            let mut from = lo;
            while from < hi {
                let start = out.len();
                idx.scan(from, RANGE_BATCH, &mut out)?;
                let got = out.len() - start;
                if let Some(cut) = out[start..].iter().position(|r| r.0 >= hi) {
                    out.truncate(start + cut);
                    break;
                }
                match out.last() {
                    Some(&(k, _)) if got == RANGE_BATCH && k < u64::MAX => from = k + 1,
                    _ => break,
                }
            }
            Ok(out)
        })?;
        records_array(py, &recs)
    }

    /// The model's prediction for `key` as `(pos, lo, hi)` (learned kinds), or None.
    fn approx(&self, py: Python<'_>, key: u64) -> PyResult<Option<(u64, u64, u64)>> {
        let idx = self.idx()?;
        Ok(py.run_detached(|| idx.approx(key))?.map(|a| (a.pos, a.lo, a.hi)))
    }

    /// Whether `insert` and `delete` are supported (updatable kinds such as `btree`).
    fn supports_updates(&self) -> PyResult<bool> {
        Ok(self.idx()?.supports_updates())
    }

    /// Inserts or updates `key`; returns the previous value. UnsupportedError on static kinds.
    fn insert(&self, py: Python<'_>, key: u64, value: u64) -> PyResult<Option<u64>> {
        let idx = self.idx()?;
        py.run_detached(|| idx.insert(key, value))
    }

    /// Removes `key`; returns whether it was present. UnsupportedError on static kinds.
    fn delete(&self, py: Python<'_>, key: u64) -> PyResult<bool> {
        let idx = self.idx()?;
        py.run_detached(|| idx.delete(key))
    }

    /// Makes completed writes durable.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let idx = self.idx()?;
        py.run_detached(|| idx.sync())
    }

    /// Sizes and shape: kind, n, memory_bytes, disk_bytes, models, height, extra.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let idx = self.idx()?;
        let st = py.run_detached(|| idx.stats())?;
        to_py_via_json(py, &st)
    }

    /// I/O counters since the index was opened: read_calls, pages_read,
    /// bytes_read, write_calls, bytes_written, syncs, modelled_read_ns.
    fn io<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let snap = self.idx()?.io().snapshot();
        let d = to_py_via_json(py, &snap)?;
        d.set_item("modelled_read_ns", snap.modelled_read_ns())?;
        Ok(d)
    }

    /// Resets the I/O counters to zero.
    fn reset_io(&self) -> PyResult<()> {
        self.idx()?.io().reset();
        Ok(())
    }

    /// Reads every page and checks every checksum; returns the pages checked.
    /// CorruptionError if a check fails.
    fn verify(&self, py: Python<'_>) -> PyResult<u64> {
        let idx = self.idx()?;
        py.run_detached(|| idx.verify(&mut |_| {}))
    }
}

fn open_options(
    resident: &str,
    direct: bool,
    cache_pages: usize,
    profile: Option<&str>,
    queue_depth: usize,
) -> strata::Result<OpenOptions> {
    Ok(OpenOptions {
        direct,
        resident: resident.parse::<Residency>()?,
        cache_pages,
        profile: profile.map(StorageProfile::named).transpose()?,
        queue_depth: queue_depth.clamp(1, strata::storage::MAX_QUEUE_DEPTH),
        io_engine: strata::storage::IoEngine::Auto,
    })
}

/// Opens the index directory at `path`.
#[pyfunction]
#[pyo3(signature = (path, resident = "index", direct = false, cache_pages = 0, profile = None, build_report = None, queue_depth = 32))]
#[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
pub fn open(
    py: Python<'_>,
    path: PathBuf,
    resident: &str,
    direct: bool,
    cache_pages: usize,
    profile: Option<&str>,
    build_report: Option<Py<PyDict>>,
    queue_depth: usize,
) -> PyResult<PyIndex> {
    let opts = open_options(resident, direct, cache_pages, profile, queue_depth).py()?;
    let idx = py.run_detached(|| strata::registry::open(&path, &opts))?;
    Ok(PyIndex {
        inner: RwLock::new(Some(Arc::from(idx))),
        path,
        report: build_report,
    })
}

/// Builds `spec` (a kind name, optionally with `:key=value,...`) over sorted,
/// distinct `keys` into `path`; `params` adds parameters; `values` (same
/// length) replaces the default values (each key's rank). Returns the build
/// report as a dict.
#[pyfunction]
#[pyo3(signature = (keys, spec, path, params = None, values = None, page_size = 4096))]
pub fn build<'py>(
    py: Python<'py>,
    keys: PyReadonlyArray1<'py, u64>,
    spec: &str,
    path: PathBuf,
    params: Option<Bound<'py, PyDict>>,
    values: Option<PyReadonlyArray1<'py, u64>>,
    page_size: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let mut spec: IndexSpec = spec.parse().py()?;
    if let Some(p) = params {
        for (k, v) in p.iter() {
            let name: String = k.extract()?;
            spec = spec.with(&name, py_to_param(&name, &v)?);
        }
    }
    let mut owned_k = Vec::new();
    let ks = key_slice(&keys, &mut owned_k);
    let mut owned_v = Vec::new();
    let vs = values.as_ref().map(|v| key_slice(v, &mut owned_v));
    let report = py.run_detached(move || {
        let records = match vs {
            Some(v) => Records::new(ks, v)?,
            None => Records::ranked(ks),
        };
        strata::registry::build_records(&spec, records, &path, &BuildOptions { page_size })
    })?;
    to_py_via_json(py, &report)
}

/// Adds `Index`, `build` and `open` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyIndex>()?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(build, m)?)?;
    Ok(())
}
