//! Tests of the B+-tree: page formats, bulk-load shapes, exact I/O per
//! operation, a model test against `BTreeMap` with reboots (and its proptest
//! version), corruption, fault injection, concurrency.
//!
//! `STRATA_FULL=1` enlarges the scale tests (1M random inserts into a 1M-key
//! tree, a 10M-key bulk load).

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::builder::{WRITE_BATCH_PAGES, fill_targets};
use super::format::{InnerNode, InnerPage, LeafPage, encode_leaf, leaf_insert, leaf_remove, seal_leaf};
use super::*;
use crate::Error;
use crate::index::{self, IndexSpec};
use crate::storage::{FaultKind, FaultOp, FaultyDirectory, IoSnapshot, MemDirectory, PageCache, StorageSink};

fn full_scale() -> bool {
    std::env::var("STRATA_FULL").is_ok_and(|v| v == "1")
}

fn open_tree(dir: Arc<dyn Directory>, routing: impl Into<Routing>, cache_pages: usize, ps: usize) -> BTree {
    let mut io = IoContext::default();
    if cache_pages > 0 {
        io.cache = Some(Arc::new(PageCache::new(cache_pages, ps)));
    }
    BTree::open_routed(dir, io, routing.into()).unwrap()
}

fn build_mem(keys: &[u64], ps: usize, fill: u32) -> MemDirectory {
    let dir = MemDirectory::new();
    BTree::create_ranked(&dir, keys, ps, fill).unwrap();
    dir.sync_dir().unwrap();
    dir
}

fn io_delta<R>(t: &BTree, f: impl FnOnce() -> R) -> (R, IoSnapshot) {
    let before = t.io().snapshot();
    let r = f();
    (r, t.io().snapshot().since(&before))
}

// ---------------------------------------------------------------- formats

#[test]
fn capacities_and_fill_targets() {
    assert_eq!(node_capacity(4096), 255);
    assert_eq!(node_capacity(8192), 511);
    assert_eq!(node_capacity(16384), 1023);
    assert_eq!(inner_fanout(4096), 256);
    assert_eq!(inner_fanout(8192), 512);
    assert_eq!(inner_fanout(16384), 1024);
    assert_eq!(fill_targets(4096, 100), (255, 256));
    assert_eq!(fill_targets(4096, 70), (178, 179));
    assert_eq!(fill_targets(4096, 1), (2, 2));
    assert!(check_fill(0).is_err());
    assert!(check_fill(101).is_err());
    assert_eq!(check_fill(50).unwrap(), 50);
}

#[test]
fn leaf_page_edits() {
    let mut page = vec![0u8; 4096];
    let recs: Vec<(u64, u64)> = (0..10).map(|i| (i * 10, i)).collect();
    encode_leaf(&mut page, 7, &recs, 9).unwrap();
    let l = LeafPage::open(&page, 7, "f").unwrap();
    assert_eq!((l.count(), l.next()), (10, 9));
    assert_eq!(l.lower_bound(0), 0);
    assert_eq!(l.lower_bound(15), 2);
    assert_eq!(l.lower_bound(90), 9);
    assert_eq!(l.lower_bound(91), 10);
    assert_eq!(l.record(3), Some((30, 3)));
    assert_eq!(l.record(10), None);
    assert!(LeafPage::open(&page, 8, "f").unwrap_err().is_corruption());
    leaf_insert(&mut page, 10, 2, 15, 99).unwrap();
    leaf_remove(&mut page, 11, 0).unwrap();
    seal_leaf(&mut page, 7, 10, 0);
    let l = LeafPage::open(&page, 7, "f").unwrap();
    let got: Vec<_> = (0..l.count()).map(|i| l.record(i).unwrap()).collect();
    let mut want = recs.clone();
    want.insert(2, (15, 99));
    want.remove(0);
    assert_eq!(got, want);
    assert!(encode_leaf(&mut page, 7, &vec![(0, 0); 256], 0).is_err());
    // A full leaf takes no insert.
    let full: Vec<(u64, u64)> = (0..255).map(|i| (i, i)).collect();
    encode_leaf(&mut page, 1, &full, 0).unwrap();
    assert!(leaf_insert(&mut page, 255, 0, 1000, 0).is_err());
    // A count above the capacity is corruption, not a panic.
    seal_leaf(&mut page, 1, 300, 0);
    assert!(LeafPage::open(&page, 1, "f").unwrap_err().is_corruption());
}

#[test]
fn inner_page_roundtrip_and_routing() {
    let node = InnerNode {
        keys: vec![10, 20, 30],
        children: vec![5, 6, 7, 8],
    };
    let mut page = vec![0u8; 8192];
    node.encode(&mut page, 3).unwrap();
    let v = InnerPage::open(&page, 3, "f").unwrap();
    assert_eq!(v.decode(), node);
    for (key, child) in [(0, 0), (9, 0), (10, 1), (19, 1), (20, 2), (30, 3), (u64::MAX, 3)] {
        assert_eq!(v.route(key), child, "route({key})");
        assert_eq!(node.route(key), child);
    }
    assert_eq!(v.child(0), Some(5));
    assert_eq!(v.child(3), Some(8));
    assert_eq!(v.child(4), None);
    assert!(LeafPage::open(&page, 3, "f").unwrap_err().is_corruption());
    let too_big = InnerNode {
        keys: (0..512).collect(),
        children: (0..513).collect(),
    };
    assert!(too_big.encode(&mut page, 3).is_err());
}

#[test]
fn meta_roundtrip_and_checks() {
    let dir = build_mem(&(0..1000).collect::<Vec<_>>(), 4096, 100);
    let f = dir.open(BTREE_FILE).unwrap();
    let m = Meta::read(f.as_ref()).unwrap();
    assert_eq!(m.n, 1000);
    assert_eq!(m.leaves, 4);
    assert_eq!(m.inner, 1);
    assert_eq!(m.height, 2);
    assert_eq!(m.space.page_count, 6);
    assert_eq!(m.root, 5, "the root is written last");
    let mut page = vec![0u8; 4096];
    m.encode(&mut page);
    let mut bad = m;
    bad.leaves = 7;
    assert!(bad.check("f").is_err());
    let mut bad = m;
    bad.root = 6;
    assert!(bad.check("f").is_err());
    let mut bad = m;
    bad.height = 1;
    assert!(bad.check("f").is_err());
}

// -------------------------------------------------------------- bulk load

#[test]
fn bulk_load_shapes() {
    // (n, fill, page) -> (height, leaves, inner)
    let cases: [(u64, u32, usize, u32, u64, u64); 9] = [
        (0, 100, 4096, 1, 1, 0),
        (1, 100, 4096, 1, 1, 0),
        (255, 100, 4096, 1, 1, 0),
        (256, 100, 4096, 2, 2, 1),
        (255 * 256, 100, 4096, 2, 256, 1),
        (255 * 256 + 1, 100, 4096, 3, 257, 3),
        (1000, 70, 4096, 2, 6, 1), // 178 per leaf
        (1023, 100, 16384, 1, 1, 0),
        (100_000, 100, 4096, 3, 393, 3),
    ];
    for (n, fill, ps, height, leaves, inner) in cases {
        let keys: Vec<u64> = (0..n).map(|i| i * 7 + 3).collect();
        let dir = build_mem(&keys, ps, fill);
        let t = open_tree(Arc::new(dir), Residency::Index, 0, ps);
        let m = t.meta();
        assert_eq!(
            (m.height, m.leaves, m.inner),
            (height, leaves, inner),
            "n={n} fill={fill} page={ps}"
        );
        let rep = t.verify().unwrap();
        assert_eq!(rep.records, n);
        for (i, &k) in keys.iter().enumerate().step_by(97) {
            assert_eq!(t.get(k).unwrap(), Some(i as u64));
            assert_eq!(t.get(k + 1).unwrap(), None);
        }
    }
}

#[test]
fn bulk_load_rejects_unsorted_input() {
    let dir = MemDirectory::new();
    let mut b = BulkLoader::new(dir.create_sink("x", 4096).unwrap(), 4096, 100).unwrap();
    b.push(5, 0).unwrap();
    match b.push(5, 1) {
        Err(Error::OutOfOrder {
            position,
            previous,
            got,
        }) => assert_eq!((position, previous, got), (1, 5, 5)),
        other => panic!("{other:?}"),
    }
    assert!(BulkLoader::new(dir.create_sink("y", 5000).unwrap(), 5000, 100).is_err());
    assert!(BulkLoader::new(dir.create_sink("z", 4096).unwrap(), 4096, 0).is_err());
}

#[test]
fn bulk_load_writes_in_large_calls() {
    let keys: Vec<u64> = (0..200_000).collect();
    let dir = MemDirectory::new();
    let io = IoContext::default();
    let f = io.wrap_rw(dir.create(BTREE_FILE).unwrap());
    let sink = Box::new(StorageSink::new(f, 4096).unwrap());
    let m = load_ranked(sink, &keys, 4096, 100).unwrap();
    let s = io.stats.snapshot();
    // Node pages in batches of 256, then the meta page and one sync (the
    // file is not part of an index until its manifest is published).
    let node_pages = m.space.page_count - 1;
    assert_eq!(s.write_calls, node_pages.div_ceil(WRITE_BATCH_PAGES as u64) + 1);
    assert_eq!(s.bytes_written, m.space.page_count * 4096);
    assert_eq!(s.syncs, 1);
    // A sink that did not reserve the meta page is refused.
    assert!(BulkLoader::new(dir.create_sink("w", 0).unwrap(), 4096, 100).is_err());
}

/// Bulk-load throughput; 10M keys with `STRATA_FULL=1` (run it with
/// `--release -- --nocapture` to read the figure).
#[test]
fn bulk_load_speed() {
    let n: u64 = if full_scale() { 10_000_000 } else { 1_000_000 };
    let keys: Vec<u64> = (0..n).map(|i| i * 3 + (i >> 7)).collect();
    let tmp = tempfile::tempdir().unwrap();
    let dir = crate::storage::FsDirectory::create_all(tmp.path()).unwrap();
    let t0 = std::time::Instant::now();
    let m = BTree::create_ranked(&dir, &keys, 4096, 100).unwrap();
    let s = t0.elapsed().as_secs_f64();
    println!(
        "bulk load: {n} keys in {s:.3} s = {:.1} M keys/s ({} pages, height {})",
        n as f64 / s / 1e6,
        m.space.page_count,
        m.height
    );
    assert_eq!(m.n, n);
}

/// Point-lookup throughput on local files (warm OS cache, then `O_DIRECT`),
/// against the `binary` kind in the same run. 10M keys with
/// `STRATA_FULL=1`; run with `--release -- --nocapture` to read it.
#[test]
fn lookup_speed() {
    let n: u64 = if full_scale() { 10_000_000 } else { 100_000 };
    let ops = if full_scale() { 200_000 } else { 4_000 };
    let keys: Vec<u64> = (0..n).map(|i| i * 3 + (i >> 7)).collect();
    let tmp = tempfile::tempdir().unwrap();
    for spec in ["btree", "binary"] {
        let path = tmp.path().join(spec);
        let spec_p: IndexSpec = spec.parse().unwrap();
        index::registry()
            .build(&spec_p, &keys, &path, &BuildOptions::default())
            .unwrap();
        for (what, direct, resident) in [
            ("warm, resident=index", false, Residency::Index),
            ("warm, resident=none", false, Residency::None),
            ("O_DIRECT, resident=index", true, Residency::Index),
            ("O_DIRECT, resident=none", true, Residency::None),
        ] {
            let opts = OpenOptions {
                direct,
                resident,
                ..Default::default()
            };
            let idx = index::registry().open(&path, &opts).unwrap();
            let mut rng = Pcg64Mcg::seed_from_u64(5);
            // Device-bound runs need fewer operations for a stable figure.
            let ops = if direct { ops / 10 } else { ops };
            let probe: Vec<usize> = (0..ops).map(|_| rng.random_range(0..keys.len())).collect();
            let before = idx.io().snapshot();
            let t0 = std::time::Instant::now();
            for &i in &probe {
                assert_eq!(idx.get(keys[i]).unwrap(), Some(i as u64));
            }
            let s = t0.elapsed().as_secs_f64();
            let d = idx.io().snapshot().since(&before);
            println!(
                "{spec:6} {what:26} {:>9.0} lookups/s  {:.2} pages/op  memory {} B",
                ops as f64 / s,
                d.pages_read as f64 / ops as f64,
                idx.stats().unwrap().memory_bytes
            );
        }
    }
}

// ------------------------------------------------------ I/O per operation

/// 100,000 keys `10·i` (value `i`), fill 100: 392 full leaves and one of
/// 40 records, 2 + 1 inner nodes, height 3.
fn io_tree() -> (MemDirectory, Vec<u64>) {
    let keys: Vec<u64> = (0..100_000u64).map(|i| i * 10).collect();
    (build_mem(&keys, 4096, 100), keys)
}

#[test]
fn lookup_reads_one_page_with_inner_nodes_resident() {
    let (dir, keys) = io_tree();
    let t = open_tree(Arc::new(dir), Residency::Index, 0, 4096);
    assert_eq!(t.meta().height, 3);
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    for _ in 0..2000 {
        let i = rng.random_range(0..keys.len());
        let (got, d) = io_delta(&t, || t.get(keys[i]).unwrap());
        assert_eq!(got, Some(i as u64));
        assert_eq!((d.pages_read, d.read_calls), (1, 1), "get({})", keys[i]);
        // Absent keys, and lower bounds of keys in the gaps, also read 1 page.
        let q = keys[i] + 1 + rng.random_range(0..9);
        let (got, d) = io_delta(&t, || t.get(q).unwrap());
        assert_eq!(got, None);
        assert_eq!((d.pages_read, d.read_calls), (1, 1));
        let (lb, d) = io_delta(&t, || t.lower_bound(q).unwrap());
        assert_eq!(lb, keys.get(i + 1).map(|&k| (k, i as u64 + 1)));
        assert_eq!((d.pages_read, d.read_calls), (1, 1), "lower_bound({q})");
    }
    // Still exactly one page after splits changed the inner nodes.
    for j in 0..20_000u64 {
        t.insert(j * 50 + 5, j).unwrap();
    }
    assert!(t.meta().leaves > 393);
    for _ in 0..500 {
        let i = rng.random_range(0..keys.len());
        let (got, d) = io_delta(&t, || t.get(keys[i]).unwrap());
        assert_eq!(got, Some(i as u64));
        assert_eq!((d.pages_read, d.read_calls), (1, 1));
    }
    t.verify().unwrap();
}

#[test]
fn lookup_reads_height_pages_without_residency() {
    let (dir, keys) = io_tree();
    let t = open_tree(Arc::new(dir), Residency::None, 0, 4096);
    let h = u64::from(t.meta().height);
    assert_eq!(h, 3);
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    for _ in 0..1000 {
        let i = rng.random_range(0..keys.len());
        let before = t.pager.blocks().snapshot();
        let (got, d) = io_delta(&t, || t.get(keys[i]).unwrap());
        assert_eq!(got, Some(i as u64));
        assert_eq!((d.pages_read, d.read_calls), (h, h));
        // Lan's Table 4 split: `height - 1` inner blocks and one leaf.
        let b = t.pager.blocks().snapshot().since(&before);
        assert_eq!((b.inner_read, b.leaf_read, b.other_read), (h - 1, 1, 0));
    }
    assert!(t.memory_bytes() < 64 * 1024, "nothing pinned");
}

#[test]
fn inserts_count_leaf_writes_and_splits() {
    let (dir, keys) = io_tree();
    let t = open_tree(Arc::new(dir), Residency::Index, 0, 4096);
    let before = t.pager.blocks().snapshot();
    // The tree is full (fill 100 %): the first insert into a leaf splits it.
    let k = keys[1000] + 1;
    assert_ne!(keys[1001], k);
    t.insert_impl(k, 7).unwrap();
    let b = t.pager.blocks().snapshot().since(&before);
    assert_eq!((b.leaf_read, b.smo), (1, 1));
    assert!(b.leaf_written >= 2, "both halves written: {b:?}");
    // A second insert into the half-empty leaf writes only it.
    let before = t.pager.blocks().snapshot();
    t.insert_impl(k + 1, 8).unwrap();
    let b = t.pager.blocks().snapshot().since(&before);
    assert_eq!(
        (b.leaf_read, b.leaf_written, b.inner_written, b.smo),
        (1, 1, 0, 0)
    );
    let stats = Index::stats(&t).unwrap();
    assert_eq!(stats.extra["blocks"]["smo"], 1);
}

#[test]
fn scan_reads_one_page_per_leaf_spanned() {
    let (dir, keys) = io_tree();
    let dir: Arc<dyn Directory> = Arc::new(dir);
    let pinned = open_tree(dir.clone(), Residency::Index, 0, 4096);
    let cold = open_tree(dir, Residency::None, 0, 4096);
    // Every leaf but the last holds 255 records: record r sits at slot
    // s = r mod 255, and a 100-record scan from it spans ⌈(s + 100) / 255⌉
    // leaves, i.e. 1 page for s <= 155 and 2 pages for s >= 156.
    let mut starts: Vec<usize> = vec![0, 1, 154, 155, 156, 157, 254, 255, 256, 410, 411];
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    starts.extend((0..300).map(|_| rng.random_range(0..keys.len() - 100)));
    for r in starts {
        let s = (r % 255) as u64;
        let spanned = (s + 100).div_ceil(255);
        let want: Vec<(u64, u64)> = (r..r + 100).map(|i| (keys[i], i as u64)).collect();
        let mut out = Vec::new();
        let (_, d) = io_delta(&pinned, || pinned.scan(keys[r], 100, &mut out).unwrap());
        assert_eq!(out, want);
        assert_eq!(
            (d.pages_read, d.read_calls),
            (spanned, spanned),
            "scan from slot {s}"
        );
        // From a key in the gap before record r: same leaves.
        if r > 0 {
            out.clear();
            let (_, d) = io_delta(&pinned, || pinned.scan(keys[r] - 5, 100, &mut out).unwrap());
            assert_eq!(out, want);
            assert_eq!(d.pages_read, spanned);
        }
        out.clear();
        let (_, d) = io_delta(&cold, || cold.scan(keys[r], 100, &mut out).unwrap());
        assert_eq!(out, want);
        assert_eq!(d.pages_read, 2 + spanned, "height 3: two inner pages first");
    }
    // Near the end: the last leaf holds 40 records; the scan stops there.
    let mut out = Vec::new();
    let (_, d) = io_delta(&pinned, || pinned.scan(keys[99_950], 100, &mut out).unwrap());
    assert_eq!(out.len(), 50);
    assert_eq!(d.pages_read, 2, "slot 245 of leaf 391, then the last leaf");
    let (_, d) = io_delta(&pinned, || pinned.scan(0, 0, &mut out).unwrap());
    assert_eq!(d.read_calls, 0);
}

#[test]
fn cache_serves_repeated_reads() {
    let (dir, keys) = io_tree();
    let t = open_tree(Arc::new(dir), Residency::None, 16, 4096);
    let before = t.memory_bytes();
    let (_, d) = io_delta(&t, || t.get(keys[500]).unwrap());
    assert_eq!(d.pages_read, 3);
    let (_, d) = io_delta(&t, || t.get(keys[501]).unwrap());
    assert_eq!(d.pages_read, 0, "all three pages cached");
    assert_eq!(t.memory_bytes(), before + 3 * 4096);
    let st = t.stats().unwrap();
    assert_eq!(st.height, Some(3));
    assert_eq!(st.extra["leaves"], 393);
    assert_eq!(st.extra["fanout"], 256);
}

#[test]
fn learned_directory_reads_one_page_per_lookup_and_insert() {
    let (dir, keys) = io_tree();
    let dir: Arc<dyn Directory> = Arc::new(dir);
    let t = open_tree(dir.clone(), Routing::Learned, 0, 4096);
    let pinned = open_tree(dir, Routing::Pinned, 0, 4096);
    assert_eq!(t.meta().height, 3);
    let mut rng = Pcg64Mcg::seed_from_u64(5);
    for _ in 0..1000 {
        let i = rng.random_range(0..keys.len());
        let (got, d) = io_delta(&t, || t.get(keys[i]).unwrap());
        assert_eq!(got, Some(i as u64));
        assert_eq!((d.pages_read, d.read_calls), (1, 1), "get({})", keys[i]);
        let q = keys[i] + 1 + rng.random_range(0..9);
        let (lb, d) = io_delta(&t, || t.lower_bound(q).unwrap());
        assert_eq!(lb, keys.get(i + 1).map(|&k| (k, i as u64 + 1)));
        // A bulk-loaded tree's separators are `last + 1`: one leaf.
        assert_eq!(d.pages_read, 1, "lower_bound({q})");
    }
    // Inserts: one leaf read; no inner page is read or written but when
    // `PENDING_MAX` splits have gathered (the inner nodes are then read
    // once and each split written into them).
    let all = t.pager.blocks().snapshot();
    for j in 0..20_000u64 {
        let k = j * 50 + 5;
        let before = t.pager.blocks().snapshot();
        t.insert(k, j).unwrap();
        let b = t.pager.blocks().snapshot().since(&before);
        assert_eq!(b.leaf_read, 1, "insert({k})");
        if b.smo == 0 {
            assert_eq!(
                (b.inner_read, b.leaf_written, b.inner_written),
                (0, 1, 0),
                "insert({k})"
            );
        } else {
            assert_eq!(b.leaf_written, 2, "a split writes both halves: {b:?}");
        }
    }
    let b = t.pager.blocks().snapshot().since(&all);
    let flushes = b.smo / super::writer::PENDING_MAX as u64;
    assert!(b.inner_read <= flushes * t.meta().inner, "{b:?}");
    assert!(b.smo > 100);
    for _ in 0..500 {
        let i = rng.random_range(0..keys.len());
        let (got, d) = io_delta(&t, || t.get(keys[i]).unwrap());
        assert_eq!(got, Some(i as u64));
        assert_eq!((d.pages_read, d.read_calls), (1, 1));
    }
    t.verify().unwrap();
    let st = Index::stats(&t).unwrap();
    assert_eq!(st.kind, "btree-ld");
    let dir_bytes = st.extra["directory_bytes"].as_u64().unwrap();
    let pinned_bytes = pinned.state.read().pinned.as_ref().unwrap().memory_bytes();
    assert!(
        dir_bytes * 2 < pinned_bytes,
        "directory {dir_bytes} B, pinned inner nodes {pinned_bytes} B"
    );
}

#[test]
fn learned_directory_is_refused_when_it_disagrees_with_the_tree() {
    let keys: Vec<u64> = (0..5000u64).map(|i| i * 3).collect();
    let t = open_tree(Arc::new(build_mem(&keys, 4096, 100)), Routing::Learned, 0, 4096);
    // Seeded bug: the directory loses a leaf.
    {
        let mut st = t.state.write();
        let d = st.ldir.as_mut().unwrap();
        d.remove(255 * 3 * 5, d.leaf_for(255 * 3 * 5).unwrap(), true)
            .unwrap();
    }
    let e = t.verify().unwrap_err();
    assert!(e.to_string().contains("leaf directory"), "{e}");
    // Inserts routed by the directory to the wrong leaf split it; writing
    // those splits into the inner nodes finds the disagreement and poisons
    // the tree.
    for k in 0..300u64 {
        t.insert(255 * 3 * 5 + 1 + 3 * k, 0).unwrap();
    }
    let e = t.sync().unwrap_err();
    assert!(e.to_string().contains("leaf directory"), "{e}");
    assert!(t.insert(1, 1).is_err(), "poisoned");
}

#[test]
fn memory_bytes_counts_pinned_nodes() {
    let keys: Vec<u64> = (0..1_000_000u64).collect();
    let dir: Arc<dyn Directory> = Arc::new(build_mem(&keys, 4096, 100));
    let pinned = open_tree(dir.clone(), Residency::Index, 0, 4096);
    let cold = open_tree(dir, Residency::None, 0, 4096);
    let m = pinned.meta();
    // 3922 leaves -> 16 level-1 nodes -> 1 root.
    assert_eq!((m.leaves, m.inner, m.height), (3922, 17, 3));
    let entries = m.leaves + m.inner - 1; // every child link
    let pinned_bytes = pinned.memory_bytes() - cold.memory_bytes();
    assert!(pinned_bytes >= entries * 15, "{pinned_bytes}");
    assert!(pinned_bytes < entries * 16 + 8192, "{pinned_bytes}");
}

// ------------------------------------------------------------ model tests

#[derive(Debug, Clone, Copy)]
struct ModelRun {
    page: usize,
    residency: Routing,
    cache: usize,
    fill: u32,
    initial: usize,
    ops: usize,
    seed: u64,
}

fn gen_key(rng: &mut Pcg64Mcg) -> u64 {
    match rng.random_range(0..20) {
        0 => [0, 1, u64::MAX, u64::MAX - 1][rng.random_range(0..4)],
        1..=12 => rng.random_range(0..30_000u64) * 3,
        _ => rng.random::<u64>(),
    }
}

fn existing_key(model: &BTreeMap<u64, u64>, rng: &mut Pcg64Mcg) -> Option<u64> {
    let probe = gen_key(rng);
    model
        .range(probe..)
        .next()
        .or_else(|| model.iter().next_back())
        .map(|(&k, _)| k)
}

fn check_scan(t: &BTree, model: &BTreeMap<u64, u64>, from: u64, count: usize) {
    let mut out = Vec::new();
    t.scan(from, count, &mut out).unwrap();
    let want: Vec<(u64, u64)> = model.range(from..).take(count).map(|(&k, &v)| (k, v)).collect();
    assert_eq!(out, want, "scan({from}, {count})");
}

fn run_model(cfg: ModelRun) {
    let mut rng = Pcg64Mcg::seed_from_u64(cfg.seed);
    let mut keys: Vec<u64> = (0..cfg.initial).map(|_| gen_key(&mut rng)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mem = build_mem(&keys, cfg.page, cfg.fill);
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let mut model: BTreeMap<u64, u64> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let mut t = open_tree(dir.clone(), cfg.residency, cfg.cache, cfg.page);
    let phase_len = (cfg.ops / 6).max(1);
    let mut max_height = 0;
    let mut frees = 0u64;
    for step in 0..cfg.ops {
        // Alternate growing and shrinking phases so leaves empty and the
        // root collapses as well as splits.
        let shrinking = (step / phase_len) % 2 == 1;
        let r = rng.random_range(0..100);
        match r {
            0..=34 if !shrinking => {
                let (k, v) = (gen_key(&mut rng), rng.random());
                assert_eq!(t.insert(k, v).unwrap(), model.insert(k, v), "insert({k})");
            }
            0..=34 => {
                // A run of consecutive records: empties leaves.
                let run = rng.random_range(1..16);
                if let Some(k) = existing_key(&model, &mut rng) {
                    let doomed: Vec<u64> = model.range(k..).take(run).map(|(&k, _)| k).collect();
                    let before = t.meta().space.free_pages;
                    for d in doomed {
                        assert!(t.delete(d).unwrap(), "delete({d})");
                        model.remove(&d);
                    }
                    frees += u64::from(t.meta().space.free_pages > before);
                }
            }
            35..=44 => {
                if let Some(k) = existing_key(&model, &mut rng) {
                    let v = rng.random();
                    assert_eq!(t.insert(k, v).unwrap(), model.insert(k, v), "update({k})");
                }
            }
            45..=54 => {
                let k = gen_key(&mut rng);
                assert_eq!(t.delete(k).unwrap(), model.remove(&k).is_some(), "delete({k})");
            }
            55..=74 => {
                let k = if rng.random_bool(0.5) {
                    existing_key(&model, &mut rng).unwrap_or(0)
                } else {
                    gen_key(&mut rng)
                };
                assert_eq!(t.get(k).unwrap(), model.get(&k).copied(), "get({k})");
            }
            75..=86 => {
                let k = gen_key(&mut rng).wrapping_add(rng.random_range(0..3));
                let want = model.range(k..).next().map(|(&a, &b)| (a, b));
                assert_eq!(t.lower_bound(k).unwrap(), want, "lower_bound({k})");
            }
            87..=97 => {
                let count = [0, 1, 100, 300, 700][rng.random_range(0..5)];
                check_scan(&t, &model, gen_key(&mut rng), count);
            }
            _ => {
                // Reboot: close (or sync, crash and recover) and reopen.
                if rng.random_bool(0.5) {
                    t.sync().unwrap();
                    drop(t);
                    mem.crash();
                } else {
                    drop(t);
                }
                t = open_tree(dir.clone(), cfg.residency, cfg.cache, cfg.page);
                assert_eq!(t.len(), model.len() as u64);
                let rep = t.verify().unwrap();
                assert_eq!(rep.records, model.len() as u64);
            }
        }
        max_height = max_height.max(t.meta().height);
    }
    let rep = t.verify().unwrap();
    assert_eq!(rep.records, model.len() as u64);
    check_scan(&t, &model, 0, usize::MAX);
    assert!(max_height >= 2, "{cfg:?}: the tree never grew");
    assert!(frees > 0 || cfg.ops < 5000, "{cfg:?}: no leaf was ever freed");
}

fn model_ops() -> usize {
    if full_scale() { 200_000 } else { 12_000 }
}

#[test]
fn model_4k_resident_index() {
    run_model(ModelRun {
        page: 4096,
        residency: Routing::Pinned,
        cache: 0,
        fill: 100,
        initial: 3000,
        ops: model_ops(),
        seed: 11,
    });
}

#[test]
fn model_4k_learned() {
    run_model(ModelRun {
        page: 4096,
        residency: Routing::Learned,
        cache: 0,
        fill: 100,
        initial: 3000,
        ops: model_ops(),
        seed: 17,
    });
}

#[test]
fn model_8k_learned_small_cache() {
    run_model(ModelRun {
        page: 8192,
        residency: Routing::Learned,
        cache: 8,
        fill: 70,
        initial: 6000,
        ops: model_ops(),
        seed: 18,
    });
}

#[test]
fn model_4k_resident_none() {
    run_model(ModelRun {
        page: 4096,
        residency: Routing::Disk,
        cache: 0,
        fill: 70,
        initial: 3000,
        ops: model_ops(),
        seed: 12,
    });
}

#[test]
fn model_4k_small_cache() {
    run_model(ModelRun {
        page: 4096,
        residency: Routing::Disk,
        cache: 8,
        fill: 100,
        initial: 500,
        ops: model_ops(),
        seed: 13,
    });
}

#[test]
fn model_16k_resident_index_and_cache() {
    run_model(ModelRun {
        page: 16384,
        residency: Routing::Pinned,
        cache: 4,
        fill: 100,
        initial: 4000,
        ops: model_ops(),
        seed: 14,
    });
}

#[test]
fn model_16k_resident_none() {
    run_model(ModelRun {
        page: 16384,
        residency: Routing::Disk,
        cache: 0,
        fill: 50,
        initial: 4000,
        ops: model_ops(),
        seed: 15,
    });
}

/// The same on local files read with `O_DIRECT` (writes are buffered).
#[test]
fn model_on_files_with_direct_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let keys: Vec<u64> = (0..5000u64).map(|i| i * 4).collect();
    let spec: IndexSpec = "btree:fill=90".parse().unwrap();
    index::registry()
        .build(&spec, &keys, tmp.path(), &BuildOptions::default())
        .unwrap();
    let mut model: BTreeMap<u64, u64> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let mut rng = Pcg64Mcg::seed_from_u64(16);
    for round in 0..4 {
        let opts = OpenOptions {
            direct: true,
            resident: if round % 2 == 0 {
                Residency::None
            } else {
                Residency::Index
            },
            ..Default::default()
        };
        let idx = index::registry().open(tmp.path(), &opts).unwrap();
        for _ in 0..3000 {
            let k = rng.random_range(0..25_000u64);
            if rng.random_bool(0.7) {
                assert_eq!(idx.insert(k, round).unwrap(), model.insert(k, round));
            } else {
                assert_eq!(idx.delete(k).unwrap(), model.remove(&k).is_some());
            }
            let q = rng.random_range(0..25_000u64);
            assert_eq!(idx.get(q).unwrap(), model.get(&q).copied());
        }
        idx.sync().unwrap();
        assert_eq!(idx.len(), model.len() as u64);
    }
    let idx = index::registry()
        .open(tmp.path(), &OpenOptions::default())
        .unwrap();
    let mut out = Vec::new();
    idx.scan(0, usize::MAX, &mut out).unwrap();
    assert_eq!(out, model.into_iter().collect::<Vec<_>>());
}

mod prop {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u64),
        Delete(u64),
        DeleteRun(u64, u16),
        Get(u64),
        LowerBound(u64),
        Scan(u64, u16),
        Reboot,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..4000u64, any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => (0..4000u64).prop_map(Op::Delete),
            1 => (0..4000u64, 1..400u16).prop_map(|(k, n)| Op::DeleteRun(k, n)),
            2 => (0..4100u64).prop_map(Op::Get),
            1 => (0..4100u64).prop_map(Op::LowerBound),
            1 => (0..4100u64, 0..600u16).prop_map(|(k, n)| Op::Scan(k, n)),
            1 => Just(Op::Reboot),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn model_sequences(ops in proptest::collection::vec(op(), 1..120), pinned in any::<bool>()) {
            // Full leaves of even keys: any odd insert splits.
            let keys: Vec<u64> = (0..1500u64).map(|i| i * 2).collect();
            let dir: Arc<dyn Directory> = Arc::new(build_mem(&keys, 4096, 100));
            let residency = if pinned { Residency::Index } else { Residency::None };
            let mut model: BTreeMap<u64, u64> =
                keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
            let mut t = open_tree(dir.clone(), residency, 0, 4096);
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(t.insert(k, v).unwrap(), model.insert(k, v)),
                    Op::Delete(k) => prop_assert_eq!(t.delete(k).unwrap(), model.remove(&k).is_some()),
                    Op::DeleteRun(k, n) => {
                        let doomed: Vec<u64> = model.range(k..).take(n as usize).map(|(&k, _)| k).collect();
                        for d in doomed {
                            prop_assert!(t.delete(d).unwrap());
                            model.remove(&d);
                        }
                    }
                    Op::Get(k) => prop_assert_eq!(t.get(k).unwrap(), model.get(&k).copied()),
                    Op::LowerBound(k) => prop_assert_eq!(
                        t.lower_bound(k).unwrap(),
                        model.range(k..).next().map(|(&a, &b)| (a, b))
                    ),
                    Op::Scan(k, n) => {
                        let mut out = Vec::new();
                        t.scan(k, n as usize, &mut out).unwrap();
                        let want: Vec<(u64, u64)> =
                            model.range(k..).take(n as usize).map(|(&a, &b)| (a, b)).collect();
                        prop_assert_eq!(out, want);
                    }
                    Op::Reboot => {
                        drop(t);
                        t = open_tree(dir.clone(), residency, 0, 4096);
                    }
                }
            }
            let rep = t.verify().unwrap();
            prop_assert_eq!(rep.records, model.len() as u64);
        }
    }
}

// ------------------------------------------------------- structural cases

#[test]
fn delete_everything_collapses_and_regrows() {
    for residency in [Residency::Index, Residency::None] {
        let keys: Vec<u64> = (0..70_000u64).map(|i| i * 2).collect();
        let dir: Arc<dyn Directory> = Arc::new(build_mem(&keys, 4096, 100));
        let t = open_tree(dir.clone(), residency, 0, 4096);
        assert_eq!(t.meta().height, 3);
        let pages = t.meta().space.page_count;
        // Delete from the middle outwards so left siblings are relinked.
        let mut order: Vec<u64> = keys.clone();
        let mut rng = Pcg64Mcg::seed_from_u64(21);
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        for (j, &k) in order.iter().enumerate() {
            assert!(t.delete(k).unwrap());
            if j % 10_000 == 0 {
                t.verify().unwrap();
            }
        }
        let m = t.meta();
        assert_eq!((m.n, m.height, m.leaves, m.inner), (0, 1, 1, 0));
        assert_eq!(
            m.space.free_pages,
            pages - 2,
            "every page but the meta page and one leaf"
        );
        t.verify().unwrap();
        assert_eq!(t.lower_bound(0).unwrap(), None);
        // Regrow (appending: leaves stay full) into the freed pages: the
        // file does not grow.
        for &k in &keys {
            t.insert(k, k).unwrap();
        }
        assert_eq!(t.meta().space.page_count, pages);
        t.verify().unwrap();
        drop(t);
        let t = open_tree(dir, residency, 0, 4096);
        t.verify().unwrap();
        assert_eq!(t.get(1000).unwrap(), Some(1000));
    }
}

#[test]
fn empty_leaf_in_the_middle_is_unlinked() {
    // 4 full leaves; empty the second one: it goes to the free list and the
    // first leaf links to the third.
    let keys: Vec<u64> = (0..1020u64).collect();
    let dir: Arc<dyn Directory> = Arc::new(build_mem(&keys, 4096, 100));
    let t = open_tree(dir, Residency::Index, 0, 4096);
    for k in 255..510 {
        assert!(t.delete(k).unwrap());
    }
    let m = t.meta();
    assert_eq!((m.leaves, m.space.free_pages, m.n), (3, 1, 765));
    t.verify().unwrap();
    let mut out = Vec::new();
    let (_, d) = io_delta(&t, || t.scan(250, 10, &mut out).unwrap());
    assert_eq!(
        out.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![250, 251, 252, 253, 254, 510, 511, 512, 513, 514]
    );
    assert_eq!(d.pages_read, 2);
    // Keys of the freed range are routed to its left neighbour.
    assert_eq!(t.lower_bound(300).unwrap(), Some((510, 510)));
    // The first leaf is full: the insert splits it.
    assert_eq!(t.insert(300, 1).unwrap(), None);
    assert_eq!(t.meta().leaves, 4);
    t.verify().unwrap();
}

#[test]
fn sequential_and_reverse_inserts_into_empty_tree() {
    for ps in [4096, 8192] {
        let dir: Arc<dyn Directory> = Arc::new(build_mem(&[], ps, 100));
        let t = open_tree(dir, Residency::Index, 0, ps);
        for k in 0..50_000u64 {
            assert_eq!(t.insert(k, k + 1).unwrap(), None);
        }
        for k in (0..50_000u64).rev() {
            assert_eq!(t.insert(u64::MAX - k, k).unwrap(), None);
        }
        let rep = t.verify().unwrap();
        assert_eq!(rep.records, 100_000);
        assert!(rep.height >= 3 || ps > 4096);
        assert_eq!(t.get(u64::MAX).unwrap(), Some(0));
        assert_eq!(t.get(49_999).unwrap(), Some(50_000));
        assert_eq!(t.insert(7, 70).unwrap(), Some(8));
        assert_eq!(t.get(7).unwrap(), Some(70));
    }
}

/// Random inserts into a bulk-loaded tree; 1M into 1M keys with
/// `STRATA_FULL=1`.
#[test]
fn random_inserts_at_scale() {
    let n: u64 = if full_scale() { 1_000_000 } else { 60_000 };
    let mut rng = Pcg64Mcg::seed_from_u64(31);
    let mut keys: Vec<u64> = (0..n).map(|_| rng.random::<u64>() >> 1).collect();
    keys.sort_unstable();
    keys.dedup();
    let dir: Arc<dyn Directory> = Arc::new(build_mem(&keys, 4096, 100));
    let t = open_tree(dir.clone(), Residency::Index, 0, 4096);
    let mut added: Vec<u64> = Vec::with_capacity(n as usize);
    let before = t.io().snapshot();
    let t0 = std::time::Instant::now();
    for _ in 0..n {
        let k = rng.random::<u64>() | (1 << 63);
        if t.insert(k, !k).unwrap().is_none() {
            added.push(k);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let d = t.io().snapshot().since(&before);
    println!(
        "{n} random inserts into {} keys (memory directory): {:.0} inserts/s, \
         {:.3} writes/insert, height {}",
        keys.len(),
        n as f64 / secs,
        d.write_calls as f64 / n as f64,
        t.meta().height
    );
    // With inner nodes resident an insert reads only its leaf (plus free
    // pages, never here).
    assert_eq!(d.read_calls, n);
    t.sync().unwrap();
    drop(t);
    let t = open_tree(dir, Residency::None, 0, 4096);
    let rep = t.verify().unwrap();
    assert_eq!(rep.records, keys.len() as u64 + added.len() as u64);
    for (i, &k) in keys.iter().enumerate().step_by(61) {
        assert_eq!(t.get(k).unwrap(), Some(i as u64));
    }
    for &k in added.iter().step_by(61) {
        assert_eq!(t.get(k).unwrap(), Some(!k));
    }
}

// ----------------------------------------------------- corruption, faults

#[test]
fn corrupt_leaf_and_inner_pages_are_detected() {
    let keys: Vec<u64> = (0..100_000u64).collect();
    let mem = build_mem(&keys, 4096, 100);
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let m = open_tree(dir.clone(), Residency::Index, 0, 4096).meta();
    // Leaf 2 (page 2) holds keys 255..510.
    mem.file(BTREE_FILE).unwrap().corrupt_byte(2 * 4096 + 100);
    let t = open_tree(dir.clone(), Residency::Index, 0, 4096);
    let e = t.get(300).unwrap_err();
    assert!(matches!(e, Error::Corruption { page: 2, .. }), "{e}");
    assert!(t.scan(0, 1000, &mut Vec::new()).unwrap_err().is_corruption());
    assert!(t.insert(301, 0).unwrap_err().is_corruption());
    assert!(t.delete(301).unwrap_err().is_corruption());
    assert_eq!(t.get(10).unwrap(), Some(10), "other leaves still answer");
    assert!(t.verify().is_err());
    drop(t);
    mem.file(BTREE_FILE).unwrap().corrupt_byte(2 * 4096 + 100); // undo
    // The root is an inner page.
    mem.file(BTREE_FILE).unwrap().corrupt_byte(m.root * 4096 + 40);
    let t = open_tree(dir.clone(), Residency::None, 0, 4096);
    let e = t.get(5).unwrap_err();
    assert!(
        matches!(e, Error::Corruption { page, .. } if page == m.root),
        "{e}"
    );
    let e = BTree::open(dir.clone(), IoContext::default(), Residency::Index).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    drop(t);
    mem.file(BTREE_FILE).unwrap().corrupt_byte(m.root * 4096 + 40);
    // The meta page.
    mem.file(BTREE_FILE).unwrap().corrupt_byte(200);
    let e = BTree::open(dir, IoContext::default(), Residency::None).unwrap_err();
    assert!(matches!(e, Error::Corruption { page: 0, .. }), "{e}");
}

#[test]
fn bad_files_are_typed_errors() {
    let keys: Vec<u64> = (0..5000u64).collect();
    let open =
        |mem: &MemDirectory| BTree::open(Arc::new(mem.clone()), IoContext::default(), Residency::Index);
    // Truncated: the file ends before its last allocated page.
    let mem = build_mem(&keys, 4096, 100);
    let f = mem.open(BTREE_FILE).unwrap();
    f.set_len(f.len().unwrap() - 4096).unwrap();
    assert!(matches!(open(&mem).unwrap_err(), Error::Truncated { .. }));
    f.set_len(100).unwrap();
    assert!(matches!(open(&mem).unwrap_err(), Error::Truncated { .. }));
    // Bad magic.
    let mem = build_mem(&keys, 4096, 100);
    mem.open(BTREE_FILE).unwrap().write_at(16, b"NOTATREE").unwrap();
    assert!(matches!(open(&mem).unwrap_err(), Error::BadMagic { .. }));
    // Another format version.
    let mem = build_mem(&keys, 4096, 100);
    mem.open(BTREE_FILE)
        .unwrap()
        .write_at(24, &2u32.to_le_bytes())
        .unwrap();
    assert!(matches!(
        open(&mem).unwrap_err(),
        Error::UnsupportedVersion {
            found: 2,
            supported: 1,
            ..
        }
    ));
    // A page cache of another page size.
    let mem = build_mem(&keys, 8192, 100);
    let io = IoContext {
        cache: Some(Arc::new(PageCache::new(4, 4096))),
        ..IoContext::default()
    };
    assert!(BTree::open(Arc::new(mem), io, Residency::Index).is_err());
}

#[test]
fn failed_writes_poison_the_tree_but_reads_stay_correct() {
    // Fail the k-th write of a run of split-heavy inserts, for many k: the
    // failing insert returns an error, later writes are refused, and every
    // acknowledged record still reads back exactly.
    // The first insert writes 5 pages (right leaf, right inner node, parent
    // or new root, shrunk inner node, shrunk leaf); later ones 1 each.
    let cases = (0..8)
        .map(|k| (k, FaultKind::Eio))
        .chain([(3, FaultKind::TornWrite)]);
    for ((countdown, kind), n) in cases.flat_map(|c| [(c, 255 * 256), (c, 255 * 256 + 10)]) {
        for residency in [Routing::Pinned, Routing::Disk, Routing::Learned] {
            let keys: Vec<u64> = (0..n as u64).map(|i| i * 2).collect();
            let fd = FaultyDirectory::new();
            BTree::create_ranked(&fd, &keys, 4096, 100).unwrap();
            fd.sync_dir().unwrap();
            let dir: Arc<dyn Directory> = Arc::new(fd.clone());
            let t = open_tree(dir.clone(), residency, 0, 4096);
            let mut model: BTreeMap<u64, u64> =
                keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
            fd.plan().inject(FaultOp::Write, countdown, kind, false);
            let mut failed = None;
            // Odd keys into full leaves: the first insert splits a leaf and
            // its full parent (and, with 255·256 keys, the root).
            for j in 0..40u64 {
                let k = (255 * 256 - 300 + j * 7) * 2 + 1;
                match t.insert(k, j) {
                    Ok(prev) => assert_eq!(prev, model.insert(k, j)),
                    Err(_) => {
                        failed = Some(k);
                        break;
                    }
                }
            }
            let failed = failed.expect("the fault fired");
            assert!(t.insert(1, 1).is_err(), "poisoned");
            assert!(t.delete(0).is_err(), "poisoned");
            assert!(t.sync().is_err(), "poisoned");
            let near = keys.len() - 1000;
            for (j, (&k, &v)) in model.iter().enumerate() {
                if j < near && j % 17 != 0 {
                    continue; // far from the inserts: a sample suffices
                }
                match t.get(k) {
                    Ok(got) => assert_eq!(got, Some(v), "get({k}) after failure"),
                    Err(e) => assert!(kind == FaultKind::TornWrite && e.is_corruption(), "{e}"),
                }
            }
            if kind == FaultKind::Eio {
                let mut out = Vec::new();
                t.scan(0, usize::MAX, &mut out).unwrap();
                out.retain(|r| r.0 != failed);
                assert_eq!(out, model.iter().map(|(&k, &v)| (k, v)).collect::<Vec<_>>());
            }
        }
    }
}

#[test]
fn failure_after_sync_leaves_the_synced_tree() {
    let keys: Vec<u64> = (0..2000u64).map(|i| i * 2).collect();
    let fd = FaultyDirectory::new();
    BTree::create_ranked(&fd, &keys, 4096, 100).unwrap();
    fd.sync_dir().unwrap();
    let dir: Arc<dyn Directory> = Arc::new(fd.clone());
    let t = open_tree(dir.clone(), Residency::Index, 0, 4096);
    for k in 0..100u64 {
        t.insert(k * 2 + 1, k).unwrap();
    }
    t.sync().unwrap();
    // The very next write fails (it would split a full leaf).
    fd.plan().inject(FaultOp::Write, 0, FaultKind::Eio, true);
    assert!(t.insert(3001, 0).is_err());
    drop(t); // poisoned: the meta page is not rewritten
    fd.crash();
    let t = open_tree(dir, Residency::Index, 0, 4096);
    assert_eq!(t.len(), 2100);
    assert_eq!(t.verify().unwrap().records, 2100);
    assert_eq!(t.get(3001).unwrap(), None);
    assert_eq!(t.get(199).unwrap(), Some(99));
}

#[test]
fn read_errors_are_returned() {
    let keys: Vec<u64> = (0..5000u64).collect();
    let fd = FaultyDirectory::new();
    BTree::create_ranked(&fd, &keys, 4096, 100).unwrap();
    let t = open_tree(Arc::new(fd.clone()), Residency::None, 0, 4096);
    for after in 0..2 {
        fd.plan().inject(FaultOp::Read, after, FaultKind::Eio, false);
        assert!(t.get(42).is_err());
        assert_eq!(t.get(42).unwrap(), Some(42));
    }
    fd.plan().inject(FaultOp::Read, 1, FaultKind::ShortRead, false);
    assert!(t.get(4000).unwrap_err().is_corruption());
    fd.plan().inject(FaultOp::Read, 0, FaultKind::Eio, false);
    assert!(t.insert(5001, 0).is_err(), "a failed read changes nothing");
    assert_eq!(t.insert(5001, 0).unwrap(), None, "and does not poison");
    fd.plan().inject(FaultOp::Read, 0, FaultKind::Eio, false);
    let e = BTree::open(Arc::new(fd.clone()), IoContext::default(), Residency::Index).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

// ------------------------------------------------------------ concurrency

#[test]
fn concurrent_readers_with_a_writer() {
    let keys: Vec<u64> = (0..40_000u64).map(|i| i * 4).collect();
    for residency in [Residency::Index, Residency::None] {
        let dir: Arc<dyn Directory> = Arc::new(build_mem(&keys, 4096, 100));
        let t = open_tree(dir, residency, 0, 4096);
        std::thread::scope(|s| {
            for r in 0..3u64 {
                let t = &t;
                let keys = &keys;
                s.spawn(move || {
                    let mut rng = Pcg64Mcg::seed_from_u64(r);
                    for _ in 0..20_000 {
                        let i = rng.random_range(0..keys.len());
                        assert_eq!(t.get(keys[i]).unwrap(), Some(i as u64));
                        if i % 16 == 0 {
                            let mut out = Vec::new();
                            t.scan(keys[i], 50, &mut out).unwrap();
                            let mine: Vec<u64> = out.iter().map(|r| r.0).filter(|k| k % 4 == 0).collect();
                            let want: Vec<u64> = keys[i..].iter().copied().take(mine.len()).collect();
                            assert_eq!(mine, want);
                        }
                    }
                });
            }
            // The writer only touches keys that are not multiples of 4.
            let mut rng = Pcg64Mcg::seed_from_u64(99);
            for _ in 0..30_000 {
                let k = rng.random_range(0..160_000u64) | 1;
                if rng.random_bool(0.7) {
                    t.insert(k, k).unwrap();
                } else {
                    t.delete(k).unwrap();
                }
            }
        });
        t.verify().unwrap();
    }
}

// ---------------------------------------------------------------- registry

#[test]
fn registry_build_open_and_stats() {
    let keys: Vec<u64> = (0..30_000u64).map(|i| i * 3).collect();
    let mem = MemDirectory::new();
    let dir: Arc<dyn Directory> = Arc::new(mem);
    let spec: IndexSpec = "btree:fill=70,page=8192".parse().unwrap();
    let rep = index::registry()
        .build_in(
            &spec,
            index::Records::ranked(&keys),
            dir.clone(),
            &BuildOptions::default(),
        )
        .unwrap();
    assert_eq!(rep.config["fill"], 70);
    assert_eq!(rep.config["page"], 8192);
    assert_eq!(rep.height, Some(2));
    assert!(rep.memory_bytes > 0);
    let pinned = index::registry()
        .open_in(dir.clone(), &OpenOptions::default())
        .unwrap();
    assert!(pinned.supports_updates());
    let st = pinned.stats().unwrap();
    // 357 records per leaf at fill 70.
    assert_eq!(st.extra["leaves"], 30_000u64.div_ceil(357));
    assert_eq!(st.extra["fanout"], 512);
    assert_eq!(st.extra["leaf_capacity"], 511);
    assert_eq!(st.extra["fill"], 70);
    assert!(st.disk_bytes >= (30_000u64.div_ceil(357) + 2) * 8192);
    let cold = index::registry()
        .open_in(
            dir.clone(),
            &OpenOptions {
                resident: Residency::None,
                cache_pages: 4,
                ..Default::default()
            },
        )
        .unwrap();
    let m0 = cold.stats().unwrap().memory_bytes;
    assert_eq!(cold.get(300).unwrap(), Some(100));
    assert_eq!(
        cold.stats().unwrap().memory_bytes,
        m0 + 2 * 8192,
        "two cached pages"
    );
    // Pinning at open reads around the page cache: it starts empty.
    let pinned_cached = index::registry()
        .open_in(
            dir.clone(),
            &OpenOptions {
                cache_pages: 4,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(pinned_cached.stats().unwrap().memory_bytes, st.memory_bytes);
    assert_eq!(pinned_cached.get(300).unwrap(), Some(100));
    assert_eq!(
        pinned_cached.stats().unwrap().memory_bytes,
        st.memory_bytes + 8192,
        "one cached leaf"
    );
    let bad: IndexSpec = "btree:fill=0".parse().unwrap();
    assert!(
        index::registry()
            .build_in(
                &bad,
                index::Records::ranked(&keys),
                dir.clone(),
                &BuildOptions::default()
            )
            .is_err()
    );
    let typo: IndexSpec = "btree:fil=50".parse().unwrap();
    assert!(
        index::registry()
            .build_in(
                &typo,
                index::Records::ranked(&keys),
                dir,
                &BuildOptions::default()
            )
            .is_err()
    );
}

// ------------------------------------------------------ file-format fixture

/// `(length, crc32c)` of the file `btree.db` in `dir`.
fn file_fingerprint(dir: &MemDirectory) -> (u64, u32) {
    let bytes = dir.file(BTREE_FILE).unwrap().contents();
    (bytes.len() as u64, crc32c::crc32c(&bytes))
}

/// Runs the fixed update sequence of [`file_bytes_match_the_fixture`] and
/// returns the file's fingerprint after each step.
fn fixture_run(residency: Residency, cache_pages: usize) -> Vec<(u64, u32)> {
    let keys: Vec<u64> = (0..3000u64).map(|i| i * 10).collect();
    let mem = build_mem(&keys, 4096, 90);
    let mut prints = vec![file_fingerprint(&mem)];
    let dir: Arc<dyn Directory> = Arc::new(mem.clone());
    let t = open_tree(dir.clone(), residency, cache_pages, 4096);
    let mut rng = Pcg64Mcg::seed_from_u64(1515);
    // Random inserts and updates: leaf and inner splits.
    for _ in 0..4000 {
        let k = rng.random_range(0..40_000u64);
        t.insert(k, k ^ 0x5A5A).unwrap();
    }
    prints.push(file_fingerprint(&mem));
    t.sync().unwrap();
    prints.push(file_fingerprint(&mem));
    // Empty whole key ranges: leaves (and inner nodes) go to the free list.
    for k in (5_000..17_000u64).chain(30_000..33_000) {
        t.delete(k).unwrap();
    }
    prints.push(file_fingerprint(&mem));
    t.sync().unwrap();
    prints.push(file_fingerprint(&mem));
    let freed = t.meta().space.free_pages;
    assert!(freed >= 8, "{freed} pages freed");
    // Appends and random inserts reuse the freed pages, then grow the file.
    for k in (50_000..52_000u64).chain((6_000..9_000).step_by(3)) {
        t.insert(k, k).unwrap();
    }
    assert_eq!(t.meta().space.free_pages, 0, "the freed pages are reused");
    prints.push(file_fingerprint(&mem));
    // Delete almost everything: the root collapses.
    for k in 0..60_000u64 {
        if k % 997 != 0 {
            t.delete(k).unwrap();
        }
    }
    t.sync().unwrap();
    assert_eq!(t.meta().height, 2);
    prints.push(file_fingerprint(&mem));
    for k in 0..1_000u64 {
        t.insert(k * 7 + 1, k).unwrap();
    }
    t.verify().unwrap();
    drop(t); // writes the meta page
    prints.push(file_fingerprint(&mem));
    prints
}

/// The file's bytes after a fixed sequence of bulk load, inserts, deletes
/// (freeing pages), re-inserts (reusing them), syncs and a close, as
/// `(length, crc32c)` per step. Produced from the B+-tree before it used
/// `crate::pager` (commit a97175a) with
/// `STRATA_PRINT_FIXTURE=1 cargo test -p strata --lib btree::tests::file_bytes_match_the_fixture -- --nocapture`;
/// the steps after the first checkpoint re-pinned with the rollback journal
/// (issue 16): page 0 now carries the checkpoint number (bytes 96..104, one
/// more per checkpoint), so every step from the first `sync` on changes its
/// checksum; lengths and the steps before it are unchanged.
const FILE_FIXTURE: [(u64, u32); 8] = [
    (65536, 4268393762),
    (139264, 3331101407),
    (139264, 3889232825),
    (139264, 76488431),
    (139264, 1881481736),
    (163840, 2287090622),
    (163840, 2804198384),
    (163840, 1561017728),
];

#[test]
fn file_bytes_match_the_fixture() {
    for (residency, cache) in [(Residency::Index, 0), (Residency::None, 0), (Residency::None, 8)] {
        let prints = fixture_run(residency, cache);
        if std::env::var("STRATA_PRINT_FIXTURE").is_ok_and(|v| v == "1") {
            println!("{residency:?} cache {cache}: {prints:?}");
            continue;
        }
        assert_eq!(prints, FILE_FIXTURE, "{residency:?}, cache {cache}");
    }
}
