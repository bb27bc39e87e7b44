//! The Bloom filter of a table, over its user keys: `m` bits, `k` probes by
//! double hashing of one 64-bit hash (Kirsch and Mitzenmacher), `k = bits
//! per key * ln 2` rounded, clamped to `1..=30`.
//!
//! Encoding: `u8 k | bits` (bit `i` is bit `i % 8` of byte `i / 8`).

use crate::{Error, Result};

/// Most probes.
const MAX_PROBES: u8 = 30;

/// The 64-bit hash of a user key: FNV-1a, then the murmur3 finalizer (so
/// that both halves of the word are well mixed for double hashing).
pub(super) fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A Bloom filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bloom {
    k: u8,
    bits: Vec<u8>,
}

fn probes(h: u64, k: u8, m: u64) -> impl Iterator<Item = u64> {
    let h1 = h & 0xffff_ffff;
    let h2 = (h >> 32) | 1;
    (0..u64::from(k)).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % m)
}

impl Bloom {
    /// A filter over the key hashes `hashes` with `bits_per_key` bits each
    /// (at least 64 bits in all).
    pub(super) fn build(hashes: &[u64], bits_per_key: u32) -> Bloom {
        let m = (hashes.len() as u64 * u64::from(bits_per_key))
            .max(64)
            .div_ceil(8)
            * 8;
        let k = ((f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u8).clamp(1, MAX_PROBES);
        let mut bits = vec![0u8; (m / 8) as usize];
        for &h in hashes {
            for bit in probes(h, k, m) {
                if let Some(byte) = bits.get_mut((bit / 8) as usize) {
                    *byte |= 1 << (bit % 8);
                }
            }
        }
        Bloom { k, bits }
    }

    /// Whether `key` may be in the set (false: certainly not).
    pub(super) fn may_contain(&self, key: &[u8]) -> bool {
        let m = self.bits.len() as u64 * 8;
        if m == 0 {
            return true;
        }
        probes(hash(key), self.k, m).all(|bit| {
            self.bits
                .get((bit / 8) as usize)
                .is_some_and(|b| b & (1 << (bit % 8)) != 0)
        })
    }

    /// Resident bytes.
    pub(super) fn memory_bytes(&self) -> u64 {
        self.bits.len() as u64
    }

    /// The encoding.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + self.bits.len());
        out.push(self.k);
        out.extend_from_slice(&self.bits);
        out
    }

    /// Decodes a filter (`file` names it in errors).
    pub(super) fn decode(bytes: &[u8], file: &str) -> Result<Bloom> {
        let (&k, bits) = bytes
            .split_first()
            .ok_or_else(|| Error::corruption_at(file, 0, "bloom filter: empty"))?;
        if !(1..=MAX_PROBES).contains(&k) || bits.is_empty() {
            return Err(Error::corruption_at(
                file,
                0,
                format!("bloom filter: {k} probes over {} bytes", bits.len()),
            ));
        }
        Ok(Bloom {
            k,
            bits: bits.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let keys: Vec<Vec<u8>> = (0..10_000u32).map(|i| format!("user{i}").into_bytes()).collect();
        let hashes: Vec<u64> = keys.iter().map(|k| hash(k)).collect();
        let f = Bloom::build(&hashes, 10);
        assert!(keys.iter().all(|k| f.may_contain(k)));
        let fp = (0..10_000u32)
            .filter(|i| f.may_contain(format!("other{i}").as_bytes()))
            .count();
        // 10 bits per key: about 1 %; deterministic for these keys.
        assert!(fp < 200, "{fp} false positives of 10000");
        assert_eq!(Bloom::decode(&f.encode(), "t").unwrap(), f);
        assert!(Bloom::decode(&[], "t").is_err());
        assert!(Bloom::decode(&[0, 1], "t").is_err());
        assert!(Bloom::decode(&[3], "t").is_err());
    }
}
