//! The kernel's POSIX timers through the raw syscalls, and a runner that puts each "owner" in
//! its own forked process (the seed's Test 5: an owner is a process).
//!
//! Raw syscalls rather than glibc's wrappers: the kernel's `timer_t` is the plain integer ID,
//! which is what the tables compare against, and restore mode
//! (`prctl(PR_TIMER_CREATE_RESTORE_IDS)`) passes the wanted ID in through the same pointer.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::subjects::Subject;

/// `PR_TIMER_CREATE_RESTORE_IDS` and its arguments (include/uapi/linux/prctl.h, Linux 6.15).
const PR_TIMER_CREATE_RESTORE_IDS: libc::c_int = 77;
const PR_TIMER_CREATE_RESTORE_IDS_OFF: libc::c_ulong = 0;
const PR_TIMER_CREATE_RESTORE_IDS_ON: libc::c_ulong = 1;

/// The calling process's POSIX timers.
pub struct KernelTimers;

fn timer_create(wanted: libc::c_int) -> io::Result<libc::c_int> {
    // SAFETY: an all-zero `sigevent` is a valid value of this plain C struct.
    let mut event: libc::sigevent = unsafe { core::mem::zeroed() };
    event.sigev_notify = libc::SIGEV_NONE;
    let mut id: libc::c_int = wanted;
    // The raw syscall takes a `struct sigevent *` and a `timer_t *` (an `int *`).
    // SAFETY: both pointers point at live locals of exactly those types.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_timer_create,
            libc::CLOCK_MONOTONIC,
            &mut event as *mut libc::sigevent,
            &mut id as *mut libc::c_int,
        )
    };
    if rc == 0 {
        Ok(id)
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Subject for KernelTimers {
    #[inline]
    fn create(&self, _owner: u64) -> Option<u32> {
        timer_create(0).ok().map(|id| id as u32)
    }
    #[inline]
    fn lookup(&self, _owner: u64, id: u32) -> bool {
        // SAFETY: a plain syscall with an integer argument; no memory is passed.
        unsafe { libc::syscall(libc::SYS_timer_getoverrun, id as libc::c_long) >= 0 }
    }
    #[inline]
    fn delete(&self, _owner: u64, id: u32) -> bool {
        // SAFETY: a plain syscall with an integer argument; no memory is passed.
        unsafe { libc::syscall(libc::SYS_timer_delete, id as libc::c_long) == 0 }
    }
    fn create_exact(&self, _owner: u64, id: u32) -> bool {
        timer_create(id as libc::c_int).is_ok_and(|got| got as u32 == id)
    }
}

/// Switches the kernel's timer restore mode for this process; false if the kernel refuses
/// (older than 6.15).
pub fn set_restore_mode(on: bool) -> bool {
    let arg = if on {
        PR_TIMER_CREATE_RESTORE_IDS_ON
    } else {
        PR_TIMER_CREATE_RESTORE_IDS_OFF
    };
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(PR_TIMER_CREATE_RESTORE_IDS, arg, 0, 0, 0) == 0 }
}

/// Makes room for `wanted` pending signals (each POSIX timer is charged one against
/// RLIMIT_SIGPENDING, per user). Returns the limit now in force.
pub fn raise_sigpending(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_SIGPENDING, &mut limit) } != 0 {
        return 0;
    }
    if limit.rlim_cur >= wanted {
        return limit.rlim_cur;
    }
    let raised = libc::rlimit {
        rlim_cur: wanted,
        rlim_max: limit.rlim_max.max(wanted),
    };
    // SAFETY: `raised` is a live rlimit. Raising the hard limit needs CAP_SYS_RESOURCE.
    if unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, &raised) } == 0 {
        return wanted;
    }
    let soft_only = libc::rlimit {
        rlim_cur: limit.rlim_max.min(wanted),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: as above; raising the soft limit up to the hard limit needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, &soft_only) } == 0 {
        soft_only.rlim_cur
    } else {
        limit.rlim_cur
    }
}

/// Results slot of one child process.
#[repr(C)]
struct Slot {
    ok: AtomicU32,
    first_ns: AtomicU64,
    second_ns: AtomicU64,
}

#[repr(C)]
struct Header {
    /// Children ready to start.
    ready: AtomicU32,
    /// Set by the parent once every child is ready.
    go: AtomicU32,
    /// Children done with their timed work: they wait for all before cleaning up, so that no
    /// child's clean-up runs during another's timed work.
    done: AtomicU32,
}

/// Work a child process runs: gets a scratch buffer, returns two phase durations. Whatever
/// the work leaves behind (timers) goes with the child's exit.
pub type ChildWork<'a> = &'a (dyn Fn(&mut [u32]) -> Option<(Duration, Duration)> + Sync);

/// Runs `work` in `processes` forked children that start together (a barrier in shared
/// memory), each with its own copy of a `buffer_len` scratch buffer allocated before the fork,
/// and returns each child's two durations.
///
/// The children only make syscalls, read the clock and write preallocated memory: nothing in
/// them allocates or takes a lock that a thread of the parent might have held at the fork.
pub fn in_processes(
    processes: usize,
    buffer_len: usize,
    work: ChildWork<'_>,
) -> Result<Vec<(Duration, Duration)>, String> {
    let bytes = core::mem::size_of::<Header>() + processes * core::mem::size_of::<Slot>();
    // SAFETY: an anonymous shared mapping; no file, no existing memory is touched.
    let memory = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if memory == libc::MAP_FAILED {
        return Err(format!("mmap: {}", io::Error::last_os_error()));
    }
    // The mapping is `bytes` long (a `Header`, then `processes` slots), page-aligned and
    // zero-filled, and stays mapped until the `munmap` below, after every child has exited.
    // SAFETY: so a `Header` of zeroed (valid) atomics lives at its start for this function.
    let header = unsafe { &*(memory as *const Header) };
    // SAFETY: as above; the slots start right after the header, suitably aligned (8).
    let slots = unsafe {
        core::slice::from_raw_parts(
            (memory as *const u8).add(core::mem::size_of::<Header>()) as *const Slot,
            processes,
        )
    };
    let mut buffer = vec![0u32; buffer_len];
    let mut children = Vec::with_capacity(processes);
    let mut failure = None;
    for slot in slots {
        // Fork in a possibly multi-threaded process (see the function docs).
        // SAFETY: the child below runs only code that is safe after fork, and ends in `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            failure = Some(format!("fork: {}", io::Error::last_os_error()));
            break;
        }
        if pid == 0 {
            // Release pairs with the parent's Acquire load of `ready`.
            header.ready.fetch_add(1, Ordering::Release);
            // Acquire pairs with the parent's Release store of `go`.
            while header.go.load(Ordering::Acquire) == 0 {
                // SAFETY: a plain syscall.
                unsafe { libc::sched_yield() };
            }
            let outcome = work(&mut buffer);
            // AcqRel pairs with the other children's increments and the Acquire loads below:
            // a second barrier, so that no child's clean-up overlaps another's timed work.
            header.done.fetch_add(1, Ordering::AcqRel);
            while header.done.load(Ordering::Acquire) < processes as u32 {
                // SAFETY: a plain syscall.
                unsafe { libc::sched_yield() };
            }
            if let Some((first, second)) = outcome {
                slot.first_ns
                    .store(first.as_nanos() as u64, Ordering::Relaxed);
                slot.second_ns
                    .store(second.as_nanos() as u64, Ordering::Relaxed);
                // Release: the durations are visible to whoever sees `ok`.
                slot.ok.store(1, Ordering::Release);
            }
            // Leaves the child at once, without the parent's destructors or atexit handlers.
            // SAFETY: `_exit` is async-signal-safe and takes a plain status.
            unsafe { libc::_exit(0) };
        }
        children.push(pid);
    }
    if failure.is_some() {
        // Children already forked wait for siblings that will never come: count them in.
        // AcqRel pairs with the children's Acquire loads of `done`.
        header
            .done
            .fetch_add((processes - children.len()) as u32, Ordering::AcqRel);
    } else {
        // Acquire pairs with each child's Release increment.
        while header.ready.load(Ordering::Acquire) < children.len() as u32 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // Release pairs with the children's Acquire loads (also releases them on failure, so that
    // they exit and can be reaped).
    header.go.store(1, Ordering::Release);
    for pid in &children {
        let mut status = 0;
        // SAFETY: `status` is a live int; `pid` is our child.
        unsafe { libc::waitpid(*pid, &mut status, 0) };
    }
    let results: Option<Vec<(Duration, Duration)>> = slots[..children.len()]
        .iter()
        .map(|slot| {
            // Acquire pairs with the child's Release store of `ok`.
            (slot.ok.load(Ordering::Acquire) == 1).then(|| {
                (
                    Duration::from_nanos(slot.first_ns.load(Ordering::Relaxed)),
                    Duration::from_nanos(slot.second_ns.load(Ordering::Relaxed)),
                )
            })
        })
        .collect();
    // SAFETY: unmaps exactly the mapping made above; no reference into it outlives this call.
    unsafe { libc::munmap(memory, bytes) };
    if let Some(failure) = failure {
        return Err(failure);
    }
    results.ok_or_else(|| "a child process failed its work (timer limit reached?)".into())
}
