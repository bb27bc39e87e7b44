//! Local files: `pread`/`pwrite`, and `O_DIRECT` reads with aligned buffers.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::aligned::{ALIGN, AlignedBuf};
use super::batch::{
    IoEngine, ReadStream, RingError, pread_at_least, stream_on_ring, stream_on_threads, stream_one_by_one,
};
use super::{DirLock, Directory, LockMode, ReadStorage, Storage};
use crate::{Error, Result};

/// A local file.
///
/// Writes always go through the ordinary (buffered) handle. When the file was
/// opened with `direct`, reads go through a second handle opened with
/// `O_DIRECT`: aligned requests are read straight into the caller's buffer,
/// others through an aligned bounce buffer. Linux keeps the two handles
/// coherent (a direct read first writes back dirty cached pages of its range).
/// If the filesystem refuses `O_DIRECT`, the file falls back to buffered reads
/// and logs a warning once; [`FileStorage::is_direct`] tells which happened.
#[derive(Debug)]
pub struct FileStorage {
    file: File,
    direct: Option<File>,
    name: String,
    /// How [`ReadStorage::read_many`] is served (resolved: never `Auto`).
    engine: IoEngine,
}

static WARNED_NO_DIRECT: AtomicBool = AtomicBool::new(false);

impl FileStorage {
    /// Opens (or creates) `path` for reading and writing. With `direct`,
    /// reads bypass the OS page cache.
    pub fn open(path: &Path, create: bool, truncate: bool, direct: bool) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(truncate)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Self::with_handle(path, file, direct)
    }

    /// Opens the existing file `path` for reading only (its writes fail).
    /// With `direct`, reads bypass the OS page cache.
    pub fn open_read_only(path: &Path, direct: bool) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Self::with_handle(path, file, direct)
    }

    fn with_handle(path: &Path, file: File, direct: bool) -> Result<Self> {
        let direct = if direct {
            match OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(path)
            {
                Ok(f) => Some(f),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    if !WARNED_NO_DIRECT.swap(true, Ordering::Relaxed) {
                        log::warn!(
                            "the filesystem of {} refuses O_DIRECT; reading through the page cache instead",
                            path.display()
                        );
                    }
                    None
                }
                Err(e) => return Err(Error::io(path, e)),
            }
        } else {
            None
        };
        Ok(FileStorage {
            file,
            direct,
            name: path.display().to_string(),
            engine: IoEngine::Auto.resolve()?,
        })
    }

    /// Serves batched reads with `engine` (`Auto`: io_uring if this kernel
    /// has it, else threads). Errors if `Uring` is asked for and refused.
    pub fn with_engine(mut self, engine: IoEngine) -> Result<Self> {
        self.engine = engine.resolve()?;
        Ok(self)
    }

    /// The engine serving batched reads (never `Auto`).
    pub fn engine(&self) -> IoEngine {
        self.engine
    }

    /// Whether reads bypass the OS page cache.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    fn io_err(&self, e: std::io::Error) -> Error {
        Error::Io {
            file: self.name.clone(),
            source: e,
        }
    }
}

impl ReadStorage for FileStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let Some(direct) = &self.direct else {
            return self.file.read_exact_at(buf, offset).map_err(|e| self.io_err(e));
        };
        let len = buf.len();
        let aligned = offset % ALIGN as u64 == 0 && len % ALIGN == 0 && (buf.as_ptr() as usize) % ALIGN == 0;
        let eof = || {
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("read of {len} bytes at offset {offset} passes the end of the file"),
            )
        };
        if aligned {
            let got = pread_at_least(direct, buf, offset, len).map_err(|e| self.io_err(e))?;
            if got < len {
                return Err(self.io_err(eof()));
            }
            return Ok(());
        }
        let start = offset - offset % ALIGN as u64;
        let head = (offset - start) as usize;
        let mut bounce = AlignedBuf::zeroed(head + len);
        let want = head + len;
        let got = pread_at_least(direct, bounce.full_mut(), start, want).map_err(|e| self.io_err(e))?;
        if got < want {
            return Err(self.io_err(eof()));
        }
        let src = bounce.get(head..want).ok_or_else(|| self.io_err(eof()))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn read_stream(&self, stream: &mut dyn ReadStream, queue_depth: usize) -> Result<()> {
        if queue_depth <= 1 {
            return stream_one_by_one(self, stream);
        }
        match self.engine {
            IoEngine::Uring => {
                let file = self.direct.as_ref().unwrap_or(&self.file);
                match stream_on_ring(file, self.direct.is_some(), stream, queue_depth) {
                    Ok(()) => Ok(()),
                    Err(RingError::NoRing(e)) => {
                        log::warn!("no io_uring for this thread ({e}); batched reads use threads");
                        stream_on_threads(self, stream, queue_depth)
                    }
                    Err(RingError::Read(e)) | Err(RingError::Broken(e)) => Err(self.io_err(e)),
                    Err(RingError::Other(e)) => Err(e),
                }
            }
            IoEngine::Threads => stream_on_threads(self, stream, queue_depth),
            IoEngine::Sync | IoEngine::Auto => stream_one_by_one(self, stream),
        }
    }

    fn len(&self) -> Result<u64> {
        Ok(self.file.metadata().map_err(|e| self.io_err(e))?.len())
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl Storage for FileStorage {
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<()> {
        self.file.write_all_at(buf, offset).map_err(|e| self.io_err(e))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.file.set_len(len).map_err(|e| self.io_err(e))
    }

    fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| self.io_err(e))
    }

    fn write_behind(&self, offset: u64, len: u64) -> Result<()> {
        let (Ok(off), Ok(n)) = (libc::off64_t::try_from(offset), libc::off64_t::try_from(len)) else {
            return Ok(());
        };
        // SAFETY: the descriptor is open for the lifetime of `self.file`;
        // SYNC_FILE_RANGE_WRITE only queues write-back of dirty pages.
        let r = unsafe { libc::sync_file_range(self.file.as_raw_fd(), off, n, libc::SYNC_FILE_RANGE_WRITE) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            // Filesystems without it (or odd ranges) lose only the hint.
            if !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL | libc::ESPIPE)) {
                return Err(self.io_err(e));
            }
        }
        Ok(())
    }
}

/// Removes the directories of `dirs` (deepest first) that are empty: what
/// [`FsDirectory::create_all_tracked`] created for an operation that then
/// failed. A directory something else wrote into in the meantime stays,
/// and so do its ancestors.
pub fn remove_created_dirs(dirs: &[PathBuf]) {
    for d in dirs {
        if std::fs::remove_dir(d).is_err() {
            return;
        }
    }
}

/// A directory of local files.
#[derive(Debug, Clone)]
pub struct FsDirectory {
    root: PathBuf,
    direct: bool,
    engine: IoEngine,
}

impl FsDirectory {
    /// Opens `root`, creating it (and its parents) if needed.
    pub fn create_all(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
        Ok(FsDirectory {
            root,
            direct: false,
            engine: IoEngine::Auto,
        })
    }

    /// [`create_all`](Self::create_all), also returning the directories it
    /// created (`root` and its missing ancestors, deepest first), which
    /// [`remove_created_dirs`] removes again after a failure. If the
    /// creation fails, what it created is removed before the error returns.
    pub fn create_all_tracked(root: impl Into<PathBuf>) -> Result<(Self, Vec<PathBuf>)> {
        let root = root.into();
        let created: Vec<PathBuf> = root
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_err())
            .map(Path::to_path_buf)
            .collect();
        match Self::create_all(root) {
            Ok(d) => Ok((d, created)),
            Err(e) => {
                remove_created_dirs(&created);
                Err(e)
            }
        }
    }

    /// Opens an existing directory.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        if !root.is_dir() {
            return Err(Error::NotFound(format!("directory {}", root.display())));
        }
        Ok(FsDirectory {
            root,
            direct: false,
            engine: IoEngine::Auto,
        })
    }

    /// Files opened from now on read with `O_DIRECT` (bypassing the page cache).
    pub fn with_direct(mut self, direct: bool) -> Self {
        self.direct = direct;
        self
    }

    /// Files opened from now on serve batched reads with `engine`
    /// ([`FileStorage::with_engine`]).
    pub fn with_io_engine(mut self, engine: IoEngine) -> Self {
        self.engine = engine;
        self
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.root
    }

    fn checked(&self, name: &str) -> Result<PathBuf> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(Error::invalid(format!("bad file name {name:?}")));
        }
        Ok(self.root.join(name))
    }
}

impl Directory for FsDirectory {
    fn create(&self, name: &str) -> Result<Arc<dyn Storage>> {
        let path = self.checked(name)?;
        Ok(Arc::new(
            FileStorage::open(&path, true, true, self.direct)?.with_engine(self.engine)?,
        ))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Storage>> {
        let path = self.checked(name)?;
        if !path.exists() {
            return Err(Error::NotFound(format!("file {}", path.display())));
        }
        Ok(Arc::new(
            FileStorage::open(&path, false, false, self.direct)?.with_engine(self.engine)?,
        ))
    }

    fn open_cached(&self, name: &str) -> Result<Arc<dyn Storage>> {
        let path = self.checked(name)?;
        if !path.exists() {
            return Err(Error::NotFound(format!("file {}", path.display())));
        }
        Ok(Arc::new(
            FileStorage::open(&path, false, false, false)?.with_engine(self.engine)?,
        ))
    }

    fn open_read(&self, name: &str) -> Result<Arc<dyn ReadStorage>> {
        let path = self.checked(name)?;
        if !path.exists() {
            return Err(Error::NotFound(format!("file {}", path.display())));
        }
        Ok(Arc::new(
            FileStorage::open_read_only(&path, self.direct)?.with_engine(self.engine)?,
        ))
    }

    fn exists(&self, name: &str) -> bool {
        self.checked(name).map(|p| p.exists()).unwrap_or(false)
    }

    fn remove(&self, name: &str) -> Result<()> {
        let path = self.checked(name)?;
        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let a = self.checked(from)?;
        let b = self.checked(to)?;
        std::fs::rename(&a, &b).map_err(|e| Error::io(&a, e))
    }

    fn list(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let rd = std::fs::read_dir(&self.root).map_err(|e| Error::io(&self.root, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| Error::io(&self.root, e))?;
            if entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn sync_dir(&self) -> Result<()> {
        let d = File::open(&self.root).map_err(|e| Error::io(&self.root, e))?;
        d.sync_all().map_err(|e| Error::io(&self.root, e))
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn lock(&self, mode: LockMode) -> Result<DirLock> {
        super::lock::lock_fs(&self.root, mode)
    }

    fn total_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for name in self.list()? {
            let p = self.root.join(&name);
            total += std::fs::metadata(&p).map_err(|e| Error::io(&p, e))?.len();
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{ReadReq, StreamRead};

    fn roundtrip(direct: bool) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = FsDirectory::create_all(tmp.path()).unwrap().with_direct(direct);
        let f = dir.create("a").unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        f.write_at(0, &data).unwrap();
        // A write-back hint changes nothing (any range, even past the end).
        f.write_behind(0, 20_000).unwrap();
        f.write_behind(16_384, 1 << 30).unwrap();
        f.sync().unwrap();
        assert_eq!(f.len().unwrap(), 20_000);
        // unaligned read
        let mut buf = vec![0u8; 5000];
        f.read_at(123, &mut buf).unwrap();
        assert_eq!(&buf[..], &data[123..5123]);
        // aligned read
        let mut ab = AlignedBuf::zeroed(8192);
        f.read_at(4096, &mut ab).unwrap();
        assert_eq!(&ab[..], &data[4096..12288]);
        // read up to the unaligned end of file
        let mut tail = vec![0u8; 100];
        f.read_at(19_900, &mut tail).unwrap();
        assert_eq!(&tail[..], &data[19_900..]);
        // past the end is an error
        let mut over = vec![0u8; 200];
        assert!(f.read_at(19_900, &mut over).is_err());
        // reopen sees the same bytes; rename and list work
        drop(f);
        dir.rename("a", "b").unwrap();
        dir.sync_dir().unwrap();
        assert_eq!(dir.list().unwrap(), vec!["b".to_string()]);
        let g = dir.open("b").unwrap();
        let mut all = vec![0u8; 20_000];
        g.read_at(0, &mut all).unwrap();
        assert_eq!(all, data);
        assert_eq!(dir.total_bytes().unwrap(), 20_000);
        assert!(dir.open("missing").is_err());
        assert!(dir.create("../escape").is_err());
    }

    /// The engines this machine can run (io_uring only where the kernel has it).
    fn engines() -> Vec<IoEngine> {
        let mut e = vec![IoEngine::Threads, IoEngine::Sync];
        if super::super::uring_available() {
            e.push(IoEngine::Uring);
        }
        e
    }

    /// A stream that reads `first` pages of 4 KiB (at odd offsets when
    /// `skew`), and for each completed read one follow-up of the bytes
    /// after it; it fails in `done` of read `fail_at`.
    struct FollowUps {
        first: u64,
        skew: u64,
        issued: u64,
        queue: Vec<StreamRead>,
        reads: Vec<StreamRead>,
        got: Vec<Option<Vec<u8>>>,
        fail_at: Option<usize>,
        next_after_failure: usize,
        failed: bool,
    }

    impl ReadStream for FollowUps {
        fn next(&mut self) -> Result<Option<StreamRead>> {
            if self.failed {
                self.next_after_failure += 1;
            }
            let r = match self.queue.pop() {
                Some(r) => r,
                None if self.issued < self.first => {
                    self.issued += 1;
                    StreamRead {
                        offset: (self.issued - 1) * 4096 * 3 + self.skew,
                        len: 4096,
                    }
                }
                None => return Ok(None),
            };
            self.reads.push(r);
            self.got.push(None);
            Ok(Some(r))
        }

        fn done(&mut self, seq: usize, buf: AlignedBuf) -> Result<()> {
            if self.fail_at == Some(seq) {
                self.failed = true;
                return Err(Error::invalid("stop"));
            }
            let r = self.reads[seq];
            assert_eq!(buf.len(), r.len);
            if r.len == 4096 {
                self.queue.push(StreamRead {
                    offset: r.offset + 4096,
                    len: 100,
                });
            }
            self.got[seq] = Some(buf.to_vec());
            Ok(())
        }
    }

    /// A stream's follow-up reads (made in `done`) are served too, each
    /// read's bytes equal the file's, on every engine and queue depth; an
    /// error of `done` stops the stream (no read asked for after it) and is
    /// returned.
    #[test]
    fn read_stream_serves_follow_ups_and_stops_at_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 13 % 251) as u8).collect();
        FsDirectory::create_all(tmp.path())
            .unwrap()
            .create("f")
            .unwrap()
            .write_at(0, &data)
            .unwrap();
        let stream = |skew, fail_at| FollowUps {
            first: 60,
            skew,
            issued: 0,
            queue: Vec::new(),
            reads: Vec::new(),
            got: Vec::new(),
            fail_at,
            next_after_failure: 0,
            failed: false,
        };
        for direct in [false, true] {
            for engine in engines() {
                let f = FsDirectory::create_all(tmp.path())
                    .unwrap()
                    .with_direct(direct)
                    .with_io_engine(engine)
                    .open_read("f")
                    .unwrap();
                for qd in [1, 4, 32] {
                    for skew in [0, 777] {
                        let mut s = stream(skew, None);
                        f.read_stream(&mut s, qd).unwrap();
                        assert_eq!(s.reads.len(), 120, "{engine:?} {direct} {qd}");
                        for (r, got) in s.reads.iter().zip(&s.got) {
                            let o = r.offset as usize;
                            assert_eq!(
                                got.as_deref(),
                                Some(&data[o..o + r.len]),
                                "{engine:?} {direct} {qd}"
                            );
                        }
                    }
                    let mut s = stream(0, Some(7));
                    let e = f.read_stream(&mut s, qd).unwrap_err();
                    assert!(e.to_string().contains("stop"), "{e}");
                    assert_eq!(s.next_after_failure, 0, "{engine:?} {direct} {qd}");
                }
            }
        }
    }

    /// A batch answers each request as `read_at` does, on every engine,
    /// direct or buffered: aligned and unaligned requests, a request up to
    /// the unaligned end of the file, empty ones, repeated offsets, at
    /// queue depths 1 to 256; a request past the end fails the batch.
    #[test]
    fn read_many_matches_read_at_on_every_engine() {
        let tmp = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 % 251) as u8).collect();
        FsDirectory::create_all(tmp.path())
            .unwrap()
            .create("f")
            .unwrap()
            .write_at(0, &data)
            .unwrap();
        // (offset, len): aligned pages, odd spans, the tail, nothing.
        let mut spans: Vec<(u64, usize)> = vec![
            (0, 4096),
            (299_000, 1000),
            (12_345, 0),
            (4096, 4096),
            (4096, 4096),
        ];
        for i in 0..200u64 {
            let off = (i * 7919 * 37) % 290_000;
            let len = if i % 3 == 0 {
                4096
            } else {
                1 + (i as usize * 311) % 9000
            };
            let off = if i % 3 == 0 { off / 4096 * 4096 } else { off };
            spans.push((off, len));
        }
        for direct in [false, true] {
            for engine in engines() {
                let dir = FsDirectory::create_all(tmp.path())
                    .unwrap()
                    .with_direct(direct)
                    .with_io_engine(engine);
                let f = dir.open_read("f").unwrap();
                for qd in [1, 2, 32, 256] {
                    let mut bufs: Vec<AlignedBuf> =
                        spans.iter().map(|&(_, l)| AlignedBuf::zeroed(l)).collect();
                    // Half of the buffers misaligned by one byte.
                    let mut plain: Vec<Vec<u8>> = spans.iter().map(|&(_, l)| vec![0u8; l + 1]).collect();
                    let mut reqs: Vec<ReadReq<'_>> = Vec::new();
                    for (i, (b, p)) in bufs.iter_mut().zip(plain.iter_mut()).enumerate() {
                        let (offset, l) = spans[i];
                        let buf: &mut [u8] = if i % 2 == 0 { &mut b[..] } else { &mut p[1..=l] };
                        reqs.push(ReadReq { offset, buf });
                    }
                    f.read_many(&mut reqs, qd).unwrap();
                    for (i, r) in reqs.iter().enumerate() {
                        let (o, l) = spans[i];
                        assert_eq!(
                            r.buf,
                            &data[o as usize..o as usize + l],
                            "{engine:?} direct={direct} qd={qd} #{i}"
                        );
                    }
                }
                // A read past the end fails the whole batch (and returns).
                let mut a = vec![0u8; 4096];
                let mut b = vec![0u8; 2000];
                let mut reqs = vec![
                    ReadReq {
                        offset: 0,
                        buf: &mut a,
                    },
                    ReadReq {
                        offset: 299_000,
                        buf: &mut b,
                    },
                ];
                let e = f.read_many(&mut reqs, 8).unwrap_err();
                assert!(
                    matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof),
                    "{engine:?} {direct}: {e}"
                );
            }
        }
        // Asking for io_uring where it is missing is an error, never a panic.
        if !super::super::uring_available() {
            assert!(IoEngine::Uring.resolve().is_err());
        }
    }

    /// Whether each open descriptor of `path` reads with `O_DIRECT`
    /// (`/proc/self/fdinfo`'s flags).
    fn direct_flags_of(path: &Path) -> Vec<bool> {
        let mut out = Vec::new();
        for fd in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|t| t == path) {
                let info = std::fs::read_to_string(format!(
                    "/proc/self/fdinfo/{}",
                    fd.file_name().to_string_lossy()
                ))
                .unwrap_or_default();
                let flags = info
                    .lines()
                    .find_map(|l| l.strip_prefix("flags:"))
                    .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
                    .unwrap_or(0);
                out.push(flags & libc::O_DIRECT as u32 != 0);
            }
        }
        out
    }

    /// A directory that reads with `O_DIRECT` opens files for passes over
    /// what was just written through the page cache, with the same bytes.
    #[test]
    fn open_cached_reads_through_the_page_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = FsDirectory::create_all(tmp.path()).unwrap().with_direct(true);
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 253) as u8).collect();
        dir.create("f").unwrap().write_at(0, &data).unwrap();
        let path = tmp.path().join("f").canonicalize().unwrap();
        let direct = dir.open("f").unwrap();
        if !direct_flags_of(&path).contains(&true) {
            // The filesystem refuses O_DIRECT: nothing to tell apart.
            return;
        }
        drop(direct);
        let cached = dir.open_cached("f").unwrap();
        assert_eq!(direct_flags_of(&path), vec![false]);
        let mut buf = vec![0u8; 777];
        cached.read_at(12_345, &mut buf).unwrap();
        assert_eq!(&buf[..], &data[12_345..12_345 + 777]);
        assert!(matches!(dir.open_cached("missing"), Err(Error::NotFound(_))));
    }

    #[test]
    fn buffered_roundtrip() {
        roundtrip(false);
    }

    #[test]
    fn direct_roundtrip() {
        roundtrip(true);
    }
}
