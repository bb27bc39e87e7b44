//! Building and opening index directories by kind name.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{
    ApproxPos, Cursor, Index, IndexSpec, IndexStats, KindParam, Manifest, ParamDoc, Params, Record, Records,
};
use crate::format::page::check_page_size;
use crate::storage::{
    DEFAULT_QUEUE_DEPTH, DirLock, Directory, FsDirectory, IoContext, IoEngine, IoStats, LockMode,
    MAX_QUEUE_DEPTH, MemDirectory, PageCache, PassThrough, StorageProfile,
};
use crate::{Error, Result};

/// Which parts of an index stay in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Residency {
    /// Index structures (models, inner nodes) are pinned in memory; only data
    /// pages (leaves) are read from storage. Zhang's and Lan's "hybrid" setting.
    #[default]
    Index,
    /// Nothing is pinned: every level is read from storage on each operation
    /// (Lan §6.1, AirIndex's cold first query).
    None,
}

impl std::str::FromStr for Residency {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "index" => Ok(Residency::Index),
            "none" => Ok(Residency::None),
            _ => Err(Error::invalid(format!(
                "residency must be `index` or `none`, got {s:?}"
            ))),
        }
    }
}

impl std::fmt::Display for Residency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Residency::Index => "index",
            Residency::None => "none",
        })
    }
}

/// How to open an index.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Read data files with `O_DIRECT` (cold reads that bypass the OS cache).
    pub direct: bool,
    /// What stays in memory.
    pub resident: Residency,
    /// Pages of an LRU buffer pool in front of storage (0 = none).
    pub cache_pages: usize,
    /// Profile whose modelled time is charged per read call.
    pub profile: Option<StorageProfile>,
    /// Reads in flight at most in [`Index::get_many`],
    /// [`Index::lower_bound_many`] and scans' read-ahead (default
    /// [`DEFAULT_QUEUE_DEPTH`]; 1 reads one page after another).
    pub queue_depth: usize,
    /// How local files serve batched reads (default: io_uring if this
    /// kernel has it, else a pool of threads).
    pub io_engine: IoEngine,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            direct: false,
            resident: Residency::default(),
            cache_pages: 0,
            profile: None,
            queue_depth: DEFAULT_QUEUE_DEPTH,
            io_engine: IoEngine::Auto,
        }
    }
}

/// How to build an index.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Page size of the paged files (4, 8 or 16 KiB; default 4 KiB).
    pub page_size: usize,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions { page_size: 4096 }
    }
}

/// What `strata build` prints: the fields fixed by `BENCHMARKS.md`.
#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    /// Kind name.
    pub index: String,
    /// Resolved configuration.
    pub config: Map<String, Value>,
    /// Number of keys.
    pub n: u64,
    /// Bytes held in memory when opened with `resident=index`.
    pub memory_bytes: u64,
    /// `8 * memory_bytes / n`.
    pub bits_per_key: f64,
    /// Bytes of all files.
    pub disk_bytes: u64,
    /// Wall-clock build time.
    pub build_s: f64,
    /// Keys per second of the build.
    pub build_keys_per_s: f64,
    /// Models/segments of a learned index.
    pub models: Option<u64>,
    /// Height (levels or layers above the data).
    pub height: Option<u32>,
}

/// One index kind: how to build it into a directory and open it again.
pub trait IndexKind: Send + Sync {
    /// Kind name used in specs.
    fn name(&self) -> &'static str;
    /// One line for `--help` and docs.
    fn summary(&self) -> &'static str;
    /// Writes the kind's files for `records` (keys strictly increasing,
    /// checked by the caller) into `dir`. Returns the file names and a description for the manifest.
    /// `opts.page_size` is already resolved (the `page` parameter of every
    /// kind); the kind reads its own parameters from `params`. `build_id`
    /// (nonzero, random, also written into the manifest) goes into the
    /// header of every file the kind writes, so that [`IndexKind::open`]
    /// can refuse a file of another build.
    fn build(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: &dyn Directory,
        opts: &BuildOptions,
        build_id: u64,
    ) -> Result<(Vec<String>, Value)>;
    /// Opens a built index. Every file's header must carry the manifest's
    /// build id (see [`Manifest::check_build_id`]) and agree with the
    /// manifest's counts: a file of another build is [`Error::Corruption`]
    /// naming it.
    fn open(
        &self,
        manifest: &Manifest,
        dir: Arc<dyn Directory>,
        io: IoContext,
        opts: &OpenOptions,
    ) -> Result<Box<dyn Index>>;
    /// [`build`](IndexKind::build) for a kind that needs a shared handle on
    /// its directory (a store opened with `open_in`): what
    /// [`Registry::build_in`] calls for kinds whose
    /// [`dir_lock`](IndexKind::dir_lock) is `None`. The default calls
    /// [`build`](IndexKind::build).
    fn build_shared(
        &self,
        params: &Params,
        records: Records<'_>,
        dir: Arc<dyn Directory>,
        opts: &BuildOptions,
        build_id: u64,
    ) -> Result<(Vec<String>, Value)> {
        self.build(params, records, dir.as_ref(), opts, build_id)
    }
    /// The directory lock [`Registry::open`] holds while an index of this
    /// kind is open: [`LockMode::Shared`] for static kinds (the default),
    /// [`LockMode::Exclusive`] for kinds updated in place, `None` for a kind
    /// that locks its directory itself (a store). Builds at a path take the
    /// exclusive lock unless this is `None`.
    fn dir_lock(&self) -> Option<LockMode> {
        Some(LockMode::Shared)
    }
    /// Whether [`build`](IndexKind::build) reads its records once, in order,
    /// with [`Records::try_for_each`], holding none of them (a build from a
    /// [`RecordStream`](super::RecordStream) then needs no memory per key).
    /// For other kinds the registry reads a stream into memory first. The
    /// default: `false`.
    fn streams_build(&self) -> bool {
        false
    }
    /// The parameters the kind takes besides `page` (which every kind takes:
    /// [`PAGE_PARAM`]), with their meaning, in the order `strata list`
    /// prints them. Their defaults are what
    /// [`resolve_params`](IndexKind::resolve_params) resolves when none is
    /// given ([`Registry::params_of`]). Every parameter the kind reads must
    /// be here (the registry's tests check it against what it resolves).
    fn params(&self) -> Vec<ParamDoc> {
        Vec::new()
    }
    /// Reads the kind's parameters from `params` as a build does, so that
    /// each is recorded with the value it takes, given or default
    /// ([`Params::resolved`]), and checks their values; a parameter it does
    /// not take is left for [`Params::finish`]. `opts.page_size` is
    /// resolved, as for [`build`](IndexKind::build).
    ///
    /// The default builds the kind over no records into a scratch in-memory
    /// directory (every kind reads its parameters before it looks at the
    /// keys).
    fn resolve_params(&self, params: &Params, opts: &BuildOptions) -> Result<()> {
        self.build(params, Records::ranked(&[]), &MemDirectory::new(), opts, 1)
            .map(|_| ())
    }
    /// Checks `params` before any data is read or written: a value the
    /// kind rejects, or a parameter it does not take, is an error here, so
    /// a build never starts on a spec it would refuse at the end.
    /// `opts.page_size` is resolved, as for [`build`](IndexKind::build).
    ///
    /// The default resolves a copy of `params`
    /// ([`resolve_params`](IndexKind::resolve_params)) and then rejects the
    /// parameters no getter asked for ([`Params::finish`]); `params` itself
    /// is left untouched.
    fn check_params(&self, params: &Params, opts: &BuildOptions) -> Result<()> {
        let probe = params.clone();
        self.resolve_params(&probe, opts)?;
        probe.finish(self.name())
    }
}

/// The parameter every kind takes: the page size of its files.
pub const PAGE_PARAM: ParamDoc = ParamDoc::new(
    "page",
    "page size of the index files in bytes: 4096, 8192 or 16384 (4k, 8k, 16k)",
);

/// Prefix of the files a build writes before it publishes them under their
/// own names (see [`Registry::build_in`]).
const STAGING_PREFIX: &str = "building-";

/// The view of an index directory a build writes through: every file gets
/// [`STAGING_PREFIX`], so the files of a previous index stay untouched (and
/// complete) until the new one is published.
#[derive(Debug)]
struct Staging<'a> {
    dir: &'a dyn Directory,
}

impl PassThrough for Staging<'_> {
    fn inner(&self) -> &dyn Directory {
        self.dir
    }

    fn map_name<'n>(&self, name: &'n str) -> Cow<'n, str> {
        Cow::Owned(format!("{STAGING_PREFIX}{name}"))
    }

    fn unmap_name(&self, inner_name: String) -> Option<String> {
        inner_name.strip_prefix(STAGING_PREFIX).map(str::to_string)
    }
}

impl Staging<'_> {
    /// Removes every staged file (what a failed or crashed build left).
    fn clear(&self) -> Result<()> {
        remove_all(self)
    }

    /// Moves every staged file to its own name, replacing the files of the
    /// same name, after removing the previous manifest (so that no moment
    /// shows an old manifest over new files) and with the new manifest
    /// last. The files of the previous index that the new one does not
    /// replace are removed.
    fn publish(&self) -> Result<()> {
        let new = self.list()?;
        let old = if self.dir.exists(super::MANIFEST_FILE) {
            // An unreadable old manifest leaves its files where they are.
            let old = Manifest::load(self.dir).map(|m| m.files).unwrap_or_default();
            self.dir.remove(super::MANIFEST_FILE)?;
            self.dir.sync_dir()?;
            old
        } else {
            Vec::new()
        };
        // The manifest last: until it is in place, the directory holds no index.
        let (manifest, files): (Vec<&String>, Vec<&String>) =
            new.iter().partition(|n| *n == super::MANIFEST_FILE);
        for name in files.into_iter().chain(manifest) {
            self.dir.rename(&self.map_name(name), name)?;
        }
        // Names only (a manifest cannot point outside its directory).
        for name in old.iter().filter(|n| !new.contains(n) && !n.contains('/')) {
            if self.dir.exists(name) {
                self.dir.remove(name)?;
            }
        }
        self.dir.sync_dir()
    }
}

/// Removes every file `dir` lists, then syncs it if there were any.
fn remove_all(dir: &dyn Directory) -> Result<()> {
    let names = dir.list()?;
    for name in &names {
        dir.remove(name)?;
    }
    if !names.is_empty() {
        dir.sync_dir()?;
    }
    Ok(())
}

/// The name of the build directory ([`Directory::build_dir`]) of the build
/// `build_id`, on directories that have them (object stores).
fn build_dir_name(build_id: u64) -> String {
    format!("build-{build_id:016x}")
}

/// Where the files of the index whose manifest is `m` live: the build
/// directory of its build on a directory that has them (an object store),
/// else `dir` itself.
pub fn files_dir(dir: Arc<dyn Directory>, m: &Manifest) -> Arc<dyn Directory> {
    m.build_id
        .and_then(|id| dir.build_dir(&build_dir_name(id)))
        .unwrap_or(dir)
}

/// An opened index and the directory lock it holds until dropped.
struct LockedIndex {
    inner: Box<dyn Index>,
    _lock: DirLock,
}

impl Index for LockedIndex {
    fn kind(&self) -> &str {
        self.inner.kind()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
    fn get(&self, key: u64) -> Result<Option<u64>> {
        self.inner.get(key)
    }
    fn lower_bound(&self, key: u64) -> Result<Option<Record>> {
        self.inner.lower_bound(key)
    }
    fn scan(&self, from: u64, count: usize, out: &mut Vec<Record>) -> Result<()> {
        self.inner.scan(from, count, out)
    }
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        self.inner.cursor()
    }
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        self.inner.get_many(keys, out)
    }
    fn lower_bound_many(&self, keys: &[u64], out: &mut Vec<Option<Record>>) -> Result<()> {
        self.inner.lower_bound_many(keys, out)
    }
    fn approx(&self, key: u64) -> Result<Option<ApproxPos>> {
        self.inner.approx(key)
    }
    fn supports_updates(&self) -> bool {
        self.inner.supports_updates()
    }
    fn insert(&self, key: u64, value: u64) -> Result<Option<u64>> {
        self.inner.insert(key, value)
    }
    fn delete(&self, key: u64) -> Result<bool> {
        self.inner.delete(key)
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
    fn settle(&self) -> Result<()> {
        self.inner.settle()
    }
    fn stats(&self) -> Result<IndexStats> {
        self.inner.stats()
    }
    fn verify(&self, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        self.inner.verify(progress)
    }
    fn io(&self) -> &Arc<IoStats> {
        self.inner.io()
    }
}

/// Checks that keys are strictly increasing, naming the first offender.
pub(crate) fn check_keys(keys: &[u64]) -> Result<()> {
    for (i, w) in keys.windows(2).enumerate() {
        if let [a, b] = w {
            if b <= a {
                return Err(Error::OutOfOrder {
                    position: i as u64 + 1,
                    previous: *a,
                    got: *b,
                });
            }
        }
    }
    Ok(())
}

/// The kinds this layer defines, in `strata list` order: `binary`, `btree`,
/// `btree-ld`, `fiting`, `dpgm`, `lipp`, `alex`,
/// then the layered kinds (`LAYERED_KINDS`).
/// Kinds defined above `index` (`air`, `db`) are registered by the modules
/// above it; `strata::registry` holds them all.
pub fn registry() -> Registry {
    let mut k: Vec<&'static dyn IndexKind> = vec![
        &super::binary::BinaryKind,
        &super::btree::BTreeKind::PLAIN,
        &super::btree::BTreeKind::LEARNED,
        &super::fiting::FitingKind,
        &super::dpgm::DpgmKind,
        &super::lipp::LippKind,
        &super::alex::AlexKind,
    ];
    k.extend(super::layered::LAYERED_KINDS.iter().map(|l| l as &dyn IndexKind));
    Registry::new(k)
}

/// A list of index kinds that specs and manifests are resolved against by
/// name: what builds and opens index directories.
///
/// The kinds are kept in the order given; a name is resolved to the first
/// kind that has it. A registry is cheap to clone (a list of references).
#[derive(Clone, Default)]
pub struct Registry {
    kinds: Vec<&'static dyn IndexKind>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.kinds.iter().map(|k| k.name()))
            .finish()
    }
}

impl Registry {
    /// A registry of `kinds`, in this order.
    pub fn new(kinds: Vec<&'static dyn IndexKind>) -> Self {
        Registry { kinds }
    }

    /// This registry with `kind` appended after its kinds.
    #[must_use]
    pub fn with(mut self, kind: &'static dyn IndexKind) -> Self {
        self.kinds.push(kind);
        self
    }

    /// The kinds, in registration order (the order `strata list` prints).
    pub fn kinds(&self) -> &[&'static dyn IndexKind] {
        &self.kinds
    }

    /// The kind named `kind`; an [`Error::InvalidInput`] naming the known
    /// kinds if there is none.
    pub fn find(&self, kind: &str) -> Result<&'static dyn IndexKind> {
        self.kinds
            .iter()
            .copied()
            .find(|k| k.name() == kind)
            .ok_or_else(|| {
                let names: Vec<&str> = self.kinds.iter().map(|k| k.name()).collect();
                Error::invalid(format!(
                    "unknown index kind {kind:?}; known kinds: {}",
                    names.join(", ")
                ))
            })
    }

    /// Builds `spec` over `keys` (values: their ranks) into the directory
    /// at `path` (created if needed; an existing index there is replaced).
    /// Keys must be strictly increasing ([`Error::OutOfOrder`] otherwise).
    pub fn build(
        &self,
        spec: &IndexSpec,
        keys: &[u64],
        path: &Path,
        opts: &BuildOptions,
    ) -> Result<BuildReport> {
        self.build_records(spec, Records::ranked(keys), path, opts)
    }

    /// Builds `spec` over records with explicit values into the directory at `path`.
    pub fn build_records(
        &self,
        spec: &IndexSpec,
        records: Records<'_>,
        path: &Path,
        opts: &BuildOptions,
    ) -> Result<BuildReport> {
        // Nothing is created for a spec the kind would refuse, or for keys
        // out of order.
        self.check_spec(spec, opts)?;
        if records.in_memory() {
            check_keys(records.keys())?;
        }
        if let Some(url) = crate::storage::remote_url(path) {
            let dir = crate::storage::open_remote(url)?;
            return self.build_locked(spec, records, &dir, opts);
        }
        let (fs, created) = FsDirectory::create_all_tracked(path)?;
        let dir: Arc<dyn Directory> = Arc::new(fs);
        let built = self.build_locked(spec, records, &dir, opts);
        if built.is_err() && !created.is_empty() {
            // A failed build in a directory it created leaves no directory
            // (nor the parents it created): the build removed its files, the
            // lock file goes with the lock.
            if dir.exists(crate::storage::LOCK_FILE) {
                let _ = dir.remove(crate::storage::LOCK_FILE);
            }
            crate::storage::remove_created_dirs(&created);
        }
        built
    }

    /// [`build_in`](Self::build_in) under the directory's exclusive lock
    /// (for kinds with a directory lock: no reader may have the directory
    /// open while it is rebuilt), released on return.
    fn build_locked(
        &self,
        spec: &IndexSpec,
        records: Records<'_>,
        dir: &Arc<dyn Directory>,
        opts: &BuildOptions,
    ) -> Result<BuildReport> {
        let _lock = match self.find(&spec.kind)?.dir_lock() {
            Some(_) => Some(dir.lock(LockMode::Exclusive)?),
            None => None,
        };
        self.build_in(spec, records, dir.clone(), opts)
    }

    /// The kind, parameters and build options of `spec`, checked as
    /// [`check_spec`](Self::check_spec) does (the `page` parameter
    /// resolved, the rest not yet asked for).
    fn resolve(
        &self,
        spec: &IndexSpec,
        opts: &BuildOptions,
    ) -> Result<(&'static dyn IndexKind, Params, BuildOptions)> {
        let kind = self.find(&spec.kind)?;
        let params = spec.params.clone();
        // `page` is a parameter of every kind: the page size of its paged files.
        let page_size = params.usize("page", opts.page_size)?;
        check_page_size(page_size)?;
        let opts = BuildOptions { page_size };
        kind.check_params(&params, &opts)?;
        Ok((kind, params, opts))
    }

    /// The parameters of the kind named `kind` ([`IndexKind::params`]),
    /// each with the value a build takes when it is not given (at the
    /// default page size). Not [`PAGE_PARAM`], which every kind takes.
    pub fn params_of(&self, kind: &str) -> Result<Vec<KindParam>> {
        let kind = self.find(kind)?;
        let defaults = Params::default();
        kind.resolve_params(&defaults, &BuildOptions::default())?;
        let resolved = defaults.resolved();
        Ok(kind
            .params()
            .into_iter()
            .map(|d| KindParam {
                name: d.name,
                default: resolved.get(d.name).cloned(),
                meaning: d.meaning,
            })
            .collect())
    }

    /// Checks `spec` without reading or writing anything: the kind exists,
    /// the page size is valid, and the kind takes every parameter with its
    /// value ([`IndexKind::check_params`]). What `strata build` runs before
    /// it reads the key file; every build runs it first.
    pub fn check_spec(&self, spec: &IndexSpec, opts: &BuildOptions) -> Result<()> {
        self.resolve(spec, opts).map(|_| ())
    }

    /// Builds `spec` over `records` into `dir`: checks the spec
    /// ([`check_spec`](Self::check_spec)) and the keys before anything is
    /// written, writes the kind's files, then the manifest (last, so a
    /// half-built directory has none), and opens the result to measure it.
    ///
    /// Kinds with a directory lock (every static kind and `btree`) build
    /// under temporary names that are moved into place only once the build
    /// succeeded: a failed build removes what it wrote and leaves a previous
    /// index in `dir` complete. A kind that manages its directory itself
    /// (a store) builds in place and cleans up after itself.
    ///
    /// On a directory of files built once (an object store:
    /// [`Directory::build_dir`] is `Some`), a static kind writes its files
    /// under a directory of their own (`build-<id>/`), then publishes the
    /// manifest conditionally over the one it found (a concurrent builder
    /// that published first makes this one fail with
    /// [`Error::Conflict`](crate::Error::Conflict), and its files are
    /// removed), then removes the replaced build's files. Other kinds are
    /// [`Error::Unsupported`](crate::Error::Unsupported) there, before any
    /// write. See `docs/format/index-dir.md`, "On an object store".
    pub fn build_in(
        &self,
        spec: &IndexSpec,
        records: Records<'_>,
        dir: Arc<dyn Directory>,
        opts: &BuildOptions,
    ) -> Result<BuildReport> {
        let (kind, params, opts) = self.resolve(spec, opts)?;
        let opts = &opts;
        // A kind that does not stream its build gets its records in memory
        // (a stream read now: its errors come before anything is written).
        if !records.in_memory() && !kind.streams_build() {
            records.try_keys()?;
        }
        if records.in_memory() {
            check_keys(records.keys())?;
        }
        let t0 = Instant::now();
        // The kind's files, then the manifest (last, so a half-built
        // directory has none), into `into`.
        let build_id = super::new_build_id();
        // The kind's files into `into` (or `shared`), the manifest into `top`.
        let write = |into: &dyn Directory,
                     top: &dyn Directory,
                     shared: Option<&Arc<dyn Directory>>|
         -> Result<(Manifest, f64)> {
            let (files, description) = match shared {
                Some(d) => kind.build_shared(&params, records, d.clone(), opts, build_id)?,
                None => kind.build(&params, records, into, opts, build_id)?,
            };
            params.finish(kind.name())?;
            let build_s = t0.elapsed().as_secs_f64();
            // Records of a stream are counted as the build read them.
            let mut m = Manifest::new(
                kind.name(),
                params.resolved(),
                records.len() as u64,
                opts.page_size,
            );
            m.files = files;
            m.build_s = build_s;
            m.description = description;
            m.build_id = Some(build_id);
            m.store(top)?;
            Ok((m, build_s))
        };
        let (m, build_s) = if let Some(files) = dir.build_dir(&build_dir_name(build_id)) {
            // A directory without atomic renames (an object store): the files
            // go to a directory of this build's own, and the manifest is
            // published over the one found now by a conditional put, so of
            // two builders only one wins (the other gets `Error::Conflict`).
            if kind.dir_lock() != Some(LockMode::Shared) {
                return Err(Error::Unsupported(format!(
                    "{}: a {} index is updated in place and needs a local directory",
                    dir.describe(),
                    kind.name()
                )));
            }
            let old = match dir.exists(super::MANIFEST_FILE) {
                // An unreadable old manifest leaves its files where they are.
                true => Manifest::load(dir.as_ref()).ok(),
                false => None,
            };
            match write(files.as_ref(), dir.as_ref(), None) {
                Ok(r) => {
                    if let Some(old) = old {
                        let old_files = files_dir(dir.clone(), &old);
                        // Readers that still have the old index open get
                        // "not found" errors from now on, never its answers
                        // mixed with the new one's.
                        if !Arc::ptr_eq(&old_files, &dir) {
                            remove_all(old_files.as_ref())?;
                        }
                    }
                    r
                }
                Err(e) => {
                    // The error of the build is the one to report.
                    let _ = remove_all(files.as_ref());
                    return Err(e);
                }
            }
        } else if kind.dir_lock().is_some() {
            let staging = Staging { dir: dir.as_ref() };
            // Leftovers of a build that crashed.
            staging.clear()?;
            match write(&staging, &staging, None) {
                Ok(r) => {
                    staging.publish()?;
                    r
                }
                Err(e) => {
                    // The error of the build is the one to report.
                    let _ = staging.clear();
                    return Err(e);
                }
            }
        } else {
            // A previous manifest would make a half-built directory look complete.
            if dir.exists(super::MANIFEST_FILE) {
                dir.remove(super::MANIFEST_FILE)?;
                dir.sync_dir()?;
            }
            write(dir.as_ref(), dir.as_ref(), Some(&dir))?
        };
        let idx = self.open_in(dir, &OpenOptions::default())?;
        let st = idx.stats()?;
        let n = records.len() as u64;
        Ok(BuildReport {
            index: kind.name().to_string(),
            config: m.config,
            n,
            memory_bytes: st.memory_bytes,
            bits_per_key: if n > 0 {
                8.0 * st.memory_bytes as f64 / n as f64
            } else {
                0.0
            },
            disk_bytes: st.disk_bytes,
            build_s,
            build_keys_per_s: if build_s > 0.0 { n as f64 / build_s } else { 0.0 },
            models: st.models,
            height: st.height,
        })
    }

    /// Opens the index directory at `path`, holding its lock (the kind's
    /// [`IndexKind::dir_lock`]: shared for static kinds, exclusive for the
    /// updatable `btree`) until the index is dropped; a conflicting lock,
    /// e.g. a build or an open `btree`, is [`Error::Locked`].
    pub fn open(&self, path: &Path, opts: &OpenOptions) -> Result<Box<dyn Index>> {
        let dir: Arc<dyn Directory> = match crate::storage::remote_url(path) {
            Some(url) => crate::storage::open_remote(url)?,
            None => Arc::new(
                FsDirectory::open(path)?
                    .with_direct(opts.direct)
                    .with_io_engine(opts.io_engine),
            ),
        };
        let m = Manifest::load(dir.as_ref())?;
        let Some(mode) = self.find(&m.kind)?.dir_lock() else {
            return self.open_in(dir, opts);
        };
        let lock = dir.lock(mode)?;
        let inner = self.open_in(dir, opts)?;
        Ok(Box::new(LockedIndex { inner, _lock: lock }))
    }

    /// Opens the index in `dir`, with I/O counters of its own.
    pub fn open_in(&self, dir: Arc<dyn Directory>, opts: &OpenOptions) -> Result<Box<dyn Index>> {
        let m = Manifest::load(dir.as_ref())?;
        let mut io = IoContext::with_profile(opts.profile.clone());
        io.queue_depth = opts.queue_depth.clamp(1, MAX_QUEUE_DEPTH);
        if opts.cache_pages > 0 {
            io.cache = Some(Arc::new(PageCache::new(opts.cache_pages, m.page_size)));
        }
        self.open_manifest(m, dir, io, opts)
    }

    /// Opens the index in `dir` with its reads counted into `io` (and charged
    /// `io`'s profile), not into counters of its own: how a store opens its
    /// static stage, so that each read is counted once, into the store's
    /// counters.
    pub(crate) fn open_in_with_io(
        &self,
        dir: Arc<dyn Directory>,
        opts: &OpenOptions,
        io: IoContext,
    ) -> Result<Box<dyn Index>> {
        self.open_manifest(Manifest::load(dir.as_ref())?, dir, io, opts)
    }

    fn open_manifest(
        &self,
        m: Manifest,
        dir: Arc<dyn Directory>,
        mut io: IoContext,
        opts: &OpenOptions,
    ) -> Result<Box<dyn Index>> {
        io.page_size = m.page_size;
        let dir = files_dir(dir, &m);
        self.find(&m.kind)?.open(&m, dir, io, opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{FaultKind, FaultOp, FaultyDirectory};

    fn is_locked<T>(r: Result<T>) -> bool {
        matches!(r, Err(Error::Locked { .. }))
    }

    fn spec(s: &str) -> IndexSpec {
        s.parse().unwrap()
    }

    /// An unknown parameter or a bad value is refused before anything is
    /// written: the directory sees not one write (every write would fail),
    /// and a build at a path creates no directory.
    #[test]
    fn a_bad_spec_is_refused_before_any_io() {
        let reg = registry();
        let keys: Vec<u64> = (0..5000).map(|i| i * 3).collect();
        let opts = BuildOptions::default();
        for (s, named) in [
            ("pgm:eps=64", "eps"),
            ("btree:fill=0", "fill"),
            ("rs:epsilon=8,bogus=1", "bogus"),
            ("binary:page=1000", "page"),
            ("pgm:sample=0", "sample"),
            ("pgm:sample=4,granularity=page", "granularity"),
            ("pgm-disk:sample=4", "sample"),
            ("nosuch", "nosuch"),
        ] {
            let dir = FaultyDirectory::new();
            dir.plan().inject(FaultOp::Write, 0, FaultKind::Eio, true);
            let e = reg
                .build_in(&spec(s), Records::ranked(&keys), Arc::new(dir.clone()), &opts)
                .unwrap_err();
            assert!(matches!(e, Error::InvalidInput(_)), "{s}: {e}");
            assert!(e.to_string().contains(named), "{s}: {e}");
            assert!(dir.list().unwrap().is_empty(), "{s}: {:?}", dir.list());
            assert!(reg.check_spec(&spec(s), &opts).is_err());
            let tmp = tempfile::tempdir().unwrap();
            let out = tmp.path().join("out");
            assert!(reg.build(&spec(s), &keys, &out, &opts).is_err());
            assert!(!out.exists(), "{s}: a refused build created {}", out.display());
        }
        reg.check_spec(&spec("pgm:epsilon=64,epsilon_rec=4"), &opts)
            .unwrap();
        reg.check_spec(&spec("btree:fill=80,page=8k"), &opts).unwrap();
    }

    /// A build that fails at any write leaves the directory as it was: the
    /// previous complete index still opens and answers, with the same
    /// files, and no file of the failed build is left behind.
    #[test]
    fn a_build_failing_midway_leaves_the_previous_index_intact() {
        let reg = registry();
        let old: Vec<u64> = (0..3000).map(|i| i * 5).collect();
        let new: Vec<u64> = (0..20_000).map(|i| i * 7 + 1).collect();
        let opts = BuildOptions::default();
        for s in ["pgm:epsilon=16", "btree", "rmi:models=64"] {
            let dir = FaultyDirectory::new();
            let arc: Arc<dyn Directory> = Arc::new(dir.clone());
            reg.build_in(&spec(s), Records::ranked(&old), arc.clone(), &opts)
                .unwrap();
            let before = dir.list().unwrap();
            let mut failures = 0;
            for after in 0.. {
                dir.plan().inject(FaultOp::Write, after, FaultKind::Eio, true);
                let r = reg.build_in(&spec(s), Records::ranked(&new), arc.clone(), &opts);
                dir.plan().clear();
                if r.is_ok() {
                    break;
                }
                failures += 1;
                assert_eq!(
                    dir.list().unwrap(),
                    before,
                    "{s}: files after a failure at write {after}"
                );
                let idx = reg.open_in(arc.clone(), &OpenOptions::default()).unwrap();
                assert_eq!((idx.len(), idx.get(25).unwrap()), (3000, Some(5)), "{s}");
                assert!(after < 10_000, "{s}: the build never succeeded");
            }
            assert!(failures > 0, "{s}: no write failed");
            let idx = reg.open_in(arc, &OpenOptions::default()).unwrap();
            assert_eq!((idx.len(), idx.get(8).unwrap()), (20_000, Some(1)), "{s}");
        }
    }

    /// Keys out of order are refused before anything is written; at a path
    /// the build would create, no directory is left, nor any parent.
    #[test]
    fn unsorted_keys_leave_no_directory() {
        let reg = registry();
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let mut keys: Vec<u64> = (0..5000).collect();
        keys[2500] = 1;
        let e = reg
            .build(&spec("pgm"), &keys, &out, &BuildOptions::default())
            .unwrap_err();
        assert!(matches!(e, Error::OutOfOrder { position: 2500, .. }), "{e}");
        assert!(!out.exists());
        let nested = tmp.path().join("a").join("b").join("out");
        for (s, keys) in [
            ("pgm", &keys[..]),
            ("db", &keys[..]),
            ("pgm:eps=1", &keys[..2000]),
        ] {
            assert!(
                reg.build(&spec(s), keys, &nested, &BuildOptions::default())
                    .is_err()
            );
            assert!(
                !tmp.path().join("a").exists(),
                "{s}: a refused build left a parent"
            );
        }
    }

    /// A build that fails after it created its directory (here: a write
    /// fails, the directory is not writable) removes that directory and the
    /// parents it created, and leaves an existing parent alone.
    #[test]
    fn a_failed_build_removes_the_directories_it_created() {
        let reg = registry();
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<u64> = (0..5000).map(|i| i * 3).collect();
        let parent = tmp.path().join("p");
        std::fs::create_dir(&parent).unwrap();
        let nested = parent.join("a").join("b");
        let (fs, created) = FsDirectory::create_all_tracked(&nested).unwrap();
        assert_eq!(created, [nested.clone(), parent.join("a")]);
        drop(fs);
        crate::storage::remove_created_dirs(&created);
        assert!(parent.exists() && !parent.join("a").exists());
        // A file where the build wants a directory: refused, nothing left.
        std::fs::write(parent.join("f"), b"x").unwrap();
        assert!(
            reg.build(
                &spec("pgm"),
                &keys,
                &parent.join("f").join("idx"),
                &BuildOptions::default()
            )
            .is_err()
        );
        assert_eq!(std::fs::read_dir(&parent).unwrap().count(), 1);
        // A build that fails midway, in directories it created.
        let reg = reg.with(&FailsOverRecords);
        let out = parent.join("x").join("idx");
        let e = reg
            .build(&spec("fails-over-records"), &keys, &out, &BuildOptions::default())
            .unwrap_err();
        assert!(e.to_string().contains("midway"), "{e}");
        assert_eq!(std::fs::read_dir(&parent).unwrap().count(), 1);
        // Into an existing directory: the directory stays.
        std::fs::create_dir(parent.join("y")).unwrap();
        let out = parent.join("y");
        assert!(
            reg.build(&spec("fails-over-records"), &keys, &out, &BuildOptions::default())
                .is_err()
        );
        assert!(out.is_dir());
    }

    /// A kind whose specs check (over no records) but whose builds fail
    /// after writing a file.
    struct FailsOverRecords;

    impl IndexKind for FailsOverRecords {
        fn name(&self) -> &'static str {
            "fails-over-records"
        }

        fn summary(&self) -> &'static str {
            "fails midway"
        }

        fn build(
            &self,
            _params: &Params,
            records: Records<'_>,
            dir: &dyn Directory,
            _opts: &BuildOptions,
            _build_id: u64,
        ) -> Result<(Vec<String>, Value)> {
            if records.is_empty() {
                return Ok((vec![], Value::Null));
            }
            dir.create("half")?.write_at(0, b"half")?;
            Err(Error::invalid("failed midway"))
        }

        fn open(
            &self,
            _m: &Manifest,
            _dir: Arc<dyn Directory>,
            _io: IoContext,
            _opts: &OpenOptions,
        ) -> Result<Box<dyn Index>> {
            Err(Error::invalid("never built"))
        }
    }

    /// Static kinds are opened under a shared lock (many readers), the
    /// updatable `btree` under an exclusive one; a build at a path takes the
    /// exclusive lock, so it never runs under a reader.
    #[test]
    fn open_and_build_at_a_path_take_the_kind_s_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let reg = registry();
        let keys: Vec<u64> = (0..5000).map(|i| i * 3).collect();
        let opts = BuildOptions::default();
        let (s, b) = (tmp.path().join("s"), tmp.path().join("b"));
        let spec = |k: &str| k.parse::<IndexSpec>().unwrap();
        reg.build(&spec("pgm"), &keys, &s, &opts).unwrap();
        reg.build(&spec("btree"), &keys, &b, &opts).unwrap();
        let r1 = reg.open(&s, &OpenOptions::default()).unwrap();
        let r2 = reg.open(&s, &OpenOptions::default()).unwrap();
        assert_eq!((r1.get(9).unwrap(), r2.get(9).unwrap()), (Some(3), Some(3)));
        assert!(is_locked(reg.build(&spec("pgm"), &keys, &s, &opts)));
        drop((r1, r2));
        reg.build(&spec("pgm"), &keys, &s, &opts).unwrap();
        let w = reg.open(&b, &OpenOptions::default()).unwrap();
        assert_eq!(w.insert(1, 10).unwrap(), None);
        assert!(is_locked(reg.open(&b, &OpenOptions::default())));
        assert!(is_locked(reg.build(&spec("btree"), &keys, &b, &opts)));
        drop(w);
        assert_eq!(
            reg.open(&b, &OpenOptions::default()).unwrap().get(1).unwrap(),
            Some(10)
        );
    }
}
