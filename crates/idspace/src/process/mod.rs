//! Processes: namespaces, thread groups, and every ID a task holds (PIDs at every namespace
//! level, a CID while it runs, its process's timer IDs), with checkpoint and restore.
//!
//! ```
//! use idspace::pid::ROOT;
//! use idspace::process::{Clock, ITimerSpec, Notify, Processes, TimeSpec, When};
//!
//! let model = Processes::with_init(2)?;
//! let leader = model.fork(ROOT, 0)?;
//! let pid = leader.tid();
//! let thread = model.clone_thread(pid, 1)?;
//! let timer = model.timer_create_with(pid, Clock::Monotonic, Notify::None)?;
//! let in_a_minute = ITimerSpec::once(TimeSpec::new(60, 0));
//! model.timer_settime(pid, timer, When::Relative, in_a_minute)?;
//! let image = model.checkpoint(pid)?;
//!
//! // Another model restores the process: the same IDs, its timer still armed.
//! let target = Processes::with_init(2)?;
//! let restored = target.restore(ROOT, &image, 0)?;
//! assert_eq!(restored.leader.tid(), pid);
//! assert_eq!(restored.threads[0].tid(), thread.tid());
//! assert!(!target.timer_gettime(pid, timer)?.value.is_zero());
//! # Ok::<(), idspace::process::ProcessError>(())
//! ```
//!
//! # The kernel design
//!
//! A process is a thread group: a `signal_struct` (with the process's POSIX timers, an IDR keyed
//! by the process since 6.19's rework, "posix-timers: Rework the global hash table") and an
//! `mm` (with the CID space, "sched: Rewrite MM CID management") shared by its threads
//! (`task_struct`s). `copy_process` allocates a `struct pid` with an ID at every PID-namespace
//! level (`alloc_pid`, relocked once since "further damage-control lack of clone
//! scalability"); a thread's ID is its TID, its leader's ID is the
//! process's (the tgid). A leader that exits before its threads stays a zombie holding its
//! IDs until the group ends (`release_task` of the last thread). When the init of a namespace
//! (ID 1 there) ends, `zap_pid_ns_processes` kills every process with an ID in that namespace
//! and `disable_pid_allocation` makes it refuse new ones; the namespace is freed once nothing
//! references it. Every context switch gives the incoming task a CID from its `mm`'s space
//! (`mm_cid_switch_to`). CRIU restores a process with `clone3`'s `set_tid` (the checkpointed
//! IDs, innermost first, as deep as the target namespace allows) and recreates timers with
//! their IDs under `PR_TIMER_CREATE_RESTORE_IDS`.
//!
//! # This module
//!
//! [`Processes`] keeps namespaces, processes and threads under one lock (the kernel's
//! `tasklist_lock`, which `copy_process` and `release_task` take too). Its designs are type
//! parameters chosen at build time: a [`PidAllocator`](crate::pid::PidAllocator) for the IDs
//! ([`PidDesign`]), a [`CidAllocator`](crate::cid::CidAllocator) space per process whose CPUs
//! are the runtime's workers ([`CidDesign`]), and one [`IdTable`](crate::table::IdTable) in
//! which each process is an owner holding its timers ([`TableDesign`]). The defaults are
//! [`PerCpu`](crate::pid::PerCpu), [`Rework`](crate::cid::Rework) and
//! [`ScaledHash`](crate::table::ScaledHash). A [`Thread`] is the handle a task carries: its
//! [`switch_in`](Thread::switch_in) and [`switch_out`](Thread::switch_out) go straight to its
//! process's CID space, without the model's lock.
//!
//! * [`Processes::fork`] makes a process with one thread, its leader; [`Processes::clone_thread`]
//!   adds a thread in the process's namespace.
//! * [`Processes::exit`]: the thread leaves the CID space and its IDs are freed, except a leader
//!   with live threads, which stays a zombie. The last live thread ends the process: its timers
//!   go (`remove_owner`) and every ID it held is freed. Whenever an ID 1 is freed, its
//!   namespace dies and every process with an ID there ends too.
//! * A namespace is freed once it is dead and holds no IDs and no child namespaces: the PID
//!   design frees its space ([`PidAllocator::free_ns`](crate::pid::PidAllocator::free_ns)) and
//!   the model keeps only its number, its parent's and its `pid_max` ([`FREED_NS_BYTES`]), so
//!   that the number answers as a dead namespace; memory returns to where it was before the namespace was made
//!   but for those bytes (see below).
//! * In the task runtime, [`ProcessHooks`] make tasks threads: each carries its [`Thread`] as
//!   its per-task data ([`TaskIds`]); [`Runtime::spawn_process`](crate::sched::Runtime) starts
//!   a process, [`spawn_thread`] adds a thread to the caller's, and [`current`] gives the
//!   running task's TID and PID in its own namespace and the root, and its CID. At each
//!   switch-in the task takes a CID from its process's space with the worker as the CPU
//!   (`mm_cid_switch_to`), and gives it back at switch-out; its exit, however it ended
//!   (completed, panicked, cancelled, killed), is the thread's exit.
//! * [`Processes::kill`], and the end of a namespace's init, kill a thread that a task runs as
//!   SIGKILL does: its task stops at its next poll (a sleeping one is woken), its join handle
//!   reports [`JoinError::Killed`](crate::sched::JoinError::Killed), and its IDs are freed only
//!   when its task has stopped (the kernel's `release_task`), the leader's with the last
//!   thread's; until then no one else can take them, so [`current`] never reports a freed or
//!   foreign ID. A thread without a task (the model used alone) leaves at once.
//! * [`Handle::restore_process`](crate::sched::Handle) restores an image into a runtime: the
//!   process with its IDs, its timers firing on the runtime's wheel, and each thread running
//!   the caller's code under its restored TID.
//! * [`Processes::with_init`] starts with the root namespace's init, as a real system does
//!   (and [`ProcessHooks::for_workers`] builds its model so); [`Processes::new`] starts
//!   without one, and says what that means.
//! * [`Processes::checkpoint`] gives an [`Image`] (serde-serialisable); [`Processes::restore`]
//!   recreates it: leader first, then ascending by root-level ID, then the timers through
//!   restore mode, then the timer cursor.
//! * POSIX timers: [`Processes::timer_create_with`] makes a timer on a [`Clock`] with a
//!   [`Notify`] target (nothing, waking [`Processes::timer_wait`], or a [`TimerEvent`] on a
//!   channel), its ID from the process's owner in the table; [`Processes::timer_settime`],
//!   [`Processes::timer_gettime`], [`Processes::timer_getoverrun`] and
//!   [`Processes::timer_delete`] as POSIX defines them, over the state machine of
//!   [`PosixTimer`] (which documents the overrun accounting and the realtime clock). Each
//!   timer has its own lock (the kernel's `it_lock`); only create and delete take the model's.
//!   An exit deletes the process's timers; an image carries each non-plain timer's clock,
//!   notification kind, remaining time, interval and overrun state ([`TimerImage`]), and
//!   [`Processes::restore_with`] re-arms them with their IDs and remaining times, given
//!   their channels.
//!
//! # Layout
//!
//! `process` is the layer that combines the families: it depends on `pid`, `cid`, `table` and
//! `sched`, and none of them depends on it (the running task's CID, which `percid` reads, is
//! kept by `cid` itself, in [`cid::current`](crate::cid)). Inside, each file is one concept:
//!
//! * `design`: the design traits ([`PidDesign`], [`CidDesign`], [`TableDesign`]);
//! * `thread`: the handles ([`Process`], [`Thread`]);
//! * `processes/`: every method of [`Processes`], by concept (namespaces, lifecycle, tasks,
//!   checkpoint, timers);
//! * `image`: what a checkpoint keeps ([`Image`], [`TimerImage`]);
//! * `posix_timer`: one timer as a state machine ([`PosixTimer`]);
//! * `timers/`: a process's timers, their notifications and their expiry on the runtime's
//!   wheel;
//! * `runtime`: tasks as threads ([`ProcessHooks`], [`current`], [`spawn_thread`]);
//! * `kill`: a thread's link to its task, and the task's stop at its next poll once killed;
//! * `restore`: a restored process run by a runtime ([`RestoredTasks`]);
//! * `error`: [`ProcessError`].
//!
//! # Where we differ from the kernel
//!
//! * No parent/child tree, no signals, no `wait`: a process's end is its reaping.
//! * The namespace of an ID 1 dies when that ID is freed, whoever held it: normally the init
//!   process, whose zombie leader holds it until the group ends; in the corner where a thread
//!   was cloned into an outer namespace before it had an init, that thread. The PID designs
//!   decide so, and the model follows them.
//! * The timer cursor is checkpointed and restored: a checkpoint reads the process's cursor
//!   from the table ([`IdTable::cursor`](crate::table::IdTable::cursor)), and a restore sets it
//!   ([`IdTable::set_cursor`](crate::table::IdTable::set_cursor)) after recreating the timers
//!   in restore mode, so that IDs freed before the checkpoint are not handed out again at once.
//!   The kernel exposes no timer cursor, so CRIU has none to restore.
//! * A restore is one `clone3` per thread, leader first, each one `alloc_pid` (level by level,
//!   innermost first: a `set_tid` entry checked for range and init, then taken; other levels
//!   from their cursors; a dead namespace refused after every level); the first refusal is the
//!   answer. A refused restore holds no IDs, makes no timers and moves no timer cursor, but
//!   the PID cursors stay where its allocations moved them, as after the kernel's `clone3`s
//!   (the namespace the refused allocation was for gets its cursor back at 0 if it holds no
//!   process, as `alloc_pid` does). If an earlier thread of the refused restore had taken a
//!   namespace's ID 1, freeing it leaves that namespace dead, the kernel's end state too: that
//!   thread's process was the namespace's init, and ending it ends the namespace. A freed
//!   namespace answers a restore as a dead one: the leader's `set_tid` is checked for range at
//!   its levels (against a `pid_max` set on it, which the model keeps), its living ancestors
//!   take and give back their IDs, and only then is the restore refused as `ns_dead`.
//! * CIDs: a zombie leader leaves the CID space at once; CIDs are only held while running, as
//!   the designs decide.
//! * Exits take the model's lock; the switch path never does.
//! * A namespace is freed as soon as it is dead and empty (the kernel frees it once nothing
//!   references it, which may be later: an open `/proc/<pid>/ns/pid` keeps it). The PID design
//!   frees its space ([`PidAllocator::free_ns`](crate::pid::PidAllocator::free_ns)): its tree,
//!   bitmap, ranges on every CPU and lookup slots. [`Processes::memory_bytes`] then returns to
//!   its value before the namespace was made, plus [`FREED_NS_BYTES`]: the model keeps the
//!   freed number, its parent's and its `pid_max`, so that the number answers as a dead
//!   namespace for the whole run, as the replay protocol requires. That includes a fork or a
//!   restore into it: like one into a dead namespace, which takes an ID at every level before
//!   `alloc_pid` sees the namespace is dead, it moves its living ancestors' cursors (the PID
//!   design takes and gives back the nearest living ancestor's levels without publishing
//!   them: [`PidAllocator::alloc_refused`](crate::pid::PidAllocator::alloc_refused)). Exactness also needs the ancestors' structures
//!   as they were: the IDs the namespace's processes took there are freed, but a bitmap word or
//!   a CPU's current range they first needed stays, and `BitmapHash`'s shared lookup stripes
//!   keep some room.

mod design;
mod error;
mod image;
mod kill;
mod posix_timer;
mod processes;
mod restore;
mod runtime;
mod thread;
mod timers;

pub use design::{CidDesign, PidDesign, TableDesign};
pub use error::ProcessError;
pub use image::{Image, NotifyKind, ThreadImage, TimerImage};
pub use posix_timer::{
    Clock, Expired, ITimerSpec, Now, PosixTimer, TimeSpec, TimerError, TimerSnapshot, Token, When,
    DELAYTIMER_MAX, FOREVER, NSEC_PER_SEC,
};
pub use processes::{Exited, Processes, Restored, FREED_NS_BYTES};
pub use restore::RestoredTasks;
pub use runtime::{current, spawn_thread, spawn_thread_in, Current, ProcessHooks, TaskIds};
pub use thread::{Process, Thread};
pub use timers::{clock_gettime, Notify, TimerEvent, TimerWait};
