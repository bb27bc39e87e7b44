//! Tests of the FITing-tree: page formats, exact blocks per lookup,
//! corruption, a model test against `BTreeMap` with reboots and crashes
//! (the generic ones, `tests/updatable.rs` and `tests/power_loss.rs`, run
//! `fiting` too).

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::format::{
    DirNode, Entry, SegInfo, SegPage, buf_capacity, decode_buffer, encode_buffer, encode_seg_page, seg_remove,
};
use super::*;
use crate::pager::{BlockSnapshot, NO_PAGE, PageSpace};
use crate::storage::MemDirectory;

fn build(dir: &MemDirectory, keys: &[u64], ps: usize, eps: u64, buffer: u32) -> Meta {
    let sink = dir.create_sink(FITING_FILE, ps).unwrap();
    let mut b = FitingLoader::new(sink, ps, eps, buffer, 7).unwrap();
    for (i, &k) in keys.iter().enumerate() {
        b.push(k, i as u64).unwrap();
    }
    let m = b.finish().unwrap();
    dir.sync_dir().unwrap();
    m
}

fn open(dir: &MemDirectory, residency: Residency) -> FitingTree {
    FitingTree::open(Arc::new(dir.clone()), IoContext::default(), residency).unwrap()
}

fn blocks(t: &FitingTree) -> BlockSnapshot {
    t.pager.blocks().snapshot()
}

/// Keys with gaps that change scale (a PLA needs many segments).
fn bumpy_keys(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut k = 0u64;
    let mut keys = Vec::with_capacity(n);
    for i in 0..n {
        let scale = if (i / 500) % 3 == 0 { 1_000 } else { 7 };
        k += 1 + rng.random_range(0..scale);
        keys.push(k);
    }
    keys
}

#[test]
fn page_formats_round_trip() {
    let ps = 4096;
    let e = Entry {
        key: 10,
        page: 3,
        first_key: 12,
        slope: 0.5,
        intercept: 1.25,
        data_pages: 2,
        buffer: 9,
    };
    let info = SegInfo::of(&e, 44);
    let recs: Vec<(u64, u64)> = (0..252u64).map(|i| (12 + 2 * i, i * 7)).collect();
    let mut page = vec![0u8; ps];
    encode_seg_page(&mut page, 3, 0, &info, &recs).unwrap();
    let p = SegPage::open(&page, 3, "f").unwrap();
    assert_eq!((p.count(), p.next, p.index), (252, 44, 0));
    assert!(p.info().matches(&e));
    assert_eq!(p.records().collect::<Vec<_>>(), recs);
    assert_eq!(p.lower_bound(13), 1);
    assert!(
        SegPage::open(&page, 4, "f").unwrap_err().is_corruption(),
        "page number seeds the crc"
    );
    assert!(encode_seg_page(&mut page, 3, 0, &info, &[(0, 0); 253]).is_err());
    // A non-head page carries no link; removal shifts in place.
    encode_seg_page(&mut page, 4, 1, &info, &recs[..3]).unwrap();
    seg_remove(&mut page, 4, 3, 1, NO_PAGE).unwrap();
    let p = SegPage::open(&page, 4, "f").unwrap();
    assert_eq!((p.next, p.index), (NO_PAGE, 1));
    assert_eq!(p.records().collect::<Vec<_>>(), vec![recs[0], recs[2]]);
    // Directory nodes.
    let node = DirNode {
        leaf: true,
        entries: vec![e, Entry { key: 20, ..e }],
    };
    node.encode(&mut page, 5).unwrap();
    assert_eq!(DirNode::decode(&page, 5, "f").unwrap(), node);
    let unsorted = DirNode {
        leaf: false,
        entries: vec![Entry::child(20, 3), Entry::child(10, 4)],
    };
    unsorted.encode(&mut page, 5).unwrap();
    assert!(DirNode::decode(&page, 5, "f").unwrap_err().is_corruption());
    // Buffers span pages in order.
    let cap = buf_capacity(ps);
    let recs: Vec<(u64, u64)> = (0..cap as u64 + 3).map(|i| (i * 5, i)).collect();
    let mut two = vec![0u8; 2 * ps];
    encode_buffer(&mut two, ps, 8, 3, &recs).unwrap();
    assert_eq!(decode_buffer(&two, ps, 8, 3, "f").unwrap(), recs);
    assert!(
        decode_buffer(&two, ps, 8, 4, "f").unwrap_err().is_corruption(),
        "owner checked"
    );
    // The root slot.
    let m = Meta {
        page_size: ps,
        root: 5,
        n: 99,
        segments: 3,
        epsilon: 64,
        buffer: 256,
        height: 2,
        dir_nodes: 4,
        space: PageSpace {
            page_count: 40,
            free_head: 0,
            free_pages: 0,
        },
        build_id: 11,
    };
    assert_eq!(Meta::from_checkpoint(&m.checkpoint()), m);
    m.check("f").unwrap();
    assert!(Meta { height: 0, ..m }.check("f").is_err());
}

#[test]
fn bulk_load_shapes_and_verify() {
    let dir = MemDirectory::new();
    let keys = bumpy_keys(100_000, 1);
    let m = build(&dir, &keys, 4096, 64, 256);
    assert!(m.segments > 72, "{m:?}: enough segments for two directory levels");
    assert_eq!(m.height, 2);
    let t = open(&dir, Residency::Index);
    let r = t.verify().unwrap();
    assert_eq!((r.records, r.segments, r.buffer_pages), (100_000, m.segments, 0));
    assert_eq!(r.pages, 1 + r.dir_nodes + r.data_pages);
    // Empty index: one empty segment.
    let dir = MemDirectory::new();
    let m = build(&dir, &[], 4096, 64, 256);
    assert_eq!((m.n, m.segments, m.height), (0, 1, 1));
    let t = open(&dir, Residency::None);
    assert_eq!(t.get(5).unwrap(), None);
    assert_eq!(t.lower_bound(0).unwrap(), None);
    assert_eq!(t.insert(5, 1).unwrap(), None);
    assert_eq!(t.lower_bound(0).unwrap(), Some((5, 1)));
    t.verify().unwrap();
}

#[test]
fn blocks_per_lookup_are_exact() {
    let dir = MemDirectory::new();
    let keys = bumpy_keys(100_000, 2);
    let m = build(&dir, &keys, 4096, 64, 256);
    for residency in [Residency::Index, Residency::None] {
        let t = open(&dir, residency);
        for &k in keys.iter().step_by(97) {
            let before = blocks(&t);
            assert!(t.get(k).unwrap().is_some());
            let after = blocks(&t);
            let inner = after.inner_read - before.inner_read;
            let leaf = after.leaf_read - before.leaf_read;
            match residency {
                Residency::Index => assert_eq!(inner, 0, "key {k}"),
                Residency::None => assert_eq!(inner, u64::from(m.height), "key {k}"),
            }
            assert!((1..=2).contains(&leaf), "key {k}: {leaf} leaf pages");
        }
    }
    // After an insert into a segment the buffer is read only on a miss.
    let t = open(&dir, Residency::Index);
    let k = keys[500] + 1;
    assert!(!keys.contains(&k));
    assert_eq!(t.insert(k, 5).unwrap(), None);
    let before = blocks(&t);
    assert_eq!(t.get(k).unwrap(), Some(5));
    let leaf = blocks(&t).leaf_read - before.leaf_read;
    assert!((3..=4).contains(&leaf), "window + 2 buffer pages, got {leaf}");
}

#[test]
fn resegment_counts_one_smo_and_refits() {
    let dir = MemDirectory::new();
    let keys: Vec<u64> = (0..10_000u64).map(|i| i * 10).collect();
    build(&dir, &keys, 4096, 16, 32);
    let t = open(&dir, Residency::Index);
    let segs = t.meta().segments;
    for i in 0..32u64 {
        assert_eq!(t.insert(1 + i * 10, i).unwrap(), None);
    }
    assert_eq!(blocks(&t).smo, 0, "the buffer holds 32");
    assert_eq!(t.insert(1 + 32 * 10, 32).unwrap(), None);
    assert_eq!(blocks(&t).smo, 1, "the 33rd insert resegments");
    assert!(t.meta().segments >= segs);
    let r = t.verify().unwrap();
    assert_eq!(r.buffered, 0);
    assert_eq!(r.records, 10_033);
    for i in 0..33u64 {
        assert_eq!(t.get(1 + i * 10).unwrap(), Some(i));
    }
}

#[test]
fn corrupt_pages_are_detected_naming_file_and_page() {
    let dir = MemDirectory::new();
    let keys: Vec<u64> = (0..100_000u64).collect();
    let m = build(&dir, &keys, 4096, 64, 256);
    // The first segment starts at page 1; key 300 is on its page 2.
    let t = open(&dir, Residency::Index);
    dir.file(FITING_FILE).unwrap().corrupt_byte(2 * 4096 + 100);
    let e = t.get(300).unwrap_err();
    assert!(
        matches!(&e, Error::Corruption { page: 2, file, .. } if file.contains(FITING_FILE)),
        "{e}"
    );
    assert!(t.verify().is_err());
    assert_eq!(t.get(5).unwrap(), Some(5), "other pages still answer");
    assert!(t.insert(301, 0).unwrap_err().is_corruption());
    assert!(t.insert(1, 0).is_err(), "refuses writes after a failed one");
    drop(t);
    dir.file(FITING_FILE).unwrap().corrupt_byte(2 * 4096 + 100);
    // The directory root.
    dir.file(FITING_FILE).unwrap().corrupt_byte(m.root * 4096 + 40);
    let t = open(&dir, Residency::None);
    let e = t.get(5).unwrap_err();
    assert!(
        matches!(e, Error::Corruption { page, .. } if page == m.root),
        "{e}"
    );
    let e = FitingTree::open(Arc::new(dir.clone()), IoContext::default(), Residency::Index).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    drop(t);
    dir.file(FITING_FILE).unwrap().corrupt_byte(m.root * 4096 + 40);
    // The checkpoint page.
    dir.file(FITING_FILE).unwrap().corrupt_byte(200);
    let e = FitingTree::open(Arc::new(dir.clone()), IoContext::default(), Residency::None).unwrap_err();
    assert!(matches!(e, Error::Corruption { page: 0, .. }), "{e}");
}

/// Every record of `t` in order, through the cursor, against `model`.
fn check_all(t: &FitingTree, model: &BTreeMap<u64, u64>, what: &str) {
    let mut got = Vec::new();
    t.scan(0, usize::MAX, &mut got).unwrap();
    assert!(
        got.iter().copied().eq(model.iter().map(|(&a, &b)| (a, b))),
        "{what}: scan"
    );
    assert_eq!(t.verify().unwrap().records, model.len() as u64, "{what}: verify");
}

/// Phases aimed at the FITing-tree's own machinery, each followed by a
/// full check, a sync or a crash, and a reopen: hot-spot inserts that
/// resegment the same segments again and again and grow the directory (its
/// splits up to a new root), deletes that empty whole segment pages (lookups
/// and lower bounds then walk past them), and updates in segments and
/// buffers.
fn run_phases(seed: u64, eps: u64, buffer: u32, residency: Residency, min_smo: u64, grows: bool) {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let keys = bumpy_keys(5_000, seed);
    let mem = MemDirectory::new();
    let m0 = build(&mem, &keys, 4096, eps, buffer);
    let mut model: BTreeMap<u64, u64> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let mut t = open(&mem, residency);
    let top = keys.last().copied().unwrap_or(0);
    let mut smos = 0;
    for phase in 0..12u64 {
        match phase % 3 {
            0 => {
                // Hot spots: a narrow range takes many new keys.
                let base = rng.random_range(0..top);
                for _ in 0..3_000 {
                    let k = base + rng.random_range(0..200_000u64);
                    let v = rng.random();
                    assert_eq!(t.insert(k, v).unwrap(), model.insert(k, v), "insert({k})");
                }
            }
            1 => {
                // Delete a long run (whole pages and segments empty), then
                // ask around it.
                let from = rng.random_range(0..top);
                let doomed: Vec<u64> = model.range(from..).take(700).map(|(&k, _)| k).collect();
                for &d in &doomed {
                    assert!(t.delete(d).unwrap(), "delete({d})");
                    model.remove(&d);
                }
                for &d in doomed.iter().step_by(37) {
                    assert_eq!(t.get(d).unwrap(), None);
                    let want = model.range(d..).next().map(|(&a, &b)| (a, b));
                    assert_eq!(t.lower_bound(d).unwrap(), want, "lower_bound({d})");
                }
            }
            _ => {
                // Updates of keys in segments and in buffers.
                let picks: Vec<u64> = model.keys().copied().step_by(7).collect();
                for k in picks {
                    let v = rng.random();
                    assert_eq!(t.insert(k, v).unwrap(), model.insert(k, v), "update({k})");
                }
            }
        }
        check_all(&t, &model, &format!("phase {phase}"));
        smos += blocks(&t).smo;
        if phase % 2 == 0 {
            t.sync().unwrap();
            drop(t);
            mem.crash();
        } else {
            drop(t);
        }
        t = open(&mem, residency);
        check_all(&t, &model, &format!("phase {phase} reopened"));
    }
    let m = t.meta();
    assert!(smos >= min_smo, "only {smos} structure modifications");
    assert!(
        !grows || m.height > m0.height,
        "the directory never grew: {m0:?} -> {m:?}"
    );
    assert!(m.space.free_pages > 0 || m.space.page_count > m0.space.page_count);
}

#[test]
fn phases_small_buffer_resident_index() {
    run_phases(1, 4, 8, Residency::Index, 100, true);
}

#[test]
fn phases_small_buffer_resident_none() {
    run_phases(2, 4, 8, Residency::None, 100, true);
}

#[test]
fn phases_defaults() {
    run_phases(3, 64, 256, Residency::Index, 10, false);
}
