//! # idspace
//!
//! The Linux kernel's task-ID machinery as user-space concurrent data structures.
//!
//! Each module brings one family of kernel designs, taken from the LKML patch series that
//! introduced them, behind one trait per family so that designs can be swapped and measured:
//!
//! * [`table`]: handle tables keyed by (owner, id), the POSIX-timer ID designs (global hash,
//!   CPU-scaled hash with per-bucket locks, per-owner radix tree) with exact-ID restore mode.
//! * [`cid`]: concurrency IDs, the MM CID rewrite of Linux 6.19 with its two predecessors as
//!   baselines, and the kernel's own `rseq` mm_cid.
//! * [`percid`]: data indexed by concurrency ID: counters, slots and object caches whose
//!   memory follows the CPUs, written by rseq critical sections.
//! * [`pid`]: namespaced cyclic ID allocation, the kernel's PID allocator (IDR with and without
//!   relocking, FreeBSD's bitmap+hash) and the per-CPU range design sketched on LKML.
//! * [`range`]: the seam between a space's directory and per-CPU ranges in front of it
//!   ([`range::RangeSource`], [`range::SubRanges`]), which the cluster-wide lease allocator
//!   (`idspace-lease`) feeds from leases on PostgreSQL.
//! * [`sched`]: a task runtime with per-worker run queues whose wakeups follow the kernel's
//!   `try_to_wake_up`, with or without the lock-free wakelist.
//!
//! # Choosing a design
//!
//! Every family has one design we recommend by default; the others are there to compare
//! against, or for the one need the default does not meet.
//!
//! | family | use it for | default | pick another when |
//! |---|---|---|---|
//! | [`table`] | handles (timers, file-like objects) keyed by (owner, id), with exact IDs for checkpoint/restore | [`ScaledHash::new`](table::ScaledHash::new): a lock per bucket, `512 × CPUs` buckets to start, growing as it fills | [`ScaledHash::kernel_sized`](table::ScaledHash::kernel_sized) for the kernel's fixed table; [`GlobalHash`](table::GlobalHash) (one lock, Linux before 6.15) and [`Radix`](table::Radix) (per-owner radix tree, heavy on sparse IDs) as baselines |
//! | [`pid`] | cyclic IDs in nested namespaces (process IDs, with `set_tid` for restore) | [`PerCpu`](pid::PerCpu): per-CPU ranges under per-CPU locks; unique IDs, reused late, not sequential | [`IdrOnce`](pid::IdrOnce) when the exact kernel numbers matter (sequential, the 300 floor); [`IdrRelock`](pid::IdrRelock) (before Linux 7.0) and [`BitmapHash`](pid::BitmapHash) (FreeBSD) as baselines |
//! | [`cid`] | small per-space IDs of running tasks, to index per-CPU-like data whose size follows CPUs, not threads | [`Rework`](cid::Rework): the MM CID rewrite (Linux 6.19); a context switch is a few loads and stores | [`cid::rseq`] for the kernel's own mm_cid of the calling thread; [`BitmapCids`](cid::BitmapCids) (Linux 6.3) and [`LazyCids`](cid::LazyCids) (before the rewrite) as baselines |
//! | [`percid`] | counters, per-index slots and object caches sharded by the running thread's concurrency ID, memory bounded by CPUs | [`PerCidCounter::new`](percid::PerCidCounter::new), [`PerCidPool::new`](percid::PerCidPool::new): the kernel's mm_cid through rseq sections ([`IndexSource::best`](percid::IndexSource::best)) | [`IndexSource::CpuId`](percid::IndexSource::CpuId) for data that belongs to a CPU (caches of CPU-local resources); [`IndexSource::ThreadIds`](percid::IndexSource::ThreadIds) is the fallback where rseq is missing |
//! | [`sched`] | running futures on a fixed set of worker threads, with hooks at task create, switch-in, switch-out and exit | [`Runtime`](sched::Runtime) with [`Policy::Wakelist`](sched::Policy::Wakelist) (the [`Builder`](sched::Builder)'s default): the kernel's wakelist for idle targets | [`Policy::Locked`](sched::Policy::Locked) as the baseline; [`Policy::WakelistAlways`](sched::Policy::WakelistAlways) only to reproduce the upstream experiment that regressed |
//!
//! Each family's main type shows its use in a short example, and `crates/idspace/examples/`
//! has small programs: a handle table with checkpoint/restore (`table_restore`), PID
//! namespaces with `set_tid` (`pid_namespaces`), per-CPU-bounded counting with CIDs
//! (`cid_counter`) and the runtime with hooks (`runtime`); run one with
//! `cargo run -p idspace --example NAME`.
//!
//! # Errors and limits
//!
//! Bad input is refused with a named error, never a panic, and a refused call changes
//! nothing. The limits are public constants: [`cid::MAX_CPUS`] CPUs per CID space,
//! [`table::MAX_SIZED_BUCKETS`] buckets asked of a [`table::Sizing`],
//! [`pid::PerCpu::MAX_NAMESPACES`] spaces per [`pid::PerCpu`], [`pid::MAX_LEVEL`] levels of PID
//! namespaces and [`sched::MAX_WORKERS`] workers per runtime. Error and option enums are
//! `#[non_exhaustive]`: match them with a wildcard arm.
//!
//! # Layout
//!
//! Behind the four families, three private layers:
//!
//! * `sync`: the one facade every concurrent module takes its primitives from, so the whole
//!   crate can be model-checked with [loom](https://docs.rs/loom) by building with
//!   `RUSTFLAGS="--cfg loom"`;
//! * `sys`: the platform layer, all the crate's calls into the kernel, the C library and the
//!   CPU's registers (the rseq area behind [`cid::rseq`], and the rseq critical sections
//!   behind [`percid`]);
//! * `util`: structures the families share: the radix tree (the xarray's shape), the
//!   locality-preserving (owner, id) hash and the ID set.
//!
//! Cache-line padding comes from [`crossbeam_utils::CachePadded`] and the hasher of
//! integer-keyed maps from [`foldhash`]; neither is re-exported.

#![warn(missing_docs, unsafe_op_in_unsafe_fn)]

pub mod cid;
pub mod percid;
pub mod pid;
pub mod process;
pub mod range;
pub mod sched;
pub(crate) mod sync;
pub(crate) mod sys;
pub mod table;
pub(crate) mod util;
