//! Fixed-width bit packing in a `Vec<u64>`.
//!
//! A value of width `b` (0..=64 bits) at bit offset `off` occupies bits
//! `off..off + b` of the word array, least significant bit first (bit `k` of
//! the array is bit `k % 64` of word `k / 64`). Width 0 stores nothing and
//! reads as 0. Nothing here panics: widths above 64 are treated as 64, bits
//! past the end of the array read as 0, and writes grow the array.

/// Number of bits needed to represent `v` (0 for `v == 0`, 64 for `v >= 2^63`).
#[inline]
pub(crate) fn bits_needed(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// The mask of the low `width` bits (`width` clamped to 64).
#[inline]
pub(crate) fn low_mask(width: u32) -> u64 {
    if width == 0 {
        0
    } else {
        u64::MAX >> (64 - width.min(64))
    }
}

/// Reads the `width`-bit value at bit offset `off`. O(1).
///
/// Bits beyond the end of `words` read as 0; `width` is clamped to 64.
#[inline]
pub(crate) fn read_bits(words: &[u64], off: u64, width: u32) -> u64 {
    if width == 0 {
        return 0;
    }
    let width = width.min(64);
    let Ok(w) = usize::try_from(off >> 6) else {
        return 0;
    };
    let s = (off & 63) as u32;
    let first = words.get(w).copied().unwrap_or(0) >> s;
    let v = if s + width > 64 {
        // s > 0 here, so the shift amount 64 - s is in 1..=63.
        let second = words.get(w + 1).copied().unwrap_or(0);
        first | (second << (64 - s))
    } else {
        first
    };
    v & low_mask(width)
}

/// Writes the low `width` bits of `value` at bit offset `off`, growing `words`
/// with zero words as needed. Other bits are left unchanged. O(1) amortised.
///
/// Offsets whose word index does not fit in `usize` are ignored.
#[cfg(test)]
pub(crate) fn write_bits(words: &mut Vec<u64>, off: u64, width: u32, value: u64) {
    if width == 0 {
        return;
    }
    let width = width.min(64);
    let Ok(w) = usize::try_from(off >> 6) else {
        return;
    };
    let s = (off & 63) as u32;
    let need = if s + width > 64 { w + 2 } else { w + 1 };
    if words.len() < need {
        words.resize(need, 0);
    }
    let mask = low_mask(width);
    let value = value & mask;
    if let Some(x) = words.get_mut(w) {
        *x = (*x & !(mask << s)) | (value << s);
    }
    if s + width > 64 {
        let spill = 64 - s; // bits already written into word w, in 1..=63
        let rest_mask = mask >> spill;
        if let Some(x) = words.get_mut(w + 1) {
            *x = (*x & !rest_mask) | (value >> spill);
        }
    }
}

/// Appends fixed-width values to a word array, one after another.
#[derive(Debug, Clone, Default)]
pub(crate) struct BitWriter {
    words: Vec<u64>,
    bits: u64,
}

impl BitWriter {
    /// An empty writer.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// An empty writer with room for `bits` bits.
    pub(crate) fn with_capacity(bits: u64) -> Self {
        let words = usize::try_from(bits.div_ceil(64)).unwrap_or(0);
        BitWriter {
            words: Vec::with_capacity(words.saturating_add(1)),
            bits: 0,
        }
    }

    /// Number of bits written so far (the offset of the next value).
    pub(crate) fn bit_len(&self) -> u64 {
        self.bits
    }

    /// Appends the low `width` bits of `value`.
    #[inline]
    pub(crate) fn push(&mut self, value: u64, width: u32) {
        let width = width.min(64);
        if width == 0 {
            return;
        }
        let s = (self.bits & 63) as u32;
        let value = value & low_mask(width);
        if s == 0 {
            self.words.push(value);
        } else if let Some(last) = self.words.last_mut() {
            *last |= value << s;
            if s + width > 64 {
                self.words.push(value >> (64 - s));
            }
        }
        self.bits += width as u64;
    }

    /// The words written, followed by one zero padding word (so a reader may
    /// always load two consecutive words).
    pub(crate) fn finish(mut self) -> Vec<u64> {
        self.words.push(0);
        self.words.shrink_to_fit();
        self.words
    }
}

/// Signed integers packed at one width: `value - min` in `width` bits each.
/// For values without a trend (a learned code would only add its model).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PackedInts {
    min: i64,
    width: u32,
    len: usize,
    words: Vec<u64>,
}

impl PackedInts {
    /// Packs `values`.
    pub(crate) fn encode(values: &[i64]) -> Self {
        let min = values.iter().copied().min().unwrap_or(0);
        let max = values.iter().copied().max().unwrap_or(0);
        let width = bits_needed(max.wrapping_sub(min) as u64);
        let mut w = BitWriter::with_capacity(values.len() as u64 * u64::from(width));
        for &v in values {
            w.push(v.wrapping_sub(min) as u64, width);
        }
        let mut words = w.finish();
        words.shrink_to_fit();
        PackedInts {
            min,
            width,
            len: values.len(),
            words,
        }
    }

    /// Number of values.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Value `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<i64> {
        if i >= self.len {
            return None;
        }
        let raw = read_bits(&self.words, i as u64 * u64::from(self.width), self.width);
        Some(self.min.wrapping_add(raw as i64))
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        size_of::<Self>() + self.words.capacity() * 8
    }

    /// Serializes: `min` (i64), `width` (u32), `len` (u64), word count (u64),
    /// words (u64 each), little-endian.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(28 + self.words.len() * 8);
        out.extend_from_slice(&self.min.to_le_bytes());
        out.extend_from_slice(&self.width.to_le_bytes());
        out.extend_from_slice(&(self.len as u64).to_le_bytes());
        out.extend_from_slice(&(self.words.len() as u64).to_le_bytes());
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// Decodes and validates (the words must hold every value).
    pub(crate) fn from_bytes(bytes: &[u8]) -> crate::Result<Self> {
        let bad = |what: &str| crate::Error::corruption("packed integers", 0, what.to_string());
        let mut c = crate::format::bytes::Cursor::new(bytes);
        let min = c.u64().ok_or_else(|| bad("cut"))? as i64;
        let width = c.u32().ok_or_else(|| bad("cut"))?;
        let len = usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("too long"))?;
        let nw = usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("too long"))?;
        if width > 64 || nw > bytes.len() / 8 {
            return Err(bad("bad width or word count"));
        }
        // `len` and `width` come from the bytes: a product past u64 is
        // damage, not a wrapped count.
        let bits = (len as u64)
            .checked_mul(u64::from(width))
            .ok_or_else(|| bad("values cut"))?;
        if (nw as u64) * 64 < bits {
            return Err(bad("values cut"));
        }
        let mut words = Vec::with_capacity(nw);
        for _ in 0..nw {
            words.push(c.u64().ok_or_else(|| bad("words cut"))?);
        }
        Ok(PackedInts {
            min,
            width,
            len,
            words,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn widths_zero_and_64() {
        let mut w = Vec::new();
        write_bits(&mut w, 0, 0, u64::MAX);
        assert!(w.is_empty());
        assert_eq!(read_bits(&w, 0, 0), 0);
        assert_eq!(read_bits(&w, 12345, 64), 0);
        write_bits(&mut w, 3, 64, u64::MAX - 5);
        assert_eq!(read_bits(&w, 3, 64), u64::MAX - 5);
        assert_eq!(read_bits(&w, 0, 3), 0);
        write_bits(&mut w, 64, 64, 7);
        assert_eq!(read_bits(&w, 64, 64), 7);
        assert_eq!(read_bits(&w, 3, 61), (u64::MAX - 5) & low_mask(61));
        assert_eq!(read_bits(&w, u64::MAX, 64), 0);
        assert_eq!(read_bits(&w, 0, 200), read_bits(&w, 0, 64));
        assert_eq!(bits_needed(0), 0);
        assert_eq!(bits_needed(1), 1);
        assert_eq!(bits_needed(u64::MAX), 64);
        assert_eq!(low_mask(64), u64::MAX);
    }

    proptest! {
        #[test]
        fn writer_and_random_access_agree(vals in prop::collection::vec((any::<u64>(), 0u32..=64), 0..200)) {
            let mut bw = BitWriter::new();
            let mut offs = Vec::new();
            let mut words = Vec::new();
            for &(v, b) in &vals {
                offs.push(bw.bit_len());
                write_bits(&mut words, bw.bit_len(), b, v);
                bw.push(v, b);
            }
            let packed = bw.finish();
            for (&(v, b), &off) in vals.iter().zip(&offs) {
                prop_assert_eq!(read_bits(&packed, off, b), v & low_mask(b));
                prop_assert_eq!(read_bits(&words, off, b), v & low_mask(b));
            }
        }

        #[test]
        fn overwrite_keeps_neighbours(off in 0u64..300, b in 0u32..=64, v: u64, fill: u64) {
            let mut w = vec![fill; 8];
            let before = w.clone();
            write_bits(&mut w, off, b, v);
            prop_assert_eq!(read_bits(&w, off, b), v & low_mask(b));
            for k in 0..512u64 {
                if k < off || k >= off + b as u64 {
                    prop_assert_eq!(read_bits(&w, k, 1), read_bits(&before, k, 1));
                }
            }
        }
    }

    #[test]
    fn packed_ints_round_trip() {
        for values in [
            vec![],
            vec![5i64],
            vec![-24, 24, 0, -1, 23],
            vec![i64::MIN, i64::MAX, 0],
        ] {
            let p = PackedInts::encode(&values);
            for (i, &v) in values.iter().enumerate() {
                assert_eq!(p.get(i), Some(v));
            }
            assert_eq!(p.get(values.len()), None);
            let q = PackedInts::from_bytes(&p.to_bytes()).unwrap();
            assert_eq!(p, q);
            let b = p.to_bytes();
            assert!(PackedInts::from_bytes(&b[..b.len().saturating_sub(9)]).is_err() || b.len() <= 28);
        }
        // 49 values in 6 bits each.
        let v: Vec<i64> = (0..1000).map(|i| i % 49 - 24).collect();
        assert!(PackedInts::encode(&v).memory_bytes() <= 1000 * 6 / 8 + 64);
    }
}
