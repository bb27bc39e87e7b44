//! Where a join's output goes: a count with a checksum, or a file of the
//! matched triples (`docs/format/join-pairs.md`).

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Receives the output of a join, one `(key, outer payload, inner payload)`
/// at a time, in any order.
pub trait JoinSink: Send {
    /// One output record.
    fn emit(&mut self, key: u64, outer: u64, inner: u64) -> Result<()>;
    /// Records emitted so far.
    fn count(&self) -> u64;
    /// Order-independent checksum of the records emitted so far
    /// ([`checksum_of`]).
    fn checksum(&self) -> u64;
}

/// SplitMix64's finaliser: a bijective mix of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The checksum of one output record; a join's checksum is the wrapping sum
/// of its records' (so it does not depend on their order, and repeats
/// count).
pub fn checksum_of(key: u64, outer: u64, inner: u64) -> u64 {
    mix(key ^ mix(outer.wrapping_add(0x9e37_79b9_7f4a_7c15) ^ mix(inner)))
}

/// Counts the output and sums its checksum; stores nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountSink {
    count: u64,
    sum: u64,
}

impl CountSink {
    /// An empty sink.
    pub fn new() -> Self {
        CountSink::default()
    }
}

impl JoinSink for CountSink {
    fn emit(&mut self, key: u64, outer: u64, inner: u64) -> Result<()> {
        self.count += 1;
        self.sum = self.sum.wrapping_add(checksum_of(key, outer, inner));
        Ok(())
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn checksum(&self) -> u64 {
        self.sum
    }
}

/// Magic number of a pairs file.
pub const PAIRS_MAGIC: [u8; 8] = *b"STRJOIN\0";
/// Format version of a pairs file.
pub const PAIRS_VERSION: u32 = 1;
/// Bytes of a pairs file's header.
pub const PAIRS_HEADER: u64 = 40;

/// The output as a file of triples (`docs/format/join-pairs.md`), written to
/// a temporary name next to its path and renamed into place, synced, by
/// [`PairFile::finish`]; dropped unfinished, the temporary file is removed
/// and nothing is left at the path.
#[derive(Debug)]
pub struct PairFile {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
    build_id: u64,
    count: u64,
    sum: u64,
}

impl PairFile {
    /// Starts the file `path` (which must not exist).
    pub fn create(path: &Path) -> Result<PairFile> {
        if path.exists() {
            return Err(Error::invalid(format!(
                "{} exists; the join writes a new file",
                path.display()
            )));
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "pairs".into());
        let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        let f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let mut out = BufWriter::with_capacity(super::SPILL_BUFFER, f);
        let build_id = crate::index::new_build_id();
        out.write_all(&header(build_id, 0, 0))
            .map_err(|e| Error::io(&tmp, e))?;
        Ok(PairFile {
            path: path.to_path_buf(),
            tmp,
            out: Some(out),
            build_id,
            count: 0,
            sum: 0,
        })
    }

    /// Writes the count and checksum into the header, syncs and renames the
    /// file into place.
    pub fn finish(mut self) -> Result<()> {
        let out = self
            .out
            .take()
            .ok_or_else(|| Error::invalid("pairs file finished twice"))?;
        let mut f = out
            .into_inner()
            .map_err(|e| Error::io(&self.tmp, e.into_error()))?;
        f.seek(SeekFrom::Start(0)).map_err(|e| Error::io(&self.tmp, e))?;
        f.write_all(&header(self.build_id, self.count, self.sum))
            .map_err(|e| Error::io(&self.tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&self.tmp, e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| Error::io(dir, e))?;
        }
        Ok(())
    }
}

fn header(build_id: u64, count: u64, sum: u64) -> [u8; PAIRS_HEADER as usize] {
    let mut h = [0u8; PAIRS_HEADER as usize];
    h[0..8].copy_from_slice(&PAIRS_MAGIC);
    h[8..12].copy_from_slice(&PAIRS_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&build_id.to_le_bytes());
    h[24..32].copy_from_slice(&count.to_le_bytes());
    h[32..40].copy_from_slice(&sum.to_le_bytes());
    h
}

impl JoinSink for PairFile {
    fn emit(&mut self, key: u64, outer: u64, inner: u64) -> Result<()> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| Error::invalid("pairs file finished"))?;
        let mut rec = [0u8; 24];
        rec[0..8].copy_from_slice(&key.to_le_bytes());
        rec[8..16].copy_from_slice(&outer.to_le_bytes());
        rec[16..24].copy_from_slice(&inner.to_le_bytes());
        out.write_all(&rec).map_err(|e| Error::io(&self.tmp, e))?;
        self.count += 1;
        self.sum = self.sum.wrapping_add(checksum_of(key, outer, inner));
        Ok(())
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn checksum(&self) -> u64 {
        self.sum
    }
}

impl Drop for PairFile {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Reads a pairs file back: its triples, after checking the magic number,
/// version, size, count and checksum.
pub fn read_pairs(path: &Path) -> Result<Vec<(u64, u64, u64)>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let name = path.display().to_string();
    let h = bytes
        .get(..PAIRS_HEADER as usize)
        .ok_or_else(|| Error::Truncated {
            file: name.clone(),
            expected: PAIRS_HEADER,
            found: bytes.len() as u64,
        })?;
    let u64_at = |b: &[u8], at: usize| {
        b.get(at..at + 8)
            .and_then(|s| s.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    if h.get(0..8) != Some(&PAIRS_MAGIC[..]) {
        return Err(Error::BadMagic {
            file: name,
            expected: "a join pairs file",
            found: u64_at(h, 0),
        });
    }
    let version = h
        .get(8..12)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes);
    if version != PAIRS_VERSION {
        return Err(Error::UnsupportedVersion {
            file: name,
            found: version,
            supported: PAIRS_VERSION,
        });
    }
    let (count, sum) = (u64_at(h, 24), u64_at(h, 32));
    let body = bytes.get(PAIRS_HEADER as usize..).unwrap_or_default();
    if body.len() as u64 != count.saturating_mul(24) {
        return Err(Error::corruption(
            name,
            0,
            format!(
                "header says {count} triples, the file holds {} bytes of them",
                body.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(body.len() / 24);
    let mut check = 0u64;
    for r in body.chunks_exact(24) {
        let t = (u64_at(r, 0), u64_at(r, 8), u64_at(r, 16));
        check = check.wrapping_add(checksum_of(t.0, t.1, t.2));
        out.push(t);
    }
    if check != sum {
        return Err(Error::corruption(
            name,
            0,
            "the triples do not match the header's checksum",
        ));
    }
    Ok(out)
}
