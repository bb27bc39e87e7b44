//! Internal keys and the iterator contract shared by every part of the LSM
//! store (memtable, tables, merging iterators, compaction).
//!
//! An *internal key* is the user key followed by an 8-byte trailer,
//! `(seq << 8) | kind` in big-endian: `user_key ++ be64(seq << 8 | kind)`.
//! Internal keys order by user key ascending (bytewise), then by sequence
//! number *descending* (newest first), then by kind descending, so the first
//! entry at or after `lookup_key(k, s)` is the newest version of `k` visible
//! at snapshot `s`. Bytewise comparison of whole internal keys is *not* this
//! order (a user key may be a prefix of another): use [`compare`].

use std::cmp::Ordering;

use crate::{Error, Result};

/// Bytes of the trailer after the user key.
pub const TRAILER_LEN: usize = 8;
/// Largest sequence number (56 bits).
pub const MAX_SEQ: u64 = (1 << 56) - 1;
/// Largest user key: 64 KiB.
pub const MAX_KEY_LEN: usize = 64 * 1024;
/// Largest value: 64 MiB.
pub const MAX_VALUE_LEN: usize = 64 * 1024 * 1024;

/// What an entry says about its user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key is deleted as of this sequence number.
    Delete = 0,
    /// A value.
    Put = 1,
}

impl ValueKind {
    /// The kind stored in a trailer byte.
    pub fn from_byte(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            _ => None,
        }
    }
}

/// Checks a user key and value against the limits (a clear error, not a panic).
pub fn check_entry(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "key of {} bytes is longer than the limit of {MAX_KEY_LEN} bytes",
            key.len()
        )));
    }
    if let Some(v) = value {
        if v.len() > MAX_VALUE_LEN {
            return Err(Error::invalid(format!(
                "value of {} bytes is longer than the limit of {MAX_VALUE_LEN} bytes",
                v.len()
            )));
        }
    }
    Ok(())
}

/// Appends the internal key of `(user_key, seq, kind)` to `out`.
pub fn encode_into(out: &mut Vec<u8>, user_key: &[u8], seq: u64, kind: ValueKind) {
    out.extend_from_slice(user_key);
    out.extend_from_slice(&((seq.min(MAX_SEQ) << 8) | kind as u64).to_be_bytes());
}

/// The internal key of `(user_key, seq, kind)`.
pub fn encode(user_key: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    encode_into(&mut out, user_key, seq, kind);
    out
}

/// The key to seek to for the newest version of `user_key` visible at
/// snapshot `seq` (the largest kind sorts first among equal sequence numbers).
pub fn lookup_key(user_key: &[u8], seq: u64) -> Vec<u8> {
    encode(user_key, seq, ValueKind::Put)
}

/// An internal key split into its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// Sequence number.
    pub seq: u64,
    /// Put or delete.
    pub kind: ValueKind,
}

/// Splits an internal key; `None` if it is shorter than a trailer or its
/// kind byte is unknown (callers turn that into a corruption error naming
/// their file).
pub fn parse(ikey: &[u8]) -> Option<Parsed<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let (user_key, trailer) = ikey.split_at(split);
    let t = u64::from_be_bytes(trailer.try_into().ok()?);
    Some(Parsed {
        user_key,
        seq: t >> 8,
        kind: ValueKind::from_byte((t & 0xff) as u8)?,
    })
}

/// The user key of an internal key (all of it if it is too short).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    ikey.get(..ikey.len().saturating_sub(TRAILER_LEN)).unwrap_or(ikey)
}

fn trailer(ikey: &[u8]) -> u64 {
    let split = ikey.len().saturating_sub(TRAILER_LEN);
    ikey.get(split..)
        .and_then(|t| <[u8; 8]>::try_from(t).ok())
        .map_or(0, u64::from_be_bytes)
}

/// The order of internal keys: user key ascending, then trailer descending
/// (newest sequence number first).
pub fn compare(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a)
        .cmp(user_key(b))
        .then_with(|| trailer(b).cmp(&trailer(a)))
}

/// A forward iterator over internal keys in [`compare`] order: memtables,
/// tables, levels and the merging iterator all implement it (LevelDB's
/// iterator contract). `key`/`value` may be called only while [`valid`](Self::valid).
pub trait InternalIterator: Send {
    /// Positions at the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Moves to the next entry.
    fn next(&mut self) -> Result<()>;
    /// Whether the iterator is at an entry.
    fn valid(&self) -> bool;
    /// The current internal key.
    fn key(&self) -> &[u8];
    /// The current value (empty for a tombstone).
    fn value(&self) -> &[u8];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_user_key_then_newest_first() {
        let a = encode(b"a", 5, ValueKind::Put);
        let a_old = encode(b"a", 3, ValueKind::Put);
        let ab = encode(b"ab", 9, ValueKind::Put);
        let del = encode(b"a", 5, ValueKind::Delete);
        assert_eq!(compare(&a, &a_old), Ordering::Less);
        assert_eq!(compare(&a_old, &ab), Ordering::Less);
        assert_eq!(compare(&a, &ab), Ordering::Less);
        assert_eq!(compare(&a, &del), Ordering::Less);
        assert_eq!(compare(&lookup_key(b"a", 4), &a_old), Ordering::Less);
        assert_eq!(compare(&a, &lookup_key(b"a", 4)), Ordering::Less);
    }

    #[test]
    fn parse_round_trips_and_rejects_short_keys() {
        let k = encode(b"key", 77, ValueKind::Delete);
        let p = parse(&k).unwrap();
        assert_eq!((p.user_key, p.seq, p.kind), (&b"key"[..], 77, ValueKind::Delete));
        assert!(parse(b"short").is_none());
        let mut bad = encode(b"k", 1, ValueKind::Put);
        *bad.last_mut().unwrap() = 9;
        assert!(parse(&bad).is_none());
    }

    #[test]
    fn limits_are_errors() {
        assert!(check_entry(&vec![0; MAX_KEY_LEN + 1], None).is_err());
        assert!(check_entry(b"k", Some(&vec![0; MAX_VALUE_LEN + 1])).is_err());
        assert!(check_entry(&vec![0; MAX_KEY_LEN], Some(b"")).is_ok());
    }
}
