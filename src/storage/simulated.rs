//! Accounting and modelled cost of every call.

use std::sync::Arc;

use super::{AlignedBuf, IoStats, ReadStorage, ReadStream, Storage, StorageProfile, StreamRead};
use crate::Result;

/// Wraps any storage, counts every call into an [`IoStats`] and charges the
/// modelled time `T(bytes) = latency + bytes / bandwidth` of its profile per
/// read call. It never sleeps: the real device time is whatever the wrapped
/// storage takes, and the modelled time is reported beside it.
///
/// It is a [`ReadStorage`] over any read side, and a [`Storage`] (counting
/// writes and syncs too) over a read-write storage.
#[derive(Debug)]
pub struct SimulatedStorage<S: ReadStorage + ?Sized = dyn ReadStorage> {
    inner: Arc<S>,
    stats: Arc<IoStats>,
    profile: Option<StorageProfile>,
    page_size: u64,
}

impl<S: ReadStorage + ?Sized> SimulatedStorage<S> {
    /// Wraps `inner`; pages touched are counted in units of `page_size`.
    pub fn new(
        inner: Arc<S>,
        stats: Arc<IoStats>,
        profile: Option<StorageProfile>,
        page_size: usize,
    ) -> Self {
        SimulatedStorage {
            inner,
            stats,
            profile,
            page_size: page_size.max(1) as u64,
        }
    }

    /// The counters this storage charges.
    pub fn stats(&self) -> &Arc<IoStats> {
        &self.stats
    }
}

impl SimulatedStorage {
    /// Number of `page_size` pages that `[offset, offset + len)` touches.
    pub fn pages_touched(offset: u64, len: u64, page_size: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let first = offset / page_size;
        let last = (offset + len - 1) / page_size;
        last - first + 1
    }
}

impl<S: ReadStorage + ?Sized> ReadStorage for SimulatedStorage<S> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_at(offset, buf)?;
        let len = buf.len() as u64;
        let ps = self.profile.as_ref().map_or(0, |p| p.read_ps(len));
        self.stats.record_read(
            len,
            SimulatedStorage::pages_touched(offset, len, self.page_size),
            ps,
        );
        Ok(())
    }

    /// Forwards the stream, counting each read as one read call as it
    /// completes, and charges the stream's overlapped time
    /// ([`StorageProfile::batch_read_ps`]) once it ends.
    fn read_stream(&self, stream: &mut dyn ReadStream, queue_depth: usize) -> Result<()> {
        let mut counting = Counting {
            outer: stream,
            stats: &self.stats,
            page_size: self.page_size,
            reads: Vec::new(),
            done: 0,
            bytes: 0,
        };
        let r = self.inner.read_stream(&mut counting, queue_depth);
        if let Some(p) = &self.profile {
            self.stats
                .record_modelled(p.batch_read_ps(counting.done, counting.bytes, queue_depth));
        }
        r
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

/// A stream passed through [`SimulatedStorage::read_stream`]: every
/// completed read is counted.
struct Counting<'s> {
    outer: &'s mut dyn ReadStream,
    stats: &'s IoStats,
    page_size: u64,
    /// The requests so far, by sequence number.
    reads: Vec<StreamRead>,
    done: u64,
    bytes: u64,
}

impl ReadStream for Counting<'_> {
    fn next(&mut self) -> Result<Option<StreamRead>> {
        let r = self.outer.next()?;
        if let Some(r) = r {
            self.reads.push(r);
        }
        Ok(r)
    }

    fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()> {
        if let Some(r) = self.reads.get(seq) {
            let len = r.len as u64;
            self.done += 1;
            self.bytes += len;
            self.stats.record_read(
                len,
                SimulatedStorage::pages_touched(r.offset, len, self.page_size),
                0,
            );
        }
        self.outer.done(seq, buf)
    }
}

impl<S: Storage + ?Sized> Storage for SimulatedStorage<S> {
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<()> {
        self.inner.write_at(offset, buf)?;
        self.stats.record_write(buf.len() as u64);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()?;
        self.stats.record_sync();
        Ok(())
    }

    fn write_behind(&self, offset: u64, len: u64) -> Result<()> {
        self.inner.write_behind(offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemStorage;

    #[test]
    fn charges_affine_cost_per_read_call() {
        let mem = Arc::new(MemStorage::new("m"));
        mem.write_at(0, &vec![0u8; 1 << 20]).unwrap();
        let stats = Arc::new(IoStats::new());
        let hdd = StorageProfile::named("hdd").unwrap();
        let s = SimulatedStorage::new(mem, stats.clone(), Some(hdd.clone()), 4096);
        let mut b = vec![0u8; 8192];
        s.read_at(4096, &mut b).unwrap(); // 2 pages
        s.read_at(100, &mut b).unwrap(); // 3 pages (unaligned)
        let snap = stats.snapshot();
        assert_eq!(snap.read_calls, 2);
        assert_eq!(snap.pages_read, 5);
        assert_eq!(snap.bytes_read, 16384);
        let expect = 2.0 * hdd.read_ns(8192);
        assert!((snap.modelled_read_ns() - expect).abs() < 0.01);
        assert!((snap.modelled_ns_under(&hdd) - expect).abs() < 0.01);
        s.write_at(0, &[1, 2, 3]).unwrap();
        s.sync().unwrap();
        let snap = stats.snapshot();
        assert_eq!((snap.write_calls, snap.bytes_written, snap.syncs), (1, 3, 1));
    }

    /// A batch counts one read call per request, the same pages and bytes
    /// as one `read_at` each, and is charged its overlapped time: one
    /// latency per wave of `queue_depth` reads.
    #[test]
    fn a_batch_counts_each_read_and_charges_waves() {
        let mem = Arc::new(MemStorage::new("m"));
        mem.write_at(0, &vec![7u8; 1 << 20]).unwrap();
        let nvme = StorageProfile::named("nvme").unwrap();
        for qd in [1usize, 2, 32] {
            let stats = Arc::new(IoStats::new());
            let s = SimulatedStorage::new(mem.clone(), stats.clone(), Some(nvme.clone()), 4096);
            let mut bufs = [vec![0u8; 4096], vec![0u8; 8192], vec![0u8; 100]];
            let offs = [0u64, 8192, 4090];
            let mut reqs: Vec<super::super::ReadReq<'_>> = bufs
                .iter_mut()
                .zip(offs)
                .map(|(b, offset)| super::super::ReadReq { offset, buf: b })
                .collect();
            s.read_many(&mut reqs, qd).unwrap();
            let snap = stats.snapshot();
            assert_eq!(
                (snap.read_calls, snap.pages_read, snap.bytes_read),
                (3, 5, 12_388)
            );
            let waves = 3u64.div_ceil(qd as u64) as f64;
            let expect = waves * nvme.latency_ns + 12_388.0 * nvme.ns_per_byte();
            assert!((snap.modelled_read_ns() - expect).abs() < 0.01, "qd {qd}");
        }
    }

    #[test]
    fn pages_touched_edges() {
        assert_eq!(SimulatedStorage::pages_touched(0, 0, 4096), 0);
        assert_eq!(SimulatedStorage::pages_touched(0, 1, 4096), 1);
        assert_eq!(SimulatedStorage::pages_touched(4095, 2, 4096), 2);
        assert_eq!(SimulatedStorage::pages_touched(4096, 4096, 4096), 1);
    }
}
