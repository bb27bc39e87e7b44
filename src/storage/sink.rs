//! The write-once sink of local (and in-memory) directories: in place.

use std::sync::Arc;

use super::{Sink, Storage};
use crate::{Error, Result};

/// A [`Sink`] that writes in place into a read-write [`Storage`]: appends go
/// to the end of the file, the header is written at offset 0 by `finish`,
/// which then syncs.
///
/// The file is truncated when the sink is created, so while the build runs
/// its header region holds zeros (a hole) and no strata reader accepts it.
/// If `finish` fails, or the sink is dropped without `finish`, the file is
/// truncated to zero length (best effort: a failure to truncate is ignored,
/// and the header region then still holds zeros, unless the header write
/// itself succeeded and the sync after it failed). After a crash before
/// `finish`, whatever survives of it has a zero or torn header page.
#[derive(Debug)]
pub struct StorageSink {
    storage: Arc<dyn Storage>,
    header_len: u64,
    /// Where the next append lands.
    position: u64,
    /// End of the range already given to `write_behind`.
    hinted: u64,
    finished: bool,
}

impl StorageSink {
    /// Starts a sink on `storage` (truncated to zero first) with `header_len`
    /// bytes reserved at the start.
    pub fn new(storage: Arc<dyn Storage>, header_len: usize) -> Result<Self> {
        storage.set_len(0)?;
        let header_len = header_len as u64;
        Ok(StorageSink {
            storage,
            header_len,
            position: header_len,
            hinted: header_len,
            finished: false,
        })
    }
}

impl Sink for StorageSink {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        self.storage.write_at(self.position, buf)?;
        self.position += buf.len() as u64;
        Ok(())
    }

    fn write_behind(&mut self) -> Result<()> {
        if self.position > self.hinted {
            self.storage
                .write_behind(self.hinted, self.position - self.hinted)?;
            self.hinted = self.position;
        }
        Ok(())
    }

    fn position(&self) -> u64 {
        self.position
    }

    fn finish(mut self: Box<Self>, header: &[u8]) -> Result<()> {
        if header.len() as u64 != self.header_len {
            return Err(Error::invalid(format!(
                "header of {} bytes for a region of {} bytes in {}",
                header.len(),
                self.header_len,
                self.storage.name()
            )));
        }
        if !header.is_empty() {
            self.storage.write_at(0, header)?;
        }
        self.storage.sync()?;
        self.finished = true;
        Ok(())
    }

    fn name(&self) -> &str {
        self.storage.name()
    }
}

impl Drop for StorageSink {
    fn drop(&mut self) {
        if !self.finished {
            // An abandoned build must not look complete; nothing to report
            // to (the error that abandoned it is already on its way).
            let _ = self.storage.set_len(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::tests::contents;
    use crate::storage::{Directory, FaultKind, FaultOp, FaultyDirectory, FsDirectory, MemDirectory};

    /// Builds `hdr ++ parts` through a sink of `dir` and returns the result.
    fn build(dir: &dyn Directory, name: &str, hdr: &[u8], parts: &[&[u8]]) -> Result<()> {
        let mut s = dir.create_sink(name, hdr.len())?;
        assert_eq!(s.position(), hdr.len() as u64);
        for p in parts {
            s.append(p)?;
            s.write_behind()?;
        }
        assert!(s.name().ends_with(name));
        s.finish(hdr)
    }

    #[test]
    fn append_then_finish_puts_the_header_first() {
        let tmp = tempfile::tempdir().unwrap();
        let fs = FsDirectory::create_all(tmp.path()).unwrap();
        let mem = MemDirectory::new();
        for dir in [&fs as &dyn Directory, &mem] {
            build(dir, "f", b"HEAD", &[b"abc", b"", b"defg"]).unwrap();
            assert_eq!(contents(dir, "f"), b"HEADabcdefg");
            // No header region: plain appends.
            build(dir, "g", b"", &[b"xy", b"z"]).unwrap();
            assert_eq!(contents(dir, "g"), b"xyz");
            // A header of the wrong length is refused; the build is abandoned.
            let mut s = dir.create_sink("h", 4).unwrap();
            s.append(b"data").unwrap();
            assert!(s.finish(b"HEADER").is_err());
            assert!(contents(dir, "h").is_empty());
        }
        // The read side of a local file is opened read-only.
        let r = fs.open_read("f").unwrap();
        assert_eq!(r.len().unwrap(), 11);
        assert!(fs.open_read("missing").is_err());
    }

    #[test]
    fn until_finish_the_header_region_is_zero() {
        let mem = MemDirectory::new();
        let mut s = mem.create_sink("f", 8).unwrap();
        s.append(b"payload").unwrap();
        assert_eq!(contents(&mem, "f"), b"\0\0\0\0\0\0\0\0payload");
        s.finish(b"12345678").unwrap();
        assert_eq!(contents(&mem, "f"), b"12345678payload");
    }

    #[test]
    fn abandoned_build_leaves_an_empty_file() {
        let mem = MemDirectory::new();
        let mut s = mem.create_sink("f", 4).unwrap();
        s.append(b"half a build").unwrap();
        drop(s);
        assert!(contents(&mem, "f").is_empty());
    }

    #[test]
    fn crash_before_finish_loses_the_file() {
        let mem = MemDirectory::new();
        mem.sync_dir().unwrap();
        let mut s = mem.create_sink("f", 4).unwrap();
        s.append(b"data").unwrap();
        mem.crash();
        assert!(!mem.exists("f"));
        // Even with a durable entry, the unsynced contents are gone.
        let mut s2 = mem.create_sink("g", 4).unwrap();
        s2.append(b"data").unwrap();
        mem.sync_dir().unwrap();
        mem.crash();
        assert!(contents(&mem, "g").is_empty());
        drop((s, s2));
        // After finish and a directory sync, it survives.
        build(&mem, "h", b"HEAD", &[b"data"]).unwrap();
        mem.sync_dir().unwrap();
        mem.crash();
        assert_eq!(contents(&mem, "h"), b"HEADdata");
    }

    #[test]
    fn faults_on_append_or_finish_leave_nothing_complete() {
        // Fault on the k-th write (append or header) or on the sync of finish.
        let cases = [
            (FaultOp::Write, 0, FaultKind::Eio),
            (FaultOp::Write, 1, FaultKind::TornWrite),
            (FaultOp::Write, 2, FaultKind::Eio),
            (FaultOp::Write, 2, FaultKind::TornWrite),
            (FaultOp::Sync, 0, FaultKind::Eio),
        ];
        for (op, after, kind) in cases {
            let dir = FaultyDirectory::new();
            dir.plan().inject(op, after, kind, false);
            let r = build(&dir, "f", &[7u8; 1024], &[&[1u8; 2048], &[2u8; 2048]]);
            assert!(r.is_err(), "{op:?} {after} {kind:?}");
            assert!(
                contents(&dir, "f").is_empty(),
                "{op:?} {after} {kind:?}: left behind"
            );
            dir.crash();
            assert!(!dir.exists("f"));
        }
    }
}
