//! The shared conformance battery: every index kind runs it against a
//! sorted-array oracle, on adversarial key sets, across reopen, residency
//! modes and a page cache.
#![allow(dead_code, reason = "each test binary uses a part of the shared helpers")]

#[cfg(feature = "s3")]
pub mod s3;

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
    check_cursor(idx, keys, what);
    check_batches(idx, keys, what, stride);
}

/// The oracle's records from rank `p` on, at most `count` of them.
fn oracle_from(keys: &[u64], p: usize, count: usize) -> Vec<(u64, u64)> {
    keys.iter()
        .enumerate()
        .skip(p)
        .take(count)
        .map(|(i, &k)| (k, i as u64))
        .collect()
}

/// Seek targets: below the first key, every boundary key, between keys,
/// past the last key, `u64::MAX`.
fn seek_targets(keys: &[u64], rng: &mut impl Rng) -> Vec<u64> {
    let mut t = vec![0, 1, u64::MAX, u64::MAX - 1];
    if let Some(&first) = keys.first() {
        t.push(first.saturating_sub(1));
    }
    if let Some(&last) = keys.last() {
        t.push(last.saturating_add(1));
    }
    let n = keys.len();
    for i in [
        0,
        1,
        253,
        254,
        255,
        256,
        257,
        509,
        510,
        511,
        n / 3,
        n / 2,
        n.saturating_sub(2),
        n.saturating_sub(1),
    ] {
        if let Some(&k) = keys.get(i) {
            t.extend([k, k.wrapping_add(1), k.wrapping_sub(1)]);
        }
    }
    for _ in 0..10 {
        t.push(rng.random());
    }
    t
}

/// Cursors against the oracle: one cursor sought again and again (after
/// running to the end, part way, and by batches), `next` across page
/// boundaries, `None` at the end and after it.
pub fn check_cursor(idx: &dyn Index, keys: &[u64], what: &str) {
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(keys.len() as u64 ^ 0x5eed);
    // A fresh cursor starts before the first record.
    let mut c = idx.cursor().unwrap();
    assert_eq!(
        c.next().unwrap(),
        oracle_from(keys, 0, 1).first().copied(),
        "{what}: fresh cursor"
    );
    let targets = seek_targets(keys, &mut rng);
    for (j, &t) in targets.iter().enumerate() {
        let p = lb(keys, t);
        c.seek(t).unwrap();
        // Every fourth seek runs to the end; the others stop after 600
        // records (two page boundaries and more).
        let limit = if j % 4 == 0 { usize::MAX } else { 600 };
        let want = oracle_from(keys, p, limit);
        let mut got = Vec::with_capacity(want.len());
        if j % 3 == 1 {
            // Mixed: a few single steps, then batches.
            for _ in 0..3 {
                if got.len() < want.len() {
                    got.extend(c.next().unwrap());
                }
            }
            while got.len() < want.len() {
                let ask = (want.len() - got.len()).min(257);
                let n = c.next_batch(ask, &mut got).unwrap();
                if n < ask {
                    break;
                }
            }
        } else {
            while got.len() < want.len() {
                match c.next().unwrap() {
                    Some(r) => got.push(r),
                    None => break,
                }
            }
        }
        assert_eq!(got, want, "{what}: seek({t}) then next");
        if p + want.len() == keys.len() {
            assert_eq!(c.next().unwrap(), None, "{what}: seek({t}): next past the end");
            assert_eq!(c.next().unwrap(), None, "{what}: seek({t}): next after the end");
            let mut more = Vec::new();
            assert_eq!(
                c.next_batch(5, &mut more).unwrap(),
                0,
                "{what}: seek({t}): batch after the end"
            );
            assert!(more.is_empty());
        }
    }
}

/// The batch methods against one-by-one lookups on the oracle, for keys in
/// random order with repeats.
pub fn check_batches(idx: &dyn Index, keys: &[u64], what: &str, stride: usize) {
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(keys.len() as u64 ^ 0xba7c4);
    let mut batch: Vec<u64> = probes(keys, &mut rng).into_iter().step_by(stride).collect();
    batch.extend(keys.iter().step_by(stride.max(keys.len() / 500).max(1)));
    let dupes: Vec<u64> = batch.iter().copied().take(20).collect();
    batch.extend(dupes);
    // Fisher-Yates: any order of input is allowed.
    for i in (1..batch.len()).rev() {
        batch.swap(i, rng.random_range(0..=i));
    }
    let mut gets = vec![Some(7)];
    idx.get_many(&batch, &mut gets).unwrap();
    let mut lbs = Vec::new();
    idx.lower_bound_many(&batch, &mut lbs).unwrap();
    assert_eq!(gets.len(), batch.len() + 1, "{what}: get_many appends");
    assert_eq!(gets[0], Some(7), "{what}: get_many keeps what out held");
    assert_eq!(lbs.len(), batch.len(), "{what}: lower_bound_many");
    for (j, &q) in batch.iter().enumerate() {
        let pos = lb(keys, q);
        let present = keys.get(pos) == Some(&q);
        let want_get = if present { Some(pos as u64) } else { None };
        assert_eq!(gets[j + 1], want_get, "{what}: get_many[{j}] = get({q})");
        let want_lb = keys.get(pos).map(|&k| (k, pos as u64));
        assert_eq!(
            lbs[j], want_lb,
            "{what}: lower_bound_many[{j}] = lower_bound({q})"
        );
    }
    let mut empty = Vec::new();
    idx.get_many(&[], &mut empty).unwrap();
    assert!(empty.is_empty(), "{what}: get_many of no key");
}

/// Builds `spec` over every data set and checks it, opened in several ways.
pub fn battery(spec: &str) {
    for (name, keys) in datasets() {
        battery_on(spec, name, &keys);
    }
}

/// Builds `spec` over `keys` and checks it opened with `resident=index`,
/// `resident=none` with `O_DIRECT`, and with a small page cache; batched
/// reads through io_uring (the default engine where the kernel has it) in
/// those, and through the pool of `pread` threads in a fourth.
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
        (
            "direct,io=threads,queue-depth=4",
            OpenOptions {
                direct: true,
                io_engine: strata::storage::IoEngine::Threads,
                queue_depth: 4,
                ..Default::default()
            },
            3,
        ),
    ];
    for (vname, opts, stride) in variants {
        let idx = strata::registry::open(tmp.path(), &opts)
            .unwrap_or_else(|e| panic!("{spec} on {name} ({vname}): open failed: {e}"));
        let what = format!("{spec} on {name} ({vname})");
        if opts.io_engine == strata::storage::IoEngine::Threads {
            // The engine serves only batched reads: check those.
            check_batches(idx.as_ref(), keys, &what, stride);
        } else {
            check_sampled(idx.as_ref(), keys, &what, stride);
        }
        let st = idx.stats().unwrap();
        assert_eq!(st.n, keys.len() as u64);
        assert!(st.disk_bytes > 0);
    }
}

/// The files of an index of `spec` over `keys` (values their ranks), built in
/// memory.
pub fn build_in_memory(spec: &str, keys: &[u64]) -> strata::storage::MemDirectory {
    let dir = strata::storage::MemDirectory::new();
    let s: IndexSpec = spec.parse().unwrap();
    let records = strata::index::Records::ranked(keys);
    strata::registry::build_in(
        &s,
        records,
        std::sync::Arc::new(dir.clone()),
        &BuildOptions::default(),
    )
    .unwrap();
    dir
}

/// An updatable kind's inserts against the oracle: builds `spec` over every
/// other key of each data set, inserts every key through the index (values:
/// final ranks; an insert returns the old value exactly for the built
/// half), syncs, reopens, and checks it as [`check_against_oracle`] does.
pub fn battery_after_updates(spec: &str) {
    for (name, keys) in datasets() {
        let tmp = tempfile::tempdir().unwrap();
        let s: IndexSpec = spec.parse().unwrap();
        let half: Vec<u64> = keys.iter().copied().step_by(2).collect();
        strata::registry::build(&s, &half, tmp.path(), &BuildOptions::default()).unwrap();
        {
            let idx = strata::registry::open(tmp.path(), &OpenOptions::default()).unwrap();
            for (i, &k) in keys.iter().enumerate() {
                let old = idx.insert(k, i as u64).unwrap();
                assert_eq!(
                    old.is_some(),
                    i % 2 == 0,
                    "{spec} on {name}: insert of {k} returns the old value"
                );
            }
            idx.sync().unwrap();
        }
        let idx = strata::registry::open(tmp.path(), &OpenOptions::default()).unwrap();
        check_against_oracle(idx.as_ref(), &keys, &format!("{spec} after updates on {name}"));
    }
}
