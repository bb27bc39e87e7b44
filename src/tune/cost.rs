//! The storage cost model `L_SM` (AirIndex §4.3, Eq. 5–6) over strata's
//! paged layers.
//!
//! AirIndex counts bytes: the root layer is read whole (`s(Θ_L)` bytes), every
//! other layer and the data in the byte range `Δ(x; Θ_l)` the layer above
//! predicted. strata reads whole pages, so the model here counts exactly what
//! [`LayeredIndex::predict`](crate::index::layered::LayeredIndex::predict)
//! and the data run reader read, computed from the *built* layers with the
//! engine's own search step ([`step`]):
//!
//! - the root: all of its pages, in one read call;
//! - a non-root layer: the pages covering the window the layer above
//!   predicted (widened by one entry on each side when the layer above is
//!   approximate and the layer is an index layer), in one call; a compressed
//!   (blob) layer is read whole;
//! - the data: the pages covering the final range, in one call.
//!
//! Query keys are uniform over the existing keys (AirIndex's `X`), sampled
//! ([`QuerySample`]). For every read the model keeps a histogram of pages per
//! lookup ([`ReadHistogram`]), so the expected time is exact for any
//! monotone `T`, and for the affine profiles it equals
//! `calls × latency + bytes / bandwidth` — what [`IoSnapshot::modelled_ns_under`](crate::storage::IoSnapshot::modelled_ns_under)
//! charges for the same lookups.

use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::format::paged::entries_per_page;
use crate::index::layered::{
    Access, BandEntry, Decoded, Held, HeldLayer, Keys, LayerBuild, LayerKind, ResidentEntries, Spill,
    band_range, decode_blob, span_range, step,
};
use crate::storage::StorageProfile;
use crate::{Error, Result};

/// Query keys for the model: existing keys drawn uniformly (with
/// replacement) by a seeded generator, sorted; every key when there are no
/// more than the sample size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuerySample {
    keys: Vec<u64>,
}

impl QuerySample {
    /// Draws `size` keys from `keys` (all of them when `keys.len() <= size`).
    /// Deterministic for a seed.
    pub fn new(keys: &[u64], size: usize, seed: u64) -> Self {
        match sample_positions(keys.len(), size, seed) {
            None => QuerySample { keys: keys.to_vec() },
            Some(pos) => QuerySample {
                keys: pos.iter().filter_map(|&i| keys.get(i).copied()).collect(),
            },
        }
    }

    /// [`QuerySample::new`] over keys in memory or in a data run: the same
    /// sample, the run read in one pass.
    pub fn from_keys(keys: Keys<'_>, size: usize, seed: u64) -> Result<Self> {
        let Some(pos) = sample_positions(keys.len(), size, seed) else {
            return Ok(QuerySample {
                keys: keys.to_vec()?.into_owned(),
            });
        };
        let mut out = Vec::with_capacity(pos.len());
        let mut next = 0usize;
        keys.for_each_chunk_while(0..keys.len(), |i, c| {
            while let Some(&p) = pos.get(next) {
                match c.get(p.wrapping_sub(i)) {
                    Some(&k) if p >= i => out.push(k),
                    _ => break,
                }
                next += 1;
            }
            Ok(next < pos.len())
        })?;
        if out.len() != pos.len() {
            return Err(Error::invalid(format!(
                "the query sample found {} of {} keys",
                out.len(),
                pos.len()
            )));
        }
        Ok(QuerySample { keys: out })
    }

    /// Every key of `keys` (the exact expectation).
    pub fn all(keys: &[u64]) -> Self {
        QuerySample { keys: keys.to_vec() }
    }

    /// The sampled keys, sorted.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// Number of sampled lookups.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the sample is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The positions of a sample of `size` of `n` keys, sorted (with
/// repeats); `None` when every key is taken.
fn sample_positions(n: usize, size: usize, seed: u64) -> Option<Vec<usize>> {
    if n <= size {
        return None;
    }
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
    let mut pos: Vec<usize> = (0..size).map(|_| rng.random_range(0..n)).collect();
    pos.sort_unstable();
    Some(pos)
}

/// How many pages one layer (or the data) is read for, over the sampled
/// lookups: `(pages, lookups)` pairs, ascending by pages. A lookup that reads
/// 0 pages issues no read call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReadHistogram {
    counts: Vec<(u64, u64)>,
    lookups: u64,
}

impl ReadHistogram {
    /// A histogram of the given per-lookup page counts.
    pub fn from_pages(pages: impl IntoIterator<Item = u64>) -> Self {
        let mut c = PageCounter::default();
        for p in pages {
            c.add(p, 1);
        }
        c.finish()
    }

    /// Every lookup reads `pages` pages.
    pub fn constant(pages: u64, lookups: u64) -> Self {
        ReadHistogram {
            counts: if lookups > 0 {
                vec![(pages, lookups)]
            } else {
                vec![]
            },
            lookups,
        }
    }

    /// `(pages, lookups)` pairs.
    pub fn counts(&self) -> &[(u64, u64)] {
        &self.counts
    }

    /// Number of lookups counted.
    pub fn lookups(&self) -> u64 {
        self.lookups
    }

    fn mean_of(&self, f: impl Fn(u64) -> f64) -> f64 {
        if self.lookups == 0 {
            return 0.0;
        }
        let sum: f64 = self.counts.iter().map(|&(p, c)| f(p) * c as f64).sum();
        sum / self.lookups as f64
    }

    /// Mean pages read per lookup.
    pub fn mean_pages(&self) -> f64 {
        self.mean_of(|p| p as f64)
    }

    /// Mean bytes read per lookup (pages are read whole).
    pub fn mean_bytes(&self, page_size: usize) -> f64 {
        self.mean_pages() * page_size as f64
    }

    /// Mean read calls per lookup (1 for every lookup that reads a page).
    pub fn calls(&self) -> f64 {
        self.mean_of(|p| if p > 0 { 1.0 } else { 0.0 })
    }

    /// `E_x[T(bytes read)]` in nanoseconds.
    pub fn expected_ns(&self, profile: &StorageProfile, page_size: usize) -> f64 {
        self.mean_of(|p| {
            if p > 0 {
                profile.read_ns(p * page_size as u64)
            } else {
                0.0
            }
        })
    }
}

/// A built layer held in memory the way a lookup sees it (entries with each
/// page's successor word, or a decoded blob), for running the engine's search
/// step without storage.
#[derive(Debug)]
pub struct LayerView {
    kind: LayerKind,
    repr: Repr,
    count: u64,
    per_page: u64,
    pages: u64,
    page_size: usize,
    last_successor: u64,
    memory_bytes: u64,
}

#[derive(Debug)]
enum Repr {
    Entries(ResidentEntries),
    Blob {
        bytes: Vec<u8>,
        decoded: Box<Decoded>,
    },
    /// Step, zone or band entries in a temporary file, read in passes
    /// ([`edge_reads`] and the outline); no random access.
    Spilled(Spill),
}

impl LayerView {
    /// Lays out `layer` as [`write_layer`](crate::index::layered::write_layer)
    /// stores it in pages of `page_size` bytes. Takes the entries without
    /// copying them; [`LayerView::to_build`] gives the layer back.
    pub fn new(layer: LayerBuild, page_size: usize) -> Result<Self> {
        let LayerBuild {
            kind,
            flat,
            last_successor,
        } = layer;
        let width = kind.width();
        if width == 0 || page_size <= crate::format::page::PAGE_HEADER_LEN + width {
            return Err(Error::invalid("layer entries do not fit a page"));
        }
        let per_page = entries_per_page(page_size, width) as u64;
        let stored = (flat.len() / width) as u64;
        let pages = stored.div_ceil(per_page);
        if kind.is_blob() {
            let decoded = decode_blob(&kind, &flat, "tuned layer")?;
            let count = decoded.len() as u64;
            let memory_bytes = decoded.memory_bytes();
            return Ok(LayerView {
                kind,
                repr: Repr::Blob {
                    bytes: flat,
                    decoded: Box::new(decoded),
                },
                count,
                per_page,
                pages,
                page_size,
                last_successor,
                memory_bytes,
            });
        }
        let succ = kind.successor_field();
        let aux: Vec<u64> = (0..pages)
            .map(|p| {
                let last = ((p + 1) * per_page).min(stored) - 1;
                match succ {
                    Some(f) if last + 1 < stored => {
                        crate::format::bytes::get_u64(&flat, (last as usize + 1) * width + f)
                            .unwrap_or(last_successor)
                    }
                    Some(_) => last_successor,
                    None => 0,
                }
            })
            .collect();
        // What `resident=index` holds: entries back to back and one aux word per page.
        let memory_bytes = stored * width as u64 + pages * 8;
        Ok(LayerView {
            kind,
            repr: Repr::Entries(ResidentEntries {
                flat,
                aux,
                width,
                per_page,
                count: stored,
            }),
            count: stored,
            per_page,
            pages,
            page_size,
            last_successor,
            memory_bytes,
        })
    }

    /// [`LayerView::new`] of a layer whose entries may be spilled: a
    /// spilled band layer stays in its file.
    pub(crate) fn held(layer: HeldLayer, page_size: usize) -> Result<Self> {
        let HeldLayer {
            kind,
            held,
            last_successor,
        } = layer;
        let spill = match held {
            Held::Memory(flat) => {
                return LayerView::new(
                    LayerBuild {
                        kind,
                        flat,
                        last_successor,
                    },
                    page_size,
                );
            }
            Held::Spilled(s) => s,
        };
        let width = kind.width();
        if !matches!(
            kind,
            LayerKind::Band { .. } | LayerKind::Step | LayerKind::Zone { .. }
        ) || spill.width() != width
        {
            return Err(Error::invalid(
                "only step, zone and band layers are measured from a spill",
            ));
        }
        if page_size <= crate::format::page::PAGE_HEADER_LEN + width {
            return Err(Error::invalid("layer entries do not fit a page"));
        }
        let per_page = entries_per_page(page_size, width) as u64;
        let count = spill.count();
        let pages = count.div_ceil(per_page);
        Ok(LayerView {
            kind,
            repr: Repr::Spilled(spill),
            count,
            per_page,
            pages,
            page_size,
            last_successor,
            // As a resident layer of these entries would hold.
            memory_bytes: count * width as u64 + pages * 8,
        })
    }

    /// The layer as built (its entries copied, or read back from a spill).
    pub fn to_build(&self) -> Result<LayerBuild> {
        let flat = match &self.repr {
            Repr::Entries(e) => e.flat.clone(),
            Repr::Blob { bytes, .. } => bytes.clone(),
            Repr::Spilled(s) => s.read_all()?,
        };
        Ok(LayerBuild {
            kind: self.kind.clone(),
            flat,
            last_successor: self.last_successor,
        })
    }

    /// The file holding the entries of a spilled layer.
    pub(crate) fn spill(&self) -> Option<&Spill> {
        match &self.repr {
            Repr::Spilled(s) => Some(s),
            _ => None,
        }
    }

    /// The layer kind.
    pub fn kind(&self) -> &LayerKind {
        &self.kind
    }

    /// Positions the layer indexes (entries; decoded entries of a blob).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Entries per page of the layer file.
    pub fn per_page(&self) -> u64 {
        self.per_page
    }

    /// Pages of the layer file (without the header page).
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Bytes a root read of this layer reads: all its pages.
    pub fn read_bytes(&self) -> u64 {
        self.pages * self.page_size as u64
    }

    /// Bytes of entries (of the blob) as stored.
    pub fn stored_bytes(&self) -> u64 {
        match &self.repr {
            Repr::Entries(e) => e.flat.len() as u64,
            Repr::Blob { bytes, .. } => bytes.len() as u64,
            Repr::Spilled(s) => s.bytes(),
        }
    }

    /// Bytes the layer takes in memory when pinned (what
    /// [`Index::stats`](crate::index::Index::stats) reports for it).
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// Whether the layer is a compressed blob (read whole wherever it is).
    pub fn is_blob(&self) -> bool {
        self.kind.is_blob()
    }

    /// Entry keys (entry layers in memory only; empty for blobs and
    /// spilled layers, whose outline is [`Keys::Spill`]): the outline the
    /// next layer up is built over, positions being entry indexes.
    pub fn keys(&self) -> Vec<u64> {
        match &self.repr {
            Repr::Entries(e) => e
                .flat
                .chunks_exact(e.width)
                .map(|c| crate::format::bytes::get_u64(c, 0).unwrap_or(u64::MAX))
                .collect(),
            Repr::Blob { .. } | Repr::Spilled(_) => Vec::new(),
        }
    }

    /// The engine's search step over entries `[lo, hi)` of this layer (not
    /// of a spilled one: those are measured in passes, [`edge_reads`]).
    pub fn step(&self, key: u64, lo: u64, hi: u64, below: u64) -> Result<(u64, u64)> {
        match &self.repr {
            Repr::Entries(e) => step(&self.kind, Access::Entries(e), key, lo, hi, below),
            Repr::Blob { decoded, .. } => step(&self.kind, Access::Blob(decoded), key, lo, hi, below),
            Repr::Spilled(_) => Err(Error::Unsupported(
                "a spilled layer is read in passes, not searched".into(),
            )),
        }
    }

    /// Whether the range of a step finds the wanted entry of an index layer
    /// below exactly (no widening).
    pub fn exact(&self) -> bool {
        self.kind.exact()
    }

    /// Whether a step's result depends only on the entry the key falls in
    /// (step, zone, band and compressed layers), so it can be evaluated per
    /// edge rather than top-down.
    pub fn window_free(&self) -> bool {
        matches!(
            self.kind,
            LayerKind::Step
                | LayerKind::Zone { .. }
                | LayerKind::Band { .. }
                | LayerKind::CprBand { .. }
                | LayerKind::LecoZone { .. }
                | LayerKind::GapZone { .. }
        )
    }
}

/// What is below a layer, as far as reading it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Below {
    /// Positions (entries or records).
    pub count: u64,
    /// Positions per page.
    pub per_page: u64,
    /// Pages.
    pub pages: u64,
    /// An index layer (windows of approximate layers above are widened), not the data.
    pub index_layer: bool,
    /// A blob (read whole).
    pub blob: bool,
}

impl Below {
    /// The data run of `n` records, `per_page` to a page.
    pub(super) fn data(n: u64, per_page: u64) -> Self {
        Below {
            count: n,
            per_page: per_page.max(1),
            pages: n.div_ceil(per_page.max(1)),
            index_layer: false,
            blob: false,
        }
    }

    /// An index layer.
    pub(super) fn layer(v: &LayerView) -> Self {
        Below {
            count: v.count(),
            per_page: v.per_page().max(1),
            pages: v.pages(),
            index_layer: true,
            blob: v.is_blob(),
        }
    }

    /// The window of this level a lookup reads, given the range the layer
    /// above returned (exactly as the engine turns one into the other).
    #[inline]
    pub(super) fn window(&self, range: (u64, u64), above_exact: bool) -> (u64, u64) {
        let mut w = if self.index_layer && !above_exact {
            (
                range.0.saturating_sub(1),
                range.1.saturating_add(1).min(self.count),
            )
        } else {
            range
        };
        if self.index_layer && w.0 >= w.1 && self.count > 0 {
            let a = w.0.min(self.count - 1);
            w = (a, a + 1);
        }
        w
    }

    /// Pages a read of `window` touches (0 when the window is empty; all of
    /// them for a blob).
    #[inline]
    pub(super) fn pages_of(&self, window: (u64, u64)) -> u64 {
        let (lo, hi) = (window.0, window.1.min(self.count));
        if lo >= hi {
            0
        } else if self.blob {
            self.pages
        } else {
            (hi - 1) / self.per_page - lo / self.per_page + 1
        }
    }
}

/// Counts lookups per number of pages read.
#[derive(Default)]
struct PageCounter {
    small: Vec<u64>,
    large: std::collections::BTreeMap<u64, u64>,
    lookups: u64,
}

impl PageCounter {
    #[inline]
    fn add(&mut self, pages: u64, lookups: u64) {
        self.lookups += lookups;
        match self.small.get_mut(pages as usize) {
            Some(c) => *c += lookups,
            None if pages < 4096 => {
                self.small.resize(pages as usize + 1, 0);
                if let Some(c) = self.small.get_mut(pages as usize) {
                    *c += lookups;
                }
            }
            None => *self.large.entry(pages).or_insert(0) += lookups,
        }
    }

    fn finish(self) -> ReadHistogram {
        let mut counts: Vec<(u64, u64)> = self
            .small
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(p, &c)| (p as u64, c))
            .collect();
        counts.extend(self.large);
        ReadHistogram {
            counts,
            lookups: self.lookups,
        }
    }
}

/// Pages of `below` read per sampled lookup when `upper` (a window-free
/// layer over it) predicts the windows: the expected read cost of the edge
/// between them, `E_x[T(Δ(x; Θ))]`.
///
/// The entry each sampled key falls in is found by a merge walk (keys are
/// sorted), and the range is then computed with the engine's arithmetic
/// ([`step`] for every kind; for step and zone layers once per entry, as it
/// depends on the entry only; for band layers with [`BandEntry::predict`] and
/// [`band_range`], the body of `step`), so the windows are exactly those of a
/// lookup whose upper layers found the right entry — which a valid index
/// always does for existing keys.
pub(super) fn edge_reads(upper: &LayerView, below: &Below, sample: &QuerySample) -> Result<ReadHistogram> {
    if !upper.window_free() {
        return Err(Error::Unsupported(format!(
            "the edge cost of a {:?} layer depends on the layers above it; evaluate the whole stack",
            upper.kind()
        )));
    }
    let mut out = PageCounter::default();
    let exact = upper.exact();
    let keys = sample.keys();
    let mut walk = EntryWalk {
        kind: upper.kind(),
        keys,
        a: 0,
        prev: None,
        below,
        exact,
        out: &mut out,
    };
    let width = upper.kind().width();
    match &upper.repr {
        Repr::Entries(e) => {
            for (j, entry) in e.flat.chunks_exact(width).enumerate() {
                walk.push(j as u64, entry)?;
            }
        }
        Repr::Spilled(s) => s.for_each_block_while(0, |j0, block| {
            for (d, entry) in block.chunks_exact(width).enumerate() {
                walk.push(j0 + d as u64, entry)?;
            }
            Ok(true)
        })?,
        Repr::Blob { .. } => {
            for &x in keys {
                let r = upper.step(x, 0, upper.count(), below.count)?;
                out.add(below.pages_of(below.window(r, exact)), 1);
            }
            return Ok(out.finish());
        }
    }
    walk.finish(upper.last_successor)?;
    Ok(out.finish())
}

/// [`edge_reads`] of an entry layer, its entries handed over in order: the
/// sampled keys below an entry's key fall in the entry before it (the first
/// entry also takes the keys below its own), and each gets the range the
/// engine's search step gives for that entry ([`step`]'s arithmetic: a step
/// entry's start and its successor's, a zone's span, a band's prediction
/// with [`BandEntry::predict`] and [`band_range`]).
struct EntryWalk<'s> {
    kind: &'s LayerKind,
    keys: &'s [u64],
    /// Sampled keys counted so far.
    a: usize,
    /// The last entry handed over: its index and bytes.
    prev: Option<(u64, [u8; 24])>,
    below: &'s Below,
    exact: bool,
    out: &'s mut PageCounter,
}

impl EntryWalk<'_> {
    fn push(&mut self, j: u64, entry: &[u8]) -> Result<()> {
        let key = crate::format::bytes::get_u64(entry, 0).ok_or_else(|| missing(j))?;
        if let Some((p, bytes)) = self.prev {
            let rest = self.keys.get(self.a..).unwrap_or_default();
            let b = self.a + rest.partition_point(|&x| x < key);
            let next = match self.kind.successor_field() {
                Some(f) => crate::format::bytes::get_u64(entry, f).ok_or_else(|| missing(j))?,
                None => 0,
            };
            self.count(p, &bytes, b, next)?;
        }
        let mut bytes = [0u8; 24];
        bytes
            .get_mut(..entry.len())
            .ok_or_else(|| Error::invalid("entry wider than 24 bytes"))?
            .copy_from_slice(entry);
        self.prev = Some((j, bytes));
        Ok(())
    }

    /// Counts the sampled keys up to `b` in entry `j` (`entry`), whose
    /// successor value (the next entry's, or the layer's last) is `next`.
    fn count(&mut self, j: u64, entry: &[u8], b: usize, next: u64) -> Result<()> {
        let run = self.keys.get(self.a..b).unwrap_or_default();
        let below = self.below;
        let mut add =
            |r: (u64, u64), lookups: u64| self.out.add(below.pages_of(below.window(r, self.exact)), lookups);
        match *self.kind {
            LayerKind::Band {
                granule,
                zero_page,
                eps_lo,
                eps_hi,
            } => {
                let e = BandEntry::of_bytes(entry).ok_or_else(|| missing(j))?;
                let g = granule.max(1);
                let max_unit = below.count.div_ceil(g);
                for &x in run {
                    let p = e.predict(x, next, max_unit);
                    add(band_range(p, eps_lo, eps_hi, g, zero_page, below.count), 1);
                }
            }
            // Step and zone ranges depend on the entry only.
            LayerKind::Step => {
                let start = crate::format::bytes::get_u64(entry, 8).ok_or_else(|| missing(j))?;
                let (lo, hi) = (start.min(below.count), next.min(below.count));
                add((lo, hi.max(lo)), run.len() as u64);
            }
            LayerKind::Zone { span } => add(span_range(j, span, below.count), run.len() as u64),
            _ => {
                return Err(Error::Unsupported(format!(
                    "edge cost of a {:?} layer walked entry by entry",
                    self.kind
                )));
            }
        }
        self.a = b.max(self.a);
        Ok(())
    }

    fn finish(mut self, last_successor: u64) -> Result<()> {
        let n = self.keys.len();
        match self.prev {
            Some((j, bytes)) => self.count(j, &bytes, n, last_successor),
            None if self.a < n => Err(missing(0)),
            None => Ok(()),
        }
    }
}

fn missing(j: u64) -> Error {
    Error::corruption("tuned layer", 0, format!("entry {j} missing"))
}

/// The modelled reads of a whole stack: for every sampled lookup, what the
/// engine reads top-down. Exact for every layer kind (radix tables and RMI
/// steps that depend on the window included).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StackCost {
    /// Pages read from each layer per lookup, bottom-up (`layers[0]` is the
    /// layer over the data); the top one is the root read.
    pub layers: Vec<ReadHistogram>,
    /// Data pages read per lookup.
    pub data: ReadHistogram,
    /// Page size of every file.
    pub page_size: usize,
}

impl StackCost {
    /// Expected lookup time under `profile`, in nanoseconds (Eq. 6).
    pub fn expected_ns(&self, profile: &StorageProfile) -> f64 {
        self.layers
            .iter()
            .chain(std::iter::once(&self.data))
            .map(|h| h.expected_ns(profile, self.page_size))
            .sum()
    }

    /// Expected bytes read per lookup.
    pub fn mean_bytes(&self) -> f64 {
        self.layers
            .iter()
            .chain(std::iter::once(&self.data))
            .map(|h| h.mean_bytes(self.page_size))
            .sum()
    }

    /// Expected read calls per lookup.
    pub fn calls(&self) -> f64 {
        self.layers
            .iter()
            .chain(std::iter::once(&self.data))
            .map(ReadHistogram::calls)
            .sum()
    }
}

/// Simulates the lookups of `sample` on a stack of `views` (bottom-up) over a
/// data run of `n` records with `data_per_page` records per page, the top
/// `pinned` layers held in memory (they cost nothing). Replicates
/// [`LayeredIndex::predict`](crate::index::layered::LayeredIndex::predict)
/// and the all-at-once data read step by step.
pub(crate) fn evaluate_stack(
    n: u64,
    data_per_page: u64,
    views: &[LayerView],
    pinned: usize,
    sample: &QuerySample,
    page_size: usize,
) -> Result<StackCost> {
    let m = views.len();
    let data = Below::data(n, data_per_page);
    let mut layer_pages: Vec<Vec<u64>> = vec![Vec::with_capacity(sample.len()); m];
    let mut data_pages = Vec::with_capacity(sample.len());
    let mut scratch = vec![0u64; m];
    for &x in sample.keys() {
        let window = walk(n, data_per_page, views, pinned, x, &mut scratch)?;
        for (h, &p) in layer_pages.iter_mut().zip(&scratch) {
            h.push(p);
        }
        data_pages.push(data.pages_of(window));
    }
    Ok(StackCost {
        layers: layer_pages.into_iter().map(ReadHistogram::from_pages).collect(),
        data: ReadHistogram::from_pages(data_pages),
        page_size,
    })
}

/// The range of the data run a lookup of `x` reads through `views`
/// (bottom-up) over `n` records: what
/// [`LayeredIndex::predict`](crate::index::layered::LayeredIndex::predict)
/// returns, computed in memory.
#[cfg(test)]
pub(super) fn predict_range(n: u64, views: &[LayerView], x: u64) -> Result<(u64, u64)> {
    let mut scratch = vec![0u64; views.len()];
    walk(n, 1, views, 0, x, &mut scratch)
}

/// One lookup top-down: writes the pages read from each layer into
/// `pages` (0 for pinned layers) and returns the data window.
fn walk(
    n: u64,
    data_per_page: u64,
    views: &[LayerView],
    pinned: usize,
    x: u64,
    pages: &mut [u64],
) -> Result<(u64, u64)> {
    let m = views.len();
    let data = Below::data(n, data_per_page);
    let Some(top) = views.last() else {
        return Ok((0, n));
    };
    let mut window = (0u64, top.count());
    for l in (0..m).rev() {
        let (Some(layer), Some(read)) = (views.get(l), pages.get_mut(l)) else {
            return Err(Error::invalid("layer index out of range"));
        };
        let below = match l.checked_sub(1) {
            None => data,
            Some(b) => views
                .get(b)
                .map(Below::layer)
                .ok_or_else(|| Error::invalid("layer index out of range"))?,
        };
        let (lo, hi) = window;
        let range = if lo >= hi {
            *read = 0;
            (lo.min(below.count), lo.min(below.count))
        } else {
            let resident = l + pinned.min(m) >= m;
            *read = if resident {
                0
            } else {
                Below::layer(layer).pages_of(window)
            };
            layer.step(x, lo, hi, below.count)?
        };
        window = if l > 0 {
            below.window(range, layer.exact())
        } else {
            range
        };
    }
    Ok(window)
}
