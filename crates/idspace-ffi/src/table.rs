//! `idspace_table_*`: handle tables keyed by (owner, ID), the POSIX-timer ID designs.
//!
//! Values are the caller's `uint64_t` (often a pointer cast to an integer). A lookup either
//! copies the value out or calls a callback while the entry is held: `idspace_table_remove`
//! of that entry returns only after such callbacks have returned, which is the read side C
//! code needs before it frees what the value points to.

use core::cell::RefCell;
use core::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use idspace::table::{Entry, GlobalHash, IdTable, Radix, ScaledHash, MAX_ID};

use crate::boundary::{self, need, write_out};
use crate::errno;
use crate::object::{IdspaceTable, Value};

/// `GlobalHash`: 512 chains under one global lock (Linux before 6.15).
pub const IDSPACE_TABLE_GLOBAL: u32 = 0;
/// `ScaledHash`: a lock per bucket, `512 × CPUs` buckets, growing (Linux 6.15). The
/// recommended design.
pub const IDSPACE_TABLE_SCALED: u32 = 1;
/// `Radix`: a radix tree per owner under the owner's read-write lock.
pub const IDSPACE_TABLE_RADIX: u32 = 2;
/// The largest ID a table hands out (`INT_MAX`, as for POSIX timers).
pub const IDSPACE_TABLE_MAX_ID: u32 = 2147483647;
const _: () = assert!(IDSPACE_TABLE_MAX_ID == MAX_ID);

/// A lookup callback: called with the entry's value and the caller's `ctx`, while the entry
/// is held. It must not unwind (a C++ exception, `longjmp`) out of itself.
pub type IdspaceTableVisit = Option<unsafe extern "C" fn(value: u64, ctx: *mut c_void)>;

thread_local! {
    /// The (table, owner, ID) entries whose callbacks run on this thread: removing one of
    /// them from inside its callback would wait for itself.
    static VISITING: RefCell<Vec<(u64, u64, u32)>> = const { RefCell::new(Vec::new()) };
}

/// Creates a table of the given design (`IDSPACE_TABLE_GLOBAL`, `_SCALED` or `_RADIX`) and
/// stores its handle in `*out`.
///
/// Returns 0, `-EINVAL` for an unknown design or a null `out`, `-ENOMEM` if the handle
/// registry is full (65,536 live handles).
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_table_new(design: u32, out: *mut IdspaceTable) -> c_int {
    boundary::query(|| {
        need(out)?;
        let table: Box<dyn IdTable<Value>> = match design {
            IDSPACE_TABLE_GLOBAL => Box::new(GlobalHash::new()),
            IDSPACE_TABLE_SCALED => Box::new(ScaledHash::new()),
            IDSPACE_TABLE_RADIX => Box::new(Radix::new()),
            _ => return Err(libc::EINVAL),
        };
        write_out(out, IdspaceTable::insert(table)?)
    })
}

/// Destroys a table and its entries, after the calls in flight on it have returned. The
/// handle is dead afterwards: every call with it answers `-EBADF`.
///
/// Returns 0, `-EBADF` for a handle that is not a live table, `-EDEADLK` from inside a
/// lookup callback on this table.
#[no_mangle]
pub extern "C" fn idspace_table_destroy(table: IdspaceTable) -> c_int {
    boundary::mutate(|| table.destroy().map(drop))
}

/// Creates an entry for `owner` with the first free ID at or after the owner's cursor
/// (wrapping from `IDSPACE_TABLE_MAX_ID` to 0) and stores the ID in `*id`; the cursor moves
/// past it (`timer_create`).
///
/// Returns 0, `-EAGAIN` if the owner has no free ID, `-ENOMEM` if memory runs out, `-EINVAL`
/// for a null `id`, `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_table_create(
    table: IdspaceTable,
    owner: u64,
    value: u64,
    id: *mut u32,
) -> c_int {
    boundary::mutate(|| {
        need(id)?;
        let created = table.with(|t| t.create(owner, value).map_err(|r| errno::table(r.error)))?;
        write_out(id, created)
    })
}

/// Creates an entry with exactly `id` (checkpoint/restore); the owner's restore mode must be
/// on (`idspace_table_set_restore`). The cursor moves past `id`.
///
/// Returns 0, `-EEXIST` if the owner has `id` already, `-EINVAL` for an `id` above
/// `IDSPACE_TABLE_MAX_ID`, `-EPERM` when restore mode is off, `-ENOMEM` if memory runs out,
/// `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_table_create_at(
    table: IdspaceTable,
    owner: u64,
    id: u32,
    value: u64,
) -> c_int {
    boundary::mutate(|| {
        table.with(|t| {
            t.create_at(owner, id, value)
                .map(drop)
                .map_err(|r| errno::table(r.error))
        })
    })
}

/// Switches `owner`'s restore mode on (`on` non-zero) or off
/// (`prctl(PR_TIMER_CREATE_RESTORE_IDS)`).
///
/// Returns 0 or `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_table_set_restore(table: IdspaceTable, owner: u64, on: c_int) -> c_int {
    boundary::mutate(|| {
        table.with(|t| {
            t.set_restore(owner, on != 0);
            Ok(())
        })
    })
}

/// Copies the value of (`owner`, `id`) into `*value`.
///
/// Returns 0, `-EINVAL` if there is no such entry (as `timer_settime` on an unknown timer) or
/// `value` is null, `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_table_lookup(
    table: IdspaceTable,
    owner: u64,
    id: u32,
    value: *mut u64,
) -> c_int {
    boundary::query(|| {
        need(value)?;
        let found = table.with(|t| t.get_copied(owner, id).ok_or(libc::EINVAL))?;
        write_out(value, found)
    })
}

/// Calls `visit(value, ctx)` on the entry (`owner`, `id`) while holding it: a concurrent
/// `idspace_table_remove` of the entry returns only after `visit` has returned. `visit` may
/// call into the library (up to 4 calls deep on one thread), but must not remove this same
/// entry (`-EDEADLK`) or destroy this table (`-EDEADLK`).
///
/// Returns 0 after `visit` ran, `-EINVAL` if there is no such entry or `visit` is null,
/// `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call. A callback must be a function of its type that returns normally.
#[no_mangle]
pub unsafe extern "C" fn idspace_table_lookup_with(
    table: IdspaceTable,
    owner: u64,
    id: u32,
    visit: IdspaceTableVisit,
    ctx: *mut c_void,
) -> c_int {
    boundary::query(|| {
        let visit = visit.ok_or(libc::EINVAL)?;
        // The callback runs inside the call's section, so a destroy of the table waits for it;
        // it may call back in, so the section nests.
        table.with_callbacks(|t| {
            let entry = t.get(owner, id).ok_or(libc::EINVAL)?;
            VISITING.with(|v| v.borrow_mut().push((table.raw, owner, id)));
            // A C callback cannot unwind into Rust (an `extern "C"` fn pointer aborts
            // instead), but a Rust caller could pass one that panics: catch it so that the
            // bookkeeping below still runs.
            // SAFETY: the caller promises `visit` is a function of this signature; `ctx` is
            // passed through untouched.
            let ran = catch_unwind(AssertUnwindSafe(|| unsafe { visit(*entry, ctx) }));
            VISITING.with(|v| v.borrow_mut().pop());
            drop(entry);
            ran.map_err(|_| libc::EIO)
        })
    })
}

/// Waits until `entry` is the last reference to its node (callbacks on it have returned).
fn wait_for_visitors(mut entry: Entry<Value>) -> Value {
    loop {
        match entry.try_unwrap_copied() {
            Ok(value) => return value,
            Err(shared) => {
                entry = shared;
                std::thread::yield_now();
            }
        }
    }
}

/// Removes the entry (`owner`, `id`) (`timer_delete`), stores its value in `*value` unless
/// `value` is null, and returns after every `idspace_table_lookup_with` callback on the entry
/// has returned.
///
/// Returns 0, `-EINVAL` if there is no such entry, `-EDEADLK` from inside a callback on this
/// same entry, `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_table_remove(
    table: IdspaceTable,
    owner: u64,
    id: u32,
    value: *mut u64,
) -> c_int {
    boundary::mutate(|| {
        let key = (table.raw, owner, id);
        if VISITING.with(|v| v.borrow().contains(&key)) {
            return Err(libc::EDEADLK);
        }
        let entry = table.with(|t| t.remove(owner, id).map_err(errno::table))?;
        let removed = wait_for_visitors(entry);
        if !value.is_null() {
            write_out(value, removed)?;
        }
        Ok(())
    })
}

/// Removes every entry of `owner` and forgets its cursor and restore mode (process exit);
/// stores how many entries were removed in `*removed` unless it is null. Unlike
/// `idspace_table_remove`, it does not wait for lookup callbacks on those entries.
///
/// Returns 0 or `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_table_remove_owner(
    table: IdspaceTable,
    owner: u64,
    removed: *mut usize,
) -> c_int {
    boundary::mutate(|| {
        let count = table.with(|t| Ok(t.remove_owner(owner)))?;
        if !removed.is_null() {
            write_out(removed, count)?;
        }
        Ok(())
    })
}

/// Stores `owner`'s IDs in ascending order in `ids[0..*count]` (the `/proc/PID/timers` walk).
/// `capacity` is the room in `ids`, 1 to `IDSPACE_TABLE_MAX_ID + 1`.
///
/// Returns 0; `-ERANGE` if the owner has more than `capacity` IDs (then `*count` is the
/// number needed and `ids` holds the first `capacity`); `-EINVAL` for a null `ids` or
/// `count` or a capacity out of range (0, `SIZE_MAX`); `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_table_ids(
    table: IdspaceTable,
    owner: u64,
    ids: *mut u32,
    capacity: usize,
    count: *mut usize,
) -> c_int {
    boundary::query(|| {
        need(count)?;
        if ids.is_null() || capacity == 0 || capacity > MAX_ID as usize + 1 {
            return Err(libc::EINVAL);
        }
        let all = table.with(|t| Ok(t.ids(owner)))?;
        let copied = all.len().min(capacity);
        // SAFETY: the caller promises `ids` has room for `capacity` IDs; `copied` is at most
        // that, and `all` is our own vector, so the ranges do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(all.as_ptr(), ids, copied) };
        write_out(count, all.len())?;
        if all.len() > capacity {
            return Err(libc::ERANGE);
        }
        Ok(())
    })
}

/// Stores `owner`'s cursor (where the next `idspace_table_create` starts looking; 0 for an
/// owner the table has no state for) in `*cursor`: a checkpoint saves it.
///
/// Returns 0, `-EINVAL` for a null `cursor`, `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_table_cursor(
    table: IdspaceTable,
    owner: u64,
    cursor: *mut u32,
) -> c_int {
    boundary::query(|| {
        need(cursor)?;
        let at = table.with(|t| Ok(t.cursor(owner)))?;
        write_out(cursor, at)
    })
}

/// Sets `owner`'s cursor, as a restore does so that IDs closed before the checkpoint are not
/// handed out again at once.
///
/// Returns 0, `-EINVAL` for a cursor above `IDSPACE_TABLE_MAX_ID`, `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_table_set_cursor(table: IdspaceTable, owner: u64, cursor: u32) -> c_int {
    boundary::mutate(|| table.with(|t| t.set_cursor(owner, cursor).map_err(errno::table)))
}
