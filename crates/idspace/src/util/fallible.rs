//! Allocation that reports failure instead of aborting, where the kernel's equivalent returns
//! `-ENOMEM`.
//!
//! Stable Rust has no `Box::try_new` or `Arc::try_new`, so a box is made here from the global
//! allocator's own call, which returns null on failure, and the value is moved in only once
//! the memory is there. Maps and vectors report through their `try_reserve`. An `Arc` has no
//! such path on stable: the structures that hand out `Arc`s (a PID object) allocate them
//! infallibly, and say so.

use alloc::alloc::{alloc, Layout};

use crate::prelude::*;

/// `value` in a new box, or `value` back if the allocator has no memory for it.
pub(crate) fn try_box<T>(value: T) -> Result<Box<T>, T> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        // Nothing to allocate: `Box::new` of a zero-sized value cannot fail.
        return Ok(Box::new(value));
    }
    // SAFETY: the layout is that of `T`, and not zero-sized (checked above).
    let memory = unsafe { alloc(layout) }.cast::<T>();
    if memory.is_null() {
        return Err(value);
    }
    // SAFETY: `memory` is fresh, non-null and laid out for a `T`; the write moves `value` in
    // without reading the uninitialised memory, and the box then owns the allocation, which
    // the global allocator made with `T`'s layout as `Box` expects.
    unsafe {
        memory.write(value);
        Ok(Box::from_raw(memory))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_box_holds_the_value_and_zero_sized_values_need_no_memory() {
        assert_eq!(try_box([7u64; 4]).map(|b| *b).ok(), Some([7; 4]));
        assert!(try_box(()).is_ok());
    }
}
