//! Running work in forked child processes that start together: the kernel's per-process
//! structures (a process's POSIX timers) can only be measured with one process per owner.
//!
//! The children meet at two barriers in shared memory: one before the work, so that all start
//! together, and one after it, so that no child's clean-up (its exit, which tears its timers
//! down) runs during another's timed work. A child that dies (a panic, a signal, a non-zero
//! exit) would leave its siblings waiting at a barrier forever; so the parent watches every
//! child, and the first failure ends the siblings (SIGKILL) and is reported, naming the child
//! and how it ended.

use std::cell::UnsafeCell;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The exit status of a child whose work panicked (the status Rust gives a panicking program).
const PANICKED: i32 = 101;

/// How often the parent looks at the children when it cannot sleep until one exits: before the
/// start (it also waits for all to be ready), or without pidfds (kernels before 5.3).
const TICK: Duration = Duration::from_millis(1);

/// The barriers, at the start of the shared mapping.
#[repr(C)]
struct Header {
    /// Children ready to start.
    ready: AtomicU32,
    /// Set by the parent once every child is ready.
    go: AtomicU32,
    /// Children done with their work.
    done: AtomicU32,
}

/// One child's result, after the header.
#[repr(C)]
struct Slot<T> {
    /// 1 once `value` holds the child's result.
    ok: AtomicU32,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// An anonymous shared mapping holding the header and `workers` slots; unmapped on drop.
struct ResultMapping<T> {
    memory: *mut libc::c_void,
    bytes: usize,
    slots_offset: usize,
    workers: usize,
    _slots: std::marker::PhantomData<T>,
}

impl<T> ResultMapping<T> {
    fn new(workers: usize) -> Result<ResultMapping<T>, String> {
        let (layout, slots_offset) = std::alloc::Layout::new::<Header>()
            .extend(
                std::alloc::Layout::array::<Slot<T>>(workers)
                    .map_err(|_| format!("{workers} result slots do not fit in memory"))?,
            )
            .map_err(|_| format!("{workers} result slots do not fit in memory"))?;
        // SAFETY: `sysconf` with a valid name only reads system configuration.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if layout.align() > usize::try_from(page).unwrap_or(4096) {
            return Err("the result type needs more than page alignment".into());
        }
        let bytes = layout.size().max(1);
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
        Ok(ResultMapping {
            memory,
            bytes,
            slots_offset,
            workers,
            _slots: std::marker::PhantomData,
        })
    }

    fn header(&self) -> &Header {
        // The mapping is page-aligned, zero-filled and `bytes` long, and starts with a header;
        // it stays mapped while `self` lives.
        // SAFETY: so a `Header` of zeroed (valid) atomics lives at its start for `&self`.
        unsafe { &*(self.memory as *const Header) }
    }

    /// Slot `index`, if there is one. (No panic here: a child must not unwind.)
    fn slot(&self, index: usize) -> Option<&Slot<T>> {
        if index >= self.workers {
            return None;
        }
        // The slots follow the header at the offset `Layout::extend` computed, each suitably
        // aligned; zero bytes are a valid `AtomicU32` and a valid `MaybeUninit<T>`.
        // SAFETY: so slot `index` (< workers, checked) lives there while `self` lives.
        Some(unsafe {
            &*((self.memory as *const u8)
                .add(self.slots_offset + index * core::mem::size_of::<Slot<T>>())
                as *const Slot<T>)
        })
    }
}

impl<T> Drop for ResultMapping<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no reference into it outlives
        // `self` (they all borrow it).
        unsafe { libc::munmap(self.memory, self.bytes) };
    }
}

/// A forked child the parent has not reaped yet.
struct Child {
    index: usize,
    pid: libc::pid_t,
    /// A file descriptor that becomes readable when the child exits (`None` without pidfds).
    pidfd: Option<OwnedFd>,
}

/// Runs `work(index, scratch)` in `workers` forked children (index `0..workers`) that start
/// together, and returns what each child's work returned (`None` where the work itself said it
/// failed).
///
/// Each child works on its own copy of `scratch`: prepare buffers there, before the fork, so
/// that the work need not allocate. `T` travels back through shared memory, bit for bit: it
/// must be plain data (no pointers, which would point into the child's memory).
///
/// If a child dies instead of finishing (its work panics, a signal kills it, it exits with a
/// non-zero status), its siblings are killed at once and the error names the child and how it
/// ended.
///
/// The children run code that is safe after a fork in a multi-threaded process as long as the
/// work is: syscalls, the clock, memory prepared before the fork. (Memory allocation is safe
/// after fork with glibc; the lab's work does not allocate anyway.) Work that starts threads
/// in a child is not quite: a lock that another thread of the parent held at the fork (one of
/// the standard library's, taken while a thread starts or exits) is held for good in the
/// child, and the child's thread waits on it forever. So a run whose children have not all
/// finished within [`CHILD_DEADLINE`] is killed and made once more, and if that one hangs too
/// the error says so: a hang never stops the lab.
pub fn run_forked<S, T: Copy>(
    workers: usize,
    scratch: &mut S,
    work: &dyn Fn(usize, &mut S) -> Option<T>,
) -> Result<Vec<Option<T>>, String> {
    run_forked_within(workers, scratch, work, CHILD_DEADLINE)
}

/// [`run_forked`] with `limit` for the children of each run.
fn run_forked_within<S, T: Copy>(
    workers: usize,
    scratch: &mut S,
    work: &dyn Fn(usize, &mut S) -> Option<T>,
    limit: Duration,
) -> Result<Vec<Option<T>>, String> {
    match run_forked_once(workers, scratch, work, limit) {
        Err(Overdue(_)) => run_forked_once(workers, scratch, work, limit).map_err(|e| match e {
            Overdue(error) => format!("{error} (twice)"),
            Failed(error) => error,
        }),
        result => result.map_err(|e| match e {
            Overdue(error) | Failed(error) => error,
        }),
    }
}

/// How long the children of one run may take, from the fork of the first to the exit of the
/// last, before they are taken to hang. The lab's forked work takes at most a few seconds.
pub const CHILD_DEADLINE: Duration = Duration::from_secs(60);

/// Why a run of forked children failed.
enum RunError {
    /// A child was still running at the deadline.
    Overdue(String),
    /// Anything else (a fork refused, a child that died).
    Failed(String),
}
use RunError::{Failed, Overdue};

fn run_forked_once<S, T: Copy>(
    workers: usize,
    scratch: &mut S,
    work: &dyn Fn(usize, &mut S) -> Option<T>,
    limit: Duration,
) -> Result<Vec<Option<T>>, RunError> {
    let deadline = Instant::now() + limit;
    let shared = ResultMapping::<T>::new(workers).map_err(Failed)?;
    let header = shared.header();
    let parent = std::process::id();
    let mut children: Vec<Child> = Vec::with_capacity(workers);
    for index in 0..workers {
        // Fork in a possibly multi-threaded process (see the function docs).
        // SAFETY: the child runs `child_main`, which ends in `_exit` and never returns here.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let error = io::Error::last_os_error();
            stop(&mut children);
            return Err(Failed(format!(
                "fork of child process {index} of {workers}: {error}"
            )));
        }
        if pid == 0 {
            child_main(&shared, index, parent, scratch, work);
        }
        children.push(Child {
            index,
            pid,
            pidfd: pidfd_open(pid),
        });
    }

    let mut started = false;
    while !children.is_empty() {
        reap_exited(&mut children, workers).map_err(Failed)?;
        if Instant::now() >= deadline {
            let late: Vec<String> = children.iter().map(|c| c.index.to_string()).collect();
            stop(&mut children);
            return Err(Overdue(format!(
                "child process(es) {} of {workers} still ran after {limit:?} and were killed: \
                 a hang after the fork",
                late.join(", ")
            )));
        }
        // Acquire pairs with each child's Release increment of `ready`.
        if !started && header.ready.load(Ordering::Acquire) == workers as u32 {
            // Release pairs with the children's Acquire loads of `go`.
            header.go.store(1, Ordering::Release);
            started = true;
        }
        if !children.is_empty() {
            wait_for_an_exit(&children, started, deadline);
        }
    }
    Ok(results(&shared, workers))
}

/// Reaps every child that has exited; the first that failed ends the others and is the error.
fn reap_exited(children: &mut Vec<Child>, workers: usize) -> Result<(), String> {
    let mut position = 0;
    while position < children.len() {
        let child = &children[position];
        let mut status = 0;
        // SAFETY: `status` is a live int; `child.pid` is our unreaped child.
        let reaped = unsafe { libc::waitpid(child.pid, &mut status, libc::WNOHANG) };
        if reaped == 0 {
            position += 1;
            continue;
        }
        let child = children.swap_remove(position);
        if reaped < 0 {
            let error = io::Error::last_os_error();
            stop(children);
            return Err(format!(
                "waiting for child process {} (pid {}): {error}",
                child.index, child.pid
            ));
        }
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            let siblings = children.len();
            stop(children);
            return Err(format!(
                "child process {} of {workers} (pid {}) {}; its {siblings} unfinished \
                 sibling{} were killed",
                child.index,
                child.pid,
                describe(status),
                if siblings == 1 { "" } else { "s" }
            ));
        }
    }
    Ok(())
}

/// What each child left in its slot, once all have exited.
fn results<T: Copy>(shared: &ResultMapping<T>, workers: usize) -> Vec<Option<T>> {
    (0..workers)
        .map(|index| {
            let slot = shared.slot(index)?;
            // Acquire pairs with the child's Release store of `ok`.
            (slot.ok.load(Ordering::Acquire) == 1).then(|| {
                // SAFETY: `ok` is 1 only after the child wrote a `T` into `value` (and the
                // child has exited: nothing writes it any more).
                unsafe { (*slot.value.get()).assume_init() }
            })
        })
        .collect()
}

/// A child's life: wait for the start, work, wait for the siblings, leave the result, exit.
/// Never returns.
fn child_main<S, T: Copy>(
    shared: &ResultMapping<T>,
    index: usize,
    parent: u32,
    scratch: &mut S,
    work: &dyn Fn(usize, &mut S) -> Option<T>,
) -> ! {
    // Die with the parent (thread), so that an interrupted lab leaves no child spinning; and if
    // the parent is already gone, leave now.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    // SAFETY: a plain syscall.
    if unsafe { libc::getppid() } as u32 != parent {
        // SAFETY: `_exit` is async-signal-safe and takes a plain status.
        unsafe { libc::_exit(1) };
    }
    let header = shared.header();
    // Release pairs with the parent's Acquire load of `ready`.
    header.ready.fetch_add(1, Ordering::Release);
    // Acquire pairs with the parent's Release store of `go`.
    while header.go.load(Ordering::Acquire) == 0 {
        // SAFETY: a plain syscall.
        unsafe { libc::sched_yield() };
    }
    // A panic must not unwind out of this function: the child would go on running the parent's
    // code. It ends the child with the status a panicking program has.
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| work(index, scratch)))
        // SAFETY: `_exit` is async-signal-safe and takes a plain status.
        .unwrap_or_else(|_| unsafe { libc::_exit(PANICKED) });
    // AcqRel pairs with the other children's increments and the Acquire loads below: the
    // second barrier.
    header.done.fetch_add(1, Ordering::AcqRel);
    while header.done.load(Ordering::Acquire) < shared.workers as u32 {
        // SAFETY: a plain syscall.
        unsafe { libc::sched_yield() };
    }
    if let (Some(value), Some(slot)) = (outcome, shared.slot(index)) {
        // SAFETY: only this child writes slot `index`, and the parent reads it only after
        // seeing `ok`, stored below.
        unsafe { (*slot.value.get()).write(value) };
        // Release: the value is visible to whoever sees `ok`.
        slot.ok.store(1, Ordering::Release);
    }
    // Leaves at once, without the parent's destructors or atexit handlers.
    // SAFETY: `_exit` is async-signal-safe and takes a plain status.
    unsafe { libc::_exit(0) }
}

/// A pidfd for `pid` (readable once it exits), or `None` where the kernel has none.
fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = libc::c_int::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: `fd` was just returned by pidfd_open and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sleeps until a child may have exited: until a pidfd is readable once the children have
/// started (the parent then costs nothing while they work) or `deadline`, a tick otherwise.
fn wait_for_an_exit(children: &[Child], started: bool, deadline: Instant) {
    let mut fds: Vec<libc::pollfd> = children
        .iter()
        .filter_map(|c| c.pidfd.as_ref())
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let every_child_has_a_pidfd = fds.len() == children.len();
    let timeout = if started && every_child_has_a_pidfd {
        // Until the deadline (rounded up, so that the wait does not end just before it).
        let left = deadline.saturating_duration_since(Instant::now());
        left.as_millis()
            .saturating_add(1)
            .min(libc::c_int::MAX as u128) as libc::c_int
    } else {
        TICK.as_millis() as libc::c_int
    };
    // An interrupted or failed poll only means looking at the children sooner.
    // SAFETY: `fds` is a live array of `fds.len()` pollfds.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
}

/// Kills and reaps every child in `children`.
fn stop(children: &mut Vec<Child>) {
    for child in children.iter() {
        // SAFETY: a plain syscall; `child.pid` is our unreaped child, so the pid is not reused.
        unsafe { libc::kill(child.pid, libc::SIGKILL) };
    }
    for child in children.drain(..) {
        let mut status = 0;
        // SAFETY: `status` is a live int; `child.pid` is our child.
        unsafe { libc::waitpid(child.pid, &mut status, 0) };
    }
}

/// How a child ended, from its wait status.
fn describe(status: libc::c_int) -> String {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        format!("was killed by signal {signal}{}", signal_name(signal))
    } else if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            PANICKED => format!("panicked (exit status {PANICKED})"),
            code => format!("exited with status {code}"),
        }
    } else {
        format!("ended with wait status {status:#x}")
    }
}

/// ` (SIGNAME)` for the signals a failing child usually dies of.
fn signal_name(signal: libc::c_int) -> &'static str {
    match signal {
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGFPE => " (SIGFPE)",
        libc::SIGILL => " (SIGILL)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGTERM => " (SIGTERM)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::thread;

    use super::*;

    /// Runs `run_forked` on a thread and gives it `limit` to answer: a hang fails the test
    /// instead of hanging it.
    fn within<T: Copy + Send + 'static>(
        limit: Duration,
        workers: usize,
        work: fn(usize, &mut Vec<u32>) -> Option<T>,
    ) -> Result<Vec<Option<T>>, String> {
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            let mut scratch = vec![0u32; 16];
            let _ = sender.send(run_forked(workers, &mut scratch, &work));
        });
        receiver
            .recv_timeout(limit)
            .unwrap_or_else(|_| panic!("run_forked did not return within {limit:?}"))
    }

    #[test]
    fn every_child_returns_its_result() {
        let results = within(Duration::from_secs(30), 4, |index, scratch| {
            scratch[0] = index as u32 * 10;
            (index != 2).then_some(scratch[0])
        })
        .unwrap();
        assert_eq!(results, vec![Some(0), Some(10), None, Some(30)]);
    }

    #[test]
    fn a_panicking_child_ends_its_waiting_siblings_and_is_named() {
        // The siblings finish their work and wait at the second barrier for the one that
        // panicked.
        let error = within(Duration::from_secs(30), 3, |index, _| {
            if index == 1 {
                panic!("child 1 fails on purpose");
            }
            Some(index)
        })
        .unwrap_err();
        assert!(error.starts_with("child process 1 of 3"), "{error}");
        assert!(error.contains("panicked"), "{error}");
    }

    #[test]
    fn a_killed_child_ends_its_working_siblings_and_is_named() {
        // The siblings would work forever: only the parent can end them.
        let error = within(Duration::from_secs(30), 3, |index, _| -> Option<u32> {
            if index == 2 {
                // SAFETY: plain syscalls; the child kills itself.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            loop {
                // SAFETY: a plain syscall.
                unsafe { libc::sched_yield() };
            }
        })
        .unwrap_err();
        assert!(error.starts_with("child process 2 of 3"), "{error}");
        assert!(error.contains("killed by signal 9 (SIGKILL)"), "{error}");
        assert!(
            error.contains("its 2 unfinished siblings were killed"),
            "{error}"
        );
    }

    #[test]
    fn a_failing_exit_status_is_reported() {
        let error = within(Duration::from_secs(30), 2, |index, _| -> Option<u32> {
            if index == 0 {
                // SAFETY: `_exit` takes a plain status.
                unsafe { libc::_exit(3) };
            }
            Some(1)
        })
        .unwrap_err();
        assert!(error.contains("exited with status 3"), "{error}");
    }

    #[test]
    fn children_that_hang_are_killed_and_tried_once_more() {
        let started = Instant::now();
        let mut scratch = vec![0u32; 1];
        let hang = |_: usize, _: &mut Vec<u32>| -> Option<u32> {
            loop {
                // SAFETY: a plain syscall.
                unsafe { libc::pause() };
            }
        };
        let error =
            run_forked_within(2, &mut scratch, &hang, Duration::from_millis(100)).unwrap_err();
        assert!(error.contains("still ran after 100ms"), "{error}");
        assert!(error.ends_with("(twice)"), "{error}");
        // Two runs of 100 ms each, not a hang.
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
}
