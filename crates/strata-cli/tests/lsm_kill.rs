//! kill -9 during `strata lsm stress`: every acknowledged write must be in
//! the store when it is reopened (values equal), nothing that was never
//! begun may appear, and no reopen may fail. `STRATA_FULL=1` runs the
//! acceptance run of 200 kills (`STRATA_KILLS=N` sets another count); the
//! default runs a few.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use strata::lsm::{Options, Store};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Write {
    key: Vec<u8>,
    /// `None` for a delete.
    value: Option<Vec<u8>>,
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `begin|ack put KEY VALUE` (VALUE `=` when empty) or `begin|ack delete KEY -`.
fn parse(line: &str) -> Option<(bool, Write)> {
    let mut it = line.split_whitespace();
    let ack = match it.next()? {
        "begin" => false,
        "ack" => true,
        _ => return None,
    };
    let op = it.next()?;
    let key = unhex(it.next()?)?;
    let value = it.next()?;
    let value = match (op, value) {
        ("put", "=") => Some(Vec::new()),
        ("put", v) => Some(unhex(v)?),
        ("delete", "-") => None,
        _ => return None,
    };
    if it.next().is_some() {
        return None;
    }
    Some((ack, Write { key, value }))
}

fn apply(m: &mut Model, w: &Write) {
    match &w.value {
        Some(v) => m.insert(w.key.clone(), v.clone()),
        None => m.remove(&w.key),
    };
}

fn contents(s: &Store) -> Model {
    let mut it = s.iter().unwrap();
    it.seek_to_first().unwrap();
    let mut m = Model::new();
    while it.valid() {
        m.insert(it.key().to_vec(), it.value().to_vec());
        it.next().unwrap();
    }
    m
}

fn stress(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_strata"));
    c.args(["lsm", "stress"]).arg(dir).args(args);
    c
}

#[test]
fn kill_nine_never_loses_an_acknowledged_write() {
    let kills = common::kills(5);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(42);
    // A first run that is not killed leaves tables behind (a 256 KiB budget
    // flushes small memtables and compacts), so the kills land on a store
    // with levels whatever the speed of the machine.
    let warm = stress(
        &dir,
        &[
            "--ops", "4000", "--keys", "2000", "--memory", "256K", "--sync", "never", "--seed", "0",
        ],
    )
    .stdout(Stdio::null())
    .status()
    .unwrap();
    assert!(warm.success());
    let (mut model, warm_tables) = {
        let s = Store::open(&dir, Options::default()).unwrap();
        let m = contents(&s);
        let t: u64 = s.stats().levels.iter().map(|l| l.files).sum();
        s.close().unwrap();
        (m, t)
    };
    assert!(warm_tables > 0, "4000 writes into a 256 KiB budget flush tables");
    let (mut acked, mut in_flight_rounds, mut in_flight_landed, mut max_tables) =
        (0u64, 0u64, 0u64, warm_tables);
    for round in 0..kills {
        let seed = (round as u64 + 1).to_string();
        let cmd = stress(
            &dir,
            &[
                "--ops", "1000000", "--keys", "2000", "--memory", "256K", "--sync", "always", "--seed", &seed,
            ],
        );
        let after = Duration::from_millis(rng.random_range(50..600));
        let (status, lines) = common::run_and_kill(cmd, after);
        assert!(
            !status.success(),
            "round {round}: stress finished before the kill"
        );
        let mut in_flight: Option<Write> = None;
        for l in &lines {
            let Some((ack, w)) = parse(l) else {
                panic!("round {round}: unexpected output line {l:?}");
            };
            if ack {
                assert_eq!(in_flight.as_ref(), Some(&w), "round {round}: ack without begin");
                acked += 1;
                apply(&mut model, &w);
                in_flight = None;
            } else {
                assert!(in_flight.is_none(), "round {round}: two writes in flight");
                in_flight = Some(w);
            }
        }
        let s = Store::open(&dir, Options::default())
            .unwrap_or_else(|e| panic!("round {round}: reopen after kill -9 failed: {e}"));
        let got = contents(&s);
        let mut expect = model.clone();
        if let Some(w) = in_flight {
            // The write in flight may or may not have made it.
            in_flight_rounds += 1;
            if got.get(&w.key) != expect.get(&w.key) {
                apply(&mut expect, &w);
                in_flight_landed += 1;
            }
        }
        if got != expect {
            let missing: Vec<_> = expect
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(v))
                .map(|(k, _)| k)
                .take(5)
                .collect();
            let extra: Vec<_> = got
                .iter()
                .filter(|(k, v)| expect.get(*k) != Some(v))
                .map(|(k, _)| k)
                .take(5)
                .collect();
            panic!("round {round}: acknowledged writes missing or changed {missing:?}, unexpected {extra:?}");
        }
        for (k, v) in expect.iter().step_by(7) {
            assert_eq!(
                s.get(k).unwrap().as_ref(),
                Some(v),
                "round {round}: get disagrees with the scan"
            );
        }
        model = got;
        max_tables = max_tables.max(s.stats().levels.iter().map(|l| l.files).sum());
        s.close().unwrap();
    }
    eprintln!(
        "lsm kill -9: {kills} kills, {kills} reopens, {acked} acknowledged writes all present, \
         {in_flight_rounds} kills with a write in flight ({in_flight_landed} of them landed), \
         {warm_tables} tables before the first kill, at most {max_tables} after a kill, {} keys at the end",
        model.len()
    );
}
