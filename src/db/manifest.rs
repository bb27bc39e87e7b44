//! The store's manifest, `strata-db.manifest`: which static generation is
//! current and where the write-ahead log starts. Written atomically
//! (temporary file, sync, rename, directory sync); checksummed.

use serde::{Deserialize, Serialize};

use crate::format::bytes::{get_u32, get_u64};
use crate::storage::Directory;
use crate::{Error, Result};

/// File name of the manifest.
pub const DB_MANIFEST_FILE: &str = "strata-db.manifest";
/// Temporary name the manifest is written under before its rename.
pub const DB_MANIFEST_TMP: &str = "strata-db.manifest.tmp";
/// Magic number at the start of the manifest: `STRATADB`.
pub const DB_MANIFEST_MAGIC: u64 = u64::from_le_bytes(*b"STRATADB");
/// Format version of the manifest.
pub const DB_MANIFEST_VERSION: u32 = 1;
/// Header: magic u64, version u32, payload length u32, payload crc32c u32.
const HEADER_LEN: usize = 20;

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
}

impl DbManifest {
    /// The manifest of a new, empty store.
    pub fn empty(page_size: usize) -> Self {
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
        }
    }

    /// The bytes of the manifest file.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let payload = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::invalid(format!("db manifest encoding: {e}")))?;
        let len = u32::try_from(payload.len()).map_err(|_| Error::invalid("db manifest too large"))?;
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
        out.extend_from_slice(&DB_MANIFEST_MAGIC.to_le_bytes());
        out.extend_from_slice(&DB_MANIFEST_VERSION.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// Parses and checks the bytes of a manifest file named `file`.
    pub fn decode(bytes: &[u8], file: &str) -> Result<Self> {
        let magic = get_u64(bytes, 0).ok_or_else(|| Error::Truncated {
            file: file.to_string(),
            expected: HEADER_LEN as u64,
            found: bytes.len() as u64,
        })?;
        if magic != DB_MANIFEST_MAGIC {
            return Err(Error::BadMagic {
                file: file.to_string(),
                expected: "strata db manifest",
                found: magic,
            });
        }
        let (Some(version), Some(len), Some(crc)) =
            (get_u32(bytes, 8), get_u32(bytes, 12), get_u32(bytes, 16))
        else {
            return Err(Error::Truncated {
                file: file.to_string(),
                expected: HEADER_LEN as u64,
                found: bytes.len() as u64,
            });
        };
        if version != DB_MANIFEST_VERSION {
            return Err(Error::UnsupportedVersion {
                file: file.to_string(),
                found: version,
                supported: DB_MANIFEST_VERSION,
            });
        }
        let expected = HEADER_LEN as u64 + len as u64;
        let payload = bytes
            .get(HEADER_LEN..HEADER_LEN + len as usize)
            .filter(|_| bytes.len() as u64 == expected)
            .ok_or_else(|| Error::Truncated {
                file: file.to_string(),
                expected,
                found: bytes.len() as u64,
            })?;
        if crc32c::crc32c(payload) != crc {
            return Err(Error::corruption(file, 0, "db manifest fails its checksum"));
        }
        serde_json::from_slice(payload)
            .map_err(|e| Error::corruption(file, 0, format!("db manifest fields: {e}")))
    }

    /// Writes the manifest atomically into `dir`: a temporary file, synced,
    /// renamed over the manifest, then the directory synced.
    pub fn store(&self, dir: &dyn Directory) -> Result<()> {
        let bytes = self.encode()?;
        let f = dir.create(DB_MANIFEST_TMP)?;
        f.write_at(0, &bytes)?;
        f.sync()?;
        dir.rename(DB_MANIFEST_TMP, DB_MANIFEST_FILE)?;
        dir.sync_dir()
    }

    /// Reads and checks the manifest of `dir`; `None` if there is none.
    pub fn load(dir: &dyn Directory) -> Result<Option<Self>> {
        if !dir.exists(DB_MANIFEST_FILE) {
            return Ok(None);
        }
        let f = dir.open(DB_MANIFEST_FILE)?;
        let len = usize::try_from(f.len()?).map_err(|_| Error::invalid("db manifest too large"))?;
        if len > 1 << 24 {
            return Err(Error::corruption(
                format!("{}/{DB_MANIFEST_FILE}", dir.describe()),
                0,
                format!("db manifest of {len} bytes is implausibly large"),
            ));
        }
        let mut buf = vec![0u8; len];
        f.read_at(0, &mut buf)?;
        Self::decode(&buf, &format!("{}/{DB_MANIFEST_FILE}", dir.describe())).map(Some)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
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
}
