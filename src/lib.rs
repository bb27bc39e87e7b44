//! strata: disk-resident learned indexes.
//!
//! A storage toolkit for ordered `u64 -> u64` indexes whose small models live
//! in memory (or on slow storage) and whose data lives in checksummed pages on
//! an SSD, a network file system or any [`storage::Storage`]. See
//! `ARCHITECTURE.md` for the design: one layered-index engine, the updatable
//! trees, the hybrid store, and the tools that measure them.
//!
//! Module map (arrows point down only):
//! - [`storage`]: files, `O_DIRECT`, I/O accounting, storage profiles, page cache;
//! - [`format`](mod@format): pages, checksums, data runs, SOSD key files;
//! - [`data`]: deterministic data and workload generators;
//! - [`index`]: index kinds behind one [`index::Index`] trait;
//! - [`db`]: the durable hybrid store [`Db`] (WAL, dynamic stage, learned static stage);
//! - [`tune`]: the storage cost model and AirTune.

pub mod data;
pub mod db;
pub mod error;
pub mod format;
pub mod index;
pub mod log;
pub mod model;
pub mod storage;
pub mod tune;

pub use db::Db;
pub use error::{Error, Result};

/// The README's Rust examples, compiled as doctests so they stay correct.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
