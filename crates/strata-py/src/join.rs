//! `strata.join`: an external-memory equi-join ([`strata::join`]) of two
//! relations given as key files, uint64 arrays or open indexes.

use std::path::PathBuf;

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use strata::Error;
use strata::format::sosd::KeyFileOptions;
use strata::join::{
    Algo, CountSink, IndexRelation, JoinOptions, KeyFile, MemRelation, MemoryBudget, PairFile, Relation,
    SortMethod,
};

use crate::db::size_param;
use crate::errors::{Detach, IntoPyResult};
use crate::index::PyIndex;

/// What a relation argument holds, before it becomes a [`Relation`].
enum Side {
    Index(std::sync::Arc<dyn strata::index::Index>, String),
    File(KeyFile),
    Keys(MemRelation),
}

fn relation(s: &Side) -> Box<dyn Relation + '_> {
    match s {
        Side::Index(idx, name) => Box::new(IndexRelation::new(name.clone(), idx.as_ref())),
        Side::File(f) => Box::new(f.clone()),
        Side::Keys(m) => Box::new(m.clone()),
    }
}

fn side(v: &Bound<'_, PyAny>, name: &str, sorted: bool) -> PyResult<Side> {
    if let Ok(idx) = v.cast::<PyIndex>() {
        let i = idx.get();
        return Ok(Side::Index(i.idx()?, i.path_string()));
    }
    if let Ok(p) = v.extract::<PathBuf>() {
        return Ok(Side::File(
            KeyFile::open(&p, sorted, KeyFileOptions::default()).py()?,
        ));
    }
    let keys: PyReadonlyArray1<'_, u64> = crate::index::u64_array(v, name)?;
    let keys = keys
        .as_slice()
        .map_err(|e| Error::invalid(format!("{name}: {e}")))
        .py()?;
    Ok(Side::Keys(MemRelation::of_keys(name, keys)))
}

/// Joins `outer` with `inner` on their keys and returns a dict: `count`,
/// `checksum` (order-independent, as `strata join` prints it), `seconds`,
/// `spill_bytes_written`, `spill_bytes_read`, `passes`, `sort` (the method
/// that sorted an unsorted relation, or None) and `partitions` (written by
/// learned partitioning).
///
/// - `outer`: a SOSD key file path or a uint64 array (each key's payload is
///   its position; keys may repeat), or an open `Index` (its records).
/// - `inner`: the same kinds, keys unique; an `Index` for `algo="inlj"`
///   (its batched lookups are the probes).
/// - `algo`: `"inlj"`, `"smj"` (sort-merge) or `"hash"` (Grace hash).
/// - `memory`: the budget of the join's buffers (int or `"256M"`, at least
///   1 MiB); `threads`: workers; `batch`: outer keys per probe batch.
/// - `outer_sorted` / `inner_sorted`: whether key files are sorted
///   (non-decreasing; a key out of order is then an error).
/// - `out`: write the matched `(key, outer payload, inner payload)` triples
///   to this new file (docs/format/join-pairs.md).
/// - `spill_dir`: where spill files go (a temporary directory inside it).
/// - `sort`: how an unsorted relation is sorted (both sides of `smj`, the
///   outer side of `inlj`): `"external"` (merge sort) or `"learned"`
///   (learned partitioning by a PGM trained on a 1 % sample).
#[pyfunction]
#[pyo3(signature = (outer, inner, algo, memory = None, threads = 1, batch = 65536, outer_sorted = true, inner_sorted = true, out = None, spill_dir = None, sort = "external"))]
#[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
pub fn join<'py>(
    py: Python<'py>,
    outer: Bound<'py, PyAny>,
    inner: Bound<'py, PyAny>,
    algo: &str,
    memory: Option<Bound<'py, PyAny>>,
    threads: usize,
    batch: usize,
    outer_sorted: bool,
    inner_sorted: bool,
    out: Option<PathBuf>,
    spill_dir: Option<PathBuf>,
    sort: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let sort: SortMethod = sort
        .parse()
        .map_err(|_| Error::invalid(format!("sort must be \"external\" or \"learned\", got {sort:?}")))
        .py()?;
    let algo = match algo {
        "inlj" => Algo::Inlj,
        "smj" => Algo::SortMerge,
        "hash" => Algo::Hash,
        other => {
            return Err(Error::invalid(format!(
                "algo must be \"inlj\", \"smj\" or \"hash\", got {other:?}"
            )))
            .py();
        }
    };
    let memory = match memory {
        Some(m) => size_param("memory", &m)?,
        None => 256 << 20,
    };
    if threads == 0 {
        return Err(Error::invalid("threads must be at least 1")).py();
    }
    let mut opts = JoinOptions::with_budget(MemoryBudget::new(memory).py()?);
    opts.threads = threads;
    opts.batch = batch.max(1);
    opts.spill_dir = spill_dir;
    opts.sort = sort;
    let o = side(&outer, "outer", outer_sorted)?;
    let i = side(&inner, "inner", inner_sorted)?;
    let report = py.run_detached(|| {
        let (orel, irel) = (relation(&o), relation(&i));
        match &out {
            Some(path) => {
                let mut sink = PairFile::create(path)?;
                let r = strata::join::join(algo, orel.as_ref(), irel.as_ref(), &mut sink, &opts)?;
                sink.finish()?;
                Ok(r)
            }
            None => strata::join::join(algo, orel.as_ref(), irel.as_ref(), &mut CountSink::new(), &opts),
        }
    })?;
    let d = PyDict::new(py);
    d.set_item("count", report.count)?;
    d.set_item("checksum", report.checksum)?;
    d.set_item("seconds", report.seconds)?;
    d.set_item("spill_bytes_written", report.spill_bytes_written)?;
    d.set_item("spill_bytes_read", report.spill_bytes_read)?;
    d.set_item("passes", report.passes)?;
    d.set_item("sort", report.sort.map(SortMethod::name))?;
    d.set_item("partitions", report.partitions)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(join, m)?)?;
    Ok(())
}
