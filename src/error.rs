//! The one error type of strata.
//!
//! Every fallible operation in the library returns [`Result<T>`]. The variants
//! say what went wrong and where (file, page, offset, key position) so that a
//! command-line user can act on the message without reading the source. The
//! library never panics on bad input or corrupt files; it returns one of these.

use std::path::PathBuf;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in strata.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error, with the file it happened on.
    #[error("I/O error on {file}: {source}")]
    Io {
        /// The file (or directory) the operation was on.
        file: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A checksum or structural check failed: the bytes on storage are not what
    /// strata wrote. The data is never returned as an answer.
    #[error("corruption in {file} at page {page}: {detail}")]
    Corruption {
        /// The file whose bytes failed the check.
        file: String,
        /// The page number inside the file (0 for the file header).
        page: u64,
        /// What exactly failed.
        detail: String,
    },

    /// The file does not start with the magic number of the expected format.
    #[error("{file} is not a {expected} file (magic {found:#018x})")]
    BadMagic {
        /// The file that was opened.
        file: String,
        /// The kind of file that was expected.
        expected: &'static str,
        /// The magic number found.
        found: u64,
    },

    /// The file's format version is one this build cannot read.
    #[error("{file} has format version {found}; this build reads version {supported}")]
    UnsupportedVersion {
        /// The file that was opened.
        file: String,
        /// The version found in the file.
        found: u32,
        /// The version this build supports.
        supported: u32,
    },

    /// A file is shorter (or longer) than its header says.
    #[error("{file} is truncated: expected {expected} bytes, found {found}")]
    Truncated {
        /// The file.
        file: String,
        /// The size the header or count implies.
        expected: u64,
        /// The actual size.
        found: u64,
    },

    /// Keys that must be strictly increasing are not.
    #[error(
        "keys are not strictly increasing at position {position}: key {got} follows {previous}{}",
        if *got == *previous { " (duplicate; pass --dedup to drop duplicates)" } else { "" }
    )]
    OutOfOrder {
        /// Zero-based position of the offending key in the input.
        position: u64,
        /// The key before it.
        previous: u64,
        /// The offending key.
        got: u64,
    },

    /// An argument or configuration value is invalid.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// The operation is not supported by this index kind or configuration.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// A key or object that must exist does not.
    #[error("not found: {0}")]
    NotFound(String),

    /// Another writer changed the file first: a conditional put on an
    /// object store lost (two builders published one index; the other
    /// one's index is in place), or an object changed while it was read.
    #[error("conflict: {0}")]
    Conflict(String),

    /// An injected fault (fault-injecting storage, for tests).
    #[error("injected fault: {0}")]
    Injected(String),

    /// The directory is locked by another user: in another process, or
    /// through another handle in this one.
    #[error(
        "{dir} is locked: {}",
        if *exclusive {
            "a writer has it open; wait until it closes (a read-only open is refused while a writer runs)"
        } else {
            "it is open read-only; close the readers before opening it for writing"
        }
    )]
    Locked {
        /// The directory.
        dir: String,
        /// Whether the lock is held exclusively (by a writer) rather than
        /// shared (by readers).
        exclusive: bool,
    },

    /// A checksum or structural check failed in a byte-addressed file (a
    /// write-ahead log segment): like [`Error::Corruption`], but the place is
    /// a byte offset, not a page. The data is never returned as an answer.
    #[error("corruption in {file} at byte offset {offset}: {detail}")]
    CorruptionAt {
        /// The file whose bytes failed the check.
        file: String,
        /// The byte offset inside the file (0 for the file header).
        offset: u64,
        /// What exactly failed.
        detail: String,
    },
}

impl Error {
    /// An [`Error::Io`] for a path.
    pub fn io(file: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            file: file.into().display().to_string(),
            source,
        }
    }

    /// An [`Error::Corruption`].
    pub fn corruption(file: impl Into<String>, page: u64, detail: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            page,
            detail: detail.into(),
        }
    }

    /// An [`Error::CorruptionAt`]: corruption at a byte offset of `file`.
    pub fn corruption_at(file: impl Into<String>, offset: u64, detail: impl Into<String>) -> Self {
        Error::CorruptionAt {
            file: file.into(),
            offset,
            detail: detail.into(),
        }
    }

    /// An [`Error::InvalidInput`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    /// Whether this error reports corrupt data (checksum, magic, structure).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corruption { .. }
                | Error::CorruptionAt { .. }
                | Error::BadMagic { .. }
                | Error::Truncated { .. }
        )
    }
}
