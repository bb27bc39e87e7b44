//! Storage for tests.

use std::sync::Arc;

use super::{AlignedBuf, ReadStorage, ReadStream};
use crate::Result;

/// Storage whose batched reads complete in reverse order, a queue
/// depth's worth at a time.
#[derive(Debug)]
pub(crate) struct Reversed(pub(crate) Arc<dyn ReadStorage>);

impl ReadStorage for Reversed {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.0.read_at(offset, buf)
    }

    fn read_stream(&self, stream: &mut dyn ReadStream, queue_depth: usize) -> Result<()> {
        let mut seq = 0usize;
        loop {
            let mut batch = Vec::new();
            while batch.len() < queue_depth.max(1) {
                let Some(r) = stream.next()? else { break };
                batch.push((seq, r));
                seq += 1;
            }
            if batch.is_empty() {
                return Ok(());
            }
            for (s, r) in batch.into_iter().rev() {
                let mut buf = AlignedBuf::for_overwrite(r.len);
                self.0.read_at(r.offset, &mut buf)?;
                stream.done(s, buf)?;
            }
        }
    }

    fn len(&self) -> Result<u64> {
        self.0.len()
    }

    fn name(&self) -> &str {
        self.0.name()
    }
}
