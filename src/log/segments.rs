//! A log as a numbered sequence of segments in a directory: naming, recovery
//! of the chain the manifest records, and starting a new segment.
//!
//! A store whose manifest records a [`WalChain`] replays exactly the
//! segments `first ..= newest` and checks each against it: the file must
//! exist, its version-2 header must name the store and the segment, a sealed
//! segment must have its recorded length and end at its recorded sequence
//! number. A segment past the newest holding at most a header is the
//! leftover of a rotation interrupted before its manifest was published;
//! anything more there is corruption. A store whose manifest records no
//! chain (written before version 2) replays its version-1 segments from
//! `log_start` as before; a writer then *upgrades* it: seals every segment,
//! creates a version-2 segment and returns the new chain for the caller to
//! publish.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::format::bytes::get_u32;
use crate::storage::{Directory, Storage};
use crate::{Error, Result};

use super::chain::{SealedSegment, WalChain};
use super::record::LogRecord;
use super::segment::{
    LogBatch, Recovery, Replay, SegmentHeader, WAL_HEADER_LEN, WAL_VERSION, WAL_VERSION_1, parse_segment,
};
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

/// What recovery dropped from the end of the newest segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Complete frames whose payload failed its checksum (see [`Recovery`]).
    pub frames: u64,
    /// Bytes dropped: those frames and any torn (incomplete) tail.
    pub bytes: u64,
    /// Byte offset in the newest segment where the dropped bytes began (its
    /// valid length; 0 when nothing was dropped).
    pub offset: u64,
}

/// Where a log lives and how to recover it.
pub struct LogSpec<'a> {
    /// The names in the directory (its listing).
    pub names: &'a [String],
    /// The chain the manifest records; `None` for a store from before
    /// version 2 (its version-1 segments `>= log_start` are replayed).
    pub chain: Option<&'a WalChain>,
    /// First live segment when there is no chain (ignored otherwise).
    pub log_start: u64,
    /// The highest sequence number known to be used before the log starts.
    pub floor: u64,
    /// How an ambiguous last frame is treated.
    pub recovery: Recovery,
    /// Wraps every storage opened (I/O accounting).
    pub wrap: &'a dyn Fn(Arc<dyn Storage>) -> Arc<dyn Storage>,
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
    /// What was dropped from the end of the newest segment.
    pub dropped: Dropped,
    /// The chain now on storage.
    pub chain: WalChain,
    /// Whether `chain` is new (a store from before version 2 was upgraded):
    /// the caller must publish it in its manifest before writing.
    pub upgraded: bool,
}

/// What a read-only replay found.
#[derive(Debug, Clone, Copy)]
pub struct Replayed {
    /// The highest sequence number replayed (`floor` if none was higher).
    pub max_seq: u64,
    /// What a writer would drop from the end of the newest segment.
    pub dropped: Dropped,
}

/// Replays the log of `dir` described by `spec` in id order, handing every
/// batch to `apply`, and opens the newest segment for appending. Leftover
/// segments past the newest are removed; a torn tail is truncated; a store
/// without a chain is upgraded (see the module docs). Any damage that is not
/// a torn tail of the newest segment is [`Error::CorruptionAt`] (or
/// [`Error::Corruption`], [`Error::Truncated`], ...) naming the file.
pub fn recover<R: LogRecord>(
    dir: &dyn Directory,
    spec: &LogSpec<'_>,
    sync: SyncPolicy,
    apply: impl FnMut(&LogBatch<R>),
) -> Result<Recovered<R>> {
    let scan = scan(dir, spec, apply)?;
    for n in &scan.leftovers {
        dir.remove(n)?;
    }
    if !scan.leftovers.is_empty() {
        dir.sync_dir()?;
    }
    let max_seq = scan.max_seq;
    if let Some(chain) = spec.chain {
        let Some(tail) = scan.tail else {
            return Err(Error::corruption_at(
                seg_path(dir, chain.newest),
                0,
                "the newest log segment is missing",
            ));
        };
        let header = tail.header.ok_or_else(|| short_newest(dir, tail.id))?;
        let writer = WalWriter::reopen(tail.storage, sync, header, tail.valid_len, max_seq)?;
        return Ok(Recovered {
            writer,
            segment: tail.id,
            max_seq,
            dropped: scan.dropped,
            chain: chain.clone(),
            upgraded: false,
        });
    }
    let mut sealed = scan.sealed;
    let mut next = spec.log_start;
    if let Some(tail) = scan.tail {
        if tail.header.is_some() {
            tail.storage.set_len(tail.valid_len)?;
            tail.storage.sync()?;
            next = tail.id.saturating_add(1);
        } else {
            // Its header never became durable: the new segment replaces it.
            sealed.pop();
            next = tail.id;
        }
    }
    let chain = WalChain {
        store_id: WalChain::new_store_id(),
        first: spec.log_start,
        sealed,
        newest: next,
    };
    let writer = create_segment(dir, &chain, max_seq, sync, spec.wrap)?;
    Ok(Recovered {
        writer,
        segment: next,
        max_seq,
        dropped: scan.dropped,
        chain,
        upgraded: true,
    })
}

/// [`recover`] for a read-only user: replays the same segments with the same
/// checks into `apply`, but changes nothing: a torn tail is skipped, not
/// truncated, leftovers stay, no segment is created.
pub fn replay_segments<R: LogRecord>(
    dir: &dyn Directory,
    spec: &LogSpec<'_>,
    apply: impl FnMut(&LogBatch<R>),
) -> Result<Replayed> {
    let s = scan(dir, spec, apply)?;
    Ok(Replayed {
        max_seq: s.max_seq,
        dropped: s.dropped,
    })
}

/// Creates the newest segment of `chain` in `dir`: its version-2 header
/// written and synced, then the directory synced, so the segment survives a
/// crash before any append. `floor` is the highest sequence number before it.
pub(crate) fn create_segment<R: LogRecord>(
    dir: &dyn Directory,
    chain: &WalChain,
    floor: u64,
    sync: SyncPolicy,
    wrap: &dyn Fn(Arc<dyn Storage>) -> Arc<dyn Storage>,
) -> Result<WalWriter<R>> {
    let st = wrap(dir.create(&wal_name(chain.newest))?);
    let w = WalWriter::create_with(st, sync, SegmentHeader::new(chain.store_id, chain.newest), floor)?;
    dir.sync_dir()?;
    Ok(w)
}

/// The newest segment after a scan.
struct Tail {
    id: u64,
    storage: Arc<dyn Storage>,
    header: Option<SegmentHeader>,
    valid_len: u64,
}

/// What a scan of the live segments found.
struct Scan {
    max_seq: u64,
    dropped: Dropped,
    tail: Option<Tail>,
    /// Every replayed segment as it would be sealed (no chain only).
    sealed: Vec<SealedSegment>,
    /// Segment files a writer removes.
    leftovers: Vec<String>,
}

impl Scan {
    /// Nothing scanned yet; `floor` is the highest sequence number before the log.
    fn new(floor: u64) -> Self {
        Scan {
            max_seq: floor,
            dropped: Dropped::default(),
            tail: None,
            sealed: Vec::new(),
            leftovers: Vec::new(),
        }
    }

    /// Hands the batches of a replayed segment to `apply`, in order.
    fn apply<R: LogRecord>(&mut self, r: &Replay<R>, apply: &mut impl FnMut(&LogBatch<R>)) {
        for b in &r.batches {
            apply(b);
            self.max_seq = self.max_seq.max(b.seq);
        }
    }

    /// Records the newest segment and what its replay dropped.
    fn set_tail<R: LogRecord>(&mut self, id: u64, storage: Arc<dyn Storage>, r: &Replay<R>) {
        self.dropped = Dropped {
            frames: r.dropped_frames,
            bytes: r.torn_bytes,
            offset: if r.torn_bytes > 0 { r.valid_len } else { 0 },
        };
        self.tail = Some(Tail {
            id,
            storage,
            header: r.header,
            valid_len: r.valid_len,
        });
    }
}

fn seg_path(dir: &dyn Directory, id: u64) -> String {
    format!("{}/{}", dir.describe(), wal_name(id))
}

fn short_newest(dir: &dyn Directory, id: u64) -> Error {
    Error::corruption_at(
        seg_path(dir, id),
        0,
        "the newest log segment is shorter than its header, which was synced before the manifest recorded it",
    )
}

fn read_all(st: &dyn Storage) -> Result<Vec<u8>> {
    let len = usize::try_from(st.len()?).map_err(|_| Error::invalid("log segment too large"))?;
    let mut bytes = vec![0u8; len];
    st.read_at(0, &mut bytes)?;
    Ok(bytes)
}

fn scan<R: LogRecord>(
    dir: &dyn Directory,
    spec: &LogSpec<'_>,
    apply: impl FnMut(&LogBatch<R>),
) -> Result<Scan> {
    match spec.chain {
        Some(chain) => scan_chain(dir, spec, chain, apply),
        None => scan_legacy(dir, spec, apply),
    }
}

fn scan_chain<R: LogRecord>(
    dir: &dyn Directory,
    spec: &LogSpec<'_>,
    chain: &WalChain,
    mut apply: impl FnMut(&LogBatch<R>),
) -> Result<Scan> {
    let ids: BTreeSet<u64> = spec.names.iter().filter_map(|n| wal_id(n)).collect();
    let mut out = Scan::new(spec.floor);
    for id in chain.first..=chain.newest {
        let file = seg_path(dir, id);
        let last = id == chain.newest;
        let sealed = chain.sealed_segment(id);
        if !ids.contains(&id) {
            let role = if last {
                "the newest segment"
            } else {
                "a sealed segment"
            };
            return Err(Error::corruption_at(
                file,
                0,
                format!("log segment {id} is missing; the manifest records it as {role}"),
            ));
        }
        let storage = (spec.wrap)(dir.open(&wal_name(id))?);
        let bytes = read_all(storage.as_ref())?;
        let len = bytes.len() as u64;
        if let Some(s) = sealed.filter(|s| s.len != len) {
            return Err(Error::corruption_at(
                file,
                len.min(s.len),
                format!(
                    "sealed log segment {id} has {len} bytes; the manifest records {} (shortened, extended or replaced)",
                    s.len
                ),
            ));
        }
        let r = parse_segment::<R>(&bytes, &file, last, spec.recovery)?;
        match r.header {
            None => return Err(short_newest(dir, id)),
            Some(h) if h.version == WAL_VERSION_1 => {
                // Sealed version-1 segments of an upgraded store stay
                // readable (their length and last sequence are checked).
                if last {
                    return Err(Error::corruption_at(
                        file,
                        8,
                        "the newest log segment is version 1; this store's segments are version 2",
                    ));
                }
            }
            Some(h) => {
                if h.store_id != Some(chain.store_id) {
                    return Err(Error::corruption_at(
                        file,
                        16,
                        format!(
                            "log segment belongs to store {:#018x}, not to this store ({:#018x})",
                            h.store_id.unwrap_or(0),
                            chain.store_id
                        ),
                    ));
                }
                if h.segment != Some(id) {
                    return Err(Error::corruption_at(
                        file,
                        24,
                        format!(
                            "log segment header says segment {}; its name says {id} (segments swapped or renamed)",
                            h.segment.unwrap_or(0)
                        ),
                    ));
                }
            }
        }
        out.apply(&r, &mut apply);
        if let Some(s) = sealed.filter(|s| s.last_seq != out.max_seq) {
            return Err(Error::corruption_at(
                file,
                len,
                format!(
                    "sealed log segment {id} ends the log at sequence number {}; the manifest records {}",
                    out.max_seq, s.last_seq
                ),
            ));
        }
        if last {
            out.set_tail(id, storage, &r);
        }
    }
    for &id in ids.range(chain.newest.saturating_add(1)..) {
        let name = wal_name(id);
        let len = dir.open(&name)?.len()?;
        if len > WAL_HEADER_LEN {
            return Err(Error::corruption_at(
                seg_path(dir, id),
                0,
                format!(
                    "log segment {id} lies past the newest recorded segment {} and holds {len} bytes, more than a header",
                    chain.newest
                ),
            ));
        }
        // A rotation created it but crashed before publishing the manifest.
        out.leftovers.push(name);
    }
    Ok(out)
}

fn scan_legacy<R: LogRecord>(
    dir: &dyn Directory,
    spec: &LogSpec<'_>,
    mut apply: impl FnMut(&LogBatch<R>),
) -> Result<Scan> {
    let log_start = spec.log_start;
    let mut segs: Vec<u64> = spec
        .names
        .iter()
        .filter_map(|n| wal_id(n))
        .filter(|&id| id >= log_start)
        .collect();
    segs.sort_unstable();
    for (want, &id) in (log_start..).zip(&segs) {
        if id != want {
            return Err(Error::corruption_at(
                seg_path(dir, want),
                0,
                format!("log segment {want} is missing (segment {id} exists)"),
            ));
        }
    }
    let mut out = Scan::new(spec.floor);
    // A version-2 segment holding at most its header at the end: an upgrade
    // (see `recover`) interrupted before its manifest was published.
    if let Some(&id) = segs.last() {
        let st = dir.open(&wal_name(id))?;
        let head = read_all(st.as_ref())?;
        if head.len() as u64 <= WAL_HEADER_LEN && get_u32(&head, 8) == Some(WAL_VERSION) {
            out.leftovers.push(wal_name(id));
            segs.pop();
        }
    }
    for (i, &id) in segs.iter().enumerate() {
        let file = seg_path(dir, id);
        let last = i + 1 == segs.len();
        let storage = (spec.wrap)(dir.open(&wal_name(id))?);
        let bytes = read_all(storage.as_ref())?;
        let r = parse_segment::<R>(&bytes, &file, last, spec.recovery)?;
        if r.header.is_some_and(|h| h.version != WAL_VERSION_1) {
            return Err(Error::corruption_at(
                file,
                8,
                "a version-2 log segment in a store whose manifest records no log chain",
            ));
        }
        out.apply(&r, &mut apply);
        out.sealed.push(SealedSegment {
            id,
            len: if last { r.valid_len } else { bytes.len() as u64 },
            last_seq: out.max_seq,
        });
        if last {
            out.set_tail(id, storage, &r);
        }
    }
    Ok(out)
}
