//! `strata demo`: generate data, build every index kind, benchmark them
//! against the B+-tree, print the table.

use std::path::PathBuf;

use clap::Args;
use strata::data::{Dist, KeyChoice, Workload};
use strata::index::{IndexSpec, Residency};
use strata::storage::StorageProfile;
use strata::{Error, Result};
use strata_bench::BenchOptions;

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
const DEMO_WRITE_SPECS: &[&str] = &["btree:cache=1M", "db:memory=1M,insert=blind"];

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Keys per data set.
    #[arg(long, default_value_t = 2_000_000)]
    n: usize,
    /// Lookups per run.
    #[arg(long, default_value_t = 20_000)]
    ops: usize,
    /// Working directory for the data and the indexes.
    #[arg(long, default_value = "demo-data")]
    dir: PathBuf,
    /// Storage profile of the modelled time.
    #[arg(long, default_value = "nvme")]
    profile: String,
    /// Also write the JSON Lines here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Data sets to use.
    #[arg(long = "dataset", default_values_t = ["fb-like".to_string(), "osm-like".to_string()])]
    datasets: Vec<String>,
}

pub fn run(a: DemoArgs, quiet: bool) -> Result<()> {
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
    let mut all = Vec::new();
    for name in &a.datasets {
        let dist: Dist = name.parse()?;
        let file = a.dir.join(format!("{}-{}.keys", dist.name(), a.n));
        let keys = if file.exists() {
            strata::format::read_keys(&file, Default::default())?
        } else {
            let pb = crate::progress(quiet, None, &format!("generating {} {} keys", a.n, dist.name()));
            let keys = strata::data::generate(dist, a.n, 42)?;
            strata::format::write_keys(&file, &keys)?;
            pb.finish_and_clear();
            keys
        };
        let opts = BenchOptions {
            dataset: dist.name().to_string(),
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
            work_dir: a.dir.join(format!("{}-indexes", dist.name())),
            page_size: 4096,
        };
        if !quiet {
            eprintln!(
                "\n{} ({} keys): cold point lookups, O_DIRECT, models in memory, modelled time under {}",
                dist.name(),
                keys.len(),
                profile.name
            );
        }
        let recs = crate::run_bench(&opts, &keys, crate::JsonSink::Discard, quiet)?;
        print!(
            "\n{} — {} keys, {} lookups each\n",
            dist.name(),
            keys.len(),
            a.ops
        );
        print!("{}", strata_bench::format_table(&recs));
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
            if !quiet {
                eprintln!(
                    "\n{}: writes (durable store `db` with a 1 MiB budget vs the B+-tree with a 1 MiB page cache)",
                    dist.name()
                );
            }
            let recs = crate::run_bench(&wopts, &keys, crate::JsonSink::Discard, quiet)?;
            print!(
                "\n{} — {} keys, 15/16 bulk-loaded, {} writes / mixed operations each\n",
                dist.name(),
                keys.len(),
                wopts.ops
            );
            print!("{}", strata_bench::format_table(&recs));
            all.extend(recs);
        }
    }
    if let Some(p) = &a.json {
        let mut text = String::new();
        for r in &all {
            text.push_str(&serde_json::to_string(r).map_err(|e| Error::invalid(e.to_string()))?);
            text.push('\n');
        }
        std::fs::write(p, text).map_err(|e| Error::io(p, e))?;
    }
    Ok(())
}
