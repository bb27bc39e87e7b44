//! Files on an object store: S3 and servers that speak its API (cargo
//! feature `s3`), through the `object_store` crate.
//!
//! See [`ObjectDirectory`].

use std::collections::{HashMap, VecDeque};
use std::fmt::{self, Debug};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as ObjectPath;
use object_store::{
    ClientConfigKey, GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
    UpdateVersion,
};
use parking_lot::Mutex;

use super::batch::{ReadStream, StreamRead};
use super::{AlignedBuf, DirLock, Directory, LockMode, ReadStorage, S3_SCHEME, Sink, Storage};
use crate::{Error, Result};

/// Parts of a multipart upload in flight at once.
const PARTS_IN_FLIGHT: usize = 4;

/// Timeouts, retries and request shapes of an [`ObjectDirectory`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectOptions {
    /// Time limit of one HTTP request (`STRATA_S3_TIMEOUT_MS`, default 30 s).
    pub timeout: Duration,
    /// Retries of a failed request, with exponential backoff
    /// (`STRATA_S3_RETRIES`, default 3). A request that still fails is an
    /// error: a read never returns bytes it did not get.
    pub retries: usize,
    /// Size of the parts of a multipart upload (≥ 5 MiB, S3's least; default
    /// 8 MiB). A file smaller than one part is uploaded by one PUT.
    pub part_size: usize,
    /// Ranges of one batched read closer than this many bytes are read by
    /// one GET (`STRATA_S3_COALESCE`, default 1 MiB, `object_store`'s).
    /// Reading a gap pays when it costs less time than a request: about the
    /// store's latency × bandwidth (1–2 MB for S3 itself, ~32 KB for the
    /// loopback test server).
    pub coalesce: u64,
}

impl Default for ObjectOptions {
    fn default() -> Self {
        ObjectOptions {
            timeout: Duration::from_secs(30),
            retries: 3,
            part_size: 8 << 20,
            coalesce: object_store::OBJECT_STORE_COALESCE_DEFAULT,
        }
    }
}

impl ObjectOptions {
    /// The least part size S3 accepts (all parts but the last).
    pub const MIN_PART_SIZE: usize = 5 << 20;

    /// The defaults with `STRATA_S3_TIMEOUT_MS`, `STRATA_S3_RETRIES` and
    /// `STRATA_S3_COALESCE` applied; a variable that is not a number is
    /// [`Error::InvalidInput`].
    pub fn from_env() -> Result<Self> {
        let mut o = ObjectOptions::default();
        let var = |name: &str| -> Result<Option<u64>> {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| Error::invalid(format!("{name}={v:?} is not a whole number"))),
                Err(_) => Ok(None),
            }
        };
        if let Some(ms) = var("STRATA_S3_TIMEOUT_MS")? {
            o.timeout = Duration::from_millis(ms.max(1));
        }
        if let Some(r) = var("STRATA_S3_RETRIES")? {
            o.retries = usize::try_from(r).unwrap_or(usize::MAX);
        }
        if let Some(c) = var("STRATA_S3_COALESCE")? {
            o.coalesce = c;
        }
        Ok(o)
    }
}

/// Requests an [`ObjectDirectory`] (and every directory, file and sink
/// made from it) sent, counted as they are sent (retries included only as
/// one request).
#[derive(Debug, Default)]
pub struct ObjectStats {
    /// Ranged GET requests (a coalesced batch counts its GETs).
    pub gets: AtomicU64,
    /// Bytes those GETs returned.
    pub get_bytes: AtomicU64,
    /// HEAD requests (opening a file, `exists`).
    pub heads: AtomicU64,
    /// PUT requests: single puts, parts, multipart creations and completions.
    pub puts: AtomicU64,
    /// Bytes uploaded.
    pub put_bytes: AtomicU64,
    /// LIST and DELETE requests.
    pub others: AtomicU64,
}

impl ObjectStats {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// What every directory, file and sink of one bucket shares: the client,
/// the runtime its calls run on, the counters.
struct Remote {
    store: AmazonS3,
    /// Always `Some` until dropped (see `Drop`).
    runtime: Option<tokio::runtime::Runtime>,
    bucket: String,
    options: ObjectOptions,
    stats: Arc<ObjectStats>,
}

impl Debug for Remote {
    // The client's own `Debug` shows its configuration; this shows only
    // the bucket.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote").field("bucket", &self.bucket).finish()
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Dropping a runtime from a task of another runtime panics (a
        // directory opened by a DataFusion or Ballista plan is dropped
        // there); shutting it down in the background is allowed anywhere.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Remote {
    fn runtime(&self) -> &tokio::runtime::Runtime {
        match &self.runtime {
            Some(rt) => rt,
            // Only `drop` takes it.
            None => unreachable!("a Remote's runtime is taken only when it is dropped"),
        }
    }

    /// Runs `fut` to completion on this remote's runtime, blocking the
    /// calling thread (from a runtime's task, on a scoped thread).
    fn run<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| {
                let h = s.spawn(|| self.runtime().block_on(fut));
                match h.join() {
                    Ok(out) => out,
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            })
        } else {
            self.runtime().block_on(fut)
        }
    }

    fn url(&self, key: &str) -> String {
        format!("{S3_SCHEME}{}/{key}", self.bucket)
    }
}

/// A strata error for a failed request on `what` (an `s3://` URL). The
/// message is the client's, which names the request and the object, never
/// the credentials.
fn remote_error(what: &str, e: object_store::Error) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::NotFound(format!("{what} does not exist")),
        object_store::Error::Precondition { .. } => Error::Conflict(format!(
            "{what} changed on the server while it was read (its ETag no longer matches)"
        )),
        other => Error::Io {
            file: what.to_string(),
            source: std::io::Error::other(other.to_string()),
        },
    }
}

/// The objects under one prefix of a bucket
/// (`s3://bucket/prefix`). It holds files built once and then only read,
/// which is every file of a static index:
///
/// - reads are ranged GETs (`read_at`); a batch of reads
///   ([`ReadStorage::read_stream`]) is one `get_ranges`-style call: ranges
///   closer than [`ObjectOptions::coalesce`] are merged into one GET and up
///   to ten GETs run at once. Every GET names the object's ETag seen when it
///   was opened (`If-Match`) and checks the ETag of the answer, so an object
///   replaced since is [`Error::Conflict`], never bytes of another version;
/// - a file is built by a [`Sink`] as a multipart upload: parts of
///   [`ObjectOptions::part_size`] are uploaded while the build goes on (up to
///   four at once), the first part (which holds the header region) last, and
///   the object appears only when the upload completes in `finish` (a file
///   smaller than one part is a single PUT then);
/// - [`Directory::publish`] is a conditional PUT: `If-None-Match: *` for a
///   name this handle saw absent (or never looked at), `If-Match` with the
///   ETag it saw otherwise. When another writer got there first the put
///   fails and the caller gets [`Error::Conflict`]: of two builders
///   publishing one index, exactly one wins;
/// - [`Directory::build_dir`] gives each build a sub-prefix of its own, so
///   two builders never write the same object (an object store cannot rename
///   atomically; see `index::registry`);
/// - read-write files (`create`, `open`: stores, logs, the updatable trees)
///   are [`Error::Unsupported`]. There are no locks either: `lock` returns a
///   guard that excludes nobody, and the manifest's conditional put stands
///   in for a builder's exclusive lock.
///
/// Credentials, region and endpoint come from the usual `AWS_*` variables
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, …); timeouts, retries and the
/// coalescing distance from `STRATA_S3_TIMEOUT_MS`, `STRATA_S3_RETRIES` and
/// `STRATA_S3_COALESCE` ([`ObjectOptions`]).
/// Nothing here prints a credential: descriptions and errors name the
/// bucket and the object only.
///
/// The calls are async underneath; each directory runs them on a small
/// tokio runtime of its own and blocks the calling thread until they finish
/// (from inside another runtime's task, on a thread of its own).
pub struct ObjectDirectory {
    remote: Arc<Remote>,
    /// The prefix, without a trailing `/` (empty: the bucket's root).
    prefix: String,
    /// The ETag of each name as this handle last saw it (`None`: absent),
    /// for the conditional puts of [`Directory::publish`].
    seen: Mutex<HashMap<String, Option<String>>>,
}

impl Debug for ObjectDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectDirectory")
            .field("location", &self.describe())
            .finish()
    }
}

impl ObjectDirectory {
    /// The directory at `url` (`s3://bucket/prefix`), with the client
    /// configured from the `AWS_*` environment and `options`. Sends no
    /// request: a wrong endpoint or credential shows at the first call.
    pub fn open(url: &str, options: ObjectOptions) -> Result<Self> {
        let rest = url
            .strip_prefix(S3_SCHEME)
            .ok_or_else(|| Error::invalid(format!("{url:?} is not an s3:// URL")))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(Error::invalid(format!("{url:?} names no bucket")));
        }
        if options.part_size < ObjectOptions::MIN_PART_SIZE {
            return Err(Error::invalid(format!(
                "part size {} is below S3's least of {} bytes",
                options.part_size,
                ObjectOptions::MIN_PART_SIZE
            )));
        }
        let prefix = prefix.trim_matches('/').to_string();
        // Timeouts as configuration keys: `with_client_options` would replace
        // the client options read from the environment (`AWS_ALLOW_HTTP`).
        let timeout = format!("{}ms", options.timeout.as_millis());
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), &timeout)
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                &timeout,
            )
            .with_retry(RetryConfig {
                max_retries: options.retries,
                retry_timeout: options.timeout * (options.retries as u32 + 1),
                ..RetryConfig::default()
            });
        // Without a region in the environment, a local server still needs one.
        if std::env::var_os("AWS_REGION").is_none() && std::env::var_os("AWS_DEFAULT_REGION").is_none() {
            builder = builder.with_region("us-east-1");
        }
        let store = builder
            .build()
            .map_err(|e| Error::invalid(format!("{S3_SCHEME}{bucket}: {e}")))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("strata-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::io(url, e))?;
        Ok(ObjectDirectory {
            remote: Arc::new(Remote {
                store,
                runtime: Some(runtime),
                bucket: bucket.to_string(),
                options,
                stats: Arc::new(ObjectStats::default()),
            }),
            prefix,
            seen: Mutex::new(HashMap::new()),
        })
    }

    /// The requests sent so far by this directory and everything made from
    /// it (files, sinks, build directories).
    pub fn stats(&self) -> Arc<ObjectStats> {
        self.remote.stats.clone()
    }

    /// The object key of the file `name`.
    fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.prefix)
        }
    }

    fn path(&self, name: &str) -> Result<ObjectPath> {
        ObjectPath::parse(self.key(name)).map_err(|e| {
            Error::invalid(format!(
                "{}: bad object name: {e}",
                self.remote.url(&self.key(name))
            ))
        })
    }

    fn child(&self, name: &str) -> ObjectDirectory {
        ObjectDirectory {
            remote: self.remote.clone(),
            prefix: self.key(name),
            seen: Mutex::new(HashMap::new()),
        }
    }

    fn read_write_unsupported(&self, name: &str) -> Error {
        Error::Unsupported(format!(
            "{}: an object store holds files built once; a store, a log or an updatable index needs a \
             local directory",
            self.remote.url(&self.key(name))
        ))
    }

    /// HEAD of `name`: its length and ETag, remembered for `publish`.
    fn head(&self, name: &str) -> Result<(u64, Option<String>)> {
        let path = self.path(name)?;
        ObjectStats::add(&self.remote.stats.heads, 1);
        match self.remote.run(self.remote.store.head(&path)) {
            Ok(meta) => {
                self.seen.lock().insert(name.to_string(), meta.e_tag.clone());
                Ok((meta.size, meta.e_tag))
            }
            Err(e) => {
                if matches!(e, object_store::Error::NotFound { .. }) {
                    self.seen.lock().insert(name.to_string(), None);
                }
                Err(remote_error(&self.remote.url(&self.key(name)), e))
            }
        }
    }
}

impl Directory for ObjectDirectory {
    fn create(&self, name: &str) -> Result<Arc<dyn Storage>> {
        Err(self.read_write_unsupported(name))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Storage>> {
        Err(self.read_write_unsupported(name))
    }

    /// Whether `name` exists; `true` when the server could not tell (any
    /// error but "not found"), so that the caller's next call on the file
    /// reports the error instead of a missing file.
    fn exists(&self, name: &str) -> bool {
        match self.head(name) {
            Ok(_) => true,
            Err(Error::NotFound(_)) => false,
            Err(_) => true,
        }
    }

    fn remove(&self, name: &str) -> Result<()> {
        let path = self.path(name)?;
        ObjectStats::add(&self.remote.stats.others, 1);
        self.remote
            .run(self.remote.store.delete(&path))
            .map_err(|e| remote_error(&self.remote.url(&self.key(name)), e))?;
        self.seen.lock().insert(name.to_string(), None);
        Ok(())
    }

    /// A copy and a delete: not atomic (builds on an object store do not
    /// rename; see [`Directory::build_dir`]).
    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (f, t) = (self.path(from)?, self.path(to)?);
        ObjectStats::add(&self.remote.stats.others, 2);
        self.remote
            .run(self.remote.store.rename(&f, &t))
            .map_err(|e| remote_error(&self.remote.url(&self.key(from)), e))?;
        let mut seen = self.seen.lock();
        seen.insert(from.to_string(), None);
        seen.remove(to);
        Ok(())
    }

    /// The objects directly under the prefix (not those of build
    /// directories below it), sorted.
    fn list(&self) -> Result<Vec<String>> {
        let prefix = if self.prefix.is_empty() {
            None
        } else {
            Some(ObjectPath::parse(&self.prefix).map_err(|e| Error::invalid(e.to_string()))?)
        };
        ObjectStats::add(&self.remote.stats.others, 1);
        let listed = self
            .remote
            .run(self.remote.store.list_with_delimiter(prefix.as_ref()))
            .map_err(|e| remote_error(&self.describe(), e))?;
        let mut names: Vec<String> = listed
            .objects
            .into_iter()
            .filter_map(|m| m.location.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Nothing to do: an object is durable once its PUT (or its upload's
    /// completion) returned.
    fn sync_dir(&self) -> Result<()> {
        Ok(())
    }

    fn describe(&self) -> String {
        self.remote.url(&self.prefix)
    }

    /// A guard that excludes nobody: an object store has no locks. Builders
    /// are kept apart by the conditional put of the manifest
    /// ([`publish`](Directory::publish)) and by writing their files under
    /// build directories of their own.
    fn lock(&self, mode: LockMode) -> Result<DirLock> {
        Ok(DirLock::new(mode, ()))
    }

    fn open_read(&self, name: &str) -> Result<Arc<dyn ReadStorage>> {
        let (len, etag) = self.head(name)?;
        Ok(Arc::new(ObjectFile {
            remote: self.remote.clone(),
            path: self.path(name)?,
            name: self.remote.url(&self.key(name)),
            len,
            etag,
        }))
    }

    fn open_cached(&self, name: &str) -> Result<Arc<dyn Storage>> {
        Err(self.read_write_unsupported(name))
    }

    fn create_sink(&self, name: &str, header_len: usize) -> Result<Box<dyn Sink>> {
        if header_len >= self.remote.options.part_size {
            return Err(Error::invalid(format!(
                "a header of {header_len} bytes does not fit in one part of {} bytes",
                self.remote.options.part_size
            )));
        }
        Ok(Box::new(ObjectSink {
            remote: self.remote.clone(),
            path: self.path(name)?,
            name: self.remote.url(&self.key(name)),
            header_len,
            head: Vec::new(),
            part: Vec::new(),
            position: header_len as u64,
            upload: None,
        }))
    }

    /// A conditional PUT: `If-Match` the ETag this handle last saw for
    /// `name`, or `If-None-Match: *` when it saw none. A put that loses to
    /// another writer is [`Error::Conflict`], and `name` keeps the winner's
    /// contents.
    fn publish(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(name)?;
        let url = self.remote.url(&self.key(name));
        let seen = self.seen.lock().get(name).cloned().flatten();
        let mode = match &seen {
            Some(etag) => PutMode::Update(UpdateVersion {
                e_tag: Some(etag.clone()),
                version: None,
            }),
            None => PutMode::Create,
        };
        ObjectStats::add(&self.remote.stats.puts, 1);
        ObjectStats::add(&self.remote.stats.put_bytes, bytes.len() as u64);
        let put = self.remote.run(self.remote.store.put_opts(
            &path,
            PutPayload::from(bytes.to_vec()),
            PutOptions::from(mode),
        ));
        match put {
            Ok(done) => {
                self.seen.lock().insert(name.to_string(), done.e_tag);
                Ok(())
            }
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Err(Error::Conflict(format!(
                "{url} was {} by another writer since this one {}: its contents are the other \
                     writer's",
                if seen.is_some() { "replaced" } else { "created" },
                if seen.is_some() {
                    "read it"
                } else {
                    "found it absent"
                },
            ))),
            Err(e) => Err(remote_error(&url, e)),
        }
    }

    fn build_dir(&self, build: &str) -> Option<Arc<dyn Directory>> {
        Some(Arc::new(self.child(build)))
    }
}

/// One object, read by ranged GETs.
struct ObjectFile {
    remote: Arc<Remote>,
    path: ObjectPath,
    name: String,
    len: u64,
    etag: Option<String>,
}

impl Debug for ObjectFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectFile")
            .field("name", &self.name)
            .field("len", &self.len)
            .finish()
    }
}

impl ObjectFile {
    /// The range `[offset, offset + len)`, checked against the length.
    fn range(&self, offset: u64, len: usize) -> Result<Range<u64>> {
        let end = offset.checked_add(len as u64).filter(|&e| e <= self.len);
        match end {
            Some(end) => Ok(offset..end),
            None => Err(Error::Io {
                file: self.name.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "read of {len} bytes at {offset} past the end ({} bytes)",
                        self.len
                    ),
                ),
            }),
        }
    }

    /// One ranged GET, pinned to the ETag seen at open.
    async fn fetch(&self, range: Range<u64>) -> object_store::Result<bytes::Bytes> {
        let options = GetOptions {
            range: Some(range.clone().into()),
            if_match: self.etag.clone(),
            ..GetOptions::default()
        };
        ObjectStats::add(&self.remote.stats.gets, 1);
        let res = self.remote.store.get_opts(&self.path, options).await?;
        // Servers that ignore `If-Match` on GET still name the version they
        // sent.
        if let (Some(want), Some(got)) = (&self.etag, &res.meta.e_tag)
            && want != got
        {
            return Err(object_store::Error::Precondition {
                path: self.path.to_string(),
                source: format!("ETag {got} where {want} was opened").into(),
            });
        }
        let got = res.bytes().await?;
        ObjectStats::add(&self.remote.stats.get_bytes, got.len() as u64);
        Ok(got)
    }

    /// `got` as the bytes of `range`, or an error if the server sent fewer
    /// or more.
    fn check(&self, range: &Range<u64>, got: &[u8]) -> Result<()> {
        let want = range.end - range.start;
        if got.len() as u64 != want {
            return Err(Error::Io {
                file: self.name.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "the server sent {} bytes for the {want} at {}",
                        got.len(),
                        range.start
                    ),
                ),
            });
        }
        Ok(())
    }
}

impl ReadStorage for ObjectFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let range = self.range(offset, buf.len())?;
        let got = self
            .remote
            .run(self.fetch(range.clone()))
            .map_err(|e| remote_error(&self.name, e))?;
        self.check(&range, &got)?;
        buf.copy_from_slice(&got);
        Ok(())
    }

    /// Up to `queue_depth` reads at a time, each group as one
    /// `get_ranges`-style call (ranges closer than the coalescing distance
    /// read by one GET, up to ten GETs at once), handed back in order.
    fn read_stream(&self, stream: &mut dyn ReadStream, queue_depth: usize) -> Result<()> {
        let depth = queue_depth.max(1);
        let mut seq = 0usize;
        loop {
            let mut group: Vec<StreamRead> = Vec::with_capacity(depth);
            while group.len() < depth {
                match stream.next()? {
                    Some(r) => group.push(r),
                    None => break,
                }
            }
            if group.is_empty() {
                return Ok(());
            }
            let ranges = group
                .iter()
                .map(|r| self.range(r.offset, r.len))
                .collect::<Result<Vec<_>>>()?;
            let fetched = self
                .remote
                .run(object_store::coalesce_ranges(
                    &ranges,
                    |r| self.fetch(r),
                    self.remote.options.coalesce,
                ))
                .map_err(|e| remote_error(&self.name, e))?;
            for (range, got) in ranges.iter().zip(&fetched) {
                self.check(range, got)?;
                let mut buf = AlignedBuf::for_overwrite(got.len());
                buf.copy_from_slice(got);
                stream.done(seq, buf)?;
                seq += 1;
            }
        }
    }

    fn len(&self) -> Result<u64> {
        Ok(self.len)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// A multipart upload under way.
struct Upload {
    id: String,
    /// Parts 1.. (part 0, with the header, goes last) already uploaded, in order.
    done: Vec<PartId>,
    /// The parts after those, still uploading, in order.
    in_flight: VecDeque<tokio::task::JoinHandle<object_store::Result<PartId>>>,
}

/// A file built by a multipart upload (see [`ObjectDirectory`]).
struct ObjectSink {
    remote: Arc<Remote>,
    path: ObjectPath,
    name: String,
    header_len: usize,
    /// The appended bytes of part 0, after the header region.
    head: Vec<u8>,
    /// The part being filled.
    part: Vec<u8>,
    position: u64,
    upload: Option<Upload>,
}

impl Debug for ObjectSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectSink")
            .field("name", &self.name)
            .field("position", &self.position)
            .finish()
    }
}

/// A part's upload task, awaited.
async fn part_done(h: tokio::task::JoinHandle<object_store::Result<PartId>>) -> object_store::Result<PartId> {
    h.await.map_err(|e| object_store::Error::Generic {
        store: "S3",
        source: Box::new(e),
    })?
}

impl ObjectSink {
    fn part_size(&self) -> usize {
        self.remote.options.part_size
    }

    /// Starts uploading the filled part as the next part (starting the
    /// upload first), after waiting for the oldest part while
    /// [`PARTS_IN_FLIGHT`] are under way.
    fn send_part(&mut self) -> Result<()> {
        let data = std::mem::take(&mut self.part);
        let remote = self.remote.clone();
        let upload = match &mut self.upload {
            Some(u) => u,
            None => {
                ObjectStats::add(&remote.stats.puts, 1);
                let id = remote
                    .run(remote.store.create_multipart(&self.path))
                    .map_err(|e| remote_error(&self.name, e))?;
                self.upload.insert(Upload {
                    id,
                    done: Vec::new(),
                    in_flight: VecDeque::new(),
                })
            }
        };
        while upload.in_flight.len() >= PARTS_IN_FLIGHT
            && let Some(oldest) = upload.in_flight.pop_front()
        {
            let part = remote
                .run(part_done(oldest))
                .map_err(|e| remote_error(&self.name, e))?;
            upload.done.push(part);
        }
        let index = 1 + upload.done.len() + upload.in_flight.len();
        ObjectStats::add(&remote.stats.puts, 1);
        ObjectStats::add(&remote.stats.put_bytes, data.len() as u64);
        let (path, id, task_remote) = (self.path.clone(), upload.id.clone(), remote.clone());
        upload.in_flight.push_back(remote.runtime().spawn(async move {
            task_remote
                .store
                .put_part(&path, &id, index, PutPayload::from(data))
                .await
        }));
        Ok(())
    }

    /// Uploads the last part and part 0, waits for every part and completes
    /// the upload.
    fn complete(&mut self, first: Vec<u8>) -> Result<()> {
        if !self.part.is_empty() {
            self.send_part()?;
        }
        let remote = self.remote.clone();
        let Some(upload) = self.upload.as_mut() else {
            return Err(Error::invalid("multipart upload missing"));
        };
        let in_flight = std::mem::take(&mut upload.in_flight);
        let mut later = std::mem::take(&mut upload.done);
        let (path, id) = (&self.path, &upload.id);
        ObjectStats::add(&remote.stats.puts, 2);
        ObjectStats::add(&remote.stats.put_bytes, first.len() as u64);
        let done = remote.run(async {
            let mut parts = vec![
                remote
                    .store
                    .put_part(path, id, 0, PutPayload::from(first))
                    .await?,
            ];
            parts.append(&mut later);
            for h in in_flight {
                parts.push(part_done(h).await?);
            }
            remote.store.complete_multipart(path, id, parts).await
        });
        done.map(|_| ()).map_err(|e| remote_error(&self.name, e))
    }

    /// Aborts the upload, if one was started (best effort: the server drops
    /// unfinished uploads' parts by its own rules too).
    fn abort(&mut self) {
        if let Some(upload) = self.upload.take() {
            for h in &upload.in_flight {
                h.abort();
            }
            let remote = self.remote.clone();
            ObjectStats::add(&remote.stats.others, 1);
            let _ = remote.run(remote.store.abort_multipart(&self.path, &upload.id));
        }
    }
}

impl Sink for ObjectSink {
    fn append(&mut self, mut buf: &[u8]) -> Result<()> {
        self.position += buf.len() as u64;
        let head_room = self.part_size() - self.header_len - self.head.len();
        if head_room > 0 {
            let (now, rest) = buf.split_at(head_room.min(buf.len()));
            self.head.extend_from_slice(now);
            buf = rest;
        }
        while !buf.is_empty() {
            let room = self.part_size() - self.part.len();
            let (now, rest) = buf.split_at(room.min(buf.len()));
            self.part.extend_from_slice(now);
            buf = rest;
            if self.part.len() == self.part_size() {
                if let Err(e) = self.send_part() {
                    self.abort();
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn write_behind(&mut self) -> Result<()> {
        Ok(())
    }

    fn position(&self) -> u64 {
        self.position
    }

    fn finish(mut self: Box<Self>, header: &[u8]) -> Result<()> {
        if header.len() != self.header_len {
            return Err(Error::invalid(format!(
                "{}: header of {} bytes for a region of {}",
                self.name,
                header.len(),
                self.header_len
            )));
        }
        let mut first = Vec::with_capacity(self.header_len + self.head.len());
        first.extend_from_slice(header);
        first.append(&mut self.head);
        if self.upload.is_none() {
            first.append(&mut self.part);
            ObjectStats::add(&self.remote.stats.puts, 1);
            ObjectStats::add(&self.remote.stats.put_bytes, first.len() as u64);
            let put = self
                .remote
                .run(self.remote.store.put(&self.path, PutPayload::from(first)));
            return put.map(|_| ()).map_err(|e| remote_error(&self.name, e));
        }
        let done = self.complete(first);
        if done.is_err() {
            self.abort();
        } else {
            self.upload = None;
        }
        done
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ObjectSink {
    fn drop(&mut self) {
        self.abort();
    }
}
