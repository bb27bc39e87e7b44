#![no_main]
//! Fuzz target `sstable`: see `strata_fuzz::run`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz::run("sstable", data));
