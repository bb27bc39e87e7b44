//! Compressed layers (Zhang G4/G5): LeCo zone maps and compressed bands.
//!
//! A compressed layer is stored as one blob (a paged array of bytes) and
//! decoded as a whole: with `resident=index` once at open, otherwise on every
//! lookup (it is then read whole, like a root).

use super::entries::BandEntry;
use crate::format::bytes::Cursor;
use crate::model::bitpack::{BitWriter, PackedInts, bits_needed, read_bits};
use crate::model::{DeltaArray, GapArray, LecoArray};
use crate::{Error, Result};

/// Magic of a compressed band blob: `STRATACB`.
pub(super) const CPR_BAND_MAGIC: u64 = u64::from_le_bytes(*b"STRATACB");
/// Version of compressed band blobs.
pub(super) const CPR_BAND_VERSION: u32 = 2;

/// A band layer in compressed form (CprLeCo_PGM_D, with strata's codes): the
/// same entries as a plain band layer, stored as gap-coded rough separators
/// ([`GapArray`]), a sorted table of the distinct slopes (gap-coded float
/// bits) with a bit-packed index per entry, LeCo-compressed intercept offsets
/// (in units of `off_unit` sixteenths) and delta-coded bases ([`DeltaArray`]).
/// Decoding entry `j` gives back exactly the plain entry.
#[derive(Debug, Clone, PartialEq)]
pub struct CprBand {
    keys: GapArray,
    slopes: GapArray,
    /// Slope indexes: with `per_word == 0` bit-packed at the width of the
    /// largest index; otherwise `per_word` to a word in radix `slopes.len()`
    /// (index `j` is digit `j % per_word` of word `j / per_word`), which
    /// takes 9.14 bits each for 561 slopes where bit packing takes 10.
    idx: Vec<u64>,
    per_word: u32,
    offs: PackedInts,
    bases: DeltaArray,
    /// Bases are stored as `(base - base_bias) / base_unit` (records per page
    /// and half a page for zero-interval bands, whose bases sit in the middle
    /// of pages; 1 and 0 otherwise).
    base_unit: u64,
    base_bias: u64,
    /// Offsets are stored divided by this (sixteenths per stored unit): the
    /// builder may round intercepts to whole positions or more.
    off_unit: i32,
}

/// How many digits of `radix` fit a `u64` word (64 for radix 1).
/// An error of a model decoder (which names the encoding, `<LeCo bytes>`,
/// not a file) as one about the layer file `file` that held the bytes,
/// with `what` in front of the detail: the message names the file once.
pub(crate) fn in_layer_file(e: Error, file: &str, what: &str) -> Error {
    match e {
        Error::Corruption { detail, .. } => Error::corruption(file, 0, format!("{what}: {detail}")),
        Error::BadMagic { found, expected, .. } => Error::corruption(
            file,
            0,
            format!("{what}: not {expected} bytes (magic {found:#018x})"),
        ),
        Error::Truncated { expected, found, .. } => Error::corruption(
            file,
            0,
            format!("{what}: {found} bytes, expected at least {expected}"),
        ),
        Error::UnsupportedVersion { found, supported, .. } => Error::UnsupportedVersion {
            file: file.to_string(),
            found,
            supported,
        },
        other => other,
    }
}

fn digits_per_word(radix: u64) -> u32 {
    (1..=64u32)
        .take_while(|&g| radix.checked_pow(g).is_some())
        .last()
        .unwrap_or(1)
}

impl CprBand {
    /// Compresses `entries`, whose keys are already compressed in `keys`
    /// (same order, same values). Slopes must not be negative or NaN.
    pub fn from_parts(
        keys: GapArray,
        entries: &[BandEntry],
        base_unit: u64,
        base_bias: u64,
        off_unit: i32,
    ) -> Result<Self> {
        if off_unit < 1 || entries.iter().any(|e| e.off % off_unit != 0) {
            return Err(Error::invalid(
                "compressed band: offsets are not multiples of their unit",
            ));
        }
        if entries
            .iter()
            .any(|e| e.slope.is_nan() || e.slope.is_sign_negative())
        {
            return Err(Error::invalid("compressed band: slopes must be >= 0"));
        }
        let fits = |u: u64, b: u64| u > 0 && entries.iter().all(|e| e.base >= b && (e.base - b) % u == 0);
        let (unit, shift) = if fits(base_unit, base_bias) {
            (base_unit, base_bias)
        } else {
            (1, 0)
        };
        if keys.len() != entries.len() || !keys.iter().eq(entries.iter().map(|e| e.key)) {
            return Err(Error::invalid("compressed band: keys and entries disagree"));
        }
        // Bits of non-negative floats sort as the floats do.
        let mut table: Vec<u64> = entries.iter().map(|e| u64::from(e.slope.to_bits())).collect();
        table.sort_unstable();
        table.dedup();
        let radix = table.len().max(1) as u64;
        let of = |e: &BandEntry| table.partition_point(|&t| t < u64::from(e.slope.to_bits())) as u64;
        let digits = digits_per_word(radix);
        let width = bits_needed(radix - 1);
        let (per_word, mut idx) =
            if entries.len().div_ceil(digits as usize) * 64 < entries.len() * width as usize {
                let mut idx = Vec::with_capacity(entries.len().div_ceil(digits as usize));
                for chunk in entries.chunks(digits as usize) {
                    idx.push(chunk.iter().rev().fold(0u64, |word, e| word * radix + of(e)));
                }
                (digits, idx)
            } else {
                let mut w = BitWriter::with_capacity(entries.len() as u64 * u64::from(width));
                for e in entries {
                    w.push(of(e), width);
                }
                (0, w.finish())
            };
        idx.shrink_to_fit();
        let offs: Vec<i64> = entries.iter().map(|e| i64::from(e.off / off_unit)).collect();
        let bases: Vec<u64> = entries.iter().map(|e| (e.base - shift) / unit).collect();
        Ok(CprBand {
            keys,
            slopes: GapArray::encode(&table)?,
            idx,
            per_word,
            offs: PackedInts::encode(&offs),
            bases: DeltaArray::encode(&bases)?,
            base_unit: unit,
            base_bias: shift,
            off_unit,
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

    /// The entry a lookup of `key` uses (the last whose key is `<= key`, or
    /// the first) and the next entry's base (`None` for the last entry).
    #[inline]
    pub fn find(&self, key: u64) -> Option<(BandEntry, Option<u64>)> {
        let (j, k) = match self.keys.last_le(key) {
            Some(found) => found,
            None => (0, self.keys.get(0)?),
        };
        self.assemble(j, k)
    }

    /// Entry `j`.
    pub fn entry(&self, j: usize) -> Option<BandEntry> {
        self.assemble(j, self.keys.get(j)?).map(|(e, _)| e)
    }

    #[inline]
    fn assemble(&self, j: usize, key: u64) -> Option<(BandEntry, Option<u64>)> {
        let s = self.slope_index(j)? as usize;
        let slope = f32::from_bits(u32::try_from(self.slopes.get(s)?).ok()?);
        let (base, next) = self.bases.get_pair(j)?;
        let unbase = |b: u64| b.checked_mul(self.base_unit)?.checked_add(self.base_bias);
        let next = match next {
            Some(b) => Some(unbase(b)?),
            None => None,
        };
        Some((
            BandEntry {
                key,
                slope,
                off: i32::try_from(self.offs.get(j)?)
                    .ok()?
                    .checked_mul(self.off_unit)?,
                base: unbase(base)?,
            },
            next,
        ))
    }

    /// The slope-table index of entry `j`.
    #[inline]
    fn slope_index(&self, j: usize) -> Option<u64> {
        let radix = (self.slopes.len() as u64).max(1);
        if self.per_word == 0 {
            let width = bits_needed(radix - 1);
            return Some(read_bits(&self.idx, j as u64 * u64::from(width), width));
        }
        let per = self.per_word as usize;
        let word = *self.idx.get(j / per)?;
        Some(word / radix.checked_pow((j % per) as u32)? % radix)
    }

    /// Sixteenths of a position per stored offset unit.
    pub fn off_unit(&self) -> i32 {
        self.off_unit
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
            ("slope_table", self.slopes.memory_bytes() as u64),
            ("slope_index", self.idx.capacity() as u64 * 8),
        ]
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> u64 {
        (self.keys.memory_bytes()
            + self.offs.memory_bytes()
            + self.bases.memory_bytes()
            + self.slopes.memory_bytes()
            + self.idx.capacity() * 8) as u64
    }

    /// Serializes: magic, version, then length-prefixed parts, then crc32c.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&CPR_BAND_MAGIC.to_le_bytes());
        out.extend_from_slice(&CPR_BAND_VERSION.to_le_bytes());
        out.extend_from_slice(&self.per_word.to_le_bytes());
        out.extend_from_slice(&self.base_unit.to_le_bytes());
        out.extend_from_slice(&self.base_bias.to_le_bytes());
        out.extend_from_slice(&self.off_unit.to_le_bytes());
        for part in [
            self.keys.to_bytes(),
            self.offs.to_bytes(),
            self.bases.to_bytes(),
            self.slopes.to_bytes(),
        ] {
            out.extend_from_slice(&(part.len() as u64).to_le_bytes());
            out.extend_from_slice(&part);
        }
        out.extend_from_slice(&(self.idx.len() as u64).to_le_bytes());
        for w in &self.idx {
            out.extend_from_slice(&w.to_le_bytes());
        }
        crate::model::gapcode::seal(out)
    }

    /// Decodes and validates; never panics on bad bytes.
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Self> {
        const WHAT: &str = "compressed band";
        let bad = |what: &str| Error::corruption(file, 0, format!("{WHAT}: {what}"));
        let mut c = crate::model::gapcode::open_sealed(bytes, CPR_BAND_MAGIC, CPR_BAND_VERSION, file)
            .map_err(|e| in_layer_file(e, file, WHAT))?;
        let per_word = c.u32().ok_or_else(|| bad("cut"))?;
        if per_word > 64 {
            return Err(bad("bad slope indexes per word"));
        }
        let base_unit = c.u64().ok_or_else(|| bad("cut"))?;
        let base_bias = c.u64().ok_or_else(|| bad("cut"))?;
        if base_unit == 0 {
            return Err(bad("zero base unit"));
        }
        let off_unit = c.u32().ok_or_else(|| bad("cut"))?;
        let off_unit = i32::try_from(off_unit)
            .ok()
            .filter(|&u| u >= 1)
            .ok_or_else(|| bad("bad offset unit"))?;
        let mut part = || -> Result<&[u8]> {
            let len =
                usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("part too long"))?;
            c.bytes(len).ok_or_else(|| bad("part cut"))
        };
        let part_err = |e: Error| in_layer_file(e, file, WHAT);
        let keys = GapArray::from_bytes(part()?).map_err(part_err)?;
        let offs = PackedInts::from_bytes(part()?).map_err(part_err)?;
        let bases = DeltaArray::from_bytes(part()?).map_err(part_err)?;
        let slopes = GapArray::from_bytes(part()?).map_err(part_err)?;
        let n = keys.len();
        let count = |c: &mut Cursor<'_>, max: usize| -> Result<usize> {
            let v = usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("too long"))?;
            if v > max {
                return Err(bad("array longer than the entries allow"));
            }
            Ok(v)
        };
        let most_words = n
            .div_ceil(64)
            .checked_mul(64)
            .and_then(|w| w.checked_add(1))
            .ok_or_else(|| bad("entry count too large"))?;
        let nw = count(&mut c, most_words)?;
        let mut idx = (0..nw)
            .map(|_| c.u64().ok_or_else(|| bad("indexes cut")))
            .collect::<Result<Vec<u64>>>()?;
        // `collect` into a `Result` cannot pre-size: give back the growth slack.
        idx.shrink_to_fit();
        if offs.len() != n || bases.len() != n || slopes.len() > n || (n > 0 && slopes.is_empty()) {
            return Err(bad("parts disagree in length"));
        }
        if slopes
            .iter()
            .any(|s| u32::try_from(s).map_or(true, |b| f32::from_bits(b).is_nan()))
        {
            return Err(bad("slope table holds no float"));
        }
        let radix = (slopes.len() as u64).max(1);
        let fits = if per_word == 0 {
            (n as u64)
                .checked_mul(u64::from(bits_needed(radix - 1)))
                .is_some_and(|bits| idx.len() as u64 * 64 >= bits)
        } else {
            idx.len() == n.div_ceil(per_word as usize) && per_word == digits_per_word(radix)
        };
        if !fits {
            return Err(bad("slope indexes disagree with the table"));
        }
        let band = CprBand {
            keys,
            slopes,
            idx,
            per_word,
            offs,
            bases,
            base_unit,
            base_bias,
            off_unit,
        };
        let ns = band.slopes.len() as u64;
        let fine = (0..n).all(|j| {
            band.slope_index(j).is_some_and(|s| s < ns)
                && band
                    .offs
                    .get(j)
                    .is_some_and(|o| i32::try_from(o).is_ok_and(|o| o.checked_mul(off_unit).is_some()))
        }) && band.bases.iter().all(|b| {
            b.checked_mul(base_unit)
                .and_then(|v| v.checked_add(base_bias))
                .is_some()
        });
        if !fine {
            return Err(bad("slope index, offset or base out of range"));
        }
        Ok(band)
    }
}

/// A decoded blob layer.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// A LeCo zone map (exact or rough separators).
    Leco(LecoArray),
    /// A compressed band layer (boxed: it is much larger than the others).
    Cpr(Box<CprBand>),
    /// A gap-coded zone map (rough separators).
    Gap(GapArray),
}

impl Decoded {
    /// Heap bytes held.
    pub fn memory_bytes(&self) -> u64 {
        match self {
            Decoded::Leco(l) => l.memory_bytes() as u64,
            Decoded::Cpr(c) => c.memory_bytes(),
            Decoded::Gap(g) => g.memory_bytes() as u64,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match self {
            Decoded::Leco(l) => l.len(),
            Decoded::Cpr(c) => c.len(),
            Decoded::Gap(g) => g.len(),
        }
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
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
        let c = CprBand::from_parts(GapArray::encode(&keys).unwrap(), &entries, 10, 0, 1).unwrap();
        assert_eq!(c.distinct_slopes(), 3);
        for j in [0usize, 1, 2, 999, 4999] {
            assert_eq!(c.entry(j), Some(entries[j]));
        }
        let find = |k: u64| c.find(k).unwrap();
        assert_eq!(find(0), (entries[0], Some(entries[1].base)));
        assert_eq!(find(keys[10]), (entries[10], Some(entries[11].base)));
        assert_eq!(find(keys[10] + 1), (entries[10], Some(entries[11].base)));
        assert_eq!(find(keys[63]), (entries[63], Some(entries[64].base)));
        assert_eq!(find(u64::MAX), (entries[4999], None));
        // Offsets in units: every offset a multiple, or the parts are refused.
        let coarse: Vec<BandEntry> = entries
            .iter()
            .map(|e| BandEntry {
                off: e.off * 32,
                ..*e
            })
            .collect();
        let c32 = CprBand::from_parts(GapArray::encode(&keys).unwrap(), &coarse, 10, 0, 32).unwrap();
        assert!(c32.memory_bytes() < c.memory_bytes() + 64);
        assert_eq!(c32.entry(77), Some(coarse[77]));
        assert!(CprBand::from_parts(GapArray::encode(&keys).unwrap(), &entries, 10, 0, 32).is_err());
        let b = c.to_bytes();
        assert_eq!(CprBand::from_bytes(&b, "t").unwrap(), c);
        for cut in [0, 3, 10, b.len() / 2, b.len() - 1] {
            assert!(CprBand::from_bytes(&b[..cut], "t").is_err());
        }
        let mut flipped = b.clone();
        flipped[20] ^= 1;
        let e = CprBand::from_bytes(&flipped, "dir/layer-0.bin").unwrap_err();
        assert!(e.is_corruption(), "{e}");
        // The file is named once, the encoding's own name not at all.
        assert_eq!(e.to_string().matches("dir/layer-0.bin").count(), 1, "{e}");
        assert!(
            e.to_string().contains("compressed band: checksum mismatch"),
            "{e}"
        );
        // A damaged part (its own checksum recomputed over the damage, the
        // band's too): the error names the layer file, not the part.
        let keys_len = usize::try_from(u64::from_le_bytes(b[36..44].try_into().unwrap())).unwrap();
        let mut part = b.clone();
        part[44 + keys_len - 5] ^= 1; // inside the keys' body
        let body_end = part.len() - 4;
        let crc = crc32c::crc32c(&part[..body_end]);
        part[body_end..].copy_from_slice(&crc.to_le_bytes());
        let e = CprBand::from_bytes(&part, "dir/layer-0.bin").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("corruption in dir/layer-0.bin at page 0: compressed band: "),
            "{e}"
        );
        assert!(!e.to_string().contains("gap-coded array at"), "{e}");
        let wrong = GapArray::encode(&keys[1..]).unwrap();
        assert!(CprBand::from_parts(wrong, &entries, 1, 0, 1).is_err());
    }
}
