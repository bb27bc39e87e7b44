//! The store's checked log chain: issue 16's failures 2, 3 and 4 and crashes
//! during a rotation.

use std::collections::BTreeMap;

use super::*;
use crate::storage::{FaultKind, FaultOp, FaultyDirectory, MemDirectory};

fn opts() -> Options {
    Options {
        memory_budget: 256 << 10,
        background_merge: false,
        static_kind: StaticKind::Spec("pgm-disk-cpr:epsilon=16".into()),
        ..Options::default()
    }
}

fn ro() -> Options {
    Options {
        read_only: true,
        ..opts()
    }
}

fn strict() -> Options {
    Options {
        strict_recovery: true,
        ..opts()
    }
}

fn corruption_naming(r: Result<Db>, file: &str) -> String {
    let e = r.unwrap_err();
    assert!(e.is_corruption(), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(file), "{msg} does not name {file}");
    msg
}

/// A store with keys 0..n (value k + 1), closed.
fn store(n: u64) -> (MemDirectory, Arc<dyn Directory>) {
    let mem = MemDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let db = Db::open(dir.clone(), opts()).unwrap();
    for k in 0..n {
        db.put(k, k + 1).unwrap();
    }
    db.close().unwrap();
    (mem, dir)
}

fn chain(dir: &dyn Directory) -> crate::log::WalChain {
    DbManifest::load(dir).unwrap().unwrap().wal.unwrap()
}

#[test]
fn a_deleted_newest_segment_is_corruption() {
    let (mem, dir) = store(50);
    assert_eq!(chain(&mem).newest, 1);
    mem.remove("wal-000001.log").unwrap();
    corruption_naming(Db::open(dir.clone(), ro()), "wal-000001.log");
    corruption_naming(Db::open(dir, opts()), "wal-000001.log");
}

#[test]
fn another_stores_segment_is_corruption() {
    let (mem, dir) = store(50);
    let (other, _) = store(60);
    let theirs = other.file("wal-000001.log").unwrap().contents();
    let put = |name: &str| {
        let f = mem.create(name).unwrap();
        f.write_at(0, &theirs).unwrap();
    };
    put("wal-000002.log");
    let msg = corruption_naming(Db::open(dir.clone(), opts()), "wal-000002.log");
    assert!(msg.contains("past the newest"), "{msg}");
    mem.remove("wal-000002.log").unwrap();
    put("wal-000001.log");
    let msg = corruption_naming(Db::open(dir, ro()), "wal-000001.log");
    assert!(msg.contains("belongs to store"), "{msg}");
}

/// Keys 0..n put, a rotation (no merge), keys n..2n put: segment 1 sealed,
/// segment 2 the newest.
fn rotated(n: u64) -> (MemDirectory, Arc<dyn Directory>, BTreeMap<u64, u64>) {
    let mem = MemDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let db = Db::open(dir.clone(), opts()).unwrap();
    let mut model = BTreeMap::new();
    for k in 0..n {
        db.put(k, k + 1).unwrap();
        model.insert(k, k + 1);
    }
    {
        let mut ms = db.inner.merge.lock();
        db.inner.freeze(&mut ms).unwrap();
    }
    for k in n..2 * n {
        db.put(k, k + 1).unwrap();
        model.insert(k, k + 1);
    }
    db.kill();
    (mem, dir, model)
}

#[test]
fn an_older_segment_cut_at_a_frame_boundary_is_corruption() {
    let (mem, dir, model) = rotated(40);
    let c = chain(&mem);
    assert_eq!((c.first, c.sealed.len(), c.newest), (1, 1, 2));
    assert_eq!(c.sealed[0].last_seq, 40);
    let db = Db::open(dir.clone(), ro()).unwrap();
    assert_eq!(
        db.range(..).map(|r| r.unwrap()).collect::<BTreeMap<_, _>>(),
        model
    );
    drop(db);
    // Drop the last frame (one put: 12 + 12 + 17 bytes): whole frames remain.
    mem.open("wal-000001.log")
        .unwrap()
        .set_len(c.sealed[0].len - 41)
        .unwrap();
    let msg = corruption_naming(Db::open(dir.clone(), ro()), "wal-000001.log");
    assert!(msg.contains("byte offset"), "{msg}");
    corruption_naming(Db::open(dir, opts()), "wal-000001.log");
}

#[test]
fn swapped_segments_are_corruption() {
    let (mem, dir, _) = rotated(40);
    let a = mem.file("wal-000001.log").unwrap().contents();
    let b = mem.file("wal-000002.log").unwrap().contents();
    mem.create("wal-000001.log").unwrap().write_at(0, &b).unwrap();
    mem.create("wal-000002.log").unwrap().write_at(0, &a).unwrap();
    corruption_naming(Db::open(dir, opts()), "wal-000001.log");
}

#[test]
fn a_flipped_byte_in_the_last_frame_is_reported_or_refused() {
    let (mem, dir) = store(50);
    let f = mem.file("wal-000001.log").unwrap();
    let len = f.contents().len() as u64;
    f.corrupt_byte(len - 1);
    // Strict: refused, naming the file and the frame's byte offset.
    let msg = corruption_naming(Db::open(dir.clone(), strict()), "wal-000001.log");
    assert!(msg.contains(&format!("at byte offset {}", len - 41)), "{msg}");
    let msg = corruption_naming(
        Db::open(
            dir.clone(),
            Options {
                read_only: true,
                ..strict()
            },
        ),
        "wal-000001.log",
    );
    assert!(msg.contains("byte offset"), "{msg}");
    // Lenient: dropped, and said so.
    let db = Db::open(dir.clone(), ro()).unwrap();
    let st = db.stats().unwrap();
    assert_eq!((st.recovery_dropped_frames, st.recovery_dropped_bytes), (1, 41));
    assert_eq!(db.get(49).unwrap(), None);
    let e = db.verify(&mut |_| ()).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("wal-000001.log at byte offset {}", len - 41)),
        "{e}"
    );
    drop(db);
    let db = Db::open(dir.clone(), opts()).unwrap();
    let st = db.stats().unwrap();
    assert_eq!((st.recovery_dropped_frames, st.recovery_dropped_bytes), (1, 41));
    assert_eq!(db.get(48).unwrap(), Some(49));
    db.close().unwrap();
    // The writer truncated the frame: nothing more is dropped.
    let db = Db::open(dir, strict()).unwrap();
    assert_eq!(db.stats().unwrap().recovery_dropped_frames, 0);
    db.verify(&mut |_| ()).unwrap();
}

#[test]
fn a_crash_at_any_step_of_a_rotation_loses_nothing_acknowledged() {
    // Syncs of a rotation: the new header, the directory, the old segment,
    // the manifest's temporary file, the directory after its rename.
    for nth in 0..6 {
        for kind in [FaultKind::Eio, FaultKind::TornWrite] {
            let fd = FaultyDirectory::new();
            let dir: Arc<dyn Directory> = Arc::new(fd.clone());
            let db = Db::open(dir.clone(), opts()).unwrap();
            let mut model = BTreeMap::new();
            for k in 0..100 {
                db.put(k, k + 1).unwrap();
                model.insert(k, k + 1);
            }
            let op = if kind == FaultKind::Eio {
                FaultOp::Sync
            } else {
                FaultOp::Write
            };
            fd.plan().inject(op, nth, kind, false);
            let rotated = {
                let mut ms = db.inner.merge.lock();
                db.inner.freeze(&mut ms).is_ok()
            };
            fd.plan().clear();
            if rotated {
                for k in 100..110 {
                    db.put(k, k + 1).unwrap();
                    model.insert(k, k + 1);
                }
            }
            db.kill();
            fd.crash();
            let db = Db::open(dir.clone(), opts()).unwrap_or_else(|e| panic!("{nth} {kind:?}: {e}"));
            assert_eq!(
                db.range(..).map(|r| r.unwrap()).collect::<BTreeMap<_, _>>(),
                model,
                "{nth} {kind:?}"
            );
            db.put(1000, 1).unwrap();
            db.close().unwrap();
            let db = Db::open(dir, strict()).unwrap();
            assert_eq!(db.get(1000).unwrap(), Some(1));
            assert_eq!(db.stats().unwrap().recovery_dropped_frames, 0);
        }
    }
}

#[test]
fn a_crash_while_creating_a_store_leaves_no_store() {
    let mem = MemDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    // The first segment exists, its manifest does not.
    let c = crate::log::WalChain::new(3, 1);
    drop(crate::log::create_segment::<WalOp>(&mem, &c, 0, SyncPolicy::Always, &|s| s).unwrap());
    assert!(matches!(Db::open(dir.clone(), ro()), Err(Error::NotFound(_))));
    let db = Db::open(dir.clone(), opts()).unwrap();
    db.put(1, 2).unwrap();
    db.close().unwrap();
    assert_ne!(chain(&mem).store_id, 3);
    assert_eq!(Db::open(dir, ro()).unwrap().get(1).unwrap(), Some(2));
}
