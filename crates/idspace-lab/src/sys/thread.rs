//! Raw POSIX threads and CPU affinity: the kernel workloads create threads with
//! `pthread_create` directly (no std thread name, no result packet), as the C benchmarks they
//! copy do, and pin threads to CPUs.

use std::ffi::CStr;

/// A started thread that does nothing and returns at once; join it with [`EmptyThread::join`].
pub(crate) struct EmptyThread(libc::pthread_t);

extern "C" fn empty_body(_: *mut libc::c_void) -> *mut libc::c_void {
    core::ptr::null_mut()
}

impl EmptyThread {
    /// Creates a thread with default attributes running an empty function; `None` if
    /// `pthread_create` refused.
    pub(crate) fn spawn() -> Option<EmptyThread> {
        let mut handle: libc::pthread_t = 0;
        // Default attributes (null); the start routine touches no memory.
        // SAFETY: `handle` is a live out-parameter, and the other arguments are as above.
        let rc = unsafe {
            libc::pthread_create(
                &mut handle,
                core::ptr::null(),
                empty_body,
                core::ptr::null_mut(),
            )
        };
        (rc == 0).then_some(EmptyThread(handle))
    }

    /// Waits for the thread to end.
    pub(crate) fn join(self) {
        // SAFETY: the thread was created joinable by `spawn`, and `self` is consumed, so it
        // is joined once.
        unsafe { libc::pthread_join(self.0, core::ptr::null_mut()) };
    }
}

type Body = Box<dyn FnOnce() + Send>;

extern "C" fn boxed_body(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `arg` is the `Box<Body>` that `spawn_detached` leaked for this thread alone.
    let body = unsafe { Box::from_raw(arg as *mut Body) };
    body();
    core::ptr::null_mut()
}

/// Runs `body` on a new detached pthread (default attributes); false if `pthread_create`
/// refused (then `body` is dropped unrun).
pub(crate) fn spawn_detached(body: impl FnOnce() + Send + 'static) -> bool {
    let arg = Box::into_raw(Box::new(Box::new(body) as Body)) as *mut libc::c_void;
    let mut handle: libc::pthread_t = 0;
    // SAFETY: a live out-parameter, default attributes, and a start routine that takes over
    // the box `arg` points to.
    let rc = unsafe { libc::pthread_create(&mut handle, core::ptr::null(), boxed_body, arg) };
    if rc == 0 {
        // SAFETY: a thread just created and not joined or detached before.
        unsafe { libc::pthread_detach(handle) };
        true
    } else {
        // SAFETY: the thread never started, so the box is still ours, freed once here.
        drop(unsafe { Box::from_raw(arg as *mut Body) });
        false
    }
}

/// A set of CPUs, as the affinity calls take it.
#[derive(Clone, Copy)]
pub(crate) struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    fn empty() -> CpuSet {
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        CpuSet(unsafe { core::mem::zeroed() })
    }

    /// The calling thread's affinity.
    pub(crate) fn current() -> Option<CpuSet> {
        let mut set = CpuSet::empty();
        // SAFETY: a valid set of the size passed, for the calling thread.
        let got = unsafe { libc::sched_getaffinity(0, core::mem::size_of_val(&set.0), &mut set.0) };
        (got == 0).then_some(set)
    }

    /// The set of `cpu` alone (`cpu` below `CPU_SETSIZE`; larger ones are left out).
    pub(crate) fn only(cpu: usize) -> CpuSet {
        let mut set = CpuSet::empty();
        if cpu < libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is below CPU_SETSIZE.
            unsafe { libc::CPU_SET(cpu, &mut set.0) };
        }
        set
    }

    /// The CPUs in the set.
    pub(crate) fn cpus(&self) -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `cpu` is below CPU_SETSIZE.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &self.0) })
            .collect()
    }

    /// Makes this the calling thread's affinity. A refusal leaves the affinity as it was,
    /// which the callers survive (they measure CIDs, not placement).
    pub(crate) fn apply(&self) {
        self.apply_to(0);
    }

    /// Makes this the affinity of thread `tid` of this process (0: the calling thread), as
    /// [`apply`](Self::apply) does. A sleeping thread wakes up on a CPU of the set.
    pub(crate) fn apply_to(&self, tid: libc::pid_t) {
        // SAFETY: a valid set of the size passed; an unknown `tid` is refused with ESRCH.
        unsafe { libc::sched_setaffinity(tid, core::mem::size_of_val(&self.0), &self.0) };
    }
}

/// The C library's version (`gnu_get_libc_version`).
pub(crate) fn glibc_version() -> String {
    // SAFETY: returns a pointer to a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) };
    version.to_string_lossy().into_owned()
}
