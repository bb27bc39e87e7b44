//! `strata kvbench` as a user runs it: JSON Lines to a file, the table on
//! stdout, clear one-line errors.

use std::process::{Command, Output};

fn strata(args: &[&str]) -> Output {
    strata_cmd("kvbench", args)
}

/// `strata CMD ARGS --quiet`.
fn strata_cmd(cmd: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg(cmd)
        .args(args)
        .arg("--quiet")
        .output()
        .expect("run strata")
}

/// The records a run that must succeed wrote to `json`.
fn json_lines(out: &Output, json: &std::path::Path) -> Vec<serde_json::Value> {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The records of a run with `args` at a 512 KiB budget, its stores in
/// `dir/work` and its records in `dir/kv.jsonl`.
fn records_at_512k(args: &[&str], dir: &std::path::Path) -> Vec<serde_json::Value> {
    let (json, work) = (dir.join("kv.jsonl"), dir.join("work"));
    let mut all = args.to_vec();
    all.extend(["--memory", "512K", "--work-dir", work.to_str().unwrap()]);
    all.extend(["--json", json.to_str().unwrap()]);
    json_lines(&strata(&all), &json)
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
    let table = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(table.lines().count(), 2 + 2 * 5, "{table}");
    let lines = json_lines(&out, &json);
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

#[test]
fn text_keys_from_gen_drive_every_kind_of_workload() {
    let tmp = tempfile::tempdir().unwrap();
    let urls = tmp.path().join("urls.txt");
    let again = tmp.path().join("again.txt");
    for out in [&urls, &again] {
        let o = strata_cmd(
            "gen",
            &[
                "--dist",
                "urls",
                "--n",
                "3000",
                "--seed",
                "3",
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let text = std::fs::read_to_string(&urls).unwrap();
    assert_eq!(text, std::fs::read_to_string(&again).unwrap(), "deterministic");
    let keys: Vec<&str> = text.lines().collect();
    assert_eq!(keys.len(), 3000);
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted, distinct");
    assert!(keys.iter().all(|k| k.starts_with("https://www.")));

    let work = tmp.path().join("work");
    let lines = records_at_512k(
        &[
            "--engines",
            "lsm:index=pgm-cpr,boundary=16",
            "--workloads",
            "fillrandom,readrandom,readmissing,seekrandom,ycsb-e",
            "--key-file",
            urls.to_str().unwrap(),
            "--reads",
            "300",
            "--scan-length",
            "99",
        ],
        tmp.path(),
    );
    assert_eq!(lines.len(), 5);
    for r in &lines {
        assert_eq!(r["wrong"], 0, "{r}");
        assert_eq!(r["dataset"], "kv-urls-100");
        assert_eq!(r["n"], 3000);
        assert_eq!(r["config"]["key_file"], "urls");
    }
    assert_eq!(lines[0]["counts"]["puts"], 3000);
    assert_eq!(lines[1]["counts"]["found"], 300);
    assert_eq!(lines[2]["counts"]["found"], 0);
    assert_eq!(lines[3]["config"]["scan_length"], 99);
    assert!(lines[3]["counts"]["scanned"].as_u64().unwrap() > 80 * 300);
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

#[test]
fn bad_key_files_are_one_clear_line_and_leave_no_store() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let file = |name: &str, body: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_string()
    };
    let long = file("long.txt", &[b"a\n".to_vec(), vec![b'x'; 70_000]].concat());
    let words = file("words.txt", b"pear\napple\nfig\n");
    for (args, want) in [
        (
            vec!["--key-file".to_string(), file("empty-line.txt", b"a\n\nb\n")],
            "line 2 is empty",
        ),
        (
            vec!["--key-file".to_string(), long],
            "line 2: a key of 70000 bytes",
        ),
        (
            vec!["--key-file".to_string(), file("dup.txt", b"b\na\nb\n")],
            "lines 1 and 3",
        ),
        (vec!["--key-file".to_string(), file("none.txt", b"")], "no keys"),
        (
            vec![
                "--key-file".to_string(),
                tmp.path().join("missing.txt").to_str().unwrap().to_string(),
            ],
            "missing.txt",
        ),
        (
            vec![
                "--key-file".to_string(),
                words.clone(),
                "--engines".into(),
                "db".into(),
            ],
            "engine db",
        ),
        (
            vec!["--key-file".to_string(), words, "--num".into(), "5".into()],
            "cannot be used with",
        ),
    ] {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["--work-dir", work.to_str().unwrap()]);
        let out = strata(&all);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(want), "{args:?}: {err}");
        if !want.contains("cannot be used") {
            assert_eq!(err.trim().lines().count(), 1, "{err}");
        }
        let left = std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "{args:?}: a store was left behind");
    }
}

/// `lsm:pin=false`: the store's tables keep no index or filter resident
/// (the stats say 0 bytes of either) and every read finds its key.
#[test]
fn kvbench_lsm_with_unpinned_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = records_at_512k(
        &[
            "--engines",
            "lsm:index=fp,pin=false",
            "--workloads",
            "fillrandom,readrandom",
            "--num",
            "3000",
            "--reads",
            "300",
            "--key-size",
            "8",
            "--value-size",
            "8",
        ],
        tmp.path(),
    );
    assert_eq!(lines.len(), 2);
    for r in &lines {
        assert_eq!(r["wrong"], 0, "{r}");
        assert_eq!(r["config"]["pin_tables"], false, "{r}");
        let st = &r["config"]["stats"];
        assert_eq!(
            (st["index_bytes"].as_u64(), st["filter_bytes"].as_u64()),
            (Some(0), Some(0)),
            "{st}"
        );
    }
    assert_eq!(lines[1]["counts"]["found"], 300);
}
