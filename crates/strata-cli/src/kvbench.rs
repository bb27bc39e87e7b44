//! `strata kvbench`: a db_bench-style benchmark of key-value engines.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use indicatif::ProgressBar;
use strata::index::parse_size;
use strata::{Error, Result};
use strata_bench::kv::{self, EngineSpec, KvEnv, KvEvent, KvOptions, KvWorkload, SyncMode};

use crate::progress;
use crate::scratch::{self, Scratch};

/// `strata kvbench ...`.
#[derive(Args, Debug)]
pub struct KvBenchArgs {
    /// Engines, comma-separated; the first is the baseline of the ratios.
    /// An engine's own parameters follow it after `:` (commas allowed:
    /// `lsm:index=pgm,boundary=16,rocksdb`). Engines: lsm (strata's LSM
    /// store; its options as `strata::lsm::Options::parse_spec` reads them,
    /// over the run's memory and sync; `lsm:pin=false` keeps tables'
    /// indexes and filters in the block cache, not resident), db (8-byte keys and values only),
    /// and rocksdb, fjall, leveldb when built with their features.
    #[arg(long, default_value = "lsm")]
    engines: String,
    /// Workloads, comma-separated, run in this order on one store per engine
    /// and repeat.
    #[arg(
        long,
        value_name = "WORKLOAD",
        value_delimiter = ',',
        default_value = "fillrandom,readrandom",
        value_parser = WorkloadParser
    )]
    workloads: Vec<KvWorkload>,
    /// Keys written by a fill (and by the load before a first non-fill
    /// workload); with --key-file, the file's key count.
    #[arg(long, default_value_t = 100_000)]
    num: u64,
    /// Operations of the other workloads (default: --num).
    #[arg(long)]
    reads: Option<u64>,
    /// Key size in bytes: 8, 16 or 24.
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    /// Use the keys of a text key file (one per line, 1 byte to 64 KiB - 16
    /// bytes; `strata gen --dist words|urls` writes one) instead of generated
    /// fixed-size keys: loads and fills write them all (fillseq in key
    /// order, fillrandom shuffled), reads pick among them, readmissing asks
    /// each key followed by a zero byte. Empty lines, duplicate keys and
    /// keys over the limit are errors. Not for engine db (u64 keys).
    #[arg(long, conflicts_with_all = ["num", "key_size"])]
    key_file: Option<PathBuf>,
    /// Entries a seekrandom range lookup reads after its seek (db_bench: 10):
    /// each seek reads scan-length + 1 entries.
    #[arg(long, default_value_t = 10)]
    scan_length: u32,
    /// Value size in bytes: 8, 100 or 1000.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Memory budget of every engine (memtables + block cache + index + filter), e.g. 4M.
    #[arg(long, default_value = "8M")]
    memory: String,
    /// When writes are synced: always (or every: each write is on stable
    /// storage when it returns) or never.
    #[arg(long, default_value = "never")]
    sync: String,
    /// Worker threads (readers, for readwhilewriting).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Repeats; engines are interleaved in each (A B C A B C ...).
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// Seed of the operation streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Reopen the store and drop the OS page cache (as root) before every
    /// workload that is not a fill, and read with O_DIRECT where the engine
    /// can (RocksDB).
    #[arg(long)]
    cold: bool,
    /// Where stores are made (default: a temporary directory).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Write the JSON Lines here (otherwise to stdout, and the table to stderr).
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The values of `--workloads`: parsed by [`KvWorkload`]'s `FromStr` and
/// listed in `--help` from [`KvWorkload::ALL`], the table that parser
/// searches, so the help cannot leave a workload out or name one it rejects.
#[derive(Clone, Debug)]
struct WorkloadParser;

impl clap::builder::TypedValueParser for WorkloadParser {
    type Value = KvWorkload;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<KvWorkload, clap::Error> {
        let invalid =
            |msg: String| clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{msg}\n"));
        let s = value
            .to_str()
            .ok_or_else(|| invalid(format!("--workloads: not UTF-8: {value:?}")))?;
        s.trim().parse::<KvWorkload>().map_err(|e| invalid(e.to_string()))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(KvWorkload::ALL.iter().map(|w| {
            clap::builder::PossibleValue::new(w.name()).help(w.summary())
        })))
    }
}

/// Runs `strata kvbench`.
pub fn run(a: KvBenchArgs, quiet: bool) -> Result<()> {
    if a.work_dir.is_none() {
        // Before any thread starts (see `scratch::watch_signals`).
        scratch::watch_signals();
    }
    let engines = EngineSpec::parse_list(&a.engines)?;
    let workloads = a.workloads;
    let key_file = a
        .key_file
        .as_deref()
        .map(kv::KeyFile::read)
        .transpose()?
        .map(std::sync::Arc::new);
    if key_file.is_none() && ![8, 16, 24].contains(&a.key_size) {
        return Err(Error::invalid(format!(
            "--key-size must be 8, 16 or 24, got {}",
            a.key_size
        )));
    }
    if ![8, 100, 1000].contains(&a.value_size) {
        return Err(Error::invalid(format!(
            "--value-size must be 8, 100 or 1000, got {}",
            a.value_size
        )));
    }
    let memory_bytes = parse_size(&a.memory)
        .ok_or_else(|| Error::invalid(format!("--memory: not a size: {:?}", a.memory)))?;
    let sync: SyncMode = a.sync.parse()?;
    let missing: Vec<String> = kv::missing_engines()
        .into_iter()
        .map(|(name, feature)| format!("{name} (--features {feature})"))
        .collect();
    if !quiet && !missing.is_empty() {
        eprintln!("kvbench: this build lacks {}", missing.join(", "));
    }
    // Removed at the end, on SIGINT/SIGTERM/SIGHUP, or by the next run
    // after a SIGKILL (see `scratch`).
    let scratch_dir;
    let work_dir = match a.work_dir {
        Some(d) => d,
        None => {
            let tmp = std::env::temp_dir();
            scratch_dir = Scratch::create(&tmp, "strata-kvbench-").map_err(|e| Error::io(&tmp, e))?;
            scratch_dir.path().to_path_buf()
        }
    };
    let opts = KvOptions {
        engines,
        workloads,
        num: key_file.as_ref().map_or(a.num, |f| f.len()),
        ops: a.reads.unwrap_or(key_file.as_ref().map_or(a.num, |f| f.len())),
        scan_length: a.scan_length,
        seed: a.seed,
        env: KvEnv {
            memory_bytes,
            sync,
            key_size: a.key_size,
            key_file,
            value_size: a.value_size,
            direct_reads: a.cold,
        },
        threads: a.threads.max(1),
        repeats: a.repeats.max(1),
        cold: a.cold,
        work_dir,
    };
    let mut sink: Box<dyn Write> = match &a.json {
        Some(p) => Box::new(std::fs::File::create(p).map_err(|e| Error::io(p, e))?),
        None => Box::new(std::io::stdout()),
    };
    let mut pb: Option<ProgressBar> = None;
    let mut write_err: Option<Error> = None;
    let mut on_event = |e: KvEvent| match e {
        KvEvent::Loading { engine, repeat } => {
            if let Some(p) = pb.take() {
                p.finish_and_clear();
            }
            pb = Some(progress(quiet, None, &format!("{engine} load #{}", repeat + 1)));
        }
        KvEvent::Running {
            engine,
            workload,
            repeat,
            ..
        } => {
            if let Some(p) = pb.take() {
                p.finish_and_clear();
            }
            pb = Some(progress(
                quiet,
                None,
                &format!("{engine} {workload} #{}", repeat + 1),
            ));
        }
        KvEvent::Done(rec) => {
            let line = serde_json::to_string(&rec).unwrap_or_default();
            if let Err(e) = writeln!(sink, "{line}").and_then(|_| sink.flush()) {
                write_err.get_or_insert(Error::io("kvbench output", e));
            }
        }
    };
    let result = kv::run(&opts, &mut on_event);
    if let Some(p) = pb.take() {
        p.finish_and_clear();
    }
    if let Some(e) = write_err {
        return Err(e);
    }
    let records = result?;
    let table = kv::format_kv_table(&records);
    match a.json {
        Some(_) => print!("{table}"),
        None if !quiet => eprint!("{table}"),
        None => {}
    }
    let wrong: u64 = records.iter().map(|r| r.wrong).sum();
    if wrong > 0 {
        return Err(Error::invalid(format!("{wrong} reads got a wrong answer")));
    }
    Ok(())
}
