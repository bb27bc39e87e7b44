//! Little-endian field access on byte slices, without panics.
//!
//! Getters return `None` when the field would pass the end of the slice;
//! putters do nothing in that case (callers size their buffers first).

/// Reads a `u16` at `off`.
pub(crate) fn get_u16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(off..off.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// Reads a `u32` at `off`.
pub(crate) fn get_u32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Reads a `u64` at `off`.
pub(crate) fn get_u64(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(off..off.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Writes a `u16` at `off`.
pub(crate) fn put_u16(b: &mut [u8], off: usize, v: u16) {
    if let Some(d) = off.checked_add(2).and_then(|e| b.get_mut(off..e)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// Writes a `u32` at `off`.
pub(crate) fn put_u32(b: &mut [u8], off: usize, v: u32) {
    if let Some(d) = off.checked_add(4).and_then(|e| b.get_mut(off..e)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// Writes a `u64` at `off`.
pub(crate) fn put_u64(b: &mut [u8], off: usize, v: u64) {
    if let Some(d) = off.checked_add(8).and_then(|e| b.get_mut(off..e)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// A bounds-checked reader over a byte slice.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    /// Bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    /// Next `u16`.
    pub(crate) fn u16(&mut self) -> Option<u16> {
        let v = get_u16(self.buf, self.pos)?;
        self.pos += 2;
        Some(v)
    }
    /// Next `u32`.
    pub(crate) fn u32(&mut self) -> Option<u32> {
        let v = get_u32(self.buf, self.pos)?;
        self.pos += 4;
        Some(v)
    }
    /// Next `u64`.
    pub(crate) fn u64(&mut self) -> Option<u64> {
        let v = get_u64(self.buf, self.pos)?;
        self.pos += 8;
        Some(v)
    }
    /// Next `f64`.
    pub(crate) fn f64(&mut self) -> Option<f64> {
        self.u64().map(f64::from_bits)
    }
    /// Next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let v = self.buf.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_bounds() {
        let mut b = [0u8; 16];
        put_u64(&mut b, 0, 0x0102030405060708);
        put_u32(&mut b, 8, 0xAABBCCDD);
        put_u16(&mut b, 12, 0x1234);
        assert_eq!(b[0], 0x08, "little-endian");
        assert_eq!(get_u64(&b, 0), Some(0x0102030405060708));
        assert_eq!(get_u32(&b, 8), Some(0xAABBCCDD));
        assert_eq!(get_u16(&b, 12), Some(0x1234));
        assert_eq!(get_u64(&b, 9), None);
        assert_eq!(get_u64(&b, usize::MAX), None);
        put_u64(&mut b, 12, 1); // out of range: ignored
        let mut c = Cursor::new(&b);
        assert_eq!(c.u64(), Some(0x0102030405060708));
        assert_eq!(c.u32(), Some(0xAABBCCDD));
        assert_eq!(c.remaining(), 4);
        assert_eq!(c.u64(), None);
    }
}
