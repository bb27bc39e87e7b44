#![no_main]
//! Fuzz target `gapcode`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("gapcode", data));
