//! The platform layer: every call into the kernel, the C library or the CPU's registers that the
//! families need, each behind a small safe interface, so that the rest of the crate is portable
//! Rust over these and holds no `libc` calls of its own.

pub(crate) mod clock;
#[cfg(not(loom))]
pub(crate) mod futex;
#[cfg(not(loom))]
pub(crate) mod membarrier;
pub(crate) mod rseq;
/// Critical sections exist only where there is assembly for them and a real kernel to abort
/// them.
#[cfg(all(
    not(miri),
    not(loom),
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(crate) mod rseq_cs;
#[cfg(not(loom))]
pub(crate) mod rusage;
