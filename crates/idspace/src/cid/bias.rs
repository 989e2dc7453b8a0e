//! Binding a thread to a CPU, so that its runqueue locks take no atomic read-modify-write.
//!
//! In the kernel, a context switch already holds `rq->lock` when the CID code runs, so the
//! rework's switch-in adds no atomic operation of its own. Our runqueues have a lock for the
//! CIDs alone, and its compare-and-swap was most of what the IDs added to a switch. A thread
//! that a scheduler *binds* to a CPU ([`bind_current_thread`]) locks that CPU's runqueues by a
//! plain store and a load instead, once the runqueue is *biased* to it; every other locker
//! first revokes the bias, which costs it a `membarrier(2)` call (see `runqueue`, "Biased
//! locking", for the protocol and why it is safe).
//!
//! A binding is a hint, never a promise the locks rely on: two threads bound to one CPU, a
//! thread bound to a CPU it never switches on, a thread that exits while a runqueue is biased
//! to it, all stay correct. A runqueue is biased to one thread at a time, which alone may lock
//! it by the fast path; the others take the lock as before.
//!
//! Where there is no thread-local storage (`no_std`) or no `membarrier` (kernels before 4.14, a
//! seccomp filter, Miri), nothing is ever biased. Under loom, fences on both sides stand for
//! the barrier and its light half.

#[cfg(feature = "std")]
use core::cell::Cell;

use crate::sync::asymmetric;

#[cfg(all(feature = "std", not(loom)))]
std::thread_local! {
    /// The CPU the thread is bound to, plus one (0: none). Its address is the thread's token.
    static BOUND: Cell<usize> = const { Cell::new(0) };
}

#[cfg(loom)]
loom::thread_local! {
    static BOUND: Cell<usize> = Cell::new(0);
}

/// Binds the calling thread to `cpu` in every CID space, or (`None`) unbinds it: what the
/// scheduler that runs on one CPU calls once, before its first switch there.
///
/// Afterwards, after a run of uncontended switches, this thread's runqueue locks on that CPU
/// cost a store and a load instead of a compare-and-swap. Another thread that locks the
/// runqueue (a migration here from another CPU, an exit or a mode change's walk elsewhere)
/// revokes the bias, at the price of one `membarrier(2)` call; the binding thread earns it
/// back with its next run of switches.
///
/// Unbinding stops the thread from earning new biases; a runqueue already biased to it stays
/// so until another locker revokes it. Nothing depends on the binding for correctness:
/// binding two threads to one CPU, or switching on other CPUs, only leaves locks unbiased. Without `membarrier` (old kernels,
/// seccomp, Miri) or without `std`, this does nothing.
///
/// ```
/// use idspace::cid::{bind_current_thread, CidAllocator, Rework};
///
/// let space = Rework::new(2).unwrap();
/// let task = space.fork(0b11).unwrap();
/// bind_current_thread(Some(1)); // this thread is CPU 1's scheduler
/// for _ in 0..1000 {
///     assert_eq!(space.switch(1, Some(&task)).unwrap(), Some(0));
///     space.switch(1, None).unwrap();
/// }
/// bind_current_thread(None);
/// space.exit(&task).unwrap();
/// ```
pub fn bind_current_thread(cpu: Option<usize>) {
    #[cfg(feature = "std")]
    BOUND.with(|bound| bound.set(cpu.map_or(0, |cpu| cpu.saturating_add(1))));
    #[cfg(not(feature = "std"))]
    let _ = cpu;
}

/// The calling thread's token (an address no other live thread has) if it is bound to `cpu`
/// and runqueues may be biased at all; `None` otherwise.
#[inline]
pub(crate) fn bound_token(cpu: usize) -> Option<usize> {
    #[cfg(feature = "std")]
    {
        BOUND.with(|bound| {
            (bound.get() == cpu.wrapping_add(1) && asymmetric::available())
                .then_some(bound as *const Cell<usize> as usize)
        })
    }
    #[cfg(not(feature = "std"))]
    {
        let _ = cpu;
        None
    }
}

/// The calling thread's token, whatever it is bound to: compared with a runqueue's bias on
/// every lock, so it must be cheap (a thread-local address). Never 0, the unbiased value;
/// without `std`, a value no runqueue is ever biased to.
#[inline(always)]
pub(crate) fn token() -> usize {
    #[cfg(feature = "std")]
    {
        BOUND.with(|bound| bound as *const Cell<usize> as usize)
    }
    #[cfg(not(feature = "std"))]
    {
        usize::MAX
    }
}

/// The revoker's half: every thread of the process passes a full barrier before this returns.
/// Called only once [`bound_token`] gave some thread a token, so `membarrier` is registered.
#[cold]
pub(crate) fn barrier() {
    // Registered before any bias was given, and the kernel refuses the command only to an
    // unregistered process: going on unordered would let two holders in. Without `std` no
    // runqueue is ever biased, so there is nothing to revoke.
    assert!(
        !asymmetric::available() || asymmetric::heavy(),
        "membarrier refused after registration"
    );
}
