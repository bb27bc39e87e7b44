//! Zone-map designs (kinds `zonemap`, `leco-zonemap`, `leco-zonemap-d`,
//! `gap-zonemap-d`): one layer with one separator per data page, and the
//! same designs built from every page's first and last key only.

use serde_json::Value;

use super::build::{gap_zone_layer, leco_zone_layer, zone_layer};
use super::design::{Design, LayeredKind};
use super::layer::LayerKind;
use crate::index::{ParamDoc, Params};
use crate::{Error, Result};

pub(super) fn zonemap(_p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    Ok(Design {
        layers: if keys.is_empty() {
            vec![]
        } else {
            vec![zone_layer(keys, per_page)]
        },
        models: None,
        notes: Value::Null,
    })
}

/// Kinds whose design reads only the first and last key of every data page
/// (the zone maps), so that a builder may keep 2 keys per page instead of
/// all of them; see [`design_from_page_bounds`].
pub(crate) const PAGE_BOUND_KINDS: &[&str] = &["zonemap", "leco-zonemap", "leco-zonemap-d", "gap-zonemap-d"];

/// The design of `kind` (one of [`PAGE_BOUND_KINDS`]) over a data run of
/// `per_page` records per page, from `bounds`: every page's first key then
/// its last key (the last page's last key may be left out). Builds the same
/// layers as `kind.design` over all the keys. `None` for other kinds.
pub(crate) fn design_from_page_bounds(
    kind: &LayeredKind,
    params: &Params,
    bounds: &[u64],
    per_page: usize,
    page_size: usize,
) -> Result<Option<Design>> {
    if !PAGE_BOUND_KINDS.contains(&kind.name) {
        return Ok(None);
    }
    // Over `bounds` each page is two "records": the zone builders read the
    // first key of a page and the key before it, which `bounds` holds at the
    // same offsets. Only the span recorded in the layers changes back.
    let mut d = (kind.design)(params, bounds, 2, page_size)?;
    let span = per_page as u64;
    for l in &mut d.layers {
        match &mut l.kind {
            LayerKind::Zone { span: s }
            | LayerKind::LecoZone { span: s, .. }
            | LayerKind::GapZone { span: s } => *s = span,
            other => {
                return Err(Error::invalid(format!(
                    "{}: a page-bound design built a {other:?} layer",
                    kind.name
                )));
            }
        }
    }
    Ok(Some(d))
}

pub(super) fn leco_zonemap(_p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    Ok(Design {
        layers: if keys.is_empty() {
            vec![]
        } else {
            vec![leco_zone_layer(keys, per_page, false)?]
        },
        models: None,
        notes: Value::Null,
    })
}

/// What [`gap_zonemap_d`] reads.
pub(super) const GAP_ZONEMAP_PARAMS: &[ParamDoc] = &[ParamDoc::new(
    "block",
    "separators per block, a power of two 2-65536: a lookup decodes up to one block (smaller: \
     more memory for the block heads)",
)];

pub(super) fn gap_zonemap_d(p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    // Separators per block: a lookup decodes up to one block (more memory
    // for the block heads with smaller blocks, more decoding with larger).
    let block = p.u64("block", 32)?;
    if !block.is_power_of_two() || !(2..=1 << 16).contains(&block) {
        return Err(Error::invalid(format!(
            "block must be a power of two in 2..=65536, got {block}"
        )));
    }
    Ok(Design {
        layers: if keys.is_empty() {
            vec![]
        } else {
            vec![gap_zone_layer(keys, per_page, block.trailing_zeros())?]
        },
        models: None,
        notes: Value::Null,
    })
}

pub(super) fn leco_zonemap_d(_p: &Params, keys: &[u64], per_page: usize, _ps: usize) -> Result<Design> {
    Ok(Design {
        layers: if keys.is_empty() {
            vec![]
        } else {
            vec![leco_zone_layer(keys, per_page, true)?]
        },
        models: None,
        notes: Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::layered::LAYERED_KINDS;

    fn page_bounds(keys: &[u64], per_page: usize) -> Vec<u64> {
        let mut out = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            let r = i % per_page;
            if r == 0 {
                out.push(k);
            }
            if r + 1 == per_page {
                out.push(k);
            }
        }
        out
    }

    #[test]
    fn zone_maps_from_page_bounds_equal_zone_maps_from_all_keys() {
        let clustered: Vec<u64> = (0..5_000u64)
            .map(|i| ((i / 100) << 40) | ((i % 100) * 3))
            .collect();
        let gaps: Vec<u64> = (0..3_001u64)
            .map(|i| if i < 3_000 { i * i * 1_000_003 } else { u64::MAX })
            .collect();
        let dense: Vec<u64> = (0..2_000u64).collect();
        for keys in [&clustered, &gaps, &dense, &vec![7u64], &vec![0, u64::MAX]] {
            for per_page in [1usize, 2, 3, 255] {
                let bounds = page_bounds(keys, per_page);
                for kind in LAYERED_KINDS.iter() {
                    let params = Params::default();
                    let got = design_from_page_bounds(kind, &params, &bounds, per_page, 4096).unwrap();
                    let Some(got) = got else {
                        assert!(!PAGE_BOUND_KINDS.contains(&kind.name), "{}", kind.name);
                        continue;
                    };
                    let want = (kind.design)(&params, keys, per_page, 4096).unwrap();
                    assert_eq!(got.layers.len(), want.layers.len(), "{}", kind.name);
                    for (g, w) in got.layers.iter().zip(&want.layers) {
                        assert_eq!(g.kind, w.kind, "{} per page {per_page}", kind.name);
                        assert!(
                            g.flat == w.flat,
                            "{} per page {per_page}: layer bytes differ",
                            kind.name
                        );
                        assert_eq!(g.last_successor, w.last_successor);
                    }
                }
            }
        }
        assert_eq!(PAGE_BOUND_KINDS.len(), 4);
    }
}
