#![no_main]
//! Fuzz target `radix_spline`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("radix_spline", data));
