//! `strata.tune`: AirTune (`strata::tune`) — choose the layers of an index
//! for a storage profile, and optionally build it (kind `air`).

use std::path::PathBuf;
use std::time::Instant;

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use serde_json::{Value, json};
use strata::index::{self, BuildOptions, IndexSpec};
use strata::storage::{FsDirectory, ProfileOptions, StorageProfile};
use strata::tune::{Tuner, options_from_params};

use crate::convert::json_to_py;
use crate::errors::Detach;

/// Tunes a layered index over sorted, distinct `keys` for `profile` and
/// returns the report as a dict: `design` (the tuner's description: layers
/// bottom-up with builder, granularity, size and expected read of the layer
/// below; root read; modelled cold lookup time `modelled_ns`; expected bytes
/// read), `spec` (the `air` spec that rebuilds it), `profile`, and either
/// `tune_s` (tuning only, `out=None`) or `build` and `out` (the index was
/// built there, its manifest holds the same design). `profile="local"`
/// measures the device holding `local_dir` first.
#[pyfunction]
#[pyo3(name = "tune", signature = (
    keys, profile = "nvme", out = None, top_k = 5, memory_budget = 0, builders = "all",
    threads = 0, samples = strata::tune::DEFAULT_SAMPLES, page_size = 4096, local_dir = None
))]
#[expect(
    clippy::too_many_arguments,
    reason = "mirrors the Python keyword arguments one for one"
)]
pub fn tune<'py>(
    py: Python<'py>,
    keys: PyReadonlyArray1<'py, u64>,
    profile: &str,
    out: Option<PathBuf>,
    top_k: usize,
    memory_budget: u64,
    builders: &str,
    threads: usize,
    samples: usize,
    page_size: usize,
    local_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let owned;
    let ks: &[u64] = match keys.as_slice() {
        Ok(s) => s,
        Err(_) => {
            owned = keys.as_array().iter().copied().collect::<Vec<u64>>();
            &owned
        }
    };
    let profile = profile.to_string();
    let builders = builders.replace(',', "+");
    let report = py.run_detached(move || -> strata::Result<Value> {
        let prof = if profile == "local" {
            let dir = local_dir.unwrap_or_else(std::env::temp_dir);
            strata::storage::profile_device(&dir, &ProfileOptions::default())?.to_profile()?
        } else {
            StorageProfile::named(&profile)?
        };
        let profile_param = if profile == "local" {
            format!("custom:{}:{}", prof.latency_us(), prof.bandwidth_mb_s())
        } else {
            profile.clone()
        };
        let spec: IndexSpec = format!(
            "air:profile={profile_param},top_k={top_k},memory_budget={memory_budget},\
                 builders={builders},threads={threads},samples={samples},page={page_size}"
        )
        .parse()?;
        let mut report = json!({
            "spec": spec.to_string(),
            "n": ks.len(),
            "profile": {
                "name": profile,
                "latency_us": prof.latency_us(),
                "bandwidth_mb_s": prof.bandwidth_mb_s(),
            },
        });
        match out {
            None => {
                let (opts, samples) = options_from_params(&spec.params)?;
                let per_page = strata::format::records_per_page(page_size);
                let t0 = Instant::now();
                let tuned = Tuner::new(ks, per_page, page_size, samples)?.tune(&opts)?;
                report["tune_s"] = json!(t0.elapsed().as_secs_f64());
                report["design"] = tuned.notes();
            }
            Some(out) => {
                let built = strata::registry::build(&spec, ks, &out, &BuildOptions { page_size })?;
                report["build"] =
                    serde_json::to_value(&built).map_err(|e| strata::Error::invalid(e.to_string()))?;
                let m = index::Manifest::load(&FsDirectory::open(&out)?)?;
                report["design"] = m.description.get("notes").cloned().unwrap_or(Value::Null);
                report["out"] = json!(out.display().to_string());
            }
        }
        Ok(report)
    })?;
    json_to_py(py, &report)
}

/// Adds the functions of this file to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    Ok(())
}
