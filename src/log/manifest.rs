//! Manifests: one small checksummed file that says which files make up a
//! store's current state, replaced atomically, and changed by *edits*.
//!
//! A manifest file is a 20-byte header and a JSON payload, all integers
//! little-endian:
//!
//! ```text
//! +---------+---------+--------+--------+-----------------------+
//! | magic   | version | length | crc    | payload (JSON)        |
//! |  u64    |  u32    |  u32   |  u32   | length bytes          |
//! +---------+---------+--------+--------+-----------------------+
//! ```
//! `crc` is the crc32c of the payload; the file is exactly `20 + length`
//! bytes. It is published atomically ([`store`]): written under a temporary
//! name, synced, renamed over the manifest, and the directory synced. The
//! rename is the commit point of whatever the new manifest describes.
//!
//! The owner of a manifest describes each change as an edit
//! ([`Manifest::apply`]); [`commit`] applies edits to a copy of the current
//! manifest and publishes the result. The db's manifest records its full
//! state (each edit rewrites a few fields); an LSM's set of tables per level
//! is the next user.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::format::bytes::{get_u32, get_u64};
use crate::storage::Directory;
use crate::{Error, Result};

/// Header: magic u64, version u32, payload length u32, payload crc32c u32.
const HEADER_LEN: usize = 20;
/// A manifest longer than this is damage, not a manifest.
const MAX_LEN: usize = 1 << 24;

/// A manifest type: its file names, magic and version, and its edits.
pub trait Manifest: Clone + Serialize + DeserializeOwned {
    /// A change to the manifest, applied by [`apply`](Manifest::apply).
    type Edit;
    /// File name of the manifest.
    const FILE: &'static str;
    /// Temporary name it is written under before the rename.
    const TMP: &'static str;
    /// Magic number at the start of the file.
    const MAGIC: u64;
    /// Format version this code writes (and the newest it reads).
    const VERSION: u32;
    /// The oldest format version this code still reads (default: only
    /// [`VERSION`](Manifest::VERSION)).
    const MIN_VERSION: u32 = Self::VERSION;
    /// What the manifest is called in error messages (e.g. `db manifest`).
    const WHAT: &'static str;
    /// What its magic is called in [`Error::BadMagic`] (e.g. `strata db manifest`).
    const MAGIC_NAME: &'static str;

    /// Applies one edit (in memory).
    fn apply(&mut self, edit: &Self::Edit) -> Result<()>;
}

/// The bytes of the manifest file of `m`.
pub fn encode<M: Manifest>(m: &M) -> Result<Vec<u8>> {
    let payload =
        serde_json::to_vec_pretty(m).map_err(|e| Error::invalid(format!("{} encoding: {e}", M::WHAT)))?;
    let len = u32::try_from(payload.len()).map_err(|_| Error::invalid(format!("{} too large", M::WHAT)))?;
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&M::MAGIC.to_le_bytes());
    out.extend_from_slice(&M::VERSION.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// Parses and checks the bytes of a manifest file named `file`: a wrong magic
/// is [`Error::BadMagic`], another version [`Error::UnsupportedVersion`], a
/// short or long file [`Error::Truncated`], a checksum or field mismatch
/// [`Error::Corruption`].
pub fn decode<M: Manifest>(bytes: &[u8], file: &str) -> Result<M> {
    let truncated = || Error::Truncated {
        file: file.to_string(),
        expected: HEADER_LEN as u64,
        found: bytes.len() as u64,
    };
    let magic = get_u64(bytes, 0).ok_or_else(truncated)?;
    if magic != M::MAGIC {
        return Err(Error::BadMagic {
            file: file.to_string(),
            expected: M::MAGIC_NAME,
            found: magic,
        });
    }
    let (Some(version), Some(len), Some(crc)) = (get_u32(bytes, 8), get_u32(bytes, 12), get_u32(bytes, 16))
    else {
        return Err(truncated());
    };
    if !(M::MIN_VERSION..=M::VERSION).contains(&version) {
        return Err(Error::UnsupportedVersion {
            file: file.to_string(),
            found: version,
            supported: M::VERSION,
        });
    }
    let expected = HEADER_LEN as u64 + u64::from(len);
    let payload = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(HEADER_LEN))
        .and_then(|end| bytes.get(HEADER_LEN..end))
        .filter(|_| bytes.len() as u64 == expected)
        .ok_or_else(|| Error::Truncated {
            file: file.to_string(),
            expected,
            found: bytes.len() as u64,
        })?;
    if crc32c::crc32c(payload) != crc {
        return Err(Error::corruption(
            file,
            0,
            format!("{} fails its checksum", M::WHAT),
        ));
    }
    serde_json::from_slice(payload)
        .map_err(|e| Error::corruption(file, 0, format!("{} fields: {e}", M::WHAT)))
}

/// Publishes `m` atomically in `dir` through [`Directory::publish`]: locally
/// a temporary file (`M::TMP`, which must be `M::FILE` + `.tmp`), synced,
/// renamed over the manifest, then the directory synced. On return it
/// survives a crash; after a crash before the rename the old manifest is
/// current.
pub fn store<M: Manifest>(m: &M, dir: &dyn Directory) -> Result<()> {
    let bytes = encode(m)?;
    if M::TMP.strip_suffix(".tmp") != Some(M::FILE) {
        return Err(Error::invalid(format!(
            "{}: temporary name {} is not {}.tmp",
            M::WHAT,
            M::TMP,
            M::FILE
        )));
    }
    dir.publish(M::FILE, &bytes)
}

/// Reads and checks the manifest of `dir`; `None` if there is none.
pub fn load<M: Manifest>(dir: &dyn Directory) -> Result<Option<M>> {
    if !dir.exists(M::FILE) {
        return Ok(None);
    }
    let f = dir.open(M::FILE)?;
    let file = format!("{}/{}", dir.describe(), M::FILE);
    let len = usize::try_from(f.len()?).map_err(|_| Error::invalid(format!("{} too large", M::WHAT)))?;
    if len > MAX_LEN {
        return Err(Error::corruption(
            file,
            0,
            format!("{} of {len} bytes is implausibly large", M::WHAT),
        ));
    }
    let mut buf = vec![0u8; len];
    f.read_at(0, &mut buf)?;
    decode(&buf, &file).map(Some)
}

/// Applies `edits` in order to a copy of `current`, publishes the result
/// ([`store`]) and returns it. On an error `current` is still the manifest
/// on disk, unless the error came from the final directory sync.
pub fn commit<M: Manifest>(current: &M, edits: &[M::Edit], dir: &dyn Directory) -> Result<M> {
    let mut next = current.clone();
    for e in edits {
        next.apply(e)?;
    }
    store(&next, dir)?;
    Ok(next)
}
