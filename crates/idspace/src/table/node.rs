//! [`Node`]: one entry of a table in a single allocation, the way the kernel's `k_itimer` is
//! itself the node of its hash chain: the key, the chain link, a reference count and the
//! value.
//!
//! A node is created with one reference, which belongs to whoever holds it first: the chain it
//! is linked into (hash designs), or the owner's tree (radix). Every [`Entry`](super::Entry)
//! of it holds one more. Unlinking a node hands the chain's reference to the caller (the
//! `Entry` that `remove` returns), so that removing costs no count update; the memory is freed
//! by whoever drops the last reference.

use crate::prelude::*;
use core::ptr::{self, NonNull};

use super::{Id, Owner};
use crate::sync::{AtomicPtr, AtomicU32, Ordering};

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
    /// References: the chain's (or tree's) while the node is stored, and one per `Entry`. Next
    /// to `id`, so that the header is 24 bytes.
    refs: AtomicU32,
    /// The entry's value; read-only once the node is shared.
    pub(crate) value: T,
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
        crate::util::fallible::try_box(Node::unboxed(owner, id, value)).map_err(|node| node.value)
    }

    #[inline]
    fn unboxed(owner: Owner, id: Id, value: T) -> Node<T> {
        Node {
            next: AtomicPtr::new(ptr::null_mut()),
            owner,
            id,
            refs: AtomicU32::new(1),
            value,
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

    /// Adds a reference to a node the caller keeps alive by a reference of its own (or by the
    /// lock of the chain that holds one).
    #[inline]
    pub(crate) fn retain(&self) {
        // Relaxed: a new reference is made from an existing one, which already orders every
        // access to the node (as `Arc::clone`).
        if self.refs.fetch_add(1, Ordering::Relaxed) > MAX_REFS {
            overflow();
        }
    }

    /// Drops one reference to `node`, freeing it (and dropping its value) if it was the last.
    ///
    /// # Safety
    /// The caller owns one reference to `node`, a live node from [`Node::boxed`], and gives it
    /// up.
    #[inline]
    pub(crate) unsafe fn release(node: NonNull<Node<T>>) {
        // SAFETY: the caller's reference keeps the node alive until this decrement.
        let refs = unsafe { &node.as_ref().refs };
        // Release pairs with the Acquire load below in whichever thread drops the last
        // reference: every use of the node through this reference happens before the free.
        if refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // An Acquire load of the count rather than an Acquire fence: the same ordering (it
        // reads the last decrement, which heads the release sequence of every earlier one), and
        // ThreadSanitizer, which does not model fences, sees it too (std's `Arc` does the same
        // under TSan).
        refs.load(Ordering::Acquire);
        // SAFETY: still allocated: ours was the last reference.
        unsafe { node.as_ref() }.freed();
        // SAFETY: that was the last reference, so no other thread can reach the node; it came
        // from `Box::into_raw` of a `Node::boxed`.
        drop(unsafe { Box::from_raw(node.as_ptr()) });
    }

    /// The node's value if the caller's reference is the only one, else `None` (the node is then
    /// untouched).
    ///
    /// # Safety
    /// As [`Node::release`]: on `Some`, the caller's reference is consumed and the node freed.
    pub(crate) unsafe fn try_unwrap(node: NonNull<Node<T>>) -> Option<T> {
        // SAFETY: the caller's reference keeps the node alive.
        let refs = unsafe { &node.as_ref().refs };
        // Acquire pairs with the Release decrements of the references dropped before: their
        // uses of the value happen before we take it.
        refs.compare_exchange(1, 0, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // SAFETY: still allocated: ours was the last reference.
        unsafe { node.as_ref() }.freed();
        // SAFETY: the count was 1 and is now 0: ours was the last reference and no other can be
        // made from nothing, so we own the allocation from `Box::into_raw`.
        let node = unsafe { Box::from_raw(node.as_ptr()) };
        Some(node.value)
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
