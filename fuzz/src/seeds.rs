//! Valid encodings for each target's seed corpus.

use std::sync::Arc;

use strata::Db;
use strata::db::Options;
use strata::format::sosd::write_keys_u32;
use strata::format::{PagedFile, write_keys};
use strata::index::layered::{CprBand, layer_spec};
use strata::model::{DeltaArray, GapArray, LecoArray, RadixSpline, Rmi};
use strata::storage::{Directory, MemDirectory};

use crate::{INDEX_KINDS, built_indexes, index_keys};

/// Largest seed file committed.
pub const MAX_SEED: usize = 16 * 1024;

/// The files of the index of kind `spec` named like `prefix*`.
fn files_of(spec: &str, prefix: &str) -> Vec<Vec<u8>> {
    let i = INDEX_KINDS.iter().position(|k| *k == spec).unwrap();
    built_indexes()[i]
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(_, b)| b.clone())
        .collect()
}

/// The blobs held by the layer files of `spec` (the bytes a blob codec reads).
fn blobs_of(spec: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for bytes in files_of(spec, "layer-") {
        for layer in 0..2 {
            let f = crate::mem("layer.bin", &bytes);
            if let Ok((b, _)) = PagedFile::open(f, layer_spec(layer)).and_then(|p| p.read_all()) {
                out.push(b);
            }
        }
    }
    out
}

/// Seeds for every target in [`crate::TARGETS`]: (target, inputs).
pub fn seeds() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let keys = index_keys();
    let values: Vec<u64> = keys.iter().map(|k| k / 3).collect();
    let mut out: Vec<(&'static str, Vec<Vec<u8>>)> = Vec::new();

    let runs = files_of("binary", "data.run");
    let mut pages = Vec::new();
    for run in &runs {
        for (no, p) in run.chunks(4096).enumerate().take(2) {
            let mut s = (no as u64).to_le_bytes().to_vec();
            s.extend_from_slice(p);
            pages.push(s);
        }
    }
    out.push(("page", pages));
    let mut layers = files_of("pgm:epsilon=8", "layer-");
    layers.extend(files_of("zonemap", "layer-"));
    out.push(("paged_header", layers));
    out.push(("datarun", runs));

    let mut leco = vec![
        LecoArray::encode(&values).to_bytes(),
        LecoArray::encode(&[]).to_bytes(),
    ];
    leco.extend(
        blobs_of("leco-zonemap-d")
            .into_iter()
            .filter(|b| LecoArray::from_bytes(b).is_ok()),
    );
    out.push(("leco", leco));
    out.push(("gapcode", vec![GapArray::encode(&keys).unwrap().to_bytes()]));
    out.push(("delta", vec![DeltaArray::encode(&keys).unwrap().to_bytes()]));
    out.push((
        "rmi",
        vec![
            Rmi::build(&keys, 4).unwrap().to_bytes(),
            Rmi::build(&keys[..10], 1).unwrap().to_bytes(),
        ],
    ));
    out.push((
        "radix_spline",
        vec![RadixSpline::build(&keys, 8, 6).unwrap().to_bytes()],
    ));
    let cpr: Vec<Vec<u8>> = blobs_of("pgm-disk-cpr:epsilon=16")
        .into_iter()
        .filter(|b| CprBand::from_bytes(b, "seed").is_ok())
        .collect();
    out.push(("cpr_band", cpr));
    out.push((
        "bitpack",
        vec![
            strata::fuzzing::bitpack_encode(&[5, -3, 1 << 40, 0, 7]),
            strata::fuzzing::bitpack_encode(&[1, 2, 3]),
        ],
    ));

    let records: Vec<(u64, u64)> = keys.iter().take(100).map(|&k| (k, k / 3)).collect();
    let mut leaf = vec![3u8];
    leaf.extend(strata::fuzzing::btree_leaf_page(4096, 3, &records, 4).unwrap());
    out.push(("btree_leaf", vec![leaf]));
    let mut inner = vec![7u8];
    inner.extend(strata::fuzzing::btree_inner_page(4096, 7, &[100, 2000, 30000], &[1, 2, 3, 4]).unwrap());
    out.push(("btree_inner", vec![inner]));
    out.push(("pager_checkpoint", files_of("btree", "btree.db")));

    // flags 3: newest segment, raw tail; header rest; two frames.
    let mut wal = vec![3u8];
    wal.extend(std::iter::repeat_n(
        0u8,
        (strata::log::WAL_HEADER_LEN as usize).saturating_sub(12),
    ));
    for (seq, ops) in [(1u64, vec![(1u8, 5u64, 50u64), (2, 6, 0)]), (2, vec![(1, 7, 70)])] {
        let mut payload = seq.to_le_bytes().to_vec();
        payload.extend((ops.len() as u32).to_le_bytes());
        for (tag, k, v) in ops {
            payload.push(tag);
            payload.extend(k.to_le_bytes());
            payload.extend(v.to_le_bytes());
        }
        wal.extend((payload.len() as u16).to_le_bytes());
        wal.extend(payload);
    }
    wal.extend([9, 0, 1, 2]);
    out.push(("wal", vec![wal]));

    let dir = MemDirectory::new();
    let db = Db::open(Arc::new(dir.clone()), Options::default()).unwrap();
    for &k in keys.iter().take(50) {
        db.put(k, k + 1).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let mut manifests = Vec::new();
    for name in dir.list().unwrap() {
        if name.ends_with(".manifest") {
            let bytes = dir.file(&name).unwrap().contents();
            let mut s = vec![0u8];
            s.extend_from_slice(bytes.get(20..).unwrap_or_default());
            manifests.push(s);
            let mut raw = vec![1u8];
            raw.extend(bytes);
            manifests.push(raw);
        }
    }
    out.push(("db_manifest", manifests));
    out.push(("index_manifest", files_of("btree", strata::index::MANIFEST_FILE)));

    let tmp = std::env::temp_dir().join(format!("strata-seeds-{}.keys", std::process::id()));
    write_keys(&tmp, &keys).unwrap();
    let k64 = std::fs::read(&tmp).unwrap();
    write_keys_u32(&tmp, &keys[..100]).unwrap();
    let k32 = std::fs::read(&tmp).unwrap();
    let _ = std::fs::remove_file(&tmp);
    out.push(("sosd", vec![k64, k32]));

    let mut dirs = Vec::new();
    for (k, files) in built_indexes().iter().enumerate() {
        for (f, (_, bytes)) in files.iter().enumerate() {
            let mut s = vec![k as u8, f as u8];
            s.extend_from_slice(bytes);
            dirs.push(s);
        }
    }
    out.push(("index_dir", dirs));
    out.push((
        "sstable",
        ["fp", "pgm", "rs", "gap-zonemap-d"]
            .iter()
            .map(|kind| strata::fuzzing::sstable_seed(kind, 120).unwrap())
            .collect(),
    ));
    for (_, inputs) in &mut out {
        inputs.retain(|b| b.len() <= MAX_SEED);
    }
    out
}
