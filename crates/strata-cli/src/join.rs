//! `strata join`: an external-memory equi-join of two relations (key files
//! or index directories) by an index nested-loop, sort-merge or Grace hash
//! join, within a memory limit of the process.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use serde_json::json;
use strata::format::sosd::{KeyFileOptions, read_keys};
use strata::index::{BuildOptions, Index, IndexSpec, OpenOptions, parse_size};
use strata::join::{
    Algo, CountSink, IndexRelation, JoinOptions, JoinReport, JoinSink, KeyFile, MemoryBudget, PairFile,
    Relation, SortMethod,
};
use strata::{Error, Result};

/// `strata join ...`.
#[derive(Args, Debug)]
pub struct JoinArgs {
    /// The outer relation: a SOSD key file (each key's payload is its
    /// position; keys may repeat) or an index directory.
    #[arg(long)]
    outer: PathBuf,
    /// The inner relation (unique keys): a SOSD key file or an index
    /// directory. For `inlj:KIND` a key file is first built into an index
    /// of that kind (the build is timed apart from the join).
    #[arg(long)]
    inner: PathBuf,
    /// `inlj:KIND` (index nested-loop over an index of KIND, e.g.
    /// `inlj:pgm`, `inlj:btree`; `inlj` alone when --inner is an index),
    /// `smj` (sort-merge) or `hash` (Grace hash).
    #[arg(long, value_name = "ALGO")]
    algo: String,
    /// Memory limit of the process during the join, e.g. 64M, 256M: the
    /// join's buffers (sort runs, partitions, hash tables, probe batches)
    /// get what is left of it after what the process holds when the join
    /// starts (the program, the inner index's resident models) and a
    /// reserve for reads; the report shows the peak resident memory.
    #[arg(long, default_value = "256M")]
    memory: String,
    /// Bytes for the join's buffers exactly (at least 1M), instead of what
    /// --memory leaves of the process's limit: for tests, and to compare
    /// algorithms at equal buffers.
    #[arg(long, value_name = "SIZE")]
    buffers: Option<String>,
    /// Worker threads (hash join partitions, probe batches).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Outer keys per batch of index probes.
    #[arg(long, default_value_t = strata::join::DEFAULT_BATCH)]
    batch: usize,
    /// Reads in flight at most in a probe batch (1-256).
    #[arg(long, default_value_t = strata::storage::DEFAULT_QUEUE_DEPTH)]
    queue_depth: usize,
    /// The outer key file is not sorted (the default expects non-decreasing
    /// keys and stops at the first out of order).
    #[arg(long)]
    outer_unsorted: bool,
    /// The inner key file is not sorted (smj and hash only).
    #[arg(long)]
    inner_unsorted: bool,
    /// How an unsorted relation is sorted (both sides of smj, the outer
    /// side of inlj, whose probes then come in key order): `external` (an
    /// external merge sort: runs sorted in memory, spilled, merged) or
    /// `learned` (learned partitioning: a PGM trained on a 1 % sample
    /// scatters the records into key-ordered partitions in one pass, each
    /// sorted in memory when read back).
    #[arg(long, value_name = "METHOD", default_value = "external")]
    sort: String,
    /// Storage profile of the modelled time of index reads: nvme,
    /// sata-ssd, hdd, ...
    #[arg(long)]
    profile: Option<String>,
    /// Read the index through the OS page cache instead of O_DIRECT.
    #[arg(long)]
    no_direct: bool,
    /// Pages of an LRU cache in front of the index's files (0: none). With
    /// a sorted outer relation, consecutive probes whose windows share a
    /// page then read it once.
    #[arg(long, default_value_t = 0)]
    cache_pages: usize,
    /// Write the matched triples (key, outer payload, inner payload) to
    /// this file (docs/format/join-pairs.md); otherwise only count them.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where spill files (and an index built for the join) go: a temporary
    /// directory inside it, removed at the end (default: the system's).
    #[arg(long)]
    spill_dir: Option<PathBuf>,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn is_index_dir(p: &Path) -> bool {
    p.join(strata::index::MANIFEST_FILE).is_file()
}

pub fn run(a: JoinArgs, quiet: bool) -> Result<()> {
    let memory = parse_size(&a.memory)
        .ok_or_else(|| Error::invalid(format!("--memory: not a size: {:?}", a.memory)))?;
    if a.threads == 0 {
        return Err(Error::invalid("--threads must be at least 1"));
    }
    let (algo, kind) = match a.algo.split_once(':') {
        Some(("inlj", k)) => (Algo::Inlj, Some(k.to_string())),
        None if a.algo == "inlj" => (Algo::Inlj, None),
        None if a.algo == "smj" => (Algo::SortMerge, None),
        None if a.algo == "hash" => (Algo::Hash, None),
        _ => {
            return Err(Error::invalid(format!(
                "--algo must be inlj:KIND, inlj, smj or hash, got {:?}",
                a.algo
            )));
        }
    };
    let profile = a
        .profile
        .as_deref()
        .map(|p| crate::resolve_profile(p, &a.inner, quiet))
        .transpose()?;
    let open_opts = OpenOptions {
        direct: !a.no_direct,
        cache_pages: a.cache_pages,
        profile: profile.clone(),
        queue_depth: a.queue_depth.clamp(1, strata::storage::MAX_QUEUE_DEPTH),
        ..OpenOptions::default()
    };
    let sort: SortMethod = a
        .sort
        .parse()
        .map_err(|_| Error::invalid(format!("--sort must be external or learned, got {:?}", a.sort)))?;
    let mut opts = JoinOptions::with_budget(MemoryBudget::new(memory)?);
    opts.sort = sort;
    opts.threads = a.threads;
    opts.batch = a.batch.max(1);
    opts.spill_dir = a.spill_dir.clone();
    // An index built for the join lives with the spill files.
    let work = {
        let mut b = tempfile::Builder::new();
        b.prefix("strata-join-index-");
        match &a.spill_dir {
            Some(d) => b.tempdir_in(d).map_err(|e| Error::io(d, e))?,
            None => b.tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?,
        }
    };
    // The inner index, opened or built.
    let mut build_s = None;
    let inner_index: Option<Box<dyn Index>> = if is_index_dir(&a.inner) {
        if let (Some(k), Algo::Inlj) = (&kind, algo) {
            let opened = strata::registry::open(&a.inner, &open_opts)?;
            let have = opened.kind().to_string();
            let want = k.parse::<IndexSpec>()?.kind;
            if have != want {
                return Err(Error::invalid(format!(
                    "--inner {} is a {have} index, but --algo asks for inlj:{k}",
                    a.inner.display()
                )));
            }
            Some(opened)
        } else {
            Some(strata::registry::open(&a.inner, &open_opts)?)
        }
    } else if algo == Algo::Inlj {
        let Some(k) = &kind else {
            return Err(Error::invalid(
                "--algo inlj needs an index kind (inlj:KIND) when --inner is a key file",
            ));
        };
        let spec: IndexSpec = k.parse()?;
        let t = Instant::now();
        let keys = read_keys(&a.inner, KeyFileOptions::default())?;
        let dir = work.path().join("index");
        if !quiet {
            eprintln!("building {k} over {} keys of {}", keys.len(), a.inner.display());
        }
        strata::registry::build(&spec, &keys, &dir, &BuildOptions::default())?;
        drop(keys);
        build_s = Some(t.elapsed().as_secs_f64());
        Some(strata::registry::open(&dir, &open_opts)?)
    } else {
        None
    };
    let outer_index = if is_index_dir(&a.outer) {
        Some(strata::registry::open(&a.outer, &open_opts)?)
    } else {
        None
    };
    let outer_rel: Box<dyn Relation + '_> = match &outer_index {
        Some(idx) => Box::new(IndexRelation::new(a.outer.display().to_string(), idx.as_ref())),
        None => Box::new(KeyFile::open(
            &a.outer,
            !a.outer_unsorted,
            KeyFileOptions::default(),
        )?),
    };
    let inner_rel: Box<dyn Relation + '_> = match &inner_index {
        Some(idx) => Box::new(IndexRelation::new(a.inner.display().to_string(), idx.as_ref())),
        None => Box::new(KeyFile::open(
            &a.inner,
            !a.inner_unsorted,
            KeyFileOptions::default(),
        )?),
    };
    let index_stats = inner_index.as_ref().map(|i| i.stats()).transpose()?;
    let io_before = inner_index.as_ref().map(|i| i.io().snapshot());
    // The budget: the limit less what the process holds now (the program
    // and the open indexes).
    let budget = match &a.buffers {
        Some(b) => MemoryBudget::new(
            parse_size(b).ok_or_else(|| Error::invalid(format!("--buffers: not a size: {b:?}")))?,
        )?,
        None => MemoryBudget::within_process(memory)?,
    };
    opts.budget = budget;
    if !quiet {
        eprintln!(
            "joining {} ({} records) with {} ({} records): {}, buffers within {} bytes",
            outer_rel.name(),
            outer_rel.len(),
            inner_rel.name(),
            inner_rel.len(),
            a.algo,
            budget.bytes()
        );
    }
    strata::join::reset_peak_resident();
    let rss_before = strata::join::resident_bytes();
    let (report, count, checksum): (JoinReport, u64, u64) = match &a.out {
        Some(path) => {
            let mut sink = PairFile::create(path)?;
            let r = strata::join::join(algo, outer_rel.as_ref(), inner_rel.as_ref(), &mut sink, &opts)?;
            let (c, s) = (sink.count(), sink.checksum());
            sink.finish()?;
            (r, c, s)
        }
        None => {
            let mut sink = CountSink::new();
            let r = strata::join::join(algo, outer_rel.as_ref(), inner_rel.as_ref(), &mut sink, &opts)?;
            (r, sink.count(), sink.checksum())
        }
    };
    let peak = strata::join::peak_resident_bytes();
    let io = match (&inner_index, &io_before) {
        (Some(i), Some(b)) => Some(i.io().snapshot().since(b)),
        _ => None,
    };
    let record = json!({
        "algo": a.algo,
        "outer": outer_rel.name(),
        "inner": inner_rel.name(),
        "outer_n": outer_rel.len(),
        "inner_n": inner_rel.len(),
        "count": count,
        "checksum": format!("{checksum:016x}"),
        "seconds": report.seconds,
        "build_s": build_s,
        "memory_limit": memory,
        "memory_budget": budget.bytes(),
        "peak_rss_bytes": peak,
        "rss_at_start_bytes": rss_before,
        "threads": a.threads,
        "batch": opts.batch,
        "queue_depth": open_opts.queue_depth,
        "index": index_stats.as_ref().map(|s| json!({
            "kind": s.kind,
            "memory_bytes": s.memory_bytes,
            "disk_bytes": s.disk_bytes,
            "models": s.models,
        })),
        "index_reads": io.as_ref().map(|s| s.read_calls),
        "index_pages_read": io.as_ref().map(|s| s.pages_read),
        "index_bytes_read": io.as_ref().map(|s| s.bytes_read),
        "modelled_read_s": io.as_ref().filter(|_| profile.is_some()).map(|s| s.modelled_read_ns() / 1e9),
        "spill_bytes_written": report.spill_bytes_written,
        "spill_bytes_read": report.spill_bytes_read,
        "passes": report.passes,
        "sort": report.sort.map(SortMethod::name),
        "partitions": report.partitions,
    });
    println!("count      {count}");
    println!("checksum   {checksum:016x}");
    println!("time       {:.3} s", report.seconds);
    if let Some(b) = build_s {
        println!("build      {b:.3} s (not in the time)");
    }
    if let Some(io) = &io {
        println!(
            "index read {} pages in {} read calls ({} bytes)",
            io.pages_read, io.read_calls, io.bytes_read
        );
    }
    println!(
        "spill      {} pages written, {} read ({} passes)",
        report.spill_bytes_written.div_ceil(4096),
        report.spill_bytes_read.div_ceil(4096),
        report.passes
    );
    match report.sort {
        Some(SortMethod::Learned) => println!(
            "sort       learned: {} partitions, {} level{}",
            report.partitions,
            report.passes,
            if report.passes == 1 { "" } else { "s" }
        ),
        Some(SortMethod::External) => println!("sort       external: {} merge passes", report.passes),
        None => {}
    }
    if let Some(p) = peak {
        println!(
            "peak RSS   {:.1} MiB (limit {:.1} MiB, buffers {:.1} MiB)",
            p as f64 / 1048576.0,
            memory as f64 / 1048576.0,
            budget.bytes() as f64 / 1048576.0
        );
    }
    if let Some(path) = &a.json {
        let mut f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        writeln!(f, "{record}").map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}
