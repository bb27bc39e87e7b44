//! A layer stack held wholly in memory: the layers of a [`Design`] as one
//! byte string (for a file section that is read whole, such as an SSTable's
//! index region) and the lookup over them with the same search step as
//! [`LayeredIndex::predict`](super::LayeredIndex::predict), without files.
//!
//! Encoding (little-endian), after [`STACK_VERSION`]:
//!
//! ```text
//! u32 version | u64 n (positions below the bottom layer) | u32 layers
//! per layer, bottom first:
//!   u32 kind_len | kind (LayerKind as JSON) | u64 flat_len | flat | u64 last_successor
//! ```
//!
//! Decoding checks every length against the bytes left and every layer's
//! entry bytes against its kind (a corrupt stack is an error, never a panic).

use super::compressed::Decoded;
use super::design::Design;
use super::entries::ResidentEntries;
use super::layer::{Access, LayerKind, step};
use crate::format::bytes::Cursor;
use crate::index::ApproxPos;
use crate::{Error, Result};

/// Version of the stack encoding.
pub const STACK_VERSION: u32 = 1;

/// One resident layer: fixed-width entries or a decoded blob.
#[derive(Debug, Clone)]
enum Body {
    Entries(ResidentEntries),
    Blob(Decoded),
}

#[derive(Debug, Clone)]
struct ResidentLayer {
    kind: LayerKind,
    body: Body,
    /// Positions this layer indexes (entries, or a blob's length).
    count: u64,
}

/// The layers of a design in memory, bottom (over the positions) first.
#[derive(Debug, Clone)]
pub struct LayerStack {
    n: u64,
    layers: Vec<ResidentLayer>,
}

/// The window-by-window descent of a layered lookup, shared by the on-disk
/// [`LayeredIndex`](super::LayeredIndex) and [`LayerStack`]: from the whole
/// top layer down to a range of the `n` positions below the bottom one.
/// `count(l)` is layer `l`'s entry count, `exact(l)` whether its ranges are
/// exact ([`LayerKind::exact`]), and `step_at(l, lo, hi, below)` searches
/// entries `[lo, hi)` of layer `l` (a non-empty window) for the range of the
/// `below` positions under it.
pub(crate) fn descend(
    layers: usize,
    n: u64,
    count: impl Fn(usize) -> u64,
    exact: impl Fn(usize) -> bool,
    mut step_at: impl FnMut(usize, u64, u64, u64) -> Result<(u64, u64)>,
) -> Result<ApproxPos> {
    let Some(top) = layers.checked_sub(1) else {
        return Ok(ApproxPos { pos: 0, lo: 0, hi: n });
    };
    let mut window = (0u64, count(top));
    for l in (0..layers).rev() {
        let below = match l.checked_sub(1) {
            Some(b) => count(b),
            None => n,
        };
        let (lo, hi) = window;
        let range = if lo >= hi {
            (lo.min(below), lo.min(below))
        } else {
            step_at(l, lo, hi, below)?
        };
        window = next_window(l, range, below, exact(l));
    }
    Ok(approx_of(window))
}

/// The window of layer `l - 1` (or the range of positions, at `l = 0`)
/// after layer `l`'s search step returned `range` over `below` entries:
/// one of [`descend`]'s steps, shared with the batched descent.
pub(crate) fn next_window(l: usize, range: (u64, u64), below: u64, exact: bool) -> (u64, u64) {
    let mut window = if l > 0 && !exact {
        // The wanted entry below is the last one <= key: one before
        // the lower bound at most, and the bound may be `hi`.
        (range.0.saturating_sub(1), range.1.saturating_add(1).min(below))
    } else {
        range
    };
    if l > 0 && window.0 >= window.1 && below > 0 {
        // Never hand an empty window to an index layer.
        window = (window.0.min(below - 1), window.0.min(below - 1) + 1);
    }
    window
}

/// The approximate position of a final window of positions.
pub(crate) fn approx_of(window: (u64, u64)) -> ApproxPos {
    ApproxPos {
        pos: window.0 + (window.1 - window.0) / 2,
        lo: window.0,
        hi: window.1,
    }
}

impl LayerStack {
    /// Encodes the layers of `design`, built over `n` positions, as bytes
    /// for [`LayerStack::decode`].
    pub fn encode_design(design: &Design, n: u64) -> Vec<u8> {
        let size: usize = design.layers.iter().map(|l| l.flat.len() + 64).sum();
        let mut out = Vec::with_capacity(16 + size);
        out.extend_from_slice(&STACK_VERSION.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(design.layers.len() as u32).to_le_bytes());
        for l in &design.layers {
            let kind = l.kind.encode();
            out.extend_from_slice(&(kind.len() as u32).to_le_bytes());
            out.extend_from_slice(&kind);
            out.extend_from_slice(&(l.flat.len() as u64).to_le_bytes());
            out.extend_from_slice(&l.flat);
            out.extend_from_slice(&l.last_successor.to_le_bytes());
        }
        out
    }

    /// The stack of `design` over `n` positions, as [`LayerStack::decode`]
    /// of its encoding gives it.
    pub fn from_design(design: &Design, n: u64) -> Result<LayerStack> {
        Self::decode(&Self::encode_design(design, n), "design")
    }

    /// Decodes a stack; `file` names the bytes' file in errors
    /// ([`Error::Corruption`] for anything inconsistent).
    pub fn decode(bytes: &[u8], file: &str) -> Result<LayerStack> {
        let bad = |what: &str| Error::corruption(file, 0, format!("learned index: {what}"));
        let mut c = Cursor::new(bytes);
        let version = c.u32().ok_or_else(|| bad("truncated header"))?;
        if version != STACK_VERSION {
            return Err(Error::UnsupportedVersion {
                file: file.to_string(),
                found: version,
                supported: STACK_VERSION,
            });
        }
        let n = c.u64().ok_or_else(|| bad("truncated header"))?;
        let count = c.u32().ok_or_else(|| bad("truncated header"))?;
        // Every layer takes at least 20 bytes: no huge allocation from a bad count.
        if count as usize > c.remaining() / 20 {
            return Err(bad("more layers than bytes"));
        }
        let mut layers = Vec::with_capacity(count as usize);
        for i in 0..count {
            let kind_len = c.u32().ok_or_else(|| bad("truncated layer"))?;
            let kind_bytes = c
                .bytes(kind_len as usize)
                .ok_or_else(|| bad("truncated layer kind"))?;
            let kind = LayerKind::decode(kind_bytes, file)?;
            let flat_len = c.u64().ok_or_else(|| bad("truncated layer"))?;
            let flat = usize::try_from(flat_len)
                .ok()
                .and_then(|len| c.bytes(len))
                .ok_or_else(|| bad("truncated layer entries"))?;
            let last_successor = c.u64().ok_or_else(|| bad("truncated layer"))?;
            let (body, count) = if kind.is_blob() {
                let blob = super::decode_blob(&kind, flat, file)?;
                let count = blob.len() as u64;
                (Body::Blob(blob), count)
            } else {
                let width = kind.width();
                if flat.len() % width != 0 {
                    return Err(bad(&format!(
                        "layer {i}: {} bytes are not whole entries",
                        flat.len()
                    )));
                }
                let count = (flat.len() / width) as u64;
                let entries = ResidentEntries {
                    flat: flat.to_vec(),
                    aux: vec![last_successor],
                    width,
                    per_page: count.max(1),
                    count,
                };
                (Body::Entries(entries), count)
            };
            layers.push(ResidentLayer { kind, body, count });
        }
        if c.remaining() != 0 {
            return Err(bad("bytes after the last layer"));
        }
        Ok(LayerStack { n, layers })
    }

    /// Positions below the bottom layer.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether the stack indexes no position.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Number of layers.
    pub fn layers(&self) -> usize {
        self.layers.len()
    }

    /// The predicted range of positions for `key`: for a key of the design's
    /// keys, the range holds its position (the layered engine's contract;
    /// the width is the bottom layer's measured bound). No I/O.
    pub fn predict(&self, key: u64) -> Result<ApproxPos> {
        let layers = &self.layers;
        descend(
            layers.len(),
            self.n,
            |l| layers.get(l).map_or(0, |x| x.count),
            |l| layers.get(l).is_some_and(|x| x.kind.exact()),
            |l, lo, hi, below| {
                let layer = layers
                    .get(l)
                    .ok_or_else(|| Error::invalid(format!("no layer {l}")))?;
                let access = match &layer.body {
                    Body::Entries(e) => Access::Entries(e),
                    Body::Blob(b) => Access::Blob(b),
                };
                step(&layer.kind, access, key, lo, hi, below)
            },
        )
    }

    /// Heap bytes held by the layers (as [`LayeredIndex`](super::LayeredIndex)
    /// counts its resident layers).
    pub fn memory_bytes(&self) -> u64 {
        self.layers
            .iter()
            .map(|l| match &l.body {
                Body::Entries(e) => e.memory_bytes(),
                Body::Blob(b) => b.memory_bytes(),
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Params;
    use crate::index::layered::LAYERED_KINDS;

    fn keys() -> Vec<u64> {
        crate::data::generate(crate::data::Dist::FbLike, 20_000, 7).unwrap()
    }

    #[test]
    fn every_kind_round_trips_and_brackets_every_key() {
        let keys = keys();
        for name in ["pgm", "rs", "rmi", "fiting-static", "gap-zonemap-d", "zonemap"] {
            let kind = LAYERED_KINDS.iter().find(|k| k.name == name).unwrap();
            let p = Params::default();
            let d = (kind.design)(&p, &keys, 16, 4096).unwrap();
            let bytes = LayerStack::encode_design(&d, keys.len() as u64);
            let s = LayerStack::decode(&bytes, "t").unwrap();
            assert_eq!(s.len(), keys.len() as u64);
            for (i, &k) in keys.iter().enumerate() {
                let a = s.predict(k).unwrap();
                assert!(
                    a.lo <= i as u64 && (i as u64) < a.hi,
                    "{name}: key {i} not in {a:?}"
                );
            }
            assert!(s.memory_bytes() > 0);
        }
    }

    #[test]
    fn corrupt_stacks_are_errors_not_panics() {
        let keys = keys();
        let kind = LAYERED_KINDS.iter().find(|k| k.name == "pgm").unwrap();
        let d = (kind.design)(&Params::default(), &keys, 16, 4096).unwrap();
        let bytes = LayerStack::encode_design(&d, keys.len() as u64);
        for cut in [0, 3, 11, 15, 20, bytes.len() - 1] {
            assert!(LayerStack::decode(&bytes[..cut], "t").is_err(), "cut {cut}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(LayerStack::decode(&extra, "t").is_err());
        // Any byte flipped: an error, or a stack whose lookups do not panic.
        for i in (0..bytes.len()).step_by(7) {
            let mut b = bytes.clone();
            b[i] ^= 0x5a;
            if let Ok(s) = LayerStack::decode(&b, "t") {
                for &k in keys.iter().step_by(97) {
                    let _ = s.predict(k);
                }
            }
        }
        let none = Design {
            layers: vec![],
            models: None,
            notes: serde_json::Value::Null,
        };
        let empty = LayerStack::decode(&LayerStack::encode_design(&none, 0), "t").unwrap();
        assert_eq!(empty.predict(5).unwrap(), ApproxPos { pos: 0, lo: 0, hi: 0 });
    }
}
