//! Tables of every index kind against a sorted-vector oracle: round trips,
//! lookups of present and absent keys, scans and seeks, the index ranges'
//! bounds, reads per lookup, memory figures, corruption.

use std::cmp::Ordering;
use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use super::*;
use crate::lsm::key::{self, InternalIterator, ValueKind};
use crate::storage::{Directory, IoContext, MemDirectory};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

const BOUNDARIES: [usize; 4] = [1, 4, 16, 256];

fn opts(kind: &str, boundary: usize) -> TableOptions {
    TableOptions {
        index: IndexSpec {
            kind: kind.to_string(),
            boundary,
            profile: None,
        },
        build_id: 0x5eed,
        ..TableOptions::default()
    }
}

/// Entries of `(user key, seq, kind, value)` sorted into table order.
fn entries(mut raw: Vec<(Vec<u8>, u64, ValueKind, Vec<u8>)>) -> Entries {
    raw.sort_by(|a, b| key::compare(&key::encode(&a.0, a.1, a.2), &key::encode(&b.0, b.1, b.2)));
    raw.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    raw.into_iter()
        .map(|(u, s, k, v)| (key::encode(&u, s, k), v))
        .collect()
}

fn build(dir: &MemDirectory, name: &str, es: &Entries, o: &TableOptions) -> TableMeta {
    let mut b = TableBuilder::new(dir, name, o).unwrap();
    for (k, v) in es {
        b.add(k, v).unwrap();
    }
    assert_eq!(b.entries(), es.len() as u64);
    b.finish().unwrap()
}

fn open(dir: &MemDirectory, name: &str) -> Arc<Table> {
    Arc::new(Table::open(dir.open_read(name).unwrap(), Some(0x5eed)).unwrap())
}

/// The oracle's lower bound of `t`.
fn lower_bound(es: &Entries, t: &[u8]) -> usize {
    es.partition_point(|(k, _)| key::compare(k, t) == Ordering::Less)
}

fn expect_get(es: &Entries, lookup: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    es.get(lower_bound(es, lookup))
        .filter(|(k, _)| key::user_key(k) == key::user_key(lookup))
        .cloned()
}

/// Every check of a table against its entries: gets of every key at its
/// own and a newer sequence number, absent keys, a full scan, seeks.
fn check(t: &Arc<Table>, es: &Entries, absent: &[Vec<u8>], seed: u64) {
    let what = format!("{} boundary {}", t.index_kind(), t.boundary());
    assert_eq!(t.entries(), es.len() as u64);
    assert_eq!(t.smallest(), &es[0].0[..]);
    assert_eq!(t.largest(), &es[es.len() - 1].0[..]);
    for (k, _) in es {
        let p = key::parse(k).unwrap();
        for lookup in [
            k.clone(),
            key::lookup_key(p.user_key, key::MAX_SEQ),
            key::lookup_key(p.user_key, p.seq.saturating_sub(1)),
        ] {
            assert_eq!(
                t.get(&lookup).unwrap(),
                expect_get(es, &lookup),
                "{what}: get {lookup:?}"
            );
            // The index's own claim holds for keys of the table (a wrong
            // claim costs reads, not answers: check it directly).
            let (lo, hi) = t.index_range(&lookup).unwrap();
            let lb = lower_bound(es, &lookup) as u64;
            assert!(
                lo <= lb && lb <= hi,
                "{what}: lower bound {lb} of {lookup:?} not in [{lo}, {hi}]"
            );
        }
    }
    for u in absent {
        let lookup = key::lookup_key(u, key::MAX_SEQ);
        assert_eq!(
            t.get(&lookup).unwrap(),
            expect_get(es, &lookup),
            "{what}: absent {u:?}"
        );
    }
    let mut it = t.iter();
    it.seek_to_first().unwrap();
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    assert!(got == *es, "{what}: full scan differs");
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut targets: Vec<Vec<u8>> = absent.iter().map(|u| key::lookup_key(u, 5)).collect();
    for _ in 0..200 {
        let (k, _) = &es[rng.random_range(0..es.len())];
        let mut t = k.clone();
        match rng.random_range(0..3) {
            0 => {}
            1 => t = key::lookup_key(key::user_key(k), rng.random_range(0..key::MAX_SEQ)),
            _ => {
                let mut u = key::user_key(k).to_vec();
                u.push(rng.random());
                t = key::lookup_key(&u, 3);
            }
        }
        targets.push(t);
    }
    targets.push(Vec::new());
    for target in &targets {
        it.seek(target).unwrap();
        let want = lower_bound(es, target);
        for (k, v) in es.iter().skip(want).take(3) {
            assert!(it.valid(), "{what}: seek {target:?} ended early");
            assert_eq!(
                (it.key(), it.value()),
                (&k[..], &v[..]),
                "{what}: seek {target:?}"
            );
            it.next().unwrap();
        }
        if want + 3 > es.len() {
            assert!(!it.valid(), "{what}: seek {target:?} past the end");
        }
    }
}

fn u64_keys(n: usize, seed: u64) -> (Entries, Vec<Vec<u8>>) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let raw = (0..n)
        .map(|i| {
            let k: u64 = rng.random();
            (
                k.to_be_bytes().to_vec(),
                1 + i as u64,
                ValueKind::Put,
                i.to_le_bytes().to_vec(),
            )
        })
        .collect();
    let absent = (0..50)
        .map(|_| rng.random::<u64>().to_be_bytes().to_vec())
        .collect();
    (entries(raw), absent)
}

fn url_keys(n: usize, seed: u64) -> (Entries, Vec<Vec<u8>>) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let hosts = [
        "https://www.example.com/",
        "https://www.example.com/static/img/",
        "https://www.example.org/a/very/long/shared/path/",
    ];
    let word = |rng: &mut Pcg64| -> String {
        (0..rng.random_range(1..14))
            .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
            .collect()
    };
    let raw = (0..n)
        .map(|i| {
            let h = hosts[rng.random_range(0..hosts.len())];
            let u = format!("{h}{}/{}", word(&mut rng), word(&mut rng));
            (u.into_bytes(), 10 + i as u64, ValueKind::Put, vec![b'v'; i % 40])
        })
        .collect();
    let absent = (0..50)
        .map(|_| format!("{}{}", hosts[rng.random_range(0..hosts.len())], word(&mut rng)).into_bytes())
        .collect();
    (entries(raw), absent)
}

fn versioned_keys(users: usize, seed: u64) -> (Entries, Vec<Vec<u8>>) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut raw = Vec::new();
    for u in 0..users {
        let user = format!("user{:06}", u * 3).into_bytes();
        for _ in 0..rng.random_range(1..20) {
            let kind = if rng.random_range(0..4) == 0 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = if kind == ValueKind::Delete {
                Vec::new()
            } else {
                vec![u as u8; 5]
            };
            raw.push((user.clone(), rng.random_range(1..1000), kind, value));
        }
    }
    let absent = (0..50)
        .map(|u| format!("user{:06}", u * 3 + 1).into_bytes())
        .collect();
    (entries(raw), absent)
}

fn small_cases() -> Vec<(&'static str, Entries, Vec<Vec<u8>>)> {
    let one = entries(vec![(b"only".to_vec(), 7, ValueKind::Put, b"v".to_vec())]);
    let big = entries(vec![
        (b"a".to_vec(), 1, ValueKind::Put, b"small".to_vec()),
        (b"b".to_vec(), 2, ValueKind::Put, vec![0xab; 1 << 20]),
        (b"c".to_vec(), 3, ValueKind::Delete, Vec::new()),
    ]);
    let empty_key = entries(vec![
        (Vec::new(), 9, ValueKind::Put, b"empty".to_vec()),
        (Vec::new(), 4, ValueKind::Put, b"older".to_vec()),
        (vec![0], 1, ValueKind::Put, b"zero".to_vec()),
        (b"x".to_vec(), 1, ValueKind::Put, b"x".to_vec()),
    ]);
    vec![
        ("one entry", one, vec![b"a".to_vec(), b"z".to_vec(), Vec::new()]),
        ("1 MiB value", big, vec![b"bb".to_vec(), Vec::new()]),
        ("empty user key", empty_key, vec![vec![0, 0], b"y".to_vec()]),
    ]
}

#[test]
fn every_kind_round_trips_every_data_set() {
    let dir = MemDirectory::new();
    let mut cases: Vec<(&str, Entries, Vec<Vec<u8>>)> = vec![];
    let (a, b) = u64_keys(3000, 1);
    cases.push(("u64 keys", a, b));
    let (a, b) = url_keys(2000, 2);
    cases.push(("urls", a, b));
    let (a, b) = versioned_keys(300, 3);
    cases.push(("versions", a, b));
    cases.extend(small_cases());
    for kind in INDEX_KINDS {
        for boundary in BOUNDARIES {
            for (i, (name, es, absent)) in cases.iter().enumerate() {
                let mut o = opts(kind, boundary);
                o.block_size = if i % 2 == 0 { 4096 } else { 512 };
                let meta = build(&dir, "t.sst", es, &o);
                assert_eq!(meta.entries, es.len() as u64, "{kind} {name}");
                let t = open(&dir, "t.sst");
                assert_eq!(t.memory().index_bytes, meta.index_bytes, "{kind} {name}");
                assert_eq!(t.memory().filter_bytes, meta.filter_bytes, "{kind} {name}");
                check(&t, es, absent, boundary as u64);
            }
        }
    }
}

/// `n` fb-like keys (8 bytes big-endian, one version each) with values of
/// `value_len` bytes.
fn fb_entries(n: usize, seed: u64, value_len: usize) -> Entries {
    let keys = crate::data::generate(crate::data::Dist::FbLike, n, seed).unwrap();
    keys.iter()
        .map(|k| {
            (
                key::encode(&k.to_be_bytes(), 1, ValueKind::Put),
                vec![7; value_len],
            )
        })
        .collect()
}

/// For every key of a table of distinct keys, the index's range holds the
/// key's ordinal and is at most the boundary wide (fences `boundary - 1`,
/// zone maps `boundary`, segment models `2 * epsilon + 1` as measured; `rmi`
/// unbounded, `air` at most twice the boundary; see `docs/format/sstable.md`).
#[test]
fn index_ranges_hold_every_key_within_the_boundary() {
    let dir = MemDirectory::new();
    let es = fb_entries(20_000, 11, 0);
    for kind in INDEX_KINDS {
        for boundary in BOUNDARIES {
            build(&dir, "r.sst", &es, &opts(kind, boundary));
            let t = open(&dir, "r.sst");
            let (mut max, mut sum) = (0u64, 0u64);
            for (i, (k, _)) in es.iter().enumerate() {
                let (lo, hi) = t.index_range(k).unwrap();
                assert!(
                    lo <= i as u64 && i as u64 <= hi,
                    "{kind} {boundary}: entry {i} not in [{lo}, {hi}]"
                );
                max = max.max(hi - lo);
                sum += hi - lo;
            }
            let avg = sum as f64 / es.len() as f64;
            let b = boundary as u64;
            match *kind {
                "fp" => assert_eq!(max, b - 1),
                "gap-zonemap-d" => assert!(max <= b, "{kind} {boundary}: {max}"),
                "pgm" | "pgm-cpr" | "rs" | "plr" | "fiting" => {
                    assert!(max <= b, "{kind} {boundary}: {max}")
                }
                "air" => assert!(max <= 2 * b, "{kind} {boundary}: {max}"),
                _ => {}
            }
            println!(
                "{kind:>14} boundary {boundary:>3}: widest {max:>5}, average {avg:>8.2}, index {} B",
                t.memory().index_bytes
            );
        }
    }
}

#[test]
fn memory_of_fence_pointers_and_pgm_on_fb_like_keys() {
    let dir = MemDirectory::new();
    let es = fb_entries(100_000, 42, 8);
    let mut figures = Vec::new();
    for kind in INDEX_KINDS {
        let meta = build(&dir, "m.sst", &es, &opts(kind, 16));
        figures.push((kind, meta.index_bytes));
        println!(
            "{kind:>14}: index {} B, filter {} B, file {} B",
            meta.index_bytes, meta.filter_bytes, meta.file_size
        );
    }
    let of = |kind: &str| figures.iter().find(|f| **f.0 == *kind).map_or(0, |f| f.1);
    let (fp, pgm, cpr) = (of("fp"), of("pgm"), of("pgm-cpr"));
    // 6,250 fences of 16-byte internal keys + offsets, and the block handles.
    assert!(fp > 6_250 * 20, "fp {fp}");
    assert!(pgm * 2 <= fp, "pgm {pgm} vs fp {fp}");
    assert!(cpr * 5 <= fp, "pgm-cpr {cpr} vs fp {fp}");
}

#[test]
fn a_lookup_reads_only_the_blocks_covering_the_range() {
    let dir = MemDirectory::new();
    let (es, absent) = u64_keys(20_000, 5);
    for kind in ["fp", "pgm", "gap-zonemap-d"] {
        build(&dir, "io.sst", &es, &opts(kind, 16));
        let io = IoContext::default();
        let t = Arc::new(Table::open(io.wrap(dir.open_read("io.sst").unwrap()), None).unwrap());
        let before = io.stats.snapshot();
        for (k, _) in es.iter().step_by(7) {
            let s = io.stats.snapshot();
            assert!(t.get(k).unwrap().is_some());
            let d = io.stats.snapshot().since(&s);
            assert_eq!(d.read_calls, 1, "{kind}: one read per lookup");
            // At most 18 entries of ~30 bytes around the key: two blocks at most.
            assert!(d.bytes_read <= 2 * 4096 + 512, "{kind}: {} bytes", d.bytes_read);
        }
        for u in &absent {
            t.get(&key::lookup_key(u, 1)).unwrap();
        }
        let d = io.stats.snapshot().since(&before);
        assert!(d.read_calls <= (es.len() / 7 + 1 + absent.len()) as u64);
    }
}

fn table_bytes(kind: &str) -> (MemDirectory, Entries, Vec<u8>) {
    let dir = MemDirectory::new();
    let (es, _) = versioned_keys(120, 9);
    let mut o = opts(kind, 4);
    o.block_size = 256;
    build(&dir, "c.sst", &es, &o);
    let bytes = dir.file("c.sst").unwrap().contents();
    (dir, es, bytes)
}

/// Flipping any byte of the file: `open` fails, or every lookup and scan
/// either fails or gives the right answer (never a panic, never a wrong
/// answer).
#[test]
fn corruption_anywhere_is_an_error_never_a_wrong_answer() {
    for kind in ["fp", "pgm", "rmi"] {
        let (dir, es, bytes) = table_bytes(kind);
        let (mut opened, mut failed_open) = (0, 0);
        for i in 0..bytes.len() {
            let f = dir.file("c.sst").unwrap();
            f.corrupt_byte(i as u64);
            match Table::open(dir.open_read("c.sst").unwrap(), Some(0x5eed)) {
                Err(_) => failed_open += 1,
                Ok(t) => {
                    opened += 1;
                    let t = Arc::new(t);
                    for (k, v) in es.iter().step_by(5) {
                        if let Ok(got) = t.get(k) {
                            assert_eq!(got, Some((k.clone(), v.clone())), "{kind}: flip at {i}");
                        }
                    }
                    let mut it = t.iter();
                    let mut n = 0;
                    if it.seek_to_first().is_ok() {
                        while it.valid() {
                            assert_eq!(
                                (it.key(), it.value()),
                                (&es[n].0[..], &es[n].1[..]),
                                "{kind}: flip at {i}"
                            );
                            n += 1;
                            if it.next().is_err() {
                                assert!(it.status().is_err() && !it.valid());
                                break;
                            }
                        }
                    }
                }
            }
            f.corrupt_byte(i as u64);
        }
        // Data-block flips open fine (blocks are checked when read); every
        // other byte is in a checked header, section or footer.
        assert!(
            opened > 0 && failed_open > 0,
            "{kind}: {opened} opened, {failed_open} refused"
        );
        assert_eq!(dir.file("c.sst").unwrap().contents(), bytes);
    }
}

#[test]
fn wrong_build_id_truncation_and_unsorted_adds_are_errors() {
    let (dir, es, bytes) = table_bytes("pgm");
    let e = Table::open(dir.open_read("c.sst").unwrap(), Some(1)).unwrap_err();
    assert!(e.to_string().contains("c.sst") && e.is_corruption(), "{e}");
    assert!(Table::open(dir.open_read("c.sst").unwrap(), None).is_ok());
    let short = dir.create("short.sst").unwrap();
    short.write_at(0, &bytes[..bytes.len() - 1]).unwrap();
    assert!(Table::open(dir.open_read("short.sst").unwrap(), None).is_err());
    let mut b = TableBuilder::new(&dir, "u.sst", &opts("pgm", 16)).unwrap();
    b.add(&es[1].0, b"").unwrap();
    let e = b.add(&es[0].0, b"").unwrap_err();
    assert!(e.to_string().contains("out of order"), "{e}");
    assert!(b.add(&es[1].0, b"").is_err(), "duplicates are out of order too");
    assert!(b.add(b"short", b"").is_err(), "not an internal key");
    assert!(
        TableBuilder::new(&dir, "e.sst", &opts("pgm", 16))
            .unwrap()
            .finish()
            .is_err()
    );
    assert!(TableBuilder::new(&dir, "k.sst", &opts("btree", 16)).is_err());
}

#[test]
fn tables_and_iterators_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Table>();
    send::<TableIter>();
    send::<TableBuilder>();
}

#[test]
fn index_specs_parse_and_check() {
    assert_eq!(IndexSpec::parse("pgm").unwrap(), IndexSpec::default());
    let s = IndexSpec::parse("fp,boundary=64").unwrap();
    assert_eq!((s.kind.as_str(), s.boundary), ("fp", 64));
    assert_eq!(IndexSpec::parse("rmi:boundary=8").unwrap().boundary, 8);
    assert!(IndexSpec::parse("air,profile=nvme").unwrap().profile.is_some());
    for bad in [
        "",
        "btree",
        "pgm,boundary=0",
        "pgm,boundary=65537",
        "pgm,eps=3",
        "pgm,boundary",
        "pgm,profile=nvme",
    ] {
        assert!(IndexSpec::parse(bad).is_err(), "{bad:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_tables_match_the_oracle(
        raw in prop::collection::vec((prop::collection::vec(0u8..4, 0..6), 0u64..50, any::<bool>(), prop::collection::vec(any::<u8>(), 0..20)), 1..300),
        kind in prop::sample::select(INDEX_KINDS),
        boundary in prop::sample::select(&BOUNDARIES[..]),
        restart in 1usize..5,
    ) {
        let es = entries(raw.into_iter().map(|(u, s, put, v)| (u, s, if put { ValueKind::Put } else { ValueKind::Delete }, v)).collect());
        let dir = MemDirectory::new();
        let mut o = opts(kind, boundary);
        o.block_size = 64;
        o.restart_interval = restart;
        build(&dir, "p.sst", &es, &o);
        let t = open(&dir, "p.sst");
        let absent: Vec<Vec<u8>> = vec![vec![9], vec![0, 0, 0, 0, 0, 0, 0], vec![3; 7]];
        check(&t, &es, &absent, 1);
    }
}
