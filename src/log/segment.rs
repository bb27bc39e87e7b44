//! Log segments: checksummed frames of batches, torn-tail recovery.
//!
//! A log segment is a 16-byte header (magic `STRATAWL` u64, version u32,
//! reserved u32) followed by *frames*. Every write to the file is one frame
//! holding one or more batches (group commit: concurrent writers' batches
//! share a write and a sync). A frame, all integers little-endian:
//!
//! ```text
//! +--------+---------+--------+----------------------------------------------+
//! | length | len_crc | crc    | payload: batches                             |
//! |  u32   |  u32    |  u32   | batch: seq u64 | count u32 | count × record  |
//! +--------+---------+--------+----------------------------------------------+
//! ```
//! A record's bytes are its [`LogRecord`] encoding (for the store's `u64`
//! operations: tag u8 (1 put, 2 delete) | key u64 | value u64).
//! `len_crc` is the crc32c of the 4 length bytes, so a damaged length is
//! never trusted; `crc` is the crc32c of the payload. Recovery reads frames
//! in order. In the newest segment a *torn tail* is dropped with everything
//! after it: a header cut by the end of the file, a frame whose length runs
//! past the end of the file or ends exactly at it with a bad payload, or a
//! damaged header followed only by zero bytes. Any other bad frame, and any
//! bad frame in an older segment, is [`Error::Corruption`]. See
//! `docs/format/log.md`.

use crate::format::bytes::{get_u32, get_u64};
use crate::storage::Storage;
use crate::{Error, Result};

use super::record::LogRecord;

/// Magic number at the start of every log segment: `STRATAWL`.
pub const WAL_MAGIC: u64 = u64::from_le_bytes(*b"STRATAWL");
/// Format version of log segments.
pub const WAL_VERSION: u32 = 1;
/// Segment header: magic u64, version u32, reserved u32.
pub const WAL_HEADER_LEN: u64 = 16;
/// Frame header: length u32, crc32c of the length u32, crc32c of the payload u32.
pub(crate) const FRAME_HEADER: usize = 12;
/// Batch header: sequence number u64, record count u32.
const BATCH_HEADER: usize = 12;

/// A batch as recovered from the log: one sequence number, its records in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBatch<R> {
    /// Sequence number of the batch.
    pub seq: u64,
    /// Its operations, in order.
    pub ops: Vec<R>,
}

/// Appends one batch (`seq u64 | count u32 | count × record`) to a frame payload.
pub(crate) fn encode_batch<R: LogRecord>(out: &mut Vec<u8>, seq: u64, ops: &[R]) {
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        op.encode(out);
    }
}

fn decode_batches<R: LogRecord>(payload: &[u8], file: &str, offset: u64) -> Result<Vec<LogBatch<R>>> {
    let bad = |what: &str| Error::corruption(file, offset, format!("log frame at byte {offset}: {what}"));
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < payload.len() {
        let seq = get_u64(payload, pos).ok_or_else(|| bad("batch header cut"))?;
        let count = get_u32(payload, pos + 8).ok_or_else(|| bad("batch header cut"))? as usize;
        pos += BATCH_HEADER;
        let rest = payload.len().saturating_sub(pos);
        let need = count
            .checked_mul(R::MIN_LEN)
            .ok_or_else(|| bad("batch too large"))?;
        if need > rest {
            return Err(bad("batch body cut"));
        }
        // `count` is bounded by the payload, so this allocation is too.
        let mut ops = Vec::with_capacity(count);
        for _ in 0..count {
            let body = payload.get(pos..).unwrap_or_default();
            let (op, used) = R::decode(body).map_err(|what| bad(&what))?;
            pos += used;
            ops.push(op);
        }
        out.push(LogBatch { seq, ops });
    }
    Ok(out)
}

/// What recovery found in a segment.
#[derive(Debug, Clone)]
pub struct Replay<R> {
    /// Batches in log order.
    pub batches: Vec<LogBatch<R>>,
    /// Length of the valid prefix (where the next frame goes).
    pub valid_len: u64,
    /// Bytes of a torn tail that were dropped.
    pub torn_bytes: u64,
}

/// Reads every frame of a segment. `last` says whether it is the newest
/// segment (only there may a torn tail be dropped).
pub fn replay<R: LogRecord>(storage: &dyn Storage, last: bool) -> Result<Replay<R>> {
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
    let mut out = Replay {
        batches: Vec::new(),
        valid_len: 0,
        torn_bytes: 0,
    };
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
