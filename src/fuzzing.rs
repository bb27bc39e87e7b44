//! Entry points for the fuzz targets of `fuzz/` into decoders that are not
//! public: built only with `--cfg fuzzing` (which `cargo fuzz` sets) and in
//! this crate's unit tests. Each function decodes bytes the way the library
//! does when it reads a file and returns the decoder's error; the
//! `*_roundtrip` functions also re-encode what they decoded and return
//! `Ok(false)` when decoding that encoding gives something else.
//!
//! Nothing here is part of the library's API.

use crate::Result;
use crate::index::btree::format::{InnerPage, LeafPage, encode_leaf};
use crate::model::bitpack::PackedInts;

/// Decodes packed integers, reads values (the first 4096: a width of 0
/// holds any count in no words), and checks that the encoding
/// of the decoded value decodes to the same encoding.
pub fn bitpack_roundtrip(bytes: &[u8]) -> Result<bool> {
    let p = PackedInts::from_bytes(bytes)?;
    for i in 0..p.len().min(4096) {
        std::hint::black_box(p.get(i));
    }
    let again = p.to_bytes();
    Ok(PackedInts::from_bytes(&again)?.to_bytes() == again)
}

/// Encoded packed integers of `values` (seed corpora).
pub fn bitpack_encode(values: &[i64]) -> Vec<u8> {
    PackedInts::encode(values).to_bytes()
}

/// Opens `page` (page `page_no`) as a B+-tree leaf, reads every record and
/// searches it; when the page is a valid leaf, checks that re-encoding its
/// records gives a page that opens to the same records.
pub fn btree_leaf_roundtrip(page: &[u8], page_no: u64) -> Result<bool> {
    let leaf = LeafPage::open(page, page_no, "fuzz")?;
    let records: Vec<(u64, u64)> = (0..leaf.count()).filter_map(|i| leaf.record(i)).collect();
    for &(k, _) in records.iter().take(64) {
        let _ = leaf.lower_bound(k);
    }
    let _ = leaf.lower_bound(u64::MAX);
    let mut again = vec![0u8; page.len()];
    encode_leaf(&mut again, page_no, &records, leaf.next())?;
    let reopened = LeafPage::open(&again, page_no, "fuzz")?;
    let same: Vec<(u64, u64)> = (0..reopened.count()).filter_map(|i| reopened.record(i)).collect();
    Ok(same == records && reopened.next() == leaf.next())
}

/// Opens `page` as a B+-tree inner node, routes a few keys, and checks that
/// its decoded node re-encodes to a page that decodes to the same node.
pub fn btree_inner_roundtrip(page: &[u8], page_no: u64) -> Result<bool> {
    let inner = InnerPage::open(page, page_no, "fuzz")?;
    let _ = (0..=inner.count()).filter_map(|i| inner.child(i)).count();
    for key in [0, 1, u64::MAX / 2, u64::MAX] {
        let _ = inner.route(key);
    }
    let node = inner.decode();
    for &k in node.keys.iter().take(64) {
        let _ = node.route(k);
    }
    let mut again = vec![0u8; page.len()];
    node.encode(&mut again, page_no)?;
    let node2 = InnerPage::open(&again, page_no, "fuzz")?.decode();
    Ok(node2.keys == node.keys && node2.children == node.children)
}

/// Reads the checkpoint page of a B+-tree file as opening the tree does
/// (`Meta::read`: magic, version, page size, checksum, root and sizes).
pub fn btree_meta(storage: &dyn crate::storage::Storage) -> Result<()> {
    crate::index::btree::Meta::read(storage).map(|_| ())
}

/// A valid leaf page of `page_size` bytes holding `records` (seed corpora).
pub fn btree_leaf_page(page_size: usize, page_no: u64, records: &[(u64, u64)], next: u64) -> Result<Vec<u8>> {
    let mut page = vec![0u8; page_size];
    encode_leaf(&mut page, page_no, records, next)?;
    Ok(page)
}

/// A valid inner page of `page_size` bytes (seed corpora): `keys` separate
/// `children`, which must be one longer.
pub fn btree_inner_page(page_size: usize, page_no: u64, keys: &[u64], children: &[u64]) -> Result<Vec<u8>> {
    let mut page = vec![0u8; page_size];
    crate::index::btree::format::InnerNode {
        keys: keys.to_vec(),
        children: children.to_vec(),
    }
    .encode(&mut page, page_no)?;
    Ok(page)
}

/// Opens `bytes` as an SSTable after recomputing its checksums (so that
/// mutations reach the decoders behind them), then scans it (at most 4096
/// entries), looks every scanned key up, and seeks to a few targets.
/// Returns the entries scanned; lookups must agree with the scan.
pub fn sstable_open(bytes: &[u8]) -> Result<u64> {
    use crate::lsm::key::InternalIterator;
    use crate::storage::{MemStorage, Storage};
    let mut image = bytes.to_vec();
    crate::lsm::table::reseal(&mut image);
    let storage = MemStorage::new("fuzz.sst");
    storage.write_at(0, &image)?;
    let table = std::sync::Arc::new(crate::lsm::table::Table::open(
        std::sync::Arc::new(storage),
        None,
    )?);
    let mut it = table.iter();
    it.seek_to_first()?;
    let mut seen = Vec::new();
    while it.valid() && seen.len() < 4096 {
        seen.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    for (k, v) in seen.iter().take(256) {
        if let Some((got, value)) = table.get(k)? {
            // The first entry >= k is k itself in a well-formed table; a
            // corrupt but checksum-valid table may disagree: only no panic.
            std::hint::black_box((got == *k, value == *v));
        }
    }
    for t in [
        &b""[..],
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        b"m\0\0\0\0\0\0\0\x01",
    ] {
        it.seek(t)?;
        std::hint::black_box(it.valid());
    }
    Ok(seen.len() as u64)
}

/// A valid SSTable image of `n` keys with index `kind` (seed corpora).
pub fn sstable_seed(kind: &str, n: u64) -> Result<Vec<u8>> {
    use crate::lsm::key::{ValueKind, encode};
    use crate::lsm::table::{IndexSpec, TableBuilder, TableOptions};
    use crate::storage::MemDirectory;
    let dir = MemDirectory::new();
    let opts = TableOptions {
        block_size: 256,
        restart_interval: 4,
        index: IndexSpec {
            kind: kind.to_string(),
            boundary: 4,
            profile: None,
        },
        ..TableOptions::default()
    };
    let mut b = TableBuilder::new(&dir, "seed.sst", &opts)?;
    for i in 0..n {
        let user = format!("key{:05}", i * 7);
        b.add(
            &encode(user.as_bytes(), 100 - i % 3, ValueKind::Put),
            &i.to_le_bytes(),
        )?;
    }
    b.finish()?;
    dir.file("seed.sst")
        .map(|f| f.contents())
        .ok_or_else(|| crate::Error::invalid("seed table missing"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sstable_seeds_open_and_mutations_do_not_panic() {
        for kind in ["fp", "pgm", "gap-zonemap-d"] {
            let seed = sstable_seed(kind, 200).unwrap();
            assert_eq!(sstable_open(&seed).unwrap(), 200, "{kind}");
            // Resealed mutations reach every decoder: errors, never panics.
            let mut failed = 0;
            for i in (0..seed.len()).step_by(3) {
                let mut m = seed.clone();
                m[i] ^= 0x21;
                failed += u32::from(sstable_open(&m).is_err());
            }
            assert!(failed > 0, "{kind}");
            assert!(sstable_open(&seed[..seed.len() - 1]).is_err());
        }
    }

    fn unhex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Fuzz regression 2 (target `sstable`): a block offset near
    /// `u64::MAX` overflowed the handles' order check (`Handles::decode`).
    #[test]
    fn sstable_regression_2_block_offset_overflow() {
        let mut t = sstable_seed("fp", 120).unwrap();
        let f = t.len() - 96;
        let h = u64::from_le_bytes(t[f + 24..f + 32].try_into().unwrap()) as usize;
        let blocks = u32::from_le_bytes(t[h..h + 4].try_into().unwrap()) as usize;
        let second = h + 4 + 4 * (blocks + 1) + 8;
        t[second..second + 8].copy_from_slice(&(u64::MAX - 2).to_le_bytes());
        assert!(sstable_open(&t).is_err());
    }

    /// Fuzz regression 1 (target `sstable`): a block handle ending before
    /// byte 4 made the checksum repair subtract with overflow.
    #[test]
    fn sstable_regression_1_short_block_handle() {
        assert!(sstable_open(&unhex("53545241544153530100005354524154415353010010086b65793000000000000010086a6579c730303030000000000000640100000000000000000709083700000000000063010100000000000000060a083134000000000000620102001e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e000000000000060a00000000000000000000000000000000000000000000000002000000000000000000000000000000000000003030300000000000cfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcfcf00")).is_err());
    }

    #[test]
    fn seeds_round_trip() {
        let packed = bitpack_encode(&[5, -3, 1 << 40, 0]);
        assert!(bitpack_roundtrip(&packed).unwrap());
        assert!(bitpack_roundtrip(&packed[..10]).is_err());

        let leaf = btree_leaf_page(4096, 3, &[(1, 10), (5, 50), (9, 90)], 4).unwrap();
        assert!(btree_leaf_roundtrip(&leaf, 3).unwrap());
        assert!(
            btree_leaf_roundtrip(&leaf, 2).is_err(),
            "page number seeds the checksum"
        );

        let inner = btree_inner_page(4096, 7, &[10, 20], &[1, 2, 3]).unwrap();
        assert!(btree_inner_roundtrip(&inner, 7).unwrap());
        assert!(
            btree_leaf_roundtrip(&inner, 7).is_err(),
            "an inner page is not a leaf"
        );
    }

    /// `bytes` with the page checksum recomputed for page `page_no`, as the
    /// node targets do (bytes shorter than the checksum are left alone).
    fn resealed(page_no: u64, bytes: &[u8]) -> Vec<u8> {
        let mut p = bytes.to_vec();
        if p.len() >= 4 {
            let seed = crc32c::crc32c(&page_no.to_le_bytes());
            let crc = crc32c::crc32c_append(seed, &p[4..]);
            p[..4].copy_from_slice(&crc.to_le_bytes());
        }
        p
    }

    /// Fuzz target `bitpack`, crash-f52e1307: a value count times a width
    /// past u64 overflowed (a panic in debug builds, a wrapped check in
    /// release).
    #[test]
    fn regression_bitpack_count_times_width_overflow() {
        let input = [
            0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00,
        ];
        assert!(matches!(
            bitpack_roundtrip(&input),
            Err(crate::Error::Corruption { .. })
        ));
    }

    /// Fuzz targets `btree_leaf` (crash-3fb4ad91) and `btree_inner`
    /// (crash-9694c4eb): a node page shorter than its header underflowed
    /// the slot count.
    #[test]
    fn regression_btree_node_shorter_than_header() {
        let leaf = resealed(3, &[0x1a, 0xbd, 0x64, 0x93, 0x03, 0x00, 0x00, 0x64]);
        assert!(btree_leaf_roundtrip(&leaf, 3).is_err());
        let inner = resealed(0, &[0; 9]);
        assert!(btree_inner_roundtrip(&inner, 0).is_err());
        for len in 0..16 {
            let page = resealed(1, &vec![4u8; len]);
            assert!(btree_inner_roundtrip(&page, 1).is_err());
            assert!(btree_leaf_roundtrip(&page, 1).is_err());
        }
    }
}
