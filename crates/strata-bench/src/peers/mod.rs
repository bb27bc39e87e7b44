//! Peer systems as index kinds: LMDB (`lmdb`, through `heed`) and RocksDB
//! (`rocksdb`), each behind the cargo feature of the same name so that a
//! default build never compiles them.
//!
//! The runner resolves a spec's kind here before the strata registry: a peer
//! bulk-loads the same records into its own directory, opens as a
//! [`strata::index::Index`] and runs the same operations, and its record has
//! the same JSON fields (I/O counters it cannot expose are null).
//!
//! Fair configuration (see `docs/results/peers.md`):
//! - both get the *memory budget* of the strata index they stand beside (the
//!   first non-peer `--index` of the run), unless the spec sets `cache_mb`;
//! - `lmdb`: data read through LMDB's read-only mmap; in cold runs its leaf
//!   pages are dropped from the OS page cache (`madvise` + `posix_fadvise`
//!   `DONTNEED`) every [`COLD_EVERY`] operations, outside the timed region,
//!   while branch pages stay cached, which matches strata's
//!   `resident=index` (inner nodes in memory, leaves read from storage);
//! - `rocksdb`: block cache = the budget, bloom filters 10 bits/key, direct
//!   reads in cold runs, no compression (strata pages are not compressed).

use std::path::Path;

use strata::Result;
use strata::index::{BuildReport, Index, IndexSpec, Records};

#[cfg(feature = "fjall")]
pub(crate) mod fjall;
#[cfg(feature = "leveldb")]
pub(crate) mod leveldb;
#[cfg(feature = "lmdb")]
mod lmdb;
#[cfg(feature = "rocksdb")]
pub(crate) mod rocksdb;

/// Operations between two evictions of a cold peer's cached data pages.
pub const COLD_EVERY: usize = 64;

/// What a peer needs to know about the run it stands in.
#[derive(Debug, Clone)]
pub struct PeerEnv {
    /// Bytes of memory the peer may use for caching (block cache, ...).
    pub memory_budget: u64,
    /// Cold run: bypass or drop the OS page cache.
    pub cold: bool,
    /// Page (block) size of the run.
    pub page_size: usize,
}

/// Evicts a peer's cached data pages; called by the runner between
/// operations, outside the timed region.
pub type Cooler = Box<dyn FnMut() -> Result<()> + Send>;

/// An opened peer.
pub struct Opened {
    /// The peer as an index.
    pub index: Box<dyn Index>,
    /// Called every [`COLD_EVERY`] operations in cold runs, if present.
    pub cooler: Option<Cooler>,
}

/// A peer system usable as an index kind.
pub trait Peer: Send + Sync {
    /// Kind name in specs (`lmdb`, `rocksdb`).
    fn name(&self) -> &'static str;
    /// One line for listings.
    fn summary(&self) -> &'static str;
    /// Bulk-loads `records` (strictly increasing keys) into a fresh directory `dir`.
    fn build(&self, spec: &IndexSpec, records: Records<'_>, dir: &Path, env: &PeerEnv)
    -> Result<BuildReport>;
    /// Opens what `build` wrote.
    fn open(&self, spec: &IndexSpec, dir: &Path, env: &PeerEnv) -> Result<Opened>;
}

/// Every peer compiled into this build.
#[cfg_attr(
    not(any(feature = "lmdb", feature = "rocksdb")),
    expect(unused_mut, reason = "no peer is compiled in: nothing is pushed")
)]
#[cfg_attr(
    any(feature = "lmdb", feature = "rocksdb"),
    expect(
        clippy::vec_init_then_push,
        reason = "which pushes exist depends on the features: some or all"
    )
)]
pub fn all() -> Vec<&'static dyn Peer> {
    let mut v: Vec<&'static dyn Peer> = Vec::new();
    #[cfg(feature = "lmdb")]
    v.push(&lmdb::Lmdb);
    #[cfg(feature = "rocksdb")]
    v.push(&rocksdb::RocksDb);
    v
}

/// Names of the compiled-in peers.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|p| p.name()).collect()
}

/// The peer called `kind`, if compiled in.
pub fn find(kind: &str) -> Option<&'static dyn Peer> {
    all().into_iter().find(|p| p.name() == kind)
}
