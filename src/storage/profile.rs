//! Storage profiles: the affine cost model `T(bytes) = latency + bytes / bandwidth`.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// An affine storage cost model (AirIndex §3.2): reading `b` consecutive bytes
/// in one call takes `latency + b / bandwidth`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageProfile {
    /// Name of the profile (`nvme`, `hdd`, ..., or `local`/`custom`).
    pub name: String,
    /// Per-call latency in nanoseconds.
    pub latency_ns: f64,
    /// Sequential bandwidth in bytes per second.
    pub bandwidth_bytes_per_s: f64,
}

/// The named presets of `BENCHMARKS.md`: (name, latency µs, bandwidth bytes/s, source).
pub const PRESETS: &[(&str, f64, f64, &str)] = &[
    ("optane", 11.7, 7.2e9, "Zhang et al. Table 2"),
    ("nvme", 70.0, 6.9e9, "Zhang et al. Table 2"),
    ("sata-ssd", 211.6, 560e6, "Zhang et al. Table 2"),
    ("hdd", 4800.0, 141e6, "Zhang et al. Table 2"),
    ("azure-ssd", 250.0, 175e6, "AirIndex Figure 3"),
    ("nfs", 50_000.0, 12e6, "AirIndex Figure 14"),
];

impl StorageProfile {
    /// A profile from a latency in microseconds and a bandwidth in bytes/s.
    pub fn new(name: impl Into<String>, latency_us: f64, bandwidth_bytes_per_s: f64) -> Result<Self> {
        if !(latency_us.is_finite() && latency_us >= 0.0) {
            return Err(Error::invalid(format!(
                "profile latency must be >= 0 µs, got {latency_us}"
            )));
        }
        if !(bandwidth_bytes_per_s.is_finite() && bandwidth_bytes_per_s > 0.0) {
            return Err(Error::invalid(format!(
                "profile bandwidth must be > 0 bytes/s, got {bandwidth_bytes_per_s}"
            )));
        }
        Ok(StorageProfile {
            name: name.into(),
            latency_ns: latency_us * 1000.0,
            bandwidth_bytes_per_s,
        })
    }

    /// One of the named presets (`optane`, `nvme`, `sata-ssd`, `hdd`,
    /// `azure-ssd`, `nfs`), or `custom:LAT_US:BW_MB_S` for any other point.
    pub fn named(name: &str) -> Result<Self> {
        if let Some(rest) = name.strip_prefix("custom:") {
            let mut parts = rest.split(':');
            let (Some(lat), Some(bw), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(Error::invalid(format!(
                    "custom profile must be custom:LATENCY_US:BANDWIDTH_MB_S, got {name:?}"
                )));
            };
            let lat: f64 = lat
                .parse()
                .map_err(|_| Error::invalid(format!("bad latency {lat:?} in profile {name:?}")))?;
            let bw: f64 = bw
                .parse()
                .map_err(|_| Error::invalid(format!("bad bandwidth {bw:?} in profile {name:?}")))?;
            return StorageProfile::new(name, lat, bw * 1e6);
        }
        PRESETS
            .iter()
            .find(|p| p.0 == name)
            .map(|&(n, lat, bw, _)| StorageProfile {
                name: n.to_string(),
                latency_ns: lat * 1000.0,
                bandwidth_bytes_per_s: bw,
            })
            .ok_or_else(|| {
                let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
                Error::invalid(format!(
                    "unknown storage profile {name:?}; known: {}, local (measured), custom:LAT_US:BW_MB_S",
                    names.join(", ")
                ))
            })
    }

    /// Nanoseconds per byte transferred.
    pub fn ns_per_byte(&self) -> f64 {
        1e9 / self.bandwidth_bytes_per_s
    }

    /// `T(bytes)` in nanoseconds.
    pub fn read_ns(&self, bytes: u64) -> f64 {
        self.latency_ns + bytes as f64 * self.ns_per_byte()
    }

    /// `T(bytes)` in picoseconds, rounded, as charged into `IoStats`.
    pub fn read_ps(&self, bytes: u64) -> u64 {
        (self.read_ns(bytes) * 1000.0).round() as u64
    }

    /// The modelled time, in picoseconds, of a batch of reads of `bytes`
    /// bytes in all, `calls` of them with up to `queue_depth` in flight: the
    /// latency is paid once per wave of `queue_depth` reads, the bandwidth
    /// is shared (`ceil(calls / qd) * latency + bytes / bandwidth`).
    /// At queue depth 1 it is the sum of the reads' `T(bytes)`.
    pub fn batch_read_ps(&self, calls: u64, bytes: u64, queue_depth: usize) -> u64 {
        let waves = calls.div_ceil(queue_depth.max(1) as u64);
        ((waves as f64 * self.latency_ns + bytes as f64 * self.ns_per_byte()) * 1000.0).round() as u64
    }

    /// Latency in microseconds.
    pub fn latency_us(&self) -> f64 {
        self.latency_ns / 1000.0
    }

    /// Bandwidth in MB/s (10^6 bytes per second).
    pub fn bandwidth_mb_s(&self) -> f64 {
        self.bandwidth_bytes_per_s / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_and_cost() {
        let hdd = StorageProfile::named("hdd").unwrap();
        assert_eq!(hdd.latency_ns, 4_800_000.0);
        // 4096 bytes at 141 MB/s = 29049.6 ns
        let t = hdd.read_ns(4096);
        assert!((t - (4_800_000.0 + 4096.0 / 141e6 * 1e9)).abs() < 1e-6);
        assert!(StorageProfile::named("floppy").is_err());
        let c = StorageProfile::named("custom:100:1000").unwrap();
        assert_eq!(c.latency_ns, 100_000.0);
        assert_eq!(c.bandwidth_bytes_per_s, 1e9);
        assert!(StorageProfile::named("custom:1").is_err());
        assert!(StorageProfile::new("x", 1.0, 0.0).is_err());
    }
}
