//! tenon, a lock-free multithreaded memory allocator, as Rust's global
//! allocator.
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: tenon::Tenon = tenon::Tenon;
//! ```
//!
//! [`Tenon`] calls tenon's C API (`tenon_malloc`, `tenon_calloc`,
//! `tenon_realloc`, `tenon_aligned_alloc`, `tenon_free`); the C++ core is
//! compiled from this source tree by `build.rs`. It replaces only Rust's
//! allocations: C code in the same program keeps the system `malloc`
//! (run the program under `LD_PRELOAD=libtenon.so` for that). See
//! `docs/rust.md`.
#![no_std]

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::{c_char, c_int, c_void, CStr};
use core::ptr;

/// The C API of `include/tenon/tenon.h` that this crate uses.
pub mod ffi {
    use super::*;
    extern "C" {
        pub fn tenon_malloc(size: usize) -> *mut c_void;
        pub fn tenon_calloc(count: usize, size: usize) -> *mut c_void;
        pub fn tenon_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
        pub fn tenon_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;
        pub fn tenon_free(ptr: *mut c_void);
        pub fn tenon_malloc_usable_size(ptr: *const c_void) -> usize;
        pub fn tenon_malloc_trim(pad: usize) -> c_int;
        pub fn tenon_owns(ptr: *const c_void) -> c_int;
        pub fn tenon_stats_print();
        pub fn tenon_version() -> *const c_char;
    }
}

/// The alignment every `tenon_malloc(n)` block has when `n >= 16` (and 8
/// below): see docs/api.md.
const MALLOC_ALIGN: usize = 16;

/// tenon as a [`GlobalAlloc`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Tenon;

/// Whether `tenon_malloc(size)` alone gives a block aligned for `align`:
/// it is aligned to 16 bytes when `size >= 16`, to 8 below, so `align` up to
/// 16 is met whenever `align <= size` (alignments are powers of two).
#[inline(always)]
fn malloc_is_aligned_enough(align: usize, size: usize) -> bool {
    align <= MALLOC_ALIGN && align <= size
}

unsafe impl GlobalAlloc for Tenon {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_is_aligned_enough(layout.align(), layout.size()) {
            ffi::tenon_malloc(layout.size()) as *mut u8
        } else {
            ffi::tenon_aligned_alloc(layout.align(), layout.size()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_is_aligned_enough(layout.align(), layout.size()) {
            ffi::tenon_calloc(1, layout.size()) as *mut u8
        } else {
            // No aligned calloc in the C API: zero it here.
            let p = ffi::tenon_aligned_alloc(layout.align(), layout.size()) as *mut u8;
            if !p.is_null() {
                ptr::write_bytes(p, 0, layout.size());
            }
            p
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // One free for every kind of block: tenon finds the size itself
        // (its sized frees cost the same as tenon_free).
        ffi::tenon_free(ptr as *mut c_void);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if malloc_is_aligned_enough(layout.align(), new_size) {
            return ffi::tenon_realloc(ptr as *mut c_void, new_size) as *mut u8;
        }
        // tenon_realloc keeps only malloc's alignment: a new aligned block,
        // the contents copied, the old block freed.
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let q = self.alloc(new_layout);
        if !q.is_null() {
            ptr::copy_nonoverlapping(ptr, q, core::cmp::min(layout.size(), new_size));
            self.dealloc(ptr, layout);
        }
        q
    }
}

/// Whether `ptr` lies in memory tenon manages (see `tenon_owns` in
/// docs/api.md: also true for interior and freed pointers of small and
/// large blocks).
pub fn owns<T: ?Sized>(ptr: *const T) -> bool {
    unsafe { ffi::tenon_owns(ptr as *const c_void) != 0 }
}

/// The usable size of a block tenon handed out (at least what was asked).
///
/// # Safety
/// `ptr` must be a live block from tenon (or null, which gives 0).
pub unsafe fn usable_size<T>(ptr: *const T) -> usize {
    ffi::tenon_malloc_usable_size(ptr as *const c_void)
}

/// Gives free memory back to the system now; true if any was.
pub fn trim() -> bool {
    unsafe { ffi::tenon_malloc_trim(0) != 0 }
}

/// Prints tenon's statistics to stderr.
pub fn stats_print() {
    unsafe { ffi::tenon_stats_print() }
}

/// The version of the tenon library compiled into this crate ("0.1.0").
pub fn version() -> &'static str {
    unsafe { CStr::from_ptr(ffi::tenon_version()) }.to_str().unwrap_or("?")
}
