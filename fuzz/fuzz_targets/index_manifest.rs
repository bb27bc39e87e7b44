#![no_main]
//! Fuzz target `index_manifest`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("index_manifest", data));
