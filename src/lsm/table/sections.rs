//! A table's metadata sections decoded (`docs/format/sstable.md`): the
//! block handles with the index, which lookups and iterators walk, and the
//! Bloom filter. Opening a table decodes them all; an unpinned table
//! decodes them again, with the same checks, when it loads them.

use super::bloom::Bloom;
use super::index::TableIndex;
use super::layout::{Footer, Handles, Props, section};
use crate::{Error, Result};

/// Section numbers in the footer (`docs/format/sstable.md`).
pub(super) const HANDLES: usize = 0;
pub(super) const INDEX: usize = 1;
pub(super) const FILTER: usize = 2;
pub(super) const PROPS: usize = 3;

/// What lookups and iterators walk a table with: its block handles (first
/// ordinal and offset of every data block) and its index.
#[derive(Debug)]
pub(super) struct IndexSections {
    pub(super) handles: Handles,
    pub(super) index: TableIndex,
}

impl IndexSections {
    /// Decoded bytes (what [`super::Table::memory`] reports for a pinned table).
    pub(super) fn memory_bytes(&self) -> u64 {
        self.index.memory_bytes() + self.handles.memory_bytes()
    }
}

/// Decodes and checks the handles and index sections from `bytes`, the
/// file's bytes from offset `base` (covering both sections).
pub(super) fn decode_index(
    bytes: &[u8],
    base: u64,
    footer: &Footer,
    props: &Props,
    name: &str,
) -> Result<IndexSections> {
    let data_end = footer.sections[HANDLES].0;
    let handles = Handles::decode(
        section(bytes, base, footer, HANDLES, name)?,
        props.entries,
        data_end,
        name,
    )?;
    let index = TableIndex::decode(section(bytes, base, footer, INDEX, name)?, props.entries, name)?;
    if matches!(index, TableIndex::Fences(_)) != (props.kind == "fp") {
        return Err(Error::corruption_at(
            name,
            data_end,
            "index section and kind disagree",
        ));
    }
    Ok(IndexSections { handles, index })
}

/// Decodes and checks the filter section from `bytes`, the file's bytes
/// from offset `base` (covering the section).
pub(super) fn decode_filter(
    bytes: &[u8],
    base: u64,
    footer: &Footer,
    props: &Props,
    name: &str,
) -> Result<Option<Bloom>> {
    let filter_bytes = section(bytes, base, footer, FILTER, name)?;
    match (props.bloom_bits_per_key, filter_bytes.is_empty()) {
        (0, true) => Ok(None),
        (b, false) if b > 0 => Ok(Some(Bloom::decode(filter_bytes, name)?)),
        _ => Err(Error::corruption_at(
            name,
            footer.sections[HANDLES].0,
            "filter section and properties disagree",
        )),
    }
}
