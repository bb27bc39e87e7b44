//! A layer's entries held in memory while they are few, and spilled to an
//! unlinked temporary file once they pass a limit: what lets AirTune measure
//! candidate layers of any size (issue 23) in bounded memory. A spill is
//! scratch space of one process: it is written once, read back with
//! positional reads (from any thread), and removed by the system when its
//! handle is dropped, even if the process dies. It is never reopened, so it
//! has no format of its own: its bytes are the layer's entries back to back,
//! as [`LayerBuild::flat`](super::LayerBuild) holds them.

use std::borrow::Cow;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;

use crate::model::Segment;
use crate::{Error, Result};

/// Bytes of entries a spill reads at once (whole entries).
const BLOCK: usize = 1 << 16;

/// Entries of one layer, in memory or spilled.
#[derive(Debug)]
pub(crate) enum Held {
    /// Entries back to back in memory.
    Memory(Vec<u8>),
    /// Entries in a temporary file.
    Spilled(Spill),
}

/// Entries of `width` bytes in an unlinked temporary file.
#[derive(Debug)]
pub struct Spill {
    file: File,
    width: usize,
    count: u64,
}

/// Writes a layer's entries in order: in memory up to `limit` bytes, then
/// all of them to a temporary file ([`std::env::temp_dir`], `TMPDIR`).
#[derive(Debug)]
pub(crate) struct SpillWriter {
    width: usize,
    limit: usize,
    buf: Vec<u8>,
    file: Option<std::io::BufWriter<File>>,
    bytes: u64,
}

fn spill_error(e: std::io::Error) -> Error {
    Error::io(std::env::temp_dir().join("(strata spill)"), e)
}

impl SpillWriter {
    /// A writer of entries of `width` bytes that spills past `limit` bytes.
    pub(crate) fn new(width: usize, limit: usize) -> Self {
        SpillWriter {
            width: width.max(1),
            limit,
            buf: Vec::new(),
            file: None,
            bytes: 0,
        }
    }

    /// Appends whole entries.
    pub(crate) fn push(&mut self, entries: &[u8]) -> Result<()> {
        if entries.len() % self.width != 0 {
            return Err(Error::invalid("a spill takes whole entries"));
        }
        self.bytes += entries.len() as u64;
        if self.file.is_none() && self.buf.len() + entries.len() > self.limit {
            let mut w = std::io::BufWriter::with_capacity(BLOCK, tempfile::tempfile().map_err(spill_error)?);
            w.write_all(&self.buf).map_err(spill_error)?;
            self.buf = Vec::new();
            self.file = Some(w);
        }
        match &mut self.file {
            Some(w) => w.write_all(entries).map_err(spill_error),
            None => {
                self.buf.extend_from_slice(entries);
                Ok(())
            }
        }
    }

    /// The entries written.
    pub(crate) fn finish(self) -> Result<Held> {
        match self.file {
            None => Ok(Held::Memory(self.buf)),
            Some(w) => {
                let file = w.into_inner().map_err(|e| spill_error(e.into_error()))?;
                Ok(Held::Spilled(Spill {
                    file,
                    width: self.width,
                    count: self.bytes / self.width as u64,
                }))
            }
        }
    }
}

impl Spill {
    /// Number of entries.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bytes per entry.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Bytes of entries.
    pub fn bytes(&self) -> u64 {
        self.count * self.width as u64
    }

    /// Calls `f(j, block)` for the entries from `from` on, `block` holding
    /// whole entries `j..`, in order, until `f` returns `false`.
    pub fn for_each_block_while(
        &self,
        from: u64,
        mut f: impl FnMut(u64, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let w = self.width as u64;
        let per_block = (BLOCK / self.width).max(1) as u64;
        let mut buf = vec![0u8; (per_block * w) as usize];
        let mut j = from;
        while j < self.count {
            let take = per_block.min(self.count - j);
            let part = buf
                .get_mut(..(take * w) as usize)
                .ok_or_else(|| Error::invalid("spill block"))?;
            self.file.read_exact_at(part, j * w).map_err(spill_error)?;
            if !f(j, part)? {
                break;
            }
            j += take;
        }
        Ok(())
    }

    /// Every entry, back to back in memory.
    pub fn read_all(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(usize::try_from(self.bytes()).unwrap_or(0));
        self.for_each_block_while(0, |_, b| {
            out.extend_from_slice(b);
            Ok(true)
        })?;
        Ok(out)
    }
}

impl Held {
    /// The entries in memory (read back when spilled).
    pub(crate) fn into_vec(self) -> Result<Vec<u8>> {
        match self {
            Held::Memory(v) => Ok(v),
            Held::Spilled(s) => s.read_all(),
        }
    }
}

/// Bytes of one segment in a spill ([`Segs::Held`]).
const SEGMENT_BYTES: usize = 56;

/// A segmentation (starts absolute), in memory or as [`Held`] segment
/// records: what a zero-interval or compressed band starts from, spilled
/// when it is large (AirTune's finest bands over the data have a segment
/// per few hundred keys).
#[derive(Debug)]
pub(crate) enum Segs {
    /// Segments in memory.
    Memory(Vec<Segment>),
    /// Segment records, `SEGMENT_BYTES` each.
    Held(Held),
}

/// A writer of a segmentation's segments in order, spilled past `limit`
/// bytes.
#[derive(Debug)]
pub(crate) struct SegsWriter {
    out: SpillWriter,
    buf: Vec<u8>,
}

impl SegsWriter {
    /// A writer spilling past `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        SegsWriter {
            out: SpillWriter::new(SEGMENT_BYTES, limit),
            buf: Vec::new(),
        }
    }

    /// Appends segments.
    pub(crate) fn push(&mut self, segs: &[Segment]) -> Result<()> {
        self.buf.clear();
        for s in segs {
            for v in [
                s.first_key,
                s.start as u64,
                s.len as u64,
                s.slope.to_bits(),
                s.intercept.to_bits(),
                s.slope_lo.to_bits(),
                s.slope_hi.to_bits(),
            ] {
                self.buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        self.out.push(&self.buf)
    }

    /// The segments written.
    pub(crate) fn finish(self) -> Result<Segs> {
        Ok(Segs::Held(self.out.finish()?))
    }
}

/// The segment of a record of `SEGMENT_BYTES`.
fn segment_of(b: &[u8]) -> Result<Segment> {
    let word = |i: usize| -> Result<u64> {
        b.get(i * 8..i * 8 + 8)
            .and_then(|w| w.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| Error::invalid("segment record"))
    };
    let size = |i: usize| -> Result<usize> {
        usize::try_from(word(i)?).map_err(|_| Error::invalid("segment record"))
    };
    Ok(Segment {
        first_key: word(0)?,
        start: size(1)?,
        len: size(2)?,
        slope: f64::from_bits(word(3)?),
        intercept: f64::from_bits(word(4)?),
        slope_lo: f64::from_bits(word(5)?),
        slope_hi: f64::from_bits(word(6)?),
    })
}

impl Segs {
    /// Number of segments.
    pub(crate) fn len(&self) -> usize {
        match self {
            Segs::Memory(v) => v.len(),
            Segs::Held(Held::Memory(b)) => b.len() / SEGMENT_BYTES,
            Segs::Held(Held::Spilled(s)) => usize::try_from(s.count()).unwrap_or(usize::MAX),
        }
    }

    /// Segments `r` (clipped to the segmentation), in memory.
    pub(crate) fn range(&self, r: Range<usize>) -> Result<Cow<'_, [Segment]>> {
        let r = r.start.min(self.len())..r.end.min(self.len());
        let r = r.start..r.end.max(r.start);
        match self {
            Segs::Memory(v) => Ok(Cow::Borrowed(v.get(r).unwrap_or_default())),
            Segs::Held(Held::Memory(b)) => b
                .get(r.start * SEGMENT_BYTES..r.end * SEGMENT_BYTES)
                .unwrap_or_default()
                .chunks_exact(SEGMENT_BYTES)
                .map(segment_of)
                .collect::<Result<Vec<_>>>()
                .map(Cow::Owned),
            Segs::Held(Held::Spilled(s)) => {
                let mut out = Vec::with_capacity(r.len());
                s.for_each_block_while(r.start as u64, |_, block| {
                    for rec in block.chunks_exact(SEGMENT_BYTES) {
                        if out.len() == r.len() {
                            return Ok(false);
                        }
                        out.push(segment_of(rec)?);
                    }
                    Ok(out.len() < r.len())
                })?;
                Ok(Cow::Owned(out))
            }
        }
    }

    /// `f(j, segment)` for every segment in order.
    pub(crate) fn for_each(&self, mut f: impl FnMut(usize, &Segment)) -> Result<()> {
        match self {
            Segs::Memory(v) => {
                v.iter().enumerate().for_each(|(j, s)| f(j, s));
                Ok(())
            }
            Segs::Held(Held::Memory(b)) => {
                for (j, rec) in b.chunks_exact(SEGMENT_BYTES).enumerate() {
                    f(j, &segment_of(rec)?);
                }
                Ok(())
            }
            Segs::Held(Held::Spilled(s)) => s.for_each_block_while(0, |j0, block| {
                for (d, rec) in block.chunks_exact(SEGMENT_BYTES).enumerate() {
                    f(j0 as usize + d, &segment_of(rec)?);
                }
                Ok(true)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segmentation written to a [`SegsWriter`] reads back the same from
    /// memory and from a spill: every segment in order, every range.
    #[test]
    fn spilled_segments_read_back_as_written() {
        let segs: Vec<Segment> = (0..3_000usize)
            .map(|j| Segment {
                first_key: j as u64 * 1_000 + 7,
                start: j * 40,
                len: 40,
                slope: 0.04 + j as f64 * 1e-9,
                intercept: (j * 40) as f64 + 0.25,
                slope_lo: if j % 7 == 0 { f64::NEG_INFINITY } else { 0.03 },
                slope_hi: if j % 7 == 0 { f64::INFINITY } else { 0.05 },
            })
            .collect();
        for limit in [0, SEGMENT_BYTES * 100, usize::MAX] {
            let mut w = SegsWriter::new(limit);
            for part in segs.chunks(333) {
                w.push(part).unwrap();
            }
            let held = w.finish().unwrap();
            assert_eq!(held.len(), segs.len());
            let mut seen = Vec::new();
            held.for_each(|j, s| {
                assert_eq!(j, seen.len());
                seen.push(*s);
            })
            .unwrap();
            assert_eq!(seen, segs, "spilled past {limit}");
            for r in [
                0..3_000,
                0..1,
                1_170..1_171,
                1_100..2_500,
                2_999..3_000,
                2_990..3_100,
                5..5,
            ] {
                let want = &segs[r.start.min(3_000)..r.end.min(3_000)];
                assert_eq!(&held.range(r.clone()).unwrap()[..], want, "{r:?} past {limit}");
            }
        }
    }

    fn entries(n: u64) -> Vec<u8> {
        (0..n)
            .flat_map(|i| [i * 3, !i, i])
            .flat_map(u64::to_le_bytes)
            .collect()
    }

    #[test]
    fn a_spill_gives_back_what_was_written() {
        let all = entries(10_000);
        for limit in [0, 24, 1000, all.len(), usize::MAX] {
            let mut w = SpillWriter::new(24, limit);
            for part in all.chunks(24 * 37) {
                w.push(part).unwrap();
            }
            let held = w.finish().unwrap();
            assert_eq!(matches!(held, Held::Spilled(_)), limit < all.len(), "{limit}");
            if let Held::Spilled(s) = &held {
                // Blocks in order from any entry, stopping when asked.
                let mut seen = Vec::new();
                s.for_each_block_while(9_000, |j, b| {
                    assert_eq!(j, 9_000 + seen.len() as u64 / 24);
                    seen.extend_from_slice(b);
                    Ok(true)
                })
                .unwrap();
                assert_eq!(seen, all[9_000 * 24..]);
                let mut calls = 0;
                s.for_each_block_while(0, |_, _| {
                    calls += 1;
                    Ok(false)
                })
                .unwrap();
                assert_eq!(calls, 1);
            }
            assert_eq!(held.into_vec().unwrap(), all);
        }
        let mut w = SpillWriter::new(24, 0);
        assert!(w.push(&[0; 25]).is_err());
    }

    /// A spill's entry keys read as [`Keys`] (a tuner's outline): every
    /// range, in chunks, stopping when asked, as the keys in memory.
    #[test]
    fn a_spill_reads_as_its_entry_keys() {
        let n = 7_000u64;
        let mut w = SpillWriter::new(24, 0);
        w.push(&entries(n)).unwrap();
        let Held::Spilled(s) = w.finish().unwrap() else {
            panic!("not spilled")
        };
        let want: Vec<u64> = (0..n).map(|i| i * 3).collect();
        let (k, m) = (super::super::Keys::Spill(&s), super::super::Keys::Slice(&want));
        assert_eq!(k.len(), want.len());
        for range in [
            0..7_000,
            1..2,
            2_729..2_732,
            6_999..7_000,
            100..5_000,
            7_000..7_000,
        ] {
            let read = |keys: super::super::Keys<'_>| {
                let mut out = Vec::new();
                keys.for_each_chunk(range.clone(), |i, c| {
                    assert_eq!(i, range.start + out.len());
                    out.extend_from_slice(c);
                    Ok(())
                })
                .unwrap();
                out
            };
            assert_eq!(read(k), read(m), "{range:?}");
            assert_eq!(read(k), want[range.clone()]);
        }
        assert_eq!(k.page_bounds(100).unwrap(), m.page_bounds(100).unwrap());
        assert_eq!(k.every(7).unwrap(), m.every(7).unwrap());
        let mut chunks = 0;
        k.for_each_chunk_while(0..7_000, |_, _| {
            chunks += 1;
            Ok(false)
        })
        .unwrap();
        assert_eq!(chunks, 1);
    }
}
