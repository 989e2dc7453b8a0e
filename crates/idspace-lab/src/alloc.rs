//! A global allocator that can count live heap bytes, so that the lab measures every
//! structure's memory the same way, ours and the peers' alike.
//!
//! # Where it is installed, and what it costs elsewhere
//!
//! A binary has exactly one global allocator, for all of its commands, and a library that
//! declared one would impose it on every program linking it; so this crate only provides
//! [`CountingAlloc`], and the `idspace` binary installs it (`idspace bench` needs it), which
//! means that `idspace replay` runs on it too. Counting is therefore off unless a lab
//! measurement has switched it on ([`measure`]): [`CountingAlloc`] forwards every call to
//! [`System`](std::alloc::System) and counts only while a measurement runs. `replay` never
//! starts one, so each of its allocations pays one relaxed load of a counter that stays zero,
//! and nothing else.
//!
//! The alternatives keep the allocator out of `replay` entirely, at a price we did not want to
//! pay: a second binary for the lab (`cargo run --release -- bench` from the root would no
//! longer run the lab, or `idspace` would have to find and run a sibling executable that
//! `cargo run` does not build), or counting by wrapping the measured structures (the peers'
//! internal allocations, which are what the comparison is about, would escape it).
//!
//! While it is on, each thread counts its own allocations (a thread-local counter), and
//! [`measure`] reads the calling thread's: what other threads allocate meanwhile does not blur
//! the figure. [`measure`] also checks that the counting allocator really is the global
//! allocator, and says so if it is not, rather than reporting zero bytes.

pub use crate::sys::alloc::{measure, CountingAlloc};
