//! SSTables: immutable sorted files of internal keys and values
//! (`docs/format/sstable.md`).
//!
//! A table is a sequence of prefix-compressed, checksummed data blocks
//! (LevelDB's block format), a Bloom filter over the user keys, and a
//! pluggable index over the entries' *ordinals* (their numbers `0..n` in key
//! order): fence pointers (`fp`, the LevelDB/RocksDB baseline) or a learned
//! kind of the layered engine over user keys mapped to integers (Liu et al.,
//! §3.3, §4, §5.3). Every index answers a key with a range of ordinals; the
//! table reads the data blocks covering it in one `read_at` and searches
//! them from the restart point before the range.
//!
//! [`TableBuilder`] writes a table through a [`Sink`](crate::storage::Sink);
//! [`Table`] opens one and serves point lookups ([`Table::get`]) and forward
//! iteration ([`Table::iter`]), with its block handles, index and filter
//! resident, or, unpinned ([`Table::pinned`]), loaded through the
//! [`BlockCache`] when needed.

mod block;
mod bloom;
mod builder;
mod cache;
mod index;
mod keymap;
mod layout;
mod reader;
mod sections;
#[cfg(test)]
mod tests;

pub use builder::TableBuilder;
pub use cache::{BlockCache, BlockCacheStats};
#[cfg(any(fuzzing, test))]
pub(crate) use layout::reseal;
pub use reader::{COMPACTION_READAHEAD, Table, TableIter};

use crate::storage::StorageProfile;
use crate::{Error, Result};

/// The index kinds a table may carry.
pub const INDEX_KINDS: &[&str] = &[
    "fp",
    "pgm",
    "pgm-cpr",
    "rs",
    "rmi",
    "plr",
    "fiting",
    "gap-zonemap-d",
    "air",
];

/// Largest position boundary.
pub const MAX_BOUNDARY: usize = 65_536;

/// How a table's index is built: the knobs of Liu et al. (index type and
/// position boundary; the granularity is the table).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    /// One of [`INDEX_KINDS`]: `fp` (fence pointers), `pgm`, `pgm-cpr`
    /// (PGM's segments compressed), `rs`, `rmi`, `plr`, `fiting`,
    /// `gap-zonemap-d` or `air`.
    pub kind: String,
    /// Position boundary: the most entries a lookup searches after the
    /// index (for `fp`, entries per fence; for the learned kinds the width of
    /// the predicted range, see `docs/format/sstable.md` for each kind's
    /// slack). Default 16.
    pub boundary: usize,
    /// Storage profile `air` tunes for (`None` = the `nvme` preset).
    pub profile: Option<StorageProfile>,
}

impl Default for IndexSpec {
    fn default() -> Self {
        IndexSpec {
            kind: "pgm".to_string(),
            boundary: 16,
            profile: None,
        }
    }
}

impl IndexSpec {
    /// Parses `KIND[,boundary=N][,profile=NAME]` (`pgm`, `fp,boundary=64`,
    /// `air,profile=nvme`); `KIND:...` is accepted too. An unknown kind or
    /// parameter, or a boundary outside `1..=65536`, is
    /// [`Error::InvalidInput`].
    pub fn parse(s: &str) -> Result<IndexSpec> {
        let s = s.trim();
        let (kind, rest) = match s.find([',', ':']) {
            Some(i) => (s.get(..i).unwrap_or_default(), s.get(i + 1..).unwrap_or_default()),
            None => (s, ""),
        };
        let kind = kind.trim();
        let parts = rest.split(',');
        let mut spec = IndexSpec {
            kind: kind.to_string(),
            ..IndexSpec::default()
        };
        for part in parts.filter(|p| !p.trim().is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                Error::invalid(format!(
                    "table index parameter {part:?} of {s:?} must be key=value"
                ))
            })?;
            match k.trim() {
                "boundary" => {
                    spec.boundary = v.trim().parse().map_err(|_| {
                        Error::invalid(format!("boundary must be a positive integer, got {v:?}"))
                    })?;
                }
                "profile" => spec.profile = Some(StorageProfile::named(v.trim())?),
                other => {
                    return Err(Error::invalid(format!(
                        "unknown table index parameter {other:?} in {s:?} (known: boundary, profile)"
                    )));
                }
            }
        }
        spec.check()?;
        Ok(spec)
    }

    /// Checks the spec before any I/O: a known kind, `1 <= boundary <= 65536`,
    /// and a profile only for `air`.
    pub fn check(&self) -> Result<()> {
        if !INDEX_KINDS.contains(&self.kind.as_str()) {
            return Err(Error::invalid(format!(
                "unknown table index kind {:?} (known: {})",
                self.kind,
                INDEX_KINDS.join(", ")
            )));
        }
        if !(1..=MAX_BOUNDARY).contains(&self.boundary) {
            return Err(Error::invalid(format!(
                "position boundary must be in 1..={MAX_BOUNDARY}, got {}",
                self.boundary
            )));
        }
        if self.profile.is_some() && self.kind != "air" {
            return Err(Error::invalid(format!(
                "a storage profile applies to kind air only, not {}",
                self.kind
            )));
        }
        Ok(())
    }
}

/// How a table is built.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Target data block bytes (a block holds at least one entry). Default 4096.
    pub block_size: usize,
    /// Entries between restart points of a block. Default 16.
    pub restart_interval: usize,
    /// Bloom filter bits per user key; 0 = no filter. Default 10.
    pub bloom_bits_per_key: u32,
    /// The index.
    pub index: IndexSpec,
    /// Written in the file; [`Table::open`] checks it when asked to.
    pub build_id: u64,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            index: IndexSpec::default(),
            build_id: 0,
        }
    }
}

impl TableOptions {
    /// Checks the options before any I/O: the index spec, a block size in
    /// `64..=64 MiB`, a restart interval in `1..=65536`, at most 64 bloom
    /// bits per key.
    pub fn check(&self) -> Result<()> {
        self.index.check()?;
        if !(64..=64 << 20).contains(&self.block_size) {
            return Err(Error::invalid(format!(
                "block size must be in 64..=67108864 bytes, got {}",
                self.block_size
            )));
        }
        if !(1..=65_536).contains(&self.restart_interval) {
            return Err(Error::invalid(format!(
                "restart interval must be in 1..=65536, got {}",
                self.restart_interval
            )));
        }
        if self.bloom_bits_per_key > 64 {
            return Err(Error::invalid(format!(
                "bloom bits per key must be at most 64, got {}",
                self.bloom_bits_per_key
            )));
        }
        Ok(())
    }
}

/// What a finished table holds (the store records it in its manifest).
#[derive(Debug, Clone, PartialEq)]
pub struct TableMeta {
    /// Bytes of the file.
    pub file_size: u64,
    /// Entries (internal keys).
    pub entries: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Bytes of key/value payload added (internal keys and values).
    pub data_bytes: u64,
    /// Bytes of the decoded index and block handles: resident once opened
    /// pinned (as [`Table::memory`] reports), else charged to the block
    /// cache while it holds them.
    pub index_bytes: u64,
    /// Bytes of the decoded Bloom filter (resident or cached, as the index).
    pub filter_bytes: u64,
    /// Nanoseconds spent building the index (mapping keys and training the
    /// model; Liu §5.4's training share of compaction).
    pub train_nanos: u64,
}

/// Resident bytes of an open table (0 when unpinned, [`Table::pinned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableMemory {
    /// The index and the per-block handles (first ordinal and offset of
    /// every data block).
    pub index_bytes: u64,
    /// The Bloom filter.
    pub filter_bytes: u64,
}
