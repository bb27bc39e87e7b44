//! The workloads as deterministic operation lists over key indexes.
//!
//! Index `i` is the key of id `2 i`; [`Live`] tracks which indexes are
//! present as the plans of one store are made in run order, so each planned
//! read knows whether it must find its key.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use strata::data::{Zipfian, fnv1a64};
use strata::{Error, Result};

/// A db_bench or YCSB workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvWorkload {
    /// `num` puts in key order.
    FillSeq,
    /// `num` puts of every key once, in a random order.
    FillRandom,
    /// `ops` puts of uniformly chosen keys.
    Overwrite,
    /// `ops` gets of uniformly chosen keys.
    ReadRandom,
    /// `ops` gets of keys that were never written (between present ones).
    ReadMissing,
    /// `ops` seeks to uniformly chosen keys, each followed by 10 nexts
    /// (by default: `--scan-length`).
    SeekRandom,
    /// `ops` gets (uniform) spread over the reader threads while one more
    /// thread overwrites present keys until the readers finish; reports reads.
    ReadWhileWriting,
    /// `ops` deletes of uniformly chosen keys.
    DeleteRandom,
    /// YCSB A: 50 % reads, 50 % updates, Zipfian.
    YcsbA,
    /// YCSB B: 95 % reads, 5 % updates, Zipfian.
    YcsbB,
    /// YCSB C: reads only, Zipfian.
    YcsbC,
    /// YCSB D: 95 % reads of the latest keys, 5 % inserts.
    YcsbD,
    /// YCSB E: 95 % short scans (1..=100 entries, Zipfian start), 5 % inserts.
    YcsbE,
    /// YCSB F: 50 % reads, 50 % read-modify-writes, Zipfian.
    YcsbF,
}

/// Entries a `seekrandom` seek reads: the seek and 10 nexts.
pub const SEEK_ENTRIES: u32 = 11;
/// Longest YCSB E scan.
pub const MAX_SCAN: u32 = 100;

impl KvWorkload {
    /// Every workload, in db_bench order then YCSB.
    pub const ALL: [KvWorkload; 14] = [
        KvWorkload::FillSeq,
        KvWorkload::FillRandom,
        KvWorkload::Overwrite,
        KvWorkload::ReadRandom,
        KvWorkload::ReadMissing,
        KvWorkload::SeekRandom,
        KvWorkload::ReadWhileWriting,
        KvWorkload::DeleteRandom,
        KvWorkload::YcsbA,
        KvWorkload::YcsbB,
        KvWorkload::YcsbC,
        KvWorkload::YcsbD,
        KvWorkload::YcsbE,
        KvWorkload::YcsbF,
    ];

    /// The db_bench / YCSB name.
    pub fn name(self) -> &'static str {
        match self {
            KvWorkload::FillSeq => "fillseq",
            KvWorkload::FillRandom => "fillrandom",
            KvWorkload::Overwrite => "overwrite",
            KvWorkload::ReadRandom => "readrandom",
            KvWorkload::ReadMissing => "readmissing",
            KvWorkload::SeekRandom => "seekrandom",
            KvWorkload::ReadWhileWriting => "readwhilewriting",
            KvWorkload::DeleteRandom => "deleterandom",
            KvWorkload::YcsbA => "ycsb-a",
            KvWorkload::YcsbB => "ycsb-b",
            KvWorkload::YcsbC => "ycsb-c",
            KvWorkload::YcsbD => "ycsb-d",
            KvWorkload::YcsbE => "ycsb-e",
            KvWorkload::YcsbF => "ycsb-f",
        }
    }

    /// One line on what the workload does (for `strata kvbench --help`).
    pub fn summary(self) -> &'static str {
        match self {
            KvWorkload::FillSeq => "`num` puts in key order",
            KvWorkload::FillRandom => "`num` puts of every key once, in a random order",
            KvWorkload::Overwrite => "puts of uniformly chosen present keys",
            KvWorkload::ReadRandom => "gets of uniformly chosen present keys",
            KvWorkload::ReadMissing => "gets of keys never written (between present ones)",
            KvWorkload::SeekRandom => "seeks to uniformly chosen keys, each followed by --scan-length nexts",
            KvWorkload::ReadWhileWriting => {
                "gets on the reader threads while one more thread overwrites; reports the reads"
            }
            KvWorkload::DeleteRandom => "deletes of uniformly chosen keys",
            KvWorkload::YcsbA => "YCSB A: 50% reads, 50% updates, Zipfian",
            KvWorkload::YcsbB => "YCSB B: 95% reads, 5% updates, Zipfian",
            KvWorkload::YcsbC => "YCSB C: reads only, Zipfian",
            KvWorkload::YcsbD => "YCSB D: 95% reads of the latest keys, 5% inserts",
            KvWorkload::YcsbE => "YCSB E: 95% short scans (1-100 entries, Zipfian start), 5% inserts",
            KvWorkload::YcsbF => "YCSB F: 50% reads, 50% read-modify-writes, Zipfian",
        }
    }

    /// Whether the workload fills an empty store (it needs no load first).
    pub fn is_fill(self) -> bool {
        matches!(self, KvWorkload::FillSeq | KvWorkload::FillRandom)
    }

    /// Whether the workload changes the store.
    pub fn writes(self) -> bool {
        !matches!(
            self,
            KvWorkload::ReadRandom | KvWorkload::ReadMissing | KvWorkload::SeekRandom | KvWorkload::YcsbC
        )
    }
}

impl std::fmt::Display for KvWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KvWorkload {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        KvWorkload::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = KvWorkload::ALL.iter().map(|w| w.name()).collect();
                Error::invalid(format!(
                    "unknown kvbench workload {s:?}; one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// One planned operation. Ids are key ids (present keys are even).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanOp {
    /// Get `id`; `present` is whether it must be found.
    Get {
        /// Key id.
        id: u64,
        /// Must be found.
        present: bool,
    },
    /// Put `id` (an update or an insert).
    Put {
        /// Key id.
        id: u64,
    },
    /// Delete `id`.
    Delete {
        /// Key id.
        id: u64,
    },
    /// Seek to `id`, then read up to `count` entries.
    Scan {
        /// Key id of the seek.
        id: u64,
        /// Entries to read (the seek's included).
        count: u32,
    },
    /// Get `id` (present), then put it.
    ReadModifyWrite {
        /// Key id.
        id: u64,
    },
}

impl PlanOp {
    /// The key id the operation starts at.
    pub fn id(&self) -> u64 {
        match *self {
            PlanOp::Get { id, .. }
            | PlanOp::Put { id }
            | PlanOp::Delete { id }
            | PlanOp::Scan { id, .. }
            | PlanOp::ReadModifyWrite { id } => id,
        }
    }
}

/// Which key indexes a store holds, as its plans are made in run order.
#[derive(Debug, Clone, Default)]
pub struct Live {
    present: Vec<bool>,
    count: u64,
}

impl Live {
    /// An empty store.
    pub fn new() -> Live {
        Live::default()
    }

    /// Keys present.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// One past the highest index ever written.
    pub fn end(&self) -> u64 {
        self.present.len() as u64
    }

    /// Whether index `i` is present.
    pub fn has(&self, i: u64) -> bool {
        self.present.get(i as usize).copied().unwrap_or(false)
    }

    /// Marks index `i` present (after a put).
    pub fn put(&mut self, i: u64) {
        let i = i as usize;
        if i >= self.present.len() {
            self.present.resize(i + 1, false);
        }
        if let Some(p) = self.present.get_mut(i) {
            if !*p {
                *p = true;
                self.count += 1;
            }
        }
    }

    /// Marks index `i` absent (after a delete).
    pub fn delete(&mut self, i: u64) {
        if let Some(p) = self.present.get_mut(i as usize) {
            if *p {
                *p = false;
                self.count -= 1;
            }
        }
    }

    /// Present indexes, ascending.
    pub fn present_indexes(&self) -> Vec<u64> {
        (0..self.end()).filter(|&i| self.has(i)).collect()
    }
}

/// The id of key index `i` (present keys are even ids).
pub fn id_of_index(i: u64) -> u64 {
    i * 2
}

/// The operations of one workload run, planned against the store's [`Live`]
/// set (which the plan updates for its writes).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The workload.
    pub workload: KvWorkload,
    /// Operations, in order.
    pub ops: Vec<PlanOp>,
    /// Gets the plan expects to find their key (reads of a read-modify-write
    /// included).
    pub expect_found: u64,
}

impl Plan {
    /// Plans `workload` over a store whose keys are `live`: fills write
    /// `num` keys, the others run `ops` operations. Deterministic for `seed`.
    /// A `seekrandom` seek reads 11 entries (the seek and 10 nexts).
    pub fn new(workload: KvWorkload, live: &mut Live, num: u64, ops: u64, seed: u64) -> Result<Plan> {
        Plan::new_seek(workload, live, num, ops, seed, SEEK_ENTRIES)
    }

    /// [`Plan::new`] with `seek_entries` entries per `seekrandom` seek (the
    /// seek's included: a scan length of `L` nexts is `L + 1`; at least 1).
    /// The operations are those of [`Plan::new`] but for the scans' counts.
    pub fn new_seek(
        workload: KvWorkload,
        live: &mut Live,
        num: u64,
        ops: u64,
        seed: u64,
        seek_entries: u32,
    ) -> Result<Plan> {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ fnv1a64(workload as u64));
        let mut out = Vec::with_capacity(if workload.is_fill() { num } else { ops } as usize);
        let mut found = 0u64;
        if !workload.is_fill() && live.end() == 0 {
            return Err(Error::invalid(format!(
                "{workload} needs a loaded store (num > 0)"
            )));
        }
        let end = live.end();
        let records = live.count().max(1);
        let zipf = matches!(
            workload,
            KvWorkload::YcsbA
                | KvWorkload::YcsbB
                | KvWorkload::YcsbC
                | KvWorkload::YcsbD
                | KvWorkload::YcsbE
                | KvWorkload::YcsbF
        )
        .then(|| Zipfian::new(records));
        // YCSB's scrambled Zipfian over the indexes written so far.
        let zipf_index = |rng: &mut Pcg64Mcg, end: u64| -> u64 {
            let rank = zipf.as_ref().map_or(0, |z| z.next(rng));
            fnv1a64(rank) % end.max(1)
        };
        let get = |i: u64, live: &Live, found: &mut u64| {
            let present = live.has(i);
            *found += present as u64;
            PlanOp::Get {
                id: id_of_index(i),
                present,
            }
        };
        match workload {
            KvWorkload::FillSeq => {
                for i in 0..num {
                    live.put(i);
                    out.push(PlanOp::Put { id: id_of_index(i) });
                }
            }
            KvWorkload::FillRandom => {
                let mut order: Vec<u64> = (0..num).collect();
                for k in (1..order.len()).rev() {
                    order.swap(k, rng.random_range(0..=k));
                }
                for i in order {
                    live.put(i);
                    out.push(PlanOp::Put { id: id_of_index(i) });
                }
            }
            KvWorkload::Overwrite => {
                for _ in 0..ops {
                    let i = rng.random_range(0..end);
                    live.put(i);
                    out.push(PlanOp::Put { id: id_of_index(i) });
                }
            }
            KvWorkload::ReadRandom | KvWorkload::ReadWhileWriting => {
                for _ in 0..ops {
                    out.push(get(rng.random_range(0..end), live, &mut found));
                }
            }
            KvWorkload::ReadMissing => {
                for _ in 0..ops {
                    let id = id_of_index(rng.random_range(0..end)) + 1;
                    out.push(PlanOp::Get { id, present: false });
                }
            }
            KvWorkload::SeekRandom => {
                for _ in 0..ops {
                    let id = id_of_index(rng.random_range(0..end));
                    out.push(PlanOp::Scan {
                        id,
                        count: seek_entries.max(1),
                    });
                }
            }
            KvWorkload::DeleteRandom => {
                for _ in 0..ops {
                    let i = rng.random_range(0..end);
                    live.delete(i);
                    out.push(PlanOp::Delete { id: id_of_index(i) });
                }
            }
            KvWorkload::YcsbA | KvWorkload::YcsbB | KvWorkload::YcsbC | KvWorkload::YcsbF => {
                let reads = match workload {
                    KvWorkload::YcsbA | KvWorkload::YcsbF => 0.5,
                    KvWorkload::YcsbB => 0.95,
                    _ => 1.0,
                };
                for _ in 0..ops {
                    let i = zipf_index(&mut rng, end);
                    let read = rng.random::<f64>() < reads;
                    if read {
                        out.push(get(i, live, &mut found));
                    } else if workload == KvWorkload::YcsbF && live.has(i) {
                        found += 1;
                        out.push(PlanOp::ReadModifyWrite { id: id_of_index(i) });
                    } else {
                        live.put(i);
                        out.push(PlanOp::Put { id: id_of_index(i) });
                    }
                }
            }
            KvWorkload::YcsbD | KvWorkload::YcsbE => {
                let mut next = live.end();
                for _ in 0..ops {
                    if rng.random::<f64>() < 0.05 {
                        live.put(next);
                        out.push(PlanOp::Put {
                            id: id_of_index(next),
                        });
                        next += 1;
                    } else if workload == KvWorkload::YcsbD {
                        // Latest: a Zipfian distance back from the newest key.
                        let back = zipf.as_ref().map_or(0, |z| z.next(&mut rng));
                        out.push(get(next.saturating_sub(1 + back), live, &mut found));
                    } else {
                        let id = id_of_index(zipf_index(&mut rng, next));
                        let count = rng.random_range(1..=MAX_SCAN);
                        out.push(PlanOp::Scan { id, count });
                    }
                }
            }
        }
        Ok(Plan {
            workload,
            ops: out,
            expect_found: found,
        })
    }

    /// How many operations of each kind the plan holds.
    pub fn counts(&self) -> super::KvCounts {
        let mut c = super::KvCounts::default();
        for op in &self.ops {
            match op {
                PlanOp::Get { .. } => c.gets += 1,
                PlanOp::Put { .. } => c.puts += 1,
                PlanOp::Delete { .. } => c.deletes += 1,
                PlanOp::Scan { .. } => c.seeks += 1,
                PlanOp::ReadModifyWrite { .. } => {
                    c.gets += 1;
                    c.puts += 1;
                    c.rmws += 1;
                }
            }
        }
        c.found = self.expect_found;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(num: u64) -> Live {
        let mut live = Live::new();
        Plan::new(KvWorkload::FillSeq, &mut live, num, 0, 1).unwrap_or_else(|e| panic!("{e}"));
        live
    }

    #[test]
    fn names_round_trip() {
        for w in KvWorkload::ALL {
            assert_eq!(w.name().parse::<KvWorkload>().ok(), Some(w));
        }
        assert!("nope".parse::<KvWorkload>().is_err());
    }

    #[test]
    fn fills_write_every_key_once() {
        for w in [KvWorkload::FillSeq, KvWorkload::FillRandom] {
            let mut live = Live::new();
            let p = Plan::new(w, &mut live, 1000, 0, 7).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.ops.len(), 1000);
            assert_eq!(live.count(), 1000);
            let mut ids: Vec<u64> = p.ops.iter().map(|o| o.id()).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), 1000);
        }
    }

    #[test]
    fn reads_know_what_they_find() {
        let mut live = loaded(1000);
        let p = Plan::new(KvWorkload::ReadRandom, &mut live, 1000, 500, 3).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.expect_found, 500);
        let p = Plan::new(KvWorkload::ReadMissing, &mut live, 1000, 500, 3).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.expect_found, 0);
        assert!(p.ops.iter().all(|o| o.id() % 2 == 1));
    }

    #[test]
    fn ycsb_mixes_are_near_their_shares_and_deterministic() {
        let base = loaded(2000);
        for (w, read_share) in [
            (KvWorkload::YcsbA, 0.5),
            (KvWorkload::YcsbB, 0.95),
            (KvWorkload::YcsbC, 1.0),
            (KvWorkload::YcsbD, 0.95),
            (KvWorkload::YcsbF, 0.5),
        ] {
            let mut live = base.clone();
            let p = Plan::new(w, &mut live, 2000, 4000, 9).unwrap_or_else(|e| panic!("{e}"));
            let mut again = base.clone();
            let q = Plan::new(w, &mut again, 2000, 4000, 9).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.ops, q.ops, "{w}: same seed, same plan");
            let reads = p.ops.iter().filter(|o| matches!(o, PlanOp::Get { .. })).count() as f64;
            assert!((reads / 4000.0 - read_share).abs() < 0.03, "{w}: {reads}");
            let rmws = p.counts().rmws as f64;
            assert_eq!(
                p.expect_found as f64,
                reads + rmws,
                "{w}: every read finds its key"
            );
        }
        let mut live = base.clone();
        let p = Plan::new(KvWorkload::YcsbE, &mut live, 2000, 4000, 9).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            p.ops
                .iter()
                .all(|o| !matches!(o, PlanOp::Scan { count, .. } if *count == 0 || *count > MAX_SCAN))
        );
        assert_eq!(live.count(), 2000 + p.counts().puts);
    }

    #[test]
    fn seek_entries_change_only_the_scan_counts() {
        let base = loaded(1000);
        let p = Plan::new(KvWorkload::SeekRandom, &mut base.clone(), 1000, 300, 4)
            .unwrap_or_else(|e| panic!("{e}"));
        let q = Plan::new_seek(KvWorkload::SeekRandom, &mut base.clone(), 1000, 300, 4, 1001)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.ops.len(), q.ops.len());
        for (a, b) in p.ops.iter().zip(&q.ops) {
            assert_eq!(a.id(), b.id());
            assert!(matches!(a, PlanOp::Scan { count, .. } if *count == SEEK_ENTRIES));
            assert!(matches!(b, PlanOp::Scan { count: 1001, .. }));
        }
    }

    #[test]
    fn deletes_update_the_live_set() {
        let mut live = loaded(100);
        Plan::new(KvWorkload::DeleteRandom, &mut live, 100, 50, 5).unwrap_or_else(|e| panic!("{e}"));
        let p = Plan::new(KvWorkload::ReadRandom, &mut live, 100, 1000, 6).unwrap_or_else(|e| panic!("{e}"));
        assert!(p.expect_found < 1000);
        assert!(live.count() < 100 && live.count() >= 50);
    }
}
