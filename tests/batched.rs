//! Batched lookups (`get_many`, `lower_bound_many`) against the one-by-one
//! path: the same answers, and the same read calls, pages and bytes per
//! lookup where every key reads a range of its own, on every read engine
//! (io_uring, the pool of `pread` threads, one by one) and queue depth.

use rand::{Rng, SeedableRng};
use strata::index::{BuildOptions, Index, IndexSpec, OpenOptions, Residency};
use strata::storage::IoEngine;

/// 200,000 keys with gaps, and a batch of lookups each on a page of its
/// own: every 1,000th key (a 4 KiB data page holds 255 records), half of
/// them shifted to a key that is absent, in shuffled order.
fn data() -> (Vec<u64>, Vec<u64>) {
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(19);
    let mut keys: Vec<u64> = Vec::with_capacity(200_000);
    let mut k = 0u64;
    for _ in 0..200_000 {
        k += rng.random_range(1..1_000u64);
        keys.push(k * 2);
    }
    let mut batch: Vec<u64> = keys
        .iter()
        .step_by(1000)
        .enumerate()
        .map(|(i, &k)| if i % 2 == 0 { k } else { k + 1 })
        .collect();
    for i in (1..batch.len()).rev() {
        batch.swap(i, rng.random_range(0..=i));
    }
    (keys, batch)
}

fn engines() -> Vec<IoEngine> {
    let mut e = vec![IoEngine::Threads, IoEngine::Sync];
    if strata::storage::uring_available() {
        e.push(IoEngine::Uring);
    }
    e
}

/// Answers of `get` and `lower_bound` for a batch, and the read calls,
/// pages and bytes each took.
type Answers = (Vec<Option<u64>>, Vec<Option<(u64, u64)>>, [u64; 3], [u64; 3]);

/// One-by-one answers and the I/O they took.
fn one_by_one(idx: &dyn Index, batch: &[u64]) -> Answers {
    let io = idx.io().clone();
    let s0 = io.snapshot();
    let gets: Vec<Option<u64>> = batch.iter().map(|&k| idx.get(k).unwrap()).collect();
    let s1 = io.snapshot();
    let lbs: Vec<Option<(u64, u64)>> = batch.iter().map(|&k| idx.lower_bound(k).unwrap()).collect();
    let s2 = io.snapshot();
    let d = |a: strata::storage::IoSnapshot, b: strata::storage::IoSnapshot| {
        let x = b.since(&a);
        [x.read_calls, x.pages_read, x.bytes_read]
    };
    (gets, lbs, d(s0, s1), d(s1, s2))
}

fn batched(idx: &dyn Index, batch: &[u64]) -> Answers {
    let io = idx.io().clone();
    let s0 = io.snapshot();
    let mut gets = Vec::new();
    idx.get_many(batch, &mut gets).unwrap();
    let s1 = io.snapshot();
    let mut lbs = Vec::new();
    idx.lower_bound_many(batch, &mut lbs).unwrap();
    let s2 = io.snapshot();
    let d = |a: strata::storage::IoSnapshot, b: strata::storage::IoSnapshot| {
        let x = b.since(&a);
        [x.read_calls, x.pages_read, x.bytes_read]
    };
    (gets, lbs, d(s0, s1), d(s1, s2))
}

/// Builds `spec` and compares both paths; `same_io`: the I/O must be
/// equal, else the batch may read less (pages shared within a round).
fn compare(spec: &str, resident: Residency, same_io: bool) {
    let (keys, batch) = data();
    let tmp = tempfile::tempdir().unwrap();
    let s: IndexSpec = spec.parse().unwrap();
    strata::registry::build(&s, &keys, tmp.path(), &BuildOptions::default()).unwrap();
    let base = OpenOptions {
        direct: true,
        resident,
        ..OpenOptions::default()
    };
    let (want_g, want_l, io_g, io_l) = {
        let idx = strata::registry::open(tmp.path(), &base).unwrap();
        one_by_one(idx.as_ref(), &batch)
    };
    assert!(
        io_g[0] >= batch.len() as u64,
        "{spec}: one read per lookup at least"
    );
    for engine in engines() {
        for qd in [1, 4, 32] {
            let what = format!("{spec} resident={resident} {engine:?} qd={qd}");
            let opts = OpenOptions {
                io_engine: engine,
                queue_depth: qd,
                ..base.clone()
            };
            let idx = strata::registry::open(tmp.path(), &opts).unwrap();
            let (g, l, bio_g, bio_l) = batched(idx.as_ref(), &batch);
            assert_eq!(g, want_g, "{what}: get_many answers");
            assert_eq!(l, want_l, "{what}: lower_bound_many answers");
            if same_io {
                assert_eq!(bio_g, io_g, "{what}: get_many read calls, pages, bytes");
                assert_eq!(bio_l, io_l, "{what}: lower_bound_many read calls, pages, bytes");
            } else {
                for (b, o) in [(bio_g, io_g), (bio_l, io_l)] {
                    assert!(
                        b[1] <= o[1] && b[2] <= o[2],
                        "{what}: batch {b:?} > one by one {o:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn gap_zonemap_d_same_answers_and_io() {
    compare("gap-zonemap-d", Residency::Index, true);
}

#[test]
fn pgm_disk_cpr_same_answers_and_io() {
    compare("pgm-disk-cpr", Residency::Index, true);
}

#[test]
fn zonemap_pgm_rmi_rs_same_answers_and_io() {
    for spec in [
        "zonemap",
        "pgm",
        "rmi",
        "rs",
        "zonemap:fetch=one-by-one",
        "pgm:fetch=one-by-one",
    ] {
        compare(spec, Residency::Index, true);
    }
}

#[test]
fn btree_same_answers_and_io() {
    compare("btree", Residency::Index, true);
    compare("btree-ld", Residency::Index, true);
}

/// Levels on storage: read level by level, a node shared by keys of one
/// round read once (the root: once per batch instead of once per key).
#[test]
fn levels_on_storage_read_level_by_level() {
    compare("btree", Residency::None, false);
    compare("pgm", Residency::None, false);
    compare("btree-static", Residency::None, false);
    compare("binary", Residency::None, false);
}

/// The updatable learned kinds, bulk-loaded: with their upper levels
/// resident every key reads the pages of its own lookup; with nothing
/// resident the levels are read level by level, shared within a round.
#[test]
fn updatable_kinds_same_answers_and_io() {
    for spec in ["fiting", "dpgm"] {
        compare(spec, Residency::Index, true);
    }
    // A bulk-loaded ALEX data node holds up to ~1,400 records here, so keys
    // 1,000 apart often share one: its head page (and the pages they both
    // touch) is read once for them, fewer pages than one by one.
    compare("alex", Residency::Index, false);
    // LIPP's root header shares its page with the first slots: a key whose
    // slot is there reads it one by one, not in a batch that holds it.
    compare("lipp", Residency::Index, false);
}

#[test]
fn updatable_kinds_levels_on_storage() {
    for spec in ["fiting", "dpgm", "alex", "lipp"] {
        compare(spec, Residency::None, false);
    }
}

/// After inserts (new keys and updates) and deletes through `Index`, the
/// batched answers equal one lookup per key, on every engine and residency,
/// and the batch reads no more pages than the lookups one by one.
#[test]
fn updatable_kinds_after_inserts_and_deletes() {
    let (keys, _) = data();
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
    let max = *keys.last().unwrap();
    let mut ops: Vec<(bool, u64)> = Vec::new();
    for i in 0..3_000 {
        match i % 3 {
            0 => ops.push((true, rng.random_range(0..max + 5_000))),
            1 => ops.push((true, keys[rng.random_range(0..keys.len())])),
            _ => ops.push((false, keys[rng.random_range(0..keys.len())])),
        }
    }
    let mut batch: Vec<u64> = (0..600).map(|_| rng.random_range(0..max + 10_000)).collect();
    batch.extend(ops.iter().step_by(5).map(|&(_, k)| k));
    batch.extend(ops.iter().step_by(7).map(|&(_, k)| k + 1));
    batch.extend([0, 1, max, max + 1, u64::MAX]);
    batch.extend(batch.clone().iter().take(50));
    for spec in ["fiting:buffer=16", "dpgm:buffer=64", "alex", "lipp"] {
        let tmp = tempfile::tempdir().unwrap();
        let s: IndexSpec = spec.parse().unwrap();
        strata::registry::build(&s, &keys, tmp.path(), &BuildOptions::default()).unwrap();
        {
            let idx = strata::registry::open(tmp.path(), &OpenOptions::default()).unwrap();
            for (i, &(ins, k)) in ops.iter().enumerate() {
                if ins {
                    idx.insert(k, i as u64).unwrap();
                } else {
                    idx.delete(k).unwrap();
                }
            }
            idx.sync().unwrap();
        }
        for resident in [Residency::Index, Residency::None] {
            for engine in engines() {
                // Queue depth 1 and 4 on bulk-loaded indexes above.
                for qd in [32] {
                    let what = format!("{spec} resident={resident} {engine:?} qd={qd}");
                    let opts = OpenOptions {
                        direct: true,
                        resident,
                        io_engine: engine,
                        queue_depth: qd,
                        ..OpenOptions::default()
                    };
                    let idx = strata::registry::open(tmp.path(), &opts).unwrap();
                    let (want_g, want_l, io_g, io_l) = one_by_one(idx.as_ref(), &batch);
                    let (g, l, bio_g, bio_l) = batched(idx.as_ref(), &batch);
                    assert_eq!(g, want_g, "{what}: get_many answers");
                    assert_eq!(l, want_l, "{what}: lower_bound_many answers");
                    for (b, o) in [(bio_g, io_g), (bio_l, io_l)] {
                        assert!(
                            b[1] <= o[1] && b[2] <= o[2],
                            "{what}: batch {b:?} > one by one {o:?}"
                        );
                    }
                    // Inserting through the same index after a batch: the
                    // next batch sees it.
                    if resident == Residency::Index {
                        idx.insert(max + 3, 42).unwrap();
                        let mut got = Vec::new();
                        idx.get_many(&[max + 3, 1, max + 3], &mut got).unwrap();
                        assert_eq!(got[0], Some(42), "{what}");
                        assert_eq!(got[2], Some(42), "{what}");
                        idx.delete(max + 3).unwrap();
                        got.clear();
                        idx.get_many(&[max + 3], &mut got).unwrap();
                        assert_eq!(got, vec![None], "{what}");
                    }
                }
            }
        }
    }
}

/// A B+-tree scan reads the leaves after the first in one batch when its
/// leaves are routed from memory (inner nodes pinned, or `btree-ld`'s
/// directory): the same records, pages and bytes as a cursor taking one
/// record at a time (which follows the sibling links one leaf per read),
/// also after inserts have split leaves all over the file.
#[test]
fn btree_scans_read_ahead_the_same_pages() {
    let (keys, _) = data();
    for spec in ["btree", "btree-ld"] {
        let tmp = tempfile::tempdir().unwrap();
        let s: IndexSpec = spec.parse().unwrap();
        strata::registry::build(&s, &keys, tmp.path(), &BuildOptions::default()).unwrap();
        for round in 0..2 {
            let idx = strata::registry::open(
                tmp.path(),
                &OpenOptions {
                    direct: true,
                    ..OpenOptions::default()
                },
            )
            .unwrap();
            if round == 1 {
                // Splits: the new leaves go to the end of the file.
                for (i, &k) in keys.iter().enumerate().step_by(3) {
                    idx.insert(k + 1, i as u64).unwrap();
                }
            }
            let io = idx.io().clone();
            for (j, &from) in keys.iter().step_by(23_457).enumerate() {
                let count = [1, 300, 2_000, 10_000][j % 4];
                let s0 = io.snapshot();
                let mut got = Vec::new();
                idx.scan(from, count, &mut got).unwrap();
                let s1 = io.snapshot();
                let mut c = idx.cursor().unwrap();
                c.seek(from).unwrap();
                let mut want = Vec::new();
                while want.len() < count {
                    match c.next().unwrap() {
                        Some(r) => want.push(r),
                        None => break,
                    }
                }
                drop(c);
                let s2 = io.snapshot();
                let what = format!("{spec} round {round} scan({from}, {count})");
                assert_eq!(got, want, "{what}");
                let (a, b) = (s1.since(&s0), s2.since(&s1));
                assert_eq!(
                    (a.read_calls, a.pages_read, a.bytes_read),
                    (b.read_calls, b.pages_read, b.bytes_read),
                    "{what}"
                );
            }
        }
    }
}

/// Dense sorted probes (a join's outer keys): the layered engine reads the
/// union of overlapping or touching ranges once (reads of at most 16 pages
/// after the first window), so each page is read once, in far fewer read
/// calls than one by one, with the same answers.
#[test]
fn dense_probes_read_each_page_once() {
    let (keys, _) = data();
    let probe: Vec<u64> = keys[50_000..60_000].iter().flat_map(|&k| [k, k + 1]).collect();
    // The B+-tree reads leaves that follow each other on disk in one call.
    for spec in ["pgm", "gap-zonemap-d", "btree"] {
        let tmp = tempfile::tempdir().unwrap();
        let s: IndexSpec = spec.parse().unwrap();
        strata::registry::build(&s, &keys, tmp.path(), &BuildOptions::default()).unwrap();
        let opts = OpenOptions {
            direct: true,
            ..OpenOptions::default()
        };
        let idx = strata::registry::open(tmp.path(), &opts).unwrap();
        let (want, _, one, _) = one_by_one(idx.as_ref(), &probe);
        let (got, _, many, _) = batched(idx.as_ref(), &probe);
        assert_eq!(got, want, "{spec}");
        // 10,000 keys over 40 pages of 255 records: 41 pages where they do
        // not start on a page, one more at each end for the windows.
        let pages = 10_000u64.div_ceil(255) + 3;
        assert!(many[1] <= pages, "{spec}: {many:?} pages read, at most {pages}");
        assert!(many[0] <= pages.div_ceil(16) + 2, "{spec}: {many:?} read calls");
        assert!(one[0] >= 20_000, "{spec}: one by one {one:?}");
    }
}

/// The data pages `[first, last]` the windows of the keys from `a` to `b`
/// span (`approx` of each: a learned kind's windows are ascending).
fn window_pages(idx: &dyn Index, a: u64, b: u64) -> u64 {
    let lo = idx.approx(a).unwrap().unwrap().lo;
    let hi = idx.approx(b).unwrap().unwrap().hi;
    // 4 KiB pages of 255 records.
    (hi - 1) / 255 - lo / 255 + 1
}

/// Dense sorted probes over a sampled PGM whose window (4,096 records, 17
/// pages) is wider than a read grows to (16 pages): each window read takes
/// only the pages past the ones read for the keys before, and a key whose
/// window spans several reads searches each, so every data page of the
/// windows is read once: 54 pages in 4 reads here, where each read of a
/// whole window (at most one per read) took 646 pages in 38 reads.
#[test]
fn wide_windows_read_each_page_once() {
    // Runs of keys with gaps of their own, so that the PGM over every
    // 128th key is 15 samples off in places (a 4,096-record window).
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(23);
    let mut keys: Vec<u64> = Vec::with_capacity(200_000);
    let mut k = 0u64;
    while keys.len() < 200_000 {
        let gap = rng.random_range(1..1_000u64);
        for _ in 0..rng.random_range(1..5_000) {
            k += rng.random_range(1..=gap);
            keys.push(k);
        }
    }
    let probe: Vec<u64> = keys[50_000..60_000].iter().flat_map(|&k| [k, k + 1]).collect();
    let tmp = tempfile::tempdir().unwrap();
    let s: IndexSpec = "pgm:sample=128,epsilon=15".parse().unwrap();
    strata::registry::build(&s, &keys, tmp.path(), &BuildOptions::default()).unwrap();
    for engine in engines() {
        for qd in [1, 4, 32] {
            let opts = OpenOptions {
                direct: true,
                io_engine: engine,
                queue_depth: qd,
                ..OpenOptions::default()
            };
            let idx = strata::registry::open(tmp.path(), &opts).unwrap();
            let what = format!("{engine:?} qd={qd}");
            let a = idx.approx(probe[0]).unwrap().unwrap();
            assert!(a.hi - a.lo >= 4_000, "{what}: window {a:?}");
            let span = window_pages(idx.as_ref(), probe[0], *probe.last().unwrap());
            let (want_g, want_l, one_g, _) = one_by_one(idx.as_ref(), &probe);
            let (g, l, many_g, many_l) = batched(idx.as_ref(), &probe);
            assert_eq!(g, want_g, "{what}: get_many answers");
            assert_eq!(l, want_l, "{what}: lower_bound_many answers");
            assert!(
                many_g[1] <= span,
                "{what}: get_many read {many_g:?}, {span} pages"
            );
            // A lower bound past its window reads the next page (once).
            assert!(
                many_l[1] <= span + 1,
                "{what}: lower_bound_many read {many_l:?}, {span} pages"
            );
            assert!(
                many_g[0] <= span.div_ceil(16) + 2,
                "{what}: {many_g:?} read calls"
            );
            assert!(one_g[1] >= 20_000 * 16, "{what}: one by one {one_g:?}");
        }
    }
}

/// The data pages a batch's windows span (`approx` of each key), and the
/// pages after the windows (where a lower bound at a window's end is).
fn union_pages(idx: &dyn Index, batch: &[u64]) -> (usize, usize) {
    let mut pages = std::collections::BTreeSet::new();
    let mut after = std::collections::BTreeSet::new();
    for &k in batch {
        let a = idx.approx(k).unwrap().unwrap();
        let hi = a.hi.min(idx.len());
        if a.lo < hi {
            pages.extend(a.lo / 255..=(hi - 1) / 255);
        }
        after.insert(hi / 255);
    }
    (pages.len(), after.len())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Random batches (dense runs of keys present and absent, random keys,
    /// repeats, the ends of the key space, in any order) over kinds with
    /// narrow and wide windows: the answers of lookups one by one, and
    /// `get_many` reads no page twice (`lower_bound_many` may read a page
    /// after a window once more).
    #[test]
    fn batches_answer_as_lookups_and_read_each_page_once(
        seed in 0u64..1_000,
        n in 2_000usize..30_000,
        spec in proptest::sample::select(vec![
            "pgm:sample=128,epsilon=15",
            "pgm:sample=16,epsilon=3",
            "pgm:sample=3,epsilon=1",
            "pgm:epsilon=256",
            "pgm",
            "zonemap",
        ]),
        qd in proptest::sample::select(vec![1usize, 4, 32]),
    ) {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let mut keys: Vec<u64> = Vec::with_capacity(n);
        let mut k = 0u64;
        while keys.len() < n {
            let gap = rng.random_range(1..1_000u64);
            for _ in 0..rng.random_range(1..3_000) {
                k += rng.random_range(1..=gap);
                keys.push(k);
            }
        }
        keys.truncate(n);
        let mut batch: Vec<u64> = Vec::new();
        for _ in 0..rng.random_range(1..4) {
            let from = rng.random_range(0..n);
            let len = rng.random_range(1..3_000).min(n - from);
            let step = rng.random_range(1..4);
            for &k in keys[from..from + len].iter().step_by(step) {
                batch.push(k);
                if rng.random_bool(0.5) {
                    batch.push(k + 1);
                }
            }
        }
        for _ in 0..rng.random_range(0..200) {
            batch.push(rng.random_range(0..k + 1_000));
        }
        batch.extend([0, 1, k, k + 1, u64::MAX]);
        batch.extend(batch.clone().iter().step_by(7).take(40));
        if rng.random_bool(0.5) {
            for i in (1..batch.len()).rev() {
                batch.swap(i, rng.random_range(0..=i));
            }
        }
        let tmp = tempfile::tempdir().unwrap();
        let s: IndexSpec = spec.parse().unwrap();
        strata::registry::build(&s, &keys, tmp.path(), &BuildOptions::default()).unwrap();
        let opts = OpenOptions {
            direct: true,
            queue_depth: qd,
            ..OpenOptions::default()
        };
        let idx = strata::registry::open(tmp.path(), &opts).unwrap();
        let (want_g, want_l, _, _) = one_by_one(idx.as_ref(), &batch);
        let (g, l, many_g, many_l) = batched(idx.as_ref(), &batch);
        proptest::prop_assert_eq!(g, want_g);
        proptest::prop_assert_eq!(l, want_l);
        let (pages, after) = union_pages(idx.as_ref(), &batch);
        proptest::prop_assert!(many_g[1] <= pages as u64, "get_many read {:?}, windows span {} pages", many_g, pages);
        proptest::prop_assert!(
            many_l[1] <= (pages + after) as u64,
            "lower_bound_many read {:?}, windows span {} pages, {} after", many_l, pages, after
        );
    }
}
