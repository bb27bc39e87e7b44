//! Compressed layers (Zhang G4/G5): LeCo zone maps and compressed bands.
//!
//! A compressed layer is stored as one blob (a paged array of bytes) and
//! decoded as a whole: with `resident=index` once at open, otherwise on every
//! lookup (it is then read whole, like a root).

use super::layer::BandEntry;
use crate::format::bytes::Cursor;
use crate::model::LecoArray;
use crate::model::bitpack::{BitWriter, bits_needed, read_bits};
use crate::{Error, Result};

/// Magic of a compressed band blob: `STRATACB`.
pub const CPR_BAND_MAGIC: u64 = u64::from_le_bytes(*b"STRATACB");
/// Version of compressed band blobs.
pub const CPR_BAND_VERSION: u32 = 1;

/// A band layer in compressed form (CprLeCo_PGM_D): the same entries as a
/// plain band layer, stored as LeCo-compressed keys (rough separators, see
/// [`LecoArray::encode_bounded`]), a table of distinct slopes with a
/// bit-packed index per entry, and LeCo-compressed intercept offsets (zigzag)
/// and bases. Decoding entry `j` gives back exactly the plain entry.
#[derive(Debug, Clone, PartialEq)]
pub struct CprBand {
    keys: LecoArray,
    slopes: Vec<f32>,
    idx: Vec<u64>,
    idx_bits: u32,
    offs: LecoArray,
    bases: LecoArray,
    /// Bases are stored as `(base - base_bias) / base_unit` (records per page
    /// and half a page for zero-interval bands, whose bases sit in the middle
    /// of pages; 1 and 0 otherwise).
    base_unit: u64,
    base_bias: u64,
}

/// Offsets are stored shifted to be non-negative (LeCo then fits them with
/// residuals no wider than their spread).
fn bias(v: i32) -> u64 {
    (v as i64 - i32::MIN as i64) as u64
}

fn unbias(v: u64) -> i32 {
    (v as i64 + i32::MIN as i64) as i32
}

impl CprBand {
    /// Compresses `entries`, whose keys are already compressed in `keys`
    /// (same order, same values).
    pub fn from_parts(
        keys: LecoArray,
        entries: &[BandEntry],
        base_unit: u64,
        base_bias: u64,
    ) -> Result<Self> {
        let fits = |u: u64, b: u64| u > 0 && entries.iter().all(|e| e.base >= b && (e.base - b) % u == 0);
        let (unit, shift) = if fits(base_unit, base_bias) {
            (base_unit, base_bias)
        } else {
            (1, 0)
        };
        if keys.len() != entries.len()
            || entries
                .iter()
                .enumerate()
                .any(|(j, e)| keys.get(j) != Some(e.key))
        {
            return Err(Error::invalid("compressed band: keys and entries disagree"));
        }
        let mut slopes: Vec<f32> = Vec::new();
        let mut index: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
        let mut of = Vec::with_capacity(entries.len());
        for e in entries {
            let id = *index.entry(e.slope.to_bits()).or_insert_with(|| {
                slopes.push(e.slope);
                (slopes.len() - 1) as u32
            });
            of.push(id);
        }
        let idx_bits = bits_needed(slopes.len().saturating_sub(1) as u64);
        let mut w = BitWriter::with_capacity(entries.len() as u64 * idx_bits as u64);
        for &i in &of {
            w.push(i as u64, idx_bits);
        }
        let mut idx = w.finish();
        idx.shrink_to_fit();
        slopes.shrink_to_fit();
        let offs: Vec<u64> = entries.iter().map(|e| bias(e.off)).collect();
        let bases: Vec<u64> = entries.iter().map(|e| (e.base - shift) / unit).collect();
        Ok(CprBand {
            keys,
            slopes,
            idx,
            idx_bits,
            offs: LecoArray::encode(&offs),
            bases: LecoArray::encode(&bases),
            base_unit: unit,
            base_bias: shift,
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

    /// Entry `j`.
    #[inline]
    pub fn entry(&self, j: usize) -> Option<BandEntry> {
        let s = if self.idx_bits == 0 {
            0
        } else {
            read_bits(&self.idx, j as u64 * self.idx_bits as u64, self.idx_bits) as usize
        };
        Some(BandEntry {
            key: self.keys.get(j)?,
            slope: *self.slopes.get(s)?,
            off: unbias(self.offs.get(j)?),
            base: self.base(j)?,
        })
    }

    /// Base of entry `j`.
    #[inline]
    pub fn base(&self, j: usize) -> Option<u64> {
        self.bases
            .get(j)?
            .checked_mul(self.base_unit)?
            .checked_add(self.base_bias)
    }

    /// Number of distinct slopes.
    pub fn distinct_slopes(&self) -> usize {
        self.slopes.len()
    }

    /// Bytes of each part: keys, offsets, bases, slope table, slope indexes.
    pub fn part_bytes(&self) -> [(&'static str, u64); 5] {
        [
            ("keys", self.keys.memory_bytes() as u64),
            ("offsets", self.offs.memory_bytes() as u64),
            ("bases", self.bases.memory_bytes() as u64),
            ("slope_table", self.slopes.capacity() as u64 * 4),
            ("slope_index", self.idx.capacity() as u64 * 8),
        ]
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> u64 {
        (self.keys.memory_bytes()
            + self.offs.memory_bytes()
            + self.bases.memory_bytes()
            + self.slopes.capacity() * 4
            + self.idx.capacity() * 8) as u64
    }

    /// Serializes: magic, version, then length-prefixed parts, then crc32c.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&CPR_BAND_MAGIC.to_le_bytes());
        out.extend_from_slice(&CPR_BAND_VERSION.to_le_bytes());
        out.extend_from_slice(&self.idx_bits.to_le_bytes());
        out.extend_from_slice(&self.base_unit.to_le_bytes());
        out.extend_from_slice(&self.base_bias.to_le_bytes());
        for part in [self.keys.to_bytes(), self.offs.to_bytes(), self.bases.to_bytes()] {
            out.extend_from_slice(&(part.len() as u64).to_le_bytes());
            out.extend_from_slice(&part);
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
        let base_unit = c.u64().ok_or_else(|| bad("cut"))?;
        let base_bias = c.u64().ok_or_else(|| bad("cut"))?;
        if base_unit == 0 {
            return Err(bad("zero base unit"));
        }
        let mut part = || -> Result<LecoArray> {
            let len =
                usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("part too long"))?;
            LecoArray::from_bytes(c.bytes(len).ok_or_else(|| bad("part cut"))?)
        };
        let keys = part()?;
        let offs = part()?;
        let bases = part()?;
        let n = keys.len();
        let count = |c: &mut Cursor<'_>, max: usize| -> Result<usize> {
            let v = usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("too long"))?;
            if v > max {
                return Err(bad("array longer than the entries allow"));
            }
            Ok(v)
        };
        let ns = count(&mut c, n.max(1))?;
        let slopes = (0..ns)
            .map(|_| c.u32().map(f32::from_bits).ok_or_else(|| bad("slopes cut")))
            .collect::<Result<Vec<f32>>>()?;
        let nw = count(&mut c, (n * idx_bits as usize).div_ceil(64) + 1)?;
        let idx = (0..nw)
            .map(|_| c.u64().ok_or_else(|| bad("indexes cut")))
            .collect::<Result<Vec<u64>>>()?;
        if offs.len() != n || bases.len() != n || (n > 0 && slopes.is_empty()) {
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
            offs,
            bases,
            base_unit,
            base_bias,
        };
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
        let entries: Vec<BandEntry> = (0..5000u64)
            .map(|i| BandEntry {
                key: i * i + 7,
                slope: [0.5f32, 1.25, 3.0][(i % 3) as usize],
                off: (i as i32 % 13) - 6,
                base: i * 10,
            })
            .collect();
        let keys: Vec<u64> = entries.iter().map(|e| e.key).collect();
        let c = CprBand::from_parts(LecoArray::encode(&keys), &entries, 10, 0).unwrap();
        assert_eq!(c.distinct_slopes(), 3);
        for j in [0usize, 1, 2, 999, 4999] {
            assert_eq!(c.entry(j), Some(entries[j]));
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
        let wrong = LecoArray::encode(&keys[1..]);
        assert!(CprBand::from_parts(wrong, &entries, 1, 0).is_err());
        for v in [0, 1, -1, i32::MAX, i32::MIN] {
            assert_eq!(unbias(bias(v)), v);
        }
    }
}
