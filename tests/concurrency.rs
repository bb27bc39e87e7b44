//! Readers against writers and merges, checked against a model (issue 16):
//! every read returns a value that was current at some instant between the
//! read's start and its end.
//!
//! A global logical clock (one atomic counter) stamps each call before it
//! starts and after it returns. Writer threads own disjoint key sets (so
//! each key's writes are totally ordered) and write unique values; per key
//! the history is a list of versions `(value, start, end)`. A read of key
//! `k` over `[rs, re]` that returned `v` is correct if some version `i` of
//! `k` has value `v`, started before the read ended (`start_i < re`), and
//! was not overwritten by a write acknowledged before the read started
//! (`end_{i+1} > rs`, or `i` is the last version). A scan is checked key by
//! key over its whole range (keys it did not return must have been absent
//! at some such instant). The initial version of every key is "absent".

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::{Rng, SeedableRng};
use strata::db::{Db, MergeTrigger, Options, StaticKind, SyncPolicy, WriteBatch};
use strata::storage::{Directory, MemDirectory};

fn full() -> bool {
    std::env::var("STRATA_FULL").is_ok_and(|v| v == "1")
}

const WRITERS: u64 = 2;
const READERS: u64 = 2;
const KEYS: u64 = 3_000;

/// One version of a key: its value (`None`: deleted) and the clock before
/// the write started and after it was acknowledged.
#[derive(Debug, Clone, Copy)]
struct Version {
    value: Option<u64>,
    start: u64,
    end: u64,
}

/// The writes of one writer thread, in order: `(key, version)`.
type WriteLog = Vec<(u64, Version)>;

/// One read: `(key, value)` pairs it observed for every key of `keys`.
#[derive(Debug)]
struct Read {
    keys: std::ops::Range<u64>,
    got: BTreeMap<u64, u64>,
    start: u64,
    end: u64,
}

fn tick(clock: &AtomicU64) -> u64 {
    clock.fetch_add(1, Ordering::SeqCst)
}

/// Whether `got` for `key` was current at some instant of `[rs, re]`.
fn linearizable(history: &[Version], got: Option<u64>, rs: u64, re: u64) -> bool {
    history
        .iter()
        .enumerate()
        .any(|(i, v)| v.value == got && v.start < re && history.get(i + 1).is_none_or(|next| next.end > rs))
}

#[test]
fn reads_are_current_at_some_instant_while_writers_write_and_merges_run() {
    let per_writer: u64 = if full() { 40_000 } else { 12_000 };
    let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
    let o = Options {
        sync: SyncPolicy::Never,
        memory_budget: 64 << 10,
        trigger: MergeTrigger::Constant(8 << 10),
        static_kind: StaticKind::Auto { epsilon: 16 },
        ..Options::default()
    };
    // A bulk-loaded static stage: the initial version of the even keys.
    let initial: Vec<(u64, u64)> = (0..KEYS).step_by(2).map(|k| (k, u64::MAX - k)).collect();
    Db::bulk_load(dir.as_ref(), &o, initial.iter().copied()).unwrap();
    let db = Db::open(dir, o).unwrap();
    let clock = AtomicU64::new(1);
    let writers_done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let (writes, reads): (Vec<WriteLog>, Vec<Vec<Read>>) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let (db, clock, done) = (&db, &clock, &writers_done);
                s.spawn(move || {
                    let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(t);
                    let mut log = Vec::new();
                    let own = |r: &mut rand_pcg::Pcg64Mcg| t + WRITERS * r.random_range(0..KEYS / WRITERS);
                    for i in 1..=per_writer {
                        // Unique values: the writer in the top bits, a counter below.
                        let value = |j: u64| (t << 48) | (i << 8) | j;
                        let ops: Vec<(u64, Option<u64>)> = match r.random_range(0..10) {
                            0 => vec![(own(&mut r), None)],
                            1 => {
                                // A batch of distinct keys of this writer.
                                let mut ks: Vec<u64> =
                                    (0..r.random_range(2..6)).map(|_| own(&mut r)).collect();
                                ks.sort_unstable();
                                ks.dedup();
                                ks.into_iter()
                                    .zip(0..)
                                    .map(|(k, j)| (k, Some(value(j))))
                                    .collect()
                            }
                            _ => vec![(own(&mut r), Some(value(0)))],
                        };
                        let start = tick(clock);
                        match ops.as_slice() {
                            [(k, Some(v))] => db.put(*k, *v).unwrap(),
                            [(k, None)] => db.delete(*k).unwrap(),
                            _ => {
                                let mut b = WriteBatch::new();
                                for &(k, v) in &ops {
                                    if let Some(v) = v {
                                        b.put(k, v);
                                    }
                                }
                                db.write_batch(&b).unwrap();
                            }
                        }
                        let end = tick(clock);
                        log.extend(
                            ops.into_iter()
                                .map(|(k, value)| (k, Version { value, start, end })),
                        );
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    log
                })
            })
            .collect();
        let readers: Vec<_> = (0..READERS)
            .map(|t| {
                let (db, clock, stop) = (&db, &clock, &stop);
                s.spawn(move || {
                    let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(100 + t);
                    let mut log = Vec::new();
                    while !stop.load(Ordering::SeqCst) {
                        let k = r.random_range(0..KEYS);
                        if r.random_range(0..20) == 0 {
                            let hi = (k + r.random_range(1..400)).min(KEYS);
                            let start = tick(clock);
                            let got = db.range(k..hi).map(|x| x.unwrap()).collect();
                            let end = tick(clock);
                            log.push(Read {
                                keys: k..hi,
                                got,
                                start,
                                end,
                            });
                        } else {
                            let start = tick(clock);
                            let got = db.get(k).unwrap();
                            let end = tick(clock);
                            let got = got.map(|v| (k, v)).into_iter().collect();
                            log.push(Read {
                                keys: k..k + 1,
                                got,
                                start,
                                end,
                            });
                        }
                    }
                    log
                })
            })
            .collect();
        let writes = writers.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::SeqCst);
        let reads = readers.into_iter().map(|h| h.join().unwrap()).collect();
        (writes, reads)
    });
    assert_eq!(writers_done.load(Ordering::SeqCst), WRITERS);
    // Per key: the initial version, then its writes in order (one writer each).
    let mut history: BTreeMap<u64, Vec<Version>> = (0..KEYS)
        .map(|k| {
            let v = (k % 2 == 0).then_some(u64::MAX - k);
            (
                k,
                vec![Version {
                    value: v,
                    start: 0,
                    end: 0,
                }],
            )
        })
        .collect();
    for log in &writes {
        for &(k, v) in log {
            history.entry(k).or_default().push(v);
        }
    }
    let (mut gets, mut scans, mut checked) = (0u64, 0u64, 0u64);
    for log in &reads {
        for read in log {
            if read.keys.end - read.keys.start == 1 {
                gets += 1;
            } else {
                scans += 1;
            }
            for k in read.keys.clone() {
                let got = read.got.get(&k).copied();
                let h = &history[&k];
                assert!(
                    linearizable(h, got, read.start, read.end),
                    "key {k}: read over [{}, {}] returned {got:?}, current at no instant of it; versions: {:?}",
                    read.start,
                    read.end,
                    h.iter()
                        .filter(|v| v.end + 1_000 >= read.start && v.start <= read.end + 1_000)
                        .collect::<Vec<_>>()
                );
                checked += 1;
            }
        }
    }
    // Every key ends at its last version.
    for (k, h) in &history {
        assert_eq!(
            db.get(*k).unwrap(),
            h.last().and_then(|v| v.value),
            "key {k} at the end"
        );
    }
    let st = db.stats().unwrap();
    assert!(st.merges >= 1, "merges ran during the test: {st:?}");
    eprintln!(
        "concurrency: {} writes by {WRITERS} writers, {gets} gets and {scans} scans by {READERS} readers, \
         {checked} key reads checked against the version history, {} merges, 0 violations",
        WRITERS * per_writer,
        st.merges
    );
    db.close().unwrap();
}

#[test]
fn the_checker_rejects_stale_and_future_reads() {
    let h = [
        Version {
            value: None,
            start: 0,
            end: 0,
        },
        Version {
            value: Some(1),
            start: 10,
            end: 20,
        },
        Version {
            value: Some(2),
            start: 30,
            end: 40,
        },
    ];
    // A read entirely after version 2 was acknowledged sees only 2.
    assert!(linearizable(&h, Some(2), 50, 60));
    assert!(!linearizable(&h, Some(1), 50, 60), "stale");
    assert!(!linearizable(&h, None, 50, 60), "stale");
    // A read overlapping the write of 2 sees 1 or 2.
    assert!(linearizable(&h, Some(1), 35, 38) && linearizable(&h, Some(2), 35, 38));
    // A read that ended before the write of 2 started cannot see it.
    assert!(!linearizable(&h, Some(2), 21, 29), "from the future");
    assert!(!linearizable(&h, Some(7), 0, 100), "never written");
}
