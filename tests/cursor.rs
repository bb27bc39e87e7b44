//! Cursors against a sorted-array oracle: random sequences of seeks, single
//! steps and batches on one cursor, for a layered kind, `binary`, `btree`
//! and `db` (the conformance battery covers every kind at fixed positions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::OnceLock;

use proptest::prelude::*;
use strata::index::{BuildOptions, Index, IndexSpec, OpenOptions, Residency};

const SPECS: [&str; 5] = [
    "binary",
    "pgm:epsilon=16",
    "zonemap:fetch=one-by-one",
    "btree:fill=70",
    "db:memory=1M",
];

/// Keys with gaps of varying width (about 12 data pages).
fn keys() -> &'static [u64] {
    static KEYS: OnceLock<Vec<u64>> = OnceLock::new();
    KEYS.get_or_init(|| {
        (0..3_000u64)
            .map(|i| i * 5 + (i % 3) + (i / 700) * 1_000)
            .collect()
    })
}

/// Each kind built once over [`keys`], opened with every layer on storage.
fn indexes() -> &'static [(tempfile::TempDir, Box<dyn Index>)] {
    static IDX: OnceLock<Vec<(tempfile::TempDir, Box<dyn Index>)>> = OnceLock::new();
    IDX.get_or_init(|| {
        SPECS
            .iter()
            .map(|spec| build_open(spec, keys(), Residency::None))
            .collect()
    })
}

/// Builds `spec` over `keys` in a new directory and opens it.
fn build_open(spec: &str, keys: &[u64], resident: Residency) -> (tempfile::TempDir, Box<dyn Index>) {
    let tmp = tempfile::tempdir().unwrap();
    let s: IndexSpec = spec.parse().unwrap();
    strata::registry::build(&s, keys, tmp.path(), &BuildOptions::default()).unwrap();
    let opts = OpenOptions {
        resident,
        ..Default::default()
    };
    let idx = strata::registry::open(tmp.path(), &opts).unwrap();
    (tmp, idx)
}

#[derive(Debug, Clone)]
enum Op {
    Seek(u64),
    Next,
    Batch(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let max = keys().last().copied().unwrap_or(0);
    prop_oneof![
        2 => (0..max + 10).prop_map(Op::Seek),
        // A few records before a page boundary (255 records per 4 KiB
        // data page and full leaf), so that steps cross it.
        3 => (1usize..12, 1usize..5, any::<bool>()).prop_map(|(p, d, above)| {
            let k = keys()[(p * 255 - d).min(keys().len() - 1)];
            Op::Seek(if above { k + 1 } else { k })
        }),
        1 => prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()].prop_map(Op::Seek),
        4 => Just(Op::Next),
        2 => (0usize..600).prop_map(Op::Batch),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn cursor_matches_oracle(ops in prop::collection::vec(op(), 1..60)) {
        let keys = keys();
        for (spec, (_, idx)) in SPECS.iter().zip(indexes()) {
            let mut c = idx.cursor().unwrap();
            // The oracle's position: the rank of the next record.
            let mut pos = 0usize;
            for o in &ops {
                match *o {
                    Op::Seek(k) => {
                        c.seek(k).unwrap();
                        pos = keys.partition_point(|&x| x < k);
                    }
                    Op::Next => {
                        let want = keys.get(pos).map(|&k| (k, pos as u64));
                        prop_assert_eq!(c.next().unwrap(), want, "{} at rank {}", spec, pos);
                        pos = (pos + 1).min(keys.len());
                    }
                    Op::Batch(n) => {
                        let mut got = Vec::new();
                        let m = c.next_batch(n, &mut got).unwrap();
                        let end = (pos + n).min(keys.len());
                        let want: Vec<(u64, u64)> =
                            (pos..end).map(|i| (keys[i], i as u64)).collect();
                        prop_assert_eq!(m, want.len(), "{} batch of {} at rank {}", spec, n, pos);
                        prop_assert_eq!(got, want, "{} batch of {} at rank {}", spec, n, pos);
                        pos = end;
                    }
                }
            }
        }
    }
}

/// A B+-tree cursor stays ordered and complete while the tree frees leaves
/// ahead of it and reuses their pages for splits behind it: it descends
/// again instead of following a sibling link that may be stale.
#[test]
fn btree_cursor_across_writes() {
    use std::collections::BTreeSet;
    let even: Vec<u64> = (0..20_000u64).map(|i| i * 2).collect();
    let (_tmp, idx) = build_open("btree", &even, Residency::Index);
    let mut c = idx.cursor().unwrap();
    c.seek(0).unwrap();
    let mut got: Vec<u64> = Vec::new();
    let mut deleted: BTreeSet<u64> = BTreeSet::new();
    let mut step = 0u64;
    while let Some((k, _)) = c.next().unwrap() {
        got.push(k);
        step += 1;
        if step % 200 == 0 && k > 4_000 && k < 30_000 {
            // Free the leaves just ahead (every key of them deleted), then
            // split full leaves behind the cursor, which reuses the freed
            // pages for lower keys.
            for d in (k + 1..k + 1_600).filter(|d| d % 2 == 0) {
                if idx.delete(d).unwrap() {
                    deleted.insert(d);
                }
            }
            for j in 0..600 {
                idx.insert(k - 4_000 + 2 * j + 1, 0).unwrap();
            }
        }
    }
    assert!(got.windows(2).all(|w| w[0] < w[1]), "keys strictly increasing");
    let seen: BTreeSet<u64> = got.iter().copied().collect();
    for k in even.iter().filter(|k| !deleted.contains(k)) {
        assert!(seen.contains(k), "key {k} missing");
    }
}
