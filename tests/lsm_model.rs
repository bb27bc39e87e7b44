//! The LSM store against a `BTreeMap<Vec<u8>, Vec<u8>>` model over a
//! `MemDirectory`, with small memtables and tables so flushes and
//! compactions happen all the time. Steps: Put, Delete, Batch, Get,
//! Scan (seek + n), Snapshot (and reads at it later), Flush, Compact,
//! Reboot (close + reopen), Crash (`crash` or `crash_torn`: unsynced bytes
//! lost) and PowerCut (`cut_power_after(K)`, writes until one fails, crash,
//! reopen). With `SyncPolicy::Always` no acknowledged write may be lost; the
//! one write that failed at the cut may or may not survive, whole.
//! After every compaction step `verify` checks the level invariants.
//!
//! The default suite runs 12k steps; `STRATA_FULL=1` runs 100k more.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use strata::log::SyncPolicy;
use strata::lsm::{Granularity, Options, Snapshot, Store, WriteBatch};
use strata::storage::MemDirectory;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// Writes of one batch: a value, or `None` for a delete.
type Ops = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn full() -> bool {
    std::env::var("STRATA_FULL").is_ok_and(|v| v == "1")
}

#[derive(Debug, Clone)]
enum Step {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Ops),
    Get(Vec<u8>),
    Scan(Vec<u8>, usize),
    Snapshot,
    SnapshotRead(usize, Vec<u8>),
    DropSnapshot(usize),
    Flush,
    Compact(Option<Vec<u8>>, Option<Vec<u8>>),
    Reboot,
    Crash(Option<u64>),
    PowerCut(u64),
}

fn opts(ratio: u64) -> Options {
    let mut o = Options::with_memory(256 << 10);
    o.write_buffer_bytes = 3 << 10;
    o.target_file_bytes = 2 << 10;
    o.l1_bytes = 6 << 10;
    o.level_ratio = ratio;
    o.l0_compaction_trigger = 2;
    o.l0_slowdown = 3;
    o.l0_stop = 4;
    o.background = false;
    o.sync = SyncPolicy::Always;
    o.table.index.boundary = 4;
    o
}

/// Keys with shared prefixes and different lengths (the empty key too).
fn key(r: &mut impl Rng, space: u32) -> Vec<u8> {
    let i = r.random_range(0..space);
    match i % 5 {
        0 => format!("user/{i:05}").into_bytes(),
        1 => format!("user/{i:05}/profile/settings").into_bytes(),
        2 => i.to_be_bytes().to_vec(),
        3 if i == 3 => Vec::new(),
        _ => format!("k{i}").into_bytes(),
    }
}

fn value(r: &mut impl Rng, step: usize) -> Vec<u8> {
    let len = match r.random_range(0..100) {
        0..=9 => 0,
        10..=97 => r.random_range(1..40),
        _ => r.random_range(500..3000),
    };
    let mut v = format!("{step}:").into_bytes();
    v.resize(len.max(v.len()), b'v');
    v
}

fn gen_steps(seed: u64, n: usize, space: u32) -> Vec<Step> {
    let mut r = Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|i| match r.random_range(0..1000) {
            0..=399 => Step::Put(key(&mut r, space), value(&mut r, i)),
            400..=519 => Step::Delete(key(&mut r, space)),
            520..=599 => Step::Batch(
                (0..r.random_range(1..8))
                    .map(|_| {
                        let k = key(&mut r, space);
                        let v = r.random_bool(0.7).then(|| value(&mut r, i));
                        (k, v)
                    })
                    .collect(),
            ),
            600..=759 => Step::Get(key(&mut r, space)),
            760..=829 => Step::Scan(key(&mut r, space), r.random_range(0..20)),
            830..=849 => Step::Snapshot,
            850..=899 => Step::SnapshotRead(r.random_range(0..8), key(&mut r, space)),
            900..=914 => Step::DropSnapshot(r.random_range(0..8)),
            915..=934 => Step::Flush,
            935..=949 => {
                let a = r.random_bool(0.5).then(|| key(&mut r, space));
                let b = r.random_bool(0.5).then(|| key(&mut r, space));
                Step::Compact(a, b)
            }
            950..=969 => Step::Reboot,
            970..=989 => Step::Crash(r.random_bool(0.5).then(|| r.random())),
            _ => Step::PowerCut(r.random_range(0..40)),
        })
        .collect()
}

fn apply(model: &mut Model, ops: &[(Vec<u8>, Option<Vec<u8>>)]) {
    for (k, v) in ops {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

fn write(s: &Store, ops: &[(Vec<u8>, Option<Vec<u8>>)]) -> strata::Result<()> {
    if let [(k, v)] = ops {
        return match v {
            Some(v) => s.put(k, v),
            None => s.delete(k),
        };
    }
    let mut b = WriteBatch::new();
    for (k, v) in ops {
        match v {
            Some(v) => b.put(k, v),
            None => b.delete(k),
        };
    }
    s.write_batch(&b)
}

fn scan_all(s: &Store) -> Model {
    let mut it = s.iter().unwrap();
    it.seek_to_first().unwrap();
    let mut out = Model::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next().unwrap();
    }
    out
}

fn check_all(s: &Store, model: &Model, what: &str) {
    let got = scan_all(s);
    assert_eq!(got.len(), model.len(), "{what}: key count");
    assert!(got == *model, "{what}: contents differ");
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(s.get(k).unwrap().as_ref(), Some(v), "{what}: get {k:?}");
    }
}

#[derive(Debug, Default)]
struct Figures {
    steps: usize,
    reboots: usize,
    crashes: usize,
    power_cuts: usize,
    uncertain_kept: usize,
    snapshot_reads: usize,
    flushes: u64,
    compactions: u64,
}

fn run(steps: &[Step], o: &Options) -> Figures {
    let dir = Arc::new(MemDirectory::new());
    let open = || Store::open_in(dir.clone(), o.clone()).unwrap();
    let mut s = Some(open());
    let mut model = Model::new();
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    let mut f = Figures::default();
    let mut step_counter = 0usize;
    let add = |f: &mut Figures, st: &Store| {
        let x = st.stats();
        f.flushes += x.flushes;
        f.compactions += x.compactions;
    };
    for (i, step) in steps.iter().enumerate() {
        let st = s.as_ref().unwrap();
        let what = format!("step {i} ({step:?})");
        match step {
            Step::Put(k, v) => {
                st.put(k, v).unwrap();
                model.insert(k.clone(), v.clone());
            }
            Step::Delete(k) => {
                st.delete(k).unwrap();
                model.remove(k);
            }
            Step::Batch(ops) => {
                write(st, ops).unwrap();
                apply(&mut model, ops);
            }
            Step::Get(k) => assert_eq!(st.get(k).unwrap(), model.get(k).cloned(), "{what}"),
            Step::Scan(k, n) => {
                let mut it = st.iter().unwrap();
                it.seek(k).unwrap();
                let mut got = Vec::new();
                while it.valid() && got.len() < *n {
                    got.push((it.key().to_vec(), it.value().to_vec()));
                    it.next().unwrap();
                }
                let want: Vec<_> = model
                    .range(k.clone()..)
                    .take(*n)
                    .map(|(a, b)| (a.clone(), b.clone()))
                    .collect();
                assert_eq!(got, want, "{what}");
            }
            Step::Snapshot => {
                if snaps.len() >= 8 {
                    snaps.remove(0);
                }
                snaps.push((st.snapshot(), model.clone()));
            }
            Step::SnapshotRead(j, k) => {
                if let Some((snap, m)) = snaps.get(*j % snaps.len().max(1)) {
                    f.snapshot_reads += 1;
                    assert_eq!(snap.get(k).unwrap(), m.get(k).cloned(), "{what}: snapshot get");
                    let mut it = snap.iter().unwrap();
                    it.seek(k).unwrap();
                    let mut got = Vec::new();
                    while it.valid() && got.len() < 10 {
                        got.push((it.key().to_vec(), it.value().to_vec()));
                        it.next().unwrap();
                    }
                    let want: Vec<_> = m
                        .range(k.clone()..)
                        .take(10)
                        .map(|(a, b)| (a.clone(), b.clone()))
                        .collect();
                    assert_eq!(got, want, "{what}: snapshot scan");
                }
            }
            Step::DropSnapshot(j) => {
                if !snaps.is_empty() {
                    let n = snaps.len();
                    snaps.remove(*j % n);
                }
            }
            Step::Flush => st.flush().unwrap(),
            Step::Compact(a, b) => {
                let (a, b) = match (a, b) {
                    (Some(a), Some(b)) if a > b => (Some(b), Some(a)),
                    other => (other.0.as_ref(), other.1.as_ref()),
                };
                st.compact_range(a.map(Vec::as_slice), b.map(Vec::as_slice))
                    .unwrap();
                st.verify().unwrap();
                if o.granularity == Granularity::Level {
                    let levels = st.stats().levels;
                    assert!(levels.iter().skip(1).all(|l| l.files <= 1), "{levels:?}");
                }
            }
            Step::Reboot => {
                f.reboots += 1;
                add(&mut f, st);
                snaps.clear();
                s.take().unwrap().close().unwrap();
                s = Some(open());
                check_all(s.as_ref().unwrap(), &model, &what);
            }
            Step::Crash(tear) => {
                f.crashes += 1;
                add(&mut f, st);
                snaps.clear();
                s.take().unwrap().kill();
                match tear {
                    Some(seed) => dir.crash_torn(*seed),
                    None => dir.crash(),
                }
                s = Some(open());
                check_all(s.as_ref().unwrap(), &model, &what);
            }
            Step::PowerCut(k) => {
                f.power_cuts += 1;
                snaps.clear();
                dir.cut_power_after(*k);
                let mut failed: Option<Ops> = None;
                let mut r = Pcg64::seed_from_u64(i as u64);
                for _ in 0..200 {
                    step_counter += 1;
                    let ops: Vec<_> = (0..r.random_range(1..4))
                        .map(|_| (key(&mut r, 300), Some(value(&mut r, step_counter))))
                        .collect();
                    match write(st, &ops) {
                        Ok(()) => apply(&mut model, &ops),
                        Err(_) => {
                            failed = Some(ops);
                            break;
                        }
                    }
                }
                add(&mut f, st);
                s.take().unwrap().kill();
                dir.crash();
                s = Some(open());
                let got = scan_all(s.as_ref().unwrap());
                if got != model {
                    let mut with = model.clone();
                    apply(&mut with, failed.as_deref().unwrap_or_default());
                    assert!(
                        got == with,
                        "{what}: after the power cut neither the model nor the model with the failed write"
                    );
                    model = with;
                    f.uncertain_kept += 1;
                }
                check_all(s.as_ref().unwrap(), &model, &what);
            }
        }
    }
    let st = s.take().unwrap();
    check_all(&st, &model, "end");
    st.verify().unwrap();
    add(&mut f, &st);
    f.steps = steps.len();
    st.close().unwrap();
    f
}

#[test]
fn model_with_reboots_crashes_and_power_cuts() {
    let (seeds, n) = if full() { (12, 10_000) } else { (4, 3_000) };
    let mut total = 0;
    for seed in 0..seeds {
        let mut o = opts(2 + seed % 3);
        if seed % 4 == 3 {
            // One table (one index) per level below L0 (Liu §5.5).
            o.granularity = Granularity::Level;
        }
        let f = run(&gen_steps(seed, n, 300), &o);
        println!("seed {seed}: {f:?}");
        assert!(f.reboots > 0 && f.crashes > 0 && f.power_cuts > 0, "{f:?}");
        assert!(f.flushes > 50 && f.compactions > 20, "{f:?}");
        total += f.steps;
    }
    assert!(total >= 12_000);
}

/// The same steps with flushes and compactions on the background thread
/// (crashes then also cut a flush or compaction under way short).
#[test]
fn model_with_a_background_thread() {
    let mut o = opts(3);
    o.background = true;
    let f = run(&gen_steps(7, if full() { 10_000 } else { 2_000 }, 300), &o);
    println!("background: {f:?}");
}

/// Tables that keep no index, handles or filter resident (`pin=false`):
/// they load them through a block cache small enough that sections and
/// blocks evict each other between lookups.
#[test]
fn model_with_unpinned_tables() {
    let mut o = opts(3);
    o.pin_tables = false;
    o.block_cache_bytes = 16 << 10;
    let f = run(&gen_steps(11, if full() { 10_000 } else { 2_000 }, 300), &o);
    println!("unpinned: {f:?}");
    assert!(f.reboots > 0 && f.flushes > 20 && f.compactions > 5, "{f:?}");
}

#[test]
fn model_with_few_keys_many_versions() {
    let f = run(&gen_steps(99, 2_000, 12), &opts(3));
    println!("{f:?}");
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let k = (0u32..40).prop_map(|i| format!("key{i}").into_bytes());
    let v = proptest::collection::vec(any::<u8>(), 0..64);
    prop_oneof![
        6 => (k.clone(), v.clone()).prop_map(|(k, v)| Step::Put(k, v)),
        3 => k.clone().prop_map(Step::Delete),
        2 => proptest::collection::vec((k.clone(), proptest::option::of(v)), 1..5).prop_map(Step::Batch),
        3 => k.clone().prop_map(Step::Get),
        2 => (k.clone(), 0usize..10).prop_map(|(k, n)| Step::Scan(k, n)),
        1 => Just(Step::Snapshot),
        2 => ((0usize..8), k.clone()).prop_map(|(j, k)| Step::SnapshotRead(j, k)),
        1 => Just(Step::Flush),
        1 => Just(Step::Compact(None, None)),
        1 => Just(Step::Reboot),
        1 => proptest::option::of(any::<u64>()).prop_map(Step::Crash),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if full() { 256 } else { 24 }, ..ProptestConfig::default() })]
    #[test]
    fn model_proptest(steps in proptest::collection::vec(step_strategy(), 1..120)) {
        run(&steps, &opts(2));
    }
}

/// A fixed workload of writes (and a flush and a compaction now and then)
/// for the power-cut sweep. Applies every acknowledged step to `model` and
/// stops at the first error: `Some(writes of the step in flight)` (empty
/// for a flush or compaction), `None` if every step succeeded.
fn cut_workload(s: &Store, model: &mut Model) -> Option<Ops> {
    let mut r = Pcg64::seed_from_u64(5);
    for i in 0..400usize {
        let (ops, result) = match i % 97 {
            50 => (Vec::new(), s.flush()),
            96 => (Vec::new(), s.compact_range(None, None)),
            _ => {
                let ops: Ops = (0..r.random_range(1..4))
                    .map(|_| {
                        let k = key(&mut r, 120);
                        let v = r.random_bool(0.8).then(|| value(&mut r, i));
                        (k, v)
                    })
                    .collect();
                let result = write(s, &ops);
                (ops, result)
            }
        };
        match result {
            Ok(()) => apply(model, &ops),
            Err(_) => return Some(ops),
        }
    }
    None
}

/// Power cut after the K-th mutating call, for K spread evenly over a dry
/// run of the workload (log appends and syncs, rotations, flushes,
/// compactions, manifest publishes, removals), then a crash (torn for every
/// other point): every acknowledged write is there, the write in flight is
/// wholly there or wholly absent, and the store reopens writable.
#[test]
fn power_cut_at_any_call() {
    let o = opts(3);
    let dry = MemDirectory::new();
    let s = Store::open_in(Arc::new(dry.clone()), o.clone()).unwrap();
    let opened = dry.mutating_calls();
    assert!(cut_workload(&s, &mut Model::new()).is_none());
    let calls = dry.mutating_calls() - opened;
    drop(s);
    let points: u64 = if full() { 1_200 } else { 150 };
    let mut kept = 0;
    for p in 0..points {
        let k = p * calls / points;
        let dir = MemDirectory::new();
        let s = Store::open_in(Arc::new(dir.clone()), o.clone()).unwrap();
        dir.cut_power_after(k);
        let mut model = Model::new();
        let failed = cut_workload(&s, &mut model);
        assert!(failed.is_some(), "cut after {k} of {calls} calls: nothing failed");
        s.kill();
        if p % 2 == 0 {
            dir.crash_torn(p);
        } else {
            dir.crash();
        }
        let s = Store::open_in(Arc::new(dir.clone()), o.clone())
            .unwrap_or_else(|e| panic!("cut after {k} of {calls} calls: reopen failed: {e}"));
        let got = scan_all(&s);
        if got != model {
            let mut with = model.clone();
            apply(&mut with, failed.as_deref().unwrap_or_default());
            assert!(
                got == with,
                "cut after {k} of {calls} calls: neither the acknowledged writes nor those and the write in flight"
            );
            kept += 1;
        }
        s.put(b"after", b"cut").unwrap();
        s.verify().unwrap();
    }
    println!("{points} cut points over {calls} mutating calls; {kept} kept the write in flight");
}

/// With `SyncPolicy::Never` a crash keeps a prefix of the acknowledged
/// writes: exactly those before the last flush or rotation (which sync the
/// log), never a later write without an earlier one.
#[test]
fn unsynced_crash_keeps_a_prefix() {
    let mut o = opts(3);
    o.sync = SyncPolicy::Never;
    let dir = Arc::new(MemDirectory::new());
    let s = Store::open_in(dir.clone(), o.clone()).unwrap();
    let mut prefixes = vec![Model::new()];
    let mut model = Model::new();
    for i in 0..1500u32 {
        let k = format!("key{:04}", i % 300).into_bytes();
        s.put(&k, &i.to_le_bytes()).unwrap();
        model.insert(k, i.to_le_bytes().to_vec());
        prefixes.push(model.clone());
    }
    s.kill();
    dir.crash();
    let s = Store::open_in(dir, o).unwrap();
    let got = scan_all(&s);
    let at = prefixes.iter().position(|p| *p == got);
    assert!(
        at.is_some(),
        "after the crash the store holds no prefix of the writes"
    );
    println!("the crash kept {} of 1500 writes", at.unwrap_or(0));
    assert!(
        at.unwrap_or(0) > 0,
        "rotations synced the log, so some writes survive"
    );
}
