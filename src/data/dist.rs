//! Key distributions.

use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1, StandardNormal, Zipf};
use rand_pcg::Pcg64Mcg;

use crate::{Error, Result};

/// A key distribution for `strata gen`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    /// Consecutive keys `0, 1, 2, ...`.
    Dense,
    /// Sparse uniform over `[0, 2^64)`.
    Uniform,
    /// Normal around 2^63 (σ = 2^60).
    Normal,
    /// Log-normal (μ = 0, σ = 2) scaled by 2^40.
    Lognormal,
    /// A mixture of 100 normal clusters, as AirIndex's `gmm`.
    Gmm,
    /// Gaps drawn from a Zipf law (s = 1.1 over 1..10^6): heavy-tailed gaps.
    Zipf,
    /// YCSB's hashed insert order: FNV-1a-64 of 0, 1, 2, ... (independent of the seed,
    /// as in YCSB).
    Ycsb,
    /// Hardness-controlled (GRE-style): about `local` segments at ε = 8 and
    /// `global` segments at ε = 512.
    Hard {
        /// Target number of PGM segments at ε = 8.
        local: u64,
        /// Target number of PGM segments at ε = 512.
        global: u64,
    },
    /// Stand-in for SOSD `fb` (sampled user ids): a Lévy flight (Pareto 0.8
    /// gaps, capped) and a few far outliers at the top.
    FbLike,
    /// Stand-in for SOSD `osm` (cell ids of map points): a Lévy flight
    /// (Pareto 0.95 gaps), clustered at every scale.
    OsmLike,
    /// Stand-in for SOSD `wiki` (edit timestamps): a Poisson process with
    /// daily and weekly cycles, growth and bursts.
    WikiLike,
    /// Stand-in for SOSD `books` (amzn): Pareto 1.6 gaps under a slowly
    /// varying density: hard locally, smooth globally.
    BooksLike,
}

impl Dist {
    /// Names accepted by [`Dist::from_str`].
    pub const NAMES: &'static [&'static str] = &[
        "dense",
        "uniform",
        "normal",
        "lognormal",
        "gmm",
        "zipf",
        "ycsb",
        "hard",
        "fb-like",
        "osm-like",
        "wiki-like",
        "books-like",
    ];

    /// The canonical name.
    pub fn name(&self) -> &'static str {
        match self {
            Dist::Dense => "dense",
            Dist::Uniform => "uniform",
            Dist::Normal => "normal",
            Dist::Lognormal => "lognormal",
            Dist::Gmm => "gmm",
            Dist::Zipf => "zipf",
            Dist::Ycsb => "ycsb",
            Dist::Hard { .. } => "hard",
            Dist::FbLike => "fb-like",
            Dist::OsmLike => "osm-like",
            Dist::WikiLike => "wiki-like",
            Dist::BooksLike => "books-like",
        }
    }
}

impl FromStr for Dist {
    type Err = Error;
    /// Parses a name; `hard` takes `hard:local=L,global=G` (defaults scale with n
    /// at generation time when given as 0).
    fn from_str(s: &str) -> Result<Self> {
        let (name, rest) = s.split_once(':').unwrap_or((s, ""));
        let d = match name {
            "dense" => Dist::Dense,
            "uniform" => Dist::Uniform,
            "normal" => Dist::Normal,
            "lognormal" => Dist::Lognormal,
            "gmm" => Dist::Gmm,
            "zipf" => Dist::Zipf,
            "ycsb" => Dist::Ycsb,
            "fb-like" | "fb" => Dist::FbLike,
            "osm-like" | "osm" => Dist::OsmLike,
            "wiki-like" | "wiki" => Dist::WikiLike,
            "books-like" | "books" | "amzn-like" => Dist::BooksLike,
            "hard" => {
                let (mut local, mut global) = (0, 0);
                for part in rest.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = part.split_once('=').ok_or_else(|| {
                        Error::invalid(format!("hard parameter {part:?} must be key=value"))
                    })?;
                    let v: u64 = v
                        .parse()
                        .map_err(|_| Error::invalid(format!("hard parameter {k}={v:?} is not a number")))?;
                    match k {
                        "local" => local = v,
                        "global" => global = v,
                        _ => return Err(Error::invalid(format!("hard takes local= and global=, not {k}"))),
                    }
                }
                Dist::Hard { local, global }
            }
            _ => {
                return Err(Error::invalid(format!(
                    "unknown distribution {name:?}; known: {}",
                    Dist::NAMES.join(", ")
                )));
            }
        };
        if !rest.is_empty() && !matches!(d, Dist::Hard { .. }) {
            return Err(Error::invalid(format!("distribution {name} takes no parameters")));
        }
        Ok(d)
    }
}

fn rng(seed: u64, stream: u64) -> Pcg64Mcg {
    Pcg64Mcg::seed_from_u64(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Bytes of memory a generator may use per key: the keys themselves plus
/// one working array of the same size (draws before deduplication, gaps).
const GEN_BYTES_PER_KEY: usize = 16;

/// Checks that `n` keys can be generated in memory: the bytes they need
/// must be addressable and available to allocate, else an
/// [`Error::InvalidInput`] that says how many bytes `n` keys take.
fn check_key_count(n: usize) -> Result<()> {
    let Some(bytes) = n.checked_mul(GEN_BYTES_PER_KEY) else {
        return Err(Error::invalid(format!(
            "cannot generate {n} keys: they would take more than {} bytes of memory",
            usize::MAX
        )));
    };
    // Reserve (without touching) what the generator needs; a refusal is an
    // error here rather than an abort halfway.
    let mut probe: Vec<u8> = Vec::new();
    probe.try_reserve_exact(bytes).map_err(|_| {
        Error::invalid(format!(
            "cannot generate {n} keys: {bytes} bytes of memory are not available"
        ))
    })
}

/// Generates `n` strictly increasing keys of `dist` from `seed`.
///
/// Errors: [`Error::InvalidInput`] when `n` keys do not fit in memory (an
/// `n` such as 2^62 is refused before anything is allocated) or the
/// distribution's parameters do not fit `n`.
pub fn generate(dist: Dist, n: usize, seed: u64) -> Result<Vec<u64>> {
    check_key_count(n)?;
    let keys = match dist {
        Dist::Dense => (0..n as u64).collect(),
        Dist::Uniform => sample_distinct(n, seed, |r| r.random::<u64>()),
        Dist::Normal => sample_distinct(n, seed, |r| {
            loop {
                let z: f64 = r.sample(StandardNormal);
                let v = 9.223_372_036_854_776e18 + z * 1.152_921_504_606_847e18;
                if (0.0..1.8e19).contains(&v) {
                    break v as u64;
                }
            }
        }),
        Dist::Lognormal => sample_distinct(n, seed, |r| {
            loop {
                let z: f64 = r.sample(StandardNormal);
                let v = (2.0 * z).exp() * 1_099_511_627_776.0;
                if v < 9.0e18 {
                    break v as u64;
                }
            }
        }),
        Dist::Gmm => gmm(n, seed),
        Dist::Zipf => {
            let z = Zipf::new(1_000_000.0, 1.1).map_err(|e| Error::invalid(format!("zipf: {e}")))?;
            let mut r = rng(seed, 1);
            from_gaps(n, 0, |_| z.sample(&mut r))
        }
        Dist::Ycsb => sample_distinct_seq(n, fnv1a64),
        Dist::Hard { local, global } => {
            // A PGM segment at error ε always covers 2ε + 1 consecutive keys
            // (a flat line fits them), so the targets have ceilings.
            if local > n as u64 / 20 || global > n as u64 / 1100 {
                return Err(Error::invalid(format!(
                    "hard: with n = {n}, at most {} segments at ε = 8 (--local) and {} at ε = 512 (--global) are possible",
                    n / 20,
                    n / 1100
                )));
            }
            hard(n, local, global, seed)
        }
        Dist::FbLike => fb_like(n, seed),
        Dist::OsmLike => osm_like(n, seed),
        Dist::WikiLike => wiki_like(n, seed),
        Dist::BooksLike => books_like(n, seed),
    };
    debug_assert!(keys.is_sorted_by(|a, b| a < b));
    debug_assert_eq!(keys.len(), n);
    Ok(keys)
}

/// FNV-1a 64-bit hash of the 8 little-endian bytes of `i` (YCSB's key hash).
pub fn fnv1a64(i: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in i.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `n` distinct values from `draw`, sorted. Duplicates are replaced by new
/// draws until there are `n` distinct values.
fn sample_distinct(n: usize, seed: u64, mut draw: impl FnMut(&mut Pcg64Mcg) -> u64) -> Vec<u64> {
    let mut r = rng(seed, 2);
    let mut keys: Vec<u64> = (0..n).map(|_| draw(&mut r)).collect();
    loop {
        keys.sort_unstable();
        keys.dedup();
        if keys.len() >= n {
            break;
        }
        let missing = n - keys.len();
        keys.extend((0..missing).map(|_| draw(&mut r)));
    }
    keys
}

fn sample_distinct_seq(n: usize, f: impl Fn(u64) -> u64) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..n as u64).map(&f).collect();
    let mut next = n as u64;
    loop {
        keys.sort_unstable();
        keys.dedup();
        if keys.len() >= n {
            break;
        }
        let missing = n - keys.len();
        keys.extend((next..next + missing as u64).map(&f));
        next += missing as u64;
    }
    keys
}

/// Keys as a running sum of positive gaps, starting at `base`. Gaps are
/// scaled down uniformly if their total would pass 2^63.
fn from_gaps(n: usize, base: u64, mut gap: impl FnMut(usize) -> f64) -> Vec<u64> {
    let gaps: Vec<f64> = (0..n).map(|i| gap(i).max(1.0)).collect();
    let total: f64 = gaps.iter().sum();
    let limit = 9.0e18 - base as f64;
    let scale = if total > limit { limit / total } else { 1.0 };
    let mut keys = Vec::with_capacity(n);
    let mut k = base;
    for (i, g) in gaps.into_iter().enumerate() {
        let step = ((g * scale).round() as u64).max(1);
        k = if i == 0 { base } else { k.saturating_add(step) };
        keys.push(k);
    }
    keys
}

fn gmm(n: usize, seed: u64) -> Vec<u64> {
    let mut r = rng(seed, 3);
    let clusters: Vec<(f64, f64, f64)> = (0..100)
        .map(|_| {
            let center = r.random_range(1.0e12..4.6e18);
            let sigma = center * r.random_range(0.001..0.05);
            let weight = r.random_range(0.1..1.0);
            (center, sigma, weight)
        })
        .collect();
    let total: f64 = clusters.iter().map(|c| c.2).sum();
    let mut cum = Vec::with_capacity(clusters.len());
    let mut acc = 0.0;
    for c in &clusters {
        acc += c.2 / total;
        cum.push(acc);
    }
    sample_distinct(n, seed ^ 0x6d6d, move |r| {
        loop {
            let u: f64 = r.random();
            let j = cum.partition_point(|&c| c < u).min(clusters.len() - 1);
            let Some(&(center, sigma, _)) = clusters.get(j) else {
                continue;
            };
            let z: f64 = r.sample(StandardNormal);
            let v = center + sigma * z;
            if (0.0..9.0e18).contains(&v) {
                break v as u64;
            }
        }
    })
}

/// GRE-style hardness: `global` pieces of different density (what ε = 512
/// sees), each made of `local / global` linear runs whose density differs
/// enough that ε = 8 needs a new segment per run.
fn hard(n: usize, local: u64, global: u64, seed: u64) -> Vec<u64> {
    let global = if global == 0 {
        (n as u64 / 10_000).max(1)
    } else {
        global
    }
    .max(1) as usize;
    let local = if local == 0 { global as u64 * 10 } else { local }.max(global as u64) as usize;
    let mut r = rng(seed, 4);
    let run = (n / local).max(1);
    let per_global = (n / global).max(1);
    // Relative density change between runs: large enough that a single line
    // over two runs misses by more than 8 positions, small enough that the
    // drift over a global piece stays far below 512.
    let delta = (64.0 / run as f64).min(0.5);
    let mut piece_scale = 1.0;
    let mut run_mult = 1.0;
    from_gaps(n, 1 << 20, |i| {
        if i % per_global == 0 {
            piece_scale = (r.random_range(-2.0f64..2.0)).exp() * 4096.0;
        }
        if i % run == 0 {
            // Alternate denser and sparser runs so every run boundary bends.
            run_mult = 1.0 + delta * if (i / run) % 2 == 0 { 1.0 } else { -1.0 };
        }
        piece_scale * run_mult + r.random_range(-0.5..0.5)
    })
}

/// A Pareto(`alpha`) draw with minimum 1.
fn pareto(r: &mut Pcg64Mcg, alpha: f64) -> f64 {
    let u: f64 = r.random_range(f64::EPSILON..1.0);
    u.powf(-1.0 / alpha)
}

/// Keys whose gaps are `scale` × Pareto(`alpha`), capped at `cap`: a Lévy
/// flight. With `alpha < 1` the gaps have no mean and keys cluster at every
/// scale; a PGM segment at error ε then covers about ε^alpha keys, which is
/// how SOSD's hard data sets behave (Lan et al. Table 3). The cap bounds the
/// largest gap, making the largest scales smoother.
fn levy_flight(n: usize, seed: u64, stream: u64, alpha: f64, scale: f64, cap: f64) -> Vec<u64> {
    let mut r = rng(seed, stream);
    from_gaps(n, 1 << 24, |_| (scale * pareto(&mut r, alpha)).min(cap))
}

fn fb_like(n: usize, seed: u64) -> Vec<u64> {
    // Calibrated against SOSD fb (Lan et al. Table 3, keys per PGM segment at
    // ε = 16/64/256/1024: 94/382/1668/10814); see docs/datasets.md.
    let mut keys = levy_flight(n, seed, 5, 0.8, 1000.0, 6.0e7);
    // A handful of far outliers at the top end, as in the real data set.
    let mut r = rng(seed, 9);
    let outliers = (n / 2_000_000).clamp(if n >= 1000 { 1 } else { 0 }, 100);
    let mut tail: Vec<u64> = (0..outliers)
        .map(|_| r.random_range((1u64 << 62)..u64::MAX))
        .collect();
    tail.sort_unstable();
    tail.dedup();
    keys.truncate(n - tail.len());
    keys.extend(tail);
    keys
}

fn osm_like(n: usize, seed: u64) -> Vec<u64> {
    // Calibrated against SOSD osm (Lan et al. Table 3: 148/612/2457/9558 keys
    // per segment at ε = 16/64/256/1024): a Lévy flight close to alpha = 1,
    // clustered at every scale like map points along a space-filling curve.
    levy_flight(n, seed, 6, 0.95, 1000.0, f64::INFINITY)
}

fn wiki_like(n: usize, seed: u64) -> Vec<u64> {
    // Microsecond timestamps. Rate grows over the years, cycles daily and
    // weekly; bots add bursts of edits a few microseconds apart.
    let mut r = rng(seed, 7);
    let day = 86_400e6;
    let mut t = 1.0e15;
    let mut burst_left = 0u32;
    from_gaps(n, 1_000_000_000_000_000, |i| {
        let u = i as f64 / n.max(1) as f64;
        if burst_left > 0 {
            burst_left -= 1;
            return r.random_range(1.0..50.0);
        }
        if r.random::<f64>() < 0.002 {
            burst_left = r.random_range(5..200);
        }
        let growth = 0.2 + 1.6 * u;
        let daily = 1.0 + 0.6 * (std::f64::consts::TAU * t / day).sin();
        let weekly = 1.0 + 0.15 * (std::f64::consts::TAU * t / (7.0 * day)).sin();
        let mean_gap = 2.0e4 / (growth * daily * weekly);
        let e: f64 = r.sample(Exp1);
        let g = e * mean_gap;
        t += g;
        g
    })
}

fn books_like(n: usize, seed: u64) -> Vec<u64> {
    // Calibrated against SOSD books/amzn (Zhang et al. Table 3: models at
    // 1.01/1.5/2/3 expected pages): heavy-tailed gaps with a finite mean
    // (Pareto 1.6), so the data is hard locally and smooth globally, under a
    // slowly varying density.
    let mut r = rng(seed, 8);
    from_gaps(n, 1 << 30, |i| {
        let u = i as f64 / n.max(1) as f64;
        let envelope = (1.5 * (u - 0.3) * (u - 0.3) + 0.3 * (6.0 * u).sin()).exp();
        1000.0 * envelope * pareto(&mut r, 1.6)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dist_is_sorted_distinct_deterministic() {
        for name in Dist::NAMES {
            let d: Dist = name.parse().unwrap();
            for n in [0usize, 1, 2, 1000, 50_000] {
                let a = generate(d, n, 11).unwrap();
                assert_eq!(a.len(), n, "{name} n={n}");
                assert!(a.windows(2).all(|w| w[0] < w[1]), "{name} sorted");
                let b = generate(d, n, 11).unwrap();
                assert_eq!(a, b, "{name} deterministic");
            }
            if !matches!(d, Dist::Dense | Dist::Ycsb) {
                let c = generate(d, 1000, 12).unwrap();
                assert_ne!(generate(d, 1000, 11).unwrap(), c, "{name} seed matters");
            }
        }
    }

    /// Counts that cannot be held in memory are an error, not a capacity
    /// overflow panic or an abort.
    #[test]
    fn huge_counts_are_invalid_input() {
        for n in [1usize << 62, usize::MAX, usize::MAX / 16 + 1, 1 << 59] {
            for d in [Dist::Uniform, Dist::Dense, Dist::Gmm] {
                let e = generate(d, n, 1).unwrap_err();
                assert!(matches!(e, Error::InvalidInput(_)), "{n}: {e}");
                assert!(
                    e.to_string().contains(&format!("cannot generate {n} keys")),
                    "{e}"
                );
            }
        }
        assert_eq!(generate(Dist::Dense, 3, 1).unwrap(), vec![0, 1, 2]);
    }

    #[test]
    fn parse_names() {
        assert_eq!(
            "hard:local=100,global=10".parse::<Dist>().unwrap(),
            Dist::Hard {
                local: 100,
                global: 10
            }
        );
        assert!("hard:local=x".parse::<Dist>().is_err());
        assert!("nope".parse::<Dist>().is_err());
        assert!("uniform:x=1".parse::<Dist>().is_err());
        assert_eq!("fb".parse::<Dist>().unwrap(), Dist::FbLike);
    }

    #[test]
    fn fnv_matches_reference() {
        // FNV-1a 64 of eight zero bytes.
        let mut h: u64 = 0xcbf29ce484222325;
        for _ in 0..8 {
            h = h.wrapping_mul(0x100000001b3);
        }
        assert_eq!(fnv1a64(0), h);
    }
}
