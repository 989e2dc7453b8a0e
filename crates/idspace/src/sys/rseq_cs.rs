//! Restartable sequences: short instruction sequences that run on one CPU (or with one
//! concurrency ID) as if nothing else could, without locks or atomic instructions.
//!
//! # The contract
//!
//! A critical section is a range of instructions `[start_ip, start_ip + post_commit_offset)`
//! described by a `struct rseq_cs` descriptor (`version` 0, `flags` 0, `start_ip`,
//! `post_commit_offset`, `abort_ip`), which lives in the `__rseq_cs` section of the binary.
//! Before entering, the thread stores the descriptor's address into the `rseq_cs` field of its
//! registered area (the one field of the area that user space writes). From then on, if the
//! kernel **preempts** the thread, **migrates** it to another CPU, or **delivers a signal** to
//! it while its instruction pointer is inside the range, it does not resume it there: it moves
//! the instruction pointer to `abort_ip` before the thread runs user code again, and clears
//! `rseq_cs`. The kernel checks that the 4 bytes just before `abort_ip` hold the signature the
//! area was registered with ([`SIGNATURE`](super::rseq::SIGNATURE)), and kills the thread if
//! not, so that an attacker who controls `rseq_cs` cannot jump anywhere.
//!
//! Hence what may sit between start and commit: only code that can be thrown away at any
//! instruction and run again. Loads, compares, branches (also out of the section, to give up),
//! and stores that nobody reads until the commit (an item written into an unused array cell
//! above a length): an abort leaves them behind as if never made. No system calls, no calls
//! out, no stack frames the abort handler would have to unwind.
//!
//! And why the commit is one instruction, the last of the range: the section's effect must
//! become visible all at once, or not at all. Before the commit store an abort undoes
//! everything (the thread restarts and nothing it wrote matters); the store itself is a single
//! instruction, which the kernel cannot interrupt in its middle; after it the instruction
//! pointer is at `start_ip + post_commit_offset`, outside the range, so a preemption there no
//! longer aborts. Two stores would leave a window between them where an abort undoes half.
//!
//! The thread checks its index inside the section: the index (CPU or mm_cid) read before the
//! section is compared with the area's field after `rseq_cs` is armed. If the thread moved in
//! between, the kernel updated the field on its way back to user space and the compare fails;
//! if it moves after the compare, the section aborts. Indexing by mm_cid compares mm_cid: the
//! mm_cid of a thread can change while it stays on one CPU (librseq issue #11), so a CPU check
//! would not protect a slot indexed by mm_cid.
//!
//! One slot is then only ever changed by one thread at a time, by plain loads and stores, and
//! the commit is an ordinary aligned store of a whole word, so other threads that read the
//! word with atomic loads see either the old or the new value.
//!
//! # List header
//!
//! The array-list sections (push and pop) take one pointer, to three words: the length at
//! offset 0 (the word the commit stores), the capacity at 8 and the address of the cells at 16
//! (`percid::list::List` is laid out so, and asserts it). The section loads the capacity and
//! the cells' address itself, so that it needs two fewer registers than with three operands.
//!
//! # Results
//!
//! Every operation returns an [`Outcome`]: committed, aborted by the kernel (counted in
//! [`aborts`], the proof in tests that the abort path runs), moved (the index changed before
//! the section began), or refused (a compare inside the section failed: the list is full or
//! empty). Callers retry after an abort or a move with the index read again.
//!
//! Only x86-64 and AArch64 have sections; elsewhere, and under Miri and loom, this module does
//! not exist and callers use their fallback.

// A static (the abort count): loom's atomics cannot be created in one.
use crate::sync::unmodeled::AtomicU64;
use crate::sync::Ordering;

use super::rseq::{Area, Field, RSEQ_CS_OFFSET};

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "aarch64")]
use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
use x86_64 as arch;

/// The codes the assembly leaves in its status register.
const COMMITTED: u32 = 0;
const ABORTED: u32 = 1;
const MOVED: u32 = 2;
const REFUSED: u32 = 3;

/// Sections the kernel aborted, process-wide, since start.
static ABORTS: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// Sections the kernel aborted on this thread.
    static THREAD_ABORTS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// How many critical sections the kernel has aborted in this process (preemption, migration or
/// a signal inside a section). Only the abort path counts, so a non-zero count proves that it
/// ran.
pub(crate) fn aborts() -> u64 {
    ABORTS.load(Ordering::Relaxed)
}

/// How many critical sections the kernel has aborted on the calling thread.
pub(crate) fn thread_aborts() -> u64 {
    THREAD_ABORTS.with(core::cell::Cell::get)
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ: libc::c_long = 1 << 7;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ: libc::c_long = 1 << 8;

/// Whether this process registered for [`restart_all`]; decided once.
static RESTART_REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Aborts every critical section that threads of this process are running now, on every CPU:
/// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)` (Linux 5.10), which interrupts the CPUs
/// that run threads of the process and restarts their sections as a preemption would. A thread
/// that is not running has had its section aborted already, when it was preempted. So when
/// this returns, every section that began before the call has either committed (and its commit
/// is visible to the caller: the interrupt is a full barrier on its CPU) or will restart from
/// its first instruction, where it loads afresh what it checks.
///
/// False, having done nothing, where the kernel has no such command (older kernels, valgrind,
/// seccomp filters). Registration, once per process, is made on the first call.
pub(crate) fn restart_all() -> bool {
    let registered = *RESTART_REGISTERED.get_or_init(|| {
        // SAFETY: membarrier takes two integers (and a third, the CPU, since 5.10: 0 here)
        // and touches no memory of ours.
        let done = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ,
                0,
                0,
            )
        };
        done == 0
    });
    // SAFETY: as above.
    registered
        && unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
                0,
                0,
            )
        } == 0
}

/// How one critical section ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome<T> {
    /// The commit store happened; the value the section produced.
    Committed(T),
    /// The kernel aborted the section; nothing happened.
    Aborted,
    /// The thread's index was not the one expected when the section began; nothing happened.
    Moved,
    /// A compare inside the section failed (a full or empty list); nothing happened.
    Refused,
}

/// A section's status code, undecoded: what a fast path that hands every failure to an
/// out-of-line path keeps, so that nothing but one compare follows the section inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Status(u32);

impl Status {
    /// The status of a section that never began (no area, no slot): not committed, and no
    /// abort to count.
    pub(crate) const NOT_STARTED: Status = Status(MOVED);

    /// Whether the commit store happened.
    #[inline(always)]
    pub(crate) fn committed(self) -> bool {
        self.0 == COMMITTED
    }

    /// The outcome this status means, with the value the section produced. A commit, the case
    /// every caller waits for, is told apart with one compare; the rest is decoded out of line,
    /// into a type that cannot say "committed", so that the compiler sees the two paths never
    /// meet again.
    #[inline(always)]
    pub(crate) fn outcome<T>(self, value: T) -> Outcome<T> {
        if self.committed() {
            return Outcome::Committed(value);
        }
        match not_committed(self.0) {
            Failure::Aborted => Outcome::Aborted,
            Failure::Moved => Outcome::Moved,
            Failure::Refused => Outcome::Refused,
        }
    }

    /// Decodes a status that did not commit only for its side effect, counting a kernel abort
    /// (see [`aborts`]), for callers that retry whatever the cause.
    #[inline]
    pub(crate) fn settle(self) {
        if !self.committed() {
            not_committed(self.0);
        }
    }
}

/// The outcome a section's status code means; see [`Status::outcome`].
#[inline(always)]
fn outcome<T>(status: u32, value: T) -> Outcome<T> {
    Status(status).outcome(value)
}

/// How a section that did not commit ended.
enum Failure {
    Aborted,
    Moved,
    Refused,
}

/// The outcome of a section that did not commit.
#[cold]
#[inline(never)]
fn not_committed(status: u32) -> Failure {
    match status {
        ABORTED => {
            // Relaxed: a statistic, read after the threads that counted it are joined.
            ABORTS.fetch_add(1, Ordering::Relaxed);
            // A const-initialised cell without destructor: usable even during thread teardown.
            THREAD_ABORTS.with(|count| count.set(count.get() + 1));
            Failure::Aborted
        }
        MOVED => Failure::Moved,
        _ => {
            debug_assert_eq!(status, REFUSED);
            Failure::Refused
        }
    }
}

impl Area {
    /// Adds `n` to `*word` (wrapping) if the thread's `field` is still `index`: load, add and
    /// one store.
    ///
    /// # Safety
    ///
    /// `word` is valid and 8-byte aligned, and every store to it is made by a section of this
    /// kind indexed by `index` of `field` (so only one thread at a time may store; others may
    /// only load it atomically).
    #[inline]
    pub(crate) unsafe fn add(
        self,
        field: Field,
        index: u32,
        word: *mut u64,
        n: u64,
    ) -> Outcome<()> {
        // SAFETY: the area is this thread's (`Area`'s invariant); the caller vouches for `word`.
        let status = unsafe { arch::add(self.base(), field.offset(), index, word, n) };
        outcome(status, ())
    }

    /// Adds `n` to `*word` (wrapping) if the thread's `field` is still `index` and `*guard`
    /// holds `expected`: the guard's compare sits inside the section, so a thread that changes
    /// the guard and then calls [`restart_all`] knows that no section which saw the old value
    /// is still to commit. Refused when the guard differs.
    ///
    /// # Safety
    ///
    /// As for [`add`](Self::add); `guard` is valid and 4-byte aligned.
    #[inline]
    pub(crate) unsafe fn add_if(
        self,
        field: Field,
        index: u32,
        guard: *const u32,
        expected: u32,
        word: *mut u64,
        n: u64,
    ) -> Outcome<()> {
        // SAFETY: the area is this thread's (`Area`'s invariant); the caller vouches for
        // `word` and `guard`.
        let status =
            unsafe { arch::add_if(self.base(), field.offset(), index, guard, expected, word, n) };
        outcome(status, ())
    }

    /// Pushes `item` onto the array list whose header is at `list` (see "List header" in the
    /// module docs) if the thread's `field` is still `index` and the list is not full: the
    /// item goes into the first free cell, then one store of the new length commits. The
    /// status, undecoded ([`Status::outcome`] decodes it).
    ///
    /// # Safety
    ///
    /// `list` is a valid, aligned list header with `length <= capacity` and `capacity` valid,
    /// aligned words at `items`, and the length and the cells are only ever written by sections
    /// of this kind or [`pop`](Self::pop) indexed by `index` of `field`.
    #[inline(always)]
    pub(crate) unsafe fn push(
        self,
        field: Field,
        index: u32,
        list: *mut usize,
        item: usize,
    ) -> Status {
        // SAFETY: the area is this thread's; the caller vouches for the list.
        let status = unsafe { arch::push(self.base(), field.offset(), index, list, item) };
        Status(status)
    }

    /// Pops the last item of the array list whose header is at `list` if the thread's `field`
    /// is still `index` and the list is not empty: load the length, compare it with zero, load
    /// the item, and one store of the new length commits. The status, undecoded, and the item
    /// (meaningful only if committed).
    ///
    /// # Safety
    ///
    /// As for [`push`](Self::push).
    #[inline(always)]
    pub(crate) unsafe fn pop(self, field: Field, index: u32, list: *mut usize) -> (Status, usize) {
        // SAFETY: the area is this thread's; the caller vouches for the list.
        let (status, item) = unsafe { arch::pop(self.base(), field.offset(), index, list) };
        (Status(status), item)
    }

    /// Stores `new` into `*word` if the thread's `field` is still `index` and `*word` holds
    /// `expected`: load, compare, and one store.
    ///
    /// # Safety
    ///
    /// `word` is valid and aligned, and every store to it is made by a section indexed by
    /// `index` of `field`.
    // The per-CID structures use array lists (push and pop); compare-and-store is the
    // operation for lists of linked nodes and single-word slots, exercised by the tests only.
    #[cfg_attr(not(test), allow(dead_code))]
    #[inline]
    pub(crate) unsafe fn compare_store(
        self,
        field: Field,
        index: u32,
        word: *mut usize,
        expected: usize,
        new: usize,
    ) -> Outcome<()> {
        // SAFETY: the area is this thread's; the caller vouches for `word`.
        let status =
            unsafe { arch::compare_store(self.base(), field.offset(), index, word, expected, new) };
        outcome(status, ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `section` until it does not abort or move, reading the index afresh each time.
    fn retry<T>(
        area: Area,
        field: Field,
        mut section: impl FnMut(u32) -> Outcome<T>,
    ) -> Outcome<T> {
        loop {
            match section(area.index(field)) {
                Outcome::Aborted | Outcome::Moved => continue,
                done => return done,
            }
        }
    }

    fn area() -> Option<Area> {
        let area = Area::registered().map(|(area, _)| area);
        if area.is_none() {
            eprintln!("skipped: this thread has no rseq area");
        }
        area
    }

    /// Each operation commits what it says, refuses what it must, and leaves the word alone
    /// when told the wrong index; for both fields.
    #[test]
    fn each_operation_commits_refuses_and_checks_the_index() {
        let Some(area) = area() else { return };
        for field in [Field::CpuId, Field::MmCid] {
            let mut word = 5u64;
            // SAFETY: a local word only this thread touches.
            let done = retry(area, field, |i| unsafe { area.add(field, i, &mut word, 7) });
            assert_eq!((done, word), (Outcome::Committed(()), 12));
            let wrong = area.index(field).wrapping_add(1);
            // SAFETY: as above.
            let moved = unsafe { area.add(field, wrong, &mut word, 7) };
            assert_eq!((moved, word), (Outcome::Moved, 12), "{field:?}");

            let mut items = [0usize; 2];
            // A list header: length, capacity, the cells' address.
            let mut list = [0usize, 2, items.as_mut_ptr() as usize];
            let list_ptr = list.as_mut_ptr();
            for item in [10, 20] {
                // SAFETY: a local list of capacity 2 only this thread touches.
                let done = retry(area, field, |i| unsafe {
                    area.push(field, i, list_ptr, item).outcome(())
                });
                assert_eq!(done, Outcome::Committed(()));
            }
            // SAFETY: as above.
            let full = retry(area, field, |i| unsafe {
                area.push(field, i, list_ptr, 30).outcome(())
            });
            assert_eq!((full, list[0]), (Outcome::Refused, 2));
            let pop = |i| {
                // SAFETY: as above.
                let (status, item) = unsafe { area.pop(field, i, list_ptr) };
                status.outcome(item)
            };
            let popped = retry(area, field, pop);
            assert_eq!((popped, list[0]), (Outcome::Committed(20), 1));
            let popped = retry(area, field, pop);
            assert_eq!((popped, list[0]), (Outcome::Committed(10), 0));
            let empty = retry(area, field, pop);
            assert_eq!(empty, Outcome::Refused);
            assert_eq!(items, [10, 20], "the cells hold what was pushed");
            // A wrong index moves: nothing is pushed.
            let wrong = area.index(field).wrapping_add(1);
            // SAFETY: as above.
            let moved = unsafe { area.push(field, wrong, list_ptr, 40) };
            assert_eq!((moved.outcome(()), list[0]), (Outcome::Moved, 0));

            let mut word = 1usize;
            // SAFETY: a local word only this thread touches.
            let refused = retry(area, field, |i| unsafe {
                area.compare_store(field, i, &mut word, 2, 3)
            });
            assert_eq!((refused, word), (Outcome::Refused, 1));
            // SAFETY: as above.
            let done = retry(area, field, |i| unsafe {
                area.compare_store(field, i, &mut word, 1, 3)
            });
            assert_eq!((done, word), (Outcome::Committed(()), 3));
        }
    }
}
