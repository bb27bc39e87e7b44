//! `strata.bench`: the experiment runner of `strata bench` (`strata_bench::run`).

use std::path::PathBuf;

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyList;
use strata::data::{KeyChoice, Workload};
use strata::index::{IndexSpec, Residency};
use strata::storage::StorageProfile;
use strata_bench::BenchOptions;

use crate::convert::to_py_via_json;
use crate::errors::{Detach, IntoPyResult};

/// Runs every workload on every index configuration over `keys` (sorted,
/// distinct) and returns the JSON records of `strata bench` as dicts, in the
/// order the CLI writes them. Fails (InvalidInputError) if any answer was wrong.
#[pyfunction]
#[pyo3(name = "bench", signature = (
    keys, indexes, workloads, work_dir, ops = 100_000, profile = "nvme", resident = "index",
    cache_pages = 0, direct = true, repeat = 1, seed = 1, key_choice = "uniform", threads = 1,
    page_size = 4096, dataset = "data"
))]
#[expect(
    clippy::too_many_arguments,
    reason = "mirrors the Python keyword arguments one for one"
)]
pub fn run_bench<'py>(
    py: Python<'py>,
    keys: PyReadonlyArray1<'py, u64>,
    indexes: Vec<String>,
    workloads: Vec<String>,
    work_dir: PathBuf,
    ops: usize,
    profile: &str,
    resident: &str,
    cache_pages: usize,
    direct: bool,
    repeat: usize,
    seed: u64,
    key_choice: &str,
    threads: usize,
    page_size: usize,
    dataset: &str,
) -> PyResult<Bound<'py, PyList>> {
    let opts = BenchOptions {
        dataset: dataset.to_string(),
        indexes: indexes
            .iter()
            .map(|s| s.parse::<IndexSpec>())
            .collect::<strata::Result<Vec<_>>>()
            .py()?,
        workloads: workloads
            .iter()
            .map(|s| s.parse::<Workload>())
            .collect::<strata::Result<Vec<_>>>()
            .py()?,
        ops,
        profile: StorageProfile::named(profile).py()?,
        resident: resident.parse::<Residency>().py()?,
        cache_pages,
        direct,
        repeat,
        seed,
        key_choice: key_choice.parse::<KeyChoice>().py()?,
        threads,
        batch: 1,
        queue_depth: strata::storage::DEFAULT_QUEUE_DEPTH,
        io_engine: strata::storage::IoEngine::Auto,
        work_dir,
        page_size,
        before_repeat: None,
        warmup: false,
    };
    let owned;
    let ks: &[u64] = match keys.as_slice() {
        Ok(s) => s,
        Err(_) => {
            owned = keys.as_array().iter().copied().collect::<Vec<u64>>();
            &owned
        }
    };
    let records = py.run_detached(move || strata_bench::run(&opts, ks, &mut |_| {}))?;
    let out = PyList::empty(py);
    for r in &records {
        out.append(to_py_via_json(py, r)?)?;
    }
    Ok(out)
}

/// Names of the workloads.
#[pyfunction]
pub fn workloads() -> Vec<&'static str> {
    Workload::NAMES.to_vec()
}

/// Peer systems compiled into this build (`lmdb`, `rocksdb`; empty by default).
#[pyfunction]
pub fn peers() -> Vec<&'static str> {
    strata_bench::peers::names()
}

/// Adds the functions of this file to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(peers, m)?)?;
    Ok(())
}
