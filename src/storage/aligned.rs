//! Heap buffers aligned for `O_DIRECT`.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Buffers of at most this many bytes are recycled per thread: a lookup's
/// page reads, and the coalesced window reads of batched lookups, joins and
/// scans (up to a few hundred KiB each), then allocate and zero nothing.
const POOL_BYTES: usize = 1 << 20;
/// At most this many bytes of recycled buffers per thread (a queue depth's
/// worth of window reads).
const POOL_TOTAL: usize = 4 << 20;
/// At most this many recycled buffers per thread (each allocation looks
/// through them).
const POOL_LEN: usize = 32;

/// Whether a recycled allocation of `size` bytes may serve a request
/// rounded to `cap`: at least as large and at most a quarter larger, so a
/// buffer kept for long (a cached or pinned page) never holds much more
/// memory than it was asked for; page-sized requests take exact sizes only.
fn fits(size: usize, cap: usize) -> bool {
    size >= cap && size - cap <= cap / 4
}

/// Freed allocations of this thread, `(pointer, layout)`, each fully
/// initialised, and their total size; deallocated when the thread ends.
struct Pool {
    bufs: Vec<(NonNull<u8>, Layout)>,
    bytes: usize,
}

impl Drop for Pool {
    fn drop(&mut self) {
        for (ptr, layout) in self.bufs.drain(..) {
            // SAFETY: allocated with this layout by `AlignedBuf::zeroed`.
            unsafe { dealloc(ptr.as_ptr(), layout) }
        }
    }
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool {
            bufs: Vec::new(),
            bytes: 0,
        })
    };
}

/// Alignment of [`AlignedBuf`] (and of `O_DIRECT` offsets and lengths): 4 KiB.
pub const ALIGN: usize = 4096;

/// A zero-initialised heap buffer whose start is aligned to [`ALIGN`] bytes.
///
/// Its allocation is rounded up to a multiple of [`ALIGN`], so a read of the
/// whole rounded length is always a valid `O_DIRECT` transfer; `len()` is the
/// length that was asked for.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only allow reads of initialised bytes.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes.
    pub fn zeroed(len: usize) -> Self {
        let cap = rounded(len);
        let layout = match Layout::from_size_align(cap, ALIGN) {
            Ok(l) => l,
            Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
        };
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len, layout }
    }

    /// A buffer of `len` bytes whose contents are unspecified (initialised,
    /// but not necessarily zero): for a read that overwrites all of it.
    /// Reuses a buffer this thread freed when one that fits is at hand (at
    /// least as large, at most a quarter larger; the smallest such).
    pub fn for_overwrite(len: usize) -> Self {
        let cap = rounded(len);
        if cap <= POOL_BYTES {
            let reused = POOL
                .try_with(|p| {
                    let mut p = p.borrow_mut();
                    let (i, _) = p
                        .bufs
                        .iter()
                        .enumerate()
                        .filter(|(_, (_, l))| fits(l.size(), cap))
                        .min_by_key(|(_, (_, l))| l.size())?;
                    let (ptr, layout) = p.bufs.swap_remove(i);
                    p.bytes -= layout.size();
                    Some((ptr, layout))
                })
                .ok()
                .flatten();
            if let Some((ptr, layout)) = reused {
                return AlignedBuf { ptr, len, layout };
            }
        }
        AlignedBuf::zeroed(len)
    }

    /// The buffer rounded up to a multiple of [`ALIGN`] (all initialised):
    /// what an `O_DIRECT` read of it transfers.
    pub fn full_mut(&mut self) -> &mut [u8] {
        let n = self.capacity();
        // SAFETY: n <= layout.size() (the allocation was made for a length
        // at least `len`), and every byte of it is initialised.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), n) }
    }

    /// `len` rounded up to a multiple of [`ALIGN`] (at least one): the
    /// length of [`AlignedBuf::full_mut`]. A recycled allocation may be
    /// larger; the rest is not part of the buffer.
    pub fn capacity(&self) -> usize {
        rounded(self.len)
    }
}

/// `len` rounded up to a multiple of [`ALIGN`], at least [`ALIGN`].
fn rounded(len: usize) -> usize {
    len.div_ceil(ALIGN).max(1) * ALIGN
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: len <= layout.size() and all bytes are initialised.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref; we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let (ptr, layout) = (self.ptr, self.layout);
        if layout.size() <= POOL_BYTES {
            let kept = POOL
                .try_with(|p| {
                    let mut p = p.borrow_mut();
                    let room = p.bufs.len() < POOL_LEN && p.bytes + layout.size() <= POOL_TOTAL;
                    if room {
                        p.bufs.push((ptr, layout));
                        p.bytes += layout.size();
                    }
                    room
                })
                .unwrap_or(false);
            if kept {
                return;
            }
        }
        // SAFETY: allocated with this layout in `zeroed`.
        unsafe { dealloc(ptr.as_ptr(), layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        let mut b = AlignedBuf::zeroed(self.len);
        b.copy_from_slice(self);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycled_buffers_are_aligned_and_sized() {
        let mut a = AlignedBuf::zeroed(4096);
        a.fill(7);
        let p = a.as_ptr();
        drop(a);
        let b = AlignedBuf::for_overwrite(3000);
        assert_eq!(b.as_ptr(), p, "the freed buffer is reused");
        assert_eq!(b.len(), 3000);
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        // A zeroed buffer is zero even when the pool holds dirty ones.
        drop(b);
        assert!(AlignedBuf::zeroed(4096).iter().all(|&x| x == 0));
        let big = AlignedBuf::for_overwrite(1 << 20);
        assert_eq!(big.len(), 1 << 20);
    }

    /// Bytes of buffers this thread's pool holds.
    fn pooled() -> usize {
        POOL.with(|p| p.borrow().bytes)
    }

    #[test]
    fn a_larger_recycled_buffer_serves_a_smaller_read_exactly() {
        // Freed window reads of several sizes; a smaller request takes the
        // smallest that fits, and its O_DIRECT length is its own rounded
        // length, not the allocation's.
        let sizes = [64 * 4096, 16 * 4096, 32 * 4096];
        let bufs: Vec<AlignedBuf> = sizes.iter().map(|&n| AlignedBuf::for_overwrite(n)).collect();
        let ptrs: Vec<*const u8> = bufs.iter().map(|b| b.as_ptr()).collect();
        let before = pooled();
        drop(bufs);
        assert_eq!(pooled(), before + 112 * 4096);
        let before = pooled();
        let mut b = AlignedBuf::for_overwrite(28 * 4096 - 100);
        assert_eq!(b.as_ptr(), ptrs[2], "the 32-page buffer is the best fit");
        assert_eq!(pooled(), before - 32 * 4096);
        assert_eq!(b.len(), 28 * 4096 - 100);
        assert_eq!(b.capacity(), 28 * 4096);
        assert_eq!(b.full_mut().len(), 28 * 4096);
        drop(b);
        assert_eq!(pooled(), before, "returned whole");
        // Larger than any pooled buffer, or so much smaller than each that
        // it would hold far more memory than it asked for: new allocations.
        let c = AlignedBuf::for_overwrite(65 * 4096);
        let d = AlignedBuf::for_overwrite(4096);
        let e = AlignedBuf::for_overwrite(20 * 4096);
        for x in [&c, &d, &e] {
            assert!(!ptrs.contains(&x.as_ptr()));
        }
        assert_eq!(pooled(), before);
    }

    #[test]
    fn the_pool_keeps_at_most_its_byte_budget() {
        let bufs: Vec<AlignedBuf> = (0..2 * POOL_TOTAL / POOL_BYTES + 3)
            .map(|_| AlignedBuf::for_overwrite(POOL_BYTES))
            .collect();
        drop(bufs);
        assert!(pooled() <= POOL_TOTAL, "{} pooled", pooled());
        assert!(pooled() + POOL_BYTES > POOL_TOTAL, "the pool fills to its budget");
        // Many small buffers: at most POOL_LEN kept.
        // Empty the pool (its `Drop` frees what it held).
        POOL.with(|p| {
            drop(p.replace(Pool {
                bufs: Vec::new(),
                bytes: 0,
            }))
        });
        let small: Vec<AlignedBuf> = (0..3 * POOL_LEN)
            .map(|_| AlignedBuf::for_overwrite(4096))
            .collect();
        drop(small);
        assert_eq!(POOL.with(|p| p.borrow().bufs.len()), POOL_LEN);
        assert_eq!(pooled(), POOL_LEN * 4096);
        // Too large to pool: freed at once.
        let before = pooled();
        drop(AlignedBuf::for_overwrite(POOL_BYTES + 1));
        assert_eq!(pooled(), before);
    }

    #[test]
    fn aligned_and_zeroed() {
        for len in [0, 1, 4095, 4096, 4097, 1 << 20] {
            let b = AlignedBuf::zeroed(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % ALIGN, 0);
            assert!(b.iter().all(|&x| x == 0));
            assert_eq!(b.capacity() % ALIGN, 0);
            assert!(b.capacity() >= len);
        }
    }
}
