//! `strata`: generate data, build, query, benchmark, profile, inspect and
//! verify disk-resident indexes.

mod db;
mod demo;
mod join;
mod kvbench;
mod lsm;
mod scratch;
mod tune;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, SeedableRng};
use strata::data::{Dist, KeyChoice, Workload};
use strata::format::{KeyFileOptions, KeyWidth};
use strata::index::{self, BuildOptions, IndexSpec, OpenOptions, Residency};
use strata::storage::{ProfileOptions, StorageProfile};
use strata::{Error, Result};
use strata_bench::{BenchOptions, Event};

/// The order of the commands in `strata --help`, that of a first session
/// (said to the user in `after_help`).
const COMMAND_ORDER: &str = "Commands come in the order of a first session: the demo; data (gen, analyze); \
indexes (build, get, scan, join, stress, inspect, verify); tuning and benchmarks (tune, bench, kvbench, \
profile); the stores (db, lsm); the reference (list: index kinds and their parameters, workloads, \
storage profiles).";

#[derive(Parser, Debug)]
#[command(
    name = "strata",
    version,
    about = "Disk-resident learned indexes: build, query, benchmark, tune.",
    after_help = COMMAND_ORDER
)]
struct Cli {
    /// No progress bars or informational output on stderr.
    // Listed after every command's own options (before --help).
    #[arg(long, short, global = true, display_order = 900)]
    quiet: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

/// The commands, in the order of [`COMMAND_ORDER`]. The first paragraph of
/// each doc comment is its one line in `strata --help`, the rest is added
/// in `strata COMMAND --help`.
#[derive(Subcommand, Debug)]
enum Cmd {
    /// Generate data, build the index kinds and benchmark them against the B+-tree.
    Demo(demo::DemoArgs),
    /// Generate a SOSD key file (deterministic for a seed).
    Gen(GenArgs),
    /// Describe a key file: size, range, and how hard it is for learned indexes.
    ///
    /// Prints the number of keys, their range, the 4 KiB pages they fill, and
    /// the segments of PGM at several error bounds, with and without zero
    /// intervals (fewer segments: easier for learned indexes).
    Analyze(AnalyzeArgs),
    /// Build an index over a key file; prints one JSON object.
    ///
    /// The keys stream from the file: the data run is written as they are
    /// read while the models are built from them, and the static kinds (btree,
    /// binary, the zone maps, btree-static, pgm, pgm-disk, pgm-disk-cpr, rs,
    /// rs-disk, rmi, fiting-static, air) hold a few MiB of keys whatever
    /// their number, besides the model (air: the candidate layers it tunes
    /// over past 4 MiB are spilled to temporary files in TMPDIR); the
    /// others read every key into memory first. A bad file (unsorted keys, a wrong size) stops the build
    /// and leaves nothing behind (a previous index at --out stays intact).
    Build(BuildArgs),
    /// Look up keys in an index directory.
    Get(GetArgs),
    /// Scan records from a key.
    Scan(ScanArgs),
    /// Join two relations (key files or indexes) on their keys.
    ///
    /// By an index nested-loop, sort-merge or Grace hash join, within a
    /// memory budget.
    Join(join::JoinArgs),
    /// Random inserts and deletes into an updatable index, with begin/ack lines.
    ///
    /// For `btree` and the updatable learned kinds; checkpointed every
    /// `--sync-every` writes. Prints `begin OP KEY VALUE` before each write
    /// and `ack OP KEY VALUE` for each once the checkpoint that makes it
    /// durable returned (for kill -9 tests).
    Stress(IndexStressArgs),
    /// Show what is in an index directory.
    Inspect(DirArgs),
    /// Read every page of an index or a store and check every checksum.
    ///
    /// A store is also checked for a complete log frame its recovery dropped.
    Verify(DirArgs),
    /// Tune the layers of an index for a storage profile (AirTune) and build it.
    Tune(tune::TuneArgs),
    /// Run workloads against index configurations; JSON Lines and a table.
    Bench(BenchArgs),
    /// db_bench-style key-value benchmark of strata's stores and the peers built in.
    ///
    /// Workloads: fill, read, seek, delete, YCSB A-F; prints JSON Lines and a
    /// table.
    Kvbench(kvbench::KvBenchArgs),
    /// Measure the latency and bandwidth of the device holding PATH.
    Profile(ProfileArgs),
    /// The durable hybrid store: load, get, put, delete, scan, stress, stats.
    Db(db::DbArgs),
    /// The LSM store of byte-string keys and values: load, get, put, scan, compact, ...
    ///
    /// Commands: load, put, get, delete, scan, stats, compact, verify, stress.
    Lsm(lsm::LsmArgs),
    /// List the index kinds with their parameters, distributions, workloads and storage profiles.
    List(ListArgs),
    /// Run SQL over indexes registered as tables `(key UInt64, value UInt64)`.
    ///
    /// `strata sql --table t=fb.pgm "SELECT * FROM t WHERE key BETWEEN 10 AND 99"`:
    /// DataFusion plans the query; filters on the key become batched lookups
    /// and range cursors inside strata, limits and projections are pushed
    /// down. Prints the rows, then (on stderr) the pages each table read
    /// and the query's time. A table may also be an LSM store's directory
    /// (`key Binary, value Binary`).
    /// Only in a build with the feature `sql`.
    #[cfg(feature = "sql")]
    Sql(SqlArgs),
}

#[cfg(feature = "sql")]
#[derive(Args, Debug)]
struct SqlArgs {
    /// The query.
    query: String,
    /// A table: NAME=PATH (an index directory, s3://bucket/prefix, or an LSM store directory); repeat for more.
    #[arg(long = "table", value_name = "NAME=PATH", required = true)]
    tables: Vec<String>,
    /// DataFusion's target partitions (range scans are split into this many key ranges).
    #[arg(long, default_value_t = 2)]
    partitions: usize,
}

#[cfg(feature = "sql")]
fn sql(a: SqlArgs, quiet: bool) -> Result<()> {
    let mut tables = Vec::new();
    for t in &a.tables {
        let (name, path) = t
            .split_once('=')
            .ok_or_else(|| Error::invalid(format!("--table {t:?}: expected NAME=PATH")))?;
        tables.push((name.to_string(), PathBuf::from(path)));
    }
    let out = strata_datafusion::run_sql(&tables, &a.query, a.partitions)?;
    println!("{}", out.text);
    if !quiet {
        for (name, pages, reads) in out.io {
            eprintln!("{name}: {pages} pages in {reads} read calls");
        }
        eprintln!("{} rows in {:.1} ms", out.rows, out.elapsed.as_secs_f64() * 1e3);
    }
    Ok(())
}

#[derive(Args, Debug)]
struct GenArgs {
    /// Distribution: dense, uniform, normal, lognormal, gmm, zipf, ycsb, hard, fb-like, osm-like, wiki-like, books-like
    /// (u64 keys, a SOSD file); or words, urls (text keys: a text file of distinct keys, one per line, sorted bytewise).
    #[arg(long)]
    dist: String,
    /// Number of keys.
    #[arg(long, short)]
    n: usize,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Output file (SOSD format: u64 count + u64 keys, little-endian; for
    /// words and urls a text key file: one key per line, each ending in a newline).
    #[arg(long)]
    out: PathBuf,
    /// For `hard`: target segments at ε = 8.
    #[arg(long)]
    local: Option<u64>,
    /// For `hard`: target segments at ε = 512.
    #[arg(long)]
    global: Option<u64>,
}

#[derive(Args, Debug, Clone)]
struct KeyFileArgs {
    /// SOSD key file.
    #[arg(long)]
    data: PathBuf,
    /// Drop duplicate keys instead of rejecting the file.
    #[arg(long)]
    dedup: bool,
    /// Read the 32-bit SOSD variant.
    #[arg(long)]
    u32: bool,
}

#[derive(Args, Debug)]
struct BuildArgs {
    /// Index kind and parameters, e.g. `pgm:epsilon=64` (see `strata list`).
    #[arg(long)]
    index: String,
    #[command(flatten)]
    keys: KeyFileArgs,
    /// Output directory, or `s3://bucket/prefix` in a build with object
    /// storage (cargo feature `s3`; credentials and endpoint from `AWS_*`).
    #[arg(long)]
    out: PathBuf,
    /// Page size in bytes (4096, 8192, 16384).
    #[arg(long, default_value_t = 4096)]
    page: usize,
    /// Threads that build the models (default: one per core); the data run
    /// is written on one more thread meanwhile.
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Args, Debug)]
struct GetArgs {
    /// Index directory (or `s3://bucket/prefix`, with the feature `s3`).
    dir: PathBuf,
    /// Keys to look up.
    #[arg(required = true)]
    keys: Vec<u64>,
    /// Read with O_DIRECT.
    #[arg(long)]
    direct: bool,
}

#[derive(Args, Debug)]
struct IndexStressArgs {
    /// Index directory (built with an updatable kind).
    dir: PathBuf,
    #[command(flatten)]
    stress: db::StressArgs,
    /// Writes per checkpoint (`sync`).
    #[arg(long, default_value_t = 1)]
    sync_every: u64,
}

#[derive(Args, Debug)]
struct ScanArgs {
    /// Index directory (or `s3://bucket/prefix`, with the feature `s3`).
    dir: PathBuf,
    /// First key (the scan starts at its lower bound).
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Number of records.
    #[arg(long, default_value_t = 10)]
    count: usize,
}

#[derive(Args, Debug)]
struct BenchArgs {
    #[command(flatten)]
    keys: KeyFileArgs,
    /// Index configuration (repeatable), KIND[:NAME=VALUE,...] (the kinds
    /// and their parameters: `strata list`); the first is the baseline of the ratios.
    /// `cache=SIZE` (e.g. `btree:cache=4M`) gives this configuration its own LRU page cache;
    /// `durable=1` syncs the index after every write (inside the timed region);
    /// `resident=index|none` overrides `--resident` for this configuration
    /// (e.g. `btree:resident=none,cache=128K`: a B+-tree held to 128 KiB).
    #[arg(long = "index", value_name = "INDEX", required = true)]
    indexes: Vec<String>,
    /// Workload (repeatable).
    #[arg(long = "workload", value_name = "WORKLOAD", default_value = "lookup", value_parser = workload_values())]
    workloads: Vec<String>,
    /// Operations per run.
    #[arg(long, default_value_t = 100_000)]
    ops: usize,
    /// Storage profile of the modelled time: optane, nvme, sata-ssd, hdd,
    /// azure-ssd, nfs, custom:LAT_US:BW_MB_S, or local (measured first).
    #[arg(long, default_value = "nvme")]
    profile: String,
    /// What stays in memory: index (models/inner nodes) or none.
    #[arg(long, default_value = "index")]
    resident: String,
    /// LRU page cache in front of storage, in pages.
    #[arg(long, default_value_t = 0)]
    cache_pages: usize,
    /// Repeats (configurations are interleaved in each, in reverse order in odd repeats).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Write the JSON Lines here (otherwise to stdout).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Lookups per batch: runs of lookups go to `get_many` this many at a
    /// time (1: one `get` per lookup).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Reads in flight at most in a batch (1-256).
    #[arg(long, default_value_t = strata::storage::DEFAULT_QUEUE_DEPTH)]
    queue_depth: usize,
    /// How batched reads reach local files: auto (io_uring if the kernel
    /// has it, else threads), uring, threads or sync.
    #[arg(long, default_value = "auto")]
    io: String,
    /// Key choice of reads/updates: uniform or zipfian.
    #[arg(long, default_value = "uniform")]
    keys_choice: String,
    /// Seed of the operation stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read through the OS page cache instead of O_DIRECT (not cold).
    #[arg(long)]
    no_direct: bool,
    /// Where indexes are built, kept afterwards (default: a temporary
    /// directory beside the key file, on its device, removed at the end).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Page size for the builds.
    #[arg(long, default_value_t = 4096)]
    page: usize,
    /// Data set name in the records (default: the key file's name).
    #[arg(long)]
    dataset: Option<String>,
    /// Shell command run before every repeat of every workload, between the
    /// configurations' runs, e.g. a device baseline such as fio that should
    /// interleave with them (scripts/peers.sh); it sees STRATA_BENCH_WORKLOAD
    /// and STRATA_BENCH_REPEAT (0-based), its stdout goes to stderr, and its
    /// failure stops the bench.
    #[arg(long, value_name = "CMD")]
    before_repeat: Option<String>,
    /// Run each read-only workload's operations once, untimed, right before
    /// every timed run, so that a warm run (--no-direct, or --cache-pages)
    /// measures reads answered from memory, not what the OS evicted meanwhile.
    #[arg(long)]
    warmup: bool,
}

/// The values of `--workload`: every workload the parser takes
/// ([`Workload::ALL`], with its aliases), each with its summary for `--help`.
fn workload_values() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(Workload::ALL.iter().map(|w| {
        clap::builder::PossibleValue::new(w.name())
            .aliases(w.aliases().iter().copied())
            .help(w.summary())
    }))
}

#[derive(Args, Debug)]
struct ProfileArgs {
    /// A directory on the device to measure (a scratch file is created and removed).
    path: PathBuf,
    /// Scratch file size in MiB.
    #[arg(long, default_value_t = 256)]
    file_mib: u64,
    /// Timed reads per size.
    #[arg(long, default_value_t = 200)]
    reads: usize,
}

#[derive(Args, Debug)]
struct AnalyzeArgs {
    #[command(flatten)]
    keys: KeyFileArgs,
    /// Error bounds to segment at: `--eps 16 64 256` or `--eps 16,64,256`.
    #[arg(long, num_args = 1.., value_delimiter = ',', default_values_t = [16u64, 64, 256, 1024])]
    eps: Vec<u64>,
}

#[derive(Args, Debug)]
struct ListArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct DirArgs {
    /// Index directory.
    dir: PathBuf,
}

/// One malloc arena for every thread (glibc's `M_ARENA_MAX`). By default
/// each thread that allocates gets an arena of its own, which keeps the
/// blocks other threads freed in it: the buffers a build hands between
/// threads (key chunks, partitions, windows) left a streamed 100M-key
/// `pgm-disk-cpr` build on two threads at 69 MiB of RSS, 52 MiB with one
/// arena, at the same speed (the build allocates few, large blocks, so
/// threads hardly contend for the arena; docs/results/build.md). Other C
/// libraries: nothing.
fn one_allocator_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called first thing in main, before any other thread exists;
    // `mallopt` only sets a tuning parameter of the allocator.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

fn main() -> ExitCode {
    // Behave like other Unix tools when the reader of stdout goes away
    // (`strata inspect DIR | head`): end quietly instead of panicking in
    // `println!` on EPIPE.
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any other thread exists;
    // restoring the default disposition of SIGPIPE has no other effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    one_allocator_arena();
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(if cli.quiet {
        "error"
    } else {
        "warn"
    }))
    .format_timestamp(None)
    .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let quiet = cli.quiet;
    match cli.cmd {
        Cmd::Demo(a) => demo::run(a, quiet),
        Cmd::Gen(a) => generate(a, quiet),
        Cmd::Analyze(a) => analyze(a, quiet),
        Cmd::Build(a) => build(a, quiet),
        Cmd::Get(a) => get(a),
        Cmd::Scan(a) => scan(a),
        Cmd::Join(a) => join::run(a, quiet),
        Cmd::Stress(a) => stress(a),
        Cmd::Inspect(a) => inspect(a),
        Cmd::Verify(a) => verify(a, quiet),
        Cmd::Tune(a) => tune::run(a, quiet),
        Cmd::Bench(a) => bench(a, quiet),
        Cmd::Kvbench(a) => kvbench::run(a, quiet),
        Cmd::Profile(a) => profile(a, quiet),
        #[cfg(feature = "sql")]
        Cmd::Sql(a) => sql(a, quiet),
        Cmd::Db(a) => db::run(a, quiet),
        Cmd::Lsm(a) => lsm::run(a, quiet),
        Cmd::List(a) => list(a),
    }
}

/// A spinner or bar on stderr when it is a terminal and not quiet.
pub(crate) fn progress(quiet: bool, len: Option<u64>, msg: &str) -> ProgressBar {
    let pb = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    if quiet || !std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    let style = match len {
        Some(_) => ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} ({eta})"),
        None => ProgressStyle::with_template("{spinner} {msg} ({elapsed})"),
    };
    if let Ok(s) = style {
        pb.set_style(s.progress_chars("=> "));
    }
    pb.set_message(msg.to_string());
    if len.is_none() {
        pb.enable_steady_tick(Duration::from_millis(120));
    }
    pb
}

fn key_file_options(a: &KeyFileArgs) -> KeyFileOptions {
    KeyFileOptions {
        width: if a.u32 { KeyWidth::U32 } else { KeyWidth::Auto },
        dedup: a.dedup,
    }
}

/// An error about the contents of key file `path` that does not name it
/// (keys out of order) as one that does; others (I/O, truncation) name the
/// file already and pass unchanged.
fn in_key_file(path: &Path, e: Error) -> Error {
    match e {
        Error::OutOfOrder { .. } => Error::invalid(format!("key file {}: {e}", path.display())),
        other => other,
    }
}

pub(crate) fn read_key_file(a: &KeyFileArgs, quiet: bool) -> Result<Vec<u64>> {
    let pb = progress(quiet, None, &format!("reading {}", a.data.display()));
    let keys = strata::format::read_keys(&a.data, key_file_options(a));
    pb.finish_and_clear();
    keys.map_err(|e| in_key_file(&a.data, e))
}

/// A key file as a stream of `(key, rank)` records in constant memory, with
/// a progress bar over the file's keys (cleared when the stream is dropped).
pub(crate) struct KeyStream {
    keys: strata::format::KeyReader,
    path: PathBuf,
    pb: ProgressBar,
    rank: u64,
    /// An error met after records of a chunk, handed out after them.
    pending: Option<Error>,
}

impl KeyStream {
    pub(crate) fn open(a: &KeyFileArgs, quiet: bool, what: &str) -> Result<Self> {
        let keys = strata::format::KeyReader::open(&a.data, key_file_options(a))?;
        let pb = progress(quiet, Some(keys.total()), what);
        Ok(KeyStream {
            keys,
            path: a.data.clone(),
            pb,
            rank: 0,
            pending: None,
        })
    }
}

impl Iterator for KeyStream {
    type Item = Result<(u64, u64)>;

    fn next(&mut self) -> Option<Self::Item> {
        let rec = match self.keys.next()? {
            Ok(k) => Ok((k, self.rank)),
            Err(e) => Err(in_key_file(&self.path, e)),
        };
        self.rank += 1;
        if self.rank % 65_536 == 0 {
            self.pb.set_position(self.keys.position());
        }
        Some(rec)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.keys.size_hint()
    }
}

impl KeyStream {
    /// The records in chunks of up to 65,536 (less work per record than the
    /// iterator of single records).
    pub(crate) fn chunks(mut self) -> impl Iterator<Item = Result<Vec<(u64, u64)>>> {
        std::iter::from_fn(move || {
            let mut chunk = Vec::with_capacity(1 << 16);
            while chunk.len() < 1 << 16 {
                match self.keys.next() {
                    Some(Ok(k)) => {
                        chunk.push((k, self.rank));
                        self.rank += 1;
                    }
                    Some(Err(e)) if chunk.is_empty() => return Some(Err(in_key_file(&self.path, e))),
                    // The reader stops after an error: the records read
                    // before it first, the error on the next call.
                    Some(Err(e)) => {
                        self.pending = Some(in_key_file(&self.path, e));
                        break;
                    }
                    None => break,
                }
            }
            self.pb.set_position(self.keys.position());
            if chunk.is_empty() {
                self.pending.take().map(Err)
            } else {
                Some(Ok(chunk))
            }
        })
    }
}

impl Drop for KeyStream {
    fn drop(&mut self) {
        self.pb.finish_and_clear();
    }
}

fn generate(a: GenArgs, quiet: bool) -> Result<()> {
    if let Ok(text) = a.dist.parse::<strata::data::TextDist>() {
        return generate_text(&a, text, quiet);
    }
    let mut dist: Dist = a.dist.parse()?;
    if let Dist::Hard { local, global } = &mut dist {
        if let Some(l) = a.local {
            *local = l;
        }
        if let Some(g) = a.global {
            *global = g;
        }
    } else if a.local.is_some() || a.global.is_some() {
        return Err(Error::invalid("--local and --global apply to --dist hard only"));
    }
    let pb = progress(quiet, None, &format!("generating {} {} keys", a.n, dist.name()));
    let keys = strata::data::generate(dist, a.n, a.seed)?;
    pb.set_message(format!("writing {}", a.out.display()));
    strata::format::write_keys(&a.out, &keys)?;
    pb.finish_and_clear();
    if !quiet {
        eprintln!(
            "wrote {} {} keys (seed {}) to {}",
            keys.len(),
            dist.name(),
            a.seed,
            a.out.display()
        );
    }
    Ok(())
}

/// `strata gen` of a text distribution: a text key file.
fn generate_text(a: &GenArgs, dist: strata::data::TextDist, quiet: bool) -> Result<()> {
    if a.local.is_some() || a.global.is_some() {
        return Err(Error::invalid("--local and --global apply to --dist hard only"));
    }
    let pb = progress(quiet, None, &format!("generating {} {} keys", a.n, dist.name()));
    let keys = strata::data::generate_text(dist, a.n, a.seed)?;
    pb.set_message(format!("writing {}", a.out.display()));
    strata::data::write_text_keys(&a.out, &keys)?;
    pb.finish_and_clear();
    if !quiet {
        eprintln!(
            "wrote {} {} text keys, sorted, one per line (seed {}) to {}",
            keys.len(),
            dist.name(),
            a.seed,
            a.out.display()
        );
    }
    Ok(())
}

/// Checks that the index directory `out` can be made: it is a directory or
/// does not exist, and its nearest existing ancestor is a directory.
fn check_out_dir(out: &Path) -> Result<()> {
    if strata::storage::remote_url(out).is_some() {
        // An object-store prefix: nothing to create, nothing in the way.
        return Ok(());
    }
    let mut at = out;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) if at == out => {
                return Err(Error::invalid(format!(
                    "--out {} exists and is not a directory",
                    out.display()
                )));
            }
            Ok(_) => {
                return Err(Error::invalid(format!(
                    "cannot create --out {}: {} is not a directory",
                    out.display(),
                    at.display()
                )));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                match at.parent() {
                    Some(p) if !p.as_os_str().is_empty() => at = p,
                    // A relative path under the working directory.
                    _ => return Ok(()),
                }
            }
            Err(e) => return Err(Error::io(at, e)),
        }
    }
}

fn build(a: BuildArgs, quiet: bool) -> Result<()> {
    let spec: IndexSpec = a.index.parse()?;
    let opts = BuildOptions { page_size: a.page };
    // Spec and output directory first: nothing is read for a build that
    // would be refused.
    strata::registry::standard().check_spec(&spec, &opts)?;
    if a.threads == Some(0) {
        return Err(Error::invalid("--threads must be at least 1"));
    }
    check_out_dir(&a.out)?;
    // The keys stream from the file: kinds that stream their build hold none
    // of them (the others read them into memory).
    let keys = KeyStream::open(&a.keys, quiet, &format!("building {spec}"))?;
    let stream = strata::index::RecordStream::from_chunks(keys.chunks());
    let run =
        || strata::registry::build_records(&spec, strata::index::Records::stream(&stream), &a.out, &opts);
    let report = match a.threads {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map_err(|e| Error::invalid(format!("cannot start {n} threads: {e}")))?
            .install(run),
        None => run(),
    };
    drop(stream);
    println!(
        "{}",
        serde_json::to_string(&report?).map_err(|e| Error::invalid(e.to_string()))?
    );
    Ok(())
}

fn get(a: GetArgs) -> Result<()> {
    let idx = strata::registry::open(
        &a.dir,
        &OpenOptions {
            direct: a.direct,
            ..Default::default()
        },
    )?;
    let mut out = std::io::stdout().lock();
    for k in a.keys {
        let line = match idx.get(k)? {
            Some(v) => format!("{k}\t{v}"),
            None => format!("{k}\tnot found"),
        };
        writeln!(out, "{line}").map_err(|e| Error::io("stdout", e))?;
    }
    Ok(())
}

fn stress(a: IndexStressArgs) -> Result<()> {
    let db::StressArgs { ops, seed, keys } = a.stress;
    if keys == 0 || a.sync_every == 0 {
        return Err(Error::invalid("--keys and --sync-every must be positive"));
    }
    let idx = strata::registry::open(&a.dir, &OpenOptions::default())?;
    if !idx.supports_updates() {
        return Err(Error::Unsupported(format!(
            "{}: kind {} is not updatable (updatable: btree and the updatable learned kinds)",
            a.dir.display(),
            idx.kind()
        )));
    }
    let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
    let mut pending: Vec<(&str, u64, u64)> = Vec::new();
    for i in 0..ops {
        let key = r.random_range(0..keys);
        if r.random_range(0..4) == 0 {
            db::out(format_args!("begin delete {key} 0"))?;
            idx.delete(key)?;
            pending.push(("delete", key, 0));
        } else {
            let value: u64 = r.random();
            db::out(format_args!("begin put {key} {value}"))?;
            idx.insert(key, value)?;
            pending.push(("put", key, value));
        }
        if (i + 1) % a.sync_every == 0 || i + 1 == ops {
            idx.sync()?;
            for (op, key, value) in pending.drain(..) {
                db::out(format_args!("ack {op} {key} {value}"))?;
            }
        }
    }
    Ok(())
}

fn scan(a: ScanArgs) -> Result<()> {
    let idx = strata::registry::open(&a.dir, &OpenOptions::default())?;
    let mut recs = Vec::new();
    idx.scan(a.from, a.count, &mut recs)?;
    let mut out = std::io::stdout().lock();
    for (k, v) in recs {
        writeln!(out, "{k}\t{v}").map_err(|e| Error::io("stdout", e))?;
    }
    Ok(())
}

/// The directory at `path`: an `s3://bucket/prefix` (with the feature `s3`)
/// or a local directory that exists.
pub(crate) fn open_dir(path: &Path) -> Result<std::sync::Arc<dyn strata::storage::Directory>> {
    match strata::storage::remote_url(path) {
        Some(url) => strata::storage::open_remote(url),
        None => Ok(std::sync::Arc::new(strata::storage::FsDirectory::open(path)?)),
    }
}

/// The storage profile `name`; `local` is measured where `near` is: the
/// local device, or the object store of an `s3://` location (a 32 MiB
/// scratch object, 40 reads per size).
pub(crate) fn resolve_profile(name: &str, near: &Path, quiet: bool) -> Result<StorageProfile> {
    if name != "local" {
        return StorageProfile::named(name);
    }
    if strata::storage::remote_url(near).is_some() {
        let pb = progress(quiet, None, &format!("profiling {}", near.display()));
        let opts = ProfileOptions {
            file_size: 32 << 20,
            reads_per_size: 40,
            ..Default::default()
        };
        let r = strata::storage::profile_device(near, &opts);
        pb.finish_and_clear();
        let r = r?;
        if !quiet {
            eprintln!(
                "{}: latency {:.1} µs, bandwidth {:.0} MB/s",
                near.display(),
                r.latency_us,
                r.bandwidth_mb_s
            );
        }
        return r.to_profile();
    }
    let pb = progress(quiet, None, "profiling the local device");
    let dir = if near.is_dir() {
        near.to_path_buf()
    } else {
        near.parent().unwrap_or(Path::new(".")).to_path_buf()
    };
    let r = strata::storage::profile_device(&dir, &ProfileOptions::default());
    pb.finish_and_clear();
    let r = r?;
    if !quiet {
        eprintln!(
            "local device: latency {:.1} µs, bandwidth {:.0} MB/s",
            r.latency_us, r.bandwidth_mb_s
        );
    }
    r.to_profile()
}

fn bench(a: BenchArgs, quiet: bool) -> Result<()> {
    if a.work_dir.is_none() {
        // Before any thread starts (see `scratch::watch_signals`).
        scratch::watch_signals();
    }
    let keys = read_key_file(&a.keys, quiet)?;
    let indexes = a
        .indexes
        .iter()
        .map(|s| s.parse())
        .collect::<Result<Vec<IndexSpec>>>()?;
    let workloads = a
        .workloads
        .iter()
        .map(|s| s.parse())
        .collect::<Result<Vec<Workload>>>()?;
    // Removed when dropped, at the end of this function (also on an error),
    // or on SIGINT/SIGTERM/SIGHUP, or by the next run after a SIGKILL.
    let scratch_dir;
    let work_dir = match &a.work_dir {
        Some(d) => d.clone(),
        None => {
            scratch_dir = bench_scratch_dir(&a.keys.data)?;
            scratch_dir.path().to_path_buf()
        }
    };
    let profile = resolve_profile(&a.profile, &work_dir, quiet)?;
    let dataset = a.dataset.clone().unwrap_or_else(|| {
        a.keys
            .data
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "data".into())
    });
    let opts = BenchOptions {
        dataset,
        indexes,
        workloads,
        ops: a.ops,
        profile,
        resident: a.resident.parse::<Residency>()?,
        cache_pages: a.cache_pages,
        direct: !a.no_direct,
        repeat: a.repeat,
        seed: a.seed,
        key_choice: a.keys_choice.parse::<KeyChoice>()?,
        threads: a.threads,
        batch: a.batch.max(1),
        queue_depth: a.queue_depth.clamp(1, strata::storage::MAX_QUEUE_DEPTH),
        io_engine: a.io.parse()?,
        work_dir,
        page_size: a.page,
        before_repeat: a.before_repeat.clone(),
        warmup: a.warmup,
    };
    let sink = match a.json.as_deref() {
        Some(p) => JsonSink::File(p),
        None => JsonSink::Stdout,
    };
    run_bench(&opts, &keys, sink, quiet).map(|_| ())
}

/// The default work directory of `strata bench`: a new hidden directory
/// `.strata-bench-*` beside the key file (so indexes live on the device of
/// the data, with `O_DIRECT`, which a `tmpfs` /tmp lacks), or in the
/// system's temporary directory if the key file's is not writable. Removed
/// when dropped or on a signal, and by the next run if the process was
/// killed (see [`scratch`]).
fn bench_scratch_dir(key_file: &Path) -> Result<scratch::Scratch> {
    const PREFIX: &str = ".strata-bench-";
    let beside = match key_file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    scratch::Scratch::create(beside, PREFIX)
        .or_else(|_| scratch::Scratch::create(&std::env::temp_dir(), PREFIX))
        .map_err(|e| Error::io(beside, e))
}

/// Where `run_bench` writes JSON Lines.
pub(crate) enum JsonSink<'a> {
    /// Standard output (the table then goes to stderr).
    Stdout,
    /// A file (the table then goes to stdout).
    File(&'a Path),
    /// Nowhere (the caller prints what it wants).
    Discard,
}

/// Runs the benchmark with progress bars; writes JSON Lines as records
/// complete, then prints the table.
pub(crate) fn run_bench(
    opts: &BenchOptions,
    keys: &[u64],
    json: JsonSink<'_>,
    quiet: bool,
) -> Result<Vec<strata_bench::BenchRecord>> {
    let mut sink: Box<dyn Write> = match json {
        JsonSink::File(p) => Box::new(std::fs::File::create(p).map_err(|e| Error::io(p, e))?),
        JsonSink::Stdout => Box::new(std::io::stdout()),
        JsonSink::Discard => Box::new(std::io::sink()),
    };
    let mut pb: Option<ProgressBar> = None;
    let mut write_err: Option<Error> = None;
    let mut on_event = |e: Event| match e {
        Event::Building { spec } => {
            if let Some(p) = pb.take() {
                p.finish_and_clear();
            }
            pb = Some(progress(quiet, None, &format!("building {spec}")));
        }
        Event::Running {
            spec,
            workload,
            repeat,
            ops,
        } => {
            if let Some(p) = pb.take() {
                p.finish_and_clear();
            }
            let msg = format!("{spec} {workload} #{}", repeat + 1);
            pb = Some(progress(quiet, Some(ops as u64), &msg));
        }
        Event::Progress { done } => {
            if let Some(p) = &pb {
                p.set_position(done as u64);
            }
        }
        Event::Done(rec) => {
            let line = serde_json::to_string(&rec).unwrap_or_default();
            if let Err(e) = writeln!(sink, "{line}").and_then(|_| sink.flush()) {
                write_err.get_or_insert(Error::io("bench output", e));
            }
        }
    };
    let result = strata_bench::run(opts, keys, &mut on_event);
    if let Some(p) = pb.take() {
        p.finish_and_clear();
    }
    if let Some(e) = write_err {
        return Err(e);
    }
    let records = result?;
    let table = strata_bench::format_table(&records);
    match json {
        JsonSink::File(_) => print!("{table}"),
        JsonSink::Stdout if !quiet => eprint!("{table}"),
        _ => {}
    }
    Ok(records)
}

fn profile(a: ProfileArgs, quiet: bool) -> Result<()> {
    let pb = progress(quiet, None, &format!("profiling {}", a.path.display()));
    let opts = ProfileOptions {
        file_size: a.file_mib << 20,
        reads_per_size: a.reads,
        ..Default::default()
    };
    let r = strata::storage::profile_device(&a.path, &opts);
    pb.finish_and_clear();
    println!(
        "{}",
        serde_json::to_string_pretty(&r?).map_err(|e| Error::invalid(e.to_string()))?
    );
    Ok(())
}

fn inspect(a: DirArgs) -> Result<()> {
    let dir = open_dir(&a.dir)?;
    let manifest = index::Manifest::load(dir.as_ref())?;
    let idx = strata::registry::open(&a.dir, &OpenOptions::default())?;
    let stats = idx.stats()?;
    let mut files = serde_json::Map::new();
    // The files of the index (under its build directory on an object store).
    let files_dir = strata::index::files_dir(dir.clone(), &manifest);
    let mut names = files_dir.list()?;
    if !std::sync::Arc::ptr_eq(&files_dir, &dir) {
        names.extend(dir.list()?);
    }
    for name in names {
        let len = match files_dir.open_read(&name) {
            Ok(f) => f.len().unwrap_or(0),
            Err(_) => dir.open_read(&name).and_then(|f| f.len()).unwrap_or(0),
        };
        files.insert(name, len.into());
    }
    let out = serde_json::json!({ "manifest": manifest, "stats": stats, "files": files });
    println!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(|e| Error::invalid(e.to_string()))?
    );
    Ok(())
}

fn verify(a: DirArgs, quiet: bool) -> Result<()> {
    // A store made by `strata db load` has a store manifest and no index
    // manifest: verify it as a store (read-only), which also reports log
    // frames its recovery dropped.
    if a.dir.join(strata::db::DB_MANIFEST_FILE).exists() && !a.dir.join(index::MANIFEST_FILE).exists() {
        return verify_store(&a.dir, quiet);
    }
    let idx = strata::registry::open(
        &a.dir,
        &OpenOptions {
            direct: true,
            resident: Residency::None,
            ..Default::default()
        },
    )?;
    let pb = progress(quiet, None, &format!("verifying {}", a.dir.display()));
    let mut done = 0u64;
    let r = idx.verify(&mut |p| {
        done += p;
        pb.set_message(format!("verifying {}: {done} pages", a.dir.display()));
    });
    pb.finish_and_clear();
    let pages = r?;
    println!(
        "{}",
        serde_json::json!({ "ok": true, "kind": idx.kind(), "pages_checked": pages, "records": idx.len() })
    );
    Ok(())
}

/// `strata verify` on a store directory: opens it read-only and checks the
/// static stage's pages; a complete log frame dropped by recovery is an error.
fn verify_store(dir: &Path, quiet: bool) -> Result<()> {
    let db = strata::Db::open_path(
        dir,
        strata::db::Options {
            read_only: true,
            ..Default::default()
        },
    )?;
    let pb = progress(quiet, None, &format!("verifying {}", dir.display()));
    let mut done = 0u64;
    let r = db.verify(&mut |p| {
        done += p;
        pb.set_message(format!("verifying {}: {done} pages", dir.display()));
    });
    pb.finish_and_clear();
    let pages = r?;
    let st = db.stats()?;
    println!(
        "{}",
        serde_json::json!({
            "ok": true,
            "kind": "db",
            "pages_checked": pages,
            "records": db.count()?,
            "recovery_dropped_frames": st.recovery_dropped_frames,
            "recovery_dropped_bytes": st.recovery_dropped_bytes,
        })
    );
    Ok(())
}

/// What `strata analyze` prints, fields in this order.
#[derive(serde::Serialize)]
struct Analysis {
    file: String,
    n: usize,
    min: Option<u64>,
    max: Option<u64>,
    pages_4k: u64,
    segments: SegmentsByEps,
}

/// PGM segments at each error bound, plain and with zero intervals.
#[derive(serde::Serialize)]
struct SegmentCounts {
    pgm: usize,
    pgm_zero_interval: usize,
}

/// A JSON object keyed by ε in numeric order (`"16"`, `"64"`, ..., `"1024"`;
/// a `serde_json::Map` would sort the keys as strings).
struct SegmentsByEps(Vec<(u64, SegmentCounts)>);

impl serde::Serialize for SegmentsByEps {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (eps, counts) in &self.0 {
            m.serialize_entry(&eps.to_string(), counts)?;
        }
        m.end()
    }
}

fn analyze(a: AnalyzeArgs, quiet: bool) -> Result<()> {
    let keys = read_key_file(&a.keys, quiet)?;
    let per_page = strata::format::records_per_page(4096) as u64;
    let mut eps = a.eps.clone();
    eps.sort_unstable();
    eps.dedup();
    let pb = progress(quiet, None, "segmenting");
    let segments = eps
        .iter()
        .map(|&e| {
            let counts = SegmentCounts {
                pgm: strata::model::optimal_pla(&keys, e).len(),
                pgm_zero_interval: strata::model::optimal_pla_zero_interval(&keys, e, per_page).len(),
            };
            (e, counts)
        })
        .collect();
    pb.finish_and_clear();
    let out = Analysis {
        file: a.keys.data.display().to_string(),
        n: keys.len(),
        min: keys.first().copied(),
        max: keys.last().copied(),
        pages_4k: (keys.len() as u64).div_ceil(per_page),
        segments: SegmentsByEps(segments),
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(|e| Error::invalid(e.to_string()))?
    );
    Ok(())
}

/// Everything `strata list` prints: the kinds with their parameters and
/// defaults (as the kinds resolve them), the parameters every kind takes, the
/// benchmark runner's own, distributions, workloads and storage profiles.
fn listing() -> Result<serde_json::Value> {
    let reg = strata::registry::standard();
    let mut kinds = Vec::new();
    for k in reg.kinds() {
        kinds.push(serde_json::json!({
            "name": k.name(),
            "summary": k.summary(),
            "params": reg.params_of(k.name())?,
        }));
    }
    let page = strata::index::KindParam {
        name: strata::index::PAGE_PARAM.name,
        default: Some(BuildOptions::default().page_size.into()),
        meaning: strata::index::PAGE_PARAM.meaning,
    };
    let profiles: Vec<serde_json::Value> = strata::storage::PRESETS
        .iter()
        .map(|(name, lat, bw, src)| {
            serde_json::json!({ "name": name, "latency_us": lat, "bandwidth_mb_s": bw / 1e6, "source": src })
        })
        .collect();
    Ok(serde_json::json!({
        "kinds": kinds,
        "every_kind_params": [page],
        "bench_params": strata_bench::RUNNER_PARAMS,
        "distributions": Dist::NAMES,
        "text_distributions": strata::data::TextDist::NAMES,
        "workloads": Workload::ALL
            .iter()
            .map(|w| serde_json::json!({ "name": w.name(), "aliases": w.aliases(), "summary": w.summary() }))
            .collect::<Vec<_>>(),
        "profiles": profiles,
    }))
}

/// A parameter's default as a user writes it: sizes of whole MiB as `64M`.
fn default_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(b) if b >= 1 << 20 && b % (1 << 20) == 0 => {
                if b % (1 << 30) == 0 {
                    format!("{}G", b >> 30)
                } else {
                    format!("{}M", b >> 20)
                }
            }
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

fn list(a: ListArgs) -> Result<()> {
    let l = listing()?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&l).map_err(|e| Error::invalid(e.to_string()))?
        );
        return Ok(());
    }
    let text = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let param = |p: &serde_json::Value| match &p["default"] {
        serde_json::Value::Null => format!("{} (unset)", text(p, "name")),
        d => format!("{}={}", text(p, "name"), default_text(d)),
    };
    let empty = Vec::new();
    let all_params = l["kinds"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .flat_map(|k| k["params"].as_array().unwrap_or(&empty).iter())
        .chain(l["every_kind_params"].as_array().unwrap_or(&empty))
        .chain(l["bench_params"].as_array().unwrap_or(&empty));
    let width = all_params.map(|p| param(p).chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line("index kinds (KIND:NAME=VALUE,...; below each kind its parameters, = their defaults):".into());
    for k in l["kinds"].as_array().unwrap_or(&empty) {
        line(format!("  {:<16} {}", text(k, "name"), text(k, "summary")));
        for p in k["params"].as_array().unwrap_or(&empty) {
            line(format!("      {:<width$}  {}", param(p), text(p, "meaning")));
        }
    }
    line("every kind:".into());
    for p in l["every_kind_params"].as_array().unwrap_or(&empty) {
        line(format!("      {:<width$}  {}", param(p), text(p, "meaning")));
    }
    line(
        "every kind in `strata bench` (the runner's, not the kind's; =--OPTION: that option's value):".into(),
    );
    for p in l["bench_params"].as_array().unwrap_or(&empty) {
        line(format!("      {:<width$}  {}", param(p), text(p, "meaning")));
    }
    let names = |k: &str| -> String {
        l[k].as_array()
            .unwrap_or(&empty)
            .iter()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    line(format!("distributions: {}", names("distributions")));
    line(format!("text distributions: {}", names("text_distributions")));
    line("workloads (strata bench --workload):".into());
    for w in l["workloads"].as_array().unwrap_or(&empty) {
        line(format!("  {:<16} {}", text(w, "name"), text(w, "summary")));
    }
    line("storage profiles:".into());
    for p in l["profiles"].as_array().unwrap_or(&empty) {
        line(format!(
            "  {:<10} latency {:>8.1} µs  bandwidth {:>8.0} MB/s  ({})",
            text(p, "name"),
            p["latency_us"].as_f64().unwrap_or(0.0),
            p["bandwidth_mb_s"].as_f64().unwrap_or(0.0),
            text(p, "source")
        ));
    }
    line("  local      measured with `strata profile`; custom:LAT_US:BW_MB_S for any other point".into());
    print!("{out}");
    Ok(())
}
