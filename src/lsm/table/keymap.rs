//! User keys to integers for the learned indexes (Liu §4, §5.3), and the
//! correction from positions among distinct integers to entry ordinals.
//!
//! [`KeyMap`]: strip the table's common prefix (that of its smallest and
//! largest user key, hence of every key in it), then read the next 8 bytes
//! big-endian, zero-padded. The mapping is order-preserving (`a < b` implies
//! `map(a) <= map(b)`) but not injective: keys that agree on those 8 bytes,
//! and every version of one key, share a value. Keys outside the table's
//! prefix map to the ends (0 or `u64::MAX`).
//!
//! [`Ordinals`]: a learned model is trained on the *distinct* mapped values
//! (`d` = index among them); `ordinal(d) = d + extras_before(d)` is the
//! ordinal of the first entry with the `d`-th value, where `extras_before(d)`
//! counts the entries beyond the first of every earlier value. Only the
//! values where that count changes are stored.

use crate::format::bytes::Cursor;
use crate::{Error, Result};

/// The order-preserving map of user keys to `u64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyMap {
    prefix: Vec<u8>,
}

impl KeyMap {
    /// The map of a table whose user keys lie in `[smallest, largest]`.
    pub(super) fn new(smallest: &[u8], largest: &[u8]) -> KeyMap {
        let n = smallest.iter().zip(largest).take_while(|(a, b)| a == b).count();
        KeyMap {
            prefix: smallest.get(..n).unwrap_or_default().to_vec(),
        }
    }

    /// A map with a given prefix.
    pub(super) fn with_prefix(prefix: Vec<u8>) -> KeyMap {
        KeyMap { prefix }
    }

    /// The stripped prefix.
    pub(super) fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The integer of `user_key`.
    pub(super) fn map(&self, user_key: &[u8]) -> u64 {
        let p = self.prefix.len();
        let head = user_key.get(..p.min(user_key.len())).unwrap_or_default();
        let want = self.prefix.get(..head.len()).unwrap_or_default();
        match head.cmp(want) {
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Greater => u64::MAX,
            std::cmp::Ordering::Equal => window(user_key, p),
        }
    }

    /// [`map`](Self::map) of a key known to start with the prefix (every
    /// key of the table the map was made for): no comparison.
    #[inline]
    pub(super) fn map_member(&self, user_key: &[u8]) -> u64 {
        debug_assert!(user_key.starts_with(&self.prefix));
        window(user_key, self.prefix.len())
    }
}

/// The first 8 bytes of `key[skip..]` big-endian, zero-padded (0 when
/// `skip` is past the end).
#[inline]
fn window(key: &[u8], skip: usize) -> u64 {
    let rest = key.get(skip..).unwrap_or_default();
    if let Some(head) = rest.first_chunk::<8>() {
        return u64::from_be_bytes(*head);
    }
    if rest.is_empty() {
        return 0;
    }
    // Fewer than 8 bytes left: the key's last 8 bytes end with them, so
    // shifting out the bytes before them pads with zeros (one load, no
    // byte-wise copy through the stack).
    if let Some(tail) = key.last_chunk::<8>() {
        return u64::from_be_bytes(*tail) << (8 * (8 - rest.len()));
    }
    rest.iter()
        .enumerate()
        .fold(0u64, |acc, (i, &b)| acc | u64::from(b) << (56 - 8 * i))
}

/// Ordinals of the first entry of each distinct mapped value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ordinals {
    /// Distinct values where `extras_before` changes, increasing.
    ds: Vec<u32>,
    /// `extras_before` from `ds[k]` on, increasing.
    es: Vec<u32>,
    distinct: u64,
    entries: u64,
}

impl Ordinals {
    /// From the ordinal of the first entry of every distinct value, in
    /// order (the first is 0), and the number of entries.
    pub(super) fn from_firsts(firsts: &[u32], entries: u64) -> Ordinals {
        let (mut ds, mut es) = (Vec::new(), Vec::new());
        let mut last = 0u32;
        for (d, &o) in firsts.iter().enumerate() {
            let extra = o.saturating_sub(d as u32);
            if extra != last {
                ds.push(d as u32);
                es.push(extra);
                last = extra;
            }
        }
        Ordinals {
            ds,
            es,
            distinct: firsts.len() as u64,
            entries,
        }
    }

    /// Number of distinct values.
    pub(super) fn distinct(&self) -> u64 {
        self.distinct
    }

    /// Ordinal of the first entry of distinct value `d` (`entries` for
    /// `d >= distinct`).
    pub(super) fn ordinal(&self, d: u64) -> u64 {
        if d >= self.distinct {
            return self.entries;
        }
        let k = self.ds.partition_point(|&x| u64::from(x) <= d);
        let extra = k
            .checked_sub(1)
            .and_then(|i| self.es.get(i))
            .map_or(0, |&e| u64::from(e));
        d + extra
    }

    /// Resident bytes.
    pub(super) fn memory_bytes(&self) -> u64 {
        4 * (self.ds.len() + self.es.len()) as u64
    }

    /// Encoding: `u64 distinct | u64 entries | u32 count | (u32 d, u32 extras) * count`.
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.distinct.to_le_bytes());
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&(self.ds.len() as u32).to_le_bytes());
        for (d, e) in self.ds.iter().zip(&self.es) {
            out.extend_from_slice(&d.to_le_bytes());
            out.extend_from_slice(&e.to_le_bytes());
        }
    }

    /// Decodes and checks (both lists increasing, every ordinal inside the
    /// table, `distinct <= entries`).
    pub(super) fn decode(c: &mut Cursor<'_>, file: &str) -> Result<Ordinals> {
        let bad = |what: &str| Error::corruption_at(file, 0, format!("ordinal corrections: {what}"));
        let distinct = c.u64().ok_or_else(|| bad("truncated"))?;
        let entries = c.u64().ok_or_else(|| bad("truncated"))?;
        let count = c.u32().ok_or_else(|| bad("truncated"))? as usize;
        if distinct > entries || count > c.remaining() / 8 {
            return Err(bad("counts out of range"));
        }
        let (mut ds, mut es) = (Vec::with_capacity(count), Vec::with_capacity(count));
        let (mut pd, mut pe) = (None, 0u32);
        for _ in 0..count {
            let d = c.u32().ok_or_else(|| bad("truncated"))?;
            let e = c.u32().ok_or_else(|| bad("truncated"))?;
            let in_order = pd.is_none_or(|p| d > p) && e > pe;
            if !in_order || u64::from(d) >= distinct || distinct + u64::from(e) > entries {
                return Err(bad("a correction out of order or outside the table"));
            }
            ds.push(d);
            es.push(e);
            (pd, pe) = (Some(d), e);
        }
        Ok(Ordinals {
            ds,
            es,
            distinct,
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_is_order_preserving_and_strips_the_prefix() {
        let m = KeyMap::new(b"https://a.example/p/aa", b"https://a.example/q");
        assert_eq!(m.prefix(), b"https://a.example/");
        assert_eq!(
            m.map(b"https://a.example/p"),
            u64::from_be_bytes(*b"p\0\0\0\0\0\0\0")
        );
        assert_eq!(m.map(b"http"), 0);
        assert_eq!(m.map(b"https://a.example/"), 0);
        assert_eq!(m.map(b"zzz"), u64::MAX);
        let mut keys: Vec<&[u8]> = vec![
            b"",
            b"h",
            b"https://a.example/",
            b"https://a.example/p",
            b"https://a.example/p/aa",
            b"https://a.example/p/aab",
            b"https://a.example/q",
            b"https://a.example/q\xff\xff\xff\xff\xff\xff\xff\xff",
            b"https://b",
            b"\xff",
        ];
        keys.sort();
        for w in keys.windows(2) {
            assert!(m.map(w[0]) <= m.map(w[1]), "{:?} {:?}", w[0], w[1]);
        }
        assert_eq!(KeyMap::with_prefix(b"ab".to_vec()).map(b"ab\x01"), 1 << 56);
    }

    proptest::proptest! {
        /// The one-load window is the zero-padded 8 bytes after the prefix,
        /// for every key length and prefix length.
        #[test]
        fn window_is_the_zero_padded_next_8_bytes(
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
            skip in 0usize..26,
        ) {
            let mut b = [0u8; 8];
            for (d, s) in b.iter_mut().zip(key.iter().skip(skip)) {
                *d = *s;
            }
            proptest::prop_assert_eq!(window(&key, skip), u64::from_be_bytes(b));
            let m = KeyMap::with_prefix(key.get(..skip.min(key.len())).unwrap_or_default().to_vec());
            proptest::prop_assert_eq!(m.map_member(&key), m.map(&key));
        }
    }

    #[test]
    fn ordinals_count_the_extra_versions() {
        // Values 0..5 with 1, 3, 1, 2, 1 entries: firsts 0, 1, 4, 5, 7; 8 entries.
        let o = Ordinals::from_firsts(&[0, 1, 4, 5, 7], 8);
        let got: Vec<u64> = (0..6).map(|d| o.ordinal(d)).collect();
        assert_eq!(got, vec![0, 1, 4, 5, 7, 8]);
        let mut b = Vec::new();
        o.encode(&mut b);
        assert_eq!(Ordinals::decode(&mut Cursor::new(&b), "t").unwrap(), o);
        assert_eq!(o.memory_bytes(), 16);
        let plain = Ordinals::from_firsts(&[0, 1, 2], 3);
        assert_eq!(plain.memory_bytes(), 0);
        assert_eq!(plain.ordinal(2), 2);
        // Corrections out of order or outside the table are refused.
        let mut bad = Vec::new();
        Ordinals::from_firsts(&[0, 1, 4, 5, 7], 6).encode(&mut bad);
        assert!(Ordinals::decode(&mut Cursor::new(&bad), "t").is_err());
    }
}
