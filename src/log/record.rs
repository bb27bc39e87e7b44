//! What a log holds: records of one type, grouped into batches.

use std::fmt::Debug;

/// One record of a log batch, with its byte encoding inside a frame.
///
/// `decode` must accept exactly what `encode` wrote and reject anything else
/// with a short description of the damage (it becomes an
/// [`crate::Error::Corruption`] naming the frame). Every encoding is at least
/// [`MIN_LEN`](LogRecord::MIN_LEN) bytes long, which bounds the records a
/// damaged count may claim.
pub trait LogRecord: Sized + Send + Sync + Debug {
    /// The shortest encoding of a record, in bytes (at least 1).
    const MIN_LEN: usize;

    /// Appends the encoding of `self` to `out`.
    fn encode(&self, out: &mut Vec<u8>);

    /// Decodes one record from the start of `bytes`; returns it and the bytes
    /// it used.
    fn decode(bytes: &[u8]) -> Result<(Self, usize), String>;
}
