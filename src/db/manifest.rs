//! The store's manifest, `strata-db.manifest`: which static generation is
//! current and where the write-ahead log starts. A [`crate::log::Manifest`]:
//! written atomically (temporary file, sync, rename, directory sync);
//! checksummed. It records the full state; each [`DbEdit`] rewrites a few
//! fields.

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::log::{Manifest, WalChain, manifest};
use crate::storage::Directory;

/// File name of the manifest.
pub const DB_MANIFEST_FILE: &str = "strata-db.manifest";
/// Temporary name the manifest is written under before its rename.
pub(super) const DB_MANIFEST_TMP: &str = "strata-db.manifest.tmp";
/// Magic number at the start of the manifest: `STRATADB`.
pub(super) const DB_MANIFEST_MAGIC: u64 = u64::from_le_bytes(*b"STRATADB");
/// Format version of the manifest (2: it records the log chain, `wal`).
pub(super) const DB_MANIFEST_VERSION: u32 = 2;
/// Version-1 manifests (no log chain) are still read.
const DB_MANIFEST_MIN_VERSION: u32 = 1;

/// What the manifest records (its payload, JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DbManifest {
    /// Current static generation (0: no static stage yet).
    pub generation: u64,
    /// Index spec of the current generation's static index (empty if none).
    pub static_kind: String,
    /// Records in the static stage.
    pub static_n: u64,
    /// First write-ahead log segment not covered by the static stage; every
    /// segment with this id or a higher one is replayed on open.
    pub log_start: u64,
    /// Highest sequence number merged into the static stage.
    pub last_seq: u64,
    /// Page size of the static stage's files.
    pub page_size: usize,
    /// Merges completed over the store's life.
    pub merges: u64,
    /// Records in the static stage when [`crate::db::StaticKind::Auto`] last
    /// compared its candidates (0: never); merges reuse that choice until
    /// the static stage has doubled.
    #[serde(default)]
    pub auto_decided_n: u64,
    /// Version of strata that wrote the manifest.
    pub strata_version: String,
    /// Build id of the current generation (its index manifest's and its
    /// files'); absent in manifests from before build ids (issue 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_build_id: Option<u64>,
    /// The live log segments: the store's id, the first segment (equal to
    /// `log_start`), each sealed segment's length and last sequence number,
    /// and the newest segment (see `docs/format/db.md`). `None` only in a
    /// version-1 manifest: its store is upgraded by the next writer's open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal: Option<WalChain>,
}

/// A change to the store's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbEdit {
    /// A bulk load wrote generation 1 with `static_n` records.
    BulkLoad {
        /// Spec of its static index.
        static_kind: String,
        /// Records in it.
        static_n: u64,
        /// See [`DbManifest::auto_decided_n`].
        auto_decided_n: u64,
        /// See [`DbManifest::static_build_id`].
        static_build_id: Option<u64>,
    },
    /// A merge wrote `generation`, covering every log segment before `log_start`
    /// and sequence numbers up to `merged_seq`.
    Merge {
        /// The new generation.
        generation: u64,
        /// Spec of its static index.
        static_kind: String,
        /// Records in it.
        static_n: u64,
        /// First log segment it does not cover.
        log_start: u64,
        /// Highest sequence number it holds.
        merged_seq: u64,
        /// See [`DbManifest::auto_decided_n`].
        auto_decided_n: u64,
        /// See [`DbManifest::static_build_id`].
        static_build_id: Option<u64>,
    },
    /// The log chain changed (a rotation sealed the newest segment, or an
    /// open upgraded a version-1 store): records `0` as [`DbManifest::wal`].
    Wal(WalChain),
}

impl Manifest for DbManifest {
    type Edit = DbEdit;
    const FILE: &'static str = DB_MANIFEST_FILE;
    const TMP: &'static str = DB_MANIFEST_TMP;
    const MAGIC: u64 = DB_MANIFEST_MAGIC;
    const VERSION: u32 = DB_MANIFEST_VERSION;
    const MIN_VERSION: u32 = DB_MANIFEST_MIN_VERSION;
    const WHAT: &'static str = "db manifest";
    const MAGIC_NAME: &'static str = "strata db manifest";

    fn apply(&mut self, edit: &DbEdit) -> Result<()> {
        match edit {
            DbEdit::BulkLoad {
                static_kind,
                static_n,
                auto_decided_n,
                static_build_id,
            } => {
                self.generation = 1;
                self.static_kind = static_kind.clone();
                self.static_n = *static_n;
                self.auto_decided_n = *auto_decided_n;
                self.static_build_id = *static_build_id;
            }
            DbEdit::Merge {
                generation,
                static_kind,
                static_n,
                log_start,
                merged_seq,
                auto_decided_n,
                static_build_id,
            } => {
                self.generation = *generation;
                self.static_kind = static_kind.clone();
                self.static_n = *static_n;
                self.log_start = *log_start;
                self.last_seq = self.last_seq.max(*merged_seq);
                self.merges += 1;
                self.auto_decided_n = *auto_decided_n;
                self.static_build_id = *static_build_id;
                self.wal = self.wal.as_ref().map(|c| c.starting_at(*log_start));
            }
            DbEdit::Wal(chain) => self.wal = Some(chain.clone()),
        }
        Ok(())
    }
}

impl DbManifest {
    /// The manifest of a new, empty store (its log chain set by a
    /// [`DbEdit::Wal`] once its first segment exists).
    pub(crate) fn empty(page_size: usize) -> Self {
        DbManifest {
            generation: 0,
            static_kind: String::new(),
            static_n: 0,
            log_start: 1,
            last_seq: 0,
            page_size,
            merges: 0,
            auto_decided_n: 0,
            strata_version: env!("CARGO_PKG_VERSION").to_string(),
            static_build_id: None,
            wal: None,
        }
    }

    /// The bytes of the manifest file.
    pub fn encode(&self) -> Result<Vec<u8>> {
        manifest::encode(self)
    }

    /// Parses and checks the bytes of a manifest file named `file`.
    pub fn decode(bytes: &[u8], file: &str) -> Result<Self> {
        manifest::decode(bytes, file)
    }

    /// Writes the manifest atomically into `dir`: a temporary file, synced,
    /// renamed over the manifest, then the directory synced.
    pub(crate) fn store(&self, dir: &dyn Directory) -> Result<()> {
        manifest::store(self, dir)
    }

    /// Reads and checks the manifest of `dir`; `None` if there is none.
    pub fn load(dir: &dyn Directory) -> Result<Option<Self>> {
        manifest::load(dir)
    }

    /// Applies `edits` to a copy of this manifest and stores it atomically in
    /// `dir`; returns the stored manifest.
    pub(crate) fn commit(&self, edits: &[DbEdit], dir: &dyn Directory) -> Result<Self> {
        manifest::commit(self, edits, dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemDirectory;

    #[test]
    fn roundtrip_and_every_damage_is_an_error() {
        let dir = MemDirectory::new();
        assert_eq!(DbManifest::load(&dir).unwrap(), None);
        let mut m = DbManifest::empty(4096);
        m.generation = 3;
        m.static_kind = "pgm-disk-cpr:epsilon=64".into();
        m.store(&dir).unwrap();
        assert_eq!(DbManifest::load(&dir).unwrap(), Some(m.clone()));
        assert!(!dir.exists(DB_MANIFEST_TMP));
        let bytes = m.encode().unwrap();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert!(
                DbManifest::decode(&b, "m").is_err(),
                "flip at byte {i} undetected"
            );
        }
        for cut in 0..bytes.len() {
            assert!(DbManifest::decode(&bytes[..cut], "m").is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn edits_set_what_bulk_loads_and_merges_change() {
        let dir = MemDirectory::new();
        let m = DbManifest::empty(4096)
            .commit(
                &[DbEdit::BulkLoad {
                    static_kind: "btree".into(),
                    static_n: 10,
                    auto_decided_n: 0,
                    static_build_id: Some(3),
                }],
                &dir,
            )
            .unwrap();
        assert_eq!((m.generation, m.static_n, m.merges, m.log_start), (1, 10, 0, 1));
        assert_eq!(m.static_build_id, Some(3));
        let merge = |g, seq| DbEdit::Merge {
            generation: g,
            static_kind: "zonemap".into(),
            static_n: 12,
            log_start: 4,
            merged_seq: seq,
            auto_decided_n: 12,
            static_build_id: Some(g),
        };
        let m = m.commit(&[merge(2, 9), merge(3, 5)], &dir).unwrap();
        assert_eq!((m.generation, m.last_seq, m.merges, m.log_start), (3, 9, 2, 4));
        assert_eq!(m.static_build_id, Some(3));
        assert_eq!(DbManifest::load(&dir).unwrap(), Some(m));
    }
}
