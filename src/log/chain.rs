//! The live segments of a log as its manifest records them (a *chain*):
//! which store the segments belong to, the first live segment, every sealed
//! segment's final length and last sequence number, and the newest segment.
//! Recovery (`segments.rs`) checks the files against it, so a missing,
//! foreign, reordered or shortened segment is corruption, never lost writes.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// A segment that no longer takes writes: its final length and the highest
/// sequence number of the log up to and including it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedSegment {
    /// The segment's id.
    pub id: u64,
    /// Its length in bytes when it was sealed (header and frames).
    pub len: u64,
    /// The highest sequence number in the log up to and including this
    /// segment (the previous one's if it holds no batch).
    pub last_seq: u64,
}

/// The live segments of a log, kept in the store's manifest.
///
/// Invariant (checked by [`check`](WalChain::check)): `sealed` holds the
/// segments `first, first + 1, …, newest - 1` in order, and their
/// `last_seq`s never decrease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalChain {
    /// The store's random id, written into every version-2 segment header.
    pub store_id: u64,
    /// The first live segment.
    pub first: u64,
    /// The sealed segments, in id order.
    pub sealed: Vec<SealedSegment>,
    /// The newest segment: the one that takes writes.
    pub newest: u64,
}

impl WalChain {
    /// The chain of a new log whose only segment is `first`.
    pub fn new(store_id: u64, first: u64) -> Self {
        WalChain {
            store_id,
            first,
            sealed: Vec::new(),
            newest: first,
        }
    }

    /// A fresh random store id (never 0, which marks a segment outside any
    /// store).
    pub fn new_store_id() -> u64 {
        loop {
            let id: u64 = rand::random();
            if id != 0 {
                return id;
            }
        }
    }

    /// Checks the invariant; a violation is [`Error::Corruption`] naming
    /// `file` (the manifest).
    pub fn check(&self, file: &str) -> Result<()> {
        let bad = |what: String| Error::corruption(file, 0, format!("log chain: {what}"));
        let mut prev_seq = 0u64;
        for (want, s) in (self.first..).zip(&self.sealed) {
            if s.id != want {
                return Err(bad(format!(
                    "sealed segment {} where segment {want} belongs",
                    s.id
                )));
            }
            if s.last_seq < prev_seq {
                return Err(bad(format!(
                    "sealed segment {} ends at sequence {} before {prev_seq}",
                    s.id, s.last_seq
                )));
            }
            prev_seq = s.last_seq;
        }
        let count = u64::try_from(self.sealed.len()).map_err(|_| bad("too many segments".into()))?;
        if self.first.checked_add(count) != Some(self.newest) {
            return Err(bad(format!(
                "{count} sealed segments from {} do not end before the newest, {}",
                self.first, self.newest
            )));
        }
        if self.store_id == 0 {
            return Err(bad("store id 0".into()));
        }
        Ok(())
    }

    /// The chain after a rotation: the newest segment sealed at `len` bytes
    /// with `last_seq`, and segment `newest + 1` the newest.
    pub fn sealed_at(&self, len: u64, last_seq: u64) -> Self {
        let mut c = self.clone();
        c.sealed.push(SealedSegment {
            id: self.newest,
            len,
            last_seq,
        });
        c.newest = self.newest.saturating_add(1);
        c
    }

    /// The chain after the segments before `first` were merged away (a
    /// `first` past the newest segment keeps the newest).
    pub fn starting_at(&self, first: u64) -> Self {
        let first = first.min(self.newest);
        let mut c = self.clone();
        c.sealed.retain(|s| s.id >= first);
        c.first = c.first.max(first);
        c
    }

    /// The recorded entry of sealed segment `id`, if it is one.
    pub fn sealed_segment(&self, id: u64) -> Option<&SealedSegment> {
        let i = usize::try_from(id.checked_sub(self.first)?).ok()?;
        self.sealed.get(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_and_start_keep_the_invariant() {
        let c = WalChain::new(7, 3);
        c.check("m").unwrap();
        let c = c.sealed_at(100, 5).sealed_at(40, 5).sealed_at(90, 9);
        c.check("m").unwrap();
        assert_eq!((c.first, c.newest, c.sealed.len()), (3, 6, 3));
        assert_eq!(c.sealed_segment(4).map(|s| s.len), Some(40));
        assert_eq!(c.sealed_segment(6), None);
        let d = c.starting_at(5);
        d.check("m").unwrap();
        assert_eq!((d.first, d.sealed.len()), (5, 1));
        let mut bad = c.clone();
        bad.sealed.swap(0, 1);
        assert!(bad.check("m").unwrap_err().is_corruption());
        let mut bad = c.clone();
        bad.newest += 1;
        assert!(bad.check("m").unwrap_err().is_corruption());
        let mut bad = c;
        bad.sealed[2].last_seq = 1;
        assert!(bad.check("m").unwrap_err().is_corruption());
    }
}
