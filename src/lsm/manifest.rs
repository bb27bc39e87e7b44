//! The store's manifest, `strata-lsm.manifest`: the tables of every level,
//! the write-ahead log chain, the next file number and the last sequence
//! number the tables hold. A [`crate::log::Manifest`] (checksummed JSON,
//! published atomically) changed by [`LsmEdit`]s. See `docs/format/lsm.md`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::log::{Manifest, WalChain, manifest};
use crate::lsm::key;
use crate::storage::Directory;
use crate::{Error, Result};

/// File name of the manifest.
pub const LSM_MANIFEST_FILE: &str = "strata-lsm.manifest";
/// Temporary name it is written under before its rename.
pub(super) const LSM_MANIFEST_TMP: &str = "strata-lsm.manifest.tmp";
/// Magic number at the start of the manifest: `STRATALS`.
const LSM_MANIFEST_MAGIC: u64 = u64::from_le_bytes(*b"STRATALS");
/// Format version of the manifest.
pub const LSM_MANIFEST_VERSION: u32 = 1;
/// Levels of the tree (L0 .. L6).
pub const NUM_LEVELS: usize = 7;

/// The file name of table `number`: `NNNNNN.sst`.
pub fn table_name(number: u64) -> String {
    format!("{number:06}.sst")
}

/// The table number of a file name (`None` for any other name).
pub fn table_number(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".sst")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One table as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRecord {
    /// The table's number (its file is [`table_name`]).
    pub number: u64,
    /// File size in bytes.
    pub size: u64,
    /// Entries (internal keys) it holds.
    pub entries: u64,
    /// Its smallest internal key (hex in the JSON).
    #[serde(serialize_with = "to_hex", deserialize_with = "from_hex")]
    pub smallest: Vec<u8>,
    /// Its largest internal key (hex in the JSON).
    #[serde(serialize_with = "to_hex", deserialize_with = "from_hex")]
    pub largest: Vec<u8>,
    /// The build id written into the file, checked when it is opened.
    pub build_id: u64,
}

impl TableRecord {
    /// The smallest user key.
    pub fn smallest_user(&self) -> &[u8] {
        key::user_key(&self.smallest)
    }

    /// The largest user key.
    pub fn largest_user(&self) -> &[u8] {
        key::user_key(&self.largest)
    }
}

fn to_hex<S: Serializer>(bytes: &[u8], s: S) -> std::result::Result<S::Ok, S::Error> {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    s.serialize_str(&out)
}

fn from_hex<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<u8>, D::Error> {
    let s = String::deserialize(d)?;
    let digit = |c: u8| -> std::result::Result<u8, D::Error> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            _ => Err(serde::de::Error::custom("not a lowercase hex digit")),
        }
    };
    if s.len() % 2 != 0 {
        return Err(serde::de::Error::custom("odd number of hex digits"));
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| match p {
            [h, l] => Ok(digit(*h)? << 4 | digit(*l)?),
            _ => Err(serde::de::Error::custom("odd number of hex digits")),
        })
        .collect()
}

/// What the manifest records (its payload, JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LsmManifest {
    /// The next table (or other file) number to hand out.
    pub next_file: u64,
    /// The highest sequence number the tables hold (recovery continues
    /// after it even when the log holds nothing newer).
    pub last_seq: u64,
    /// The live log segments (see [`WalChain`]); every one is replayed on open.
    pub wal: WalChain,
    /// Tables per level; L0 newest first, L1.. sorted by smallest key.
    pub levels: Vec<Vec<TableRecord>>,
    /// Flushes and compactions completed over the store's life.
    pub flushes: u64,
    /// Compactions completed over the store's life.
    pub compactions: u64,
    /// Version of strata that wrote the manifest.
    pub strata_version: String,
}

/// A change to the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LsmEdit {
    /// The log chain changed (a rotation sealed the newest segment).
    Wal(WalChain),
    /// A flush wrote `table` to L0: the log segments before `log_start` are
    /// covered, and the tables hold sequence numbers up to `last_seq`.
    Flush {
        /// The new L0 table.
        table: TableRecord,
        /// First log segment the flushed memtable did not cover.
        log_start: u64,
        /// Highest sequence number it held.
        last_seq: u64,
    },
    /// A compaction (or a move) replaced tables: `remove` as `(level,
    /// number)`, `add` as `(level, table)`.
    Compact {
        /// Tables removed.
        remove: Vec<(usize, u64)>,
        /// Tables added.
        add: Vec<(usize, TableRecord)>,
    },
    /// File numbers below this are taken.
    NextFile(u64),
    /// An ingestion ([`super::Store::ingest`]) added `add` as `(level,
    /// table)`; they hold sequence numbers up to `last_seq`.
    Ingest {
        /// Tables added.
        add: Vec<(usize, TableRecord)>,
        /// Their sequence number.
        last_seq: u64,
    },
}

impl Manifest for LsmManifest {
    type Edit = LsmEdit;
    const FILE: &'static str = LSM_MANIFEST_FILE;
    const TMP: &'static str = LSM_MANIFEST_TMP;
    const MAGIC: u64 = LSM_MANIFEST_MAGIC;
    const VERSION: u32 = LSM_MANIFEST_VERSION;
    const WHAT: &'static str = "lsm manifest";
    const MAGIC_NAME: &'static str = "strata lsm manifest";

    fn apply(&mut self, edit: &LsmEdit) -> Result<()> {
        match edit {
            LsmEdit::Wal(chain) => self.wal = chain.clone(),
            LsmEdit::Flush {
                table,
                log_start,
                last_seq,
            } => {
                self.level_mut(0)?.insert(0, table.clone());
                self.next_file = self.next_file.max(table.number + 1);
                self.wal = self.wal.starting_at(*log_start);
                self.last_seq = self.last_seq.max(*last_seq);
                self.flushes += 1;
            }
            LsmEdit::Compact { remove, add } => {
                for &(level, number) in remove {
                    let l = self.level_mut(level)?;
                    let before = l.len();
                    l.retain(|t| t.number != number);
                    if l.len() == before {
                        return Err(Error::invalid(format!(
                            "lsm manifest edit removes table {number} from L{level}, which does not hold it"
                        )));
                    }
                }
                for (level, t) in add {
                    let (level, t) = (*level, t.clone());
                    self.next_file = self.next_file.max(t.number + 1);
                    let l = self.level_mut(level)?;
                    if level == 0 {
                        // Compactions never write L0; a move keeps the order by number.
                        let at = l.partition_point(|x| x.number > t.number);
                        l.insert(at, t);
                    } else {
                        let at = l.partition_point(|x| key::compare(&x.smallest, &t.smallest).is_lt());
                        l.insert(at, t);
                    }
                }
                self.compactions += 1;
            }
            LsmEdit::NextFile(n) => self.next_file = self.next_file.max(*n),
            LsmEdit::Ingest { add, last_seq } => {
                for (level, t) in add {
                    self.next_file = self.next_file.max(t.number + 1);
                    let l = self.level_mut(*level)?;
                    let at = l.partition_point(|x| key::compare(&x.smallest, &t.smallest).is_lt());
                    l.insert(at, t.clone());
                }
                self.last_seq = self.last_seq.max(*last_seq);
            }
        }
        Ok(())
    }
}

impl LsmManifest {
    /// The manifest of a new, empty store whose log is `wal`.
    pub(super) fn empty(wal: WalChain) -> Self {
        LsmManifest {
            next_file: 1,
            last_seq: 0,
            wal,
            levels: vec![Vec::new(); NUM_LEVELS],
            flushes: 0,
            compactions: 0,
            strata_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    fn level_mut(&mut self, level: usize) -> Result<&mut Vec<TableRecord>> {
        self.levels
            .get_mut(level)
            .ok_or_else(|| Error::invalid(format!("lsm manifest edit names level {level}")))
    }

    /// Checks what a loaded manifest must satisfy: the log chain, the number
    /// of levels, every table's number below `next_file` and named once,
    /// keys that parse, and L1.. sorted and non-overlapping. A violation is
    /// [`Error::Corruption`] naming `file`.
    pub fn check(&self, file: &str) -> Result<()> {
        self.wal.check(file)?;
        let bad = |what: String| Error::corruption(file, 0, what);
        if self.levels.len() != NUM_LEVELS {
            return Err(bad(format!(
                "{} levels, expected {NUM_LEVELS}",
                self.levels.len()
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (level, tables) in self.levels.iter().enumerate() {
            for t in tables {
                if t.number >= self.next_file || !seen.insert(t.number) {
                    return Err(bad(format!(
                        "table {} in L{level} is numbered twice or past next_file",
                        t.number
                    )));
                }
                if key::parse(&t.smallest).is_none()
                    || key::parse(&t.largest).is_none()
                    || key::compare(&t.smallest, &t.largest).is_gt()
                {
                    return Err(bad(format!("table {} in L{level} has bad key bounds", t.number)));
                }
            }
            if level > 0 {
                for w in tables.windows(2) {
                    if let [a, b] = w {
                        if a.largest_user() >= b.smallest_user() {
                            return Err(bad(format!(
                                "tables {} and {} of L{level} overlap or are out of order",
                                a.number, b.number
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads and checks the manifest of `dir`; `None` if there is none.
    pub fn load(dir: &dyn Directory) -> Result<Option<Self>> {
        let m: Option<Self> = manifest::load(dir)?;
        if let Some(m) = &m {
            m.check(&format!("{}/{LSM_MANIFEST_FILE}", dir.describe()))?;
        }
        Ok(m)
    }

    /// Publishes the manifest atomically in `dir`.
    pub(super) fn store(&self, dir: &dyn Directory) -> Result<()> {
        manifest::store(self, dir)
    }

    /// Applies `edits` to a copy and publishes it; returns the new manifest.
    pub(super) fn commit(&self, edits: &[LsmEdit], dir: &dyn Directory) -> Result<Self> {
        manifest::commit(self, edits, dir)
    }

    /// The bytes of the manifest file.
    pub fn encode(&self) -> Result<Vec<u8>> {
        manifest::encode(self)
    }

    /// Parses the bytes of a manifest file named `file` and checks it.
    pub fn decode(bytes: &[u8], file: &str) -> Result<Self> {
        let m: Self = manifest::decode(bytes, file)?;
        m.check(file)?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsm::key::ValueKind;
    use crate::storage::MemDirectory;

    fn rec(number: u64, lo: &[u8], hi: &[u8]) -> TableRecord {
        TableRecord {
            number,
            size: 100,
            entries: 2,
            smallest: key::encode(lo, 9, ValueKind::Put),
            largest: key::encode(hi, 3, ValueKind::Delete),
            build_id: 77,
        }
    }

    #[test]
    fn edits_round_trip_and_damage_is_an_error() {
        let dir = MemDirectory::new();
        let m = LsmManifest::empty(WalChain::new(5, 1));
        m.store(&dir).unwrap();
        let m = m
            .commit(
                &[
                    LsmEdit::Wal(m.wal.sealed_at(100, 4)),
                    LsmEdit::Flush {
                        table: rec(3, b"a", b"m"),
                        log_start: 2,
                        last_seq: 4,
                    },
                    LsmEdit::Compact {
                        remove: vec![(0, 3)],
                        add: vec![(1, rec(5, b"n", b"z")), (1, rec(4, b"a", b"m\xff"))],
                    },
                ],
                &dir,
            )
            .unwrap();
        assert_eq!(m.next_file, 6);
        assert_eq!((m.wal.first, m.last_seq, m.flushes, m.compactions), (2, 4, 1, 1));
        let l1: Vec<u64> = m.levels[1].iter().map(|t| t.number).collect();
        assert_eq!(l1, vec![4, 5]);
        assert!(m.levels[0].is_empty());
        assert_eq!(LsmManifest::load(&dir).unwrap(), Some(m.clone()));
        let bytes = m.encode().unwrap();
        for i in (0..bytes.len()).step_by(7) {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert!(LsmManifest::decode(&b, "m").is_err(), "flip at {i}");
        }
        // Overlapping L1 tables are refused on load.
        let mut bad = m.clone();
        bad.levels[1][1].smallest = key::encode(b"c", 1, ValueKind::Put);
        assert!(bad.check("m").unwrap_err().is_corruption());
        // Removing a table a level does not hold is an error.
        assert!(
            m.commit(
                &[LsmEdit::Compact {
                    remove: vec![(2, 4)],
                    add: vec![]
                }],
                &dir
            )
            .is_err()
        );
    }

    #[test]
    fn table_names() {
        assert_eq!(table_name(12), "000012.sst");
        assert_eq!(table_number("000012.sst"), Some(12));
        assert_eq!(table_number("x.sst"), None);
        assert_eq!(table_number("000012.sst.tmp"), None);
    }
}
