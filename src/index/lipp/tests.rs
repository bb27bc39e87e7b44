//! Tests of LIPP: node format, FMCD placement, exact blocks per lookup,
//! inserts with child creation and rebuilds, corruption, and a model test
//! against `BTreeMap` with reboots (the generic ones, `tests/updatable.rs`
//! and `tests/power_loss.rs`, run `lipp` too).

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::build::{bulk_load, plan};
use super::format::{Model, NodeHeader, Slot, node_bytes, payload};
use super::*;
use crate::Error;
use crate::pager::BlockSnapshot;
use crate::storage::MemDirectory;

fn build(dir: &MemDirectory, keys: &[u64], ps: usize) -> Meta {
    let sink = dir.create_sink(LIPP_FILE, ps).unwrap();
    let recs: Vec<Record> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let m = bulk_load(sink, ps, &recs, 7).unwrap();
    dir.sync_dir().unwrap();
    m
}

fn open(dir: &MemDirectory, residency: Residency) -> LippIndex {
    LippIndex::open(Arc::new(dir.clone()), IoContext::default(), residency).unwrap()
}

fn blocks(t: &LippIndex) -> BlockSnapshot {
    t.pager.blocks().snapshot()
}

/// Keys with gaps that change scale (many conflicts for a linear model).
fn bumpy_keys(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut k = 0u64;
    let mut keys = Vec::with_capacity(n);
    for i in 0..n {
        let scale = if (i / 500) % 3 == 0 { 1_000_000 } else { 7 };
        k += 1 + rng.random_range(0..scale);
        keys.push(k);
    }
    keys
}

#[test]
fn node_header_and_slots_round_trip() {
    let h = NodeHeader {
        slots: 40,
        model: Model {
            base: 9,
            slope: 0.25,
            intercept: 1.0,
        },
        size: 5,
        build_size: 4,
        inserts: 1,
        conflicts: 1,
    };
    let mut b = [0u8; 64];
    h.encode(&mut b);
    assert_eq!(NodeHeader::decode(&b, 0, node_bytes(40), "f", 1).unwrap(), h);
    assert!(
        NodeHeader::decode(&b, 1, node_bytes(40), "f", 1).is_err(),
        "past the tail"
    );
    for s in [Slot::Null, Slot::Data(u64::MAX, 3), Slot::Node(100)] {
        let mut b = [0u8; 17];
        s.encode(&mut b);
        assert_eq!(Slot::decode(&b, 1000, "f", 1).unwrap(), s);
    }
    let mut b = [0u8; 17];
    Slot::Node(995).encode(&mut b);
    assert!(Slot::decode(&b, 1000, "f", 1).is_err(), "child past the tail");
    b[0] = 9;
    assert!(Slot::decode(&b, 1000, "f", 1).is_err(), "unknown type");
}

#[test]
fn fmcd_spreads_uniform_keys_without_conflicts() {
    let keys: Vec<u64> = (0..1000u64).map(|i| i * 1000).collect();
    let slots = format::slots_for(keys.len());
    let m = Model::fmcd(&|i| keys[i], keys.len(), slots);
    let mut used: Vec<u64> = keys.iter().map(|&k| m.slot(k, slots)).collect();
    used.dedup();
    assert_eq!(used.len(), keys.len(), "uniform keys: one per slot");
    let p = plan(&keys.iter().map(|&k| (k, k)).collect::<Vec<_>>()).unwrap();
    assert_eq!(p.nodes, 1);
}

#[test]
fn exact_blocks_per_lookup_of_a_one_page_tree() {
    let dir = MemDirectory::new();
    let keys: Vec<u64> = (0..20u64).map(|i| i * 10).collect();
    let m = build(&dir, &keys, 4096);
    assert_eq!(m.nodes, 1);
    assert!(m.tail <= payload(4096), "100 slots fit one page");
    let t = open(&dir, Residency::None);
    let before = blocks(&t);
    assert_eq!(t.get(50).unwrap(), Some(5));
    let d = blocks(&t).since(&before);
    assert_eq!(
        (d.inner_read, d.leaf_read),
        (1, 0),
        "header and slot share the page"
    );
    let before = blocks(&t);
    let mut out = Vec::new();
    t.scan(0, 100, &mut out).unwrap();
    assert_eq!(out.len(), 20);
    let d = blocks(&t).since(&before);
    assert_eq!(
        (d.inner_read, d.leaf_read),
        (1, 0),
        "a scan of a one-page tree reads it once"
    );
    let t = open(&dir, Residency::Index);
    t.get(50).unwrap();
    let before = blocks(&t);
    assert_eq!(t.get(60).unwrap(), Some(6));
    let d = blocks(&t).since(&before);
    assert_eq!(
        (d.inner_read, d.leaf_read),
        (0, 1),
        "header resident: the slot's page only"
    );
}

#[test]
fn answers_on_bumpy_keys_and_scans_in_order() {
    let dir = MemDirectory::new();
    let keys = bumpy_keys(20_000, 3);
    let m = build(&dir, &keys, 4096);
    assert!(m.nodes > 1, "bumpy keys conflict");
    for residency in [Residency::None, Residency::Index] {
        let t = open(&dir, residency);
        for (i, &k) in keys.iter().enumerate().step_by(7) {
            assert_eq!(t.get(k).unwrap(), Some(i as u64));
            assert_eq!(
                t.get(k + 1).unwrap(),
                keys.get(i + 1).filter(|&&n| n == k + 1).map(|_| i as u64 + 1)
            );
            assert_eq!(t.lower_bound(k).unwrap(), Some((k, i as u64)));
        }
        assert_eq!(t.lower_bound(keys[keys.len() - 1] + 1).unwrap(), None);
        let mut out = Vec::new();
        t.scan(0, usize::MAX, &mut out).unwrap();
        let want: Vec<Record> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
        assert_eq!(out, want);
        let r = t.verify().unwrap();
        assert_eq!((r.records, r.nodes), (keys.len() as u64, m.nodes));
        assert!(
            r.crossing >= 1 && r.crossing < r.nodes,
            "the root crosses pages, most children do not"
        );
    }
}

#[test]
fn inserts_create_children_and_rebuild_subtrees() {
    let dir = MemDirectory::new();
    let keys: Vec<u64> = (0..100u64).map(|i| i * 1_000_000).collect();
    build(&dir, &keys, 4096);
    let mut model: BTreeMap<u64, u64> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let t = open(&dir, Residency::None);
    let mut rng = Pcg64Mcg::seed_from_u64(5);
    for i in 0..5_000u64 {
        let k = rng.random_range(0..100_000_000u64);
        assert_eq!(t.insert(k, i).unwrap(), model.insert(k, i), "insert {k}");
    }
    let b = blocks(&t);
    let meta = t.meta();
    assert!(
        b.smo > 0 && meta.dead > 0,
        "children created and a subtree rebuilt: {b:?} {meta:?}"
    );
    let r = t.verify().unwrap();
    assert_eq!(r.records, model.len() as u64);
    for (&k, &v) in &model {
        assert_eq!(t.get(k).unwrap(), Some(v));
    }
    t.sync().unwrap();
    drop(t);
    let t = open(&dir, Residency::Index);
    let mut out = Vec::new();
    t.scan(0, usize::MAX, &mut out).unwrap();
    assert_eq!(out, model.into_iter().collect::<Vec<_>>());
}

#[test]
fn a_flipped_byte_is_corruption_naming_the_page() {
    let dir = MemDirectory::new();
    let keys = bumpy_keys(2_000, 9);
    build(&dir, &keys, 4096);
    let f = dir.open(LIPP_FILE).unwrap();
    let mut b = [0u8; 1];
    f.read_at(4096 + 100, &mut b).unwrap();
    f.write_at(4096 + 100, &[b[0] ^ 0x40]).unwrap();
    let t = open(&dir, Residency::None);
    match t.get(keys[0]) {
        Err(Error::Corruption { page, .. }) => assert_eq!(page, 1),
        other => panic!("expected corruption, got {other:?}"),
    }
    assert!(t.verify().is_err());
}

#[test]
fn model_test_with_deletes_and_reboots() {
    let dir = MemDirectory::new();
    let keys = bumpy_keys(3_000, 1);
    build(&dir, &keys, 4096);
    let mut model: BTreeMap<u64, u64> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let mut rng = Pcg64Mcg::seed_from_u64(11);
    let mut t = open(&dir, Residency::Index);
    for step in 0..20_000u64 {
        let k = match rng.random_range(0..4) {
            0 => rng.random::<u64>(),
            _ => rng.random_range(0..keys[keys.len() - 1] + 100),
        };
        match rng.random_range(0..10) {
            0..=4 => assert_eq!(t.insert(k, step).unwrap(), model.insert(k, step)),
            5..=6 => {
                let k = model.range(k..).next().map_or(k, |(&k, _)| k);
                assert_eq!(t.delete(k).unwrap(), model.remove(&k).is_some());
            }
            7 => assert_eq!(
                t.lower_bound(k).unwrap(),
                model.range(k..).next().map(|(&k, &v)| (k, v))
            ),
            8 => {
                let mut out = Vec::new();
                t.scan(k, 20, &mut out).unwrap();
                let want: Vec<Record> = model.range(k..).take(20).map(|(&k, &v)| (k, v)).collect();
                assert_eq!(out, want);
            }
            _ => assert_eq!(t.get(k).unwrap(), model.get(&k).copied()),
        }
        if step % 5_000 == 4_999 {
            t.sync().unwrap();
            drop(t);
            let res = if step % 10_000 == 4_999 {
                Residency::None
            } else {
                Residency::Index
            };
            t = open(&dir, res);
            assert_eq!(t.verify().unwrap().records, model.len() as u64);
        }
    }
    assert_eq!(t.len(), model.len() as u64);
}

#[test]
fn empty_and_extreme_keys() {
    let dir = MemDirectory::new();
    build(&dir, &[], 4096);
    let t = open(&dir, Residency::None);
    assert_eq!(t.get(0).unwrap(), None);
    assert_eq!(t.lower_bound(0).unwrap(), None);
    for k in [u64::MAX, 0, u64::MAX - 1, 1, 1 << 63] {
        assert_eq!(t.insert(k, k).unwrap(), None);
    }
    let mut out = Vec::new();
    t.scan(0, 10, &mut out).unwrap();
    assert_eq!(
        out.iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 1, 1 << 63, u64::MAX - 1, u64::MAX]
    );
    t.verify().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any strictly increasing keys (huge gaps, clusters, the extremes)
    /// plan into a tree where each key sits in the slot every model on its
    /// path gives it.
    #[test]
    fn every_key_is_found_where_the_models_put_it(
        mut keys in proptest::collection::vec(any::<u64>(), 0..400),
        dense in proptest::collection::vec(0u64..64, 0..100),
    ) {
        keys.extend(dense);
        keys.extend([0, u64::MAX]);
        keys.sort_unstable();
        keys.dedup();
        let dir = MemDirectory::new();
        build(&dir, &keys, 4096);
        let t = open(&dir, Residency::None);
        let r = t.verify().unwrap();
        prop_assert_eq!(r.records, keys.len() as u64);
        for (i, &k) in keys.iter().enumerate() {
            prop_assert_eq!(t.get(k).unwrap(), Some(i as u64));
        }
    }
}

/// Lan's Table 4 figures on `LIPP_N` (default 1M) fb-like and osm-like keys:
/// nodes and blocks per lookup, leaf blocks per scan (1 + 99), disk bytes,
/// and structure modifications per insert in write-only (bulk half, insert
/// the other half). A measurement, run by hand:
/// `cargo test -p strata --lib lipp::tests::table4 -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement for the report"]
fn table4_figures() {
    let n: usize = std::env::var("LIPP_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    for dist in [crate::data::Dist::FbLike, crate::data::Dist::OsmLike] {
        let keys = crate::data::generate(dist, n, 42).unwrap();
        let dir = MemDirectory::new();
        let m = build(&dir, &keys, 4096);
        let t = open(&dir, Residency::None);
        let v = t.verify().unwrap();
        println!(
            "{dist:?} n={n}: depth {}, {} of {} nodes cross a page boundary",
            v.depth, v.crossing, v.nodes
        );
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let ops = 20_000u64;
        let before = blocks(&t);
        for _ in 0..ops {
            let k = keys[rng.random_range(0..keys.len())];
            assert!(t.get(k).unwrap().is_some());
        }
        let d = blocks(&t).since(&before);
        let visits = t.node_visits.load(std::sync::atomic::Ordering::Relaxed);
        let before = blocks(&t);
        let scans = 2_000u64;
        for _ in 0..scans {
            let k = keys[rng.random_range(0..keys.len())];
            let mut out = Vec::new();
            t.scan(k, 100, &mut out).unwrap();
        }
        let s = blocks(&t).since(&before);
        println!(
            "{dist:?} n={n}: nodes {} bytes {} pages {}; lookup: nodes {:.2}, inner {:.2} + leaf {:.2} = {:.2} blocks; \
             scan 1+99: inner {:.2} + leaf {:.2} = {:.2} blocks",
            m.nodes,
            m.tail,
            m.space.page_count,
            visits as f64 / ops as f64,
            d.inner_read as f64 / ops as f64,
            d.leaf_read as f64 / ops as f64,
            (d.inner_read + d.leaf_read) as f64 / ops as f64,
            s.inner_read as f64 / scans as f64,
            s.leaf_read as f64 / scans as f64,
            (s.inner_read + s.leaf_read) as f64 / scans as f64,
        );
        drop(t);
        let half: Vec<u64> = keys.iter().copied().step_by(2).collect();
        let rest: Vec<u64> = keys.iter().copied().skip(1).step_by(2).collect();
        let dir = MemDirectory::new();
        build(&dir, &half, 4096);
        let t = open(&dir, Residency::None);
        let ins = rest.len().min(200_000);
        let mut order: Vec<usize> = (0..rest.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let before = blocks(&t);
        for &i in order.iter().take(ins) {
            t.insert(rest[i], 1).unwrap();
        }
        let w = blocks(&t).since(&before);
        let meta = t.meta();
        println!(
            "{dist:?} write-only: {ins} inserts, smo/insert {:.3}, read {:.2} + written {:.2} blocks/insert, \
             node bytes {} (dead {}), nodes {}",
            w.smo as f64 / ins as f64,
            (w.inner_read + w.leaf_read + w.other_read) as f64 / ins as f64,
            (w.inner_written + w.leaf_written + w.other_written) as f64 / ins as f64,
            meta.tail,
            meta.dead,
            meta.nodes
        );
        t.verify().unwrap();
    }
}

/// Sequential inserts below (or above) every key conflict at the clamped
/// end slot of each node they pass: the chains they grow are cut by LIPP's
/// rebuild rule, so the depth stays bounded (far below `MAX_DEPTH`).
#[test]
fn sequential_inserts_stay_shallow() {
    for descending in [true, false] {
        let dir = MemDirectory::new();
        build(&dir, &[1 << 40], 4096);
        let t = open(&dir, Residency::Index);
        for i in 0..30_000u64 {
            let k = if descending {
                (1 << 40) - 1 - i
            } else {
                (1 << 40) + 1 + i
            };
            assert_eq!(t.insert(k, i).unwrap(), None);
        }
        let r = t.verify().unwrap();
        assert_eq!(r.records, 30_001);
        // A chain grows one node per insert below a node's smallest key
        // until its top node holds 64 keys and is rebuilt.
        assert!(r.depth <= 64, "descending {descending}: depth {}", r.depth);
        assert!(t.meta().dead > 0, "rebuilds happened");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// After any inserts and deletes (keys clustered, so children, chains
    /// and rebuilds happen), `verify`'s invariants hold and the index holds
    /// exactly the model's records.
    #[test]
    fn writes_keep_the_invariants(
        bulk in proptest::collection::btree_set(0u64..5_000, 0..200),
        ops in proptest::collection::vec((any::<u8>(), 0u64..5_000, any::<u64>()), 1..1_500),
    ) {
        let keys: Vec<u64> = bulk.iter().copied().collect();
        let dir = MemDirectory::new();
        build(&dir, &keys, 4096);
        let mut model: BTreeMap<u64, u64> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
        let t = open(&dir, Residency::Index);
        for (op, k, v) in ops {
            // Spread keys, huge ones, and a dense cluster above them all
            // (its child grows past 64 keys and is rebuilt).
            let k = match v % 4 {
                0 => k,
                1 => k << 50,
                _ => (1 << 62) + k % 300,
            };
            if op < 64 {
                prop_assert_eq!(t.delete(k).unwrap(), model.remove(&k).is_some());
            } else {
                prop_assert_eq!(t.insert(k, v).unwrap(), model.insert(k, v));
            }
        }
        let r = t.verify().unwrap();
        prop_assert_eq!(r.records, model.len() as u64);
        let mut out = Vec::new();
        t.scan(0, usize::MAX, &mut out).unwrap();
        prop_assert_eq!(out, model.into_iter().collect::<Vec<_>>());
    }
}
