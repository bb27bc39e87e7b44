//! Learned partitioning: an unsorted relation cut into key-ordered
//! partitions by a model of its keys' distribution, after Chesetti &
//! Pandey (§4.4, §5.4; the learned sort of Kristo et al.). It is the
//! alternative to the external merge sort ([`super::spill`]) wherever a join
//! sorts an unsorted relation ([`SortMethod::Learned`](super::SortMethod)).
//!
//! - **Pass 1** reads the relation and keeps a uniform sample of one record
//!   in [`SAMPLE_RATE`] (a reservoir with a fixed seed, so runs repeat; at
//!   least [`MIN_SAMPLE`] keys, at most what an eighth of the pass's memory
//!   holds). A relation that fits in the read share is sorted in memory
//!   instead, and nothing is spilled.
//! - The sorted sample trains a PGM with strata's optimal PLA
//!   ([`optimal_pla_points`]): each distinct sample key must be predicted
//!   within ε of the ranks its copies hold. Its prediction `rank(k)` is
//!   clamped, segment by segment, between the values at the segments' first
//!   keys, so it never decreases as the key grows (keys below the sample
//!   rank 0, keys above it the sample's size `s`).
//! - **Pass 2** reads the relation again and appends each record to
//!   partition `floor(rank(k) / s * P)`. A monotone rank makes the
//!   partitions disjoint key ranges in order; equal keys share one.
//!
//! `P` is chosen so that an average partition takes half of the read share
//! (room for a model that misjudges the distribution), within what the
//! pass's memory allows for one write buffer per partition (at least
//! [`MIN_CHUNK`] records each, at most a [`SPILL_BUFFER`] of 64 KiB). All
//! partitions go to **one spill file**: a full buffer is appended as a
//! chunk whose 16-byte header (little-endian) holds the offset and record
//! count of the partition's previous chunk (`u64::MAX`, 0 for none), so a
//! partition is a chain read back from its last chunk, and the memory per
//! partition does not grow with its size.
//!
//! Reading back, partitions come in key order. One that fits in the read
//! share is read and sorted in memory. One whose keys are all equal is
//! streamed as it is (any order of ties is sorted). A larger one, which a
//! skewed model made, is partitioned again, within the read share, into a
//! spill file of its own, removed when its partitions are consumed: by a new
//! model of a sample of it, or, when the previous learned split left a
//! partition with more than three quarters of its parent's records, by
//! equal widths of its key range (which always splits a partition whose
//! keys differ). So every level either shrinks the largest partition by a
//! quarter or its key range by half: the recursion ends, never exceeds the
//! budget and never loses records.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use super::spill::{Sorted, SpillFile, SpillStats};
use super::{JoinRecord, RECORD_BYTES, Relation, SPILL_BUFFER};
use crate::model::optimal_pla_points;
use crate::{Error, Result};

/// One record in this many is sampled (1 %).
pub const SAMPLE_RATE: u64 = 100;

/// The smallest sample (when the relation has as many records and the
/// memory allows).
pub const MIN_SAMPLE: usize = 1024;

/// Records of the smallest chunk a partition's write buffer holds: a 4 KiB
/// page (smaller only under budgets below [`super::MIN_BUDGET`]).
pub const MIN_CHUNK: usize = 256;

/// Bytes of a chunk's header: the partition's previous chunk (offset,
/// record count).
const CHUNK_HEADER: usize = 16;

/// The previous chunk of a partition's first chunk.
const NO_CHUNK: u64 = u64::MAX;

/// Bytes a sample key is charged: the key and its share of the model's
/// segments.
const SAMPLE_KEY_BYTES: u64 = 64;

/// Bytes a partition is charged besides its write buffer (its entry).
const PART_BYTES: u64 = 64;

/// Seed of the sample's reservoir (the level of a split is mixed in).
const SEED: u64 = 0x6c65_6172_6e65_6421;

/// The memory a learned sort may use, in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LearnedMemory {
    /// Pass 1 and 2 of the whole relation: the sample, the model, the
    /// write buffers.
    pub(crate) pass: u64,
    /// Reading back: one partition in memory, or a partition split again.
    pub(crate) read: u64,
}

/// Records of the largest partition sorted in memory.
fn fit_records(read: u64) -> u64 {
    (read / 8 * 7 / RECORD_BYTES).max(1)
}

/// Records of the largest chunk: [`SPILL_BUFFER`] bytes with its header,
/// and at most an eighth of the read share. (Larger chunks measured
/// slower: a buffer filled slowly among many has left the CPU caches when
/// it is written; 1 MiB chunks cost 10 % more time than 64 KiB ones on
/// fb-like keys at 64 MiB.)
fn max_chunk_records(read: u64) -> u64 {
    let cap = (SPILL_BUFFER - CHUNK_HEADER) as u64 / RECORD_BYTES;
    (read / 8 / RECORD_BYTES).saturating_sub(1).clamp(1, cap)
}

/// Keys in the sample of `n` records.
fn sample_size(n: u64, pass: u64) -> usize {
    let cap = (pass / 8 / SAMPLE_KEY_BYTES).max(2);
    let want = (n / SAMPLE_RATE).max(MIN_SAMPLE as u64).min(cap).min(n.max(1));
    usize::try_from(want).unwrap_or(usize::MAX)
}

/// Partitions of a pass over `n` records and records per chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    parts: usize,
    chunk: usize,
}

/// Write buffers take five eighths of the pass's memory; the sample, the
/// chunk being read (in a split) and the partitions' entries an eighth
/// each.
fn plan(n: u64, mem: LearnedMemory) -> Plan {
    let buffers = mem.pass / 8 * 5;
    let per_part = (CHUNK_HEADER + MIN_CHUNK * RECORD_BYTES as usize) as u64 + PART_BYTES;
    let max_parts = (buffers / per_part).min(mem.pass / 8 / PART_BYTES).max(2);
    let want = n.saturating_mul(2).div_ceil(fit_records(mem.read)).max(2);
    let parts = want.min(max_parts);
    let chunk = (buffers / parts / RECORD_BYTES)
        .saturating_sub(1 + PART_BYTES / RECORD_BYTES)
        .clamp(1, max_chunk_records(mem.read));
    Plan {
        parts: usize::try_from(parts).unwrap_or(usize::MAX),
        chunk: usize::try_from(chunk).unwrap_or(usize::MAX),
    }
}

/// A uniform sample of fixed size of a stream of keys: Li's algorithm L
/// with a seeded generator, which draws random numbers only for the keys
/// it keeps (about `cap * ln(n / cap)` of them), not for every key.
struct Reservoir {
    keys: Vec<u64>,
    cap: usize,
    seen: u64,
    /// The position of the next key to keep, once the reservoir is full.
    next: u64,
    /// Algorithm L's running weight.
    w: f64,
    rng: Pcg64,
}

impl Reservoir {
    fn new(cap: usize, seed: u64) -> Reservoir {
        Reservoir {
            keys: Vec::with_capacity(cap),
            cap: cap.max(1),
            seen: 0,
            next: 0,
            w: 1.0,
            rng: Pcg64::seed_from_u64(seed),
        }
    }

    /// A uniform number in `(0, 1]`.
    fn unit(&mut self) -> f64 {
        1.0 - self.rng.random::<f64>()
    }

    /// Updates the weight and jumps to the next key to keep.
    fn advance(&mut self) {
        self.w *= (self.unit().ln() / self.cap as f64).exp();
        // `as` saturates (and makes NaN 0): a skip never overflows.
        let skip = (self.unit().ln() / (1.0 - self.w).ln()).floor() as u64;
        self.next = self.next.saturating_add(skip).saturating_add(1);
    }

    fn offer(&mut self, key: u64) {
        if self.keys.len() < self.cap {
            self.keys.push(key);
            if self.keys.len() == self.cap {
                self.next = self.seen;
                self.advance();
            }
        } else if self.seen == self.next {
            let j = self.rng.random_range(0..self.cap);
            if let Some(slot) = self.keys.get_mut(j) {
                *slot = key;
            }
            self.advance();
        }
        self.seen += 1;
    }
}

/// One segment of a [`RankModel`]: its line, clamped to `[lo, hi]`.
#[derive(Debug, Clone, Copy)]
struct Line {
    intercept: f64,
    slope: f64,
    lo: f64,
    hi: f64,
}

/// The rank of a key among a sorted sample, predicted by a PGM trained on
/// the sample and made monotone: never decreasing as the key grows, in
/// `[0, size]`.
#[derive(Debug, Clone)]
pub(crate) struct RankModel {
    /// Each segment's first key, increasing.
    firsts: Vec<u64>,
    lines: Vec<Line>,
    /// The sample's largest key.
    last: u64,
    /// The sample's size.
    size: f64,
}

impl RankModel {
    /// Trains on `sample` (any order; sorted here) with error bound `eps`
    /// (in sample ranks).
    pub(crate) fn train(mut sample: Vec<u64>, eps: u64) -> RankModel {
        sample.sort_unstable();
        let size = sample.len() as f64;
        let e = i128::from(eps);
        let last = sample.last().copied().unwrap_or(0);
        // Each distinct key, with the ranks [a, a + c) of its c copies
        // widened by eps, made as the segmentation asks for it.
        let mut i = 0usize;
        let runs = std::iter::from_fn(|| {
            let &k = sample.get(i)?;
            let c = sample
                .get(i..)
                .map_or(1, |s| s.iter().take_while(|&&x| x == k).count())
                .max(1);
            let point = (k, i as i128 - e, (i + c) as i128 - 1 + e);
            i += c;
            Some(point)
        });
        let segs = optimal_pla_points(runs);
        drop(sample);
        let mut firsts = Vec::with_capacity(segs.len());
        let mut lines: Vec<Line> = Vec::with_capacity(segs.len());
        let mut floor = 0.0f64;
        for s in &segs {
            let slope = if s.slope.is_finite() && s.slope > 0.0 {
                s.slope
            } else {
                0.0
            };
            let at_first = if s.intercept.is_finite() {
                s.intercept.clamp(0.0, size)
            } else {
                floor
            };
            floor = floor.max(at_first);
            if let Some(prev) = lines.last_mut() {
                prev.hi = floor;
            }
            firsts.push(s.first_key);
            lines.push(Line {
                intercept: if s.intercept.is_finite() {
                    s.intercept
                } else {
                    floor
                },
                slope,
                lo: floor,
                hi: size,
            });
        }
        RankModel {
            firsts,
            lines,
            last,
            size,
        }
    }

    /// The predicted rank of `key` in `[0, size]`; `a <= b` gives
    /// `rank(a) <= rank(b)`.
    pub(crate) fn rank(&self, key: u64) -> f64 {
        let Some(&first) = self.firsts.first() else {
            return 0.0;
        };
        if key < first {
            return 0.0;
        }
        if key > self.last {
            return self.size;
        }
        let i = self.firsts.partition_point(|&f| f <= key).saturating_sub(1);
        let (Some(&f), Some(l)) = (self.firsts.get(i), self.lines.get(i)) else {
            return self.size;
        };
        let v = l.intercept + l.slope * key.saturating_sub(f) as f64;
        // NaN (it cannot arise from finite parts) falls to `lo`.
        if v >= l.hi {
            l.hi
        } else if v >= l.lo {
            v
        } else {
            l.lo
        }
    }

    /// The partition of `key` among `parts`: `floor(rank / size * parts)`,
    /// at most `parts - 1`; monotone in the key.
    pub(crate) fn partition(&self, key: u64, parts: usize) -> usize {
        if self.size <= 0.0 {
            return 0;
        }
        let p = (self.rank(key) * parts as f64 / self.size) as usize;
        p.min(parts.saturating_sub(1))
    }
}

/// How a pass assigns keys to partitions.
enum Splitter {
    /// By a model of a sample.
    Learned(RankModel),
    /// By equal widths of the key range `[min, max]`.
    Width { min: u64, max: u64 },
}

impl Splitter {
    fn partition(&self, key: u64, parts: usize) -> usize {
        match self {
            Splitter::Learned(m) => m.partition(key, parts),
            Splitter::Width { min, max } => width_partition(key, *min, *max, parts),
        }
    }
}

/// The partition of `key` among `parts` equal widths of `[min, max]`:
/// monotone; `min` goes to 0 and `max` to a later one when `min < max`.
fn width_partition(key: u64, min: u64, max: u64, parts: usize) -> usize {
    let width = u128::from(max.saturating_sub(min)) + 1;
    let off = u128::from(key.clamp(min, max) - min);
    let p = off * parts as u128 / width;
    usize::try_from(p)
        .unwrap_or(usize::MAX)
        .min(parts.saturating_sub(1))
}

/// How a partition is split if it must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refine {
    Learned,
    Width,
}

/// A partition in a spill file: a chain of chunks from its last one.
#[derive(Debug, Clone, Copy)]
struct Part {
    records: u64,
    /// Offset and record count of its last chunk.
    tail: u64,
    tail_records: u64,
    min: u64,
    max: u64,
    refine: Refine,
}

impl Part {
    fn empty() -> Part {
        Part {
            records: 0,
            tail: NO_CHUNK,
            tail_records: 0,
            min: u64::MAX,
            max: 0,
            refine: Refine::Learned,
        }
    }
}

/// A finished partitioning: its spill file (removed on drop) and its
/// partitions in key order.
struct Area {
    file: File,
    spill: SpillFile,
    parts: Vec<Part>,
    /// Records of the largest chunk.
    chunk: u64,
}

impl Area {
    /// Calls `f` on every record of `part` (last chunk first), each chunk
    /// read into `scratch`.
    fn for_each(
        &self,
        part: &Part,
        scratch: &mut Vec<u8>,
        stats: &SpillStats,
        mut f: impl FnMut(JoinRecord) -> Result<()>,
    ) -> Result<()> {
        let mut at = (part.tail, part.tail_records);
        let mut seen = 0u64;
        while at.0 != NO_CHUNK {
            let (off, n) = at;
            at = self.read_chunk(off, n, scratch, stats)?;
            seen += n;
            if seen > part.records {
                break;
            }
            for r in chunk_records(scratch) {
                f(r)?;
            }
        }
        if seen != part.records {
            return Err(Error::corruption_at(
                self.spill.path.display().to_string(),
                part.tail,
                format!("a partition's chunks hold {seen} records, not {}", part.records),
            ));
        }
        Ok(())
    }

    /// Reads the chunk of `n` records at `off` into `scratch`; returns the
    /// partition's previous chunk (offset, records).
    fn read_chunk(&self, off: u64, n: u64, scratch: &mut Vec<u8>, stats: &SpillStats) -> Result<(u64, u64)> {
        let path = &self.spill.path;
        let bad = |what: &str| Error::corruption_at(path.display().to_string(), off, what.to_string());
        if n == 0 || n > self.chunk {
            return Err(bad("a chunk's record count is out of range"));
        }
        let len = usize::try_from(n * RECORD_BYTES)
            .ok()
            .and_then(|b| b.checked_add(CHUNK_HEADER))
            .ok_or_else(|| bad("a chunk is too large"))?;
        scratch.clear();
        scratch.resize(len, 0);
        self.file
            .read_exact_at(scratch, off)
            .map_err(|e| Error::io(path, e))?;
        stats.read.fetch_add(len as u64, Ordering::Relaxed);
        let word = |i: usize| {
            scratch
                .get(i..i + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        };
        let prev = (word(0), word(8));
        if prev.0 != NO_CHUNK && prev.0 >= off {
            return Err(bad("a chunk's previous chunk does not come before it"));
        }
        Ok(prev)
    }
}

/// The records of a chunk read into `scratch`.
fn chunk_records(scratch: &[u8]) -> impl Iterator<Item = JoinRecord> + '_ {
    scratch
        .get(CHUNK_HEADER..)
        .unwrap_or(&[])
        .chunks_exact(16)
        .map(|c| {
            let k = c.first_chunk::<8>().copied().map_or(0, u64::from_le_bytes);
            let p = c.last_chunk::<8>().copied().map_or(0, u64::from_le_bytes);
            (k, p)
        })
}

/// Writes records into the partitions of one spill file.
struct Scatter<'s> {
    file: File,
    spill: SpillFile,
    /// Bytes written so far (the next chunk's offset).
    end: u64,
    bufs: Vec<Vec<u8>>,
    parts: Vec<Part>,
    chunk: usize,
    stats: &'s SpillStats,
}

impl<'s> Scatter<'s> {
    fn create(path: PathBuf, plan: Plan, stats: &'s SpillStats) -> Result<Scatter<'s>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        Ok(Scatter {
            file,
            // Removes the file on every exit from here on.
            spill: SpillFile { path, records: 0 },
            end: 0,
            bufs: (0..plan.parts).map(|_| Vec::new()).collect(),
            parts: vec![Part::empty(); plan.parts],
            chunk: plan.chunk.max(1),
            stats,
        })
    }

    fn push(&mut self, p: usize, (k, v): JoinRecord) -> Result<()> {
        let full = CHUNK_HEADER + self.chunk * RECORD_BYTES as usize;
        let (Some(buf), Some(part)) = (self.bufs.get_mut(p), self.parts.get_mut(p)) else {
            return Err(Error::invalid(format!(
                "learned partitioning: partition {p} of {} does not exist",
                self.parts.len()
            )));
        };
        if buf.is_empty() {
            buf.reserve_exact(full);
            buf.extend_from_slice(&[0; CHUNK_HEADER]);
        }
        buf.extend_from_slice(&k.to_le_bytes());
        buf.extend_from_slice(&v.to_le_bytes());
        part.records += 1;
        part.min = part.min.min(k);
        part.max = part.max.max(k);
        if buf.len() >= full {
            flush(&self.file, &self.spill.path, &mut self.end, buf, part, self.stats)?;
        }
        Ok(())
    }

    /// Flushes every buffer; each partition's next split is by width when
    /// a learned split (`learned`) left it more than three quarters of
    /// `parent` records.
    fn finish(mut self, learned: bool, parent: u64) -> Result<Area> {
        for (buf, part) in self.bufs.iter_mut().zip(self.parts.iter_mut()) {
            flush(&self.file, &self.spill.path, &mut self.end, buf, part, self.stats)?;
            part.refine = if learned && part.records.saturating_mul(4) > parent.saturating_mul(3) {
                Refine::Width
            } else {
                Refine::Learned
            };
        }
        self.spill.records = self.parts.iter().map(|p| p.records).sum();
        Ok(Area {
            file: self.file,
            spill: self.spill,
            parts: self.parts,
            chunk: self.chunk as u64,
        })
    }
}

/// Appends `buf` (a header's room and records) as `part`'s next chunk.
fn flush(
    file: &File,
    path: &Path,
    end: &mut u64,
    buf: &mut Vec<u8>,
    part: &mut Part,
    stats: &SpillStats,
) -> Result<()> {
    let n = (buf.len().saturating_sub(CHUNK_HEADER) / RECORD_BYTES as usize) as u64;
    if n == 0 {
        return Ok(());
    }
    if let Some(h) = buf.get_mut(..CHUNK_HEADER) {
        let (a, b) = h.split_at_mut(8);
        a.copy_from_slice(&part.tail.to_le_bytes());
        b.copy_from_slice(&part.tail_records.to_le_bytes());
    }
    file.write_all_at(buf, *end).map_err(|e| Error::io(path, e))?;
    part.tail = *end;
    part.tail_records = n;
    *end += buf.len() as u64;
    stats.written.fetch_add(buf.len() as u64, Ordering::Relaxed);
    buf.clear();
    Ok(())
}

/// The error bound of a model for `plan` over a sample of `k` keys: a
/// sixteenth of a partition's share of the sample.
fn eps_for(k: usize, plan: Plan) -> u64 {
    (k as u64 / (plan.parts as u64).saturating_mul(16).max(1)).max(1)
}

/// The records of `rel` in key order (ties in any order), by learned
/// partitioning within `mem`; spill files in `dir`. A relation already
/// sorted is read as it is; one that fits in the read share is sorted in
/// memory. `stats` counts the bytes, partitions and levels.
pub(crate) fn sorted<'a>(
    rel: &'a dyn Relation,
    mem: LearnedMemory,
    dir: &Path,
    stats: &'a SpillStats,
) -> Result<Sorted<'a>> {
    if rel.sorted() {
        return rel.scan();
    }
    let fit = usize::try_from(fit_records(mem.read)).unwrap_or(usize::MAX);
    // Pass 1: the sample, and the records while they fit.
    let mut sample = Reservoir::new(sample_size(rel.len(), mem.pass), SEED);
    let mut held: Vec<JoinRecord> = Vec::new();
    // A relation that says it is larger is not held at all.
    let mut fits = rel.len() <= fit as u64;
    let mut n = 0u64;
    for r in rel.scan()? {
        let r = r?;
        n += 1;
        sample.offer(r.0);
        if fits {
            if held.len() < fit {
                if held.is_empty() {
                    held.reserve_exact(fit.min(usize::try_from(rel.len()).unwrap_or(usize::MAX)).max(1));
                }
                held.push(r);
            } else {
                fits = false;
                held = Vec::new();
            }
        }
    }
    if fits {
        held.sort_unstable();
        return Ok(Box::new(held.into_iter().map(Ok)));
    }
    drop(held);
    let plan = plan(n, mem);
    let k = sample.keys.len();
    let model = Splitter::Learned(RankModel::train(sample.keys, eps_for(k, plan)));
    // Pass 2: every record to its partition.
    let mut sc = Scatter::create(stats.path(dir, "part"), plan, stats)?;
    let mut written = 0u64;
    for r in rel.scan()? {
        let r = r?;
        written += 1;
        sc.push(model.partition(r.0, plan.parts), r)?;
    }
    let area = sc.finish(true, written)?;
    stats.partitions.fetch_add(plan.parts as u64, Ordering::Relaxed);
    stats.levels.fetch_max(1, Ordering::Relaxed);
    Ok(Box::new(Partitions {
        frames: vec![Frame { area, next: 0 }],
        read: mem.read,
        fit: fit_records(mem.read),
        dir: dir.to_path_buf(),
        stats,
        buf: Vec::new(),
        at: 0,
        equal: None,
        scratch: Vec::new(),
        failed: false,
    }))
}

/// A partitioning being read back, and the next partition of it.
struct Frame {
    area: Area,
    next: usize,
}

/// The records of partitions in key order: a stack of partitionings, each
/// a split of a partition of the one below.
struct Partitions<'a> {
    frames: Vec<Frame>,
    read: u64,
    fit: u64,
    dir: PathBuf,
    stats: &'a SpillStats,
    /// Records being handed out (a sorted partition, or a chunk of one
    /// whose keys are equal).
    buf: Vec<JoinRecord>,
    at: usize,
    /// The next chunk (offset, records) of a partition of equal keys of the
    /// top frame, streamed chunk by chunk.
    equal: Option<(u64, u64)>,
    scratch: Vec<u8>,
    failed: bool,
}

impl Partitions<'_> {
    /// Fills `buf` with the next records; false at the end.
    fn refill(&mut self) -> Result<bool> {
        self.buf.clear();
        self.at = 0;
        loop {
            let Some(top) = self.frames.last_mut() else {
                return Ok(false);
            };
            if let Some((off, n)) = self.equal.take() {
                if off == NO_CHUNK {
                    continue;
                }
                let prev = top.area.read_chunk(off, n, &mut self.scratch, self.stats)?;
                self.buf.extend(chunk_records(&self.scratch));
                self.equal = Some(prev);
                return Ok(true);
            }
            let Some(part) = top.area.parts.get(top.next).copied() else {
                // Its file is removed with it.
                self.frames.pop();
                continue;
            };
            top.next += 1;
            if part.records == 0 {
                continue;
            }
            if part.min == part.max {
                self.equal = Some((part.tail, part.tail_records));
                continue;
            }
            if part.records <= self.fit {
                self.buf
                    .reserve_exact(usize::try_from(part.records).unwrap_or(usize::MAX));
                let buf = &mut self.buf;
                top.area.for_each(&part, &mut self.scratch, self.stats, |r| {
                    buf.push(r);
                    Ok(())
                })?;
                self.buf.sort_unstable();
                return Ok(true);
            }
            let level = self.frames.len() as u32 + 1;
            let area = self.split(&part, level)?;
            self.frames.push(Frame { area, next: 0 });
        }
    }

    /// Partitions `part` of the top frame again, within the read share.
    fn split(&mut self, part: &Part, level: u32) -> Result<Area> {
        let Some(top) = self.frames.last() else {
            return Err(Error::invalid("learned partitioning: no partition to split"));
        };
        // The records buffer is empty here: give its memory back.
        self.buf = Vec::new();
        let mem = LearnedMemory {
            pass: self.read,
            read: self.read,
        };
        let plan = plan(part.records, mem);
        let splitter = match part.refine {
            Refine::Width => Splitter::Width {
                min: part.min,
                max: part.max,
            },
            Refine::Learned => {
                let mut res = Reservoir::new(sample_size(part.records, mem.pass), SEED ^ u64::from(level));
                top.area.for_each(part, &mut self.scratch, self.stats, |r| {
                    res.offer(r.0);
                    Ok(())
                })?;
                let k = res.keys.len();
                Splitter::Learned(RankModel::train(res.keys, eps_for(k, plan)))
            }
        };
        let mut sc = Scatter::create(self.stats.path(&self.dir, "part"), plan, self.stats)?;
        top.area.for_each(part, &mut self.scratch, self.stats, |r| {
            sc.push(splitter.partition(r.0, plan.parts), r)
        })?;
        let area = sc.finish(matches!(splitter, Splitter::Learned(_)), part.records)?;
        self.stats
            .partitions
            .fetch_add(plan.parts as u64, Ordering::Relaxed);
        self.stats.levels.fetch_max(level, Ordering::Relaxed);
        Ok(area)
    }
}

impl Iterator for Partitions<'_> {
    type Item = Result<JoinRecord>;

    fn next(&mut self) -> Option<Result<JoinRecord>> {
        if let Some(&r) = self.buf.get(self.at) {
            self.at += 1;
            return Some(Ok(r));
        }
        if self.failed {
            return None;
        }
        match self.refill() {
            Ok(true) => {
                let r = self.buf.first().copied();
                self.at = 1;
                r.map(Ok)
            }
            Ok(false) => None,
            Err(e) => {
                self.failed = true;
                self.frames.clear();
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records that say they are unsorted whatever their order (so sorted
    /// input is partitioned too), failing after `fail_after` records if
    /// set.
    struct Unsorted {
        records: Vec<JoinRecord>,
        fail_after: Option<usize>,
    }

    impl Relation for Unsorted {
        fn name(&self) -> String {
            "unsorted".into()
        }
        fn len(&self) -> u64 {
            self.records.len() as u64
        }
        fn sorted(&self) -> bool {
            false
        }
        fn scan(&self) -> Result<Box<dyn Iterator<Item = Result<JoinRecord>> + '_>> {
            let fail = self.fail_after;
            Ok(Box::new(self.records.iter().enumerate().map(move |(i, &r)| {
                if Some(i) == fail {
                    Err(Error::invalid("injected scan failure"))
                } else {
                    Ok(r)
                }
            })))
        }
    }

    fn mem(budget: u64) -> LearnedMemory {
        LearnedMemory {
            pass: budget / 4 * 3,
            read: budget / 8 * 3,
        }
    }

    /// Runs the learned sort of `keys` (payloads: positions) and checks the
    /// output: keys non-decreasing, the same multiset of records, no file
    /// left. Returns the stats.
    fn check(keys: &[u64], budget: u64) -> (u64, u32, u64) {
        let records: Vec<JoinRecord> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
        let rel = Unsorted {
            records: records.clone(),
            fail_after: None,
        };
        let tmp = tempfile::tempdir().unwrap();
        let stats = SpillStats::default();
        let got: Vec<JoinRecord> = sorted(&rel, mem(budget), tmp.path(), &stats)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert!(
            got.windows(2).all(|w| w[0].0 <= w[1].0),
            "keys out of order (budget {budget})"
        );
        let mut want = records;
        want.sort_unstable();
        let mut got_sorted = got;
        got_sorted.sort_unstable();
        assert_eq!(got_sorted, want, "records lost or invented (budget {budget})");
        assert_eq!(
            std::fs::read_dir(tmp.path()).unwrap().count(),
            0,
            "spill files left"
        );
        let w = stats.written.load(Ordering::Relaxed);
        assert!(
            stats.read.load(Ordering::Relaxed) >= w,
            "spilled bytes not all read back"
        );
        (
            stats.partitions.load(Ordering::Relaxed),
            stats.levels.load(Ordering::Relaxed),
            w,
        )
    }

    const BUDGETS: [u64; 3] = [4 << 10, 64 << 10, super::super::MIN_BUDGET];

    fn keys_st() -> impl proptest::strategy::Strategy<Value = Vec<u64>> {
        use proptest::prelude::*;
        prop_oneof![
            proptest::collection::vec(any::<u64>(), 0..3000),
            proptest::collection::vec(0..300u64, 0..4000),
            proptest::collection::vec(prop_oneof![Just(0u64), Just(u64::MAX), 0..4u64], 0..3000),
            // Two clusters far apart, the second small.
            (1usize..4000, 0usize..40).prop_map(|(a, b)| {
                (0..a as u64)
                    .map(|i| i * 3)
                    .chain((0..b as u64).map(|i| u64::MAX - i))
                    .collect()
            }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]
        /// Random and adversarial keys, in any order, sorted or reversed:
        /// learned partitioning gives exactly the sorted records.
        #[test]
        fn gives_the_sorted_records(keys in keys_st(), order in 0u8..3) {
            let mut keys = keys;
            match order {
                1 => keys.sort_unstable(),
                2 => keys.sort_unstable_by(|a, b| b.cmp(a)),
                _ => {}
            }
            for b in BUDGETS {
                check(&keys, b);
            }
        }

        /// The model's rank never decreases with the key and stays in
        /// `[0, size]`, whatever the sample.
        #[test]
        fn rank_is_monotone(
            sample in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..500),
            small in proptest::collection::vec(0..50u64, 0..500),
            mut probes in proptest::collection::vec(proptest::prelude::any::<u64>(), 1..500),
            eps in 1u64..64,
        ) {
            for s in [sample, small] {
                let m = RankModel::train(s.clone(), eps);
                let size = s.len() as f64;
                probes.extend(s.iter().flat_map(|&k| [k, k.saturating_sub(1), k.saturating_add(1)]));
                probes.extend([0, u64::MAX]);
                probes.sort_unstable();
                let mut prev = 0.0f64;
                let mut prev_p = 0usize;
                for &x in &probes {
                    let r = m.rank(x);
                    proptest::prop_assert!(r >= prev && r <= size, "rank({x}) = {r} after {prev}");
                    let p = m.partition(x, 7);
                    proptest::prop_assert!(p >= prev_p && p < 7);
                    prev = r;
                    prev_p = p;
                }
            }
        }
    }

    #[test]
    fn adversarial_inputs() {
        for b in BUDGETS {
            check(&[], b);
            check(&[u64::MAX], b);
            check(&[7; 5000], b);
            check(&[u64::MAX; 3000], b);
            let (_, levels, written) = check(&(0..50_000u64).rev().collect::<Vec<_>>(), b);
            assert!(levels >= 1 && written > 0, "budget {b}");
        }
    }

    /// At the smallest public budget a relation far larger than the read
    /// share is partitioned in one level when the model is good, and a
    /// partition the model cannot split (one key holding almost every
    /// record, the others near it) is split again.
    #[test]
    fn min_budget_partitions_and_splits_again() {
        let b = super::super::MIN_BUDGET;
        let uniform: Vec<u64> = (0..200_000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let (parts, levels, written) = check(&uniform, b);
        assert_eq!(levels, 1, "a good model needs one level");
        assert!(parts >= 16, "{parts} partitions");
        assert!(written >= 200_000 * RECORD_BYTES, "{written}");
        // 150,000 copies of one key among 60,000 keys around it: the
        // partition holding it cannot be read in memory.
        let skewed: Vec<u64> = (0..210_000u64)
            .map(|i| {
                if i % 7 < 5 {
                    1 << 40
                } else {
                    (1 << 40) + i - 105_000
                }
            })
            .collect();
        let (_, levels, _) = check(&skewed, b);
        assert!(
            levels >= 2,
            "the heavy partition is split again ({levels} levels)"
        );
        // More records than the budget's write buffers can spread thin
        // enough: every partition is split again.
        let big: Vec<u64> = (0..3_000_000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20)
            .collect();
        let (parts, levels, _) = check(&big, b);
        assert_eq!(levels, 2, "{parts} partitions");
    }

    /// The reservoir keeps `cap` keys (all of a shorter stream), each of
    /// the stream's deciles in its share, the same keys for the same seed.
    #[test]
    fn reservoir_samples_uniformly() {
        let mut short = Reservoir::new(100, 1);
        (0..40u64).for_each(|k| short.offer(k));
        assert_eq!(short.keys, (0..40).collect::<Vec<_>>());
        let mut deciles = [0u64; 10];
        let mut first_percentile = 0u64;
        let mut total = 0u64;
        for seed in 0..20 {
            let mut r = Reservoir::new(500, seed);
            (0..200_000u64).for_each(|k| r.offer(k));
            assert_eq!(r.keys.len(), 500);
            let mut again = Reservoir::new(500, seed);
            (0..200_000u64).for_each(|k| again.offer(k));
            assert_eq!(r.keys, again.keys);
            for k in r.keys {
                deciles[(k / 20_000) as usize] += 1;
                first_percentile += u64::from(k < 2000);
                total += 1;
            }
        }
        for (i, d) in deciles.iter().enumerate() {
            let share = *d as f64 / total as f64;
            assert!((share - 0.1).abs() < 0.015, "decile {i}: {share}");
        }
        // The first keys (the reservoir's first fill) are not favoured.
        let share = first_percentile as f64 / total as f64;
        assert!((share - 0.01).abs() < 0.004, "first percentile: {share}");
    }

    /// With a width split, the smallest and largest key part ways.
    #[test]
    fn width_split_always_progresses() {
        for (min, max) in [
            (0u64, 1u64),
            (5, 6),
            (0, u64::MAX),
            (u64::MAX - 1, u64::MAX),
            (10, 1000),
        ] {
            for parts in [2usize, 3, 64] {
                assert_eq!(width_partition(min, min, max, parts), 0);
                assert!(width_partition(max, min, max, parts) > 0);
                assert!(width_partition(max, min, max, parts) < parts);
            }
        }
    }

    /// A scan failing in pass 1 or 2, and a stream dropped half read, leave
    /// no spill file.
    #[test]
    fn errors_and_early_drops_leave_nothing() {
        let records: Vec<JoinRecord> = (0..50_000u64).map(|i| ((i * 7919) % 50_000, i)).collect();
        let tmp = tempfile::tempdir().unwrap();
        let m = mem(64 << 10);
        for fail_after in [10, 49_999] {
            let stats = SpillStats::default();
            let rel = Unsorted {
                records: records.clone(),
                fail_after: Some(fail_after),
            };
            let e = sorted(&rel, m, tmp.path(), &stats).err().expect("an error");
            assert!(e.to_string().contains("injected"), "{e}");
            assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        }
        let stats = SpillStats::default();
        let rel = Unsorted {
            records,
            fail_after: None,
        };
        let mut s = sorted(&rel, m, tmp.path(), &stats).unwrap();
        for _ in 0..20_000 {
            s.next().unwrap().unwrap();
        }
        assert!(std::fs::read_dir(tmp.path()).unwrap().count() > 0);
        drop(s);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    /// A chunk whose header was overwritten is an error, not a wrong
    /// answer.
    #[test]
    fn a_corrupt_chain_is_an_error() {
        let records: Vec<JoinRecord> = (0..20_000u64)
            .map(|i| (i.wrapping_mul(2_654_435_761), i))
            .collect();
        let tmp = tempfile::tempdir().unwrap();
        let stats = SpillStats::default();
        let rel = Unsorted {
            records,
            fail_after: None,
        };
        let s = sorted(&rel, mem(64 << 10), tmp.path(), &stats).unwrap();
        let file = std::fs::read_dir(tmp.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        // The first chunk written names itself as its predecessor.
        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        let mut header = 0u64.to_le_bytes().to_vec();
        header.extend_from_slice(&1u64.to_le_bytes());
        f.write_all_at(&header, 0).unwrap();
        let r: Result<Vec<JoinRecord>> = s.collect();
        let e = r.unwrap_err();
        assert!(e.is_corruption(), "{e}");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
