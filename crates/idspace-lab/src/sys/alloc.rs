//! The counting allocator's implementation; the public face, with how it is meant to be
//! installed, is [`crate::alloc`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, with optional counting of live bytes (see [`crate::alloc`]).
pub struct CountingAlloc;

/// Measurements running: counting is on while it is not zero. Relaxed everywhere: each thread
/// reads only its own counter, and a measurement switches counting on, allocates and reads on
/// one thread, so program order is all it relies on.
static MEASURING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Bytes this thread allocated minus bytes it freed while counting was on. A `const`
    /// initialiser and no destructor: using it allocates nothing, as an allocator must not.
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

/// Adds `bytes` to this thread's counter if counting is on.
#[inline]
fn count(bytes: isize) {
    if MEASURING.load(Ordering::Relaxed) != 0 {
        // `try_with`: a thread being torn down may still free memory; that goes uncounted.
        let _ = LIVE.try_with(|live| live.set(live.get() + bytes));
    }
}

/// This thread's counter.
fn live() -> isize {
    LIVE.try_with(Cell::get).unwrap_or(0)
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract is `System`'s; the counters are side bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: forwarded unchanged; `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes of the probe allocation [`measure`] makes to check that counting works.
const PROBE_BYTES: usize = 64;

/// Runs `build` with counting on and returns its result and the heap bytes it left allocated
/// on this thread; an error if [`CountingAlloc`] is not the global allocator (nothing would be
/// counted).
///
/// `build` must allocate on the calling thread (memory that other threads allocate is theirs).
/// Bytes freed during `build` that were allocated before it count negative, so build the
/// structure from scratch inside `build`. Measurements may run on several threads at once
/// (counting stays on until the last ends).
pub fn measure<R>(build: impl FnOnce() -> R) -> Result<(R, isize), String> {
    MEASURING.fetch_add(1, Ordering::Relaxed);
    let before = live();
    let probe = std::hint::black_box(vec![0u8; PROBE_BYTES]);
    let counted = live() - before >= PROBE_BYTES as isize;
    drop(probe);
    let start = live();
    let result = build();
    let bytes = live() - start;
    MEASURING.fetch_sub(1, Ordering::Relaxed);
    if !counted {
        return Err(
            "the lab's counting allocator is not this program's global allocator: \
                    install idspace_lab::alloc::CountingAlloc with #[global_allocator]"
                .into(),
        );
    }
    Ok((result, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_the_build_leaves_allocated() {
        // The lab's test binary installs the counting allocator (lib.rs).
        let (kept, bytes) = measure(|| vec![0u64; 1000]).unwrap();
        assert_eq!(kept.len(), 1000);
        assert!(bytes >= 8000, "{bytes}");
        let ((), bytes) = measure(|| drop(vec![0u8; 4096])).unwrap();
        assert!(bytes < 4096, "freed bytes are not live: {bytes}");
    }
}
