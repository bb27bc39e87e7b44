//! strata: disk-resident learned indexes.
//!
//! A storage toolkit for ordered `u64 -> u64` indexes whose small models live
//! in memory (or on slow storage) and whose data lives in checksummed pages on
//! an SSD, a network file system or any [`storage::ReadStorage`]: one
//! layered-index engine for the static learned indexes, an updatable B+-tree,
//! a durable hybrid store, and the tools that measure them.
//!
//! Module map, bottom to top, in the rung order of `tests/layering.rs`, which
//! enforces it: a module imports only modules on rungs below its own (one
//! rung per line; `docs/architecture.md` draws the map and the path of a
//! lookup and of a write):
//! - [`error`]: the one [`Error`] enum;
//! - [`storage`]: the read side [`storage::ReadStorage`], read-write
//!   [`storage::Storage`], the write-once [`storage::Sink`],
//!   [`storage::Directory`] (with `publish`) and its one wrapper
//!   [`storage::PassThrough`]; local files, `O_DIRECT`, I/O accounting,
//!   storage profiles, page cache;
//! - [`format`](mod@format): pages, checksums, paged arrays, data runs, SOSD
//!   key files;
//! - [`model`] and [`data`]: learned-model algorithms (no I/O); deterministic
//!   data and workload generators;
//! - [`pager`] and [`log`](mod@log): pages of a read-write file (allocation,
//!   free list, checkpoint) for page-based updatable trees; the durable log
//!   generic over its record (WAL with group commit, recovery, manifests
//!   changed by edits);
//! - [`index`]: index kinds behind one [`index::Index`] trait (with
//!   [`index::Cursor`] and batch lookups), the [`index::IndexKind`] trait and
//!   [`index::Registry`], the B+-tree and the static layered engine;
//! - [`tune`]: the storage cost model, AirTune and its kind `air`;
//! - [`db`]: the durable hybrid store [`Db`] (WAL on [`log`](mod@log),
//!   dynamic stage, learned static stage);
//! - [`lsm`]: the LSM-tree key-value store (byte-string keys, SSTables with
//!   pluggable learned indexes, leveled compaction);
//! - `join`: a rung reserved for the coming wing (not built yet);
//! - [`registry`]: every kind of this build, and [`registry::build`] /
//!   [`registry::open`] by kind name.
//!
//! ```no_run
//! use strata::index::{BuildOptions, OpenOptions};
//!
//! # fn main() -> strata::Result<()> {
//! let keys: Vec<u64> = (0..1_000).map(|i| i * 2).collect();
//! strata::registry::build(&"btree".parse()?, &keys, "b.idx".as_ref(), &BuildOptions::default())?;
//! let idx = strata::registry::open("b.idx".as_ref(), &OpenOptions::default())?;
//! assert_eq!(idx.lower_bound(3)?, Some((4, 2)));
//! # Ok(())
//! # }
//! ```

// Library code never panics on bad input or corrupt files: no unwrap, no
// expect, no unchecked indexing, in every module (tests may: `clippy.toml`).
// A local exception is an `#[expect(lint, reason = "...")]` at the item.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod data;
#[warn(unreachable_pub)]
pub mod db;
pub mod error;
#[warn(unreachable_pub)]
pub mod format;
#[cfg(any(fuzzing, test))]
#[doc(hidden)]
pub mod fuzzing;
#[warn(unreachable_pub)]
pub mod index;
#[warn(unreachable_pub)]
pub mod join;
#[warn(unreachable_pub)]
pub mod log;
#[warn(unreachable_pub)]
pub mod lsm;
#[warn(unreachable_pub)]
pub mod model;
#[warn(unreachable_pub)]
pub mod pager;
pub mod registry;
#[warn(unreachable_pub)]
pub mod storage;
#[warn(unreachable_pub)]
pub mod tune;

pub use db::Db;
pub use error::{Error, Result};

/// The README's Rust examples, compiled as doctests so they stay correct.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
