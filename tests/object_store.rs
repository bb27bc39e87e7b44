//! Indexes on an object store (issue 22), against a real S3-compatible
//! server on 127.0.0.1 (`tools/s3-server`; `scripts/s3-tests.sh` installs it and
//! runs these with `--features s3`).
#![cfg(feature = "s3")]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::s3::{self, ACCESS_KEY, BUCKET, SECRET_KEY};
use strata::Error;
use strata::index::{BuildOptions, IndexSpec, OpenOptions};
use strata::storage::{Directory, ObjectDirectory, ObjectOptions, ReadReq, ReadStorage};

fn dir(url: &str) -> ObjectDirectory {
    s3::shared();
    ObjectDirectory::open(url, ObjectOptions::default()).unwrap()
}

fn contents(d: &dyn Directory, name: &str) -> Vec<u8> {
    let f = d.open_read(name).unwrap();
    let mut b = vec![0u8; f.len().unwrap() as usize];
    f.read_at(0, &mut b).unwrap();
    b
}

/// Bytes whose every 8-byte word names its offset, so a read from the
/// wrong place shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes()[i % 8])
        .collect()
}

/// Ranged reads return exactly the bytes asked for, at any offset and
/// length up to the end; past the end is an error, not short bytes; a batch
/// is served by fewer GETs than reads when the ranges are close.
#[test]
fn range_reads_return_exactly_the_bytes_asked_for() {
    let d = dir(&s3::fresh("ranges"));
    let data = pattern(300_000);
    d.publish("blob", &data).unwrap();
    let f = d.open_read("blob").unwrap();
    assert_eq!(f.len().unwrap(), data.len() as u64);
    for (off, len) in [
        (0, 1),
        (0, 4096),
        (1, 4095),
        (12_345, 6789),
        (299_999, 1),
        (0, 300_000),
        (200_000, 100_000),
    ] {
        let mut b = vec![0u8; len];
        f.read_at(off as u64, &mut b).unwrap();
        assert_eq!(b, data[off..off + len], "{off} {len}");
    }
    let mut b = vec![0u8; 2];
    let e = f.read_at(299_999, &mut b).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    // A batch: 64 reads of 4 KiB spread over the object.
    let stats = d.stats();
    let gets0 = stats.gets.load(Ordering::Relaxed);
    let offsets: Vec<u64> = (0..64u64).map(|i| (i * 4567) % (300_000 - 4096)).collect();
    let mut bufs = vec![vec![0u8; 4096]; offsets.len()];
    let mut reqs: Vec<ReadReq<'_>> = offsets
        .iter()
        .zip(bufs.iter_mut())
        .map(|(&offset, buf)| ReadReq { offset, buf })
        .collect();
    f.read_many(&mut reqs, 16).unwrap();
    for (&off, b) in offsets.iter().zip(&bufs) {
        assert_eq!(
            b[..],
            data[off as usize..off as usize + 4096],
            "batched read at {off}"
        );
    }
    let gets = stats.gets.load(Ordering::Relaxed) - gets0;
    // Groups of 16 ranges within 300 kB: each group is one GET.
    assert_eq!(gets, 4, "GETs for 64 close reads at queue depth 16");
    // A read past the end inside a batch fails the batch.
    let mut buf = vec![0u8; 4096];
    let mut reqs = [ReadReq {
        offset: 299_000,
        buf: &mut buf,
    }];
    assert!(f.read_many(&mut reqs, 4).is_err());
}

/// Conditional puts as S3 documents them: `If-None-Match: *` creates only
/// an absent object, `If-Match` replaces only the version it names; the
/// loser gets `Error::Conflict` and the winner's bytes stay.
#[test]
fn conditional_puts_let_exactly_one_writer_win() {
    let url = s3::fresh("publish");
    let (a, b) = (dir(&url), dir(&url));
    // Both find the name absent; the first create wins.
    assert!(!a.exists("m") && !b.exists("m"));
    a.publish("m", b"from a").unwrap();
    let e = b.publish("m", b"from b").unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    assert!(e.to_string().contains("created by another writer"), "{e}");
    assert_eq!(contents(&a, "m"), b"from a");
    // b has now read a's version: its replacement names that ETag and wins;
    // a's next one names its own, older, version and loses.
    assert_eq!(contents(&b, "m"), b"from a");
    b.publish("m", b"from b, second").unwrap();
    let e = a.publish("m", b"from a, second").unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    assert!(e.to_string().contains("replaced by another writer"), "{e}");
    assert_eq!(contents(&dir(&url), "m"), b"from b, second");
    // A handle's own successive publishes follow their own versions.
    b.publish("m", b"third").unwrap();
    b.publish("m", b"fourth").unwrap();
    assert_eq!(contents(&a, "m"), b"fourth");
}

/// Conditional puts that truly overlap: many writers that all saw the name
/// absent publish at once; exactly one wins, every other gets
/// `Error::Conflict`, and the object holds the winner's bytes. (S3's
/// conditional writes are atomic; the test server makes s3s-fs's, a check
/// then a write, atomic too: `tools/s3-server`, `Store`.)
#[test]
fn overlapping_conditional_puts_let_exactly_one_writer_win() {
    const WRITERS: usize = 8;
    for round in 0..10 {
        let url = s3::fresh("overlap");
        let dirs: Vec<ObjectDirectory> = (0..WRITERS).map(|_| dir(&url)).collect();
        for d in &dirs {
            assert!(!d.exists("m"));
        }
        let barrier = std::sync::Barrier::new(WRITERS);
        let results: Vec<strata::Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = dirs
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        d.publish("m", format!("writer {i}").as_bytes())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<usize> = (0..WRITERS).filter(|&i| results[i].is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for r in &results {
            if let Err(e) = r {
                assert!(matches!(e, Error::Conflict(_)), "round {round}: {e}");
            }
        }
        assert_eq!(
            contents(&dir(&url), "m"),
            format!("writer {}", winners[0]).as_bytes()
        );
    }
}

/// An object replaced after it was opened is an error at the next read,
/// never the new version's bytes under the old length.
#[test]
fn an_object_replaced_under_a_reader_is_an_error() {
    let url = s3::fresh("replaced");
    let d = dir(&url);
    d.publish("f", &pattern(10_000)).unwrap();
    let f = d.open_read("f").unwrap();
    let mut b = vec![0u8; 100];
    f.read_at(0, &mut b).unwrap();
    let other = dir(&url);
    assert!(other.exists("f"));
    other.publish("f", &[7u8; 10_000]).unwrap();
    let e = f.read_at(0, &mut b).unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
}

/// A sink's bytes land in order with its header first, through a
/// multipart upload of several parts (the first, with the header, sent
/// last), in appends of every size; a dropped sink leaves nothing.
#[test]
fn sinks_upload_in_parts_and_show_nothing_until_finished() {
    let d = ObjectDirectory::open(
        &{
            s3::shared();
            s3::fresh("sink")
        },
        ObjectOptions {
            part_size: ObjectOptions::MIN_PART_SIZE,
            ..ObjectOptions::default()
        },
    )
    .unwrap();
    let body = pattern(17 << 20); // four parts of 5 MiB at least, one short
    let header = vec![0xA5u8; 4096];
    let mut sink = d.create_sink("big", header.len()).unwrap();
    let (mut at, mut step) = (0usize, 1usize);
    while at < body.len() {
        let end = (at + step).min(body.len());
        sink.append(&body[at..end]).unwrap();
        at = end;
        step = step * 7 % 3_000_001 + 1;
    }
    assert_eq!(sink.position(), (header.len() + body.len()) as u64);
    assert!(!d.exists("big"), "visible before finish");
    let puts0 = d.stats().puts.load(Ordering::Relaxed);
    sink.finish(&header).unwrap();
    assert!(d.stats().puts.load(Ordering::Relaxed) > puts0);
    let got = contents(&d, "big");
    assert_eq!(got.len(), header.len() + body.len());
    assert!(got[..header.len()] == header[..], "header first");
    assert!(got[header.len()..] == body[..], "body in order");
    // Dropped before finish: nothing, whether parts were sent or not.
    for len in [100usize, 12 << 20] {
        let mut sink = d.create_sink("dropped", 64).unwrap();
        sink.append(&body[..len]).unwrap();
        drop(sink);
        assert!(
            !d.exists("dropped"),
            "a dropped sink of {len} bytes left an object"
        );
    }
    // A small file is one put.
    let mut sink = d.create_sink("small", 16).unwrap();
    sink.append(b"tiny").unwrap();
    sink.finish(&[1u8; 16]).unwrap();
    assert_eq!(contents(&d, "small").len(), 20);
}

/// Indexes built to `s3://` answer every lookup as the oracle does, with the
/// same read calls per lookup as the same index on local disk (cold: no
/// cache, no resident levels), one by one and batched.
#[test]
fn indexes_on_s3_answer_as_on_local_disk_with_the_same_reads() {
    s3::shared();
    let keys: Vec<u64> = {
        let mut k: Vec<u64> = (0..30_000u64).map(|i| i * i % 1_000_003 * 1_000 + i).collect();
        k.sort_unstable();
        k.dedup();
        k
    };
    let local = tempfile::tempdir().unwrap();
    for spec in [
        "pgm",
        "pgm-disk-cpr:epsilon=8",
        "rs",
        "rmi",
        "btree-static",
        "gap-zonemap-d",
        "binary",
        "air",
    ] {
        let s: IndexSpec = spec.parse().unwrap();
        let url = s3::fresh("index");
        let lpath = local.path().join(spec.replace([':', '='], "_"));
        strata::registry::build(&s, &keys, &lpath, &BuildOptions::default()).unwrap();
        let report = strata::registry::build(&s, &keys, Path::new(&url), &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{spec}: build to {url}: {e}"));
        assert_eq!(report.n, keys.len() as u64);
        let opts = OpenOptions {
            resident: strata::index::Residency::None,
            ..OpenOptions::default()
        };
        let remote = strata::registry::open(Path::new(&url), &opts).unwrap();
        let near = strata::registry::open(&lpath, &opts).unwrap();
        common::check_sampled(remote.as_ref(), &keys, &format!("{spec} on s3"), 211);
        // Same reads per lookup, key by key.
        let probes: Vec<u64> = keys.iter().step_by(409).flat_map(|&k| [k, k + 1]).collect();
        for &k in &probes {
            let (r0, l0) = (remote.io().snapshot(), near.io().snapshot());
            assert_eq!(remote.get(k).unwrap(), near.get(k).unwrap(), "{spec}: get {k}");
            let (r1, l1) = (remote.io().snapshot(), near.io().snapshot());
            assert_eq!(
                r1.read_calls - r0.read_calls,
                l1.read_calls - l0.read_calls,
                "{spec}: read calls for {k}"
            );
            assert_eq!(
                r1.pages_read - r0.pages_read,
                l1.pages_read - l0.pages_read,
                "{spec}: pages for {k}"
            );
        }
        // Batched: the same answers and read calls.
        let (r0, l0) = (remote.io().snapshot(), near.io().snapshot());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        remote.get_many(&probes, &mut a).unwrap();
        near.get_many(&probes, &mut b).unwrap();
        assert_eq!(a, b, "{spec}: get_many");
        let (r1, l1) = (remote.io().snapshot(), near.io().snapshot());
        assert_eq!(
            r1.read_calls - r0.read_calls,
            l1.read_calls - l0.read_calls,
            "{spec}: batched read calls"
        );
    }
}

/// Which step of a race [`Gated`] directories have reached.
#[derive(Default)]
struct Race {
    /// The second builder has looked for the manifest.
    checked: bool,
    /// The first builder has published.
    published: bool,
}

/// An object-store directory whose manifest calls wait for each other, so
/// that two builds race the same way every time: the second builder looks
/// for the manifest (finds none), the first publishes, then the second
/// publishes. (Puts that truly overlap: the test above.)
#[derive(Debug)]
struct Gated {
    inner: ObjectDirectory,
    first: bool,
    race: Arc<(std::sync::Mutex<Race>, std::sync::Condvar)>,
}

impl std::fmt::Debug for Race {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Race({}, {})", self.checked, self.published)
    }
}

impl Gated {
    fn wait(&self, until: impl Fn(&Race) -> bool) {
        let (m, cv) = &*self.race;
        let r = m.lock().unwrap();
        let (r, timeout) = cv
            .wait_timeout_while(r, std::time::Duration::from_secs(120), |r| !until(r))
            .unwrap();
        assert!(!timeout.timed_out(), "the other builder never got there: {r:?}");
    }

    fn mark(&self, set: impl FnOnce(&mut Race)) {
        let (m, cv) = &*self.race;
        set(&mut m.lock().unwrap());
        cv.notify_all();
    }
}

impl Directory for Gated {
    fn create(&self, name: &str) -> strata::Result<Arc<dyn strata::storage::Storage>> {
        self.inner.create(name)
    }
    fn open(&self, name: &str) -> strata::Result<Arc<dyn strata::storage::Storage>> {
        self.inner.open(name)
    }
    fn exists(&self, name: &str) -> bool {
        let there = self.inner.exists(name);
        if !self.first && name == strata::index::MANIFEST_FILE {
            self.mark(|r| r.checked = true);
        }
        there
    }
    fn remove(&self, name: &str) -> strata::Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, from: &str, to: &str) -> strata::Result<()> {
        self.inner.rename(from, to)
    }
    fn list(&self) -> strata::Result<Vec<String>> {
        self.inner.list()
    }
    fn sync_dir(&self) -> strata::Result<()> {
        self.inner.sync_dir()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn lock(&self, mode: strata::storage::LockMode) -> strata::Result<strata::storage::DirLock> {
        self.inner.lock(mode)
    }
    fn open_read(&self, name: &str) -> strata::Result<Arc<dyn ReadStorage>> {
        self.inner.open_read(name)
    }
    fn create_sink(&self, name: &str, header_len: usize) -> strata::Result<Box<dyn strata::storage::Sink>> {
        self.inner.create_sink(name, header_len)
    }
    fn publish(&self, name: &str, bytes: &[u8]) -> strata::Result<()> {
        if name != strata::index::MANIFEST_FILE {
            return self.inner.publish(name, bytes);
        }
        if self.first {
            self.wait(|r| r.checked);
            let done = self.inner.publish(name, bytes);
            self.mark(|r| r.published = true);
            done
        } else {
            self.wait(|r| r.published);
            self.inner.publish(name, bytes)
        }
    }
    fn build_dir(&self, build: &str) -> Option<Arc<dyn Directory>> {
        self.inner.build_dir(build)
    }
}

/// Two builders publishing one index: exactly one wins, the other gets
/// `Error::Conflict` and leaves no file behind; the index answers as the
/// winner built it. A later rebuild replaces it and removes the old
/// build's files.
#[test]
fn concurrent_builders_one_wins_and_rebuilds_replace() {
    let server = s3::shared();
    let url = s3::fresh("race");
    let prefix = url.trim_start_matches(&format!("s3://{BUCKET}/")).to_string();
    let sets: Vec<Vec<u64>> = vec![
        (0..40_000u64).map(|i| i * 3).collect(),
        (0..30_000u64).map(|i| i * 5 + 1).collect(),
    ];
    let race = Arc::new((std::sync::Mutex::new(Race::default()), std::sync::Condvar::new()));
    let results: Vec<strata::Result<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = sets
            .iter()
            .enumerate()
            .map(|(i, keys)| {
                let (url, race) = (url.clone(), race.clone());
                s.spawn(move || {
                    let d: Arc<dyn Directory> = Arc::new(Gated {
                        inner: ObjectDirectory::open(&url, ObjectOptions::default()).unwrap(),
                        first: i == 0,
                        race,
                    });
                    strata::registry::build_in(
                        &"pgm".parse().unwrap(),
                        strata::index::Records::ranked(keys),
                        d,
                        &BuildOptions::default(),
                    )
                    .map(|r| r.n)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won: Vec<usize> = (0..2).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(won, vec![0], "{results:?}");
    let lost = 1 - won[0];
    let e = results[lost].as_ref().unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    let idx = strata::registry::open(Path::new(&url), &OpenOptions::default()).unwrap();
    common::check_sampled(idx.as_ref(), &sets[won[0]], "the winner's index", 7);
    // The manifest and one build's files.
    let files = server.files_under(&prefix);
    let builds: std::collections::BTreeSet<&str> = files
        .iter()
        .filter_map(|f| f.split_once('/').map(|(b, _)| b))
        .collect();
    assert_eq!(builds.len(), 1, "{files:?}");
    assert!(
        files.contains(&strata::index::MANIFEST_FILE.to_string()),
        "{files:?}"
    );
    drop(idx);
    // A rebuild replaces the index and removes the old build's files.
    let keys: Vec<u64> = (0..20_000u64).map(|i| i * 11).collect();
    strata::registry::build(
        &"rs".parse().unwrap(),
        &keys,
        Path::new(&url),
        &BuildOptions::default(),
    )
    .unwrap();
    let idx = strata::registry::open(Path::new(&url), &OpenOptions::default()).unwrap();
    assert_eq!(idx.kind(), "rs");
    common::check_sampled(idx.as_ref(), &keys, "the rebuilt index", 7);
    let after = server.files_under(&prefix);
    let builds_after: std::collections::BTreeSet<&str> = after
        .iter()
        .filter_map(|f| f.split_once('/').map(|(b, _)| b))
        .collect();
    assert_eq!(builds_after.len(), 1, "{after:?}");
    assert!(
        builds_after.is_disjoint(&builds),
        "old build's files left: {after:?}"
    );
}

/// Stores and updatable indexes need read-write files: refused with a clear
/// error before anything is written.
#[test]
fn read_write_kinds_are_refused_on_s3() {
    let server = s3::shared();
    let url = s3::fresh("rw");
    let keys: Vec<u64> = (0..1000).collect();
    for spec in ["btree", "db", "lsm", "alex"] {
        let e = strata::registry::build(
            &spec.parse().unwrap(),
            &keys,
            Path::new(&url),
            &BuildOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{spec}: {e}");
        assert!(e.to_string().contains("local directory"), "{spec}: {e}");
    }
    let prefix = url.trim_start_matches(&format!("s3://{BUCKET}/")).to_string();
    assert!(server.files_under(&prefix).is_empty());
}

/// No message shows a credential: not errors (a wrong secret, a missing
/// index, a missing object), not descriptions, not debug output (a wrong
/// secret: `tests/object_store_failure.rs`).
#[test]
fn credentials_are_never_printed() {
    s3::shared();
    let url = s3::fresh("secret");
    let d = dir(&url);
    let mut shown = vec![format!("{d:?}"), d.describe()];
    shown.push(
        strata::registry::open(Path::new(&url), &OpenOptions::default())
            .err()
            .unwrap()
            .to_string(),
    );
    shown.push(d.open_read("nothing").err().unwrap().to_string());
    d.publish("x", b"1").unwrap();
    let f = d.open_read("x").unwrap();
    shown.push(format!("{f:?}"));
    for text in &shown {
        assert!(!text.contains(SECRET_KEY) && !text.contains(ACCESS_KEY), "{text}");
    }
    assert!(shown.iter().any(|t| t.contains(&url)), "{shown:?}");
}

/// `profile_device` at an `s3://` location measures the object store: a
/// scratch object written, read at every size, and removed.
#[test]
fn the_profiler_measures_an_object_store() {
    let server = s3::shared();
    let url = s3::fresh("profile");
    let opts = strata::storage::ProfileOptions {
        file_size: 2 << 20,
        sizes: vec![4096, 65536, 262_144],
        reads_per_size: 6,
        seed: 3,
    };
    let r = strata::storage::profile_device(Path::new(&url), &opts).unwrap();
    assert_eq!(r.points.len(), 3);
    assert!(r.points.iter().all(|p| p.mean_us > 0.0));
    assert!(r.file.starts_with(&url), "{}", r.file);
    assert!(!r.direct);
    let prefix = url.trim_start_matches(&format!("s3://{BUCKET}/")).to_string();
    assert!(server.files_under(&prefix).is_empty(), "scratch object left");
}
