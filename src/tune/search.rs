//! AirTune (AirIndex §5.1, Algorithm 2): a guided graph search over layers.
//!
//! A vertex is a layer (the origin is the data run); an edge is a layer
//! builder stacking a new layer on it. On each vertex the tuner builds a
//! candidate with every builder over the granularity grid (in parallel),
//! measures each candidate's expected read cost of the vertex (the edge cost,
//! [`edge_reads`]) and keeps the top `k` by edge cost plus the step index
//! complexity `τ̂` of the candidate (Eq. 9, 12); it recurses on those (in
//! parallel) and stops at a vertex when even an ideal layer on top — one page
//! of root, one page read of the vertex — would not be cheaper than reading
//! the vertex whole. Every explored path is a complete stack; the cheapest
//! one under the cost model wins.
//!
//! Because a window-free layer's edge cost does not depend on the layers
//! above it (every valid index finds the right entry), a stack's cost is the
//! root read plus the sum of its edge costs, which is what makes the search
//! decompose. The tuner also evaluates *fixed* designs — every builder at
//! every granularity stacked on itself, at every height — and never returns
//! a stack costlier than the best of them.
//!
//! With a memory budget, the top layers whose memory fits the budget are
//! pinned (they cost nothing to read) and the stack minimising the cost of
//! the rest wins.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use serde::Serialize;
use serde_json::{Value, json};

use super::builders::{Builder, Family, Input, Outline, Param, Shared, granularity_grid, prepare};
use super::complexity::step_index_complexity;
use super::cost::{Below, LayerView, QuerySample, ReadHistogram, edge_reads};
use crate::index::layered::{Keys, LayerBuild, LayerKind};
use crate::storage::StorageProfile;
use crate::{Error, Result};

/// Default number of sampled lookups of the cost model.
pub const DEFAULT_SAMPLES: usize = 1 << 16;
/// Seed of the query sample.
pub const SAMPLE_SEED: u64 = 0x5eed_a1f7;

/// What to tune for.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// The storage profile `T`.
    pub profile: StorageProfile,
    /// Candidates kept per vertex (AirIndex's `k`).
    pub top_k: usize,
    /// Bytes of memory for pinned top layers; 0 = nothing pinned (the
    /// fastest cold index).
    pub memory_budget: u64,
    /// Builder families to use.
    pub families: Vec<Family>,
    /// Smallest granularity (bytes).
    pub lambda_low: u64,
    /// Largest granularity (bytes).
    pub lambda_high: u64,
    /// Granularity grid base `1 + ε`.
    pub grid_base: f64,
    /// Most index layers.
    pub max_layers: usize,
    /// Worker threads (0 = the global rayon pool).
    pub threads: usize,
}

impl TuneOptions {
    /// Defaults (k = 5, λ from 256 B to 1 MiB in powers of 2, every builder)
    /// for `profile`.
    pub fn new(profile: StorageProfile) -> Self {
        TuneOptions {
            profile,
            top_k: 5,
            memory_budget: 0,
            families: Family::ALL.to_vec(),
            lambda_low: 256,
            lambda_high: 1 << 20,
            grid_base: 2.0,
            max_layers: 6,
            threads: 0,
        }
    }
}

/// A candidate layer: built, measured, and the outline for the layer above.
#[derive(Debug)]
pub struct Candidate {
    /// Builders from the data up to this layer.
    pub path: Vec<Builder>,
    /// The builder of this layer.
    pub builder: Builder,
    /// Its parameter over the layer below.
    pub param: Param,
    /// The layer.
    pub view: LayerView,
    /// Pages of the layer below read per sampled lookup.
    pub reads_below: ReadHistogram,
    /// Entry keys, the outline the next layer is built over (empty for
    /// blobs, and for spilled layers: [`Candidate::outline_keys`]).
    outline: Vec<u64>,
}

impl Candidate {
    /// The outline the next layer is built over: the entry keys in memory,
    /// or read from the layer's spill.
    fn outline_keys(&self) -> Keys<'_> {
        match self.view.spill() {
            Some(s) => Keys::Spill(s),
            None => Keys::Slice(&self.outline),
        }
    }
}

/// One vertex of the search: the data run or a candidate layer.
#[derive(Clone, Copy)]
enum Vertex<'c> {
    Data,
    Layer(&'c Arc<Candidate>),
}

/// A complete stack, bottom-up (empty: no index, read the data whole).
type Stack = Vec<Arc<Candidate>>;

/// Builders (indexes) sharing one input (`None`: a builder alone).
type SharedGroup = (Option<Shared>, Vec<usize>);

/// Candidates by builder path (`None`: the builder did not shrink the layer).
type Memo = HashMap<Vec<Builder>, Option<Arc<Candidate>>>;

/// Counters of one tuning run.
#[derive(Debug, Default)]
struct Counters {
    vertices: AtomicU64,
    candidates: AtomicU64,
}

/// The candidates over the data as the searches and fixed designs need them
/// ([`Tuner::data_level`]).
struct DataLevel {
    /// The top `k` candidates of each search, best first.
    tops: Vec<Vec<Arc<Candidate>>>,
    /// Every fixed design evaluated, the empty stack first.
    fixed: Vec<FixedDesign>,
    /// The best fixed stack (the empty one at worst).
    best_fixed: Option<(StackEval, Stack)>,
}

/// A fixed (homogeneous) design the tuner evaluated: one builder at one
/// granularity stacked `layers` high.
#[derive(Debug, Clone, Serialize)]
pub struct FixedDesign {
    /// Builder family.
    pub builder: Family,
    /// Granularity in bytes.
    pub lambda: u64,
    /// Index layers.
    pub layers: usize,
    /// Modelled lookup time (ns) under the profile and budget.
    pub cost_ns: f64,
    /// Expected bytes read per lookup.
    pub read_bytes: f64,
}

/// One layer of a tuned design.
#[derive(Debug, Clone, Serialize)]
pub struct TunedLayer {
    /// Builder family.
    pub builder: Family,
    /// Granularity in bytes.
    pub lambda: u64,
    /// The builder's parameter over the layer below.
    pub param: Param,
    /// The layer kind.
    pub kind: LayerKind,
    /// Entries (decoded entries of a blob).
    pub entries: u64,
    /// Bytes of entries (of the blob).
    pub bytes: u64,
    /// Pages of its file.
    pub pages: u64,
    /// Bytes it takes when pinned in memory.
    pub memory_bytes: u64,
    /// Whether it is pinned (memory-budget mode).
    pub resident: bool,
    /// Expected pages of the layer below it reads per lookup.
    pub reads_below_pages: f64,
    /// Expected bytes of the layer below it reads per lookup.
    pub reads_below_bytes: f64,
    /// Modelled time (ns) of that read, 0 if the layer below is pinned.
    pub reads_below_ns: f64,
}

/// The result of tuning: the chosen stack and how it was chosen.
#[derive(Debug, Clone)]
pub struct Tuned {
    /// The profile tuned for.
    pub profile: StorageProfile,
    /// Candidates kept per vertex.
    pub top_k: usize,
    /// Memory budget (0 = none).
    pub memory_budget: u64,
    /// Layers bottom-up.
    pub layers: Vec<TunedLayer>,
    /// How many top layers are pinned.
    pub resident_layers: usize,
    /// Modelled time (ns) of the root read (0 when pinned or no index).
    pub root_ns: f64,
    /// Modelled expected lookup time (ns): root read + every layer's read + data read.
    pub cost_ns: f64,
    /// Expected bytes read per lookup.
    pub read_bytes: f64,
    /// Whether the winner came from the search or from the fixed designs.
    pub source: &'static str,
    /// Cost of the best stack the search found.
    pub search_cost_ns: f64,
    /// The fixed designs evaluated.
    pub fixed: Vec<FixedDesign>,
    /// Vertices expanded.
    pub vertices: u64,
    /// Candidate layers built (memoised builds not counted twice).
    pub candidates_built: u64,
    /// Complete stacks compared.
    pub stacks: usize,
    /// Sampled lookups of the cost model.
    pub samples: usize,
    /// Page size.
    pub page_size: usize,
    /// Records.
    pub n: u64,
    stack: Stack,
}

/// The AirTune search over one key set; builds are memoised, so tuning the
/// same keys for several profiles (a design map) builds every layer once.
pub struct Tuner<'a> {
    keys: Keys<'a>,
    n: u64,
    data_per_page: u64,
    page_size: usize,
    sample: QuerySample,
    /// Every candidate built, by path (`None`: a lean tuner keeps none).
    memo: Option<Mutex<Memo>>,
    built: AtomicU64,
    /// Bytes of a band candidate's entries past which they are spilled.
    spill: usize,
}

/// Bytes of a candidate band layer's entries held in memory; larger ones
/// are spilled to a temporary file and measured from there. Small in unit
/// tests, so that their searches spill.
pub(super) const SPILL_BYTES: usize = if cfg!(test) { 4096 } else { 4 << 20 };

impl std::fmt::Debug for Tuner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tuner")
            .field("n", &self.n)
            .field("samples", &self.sample.len())
            .finish()
    }
}

/// Cost breakdown of one stack.
struct StackEval {
    total: f64,
    root: f64,
    resident: usize,
    /// Charged read cost of the level below each layer.
    edges: Vec<f64>,
    bytes: f64,
}

impl<'a> Tuner<'a> {
    /// A tuner over sorted, strictly increasing `keys` stored `data_per_page`
    /// records to a page of `page_size` bytes, with a cost model of
    /// `samples` lookups.
    pub fn new(keys: &'a [u64], data_per_page: usize, page_size: usize, samples: usize) -> Result<Self> {
        Tuner::over(Keys::Slice(keys), data_per_page, page_size, samples)
    }

    /// [`Tuner::new`] over keys in memory or in a data run (sorted by its
    /// writer): the data-level builders and the query sample read the run
    /// in passes, so the tuner never holds its keys.
    pub fn over(keys: Keys<'a>, data_per_page: usize, page_size: usize, samples: usize) -> Result<Self> {
        crate::format::page::check_page_size(page_size)?;
        if data_per_page == 0 {
            return Err(Error::invalid("records per page must be positive"));
        }
        if samples == 0 {
            return Err(Error::invalid("the cost model needs at least one sampled lookup"));
        }
        if let Keys::Slice(k) = keys {
            super::check_keys(k)?;
        }
        Ok(Tuner {
            keys,
            n: keys.len() as u64,
            data_per_page: data_per_page as u64,
            page_size,
            sample: QuerySample::from_keys(keys, samples, SAMPLE_SEED)?,
            memo: Some(Mutex::new(HashMap::new())),
            built: AtomicU64::new(0),
            spill: SPILL_BYTES,
        })
    }

    /// Spills the entries of candidate band layers past `bytes` (default
    /// 4 MiB; `usize::MAX`: never) to temporary files (`TMPDIR`), removed
    /// when the candidates are dropped: the finest bands over the data are
    /// nearly as large as the data's keys. The design is the same.
    pub fn spill_above(mut self, bytes: usize) -> Self {
        self.spill = bytes;
        self
    }

    /// The query sample of the cost model.
    pub fn sample(&self) -> &QuerySample {
        &self.sample
    }

    /// A tuner that keeps no candidate it built beyond what the search can
    /// still pick: over the data only the top `k` of each search and the
    /// layers of the best fixed design so far, above a vertex only the
    /// candidates being expanded. It tunes to the same design but builds
    /// again for every [`Tuner::tune`] (a design map should keep the memo).
    /// What `air`'s recipe uses: its memory is then a few candidate layers,
    /// not every one of the grid.
    pub fn lean(mut self) -> Self {
        self.memo = None;
        self
    }

    /// Tunes for `opts`: the cheapest stack found by AirTune or among the
    /// fixed designs. Deterministic: the same keys and options give the same
    /// design whatever the number of threads.
    pub fn tune(&self, opts: &TuneOptions) -> Result<Tuned> {
        if opts.top_k == 0 {
            return Err(Error::invalid("top_k must be at least 1"));
        }
        if opts.families.is_empty() {
            return Err(Error::invalid("no layer builder to tune with"));
        }
        granularity_grid(opts.lambda_low, opts.lambda_high, opts.grid_base)?;
        if opts.threads > 0 {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(opts.threads)
                .build()
                .map_err(|e| Error::invalid(format!("thread pool: {e}")))?;
            pool.install(|| self.tune_here(opts))
        } else {
            self.tune_here(opts)
        }
    }

    fn tune_here(&self, opts: &TuneOptions) -> Result<Tuned> {
        let counters = Counters::default();
        let built_before = self.built.load(Relaxed);
        let grid = granularity_grid(opts.lambda_low, opts.lambda_high, opts.grid_base)?;
        // The searches (with a budget, the fastest cold stack competes too:
        // pinning its top layers can only make it cheaper, so a budget never
        // makes the result slower) and the fixed designs all start from the
        // candidates over the data, built once.
        let cold = TuneOptions {
            memory_budget: 0,
            ..opts.clone()
        };
        let modes: Vec<&TuneOptions> = if opts.memory_budget > 0 {
            vec![opts, &cold]
        } else {
            vec![opts]
        };
        let level = self.data_level(opts, &modes, &grid, &counters)?;
        let mut stacks: Vec<Stack> = Vec::new();
        for (m, tops) in modes.iter().zip(level.tops) {
            stacks.extend(self.search_from(Vertex::Data, 0, Some(tops), m, &grid, &counters)?);
        }
        let mut best: Option<(StackEval, &Stack)> = None;
        for s in &stacks {
            let e = self.evaluate(s, opts);
            if best.as_ref().is_none_or(|(b, bs)| better(&e, s, b, bs)) {
                best = Some((e, s));
            }
        }
        let (search_eval, search_stack) = best.ok_or_else(|| Error::invalid("the search found no stack"))?;
        let search_cost = search_eval.total;
        let fixed = level.fixed;
        let stacks_compared = stacks.len() + fixed.len();
        let mut winner = (search_eval, search_stack.clone(), "search");
        if let Some((e, s)) = level.best_fixed {
            if better(&e, &s, &winner.0, &winner.1) {
                winner = (e, s, "fixed");
            }
        }
        let (eval, stack, source) = winner;
        let m = stack.len();
        let layers = stack
            .iter()
            .enumerate()
            .map(|(l, c)| TunedLayer {
                builder: c.builder.family,
                lambda: c.builder.lambda,
                param: c.param,
                kind: c.view.kind().clone(),
                entries: c.view.count(),
                bytes: c.view.stored_bytes(),
                pages: c.view.pages(),
                memory_bytes: c.view.memory_bytes(),
                resident: l + eval.resident >= m,
                reads_below_pages: c.reads_below.mean_pages(),
                reads_below_bytes: c.reads_below.mean_bytes(self.page_size),
                reads_below_ns: eval.edges.get(l).copied().unwrap_or(0.0),
            })
            .collect();
        Ok(Tuned {
            profile: opts.profile.clone(),
            top_k: opts.top_k,
            memory_budget: opts.memory_budget,
            layers,
            resident_layers: eval.resident,
            root_ns: eval.root,
            cost_ns: eval.total,
            read_bytes: eval.bytes,
            source,
            search_cost_ns: search_cost,
            fixed,
            vertices: counters.vertices.load(Relaxed),
            candidates_built: self.built.load(Relaxed) - built_before,
            stacks: stacks_compared,
            samples: self.sample.len(),
            page_size: self.page_size,
            n: self.n,
            stack,
        })
    }

    fn data_below(&self) -> Below {
        Below::data(self.n, self.data_per_page)
    }

    /// `T` of one read of `pages` pages (0 pages: no read).
    fn pages_ns(&self, pages: u64, profile: &StorageProfile) -> f64 {
        if pages == 0 {
            0.0
        } else {
            profile.read_ns(pages * self.page_size as u64)
        }
    }

    /// `T` of reading `v` whole (as the root).
    fn root_ns(&self, v: Vertex<'_>, profile: &StorageProfile) -> f64 {
        let pages = match v {
            Vertex::Data => self.data_below().pages,
            Vertex::Layer(c) => c.view.pages(),
        };
        self.pages_ns(pages, profile)
    }

    /// Whether no layer on top of `v` can pay off (Algorithm 2, line 1).
    fn stop(&self, v: Vertex<'_>, depth: usize, opts: &TuneOptions) -> bool {
        if depth >= opts.max_layers {
            return true;
        }
        if let Vertex::Layer(c) = v {
            if c.view.is_blob() || c.outline_keys().len() < 2 {
                return true;
            }
            if opts.memory_budget > 0 && c.view.memory_bytes() <= opts.memory_budget {
                // Pinned as the root it costs nothing: nothing above can be cheaper.
                return true;
            }
        }
        // An ideal layer on top: a one-page root, one page of `v` per lookup.
        let ideal = 2.0 * opts.profile.read_ns(self.page_size as u64);
        self.root_ns(v, &opts.profile) <= ideal
    }

    fn outline<'c>(&'c self, v: Vertex<'c>) -> Outline<'c> {
        match v {
            Vertex::Data => Outline {
                keys: self.keys,
                width: crate::format::RECORD_LEN,
                per_page: self.data_per_page,
                is_data: true,
            },
            Vertex::Layer(c) => Outline {
                keys: c.outline_keys(),
                width: c.view.kind().width(),
                per_page: c.view.per_page(),
                is_data: false,
            },
        }
    }

    /// Every applicable builder over `v`, one per distinct parameter (the
    /// smallest granularity giving it), in a fixed order.
    fn builders(&self, v: Vertex<'_>, families: &[Family], grid: &[u64]) -> Vec<(Builder, Param)> {
        let o = self.outline(v);
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for &family in families {
            for &lambda in grid {
                let b = Builder { family, lambda };
                if let Some(p) = b.param(&o, self.page_size) {
                    if seen.insert((family, p)) {
                        out.push((b, p));
                    }
                }
            }
        }
        out
    }

    /// Candidates of `builders` over `v`, in the order given.
    fn candidates(
        &self,
        v: Vertex<'_>,
        builders: &[(Builder, Param)],
    ) -> Result<Vec<Option<Arc<Candidate>>>> {
        self.each_candidate(v, builders, |_, c| Ok(c))
    }

    /// `each(i, candidate)` for the candidate of every builder `i` over `v`
    /// as soon as it is built; the results in the order of `builders`.
    /// Builders that start from the same input (a segmentation, a span's
    /// piece bounds) are built in one task that computes it once; tasks run
    /// in parallel.
    fn each_candidate<T: Send>(
        &self,
        v: Vertex<'_>,
        builders: &[(Builder, Param)],
        each: impl Fn(usize, Option<Arc<Candidate>>) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        let o = self.outline(v);
        // Builders by the input they share (None: their own group).
        let mut groups: Vec<SharedGroup> = Vec::new();
        for (i, &(b, p)) in builders.iter().enumerate() {
            let need = b.shared(p, &o);
            match groups.iter_mut().find(|g| need.is_some() && g.0 == need) {
                Some(g) => g.1.push(i),
                None => groups.push((need, vec![i])),
            }
        }
        let done: Vec<Result<Vec<(usize, T)>>> = groups
            .par_iter()
            .map(|(_, members)| {
                let cell: std::cell::RefCell<Option<Arc<Input>>> = std::cell::RefCell::new(None);
                let provider = |need: Shared| -> Result<Arc<Input>> {
                    if let Some(x) = cell.borrow().as_ref() {
                        return Ok(x.clone());
                    }
                    let x = Arc::new(prepare(o.keys, need, self.spill)?);
                    *cell.borrow_mut() = Some(x.clone());
                    Ok(x)
                };
                members
                    .iter()
                    .map(|&i| {
                        let (b, p) = builders
                            .get(i)
                            .copied()
                            .ok_or_else(|| Error::invalid("builder index"))?;
                        Ok((i, each(i, self.candidate(v, b, p, &provider)?)?))
                    })
                    .collect()
            })
            .collect();
        let mut out: Vec<(usize, T)> = Vec::with_capacity(builders.len());
        for g in done {
            out.extend(g?);
        }
        out.sort_by_key(|x| x.0);
        Ok(out.into_iter().map(|x| x.1).collect())
    }

    /// The candidate built by `b` over `v` (memoised), or `None` when it
    /// does not shrink the layer.
    fn candidate(
        &self,
        v: Vertex<'_>,
        b: Builder,
        p: Param,
        inputs: &dyn Fn(Shared) -> Result<Arc<Input>>,
    ) -> Result<Option<Arc<Candidate>>> {
        let mut path = match v {
            Vertex::Data => Vec::new(),
            Vertex::Layer(c) => c.path.clone(),
        };
        path.push(b);
        if let Some(memo) = &self.memo {
            if let Some(hit) = memo.lock().map_err(|_| poisoned())?.get(&path) {
                return Ok(hit.clone());
            }
        }
        let o = self.outline(v);
        let layer = b.build_with(&o, self.page_size, inputs, self.spill)?;
        let view = LayerView::held(layer, self.page_size)?;
        self.built.fetch_add(1, Relaxed);
        let below = match v {
            Vertex::Data => self.data_below(),
            Vertex::Layer(c) => Below::layer(&c.view),
        };
        let shrinks = view.count() >= 1 && view.count() < below.count;
        let cand = if shrinks {
            let reads_below = edge_reads(&view, &below, &self.sample)?;
            let outline = view.keys();
            Some(Arc::new(Candidate {
                path: path.clone(),
                builder: b,
                param: p,
                view,
                reads_below,
                outline,
            }))
        } else {
            None
        };
        if let Some(memo) = &self.memo {
            memo.lock().map_err(|_| poisoned())?.insert(path, cand.clone());
        }
        Ok(cand)
    }

    /// Edge cost plus the remaining-work estimate (Eq. 9): the exact root
    /// read for a root-only layer, 0 for a layer that fits the memory budget,
    /// else `τ̂` of the layer.
    fn score(&self, c: &Candidate, opts: &TuneOptions) -> f64 {
        let edge = c.reads_below.expected_ns(&opts.profile, self.page_size);
        let rest = if opts.memory_budget > 0 && c.view.memory_bytes() <= opts.memory_budget {
            0.0
        } else if c.view.is_blob() {
            self.pages_ns(c.view.pages(), &opts.profile)
        } else {
            step_index_complexity(c.view.stored_bytes(), &opts.profile, self.page_size).cost_ns
        };
        edge + rest
    }

    /// Algorithm 2 from vertex `v` (at `depth` layers above the data):
    /// every explored stack above `v`, bottom-up (the empty stack: `v` is
    /// the root). Without a memory budget only the cheapest is kept (costs
    /// above `v` do not depend on what is below it).
    fn search(
        &self,
        v: Vertex<'_>,
        depth: usize,
        opts: &TuneOptions,
        grid: &[u64],
        counters: &Counters,
    ) -> Result<Vec<Stack>> {
        self.search_from(v, depth, None, opts, grid, counters)
    }

    /// [`Tuner::search`] with the top candidates over `v` given (`tops`, as
    /// [`Tuner::offer`] picks them) or built here (`None`).
    fn search_from(
        &self,
        v: Vertex<'_>,
        depth: usize,
        tops: Option<Vec<Arc<Candidate>>>,
        opts: &TuneOptions,
        grid: &[u64],
        counters: &Counters,
    ) -> Result<Vec<Stack>> {
        let mut out: Vec<Stack> = vec![Vec::new()];
        if self.stop(v, depth, opts) {
            return Ok(out);
        }
        counters.vertices.fetch_add(1, Relaxed);
        let cands = match tops {
            Some(t) => t,
            None => {
                let builders = self.builders(v, &opts.families, grid);
                let mut top = Vec::new();
                for (i, c) in self.candidates(v, &builders)?.into_iter().enumerate() {
                    if let Some(c) = c {
                        counters.candidates.fetch_add(1, Relaxed);
                        self.offer(&mut top, c, i, opts);
                    }
                }
                top.into_iter().map(|t| t.2).collect()
            }
        };
        let subs: Vec<Result<Vec<Stack>>> = cands
            .par_iter()
            .map(|c| {
                let above = self.search(Vertex::Layer(c), depth + 1, opts, grid, counters)?;
                Ok(above
                    .into_iter()
                    .map(|s| std::iter::once(c.clone()).chain(s).collect())
                    .collect())
            })
            .collect();
        for s in subs {
            out.extend(s?);
        }
        if opts.memory_budget == 0 {
            // Keep the cheapest stack above `v`: root read + edges above `v`.
            let cost = |s: &Stack| -> f64 {
                let root = s.last().map_or(self.root_ns(v, &opts.profile), |c| {
                    self.root_ns(Vertex::Layer(c), &opts.profile)
                });
                root + s
                    .iter()
                    .map(|c| c.reads_below.expected_ns(&opts.profile, self.page_size))
                    .sum::<f64>()
            };
            let mut best: Option<(f64, Stack)> = None;
            for s in out {
                let c = cost(&s);
                if best
                    .as_ref()
                    .is_none_or(|(bc, bs)| c < *bc || (c == *bc && s.len() < bs.len()))
                {
                    best = Some((c, s));
                }
            }
            return Ok(best.map(|b| vec![b.1]).unwrap_or_default());
        }
        Ok(out)
    }

    /// Offers candidate `c` (builder `i` of its vertex) to `top`, the
    /// `top_k` best by score then builder (Algorithm 2's `k`), in order.
    fn offer(
        &self,
        top: &mut Vec<(f64, usize, Arc<Candidate>)>,
        c: Arc<Candidate>,
        i: usize,
        opts: &TuneOptions,
    ) {
        let key = (self.score(&c, opts), i);
        let at = top.partition_point(|t| t.0.total_cmp(&key.0).then(t.1.cmp(&key.1)).is_lt());
        if at < opts.top_k {
            top.insert(at, (key.0, i, c));
            top.truncate(opts.top_k);
        }
    }

    /// Every candidate over the data, built once and kept only while a
    /// search or the fixed designs can still pick it: the top `k` of each
    /// of `modes` (the searches' options) and, for every builder, its
    /// fixed designs — the builder stacked on itself at every height until
    /// its top fits a page (or stops shrinking) — evaluated under `opts`
    /// as they are built, of which only the best stack is kept.
    fn data_level(
        &self,
        opts: &TuneOptions,
        modes: &[&TuneOptions],
        grid: &[u64],
        counters: &Counters,
    ) -> Result<DataLevel> {
        let firsts = self.builders(Vertex::Data, &opts.families, grid);
        type Top = Vec<(f64, usize, Arc<Candidate>)>;
        let tops: Mutex<Vec<Top>> = Mutex::new(vec![Vec::new(); modes.len()]);
        // The best fixed stack so far (the empty one first): `better` is a
        // strict order on distinct stacks, so the order builders finish in
        // does not change which is kept; the others' layers are dropped.
        let none = self.evaluate(&Vec::new(), opts);
        let mut fixed = vec![FixedDesign {
            builder: Family::GStep,
            lambda: 0,
            layers: 0,
            cost_ns: none.total,
            read_bytes: none.bytes,
        }];
        let best_fixed: Mutex<(StackEval, Stack)> = Mutex::new((none, Vec::new()));
        // Each builder's fixed designs.
        let designs = self.each_candidate(Vertex::Data, &firsts, |i, c| {
            let Some(c) = c else {
                return Ok(Vec::new());
            };
            let b = c.builder;
            counters.candidates.fetch_add(1, Relaxed);
            let mut designs = Vec::new();
            for s in self.fixed_chain(b, c.clone(), opts, counters)? {
                let e = self.evaluate(&s, opts);
                designs.push(FixedDesign {
                    builder: b.family,
                    lambda: b.lambda,
                    layers: s.len(),
                    cost_ns: e.total,
                    read_bytes: e.bytes,
                });
                let mut best = best_fixed.lock().map_err(|_| poisoned())?;
                if better(&e, &s, &best.0, &best.1) {
                    *best = (e, s);
                }
            }
            let mut t = tops.lock().map_err(|_| poisoned())?;
            for (top, m) in t.iter_mut().zip(modes) {
                self.offer(top, c.clone(), i, m);
            }
            Ok(designs)
        })?;
        fixed.extend(designs.into_iter().flatten());
        let best_fixed = Some(best_fixed.into_inner().map_err(|_| poisoned())?);
        let tops = tops
            .into_inner()
            .map_err(|_| poisoned())?
            .into_iter()
            .map(|t| t.into_iter().map(|x| x.2).collect())
            .collect();
        Ok(DataLevel {
            tops,
            fixed,
            best_fixed,
        })
    }

    /// The fixed designs of builder `b` from its layer over the data,
    /// `bottom`: `b` stacked on itself, one stack per height, until the top
    /// fits a page or stops shrinking (or `max_layers`).
    fn fixed_chain(
        &self,
        b: Builder,
        bottom: Arc<Candidate>,
        opts: &TuneOptions,
        counters: &Counters,
    ) -> Result<Vec<Stack>> {
        let mut out = Vec::new();
        let mut top = bottom;
        let mut stack = vec![top.clone()];
        loop {
            out.push(stack.clone());
            if stack.len() >= opts.max_layers.max(1)
                || top.view.is_blob()
                || top.view.pages() <= 1
                || top.outline_keys().len() < 2
            {
                break;
            }
            let o = self.outline(Vertex::Layer(&top));
            let Some(p) = b.param(&o, self.page_size) else {
                break;
            };
            let own = |need| Ok(Arc::new(prepare(top.outline_keys(), need, self.spill)?));
            let Some(next) = self.candidate(Vertex::Layer(&top), b, p, &own)? else {
                break;
            };
            counters.candidates.fetch_add(1, Relaxed);
            stack.push(next.clone());
            top = next;
        }
        Ok(out)
    }

    /// The cost of a complete stack (Eq. 6) with the top layers that fit
    /// the memory budget pinned.
    fn evaluate(&self, s: &Stack, opts: &TuneOptions) -> StackEval {
        let prof = &opts.profile;
        let ps = self.page_size;
        let Some(top) = s.last() else {
            let data = self.data_below();
            return StackEval {
                total: self.root_ns(Vertex::Data, prof),
                root: 0.0,
                resident: 0,
                edges: Vec::new(),
                bytes: (data.pages * ps as u64) as f64,
            };
        };
        let m = s.len();
        let mut resident = 0;
        let mut used = 0u64;
        for c in s.iter().rev() {
            used = used.saturating_add(c.view.memory_bytes());
            if opts.memory_budget == 0 || used > opts.memory_budget {
                break;
            }
            resident += 1;
        }
        let pinned = |l: usize| l + resident >= m;
        let (root, mut bytes) = if pinned(m - 1) {
            (0.0, 0.0)
        } else {
            (
                self.root_ns(Vertex::Layer(top), prof),
                (top.view.pages() * ps as u64) as f64,
            )
        };
        let mut edges = Vec::with_capacity(m);
        for (l, c) in s.iter().enumerate() {
            // The read of the level below layer l: free if that level is pinned.
            let below_pinned = l > 0 && pinned(l - 1);
            if below_pinned {
                edges.push(0.0);
            } else {
                edges.push(c.reads_below.expected_ns(prof, ps));
                bytes += c.reads_below.mean_bytes(ps);
            }
        }
        StackEval {
            total: root + edges.iter().sum::<f64>(),
            root,
            resident,
            edges,
            bytes,
        }
    }
}

/// Whether stack `a` (cost `ea`) beats stack `b`: cheaper, then fewer
/// layers, then the smaller builder path (a deterministic order).
fn better(ea: &StackEval, a: &Stack, eb: &StackEval, b: &Stack) -> bool {
    match ea.total.total_cmp(&eb.total) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal => {
            let pa: Vec<Builder> = a.iter().map(|c| c.builder).collect();
            let pb: Vec<Builder> = b.iter().map(|c| c.builder).collect();
            (a.len(), pa) < (b.len(), pb)
        }
    }
}

fn poisoned() -> Error {
    Error::invalid("a tuning thread panicked")
}

impl Tuned {
    /// The chosen layers, bottom-up, ready to be written (spilled ones
    /// read back).
    pub fn layer_builds(&self) -> Result<Vec<LayerBuild>> {
        self.stack.iter().map(|c| c.view.to_build()).collect()
    }

    /// Models (segments) of the band layers, `None` without a band layer.
    pub fn models(&self) -> Option<u64> {
        let bands: Vec<&TunedLayer> = self
            .layers
            .iter()
            .filter(|l| matches!(l.kind, LayerKind::Band { .. } | LayerKind::CprBand { .. }))
            .collect();
        (!bands.is_empty()).then(|| bands.iter().map(|l| l.entries).sum())
    }

    /// The best fixed design evaluated.
    pub fn best_fixed(&self) -> Option<&FixedDesign> {
        self.fixed
            .iter()
            .min_by(|a, b| a.cost_ns.total_cmp(&b.cost_ns).then(a.layers.cmp(&b.layers)))
    }

    /// A JSON description for the manifest: profile, every layer (builder,
    /// granularity, size, expected read of the layer below and its modelled
    /// time), the root read, the modelled cost, and how the search went.
    /// Deterministic (no timings).
    pub fn notes(&self) -> Value {
        let mut v = json!({
            "tuner": "airtune",
            "profile": {
                "name": self.profile.name,
                "latency_us": self.profile.latency_us(),
                "bandwidth_mb_s": self.profile.bandwidth_mb_s(),
            },
            "top_k": self.top_k,
            "memory_budget": self.memory_budget,
            "layers": self.layers,
            "root": {
                "pages": self.layers.last().map_or(0, |l| l.pages),
                "bytes": self.layers.last().map_or(0, |l| l.pages * self.page_size as u64),
                "modelled_ns": self.root_ns,
            },
            "modelled_ns": self.cost_ns,
            "expected_read_bytes": self.read_bytes,
            "source": self.source,
            "search_modelled_ns": self.search_cost_ns,
            "best_fixed": self.best_fixed(),
            "fixed_designs": self.fixed.len(),
            "vertices": self.vertices,
            "candidates_built": self.candidates_built,
            "stacks_compared": self.stacks,
            "samples": self.samples,
        });
        if let (true, Some(o)) = (self.memory_budget > 0, v.as_object_mut()) {
            o.insert("resident_layers".into(), json!(self.resident_layers));
        }
        v
    }
}
