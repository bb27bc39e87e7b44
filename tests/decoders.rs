//! Every decoder of bytes from storage returns an error, never panics, on
//! arbitrary or damaged input: property tests over random bytes and over
//! valid files with random bytes flipped or cut.

use std::sync::Arc;

use proptest::prelude::*;
use strata::format::{DataRun, PagedFile};
use strata::index::layered::{CprBand, layer_spec};
use strata::index::{self, BuildOptions, IndexSpec, OpenOptions, Residency};
use strata::model::LecoArray;
use strata::storage::{Directory, MemDirectory, MemStorage, Storage};

fn mem_file(bytes: &[u8]) -> Arc<dyn Storage> {
    let f = MemStorage::new("fuzz");
    f.write_at(0, bytes).unwrap();
    Arc::new(f)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn page_open_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..5000), page in any::<u64>()) {
        let _ = strata::format::page::open(&bytes, page, "fuzz");
    }

    #[test]
    fn paged_files_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..12_000)) {
        let f = mem_file(&bytes);
        if let Ok(run) = DataRun::open(f.clone()) {
            let _ = run.verify(&mut |_| {});
            let _ = run.read_pages(0, 3);
        }
        if let Ok(p) = PagedFile::open(f, layer_spec(0)) {
            let _ = p.read_all();
        }
    }

    #[test]
    fn blobs_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = LecoArray::from_bytes(&bytes);
        let _ = CprBand::from_bytes(&bytes, "fuzz");
    }
}

/// A small index of `kind` in memory, then damaged copies of each file:
/// opening and looking up either works or returns an error.
fn damage_each_file(spec: &str) {
    let keys: Vec<u64> = (0..3000u64).map(|i| i * i + 11).collect();
    let dir = MemDirectory::new();
    let s: IndexSpec = spec.parse().unwrap();
    index::build_in(
        &s,
        index::Records::ranked(&keys),
        Arc::new(dir.clone()),
        &BuildOptions::default(),
    )
    .unwrap();
    let names = dir.list().unwrap();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for name in names {
        let original = dir.file(&name).unwrap().contents();
        for round in 0..24 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let f = dir.file(&name).unwrap();
            f.set_len(0).unwrap();
            let mut damaged = original.clone();
            if round % 3 == 0 && !damaged.is_empty() {
                damaged.truncate((rng as usize) % damaged.len());
            } else if !damaged.is_empty() {
                let at = (rng >> 16) as usize % damaged.len();
                damaged[at] ^= 1 << (rng % 8);
            }
            f.write_at(0, &damaged).unwrap();
            let mut detected = false;
            for resident in [Residency::Index, Residency::None] {
                let opts = OpenOptions {
                    resident,
                    ..Default::default()
                };
                match index::open_in(Arc::new(dir.clone()), &opts) {
                    Ok(idx) => {
                        for &k in keys.iter().step_by(97) {
                            let _ = idx.get(k);
                            let mut out = Vec::new();
                            let _ = idx.scan(k, 300, &mut out);
                        }
                        detected |= idx.verify(&mut |_| {}).is_err();
                    }
                    Err(_) => detected = true,
                }
            }
            // Every byte of a strata file is covered by a checksum or a
            // length check (the JSON manifest may still parse after a flip).
            if name != index::MANIFEST_FILE {
                assert!(
                    detected,
                    "{spec}: damage to {name} (round {round}) went unnoticed"
                );
            }
        }
        let f = dir.file(&name).unwrap();
        f.set_len(0).unwrap();
        f.write_at(0, &original).unwrap();
    }
}

#[test]
fn damaged_index_files_give_errors_not_panics() {
    for spec in [
        "binary",
        "btree",
        "zonemap",
        "leco-zonemap-d",
        "pgm:epsilon=8",
        "pgm-disk-cpr:epsilon=16",
        "rs:epsilon=8,radix_bits=8",
        "rmi:models=16",
        "fiting-static:epsilon=8",
    ] {
        damage_each_file(spec);
    }
}
