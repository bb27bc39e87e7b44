#![no_main]
//! Fuzz target `btree_inner`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("btree_inner", data));
