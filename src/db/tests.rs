use std::collections::BTreeMap;

use super::*;
use crate::log::WAL_HEADER_LEN;
use crate::storage::{FaultKind, FaultOp, FaultyDirectory, MemDirectory};

fn small(background: bool) -> Options {
    Options {
        memory_budget: 256 << 10,
        background_merge: background,
        static_kind: StaticKind::Spec("pgm-disk-cpr:epsilon=16".into()),
        ..Options::default()
    }
}

fn contents(db: &Db) -> BTreeMap<u64, u64> {
    db.range(..).map(|r| r.unwrap()).collect()
}

#[test]
fn put_get_delete_range_and_merges() {
    let mem = MemDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let db = Db::open(dir.clone(), small(true)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..30_000u64 {
        let k = (i * 7919) % 20_011;
        if i % 5 == 4 {
            db.delete(k).unwrap();
            model.remove(&k);
        } else {
            db.put(k, i).unwrap();
            model.insert(k, i);
        }
    }
    db.flush().unwrap();
    let st = db.stats().unwrap();
    assert!(st.merges >= 2, "{st:?}");
    assert_eq!(st.active_entries, 0);
    assert_eq!(contents(&db), model);
    assert_eq!(db.count().unwrap(), model.len() as u64);
    for k in [0u64, 1, 5, 20_010, 20_011, u64::MAX] {
        assert_eq!(db.get(k).unwrap(), model.get(&k).copied());
    }
    let r: Vec<u64> = db.range(100..=200).map(|r| r.unwrap().0).collect();
    let want: Vec<u64> = model.range(100..=200).map(|(k, _)| *k).collect();
    assert_eq!(r, want);
    // Only the current generation's files, the manifest and one segment remain.
    let names = mem.list().unwrap();
    let gens: std::collections::BTreeSet<u64> = names.iter().filter_map(|n| gen_of(n)).collect();
    assert_eq!(gens.len(), 1, "{names:?}");
    assert_eq!(
        names.iter().filter(|n| wal_id(n).is_some()).count(),
        1,
        "{names:?}"
    );
    db.close().unwrap();
    let db = Db::open(dir, small(false)).unwrap();
    assert_eq!(contents(&db), model);
}

#[test]
fn unsynced_writes_are_lost_on_crash_but_synced_ones_survive() {
    let mem = MemDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let opts = Options {
        sync: SyncPolicy::Never,
        ..small(true)
    };
    let db = Db::open(dir.clone(), opts.clone()).unwrap();
    db.put(1, 10).unwrap();
    db.sync().unwrap();
    db.put(2, 20).unwrap();
    db.kill();
    mem.crash();
    let db = Db::open(dir, opts).unwrap();
    assert_eq!(db.get(1).unwrap(), Some(10));
    assert_eq!(db.get(2).unwrap(), None);
}

#[test]
fn bulk_load_then_updates() {
    let mem = MemDirectory::new();
    let keys: Vec<u64> = (0..50_000u64).map(|i| i * 3).collect();
    let n = Db::bulk_load(&mem, &small(true), keys.iter().map(|&k| (k, k + 1))).unwrap();
    assert_eq!(n, 50_000);
    assert!(
        Db::bulk_load(&mem, &small(true), [(1, 1)]).is_err(),
        "a second bulk load"
    );
    let dir: Arc<dyn Directory> = Arc::new(mem);
    let db = Db::open(dir, small(true)).unwrap();
    assert_eq!(db.get(3).unwrap(), Some(4));
    assert_eq!(db.get(4).unwrap(), None);
    db.put(4, 0).unwrap();
    db.delete(3).unwrap();
    assert_eq!(
        db.range(0..7).map(|r| r.unwrap()).collect::<Vec<_>>(),
        vec![(0, 1), (4, 0), (6, 7)]
    );
    assert_eq!(db.count().unwrap(), 50_000);
    let st = db.stats().unwrap();
    assert_eq!(st.static_records, 50_000);
    assert!(st.static_index_bytes > 0 && st.disk_bytes > 50_000 * 16);
}

#[test]
fn failed_bulk_loads_leave_no_store_and_no_files() {
    let mem = MemDirectory::new();
    let keys: Vec<u64> = (0..60_000u64).map(|i| i * 5).collect();
    // An error of the records (a key file that fails to read) after the
    // first pages are written, and keys out of order.
    let failing = keys.iter().enumerate().map(|(i, &k)| {
        if i == 40_000 {
            Err(Error::invalid("read failed"))
        } else {
            Ok((k, k))
        }
    });
    let e = Db::try_bulk_load(&mem, &Options::default(), failing).unwrap_err();
    assert!(e.to_string().contains("read failed"), "{e}");
    assert!(mem.list().unwrap().is_empty(), "left: {:?}", mem.list().unwrap());
    let mut unsorted = keys.clone();
    unsorted.swap(30_000, 30_001);
    let e = Db::bulk_load(&mem, &Options::default(), unsorted.iter().map(|&k| (k, k))).unwrap_err();
    assert!(matches!(e, Error::OutOfOrder { .. }), "{e}");
    assert!(mem.list().unwrap().is_empty(), "left: {:?}", mem.list().unwrap());
    assert!(DbManifest::load(&mem).unwrap().is_none());
    // The directory then takes a load.
    let n = Db::try_bulk_load(&mem, &Options::default(), keys.iter().map(|&k| Ok((k, k + 1)))).unwrap();
    assert_eq!(n, 60_000);
    let db = Db::open(Arc::new(mem), Options::default()).unwrap();
    assert_eq!(db.get(299_995).unwrap(), Some(299_996));
    assert_eq!(db.count().unwrap(), 60_000);
}

#[test]
fn auto_static_kind_chooses_by_memory_at_the_same_pages() {
    // Auto keeps the smaller of gap-zonemap-d and leco-zonemap-d (one page
    // per lookup), or pgm-disk-cpr if it expects at most MAX_AUTO_PAGES
    // pages and holds at most 90% of that.
    let linear: Vec<u64> = (0..200_000u64).map(|i| i * 16).collect();
    let cases = [
        (
            "books-like",
            crate::data::generate("books-like".parse().unwrap(), 200_000, 1).unwrap(),
        ),
        (
            "osm-like",
            crate::data::generate("osm-like".parse().unwrap(), 200_000, 1).unwrap(),
        ),
        (
            "uniform",
            crate::data::generate("uniform".parse().unwrap(), 200_000, 1).unwrap(),
        ),
        ("linear", linear),
    ];
    for (dist, keys) in cases {
        let size = |kind: StaticKind| {
            let mem = MemDirectory::new();
            let o = Options {
                static_kind: kind,
                ..Options::default()
            };
            Db::bulk_load(&mem, &o, keys.iter().map(|&k| (k, k))).unwrap();
            let spec = DbManifest::load(&mem).unwrap().unwrap().static_kind;
            let db = Db::open(Arc::new(mem), o).unwrap();
            (spec, db.stats().unwrap().static_index_bytes)
        };
        let (auto, auto_bytes) = size(StaticKind::Auto { epsilon: 8 });
        let (_, pgm) = size(StaticKind::Spec("pgm-disk-cpr:epsilon=8".into()));
        let (_, leco) = size(StaticKind::Spec("leco-zonemap-d".into()));
        let (_, gap) = size(StaticKind::Spec("gap-zonemap-d".into()));
        let zone = leco.min(gap);
        let kind = crate::index::layered::LAYERED_KINDS
            .iter()
            .find(|k| k.name == "pgm-disk-cpr")
            .unwrap();
        let mut m = serde_json::Map::new();
        m.insert("epsilon".into(), 8.into());
        let per_page = crate::format::records_per_page(4096);
        let d = (kind.design)(&crate::index::Params::from_map(m), &keys, per_page, 4096).unwrap();
        let pages = d.notes["expected_pages"].as_f64().unwrap();
        let msg = format!("{dist}: {auto} {auto_bytes} pgm {pgm} ({pages} pages) leco {leco} gap {gap}");
        let learned = pages <= super::stage::MAX_AUTO_PAGES && (pgm as f64) < 0.9 * zone as f64;
        if learned {
            assert!(auto.starts_with("pgm-disk-cpr") && auto_bytes == pgm, "{msg}");
        } else {
            assert!(auto.contains("zonemap-d") && auto_bytes == zone, "{msg}");
        }
        match dist {
            // Exact lines: one page per lookup from the learned index too.
            "linear" => assert!(pages <= 1.0 && pgm < 1000, "{msg}"),
            // Smaller than the zone maps, but ~6% more pages: not taken.
            "uniform" => assert!(pages > 1.05 && pgm < zone && !learned, "{msg}"),
            _ => {}
        }
    }
}

#[test]
fn wal_failure_refuses_writes_and_loses_nothing_acknowledged() {
    let fd = FaultyDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(fd.clone());
    let db = Db::open(dir.clone(), small(true)).unwrap();
    for k in 0..100 {
        db.put(k, k).unwrap();
    }
    fd.plan().inject(FaultOp::Sync, 0, FaultKind::Eio, false);
    assert!(db.put(1000, 1).is_err());
    assert!(db.put(1001, 1).is_err(), "poisoned");
    assert_eq!(db.get(5).unwrap(), Some(5), "reads go on");
    db.kill();
    fd.crash();
    let db = Db::open(dir, small(true)).unwrap();
    for k in 0..100 {
        assert_eq!(db.get(k).unwrap(), Some(k));
    }
    assert_eq!(db.get(1001).unwrap(), None);
}

#[test]
fn merge_failure_keeps_everything_and_reopen_recovers() {
    let fd = FaultyDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(fd.clone());
    let db = Db::open(dir.clone(), small(false)).unwrap();
    let mut acked = BTreeMap::new();
    // Fail the writes of the first merge's data run.
    let mut failed = false;
    for k in 0..40_000u64 {
        if k == 100 {
            fd.plan().inject(FaultOp::Write, 40, FaultKind::Eio, true);
        }
        match db.put(k, k * 2) {
            Ok(()) => {
                acked.insert(k, k * 2);
            }
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the merge's injected failure surfaced");
    for (&k, &v) in acked.iter().take(50) {
        assert_eq!(db.get(k).unwrap(), Some(v));
    }
    db.kill();
    fd.crash();
    let db = Db::open(dir, small(false)).unwrap();
    assert_eq!(contents(&db), acked);
}

#[test]
fn corrupt_manifest_and_log_are_errors() {
    let mem = MemDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let db = Db::open(dir.clone(), small(true)).unwrap();
    for k in 0..50 {
        db.put(k, k).unwrap();
    }
    db.close().unwrap();
    // A flipped byte inside an acknowledged frame (not at the tail).
    let seg = mem
        .list()
        .unwrap()
        .into_iter()
        .find(|n| wal_id(n).is_some())
        .unwrap();
    mem.file(&seg).unwrap().corrupt_byte(WAL_HEADER_LEN + 20);
    assert!(Db::open(dir.clone(), small(true)).unwrap_err().is_corruption());
    mem.file(&seg).unwrap().corrupt_byte(WAL_HEADER_LEN + 20);
    Db::open(dir.clone(), small(true)).unwrap().close().unwrap();
    mem.file(DB_MANIFEST_FILE).unwrap().corrupt_byte(30);
    assert!(Db::open(dir.clone(), small(true)).unwrap_err().is_corruption());
    mem.file(DB_MANIFEST_FILE).unwrap().corrupt_byte(30);
    mem.remove(DB_MANIFEST_FILE).unwrap();
    assert!(
        Db::open(dir, small(true)).unwrap_err().is_corruption(),
        "log without manifest"
    );
}

#[test]
fn interrupted_merge_files_are_removed_on_open() {
    let mem = MemDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let db = Db::open(dir.clone(), small(true)).unwrap();
    db.put(1, 1).unwrap();
    db.close().unwrap();
    mem.create("g000009-data.run").unwrap();
    mem.create("strata-db.manifest.tmp").unwrap();
    mem.create("unrelated").unwrap();
    let db = Db::open(dir, small(true)).unwrap();
    assert_eq!(db.get(1).unwrap(), Some(1));
    let names = mem.list().unwrap();
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("g000009") || n.ends_with(".tmp")),
        "{names:?}"
    );
    assert!(names.contains(&"unrelated".to_string()));
}

#[test]
fn db_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Db>();
    check::<DbRange>();
}

#[test]
fn bad_options_are_errors() {
    let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
    for o in [
        Options {
            memory_budget: 0,
            ..Options::default()
        },
        Options {
            static_kind: StaticKind::Spec("btree".into()),
            ..Options::default()
        },
        Options {
            sync: SyncPolicy::EveryMs(0),
            ..Options::default()
        },
        Options {
            page_size: 1000,
            ..Options::default()
        },
    ] {
        assert!(Db::open(dir.clone(), o).is_err());
    }
    let db = Db::open(dir, Options::default()).unwrap();
    let mut b = WriteBatch::new();
    for k in 0..(MAX_BATCH_OPS as u64 + 1) {
        b.put(k, k);
    }
    assert!(db.write_batch(&b).is_err());
}

#[test]
fn wait_for_merge_returns_when_no_merge_runs() {
    let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
    let db = Db::open(
        dir,
        Options {
            sync: SyncPolicy::Never,
            ..small(true)
        },
    )
    .unwrap();
    db.wait_for_merge().unwrap();
    let mut merges_before = Vec::new();
    for i in 0..40_000u64 {
        db.put(i.wrapping_mul(0x9E37_79B9_7F4A_7C15), i).unwrap();
        if i % 10_000 == 9_999 {
            db.wait_for_merge().unwrap();
            let st = db.stats().unwrap();
            assert!(!st.merging, "a merge still runs after wait_for_merge");
            assert_eq!(st.frozen_entries, 0);
            merges_before.push(st.merges);
        }
    }
    assert!(merges_before.last().unwrap() > &0, "{merges_before:?}");
    // It starts no merge of its own: the writable stage keeps its entries.
    let active = db.stats().unwrap().active_entries;
    db.wait_for_merge().unwrap();
    assert_eq!(db.stats().unwrap().active_entries, active);
    db.close().unwrap();
}

#[test]
fn merges_across_read_chunks_keep_every_record() {
    // 200,000 records = 785 pages of 255: the merge reads the old run in
    // three 256-page chunks; edits sit on both sides of every page and chunk
    // boundary (new keys between old ones, overwrites, deletes, tombstones of
    // absent keys, keys past both ends), for a zone map (page bounds kept)
    // a learned static kind (every key kept), and kinds whose design streams
    // over the new run (page bounds kept, keys read back in passes).
    let n = 200_000u64;
    for kind in [
        "gap-zonemap-d",
        "pgm-disk-cpr:epsilon=8",
        "pgm:epsilon=16",
        "btree-static",
    ] {
        let mem = MemDirectory::new();
        let dir: Arc<dyn Directory> = Arc::new(mem.clone());
        let o = Options {
            static_kind: StaticKind::Spec(kind.into()),
            ..Options::default()
        };
        Db::bulk_load(&mem, &o, (0..n).map(|i| (i * 4 + 4, i))).unwrap();
        let mut model: BTreeMap<u64, u64> = (0..n).map(|i| (i * 4 + 4, i)).collect();
        let db = Db::open(dir.clone(), o.clone()).unwrap();
        let per_page = 255u64;
        let mut batch = WriteBatch::new();
        for b in [
            0,
            1,
            254,
            255,
            256,
            256 * per_page - 1,
            256 * per_page,
            512 * per_page,
            n - 1,
        ] {
            let k = b * 4 + 4;
            batch.put(k + 1, 7);
            model.insert(k + 1, 7);
            batch.put(k, 8);
            model.insert(k, 8);
            batch.delete(k + 4);
            model.remove(&(k + 4));
            batch.delete(k + 2);
        }
        for (k, v) in [(0, 1), (1, 2), (u64::MAX, 3), (n * 4 + 5, 4)] {
            batch.put(k, v);
            model.insert(k, v);
        }
        db.write_batch(&batch).unwrap();
        db.flush().unwrap();
        let st = db.stats().unwrap();
        assert_eq!((st.merges, st.active_entries), (1, 0), "{kind}: {st:?}");
        assert_eq!(st.static_records, model.len() as u64, "{kind}");
        assert!(contents(&db) == model, "{kind}: contents differ after the merge");
        for k in [
            0u64,
            1,
            4,
            5,
            8,
            1024,
            1025,
            261_120,
            261_121,
            261_124,
            261_125,
            n * 4,
            u64::MAX,
        ] {
            assert_eq!(db.get(k).unwrap(), model.get(&k).copied(), "{kind}: key {k}");
        }
        db.close().unwrap();
        let db = Db::open(dir, o).unwrap();
        assert!(contents(&db) == model, "{kind}: contents differ after reopening");
    }
}

#[test]
fn every_ms_syncs_in_the_background() {
    let mem = MemDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let opts = Options {
        sync: SyncPolicy::EveryMs(1),
        ..small(true)
    };
    let db = Db::open(dir.clone(), opts.clone()).unwrap();
    db.put(1, 10).unwrap();
    // The background sync runs within a few periods; no explicit sync.
    std::thread::sleep(std::time::Duration::from_millis(50));
    db.kill();
    mem.crash();
    let db = Db::open(dir, opts).unwrap();
    assert_eq!(db.get(1).unwrap(), Some(10));
}

fn is_locked(r: Result<Db>, held_exclusively: bool) -> bool {
    matches!(r, Err(Error::Locked { exclusive, .. }) if exclusive == held_exclusively)
}

fn read_only() -> Options {
    Options {
        read_only: true,
        create_if_missing: false,
        ..small(true)
    }
}

#[test]
fn one_writer_or_many_readers() {
    let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
    let db = Db::open(dir.clone(), small(true)).unwrap();
    db.put(1, 10).unwrap();
    assert!(is_locked(Db::open(dir.clone(), small(true)), true));
    assert!(is_locked(Db::open(dir.clone(), read_only()), true));
    // A killed writer's lock is released when it is dropped.
    db.kill();
    let db = Db::open(dir.clone(), small(true)).unwrap();
    db.close().unwrap();
    let r1 = Db::open(dir.clone(), read_only()).unwrap();
    let r2 = Db::open(dir.clone(), read_only()).unwrap();
    assert_eq!((r1.get(1).unwrap(), r2.get(1).unwrap()), (Some(10), Some(10)));
    assert!(is_locked(Db::open(dir.clone(), small(true)), false));
    assert!(matches!(r1.put(2, 2), Err(Error::Unsupported(_))));
    assert!(matches!(r1.flush(), Err(Error::Unsupported(_))));
    r1.sync().unwrap();
    drop(r1);
    r2.close().unwrap();
    Db::open(dir, small(true)).unwrap().close().unwrap();
}

#[test]
fn locks_hold_across_handles_on_local_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open_path(tmp.path(), small(true)).unwrap();
    assert!(is_locked(Db::open_path(tmp.path(), small(true)), true));
    assert!(is_locked(Db::open_path(tmp.path(), read_only()), true));
    drop(db);
    let r = Db::open_path(tmp.path(), read_only()).unwrap();
    let e = Db::open_path(tmp.path(), small(true)).unwrap_err();
    assert!(e.to_string().contains(&tmp.path().display().to_string()), "{e}");
    drop(r);
}

/// Every file of a local directory: name → bytes.
fn snapshot(path: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(path)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn read_only_open_changes_no_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open_path(tmp.path(), small(false)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..20_000u64 {
        let k = (i * 7919) % 20_011;
        db.put(k, i).unwrap();
        model.insert(k, i);
    }
    db.close().unwrap();
    // A torn tail: a frame cut short after the last complete one.
    let wal = snapshot(tmp.path())
        .into_keys()
        .filter(|n| wal_id(n).is_some())
        .max()
        .unwrap();
    let mut bytes = std::fs::read(tmp.path().join(&wal)).unwrap();
    let torn_len = 100u32.to_le_bytes();
    let torn = [
        &torn_len[..],
        &crc32c::crc32c(&torn_len).to_le_bytes(),
        &[0x5a; 11],
    ]
    .concat();
    bytes.extend_from_slice(&torn);
    std::fs::write(tmp.path().join(&wal), &bytes).unwrap();
    let before = snapshot(tmp.path());
    let ro = Db::open_path(tmp.path(), read_only()).unwrap();
    assert_eq!(contents(&ro), model);
    ro.close().unwrap();
    let after = snapshot(tmp.path());
    let lens =
        |m: &BTreeMap<String, Vec<u8>>| m.iter().map(|(n, b)| (n.clone(), b.len())).collect::<Vec<_>>();
    assert_eq!(lens(&after), lens(&before));
    assert!(after == before, "a read-only open changed a file's bytes");
    // A writer then drops the torn tail, and keeps every record.
    let db = Db::open_path(tmp.path(), small(false)).unwrap();
    assert_eq!(contents(&db), model);
    db.close().unwrap();
    assert_eq!(
        std::fs::read(tmp.path().join(&wal)).unwrap().len(),
        bytes.len() - torn.len()
    );
}

#[test]
fn missing_stores_are_not_found_and_not_created() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nosuch.db");
    for opts in [
        read_only(),
        Options {
            create_if_missing: false,
            ..small(true)
        },
    ] {
        let e = Db::open_path(&missing, opts.clone()).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
        assert!(e.to_string().contains("nosuch.db"), "{e}");
        assert!(!missing.exists());
        // An empty directory holds no store either; nothing is written.
        let mem = MemDirectory::new();
        let e = Db::open(Arc::new(mem.clone()), opts).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
        assert!(mem.list().unwrap().is_empty());
    }
}
