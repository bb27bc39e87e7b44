//! The learned leaf directory of `btree-ld`: in memory, for every leaf of
//! the tree, its *lower bound* (the smallest key routed to it: the
//! separator left of it in its lowest ancestor that has one; 0 for the
//! first leaf) and its page number, in key order. A lookup finds the leaf
//! of a key here and reads one page: the inner nodes on storage are read
//! only by splits and leaf frees (they keep the tree durable and rebuild
//! the directory at open).
//!
//! Entries are kept in *chunks* of [`CHUNK_MIN`]..=[`CHUNK_MAX`] leaves,
//! each encoded on its own, so an update re-encodes one chunk:
//! - the lower bounds as a [`GapArray`] (gap codes at the coarsest
//!   precision the values allow: the tree picks *round* separators, the
//!   value with the most trailing zero bits between the last key of the
//!   left leaf and the first of the right one, so a gap keeps only its
//!   high bits);
//! - the page numbers as a [`LecoArray`] (a linear model per partition and
//!   bit-packed residuals: a bulk-loaded tree's leaves are consecutive
//!   pages, which the model predicts exactly).
//!
//! The first lower bound of each chunk is also kept plainly (`heads`) for
//! the binary search that picks the chunk.

use crate::model::{GapArray, LecoArray};
use crate::{Error, Result};

/// Fewest leaves of a chunk after a split of a full one.
pub(super) const CHUNK_MIN: usize = 512;
/// Most leaves of a chunk; a chunk that grows past it splits in two.
pub(super) const CHUNK_MAX: usize = 2 * CHUNK_MIN;
/// log2 of the gap-code block: a lookup decodes at most this many codes.
const BLOCK_LOG2: u32 = 7;

/// One leaf: its lower bound and page.
pub(super) type Leaf = (u64, u64);

#[derive(Debug, Clone)]
struct Chunk {
    bounds: GapArray,
    pages: LecoArray,
}

impl Chunk {
    fn encode(leaves: &[Leaf]) -> Result<Chunk> {
        let bounds: Vec<u64> = leaves.iter().map(|l| l.0).collect();
        let pages: Vec<u64> = leaves.iter().map(|l| l.1).collect();
        Ok(Chunk {
            bounds: GapArray::encode_bounded_with_block(&bounds, &bounds, BLOCK_LOG2)?,
            pages: LecoArray::encode(&pages),
        })
    }

    fn len(&self) -> usize {
        self.bounds.len()
    }

    fn decode(&self) -> Vec<Leaf> {
        self.bounds.iter().zip(self.pages.iter()).collect()
    }

    fn memory_bytes(&self) -> usize {
        self.bounds.memory_bytes() + self.pages.memory_bytes()
    }
}

/// The directory. See the module documentation.
#[derive(Debug, Clone, Default)]
pub(super) struct LeafDir {
    /// Lower bound of each chunk's first leaf (`heads[0]` is 0).
    heads: Vec<u64>,
    chunks: Vec<Chunk>,
    leaves: usize,
}

/// Where a leaf sits: chunk and index in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pos {
    chunk: usize,
    i: usize,
}

impl LeafDir {
    /// The directory of `leaves` (lower bounds strictly increasing, the
    /// first 0).
    pub(super) fn new(leaves: &[Leaf]) -> Result<LeafDir> {
        let mut d = LeafDir::default();
        if leaves.first().is_some_and(|l| l.0 != 0) {
            return Err(Error::invalid("the first leaf's lower bound is not 0"));
        }
        if leaves.windows(2).any(|w| matches!(w, [a, b] if a.0 >= b.0)) {
            return Err(Error::invalid("leaf lower bounds not increasing"));
        }
        for part in leaves.chunks(CHUNK_MIN) {
            d.heads.push(part.first().map_or(0, |l| l.0));
            d.chunks.push(Chunk::encode(part)?);
        }
        d.leaves = leaves.len();
        Ok(d)
    }

    /// Leaves held.
    pub(super) fn len(&self) -> usize {
        self.leaves
    }

    /// Bytes held: the chunks' encodings, the heads and the struct.
    pub(super) fn memory_bytes(&self) -> u64 {
        let chunks: usize = self.chunks.iter().map(Chunk::memory_bytes).sum();
        (std::mem::size_of::<Self>()
            + self.heads.capacity() * 8
            + self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + chunks) as u64
    }

    /// Every leaf in key order.
    pub(super) fn leaves(&self) -> Vec<Leaf> {
        self.chunks.iter().flat_map(Chunk::decode).collect()
    }

    fn route(&self, key: u64) -> Option<Pos> {
        let chunk = self.heads.partition_point(|&h| h <= key).checked_sub(1)?;
        let (i, _) = self.chunks.get(chunk)?.bounds.last_le(key)?;
        Some(Pos { chunk, i })
    }

    /// The page of the leaf whose key range holds `key`.
    #[inline]
    pub(super) fn leaf_for(&self, key: u64) -> Option<u64> {
        let p = self.route(key)?;
        self.chunks.get(p.chunk)?.pages.get(p.i)
    }

    /// The pages of the `k` leaves after the leaf `key` routes to, in key
    /// order (fewer at the end of the tree).
    pub(super) fn leaves_after(&self, key: u64, k: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(k);
        let Some(Pos { chunk, i }) = self.route(key) else {
            return out;
        };
        let mut at = i + 1;
        for c in self.chunks.iter().skip(chunk) {
            while out.len() < k {
                match c.pages.get(at) {
                    Some(p) => out.push(p),
                    None => break,
                }
                at += 1;
            }
            if out.len() >= k {
                break;
            }
            at = 0;
        }
        out
    }

    /// The leaf `key` routes to, checked to be `page`.
    fn find(&self, key: u64, page: u64) -> Result<Pos> {
        let p = self
            .route(key)
            .ok_or_else(|| Error::invalid("leaf directory is empty"))?;
        let found = self.chunks.get(p.chunk).and_then(|c| c.pages.get(p.i));
        if found != Some(page) {
            return Err(Error::invalid(format!(
                "leaf directory routes key {key} to page {found:?}, the tree to {page}"
            )));
        }
        Ok(p)
    }

    /// Re-encodes chunks `first..first + n` from `leaves` (splitting it into
    /// chunks of at most [`CHUNK_MAX`], dropping it if empty).
    fn replace(&mut self, first: usize, n: usize, leaves: &[Leaf]) -> Result<()> {
        let parts = leaves.len().div_ceil(CHUNK_MAX);
        let mut heads = Vec::with_capacity(parts);
        let mut chunks = Vec::with_capacity(parts);
        if parts > 0 {
            let per = leaves.len().div_ceil(parts);
            for part in leaves.chunks(per) {
                heads.push(part.first().map_or(0, |l| l.0));
                chunks.push(Chunk::encode(part)?);
            }
        }
        let old: usize = self
            .chunks
            .get(first..first + n)
            .map_or(0, |c| c.iter().map(Chunk::len).sum());
        self.heads.splice(first..first + n, heads);
        self.chunks.splice(first..first + n, chunks);
        self.leaves = self.leaves + leaves.len() - old;
        if let Some(h) = self.heads.first_mut() {
            // Keys below the first leaf's bound route to it.
            *h = 0;
        }
        Ok(())
    }

    /// Leaf `left` (the leaf `key` routes to) split: the new leaf `right`
    /// takes the keys from `sep` on.
    pub(super) fn split(&mut self, key: u64, left: u64, sep: u64, right: u64) -> Result<()> {
        let p = self.find(key, left)?;
        let mut leaves = self.chunks.get(p.chunk).map(Chunk::decode).unwrap_or_default();
        let lo = leaves.get(p.i).map_or(0, |l| l.0);
        if sep <= lo && p.chunk + p.i > 0 {
            return Err(Error::invalid("split separator below the leaf's bound"));
        }
        leaves.insert(p.i + 1, (sep, right));
        self.replace(p.chunk, 1, &leaves)
    }

    /// Leaf `page` (the leaf `key` routes to) was freed. With `to_left` its
    /// key range joins the leaf before it (the tree removed its own lower
    /// bound); otherwise the leaf after it takes the range (the tree removed
    /// the next leaf's lower bound).
    pub(super) fn remove(&mut self, key: u64, page: u64, to_left: bool) -> Result<()> {
        let p = self.find(key, page)?;
        // The chunk and its successor, when the next leaf is needed there.
        let last = self.chunks.get(p.chunk).map_or(0, Chunk::len);
        let n = if !to_left && p.i + 1 == last && p.chunk + 1 < self.chunks.len() {
            2
        } else {
            1
        };
        let mut leaves: Vec<Leaf> = self
            .chunks
            .get(p.chunk..p.chunk + n)
            .unwrap_or(&[])
            .iter()
            .flat_map(Chunk::decode)
            .collect();
        if p.i >= leaves.len() {
            return Err(Error::invalid("leaf directory position out of range"));
        }
        let (bound, _) = leaves.remove(p.i);
        if !to_left {
            match leaves.get_mut(p.i) {
                Some(next) => next.0 = bound,
                None => return Err(Error::invalid("freed leaf has no right neighbour")),
            }
        }
        self.replace(p.chunk, n, &leaves)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive_route(leaves: &[Leaf], key: u64) -> u64 {
        leaves.iter().rev().find(|l| l.0 <= key).map_or(0, |l| l.1)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Splits and frees keep the directory equal to a plain list that
        /// applies the same edits, and it routes every key as the list does.
        #[test]
        fn edits_match_a_plain_list(ops in proptest::collection::vec((any::<u64>(), any::<bool>(), any::<bool>()), 1..700)) {
            let mut plain: Vec<Leaf> = vec![(0, 1)];
            let mut d = LeafDir::new(&plain).unwrap();
            let mut next_page = 2;
            for (key, grow, to_left) in ops {
                let j = plain.iter().rposition(|l| l.0 <= key).unwrap();
                let page = plain[j].1;
                let hi = plain.get(j + 1).map_or(u64::MAX, |l| l.0);
                if grow || plain.len() < 3 {
                    // A separator strictly inside the leaf's range.
                    let lo = plain[j].0;
                    if hi - lo < 2 { continue; }
                    let sep = lo + 1 + key % (hi - lo - 1);
                    d.split(key, page, sep, next_page).unwrap();
                    plain.insert(j + 1, (sep, next_page));
                    next_page += 1;
                } else {
                    let to_left = to_left && j > 0 || j + 1 == plain.len();
                    d.remove(key, page, to_left).unwrap();
                    let (b, _) = plain.remove(j);
                    if !to_left { plain[j].0 = b; }
                }
                prop_assert_eq!(d.len(), plain.len());
            }
            prop_assert_eq!(d.leaves(), plain.clone());
            for l in &plain {
                for k in [l.0, l.0.saturating_sub(1), l.0.saturating_add(1)] {
                    prop_assert_eq!(d.leaf_for(k), Some(naive_route(&plain, k)));
                }
            }
        }
    }

    #[test]
    fn a_bulk_loaded_directory_takes_few_bytes_per_leaf() {
        // 40,000 leaves of 255 keys 1,000 apart, consecutive pages.
        let leaves: Vec<Leaf> = (0..40_000u64).map(|j| (j * 255_000, 1 + j)).collect();
        let d = LeafDir::new(&leaves).unwrap();
        let per_leaf = d.memory_bytes() as f64 / 40_000.0;
        assert!(per_leaf < 3.5, "{per_leaf} B per leaf");
        assert_eq!(d.leaf_for(255_000 * 7 + 3), Some(8));
    }

    #[test]
    fn a_wrong_page_is_refused() {
        let mut d = LeafDir::new(&[(0, 1), (100, 2)]).unwrap();
        assert!(d.split(150, 1, 160, 3).is_err());
        assert!(d.remove(50, 2, true).is_err());
        assert!(LeafDir::new(&[(5, 1)]).is_err());
        assert!(LeafDir::new(&[(0, 1), (0, 2)]).is_err());
    }
}
