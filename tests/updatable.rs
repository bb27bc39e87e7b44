//! The model test of every updatable page-based index kind (issue 18: `btree`
//! and the learned updatable trees): random inserts, updates, deletes, point
//! lookups, lower bounds, scans and cursors against a `BTreeMap`, with
//! checkpoints (`sync`), Reboot steps (close and reopen) and power-loss Crash
//! steps (the power is cut with unsynced writes in flight, the directory
//! crashes, with or without a torn last write, and the index must reopen at
//! its last checkpoint, exactly).
//!
//! Each kind runs [`ops()`] operations per configuration (12,000 by default,
//! 100,000 under `STRATA_FULL=1`), with inner nodes resident and not, with and
//! without a page cache. A kind joins by adding its specs to [`SPECS`].
//! `STRATA_SPECS=btree-ld,alex` runs only the specs of those kinds (here,
//! in `power_loss.rs` and in `strata-cli`'s `index_kill.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use strata::index::{BuildOptions, Index, IndexSpec, OpenOptions, Records, Residency};
use strata::storage::{Directory, MemDirectory};

/// Every updatable kind, with a small-page or small-parameter variant that
/// makes structure modifications frequent.
const SPECS: &[&str] = &[
    "btree",
    "btree:fill=70,page=8192",
    "btree-ld",
    "btree-ld:fill=70",
    "fiting",
    "fiting:epsilon=4,buffer=8",
    "dpgm",
    "dpgm:buffer=16,epsilon=8",
    "lipp",
    "alex",
    "alex:max_node_pages=1",
];

fn full() -> bool {
    std::env::var("STRATA_FULL").is_ok_and(|v| v == "1")
}

/// Whether `spec`'s kind is in `STRATA_SPECS` (comma-separated kind names;
/// all kinds when unset), for full-size runs of some kinds only.
fn selected(spec: &str) -> bool {
    let kind = spec.split(':').next().unwrap_or(spec);
    std::env::var("STRATA_SPECS").map_or(true, |v| v.split(',').any(|k| k == kind))
}

fn ops() -> usize {
    if full() { 100_000 } else { 12_000 }
}

type Model = BTreeMap<u64, u64>;

/// Keys from a small dense range (so inserts collide with existing keys and
/// deletes hit), the extremes of `u64`, and random ones.
fn gen_key(rng: &mut Pcg64Mcg) -> u64 {
    match rng.random_range(0..20) {
        0 => [0, 1, u64::MAX, u64::MAX - 1][rng.random_range(0..4)],
        1..=12 => rng.random_range(0..20_000u64) * 3,
        _ => rng.random::<u64>(),
    }
}

fn existing_key(model: &Model, rng: &mut Pcg64Mcg) -> Option<u64> {
    let probe = gen_key(rng);
    model
        .range(probe..)
        .next()
        .or_else(|| model.iter().next_back())
        .map(|(&k, _)| k)
}

#[derive(Debug, Clone, Copy)]
struct Config {
    resident: Residency,
    cache_pages: usize,
    initial: usize,
    seed: u64,
}

fn open(dir: &MemDirectory, cfg: &Config) -> Box<dyn Index> {
    let opts = OpenOptions {
        resident: cfg.resident,
        cache_pages: cfg.cache_pages,
        ..OpenOptions::default()
    };
    strata::registry::open_in(Arc::new(dir.clone()) as Arc<dyn Directory>, &opts).unwrap()
}

/// Every answer of `idx` against `model`: `len`, `verify`, a full scan.
fn check_all(idx: &dyn Index, model: &Model, what: &str) {
    assert_eq!(idx.len(), model.len() as u64, "{what}: len");
    assert!(idx.verify(&mut |_| {}).is_ok(), "{what}: verify");
    let mut out = Vec::new();
    idx.scan(0, model.len() + 1, &mut out).unwrap();
    let want: Vec<(u64, u64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    assert!(
        out == want,
        "{what}: full scan differs ({} records, {} expected)",
        out.len(),
        want.len()
    );
}

struct Steps {
    reboots: u64,
    crashes: u64,
    syncs: u64,
}

fn run(spec: &str, cfg: Config) -> Steps {
    let what = format!("{spec} {cfg:?}");
    let mut rng = Pcg64Mcg::seed_from_u64(cfg.seed);
    let mut keys: Vec<u64> = (0..cfg.initial).map(|_| gen_key(&mut rng)).collect();
    keys.sort_unstable();
    keys.dedup();
    let dir = MemDirectory::new();
    let s: IndexSpec = spec.parse().unwrap();
    strata::registry::build_in(
        &s,
        Records::ranked(&keys),
        Arc::new(dir.clone()),
        &BuildOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{what}: build: {e}"));
    dir.crash(); // a build is durable when it returns
    let mut model: Model = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let mut synced = model.clone();
    let mut idx = open(&dir, &cfg);
    check_all(idx.as_ref(), &model, &format!("{what}: after the build"));
    let mut steps = Steps {
        reboots: 0,
        crashes: 0,
        syncs: 0,
    };
    let n = ops();
    // Alternate growing and shrinking phases, so structures split and empty.
    let phase = (n / 6).max(1);
    for step in 0..n {
        let shrinking = (step / phase) % 2 == 1;
        let at = format!("{what}, step {step}");
        match rng.random_range(0..1000) {
            0..=349 if !shrinking => {
                let (k, v) = (gen_key(&mut rng), rng.random());
                assert_eq!(idx.insert(k, v).unwrap(), model.insert(k, v), "{at}: insert({k})");
            }
            0..=349 => {
                // A run of consecutive records.
                if let Some(k) = existing_key(&model, &mut rng) {
                    let doomed: Vec<u64> = model
                        .range(k..)
                        .take(rng.random_range(1..24))
                        .map(|(&k, _)| k)
                        .collect();
                    for d in doomed {
                        assert!(idx.delete(d).unwrap(), "{at}: delete({d})");
                        model.remove(&d);
                    }
                }
            }
            350..=449 => {
                if let Some(k) = existing_key(&model, &mut rng) {
                    let v = rng.random();
                    assert_eq!(idx.insert(k, v).unwrap(), model.insert(k, v), "{at}: update({k})");
                }
            }
            450..=549 => {
                let k = gen_key(&mut rng);
                assert_eq!(
                    idx.delete(k).unwrap(),
                    model.remove(&k).is_some(),
                    "{at}: delete({k})"
                );
            }
            550..=749 => {
                let k = if rng.random_bool(0.5) {
                    existing_key(&model, &mut rng).unwrap_or(0)
                } else {
                    gen_key(&mut rng)
                };
                assert_eq!(idx.get(k).unwrap(), model.get(&k).copied(), "{at}: get({k})");
            }
            750..=849 => {
                let k = gen_key(&mut rng).wrapping_add(rng.random_range(0..3));
                let want = model.range(k..).next().map(|(&a, &b)| (a, b));
                assert_eq!(idx.lower_bound(k).unwrap(), want, "{at}: lower_bound({k})");
            }
            850..=899 => {
                let (from, count) = (gen_key(&mut rng), [0, 1, 99, 300, 700][rng.random_range(0..5)]);
                let mut out = Vec::new();
                idx.scan(from, count, &mut out).unwrap();
                let want: Vec<(u64, u64)> = model.range(from..).take(count).map(|(&k, &v)| (k, v)).collect();
                assert_eq!(out, want, "{at}: scan({from}, {count})");
            }
            900..=949 => {
                // A cursor: seek, a few records, seek again (backwards too).
                let mut c = idx.cursor().unwrap();
                for _ in 0..2 {
                    let from = gen_key(&mut rng);
                    c.seek(from).unwrap();
                    let take = rng.random_range(1..40);
                    let mut got = Vec::new();
                    while got.len() < take {
                        match c.next().unwrap() {
                            Some(r) => got.push(r),
                            None => break,
                        }
                    }
                    let want: Vec<(u64, u64)> =
                        model.range(from..).take(take).map(|(&k, &v)| (k, v)).collect();
                    assert_eq!(got, want, "{at}: cursor from {from}");
                }
            }
            950..=979 => {
                idx.sync().unwrap();
                synced = model.clone();
                steps.syncs += 1;
            }
            980..=989 => {
                // Reboot: a clean close makes everything durable.
                drop(idx);
                dir.crash();
                idx = open(&dir, &cfg);
                synced = model.clone();
                check_all(idx.as_ref(), &model, &format!("{at}: after a reboot"));
                steps.reboots += 1;
            }
            _ => {
                // Crash: the power goes with the writes since the last
                // checkpoint unsynced; closing fails; the last write may
                // survive torn. The index reopens at its last checkpoint.
                dir.cut_power_after(0);
                drop(idx);
                if rng.random_bool(0.5) {
                    dir.crash_torn(rng.random());
                } else {
                    dir.crash();
                }
                idx = open(&dir, &cfg);
                model = synced.clone();
                check_all(idx.as_ref(), &model, &format!("{at}: after a crash"));
                steps.crashes += 1;
            }
        }
    }
    idx.sync().unwrap();
    drop(idx);
    dir.crash();
    let idx = open(&dir, &cfg);
    check_all(idx.as_ref(), &model, &format!("{what}: at the end"));
    steps
}

fn configs(seed: u64) -> [Config; 3] {
    [
        Config {
            resident: Residency::Index,
            cache_pages: 0,
            initial: 3_000,
            seed,
        },
        Config {
            resident: Residency::None,
            cache_pages: 0,
            initial: 20_000,
            seed: seed + 1,
        },
        Config {
            resident: Residency::None,
            cache_pages: 8,
            initial: 0,
            seed: seed + 2,
        },
    ]
}

fn model_test(spec: &str) {
    let (mut reboots, mut crashes, mut syncs) = (0, 0, 0);
    for cfg in configs(spec.len() as u64 * 1_000) {
        let s = run(spec, cfg);
        reboots += s.reboots;
        crashes += s.crashes;
        syncs += s.syncs;
    }
    assert!(
        reboots > 10 && crashes > 10,
        "{spec}: {reboots} reboots, {crashes} crashes"
    );
    eprintln!(
        "{spec}: {} operations in 3 configurations, {syncs} checkpoints, {reboots} reboots, {crashes} crashes",
        3 * ops()
    );
}

#[test]
fn every_updatable_kind_matches_the_model() {
    for spec in SPECS.iter().filter(|s| selected(s)) {
        model_test(spec);
    }
}
