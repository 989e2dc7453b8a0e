//! What a handle names: one of the library's structures, and the C types of the handles.

use std::collections::HashMap;
use std::sync::Mutex;

use idspace::cid::{CidAllocator, Task};
use idspace::percid::{PerCidCounter, PerCidPool};
use idspace::pid::PidAllocator;
use idspace::table::IdTable;

use crate::errno::Errno;
use crate::registry;

/// A table's value: the C caller's `uint64_t`.
pub(crate) type Value = u64;

/// An object the C caller put in a pool: a zero-sized type, so that a `Box` of it is the
/// caller's pointer itself (a `Box` of a zero-sized type allocates nothing and frees nothing;
/// any non-null pointer is a valid one).
pub(crate) struct Foreign;

/// A CID space and the tasks it forked, by task ID (C names tasks by number).
pub(crate) struct Cids {
    pub(crate) space: Box<dyn CidAllocator>,
    pub(crate) tasks: Mutex<HashMap<u64, Task>>,
}

/// A PID allocator and its worker slots (1 but for the per-CPU design).
pub(crate) struct Pids {
    pub(crate) alloc: Box<dyn PidAllocator>,
    pub(crate) slots: usize,
}

/// A counter behind a handle: counters are recycled rather than freed (see the registry's
/// "Calls without a hazard"), so a handle's counter reads from `base`, the sum the recycled
/// counter held when the handle was made.
pub(crate) struct Counter {
    pub(crate) inner: &'static PerCidCounter,
    pub(crate) base: u64,
}

/// The structure behind a handle.
pub(crate) enum Object {
    Table(Box<dyn IdTable<Value>>),
    Pids(Pids),
    Cids(Cids),
    Counter(Counter),
    Pool(PerCidPool<Foreign>),
    #[cfg(feature = "lease")]
    Lease(idspace_lease::Node),
}

macro_rules! impl_handle {
    ($name:ident, $variant:ident, $field:ty) => {
        impl $name {
            /// Runs `call`, which calls none of the caller's code, on the handle's live
            /// structure, or answers `EBADF` for a handle that is not live or names another
            /// kind of structure.
            #[inline]
            pub(crate) fn with<R>(
                self,
                call: impl FnOnce(&$field) -> Result<R, Errno>,
            ) -> Result<R, Errno> {
                registry::with(self.raw, |object| match object {
                    Object::$variant(inner) => call(inner),
                    #[allow(unreachable_patterns)]
                    _ => Err(libc::EBADF),
                })
            }

            /// [`with`](Self::with) for a call that may call back into the library.
            #[allow(dead_code)]
            #[inline]
            pub(crate) fn with_callbacks<R>(
                self,
                call: impl FnOnce(&$field) -> Result<R, Errno>,
            ) -> Result<R, Errno> {
                registry::with_callbacks(self.raw, |object| match object {
                    Object::$variant(inner) => call(inner),
                    #[allow(unreachable_patterns)]
                    _ => Err(libc::EBADF),
                })
            }

            /// Destroys the handle's structure once calls in flight on it have returned.
            pub(crate) fn destroy(self) -> Result<Box<Object>, Errno> {
                registry::destroy(self.raw, |object| matches!(object, Object::$variant(_)))
            }

            /// Registers `object` and returns its handle.
            #[allow(dead_code)]
            pub(crate) fn insert(object: $field) -> Result<$name, Errno> {
                registry::insert(Object::$variant(object)).map(|raw| $name { raw })
            }

            /// Registers `object` with stable memory for calls without a hazard (see the
            /// registry's docs) and returns its handle.
            #[allow(dead_code)]
            pub(crate) fn insert_with_stable<S>(
                object: $field,
                stable: Option<&'static S>,
            ) -> Result<$name, Errno> {
                let stable = stable.map_or(core::ptr::null_mut(), |s| {
                    core::ptr::from_ref(s).cast_mut().cast()
                });
                registry::insert_with_stable(Object::$variant(object), stable)
                    .map(|raw| $name { raw })
            }
        }
    };
}

/// A handle table (`idspace_table_new`).
///
/// Thread-safe: every call may run on any thread, concurrently with any other call on the
/// same handle (`idspace_table_destroy` waits for calls in flight).
#[cfg_attr(
    any(doc, doctest),
    doc = r#"
```
use idspace_ffi::*;

let mut table = IdspaceTable { raw: 0 };
let mut id = 0;
// SAFETY: the out-pointers point to live locals.
unsafe {
    assert_eq!(idspace_table_new(IDSPACE_TABLE_RADIX, &mut table), 0);
    assert_eq!(idspace_table_create(table, 1, 10, &mut id), 0);
}
assert_eq!(idspace_table_destroy(table), 0);
```
"#
)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdspaceTable {
    /// Opaque to C: a slot index and a generation. 0 is never a live handle, so a
    /// zero-initialized handle is refused with `-EBADF`.
    pub raw: u64,
}
impl_handle!(IdspaceTable, Table, Box<dyn IdTable<Value>>);

/// A PID allocator with its namespaces (`idspace_pids_new`).
///
/// Thread-safe: every call may run on any thread, concurrently with any other call on the
/// same handle (`idspace_pids_destroy` waits for calls in flight).
#[cfg_attr(
    any(doc, doctest),
    doc = r#"
```
use idspace_ffi::*;

let (mut pids, mut pid) = (IdspacePids { raw: 0 }, 0);
// SAFETY: the out-pointers point to live locals; no set_tid array.
unsafe {
    assert_eq!(idspace_pids_new(IDSPACE_PIDS_IDR_ONCE, &mut pids), 0);
    assert_eq!(idspace_pid_alloc(pids, IDSPACE_PID_NS_ROOT, std::ptr::null(), 0, &mut pid), 0);
}
assert_eq!(pid, 1);
assert_eq!(idspace_pids_destroy(pids), 0);
```
"#
)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdspacePids {
    /// Opaque to C: a slot index and a generation. 0 is never a live handle, so a
    /// zero-initialized handle is refused with `-EBADF`.
    pub raw: u64,
}
impl_handle!(IdspacePids, Pids, Pids);

/// A CID space for a user-space scheduler (`idspace_cids_new`).
///
/// Thread-safe: every call may run on any thread. A CPU of the space stands for one
/// scheduler's worker: switching a task onto two CPUs at once is refused with `-EBUSY`.
#[cfg_attr(
    any(doc, doctest),
    doc = r#"
```
use idspace_ffi::*;

let (mut cids, mut task, mut cid) = (IdspaceCids { raw: 0 }, 0, 0);
// SAFETY: the out-pointers point to live locals.
unsafe {
    assert_eq!(idspace_cids_new(IDSPACE_CIDS_REWORK, 2, &mut cids), 0);
    assert_eq!(idspace_cid_fork(cids, 0, &mut task), 0);
    assert_eq!(idspace_cid_switch_in(cids, 1, task, &mut cid), 0);
}
assert!(cid < 2);
assert_eq!(idspace_cids_destroy(cids), 0);
```
"#
)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdspaceCids {
    /// Opaque to C: a slot index and a generation. 0 is never a live handle, so a
    /// zero-initialized handle is refused with `-EBADF`.
    pub raw: u64,
}
impl_handle!(IdspaceCids, Cids, Cids);

/// A per-CID counter (`idspace_counter_new`).
///
/// Thread-safe: `idspace_counter_add` and `idspace_counter_sum` may run on any thread,
/// concurrently.
#[cfg_attr(
    any(doc, doctest),
    doc = r#"
```
use idspace_ffi::*;

let (mut counter, mut sum) = (IdspaceCounter { raw: 0 }, 0);
// SAFETY: the out-pointers point to live locals.
unsafe { assert_eq!(idspace_counter_new(&mut counter), 0) };
assert_eq!(idspace_counter_add(counter, 5), 0);
// SAFETY: `sum` is a live local.
unsafe { assert_eq!(idspace_counter_sum(counter, &mut sum), 0) };
assert_eq!(sum, 5);
assert_eq!(idspace_counter_destroy(counter), 0);
```
"#
)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdspaceCounter {
    /// Opaque to C: a slot index and a generation. 0 is never a live handle, so a
    /// zero-initialized handle is refused with `-EBADF`.
    pub raw: u64,
}
impl_handle!(IdspaceCounter, Counter, Counter);

/// A per-CID pool of `void *` objects (`idspace_pool_new`).
///
/// Thread-safe: `idspace_pool_give` and `idspace_pool_take` may run on any thread,
/// concurrently; each object given is taken back by exactly one caller.
#[cfg_attr(
    any(doc, doctest),
    doc = r#"
```
use idspace_ffi::*;

let mut pool = IdspacePool { raw: 0 };
let mut object = 7u8;
let mut taken = std::ptr::null_mut();
// SAFETY: the out-pointers point to live locals; `object` outlives the pool.
unsafe {
    assert_eq!(idspace_pool_new(16, &mut pool), 0);
    assert_eq!(idspace_pool_give(pool, (&mut object as *mut u8).cast()), 0);
    assert_eq!(idspace_pool_take(pool, &mut taken), 0);
    assert_eq!(idspace_pool_destroy(pool, None, std::ptr::null_mut()), 0);
}
assert_eq!(taken, (&mut object as *mut u8).cast());
```
"#
)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdspacePool {
    /// Opaque to C: a slot index and a generation. 0 is never a live handle, so a
    /// zero-initialized handle is refused with `-EBADF`.
    pub raw: u64,
}
impl_handle!(IdspacePool, Pool, PerCidPool<Foreign>);

/// A lease node handing out IDs leased from PostgreSQL (`idspace_lease_open`).
///
/// Thread-safe: `idspace_lease_next_id` may run on any thread, concurrently.
#[cfg(feature = "lease")]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdspaceLease {
    /// Opaque to C: a slot index and a generation. 0 is never a live handle.
    pub raw: u64,
}
#[cfg(feature = "lease")]
impl_handle!(IdspaceLease, Lease, idspace_lease::Node);
