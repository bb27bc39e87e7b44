//! The log with a byte-string record (the shape an LSM store logs): append,
//! group commit, crash, torn tail, replay across segments; manifests with edits.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::*;
use crate::format::bytes::get_u32;
use crate::storage::{Directory, FaultKind, FaultOp, FaultyDirectory, MemDirectory, Storage};
use segment::FRAME_HEADER;

/// A record of byte-string keys and values:
/// `tag u8 (1 put, 2 delete) | key_len u32 | key | [value_len u32 | value]`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KvOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn get_bytes(bytes: &[u8], pos: usize) -> Result<(Vec<u8>, usize), String> {
    let len = get_u32(bytes, pos).ok_or("length cut")? as usize;
    let b = bytes.get(pos + 4..pos + 4 + len).ok_or("bytes cut")?;
    Ok((b.to_vec(), pos + 4 + len))
}

impl LogRecord for KvOp {
    const MIN_LEN: usize = 5;

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            KvOp::Put(k, v) => {
                out.push(1);
                put_bytes(out, k);
                put_bytes(out, v);
            }
            KvOp::Delete(k) => {
                out.push(2);
                put_bytes(out, k);
            }
        }
    }

    fn decode(bytes: &[u8]) -> Result<(Self, usize), String> {
        match bytes.first() {
            Some(1) => {
                let (k, pos) = get_bytes(bytes, 1)?;
                let (v, pos) = get_bytes(bytes, pos)?;
                Ok((KvOp::Put(k, v), pos))
            }
            Some(2) => {
                let (k, pos) = get_bytes(bytes, 1)?;
                Ok((KvOp::Delete(k), pos))
            }
            t => Err(format!("unknown op tag {t:?}")),
        }
    }
}

fn batch(i: u64) -> Vec<KvOp> {
    let k = format!("key-{i:05}").into_bytes();
    if i % 3 == 2 {
        vec![KvOp::Delete(k)]
    } else {
        vec![
            KvOp::Put(k.clone(), vec![i as u8; (i % 50) as usize]),
            KvOp::Put(k, b"".to_vec()),
        ]
    }
}

fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, ops: &[KvOp]) {
    for op in ops {
        match op {
            KvOp::Put(k, v) => model.insert(k.clone(), v.clone()),
            KvOp::Delete(k) => model.remove(k),
        };
    }
}

fn no_wrap(s: Arc<dyn Storage>) -> Arc<dyn Storage> {
    s
}

fn spec<'a>(names: &'a [String], chain: Option<&'a WalChain>, log_start: u64, floor: u64) -> LogSpec<'a> {
    LogSpec {
        names,
        chain,
        log_start,
        floor,
        recovery: Recovery::Lenient,
        wrap: &no_wrap,
    }
}

#[test]
fn byte_string_batches_append_and_replay() {
    let dir = MemDirectory::new();
    let f = dir.create("wal").unwrap();
    let w = WalWriter::<KvOp>::create(f.clone(), SyncPolicy::Always).unwrap();
    for i in 0..20 {
        w.append(i, &batch(i)).unwrap();
    }
    w.append(20, &[]).unwrap();
    let r = replay::<KvOp>(f.as_ref(), true).unwrap();
    assert_eq!(r.batches.len(), 21);
    for (i, b) in r.batches.iter().take(20).enumerate() {
        assert_eq!((b.seq, &b.ops), (i as u64, &batch(i as u64)));
    }
    assert!(r.batches[20].ops.is_empty());
    assert_eq!((r.valid_len, r.torn_bytes), (w.len(), 0));
}

#[test]
fn byte_string_group_commit_crash_and_recover() {
    let fd = FaultyDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(fd.clone());
    let c1 = WalChain::new(7, 1);
    let w = Arc::new(create_segment::<KvOp>(dir.as_ref(), &c1, 0, SyncPolicy::Always, &no_wrap).unwrap());
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let w = w.clone();
            s.spawn(move || {
                for i in 0..100u64 {
                    w.append(t * 1000 + i, &batch(t * 1000 + i)).unwrap();
                }
            });
        }
    });
    // Segment 2 takes the next writes; its last frame is torn by a crash.
    let w2 =
        create_segment::<KvOp>(dir.as_ref(), &c1.sealed_at(0, 0), 0, SyncPolicy::Always, &no_wrap).unwrap();
    w.sync().unwrap();
    let chain = c1.sealed_at(w.len(), w.last_seq());
    assert_eq!(w.last_seq(), 3099);
    let mut model = BTreeMap::new();
    let mut acked = Vec::new();
    for i in 0..30u64 {
        w2.append(10_000 + i, &batch(i)).unwrap();
        acked.push(10_000 + i);
    }
    fd.plan().inject(FaultOp::Write, 0, FaultKind::TornWrite, false);
    let big = vec![KvOp::Put(vec![7; 3000], vec![9; 3000])];
    assert!(w2.append(99_999, &big).is_err());
    assert!(w2.is_failed());
    fd.crash();
    let names = dir.list().unwrap();
    let mut seqs = Vec::new();
    let rec = recover::<KvOp>(
        dir.as_ref(),
        &spec(&names, Some(&chain), 1, 0),
        SyncPolicy::Always,
        |b| {
            seqs.push(b.seq);
            apply(&mut model, &b.ops);
        },
    )
    .unwrap();
    assert_eq!(rec.segment, 2);
    assert_eq!(rec.max_seq, 10_029);
    assert_eq!(seqs.len(), 430, "every acknowledged batch, the torn one dropped");
    assert!(seqs.ends_with(&acked));
    // Appends continue after the valid prefix and replay again.
    rec.writer
        .append(20_000, &[KvOp::Delete(b"key-00000".to_vec())])
        .unwrap();
    let r = replay::<KvOp>(dir.open(&wal_name(2)).unwrap().as_ref(), true).unwrap();
    assert_eq!((r.batches.len(), r.torn_bytes), (31, 0));
    // A missing segment is corruption.
    dir.remove(&wal_name(1)).unwrap();
    let names = dir.list().unwrap();
    let err = recover::<KvOp>(
        dir.as_ref(),
        &spec(&names, Some(&chain), 1, 0),
        SyncPolicy::Always,
        |_| (),
    )
    .unwrap_err();
    assert!(err.is_corruption());
    assert!(
        err.to_string().contains("wal-000001.log at byte offset 0"),
        "{err}"
    );
}

#[test]
fn empty_log_creates_its_first_segment() {
    let dir = MemDirectory::new();
    let rec = recover::<KvOp>(&dir, &spec(&[], None, 5, 17), SyncPolicy::Always, |_| ()).unwrap();
    assert_eq!((rec.segment, rec.max_seq, rec.upgraded), (5, 17, true));
    assert_eq!((rec.chain.first, rec.chain.newest), (5, 5));
    assert_eq!(dir.list().unwrap(), vec![wal_name(5)]);
    assert!(rec.writer.is_empty());
    assert_eq!(wal_id(&wal_name(5)), Some(5));
    assert_eq!(wal_id("wal-.log"), None);
    assert_eq!(wal_id("wal-12x.log"), None);
}

#[test]
fn a_damaged_record_is_corruption() {
    let dir = MemDirectory::new();
    let f = dir.create("wal").unwrap();
    let w = WalWriter::<KvOp>::create(f.clone(), SyncPolicy::Always).unwrap();
    w.append(1, &[KvOp::Put(b"a".to_vec(), b"b".to_vec())]).unwrap();
    // A frame whose batch claims more records than its payload holds.
    let mut payload = Vec::new();
    payload.extend_from_slice(&2u64.to_le_bytes());
    payload.extend_from_slice(&u32::MAX.to_le_bytes());
    let mut frame = Vec::new();
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(&crc32c::crc32c(&(payload.len() as u32).to_le_bytes()).to_le_bytes());
    frame.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    frame.extend_from_slice(&payload);
    f.write_at(w.len(), &frame).unwrap();
    assert!(replay::<KvOp>(f.as_ref(), true).unwrap_err().is_corruption());
}

#[test]
fn sync_thread_ticks_until_stopped() {
    let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let m = n.clone();
    let mut t = SyncThread::spawn("test-sync", std::time::Duration::from_millis(1), move || {
        m.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    })
    .unwrap();
    while n.load(std::sync::atomic::Ordering::SeqCst) < 3 {
        std::thread::yield_now();
    }
    t.stop();
    let after = n.load(std::sync::atomic::Ordering::SeqCst);
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), after);
}

/// A manifest of sorted tables per level, changed by edits (an LSM's shape).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
struct Levels {
    levels: Vec<Vec<u64>>,
}

enum LevelEdit {
    Add { level: usize, table: u64 },
    Remove { level: usize, table: u64 },
}

impl Manifest for Levels {
    type Edit = LevelEdit;
    const FILE: &'static str = "levels.manifest";
    const TMP: &'static str = "levels.manifest.tmp";
    const MAGIC: u64 = u64::from_le_bytes(*b"TESTLVLS");
    const VERSION: u32 = 1;
    const WHAT: &'static str = "levels manifest";
    const MAGIC_NAME: &'static str = "test levels manifest";

    fn apply(&mut self, edit: &LevelEdit) -> crate::Result<()> {
        match *edit {
            LevelEdit::Add { level, table } => {
                if self.levels.len() <= level {
                    self.levels.resize(level + 1, Vec::new());
                }
                self.levels[level].push(table);
            }
            LevelEdit::Remove { level, table } => {
                let l = self
                    .levels
                    .get_mut(level)
                    .ok_or_else(|| crate::Error::invalid(format!("no level {level}")))?;
                let before = l.len();
                l.retain(|&t| t != table);
                if l.len() == before {
                    return Err(crate::Error::invalid(format!(
                        "no table {table} in level {level}"
                    )));
                }
            }
        }
        Ok(())
    }
}

#[test]
fn manifest_edits_are_published_atomically() {
    let fd = FaultyDirectory::new();
    assert_eq!(manifest::load::<Levels>(&fd).unwrap(), None);
    let m0 = Levels::default();
    let m1 = manifest::commit(
        &m0,
        &[
            LevelEdit::Add { level: 0, table: 1 },
            LevelEdit::Add { level: 1, table: 2 },
        ],
        &fd,
    )
    .unwrap();
    assert_eq!(m1.levels, vec![vec![1], vec![2]]);
    assert_eq!(manifest::load::<Levels>(&fd).unwrap(), Some(m1.clone()));
    // A bad edit publishes nothing.
    assert!(manifest::commit(&m1, &[LevelEdit::Remove { level: 3, table: 1 }], &fd).is_err());
    // A crash before the rename leaves the previous manifest current.
    fd.plan().inject(FaultOp::Sync, 0, FaultKind::Eio, false);
    let edit = [
        LevelEdit::Add { level: 0, table: 3 },
        LevelEdit::Remove { level: 1, table: 2 },
    ];
    assert!(manifest::commit(&m1, &edit, &fd).is_err());
    fd.crash();
    assert_eq!(manifest::load::<Levels>(&fd).unwrap(), Some(m1.clone()));
    let m2 = manifest::commit(&m1, &edit, &fd).unwrap();
    fd.crash();
    assert_eq!(manifest::load::<Levels>(&fd).unwrap(), Some(m2));
    // Every flipped bit and every cut is an error.
    let bytes = manifest::encode(&m1).unwrap();
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x20;
        assert!(manifest::decode::<Levels>(&b, "m").is_err(), "flip at byte {i}");
    }
    for cut in 0..bytes.len() {
        assert!(
            manifest::decode::<Levels>(&bytes[..cut], "m").is_err(),
            "cut at {cut}"
        );
    }
}

fn kv_op() -> impl Strategy<Value = KvOp> {
    let bytes = proptest::collection::vec(any::<u8>(), 0..40);
    prop_oneof![
        (bytes.clone(), bytes.clone()).prop_map(|(k, v)| KvOp::Put(k, v)),
        bytes.prop_map(KvOp::Delete),
    ]
}

proptest! {
    /// Whatever prefix of a segment survives a crash, replay of the newest
    /// segment returns exactly the batches whose frames are whole.
    #[test]
    fn any_cut_replays_the_whole_frames(
        batches in proptest::collection::vec(proptest::collection::vec(kv_op(), 0..5), 1..12),
        cut_frac in 0.0f64..=1.0,
    ) {
        let dir = MemDirectory::new();
        let f = dir.create("wal").unwrap();
        let w = WalWriter::<KvOp>::create(f.clone(), SyncPolicy::Never).unwrap();
        let mut ends = Vec::new();
        for (i, b) in batches.iter().enumerate() {
            w.append(i as u64, b).unwrap();
            ends.push(w.len());
        }
        let total = w.len();
        let cut = WAL_HEADER_LEN + ((total - WAL_HEADER_LEN) as f64 * cut_frac) as u64;
        f.set_len(cut).unwrap();
        let r = replay::<KvOp>(f.as_ref(), true).unwrap();
        let whole = ends.iter().filter(|&&e| e <= cut).count();
        prop_assert_eq!(r.batches.len(), whole);
        for (got, want) in r.batches.iter().zip(&batches) {
            prop_assert_eq!(&got.ops, want);
        }
        prop_assert_eq!(r.valid_len + r.torn_bytes, cut);
    }
}

/// A log of store `store` in `dir`: segments 1 and 2 sealed, 3 the newest,
/// 10 batches each (one frame per batch). Returns the chain and the length
/// of segment 1 before its last frame (a frame boundary).
fn three_segments(dir: &dyn Directory, store: u64) -> (WalChain, u64) {
    let mut chain = WalChain::new(store, 1);
    let mut w = create_segment::<KvOp>(dir, &chain, 0, SyncPolicy::Always, &no_wrap).unwrap();
    let mut seq = 0;
    let mut cut = 0;
    for _ in 0..2 {
        for _ in 0..10 {
            if chain.newest == 1 && seq == 9 {
                cut = w.len();
            }
            seq += 1;
            w.append(seq, &batch(seq)).unwrap();
        }
        // The rotation order: new segment durable, old synced, then sealed.
        let next =
            create_segment::<KvOp>(dir, &chain.sealed_at(0, 0), 0, SyncPolicy::Always, &no_wrap).unwrap();
        w.sync().unwrap();
        chain = chain.sealed_at(w.len(), w.last_seq());
        next.raise_floor(w.last_seq());
        w = next;
    }
    for _ in 0..10 {
        seq += 1;
        w.append(seq, &batch(seq)).unwrap();
    }
    chain.check("manifest").unwrap();
    (chain, cut)
}

fn open_chain(dir: &dyn Directory, chain: &WalChain, mode: Recovery) -> crate::Result<Recovered<KvOp>> {
    let names = dir.list()?;
    let mut s = spec(&names, Some(chain), chain.first, 0);
    s.recovery = mode;
    recover::<KvOp>(dir, &s, SyncPolicy::Always, |_| ())
}

fn corruption_naming(r: crate::Result<Recovered<KvOp>>, file: &str) -> String {
    let e = r.unwrap_err();
    assert!(e.is_corruption(), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(file), "{msg} does not name {file}");
    msg
}

fn copy(from: &dyn Directory, from_name: &str, to: &dyn Directory, to_name: &str) {
    let src = from.open(from_name).unwrap();
    let mut bytes = vec![0u8; src.len().unwrap() as usize];
    src.read_at(0, &mut bytes).unwrap();
    let dst = to.create(to_name).unwrap();
    dst.write_at(0, &bytes).unwrap();
    dst.sync().unwrap();
}

#[test]
fn a_clean_chain_replays_every_segment() {
    let dir = MemDirectory::new();
    let (chain, _) = three_segments(&dir, 7);
    let rec = open_chain(&dir, &chain, Recovery::Strict).unwrap();
    assert_eq!((rec.segment, rec.max_seq, rec.upgraded), (3, 30, false));
    assert_eq!(rec.dropped, Dropped::default());
    assert_eq!(
        chain.sealed.iter().map(|s| s.last_seq).collect::<Vec<_>>(),
        vec![10, 20]
    );
}

#[test]
fn a_sealed_segment_cut_at_a_frame_boundary_is_corruption() {
    let dir = MemDirectory::new();
    let (chain, cut) = three_segments(&dir, 7);
    dir.open(&wal_name(1)).unwrap().set_len(cut).unwrap();
    // Every frame left is whole: only the recorded length tells.
    let r = replay::<KvOp>(dir.open(&wal_name(1)).unwrap().as_ref(), false).unwrap();
    assert_eq!(r.batches.len(), 9);
    let msg = corruption_naming(open_chain(&dir, &chain, Recovery::Lenient), "wal-000001.log");
    assert!(
        msg.contains("byte offset") && msg.contains("the manifest records"),
        "{msg}"
    );
}

#[test]
fn a_sealed_segment_whose_last_sequence_differs_is_corruption() {
    let dir = MemDirectory::new();
    let (mut chain, _) = three_segments(&dir, 7);
    chain.sealed[1].last_seq = 21;
    corruption_naming(open_chain(&dir, &chain, Recovery::Lenient), "wal-000002.log");
}

#[test]
fn swapped_segments_are_corruption() {
    let dir = MemDirectory::new();
    let (chain, _) = three_segments(&dir, 7);
    let tmp = MemDirectory::new();
    copy(&dir, &wal_name(1), &tmp, "a");
    copy(&dir, &wal_name(2), &dir, &wal_name(1));
    copy(&tmp, "a", &dir, &wal_name(2));
    corruption_naming(open_chain(&dir, &chain, Recovery::Lenient), "wal-000001.log");
    // With the recorded lengths swapped too, the headers' segment ids tell.
    let mut swapped = chain.clone();
    swapped.sealed.swap(0, 1);
    swapped.sealed[0].id = 1;
    swapped.sealed[1].id = 2;
    let msg = corruption_naming(open_chain(&dir, &swapped, Recovery::Lenient), "wal-000001.log");
    assert!(msg.contains("header says segment 2"), "{msg}");
}

#[test]
fn missing_segments_are_corruption() {
    for (gone, file) in [
        (3, "wal-000003.log"),
        (2, "wal-000002.log"),
        (1, "wal-000001.log"),
    ] {
        let dir = MemDirectory::new();
        let (chain, _) = three_segments(&dir, 7);
        dir.remove(&wal_name(gone)).unwrap();
        let msg = corruption_naming(open_chain(&dir, &chain, Recovery::Lenient), file);
        assert!(msg.contains("missing"), "{msg}");
    }
}

#[test]
fn another_stores_segments_are_corruption() {
    let dir = MemDirectory::new();
    let (chain, _) = three_segments(&dir, 7);
    let other = MemDirectory::new();
    let (_, _) = three_segments(&other, 8);
    // Another store's segment in place of the newest.
    copy(&other, &wal_name(3), &dir, &wal_name(3));
    let msg = corruption_naming(open_chain(&dir, &chain, Recovery::Lenient), "wal-000003.log");
    assert!(msg.contains("belongs to store"), "{msg}");
    // Another store's segment added as the next id.
    let dir = MemDirectory::new();
    let (chain, _) = three_segments(&dir, 7);
    copy(&other, &wal_name(3), &dir, &wal_name(4));
    let msg = corruption_naming(open_chain(&dir, &chain, Recovery::Lenient), "wal-000004.log");
    assert!(msg.contains("past the newest"), "{msg}");
}

#[test]
fn a_header_only_segment_past_the_newest_is_a_leftover() {
    let dir = MemDirectory::new();
    let (chain, _) = three_segments(&dir, 7);
    // A rotation that crashed before its manifest was published.
    drop(create_segment::<KvOp>(&dir, &chain.sealed_at(0, 0), 0, SyncPolicy::Always, &no_wrap).unwrap());
    let names = dir.list().unwrap();
    let r = replay_segments::<KvOp>(&dir, &spec(&names, Some(&chain), 1, 0), |_| ()).unwrap();
    assert_eq!(r.max_seq, 30);
    assert!(dir.exists(&wal_name(4)), "a read-only replay removes nothing");
    let rec = open_chain(&dir, &chain, Recovery::Strict).unwrap();
    assert_eq!((rec.segment, rec.max_seq), (3, 30));
    assert!(!dir.exists(&wal_name(4)), "a writer removes the leftover");
}

#[test]
fn a_damaged_last_frame_is_counted_or_refused() {
    let dir = MemDirectory::new();
    let (chain, _) = three_segments(&dir, 7);
    let f = dir.file(&wal_name(3)).unwrap();
    let len = f.contents().len() as u64;
    f.corrupt_byte(len - 1);
    let frame_len = (FRAME_HEADER
        + 12
        + batch(30)
            .iter()
            .map(|op| {
                let mut v = Vec::new();
                op.encode(&mut v);
                v.len()
            })
            .sum::<usize>()) as u64;
    let msg = corruption_naming(open_chain(&dir, &chain, Recovery::Strict), "wal-000003.log");
    assert!(msg.contains(&format!("byte offset {}", len - frame_len)), "{msg}");
    let names = dir.list().unwrap();
    let r = replay_segments::<KvOp>(&dir, &spec(&names, Some(&chain), 1, 0), |_| ()).unwrap();
    assert_eq!((r.max_seq, r.dropped.frames, r.dropped.bytes), (29, 1, frame_len));
    let rec = open_chain(&dir, &chain, Recovery::Lenient).unwrap();
    assert_eq!(
        (rec.max_seq, rec.dropped.frames, rec.dropped.bytes),
        (29, 1, frame_len)
    );
    // The writer truncated it: the next open drops nothing.
    drop(rec);
    let rec = open_chain(&dir, &chain, Recovery::Strict).unwrap();
    assert_eq!(rec.dropped, Dropped::default());
}

#[test]
fn segment_headers_are_checked() {
    let h = SegmentHeader::new(0x1234, 9);
    let bytes = h.encode();
    assert_eq!(bytes.len() as u64, WAL_HEADER_LEN);
    assert_eq!(decode_header(&bytes, "s").unwrap(), h);
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        assert!(decode_header(&b, "s").is_err(), "flip at byte {i} undetected");
    }
    for cut in 0..bytes.len() {
        assert!(decode_header(&bytes[..cut], "s").is_err(), "cut at {cut}");
    }
    let v1 = SegmentHeader {
        version: WAL_VERSION_1,
        store_id: None,
        segment: None,
    };
    assert_eq!(v1.encode().len() as u64, WAL_HEADER_LEN_V1);
    assert_eq!(decode_header(&v1.encode(), "s").unwrap(), v1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random appends, rotations and reopens: every acknowledged batch
    /// comes back, in order, and the chain always checks.
    #[test]
    fn a_chain_survives_rotations_and_reopens(steps in proptest::collection::vec(0u8..10, 1..60)) {
        let dir = MemDirectory::new();
        let mut chain = WalChain::new(5, 1);
        let mut w = create_segment::<KvOp>(&dir, &chain, 0, SyncPolicy::Always, &no_wrap).unwrap();
        let mut acked = Vec::new();
        let mut seq = 0;
        for step in steps {
            match step {
                0 => {
                    let next = create_segment::<KvOp>(&dir, &chain.sealed_at(0, 0), 0, SyncPolicy::Always, &no_wrap).unwrap();
                    w.sync().unwrap();
                    chain = chain.sealed_at(w.len(), w.last_seq());
                    next.raise_floor(w.last_seq());
                    w = next;
                }
                1 => {
                    drop(w);
                    let names = dir.list().unwrap();
                    let mut got = Vec::new();
                    let rec = recover::<KvOp>(&dir, &spec(&names, Some(&chain), chain.first, 0), SyncPolicy::Always, |b| got.push(b.seq)).unwrap();
                    prop_assert_eq!(&got, &acked);
                    prop_assert_eq!(rec.dropped, Dropped::default());
                    w = rec.writer;
                }
                _ => {
                    seq += 1;
                    w.append(seq, &batch(seq)).unwrap();
                    acked.push(seq);
                }
            }
            chain.check("manifest").unwrap();
        }
    }
}

/// One parser of sync policies for the CLI, the kinds' `sync=` and the LSM
/// options: `always` and its alias `every`, `never`, `N` and `Nms`; an error
/// names every accepted word; `Display` reads back.
#[test]
fn sync_policies_parse_in_one_place() {
    for (s, want) in [
        ("always", SyncPolicy::Always),
        ("every", SyncPolicy::Always),
        ("never", SyncPolicy::Never),
        ("10", SyncPolicy::EveryMs(10)),
        ("10ms", SyncPolicy::EveryMs(10)),
        (" 250 ms ", SyncPolicy::EveryMs(250)),
    ] {
        let got: SyncPolicy = s.parse().unwrap();
        assert_eq!(got, want, "{s:?}");
        assert_eq!(got.to_string().parse::<SyncPolicy>().unwrap(), got);
    }
    for bad in ["sometimes", "", "-5", "10s", "Always"] {
        let e = bad.parse::<SyncPolicy>().unwrap_err().to_string();
        for word in ["always", "every", "never", "milliseconds"] {
            assert!(e.contains(word), "{bad:?}: {e}");
        }
    }
}
