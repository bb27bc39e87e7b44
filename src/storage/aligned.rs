//! Heap buffers aligned for `O_DIRECT`.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Buffers of at most this many bytes are recycled per thread (a lookup's
/// page reads then allocate and zero nothing).
const POOL_BYTES: usize = 64 * 1024;
/// At most this many recycled buffers per thread.
const POOL_LEN: usize = 8;

/// Freed small allocations of this thread, `(pointer, layout)`, each fully
/// initialised; deallocated when the thread ends.
struct Pool(Vec<(NonNull<u8>, Layout)>);

impl Drop for Pool {
    fn drop(&mut self) {
        for (ptr, layout) in self.0.drain(..) {
            // SAFETY: allocated with this layout by `AlignedBuf::zeroed`.
            unsafe { dealloc(ptr.as_ptr(), layout) }
        }
    }
}

thread_local! {
    static POOL: RefCell<Pool> = const { RefCell::new(Pool(Vec::new())) };
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
        let cap = len.div_ceil(ALIGN).max(1) * ALIGN;
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
    /// Reuses a buffer this thread freed when one of the size is at hand.
    pub fn for_overwrite(len: usize) -> Self {
        let cap = len.div_ceil(ALIGN).max(1) * ALIGN;
        if cap <= POOL_BYTES {
            let reused = POOL
                .try_with(|p| {
                    let mut p = p.borrow_mut();
                    let i = p.0.iter().position(|(_, l)| l.size() == cap)?;
                    Some(p.0.swap_remove(i))
                })
                .ok()
                .flatten();
            if let Some((ptr, layout)) = reused {
                return AlignedBuf { ptr, len, layout };
            }
        }
        AlignedBuf::zeroed(len)
    }

    /// The allocation rounded up to a multiple of [`ALIGN`] (all initialised).
    pub fn full_mut(&mut self) -> &mut [u8] {
        // SAFETY: the allocation is layout.size() bytes, zero-initialised.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }

    /// Length of the allocation (a multiple of [`ALIGN`]).
    pub fn capacity(&self) -> usize {
        self.layout.size()
    }
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
                    let room = p.0.len() < POOL_LEN;
                    if room {
                        p.0.push((ptr, layout));
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
