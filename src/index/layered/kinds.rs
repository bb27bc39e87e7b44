//! The named static index kinds: each is a recipe (a [`DesignFn`](super::DesignFn)) for a
//! stack of layers over a data run. The recipes live beside, one file per
//! family: `pgm_design` (PGM, zero intervals, compressed bands),
//! `radix_design` (RadixSpline, RMI), `tree_design` (btree-static,
//! fiting-static) and `zone_design` (zone maps, also from page bounds).

use std::sync::Arc;

use serde_json::{Value, json};

use super::build::write_layer;
use super::design::{Design, LayeredKind};
use super::keys::{Keys, Pipe};
use super::pgm_design::{
    PGM_DISK_PARAMS, PGM_PARAMS, pgm, pgm_disk, pgm_disk_cpr, pgm_disk_cpr_in, pgm_disk_in, pgm_in,
};
use super::radix_design::{RMI_PARAMS, RS_PARAMS, rmi, rmi_in, rs, rs_disk, rs_disk_in, rs_in};
use super::tree_design::{
    BTREE_STATIC_PARAMS, FITING_STATIC_PARAMS, btree_static, btree_static_in, fiting_static, fiting_static_in,
};
use super::zone_design::design_from_page_bounds;
use super::zone_design::{GAP_ZONEMAP_PARAMS, gap_zonemap_d, leco_zonemap, leco_zonemap_d, zonemap};
use super::{LayeredIndex, layer_file};
use crate::format::{DATA_FILE, DataRun, DataRunMeta, records_per_page, write_data_run};
use crate::index::{
    BuildOptions, Fetch, Index, IndexKind, Manifest, OpenOptions, ParamDoc, Params, Records, Residency,
    write_records_run_with,
};
use crate::storage::{Directory, IoContext};
use crate::{Error, Result};

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
        if !records.in_memory() {
            return self.build_streamed(params, records, dir, opts, build_id);
        }
        // The design and the data run are independent: the run is written on a
        // second thread while this one builds the models (issue 23's overlap),
        // so a build waits for the slower of the two, not for their sum. The
        // design stays on the calling thread, whose rayon pool
        // (`strata build --threads`) its parallel parts use.
        let per_page = records_per_page(opts.page_size);
        let ((meta, run_s), (design, design_s)) = std::thread::scope(|s| {
            let writer = s.spawn(|| timed(|| write_data_run(dir, records.iter(), opts.page_size, build_id)));
            let design = timed(|| (self.design)(params, records.keys(), per_page, opts.page_size));
            let written = writer
                .join()
                .unwrap_or_else(|_| (Err(Error::invalid("writing the data run failed")), 0.0));
            (written, design)
        });
        // A write error (unsorted keys, a full disk) is the one to report.
        let (meta, design) = (meta?, design?);
        debug_assert_eq!(meta.per_page, per_page);
        self.finish_build(dir, opts, build_id, &meta, &design, run_s, design_s)
    }

    fn streams_build(&self) -> bool {
        true
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

impl LayeredKind {
    /// A build from a record stream: the data run is written as the records
    /// pass (holding none of them), then the design reads the keys back from
    /// it ([`LayeredKind::design_in`]).
    fn build_streamed(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
        build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        // The writer hands each chunk of keys to the design as it writes it,
        // so the design's first pass runs meanwhile; later passes read the
        // finished run back.
        let per_page = records_per_page(opts.page_size);
        let (pipe, tx) = Pipe::new();
        let ((meta, run_s), (design, design_s)) = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let written = timed(|| {
                    write_records_run_with(dir, records, opts.page_size, build_id, |chunk| {
                        // A design that stopped reading closed the pipe.
                        let _ = tx.send(chunk.iter().map(|r| r.0).collect());
                    })
                });
                drop(tx);
                pipe.finish(match &written.0 {
                    Ok(_) => dir.open_read(DATA_FILE).and_then(DataRun::open),
                    Err(e) => Err(Error::invalid(format!("writing the data run failed: {e}"))),
                });
                written
            });
            let design = timed(|| self.design_in(params, Keys::Piped(&pipe), per_page, opts.page_size));
            pipe.close();
            let written = writer
                .join()
                .unwrap_or_else(|_| (Err(Error::invalid("writing the data run failed")), 0.0));
            (written, design)
        });
        // A write error (unsorted keys, a bad key file) is the one to report.
        let meta = meta?;
        self.finish_build(dir, opts, build_id, &meta, &design?, run_s, design_s)
    }

    /// The design over keys in memory or in a data run: the kind's streaming
    /// recipe if it has one, the zone maps from every page's first and last
    /// key, or (other kinds) every key read into memory.
    pub(crate) fn design_in(
        &self,
        params: &Params,
        keys: Keys<'_>,
        per_page: usize,
        page_size: usize,
    ) -> Result<Design> {
        if let Some(f) = self.stream {
            return f(params, keys, per_page, page_size);
        }
        if !matches!(keys, Keys::Slice(_)) {
            if let Some(d) =
                design_from_page_bounds(self, params, &keys.page_bounds(per_page)?, per_page, page_size)?
            {
                return Ok(d);
            }
        }
        (self.design)(params, &keys.to_vec()?, per_page, page_size)
    }

    /// Writes the layers of `design` and describes the build.
    #[allow(clippy::too_many_arguments)]
    fn finish_build(
        &self,
        dir: &dyn Directory,
        opts: &BuildOptions,
        build_id: u64,
        meta: &DataRunMeta,
        design: &Design,
        run_s: f64,
        design_s: f64,
    ) -> Result<(Vec<String>, Value)> {
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
            json!({
                "data_pages": meta.pages, "layers": layers, "models": design.models, "notes": design.notes,
                "data_run_s": run_s, "design_s": design_s,
            }),
        ))
    }
}

/// `f`'s result and the seconds it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = std::time::Instant::now();
    let r = f();
    (r, t.elapsed().as_secs_f64())
}

/// Every layered kind `index` defines, in `strata list` order. The kind `air`
/// (AirTune's design) is a [`LayeredKind`] too, defined by `tune`, the layer
/// above.
pub(crate) static LAYERED_KINDS: &[LayeredKind] = &[
    LayeredKind {
        name: "zonemap",
        summary: "zone map: the first key of every data page in memory; exactly one page per lookup",
        design: zonemap,
        stream: None,
        params: &[],
    },
    LayeredKind {
        name: "btree-static",
        summary: "AirIndex's B-TREE: step layers of 4 KiB nodes (fanout 255) over the data pages",
        design: btree_static,
        stream: Some(btree_static_in),
        params: BTREE_STATIC_PARAMS,
    },
    LayeredKind {
        name: "leco-zonemap",
        summary: "zone map compressed with LeCo (Zhang G5); exactly one page per lookup",
        design: leco_zonemap,
        stream: None,
        params: &[],
    },
    LayeredKind {
        name: "leco-zonemap-d",
        summary: "LeCo zone map with rough separators (Zhang LeCo-Zonemap-D); one page per lookup",
        design: leco_zonemap_d,
        stream: None,
        params: &[],
    },
    LayeredKind {
        name: "gap-zonemap-d",
        summary: "zone map of rough separators gap-coded at the precision each gap allows (block); one page per lookup",
        design: gap_zonemap_d,
        stream: None,
        params: GAP_ZONEMAP_PARAMS,
    },
    LayeredKind {
        name: "pgm",
        summary: "PGM-index: optimal PLA with error epsilon, recursive layers with epsilon_rec; sample=K trains on every K-th key (Chesetti)",
        design: pgm,
        stream: Some(pgm_in),
        params: PGM_PARAMS,
    },
    LayeredKind {
        name: "pgm-disk",
        summary: "PGM with disk-based zero intervals (Zhang G3): fewer models, same pages",
        design: pgm_disk,
        stream: Some(pgm_disk_in),
        params: PGM_DISK_PARAMS,
    },
    LayeredKind {
        name: "pgm-disk-cpr",
        summary: "CprLeCo_PGM_D (Zhang G3+G4): zero intervals, gap-coded rough separators, rounded intercepts, shared slopes",
        design: pgm_disk_cpr,
        stream: Some(pgm_disk_cpr_in),
        params: PGM_DISK_PARAMS,
    },
    LayeredKind {
        name: "rs",
        summary: "RadixSpline: spline points within epsilon and a radix table of radix_bits",
        design: rs,
        stream: Some(rs_in),
        params: RS_PARAMS,
    },
    LayeredKind {
        name: "rs-disk",
        summary: "RadixSpline with disk-based zero intervals (Zhang G3): fewer spline points, same pages",
        design: rs_disk,
        stream: Some(rs_disk_in),
        params: RS_PARAMS,
    },
    LayeredKind {
        name: "rmi",
        summary: "two-layer linear RMI with `models` leaf models and per-leaf error bounds",
        design: rmi,
        stream: Some(rmi_in),
        params: RMI_PARAMS,
    },
    LayeredKind {
        name: "fiting-static",
        summary: "FITing-tree (static): greedy shrinking-cone segments with epsilon, B+-tree over them",
        design: fiting_static,
        stream: Some(fiting_static_in),
        params: FITING_STATIC_PARAMS,
    },
];
