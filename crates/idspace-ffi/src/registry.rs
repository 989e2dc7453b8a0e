//! The handle registry: handles are integers with a generation, so a destroyed handle used
//! again is refused (`-EBADF`) instead of reaching freed memory.
//!
//! # Design
//!
//! A handle is `generation << 32 | (index + 1)`: `index` names a slot of one static array of
//! 65,536 (never freed; pages of it never touched cost nothing), the generation is odd while
//! the slot is live and bumped by each destroy and each reuse. 0 is never a handle,
//! so a zeroed handle variable is refused. A slot whose generation would wrap is retired
//! rather than reused, so a stale handle can never match a later object.
//!
//! Every call enters a *read-side section* on the slot: it publishes the slot's index in its
//! thread's hazard record, then checks the generation and reads the object pointer; on return
//! it clears the record. Calls that run no code of the caller's (all but those taking a
//! callback) publish in the record's one *leaf* slot; a call with a callback, which may call
//! back in, takes a slot of a small stack (with a depth). A destroy bumps the generation (new calls are refused from then on),
//! then waits until no thread's record names the slot before it frees the object. So an object
//! is never freed under a call that validated its handle, and nothing is shared-written on the
//! call path: the hazard record is the calling thread's own cache line.
//!
//! # The cost of the check
//!
//! The Dekker-style hand-off between the record's store and the generation's load needs a full
//! barrier on one side. Where the kernel offers `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`
//! (Linux 4.14), the destroyer pays it (an IPI to the CPUs running this process, microseconds),
//! and a call pays only: a thread-local load, a load and two stores of its own record's leaf
//! slot, one load of the slot's generation and one of its object pointer (one to two
//! nanoseconds, no atomic read-modify-write, no shared cache line written). Without membarrier (valgrind, old
//! kernels), each call adds one `SeqCst` fence (about 20 cycles on x86-64).
//!
//! # Calls without a hazard
//!
//! A counter's add is a single rseq critical section, and that makes a cheaper protocol
//! possible, the one the kernel's per-CPU allocators use to retire memory. A counter's slot
//! carries a *stable* pointer: counters are never freed but recycled, so the pointer stays
//! valid whatever happens to the handle. An add loads the slot's generation and the stable
//! pointer, and then compares the generation with the handle's *inside* the section that
//! commits the add. Its destroy bumps the generation, waits for the hazard calls (sum, and
//! adds on threads without rseq), then restarts every section in flight in the process
//! (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)`, Linux 5.10) before the counter is
//! recycled. A section that compared the old generation has then either committed, before the
//! counter was retired, or restarts and finds the new one. So an add of a destroyed handle
//! never lands in the counter's next owner, and an add touches no hazard record at all: no
//! thread-local, no stores but the section's own. Where the kernel lacks the command, counters
//! take the hazard path like every other structure.
//!
//! # Limits
//!
//! At most 65,536 handles are live at once (`-ENOMEM` beyond). Calls nest at most
//! [`MAX_NESTING`] deep on one thread (a callback calling into the library); deeper is `-EBUSY`.
//! A destroy waits for calls in flight on its handle, so a destroy from inside a callback on
//! the same handle is refused with `-EDEADLK`, and a destroy racing a call that never returns
//! (a callback that blocks forever) waits with it.

use core::cell::Cell;
use core::ffi::c_long;
use core::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Mutex, Once, PoisonError};

use crate::errno::Errno;
use crate::object::Object;

/// The most handles live at once.
const SLOTS: usize = 65536;
/// Calls one thread may have in flight at once (a callback calling back into the library).
pub(crate) const MAX_NESTING: usize = 4;

struct Slot {
    /// Odd while live; Release-stored after `object` and `stable`, paired with the Acquire
    /// loads in `with`, `with_callbacks` and `stable`.
    generation: AtomicU32,
    object: AtomicPtr<Object>,
    /// For calls without a hazard (see the module docs): memory that stays valid forever,
    /// which such calls reach and check against `generation` inside a critical section; null
    /// for the structures that have none.
    stable: AtomicPtr<()>,
}

/// Every slot there will ever be, in one static array: in zero-filled memory that the system
/// maps only when first touched, so an untouched slot costs nothing. A call finds its slot with
/// one address computation, where a table of lazily allocated chunks would add a dependent
/// load to every call.
static SLOT_ARRAY: [Slot; SLOTS] = [const {
    Slot {
        generation: AtomicU32::new(0),
        object: AtomicPtr::new(core::ptr::null_mut()),
        stable: AtomicPtr::new(core::ptr::null_mut()),
    }
}; SLOTS];

/// Slots handed out so far, and the destroyed ones ready for reuse.
struct Allocation {
    next: usize,
    free: Vec<usize>,
}

static ALLOCATION: Mutex<Allocation> = Mutex::new(Allocation {
    next: 0,
    free: Vec::new(),
});

/// One thread's published slots: the calls it has in flight. Cache-line aligned so that no
/// two threads' records share a line.
#[repr(align(128))]
struct Record {
    /// `index + 1` of the call in flight that runs none of the caller's code (a *leaf* call:
    /// every call but those that take a callback), 0 when none; written by the owning thread
    /// only. A leaf call cannot start another call, so one slot serves them all.
    leaf: AtomicU32,
    /// `index + 1` of each call in flight that may call back into the caller's code, 0 when
    /// unused; written by the owning thread only.
    slots: [AtomicU32; MAX_NESTING],
    /// How many of `slots` are in use; touched by the owning thread only.
    depth: AtomicU32,
    /// Whether a live thread owns the record.
    claimed: AtomicBool,
}

/// Every record ever made (leaked, reused after their threads exit).
static RECORDS: Mutex<Vec<&'static Record>> = Mutex::new(Vec::new());

/// Whether `membarrier` serves the destroy side, so calls need no fence. Set once, before the
/// first handle exists, never cleared.
static MEMBARRIER: AtomicBool = AtomicBool::new(false);
static MEMBARRIER_ONCE: Once = Once::new();

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: c_long = 1 << 4;

thread_local! {
    static RECORD: Cell<Option<&'static Record>> = const { Cell::new(None) };
    static RELEASER: Releaser = const { Releaser };
}

/// Gives the thread's record back when the thread exits.
struct Releaser;

impl Drop for Releaser {
    fn drop(&mut self) {
        if let Some(record) = RECORD.with(Cell::take) {
            // Release: the record's cleared slots are seen by its next owner's claim (Acquire
            // swap in `claim_record`).
            record.claimed.store(false, Ordering::Release);
        }
    }
}

fn init_membarrier() {
    MEMBARRIER_ONCE.call_once(|| {
        // SAFETY: membarrier takes two integer arguments (and a third since 5.10, 0 here)
        // and touches no memory of ours.
        let registered = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
                0,
            )
        };
        // Relaxed: the Once orders this store before every `call_once` return.
        MEMBARRIER.store(registered == 0, Ordering::Relaxed);
    });
}

#[cold]
fn claim_record() -> &'static Record {
    let mut records = RECORDS.lock().unwrap_or_else(PoisonError::into_inner);
    // Acquire: pairs with the Release store of the record's last owner in `Releaser::drop`.
    let found = records.iter().find(|record| {
        record
            .claimed
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    });
    let record = match found {
        Some(record) => *record,
        None => {
            let record: &'static Record = Box::leak(Box::new(Record {
                leaf: AtomicU32::new(0),
                slots: [const { AtomicU32::new(0) }; MAX_NESTING],
                depth: AtomicU32::new(0),
                claimed: AtomicBool::new(true),
            }));
            records.push(record);
            record
        }
    };
    drop(records);
    RECORD.with(|cell| cell.set(Some(record)));
    // If the thread is already past its thread-local destructors the record stays claimed: a
    // record leaked, nothing worse.
    let _ = RELEASER.try_with(|_| ());
    record
}

#[inline]
fn record() -> &'static Record {
    RECORD.with(Cell::get).unwrap_or_else(claim_record)
}

#[inline]
fn slot(index: usize) -> Option<&'static Slot> {
    SLOT_ARRAY.get(index)
}

/// Stores `object` in a free slot and returns its handle.
pub(crate) fn insert(object: Object) -> Result<u64, Errno> {
    insert_with_stable(object, core::ptr::null_mut())
}

/// [`insert`] for a structure whose calls may also go without a hazard: `stable` is memory
/// that is never freed, which [`stable`] hands to such calls with the slot's generation.
pub(crate) fn insert_with_stable(object: Object, stable: *mut ()) -> Result<u64, Errno> {
    init_membarrier();
    let mut allocation = ALLOCATION.lock().unwrap_or_else(PoisonError::into_inner);
    let index = match allocation.free.pop() {
        Some(index) => index,
        None if allocation.next < SLOTS => {
            allocation.next += 1;
            allocation.next - 1
        }
        None => return Err(libc::ENOMEM),
    };
    let slot = &SLOT_ARRAY[index];
    let generation = slot.generation.load(Ordering::Relaxed) + 1;
    slot.object
        .store(Box::into_raw(Box::new(object)), Ordering::Relaxed);
    slot.stable.store(stable, Ordering::Relaxed);
    // Release: pairs with the Acquire load in `enter`, which then sees `object`.
    slot.generation.store(generation, Ordering::Release);
    Ok(u64::from(generation) << 32 | (index as u64 + 1))
}

#[inline]
fn decode(handle: u64) -> Option<(usize, u32)> {
    let index = (handle as u32).checked_sub(1)? as usize;
    let generation = (handle >> 32) as u32;
    (generation % 2 == 1).then_some((index, generation))
}

/// A call in flight on a slot: while it lives, the slot's object is not freed.
struct Section {
    record: &'static Record,
    depth: usize,
}

impl Section {
    #[inline]
    fn enter(index: usize) -> Result<Section, Errno> {
        let record = record();
        let depth = record.depth.load(Ordering::Relaxed) as usize;
        if depth == MAX_NESTING {
            return Err(libc::EBUSY);
        }
        record.depth.store(depth as u32 + 1, Ordering::Relaxed);
        record.slots[depth].store(index as u32 + 1, Ordering::Relaxed);
        published();
        Ok(Section { record, depth })
    }
}

/// Orders a call's publication of its slot before its load of the generation.
#[inline(always)]
fn published() {
    if MEMBARRIER.load(Ordering::Relaxed) {
        // The destroyer's membarrier is a full barrier on this thread: the compiler must
        // keep the store above the generation's load below.
        compiler_fence(Ordering::SeqCst);
    } else {
        // SeqCst: pairs with the fence in `destroy` after the generation bump (Dekker).
        fence(Ordering::SeqCst);
    }
}

/// A leaf call in flight on a slot (see `Record::leaf`): one store to the thread's own record
/// on entry, one on exit. Only [`with`] makes one, after checking that the leaf slot is free.
struct Leaf(&'static Record);

impl Drop for Leaf {
    #[inline(always)]
    fn drop(&mut self) {
        // Release: as in `Section::drop`.
        self.0.leaf.store(0, Ordering::Release);
    }
}

impl Drop for Section {
    #[inline]
    fn drop(&mut self) {
        // Release: the call's reads of the object happen before a destroyer that sees the
        // cleared slot (its Acquire scan) frees it.
        self.record.slots[self.depth].store(0, Ordering::Release);
        self.record
            .depth
            .store(self.depth as u32, Ordering::Relaxed);
    }
}

/// Runs `call`, which runs none of the caller's code (no callback), on the live object of
/// `handle`, or answers `-EBADF`.
#[inline]
pub(crate) fn with<R>(
    handle: u64,
    call: impl FnOnce(&Object) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let (index, generation) = decode(handle).ok_or(libc::EBADF)?;
    let slot = slot(index).ok_or(libc::EBADF)?;
    let record = record();
    // Relaxed: the thread's own slot. It is taken only when a signal handler called in while
    // this thread was inside a leaf call; that call then nests, out of line.
    if record.leaf.load(Ordering::Relaxed) != 0 {
        return nested(handle, call);
    }
    record.leaf.store(index as u32 + 1, Ordering::Relaxed);
    published();
    let _leaf = Leaf(record);
    // Acquire: pairs with the Release store in `insert`, so `object` is the one published.
    if slot.generation.load(Ordering::Acquire) != generation {
        return Err(libc::EBADF);
    }
    // SAFETY: as in `with_callbacks`.
    let object = unsafe { &*slot.object.load(Ordering::Relaxed) };
    call(object)
}

/// [`with`] when the thread's leaf slot is taken: the call takes a nesting slot instead.
#[cold]
#[inline(never)]
fn nested<R>(handle: u64, call: impl FnOnce(&Object) -> Result<R, Errno>) -> Result<R, Errno> {
    with_callbacks(handle, call)
}

/// The stable memory of `handle`'s slot (see [`insert_with_stable`]), with the slot's
/// generation word and the generation the handle expects in it; `None` if the handle is not
/// live or its slot has none. Nothing here keeps the handle live: the caller's use of the
/// memory must check the generation where a retirement cannot slip between the check and the
/// use (inside an rseq critical section that the destroyer restarts), and the memory must
/// stay valid for a handle destroyed meanwhile.
#[inline]
pub(crate) fn stable(handle: u64) -> Option<(&'static AtomicU32, u32, *const ())> {
    let (index, generation) = decode(handle)?;
    let slot = slot(index)?;
    // Acquire: pairs with the Release store in `insert`, so `stable` is the one published
    // with this generation (or a later one, which then fails the caller's check).
    if slot.generation.load(Ordering::Acquire) != generation {
        return None;
    }
    let stable = slot.stable.load(Ordering::Relaxed);
    (!stable.is_null()).then_some((&slot.generation, generation, stable.cast_const()))
}

/// Runs `call`, which may call back into the library (up to [`MAX_NESTING`] deep), on the
/// live object of `handle`, or answers `-EBADF`.
#[inline]
pub(crate) fn with_callbacks<R>(
    handle: u64,
    call: impl FnOnce(&Object) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let (index, generation) = decode(handle).ok_or(libc::EBADF)?;
    let slot = slot(index).ok_or(libc::EBADF)?;
    let _section = Section::enter(index)?;
    // Acquire: pairs with the Release store in `insert`, so `object` is the one published.
    if slot.generation.load(Ordering::Acquire) != generation {
        return Err(libc::EBADF);
    }
    // SAFETY: the generation matched after this thread's record named the slot, so a destroy
    // either bumped it later (and waits for the record to clear before freeing) or has not
    // begun; the pointer came from `Box::into_raw` in `insert`.
    let object = unsafe { &*slot.object.load(Ordering::Relaxed) };
    call(object)
}

/// Whether the calling thread has a call in flight on slot `index` (a callback's caller).
fn held_here(index: usize) -> bool {
    RECORD.with(Cell::get).is_some_and(|record| {
        core::iter::once(&record.leaf)
            .chain(&record.slots)
            .any(|slot| slot.load(Ordering::Relaxed) == index as u32 + 1)
    })
}

/// Destroys the object of `handle` after every call in flight on it has returned; `check`
/// sees the object first and may refuse (wrong kind). Returns the object.
pub(crate) fn destroy(handle: u64, check: impl Fn(&Object) -> bool) -> Result<Box<Object>, Errno> {
    let (index, generation) = decode(handle).ok_or(libc::EBADF)?;
    let slot = slot(index).ok_or(libc::EBADF)?;
    if held_here(index) {
        return Err(libc::EDEADLK);
    }
    with(handle, |object| {
        if check(object) {
            Ok(())
        } else {
            Err(libc::EBADF)
        }
    })?;
    // SeqCst: one destroyer wins; pairs with the readers' fence (or the membarrier below).
    if slot
        .generation
        .compare_exchange(
            generation,
            generation + 1,
            Ordering::SeqCst,
            Ordering::Relaxed,
        )
        .is_err()
    {
        return Err(libc::EBADF);
    }
    init_membarrier();
    if MEMBARRIER.load(Ordering::Relaxed) {
        // SAFETY: as in `init_membarrier`.
        unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
    } else {
        // SeqCst: pairs with the fence in `Section::enter`.
        fence(Ordering::SeqCst);
    }
    wait_for_readers(index);
    let object = slot.object.swap(core::ptr::null_mut(), Ordering::Relaxed);
    // SAFETY: the generation no longer matches, so no new call reaches the pointer, and every
    // call that did has left its section (`wait_for_readers`); it came from `Box::into_raw`.
    let object = unsafe { Box::from_raw(object) };
    let mut allocation = ALLOCATION.lock().unwrap_or_else(PoisonError::into_inner);
    // The next insert makes the generation odd again; a slot about to wrap is retired.
    if generation < u32::MAX - 2 {
        allocation.free.push(index);
    }
    Ok(object)
}

fn wait_for_readers(index: usize) {
    let wanted = index as u32 + 1;
    let records: Vec<&'static Record> = RECORDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for record in records {
        // Acquire: pairs with the Release clear in `Section::drop`.
        while core::iter::once(&record.leaf)
            .chain(&record.slots)
            .any(|slot| slot.load(Ordering::Acquire) == wanted)
        {
            std::thread::yield_now();
        }
    }
}
