#![no_main]
//! Fuzz target `cpr_band`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("cpr_band", data));
