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
//! * [`pid`]: namespaced cyclic ID allocation, the kernel's PID allocator (IDR with and without
//!   relocking, FreeBSD's bitmap+hash) and the per-CPU range design sketched on LKML.
//! * [`sched`]: a task runtime with per-worker run queues whose wakeups follow the kernel's
//!   `try_to_wake_up`, with or without the lock-free wakelist.
//!
//! Every concurrent module takes its primitives from one facade, so the whole crate can be
//! model-checked with [loom](https://docs.rs/loom) by building with `RUSTFLAGS="--cfg loom"`.

#![warn(missing_docs, unsafe_op_in_unsafe_fn)]

pub mod cid;
pub mod padded;
pub mod pid;
pub mod sched;
pub(crate) mod sync;
mod sys;
pub mod table;
