//! Pins the I/O of range scans: read calls, pages and bytes after a fixed
//! set of scans on a fixed build, for a layered kind (both fetch
//! strategies), `binary` and `btree`, with index layers resident and read
//! from storage. The figures were taken on the code before scans went
//! through cursors (a97175a); a change that alters them changes what the
//! scan benchmarks measure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use strata::index::{BuildOptions, IndexSpec, OpenOptions, Residency};

/// `(spec, [read calls, pages read, bytes read] with the index resident,
/// the same with every layer read from storage)`.
const EXPECTED: &[(&str, [u64; 3], [u64; 3])] = &[
    ("binary", [941, 1931, 7909376], [941, 1931, 7909376]),
    ("pgm:epsilon=64", [203, 1267, 5189632], [507, 1571, 6434816]),
    (
        "pgm:epsilon=512,granularity=32",
        [170, 1634, 6692864],
        [474, 1938, 7938048],
    ),
    (
        "pgm:epsilon=512,granularity=32,fetch=one",
        [429, 1419, 5812224],
        [733, 1723, 7057408],
    ),
    ("zonemap", [217, 1210, 4956160], [369, 1362, 5578752]),
    ("btree", [1184, 1184, 4849664], [1317, 1317, 5394432]),
    ("btree:fill=70", [1643, 1643, 6729728], [1776, 1776, 7274496]),
];

fn keys() -> Vec<u64> {
    (0..20_000u64)
        .map(|i| i * i / 3 + i * 11 + (i % 7))
        .collect::<Vec<_>>()
}

/// Scan starts: the first key, absent keys, keys at page ends, the last
/// key and past it.
fn starts(keys: &[u64]) -> Vec<u64> {
    let mut s = vec![0, 5, u64::MAX];
    for i in [1usize, 254, 255, 256, 3_000, 10_000, 19_990, 19_999] {
        s.push(keys[i]);
        s.push(keys[i] + 1);
    }
    s
}

fn measure(spec: &str, residency: Residency) -> [u64; 3] {
    let tmp = tempfile::tempdir().unwrap();
    let keys = keys();
    let s: IndexSpec = spec.parse().unwrap();
    strata::registry::build(&s, &keys, tmp.path(), &BuildOptions::default()).unwrap();
    let opts = OpenOptions {
        resident: residency,
        ..Default::default()
    };
    let idx = strata::registry::open(tmp.path(), &opts).unwrap();
    let before = idx.io().snapshot();
    let mut out = Vec::new();
    for &from in &starts(&keys) {
        for count in [0usize, 1, 10, 254, 255, 256, 600, 30_000] {
            out.clear();
            idx.scan(from, count, &mut out).unwrap();
        }
    }
    let d = idx.io().snapshot().since(&before);
    [d.read_calls, d.pages_read, d.bytes_read]
}

#[test]
fn scan_io_is_pinned() {
    for &(spec, resident, none) in EXPECTED {
        assert_eq!(
            measure(spec, Residency::Index),
            resident,
            "{spec}, resident=index"
        );
        assert_eq!(measure(spec, Residency::None), none, "{spec}, resident=none");
    }
}
