//! `strata demo`: generate data, build every index kind, benchmark them
//! against the B+-tree, print a legend, then per data set and workload group
//! a table and a verdict computed from the run; `--clean` removes its data.

use std::cmp::Ordering;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use indicatif::ProgressBar;
use strata::data::{Dist, KeyChoice, Workload};
use strata::index::{IndexSpec, Residency};
use strata::storage::StorageProfile;
use strata::{Error, Result};
use strata_bench::{BenchOptions, BenchRecord, Event};

/// The configurations the demo runs, baseline first; kinds this build does
/// not have are skipped. `air` (AirTune for the demo's profile, in its
/// memory-budget mode: the demo keeps index layers in memory) is added last.
const DEMO_SPECS: &[&str] = &[
    "btree",
    "binary",
    "btree-static",
    "zonemap",
    "leco-zonemap",
    "leco-zonemap-d",
    "gap-zonemap-d",
    "pgm:epsilon=64",
    "pgm-disk:epsilon=64",
    "pgm-disk-cpr:epsilon=64",
    "rs:epsilon=64",
    "rs-disk:epsilon=64",
    "rmi",
    "fiting-static:epsilon=64",
];

/// The write-then-read part: the durable store against the B+-tree, which
/// gets its pinned inner nodes plus a page cache as large as the store's
/// whole budget (so the B+-tree holds more memory than the store).
/// `insert=blind`: the store's inserts skip the read of the old value (every
/// insert of these workloads is a new key).
const DEMO_WRITE_SPECS: &[&str] = &["btree:cache=1M", "db:memory=1M,insert=blind"];

/// Page size of every index the demo builds.
const PAGE: usize = 4096;

/// A throughput within this fraction of the baseline's counts as level with it.
const LEVEL: f64 = 0.05;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Keys per data set.
    #[arg(long, short = 'n', default_value_t = 2_000_000)]
    n: usize,
    /// Lookups per run.
    #[arg(long, default_value_t = 20_000)]
    ops: usize,
    /// Working directory for the data and the indexes (kept after the run:
    /// the next run reuses its key files).
    #[arg(long, default_value = "demo-data")]
    dir: PathBuf,
    /// Storage profile of the modelled time.
    #[arg(long, default_value = "nvme")]
    profile: String,
    /// Also write the JSON Lines here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Data sets to use.
    #[arg(long = "dataset", value_name = "DATASET", default_values_t = ["fb-like".to_string(), "osm-like".to_string()])]
    datasets: Vec<String>,
    /// Remove what the demo wrote into `--dir` (key files and indexes), and
    /// the directory if nothing else is left in it; run nothing.
    #[arg(long)]
    clean: bool,
}

pub fn run(a: DemoArgs, quiet: bool) -> Result<()> {
    if a.clean {
        return clean(&a.dir);
    }
    std::fs::create_dir_all(&a.dir).map_err(|e| Error::io(&a.dir, e))?;
    let known: Vec<&str> = strata::registry::kinds().iter().map(|k| k.name()).collect();
    let profile = StorageProfile::named(&a.profile)?;
    let air = format!("air:profile={},memory_budget=1M", a.profile);
    let specs: Vec<IndexSpec> = DEMO_SPECS
        .iter()
        .copied()
        .chain(std::iter::once(air.as_str()))
        .filter(|s| known.contains(&s.split(':').next().unwrap_or("")))
        .map(|s| s.parse())
        .collect::<Result<_>>()?;
    let mut progress = Progress::new(quiet);
    print!("{}", legend(&profile));
    let mut all = Vec::new();
    for name in &a.datasets {
        let dist: Dist = name.parse()?;
        let ds = dist.name();
        let file = a.dir.join(format!("{ds}-{}.keys", a.n));
        let keys = if file.exists() {
            progress.phase(&format!("{ds}: reading {}", file.display()));
            strata::format::read_keys(&file, Default::default())?
        } else {
            progress.phase(&format!("{ds}: generating {} keys into {}", a.n, file.display()));
            let keys = strata::data::generate(dist, a.n, 42)?;
            strata::format::write_keys(&file, &keys)?;
            keys
        };
        progress.clear();
        let opts = BenchOptions {
            dataset: ds.to_string(),
            indexes: specs.clone(),
            workloads: vec![Workload::Lookup],
            ops: a.ops,
            profile: profile.clone(),
            resident: Residency::Index,
            cache_pages: 0,
            direct: true,
            repeat: 1,
            seed: 1,
            key_choice: KeyChoice::Uniform,
            threads: 1,
            batch: 1,
            queue_depth: strata::storage::DEFAULT_QUEUE_DEPTH,
            io_engine: strata::storage::IoEngine::Auto,
            work_dir: a.dir.join(format!("{ds}-indexes")),
            page_size: PAGE,
            before_repeat: None,
            warmup: false,
        };
        progress.line(&format!(
            "{ds}: cold point lookups, {} configurations",
            opts.indexes.len()
        ));
        let recs = progress.bench(&opts, &keys, ds)?;
        println!(
            "\n{ds} — {} keys, {} cold point lookups per index (O_DIRECT, index models in memory, modelled time under {})",
            keys.len(),
            a.ops,
            profile.name
        );
        report(&recs);
        all.extend(recs);
        // Writes, then reads of the written keys: inserts of 1/16 of the
        // keys into the other 15/16, then half inserts and half lookups.
        if known.contains(&"db") {
            let wopts = BenchOptions {
                indexes: DEMO_WRITE_SPECS
                    .iter()
                    .map(|s| s.parse())
                    .collect::<Result<_>>()?,
                workloads: vec![Workload::YcsbWriteOnly, Workload::YcsbBalanced],
                ops: a.ops.min(keys.len() / 16).max(1),
                ..opts
            };
            progress.line(&format!(
                "{ds}: writes, {} configurations × {} workloads",
                wopts.indexes.len(),
                wopts.workloads.len()
            ));
            let recs = progress.bench(&wopts, &keys, ds)?;
            println!(
                "\n{ds} — {} keys, 15/16 bulk-loaded, then {} operations per index: ycsb-write-only \
                 inserts the other 1/16, ycsb-balanced is half inserts, half lookups; the durable \
                 store `db` (1 MiB memory budget) vs the B+-tree (1 MiB page cache)",
                keys.len(),
                wopts.ops
            );
            report(&recs);
            all.extend(recs);
        }
    }
    progress.line("done");
    if let Some(p) = &a.json {
        let mut text = String::new();
        for r in &all {
            text.push_str(&serde_json::to_string(r).map_err(|e| Error::invalid(e.to_string()))?);
            text.push('\n');
        }
        std::fs::write(p, text).map_err(|e| Error::io(p, e))?;
    }
    let clean_cmd = if a.dir == Path::new("demo-data") {
        "strata demo --clean".to_string()
    } else {
        format!("strata demo --clean --dir {}", a.dir.display())
    };
    println!(
        "\nDemo data: {} in {} (key files, reused by the next run, and the indexes built from them); `{clean_cmd}` removes it.",
        human_bytes(dir_bytes(&a.dir)),
        dir_label(&a.dir)
    );
    Ok(())
}

/// Prints the table of `recs` and its verdict.
fn report(recs: &[BenchRecord]) {
    let rows: Vec<Row> = recs.iter().map(Row::from).collect();
    print!("{}", table(&rows));
    println!("{}", verdict(&rows));
}

/// What every column of the tables means, printed once before them.
fn legend(profile: &StorageProfile) -> String {
    let latency_us = profile.latency_ns / 1e3;
    let bandwidth = profile.bandwidth_bytes_per_s / 1e6;
    let lines = [
        "How to read the tables: one row per index configuration, one thread, data on this machine's disk;".to_string(),
        "the first row of each workload is the baseline, the B+-tree (`btree`).".to_string(),
        "  kops/s     thousands of operations per second".to_string(),
        "  ratio      kops/s divided by the baseline's: above 1.00x is faster than the B+-tree".to_string(),
        "  p50/p99 µs median and 99th-percentile time of one operation".to_string(),
        format!("  pages      {PAGE}-byte pages read from the device per operation"),
        "  reads      read calls per operation (one call can fetch adjacent pages together, so pages >= reads)".to_string(),
        format!(
            "  model µs   device time per operation modelled from its reads under profile {} ({latency_us:.1} µs per read + bytes at {bandwidth:.0} MB/s):",
            profile.name
        ),
        "             the same on any machine; a read costs far more than a lookup's CPU work, so kinds with equal reads run at about equal speed".to_string(),
        "  mem MiB    memory the index holds (models, pinned nodes, caches, the store's write buffer)".to_string(),
        "  bits/key   the same per key: 8 × bytes / keys".to_string(),
        "  wrong      answers that differed from the expected ones (must be 0)".to_string(),
        format!(
            "  verdict    computed from the table: a kind is faster or slower than the baseline when their kops/s differ by more than {:.0} %",
            LEVEL * 100.0
        ),
    ];
    let mut out = String::new();
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// One row of a demo table: what the table and the verdict show of a record.
#[derive(Debug, Clone)]
struct Row {
    spec: String,
    workload: String,
    ops_s: f64,
    p50_us: f64,
    p99_us: f64,
    pages: Option<f64>,
    reads: Option<f64>,
    model_us: Option<f64>,
    memory_bytes: u64,
    bits_per_key: f64,
    wrong: u64,
}

impl From<&BenchRecord> for Row {
    fn from(r: &BenchRecord) -> Self {
        Row {
            spec: r.spec.clone(),
            workload: r.workload.clone(),
            ops_s: r.throughput_ops_s,
            p50_us: r.latency_ns.p50 as f64 / 1e3,
            p99_us: r.latency_ns.p99 as f64 / 1e3,
            pages: r.io.pages_per_op,
            reads: r.io.reads_per_op,
            model_us: r.io.modelled_us_per_op,
            memory_bytes: r.memory_bytes,
            bits_per_key: r.bits_per_key,
            wrong: r.wrong,
        }
    }
}

impl Row {
    fn mib(&self) -> f64 {
        self.memory_bytes as f64 / (1u64 << 20) as f64
    }
}

/// The first row of `rows` with `workload`: the baseline of its ratios.
fn baseline<'a>(rows: &'a [Row], workload: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.workload == workload)
}

/// `a / b`, 0 when `b` is not positive.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The table of `rows`: every column as wide as its longest cell, two
/// spaces between columns, names left-aligned and numbers right-aligned.
fn table(rows: &[Row]) -> String {
    let f = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |x| format!("{x:.prec$}"));
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let base = baseline(rows, &r.workload).map_or(r.ops_s, |b| b.ops_s);
            vec![
                r.spec.clone(),
                r.workload.clone(),
                format!("{:.1}", r.ops_s / 1e3),
                format!("{:.2}x", ratio(r.ops_s, base)),
                format!("{:.1}", r.p50_us),
                format!("{:.1}", r.p99_us),
                f(r.pages, 2),
                f(r.reads, 2),
                f(r.model_us, 1),
                format!("{:.3}", r.mib()),
                format!("{:.2}", r.bits_per_key),
                r.wrong.to_string(),
            ]
        })
        .collect();
    strata_bench::aligned_table(&strata_bench::TABLE_HEADER, 2, &cells)
}

/// How a row compares with the baseline of its workload on speed or memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cmp {
    Win,
    Tie,
    Lose,
}

/// `Win` when `better` exceeds `worse` by more than [`LEVEL`] of `worse`,
/// `Lose` the other way round, else `Tie`.
fn cmp(better: f64, worse: f64) -> Cmp {
    if better > worse * (1.0 + LEVEL) {
        Cmp::Win
    } else if worse > better * (1.0 + LEVEL) {
        Cmp::Lose
    } else {
        Cmp::Tie
    }
}

/// Speed (kops/s, higher wins) and memory (bytes, lower wins) of `row`
/// against `base`.
fn compare(row: &Row, base: &Row) -> (Cmp, Cmp) {
    (
        cmp(row.ops_s, base.ops_s),
        cmp(base.memory_bytes as f64, row.memory_bytes as f64),
    )
}

/// "win on speed and memory", "win on memory but lose on speed", ...: for
/// one kind (`one`, "wins") or several ("win").
fn outcome((speed, memory): (Cmp, Cmp), one: bool) -> String {
    let verb = |c: Cmp| match (c, one) {
        (Cmp::Win, false) => "win",
        (Cmp::Win, true) => "wins",
        (Cmp::Tie, false) => "tie",
        (Cmp::Tie, true) => "ties",
        (Cmp::Lose, false) => "lose",
        (Cmp::Lose, true) => "loses",
    };
    if speed == memory {
        return format!("{} on speed and memory", verb(speed));
    }
    let mut v = [(speed, "speed"), (memory, "memory")];
    v.sort_by_key(|x| x.0);
    format!(
        "{} on {} but {} on {}",
        verb(v[0].0),
        v[0].1,
        verb(v[1].0),
        v[1].1
    )
}

/// One line that says, from the numbers of `rows` alone, which kind wins on
/// what against the baseline of each workload, and why (reads per operation).
fn verdict(rows: &[Row]) -> String {
    let mut workloads: Vec<&str> = Vec::new();
    for r in rows {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let reads = |r: &Row| r.reads.map_or("-".to_string(), |x| format!("{x:.2}"));
    let mut parts = Vec::new();
    for w in workloads {
        let group: Vec<&Row> = rows.iter().filter(|r| r.workload == w).collect();
        let (base, others) = (group[0], &group[1..]);
        match others {
            [] => parts.push(format!("{w}: only {} ran", base.spec)),
            [o] => parts.push(format!(
                "{w}: {} {} against {}: {:.2}x its kops/s at {} vs {} reads/op, {:.3} vs {:.3} MiB",
                o.spec,
                outcome(compare(o, base), true),
                base.spec,
                ratio(o.ops_s, base.ops_s),
                reads(o),
                reads(base),
                o.mib(),
                base.mib()
            )),
            _ => {
                let fastest = group
                    .iter()
                    .copied()
                    .max_by(|a, b| a.ops_s.partial_cmp(&b.ops_s).unwrap_or(Ordering::Equal))
                    .unwrap_or(base);
                let fastest_text = if std::ptr::eq(fastest, base) {
                    format!(
                        "fastest: the baseline {} ({:.1} kops/s in {:.3} MiB)",
                        base.spec,
                        base.ops_s / 1e3,
                        base.mib()
                    )
                } else {
                    format!(
                        "fastest: {} ({:.1} kops/s = {:.2}x {}, in {:.3} vs {:.3} MiB)",
                        fastest.spec,
                        fastest.ops_s / 1e3,
                        ratio(fastest.ops_s, base.ops_s),
                        base.spec,
                        fastest.mib(),
                        base.mib()
                    )
                };
                // Outcomes by how many kinds have them, most first.
                let mut counts: Vec<(usize, (Cmp, Cmp))> = Vec::new();
                for o in others {
                    let key = compare(o, base);
                    match counts.iter_mut().find(|c| c.1 == key) {
                        Some(c) => c.0 += 1,
                        None => counts.push((1, key)),
                    }
                }
                counts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                let outcomes: Vec<String> = counts
                    .iter()
                    .map(|&(k, key)| format!("{k} of {} {}", others.len(), outcome(key, k == 1)))
                    .collect();
                // The least memory among the kinds that win on memory
                // without losing speed, else among all.
                let frugal = others
                    .iter()
                    .copied()
                    .filter(|r| {
                        let (speed, memory) = compare(r, base);
                        speed != Cmp::Lose && memory == Cmp::Win
                    })
                    .min_by_key(|r| r.memory_bytes);
                let (least, least_what) = match frugal {
                    Some(r) => (r, "least memory without losing speed"),
                    None => (
                        others
                            .iter()
                            .copied()
                            .min_by_key(|r| r.memory_bytes)
                            .unwrap_or(base),
                        "least memory",
                    ),
                };
                let slowest = others
                    .iter()
                    .copied()
                    .min_by(|a, b| a.ops_s.partial_cmp(&b.ops_s).unwrap_or(Ordering::Equal))
                    .unwrap_or(base);
                let same_reads = others
                    .iter()
                    .filter(|r| match (r.reads, base.reads) {
                        (Some(x), Some(b)) => x <= b * (1.0 + LEVEL) + 1e-9,
                        _ => false,
                    })
                    .count();
                parts.push(format!(
                    "{w}: {fastest_text}; against {}, {}; {least_what}: {} ({:.2} vs {:.2} bits/key); \
                     slowest {} ({:.2}x) with {} reads/op, where {same_reads} of {} make no more than {}'s {}",
                    base.spec,
                    outcomes.join(", "),
                    least.spec,
                    least.bits_per_key,
                    base.bits_per_key,
                    slowest.spec,
                    ratio(slowest.ops_s, base.ops_s),
                    reads(slowest),
                    others.len(),
                    base.spec,
                    reads(base),
                ));
            }
        }
    }
    format!("verdict: {}", parts.join("; "))
}

/// Progress on stderr: bars on a terminal, otherwise a line per phase and
/// per configuration run with the elapsed time; nothing with `--quiet`.
struct Progress {
    quiet: bool,
    lines: bool,
    start: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        Progress {
            quiet,
            lines: !quiet && !std::io::stderr().is_terminal(),
            start: Instant::now(),
            bar: None,
        }
    }

    /// A line with the elapsed time, when stderr is not a terminal.
    fn line(&self, msg: &str) {
        if self.lines {
            eprintln!("[{:>7.1} s] {msg}", self.start.elapsed().as_secs_f64());
        }
    }

    /// Starts a phase: a spinner on a terminal, a line otherwise.
    fn phase(&mut self, msg: &str) {
        self.clear();
        self.line(msg);
        self.bar = Some(crate::progress(self.quiet, None, msg));
    }

    fn clear(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }

    /// Runs the benchmark of `opts`, showing its progress: on a terminal
    /// with the bars of `strata bench`, otherwise with a line per run.
    fn bench(&mut self, opts: &BenchOptions, keys: &[u64], ds: &str) -> Result<Vec<BenchRecord>> {
        self.clear();
        if !self.quiet && !self.lines {
            return crate::run_bench(opts, keys, crate::JsonSink::Discard, false);
        }
        let total = opts.indexes.len() * opts.workloads.len() * opts.repeat.max(1);
        let mut started = 0;
        // The run going on: what, since when, and its build time.
        let mut current: Option<(String, Instant, f64)> = None;
        let mut build_start: Option<Instant> = None;
        let finish = |current: &mut Option<(String, Instant, f64)>| {
            if let Some((what, start, build_s)) = current.take() {
                let built = if build_s > 0.0 {
                    format!("built in {build_s:.1} s, ")
                } else {
                    String::new()
                };
                self.line(&format!(
                    "{what}: {built}ran in {:.1} s",
                    start.elapsed().as_secs_f64()
                ));
            }
        };
        let mut on_event = |e: Event| match e {
            Event::Building { .. } => {
                finish(&mut current);
                build_start = Some(Instant::now());
            }
            Event::Running {
                spec, workload, ops, ..
            } => {
                finish(&mut current);
                started += 1;
                let build_s = build_start.take().map_or(0.0, |t| t.elapsed().as_secs_f64());
                let what = format!("{ds} {started}/{total}: {spec} {workload}, {ops} ops");
                current = Some((what, Instant::now(), build_s));
            }
            Event::Done(_) => finish(&mut current),
            Event::Progress { .. } => {}
        };
        let result = strata_bench::run(opts, keys, &mut on_event);
        finish(&mut current);
        result
    }
}

/// Whether `name` in the demo's directory is something the demo wrote: a key
/// file `DIST-N.keys` or an index directory `DIST-indexes`.
fn is_demo_entry(name: &str, is_dir: bool) -> bool {
    if is_dir {
        name.strip_suffix("-indexes")
            .is_some_and(|d| d.parse::<Dist>().is_ok())
    } else {
        name.strip_suffix(".keys")
            .and_then(|s| s.rsplit_once('-'))
            .is_some_and(|(d, n)| {
                !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && d.parse::<Dist>().is_ok()
            })
    }
}

/// `strata demo --clean`: removes the demo's key files and index
/// directories from `dir`, then `dir` itself if it is empty; anything else
/// is left alone and named.
fn clean(dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!("Nothing to remove: {} does not exist.", dir_label(dir));
            return Ok(());
        }
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut removed = 0u64;
    let mut kept = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map_err(|e| Error::io(&path, e))?.is_dir();
        if !is_demo_entry(&name, is_dir) {
            kept.push(name);
            continue;
        }
        removed += dir_bytes(&path);
        if is_dir {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        }
        .map_err(|e| Error::io(&path, e))?;
    }
    if kept.is_empty() {
        std::fs::remove_dir(dir).map_err(|e| Error::io(dir, e))?;
        println!("Removed {} ({}).", dir_label(dir), human_bytes(removed));
    } else {
        kept.sort();
        println!(
            "Removed the demo's data from {} ({}); left alone what the demo did not write: {}.",
            dir_label(dir),
            human_bytes(removed),
            kept.join(", ")
        );
    }
    Ok(())
}

/// Bytes of the files under `path` (a file or a directory tree).
fn dir_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| dir_bytes(&e.path())).sum())
        .unwrap_or(0)
}

/// `dir` as the user names it, with a trailing slash.
fn dir_label(dir: &Path) -> String {
    let s = dir.display().to_string();
    if s.ends_with('/') { s } else { s + "/" }
}

/// A byte count in decimal units, as `du --si` and file managers show it.
fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.0} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.0} kB", b / 1e3)
    } else {
        format!("{b} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(spec: &str, workload: &str, kops: f64, memory_bytes: u64, reads: f64) -> Row {
        Row {
            spec: spec.into(),
            workload: workload.into(),
            ops_s: kops * 1e3,
            p50_us: 70.0,
            p99_us: 100.0,
            pages: Some(reads),
            reads: Some(reads),
            model_us: Some(70.0 * reads),
            memory_bytes,
            bits_per_key: memory_bytes as f64 * 8.0 / 1e6,
            wrong: 0,
        }
    }

    #[test]
    fn the_verdict_follows_the_numbers() {
        let rows = [
            row("btree", "lookup", 15.0, 10_000, 1.0),
            row("pgm", "lookup", 12.0, 1_000, 1.0),
            row("zonemap", "lookup", 11.0, 2_000, 1.0),
            row("rmi", "lookup", 14.9, 800_000, 1.0),
            row("binary", "lookup", 2.5, 10, 5.4),
        ];
        let v = verdict(&rows);
        assert!(
            v.starts_with("verdict: lookup: fastest: the baseline btree (15.0 kops/s"),
            "{v}"
        );
        assert!(v.contains("against btree, 3 of 4 win on memory but lose on speed, 1 of 4 ties on speed but loses on memory"), "{v}");
        assert!(
            v.contains("; least memory: binary (0.00 vs 0.08 bits/key)"),
            "{v}"
        );
        assert!(
            v.contains(
                "slowest binary (0.17x) with 5.40 reads/op, where 3 of 4 make no more than btree's 1.00"
            ),
            "{v}"
        );
        assert_eq!(v.lines().count(), 1);

        // The same kinds with other numbers: another verdict.
        let rows = [
            row("btree", "lookup", 10.0, 10_000, 1.0),
            row("pgm", "lookup", 12.0, 1_000, 1.0),
            row("zonemap", "lookup", 11.0, 2_000, 1.0),
        ];
        let v = verdict(&rows);
        assert!(v.contains("fastest: pgm (12.0 kops/s = 1.20x btree"), "{v}");
        assert!(v.contains("2 of 2 win on speed and memory"), "{v}");
        assert!(
            v.contains("least memory without losing speed: pgm (0.01 vs 0.08 bits/key)"),
            "{v}"
        );
    }

    #[test]
    fn a_pair_gets_one_clause_per_workload() {
        let rows = [
            row("btree:cache=1M", "ycsb-write-only", 8.0, 600_000, 0.35),
            row("db:memory=1M", "ycsb-write-only", 280.0, 12_000, 0.0),
            row("btree:cache=1M", "ycsb-balanced", 9.0, 500_000, 0.3),
            row("db:memory=1M", "ycsb-balanced", 8.0, 6_000, 0.5),
        ];
        let v = verdict(&rows);
        assert!(
            v.contains("ycsb-write-only: db:memory=1M wins on speed and memory against btree:cache=1M: 35.00x its kops/s at 0.00 vs 0.35 reads/op"),
            "{v}"
        );
        assert!(
            v.contains(
                "ycsb-balanced: db:memory=1M wins on memory but loses on speed against btree:cache=1M: 0.89x"
            ),
            "{v}"
        );
    }

    #[test]
    fn columns_are_as_wide_as_their_longest_cell() {
        let rows = [
            row("btree:cache=1M", "ycsb-write-only", 8.0, 600_000, 0.35),
            row(
                "air:memory_budget=1M,profile=nvme,top_k=5",
                "ycsb-balanced",
                1234.5,
                12_000,
                0.0,
            ),
        ];
        let t = table(&rows);
        assert!(
            t.contains("air:memory_budget=1M,profile=nvme,top_k=5  ycsb-balanced"),
            "{t}"
        );
        let lines: Vec<&str> = t.lines().collect();
        let end = |l: &str, cell: &str| {
            l.find(cell)
                .map(|i| l[..i].chars().count() + cell.chars().count())
        };
        // Right-aligned numbers end under the end of their header.
        assert_eq!(end(lines[0], "kops/s"), end(lines[3], "1234.5"));
        assert_eq!(end(lines[0], "kops/s"), end(lines[2], "8.0"));
        assert_eq!(end(lines[0], "wrong"), Some(lines[2].chars().count()));
    }

    #[test]
    fn clean_knows_the_demo_files() {
        assert!(is_demo_entry("fb-like-2000000.keys", false));
        assert!(is_demo_entry("osm-like-indexes", true));
        assert!(!is_demo_entry("osm-like-indexes", false));
        assert!(!is_demo_entry("notes-12.keys", false));
        assert!(!is_demo_entry("fb-like-.keys", false));
        assert!(!is_demo_entry("home", true));
    }
}
