//! Log segments: a checked header, checksummed frames of batches, torn-tail
//! recovery.
//!
//! A log segment is a header followed by *frames*. The version-2 header (40
//! bytes) is magic `STRATAWL` u64, version u32, reserved u32, the store id
//! u64, the segment id u64, the crc32c of the 32 bytes before it u32,
//! reserved u32; version 1 (still read) is the first 16 bytes only. Every
//! write to the file is one frame holding one or more batches (group commit:
//! concurrent writers' batches share a write and a sync). A frame, all
//! integers little-endian:
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
//! in order. In the newest segment a *torn tail* (an incomplete frame: a
//! header cut by the end of the file, a frame whose length runs past it, a
//! damaged header followed only by zero bytes) is dropped; a complete last
//! frame whose payload fails its checksum is ambiguous and is dropped and
//! counted or refused ([`Recovery`]). Any other bad frame, and any bad frame
//! in an older segment, is [`Error::CorruptionAt`] naming the byte offset.
//! The decoders ([`decode_header`], [`parse_segment`], [`parse_frames`]) are
//! pure functions over bytes. See `docs/format/log.md`.

use crate::format::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::storage::Storage;
use crate::{Error, Result};

use super::record::LogRecord;

/// Magic number at the start of every log segment: `STRATAWL`.
pub const WAL_MAGIC: u64 = u64::from_le_bytes(*b"STRATAWL");
/// Format version of new log segments (2: the header names the store and the
/// segment and has a checksum).
pub const WAL_VERSION: u32 = 2;
/// The first version, still read: a 16-byte header without store or segment id.
pub const WAL_VERSION_1: u32 = 1;
/// Segment header of version 2: magic u64, version u32, reserved u32, store
/// id u64, segment id u64, crc32c of the 32 bytes before it u32, reserved u32.
pub const WAL_HEADER_LEN: u64 = 40;
/// Segment header of version 1: magic u64, version u32, reserved u32.
pub const WAL_HEADER_LEN_V1: u64 = 16;
/// Frame header: length u32, crc32c of the length u32, crc32c of the payload u32.
pub(crate) const FRAME_HEADER: usize = 12;
/// Batch header: sequence number u64, record count u32.
const BATCH_HEADER: usize = 12;

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Format version (1 or 2).
    pub version: u32,
    /// The id of the store the segment belongs to (`None` in version 1).
    pub store_id: Option<u64>,
    /// The segment's id, as written into it (`None` in version 1).
    pub segment: Option<u64>,
}

impl SegmentHeader {
    /// A version-2 header of segment `segment` of store `store_id`.
    pub fn new(store_id: u64, segment: u64) -> Self {
        SegmentHeader {
            version: WAL_VERSION,
            store_id: Some(store_id),
            segment: Some(segment),
        }
    }

    /// Bytes of the header on storage (where the first frame starts).
    pub fn len(&self) -> u64 {
        if self.version == WAL_VERSION_1 {
            WAL_HEADER_LEN_V1
        } else {
            WAL_HEADER_LEN
        }
    }

    /// Whether the header has no bytes (never: kept for the `len` convention).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The header's bytes (version 2 for a header with ids, else version 1).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len() as usize];
        put_u64(&mut out, 0, WAL_MAGIC);
        put_u32(&mut out, 8, self.version);
        if let (Some(store), Some(seg), WAL_VERSION) = (self.store_id, self.segment, self.version) {
            put_u64(&mut out, 16, store);
            put_u64(&mut out, 24, seg);
            let crc = crc32c::crc32c(out.get(..32).unwrap_or_default());
            put_u32(&mut out, 32, crc);
        }
        out
    }
}

/// Decodes the header at the start of segment bytes `bytes` of file `file`
/// (a pure function: the fuzz target's entry point). A short file is
/// [`Error::Truncated`], another magic [`Error::BadMagic`], a version other
/// than 1 or 2 [`Error::UnsupportedVersion`], a version-2 header failing its
/// checksum [`Error::CorruptionAt`] at byte offset 0.
pub fn decode_header(bytes: &[u8], file: &str) -> Result<SegmentHeader> {
    let truncated = |expected: u64| Error::Truncated {
        file: file.to_string(),
        expected,
        found: bytes.len() as u64,
    };
    let (Some(magic), Some(version)) = (get_u64(bytes, 0), get_u32(bytes, 8)) else {
        return Err(truncated(WAL_HEADER_LEN_V1));
    };
    if magic != WAL_MAGIC {
        return Err(Error::BadMagic {
            file: file.to_string(),
            expected: "strata write-ahead log",
            found: magic,
        });
    }
    match version {
        WAL_VERSION_1 => Ok(SegmentHeader {
            version,
            store_id: None,
            segment: None,
        }),
        WAL_VERSION => {
            let (Some(store), Some(seg), Some(crc), Some(head)) = (
                get_u64(bytes, 16),
                get_u64(bytes, 24),
                get_u32(bytes, 32),
                bytes.get(..32),
            ) else {
                return Err(truncated(WAL_HEADER_LEN));
            };
            if crc32c::crc32c(head) != crc || get_u32(bytes, 36) != Some(0) {
                return Err(Error::corruption_at(
                    file,
                    0,
                    "log segment header fails its checksum",
                ));
            }
            Ok(SegmentHeader::new(store, seg))
        }
        found => Err(Error::UnsupportedVersion {
            file: file.to_string(),
            found,
            supported: WAL_VERSION,
        }),
    }
}

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
    let bad = |what: &str| Error::corruption_at(file, offset, format!("log frame: {what}"));
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < payload.len() {
        let seq = get_u64(payload, pos).ok_or_else(|| bad("batch header cut"))?;
        let count_at = pos.checked_add(8).ok_or_else(|| bad("batch offset overflows"))?;
        let count = get_u32(payload, count_at).ok_or_else(|| bad("batch header cut"))? as usize;
        pos = pos
            .checked_add(BATCH_HEADER)
            .ok_or_else(|| bad("batch offset overflows"))?;
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
            pos = pos
                .checked_add(used)
                .filter(|&p| p <= payload.len())
                .ok_or_else(|| bad("record runs past the frame"))?;
            ops.push(op);
        }
        out.push(LogBatch { seq, ops });
    }
    Ok(out)
}

/// What recovery found in a segment.
#[derive(Debug, Clone)]
pub struct Replay<R> {
    /// The segment's header (`None` for a newest segment shorter than a
    /// header, whose header never became durable).
    pub header: Option<SegmentHeader>,
    /// Batches in log order.
    pub batches: Vec<LogBatch<R>>,
    /// Length of the valid prefix (where the next frame goes).
    pub valid_len: u64,
    /// Bytes after the valid prefix that were dropped (a torn tail, and a
    /// complete last frame whose payload failed its checksum).
    pub torn_bytes: u64,
    /// Complete frames that were dropped: at most one, the last frame of the
    /// newest segment when its payload fails its checksum (see [`Recovery`]).
    pub dropped_frames: u64,
}

/// How recovery treats a complete last frame of the newest segment whose
/// payload fails its checksum. Such a frame is ambiguous: a crash may have
/// persisted the frame's pages out of order (so it was never acknowledged),
/// or it was acknowledged and a byte has flipped since. A write cut short by
/// a crash persists a prefix of itself, so an *incomplete* frame (header cut,
/// length past the end, zero-filled) is never ambiguous and is always dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recovery {
    /// Drop the ambiguous frame, count it (`Replay::dropped_frames`) and log a
    /// warning (the default).
    #[default]
    Lenient,
    /// Refuse: [`Error::CorruptionAt`] naming the file and the frame's offset.
    Strict,
}

/// Reads every frame of a segment. `last` says whether it is the newest
/// segment (only there may a torn tail be dropped). The header is checked
/// (see [`decode_header`]) but not compared with a store or segment id.
pub fn replay<R: LogRecord>(storage: &dyn Storage, last: bool) -> Result<Replay<R>> {
    replay_with(storage, last, Recovery::Lenient)
}

/// [`replay`] with a choice of how an ambiguous last frame is treated.
pub fn replay_with<R: LogRecord>(storage: &dyn Storage, last: bool, mode: Recovery) -> Result<Replay<R>> {
    let name = storage.name().to_string();
    let len = storage.len()?;
    let size = usize::try_from(len).map_err(|_| Error::invalid("log segment too large"))?;
    let mut bytes = vec![0u8; size];
    storage.read_at(0, &mut bytes)?;
    parse_segment(&bytes, &name, last, mode)
}

/// Parses a whole segment held in `bytes` (file name `file`): the header,
/// then every frame, under the rules of [`replay`]. A pure function over
/// bytes (the fuzz target's entry point); never panics.
pub fn parse_segment<R: LogRecord>(
    bytes: &[u8],
    file: &str,
    last: bool,
    mode: Recovery,
) -> Result<Replay<R>> {
    let len = bytes.len() as u64;
    if len < WAL_HEADER_LEN_V1 && last {
        // Created but its header never became durable.
        return Ok(Replay {
            header: None,
            batches: Vec::new(),
            valid_len: 0,
            torn_bytes: len,
            dropped_frames: 0,
        });
    }
    let header = decode_header(bytes, file)?;
    let start = usize::try_from(header.len()).map_err(|_| Error::invalid("log header too large"))?;
    let mut out = parse_frames(bytes, start, file, last, mode)?;
    out.header = Some(header);
    Ok(out)
}

/// Parses the frames of segment bytes `bytes` from byte `start` on (the end
/// of the header). See [`replay`] and [`Recovery`]. Pure; never panics.
pub fn parse_frames<R: LogRecord>(
    bytes: &[u8],
    start: usize,
    file: &str,
    last: bool,
    mode: Recovery,
) -> Result<Replay<R>> {
    let size = bytes.len();
    let mut out = Replay {
        header: None,
        batches: Vec::new(),
        valid_len: 0,
        torn_bytes: 0,
        dropped_frames: 0,
    };
    let mut pos = start.min(size);
    while pos < size {
        let at = pos as u64;
        match check_frame(bytes, pos, size) {
            Frame::Good { end } => {
                let payload = bytes
                    .get(pos.saturating_add(FRAME_HEADER)..end)
                    .unwrap_or_default();
                out.batches.extend(decode_batches(payload, file, at)?);
                pos = end;
            }
            Frame::Torn if last => {
                out.torn_bytes = (size - pos) as u64;
                break;
            }
            Frame::BadLast if last && mode == Recovery::Lenient => {
                let dropped = (size - pos) as u64;
                ::log::warn!(
                    "{file}: dropped the last log frame at byte offset {at} ({dropped} bytes): its payload fails its checksum \
                     (a crash during its write, or damage to an acknowledged write; open with strict recovery to refuse)"
                );
                out.torn_bytes = dropped;
                out.dropped_frames = 1;
                break;
            }
            Frame::BadLast if last => {
                return Err(Error::corruption_at(
                    file,
                    at,
                    "the last log frame's payload fails its checksum (strict recovery drops nothing)",
                ));
            }
            Frame::Torn | Frame::BadLast => {
                return Err(Error::corruption_at(
                    file,
                    at,
                    "log frame is cut short or damaged at the end of a segment that is not the newest",
                ));
            }
            Frame::Bad(what) => {
                return Err(Error::corruption_at(file, at, format!("log frame: {what}")));
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
    /// The damage a write interrupted at the end of the file leaves: an
    /// incomplete frame, never acknowledged.
    Torn,
    /// A complete frame ending exactly at the end of the file whose payload
    /// fails its checksum: ambiguous (see [`Recovery`]).
    BadLast,
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
        Frame::BadLast
    } else {
        Frame::Bad("payload fails its checksum and is followed by more data")
    }
}
