//! Key generation and SOSD key files.

use std::path::PathBuf;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use strata::data::{Dist, generate};
use strata::format::sosd::{self, KeyFileOptions, KeyWidth};

use crate::errors::{Detach, IntoPyResult, InvalidInputError};

/// `n` strictly increasing keys of distribution `dist` (`strata.dists()`),
/// deterministic for `seed`, as a uint64 array (no copy).
#[pyfunction]
#[pyo3(name = "gen", signature = (dist, n, seed = 42))]
pub fn generate_keys<'py>(
    py: Python<'py>,
    dist: &str,
    n: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let d: Dist = dist.parse().py()?;
    let keys = py.run_detached(|| generate(d, n, seed))?;
    Ok(PyArray1::from_vec(py, keys))
}

fn width(w: &str) -> PyResult<KeyWidth> {
    match w {
        "auto" => Ok(KeyWidth::Auto),
        "u64" => Ok(KeyWidth::U64),
        "u32" => Ok(KeyWidth::U32),
        _ => Err(InvalidInputError::new_err(format!(
            "key width must be auto, u64 or u32, got {w:?}"
        ))),
    }
}

/// Reads a SOSD key file (u64 count, then the keys; `width` u64, u32 or auto).
/// Keys must be strictly increasing, or non-decreasing with `dedup=True`
/// (repeats dropped).
#[pyfunction]
#[pyo3(signature = (path, dedup = false, width = "auto"))]
pub fn read_keys<'py>(
    py: Python<'py>,
    path: PathBuf,
    dedup: bool,
    width: &str,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let opts = KeyFileOptions {
        width: self::width(width)?,
        dedup,
    };
    let keys = py.run_detached(|| sosd::read_keys(&path, opts))?;
    Ok(PyArray1::from_vec(py, keys))
}

/// Writes keys as a SOSD file (`width` u64 or u32).
#[pyfunction]
#[pyo3(signature = (path, keys, width = "u64"))]
pub fn write_keys(
    py: Python<'_>,
    path: PathBuf,
    keys: PyReadonlyArray1<'_, u64>,
    width: &str,
) -> PyResult<()> {
    let u32_keys = match self::width(width)? {
        KeyWidth::U32 => true,
        KeyWidth::U64 => false,
        KeyWidth::Auto => {
            return Err(InvalidInputError::new_err("write_keys needs width u64 or u32"));
        }
    };
    let owned;
    let ks: &[u64] = match keys.as_slice() {
        Ok(s) => s,
        Err(_) => {
            owned = keys.as_array().iter().copied().collect::<Vec<u64>>();
            &owned
        }
    };
    py.run_detached(|| {
        if u32_keys {
            sosd::write_keys_u32(&path, ks)
        } else {
            sosd::write_keys(&path, ks)
        }
    })
}

/// Names of the key distributions.
#[pyfunction]
pub fn dists() -> Vec<&'static str> {
    Dist::NAMES.to_vec()
}

/// Adds the functions of this file to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(generate_keys, m)?)?;
    m.add_function(wrap_pyfunction!(read_keys, m)?)?;
    m.add_function(wrap_pyfunction!(write_keys, m)?)?;
    m.add_function(wrap_pyfunction!(dists, m)?)?;
    Ok(())
}
