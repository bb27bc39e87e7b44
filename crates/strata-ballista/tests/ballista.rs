//! strata tables on a Ballista cluster (issue 22): a scheduler and one or
//! two executors (`strata-ballista` processes on 127.0.0.1) answer the
//! report's queries over an index on a loopback S3 server, and queries over
//! an LSM store in a local directory, with the rows DataFusion gives in
//! this process.

#[path = "../../../tests/common/s3.rs"]
#[allow(dead_code, reason = "the object-store tests use the rest")]
mod s3;

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::prelude::{SessionConfig, SessionContext};
use strata::index::{BuildOptions, OpenOptions};
use strata_datafusion::{StrataLsmTable, StrataTable};

/// A scheduler and executors, each a `strata-ballista` process in a
/// process group of its own, under a shell that kills it once this test
/// process is gone.
struct Cluster {
    children: Vec<Child>,
    /// `df://127.0.0.1:PORT`.
    url: String,
    logs: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(port: u16, what: &str, cluster: &Cluster) {
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what} did not listen on {port}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Cluster {
    fn start(executors: usize) -> Cluster {
        let logs = tempfile::tempdir().unwrap();
        let mut c = Cluster {
            children: Vec::new(),
            url: String::new(),
            logs,
        };
        let sp = free_port();
        c.spawn("scheduler", &["scheduler", "--port", &sp.to_string()]);
        wait_listening(sp, "the scheduler", &c);
        for i in 0..executors {
            let (f, g) = (free_port(), free_port());
            let work = c.logs.path().join(format!("work-{i}"));
            std::fs::create_dir(&work).unwrap();
            c.spawn(
                &format!("executor-{i}"),
                &[
                    "executor",
                    "--scheduler-port",
                    &sp.to_string(),
                    "--flight-port",
                    &f.to_string(),
                    "--grpc-port",
                    &g.to_string(),
                    "--task-slots",
                    "2",
                    "--work-dir",
                    work.to_str().unwrap(),
                ],
            );
            wait_listening(f, "an executor", &c);
            wait_listening(g, "an executor", &c);
        }
        c.url = format!("df://127.0.0.1:{sp}");
        c
    }

    fn spawn(&mut self, name: &str, args: &[&str]) {
        let watch = r#""$@" & s=$!
while kill -0 "$STRATA_TEST_PID" 2>/dev/null && kill -0 "$s" 2>/dev/null; do sleep 0.2; done
kill -9 "$s" 2>/dev/null; wait"#;
        let log = std::fs::File::create(self.logs.path().join(format!("{name}.log"))).unwrap();
        let child = Command::new("bash")
            .args(["-c", watch, name])
            .arg(env!("CARGO_BIN_EXE_strata-ballista"))
            .args(args)
            .env("STRATA_TEST_PID", std::process::id().to_string())
            .env("RUST_LOG", "warn")
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    /// Every process's log, for a failure's message.
    fn logs(&self) -> String {
        let mut out = String::new();
        let mut names: Vec<_> = std::fs::read_dir(self.logs.path())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        names.sort();
        for p in names {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            out.push_str(&format!("--- {}\n", p.display()));
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            // SAFETY: kill(2) of the child's process group.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

/// Keys with both ends of the u64 range, dense runs and wide gaps; value =
/// rank.
fn keys() -> Vec<u64> {
    let mut k: Vec<u64> = (0..20_000u64)
        .map(|i| i * i % 7_919 * 1_000_003 + i)
        .chain([0, 1, 2, u64::MAX - 1, u64::MAX])
        .chain(5_000_000..5_003_000)
        .collect();
    k.sort_unstable();
    k.dedup();
    k
}

/// The queries of `docs/results/scale-out.md` (point, absent point, `IN`
/// of 1,000 keys, ranges, `LIMIT`, a full scan) and a few more shapes:
/// aggregates (a shuffle on Ballista) and a filter DataFusion keeps.
fn queries(keys: &[u64]) -> Vec<String> {
    let pick = |i: usize| keys[i * 7_919 % keys.len()];
    let (a, b) = (pick(3).min(pick(4)), pick(3).max(pick(4)));
    let x = pick(11);
    let in_sql = (0..1000)
        .map(|i| (pick(i) + (i as u64 % 2)).to_string())
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        format!("SELECT key, value FROM t WHERE key = {x}"),
        format!("SELECT key, value FROM t WHERE key = {}", x + 1),
        format!("SELECT key, value FROM t WHERE key IN ({in_sql})"),
        format!("SELECT key, value FROM t WHERE key BETWEEN {a} AND {b} ORDER BY key"),
        format!("SELECT key, value FROM t WHERE key >= {a} AND key < {b}"),
        format!("SELECT key, value FROM t WHERE key > {a} ORDER BY key LIMIT 7"),
        "SELECT key, value FROM t ORDER BY key LIMIT 10".into(),
        "SELECT key, value FROM t".into(),
        "SELECT COUNT(*), SUM(value), MIN(key), MAX(key) FROM t".into(),
        "SELECT COUNT(*) FROM t WHERE key BETWEEN 5000000 AND 5002999".into(),
        "SELECT key % 10 AS d, COUNT(*) AS n FROM t GROUP BY key % 10 ORDER BY d".into(),
        "SELECT key, value FROM t WHERE value < 5 ORDER BY key".into(),
        format!("SELECT key FROM t WHERE key > {b} AND key < {a}"),
    ]
}

/// An LSM store of byte-string keys (in a directory every process of the
/// loopback cluster sees), some in tables, some only in the log.
fn lsm_store() -> tempfile::TempDir {
    use strata::lsm::{Options, Store};
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), Options::default()).unwrap();
    store.put(b"", b"empty").unwrap();
    store.put(&[0xff; 9], b"ff").unwrap();
    for i in 0..5000u32 {
        store
            .put(
                format!("user{:06}", i * 7 % 5000).as_bytes(),
                format!("v{i}").as_bytes(),
            )
            .unwrap();
    }
    store.flush().unwrap();
    for i in (0..5000u32).step_by(3) {
        store.delete(format!("user{i:06}").as_bytes()).unwrap();
    }
    store.close().unwrap();
    tmp
}

/// Queries over the LSM table `kv`.
fn lsm_queries() -> Vec<String> {
    let in_sql = (0..500u32)
        .map(|i| format!("'user{:06}'", i * 9 + 1))
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        "SELECT key, value FROM kv WHERE key = X'75736572303030303031'".into(),
        format!("SELECT key, value FROM kv WHERE key IN ({in_sql})"),
        "SELECT key, value FROM kv WHERE key BETWEEN 'user001000' AND 'user002000' ORDER BY key".into(),
        "SELECT key, value FROM kv WHERE key > 'user004990' ORDER BY key LIMIT 5".into(),
        "SELECT key, value FROM kv".into(),
        "SELECT COUNT(*), MIN(key), MAX(key) FROM kv".into(),
    ]
}

/// The rows as text, sorted unless the query orders them.
fn rows(batches: &[RecordBatch], ordered: bool) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .map(|c| array_value_to_string(c, r).unwrap())
                .collect();
            out.push(cells.join("|"));
        }
    }
    if !ordered {
        out.sort();
    }
    out
}

async fn run(ctx: &SessionContext, sql: &str, cluster: Option<&Cluster>) -> Vec<RecordBatch> {
    let logs = || cluster.map(Cluster::logs).unwrap_or_default();
    let df = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", logs()));
    df.collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", logs()))
}

/// Ballista with one executor and with two returns the rows DataFusion
/// returns, for every query of the report.
#[test]
fn ballista_returns_the_rows_of_datafusion() {
    s3::shared();
    let keys = keys();
    let location = s3::fresh("ballista");
    strata::registry::build(
        &"pgm-disk".parse().unwrap(),
        &keys,
        Path::new(&location),
        &BuildOptions::default(),
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let lsm = lsm_store();
    runtime.block_on(async {
        let table = || Arc::new(StrataTable::open(Path::new(&location), &OpenOptions::default()).unwrap());
        let kv = || Arc::new(StrataLsmTable::open(lsm.path()).unwrap());
        let local = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
        local.register_table("t", table()).unwrap();
        local.register_table("kv", kv()).unwrap();
        let mut queries = queries(&keys);
        let lsm_queries = lsm_queries();
        queries.extend(lsm_queries.iter().cloned());
        let mut want = Vec::new();
        for q in &queries {
            want.push(rows(&run(&local, q, None).await, q.contains("ORDER BY")));
        }
        // Not empty where rows exist (a comparison of nothing with nothing
        // proves nothing).
        assert_eq!(want[0].len(), 1);
        assert!(want[2].len() > 400, "{}", want[2].len());
        assert_eq!(want[7].len(), keys.len());
        let first_lsm = queries.len() - lsm_queries.len();
        assert_eq!(want[first_lsm].len(), 1);
        assert!(want[first_lsm + 1].len() > 200, "{}", want[first_lsm + 1].len());
        for executors in [1, 2] {
            let cluster = Cluster::start(executors);
            // Four partitions for two slots per executor: a second executor
            // gets tasks.
            let ctx = strata_ballista::connect(&cluster.url, 4).await.unwrap();
            ctx.register_table("t", table()).unwrap();
            ctx.register_table("kv", kv()).unwrap();
            for (q, want) in queries.iter().zip(&want) {
                let got = rows(&run(&ctx, q, Some(&cluster)).await, q.contains("ORDER BY"));
                if &got != want {
                    let only_got: Vec<_> = got.iter().filter(|r| !want.contains(r)).take(10).collect();
                    let only_want: Vec<_> = want.iter().filter(|r| !got.contains(r)).take(10).collect();
                    panic!(
                        "{executors} executor(s): {q:.200}: {} rows, want {}; only in Ballista's {only_got:?}, only in DataFusion's {only_want:?}",
                        got.len(),
                        want.len()
                    );
                }
            }
            // Every executor ran tasks: each keeps a directory per job it
            // ran a stage of (so the rows did not come from this process).
            for i in 0..executors {
                let jobs = std::fs::read_dir(cluster.logs.path().join(format!("work-{i}")))
                    .unwrap()
                    .filter(|e| e.as_ref().unwrap().path().is_dir())
                    .count();
                assert!(jobs > 0, "executor {i} of {executors} ran nothing\n{}", cluster.logs());
            }
        }
    });
}
