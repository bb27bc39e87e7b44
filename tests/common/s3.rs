//! A real S3-compatible server for the object-store tests: s3s-fs's store
//! (crates.io) served by `tools/s3-server` (`scripts/s3-tests.sh` installs
//! it into `target/tools`), started on 127.0.0.1 at a free port over a
//! temporary directory, and stopped when dropped.

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The bucket every test server holds.
pub const BUCKET: &str = "strata-test";
/// The credentials of the test servers: distinctive, so that a test can
/// look for them in every message.
pub const ACCESS_KEY: &str = "STRATAACCESSKEY7Q3Z";
pub const SECRET_KEY: &str = "strata-secret-9f4e1c77b2d04a6e";

/// The server binary: `STRATA_S3_SERVER`, else
/// `target/tools/bin/strata-s3-server` of the workspace (this file also
/// serves the tests of `crates/strata-ballista`).
pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("STRATA_S3_SERVER") {
        return PathBuf::from(p);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tool = "target/tools/bin/strata-s3-server";
    let p = [manifest.join(tool), manifest.join("../..").join(tool)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| manifest.join(tool));
    assert!(
        p.exists(),
        "no S3 test server at {}: run scripts/s3-tests.sh (it installs it there) or set STRATA_S3_SERVER",
        p.display()
    );
    p
}

/// A running test server.
pub struct Server {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The directory the server keeps its objects in (`root/BUCKET/key`).
    pub root: tempfile::TempDir,
}

impl Server {
    /// Starts a server on 127.0.0.1 at a free port and waits until it
    /// accepts connections.
    pub fn start() -> Server {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(BUCKET)).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Under a shell that kills the server once this process is gone (a
        // server in a `static` is never dropped), in a process group of its
        // own that `stop` kills whole.
        let watch = r#""$@" & s=$!
while kill -0 "$STRATA_TEST_PID" 2>/dev/null && kill -0 "$s" 2>/dev/null; do sleep 0.2; done
kill -9 "$s" 2>/dev/null; wait"#;
        let child = Command::new("bash")
            .args(["-c", watch, "s3-server"])
            .arg(binary())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root.path())
            .env("STRATA_TEST_PID", std::process::id().to_string())
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary().display()));
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the S3 server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Server {
            child: Some(child),
            endpoint: format!("http://127.0.0.1:{port}"),
            root,
        }
    }

    /// Points the `AWS_*` environment at this server (what a user sets).
    ///
    /// # Safety
    /// No other thread may read or write the environment meanwhile.
    pub unsafe fn export(&self) {
        // SAFETY: the caller's promise.
        unsafe {
            std::env::set_var("AWS_ENDPOINT", &self.endpoint);
            std::env::set_var("AWS_ALLOW_HTTP", "true");
            std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
            std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
            std::env::set_var("AWS_REGION", "us-east-1");
        }
    }

    /// The files the server holds under `prefix` of the bucket, relative to
    /// it, sorted (its own bookkeeping files left out).
    pub fn files_under(&self, prefix: &str) -> Vec<String> {
        let base = self.root.path().join(BUCKET).join(prefix);
        let mut out = Vec::new();
        let mut stack = vec![base.clone()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else { continue };
            for e in rd {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(&base).unwrap().to_string_lossy().to_string();
                    if !rel.starts_with('.') && !rel.contains("/.") {
                        out.push(rel);
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// Stops the server (as a crash would: SIGKILL).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) of the server's process group.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One server for the whole test binary, with the environment pointing
/// at it (set once, before any test builds a client).
pub fn shared() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let s = Server::start();
        // SAFETY: inside the `OnceLock`'s initialisation: every test reaches
        // the environment only through `shared()` first, so none reads it
        // while it is set.
        unsafe { s.export() };
        s
    })
}

/// A fresh `s3://BUCKET/name-N` location (N unique in this process).
pub fn fresh(name: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("s3://{BUCKET}/{name}-{}", N.fetch_add(1, Ordering::Relaxed))
}
