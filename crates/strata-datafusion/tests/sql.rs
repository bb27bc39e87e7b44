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
