//! [`Readers`]: lookups in flight, so that a remove can wait until none of them can still be
//! reading the node it unlinked (the tables' stand-in for RCU's `synchronize_rcu`).
//!
//! A lookup enters a *session*: it claims a free slot by moving its counter from even to odd,
//! then walks chains without their locks, takes a reference to the node it found, and leaves by
//! moving the counter on to the next even value. A remove unlinks its node under the chain's
//! lock, then scans the slots and waits for every slot that was odd to move on. Both sides put a
//! `SeqCst` fence between their two halves (the reader's claim and its walk; the remover's
//! unlink and its scan), so in the fences' single order either the reader's comes first, and
//! the remover's scan sees its odd counter (or a later value) and waits for the session to end,
//! or the remover's comes first, and the reader's walk sees the unlink and cannot reach the
//! node. A session that starts after the scan cannot reach the node either. Only then does the
//! chain's reference to the node go to the caller, whose last `Entry` may free it; until then
//! the reference keeps every node a session can reach alive, so the session's reference count
//! increment never meets a freed node.
//!
//! Readers never wait for anyone: if every slot is taken, the lookup takes the chain's lock
//! instead (a lock holder sees no unlinked node). Each slot is alone on its cache line and a
//! thread tries a slot of its own first, so lookups on different CPUs write no shared line.

#[cfg(not(loom))]
use core::ptr;

use crate::sync::{fence, spin_wait, AtomicU64, Ordering};
#[cfg(not(loom))]
use crate::util::hash::mix;

/// One counter: odd while a session holds it.
#[repr(align(64))]
struct Slot(AtomicU64);

#[cfg(not(loom))]
crate::sync::thread_local! {
    /// Its address tells threads apart, to spread their first choice of slot.
    static THREAD_KEY: u8 = const { 0 };
}

/// Claims `slot` from its even `value`, ordered before the walk that follows by a `SeqCst`
/// fence: the reader's half of the pattern in the module docs.
#[inline(always)]
fn claim(slot: &AtomicU64, value: u64) -> bool {
    // On x86-64 a locked compare-exchange is itself a full barrier, and a `SeqCst` fence would
    // add an `mfence` (about as much again as the rest of a lookup); the compiler fence keeps
    // the compiler from moving the walk above it. crossbeam-epoch pins the same way. Loom and
    // Miri model the fence, so they check the portable form.
    #[cfg(all(target_arch = "x86_64", not(any(loom, miri))))]
    {
        let claimed = slot
            .compare_exchange(value, value + 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok();
        core::sync::atomic::compiler_fence(Ordering::SeqCst);
        claimed
    }
    #[cfg(not(all(target_arch = "x86_64", not(any(loom, miri)))))]
    {
        // Relaxed: the fence orders the claim before the walk.
        let claimed = slot
            .compare_exchange(value, value + 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        if claimed {
            fence(Ordering::SeqCst);
        }
        claimed
    }
}

/// The table's reader slots.
pub(crate) struct Readers {
    slots: Box<[Slot]>,
}

/// A lookup's session: while it lives, no node the lookup can reach is freed.
pub(crate) struct Session<'a> {
    slot: &'a AtomicU64,
    /// The slot's (odd) counter during the session.
    value: u64,
}

impl Drop for Session<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release pairs with the Acquire loads in `wait`: the session's reads of nodes happen
        // before the remover hands their references on (and a last `Entry` frees them).
        self.slot.store(self.value + 1, Ordering::Release);
    }
}

impl Readers {
    /// Slots for this machine: two per CPU, at least 4 and at most 64 (a power of two).
    pub(crate) fn for_this_machine() -> Self {
        #[cfg(not(loom))]
        let slots = (2 * std::thread::available_parallelism().map_or(1, |n| n.get()))
            .next_power_of_two()
            .clamp(4, 64);
        #[cfg(loom)]
        let slots = 2;
        Readers {
            slots: (0..slots).map(|_| Slot(AtomicU64::new(0))).collect(),
        }
    }

    /// Starts a session on a free slot, or `None` if every slot is taken.
    #[inline]
    pub(crate) fn enter(&self) -> Option<Session<'_>> {
        let start = Self::first_choice();
        let len = self.slots.len();
        for offset in 0..len {
            let slot = &self.slots[(start + offset) & (len - 1)].0;
            let value = slot.load(Ordering::Relaxed);
            if value % 2 == 1 {
                continue;
            }
            if claim(slot, value) {
                return Some(Session {
                    slot,
                    value: value + 1,
                });
            }
        }
        None
    }

    /// Waits until every session that might have reached a node unlinked before this call has
    /// ended. The caller holds no chain lock (sessions never wait for one, but a lookup that
    /// found no free slot does).
    pub(crate) fn wait(&self) {
        // SeqCst: the remover's half of the pattern in the module docs.
        fence(Ordering::SeqCst);
        for Slot(slot) in self.slots.iter() {
            // Acquire pairs with the Release in `Session::drop`.
            let seen = slot.load(Ordering::Acquire);
            if seen % 2 == 1 {
                while slot.load(Ordering::Acquire) == seen {
                    spin_wait();
                }
            }
        }
    }

    /// Bytes of the slots.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.slots.len() * core::mem::size_of::<Slot>()
    }

    /// The slot a thread tries first: spread by the address of a thread-local.
    #[cfg(not(loom))]
    #[inline]
    fn first_choice() -> usize {
        let key = THREAD_KEY.with(|key| ptr::from_ref(key).addr());
        mix(key as u64, 0) as usize
    }

    /// Under loom, always the first slot: a thread-local's address differs between the
    /// executions loom replays, and a model must make the same choices in each.
    #[cfg(loom)]
    fn first_choice() -> usize {
        0
    }
}
