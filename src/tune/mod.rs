//! Storage-aware index tuning: the cost model `L_SM` and AirTune
//! (Chockchowwat et al., AirIndex, SIGMOD '24, §4–§5).
//!
//! Given sorted keys and a [`StorageProfile`] `T(bytes) = latency +
//! bytes / bandwidth`, the tuner chooses a stack of layers over the data run —
//! how many, which builder for each, how coarse — minimising the expected
//! cold lookup time, and the result is an ordinary layered index (kind
//! `air`, see [`air_design`]).
//!
//! How AirIndex's byte-precision model maps onto strata's paged layers:
//!
//! - AirIndex reads the root (`s(Θ_L)` bytes) and then, in every layer, the
//!   byte range `Δ(x; Θ_l)` the layer above predicted. strata stores every
//!   layer as a paged array and reads whole pages, so `s(Θ_L)` becomes the
//!   root's pages and `Δ(x; Θ_l)` the pages covering the predicted window
//!   (widened by one entry on each side when the layer above is approximate)
//!   — measured on the built layers with the engine's own search step
//!   (`cost`), not estimated from formulas.
//! - Granularity `λ` stays in bytes of the layer below and each builder maps
//!   it to whole pages (steps) or an error window in positions (bands); see
//!   `builders`.
//! - The stop rule's ideal layer (1 byte, 1 byte of precision) reads at
//!   least a page of root and a page below it, so the search stops when
//!   reading a vertex whole costs no more than two one-page reads.
//! - `τ̂` (Eq. 12) rounds its balanced reads up to whole pages (`complexity`).
//!
//! Modes: the fastest cold index (default), or with a memory budget the
//! fastest index whose pinned top layers fit the budget (`resident=index`
//! then pins exactly those).

mod builders;
mod complexity;
mod cost;
mod search;

#[cfg(test)]
mod tests;

use serde_json::json;

pub(crate) use builders::Family;
pub(crate) use cost::{LayerView, QuerySample, StackCost, evaluate_stack};
pub use search::{
    Candidate, DEFAULT_SAMPLES, FixedDesign, SAMPLE_SEED, TuneOptions, Tuned, TunedLayer, Tuner,
};

use crate::index::layered::{Design, Keys, LAYERED_KINDS, LayeredKind};
use crate::index::{IndexSpec, ParamDoc, Params, Registry};
use crate::storage::StorageProfile;
use crate::{Error, Result};

pub(crate) use crate::index::check_keys;

/// Tuning options from the parameters of kind `air`: `profile` (a preset
/// name or `custom:LAT_US:BW_MB_S`; default `nvme`), `top_k` (5),
/// `memory_budget` (bytes, 0 = none), `builders` (`all`, `airindex` or
/// families joined by `+`), `threads` (0 = all cores), `lambda_low`,
/// `lambda_high`, `grid_base`, `max_layers`; and the sample size
/// (`samples`).
pub fn options_from_params(p: &Params) -> Result<(TuneOptions, usize)> {
    let name = p.str("profile", "nvme")?;
    if name == "local" {
        return Err(Error::invalid(
            "profile=local needs a measurement: run `strata tune --profile local`, or give custom:LAT_US:BW_MB_S",
        ));
    }
    let mut o = TuneOptions::new(StorageProfile::named(&name)?);
    o.top_k = p.usize("top_k", o.top_k)?;
    o.memory_budget = p.u64("memory_budget", 0)?;
    o.families = Family::parse_list(&p.str("builders", "all")?)?;
    o.threads = p.usize("threads", 0)?;
    o.lambda_low = p.u64("lambda_low", o.lambda_low)?;
    o.lambda_high = p.u64("lambda_high", o.lambda_high)?;
    o.grid_base = p.f64("grid_base", o.grid_base)?;
    o.max_layers = p.usize("max_layers", o.max_layers)?;
    let samples = p.usize("samples", DEFAULT_SAMPLES)?;
    if o.top_k == 0 {
        return Err(Error::invalid("top_k must be at least 1"));
    }
    Ok((o, samples))
}

/// The recipe of kind `air`: runs AirTune over `keys` (records `per_page` to
/// a page of `page_size` bytes) with the options of [`options_from_params`]
/// and returns the chosen stack; its description goes into the notes.
/// Lookups must fetch all pages of a range at once (the cost model's
/// assumption), so `fetch=one-by-one` is rejected.
pub fn air_design(p: &Params, keys: &[u64], per_page: usize, page_size: usize) -> Result<Design> {
    air_design_in(p, Keys::Slice(keys), per_page, page_size)
}

/// [`air_design`] over keys in memory or in a data run: the builders over
/// the data and the query sample read the run in passes
/// ([`Tuner::over`]), so a streamed build does not hold the keys, and the
/// tuner is [lean](Tuner::lean): what it holds is the few candidate layers
/// the search can still pick.
pub fn air_design_in(p: &Params, keys: Keys<'_>, per_page: usize, page_size: usize) -> Result<Design> {
    if p.str("fetch", "all-at-once")?.parse::<crate::index::Fetch>()? != crate::index::Fetch::AllAtOnce {
        return Err(Error::invalid(
            "kind air is tuned for all-at-once fetches; fetch=one-by-one is not supported",
        ));
    }
    let (opts, samples) = options_from_params(p)?;
    let tuner = Tuner::over(keys, per_page, page_size, samples)?.lean();
    let t = tuner.tune(&opts)?;
    Ok(Design {
        layers: t.layer_builds()?,
        models: t.models(),
        notes: t.notes(),
    })
}

/// The kind `air`: AirIndex, a layered index whose layers AirTune chooses
/// for a storage profile ([`air_design`]).
pub static AIR: LayeredKind = LayeredKind {
    stream: Some(air_design_in),
    name: "air",
    summary: "AirIndex: layers chosen by AirTune for a storage profile (profile, top_k, memory_budget)",
    design: air_design,
    params: AIR_PARAMS,
};

/// What [`options_from_params`] reads: the parameters of kind `air`.
const AIR_PARAMS: &[ParamDoc] = &[
    ParamDoc::new(
        "profile",
        "storage profile to tune for: optane, nvme, sata-ssd, hdd, azure-ssd, nfs or custom:LAT_US:BW_MB_S",
    ),
    ParamDoc::new(
        "top_k",
        "candidates kept per layer of the search (AirIndex's k), at least 1",
    ),
    ParamDoc::new(
        "memory_budget",
        "bytes of memory for pinned top layers (64k, 1M, ...); 0: nothing pinned, the fastest cold index",
    ),
    ParamDoc::new(
        "builders",
        "layer builders: all, airindex, or names joined by + (gstep, gband, eband, zone, zband, leco, \
         leco-d, cpr)",
    ),
    ParamDoc::new("threads", "worker threads of the search (0: every core)"),
    ParamDoc::new("lambda_low", "smallest granularity of the search grid, in bytes"),
    ParamDoc::new("lambda_high", "largest granularity of the search grid, in bytes"),
    ParamDoc::new(
        "grid_base",
        "ratio between neighbouring granularities of the grid",
    ),
    ParamDoc::new("max_layers", "most index layers"),
    ParamDoc::new("samples", "sampled lookups of the cost model"),
];

/// Every layered kind up to this layer: `index`'s
/// (`LAYERED_KINDS`), then [`AIR`].
pub fn layered_kinds() -> impl Iterator<Item = &'static LayeredKind> {
    LAYERED_KINDS.iter().chain(std::iter::once(&AIR))
}

/// `index`'s registry ([`crate::index::registry`]) with [`AIR`] after its
/// kinds: every kind up to this layer.
pub fn registry() -> Registry {
    crate::index::registry().with(&AIR)
}

/// The modelled reads of any layered kind's design over `keys`, without
/// writing it: builds the design in memory and replays the sampled lookups
/// top-down (`evaluate_stack`). Returns the cost and the layers.
pub fn model_spec(
    spec: &IndexSpec,
    keys: &[u64],
    page_size: usize,
    sample: &QuerySample,
) -> Result<(StackCost, Vec<LayerView>, serde_json::Value)> {
    let kind = layered_kinds().find(|k| k.name == spec.kind).ok_or_else(|| {
        Error::Unsupported(format!(
            "only layered kinds can be modelled without running them; {} is not one",
            spec.kind
        ))
    })?;
    check_keys(keys)?;
    let page_size = spec.params.usize("page", page_size)?;
    crate::format::page::check_page_size(page_size)?;
    if spec
        .params
        .str("fetch", "all-at-once")?
        .parse::<crate::index::Fetch>()?
        != crate::index::Fetch::AllAtOnce
    {
        return Err(Error::Unsupported(
            "the cost model assumes all-at-once fetches".into(),
        ));
    }
    let per_page = crate::format::records_per_page(page_size);
    let design = (kind.design)(&spec.params, keys, per_page, page_size)?;
    spec.params.finish(&spec.kind)?;
    let pinned = 0;
    let views = design
        .layers
        .into_iter()
        .map(|l| LayerView::new(l, page_size))
        .collect::<Result<Vec<_>>>()?;
    let cost = evaluate_stack(
        keys.len() as u64,
        per_page as u64,
        &views,
        pinned,
        sample,
        page_size,
    )?;
    let layers = json!(
        views
            .iter()
            .map(|v| json!({"kind": v.kind(), "entries": v.count(), "pages": v.pages()}))
            .collect::<Vec<_>>()
    );
    Ok((cost, views, layers))
}
