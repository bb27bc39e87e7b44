//! Every index kind against a sorted-array oracle: see `tests/common/mod.rs`.
//! A new kind adds one test here (several parameter settings where it has them).

mod common;

#[test]
fn binary() {
    common::battery("binary");
}

#[test]
fn binary_16k_pages() {
    // A different page size changes records per page and page boundaries.
    let tmp = tempfile::tempdir().unwrap();
    let keys: Vec<u64> = (0..20_000u64).map(|i| i * i).collect();
    let spec: strata::index::IndexSpec = "binary".parse().unwrap();
    let opts = strata::index::BuildOptions { page_size: 16384 };
    strata::registry::build(&spec, &keys, tmp.path(), &opts).unwrap();
    let idx = strata::registry::open(tmp.path(), &Default::default()).unwrap();
    common::check_against_oracle(idx.as_ref(), &keys, "binary 16k");
}

#[test]
fn zonemap() {
    common::battery("zonemap");
}

#[test]
fn btree_static() {
    common::battery("btree-static");
    common::battery("btree-static:fanout=4");
}

#[test]
fn zonemap_one_by_one() {
    common::battery("zonemap:fetch=one-by-one");
}

#[test]
fn btree() {
    common::battery("btree");
}

#[test]
fn btree_ld() {
    common::battery("btree-ld");
    common::battery("btree-ld:page=8192");
    common::battery_after_updates("btree-ld:fill=80");
}

#[test]
fn alex() {
    common::battery("alex");
}

#[test]
fn alex_small_nodes() {
    common::battery("alex:max_node_pages=1");
}

#[test]
fn alex_after_updates() {
    common::battery_after_updates("alex");
    common::battery_after_updates("alex:max_node_pages=1");
}

#[test]
fn fiting() {
    common::battery("fiting");
}

#[test]
fn lipp() {
    common::battery("lipp");
}

#[test]
fn lipp_after_updates() {
    common::battery_after_updates("lipp");
}

#[test]
fn fiting_small_epsilon_and_buffer() {
    common::battery("fiting:epsilon=16,buffer=32");
}

#[test]
fn fiting_after_updates() {
    common::battery_after_updates("fiting");
    common::battery_after_updates("fiting:epsilon=16,buffer=32");
}

#[test]
fn btree_fill_70() {
    // Part-filled leaves and inner nodes: other page boundaries and heights.
    common::battery("btree:fill=70");
}

#[test]
fn btree_8k_pages() {
    common::battery("btree:page=8192");
}

#[test]
fn btree_16k_pages() {
    // The full battery is O_DIRECT-bound (about 12 s here); the two largest
    // data sets add nothing at 1023 records per leaf that 4 and 8 KiB pages
    // and the 16 KiB model tests in `src/index/btree/tests.rs` do not cover.
    for (name, keys) in common::datasets() {
        if name != "uniform-random" && name != "clustered" {
            common::battery_on("btree:page=16384", name, &keys);
        }
    }
}

#[test]
fn btree_after_updates() {
    // Build over half the keys, insert the other half (values = final rank),
    // reopen, and run the oracle: the tree that inserts built must answer
    // like the bulk-loaded one.
    use strata::index::{BuildOptions, IndexSpec, OpenOptions, Residency};
    for (name, keys) in common::datasets() {
        let tmp = tempfile::tempdir().unwrap();
        let spec: IndexSpec = "btree:fill=80".parse().unwrap();
        let half: Vec<u64> = keys.iter().copied().step_by(2).collect();
        strata::registry::build(&spec, &half, tmp.path(), &BuildOptions::default()).unwrap();
        {
            let idx = strata::registry::open(tmp.path(), &OpenOptions::default()).unwrap();
            for (i, &k) in keys.iter().enumerate() {
                idx.insert(k, i as u64).unwrap();
            }
            idx.sync().unwrap();
        }
        // Every level from storage (the battery covers O_DIRECT already).
        let opts = OpenOptions {
            resident: Residency::None,
            ..Default::default()
        };
        let idx = strata::registry::open(tmp.path(), &opts).unwrap();
        let what = format!("btree after updates on {name}");
        common::check_against_oracle(idx.as_ref(), &keys, &what);
    }
}

#[test]
fn leco_zonemaps() {
    common::battery("leco-zonemap");
    common::battery("leco-zonemap-d");
    common::battery("gap-zonemap-d");
}

#[test]
fn pgm() {
    for eps in [1, 16, 64, 256] {
        common::battery(&format!("pgm:epsilon={eps}"));
    }
    common::battery("pgm:epsilon=64,granularity=page");
    common::battery("pgm:epsilon=64,granularity=32,fetch=one-by-one");
}

#[test]
fn pgm_sampled() {
    // Chesetti & Pandey's sampled PGM (every 128th key, epsilon 2 samples),
    // and small strides whose windows end inside pages and between samples.
    common::battery("pgm:sample=128,epsilon=2");
    common::battery("pgm:sample=3,epsilon=1");
    common::battery("pgm:sample=2,epsilon=0,fetch=one-by-one");
}

#[test]
fn pgm_disk() {
    for eps in [2, 64, 512] {
        common::battery(&format!("pgm-disk:epsilon={eps}"));
    }
    // Wider windows bought with the page allowance.
    common::battery("pgm-disk:epsilon=64,page_slack=0.02");
}

#[test]
fn pgm_disk_cpr() {
    for eps in [2, 64, 512] {
        common::battery(&format!("pgm-disk-cpr:epsilon={eps}"));
    }
    common::battery("pgm-disk-cpr:epsilon=16,page_slack=0.05");
}

#[test]
fn rs() {
    common::battery("rs:epsilon=16,radix_bits=10");
    common::battery("rs:epsilon=64");
}

#[test]
fn rmi() {
    common::battery("rmi:models=1");
    common::battery("rmi:models=1000");
}

#[test]
fn fiting_static() {
    common::battery("fiting-static:epsilon=16");
    common::battery("fiting-static:epsilon=128");
}

#[test]
fn air() {
    // A tuned design under the full battery (O_DIRECT included), for a
    // cheap-call, costly-byte profile (5 µs, 1 MB/s) that makes deeper,
    // mixed stacks pay off even on small data.
    common::battery("air:profile=custom:5:1,top_k=3");
}

/// Builds `spec` in memory over every data set and checks it against the
/// oracle read from storage, and with `pinned` also with the index pinned
/// (the full battery above covers files, O_DIRECT and the page cache).
fn air_light(spec: &str, pinned: bool) {
    use std::sync::Arc;
    use strata::index::{BuildOptions, OpenOptions, Records, Residency};
    use strata::storage::{Directory, MemDirectory};
    for (name, keys) in common::datasets() {
        let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
        let s: strata::index::IndexSpec = spec.parse().unwrap();
        strata::registry::build_in(&s, Records::ranked(&keys), dir.clone(), &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{spec} on {name}: build failed: {e}"));
        let variants: &[(Residency, usize)] = if pinned {
            &[(Residency::None, 3), (Residency::Index, 1)]
        } else {
            &[(Residency::None, 3)]
        };
        for &(resident, stride) in variants {
            let opts = OpenOptions {
                resident,
                ..Default::default()
            };
            let idx = strata::registry::open_in(dir.clone(), &opts).unwrap();
            common::check_sampled(
                idx.as_ref(),
                &keys,
                &format!("{spec} on {name} ({resident})"),
                stride,
            );
        }
    }
}

#[test]
fn air_each_builder() {
    // Every layer builder forced alone (one family at every level), and
    // other profiles and search widths.
    for b in [
        "gstep", "gband", "eband", "zone", "zband", "leco", "leco-d", "cpr", "airindex",
    ] {
        air_light(&format!("air:profile=custom:5:1,top_k=2,builders={b}"), false);
    }
    for p in ["nvme", "nfs,top_k=1", "hdd,top_k=8"] {
        air_light(&format!("air:profile={p}"), false);
    }
}

#[test]
fn air_memory_budget() {
    // Only the top layers that fit the budget are pinned with resident=index.
    air_light("air:profile=custom:5:1,memory_budget=8192", true);
    air_light("air:profile=sata-ssd,memory_budget=64k", true);
}

#[test]
fn rs_disk() {
    common::battery("rs-disk:epsilon=16,radix_bits=10");
    common::battery("rs-disk:epsilon=128");
}

#[test]
fn lsm() {
    // Learned (PGM) and fence-pointer tables, background and inline
    // flushes, a budget small enough that the larger sets span tables.
    common::battery("lsm:memory=1M");
    common::battery("lsm:index=fp,boundary=64,memory=256K,background=false");
    // Tables whose handles, index and filter live in the block cache.
    common::battery("lsm:memory=256K,pin=false");
}

#[test]
fn lsm_after_updates_and_reopen() {
    common::battery_after_updates("lsm:memory=256K,index=rs");
}

#[test]
fn dpgm() {
    common::battery("dpgm");
    common::battery("dpgm:epsilon=16,buffer=64");
}

#[test]
fn dpgm_after_updates() {
    common::battery_after_updates("dpgm");
    common::battery_after_updates("dpgm:epsilon=16,buffer=64");
}
