//! Platform code: the system calls the data structures rest on, each behind a small safe
//! wrapper, so that the rest of the crate holds no `libc` calls of its own.

#[cfg(not(loom))]
pub(crate) mod futex;
