#![no_main]
//! Fuzz target `page`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("page", data));
