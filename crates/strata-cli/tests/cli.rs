//! End-to-end tests of the `strata` command as a user runs it.

use std::path::Path;
use std::process::{Command, Output};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .arg("--quiet")
        .output()
        .expect("run strata")
}

fn ok(args: &[&str]) -> String {
    let out = strata(args);
    assert!(
        out.status.success(),
        "strata {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn fail(args: &[&str]) -> String {
    let out = strata(args);
    assert!(!out.status.success(), "strata {args:?} should fail");
    let err = String::from_utf8(out.stderr).expect("utf-8 error");
    assert_eq!(err.trim().lines().count(), 1, "one clear line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn gen_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.keys");
    let b = tmp.path().join("b.keys");
    let c = tmp.path().join("c.keys");
    for dist in ["fb-like", "osm-like", "uniform", "gmm"] {
        ok(&[
            "gen",
            "--dist",
            dist,
            "--n",
            "20000",
            "--seed",
            "9",
            "--out",
            p(&a),
        ]);
        ok(&[
            "gen",
            "--dist",
            dist,
            "--n",
            "20000",
            "--seed",
            "9",
            "--out",
            p(&b),
        ]);
        ok(&[
            "gen",
            "--dist",
            dist,
            "--n",
            "20000",
            "--seed",
            "10",
            "--out",
            p(&c),
        ]);
        let (ba, bb, bc) = (
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            std::fs::read(&c).unwrap(),
        );
        assert_eq!(ba, bb, "{dist}: same arguments, same bytes");
        assert_ne!(ba, bc, "{dist}: another seed, other keys");
        assert_eq!(ba.len(), 8 + 8 * 20000);
    }
    ok(&[
        "gen",
        "--dist",
        "hard",
        "--n",
        "20000",
        "--local",
        "200",
        "--global",
        "10",
        "--out",
        p(&a),
    ]);
    fail(&[
        "gen",
        "--dist",
        "uniform",
        "--n",
        "10",
        "--local",
        "3",
        "--out",
        p(&a),
    ]);
    fail(&["gen", "--dist", "nonsense", "--n", "10", "--out", p(&a)]);
}

#[test]
fn build_get_scan_inspect_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let idx = tmp.path().join("idx");
    ok(&["gen", "--dist", "dense", "--n", "5000", "--out", p(&keys)]);
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "build",
        "--index",
        "binary",
        "--data",
        p(&keys),
        "--out",
        p(&idx),
    ]))
    .unwrap();
    for field in [
        "index",
        "config",
        "n",
        "memory_bytes",
        "bits_per_key",
        "disk_bytes",
        "build_s",
        "build_keys_per_s",
    ] {
        assert!(report.get(field).is_some(), "build report lacks {field}");
    }
    assert_eq!(report["n"], 5000);
    assert_eq!(ok(&["get", p(&idx), "17", "99999"]), "17\t17\n99999\tnot found\n");
    assert_eq!(
        ok(&["scan", p(&idx), "--from", "4998", "--count", "5"]),
        "4998\t4998\n4999\t4999\n"
    );
    let inspect: serde_json::Value = serde_json::from_str(&ok(&["inspect", p(&idx)])).unwrap();
    assert_eq!(inspect["manifest"]["kind"], "binary");
    let verify: serde_json::Value = serde_json::from_str(&ok(&["verify", p(&idx)])).unwrap();
    assert_eq!(verify["ok"], true);
    fail(&[
        "build",
        "--index",
        "binary:bogus=1",
        "--data",
        p(&keys),
        "--out",
        p(&idx),
    ]);
    fail(&[
        "build",
        "--index",
        "no-such-kind",
        "--data",
        p(&keys),
        "--out",
        p(&idx),
    ]);
}

fn write_raw_keys(path: &Path, count: u64, keys: &[u64]) {
    let mut b = count.to_le_bytes().to_vec();
    for k in keys {
        b.extend_from_slice(&k.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn bad_key_files_are_rejected_with_the_position() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("bad.keys");
    let out = tmp.path().join("idx");
    write_raw_keys(&f, 5, &[1, 2, 3, 10, 7]);
    let e = fail(&["build", "--index", "binary", "--data", p(&f), "--out", p(&out)]);
    assert!(
        e.contains("position 4") && e.contains("10") && e.contains('7'),
        "{e}"
    );
    write_raw_keys(&f, 4, &[1, 2, 2, 3]);
    let e = fail(&["build", "--index", "binary", "--data", p(&f), "--out", p(&out)]);
    assert!(e.contains("position 2") && e.contains("duplicate"), "{e}");
    ok(&[
        "build",
        "--index",
        "binary",
        "--data",
        p(&f),
        "--out",
        p(&out),
        "--dedup",
    ]);
    // Truncated: the header promises more keys than the file holds.
    write_raw_keys(&f, 10, &[1, 2, 3]);
    let e = fail(&["build", "--index", "binary", "--data", p(&f), "--out", p(&out)]);
    assert!(
        e.contains("truncated") && e.contains("88") && e.contains("32"),
        "{e}"
    );
}

#[test]
fn flipped_byte_is_a_corruption_error() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let idx = tmp.path().join("idx");
    ok(&["gen", "--dist", "uniform", "--n", "3000", "--out", p(&keys)]);
    ok(&["build", "--index", "binary", "--data", p(&keys), "--out", p(&idx)]);
    // Keys of data page 2 (file page 3), then flip a byte inside that page.
    let all = strata::format::read_keys(&keys, Default::default()).unwrap();
    let victim = all[2 * 255 + 7];
    let run = idx.join("data.run");
    let mut bytes = std::fs::read(&run).unwrap();
    bytes[3 * 4096 + 200] ^= 0x40;
    std::fs::write(&run, bytes).unwrap();
    let e = fail(&["verify", p(&idx)]);
    assert!(e.contains("corruption") && e.contains("page 3"), "{e}");
    let e = fail(&["get", p(&idx), &victim.to_string()]);
    assert!(e.contains("corruption") && e.contains("page 3"), "{e}");
    // Other pages still answer.
    assert_eq!(
        ok(&["get", p(&idx), &all[5].to_string()]),
        format!("{}\t5\n", all[5])
    );
}

#[test]
fn bench_emits_the_fixed_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let json = tmp.path().join("out.jsonl");
    ok(&["gen", "--dist", "osm-like", "--n", "50000", "--out", p(&keys)]);
    let table = ok(&[
        "bench",
        "--data",
        p(&keys),
        "--index",
        "binary",
        "--index",
        "zonemap",
        "--workload",
        "lookup",
        "--workload",
        "scan",
        "--ops",
        "500",
        "--profile",
        "hdd",
        "--json",
        p(&json),
    ]);
    assert!(table.contains("binary") && table.contains("zonemap"), "{table}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    for r in &lines {
        for f in [
            "index",
            "config",
            "dataset",
            "n",
            "workload",
            "ops",
            "profile",
            "cache",
            "throughput_ops_s",
            "latency_ns",
            "io",
            "memory_bytes",
            "bits_per_key",
            "disk_bytes",
            "build_s",
            "build_keys_per_s",
            "models",
            "wrong",
        ] {
            assert!(r.get(f).is_some(), "missing field {f} in {r}");
        }
        for f in ["p50", "p99", "p999", "max"] {
            assert!(r["latency_ns"].get(f).is_some());
        }
        for f in [
            "pages_per_op",
            "reads_per_op",
            "bytes_per_op",
            "modelled_us_per_op",
            "writes_per_op",
        ] {
            assert!(r["io"].get(f).is_some());
        }
        assert_eq!(r["wrong"], 0);
        assert_eq!(r["profile"], "hdd");
        assert_eq!(r["dataset"], "k");
    }
    // A zone map reads exactly one page per lookup.
    let zl = lines
        .iter()
        .find(|r| r["index"] == "zonemap" && r["workload"] == "lookup")
        .unwrap();
    assert_eq!(zl["io"]["pages_per_op"], 1.0);
}

#[test]
fn demo_runs_the_store_beside_the_btree() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("demo.jsonl");
    let out = ok(&[
        "demo",
        "--n",
        "20000",
        "--ops",
        "400",
        "--dataset",
        "fb-like",
        "--dir",
        p(&tmp.path().join("d")),
        "--json",
        p(&json),
    ]);
    assert!(out.contains("ycsb-balanced"), "{out}");
    let recs: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for w in ["ycsb-write-only", "ycsb-balanced"] {
        let kinds: Vec<&str> = recs
            .iter()
            .filter(|r| r["workload"] == w)
            .map(|r| r["index"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["btree", "db"], "{w}");
    }
    assert!(recs.iter().all(|r| r["wrong"] == 0));
}

/// `strata build --index INDEX --data DATA --out OUT`.
fn build_args<'a>(index: &'a str, data: &'a Path, out: &'a Path) -> [&'a str; 7] {
    ["build", "--index", index, "--data", p(data), "--out", p(out)]
}

/// Issue 16, failure 7: an unknown parameter is refused before the key file
/// is read or anything is written; the message names the parameter and the
/// output directory is not created. (The key file here does not even exist:
/// the spec is checked first.)
#[test]
fn a_bad_index_spec_fails_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    ok(&["gen", "--dist", "uniform", "--n", "30000", "--out", p(&keys)]);
    let out = tmp.path().join("idx");
    let e = fail(&build_args("pgm:eps=64", &keys, &out));
    assert!(e.contains("eps") && e.contains("unknown parameter"), "{e}");
    assert!(!out.exists(), "a refused build left {}", out.display());
    let missing = tmp.path().join("missing.keys");
    let e = fail(&build_args("pgm:eps=64", &missing, &out));
    assert!(e.contains("eps"), "the spec is checked before the key file: {e}");
    let e = fail(&build_args("btree:fill=0", &keys, &out));
    assert!(e.contains("fill"), "{e}");
    assert!(!out.exists());
    // An output path under a file: refused before the keys are read.
    let e = fail(&build_args("pgm", &missing, &keys.join("idx")));
    assert!(e.contains("is not a directory"), "{e}");
    // Keys out of order halfway: the error names the key file, and the
    // directory the build created is gone again.
    let mut ks: Vec<u64> = (0..10_000).collect();
    ks[5000] = 3;
    write_raw_keys(&keys, ks.len() as u64, &ks);
    let e = fail(&build_args("pgm", &keys, &out));
    assert!(e.contains("position 5000") && e.contains(p(&keys)), "{e}");
    assert!(!out.exists());
    // A previous index at the path is left complete by a refused build.
    let good: Vec<u64> = (0..10_000).map(|i| i * 2).collect();
    write_raw_keys(&keys, good.len() as u64, &good);
    ok(&build_args("pgm", &keys, &out));
    fail(&build_args("pgm:eps=64", &keys, &out));
    fail(&build_args("pgm", &missing, &out));
    assert_eq!(ok(&["get", p(&out), "4"]).trim(), "4\t2");
    ok(&["verify", p(&out)]);
}

/// Issue 16, failure 7: a key count that cannot be generated is a clear
/// error, not a panic (`capacity overflow`), and writes no file.
#[test]
fn gen_with_a_huge_n_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("k.keys");
    for n in [
        "4611686018427387904",
        "18446744073709551615",
        "1152921504606846976",
    ] {
        let e = fail(&["gen", "--dist", "uniform", "--n", n, "--out", p(&out)]);
        assert!(e.contains(&format!("cannot generate {n} keys")), "{e}");
        assert!(!e.contains("panicked") && !e.contains("overflow"), "{e}");
        assert!(!out.exists());
    }
}

/// A bulk load into a new store whose key file turns out unsorted halfway
/// leaves no directory; a missing key file creates none.
#[test]
fn a_failed_db_load_leaves_no_store_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let mut ks: Vec<u64> = (0..200_000).collect();
    ks[100_000] = 5;
    write_raw_keys(&keys, ks.len() as u64, &ks);
    let st = tmp.path().join("st");
    let e = fail(&["db", "load", p(&st), "--data", p(&keys)]);
    assert!(e.contains("position 100000") && e.contains(p(&keys)), "{e}");
    assert!(!st.exists(), "a failed load left {}", st.display());
    let missing = tmp.path().join("missing.keys");
    fail(&["db", "load", p(&st), "--data", p(&missing)]);
    assert!(!st.exists());
}

/// Issue 16, failure 2: a deleted newest log segment was accepted (`1 not
/// found`, exit 0); now the store is refused naming the segment.
#[test]
fn db_with_its_newest_log_segment_deleted_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let store = tmp.path().join("dw");
    ok(&["gen", "--dist", "uniform", "--n", "2000", "--out", p(&keys)]);
    ok(&["db", "load", p(&store), "--data", p(&keys)]);
    ok(&["db", "put", p(&store), "1", "111"]);
    assert_eq!(ok(&["db", "get", p(&store), "1"]), "1\t111\n");
    let stats = ok(&["db", "stats", p(&store)]);
    assert!(stats.contains("\"recovery_dropped_frames\": 0"), "{stats}");
    std::fs::remove_file(store.join("wal-000001.log")).unwrap();
    let err = fail(&["db", "get", p(&store), "1"]);
    assert!(err.contains("wal-000001.log") && err.contains("missing"), "{err}");
    fail(&["db", "put", p(&store), "2", "222"]);
}

/// Issue 16, failure 4: a flipped byte in the last complete frame of the
/// newest log segment was taken for a torn tail and dropped silently; now
/// `strata db stats` counts it and `strata verify` on the store fails naming
/// the segment and the byte offset (a healthy store verifies).
#[test]
fn a_dropped_log_frame_is_reported_by_stats_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let store = tmp.path().join("dz");
    ok(&["gen", "--dist", "uniform", "--n", "2000", "--out", p(&keys)]);
    ok(&["db", "load", p(&store), "--data", p(&keys)]);
    ok(&["db", "put", p(&store), "1", "111"]);
    let v = ok(&["verify", p(&store)]);
    assert!(v.contains("\"ok\":true") && v.contains("\"records\":2001"), "{v}");
    let seg = store.join("wal-000001.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() - 3;
    bytes[at] ^= 0x5a;
    std::fs::write(&seg, &bytes).unwrap();
    let stats = ok(&["db", "stats", p(&store)]);
    assert!(stats.contains("\"recovery_dropped_frames\": 1"), "{stats}");
    let e = fail(&["verify", p(&store)]);
    assert!(e.contains("wal-000001.log") && e.contains("byte offset"), "{e}");
}

/// Peak resident bytes of `strata ARGS` (the child's own rusage).
// The child is reaped by `wait4`, which also gives its rusage.
#[allow(clippy::zombie_processes)]
fn peak_rss_of(args: &[&str]) -> u64 {
    let child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .arg("--quiet")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run strata");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data filled by the kernel; `pid` is our child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "strata {args:?} failed"
    );
    usage.ru_maxrss as u64 * 1024
}

#[test]
fn build_streams_the_key_file() {
    // 3M keys: 24 MB of keys, 48 MB as records in memory. The kinds that
    // stream their build hold a chunk of them at a time; the others read
    // them all (shown by the updatable `fiting`). The zero-interval kinds
    // hold buffers of a size close to this file's keys: their heap is
    // checked on 8M keys in tests/build_memory.rs.
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("k.keys");
    ok(&["gen", "--dist", "osm-like", "--n", "3000000", "--out", p(&data)]);
    let mut peaks = Vec::new();
    for kind in [
        "btree",
        "zonemap",
        "gap-zonemap-d",
        "btree-static",
        "pgm",
        "pgm:sample=128,epsilon=2",
        "rmi",
        "fiting-static",
        "fiting",
    ] {
        let out = tmp.path().join(kind.replace([':', ',', '='], "_"));
        // One model thread: the parallel first pass of pgm holds up to 24 MiB
        // of partitions in flight (src/index/layered/segment.rs), as much as
        // this file's keys; one thread streams through the plain pass.
        let peak = peak_rss_of(&[
            "build",
            "--index",
            kind,
            "--data",
            p(&data),
            "--out",
            p(&out),
            "--threads",
            "1",
        ]);
        peaks.push((kind, peak));
        std::fs::remove_dir_all(&out).unwrap();
    }
    for &(kind, peak) in &peaks {
        if kind == "fiting" {
            assert!(peak > 30 << 20, "fiting reads every key: {peaks:?}");
        } else {
            // About 10 MiB of program and 8 MiB of chunks in flight.
            assert!(peak < 24 << 20, "{kind} holds its keys: {peaks:?}");
        }
    }
}
