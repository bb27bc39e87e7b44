//! Operation streams: the workloads of Lan et al. and YCSB.
//!
//! A [`WorkloadPlan`] says which records to bulk-load and which operations to
//! run, each with the answer it must get. Values are checkable: a record's
//! value is the rank of its key in the full key file, plus `version << 40`
//! after `version` updates. So every answer in every benchmark is verified.

use std::collections::HashMap;
use std::str::FromStr;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::dist::fnv1a64;
use crate::{Error, Result};

/// Length of a scan of the `scan` workload (the lookup plus the next 99).
pub const SCAN_LEN: u32 = 100;

/// A workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Lookups of existing keys (Lan: lookup-only).
    Lookup,
    /// Lookups of keys that are absent.
    LookupMiss,
    /// A lookup and the next 99 records (Lan: scan-only).
    Scan,
    /// Bulk-load half the keys (random half), insert the other half (Lan).
    WriteOnly,
    /// Half bulk-loaded, then 18 lookups : 2 inserts, repeated (Lan).
    ReadHeavy,
    /// Half bulk-loaded, then 2 lookups : 18 inserts, repeated (Lan).
    WriteHeavy,
    /// Half bulk-loaded, then 10 lookups : 10 inserts, repeated (Lan).
    Balanced,
    /// YCSB A: 50% reads, 50% updates.
    YcsbA,
    /// YCSB B: 95% reads, 5% updates.
    YcsbB,
    /// YCSB C: 100% reads.
    YcsbC,
    /// YCSB D: 95% reads of the latest records, 5% inserts.
    YcsbD,
    /// YCSB E: 95% short scans (1..=100 records), 5% inserts.
    YcsbE,
    /// YCSB F: 50% reads, 50% read-modify-writes.
    YcsbF,
    /// Zhang et al. §10.1.1 read-only (YCSB C): a random 15/16 of the keys
    /// bulk-loaded, then uniform reads.
    YcsbReadOnly,
    /// Zhang et al. §10.1.1 write-only: 15/16 bulk-loaded, then inserts of
    /// the other keys in random order.
    YcsbWriteOnly,
    /// Zhang et al. §10.1.1 balanced: 15/16 bulk-loaded, then 50% inserts
    /// and 50% uniform reads of present keys, in random order.
    YcsbBalanced,
}

impl Workload {
    /// Every workload, in `strata list` order: the table the parser
    /// ([`Workload::from_str`](std::str::FromStr)), [`Workload::NAMES`] and
    /// the CLI's help read.
    pub const ALL: &'static [Workload] = &ALL;

    /// Every workload name, in the order of [`Workload::ALL`].
    pub const NAMES: &'static [&'static str] = &NAMES;

    /// The workload's name.
    pub const fn name(&self) -> &'static str {
        match self {
            Workload::Lookup => "lookup",
            Workload::LookupMiss => "lookup-miss",
            Workload::Scan => "scan",
            Workload::WriteOnly => "write-only",
            Workload::ReadHeavy => "read-heavy",
            Workload::WriteHeavy => "write-heavy",
            Workload::Balanced => "balanced",
            Workload::YcsbA => "ycsb-a",
            Workload::YcsbB => "ycsb-b",
            Workload::YcsbC => "ycsb-c",
            Workload::YcsbD => "ycsb-d",
            Workload::YcsbE => "ycsb-e",
            Workload::YcsbF => "ycsb-f",
            Workload::YcsbReadOnly => "ycsb-read-only",
            Workload::YcsbWriteOnly => "ycsb-write-only",
            Workload::YcsbBalanced => "ycsb-balanced",
        }
    }

    /// Other names the parser takes for the workload.
    pub const fn aliases(&self) -> &'static [&'static str] {
        match self {
            Workload::Lookup => &["lookup-only"],
            Workload::Scan => &["scan-only"],
            Workload::WriteOnly => &["insert"],
            Workload::YcsbA => &["a"],
            Workload::YcsbB => &["b"],
            Workload::YcsbC => &["c"],
            Workload::YcsbD => &["d"],
            Workload::YcsbE => &["e"],
            Workload::YcsbF => &["f"],
            _ => &[],
        }
    }

    /// What the workload does, in one line (for help texts).
    pub const fn summary(&self) -> &'static str {
        match self {
            Workload::Lookup => "lookups of existing keys",
            Workload::LookupMiss => "lookups of absent keys",
            Workload::Scan => "a lookup and the next 99 records",
            Workload::WriteOnly => "half the keys bulk-loaded, the other half inserted (Lan)",
            Workload::ReadHeavy => "half bulk-loaded, then 18 lookups : 2 inserts (Lan)",
            Workload::WriteHeavy => "half bulk-loaded, then 2 lookups : 18 inserts (Lan)",
            Workload::Balanced => "half bulk-loaded, then 10 lookups : 10 inserts (Lan)",
            Workload::YcsbA => "YCSB A: 50% reads, 50% updates",
            Workload::YcsbB => "YCSB B: 95% reads, 5% updates",
            Workload::YcsbC => "YCSB C: reads only",
            Workload::YcsbD => "YCSB D: 95% reads of the latest records, 5% inserts",
            Workload::YcsbE => "YCSB E: 95% short scans, 5% inserts",
            Workload::YcsbF => "YCSB F: 50% reads, 50% read-modify-writes",
            Workload::YcsbReadOnly => "15/16 of the keys bulk-loaded, then uniform reads (Zhang et al.)",
            Workload::YcsbWriteOnly => "15/16 bulk-loaded, then inserts of the rest (Zhang et al.)",
            Workload::YcsbBalanced => "15/16 bulk-loaded, then 50% inserts, 50% reads (Zhang et al.)",
        }
    }

    /// Whether the workload writes (and so needs an updatable index).
    pub fn writes(&self) -> bool {
        !matches!(
            self,
            Workload::Lookup
                | Workload::LookupMiss
                | Workload::Scan
                | Workload::YcsbC
                | Workload::YcsbReadOnly
        )
    }

    /// Whether the bulk load holds only half the keys (the rest are inserted).
    fn half_bulk(&self) -> bool {
        matches!(
            self,
            Workload::WriteOnly
                | Workload::ReadHeavy
                | Workload::WriteHeavy
                | Workload::Balanced
                | Workload::YcsbD
                | Workload::YcsbE
        )
    }

    /// Whether the bulk load holds 15/16 of the keys (Zhang et al. §10.1:
    /// 150M of 200M keys loaded, 10M operations: the same 15 : 1 ratio of
    /// bulk-loaded keys to operations when the key file holds bulk + ops).
    fn zhang_bulk(&self) -> bool {
        matches!(
            self,
            Workload::YcsbReadOnly | Workload::YcsbWriteOnly | Workload::YcsbBalanced
        )
    }
}

/// The workloads of [`Workload::ALL`].
const ALL: [Workload; 16] = [
    Workload::Lookup,
    Workload::LookupMiss,
    Workload::Scan,
    Workload::WriteOnly,
    Workload::ReadHeavy,
    Workload::WriteHeavy,
    Workload::Balanced,
    Workload::YcsbA,
    Workload::YcsbB,
    Workload::YcsbC,
    Workload::YcsbD,
    Workload::YcsbE,
    Workload::YcsbF,
    Workload::YcsbReadOnly,
    Workload::YcsbWriteOnly,
    Workload::YcsbBalanced,
];

/// The names of [`ALL`], in its order.
#[expect(
    clippy::indexing_slicing,
    reason = "evaluated at compile time, with i < ALL.len() = NAMES.len(): an index out of range fails the build"
)]
const NAMES: [&str; ALL.len()] = {
    let mut names = [""; ALL.len()];
    let mut i = 0;
    while i < ALL.len() {
        names[i] = ALL[i].name();
        i += 1;
    }
    names
};

/// A name of [`Workload::NAMES`] or one of a workload's
/// [`aliases`](Workload::aliases); anything else is [`Error::InvalidInput`]
/// naming the known workloads.
impl FromStr for Workload {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Workload::ALL
            .iter()
            .copied()
            .find(|w| w.name() == s || w.aliases().contains(&s))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown workload {s:?}; known: {}",
                    Workload::NAMES.join(", ")
                ))
            })
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How the key of a read or update is chosen among present keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyChoice {
    /// Uniformly.
    #[default]
    Uniform,
    /// YCSB's scrambled Zipfian (θ = 0.99).
    Zipfian,
}

impl FromStr for KeyChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "uniform" => Ok(KeyChoice::Uniform),
            "zipfian" | "zipf" => Ok(KeyChoice::Zipfian),
            _ => Err(Error::invalid(format!(
                "key choice must be uniform or zipfian, got {s:?}"
            ))),
        }
    }
}

/// One operation with the answer it must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Point lookup; `expect` is the value (None: absent).
    Get {
        /// Key.
        key: u64,
        /// Expected answer.
        expect: Option<u64>,
    },
    /// Up to `len` records from the lower bound of `key`.
    Scan {
        /// Start key.
        key: u64,
        /// Records asked for.
        len: u32,
        /// Expected first record.
        expect_first: Option<(u64, u64)>,
        /// Expected number of records.
        expect_len: u32,
    },
    /// Insert of a new key.
    Insert {
        /// Key.
        key: u64,
        /// Value.
        value: u64,
    },
    /// Overwrite of an existing key.
    Update {
        /// Key.
        key: u64,
        /// New value.
        value: u64,
    },
    /// Read a key, then write a new value.
    ReadModifyWrite {
        /// Key.
        key: u64,
        /// Value the read must see.
        expect: u64,
        /// Value written.
        value: u64,
    },
}

/// Bulk-load records and operations of one workload over one key set.
#[derive(Debug, Clone)]
pub struct WorkloadPlan {
    /// The workload.
    pub workload: Workload,
    /// Keys to bulk-load (sorted); `None` means all keys, value = rank.
    pub bulk: Option<(Vec<u64>, Vec<u64>)>,
    /// Operations, in order.
    pub ops: Vec<Op>,
}

/// YCSB's Zipfian generator over `[0, items)` (Gray et al.), θ = 0.99:
/// [`Zipfian::next`] draws a popularity rank (0 = most popular); callers
/// scramble ranks themselves where they want YCSB's scrambled Zipfian.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    /// A generator over `[0, items)` (`items` = 0 is taken as 1).
    pub fn new(items: u64) -> Self {
        let theta = 0.99;
        let zeta = |n: u64| (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zetan = zeta(items.max(1));
        let zeta2 = zeta(2.min(items.max(1)));
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items.max(1) as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian {
            items: items.max(1),
            theta,
            alpha,
            zetan,
            eta,
        }
    }

    /// Rank of popularity (0 = most popular), always `< items`.
    pub fn next(&self, r: &mut Pcg64Mcg) -> u64 {
        let u: f64 = r.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.items - 1);
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }
}

/// Value of rank `r` after `version` updates.
pub fn value_of(rank: u64, version: u32) -> u64 {
    rank | ((version as u64) << 40)
}

struct Present {
    /// Ranks present, in insertion order (bulk first).
    list: Vec<u64>,
    /// Presence by rank.
    bits: Vec<bool>,
    versions: HashMap<u64, u32>,
}

impl Present {
    fn value(&self, rank: u64) -> u64 {
        value_of(rank, self.versions.get(&rank).copied().unwrap_or(0))
    }
}

impl WorkloadPlan {
    /// Plans `ops` operations of `workload` over the sorted, distinct `keys`.
    #[expect(
        clippy::indexing_slicing,
        reason = "ranks index `keys` and the presence bits: every rank is < n (drawn from 0..n)"
    )]
    pub fn new(workload: Workload, keys: &[u64], ops: usize, choice: KeyChoice, seed: u64) -> Result<Self> {
        let n = keys.len();
        if n == 0 {
            return Err(Error::invalid("a workload needs at least one key"));
        }
        if n as u64 >= 1 << 40 {
            return Err(Error::invalid("workloads support fewer than 2^40 keys"));
        }
        let mut r = Pcg64Mcg::seed_from_u64(seed ^ 0x5752_4b4c);
        let rank = |k: u64| keys.partition_point(|&x| x < k) as u64;
        // Split: bulk ranks and the insert order of the rest.
        let (bulk_ranks, mut inserts): (Vec<u64>, Vec<u64>) = if workload.half_bulk() || workload.zhang_bulk()
        {
            let mut perm: Vec<u64> = (0..n as u64).collect();
            perm.shuffle(&mut r);
            let keep = if workload.half_bulk() {
                n.div_ceil(2)
            } else {
                n - n / 16
            };
            let rest = perm.split_off(keep);
            (perm, rest)
        } else {
            ((0..n as u64).collect(), Vec::new())
        };
        let mut present = Present {
            bits: vec![false; n],
            list: bulk_ranks.clone(),
            versions: HashMap::new(),
        };
        for &b in &bulk_ranks {
            present.bits[b as usize] = true;
        }
        let bulk = if workload.half_bulk() || workload.zhang_bulk() {
            let mut ranks = bulk_ranks;
            ranks.sort_unstable();
            let bk: Vec<u64> = ranks.iter().map(|&i| keys[i as usize]).collect();
            Some((bk, ranks))
        } else {
            None
        };
        inserts.reverse(); // pop() from the end in shuffled order
        let zipf = (choice == KeyChoice::Zipfian).then(|| Zipfian::new(present.list.len() as u64));
        // `ops` comes from the user: a count that cannot be held is an
        // error, not a capacity-overflow panic.
        let mut plan = Vec::new();
        plan.try_reserve_exact(ops)
            .map_err(|_| Error::invalid(format!("a plan of {ops} operations does not fit in memory")))?;
        let pick = |present: &Present, r: &mut Pcg64Mcg| -> u64 {
            let len = present.list.len() as u64;
            let i = match &zipf {
                Some(z) => fnv1a64(z.next(r)) % len,
                None => r.random_range(0..len),
            };
            present.list[i as usize]
        };
        let get_of = |present: &Present, rk: u64| Op::Get {
            key: keys[rk as usize],
            expect: Some(present.value(rk)),
        };
        let scan_of = |present: &Present, start_key: u64, len: u32| {
            let mut first = None;
            let mut count = 0u32;
            let mut i = rank(start_key) as usize;
            while i < n && count < len {
                if present.bits[i] {
                    if first.is_none() {
                        first = Some((keys[i], present.value(i as u64)));
                    }
                    count += 1;
                }
                i += 1;
            }
            Op::Scan {
                key: start_key,
                len,
                expect_first: first,
                expect_len: count,
            }
        };
        let insert = |present: &mut Present, inserts: &mut Vec<u64>| -> Option<Op> {
            let rk = inserts.pop()?;
            present.bits[rk as usize] = true;
            present.list.push(rk);
            Some(Op::Insert {
                key: keys[rk as usize],
                value: value_of(rk, 0),
            })
        };
        let update = |present: &mut Present, rk: u64| -> (u64, u64) {
            let old = present.value(rk);
            let v = present.versions.entry(rk).or_insert(0);
            *v += 1;
            (old, value_of(rk, *v))
        };
        for step in 0..ops {
            let op = match workload {
                Workload::Lookup | Workload::YcsbC | Workload::YcsbReadOnly => {
                    get_of(&present, pick(&present, &mut r))
                }
                Workload::YcsbWriteOnly => match insert(&mut present, &mut inserts) {
                    Some(op) => op,
                    None => break,
                },
                Workload::YcsbBalanced => {
                    if r.random::<bool>() {
                        match insert(&mut present, &mut inserts) {
                            Some(op) => op,
                            None => break,
                        }
                    } else {
                        get_of(&present, pick(&present, &mut r))
                    }
                }
                Workload::LookupMiss => Op::Get {
                    key: absent_key(keys, &mut r)?,
                    expect: None,
                },
                Workload::Scan => {
                    let rk = pick(&present, &mut r);
                    scan_of(&present, keys[rk as usize], SCAN_LEN)
                }
                Workload::WriteOnly => match insert(&mut present, &mut inserts) {
                    Some(op) => op,
                    None => break,
                },
                Workload::ReadHeavy | Workload::WriteHeavy | Workload::Balanced => {
                    let reads = match workload {
                        Workload::ReadHeavy => 18,
                        Workload::WriteHeavy => 2,
                        _ => 10,
                    };
                    if step % 20 < reads {
                        get_of(&present, pick(&present, &mut r))
                    } else {
                        match insert(&mut present, &mut inserts) {
                            Some(op) => op,
                            None => break,
                        }
                    }
                }
                Workload::YcsbA | Workload::YcsbB => {
                    let upd = if workload == Workload::YcsbA { 0.5 } else { 0.05 };
                    let rk = pick(&present, &mut r);
                    if r.random::<f64>() < upd {
                        let (_, v) = update(&mut present, rk);
                        Op::Update {
                            key: keys[rk as usize],
                            value: v,
                        }
                    } else {
                        get_of(&present, rk)
                    }
                }
                Workload::YcsbF => {
                    let rk = pick(&present, &mut r);
                    if r.random::<bool>() {
                        let (old, v) = update(&mut present, rk);
                        Op::ReadModifyWrite {
                            key: keys[rk as usize],
                            expect: old,
                            value: v,
                        }
                    } else {
                        get_of(&present, rk)
                    }
                }
                Workload::YcsbD => {
                    if r.random::<f64>() < 0.05 {
                        match insert(&mut present, &mut inserts) {
                            Some(op) => op,
                            None => break,
                        }
                    } else {
                        // Latest: a Zipfian-distributed distance back from the newest insert.
                        let len = present.list.len() as u64;
                        let back = match &zipf {
                            Some(z) => z.next(&mut r) % len,
                            None => {
                                let e: f64 = r.sample(rand_distr::Exp1);
                                ((e * (len as f64).sqrt()) as u64).min(len - 1)
                            }
                        };
                        get_of(&present, present.list[(len - 1 - back) as usize])
                    }
                }
                Workload::YcsbE => {
                    if r.random::<f64>() < 0.05 {
                        match insert(&mut present, &mut inserts) {
                            Some(op) => op,
                            None => break,
                        }
                    } else {
                        let rk = pick(&present, &mut r);
                        let len = r.random_range(1..=SCAN_LEN);
                        scan_of(&present, keys[rk as usize], len)
                    }
                }
            };
            plan.push(op);
        }
        Ok(WorkloadPlan {
            workload,
            bulk,
            ops: plan,
        })
    }

    /// Number of records bulk-loaded.
    pub fn bulk_len(&self, n: usize) -> usize {
        self.bulk.as_ref().map_or(n, |b| b.0.len())
    }
}

/// A key that is not in `keys`: inside a random gap, or past the ends.
fn absent_key(keys: &[u64], r: &mut Pcg64Mcg) -> Result<u64> {
    let (Some(&first), Some(&last)) = (keys.first(), keys.last()) else {
        return Ok(r.random());
    };
    for _ in 0..64 {
        let i = r.random_range(0..keys.len());
        let lo = keys.get(i).copied().unwrap_or(first);
        let hi = keys.get(i + 1).copied().unwrap_or(u64::MAX);
        if hi.saturating_sub(lo) > 1 {
            return Ok(r.random_range(lo + 1..hi));
        }
    }
    // Dense data: go past the ends.
    if first > 0 {
        return Ok(r.random_range(0..first));
    }
    if last < u64::MAX {
        return Ok(r.random_range(last + 1..=u64::MAX));
    }
    // Linear search for any gap (keys cover [0, MAX] only if n = 2^64).
    keys.windows(2)
        .find_map(|w| match w {
            [a, b] if b - a > 1 => Some(a + 1),
            _ => None,
        })
        .ok_or_else(|| Error::invalid("the key set has no absent key"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Replays a plan against a BTreeMap and checks every expectation.
    fn replay(plan: &WorkloadPlan, keys: &[u64]) {
        let mut m: BTreeMap<u64, u64> = match &plan.bulk {
            Some((k, v)) => k.iter().copied().zip(v.iter().copied()).collect(),
            None => keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect(),
        };
        for op in &plan.ops {
            match *op {
                Op::Get { key, expect } => assert_eq!(m.get(&key).copied(), expect),
                Op::Scan {
                    key,
                    len,
                    expect_first,
                    expect_len,
                } => {
                    let got: Vec<_> = m.range(key..).take(len as usize).map(|(k, v)| (*k, *v)).collect();
                    assert_eq!(got.first().copied(), expect_first);
                    assert_eq!(got.len() as u32, expect_len);
                }
                Op::Insert { key, value } => assert!(m.insert(key, value).is_none(), "insert of a new key"),
                Op::Update { key, value } => {
                    assert!(m.insert(key, value).is_some(), "update of a present key")
                }
                Op::ReadModifyWrite { key, expect, value } => {
                    assert_eq!(m.insert(key, value), Some(expect));
                }
            }
        }
    }

    /// An operation count that cannot be held is an error, not a panic.
    #[test]
    fn a_huge_operation_count_is_invalid_input() {
        let keys: Vec<u64> = (0..100u64).collect();
        for ops in [usize::MAX, 1 << 62] {
            let e = WorkloadPlan::new(Workload::ReadHeavy, &keys, ops, KeyChoice::Uniform, 1).unwrap_err();
            assert!(
                matches!(e, Error::InvalidInput(_)) && e.to_string().contains("operations"),
                "{e}"
            );
        }
    }

    /// One table: every workload has its name and aliases parsed back, and
    /// no name or alias is taken twice.
    #[test]
    fn the_parser_reads_the_table() {
        assert_eq!(Workload::NAMES.len(), Workload::ALL.len());
        let mut seen = std::collections::HashSet::new();
        for (w, name) in Workload::ALL.iter().zip(Workload::NAMES) {
            assert_eq!(w.name(), *name);
            assert!(!w.summary().is_empty());
            for n in std::iter::once(name).chain(w.aliases()) {
                assert_eq!(n.parse::<Workload>().unwrap(), *w, "{n}");
                assert!(seen.insert(*n), "{n} twice");
            }
        }
        let e = "ycsb-z".parse::<Workload>().unwrap_err().to_string();
        assert!(
            e.contains("ycsb-write-only") && e.contains("ycsb-balanced"),
            "{e}"
        );
    }

    #[test]
    fn every_workload_replays_against_a_model() {
        let keys: Vec<u64> = (0..5_000u64).map(|i| i * 7 + 3).collect();
        for name in Workload::NAMES {
            let w: Workload = name.parse().unwrap();
            for choice in [KeyChoice::Uniform, KeyChoice::Zipfian] {
                let plan = WorkloadPlan::new(w, &keys, 3_000, choice, 9).unwrap();
                assert!(!plan.ops.is_empty(), "{name}");
                replay(&plan, &keys);
                assert_eq!(plan.bulk.is_some(), w.half_bulk() || w.zhang_bulk());
            }
        }
    }

    #[test]
    fn mixes_have_the_stated_ratios() {
        let keys: Vec<u64> = (0..100_000u64).collect();
        let plan = WorkloadPlan::new(Workload::ReadHeavy, &keys, 20_000, KeyChoice::Uniform, 1).unwrap();
        let inserts = plan.ops.iter().filter(|o| matches!(o, Op::Insert { .. })).count();
        assert_eq!(inserts, 2_000);
        let plan = WorkloadPlan::new(Workload::WriteOnly, &keys, 1_000_000, KeyChoice::Uniform, 1).unwrap();
        assert_eq!(plan.ops.len(), 50_000, "write-only inserts the other half");
        let plan = WorkloadPlan::new(Workload::LookupMiss, &keys, 100, KeyChoice::Uniform, 1).unwrap();
        assert!(plan.ops.iter().all(|o| matches!(o, Op::Get { expect: None, .. })));
    }

    #[test]
    fn zhang_workloads_load_fifteen_sixteenths() {
        let keys: Vec<u64> = (0..16_000u64).collect();
        for w in [
            Workload::YcsbReadOnly,
            Workload::YcsbWriteOnly,
            Workload::YcsbBalanced,
        ] {
            let plan = WorkloadPlan::new(w, &keys, 1_000, KeyChoice::Uniform, 3).unwrap();
            assert_eq!(plan.bulk_len(keys.len()), 15_000, "{w}");
            let inserts = plan.ops.iter().filter(|o| matches!(o, Op::Insert { .. })).count();
            match w {
                Workload::YcsbReadOnly => assert_eq!(inserts, 0),
                Workload::YcsbWriteOnly => assert_eq!(inserts, 1_000),
                _ => assert!((400..600).contains(&inserts), "{inserts}"),
            }
        }
    }

    #[test]
    fn deterministic() {
        let keys: Vec<u64> = (0..1000u64).map(|i| i * i).collect();
        let a = WorkloadPlan::new(Workload::YcsbA, &keys, 500, KeyChoice::Zipfian, 5).unwrap();
        let b = WorkloadPlan::new(Workload::YcsbA, &keys, 500, KeyChoice::Zipfian, 5).unwrap();
        assert_eq!(a.ops, b.ops);
    }

    #[test]
    fn zipfian_is_skewed() {
        let z = Zipfian::new(10_000);
        let mut r = Pcg64Mcg::seed_from_u64(3);
        let hits = (0..100_000).filter(|_| z.next(&mut r) < 10).count();
        assert!(hits > 20_000, "top 0.1% of items get a large share: {hits}");
    }
}
