//! SQL over strata tables against an oracle, the plans the pushdown makes,
//! and the pages the queries read (issue 22).

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, UInt64Array};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::{SessionConfig, SessionContext};
use strata::index::{BuildOptions, Index, OpenOptions};
use strata_datafusion::StrataTable;

/// Keys with both ends of the u64 range, dense runs and wide gaps; value =
/// rank.
fn keys() -> Vec<u64> {
    let mut k: Vec<u64> = (0..20_000u64)
        .map(|i| i * i % 7_919 * 1_000_003 + i)
        .chain([0, 1, 2, u64::MAX - 1, u64::MAX])
        .chain(5_000_000..5_003_000)
        .collect();
    k.sort_unstable();
    k.dedup();
    k
}

fn build(spec: &str, keys: &[u64]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    strata::registry::build(&spec.parse().unwrap(), keys, tmp.path(), &BuildOptions::default()).unwrap();
    tmp
}

async fn ctx_with(dir: &std::path::Path, partitions: usize) -> (SessionContext, Arc<dyn Index>) {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions));
    let table = StrataTable::open(dir, &OpenOptions::default()).unwrap();
    let index = table.index().clone();
    ctx.register_table("t", Arc::new(table)).unwrap();
    (ctx, index)
}

async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<u64>> {
    let batches: Vec<RecordBatch> = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out = Vec::new();
    for b in &batches {
        for r in 0..b.num_rows() {
            out.push(
                b.columns()
                    .iter()
                    .map(|c| {
                        let a = c.as_any().downcast_ref::<UInt64Array>();
                        match a {
                            Some(a) => a.value(r),
                            None => {
                                let a = c
                                    .as_any()
                                    .downcast_ref::<datafusion::arrow::array::Int64Array>()
                                    .unwrap();
                                a.value(r) as u64
                            }
                        }
                    })
                    .collect(),
            );
        }
    }
    out
}

async fn plan(ctx: &SessionContext, sql: &str) -> String {
    let b = rows_text(ctx, &format!("EXPLAIN {sql}")).await;
    b.join("\n")
}

async fn rows_text(ctx: &SessionContext, sql: &str) -> Vec<String> {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let col = b.column(1);
        let s = col
            .as_any()
            .downcast_ref::<datafusion::arrow::array::StringArray>()
            .unwrap();
        for i in 0..s.len() {
            out.push(s.value(i).to_string());
        }
    }
    out
}

/// Every query's rows equal the oracle's, at 1 and 4 target partitions,
/// for two index kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_answer_as_the_oracle() {
    let keys = keys();
    let oracle: BTreeMap<u64, u64> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
    let pick = |i: usize| keys[i * 7_919 % keys.len()];
    let (a, b) = (pick(3).min(pick(4)), pick(3).max(pick(4)));
    let in_list: Vec<u64> = (0..1000).map(|i| pick(i) + (i as u64 % 2)).collect();
    let in_sql = in_list.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    type Want = Box<dyn Fn(&BTreeMap<u64, u64>) -> Vec<Vec<u64>>>;
    let range = |lo: u64, hi: u64| -> Want {
        Box::new(move |o: &BTreeMap<u64, u64>| o.range(lo..=hi).map(|(&k, &v)| vec![k, v]).collect())
    };
    let x = pick(11);
    let in_set = in_list.clone();
    let cases: Vec<(String, Want)> = vec![
        (format!("SELECT key, value FROM t WHERE key = {x}"), range(x, x)),
        (
            format!("SELECT key, value FROM t WHERE key = {}", x + 1),
            range(x + 1, x + 1),
        ),
        (
            format!("SELECT key, value FROM t WHERE key BETWEEN {a} AND {b} ORDER BY key"),
            range(a, b),
        ),
        (
            format!("SELECT key, value FROM t WHERE key >= {a} AND key < {b} ORDER BY key"),
            range(a, b - 1),
        ),
        (
            format!("SELECT key, value FROM t WHERE {b} >= key AND key > {a} ORDER BY key"),
            range(a + 1, b),
        ),
        (
            "SELECT key, value FROM t WHERE key < 3 ORDER BY key".into(),
            range(0, 2),
        ),
        (
            format!(
                "SELECT key, value FROM t WHERE key >= {} ORDER BY key",
                u64::MAX - 1
            ),
            range(u64::MAX - 1, u64::MAX),
        ),
        (
            format!("SELECT key, value FROM t WHERE key IN ({in_sql}) ORDER BY key"),
            Box::new(move |o: &BTreeMap<u64, u64>| {
                let mut s = in_set.clone();
                s.sort_unstable();
                s.dedup();
                s.iter().filter_map(|k| o.get(k).map(|&v| vec![*k, v])).collect()
            }),
        ),
        (
            format!("SELECT key, value FROM t WHERE key > {a} ORDER BY key LIMIT 7"),
            Box::new(move |o: &BTreeMap<u64, u64>| {
                o.range(a + 1..).take(7).map(|(&k, &v)| vec![k, v]).collect()
            }),
        ),
        (
            "SELECT value FROM t WHERE key BETWEEN 5000000 AND 5000009 ORDER BY value".into(),
            Box::new(|o: &BTreeMap<u64, u64>| {
                o.range(5_000_000..=5_000_009).map(|(_, &v)| vec![v]).collect()
            }),
        ),
        (
            // Not pushed down (a filter on the value): DataFusion filters.
            "SELECT key, value FROM t WHERE value < 5 ORDER BY key".into(),
            Box::new(|o: &BTreeMap<u64, u64>| {
                o.iter()
                    .filter(|(_, v)| **v < 5)
                    .map(|(&k, &v)| vec![k, v])
                    .collect()
            }),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE key BETWEEN 5000000 AND 5002999".into(),
            Box::new(|_: &BTreeMap<u64, u64>| vec![vec![3000]]),
        ),
        (
            format!("SELECT key FROM t WHERE key > {b} AND key < {a}"),
            Box::new(|_: &BTreeMap<u64, u64>| Vec::new()),
        ),
    ];
    for spec in ["pgm", "btree-static"] {
        let dir = build(spec, &keys);
        for parts in [1, 4] {
            let (ctx, _) = ctx_with(dir.path(), parts).await;
            for (sql, want) in &cases {
                let mut got = rows(&ctx, sql).await;
                let want = want(&oracle);
                if !sql.contains("ORDER BY") {
                    got.sort();
                }
                assert_eq!(got, want, "{spec}, {parts} partitions: {sql}");
            }
        }
    }
}

/// Pushed-down filters leave no filter in the plan; a limit shows in the
/// scan (`EXPLAIN`); a value filter stays DataFusion's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_push_filters_and_limits_into_the_scan() {
    let keys = keys();
    let dir = build("pgm", &keys);
    let (ctx, _) = ctx_with(dir.path(), 4).await;
    let p = plan(&ctx, "SELECT key, value FROM t WHERE key > 100 LIMIT 10").await;
    assert!(p.contains("StrataScanExec") && p.contains("limit=10"), "{p}");
    assert!(p.contains("keys=101..=18446744073709551615"), "{p}");
    assert!(!p.contains("FilterExec"), "{p}");
    let p = plan(&ctx, "SELECT key FROM t WHERE key IN (1, 2, 3)").await;
    assert!(p.contains("keys=3 points") && !p.contains("FilterExec"), "{p}");
    let p = plan(&ctx, "SELECT key FROM t WHERE value = 3").await;
    assert!(p.contains("FilterExec") && p.contains("keys=all"), "{p}");
    // Ordered by key without a sort (the scan's order is declared).
    let p = plan(&ctx, "SELECT key FROM t WHERE key BETWEEN 10 AND 20 ORDER BY key").await;
    assert!(
        !p.contains("SortExec") || p.contains("SortPreservingMergeExec"),
        "{p}"
    );
}

/// `WHERE key = X` reads as many pages as a lookup of X (`strata get`);
/// `BETWEEN a AND b` as many as a cursor over that range, far fewer than a
/// full scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_read_only_the_pages_of_their_keys() {
    let keys = keys();
    let dir = build("pgm-disk", &keys);
    let opts = OpenOptions {
        resident: strata::index::Residency::None,
        ..OpenOptions::default()
    };
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
    let table = StrataTable::open(dir.path(), &opts).unwrap();
    let index = table.index().clone();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let lookup = strata::registry::open(dir.path(), &opts).unwrap();
    for &x in keys.iter().step_by(997).chain([&u64::MAX]) {
        for k in [x, x.wrapping_add(1)] {
            let before = index.io().snapshot();
            rows(&ctx, &format!("SELECT key, value FROM t WHERE key = {k}")).await;
            let sql_pages = index.io().snapshot().pages_read - before.pages_read;
            let before = lookup.io().snapshot();
            lookup.get(k).unwrap();
            let get_pages = lookup.io().snapshot().pages_read - before.pages_read;
            assert_eq!(sql_pages, get_pages, "key = {k}");
        }
    }
    let (a, b) = (5_000_100u64, 5_002_100u64);
    let before = index.io().snapshot();
    let got = rows(&ctx, &format!("SELECT key FROM t WHERE key BETWEEN {a} AND {b}")).await;
    let sql_pages = index.io().snapshot().pages_read - before.pages_read;
    assert_eq!(got.len(), 2001);
    let before = lookup.io().snapshot();
    let mut c = lookup.cursor().unwrap();
    c.seek(a).unwrap();
    let mut n = 0;
    while let Some((k, _)) = c.next().unwrap() {
        if k > b {
            break;
        }
        n += 1;
    }
    drop(c);
    assert_eq!(n, 2001);
    let cursor_pages = lookup.io().snapshot().pages_read - before.pages_read;
    let before = index.io().snapshot();
    rows(&ctx, "SELECT key FROM t").await;
    let full = index.io().snapshot().pages_read - before.pages_read;
    assert!(
        sql_pages <= cursor_pages + 1,
        "BETWEEN read {sql_pages} pages, a cursor {cursor_pages}"
    );
    assert!(
        sql_pages * 5 < full,
        "BETWEEN read {sql_pages} pages, a full scan {full}"
    );
}

/// An LSM store of byte-string keys (empty, zero bytes, 0xff runs, shared
/// prefixes, deletes, some in tables and some only in the log) and the
/// oracle of what it holds.
fn lsm_store() -> (tempfile::TempDir, BTreeMap<Vec<u8>, Vec<u8>>) {
    use strata::lsm::{Options, Store};
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), Options::default()).unwrap();
    let mut oracle = BTreeMap::new();
    let put = |oracle: &mut BTreeMap<Vec<u8>, Vec<u8>>, k: Vec<u8>, v: Vec<u8>| {
        store.put(&k, &v).unwrap();
        oracle.insert(k, v);
    };
    put(&mut oracle, Vec::new(), b"empty".to_vec());
    put(&mut oracle, vec![0], b"zero".to_vec());
    put(&mut oracle, vec![0, 0], b"zero zero".to_vec());
    put(&mut oracle, vec![0xff; 3], b"ff".to_vec());
    put(&mut oracle, vec![0xff; 12], b"ff12".to_vec());
    for i in 0..3000u32 {
        put(
            &mut oracle,
            format!("user{:06}", i * 7 % 3000).into_bytes(),
            format!("v{i}").into_bytes(),
        );
    }
    store.flush().unwrap();
    for i in (0..3000u32).step_by(5) {
        let k = format!("user{i:06}").into_bytes();
        store.delete(&k).unwrap();
        oracle.remove(&k);
    }
    for i in 0..50u32 {
        put(
            &mut oracle,
            format!("user{:06}x", i * 13).into_bytes(),
            b"late".to_vec(),
        );
    }
    store.close().unwrap();
    (tmp, oracle)
}

async fn binary_rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<Vec<u8>>> {
    use datafusion::arrow::array::BinaryArray;
    let batches = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out = Vec::new();
    for b in &batches {
        for r in 0..b.num_rows() {
            out.push(
                b.columns()
                    .iter()
                    .map(|c| {
                        c.as_any()
                            .downcast_ref::<BinaryArray>()
                            .unwrap_or_else(|| panic!("{sql}: not binary: {:?}", c.data_type()))
                            .value(r)
                            .to_vec()
                    })
                    .collect(),
            );
        }
    }
    out
}

fn hex(k: &[u8]) -> String {
    let h: String = k.iter().map(|b| format!("{b:02x}")).collect();
    format!("X'{h}'")
}

/// SQL over an LSM store (`key Binary, value Binary`) answers as the
/// oracle, at 1 and 3 partitions; key filters leave no filter in the plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lsm_queries_answer_as_the_oracle() {
    use strata_datafusion::StrataLsmTable;
    let (dir, oracle) = lsm_store();
    let kv = |r: std::collections::btree_map::Range<'_, Vec<u8>, Vec<u8>>| -> Vec<Vec<Vec<u8>>> {
        r.map(|(k, v)| vec![k.clone(), v.clone()]).collect()
    };
    let a = b"user001000".to_vec();
    let b = b"user002000".to_vec();
    let in_keys: Vec<Vec<u8>> = (0..300u32)
        .map(|i| format!("user{:06}", i * 11).into_bytes())
        .chain([Vec::new(), vec![0xff; 3], b"absent".to_vec()])
        .collect();
    let in_sql = in_keys.iter().map(|k| hex(k)).collect::<Vec<_>>().join(", ");
    let cases: Vec<(String, Vec<Vec<Vec<u8>>>)> = vec![
        (
            format!("SELECT key, value FROM kv WHERE key = {}", hex(b"user000007")),
            kv(oracle.range(b"user000007".to_vec()..=b"user000007".to_vec())),
        ),
        (
            format!("SELECT key, value FROM kv WHERE key = {}", hex(b"user000005")),
            Vec::new(),
        ),
        (
            "SELECT key, value FROM kv WHERE key = X''".into(),
            kv(oracle.range(Vec::new()..=Vec::new())),
        ),
        (
            format!(
                "SELECT key, value FROM kv WHERE key BETWEEN {} AND {} ORDER BY key",
                hex(&a),
                hex(&b)
            ),
            kv(oracle.range(a.clone()..=b.clone())),
        ),
        (
            format!(
                "SELECT key, value FROM kv WHERE key > {} AND key < {} ORDER BY key",
                hex(&a),
                hex(&b)
            ),
            kv(oracle.range(a.clone()..b.clone()))
                .into_iter()
                .filter(|r| r[0] != a)
                .collect(),
        ),
        (
            format!("SELECT key, value FROM kv WHERE key IN ({in_sql}) ORDER BY key"),
            {
                let mut k = in_keys.clone();
                k.sort();
                k.dedup();
                k.iter()
                    .filter_map(|k| oracle.get(k).map(|v| vec![k.clone(), v.clone()]))
                    .collect()
            },
        ),
        (
            "SELECT key, value FROM kv WHERE key < X'0001' ORDER BY key".into(),
            kv(oracle.range(..vec![0, 1])),
        ),
        (
            "SELECT key, value FROM kv WHERE key >= X'ffffff' ORDER BY key".into(),
            kv(oracle.range(vec![0xff; 3]..)),
        ),
        (
            format!(
                "SELECT key, value FROM kv WHERE key > {} ORDER BY key LIMIT 5",
                hex(&a)
            ),
            kv(oracle.range(a.clone()..))
                .into_iter()
                .filter(|r| r[0] != a)
                .take(5)
                .collect(),
        ),
        (
            "SELECT key, value FROM kv ORDER BY key".into(),
            kv(oracle.range::<Vec<u8>, _>(..)),
        ),
        (
            // A filter on the value: DataFusion's.
            "SELECT key, value FROM kv WHERE value = X'6c617465' ORDER BY key".into(),
            oracle
                .iter()
                .filter(|(_, v)| v.as_slice() == b"late")
                .map(|(k, v)| vec![k.clone(), v.clone()])
                .collect(),
        ),
    ];
    for parts in [1, 3] {
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(parts));
        ctx.register_table("kv", Arc::new(StrataLsmTable::open(dir.path()).unwrap()))
            .unwrap();
        for (sql, want) in &cases {
            let mut got = binary_rows(&ctx, sql).await;
            if !sql.contains("ORDER BY") {
                got.sort();
            }
            assert_eq!(&got, want, "{parts} partitions: {sql}");
        }
        assert!(cases[3].1.len() > 100 && cases[5].1.len() > 100);
        let p = plan(
            &ctx,
            &format!("SELECT key FROM kv WHERE key BETWEEN {} AND {}", hex(&a), hex(&b)),
        )
        .await;
        assert!(
            p.contains("StrataLsmScanExec") && !p.contains("FilterExec"),
            "{p}"
        );
        let p = plan(
            &ctx,
            &format!("SELECT key FROM kv WHERE key > {} LIMIT 3", hex(&a)),
        )
        .await;
        assert!(p.contains("limit=3") && !p.contains("FilterExec"), "{p}");
        let p = plan(&ctx, "SELECT key FROM kv WHERE value = X'00'").await;
        assert!(p.contains("FilterExec"), "{p}");
    }
    // `run_sql` (what `strata sql` runs) registers a store's directory as an
    // LSM table.
    // (On a thread of its own: it runs its own runtime.)
    let path = dir.path().to_path_buf();
    let out = std::thread::spawn(move || {
        strata_datafusion::run_sql(&[("kv".to_string(), path)], "SELECT COUNT(*) FROM kv", 2)
    })
    .join()
    .unwrap()
    .unwrap();
    assert!(out.text.contains(&oracle.len().to_string()), "{}", out.text);
}

/// The first node of `plan` (depth first) that `f` accepts.
fn find_node(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    f: &dyn Fn(&Arc<dyn datafusion::physical_plan::ExecutionPlan>) -> bool,
) -> Option<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
    if f(plan) {
        return Some(plan.clone());
    }
    plan.children().into_iter().find_map(|c| find_node(c, f))
}

/// Every partition's batches (each partition's order is deterministic).
async fn collect_plan(
    plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ctx: &SessionContext,
) -> Vec<RecordBatch> {
    datafusion::physical_plan::collect_partitioned(plan, ctx.task_ctx())
        .await
        .unwrap()
        .concat()
}

/// An index over `keys()` as table `t` and an LSM store as table `kv`, in
/// one context of `partitions` target partitions.
struct Both {
    ctx: SessionContext,
    keys: Vec<u64>,
    oracle: BTreeMap<Vec<u8>, Vec<u8>>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Both {
    fn new(partitions: usize) -> Both {
        use strata_datafusion::StrataLsmTable;
        let keys = keys();
        let dir = build("pgm", &keys);
        let (lsm, oracle) = lsm_store();
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions));
        let t = StrataTable::open(dir.path(), &OpenOptions::default()).unwrap();
        ctx.register_table("t", Arc::new(t)).unwrap();
        ctx.register_table("kv", Arc::new(StrataLsmTable::open(lsm.path()).unwrap()))
            .unwrap();
        Both {
            ctx,
            keys,
            oracle,
            _dirs: (dir, lsm),
        }
    }
}

/// A scan sent through `wire` (as to another process) with its input (the
/// part descriptors) is the same plan and reads the same rows, for indexes
/// and LSM stores; a message from another version or cut short is an
/// error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_cross_the_wire_unchanged() {
    use strata_datafusion::{as_lsm_scan, as_scan, wire};
    let both = Both::new(3);
    let ctx = &both.ctx;
    let queries = [
        "SELECT key, value FROM t WHERE key BETWEEN 100 AND 90000000000",
        "SELECT value FROM t WHERE key IN (0, 1, 5000001, 18446744073709551615)",
        "SELECT key FROM t WHERE key > 5000000 LIMIT 9",
        "SELECT key, value FROM kv WHERE key BETWEEN X'7573657230' AND X'75736572303031'",
        "SELECT value FROM kv WHERE key IN (X'', X'00', X'ffffff', X'7573657230303030303031')",
        "SELECT key FROM kv WHERE key > X'75' LIMIT 4",
        "SELECT key FROM kv",
    ];
    for q in queries {
        let plan = ctx.sql(q).await.unwrap().create_physical_plan().await.unwrap();
        let node = find_node(&plan, &|p| {
            as_scan(p.as_ref()).is_some() || as_lsm_scan(p.as_ref()).is_some()
        })
        .unwrap_or_else(|| panic!("{q}: no scan"));
        let input = node.children()[0].clone();
        let mut buf = Vec::new();
        let back: Arc<dyn datafusion::physical_plan::ExecutionPlan> =
            if let Some(scan) = as_scan(node.as_ref()) {
                wire::encode_scan(scan, &mut buf);
                let back = wire::decode_scan(&buf, input.clone()).unwrap();
                assert_eq!(
                    (back.keys(), back.limit(), back.columns(), back.location()),
                    (scan.keys(), scan.limit(), scan.columns(), scan.location()),
                    "{q}"
                );
                Arc::new(back)
            } else {
                let scan = as_lsm_scan(node.as_ref()).unwrap();
                wire::encode_lsm_scan(scan, &mut buf);
                let back = wire::decode_lsm_scan(&buf, input.clone()).unwrap();
                assert_eq!(
                    (back.keys(), back.limit(), back.columns(), back.location()),
                    (scan.keys(), scan.limit(), scan.columns(), scan.location()),
                    "{q}"
                );
                Arc::new(back)
            };
        let want = collect_plan(node.clone(), ctx).await;
        let got = collect_plan(back, ctx).await;
        assert_eq!(got, want, "{q}");
        assert!(want.iter().map(|b| b.num_rows()).sum::<usize>() > 0, "{q}");
        // Cut short, or of another version: errors.
        assert!(wire::decode(&buf[..buf.len() - 1], std::slice::from_ref(&input)).is_err());
        let mut other = buf.clone();
        other[8] += 1;
        assert!(wire::decode(&other, std::slice::from_ref(&input)).is_err());
    }
}

/// A scan restricted to some of its partitions (as Ballista hands each task
/// its own: it rebuilds the scan over its input's partitions) reads those
/// partitions' rows only; all of them together are the query's rows, each
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_of_a_scan_read_disjoint_rows() {
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::datasource::source::DataSourceExec;
    use strata_datafusion::{as_lsm_scan, as_scan};
    let both = Both::new(4);
    let (ctx, keys, oracle) = (&both.ctx, &both.keys, &both.oracle);
    let in_list: Vec<String> = keys.iter().step_by(37).map(u64::to_string).collect();
    for (q, total) in [
        ("SELECT key FROM t".to_string(), keys.len()),
        (
            format!("SELECT key FROM t WHERE key IN ({})", in_list.join(", ")),
            in_list.len(),
        ),
        ("SELECT key FROM kv".to_string(), oracle.len()),
    ] {
        let plan = ctx.sql(&q).await.unwrap().create_physical_plan().await.unwrap();
        let node = find_node(&plan, &|p| {
            as_scan(p.as_ref()).is_some() || as_lsm_scan(p.as_ref()).is_some()
        })
        .unwrap();
        let n = node.properties().output_partitioning().partition_count();
        assert!(n > 1, "{q}: {n} partitions");
        let input = node.children()[0].clone();
        let source = (input.as_ref() as &dyn std::any::Any)
            .downcast_ref::<DataSourceExec>()
            .unwrap_or_else(|| panic!("{q}: input {}", input.name()));
        let config = (source.data_source().as_ref() as &dyn std::any::Any)
            .downcast_ref::<MemorySourceConfig>()
            .unwrap();
        let mut seen = 0;
        for p in 0..n {
            let one = MemorySourceConfig::try_new_exec(
                &[config.partitions()[p].clone()],
                config.original_schema(),
                None,
            )
            .unwrap();
            let restricted =
                datafusion::physical_plan::replace_children_if_necessary(node.clone(), vec![one]).unwrap();
            assert_eq!(restricted.properties().output_partitioning().partition_count(), 1);
            let rows: usize = collect_plan(restricted, ctx)
                .await
                .iter()
                .map(|b| b.num_rows())
                .sum();
            seen += rows;
        }
        assert_eq!(seen, total, "{q}");
    }
}
