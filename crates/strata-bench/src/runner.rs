//! Running workloads against index configurations.

use std::path::{Path, PathBuf};
use std::time::Instant;

use hdrhistogram::Histogram;
use serde_json::Map;
use strata::data::{KeyChoice, Op, Workload, WorkloadPlan};
use strata::index::{BuildOptions, BuildReport, Index, IndexSpec, OpenOptions, Records, Residency};
use strata::pager::BlockSnapshot;
use strata::storage::{IoSnapshot, StorageProfile};
use strata::{Error, Result};

use crate::peers::{self, COLD_EVERY, Cooler, PeerEnv};
use crate::report::{BenchRecord, BlocksPerOp, IoPerOp, Latency};

/// Memory budget of a peer when the run has no strata index to take it from.
pub const DEFAULT_PEER_BUDGET: u64 = 8 << 20;

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Data set name for the report.
    pub dataset: String,
    /// Index configurations; the first is the baseline of the ratios.
    pub indexes: Vec<IndexSpec>,
    /// Workloads, each run on every configuration.
    pub workloads: Vec<Workload>,
    /// Operations per run.
    pub ops: usize,
    /// Profile of the modelled time.
    pub profile: StorageProfile,
    /// Residency mode of every index.
    pub resident: Residency,
    /// LRU page cache size (0 = none).
    pub cache_pages: usize,
    /// Read with O_DIRECT (cold).
    pub direct: bool,
    /// Repeats; configurations are interleaved within each repeat.
    pub repeat: usize,
    /// Seed of the operation streams.
    pub seed: u64,
    /// Key choice of reads and updates.
    pub key_choice: KeyChoice,
    /// Worker threads.
    pub threads: usize,
    /// Lookups per `get_many` call (1: one `get` per lookup). Runs of
    /// consecutive lookups are cut into batches of this many; other
    /// operations run one by one.
    pub batch: usize,
    /// Reads in flight at most in a batch (`OpenOptions::queue_depth`).
    pub queue_depth: usize,
    /// How local files serve batched reads.
    pub io_engine: strata::storage::IoEngine,
    /// Where indexes are built.
    pub work_dir: PathBuf,
    /// Page size for the builds.
    pub page_size: usize,
    /// A shell command run before every repeat of every workload, between
    /// configurations' runs (a device baseline such as `fio`, so that it
    /// interleaves with the index runs): `sh -c CMD` with `STRATA_BENCH_WORKLOAD`
    /// and `STRATA_BENCH_REPEAT` (0-based) set, its standard output sent to
    /// standard error; its failure stops the run.
    pub before_repeat: Option<String>,
    /// Run the operations of a read-only workload once, untimed, right
    /// before the timed run of each configuration, so that a run through
    /// the OS page cache (`direct: false`) or an LRU cache measures reads
    /// answered from memory, whatever the OS evicted since the previous
    /// run. Workloads that write never warm up (the pass would change the
    /// store).
    pub warmup: bool,
}

/// Progress events for a front end.
#[derive(Debug, Clone)]
pub enum Event {
    /// Building a configuration.
    Building {
        /// The spec.
        spec: String,
    },
    /// Starting a run.
    Running {
        /// The spec.
        spec: String,
        /// Workload.
        workload: String,
        /// Repeat number (0-based).
        repeat: usize,
        /// Operations.
        ops: usize,
    },
    /// Operations completed in the current run.
    Progress {
        /// Done so far.
        done: usize,
    },
    /// A record is final.
    Done(Box<BenchRecord>),
}

struct Sample {
    throughput: f64,
    latency: Latency,
    io: IoSnapshot,
    wrong: u64,
    memory_bytes: u64,
    disk_bytes: u64,
    models: Option<u64>,
    height: Option<u32>,
    cache_hit_ratio: Option<f64>,
    store: Option<serde_json::Value>,
    /// Pager blocks by role during the run (kinds on the pager).
    blocks: Option<BlockSnapshot>,
}

/// The pager's block counters in an index's stats, if it has them.
fn blocks_of(st: &strata::index::IndexStats) -> Option<BlockSnapshot> {
    st.extra.get("blocks").and_then(BlockSnapshot::from_json)
}

/// The runner's own parameters of a spec, which the index kind never sees:
/// - `cache=SIZE` (bytes, `4M`, ...): an LRU page cache of that many bytes in
///   front of this configuration's storage (overriding
///   [`BenchOptions::cache_pages`]), so that configurations given different
///   memory run side by side;
/// - `durable=1`: the runner calls [`Index::sync`] after every write, inside
///   the timed region, so each write is durable when it returns (for kinds
///   without a log of their own, such as `btree`);
/// - `resident=index|none`: what this configuration keeps in memory
///   (overriding [`BenchOptions::resident`]), e.g. `btree:resident=none,cache=128K`
///   for a B+-tree held to a small memory beside a store that pins its index;
/// - `batch=B` and `qd=Q`: this configuration's lookups go to `get_many` B at
///   a time with up to Q reads in flight (overriding [`BenchOptions::batch`]
///   and [`BenchOptions::queue_depth`]), so that queue depths run side by
///   side over one build: `pgm-disk-cpr:batch=1` and `pgm-disk-cpr:batch=256,qd=32`.
///
/// Read-only workloads share one build among configurations whose specs
/// differ only in these parameters.
#[derive(Debug, Clone)]
struct RunnerParams {
    spec: IndexSpec,
    cache_pages: Option<usize>,
    durable: bool,
    resident: Option<Residency>,
    batch: Option<usize>,
    queue_depth: Option<usize>,
}

/// One of the runner's own parameters of a spec, for `strata list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RunnerParam {
    /// The name, as in `kind:name=value`.
    pub name: &'static str,
    /// What it is when not given (the option of the run it overrides).
    pub default: &'static str,
    /// What it sets.
    pub meaning: &'static str,
}

/// The parameters [`run`] takes out of every spec before the kind sees it
/// (see `RunnerParams`), in the order `strata list` prints them.
pub const RUNNER_PARAMS: &[RunnerParam] = &[
    RunnerParam {
        name: "cache",
        default: "--cache-pages",
        meaning: "bytes of an LRU page cache of this configuration's own (4M, 128K, ...)",
    },
    RunnerParam {
        name: "durable",
        default: "0",
        meaning: "1: sync the index after every write, inside the timed region",
    },
    RunnerParam {
        name: "resident",
        default: "--resident",
        meaning: "what this configuration keeps in memory: index or none",
    },
    RunnerParam {
        name: "batch",
        default: "--batch",
        meaning: "lookups sent to get_many at a time",
    },
    RunnerParam {
        name: "qd",
        default: "--queue-depth",
        meaning: "reads in flight at most in a batch",
    },
];

fn split_runner_params(spec: &IndexSpec, page_size: usize) -> Result<RunnerParams> {
    let mut map = spec.params.given().clone();
    let cache = map.remove("cache");
    let durable = map.remove("durable");
    let count = |key: &str, v: Option<serde_json::Value>| -> Result<Option<usize>> {
        v.map(|v| {
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n >= 1)
                .ok_or_else(|| Error::invalid(format!("{key} must be a whole number >= 1, got {v}")))
        })
        .transpose()
    };
    let batch = count("batch", map.remove("batch"))?;
    let queue_depth = count("qd", map.remove("qd"))?.map(|q| q.min(strata::storage::MAX_QUEUE_DEPTH));
    let resident = map
        .remove("resident")
        .map(|v| match v.as_str() {
            Some(s) => s.parse::<Residency>(),
            None => Err(Error::invalid(format!("resident must be index or none, got {v}"))),
        })
        .transpose()?;
    let mut own = Map::new();
    if let Some(v) = cache.clone() {
        own.insert("cache".to_string(), v);
    }
    if let Some(v) = durable {
        own.insert("durable".to_string(), v);
    }
    let own = strata::index::Params::from_map(own);
    let cache_pages = match cache {
        Some(_) => Some((own.u64("cache", 0)? / page_size.max(1) as u64) as usize),
        None => None,
    };
    let durable = own.bool("durable", false)?;
    Ok(RunnerParams {
        spec: IndexSpec {
            kind: spec.kind.clone(),
            params: strata::index::Params::from_map(map),
        },
        cache_pages,
        durable,
        resident,
        batch,
        queue_depth,
    })
}

/// Removes the index at `dir`: a local directory and everything in it, or
/// on an object store (`s3://`) the manifest and the files of its build. An
/// absent one is no error.
fn remove_dir(dir: &Path) -> Result<()> {
    let Some(url) = strata::storage::remote_url(dir) else {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        return Ok(());
    };
    let d = strata::storage::open_remote(url)?;
    if !d.exists(strata::index::MANIFEST_FILE) {
        return Ok(());
    }
    let m = strata::index::Manifest::load(d.as_ref())?;
    let files = strata::index::files_dir(d.clone(), &m);
    for name in files.list()? {
        files.remove(&name)?;
    }
    d.remove(strata::index::MANIFEST_FILE)
}

/// Copies the files of directory `from` into a new directory `to` (recursively).
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| Error::io(from, e))? {
        let entry = entry.map_err(|e| Error::io(from, e))?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        if entry.file_type().map_err(|e| Error::io(&src, e))?.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).map_err(|e| Error::io(&src, e))?;
        }
    }
    Ok(())
}

fn sanitize(spec: &str) -> String {
    spec.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Runs every workload on every configuration over `keys` (sorted, distinct).
/// Fails after reporting if any answer was wrong.
pub fn run(opts: &BenchOptions, keys: &[u64], on_event: &mut dyn FnMut(Event)) -> Result<Vec<BenchRecord>> {
    if opts.indexes.is_empty() || opts.workloads.is_empty() {
        return Err(Error::invalid(
            "bench needs at least one --index and one --workload",
        ));
    }
    let remote = strata::storage::remote_url(&opts.work_dir).is_some();
    if !remote {
        std::fs::create_dir_all(&opts.work_dir).map_err(|e| Error::io(&opts.work_dir, e))?;
    }
    let repeat = opts.repeat.max(1);
    let mut records = Vec::new();
    // Read-only builds are shared by every read-only workload and repeat.
    let mut static_builds: Vec<Option<(PathBuf, BuildReport)>> = vec![None; opts.indexes.len()];
    // Strata indexes run before peers in each repeat, so that a peer can take
    // the memory of the first strata index as its budget.
    let is_peer: Vec<bool> = opts
        .indexes
        .iter()
        .map(|s| peers::find(&s.kind).is_some())
        .collect();
    // Strata configurations run in the given order in even repeats and in
    // reverse in odd ones, so that no configuration always runs first (or
    // right after another): paired ratios carry no position bias.
    let strata_order: Vec<usize> = (0..opts.indexes.len()).filter(|&i| !is_peer[i]).collect();
    let peer_order: Vec<usize> = (0..opts.indexes.len()).filter(|&i| is_peer[i]).collect();
    let order_of = |rep: usize| -> Vec<usize> {
        let mut o = strata_order.clone();
        if rep % 2 == 1 {
            o.reverse();
        }
        o.extend(&peer_order);
        o
    };
    // Each configuration's own options (its `cache=` parameter) and the spec
    // its kind sees (without that parameter).
    let mut own: Vec<(BenchOptions, RunnerParams)> = Vec::with_capacity(opts.indexes.len());
    for spec in &opts.indexes {
        let rp = split_runner_params(spec, opts.page_size)?;
        let mut o = opts.clone();
        if let Some(pages) = rp.cache_pages {
            o.cache_pages = pages;
        }
        if let Some(r) = rp.resident {
            o.resident = r;
        }
        if let Some(b) = rp.batch {
            o.batch = b;
        }
        if let Some(q) = rp.queue_depth {
            o.queue_depth = q;
        }
        own.push((o, rp));
    }
    for (w_i, &workload) in opts.workloads.iter().enumerate() {
        // Writing workloads start every repeat from a copy of one pristine
        // build per configuration (builds of large stores are slow).
        let mut pristine: Vec<Option<(PathBuf, BuildReport)>> = vec![None; opts.indexes.len()];
        let plan = WorkloadPlan::new(
            workload,
            keys,
            opts.ops,
            opts.key_choice,
            opts.seed.wrapping_add(w_i as u64),
        )?;
        let mut samples: Vec<Vec<Sample>> = (0..opts.indexes.len()).map(|_| Vec::new()).collect();
        let mut reports: Vec<Option<BuildReport>> = vec![None; opts.indexes.len()];
        for rep in 0..repeat {
            if let Some(cmd) = &opts.before_repeat {
                run_before_repeat(cmd, workload, rep)?;
            }
            // The peers' budget: the memory of the first strata
            // configuration (built in repeat 0, which runs it first).
            let mut budget: Option<u64> = strata_order
                .first()
                .and_then(|&f| reports[f].as_ref())
                .map(|r| r.memory_bytes);
            for i in order_of(rep) {
                let spec_text = opts.indexes[i].to_string();
                let (own_opts, spec, durable) = (&own[i].0, &own[i].1.spec, own[i].1.durable);
                let env = PeerEnv {
                    memory_budget: budget.unwrap_or(DEFAULT_PEER_BUDGET),
                    cold: opts.direct,
                    page_size: opts.page_size,
                };
                let build_spec = with_budget(spec, budget)?;
                // Read-only workloads over all keys share one build per
                // configuration, read-only workloads over a bulk load one
                // per workload; a workload that writes starts every repeat
                // from a copy of a pristine build, so no run sees another's
                // writes (their expected answers assume the bulk-loaded state).
                let (dir, report, temporary) = match (&plan.bulk, plan.workload.writes()) {
                    (None, false) => {
                        // A configuration that differs from an earlier one
                        // only in runner parameters reads its build.
                        if static_builds[i].is_none() && !is_peer[i] {
                            let same = (0..i).find(|&j| {
                                !is_peer[j]
                                    && static_builds[j].is_some()
                                    && own[j].1.spec.to_string() == own[i].1.spec.to_string()
                            });
                            if let Some(j) = same {
                                static_builds[i] = static_builds[j].clone();
                            }
                        }
                        if static_builds[i].is_none() {
                            on_event(Event::Building {
                                spec: spec_text.clone(),
                            });
                            let dir = opts.work_dir.join(format!("{}-{}", i, sanitize(&spec_text)));
                            let rep = build(&build_spec, Records::ranked(keys), &dir, opts.page_size, &env)?;
                            static_builds[i] = Some((dir, rep));
                        }
                        let (d, r) = static_builds[i].clone().ok_or_else(|| Error::invalid("build"))?;
                        (d, r, false)
                    }
                    (bulk, _) => {
                        if pristine[i].is_none() {
                            on_event(Event::Building {
                                spec: spec_text.clone(),
                            });
                            let base = opts.work_dir.join(format!(
                                "{}-{}-{}-base",
                                i,
                                sanitize(&spec_text),
                                workload
                            ));
                            let records = match bulk {
                                Some((bk, bv)) => Records::new(bk, bv)?,
                                None => Records::ranked(keys),
                            };
                            let r = build(&build_spec, records, &base, opts.page_size, &env)?;
                            pristine[i] = Some((base, r));
                        }
                        let (base, r) = pristine[i].clone().ok_or_else(|| Error::invalid("build"))?;
                        if !plan.workload.writes() {
                            // Nothing to undo after a read-only run: no copy
                            // (whose write-back would also disturb the next
                            // configuration's timed reads).
                            (base, r, false)
                        } else {
                            let dir = opts.work_dir.join(format!(
                                "{}-{}-{}-{}",
                                i,
                                sanitize(&spec_text),
                                workload,
                                rep
                            ));
                            if dir.exists() {
                                std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
                            }
                            copy_dir(&base, &dir)?;
                            (dir, r, true)
                        }
                    }
                };
                on_event(Event::Running {
                    spec: spec_text.clone(),
                    workload: workload.to_string(),
                    repeat: rep,
                    ops: plan.ops.len(),
                });
                if !is_peer[i] && budget.is_none() {
                    budget = Some(report.memory_bytes);
                }
                let sample = run_one(own_opts, spec, durable, &env, &dir, &plan, on_event);
                if temporary {
                    let _ = remove_dir(&dir);
                }
                samples[i].push(sample?);
                reports[i] = Some(report);
            }
        }
        for (i, spec) in opts.indexes.iter().enumerate() {
            let runs = std::mem::take(&mut samples[i]);
            let report = reports[i]
                .take()
                .ok_or_else(|| Error::invalid("missing build report"))?;
            let rec = aggregate(&own[i].0, spec, workload, &plan, keys.len(), report, runs);
            on_event(Event::Done(Box::new(rec.clone())));
            records.push(rec);
        }
        for (base, _) in pristine.into_iter().flatten() {
            let _ = remove_dir(&base);
        }
    }
    if remote {
        // Local work directories are the caller's to remove (a scratch
        // directory or a kept --work-dir); on an object store the builds are
        // removed here.
        for (dir, _) in static_builds.into_iter().flatten() {
            remove_dir(&dir)?;
        }
    }
    let wrong: u64 = records.iter().map(|r| r.wrong).sum();
    if wrong > 0 {
        return Err(Error::invalid(format!(
            "{wrong} wrong answers in the benchmark (see the `wrong` field): the results are not valid"
        )));
    }
    Ok(records)
}

/// Runs [`BenchOptions::before_repeat`] before repeat `rep` (0-based) of
/// `workload`: `sh -c CMD` with `STRATA_BENCH_WORKLOAD` and
/// `STRATA_BENCH_REPEAT` in its environment, its standard output sent to
/// standard error (standard output may carry the JSON Lines). A failure
/// (status not 0) stops the run.
fn run_before_repeat(cmd: &str, workload: Workload, rep: usize) -> Result<()> {
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env("STRATA_BENCH_WORKLOAD", workload.to_string())
        .env("STRATA_BENCH_REPEAT", rep.to_string())
        .stdout(std::io::stderr())
        .status()
        .map_err(|e| Error::io("sh", e))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "the command before repeat {rep} of {workload} failed ({status}): {cmd}"
        )))
    }
}

/// `spec` with its parameter `memory=budget` (a strata kind with a memory
/// budget, such as `db`) replaced by the run's budget: the memory of the
/// first strata index, the one the peers get. The record's `config` shows the
/// bytes.
fn with_budget(spec: &IndexSpec, budget: Option<u64>) -> Result<IndexSpec> {
    if spec.params.given().get("memory").and_then(|v| v.as_str()) != Some("budget") {
        return Ok(spec.clone());
    }
    match budget {
        Some(b) if peers::find(&spec.kind).is_none() => Ok(spec.clone().with("memory", b)),
        _ => Err(Error::invalid(format!(
            "{spec}: memory=budget takes the memory of the first strata index of the run, \
             so another strata index (the baseline, e.g. btree) must come before it"
        ))),
    }
}

/// Builds `spec` into `dir`: a peer if one has the kind's name (peers are
/// resolved before the strata registry), a strata index otherwise.
fn build(
    spec: &IndexSpec,
    records: Records<'_>,
    dir: &Path,
    page_size: usize,
    env: &PeerEnv,
) -> Result<BuildReport> {
    remove_dir(dir)?;
    match peers::find(&spec.kind) {
        Some(p) => p.build(spec, records, dir, env),
        None => strata::registry::build_records(spec, records, dir, &BuildOptions { page_size }),
    }
}

fn open(
    opts: &BenchOptions,
    spec: &IndexSpec,
    env: &PeerEnv,
    dir: &Path,
) -> Result<(Box<dyn Index>, Option<Cooler>)> {
    if let Some(p) = peers::find(&spec.kind) {
        let o = p.open(spec, dir, env)?;
        return Ok((o.index, o.cooler));
    }
    let idx = strata::registry::open(
        dir,
        &OpenOptions {
            direct: opts.direct,
            resident: opts.resident,
            cache_pages: opts.cache_pages,
            profile: Some(opts.profile.clone()),
            queue_depth: opts.queue_depth,
            io_engine: opts.io_engine,
        },
    )?;
    Ok((idx, None))
}

/// How many of `ops` (at least one) run as one call: up to `batch`
/// consecutive lookups, or a single operation of another kind.
fn batch_len(ops: &[&Op], batch: usize) -> usize {
    if batch <= 1 {
        return 1.min(ops.len());
    }
    let n = ops
        .iter()
        .take(batch)
        .take_while(|op| matches!(op, Op::Get { .. }))
        .count();
    n.max(1).min(ops.len())
}

/// Runs `chunk` (one operation, or lookups only): several lookups in one
/// [`Index::get_many`]. Returns how many answers were wrong.
fn exec_chunk(
    idx: &dyn Index,
    chunk: &[&Op],
    strict_scans: bool,
    durable: bool,
    buf: &mut Vec<(u64, u64)>,
) -> Result<u64> {
    match chunk {
        [] => Ok(0),
        [op] => Ok(u64::from(!exec(idx, op, strict_scans, durable, buf)?)),
        _ => {
            let keys: Vec<u64> = chunk
                .iter()
                .map(|op| match op {
                    Op::Get { key, .. } => *key,
                    _ => 0,
                })
                .collect();
            let mut got = Vec::with_capacity(keys.len());
            idx.get_many(&keys, &mut got)?;
            let mut bad = 0;
            for (op, g) in chunk.iter().zip(&got) {
                match op {
                    Op::Get { expect, .. } => bad += u64::from(g != expect),
                    _ => bad += 1,
                }
            }
            Ok(bad + (chunk.len() as u64).saturating_sub(got.len() as u64))
        }
    }
}

/// Runs one operation; returns whether the answer was right.
fn exec(
    idx: &dyn Index,
    op: &Op,
    strict_scans: bool,
    durable: bool,
    buf: &mut Vec<(u64, u64)>,
) -> Result<bool> {
    let ok = exec_op(idx, op, strict_scans, buf)?;
    if durable && !matches!(op, Op::Get { .. } | Op::Scan { .. }) {
        idx.sync()?;
    }
    Ok(ok)
}

fn exec_op(idx: &dyn Index, op: &Op, strict_scans: bool, buf: &mut Vec<(u64, u64)>) -> Result<bool> {
    Ok(match *op {
        Op::Get { key, expect } => idx.get(key)? == expect,
        Op::Scan {
            key,
            len,
            expect_first,
            expect_len,
        } => {
            buf.clear();
            idx.scan(key, len as usize, buf)?;
            let sorted = buf.windows(2).all(|w| w[0].0 < w[1].0) && buf.first().is_none_or(|r| r.0 >= key);
            if strict_scans {
                sorted && buf.first().copied() == expect_first && buf.len() as u32 == expect_len
            } else {
                sorted && buf.len() <= len as usize
            }
        }
        Op::Insert { key, value } => idx.insert(key, value)?.is_none(),
        Op::Update { key, value } => idx.insert(key, value)?.is_some(),
        Op::ReadModifyWrite { key, expect, value } => {
            let seen = idx.get(key)?;
            idx.insert(key, value)?;
            seen == Some(expect)
        }
    })
}

fn run_one(
    opts: &BenchOptions,
    spec: &IndexSpec,
    durable: bool,
    env: &PeerEnv,
    dir: &Path,
    plan: &WorkloadPlan,
    on_event: &mut dyn FnMut(Event),
) -> Result<Sample> {
    let (idx, mut cooler) = open(opts, spec, env, dir)?;
    // A cold peer's cache is emptied between operations of read-only runs,
    // outside the timed region (see `peers`).
    if plan.workload.writes() {
        cooler = None;
    }
    let mut paused = std::time::Duration::ZERO;
    if plan.workload.writes() && !idx.supports_updates() {
        return Err(Error::Unsupported(format!(
            "index kind {} is static; workload {} writes (use an updatable kind such as btree)",
            idx.kind(),
            plan.workload
        )));
    }
    let threads = opts.threads.max(1);
    if opts.warmup && !plan.workload.writes() {
        let mut buf = Vec::with_capacity(128);
        let ops: Vec<&Op> = plan.ops.iter().collect();
        let mut i = 0;
        while i < ops.len() {
            let n = batch_len(&ops[i..], opts.batch);
            exec_chunk(idx.as_ref(), &ops[i..i + n], true, durable, &mut buf)?;
            i += n;
        }
    }
    let before = idx.io().snapshot();
    let blocks_before = blocks_of(&idx.stats()?);
    let t0 = Instant::now();
    let (hist, wrong) = if threads == 1 {
        let mut hist = new_hist()?;
        let mut wrong = 0u64;
        let mut buf = Vec::with_capacity(128);
        let tick = (plan.ops.len() / 100).max(1);
        let ops: Vec<&Op> = plan.ops.iter().collect();
        let mut i = 0;
        while i < ops.len() {
            let n = batch_len(&ops[i..], opts.batch);
            let chunk = &ops[i..i + n];
            let s = Instant::now();
            let bad = exec_chunk(idx.as_ref(), chunk, true, durable, &mut buf)?;
            let ns = s.elapsed().as_nanos() as u64;
            // Every lookup of a batch waits for the whole batch.
            hist.record_n(ns.max(1), n as u64)
                .map_err(|e| Error::invalid(format!("histogram: {e}")))?;
            wrong += bad;
            if i / tick != (i + n) / tick {
                on_event(Event::Progress { done: i });
            }
            i += n;
            if let Some(c) = cooler.as_mut() {
                if i / COLD_EVERY != (i - n) / COLD_EVERY {
                    let p = Instant::now();
                    c()?;
                    paused += p.elapsed();
                }
            }
        }
        (hist, wrong)
    } else {
        run_threads(idx.as_ref(), plan, threads, durable, opts.batch)?
    };
    if plan.workload.writes() {
        // Background work the writes started (a store's merge) is part of
        // their cost: the clock stops when it has finished.
        idx.settle()?;
    }
    let elapsed = t0.elapsed().saturating_sub(paused).as_secs_f64();
    let io = idx.io().snapshot().since(&before);
    let st = idx.stats()?;
    Ok(Sample {
        throughput: if elapsed > 0.0 {
            plan.ops.len() as f64 / elapsed
        } else {
            0.0
        },
        latency: Latency {
            p50: hist.value_at_quantile(0.5),
            p99: hist.value_at_quantile(0.99),
            p999: hist.value_at_quantile(0.999),
            max: hist.max(),
        },
        io,
        wrong,
        memory_bytes: st.memory_bytes,
        disk_bytes: st.disk_bytes,
        models: st.models,
        height: st.height,
        cache_hit_ratio: st.extra.get("cache_hit_ratio").and_then(|v| v.as_f64()),
        blocks: blocks_of(&st).zip(blocks_before).map(|(a, b)| a.since(&b)),
        store: st
            .extra
            .get("db")
            .map(|d| {
                serde_json::json!({
                    "merges": d["merges"],
                    "merge_s": d["merge_seconds"],
                    "merging": d["merging"],
                    "static_kind": d["static_kind"],
                })
            })
            // The LSM store's `StoreStats` (index and filter bytes per level,
            // training and compaction times).
            .or_else(|| st.extra.get("lsm").cloned()),
    })
}

fn new_hist() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).map_err(|e| Error::invalid(format!("histogram: {e}")))
}

/// Operations are split by key so each key's operations keep their order
/// (and expected answers stay exact); scans are only checked for order when
/// other threads write concurrently.
fn run_threads(
    idx: &dyn Index,
    plan: &WorkloadPlan,
    threads: usize,
    durable: bool,
    batch: usize,
) -> Result<(Histogram<u64>, u64)> {
    let mut parts: Vec<Vec<&Op>> = vec![Vec::new(); threads];
    for op in &plan.ops {
        let key = match op {
            Op::Get { key, .. }
            | Op::Scan { key, .. }
            | Op::Insert { key, .. }
            | Op::Update { key, .. }
            | Op::ReadModifyWrite { key, .. } => *key,
        };
        parts[(strata::data::fnv1a64(key) % threads as u64) as usize].push(op);
    }
    let strict = !plan.workload.writes();
    let results: Vec<Result<(Histogram<u64>, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .iter()
            .map(|ops| {
                s.spawn(move || -> Result<(Histogram<u64>, u64)> {
                    let mut hist = new_hist()?;
                    let mut wrong = 0;
                    let mut buf = Vec::with_capacity(128);
                    let mut i = 0;
                    while i < ops.len() {
                        let n = batch_len(&ops[i..], batch);
                        let t = Instant::now();
                        wrong += exec_chunk(idx, &ops[i..i + n], strict, durable, &mut buf)?;
                        hist.record_n((t.elapsed().as_nanos() as u64).max(1), n as u64)
                            .map_err(|e| Error::invalid(format!("histogram: {e}")))?;
                        i += n;
                    }
                    Ok((hist, wrong))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("benchmark thread panicked")))
            })
            .collect()
    });
    let mut total = new_hist()?;
    let mut wrong = 0;
    for r in results {
        let (h, w) = r?;
        total
            .add(&h)
            .map_err(|e| Error::invalid(format!("histogram merge: {e}")))?;
        wrong += w;
    }
    Ok((total, wrong))
}

fn aggregate(
    opts: &BenchOptions,
    spec: &IndexSpec,
    workload: Workload,
    plan: &WorkloadPlan,
    n: usize,
    report: BuildReport,
    runs: Vec<Sample>,
) -> BenchRecord {
    let throughput_runs: Vec<f64> = runs.iter().map(|s| s.throughput).collect();
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| runs[a].throughput.total_cmp(&runs[b].throughput));
    let median = &runs[order[order.len() / 2]];
    let wrong = runs.iter().map(|s| s.wrong).sum();
    let ops = plan.ops.len().max(1) as f64;
    // Peers do not count their I/O through strata's storage layer: null.
    let exposes_io = peers::find(&spec.kind).is_none();
    let per = |x: u64| exposes_io.then_some(x as f64 / ops);
    let cache = if opts.cache_pages > 0 {
        format!("lru:{}", opts.cache_pages)
    } else if opts.direct {
        "cold".to_string()
    } else {
        "os".to_string()
    };
    BenchRecord {
        index: report.index.clone(),
        config: if report.config.is_empty() {
            Map::new()
        } else {
            report.config.clone()
        },
        dataset: opts.dataset.clone(),
        n: n as u64,
        workload: workload.to_string(),
        ops: plan.ops.len() as u64,
        profile: opts.profile.name.clone(),
        cache,
        throughput_ops_s: median.throughput,
        latency_ns: median.latency,
        io: IoPerOp {
            pages_per_op: per(median.io.pages_read),
            reads_per_op: per(median.io.read_calls),
            bytes_per_op: per(median.io.bytes_read),
            modelled_us_per_op: exposes_io.then_some(median.io.modelled_read_ns() / 1e3 / ops),
            writes_per_op: per(median.io.write_calls),
            journal_writes_per_op: per(median.io.journal_writes).filter(|_| median.io.journal_syncs > 0),
            journal_syncs_per_op: per(median.io.journal_syncs).filter(|_| median.io.journal_syncs > 0),
        },
        memory_bytes: median.memory_bytes,
        bits_per_key: if n > 0 {
            8.0 * median.memory_bytes as f64 / n as f64
        } else {
            0.0
        },
        disk_bytes: median.disk_bytes,
        build_s: report.build_s,
        build_keys_per_s: report.build_keys_per_s,
        models: median.models.or(report.models),
        wrong,
        spec: spec.to_string(),
        resident: opts.resident.to_string(),
        threads: opts.threads.max(1),
        batch: (opts.batch > 1).then_some(opts.batch),
        queue_depth: (opts.batch > 1).then_some(opts.queue_depth),
        io_engine: (opts.batch > 1).then(|| {
            opts.io_engine
                .resolve()
                .unwrap_or(opts.io_engine)
                .name()
                .to_string()
        }),
        key_choice: format!("{:?}", opts.key_choice).to_lowercase(),
        bulk_n: plan.bulk_len(n) as u64,
        throughput_runs,
        height: median.height,
        cache_hit_ratio: median.cache_hit_ratio,
        store: median.store.clone(),
        blocks: median.blocks.map(|b| BlocksPerOp {
            inner_read_per_op: b.inner_read as f64 / ops.max(1.0),
            leaf_read_per_op: b.leaf_read as f64 / ops.max(1.0),
            inner_written_per_op: b.inner_written as f64 / ops.max(1.0),
            leaf_written_per_op: b.leaf_written as f64 / ops.max(1.0),
            other_per_op: (b.other_read + b.other_written) as f64 / ops.max(1.0),
            smo: b.smo,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &Path, indexes: &[&str], workloads: &[&str], profile: &str) -> BenchOptions {
        BenchOptions {
            dataset: "test".into(),
            indexes: indexes.iter().map(|s| s.parse().unwrap()).collect(),
            workloads: workloads.iter().map(|s| s.parse().unwrap()).collect(),
            ops: 2_000,
            profile: StorageProfile::named(profile).unwrap(),
            resident: Residency::Index,
            cache_pages: 0,
            direct: true,
            repeat: 2,
            seed: 1,
            key_choice: KeyChoice::Uniform,
            threads: 1,
            batch: 1,
            queue_depth: strata::storage::DEFAULT_QUEUE_DEPTH,
            io_engine: strata::storage::IoEngine::Auto,
            work_dir: dir.to_path_buf(),
            page_size: 4096,
            before_repeat: None,
            warmup: false,
        }
    }

    /// With `warmup`, a read-only run follows an untimed pass over the same
    /// operations: behind an LRU cache that holds the whole index, the
    /// timed run reads nothing from storage; without it, it does.
    #[test]
    fn warmup_fills_the_cache_before_the_timed_run() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..100_000u64).map(|i| i * 7).collect();
        let mut o = opts(tmp.path(), &["btree"], &["lookup", "scan", "write-only"], "nvme");
        o.repeat = 1;
        o.cache_pages = 4096;
        let reads = |o: &BenchOptions| -> Vec<(String, f64)> {
            run(o, &keys, &mut |_| {})
                .unwrap()
                .iter()
                .map(|r| (r.workload.clone(), r.io.pages_per_op.unwrap()))
                .collect()
        };
        let cold = reads(&o);
        assert!(cold.iter().all(|(_, p)| *p > 0.1), "{cold:?}");
        o.warmup = true;
        let warm = reads(&o);
        for (w, p) in &warm {
            if w == "write-only" {
                assert!(*p > 0.1, "writes never warm up: {warm:?}");
            } else {
                assert_eq!(*p, 0.0, "{w} after its warm-up: {warm:?}");
            }
        }
    }

    #[test]
    fn binary_accounting_matches_the_profile() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..200_000u64).map(|i| i * 3).collect();
        let o = opts(tmp.path(), &["binary"], &["lookup", "scan", "lookup-miss"], "hdd");
        let recs = run(&o, &keys, &mut |_| {}).unwrap();
        assert_eq!(recs.len(), 3);
        let hdd = StorageProfile::named("hdd").unwrap();
        for r in &recs {
            assert_eq!(r.wrong, 0);
            let reads = r.io.reads_per_op.unwrap();
            let bytes = r.io.bytes_per_op.unwrap();
            // Every read of `binary` is one page: modelled = reads × T(4096).
            assert!((bytes / reads - 4096.0).abs() < 1e-9, "{}", r.workload);
            let want = reads * hdd.read_ns(4096) / 1e3;
            assert!((r.io.modelled_us_per_op.unwrap() - want).abs() < 1e-6 * want);
            assert_eq!(r.throughput_runs.len(), 2);
        }
        // pages ≈ ceil(log2(pages)) for lookups.
        let pages = (200_000f64 / 255.0).ceil();
        let lookup = &recs[0];
        let ppo = lookup.io.pages_per_op.unwrap();
        assert!(
            ppo <= pages.log2().ceil() + 0.01 && ppo >= pages.log2().ceil() - 1.5,
            "{ppo}"
        );
    }

    /// `cache=` gives one configuration its own page cache (counted in its
    /// memory); writing workloads start each repeat from a copy of one build
    /// and leave no directories behind.
    /// YCSB A/B/F update keys of a full bulk load: every repeat and every
    /// later workload must start from the bulk-loaded records again (a
    /// shared build once carried one run's updates into the next, whose
    /// expected values then disagreed).
    #[test]
    fn writes_never_leak_into_other_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..20_000u64).map(|i| i * 11 + 3).collect();
        let o = opts(
            tmp.path(),
            &["btree", "db:memory=256K"],
            &["ycsb-f", "ycsb-a", "ycsb-b", "lookup"],
            "nvme",
        );
        let recs = run(&o, &keys, &mut |_| {}).unwrap();
        assert_eq!(recs.len(), 8);
        for r in &recs {
            assert_eq!(r.wrong, 0, "{} {}", r.spec, r.workload);
            assert_eq!(r.throughput_runs.len(), 2);
        }
    }

    #[test]
    fn per_index_cache_and_pristine_copies() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..40_000u64).map(|i| i * 5 + 1).collect();
        let o = opts(
            tmp.path(),
            &[
                "btree",
                "btree:cache=64K",
                "db:memory=128K,insert=blind,durable=1",
            ],
            &["ycsb-write-only", "ycsb-balanced", "ycsb-read-only"],
            "nvme",
        );
        let recs = run(&o, &keys, &mut |_| {}).unwrap();
        assert_eq!(recs.len(), 9);
        for w in recs.chunks(3) {
            assert!(w.iter().all(|r| r.wrong == 0 && r.throughput_runs.len() == 2));
            assert_eq!(w[0].cache, "cold");
            assert_eq!(w[1].cache, "lru:16");
            assert_eq!(w[1].spec, "btree:cache=64K");
            assert!(
                w[1].memory_bytes >= w[0].memory_bytes + 16 * 4096,
                "{}",
                w[1].workload
            );
            assert_eq!(w[2].index, "db");
            assert!(w[0].store.is_none());
            let store = w[2].store.as_ref().unwrap();
            assert!(store["merges"].is_u64() && store["static_kind"].is_string());
            // The clock of a writing run stops after the merges it started.
            assert_eq!(store["merging"], false, "{}", w[2].workload);
        }
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains("ycsb-write") || n.contains("ycsb-balanced"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        assert!(split_runner_params(&"btree:cache=lots".parse().unwrap(), 4096).is_err());
    }

    /// `resident=none` holds one configuration to what its cache keeps: a
    /// B+-tree then reads its inner levels too, beside one that pins them.
    #[test]
    fn per_index_residency() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..200_000u64).map(|i| i * 7 + 2).collect();
        let o = opts(
            tmp.path(),
            &["btree", "btree:resident=none,cache=8K", "btree:resident=index"],
            &["lookup"],
            "nvme",
        );
        let recs = run(&o, &keys, &mut |_| {}).unwrap();
        assert_eq!(recs.len(), 3);
        assert!(recs.iter().all(|r| r.wrong == 0));
        let pages: Vec<f64> = recs.iter().map(|r| r.io.pages_per_op.unwrap()).collect();
        assert_eq!(
            (recs[0].resident.as_str(), recs[1].resident.as_str()),
            ("index", "none")
        );
        assert_eq!(recs[2].resident, "index");
        assert!(
            (pages[0] - 1.0).abs() < 1e-9 && (pages[2] - 1.0).abs() < 1e-9,
            "{pages:?}"
        );
        assert!(pages[1] > 1.5, "{pages:?}");
        assert!(
            recs[1].memory_bytes < recs[0].memory_bytes,
            "{} {}",
            recs[1].memory_bytes,
            recs[0].memory_bytes
        );
        assert!(split_runner_params(&"btree:resident=some".parse().unwrap(), 4096).is_err());
    }

    /// `RUNNER_PARAMS` (what `strata list` prints) names exactly what the
    /// runner takes out of a spec: given all, the kind sees none.
    #[test]
    fn runner_params_are_listed() {
        let all = ["cache=4M", "durable=1", "resident=none", "batch=8", "qd=4"];
        assert_eq!(all.len(), RUNNER_PARAMS.len());
        let spec: IndexSpec = format!("btree:fill=90,{}", all.join(",")).parse().unwrap();
        let rp = split_runner_params(&spec, 4096).unwrap();
        let left: Vec<&String> = rp.spec.params.given().keys().collect();
        assert_eq!(left, ["fill"]);
        for (given, listed) in all.iter().zip(RUNNER_PARAMS) {
            assert!(given.starts_with(&format!("{}=", listed.name)), "{given}");
        }
        assert_eq!(
            (rp.cache_pages, rp.durable, rp.resident, rp.batch, rp.queue_depth),
            (Some(1024), true, Some(Residency::None), Some(8), Some(4))
        );
    }

    /// Peers answer like strata's kinds (every answer checked) and report
    /// null I/O counters; run with `--features lmdb,rocksdb`.
    #[cfg(any(feature = "lmdb", feature = "rocksdb"))]
    #[test]
    fn peers_run_the_same_workloads() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..30_000u64).map(|i| i * 7 + (i % 5)).collect();
        let mut specs = vec!["btree"];
        specs.extend(crate::peers::names());
        for direct in [true, false] {
            let mut o = opts(
                tmp.path(),
                &specs,
                &["lookup", "lookup-miss", "scan", "balanced"],
                "nvme",
            );
            o.direct = direct;
            let recs = run(&o, &keys, &mut |_| {}).unwrap();
            assert_eq!(recs.len(), 4 * specs.len());
            for r in &recs {
                assert_eq!(r.wrong, 0, "{} {}", r.index, r.workload);
                let peer = r.index != "btree";
                assert_eq!(r.io.pages_per_op.is_none(), peer, "{}", r.index);
                assert_eq!(r.io.modelled_us_per_op.is_none(), peer);
                assert!(r.disk_bytes > 0 && r.throughput_ops_s > 0.0);
            }
            // Records come in --index order although strata kinds run first.
            assert_eq!(recs[0].index, "btree");
            assert_eq!(recs[1].index, specs[1]);
        }
    }

    /// `memory=budget` takes the memory of the first strata index (btree's
    /// build report), and needs one before it.
    #[test]
    fn memory_budget_comes_from_the_baseline() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..50_000u64).map(|i| i * 11).collect();
        let mut o = opts(
            tmp.path(),
            &["btree", "db:memory=budget"],
            &["lookup", "write-only"],
            "nvme",
        );
        // Three repeats: in the second, db runs first (reversed order) and
        // still gets btree's budget.
        o.repeat = 3;
        let recs = run(&o, &keys, &mut |_| {}).unwrap();
        assert_eq!(recs.len(), 4);
        for pair in recs.chunks(2) {
            let (b, d) = (&pair[0], &pair[1]);
            assert_eq!((b.index.as_str(), d.index.as_str()), ("btree", "db"));
            assert_eq!(d.wrong, 0);
            // The budget is btree's memory after its build (its record shows
            // the memory at the end of the run).
            let budget = d.config["memory"].as_u64().unwrap();
            assert!(
                budget > 0 && budget <= b.memory_bytes,
                "{budget} vs {}",
                b.memory_bytes
            );
        }
        let o = opts(tmp.path(), &["db:memory=budget", "btree"], &["lookup"], "nvme");
        let e = run(&o, &keys, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("memory=budget"), "{e}");
    }

    /// Strata configurations alternate their order between repeats (no
    /// position bias in paired ratios); peers always run after them.
    #[test]
    fn repeats_alternate_the_order() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..20_000u64).map(|i| i * 5).collect();
        let mut o = opts(tmp.path(), &["btree", "binary", "zonemap"], &["lookup"], "nvme");
        o.repeat = 3;
        o.ops = 200;
        let mut seen = Vec::new();
        let recs = run(&o, &keys, &mut |e| {
            if let Event::Running { spec, repeat, .. } = e {
                seen.push((spec, repeat));
            }
        })
        .unwrap();
        let want: Vec<(String, usize)> = [
            ("btree", 0),
            ("binary", 0),
            ("zonemap", 0),
            ("zonemap", 1),
            ("binary", 1),
            ("btree", 1),
            ("btree", 2),
            ("binary", 2),
            ("zonemap", 2),
        ]
        .iter()
        .map(|&(s, r)| (s.to_string(), r))
        .collect();
        assert_eq!(seen, want);
        // Records keep the --index order, one throughput per repeat.
        let names: Vec<&str> = recs.iter().map(|r| r.index.as_str()).collect();
        assert_eq!(names, ["btree", "binary", "zonemap"]);
        assert!(recs.iter().all(|r| r.throughput_runs.len() == 3 && r.wrong == 0));
    }

    #[test]
    fn static_kind_rejects_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..10_000u64).collect();
        let o = opts(tmp.path(), &["binary"], &["write-only"], "nvme");
        let e = run(&o, &keys, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("static"), "{e}");
    }
}
