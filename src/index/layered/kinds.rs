//! The named static index kinds: each is a recipe for a stack of layers.

use std::sync::Arc;

use serde_json::{Value, json};

use super::build::{LayerBuild, step_layer, step_stack, write_layer, zone_layer};
use super::{LayeredIndex, layer_file};
use crate::index::binary::{DATA_FILE, write_data_run};
use crate::index::{
    BuildOptions, Fetch, Index, IndexKind, Manifest, OpenOptions, Params, Records, Residency,
};
use crate::storage::{Directory, IoContext};
use crate::{Error, Result};

/// A built design: the layers bottom-up and the number of models.
#[derive(Debug)]
pub struct Design {
    /// Layers, bottom (over the data) first.
    pub layers: Vec<LayerBuild>,
    /// Models/segments of the learned layers (None for non-learned designs).
    pub models: Option<u64>,
}

/// Builds a design over sorted keys with `per_page` records per data page.
pub type DesignFn = fn(&Params, &[u64], usize, usize) -> Result<Design>;

/// A named layered kind.
pub struct LayeredKind {
    /// Kind name.
    pub name: &'static str,
    /// One line for `strata list`.
    pub summary: &'static str,
    /// The recipe: (params, keys, records per page, page size) -> design.
    pub design: DesignFn,
}

impl std::fmt::Debug for LayeredKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayeredKind").field("name", &self.name).finish()
    }
}

fn fetch_param(params: &Params) -> Result<Fetch> {
    params.str("fetch", "all-at-once")?.parse()
}

impl IndexKind for LayeredKind {
    fn name(&self) -> &'static str {
        self.name
    }

    fn summary(&self) -> &'static str {
        self.summary
    }

    fn build(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
    ) -> Result<(Vec<String>, Value)> {
        fetch_param(params)?;
        let meta = write_data_run(dir, records, opts.page_size)?;
        let design = (self.design)(params, records.keys(), meta.per_page, opts.page_size)?;
        let mut files = vec![DATA_FILE.to_string()];
        let mut layers = Vec::new();
        for (i, l) in design.layers.iter().enumerate() {
            let name = layer_file(i);
            write_layer(dir, &name, l, opts.page_size)?;
            layers.push(json!({ "kind": l.kind, "entries": l.count(), "bytes": l.flat.len() }));
            files.push(name);
        }
        Ok((
            files,
            json!({ "data_pages": meta.pages, "layers": layers, "models": design.models }),
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
        let idx = LayeredIndex::open(
            self.name,
            dir,
            &io,
            layers,
            opts.resident == Residency::Index,
            fetch,
            models,
        )?;
        Ok(Box::new(idx))
    }
}

fn zonemap(_p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    Ok(Design {
        layers: if keys.is_empty() {
            vec![]
        } else {
            vec![zone_layer(keys, per_page)]
        },
        models: None,
    })
}

fn btree_static(p: &Params, keys: &[u64], per_page: usize, page_size: usize) -> Result<Design> {
    // AirIndex's B-TREE: GStep(p = 255, 4 KiB) — one (key, position) entry
    // per data page, then one entry per page of each level up to a one-page root.
    let fanout = p.usize("fanout", 0)?;
    if keys.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: None,
        });
    }
    let first = step_layer(keys, per_page);
    let mut layers = vec![first];
    if fanout == 0 {
        let above = step_stack(&layers[0], page_size);
        layers.extend(above);
    } else {
        if fanout < 2 {
            return Err(Error::invalid("btree-static fanout must be at least 2"));
        }
        while layers.last().map_or(0, |l| l.count() as usize) > fanout {
            let keys = layers.last().map(|l| l.keys()).unwrap_or_default();
            layers.push(step_layer(&keys, fanout));
        }
    }
    Ok(Design { layers, models: None })
}

/// Every layered kind of this build.
pub static LAYERED_KINDS: &[LayeredKind] = &[
    LayeredKind {
        name: "zonemap",
        summary: "zone map: the first key of every data page in memory; exactly one page per lookup",
        design: zonemap,
    },
    LayeredKind {
        name: "btree-static",
        summary: "AirIndex's B-TREE: step layers of 4 KiB nodes (fanout 255) over the data pages",
        design: btree_static,
    },
];
