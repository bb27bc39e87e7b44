//! kill -9 during `strata stress` on every updatable index kind (issue 18):
//! the index must reopen, at its last checkpoint or at the one in flight:
//! every acknowledged write is there, and the writes begun since are either
//! all there (their checkpoint completed before the kill) or none.
//! `STRATA_FULL=1` runs 200 kills per kind (`STRATA_KILLS=N` sets another
//! count); CI runs a handful.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use strata::index::{BuildOptions, IndexSpec, OpenOptions};

/// The updatable kinds, as `strata build` specs.
const KINDS: &[&str] = &[
    "btree",
    "btree-ld",
    "fiting:epsilon=4,buffer=8",
    "dpgm",
    "lipp",
    "alex:max_node_pages=1",
];

type Model = BTreeMap<u64, u64>;

use common::{Write, parse};

fn apply(m: &mut Model, w: &Write) {
    match w.value {
        Some(v) => m.insert(w.key, v),
        None => m.remove(&w.key),
    };
}

fn contents(dir: &std::path::Path) -> Model {
    let idx = strata::registry::open(dir, &OpenOptions::default())
        .unwrap_or_else(|e| panic!("{}: reopen after kill -9 failed: {e}", dir.display()));
    let mut out = Vec::new();
    idx.scan(0, usize::MAX, &mut out).unwrap();
    assert_eq!(idx.len(), out.len() as u64, "len agrees with a full scan");
    idx.verify(&mut |_| {}).unwrap();
    out.into_iter().collect()
}

fn kill_run(spec: &str, kills: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let keys: Vec<u64> = (0..3_000u64).map(|i| i * 2).collect();
    let s: IndexSpec = spec.parse().unwrap();
    strata::registry::build(&s, &keys, &dir, &BuildOptions::default()).unwrap();
    let mut model: Model = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
    let (mut acked, mut in_flight_rounds, mut landed) = (0u64, 0u64, 0u64);
    for round in 0..kills {
        let every = rng.random_range(1..8u64);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
        cmd.arg("stress")
            .arg(&dir)
            .args(["--ops", "100000000", "--keys", "12000", "--sync-every"])
            .arg(every.to_string())
            .args(["--seed", &(round as u64 + 1).to_string()]);
        let after = Duration::from_millis(rng.random_range(30..400));
        let (status, lines) = common::run_and_kill(cmd, after);
        assert!(
            !status.success(),
            "{spec} round {round}: stress finished before the kill"
        );
        // Writes begun and not acknowledged, in order.
        let mut begun: Vec<Write> = Vec::new();
        for l in &lines {
            let Some((ack, w)) = parse(l) else {
                panic!("{spec} round {round}: unexpected output line {l:?}");
            };
            if ack {
                assert_eq!(begun.first(), Some(&w), "{spec} round {round}: ack out of order");
                begun.remove(0);
                apply(&mut model, &w);
                acked += 1;
            } else {
                begun.push(w);
            }
        }
        let got = contents(&dir);
        if got != model {
            let mut all = model.clone();
            begun.iter().for_each(|w| apply(&mut all, w));
            assert!(
                got == all,
                "{spec} round {round}: not at a checkpoint ({} records; acknowledged state {}, with the {} writes in flight {})",
                got.len(),
                model.len(),
                begun.len(),
                all.len()
            );
            landed += 1;
        }
        in_flight_rounds += u64::from(!begun.is_empty());
        model = got;
    }
    eprintln!(
        "kill -9 ({spec}): {kills} kills and reopens, {acked} acknowledged writes all present, \
         {in_flight_rounds} kills with writes in flight ({landed} of them at the checkpoint in flight), \
         {} records at the end",
        model.len()
    );
}

#[test]
fn kill_nine_reopens_every_updatable_kind_at_a_checkpoint() {
    let kills = common::kills(4);
    for spec in KINDS {
        let kind = spec.split(':').next().unwrap_or(spec);
        // `STRATA_SPECS=a,b`: only these kinds (full-size runs of some kinds).
        if std::env::var("STRATA_SPECS").map_or(true, |v| v.split(',').any(|k| k == kind)) {
            kill_run(spec, kills);
        }
    }
}

#[test]
fn stress_refuses_a_static_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let keys: Vec<u64> = (0..1_000u64).collect();
    strata::registry::build(&"pgm".parse().unwrap(), &keys, &dir, &BuildOptions::default()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("stress")
        .arg(&dir)
        .args(["--ops", "10"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not updatable"), "{err}");
    assert!(out.stdout.is_empty(), "nothing begun");
}
