//! The store's write-ahead log: the durable log of [`crate::log`] with
//! [`WalOp`] records (`u64` puts and deletes).
//!
//! The segment format, group commit and torn-tail recovery are
//! [`crate::log`]'s; this module names the store's record type and keeps the
//! log's items at their `strata::db::wal` paths. See `docs/format/db.md` and
//! `docs/format/log.md`.

use crate::Result;
use crate::format::bytes::get_u64;
use crate::log::LogRecord;
pub use crate::log::SyncPolicy;
use crate::storage::Storage;

/// Bytes of one encoded [`WalOp`]: tag u8, key u64, value u64.
const OP_LEN: usize = 17;

/// One write operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalOp {
    /// Insert or overwrite.
    Put(u64, u64),
    /// Remove.
    Delete(u64),
}

impl WalOp {
    /// The key written.
    pub fn key(&self) -> u64 {
        match self {
            WalOp::Put(k, _) | WalOp::Delete(k) => *k,
        }
    }
}

/// `tag u8 (1 put, 2 delete) | key u64 | value u64 (0 for a delete)`.
impl LogRecord for WalOp {
    const MIN_LEN: usize = OP_LEN;

    fn encode(&self, out: &mut Vec<u8>) {
        let (tag, k, v) = match *self {
            WalOp::Put(k, v) => (1u8, k, v),
            WalOp::Delete(k) => (2u8, k, 0),
        };
        out.push(tag);
        out.extend_from_slice(&k.to_le_bytes());
        out.extend_from_slice(&v.to_le_bytes());
    }

    fn decode(bytes: &[u8]) -> std::result::Result<(Self, usize), String> {
        let tag = bytes.first().copied().unwrap_or(0);
        let (Some(k), Some(v)) = (get_u64(bytes, 1), get_u64(bytes, 9)) else {
            return Err("op cut".into());
        };
        match tag {
            1 => Ok((WalOp::Put(k, v), OP_LEN)),
            2 => Ok((WalOp::Delete(k), OP_LEN)),
            t => Err(format!("unknown op tag {t}")),
        }
    }
}

/// What recovery found in a segment.
pub(super) type Replay = crate::log::Replay<WalOp>;
/// Appends batches to one log segment with group commit.
pub type WalWriter = crate::log::WalWriter<WalOp>;

/// Reads every frame of a segment. `last` says whether it is the newest
/// segment (only there may a torn tail be dropped). See [`crate::log::replay`].
pub fn replay(storage: &dyn Storage, last: bool) -> Result<Replay> {
    crate::log::replay(storage, last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::log::WAL_HEADER_LEN;
    use crate::storage::{Directory, FaultKind, FaultOp, FaultyDirectory, MemDirectory};

    #[test]
    fn append_and_replay() {
        let dir = MemDirectory::new();
        let f = dir.create("wal").unwrap();
        let w = WalWriter::create(f.clone(), SyncPolicy::Always).unwrap();
        w.append(1, &[WalOp::Put(5, 50), WalOp::Delete(7)]).unwrap();
        w.append(2, &[WalOp::Put(u64::MAX, u64::MAX)]).unwrap();
        let r = replay(f.as_ref(), true).unwrap();
        assert_eq!(r.batches.len(), 2);
        assert_eq!(r.batches[0].ops, vec![WalOp::Put(5, 50), WalOp::Delete(7)]);
        assert_eq!(r.batches[1].seq, 2);
        assert_eq!(r.valid_len, w.len());
        assert_eq!(r.torn_bytes, 0);
    }

    #[test]
    fn group_commit_from_many_threads() {
        let dir = MemDirectory::new();
        let f = dir.create("wal").unwrap();
        let w = Arc::new(WalWriter::create(f.clone(), SyncPolicy::Always).unwrap());
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let w = w.clone();
                s.spawn(move || {
                    for i in 0..200u64 {
                        w.append(t * 1000 + i, &[WalOp::Put(t * 1000 + i, i)]).unwrap();
                    }
                });
            }
        });
        let r = replay(f.as_ref(), true).unwrap();
        assert_eq!(r.batches.len(), 800);
        let mut seqs: Vec<u64> = r.batches.iter().map(|b| b.seq).collect();
        seqs.sort_unstable();
        seqs.dedup();
        assert_eq!(seqs.len(), 800);
    }

    #[test]
    fn torn_tail_is_dropped_but_middle_corruption_is_an_error() {
        let dir = FaultyDirectory::new();
        let f = dir.create("wal").unwrap();
        let w = WalWriter::create(f.clone(), SyncPolicy::Always).unwrap();
        for i in 0..10u64 {
            w.append(i, &[WalOp::Put(i, i); 40]).unwrap();
        }
        let good = w.len();
        // A torn write of the next frame: only its first half reaches the file.
        dir.plan().inject(FaultOp::Write, 0, FaultKind::TornWrite, false);
        assert!(w.append(10, &[WalOp::Put(99, 99); 60]).is_err());
        let r = replay(f.as_ref(), true).unwrap();
        assert_eq!(r.batches.len(), 10);
        assert_eq!(r.valid_len, good);
        assert!(r.torn_bytes > 0);
        // The same bytes in an older segment are corruption.
        assert!(replay(f.as_ref(), false).unwrap_err().is_corruption());
        // A flipped byte in the middle is corruption even in the last segment.
        let mem = dir.mem().file("wal").unwrap();
        mem.set_len(good).unwrap();
        mem.corrupt_byte(WAL_HEADER_LEN + 30);
        assert!(replay(f.as_ref(), true).unwrap_err().is_corruption());
    }

    #[test]
    fn reopen_continues_after_the_valid_prefix() {
        let dir = MemDirectory::new();
        let f = dir.create("wal").unwrap();
        let w = WalWriter::create(f.clone(), SyncPolicy::Never).unwrap();
        w.append(1, &[WalOp::Put(1, 1)]).unwrap();
        f.write_at(w.len(), &[0xAB; 5]).unwrap(); // garbage tail
        let r = replay(f.as_ref(), true).unwrap();
        assert_eq!(r.torn_bytes, 5);
        let w2 = WalWriter::reopen(f.clone(), SyncPolicy::Always, r.header.unwrap(), r.valid_len, 0).unwrap();
        w2.append(2, &[WalOp::Delete(1)]).unwrap();
        let r = replay(f.as_ref(), true).unwrap();
        assert_eq!(r.batches.len(), 2);
        assert_eq!(r.torn_bytes, 0);
    }

    #[test]
    fn damaged_length_or_zero_tail() {
        let dir = MemDirectory::new();
        let f = dir.create("wal").unwrap();
        let w = WalWriter::create(f.clone(), SyncPolicy::Always).unwrap();
        for i in 0..5u64 {
            w.append(i, &[WalOp::Put(i, i)]).unwrap();
        }
        let good = w.len();
        // A zero-filled tail (space allocated, never written) is torn.
        f.write_at(good, &[0u8; 300]).unwrap();
        let r = replay(f.as_ref(), true).unwrap();
        assert_eq!((r.batches.len(), r.valid_len, r.torn_bytes), (5, good, 300));
        f.set_len(good).unwrap();
        // A flipped bit in the length of a middle frame is never trusted,
        // even when the damaged length would reach past the end of the file.
        let mem = dir.file("wal").unwrap();
        mem.corrupt_byte(WAL_HEADER_LEN + 3);
        assert!(replay(f.as_ref(), true).unwrap_err().is_corruption());
    }

    #[test]
    fn no_write_after_a_failed_group() {
        let dir = FaultyDirectory::new();
        let f = dir.create("wal").unwrap();
        let w = Arc::new(WalWriter::create(f.clone(), SyncPolicy::Always).unwrap());
        dir.plan().inject(FaultOp::Sync, 0, FaultKind::Eio, true);
        let oks = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u64)
                .map(|t| {
                    let w = w.clone();
                    s.spawn(move || {
                        (0..50u64)
                            .filter(|&i| w.append(t * 100 + i, &[WalOp::Put(i, i)]).is_ok())
                            .count()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
        });
        assert_eq!(oks, 0, "nothing is acknowledged once a sync failed");
        assert!(w.is_failed());
        assert!(w.sync().is_err());
    }

    #[test]
    fn sync_failure_poisons_the_log() {
        let dir = FaultyDirectory::new();
        let f = dir.create("wal").unwrap();
        let w = WalWriter::create(f, SyncPolicy::Always).unwrap();
        dir.plan().inject(FaultOp::Sync, 0, FaultKind::Eio, false);
        assert!(w.append(1, &[WalOp::Put(1, 1)]).is_err());
        assert!(
            w.append(2, &[WalOp::Put(2, 2)]).is_err(),
            "no write is acknowledged after a failed sync"
        );
    }
}
