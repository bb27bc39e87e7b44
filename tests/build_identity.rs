//! Issue 16, failure 5: a file copied in from another build of the same
//! kind and size is `Error::Corruption` naming it, on open and so on verify,
//! never a wrong answer. Each test builds two directories that differ only
//! in their build (the same kind, page size and record count; other keys),
//! copies one file across, and checks open.
//!
//! On a97175a each of these opened: `verify` said ok and `get` answered
//! "not found" for present keys (or another build's values).

use std::path::Path;

use strata::Error;
use strata::db::{Db, Options, StaticKind};
use strata::index::{BuildOptions, IndexSpec, MANIFEST_FILE};

fn keys(stride: u64) -> Vec<u64> {
    (0..20_000u64).map(|i| i * stride + 1).collect()
}

fn build(spec: &str, keys: &[u64], path: &Path) {
    let s: IndexSpec = spec.parse().unwrap();
    strata::registry::build(&s, keys, path, &BuildOptions::default()).unwrap();
}

/// Builds `spec` twice, copies `file` of the second build into the first,
/// and returns the error opening the first gives.
fn swap_and_open(spec: &str, file: &str) -> Error {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    build(spec, &keys(3), &a);
    build(spec, &keys(7), &b);
    std::fs::copy(b.join(file), a.join(file)).unwrap();
    match strata::registry::open(&a, &Default::default()) {
        Ok(idx) => panic!(
            "{spec}: opened with {file} of another build; get(4) = {:?}, verify = {:?}",
            idx.get(4),
            idx.verify(&mut |_| {})
        ),
        Err(e) => e,
    }
}

fn assert_names_foreign(e: &Error, file: &str) {
    match e {
        Error::Corruption { file: f, detail, .. } => {
            assert!(f.ends_with(file), "{e}");
            assert!(detail.contains("another build"), "{e}");
        }
        other => panic!("expected corruption in {file}, got {other}"),
    }
}

#[test]
fn data_run_of_another_build_is_corruption() {
    // `air` designs no layer over so few keys: its data run is the test.
    for spec in ["binary", "pgm", "pgm-disk-cpr", "zonemap", "air"] {
        let e = swap_and_open(spec, "data.run");
        assert_names_foreign(&e, "data.run");
    }
}

#[test]
fn layer_file_of_another_build_is_corruption() {
    for spec in ["pgm", "rs", "btree-static", "pgm-disk-cpr", "leco-zonemap"] {
        let e = swap_and_open(spec, "layer-0.bin");
        assert_names_foreign(&e, "layer-0.bin");
    }
}

#[test]
fn btree_file_of_another_build_is_corruption() {
    let e = swap_and_open("btree", "btree.db");
    assert_names_foreign(&e, "btree.db");
}

/// The build's own files open, and its manifest records the build id.
#[test]
fn the_build_s_own_files_open() {
    let tmp = tempfile::tempdir().unwrap();
    let ks = keys(3);
    build("pgm", &ks, tmp.path());
    let idx = strata::registry::open(tmp.path(), &Default::default()).unwrap();
    assert_eq!(idx.get(ks[5]).unwrap(), Some(5));
    assert!(idx.verify(&mut |_| {}).is_ok());
    drop(idx);
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join(MANIFEST_FILE)).unwrap()).unwrap();
    assert!(m["build_id"].as_u64().unwrap() > 0, "{m}");
}

/// A generation file copied from another store (same spec, same size) is
/// corruption naming it when the store opens.
#[test]
fn db_generation_file_of_another_store_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let opts = Options {
        static_kind: StaticKind::Spec("pgm".into()),
        ..Options::default()
    };
    for (path, stride) in [(&a, 3), (&b, 7)] {
        let dir = strata::storage::FsDirectory::create_all(path).unwrap();
        Db::bulk_load(&dir, &opts, keys(stride).into_iter().map(|k| (k, k))).unwrap();
    }
    for file in ["g000001-data.run", "g000001-layer-0.bin"] {
        let saved = std::fs::read(a.join(file)).unwrap();
        std::fs::copy(b.join(file), a.join(file)).unwrap();
        match Db::open_path(&a, opts.clone()) {
            Ok(db) => panic!("opened with {file} of another store: get(4) = {:?}", db.get(4)),
            Err(e) => assert_names_foreign(&e, file),
        }
        std::fs::write(a.join(file), saved).unwrap();
    }
    // The whole generation, its index manifest included: the store's
    // manifest records the generation's build id.
    let names: Vec<String> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("g000001-"))
        .collect();
    assert!(names.len() >= 3, "{names:?}");
    let saved: Vec<Vec<u8>> = names.iter().map(|n| std::fs::read(a.join(n)).unwrap()).collect();
    for n in &names {
        std::fs::copy(b.join(n), a.join(n)).unwrap();
    }
    match Db::open_path(&a, opts.clone()) {
        Ok(db) => panic!(
            "opened with generation 1 of another store: get(4) = {:?}",
            db.get(4)
        ),
        Err(e) => assert_names_foreign(&e, "g000001-strata-index.json"),
    }
    for (n, bytes) in names.iter().zip(saved) {
        std::fs::write(a.join(n), bytes).unwrap();
    }
    let db = Db::open_path(&a, opts).unwrap();
    assert_eq!(db.get(4).unwrap(), Some(4));
}

/// Zeroes the build id in the header page of `path` (page size `page`)
/// and reseals it: the file as written before build ids.
fn strip_build_id(path: &Path, page: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let hdr = &mut bytes[..page];
    hdr[8..16].fill(0);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&0u64.to_le_bytes()), &hdr[4..]);
    hdr[..4].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// A directory from before build ids (no `build_id` in its manifest, 0 in
/// every header) still opens and answers; one of its files in a directory
/// with a build id, or a file with one in it, is corruption.
#[test]
fn directories_from_before_build_ids_still_open() {
    for spec in ["pgm", "btree", "binary"] {
        let tmp = tempfile::tempdir().unwrap();
        let ks = keys(3);
        build(spec, &ks, tmp.path());
        let mpath = tmp.path().join(MANIFEST_FILE);
        let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
        let files: Vec<String> = m["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect();
        // One file stripped: it no longer belongs to the build.
        strip_build_id(&tmp.path().join(&files[0]), 4096);
        let e = strata::registry::open(tmp.path(), &Default::default())
            .err()
            .unwrap();
        assert_names_foreign(&e, &files[0]);
        // Every file and the manifest stripped: an old directory.
        for f in &files[1..] {
            strip_build_id(&tmp.path().join(f), 4096);
        }
        m.as_object_mut().unwrap().remove("build_id").unwrap();
        std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
        let idx = strata::registry::open(tmp.path(), &Default::default()).unwrap();
        assert_eq!(idx.get(ks[7]).unwrap(), Some(7), "{spec}");
        assert!(idx.verify(&mut |_| {}).is_ok(), "{spec}");
        drop(idx);
        // A file of a newer build in the old directory: corruption.
        let other = tempfile::tempdir().unwrap();
        build(spec, &ks, other.path());
        std::fs::copy(other.path().join(&files[0]), tmp.path().join(&files[0])).unwrap();
        let e = strata::registry::open(tmp.path(), &Default::default())
            .err()
            .unwrap();
        assert_names_foreign(&e, &files[0]);
    }
}
