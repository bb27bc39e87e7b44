//! The index kind `lsm`: the LSM store behind the [`Index`] trait, so the CLI
//! and the benchmark runner treat it like every other kind. Keys and values
//! are `u64`s stored as 8-byte big-endian byte strings (big-endian keeps the
//! byte order of the store equal to the numeric order of the keys). Building
//! it writes the records in write batches and flushes them to tables.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Options, Store, StoreIter};
use crate::index::{
    BuildOptions, Cursor, Index, IndexKind, IndexStats, Manifest, OpenOptions, ParamDoc, Params, Record,
    Records,
};
use crate::log::SyncPolicy;
use crate::storage::{Directory, IoContext, IoStats};
use crate::{Error, Result};

/// The `lsm` kind. Parameters:
/// - `index`: the SSTable index, `fp` or a learned kind (`pgm`, `rs`, `rmi`,
///   `plr`, `fiting`, `gap-zonemap-d`, `air`; default `pgm`);
/// - `boundary`: the position boundary of that index (default 16);
/// - `memory`: the store's total memory budget (`1M`, `64M`, ...; default
///   64M), split by [`Options::parse_spec`] into memtables, block cache,
///   index and filter;
/// - `sync`: `never` (default: the [`Index`] contract — durable at
///   [`Index::sync`]), `always` (or `every`) or a period in milliseconds,
///   as for `db`;
/// - `background`: flushes and compactions on a background thread (`true`,
///   default) or inline in the writer (`false`);
/// - `bloom`: Bloom filter bits per key (default: the table default, 10);
/// - `target_file`: the table size compactions cut at (default 8M);
/// - `write_buffer`, `max_immutable`, `l1`, `ratio`, `l0_trigger`,
///   `l0_slowdown`, `l0_stop`: the [`Options`] fields of those names
///   (defaults: those of the budget, [`Options::with_memory`]);
/// - `granularity`: `table` (default: an index per table) or `level` (one
///   table, so one index, per level below L0: [`super::Granularity`]);
/// - `compact`: after the load, compact everything into the deepest level
///   ([`Store::compact_range`]), so its tables are cut at `target_file`
///   (`true`; default `false`: a sorted load moves the tables of its L0
///   compactions down whole, whatever `target_file` says);
/// - `pin`: keep every table's block handles, index and filter resident
///   (`true`, default) or load them through the block cache when needed
///   (`false`: [`Options::pin_tables`]);
/// - `insert`: `checked` (default: [`Index::insert`] reads the old value, as
///   the trait promises) or `blind` (a plain [`Store::put`] returning `None`:
///   valid only for workloads whose inserts are new keys).
#[derive(Debug)]
pub struct LsmKind;

/// The store options and the insert mode a spec asks for.
struct KindConfig {
    opts: Options,
    blind: bool,
    compact: bool,
}

/// Reads every parameter of the kind from `params` (so that
/// [`Params::finish`] knows them all) and checks them.
fn config(params: &Params) -> Result<KindConfig> {
    let index = params.str("index", "pgm")?;
    let boundary = params.u64("boundary", 16)?;
    let memory = params.u64("memory", 64 << 20)?;
    let target_file = params.u64("target_file", 8 << 20)?;
    let granularity = params.str("granularity", "table")?;
    let mut opts = Options::parse_spec(&format!(
        "index={index},boundary={boundary},memory={memory},target_file={target_file},granularity={granularity}"
    ))?;
    opts.sync = crate::db::sync_param(params)?;
    opts.background = params.bool("background", true)?;
    opts.pin_tables = params.bool("pin", true)?;
    // The shape of the tree, for experiments (defaults: those of the budget).
    opts.write_buffer_bytes = params.u64("write_buffer", opts.write_buffer_bytes)?;
    opts.max_immutable = params.usize("max_immutable", opts.max_immutable)?;
    opts.l1_bytes = params.u64("l1", opts.l1_bytes)?;
    opts.level_ratio = params.u64("ratio", opts.level_ratio)?;
    opts.l0_compaction_trigger = params.usize("l0_trigger", opts.l0_compaction_trigger)?;
    opts.l0_slowdown = params.usize("l0_slowdown", opts.l0_slowdown)?;
    opts.l0_stop = params.usize("l0_stop", opts.l0_stop)?;
    opts.check()?;
    let bloom = params.u64("bloom", u64::from(opts.table.bloom_bits_per_key))?;
    opts.table.bloom_bits_per_key = u32::try_from(bloom)
        .ok()
        .filter(|&b| b <= 64)
        .ok_or_else(|| Error::invalid(format!("bloom must be 0..=64 bits per key, got {bloom}")))?;
    let blind = crate::db::blind_param(params)?;
    let compact = params.bool("compact", false)?;
    Ok(KindConfig { opts, blind, compact })
}

/// The 8-byte big-endian key of `key`.
fn encode(key: u64) -> [u8; 8] {
    key.to_be_bytes()
}

/// The `u64` an 8-byte big-endian key or value holds; anything else is
/// [`Error::Corruption`] (a store this kind did not write).
fn decode(bytes: &[u8], what: &str) -> Result<u64> {
    let b: [u8; 8] = bytes.try_into().map_err(|_| {
        Error::corruption(
            "lsm store",
            0,
            format!("a {what} of the lsm kind is 8 bytes, found {} bytes", bytes.len()),
        )
    })?;
    Ok(u64::from_be_bytes(b))
}

impl IndexKind for LsmKind {
    fn name(&self) -> &'static str {
        "lsm"
    }

    fn summary(&self) -> &'static str {
        "LSM-tree store (Liu et al.): WAL + memtable + leveled SSTables with learned indexes; \
         u64 keys big-endian; `memory` = total budget"
    }

    fn params(&self) -> Vec<ParamDoc> {
        vec![
            ParamDoc::new(
                "index",
                "index of the tables: fp (fence pointers) or a learned kind: pgm, pgm-cpr, rs, rmi, plr, \
                 fiting, gap-zonemap-d, air",
            ),
            ParamDoc::new(
                "boundary",
                "position boundary of the table index: entries a lookup searches after it",
            ),
            ParamDoc::new(
                "memory",
                "total memory budget in bytes (1M, 64M, ...), split into memtables, block cache, \
                 index and filter",
            ),
            ParamDoc::new("target_file", "table size compactions cut at, in bytes"),
            ParamDoc::new(
                "granularity",
                "table (an index per table) or level (one table, so one index, per level below L0)",
            ),
            ParamDoc::new(
                "sync",
                "when writes are durable: never (at sync), always (or every: each write), or a period \
                 in milliseconds (10 or 10ms)",
            ),
            ParamDoc::new(
                "background",
                "true: flushes and compactions on a background thread; false: inline in the writer",
            ),
            ParamDoc::new(
                "pin",
                "true: every table's block handles, index and filter stay resident; false: loaded \
                 through the block cache",
            ),
            ParamDoc::new(
                "write_buffer",
                "bytes of a memtable before it is flushed (default: a quarter of memory, 1-64 MiB)",
            ),
            ParamDoc::new(
                "max_immutable",
                "full memtables waiting for their flush before writes stall",
            ),
            ParamDoc::new(
                "l1",
                "bytes of level 1 (default: four write buffers, at least 1 MiB)",
            ),
            ParamDoc::new("ratio", "size ratio between adjacent levels"),
            ParamDoc::new("l0_trigger", "level-0 tables that start a compaction"),
            ParamDoc::new("l0_slowdown", "level-0 tables at which writes slow down"),
            ParamDoc::new(
                "l0_stop",
                "level-0 tables at which writes stop until a compaction ends",
            ),
            ParamDoc::new("bloom", "Bloom filter bits per key, 0-64 (0: no filter)"),
            ParamDoc::new(
                "insert",
                "checked (an insert reads the old value, as Index::insert promises) or blind (a plain put: \
                 only for workloads whose inserts are new keys)",
            ),
            ParamDoc::new(
                "compact",
                "true: after the load, compact everything into the deepest level (tables cut at \
                 target_file); false: a sorted load moves its tables down whole",
            ),
        ]
    }

    /// The store takes its own lock ([`Store::open_in`]).
    fn dir_lock(&self) -> Option<crate::storage::LockMode> {
        None
    }

    /// Reads and checks the parameters without opening a store.
    fn resolve_params(&self, params: &Params, _opts: &BuildOptions) -> Result<()> {
        config(params).map(|_| ())
    }

    /// Needs a shared directory handle: see [`IndexKind::build_shared`].
    fn build(
        &self,
        _params: &Params,
        _records: Records<'_>,
        _dir: &dyn Directory,
        _opts: &BuildOptions,
        _build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        Err(Error::Unsupported(
            "the lsm kind builds through a shared directory handle (build_shared)".into(),
        ))
    }

    /// Opens (creates) the store in `dir`, ingests the records
    /// ([`Store::ingest`]: straight into tables) and closes the store. The
    /// tables draw build ids of their own (the store's manifest records
    /// them).
    fn build_shared(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: Arc<dyn Directory>,
        _opts: &BuildOptions,
        _build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        let cfg = config(params)?;
        // The load is made durable by the flush and the close; syncing the
        // log per batch would only slow it down.
        let opts = Options {
            sync: SyncPolicy::Never,
            ..cfg.opts
        };
        let store = Store::open_in(dir.clone(), opts)?;
        // Records come sorted by key, and the big-endian encoding keeps
        // that order: the tables are written directly.
        store.ingest(
            records
                .iter()
                .map(|(k, v)| Ok((encode(k).to_vec(), encode(v).to_vec()))),
        )?;
        if cfg.compact {
            store.compact_range(None, None)?;
        }
        let levels: Vec<u64> = store.stats().levels.iter().map(|l| l.files).collect();
        store.close()?;
        let files: Vec<String> = dir
            .list()?
            .into_iter()
            .filter(|n| n != crate::index::MANIFEST_FILE && n != crate::storage::LOCK_FILE)
            .collect();
        Ok((files, json!({ "level_files": levels })))
    }

    fn open(
        &self,
        manifest: &Manifest,
        dir: Arc<dyn Directory>,
        // The store reads through counters and a block cache of its own.
        _io: IoContext,
        opts: &OpenOptions,
    ) -> Result<Box<dyn Index>> {
        let params = Params::from_map(manifest.config.clone());
        let mut cfg = config(&params)?;
        cfg.opts.queue_depth = opts.queue_depth;
        let store = Store::open_in(dir, cfg.opts)?;
        Ok(Box::new(LsmIndex {
            store,
            blind: cfg.blind,
        }))
    }
}

/// A store as an [`Index`].
#[derive(Debug)]
pub(super) struct LsmIndex {
    store: Store,
    blind: bool,
}

impl LsmIndex {
    /// Live records, by a full scan.
    fn count(&self) -> Result<u64> {
        let mut it = self.store.iter()?;
        it.seek_to_first()?;
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next()?;
        }
        Ok(n)
    }
}

impl Index for LsmIndex {
    fn kind(&self) -> &str {
        "lsm"
    }

    /// Exact: a full scan of the store (0 if it fails).
    fn len(&self) -> u64 {
        self.count().unwrap_or(0)
    }

    fn get(&self, key: u64) -> Result<Option<u64>> {
        self.store
            .get(&encode(key))?
            .map(|v| decode(&v, "value"))
            .transpose()
    }

    /// [`Store::get_many`]: each table's blocks for the batch read with many
    /// reads in flight.
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        let encoded: Vec<[u8; 8]> = keys.iter().map(|&k| encode(k)).collect();
        let refs: Vec<&[u8]> = encoded.iter().map(|k| &k[..]).collect();
        let got = self.store.get_many(&refs)?;
        let start = out.len();
        for g in got {
            match g.map(|v| decode(&v, "value")).transpose() {
                Ok(v) => out.push(v),
                Err(e) => {
                    out.truncate(start);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        let mut c = LsmCursor {
            store: &self.store,
            iter: None,
        };
        c.seek(key)?;
        c.next()
    }

    /// Over [`Store::iter`]: each seek repositions one iterator (the store's
    /// version when the cursor first read).
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(LsmCursor {
            store: &self.store,
            iter: None,
        }))
    }

    fn supports_updates(&self) -> bool {
        true
    }

    fn insert(&self, key: u64, value: u64) -> Result<Option<u64>> {
        let old = if self.blind { None } else { self.get(key)? };
        self.store.put(&encode(key), &encode(value))?;
        Ok(old)
    }

    fn delete(&self, key: u64) -> Result<bool> {
        let old = self.get(key)?;
        self.store.delete(&encode(key))?;
        Ok(old.is_some())
    }

    /// [`Store::sync`]: every earlier write is durable on return, whatever
    /// the sync mode.
    fn sync(&self) -> Result<()> {
        self.store.sync()
    }

    /// `memory_bytes`: memtables + block cache held + index + filter
    /// ([`StoreStats::memory_bytes`](super::StoreStats::memory_bytes));
    /// `n`: entries in tables (every version and tombstone counted, the
    /// memtables not: exact after a build; [`Index::len`] is exact).
    fn stats(&self) -> Result<IndexStats> {
        let s = self.store.stats();
        let mut st = IndexStats {
            kind: "lsm".into(),
            n: s.levels.iter().map(|l| l.entries).sum(),
            memory_bytes: s.memory_bytes(),
            // Tables, log segments, manifests: every file of the directory.
            disk_bytes: self.store.inner.dir.total_bytes()?,
            models: None,
            height: Some(u32::try_from(s.levels.iter().filter(|l| l.files > 0).count()).unwrap_or(u32::MAX)),
            ..Default::default()
        };
        st.extra.insert(
            "lsm".into(),
            serde_json::to_value(&s).map_err(|e| Error::invalid(e.to_string()))?,
        );
        Ok(st)
    }

    /// [`Store::verify`]; returns the table bytes checked, in 4 KiB pages.
    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let pages = self.store.verify()?.bytes.div_ceil(4096);
        progress(pages);
        Ok(pages)
    }

    /// The counters every table read of the store goes through.
    fn io(&self) -> &Arc<IoStats> {
        &self.store.inner.io.stats
    }
}

/// A [`Cursor`] over a store's iterator.
struct LsmCursor<'a> {
    store: &'a Store,
    /// `None` until the first seek or read (then as after `seek(0)`).
    iter: Option<StoreIter>,
}

impl LsmCursor<'_> {
    fn iter(&mut self) -> Result<&mut StoreIter> {
        if self.iter.is_none() {
            let mut it = self.store.iter()?;
            it.seek_to_first()?;
            self.iter = Some(it);
        }
        self.iter
            .as_mut()
            .ok_or_else(|| Error::invalid("lsm cursor has no iterator"))
    }
}

impl Cursor for LsmCursor<'_> {
    fn seek(&mut self, key: u64) -> Result<()> {
        match &mut self.iter {
            Some(it) => it.seek(&encode(key)),
            None => {
                let mut it = self.store.iter()?;
                it.seek(&encode(key))?;
                self.iter = Some(it);
                Ok(())
            }
        }
    }

    fn next(&mut self) -> Result<Option<Record>> {
        let it = self.iter()?;
        if !it.valid() {
            return Ok(None);
        }
        let rec = (decode(it.key(), "key")?, decode(it.value(), "value")?);
        it.next()?;
        Ok(Some(rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{IndexSpec, Registry};
    use crate::storage::MemDirectory;

    /// A registry of this kind alone (the standard one is a rung above).
    fn registry() -> Registry {
        Registry::new(vec![&LsmKind])
    }

    fn build(spec: &str, keys: &[u64]) -> Box<dyn Index> {
        let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
        let s: IndexSpec = spec.parse().unwrap();
        registry()
            .build_in(&s, Records::ranked(keys), dir.clone(), &BuildOptions::default())
            .unwrap();
        registry().open_in(dir, &OpenOptions::default()).unwrap()
    }

    #[test]
    fn keys_are_big_endian_so_byte_order_is_numeric_order() {
        // Little-endian keys would put 256 (00 01 ..) before 1 (01 00 ..).
        let keys = [1u64, 255, 256, 65_536, 1 << 40, u64::MAX];
        for pin in [true, false] {
            let idx = build(&format!("lsm:memory=1M,background=false,pin={pin}"), &keys);
            let mut out = Vec::new();
            idx.scan(0, 10, &mut out).unwrap();
            let want: Vec<Record> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
            assert_eq!(out, want);
            assert_eq!(idx.lower_bound(2).unwrap(), Some((255, 1)));
            assert_eq!(idx.lower_bound(257).unwrap(), Some((65_536, 3)));
            assert_eq!(idx.get(u64::MAX).unwrap(), Some(5));
            assert_eq!(idx.len(), 6);
            let lsm = &idx.stats().unwrap().extra["lsm"];
            assert_eq!(lsm["index_bytes"] == 0, !pin, "pin={pin}: {lsm}");
        }
    }

    #[test]
    fn updates_return_the_old_value_and_deletes_whether_present() {
        let idx = build("lsm:memory=1M,background=false", &[10, 20, 30]);
        assert_eq!(idx.insert(20, 7).unwrap(), Some(1));
        assert_eq!(idx.insert(25, 8).unwrap(), None);
        assert!(idx.delete(10).unwrap());
        assert!(!idx.delete(11).unwrap());
        idx.sync().unwrap();
        let mut out = Vec::new();
        idx.scan(0, 10, &mut out).unwrap();
        assert_eq!(out, vec![(20, 7), (25, 8), (30, 2)]);
    }

    #[test]
    fn bad_parameters_are_refused_before_any_write() {
        let opts = BuildOptions::default();
        for s in [
            "lsm:sync=sometimes",
            "lsm:insert=maybe",
            "lsm:bloom=1000",
            "lsm:bogus=1",
            "lsm:pin=maybe",
        ] {
            let spec: IndexSpec = s.parse().unwrap();
            assert!(registry().check_spec(&spec, &opts).is_err(), "{s}");
        }
        let spec: IndexSpec = "lsm:index=fp,boundary=64,memory=4M,sync=always,pin=false"
            .parse()
            .unwrap();
        registry().check_spec(&spec, &opts).unwrap();
        let spec: IndexSpec = "lsm:target_file=32M,granularity=level,compact=true"
            .parse()
            .unwrap();
        registry().check_spec(&spec, &opts).unwrap();
    }

    /// `compact=true` leaves every table in the deepest level, cut at
    /// `target_file`, or one table under `granularity=level`.
    #[test]
    fn compact_and_granularity_shape_the_levels() {
        let keys: Vec<u64> = (0..20_000u64).map(|i| i * 1009 + 7).collect();
        let files = |spec: &str| -> Vec<u64> {
            let idx = build(spec, &keys);
            assert_eq!(idx.get(keys[777]).unwrap(), Some(777));
            let st = idx.stats().unwrap();
            st.extra["lsm"]["levels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["files"].as_u64().unwrap())
                .collect()
        };
        let base = "lsm:memory=1M,background=false,target_file=16K";
        let table = files(&format!("{base},compact=true"));
        assert_eq!(table.iter().filter(|&&f| f > 0).count(), 1, "{table:?}");
        assert!(table.iter().sum::<u64>() > 10, "{table:?}");
        let level = files(&format!("{base},compact=true,granularity=level"));
        assert_eq!(level.iter().sum::<u64>(), 1, "{level:?}");
        assert!(
            files(&format!("{base},granularity=level"))
                .iter()
                .skip(1)
                .all(|&f| f <= 1)
        );
    }

    #[test]
    fn a_value_that_is_not_8_bytes_is_corruption_not_a_panic() {
        assert!(decode(&[1, 2, 3], "value").unwrap_err().is_corruption());
        assert_eq!(decode(&[0, 0, 0, 0, 0, 0, 1, 0], "key").unwrap(), 256);
    }
}
