//! On-disk layouts: page header and checksum, data runs, SOSD key files.
//!
//! Little-endian only. Every page carries a crc32c checksum seeded with its
//! page number; every file starts with a magic number and a format version.
//! The normative descriptions are in `docs/format/`.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod bytes;
pub mod datarun;
pub mod page;
pub mod paged;
pub mod sosd;

pub use datarun::{
    DATA_FILE, DATA_RUN_MAGIC, DATA_RUN_VERSION, DataRun, DataRunMeta, DataRunWriter, PageRun, RECORD_LEN,
    records_per_page, write_data_run,
};
pub use page::{PAGE_HEADER_LEN, PageHeader, PageType};
pub use paged::{PagedFile, PagedMeta, PagedRun, PagedSpec, PagedWriter, entries_per_page};
pub use sosd::{KeyFileOptions, KeyReader, KeyWidth, read_keys, write_keys};
