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
//! On `osm-like` keys, whose segments are short. A later pass of the
//! zero-interval kinds reads a window of whole segments: one segment longer
//! than the window (a linear stretch of m keys) is read whole, m × 8 bytes
//! (known limit, docs/results/build.md).

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

#[test]
fn streamed_builds_hold_buffers_not_keys() {
    let n: usize = std::env::var("STRATA_MEM_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(N);
    let only = std::env::var("STRATA_MEM_KINDS").unwrap_or_default();
    let keys = strata::data::generate(strata::data::Dist::OsmLike, n, 7).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let opts = BuildOptions::default();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let mut peaks = Vec::new();
    for kind in [
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
    ] {
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
        assert_eq!(built.n, n as u64, "{kind}");
        let peak = PEAK.load(Relaxed).saturating_sub(base);
        peaks.push((kind, (peak >> 20) as u64, built.memory_bytes >> 20));
        std::fs::remove_dir_all(&out).unwrap();
    }
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
