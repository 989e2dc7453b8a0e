//! `idspace_mm_cid` and `idspace_cid*`: the kernel's concurrency ID for the calling thread, and
//! CID spaces for user-space schedulers.
//!
//! A CID space names its tasks by number in C: the space keeps the tasks it forked in a map
//! from number to task, taken briefly by fork, exit and switch-in.

use core::ffi::c_int;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use idspace::cid::{rseq, BitmapCids, CidAllocator, LazyCids, Rework, Task, MAX_CPUS};

use crate::boundary::{self, need, write_out};
use crate::errno::{self, Errno};
use crate::object::{Cids, IdspaceCids};

/// `Rework`: the MM CID rewrite (Linux 6.19): tasks own CIDs while few, CPUs when tasks
/// outnumber the budget. The recommended design.
pub const IDSPACE_CIDS_REWORK: u32 = 0;
/// `BitmapCids`: a lock and a bitmap at every switch (Linux 6.3).
pub const IDSPACE_CIDS_BITMAP: u32 = 1;
/// `LazyCids`: per-CPU cached CIDs with lazy release and compaction (before the rewrite).
pub const IDSPACE_CIDS_LAZY: u32 = 2;
/// The most CPUs a CID space has (affinities are 64-bit masks).
pub const IDSPACE_CIDS_MAX_CPUS: usize = 64;
const _: () = assert!(IDSPACE_CIDS_MAX_CPUS == MAX_CPUS);

/// The calling thread's concurrency ID as the kernel maintains it (`mm_cid` in the rseq
/// area glibc registers): a compact index below the number of possible CPUs, shared by the
/// process's threads that run at the same time. It can change at any preemption; use it as a
/// hint or inside an rseq critical section.
///
/// Returns the CID (0 or more), or `-EOPNOTSUPP` where the kernel (before Linux 6.3), the C
/// library (without rseq registration) or the environment (valgrind, which does not support
/// rseq) does not provide one. Thread-safe; never blocks.
#[no_mangle]
pub extern "C" fn idspace_mm_cid() -> c_int {
    let mut cid = -libc::EOPNOTSUPP;
    let result = boundary::query(|| {
        let found = rseq::current_mm_cid().ok_or(libc::EOPNOTSUPP)?;
        cid = c_int::try_from(found).map_err(|_| libc::EOPNOTSUPP)?;
        Ok(())
    });
    if result < 0 {
        result
    } else {
        cid
    }
}

/// Creates a CID space of the given design (`IDSPACE_CIDS_*`) with `cpus` CPUs (1 to
/// `IDSPACE_CIDS_MAX_CPUS`) and stores its handle in `*out`.
///
/// Returns 0, `-EINVAL` for an unknown design, a CPU count out of range (0, `SIZE_MAX`) or a
/// null `out`, `-ENOMEM` if the handle registry is full.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_cids_new(
    design: u32,
    cpus: usize,
    out: *mut IdspaceCids,
) -> c_int {
    boundary::query(|| {
        need(out)?;
        let space: Box<dyn CidAllocator> = match design {
            IDSPACE_CIDS_REWORK => Box::new(Rework::new(cpus).map_err(errno::cid)?),
            IDSPACE_CIDS_BITMAP => Box::new(BitmapCids::new(cpus).map_err(errno::cid)?),
            IDSPACE_CIDS_LAZY => Box::new(LazyCids::new(cpus).map_err(errno::cid)?),
            _ => return Err(libc::EINVAL),
        };
        let tasks = Mutex::new(HashMap::new());
        write_out(out, IdspaceCids::insert(Cids { space, tasks })?)
    })
}

/// Destroys a CID space and its tasks, after the calls in flight on it have returned.
///
/// Returns 0 or `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_cids_destroy(cids: IdspaceCids) -> c_int {
    boundary::mutate(|| cids.destroy().map(drop))
}

fn task(cids: &Cids, number: u64) -> Result<Task, Errno> {
    let tasks = cids.tasks.lock().unwrap_or_else(PoisonError::into_inner);
    tasks.get(&number).cloned().ok_or(libc::ESRCH)
}

/// Forks a task into the space, allowed on the CPUs of `affinity` (bit `n` for CPU `n`; 0 for
/// every CPU of the space), not running, and stores its number in `*task`.
///
/// Returns 0, `-EINVAL` for an affinity naming a CPU the space lacks or a null `task`,
/// `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_cid_fork(
    cids: IdspaceCids,
    affinity: u64,
    task: *mut u64,
) -> c_int {
    boundary::mutate(|| {
        need(task)?;
        let number = cids.with(|c| {
            let all = u64::MAX >> (64 - c.space.cpus());
            let forked = c
                .space
                .fork(if affinity == 0 { all } else { affinity })
                .map_err(errno::cid)?;
            let number = forked.id();
            c.tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(number, forked);
            Ok(number)
        })?;
        write_out(task, number)
    })
}

/// The task leaves the space (exit); if it runs, its CPU becomes idle. Its number is dead
/// afterwards.
///
/// Returns 0, `-ESRCH` for a task the space does not have, `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_cid_exit(cids: IdspaceCids, task: u64) -> c_int {
    boundary::mutate(|| {
        cids.with(|c| {
            let mut tasks = c.tasks.lock().unwrap_or_else(PoisonError::into_inner);
            let leaving = tasks.remove(&task).ok_or(libc::ESRCH)?;
            drop(tasks);
            c.space.exit(&leaving).map_err(errno::cid)
        })
    })
}

/// Context switch on `cpu`: the task running there (if any) is switched out and `task`
/// switched in; stores the CID `task` now has in `*cid` (below the space's CPU count).
///
/// Returns 0; `-ESRCH` for an unknown task; `-EBUSY` if it runs on another CPU; `-EINVAL` for
/// a CPU the space lacks or outside the task's affinity, or a null `cid`; `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_cid_switch_in(
    cids: IdspaceCids,
    cpu: usize,
    task: u64,
    cid: *mut u32,
) -> c_int {
    boundary::mutate(|| {
        need(cid)?;
        let got = cids.with(|c| {
            let next = self::task(c, task)?;
            c.space
                .switch(cpu, Some(&next))
                .map_err(errno::cid)?
                .ok_or(libc::EINVAL)
        })?;
        write_out(cid, got)
    })
}

/// Context switch on `cpu` to idle: the task running there (if any) is switched out.
///
/// Returns 0, `-EINVAL` for a CPU the space lacks, `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_cid_switch_out(cids: IdspaceCids, cpu: usize) -> c_int {
    boundary::mutate(|| cids.with(|c| c.space.switch(cpu, None).map(drop).map_err(errno::cid)))
}
