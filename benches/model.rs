//! CPU kernels of `strata::model`: segmentation, LeCo random access, and the
//! lookup models' range prediction. Run with `cargo bench --bench model`.
//!
//! Data sets are generated once (deterministic seeds): 10M uniform random
//! `u64` keys (hard for linear models) and 10M near-linear keys (easy).

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use strata::model::{LecoArray, RadixSpline, Rmi, greedy_cone, optimal_pla, optimal_pla_zero_interval};

const N: usize = 10_000_000;
const BATCH: usize = 4096;

fn uniform_keys() -> &'static [u64] {
    static K: OnceLock<Vec<u64>> = OnceLock::new();
    K.get_or_init(|| {
        let mut rng = Pcg64::seed_from_u64(42);
        let mut k: Vec<u64> = (0..N).map(|_| rng.random()).collect();
        k.sort_unstable();
        k.dedup();
        k
    })
}

/// Near-linear keys: stride 1000 with a small jitter.
fn easy_keys() -> &'static [u64] {
    static K: OnceLock<Vec<u64>> = OnceLock::new();
    K.get_or_init(|| {
        let mut rng = Pcg64::seed_from_u64(43);
        (0..N as u64)
            .map(|i| i * 1000 + rng.random_range(0..100))
            .collect()
    })
}

/// Random query keys drawn from `keys` (present keys).
fn queries(keys: &[u64], seed: u64) -> Vec<u64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..BATCH)
        .map(|_| keys[rng.random_range(0..keys.len())])
        .collect()
}

fn bench_pla(c: &mut Criterion) {
    let mut g = c.benchmark_group("pla_10M");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    for (name, keys) in [("uniform", uniform_keys()), ("easy", easy_keys())] {
        g.throughput(Throughput::Elements(keys.len() as u64));
        g.bench_with_input(BenchmarkId::new("optimal_eps64", name), keys, |b, k| {
            b.iter(|| black_box(optimal_pla(k, 64)).len())
        });
        g.bench_with_input(BenchmarkId::new("zero_interval_eps8_p256", name), keys, |b, k| {
            b.iter(|| black_box(optimal_pla_zero_interval(k, 8, 256)).len())
        });
        g.bench_with_input(BenchmarkId::new("greedy_cone_eps64", name), keys, |b, k| {
            b.iter(|| black_box(greedy_cone(k, 64)).len())
        });
    }
    g.finish();
}

fn bench_leco(c: &mut Criterion) {
    let mut g = c.benchmark_group("leco_get");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    // Model keys of a PGM layer: first keys of the segments of uniform data.
    let first_keys: Vec<u64> = optimal_pla(uniform_keys(), 16)
        .iter()
        .map(|s| s.first_key)
        .collect();
    let arr = LecoArray::encode(&first_keys);
    let mut rng = Pcg64::seed_from_u64(7);
    let idx: Vec<usize> = (0..BATCH)
        .map(|_| rng.random_range(0..first_keys.len()))
        .collect();
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function(format!("segment_first_keys_{}", first_keys.len()), |b| {
        b.iter(|| {
            let mut s = 0u64;
            for &i in &idx {
                s = s.wrapping_add(arr.get(black_box(i)).unwrap_or(0));
            }
            s
        })
    });
    let probes: Vec<u64> = idx.iter().map(|&i| first_keys[i] + 1).collect();
    g.bench_function(format!("lower_bound_{}", first_keys.len()), |b| {
        b.iter(|| {
            let mut s = 0usize;
            for &x in &probes {
                s = s.wrapping_add(arr.lower_bound(black_box(x)));
            }
            s
        })
    });
    g.finish();
}

fn bench_leco_encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("leco_encode");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    // Zone map of 64-key pages over 10M uniform keys: 156K page minima, and
    // the -D intervals (last key of the previous page, first key].
    let keys = uniform_keys();
    let hi: Vec<u64> = keys.chunks(64).map(|p| p[0]).collect();
    let lo: Vec<u64> = std::iter::once(0)
        .chain(keys.chunks(64).map(|p| p[p.len() - 1] + 1))
        .take(hi.len())
        .collect();
    g.throughput(Throughput::Elements(hi.len() as u64));
    g.bench_function("lossless_zone_map", |b| {
        b.iter(|| LecoArray::encode(black_box(&hi)).memory_bytes())
    });
    g.bench_function("bounded_zone_map", |b| {
        b.iter(|| {
            LecoArray::encode_bounded(black_box(&lo), black_box(&hi))
                .map(|a| a.memory_bytes())
                .unwrap_or(0)
        })
    });
    g.finish();
}

fn bench_lookup_models(c: &mut Criterion) {
    let mut g = c.benchmark_group("predict_range_10M");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, keys) in [("uniform", uniform_keys()), ("easy", easy_keys())] {
        let q = queries(keys, 9);
        let rs = RadixSpline::build(keys, 32, 18).expect("sorted keys");
        g.bench_function(BenchmarkId::new("radix_spline_eps32_r18", name), |b| {
            b.iter(|| {
                let mut s = 0u64;
                for &x in &q {
                    let (lo, hi) = rs.predict_range(black_box(x));
                    s = s.wrapping_add(lo ^ hi);
                }
                s
            })
        });
        let rmi = Rmi::build(keys, 1 << 16).expect("sorted keys");
        g.bench_function(BenchmarkId::new("rmi_64k", name), |b| {
            b.iter(|| {
                let mut s = 0u64;
                for &x in &q {
                    let (lo, hi) = rmi.predict_range(black_box(x));
                    s = s.wrapping_add(lo ^ hi);
                }
                s
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_pla,
    bench_leco,
    bench_leco_encode,
    bench_lookup_models
);
criterion_main!(benches);
