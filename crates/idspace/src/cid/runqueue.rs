//! CPUs as every CID design sees them: a runqueue per CPU (its current task and CID word, behind
//! a spin lock, as the kernel's `rq->lock` is), which also guards the words of its tasks (see
//! `task`), and the checks every switch makes.
//!
//! # The switch's common path
//!
//! A switch on a CPU of a task of that CPU's runqueue takes the CPU's lock, reads the task's
//! word (its runqueue, and whether it exited: one compare, the migration and the refusal out of
//! line) and points the runqueue at it: the runqueue's current task is what says who runs, so
//! neither the next nor the previous task's word is written. No task lock, no reference count,
//! and the runqueue is on a cache line of its own. The lock is one compare-and-swap and a
//! Release store, or, for the thread the runqueue is biased to, no atomic read-modify-write.
//!
//! # Biased locking
//!
//! The kernel's CID code runs under the `rq->lock` its scheduler holds anyway; ours would pay
//! a compare-and-swap of its own per switch. But a runqueue is locked almost only by the one
//! thread that switches on its CPU, so the lock is biased to that thread (the scheduler binds
//! it: [`bind_current_thread`](super::bind_current_thread)), as asymmetric locks are:
//!
//! * **The bias holder** enters by storing `owner_in`, a compiler fence, and a load of `bias`
//!   that must still name it; it leaves by a Release store clearing `owner_in`.
//! * **Every other locker** takes the lock word (`locked`), then, if the runqueue is biased,
//!   revokes the bias: it clears `bias`, calls `membarrier(2)`, which makes every running thread
//!   of the process pass a full barrier, and waits (Acquire) until `owner_in` is clear. A bias
//!   holder whose entry sees the bias gone takes the lock word like everyone else.
//! * **Why that excludes.** Each side stores, then loads what the other stores. The barrier
//!   falls on the holder's side either before its load (which then sees the bias cleared) or
//!   after its store (which the revoker's load then sees, so it waits for the section's end).
//!   Only a holder of `locked` changes `bias`, so a revoked bias stays revoked until the holder
//!   earns it back through the lock word, which orders it after the revoker's section.
//! * **Earning it.** The bound thread earns the bias after taking the lock word
//!   [`LOCKS_BEFORE_BIAS`] times in a row with no other locker between, so that a runqueue
//!   that other threads keep locking (a CPU whose tasks are often stolen) stays unbiased and
//!   they pay no barrier each. Every revocation doubles the run the next bias needs, up to
//!   [`MAX_LOCKS_BEFORE_BIAS`]: where other lockers come rarely but steadily (an HTTP
//!   service whose connections migrate between workers now and then), a run of 64 is always
//!   reached between them, and each bias earned would cost its revoker a barrier, an
//!   interrupt of every CPU running the process. The doubling bounds the barriers to one per
//!   [`MAX_LOCKS_BEFORE_BIAS`] locks of the bound thread, and a runqueue that nobody else
//!   locks keeps its bias for good.
//!
//! A bias is a hint: with no bound thread, two threads bound to one CPU, or without
//! `membarrier` (Miri, old kernels, seccomp) or `std`, the lock is the lock word alone. A loom
//! model below checks the protocol, with a fence on each side standing for the barrier and
//! the compiler fence; it fails with either fence removed.
//!
//! # Lock order, and who may wait under a runqueue lock
//!
//! Two runqueues are held together only by a migration (a task switched in on another CPU than
//! its runqueue's), which takes them in CPU order. Then anything a design has (its CID lock).
//! A runqueue's holder never waits for a thread that may hold another lock: the rework's
//! switch-in that finds no free CID gives its lock back before it waits, and the bitmap's waits
//! only for a switch-out elsewhere (at most one CID per busy CPU is taken). So a mode change's
//! walk, which holds the space's fork/exit lock, may wait for runqueue locks. In the kernel, a
//! fixup's `task_rq_lock` could wait on a CPU whose switch-in spun for a CID only the fixup
//! would free (the live lock fixed after merge by 4327fb13); here that wait cannot arise.

use crate::prelude::*;
use core::ptr;

use crossbeam_utils::CachePadded;

use super::task::{Task, TaskInner, Word};
use super::{bias, CidError, UNSET};
use crate::sync::{
    asymmetric, cpu_relax, spin_wait, Arc, AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering,
};

/// Spins of a contended lock before it starts yielding the thread (the holder may be preempted:
/// a user-space "CPU" is a thread).
const SPINS_BEFORE_YIELD: u32 = 64;

/// Locks in a row by the CPU's bound thread, with no other locker between them, before the
/// runqueue is biased to it: a runqueue that other threads keep locking (a CPU whose tasks are
/// often stolen) stays unbiased, so that they do not pay a revocation each.
#[cfg(not(loom))]
const LOCKS_BEFORE_BIAS: u32 = 64;
#[cfg(loom)]
const LOCKS_BEFORE_BIAS: u32 = 2;

/// The longest run [`LOCKS_BEFORE_BIAS`] grows to, doubling at each revocation: about 65
/// thousand switches, tens of milliseconds of a busy scheduler, per barrier at most.
#[cfg(not(loom))]
const MAX_LOCKS_BEFORE_BIAS: u32 = LOCKS_BEFORE_BIAS << 10;
#[cfg(loom)]
const MAX_LOCKS_BEFORE_BIAS: u32 = LOCKS_BEFORE_BIAS;

/// A CPU's runqueue, as far as CIDs go. The fields are atomics only so that the lock needs no
/// cell: every access is under the lock, but for one: a design whose switch-out does nothing
/// but leave the CPU ([`Rqs::vacate`]) clears `curr` without the lock.
pub(crate) struct Rq {
    locked: AtomicBool,
    /// The token of the thread the lock is biased to (see the module docs), or 0. Changed only
    /// by a holder of `locked`.
    bias: AtomicUsize,
    /// Set by the bias holder while it holds the lock by the fast path.
    owner_in: AtomicBool,
    /// The bound thread's locks in a row through `locked` (see [`LOCKS_BEFORE_BIAS`]); under
    /// `locked`.
    streak: AtomicU32,
    /// The run `streak` must reach to earn the bias: [`LOCKS_BEFORE_BIAS`], doubled by every
    /// revocation up to [`MAX_LOCKS_BEFORE_BIAS`]; under `locked`.
    needed: AtomicU32,
    /// The current task, or null (see [`RqGuard::curr`] for why the pointer is valid).
    curr: AtomicPtr<TaskInner>,
    /// The CPU's CID word (`mm_cid_pcpu::cid`); the designs that keep it here use it.
    cid: AtomicU32,
}

/// The runqueues, each on its own cache line.
pub(crate) struct Rqs(Box<[CachePadded<Rq>]>);

impl Rqs {
    pub(crate) fn new(cpus: usize) -> Rqs {
        Rqs((0..cpus)
            .map(|_| {
                CachePadded::new(Rq {
                    locked: AtomicBool::new(false),
                    bias: AtomicUsize::new(0),
                    owner_in: AtomicBool::new(false),
                    streak: AtomicU32::new(0),
                    needed: AtomicU32::new(LOCKS_BEFORE_BIAS),
                    curr: AtomicPtr::new(ptr::null_mut()),
                    cid: AtomicU32::new(UNSET),
                })
            })
            .collect())
    }

    /// Locks `cpu`'s runqueue.
    // Inlined, with the wait out of line: the switch's common path is one compare-and-swap,
    // or for the thread the runqueue is biased to, a store and two loads.
    #[inline]
    pub(crate) fn lock(&self, cpu: usize) -> RqGuard<'_> {
        let rq = &*self.0[cpu];
        // Relaxed: only a hint; the load after the barrier below decides. An unbiased runqueue
        // (every one a thread bound to no CPU locks) does not read the thread's token.
        let biased = rq.bias.load(Ordering::Relaxed);
        if biased != 0 && biased == bias::token() {
            let token = biased;
            rq.owner_in.store(true, Ordering::Relaxed);
            // With a revoker's barrier (see the module docs): either the load below sees its
            // revocation, or the revoker sees `owner_in` set and waits for our unlock.
            asymmetric::light();
            // Relaxed: a revoker's store is only ever seen to stop us, never to read its
            // writes (it waits for our section, or we take `locked`, which orders them). What
            // earlier holders wrote reached us through the `locked` hand-over that gave us the
            // bias, or is our own.
            if rq.bias.load(Ordering::Relaxed) == token {
                return RqGuard { rq, biased: true };
            }
            // Release pairs with the revoker's Acquire wait: our aborted entry wrote nothing.
            rq.owner_in.store(false, Ordering::Release);
        }
        match self.try_lock(cpu) {
            Some(guard) => guard,
            None => self.lock_contended(cpu),
        }
    }

    /// [`Rqs::lock`] once the first try failed: spin, then yield, until the lock is ours.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self, cpu: usize) -> RqGuard<'_> {
        let mut spins = 0;
        loop {
            if let Some(guard) = self.try_lock(cpu) {
                return guard;
            }
            // Relaxed: only a hint that the lock looks free; the compare-and-swap decides.
            while self.0[cpu].locked.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    cpu_relax();
                } else {
                    spin_wait();
                }
            }
        }
    }

    /// The CPU's current task leaves it, and nothing else changes: a switch-out without the
    /// lock, for a design whose switch-out writes nothing else (the rework's). One store
    /// instead of a compare-and-swap and a store.
    ///
    /// Why no lock is needed: `curr` is the only thing written, and a holder of the lock reads
    /// it once per decision, so the store lands either before that read (the holder sees an
    /// idle CPU: the task had left) or after it (the holder sees the task still there: the
    /// task left just after). Either order is one a locked switch-out could have taken. A
    /// switch-in on this CPU replaces `curr` whatever it holds, so a store racing it is ordered
    /// before or after it just the same.
    #[inline]
    pub(crate) fn vacate(&self, cpu: usize) {
        // Release pairs with the Acquire load in `RqGuard::curr`: whoever sees the CPU idle
        // (a walk or an exit that then drops or hands on the CID the task ran with) also sees
        // everything the task did while it ran with that CID.
        self.0[cpu].curr.store(ptr::null_mut(), Ordering::Release);
    }

    /// Locks `cpu`'s runqueue through its lock word unless another thread holds it; revokes the
    /// bias, or earns it, on the way.
    #[inline]
    fn try_lock(&self, cpu: usize) -> Option<RqGuard<'_>> {
        let rq = &*self.0[cpu];
        // Acquire pairs with the Release store that unlocks (`RqGuard::drop`): the holder sees
        // everything the previous holder did.
        rq.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // Relaxed: `bias` changes only under `locked`, which we hold.
        let bias = rq.bias.load(Ordering::Relaxed);
        if bias == 0 {
            earn_bias(rq, cpu);
        } else if bias != bias::token() {
            revoke_bias(rq);
        }
        Some(RqGuard { rq, biased: false })
    }
}

/// Counts a lock of `rq` (held through `locked`, unbiased) towards biasing it to the calling
/// thread, if that thread is bound to `cpu`; a lock by any other thread resets the count.
#[inline]
fn earn_bias(rq: &Rq, cpu: usize) {
    // Relaxed: under `locked`.
    let Some(token) = bias::bound_token(cpu) else {
        if rq.streak.load(Ordering::Relaxed) != 0 {
            rq.streak.store(0, Ordering::Relaxed);
        }
        return;
    };
    let streak = rq.streak.load(Ordering::Relaxed) + 1;
    if streak < rq.needed.load(Ordering::Relaxed) {
        rq.streak.store(streak, Ordering::Relaxed);
        return;
    }
    rq.streak.store(0, Ordering::Relaxed);
    // Relaxed: published to other lockers by our unlock of `locked`; we read it ourselves.
    rq.bias.store(token, Ordering::Relaxed);
}

/// Takes the bias away from the thread `rq` (held through `locked`) is biased to, and waits
/// until that thread is out of any section it entered by the fast path.
#[cold]
#[inline(never)]
fn revoke_bias(rq: &Rq) {
    // Relaxed: the barrier orders it before our load of `owner_in`, and before the holder's
    // recheck of the bias in any fast entry that we do not see.
    rq.bias.store(0, Ordering::Relaxed);
    rq.streak.store(0, Ordering::Relaxed);
    let needed = rq.needed.load(Ordering::Relaxed);
    rq.needed
        .store((needed * 2).min(MAX_LOCKS_BEFORE_BIAS), Ordering::Relaxed);
    bias::barrier();
    let mut spins = 0;
    // Acquire pairs with the Release store that ends the holder's fast section (or aborts its
    // entry): we see everything it did inside.
    while rq.owner_in.load(Ordering::Acquire) {
        if spins < SPINS_BEFORE_YIELD {
            spins += 1;
            cpu_relax();
        } else {
            spin_wait();
        }
    }
}

/// A held runqueue lock: through the lock word, or (`biased`) by the bias holder's fast path.
pub(crate) struct RqGuard<'a> {
    rq: &'a Rq,
    biased: bool,
}

impl RqGuard<'_> {
    /// The current task.
    #[inline]
    pub(crate) fn curr(&self) -> Option<&TaskInner> {
        // Acquire pairs with the Release store in `Rqs::vacate`, the one write of `curr` made
        // without the lock (the locked writes are ordered by the lock itself).
        let curr = self.rq.curr.load(Ordering::Acquire);
        // SAFETY: a non-null `curr` was stored by `set_curr` from a live task of this
        // runqueue's space, which the space's roster keeps alive until its exit; exit clears
        // `curr` under this lock before the task leaves the roster, and the space (which owns
        // the roster) outlives this guard. So the pointer is valid for the guard's lifetime.
        unsafe { curr.as_ref() }
    }

    #[inline]
    pub(crate) fn set_curr(&self, task: Option<&Task>) {
        let curr = task.map_or(ptr::null_mut(), |task| Arc::as_ptr(&task.0).cast_mut());
        // Relaxed: under the lock.
        self.rq.curr.store(curr, Ordering::Relaxed);
    }

    /// The CPU's CID word.
    #[inline]
    pub(crate) fn cid(&self) -> u32 {
        // Relaxed: under the lock.
        self.rq.cid.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_cid(&self, cid: u32) {
        // Relaxed: under the lock.
        self.rq.cid.store(cid, Ordering::Relaxed);
    }
}

impl Drop for RqGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.biased {
            // Release pairs with the revoker's Acquire wait in `revoke_bias`.
            self.rq.owner_in.store(false, Ordering::Release);
        } else {
            // Release pairs with the Acquire compare-and-swap in `Rqs::try_lock`.
            self.rq.locked.store(false, Ordering::Release);
        }
    }
}

/// What a switch finds before any CID work, with the CPU's runqueue (and so `next`'s word)
/// locked: `next` is claimed for the CPU once the caller makes it the current task, which no
/// other CPU can do meanwhile (it would need this lock).
pub(crate) enum Claim {
    /// `next` already runs on this CPU: nothing to do. Its CID word.
    AlreadyHere(u32),
    /// `next` (if any) is claimed for this CPU; its CID word (`UNSET` without `next`).
    Claimed(u32),
}

impl Rqs {
    /// Locks the runqueue that guards `task`'s word (`task_rq_lock`): looks it up, locks it,
    /// and checks the task did not move meanwhile. Returns the guard and the word.
    pub(crate) fn lock_task(&self, task: &TaskInner) -> (RqGuard<'_>, Word) {
        loop {
            let rq = task.word().rq();
            let guard = self.lock(rq);
            let word = task.word();
            if word.rq() == rq {
                return (guard, word);
            }
        }
    }

    /// Locks `cpu`'s runqueue for a switch to `next`, and checks `next` for it (the caller
    /// makes it the runqueue's current task). A task of another runqueue first migrates here.
    // Always inlined: returned from a call, the guard and claim went through memory, and the
    // switch's measured cost rose by half (a store-forwarding stall behind the lock's
    // compare-and-swap).
    #[inline(always)]
    pub(crate) fn lock_switch(
        &self,
        cpu: usize,
        next: Option<&Task>,
    ) -> Result<(RqGuard<'_>, Claim), CidError> {
        let Some(next) = next else {
            return Ok((self.lock(cpu), Claim::Claimed(UNSET)));
        };
        let task = &*next.0;
        loop {
            let guard = self.lock(cpu);
            let word = task.word();
            if !word.live_on(cpu) {
                // Another runqueue's task (it migrates here first), or one that exited.
                drop(guard);
                self.not_live_here(cpu, task, word)?;
                continue;
            }
            // A task of this runqueue: the lock held covers its word.
            let allowed = task.affinity() & (1 << cpu) != 0;
            if !allowed {
                return Err(CidError::NotAllowed);
            }
            if is_curr(&guard, task) {
                // Running here: nothing to switch.
                return Ok((guard, Claim::AlreadyHere(word.cid())));
            }
            return Ok((guard, Claim::Claimed(word.cid())));
        }
    }

    /// [`Rqs::lock_switch`] found `task` (word `word`) not live on `cpu`'s runqueue: migrates it
    /// here if it is another's, or refuses it if it exited. The lock is not held.
    #[cold]
    fn not_live_here(&self, cpu: usize, task: &TaskInner, word: Word) -> Result<(), CidError> {
        if word.rq() != cpu {
            return self.migrate(cpu, task);
        }
        // Exited: that is final (the word read under the lock stays true without it), and an
        // exited task is never current (exit clears `curr` under the lock), so no switch-in
        // of it is already done here.
        Err(CidError::UnknownTask)
    }

    /// Moves `task`, which is not running, to `cpu`'s runqueue, with both runqueues locked
    /// (in CPU order). The errors are the switch's.
    #[cold]
    fn migrate(&self, cpu: usize, task: &TaskInner) -> Result<(), CidError> {
        loop {
            let home = task.word().rq();
            if home == cpu {
                return Ok(()); // another CPU moved it here meanwhile
            }
            let (_guard, home_guard) = if cpu < home {
                let guard = self.lock(cpu);
                (guard, self.lock(home))
            } else {
                let home_guard = self.lock(home);
                (self.lock(cpu), home_guard)
            };
            let word = task.word();
            if word.rq() != home {
                continue; // it moved between the look and the locks
            }
            if word.exited() {
                return Err(CidError::UnknownTask);
            }
            if is_curr(&home_guard, task) {
                return Err(CidError::RunningElsewhere);
            }
            if task.affinity() & (1 << cpu) == 0 {
                return Err(CidError::NotAllowed);
            }
            // Both locks held: the task moves to this runqueue.
            task.store_locked(word.moved_to(cpu));
            return Ok(());
        }
    }
}

/// Whether `task` is the current task of the runqueue `rq` (held).
#[inline]
pub(crate) fn is_curr(rq: &RqGuard<'_>, task: &TaskInner) -> bool {
    rq.curr().is_some_and(|curr| ptr::eq(curr, task))
}

/// The previous task (if any) leaves the CPU, its CID word replaced by what `switch_out` makes
/// of it (a design that takes CIDs back at switch-out does it there, before another CPU can
/// claim the task); true if there was one. A design whose switch-out does nothing skips it.
#[inline]
pub(crate) fn switch_out(rq: &RqGuard<'_>, switch_out: impl FnOnce(u32) -> u32) -> bool {
    let Some(prev) = rq.curr() else {
        return false;
    };
    // A task running here: its word is this runqueue's.
    let word = prev.word();
    let cid = switch_out(word.cid());
    if cid != word.cid() {
        prev.store_locked(word.with_cid(cid));
    }
    true
}

/// `next` becomes the CPU's current task (the previous one, if any, leaves it).
#[inline]
pub(crate) fn leave(rq: &RqGuard<'_>, next: Option<&Task>) {
    rq.set_curr(next);
}

/// Exit's common part: marks `task` exited and takes it off its CPU if it runs (the CPU becomes
/// idle), under its runqueue's lock, then runs `off` with its last CID word and the CPU it ran
/// on, if it ran (the lock still held: a design gives the task's CID back there).
///
/// # Errors
/// [`CidError::UnknownTask`] if the task already exited (also when two exits race).
pub(crate) fn exit_task(
    rqs: &Rqs,
    task: &Task,
    off: impl FnOnce(u32, Option<usize>),
) -> Result<(), CidError> {
    let task = &*task.0;
    let (rq, word) = rqs.lock_task(task);
    if word.exited() {
        return Err(CidError::UnknownTask);
    }
    let running = is_curr(&rq, task);
    if running {
        rq.set_curr(None);
    }
    task.store_locked(word.exited_now());
    off(word.cid(), running.then_some(word.rq()));
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{bias, Rqs, LOCKS_BEFORE_BIAS, MAX_LOCKS_BEFORE_BIAS};
    use crate::cid::bind_current_thread;
    use crate::sync::Ordering;

    fn bias_of(rqs: &Rqs, cpu: usize) -> usize {
        rqs.0[cpu].bias.load(Ordering::Relaxed)
    }

    /// The bound thread earns the bias after its run of locks (where `membarrier` works), keeps
    /// it while it alone locks, and loses it to a lock from another thread; an unbound thread
    /// never earns one.
    #[test]
    fn the_bound_thread_earns_the_bias_and_another_locker_revokes_it() {
        let rqs = Rqs::new(2);
        for _ in 0..2 * LOCKS_BEFORE_BIAS {
            drop(rqs.lock(1));
        }
        assert_eq!(bias_of(&rqs, 1), 0, "an unbound thread earned a bias");
        bind_current_thread(Some(1));
        let token = bias::bound_token(1);
        for _ in 0..LOCKS_BEFORE_BIAS {
            drop(rqs.lock(1));
            drop(rqs.lock(0)); // another CPU's runqueue: no bias earned there
        }
        assert_eq!(
            bias_of(&rqs, 0),
            0,
            "a bias on a CPU the thread is not bound to"
        );
        let Some(token) = token else {
            // No `membarrier` (Miri, an old kernel, seccomp): nothing is ever biased.
            assert_eq!(bias_of(&rqs, 1), 0);
            bind_current_thread(None);
            return;
        };
        assert_eq!(bias_of(&rqs, 1), token, "no bias after a run of locks");
        {
            let held = rqs.lock(1);
            assert!(held.biased, "the bias holder took the lock word");
        }
        std::thread::scope(|scope| {
            scope.spawn(|| drop(rqs.lock(1)));
        });
        assert_eq!(bias_of(&rqs, 1), 0, "another locker left the bias in place");
        assert!(!rqs.lock(1).biased, "the fast path after a revocation");
        // The revocation doubled the run the next bias needs (one lock of it is taken above).
        for _ in 1..LOCKS_BEFORE_BIAS {
            drop(rqs.lock(1));
        }
        assert_eq!(bias_of(&rqs, 1), 0, "a bias after a run of the old length");
        for _ in 0..LOCKS_BEFORE_BIAS {
            drop(rqs.lock(1));
        }
        assert_eq!(
            bias_of(&rqs, 1),
            token,
            "no bias after a run of twice the length"
        );
        bind_current_thread(None);
    }

    /// However often a bias is revoked, the run that earns it back stays bounded.
    #[test]
    fn revocations_lengthen_the_run_to_a_bound() {
        let rqs = Rqs::new(1);
        for _ in 0..20 {
            rqs.0[0].bias.store(1, Ordering::Relaxed); // a bias to some other thread
            drop(rqs.lock(0)); // revoked by this one
        }
        assert_eq!(
            rqs.0[0].needed.load(Ordering::Relaxed),
            MAX_LOCKS_BEFORE_BIAS
        );
    }
}

#[cfg(all(test, loom))]
mod model {
    use super::{Rqs, LOCKS_BEFORE_BIAS};
    use crate::cid::bind_current_thread;
    use crate::sync::{thread, Arc, UnsafeCell};

    /// A count only lock holders touch: loom reports two holders at once, or a holder that does
    /// not see the previous one's write, as a race on the cell.
    struct Count(UnsafeCell<u32>);

    // SAFETY: the cell is accessed only under a runqueue lock (what the model checks).
    unsafe impl Sync for Count {}

    impl Count {
        fn bump(&self) {
            // SAFETY: under the lock (checked by loom).
            self.0.with_mut(|count| unsafe { *count += 1 });
        }

        fn get(&self) -> u32 {
            // SAFETY: both threads are joined.
            self.0.with(|count| unsafe { *count })
        }
    }

    /// A thread bound to the CPU locks its runqueue often enough to earn the bias, then by the
    /// fast path, while another thread locks it through the lock word, revoking the bias at
    /// whatever point it comes: the sections exclude each other and each sees the other's
    /// writes. Fails with the bias holder's barrier removed.
    #[test]
    fn the_bias_holder_and_a_revoker_exclude_each_other() {
        loom::model(|| {
            let rqs = Arc::new(Rqs::new(1));
            let count = Arc::new(Count(UnsafeCell::new(0)));
            let rounds = LOCKS_BEFORE_BIAS + 2;
            let owner = {
                let (rqs, count) = (Arc::clone(&rqs), Arc::clone(&count));
                thread::spawn(move || {
                    bind_current_thread(Some(0));
                    for _ in 0..rounds {
                        let _held = rqs.lock(0);
                        count.bump();
                    }
                    bind_current_thread(None);
                })
            };
            {
                let _held = rqs.lock(0);
                count.bump();
            }
            owner.join().unwrap();
            assert_eq!(count.get(), rounds + 1);
        });
    }
}
