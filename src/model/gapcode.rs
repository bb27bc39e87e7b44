//! Gap-coded rough separators: a non-decreasing `u64` array whose values are
//! chosen inside per-element bounds `[lo_j, hi_j]` (Zhang's "-D" freedom, as
//! in [`LecoArray::encode_bounded`](super::LecoArray::encode_bounded)) and
//! stored as gaps at the coarsest precision each bound allows.
//!
//! LeCo fits a line to a partition and stores every residual at the width of
//! the widest one; on clustered keys (fb-like) that width is set by the jumps
//! and the rough-separator freedom (one key gap) never narrows it. Here every
//! element `j > 0` of a block is the previous value plus `t · 2^e`, with the
//! largest useful `e`: where the gap between two pages is wide, its low bits
//! are simply not stored. `t` is stored as its bit length and its bits below
//! the leading one; `e` and the bit length as Exp-Golomb codes of their
//! change from the previous element (neighbouring gaps are alike). On fb-like
//! page separators this takes about 17 bits per value against LeCo's 29.
//!
//! Access is by blocks of `2^block_log2` values: each block keeps its first
//! value and the bit offset of its codes, so `get` and `upper_bound` decode at
//! most one block (a binary search over the block heads, then a scan).
//!
//! Serialized layout (little-endian): magic `STRATAGA` (u64), version (u32),
//! `n` (u64), `block_log2` (u32), block count (u64), per block head (u64) and
//! bit offset (u64), word count (u64), words (u64 each), crc32c of everything
//! before it (u32). Decoding validates every field and every code.

use super::bitpack::{BitWriter, bits_needed, low_mask, read_bits};
use crate::format::bytes::Cursor;
use crate::{Error, Result};

/// Magic of a gap-coded array: `STRATAGA`.
pub(crate) const GAP_MAGIC: u64 = u64::from_le_bytes(*b"STRATAGA");
/// Format version of gap-coded arrays.
pub(crate) const GAP_VERSION: u32 = 1;
/// Default log2 of the block length (64 values per block).
pub(crate) const DEFAULT_BLOCK_LOG2: u32 = 7;

/// Appends the crc32c of `out` to it.
pub(crate) fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The body of sealed bytes after checking the checksum, magic and version
/// (errors name `what`).
pub(crate) fn open_sealed<'a>(bytes: &'a [u8], magic: u64, version: u32, what: &str) -> Result<Cursor<'a>> {
    let bad = |why: &str| Error::corruption(what, 0, why.to_string());
    let body_len = bytes.len().checked_sub(4).ok_or_else(|| bad("too short"))?;
    let (body, crc) = bytes.split_at(body_len);
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return Err(bad("checksum mismatch"));
    }
    let mut c = Cursor::new(body);
    if c.u64() != Some(magic) {
        return Err(bad("bad magic"));
    }
    if c.u32() != Some(version) {
        return Err(bad("unsupported version"));
    }
    Ok(c)
}

/// Block heads, the bit offsets of their codes, and the code words: the
/// random-access frame shared by [`GapArray`] and [`DeltaArray`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Blocks {
    heads: Vec<u64>,
    offsets: Vec<u32>,
    words: Vec<u64>,
}

impl Blocks {
    /// The blocks of an encoder's output, the code words trimmed to size.
    fn from_parts(heads: Vec<u64>, offsets: Vec<u32>, w: BitWriter) -> Self {
        let mut words = w.finish();
        words.shrink_to_fit();
        Blocks {
            heads,
            offsets,
            words,
        }
    }

    fn memory_bytes(&self) -> usize {
        self.heads.capacity() * 8 + self.offsets.capacity() * 4 + self.words.capacity() * 8
    }

    /// Block count, per block head (u64) and bit offset (u64), word count
    /// (u64), words.
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.heads.len() as u64).to_le_bytes());
        for (h, o) in self.heads.iter().zip(&self.offsets) {
            out.extend_from_slice(&h.to_le_bytes());
            out.extend_from_slice(&u64::from(*o).to_le_bytes());
        }
        out.extend_from_slice(&(self.words.len() as u64).to_le_bytes());
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// Reads what [`write`](Self::write) wrote for `n` values in blocks of
    /// `2^block_log2`.
    fn read(c: &mut Cursor<'_>, n: usize, block_log2: u32, what: &str) -> Result<Self> {
        let bad = |why: &str| Error::corruption(what, 0, why.to_string());
        let left = c.remaining();
        let nb = usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("too long"))?;
        if block_log2 > 16 || nb != n.div_ceil(1 << block_log2) || nb > left / 16 {
            return Err(bad("block count disagrees with the length"));
        }
        let mut b = Blocks {
            heads: Vec::with_capacity(nb),
            offsets: Vec::with_capacity(nb),
            words: Vec::new(),
        };
        for _ in 0..nb {
            b.heads.push(c.u64().ok_or_else(|| bad("heads cut"))?);
            let o = c.u64().ok_or_else(|| bad("offsets cut"))?;
            b.offsets
                .push(u32::try_from(o).map_err(|_| bad("offset too large"))?);
        }
        let nw = usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("too long"))?;
        if nw > left / 8 {
            return Err(bad("word count too large"));
        }
        b.words.reserve_exact(nw);
        for _ in 0..nw {
            b.words.push(c.u64().ok_or_else(|| bad("words cut"))?);
        }
        Ok(b)
    }
}

/// A gap-coded non-decreasing array. See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapArray {
    n: usize,
    block_log2: u32,
    blocks: Blocks,
}

/// Zigzag: 0, -1, 1, -2, ... → 0, 1, 2, 3, ...
#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Bits of the order-0 Exp-Golomb code of `u` (`u < 2^32` for a code the
/// reader accepts).
#[inline]
fn eg0_len(u: u64) -> u32 {
    2 * bits_needed(u + 1) - 1
}

/// Writes `u` (`u < 2^32`) as: `z` zero bits, a one bit, then the low `z`
/// bits of `u + 1`, where `z + 1` is the bit length of `u + 1`.
#[inline]
fn put_eg0(w: &mut BitWriter, u: u64) {
    let v = u + 1;
    let z = bits_needed(v) - 1;
    w.push(0, z);
    w.push(1, 1);
    w.push(v & low_mask(z), z);
}

/// Reads an order-0 Exp-Golomb code at `*pos`; `None` on a code longer than
/// any the encoder writes.
#[inline]
fn get_eg0(words: &[u64], pos: &mut u64) -> Option<u64> {
    let peek = read_bits(words, *pos, 64);
    let z = peek.trailing_zeros();
    if z > 32 {
        return None;
    }
    let low = read_bits(words, *pos + z as u64 + 1, z);
    *pos += 2 * z as u64 + 1;
    Some(((1u64 << z) | low) - 1)
}

/// The 64 bits from bit offset `pos` on (bits past the end of `words` read
/// as 0): two words and one shift, no branch on the offset.
#[inline(always)]
fn window(words: &[u64], pos: u64) -> u64 {
    let i = (pos >> 6) as usize;
    let lo = words.get(i).copied().unwrap_or(0);
    let hi = words.get(i.wrapping_add(1)).copied().unwrap_or(0);
    (((u128::from(hi) << 64) | u128::from(lo)) >> (pos & 63)) as u64
}

/// The codes of one step, as read from a 64-bit window.
#[derive(Debug, Clone, Copy)]
struct Fast {
    /// The step's bit length (0: a zero step).
    len: u32,
    /// The change of the shift (0 for a zero step).
    dshift: i64,
    /// The step before its shift: its leading one and the bits below it.
    t: u64,
    /// Bits the codes take.
    used: u32,
}

/// The usual step (about 17 bits: both Exp-Golomb codes at most 25 bits, a
/// bit length of at most 40, all within the window `w`) decoded from the
/// previous bit length `len`; `None` for anything longer, which
/// [`State::next_slow`] reads. Shared by the checked [`State::next`] and
/// the scan of [`GapArray::last_le`], which apply it with and without checks.
#[inline(always)]
fn fast_codes(w: u64, len: u32) -> Option<Fast> {
    let z1 = w.trailing_zeros();
    if z1 > 12 {
        return None;
    }
    // First code: the change of the step's bit length.
    let u1 = (((w >> (z1 + 1)) & ((1u64 << z1) - 1)) | (1u64 << z1)) - 1;
    let l = i64::from(len).wrapping_add(unzigzag(u1));
    let c1 = 2 * z1 + 1;
    if l == 0 {
        return Some(Fast {
            len: 0,
            dshift: 0,
            t: 0,
            used: c1,
        });
    }
    let w2 = w >> c1;
    let z2 = w2.trailing_zeros();
    if !(1..=40).contains(&l) || z2 > 12 || c1 + 2 * z2 + l as u32 > 64 {
        return None;
    }
    // Second code: the change of the shift; then the step's bits below its
    // leading one.
    let l = l as u32;
    let u2 = (((w2 >> (z2 + 1)) & ((1u64 << z2) - 1)) | (1u64 << z2)) - 1;
    let t = (1u64 << (l - 1)) | ((w2 >> (2 * z2 + 1)) & ((1u64 << (l - 1)) - 1));
    Some(Fast {
        len: l,
        dshift: unzigzag(u2),
        t,
        used: c1 + 2 * z2 + l,
    })
}

/// Shifts under the largest that fits that the encoder tries. Each shift
/// below the largest costs one more mantissa bit, and the two exp-Golomb
/// codes of a step cost from 2 to 30 bits together (their deltas lie
/// within ±64), so no shift more than 28 below the largest can cost the
/// least: trying these, smallest first, picks what trying all 64 would.
const SHIFTS_BELOW_TOP: u32 = 28;

/// Decoder state inside a block: the current value and the previous shift
/// and bit length.
#[derive(Debug, Clone, Copy)]
struct State {
    value: u64,
    shift: u32,
    len: u32,
}

impl State {
    fn new(head: u64) -> Self {
        State {
            value: head,
            shift: 0,
            len: 0,
        }
    }

    /// Decodes the next value; `None` on a bad code or an overflow.
    #[inline]
    fn next(&mut self, words: &[u64], pos: &mut u64) -> Option<u64> {
        let Some(f) = fast_codes(window(words, *pos), self.len) else {
            return self.next_slow(words, pos);
        };
        let shift = u32::try_from(i64::from(self.shift) + f.dshift)
            .ok()
            .filter(|&s| s < 64)?;
        let step = f.t.checked_shl(shift).filter(|s| s >> shift == f.t)?;
        self.value = self.value.checked_add(step)?;
        self.shift = shift;
        self.len = f.len;
        *pos += u64::from(f.used);
        Some(self.value)
    }

    /// [`next`](Self::next) for any code the encoder writes.
    fn next_slow(&mut self, words: &[u64], pos: &mut u64) -> Option<u64> {
        let len = i64::from(self.len) + unzigzag(get_eg0(words, pos)?);
        let len = u32::try_from(len).ok().filter(|&l| l <= 64)?;
        if len > 0 {
            let shift = i64::from(self.shift) + unzigzag(get_eg0(words, pos)?);
            let shift = u32::try_from(shift).ok().filter(|&s| s < 64)?;
            let mant = read_bits(words, *pos, len - 1);
            *pos += u64::from(len - 1);
            let t = if len == 64 {
                (1u64 << 63) | mant
            } else {
                (1u64 << (len - 1)) | mant
            };
            let step = t.checked_shl(shift).filter(|s| s >> shift == t)?;
            self.value = self.value.checked_add(step)?;
            self.shift = shift;
        }
        self.len = len;
        Some(self.value)
    }

    /// Bits the codes of a step `t << shift` take from this state.
    fn cost(&self, t: u64, shift: u32) -> u32 {
        let len = bits_needed(t);
        let mut bits = eg0_len(zigzag(i64::from(len) - i64::from(self.len)));
        if len > 0 {
            bits += eg0_len(zigzag(i64::from(shift) - i64::from(self.shift))) + len - 1;
        }
        bits
    }

    /// Writes the codes of a step `t << shift` and moves to its value.
    fn put(&mut self, w: &mut BitWriter, t: u64, shift: u32) {
        let len = bits_needed(t);
        put_eg0(w, zigzag(i64::from(len) - i64::from(self.len)));
        if len > 0 {
            put_eg0(w, zigzag(i64::from(shift) - i64::from(self.shift)));
            w.push(t & low_mask(len - 1), len - 1);
            self.value += t << shift;
            self.shift = shift;
        }
        self.len = len;
    }
}

/// One step of [`GapArray::last_le`] through [`State::next_slow`] (long
/// codes): the next value, shift, bit length and the bits the step took;
/// `None` on a bad code.
#[cold]
#[inline(never)]
fn slow_step(words: &[u64], pos: u64, value: u64, shift: u32, len: u32) -> Option<(u64, u32, u32, u64)> {
    let mut st = State { value, shift, len };
    let mut p = pos;
    let v = st.next_slow(words, &mut p)?;
    Some((v, st.shift, st.len, p.wrapping_sub(pos)))
}

impl GapArray {
    /// Encodes a non-decreasing choice of values `v_j` in `[lo_j, hi_j]`.
    /// Errors if some `lo_j > hi_j` or the bounds admit no non-decreasing
    /// choice (some `hi_j` below an earlier value).
    pub fn encode_bounded(lo: &[u64], hi: &[u64]) -> Result<Self> {
        Self::encode_bounded_with_block(lo, hi, DEFAULT_BLOCK_LOG2)
    }

    /// Exact values (`lo = hi = values`), which must be non-decreasing.
    pub fn encode(values: &[u64]) -> Result<Self> {
        Self::encode_bounded(values, values)
    }

    /// [`encode_bounded`](Self::encode_bounded) with blocks of `2^block_log2` values.
    pub fn encode_bounded_with_block(lo: &[u64], hi: &[u64], block_log2: u32) -> Result<Self> {
        Self::encode_searching(lo, hi, block_log2, SHIFTS_BELOW_TOP)
    }

    /// The encoder, trying the `below` shifts under the largest that fits
    /// and that one (64 tries every shift).
    fn encode_searching(lo: &[u64], hi: &[u64], block_log2: u32, below: u32) -> Result<Self> {
        if lo.len() != hi.len() {
            return Err(Error::invalid(
                "gap array: one lower and one upper bound per value",
            ));
        }
        if block_log2 > 16 {
            return Err(Error::invalid("gap array: blocks of at most 2^16 values"));
        }
        let block = 1usize << block_log2;
        let mut heads = Vec::with_capacity(lo.len().div_ceil(block));
        let mut offsets = Vec::with_capacity(heads.capacity());
        let mut w = BitWriter::new();
        let mut state = State::new(0);
        let mut prev: Option<u64> = None;
        for (j, (&l, &h)) in lo.iter().zip(hi).enumerate() {
            if l > h {
                return Err(Error::invalid(format!(
                    "gap array: bound {j} is empty ({l} > {h})"
                )));
            }
            if prev.is_some_and(|p| h < p) {
                return Err(Error::invalid(format!(
                    "gap array: bound {j} lies below an earlier value (bounds must increase)"
                )));
            }
            if j % block == 0 {
                let offset = u32::try_from(w.bit_len())
                    .map_err(|_| Error::invalid("gap array: more than 2^32 bits of codes"))?;
                heads.push(h);
                offsets.push(offset);
                state = State::new(h);
                prev = Some(h);
                continue;
            }
            let v = state.value;
            let (d_lo, d_hi) = (l.saturating_sub(v), h - v);
            // Candidates: a zero step when allowed, else every shift whose
            // coarsest step below `d_hi` still reaches `d_lo`.
            let mut best: Option<(u32, u64, u32)> = None;
            let mut consider = |t: u64, shift: u32| {
                let c = state.cost(t, shift);
                if best.is_none_or(|(bc, _, _)| c < bc) {
                    best = Some((c, t, shift));
                }
            };
            if d_lo == 0 {
                consider(0, state.shift);
            } else {
                // A shift fits when `d_hi` with its low `shift` bits cleared
                // still reaches `d_lo`: every shift up to the largest that
                // fits, `top` (see SHIFTS_BELOW_TOP for the rest).
                let top = (0..bits_needed(d_hi))
                    .rev()
                    .find(|&shift| (d_hi >> shift) << shift >= d_lo)
                    .unwrap_or(0);
                for shift in top.saturating_sub(below)..=top {
                    consider(d_hi >> shift, shift);
                }
            }
            let (_, t, shift) = best.ok_or_else(|| Error::invalid("gap array: no step fits the bounds"))?;
            state.put(&mut w, t, shift);
            prev = Some(state.value);
        }
        Ok(GapArray {
            n: lo.len(),
            block_log2,
            blocks: Blocks::from_parts(heads, offsets, w),
        })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there is no value.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn block_len(&self) -> usize {
        1 << self.block_log2
    }

    /// Value `i` (decodes up to one block).
    pub fn get(&self, i: usize) -> Option<u64> {
        if i >= self.n {
            return None;
        }
        let b = i >> self.block_log2;
        let mut state = State::new(*self.blocks.heads.get(b)?);
        let mut pos = u64::from(*self.blocks.offsets.get(b)?);
        for _ in 0..(i & (self.block_len() - 1)) {
            state.next(&self.blocks.words, &mut pos)?;
        }
        Some(state.value)
    }

    /// Number of values `<= x` (the index of the first value `> x`).
    pub fn upper_bound(&self, x: u64) -> usize {
        self.last_le(x).map_or(0, |(i, _)| i + 1)
    }

    /// The last value `<= x` and its index (`None` if every value is `> x`).
    ///
    /// The hot loop of a zone-map lookup. The codes are known to be good
    /// (this array came from the encoder or from [`from_bytes`](Self::from_bytes),
    /// which decodes every code), so the usual step is decoded from one
    /// two-word window with the decoder state in registers and wrapping
    /// arithmetic where `State::next` checks: the same values on good codes,
    /// and never a panic. Long codes take `State::next_slow`.
    pub fn last_le(&self, x: u64) -> Option<(usize, u64)> {
        let b = self.blocks.heads.partition_point(|&h| h <= x).checked_sub(1)?;
        let first = b << self.block_log2;
        let end = self.n.min(first + self.block_len());
        let words = self.blocks.words.as_slice();
        let mut value = *self.blocks.heads.get(b)?;
        let mut pos = u64::from(*self.blocks.offsets.get(b)?);
        let (mut shift, mut len) = (0u32, 0u32);
        let mut i = first + 1;
        while i < end {
            let step = match fast_codes(window(words, pos), len) {
                Some(f) => {
                    let s = (i64::from(shift).wrapping_add(f.dshift) as u32) & 63;
                    Some((value.wrapping_add(f.t << s), s, f.len, u64::from(f.used)))
                }
                None => slow_step(words, pos, value, shift, len),
            };
            let Some((next, s, l, used)) = step else {
                break;
            };
            if next > x {
                break;
            }
            (value, shift, len) = (next, s, l);
            pos = pos.wrapping_add(used);
            i += 1;
        }
        Some((i - 1, value))
    }

    /// All values in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let block = self.block_len();
        let mut state = State::new(0);
        let mut pos = 0u64;
        (0..self.n).map_while(move |i| {
            if i % block == 0 {
                let b = i >> self.block_log2;
                state = State::new(*self.blocks.heads.get(b)?);
                pos = u64::from(*self.blocks.offsets.get(b)?);
                Some(state.value)
            } else {
                state.next(&self.blocks.words, &mut pos)
            }
        })
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Self>() + self.blocks.memory_bytes()
    }

    /// Bits of codes (without block heads and offsets).
    pub fn code_bits(&self) -> u64 {
        self.blocks.words.len().saturating_sub(1) as u64 * 64
    }

    /// Serializes (layout in the module documentation).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + self.blocks.heads.len() * 16 + self.blocks.words.len() * 8);
        out.extend_from_slice(&GAP_MAGIC.to_le_bytes());
        out.extend_from_slice(&GAP_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.n as u64).to_le_bytes());
        out.extend_from_slice(&self.block_log2.to_le_bytes());
        self.blocks.write(&mut out);
        seal(out)
    }

    /// Decodes and validates (checksum, lengths, every code, order); never
    /// panics on bad bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        const WHAT: &str = "gap-coded array";
        let bad = |what: &str| Error::corruption(WHAT, 0, what.to_string());
        let mut c = open_sealed(bytes, GAP_MAGIC, GAP_VERSION, WHAT)?;
        let n = usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("too long"))?;
        let block_log2 = c.u32().ok_or_else(|| bad("cut"))?;
        let blocks = Blocks::read(&mut c, n, block_log2, WHAT)?;
        let a = GapArray {
            n,
            block_log2,
            blocks,
        };
        // Every code decodes, in bounds, to a non-decreasing sequence.
        let limit = a.blocks.words.len() as u64 * 64;
        let block = a.block_len();
        let mut prev = 0u64;
        for (b, (&head, &off)) in a.blocks.heads.iter().zip(&a.blocks.offsets).enumerate() {
            if head < prev {
                return Err(bad("block heads out of order"));
            }
            let mut state = State::new(head);
            let mut pos = u64::from(off);
            for _ in 1..block.min(n - b * block) {
                let v = state
                    .next(&a.blocks.words, &mut pos)
                    .ok_or_else(|| bad("bad code"))?;
                if pos > limit {
                    return Err(bad("codes run past the end"));
                }
                prev = v;
            }
            prev = prev.max(head);
        }
        Ok(a)
    }
}

/// Magic of a delta-coded array: `STRATADA`.
pub(crate) const DELTA_MAGIC: u64 = u64::from_le_bytes(*b"STRATADA");
/// Format version of delta-coded arrays.
pub(crate) const DELTA_VERSION: u32 = 1;

/// Reads an order-`k` Exp-Golomb code (`k <= 63`).
#[inline]
fn get_egk(words: &[u64], pos: &mut u64, k: u32) -> Option<u64> {
    let high = get_eg0(words, pos)?;
    let low = read_bits(words, *pos, k);
    *pos += u64::from(k);
    high.checked_shl(k).filter(|h| h >> k == high).map(|h| h | low)
}

/// Writes `u` as an order-`k` Exp-Golomb code: `u >> k` in order 0, then the
/// low `k` bits.
#[inline]
fn put_egk(w: &mut BitWriter, u: u64, k: u32) {
    put_eg0(w, u >> k);
    w.push(u & low_mask(k), k);
}

#[inline]
fn egk_len(u: u64, k: u32) -> u64 {
    u64::from(eg0_len(u >> k)) + u64::from(k)
}

/// A non-decreasing array of small steps (segment bases in pages, say):
/// block heads and bit offsets as in [`GapArray`], and every other value as
/// the previous one plus `min_step` plus an order-`k` Exp-Golomb code, with
/// `min_step` and `k` chosen for the whole array. `get` decodes one block.
///
/// Serialized layout (little-endian): magic `STRATADA` (u64), version (u32),
/// `n` (u64), `block_log2` (u32), `k` (u32), `min_step` (u64), block count
/// (u64), per block head (u64) and bit offset (u64), word count (u64), words,
/// crc32c (u32).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaArray {
    n: usize,
    block_log2: u32,
    k: u32,
    min_step: u64,
    blocks: Blocks,
}

impl DeltaArray {
    /// Encodes non-decreasing `values`.
    pub fn encode(values: &[u64]) -> Result<Self> {
        let block_log2 = DEFAULT_BLOCK_LOG2;
        let block = 1usize << block_log2;
        if values.iter().zip(values.iter().skip(1)).any(|(a, b)| a > b) {
            return Err(Error::invalid("delta array: values must not decrease"));
        }
        let steps = || {
            values
                .iter()
                .zip(values.iter().skip(1))
                .enumerate()
                .filter(move |(i, _)| (i + 1) % block != 0)
                .map(|(_, (a, b))| b - a)
        };
        let min_step = steps().min().unwrap_or(0);
        // Codes of `u >> k` stay below 2^32 (what the reader accepts).
        let widest = bits_needed(steps().max().unwrap_or(0) - min_step);
        let least = widest.saturating_sub(31);
        let k = (least..=least.max(32))
            .min_by_key(|&k| steps().map(|d| egk_len(d - min_step, k)).sum::<u64>())
            .unwrap_or(0);
        let mut heads = Vec::with_capacity(values.len().div_ceil(block));
        let mut offsets = Vec::with_capacity(heads.capacity());
        let mut w = BitWriter::new();
        for (i, &v) in values.iter().enumerate() {
            if i % block == 0 {
                heads.push(v);
                offsets.push(
                    u32::try_from(w.bit_len())
                        .map_err(|_| Error::invalid("delta array: more than 2^32 bits of codes"))?,
                );
            } else if let Some(&p) = values.get(i - 1) {
                put_egk(&mut w, v - p - min_step, k);
            }
        }
        Ok(DeltaArray {
            n: values.len(),
            block_log2,
            k,
            min_step,
            blocks: Blocks::from_parts(heads, offsets, w),
        })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there is no value.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Values `i` and `i + 1` (the second `None` past the end), decoding one
    /// block (two when `i + 1` starts the next).
    pub fn get_pair(&self, i: usize) -> Option<(u64, Option<u64>)> {
        if i >= self.n {
            return None;
        }
        let b = i >> self.block_log2;
        let mut v = *self.blocks.heads.get(b)?;
        let mut pos = u64::from(*self.blocks.offsets.get(b)?);
        let r = i & ((1 << self.block_log2) - 1);
        for _ in 0..r {
            v = self.step(v, &mut pos)?;
        }
        let next = if i + 1 >= self.n {
            None
        } else if (i + 1) >> self.block_log2 != b {
            Some(*self.blocks.heads.get(b + 1)?)
        } else {
            Some(self.step(v, &mut pos)?)
        };
        Some((v, next))
    }

    /// Value `i`.
    pub fn get(&self, i: usize) -> Option<u64> {
        self.get_pair(i).map(|(v, _)| v)
    }

    #[inline]
    fn step(&self, v: u64, pos: &mut u64) -> Option<u64> {
        v.checked_add(get_egk(&self.blocks.words, pos, self.k)?.checked_add(self.min_step)?)
    }

    /// All values in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let block = 1usize << self.block_log2;
        let (mut v, mut pos) = (0u64, 0u64);
        (0..self.n).map_while(move |i| {
            if i % block == 0 {
                let b = i >> self.block_log2;
                v = *self.blocks.heads.get(b)?;
                pos = u64::from(*self.blocks.offsets.get(b)?);
            } else {
                v = self.step(v, &mut pos)?;
            }
            Some(v)
        })
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Self>() + self.blocks.memory_bytes()
    }

    /// Serializes (layout in the type documentation).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.blocks.heads.len() * 16 + self.blocks.words.len() * 8);
        out.extend_from_slice(&DELTA_MAGIC.to_le_bytes());
        out.extend_from_slice(&DELTA_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.n as u64).to_le_bytes());
        out.extend_from_slice(&self.block_log2.to_le_bytes());
        out.extend_from_slice(&self.k.to_le_bytes());
        out.extend_from_slice(&self.min_step.to_le_bytes());
        self.blocks.write(&mut out);
        seal(out)
    }

    /// Decodes and validates (checksum, lengths, every code, order); never
    /// panics on bad bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        const WHAT: &str = "delta-coded array";
        let bad = |what: &str| Error::corruption(WHAT, 0, what.to_string());
        let mut c = open_sealed(bytes, DELTA_MAGIC, DELTA_VERSION, WHAT)?;
        let n = usize::try_from(c.u64().ok_or_else(|| bad("cut"))?).map_err(|_| bad("too long"))?;
        let block_log2 = c.u32().ok_or_else(|| bad("cut"))?;
        let k = c.u32().ok_or_else(|| bad("cut"))?;
        let min_step = c.u64().ok_or_else(|| bad("cut"))?;
        if k > 63 {
            return Err(bad("bad parameters"));
        }
        let blocks = Blocks::read(&mut c, n, block_log2, WHAT)?;
        let a = DeltaArray {
            n,
            block_log2,
            k,
            min_step,
            blocks,
        };
        let limit = a.blocks.words.len() as u64 * 64;
        let block = 1usize << block_log2;
        let mut prev = 0u64;
        for (b, (&head, &off)) in a.blocks.heads.iter().zip(&a.blocks.offsets).enumerate() {
            if head < prev {
                return Err(bad("block heads out of order"));
            }
            let (mut v, mut pos) = (head, u64::from(off));
            for _ in 1..block.min(n - b * block) {
                v = a.step(v, &mut pos).ok_or_else(|| bad("bad code"))?;
                if pos > limit {
                    return Err(bad("codes run past the end"));
                }
            }
            prev = v;
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Page separator bounds of sorted unique keys, as a zone map uses them.
    fn bounds(keys: &[u64], per_page: usize) -> (Vec<u64>, Vec<u64>) {
        let starts: Vec<usize> = (0..keys.len()).step_by(per_page).collect();
        let lo = starts
            .iter()
            .map(|&s| if s == 0 { 0 } else { keys[s - 1] + 1 })
            .collect();
        let hi = starts.iter().map(|&s| keys[s]).collect();
        (lo, hi)
    }

    fn check(lo: &[u64], hi: &[u64], block_log2: u32, probes: &[u64]) {
        let a = GapArray::encode_bounded_with_block(lo, hi, block_log2).unwrap();
        let vals: Vec<u64> = a.iter().collect();
        assert_eq!(vals.len(), lo.len());
        for j in 0..lo.len() {
            assert!(lo[j] <= vals[j] && vals[j] <= hi[j], "value {j} out of bounds");
            assert_eq!(a.get(j), Some(vals[j]));
        }
        assert!(vals.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(a.get(lo.len()), None);
        for &x in probes.iter().chain(&vals).chain(lo).chain(hi) {
            assert_eq!(
                a.upper_bound(x),
                vals.partition_point(|&v| v <= x),
                "upper_bound({x})"
            );
        }
        let b = GapArray::from_bytes(&a.to_bytes()).unwrap();
        assert_eq!(a, b);
    }

    /// The encoder's shortened shift search writes the bytes the search
    /// over every shift writes, on zone-map bounds and on random bounds.
    #[test]
    fn the_shift_window_loses_nothing() {
        use rand::{Rng, SeedableRng};
        let mut r = rand_pcg::Pcg64::seed_from_u64(11);
        for round in 0..200 {
            let n = r.random_range(1..3000);
            let bits = r.random_range(1..=64u32);
            let keys = sorted_unique(
                (0..n)
                    .map(|_| r.random::<u64>() >> (64 - bits))
                    .collect(),
            );
            let per_page = r.random_range(1..40);
            let (lo, hi) = bounds(&keys, per_page);
            for block_log2 in [1, 5, 8] {
                let fast = GapArray::encode_searching(&lo, &hi, block_log2, SHIFTS_BELOW_TOP).unwrap();
                let full = GapArray::encode_searching(&lo, &hi, block_log2, 64).unwrap();
                assert_eq!(fast.to_bytes(), full.to_bytes(), "round {round}");
            }
        }
    }

    fn sorted_unique(mut v: Vec<u64>) -> Vec<u64> {
        v.sort_unstable();
        v.dedup();
        v
    }

    proptest! {
        #[test]
        fn separators_lie_in_their_bounds(
            keys in prop::collection::vec(any::<u64>(), 1..600),
            per_page in 1usize..20,
            block_log2 in 0u32..5,
            probes in prop::collection::vec(any::<u64>(), 0..50),
        ) {
            let keys = sorted_unique(keys);
            let (lo, hi) = bounds(&keys, per_page);
            check(&lo, &hi, block_log2, &probes);
        }

        #[test]
        fn clustered_keys_and_huge_gaps(
            runs in prop::collection::vec((any::<u64>(), 1u64..50, 1u64..4), 1..20),
            per_page in 1usize..8,
        ) {
            let mut keys = Vec::new();
            for (start, len, step) in runs {
                for i in 0..len {
                    keys.push(start.saturating_add(i * step));
                }
            }
            keys.push(u64::MAX);
            keys.push(0);
            let keys = sorted_unique(keys);
            let (lo, hi) = bounds(&keys, per_page);
            check(&lo, &hi, 3, &[0, 1, u64::MAX - 1, u64::MAX]);
        }

        #[test]
        fn exact_values_with_repeats(values in prop::collection::vec(any::<u64>(), 0..300)) {
            let mut v = values;
            v.sort_unstable();
            check(&v, &v, 2, &[0, u64::MAX]);
            let a = GapArray::encode(&v).unwrap();
            prop_assert!(a.iter().eq(v.iter().copied()));
        }

        #[test]
        fn corrupt_bytes_never_panic(
            keys in prop::collection::vec(any::<u64>(), 1..200),
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let keys = sorted_unique(keys);
            let (lo, hi) = bounds(&keys, 3);
            let mut bytes = GapArray::encode_bounded(&lo, &hi).unwrap().to_bytes();
            let i = at.index(bytes.len());
            bytes[i] ^= flip;
            prop_assert!(GapArray::from_bytes(&bytes).is_err());
            let _ = GapArray::from_bytes(&bytes[..i]);
        }
    }

    #[test]
    fn rejects_bad_bounds() {
        assert!(GapArray::encode_bounded(&[5], &[4]).is_err());
        assert!(GapArray::encode_bounded(&[10, 0], &[10, 5]).is_err());
        assert!(GapArray::encode_bounded(&[1, 2], &[3]).is_err());
    }

    #[test]
    fn wide_gaps_drop_their_low_bits() {
        // Pages whose gaps are 2^40 wide: each separator needs a handful of
        // bits, not the 40 a lossless code of these keys would.
        let keys: Vec<u64> = (0..64 * 50).map(|i| (i / 64) << 40 | (i % 64)).collect();
        let (lo, hi) = bounds(&keys, 64);
        let a = GapArray::encode_bounded(&lo, &hi).unwrap();
        assert!(a.code_bits() <= 64 * 50, "{} bits of codes", a.code_bits());
        check(&lo, &hi, DEFAULT_BLOCK_LOG2, &[]);
    }

    #[test]
    fn the_codes_round_trip() {
        for u in [0u64, 1, 2, 3, 7, 8, 127, 128, 1000] {
            let mut w = BitWriter::new();
            put_eg0(&mut w, u);
            assert_eq!(w.bit_len(), u64::from(eg0_len(u)));
            let words = w.finish();
            let mut pos = 0;
            assert_eq!(get_eg0(&words, &mut pos), Some(u));
            assert_eq!(pos, u64::from(eg0_len(u)));
        }
        for v in [-64i64, -3, -1, 0, 1, 2, 64] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn delta_arrays_round_trip() {
        for values in [
            vec![],
            vec![7],
            (0..1000u64).map(|i| i * 3 + (i * i) % 7).collect::<Vec<_>>(),
            vec![0, 0, 0, u64::MAX - 1, u64::MAX],
            (0..200u64).map(|i| i << 50).collect(),
        ] {
            let a = DeltaArray::encode(&values).unwrap();
            assert!(a.iter().eq(values.iter().copied()));
            for i in 0..values.len() {
                assert_eq!(a.get_pair(i), Some((values[i], values.get(i + 1).copied())));
            }
            assert_eq!(a.get(values.len()), None);
            let b = DeltaArray::from_bytes(&a.to_bytes()).unwrap();
            assert_eq!(a, b);
            let mut bytes = a.to_bytes();
            let i = bytes.len() / 2;
            bytes[i] ^= 0x10;
            assert!(DeltaArray::from_bytes(&bytes).is_err());
        }
        assert!(DeltaArray::encode(&[2, 1]).is_err());
        // Small steps take a few bits each.
        let pages: Vec<u64> = (0..6400u64).map(|i| i * 4 + (i % 3)).collect();
        let a = DeltaArray::encode(&pages).unwrap();
        assert!(
            a.memory_bytes() < 6400 * 5 / 8 + 4096,
            "{} bytes",
            a.memory_bytes()
        );
    }
}
