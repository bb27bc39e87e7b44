//! `strata db`: load, query, update and stress a durable store.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use rand::{Rng, SeedableRng};
use strata::db::{Db, Options, SyncPolicy, WriteBatch};
use strata::{Error, Result};

use crate::KeyFileArgs;

/// `strata db ...`.
#[derive(Args, Debug)]
pub struct DbArgs {
    #[command(subcommand)]
    cmd: DbCmd,
}

#[derive(Args, Debug, Clone)]
struct StoreArgs {
    /// Store directory (created by load, put, delete and stress if missing;
    /// get, scan and stats open an existing store read-only).
    dir: PathBuf,
    /// Memory budget of the store (dynamic stages + static index), e.g. 64M.
    #[arg(long, default_value = "64M")]
    memory: String,
    /// When writes are synced: always (or every: each write is on stable
    /// storage when it returns), never (at close), or a period in
    /// milliseconds (10 or 10ms: a background sync).
    #[arg(long, default_value = "always")]
    sync: String,
}

#[derive(Subcommand, Debug)]
enum DbCmd {
    /// Load a key file (value = each key's rank) into a new or existing store.
    ///
    /// The file is read as a stream in constant memory: a bulk load into a
    /// new store (a bad file leaves no store), batched puts into an existing
    /// one (after the whole file has been checked, so a bad file changes
    /// nothing).
    Load {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        keys: KeyFileArgs,
    },
    /// Print the value of a key.
    Get {
        #[command(flatten)]
        store: StoreArgs,
        /// Key.
        key: u64,
    },
    /// Insert or overwrite a key.
    Put {
        #[command(flatten)]
        store: StoreArgs,
        /// Key.
        key: u64,
        /// Value.
        value: u64,
    },
    /// Delete a key.
    Delete {
        #[command(flatten)]
        store: StoreArgs,
        /// Key.
        key: u64,
    },
    /// Print records from the lower bound of a key.
    Scan {
        #[command(flatten)]
        store: StoreArgs,
        /// First key.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Number of records.
        #[arg(long, default_value_t = 10)]
        count: usize,
    },
    /// Random puts and deletes, printing begin/ack lines (for kill -9 tests).
    ///
    /// Prints `begin OP KEY VALUE` before each write and `ack OP KEY VALUE`
    /// once it is acknowledged (flushed per line).
    Stress {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        stress: StressArgs,
    },
    /// Print the store's statistics as JSON.
    Stats {
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// The options of `db stress` and `lsm stress`.
#[derive(Args, Debug, Clone)]
pub(crate) struct StressArgs {
    /// Number of writes.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) ops: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Number of distinct keys the writes draw from.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) keys: u64,
}

/// The value of `--memory`: a size such as `64M`.
pub(crate) fn memory_arg(memory: &str) -> Result<u64> {
    strata::index::parse_size(memory)
        .ok_or_else(|| Error::invalid(format!("--memory must be a size such as 64M, got {memory:?}")))
}

/// The value of `--sync`: `always` (or `every`), `never` or a period in
/// milliseconds, as the kinds' `sync=` parameter reads it.
pub(crate) fn sync_arg(sync: &str) -> Result<SyncPolicy> {
    sync.parse()
}

fn options(s: &StoreArgs) -> Result<Options> {
    Ok(Options {
        memory_budget: memory_arg(&s.memory)?,
        sync: sync_arg(&s.sync)?,
        ..Options::default()
    })
}

/// [`options`] for get, scan and stats: read-only (a shared lock, so refused
/// while a writer runs), and a missing store is an error, never created.
fn read_only(s: &StoreArgs) -> Result<Options> {
    Ok(Options {
        read_only: true,
        create_if_missing: false,
        ..options(s)?
    })
}

/// Prints `line` and a newline to stdout, flushed (so a kill loses no
/// printed line).
pub(crate) fn out(line: std::fmt::Arguments<'_>) -> Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_fmt(line)
        .and_then(|_| o.write_all(b"\n"))
        .and_then(|_| o.flush())
        .map_err(|e| Error::io("stdout", e))
}

/// Runs `strata db ...`.
pub fn run(a: DbArgs, quiet: bool) -> Result<()> {
    match a.cmd {
        DbCmd::Load { store, keys } => {
            // The key file is read as a stream (constant memory, whatever
            // its size). A new store is bulk-loaded in one pass: a bad file
            // ends the load with no store written. An existing store is
            // written only after a first pass has checked the whole file,
            // so that a bad file changes nothing.
            let opts = options(&store)?;
            // The key file's header is checked before anything is created.
            let stream = crate::KeyStream::open(&keys, quiet, "loading")?;
            let (fs, created) = strata::storage::FsDirectory::create_all_tracked(&store.dir)?;
            if strata::db::DbManifest::load(&fs)?.is_none() {
                let n = match Db::try_bulk_load(&fs, &opts, stream) {
                    Ok(n) => n,
                    Err(e) => {
                        // The load removed its files; the directories it
                        // created go too (with the lock file the load left).
                        if !created.is_empty() {
                            let _ = std::fs::remove_file(store.dir.join(strata::storage::LOCK_FILE));
                            strata::storage::remove_created_dirs(&created);
                        }
                        return Err(e);
                    }
                };
                out(format_args!("loaded {n} records into a new store"))
            } else {
                drop(stream);
                for r in crate::KeyStream::open(&keys, quiet, "checking")? {
                    r?;
                }
                let db = Db::open_path(&store.dir, opts)?;
                let mut b = WriteBatch::new();
                let mut n = 0u64;
                for r in crate::KeyStream::open(&keys, quiet, "putting")? {
                    let (k, v) = r?;
                    b.put(k, v);
                    n += 1;
                    if b.len() == 10_000 {
                        db.write_batch(&b)?;
                        b.clear();
                    }
                }
                db.write_batch(&b)?;
                db.close()?;
                out(format_args!("put {n} records into the existing store"))
            }
        }
        DbCmd::Get { store, key } => {
            let db = Db::open_path(&store.dir, read_only(&store)?)?;
            match db.get(key)? {
                Some(v) => out(format_args!("{key}\t{v}")),
                None => out(format_args!("{key}\tnot found")),
            }
        }
        DbCmd::Put { store, key, value } => {
            let db = Db::open_path(&store.dir, options(&store)?)?;
            db.put(key, value)?;
            db.close()
        }
        DbCmd::Delete { store, key } => {
            let db = Db::open_path(&store.dir, options(&store)?)?;
            db.delete(key)?;
            db.close()
        }
        DbCmd::Scan { store, from, count } => {
            let db = Db::open_path(&store.dir, read_only(&store)?)?;
            for r in db.range(from..).take(count) {
                let (k, v) = r?;
                out(format_args!("{k}\t{v}"))?;
            }
            Ok(())
        }
        DbCmd::Stress {
            store,
            stress: StressArgs { ops, seed, keys },
        } => {
            if keys == 0 {
                return Err(Error::invalid("--keys must be positive"));
            }
            let db = Db::open_path(&store.dir, options(&store)?)?;
            let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            for _ in 0..ops {
                let key = r.random_range(0..keys);
                if r.random_range(0..4) == 0 {
                    out(format_args!("begin delete {key} 0"))?;
                    db.delete(key)?;
                    out(format_args!("ack delete {key} 0"))?;
                } else {
                    let value: u64 = r.random();
                    out(format_args!("begin put {key} {value}"))?;
                    db.put(key, value)?;
                    out(format_args!("ack put {key} {value}"))?;
                }
            }
            db.close()
        }
        DbCmd::Stats { store } => {
            let db = Db::open_path(&store.dir, read_only(&store)?)?;
            let s = db.stats()?;
            out(format_args!(
                "{}",
                serde_json::to_string_pretty(&s).map_err(|e| Error::invalid(e.to_string()))?
            ))
        }
    }
}
