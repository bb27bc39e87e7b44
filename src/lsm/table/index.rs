//! The index of a table: a key to a range of entry ordinals.
//!
//! Every kind answers an internal key `t` with `[lo, hi]` (inclusive) such
//! that the lower bound of `t` (the ordinal of the first entry `>= t`, `n`
//! if none) lies in it; the reader checks that claim against the entries it
//! reads (and widens the range if it does not hold), so no index can make a
//! lookup return a wrong answer.
//!
//! - [`Fences`] (`fp`): the internal key of every `boundary`-th entry.
//! - [`Learned`]: a [`LayerStack`] over the distinct mapped user keys
//!   ([`KeyMap`]), its positions turned into ordinals by [`Ordinals`].
//!
//! Encoding of the index section (`docs/format/sstable.md`):
//!
//! ```text
//! fp:      u8 0 | u64 boundary | u64 entries | u32 fences | (u32 len | key) * fences
//! learned: u8 1 | u32 prefix_len | prefix | ordinals (keymap.rs) | layer stack (index/layered/resident.rs)
//! ```

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::IndexSpec;
use super::keymap::{KeyMap, Ordinals};
use crate::format::bytes::Cursor;
use crate::index::Params;
use crate::index::layered::{Design, LAYERED_KINDS, LayerStack, Segs, compressed_band};
use crate::lsm::key;
use crate::storage::StorageProfile;
use crate::{Error, Result};

const TAG_FENCES: u8 = 0;
const TAG_LEARNED: u8 = 1;

/// Page size the layered recipes are given (`fiting`'s node fanout, `air`'s
/// cost model); the table's index is resident, so it sets no I/O unit.
const DESIGN_PAGE_SIZE: usize = 4096;

/// Most leaf models of `rmi`, as a multiple of `distinct keys / boundary`.
const RMI_MAX_GROWTH: usize = 16;

/// `air`'s memory budget per page of `boundary` entries.
const AIR_BYTES_PER_PAGE: u64 = 16;

/// Sampled lookups of `air`'s cost model, per table.
const AIR_SAMPLES: usize = 4096;

/// Fence pointers: the internal key of entries `0, B, 2B, ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fences {
    boundary: u64,
    entries: u64,
    keys: Vec<u8>,
    /// `fences + 1` offsets into `keys`.
    offs: Vec<u32>,
}

impl Fences {
    /// Fences every `boundary` entries of a table of `entries`; add the keys
    /// of ordinals `0, B, 2B, ...` with [`Fences::push`].
    pub(super) fn new(boundary: u64, entries: u64) -> Fences {
        Fences {
            boundary: boundary.max(1),
            entries,
            keys: Vec::new(),
            offs: vec![0],
        }
    }

    /// Appends the next fence's key. The fence keys of one table take at
    /// most `u32::MAX` bytes (their offsets are u32): more is
    /// [`Error::InvalidInput`], nothing appended.
    pub(super) fn push(&mut self, ikey: &[u8]) -> Result<()> {
        let end = u32::try_from(self.keys.len().saturating_add(ikey.len())).map_err(|_| {
            Error::invalid(
                "the fence keys of one table exceed 4 GiB: use a larger boundary, or table granularity",
            )
        })?;
        self.keys.extend_from_slice(ikey);
        self.offs.push(end);
        Ok(())
    }

    /// Sets the entry count (known when the table is finished).
    pub(super) fn set_entries(&mut self, entries: u64) {
        self.entries = entries;
    }

    fn len(&self) -> usize {
        self.offs.len().saturating_sub(1)
    }

    fn key(&self, j: usize) -> &[u8] {
        let (Some(&a), Some(&b)) = (self.offs.get(j), self.offs.get(j + 1)) else {
            return &[];
        };
        self.keys.get(a as usize..b as usize).unwrap_or_default()
    }

    /// Bytes of [`Fences::encode`].
    pub(super) fn encode_len(&self) -> usize {
        21 + self.keys.len() + 4 * self.len()
    }

    /// The section bytes.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encode_len());
        out.push(TAG_FENCES);
        out.extend_from_slice(&self.boundary.to_le_bytes());
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        for j in 0..self.len() {
            let k = self.key(j);
            out.extend_from_slice(&(k.len() as u32).to_le_bytes());
            out.extend_from_slice(k);
        }
        out
    }

    fn range(&self, t: &[u8]) -> (u64, u64) {
        // j fences are < t: the lower bound is after fence j-1, at most fence j.
        let (mut a, mut b) = (0usize, self.len());
        while a < b {
            let mid = a + (b - a) / 2;
            if key::compare(self.key(mid), t) == Ordering::Less {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        let j = a as u64;
        if j == 0 {
            return (0, 0);
        }
        let lo = ((j - 1) * self.boundary + 1).min(self.entries);
        (lo, (j * self.boundary).min(self.entries))
    }
}

/// A learned index over the mapped user keys.
#[derive(Debug, Clone)]
pub(super) struct Learned {
    map: KeyMap,
    ords: Ordinals,
    stack: LayerStack,
}

impl Learned {
    fn range(&self, t: &[u8]) -> Result<(u64, u64)> {
        let x = self.map.map(key::user_key(t));
        let d = self.ords.distinct();
        let a = self.stack.predict(x)?;
        let (lo, hi) = (a.lo.min(d), a.hi.min(d));
        Ok((self.ords.ordinal(lo), self.ords.ordinal(hi.max(lo))))
    }
}

/// A table's index.
#[derive(Debug, Clone)]
pub(super) enum TableIndex {
    /// `fp`.
    Fences(Fences),
    /// Every learned kind.
    Learned(Learned),
}

impl TableIndex {
    /// `[lo, hi]`: the ordinals that may be the lower bound of `t`.
    pub(super) fn range(&self, t: &[u8]) -> Result<(u64, u64)> {
        match self {
            TableIndex::Fences(f) => Ok(f.range(t)),
            TableIndex::Learned(l) => l.range(t),
        }
    }

    /// Resident bytes.
    pub(super) fn memory_bytes(&self) -> u64 {
        match self {
            TableIndex::Fences(f) => (f.keys.len() + 4 * f.offs.len()) as u64,
            TableIndex::Learned(l) => {
                l.map.prefix().len() as u64 + l.ords.memory_bytes() + l.stack.memory_bytes()
            }
        }
    }

    /// Decodes the section of a table of `entries` entries.
    pub(super) fn decode(bytes: &[u8], entries: u64, file: &str) -> Result<TableIndex> {
        let bad = |what: &str| Error::corruption_at(file, 0, format!("index section: {what}"));
        let mut c = Cursor::new(bytes);
        let tag = c
            .bytes(1)
            .and_then(|b| b.first().copied())
            .ok_or_else(|| bad("empty"))?;
        match tag {
            TAG_FENCES => {
                let boundary = c.u64().ok_or_else(|| bad("truncated"))?;
                let n = c.u64().ok_or_else(|| bad("truncated"))?;
                let count = c.u32().ok_or_else(|| bad("truncated"))? as usize;
                if boundary == 0
                    || n != entries
                    || count as u64 != n.div_ceil(boundary)
                    || count > c.remaining() / 4
                {
                    return Err(bad("fence count disagrees with the table"));
                }
                let mut f = Fences::new(boundary, n);
                f.keys.reserve(c.remaining().saturating_sub(4 * count));
                for _ in 0..count {
                    let len = c.u32().ok_or_else(|| bad("truncated fence"))? as usize;
                    f.push(c.bytes(len).ok_or_else(|| bad("truncated fence"))?)
                        .map_err(|_| bad("fence keys over 4 GiB"))?;
                }
                if c.remaining() != 0 {
                    return Err(bad("bytes after the last fence"));
                }
                Ok(TableIndex::Fences(f))
            }
            TAG_LEARNED => {
                let plen = c.u32().ok_or_else(|| bad("truncated"))? as usize;
                let prefix = c.bytes(plen).ok_or_else(|| bad("truncated prefix"))?.to_vec();
                let ords = Ordinals::decode(&mut c, file)?;
                if ords.ordinal(u64::MAX) != entries {
                    return Err(bad("ordinals disagree with the table"));
                }
                let rest = c.bytes(c.remaining()).unwrap_or_default();
                let stack = LayerStack::decode(rest, file)?;
                if stack.len() != ords.distinct() {
                    return Err(bad("model and ordinals disagree"));
                }
                Ok(TableIndex::Learned(Learned {
                    map: KeyMap::with_prefix(prefix),
                    ords,
                    stack,
                }))
            }
            other => Err(bad(&format!("unknown index tag {other}"))),
        }
    }
}

/// The learned index of kind `spec.kind` over a table's distinct user keys
/// (key `i` is `users[ends[i - 1]..ends[i]]`, back to back, and its first
/// entry has ordinal `firsts[i]`) of `entries` entries, encoded as the
/// index section.
pub(super) fn build_learned(
    spec: &IndexSpec,
    users: &[u8],
    ends: &[usize],
    firsts: &[u32],
    entries: u64,
) -> Result<Vec<u8>> {
    let key = |i: usize| {
        let start = i.checked_sub(1).and_then(|j| ends.get(j)).copied().unwrap_or(0);
        let end = ends.get(i).copied().unwrap_or(start);
        users.get(start..end).unwrap_or_default()
    };
    let Some(last) = ends.len().checked_sub(1) else {
        return Err(Error::invalid("a learned index needs at least one key"));
    };
    let map = KeyMap::new(key(0), key(last));
    // Distinct mapped values and the ordinal of each one's first entry.
    // Every key lies between the first and the last, so it has their
    // common prefix.
    let mut xs: Vec<u64> = Vec::with_capacity(ends.len());
    let mut group_firsts: Vec<u32> = Vec::with_capacity(ends.len());
    let mut prev = None;
    let mut start = 0;
    for (&end, &o) in ends.iter().zip(firsts) {
        let x = map.map_member(users.get(start..end).unwrap_or_default());
        start = end;
        if prev != Some(x) {
            prev = Some(x);
            xs.push(x);
            group_firsts.push(o);
        }
    }
    let ords = Ordinals::from_firsts(&group_firsts, entries);
    let design = if xs.len() <= spec.boundary {
        // The whole table is within the boundary: no model at all.
        Design {
            layers: vec![],
            models: None,
            notes: Value::Null,
        }
    } else {
        design(spec, &xs)?
    };
    let mut out = vec![TAG_LEARNED];
    out.extend_from_slice(&(map.prefix().len() as u32).to_le_bytes());
    out.extend_from_slice(map.prefix());
    ords.encode(&mut out);
    out.extend_from_slice(&LayerStack::encode_design(&design, xs.len() as u64));
    Ok(out)
}

/// Error bound of the segment models for a position boundary: a range is
/// `eps_lo + eps_hi + 1 <= 2 eps + 1` positions wide.
pub(super) fn epsilon(boundary: usize) -> u64 {
    (boundary.saturating_sub(1) / 2) as u64
}

fn params(pairs: &[(&str, u64)]) -> Params {
    let map: Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    Params::from_map(map)
}

fn layered(name: &str, p: &Params, xs: &[u64], per_page: usize) -> Result<Design> {
    let kind = LAYERED_KINDS
        .iter()
        .find(|k| k.name == name)
        .ok_or_else(|| Error::invalid(format!("no layered kind {name}")))?;
    (kind.design)(p, xs, per_page, DESIGN_PAGE_SIZE)
}

/// The design of a learned kind over distinct, increasing `xs`.
fn design(spec: &IndexSpec, xs: &[u64]) -> Result<Design> {
    let b = spec.boundary;
    let eps = epsilon(b);
    match spec.kind.as_str() {
        "pgm" => layered("pgm", &params(&[("epsilon", eps), ("epsilon_rec", 4)]), xs, b),
        "pgm-cpr" => {
            // PGM's optimal segments, stored compressed (Zhang G4): one blob
            // searched by binary search, no recursive layers.
            let segs = crate::model::optimal_pla(xs, eps);
            let models = segs.len() as u64;
            let blob = compressed_band(xs.into(), &Segs::Memory(segs), eps, 0, f64::INFINITY)?;
            Ok(Design {
                layers: vec![blob],
                models: Some(models),
                notes: Value::Null,
            })
        }
        "rs" => layered("rs", &params(&[("epsilon", eps), ("radix_bits", 1)]), xs, b),
        "fiting" => layered("fiting-static", &params(&[("epsilon", eps)]), xs, b),
        "gap-zonemap-d" => layered("gap-zonemap-d", &params(&[]), xs, b),
        "plr" => {
            // Greedy PLR (Bourbon): FITing-tree's shrinking-cone segments,
            // one band layer searched by binary search (no tree above).
            let mut d = layered("fiting-static", &params(&[("epsilon", eps)]), xs, b)?;
            d.layers.truncate(1);
            Ok(d)
        }
        "rmi" => rmi_design(xs, b),
        "air" => {
            let profile = match &spec.profile {
                Some(p) => p.clone(),
                None => StorageProfile::named("nvme")?,
            };
            // Pages of `boundary` entries; the index is resident, so AirTune
            // is given a memory budget (16 bytes per page: what a step layer
            // over the pages would hold), within which layers cost no read.
            let tuner = crate::tune::Tuner::new(xs, b, DESIGN_PAGE_SIZE, AIR_SAMPLES.min(xs.len()))?;
            let mut o = crate::tune::TuneOptions::new(profile);
            o.memory_budget = AIR_BYTES_PER_PAGE * xs.len().div_ceil(b) as u64;
            let t = tuner.tune(&o)?;
            Ok(Design {
                layers: t.layer_builds()?,
                models: t.models(),
                notes: t.notes(),
            })
        }
        other => Err(Error::invalid(format!(
            "{other} is not a learned table index kind"
        ))),
    }
}

/// A two-layer RMI with the fewest leaf models whose ranges are at most
/// `boundary` wide on average over the keys: doubling from
/// `xs.len() / boundary`, up to 16 times that, and stopping early when a
/// doubling narrows the average range by less than a tenth (a linear root
/// routes skewed keys to few leaves, and more leaves stop helping).
fn rmi_design(xs: &[u64], boundary: usize) -> Result<Design> {
    let mut models = (xs.len() / boundary.max(1)).max(1);
    let most = models.saturating_mul(RMI_MAX_GROWTH).min(xs.len());
    let mut best: Option<(Design, u64)> = None;
    loop {
        let d = layered("rmi", &params(&[("models", models as u64)]), xs, boundary)?;
        let stack = LayerStack::from_design(&d, xs.len() as u64)?;
        let mut width = 0u64;
        for &x in xs {
            let a = stack.predict(x)?;
            width += a.hi - a.lo;
        }
        if let Some((prev, w)) = best.take() {
            if width * 10 > w * 9 {
                return Ok(prev);
            }
        }
        if width <= (boundary * xs.len()) as u64 || models >= most {
            return Ok(d);
        }
        best = Some((d, width));
        models = (models * 2).min(most);
    }
}
