//! Error codes: negative errno values, each the one the kernel answers for the same case.

use core::ffi::{c_char, c_int, CStr};

use idspace::cid::CidError;
use idspace::percid::PerCidError;
use idspace::pid::PidError;
use idspace::table::TableError;

use crate::boundary;

/// A failed call's code: a positive errno value, returned negated.
pub(crate) type Errno = c_int;

/// What an exported function returns: 0 or a count on success, a negative errno on failure.
#[inline]
pub(crate) fn code(result: Result<(), Errno>) -> c_int {
    match result {
        Ok(()) => 0,
        Err(errno) => -errno,
    }
}

/// The errno of a table's refusal. The kernel answers `timer_settime`/`timer_delete` on an
/// unknown timer ID with `EINVAL`, `timer_create` without a free ID with `EAGAIN`, without
/// memory with `ENOMEM`, and `timer_create` in restore mode on a taken ID with `EEXIST`.
pub(crate) fn table(error: TableError) -> Errno {
    match error {
        TableError::Full => libc::EAGAIN,
        TableError::Busy => libc::EEXIST,
        TableError::NotRestoring => libc::EPERM,
        // kmem_cache_zalloc failing in timer_create: -ENOMEM.
        TableError::NoMemory => libc::ENOMEM,
        _ => libc::EINVAL,
    }
}

/// The errno of a PID allocator's refusal, as `alloc_pid`, `kill` and
/// `create_pid_namespace` answer.
pub(crate) fn pid(error: PidError) -> Errno {
    match error {
        // alloc_pid maps idr's -ENOSPC to -EAGAIN.
        PidError::Full => libc::EAGAIN,
        PidError::Exists => libc::EEXIST,
        // PIDNS_ADDING clear: alloc_pid answers -ENOMEM.
        PidError::NamespaceDead => libc::ENOMEM,
        PidError::NotFound => libc::ESRCH,
        // create_pid_namespace past MAX_PID_NS_LEVEL, or past the namespace count limit.
        PidError::TooDeep | PidError::TooManyNamespaces => libc::ENOSPC,
        PidError::NamespaceBusy => libc::EBUSY,
        _ => libc::EINVAL,
    }
}

/// The errno of a CID space's refusal.
pub(crate) fn cid(error: CidError) -> Errno {
    match error {
        CidError::UnknownTask | CidError::ForeignTask => libc::ESRCH,
        CidError::RunningElsewhere => libc::EBUSY,
        _ => libc::EINVAL,
    }
}

/// The errno of a per-CID structure's refusal.
pub(crate) fn percid(error: PerCidError) -> Errno {
    match error {
        PerCidError::Unavailable(_) => libc::EOPNOTSUPP,
        _ => libc::EINVAL,
    }
}

/// The text for a code (negative or positive; 0 is success).
fn describe(code: c_int) -> &'static CStr {
    match code.unsigned_abs() as c_int {
        0 => c"success",
        libc::EINVAL => c"invalid argument: a null pointer, a size out of range, an unknown ID or namespace",
        libc::EAGAIN => c"no free ID (or, for a pool, no object at hand)",
        libc::EEXIST => c"the requested ID is taken",
        libc::ENOMEM => c"out of memory, the handle registry is full, or the PID namespace is dead (its init exited)",
        libc::ESRCH => c"no such PID or task",
        libc::EBADF => c"not a live handle: never created, already destroyed, or of another kind",
        libc::EPERM => c"an exact ID needs the owner's restore mode on",
        libc::ENOSPC => c"PID namespaces nest at most 32 levels, or the allocator holds no more namespaces",
        libc::EBUSY => c"busy: the namespace still holds IDs or children, or the task runs on another CPU",
        libc::ERANGE => c"the buffer is too small for the answer",
        libc::EDEADLK => c"the call would wait for itself (from inside a callback on the same handle or entry)",
        libc::EOPNOTSUPP => c"unavailable: the kernel, the C library or this thread does not provide it",
        libc::EIO => c"internal error: the library panicked and the call was refused",
        libc::ECONNREFUSED => c"the lease store could not be reached or refused the request",
        _ => c"unknown error code",
    }
}

/// A static, NUL-terminated English description of an error code returned by this library
/// (negative, as returned, or positive). Unknown codes give "unknown error code". The string
/// must not be freed or modified; it stays valid for the life of the process.
///
/// Thread-safe; never fails.
#[no_mangle]
pub extern "C" fn idspace_strerror(err: c_int) -> *const c_char {
    boundary::query_ptr(|| describe(err).as_ptr(), c"internal error".as_ptr())
}
