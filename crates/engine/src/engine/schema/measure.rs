//! What a compiled schema holds in memory, measured: the test binary's
//! allocator counts, per thread, the bytes allocated and not yet freed, so
//! a compile on one thread is measured alone whatever the other tests do.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static HELD: Cell<i64> = const { Cell::new(0) };
}

/// The system allocator, counting this thread's bytes held.
pub(crate) struct Counting;

// SAFETY: every call is forwarded to the system allocator unchanged; the
// count is a thread-local `Cell` that allocates nothing.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = HELD.try_with(|h| h.set(h.get() + layout.size() as i64));
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = HELD.try_with(|h| h.set(h.get() - layout.size() as i64));
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = new_size as i64 - layout.size() as i64;
        let _ = HELD.try_with(|h| h.set(h.get() + grown));
        // SAFETY: the caller's contract is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// The bytes this thread holds now.
pub(crate) fn held() -> i64 {
    HELD.with(Cell::get)
}
