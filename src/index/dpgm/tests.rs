//! Tests of the dynamic PGM: page formats, corruption, the level rule
//! through merges, blocks per lookup, a model test against `BTreeMap` with
//! reboots and power-loss crashes (synced and unsynced), failed writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::format::{Seg, encode_model, record_at, seg_at};
use super::run::merge_newest;
use super::*;
use crate::index::{self, IndexSpec};
use crate::pager::BlockSnapshot;
use crate::storage::{FaultKind, FaultOp, FaultyDirectory, MemDirectory, PageCache};

fn build_in(dir: Arc<dyn Directory>, keys: &[u64], spec: &str) {
    let spec: IndexSpec = spec.parse().unwrap();
    index::registry()
        .build_in(&spec, Records::ranked(keys), dir, &BuildOptions::default())
        .unwrap();
}

fn build_mem(keys: &[u64], spec: &str) -> MemDirectory {
    let mem = MemDirectory::new();
    build_in(Arc::new(mem.clone()), keys, spec);
    mem
}

fn open_idx(dir: Arc<dyn Directory>, residency: Residency, cache_pages: usize) -> Dpgm {
    let mut io = IoContext::default();
    if cache_pages > 0 {
        io.cache = Some(Arc::new(PageCache::new(cache_pages, 4096)));
    }
    Dpgm::open(dir, io, residency).unwrap()
}

fn blocks<R>(d: &Dpgm, f: impl FnOnce() -> R) -> (R, BlockSnapshot) {
    let before = d.pager.blocks().snapshot();
    let r = f();
    (r, d.pager.blocks().snapshot().since(&before))
}

// ---------------------------------------------------------------- formats

#[test]
fn capacities() {
    assert_eq!(leaf_capacity(4096), 253);
    assert_eq!(segs_per_page(4096), 170);
    assert_eq!(leaf_capacity(16384), 1015);
}

#[test]
fn record_and_model_pages_round_trip() {
    let entries: Vec<Entry> = (0..253u64)
        .map(|i| Entry {
            key: i * 7 + u64::MAX / 2,
            value: !i,
            dead: i % 3 == 0,
        })
        .collect();
    let mut page = AlignedBuf::zeroed(4096);
    encode_records(&mut page, 9, PageType::DpgmLeaf, &entries);
    open_page(&page, 9, "f", PageType::DpgmLeaf, 253).unwrap();
    let back: Vec<Entry> = (0..253).map(|i| record_at(&page, i).unwrap()).collect();
    assert_eq!(back, entries);
    // Wrong page number, type or count: corruption naming the page.
    assert!(matches!(
        open_page(&page, 10, "f", PageType::DpgmLeaf, 253),
        Err(Error::Corruption { page: 10, .. })
    ));
    assert!(open_page(&page, 9, "f", PageType::DpgmBuffer, 253).is_err());
    assert!(open_page(&page, 9, "f", PageType::DpgmLeaf, 252).is_err());
    let segs: Vec<Seg> = (0..170u64)
        .map(|i| Seg {
            key: i * 1000,
            slope: 0.25 + i as f64,
            intercept: -3.5 * i as f64,
        })
        .collect();
    encode_model(&mut page, 4, 2, &segs);
    let h = open_page(&page, 4, "f", PageType::DpgmModel, 170).unwrap();
    assert_eq!(h.aux, 2);
    let back: Vec<Seg> = (0..170).map(|i| seg_at(&page, i).unwrap()).collect();
    assert_eq!(back, segs);
}

#[test]
fn meta_and_catalog_round_trip() {
    let meta = Meta {
        page_size: 4096,
        n: 12345,
        catalog: 40,
        buffer_first: 1,
        epsilon: 64,
        buffer_cap: 253,
        ratio: 2,
        epsilon_inner: 4,
        buffer_count: 17,
        space: PageSpace {
            page_count: 44,
            free_head: 0,
            free_pages: 0,
        },
        build_id: 77,
    };
    let cp = meta.checkpoint();
    assert_eq!(Meta::from_checkpoint(&cp), meta);
    meta.check("f").unwrap();
    let cat = Catalog {
        runs: vec![super::format::RunDesc {
            level: 3,
            start: 2,
            n: 5000,
            min: 10,
            max: 99_999,
            model: vec![30, 1],
        }],
        free: vec![(25, 15)],
    };
    // Runs: 20 record pages + 1 + 1 model pages = pages 2..24; 24 unused.
    let mut pages = AlignedBuf::zeroed(4 * 4096);
    cat.encode(&mut pages, 40, 4096, "f").unwrap();
    let e = Catalog::decode(&pages, 40, &meta, "f").unwrap_err();
    assert!(e.to_string().contains("unaccounted"), "{e}");
    let cat = Catalog {
        free: vec![(24, 16)],
        ..cat
    };
    cat.encode(&mut pages, 40, 4096, "f").unwrap();
    assert_eq!(Catalog::decode(&pages, 40, &meta, "f").unwrap(), cat);
    // A flipped byte: the catalog page is named.
    pages[4096 + 100] ^= 1;
    assert!(matches!(
        Catalog::decode(&pages, 40, &meta, "f"),
        Err(Error::Corruption { page: 41, .. })
    ));
    let bad = Meta {
        buffer_count: 300,
        ..meta
    };
    assert!(bad.check("f").is_err());
    assert!(check_params(0, 10, 2, 4).is_err());
    assert!(check_params(64, 10, 1, 4).is_err());
}

#[test]
fn merge_keeps_the_newest_version_and_drops_tombstones_at_the_bottom() {
    let e = |key, value, dead| Entry { key, value, dead };
    let newest = vec![e(1, 10, false), e(3, 0, true)];
    let older = vec![e(1, 1, false), e(2, 2, false), e(3, 3, false), e(4, 0, true)];
    assert_eq!(
        merge_newest(vec![newest.clone(), older.clone()], false),
        vec![e(1, 10, false), e(2, 2, false), e(3, 0, true), e(4, 0, true)]
    );
    assert_eq!(
        merge_newest(vec![newest, older], true),
        vec![e(1, 10, false), e(2, 2, false)]
    );
}

// --------------------------------------------------- structure, I/O, SMOs

#[test]
fn merges_keep_the_level_invariant() {
    let keys: Vec<u64> = (0..3000u64).map(|i| i * 10).collect();
    let mem = build_mem(&keys, "dpgm:buffer=64");
    let d = open_idx(Arc::new(mem), Residency::Index, 0);
    let m = d.meta();
    assert_eq!(
        d.state.read().runs.first().map(|r| r.desc.level),
        Some(5),
        "3000 <= 64·2^6"
    );
    for i in 0..5000u64 {
        let smo = d.pager.blocks().snapshot().smo;
        // Distinct new keys: every insert grows the buffer.
        d.insert((i * 7919 % 5000) * 10 + 1, i).unwrap();
        let merged = d.pager.blocks().snapshot().smo > smo;
        assert_eq!(merged, (i + 1) % 64 == 0, "a merge exactly when the buffer fills");
        if merged {
            let st = d.state.read();
            let mut prev = None;
            for r in &st.runs {
                assert!(
                    r.desc.n <= m.level_cap(r.desc.level),
                    "level {} over capacity",
                    r.desc.level
                );
                assert!(
                    prev.is_none_or(|p| p < r.desc.level),
                    "one run per level, by level"
                );
                prev = Some(r.desc.level);
            }
            assert_eq!(st.buffer.len(), 0);
        }
    }
    d.verify_all().unwrap();
    assert_eq!(d.pager.blocks().snapshot().smo, 5000 / 64);
    // Deleting everything: the merge into the deepest level drops the
    // tombstones, the runs vanish and their pages go to the free extents.
    let all: Vec<u64> = {
        let mut out = Vec::new();
        d.scan(0, usize::MAX, &mut out).unwrap();
        out.into_iter().map(|r| r.0).collect()
    };
    for k in &all {
        assert!(d.delete(*k).unwrap());
    }
    assert_eq!(d.len(), 0);
    d.insert(1, 1).unwrap();
    for k in 2..200u64 {
        d.insert(k, k).unwrap();
        d.delete(k).unwrap();
    }
    d.verify_all().unwrap();
    let pages = d.meta().space.page_count;
    // The file no longer grows: churn reuses the freed extents.
    for round in 0..20u64 {
        for k in 0..64u64 {
            d.insert(1000 + k, round).unwrap();
        }
        for k in 0..64u64 {
            d.delete(1000 + k).unwrap();
        }
    }
    d.verify_all().unwrap();
    assert!(
        d.meta().space.page_count <= pages + 8,
        "{} > {pages} + 8",
        d.meta().space.page_count
    );
    assert_eq!(d.len(), 1);
}

#[test]
fn blocks_per_lookup_are_deterministic() {
    // 100k keys with quadratic gaps; one run at the last level.
    let keys: Vec<u64> = (0..100_000u64).map(|i| i * i + 3 * i).collect();
    let mem = build_mem(&keys, "dpgm");
    let dir: Arc<dyn Directory> = Arc::new(mem);
    let mut seen = Vec::new();
    for residency in [Residency::Index, Residency::None] {
        let d = open_idx(dir.clone(), residency, 0);
        let levels = d
            .state
            .read()
            .runs
            .first()
            .map(|r| r.desc.model.len())
            .unwrap_or(0) as u64;
        let (_, b) = blocks(&d, || {
            for i in (0..100_000u64).step_by(97) {
                assert_eq!(d.get(keys[i as usize]).unwrap(), Some(i));
            }
        });
        let lookups = 100_000u64.div_ceil(97);
        assert_eq!((b.inner_written, b.leaf_written, b.other_read), (0, 0, 0));
        // A window of 2ε + 3 records: one or two record pages in one call.
        assert!(b.leaf_read >= lookups && b.leaf_read <= 2 * lookups, "{b:?}");
        match residency {
            Residency::Index => assert_eq!(b.inner_read, 0),
            // One window of model pages per model level.
            Residency::None => {
                assert!(b.inner_read >= lookups * levels && b.inner_read <= 2 * lookups * levels)
            }
        }
        seen.push((levels, b.inner_read, b.leaf_read));
    }
    // Same keys, same lookups: the same counts again.
    for (residency, want) in [Residency::Index, Residency::None].into_iter().zip(seen) {
        let d = open_idx(dir.clone(), residency, 0);
        let (_, b) = blocks(&d, || {
            for i in (0..100_000u64).step_by(97) {
                d.get(keys[i as usize]).unwrap();
            }
        });
        assert_eq!((want.1, want.2), (b.inner_read, b.leaf_read));
    }
    // A lookup reads its record window with one read call.
    let d = open_idx(dir, Residency::Index, 0);
    let before = d.io().snapshot();
    d.get(keys[50_000]).unwrap();
    assert_eq!(d.io().snapshot().since(&before).read_calls, 1);
}

#[test]
fn insert_writes_one_buffer_page_until_the_merge() {
    let keys: Vec<u64> = (0..10_000u64).map(|i| i * 2).collect();
    for residency in [Residency::None, Residency::Index] {
        let mem = build_mem(&keys, "dpgm");
        let d = open_idx(Arc::new(mem.clone()), residency, 0);
        // Resident: the buffer is searched in memory and its pages written
        // at the checkpoint; on disk: each insert writes its buffer page.
        let per_insert = u64::from(residency == Residency::None);
        let (_, b) = blocks(&d, || d.insert(1, 1).unwrap());
        assert_eq!((b.leaf_written, b.inner_written, b.smo), (per_insert, 0, 0));
        assert!(b.leaf_read <= 3);
        let (_, b) = blocks(&d, || {
            for k in 1..253u64 {
                d.insert(2 * k + 1, k).unwrap();
            }
        });
        // The 253rd entry fills the buffer: one merge into level 0 (room for
        // 506), writing the new run (one record page, one model page) and no
        // buffer page; the bulk-loaded run stays in its level.
        assert_eq!(b.smo, 1);
        assert_eq!((b.leaf_written, b.inner_written), (251 * per_insert + 1, 1));
        assert_eq!(d.state.read().runs.len(), 2);
        d.insert(100_001, 7).unwrap();
        d.verify_all().unwrap();
        let (_, b) = blocks(&d, || d.sync().unwrap());
        // The catalog (4 pages), and the resident buffer's page.
        assert_eq!((b.other_written, b.leaf_written), (4, 1 - per_insert));
        drop(d);
        mem.crash();
        let d = open_idx(Arc::new(mem), residency, 0);
        assert_eq!(d.len(), 10_254);
        assert_eq!(d.get(100_001).unwrap(), Some(7));
        d.verify_all().unwrap();
    }
}

// --------------------------------------------------------- model test

fn gen_key(rng: &mut Pcg64Mcg) -> u64 {
    match rng.random_range(0..20) {
        0 => [0, 1, u64::MAX, u64::MAX - 1][rng.random_range(0..4)],
        1..=14 => rng.random_range(0..5_000u64) * 3,
        _ => rng.random::<u64>(),
    }
}

fn check_scan(d: &Dpgm, model: &BTreeMap<u64, u64>, from: u64, count: usize) {
    let mut out = Vec::new();
    d.scan(from, count, &mut out).unwrap();
    let want: Vec<(u64, u64)> = model.range(from..).take(count).map(|(&k, &v)| (k, v)).collect();
    assert_eq!(out, want, "scan({from}, {count})");
}

fn run_model(spec: &str, residency: Residency, cache: usize, ops: usize, seed: u64) {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut keys: Vec<u64> = (0..2000).map(|_| gen_key(&mut rng)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mem = build_mem(&keys, spec);
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let mut model: BTreeMap<u64, u64> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let mut synced = model.clone();
    let mut d = open_idx(dir.clone(), residency, cache);
    let mut crashes = 0;
    let mut smo = 0;
    for _ in 0..ops {
        match rng.random_range(0..100) {
            0..=39 => {
                let (k, v) = (gen_key(&mut rng), rng.random());
                assert_eq!(d.insert(k, v).unwrap(), model.insert(k, v), "insert({k})");
            }
            40..=54 => {
                let k = if rng.random_bool(0.7) {
                    model.range(gen_key(&mut rng)..).next().map_or(0, |(&k, _)| k)
                } else {
                    gen_key(&mut rng)
                };
                assert_eq!(d.delete(k).unwrap(), model.remove(&k).is_some(), "delete({k})");
            }
            55..=74 => {
                let k = gen_key(&mut rng);
                assert_eq!(d.get(k).unwrap(), model.get(&k).copied(), "get({k})");
            }
            75..=87 => {
                let k = gen_key(&mut rng).wrapping_add(rng.random_range(0..3));
                let want = model.range(k..).next().map(|(&a, &b)| (a, b));
                assert_eq!(d.lower_bound(k).unwrap(), want, "lower_bound({k})");
            }
            88..=94 => {
                let count = [0, 1, 100, 300, 700][rng.random_range(0..5)];
                check_scan(&d, &model, gen_key(&mut rng), count);
            }
            95..=96 => {
                d.sync().unwrap();
                synced = model.clone();
            }
            _ => {
                smo += d.pager.blocks().snapshot().smo;
                match rng.random_range(0..3) {
                    // Reboot: a clean close (which syncs).
                    0 => {
                        drop(d);
                        synced = model.clone();
                    }
                    // Power loss after the last sync: unsynced writes are
                    // lost (torn writes included); reopening rolls back to
                    // the last checkpoint.
                    1 => {
                        mem.crash();
                        std::mem::forget(d);
                        model = synced.clone();
                        crashes += 1;
                    }
                    _ => {
                        mem.crash_torn(rng.random());
                        std::mem::forget(d);
                        model = synced.clone();
                        crashes += 1;
                    }
                }
                d = open_idx(dir.clone(), residency, cache);
                assert_eq!(d.len(), model.len() as u64);
                d.verify_all().unwrap();
            }
        }
    }
    assert_eq!(d.len(), model.len() as u64);
    d.verify_all().unwrap();
    check_scan(&d, &model, 0, usize::MAX);
    assert!(crashes > 0);
    assert!(smo + d.pager.blocks().snapshot().smo > 0);
}

#[test]
fn model_resident_index_small_buffer() {
    run_model("dpgm:buffer=16,epsilon=8", Residency::Index, 0, 6000, 1);
}

#[test]
fn model_resident_none_small_buffer() {
    run_model(
        "dpgm:buffer=16,epsilon=4,epsilon_inner=1,ratio=3",
        Residency::None,
        0,
        6000,
        2,
    );
}

#[test]
fn model_default_params_with_cache() {
    run_model("dpgm", Residency::Index, 8, 6000, 3);
}

#[test]
fn model_ten_thousand_ops() {
    run_model("dpgm:buffer=64,epsilon=16", Residency::None, 0, 12_000, 4);
}

#[test]
fn cursor_sees_a_consistent_order_across_merges() {
    let keys: Vec<u64> = (0..1000u64).map(|i| i * 4).collect();
    let mem = build_mem(&keys, "dpgm:buffer=8");
    let d = open_idx(Arc::new(mem), Residency::Index, 0);
    let mut c = d.cursor().unwrap();
    c.seek(100).unwrap();
    let mut last = c.next().unwrap().unwrap().0;
    assert_eq!(last, 100);
    for i in 0..200u64 {
        // Inserts (and merges) between cursor calls.
        d.insert(i * 4 + 1, i).unwrap();
        let Some((k, _)) = c.next().unwrap() else { break };
        assert!(k > last, "{k} after {last}");
        last = k;
    }
}

// ----------------------------------------------------- corruption, faults

#[test]
fn corrupt_pages_are_detected_naming_file_and_page() {
    let keys: Vec<u64> = (0..100_000u64).collect();
    let mem = build_mem(&keys, "dpgm");
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let d = open_idx(dir.clone(), Residency::Index, 0);
    let run = d.state.read().runs.first().unwrap().desc.clone();
    let catalog = d.meta().catalog;
    drop(d);
    // Record page 3 of the run holds keys 759..1012.
    let page = run.start + 3;
    mem.file(DPGM_FILE).unwrap().corrupt_byte(page * 4096 + 100);
    let d = open_idx(dir.clone(), Residency::Index, 0);
    let e = d.get(800).unwrap_err();
    assert!(
        matches!(&e, Error::Corruption { page: p, file, .. } if *p == page && file.contains(DPGM_FILE)),
        "{e}"
    );
    assert!(d.scan(700, 1000, &mut Vec::new()).unwrap_err().is_corruption());
    assert!(d.insert(801, 0).unwrap_err().is_corruption());
    assert_eq!(d.get(10).unwrap(), Some(10), "other pages still answer");
    assert!(d.verify_all().is_err());
    drop(d);
    mem.file(DPGM_FILE).unwrap().corrupt_byte(page * 4096 + 100); // undo
    // A model page: found by a lookup without residency, and at open with.
    let model_page = run.model_first(4096, 0);
    mem.file(DPGM_FILE).unwrap().corrupt_byte(model_page * 4096 + 40);
    let d = open_idx(dir.clone(), Residency::None, 0);
    assert!(d.get(5).unwrap_err().is_corruption());
    let e = Dpgm::open(dir.clone(), IoContext::default(), Residency::Index).unwrap_err();
    assert!(
        matches!(e, Error::Corruption { page, .. } if page == model_page),
        "{e}"
    );
    drop(d);
    mem.file(DPGM_FILE).unwrap().corrupt_byte(model_page * 4096 + 40);
    // The catalog and the checkpoint page.
    mem.file(DPGM_FILE).unwrap().corrupt_byte(catalog * 4096 + 30);
    let e = Dpgm::open(dir.clone(), IoContext::default(), Residency::None).unwrap_err();
    assert!(
        matches!(e, Error::Corruption { page, .. } if page == catalog),
        "{e}"
    );
    mem.file(DPGM_FILE).unwrap().corrupt_byte(catalog * 4096 + 30);
    mem.file(DPGM_FILE).unwrap().corrupt_byte(200);
    let e = Dpgm::open(dir, IoContext::default(), Residency::None).unwrap_err();
    assert!(matches!(e, Error::Corruption { page: 0, .. }), "{e}");
}

#[test]
fn failed_writes_poison_and_crash_recovers_the_synced_state() {
    for countdown in [0u64, 1, 2, 5] {
        let keys: Vec<u64> = (0..5000u64).map(|i| i * 2).collect();
        let fd = FaultyDirectory::new();
        build_in(Arc::new(fd.clone()), &keys, "dpgm:buffer=32");
        let dir: Arc<dyn Directory> = Arc::new(fd.clone());
        let d = open_idx(dir.clone(), Residency::Index, 0);
        for k in 0..40u64 {
            d.insert(k * 2 + 1, k).unwrap();
        }
        d.sync().unwrap();
        fd.plan().inject(FaultOp::Write, countdown, FaultKind::Eio, true);
        let mut failed = false;
        for k in 40..200u64 {
            if d.insert(k * 2 + 1, k).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed, "the fault fired");
        assert!(d.insert(1, 1).is_err(), "poisoned");
        assert!(d.delete(0).is_err(), "poisoned");
        assert!(d.sync().is_err(), "poisoned");
        assert_eq!(d.get(3).unwrap(), Some(1), "reads still answer");
        drop(d);
        fd.plan().clear();
        fd.crash();
        let d = open_idx(dir, Residency::Index, 0);
        assert_eq!(d.len(), 5040);
        d.verify_all().unwrap();
        assert_eq!(d.get(79).unwrap(), Some(39));
        assert_eq!(d.get(81).unwrap(), None);
    }
}

#[test]
fn registry_build_open_and_stats() {
    let keys: Vec<u64> = (0..20_000u64).map(|i| i * 5).collect();
    let mem = MemDirectory::new();
    build_in(Arc::new(mem.clone()), &keys, "dpgm:epsilon=32");
    let idx = index::registry()
        .open_in(Arc::new(mem), &OpenOptions::default())
        .unwrap();
    assert_eq!(idx.kind(), "dpgm");
    assert!(idx.supports_updates());
    assert_eq!(idx.get(500).unwrap(), Some(100));
    let st = idx.stats().unwrap();
    assert_eq!(st.n, 20_000);
    assert!(st.extra.contains_key("blocks"));
    assert_eq!(st.extra["epsilon"], 32);
    assert!(idx.verify(&mut |_| {}).unwrap() > 80);
    let e = index::registry()
        .check_spec(&"dpgm:bogus=1".parse().unwrap(), &BuildOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    assert!(
        index::registry()
            .check_spec(&"dpgm:ratio=1".parse().unwrap(), &BuildOptions::default())
            .is_err()
    );
}

mod prop {
    use proptest::prelude::*;

    use super::*;
    use crate::index::dpgm::run::{Paged, partition};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever window a search starts from (a model's prediction, right
        /// or wrong), the partition point is the true lower bound: a bad
        /// model costs reads, never a wrong answer.
        #[test]
        fn partition_finds_the_lower_bound_from_any_window(
            mut keys in proptest::collection::vec(any::<u64>(), 1..2000),
            probes in proptest::collection::vec((any::<u64>(), 0u64..2100, 0u64..300), 1..40),
        ) {
            keys.sort_unstable();
            keys.dedup();
            let mem = build_mem(&keys, "dpgm:epsilon=4");
            let d = open_idx(Arc::new(mem), Residency::None, 0);
            let desc = d.state.read().runs.first().unwrap().desc.clone();
            let arr = Paged::records(&desc, 4096);
            let mut buf = AlignedBuf::zeroed(0);
            for (i, &(x, lo, width)) in probes.iter().enumerate() {
                // Every other probe is a stored key.
                let x = if i % 2 == 0 { keys[(x % keys.len() as u64) as usize] } else { x };
                let f = partition(&d.pager, &arr, lo, lo + width, &|k| k < x, &mut buf).unwrap();
                prop_assert_eq!(f.pp, keys.partition_point(|&k| k < x) as u64, "x {} window {}+{}", x, lo, width);
                prop_assert_eq!(d.get(x).unwrap(), keys.binary_search(&x).ok().map(|p| p as u64));
            }
        }
    }
}
