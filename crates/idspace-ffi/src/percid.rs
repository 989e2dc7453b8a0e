//! `idspace_counter_*` and `idspace_pool_*`: per-CID data written on the rseq critical
//! sections (x86-64, AArch64), with thread IDs and atomics where rseq is missing (valgrind,
//! old kernels, `GLIBC_TUNABLES=glibc.pthread.rseq=0`).

use core::cell::Cell;
use core::ffi::{c_int, c_void};

use idspace::percid::{IndexSource, PerCidCounter, PerCidPool};

use crate::boundary::{self, need, write_out};
use crate::errno;
use crate::object::{Counter, Foreign, IdspaceCounter, IdspacePool, Object};
use crate::registry;

/// The most objects one CID's list of a pool holds (`capacity` of `idspace_pool_new`).
pub const IDSPACE_POOL_MAX_CAPACITY: usize = 65536;
const _: () = assert!(IDSPACE_POOL_MAX_CAPACITY == PerCidPool::<Foreign>::MAX_CAPACITY);

/// A pool's release function: called once for every object the pool still holds when it is
/// destroyed, with the caller's `ctx`.
pub type IdspacePoolRelease = Option<unsafe extern "C" fn(object: *mut c_void, ctx: *mut c_void)>;

/// Creates a counter with a slot per possible CPU, indexed by the calling thread's mm_cid
/// (else its CPU, else a compact thread ID), and stores its handle in `*out`.
///
/// Returns 0, `-EINVAL` for a null `out`, `-ENOMEM` if the handle registry is full.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_counter_new(out: *mut IdspaceCounter) -> c_int {
    boundary::query(|| {
        need(out)?;
        let inner = counters::take();
        let counter = Counter {
            inner,
            base: inner.sum(),
        };
        let stable = counters::guarded(inner).then_some(inner);
        let handle = IdspaceCounter::insert_with_stable(counter, stable).inspect_err(|_| {
            counters::retire(inner);
        })?;
        write_out(out, handle)
    })
}

/// Destroys a counter after the calls in flight on it have returned. Adds racing the
/// destroy either count in the counter before it goes or are refused with `-EBADF`; the
/// counter's memory is kept for the next `idspace_counter_new`, which starts at 0.
///
/// Returns 0 or `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_counter_destroy(counter: IdspaceCounter) -> c_int {
    boundary::mutate(|| {
        let object = counter.destroy()?;
        if let Object::Counter(counter) = *object {
            counters::retire(counter.inner);
        }
        Ok(())
    })
}

/// Adds `n` (wrapping at 2^64) to the calling thread's slot: one rseq critical section that
/// commits with one store, no atomic read-modify-write and no shared cache line written. The
/// section also checks the handle's generation, so the add needs no other handle check
/// (where rseq or Linux 5.10's membarrier is missing, it takes the registry's usual check).
///
/// Returns 0 or `-EBADF`.
#[no_mangle]
pub extern "C" fn idspace_counter_add(counter: IdspaceCounter, n: u64) -> c_int {
    // The common path is one section and cannot panic (no call, no indexing that panics), so
    // it needs no boundary; everything else is `add_slowly`, called in tail position, so that
    // this function saves no register and builds no frame.
    if let Some((generation, expected, inner)) = guarded_counter(counter) {
        // The generation is compared inside the add's section: a destroy restarts the
        // sections in flight before it recycles the counter (see the registry's docs).
        match inner.add_if_once(n, generation, expected) {
            Some(true) => return 0,
            Some(false) => return -libc::EBADF,
            None => {}
        }
    }
    add_slowly(counter, n)
}

/// The slot's generation word, the generation `counter` expects in it, and its counter, for
/// a counter whose adds take no hazard (see the registry's docs); `None` otherwise.
#[inline(always)]
fn guarded_counter(
    counter: IdspaceCounter,
) -> Option<(
    &'static core::sync::atomic::AtomicU32,
    u32,
    &'static PerCidCounter,
)> {
    let (generation, expected, stable) = registry::stable(counter.raw)?;
    // SAFETY: a counter's stable pointer is a leaked `PerCidCounter`, never freed
    // (`counters::take`), whatever became of the handle.
    let inner = unsafe { &*stable.cast::<PerCidCounter>() };
    Some((generation, expected, inner))
}

/// `idspace_counter_add` after its section did not decide: the section with its retries, or
/// the registry's hazard for a counter whose adds are not sections (or a thread without an
/// rseq area). `extern "C"`, so that no unwind can leave it into the caller's frame.
#[cold]
#[inline(never)]
extern "C" fn add_slowly(counter: IdspaceCounter, n: u64) -> c_int {
    boundary::mutate(|| {
        if let Some((generation, expected, inner)) = guarded_counter(counter) {
            match inner.add_if(n, generation, expected) {
                Ok(true) => return Ok(()),
                Ok(false) => return Err(libc::EBADF),
                // No section on this thread: the hazard path.
                Err(_) => {}
            }
        }
        counter.with(|c| {
            c.inner.add(n);
            Ok(())
        })
    })
}

/// Stores the sum of every add that returned before this call (wrapping) in `*sum`; adds
/// running meanwhile may or may not be in it.
///
/// Returns 0, `-EINVAL` for a null `sum`, `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_counter_sum(counter: IdspaceCounter, sum: *mut u64) -> c_int {
    boundary::query(|| {
        need(sum)?;
        let total = counter.with(|c| Ok(c.inner.sum().wrapping_sub(c.base)))?;
        write_out(sum, total)
    })
}

/// Creates a pool whose per-CID lists hold up to `capacity` objects each (1 to
/// `IDSPACE_POOL_MAX_CAPACITY`; a full list spills half to a shared list) and stores its
/// handle in `*out`.
///
/// Returns 0, `-EINVAL` for a capacity out of range (0, `SIZE_MAX`) or a null `out`,
/// `-ENOMEM` if the handle registry is full.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_pool_new(capacity: usize, out: *mut IdspacePool) -> c_int {
    boundary::query(|| {
        need(out)?;
        let pool = PerCidPool::with_source(IndexSource::best(), capacity).map_err(errno::percid)?;
        write_out(out, IdspacePool::insert(pool)?)
    })
}

/// Destroys a pool after the calls in flight on it have returned, calling
/// `release(object, ctx)` for each object it still holds (unless `release` is null: then the
/// objects are the caller's to account for).
///
/// Returns 0 or `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call. A callback must be a function of its type that returns normally.
#[no_mangle]
pub unsafe extern "C" fn idspace_pool_destroy(
    pool: IdspacePool,
    release: IdspacePoolRelease,
    ctx: *mut c_void,
) -> c_int {
    boundary::mutate(|| {
        let object = pool.destroy()?;
        RELEASING.with(|cell| cell.set(release.map(|release| (release, ctx))));
        // Dropping the pool drops every object it holds, on every CID's list and the shared
        // one: each `Foreign`'s drop hands its address to `release`.
        drop(object);
        RELEASING.with(|cell| cell.set(None));
        Ok(())
    })
}

type Release = (unsafe extern "C" fn(*mut c_void, *mut c_void), *mut c_void);

thread_local! {
    /// The release function of the pool this thread is destroying, with its context.
    static RELEASING: Cell<Option<Release>> = const { Cell::new(None) };
}

impl Drop for Foreign {
    fn drop(&mut self) {
        if let Some((release, ctx)) = RELEASING.with(Cell::get) {
            // A zero-sized value's address is the pointer its box was made from: the object
            // the caller gave.
            let object = (self as *mut Foreign).cast::<c_void>();
            // SAFETY: the caller of `idspace_pool_destroy` promises `release` is a function
            // of this signature; each object is dropped, so released, once.
            unsafe { release(object, ctx) };
        }
    }
}

/// Gives `object` (not null) to the pool: onto the calling thread's CID's list, in one rseq
/// critical section. The pool holds it until a take returns it.
///
/// Returns 0, `-EINVAL` for a null `object`, `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_pool_give(pool: IdspacePool, object: *mut c_void) -> c_int {
    boundary::mutate(|| {
        if object.is_null() {
            return Err(libc::EINVAL);
        }
        pool.with(|p| {
            // Made only once the pool is known to be live, so a refused object is untouched.
            // SAFETY: `Foreign` is zero-sized with alignment 1, so any non-null pointer is a
            // valid `Box<Foreign>`: it is never read, written or freed through (a zero-sized
            // box frees nothing), only handed back by `take`, or to `release` by the pool's
            // destroy, as the same pointer.
            p.give(unsafe { Box::from_raw(object.cast::<Foreign>()) });
            Ok(())
        })
    })
}

/// Takes an object from the pool (the calling thread's CID's list first, else the shared
/// list) and stores it in `*object`.
///
/// Returns 0, `-EAGAIN` if the pool holds none at hand, `-EINVAL` for a null `object`,
/// `-EBADF`.
///
/// # Safety
///
/// Every non-null pointer argument must be valid for what is described above (a write of
/// one value through an out-pointer, reads or writes of the given number of elements)
/// for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn idspace_pool_take(pool: IdspacePool, object: *mut *mut c_void) -> c_int {
    boundary::mutate(|| {
        need(object)?;
        let taken = pool.with(|p| p.take().ok_or(libc::EAGAIN))?;
        write_out(object, Box::into_raw(taken).cast::<c_void>())
    })
}

/// The counters behind handles: leaked, and recycled by the next `idspace_counter_new` once
/// destroyed, so that the stable pointer an add may still hold stays a valid counter.
mod counters {
    use std::sync::{Mutex, OnceLock, PoisonError};

    use idspace::percid::{restart_sections, IndexSource, PerCidCounter};

    /// Destroyed counters, ready for reuse. They are at most as many as were ever live at once.
    static RETIRED: Mutex<Vec<&'static PerCidCounter>> = Mutex::new(Vec::new());

    /// Whether this process can restart rseq sections, asked once (it also registers).
    static RESTARTS: OnceLock<bool> = OnceLock::new();

    /// A retired counter, or a new one.
    pub(super) fn take() -> &'static PerCidCounter {
        let reused = RETIRED.lock().unwrap_or_else(PoisonError::into_inner).pop();
        reused.unwrap_or_else(|| Box::leak(Box::new(PerCidCounter::new())))
    }

    /// Whether adds to `counter` may go without a hazard: its adds are sections, and a
    /// destroy can restart them.
    pub(super) fn guarded(counter: &PerCidCounter) -> bool {
        matches!(counter.source(), IndexSource::MmCid | IndexSource::CpuId)
            && *RESTARTS.get_or_init(restart_sections)
    }

    /// Recycles `counter`, whose handle is destroyed and whose hazard calls have returned,
    /// once no add that passed its generation check can still commit.
    pub(super) fn retire(counter: &'static PerCidCounter) {
        if guarded(counter) && !restart_sections() {
            // The kernel refused a command it accepted before: a late add might still land,
            // so the counter is never reused.
            return;
        }
        RETIRED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(counter);
    }
}
