//! Writers, readers and a scanner on one LSM store at once, with a
//! background thread flushing and compacting small tables: no reader ever
//! sees part of a batch (every batch sets all keys of a group to one
//! value), and reads of a key never go back in time (per-key counters only
//! grow). `STRATA_FULL=1` runs longer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use strata::log::SyncPolicy;
use strata::lsm::{Options, Store, WriteBatch};
use strata::storage::MemDirectory;

const GROUPS: u64 = 16;
const GROUP_KEYS: u64 = 5;
const WRITERS: u64 = 2;

fn full() -> bool {
    std::env::var("STRATA_FULL").is_ok_and(|v| v == "1")
}

fn group_key(g: u64, i: u64) -> Vec<u8> {
    format!("group{g:03}/member{i}").into_bytes()
}

fn counter_key(w: u64, j: u64) -> Vec<u8> {
    format!("counter/{w}/{j:03}").into_bytes()
}

fn decode(v: &[u8]) -> u64 {
    u64::from_be_bytes(v.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]))
}

/// Checks that every group a scan (at one sequence number) saw is whole.
fn check_groups(seen: &[(Vec<u8>, Vec<u8>)]) {
    for g in 0..GROUPS {
        let vals: Vec<&Vec<u8>> = seen
            .iter()
            .filter(|(k, _)| k.starts_with(format!("group{g:03}/").as_bytes()))
            .map(|(_, v)| v)
            .collect();
        assert!(
            vals.is_empty() || (vals.len() == GROUP_KEYS as usize && vals.iter().all(|v| *v == vals[0])),
            "group {g}: a torn batch is visible: {vals:?}"
        );
    }
}

#[test]
fn writers_readers_and_a_scanner() {
    writers_readers_and_a_scanner_with(|_| {}, if full() { 20_000 } else { 6_000 });
}

/// The same with unpinned tables and a 32 KiB block cache: readers, the
/// scanner and compactions load and evict tables' sections concurrently.
#[test]
fn writers_readers_and_a_scanner_over_unpinned_tables() {
    let unpinned = |o: &mut Options| {
        o.pin_tables = false;
        o.block_cache_bytes = 32 << 10;
    };
    writers_readers_and_a_scanner_with(unpinned, if full() { 20_000 } else { 3_000 });
}

fn writers_readers_and_a_scanner_with(tune: impl Fn(&mut Options), batches: u64) {
    let dir = Arc::new(MemDirectory::new());
    let mut o = Options::with_memory(1 << 20);
    o.write_buffer_bytes = 8 << 10;
    o.target_file_bytes = 4 << 10;
    o.l1_bytes = 16 << 10;
    o.level_ratio = 4;
    o.sync = SyncPolicy::Never;
    o.background = true;
    tune(&mut o);
    let store = Arc::new(Store::open_in(dir.clone(), o.clone()).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let st = store.clone();
            s.spawn(move || {
                for n in 1..=batches {
                    let mut b = WriteBatch::new();
                    let g = (n * 7 + w) % GROUPS;
                    let val = format!("w{w}-n{n}").into_bytes();
                    for i in 0..GROUP_KEYS {
                        b.put(&group_key(g, i), &val);
                    }
                    // This writer's counters only grow.
                    b.put(&counter_key(w, n % 50), &n.to_be_bytes());
                    st.write_batch(&b).unwrap();
                    if n % 97 == 0 {
                        st.delete(&format!("scratch{n}").into_bytes()).unwrap();
                    }
                }
            });
        }
        // Point readers: counters never go back; snapshot reads of a group are whole.
        for r in 0..2u64 {
            let st = store.clone();
            let done = done.clone();
            s.spawn(move || {
                let mut last = vec![0u64; (WRITERS * 50) as usize];
                let mut rounds = 0u64;
                while !done.load(Ordering::SeqCst) || rounds < 10 {
                    rounds += 1;
                    for w in 0..WRITERS {
                        for j in 0..50 {
                            let now = st.get(&counter_key(w, j)).unwrap().map_or(0, |v| decode(&v));
                            let slot = &mut last[(w * 50 + j) as usize];
                            assert!(
                                now >= *slot,
                                "reader {r}: counter {w}/{j} went from {} to {now}",
                                *slot
                            );
                            *slot = now;
                        }
                    }
                    let snap = st.snapshot();
                    let g = rounds % GROUPS;
                    let vals: Vec<Option<Vec<u8>>> = (0..GROUP_KEYS)
                        .map(|i| snap.get(&group_key(g, i)).unwrap())
                        .collect();
                    assert!(
                        vals.iter().all(|v| *v == vals[0]),
                        "snapshot saw a torn batch: {vals:?}"
                    );
                }
            });
        }
        // The scanner: each scan is at one sequence number.
        {
            let st = store.clone();
            let done = done.clone();
            s.spawn(move || {
                let mut scans = 0;
                while !done.load(Ordering::SeqCst) || scans < 3 {
                    scans += 1;
                    let mut it = st.iter().unwrap();
                    it.seek_to_first().unwrap();
                    let mut seen = Vec::new();
                    let mut prev: Option<Vec<u8>> = None;
                    while it.valid() {
                        assert!(prev.as_deref().is_none_or(|p| p < it.key()), "scan out of order");
                        prev = Some(it.key().to_vec());
                        seen.push((it.key().to_vec(), it.value().to_vec()));
                        it.next().unwrap();
                    }
                    check_groups(&seen);
                }
            });
        }
        // Ends the readers once the writers are done.
        let st = store.clone();
        let done2 = done.clone();
        s.spawn(move || {
            while Arc::strong_count(&st) > 1 + 3 + 1 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            done2.store(true, Ordering::SeqCst);
        });
    });
    let store = Arc::into_inner(store).unwrap();
    let stats = store.stats();
    println!(
        "flushes {}, compactions {}, stall µs {}, levels {:?}",
        stats.flushes,
        stats.compactions,
        stats.stall_micros,
        stats.levels.iter().map(|l| l.files).collect::<Vec<_>>()
    );
    assert!(stats.flushes > 10 && stats.compactions > 0, "{stats:?}");
    store.verify().unwrap();
    for w in 0..WRITERS {
        let j = batches % 50;
        assert_eq!(
            store.get(&counter_key(w, j)).unwrap().map(|v| decode(&v)),
            Some(batches)
        );
    }
    store.close().unwrap();
    let store = Store::open_in(dir, o).unwrap();
    for w in 0..WRITERS {
        assert_eq!(
            store
                .get(&counter_key(w, batches % 50))
                .unwrap()
                .map(|v| decode(&v)),
            Some(batches)
        );
    }
}
