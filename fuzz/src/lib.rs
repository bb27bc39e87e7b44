//! The bodies of strata's fuzz targets, one function per decoder: each takes
//! the fuzzer's bytes, builds what the decoder reads (recomputing the CRCs
//! that guard it, so mutations reach the parser), calls the decoder through
//! a stable entry point and exercises what it returns. A decoder may return
//! `Ok` or `Err`; a panic is a bug. Round-trip checks (decode → encode →
//! decode gives the same encoding) panic on a mismatch.
//!
//! `fuzz_targets/<name>.rs` calls [`run`]`("<name>", data)`; the seed
//! generator (`src/bin/seeds.rs`) writes valid encodings from [`seeds`] and
//! runs each through its target.

use std::sync::{Arc, OnceLock};

use strata::db::{DbManifest, WalOp};
use strata::format::{DataRun, KeyFileOptions, KeyReader, KeyWidth, PagedFile, page};
use strata::index::layered::{CprBand, layer_spec};
use strata::index::{self, OpenOptions, Residency};
use strata::log::{WAL_HEADER_LEN, WAL_MAGIC, WAL_VERSION};
use strata::model::{DeltaArray, GapArray, LecoArray, RadixSpline, Rmi};
use strata::pager::{Checkpoint, FileId};
use strata::storage::{Directory, MemDirectory, MemStorage, Storage};

/// The test suite's shared helpers (index builds in memory).
#[path = "../../tests/common/mod.rs"]
mod common;
mod seeds;
pub use seeds::seeds;

/// Every target, in the order `scripts/fuzz.sh` runs them.
pub const TARGETS: &[&str] = &[
    "page",
    "paged_header",
    "datarun",
    "leco",
    "gapcode",
    "delta",
    "rmi",
    "radix_spline",
    "cpr_band",
    "bitpack",
    "btree_leaf",
    "btree_inner",
    "pager_checkpoint",
    "wal",
    "db_manifest",
    "index_manifest",
    "sosd",
    "index_dir",
    "sstable",
];

/// Runs target `name` on `data`. Panics on an unknown name.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "page" => page_target(data),
        "paged_header" => paged_header(data),
        "datarun" => datarun(data),
        "leco" => codec(data, LecoArray::from_bytes, LecoArray::to_bytes, |a| {
            (0..a.len().min(4096)).for_each(|i| {
                std::hint::black_box(a.get(i));
            })
        }),
        "gapcode" => codec(data, GapArray::from_bytes, GapArray::to_bytes, |a| {
            (0..a.len().min(4096)).for_each(|i| {
                std::hint::black_box(a.get(i));
            })
        }),
        "delta" => codec(data, DeltaArray::from_bytes, DeltaArray::to_bytes, |a| {
            (0..a.len().min(4096)).for_each(|i| {
                std::hint::black_box(a.get(i));
            })
        }),
        "rmi" => codec(data, Rmi::from_bytes, Rmi::to_bytes, |m| {
            probe_keys(data).for_each(|k| {
                std::hint::black_box((m.predict_range(k), m.predict(k)));
            })
        }),
        "radix_spline" => codec(data, RadixSpline::from_bytes, RadixSpline::to_bytes, |m| {
            probe_keys(data).for_each(|k| {
                std::hint::black_box((m.predict_range(k), m.approx(k)));
            })
        }),
        "cpr_band" => codec(
            data,
            |b| CprBand::from_bytes(b, "fuzz"),
            CprBand::to_bytes,
            |c| {
                (0..c.len().min(4096)).for_each(|j| {
                    std::hint::black_box(c.entry(j));
                });
                probe_keys(data).for_each(|k| {
                    std::hint::black_box(c.find(k));
                });
            },
        ),
        "bitpack" => {
            if let Ok(same) = strata::fuzzing::bitpack_roundtrip(data) {
                assert!(same, "packed integers: round trip differs");
            }
        }
        "btree_leaf" => node(data, strata::fuzzing::btree_leaf_roundtrip),
        "btree_inner" => node(data, strata::fuzzing::btree_inner_roundtrip),
        "pager_checkpoint" => pager_checkpoint(data),
        "wal" => wal(data),
        "db_manifest" => db_manifest(data),
        "index_manifest" => index_manifest(data),
        "sosd" => sosd(data),
        "index_dir" => index_dir(data),
        "sstable" => {
            let _ = strata::fuzzing::sstable_open(data);
        }
        other => panic!("no fuzz target {other}"),
    }
}

/// A few lookup keys: the boundaries and words of the input.
fn probe_keys(data: &[u8]) -> impl Iterator<Item = u64> + '_ {
    [0, 1, u64::MAX / 2, u64::MAX].into_iter().chain(
        data.chunks_exact(8)
            .take(16)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))),
    )
}

/// A blob codec: decode, exercise, and check that re-encoding is stable.
fn codec<T, E>(
    data: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, E>,
    encode: impl Fn(&T) -> Vec<u8>,
    use_it: impl Fn(&T),
) {
    let Ok(value) = decode(data) else { return };
    use_it(&value);
    let bytes = encode(&value);
    let again = match decode(&bytes) {
        Ok(v) => v,
        Err(_) => panic!("the encoding of a decoded value does not decode"),
    };
    assert!(encode(&again) == bytes, "round trip changes the encoding");
}

/// The page checksum (`docs/format/page.md`): crc32c of the page number as
/// u64 LE followed by bytes `4..` of the page.
pub fn page_crc(page_no: u64, page: &[u8]) -> u32 {
    let seed = crc32c::crc32c(&page_no.to_le_bytes());
    crc32c::crc32c_append(seed, page.get(4..).unwrap_or(&[]))
}

/// Recomputes the checksum of every whole page of `bytes` (pages of
/// `page_size`), so that damaged contents reach the page's parser.
pub fn reseal(bytes: &mut [u8], page_size: usize) {
    for (no, p) in bytes.chunks_mut(page_size.max(16)).enumerate() {
        if p.len() >= page::PAGE_HEADER_LEN {
            let crc = page_crc(no as u64, p);
            p[..4].copy_from_slice(&crc.to_le_bytes());
        }
    }
}

/// The page size a paged file's header claims (byte 28), if supported.
fn claimed_page_size(bytes: &[u8], at: usize) -> usize {
    let v = bytes
        .get(at..at + 4)
        .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as usize);
    if page::check_page_size(v).is_ok() { v } else { 4096 }
}

fn mem(name: &str, bytes: &[u8]) -> Arc<MemStorage> {
    let f = MemStorage::new(name);
    if !bytes.is_empty() {
        f.write_at(0, bytes).unwrap();
    }
    Arc::new(f)
}

/// Input: page number u64 | page bytes. The checksum is recomputed unless
/// the page number's top bit is set.
fn page_target(data: &[u8]) {
    if data.len() < 8 {
        return;
    }
    let raw_no = u64::from_le_bytes(data[..8].try_into().unwrap());
    let no = raw_no & (u64::MAX >> 1);
    let mut p = data[8..].to_vec();
    if raw_no >> 63 == 0 && p.len() >= 4 {
        let crc = page_crc(no, &p);
        p[..4].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok(h) = page::open(&p, no, "fuzz") {
        assert!(page::open_typed(&p, no, "fuzz", h.kind).is_ok());
    }
}

/// Input: a whole paged file (header page first), pages resealed at the page
/// size its header claims.
fn paged_header(data: &[u8]) {
    let mut bytes = data.to_vec();
    let page_size = claimed_page_size(&bytes, 28);
    reseal(&mut bytes, page_size);
    for layer in 0..2 {
        if let Ok(f) = PagedFile::open(mem("layer.bin", &bytes), layer_spec(layer)) {
            let pages = f.meta().pages;
            let _ = f.read_all();
            let _ = f.verify(&mut |_| {});
            if let Ok(run) = f.read_pages(0, pages.min(4)) {
                let (lo, hi) = run.entry_range();
                for i in lo..hi.min(lo + 64) {
                    let _ = (run.entry(i), run.u64_at(i, 0), run.u64_at(i, 1));
                }
                for d in 0..pages.min(4) {
                    let _ = run.aux_of_page(d);
                }
            }
            let n = f.meta().count;
            let _ = f.read_entries(n / 2, n);
        }
    }
}

/// Input: a whole data run, pages resealed.
fn datarun(data: &[u8]) {
    let mut bytes = data.to_vec();
    let page_size = claimed_page_size(&bytes, 28);
    reseal(&mut bytes, page_size);
    let Ok(run) = DataRun::open(mem("data.run", &bytes)) else {
        return;
    };
    let _ = run.verify(&mut |_| {});
    let pages = run.meta().pages;
    let _ = run.read_page(pages.saturating_sub(1));
    if let Ok(pr) = run.read_pages(0, pages.min(4)) {
        let (lo, hi) = pr.item_range();
        for i in lo..hi.min(lo + 64) {
            let _ = (pr.key(i), pr.record(i));
        }
        let _ = pr.lower_bound(run.meta().first_key, lo, hi);
        let _ = pr.lower_bound(u64::MAX, lo, hi);
    }
}

/// Input: page number u8 | page bytes (4096 or more), checksum recomputed.
fn node(data: &[u8], roundtrip: fn(&[u8], u64) -> strata::Result<bool>) {
    let Some((&no, rest)) = data.split_first() else {
        return;
    };
    let mut p = rest.to_vec();
    let no = u64::from(no);
    if p.len() >= 4 {
        let crc = page_crc(no, &p);
        p[..4].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok(same) = roundtrip(&p, no) {
        assert!(same, "B+-tree node: round trip differs");
    }
}

/// Input: a pager file (checkpoint page first), pages resealed; read with
/// the file id it claims and as a B+-tree.
fn pager_checkpoint(data: &[u8]) {
    let mut bytes = data.to_vec();
    let page_size = claimed_page_size(&bytes, 28);
    reseal(&mut bytes, page_size);
    let f = mem("btree.db", &bytes);
    let word = |at: usize| {
        bytes
            .get(at..at + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    let id = FileId {
        magic: word(16),
        version: word(24) as u32,
        what: "fuzzed file",
    };
    if let Ok(cp) = Checkpoint::load(f.as_ref(), &id) {
        let _ = cp.check_file(f.as_ref());
        let mut again = vec![0u8; cp.page_size];
        cp.encode(&id, &mut again);
        let cp2 = Checkpoint::load(mem("again", &again).as_ref(), &id).unwrap();
        assert_eq!(cp2, cp, "checkpoint round trip differs");
    }
    let _ = strata::fuzzing::btree_meta(f.as_ref());
}

/// Input: flags u8 | the segment header after magic and version |
/// frames as (payload length u16 | payload) | with flag 2, a raw tail.
/// Frame checksums are computed here; flag 1 replays the segment as the
/// newest one, flag 4 damages the magic.
pub fn wal_segment(data: &[u8]) -> (Vec<u8>, bool) {
    let Some((&flags, mut rest)) = data.split_first() else {
        return (Vec::new(), true);
    };
    let mut seg = Vec::new();
    seg.extend_from_slice(&WAL_MAGIC.to_le_bytes());
    if flags & 4 != 0 {
        seg[0] ^= 1;
    }
    seg.extend_from_slice(&WAL_VERSION.to_le_bytes());
    let fill = (WAL_HEADER_LEN as usize)
        .saturating_sub(seg.len())
        .min(rest.len());
    seg.extend_from_slice(&rest[..fill]);
    rest = &rest[fill..];
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let body = &rest[2..];
        if len > body.len() {
            break;
        }
        let (payload, tail) = body.split_at(len);
        seg.extend_from_slice(&(len as u32).to_le_bytes());
        seg.extend_from_slice(&crc32c::crc32c(&(len as u32).to_le_bytes()).to_le_bytes());
        seg.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        seg.extend_from_slice(payload);
        rest = tail;
    }
    if flags & 2 != 0 {
        seg.extend_from_slice(rest);
    }
    (seg, flags & 1 != 0)
}

fn wal(data: &[u8]) {
    let (seg, last) = wal_segment(data);
    let f = mem("wal-000001.log", &seg);
    if let Ok(r) = strata::log::replay::<WalOp>(f.as_ref(), last) {
        assert!(r.valid_len + r.torn_bytes <= seg.len() as u64);
    }
}

/// Input: mode u8 | bytes. An even mode wraps the bytes as the JSON payload
/// of a valid manifest header (magic, version, length, crc32c).
fn db_manifest(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = if mode % 2 == 0 {
        wrap_manifest(rest)
    } else {
        rest.to_vec()
    };
    if let Ok(m) = strata::log::manifest::decode::<DbManifest>(&bytes, "MANIFEST") {
        let again = strata::log::manifest::encode(&m).unwrap();
        let m2 = strata::log::manifest::decode::<DbManifest>(&again, "MANIFEST").unwrap();
        assert!(
            strata::log::manifest::encode(&m2).unwrap() == again,
            "db manifest round trip differs"
        );
    }
}

/// A db manifest file around `payload`.
pub fn wrap_manifest(payload: &[u8]) -> Vec<u8> {
    use strata::log::Manifest;
    let mut out = Vec::new();
    out.extend_from_slice(&DbManifest::MAGIC.to_le_bytes());
    out.extend_from_slice(&DbManifest::VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Input: the JSON of an index manifest.
fn index_manifest(data: &[u8]) {
    let dir = MemDirectory::new();
    dir.create(index::MANIFEST_FILE)
        .unwrap()
        .write_at(0, data)
        .unwrap();
    if let Ok(m) = index::Manifest::load(&dir) {
        let again = MemDirectory::new();
        m.store(&again).unwrap();
        let m2 = index::Manifest::load(&again).unwrap();
        assert_eq!(
            serde_json::to_string(&m2).unwrap(),
            serde_json::to_string(&m).unwrap()
        );
    }
}

/// Input: the bytes of a SOSD key file, read at each width.
fn sosd(data: &[u8]) {
    static PATH: OnceLock<std::path::PathBuf> = OnceLock::new();
    let path = PATH.get_or_init(|| {
        let dir = std::env::var_os("TMPDIR").map_or_else(|| "/tmp".into(), std::path::PathBuf::from);
        dir.join(format!("strata-fuzz-sosd-{}.keys", std::process::id()))
    });
    std::fs::write(path, data).unwrap();
    for width in [KeyWidth::Auto, KeyWidth::U64, KeyWidth::U32] {
        for dedup in [false, true] {
            if let Ok(r) = KeyReader::open(path, KeyFileOptions { width, dedup }) {
                let total = r.total();
                let n = r.take(100_000).filter(Result::is_ok).count() as u64;
                assert!(n <= total);
            }
        }
    }
}

/// The index kinds of the `index_dir` target.
pub const INDEX_KINDS: &[&str] = &[
    "btree",
    "binary",
    "zonemap",
    "pgm:epsilon=8",
    "pgm-disk-cpr:epsilon=16",
    "rs:epsilon=8,radix_bits=8",
    "rmi:models=16",
    "leco-zonemap-d",
];

/// Keys of the built indexes.
pub fn index_keys() -> Vec<u64> {
    (0..300u64).map(|i| i * i * 7 + 3).collect()
}

/// The files of an index directory: (name, bytes), sorted by name.
pub type IndexFiles = Vec<(String, Vec<u8>)>;

/// The files of a small index of each of [`INDEX_KINDS`].
pub fn built_indexes() -> &'static [IndexFiles] {
    static BUILT: OnceLock<Vec<IndexFiles>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let keys = index_keys();
        INDEX_KINDS
            .iter()
            .map(|spec| {
                let dir = common::build_in_memory(spec, &keys);
                let mut names = dir.list().unwrap();
                names.sort();
                names
                    .into_iter()
                    .map(|n| (n.clone(), dir.file(&n).unwrap().contents()))
                    .collect()
            })
            .collect()
    })
}

/// Input: kind u8 | file u8 | the file's new bytes. The other files are the
/// built index's; paged files get their page checksums recomputed. Opening
/// (both residencies), every lookup, a scan and verify must not panic.
fn index_dir(data: &[u8]) {
    let [kind, file, body @ ..] = data else { return };
    let built = built_indexes();
    let files = &built[usize::from(*kind) % built.len()];
    let target = usize::from(*file) % files.len();
    let dir = MemDirectory::new();
    for (i, (name, bytes)) in files.iter().enumerate() {
        let mut b = if i == target { body.to_vec() } else { bytes.clone() };
        if i == target && name != index::MANIFEST_FILE {
            reseal(&mut b, 4096);
        }
        let f = dir.create(name).unwrap();
        if !b.is_empty() {
            f.write_at(0, &b).unwrap();
        }
    }
    for resident in [Residency::Index, Residency::None] {
        let opts = OpenOptions {
            resident,
            ..Default::default()
        };
        let Ok(idx) = strata::registry::open_in(Arc::new(dir.clone()), &opts) else {
            continue;
        };
        for k in index_keys().into_iter().step_by(7) {
            let _ = idx.get(k);
            let _ = idx.lower_bound(k + 1);
        }
        let mut out = Vec::new();
        let _ = idx.scan(0, 400, &mut out);
        let _ = idx.verify(&mut |_| {});
    }
}
