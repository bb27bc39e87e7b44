//! `strata lsm`: load, query, update, compact, verify and stress an LSM store
//! (`strata::lsm::Store`) of byte-string keys and values.
//!
//! Keys and values are UTF-8 text on the command line and in output by
//! default (output escapes tab, newline, carriage return, backslash and any
//! byte that is not UTF-8 as `\t`, `\n`, `\r`, `\\`, `\xNN`); `--hex` reads
//! and prints them as hexadecimal bytes instead.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use rand::{Rng, SeedableRng};
use strata::lsm::{Options, Store, WriteBatch};
use strata::{Error, Result};

use crate::KeyFileArgs;
use crate::db::{StressArgs, out};

/// `strata lsm ...`.
#[derive(Args, Debug)]
pub struct LsmArgs {
    #[command(subcommand)]
    cmd: LsmCmd,
}

#[derive(Args, Debug, Clone)]
struct StoreArgs {
    /// Store directory (created by load, put, delete, compact and stress if
    /// missing; get, scan, stats and verify open an existing store
    /// read-only).
    dir: PathBuf,
    /// Index of the tables the store writes: fp, pgm, pgm-cpr, rs, rmi, plr, fiting,
    /// gap-zonemap-d or air (tables written before keep theirs).
    #[arg(long, default_value = "pgm")]
    index: String,
    /// Position boundary of the table index: entries a lookup searches
    /// after the index.
    #[arg(long, default_value_t = 16)]
    boundary: u64,
    /// Total memory budget (memtables + block cache + index + filter), e.g. 64M.
    #[arg(long, default_value = "64M")]
    memory: String,
    /// When writes are synced: always (or every: each write is on stable
    /// storage when it returns), never (at close), or a period in
    /// milliseconds (10 or 10ms: a background sync).
    #[arg(long, default_value = "always")]
    sync: String,
    /// Keys and values are hexadecimal bytes (input and output).
    #[arg(long)]
    hex: bool,
    /// More store options as `name=value,...` (`Options::parse_spec`), after
    /// the ones above, e.g. `granularity=level,target_file=32M` or
    /// `pin=false` (tables' indexes and filters in the block cache, not
    /// resident).
    #[arg(long, default_value = "")]
    opts: String,
}

#[derive(Subcommand, Debug)]
enum LsmCmd {
    /// Load `key<TAB>value` lines from FILE, or a SOSD key file (`--keys`).
    ///
    /// SOSD keys are stored as 8-byte big-endian keys, the value of each its
    /// rank (8 bytes big-endian). The whole input is checked before anything
    /// is written, so a bad file changes nothing.
    Load {
        #[command(flatten)]
        store: StoreArgs,
        /// A file of `key<TAB>value` lines.
        #[arg(required_unless_present = "keys", conflicts_with = "keys")]
        file: Option<PathBuf>,
        /// A SOSD key file instead.
        #[arg(long)]
        keys: Option<PathBuf>,
        /// Drop duplicate keys of the SOSD file instead of rejecting it.
        #[arg(long)]
        dedup: bool,
    },
    /// Insert or overwrite a key.
    Put {
        #[command(flatten)]
        store: StoreArgs,
        /// Key.
        key: String,
        /// Value.
        value: String,
    },
    /// Print `key<TAB>value`, or `key<TAB>not found`.
    Get {
        #[command(flatten)]
        store: StoreArgs,
        /// Key.
        key: String,
    },
    /// Delete a key (absent keys are fine).
    Delete {
        #[command(flatten)]
        store: StoreArgs,
        /// Key.
        key: String,
    },
    /// Print `key<TAB>value` lines in key order from a key on.
    Scan {
        #[command(flatten)]
        store: StoreArgs,
        /// First key (default: the smallest).
        #[arg(long)]
        from: Option<String>,
        /// At most this many records (default: all).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Print the store's statistics as JSON.
    Stats {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Flush the memtable and compact every level into the last one.
    Compact {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Read every table's blocks and check checksums, order and level invariants.
    Verify {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Random puts and deletes, printing `begin`/`ack` lines (for kill -9 tests).
    ///
    /// Keys and values are random bytes. Each write is preceded by `begin OP
    /// KEY VALUE` and followed, once acknowledged, by `ack OP KEY VALUE`
    /// (hex; `=` for an empty value, `-` for a delete's; flushed per line).
    Stress {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        stress: StressArgs,
    },
}

/// The store options of `s`: index, boundary, memory and `--opts` through
/// [`Options::parse_spec`], then the sync mode.
fn options(s: &StoreArgs) -> Result<Options> {
    let memory = crate::db::memory_arg(&s.memory)?;
    let mut o = Options::parse_spec(&format!(
        "index={},boundary={},memory={memory},{}",
        s.index, s.boundary, s.opts
    ))?;
    o.sync = crate::db::sync_arg(&s.sync)?;
    Ok(o)
}

/// Opens the store for writing (created if missing).
fn open_rw(s: &StoreArgs) -> Result<Store> {
    Store::open(&s.dir, options(s)?)
}

/// Opens an existing store read-only (a shared lock: refused while a writer
/// has it); a missing directory is an error, never created.
fn open_ro(s: &StoreArgs) -> Result<Store> {
    if !s.dir.is_dir() {
        return Err(Error::NotFound(format!("no store at {}", s.dir.display())));
    }
    let mut o = options(s)?;
    o.read_only = true;
    Store::open(&s.dir, o)
}

/// Lowercase hexadecimal of `b`.
fn to_hex(b: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(2 * b.len());
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// The bytes of a hexadecimal string (an even number of hex digits).
fn from_hex(s: &str) -> Result<Vec<u8>> {
    let bad = || {
        Error::invalid(format!(
            "{s:?} is not hexadecimal bytes (an even number of hex digits)"
        ))
    };
    if s.len() % 2 != 0 {
        return Err(bad());
    }
    s.as_bytes()
        .chunks(2)
        .map(|c| {
            std::str::from_utf8(c)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(bad)
        })
        .collect()
}

/// `b` as printable text: UTF-8 as is, with `\t`, `\n`, `\r`, `\\` and
/// `\xNN` for bytes that are not UTF-8.
fn escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\t' => s.push_str("\\t"),
                '\n' => s.push_str("\\n"),
                '\r' => s.push_str("\\r"),
                '\\' => s.push_str("\\\\"),
                c => s.push(c),
            }
        }
        for x in chunk.invalid() {
            s.push_str(&format!("\\x{x:02x}"));
        }
    }
    s
}

/// How keys and values are read and printed.
#[derive(Debug, Clone, Copy)]
struct Codec {
    hex: bool,
}

impl Codec {
    fn parse(self, s: &str) -> Result<Vec<u8>> {
        if self.hex {
            from_hex(s)
        } else {
            Ok(s.as_bytes().to_vec())
        }
    }

    fn show(self, b: &[u8]) -> String {
        if self.hex { to_hex(b) } else { escape(b) }
    }
}

/// The text of an error without the "invalid input: " of its variant (for
/// errors that are wrapped with a place).
fn message(e: Error) -> String {
    match e {
        Error::InvalidInput(m) => m,
        e => e.to_string(),
    }
}

/// One key and value of a load, checked against the store's limits.
type Entry = (Vec<u8>, Vec<u8>);

/// The entries of a `key<TAB>value` file, one per line, as a stream; an
/// error names the file and line.
fn tsv_entries(path: &Path, codec: Codec) -> Result<impl Iterator<Item = Result<Entry>>> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let path = path.to_path_buf();
    Ok(BufReader::new(f)
        .split(b'\n')
        .enumerate()
        .filter_map(move |(i, line)| {
            let at = |msg: String| Error::invalid(format!("{}:{}: {msg}", path.display(), i + 1));
            let line = match line {
                Ok(l) => l,
                Err(e) => return Some(Err(Error::io(&path, e))),
            };
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if line.is_empty() {
                return None;
            }
            let Some(tab) = line.iter().position(|&b| b == b'\t') else {
                return Some(Err(at("a line is KEY<TAB>VALUE; no tab found".into())));
            };
            let (k, v) = (
                line.get(..tab).unwrap_or_default(),
                line.get(tab + 1..).unwrap_or_default(),
            );
            let field = |b: &[u8]| -> Result<Vec<u8>> {
                if !codec.hex {
                    return Ok(b.to_vec());
                }
                std::str::from_utf8(b)
                    .map_err(|_| at("--hex input must be ASCII hex digits".into()))
                    .and_then(|t| from_hex(t).map_err(|e| at(message(e))))
            };
            Some(field(k).and_then(|k| {
                let v = field(v)?;
                strata::lsm::key::check_entry(&k, Some(&v)).map_err(|e| at(message(e)))?;
                Ok((k, v))
            }))
        }))
}

/// The entries of a SOSD key file: 8-byte big-endian keys, each with its
/// rank as an 8-byte big-endian value.
fn sosd_entries(
    path: &Path,
    dedup: bool,
    quiet: bool,
    what: &str,
) -> Result<impl Iterator<Item = Result<Entry>>> {
    let a = KeyFileArgs {
        data: path.to_path_buf(),
        dedup,
        u32: false,
    };
    Ok(crate::KeyStream::open(&a, quiet, what)?
        .map(|r| r.map(|(k, rank)| (k.to_be_bytes().to_vec(), rank.to_be_bytes().to_vec()))))
}

/// Bytes of keys and values per write batch of a load.
const LOAD_BATCH_BYTES: usize = 4 << 20;

/// Reads all of `entries` (so that a bad one is an error before anything
/// is written); whether their keys strictly increase.
fn check_pass(entries: impl Iterator<Item = Result<Entry>>) -> Result<bool> {
    let mut last: Option<Vec<u8>> = None;
    let mut sorted = true;
    for e in entries {
        let (k, _) = e?;
        sorted &= last.as_ref().is_none_or(|p| *p < k);
        last = Some(k);
    }
    Ok(sorted)
}

/// Loads `entries` into `store`: ingested straight into tables when they
/// are `sorted` and the store is empty, else put in write batches and
/// flushed; returns how many.
fn load_into(store: &Store, sorted: bool, entries: impl Iterator<Item = Result<Entry>>) -> Result<u64> {
    if sorted && store.is_empty() {
        return Ok(store.ingest(entries)?.entries);
    }
    let n = put_all(store, entries)?;
    store.flush()?;
    Ok(n)
}

/// Writes `entries` into `store` in write batches; returns how many.
fn put_all(store: &Store, entries: impl Iterator<Item = Result<Entry>>) -> Result<u64> {
    let (mut b, mut bytes, mut n) = (WriteBatch::new(), 0usize, 0u64);
    for e in entries {
        let (k, v) = e?;
        bytes += k.len() + v.len();
        b.put(&k, &v);
        n += 1;
        if bytes >= LOAD_BATCH_BYTES || b.len() >= 100_000 {
            store.write_batch(&b)?;
            b.clear();
            bytes = 0;
        }
    }
    if !b.is_empty() {
        store.write_batch(&b)?;
    }
    Ok(n)
}

/// The key of key number `id` of a stress run: 4 to 27 pseudo-random bytes,
/// the same for the same id (so that writes overwrite and delete earlier
/// ones).
fn stress_key(id: u64) -> Vec<u8> {
    let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(id ^ 0x005E_ED0F_1AB5);
    let len = r.random_range(4..28);
    (0..len).map(|_| r.random()).collect()
}

/// A random value: mostly 0 to 100 bytes, one in 64 up to 8 KiB.
fn stress_value(r: &mut impl Rng) -> Vec<u8> {
    let len = if r.random_range(0..64) == 0 {
        r.random_range(0..8192)
    } else {
        r.random_range(0..=100)
    };
    (0..len).map(|_| r.random()).collect()
}

/// Runs `strata lsm ...`.
pub fn run(a: LsmArgs, quiet: bool) -> Result<()> {
    match a.cmd {
        LsmCmd::Load {
            store,
            file,
            keys,
            dedup,
        } => {
            let codec = Codec { hex: store.hex };
            let opts = options(&store)?;
            // A first pass checks the whole input (format, order of a SOSD
            // file, the store's key and value limits), so a bad file
            // changes nothing; the second pass writes: straight into
            // tables when the store is empty and the keys strictly
            // increase (`Store::ingest`), else through write batches.
            let n = match (&file, &keys) {
                (_, Some(k)) => {
                    let sorted = check_pass(sosd_entries(k, dedup, quiet, "checking")?)?;
                    let s = Store::open(&store.dir, opts)?;
                    let n = load_into(&s, sorted, sosd_entries(k, dedup, quiet, "putting")?)?;
                    s.close()?;
                    n
                }
                (Some(f), None) => {
                    let sorted = check_pass(tsv_entries(f, codec)?)?;
                    let s = Store::open(&store.dir, opts)?;
                    let n = load_into(&s, sorted, tsv_entries(f, codec)?)?;
                    s.close()?;
                    n
                }
                (None, None) => return Err(Error::invalid("load needs FILE or --keys FILE")),
            };
            out(format_args!("loaded {n} records"))
        }
        LsmCmd::Put { store, key, value } => {
            let codec = Codec { hex: store.hex };
            let (k, v) = (codec.parse(&key)?, codec.parse(&value)?);
            let s = open_rw(&store)?;
            s.put(&k, &v)?;
            s.close()
        }
        LsmCmd::Get { store, key } => {
            let codec = Codec { hex: store.hex };
            let k = codec.parse(&key)?;
            let s = open_ro(&store)?;
            match s.get(&k)? {
                Some(v) => out(format_args!("{}\t{}", codec.show(&k), codec.show(&v))),
                None => out(format_args!("{}\tnot found", codec.show(&k))),
            }
        }
        LsmCmd::Delete { store, key } => {
            let k = Codec { hex: store.hex }.parse(&key)?;
            let s = open_rw(&store)?;
            s.delete(&k)?;
            s.close()
        }
        LsmCmd::Scan { store, from, limit } => {
            let codec = Codec { hex: store.hex };
            let from = from.map(|f| codec.parse(&f)).transpose()?;
            let s = open_ro(&store)?;
            let mut it = s.iter()?;
            match &from {
                Some(f) => it.seek(f)?,
                None => it.seek_to_first()?,
            }
            let mut n = 0usize;
            while it.valid() && limit.is_none_or(|l| n < l) {
                out(format_args!(
                    "{}\t{}",
                    codec.show(it.key()),
                    codec.show(it.value())
                ))?;
                n += 1;
                it.next()?;
            }
            Ok(())
        }
        LsmCmd::Stats { store } => {
            let s = open_ro(&store)?;
            let st = s.stats();
            out(format_args!(
                "{}",
                serde_json::to_string_pretty(&st).map_err(|e| Error::invalid(e.to_string()))?
            ))
        }
        LsmCmd::Compact { store } => {
            let s = open_rw(&store)?;
            s.flush()?;
            s.compact_range(None, None)?;
            let files: Vec<u64> = s.stats().levels.iter().map(|l| l.files).collect();
            s.close()?;
            out(format_args!("compacted; tables per level: {files:?}"))
        }
        LsmCmd::Verify { store } => {
            let s = open_ro(&store)?;
            let r = s.verify()?;
            out(format_args!(
                "{}",
                serde_json::to_string(&r).map_err(|e| Error::invalid(e.to_string()))?
            ))
        }
        LsmCmd::Stress {
            store,
            stress: StressArgs { ops, seed, keys },
        } => {
            if keys == 0 {
                return Err(Error::invalid("--keys must be positive"));
            }
            let s = open_rw(&store)?;
            let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            for _ in 0..ops {
                let key = stress_key(r.random_range(0..keys));
                let k = to_hex(&key);
                if r.random_range(0..4) == 0 {
                    out(format_args!("begin delete {k} -"))?;
                    s.delete(&key)?;
                    out(format_args!("ack delete {k} -"))?;
                } else {
                    let value = stress_value(&mut r);
                    // An empty value prints as `=` (a field that is never empty).
                    let v = if value.is_empty() {
                        "=".to_string()
                    } else {
                        to_hex(&value)
                    };
                    out(format_args!("begin put {k} {v}"))?;
                    s.put(&key, &value)?;
                    out(format_args!("ack put {k} {v}"))?;
                }
            }
            s.close()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_bad_digits() {
        let b = [0u8, 1, 0xab, 0xff];
        assert_eq!(to_hex(&b), "0001abff");
        assert_eq!(from_hex("0001ABff").unwrap(), b);
        assert!(from_hex("abc").is_err());
        assert!(from_hex("zz").is_err());
        assert_eq!(from_hex("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn escape_keeps_utf8_and_escapes_the_rest() {
        assert_eq!(escape("héllo".as_bytes()), "héllo");
        assert_eq!(escape(b"a\tb\nc\\"), "a\\tb\\nc\\\\");
        assert_eq!(escape(&[b'x', 0xff, b'y']), "x\\xffy");
    }

    #[test]
    fn stress_keys_are_stable_per_id() {
        assert_eq!(stress_key(7), stress_key(7));
        assert_ne!(stress_key(7), stress_key(8));
        assert!((4..28).contains(&stress_key(3).len()));
    }
}
