//! The platform layer: every call into the kernel, the C library or the CPU's registers that the
//! families need, each behind a small safe interface. The rest of the crate is portable Rust over
//! these.

pub(crate) mod rseq;
