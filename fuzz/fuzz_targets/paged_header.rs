#![no_main]
//! Fuzz target `paged_header`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("paged_header", data));
