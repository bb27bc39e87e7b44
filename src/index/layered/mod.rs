//! The static layered index: layers over a data run.
//!
//! One engine holds every static index of the papers as a configuration
//! (`docs/architecture.md`; AirIndex's unified model): a stack of layers over a
//! [`DataRun`](crate::format::DataRun), each layer a piecewise function from a key to a range of
//! positions in the layer below. A lookup goes top-down: the root layer is
//! read whole, every other layer only in the window the layer above
//! predicted, and the last range is read from the data run (Zhang G1: all
//! pages at once, or one by one).
//!
//! With `resident=index` every layer is held in memory and only data pages are
//! read (Zhang's setting); with `resident=none` every layer is read from
//! storage on every lookup (AirIndex's cold first query). A design tuned for
//! a memory budget (`air:memory_budget=BYTES`) records how many top layers
//! fit the budget (`resident_layers` in its manifest notes); with
//! `resident=index` only those are held in memory.

mod build;
mod compressed;
mod design;
mod entries;
mod keys;
mod kinds;
mod layer;
mod pgm_design;
mod radix_design;
mod resident;
mod segment;
mod spill;
mod tree_design;
mod zone_design;

use std::sync::Arc;

use serde_json::{Value, json};

#[cfg(test)]
pub(crate) use build::band_layer_in;
pub(crate) use build::{
    HeldLayer, LayerBuild, PartLines, SegmentLine, band_in_parts, leco_zone_layer, lines_of,
    step_layer_of_firsts, write_layer, zone_layer,
};
pub use compressed::{CprBand, Decoded};
pub use design::{Design, DesignFn, LayeredKind, StreamDesignFn};
pub(crate) use entries::{BandEntry, ResidentEntries};
pub use keys::Keys;
pub(crate) use kinds::LAYERED_KINDS;
pub(crate) use layer::{Access, band_range, span_range, step};
pub use layer::{LayerKind, layer_spec};
pub(crate) use pgm_design::compressed_band;
#[cfg(test)]
pub(crate) use pgm_design::{first_key_of, page_aware_lines_over};
pub use resident::{LayerStack, STACK_VERSION};
pub use spill::Spill;
pub(crate) use spill::{Held, Segs, SegsWriter};
pub(crate) use zone_design::{PAGE_BOUND_KINDS, design_from_page_bounds};

use super::{ApproxPos, Cursor, DataRunReader, Fetch, Index, IndexStats, Manifest, Record};
use crate::format::PagedFile;
use crate::storage::{Directory, IoStats};
use crate::{Error, Result};

/// File name of layer `i` (0 = the layer right above the data).
pub(crate) fn layer_file(i: usize) -> String {
    format!("layer-{i}.bin")
}

/// A layer held in memory.
#[derive(Debug)]
enum Resident {
    Entries(ResidentEntries),
    Blob(Decoded),
}

impl Resident {
    fn memory_bytes(&self) -> u64 {
        match self {
            Resident::Entries(e) => e.memory_bytes(),
            Resident::Blob(b) => b.memory_bytes(),
        }
    }
}

/// One layer of an open index.
#[derive(Debug)]
pub(crate) struct OpenLayer {
    kind: LayerKind,
    file: PagedFile,
    resident: Option<Resident>,
    /// Positions this layer indexes: entries of a blob layer, else entries.
    count: u64,
}

impl OpenLayer {
    fn count(&self) -> u64 {
        self.count
    }
}

/// Decodes a blob layer from its bytes (as a lookup or `resident=index` does).
pub(crate) fn decode_blob(kind: &LayerKind, bytes: &[u8], file: &str) -> Result<Decoded> {
    match kind {
        LayerKind::LecoZone { .. } => Ok(Decoded::Leco(
            crate::model::LecoArray::from_bytes(bytes)
                .map_err(|e| compressed::in_layer_file(e, file, "LeCo zone map"))?,
        )),
        LayerKind::GapZone { .. } => Ok(Decoded::Gap(
            crate::model::GapArray::from_bytes(bytes)
                .map_err(|e| compressed::in_layer_file(e, file, "gap-coded zone map"))?,
        )),
        LayerKind::CprBand { .. } => Ok(Decoded::Cpr(Box::new(CprBand::from_bytes(bytes, file)?))),
        _ => Err(Error::corruption(file, 0, "not a blob layer")),
    }
}

fn read_blob(file: &PagedFile) -> Result<Vec<u8>> {
    let count = file.meta().count;
    if count == 0 {
        return Ok(Vec::new());
    }
    // One read call for the whole blob, as a root layer is read; the bytes
    // are copied a page at a time (one-byte entries).
    let run = file.read_entries(0, count)?;
    let per_page = run.per_page().max(1);
    let mut out = Vec::with_capacity(count as usize);
    let mut i = 0;
    while i < count {
        let n = (per_page - i % per_page).min(count - i);
        let bytes = run
            .entries_in_page(i, n)
            .ok_or_else(|| Error::invalid(format!("blob entries [{i}, {}) not in the run", i + n)))?;
        out.extend_from_slice(bytes);
        i += n;
    }
    Ok(out)
}

/// A static layered index.
#[derive(Debug)]
pub struct LayeredIndex {
    kind: String,
    data: DataRunReader,
    /// Bottom-up: `layers[0]` indexes the data run.
    layers: Vec<OpenLayer>,
    fetch: Fetch,
    stats: Arc<IoStats>,
    dir: Arc<dyn Directory>,
    models: Option<u64>,
    /// Reads in flight at most in batched lookups.
    queue_depth: usize,
}

impl LayeredIndex {
    /// Opens the data run and `layers` layer files; loads them into memory
    /// when `resident`.
    pub fn open(
        kind: &str,
        dir: Arc<dyn Directory>,
        io: &crate::storage::IoContext,
        layers: usize,
        resident: bool,
        fetch: Fetch,
        models: Option<u64>,
    ) -> Result<Self> {
        let pinned = if resident { layers } else { 0 };
        Self::open_pinned(kind, dir, io, layers, pinned, fetch, models)
    }

    /// Like [`LayeredIndex::open`], holding only the top `pinned` layers in
    /// memory (the root first); the layers below them are read from storage
    /// on every lookup. `pinned >= layers` pins every layer.
    pub fn open_pinned(
        kind: &str,
        dir: Arc<dyn Directory>,
        io: &crate::storage::IoContext,
        layers: usize,
        pinned: usize,
        fetch: Fetch,
        models: Option<u64>,
    ) -> Result<Self> {
        let run = crate::format::DataRun::open(io.wrap(dir.open_read(crate::format::DATA_FILE)?))?;
        let mut open = Vec::with_capacity(layers);
        for i in 0..layers {
            let resident = i + pinned.min(layers) >= layers;
            let name = layer_file(i);
            let raw = dir.open_read(&name)?;
            let file_name = raw.name().to_string();
            // Layer files are read through the same accounting as data.
            let storage = io.wrap(raw);
            // Any width: the layer kind in the header decides it.
            let file = PagedFile::open(storage, layer_spec(0))?;
            let kind = LayerKind::decode(&file.meta().extra, &file_name)?;
            if kind.width() != file.meta().width {
                return Err(Error::corruption(
                    &file_name,
                    0,
                    "layer kind and entry width disagree",
                ));
            }
            let (resident, count) = if kind.is_blob() {
                let blob = decode_blob(&kind, &read_blob(&file)?, &file_name)?;
                let count = blob.len() as u64;
                (resident.then_some(Resident::Blob(blob)), count)
            } else if resident {
                let (flat, aux) = file.read_all()?;
                let count = file.meta().count;
                (
                    Some(Resident::Entries(ResidentEntries {
                        flat,
                        aux,
                        width: file.meta().width,
                        per_page: file.meta().per_page as u64,
                        count,
                    })),
                    count,
                )
            } else {
                (None, file.meta().count)
            };
            open.push(OpenLayer {
                kind,
                file,
                resident,
                count,
            });
        }
        // Loading resident layers is not part of any lookup's I/O; the page
        // cache starts empty too, so that the first lookups pay for every
        // page they read (opening read file headers through it).
        io.stats.reset();
        if let Some(cache) = &io.cache {
            cache.clear();
        }
        Ok(LayeredIndex {
            kind: kind.to_string(),
            data: DataRunReader::new(run),
            layers: open,
            fetch,
            stats: io.stats.clone(),
            dir,
            models,
            queue_depth: io.queue_depth,
        })
    }

    /// Checks every file against `m`, the manifest of its directory: the
    /// build id in each header ([`Manifest::check_build_id`]), the data
    /// run's record count, and each layer's entry bytes against the
    /// manifest's description (the page count follows from the count, and
    /// the page size is checked against the manifest's too).
    ///
    /// Errors: [`Error::Corruption`] naming the first file that disagrees.
    pub fn check_build(&self, m: &Manifest) -> Result<()> {
        let run = self.data.run();
        m.check_data_run(run)?;
        let described = m.description.get("layers").and_then(serde_json::Value::as_array);
        for (i, layer) in self.layers.iter().enumerate() {
            let fm = layer.file.meta();
            let name = layer.file.storage().name();
            m.check_build_id(name, fm.build_id)?;
            m.check_count(name, "bytes per page", fm.page_size as u64, m.page_size as u64)?;
            let want = described
                .and_then(|a| a.get(i))
                .and_then(|d| d.get("bytes"))
                .and_then(serde_json::Value::as_u64);
            if let Some(want) = want {
                let found = fm.count.checked_mul(fm.width as u64).ok_or_else(|| {
                    Error::corruption(
                        name,
                        0,
                        format!("{} entries of {} bytes overflow", fm.count, fm.width),
                    )
                })?;
                m.check_count(name, "bytes of entries", found, want)?;
            }
        }
        Ok(())
    }

    /// The predicted range of the data run for `key`.
    pub fn predict(&self, key: u64) -> Result<ApproxPos> {
        let layers = &self.layers;
        resident::descend(
            layers.len(),
            self.data.len(),
            |l| layers.get(l).map_or(0, OpenLayer::count),
            |l| layers.get(l).is_some_and(|x| x.kind.exact()),
            |l, lo, hi, below| {
                let layer = layers
                    .get(l)
                    .ok_or_else(|| Error::invalid(format!("no layer {l}")))?;
                match &layer.resident {
                    Some(Resident::Entries(res)) => {
                        step(&layer.kind, Access::Entries(res), key, lo, hi, below)
                    }
                    Some(Resident::Blob(b)) => step(&layer.kind, Access::Blob(b), key, lo, hi, below),
                    None if layer.kind.is_blob() => {
                        let name = layer.file.storage().name().to_string();
                        let b = decode_blob(&layer.kind, &read_blob(&layer.file)?, &name)?;
                        step(&layer.kind, Access::Blob(&b), key, lo, hi, below)
                    }
                    None => {
                        let run = layer.file.read_entries(lo, hi)?;
                        step(&layer.kind, Access::Entries(&run), key, lo, hi, below)
                    }
                }
            },
        )
    }

    /// A predictor for keys in ascending order (a sorted batch, a join's
    /// probes), after Chesetti & Pandey's first join optimisation: when the
    /// last layer is resident and searched by key, it is walked with an
    /// iterator (each key's entry found by a galloping search forward from
    /// the previous key's) instead of descending from the top for every
    /// key. It predicts what [`LayeredIndex::predict`] predicts; a key
    /// smaller than the one before starts the walk again.
    pub(crate) fn sorted_predictor(&self) -> SortedPredictor<'_> {
        let bottom = self.layers.first().and_then(|l| match &l.resident {
            Some(Resident::Entries(e)) if layer::searches_last_le(&l.kind) && e.count > 0 => {
                Some((&l.kind, e))
            }
            _ => None,
        });
        SortedPredictor {
            index: self,
            bottom,
            at: None,
        }
    }

    /// [`LayeredIndex::predict`] for many keys: level by level, the windows
    /// of every key in a layer held on storage read as one batch (a blob
    /// layer is read once for the batch).
    pub fn predict_many(&self, keys: &[u64]) -> Result<Vec<ApproxPos>> {
        let layers = &self.layers;
        let n = self.data.len();
        let count = |l: usize| layers.get(l).map_or(0, OpenLayer::count);
        let top = layers.len().saturating_sub(1);
        let mut windows = vec![(0u64, count(top)); keys.len()];
        for (l, layer) in layers.iter().enumerate().rev() {
            let below = match l.checked_sub(1) {
                Some(b) => count(b),
                None => n,
            };
            let name = layer.file.storage().name();
            // Layers on storage: every key's window in one batch.
            let mut set = super::batch::RangeSet::default();
            let mut wanted: Vec<Option<usize>> = vec![None; keys.len()];
            let mut blob = None;
            match &layer.resident {
                Some(_) => {}
                None if layer.kind.is_blob() => {
                    blob = Some(decode_blob(&layer.kind, &read_blob(&layer.file)?, name)?);
                }
                None => {
                    let meta = layer.file.meta();
                    for (w, &(lo, hi)) in wanted.iter_mut().zip(&windows) {
                        let hi = hi.min(meta.count);
                        if lo < hi {
                            *w = Some(set.add(meta.page_of(lo), meta.page_of(hi - 1) + 1));
                        }
                    }
                }
            }
            let runs = set.read(|r| layer.file.read_pages_many(r, self.queue_depth))?;
            for (i, &key) in keys.iter().enumerate() {
                let Some(&(lo, hi)) = windows.get(i) else { continue };
                let range = if lo >= hi {
                    (lo.min(below), lo.min(below))
                } else {
                    match (&layer.resident, &blob) {
                        (Some(Resident::Entries(res)), _) => {
                            step(&layer.kind, Access::Entries(res), key, lo, hi, below)?
                        }
                        (Some(Resident::Blob(b)), _) | (None, Some(b)) => {
                            step(&layer.kind, Access::Blob(b), key, lo, hi, below)?
                        }
                        (None, None) => {
                            let run = wanted
                                .get(i)
                                .copied()
                                .flatten()
                                .and_then(|w| runs.get(w))
                                .ok_or_else(|| Error::corruption(name, 0, "layer window not read"))?;
                            step(&layer.kind, Access::Entries(run), key, lo, hi, below)?
                        }
                    }
                };
                if let Some(w) = windows.get_mut(i) {
                    *w = resident::next_window(l, range, below, layer.kind.exact());
                }
            }
        }
        Ok(windows.into_iter().map(resident::approx_of).collect())
    }

    /// Sizes of the layers (entries, bytes, kind), bottom-up.
    pub fn layer_summary(&self) -> Vec<Value> {
        self.layers
            .iter()
            .map(|l| {
                json!({
                    "kind": l.kind,
                    "entries": l.count(),
                    "file_bytes": l.file.meta().count * l.kind.width() as u64,
                    "memory_bytes": l.resident.as_ref().map(Resident::memory_bytes),
                })
            })
            .collect()
    }
}

/// Predictions for keys in ascending order ([`LayeredIndex::sorted_predictor`]).
pub(crate) struct SortedPredictor<'a> {
    index: &'a LayeredIndex,
    /// The last layer, when it is resident and searched by key.
    bottom: Option<(&'a LayerKind, &'a ResidentEntries)>,
    /// The previous key and its entry in the last layer.
    at: Option<(u64, u64)>,
}

impl SortedPredictor<'_> {
    /// The predicted range of the data run for `key`.
    pub(crate) fn predict(&mut self, key: u64) -> Result<ApproxPos> {
        let Some((kind, e)) = self.bottom else {
            return self.index.predict(key);
        };
        let j = match self.at {
            Some((prev, j)) if prev <= key => layer::last_le_from(e, key, j, e.count),
            _ => layer::last_le(e, key, 0, e.count),
        };
        self.at = Some((key, j));
        let n = self.index.data.len();
        let range = step(kind, Access::Entries(e), key, j, j + 1, n)?;
        Ok(resident::approx_of(resident::next_window(0, range, n, true)))
    }
}

impl Index for LayeredIndex {
    fn kind(&self) -> &str {
        &self.kind
    }

    fn len(&self) -> u64 {
        self.data.len()
    }

    fn get(&self, key: u64) -> Result<Option<u64>> {
        let a = self.predict(key)?;
        self.data.get(key, a, self.fetch)
    }

    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        let a = self.predict(key)?;
        self.data.lower_bound(key, a, self.fetch)
    }

    /// Sorted and deduplicated, then the data pages of every key read with
    /// `queue_depth` reads in flight: the pages of one-by-one lookups. With
    /// every layer in memory each key is predicted as its read is issued,
    /// so prediction and search overlap the reads; with layers on storage
    /// the batch is predicted level by level first
    /// ([`LayeredIndex::predict_many`]).
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        super::batch::answer(keys, out, |keys| {
            if self.layers.iter().all(|l| l.resident.is_some()) {
                let mut sorted = self.sorted_predictor();
                let predict = |i: usize| sorted.predict(keys.get(i).copied().unwrap_or(0));
                return self.data.get_many(keys, predict, self.fetch, self.queue_depth);
            }
            let approx = self.predict_many(keys)?;
            let predict = |i: usize| {
                approx
                    .get(i)
                    .copied()
                    .ok_or_else(|| Error::invalid("no prediction"))
            };
            self.data.get_many(keys, predict, self.fetch, self.queue_depth)
        })
    }

    /// As [`Index::get_many`], plus a read of the next page for the keys
    /// whose lower bound lies after their predicted range.
    fn lower_bound_many(&self, keys: &[u64], out: &mut Vec<Option<Record>>) -> Result<()> {
        super::batch::answer(keys, out, |keys| {
            if self.layers.iter().all(|l| l.resident.is_some()) {
                let mut sorted = self.sorted_predictor();
                let predict = |i: usize| sorted.predict(keys.get(i).copied().unwrap_or(0));
                return self
                    .data
                    .lower_bound_many(keys, predict, self.fetch, self.queue_depth);
            }
            let approx = self.predict_many(keys)?;
            let predict = |i: usize| {
                approx
                    .get(i)
                    .copied()
                    .ok_or_else(|| Error::invalid("no prediction"))
            };
            self.data
                .lower_bound_many(keys, predict, self.fetch, self.queue_depth)
        })
    }

    /// Seeks with the model's prediction and the last-mile search (the
    /// pages a lower bound reads), then reads page by page; a scan reads
    /// the pages it still needs in one call.
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(self.data.cursor(self.fetch, |key| self.predict(key))))
    }

    fn approx(&self, key: u64) -> Result<Option<ApproxPos>> {
        self.predict(key).map(Some)
    }

    fn stats(&self) -> Result<IndexStats> {
        let resident: u64 = self
            .layers
            .iter()
            .filter_map(|l| l.resident.as_ref())
            .map(|r| r.memory_bytes())
            .sum();
        let mut st = IndexStats {
            kind: self.kind.clone(),
            n: self.data.len(),
            memory_bytes: resident,
            disk_bytes: self.dir.total_bytes()?,
            models: self.models,
            height: Some(self.layers.len() as u32),
            ..Default::default()
        };
        st.extra
            .insert("layers".into(), Value::Array(self.layer_summary()));
        st.extra.insert("fetch".into(), json!(self.fetch));
        Ok(st)
    }

    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let mut pages = self.data.run().verify(progress)?;
        for l in &self.layers {
            pages += l.file.verify(progress)?;
        }
        Ok(pages)
    }

    fn io(&self) -> &Arc<IoStats> {
        &self.stats
    }
}
