//! [`Node`]: one entry of a table in a single allocation, the way the kernel's `k_itimer` is
//! itself the node of its hash chain: the key, the chain link, a reference count and the
//! value.
//!
//! A node is created with one reference, which belongs to whoever holds it first: the chain it
//! is linked into (hash designs), or the owner's tree (radix). Every [`Entry`](super::Entry)
//! of it holds one more. Unlinking a node hands the chain's reference to the caller (the
//! `Entry` that `remove` returns), so that removing costs no count update.
//!
//! # The value's life and the memory's
//!
//! The count word holds three things, as `Arc`'s strong and weak counts do: the *strong*
//! references (`Entry`s and the chain's, in steps of [`STRONG`]), whether the value is still
//! there ([`ALIVE`]), and whether a hash table still *pins* the memory for its lock-free
//! lookups ([`PINNED`]). The last strong reference drops (or takes) the value; the memory goes
//! once the value is gone and the pin is released. A hash table pins every node it links
//! (`Node::pin`) and releases the pin one grace period after the unlink (its limbo, the
//! kernel's `kfree_rcu`), so a lookup walking the chain may still stand on a node whose value
//! was dropped: it takes a reference only if a strong one remains (`try_retain`, the kernel's
//! `kref_get_unless_zero`), and otherwise the entry is gone. The radix design never pins.
//!
//! The usual end of an entry (removed, its `Entry` dropped at once, its pin released a few
//! removes later) paid three atomic read-modify-writes; it now pays one. The last strong
//! reference to a value without drop glue clears its count and [`ALIVE`] in one (there is
//! nothing to drop between them), and a pin released when it is all that is left frees the
//! memory after a plain load (no lookup can reach the node then, so nothing can change the
//! count).

use crate::prelude::*;
use core::mem::ManuallyDrop;
use core::ptr::{self, NonNull};

use super::{Id, Owner};
use crate::sync::{AtomicPtr, AtomicU32, Ordering};

/// One strong reference in the count word (see the module docs).
const STRONG: u32 = 4;
/// The value is still in the node: set until the last strong reference drops or takes it.
const ALIVE: u32 = 2;
/// A hash table still holds the memory for the lookups that may be walking over it.
const PINNED: u32 = 1;
/// Counts above this abort: some code leaks `Entry`s in a loop (std's `Arc` does the same past
/// `isize::MAX`). Half the range leaves room for the increments racing the check.
const MAX_REFS: u32 = u32::MAX / 2;

/// One entry: its key, its chain link and its value in one allocation.
pub(crate) struct Node<T> {
    /// The next node of the chain (null at the end). Written only under the chain's lock.
    pub(crate) next: AtomicPtr<Node<T>>,
    /// The entry's owner; fixed before the node is shared.
    pub(crate) owner: Owner,
    /// The entry's ID; fixed before the node is shared.
    pub(crate) id: Id,
    /// Strong references (the chain's or tree's while the node is stored, and one per
    /// `Entry`) in steps of [`STRONG`], with [`ALIVE`] and [`PINNED`]. Next to `id`, so that
    /// the header is 24 bytes.
    refs: AtomicU32,
    /// The entry's value; read-only once the node is shared. Dropped (or taken) by the last
    /// strong reference, which may come before the memory is freed.
    value: ManuallyDrop<T>,
    /// Under loom, the node's lifetime as a cell: lock-free walks read it at every node they
    /// reach and the free writes it, so that loom reports a free that does not happen after
    /// every walk that reached the node.
    #[cfg(loom)]
    lifetime: crate::sync::UnsafeCell<()>,
}

impl<T> Node<T> {
    /// A node with one reference, not yet shared.
    #[inline]
    pub(crate) fn boxed(owner: Owner, id: Id, value: T) -> Box<Node<T>> {
        Box::new(Node::unboxed(owner, id, value))
    }

    /// [`Node::boxed`], or the value back if there is no memory for the node (the kernel's
    /// `-ENOMEM` from `kmem_cache_zalloc` in `alloc_posix_timer`).
    #[inline]
    pub(crate) fn try_boxed(owner: Owner, id: Id, value: T) -> Result<Box<Node<T>>, T> {
        crate::util::fallible::try_box(Node::unboxed(owner, id, value))
            .map_err(|node| ManuallyDrop::into_inner(node.value))
    }

    #[inline]
    fn unboxed(owner: Owner, id: Id, value: T) -> Node<T> {
        Node {
            next: AtomicPtr::new(ptr::null_mut()),
            owner,
            id,
            refs: AtomicU32::new(STRONG | ALIVE),
            value: ManuallyDrop::new(value),
            #[cfg(loom)]
            lifetime: crate::sync::UnsafeCell::new(()),
        }
    }

    /// Whether the node holds (owner, id).
    #[inline]
    pub(crate) fn is(&self, owner: Owner, id: Id) -> bool {
        self.id == id && self.owner == owner
    }

    /// Records, under loom, that a lock-free walk reached the node (see `lifetime`).
    #[inline(always)]
    pub(crate) fn reached(&self) {
        #[cfg(loom)]
        self.lifetime.with(|_| ());
    }

    /// Records, under loom, that the node is being freed (see `lifetime`).
    #[inline(always)]
    fn freed(&self) {
        #[cfg(loom)]
        self.lifetime.with_mut(|_| ());
    }

    /// The value of a node that was never shared (a create that found its ID taken).
    #[inline]
    pub(crate) fn into_value(self) -> T {
        ManuallyDrop::into_inner(self.value)
    }

    /// The value; the caller holds a strong reference, or is in a read-side section of a
    /// table that pins the node and has seen [`ALIVE`] (see [`Node::copied`]).
    #[inline]
    pub(crate) fn value(&self) -> &T {
        &self.value
    }

    /// Marks a node that is not shared yet as pinned by its hash table, which will release the
    /// pin with [`Node::unpin`] a grace period after unlinking it.
    #[inline]
    pub(crate) fn pin(&self) {
        // Relaxed: the node is not shared yet; the Release store that links it publishes this.
        self.refs.store(STRONG | ALIVE | PINNED, Ordering::Relaxed);
    }

    /// Adds a reference to a node the caller keeps alive by a reference of its own (or by the
    /// lock of the chain that holds one).
    #[inline]
    pub(crate) fn retain(&self) {
        // Relaxed: a new reference is made from an existing one, which already orders every
        // access to the node (as `Arc::clone`).
        if self.refs.fetch_add(STRONG, Ordering::Relaxed) > MAX_REFS {
            overflow();
        }
    }

    /// Adds a reference unless the last strong one is gone (the entry was removed and let
    /// go meanwhile): for a lookup that reached the node in a read-side section, which keeps
    /// the memory (the pin) but not the value. The kernel's `kref_get_unless_zero`.
    #[inline]
    pub(crate) fn try_retain(&self) -> bool {
        // Relaxed: only the count is read here; what the node holds was published by the
        // Release link the lookup followed with Acquire.
        let mut refs = self.refs.load(Ordering::Relaxed);
        loop {
            if refs < STRONG {
                return false;
            }
            if refs > MAX_REFS {
                overflow();
            }
            // Relaxed: as above; the reference made comes from a live strong one.
            match self.refs.compare_exchange_weak(
                refs,
                refs + STRONG,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => refs = now,
            }
        }
    }

    /// Whether the value is still there, for a lookup in a read-side section of a table that
    /// pins the node: what [`Node::try_retain`] would succeed on, answered without writing the
    /// count word (a node found linked and alive is an entry `get` would return).
    #[inline]
    pub(crate) fn is_alive(&self) -> bool {
        // Relaxed: nothing is read after the check; a removal racing it may be seen or not,
        // as it may be by `try_retain`.
        self.refs.load(Ordering::Relaxed) & ALIVE != 0
    }

    /// A copy of the value if it is still there, for a lookup in a read-side section of a
    /// table that pins the node: the memory stays until the section ends, and a `Copy` value
    /// has no drop that could change it (taking it is a read too).
    #[inline]
    pub(crate) fn copied(&self) -> Option<T>
    where
        T: Copy,
    {
        // Acquire pairs with nothing new (the value never changes once shared): it keeps the
        // read of the value below the check, so a value already taken is not reported.
        if self.refs.load(Ordering::Acquire) & ALIVE == 0 {
            return None;
        }
        Some(*self.value)
    }

    /// Drops one reference to `node`: the last strong one drops the value, and the memory goes
    /// with it unless a table still pins it.
    ///
    /// # Safety
    /// The caller owns one strong reference to `node`, a live node from [`Node::boxed`], and
    /// gives it up.
    #[inline]
    pub(crate) unsafe fn release(node: NonNull<Node<T>>) {
        // SAFETY: the caller's reference keeps the node alive until this decrement.
        let refs = unsafe { &node.as_ref().refs };
        // SAFETY: as for `release` itself.
        if !core::mem::needs_drop::<T>()
            && unsafe { Node::release_last_inert(node, Ordering::Release) }
        {
            return;
        }
        // Release pairs with the Acquire load below in whichever thread drops the last
        // reference: every use of the node through this reference happens before the drop.
        let before = refs.fetch_sub(STRONG, Ordering::Release);
        if before >= 2 * STRONG {
            return;
        }
        // An Acquire load of the count rather than an Acquire fence: the same ordering (it
        // reads the last decrement, which heads the release sequence of every earlier one), and
        // ThreadSanitizer, which does not model fences, sees it too (std's `Arc` does the same
        // under TSan).
        refs.load(Ordering::Acquire);
        // SAFETY: ours was the last strong reference: no other thread reads the value any more
        // (a lookup that reaches the node now fails `try_retain`), and the node's memory is
        // held by `ALIVE` until `let_go` below.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*node.as_ptr()).value).cast::<T>()) };
        // SAFETY: the value is gone; `ALIVE` is ours to clear.
        unsafe { Node::let_go(node, ALIVE) };
    }

    /// [`Node::release`] of the last strong reference to a value without drop glue, in one
    /// read-modify-write: with nothing to drop, the last reference clears its count and
    /// [`ALIVE`] together, where the general path takes one for the count and one for the
    /// bit (a remove's `Entry` dropped at once, the usual end of a create+lookup+remove cycle,
    /// paid both). False, with nothing done, if other strong references remain.
    ///
    /// `order` is the exchange's ordering on success: at least Release.
    ///
    /// # Safety
    /// As [`Node::release`]; `T` has no drop glue. On `true` the caller's reference is gone.
    #[inline]
    unsafe fn release_last_inert(node: NonNull<Node<T>>, order: Ordering) -> bool {
        // SAFETY: the caller's reference keeps the node alive until the exchange.
        let refs = unsafe { &node.as_ref().refs };
        // Relaxed: the exchange below decides.
        let mut now = refs.load(Ordering::Relaxed);
        while now & !(ALIVE | PINNED) == STRONG {
            // Release (at least), as the decrement in `release`: this holder's uses of the node
            // happen before whoever frees it (below, or the table's unpin) loads the count
            // with Acquire. A lookup that still sees `ALIVE` reads a value nothing drops.
            match refs.compare_exchange_weak(now, now - STRONG - ALIVE, order, Ordering::Relaxed) {
                Ok(_) => {
                    if now - STRONG - ALIVE == 0 {
                        // Not pinned: the memory is ours to free, as in `let_go`.
                        refs.load(Ordering::Acquire);
                        // SAFETY: nothing holds the node any more and its value needs no drop.
                        unsafe { Node::free(node) };
                    }
                    return true;
                }
                Err(seen) => now = seen,
            }
        }
        false
    }

    /// Releases the pin of a hash table on a node it unlinked, a grace period ago.
    ///
    /// Usually the pin is all that is left (the removed entry's last `Entry` went long ago),
    /// and then nothing can change the count any more: no lookup can reach the node, and a
    /// new strong reference is made only from a strong one or by a lookup. The memory is then
    /// freed after a load, without the read-modify-write `let_go` takes (one of a remove's
    /// atomic operations on a line of its own).
    ///
    /// # Safety
    /// The node was pinned ([`Node::pin`]), the caller owns the pin and gives it up, and no
    /// read-side section that may have reached the node is still running.
    #[inline]
    pub(crate) unsafe fn unpin(node: NonNull<Node<T>>) {
        // SAFETY: the pin keeps the node allocated.
        let refs = unsafe { &node.as_ref().refs };
        // Acquire pairs with the Release read-modify-write that let the value go (the last
        // strong reference's), as the load after `let_go`'s decrement does.
        if refs.load(Ordering::Acquire) == PINNED {
            // SAFETY: the pin was the last hold, and none can be added (see above); the value
            // is gone (`ALIVE` is clear).
            unsafe { Node::free(node) };
            return;
        }
        // SAFETY: by the caller's promise.
        unsafe { Node::let_go(node, PINNED) }
    }

    /// Clears `bit` (`ALIVE` or `PINNED`, owned by the caller) and frees the memory if nothing
    /// else holds it.
    ///
    /// # Safety
    /// The caller owns `bit` of the live `node`; once the value's bit is clear, the value is
    /// gone.
    #[inline]
    unsafe fn let_go(node: NonNull<Node<T>>, bit: u32) {
        // SAFETY: `bit` keeps the node allocated until this decrement.
        let refs = unsafe { &node.as_ref().refs };
        // Release pairs with the Acquire load below: the other holder's uses of the node
        // happen before the free.
        if refs.fetch_sub(bit, Ordering::Release) != bit {
            return;
        }
        refs.load(Ordering::Acquire);
        // SAFETY: ours was the last hold, and the value is gone.
        unsafe { Node::free(node) };
    }

    /// Frees the node's memory.
    ///
    /// # Safety
    /// Nothing holds the node any more (its count word is 0, read with Acquire), and its
    /// value is gone (dropped or taken, or it needs no drop).
    #[inline]
    unsafe fn free(node: NonNull<Node<T>>) {
        // SAFETY: still allocated: the caller's was the last hold.
        unsafe { node.as_ref() }.freed();
        // SAFETY: by the caller's promise (`ManuallyDrop` keeps the box from dropping the
        // value again); the node came from a box.
        drop(unsafe { Box::from_raw(node.as_ptr()) });
    }

    /// [`Node::try_unwrap`] of a `Copy` value, in one read-modify-write where the general path
    /// takes two (one to become the value's sole owner, one to clear [`ALIVE`] once the value
    /// is read out): the value is copied first, while the caller's reference keeps it, and is
    /// kept only if the caller's turns out to be the last strong reference.
    ///
    /// # Safety
    /// As [`Node::try_unwrap`].
    #[inline]
    pub(crate) unsafe fn try_unwrap_copied(node: NonNull<Node<T>>) -> Option<T>
    where
        T: Copy,
    {
        // SAFETY: the caller's reference keeps the node and its value alive. A `Copy` value
        // has no interior mutability and is never written once shared (nor dropped), so this
        // read races nothing.
        let value = *unsafe { node.as_ref() }.value();
        // AcqRel: Acquire pairs with the Release decrements of the references dropped before,
        // as in `try_unwrap`: their uses of the value (a callback reading what it points to)
        // happen before the caller has it to itself.
        // SAFETY: by the caller's promise; `T: Copy` has no drop glue.
        unsafe { Node::release_last_inert(node, Ordering::AcqRel) }.then_some(value)
    }

    /// The node's value if the caller's reference is the only strong one, else `None` (the
    /// node is then untouched).
    ///
    /// # Safety
    /// As [`Node::release`]: on `Some`, the caller's reference is consumed.
    pub(crate) unsafe fn try_unwrap(node: NonNull<Node<T>>) -> Option<T> {
        // SAFETY: the caller's reference keeps the node alive.
        let refs = unsafe { &node.as_ref().refs };
        // Relaxed: the compare-exchange below decides.
        let mut now = refs.load(Ordering::Relaxed);
        loop {
            if now & !(ALIVE | PINNED) != STRONG {
                return None;
            }
            // Acquire pairs with the Release decrements of the references dropped before:
            // their uses of the value happen before we take it. `ALIVE` stays set, so the
            // memory stays while we read the value out.
            match refs.compare_exchange_weak(
                now,
                now - STRONG,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(seen) => now = seen,
            }
        }
        // SAFETY: ours was the last strong reference, so the value is ours; `ALIVE` (ours now)
        // keeps the memory, and `let_go` frees it without dropping the value again.
        let value = unsafe { ptr::read(ptr::addr_of!((*node.as_ptr()).value).cast::<T>()) };
        // SAFETY: the value is taken; `ALIVE` is ours to clear.
        unsafe { Node::let_go(node, ALIVE) };
        Some(value)
    }
}

/// A reference count past [`MAX_REFS`]: as `Arc` does, stop the program rather than let the
/// count wrap and a node be freed while referenced. Without `std` there is no abort on stable
/// Rust; the panic handler (which a kernel's halts) stands in for it.
#[cold]
fn overflow() -> ! {
    #[cfg(feature = "std")]
    std::process::abort();
    #[cfg(not(feature = "std"))]
    panic!("a table entry's reference count overflowed");
}
