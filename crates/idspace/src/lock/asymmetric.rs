//! [`AsymmetricMutex`]: a sleeping mutex whose unlock is a plain store, as a kernel spinlock's
//! is, because the rare waiter that goes to sleep pays for the memory barrier the unlock skips.
//! The design and its invariants are on the type.

use crate::sync::{asymmetric, AtomicU32, Ordering};

/// The word of a lock no one holds.
const FREE: u32 = 0;
/// The word of a held lock.
const HELD: u32 = 1;

/// Doubling spin rounds before the first yield: 2, 4 and 8 pause hints, about the length of the
/// structures' critical sections.
#[cfg(not(loom))]
const SPIN_ROUNDS: u32 = 3;
/// Yields before a waiter sleeps: enough for a preempted holder to run and finish. Each sleep
/// costs a `membarrier(2)` call, which interrupts the other CPUs (hundreds of microseconds in a
/// virtual machine whose other CPU is not running), so a waiter yields more often than
/// `parking_lot`'s 7 times before it pays for one.
#[cfg(not(loom))]
const YIELD_ROUNDS: u32 = 16;
// A model reaches the sleep at once: that is the protocol to check.
#[cfg(loom)]
const SPIN_ROUNDS: u32 = 0;
#[cfg(loom)]
const YIELD_ROUNDS: u32 = 0;

/// A mutex that unlocks with a plain store and whose waiters sleep: [`StdLocks`](super::StdLocks)'
/// mutex. It is a `lock_api::RawMutex`: wrap it in `lock_api::Mutex` for a guarded value.
///
/// # Design
///
/// The structures' critical sections are a few dozen instructions, and most are uncontended:
/// the cost of a lock is then its two atomic operations. An x86 read-modify-write costs about
/// as much as the section it guards (20–40 cycles), and a waking mutex (`parking_lot`'s, std's)
/// needs one to unlock too, to learn whether a waiter sleeps. A spinlock's unlock is a store,
/// but its waiters spin through a preempted holder's whole time slice: with more threads than
/// CPUs, a table's create+delete loop ran 3 to 12 times slower on `spin`'s lock.
///
/// This mutex unlocks with a store and still lets waiters sleep:
///
/// * The word is 0 (free) or 1 (held); a lock moves it from 0 to 1 with a compare-exchange.
/// * An unlock stores 0, then reads a count of sleepers, and wakes one only if that count is
///   not zero. The read may pass the store in the CPU (store-to-load reordering), which alone
///   would lose a wake-up: the unlocker reads the count before a waiter's increment, and the
///   waiter checks the word before the unlocker's 0 reaches it.
/// * A waiter spins briefly, then yields a few times (a preempted holder then runs), and only
///   then sleeps: it counts itself a sleeper, and calls `membarrier(2)`, which makes every
///   running thread of the process pass a full barrier before it returns (a thread switched
///   out passed one at the switch). After it, an unlocker's read either comes later and sees
///   the count, or came earlier with its store, which the barrier made visible to the waiter's
///   futex check. Either the unlocker wakes the waiter, or the waiter does not sleep.
/// * The count covers the waiter until it holds the lock, so one barrier serves every sleep of
///   one wait. Counts live in a small table hashed by the lock's address, off the locks: a
///   lock stays one 32-bit word (a table's bucket stays 16 bytes), and a count shared by two
///   locks costs at most a wake-up call that finds no one.
///
/// Where `membarrier` is missing (kernels before 4.14, a seccomp filter, Miri), waiters never
/// sleep: they keep yielding, which is correct with a store unlock and costs CPU for as long as
/// the holder keeps the lock.
///
/// # Invariants
///
/// * Only a compare-exchange from 0 takes the lock, and only its holder stores 0: exclusion
///   does not depend on the sleepers' protocol.
/// * A waiter sleeps only while counted, and only after a barrier made after it was counted.
/// * No wake-up is lost: the argument above. A loom model in the crate checks it in its
///   symmetric form (a fence on each side in place of the barrier and the compiler fence).
///
/// # Where we differ from the kernel
///
/// A kernel spinlock never sleeps; it disables preemption instead, which user space cannot. Like
/// `parking_lot`'s mutex, this one lets a newcomer take the lock ahead of a waiter it finds
/// sleeping (barging), which keeps the lock busy; unlike it, it never hands the lock over to be
/// fair. The structures' critical sections are short and bounded, so a waiter that loses a race
/// soon wins another.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use idspace::lock::AsymmetricMutex;
///
/// let total = Arc::new(lock_api::Mutex::<AsymmetricMutex, u64>::new(0));
/// let workers: Vec<_> = (0..4)
///     .map(|_| {
///         let total = Arc::clone(&total);
///         std::thread::spawn(move || {
///             for _ in 0..1000 {
///                 *total.lock() += 1;
///             }
///         })
///     })
///     .collect();
/// for worker in workers {
///     worker.join().unwrap();
/// }
/// assert_eq!(*total.lock(), 4000);
/// ```
pub struct AsymmetricMutex {
    /// [`FREE`] or [`HELD`]; the futex word sleepers wait on.
    word: AtomicU32,
    /// A model's own count of sleepers and futex (see `park`).
    #[cfg(loom)]
    model: park::Model,
}

impl core::fmt::Debug for AsymmetricMutex {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let held = self.word.load(Ordering::Relaxed) == HELD;
        f.debug_struct("AsymmetricMutex")
            .field("held", &held)
            .finish()
    }
}

impl AsymmetricMutex {
    /// A free lock. (Under loom, where a `const` cannot build an atomic, the only constructor.)
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        AsymmetricMutex {
            word: AtomicU32::new(FREE),
            model: park::Model::default(),
        }
    }

    #[inline]
    fn acquire(&self) {
        // Acquire pairs with the Release store in `release`.
        if self
            .word
            .compare_exchange_weak(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.acquire_contended();
        }
    }

    #[inline]
    fn try_acquire(&self) -> bool {
        // Acquire pairs with the Release store in `release`.
        self.word
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes the lock once it is free: if it is free soon, after spinning; if its holder is
    /// off its CPU, after yielding; otherwise asleep, counted as a sleeper.
    #[cold]
    #[inline(never)]
    fn acquire_contended(&self) {
        for round in 0..SPIN_ROUNDS + YIELD_ROUNDS {
            if self.word.load(Ordering::Relaxed) == FREE && self.try_acquire() {
                return;
            }
            if round < SPIN_ROUNDS {
                for _ in 0..2u32 << round {
                    core::hint::spin_loop();
                }
            } else {
                crate::sync::spin_wait();
            }
        }
        if !self.acquire_asleep() {
            // No barrier to pay for the store unlock: never sleep, keep giving the CPU away.
            while !self.try_acquire() {
                crate::sync::spin_wait();
            }
        }
    }

    /// Takes the lock, sleeping while it is held, counted as a sleeper for the whole wait;
    /// `false`, with the lock not taken and nothing counted, if there is no process-wide
    /// barrier to pay for the sleep.
    fn acquire_asleep(&self) -> bool {
        if !asymmetric::available() {
            return false;
        }
        let sleepers = self.sleepers();
        // Relaxed: the barrier below orders it before every unlock's read of the count that
        // could miss our sleep.
        sleepers.fetch_add(1, Ordering::Relaxed);
        let barrier = asymmetric::heavy();
        if barrier {
            while !self.try_acquire() {
                self.sleep();
            }
        }
        // Relaxed: an unlock that still sees us counted only makes a wake-up call.
        sleepers.fetch_sub(1, Ordering::Relaxed);
        barrier
    }

    #[inline]
    fn release(&self) {
        // Release pairs with the Acquire compare-exchange of the next holder.
        self.word.store(FREE, Ordering::Release);
        // The barrier's light half: keeps the compiler from reading the count first. The CPU
        // may still do so; a sleeper's barrier covers that (see the module documentation).
        asymmetric::light();
        // Relaxed: the sleepers' barrier orders their increments before this read.
        if self.sleepers().load(Ordering::Relaxed) != 0 {
            self.wake();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake(&self) {
        #[cfg(not(loom))]
        crate::sys::futex::wake(&self.word, 1);
        #[cfg(loom)]
        self.model.wake();
    }

    /// Sleeps while the word is [`HELD`], until a wake-up, or for no reason (a signal).
    fn sleep(&self) {
        #[cfg(not(loom))]
        crate::sys::futex::wait(&self.word, HELD);
        #[cfg(loom)]
        self.model.sleep(&self.word, HELD);
    }

    #[cfg(not(loom))]
    #[inline]
    fn sleepers(&self) -> &'static AtomicU32 {
        park::sleepers(core::ptr::from_ref(self) as usize)
    }

    #[cfg(loom)]
    fn sleepers(&self) -> &AtomicU32 {
        &self.model.sleepers
    }
}

// SAFETY: `try_lock` and `lock` return holding the lock only after this caller's
// compare-exchange moved the word from FREE to HELD, and `unlock` (called by the holder only,
// the trait's contract) stores FREE: one holder at a time. Acquire on the exchange pairs with
// Release on the store, so each holder sees the previous one's writes.
#[cfg(not(loom))]
unsafe impl lock_api::RawMutex for AsymmetricMutex {
    #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern.
    const INIT: AsymmetricMutex = AsymmetricMutex {
        word: AtomicU32::new(FREE),
    };
    // The unlock can run on any thread: the lock records no owner.
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        self.acquire();
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.try_acquire()
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.release();
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.word.load(Ordering::Relaxed) == HELD
    }
}

/// The sleepers' counts, on the real kernel.
#[cfg(not(loom))]
mod park {
    use crate::sync::AtomicU32;

    /// Count slots; a power of two. While a waiter sleeps, every unlock of a lock that shares
    /// its slot makes a wake-up call that finds no one: with 64 slots, a table's
    /// create+delete loop on 32 threads made 100,000 such calls per second of run. Slots are
    /// not padded: unlocks only read them, and sleepers, who write them, are rare.
    const SLOTS: usize = 1024;

    /// The counts, aligned to a cache line.
    #[repr(align(128))]
    struct Slots([AtomicU32; SLOTS]);

    static SLEEPERS: Slots = Slots([const { AtomicU32::new(0) }; SLOTS]);

    /// The count for the lock at `address`.
    #[inline]
    pub(super) fn sleepers(address: usize) -> &'static AtomicU32 {
        // Locks sit at least 4 bytes apart; the middle bits spread neighbours (a table's
        // buckets, 16 bytes apart) over the slots.
        &SLEEPERS.0[(address >> 4) % SLOTS]
    }
}

/// Under loom: a futex made of a count of
/// wake-ups, so that a lost wake-up leaves the model's sleeper waiting for ever (a failure).
#[cfg(loom)]
mod park {
    use crate::sync::{AtomicU32, Ordering};

    #[derive(Default)]
    pub(super) struct Model {
        pub(super) sleepers: AtomicU32,
        wakes: AtomicU32,
    }

    impl Model {
        /// A futex wait: the wake count read before the word, so that a wake-up after the
        /// check is seen, as the kernel's queue lock ensures.
        pub(super) fn sleep(&self, word: &AtomicU32, expected: u32) {
            let seen = self.wakes.load(Ordering::SeqCst);
            if word.load(Ordering::SeqCst) != expected {
                return;
            }
            while self.wakes.load(Ordering::SeqCst) == seen {
                loom::thread::yield_now();
            }
        }

        pub(super) fn wake(&self) {
            self.wakes.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[cfg(all(test, loom))]
mod model {
    use super::AsymmetricMutex;
    use crate::sync::{thread, Arc, AtomicU32, Ordering};

    /// Two threads take the lock in turn, each once: neither is left asleep, and the sections
    /// never overlap.
    #[test]
    fn no_wake_up_is_lost() {
        loom::model(|| {
            let lock = Arc::new(AsymmetricMutex::new());
            let inside = Arc::new(AtomicU32::new(0));
            let other = {
                let (lock, inside) = (Arc::clone(&lock), Arc::clone(&inside));
                thread::spawn(move || section(&lock, &inside))
            };
            section(&lock, &inside);
            other.join().unwrap();
            assert_eq!(inside.load(Ordering::Relaxed), 0);
        });
    }

    fn section(lock: &AsymmetricMutex, inside: &AtomicU32) {
        lock.acquire();
        assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "two holders");
        inside.fetch_sub(1, Ordering::Relaxed);
        lock.release();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::AsymmetricMutex;
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    type Mutex<T> = lock_api::Mutex<AsymmetricMutex, T>;

    /// More threads than CPUs on one lock, holders that sleep inside it (so that waiters reach
    /// the sleeping path): every increment is counted, and the run ends.
    #[test]
    fn sleeping_waiters_all_get_the_lock() {
        let threads = 8;
        let rounds = if cfg!(miri) { 5 } else { 200 };
        let total = Arc::new(Mutex::new(0u64));
        let start = Arc::new(Barrier::new(threads));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (total, start) = (Arc::clone(&total), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    for round in 0..rounds {
                        let mut value = total.lock();
                        *value += 1;
                        if round % 50 == 0 {
                            std::thread::sleep(Duration::from_micros(200));
                        }
                    }
                })
            })
            .collect();
        // A lost wake-up would leave a worker asleep for ever: fail after a minute instead.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for worker in workers {
                worker.join().unwrap();
            }
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(60))
            .expect("a waiter was never woken");
        assert_eq!(*total.lock(), (threads * rounds) as u64);
    }

    #[test]
    fn try_lock_fails_while_held_and_debug_shows_it() {
        let lock = Mutex::new(1);
        let held = lock.lock();
        assert!(lock.try_lock().is_none());
        assert!(format!("{:?}", unsafe_raw(&lock)).contains("held: true"));
        drop(held);
        assert_eq!(*lock.try_lock().unwrap(), 1);
        assert!(format!("{:?}", unsafe_raw(&lock)).contains("held: false"));
    }

    fn unsafe_raw<T>(lock: &Mutex<T>) -> &AsymmetricMutex {
        // SAFETY: only read through `Debug`, which takes no lock.
        unsafe { lock.raw() }
    }
}
