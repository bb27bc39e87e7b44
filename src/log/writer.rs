//! Appending to a log segment: group commit under a sync policy.

use std::marker::PhantomData;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::storage::Storage;
use crate::{Error, Result};

use super::record::LogRecord;
use super::segment::{FRAME_HEADER, SegmentHeader, encode_batch};

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

impl SyncPolicy {
    /// The spellings [`SyncPolicy::from_str`](std::str::FromStr) takes, for
    /// help texts: the same words in the CLI, the kinds' `sync=` parameter,
    /// the LSM options and Python.
    pub const SPELLINGS: &'static str = "always (or every), never, or a period in milliseconds (10 or 10ms)";
}

/// Parses `always` (or its alias `every`), `never`, or a period in
/// milliseconds, `10` or `10ms` ([`SyncPolicy::EveryMs`]); anything else is
/// [`Error::InvalidInput`] naming the accepted words.
impl std::str::FromStr for SyncPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "always" | "every" => Ok(SyncPolicy::Always),
            "never" => Ok(SyncPolicy::Never),
            t => t
                .strip_suffix("ms")
                .unwrap_or(t)
                .trim()
                .parse()
                .map(SyncPolicy::EveryMs)
                .map_err(|_| {
                    Error::invalid(format!(
                        "sync must be always (or every), never, or a period in milliseconds (10 or 10ms), got {s:?}"
                    ))
                }),
        }
    }
}

/// `always`, `never` or `10ms`: what [`SyncPolicy::from_str`](std::str::FromStr) reads back.
impl std::fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncPolicy::Always => f.write_str("always"),
            SyncPolicy::Never => f.write_str("never"),
            SyncPolicy::EveryMs(ms) => write!(f, "{ms}ms"),
        }
    }
}

/// Largest frame buffer kept for reuse (a bigger one, from a huge batch, is
/// freed).
const MAX_SPARE: usize = 1 << 20;

#[derive(Debug)]
struct WriterState {
    /// The next frame: room for its header, then the encoded batches
    /// waiting for it (empty when none wait).
    pending: Vec<u8>,
    /// A written frame's buffer, cleared, for the next one (no allocation
    /// per frame).
    spare: Vec<u8>,
    /// Tickets: batches appended so far, and written (+ synced if asked).
    next_ticket: u64,
    done_ticket: u64,
    /// Whether a leader is writing now.
    writing: bool,
    /// File offset of the next frame.
    offset: u64,
    /// Highest sequence number among the pending batches.
    pending_seq: u64,
    /// Highest sequence number written (or the floor the writer started at).
    written_seq: u64,
    /// Where the first frame goes (the header's length).
    header_len: u64,
    /// A write or sync failure poisons the log: later writes fail.
    failed: Option<String>,
}

/// Appends batches of records `R` to one log segment with group commit.
///
/// Thread-safe: concurrent [`append`](WalWriter::append) calls share one
/// write (and one sync) per frame. After a failed write or sync the writer is
/// *failed*: it never writes again and every later call returns an error.
#[derive(Debug)]
pub struct WalWriter<R> {
    storage: Arc<dyn Storage>,
    sync: SyncPolicy,
    state: Mutex<WriterState>,
    cv: Condvar,
    records: PhantomData<fn(&R)>,
}

impl<R: LogRecord> WalWriter<R> {
    /// Starts a new segment on an empty storage: writes and syncs a
    /// version-2 header naming no store (store id 0, segment id 0). A segment
    /// of a chain is created by [`create_with`](Self::create_with).
    pub fn create(storage: Arc<dyn Storage>, sync: SyncPolicy) -> Result<Self> {
        Self::create_with(storage, sync, SegmentHeader::new(0, 0), 0)
    }

    /// Starts a new segment on an empty storage with `header` (written and
    /// synced); `floor` is the highest sequence number written before it.
    pub fn create_with(
        storage: Arc<dyn Storage>,
        sync: SyncPolicy,
        header: SegmentHeader,
        floor: u64,
    ) -> Result<Self> {
        let hdr = header.encode();
        storage.set_len(0)?;
        storage.write_at(0, &hdr)?;
        storage.sync()?;
        Ok(Self::resume(storage, sync, header.len(), header.len(), floor))
    }

    /// Continues a recovered segment at `valid_len` (dropping a torn tail).
    /// `header` is its header; `floor` the highest sequence number in the
    /// log so far.
    pub fn reopen(
        storage: Arc<dyn Storage>,
        sync: SyncPolicy,
        header: SegmentHeader,
        valid_len: u64,
        floor: u64,
    ) -> Result<Self> {
        storage.set_len(valid_len)?;
        storage.sync()?;
        Ok(Self::resume(storage, sync, header.len(), valid_len, floor))
    }

    fn resume(storage: Arc<dyn Storage>, sync: SyncPolicy, header_len: u64, offset: u64, floor: u64) -> Self {
        WalWriter {
            storage,
            sync,
            state: Mutex::new(WriterState {
                pending: Vec::new(),
                spare: Vec::new(),
                next_ticket: 0,
                done_ticket: 0,
                writing: false,
                offset,
                pending_seq: floor,
                written_seq: floor,
                header_len,
                failed: None,
            }),
            cv: Condvar::new(),
            records: PhantomData,
        }
    }

    /// Bytes in the segment (written frames).
    pub fn len(&self) -> u64 {
        self.state.lock().offset
    }

    /// Whether the segment holds no frame.
    pub fn is_empty(&self) -> bool {
        let st = self.state.lock();
        st.offset <= st.header_len
    }

    /// The highest sequence number written to the segment, or the floor it
    /// was created or reopened with if none is higher.
    pub fn last_seq(&self) -> u64 {
        self.state.lock().written_seq
    }

    /// Raises the sequence number [`last_seq`](Self::last_seq) reports when
    /// the segment holds nothing higher (a new segment learns the log's last
    /// sequence number once the segment before it is sealed).
    pub fn raise_floor(&self, seq: u64) {
        let mut st = self.state.lock();
        st.written_seq = st.written_seq.max(seq);
        st.pending_seq = st.pending_seq.max(seq);
    }

    /// Appends a batch and returns once it is written (and synced under
    /// [`SyncPolicy::Always`]). Concurrent callers share writes and syncs.
    pub fn append(&self, seq: u64, ops: &[R]) -> Result<()> {
        let mut st = self.state.lock();
        if let Some(e) = &st.failed {
            return Err(Error::Io {
                file: self.storage.name().to_string(),
                source: std::io::Error::other(format!("log is unusable after an earlier failure: {e}")),
            });
        }
        if st.pending.is_empty() {
            st.pending.resize(FRAME_HEADER, 0);
        }
        encode_batch(&mut st.pending, seq, ops);
        st.pending_seq = st.pending_seq.max(seq);
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
                let spare = std::mem::take(&mut st.spare);
                let mut frame = std::mem::replace(&mut st.pending, spare);
                let upto = st.next_ticket;
                let offset = st.offset;
                let seq_upto = st.pending_seq;
                drop(st);
                let result = self.write_frame(offset, &mut frame);
                st = self.state.lock();
                st.writing = false;
                if frame.capacity() <= MAX_SPARE {
                    frame.clear();
                    st.spare = frame;
                }
                match result {
                    Ok(n) => {
                        st.offset += n;
                        st.written_seq = st.written_seq.max(seq_upto);
                    }
                    Err(e) => st.failed = Some(e.to_string()),
                }
                st.done_ticket = upto;
                self.cv.notify_all();
                continue;
            }
            self.cv.wait(&mut st);
        }
    }

    /// Writes `frame` (header room, then the payload) at `offset`, filling
    /// in the header: payload length, its checksum, the payload's checksum.
    fn write_frame(&self, offset: u64, frame: &mut [u8]) -> Result<u64> {
        let Some((header, payload)) = frame.split_at_mut_checked(FRAME_HEADER) else {
            return Err(Error::invalid("a log frame without its header"));
        };
        let len = u32::try_from(payload.len())
            .map_err(|_| Error::invalid(format!("log frame of {} bytes is too large", payload.len())))?;
        let payload_crc = crc32c::crc32c(payload);
        let fields = len
            .to_le_bytes()
            .into_iter()
            .chain(crc32c::crc32c(&len.to_le_bytes()).to_le_bytes())
            .chain(payload_crc.to_le_bytes());
        for (d, b) in header.iter_mut().zip(fields) {
            *d = b;
        }
        self.storage.write_at(offset, frame)?;
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
