//! The file layout of a table (`docs/format/sstable.md`): header, data
//! blocks, four checksummed sections (block handles, index, filter,
//! properties) and the footer that locates them. Little-endian throughout.

use crate::format::bytes::{Cursor, get_u32, get_u64};
use crate::{Error, Result};

/// Magic number: `STRATASS`.
pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"STRATASS");
/// Format version of table files.
pub(super) const VERSION: u32 = 1;
/// Bytes of the header: magic, version, flags.
pub(super) const HEADER_LEN: usize = 16;
/// Bytes of the footer.
pub(super) const FOOTER_LEN: usize = 96;
/// Sections, in file order.
pub(super) const SECTIONS: [&str; 4] = ["block handles", "index", "filter", "properties"];
/// Longest kind name in the properties.
const MAX_KIND_LEN: usize = 32;

/// The header (its region is reserved when the sink is created).
pub(super) fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC.to_le_bytes());
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h
}

fn check_magic_version(magic: u64, version: u32, file: &str) -> Result<()> {
    if magic != MAGIC {
        return Err(Error::BadMagic {
            file: file.to_string(),
            expected: "strata SSTable",
            found: magic,
        });
    }
    if version != VERSION {
        return Err(Error::UnsupportedVersion {
            file: file.to_string(),
            found: version,
            supported: VERSION,
        });
    }
    Ok(())
}

/// Checks the header bytes.
pub(super) fn check_header(h: &[u8], file: &str) -> Result<()> {
    let magic = get_u64(h, 0).unwrap_or(0);
    let version = get_u32(h, 8).unwrap_or(0);
    check_magic_version(magic, version, file)?;
    if get_u32(h, 12) != Some(0) {
        return Err(Error::corruption_at(file, 8, "header flags are not zero"));
    }
    Ok(())
}

/// A section's payload followed by its crc32c.
pub(super) fn seal(mut payload: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    payload
}

/// The footer: build id and the `(offset, payload length)` of each section
/// (each followed by its 4-byte crc32c), then the footer's own crc32c.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Footer {
    pub build_id: u64,
    pub sections: [(u64, u64); 4],
}

impl Footer {
    /// The footer bytes.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.build_id.to_le_bytes());
        for (off, len) in self.sections {
            out.extend_from_slice(&off.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out
    }

    /// Decodes the footer of a file of `file_len` bytes and checks that the
    /// sections follow each other from after the data to the footer.
    pub(super) fn decode(b: &[u8], file_len: u64, file: &str) -> Result<Footer> {
        let at = file_len.saturating_sub(FOOTER_LEN as u64);
        let bad = |what: &str| Error::corruption_at(file, at, format!("footer: {what}"));
        if b.len() != FOOTER_LEN {
            return Err(bad("short"));
        }
        let mut c = Cursor::new(b);
        let magic = c.u64().unwrap_or(0);
        let version = c.u32().unwrap_or(0);
        check_magic_version(magic, version, file)?;
        let crc_at = FOOTER_LEN - 8;
        let body = b.get(..crc_at).unwrap_or_default();
        if get_u32(b, crc_at) != Some(crc32c::crc32c(body)) {
            return Err(bad("checksum mismatch"));
        }
        let flags = c.u32().unwrap_or(1);
        let build_id = c.u64().ok_or_else(|| bad("short"))?;
        let mut sections = [(0u64, 0u64); 4];
        for s in &mut sections {
            *s = (
                c.u64().ok_or_else(|| bad("short"))?,
                c.u64().ok_or_else(|| bad("short"))?,
            );
        }
        if flags != 0 || get_u32(b, FOOTER_LEN - 4) != Some(0) {
            return Err(bad("reserved fields are not zero"));
        }
        let mut next = sections.first().map_or(0, |s| s.0);
        if next < HEADER_LEN as u64 {
            return Err(bad("sections start inside the header"));
        }
        for (i, &(off, len)) in sections.iter().enumerate() {
            let end = len.checked_add(4).and_then(|l| l.checked_add(off));
            match end {
                Some(end) if off == next && end <= at => next = end,
                _ => {
                    return Err(bad(&format!(
                        "the {} section is out of place",
                        SECTIONS.get(i).unwrap_or(&"")
                    )));
                }
            }
        }
        if next != at {
            return Err(bad("the sections do not end at the footer"));
        }
        Ok(Footer { build_id, sections })
    }
}

/// The payload of section `i` in `bytes`, the file's bytes from offset
/// `base` on (they must cover the section), its checksum checked.
pub(super) fn section<'a>(
    bytes: &'a [u8],
    base: u64,
    footer: &Footer,
    i: usize,
    file: &str,
) -> Result<&'a [u8]> {
    let (off, len) = footer.sections.get(i).copied().unwrap_or_default();
    let name = SECTIONS.get(i).copied().unwrap_or("unknown");
    let bad = || Error::corruption_at(file, off, format!("{name} section: checksum mismatch"));
    let start = off
        .checked_sub(base)
        .and_then(|s| usize::try_from(s).ok())
        .ok_or_else(bad)?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(start))
        .ok_or_else(bad)?;
    let payload = bytes.get(start..end).ok_or_else(bad)?;
    let crc = get_u32(bytes, end).ok_or_else(bad)?;
    if crc32c::crc32c(payload) != crc {
        return Err(bad());
    }
    Ok(payload)
}

/// The properties section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Props {
    pub entries: u64,
    pub data_bytes: u64,
    pub restart_interval: u32,
    pub boundary: u32,
    pub bloom_bits_per_key: u32,
    pub kind: String,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
}

impl Props {
    /// The payload.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.smallest.len() + self.largest.len());
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&self.data_bytes.to_le_bytes());
        out.extend_from_slice(&self.restart_interval.to_le_bytes());
        out.extend_from_slice(&self.boundary.to_le_bytes());
        out.extend_from_slice(&self.bloom_bits_per_key.to_le_bytes());
        for part in [self.kind.as_bytes(), &self.smallest, &self.largest] {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
            out.extend_from_slice(part);
        }
        out
    }

    /// Decodes and checks the payload.
    pub(super) fn decode(b: &[u8], file: &str) -> Result<Props> {
        let bad = |what: &str| Error::corruption_at(file, 0, format!("properties: {what}"));
        let mut c = Cursor::new(b);
        let entries = c.u64().ok_or_else(|| bad("truncated"))?;
        let data_bytes = c.u64().ok_or_else(|| bad("truncated"))?;
        let restart_interval = c.u32().ok_or_else(|| bad("truncated"))?;
        let boundary = c.u32().ok_or_else(|| bad("truncated"))?;
        let bloom_bits_per_key = c.u32().ok_or_else(|| bad("truncated"))?;
        let mut part = |max: usize| -> Result<Vec<u8>> {
            let len = c.u32().ok_or_else(|| bad("truncated"))? as usize;
            if len > max {
                return Err(bad("a field is too long"));
            }
            Ok(c.bytes(len).ok_or_else(|| bad("truncated"))?.to_vec())
        };
        let kind = String::from_utf8(part(MAX_KIND_LEN)?).map_err(|_| bad("kind is not UTF-8"))?;
        let max_key = crate::lsm::key::MAX_KEY_LEN + crate::lsm::key::TRAILER_LEN;
        let smallest = part(max_key)?;
        let largest = part(max_key)?;
        if c.remaining() != 0 || entries == 0 || entries > u64::from(u32::MAX) || restart_interval == 0 {
            return Err(bad("fields out of range"));
        }
        if crate::lsm::key::compare(&smallest, &largest) == std::cmp::Ordering::Greater {
            return Err(bad("smallest key is larger than the largest"));
        }
        Ok(Props {
            entries,
            data_bytes,
            restart_interval,
            boundary,
            bloom_bits_per_key,
            kind,
            smallest,
            largest,
        })
    }
}

/// Block handles: the first ordinal and byte offset of every data block,
/// and one more of each for the end (`entries`, the end of the data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Handles {
    pub firsts: Vec<u32>,
    pub offsets: Vec<u64>,
}

impl Handles {
    /// The payload: `u32 blocks | u32 first * (blocks + 1) | u64 offset * (blocks + 1)`.
    pub(super) fn encode(&self) -> Vec<u8> {
        let blocks = self.firsts.len().saturating_sub(1);
        let mut out = Vec::with_capacity(4 + 12 * self.firsts.len());
        out.extend_from_slice(&(blocks as u32).to_le_bytes());
        for f in &self.firsts {
            out.extend_from_slice(&f.to_le_bytes());
        }
        for o in &self.offsets {
            out.extend_from_slice(&o.to_le_bytes());
        }
        out
    }

    /// Decodes and checks the payload of a table of `entries` entries whose
    /// data blocks run from the header to `data_end`: ordinals and offsets
    /// strictly increasing (every block holds an entry and a trailer), from
    /// 0 and the header's end to `entries` and `data_end`.
    pub(super) fn decode(b: &[u8], entries: u64, data_end: u64, file: &str) -> Result<Handles> {
        let bad = || Error::corruption_at(file, data_end, "block handles out of order or outside the file");
        let mut c = Cursor::new(b);
        let blocks = c.u32().ok_or_else(bad)? as usize;
        if c.remaining()
            != blocks
                .checked_add(1)
                .and_then(|n| n.checked_mul(12))
                .ok_or_else(bad)?
        {
            return Err(bad());
        }
        let firsts: Vec<u32> = (0..=blocks).filter_map(|_| c.u32()).collect();
        let offsets: Vec<u64> = (0..=blocks).filter_map(|_| c.u64()).collect();
        let increasing = firsts.windows(2).all(|w| matches!(w, [a, b] if a < b))
            && offsets
                .windows(2)
                .all(|w| matches!(w, [a, b] if a.checked_add(super::block::TRAILER as u64).is_some_and(|x| x <= *b)));
        let ends = firsts.first() == Some(&0)
            && firsts.last().map(|&l| u64::from(l)) == Some(entries)
            && offsets.first() == Some(&(HEADER_LEN as u64))
            && offsets.last() == Some(&data_end);
        if blocks == 0 || !increasing || !ends {
            return Err(bad());
        }
        Ok(Handles { firsts, offsets })
    }

    /// Number of blocks.
    pub(super) fn blocks(&self) -> usize {
        self.firsts.len().saturating_sub(1)
    }

    /// The block holding ordinal `o` (`o < entries`).
    pub(super) fn block_of(&self, o: u64) -> usize {
        self.firsts
            .partition_point(|&f| u64::from(f) <= o)
            .saturating_sub(1)
    }

    /// First ordinal of block `b` (`entries` past the last).
    pub(super) fn first(&self, b: usize) -> u64 {
        self.firsts.get(b).map_or(0, |&f| u64::from(f))
    }

    /// Byte offset of block `b` (the end of the data past the last).
    pub(super) fn offset(&self, b: usize) -> u64 {
        self.offsets.get(b).copied().unwrap_or(0)
    }

    /// Resident bytes.
    pub(super) fn memory_bytes(&self) -> u64 {
        (4 * self.firsts.len() + 8 * self.offsets.len()) as u64
    }
}

/// Writes the crc32c of `b[start..end]` at `end` (nothing out of range).
#[cfg(any(fuzzing, test))]
fn put_crc(b: &mut [u8], start: u64, end: u64) {
    let (Ok(s), Ok(e)) = (usize::try_from(start), usize::try_from(end)) else {
        return;
    };
    if let Some(crc) = b.get(s..e).map(crc32c::crc32c) {
        crate::format::bytes::put_u32(b, e, crc);
    }
}

/// Recomputes every checksum of a table image in place, as far as its own
/// offsets locate them: each data block's (from the block handles), each
/// section's, the footer's. Lets a fuzzer's mutations reach the decoders
/// behind the checksums.
#[cfg(any(fuzzing, test))]
pub(crate) fn reseal(b: &mut [u8]) {
    let Some(f) = b.len().checked_sub(FOOTER_LEN).filter(|&f| f >= HEADER_LEN) else {
        return;
    };
    let sections: Vec<(u64, u64)> = (0..4)
        .map(|i| {
            (
                get_u64(b, f + 24 + 16 * i).unwrap_or(0),
                get_u64(b, f + 32 + 16 * i).unwrap_or(0),
            )
        })
        .collect();
    if let Some(&(h, _)) = sections.first() {
        let blocks = usize::try_from(h)
            .ok()
            .and_then(|h| get_u32(b, h))
            .map_or(0, |n| (n as usize).min(b.len() / 8));
        let offsets_at = h.saturating_add(4 + 4 * (blocks as u64 + 1));
        let offsets: Vec<u64> = (0..=blocks as u64)
            .map_while(|i| {
                usize::try_from(offsets_at.saturating_add(8 * i))
                    .ok()
                    .and_then(|at| get_u64(b, at))
            })
            .collect();
        for w in offsets.windows(2) {
            if let [start, end] = *w {
                if let Some(crc_at) = end.checked_sub(4).filter(|&c| start <= c && end <= f as u64) {
                    put_crc(b, start, crc_at);
                }
            }
        }
    }
    for (off, len) in sections {
        if let Some(end) = off.checked_add(len).filter(|&e| e.saturating_add(4) <= f as u64) {
            put_crc(b, off, end);
        }
    }
    put_crc(b, f as u64, (f + FOOTER_LEN - 8) as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trips_and_checks_placement() {
        let f = Footer {
            build_id: 7,
            sections: [(100, 10), (114, 20), (138, 0), (142, 30)],
        };
        let b = f.encode();
        assert_eq!(b.len(), FOOTER_LEN);
        let len = 176 + FOOTER_LEN as u64;
        assert_eq!(Footer::decode(&b, len, "t").unwrap(), f);
        assert!(Footer::decode(&b, len + 1, "t").is_err());
        for i in 0..FOOTER_LEN {
            let mut c = b.clone();
            c[i] ^= 4;
            assert!(Footer::decode(&c, len, "t").is_err(), "flip at {i}");
        }
    }

    #[test]
    fn handles_and_props_round_trip() {
        let h = Handles {
            firsts: vec![0, 5, 9],
            offsets: vec![16, 100, 180],
        };
        assert_eq!(Handles::decode(&h.encode(), 9, 180, "t").unwrap(), h);
        assert!(Handles::decode(&h.encode(), 10, 180, "t").is_err());
        assert_eq!(h.block_of(0), 0);
        assert_eq!(h.block_of(4), 0);
        assert_eq!(h.block_of(5), 1);
        assert_eq!(h.block_of(8), 1);
        let p = Props {
            entries: 9,
            data_bytes: 99,
            restart_interval: 16,
            boundary: 16,
            bloom_bits_per_key: 10,
            kind: "pgm".into(),
            smallest: b"a\0\0\0\0\0\0\x01\x01".to_vec(),
            largest: b"b\0\0\0\0\0\0\x01\x01".to_vec(),
        };
        assert_eq!(Props::decode(&p.encode(), "t").unwrap(), p);
        let swapped = Props {
            smallest: p.largest.clone(),
            largest: p.smallest.clone(),
            ..p
        };
        assert!(Props::decode(&swapped.encode(), "t").is_err());
    }
}
