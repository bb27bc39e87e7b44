//! `strata lsm ...`: every subcommand on a real directory, text and hex keys,
//! loads from `key<TAB>value` files and SOSD key files, errors.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap()
}

fn strata(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "strata {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The one-line error of a command that must fail.
fn fails(args: &[&str]) -> String {
    let out = run(args);
    assert!(!out.status.success(), "strata {args:?} succeeded");
    let e = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        e.trim_end().lines().count(),
        1,
        "strata {args:?}: not one line: {e}"
    );
    e
}

#[test]
fn lsm_help_lists_every_subcommand() {
    let h = strata(&["lsm", "--help"]);
    for sub in [
        "load", "put", "get", "delete", "scan", "stats", "compact", "verify", "stress",
    ] {
        assert!(
            h.lines().any(|l| l.trim_start().starts_with(sub)),
            "{sub} missing from:\n{h}"
        );
    }
}

#[test]
fn text_keys_put_get_delete_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let tsv = tmp.path().join("in.tsv");
    let mut lines = String::new();
    for i in 0..3000 {
        lines.push_str(&format!("user:{i:05}\tvalue {i}\n"));
    }
    std::fs::write(&tsv, lines).unwrap();
    let small = ["--memory", "256K", "--index", "fp", "--boundary", "32"];
    let with = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        v.extend(small.iter().map(|a| a.to_string()));
        v
    };
    let call = |args: &[&str]| {
        let v = with(args);
        strata(&v.iter().map(String::as_str).collect::<Vec<_>>())
    };
    assert_eq!(
        call(&["lsm", "load", s, tsv.to_str().unwrap()]),
        "loaded 3000 records\n"
    );
    assert_eq!(call(&["lsm", "get", s, "user:00042"]), "user:00042\tvalue 42\n");
    assert_eq!(call(&["lsm", "get", s, "nobody"]), "nobody\tnot found\n");
    call(&["lsm", "put", s, "user:00042", "new value"]);
    call(&["lsm", "put", s, "héllo", "wörld"]);
    call(&["lsm", "delete", s, "user:00043"]);
    assert_eq!(call(&["lsm", "get", s, "user:00042"]), "user:00042\tnew value\n");
    assert_eq!(call(&["lsm", "get", s, "héllo"]), "héllo\twörld\n");
    assert_eq!(
        call(&["lsm", "scan", s, "--from", "user:00041", "--limit", "3"]),
        "user:00041\tvalue 41\nuser:00042\tnew value\nuser:00044\tvalue 44\n"
    );
    // No --from: from the smallest key; no --limit: to the end.
    let all = call(&["lsm", "scan", s]);
    assert_eq!(all.lines().count(), 3000);
    // Byte order: "h" (0x68) before "u" (0x75).
    assert!(all.starts_with("héllo\twörld\nuser:00000\tvalue 0\n"), "{all}");
    assert!(all.ends_with("user:02999\tvalue 2999\n"));
    let st: serde_json::Value = serde_json::from_str(&call(&["lsm", "stats", s])).unwrap();
    assert!(st["levels"].as_array().is_some_and(|l| !l.is_empty()), "{st}");
    assert!(call(&["lsm", "compact", s]).starts_with("compacted"));
    call(&["lsm", "verify", s]);
    assert_eq!(call(&["lsm", "scan", s]), all, "compaction changed the contents");
}

#[test]
fn hex_keys_and_sosd_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let keys = tmp.path().join("keys.sosd");
    let k = keys.to_str().unwrap();
    strata::format::write_keys(&keys, &[5, 256, 1 << 40]).unwrap();
    assert_eq!(strata(&["lsm", "load", s, "--keys", k]), "loaded 3 records\n");
    // Keys 8 bytes big-endian, values their ranks.
    assert_eq!(
        strata(&["lsm", "get", s, "--hex", "0000000000000100"]),
        "0000000000000100\t0000000000000001\n"
    );
    assert_eq!(
        strata(&["lsm", "scan", s, "--hex", "--limit", "1"]),
        "0000000000000005\t0000000000000000\n"
    );
    // Bytes that are not UTF-8, a tab and an empty value, in hex.
    strata(&["lsm", "put", s, "--hex", "ff09fe", ""]);
    assert_eq!(strata(&["lsm", "get", s, "--hex", "ff09fe"]), "ff09fe\t\n");
    // The same key in text output: escaped.
    assert_eq!(
        strata(&["lsm", "scan", s, "--from", "\u{7f}"]),
        "\\xff\\t\\xfe\t\n"
    );
    let tsv = tmp.path().join("hex.tsv");
    std::fs::write(&tsv, "00\t01\n0a0b\t\n").unwrap();
    assert_eq!(
        strata(&["lsm", "load", s, "--hex", tsv.to_str().unwrap()]),
        "loaded 2 records\n"
    );
    assert_eq!(strata(&["lsm", "get", s, "--hex", "0a0b"]), "0a0b\t\n");
}

#[test]
fn errors_are_one_line_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    // Read-only commands never create a store.
    let e = fails(&["lsm", "get", s, "k"]);
    assert!(e.contains("no store"), "{e}");
    assert!(!store.exists());
    strata(&["lsm", "put", s, "a", "1"]);
    // A bad line late in the file: nothing of the file is written.
    let tsv = tmp.path().join("bad.tsv");
    std::fs::write(&tsv, "b\t2\nc\t3\nno tab here\n").unwrap();
    let e = fails(&["lsm", "load", s, tsv.to_str().unwrap()]);
    assert!(e.contains(":3:"), "the error names the line: {e}");
    assert_eq!(strata(&["lsm", "get", s, "b"]), "b\tnot found\n");
    // A key over 64 KiB is refused by the check pass.
    std::fs::write(&tsv, format!("d\t4\n{}\tv\n", "k".repeat(70_000))).unwrap();
    fails(&["lsm", "load", s, tsv.to_str().unwrap()]);
    assert_eq!(strata(&["lsm", "get", s, "d"]), "d\tnot found\n");
    fails(&["lsm", "get", s, "--hex", "abc"]);
    fails(&["lsm", "put", s, "k", "v", "--sync", "sometimes"]);
    fails(&["lsm", "put", s, "k", "v", "--memory", "lots"]);
    fails(&["lsm", "put", s, "k", "v", "--index", "nosuch"]);
    assert_eq!(strata(&["lsm", "get", s, "a"]), "a\t1\n");
}

#[test]
fn stress_prints_begin_and_ack_pairs() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let out = strata(&[
        "lsm", "stress", s, "--ops", "300", "--keys", "50", "--memory", "256K",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 600);
    for pair in lines.chunks(2) {
        let (b, a) = (pair[0], pair[1]);
        assert!(b.starts_with("begin "), "{b}");
        assert_eq!(a.strip_prefix("ack "), b.strip_prefix("begin "), "{pair:?}");
        assert_eq!(b.split(' ').count(), 4, "{b}");
    }
    // The last write of each key is what the store holds.
    let mut last = std::collections::BTreeMap::new();
    for l in lines.iter().filter(|l| l.starts_with("ack ")) {
        let f: Vec<&str> = l.split(' ').collect();
        last.insert(f[2].to_string(), (f[1] == "put").then(|| f[3].to_string()));
    }
    for (k, v) in last.iter().take(20) {
        let got = strata(&["lsm", "get", s, "--hex", k]);
        let want = match v.as_deref() {
            Some("=") => format!("{k}\t\n"),
            Some(v) => format!("{k}\t{v}\n"),
            None => format!("{k}\tnot found\n"),
        };
        assert_eq!(got, want);
    }
}

/// A SOSD key file in `dir` of 20,000 keys 7919 apart, and the keys.
fn spaced_keys(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u64>) {
    let keys = dir.join("keys.sosd");
    let ks: Vec<u64> = (0..20_000u64).map(|i| i * 7919 + 3).collect();
    strata::format::write_keys(&keys, &ks).unwrap();
    (keys, ks)
}

/// `--opts` passes further store options: after `compact`, one table per
/// level below L0 under `granularity=level` (several at `table` granularity
/// with the same small tables), per-level index bytes in `stats`; a bad
/// option is an error.
#[test]
fn granularity_level_through_opts() {
    let tmp = tempfile::tempdir().unwrap();
    let (keys, _) = spaced_keys(tmp.path());
    let k = keys.to_str().unwrap();
    let small = "write_buffer=16k,target_file=8k,l1=32k,ratio=4,background=false";
    let most_per_level = |gran: &str| {
        let store = tmp.path().join(gran);
        let s = store.to_str().unwrap();
        let opts = format!("{small},granularity={gran}");
        strata(&["lsm", "load", s, "--keys", k, "--sync", "never", "--opts", &opts]);
        // The load is one write batch, so one L0 table: compact it down.
        strata(&["lsm", "compact", s, "--opts", &opts]);
        strata(&["lsm", "verify", s]);
        let st: serde_json::Value = serde_json::from_str(&strata(&["lsm", "stats", s])).unwrap();
        let levels = st["levels"].as_array().unwrap();
        let index: u64 = levels.iter().map(|l| l["index_bytes"].as_u64().unwrap()).sum();
        assert_eq!(index, st["index_bytes"].as_u64().unwrap());
        levels[1..]
            .iter()
            .map(|l| l["files"].as_u64().unwrap())
            .max()
            .unwrap()
    };
    assert!(most_per_level("table") > 1);
    assert_eq!(most_per_level("level"), 1);
    let bad = tmp.path().join("bad");
    let e = fails(&[
        "lsm",
        "load",
        bad.to_str().unwrap(),
        "--keys",
        k,
        "--opts",
        "granularity=file",
    ]);
    assert!(e.contains("granularity"), "{e}");
}

/// `--opts pin=false` (an open-time option, given to every command): the
/// same answers, and `stats` reports no resident index or filter bytes.
#[test]
fn unpinned_tables_through_opts() {
    let tmp = tempfile::tempdir().unwrap();
    let (keys, ks) = spaced_keys(tmp.path());
    let k = keys.to_str().unwrap();
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let opts = "write_buffer=16k,target_file=8k,background=false,pin=false";
    strata(&["lsm", "load", s, "--keys", k, "--sync", "never", "--opts", opts]);
    strata(&["lsm", "compact", s, "--opts", opts]);
    strata(&["lsm", "verify", s, "--opts", opts]);
    let stats = |o: &str| -> serde_json::Value {
        serde_json::from_str(&strata(&["lsm", "stats", s, "--opts", o])).unwrap()
    };
    let lazy = stats(opts);
    assert_eq!(
        (lazy["index_bytes"].as_u64(), lazy["filter_bytes"].as_u64()),
        (Some(0), Some(0)),
        "{lazy}"
    );
    let pinned = stats("pin=true");
    assert!(pinned["index_bytes"].as_u64().unwrap() > 0, "{pinned}");
    let key = format!("{:016x}", ks[777]);
    let get = |o: &str| strata(&["lsm", "get", s, "--hex", &key, "--opts", o]);
    assert_eq!(get(opts), format!("{key}\t{:016x}\n", 777));
    assert_eq!(get("pin=true"), get(opts));
    let e = fails(&["lsm", "stats", s, "--opts", "pin=maybe"]);
    assert!(e.contains("pin"), "{e}");
}
