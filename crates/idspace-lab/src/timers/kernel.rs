//! The kernel's POSIX timers as a subject of the timers experiment (the syscalls are in
//! [`crate::sys::timer`]; an owner of kernel timers is a process: the tests with an owner per
//! worker fork, with [`crate::sys::forked`]).

use super::subjects::Subject;
use crate::sys::timer;

pub(crate) use crate::sys::timer::{raise_sigpending, set_restore_mode};

/// The calling process's POSIX timers.
pub struct KernelTimers;

impl Subject for KernelTimers {
    #[inline]
    fn create(&self, _owner: u64) -> Option<u32> {
        timer::create(0).ok().map(|id| id as u32)
    }
    #[inline]
    fn lookup(&self, _owner: u64, id: u32) -> bool {
        timer::exists(id as libc::c_int)
    }
    #[inline]
    fn delete(&self, _owner: u64, id: u32) -> bool {
        timer::delete(id as libc::c_int).is_ok()
    }
    fn create_exact(&self, _owner: u64, id: u32) -> bool {
        timer::create(id as libc::c_int).is_ok_and(|got| got as u32 == id)
    }
}
