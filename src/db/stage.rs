//! The static stage: one *generation* of files — a data run and a layered
//! index over it — written by a bulk load or a merge, named with the prefix
//! `gNNNNNN-` in the store's directory.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::prefix::PrefixDirectory;
use crate::format::bytes::get_u64;
use crate::format::datarun::RECORD_LEN;
use crate::format::{DataRunWriter, records_per_page};
use crate::index::binary::DATA_FILE;
use crate::index::layered::{Design, LAYERED_KINDS, LayeredKind, layer_file, write_layer};
use crate::index::{Fetch, Index, Manifest, OpenOptions, Params, Residency, open_in};
use crate::storage::{Directory, StorageProfile};
use crate::{Error, Result};

/// File-name prefix of generation `g`.
pub fn gen_prefix(g: u64) -> String {
    format!("g{g:06}-")
}

/// The generation a file belongs to, if its name has a generation prefix.
pub fn gen_of(name: &str) -> Option<u64> {
    let rest = name.strip_prefix('g')?;
    let (digits, _) = rest.split_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Expected pages per lookup up to which `static=auto` takes `pgm-disk-cpr`
/// (the zone maps read exactly one).
pub const MAX_AUTO_PAGES: f64 = 1.01;

/// Which static index a merge builds.
#[derive(Debug, Clone, PartialEq)]
pub enum StaticKind {
    /// Zhang G5: build the zone maps `gap-zonemap-d` and `leco-zonemap-d`
    /// (exactly one page per lookup) and `pgm-disk-cpr` at `epsilon`
    /// (default 8), and keep the smaller zone map unless `pgm-disk-cpr`
    /// expects at most [`MAX_AUTO_PAGES`] pages per lookup *and* needs at
    /// most 90% of the zone map's memory (the learned index must save real
    /// memory at the same pages to be worth its decoding). The choice is
    /// remembered and reused by merges until the static stage has doubled.
    Auto {
        /// Error bound of `pgm-disk-cpr`.
        epsilon: u64,
    },
    /// One layered kind (`strata list`), e.g. `pgm-disk-cpr:epsilon=16`.
    Spec(String),
}

impl Default for StaticKind {
    fn default() -> Self {
        StaticKind::Auto { epsilon: 8 }
    }
}

impl std::fmt::Display for StaticKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StaticKind::Auto { epsilon } => write!(f, "auto:epsilon={epsilon}"),
            StaticKind::Spec(s) => f.write_str(s),
        }
    }
}

fn layered(name: &str) -> Result<&'static LayeredKind> {
    LAYERED_KINDS.iter().find(|k| k.name == name).ok_or_else(|| {
        let names: Vec<&str> = LAYERED_KINDS.iter().map(|k| k.name).collect();
        Error::invalid(format!(
            "the static stage takes a layered index kind ({}), not {name:?}",
            names.join(", ")
        ))
    })
}

/// Checks that a static kind names a layered kind with valid parameters.
pub fn check_static_kind(kind: &StaticKind) -> Result<()> {
    if let StaticKind::Spec(s) = kind {
        let spec: crate::index::IndexSpec = s.parse()?;
        layered(&spec.kind)?;
        // Parameters are checked by the first build (designs read them).
    }
    Ok(())
}

/// Bytes the layers of a design hold when resident (their encoded sizes).
fn design_bytes(d: &Design) -> u64 {
    d.layers.iter().map(|l| l.flat.len() as u64).sum()
}

/// Streams sorted records into a new generation's data run, keeping the keys
/// for the layer builders (which need the key array: 8 bytes per record
/// while the generation is built).
pub struct RunBuilder {
    writer: DataRunWriter,
    keys: Vec<u64>,
    page_size: usize,
}

impl RunBuilder {
    /// Starts `data.run` in `dir` (a generation's prefixed view).
    pub fn new(dir: &dyn Directory, page_size: usize, expected: usize) -> Result<Self> {
        Ok(RunBuilder {
            writer: DataRunWriter::new(dir.create(DATA_FILE)?, page_size)?,
            keys: Vec::with_capacity(expected),
            page_size,
        })
    }

    /// Appends a record; keys must be strictly increasing.
    pub fn push(&mut self, key: u64, value: u64) -> Result<()> {
        self.writer.push(key, value)?;
        self.keys.push(key);
        Ok(())
    }

    /// Appends records given as bytes (a stretch of an older run's page);
    /// keys must be strictly increasing and above the last one pushed.
    pub fn push_records(&mut self, records: &[u8]) -> Result<()> {
        self.writer.push_records(records)?;
        self.keys.extend(
            records
                .chunks_exact(RECORD_LEN)
                .map(|r| get_u64(r, 0).unwrap_or(0)),
        );
        Ok(())
    }

    /// Records pushed so far.
    pub fn len(&self) -> u64 {
        self.keys.len() as u64
    }

    /// Finishes the data run (synced), builds and writes the layers (each
    /// synced) and the generation's index manifest (atomically, last).
    /// `decided` is an earlier automatic choice `(spec, records then)`, reused
    /// while the records have not doubled. Returns the spec of the static
    /// index built and the record count of the automatic choice it follows.
    pub fn finish(
        self,
        dir: &dyn Directory,
        kind: &StaticKind,
        decided: Option<(&str, u64)>,
    ) -> Result<(String, u64)> {
        let meta = self.writer.finish()?;
        let per_page = records_per_page(self.page_size);
        let keys = self.keys;
        let n = keys.len() as u64;
        let reuse = match (kind, decided) {
            (StaticKind::Auto { .. }, Some((spec, at))) if at > 0 && n < at.saturating_mul(2) => {
                Some((StaticKind::Spec(spec.to_string()), at))
            }
            _ => None,
        };
        let decided_n = match (&reuse, kind) {
            (Some((_, at)), _) => *at,
            (None, StaticKind::Auto { .. }) => n.max(1),
            (None, StaticKind::Spec(_)) => 0,
        };
        let kind = reuse.as_ref().map_or(kind, |(k, _)| k);
        let (kind, params, design) = match kind {
            StaticKind::Auto { epsilon } => {
                let mut m = Map::new();
                m.insert("epsilon".into(), Value::from(*epsilon));
                let pgm_params = Params::from_map(m);
                // The smaller zone map, unless the learned index saves at
                // least a tenth of its memory at (nearly) the same pages: it
                // decodes more per lookup, so a near tie goes to the zone
                // map.
                let mut best: Option<(&LayeredKind, Params, Design)> = None;
                for (name, params) in [
                    ("gap-zonemap-d", Params::default()),
                    ("leco-zonemap-d", Params::default()),
                    ("pgm-disk-cpr", pgm_params),
                ] {
                    let k = layered(name)?;
                    let d = (k.design)(&params, &keys, per_page, self.page_size)?;
                    let margin = if name == "pgm-disk-cpr" { 0.9 } else { 1.0 };
                    // G5 compares at the same expected pages: a learned index
                    // that reads more than 1% over the zone maps' one page
                    // (hard data at this epsilon) is not a candidate.
                    let pages = d
                        .notes
                        .get("expected_pages")
                        .and_then(Value::as_f64)
                        .unwrap_or(1.0);
                    let wins = pages <= MAX_AUTO_PAGES
                        && best.as_ref().is_none_or(|(_, _, b)| {
                            (design_bytes(&d) as f64) < margin * design_bytes(b) as f64
                        });
                    if wins {
                        best = Some((k, params, d));
                    }
                }
                best.ok_or_else(|| Error::invalid("no static kind to choose from"))?
            }
            StaticKind::Spec(s) => {
                let spec: crate::index::IndexSpec = s.parse()?;
                let k = layered(&spec.kind)?;
                let params = spec.params;
                let d = (k.design)(&params, &keys, per_page, self.page_size)?;
                (k, params, d)
            }
        };
        let fetch: Fetch = params.str("fetch", "all-at-once")?.parse()?;
        params.finish(kind.name)?;
        let mut files = vec![DATA_FILE.to_string()];
        let mut layers = Vec::new();
        for (i, l) in design.layers.iter().enumerate() {
            let name = layer_file(i);
            write_layer(dir, &name, l, self.page_size)?;
            layers.push(json!({ "kind": l.kind, "entries": l.count(), "bytes": l.flat.len() }));
            files.push(name);
        }
        let resolved = params.resolved();
        let mut m = Manifest::new(kind.name, resolved.clone(), keys.len() as u64, self.page_size);
        m.files = files;
        m.description = json!({
            "data_pages": meta.pages,
            "layers": layers,
            "models": design.models,
            "notes": design.notes,
            "fetch": fetch,
        });
        m.store(dir)?;
        let mut spec = kind.name.to_string();
        for (i, (k, v)) in resolved.iter().filter(|(k, _)| k.as_str() != "fetch").enumerate() {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            spec.push_str(if i == 0 { ":" } else { "," });
            spec.push_str(&format!("{k}={v}"));
        }
        Ok((spec, decided_n))
    }
}

/// An open static generation.
pub struct StaticStage {
    /// Generation number.
    pub generation: u64,
    /// Spec of its index (`pgm-disk-cpr:epsilon=64`, `leco-zonemap-d`, ...).
    pub spec: String,
    /// The layered index.
    pub index: Box<dyn Index>,
    /// Records.
    pub n: u64,
    /// Bytes its index holds in memory.
    pub memory_bytes: u64,
}

impl std::fmt::Debug for StaticStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticStage")
            .field("generation", &self.generation)
            .field("spec", &self.spec)
            .field("n", &self.n)
            .finish()
    }
}

impl StaticStage {
    /// Opens generation `g` of `dir`; `view` is the generation's prefixed
    /// view (with the store's I/O accounting).
    pub fn open(
        view: PrefixDirectory<Arc<dyn Directory>>,
        generation: u64,
        spec: &str,
        resident: Residency,
        profile: Option<StorageProfile>,
    ) -> Result<Self> {
        let index = open_in(
            Arc::new(view),
            &OpenOptions {
                direct: false,
                resident,
                cache_pages: 0,
                profile,
            },
        )?;
        let st = index.stats()?;
        Ok(StaticStage {
            generation,
            spec: spec.to_string(),
            n: index.len(),
            memory_bytes: st.memory_bytes,
            index,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_names() {
        assert_eq!(gen_prefix(7), "g000007-");
        assert_eq!(gen_of("g000007-data.run"), Some(7));
        assert_eq!(gen_of("g12345678-layer-0.bin"), Some(12_345_678));
        assert_eq!(gen_of("g-data.run"), None);
        assert_eq!(gen_of("gx1-data.run"), None);
        assert_eq!(gen_of("wal-000001.log"), None);
    }
}
