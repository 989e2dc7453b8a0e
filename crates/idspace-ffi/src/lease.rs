//! `idspace_lease_*` (the `lease` feature): IDs leased from PostgreSQL, handed out per CPU.

use core::ffi::{c_char, c_int, CStr};

use idspace_lease::{LeaseError, Node};

use crate::boundary::{self, need, write_out};
use crate::errno::Errno;
use crate::object::IdspaceLease;

fn lease_errno(error: &LeaseError) -> Errno {
    match error {
        LeaseError::BadUrl(_) | LeaseError::InvalidSpace(_) | LeaseError::UnknownSpace(_) => {
            libc::EINVAL
        }
        LeaseError::Exhausted(_) => libc::EAGAIN,
        LeaseError::Authentication(_) | LeaseError::PermissionDenied(_) => libc::EPERM,
        _ => libc::ECONNREFUSED,
    }
}

fn text<'a>(pointer: *const c_char) -> Result<&'a str, Errno> {
    if pointer.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string that outlives the call.
    unsafe { CStr::from_ptr(pointer) }
        .to_str()
        .map_err(|_| libc::EINVAL)
}

/// Opens a lease node on the PostgreSQL server at `url` (a `postgresql://` URL) for the ID
/// space named `space` (created by `idspace lease` tooling beforehand), and stores its handle
/// in `*out`. Blocks while it connects and takes its first lease.
///
/// Returns 0; `-EINVAL` for a null or non-UTF-8 argument, a bad URL or an unknown space;
/// `-EPERM` if the server refuses the credentials; `-ECONNREFUSED` if it cannot be reached;
/// `-ENOMEM` if the handle registry is full.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_lease_open(
    url: *const c_char,
    space: *const c_char,
    out: *mut IdspaceLease,
) -> c_int {
    boundary::query(|| {
        need(out)?;
        let node = Node::builder(text(url)?, text(space)?)
            .start()
            .map_err(|e| lease_errno(&e))?;
        write_out(out, IdspaceLease::insert(node)?)
    })
}

/// Stores the next ID of the calling thread's CPU's leased range in `*id`; blocks only when
/// the node must lease a new range and none is ready.
///
/// Returns 0, `-EAGAIN` if the space is exhausted, `-ECONNREFUSED` if the store cannot be
/// reached, `-EINVAL` for a null `id`, `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_lease_next_id(lease: IdspaceLease, id: *mut u64) -> c_int {
    boundary::mutate(|| {
        need(id)?;
        let next = lease.with(|node| node.next_id().map_err(|e| lease_errno(&e)))?;
        write_out(id, next)
    })
}

/// Closes a lease node after the calls in flight on it have returned.
///
/// Returns 0 or `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_lease_close(lease: IdspaceLease) -> c_int {
    boundary::mutate(|| lease.destroy().map(drop))
}
