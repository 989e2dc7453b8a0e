//! A create that finds no memory, for its entry or for a new owner's state, is refused with
//! `TableError::NoMemory`, hands its value back and changes nothing, as the kernel's timer
//! creation returns `-ENOMEM`. The allocator here fails the calling thread's allocations on
//! demand.

#![cfg(not(loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use idspace::table::{GlobalHash, IdTable, Radix, ScaledHash, TableError};

/// The system allocator, failing a thread's allocations once its countdown reaches zero.
struct Failing;

std::thread_local! {
    /// Allocations still allowed on this thread before they fail; `None`: never fail.
    static ALLOWED: Cell<Option<u32>> = const { Cell::new(None) };
}

// SAFETY: every call goes to the system allocator, or returns null (a failure the trait
// allows) without allocating.
unsafe impl GlobalAlloc for Failing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let fail = ALLOWED.with(|allowed| match allowed.get() {
            Some(0) => true,
            Some(n) => {
                allowed.set(Some(n - 1));
                false
            }
            None => false,
        });
        if fail {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Failing = Failing;

/// Runs `f` with the first `allowed` allocations of this thread succeeding and the rest failing.
fn with_allowed<R>(allowed: u32, f: impl FnOnce() -> R) -> R {
    ALLOWED.with(|cell| cell.set(Some(allowed)));
    let result = f();
    ALLOWED.with(|cell| cell.set(None));
    result
}

fn refuses_then_recovers(table: &dyn IdTable<String>, allowed: u32) {
    let value = String::from("timer");
    let rejected = with_allowed(allowed, || table.create(7, value)).unwrap_err();
    assert_eq!(rejected.error, TableError::NoMemory, "{}", table.name());
    assert_eq!(rejected.value, "timer", "the value comes back");
    assert_eq!(table.len(), 0, "{}: nothing changed", table.name());
    assert!(table.ids(7).is_empty());
    assert_eq!(
        table.create(7, rejected.value).ok(),
        Some(0),
        "{}",
        table.name()
    );
}

#[test]
fn no_memory_for_the_entry_is_refused_by_name() {
    refuses_then_recovers(&ScaledHash::new(), 0);
    refuses_then_recovers(&GlobalHash::new(), 0);
}

#[test]
fn no_memory_for_a_new_owners_state_is_refused_by_name() {
    // The entry's node is the first allocation, the owner's state the second.
    refuses_then_recovers(&ScaledHash::new(), 1);
    refuses_then_recovers(&GlobalHash::new(), 1);
    refuses_then_recovers(&Radix::new(), 0);
}
