//! # idspace
//!
//! The Linux kernel's task-ID machinery as user-space concurrent data structures, a task
//! runtime that gives its tasks those IDs, and the process layer that combines them.
//!
//! # Modules
//!
//! Each family brings the kernel designs of one kind of ID, taken from the LKML patch series
//! that introduced them, behind one trait so that designs can be swapped and measured; the
//! runtime and the process layer are built on top of them.
//!
//! * [`table`]: handle tables keyed by (owner, id): the POSIX-timer ID designs of Linux 6.15,
//!   with exact IDs for checkpoint/restore ([`IdTable`](table::IdTable)).
//! * [`pid`]: cyclic IDs in nested namespaces: the kernel's PID allocator (IDR with and
//!   without relocking), FreeBSD's bitmap+hash and per-CPU ranges
//!   ([`PidAllocator`](pid::PidAllocator)).
//! * [`cid`]: concurrency IDs of running tasks: the MM CID rewrite of Linux 6.19 and its two
//!   predecessors ([`CidAllocator`](cid::CidAllocator)).
//! * [`cid::rseq`]: the kernel's own `mm_cid` and CPU of the calling thread, read from its
//!   rseq area.
//! * [`percid`]: data indexed by concurrency ID (counters, slots, object caches) whose memory
//!   follows the CPUs, written by rseq critical sections.
//! * [`range`]: per-CPU caches of ID ranges in front of a source ([`range::RangeSource`],
//!   [`range::SubRanges`]): a PID space's directory, or the cluster-wide leases of
//!   `idspace-lease` on PostgreSQL.
//! * [`sched`]: a task runtime with per-worker run queues whose wakeups follow the kernel's
//!   `try_to_wake_up`, with or without the lock-free wakelist, and hooks at every point of a
//!   task's life.
//! * [`sched::time`]: the runtime's clock: [`sleep`](sched::time::sleep),
//!   [`timeout`](sched::time::timeout) and [`interval`](sched::time::interval) on a
//!   hierarchical timer wheel per worker.
//! * [`net`] and [`pipe`]: sockets (TCP, UDP, Unix) and pipes on the runtime, read and written
//!   through the `futures-io` traits, their readiness from a poller per worker (edge-triggered
//!   epoll through `mio`); `hyper_rt` (feature `hyper`) runs hyper 1.x on them.
//! * [`process`]: processes, threads and PID namespaces over the families: every ID a task
//!   holds, with checkpoint and restore.
//!
//! # The process layer and the clock
//!
//! The families know nothing of each other; [`process`] is where they meet, as in the kernel's
//! `copy_process`. A [`Processes`](process::Processes) model is generic over one design of
//! each family (by default [`PerCpu`](pid::PerCpu), [`Rework`](cid::Rework) and
//! [`ScaledHash`](table::ScaledHash)): a fork takes a PID at every namespace level, each
//! process is a CID space whose CPUs are the runtime's workers and an owner in the timer
//! table, and a checkpoint ([`Processes::checkpoint`](process::Processes::checkpoint)) is
//! restored with the same PIDs and timer IDs. Run under the [`sched`] runtime with
//! [`ProcessHooks`](process::ProcessHooks), tasks are threads: spawning one forks a process or
//! adds a thread to one, the task takes a CID from its process's space at every switch-in and
//! gives it back at switch-out, and its end is the thread's exit; [`percid`] structures built on
//! [`IndexSource::TaskCid`](percid::IndexSource::TaskCid) index their slots by that CID.
//!
//! The runtime keeps its own clock ([`sched::time`]): a timer wheel per worker, as the kernel
//! keeps a timer base per CPU, armed and fired by the workers themselves between polls, with no
//! timer thread. Tasks [`sleep`](sched::time::sleep), put a
//! [`timeout`](sched::time::timeout) on a future or tick on an
//! [`interval`](sched::time::interval); a [`Fire`](sched::time::Fire) callback armed with
//! [`Handle::arm`](sched::Handle::arm) is what the processes' POSIX timers expire through.
//!
//! ```
//! # #[cfg(not(feature = "std"))] fn main() {} // the runtime needs `std`
//! # #[cfg(feature = "std")] fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use idspace::pid::ROOT;
//! use idspace::process::{self, ProcessHooks};
//! use idspace::sched::{time, Builder};
//!
//! // Two workers whose tasks are threads of processes, with the default designs.
//! let hooks: ProcessHooks = ProcessHooks::for_workers(2)?;
//! let runtime = Builder::new().workers(2).hooks(Arc::new(hooks)).build()?;
//! let first = runtime.spawn_process(ROOT, async {
//!     time::sleep(Duration::from_millis(1)).await;
//!     let me = process::current().expect("a task of a process");
//!     (me.pid, me.tid, me.cid.is_some_and(|cid| cid < 2))
//! })?;
//! // The hooks' model starts with the root namespace's init (PID 1), so the first process
//! // spawned is 2; it runs with a CID below the worker count, and sleeps on the runtime's clock.
//! assert_eq!(first.join()?, (2, 2, true));
//! # Ok(())
//! # }
//! ```
//!
//! # Which design do I want
//!
//! Every family has one design we recommend by default; the others are there to compare
//! against, or for the one need the default does not meet.
//!
//! | module | use it for | default | pick another when |
//! |---|---|---|---|
//! | [`table`] | handles (timers, file-like objects) keyed by (owner, id), with exact IDs for checkpoint/restore | [`ScaledHash::new`](table::ScaledHash::new): a lock per bucket, `512 × CPUs` buckets to start, growing as it fills | [`ScaledHash::kernel_sized`](table::ScaledHash::kernel_sized) for the kernel's fixed table; [`GlobalHash`](table::GlobalHash) (one lock, Linux before 6.15) and [`Radix`](table::Radix) (per-owner radix tree, heavy on sparse IDs) as baselines |
//! | [`pid`] | cyclic IDs in nested namespaces (process IDs, with `set_tid` for restore) | [`PerCpu`](pid::PerCpu): per-CPU ranges under per-CPU locks; unique IDs, reused late, not sequential | [`IdrOnce`](pid::IdrOnce) when the exact kernel numbers matter (sequential, the 300 floor); [`IdrRelock`](pid::IdrRelock) (before Linux 7.0) and [`BitmapHash`](pid::BitmapHash) (FreeBSD) as baselines |
//! | [`cid`] | small per-space IDs of running tasks, to index per-CPU-like data whose size follows CPUs, not threads | [`Rework`](cid::Rework): the MM CID rewrite (Linux 6.19); a context switch is a few loads and stores | [`cid::rseq`] for the kernel's own mm_cid of the calling thread; [`BitmapCids`](cid::BitmapCids) (Linux 6.3) and [`LazyCids`](cid::LazyCids) (before the rewrite) as baselines |
//! | [`percid`] | counters, per-index slots and object caches sharded by the running thread's concurrency ID, memory bounded by CPUs | [`PerCidCounter::new`](percid::PerCidCounter::new), [`PerCidPool::new`](percid::PerCidPool::new): the kernel's mm_cid through rseq sections ([`IndexSource::best`](percid::IndexSource::best)) | [`IndexSource::CpuId`](percid::IndexSource::CpuId) for data that belongs to a CPU (caches of CPU-local resources); [`IndexSource::TaskCid`](percid::IndexSource::TaskCid) inside a process's runtime tasks; [`IndexSource::ThreadIds`](percid::IndexSource::ThreadIds) is the fallback where rseq is missing |
//! | [`range`] | handing out IDs from ranges carved from a shared source, each CPU bumping through its own | [`SubRanges`](range::SubRanges) over your [`RangeSource`](range::RangeSource) | nothing to pick: [`PerCpu`](pid::PerCpu) already runs on it for PIDs, and `idspace-lease` for leases |
//! | [`sched`] | running futures on a fixed set of worker threads, with hooks at task create, switch-in, switch-out and exit | [`Runtime`](sched::Runtime) with [`Policy::Wakelist`](sched::Policy::Wakelist) (the [`Builder`](sched::Builder)'s default): the kernel's wakelist for idle targets | [`Policy::Locked`](sched::Policy::Locked) as the baseline; [`Policy::WakelistAlways`](sched::Policy::WakelistAlways) only to reproduce the upstream experiment that regressed |
//! | [`sched::time`] | sleeping, deadlines and periodic ticks in the runtime's tasks | [`sleep`](sched::time::sleep), [`timeout`](sched::time::timeout), [`interval`](sched::time::interval): they find the runtime polling them | [`Handle::sleep`](sched::Handle::sleep), [`Handle::timeout`](sched::Handle::timeout), [`Handle::interval`](sched::Handle::interval) to poll them from another thread or executor; [`Handle::arm`](sched::Handle::arm) with a [`Fire`](sched::time::Fire) callback for a timer that is not a future |
//! | [`process`] | processes and threads that hold every kind of ID (PIDs at every namespace level, a CID while running, timer IDs), with checkpoint/restore | [`Processes::new`](process::Processes::new) (the defaults above), run as tasks with [`ProcessHooks`](process::ProcessHooks) | [`Processes::with_designs`](process::Processes::with_designs) to put another design of a family underneath (e.g. [`IdrOnce`](pid::IdrOnce) for the kernel's exact PIDs); the model alone, without a runtime, when the caller decides every fork, switch and exit |
//!
//! Each main type shows its use in a short example, and `crates/idspace/examples/` has small
//! programs: a handle table with checkpoint/restore (`table_restore`), PID namespaces with
//! `set_tid` (`pid_namespaces`), per-CPU-bounded counting with CIDs (`cid_counter`), per-CID
//! counters and pools on real threads (`percid`), the runtime with hooks (`runtime`), its clock
//! (`time`) and processes on the runtime, checkpointed and restored into another
//! (`process_runtime`); run one with `cargo run -p idspace --example NAME`.
//!
//! # Errors and limits
//!
//! Bad input is refused with a named error, never a panic, and a refused call changes
//! nothing. The limits are public constants: [`cid::MAX_CPUS`] CPUs per CID space,
//! [`table::MAX_SIZED_BUCKETS`] buckets asked of a [`table::Sizing`],
//! [`pid::PerCpu::MAX_NAMESPACES`] spaces and [`pid::PerCpu::MAX_CPUS`] worker slots per
//! [`pid::PerCpu`], [`percid::PerCidPool::MAX_CAPACITY`] objects per pool slot,
//! [`cid::MAX_SCAN_PERIOD`] between CID scans, [`pid::MAX_LEVEL`] levels of PID
//! namespaces and [`sched::MAX_WORKERS`] workers per runtime; timers have the resolution of
//! [`sched::time::RESOLUTION`]. Error and option enums are `#[non_exhaustive]`: match them
//! with a wildcard arm. The only documented panic is that of a [`sched::time`] future polled
//! outside any runtime or after its runtime shut down (see [`Sleep`](sched::time::Sleep)).
//!
//! # Layout
//!
//! Behind the families, the runtime and the process layer, three private layers:
//!
//! * `sync`: the one facade every concurrent module takes its primitives from, so the whole
//!   crate can be model-checked with [loom](https://docs.rs/loom) by building with
//!   `RUSTFLAGS="--cfg loom"`;
//! * `sys`: the platform layer, all the crate's calls into the kernel, the C library and the
//!   CPU's registers: the rseq area behind [`cid::rseq`], the rseq critical sections behind
//!   [`percid`], the futex on which idle workers sleep, and the monotonic clock;
//! * `util`: structures the families share: the radix tree (the xarray's shape), the
//!   locality-preserving (owner, id) hash, the ID set, and the read-side sections that stand
//!   in for RCU under lock-free lookups.
//!
//! # Features: with and without `std`
//!
//! The default `std` feature brings the runtime, the process layer, [`percid`]'s structures
//! that find their own index (rseq, thread IDs, the running task's CID), the kernel's
//! rseq mm_cid and the `std` defaults of the two seams every family goes through: [`lock`]
//! (each structure's locks, a `lock_api` type parameter: by default our store-unlock mutex and
//! std's futex reader-writer lock) and
//! [`host`] (the CPU count, the current CPU and the clock). Without it, [`table`], [`pid`],
//! [`cid`], [`range`] and [`percid::PerIndex`] (slots indexed by a CPU or CID the caller
//! names) build on `core` + `alloc`, on `spin`'s locks unless the user names
//! their own, with the host a kernel [`install`](host::install)s; the README's "Using idspace
//! without std" section and the `kernel_style` example show it.
//!
//! Cache-line padding comes from [`crossbeam_utils::CachePadded`] and the hasher of
//! integer-keyed maps from [`foldhash`]; neither is re-exported.

// The library's own unit tests link std (threads, collections) whatever the features; the
// library built without `std` is `no_std`, so no `std` path can hide in it.
#![cfg_attr(not(any(feature = "std", test)), no_std)]
#![warn(missing_docs, unsafe_op_in_unsafe_fn)]
// The crate docs describe the full (`std`) build; without it their links to the runtime, the
// process layer and `percid` have nothing to point at.
#![cfg_attr(not(feature = "std"), allow(rustdoc::broken_intra_doc_links))]

extern crate alloc;

/// `alloc`'s names that `std`'s prelude brings and `core`'s lacks, for the `no_std` build.
#[allow(unused_imports)]
mod prelude {
    pub(crate) use alloc::borrow::ToOwned;
    pub(crate) use alloc::boxed::Box;
    pub(crate) use alloc::string::{String, ToString};
    pub(crate) use alloc::vec;
    pub(crate) use alloc::vec::Vec;
}

#[cfg(all(loom, not(feature = "std")))]
compile_error!("loom models run on std: build them with the default `std` feature");

pub mod cid;
pub mod host;
#[cfg(all(feature = "hyper", not(loom)))]
pub mod hyper_rt;
pub mod lock;
#[cfg(all(feature = "std", not(loom)))]
pub mod net;
pub mod percid;
pub mod pid;
#[cfg(all(feature = "std", not(loom)))]
pub mod pipe;
#[cfg(feature = "std")]
pub mod process;
pub mod range;
#[cfg(feature = "std")]
pub mod sched;
pub(crate) mod sync;
#[cfg(feature = "std")]
pub(crate) mod sys;
pub mod table;
pub(crate) mod util;
