//! A log as a numbered sequence of segments in a directory: naming, recovery
//! across segments, and starting a new segment.

use std::sync::Arc;

use crate::storage::{Directory, Storage};
use crate::{Error, Result};

use super::record::LogRecord;
use super::segment::{LogBatch, WAL_HEADER_LEN, replay};
use super::writer::{SyncPolicy, WalWriter};

/// File name of log segment `id`: `wal-NNNNNN.log` (at least six digits).
pub fn wal_name(id: u64) -> String {
    format!("wal-{id:06}.log")
}

/// The segment id of a log file name (`None` for any other name).
pub fn wal_id(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The log after recovery: the segment that takes the next writes.
#[derive(Debug)]
pub struct Recovered<R> {
    /// Writer of the newest segment, continuing after its valid prefix.
    pub writer: WalWriter<R>,
    /// Id of that segment.
    pub segment: u64,
    /// The highest sequence number replayed (`floor` if none was higher).
    pub max_seq: u64,
}

/// Replays the segments `>= log_start` of `dir` (whose file names are
/// `names`) in id order, handing every batch to `apply`, and opens the newest
/// segment for appending (creating segment `log_start` if there is none).
///
/// Every storage is opened through `wrap` (I/O accounting). A gap in the ids
/// is [`Error::Corruption`]; so is any damage that is not a torn tail of the
/// newest segment (see [`replay`]), which is dropped: the writer continues
/// at its valid prefix. `floor` is the highest sequence number known to be
/// used before the log starts.
pub fn recover<R: LogRecord>(
    dir: &dyn Directory,
    names: &[String],
    log_start: u64,
    floor: u64,
    sync: SyncPolicy,
    wrap: &dyn Fn(Arc<dyn Storage>) -> Arc<dyn Storage>,
    apply: impl FnMut(&LogBatch<R>),
) -> Result<Recovered<R>> {
    let (max_seq, tail) = replay_live(dir, names, log_start, floor, wrap, apply)?;
    let (writer, segment) = match tail {
        Some((id, st, len)) if len >= WAL_HEADER_LEN => (WalWriter::reopen(st, sync, len)?, id),
        Some((id, st, _)) => (WalWriter::create(st, sync)?, id),
        None => (create_segment(dir, log_start, sync, wrap)?, log_start),
    };
    Ok(Recovered {
        writer,
        segment,
        max_seq,
    })
}

/// [`recover`] for a read-only user: replays the same segments with the same
/// checks into `apply` and returns the highest sequence number replayed
/// (`floor` if none was higher), but changes nothing: a torn tail of the
/// newest segment is skipped, not truncated, and no segment is created.
pub fn replay_segments<R: LogRecord>(
    dir: &dyn Directory,
    names: &[String],
    log_start: u64,
    floor: u64,
    wrap: &dyn Fn(Arc<dyn Storage>) -> Arc<dyn Storage>,
    apply: impl FnMut(&LogBatch<R>),
) -> Result<u64> {
    Ok(replay_live(dir, names, log_start, floor, wrap, apply)?.0)
}

/// The newest segment after a replay: its id, storage and valid length.
type Tail = (u64, Arc<dyn Storage>, u64);

/// The replay shared by [`recover`] and [`replay_segments`]: the highest
/// sequence number and the newest segment, if any.
fn replay_live<R: LogRecord>(
    dir: &dyn Directory,
    names: &[String],
    log_start: u64,
    floor: u64,
    wrap: &dyn Fn(Arc<dyn Storage>) -> Arc<dyn Storage>,
    mut apply: impl FnMut(&LogBatch<R>),
) -> Result<(u64, Option<Tail>)> {
    let mut segs: Vec<u64> = names
        .iter()
        .filter_map(|n| wal_id(n))
        .filter(|&id| id >= log_start)
        .collect();
    segs.sort_unstable();
    for (want, &id) in (log_start..).zip(&segs) {
        if id != want {
            return Err(Error::corruption(
                format!("{}/{}", dir.describe(), wal_name(want)),
                0,
                format!("log segment {want} is missing (segment {id} exists)"),
            ));
        }
    }
    let mut max_seq = floor;
    let mut tail = None;
    for (i, &id) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let storage = wrap(dir.open(&wal_name(id))?);
        let r = replay::<R>(storage.as_ref(), last)?;
        for b in &r.batches {
            apply(b);
            max_seq = max_seq.max(b.seq);
        }
        if last {
            tail = Some((id, storage, r.valid_len));
        }
    }
    Ok((max_seq, tail))
}

/// Creates log segment `id` in `dir`: its header written and synced, then
/// the directory synced, so the segment survives a crash before any append.
pub(crate) fn create_segment<R: LogRecord>(
    dir: &dyn Directory,
    id: u64,
    sync: SyncPolicy,
    wrap: &dyn Fn(Arc<dyn Storage>) -> Arc<dyn Storage>,
) -> Result<WalWriter<R>> {
    let st = wrap(dir.create(&wal_name(id))?);
    let w = WalWriter::create(st, sync)?;
    dir.sync_dir()?;
    Ok(w)
}
