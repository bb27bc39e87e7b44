//! How a store is opened: [`Options`] and their spec strings.

use crate::index::parse_size;
use crate::log::SyncPolicy;
use crate::lsm::table::{IndexSpec, TableOptions};
use crate::storage::StorageProfile;
use crate::{Error, Result};

/// Default memory budget: 64 MiB.
pub(super) const DEFAULT_MEMORY: u64 = 64 << 20;
/// The smallest memtable [`Options::with_memory`] gives (64 KiB).
const MIN_WRITE_BUFFER: u64 = 64 << 10;
/// The largest memtable [`Options::with_memory`] gives (64 MiB).
const MAX_WRITE_BUFFER: u64 = 64 << 20;
/// Page size of the block cache.
pub(super) const CACHE_PAGE: usize = 4096;

/// What one table index covers (Liu et al. §5.5): a table of at most
/// [`Options::target_file_bytes`], or a whole level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Granularity {
    /// Compactions cut their output at [`Options::target_file_bytes`]: an
    /// index per table of about that size (default).
    #[default]
    Table,
    /// Compactions into L1 and below never cut their output by size, so
    /// every level below L0 is one table with one index, and every
    /// compaction from Ln into Ln+1 merges the whole of both (a full
    /// merge). L0 keeps one table per flush. A table holds fewer than 2^32
    /// entries: a level of more than [`LEVEL_TABLE_ENTRIES`] entries is cut
    /// into tables of that many.
    Level,
}

/// Under [`Granularity::Level`], the entries after which a compaction cuts
/// its output anyway (at the next user key): half the table format's limit
/// of 2^32 - 1 entries, leaving room for the versions of the last user key.
pub const LEVEL_TABLE_ENTRIES: u64 = 1 << 31;

impl Granularity {
    /// `table` or `level`, as [`Options::parse_spec`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Granularity::Table => "table",
            Granularity::Level => "level",
        }
    }

    /// Parses `table` or `level`; anything else is [`Error::InvalidInput`].
    pub fn parse(v: &str) -> Result<Granularity> {
        match v {
            "table" => Ok(Granularity::Table),
            "level" => Ok(Granularity::Level),
            _ => Err(Error::invalid(format!(
                "lsm option granularity: `{v}` is not table or level"
            ))),
        }
    }
}

/// How a store is opened. `Default` is [`Options::with_memory`] of 64 MiB.
#[derive(Debug, Clone)]
pub struct Options {
    /// The total memory budget: memtables, block cache, indexes and filters
    /// (default 64 MiB). [`Options::with_memory`] splits it; `stats()`
    /// reports each part. Indexes and filters of open tables are resident
    /// when [`Options::pin_tables`] (the default); the block cache gets
    /// what they and the memtables leave.
    pub memory_bytes: u64,
    /// Bytes of one memtable before it is frozen and flushed (default a
    /// quarter of the budget, 64 KiB to 64 MiB).
    pub write_buffer_bytes: u64,
    /// Frozen memtables waiting for their flush before writers wait (default 2).
    pub max_immutable: usize,
    /// The most the shared LRU block cache may hold, in bytes (pages of
    /// 4 KiB; default: the budget less the memtable; 0: no cache). The
    /// store sizes it below this to what the budget leaves once a full
    /// memtable, the frozen memtables and the resident indexes and filters
    /// are counted (never below 256 KiB, [`super::MIN_CACHE_BYTES`], or the
    /// configured size if smaller), after every flush, compaction and
    /// memtable switch.
    pub block_cache_bytes: u64,
    /// Keep every open table's block handles, index and Bloom filter
    /// resident (default true; spec key `pin`). When false, tables keep
    /// only their properties and section locations, and load those sections
    /// through the block cache when a lookup needs them (RocksDB's
    /// `cache_index_and_filter_blocks`): charged to the cache, read and
    /// checked from the file again once evicted, so the store stays within
    /// [`Options::memory_bytes`] however many tables it holds, at the cost of
    /// reads when the cache cannot hold them. Without a block cache every
    /// lookup reads them. Answers are the same either way; the files too.
    pub pin_tables: bool,
    /// How tables are built: block size, restart interval, Bloom bits per
    /// key and the index ([`IndexSpec`]). Its `build_id` is ignored: every
    /// table gets a fresh one.
    pub table: TableOptions,
    /// Compactions cut their output tables at this size (default 8 MiB;
    /// ignored below L0 under [`Granularity::Level`]).
    pub target_file_bytes: u64,
    /// What one table index covers: a table of `target_file_bytes` or a
    /// whole level (default [`Granularity::Table`]).
    pub granularity: Granularity,
    /// Each level below L1 may hold this many times the bytes of the one
    /// above (default 10).
    pub level_ratio: u64,
    /// Bytes L1 may hold before it is compacted into L2 (default: four
    /// memtables, at least 1 MiB; 64 MiB at the default budget).
    pub l1_bytes: u64,
    /// L0 tables that start a compaction into L1 (default 4).
    pub l0_compaction_trigger: usize,
    /// L0 tables from which each write batch sleeps 1 ms first (default 20,
    /// RocksDB's; LevelDB's 8 doubled the write amplification of random
    /// fills at small memtables: `docs/results/lsm.md`).
    pub l0_slowdown: usize,
    /// L0 tables from which writers wait for a compaction (default 36,
    /// RocksDB's).
    pub l0_stop: usize,
    /// When log writes are synced (default every write): as [`crate::db::Options::sync`].
    pub sync: SyncPolicy,
    /// Read tables with `O_DIRECT` (local directories opened by
    /// [`super::Store::open`] only; default false).
    pub direct_io: bool,
    /// Open for reading only: the directory's shared lock, no recovery
    /// writes, writes are [`Error::Unsupported`] (default false).
    pub read_only: bool,
    /// Flushes and compactions on a background thread (default true). When
    /// false the writer that fills a memtable flushes it and runs the
    /// compactions due itself (deterministic, for tests).
    pub background: bool,
    /// Refuse to open rather than drop a complete last log frame that fails
    /// its checksum (as [`crate::db::Options::strict_recovery`]; default false).
    pub strict_recovery: bool,
    /// Reads in flight at most in a batched lookup ([`super::Store::get_many`];
    /// default [`crate::storage::DEFAULT_QUEUE_DEPTH`]).
    pub queue_depth: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options::with_memory(DEFAULT_MEMORY)
    }
}

impl Options {
    /// Options whose budget is `bytes`: a quarter for the memtable (64 KiB
    /// to 64 MiB), the rest for the block cache, which the store shrinks by
    /// what the frozen memtables and the resident indexes and filters take
    /// (so the whole stays within `bytes`); every other field at its
    /// default.
    pub fn with_memory(bytes: u64) -> Options {
        let write_buffer = (bytes / 4).clamp(MIN_WRITE_BUFFER, MAX_WRITE_BUFFER);
        Options {
            memory_bytes: bytes,
            write_buffer_bytes: write_buffer,
            max_immutable: 2,
            block_cache_bytes: bytes.saturating_sub(write_buffer),
            pin_tables: true,
            table: TableOptions::default(),
            target_file_bytes: 8 << 20,
            granularity: Granularity::Table,
            level_ratio: 10,
            // L1 about as large as L0 when it is compacted (RocksDB's tuning
            // rule): 64 MiB at the default budget; at 8 MiB it cut the write
            // amplification of a random fill from 7.6 to 6.3 (docs/results/lsm.md).
            l1_bytes: (write_buffer * 4).max(1 << 20),
            l0_compaction_trigger: 4,
            l0_slowdown: 20,
            l0_stop: 36,
            sync: SyncPolicy::Always,
            direct_io: false,
            read_only: false,
            background: true,
            strict_recovery: false,
            queue_depth: crate::storage::DEFAULT_QUEUE_DEPTH,
        }
    }

    /// Parses a spec of comma-separated `name=value` pairs, e.g.
    /// `index=pgm,boundary=16,memory=4M,sync=always`. `memory` is applied
    /// first (it sets the split), the others override it in any order:
    /// `index` (a kind of [`IndexSpec`]), `boundary`, `profile` (storage
    /// profile for `air`), `memory`, `write_buffer`, `max_immutable`,
    /// `block_cache`, `block` (block size), `restart`, `bloom` (bits per
    /// key), `target_file`, `granularity` (`table` or `level`), `ratio`, `l1`, `l0_trigger`, `l0_slowdown`,
    /// `l0_stop`, `sync` (`always` or `every`, `never`, or a period such as `10ms`),
    /// `direct`, `read_only`, `background`, `strict`, `pin`
    /// ([`Options::pin_tables`]) (booleans `true`/`false`).
    /// Sizes take `k`/`M`/`G` suffixes. Anything else is
    /// [`Error::InvalidInput`].
    pub fn parse_spec(s: &str) -> Result<Options> {
        let mut pairs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| Error::invalid(format!("lsm option `{part}` is not name=value")))?;
            pairs.push((k.trim(), v.trim()));
        }
        let mut o = match pairs.iter().rev().find(|(k, _)| *k == "memory") {
            Some((_, v)) => Options::with_memory(size(v, "memory")?),
            None => Options::default(),
        };
        for (k, v) in pairs {
            match k {
                "memory" => {}
                "index" => o.table.index.kind = v.to_string(),
                "boundary" => o.table.index.boundary = int(v, k)?,
                "profile" => o.table.index.profile = Some(StorageProfile::named(v)?),
                "write_buffer" => o.write_buffer_bytes = size(v, k)?,
                "max_immutable" => o.max_immutable = int(v, k)?,
                "block_cache" => o.block_cache_bytes = size(v, k)?,
                "block" => o.table.block_size = int(v, k)?,
                "restart" => o.table.restart_interval = int(v, k)?,
                "bloom" => o.table.bloom_bits_per_key = int(v, k)?,
                "target_file" => o.target_file_bytes = size(v, k)?,
                "granularity" => o.granularity = Granularity::parse(v)?,
                "ratio" => o.level_ratio = int(v, k)?,
                "l1" => o.l1_bytes = size(v, k)?,
                "l0_trigger" => o.l0_compaction_trigger = int(v, k)?,
                "l0_slowdown" => o.l0_slowdown = int(v, k)?,
                "l0_stop" => o.l0_stop = int(v, k)?,
                "sync" => o.sync = v.parse()?,
                "direct" => o.direct_io = boolean(v, k)?,
                "read_only" => o.read_only = boolean(v, k)?,
                "background" => o.background = boolean(v, k)?,
                "strict" => o.strict_recovery = boolean(v, k)?,
                "pin" => o.pin_tables = boolean(v, k)?,
                _ => return Err(Error::invalid(format!("unknown lsm option `{k}` in `{s}`"))),
            }
        }
        o.check()?;
        Ok(o)
    }

    /// Checks the options before any I/O: positive sizes and ratios, the
    /// L0 thresholds in order, a valid index spec.
    pub fn check(&self) -> Result<()> {
        let positive = [
            ("write_buffer", self.write_buffer_bytes),
            ("target_file", self.target_file_bytes),
            ("l1", self.l1_bytes),
            ("block", self.table.block_size as u64),
            ("restart", self.table.restart_interval as u64),
            ("max_immutable", self.max_immutable as u64),
            ("l0_trigger", self.l0_compaction_trigger as u64),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(Error::invalid(format!("lsm option {name} must be positive")));
        }
        if self.level_ratio < 2 {
            return Err(Error::invalid("lsm option ratio must be at least 2"));
        }
        if !(self.l0_compaction_trigger <= self.l0_slowdown && self.l0_slowdown <= self.l0_stop) {
            return Err(Error::invalid(format!(
                "lsm L0 thresholds must satisfy trigger ({}) <= slowdown ({}) <= stop ({})",
                self.l0_compaction_trigger, self.l0_slowdown, self.l0_stop
            )));
        }
        if let SyncPolicy::EveryMs(0) = self.sync {
            return Err(Error::invalid("a sync interval must be at least 1 ms"));
        }
        self.table.index.check()
    }

    /// The index spec tables are built with.
    pub fn index(&self) -> &IndexSpec {
        &self.table.index
    }
}

fn size(v: &str, name: &str) -> Result<u64> {
    parse_size(v).ok_or_else(|| Error::invalid(format!("lsm option {name}: `{v}` is not a size")))
}

fn int<T: std::str::FromStr>(v: &str, name: &str) -> Result<T> {
    v.parse()
        .map_err(|_| Error::invalid(format!("lsm option {name}: `{v}` is not a number")))
}

fn boolean(v: &str, name: &str) -> Result<bool> {
    match v {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(Error::invalid(format!(
            "lsm option {name}: `{v}` is not true or false"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_are_errors() {
        let o = Options::parse_spec("index=fp,boundary=64,memory=4M,sync=10ms,background=false").unwrap();
        assert_eq!(o.table.index.kind, "fp");
        assert_eq!(o.table.index.boundary, 64);
        assert_eq!(o.memory_bytes, 4 << 20);
        assert_eq!(o.write_buffer_bytes, 1 << 20);
        assert_eq!(o.block_cache_bytes, 3 << 20);
        assert_eq!(o.sync, SyncPolicy::EveryMs(10));
        assert!(!o.background);
        assert_eq!(o.granularity, Granularity::Table);
        assert!(o.pin_tables);
        assert!(!Options::parse_spec("memory=1M,pin=false").unwrap().pin_tables);
        let o = Options::parse_spec("granularity=level,target_file=32M").unwrap();
        assert_eq!(
            (o.granularity, o.target_file_bytes),
            (Granularity::Level, 32 << 20)
        );
        assert_eq!(Granularity::parse(o.granularity.name()).unwrap(), o.granularity);
        let o = Options::parse_spec("write_buffer=1k,memory=1G").unwrap();
        assert_eq!((o.write_buffer_bytes, o.memory_bytes), (1024, 1 << 30));
        for bad in [
            "index=nope",
            "boundary=0",
            "memory=lots",
            "sync=sometimes",
            "frobnicate=1",
            "index",
            "l0_trigger=21",
            "ratio=1",
            "sync=0ms",
            "granularity=file",
            "pin=sometimes",
        ] {
            assert!(Options::parse_spec(bad).is_err(), "{bad}");
        }
        assert_eq!(Options::default().write_buffer_bytes, 16 << 20);
    }
}
