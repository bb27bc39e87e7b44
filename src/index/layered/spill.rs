//! A layer's entries held in memory while they are few, and spilled to an
//! unlinked temporary file once they pass a limit: what lets AirTune measure
//! candidate layers of any size (issue 23) in bounded memory. A spill is
//! scratch space of one process: it is written once, read back with
//! positional reads (from any thread), and removed by the system when its
//! handle is dropped, even if the process dies. It is never reopened, so it
//! has no format of its own: its bytes are the layer's entries back to back,
//! as [`LayerBuild::flat`](super::LayerBuild) holds them.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

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

#[cfg(test)]
mod tests {
    use super::*;

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
