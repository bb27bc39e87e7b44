//! The LSM-tree key-value store (Liu et al.): byte-string keys and values,
//! a write-ahead log on [`crate::log`], a concurrent memtable, SSTables whose
//! index is pluggable (fence pointers or a learned kind of the layered
//! engine over keys mapped to integers), Bloom filters, leveled compaction.
//! Formats: `docs/format/sstable.md`, `docs/format/lsm.md`.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod key;
pub mod kind;
pub mod table;
