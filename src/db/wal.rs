//! The write-ahead log: checksummed frames, group commit, torn-tail recovery.
//!
//! A log segment is a 16-byte header (magic `STRATAWL` u64, version u32,
//! reserved u32) followed by *frames*. Every write to the file is one frame
//! holding one or more batches (group commit: concurrent writers' batches
//! share a write and a sync). A frame, all integers little-endian:
//!
//! ```text
//! +--------+---------+--------+----------------------------------------------+
//! | length | len_crc | crc    | payload: batches                             |
//! |  u32   |  u32    |  u32   | batch: seq u64 | count u32 | count × op      |
//! +--------+---------+--------+ op: tag u8 (1 put, 2 delete) | key u64 | value u64
//! ```
//! `len_crc` is the crc32c of the 4 length bytes, so a damaged length is
//! never trusted; `crc` is the crc32c of the payload. Recovery reads frames
//! in order. In the newest segment a *torn tail* is dropped with everything
//! after it: a header cut by the end of the file, a frame whose length runs
//! past the end of the file or ends exactly at it with a bad payload, or a
//! damaged header followed only by zero bytes. Any other bad frame, and any
//! bad frame in an older segment, is [`Error::Corruption`]. See
//! `docs/format/db.md`.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::format::bytes::{get_u32, get_u64, put_u32};
use crate::storage::Storage;
use crate::{Error, Result};

/// Magic number at the start of every log segment: `STRATAWL`.
pub const WAL_MAGIC: u64 = u64::from_le_bytes(*b"STRATAWL");
/// Format version of log segments.
pub const WAL_VERSION: u32 = 1;
/// Segment header: magic u64, version u32, reserved u32.
pub const WAL_HEADER_LEN: u64 = 16;
const FRAME_HEADER: usize = 12;
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

/// A batch as recovered from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalBatch {
    /// Sequence number of the batch.
    pub seq: u64,
    /// Its operations, in order.
    pub ops: Vec<WalOp>,
}

fn encode_batch(out: &mut Vec<u8>, seq: u64, ops: &[WalOp]) {
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        let (tag, k, v) = match *op {
            WalOp::Put(k, v) => (1u8, k, v),
            WalOp::Delete(k) => (2u8, k, 0),
        };
        out.push(tag);
        out.extend_from_slice(&k.to_le_bytes());
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn decode_batches(payload: &[u8], file: &str, offset: u64) -> Result<Vec<WalBatch>> {
    let bad = |what: &str| Error::corruption(file, offset, format!("log frame at byte {offset}: {what}"));
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < payload.len() {
        let seq = get_u64(payload, pos).ok_or_else(|| bad("batch header cut"))?;
        let count = get_u32(payload, pos + 8).ok_or_else(|| bad("batch header cut"))? as usize;
        pos += 12;
        let need = count.checked_mul(OP_LEN).ok_or_else(|| bad("batch too large"))?;
        let body = payload
            .get(pos..pos + need)
            .ok_or_else(|| bad("batch body cut"))?;
        let mut ops = Vec::with_capacity(count);
        for c in body.chunks_exact(OP_LEN) {
            let tag = c.first().copied().unwrap_or(0);
            let k = get_u64(c, 1).ok_or_else(|| bad("op cut"))?;
            let v = get_u64(c, 9).ok_or_else(|| bad("op cut"))?;
            ops.push(match tag {
                1 => WalOp::Put(k, v),
                2 => WalOp::Delete(k),
                t => return Err(bad(&format!("unknown op tag {t}"))),
            });
        }
        pos += need;
        out.push(WalBatch { seq, ops });
    }
    Ok(out)
}

/// What recovery found in a segment.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Batches in log order.
    pub batches: Vec<WalBatch>,
    /// Length of the valid prefix (where the next frame goes).
    pub valid_len: u64,
    /// Bytes of a torn tail that were dropped.
    pub torn_bytes: u64,
}

/// Reads every frame of a segment. `last` says whether it is the newest
/// segment (only there may a torn tail be dropped).
pub fn replay(storage: &dyn Storage, last: bool) -> Result<Replay> {
    let name = storage.name().to_string();
    let len = storage.len()?;
    if len < WAL_HEADER_LEN {
        if last {
            // Created but its header never became durable.
            return Ok(Replay {
                batches: Vec::new(),
                valid_len: 0,
                torn_bytes: len,
            });
        }
        return Err(Error::Truncated {
            file: name,
            expected: WAL_HEADER_LEN,
            found: len,
        });
    }
    let size = usize::try_from(len).map_err(|_| Error::invalid("log segment too large"))?;
    let mut bytes = vec![0u8; size];
    storage.read_at(0, &mut bytes)?;
    let magic = get_u64(&bytes, 0).unwrap_or(0);
    if magic != WAL_MAGIC {
        return Err(Error::BadMagic {
            file: name,
            expected: "strata write-ahead log",
            found: magic,
        });
    }
    let version = get_u32(&bytes, 8).unwrap_or(0);
    if version != WAL_VERSION {
        return Err(Error::UnsupportedVersion {
            file: name,
            found: version,
            supported: WAL_VERSION,
        });
    }
    let mut out = Replay::default();
    let mut pos = WAL_HEADER_LEN as usize;
    while pos < size {
        match check_frame(&bytes, pos, size) {
            Frame::Good { end } => {
                let payload = bytes.get(pos + FRAME_HEADER..end).unwrap_or_default();
                out.batches.extend(decode_batches(payload, &name, pos as u64)?);
                pos = end;
            }
            Frame::Torn if last => {
                out.torn_bytes = (size - pos) as u64;
                break;
            }
            Frame::Torn => {
                return Err(Error::corruption(
                    &name,
                    pos as u64,
                    format!("log frame at byte {pos} is cut short in a segment that is not the newest"),
                ));
            }
            Frame::Bad(what) => {
                return Err(Error::corruption(
                    &name,
                    pos as u64,
                    format!("log frame at byte {pos}: {what}"),
                ));
            }
        }
    }
    out.valid_len = pos as u64;
    Ok(out)
}

/// What recovery makes of the bytes at one frame position.
enum Frame {
    /// A valid frame ending at `end`.
    Good { end: usize },
    /// The damage a write interrupted at the end of the file leaves.
    Torn,
    /// Damage that no interrupted append explains.
    Bad(&'static str),
}

fn check_frame(bytes: &[u8], pos: usize, size: usize) -> Frame {
    let rest = bytes.get(pos..size).unwrap_or_default();
    let (Some(len), Some(len_crc), Some(crc)) = (get_u32(rest, 0), get_u32(rest, 4), get_u32(rest, 8)) else {
        // The header itself is cut by the end of the file.
        return Frame::Torn;
    };
    if crc32c::crc32c(&len.to_le_bytes()) != len_crc {
        // A zero-filled tail is space a crash allocated but never wrote.
        return if rest.iter().all(|&b| b == 0) {
            Frame::Torn
        } else {
            Frame::Bad("frame header fails its checksum")
        };
    }
    let Some(end) = pos
        .checked_add(FRAME_HEADER)
        .and_then(|p| p.checked_add(len as usize))
    else {
        return Frame::Bad("frame length overflows");
    };
    if end > size {
        return Frame::Torn;
    }
    let payload = bytes.get(pos + FRAME_HEADER..end).unwrap_or_default();
    if crc32c::crc32c(payload) == crc {
        Frame::Good { end }
    } else if end == size {
        Frame::Torn
    } else {
        Frame::Bad("payload fails its checksum and is followed by more data")
    }
}

/// When appends are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// Every write is synced before it is acknowledged (group commit).
    #[default]
    Always,
    /// Synced by a background thread every so many milliseconds.
    EveryMs(u64),
    /// Never synced explicitly (the OS decides).
    Never,
}

#[derive(Debug)]
struct WriterState {
    /// Encoded batches waiting for the next frame.
    pending: Vec<u8>,
    /// Tickets: batches appended so far, and written (+ synced if asked).
    next_ticket: u64,
    done_ticket: u64,
    /// Whether a leader is writing now.
    writing: bool,
    /// File offset of the next frame.
    offset: u64,
    /// A write or sync failure poisons the log: later writes fail.
    failed: Option<String>,
}

/// Appends batches to one log segment with group commit.
#[derive(Debug)]
pub struct WalWriter {
    storage: Arc<dyn Storage>,
    sync: SyncPolicy,
    state: Mutex<WriterState>,
    cv: Condvar,
}

impl WalWriter {
    /// Starts a new segment on an empty storage (writes and syncs the header).
    pub fn create(storage: Arc<dyn Storage>, sync: SyncPolicy) -> Result<Self> {
        let mut hdr = [0u8; WAL_HEADER_LEN as usize];
        hdr[..8].copy_from_slice(&WAL_MAGIC.to_le_bytes());
        put_u32(&mut hdr, 8, WAL_VERSION);
        storage.set_len(0)?;
        storage.write_at(0, &hdr)?;
        storage.sync()?;
        Ok(Self::resume(storage, sync, WAL_HEADER_LEN))
    }

    /// Continues a recovered segment at `valid_len` (dropping a torn tail).
    pub fn reopen(storage: Arc<dyn Storage>, sync: SyncPolicy, valid_len: u64) -> Result<Self> {
        storage.set_len(valid_len)?;
        storage.sync()?;
        Ok(Self::resume(storage, sync, valid_len))
    }

    fn resume(storage: Arc<dyn Storage>, sync: SyncPolicy, offset: u64) -> Self {
        WalWriter {
            storage,
            sync,
            state: Mutex::new(WriterState {
                pending: Vec::new(),
                next_ticket: 0,
                done_ticket: 0,
                writing: false,
                offset,
                failed: None,
            }),
            cv: Condvar::new(),
        }
    }

    /// Bytes in the segment (written frames).
    pub fn len(&self) -> u64 {
        self.state.lock().offset
    }

    /// Whether the segment holds no frame.
    pub fn is_empty(&self) -> bool {
        self.len() <= WAL_HEADER_LEN
    }

    /// Appends a batch and returns once it is written (and synced under
    /// [`SyncPolicy::Always`]). Concurrent callers share writes and syncs.
    pub fn append(&self, seq: u64, ops: &[WalOp]) -> Result<()> {
        let mut st = self.state.lock();
        if let Some(e) = &st.failed {
            return Err(Error::Io {
                file: self.storage.name().to_string(),
                source: std::io::Error::other(format!("log is unusable after an earlier failure: {e}")),
            });
        }
        encode_batch(&mut st.pending, seq, ops);
        st.next_ticket += 1;
        let ticket = st.next_ticket;
        loop {
            if st.done_ticket >= ticket {
                return match &st.failed {
                    Some(e) => Err(Error::Io {
                        file: self.storage.name().to_string(),
                        source: std::io::Error::other(e.clone()),
                    }),
                    None => Ok(()),
                };
            }
            if let Some(e) = &st.failed {
                // An earlier frame failed: never write (or sync) after it, so
                // no later batch is acknowledged past a lost one.
                return Err(Error::Io {
                    file: self.storage.name().to_string(),
                    source: std::io::Error::other(format!("log is unusable after an earlier failure: {e}")),
                });
            }
            if !st.writing {
                // Become the leader: write everything pending as one frame.
                st.writing = true;
                let payload = std::mem::take(&mut st.pending);
                let upto = st.next_ticket;
                let offset = st.offset;
                drop(st);
                let result = self.write_frame(offset, &payload);
                st = self.state.lock();
                st.writing = false;
                match result {
                    Ok(n) => st.offset += n,
                    Err(e) => st.failed = Some(e.to_string()),
                }
                st.done_ticket = upto;
                self.cv.notify_all();
                continue;
            }
            self.cv.wait(&mut st);
        }
    }

    fn write_frame(&self, offset: u64, payload: &[u8]) -> Result<u64> {
        let len = u32::try_from(payload.len())
            .map_err(|_| Error::invalid(format!("log frame of {} bytes is too large", payload.len())))?;
        let mut frame = Vec::with_capacity(FRAME_HEADER + payload.len());
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&crc32c::crc32c(&len.to_le_bytes()).to_le_bytes());
        frame.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        frame.extend_from_slice(payload);
        self.storage.write_at(offset, &frame)?;
        if self.sync == SyncPolicy::Always {
            self.storage.sync()?;
        }
        Ok(frame.len() as u64)
    }

    /// Syncs everything written so far. A failed sync poisons the log like a
    /// failed append (the kernel may have dropped the unsynced pages).
    pub fn sync(&self) -> Result<()> {
        {
            let st = self.state.lock();
            if let Some(e) = &st.failed {
                return Err(Error::Io {
                    file: self.storage.name().to_string(),
                    source: std::io::Error::other(format!("log is unusable after an earlier failure: {e}")),
                });
            }
        }
        let r = self.storage.sync();
        if let Err(e) = &r {
            self.state.lock().failed = Some(e.to_string());
        }
        r
    }

    /// Whether an earlier write or sync failed (the log refuses appends).
    pub fn is_failed(&self) -> bool {
        self.state.lock().failed.is_some()
    }

    /// The sync policy.
    pub fn policy(&self) -> SyncPolicy {
        self.sync
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
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
        let w2 = WalWriter::reopen(f.clone(), SyncPolicy::Always, r.valid_len).unwrap();
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
