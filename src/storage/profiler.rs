//! Device profiler: measure latency and bandwidth of a real device.

use std::path::Path;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::{ALIGN, AlignedBuf, Directory, FileStorage, ReadStorage, Storage, StorageProfile};
use crate::{Error, Result};

/// What to measure.
#[derive(Debug, Clone)]
pub struct ProfileOptions {
    /// Size of the scratch file (bytes). Larger than any read; reads land at
    /// random aligned offsets inside it.
    pub file_size: u64,
    /// Read sizes to time (bytes, multiples of 4 KiB).
    pub sizes: Vec<usize>,
    /// Timed reads per size.
    pub reads_per_size: usize,
    /// Seed of the random offsets.
    pub seed: u64,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            file_size: 256 << 20,
            sizes: (0..=8).map(|i| 4096usize << i).collect(), // 4 KiB .. 1 MiB
            reads_per_size: 200,
            seed: 42,
        }
    }
}

/// One measured point: mean time of a read of `bytes`.
#[derive(Debug, Clone, Serialize)]
pub struct ProfilePoint {
    /// Read size in bytes.
    pub bytes: usize,
    /// Mean time per read in microseconds.
    pub mean_us: f64,
    /// Median time per read in microseconds.
    pub p50_us: f64,
}

/// The fitted affine model and the points it was fitted to.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileReport {
    /// Fitted per-call latency (µs): the intercept of the least-squares line.
    pub latency_us: f64,
    /// Fitted bandwidth (MB/s, 10^6 bytes/s): the inverse slope.
    pub bandwidth_mb_s: f64,
    /// Coefficient of determination of the fit.
    pub r2: f64,
    /// Whether reads bypassed the page cache (`O_DIRECT`).
    pub direct: bool,
    /// The scratch file that was read (removed afterwards).
    pub file: String,
    /// Timed reads per size.
    pub reads_per_size: usize,
    /// The measured points.
    pub points: Vec<ProfilePoint>,
}

impl ProfileReport {
    /// The fitted model as a [`StorageProfile`] named `local`.
    pub fn to_profile(&self) -> Result<StorageProfile> {
        StorageProfile::new("local", self.latency_us.max(0.0), self.bandwidth_mb_s * 1e6)
    }
}

/// Least-squares fit of `y = a + b x` minimising the *relative* error
/// (weights `1 / y²`), so small reads — where the latency term dominates —
/// count as much as large ones. Returns `(a, b, r2)` with `r2` the weighted
/// coefficient of determination.
pub(super) fn fit_line(points: &[(f64, f64)]) -> (f64, f64, f64) {
    if points.len() < 2 {
        return (points.first().map_or(0.0, |p| p.1), 0.0, 0.0);
    }
    let w: Vec<f64> = points
        .iter()
        .map(|p| if p.1 > 0.0 { 1.0 / (p.1 * p.1) } else { 1.0 })
        .collect();
    let sw: f64 = w.iter().sum();
    let mx = points.iter().zip(&w).map(|(p, w)| w * p.0).sum::<f64>() / sw;
    let my = points.iter().zip(&w).map(|(p, w)| w * p.1).sum::<f64>() / sw;
    let sxx: f64 = points.iter().zip(&w).map(|(p, w)| w * (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points
        .iter()
        .zip(&w)
        .map(|(p, w)| w * (p.0 - mx) * (p.1 - my))
        .sum();
    let syy: f64 = points.iter().zip(&w).map(|(p, w)| w * (p.1 - my).powi(2)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let a = my - b * mx;
    let r2 = if sxx > 0.0 && syy > 0.0 {
        sxy * sxy / (sxx * syy)
    } else {
        1.0
    };
    (a, b, r2)
}

/// Measures the device holding `dir`: writes a scratch file of random bytes,
/// syncs it, times random `O_DIRECT` reads of each size, fits
/// `T(bytes) = latency + bytes / bandwidth` by least squares and removes the
/// scratch file.
///
/// An `s3://bucket/prefix` ([`super::remote_url`]) is measured on the object
/// store instead ([`profile_directory`]).
pub fn profile_device(dir: &Path, opts: &ProfileOptions) -> Result<ProfileReport> {
    if let Some(url) = super::remote_url(dir) {
        return profile_directory(super::open_remote(url)?.as_ref(), opts);
    }
    let max_size = check_options(opts)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let path = dir.join(format!(".strata-profile-{}.tmp", std::process::id()));
    let result = run(&path, opts, max_size);
    let _ = std::fs::remove_file(&path);
    result
}

/// The largest read size of `opts`, once the sizes and the scratch file
/// size are checked.
fn check_options(opts: &ProfileOptions) -> Result<usize> {
    let max_size = opts.sizes.iter().copied().max().unwrap_or(ALIGN);
    if opts.sizes.iter().any(|s| *s == 0 || s % ALIGN != 0) {
        return Err(Error::invalid(
            "profile read sizes must be non-zero multiples of 4096",
        ));
    }
    if opts.file_size < 2 * max_size as u64 {
        return Err(Error::invalid(
            "profile scratch file must be at least twice the largest read",
        ));
    }
    Ok(max_size)
}

/// Writes the scratch file's random bytes, 4 MiB at a time, through `write`.
fn fill_scratch(
    opts: &ProfileOptions,
    rng: &mut rand_pcg::Pcg64Mcg,
    mut write: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let chunk = 4 << 20;
    let mut buf = vec![0u8; chunk];
    let mut off = 0u64;
    while off < opts.file_size {
        rng.fill(&mut buf[..]);
        let n = chunk.min((opts.file_size - off) as usize);
        let part = buf.get(..n).ok_or_else(|| Error::invalid("chunk"))?;
        write(off, part)?;
        off += n as u64;
    }
    Ok(())
}

/// Measures the storage of `dir` (any [`Directory`], e.g. an object store):
/// builds a scratch file of random bytes through a sink, times random
/// reads of each size through [`Directory::open_read`], fits the line as
/// [`profile_device`] does, and removes the file. `direct` in the report
/// is false: there is no page cache to bypass, or it is the directory's.
pub fn profile_directory(dir: &dyn Directory, opts: &ProfileOptions) -> Result<ProfileReport> {
    let max_size = check_options(opts)?;
    let name = format!(".strata-profile-{}.tmp", std::process::id());
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(opts.seed);
    let mut sink = dir.create_sink(&name, 0)?;
    fill_scratch(opts, &mut rng, |_, part| sink.append(part))?;
    sink.finish(&[])?;
    let result = dir.open_read(&name).and_then(|file| {
        let (points, a, bandwidth_mb_s, r2) = measure(file.as_ref(), opts, max_size, &mut rng)?;
        Ok(ProfileReport {
            latency_us: a,
            bandwidth_mb_s,
            r2,
            direct: false,
            file: format!("{}/{name}", dir.describe()),
            reads_per_size: opts.reads_per_size,
            points,
        })
    });
    let _ = dir.remove(&name);
    result
}

fn run(path: &Path, opts: &ProfileOptions, max_size: usize) -> Result<ProfileReport> {
    let file = FileStorage::open(path, true, true, true)?;
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(opts.seed);
    fill_scratch(opts, &mut rng, |off, part| file.write_at(off, part))?;
    file.sync()?;
    let (points, a, bandwidth_mb_s, r2) = measure(&file, opts, max_size, &mut rng)?;
    Ok(ProfileReport {
        latency_us: a,
        bandwidth_mb_s,
        r2,
        direct: file.is_direct(),
        file: path.display().to_string(),
        reads_per_size: opts.reads_per_size,
        points,
    })
}

/// Times random reads of each size of `opts` from `file` (after 16 untimed
/// ones) and fits the line: the points, latency (µs), bandwidth (MB/s), r².
fn measure(
    file: &dyn ReadStorage,
    opts: &ProfileOptions,
    max_size: usize,
    rng: &mut rand_pcg::Pcg64Mcg,
) -> Result<(Vec<ProfilePoint>, f64, f64, f64)> {
    let slots = (opts.file_size - max_size as u64) / ALIGN as u64;
    let mut points = Vec::new();
    let mut fit_input = Vec::new();
    let mut read_buf = AlignedBuf::zeroed(max_size);
    // Warm-up reads (open paths, TLBs) are not timed.
    for _ in 0..16 {
        let o = rng.random_range(0..slots) * ALIGN as u64;
        file.read_at(o, read_buf.get_mut(..ALIGN).ok_or_else(|| Error::invalid("buf"))?)?;
    }
    for &size in &opts.sizes {
        let mut times = Vec::with_capacity(opts.reads_per_size);
        for _ in 0..opts.reads_per_size {
            let o = rng.random_range(0..slots) * ALIGN as u64;
            let dst = read_buf.get_mut(..size).ok_or_else(|| Error::invalid("buf"))?;
            let t0 = Instant::now();
            file.read_at(o, dst)?;
            times.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        times.sort_by(f64::total_cmp);
        let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
        let p50 = times.get(times.len() / 2).copied().unwrap_or(mean);
        fit_input.push((size as f64, mean));
        points.push(ProfilePoint {
            bytes: size,
            mean_us: mean,
            p50_us: p50,
        });
    }
    let (a, b, r2) = fit_line(&fit_input);
    let bandwidth_mb_s = if b > 0.0 { 1.0 / b } else { f64::INFINITY }; // bytes/µs = MB/s
    Ok((points, a, bandwidth_mb_s, r2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_line() {
        let pts: Vec<(f64, f64)> = (1..10)
            .map(|i| (i as f64 * 4096.0, 15.0 + i as f64 * 4096.0 / 4000.0))
            .collect();
        let (a, b, r2) = fit_line(&pts);
        assert!((a - 15.0).abs() < 1e-9);
        assert!((1.0 / b - 4000.0).abs() < 1e-6);
        assert!((r2 - 1.0).abs() < 1e-9);
    }

    /// Any directory can be measured: the scratch file goes through a sink
    /// and is removed.
    #[test]
    fn profiles_a_directory_through_a_sink() {
        let dir = crate::storage::MemDirectory::new();
        let opts = ProfileOptions {
            file_size: 1 << 20,
            sizes: vec![4096, 65536],
            reads_per_size: 4,
            seed: 1,
        };
        let r = profile_directory(&dir, &opts).unwrap();
        assert_eq!(r.points.len(), 2);
        assert!(!r.direct);
        assert!(dir.list().unwrap().is_empty(), "scratch file removed");
        let bad = ProfileOptions {
            file_size: 65536,
            ..opts
        };
        assert!(profile_directory(&dir, &bad).is_err());
        assert!(dir.list().unwrap().is_empty());
    }

    #[test]
    fn profiles_a_small_scratch_file() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = ProfileOptions {
            file_size: 8 << 20,
            sizes: vec![4096, 65536, 262_144],
            reads_per_size: 8,
            seed: 1,
        };
        let r = profile_device(tmp.path(), &opts).unwrap();
        assert_eq!(r.points.len(), 3);
        assert!(r.points.iter().all(|p| p.mean_us > 0.0));
        assert!(
            std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
            "scratch file removed"
        );
    }
}
