//! The wakelist: an intrusive, lock-free, multi-producer single-consumer list of woken tasks
//! (the kernel's `llist` under `rq->wake_list`, later `call_single_queue`).
//!
//! Producers push with one compare-and-swap on the head and learn whether the list was empty,
//! which is the only moment a notification is needed. The consumer takes the whole list with one
//! swap and reverses it, so that tasks come out in the order they were pushed. Another thread
//! may take the whole list too, but only with a compare-and-swap from a head it saw
//! ([`Wakelist::take_from`]: a worker rescuing a stalled worker's wakeups, see `rescue.rs`). The
//! links live in the items themselves: a push allocates nothing.
//!
//! At shutdown the list is *closed*: the head is replaced by a sentinel that no push gets past,
//! so a wakeup racing with shutdown either lands before the close (and is drained by it) or is
//! refused and handed back to the waker. No item can be left behind.

use crate::sync::{Arc, AtomicPtr, Ordering};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

/// An item that carries its own wakelist link.
pub(crate) trait Linked: Sized {
    /// The link to the next item. Written only by the one thread that owns the item's place on
    /// a list (the pusher before publishing it, the consumer while reversing).
    fn link(&self) -> &AtomicPtr<Self>;
}

/// The intrusive MPSC list. It owns one `Arc` reference of every item on it.
pub(crate) struct Wakelist<T: Linked> {
    head: AtomicPtr<T>,
    _owns: PhantomData<Arc<T>>,
}

// SAFETY: the list only moves `Arc<T>` between threads; that is sound exactly when `Arc<T>` is
// `Send`, i.e. when `T: Send + Sync`.
unsafe impl<T: Linked + Send + Sync> Send for Wakelist<T> {}
// SAFETY: as above; all shared access goes through the atomic head.
unsafe impl<T: Linked + Send + Sync> Sync for Wakelist<T> {}

impl<T: Linked> Wakelist<T> {
    /// An empty, open list.
    pub(crate) fn new() -> Self {
        Wakelist {
            head: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// The head value of a closed list: the alignment of `T` as an address, which no `Arc`
    /// allocation can have.
    fn closed() -> *mut T {
        NonNull::<T>::dangling().as_ptr()
    }

    /// Pushes `item`. Returns whether the list was empty before (the caller must then notify
    /// the consumer), or hands the item back if the list is closed.
    pub(crate) fn push(&self, item: Arc<T>) -> Result<bool, Arc<T>> {
        let raw = Arc::into_raw(item).cast_mut();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            if head == Self::closed() {
                // SAFETY: `raw` came from `Arc::into_raw` above and was never published.
                return Err(unsafe { Arc::from_raw(raw) });
            }
            // SAFETY: `raw` is a live `Arc` allocation we own, unreachable by others until the CAS.
            unsafe { (*raw).link().store(head, Ordering::Relaxed) };
            // Release on success publishes the link and the item to the consumer's swap. The
            // waker's later read of the target's idle word is ordered by the fence in `notify`.
            match self
                .head
                .compare_exchange_weak(head, raw, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return Ok(head.is_null()),
                Err(actual) => head = actual,
            }
        }
    }

    /// Whether the list holds nothing (a closed list holds nothing). Relaxed: a worker's recheck
    /// is ordered by its own fence, and what it finds is taken with `take_all`'s Acquire.
    pub(crate) fn is_empty(&self) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        head.is_null() || head == Self::closed()
    }

    /// Takes everything pushed so far, in push order. Only the list's consumer calls this, and
    /// never once [`close`](Self::close) may run. A concurrent [`take_from`](Self::take_from)
    /// may have emptied the list since the look below: the swap then takes nothing.
    pub(crate) fn take_all(&self) -> Batch<T> {
        let head = self.head.load(Ordering::Relaxed);
        if head.is_null() || head == Self::closed() {
            return Batch::empty();
        }
        // One swap takes everything. Acquire pairs with the pushes' Release: the links and the
        // items are visible. The list cannot be closed under us: only the consumer takes, and
        // the runtime closes a worker's list only after that worker has stopped.
        let head = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        debug_assert!(head != Self::closed(), "take_all raced with close");
        Batch::reversed(head)
    }

    /// The head while the list holds items, as an opaque mark for [`take_from`](Self::take_from):
    /// a list whose mark stays the same holds the same items, none taken. Relaxed: a hint, and
    /// `take_from`'s compare-and-swap decides.
    pub(crate) fn mark(&self) -> Option<Mark<T>> {
        let head = self.head.load(Ordering::Relaxed);
        (!head.is_null() && head != Self::closed()).then_some(Mark(head))
    }

    /// Takes everything, in push order, if the head is still `mark`; else nothing. Any thread
    /// may call this beside the consumer: it never takes a closed list (the sentinel is no
    /// mark) and never reopens one, and the consumer's swap then finds the list empty. A head
    /// that left and came back (ABA) is harmless: nothing is read from it before the CAS, so
    /// what is taken is what the list held at the CAS.
    pub(crate) fn take_from(&self, mark: Mark<T>) -> Batch<T> {
        // Acquire on success pairs with the pushes' Release, as in `take_all`. Relaxed on
        // failure: nothing is taken, nothing read.
        match self.head.compare_exchange(
            mark.0,
            ptr::null_mut(),
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(head) => Batch::reversed(head),
            Err(_) => Batch::empty(),
        }
    }

    /// Closes the list for good and returns what was on it. Pushes after this are refused.
    pub(crate) fn close(&self) -> Batch<T> {
        // AcqRel: takes the items like `take_all`, and publishes the close to later pushes.
        let head = self.head.swap(Self::closed(), Ordering::AcqRel);
        if head == Self::closed() {
            return Batch::empty();
        }
        Batch::reversed(head)
    }
}

impl<T: Linked> Drop for Wakelist<T> {
    fn drop(&mut self) {
        drop(self.close());
    }
}

/// A wakelist's head as seen at one moment ([`Wakelist::mark`]): compared, never followed.
pub(crate) struct Mark<T>(*mut T);

impl<T> Clone for Mark<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Mark<T> {}

impl<T> PartialEq for Mark<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

/// Items taken off a wakelist, oldest first. Dropping a batch drops the items left in it.
pub(crate) struct Batch<T: Linked> {
    next: *mut T,
    len: usize,
}

impl<T: Linked> Batch<T> {
    fn empty() -> Self {
        Batch {
            next: ptr::null_mut(),
            len: 0,
        }
    }

    /// Reverses the LIFO chain starting at `head`.
    fn reversed(head: *mut T) -> Self {
        let mut reversed = ptr::null_mut();
        let mut current = head;
        let mut len = 0;
        while !current.is_null() {
            // Every node reachable from a taken head was published by a push, which wrote its
            // link before its Release CAS (made visible by our Acquire swap).
            // SAFETY: the node is live and owned by this batch; no other thread touches it.
            let node = unsafe { &*current };
            let next = node.link().load(Ordering::Relaxed);
            node.link().store(reversed, Ordering::Relaxed);
            reversed = current;
            current = next;
            len += 1;
        }
        Batch {
            next: reversed,
            len,
        }
    }

    /// How many items are left in the batch.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl<T: Linked> Iterator for Batch<T> {
    type Item = Arc<T>;

    fn next(&mut self) -> Option<Arc<T>> {
        if self.next.is_null() {
            return None;
        }
        let current = self.next;
        // The link is read before the `Arc` is handed out: after that the item may be pushed
        // again elsewhere.
        // SAFETY: `current` is a live node this batch owns (see `reversed`).
        self.next = unsafe { (*current).link().load(Ordering::Relaxed) };
        self.len -= 1;
        // SAFETY: `push` took this reference with `Arc::into_raw`; it is given back once, here.
        Some(unsafe { Arc::from_raw(current) })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len, Some(self.len))
    }
}

impl<T: Linked> Drop for Batch<T> {
    fn drop(&mut self) {
        for item in self.by_ref() {
            drop(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list item for the tests: a value and a link.
    struct Node {
        value: u32,
        link: AtomicPtr<Node>,
    }

    impl Node {
        fn new(value: u32) -> Arc<Node> {
            Arc::new(Node {
                value,
                link: AtomicPtr::new(ptr::null_mut()),
            })
        }
    }

    impl Linked for Node {
        fn link(&self) -> &AtomicPtr<Node> {
            &self.link
        }
    }

    #[cfg(not(loom))]
    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::VecDeque;

        #[derive(Debug, Clone)]
        enum Op {
            Push(u32),
            Take,
            Close,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                6 => any::<u32>().prop_map(Op::Push),
                3 => Just(Op::Take),
                1 => Just(Op::Close),
            ]
        }

        proptest! {
            /// The list behaves as a FIFO queue that reports empty-to-non-empty transitions,
            /// and refuses everything once closed.
            #[test]
            // Shorter sequences under Miri, which interprets every push and pop.
            fn matches_a_fifo_queue(ops in proptest::collection::vec(op(), 0..if cfg!(miri) { 24 } else { 200 })) {
                let list = Wakelist::new();
                let mut model: VecDeque<u32> = VecDeque::new();
                let mut closed = false;
                for op in ops {
                    match op {
                        Op::Push(value) => {
                            let pushed = list.push(Node::new(value));
                            if closed {
                                prop_assert_eq!(pushed.err().map(|n| n.value), Some(value));
                            } else {
                                prop_assert_eq!(pushed.ok(), Some(model.is_empty()));
                                model.push_back(value);
                            }
                        }
                        Op::Take => {
                            let batch = list.take_all();
                            prop_assert_eq!(batch.len(), model.len());
                            let taken: Vec<u32> = batch.map(|n| n.value).collect();
                            let expected: Vec<u32> = model.drain(..).collect();
                            prop_assert_eq!(taken, expected);
                        }
                        Op::Close => {
                            let taken: Vec<u32> = list.close().map(|n| n.value).collect();
                            let expected: Vec<u32> = model.drain(..).collect();
                            prop_assert_eq!(taken, expected);
                            closed = true;
                        }
                    }
                    prop_assert_eq!(list.is_empty(), model.is_empty());
                }
            }
        }

        #[test]
        fn dropping_the_list_releases_its_items() {
            let node = Node::new(7);
            let list = Wakelist::new();
            assert!(list.push(node.clone()).is_ok());
            assert_eq!(Arc::strong_count(&node), 2);
            drop(list);
            assert_eq!(Arc::strong_count(&node), 1);
        }
    }

    /// Two producers push while the consumer takes: every item arrives exactly once, each
    /// producer's items in order, and exactly the pushes that found the list empty report it.
    #[cfg(loom)]
    #[test]
    fn concurrent_pushes_and_takes_lose_nothing() {
        use crate::sync::thread;
        loom::model(|| {
            let list = Arc::new(Wakelist::new());
            let producers: Vec<_> = [[1, 2], [11, 12]]
                .into_iter()
                .map(|values| {
                    let list = Arc::clone(&list);
                    thread::spawn(move || {
                        values
                            .into_iter()
                            .filter(|&v| list.push(Node::new(v)).unwrap_or(false))
                            .count()
                    })
                })
                .collect();
            let mut taken: Vec<u32> = list.take_all().map(|n| n.value).collect();
            let batches = usize::from(!taken.is_empty());
            let notified: usize = producers.into_iter().map(|p| p.join().unwrap()).sum();
            let last: Vec<u32> = list.take_all().map(|n| n.value).collect();
            let batches = batches + usize::from(!last.is_empty());
            taken.extend(last);
            // Each batch began with a push that found the list empty.
            assert_eq!(notified, batches);
            let mut sorted = taken.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![1, 2, 11, 12]);
            for pair in [[1, 2], [11, 12]] {
                let at = |v| taken.iter().position(|&t| t == v).unwrap();
                assert!(at(pair[0]) < at(pair[1]), "FIFO per producer: {taken:?}");
            }
        });
    }
}
