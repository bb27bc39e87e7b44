//! The heap a streamed build holds (issue 23): every kind with a streaming
//! recipe builds 8M keys (64 MB of keys, 128 MB of records) from a record
//! stream while its heap stays far below the keys' size: the model plus
//! bounded buffers (the pipe's chunks, the partitions of the parallel
//! segmentation, the windows of the later passes, the read-ahead). Measured
//! with a counting allocator (bytes live at once), not with timings or RSS.
//!
//! `STRATA_MEM_N=100000000 STRATA_MEM_KINDS=pgm,rs cargo test --release
//! --test build_memory -- --nocapture` measures other sizes and kinds
//! (docs/results/build.md).
//!
//! A `db` merge, whose static stage is designed from the new run read back
//! in passes, holds its pages' bounds and buffers, not its keys
//! (`db_merges_hold_page_bounds_not_keys`).
//!
//! `air` tunes over candidate layers that grow with the keys (those of the
//! sub-page granularities most): since session 34 their bands are fitted a
//! partition at a time and every step, zone or band candidate past 4 MiB is
//! spilled to a temporary file, so its heap is buffers too (19 MiB at 8M
//! keys; 115 before session 33, 38 before session 34), as with
//! `lambda_low=1024` (79 MiB before session 33, when it read every key).
//!
//! On `osm-like` keys, whose segments are short, and on keys whose models
//! are one segment over all keys (`one_segment_over_all_keys_is_read_in_passes`):
//! a later pass of the zero-interval kinds reads a window of whole segments,
//! and a segment longer than the window in passes over its keys (until
//! session 32 it was read whole, 8 bytes per key).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use strata::index::{BuildOptions, IndexSpec, RecordStream, Records};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to `System`, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let now = LIVE.fetch_add(new_size - layout.size(), Relaxed) + new_size - layout.size();
                PEAK.fetch_max(now, Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const N: usize = 8_000_000;

/// The tests of this binary share the counter: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Every kind of `kinds` (those of them in `STRATA_MEM_KINDS`) built from a record
/// stream of `keys` on 2 threads: its peak heap (MiB) and model (MiB).
fn build_peaks(keys: &[u64], kinds: &[&'static str]) -> Vec<(&'static str, u64, u64)> {
    let only = std::env::var("STRATA_MEM_KINDS").unwrap_or_default();
    let tmp = tempfile::tempdir().unwrap();
    let opts = BuildOptions::default();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let mut peaks = Vec::new();
    for &kind in kinds {
        if !only.is_empty() && !only.split(',').any(|k| k == kind) {
            continue;
        }
        let spec: IndexSpec = kind.parse().unwrap();
        let out = tmp.path().join(kind);
        let base = LIVE.load(Relaxed);
        PEAK.store(base, Relaxed);
        let built = pool.install(|| {
            let s = RecordStream::new(keys.iter().enumerate().map(|(i, &k)| Ok((k, i as u64))));
            strata::registry::build_records(&spec, Records::stream(&s), &out, &opts).unwrap()
        });
        assert_eq!(built.n, keys.len() as u64, "{kind}");
        let peak = PEAK.load(Relaxed).saturating_sub(base);
        peaks.push((kind, (peak >> 20) as u64, built.memory_bytes >> 20));
        std::fs::remove_dir_all(&out).unwrap();
    }
    peaks
}

/// The kinds with a streaming recipe.
const KINDS: [&str; 12] = [
    "btree",
    "binary",
    "zonemap",
    "gap-zonemap-d",
    "btree-static",
    "pgm",
    "pgm-disk",
    "pgm-disk-cpr",
    "rs",
    "rs-disk",
    "rmi",
    "fiting-static",
];

fn n_keys() -> usize {
    std::env::var("STRATA_MEM_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(N)
}

#[test]
fn streamed_builds_hold_buffers_not_keys() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let keys = strata::data::generate(strata::data::Dist::OsmLike, n_keys(), 7).unwrap();
    // `air` tunes over candidate layers that grow with the keys (an equal
    // band of 16 records: 12 MB at 8M keys), fitted in parts and spilled
    // past 4 MiB (19 MiB of heap at 8M keys; 38 MiB before session 34).
    let peaks = build_peaks(&keys, &[&KINDS[..], &["air", "air:lambda_low=1024"]].concat());
    eprintln!("peak heap MiB, model MiB: {peaks:?}");
    for &(kind, peak, model) in &peaks {
        // 64 MB of keys; the buffers: 4 MiB of pipe, up to 24 MiB of
        // partitions, 4 MiB windows and 1 MiB of reads per thread.
        assert!(
            peak < model + 40,
            "{kind} held {peak} MiB (model {model} MiB): {peaks:?}"
        );
    }
}

/// Keys on one line but for a little noise: every model is one segment (a
/// spline of two points) over all of them, longer than any window or
/// partition. Its keys are read in passes, not held (until session 32 the
/// zero-interval kinds' later passes read such a segment whole: 189 MiB
/// for `pgm-disk-cpr` over 8M such keys).
#[test]
fn one_segment_over_all_keys_is_read_in_passes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Half the keys of the other test (its slowest builds, `pgm-disk(-cpr)`,
    // try many windows over such keys): 32 MB; 94 MiB of heap for
    // `pgm-disk-cpr` when the segment was read whole.
    let keys: Vec<u64> = (0..(n_keys() / 2) as u64)
        .map(|i| i * 1000 + (i * 7919) % 97)
        .collect();
    let peaks = build_peaks(&keys, &KINDS);
    eprintln!("peak heap MiB, model MiB (one segment): {peaks:?}");
    for &(kind, peak, model) in &peaks {
        assert!(
            peak < model + 40,
            "{kind} held {peak} MiB (model {model} MiB): {peaks:?}"
        );
    }
}

/// A merge of the hybrid store with a zero-interval static kind (the
/// designs that pass over the keys most often) over 8M keys: the heap it
/// adds stays far below the 64 MB its keys would take (it kept every key
/// until session 26: 8 bytes each).
#[test]
fn db_merges_hold_page_bounds_not_keys() {
    use strata::db::{Options, StaticKind, SyncPolicy};
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let n = n_keys();
    let keys = strata::data::generate(strata::data::Dist::OsmLike, n, 11).unwrap();
    let mut peaks = Vec::new();
    for kind in ["pgm-disk-cpr", "pgm-disk", "rs-disk"] {
        let tmp = tempfile::tempdir().unwrap();
        let opts = Options {
            sync: SyncPolicy::Never,
            memory_budget: 64 << 20,
            static_kind: StaticKind::Spec(kind.to_string()),
            background_merge: false,
            ..Options::default()
        };
        let dir = strata::storage::FsDirectory::create_all(tmp.path()).unwrap();
        // All but every 8000th key loaded; those written and merged in.
        let later = |i: usize| i % 8000 == 7;
        let loaded = strata::Db::bulk_load(
            &dir,
            &opts,
            keys.iter()
                .enumerate()
                .filter(|&(i, _)| !later(i))
                .map(|(_, &k)| (k, k)),
        )
        .unwrap();
        let db = strata::Db::open(std::sync::Arc::new(dir), opts).unwrap();
        let written: Vec<u64> = keys
            .iter()
            .enumerate()
            .filter(|&(i, _)| later(i))
            .map(|(_, &k)| k)
            .collect();
        for &k in &written {
            db.put(k, k).unwrap();
        }
        let base = LIVE.load(Relaxed);
        PEAK.store(base, Relaxed);
        db.flush().unwrap();
        db.wait_for_merge().unwrap();
        let peak = PEAK.load(Relaxed).saturating_sub(base);
        let stats = db.stats().unwrap();
        assert_eq!(stats.merges, 1, "{kind}");
        assert_eq!(db.count().unwrap(), loaded + written.len() as u64, "{kind}");
        for &k in written.iter().step_by(97) {
            assert_eq!(db.get(k).unwrap(), Some(k), "{kind}");
        }
        db.close().unwrap();
        peaks.push((kind, (peak >> 20) as u64, stats.static_index_bytes >> 20));
    }
    eprintln!("merge peak heap MiB, static model MiB: {peaks:?}");
    let keys_mib = ((n * 8) >> 20) as u64;
    for &(kind, peak, model) in &peaks {
        // What a streamed build holds (see above), far below the keys.
        assert!(
            peak < model + 40 && peak < keys_mib,
            "{kind}: the merge held {peak} MiB (model {model} MiB, keys {keys_mib} MiB): {peaks:?}"
        );
    }
}
