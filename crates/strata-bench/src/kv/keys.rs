//! Keys from a text key file (`kvbench --key-file`): one key per line, any
//! bytes but `\n`, 1 to [`MAX_FILE_KEY`] bytes each.
//!
//! The keys are sorted bytewise, and key index `i` is the `i`-th smallest,
//! so ids keep their meaning ([`super::workload`]): id `2 i` is key `i`,
//! and id `2 i + 1` (what `readmissing` asks) is key `i` followed by one zero
//! byte, which lies strictly between key `i` and key `i + 1` and is never in
//! the file (a file where it is, is refused). Inserts past the file's keys
//! (YCSB D and E) get the key `last ++ 0xFF ++ i` (big-endian): above every
//! file key, in index order.

use std::path::Path;

use strata::lsm::key::MAX_KEY_LEN;
use strata::{Error, Result};

/// Longest key a key file may hold: the store's limit (64 KiB) less 16
/// bytes, room for `readmissing`'s extra byte and the 9 bytes of keys past
/// the file.
pub const MAX_FILE_KEY: usize = MAX_KEY_LEN - 16;

/// The distinct keys of a text key file, sorted bytewise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFile {
    name: String,
    /// Every key, concatenated in sorted order.
    data: Vec<u8>,
    /// Key `i` is `data[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
}

impl KeyFile {
    /// Reads and checks the text key file at `path` (see [`KeyFile::parse`]).
    pub fn read(path: &Path) -> Result<KeyFile> {
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let name = path
            .file_stem()
            .map_or_else(|| "keys".to_string(), |s| s.to_string_lossy().into_owned());
        KeyFile::parse(&name, &text).map_err(|e| Error::invalid(format!("key file {}: {e}", path.display())))
    }

    /// The keys of `text`, one per line (a final `\n` is optional; a `\r`
    /// is part of its key). Errors ([`Error::InvalidInput`], naming the
    /// line): no keys, an empty line, a key over [`MAX_FILE_KEY`] bytes, a
    /// key given twice, or two keys `k` and `k ++ 0x00` (the second is the
    /// key `readmissing` asks for after the first).
    pub fn parse(name: &str, text: &[u8]) -> Result<KeyFile> {
        let body = text.strip_suffix(b"\n").unwrap_or(text);
        if body.is_empty() {
            return Err(Error::invalid("it holds no keys"));
        }
        let mut lines: Vec<&[u8]> = Vec::new();
        for (n, line) in body.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                return Err(Error::invalid(format!("line {} is empty", n + 1)));
            }
            if line.len() > MAX_FILE_KEY {
                return Err(Error::invalid(format!(
                    "line {}: a key of {} bytes is longer than the limit of {MAX_FILE_KEY} bytes",
                    n + 1,
                    line.len()
                )));
            }
            lines.push(line);
        }
        let mut order: Vec<usize> = (0..lines.len()).collect();
        let key = |i: usize| lines.get(i).copied().unwrap_or_default();
        order.sort_unstable_by(|&a, &b| key(a).cmp(key(b)).then(a.cmp(&b)));
        for w in order.windows(2) {
            let &[a, b] = w else { continue };
            let (ka, kb) = (key(a), key(b));
            if ka == kb {
                return Err(Error::invalid(format!(
                    "lines {} and {} hold the same key {:?}",
                    a.min(b) + 1,
                    a.max(b) + 1,
                    String::from_utf8_lossy(ka)
                )));
            }
            if kb.len() == ka.len() + 1 && kb.starts_with(ka) && kb.last() == Some(&0) {
                return Err(Error::invalid(format!(
                    "line {} is line {}'s key followed by a zero byte, the key readmissing asks for as missing",
                    b + 1,
                    a + 1
                )));
            }
        }
        let mut data = Vec::with_capacity(body.len());
        let mut offsets = Vec::with_capacity(lines.len() + 1);
        offsets.push(0);
        for &i in &order {
            data.extend_from_slice(key(i));
            offsets.push(data.len());
        }
        Ok(KeyFile {
            name: name.to_string(),
            data,
            offsets,
        })
    }

    /// The file's name (its stem), for reports.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of keys.
    pub fn len(&self) -> u64 {
        self.offsets.len().saturating_sub(1) as u64
    }

    /// Whether the file holds no keys (never, for a parsed file).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Mean key length in bytes.
    pub fn mean_len(&self) -> f64 {
        if self.is_empty() {
            0.0
        } else {
            self.data.len() as f64 / self.len() as f64
        }
    }

    /// Key index `i` (sorted order), if in the file.
    pub fn get(&self, i: u64) -> Option<&[u8]> {
        let i = usize::try_from(i).ok()?;
        let (&a, &b) = (self.offsets.get(i)?, self.offsets.get(i.checked_add(1)?)?);
        self.data.get(a..b)
    }

    /// The key of `id` (see the module doc): even ids are present keys, odd
    /// ids the missing key just after them, indexes past the file keys above
    /// every file key.
    pub fn key(&self, id: u64, out: &mut Vec<u8>) {
        out.clear();
        let i = id / 2;
        match self.get(i) {
            Some(k) => out.extend_from_slice(k),
            None => {
                out.extend_from_slice(self.get(self.len().saturating_sub(1)).unwrap_or_default());
                out.push(0xFF);
                out.extend_from_slice(&i.to_be_bytes());
            }
        }
        if id % 2 == 1 {
            out.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &[u8]) -> Result<KeyFile> {
        KeyFile::parse("t", text)
    }

    fn err(text: &[u8]) -> String {
        parse(text).err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn sorts_and_numbers_keys() {
        let f = parse(b"pear\napple\nfig").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.len(), 3);
        let mut k = Vec::new();
        f.key(0, &mut k);
        assert_eq!(k, b"apple");
        f.key(3, &mut k);
        assert_eq!(k, b"fig\0");
        f.key(4, &mut k);
        assert_eq!(k, b"pear");
        f.key(6, &mut k);
        assert_eq!(k, b"pear\xff\0\0\0\0\0\0\0\x03");
        assert!((f.mean_len() - 4.0).abs() < 1e-9);
        assert_eq!(
            parse(b"pear\napple\nfig\n").ok(),
            Some(f),
            "a final newline is optional"
        );
    }

    #[test]
    fn refuses_bad_files_naming_the_line() {
        assert!(err(b"").contains("no keys"));
        assert!(err(b"\n").contains("no keys"));
        assert!(
            err(b"a\n\nb\n").contains("line 2 is empty"),
            "{}",
            err(b"a\n\nb\n")
        );
        assert!(
            err(b"a\nb\na\n").contains("lines 1 and 3"),
            "{}",
            err(b"a\nb\na\n")
        );
        assert!(err(b"ab\0\nab\n").contains("zero byte"));
        let mut long = b"ok\n".to_vec();
        long.extend(std::iter::repeat_n(b'x', MAX_FILE_KEY + 1));
        assert!(err(&long).contains("line 2: a key of"), "{}", err(&long));
        let mut fits = vec![b'x'; MAX_FILE_KEY];
        fits.push(b'\n');
        assert!(parse(&fits).is_ok());
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(KeyFile::read(&dir.path().join("none.txt")).is_err());
    }

    proptest! {
        /// Ids in order give keys in strictly increasing order, across the
        /// file's end too, and every key fits the store.
        #[test]
        fn id_order_is_key_order(mut keys in proptest::collection::btree_set(
            proptest::collection::vec(1u8..=255, 1..12), 1..40)
        ) {
            keys.retain(|k| !k.contains(&b'\n'));
            prop_assume!(!keys.is_empty());
            let mut text = Vec::new();
            for k in keys.iter().rev() {
                text.extend_from_slice(k);
                text.push(b'\n');
            }
            let f = parse(&text).unwrap_or_else(|e| panic!("{e}"));
            prop_assert_eq!(f.len(), keys.len() as u64);
            let (mut prev, mut cur) = (Vec::new(), Vec::new());
            for id in 0..2 * f.len() + 6 {
                f.key(id, &mut cur);
                prop_assert!(cur.len() <= MAX_KEY_LEN);
                if id > 0 {
                    prop_assert!(prev < cur, "id {}: {:?} !< {:?}", id, prev, cur);
                }
                std::mem::swap(&mut prev, &mut cur);
            }
        }
    }
}
