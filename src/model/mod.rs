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
pub use pla::{
    IntervalPoint, PlaPart, PlaStitcher, PlaStream, Segment, greedy_cone, optimal_pla, optimal_pla_points,
    optimal_pla_zero_interval, segment_part,
};
pub(crate) use pla::{intercept_range, min_slope_set, zero_interval};
pub use radix_spline::RadixSpline;
pub use rmi::Rmi;
pub(crate) use rmi::{RmiLeaf, RmiRoot, leaf_approx, least_squares};
