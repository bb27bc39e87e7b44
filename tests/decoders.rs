//! Every decoder of bytes from storage returns an error, never panics, on
//! arbitrary or damaged input: property tests over random bytes and over
//! valid files with random bytes flipped or cut; log segments of the `db`
//! store replay to a prefix of what was written (a torn tail dropped) or fail
//! with a typed error.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

mod common;
use strata::db::{Db, Options as DbOptions, SyncPolicy, WalOp, wal_id};
use strata::db::{WalWriter, replay};
use strata::format::{DataRun, PagedFile};
use strata::index::layered::{CprBand, layer_spec};
use strata::index::{self, OpenOptions, Residency};
use strata::log::{WAL_HEADER_LEN, WAL_MAGIC, WAL_VERSION_1};
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
    let dir = common::build_in_memory(spec, &keys);
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
                match strata::registry::open_in(Arc::new(dir.clone()), &opts) {
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
        "dpgm:buffer=64",
        "zonemap",
        "leco-zonemap-d",
        "pgm:epsilon=8",
        "pgm-disk-cpr:epsilon=16",
        "rs:epsilon=8,radix_bits=8",
        "rmi:models=16",
        "fiting-static:epsilon=8",
        "lipp",
    ] {
        damage_each_file(spec);
    }
}

/// Segment bytes of `batches` written through the log writer.
fn wal_bytes(batches: &[Vec<(u8, u64, u64)>]) -> (Vec<u8>, Vec<Vec<WalOp>>) {
    let f: Arc<dyn Storage> = Arc::new(MemStorage::new("wal"));
    let w = WalWriter::create(f.clone(), SyncPolicy::Always).unwrap();
    let mut written = Vec::new();
    for (seq, b) in batches.iter().enumerate() {
        let ops: Vec<WalOp> = b
            .iter()
            .map(|&(t, k, v)| {
                if t % 4 == 0 {
                    WalOp::Delete(k)
                } else {
                    WalOp::Put(k, v)
                }
            })
            .collect();
        w.append(seq as u64 + 1, &ops).unwrap();
        written.push(ops);
    }
    let mut bytes = vec![0u8; f.len().unwrap() as usize];
    f.read_at(0, &mut bytes).unwrap();
    (bytes, written)
}

/// Replays `bytes` as the newest (`last`) or an older segment and checks the
/// contract: Ok with a consistent valid prefix and torn tail, or a typed error.
/// Returns the batches when replay succeeded.
fn replay_checked(bytes: &[u8], last: bool) -> Option<Vec<Vec<WalOp>>> {
    match replay(mem_file(bytes).as_ref(), last) {
        Ok(r) => {
            let len = bytes.len() as u64;
            assert!(
                r.valid_len <= len,
                "valid prefix {} past the end {len}",
                r.valid_len
            );
            if last {
                assert_eq!(r.valid_len + r.torn_bytes, len, "valid prefix + torn tail = file");
            } else {
                assert_eq!(r.torn_bytes, 0, "only the newest segment may drop a torn tail");
                assert_eq!(r.valid_len, len);
            }
            Some(r.batches.into_iter().map(|b| b.ops).collect())
        }
        Err(
            strata::Error::Corruption { .. }
            | strata::Error::CorruptionAt { .. }
            | strata::Error::BadMagic { .. }
            | strata::Error::UnsupportedVersion { .. }
            | strata::Error::Truncated { .. },
        ) => None,
        Err(e) => panic!("replay gave an untyped error: {e:?}"),
    }
}

fn arb_batches() -> impl Strategy<Value = Vec<Vec<(u8, u64, u64)>>> {
    proptest::collection::vec(
        proptest::collection::vec((any::<u8>(), 0..64u64, any::<u64>()), 1..6),
        0..12,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    /// Random bytes, with or without a valid segment header in front.
    #[test]
    fn wal_replay_of_random_bytes_never_panics(
        body in proptest::collection::vec(any::<u8>(), 0..3000),
        header in any::<bool>(),
        last in any::<bool>(),
    ) {
        let mut bytes = Vec::new();
        if header {
            bytes.extend_from_slice(&WAL_MAGIC.to_le_bytes());
            // A version-1 header (16 bytes, no checksum) lets random bodies
            // reach the frame parser.
            bytes.extend_from_slice(&WAL_VERSION_1.to_le_bytes());
            bytes.extend_from_slice(&0u32.to_le_bytes());
        }
        bytes.extend_from_slice(&body);
        replay_checked(&bytes, last);
    }

    /// A valid segment cut anywhere (a torn append): replay of the newest
    /// segment succeeds with a prefix of the batches; an older segment cut
    /// inside a frame is an error.
    #[test]
    fn wal_replay_drops_a_torn_tail(batches in arb_batches(), cut in any::<u64>()) {
        let (bytes, written) = wal_bytes(&batches);
        let cut = WAL_HEADER_LEN as usize + (cut as usize) % (bytes.len() + 1 - WAL_HEADER_LEN as usize);
        let got = replay_checked(&bytes[..cut], true).expect("a cut segment replays");
        prop_assert!(got.len() <= written.len());
        prop_assert_eq!(&got[..], &written[..got.len()]);
        if cut == bytes.len() {
            prop_assert_eq!(got.len(), written.len());
        }
        if let Some(older) = replay_checked(&bytes[..cut], false) {
            prop_assert_eq!(&older[..], &written[..older.len()]);
        }
    }

    /// A valid segment with bytes flipped, zeroed tails or garbage appended:
    /// replay returns a prefix of what was written (a dropped torn tail) or
    /// a typed error; it never returns a batch that was not written.
    #[test]
    fn wal_replay_of_damaged_segments(
        batches in arb_batches(),
        flips in proptest::collection::vec((any::<u64>(), 1..=255u8), 0..4),
        tail in proptest::collection::vec(any::<u8>(), 0..40),
        zero_tail in any::<bool>(),
        last in any::<bool>(),
    ) {
        let (mut bytes, written) = wal_bytes(&batches);
        for &(at, x) in &flips {
            let i = (at as usize) % bytes.len();
            bytes[i] ^= x;
        }
        if zero_tail {
            bytes.extend(std::iter::repeat_n(0u8, tail.len()));
        } else {
            bytes.extend_from_slice(&tail);
        }
        if let Some(got) = replay_checked(&bytes, last) {
            prop_assert!(got.len() <= written.len());
            prop_assert_eq!(&got[..], &written[..got.len()]);
        }
    }

    /// A whole store whose log was damaged after a crash: reopening either
    /// fails with an error or shows the state after a prefix of the writes.
    #[test]
    fn db_reopen_with_a_damaged_log(
        writes in proptest::collection::vec((0..32u64, any::<u64>(), any::<bool>()), 1..40),
        at in any::<u64>(),
        x in 1..=255u8,
        cut in any::<bool>(),
    ) {
        let dir = MemDirectory::new();
        let db = Db::open(Arc::new(dir.clone()), DbOptions::default()).unwrap();
        let mut states = vec![BTreeMap::new()];
        let mut m = BTreeMap::new();
        for &(k, v, del) in &writes {
            if del {
                db.delete(k).unwrap();
                m.remove(&k);
            } else {
                db.put(k, v).unwrap();
                m.insert(k, v);
            }
            states.push(m.clone());
        }
        db.kill();
        let logs: Vec<String> = dir.list().unwrap().into_iter().filter(|n| wal_id(n).is_some()).collect();
        prop_assert!(!logs.is_empty());
        let f = dir.file(logs.last().unwrap()).unwrap();
        let mut bytes = f.contents();
        let i = (at as usize) % bytes.len();
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] ^= x;
        }
        f.set_len(0).unwrap();
        f.write_at(0, &bytes).unwrap();
        if let Ok(db) = Db::open(Arc::new(dir.clone()), DbOptions::default()) {
            let got: BTreeMap<u64, u64> = db.range(..).map(|r| r.unwrap()).collect();
            prop_assert!(states.contains(&got), "reopened state is no prefix of the writes: {:?}", got);
            db.close().unwrap();
        }
    }
}

/// Recomputes the trailing crc32c of a model encoding (everything before
/// the last four bytes), so that a rewritten field reaches the parser.
fn reseal(bytes: &mut [u8]) {
    let body = bytes.len() - 4;
    let crc = crc32c::crc32c(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
}

/// Values a rewritten header field takes: the extremes that overflow a
/// count times a width, an offset plus a length, or `n + 1`.
const HUGE: [u64; 8] = [
    u64::MAX,
    u64::MAX - 1,
    1 << 63,
    1 << 62,
    1 << 61,
    1 << 58,
    1 << 32,
    u32::MAX as u64 + 1,
];

/// Valid encodings of every model codec, over `keys`.
fn model_encodings(keys: &[u64]) -> Vec<(&'static str, Vec<u8>)> {
    use strata::model::{DeltaArray, GapArray, RadixSpline, Rmi};
    vec![
        ("leco", LecoArray::encode(keys).to_bytes()),
        ("gap", GapArray::encode(keys).unwrap().to_bytes()),
        ("delta", DeltaArray::encode(keys).unwrap().to_bytes()),
        ("rs", RadixSpline::build(keys, 4, 8).unwrap().to_bytes()),
        ("rmi", Rmi::build(keys, 4).unwrap().to_bytes()),
    ]
}

/// Keys a decoded model is probed with.
const PROBES: [u64; 5] = [0, 1, 77, 1 << 40, u64::MAX];

/// A decoded compressed array, read the ways a lookup reads it.
trait Array {
    fn len(&self) -> usize;
    fn get(&self, i: usize) -> Option<u64>;
    fn first(&self, n: usize) -> usize;
    fn upper_bound(&self, x: u64) -> usize;
}

macro_rules! array {
    ($t:ty, |$a:ident, $x:ident| $ub:expr) => {
        impl Array for $t {
            fn len(&self) -> usize {
                <$t>::len(self)
            }
            fn get(&self, i: usize) -> Option<u64> {
                <$t>::get(self, i)
            }
            fn first(&self, n: usize) -> usize {
                self.iter().take(n).count()
            }
            fn upper_bound(&self, $x: u64) -> usize {
                let $a = self;
                $ub
            }
        }
    };
}
array!(LecoArray, |a, x| a.upper_bound(x));
array!(strata::model::GapArray, |a, x| a.upper_bound(x));
array!(strata::model::DeltaArray, |a, x| a
    .get_pair(x as usize)
    .map_or(0, |_| 1));

/// Reads a decoded array: values at the ends and the middle, the first
/// values in order, the upper bounds of the probes.
fn read_array(a: &impl Array) {
    let len = a.len();
    for i in [0, 1, len / 2, len.saturating_sub(1), len] {
        let _ = a.get(i);
    }
    let _ = a.first(300);
    for x in PROBES {
        let _ = a.upper_bound(x);
    }
}

/// Decodes `bytes` as codec `which` and, if it decodes, uses it: neither
/// may panic.
fn decode_and_use(which: &str, bytes: &[u8]) {
    use strata::model::{DeltaArray, GapArray, RadixSpline, Rmi};
    let ranges: Vec<(u64, u64)> = match which {
        "leco" => {
            LecoArray::from_bytes(bytes).map(|a| read_array(&a)).ok();
            return;
        }
        "gap" => {
            GapArray::from_bytes(bytes).map(|a| read_array(&a)).ok();
            return;
        }
        "delta" => {
            DeltaArray::from_bytes(bytes).map(|a| read_array(&a)).ok();
            return;
        }
        "rs" => RadixSpline::from_bytes(bytes)
            .map(|m| PROBES.map(|x| m.predict_range(x)).to_vec())
            .unwrap_or_default(),
        "rmi" => Rmi::from_bytes(bytes)
            .map(|m| PROBES.map(|x| m.predict_range(x)).to_vec())
            .unwrap_or_default(),
        other => panic!("no codec {other}"),
    };
    for (lo, hi) in ranges {
        assert!(lo < hi, "{which}: an empty range [{lo}, {hi})");
    }
}

/// Issue 16, failure 6 (the codecs): every 8-byte field of a valid model
/// encoding rewritten to a huge value, the checksum recomputed so the
/// parser is reached, gives an error or a usable model: never a panic (an
/// overflow in a test build) and never a wrapped size.
#[test]
fn huge_header_fields_with_a_valid_checksum_never_panic() {
    let keys: Vec<u64> = (0..700u64).map(|i| i * i * 3 + (i % 7)).collect();
    let mut decoded = 0;
    for (which, valid) in model_encodings(&keys) {
        decode_and_use(which, &valid);
        // Fields after the magic (8) and version (4), at every byte offset
        // (the bodies mix 4- and 8-byte fields).
        for at in 12..valid.len().saturating_sub(12) {
            for v in HUGE {
                let mut b = valid.clone();
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
                reseal(&mut b);
                decode_and_use(which, &b);
                decoded += 1;
            }
        }
    }
    assert!(decoded > 10_000, "{decoded}");
}
