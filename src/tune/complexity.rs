//! Step index complexity `τ̂(D; T)` (AirIndex §5.3, Appendix A.3, Eq. 12):
//! the cost of an ideal, perfectly balanced step (B-tree-like) index over a
//! layer of `s_D` bytes, used as the "remaining work" heuristic when AirTune
//! picks the top-k candidates.
//!
//! Eq. 12 balances the root size and every layer's read at
//! `(s_D · s_step^L)^(1/(L+1))` bytes for `L` index layers and takes the
//! cheapest `L`: `τ̂ = min_L (L + 1) · T((s_D · s_step^L)^(1/(L+1)))`.
//! strata reads whole pages, so each balanced read is rounded up to whole
//! pages, and `s_step` is one 16-byte step entry's share of a page (the page
//! header included). Like the original, it depends only on the size of the
//! layer (arithmetic, no data), and it is an upper bound of what a step index
//! of that shape costs.

use serde::Serialize;

use crate::storage::StorageProfile;

/// The value of `τ̂` and the ideal step index that attains it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(super) struct StepComplexity {
    /// `τ̂` in nanoseconds.
    pub cost_ns: f64,
    /// Number of ideal step layers above the layer (`L`; 0 = read it whole).
    pub layers: u32,
    /// Bytes of each of the `L + 1` balanced reads (whole pages).
    pub read_bytes: u64,
}

/// Bytes of one step piece (16-byte entry) including its share of the page
/// header.
fn step_entry_bytes(page_size: usize) -> f64 {
    let ps = page_size as f64;
    16.0 * ps / (ps - crate::format::PAGE_HEADER_LEN as f64)
}

/// `τ̂` of a layer of `size_bytes` bytes under `profile`, with reads in
/// pages of `page_size` bytes. Non-decreasing in `size_bytes`, in the
/// latency and in the inverse bandwidth; never more than reading the layer
/// whole (`L = 0`).
pub(super) fn step_index_complexity(
    size_bytes: u64,
    profile: &StorageProfile,
    page_size: usize,
) -> StepComplexity {
    let ps = page_size.max(crate::format::PAGE_HEADER_LEN + 16) as f64;
    let ln_s = (size_bytes.max(1) as f64).ln();
    let ln_step = step_entry_bytes(ps as usize).ln();
    let mut best = StepComplexity {
        cost_ns: f64::INFINITY,
        layers: 0,
        read_bytes: 0,
    };
    for l in 0..=64u32 {
        let r = ((ln_s + l as f64 * ln_step) / (l + 1) as f64).exp();
        let read = if l == 0 {
            size_bytes.div_ceil(ps as u64).max(1) * ps as u64
        } else {
            // A hair below the boundary counts as the boundary (rounding of exp/ln).
            ((r / ps - 1e-9).ceil().max(1.0) * ps) as u64
        };
        let cost = (l + 1) as f64 * profile.read_ns(read);
        if cost < best.cost_ns {
            best = StepComplexity {
                cost_ns: cost,
                layers: l,
                read_bytes: read,
            };
        }
        // Once a balanced read fits one page, more layers only add reads.
        if r <= ps {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str) -> StorageProfile {
        StorageProfile::named(name).unwrap()
    }

    #[test]
    fn monotone_in_size_and_bounded_by_a_whole_read() {
        for name in ["optane", "nvme", "sata-ssd", "hdd", "azure-ssd", "nfs"] {
            let prof = p(name);
            let mut prev = 0.0;
            let mut prev_layers = 0;
            let mut sizes: Vec<u64> = (0..40).flat_map(|e| [1u64 << e, 3 << e, 7 << e]).collect();
            sizes.sort_unstable();
            {
                for s in sizes {
                    let t = step_index_complexity(s, &prof, 4096);
                    assert!(t.cost_ns >= prev - 1e-6, "{name}: τ̂ decreased at {s}");
                    let whole = prof.read_ns(s.div_ceil(4096).max(1) * 4096);
                    assert!(
                        t.cost_ns <= whole + 1e-6,
                        "{name}: τ̂ above reading {s} bytes whole"
                    );
                    assert!(
                        t.cost_ns >= prof.read_ns(4096) - 1e-6,
                        "{name}: τ̂ below one page read"
                    );
                    assert!(
                        t.layers + 1 >= prev_layers,
                        "{name}: layers fell by more than one"
                    );
                    assert_eq!(t.read_bytes % 4096, 0);
                    prev = t.cost_ns;
                    prev_layers = t.layers;
                }
            }
        }
    }

    #[test]
    fn slower_storage_costs_more_and_latency_makes_it_shallower() {
        let s = 1u64 << 30;
        let fast = StorageProfile::new("a", 10.0, 1e9).unwrap();
        let slow_lat = StorageProfile::new("b", 10_000.0, 1e9).unwrap();
        let slow_bw = StorageProfile::new("c", 10.0, 1e7).unwrap();
        let a = step_index_complexity(s, &fast, 4096);
        let b = step_index_complexity(s, &slow_lat, 4096);
        let c = step_index_complexity(s, &slow_bw, 4096);
        assert!(b.cost_ns > a.cost_ns && c.cost_ns > a.cost_ns);
        assert!(
            b.layers <= a.layers,
            "higher latency, fewer layers: {} vs {}",
            b.layers,
            a.layers
        );
        assert!(
            c.layers >= a.layers,
            "lower bandwidth, more layers: {} vs {}",
            c.layers,
            a.layers
        );
        // Tiny layers are read whole: one page, no index.
        let t = step_index_complexity(100, &fast, 4096);
        assert_eq!((t.layers, t.read_bytes), (0, 4096));
    }

    #[test]
    fn a_real_step_stack_of_that_shape_costs_no_more() {
        // Over a layer of s bytes, a B+-tree whose nodes are the balanced read
        // size (every node one read of whole pages) needs no more layers than
        // τ̂ counts, so it costs no more: τ̂ is attainable.
        for name in ["nvme", "hdd", "nfs"] {
            let prof = p(name);
            for s in [1u64 << 16, 1 << 20, 1 << 26, 1 << 32, 1 << 38] {
                let t = step_index_complexity(s, &prof, 4096);
                if t.layers == 0 {
                    assert_eq!(t.read_bytes, s.div_ceil(4096) * 4096);
                    continue;
                }
                let node = t.read_bytes;
                let payload = (node / 4096) * (4096 - 16);
                let (mut size, mut layers) = (s, 0u32);
                while size > payload {
                    size = size.div_ceil(payload) * 16;
                    layers += 1;
                }
                assert!(
                    layers <= t.layers,
                    "{name} {s}: {layers} layers for τ̂'s {}",
                    t.layers
                );
                assert!((layers + 1) as f64 * prof.read_ns(node) <= t.cost_ns + 1e-6);
            }
        }
    }
}
