//! Compressed layers (Zhang G4/G5): LeCo zone maps and compressed bands.
//!
//! A compressed layer is stored as one blob (a paged array of bytes) and
//! decoded as a whole: with `resident=index` once at open, otherwise on every
//! lookup (it is then read whole, like a root).

use crate::format::bytes::Cursor;
use crate::model::LecoArray;
use crate::model::bitpack::{BitWriter, bits_needed, read_bits};
use crate::{Error, Result};

/// Magic of a compressed band blob: `STRATACB`.
pub const CPR_BAND_MAGIC: u64 = u64::from_le_bytes(*b"STRATACB");
/// Version of compressed band blobs.
pub const CPR_BAND_VERSION: u32 = 1;

/// A band layer in compressed form: the same `(key, slope, intercept)`
/// entries as a plain band layer, stored as LeCo-compressed keys, a table of
/// distinct slopes with a bit-packed index per entry, and LeCo-compressed
/// intercepts. Decoding entry `j` gives back exactly the plain entry.
#[derive(Debug, Clone, PartialEq)]
pub struct CprBand {
    keys: LecoArray,
    slopes: Vec<f64>,
    idx: Vec<u64>,
    idx_bits: u32,
    intercepts: LecoArray,
}

impl CprBand {
    /// Compresses entries: `keys` strictly increasing, `slope_of[j]` an index
    /// into `slopes`, `intercepts` non-decreasing.
    pub fn new(keys: &[u64], slopes: Vec<f64>, slope_of: &[u32], intercepts: &[u64]) -> Result<Self> {
        Self::from_parts(LecoArray::encode(keys), slopes, slope_of, intercepts)
    }

    /// Like [`CprBand::new`] with the keys already compressed (e.g. rough
    /// separators from [`LecoArray::encode_bounded`]).
    pub fn from_parts(
        keys: LecoArray,
        slopes: Vec<f64>,
        slope_of: &[u32],
        intercepts: &[u64],
    ) -> Result<Self> {
        if keys.len() != slope_of.len() || keys.len() != intercepts.len() {
            return Err(Error::invalid("compressed band: entry arrays differ in length"));
        }
        if slope_of.iter().any(|&i| i as usize >= slopes.len()) {
            return Err(Error::invalid("compressed band: slope index out of the table"));
        }
        let idx_bits = bits_needed(slopes.len().saturating_sub(1) as u64);
        let mut w = BitWriter::with_capacity(keys.len() as u64 * idx_bits as u64);
        for &i in slope_of {
            w.push(i as u64, idx_bits);
        }
        Ok(CprBand {
            keys,
            slopes,
            idx: w.finish(),
            idx_bits,
            intercepts: LecoArray::encode(intercepts),
        })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Index of the last entry whose key is `<= key` (0 if none).
    #[inline]
    pub fn last_le(&self, key: u64) -> usize {
        self.keys.upper_bound(key).saturating_sub(1)
    }

    /// Entry `j`: `(key, slope, intercept)`.
    #[inline]
    pub fn entry(&self, j: usize) -> Option<(u64, f64, u64)> {
        let k = self.keys.get(j)?;
        let s = if self.idx_bits == 0 {
            0
        } else {
            read_bits(&self.idx, j as u64 * self.idx_bits as u64, self.idx_bits) as usize
        };
        Some((k, *self.slopes.get(s)?, self.intercepts.get(j)?))
    }

    /// Intercept of entry `j`.
    #[inline]
    pub fn intercept(&self, j: usize) -> Option<u64> {
        self.intercepts.get(j)
    }

    /// Number of distinct slopes.
    pub fn distinct_slopes(&self) -> usize {
        self.slopes.len()
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> u64 {
        (self.keys.memory_bytes()
            + self.intercepts.memory_bytes()
            + self.slopes.capacity() * 8
            + self.idx.capacity() * 8) as u64
    }

    /// Serializes: magic, version, then length-prefixed parts.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&CPR_BAND_MAGIC.to_le_bytes());
        out.extend_from_slice(&CPR_BAND_VERSION.to_le_bytes());
        out.extend_from_slice(&self.idx_bits.to_le_bytes());
        let keys = self.keys.to_bytes();
        let ints = self.intercepts.to_bytes();
        for part in [&keys, &ints] {
            out.extend_from_slice(&(part.len() as u64).to_le_bytes());
            out.extend_from_slice(part);
        }
        out.extend_from_slice(&(self.slopes.len() as u64).to_le_bytes());
        for s in &self.slopes {
            out.extend_from_slice(&s.to_bits().to_le_bytes());
        }
        out.extend_from_slice(&(self.idx.len() as u64).to_le_bytes());
        for w in &self.idx {
            out.extend_from_slice(&w.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and validates; never panics on bad bytes.
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Self> {
        let bad = |what: &str| Error::corruption(file, 0, format!("compressed band: {what}"));
        let body_len = bytes.len().checked_sub(4).ok_or_else(|| bad("too short"))?;
        let (body, crc) = bytes.split_at(body_len);
        if crc32c::crc32c(body).to_le_bytes() != crc {
            return Err(bad("checksum mismatch"));
        }
        let mut c = Cursor::new(body);
        if c.u64() != Some(CPR_BAND_MAGIC) {
            return Err(bad("bad magic"));
        }
        if c.u32() != Some(CPR_BAND_VERSION) {
            return Err(bad("unsupported version"));
        }
        let idx_bits = c.u32().ok_or_else(|| bad("cut"))?;
        if idx_bits > 32 {
            return Err(bad("slope index too wide"));
        }
        let mut part = || -> Result<LecoArray> {
            let len =
                usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("part too long"))?;
            LecoArray::from_bytes(c.bytes(len).ok_or_else(|| bad("part cut"))?)
        };
        let keys = part()?;
        let intercepts = part()?;
        let mut words = |max: usize| -> Result<Vec<u64>> {
            let n = usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("too long"))?;
            if n > max {
                return Err(bad("array longer than the entries allow"));
            }
            (0..n).map(|_| c.u64().ok_or_else(|| bad("array cut"))).collect()
        };
        let n = keys.len();
        let slopes: Vec<f64> = words(n.max(1))?.into_iter().map(f64::from_bits).collect();
        let idx = words((n * idx_bits as usize).div_ceil(64) + 1)?;
        if intercepts.len() != n || (n > 0 && slopes.is_empty()) {
            return Err(bad("parts disagree in length"));
        }
        if (idx.len() as u64) * 64 < n as u64 * idx_bits as u64 {
            return Err(bad("slope indexes cut"));
        }
        let band = CprBand {
            keys,
            slopes,
            idx,
            idx_bits,
            intercepts,
        };
        // Every slope index must point into the table.
        if (0..n).any(|j| band.entry(j).is_none()) {
            return Err(bad("slope index out of the table"));
        }
        Ok(band)
    }
}

/// A decoded blob layer.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// A LeCo zone map (exact or rough separators).
    Leco(LecoArray),
    /// A compressed band layer.
    Cpr(CprBand),
}

impl Decoded {
    /// Heap bytes held.
    pub fn memory_bytes(&self) -> u64 {
        match self {
            Decoded::Leco(l) => l.memory_bytes() as u64,
            Decoded::Cpr(c) => c.memory_bytes(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match self {
            Decoded::Leco(l) => l.len(),
            Decoded::Cpr(c) => c.len(),
        }
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cpr_band_roundtrip_and_corruption() {
        let keys: Vec<u64> = (0..5000u64).map(|i| i * i + 7).collect();
        let slopes = vec![0.5, 1.25, 3.0];
        let of: Vec<u32> = (0..5000u32).map(|i| i % 3).collect();
        let ints: Vec<u64> = (0..5000u64).map(|i| i * 10 + (i % 7)).collect();
        let c = CprBand::new(&keys, slopes.clone(), &of, &ints).unwrap();
        for j in [0usize, 1, 2, 999, 4999] {
            assert_eq!(c.entry(j), Some((keys[j], slopes[of[j] as usize], ints[j])));
        }
        assert_eq!(c.last_le(0), 0);
        assert_eq!(c.last_le(keys[10]), 10);
        assert_eq!(c.last_le(keys[10] + 1), 10);
        assert_eq!(c.last_le(u64::MAX), 4999);
        let b = c.to_bytes();
        assert_eq!(CprBand::from_bytes(&b, "t").unwrap(), c);
        for cut in [0, 3, 10, b.len() / 2, b.len() - 1] {
            assert!(CprBand::from_bytes(&b[..cut], "t").is_err());
        }
        let mut flipped = b.clone();
        flipped[20] ^= 1;
        assert!(CprBand::from_bytes(&flipped, "t").unwrap_err().is_corruption());
        assert!(CprBand::new(&keys, slopes, &vec![5; 5000], &ints).is_err());
    }
}
