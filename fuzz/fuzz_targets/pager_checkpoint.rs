#![no_main]
//! Fuzz target `pager_checkpoint`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("pager_checkpoint", data));
