//! Tests of the cost model against real lookups, the tuner's guarantees and
//! its determinism.

use std::sync::Arc;

use super::builders::{Builder, Outline};
use super::*;
use crate::data::Dist;
use crate::format::DataRun;
use crate::index::layered::Keys;
use crate::index::{BuildOptions, Index, OpenOptions, Records, Residency};
use crate::storage::{Directory, MemDirectory, StorageProfile};

fn keys(dist: &str, n: usize) -> Vec<u64> {
    crate::data::generate(dist.parse::<Dist>().unwrap(), n, 3).unwrap()
}

fn profile(name: &str) -> StorageProfile {
    StorageProfile::named(name).unwrap()
}

fn tune_with(keys: &[u64], opts: &TuneOptions) -> Tuned {
    Tuner::new(keys, 255, 4096, DEFAULT_SAMPLES)
        .unwrap()
        .tune(opts)
        .unwrap()
}

/// Builds `spec` in memory and opens it with `resident` and `prof`.
fn open(spec: &str, keys: &[u64], resident: Residency, prof: &StorageProfile) -> Box<dyn Index> {
    let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
    let s: IndexSpec = spec.parse().unwrap();
    super::registry()
        .build_in(&s, Records::ranked(keys), dir.clone(), &BuildOptions::default())
        .unwrap();
    super::registry()
        .open_in(
            dir,
            &OpenOptions {
                resident,
                profile: Some(prof.clone()),
                ..Default::default()
            },
        )
        .unwrap()
}

/// Looks up every key of `sample` (all present) and returns the I/O per lookup.
fn measure(idx: &dyn Index, all: &[u64], sample: &QuerySample) -> crate::storage::IoSnapshot {
    let before = idx.io().snapshot();
    for &k in sample.keys() {
        let rank = all.binary_search(&k).unwrap() as u64;
        assert_eq!(idx.get(k).unwrap(), Some(rank), "get({k})");
    }
    idx.io().snapshot().since(&before)
}

#[test]
fn cost_model_matches_io_stats() {
    let all = keys("fb-like", 100_000);
    // Lookups replayed through the engine, on keys the tuner's own sample
    // was not drawn with (another seed).
    let probe = QuerySample::new(&all, 10_000, 99);
    let n = probe.len() as f64;
    let tuner = Tuner::new(&all, 255, 4096, DEFAULT_SAMPLES).unwrap();
    let tuned = ["nvme", "nfs", "custom:5:20"];
    let fixed = [
        "btree-static",
        "pgm:epsilon=64",
        "pgm-disk-cpr:epsilon=64",
        "rs:epsilon=32",
        "rmi:models=512",
        "leco-zonemap-d",
    ];
    let mut cases: Vec<(String, Vec<LayerView>, Option<Tuned>)> = Vec::new();
    for name in tuned {
        let t = tuner.tune(&TuneOptions::new(profile(name))).unwrap();
        let views = t
            .layer_builds()
            .unwrap()
            .into_iter()
            .map(|l| LayerView::new(l, 4096).unwrap())
            .collect();
        cases.push((format!("air:profile={name}"), views, Some(t)));
    }
    for spec in fixed {
        let (_, views, _) = model_spec(&spec.parse().unwrap(), &all, 4096, &probe).unwrap();
        cases.push((spec.to_string(), views, None));
    }
    let prof = profile("azure-ssd");
    for (spec, views, t) in &cases {
        let idx = open(spec, &all, Residency::None, &prof);
        let io = measure(idx.as_ref(), &all, &probe);
        let bytes = io.bytes_read as f64 / n;
        let calls = io.read_calls as f64 / n;
        // The model replayed on the same keys: exactly the engine's reads.
        let cost = evaluate_stack(all.len() as u64, 255, views, 0, &probe, 4096).unwrap();
        assert!(
            (cost.mean_bytes() - bytes).abs() < 1e-6 * bytes,
            "{spec}: {} vs {bytes}",
            cost.mean_bytes()
        );
        assert!(
            (cost.calls() - calls).abs() < 1e-9,
            "{spec}: {} vs {calls} calls",
            cost.calls()
        );
        let ns = io.modelled_ns_under(&prof) / n;
        assert!(
            (cost.expected_ns(&prof) - ns).abs() < 1e-6 * ns,
            "{spec}: modelled time"
        );
        // The model on its own sample (as the tuner uses it): within 2%.
        let own = evaluate_stack(all.len() as u64, 255, views, 0, tuner.sample(), 4096).unwrap();
        let rel = (own.mean_bytes() - bytes).abs() / bytes;
        assert!(
            rel <= 0.02,
            "{spec}: sampled model {} vs measured {bytes} ({rel})",
            own.mean_bytes()
        );
        if let Some(t) = t {
            // The tuner's own figures (summed edge by edge) against the index.
            let p = &t.profile;
            let measured = io.modelled_ns_under(p) / n;
            assert!(
                (t.cost_ns - measured).abs() <= 0.02 * measured,
                "{spec}: {} vs {measured}",
                t.cost_ns
            );
            assert!(
                (t.read_bytes - bytes).abs() <= 0.02 * bytes,
                "{spec}: {} vs {bytes}",
                t.read_bytes
            );
            assert_eq!(calls, (t.layers.len() + 1) as f64, "{spec}: one call per level");
            assert_eq!(idx.stats().unwrap().height, Some(t.layers.len() as u32));
        }
    }
}

#[test]
fn edge_costs_add_up_to_the_top_down_replay() {
    let all = keys("gmm", 60_000);
    for name in ["sata-ssd", "nfs", "custom:1:1"] {
        let prof = profile(name);
        let tuner = Tuner::new(&all, 255, 4096, DEFAULT_SAMPLES).unwrap();
        let t = tuner.tune(&TuneOptions::new(prof.clone())).unwrap();
        let views: Vec<LayerView> = t
            .layer_builds()
            .unwrap()
            .into_iter()
            .map(|l| LayerView::new(l, 4096).unwrap())
            .collect();
        let replay = evaluate_stack(all.len() as u64, 255, &views, 0, tuner.sample(), 4096).unwrap();
        let got = replay.expected_ns(&prof);
        assert!(
            (got - t.cost_ns).abs() <= 1e-9 * got,
            "{name}: {got} vs {}",
            t.cost_ns
        );
        assert!((replay.mean_bytes() - t.read_bytes).abs() <= 1e-6 * got);
    }
}

#[test]
fn never_costlier_than_a_fixed_design() {
    let all = keys("books-like", 60_000);
    for name in ["optane", "hdd", "nfs"] {
        for k in [1, 3] {
            let mut o = TuneOptions::new(profile(name));
            o.top_k = k;
            let tuner = Tuner::new(&all, 255, 4096, DEFAULT_SAMPLES).unwrap();
            let t = tuner.tune(&o).unwrap();
            let best = t.best_fixed().unwrap();
            assert!(
                t.cost_ns <= best.cost_ns,
                "{name} k={k}: {} > fixed {}",
                t.cost_ns,
                best.cost_ns
            );
            assert!(t.cost_ns <= t.search_cost_ns);
            assert!(t.fixed.iter().all(|f| t.cost_ns <= f.cost_ns));
            // ... and than the named fixed kinds, modelled on the same lookups.
            for spec in [
                "btree-static",
                "zonemap",
                "pgm:epsilon=64",
                "leco-zonemap-d",
                "fiting-static:epsilon=32",
            ] {
                let (c, _, _) = model_spec(&spec.parse().unwrap(), &all, 4096, tuner.sample()).unwrap();
                let fixed = c.expected_ns(&o.profile);
                assert!(
                    t.cost_ns <= fixed * 1.000_001,
                    "{name} k={k}: {} > {spec} {fixed}",
                    t.cost_ns
                );
            }
        }
    }
}

#[test]
fn deterministic_across_runs_and_threads() {
    let all = keys("wiki-like", 60_000);
    for name in ["nvme"] {
        let mut o = TuneOptions::new(profile(name));
        o.threads = 1;
        let a = tune_with(&all, &o);
        o.threads = 2;
        let b = tune_with(&all, &o);
        let c = tune_with(&all, &o);
        for t in [&b, &c] {
            assert_eq!(a.cost_ns.to_bits(), t.cost_ns.to_bits(), "{name}");
            assert_eq!(a.notes(), t.notes(), "{name}");
            let (la, lt) = (a.layer_builds().unwrap(), t.layer_builds().unwrap());
            assert_eq!(la.len(), lt.len());
            for (x, y) in la.iter().zip(&lt) {
                assert_eq!(
                    (&x.kind, &x.flat, x.last_successor),
                    (&y.kind, &y.flat, y.last_successor)
                );
            }
        }
    }
}

#[test]
fn storage_shapes_the_design() {
    let all = keys("fb-like", 60_000);
    let tuner = Tuner::new(&all, 255, 4096, DEFAULT_SAMPLES).unwrap();
    // Cheap calls, costly bytes: an index that reads little.
    let deep = tuner.tune(&TuneOptions::new(profile("custom:1:1"))).unwrap();
    // Costly calls, cheap bytes: shallow.
    let shallow = tuner
        .tune(&TuneOptions::new(profile("custom:100000:10000")))
        .unwrap();
    assert!(deep.layers.len() >= shallow.layers.len());
    assert!(!deep.layers.is_empty());
    assert!(deep.read_bytes < shallow.read_bytes);
    // Data that fits a couple of pages needs no index at all.
    let tiny: Vec<u64> = (0..300u64).collect();
    let t = tune_with(&tiny, &TuneOptions::new(profile("nvme")));
    assert!(t.layers.is_empty());
    assert_eq!(t.read_bytes, 2.0 * 4096.0);
    let none = tune_with(&[], &TuneOptions::new(profile("nfs")));
    assert!(none.layers.is_empty() && none.cost_ns == 0.0);
    // The design map's memo: a second profile reuses the builds of the first.
    let tuner = Tuner::new(&all, 255, 4096, DEFAULT_SAMPLES).unwrap();
    let before = tuner.tune(&TuneOptions::new(profile("nvme"))).unwrap();
    let again = tuner.tune(&TuneOptions::new(profile("nvme"))).unwrap();
    assert!(before.candidates_built > 0);
    assert_eq!(again.candidates_built, 0);
    assert_eq!(again.notes()["candidates_built"], 0);
}

#[test]
fn memory_budget_pins_what_fits() {
    let all = keys("osm-like", 60_000);
    let prof = profile("sata-ssd");
    let probe = QuerySample::new(&all, 5_000, 5);
    for budget in [4096u64, 64 << 10] {
        let mut o = TuneOptions::new(prof.clone());
        o.memory_budget = budget;
        let t = tune_with(&all, &o);
        let pinned: u64 = t
            .layers
            .iter()
            .filter(|l| l.resident)
            .map(|l| l.memory_bytes)
            .sum();
        assert!(pinned <= budget, "{budget}: {pinned}");
        assert_eq!(t.layers.iter().filter(|l| l.resident).count(), t.resident_layers);
        let cold = tune_with(&all, &TuneOptions::new(prof.clone()));
        assert!(t.cost_ns <= cold.cost_ns, "a budget never makes it slower");
        // Opened with resident=index, exactly those layers are pinned and the
        // reads are those of the rest.
        let idx = open(
            &format!("air:profile=sata-ssd,memory_budget={budget}"),
            &all,
            Residency::Index,
            &prof,
        );
        let st = idx.stats().unwrap();
        assert!(st.memory_bytes <= budget, "{budget}: holds {}", st.memory_bytes);
        assert_eq!(st.memory_bytes, pinned);
        let io = measure(idx.as_ref(), &all, &probe);
        let measured = io.modelled_ns_under(&prof) / probe.len() as f64;
        assert!(
            (t.cost_ns - measured).abs() <= 0.02 * measured,
            "{budget}: {} vs {measured}",
            t.cost_ns
        );
    }
}

#[test]
fn every_builder_builds_valid_layers() {
    // Each family over the data and (where it applies) over a layer of each
    // entry width; every present key's final range must hold it.
    let all = keys("gmm", 60_000);
    let data = Outline {
        keys: Keys::Slice(&all),
        width: 16,
        per_page: 255,
        is_data: true,
    };
    for family in Family::ALL {
        for lambda in [256u64, 4096, 65536] {
            let b = Builder { family, lambda };
            if b.param(&data, 4096).is_none() {
                continue;
            }
            let first = LayerView::new(b.build(&data, 4096).unwrap(), 4096).unwrap();
            let mut stacks = vec![vec![first]];
            if !family.root_only() {
                let keys1 = stacks[0][0].keys();
                let upper = Outline {
                    keys: Keys::Slice(&keys1),
                    width: stacks[0][0].kind().width(),
                    per_page: stacks[0][0].per_page(),
                    is_data: false,
                };
                for top in Family::ALL {
                    let tb = Builder {
                        family: top,
                        lambda: 1024,
                    };
                    if tb.param(&upper, 4096).is_none() {
                        continue;
                    }
                    let base = LayerView::new(b.build(&data, 4096).unwrap(), 4096).unwrap();
                    let second = LayerView::new(tb.build(&upper, 4096).unwrap(), 4096).unwrap();
                    stacks.push(vec![base, second]);
                }
            }
            for views in &stacks {
                for (i, &k) in all.iter().enumerate().step_by(7) {
                    let (lo, hi) = cost::predict_range(all.len() as u64, views, k).unwrap();
                    assert!(
                        (lo..hi).contains(&(i as u64)),
                        "{family}({lambda}) under {:?}: key {i} not in [{lo}, {hi})",
                        views.iter().map(|v| v.kind().clone()).collect::<Vec<_>>()
                    );
                }
            }
        }
    }
}

#[test]
fn bad_input_is_an_error() {
    let all = keys("gmm", 1000);
    let mut rev = all.clone();
    rev.swap(10, 11);
    assert!(matches!(
        Tuner::new(&rev, 255, 4096, 100).unwrap_err(),
        Error::OutOfOrder { position: 11, .. }
    ));
    assert!(Tuner::new(&all, 255, 1000, 100).is_err());
    assert!(Tuner::new(&all, 0, 4096, 100).is_err());
    assert!(Tuner::new(&all, 255, 4096, 0).is_err());
    let tuner = Tuner::new(&all, 255, 4096, 100).unwrap();
    let mut o = TuneOptions::new(profile("nvme"));
    o.top_k = 0;
    assert!(tuner.tune(&o).is_err());
    let mut o = TuneOptions::new(profile("nvme"));
    o.lambda_low = 0;
    assert!(tuner.tune(&o).is_err());
    for spec in [
        "air:profile=local",
        "air:profile=floppy",
        "air:builders=btree",
        "air:top_k=0",
        "air:fetch=one-by-one",
        "air:grid_base=1",
    ] {
        let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
        let s: IndexSpec = spec.parse().unwrap();
        let e = super::registry().build_in(&s, Records::ranked(&all), dir, &BuildOptions::default());
        assert!(e.is_err(), "{spec} should fail");
    }
    assert!(model_spec(&"btree".parse().unwrap(), &all, 4096, tuner.sample()).is_err());
    assert!(model_spec(&"pgm:epsilom=3".parse().unwrap(), &all, 4096, tuner.sample()).is_err());
}

#[test]
fn a_page_cache_starts_cold() {
    // The warm curve's first lookup pays for every level, the root included,
    // whatever the open read through the cache.
    let all = keys("fb-like", 60_000);
    for spec in [
        "air:profile=nfs",
        "leco-zonemap-d",
        "btree-static",
        "pgm:epsilon=64",
    ] {
        let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
        let s: IndexSpec = spec.parse().unwrap();
        super::registry()
            .build_in(&s, Records::ranked(&all), dir.clone(), &BuildOptions::default())
            .unwrap();
        let open = |cache_pages| {
            super::registry()
                .open_in(
                    dir.clone(),
                    &OpenOptions {
                        resident: Residency::None,
                        cache_pages,
                        ..Default::default()
                    },
                )
                .unwrap()
        };
        let (cold, cached) = (open(0), open(4096));
        for idx in [&cold, &cached] {
            assert_eq!(idx.get(all[4321]).unwrap(), Some(4321));
        }
        let first = cached.io().snapshot();
        assert_eq!(
            first.read_calls,
            cold.io().snapshot().read_calls,
            "{spec}: first lookup"
        );
        assert_eq!(
            first.bytes_read,
            cold.io().snapshot().bytes_read,
            "{spec}: first lookup"
        );
        // The same key again is served by the cache.
        cached.get(all[4321]).unwrap();
        assert_eq!(
            cached.io().snapshot().read_calls,
            first.read_calls,
            "{spec}: cached"
        );
    }
}

/// A data run of `keys` (4 KiB pages) in a directory in memory.
fn run_of(keys: &[u64]) -> DataRun {
    let dir = MemDirectory::new();
    DataRun::write_ranked(&dir, "run", keys, 4096).unwrap();
    DataRun::open(dir.open_read("run").unwrap()).unwrap()
}

/// The query sample drawn from a data run in one pass is the one drawn
/// from the keys in memory.
#[test]
fn the_sample_of_a_run_is_the_sample_in_memory() {
    let all = keys("osm-like", 30_000);
    let run = run_of(&all);
    for (size, seed) in [(1usize, 1u64), (5_000, 7), (29_999, 3), (30_000, 5), (70_000, 9)] {
        let want = QuerySample::new(&all, size, seed);
        assert_eq!(
            QuerySample::from_keys(Keys::Run(&run), size, seed).unwrap(),
            want,
            "{size}"
        );
        assert_eq!(
            QuerySample::from_keys(Keys::Slice(&all), size, seed).unwrap(),
            want
        );
    }
}

/// `air` designed over a data run read in passes (a streamed build) is the
/// design over the keys in memory, bit for bit, notes included: every
/// builder over the data reads the run (in passes cut small in unit tests).
#[test]
fn air_over_a_data_run_is_air_in_memory() {
    for (dist, n, spec) in [
        ("osm-like", 40_000, "air"),
        (
            "fb-like",
            30_000,
            "air:memory_budget=16k,profile=sata-ssd,samples=5000",
        ),
        (
            "books-like",
            60_000,
            "air:builders=airindex,top_k=3,samples=20000",
        ),
    ] {
        let all = keys(dist, n);
        let run = run_of(&all);
        let params = spec.parse::<IndexSpec>().unwrap().params;
        let want = air_design(&params, &all, 255, 4096).unwrap();
        let got = air_design_in(&params, Keys::Run(&run), 255, 4096).unwrap();
        assert!(!want.layers.is_empty(), "{dist}");
        assert_eq!(got.notes, want.notes, "{dist} {spec}");
        assert_eq!(got.models, want.models, "{dist} {spec}");
        assert_eq!(got.layers.len(), want.layers.len(), "{dist} {spec}");
        for (a, b) in got.layers.iter().zip(&want.layers) {
            assert_eq!(
                (&a.kind, &a.flat, a.last_successor),
                (&b.kind, &b.flat, b.last_successor),
                "{dist} {spec}"
            );
        }
        // Every fixed design (each builder over the data, stacked) costs
        // the same: every candidate over the run is the one in memory.
        let (opts, samples) = options_from_params(&params).unwrap();
        let fixed = |t: Tuner<'_>| serde_json::to_value(t.tune(&opts).unwrap().fixed).unwrap();
        assert_eq!(
            fixed(Tuner::over(Keys::Run(&run), 255, 4096, samples).unwrap().lean()),
            fixed(Tuner::new(&all, 255, 4096, samples).unwrap()),
            "{dist} {spec}"
        );
    }
}

/// `air` over the smallest runs and keys at the top of the domain, from a
/// run as in memory.
#[test]
fn air_over_tiny_and_extreme_runs_is_air_in_memory() {
    let cases: Vec<Vec<u64>> = vec![
        vec![],
        vec![0],
        vec![u64::MAX],
        vec![3, u64::MAX],
        (0..1_000u64).collect(),
        (0..3_000u64).map(|i| u64::MAX - 3_000 + i).collect(),
    ];
    let params = "air:samples=100".parse::<IndexSpec>().unwrap().params;
    for all in &cases {
        let run = run_of(all);
        let want = air_design(&params, all, 255, 4096).unwrap();
        let got = air_design_in(&params, Keys::Run(&run), 255, 4096).unwrap();
        assert_eq!(got.notes, want.notes, "{} keys", all.len());
        assert_eq!(got.layers.len(), want.layers.len());
        for (a, b) in got.layers.iter().zip(&want.layers) {
            assert_eq!((&a.kind, &a.flat), (&b.kind, &b.flat));
        }
    }
}

/// Every builder over a data run builds the layer it builds over the keys
/// in memory, byte for byte.
#[test]
fn every_builder_over_a_run_builds_the_layer_in_memory() {
    let all = keys("wiki-like", 50_000);
    let run = run_of(&all);
    let outline = |keys| Outline {
        keys,
        width: 16,
        per_page: 255,
        is_data: true,
    };
    let mut built = 0;
    for family in Family::ALL {
        for lambda in [256u64, 1000, 4096, 65536] {
            let b = Builder { family, lambda };
            if b.param(&outline(Keys::Slice(&all)), 4096).is_none() {
                continue;
            }
            let want = b.build(&outline(Keys::Slice(&all)), 4096).unwrap();
            let got = b.build(&outline(Keys::Run(&run)), 4096).unwrap();
            assert_eq!(
                (&got.kind, &got.flat, got.last_successor),
                (&want.kind, &want.flat, want.last_successor),
                "{family}({lambda})"
            );
            built += 1;
        }
    }
    assert!(built >= 28, "{built}");
}

/// A lean tuner (keeping only the candidates the search can still pick)
/// chooses what the tuner with every candidate memoised chooses: the same
/// stack, cost, fixed designs and layer bytes, with and without a budget.
#[test]
fn a_lean_tuner_tunes_as_the_memoised_one() {
    let all = keys("osm-like", 50_000);
    let mut budget = TuneOptions::new(profile("nvme"));
    budget.memory_budget = 8 << 10;
    let mut few = TuneOptions::new(profile("hdd"));
    few.top_k = 2;
    for opts in [TuneOptions::new(profile("nvme")), budget, few] {
        let memo = Tuner::new(&all, 255, 4096, 4096).unwrap();
        let want = memo.tune(&opts).unwrap();
        let again = memo.tune(&opts).unwrap();
        assert_eq!(again.candidates_built, 0, "every candidate memoised");
        let got = Tuner::new(&all, 255, 4096, 4096)
            .unwrap()
            .lean()
            .tune(&opts)
            .unwrap();
        assert!(!want.layers.is_empty());
        assert_eq!(
            serde_json::to_value(&got.layers).unwrap(),
            serde_json::to_value(&want.layers).unwrap()
        );
        assert_eq!(got.cost_ns.to_bits(), want.cost_ns.to_bits());
        assert_eq!(got.search_cost_ns.to_bits(), want.search_cost_ns.to_bits());
        assert_eq!(got.source, want.source);
        assert_eq!((got.vertices, got.stacks), (want.vertices, want.stacks));
        assert_same_fixed_and_layers(&got, &want);
    }
}

/// `got` evaluated the same fixed designs as `want` and chose layers of the
/// same bytes.
fn assert_same_fixed_and_layers(got: &Tuned, want: &Tuned) {
    assert_eq!(
        serde_json::to_value(&got.fixed).unwrap(),
        serde_json::to_value(&want.fixed).unwrap()
    );
    let (a, b) = (got.layer_builds().unwrap(), want.layer_builds().unwrap());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (&x.kind, &x.flat, x.last_successor),
            (&y.kind, &y.flat, y.last_successor)
        );
    }
}

/// Band candidates spilled to temporary files (every one, at a limit of 0
/// bytes) are measured, searched over and written as the same candidates
/// held in memory: the same design, costs, fixed designs and layer bytes,
/// over keys in memory and in a data run.
#[test]
fn a_spilling_tuner_tunes_as_one_in_memory() {
    let all = keys("osm-like", 50_000);
    let run = run_of(&all);
    let mut budget = TuneOptions::new(profile("nvme"));
    budget.memory_budget = 8 << 10;
    let mut bands = TuneOptions::new(profile("nvme"));
    bands.families = vec![Family::GBand, Family::EBand];
    let mut banded_winners = 0;
    for opts in [TuneOptions::new(profile("nvme")), budget, bands] {
        let want = Tuner::new(&all, 255, 4096, 4096)
            .unwrap()
            .spill_above(usize::MAX)
            .tune(&opts)
            .unwrap();
        if want
            .layers
            .iter()
            .any(|l| matches!(l.builder, Family::GBand | Family::EBand))
        {
            banded_winners += 1;
        }
        for source in [Keys::Slice(&all), Keys::Run(&run)] {
            let got = Tuner::over(source, 255, 4096, 4096)
                .unwrap()
                .lean()
                .spill_above(0)
                .tune(&opts)
                .unwrap();
            assert_eq!(got.notes(), want.notes());
            assert_same_fixed_and_layers(&got, &want);
        }
    }
    assert!(
        banded_winners >= 1,
        "a spilled band layer is read back as the winner"
    );
}

/// The edge cost of every builder's layer, measured entry by entry in one
/// walk (`edge_reads`, from memory and from a spill), is what the engine's
/// top-down search step reads below it: over the data and over a layer of
/// each kind.
#[test]
fn every_edge_cost_is_the_replay_of_its_lookups() {
    use super::cost::{Below, edge_reads};
    let all = keys("gmm", 60_000);
    let sample = QuerySample::new(&all, 4096, 3);
    let data = Outline {
        keys: Keys::Slice(&all),
        width: 16,
        per_page: 255,
        is_data: true,
    };
    let held = |b: Builder, o: &Outline<'_>, spill: usize| {
        let inputs = |need| Ok(Arc::new(super::builders::prepare(o.keys, need, usize::MAX)?));
        LayerView::held(b.build_with(o, 4096, &inputs, spill).unwrap(), 4096).unwrap()
    };
    let mut walked = 0;
    for family in Family::ALL {
        for lambda in [256u64, 4096, 65536] {
            let b = Builder { family, lambda };
            if b.param(&data, 4096).is_none() {
                continue;
            }
            let base = held(b, &data, usize::MAX);
            let replay = evaluate_stack(
                all.len() as u64,
                255,
                std::slice::from_ref(&base),
                0,
                &sample,
                4096,
            )
            .unwrap();
            let below = Below::data(all.len() as u64, 255);
            for spill in [usize::MAX, 0] {
                let got = edge_reads(&held(b, &data, spill), &below, &sample).unwrap();
                assert_eq!(
                    got, replay.data,
                    "{family}({lambda}) over the data, spill {spill}"
                );
                walked += 1;
            }
            if family.root_only() {
                continue;
            }
            let keys1 = base.keys();
            let upper = Outline {
                keys: Keys::Slice(&keys1),
                width: base.kind().width(),
                per_page: base.per_page(),
                is_data: false,
            };
            for top in Family::ALL {
                let tb = Builder {
                    family: top,
                    lambda: 1024,
                };
                if tb.param(&upper, 4096).is_none() {
                    continue;
                }
                let views = [held(b, &data, usize::MAX), held(tb, &upper, usize::MAX)];
                let replay = evaluate_stack(all.len() as u64, 255, &views, 0, &sample, 4096).unwrap();
                for spill in [usize::MAX, 0] {
                    let got =
                        edge_reads(&held(tb, &upper, spill), &Below::layer(&views[0]), &sample).unwrap();
                    assert_eq!(
                        got, replay.layers[0],
                        "{top} over {family}({lambda}), spill {spill}"
                    );
                    walked += 1;
                }
            }
        }
    }
    assert!(walked >= 60, "{walked}");
}

/// Where the search misjudges (one layer allowed, so every candidate is a
/// root read whole, but the search ranks them by `τ̂`, which assumes layers
/// above), the best fixed design wins: the tuner returns the cheapest of
/// the fixed designs, as the memoised and the lean tuner keep it.
#[test]
fn the_best_fixed_design_wins_where_the_search_misjudges() {
    let all = keys("osm-like", 200_000);
    let mut o = TuneOptions::new(profile("custom:1:100"));
    o.top_k = 1;
    o.max_layers = 1;
    o.families = vec![Family::GBand];
    for tuner in [
        Tuner::new(&all, 255, 4096, 4096).unwrap(),
        Tuner::new(&all, 255, 4096, 4096).unwrap().lean(),
    ] {
        let t = tuner.tune(&o).unwrap();
        let cheapest = t.fixed.iter().map(|f| f.cost_ns).min_by(f64::total_cmp).unwrap();
        let worst = t.fixed.iter().map(|f| f.cost_ns).max_by(f64::total_cmp).unwrap();
        assert!(cheapest < worst);
        assert_eq!(t.source, "fixed");
        assert!(
            t.cost_ns < t.search_cost_ns,
            "{} vs {}",
            t.cost_ns,
            t.search_cost_ns
        );
        assert_eq!(t.cost_ns.to_bits(), cheapest.to_bits());
        let best = t.best_fixed().unwrap();
        assert_eq!(t.layers.len(), best.layers);
        assert!(t.layers.iter().all(|l| l.lambda == best.lambda));
    }
}
