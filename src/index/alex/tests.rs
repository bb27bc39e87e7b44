//! Tests of ALEX on disk: layouts, the exponential search, bulk-load
//! shapes, exact blocks per lookup, SMOs, corruption, and a model test
//! against `BTreeMap` with reboots and crashes (the generic ones,
//! `tests/updatable.rs`, `tests/power_loss.rs` and the conformance
//! battery, run `alex` too).

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::format::{DataHeader, InnerNode, Model, cap_for_keys, cap_for_pages, node_pages};
use super::node::{build_node, exp_search};
use super::*;
use crate::pager::{BlockSnapshot, NO_PAGE};
use crate::storage::MemDirectory;

fn build(dir: &MemDirectory, keys: &[u64], ps: usize, max_pages: u32) -> Meta {
    let sink = dir.create_sink(ALEX_FILE, ps).unwrap();
    let mut b = AlexLoader::new(sink, ps, max_pages, 7).unwrap();
    for (i, &k) in keys.iter().enumerate() {
        b.push(k, i as u64).unwrap();
    }
    let m = b.finish().unwrap();
    dir.sync_dir().unwrap();
    m
}

fn open(dir: &MemDirectory, residency: Residency) -> Alex {
    Alex::open(Arc::new(dir.clone()), IoContext::default(), residency).unwrap()
}

fn blocks(t: &Alex) -> BlockSnapshot {
    t.pager.blocks().snapshot()
}

/// Keys whose density changes every 500 keys.
fn bumpy_keys(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut k = 0u64;
    (0..n)
        .map(|i| {
            let scale = if (i / 500) % 3 == 0 { 1_000 } else { 7 };
            k += 1 + rng.random_range(0..scale);
            k
        })
        .collect()
}

#[test]
fn sizes_on_4k_pages() {
    assert_eq!(cap_for_pages(1, 4096), 192);
    assert_eq!(cap_for_pages(16, 4096), 4032);
    assert_eq!(node_pages(192, 4096), 1);
    assert_eq!(node_pages(256, 4096), 2);
    assert_eq!(format::max_fanout(4096), 256);
    assert_eq!(cap_for_keys(100, 0.7, 4096), 192);
    assert_eq!(Alex::budget(4096, 16), 1411);
}

#[test]
fn layouts_round_trip() {
    let h = DataHeader {
        model: Model {
            anchor: 5,
            slope: 0.25,
            intercept: 1.5,
        },
        cap: 192,
        pages: 1,
        num_keys: 3,
        prev: 9,
        next: 11,
        inserts: 4,
        iters: 12,
        shifts: 2,
        expected: 20.5,
    };
    let mut words = BTreeMap::new();
    h.store(|o, v| {
        words.insert(o, v);
        Ok(())
    })
    .unwrap();
    assert_eq!(
        DataHeader::load(|o| Ok(words.get(&o).copied().unwrap_or(0))).unwrap(),
        h
    );
    let node = InnerNode {
        model: Model::spread(10, 1000, 4),
        children: vec![4096, 4096, 8192 + 16, 3 * 4096],
    };
    let mut page = vec![0u8; 4096];
    node.encode(&mut page, 16).unwrap();
    format::seal_inner(&mut page, 3, 1, 16 + node.len());
    let (nodes, used) = format::open_inner(&page, 3, "f").unwrap();
    assert_eq!((nodes, used), (1, 16 + node.len()));
    assert_eq!(InnerNode::decode(&page, 3, 16, used, "f").unwrap(), node);
    assert_eq!(
        format::route_in(&page, 3, 16, used, 1000, "f").unwrap(),
        (3, 3 * 4096)
    );
    assert_eq!(format::route_in(&page, 3, 16, used, 0, "f").unwrap(), (0, 4096));
    // Past the used bytes, a wrong page number, a flipped byte.
    assert!(
        InnerNode::decode(&page, 3, 16, 40, "f")
            .unwrap_err()
            .is_corruption()
    );
    assert!(format::open_inner(&page, 4, "f").unwrap_err().is_corruption());
    page[100] ^= 1;
    assert!(format::open_inner(&page, 3, "f").unwrap_err().is_corruption());
}

#[test]
fn built_node_places_keys_and_fills_gaps() {
    let recs: Vec<(u64, u64)> = (0..100u64).map(|i| (i * i, i)).collect();
    let (h, image) = build_node(&recs, 192, 5, NO_PAGE, 9, 4096).unwrap();
    assert_eq!(h.num_keys, 100);
    assert_eq!((h.prev, h.next, h.pages), (NO_PAGE, 9, 1));
    assert_eq!(image.len(), 4096);
    assert!(h.expected > 0.0 && h.expected.is_finite());
    format::open_data(&image, 5, 5, 0, "f").unwrap();
    assert!(build_node(&recs, 100, 5, NO_PAGE, 9, 4096).is_err());
}

proptest! {
    #[test]
    fn exp_search_is_a_lower_bound(
        mut keys in proptest::collection::vec(any::<u64>(), 1..300),
        pred in 0usize..400,
        probe in any::<u64>(),
        pick in any::<prop::sample::Index>(),
    ) {
        keys.sort_unstable();
        for q in [probe, *pick.get(&keys), pick.get(&keys).wrapping_add(1)] {
            let (p, iters) = exp_search(keys.len(), pred, q, |i| Ok(keys[i])).unwrap();
            prop_assert_eq!(p, keys.partition_point(|&k| k < q));
            prop_assert!((1..=4 + 2 * 64).contains(&iters));
        }
    }
}

#[test]
fn bulk_load_shapes_and_verify() {
    let keys = bumpy_keys(50_000, 1);
    let dir = MemDirectory::new();
    let m = build(&dir, &keys, 4096, 2);
    // Budget: 384 slots * 0.7 / 2 = 134 records per data node at most.
    assert!(m.data_nodes as usize >= keys.len() / 134);
    assert!(m.inner_nodes >= 2);
    for residency in [Residency::Index, Residency::None] {
        let t = open(&dir, residency);
        let r = t.verify().unwrap();
        assert_eq!(r.records, 50_000);
        assert_eq!(r.data_nodes, u64::from(m.data_nodes));
        assert_eq!(r.pages, 1 + r.inner_pages + r.data_pages);
        for (i, &k) in keys.iter().enumerate().step_by(97) {
            assert_eq!(t.get(k).unwrap(), Some(i as u64));
            assert_eq!(
                t.get(k + 1).unwrap(),
                keys.get(i + 1).filter(|&&x| x == k + 1).map(|_| i as u64 + 1)
            );
        }
        let mut all = Vec::new();
        t.scan(0, usize::MAX, &mut all).unwrap();
        assert_eq!(all.len(), keys.len());
        assert!(all.iter().zip(&keys).all(|(a, &k)| a.0 == k));
    }
    // Empty and one-record files.
    for n in [0usize, 1] {
        let d = MemDirectory::new();
        build(&d, &keys[..n], 4096, 16);
        let t = open(&d, Residency::Index);
        assert_eq!(t.verify().unwrap().records, n as u64);
        assert_eq!(
            t.lower_bound(0).unwrap(),
            keys.first().filter(|_| n == 1).map(|&k| (k, 0))
        );
    }
}

#[test]
fn blocks_per_lookup_are_exact() {
    // Evenly spaced keys: every model is exact, a lookup reads the head
    // page and the page of its key (and value); the inner path is resident
    // or read once per inner page.
    let keys: Vec<u64> = (0..20_000u64).map(|i| i * 10).collect();
    let dir = MemDirectory::new();
    let m = build(&dir, &keys, 4096, 4);
    let t = open(&dir, Residency::Index);
    let b0 = blocks(&t);
    assert_eq!(t.get(keys[12_345]).unwrap(), Some(12_345));
    let d = blocks(&t).since(&b0);
    assert_eq!(d.inner_read, 0);
    assert!((2..=4).contains(&d.leaf_read), "{d:?}");
    let t = open(&dir, Residency::None);
    let depth = t.verify().unwrap().depth;
    let b0 = blocks(&t);
    t.get(keys[777]).unwrap();
    let d = blocks(&t).since(&b0);
    assert!(
        d.inner_read >= 1 && d.inner_read <= u64::from(depth),
        "{d:?} {m:?}"
    );
    assert_eq!((d.leaf_written, d.inner_written, d.smo), (0, 0, 0));
}

/// Inserts, updates and deletes against a `BTreeMap`, with a checkpoint,
/// a crash or a clean close between phases; `verify` after each.
fn run_model(seed: u64, max_pages: u32, residency: Residency, initial: usize) -> (u64, Meta, Meta) {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let keys: Vec<u64> = bumpy_keys(initial, seed).iter().map(|k| k * 4).collect();
    let dir = MemDirectory::new();
    let m0 = build(&dir, &keys, 4096, max_pages);
    let mut model: BTreeMap<u64, u64> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let mut t = open(&dir, residency);
    let mut smos = 0;
    let top = keys.last().copied().unwrap_or(10_000) + 10_000;
    for phase in 0..6 {
        for _ in 0..3_000 {
            let k = if phase % 3 == 2 {
                // A dense run: shifts and splits in one node.
                top / 2 + rng.random_range(0..4_000u64)
            } else {
                rng.random_range(0..top)
            };
            match rng.random_range(0..10) {
                0..=6 => {
                    let v = rng.random();
                    assert_eq!(t.insert(k, v).unwrap(), model.insert(k, v), "insert({k})");
                }
                7 | 8 => assert_eq!(t.delete(k).unwrap(), model.remove(&k).is_some(), "delete({k})"),
                _ => {
                    let want = model.range(k..).next().map(|(&a, &b)| (a, b));
                    assert_eq!(t.lower_bound(k).unwrap(), want, "lower_bound({k})");
                }
            }
        }
        smos += blocks(&t).smo;
        t.verify().unwrap();
        let mut all = Vec::new();
        t.scan(0, usize::MAX, &mut all).unwrap();
        assert_eq!(all, model.iter().map(|(&a, &b)| (a, b)).collect::<Vec<_>>());
        if phase % 2 == 0 {
            t.sync().unwrap();
            drop(t);
            dir.crash();
        } else {
            drop(t);
        }
        t = open(&dir, residency);
        assert_eq!(t.len(), model.len() as u64);
        for (&k, &v) in model.iter().step_by(13) {
            assert_eq!(t.get(k).unwrap(), Some(v));
        }
    }
    t.verify().unwrap();
    let m = t.meta();
    (smos, m0, m)
}

#[test]
fn model_small_nodes_resident_index() {
    let (smos, m0, m) = run_model(1, 1, Residency::Index, 2_000);
    assert!(smos >= 50, "{smos}");
    assert!(
        m.inner_nodes > m0.inner_nodes && m.data_nodes > m0.data_nodes,
        "{m0:?} -> {m:?}"
    );
    assert!(m.space.free_pages > 0, "freed runs go to the free list");
}

#[test]
fn model_from_empty_resident_none() {
    let (smos, _, m) = run_model(2, 2, Residency::None, 0);
    assert!(smos >= 20, "{smos}");
    assert!(m.inner_nodes >= 1);
}

#[test]
fn model_defaults() {
    let (smos, _, _) = run_model(3, 16, Residency::Index, 20_000);
    assert!(smos >= 1);
}

#[test]
fn expansion_then_split_count_one_smo_each() {
    // One data node (the root) of 1-page capacity grows by expansion up to
    // 2 pages, then splits downward into an inner node.
    let dir = MemDirectory::new();
    build(&dir, &[], 4096, 2);
    let t = open(&dir, Residency::Index);
    let mut last = t.meta();
    let mut seen_expand = false;
    let mut seen_split = false;
    for k in 0..600u64 {
        let b0 = blocks(&t);
        t.insert(k * 3, k).unwrap();
        let d = blocks(&t).since(&b0);
        let m = t.meta();
        assert!(d.smo <= 2, "{d:?}");
        if d.smo > 0 && m.data_nodes == last.data_nodes && m.inner_nodes == last.inner_nodes {
            seen_expand = true;
        }
        if m.inner_nodes > last.inner_nodes {
            seen_split = true;
        }
        last = m;
    }
    assert!(seen_expand && seen_split, "{last:?}");
    t.verify().unwrap();
}

#[test]
fn corrupt_pages_are_detected_naming_file_and_page() {
    let keys: Vec<u64> = (0..3_000u64).map(|i| i * 5).collect();
    let dir = MemDirectory::new();
    let m = build(&dir, &keys, 4096, 1);
    // A data page (page 2 is a data node's head page).
    dir.file(ALEX_FILE).unwrap().corrupt_byte(2 * 4096 + 300);
    let t = open(&dir, Residency::Index);
    let e = t.verify().unwrap_err();
    assert!(e.is_corruption() && e.to_string().contains(ALEX_FILE), "{e}");
    drop(t);
    dir.file(ALEX_FILE).unwrap().corrupt_byte(2 * 4096 + 300);
    // An inner page: refused at open when resident, at the lookup if not.
    let root_page = m.root / 4096;
    dir.file(ALEX_FILE).unwrap().corrupt_byte(root_page * 4096 + 40);
    assert!(
        Alex::open(Arc::new(dir.clone()), IoContext::default(), Residency::Index)
            .unwrap_err()
            .is_corruption()
    );
    let t = open(&dir, Residency::None);
    assert!(t.get(keys[10]).unwrap_err().is_corruption());
    assert!(t.insert(1, 1).unwrap_err().is_corruption());
}

#[test]
fn cost_deviation_needs_inserts_and_a_margin() {
    let mut h = DataHeader {
        expected: 30.0,
        inserts: 31,
        iters: 31 * 10,
        shifts: 31 * 100,
        ..DataHeader::default()
    };
    // 20 × 10 + 0.5 × 100 = 250 per insert, but too few inserts to judge.
    assert_eq!(h.empirical_cost(), 250.0);
    assert!(!h.deviates());
    h.inserts = 32;
    h.iters = 32 * 2;
    h.shifts = 32 * 30;
    // 40 + 15 = 55 = 1.5 × 30 + 10: at the bound, not above it.
    assert_eq!(h.empirical_cost(), 55.0);
    assert!(!h.deviates());
    h.shifts += 32;
    assert!(h.deviates());
}

#[test]
fn splits_sideways_and_downward() {
    // Small nodes under one inner node whose children fill several slots:
    // inserts spread over the keys split nodes sideways (data nodes grow,
    // inner nodes do not) until a node holds one slot, then downward.
    // A dense run and a sparse tail: the tail's slots of the root are
    // grouped into children of several slots each.
    let mut keys: Vec<u64> = (0..900u64).map(|i| i * 10).collect();
    keys.extend((1..=100u64).map(|i| i * 10_000_000));
    let dir = MemDirectory::new();
    let m0 = build(&dir, &keys, 4096, 1);
    let t = open(&dir, Residency::Index);
    let (mut sideways, mut downward) = (0, 0);
    let mut last = t.meta();
    let mut rng = Pcg64Mcg::seed_from_u64(5);
    for _ in 0..6_000 {
        t.insert(rng.random_range(0..1_000_000_000), 0).unwrap();
        let m = t.meta();
        if m.inner_nodes > last.inner_nodes {
            downward += 1;
        } else if m.data_nodes > last.data_nodes {
            sideways += 1;
        }
        last = m;
    }
    assert!(
        sideways > 0 && downward > 0,
        "{sideways} {downward} {m0:?} {last:?}"
    );
    let r = t.verify().unwrap();
    assert_eq!(r.records, t.len());
    assert!(r.depth >= 2);
}
