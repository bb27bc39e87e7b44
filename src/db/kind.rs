//! The index kind `db`: a store behind the [`Index`] trait, so the CLI and
//! the benchmark runner treat it like every other kind. Building it bulk-loads
//! the records into the static stage.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Db, DbRange, MergeTrigger, Options, StaticKind, SyncPolicy};
use crate::index::{
    BuildOptions, Cursor, Index, IndexKind, IndexStats, Manifest, OpenOptions, ParamDoc, Params, Record,
    Records,
};
use crate::storage::{Directory, IoContext, IoStats};
use crate::{Error, Result};

/// The `db` kind. Parameters:
/// - `memory`: the memory budget in bytes (`8M`, `64M`, ...; default 64M);
/// - `static`: `auto` (Zhang G5, default) or a layered kind name;
/// - `epsilon`: error bound of the learned static kinds (default 8, about one
///   page per lookup);
/// - `trigger`: `budget` (default), `constant` (merge at `memory / 2` bytes of
///   the writable stage, whatever the static index takes) or `ratio:R`;
/// - `sync`: `never` (default: the [`Index`] contract — durable at
///   [`Index::sync`]), `always` (or `every`) or a period in milliseconds;
/// - `merge`: `background` (default) or `inline`;
/// - `insert`: `checked` (default: [`Index::insert`] reads the old value, as
///   the trait promises) or `blind` (a plain [`Db::put`], returning `None`:
///   valid only for workloads whose inserts are new keys).
#[derive(Debug)]
pub struct DbKind;

const LEARNED: &[&str] = &["pgm", "pgm-disk", "pgm-disk-cpr", "rs", "fiting-static"];

struct KindConfig {
    opts: Options,
    blind: bool,
}

/// The `sync` parameter of a store kind: `never` (default), `always` (or
/// `every`) or a period in milliseconds ([`SyncPolicy::from_str`](std::str::FromStr)).
pub(crate) fn sync_param(params: &Params) -> Result<SyncPolicy> {
    params.str("sync", "never")?.parse()
}

/// The `insert` parameter of a store kind: `checked` (default, false) or
/// `blind` (true).
pub(crate) fn blind_param(params: &Params) -> Result<bool> {
    match params.str("insert", "checked")?.as_str() {
        "checked" => Ok(false),
        "blind" => Ok(true),
        other => Err(Error::invalid(format!(
            "insert must be checked or blind, got {other:?}"
        ))),
    }
}

fn config(params: &Params, page_size: usize) -> Result<KindConfig> {
    let memory = params.u64("memory", 64 << 20)?;
    let static_name = params.str("static", "auto")?;
    let epsilon = params.u64("epsilon", 8)?;
    let static_kind = if static_name == "auto" {
        StaticKind::Auto { epsilon }
    } else if LEARNED.contains(&static_name.as_str()) {
        StaticKind::Spec(format!("{static_name}:epsilon={epsilon}"))
    } else {
        StaticKind::Spec(static_name)
    };
    let trigger_text = params.str("trigger", "budget")?;
    let trigger = match trigger_text.split_once(':') {
        None if trigger_text == "budget" => MergeTrigger::Budget,
        None if trigger_text == "constant" => MergeTrigger::Constant((memory / 2).max(1)),
        Some(("ratio", r)) => MergeTrigger::Ratio(
            r.parse()
                .map_err(|_| Error::invalid(format!("trigger ratio must be an integer, got {r:?}")))?,
        ),
        _ => {
            return Err(Error::invalid(format!(
                "trigger must be budget, constant or ratio:R, got {trigger_text:?}"
            )));
        }
    };
    let sync = sync_param(params)?;
    let background_merge = match params.str("merge", "background")?.as_str() {
        "background" => true,
        "inline" => false,
        other => {
            return Err(Error::invalid(format!(
                "merge must be background or inline, got {other:?}"
            )));
        }
    };
    let blind = blind_param(params)?;
    let opts = Options {
        sync,
        memory_budget: memory,
        trigger,
        static_kind,
        page_size,
        background_merge,
        ..Options::default()
    };
    opts.check()?;
    Ok(KindConfig { opts, blind })
}

impl IndexKind for DbKind {
    fn name(&self) -> &'static str {
        "db"
    }

    /// The store takes its own lock (`Db::open`, `Db::try_bulk_load`).
    fn dir_lock(&self) -> Option<crate::storage::LockMode> {
        None
    }

    fn summary(&self) -> &'static str {
        "durable hybrid store (Zhang §9): WAL + in-memory dynamic stage + learned static stage, \
         background merges; `memory` = total budget"
    }

    fn params(&self) -> Vec<ParamDoc> {
        vec![
            ParamDoc::new(
                "memory",
                "memory budget in bytes (8M, 64M, ...) of the writable stages and the static index together",
            ),
            ParamDoc::new(
                "static",
                "index of the static stage: auto (the smaller of the zone maps gap-zonemap-d and \
                 leco-zonemap-d, or pgm-disk-cpr at epsilon if it reads about one page per lookup in \
                 less memory) or a layered kind spec (pgm-disk-cpr, leco-zonemap-d, air:profile=nvme, ...)",
            ),
            ParamDoc::new(
                "epsilon",
                "error bound of the learned static kinds (auto's pgm-disk-cpr, and static=pgm, pgm-disk, \
                 pgm-disk-cpr, rs, fiting-static)",
            ),
            ParamDoc::new(
                "trigger",
                "when the writable stage is merged into the static one: budget (at two thirds of what the \
                 static index leaves of memory), constant (at memory/2 bytes) or ratio:R (at 1/R of the \
                 static stage's entries)",
            ),
            ParamDoc::new(
                "sync",
                "when writes are durable: never (at sync), always (or every: each write), or a period \
                 in milliseconds (10 or 10ms)",
            ),
            ParamDoc::new(
                "merge",
                "background (merges on a thread of their own) or inline (in the writer)",
            ),
            ParamDoc::new(
                "insert",
                "checked (an insert reads the old value, as Index::insert promises) or blind (a plain put: \
                 only for workloads whose inserts are new keys, such as ycsb-write-only)",
            ),
        ]
    }

    fn build(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
        // A store's generations draw build ids of their own (its manifest
        // records the current one).
        _build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        let cfg = config(params, opts.page_size)?;
        Db::bulk_load(dir, &cfg.opts, records.iter())?;
        let m = super::DbManifest::load(dir)?.ok_or_else(|| Error::invalid("bulk load wrote no manifest"))?;
        let files: Vec<String> = dir
            .list()?
            .into_iter()
            .filter(|n| n != crate::index::MANIFEST_FILE)
            .collect();
        Ok((
            files,
            json!({ "static_kind": m.static_kind, "generation": m.generation }),
        ))
    }

    fn open(
        &self,
        manifest: &Manifest,
        dir: Arc<dyn Directory>,
        io: IoContext,
        opts: &OpenOptions,
    ) -> Result<Box<dyn Index>> {
        let params = Params::from_map(manifest.config.clone());
        let mut cfg = config(&params, manifest.page_size)?;
        cfg.opts.resident = opts.resident;
        cfg.opts.profile = opts.profile.clone();
        let db = Db::open_with_io(dir, cfg.opts, io)?;
        Ok(Box::new(DbIndex { db, blind: cfg.blind }))
    }
}

/// A store as an [`Index`].
#[derive(Debug)]
pub(super) struct DbIndex {
    db: Db,
    blind: bool,
}

impl Index for DbIndex {
    fn kind(&self) -> &str {
        "db"
    }

    /// Exact; costs one static lookup per dynamic-stage key ([`Db::count`]).
    fn len(&self) -> u64 {
        self.db.count().unwrap_or(0)
    }

    fn get(&self, key: u64) -> Result<Option<u64>> {
        self.db.get(key)
    }

    /// [`Db::get_many`]: the static stage's keys in one batch.
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        self.db.get_many(keys, out)
    }

    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        self.db.range(key..).next().transpose()
    }

    /// Over [`Db::range`]: a seek starts a new range at the key (one
    /// version of the store, as [`Db::range`] holds it).
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(DbCursor {
            db: &self.db,
            range: None,
        }))
    }

    fn supports_updates(&self) -> bool {
        true
    }

    fn insert(&self, key: u64, value: u64) -> Result<Option<u64>> {
        let old = if self.blind { None } else { self.db.get(key)? };
        self.db.put(key, value)?;
        Ok(old)
    }

    fn delete(&self, key: u64) -> Result<bool> {
        let old = self.db.get(key)?;
        self.db.delete(key)?;
        Ok(old.is_some())
    }

    fn sync(&self) -> Result<()> {
        self.db.sync()
    }

    /// Waits for a running merge ([`Db::wait_for_merge`]).
    fn settle(&self) -> Result<()> {
        self.db.wait_for_merge()
    }

    /// `memory_bytes` is the peak since open (dynamic stages + static index),
    /// Zhang §10.1.2's metric; `n` counts static records plus dynamic keys
    /// (an upper bound; [`Index::len`] is exact).
    fn stats(&self) -> Result<IndexStats> {
        let s = self.db.stats()?;
        let mut st = IndexStats {
            kind: "db".into(),
            n: s.static_records + s.active_entries + s.frozen_entries,
            memory_bytes: s.peak_memory_bytes,
            disk_bytes: s.disk_bytes,
            models: None,
            height: None,
            ..Default::default()
        };
        st.extra.insert(
            "db".into(),
            serde_json::to_value(&s).map_err(|e| Error::invalid(e.to_string()))?,
        );
        Ok(st)
    }

    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        self.db.verify(progress)
    }

    fn io(&self) -> &Arc<IoStats> {
        self.db.io()
    }
}

/// A [`Cursor`] over a store: each seek starts a [`Db::range`] from the key.
struct DbCursor<'a> {
    db: &'a Db,
    /// The range being read; `None` before the first seek (as if at 0).
    range: Option<DbRange>,
}

impl Cursor for DbCursor<'_> {
    fn seek(&mut self, key: u64) -> Result<()> {
        self.range = Some(self.db.range(key..));
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Record>> {
        let db = self.db;
        self.range.get_or_insert_with(|| db.range(..)).next().transpose()
    }
}
