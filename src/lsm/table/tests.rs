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

/// The table unpinned, reading through a new cache of `cache` bytes (no
/// cache for `None`).
fn open_unpinned(
    dir: &MemDirectory,
    name: &str,
    cache: Option<u64>,
) -> (Arc<Table>, Option<Arc<BlockCache>>) {
    let t = Table::open(dir.open_read(name).unwrap(), Some(0x5eed))
        .unwrap()
        .pinned(false);
    let c = cache.map(|b| Arc::new(BlockCache::new(b)));
    let t = match &c {
        Some(c) => t.with_cache(c.clone()),
        None => t,
    };
    assert!(!t.is_pinned());
    assert_eq!(t.memory(), TableMemory::default());
    (Arc::new(t), c)
}

/// Cache sizes for unpinned tables of `meta`: none, one smaller than any
/// section (nothing of them is kept), one that holds the larger section and
/// a few blocks (sections are evicted between calls), and a large one.
fn unpinned_caches(meta: &TableMeta, block_size: usize) -> [Option<u64>; 4] {
    let section = meta.index_bytes.max(meta.filter_bytes) + 64;
    [
        None,
        Some(32),
        Some(section + 3 * (block_size as u64 + 64)),
        Some(64 << 20),
    ]
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
                assert!(t.is_pinned());
                assert_eq!(t.memory().index_bytes, meta.index_bytes, "{kind} {name}");
                assert_eq!(t.memory().filter_bytes, meta.filter_bytes, "{kind} {name}");
                check(&t, es, absent, boundary as u64);
                if boundary == 16 {
                    for cache in unpinned_caches(&meta, o.block_size) {
                        let (t, c) = open_unpinned(&dir, "t.sst", cache);
                        check(&t, es, absent, boundary as u64);
                        if let Some(c) = c {
                            let st = c.stats();
                            assert!(st.bytes <= st.capacity, "{kind} {name}: {st:?}");
                        }
                    }
                }
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
        let meta = build(&dir, "p.sst", &es, &o);
        let t = open(&dir, "p.sst");
        let absent: Vec<Vec<u8>> = vec![vec![9], vec![0, 0, 0, 0, 0, 0, 0], vec![3; 7]];
        check(&t, &es, &absent, 1);
        for cache in unpinned_caches(&meta, o.block_size) {
            let (u, _) = open_unpinned(&dir, "p.sst", cache);
            check(&u, &es, &absent, 1);
        }
    }
}

/// An unpinned table reads its filter and index once through its cache
/// (one read each) and then only data blocks; without a cache, each lookup
/// reads both sections again, and compaction-style iterators do not fill
/// the cache.
#[test]
fn unpinned_sections_are_read_once_through_the_cache() {
    let dir = MemDirectory::new();
    let (es, _) = u64_keys(20_000, 5);
    let meta = build(&dir, "io.sst", &es, &opts("pgm", 16));
    let reads = |cache: Option<u64>, lookups: usize| {
        let io = IoContext::default();
        let mut t = Table::open(io.wrap(dir.open_read("io.sst").unwrap()), None)
            .unwrap()
            .pinned(false);
        let c = cache.map(|b| Arc::new(BlockCache::new(b)));
        if let Some(c) = &c {
            t = t.with_cache(c.clone());
        }
        let before = io.stats.snapshot();
        for (k, _) in es.iter().take(lookups) {
            assert!(t.get(k).unwrap().is_some());
        }
        (io.stats.snapshot().since(&before).read_calls, c)
    };
    // Keys 0..10 lie in one data block: filter, index, block, then hits.
    let (n, c) = reads(Some(64 << 20), 10);
    assert_eq!(n, 3);
    let st = c.unwrap().stats();
    assert_eq!(st.blocks, 3);
    // Charged the sections' decoded bytes and one data block.
    let sections = meta.index_bytes + meta.filter_bytes + 3 * 64;
    assert!(
        st.bytes > sections && st.bytes <= sections + 4096 + 512,
        "{st:?} {meta:?}"
    );
    assert_eq!(reads(None, 10).0, 30);
    // A cache that holds the index and the block but not the filter: the
    // filter is read per lookup.
    assert!(
        meta.filter_bytes > 12 << 10 && meta.index_bytes < 4 << 10,
        "{meta:?}"
    );
    assert_eq!(reads(Some(12 << 10), 10).0, 12);
    // An iterator that does not fill the cache leaves it empty.
    let cache = Arc::new(BlockCache::new(64 << 20));
    let t = Arc::new(
        Table::open(dir.open_read("io.sst").unwrap(), None)
            .unwrap()
            .pinned(false)
            .with_cache(cache.clone()),
    );
    let mut it = t.iter().without_cache_fill();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, es.len());
    assert_eq!(cache.stats().blocks, 0);
}

/// A byte of the handles, index or filter section flipped after an
/// unpinned table was opened: the lookup that loads the section fails with
/// a corruption error naming the file (never a panic or a wrong answer),
/// and the table answers again once the byte is restored.
#[test]
fn a_corrupt_section_of_an_unpinned_table_is_an_error_on_the_lookup_that_loads_it() {
    for kind in ["fp", "pgm"] {
        let (dir, es, bytes) = table_bytes(kind);
        let len = bytes.len() as u64;
        let footer =
            super::layout::Footer::decode(&bytes[bytes.len() - super::layout::FOOTER_LEN..], len, "c.sst")
                .unwrap();
        let (start, _) = footer.sections[0];
        let (f_off, f_len) = footer.sections[2];
        let (k0, v0) = &es[0];
        for at in start..f_off + f_len + 4 {
            let (t, _) = open_unpinned(&dir, "c.sst", Some(1 << 20));
            let f = dir.file("c.sst").unwrap();
            f.corrupt_byte(at);
            let e = t.get(k0).unwrap_err();
            assert!(
                e.is_corruption() && e.to_string().contains("c.sst"),
                "{kind} {at}: {e}"
            );
            let in_filter = at >= f_off;
            let mut it = t.iter();
            match it.seek(k0) {
                Ok(()) => {
                    // The filter is not needed to seek.
                    assert!(in_filter, "{kind} {at}");
                    assert_eq!((it.key(), it.value()), (&k0[..], &v0[..]));
                }
                Err(e) => {
                    assert!(!in_filter && e.is_corruption(), "{kind} {at}: {e}");
                    assert!(it.status().is_err() && !it.valid());
                }
            }
            f.corrupt_byte(at);
            assert_eq!(t.get(k0).unwrap(), Some((k0.clone(), v0.clone())), "{kind} {at}");
        }
        assert_eq!(dir.file("c.sst").unwrap().contents(), bytes);
    }
}
