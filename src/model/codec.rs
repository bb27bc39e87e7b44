//! Shared framing of the models' byte encodings.
//!
//! Every encoding is `magic (u64) | version (u32) | body | crc32c (u32)`, all
//! little-endian; the checksum covers everything before it. Decoders check
//! length, checksum, magic and version before reading the body, and the body
//! readers are bounds-checked, so corrupt input is an error, never a panic.

use crate::format::bytes::Cursor;
use crate::{Error, Result};

/// Appends little-endian fields to a byte buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn new(magic: u64, version: u32) -> Self {
        let mut w = Writer { buf: Vec::new() };
        w.u64(magic);
        w.u32(version);
        w
    }
    #[cfg(test)]
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    pub(crate) fn reserve(&mut self, n: usize) {
        self.buf.reserve(n);
    }
    /// Appends the checksum and returns the encoding.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        let crc = crc32c::crc32c(&self.buf);
        self.u32(crc);
        self.buf
    }
}

/// Name used in errors about in-memory model encodings.
pub(crate) fn what(kind: &str) -> String {
    format!("<{kind} bytes>")
}

/// A corruption error for a model encoding.
pub(crate) fn corrupt(kind: &str, detail: impl Into<String>) -> Error {
    Error::corruption(what(kind), 0, detail)
}

/// Checks framing and returns a cursor over the body (without the checksum).
pub(crate) fn open<'a>(bytes: &'a [u8], kind: &'static str, magic: u64, version: u32) -> Result<Cursor<'a>> {
    const MIN: usize = 8 + 4 + 4;
    if bytes.len() < MIN {
        return Err(Error::Truncated {
            file: what(kind),
            expected: MIN as u64,
            found: bytes.len() as u64,
        });
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let stored = tail
        .try_into()
        .map(u32::from_le_bytes)
        .map_err(|_| corrupt(kind, "missing checksum"))?;
    let mut c = Cursor::new(body);
    let found = c.u64().ok_or_else(|| corrupt(kind, "missing magic"))?;
    if found != magic {
        return Err(Error::BadMagic {
            file: what(kind),
            expected: kind,
            found,
        });
    }
    if crc32c::crc32c(body) != stored {
        return Err(corrupt(kind, "checksum mismatch"));
    }
    let v = c.u32().ok_or_else(|| corrupt(kind, "missing version"))?;
    if v != version {
        return Err(Error::UnsupportedVersion {
            file: what(kind),
            found: v,
            supported: version,
        });
    }
    Ok(c)
}

/// Reads a field or fails with a truncation/corruption error naming it.
pub(crate) fn need<T>(v: Option<T>, kind: &str, field: &str) -> Result<T> {
    v.ok_or_else(|| corrupt(kind, format!("truncated at field {field}")))
}

/// Fails unless the cursor consumed the whole body.
pub(crate) fn expect_end(c: &Cursor<'_>, kind: &str) -> Result<()> {
    if c.remaining() == 0 {
        Ok(())
    } else {
        Err(corrupt(
            kind,
            format!("{} trailing bytes after the body", c.remaining()),
        ))
    }
}

/// A count read from the body, checked against the bytes left (each element
/// takes at least `elem_bytes`), so a corrupt count cannot trigger a huge
/// allocation.
pub(crate) fn count(c: &mut Cursor<'_>, kind: &str, field: &str, elem_bytes: usize) -> Result<usize> {
    let n = need(c.u64(), kind, field)?;
    let n = usize::try_from(n).map_err(|_| corrupt(kind, format!("{field} too large")))?;
    if n.checked_mul(elem_bytes).is_none_or(|b| b > c.remaining()) {
        return Err(corrupt(
            kind,
            format!("{field} = {n} exceeds the remaining {} bytes", c.remaining()),
        ));
    }
    Ok(n)
}
