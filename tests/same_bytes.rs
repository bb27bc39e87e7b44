//! The write-once sink writes the same bytes as the writer path before it.
//!
//! The figures below are CRC32C checksums of every file (but the manifest,
//! which holds the build time) of a fixed build of four kinds, recorded on
//! a97175a, before the sink existed, with
//! `STRATA_PRINT_CRCS=1 cargo test -p strata --test same_bytes -- --nocapture`.
//!
//! Since issue 16 every build draws a random build id and writes it into
//! the header page's `aux` word (bytes 8..16 of page 0) of each file: the
//! test puts the 0 of a97175a back there and reseals page 0 (its checksum
//! is crc32c of the page number, 0, then bytes 4.. of the page), so the
//! figures still pin every other byte as recorded.

use strata::index::{BuildOptions, IndexSpec, MANIFEST_FILE};
use strata::storage::LOCK_FILE;

/// (kind spec, page size, file name, length, crc32c) of the fixed build.
const EXPECTED: &[(&str, usize, &str, u64, u32)] = &[
    ("binary", 4096, "data.run", 3219456, 0x9c273414),
    ("binary", 16384, "data.run", 3227648, 0xa262ea11),
    ("pgm", 4096, "data.run", 3219456, 0x9c273414),
    ("pgm", 4096, "layer-0.bin", 8192, 0xd87a2fa8),
    ("pgm", 4096, "layer-1.bin", 8192, 0x214fe748),
    ("pgm:epsilon=2", 4096, "data.run", 3219456, 0x9c273414),
    ("pgm:epsilon=2", 4096, "layer-0.bin", 90112, 0x8c2b804c),
    ("pgm:epsilon=2", 4096, "layer-1.bin", 8192, 0xcd2b2c1c),
    ("pgm:epsilon=2", 4096, "layer-2.bin", 8192, 0x8af945bc),
    ("gap-zonemap-d", 4096, "data.run", 3219456, 0x9c273414),
    ("gap-zonemap-d", 4096, "layer-0.bin", 8192, 0x14ec78bd),
    ("rs", 4096, "data.run", 3219456, 0x9c273414),
    ("rs", 4096, "layer-0.bin", 8192, 0x4294422e),
    ("rs", 4096, "layer-1.bin", 8192, 0xc51368ae),
];

fn keys() -> Vec<u64> {
    // Deterministic, irregular gaps (a small LCG), strictly increasing.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut k = 0u64;
    (0..200_000)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            k += 1 + (x >> 52);
            k
        })
        .collect()
}

fn build_all() -> Vec<(String, usize, String, u64, u32)> {
    let keys = keys();
    let mut out = Vec::new();
    for (spec, page) in [
        ("binary", 4096),
        ("binary", 16384),
        ("pgm", 4096),
        ("pgm:epsilon=2", 4096),
        ("gap-zonemap-d", 4096),
        ("rs", 4096),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let s: IndexSpec = spec.parse().unwrap();
        strata::registry::build(&s, &keys, tmp.path(), &BuildOptions { page_size: page }).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            // The manifest records the build time; the lock file is empty
            // and came later (issue 16), not part of the format.
            .filter(|n| n != MANIFEST_FILE && n != LOCK_FILE)
            .collect();
        names.sort();
        for name in names {
            let mut bytes = std::fs::read(tmp.path().join(&name)).unwrap();
            assert_ne!(bytes[8..16], [0u8; 8], "{spec}: {name} has no build id");
            without_build_id(&mut bytes[..page]);
            out.push((
                spec.to_string(),
                page,
                name,
                bytes.len() as u64,
                crc32c::crc32c(&bytes),
            ));
        }
    }
    out
}

/// Zeroes the build id in header page `hdr` and reseals it.
fn without_build_id(hdr: &mut [u8]) {
    hdr[8..16].fill(0);
    let seed = crc32c::crc32c(&0u64.to_le_bytes());
    let crc = crc32c::crc32c_append(seed, &hdr[4..]);
    hdr[..4].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn builds_write_the_recorded_bytes() {
    let got = build_all();
    if std::env::var_os("STRATA_PRINT_CRCS").is_some() {
        for (spec, page, name, len, crc) in &got {
            println!("    ({spec:?}, {page}, {name:?}, {len}, 0x{crc:08x}),");
        }
    }
    let want: Vec<(String, usize, String, u64, u32)> = EXPECTED
        .iter()
        .map(|&(s, p, n, l, c)| (s.to_string(), p, n.to_string(), l, c))
        .collect();
    assert_eq!(got, want);
}
