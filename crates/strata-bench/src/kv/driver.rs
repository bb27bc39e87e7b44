//! Running the workloads: load once per (engine, repeat), engines
//! interleaved within each repeat, every read checked.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use strata::{Error, Result};

use super::report::{KvCounts, KvRecord};
use super::workload::{KvWorkload, Live, Plan, PlanOp, id_of_index};
use super::{BatchOp, EngineSpec, KvEngine, KvEnv, SyncMode, open_engine, value_matches, value_of};
use crate::report::{IoPerOp, Latency};

/// Puts per batch of the untimed load.
const LOAD_BATCH: usize = 1000;

/// What `kvbench` runs.
#[derive(Debug, Clone)]
pub struct KvOptions {
    /// Engines; the first is the baseline of the ratios.
    pub engines: Vec<EngineSpec>,
    /// Workloads, run in this order on one store per (engine, repeat): the
    /// store keeps what earlier workloads wrote, as in db_bench. A store whose
    /// first workload is not a fill is loaded first (untimed, in key order).
    pub workloads: Vec<KvWorkload>,
    /// Keys of a fill and of the load.
    pub num: u64,
    /// Operations of every other workload.
    pub ops: u64,
    /// Nexts after each `seekrandom` seek (10 in db_bench): a seek reads
    /// `scan_length + 1` entries.
    pub scan_length: u32,
    /// Seed of every plan (the same for every engine and repeat).
    pub seed: u64,
    /// Memory, key and value sizes, sync mode, direct reads.
    pub env: KvEnv,
    /// Worker threads (readers of `readwhilewriting`).
    pub threads: usize,
    /// Repeats; the engines run A B C A B C ...
    pub repeats: usize,
    /// Reopen the store and drop the OS page cache (as root) before every
    /// workload that is not a fill.
    pub cold: bool,
    /// Where stores are made (one directory per engine and repeat, removed after).
    pub work_dir: PathBuf,
}

/// Progress of a run.
#[derive(Debug, Clone)]
pub enum KvEvent {
    /// Loading an engine's store before its first workload.
    Loading {
        /// Engine spec.
        engine: String,
        /// Repeat.
        repeat: usize,
    },
    /// Starting a workload.
    Running {
        /// Engine spec.
        engine: String,
        /// Workload.
        workload: KvWorkload,
        /// Repeat.
        repeat: usize,
        /// Operations planned.
        ops: u64,
    },
    /// A record is final.
    Done(Box<KvRecord>),
}

/// Counters of `/proc/self/io` (zeros where it cannot be read).
#[derive(Debug, Clone, Copy, Default)]
struct ProcIo {
    wchar: u64,
    syscr: u64,
    syscw: u64,
    read_bytes: u64,
    write_bytes: u64,
}

impl ProcIo {
    fn now() -> ProcIo {
        let mut io = ProcIo::default();
        if let Ok(s) = std::fs::read_to_string("/proc/self/io") {
            for line in s.lines() {
                let Some((k, v)) = line.split_once(':') else {
                    continue;
                };
                let v = v.trim().parse::<u64>().unwrap_or(0);
                match k {
                    "wchar" => io.wchar = v,
                    "syscr" => io.syscr = v,
                    "syscw" => io.syscw = v,
                    "read_bytes" => io.read_bytes = v,
                    "write_bytes" => io.write_bytes = v,
                    _ => {}
                }
            }
        }
        io
    }

    fn since(&self, before: &ProcIo) -> ProcIo {
        ProcIo {
            wchar: self.wchar.saturating_sub(before.wchar),
            syscr: self.syscr.saturating_sub(before.syscr),
            syscw: self.syscw.saturating_sub(before.syscw),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(before.write_bytes),
        }
    }
}

/// Drops the OS page cache; the note says why it could not.
fn drop_caches() -> std::result::Result<(), String> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("cold: the page cache was not dropped ({e}; needs root)"))
}

/// What one thread did.
struct Worked {
    hist: Histogram<u64>,
    counts: KvCounts,
    wrong: u64,
    user_bytes: u64,
}

/// Latencies from 1 ns to 100 s at 3 significant digits (longer ones are
/// recorded as 100 s).
fn new_hist() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).map_err(|e| Error::invalid(format!("histogram: {e}")))
}

/// Runs `ops` on `engine` in one thread.
fn work(engine: &dyn KvEngine, ops: &[PlanOp], env: &KvEnv, generation: u32) -> Result<Worked> {
    let mut w = Worked {
        hist: new_hist()?,
        counts: KvCounts::default(),
        wrong: 0,
        user_bytes: 0,
    };
    let vs = env.value_size;
    let mut key = Vec::new();
    let mut value = Vec::with_capacity(vs);
    for op in ops {
        env.key(op.id(), &mut key);
        let ks = key.len();
        let t0 = Instant::now();
        match *op {
            PlanOp::Get { id, present } => {
                let got = engine.get(&key)?;
                w.counts.gets += 1;
                let ok = match &got {
                    Some(v) => present && value_matches(id, v, vs),
                    None => !present,
                };
                w.counts.found += got.is_some() as u64;
                w.wrong += !ok as u64;
            }
            PlanOp::Put { id } => {
                value_of(id, generation, vs, &mut value);
                engine.put(&key, &value)?;
                w.counts.puts += 1;
                w.user_bytes += (ks + vs) as u64;
            }
            PlanOp::Delete { .. } => {
                engine.delete(&key)?;
                w.counts.deletes += 1;
                w.user_bytes += ks as u64;
            }
            PlanOp::Scan { count, .. } => {
                let mut wrong = 0u64;
                let n = engine.scan(&key, count as usize, &mut |k, v| {
                    wrong += !env.entry_matches(k, v) as u64;
                })?;
                w.counts.seeks += 1;
                w.counts.scanned += n as u64;
                w.wrong += wrong;
            }
            PlanOp::ReadModifyWrite { id } => {
                let got = engine.get(&key)?;
                w.counts.gets += 1;
                w.counts.found += got.is_some() as u64;
                w.wrong += !got.is_some_and(|v| value_matches(id, &v, vs)) as u64;
                value_of(id, generation, vs, &mut value);
                engine.put(&key, &value)?;
                w.counts.puts += 1;
                w.counts.rmws += 1;
                w.user_bytes += (ks + vs) as u64;
            }
        }
        let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        w.hist.saturating_record(ns.max(1));
    }
    Ok(w)
}

/// Splits `ops` over `threads` by key id, so every key's operations stay in
/// one thread and in plan order.
fn split(ops: &[PlanOp], threads: usize) -> Vec<Vec<PlanOp>> {
    let mut parts = vec![Vec::with_capacity(ops.len() / threads + 1); threads];
    for op in ops {
        let t = (strata::data::fnv1a64(op.id() / 2) % threads as u64) as usize;
        if let Some(p) = parts.get_mut(t) {
            p.push(*op);
        }
    }
    parts
}

/// Runs a plan; `readwhilewriting` adds a writer thread over `present`.
fn execute(
    engine: &dyn KvEngine,
    plan: &Plan,
    env: &KvEnv,
    threads: usize,
    generation: u32,
    present: &[u64],
    seed: u64,
) -> Result<(Worked, u64)> {
    let parts = split(&plan.ops, threads.max(1));
    let stop = AtomicBool::new(false);
    let writes = AtomicU64::new(0);
    let writer_bytes = AtomicU64::new(0);
    let results: Vec<Result<Worked>> = std::thread::scope(|s| {
        let writer = (plan.workload == KvWorkload::ReadWhileWriting && !present.is_empty()).then(|| {
            s.spawn(|| -> Result<()> {
                let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x5752_4954_4552);
                let (mut key, mut value) = (Vec::new(), Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    let i = present[rng.random_range(0..present.len())];
                    let id = id_of_index(i);
                    env.key(id, &mut key);
                    value_of(id, generation, env.value_size, &mut value);
                    engine.put(&key, &value)?;
                    writes.fetch_add(1, Ordering::Relaxed);
                    writer_bytes.fetch_add((key.len() + env.value_size) as u64, Ordering::Relaxed);
                }
                Ok(())
            })
        });
        let handles: Vec<_> = parts
            .iter()
            .map(|part| s.spawn(|| work(engine, part, env, generation)))
            .collect();
        let mut out: Vec<Result<Worked>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("a kvbench worker panicked")))
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        if let Some(w) = writer {
            match w.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => out.push(Err(e)),
                Err(_) => out.push(Err(Error::invalid("the kvbench writer panicked"))),
            }
        }
        out
    });
    let mut total = Worked {
        hist: new_hist()?,
        counts: KvCounts::default(),
        wrong: 0,
        user_bytes: writer_bytes.load(Ordering::Relaxed),
    };
    for r in results {
        let w = r?;
        total
            .hist
            .add(&w.hist)
            .map_err(|e| Error::invalid(format!("histogram: {e}")))?;
        let (c, d) = (&mut total.counts, w.counts);
        c.gets += d.gets;
        c.found += d.found;
        c.puts += d.puts;
        c.deletes += d.deletes;
        c.seeks += d.seeks;
        c.scanned += d.scanned;
        c.rmws += d.rmws;
        total.wrong += w.wrong;
        total.user_bytes += w.user_bytes;
    }
    Ok((total, writes.load(Ordering::Relaxed)))
}

/// Writes every key of `0..num` in key order, in batches (the untimed load).
fn load(engine: &dyn KvEngine, live: &mut Live, num: u64, env: &KvEnv) -> Result<()> {
    let (mut keys, mut values) = (Vec::new(), Vec::new());
    let mut start = 0;
    while start < num {
        let end = (start + LOAD_BATCH as u64).min(num);
        keys.clear();
        values.clear();
        for i in start..end {
            let (mut k, mut v) = (Vec::new(), Vec::new());
            env.key(id_of_index(i), &mut k);
            value_of(id_of_index(i), 0, env.value_size, &mut v);
            keys.push(k);
            values.push(v);
            live.put(i);
        }
        let batch: Vec<BatchOp<'_>> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| BatchOp::Put(k, v))
            .collect();
        engine.write_batch(&batch)?;
        start = end;
    }
    Ok(())
}

/// One store of one engine in one repeat; dropping it closes the engine
/// and removes its directory (so a run that fails leaves no store behind).
struct Store {
    spec: EngineSpec,
    dir: PathBuf,
    engine: Option<Box<dyn KvEngine>>,
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(e) = self.engine.take() {
            let _ = e.close();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Store {
    fn engine(&self) -> Result<&dyn KvEngine> {
        self.engine
            .as_deref()
            .ok_or_else(|| Error::invalid(format!("engine {} is closed", self.spec.spec)))
    }

    /// Flushes, closes and opens again (dropping the page cache when cold).
    fn reopen(&mut self, env: &KvEnv, cold: bool, notes: &mut Vec<String>) -> Result<()> {
        if let Some(e) = self.engine.take() {
            e.flush()?;
            e.close()?;
        }
        if cold {
            if let Err(n) = drop_caches() {
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
        }
        self.engine = Some(open_engine(&self.spec, &self.dir, env)?);
        Ok(())
    }
}

/// Runs every workload on every engine, `repeats` times, engines interleaved;
/// calls `on_event` with progress and each record, and returns the records
/// in run order.
pub fn run(opts: &KvOptions, on_event: &mut dyn FnMut(KvEvent)) -> Result<Vec<KvRecord>> {
    if opts.engines.is_empty() || opts.workloads.is_empty() {
        return Err(Error::invalid(
            "kvbench needs at least one engine and one workload",
        ));
    }
    if opts.num == 0 {
        return Err(Error::invalid("kvbench needs --num > 0"));
    }
    if let Some(f) = &opts.env.key_file {
        if f.len() != opts.num {
            return Err(Error::invalid(format!(
                "with key file {}, num must be its {} keys, got {}",
                f.name(),
                f.len(),
                opts.num
            )));
        }
    }
    let env = &opts.env;
    let threads = opts.threads.max(1);
    let mut records = Vec::new();
    for repeat in 0..opts.repeats.max(1) {
        for (e, spec) in opts.engines.iter().enumerate() {
            let dir = opts.work_dir.join(format!("r{repeat}-e{e}-{}", spec.kind));
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|x| Error::io(&dir, x))?;
            }
            let mut store = Store {
                spec: spec.clone(),
                dir: dir.clone(),
                engine: None,
            };
            store.engine = Some(open_engine(spec, &dir, env)?);
            let mut live = Live::new();
            let mut notes = Vec::new();
            let (mut build_s, mut dirty) = (0.0, false);
            if opts.workloads.first().is_some_and(|w| !w.is_fill()) {
                on_event(KvEvent::Loading {
                    engine: spec.spec.clone(),
                    repeat,
                });
                let t0 = Instant::now();
                load(store.engine()?, &mut live, opts.num, env)?;
                store.engine()?.flush()?;
                build_s = t0.elapsed().as_secs_f64();
                dirty = true;
            }
            for (wi, &workload) in opts.workloads.iter().enumerate() {
                // Reads start on a reopened store: after writes (so every
                // engine starts from its tables), and always when cold.
                if !workload.is_fill() && (dirty || opts.cold) {
                    store.reopen(env, opts.cold, &mut notes)?;
                    dirty = false;
                }
                let seed = opts.seed.wrapping_add(wi as u64);
                let seek_entries = opts.scan_length.saturating_add(1);
                let plan = Plan::new_seek(workload, &mut live, opts.num, opts.ops, seed, seek_entries)?;
                let present = if workload == KvWorkload::ReadWhileWriting {
                    live.present_indexes()
                } else {
                    Vec::new()
                };
                on_event(KvEvent::Running {
                    engine: spec.spec.clone(),
                    workload,
                    repeat,
                    ops: plan.ops.len() as u64,
                });
                let engine = store.engine()?;
                let written0 = engine.bytes_written();
                let io0 = ProcIo::now();
                let t0 = Instant::now();
                let (worked, background_writes) =
                    execute(engine, &plan, env, threads, wi as u32 + 1, &present, seed)?;
                let secs = t0.elapsed().as_secs_f64();
                // Memory as the workload left it (before the flush empties memtables).
                let memory = engine.memory()?;
                if workload.writes() {
                    engine.flush()?;
                    dirty = true;
                }
                let io = ProcIo::now().since(&io0);
                let (bytes_written, source) = match (written0, engine.bytes_written()) {
                    (Some(a), Some(b)) => (b.saturating_sub(a), "engine"),
                    _ if io.write_bytes > 0 => (io.write_bytes, "device"),
                    _ => (io.wchar, "syscalls"),
                };
                let disk_bytes = engine.disk_bytes()?;
                records.push(record(
                    opts,
                    RunFacts {
                        spec,
                        engine,
                        workload,
                        repeat,
                        threads,
                        worked: &worked,
                        background_writes,
                        secs,
                        io,
                        bytes_written,
                        source,
                        memory,
                        disk_bytes,
                        live: live.count(),
                        build_s,
                        notes: notes.clone(),
                    },
                ));
                if let Some(r) = records.last() {
                    on_event(KvEvent::Done(Box::new(r.clone())));
                }
            }
            if let Some(e) = store.engine.take() {
                e.close()?;
            }
            std::fs::remove_dir_all(&dir).map_err(|x| Error::io(&dir, x))?;
            drop(store);
        }
    }
    Ok(records)
}

/// What one run measured.
struct RunFacts<'a> {
    spec: &'a EngineSpec,
    engine: &'a dyn KvEngine,
    workload: KvWorkload,
    repeat: usize,
    threads: usize,
    worked: &'a Worked,
    background_writes: u64,
    secs: f64,
    io: ProcIo,
    bytes_written: u64,
    source: &'static str,
    memory: super::MemoryUse,
    disk_bytes: u64,
    live: u64,
    build_s: f64,
    notes: Vec<String>,
}

fn record(opts: &KvOptions, f: RunFacts<'_>) -> KvRecord {
    let env = &opts.env;
    let w = f.worked;
    let ops = w.hist.len();
    let per_op = |x: u64| {
        if ops > 0 {
            Some(x as f64 / ops as f64)
        } else {
            None
        }
    };
    let entry = (env.mean_key_len() + env.value_size as f64).round() as u64;
    let memory_bytes = f.memory.total();
    let mut config = f.engine.config();
    config.insert("threads".into(), serde_json::Value::from(f.threads));
    if f.workload == KvWorkload::SeekRandom {
        config.insert("scan_length".into(), serde_json::Value::from(opts.scan_length));
    }
    if let Some(k) = &env.key_file {
        config.insert("key_file".into(), serde_json::Value::from(k.name()));
        config.insert("keys_mean_bytes".into(), serde_json::Value::from(k.mean_len()));
    }
    let cold_ok = opts.cold && f.notes.is_empty();
    KvRecord {
        index: f.engine.name().to_string(),
        config,
        dataset: match &env.key_file {
            Some(k) => format!("kv-{}-{}", k.name(), env.value_size),
            None => format!("kv-{}-{}", env.key_size, env.value_size),
        },
        n: opts.num,
        workload: f.workload.name().to_string(),
        ops,
        profile: "measured".into(),
        cache: if cold_ok { "cold" } else { "os" }.into(),
        throughput_ops_s: if f.secs > 0.0 { ops as f64 / f.secs } else { 0.0 },
        latency_ns: Latency {
            p50: w.hist.value_at_quantile(0.5),
            p99: w.hist.value_at_quantile(0.99),
            p999: w.hist.value_at_quantile(0.999),
            max: w.hist.max(),
        },
        io: IoPerOp {
            pages_per_op: None,
            reads_per_op: per_op(f.io.syscr),
            bytes_per_op: per_op(f.io.read_bytes),
            modelled_us_per_op: None,
            writes_per_op: per_op(f.io.syscw),
            journal_writes_per_op: None,
            journal_syncs_per_op: None,
        },
        memory_bytes,
        bits_per_key: if opts.num > 0 {
            8.0 * memory_bytes as f64 / opts.num as f64
        } else {
            0.0
        },
        disk_bytes: f.disk_bytes,
        build_s: f.build_s,
        build_keys_per_s: if f.build_s > 0.0 {
            opts.num as f64 / f.build_s
        } else {
            0.0
        },
        models: None,
        wrong: w.wrong,
        spec: f.spec.spec.clone(),
        repeat: f.repeat,
        key_size: env.mean_key_len().round() as usize,
        value_size: env.value_size,
        threads: f.threads,
        sync: match env.sync {
            SyncMode::Always => "always",
            SyncMode::Never => "never",
        }
        .into(),
        counts: w.counts,
        background_writes: f.background_writes,
        memory: f.memory,
        live_keys: f.live,
        user_bytes_written: w.user_bytes,
        bytes_written: f.bytes_written,
        bytes_written_source: f.source.into(),
        write_amp: (f.workload.writes() && w.user_bytes > 0)
            .then(|| f.bytes_written as f64 / w.user_bytes as f64),
        space_amp: (f.live > 0).then(|| f.disk_bytes as f64 / (f.live * entry) as f64),
        notes: f.notes,
    }
}
