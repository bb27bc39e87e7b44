//! `strata join` end to end: every algorithm agrees on count and checksum
//! over key files and index directories, the pairs file holds what the
//! count says, bad arguments are one clear error, nothing is left behind.

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

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn write_keys(path: &Path, keys: &[u64]) {
    let mut b = (keys.len() as u64).to_le_bytes().to_vec();
    for k in keys {
        b.extend_from_slice(&k.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

/// `count N` and `checksum X` of a join's output.
fn result(out: &str) -> (String, String) {
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
    };
    (field("count"), field("checksum"))
}

#[test]
fn every_algorithm_agrees_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let inner: Vec<u64> = (0..30_000u64).map(|i| i * 5 + 1).collect();
    let outer: Vec<u64> = (0..80_000u64).map(|i| (i * 7919) % 160_000).collect();
    let mut sorted = outer.clone();
    sorted.sort_unstable();
    let (i, o, os) = (
        tmp.path().join("i.keys"),
        tmp.path().join("o.keys"),
        tmp.path().join("os.keys"),
    );
    write_keys(&i, &inner);
    write_keys(&o, &outer);
    write_keys(&os, &sorted);
    let want_count = outer
        .iter()
        .filter(|k| *k % 5 == 1 && **k < 150_000)
        .count()
        .to_string();
    let mut seen = None;
    for algo in ["inlj:pgm", "inlj:btree", "inlj:gap-zonemap-d", "smj", "hash"] {
        for threads in ["1", "2"] {
            let out = ok(&[
                "join",
                "--outer",
                p(&os),
                "--inner",
                p(&i),
                "--algo",
                algo,
                "--buffers",
                "1M",
                "--threads",
                threads,
                "--spill-dir",
                p(&spill),
                "--no-direct",
            ]);
            let r = result(&out);
            assert_eq!(r.0, want_count, "{algo}");
            assert_eq!(seen.get_or_insert(r.clone()), &r, "{algo} threads={threads}");
            assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0, "{algo} left files");
        }
    }
    // Unsorted outer: the same count (other payloads: other checksum).
    let mut unsorted_seen = None;
    for algo in ["inlj:rs", "smj", "hash"] {
        let out = ok(&[
            "join",
            "--outer",
            p(&o),
            "--outer-unsorted",
            "--inner",
            p(&i),
            "--algo",
            algo,
            "--buffers",
            "1M",
            "--spill-dir",
            p(&spill),
            "--no-direct",
        ]);
        let r = result(&out);
        assert_eq!(r.0, want_count, "{algo}");
        assert_eq!(unsorted_seen.get_or_insert(r.clone()), &r, "{algo}");
    }
    // Both sides unsorted, sorted by learned partitioning (smj), the outer
    // one for inlj: the same output, partitions reported, nothing left.
    let iu = tmp.path().join("iu.keys");
    let mut shuffled = inner.clone();
    shuffled.reverse();
    write_keys(&iu, &shuffled);
    for (algo, inner_file, inner_flag) in [("smj", &iu, Some("--inner-unsorted")), ("inlj:pgm", &i, None)] {
        let json = tmp.path().join("learned.json");
        let mut args = vec![
            "join",
            "--outer",
            p(&o),
            "--outer-unsorted",
            "--inner",
            p(inner_file),
            "--algo",
            algo,
            "--buffers",
            "1M",
            "--sort",
            "learned",
            "--spill-dir",
            p(&spill),
            "--no-direct",
            "--json",
            p(&json),
        ];
        args.extend(inner_flag);
        let out = ok(&args);
        let r = result(&out);
        assert_eq!(r.0, want_count, "{algo} --sort learned");
        if algo == "inlj:pgm" {
            assert_eq!(unsorted_seen.as_ref(), Some(&r), "{algo} --sort learned");
        }
        assert!(out.contains("sort       learned: "), "{out}");
        let rec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(rec["sort"], "learned", "{rec}");
        assert!(rec["partitions"].as_u64().unwrap() >= 2, "{rec}");
        assert!(
            rec["spill_bytes_written"].as_u64().unwrap() >= 80_000 * 16,
            "{rec}"
        );
        assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0, "{algo} left files");
    }
    // An index directory as the inner relation, the pairs file and JSON.
    let idx = tmp.path().join("i.pgm");
    ok(&["build", "--data", p(&i), "--index", "pgm", "--out", p(&idx)]);
    let pairs = tmp.path().join("out.pairs");
    let json = tmp.path().join("r.json");
    let out = ok(&[
        "join",
        "--outer",
        p(&os),
        "--inner",
        p(&idx),
        "--algo",
        "inlj",
        "--out",
        p(&pairs),
        "--json",
        p(&json),
        "--no-direct",
        "--memory",
        "48M",
    ]);
    assert_eq!(Some(&result(&out)), seen.as_ref());
    let len = std::fs::metadata(&pairs).unwrap().len();
    assert_eq!(len, 40 + 24 * want_count.parse::<u64>().unwrap());
    let rec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(rec["count"].to_string(), want_count);
    assert!(rec["index_pages_read"].as_u64().unwrap() > 0, "{rec}");
    // --memory is the process's limit: the buffers get what the process
    // does not hold yet, and the peak stays within it.
    let (limit, buffers, peak) = (
        rec["memory_limit"].as_u64().unwrap(),
        rec["memory_budget"].as_u64().unwrap(),
        rec["peak_rss_bytes"].as_u64().unwrap(),
    );
    assert_eq!(limit, 48 << 20, "{rec}");
    assert!(
        buffers < limit - rec["rss_at_start_bytes"].as_u64().unwrap(),
        "{rec}"
    );
    assert!(peak > 0 && peak <= limit, "{rec}");
}

#[test]
fn bad_arguments_are_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let i = tmp.path().join("i.keys");
    let o = tmp.path().join("o.keys");
    write_keys(&i, &[1, 2, 3]);
    write_keys(&o, &[3, 1]);
    let fail = |args: &[&str], want: &str| {
        let out = strata(args);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    fail(
        &["join", "--outer", p(&o), "--inner", p(&i), "--algo", "nested"],
        "--algo must be",
    );
    fail(
        &["join", "--outer", p(&o), "--inner", p(&i), "--algo", "inlj"],
        "needs an index kind",
    );
    fail(
        &[
            "join",
            "--outer",
            p(&o),
            "--inner",
            p(&i),
            "--algo",
            "smj",
            "--sort",
            "quick",
        ],
        "--sort must be external or learned",
    );
    fail(
        &[
            "join",
            "--outer",
            p(&o),
            "--inner",
            p(&i),
            "--algo",
            "smj",
            "--memory",
            "10K",
        ],
        "at least",
    );
    // A limit the process itself already fills leaves nothing to the join.
    fail(
        &[
            "join",
            "--outer",
            p(&i),
            "--inner",
            p(&i),
            "--algo",
            "smj",
            "--memory",
            "6M",
        ],
        "raise the limit",
    );
    // The outer file is not sorted and was not declared so.
    fail(
        &["join", "--outer", p(&o), "--inner", p(&i), "--algo", "smj"],
        "is not sorted",
    );
    fail(
        &[
            "join",
            "--outer",
            p(&o),
            "--inner",
            p(&i),
            "--algo",
            "inlj:nosuch",
        ],
        "nosuch",
    );
    // A pairs file is never overwritten, and a failed join leaves none.
    let pairs = tmp.path().join("p.out");
    fail(
        &[
            "join",
            "--outer",
            p(&o),
            "--inner",
            p(&i),
            "--algo",
            "hash",
            "--out",
            p(&pairs),
        ],
        "is not sorted",
    );
    assert!(!pairs.exists());
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}
