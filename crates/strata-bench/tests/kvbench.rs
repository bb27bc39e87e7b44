//! kvbench over strata's engines: every workload runs, does exactly the
//! operations its plan holds (counts are deterministic for a seed), finds
//! what it must, and writes the fixed JSON fields.

use strata_bench::kv::{
    self, EngineSpec, KvCounts, KvEnv, KvOptions, KvRecord, KvWorkload, Live, Plan, PlanOp, SyncMode,
};

/// Every workload, in an order where each finds a loaded store (the
/// deletes last, so the reads before them find every key).
fn order() -> Vec<KvWorkload> {
    let mut v: Vec<KvWorkload> = KvWorkload::ALL
        .into_iter()
        .filter(|w| *w != KvWorkload::DeleteRandom)
        .collect();
    v.push(KvWorkload::DeleteRandom);
    v
}

fn options(
    engines: &str,
    workloads: &[KvWorkload],
    dir: &std::path::Path,
    key: usize,
    value: usize,
) -> KvOptions {
    KvOptions {
        engines: EngineSpec::parse_list(engines).unwrap_or_else(|e| panic!("{e}")),
        workloads: workloads.to_vec(),
        num: 2000,
        ops: 1000,
        scan_length: 10,
        seed: 7,
        env: KvEnv {
            memory_bytes: 256 << 10,
            sync: SyncMode::Never,
            key_size: key,
            key_file: None,
            value_size: value,
            direct_reads: false,
        },
        threads: 1,
        repeats: 1,
        cold: false,
        work_dir: dir.to_path_buf(),
    }
}

/// The counts each workload's plan calls for, scans counted against the
/// live keys as the driver will see them.
fn expected(opts: &KvOptions) -> Vec<KvCounts> {
    let mut live = Live::new();
    let mut out = Vec::new();
    for (wi, &w) in opts.workloads.iter().enumerate() {
        let seed = opts.seed + wi as u64;
        let plan = Plan::new_seek(w, &mut live, opts.num, opts.ops, seed, opts.scan_length + 1)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut c = plan.counts();
        // Scans read the live keys at or after their start, up to their
        // count: replay the plan over the store as it was before it.
        if plan.ops.iter().any(|o| matches!(o, PlanOp::Scan { .. })) {
            let mut state = before_plan(opts, wi);
            c.scanned = 0;
            for op in &plan.ops {
                match *op {
                    PlanOp::Scan { id, count } => {
                        let from = id / 2;
                        c.scanned += (from..state.end())
                            .filter(|&i| state.has(i))
                            .take(count as usize)
                            .count() as u64;
                    }
                    PlanOp::Put { id } => state.put(id / 2),
                    _ => {}
                }
            }
        }
        if w == KvWorkload::ReadWhileWriting {
            // Reads only: the writer thread is not counted.
            assert_eq!(c.puts, 0);
        }
        out.push(c);
    }
    out
}

/// The live set before workload `wi`.
fn before_plan(opts: &KvOptions, wi: usize) -> Live {
    let mut live = Live::new();
    for (i, &w) in opts.workloads.iter().enumerate().take(wi) {
        Plan::new_seek(
            w,
            &mut live,
            opts.num,
            opts.ops,
            opts.seed + i as u64,
            opts.scan_length + 1,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    live
}

fn run(opts: &KvOptions) -> Vec<KvRecord> {
    kv::run(opts, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

fn check_every_workload(engines: &str, key: usize, value: usize) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let opts = options(engines, &order(), dir.path(), key, value);
    check_workloads(&opts);
}

/// Runs `opts` (every workload, in [`order`]) and checks every record
/// against its plan.
fn check_workloads(opts: &KvOptions) {
    let order = order();
    let want = expected(opts);
    let records = run(opts);
    assert_eq!(records.len(), order.len() * opts.engines.len());
    for (r, rec) in records.iter().enumerate() {
        let wi = r % order.len();
        let w = order[wi];
        assert_eq!(rec.workload, w.name());
        assert_eq!(rec.wrong, 0, "{} {}: wrong answers", rec.spec, rec.workload);
        assert_eq!(rec.counts, want[wi], "{} {}: counts", rec.spec, rec.workload);
        match w {
            KvWorkload::FillSeq | KvWorkload::FillRandom => {
                assert_eq!(rec.counts.puts, opts.num);
                assert_eq!(rec.ops, opts.num);
            }
            KvWorkload::ReadRandom | KvWorkload::ReadWhileWriting | KvWorkload::YcsbC => {
                assert_eq!(rec.counts.found, opts.ops, "{}: every key is found", rec.workload);
            }
            KvWorkload::ReadMissing => assert_eq!(rec.counts.found, 0),
            KvWorkload::SeekRandom => {
                assert_eq!(rec.counts.seeks, opts.ops);
                let entries = u64::from(opts.scan_length);
                assert!(rec.counts.scanned > entries * opts.ops, "{}", rec.counts.scanned);
            }
            KvWorkload::Overwrite => assert_eq!(rec.counts.puts, opts.ops),
            KvWorkload::DeleteRandom => {
                assert_eq!(rec.counts.deletes, opts.ops);
                assert!(rec.live_keys < opts.num + 200);
            }
            _ => assert_eq!(
                rec.counts.gets + rec.counts.puts - rec.counts.rmws + rec.counts.seeks,
                opts.ops,
                "{}: every operation counted once",
                rec.workload
            ),
        }
        if w.writes() && w != KvWorkload::ReadWhileWriting {
            assert!(
                rec.write_amp.is_some_and(|a| a > 0.0),
                "{}: write amp",
                rec.workload
            );
        } else if w != KvWorkload::ReadWhileWriting {
            assert!(rec.write_amp.is_none());
        }
        assert!(rec.space_amp.is_some_and(|a| a > 0.0));
        assert!(rec.disk_bytes > 0);
    }
    // The same seed gives the same counts on a second run.
    let again = run(opts);
    let a: Vec<KvCounts> = records.iter().map(|r| r.counts).collect();
    let b: Vec<KvCounts> = again.iter().map(|r| r.counts).collect();
    assert_eq!(a, b);
}

#[test]
fn every_workload_on_db_does_what_it_claims() {
    check_every_workload("db", 8, 8);
}

#[test]
fn records_carry_the_fixed_fields() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut opts = options("db", &[KvWorkload::ReadRandom], dir.path(), 8, 8);
    opts.repeats = 2;
    let records = run(&opts);
    assert_eq!(records.len(), 2);
    assert_eq!((records[0].repeat, records[1].repeat), (0, 1));
    assert!(
        records[0].build_s > 0.0,
        "a first read workload loads the store first"
    );
    let v = serde_json::to_value(&records[0]).unwrap_or_else(|e| panic!("{e}"));
    for field in [
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
        "counts",
        "memory",
        "write_amp",
        "space_amp",
        "repeat",
        "key_size",
        "value_size",
    ] {
        assert!(v.get(field).is_some(), "field {field} missing in {v}");
    }
    for p in ["p50", "p99", "p999", "max"] {
        assert!(v["latency_ns"][p].as_u64().is_some_and(|x| x > 0), "latency {p}");
    }
    let table = kv::format_kv_table(&records);
    assert!(table.contains("readrandom"));
    assert!(table.contains("1.00x"), "{table}");
    assert_eq!(table.lines().count(), 3, "{table}");
}

#[test]
fn readers_in_threads_find_every_key() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut opts = options(
        "db",
        &[KvWorkload::ReadRandom, KvWorkload::ReadWhileWriting],
        dir.path(),
        8,
        8,
    );
    opts.threads = 2;
    let records = run(&opts);
    for r in &records {
        assert_eq!(r.counts.gets, opts.ops);
        assert_eq!(r.counts.found, opts.ops);
        assert_eq!(r.wrong, 0);
    }
}

#[test]
fn db_refuses_other_sizes_and_unknown_engines_are_named() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let e = kv::run(
        &options("db", &[KvWorkload::FillSeq], dir.path(), 16, 100),
        &mut |_| {},
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("8-byte keys and values"), "{e}");
    let e = kv::run(
        &options("nosuch", &[KvWorkload::FillSeq], dir.path(), 8, 8),
        &mut |_| {},
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("unknown engine"), "{e}");
}

#[test]
fn synced_writes_from_threads_land_once_each() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut opts = options(
        "db",
        &[
            KvWorkload::FillRandom,
            KvWorkload::Overwrite,
            KvWorkload::ReadRandom,
        ],
        dir.path(),
        8,
        8,
    );
    opts.num = 500;
    opts.ops = 300;
    opts.threads = 2;
    opts.env.sync = SyncMode::Always;
    let records = run(&opts);
    assert_eq!(records[0].counts.puts, 500);
    assert_eq!(records[1].counts.puts, 300);
    assert_eq!(records[2].counts.found, 300);
    assert!(records.iter().all(|r| r.wrong == 0 && r.sync == "always"));
    assert_eq!(records[2].live_keys, 500);
}

#[test]
fn every_workload_on_lsm_beside_db_does_what_it_claims() {
    check_every_workload("db,lsm:index=pgm,boundary=16", 8, 8);
}

#[test]
fn every_workload_on_lsm_with_long_keys_and_values() {
    check_every_workload("lsm:index=fp", 24, 100);
    check_every_workload("lsm:index=pgm,boundary=16", 16, 1000);
}

#[test]
fn lsm_takes_the_run_settings_and_its_own_options() {
    let env = KvEnv {
        memory_bytes: 1 << 20,
        sync: SyncMode::Always,
        key_size: 16,
        key_file: None,
        value_size: 100,
        direct_reads: true,
    };
    assert_eq!(
        kv::lsm_spec("index=rmi,memory=2M", &env),
        "memory=1048576,sync=always,direct=true,index=rmi,memory=2M"
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut opts = options(
        "lsm:index=rs,boundary=32",
        &[KvWorkload::FillRandom],
        dir.path(),
        16,
        100,
    );
    opts.num = 500;
    let r = run(&opts);
    assert_eq!(r[0].config["index"], "rs");
    assert_eq!(r[0].config["boundary"], 32);
    assert_eq!(r[0].config["memory_bytes"], 256 << 10);
    assert_eq!(r[0].bytes_written_source, "engine");
    let e = kv::run(
        &options("lsm:index=nosuch", &[KvWorkload::FillSeq], dir.path(), 8, 8),
        &mut |_| {},
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("nosuch"), "{e}");
}

/// A text key file of `n` keys of `dist` in `dir`, read back.
fn key_file(dir: &std::path::Path, dist: strata::data::TextDist, n: usize) -> std::sync::Arc<kv::KeyFile> {
    let keys = strata::data::generate_text(dist, n, 5).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(format!("{}.txt", dist.name()));
    strata::data::write_text_keys(&path, &keys).unwrap_or_else(|e| panic!("{e}"));
    std::sync::Arc::new(kv::KeyFile::read(&path).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn every_workload_on_lsm_with_word_and_url_keys() {
    for (dist, engines, value) in [
        (strata::data::TextDist::Words, "lsm:index=pgm,boundary=16", 100),
        (
            strata::data::TextDist::Urls,
            "lsm:index=fp,lsm:index=gap-zonemap-d",
            8,
        ),
    ] {
        let keys = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut opts = options(engines, &order(), dir.path(), 16, value);
        let file = key_file(keys.path(), dist, 2000);
        opts.num = file.len();
        opts.env.key_file = Some(file);
        check_workloads(&opts);
        let rec = &run(&opts)[0];
        assert_eq!(rec.dataset, format!("kv-{}-{value}", dist.name()));
        assert!(rec.key_size >= 5, "{}", rec.key_size);
    }
}

#[test]
fn scan_length_sets_the_entries_of_a_seek() {
    let keys = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (scan_length, file) in [
        (99, None),
        (0, None),
        (
            250,
            Some(key_file(keys.path(), strata::data::TextDist::Urls, 2000)),
        ),
    ] {
        let mut opts = options(
            "lsm:index=pgm",
            &[KvWorkload::FillSeq, KvWorkload::SeekRandom],
            dir.path(),
            16,
            100,
        );
        opts.ops = 200;
        opts.scan_length = scan_length;
        opts.env.key_file = file;
        let rec = &run(&opts)[1];
        assert_eq!(rec.counts, expected(&opts)[1], "scan length {scan_length}");
        assert_eq!(rec.wrong, 0);
        // Seeks land uniformly on 2000 keys: on average far from the end.
        let per_seek = rec.counts.scanned as f64 / 200.0;
        let want = f64::from(scan_length + 1);
        assert!(per_seek <= want && per_seek > 0.8 * want, "{per_seek} of {want}");
        assert_eq!(rec.config["scan_length"], scan_length);
    }
}

#[test]
fn key_files_refused_by_db_leave_no_store_behind() {
    let keys = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut opts = options("lsm:index=pgm,db", &[KvWorkload::FillSeq], dir.path(), 8, 8);
    let file = key_file(keys.path(), strata::data::TextDist::Words, 500);
    opts.num = file.len();
    opts.env.key_file = Some(file);
    let e = kv::run(&opts, &mut |_| {})
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("engine db") && e.contains("8-byte keys"), "{e}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert!(left.is_empty(), "stores left behind: {left:?}");
    opts.engines = EngineSpec::parse_list("lsm").unwrap_or_else(|e| panic!("{e}"));
    opts.num = 400;
    let e = kv::run(&opts, &mut |_| {})
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("must be its 500 keys"), "{e}");
}
