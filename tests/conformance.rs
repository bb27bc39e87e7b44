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
    strata::index::build(&spec, &keys, tmp.path(), &opts).unwrap();
    let idx = strata::index::open(tmp.path(), &Default::default()).unwrap();
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
