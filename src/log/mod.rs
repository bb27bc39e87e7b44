//! The durable log: write-ahead log segments with group commit, torn-tail
//! recovery, a background sync, and atomically published manifests changed by
//! edits. Generic over the record: the hybrid store (`db`) logs `u64`
//! operations, an LSM store logs batches of byte strings.
//!
//! - [`LogRecord`]: what a record is and how it is encoded inside a frame;
//! - [`WalWriter`]: appends batches to one segment; concurrent writers share
//!   a write and a sync (group commit) under a [`SyncPolicy`];
//! - [`replay`]: reads one segment back, dropping a torn tail of the newest
//!   segment, counting or refusing ([`Recovery`]) a damaged complete last
//!   frame, and reporting any other damage as [`crate::Error::CorruptionAt`];
//! - [`WalChain`]: the live segments as the manifest records them (store
//!   id, first, sealed lengths and last sequence numbers, newest);
//! - [`recover`] / `create_segment`: a log as numbered segments
//!   `wal-NNNNNN.log` in a [`Directory`](crate::storage::Directory), checked
//!   against its chain;
//! - `SyncThread`: syncs a log every so many milliseconds;
//! - [`manifest`]: one checksummed manifest file per store, published by
//!   write-tmp, sync, rename, sync-dir, and changed by [`Manifest::Edit`]s.
//!
//! The crash model: a write is durable once its frame was synced; a crash
//! may leave the last frame of the newest segment torn, never an older one,
//! and never a segment the manifest does not record (rotation publishes the
//! manifest before any write goes to the new segment).
//! Formats: `docs/format/log.md`. This module sits above `storage` and
//! `format` and below `index`.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod chain;
pub mod manifest;
mod record;
mod segment;
mod segments;
mod service;
mod sync;
mod writer;

pub use chain::{SealedSegment, WalChain};
pub use manifest::Manifest;
pub use record::LogRecord;
pub use segment::{
    LogBatch, Recovery, Replay, SegmentHeader, WAL_HEADER_LEN, WAL_HEADER_LEN_V1, WAL_MAGIC, WAL_VERSION,
    WAL_VERSION_1, decode_header, parse_frames, parse_segment, replay, replay_with,
};
pub(crate) use segments::create_segment;
pub use segments::{Dropped, LogSpec, Recovered, Replayed, recover, replay_segments, wal_id, wal_name};
pub(crate) use service::{Health, Workers, read_only_error, spawn_sync, spawn_thread, warn_dropped};
#[cfg(test)]
use sync::SyncThread;
pub use writer::{SyncPolicy, WalWriter};

#[cfg(test)]
mod tests;
