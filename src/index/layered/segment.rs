//! The optimal segmentation (PGM's PLA) of every key of a design's first
//! pass, cut into partitions segmented in parallel while later keys still
//! arrive, and stitched into exactly the sequential result (issue 23's
//! parallel segmentation; the stitching and its proof: `model::PlaStitcher`).
//!
//! Over a piped or stored run ([`Keys::Piped`], [`Keys::Run`]) the keys are
//! gathered into partitions of [`PART_KEYS`] keys as the pass hands them
//! over; each full partition is segmented on a rayon worker while the pass
//! goes on, and the partitions are stitched in order as their segmentations
//! come back. Memory: at most [`PARTS_IN_FLIGHT`] partitions handed to
//! workers and not yet stitched, the one being filled and stitched ones kept
//! for reuse (a buffer is allocated only when none is free), at most
//! `(PARTS_IN_FLIGHT + 2) × PART_KEYS × 8` bytes = 24 MiB whatever the
//! number of keys, plus the segments (the model). Keys in memory
//! ([`Keys::Slice`]) are segmented in place, partitions in parallel. With
//! one rayon thread it is the plain sequential pass, nothing added.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use rayon::prelude::*;

use super::keys::Keys;
use crate::model::{IntervalPoint, PlaPart, PlaStitcher, PlaStream, Segment, segment_part};
use crate::{Error, Result};

/// Keys per partition segmented on a worker (4 MiB of keys).
pub(super) const PART_KEYS: usize = 1 << 19;

/// Partitions handed to workers and not yet stitched, at most.
pub(super) const PARTS_IN_FLIGHT: usize = 4;

/// The optimal PLA of `keys`, key `i` with the interval `interval(i)`, in
/// one pass over them (over a run being written: as it is written). The
/// same segments as [`crate::model::optimal_pla_points`] over all points,
/// whatever the threads. O(n) work, spread over the rayon pool's threads.
pub(super) fn optimal_segments<F>(keys: Keys<'_>, interval: F) -> Result<Vec<Segment>>
where
    F: Fn(usize) -> (i128, i128) + Sync,
{
    optimal_segments_with(keys, &interval, PART_KEYS, PARTS_IN_FLIGHT)
}

/// [`optimal_segments`] with partitions of `part_keys` keys and at most
/// `in_flight` of them unstitched (both at least 1).
fn optimal_segments_with<F>(
    keys: Keys<'_>,
    interval: &F,
    part_keys: usize,
    in_flight: usize,
) -> Result<Vec<Segment>>
where
    F: Fn(usize) -> (i128, i128) + Sync,
{
    let part_keys = part_keys.max(1);
    if rayon::current_num_threads() <= 1 {
        return sequential(keys, interval);
    }
    if let Keys::Slice(all) = keys {
        let parts: Vec<PlaPart> = all
            .par_chunks(part_keys)
            .enumerate()
            .map(|(p, c)| segment_part(p * part_keys, points(p * part_keys, c, interval)))
            .collect();
        let mut st = PlaStitcher::new();
        for (p, (part, c)) in parts.into_iter().zip(all.chunks(part_keys)).enumerate() {
            st.stitch(part, points(p * part_keys, c, interval))?;
        }
        return Ok(st.finish());
    }
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut pipeline = Pipeline {
        interval,
        part_keys,
        in_flight: in_flight.max(1),
        stitcher: PlaStitcher::new(),
        spawned: 0,
        stitched: 0,
        done: BTreeMap::new(),
        spare: Vec::new(),
        tx,
        rx,
    };
    rayon::scope(|s| pipeline.run(s, keys))?;
    Ok(pipeline.stitcher.finish())
}

/// The plain sequential pass (one thread).
fn sequential<F>(keys: Keys<'_>, interval: &F) -> Result<Vec<Segment>>
where
    F: Fn(usize) -> (i128, i128) + Sync,
{
    let mut pla = PlaStream::new();
    let mut segs = Vec::new();
    keys.for_each_all(|i, c| {
        for (j, &k) in c.iter().enumerate() {
            let (lo, hi) = interval(i + j);
            if let Some(s) = pla.push(k, lo, hi) {
                segs.push(s);
            }
        }
        Ok(())
    })?;
    segs.extend(pla.finish());
    Ok(segs)
}

/// The points of `keys`, the first of which is key `start` of the input.
fn points<'a, F>(start: usize, keys: &'a [u64], interval: &'a F) -> impl Iterator<Item = IntervalPoint> + 'a
where
    F: Fn(usize) -> (i128, i128),
{
    keys.iter().enumerate().map(move |(j, &k)| {
        let (lo, hi) = interval(start + j);
        (k, lo, hi)
    })
}

/// A partition's number, its keys, and its segmentation (`None`: the
/// worker failed).
type Done = (usize, Vec<u64>, Option<PlaPart>);

/// Partitions gathered from a pass, segmented on workers, stitched in order.
struct Pipeline<'f, F> {
    interval: &'f F,
    part_keys: usize,
    in_flight: usize,
    stitcher: PlaStitcher,
    /// Partitions handed out (the next one's number).
    spawned: usize,
    /// Partitions stitched (the next one to stitch).
    stitched: usize,
    /// Segmented partitions waiting for the ones before them.
    done: BTreeMap<usize, (Vec<u64>, PlaPart)>,
    /// Stitched partitions' buffers, for the next ones.
    spare: Vec<Vec<u64>>,
    tx: Sender<Done>,
    rx: Receiver<Done>,
}

impl<'f, F> Pipeline<'f, F>
where
    F: Fn(usize) -> (i128, i128) + Sync,
{
    fn run<'s>(&mut self, s: &rayon::Scope<'s>, keys: Keys<'_>) -> Result<()>
    where
        'f: 's,
    {
        let mut buf: Vec<u64> = Vec::with_capacity(self.part_keys);
        let mut buf_start = 0usize;
        keys.for_each_all(|i, chunk| {
            let mut pos = i;
            let mut rest = chunk;
            while !rest.is_empty() {
                if buf.is_empty() {
                    buf_start = pos;
                }
                let take = (self.part_keys - buf.len()).min(rest.len());
                let (head, tail) = rest.split_at(take);
                buf.extend_from_slice(head);
                (pos, rest) = (pos + take, tail);
                if buf.len() == self.part_keys {
                    let next = self
                        .spare
                        .pop()
                        .unwrap_or_else(|| Vec::with_capacity(self.part_keys));
                    let full = std::mem::replace(&mut buf, next);
                    self.spawn(s, buf_start, full);
                    while self.spawned - self.stitched >= self.in_flight {
                        self.receive(true)?;
                    }
                }
            }
            // Stitch what is ready, so its keys are freed early.
            self.receive(false)
        })?;
        // The last, partial partition: segmented here, meanwhile the
        // workers finish theirs.
        if !buf.is_empty() {
            let part = segment_part(buf_start, points(buf_start, &buf, self.interval));
            self.done.insert(self.spawned, (buf, part));
            self.spawned += 1;
        }
        while self.stitched < self.spawned {
            self.receive(true)?;
        }
        Ok(())
    }

    /// Hands partition `keys` (key `start` first) to a worker.
    fn spawn<'s>(&mut self, s: &rayon::Scope<'s>, start: usize, keys: Vec<u64>)
    where
        'f: 's,
    {
        let (no, tx, interval) = (self.spawned, self.tx.clone(), self.interval);
        self.spawned += 1;
        s.spawn(move |_| {
            let part = catch_unwind(AssertUnwindSafe(|| {
                segment_part(start, points(start, &keys, interval))
            }))
            .ok();
            // The receiver lives until every partition is stitched.
            let _ = tx.send((no, keys, part));
        });
    }

    /// Takes the segmentations that came back (with `block`, waiting for one
    /// if the next partition to stitch is not among them yet), and stitches
    /// every partition whose predecessors are stitched.
    fn receive(&mut self, block: bool) -> Result<()> {
        let mut next = if block && !self.done.contains_key(&self.stitched) {
            Some(self.wait()?)
        } else {
            None
        };
        loop {
            let got = match next.take() {
                Some(d) => d,
                None => match self.rx.try_recv() {
                    Ok(d) => d,
                    Err(_) => break,
                },
            };
            let (no, keys, part) = got;
            let part = part.ok_or_else(|| Error::invalid(format!("segmenting key partition {no} failed")))?;
            self.done.insert(no, (keys, part));
        }
        while let Some((keys, part)) = self.done.remove(&self.stitched) {
            let start = part.start();
            self.stitcher.stitch(part, points(start, &keys, self.interval))?;
            self.stitched += 1;
            // Buffers are kept for the partitions to come (allocated and
            // freed by the hundred, the allocator would hold far more than
            // the pipeline uses); never more than are in flight at once.
            if self.spare.len() < self.in_flight {
                let mut keys = keys;
                keys.clear();
                self.spare.push(keys);
            }
        }
        Ok(())
    }

    /// The next segmentation to come back. On a rayon worker (the pipeline
    /// runs on one) it runs queued partitions itself while it waits, so a
    /// pool whose other threads are busy still makes progress.
    fn wait(&self) -> Result<Done> {
        let gone = || Error::invalid("a key partition's worker is gone");
        loop {
            match self.rx.try_recv() {
                Ok(d) => return Ok(d),
                Err(TryRecvError::Disconnected) => return Err(gone()),
                Err(TryRecvError::Empty) => {}
            }
            match rayon::yield_now() {
                Some(rayon::Yield::Executed) => {}
                None => return self.rx.recv().map_err(|_| gone()),
                Some(_) => match self.rx.recv_timeout(Duration::from_millis(1)) {
                    Ok(d) => return Ok(d),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return Err(gone()),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::DataRun;
    use crate::index::layered::keys::Pipe;
    use crate::storage::{Directory, MemDirectory};

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    /// Segments `keys` in memory, from a run, and piped (uneven chunks)
    /// with `threads` threads and tiny partitions; each must equal the
    /// sequential segmentation.
    fn check(keys: &[u64], eps: i128, threads: usize, part_keys: usize, in_flight: usize) {
        let interval = move |i: usize| (i as i128 - eps, i as i128 + eps);
        let want = crate::model::optimal_pla_points(points(0, keys, &interval));
        let dir = MemDirectory::new();
        DataRun::write_ranked(&dir, "r", keys, 4096).unwrap();
        let run = DataRun::open(dir.open_read("r").unwrap()).unwrap();
        pool(threads).install(|| {
            let seg = |k: Keys<'_>| optimal_segments_with(k, &interval, part_keys, in_flight).unwrap();
            assert_eq!(seg(Keys::Slice(keys)), want, "slice");
            assert_eq!(seg(Keys::Run(&run)), want, "run");
            let (pipe, tx) = Pipe::new();
            let piped = std::thread::scope(|s| {
                s.spawn(|| {
                    let (mut i, mut step) = (0, 1);
                    while i < keys.len() {
                        let j = (i + step).min(keys.len());
                        let _ = tx.send(keys[i..j].to_vec());
                        i = j;
                        step = step * 7 % 997 + 1;
                    }
                    drop(tx);
                    pipe.finish(dir.open_read("r").and_then(DataRun::open));
                });
                let got = seg(Keys::Piped(&pipe));
                pipe.close();
                got
            });
            assert_eq!(piped, want, "piped");
        });
    }

    fn keys_of(n: usize, seed: u64, shift: u32) -> Vec<u64> {
        let mut x = seed | 1;
        let mut v: Vec<u64> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x >> shift
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn parallel_segments_equal_sequential_ones() {
        for (n, shift) in [(0usize, 0u32), (1, 0), (5_000, 40), (30_000, 0), (30_000, 44)] {
            let keys = keys_of(n, n as u64 + 3, shift);
            for (threads, part, fl) in [(1, 100, 2), (2, 1, 1), (2, 37, 1), (3, 1_000, 2), (4, 4_096, 4)] {
                for eps in [0i128, 4, 64] {
                    check(&keys, eps, threads, part, fl);
                }
            }
        }
        // Dense runs between huge gaps, and the top of the key space.
        let mut runs: Vec<u64> = (0..30u64)
            .flat_map(|r| (0..500u64).map(move |i| r * (1 << 58) + i * 3))
            .collect();
        runs.extend((0..700u64).map(|i| u64::MAX - 700 + i));
        runs.push(u64::MAX);
        runs.dedup();
        check(&runs, 2, 3, 333, 2);
        // One segment across every partition: the stitcher pushes them all.
        let line: Vec<u64> = (0..20_000u64).map(|i| i * 5).collect();
        check(&line, 1, 2, 999, 3);
    }

    #[test]
    fn a_failed_pass_is_an_error() {
        let (pipe, tx) = Pipe::new();
        pipe.finish(Err(Error::invalid("no run here")));
        drop(tx);
        let e = pool(2)
            .install(|| optimal_segments_with(Keys::Piped(&pipe), &|i: usize| (i as i128, i as i128), 4, 2))
            .unwrap_err();
        assert!(e.to_string().contains("no run here"), "{e}");
    }
}
