//! kill -9 during `strata db stress`: every acknowledged write must be in the
//! store when it is reopened, and no reopen may fail. `STRATA_FULL=1` runs
//! the acceptance run of 200 kills (`STRATA_KILLS=N` sets another count); CI
//! runs a handful.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use strata::db::{Db, Options};

use common::{Write, parse};

#[test]
fn kill_nine_never_loses_an_acknowledged_write() {
    let kills = common::kills(6);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(42);
    // A first run that is not killed leaves merged generations behind, so
    // the kills land on a store with a static stage whatever the speed of
    // the machine (how many writes a killed run gets through depends on it).
    let warm = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["db", "stress"])
        .arg(&dir)
        .args([
            "--ops", "4000", "--keys", "2000", "--memory", "32K", "--sync", "never", "--seed", "0",
        ])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(warm.success());
    let (mut model, warm_generation) = {
        let db = Db::open_path(&dir, Options::default()).unwrap();
        let m: BTreeMap<u64, u64> = db.range(..).map(|r| r.unwrap()).collect();
        let g = db.stats().unwrap().generation;
        db.close().unwrap();
        (m, g)
    };
    assert!(warm_generation > 0, "4000 writes into a 32 KiB budget merge");
    let mut merges_seen = warm_generation;
    let (mut acked, mut in_flight_rounds, mut in_flight_landed) = (0u64, 0u64, 0u64);
    for round in 0..kills {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
        cmd.args(["db", "stress"])
            .arg(&dir)
            .args([
                "--ops", "1000000", "--keys", "2000", "--memory", "32K", "--sync", "every",
            ])
            .args(["--seed", &(round as u64 + 1).to_string()]);
        let after = Duration::from_millis(rng.random_range(50..600));
        let (status, lines) = common::run_and_kill(cmd, after);
        if status.success() {
            panic!("round {round}: stress finished before the kill");
        }
        let mut in_flight: Option<Write> = None;
        for l in &lines {
            let Some((ack, w)) = parse(l) else {
                panic!("round {round}: unexpected output line {l:?}");
            };
            if ack {
                assert_eq!(in_flight, Some(w), "round {round}: ack without begin");
                acked += 1;
                match w.value {
                    Some(v) => model.insert(w.key, v),
                    None => model.remove(&w.key),
                };
                in_flight = None;
            } else {
                in_flight = Some(w);
            }
        }
        let db = Db::open_path(&dir, Options::default())
            .unwrap_or_else(|e| panic!("round {round}: reopen after kill -9 failed: {e}"));
        let got: BTreeMap<u64, u64> = db.range(..).map(|r| r.unwrap()).collect();
        let mut expect = model.clone();
        if let Some(w) = in_flight {
            // The write in flight may or may not have made it.
            let with = |m: &mut BTreeMap<u64, u64>| match w.value {
                Some(v) => m.insert(w.key, v),
                None => m.remove(&w.key),
            };
            in_flight_rounds += 1;
            if got.get(&w.key) != expect.get(&w.key) {
                with(&mut expect);
                in_flight_landed += 1;
            }
        }
        if got != expect {
            let missing: Vec<_> = expect
                .iter()
                .filter(|(k, v)| got.get(k) != Some(v))
                .take(5)
                .collect();
            let extra: Vec<_> = got
                .iter()
                .filter(|(k, v)| expect.get(k) != Some(v))
                .take(5)
                .collect();
            panic!("round {round}: acknowledged writes missing {missing:?}, unexpected {extra:?}");
        }
        model = got;
        merges_seen = merges_seen.max(db.stats().unwrap().generation);
        db.close().unwrap();
    }
    eprintln!(
        "kill -9: {kills} kills, {kills} reopens, {acked} acknowledged writes all present, \
         {in_flight_rounds} kills with a write in flight ({in_flight_landed} of them landed), \
         generations {warm_generation} before the first kill and {merges_seen} after the last, {} keys at the end",
        model.len()
    );
}

fn strata(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "strata {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn db_subcommands() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("keys.sosd");
    let store = tmp.path().join("store");
    let (k, s) = (keys.to_str().unwrap(), store.to_str().unwrap());
    strata(&["gen", "--dist", "uniform", "--n", "5000", "--out", k, "--quiet"]);
    assert!(strata(&["db", "load", s, "--data", k, "--quiet"]).contains("loaded 5000"));
    let first = strata(&["db", "scan", s, "--count", "3"]);
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines.len(), 3);
    let k0: u64 = lines[0].split('\t').next().unwrap().parse().unwrap();
    assert!(lines[0].ends_with("\t0"), "values are ranks: {first}");
    assert_eq!(strata(&["db", "get", s, &k0.to_string()]), format!("{k0}\t0\n"));
    strata(&["db", "put", s, "7", "70"]);
    assert_eq!(strata(&["db", "get", s, "7"]), "7\t70\n");
    strata(&["db", "delete", s, &k0.to_string()]);
    assert!(strata(&["db", "get", s, &k0.to_string()]).contains("not found"));
    let st: serde_json::Value = serde_json::from_str(&strata(&["db", "stats", s])).unwrap();
    assert_eq!(st["static_records"], 5000);
    assert_eq!(st["active_entries"], 2);
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["db", "get", s, "not-a-key"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn db_load_of_a_bad_key_file_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.sosd");
    let bad = tmp.path().join("bad.sosd");
    let store = tmp.path().join("store");
    let (g, b, s) = (
        good.to_str().unwrap(),
        bad.to_str().unwrap(),
        store.to_str().unwrap(),
    );
    let keys: Vec<u64> = (0..200_000u64).map(|i| i * 4 + 1).collect();
    strata::format::write_keys(&good, &keys).unwrap();
    // Out of order near the end: the stream has written most of a run when
    // it finds out.
    let mut unsorted: Vec<u64> = keys.iter().map(|k| k + 2).collect();
    unsorted.swap(190_000, 190_001);
    strata::format::write_keys(&bad, &unsorted).unwrap();
    let fails = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "strata {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    // A new store: no store, no files, not even the directory the load
    // created (issue 16: a failed load leaves nothing behind).
    let e = fails(&["db", "load", s, "--data", b, "--quiet"]);
    assert!(e.contains("190001"), "{e}");
    assert!(!store.exists(), "a failed load left {}", store.display());
    // The store then loads the good file, in constant memory.
    assert!(strata(&["db", "load", s, "--data", g, "--quiet"]).contains("loaded 200000"));
    // An existing store: the bad file is refused before anything is put.
    let e = fails(&["db", "load", s, "--data", b, "--quiet"]);
    assert!(e.contains("190001"), "{e}");
    let db = Db::open_path(&store, Options::default()).unwrap();
    assert_eq!(db.count().unwrap(), 200_000);
    assert_eq!(db.get(3).unwrap(), None, "a key of the bad file was put");
    assert_eq!(db.get(5).unwrap(), Some(1));
    db.close().unwrap();
    // A good second file is put, values being its ranks.
    let more = tmp.path().join("more.sosd");
    strata::format::write_keys(&more, &[2, 3, 5]).unwrap();
    let m = more.to_str().unwrap();
    assert!(strata(&["db", "load", s, "--data", m, "--quiet"]).contains("put 3 records"));
    let db = Db::open_path(&store, Options::default()).unwrap();
    assert_eq!((db.get(3).unwrap(), db.get(5).unwrap()), (Some(1), Some(2)));
    assert_eq!(db.count().unwrap(), 200_002);
}
