//! The panic boundary every exported function goes through: no unwind crosses into C.
//!
//! A panic inside a call that changes no shared state (a lookup, a sum, creating a fresh
//! handle that nobody else can reach yet) is caught and answered with `-EIO`; the caller may
//! go on. A panic inside a call that mutates a structure others share (create, remove, alloc,
//! free, fork, exit, switch, give, take, destroy) may have left that structure half-changed
//! (an ID taken but not recorded, a CID in flight), so the process aborts after printing the
//! panic: continuing could hand the same ID out twice. The library panics only on a bug of
//! its own; invalid arguments are refused with codes before any structure is touched.

use core::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::errno::{code, Errno};

/// Runs a call that changes no shared state; a panic becomes `-EIO`.
///
/// Inlined into every exported function, as are `mutate` and the handle check: a separate
/// function per closure cost a call, six register saves and the arguments' trip through the
/// stack on every call, about a third of a counter increment's C-side overhead. `catch_unwind`
/// itself costs nothing on the path without a panic (a landing pad in the unwind tables).
#[inline(always)]
pub(crate) fn query(call: impl FnOnce() -> Result<(), Errno>) -> c_int {
    // AssertUnwindSafe: after a panic nothing the closure touched is used again, except
    // structures it only read.
    catch_unwind(AssertUnwindSafe(call)).map_or(-libc::EIO, code)
}

/// Runs a call that returns a pointer and changes no shared state; a panic gives `fallback`.
#[inline(always)]
pub(crate) fn query_ptr<T>(call: impl FnOnce() -> *const T, fallback: *const T) -> *const T {
    // AssertUnwindSafe: as in `query`.
    catch_unwind(AssertUnwindSafe(call)).unwrap_or(fallback)
}

/// Runs a call that mutates shared state; a panic aborts the process (see the module docs).
#[inline(always)]
pub(crate) fn mutate(call: impl FnOnce() -> Result<(), Errno>) -> c_int {
    // AssertUnwindSafe: a panic does not return here at all.
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(result) => code(result),
        Err(_) => abort_after_panic(),
    }
}

/// The abort of `mutate`, out of line so that the inlined boundary stays small.
#[cold]
#[inline(never)]
fn abort_after_panic() -> ! {
    // The panic hook already printed the message and location.
    eprintln!("libidspace: a panic while changing a shared structure; aborting");
    std::process::abort()
}

/// Writes `value` through an out-pointer the caller gave, refusing a null one.
#[inline]
pub(crate) fn write_out<T>(out: *mut T, value: T) -> Result<(), Errno> {
    if out.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the C caller promises a non-null out-pointer points to writable memory for a
    // `T` (the header says so for every out-parameter); null was refused above.
    unsafe { out.write(value) };
    Ok(())
}

/// Refuses a null out-pointer before any work is done, so that a call does not change state
/// and then fail to report it.
#[inline]
pub(crate) fn need<T>(out: *mut T) -> Result<(), Errno> {
    if out.is_null() {
        Err(libc::EINVAL)
    } else {
        Ok(())
    }
}
