//! On-disk layouts: page header and checksum, data runs, SOSD key files.
//!
//! Little-endian only. Every page carries a crc32c checksum seeded with its
//! page number; every file starts with a magic number and a format version.
//! The normative descriptions are in `docs/format/`.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub(crate) mod bytes;
pub(crate) mod datarun;
pub mod page;
pub(crate) mod paged;
pub mod sosd;

pub(crate) use datarun::PageRun;
pub use datarun::{
    DATA_FILE, DataRun, DataRunMeta, DataRunWriter, RECORD_LEN, decode_data_run_header, records_per_page,
    write_data_run,
};
pub use page::{PAGE_HEADER_LEN, PageHeader, PageType};
pub use paged::{PagedFile, PagedMeta, PagedSpec, decode_header as decode_paged_header};
pub(crate) use paged::{PagedRun, PagedWriter};
pub use sosd::{KeyFileOptions, KeyReader, KeyWidth, read_keys, write_keys};
