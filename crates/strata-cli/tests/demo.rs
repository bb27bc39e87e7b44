//! `strata demo` as a new user meets it: a legend, aligned tables with a
//! verdict each, progress lines when stderr is not a terminal, where its data
//! is, and `--clean`.

use std::path::Path;
use std::process::Command;

fn strata(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("run strata");
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).expect("utf-8 output"),
        String::from_utf8(out.stderr).expect("utf-8 errors"),
    );
    assert!(out.status.success(), "strata {args:?} failed: {stderr}");
    (stdout, stderr)
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// The cells of a table line with their start and end (in characters):
/// cells are separated by two spaces or more, and a header's words by one.
fn cells(line: &str) -> Vec<(usize, usize, String)> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == ' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && !(chars[i] == ' ' && chars.get(i + 1).is_none_or(|&c| c == ' ')) {
            i += 1;
        }
        out.push((start, i, chars[start..i].iter().collect()));
    }
    out
}

/// The tables of the demo's output: header, then rows up to the verdict.
fn tables(out: &str) -> Vec<(Vec<&str>, &str)> {
    let lines: Vec<&str> = out.lines().collect();
    let mut tables = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("index ") {
            assert!(
                lines[i + 1].chars().all(|c| c == '-'),
                "rule under the header: {out}"
            );
            let mut rows = vec![*l];
            let mut j = i + 2;
            while !lines[j].starts_with("verdict: ") {
                rows.push(lines[j]);
                j += 1;
            }
            tables.push((rows, lines[j]));
        }
    }
    tables
}

#[test]
fn the_demo_explains_itself_and_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let (out, err) = strata(&[
        "demo",
        "-n",
        "20000",
        "--ops",
        "300",
        "--dataset",
        "fb-like",
        "--dir",
        p(&dir),
    ]);

    // The legend says what every column means.
    for term in [
        "kops/s",
        "ratio",
        "pages",
        "reads",
        "model µs",
        "mem MiB",
        "bits/key",
        "wrong",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("  {term} "))),
            "no legend entry for {term:?}: {out}"
        );
    }

    // Two tables (lookups, then writes), each with its verdict.
    let tables = tables(&out);
    assert_eq!(tables.len(), 2, "{out}");
    for (rows, verdict) in &tables {
        let header = cells(rows[0]);
        let names: Vec<&str> = header.iter().map(|c| c.2.as_str()).collect();
        assert_eq!(
            names,
            [
                "index",
                "workload",
                "kops/s",
                "ratio",
                "p50 µs",
                "p99 µs",
                "pages",
                "reads",
                "model µs",
                "mem MiB",
                "bits/key",
                "wrong"
            ],
            "{out}"
        );
        // Every row's columns at the header's offsets: names start under
        // their header, numbers end under theirs; no cell is cut.
        // The kinds with the highest kops/s as shown (one decimal: maybe several).
        let mut fastest: (Vec<String>, f64) = (Vec::new(), f64::MIN);
        for row in &rows[1..] {
            let c = cells(row);
            assert_eq!(c.len(), header.len(), "{row:?} in\n{out}");
            for (k, (cell, head)) in c.iter().zip(&header).enumerate() {
                if k < 2 {
                    assert_eq!(cell.0, head.0, "column {} of {row:?} in\n{out}", head.2);
                } else {
                    assert_eq!(cell.1, head.1, "column {} of {row:?} in\n{out}", head.2);
                }
                assert!(!cell.2.contains('…'), "{row:?}");
            }
            let kops: f64 = c[2].2.parse().unwrap();
            if kops > fastest.1 {
                fastest = (vec![c[0].2.clone()], kops);
            } else if kops == fastest.1 {
                fastest.0.push(c[0].2.clone());
            }
            assert_eq!(c[11].2, "0", "wrong answers: {row:?}");
        }
        // The verdict is one line computed from this table: it names the
        // baseline, and the fastest kind in a table of many kinds and one workload.
        let base = cells(rows[1])[0].2.clone();
        assert!(verdict.contains(&format!("against {base}")), "{verdict}");
        let one_workload = rows[1..].iter().all(|r| cells(r)[1].2 == cells(rows[1])[1].2);
        if one_workload && rows.len() > 3 {
            assert!(
                fastest.0.iter().any(|f| verdict.contains(&format!(" {f} ("))),
                "fastest {:?} not in {verdict}",
                fastest.0
            );
        }
    }
    assert!(
        out.contains("air:memory_budget=1M,profile=nvme "),
        "spec in full: {out}"
    );

    // Progress: stderr is a pipe here, so a line per phase and per run.
    let runs = err
        .lines()
        .filter(|l| l.starts_with('[') && l.contains(" ran in "))
        .count();
    assert_eq!(runs, 15 + 4, "a line per run: {err}");

    // Where the data is, how big, and how to remove it.
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("Demo data: ")
            && last.contains(&format!("in {}/", dir.display()))
            && last.contains("--clean"),
        "{last}"
    );
    assert!(dir.join("fb-like-20000.keys").exists());

    // --clean removes it all; a file the demo did not write stays.
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let (out, _) = strata(&["demo", "--clean", "--dir", p(&dir)]);
    assert!(out.contains("notes.txt"), "{out}");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["notes.txt"]);
    std::fs::remove_file(dir.join("notes.txt")).unwrap();
    strata(&["demo", "--clean", "--dir", p(&dir)]);
    assert!(!dir.exists(), "--clean leaves nothing");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn quiet_means_no_progress_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let (out, err) = strata(&[
        "demo",
        "--quiet",
        "-n",
        "5000",
        "--ops",
        "50",
        "--dataset",
        "osm-like",
        "--dir",
        p(&dir),
    ]);
    assert!(err.is_empty(), "{err}");
    assert_eq!(out.lines().filter(|l| l.starts_with("verdict: ")).count(), 2);
    strata(&["demo", "--clean", "--dir", p(&dir)]);
    assert!(!dir.exists());
}
