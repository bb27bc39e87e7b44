//! Pure algorithms on sorted keys (no I/O).
//!
//! - `pla`: optimal piecewise linear approximation (PGM-index, with
//!   general intervals and disk-based zero intervals; partitions segmented
//!   independently and stitched into exactly the sequential result), the FITing-tree
//!   shrinking cone, and slope compression;
//! - `radix_spline`: RadixSpline (greedy spline corridor + radix table);
//! - `rmi`: a two-layer linear recursive model index;
//! - `leco`: LeCo learned compression of `u64` sequences, lossless and the
//!   lossy-within-bounds `-D` variant for zone maps;
//! - `gapcode`: gap-coded rough separators (values chosen inside bounds,
//!   gaps stored at the coarsest precision each bound allows);
//! - `bitpack`: fixed-width bit packing.
//!
//! Models that answer lookups ([`RadixSpline`], [`Rmi`]) return a range
//! `[lo, hi)` with the contract of `index::ApproxPos`: for any query `x`, the
//! lower bound of `x` in the keys (index of the first key `>= x`, or `n`)
//! lies in `[lo, hi)` and `hi <= n + 1`.
//!
//! Nothing here panics on any input: builders accept any keys (or reject
//! unsorted ones with an error), decoders validate every structure they read.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub(crate) mod bitpack;
mod codec;
mod exact;
pub(crate) mod gapcode;
mod leco;
mod pla;
pub(crate) mod radix_spline;
mod rmi;

pub use gapcode::{DeltaArray, GapArray};
pub use leco::LecoArray;
#[cfg(test)]
pub(crate) use pla::intercept_range;
pub use pla::{
    ConeStream, IntervalPoint, IntervalRun, IntervalSteps, PlaInput, PlaPart, PlaStitcher, PlaStream,
    Segment, greedy_cone, optimal_pla, optimal_pla_points, optimal_pla_zero_interval, segment_part,
};
pub(crate) use pla::{InterceptRange, min_slope_set, zero_interval};
pub use radix_spline::{RadixSpline, SplinePoints};

/// Sorted keys a builder reads in sequential passes: a slice, or keys on
/// storage that the layer above reads back chunk by chunk (so a builder
/// holds its model, not the keys).
pub trait KeyPasses {
    /// Number of keys.
    fn count(&self) -> crate::Result<usize>;
    /// Calls `f(i, chunk)` for the keys `range` in order, `chunk` holding
    /// keys `i..i + chunk.len()`.
    fn pass(&self, range: std::ops::Range<usize>, f: &mut dyn FnMut(usize, &[u64])) -> crate::Result<()>;
    /// A pass over every key; returns their number. A source whose keys
    /// are still arriving (a data run being written) hands them over as
    /// they come, without waiting for [`count`](KeyPasses::count).
    fn pass_all(&self, f: &mut dyn FnMut(usize, &[u64])) -> crate::Result<usize> {
        let n = self.count()?;
        self.pass(0..n, f)?;
        Ok(n)
    }
}

impl KeyPasses for &[u64] {
    fn count(&self) -> crate::Result<usize> {
        Ok(self.len())
    }

    fn pass(&self, range: std::ops::Range<usize>, f: &mut dyn FnMut(usize, &[u64])) -> crate::Result<()> {
        let end = range.end.min(self.len());
        if range.start < end {
            f(range.start, self.get(range.start..end).unwrap_or_default());
        }
        Ok(())
    }
}
pub use rmi::Rmi;
pub(crate) use rmi::{RmiLeaf, RmiRoot, leaf_approx, least_squares};

/// Keys handed over in chunks of 7, as storage would (tests of the
/// builders that read [`KeyPasses`]).
#[cfg(test)]
pub(crate) struct Chunked<'a>(pub &'a [u64]);

#[cfg(test)]
impl KeyPasses for Chunked<'_> {
    fn count(&self) -> crate::Result<usize> {
        Ok(self.0.len())
    }

    fn pass(&self, range: std::ops::Range<usize>, f: &mut dyn FnMut(usize, &[u64])) -> crate::Result<()> {
        let end = range.end.min(self.0.len());
        let mut i = range.start;
        while i < end {
            let j = (i + 7).min(end);
            f(i, self.0.get(i..j).unwrap_or_default());
            i = j;
        }
        Ok(())
    }
}
