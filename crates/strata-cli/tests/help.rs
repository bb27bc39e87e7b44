//! What a new user meets (issue 21): help texts that name what the parsers
//! accept, parameters listed with their defaults, options that agree with
//! each other, and commands that leave no files behind.

use std::path::Path;
use std::process::{Command, Output};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("run strata")
}

/// Stdout of a run that must succeed.
fn ok(args: &[&str]) -> String {
    let out = strata(args);
    assert!(
        out.status.success(),
        "strata {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Stderr of a run that must fail.
fn fail(args: &[&str]) -> String {
    let out = strata(args);
    assert!(!out.status.success(), "strata {args:?} should fail");
    String::from_utf8(out.stderr).expect("utf-8 error")
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// `--sync` of `db` and `lsm` and the kinds' `sync=` take `always` (Python's
/// word) and `every`, `never` and a period; help and errors name both words.
#[test]
fn sync_takes_always_and_every() {
    let tmp = tempfile::tempdir().unwrap();
    let st = tmp.path().join("st");
    for (i, sync) in ["always", "every", "never", "10", "10ms"].iter().enumerate() {
        ok(&["db", "put", p(&st), &i.to_string(), "7", "--sync", sync, "-q"]);
    }
    assert_eq!(ok(&["db", "get", p(&st), "4", "-q"]), "4\t7\n");
    let lsm = tmp.path().join("lsm");
    ok(&["lsm", "put", p(&lsm), "k", "v", "--sync", "every", "-q"]);
    for args in [
        vec!["db", "put", p(&st), "1", "2", "--sync", "sometimes"],
        vec!["lsm", "put", p(&lsm), "k", "v", "--sync", "sometimes"],
    ] {
        let e = fail(&args);
        for word in ["always", "every", "never", "milliseconds"] {
            assert!(e.contains(word), "{args:?}: {e}");
        }
    }
    for cmd in [["db", "put"], ["lsm", "put"]] {
        let help = ok(&[cmd[0], cmd[1], "--help"]);
        assert!(help.contains("always (or every"), "{cmd:?}: {help}");
    }
    // The kinds' `sync=`, the same words.
    let keys = tmp.path().join("k.keys");
    ok(&["gen", "--dist", "uniform", "--n", "2000", "--out", p(&keys), "-q"]);
    for spec in ["db:sync=every", "db:sync=always", "lsm:sync=every,memory=4M"] {
        let out = tmp.path().join(spec.replace([':', ',', '='], "-"));
        ok(&[
            "build",
            "--index",
            spec,
            "--data",
            p(&keys),
            "--out",
            p(&out),
            "-q",
        ]);
    }
    let e = fail(&[
        "build",
        "--index",
        "db:sync=sometimes",
        "--data",
        p(&keys),
        "--out",
        p(&tmp.path().join("bad")),
    ]);
    assert!(e.contains("always (or every)"), "{e}");
}

/// `scan` starts at key 0 without `--from`, as `db scan` does.
#[test]
fn scan_defaults_from_to_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let idx = tmp.path().join("idx");
    ok(&["gen", "--dist", "dense", "--n", "3000", "--out", p(&keys), "-q"]);
    ok(&[
        "build",
        "--index",
        "pgm",
        "--data",
        p(&keys),
        "--out",
        p(&idx),
        "-q",
    ]);
    let dense = ok(&["scan", p(&idx), "--count", "3"]);
    assert_eq!(dense, ok(&["scan", p(&idx), "--from", "0", "--count", "3"]));
    assert_eq!(dense.lines().count(), 3, "{dense}");
    assert!(dense.ends_with("\t2\n"), "ranks 0, 1, 2: {dense}");
    let st = tmp.path().join("st");
    ok(&["db", "load", p(&st), "--data", p(&keys), "-q"]);
    assert_eq!(ok(&["db", "scan", p(&st), "--count", "3"]), dense);
}

/// The ε keys of `analyze`'s `segments`, in the order printed.
fn eps_keys(analysis: &str) -> Vec<u64> {
    let seg = analysis.split("\"segments\"").nth(1).expect("a segments object");
    seg.lines()
        .filter_map(|l| l.trim().strip_prefix('"')?.split_once("\": {"))
        .map(|(k, _)| k.parse().expect("an integer key"))
        .collect()
}

/// `analyze --eps` takes several values after one flag (as its default
/// shows), or comma-separated, and prints ε in numeric order.
#[test]
fn analyze_takes_several_eps_and_prints_them_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    ok(&[
        "gen",
        "--dist",
        "fb-like",
        "--n",
        "20000",
        "--out",
        p(&keys),
        "-q",
    ]);
    let help = ok(&["analyze", "--help"]);
    assert!(help.contains("[default: 16 64 256 1024]"), "{help}");
    let default = ok(&["analyze", "--data", p(&keys), "-q"]);
    assert_eq!(eps_keys(&default), [16, 64, 256, 1024], "{default}");
    let spaced = ok(&["analyze", "--eps", "256", "16", "64", "--data", p(&keys), "-q"]);
    assert_eq!(eps_keys(&spaced), [16, 64, 256], "{spaced}");
    let commas = ok(&["analyze", "--data", p(&keys), "--eps", "64,16,256", "-q"]);
    assert_eq!(spaced, commas);
    // The counts are those of the default run.
    let v: serde_json::Value = serde_json::from_str(&spaced).unwrap();
    let d: serde_json::Value = serde_json::from_str(&default).unwrap();
    assert_eq!(v["segments"]["64"], d["segments"]["64"]);
    assert!(v["segments"]["16"]["pgm"].as_u64().unwrap() >= v["segments"]["256"]["pgm"].as_u64().unwrap());
    assert_eq!(v["n"], 20000);
}

/// The names in a directory, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `bench` builds in a temporary directory it removes: nothing new beside
/// the key file (it left a `k.keys.bench/` there), for a read-only and a
/// write workload; `--work-dir` keeps the given directory.
#[test]
fn bench_leaves_no_work_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let json = tmp.path().join("out.jsonl");
    ok(&[
        "gen",
        "--dist",
        "uniform",
        "--n",
        "20000",
        "--out",
        p(&keys),
        "-q",
    ]);
    let before = names(tmp.path());
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "--data",
            p(&keys),
            "--ops",
            "200",
            "--json",
            p(&json),
            "-q",
        ];
        args.extend_from_slice(extra);
        ok(&args);
        std::fs::remove_file(&json).unwrap();
    };
    let reads = ["--index", "btree", "--index", "pgm", "--workload", "lookup"];
    bench(&reads);
    assert_eq!(names(tmp.path()), before);
    bench(&[
        "--index",
        "btree",
        "--index",
        "db",
        "--workload",
        "ycsb-write-only",
    ]);
    assert_eq!(names(tmp.path()), before);
    // A failed run (a kind that cannot take writes) leaves nothing either.
    let e = fail(&[
        "bench",
        "--data",
        p(&keys),
        "--index",
        "pgm",
        "--workload",
        "ycsb-a",
        "--ops",
        "100",
        "-q",
    ]);
    assert!(e.starts_with("error: "), "{e}");
    assert_eq!(names(tmp.path()), before);
    let work = tmp.path().join("work");
    bench(&[&reads[..], &["--work-dir", p(&work)]].concat());
    assert!(!names(&work).is_empty(), "--work-dir is kept");
}

/// A refused `build` (bad spec, keys out of order) or store command (bad
/// options) creates no directory, not even the missing parents of `--out`.
#[test]
fn refused_commands_leave_no_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let mut raw = 3000u64.to_le_bytes().to_vec();
    for k in (0..3000u64).map(|i| if i == 1500 { 7 } else { i * 10 }) {
        raw.extend_from_slice(&k.to_le_bytes());
    }
    std::fs::write(&keys, raw).unwrap();
    let before = names(tmp.path());
    let out = tmp.path().join("a").join("b").join("idx");
    for spec in ["pgm", "pgm:eps=3", "db", "lsm:memory=4M", "db:memory=0"] {
        fail(&["build", "--index", spec, "--data", p(&keys), "--out", p(&out)]);
        assert_eq!(names(tmp.path()), before, "{spec}");
    }
    let st = tmp.path().join("s").join("t");
    for args in [
        vec!["db", "put", p(&st), "1", "2", "--sync", "0"],
        vec!["db", "put", p(&st), "1", "2", "--memory", "0"],
        vec!["db", "load", p(&st), "--data", p(&keys)],
        vec!["lsm", "put", p(&st), "k", "v", "--sync", "0"],
        vec!["lsm", "put", p(&st), "k", "v", "--opts", "ratio=1"],
    ] {
        fail(&args);
        assert_eq!(names(tmp.path()), before, "{args:?}");
    }
}

/// A JSON value as written in a spec.
fn spec_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `list --json` gives every kind's parameters with their defaults: each
/// parameter a build resolves is listed, and a spec that gives every
/// listed parameter its default builds the same configuration as the bare
/// kind; `list` prints the same.
#[test]
fn list_shows_every_parameter_with_its_default() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    ok(&["gen", "--dist", "fb-like", "--n", "3000", "--out", p(&keys), "-q"]);
    let l: serde_json::Value = serde_json::from_str(&ok(&["list", "--json"])).unwrap();
    let text = ok(&["list"]);
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    let every = names(&l["every_kind_params"]);
    assert_eq!(every, ["page"]);
    let bench = names(&l["bench_params"]);
    assert!(
        ["cache", "durable", "resident"]
            .iter()
            .all(|n| bench.iter().any(|b| b == n)),
        "{bench:?}"
    );
    let kinds = l["kinds"].as_array().unwrap();
    assert!(kinds.len() >= 20, "{}", kinds.len());
    for kind in kinds {
        let name = kind["name"].as_str().unwrap();
        let params = kind["params"].as_array().unwrap();
        let listed = names(&kind["params"]);
        assert!(
            text.contains(&format!("  {name} ")),
            "{name} not in `strata list`"
        );
        let out = tmp.path().join(format!("{name}-bare"));
        let bare: serde_json::Value = serde_json::from_str(&ok(&[
            "build",
            "--index",
            name,
            "--data",
            p(&keys),
            "--out",
            p(&out),
            "-q",
        ]))
        .unwrap();
        for resolved in bare["config"].as_object().unwrap().keys() {
            assert!(
                listed.contains(resolved) || every.contains(resolved),
                "{name} takes {resolved}, which `strata list --json` leaves out"
            );
        }
        let mut given = Vec::new();
        for param in params {
            let pname = param["name"].as_str().unwrap();
            assert!(!param["meaning"].as_str().unwrap().is_empty(), "{name}: {pname}");
            if !param["default"].is_null() {
                assert_eq!(param["default"], bare["config"][pname], "{name}: {pname}");
                given.push(format!("{pname}={}", spec_text(&param["default"])));
            }
            // The text listing shows the parameter under its kind.
            assert!(text.contains(&format!("      {pname}")), "{name}: {pname}");
        }
        if given.is_empty() {
            continue;
        }
        let spec = format!("{name}:{}", given.join(","));
        let out = tmp.path().join(format!("{name}-defaults"));
        let full: serde_json::Value = serde_json::from_str(&ok(&[
            "build",
            "--index",
            &spec,
            "--data",
            p(&keys),
            "--out",
            p(&out),
            "-q",
        ]))
        .unwrap();
        assert_eq!(full["config"], bare["config"], "{spec}");
    }
    // What issue 21 found missing.
    let of = |kind: &str| names(&kinds.iter().find(|k| k["name"] == kind).unwrap()["params"]);
    assert!(of("btree").contains(&"fill".to_string()));
    for p in ["insert", "static", "sync", "trigger", "memory"] {
        assert!(of("db").contains(&p.to_string()), "db {p}");
    }
    for p in ["index", "boundary", "memory", "bloom", "granularity"] {
        assert!(of("lsm").contains(&p.to_string()), "lsm {p}");
    }
    for kind in ["pgm", "pgm-disk", "rs", "fiting-static", "fiting", "dpgm"] {
        assert!(of(kind).contains(&"epsilon".to_string()), "{kind}");
    }
    assert!(text.contains("fill=100") && text.contains("insert=checked") && text.contains("page=4096"));
}

/// `bench --help` lists every workload the parser takes (it left out
/// ycsb-read-only, ycsb-write-only and ycsb-balanced), and the value names
/// match the flags.
#[test]
fn bench_help_lists_every_workload() {
    let l: serde_json::Value = serde_json::from_str(&ok(&["list", "--json"])).unwrap();
    let workloads: Vec<&str> = l["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    for w in [
        "ycsb-read-only",
        "ycsb-write-only",
        "ycsb-balanced",
        "ycsb-a",
        "lookup",
    ] {
        assert!(workloads.contains(&w), "{w}");
    }
    let long = ok(&["bench", "--help"]);
    let short = ok(&["bench", "-h"]);
    for w in &workloads {
        assert!(long.contains(&format!("- {w}:")), "{w} not in bench --help");
        assert!(
            short.contains(&format!(" {w},")) || short.contains(&format!(" {w}]")),
            "{w} not in bench -h"
        );
    }
    assert!(
        short.contains("--index <INDEX>") && short.contains("--workload <WORKLOAD>"),
        "{short}"
    );
    let e = fail(&["bench", "--data", "k", "--index", "pgm", "--workload", "ycsb-z"]);
    assert!(e.contains("ycsb-write-only"), "{e}");
}

/// `kvbench --help` lists the workloads from the parser's own table
/// (`KvWorkload::ALL`, which `FromStr` searches): every name the parser
/// takes is in the help, every name in the help is taken, and the value name
/// matches the flag.
#[test]
fn kvbench_help_lists_every_workload() {
    use strata_bench::kv::KvWorkload;
    let accepted: Vec<&str> = KvWorkload::ALL.iter().map(|w| w.name()).collect();
    let long = ok(&["kvbench", "--help"]);
    // The `- name: summary` lines of the --workloads section.
    let listed: Vec<&str> = long
        .split("--workloads <WORKLOAD>")
        .nth(1)
        .expect("a --workloads section")
        .split("[default:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- ")?.split_once(':').map(|(n, _)| n))
        .collect();
    assert_eq!(listed, accepted, "kvbench --help and the parser disagree");
    for w in KvWorkload::ALL {
        assert_eq!(w.name().parse::<KvWorkload>().unwrap(), w);
    }
    let short = ok(&["kvbench", "-h"]);
    for w in &accepted {
        assert!(
            short.contains(&format!(" {w},")) || short.contains(&format!(" {w}]")),
            "{w} not in kvbench -h"
        );
    }
    // Every listed name runs (comma-separated, spaces allowed).
    let tmp = tempfile::tempdir().unwrap();
    ok(&[
        "kvbench",
        "--workloads",
        &accepted.join(", "),
        "--num",
        "300",
        "--reads",
        "50",
        "--memory",
        "1M",
        "--work-dir",
        p(tmp.path()),
        "--json",
        p(&tmp.path().join("kv.jsonl")),
        "-q",
    ]);
    let e = fail(&["kvbench", "--workloads", "fillrandom,readall", "--num", "10"]);
    assert!(
        e.contains("unknown kvbench workload \"readall\"") && e.contains("ycsb-f"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

/// `bench --before-repeat CMD` runs CMD before every repeat of every
/// workload, with the workload and repeat in its environment, its stdout
/// kept off the JSON Lines on stdout; a failing CMD stops the bench.
#[test]
fn bench_runs_a_command_before_every_repeat() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    let log = tmp.path().join("hook.log");
    ok(&["gen", "--dist", "uniform", "--n", "5000", "--out", p(&keys), "-q"]);
    let hook = format!(
        "echo noise; echo \"$STRATA_BENCH_WORKLOAD $STRATA_BENCH_REPEAT\" >> {}",
        p(&log)
    );
    let out = ok(&[
        "bench",
        "--data",
        p(&keys),
        "--index",
        "btree",
        "--index",
        "pgm",
        "--workload",
        "lookup",
        "--workload",
        "scan",
        "--ops",
        "50",
        "--repeat",
        "2",
        "--before-repeat",
        &hook,
        "-q",
    ]);
    let hooks = std::fs::read_to_string(&log).unwrap();
    assert_eq!(hooks, "lookup 0\nlookup 1\nscan 0\nscan 1\n");
    assert_eq!(out.lines().count(), 4, "only JSON Lines on stdout: {out}");
    assert!(out.lines().all(|l| l.starts_with('{')), "{out}");
    let e = fail(&[
        "bench",
        "--data",
        p(&keys),
        "--index",
        "btree",
        "--ops",
        "50",
        "--before-repeat",
        "exit 3",
        "-q",
    ]);
    assert!(
        e.contains("before repeat 0 of lookup failed") && e.contains("exit 3"),
        "{e}"
    );
}

/// Waits until `dir` holds a live `.strata-bench-*` work directory with its
/// lock file, and returns it.
fn wait_for_work_dir(dir: &Path, child: &mut std::process::Child) -> std::path::PathBuf {
    let t0 = std::time::Instant::now();
    loop {
        let found = names(dir)
            .into_iter()
            .filter(|n| n.starts_with(".strata-bench-"))
            .map(|n| dir.join(n))
            .find(|d| d.join("lock").exists() && names(d).len() > 1);
        if let Some(d) = found {
            return d;
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("bench ended ({st}) before its work directory was seen");
        }
        assert!(
            t0.elapsed().as_secs() < 120,
            "no work directory in {}",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A `bench` stopped by SIGTERM or SIGINT (Ctrl-C) mid-run removes its
/// hidden `.strata-bench-*` work directory and dies of the signal; after a
/// SIGKILL, which nothing can catch, the next `bench` beside the same key
/// file removes the dead run's directory.
#[test]
fn killed_bench_leaves_no_work_directory() {
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    ok(&[
        "gen",
        "--dist",
        "uniform",
        "--n",
        "200000",
        "--out",
        p(&keys),
        "-q",
    ]);
    let before = names(tmp.path());
    let long_bench = || {
        Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["bench", "--data", p(&keys), "--index", "btree", "--index", "pgm"])
            .args([
                "--workload",
                "lookup",
                "--ops",
                "100000000",
                "--repeat",
                "50",
                "-q",
            ])
            .args(["--json", p(&tmp.path().join("out.jsonl"))])
            .spawn()
            .expect("run strata bench")
    };
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let mut child = long_bench();
        let work = wait_for_work_dir(tmp.path(), &mut child);
        // SAFETY: sends a signal to the child we started.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
        let st = child.wait().unwrap();
        assert_eq!(st.signal(), Some(sig), "bench dies of signal {sig}: {st}");
        assert!(!work.exists(), "signal {sig} left {}", work.display());
        std::fs::remove_file(tmp.path().join("out.jsonl")).unwrap();
        assert_eq!(names(tmp.path()), before, "signal {sig}");
    }
    let mut child = long_bench();
    let work = wait_for_work_dir(tmp.path(), &mut child);
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert!(work.exists(), "nothing runs after SIGKILL");
    ok(&[
        "bench",
        "--data",
        p(&keys),
        "--index",
        "btree",
        "--ops",
        "100",
        "--json",
        p(&tmp.path().join("out.jsonl")),
        "-q",
    ]);
    assert!(!work.exists(), "the next bench removes {}", work.display());
    std::fs::remove_file(tmp.path().join("out.jsonl")).unwrap();
    assert_eq!(names(tmp.path()), before);
}

/// The commands listed under `Commands:` in a help text, with their lines.
fn commands(help: &str) -> Vec<(String, String)> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let l = l.trim();
            let (name, about) = l.split_once(' ').unwrap_or((l, ""));
            (name.to_string(), about.trim().to_string())
        })
        .filter(|(name, _)| name != "help")
        .collect()
}

/// The option flags of a help text, in order.
fn options(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Options:"))
        .skip(1)
        .filter_map(|l| {
            let t = l.trim_start();
            t.starts_with('-').then(|| {
                let flags = t.split("  ").next().unwrap();
                flags
                    .split(", ")
                    .last()
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .to_string()
            })
        })
        .collect()
}

/// The commands come in the documented order, each with a one-line
/// description; `-q` is the last option of every command before `--help`;
/// `gen` takes `-n`.
#[test]
fn help_is_ordered_and_short() {
    let top = ok(&["--help"]);
    let cmds = commands(&top);
    let names: Vec<&str> = cmds.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "demo", "gen", "analyze", "build", "get", "scan", "join", "stress", "inspect", "verify", "tune",
            "bench", "kvbench", "profile", "db", "lsm", "list"
        ]
    );
    assert!(top.contains("in the order of a first session"), "{top}");
    let mut all: Vec<Vec<&str>> = names.iter().map(|n| vec![*n]).collect();
    for group in ["db", "lsm"] {
        let sub = ok(&[group, "--help"]);
        for (name, about) in commands(&sub) {
            assert!(about.len() <= 90, "{group} {name}: {about}");
            let name: &'static str = Box::leak(name.into_boxed_str());
            all.push(vec![group, name]);
        }
    }
    for (name, about) in &cmds {
        assert!(about.len() <= 90, "{name}: {about}");
    }
    for cmd in &all {
        let help = ok(&[cmd.as_slice(), &["-h"]].concat());
        let opts = options(&help);
        let n = opts.len();
        assert!(n >= 2, "{cmd:?}: {opts:?}");
        assert_eq!(opts[n - 2..], ["--quiet", "--help"], "{cmd:?}: {opts:?}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("k.keys");
    ok(&["gen", "--dist", "uniform", "-n", "100", "--out", p(&keys), "-q"]);
    assert_eq!(std::fs::metadata(&keys).unwrap().len(), 8 + 8 * 100);
}
