//! Data blocks (LevelDB's format, with the checksum inside the block):
//!
//! ```text
//! entry*  : shared varint | unshared varint | value_len varint | key suffix | value
//! restart : u32 offset of every restart_interval-th entry (the first is 0)
//! count   : u32 number of restarts
//! crc     : u32 crc32c of everything before it
//! ```
//!
//! Keys are prefix-compressed against the previous entry's key, except at
//! restart points (`shared = 0`), where a search may start.

use std::ops::Range;

use crate::format::bytes::get_u32;
use crate::{Error, Result};

/// Bytes after the restart array: its count and the checksum.
pub(super) const TRAILER: usize = 8;

/// Appends `v` as a LEB128 varint.
pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a LEB128 varint at `*pos` (at most 10 bytes), advancing `*pos`.
pub(super) fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Builds one data block.
#[derive(Debug)]
pub(super) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: u64,
}

impl BlockBuilder {
    /// An empty block with a restart point every `interval` entries.
    pub(super) fn new(interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            interval: interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry (keys in order; the caller checks).
    pub(super) fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.entries == 0 || self.since_restart == self.interval {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        } else {
            common_prefix(&self.last_key, key)
        };
        let suffix = key.get(shared..).unwrap_or_default();
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, suffix.len() as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(suffix);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(suffix);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Entries added since the last [`finish`](Self::finish).
    pub(super) fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes the block would take if finished now.
    pub(super) fn size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + TRAILER
    }

    /// The finished block's bytes; the builder is empty again.
    pub(super) fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        self.restarts.clear();
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
        out
    }
}

/// The checked layout of one data block (its bytes are passed to each call;
/// entry offsets are relative to the block's start).
#[derive(Debug, Clone, Copy)]
pub(super) struct BlockView {
    /// End of the entries (start of the restart array).
    data_end: usize,
    restarts: usize,
}

impl BlockView {
    /// A view of nothing (cache accounting tests).
    #[cfg(test)]
    pub(super) fn for_tests() -> BlockView {
        BlockView {
            data_end: 0,
            restarts: 0,
        }
    }

    /// Checks a block's checksum and restart array; `entries` is the count
    /// the block handles give it, `interval` the table's restart interval.
    /// `file`/`offset` name the block in errors.
    pub(super) fn parse(
        bytes: &[u8],
        entries: u64,
        interval: usize,
        file: &str,
        offset: u64,
    ) -> Result<Self> {
        let bad = |what: String| Error::corruption_at(file, offset, format!("data block: {what}"));
        let body_len = bytes
            .len()
            .checked_sub(4)
            .ok_or_else(|| bad(format!("{} bytes is too short", bytes.len())))?;
        let body = bytes.get(..body_len).unwrap_or_default();
        let stored = get_u32(bytes, body_len).unwrap_or(0);
        if crc32c::crc32c(body) != stored {
            return Err(bad("checksum mismatch".into()));
        }
        let count = body_len
            .checked_sub(4)
            .and_then(|at| get_u32(bytes, at))
            .ok_or_else(|| bad("no restart count".into()))? as usize;
        let data_end = count
            .checked_mul(4)
            .and_then(|r| bytes.len().checked_sub(r + TRAILER))
            .ok_or_else(|| bad(format!("{count} restarts do not fit")))?;
        let want = entries.div_ceil(interval.max(1) as u64);
        if count as u64 != want {
            return Err(bad(format!(
                "{count} restarts for {entries} entries (want {want})"
            )));
        }
        let view = BlockView {
            data_end,
            restarts: count,
        };
        let mut prev = None;
        for i in 0..count {
            let r = view
                .restart(bytes, i)
                .ok_or_else(|| bad("restart array".into()))?;
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < data_end,
            };
            if !ok {
                return Err(bad(format!("restart {i} at {r} is out of order")));
            }
            prev = Some(r);
        }
        Ok(view)
    }

    /// Offset of restart point `i`.
    pub(super) fn restart(&self, bytes: &[u8], i: usize) -> Option<usize> {
        let at = self.data_end.checked_add(i.checked_mul(4)?)?;
        if i >= self.restarts {
            return None;
        }
        get_u32(bytes, at).map(|r| r as usize)
    }

    /// Decodes the entry at `off`: `key` holds the previous entry's key (or
    /// anything at a restart point) and becomes this entry's key. Returns the
    /// next entry's offset and the value's byte range in the block; `None`
    /// if the entry is malformed.
    pub(super) fn decode(
        &self,
        bytes: &[u8],
        off: usize,
        key: &mut Vec<u8>,
    ) -> Option<(usize, Range<usize>)> {
        let data = bytes.get(..self.data_end)?;
        let mut pos = off;
        let shared = usize::try_from(get_varint(data, &mut pos)?).ok()?;
        let unshared = usize::try_from(get_varint(data, &mut pos)?).ok()?;
        let value_len = usize::try_from(get_varint(data, &mut pos)?).ok()?;
        if shared > key.len() {
            return None;
        }
        let suffix = data.get(pos..pos.checked_add(unshared)?)?;
        let value_start = pos + unshared;
        let value_end = value_start.checked_add(value_len)?;
        if value_end > self.data_end {
            return None;
        }
        key.truncate(shared);
        key.extend_from_slice(suffix);
        Some((value_end, value_start..value_end))
    }

    /// End of the entries.
    pub(super) fn data_end(&self) -> usize {
        self.data_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overlong() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut pos = 0;
            assert_eq!(get_varint(&b, &mut pos), Some(v));
            assert_eq!(pos, b.len());
        }
        let mut pos = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut pos), None);
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80], &mut pos), None);
    }

    #[test]
    fn block_round_trips_with_restarts() {
        let mut b = BlockBuilder::new(3);
        let keys: Vec<Vec<u8>> = (0..10u32)
            .map(|i| format!("key{:03}", i * 7).into_bytes())
            .collect();
        for (i, k) in keys.iter().enumerate() {
            b.add(k, &vec![i as u8; i]);
        }
        assert_eq!(b.entries(), 10);
        let size = b.size();
        let bytes = b.finish();
        assert_eq!(bytes.len(), size);
        let v = BlockView::parse(&bytes, 10, 3, "t", 0).unwrap();
        let mut key = Vec::new();
        let mut off = 0;
        for (i, k) in keys.iter().enumerate() {
            let (next, val) = v.decode(&bytes, off, &mut key).unwrap();
            assert_eq!(&key, k);
            assert_eq!(&bytes[val], &vec![i as u8; i][..]);
            off = next;
        }
        assert_eq!(off, v.data_end());
        // From restart 2 (entry 6) with no previous key.
        let mut key = Vec::new();
        v.decode(&bytes, v.restart(&bytes, 2).unwrap(), &mut key).unwrap();
        assert_eq!(key, keys[6]);
        assert!(
            BlockView::parse(&bytes, 9, 3, "t", 0).is_err(),
            "wrong entry count"
        );
        for i in 0..bytes.len() {
            let mut c = bytes.clone();
            c[i] ^= 1;
            assert!(BlockView::parse(&c, 10, 3, "t", 0).is_err(), "flip at {i}");
        }
    }
}
