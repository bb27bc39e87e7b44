#![no_main]
//! Fuzz target `db_manifest`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("db_manifest", data));
