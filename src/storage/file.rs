//! Local files: `pread`/`pwrite`, and `O_DIRECT` reads with aligned buffers.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::aligned::{ALIGN, AlignedBuf};
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
        })
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

/// Reads until `buf` holds at least `min` bytes or end of file.
fn read_at_least(file: &File, buf: &mut [u8], offset: u64, min: usize) -> std::io::Result<usize> {
    let mut done = 0;
    while done < min {
        let Some(rest) = buf.get_mut(done..) else {
            break;
        };
        match file.read_at(rest, offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
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
            let got = read_at_least(direct, buf, offset, len).map_err(|e| self.io_err(e))?;
            if got < len {
                return Err(self.io_err(eof()));
            }
            return Ok(());
        }
        let start = offset - offset % ALIGN as u64;
        let head = (offset - start) as usize;
        let mut bounce = AlignedBuf::zeroed(head + len);
        let want = head + len;
        let got = read_at_least(direct, bounce.full_mut(), start, want).map_err(|e| self.io_err(e))?;
        if got < want {
            return Err(self.io_err(eof()));
        }
        let src = bounce.get(head..want).ok_or_else(|| self.io_err(eof()))?;
        buf.copy_from_slice(src);
        Ok(())
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

/// A directory of local files.
#[derive(Debug, Clone)]
pub struct FsDirectory {
    root: PathBuf,
    direct: bool,
}

impl FsDirectory {
    /// Opens `root`, creating it (and its parents) if needed.
    pub fn create_all(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
        Ok(FsDirectory { root, direct: false })
    }

    /// Opens an existing directory.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        if !root.is_dir() {
            return Err(Error::NotFound(format!("directory {}", root.display())));
        }
        Ok(FsDirectory { root, direct: false })
    }

    /// Files opened from now on read with `O_DIRECT` (bypassing the page cache).
    pub fn with_direct(mut self, direct: bool) -> Self {
        self.direct = direct;
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
        Ok(Arc::new(FileStorage::open(&path, true, true, self.direct)?))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Storage>> {
        let path = self.checked(name)?;
        if !path.exists() {
            return Err(Error::NotFound(format!("file {}", path.display())));
        }
        Ok(Arc::new(FileStorage::open(&path, false, false, self.direct)?))
    }

    fn open_read(&self, name: &str) -> Result<Arc<dyn ReadStorage>> {
        let path = self.checked(name)?;
        if !path.exists() {
            return Err(Error::NotFound(format!("file {}", path.display())));
        }
        Ok(Arc::new(FileStorage::open_read_only(&path, self.direct)?))
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

    #[test]
    fn buffered_roundtrip() {
        roundtrip(false);
    }

    #[test]
    fn direct_roundtrip() {
        roundtrip(true);
    }
}
