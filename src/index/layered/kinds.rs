//! The named static index kinds: each is a recipe (a [`DesignFn`](super::DesignFn)) for a
//! stack of layers over a data run. The recipes live beside, one file per
//! family: `pgm_design` (PGM, zero intervals, compressed bands),
//! `radix_design` (RadixSpline, RMI), `tree_design` (btree-static,
//! fiting-static) and `zone_design` (zone maps, also from page bounds).

use std::sync::Arc;

use serde_json::{Value, json};

use super::build::write_layer;
use super::design::LayeredKind;
use super::pgm_design::{PGM_DISK_PARAMS, PGM_PARAMS, pgm, pgm_disk, pgm_disk_cpr};
use super::radix_design::{RMI_PARAMS, RS_PARAMS, rmi, rs, rs_disk};
use super::tree_design::{BTREE_STATIC_PARAMS, FITING_STATIC_PARAMS, btree_static, fiting_static};
use super::zone_design::{GAP_ZONEMAP_PARAMS, gap_zonemap_d, leco_zonemap, leco_zonemap_d, zonemap};
use super::{LayeredIndex, layer_file};
use crate::Result;
use crate::format::{DATA_FILE, write_data_run};
use crate::index::{
    BuildOptions, Fetch, Index, IndexKind, Manifest, OpenOptions, ParamDoc, Params, Records, Residency,
};
use crate::storage::{Directory, IoContext};

fn fetch_param(params: &Params) -> Result<Fetch> {
    params.str("fetch", "all-at-once")?.parse()
}

/// The parameter of every layered kind besides `page`.
const FETCH_PARAM: ParamDoc = ParamDoc::new(
    "fetch",
    "how the pages of a predicted range are read: all-at-once (one read call) or one-by-one \
     (from the start of the range until the key's page)",
);

impl IndexKind for LayeredKind {
    fn name(&self) -> &'static str {
        self.name
    }

    fn summary(&self) -> &'static str {
        self.summary
    }

    fn params(&self) -> Vec<ParamDoc> {
        self.params.iter().copied().chain([FETCH_PARAM]).collect()
    }

    fn build(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
        build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        fetch_param(params)?;
        let meta = write_data_run(dir, records.iter(), opts.page_size, build_id)?;
        let design = (self.design)(params, records.keys(), meta.per_page, opts.page_size)?;
        let mut files = vec![DATA_FILE.to_string()];
        let mut layers = Vec::new();
        for (i, l) in design.layers.iter().enumerate() {
            let name = layer_file(i);
            write_layer(dir, &name, l, opts.page_size, build_id)?;
            layers.push(json!({ "kind": l.kind, "entries": l.count(), "bytes": l.flat.len() }));
            files.push(name);
        }
        Ok((
            files,
            json!({ "data_pages": meta.pages, "layers": layers, "models": design.models, "notes": design.notes }),
        ))
    }

    fn open(
        &self,
        m: &Manifest,
        dir: Arc<dyn Directory>,
        io: IoContext,
        opts: &OpenOptions,
    ) -> Result<Box<dyn Index>> {
        let layers = m
            .description
            .get("layers")
            .and_then(Value::as_array)
            .map_or(0, |a| a.len());
        let models = m.description.get("models").and_then(Value::as_u64);
        let fetch: Fetch = m
            .config
            .get("fetch")
            .and_then(Value::as_str)
            .unwrap_or("all-at-once")
            .parse()?;
        // With `resident=index` every layer is pinned, unless the design says
        // how many top layers fit its memory budget (`air:memory_budget`).
        let pinned = match opts.resident {
            Residency::Index => m
                .description
                .get("notes")
                .and_then(|n| n.get("resident_layers"))
                .and_then(Value::as_u64)
                .map_or(layers, |r| usize::try_from(r).unwrap_or(layers).min(layers)),
            Residency::None => 0,
        };
        let idx = LayeredIndex::open_pinned(self.name, dir, &io, layers, pinned, fetch, models)?;
        idx.check_build(m)?;
        Ok(Box::new(idx))
    }
}

/// Every layered kind `index` defines, in `strata list` order. The kind `air`
/// (AirTune's design) is a [`LayeredKind`] too, defined by `tune`, the layer
/// above.
pub(crate) static LAYERED_KINDS: &[LayeredKind] = &[
    LayeredKind {
        name: "zonemap",
        summary: "zone map: the first key of every data page in memory; exactly one page per lookup",
        design: zonemap,
        params: &[],
    },
    LayeredKind {
        name: "btree-static",
        summary: "AirIndex's B-TREE: step layers of 4 KiB nodes (fanout 255) over the data pages",
        design: btree_static,
        params: BTREE_STATIC_PARAMS,
    },
    LayeredKind {
        name: "leco-zonemap",
        summary: "zone map compressed with LeCo (Zhang G5); exactly one page per lookup",
        design: leco_zonemap,
        params: &[],
    },
    LayeredKind {
        name: "leco-zonemap-d",
        summary: "LeCo zone map with rough separators (Zhang LeCo-Zonemap-D); one page per lookup",
        design: leco_zonemap_d,
        params: &[],
    },
    LayeredKind {
        name: "gap-zonemap-d",
        summary: "zone map of rough separators gap-coded at the precision each gap allows (block); one page per lookup",
        design: gap_zonemap_d,
        params: GAP_ZONEMAP_PARAMS,
    },
    LayeredKind {
        name: "pgm",
        summary: "PGM-index: optimal PLA with error epsilon, recursive layers with epsilon_rec; sample=K trains on every K-th key (Chesetti)",
        design: pgm,
        params: PGM_PARAMS,
    },
    LayeredKind {
        name: "pgm-disk",
        summary: "PGM with disk-based zero intervals (Zhang G3): fewer models, same pages",
        design: pgm_disk,
        params: PGM_DISK_PARAMS,
    },
    LayeredKind {
        name: "pgm-disk-cpr",
        summary: "CprLeCo_PGM_D (Zhang G3+G4): zero intervals, gap-coded rough separators, rounded intercepts, shared slopes",
        design: pgm_disk_cpr,
        params: PGM_DISK_PARAMS,
    },
    LayeredKind {
        name: "rs",
        summary: "RadixSpline: spline points within epsilon and a radix table of radix_bits",
        design: rs,
        params: RS_PARAMS,
    },
    LayeredKind {
        name: "rs-disk",
        summary: "RadixSpline with disk-based zero intervals (Zhang G3): fewer spline points, same pages",
        design: rs_disk,
        params: RS_PARAMS,
    },
    LayeredKind {
        name: "rmi",
        summary: "two-layer linear RMI with `models` leaf models and per-leaf error bounds",
        design: rmi,
        params: RMI_PARAMS,
    },
    LayeredKind {
        name: "fiting-static",
        summary: "FITing-tree (static): greedy shrinking-cone segments with epsilon, B+-tree over them",
        design: fiting_static,
        params: FITING_STATIC_PARAMS,
    },
];
