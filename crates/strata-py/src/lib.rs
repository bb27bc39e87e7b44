//! Python bindings of strata: the extension module `strata._strata`.
//!
//! The Python package `strata` (python/strata/) re-exports this module and
//! adds pure-Python helpers (argument conversion, temporary directories,
//! `strata.plot`). Each file here registers one part of the API:
//!
//! | file | Python names |
//! |---|---|
//! | `errors.rs` | `StrataError` and its subclasses (mirror `strata::Error`) |
//! | `data.rs` | `gen`, `read_keys`, `write_keys`, `dists` |
//! | `index.rs` | `Index`, `build`, `open` |
//! | `db.rs` | `Db` (the hybrid store `strata::Db`) |
//! | `lsm.rs` | `LsmStore` (the LSM store `strata::lsm::Store`) |
//! | `bench.rs` | `bench`, `workloads`, `peers` |
//! | `tune.rs` | `tune` (AirTune) |
//! | `join.rs` | `join` (external-memory joins) |
//! | this file | `kinds`, `profiles`, `__version__` |
//!
//! Adding a binding: a file like `db.rs` or `tune.rs` (a `#[pyclass]` or
//! `#[pyfunction]`, errors mapped with `errors::IntoPyResult`) with a
//! `register(m)` called from [`_strata`] below; then one import line in
//! python/strata/__init__.py and its stub in python/strata/_strata.pyi.
//! Errors, conversions and the build already cover it.

mod bench;
mod convert;
mod data;
mod db;
mod errors;
mod index;
mod join;
mod lsm;
mod tune;

use pyo3::prelude::*;

/// Every index kind of this build as `(name, summary)` pairs (peers included
/// when compiled in).
#[pyfunction]
fn kinds() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = strata::registry::kinds()
        .iter()
        .map(|k| (k.name(), k.summary()))
        .collect();
    out.extend(strata_bench::peers::all().iter().map(|p| (p.name(), p.summary())));
    out
}

/// The named storage profiles as `(name, latency_us, bandwidth_bytes_per_s, source)`.
#[pyfunction]
fn profiles() -> Vec<(&'static str, f64, f64, &'static str)> {
    strata::storage::PRESETS.to_vec()
}

/// The extension module.
#[pymodule]
fn _strata(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    data::register(m)?;
    index::register(m)?;
    db::register(m)?;
    join::register(m)?;
    lsm::register(m)?;
    bench::register(m)?;
    tune::register(m)?;
    m.add_function(wrap_pyfunction!(kinds, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    Ok(())
}
