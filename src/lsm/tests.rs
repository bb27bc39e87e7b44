//! Store tests over a `MemDirectory`: the write and read paths, flushes,
//! compactions, snapshots, recovery, errors.

use std::sync::Arc;

use super::*;
use crate::log::SyncPolicy;
use crate::storage::MemDirectory;

/// Small memtables and tables so flushes and compactions happen.
fn small() -> Options {
    let mut o = Options::with_memory(1 << 20);
    o.write_buffer_bytes = 4 << 10;
    o.target_file_bytes = 4 << 10;
    o.l1_bytes = 16 << 10;
    o.level_ratio = 4;
    o.background = false;
    o.sync = SyncPolicy::Never;
    o
}

fn k(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn scan(s: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = s.iter().unwrap();
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

#[test]
fn put_get_delete_across_flushes_and_compactions() {
    let dir = Arc::new(MemDirectory::new());
    let s = Store::open_in(dir.clone(), small()).unwrap();
    for i in 0..3000u32 {
        s.put(&k(i % 1000), &i.to_le_bytes()).unwrap();
        if i % 7 == 0 {
            s.delete(&k((i * 13) % 1000)).unwrap();
        }
    }
    let mut model = std::collections::BTreeMap::new();
    for i in 0..3000u32 {
        model.insert(k(i % 1000), i.to_le_bytes().to_vec());
        if i % 7 == 0 {
            model.remove(&k((i * 13) % 1000));
        }
    }
    let st = s.stats();
    assert!(st.flushes > 0 && st.compactions > 0, "{st:?}");
    for i in 0..1000u32 {
        assert_eq!(s.get(&k(i)).unwrap(), model.get(&k(i)).cloned(), "key {i}");
    }
    let want: Vec<_> = model.clone().into_iter().collect();
    assert_eq!(scan(&s), want);
    s.verify().unwrap();
    s.compact_range(None, None).unwrap();
    assert_eq!(scan(&s), want);
    s.verify().unwrap();
    s.close().unwrap();
    let s = Store::open_in(dir, small()).unwrap();
    assert_eq!(scan(&s), want);
    let mut it = s.iter().unwrap();
    it.seek(&k(500)).unwrap();
    assert_eq!(it.key(), model.range(k(500)..).next().unwrap().0.as_slice());
}

#[test]
fn snapshots_keep_their_versions_through_compaction() {
    let dir = Arc::new(MemDirectory::new());
    let s = Store::open_in(dir, small()).unwrap();
    s.put(b"a", b"1").unwrap();
    s.put(b"b", b"1").unwrap();
    let snap = s.snapshot();
    s.put(b"a", b"2").unwrap();
    s.delete(b"b").unwrap();
    let snap2 = s.snapshot();
    s.put(b"b", b"3").unwrap();
    s.compact_range(None, None).unwrap();
    s.compact_range(None, None).unwrap();
    assert_eq!(snap.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(snap.get(b"b").unwrap(), Some(b"1".to_vec()));
    assert_eq!(snap2.get(b"a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(snap2.get(b"b").unwrap(), None);
    assert_eq!(s.get(b"b").unwrap(), Some(b"3".to_vec()));
    let mut it = snap.iter().unwrap();
    it.seek_to_first().unwrap();
    assert_eq!((it.key(), it.value()), (&b"a"[..], &b"1"[..]));
    drop(snap);
    drop(snap2);
    drop(it);
    s.compact_range(None, None).unwrap();
    assert_eq!(s.stats().levels.iter().map(|l| l.entries).sum::<u64>(), 2);
}

#[test]
fn errors_oversize_locked_read_only_corrupt_manifest() {
    let dir = Arc::new(MemDirectory::new());
    let s = Store::open_in(dir.clone(), small()).unwrap();
    assert!(matches!(
        s.put(&vec![0; key::MAX_KEY_LEN + 1], b""),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        s.put(b"k", &vec![0; key::MAX_VALUE_LEN + 1]),
        Err(Error::InvalidInput(_))
    ));
    let mut b = WriteBatch::new();
    b.put(b"ok", b"1").put(&vec![1; key::MAX_KEY_LEN + 1], b"x");
    assert!(s.write_batch(&b).is_err());
    assert_eq!(
        s.get(b"ok").unwrap(),
        None,
        "nothing of a refused batch is written"
    );
    assert!(matches!(
        Store::open_in(dir.clone(), small()),
        Err(Error::Locked { .. })
    ));
    s.put(b"k", b"v").unwrap();
    s.close().unwrap();
    let mut ro = small();
    ro.read_only = true;
    let r = Store::open_in(dir.clone(), ro.clone()).unwrap();
    assert_eq!(r.get(b"k").unwrap(), Some(b"v".to_vec()));
    assert!(matches!(r.put(b"x", b"y"), Err(Error::Unsupported(_))));
    drop(r);
    let f = dir.file(LSM_MANIFEST_FILE).unwrap();
    f.corrupt_byte(40);
    assert!(Store::open_in(dir.clone(), small()).is_err());
    assert!(Store::open_in(Arc::new(MemDirectory::new()), ro).is_err());
}

#[test]
fn large_values_and_empty_keys() {
    let dir = Arc::new(MemDirectory::new());
    let s = Store::open_in(dir.clone(), small()).unwrap();
    let big = vec![7u8; 3 << 20];
    s.put(b"", b"empty key").unwrap();
    s.put(b"big", &big).unwrap();
    s.flush().unwrap();
    assert_eq!(s.get(b"big").unwrap().as_deref(), Some(big.as_slice()));
    assert_eq!(s.get(b"").unwrap(), Some(b"empty key".to_vec()));
    s.close().unwrap();
    let s = Store::open_in(dir, small()).unwrap();
    assert_eq!(s.get(b"big").unwrap().map(|v| v.len()), Some(big.len()));
}

#[test]
fn crash_keeps_every_synced_write() {
    let dir = Arc::new(MemDirectory::new());
    let mut o = small();
    o.sync = SyncPolicy::Always;
    let s = Store::open_in(dir.clone(), o.clone()).unwrap();
    for i in 0..2000u32 {
        s.put(&k(i), &k(i + 1)).unwrap();
    }
    s.kill();
    dir.crash();
    let s = Store::open_in(dir.clone(), o).unwrap();
    for i in 0..2000u32 {
        assert_eq!(s.get(&k(i)).unwrap(), Some(k(i + 1)), "key {i}");
    }
}

#[test]
fn background_mode_flushes_compacts_and_closes() {
    let dir = Arc::new(MemDirectory::new());
    let mut o = small();
    o.background = true;
    let s = Store::open_in(dir.clone(), o.clone()).unwrap();
    for i in 0..4000u32 {
        s.put(&k(i % 1500), &k(i)).unwrap();
    }
    s.flush().unwrap();
    let st = s.stats();
    assert!(st.flushes > 0, "{st:?}");
    assert_eq!(st.immutable_memtables, 0);
    s.verify().unwrap();
    s.close().unwrap();
    let s = Store::open_in(dir, o).unwrap();
    for i in 2500..4000u32 {
        assert_eq!(s.get(&k(i % 1500)).unwrap(), Some(k(i)));
    }
}

#[test]
fn stats_count_what_was_written() {
    let dir = Arc::new(MemDirectory::new());
    let s = Store::open_in(dir, small()).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"ab", b"cde").delete(b"x");
    assert_eq!(b.len(), 2);
    s.write_batch(&b).unwrap();
    s.put(b"k", b"").unwrap();
    let st = s.stats();
    assert_eq!(st.user_bytes_written, 2 + 3 + 1 + 1);
    assert_eq!(st.last_seq, 3);
    assert_eq!(st.levels.len(), NUM_LEVELS);
    assert_eq!(st.block_cache_capacity, 768 << 10);
    assert!(st.memtable_bytes > 0);
    s.flush().unwrap();
    let st = s.stats();
    assert_eq!((st.flushes, st.memtable_bytes), (1, 0));
    assert_eq!(st.levels[0].entries, 3);
    b.clear();
    assert!(b.is_empty());
}

#[test]
fn a_batch_is_one_sequence_range_and_later_writes_win() {
    let dir = Arc::new(MemDirectory::new());
    let mut o = small();
    o.sync = SyncPolicy::Always;
    let s = Store::open_in(dir.clone(), o.clone()).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"k", b"1").put(b"k", b"2").delete(b"j").put(b"j", b"3");
    s.write_batch(&b).unwrap();
    assert_eq!(s.get(b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(s.get(b"j").unwrap(), Some(b"3".to_vec()));
    s.kill();
    dir.crash();
    let s = Store::open_in(dir, o).unwrap();
    assert_eq!(s.get(b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(s.get(b"j").unwrap(), Some(b"3".to_vec()));
    assert_eq!(s.stats().last_seq, 4);
}

#[test]
fn many_versions_of_few_keys_with_the_default_index() {
    let dir = Arc::new(MemDirectory::new());
    let mut o = small();
    o.write_buffer_bytes = 8 << 10;
    o.table = crate::lsm::table::TableOptions::default();
    let s = Store::open_in(dir, o).unwrap();
    let mut last = std::collections::BTreeMap::new();
    for n in 1..20000u64 {
        let key = format!("counter/{}/{:03}", n % 2, (n / 2) % 50).into_bytes();
        s.put(&key, &n.to_be_bytes()).unwrap();
        last.insert(key, n);
        if n % 500 == 0 {
            for (k, v) in &last {
                let got = s.get(k).unwrap();
                assert_eq!(
                    got,
                    Some(v.to_be_bytes().to_vec()),
                    "n {n} key {:?} stats {:?}",
                    String::from_utf8_lossy(k),
                    s.stats().levels
                );
            }
        }
    }
}

#[test]
fn largest_key_and_value_round_trip_through_log_table_and_compaction() {
    let dir = Arc::new(MemDirectory::new());
    let mut o = small();
    o.sync = SyncPolicy::Always;
    let s = Store::open_in(dir.clone(), o.clone()).unwrap();
    let big_key = vec![b'k'; key::MAX_KEY_LEN];
    let big_value: Vec<u8> = (0..key::MAX_VALUE_LEN).map(|i| (i % 251) as u8).collect();
    s.put(&big_key, &big_value).unwrap();
    s.put(b"small", b"v").unwrap();
    s.kill();
    dir.crash();
    // Replayed from the log.
    let s = Store::open_in(dir.clone(), o.clone()).unwrap();
    assert!(s.get(&big_key).unwrap().as_deref() == Some(big_value.as_slice()));
    s.compact_range(None, None).unwrap();
    s.verify().unwrap();
    assert!(s.get(&big_key).unwrap().as_deref() == Some(big_value.as_slice()));
    assert_eq!(s.get(b"small").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn corrupt_tables_are_errors_never_wrong_answers() {
    let dir = Arc::new(MemDirectory::new());
    let s = Store::open_in(dir.clone(), small()).unwrap();
    for i in 0..300u32 {
        s.put(&k(i), &k(i + 7)).unwrap();
    }
    s.compact_range(None, None).unwrap();
    s.close().unwrap();
    let tables: Vec<String> = dir
        .list()
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .collect();
    assert!(!tables.is_empty());
    let name = &tables[0];
    let len = dir.file(name).unwrap().contents().len() as u64;
    let mut errors = 0;
    for at in (0..len).step_by(61) {
        let f = dir.file(name).unwrap();
        f.corrupt_byte(at);
        let outcome = Store::open_in(dir.clone(), small()).and_then(|s| {
            s.verify()?;
            for i in 0..300u32 {
                if let Some(v) = s.get(&k(i))? {
                    assert_eq!(v, k(i + 7), "a corrupt byte at {at} gave a wrong value");
                }
            }
            Ok(())
        });
        if outcome.is_err() {
            errors += 1;
        }
        f.corrupt_byte(at); // flips back
    }
    assert!(errors > 0);
    let s = Store::open_in(dir, small()).unwrap();
    s.verify().unwrap();
}

#[test]
fn a_failed_flush_refuses_writes_and_loses_nothing() {
    use crate::storage::{FaultKind, FaultOp, FaultyDirectory};
    let fd = FaultyDirectory::new();
    let dir: Arc<dyn crate::storage::Directory> = Arc::new(fd.clone());
    let mut o = small();
    o.sync = SyncPolicy::Always;
    let s = Store::open_in(dir.clone(), o.clone()).unwrap();
    for i in 0..50u32 {
        s.put(&k(i), &k(i)).unwrap();
    }
    fd.plan().inject(FaultOp::Sync, 0, FaultKind::Eio, true);
    let mut failed = false;
    for i in 50..400u32 {
        if s.put(&k(i), &k(i)).is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "the injected sync error surfaced");
    assert!(s.put(b"x", b"y").is_err(), "a poisoned store refuses writes");
    assert_eq!(s.get(&k(3)).unwrap(), Some(k(3)), "reads go on");
    drop(s);
    fd.plan().clear();
    let s = Store::open_in(dir, o).unwrap();
    for i in 0..50u32 {
        assert_eq!(s.get(&k(i)).unwrap(), Some(k(i)));
    }
    s.put(b"x", b"y").unwrap();
}

#[test]
fn store_and_snapshot_are_send_and_sync_iterators_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Store>();
    send_sync::<Snapshot>();
    send::<StoreIter>();
}

/// A ranged compaction that meets one L0 table compacts all of L0: an older
/// L0 table left behind would be read before the newer version moved to L1
/// (found by the full model test with the background thread: a `get` after
/// a reboot returned an overwritten value the scan did not).
#[test]
fn a_ranged_compaction_never_leaves_an_older_l0_table_above_a_newer_version() {
    let dir = Arc::new(MemDirectory::new());
    let mut o = small();
    o.l0_compaction_trigger = 16;
    o.l0_slowdown = 32;
    o.l0_stop = 48;
    let s = Store::open_in(dir.clone(), o).unwrap();
    s.put(b"m", b"old").unwrap();
    s.flush().unwrap();
    s.put(b"a", b"x").unwrap();
    s.put(b"m", b"new").unwrap();
    s.flush().unwrap();
    assert_eq!(s.stats().levels[0].files, 2);
    // [a, a] meets only the newer table (a..m), not the older one (m..m).
    s.compact_range(Some(b"a"), Some(b"a")).unwrap();
    assert_eq!(s.get(b"m").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(
        scan(&s),
        vec![(b"a".to_vec(), b"x".to_vec()), (b"m".to_vec(), b"new".to_vec())]
    );
    assert_eq!(s.stats().levels[0].files, 0);
}

/// The block cache gives way to the resident indexes and filters: with
/// them, the memtables and the cache, a store stays within its budget,
/// and the cache shrinks as tables come in.
#[test]
fn memory_stays_within_the_budget_as_indexes_and_filters_grow() {
    let dir = Arc::new(MemDirectory::new());
    let mut o = Options::with_memory(1 << 20);
    o.write_buffer_bytes = 64 << 10;
    o.table.index = crate::lsm::table::IndexSpec::parse("fp,boundary=4").unwrap();
    o.background = false;
    o.sync = SyncPolicy::Never;
    let ceiling = o.block_cache_bytes;
    let s = Store::open_in(dir.clone(), o).unwrap();
    assert_eq!(s.stats().block_cache_capacity, ceiling);
    let n = 60_000u32;
    for i in 0..n {
        s.put(&k((u64::from(i) * 7919 % u64::from(n)) as u32), &i.to_le_bytes())
            .unwrap();
    }
    s.flush().unwrap();
    for i in 0..n {
        assert!(s.get(&k(i)).unwrap().is_some(), "key {i}");
    }
    let st = s.stats();
    let resident = st.index_bytes + st.filter_bytes;
    assert!(resident > 200 << 10, "{st:?}");
    assert!(st.block_cache_capacity < ceiling, "{st:?}");
    assert!(
        st.block_cache_capacity + resident + (64 << 10) <= 1 << 20,
        "{st:?}"
    );
    assert!(st.memory_bytes() <= 1 << 20, "{st:?}");
    assert!(st.block_cache_bytes > 0, "{st:?}");
}

/// `pin=false`: tables keep no index, handles or filter resident, the
/// block cache holds what lookups load of them, and the store stays within
/// its 1 MiB budget where pinned tables alone exceed it; the same answers
/// either way, and after a reopen.
#[test]
fn unpinned_tables_keep_the_store_within_its_budget() {
    let n = 200_000u32;
    let run = |pin: bool| {
        let dir = Arc::new(MemDirectory::new());
        let spec =
            format!("memory=1M,index=fp,boundary=4,target_file=256k,background=false,sync=never,pin={pin}");
        let o = Options::parse_spec(&spec).unwrap();
        let s = Store::open_in(dir.clone(), o.clone()).unwrap();
        s.ingest(ingest_entries(n)).unwrap();
        for i in (0..2000u32).map(|i| i * 7919 % n) {
            s.put(&k(i), b"new").unwrap();
        }
        s.flush().unwrap();
        let probe = |s: &Store| {
            let mut got = Vec::new();
            for i in (0..n).step_by(97) {
                got.push(s.get(&k(i)).unwrap());
            }
            got.push(s.get(b"absent").unwrap());
            got
        };
        let before = probe(&s);
        let st = s.stats();
        let first = scan(&s);
        s.close().unwrap();
        let s = Store::open_in(dir, o).unwrap();
        assert_eq!(probe(&s), before, "pin={pin}: answers after a reopen");
        assert_eq!(scan(&s), first, "pin={pin}: scan after a reopen");
        (st, before, first)
    };
    let (lazy, a, scan_a) = run(false);
    let (pinned, b, scan_b) = run(true);
    assert!(a == b && scan_a == scan_b);
    assert_eq!(scan_a.len(), n as usize);
    assert_eq!(a.iter().filter(|v| v.as_deref() == Some(b"new")).count(), 21);
    println!("pin=false: {lazy:?}\npin=true: {pinned:?}");
    assert_eq!((lazy.index_bytes, lazy.filter_bytes), (0, 0), "{lazy:?}");
    assert!(
        lazy.levels
            .iter()
            .all(|l| l.index_bytes == 0 && l.filter_bytes == 0)
    );
    assert!(lazy.block_cache_bytes > 0 && lazy.block_cache_bytes <= lazy.block_cache_capacity);
    assert!(lazy.memory_bytes() <= 1 << 20, "{lazy:?}");
    assert!(pinned.index_bytes + pinned.filter_bytes > 1 << 20, "{pinned:?}");
    assert!(pinned.memory_bytes() > 1 << 20, "{pinned:?}");
}

fn ingest_entries(n: u32) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> {
    (0..n).map(|i| Ok((k(i), i.to_be_bytes().to_vec())))
}

fn table_files(dir: &MemDirectory) -> usize {
    dir.list()
        .unwrap()
        .iter()
        .filter(|n| table_number(n).is_some())
        .count()
}

/// An ingestion writes tables of one level, survives a crash right after
/// it returns, and later writes, deletes and compactions go over it.
#[test]
fn ingest_loads_an_empty_store_durably_and_writes_go_over_it() {
    let dir = Arc::new(MemDirectory::new());
    let o = small();
    let s = Store::open_in(dir.clone(), o.clone()).unwrap();
    let r = s.ingest(ingest_entries(5000)).unwrap();
    assert_eq!(r.entries, 5000);
    assert!(r.tables > 1, "{r:?}");
    assert!(r.level >= 1, "{r:?}");
    let st = s.stats();
    assert_eq!(st.levels[r.level].entries, 5000);
    assert_eq!((st.wal_bytes, st.flushes, st.compactions), (0, 0, 0));
    assert_eq!(st.last_seq, r.seq);
    s.kill();
    dir.crash();
    let s = Store::open_in(dir.clone(), o.clone()).unwrap();
    for i in (0..5000u32).step_by(7) {
        assert_eq!(s.get(&k(i)).unwrap(), Some(i.to_be_bytes().to_vec()), "key {i}");
    }
    assert_eq!(scan(&s).len(), 5000);
    for i in (0..5000u32).step_by(3) {
        s.put(&k(i), b"new").unwrap();
    }
    s.delete(&k(1)).unwrap();
    s.compact_range(None, None).unwrap();
    s.verify().unwrap();
    for i in 0..5000u32 {
        let want = if i == 1 {
            None
        } else if i % 3 == 0 {
            Some(b"new".to_vec())
        } else {
            Some(i.to_be_bytes().to_vec())
        };
        assert_eq!(s.get(&k(i)).unwrap(), want, "key {i}");
    }
}

/// A store that holds data, unsorted or duplicate keys, a key over the
/// limit and an error of the input are refused; nothing is published and
/// no table file is left behind; the store still loads afterwards.
#[test]
fn ingest_refuses_bad_input_and_leaves_nothing_behind() {
    let dir = Arc::new(MemDirectory::new());
    let s = Store::open_in(dir.clone(), small()).unwrap();
    let unsorted = ingest_entries(3000).chain(std::iter::once(Ok((k(5), vec![1]))));
    let dup = ingest_entries(3000).chain(std::iter::once(Ok((k(2999), vec![1]))));
    let long = ingest_entries(3000).chain(std::iter::once(Ok((vec![b'z'; 70_000], vec![1]))));
    let failing = ingest_entries(3000).chain(std::iter::once(Err(Error::invalid("input broke"))));
    for (what, input) in [
        ("unsorted", Box::new(unsorted) as Box<dyn Iterator<Item = _>>),
        ("duplicate", Box::new(dup)),
        ("too long", Box::new(long)),
        ("failing", Box::new(failing)),
    ] {
        let e = s.ingest(input).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{what}: {e}");
        assert_eq!(table_files(&dir), 0, "{what}");
        assert!(scan(&s).is_empty(), "{what}");
    }
    s.ingest(ingest_entries(100)).unwrap();
    let e = s.ingest(ingest_entries(10)).unwrap_err();
    assert!(e.to_string().contains("empty store"), "{e}");
    let s2 = Store::open_in(Arc::new(MemDirectory::new()), small()).unwrap();
    s2.put(b"a", b"b").unwrap();
    assert!(s2.ingest(ingest_entries(10)).is_err());
    assert_eq!(scan(&s2).len(), 1);
    drop(s);
    let s = Store::open_in(dir, small()).unwrap();
    assert_eq!(scan(&s).len(), 100);
    // Writes after an ingestion are newer than it, also across a reopen.
    s.put(&k(3), b"after").unwrap();
    assert_eq!(s.get(&k(3)).unwrap(), Some(b"after".to_vec()));
}

/// A block read once is served from the block cache: no read call, no
/// second checksum; a store without a cache reads it again.
#[test]
fn the_block_cache_serves_repeated_reads_without_io() {
    for cache in [true, false] {
        let dir = Arc::new(MemDirectory::new());
        let mut o = small();
        if !cache {
            o.block_cache_bytes = 0;
        }
        let s = Store::open_in(dir, o).unwrap();
        s.ingest(ingest_entries(2000)).unwrap();
        assert_eq!(s.get(&k(777)).unwrap(), Some(777u32.to_be_bytes().to_vec()));
        let before = s.stats();
        for _ in 0..3 {
            assert_eq!(s.get(&k(777)).unwrap(), Some(777u32.to_be_bytes().to_vec()));
        }
        let after = s.stats();
        let reads = after.io.read_calls - before.io.read_calls;
        if cache {
            assert_eq!(reads, 0, "{after:?}");
            assert!(after.block_cache_hits >= before.block_cache_hits + 3, "{after:?}");
            assert!(after.block_cache_bytes > 0 && after.block_cache_bytes <= after.block_cache_capacity);
        } else {
            assert_eq!(reads, 3, "{after:?}");
            assert_eq!(after.block_cache_bytes, 0);
        }
    }
}

/// One step of the granularity test: `Fill(first, n, step)` puts keys
/// `first, first + step, ...` (sequential runs make levels whose tables do
/// not overlap), `Drop(first, n)` deletes, `Flush`, `Compact(lo, hi)`.
#[derive(Debug, Clone)]
enum GranStep {
    Fill(u32, u32, u32),
    Drop(u32, u32),
    Flush,
    Compact(Option<u32>, Option<u32>),
}

fn gran_step() -> impl proptest::strategy::Strategy<Value = GranStep> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (0..20_000u32, 1..400u32, 1..4u32).prop_map(|(a, n, s)| GranStep::Fill(a, n, s)),
        2 => (0..20_000u32, 1..200u32).prop_map(|(a, n)| GranStep::Drop(a, n)),
        1 => Just(GranStep::Flush),
        1 => (proptest::option::of(0..20_000u32), proptest::option::of(0..20_000u32))
            .prop_map(|(a, b)| GranStep::Compact(a, b)),
    ]
}

/// Runs `steps` on a store of granularity `g` against a model; after every
/// step checks the level invariants (`verify`) and, under
/// [`Granularity::Level`], at most one table in every level below L0.
/// Returns the most tables any level below L0 held.
fn run_granularity(steps: &[GranStep], g: Granularity) -> u64 {
    let dir = Arc::new(MemDirectory::new());
    let mut o = small();
    o.granularity = g;
    o.l1_bytes = 8 << 10;
    let s = Store::open_in(dir, o).unwrap();
    let mut model = std::collections::BTreeMap::new();
    let mut most = 0;
    for (i, step) in steps.iter().enumerate() {
        match *step {
            GranStep::Fill(a, n, st) => {
                for j in 0..n {
                    let key = k(a.wrapping_add(j * st));
                    let v = format!("{i}:{j}").into_bytes();
                    s.put(&key, &v).unwrap();
                    model.insert(key, v);
                }
            }
            GranStep::Drop(a, n) => {
                for j in 0..n {
                    s.delete(&k(a + j)).unwrap();
                    model.remove(&k(a + j));
                }
            }
            GranStep::Flush => s.flush().unwrap(),
            GranStep::Compact(lo, hi) => {
                let (lo, hi) = (lo.map(k), hi.map(k));
                s.compact_range(lo.as_deref(), hi.as_deref()).unwrap();
            }
        }
        s.verify().unwrap();
        let st = s.stats();
        let below_l0 = st.levels.iter().skip(1).map(|l| l.files).max().unwrap_or(0);
        most = most.max(below_l0);
        if g == Granularity::Level {
            assert!(below_l0 <= 1, "step {i} {step:?}: {:?}", st.levels);
        }
        assert_eq!(
            st.levels.iter().map(|l| l.index_bytes).sum::<u64>(),
            st.index_bytes
        );
        assert_eq!(
            st.levels.iter().map(|l| l.filter_bytes).sum::<u64>(),
            st.filter_bytes
        );
        for l in &st.levels {
            assert_eq!(l.files == 0, l.index_bytes == 0, "{l:?}");
        }
    }
    check_get_many(&s, &model, 20_000);
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(scan(&s), want);
    most
}

/// `get_many` of every key `k(0..n)` (in a scrambled order, some twice)
/// answers as the model does, and as `get` does.
fn check_get_many(s: &Store, model: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>, n: u32) {
    let keys: Vec<Vec<u8>> = (0..n + n / 4).map(|i| k((i * 7919) % n)).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let got = s.get_many(&refs).unwrap();
    assert_eq!(got.len(), keys.len());
    for (key, g) in keys.iter().zip(&got) {
        assert_eq!(g.as_ref(), model.get(key), "{:?}", String::from_utf8_lossy(key));
    }
    for key in keys.iter().step_by(97) {
        assert_eq!(s.get(key).unwrap().as_ref(), model.get(key));
    }
}

/// Batched lookups find every key wherever its newest version is (the
/// memtable, L0 tables, each level; values and tombstones shadowing older
/// values), pinned and unpinned, with and without a block cache; cold, a
/// batch reads no more than the keys' one-by-one lookups (keys whose
/// blocks are the same share a read).
#[test]
fn get_many_answers_as_get_does_from_every_level() {
    for (pin, cache) in [(true, true), (true, false), (false, true), (false, false)] {
        let dir = Arc::new(MemDirectory::new());
        let mut o = small();
        o.pin_tables = pin;
        if !cache {
            o.block_cache_bytes = 0;
        }
        let s = Store::open_in(dir.clone(), o.clone()).unwrap();
        let mut model = std::collections::BTreeMap::new();
        for round in 0..4u32 {
            for i in (0..2000u32).filter(|i| (i + round) % (round + 2) == 0) {
                let v = format!("{round}:{i}").into_bytes();
                s.put(&k(i), &v).unwrap();
                model.insert(k(i), v);
            }
            for i in (0..2000u32).filter(|i| i % (11 + round) == 0) {
                s.delete(&k(i)).unwrap();
                model.remove(&k(i));
            }
            if round == 1 {
                s.compact_range(None, None).unwrap();
            }
        }
        // Some keys only in the memtable.
        for i in 2000..2050u32 {
            s.put(&k(i), b"mem").unwrap();
            model.insert(k(i), b"mem".to_vec());
        }
        let st = s.stats();
        assert!(
            st.levels.iter().skip(1).any(|l| l.files > 0) && st.levels[0].files > 0,
            "{st:?}"
        );
        check_get_many(&s, &model, 2100);
        assert_eq!(s.get_many(&[]).unwrap(), Vec::<Option<Vec<u8>>>::new());
        assert!(s.get_many(&[&vec![0u8; 70_000]]).is_err());
        s.close().unwrap();
        if cache {
            continue;
        }
        // Cold (no block cache): the batch's reads against one by one.
        let s = Store::open_in(dir, o).unwrap();
        s.compact_range(None, None).unwrap();
        let keys: Vec<Vec<u8>> = (0..2000u32).step_by(200).map(k).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let r0 = s.stats().io.read_calls;
        for key in &refs {
            s.get(key).unwrap();
        }
        let r1 = s.stats().io.read_calls;
        let got = s.get_many(&refs).unwrap();
        let r2 = s.stats().io.read_calls;
        assert!(
            r2 - r1 <= r1 - r0 && r2 > r1,
            "pin={pin}: {} vs {}",
            r2 - r1,
            r1 - r0
        );
        assert_eq!(
            got,
            refs.iter().map(|key| s.get(key).unwrap()).collect::<Vec<_>>()
        );
        let dense: Vec<Vec<u8>> = (500..540u32).map(k).collect();
        let refs: Vec<&[u8]> = dense.iter().map(Vec::as_slice).collect();
        let r0 = s.stats().io.read_calls;
        for key in &refs {
            s.get(key).unwrap();
        }
        let r1 = s.stats().io.read_calls;
        s.get_many(&refs).unwrap();
        let r2 = s.stats().io.read_calls;
        assert!(r2 - r1 <= r1 - r0, "pin={pin}: {} > {}", r2 - r1, r1 - r0);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]
    /// Level granularity keeps one table per level below L0 through random
    /// loads, deletes, flushes and ranged compactions, and reads what a
    /// model holds; so does table granularity (with more tables).
    #[test]
    fn level_granularity_keeps_one_table_per_level(
        steps in proptest::collection::vec(gran_step(), 1..40)
    ) {
        run_granularity(&steps, Granularity::Level);
        run_granularity(&steps, Granularity::Table);
    }
}

/// The same load at both granularities: table granularity cuts the levels
/// into many tables, level granularity keeps one per level, with less
/// index memory (one model per level) and the same contents.
#[test]
fn level_granularity_on_a_sequential_and_random_load() {
    let steps: Vec<GranStep> = (0..30u32)
        .map(|i| GranStep::Fill((i * 7919) % 20_000, 300, 1 + i % 3))
        .chain([GranStep::Compact(None, None)])
        .collect();
    assert!(run_granularity(&steps, Granularity::Table) > 1);
    assert_eq!(run_granularity(&steps, Granularity::Level), 1);
}

/// Under level granularity an ingestion writes one table.
#[test]
fn ingest_under_level_granularity_writes_one_table() {
    for (g, more) in [(Granularity::Table, true), (Granularity::Level, false)] {
        let mut o = small();
        o.granularity = g;
        let s = Store::open_in(Arc::new(MemDirectory::new()), o).unwrap();
        let r = s.ingest(ingest_entries(5000)).unwrap();
        assert_eq!(r.tables > 1, more, "{g:?}: {r:?}");
        assert_eq!(s.stats().levels[r.level].files, r.tables);
    }
}

/// A compaction reads its input tables COMPACTION_READAHEAD bytes per call,
/// not one 4 KiB block per call.
#[test]
fn compactions_read_ahead() {
    let dir = Arc::new(MemDirectory::new());
    let mut o = Options::with_memory(8 << 20);
    o.write_buffer_bytes = 1 << 20;
    o.background = false;
    o.sync = SyncPolicy::Never;
    let s = Store::open_in(dir.clone(), o).unwrap();
    let value = [7u8; 100];
    for round in 0..2u32 {
        for i in 0..8_000u32 {
            s.put(&k(i * 2 + round), &value).unwrap();
        }
        s.flush().unwrap();
    }
    let before = s.stats();
    s.compact_range(None, None).unwrap();
    let after = s.stats();
    let read = after.compaction_bytes_read - before.compaction_bytes_read;
    let calls = after.io.read_calls - before.io.read_calls;
    let blocks = read / 4096;
    assert!(blocks > 400, "{read} bytes read");
    // Per input table: a run per COMPACTION_READAHEAD bytes, plus opening
    // the output tables (three reads each).
    let runs = read / crate::lsm::table::COMPACTION_READAHEAD + 2;
    assert!(
        calls <= runs + 2 + 3 * after.levels.iter().map(|l| l.files).sum::<u64>(),
        "{calls} read calls for {blocks} blocks"
    );
    assert_eq!(scan(&s).len(), 16_000);
}
