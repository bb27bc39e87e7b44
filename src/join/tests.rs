//! Every join algorithm against an in-memory oracle: random and adversarial
//! relations, budgets from a few KiB (many runs, several merge passes,
//! partitions split again) to one that holds everything, 1 and 2 threads,
//! unsorted relations sorted by the external sort and by learned
//! partitioning.

use std::collections::HashMap;
use std::path::Path;

use proptest::prelude::*;

use super::*;
use crate::index::{BuildOptions, IndexSpec, OpenOptions};

/// The oracle: count and checksum of the join of `outer` with `inner`.
fn oracle(outer: &[JoinRecord], inner: &[JoinRecord]) -> (u64, u64) {
    let map: HashMap<u64, u64> = inner.iter().copied().collect();
    let mut s = CountSink::new();
    for &(k, po) in outer {
        if let Some(&pi) = map.get(&k) {
            s.emit(k, po, pi).unwrap();
        }
    }
    (s.count(), s.checksum())
}

/// A budget below the public minimum, to make small inputs spill.
fn tiny(bytes: u64) -> MemoryBudget {
    MemoryBudget { bytes }
}

fn opts(budget: MemoryBudget, threads: usize, spill: &Path) -> JoinOptions {
    JoinOptions {
        budget,
        spill_dir: Some(spill.to_path_buf()),
        threads,
        batch: 64,
        sort: SortMethod::External,
    }
}

const SORTS: [SortMethod; 2] = [SortMethod::External, SortMethod::Learned];

/// Inner keys sorted and unique, payloads their ranks; `shuffle` scrambles
/// the records' order (a deterministic permutation).
fn inner_of(mut keys: Vec<u64>, shuffle: bool) -> Vec<JoinRecord> {
    keys.sort_unstable();
    keys.dedup();
    let mut recs: Vec<JoinRecord> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    if shuffle && recs.len() > 1 {
        let n = recs.len();
        for i in 0..n {
            let j = (i * 7919 + 13) % n;
            recs.swap(i, j);
        }
    }
    recs
}

/// Runs every algorithm (and INLJ over `kinds`) and checks each against the
/// oracle; the spill directory is empty afterwards.
fn check_all(outer: &[JoinRecord], inner: &[JoinRecord], kinds: &[&str]) {
    let want = oracle(outer, inner);
    let tmp = tempfile::tempdir().unwrap();
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let o = MemRelation::new("outer", outer.to_vec());
    let i = MemRelation::new("inner", inner.to_vec());
    for budget in [tiny(4 << 10), tiny(64 << 10), MemoryBudget::new(8 << 20).unwrap()] {
        for (threads, sort) in [
            (1, SortMethod::External),
            (2, SortMethod::External),
            (1, SortMethod::Learned),
        ] {
            let mut jo = opts(budget, threads, &spill);
            jo.sort = sort;
            for algo in [Algo::SortMerge, Algo::Hash] {
                let mut sink = CountSink::new();
                let r = join(algo, &o, &i, &mut sink, &jo).unwrap();
                assert_eq!(
                    (r.count, r.checksum),
                    want,
                    "{algo:?} {sort:?} {budget:?} threads={threads}"
                );
                assert_eq!(
                    std::fs::read_dir(&spill).unwrap().count(),
                    0,
                    "{algo:?} left spill files"
                );
            }
        }
    }
    if inner.is_empty() {
        return;
    }
    let mut sorted_inner = inner.to_vec();
    sorted_inner.sort_unstable();
    let keys: Vec<u64> = sorted_inner.iter().map(|r| r.0).collect();
    for kind in kinds {
        let dir = tmp.path().join(kind.replace(':', "_"));
        crate::index::registry()
            .build(
                &kind.parse::<IndexSpec>().unwrap(),
                &keys,
                &dir,
                &BuildOptions::default(),
            )
            .unwrap();
        let idx = crate::index::registry()
            .open(&dir, &OpenOptions::default())
            .unwrap();
        let rel = IndexRelation::new(*kind, idx.as_ref());
        for (threads, sort) in [
            (1, SortMethod::External),
            (2, SortMethod::External),
            (2, SortMethod::Learned),
        ] {
            let mut jo = opts(MemoryBudget::new(1 << 20).unwrap(), threads, &spill);
            jo.sort = sort;
            let mut sink = CountSink::new();
            let r = join(Algo::Inlj, &o, &rel, &mut sink, &jo).unwrap();
            assert_eq!(
                (r.count, r.checksum),
                want,
                "inlj:{kind} {sort:?} threads={threads}"
            );
            assert_eq!(
                std::fs::read_dir(&spill).unwrap().count(),
                0,
                "inlj left spill files"
            );
            // The index as a scanned relation too.
            let mut sink = CountSink::new();
            let r = join(Algo::SortMerge, &o, &rel, &mut sink, &jo).unwrap();
            assert_eq!((r.count, r.checksum), want, "smj over the index {kind}");
        }
    }
}

fn outer_st() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        proptest::collection::vec(0..500u64, 0..3000),
        proptest::collection::vec(any::<u64>(), 0..500),
        proptest::collection::vec(prop_oneof![Just(0u64), Just(u64::MAX), 0..5u64], 0..800),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random relations (the outer one repeating keys, in any order or
    /// sorted; the inner one sorted or not): every algorithm's count and
    /// checksum equal the oracle's.
    #[test]
    fn every_algorithm_matches_the_oracle(
        outer in outer_st(),
        inner in proptest::collection::vec(0..600u64, 0..1500),
        sort_outer in any::<bool>(),
        shuffle_inner in any::<bool>(),
    ) {
        let mut outer: Vec<JoinRecord> = outer.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
        if sort_outer {
            outer.sort_unstable();
        }
        check_all(&outer, &inner_of(inner, shuffle_inner), &["btree", "pgm"]);
    }
}

/// Empty relations, disjoint key ranges, every outer key equal, `u64::MAX`
/// and 0, a large outer relation over a small budget.
#[test]
fn adversarial_relations() {
    let kinds = ["btree", "pgm", "gap-zonemap-d", "rs"];
    let inner = inner_of((0..5000u64).map(|i| i * 3).collect(), false);
    check_all(&[], &inner, &kinds);
    check_all(&[(5, 0), (6, 1)], &[], &kinds);
    check_all(&[], &[], &kinds);
    // Disjoint ranges.
    let far: Vec<JoinRecord> = (0..3000u64).map(|i| (1 << 40 | i, i)).collect();
    check_all(&far, &inner, &kinds);
    // Every outer key equal (and present).
    let same: Vec<JoinRecord> = (0..20_000u64).map(|i| (300, i)).collect();
    check_all(&same, &inner, &kinds);
    // The extremes of the key space.
    let ends = inner_of(vec![0, 1, u64::MAX - 1, u64::MAX], true);
    let probes: Vec<JoinRecord> = [u64::MAX, 0, u64::MAX, 7, u64::MAX - 1]
        .iter()
        .enumerate()
        .map(|(i, &k)| (k, i as u64))
        .collect();
    check_all(&probes, &ends, &kinds);
    // A large unsorted outer relation: many runs and merge passes.
    let big: Vec<JoinRecord> = (0..60_000u64).map(|i| ((i * 7919) % 16_000, i)).collect();
    check_all(&big, &inner, &["btree"]);
}

/// The sort's merge passes and the hash join's levels happen at tiny
/// budgets, and what they spill is read back exactly.
#[test]
fn small_budgets_spill_in_passes_and_levels() {
    let tmp = tempfile::tempdir().unwrap();
    let outer: Vec<JoinRecord> = (0..50_000u64).map(|i| ((i * 7919) % 20_000, i)).collect();
    let inner = inner_of((0..20_000u64).collect(), true);
    let want = oracle(&outer, &inner);
    let o = MemRelation::new("o", outer);
    let i = MemRelation::new("i", inner);
    let jo = opts(tiny(16 << 10), 1, tmp.path());
    let mut s = CountSink::new();
    let r = join(Algo::SortMerge, &o, &i, &mut s, &jo).unwrap();
    assert_eq!((r.count, r.checksum), want);
    assert!(r.passes >= 2, "{r:?}");
    assert_eq!(r.spill_bytes_written, r.spill_bytes_read, "{r:?}");
    let mut s = CountSink::new();
    let r = join(Algo::Hash, &o, &i, &mut s, &jo).unwrap();
    assert_eq!((r.count, r.checksum), want);
    assert!(r.passes >= 2, "{r:?}");
    assert_eq!(r.spill_bytes_written, r.spill_bytes_read, "{r:?}");
    assert_eq!((r.sort, r.partitions), (None, 0), "{r:?}");
    // Learned partitioning: partitions split again at this budget, every
    // spilled byte read back, both sides counted.
    let mut jo = opts(tiny(16 << 10), 1, tmp.path());
    jo.sort = SortMethod::Learned;
    let mut s = CountSink::new();
    let r = join(Algo::SortMerge, &o, &i, &mut s, &jo).unwrap();
    assert_eq!((r.count, r.checksum), want);
    assert_eq!(r.sort, Some(SortMethod::Learned));
    assert!(r.passes >= 2 && r.partitions >= 4, "{r:?}");
    assert!(r.spill_bytes_read >= r.spill_bytes_written, "{r:?}");
    // Enough memory: nothing spilled.
    for sort in SORTS {
        let mut jo = opts(MemoryBudget::new(64 << 20).unwrap(), 1, tmp.path());
        jo.sort = sort;
        for algo in [Algo::SortMerge, Algo::Hash] {
            let mut s = CountSink::new();
            let r = join(algo, &o, &i, &mut s, &jo).unwrap();
            assert_eq!(
                (r.count, r.checksum, r.spill_bytes_written, r.partitions),
                (want.0, want.1, 0, 0),
                "{algo:?} {sort:?}"
            );
        }
    }
}

/// At the smallest public budget, relations far larger than it: the
/// external sort and learned partitioning spill, and every algorithm
/// matches the oracle with either; the learned sort reports its
/// partitions and the INLJ probes come sorted.
#[test]
fn min_budget_sorts_match_the_oracle() {
    let tmp = tempfile::tempdir().unwrap();
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let n = 300_000u64;
    let outer: Vec<JoinRecord> = (0..n)
        .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % (2 * n) * 1000, i))
        .collect();
    let inner = inner_of((0..n).map(|i| i * 2000).collect(), true);
    let want = oracle(&outer, &inner);
    let o = MemRelation::new("o", outer);
    let i = MemRelation::new("i", inner.clone());
    let dir = tmp.path().join("pgm");
    let keys: Vec<u64> = (0..n).map(|i| i * 2000).collect();
    crate::index::registry()
        .build(
            &"pgm".parse::<IndexSpec>().unwrap(),
            &keys,
            &dir,
            &BuildOptions::default(),
        )
        .unwrap();
    let idx = crate::index::registry()
        .open(&dir, &OpenOptions::default())
        .unwrap();
    let rel = IndexRelation::new("pgm", idx.as_ref());
    for sort in SORTS {
        let mut jo = opts(MemoryBudget::new(MIN_BUDGET).unwrap(), 1, &spill);
        jo.sort = sort;
        for (algo, inner) in [
            (Algo::SortMerge, &i as &dyn Relation),
            (Algo::Hash, &i),
            (Algo::Inlj, &rel),
        ] {
            let mut s = CountSink::new();
            let r = join(algo, &o, inner, &mut s, &jo).unwrap();
            assert_eq!((r.count, r.checksum), want, "{algo:?} {sort:?}");
            assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0);
            if algo == Algo::Hash {
                continue;
            }
            assert_eq!(r.sort, Some(sort), "{algo:?}");
            assert!(r.spill_bytes_written >= n * RECORD_BYTES, "{algo:?} {r:?}");
            match sort {
                SortMethod::Learned => assert!(r.partitions > 2 && r.passes >= 1, "{algo:?} {r:?}"),
                SortMethod::External => assert_eq!(r.partitions, 0),
            }
        }
    }
}

/// A repeated inner key, an outer key file out of order, a budget below the
/// minimum and INLJ without an index are errors, and leave no spill file.
#[test]
fn bad_inputs_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let o = MemRelation::new("o", vec![(1, 0), (2, 1)]);
    let dup = MemRelation::new("dup", vec![(1, 0), (1, 1), (2, 2)]);
    let jo = opts(tiny(4 << 10), 1, tmp.path());
    for algo in [Algo::SortMerge, Algo::Hash] {
        let e = join(algo, &o, &dup, &mut CountSink::new(), &jo).unwrap_err();
        assert!(e.to_string().contains("repeats key 1"), "{algo:?}: {e}");
    }
    // A repeated key found after both unsorted sides were partitioned.
    let big: Vec<JoinRecord> = (0..5000u64).map(|i| ((i * 7919) % 5000, i)).collect();
    let mut dup_big = big.clone();
    dup_big.push((4321, 9));
    let (bo, bd) = (MemRelation::new("o", big), MemRelation::new("dup", dup_big));
    for sort in SORTS {
        let mut jo = opts(tiny(16 << 10), 1, tmp.path());
        jo.sort = sort;
        let e = join(Algo::SortMerge, &bo, &bd, &mut CountSink::new(), &jo).unwrap_err();
        assert!(e.to_string().contains("repeats key 4321"), "{sort:?}: {e}");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "{sort:?}");
    }
    let e = join(Algo::Inlj, &o, &dup, &mut CountSink::new(), &jo).unwrap_err();
    assert!(e.to_string().contains("needs an index"), "{e}");
    assert!(MemoryBudget::new(1000).is_err());
    assert!("merge".parse::<SortMethod>().is_err());
    assert_eq!("learned".parse::<SortMethod>().unwrap(), SortMethod::Learned);
    // A key file said to be sorted that is not.
    let path = tmp.path().join("k.keys");
    let mut b = 3u64.to_le_bytes().to_vec();
    for k in [5u64, 5, 4] {
        b.extend_from_slice(&k.to_le_bytes());
    }
    std::fs::write(&path, b).unwrap();
    let kf = KeyFile::open(&path, true, Default::default()).unwrap();
    let inner = MemRelation::new("i", vec![(4, 0), (5, 1)]);
    let e = join(Algo::SortMerge, &kf, &inner, &mut CountSink::new(), &jo).unwrap_err();
    assert!(
        e.to_string()
            .contains("not sorted: key 4 at position 2 follows 5"),
        "{e}"
    );
    // The same file as unsorted joins.
    let kf = KeyFile::open(&path, false, Default::default()).unwrap();
    let mut s = CountSink::new();
    join(Algo::SortMerge, &kf, &inner, &mut s, &jo).unwrap();
    assert_eq!(s.count(), 3);
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        1,
        "only the key file is left"
    );
}

/// A pairs file holds the triples and the header's count and checksum;
/// unfinished, it leaves nothing; a corrupt one is refused.
#[test]
fn pairs_file_round_trip_and_cleanup() {
    let tmp = tempfile::tempdir().unwrap();
    let outer: Vec<JoinRecord> = vec![(3, 0), (1, 1), (3, 2), (9, 3)];
    let inner = inner_of(vec![1, 3, 5], false);
    let path = tmp.path().join("out.pairs");
    let mut pf = PairFile::create(&path).unwrap();
    let jo = opts(MemoryBudget::new(1 << 20).unwrap(), 1, tmp.path());
    let r = join(
        Algo::Hash,
        &MemRelation::new("o", outer.clone()),
        &MemRelation::new("i", inner.clone()),
        &mut pf,
        &jo,
    )
    .unwrap();
    pf.finish().unwrap();
    let mut got = sink::read_pairs(&path).unwrap();
    got.sort_unstable();
    assert_eq!(got, vec![(1, 1, 0), (3, 0, 1), (3, 2, 1)]);
    assert_eq!((r.count, r.checksum), oracle(&outer, &inner));
    assert!(
        PairFile::create(&path).is_err(),
        "an existing file is not overwritten"
    );
    // Unfinished: nothing left.
    let other = tmp.path().join("other.pairs");
    let mut pf = PairFile::create(&other).unwrap();
    pf.emit(1, 2, 3).unwrap();
    drop(pf);
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["out.pairs".to_string()]);
    // Corrupt: a flipped byte of a triple, a bad magic number.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[50] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(sink::read_pairs(&path).is_err());
    bytes[0] = b'X';
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        sink::read_pairs(&path),
        Err(crate::Error::BadMagic { .. })
    ));
}

/// Key files: repeats in a sorted outer file are kept, positions are the
/// payloads.
#[test]
fn key_file_relations() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("o.keys");
    crate::format::sosd::write_keys(&path, &[2, 4, 6]).unwrap();
    let mut b = 4u64.to_le_bytes().to_vec();
    for k in [2u64, 2, 6, 7] {
        b.extend_from_slice(&k.to_le_bytes());
    }
    let rep = tmp.path().join("rep.keys");
    std::fs::write(&rep, b).unwrap();
    let inner = KeyFile::open(&path, true, Default::default()).unwrap();
    let outer = KeyFile::open(&rep, true, Default::default()).unwrap();
    let jo = opts(MemoryBudget::new(1 << 20).unwrap(), 1, tmp.path());
    for algo in [Algo::SortMerge, Algo::Hash] {
        let mut s = CountSink::new();
        join(algo, &outer, &inner, &mut s, &jo).unwrap();
        let want = oracle(&[(2, 0), (2, 1), (6, 2), (7, 3)], &[(2, 0), (4, 1), (6, 2)]);
        assert_eq!((s.count(), s.checksum()), want, "{algo:?}");
    }
}
