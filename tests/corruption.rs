//! The corruption campaign: damage the files of index directories of several
//! kinds and of a `Db` store (a static generation plus a WAL), then open,
//! verify, get every key and scan, against the oracle (the key/value list).
//! A trial's outcome is a typed error or exactly the right answers; wrong
//! answers and panics (caught with `catch_unwind`) must both be zero.
//!
//! - single-byte flips at random offsets of random files and truncations at
//!   random lengths: [`flips_and_truncations`] (~300 trials; `STRATA_FULL=1`:
//!   2,400);
//! - file swaps (the same file name from another build of the same kind with
//!   the same `n` but other keys, or from another store):
//!   [`file_swaps`]: every file carries its build's id (issue 16).
//!
//! `docs/results/reliability.md` ("Flips, truncations and swaps") has the
//! figures.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

mod common;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use strata::db::{Db, Options as DbOptions};
use strata::index::{OpenOptions, Residency};
use strata::storage::{Directory, MemDirectory};

/// The index kinds of the campaign.
const KINDS: &[&str] = &[
    "btree",
    "pgm-disk-cpr:epsilon=16",
    "rs:epsilon=8,radix_bits=8",
    "rmi:models=16",
    "leco-zonemap-d",
    "binary",
    "air",
];

/// Records of each index.
const N: usize = 3000;

/// Files (name, bytes) of a directory, empty files (the `LOCK` file) left out.
type Files = Vec<(String, Vec<u8>)>;

/// The writes logged after a point, in order: key, value (`None`: a delete).
type Logged = Vec<(u64, Option<u64>)>;

/// What is damaged and how it should answer.
struct Fixture {
    what: String,
    files: Files,
    /// Key → value of every record.
    oracle: BTreeMap<u64, u64>,
    /// `None` for an index directory, the store's options for a store.
    db: Option<DbOptions>,
    /// For a store: its contents when the WAL was empty, and the writes
    /// logged after that (`None` a delete), in order.
    history: (BTreeMap<u64, u64>, Logged),
}

fn full() -> bool {
    std::env::var_os("STRATA_FULL").is_some_and(|v| v != "0")
}

fn random_keys(seed: u64, n: usize) -> Vec<u64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut k = rng.random_range(0..1000u64);
    (0..n)
        .map(|_| {
            k += rng.random_range(1..5000u64);
            k
        })
        .collect()
}

fn files_of(dir: &MemDirectory) -> Files {
    let mut names = dir.list().unwrap();
    names.sort();
    names
        .into_iter()
        .map(|n| (n.clone(), dir.file(&n).unwrap().contents()))
        .filter(|(_, b)| !b.is_empty())
        .collect()
}

fn index_fixture(spec: &str, seed: u64) -> Fixture {
    let keys = random_keys(seed, N);
    let dir = common::build_in_memory(spec, &keys);
    Fixture {
        what: spec.to_string(),
        files: files_of(&dir),
        oracle: keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect(),
        db: None,
        history: Default::default(),
    }
}

/// A store whose data sits in a static generation (bulk put, then a flush)
/// and in its WAL (later puts and deletes, not merged), closed cleanly.
fn db_fixture(seed: u64) -> Fixture {
    let opts = DbOptions {
        background_merge: false,
        ..DbOptions::default()
    };
    let dir = MemDirectory::new();
    let db = Db::open(Arc::new(dir.clone()), opts.clone()).unwrap();
    let mut oracle = BTreeMap::new();
    let keys = random_keys(seed, N);
    for (i, &k) in keys.iter().enumerate() {
        db.put(k, i as u64).unwrap();
        oracle.insert(k, i as u64);
    }
    db.flush().unwrap();
    let base = oracle.clone();
    let mut logged = Vec::new();
    let mut rng = Pcg64::seed_from_u64(seed ^ 0xD1B5);
    for i in 0..400u64 {
        let k = keys[rng.random_range(0..N)];
        if i % 5 == 0 {
            db.delete(k).unwrap();
            oracle.remove(&k);
            logged.push((k, None));
        } else {
            let k = if i % 3 == 0 { k + 1 } else { k };
            db.put(k, 1_000_000 + i).unwrap();
            oracle.insert(k, 1_000_000 + i);
            logged.push((k, Some(1_000_000 + i)));
        }
    }
    db.close().unwrap();
    Fixture {
        what: "db".to_string(),
        files: files_of(&dir),
        oracle,
        db: Some(DbOptions {
            create_if_missing: false,
            ..opts
        }),
        history: (base, logged),
    }
}

/// Result of one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Some step returned an error, and no step answered wrongly.
    Detected,
    /// Every step answered, correctly.
    Right,
    /// A store answered, correctly, as it stood after an earlier
    /// acknowledged write: the writes logged after it are lost (what a
    /// newest WAL segment cut at a frame boundary looks like).
    Stale,
    /// A step returned a wrong answer.
    Wrong,
    /// A step panicked.
    Panic,
}

/// Checks answers: `Err` marks the trial detected, a wrong `Ok` marks it wrong.
#[derive(Default)]
struct Check {
    stale: bool,
    errors: u64,
    wrong: u64,
    first_wrong: Option<String>,
}

impl Check {
    fn answer<T: PartialEq + std::fmt::Debug>(&mut self, got: strata::Result<T>, want: T, what: &str) {
        match got {
            Err(_) => self.errors += 1,
            Ok(g) if g == want => {}
            Ok(g) => {
                self.wrong += 1;
                if self.first_wrong.is_none() {
                    let mut m = format!("{what}: got {g:?}, want {want:?}");
                    if m.len() > 240 {
                        // Debug output of numbers: ASCII, so any byte is a boundary.
                        m.truncate(240);
                        m.push_str("...");
                    }
                    self.first_wrong = Some(m);
                }
            }
        }
    }

    fn outcome(&self) -> Outcome {
        if self.wrong > 0 {
            Outcome::Wrong
        } else if self.errors > 0 {
            Outcome::Detected
        } else if self.stale {
            Outcome::Stale
        } else {
            Outcome::Right
        }
    }
}

/// A key absent from `oracle` near `k` (for negative lookups).
fn absent_near(oracle: &BTreeMap<u64, u64>, k: u64) -> Option<u64> {
    (1..4)
        .map(|d| k.wrapping_add(d))
        .find(|a| !oracle.contains_key(a))
}

/// Opens the index in `dir`, verifies it, gets every key (and an absent
/// neighbour) and scans a stretch.
fn check_index(dir: &MemDirectory, oracle: &BTreeMap<u64, u64>, resident: Residency, c: &mut Check) {
    let opts = OpenOptions {
        resident,
        ..Default::default()
    };
    let idx = match strata::registry::open_in(Arc::new(dir.clone()), &opts) {
        Ok(i) => i,
        Err(_) => {
            c.errors += 1;
            return;
        }
    };
    if idx.verify(&mut |_| {}).is_err() {
        c.errors += 1;
    }
    for (&k, &v) in oracle {
        c.answer(idx.get(k), Some(v), &format!("get {k}"));
        if let Some(a) = absent_near(oracle, k) {
            c.answer(idx.get(a), None, &format!("get absent {a}"));
        }
    }
    let records: Vec<(u64, u64)> = oracle.iter().map(|(&k, &v)| (k, v)).collect();
    let from = records.len() / 3;
    let want: Vec<(u64, u64)> = records.iter().skip(from).take(700).copied().collect();
    let mut out = Vec::new();
    let got = idx.scan(records[from].0, 700, &mut out).map(|()| out);
    c.answer(got, want, "scan");
}

/// The state after a prefix of `logged` applied to `base` that equals
/// `got`, if any.
fn prefix_state(
    base: &BTreeMap<u64, u64>,
    logged: &[(u64, Option<u64>)],
    got: &BTreeMap<u64, u64>,
) -> Option<BTreeMap<u64, u64>> {
    let mut state = base.clone();
    if state == *got {
        return Some(state);
    }
    for &(k, v) in logged {
        match v {
            Some(v) => state.insert(k, v),
            None => state.remove(&k),
        };
        if state == *got {
            return Some(state);
        }
    }
    None
}

/// Opens the store in `dir`, verifies it, scans it whole, and gets every
/// key (and an absent neighbour). A store whose scan shows an earlier state
/// of its history (a lost log tail) is checked against that state and
/// marked stale.
fn check_db(dir: &MemDirectory, f: &Fixture, opts: &DbOptions, c: &mut Check) {
    let db = match Db::open(Arc::new(dir.clone()), opts.clone()) {
        Ok(d) => d,
        Err(_) => {
            c.errors += 1;
            return;
        }
    };
    if db.verify(&mut |_| {}).is_err() {
        c.errors += 1;
    }
    let scanned: strata::Result<BTreeMap<u64, u64>> = db.range(..).collect();
    let mut expect = &f.oracle;
    let earlier;
    if let Ok(got) = &scanned {
        if *got != f.oracle {
            if let Some(state) = prefix_state(&f.history.0, &f.history.1, got) {
                earlier = state;
                expect = &earlier;
                c.stale = true;
            }
        }
    }
    c.answer(scanned, expect.clone(), "scan");
    for &k in f.oracle.keys().chain(expect.keys()) {
        c.answer(db.get(k), expect.get(&k).copied(), &format!("get {k}"));
        if let Some(a) = absent_near(&f.oracle, k).filter(|a| !expect.contains_key(a)) {
            c.answer(db.get(a), None, &format!("get absent {a}"));
        }
    }
    db.kill();
}

/// Runs the checks of `f` over its files with `name` replaced by `bytes`.
fn trial(f: &Fixture, name: &str, bytes: &[u8], rng: &mut Pcg64) -> (Outcome, Option<String>) {
    let dir = MemDirectory::new();
    for (n, b) in &f.files {
        let file = dir.create(n).unwrap();
        let b = if n == name { bytes } else { b.as_slice() };
        if !b.is_empty() {
            file.write_at(0, b).unwrap();
        }
    }
    let resident = if rng.random_bool(0.5) {
        Residency::Index
    } else {
        Residency::None
    };
    let mut c = Check::default();
    let run = catch_unwind(AssertUnwindSafe(|| match &f.db {
        None => check_index(&dir, &f.oracle, resident, &mut c),
        Some(opts) => check_db(&dir, f, opts, &mut c),
    }));
    match run {
        Err(_) => (Outcome::Panic, Some("panicked".to_string())),
        Ok(()) => (c.outcome(), c.first_wrong),
    }
}

/// Counts of outcomes, per operation.
#[derive(Default, Debug)]
struct Tally {
    trials: u64,
    detected: u64,
    right: u64,
    /// Stale answers where they are the expected outcome (see [`Outcome::Stale`]).
    stale: u64,
    wrong: u64,
    panics: u64,
    failures: Vec<String>,
}

impl Tally {
    /// Counts `outcome`; `stale_ok` says whether a stale answer is expected
    /// (a truncated newest WAL segment) or wrong.
    fn add(&mut self, outcome: Outcome, stale_ok: bool, what: String) {
        self.trials += 1;
        let outcome = match outcome {
            Outcome::Stale if !stale_ok => Outcome::Wrong,
            o => o,
        };
        match outcome {
            Outcome::Stale => self.stale += 1,
            Outcome::Detected => self.detected += 1,
            Outcome::Right => self.right += 1,
            Outcome::Wrong => self.wrong += 1,
            Outcome::Panic => self.panics += 1,
        }
        if matches!(outcome, Outcome::Wrong | Outcome::Panic) && self.failures.len() < 20 {
            self.failures.push(what);
        }
    }

    fn line(&self, what: &str) -> String {
        format!(
            "{what}: {} trials, {} detected (typed error), {} harmless (right answers), \
             {} lost log tail (right answers as of an earlier write), {} wrong answers, {} panics",
            self.trials, self.detected, self.right, self.stale, self.wrong, self.panics
        )
    }
}

/// Whether `name` is the newest WAL segment of store `f`: cutting it at a
/// frame boundary is indistinguishable from a crash before those frames were
/// written (no other file records its length), so an earlier state is the
/// expected answer; anywhere else it is a wrong answer.
fn newest_wal(f: &Fixture, name: &str) -> bool {
    let newest = f.files.iter().filter_map(|(n, _)| strata::db::wal_id(n)).max();
    newest.is_some() && strata::db::wal_id(name) == newest
}

fn fixtures(seed: u64) -> Vec<Fixture> {
    let mut out: Vec<Fixture> = KINDS.iter().map(|k| index_fixture(k, seed)).collect();
    out.push(db_fixture(seed));
    out
}

/// Single-byte flips at random offsets and truncations at random lengths of
/// random files: every trial ends in a typed error or the right answers.
#[test]
fn flips_and_truncations() {
    let trials = if full() { 2400 } else { 304 };
    let fx = fixtures(7);
    let mut rng = Pcg64::seed_from_u64(0x5EED_C0DE);
    let mut flips = Tally::default();
    let mut cuts = Tally::default();
    for t in 0..trials {
        let f = &fx[t % fx.len()];
        let (name, original) = &f.files[rng.random_range(0..f.files.len())];
        let mut bytes = original.clone();
        let (tally, what) = if rng.random_bool(0.7) {
            let at = rng.random_range(0..bytes.len());
            let mask = rng.random_range(1..=255u8);
            bytes[at] ^= mask;
            (&mut flips, format!("{}: {name} byte {at} ^= {mask:#04x}", f.what))
        } else {
            let len = rng.random_range(0..bytes.len());
            bytes.truncate(len);
            (
                &mut cuts,
                format!("{}: {name} cut to {len} of {} bytes", f.what, original.len()),
            )
        };
        let cut = bytes.len() < original.len();
        let (outcome, detail) = trial(f, name, &bytes, &mut rng);
        tally.add(
            outcome,
            cut && newest_wal(f, name),
            format!("{what}: {}", detail.unwrap_or_default()),
        );
    }
    println!("{}", flips.line("corruption: single-byte flips"));
    println!("{}", cuts.line("corruption: truncations"));
    for t in [&flips, &cuts] {
        assert!(
            t.wrong == 0 && t.panics == 0,
            "wrong answers or panics:\n{}",
            t.failures.join("\n")
        );
    }
}

/// Every file of a build replaced by the file of the same name from another
/// build of the same kind and size (other keys), and every file of a store by
/// the one from another store: a typed error, never a wrong answer. Needs
/// build ids in every file (issue 16, "Build identity").
#[test]
fn file_swaps() {
    let ours = fixtures(7);
    let theirs = fixtures(8);
    let mut rng = Pcg64::seed_from_u64(0x5A4B);
    let mut swaps = Tally::default();
    let rounds = if full() { 8 } else { 1 };
    for _ in 0..rounds {
        for (a, b) in ours.iter().zip(&theirs) {
            for (name, bytes) in &b.files {
                if !a.files.iter().any(|(n, _)| n == name) {
                    continue;
                }
                let (outcome, detail) = trial(a, name, bytes, &mut rng);
                swaps.add(
                    outcome,
                    false,
                    format!(
                        "{}: {name} from another build: {}",
                        a.what,
                        detail.unwrap_or_default()
                    ),
                );
            }
        }
    }
    println!("{}", swaps.line("corruption: file swaps"));
    for f in &swaps.failures {
        println!("  {f}");
    }
    assert!(
        swaps.wrong == 0 && swaps.panics == 0,
        "wrong answers or panics:\n{}",
        swaps.failures.join("\n")
    );
}
