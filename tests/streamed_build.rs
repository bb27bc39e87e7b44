//! Builds from a record stream (issue 23): every kind builds the same index
//! from records read once as from records in memory; the kinds that stream
//! hold none of them; a bad stream is a typed error that leaves nothing.

use strata::index::{BuildOptions, IndexSpec, OpenOptions, RecordStream, Records};
use strata::{Error, Result};

fn keys() -> Vec<u64> {
    let mut x = 99u64;
    let mut k: Vec<u64> = (0..30_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x >> (x % 24)
        })
        .collect();
    k.push(u64::MAX);
    k.sort_unstable();
    k.dedup();
    k
}

fn stream_of(keys: &[u64]) -> RecordStream<'_> {
    RecordStream::new(keys.iter().enumerate().map(|(i, &k)| Ok((k, i as u64 * 3))))
}

#[test]
fn every_kind_builds_the_same_from_a_stream() {
    let keys = keys();
    let values: Vec<u64> = (0..keys.len() as u64).map(|i| i * 3).collect();
    let tmp = tempfile::tempdir().unwrap();
    let probes: Vec<u64> = keys
        .iter()
        .step_by(97)
        .flat_map(|&k| [k, k.wrapping_add(1), k.wrapping_sub(1)])
        .collect();
    for kind in strata::registry::kinds().iter().map(|k| k.name()) {
        if kind == "lsm" {
            continue; // byte-string keys: its own tests
        }
        let spec: IndexSpec = kind.parse().unwrap();
        let (a, b) = (
            tmp.path().join(format!("{kind}-mem")),
            tmp.path().join(format!("{kind}-stream")),
        );
        let opts = BuildOptions::default();
        let mem =
            strata::registry::build_records(&spec, Records::new(&keys, &values).unwrap(), &a, &opts).unwrap();
        let s = stream_of(&keys);
        let st = strata::registry::build_records(&spec, Records::stream(&s), &b, &opts).unwrap();
        assert_eq!(
            (mem.n, mem.models, mem.memory_bytes),
            (st.n, st.models, st.memory_bytes),
            "{kind}"
        );
        let (x, y) = (
            strata::registry::open(&a, &OpenOptions::default()).unwrap(),
            strata::registry::open(&b, &OpenOptions::default()).unwrap(),
        );
        for &p in &probes {
            assert_eq!(x.get(p).unwrap(), y.get(p).unwrap(), "{kind} get {p}");
            assert_eq!(
                x.lower_bound(p).unwrap(),
                y.lower_bound(p).unwrap(),
                "{kind} lower_bound {p}"
            );
        }
        assert_eq!(y.get(keys[7]).unwrap(), Some(21), "{kind}");
    }
}

#[test]
fn a_stream_out_of_order_or_failing_is_an_error_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for kind in ["pgm", "zonemap", "btree", "binary", "rmi", "fiting"] {
        let spec: IndexSpec = kind.parse().unwrap();
        let out = tmp.path().join(kind);
        let mut bad: Vec<u64> = (0..50_000u64).map(|i| i * 2).collect();
        bad.swap(40_000, 40_001);
        let s = RecordStream::new(bad.iter().map(|&k| Ok((k, k))));
        let e = strata::registry::build_records(&spec, Records::stream(&s), &out, &BuildOptions::default())
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::OutOfOrder {
                    position: 40_001,
                    previous: 80_002,
                    got: 80_000
                }
            ),
            "{kind}: {e}"
        );
        assert!(!out.exists(), "{kind}: a failed build left {out:?}");
        // A source failing halfway (a key file cut short).
        let failing = (0..60_000u64).map(|i| -> Result<(u64, u64)> {
            if i == 45_000 {
                Err(Error::invalid("the source broke"))
            } else {
                Ok((i, i))
            }
        });
        let s = RecordStream::new(failing);
        let e = strata::registry::build_records(&spec, Records::stream(&s), &out, &BuildOptions::default())
            .unwrap_err();
        assert!(e.to_string().contains("the source broke"), "{kind}: {e}");
        assert!(!out.exists(), "{kind}");
    }
}

#[test]
fn a_failed_rebuild_from_a_stream_keeps_the_old_index() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("idx");
    let keys = keys();
    let spec: IndexSpec = "pgm".parse().unwrap();
    strata::registry::build(&spec, &keys, &out, &BuildOptions::default()).unwrap();
    let s = RecordStream::new((0..10_000u64).map(|i| Ok((10_000 - i, i))));
    assert!(
        strata::registry::build_records(&spec, Records::stream(&s), &out, &BuildOptions::default()).is_err()
    );
    let idx = strata::registry::open(&out, &OpenOptions::default()).unwrap();
    assert_eq!(idx.get(keys[100]).unwrap(), Some(100));
}
