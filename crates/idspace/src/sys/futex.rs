//! Linux futexes on a 32-bit atomic word: sleep while the word holds a value, wake sleepers.
//!
//! A futex is the kernel's wait queue keyed by an address. [`wait`] compares the word with the
//! expected value and goes to sleep in one step inside the kernel, so a thread that changes the
//! word and then calls [`wake`] can never slip in between the check and the sleep: either the
//! waiter sees the new value and returns at once, or it is asleep when the wake arrives.
//!
//! Only process-private futexes are used (`FUTEX_PRIVATE_FLAG`): the words live in this
//! process's memory and are never shared with another process, which lets the kernel skip the
//! shared-mapping lookup.
//!
//! Under `--cfg loom` this module does not exist: loom's atomics have no address the kernel
//! could sleep on, and its model checker cannot see a system call; callers model the sleep
//! with a mutex and a condition variable instead.

// The futex word is a word the kernel reads and sleeps on.
use crate::sync::unmodeled::AtomicU32;

/// Sleeps while `word` holds `expected`.
///
/// Returns when woken by [`wake`], at once if `word` did not hold `expected` when the kernel
/// looked, and possibly for no reason at all (a signal, a spurious wakeup). It therefore says
/// nothing about the word: callers loop, reload the word and call again while they still want
/// to sleep.
pub(crate) fn wait(word: &AtomicU32, expected: u32) {
    futex_wait(word, expected, None);
}

/// Sleeps while `word` holds `expected`, for at most `timeout` (measured on the monotonic
/// clock, and subject like any sleep to the thread's timer slack).
///
/// Returns on a wake, at once if the word differs, when the timeout runs out, or for no reason
/// (a signal): as with [`wait`], callers look at the word and at the clock again.
pub(crate) fn wait_timeout(word: &AtomicU32, expected: u32, timeout: std::time::Duration) {
    // FUTEX_WAIT's timeout is relative, on CLOCK_MONOTONIC. Seconds beyond `time_t` are
    // clamped: such a sleep ends by a wake or not at all.
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    futex_wait(word, expected, Some(&timeout));
}

/// FUTEX_WAIT on `word`, without a timeout or with a relative one.
fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<&libc::timespec>) {
    let timeout = timeout.map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // The result is deliberately ignored: EAGAIN (the word changed), EINTR (a signal),
    // ETIMEDOUT and a real wakeup all mean "look at the word again", which callers do anyway.
    // SAFETY: FUTEX_WAIT reads the u32 at the address, which is a live `AtomicU32` borrowed for
    // the whole call and aligned as the kernel requires, and the timespec, null or a reference
    // borrowed for the whole call; it takes no other pointer.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            timeout,
        );
    }
}

/// Wakes up to `count` threads sleeping in [`wait`] on `word`, and returns how many it woke.
///
/// Call it after changing the word: a waiter that has not gone to sleep yet then sees the new
/// value instead of sleeping. Counts above `i32::MAX` wake every sleeper.
pub(crate) fn wake(word: &AtomicU32, count: u32) -> usize {
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    // SAFETY: FUTEX_WAKE uses the address of this live `AtomicU32` only as the key of the wait
    // queue; it neither reads nor writes memory through it.
    let woken = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        )
    };
    // FUTEX_WAKE on a private word of ours cannot fail; a negative result would be an error
    // number, and then no one was woken.
    usize::try_from(woken).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::{Arc, Ordering};
    use std::thread;

    #[test]
    fn wait_returns_at_once_when_the_word_differs() {
        let word = AtomicU32::new(1);
        // Would sleep forever if the kernel did not compare first.
        wait(&word, 0);
    }

    #[test]
    fn wait_timeout_returns_when_the_time_is_up() {
        let word = AtomicU32::new(0);
        let timeout = std::time::Duration::from_millis(20);
        let started = std::time::Instant::now();
        // Nothing wakes it and the word keeps its value: only the timeout can end the loop (a
        // wait that ignored it would hang the test).
        while started.elapsed() < timeout {
            wait_timeout(&word, 0, timeout.saturating_sub(started.elapsed()));
        }
        wait_timeout(&word, 0, std::time::Duration::ZERO);
    }

    #[test]
    fn wake_without_sleepers_wakes_no_one() {
        let word = AtomicU32::new(0);
        assert_eq!(wake(&word, 1), 0);
        assert_eq!(wake(&word, u32::MAX), 0);
    }

    /// A thread really sleeps in `wait` (a wake finds it), a wake without a change of the word
    /// sends it back to sleep, and a change plus a wake lets it go.
    #[test]
    fn a_sleeper_is_found_by_wake_and_leaves_after_the_word_changes() {
        let word = Arc::new(AtomicU32::new(0));
        let sleeper = {
            let word = Arc::clone(&word);
            thread::spawn(move || {
                // Acquire pairs with the Release store below.
                while word.load(Ordering::Acquire) == 0 {
                    wait(&word, 0);
                }
            })
        };
        // Until the sleeper is inside `wait`, wakes find no one. A bound keeps a broken `wait`
        // (one that never sleeps) from hanging the test.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while wake(&word, 1) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no thread ever slept on the word"
            );
            thread::yield_now();
        }
        word.store(1, Ordering::Release);
        wake(&word, u32::MAX);
        sleeper.join().unwrap();
    }
}
