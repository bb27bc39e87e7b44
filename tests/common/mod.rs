//! The shared conformance battery: every index kind runs it against a
//! sorted-array oracle, on adversarial key sets, across reopen, residency
//! modes and a page cache.
#![allow(dead_code, reason = "each test binary uses a part of the shared helpers")]

use rand::{Rng, SeedableRng};
use strata::index::{BuildOptions, Index, IndexSpec, OpenOptions, Residency};

/// Named key sets, each strictly increasing.
pub fn datasets() -> Vec<(&'static str, Vec<u64>)> {
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
    let mut sets: Vec<(&'static str, Vec<u64>)> = vec![
        ("empty", vec![]),
        ("one", vec![42]),
        ("one-max", vec![u64::MAX]),
        ("two-extremes", vec![0, u64::MAX]),
        ("dense", (0..5_000).collect()),
    ];
    // Exactly one full 4 KiB page, and one past it.
    sets.push(("page-255", (0..255).map(|i| i * 10).collect()));
    sets.push(("page-256", (0..256).map(|i| i * 10 + 3).collect()));
    let mut random: Vec<u64> = (0..30_000).map(|_| rng.random::<u64>()).collect();
    random.sort_unstable();
    random.dedup();
    sets.push(("uniform-random", random));
    // Huge gaps, 0 and u64::MAX, dense runs beside them.
    let mut gaps: Vec<u64> = Vec::new();
    gaps.extend(0..300);
    gaps.extend((0..300).map(|i| (1u64 << 40) + i));
    gaps.extend((0..300).map(|i| (1u64 << 63) + i * 1_000_003));
    gaps.extend((0..300).map(|i| u64::MAX - 299 + i));
    sets.push(("huge-gaps", gaps));
    // Clustered: dense clusters at random places, sparse noise between them.
    let mut clustered: Vec<u64> = Vec::new();
    for c in 0..40u64 {
        let base = rng.random::<u64>() >> 2;
        let len = rng.random_range(50..800);
        clustered.extend((0..len).map(|i| base + i * (1 + c % 3)));
    }
    clustered.extend((0..2_000).map(|_| rng.random::<u64>()));
    clustered.sort_unstable();
    clustered.dedup();
    sets.push(("clustered", clustered));
    // Exponentially growing keys: hard for any linear model.
    let expo: Vec<u64> = (0..64).map(|i| 1u64 << i).chain([u64::MAX]).collect();
    sets.push(("powers-of-two", expo));
    sets
}

/// Lower bound in the oracle.
fn lb(keys: &[u64], k: u64) -> usize {
    keys.partition_point(|&x| x < k)
}

/// Probe keys: every present key's neighbours, the extremes, random keys.
fn probes(keys: &[u64], rng: &mut impl Rng) -> Vec<u64> {
    let mut p = vec![0, 1, u64::MAX, u64::MAX - 1, 1 << 63];
    let step = (keys.len() / 2_000).max(1);
    for &k in keys.iter().step_by(step) {
        p.push(k.wrapping_add(1));
        p.push(k.wrapping_sub(1));
        p.push(k / 2 + u64::MAX / 2);
    }
    for _ in 0..500 {
        p.push(rng.random());
    }
    p
}

/// Checks an open index against the oracle `keys` (value = rank).
pub fn check_against_oracle(idx: &dyn Index, keys: &[u64], what: &str) {
    check_sampled(idx, keys, what, 1);
}

/// Like [`check_against_oracle`], looking up every `stride`-th present key
/// (and the first and last 300) — for the slow cold-read variants.
pub fn check_sampled(idx: &dyn Index, keys: &[u64], what: &str, stride: usize) {
    assert_eq!(idx.len(), keys.len() as u64, "{what}: len");
    for (i, &k) in keys.iter().enumerate() {
        if i % stride != 0 && i >= 300 && i + 300 < keys.len() {
            continue;
        }
        assert_eq!(idx.get(k).unwrap(), Some(i as u64), "{what}: get({k}) rank {i}");
    }
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(keys.len() as u64);
    for q in probes(keys, &mut rng) {
        let pos = lb(keys, q);
        let present = keys.get(pos) == Some(&q);
        let got = idx.get(q).unwrap();
        assert_eq!(
            got,
            if present { Some(pos as u64) } else { None },
            "{what}: get({q})"
        );
        let want = keys.get(pos).map(|&k| (k, pos as u64));
        assert_eq!(idx.lower_bound(q).unwrap(), want, "{what}: lower_bound({q})");
    }
    // Scans: across page boundaries, from absent keys, past the end.
    let mut starts: Vec<u64> = vec![0, u64::MAX];
    for i in [
        0usize,
        1,
        253,
        254,
        255,
        256,
        509,
        510,
        511,
        keys.len() / 2,
        keys.len().saturating_sub(1),
    ] {
        if let Some(&k) = keys.get(i) {
            starts.push(k);
            starts.push(k.wrapping_add(1));
        }
    }
    for _ in 0..20 {
        starts.push(rng.random());
    }
    for &s in &starts {
        for count in [0usize, 1, 100, 300, keys.len() + 5] {
            let mut out = Vec::new();
            idx.scan(s, count, &mut out).unwrap();
            let p = lb(keys, s);
            let want: Vec<(u64, u64)> = keys
                .iter()
                .enumerate()
                .skip(p)
                .take(count)
                .map(|(i, &k)| (k, i as u64))
                .collect();
            assert_eq!(out, want, "{what}: scan({s}, {count})");
        }
    }
}

/// Builds `spec` over every data set and checks it, opened in several ways.
pub fn battery(spec: &str) {
    for (name, keys) in datasets() {
        battery_on(spec, name, &keys);
    }
}

/// Builds `spec` over `keys` and checks it opened with `resident=index`,
/// `resident=none` with `O_DIRECT`, and with a small page cache.
pub fn battery_on(spec: &str, name: &str, keys: &[u64]) {
    let tmp = tempfile::tempdir().unwrap();
    let s: IndexSpec = spec.parse().unwrap();
    let report = strata::registry::build(&s, keys, tmp.path(), &BuildOptions::default())
        .unwrap_or_else(|e| panic!("{spec} on {name}: build failed: {e}"));
    assert_eq!(report.n, keys.len() as u64);
    let variants = [
        ("resident=index", OpenOptions::default(), 1),
        (
            "resident=none,direct",
            OpenOptions {
                direct: true,
                resident: Residency::None,
                ..Default::default()
            },
            7,
        ),
        (
            "cache=8",
            OpenOptions {
                cache_pages: 8,
                ..Default::default()
            },
            3,
        ),
    ];
    for (vname, opts, stride) in variants {
        let idx = strata::registry::open(tmp.path(), &opts)
            .unwrap_or_else(|e| panic!("{spec} on {name} ({vname}): open failed: {e}"));
        check_sampled(idx.as_ref(), keys, &format!("{spec} on {name} ({vname})"), stride);
        let st = idx.stats().unwrap();
        assert_eq!(st.n, keys.len() as u64);
        assert!(st.disk_bytes > 0);
    }
}
