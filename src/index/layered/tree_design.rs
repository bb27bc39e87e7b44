//! B+-tree-shaped static designs: step layers over the data pages
//! (`btree-static`, AirIndex's B-TREE) and over greedy shrinking-cone
//! segments (`fiting-static`), each topped by step layers up to one page.

use serde_json::Value;

use super::build::{band_layer_in, lines_of, step_layer, step_layer_of_firsts, step_stack};
use super::design::Design;
use super::keys::Keys;
use crate::index::{ParamDoc, Params};
use crate::{Error, Result};

/// What [`btree_static`] reads.
pub(super) const BTREE_STATIC_PARAMS: &[ParamDoc] = &[ParamDoc::new(
    "fanout",
    "entries per node of the layers above the first (0: as many as a page holds; else at least 2)",
)];

/// What [`fiting_static`] reads.
pub(super) const FITING_STATIC_PARAMS: &[ParamDoc] = &[ParamDoc::new(
    "epsilon",
    "error bound of the shrinking-cone segments",
)];

pub(super) fn btree_static(p: &Params, keys: &[u64], per_page: usize, page_size: usize) -> Result<Design> {
    btree_static_in(p, keys.into(), per_page, page_size)
}

/// [`btree_static`] over keys in memory or in a data run: one pass keeps
/// every page's first key.
pub(super) fn btree_static_in(
    p: &Params,
    keys: Keys<'_>,
    per_page: usize,
    page_size: usize,
) -> Result<Design> {
    // AirIndex's B-TREE: GStep(p = 255, 4 KiB) — one (key, position) entry
    // per data page, then one entry per page of each level up to a one-page root.
    let fanout = p.usize("fanout", 0)?;
    let per_page = per_page.max(2);
    // One pass keeps every page's first key (over a run being written: while
    // it is written).
    let firsts = keys.every(per_page)?;
    if firsts.is_empty() {
        return Ok(Design {
            layers: vec![],
            models: None,
            notes: Value::Null,
        });
    }
    let first = step_layer_of_firsts(firsts.into_iter(), per_page, keys.len() as u64);
    let above = if fanout == 0 {
        step_stack(&first, page_size)
    } else {
        Vec::new()
    };
    let mut layers = vec![first];
    if fanout == 0 {
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
    Ok(Design {
        layers,
        models: None,
        notes: Value::Null,
    })
}

pub(super) fn fiting_static(p: &Params, keys: &[u64], per_page: usize, page_size: usize) -> Result<Design> {
    fiting_static_in(p, keys.into(), per_page, page_size)
}

/// [`fiting_static`] over keys in memory or in a data run: the shrinking
/// cone fed key by key in the first pass (over a run being written: while it
/// is written), the band's error bounds measured in a second.
pub(super) fn fiting_static_in(
    p: &Params,
    keys: Keys<'_>,
    _per_page: usize,
    page_size: usize,
) -> Result<Design> {
    let eps = p.u64("epsilon", 64)?;
    let e = i128::from(eps);
    let mut cone = crate::model::ConeStream::new();
    let mut segs = Vec::new();
    let n = keys.for_each_all(|i, chunk| {
        for (d, &k) in chunk.iter().enumerate() {
            let y = (i + d) as i128;
            if let Some(s) = cone.push(k, y - e, y + e) {
                segs.push(s);
            }
        }
        Ok(())
    })?;
    segs.extend(cone.finish());
    if n == 0 {
        return Ok(Design {
            layers: vec![],
            models: Some(0),
            notes: Value::Null,
        });
    }
    let first_key = |i: usize| {
        segs.get(segs.partition_point(|s| s.start < i))
            .map_or(0, |s| s.first_key)
    };
    let bottom = band_layer_in(keys, &lines_of(&segs), &first_key, None, 1, 0)?;
    let above = step_stack(&bottom, page_size);
    let mut layers = vec![bottom];
    layers.extend(above);
    Ok(Design {
        layers,
        models: Some(segs.len() as u64),
        notes: Value::Null,
    })
}
