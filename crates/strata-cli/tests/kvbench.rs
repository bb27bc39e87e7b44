//! `strata kvbench` as a user runs it: JSON Lines to a file, the table on
//! stdout, clear one-line errors.

use std::process::{Command, Output};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("kvbench")
        .args(args)
        .arg("--quiet")
        .output()
        .expect("run strata")
}

#[test]
fn kvbench_smoke_writes_json_lines_and_a_table() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("kv.jsonl");
    let work = tmp.path().join("work");
    let out = strata(&[
        "--engines",
        "db,lsm:index=pgm,boundary=16",
        "--workloads",
        "fillrandom,readrandom,readmissing,seekrandom,ycsb-a",
        "--num",
        "3000",
        "--reads",
        "500",
        "--key-size",
        "8",
        "--value-size",
        "8",
        "--memory",
        "512K",
        "--repeats",
        "2",
        "--work-dir",
        work.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(table.lines().count(), 2 + 2 * 5, "{table}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 20, "2 engines x 5 workloads x 2 repeats");
    let engines: Vec<&str> = lines.iter().map(|r| r["index"].as_str().unwrap()).collect();
    // Interleaved: each repeat runs db's workloads, then lsm's.
    assert_eq!(
        engines[..10],
        ["db"; 5].iter().chain(&["lsm"; 5]).copied().collect::<Vec<_>>()[..]
    );
    for r in &lines {
        assert_eq!(r["wrong"], 0);
        assert_eq!(r["dataset"], "kv-8-8");
    }
    let found = |w: &str| {
        lines
            .iter()
            .filter(|r| r["workload"] == w)
            .map(|r| r["counts"]["found"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(found("readrandom"), [500; 4]);
    assert_eq!(found("readmissing"), [0; 4]);
    // The LSM store's records carry its counters (the training share of
    // scripts/lsm-experiments.sh): the fill flushed and trained tables.
    for r in lines
        .iter()
        .filter(|r| r["index"] == "lsm" && r["workload"] == "fillrandom")
    {
        let st = &r["config"]["stats"];
        assert!(st["flushes"].as_u64().unwrap() > 0, "{st}");
        assert!(
            st["train_nanos"].as_u64().is_some() && st["flush_nanos"].as_u64().is_some(),
            "{st}"
        );
    }
    // The stores are removed after each engine's repeat.
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

#[test]
fn kvbench_errors_are_one_clear_line() {
    for (args, want) in [
        (
            vec!["--engines", "db", "--key-size", "16"],
            "8-byte keys and values",
        ),
        (
            vec!["--engines", "db", "--workloads", "readall"],
            "unknown kvbench workload",
        ),
        (vec!["--engines", "nosuch"], "unknown engine"),
        (vec!["--engines", "lsm:index=nosuch"], "nosuch"),
        (vec!["--key-size", "12"], "--key-size must be 8, 16 or 24"),
    ] {
        let out = strata(&[&args[..], &["--num", "100"]].concat());
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
