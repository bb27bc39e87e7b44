//! How a store is opened: [`Options`] and the [`MergeTrigger`].

use crate::index::Residency;
use crate::storage::StorageProfile;
use crate::{Error, Result};

use super::stage::{self, StaticKind};
use super::wal::SyncPolicy;

/// The dynamic stage never gets less than this share of the budget.
pub(super) const MIN_DYNAMIC_BYTES: u64 = 16 << 10;
/// A ratio trigger never merges fewer entries than this.
pub(super) const MIN_RATIO_ENTRIES: u64 = 1024;

/// When the dynamic stage is frozen and merged (Zhang §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeTrigger {
    /// From the memory budget: the dynamic stages (the one taking writes and
    /// the one being merged) share what the static index leaves of
    /// [`Options::memory_budget`]: a merge starts when the writable stage
    /// reaches two thirds of that share, and while it runs the new writable
    /// stage may grow until both stages together fill the share (writers
    /// then wait for the merge). Bigger merges than halves, same bound.
    #[default]
    Budget,
    /// A constant trigger: merge when the writable stage holds this many bytes.
    Constant(u64),
    /// A ratio trigger: merge when the writable stage holds `1/r` as many
    /// entries as the static stage (at least 1024).
    Ratio(u64),
}

/// How a store is opened.
#[derive(Debug, Clone)]
pub struct Options {
    /// When log writes are synced (default: every write).
    pub sync: SyncPolicy,
    /// Memory for the dynamic stages plus the static index, in bytes
    /// (default 64 MiB).
    pub memory_budget: u64,
    /// When to merge (default: from the budget).
    pub trigger: MergeTrigger,
    /// The static index a merge builds (default: automatic, Zhang G5).
    pub static_kind: StaticKind,
    /// Page size of a new store's static files (an existing store keeps its own).
    pub page_size: usize,
    /// Merge in a background thread (default). When false the writer that
    /// fills the dynamic stage runs the merge itself (Zhang's single-threaded
    /// mode, with its tail latency).
    pub background_merge: bool,
    /// Profile whose modelled time is charged per read call.
    pub profile: Option<StorageProfile>,
    /// Whether the static index's models stay in memory (default) or are
    /// read from storage on every lookup.
    pub resident: Residency,
    /// Open for reading only (default false): takes the directory's shared
    /// lock (so it is refused with [`Error::Locked`] while a writer has the
    /// store open, and a writer is refused while it is open), replays the
    /// log into memory without truncating a torn tail, and never writes,
    /// repairs, deletes a file or starts a merge or sync thread; writes
    /// return [`Error::Unsupported`]. A missing store is [`Error::NotFound`].
    pub read_only: bool,
    /// Create an empty store if the directory holds none (default true, as
    /// before this option existed); when false, a missing store (or missing
    /// directory) is [`Error::NotFound`] and nothing is created.
    pub create_if_missing: bool,
    /// Refuse to open (default false) rather than drop a complete log frame
    /// whose payload fails its checksum at the end of the newest segment:
    /// such a frame may be an acknowledged write whose bytes were damaged
    /// (or one a crash persisted out of order, never acknowledged). When
    /// false it is dropped, counted in [`crate::db::DbStats`]
    /// (`recovery_dropped_frames`, `recovery_dropped_bytes`) and logged as a
    /// warning; when true the open fails with [`Error::CorruptionAt`] naming
    /// the segment and the frame's byte offset. An incomplete (torn) tail is
    /// dropped either way: it was never acknowledged.
    pub strict_recovery: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync: SyncPolicy::Always,
            memory_budget: 64 << 20,
            trigger: MergeTrigger::Budget,
            static_kind: StaticKind::default(),
            page_size: 4096,
            background_merge: true,
            profile: None,
            resident: Residency::Index,
            read_only: false,
            create_if_missing: true,
            strict_recovery: false,
        }
    }
}

impl Options {
    pub(super) fn check(&self) -> Result<()> {
        crate::format::page::check_page_size(self.page_size)?;
        if self.memory_budget == 0 {
            return Err(Error::invalid("the memory budget must be positive"));
        }
        match self.trigger {
            MergeTrigger::Constant(0) => {
                return Err(Error::invalid("a constant merge trigger must be positive"));
            }
            MergeTrigger::Ratio(0) => return Err(Error::invalid("a merge ratio must be positive")),
            _ => {}
        }
        if let SyncPolicy::EveryMs(0) = self.sync {
            return Err(Error::invalid("a sync interval must be at least 1 ms"));
        }
        stage::check_static_kind(&self.static_kind)
    }
}
