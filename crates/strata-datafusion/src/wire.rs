//! The bytes that carry a [`StrataTable`] or a [`StrataScanExec`] from one
//! process to another (a distributed engine's client, scheduler and
//! executors; `strata-ballista` wraps them in Ballista's codecs).
//!
//! A table travels as its location, a scan as its location and plan (the
//! columns, the key set, the limit; what each partition reads is the scan's
//! input, an in-memory source the engine's own codec carries); the
//! receiver opens the index (or, for an LSM table, the store, read-only) at
//! the location itself, so every process must reach it (an `s3://` prefix
//! for a cluster, or for an LSM store a directory every process sees;
//! credentials come from each process's `AWS_*` environment and never
//! travel).
//!
//! ```text
//! message  = magic "STRATADF" | version u8 (1) | what u8 | body
//! what 1   = table: location
//! what 2   = scan:  location | columns | keys | limit
//! what 3   = LSM table: location
//! what 4   = LSM scan:  location | columns | bkeys | limit
//! location = len u32 | UTF-8 bytes
//! columns  = n u32 | n × u32 (0: key, 1: value)
//! keys     = 0 | lo u64 | hi u64  (range lo..=hi)
//!          | 1 | n u32 | n × u64  (points, sorted)
//! limit    = 0 | 1 | u64
//! bytes    = len u32 | bytes
//! upper    = 0 (none) | 1 | bytes (<=) | 2 | bytes (<)
//! bkeys    = 0 | lo bytes | upper | 1 | n u32 | n × bytes
//! ```
//!
//! Integers are little-endian. [`is_strata`] tells these messages from
//! others; anything malformed is an error, never a panic.

use std::path::Path;
use std::sync::Arc;

use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::physical_plan::ExecutionPlan;
use strata::index::OpenOptions;

use crate::lsm::open_store;
use crate::{
    ByteKeySet, IndexSource, KeySet, LsmSource, StrataLsmScanExec, StrataLsmTable, StrataScanExec,
    StrataTable, Upper, df_err,
};

/// The first bytes of every message.
pub const MAGIC: &[u8; 8] = b"STRATADF";
/// The version this build writes and reads.
pub const VERSION: u8 = 1;

const TABLE: u8 = 1;
const SCAN: u8 = 2;
const LSM_TABLE: u8 = 3;
const LSM_SCAN: u8 = 4;

/// Whether `buf` is a message of this module (of any version).
pub fn is_strata(buf: &[u8]) -> bool {
    buf.starts_with(MAGIC)
}

/// Appends the message for `table` to `buf`.
pub fn encode_table(table: &StrataTable, buf: &mut Vec<u8>) {
    header(buf, TABLE);
    put_str(buf, table.location());
}

/// Appends the message for `scan` to `buf`.
pub fn encode_scan(scan: &StrataScanExec, buf: &mut Vec<u8>) {
    header(buf, SCAN);
    put_str(buf, scan.location());
    put_u32(buf, scan.columns().len());
    for &c in scan.columns() {
        put_u32(buf, c);
    }
    match scan.keys() {
        &KeySet::Range { lo, hi } => {
            buf.push(0);
            buf.extend_from_slice(&lo.to_le_bytes());
            buf.extend_from_slice(&hi.to_le_bytes());
        }
        KeySet::Points(p) => {
            buf.push(1);
            put_keys(buf, p);
        }
    }
    put_limit(buf, scan.limit());
}

/// Appends the message for the LSM `table` to `buf`.
pub fn encode_lsm_table(table: &StrataLsmTable, buf: &mut Vec<u8>) {
    header(buf, LSM_TABLE);
    put_str(buf, table.location());
}

/// Appends the message for the LSM `scan` to `buf`.
pub fn encode_lsm_scan(scan: &StrataLsmScanExec, buf: &mut Vec<u8>) {
    header(buf, LSM_SCAN);
    put_str(buf, scan.location());
    put_u32(buf, scan.columns().len());
    for &c in scan.columns() {
        put_u32(buf, c);
    }
    match scan.keys() {
        ByteKeySet::Range { lo, hi } => {
            buf.push(0);
            put_bytes(buf, lo);
            put_upper(buf, hi);
        }
        ByteKeySet::Points(p) => {
            buf.push(1);
            put_byte_keys(buf, p);
        }
    }
    put_limit(buf, scan.limit());
}

/// The LSM table of a message from [`encode_lsm_table`], its store opened
/// read-only.
pub fn decode_lsm_table(buf: &[u8]) -> DfResult<StrataLsmTable> {
    let mut r = Reader::new(buf, LSM_TABLE)?;
    let location = r.string()?;
    r.end()?;
    StrataLsmTable::open(Path::new(&location)).map_err(df_err)
}

/// The LSM scan of a message from [`encode_lsm_scan`] over `input` (its
/// part descriptors), its store opened read-only.
pub fn decode_lsm_scan(buf: &[u8], input: Arc<dyn ExecutionPlan>) -> DfResult<StrataLsmScanExec> {
    let mut r = Reader::new(buf, LSM_SCAN)?;
    let location = r.string()?;
    let columns = r.columns()?;
    let keys = match r.u8()? {
        0 => ByteKeySet::Range {
            lo: r.bytes()?,
            hi: r.upper()?,
        },
        1 => ByteKeySet::Points(r.byte_keys()?),
        t => return Err(malformed(&format!("key set tag {t}"))),
    };
    let limit = r.limit()?;
    r.end()?;
    let store = open_store(Path::new(&location)).map_err(df_err)?;
    let source = LsmSource {
        store: Arc::new(store),
    };
    StrataLsmScanExec::with_input(source, location, columns, keys, limit, input)
}

/// What a message is, if it is one of this module's: the table or scan it
/// carries, decoded (its index or store opened).
pub enum Decoded {
    /// An index table.
    Table(StrataTable),
    /// An LSM table.
    LsmTable(StrataLsmTable),
    /// A scan of an index.
    Scan(StrataScanExec),
    /// A scan of an LSM store.
    LsmScan(StrataLsmScanExec),
}

/// Decodes any message of this module; a scan's input is the one of
/// `inputs`.
pub fn decode(buf: &[u8], inputs: &[Arc<dyn ExecutionPlan>]) -> DfResult<Decoded> {
    let input = || match inputs {
        [input] => Ok(input.clone()),
        _ => Err(DataFusionError::Internal(format!(
            "a strata scan has one input, not {}",
            inputs.len()
        ))),
    };
    match buf.get(MAGIC.len() + 1) {
        Some(&TABLE) => decode_table(buf).map(Decoded::Table),
        Some(&SCAN) => decode_scan(buf, input()?).map(Decoded::Scan),
        Some(&LSM_TABLE) => decode_lsm_table(buf).map(Decoded::LsmTable),
        Some(&LSM_SCAN) => decode_lsm_scan(buf, input()?).map(Decoded::LsmScan),
        _ => Err(malformed("message kind")),
    }
}

/// The table of a message from [`encode_table`], its index opened.
pub fn decode_table(buf: &[u8]) -> DfResult<StrataTable> {
    let mut r = Reader::new(buf, TABLE)?;
    let location = r.string()?;
    r.end()?;
    StrataTable::open(Path::new(&location), &OpenOptions::default()).map_err(df_err)
}

/// The scan of a message from [`encode_scan`] over `input` (its part
/// descriptors), its index opened.
pub fn decode_scan(buf: &[u8], input: Arc<dyn ExecutionPlan>) -> DfResult<StrataScanExec> {
    let mut r = Reader::new(buf, SCAN)?;
    let location = r.string()?;
    let columns = r.columns()?;
    let keys = match r.u8()? {
        0 => KeySet::Range {
            lo: r.u64()?,
            hi: r.u64()?,
        },
        1 => KeySet::Points(r.keys()?),
        t => return Err(malformed(&format!("key set tag {t}"))),
    };
    let limit = r.limit()?;
    r.end()?;
    let index = strata::registry::open(Path::new(&location), &OpenOptions::default()).map_err(df_err)?;
    let source = IndexSource {
        index: Arc::from(index),
    };
    StrataScanExec::with_input(source, location, columns, keys, limit, input)
}

fn header(buf: &mut Vec<u8>, what: u8) {
    buf.extend_from_slice(MAGIC);
    buf.push(VERSION);
    buf.push(what);
}

fn put_u32(buf: &mut Vec<u8>, n: usize) {
    // Counts and column numbers of a plan are far below 2^32.
    buf.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_u32(buf, s.len());
    buf.extend_from_slice(s.as_bytes());
}

fn put_keys(buf: &mut Vec<u8>, keys: &[u64]) {
    put_u32(buf, keys.len());
    for k in keys {
        buf.extend_from_slice(&k.to_le_bytes());
    }
}

fn put_limit(buf: &mut Vec<u8>, limit: Option<usize>) {
    match limit {
        None => buf.push(0),
        Some(l) => {
            buf.push(1);
            buf.extend_from_slice(&(l as u64).to_le_bytes());
        }
    }
}

fn put_bytes(buf: &mut Vec<u8>, b: &[u8]) {
    put_u32(buf, b.len());
    buf.extend_from_slice(b);
}

fn put_byte_keys(buf: &mut Vec<u8>, keys: &[Vec<u8>]) {
    put_u32(buf, keys.len());
    for k in keys {
        put_bytes(buf, k);
    }
}

fn put_upper(buf: &mut Vec<u8>, hi: &Upper) {
    match hi {
        None => buf.push(0),
        Some((k, inclusive)) => {
            buf.push(if *inclusive { 1 } else { 2 });
            put_bytes(buf, k);
        }
    }
}

fn malformed(what: &str) -> DataFusionError {
    DataFusionError::Internal(format!("strata plan message: bad {what}"))
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], what: u8) -> DfResult<Self> {
        let Some(rest) = buf.strip_prefix(MAGIC) else {
            return Err(malformed("magic (not a strata plan message)"));
        };
        let mut r = Reader { buf: rest };
        let version = r.u8()?;
        if version != VERSION {
            return Err(DataFusionError::Internal(format!(
                "strata plan message of version {version}; this build reads version {VERSION} \
                 (run the same strata build on every process)"
            )));
        }
        let got = r.u8()?;
        if got != what {
            return Err(malformed(&format!("message kind {got} (expected {what})")));
        }
        Ok(r)
    }

    fn take(&mut self, n: usize) -> DfResult<&'a [u8]> {
        if self.buf.len() < n {
            return Err(malformed("length (message cut short)"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn u8(&mut self) -> DfResult<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> DfResult<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> DfResult<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }

    /// A count of items of at least `size` bytes each, checked against
    /// what is left (no huge allocation from a bad count).
    fn count(&mut self, size: usize) -> DfResult<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(size) > self.buf.len() {
            return Err(malformed("count (more items than bytes)"));
        }
        Ok(n)
    }

    fn string(&mut self) -> DfResult<String> {
        String::from_utf8(self.bytes()?).map_err(|_| malformed("location (not UTF-8)"))
    }

    fn bytes(&mut self) -> DfResult<Vec<u8>> {
        let n = self.count(1)?;
        Ok(self.take(n)?.to_vec())
    }

    fn byte_keys(&mut self) -> DfResult<Vec<Vec<u8>>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.bytes()).collect()
    }

    fn upper(&mut self) -> DfResult<Upper> {
        Ok(match self.u8()? {
            0 => None,
            1 => Some((self.bytes()?, true)),
            2 => Some((self.bytes()?, false)),
            t => return Err(malformed(&format!("upper end tag {t}"))),
        })
    }

    fn columns(&mut self) -> DfResult<Vec<usize>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.u32().map(|c| c as usize)).collect()
    }

    fn limit(&mut self) -> DfResult<Option<usize>> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(
                usize::try_from(self.u64()?).map_err(|_| malformed("limit"))?,
            )),
            t => Err(malformed(&format!("limit tag {t}"))),
        }
    }

    fn keys(&mut self) -> DfResult<Vec<u64>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.u64()).collect()
    }

    fn end(&self) -> DfResult<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(malformed("length (bytes after the message)"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_messages_are_errors() {
        let mut buf = Vec::new();
        header(&mut buf, SCAN);
        put_str(&mut buf, "/nonexistent");
        put_u32(&mut buf, 1_000_000);
        let input =
            crate::scan::parts_input(<IndexSource as crate::ScanSource>::part_schema(), Vec::new()).unwrap();
        // Every prefix, and the count of a million columns in 0 bytes.
        for n in 0..buf.len() + 1 {
            assert!(decode_scan(&buf[..n], input.clone()).is_err(), "prefix {n}");
            assert!(decode_table(&buf[..n]).is_err(), "prefix {n}");
            assert!(decode_lsm_scan(&buf[..n], input.clone()).is_err(), "prefix {n}");
            assert!(
                decode(&buf[..n], std::slice::from_ref(&input)).is_err(),
                "prefix {n}"
            );
        }
        let mut other = buf.clone();
        other[8] = VERSION + 1;
        let e = decode_scan(&other, input)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("version"), "{e}");
        assert!(!is_strata(b"STRATAD"));
        assert!(is_strata(&buf));
    }
}
