//! A page cache (buffer pool) in front of any storage.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use lru::LruCache;
use parking_lot::Mutex;
use serde::Serialize;

use super::{AlignedBuf, ReadStorage, Storage};
use crate::{Error, Result};

static NEXT_FILE_ID: AtomicU64 = AtomicU64::new(1);

/// Cached pages keyed by (file id, page number).
type PageMap = LruCache<(u64, u64), Arc<[u8]>>;

/// An LRU buffer pool of fixed-size pages, shared by any number of files.
///
/// Entries are keyed by `(file id, page number)`; a [`CachedStorage`] gets a
/// unique file id when it is created. Capacity is counted in pages.
#[derive(Debug)]
pub struct PageCache {
    page_size: usize,
    capacity: AtomicUsize,
    lru: Mutex<PageMap>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Hit and miss counters of a [`PageCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Pages served from memory.
    pub hits: u64,
    /// Pages that had to be read from the storage below.
    pub misses: u64,
    /// Pages currently held.
    pub resident: u64,
    /// Capacity in pages.
    pub capacity: u64,
}

impl PageCache {
    /// A cache of `capacity` pages of `page_size` bytes (capacity 0 is raised to 1).
    pub fn new(capacity: usize, page_size: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        PageCache {
            page_size: page_size.max(1),
            capacity: AtomicUsize::new(cap.get()),
            lru: Mutex::new(LruCache::new(cap)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            resident: self.lru.lock().len() as u64,
            capacity: self.capacity.load(Relaxed) as u64,
        }
    }

    /// Changes the capacity to `pages` (0 is raised to 1), evicting the
    /// least recently used pages beyond it.
    pub fn resize(&self, pages: usize) {
        let cap = NonZeroUsize::new(pages.max(1)).unwrap_or(NonZeroUsize::MIN);
        let mut lru = self.lru.lock();
        if lru.cap() != cap {
            lru.resize(cap);
            self.capacity.store(cap.get(), Relaxed);
        }
    }

    /// Bytes held by cached pages.
    pub fn memory_bytes(&self) -> u64 {
        self.lru.lock().len() as u64 * self.page_size as u64
    }

    /// Drops every page (counters are kept).
    pub fn clear(&self) {
        self.lru.lock().clear();
    }

    fn get(&self, file: u64, page: u64) -> Option<Arc<[u8]>> {
        let hit = self.lru.lock().get(&(file, page)).cloned();
        match hit {
            Some(_) => self.hits.fetch_add(1, Relaxed),
            None => self.misses.fetch_add(1, Relaxed),
        };
        hit
    }

    fn put(&self, file: u64, page: u64, bytes: Arc<[u8]>) {
        self.lru.lock().put((file, page), bytes);
    }

    fn update_if_present(&self, file: u64, page: u64, at: usize, src: &[u8]) {
        let mut lru = self.lru.lock();
        if let Some(old) = lru.peek(&(file, page)) {
            let mut new = old.to_vec();
            if let Some(dst) = new.get_mut(at..at + src.len()) {
                dst.copy_from_slice(src);
                lru.put((file, page), new.into());
            } else {
                lru.pop(&(file, page));
            }
        }
    }

    fn drop_file_from(&self, file: u64, first_page: u64) {
        let mut lru = self.lru.lock();
        let doomed: Vec<(u64, u64)> = lru
            .iter()
            .filter(|((f, p), _)| *f == file && *p >= first_page)
            .map(|(k, _)| *k)
            .collect();
        for k in doomed {
            lru.pop(&k);
        }
    }
}

/// A storage whose reads are served page by page from a shared [`PageCache`];
/// runs of missing pages are read from the storage below in one call each.
/// Writes (over a read-write storage) go through to the storage below and
/// update cached pages.
#[derive(Debug)]
pub struct CachedStorage<S: ReadStorage + ?Sized = dyn ReadStorage> {
    inner: Arc<S>,
    cache: Arc<PageCache>,
    file_id: u64,
    /// File length, tracked through this handle's writes (no syscall per read).
    len: AtomicU64,
}

impl<S: ReadStorage + ?Sized> CachedStorage<S> {
    /// Puts `cache` in front of `inner`. The file must be changed only
    /// through this handle while it is open (its length is tracked here).
    pub fn new(inner: Arc<S>, cache: Arc<PageCache>) -> Self {
        // u64::MAX: unknown (the length query failed); ask the storage then.
        let len = inner.len().unwrap_or(u64::MAX);
        CachedStorage {
            inner,
            cache,
            file_id: NEXT_FILE_ID.fetch_add(1, Relaxed),
            len: AtomicU64::new(len),
        }
    }

    fn load_run(&self, first: u64, end: u64, file_len: u64) -> Result<Vec<Arc<[u8]>>> {
        let ps = self.cache.page_size as u64;
        let start = first * ps;
        let stop = (end * ps).min(file_len);
        let len =
            usize::try_from(stop.saturating_sub(start)).map_err(|_| Error::invalid("read run too large"))?;
        let mut buf = vec![0u8; len];
        self.inner.read_at(start, &mut buf)?;
        let pages: Vec<Arc<[u8]>> = buf.chunks(ps as usize).map(Arc::from).collect();
        for (i, p) in pages.iter().enumerate() {
            self.cache.put(self.file_id, first + i as u64, p.clone());
        }
        Ok(pages)
    }
}

/// The stream [`CachedStorage::read_stream`] passes down: the outer
/// stream's reads that miss the cache.
struct Misses<'c, 'o, S: ReadStorage + ?Sized> {
    cache: &'c CachedStorage<S>,
    outer: &'o mut dyn super::ReadStream,
    /// Reads the outer stream made so far.
    issued: usize,
    /// For each read passed down: the outer sequence number and request.
    map: Vec<(usize, super::StreamRead)>,
}

impl<S: ReadStorage + ?Sized> super::ReadStream for Misses<'_, '_, S> {
    fn next(&mut self) -> Result<Option<super::StreamRead>> {
        let ps = self.cache.cache.page_size as u64;
        while let Some(r) = self.outer.next()? {
            let seq = self.issued;
            self.issued += 1;
            let len = r.len as u64;
            let cached = len == 0
                || (r.offset / ps..=(r.offset + len - 1) / ps)
                    .all(|p| self.cache.cache.get(self.cache.file_id, p).is_some());
            if !cached {
                self.map.push((seq, r));
                return Ok(Some(r));
            }
            let mut buf = AlignedBuf::for_overwrite(r.len);
            self.cache.read_at(r.offset, &mut buf)?;
            self.outer.done(seq, buf)?;
        }
        Ok(None)
    }

    fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()> {
        let (outer_seq, r) = *self
            .map
            .get(seq)
            .ok_or_else(|| Error::invalid("completed read out of range"))?;
        self.cache.keep_pages(r.offset, &buf)?;
        self.outer.done(outer_seq, buf)
    }
}

impl<S: ReadStorage + ?Sized> CachedStorage<S> {
    /// Caches the whole pages that `bytes`, read at `offset`, covers (the
    /// file's last page may be short, as `load_run` caches it).
    fn keep_pages(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let ps = self.cache.page_size as u64;
        let file_len = self.len()?;
        let first = offset.div_ceil(ps);
        let end = offset + bytes.len() as u64;
        let mut p = first;
        while p * ps < end {
            let to = ((p + 1) * ps).min(end);
            if to - p * ps < ps && to != file_len {
                break;
            }
            let at = (p * ps - offset) as usize;
            if let Some(b) = bytes.get(at..(to - offset) as usize) {
                self.cache.put(self.file_id, p, Arc::from(b));
            }
            p += 1;
        }
        Ok(())
    }
}

impl<S: ReadStorage + ?Sized> ReadStorage for CachedStorage<S> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let ps = self.cache.page_size as u64;
        let end_off = offset + buf.len() as u64;
        let first = offset / ps;
        let last = (end_off - 1) / ps;
        let file_len = match self.len.load(Relaxed) {
            u64::MAX => self.inner.len()?,
            l => l,
        };
        if end_off > file_len {
            return Err(Error::Io {
                file: self.inner.name().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("read of {} bytes at offset {offset} passes the end", buf.len()),
                ),
            });
        }
        // Look up every page; collect the pages, reading runs of misses at once.
        let mut pages: Vec<Option<Arc<[u8]>>> =
            (first..=last).map(|p| self.cache.get(self.file_id, p)).collect();
        let mut i = 0usize;
        while i < pages.len() {
            if pages.get(i).is_some_and(|p| p.is_some()) {
                i += 1;
                continue;
            }
            let mut j = i;
            while pages.get(j).is_some_and(|p| p.is_none()) {
                j += 1;
            }
            let loaded = self.load_run(first + i as u64, first + j as u64, file_len)?;
            for (k, p) in loaded.into_iter().enumerate() {
                if let Some(slot) = pages.get_mut(i + k) {
                    *slot = Some(p);
                }
            }
            i = j;
        }
        // Copy the requested bytes out.
        let mut written = 0usize;
        for (k, page) in pages.iter().enumerate() {
            let page_no = first + k as u64;
            let page_start = page_no * ps;
            let from = offset.max(page_start) - page_start;
            let to = end_off.min(page_start + ps) - page_start;
            let n = (to - from) as usize;
            let src = page
                .as_ref()
                .and_then(|p| p.get(from as usize..to as usize))
                .ok_or_else(|| {
                    Error::corruption(self.inner.name(), page_no, "cached page shorter than expected")
                })?;
            let dst = buf
                .get_mut(written..written + n)
                .ok_or_else(|| Error::invalid("cache copy out of range"))?;
            dst.copy_from_slice(src);
            written += n;
        }
        Ok(())
    }

    /// Reads whose pages are all cached are served from the cache as the
    /// stream asks for them; the others go to the storage below as one
    /// stream (each read whole, even if some of its pages are cached), and
    /// their whole pages are cached as they complete.
    fn read_stream(&self, stream: &mut dyn super::ReadStream, queue_depth: usize) -> Result<()> {
        let mut misses = Misses {
            cache: self,
            outer: stream,
            issued: 0,
            map: Vec::new(),
        };
        self.inner.read_stream(&mut misses, queue_depth)
    }

    fn len(&self) -> Result<u64> {
        match self.len.load(Relaxed) {
            u64::MAX => self.inner.len(),
            l => Ok(l),
        }
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

impl<S: Storage + ?Sized> Storage for CachedStorage<S> {
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<()> {
        self.inner.write_at(offset, buf)?;
        if buf.is_empty() {
            return Ok(());
        }
        let _ = self.len.fetch_update(Relaxed, Relaxed, |l| {
            (l != u64::MAX).then(|| l.max(offset + buf.len() as u64))
        });
        let ps = self.cache.page_size as u64;
        let end_off = offset + buf.len() as u64;
        for page_no in offset / ps..=(end_off - 1) / ps {
            let page_start = page_no * ps;
            let from = offset.max(page_start);
            let to = end_off.min(page_start + ps);
            if let Some(src) = buf.get((from - offset) as usize..(to - offset) as usize) {
                self.cache
                    .update_if_present(self.file_id, page_no, (from - page_start) as usize, src);
            }
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)?;
        self.len.store(len, Relaxed);
        let ps = self.cache.page_size as u64;
        // The page holding the new end changes size; drop it and all after it.
        self.cache.drop_file_from(self.file_id, len / ps);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn write_behind(&self, offset: u64, len: u64) -> Result<()> {
        self.inner.write_behind(offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::ReadReq;
    use crate::storage::{IoStats, MemStorage, SimulatedStorage};

    fn setup(
        cap: usize,
    ) -> (
        CachedStorage<SimulatedStorage<MemStorage>>,
        Arc<IoStats>,
        Arc<PageCache>,
        Vec<u8>,
    ) {
        let mem = Arc::new(MemStorage::new("m"));
        let data: Vec<u8> = (0..40_000u32).map(|i| (i % 253) as u8).collect();
        mem.write_at(0, &data).unwrap();
        let stats = Arc::new(IoStats::new());
        let counted = Arc::new(SimulatedStorage::new(mem, stats.clone(), None, 4096));
        let cache = Arc::new(PageCache::new(cap, 4096));
        (CachedStorage::new(counted, cache.clone()), stats, cache, data)
    }

    #[test]
    fn misses_read_once_hits_free() {
        let (c, stats, cache, data) = setup(100);
        let mut b = vec![0u8; 10_000];
        c.read_at(1000, &mut b).unwrap();
        assert_eq!(&b[..], &data[1000..11_000]);
        assert_eq!(
            stats.snapshot().read_calls,
            1,
            "one run of 3 missing pages = one call"
        );
        assert_eq!(stats.snapshot().pages_read, 3);
        c.read_at(1000, &mut b).unwrap();
        assert_eq!(stats.snapshot().read_calls, 1, "second read is all hits");
        assert_eq!(cache.stats().hits, 3);
        // Partial last page of the file.
        let mut t = vec![0u8; 100];
        c.read_at(39_900, &mut t).unwrap();
        assert_eq!(&t[..], &data[39_900..]);
        let mut over = vec![0u8; 200];
        assert!(c.read_at(39_900, &mut over).is_err());
    }

    /// A batch reads only the requests with a missing page (whole), caches
    /// their whole pages, and serves the rest from the cache.
    #[test]
    fn a_batch_reads_misses_and_caches_them() {
        let (c, stats, _cache, data) = setup(100);
        let mut warm = vec![0u8; 4096];
        c.read_at(0, &mut warm).unwrap(); // page 0 cached
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 5000];
        let mut t = vec![0u8; 100];
        let mut reqs = vec![
            ReadReq {
                offset: 0,
                buf: &mut a,
            },
            ReadReq {
                offset: 8192,
                buf: &mut b,
            },
            ReadReq {
                offset: 39_900,
                buf: &mut t,
            },
        ];
        c.read_many(&mut reqs, 8).unwrap();
        assert_eq!(&a[..], &data[..4096]);
        assert_eq!(&b[..], &data[8192..13_192]);
        assert_eq!(&t[..], &data[39_900..]);
        let s = stats.snapshot();
        assert_eq!((s.read_calls, s.pages_read), (1 + 2, 1 + 2 + 1));
        // Page 2 (whole in the read at 8192) is cached now; page 3 and the
        // last page 9 were read only in part and are not.
        let mut again = [vec![0u8; 4096], vec![0u8; 96]];
        let [x, y] = &mut again;
        let mut reqs = vec![
            ReadReq { offset: 8192, buf: x },
            ReadReq {
                offset: 36_864,
                buf: y,
            },
        ];
        c.read_many(&mut reqs, 8).unwrap();
        assert_eq!(stats.snapshot().read_calls, 4, "page 2 a hit, page 9 a miss");
        assert_eq!(&again[0][..], &data[8192..12_288]);
        assert_eq!(&again[1][..], &data[36_864..36_960]);
    }

    #[test]
    fn lru_evicts_and_writes_update() {
        let (c, stats, _cache, _data) = setup(2);
        let mut b = vec![0u8; 10];
        for p in 0..3u64 {
            c.read_at(p * 4096, &mut b).unwrap();
        }
        assert_eq!(stats.snapshot().read_calls, 3);
        c.read_at(0, &mut b).unwrap(); // page 0 was evicted
        assert_eq!(stats.snapshot().read_calls, 4);
        c.write_at(2, &[9, 9, 9]).unwrap();
        c.read_at(0, &mut b).unwrap();
        assert_eq!(&b[2..5], &[9, 9, 9]);
        assert_eq!(stats.snapshot().read_calls, 4, "write updated the cached page");
        c.set_len(4096).unwrap();
        assert!(c.read_at(4096, &mut b).is_err());
    }
}
