#![no_main]
//! Fuzz target `datarun`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("datarun", data));
