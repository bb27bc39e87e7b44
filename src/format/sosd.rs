//! SOSD key files: a little-endian `u64` count followed by that many keys,
//! `u64` (or, in the `u32` variant, `u32`) little-endian.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use crate::{Error, Result};

/// Width of the keys in a SOSD file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyWidth {
    /// Decide from the file size (8-byte keys when both would fit).
    #[default]
    Auto,
    /// `u64` keys.
    U64,
    /// `u32` keys.
    U32,
}

/// How to read a key file.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyFileOptions {
    /// Key width.
    pub width: KeyWidth,
    /// Drop repeated keys instead of rejecting them (keys must still be
    /// non-decreasing).
    pub dedup: bool,
}

/// Reads and validates a SOSD key file: the size must match the count, and
/// keys must be strictly increasing (or non-decreasing with `dedup`, which
/// drops repeats). Errors name the first offending position and both keys.
pub fn read_keys(path: &Path, opts: KeyFileOptions) -> Result<Vec<u64>> {
    let r = KeyReader::open(path, opts)?;
    let mut keys = Vec::with_capacity(usize::try_from(r.total()).unwrap_or(0));
    for k in r {
        keys.push(k?);
    }
    Ok(keys)
}

/// The order a [`KeyReader`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// Strictly increasing (repeats dropped with `dedup`).
    Increasing,
    /// Non-decreasing: repeats kept.
    NonDecreasing,
    /// Any order.
    Any,
}

/// Keys read per chunk by [`KeyReader`].
const CHUNK_KEYS: usize = 1 << 16;

/// A SOSD key file read as a stream, in constant memory: the header and size
/// are checked when it is opened, each key's order as it is read (the same
/// checks and errors as [`read_keys`]). Yields `Err` once and then stops.
#[derive(Debug)]
pub struct KeyReader {
    r: BufReader<File>,
    path: std::path::PathBuf,
    width: usize,
    count: u64,
    /// Keys of the file read so far (positions, repeats included).
    read: u64,
    dedup: bool,
    /// What order the keys must be in (checked as they are read).
    order: Order,
    prev: Option<u64>,
    buf: Vec<u8>,
    chunk: Vec<u64>,
    next: usize,
    failed: bool,
}

impl KeyReader {
    /// Opens a key file and checks its header against its size.
    pub fn open(path: &Path, opts: KeyFileOptions) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let name = path.display().to_string();
        if len < 8 {
            return Err(Error::Truncated {
                file: name,
                expected: 8,
                found: len,
            });
        }
        // A small file gets a buffer of its own size, not 1 MiB.
        let cap = usize::try_from(len.min(1 << 20)).unwrap_or(1 << 20);
        let mut r = BufReader::with_capacity(cap, file);
        let mut head = [0u8; 8];
        r.read_exact(&mut head).map_err(|e| Error::io(path, e))?;
        let count = u64::from_le_bytes(head);
        let body = len - 8;
        let width = match opts.width {
            KeyWidth::U64 => 8,
            KeyWidth::U32 => 4,
            KeyWidth::Auto => {
                if count.checked_mul(8) == Some(body) {
                    8
                } else if count.checked_mul(4) == Some(body) {
                    4
                } else {
                    8
                }
            }
        };
        // `count` comes from the file: the size it implies is checked, not
        // wrapped.
        let Some(expected) = count.checked_mul(width).and_then(|b| b.checked_add(8)) else {
            return Err(Error::corruption(
                name,
                0,
                format!(
                    "header says {count} keys of {width} bytes: more than a file can hold ({len} bytes found)"
                ),
            ));
        };
        if expected != len {
            let fits = |w: u64| count.checked_mul(w) == Some(body);
            let what = match opts.width {
                KeyWidth::U64 if fits(4) => {
                    format!(
                        "header says {count} keys; the size fits {count} u32 keys, not u64: a u32 key file?"
                    )
                }
                KeyWidth::U32 if fits(8) => {
                    format!(
                        "header says {count} keys; the size fits {count} u64 keys, not u32: a u64 key file?"
                    )
                }
                KeyWidth::Auto => format!(
                    "header says {count} keys, but {body} bytes of keys are neither {count} u64 nor {count} u32 keys"
                ),
                _ => format!("header says {count} keys of {width} bytes"),
            };
            return Err(Error::Truncated {
                file: format!("{name} ({what})"),
                expected,
                found: len,
            });
        }
        usize::try_from(count).map_err(|_| {
            Error::invalid(format!(
                "{name}: {count} keys do not fit in memory on this machine"
            ))
        })?;
        Ok(KeyReader {
            r,
            path: path.to_path_buf(),
            width: width as usize,
            count,
            read: 0,
            dedup: opts.dedup,
            order: Order::Increasing,
            prev: None,
            buf: Vec::new(),
            chunk: Vec::with_capacity(CHUNK_KEYS),
            next: 0,
            failed: false,
        })
    }

    /// This reader, accepting repeated keys (non-decreasing order: a
    /// relation of a join whose keys repeat); decreasing keys are still
    /// [`Error::OutOfOrder`].
    pub fn with_repeats(mut self) -> Self {
        self.order = Order::NonDecreasing;
        self
    }

    /// This reader, taking keys in any order (an unsorted relation); only
    /// the header and size are checked.
    pub fn any_order(mut self) -> Self {
        self.order = Order::Any;
        self
    }

    /// Keys the header announces (repeats included).
    pub fn total(&self) -> u64 {
        self.count
    }

    /// Keys of the file read so far (repeats included).
    pub fn position(&self) -> u64 {
        self.read
    }

    fn fill(&mut self) -> Result<()> {
        let take = usize::try_from(self.count - self.read)
            .unwrap_or(CHUNK_KEYS)
            .min(CHUNK_KEYS);
        self.buf.resize(take * self.width, 0);
        self.r
            .read_exact(&mut self.buf)
            .map_err(|e| Error::io(&self.path, e))?;
        self.chunk.clear();
        self.next = 0;
        if self.width == 8 {
            self.chunk.extend(
                self.buf
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))),
            );
        } else {
            self.chunk.extend(
                self.buf
                    .chunks_exact(4)
                    .map(|c| u64::from(u32::from_le_bytes(c.try_into().unwrap_or([0; 4])))),
            );
        }
        Ok(())
    }
}

impl Iterator for KeyReader {
    type Item = Result<u64>;

    fn next(&mut self) -> Option<Result<u64>> {
        loop {
            if self.failed {
                return None;
            }
            if self.next == self.chunk.len() {
                if self.read == self.count {
                    return None;
                }
                if let Err(e) = self.fill() {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
            let k = *self.chunk.get(self.next)?;
            self.next += 1;
            let position = self.read;
            self.read += 1;
            match self.prev {
                _ if self.order == Order::Any => {}
                Some(p) if k == p && self.dedup => continue,
                Some(p) if k == p && self.order == Order::NonDecreasing => {}
                Some(p) if k <= p => {
                    self.failed = true;
                    return Some(Err(Error::OutOfOrder {
                        position,
                        previous: p,
                        got: k,
                    }));
                }
                _ => {}
            }
            self.prev = Some(k);
            return Some(Ok(k));
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.count - self.read).unwrap_or(usize::MAX);
        if self.failed {
            (0, Some(0))
        } else if self.dedup {
            (left.min(1), Some(left))
        } else {
            (left, Some(left))
        }
    }
}

/// Writes keys as a SOSD `u64` file and syncs it.
pub fn write_keys(path: &Path, keys: &[u64]) -> Result<()> {
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    w.write_all(&(keys.len() as u64).to_le_bytes())
        .map_err(|e| Error::io(path, e))?;
    for k in keys {
        w.write_all(&k.to_le_bytes()).map_err(|e| Error::io(path, e))?;
    }
    let file = w.into_inner().map_err(|e| Error::io(path, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(path, e))
}

/// Writes keys as a SOSD `u32` file (every key must fit in 32 bits).
pub fn write_keys_u32(path: &Path, keys: &[u64]) -> Result<()> {
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let mut w = BufWriter::new(file);
    w.write_all(&(keys.len() as u64).to_le_bytes())
        .map_err(|e| Error::io(path, e))?;
    for (i, &k) in keys.iter().enumerate() {
        let k32 = u32::try_from(k)
            .map_err(|_| Error::invalid(format!("key {k} at position {i} does not fit in u32")))?;
        w.write_all(&k32.to_le_bytes()).map_err(|e| Error::io(path, e))?;
    }
    w.flush().map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_u64_and_u32() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("k");
        let keys = vec![1, 5, 9, u64::MAX];
        write_keys(&p, &keys).unwrap();
        assert_eq!(read_keys(&p, KeyFileOptions::default()).unwrap(), keys);
        let q = tmp.path().join("k32");
        write_keys_u32(&q, &[3, 4, 70000]).unwrap();
        assert_eq!(
            read_keys(&q, KeyFileOptions::default()).unwrap(),
            vec![3, 4, 70000]
        );
        assert!(write_keys_u32(&q, &[1 << 40]).is_err());
    }

    #[test]
    fn unsorted_and_duplicates_name_the_position() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("k");
        write_keys(&p, &[1, 2, 9, 4]).unwrap();
        let e = read_keys(&p, KeyFileOptions::default()).unwrap_err();
        assert!(
            matches!(
                e,
                Error::OutOfOrder {
                    position: 3,
                    previous: 9,
                    got: 4
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("position 3"));
        write_keys(&p, &[1, 2, 2, 4]).unwrap();
        let e = read_keys(&p, KeyFileOptions::default()).unwrap_err();
        assert!(e.to_string().contains("duplicate"));
        let k = read_keys(
            &p,
            KeyFileOptions {
                dedup: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(k, vec![1, 2, 4]);
    }

    #[test]
    fn key_reader_streams_across_chunks_with_the_same_checks() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("k");
        let n = 3 * CHUNK_KEYS + 123;
        let keys: Vec<u64> = (0..n as u64).map(|i| i * 3 + (i % 2)).collect();
        write_keys(&p, &keys).unwrap();
        let r = KeyReader::open(&p, KeyFileOptions::default()).unwrap();
        assert_eq!(r.total(), n as u64);
        assert_eq!(r.size_hint(), (n, Some(n)));
        assert_eq!(r.collect::<Result<Vec<u64>>>().unwrap(), keys);
        let q = tmp.path().join("k32");
        write_keys_u32(&q, &keys).unwrap();
        assert_eq!(read_keys(&q, KeyFileOptions::default()).unwrap(), keys);

        // Out of order at the first key of the second chunk: one error, then
        // the stream ends.
        let mut bad = keys.clone();
        bad[CHUNK_KEYS] = 0;
        write_keys(&p, &bad).unwrap();
        let mut r = KeyReader::open(&p, KeyFileOptions::default()).unwrap();
        let got: Vec<Result<u64>> = r.by_ref().collect();
        assert_eq!(got.len(), CHUNK_KEYS + 1);
        match got.last().unwrap() {
            Err(Error::OutOfOrder {
                position,
                previous,
                got,
            }) => {
                assert_eq!(
                    (*position, *previous, *got),
                    (CHUNK_KEYS as u64, keys[CHUNK_KEYS - 1], 0)
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(r.next().is_none() && r.size_hint() == (0, Some(0)));

        // A repeat across the chunk boundary: refused, or dropped with dedup.
        let mut rep = keys.clone();
        rep[CHUNK_KEYS] = rep[CHUNK_KEYS - 1];
        write_keys(&p, &rep).unwrap();
        let e = read_keys(&p, KeyFileOptions::default()).unwrap_err();
        assert!(
            e.to_string().contains("duplicate") && e.to_string().contains(&CHUNK_KEYS.to_string()),
            "{e}"
        );
        let dedup = KeyFileOptions {
            dedup: true,
            ..Default::default()
        };
        let mut want = rep.clone();
        want.dedup();
        assert_eq!(read_keys(&p, dedup).unwrap(), want);
        let mut r = KeyReader::open(&p, dedup).unwrap();
        assert_eq!(r.by_ref().count(), n - 1);
        assert_eq!(r.position(), n as u64);
    }

    /// A header whose count times the width overflows is refused with the
    /// file named, not a wrapped size that happens to match.
    #[test]
    fn a_huge_count_is_refused_not_wrapped() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("huge");
        // 2^61 keys of 8 bytes wrap to 0 bytes: the file is just the header.
        std::fs::write(&p, (1u64 << 61).to_le_bytes()).unwrap();
        for width in [KeyWidth::U64, KeyWidth::Auto] {
            let e = read_keys(&p, of_width(width)).unwrap_err();
            assert!(e.is_corruption() && e.to_string().contains("huge"), "{e}");
            assert!(e.to_string().contains("more than a file can hold"), "{e}");
        }
        // 2^62 keys of 4 bytes wrap too.
        std::fs::write(&p, (1u64 << 62).to_le_bytes()).unwrap();
        assert!(
            read_keys(&p, of_width(KeyWidth::U32))
                .unwrap_err()
                .is_corruption()
        );
    }

    fn of_width(width: KeyWidth) -> KeyFileOptions {
        KeyFileOptions { width, dedup: false }
    }

    /// A file whose size fits the other key width says so.
    #[test]
    fn a_width_mismatch_says_which_width_fits() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("k32");
        write_keys_u32(&p, &[1, 2, 3]).unwrap();
        let e = read_keys(&p, of_width(KeyWidth::U64)).unwrap_err().to_string();
        assert!(e.contains("k32") && e.contains("fits 3 u32 keys"), "{e}");
        let q = tmp.path().join("k64");
        write_keys(&q, &[1, 2, 3]).unwrap();
        let e = read_keys(&q, of_width(KeyWidth::U32)).unwrap_err().to_string();
        assert!(e.contains("k64") && e.contains("fits 3 u64 keys"), "{e}");
        // Neither width: both are named.
        std::fs::write(&q, [3u64.to_le_bytes().as_slice(), &[0u8; 13]].concat()).unwrap();
        let e = read_keys(&q, KeyFileOptions::default()).unwrap_err().to_string();
        assert!(e.contains("neither 3 u64 nor 3 u32 keys"), "{e}");
    }

    #[test]
    fn truncated_file() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("k");
        write_keys(&p, &[1, 2, 3, 4]).unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(8 + 8 * 3 + 5).unwrap();
        let e = read_keys(&p, KeyFileOptions::default()).unwrap_err();
        assert!(matches!(e, Error::Truncated { .. }), "{e}");
        std::fs::write(&p, [1u8, 2]).unwrap();
        assert!(read_keys(&p, KeyFileOptions::default()).is_err());
    }
}
