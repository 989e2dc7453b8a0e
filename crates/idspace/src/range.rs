//! Ranges of IDs carved from a source and handed out per CPU: the seam between a space's
//! directory and the per-CPU caches in front of it.
//!
//! [`pid::PerCpu`](crate::pid::PerCpu) carves ranges of a PID space from the space's directory;
//! a cluster-wide allocator carves them from a lease it holds on a shared store. Both are a
//! [`RangeSource`]. [`SubRanges`] is the per-CPU cache in front of any source: each CPU bumps
//! through the range it holds under its own lock, and goes back to the source only when the
//! range is used up.

use crate::prelude::*;
use core::ops::Range;

use crate::lock::{DefaultLocks, Locks, Mutex};
use crossbeam_utils::CachePadded;

/// Where per-CPU ranges come from.
///
/// A source hands out disjoint ranges, each with a *grant*: what backs the range (an index in a
/// directory, a lease on a store). A range goes back to its source with [`give_back`], naming
/// the part that was never handed out.
///
/// [`give_back`]: RangeSource::give_back
///
/// A source that carves ranges of 100 from a counter, up to a limit, and counts the IDs it got
/// back unused:
///
/// ```
/// use std::ops::Range;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use idspace::range::{RangeSource, SubRanges};
///
/// struct Counter {
///     next: AtomicU64,
///     limit: u64,
///     unused: AtomicU64,
/// }
///
/// impl RangeSource for Counter {
///     type Grant = ();
///     type Error = &'static str;
///     fn carve(&self, _cpu: usize) -> Result<(Range<u64>, ()), &'static str> {
///         let start = self.next.fetch_add(100, Ordering::Relaxed);
///         if start >= self.limit {
///             return Err("exhausted");
///         }
///         Ok((start..(start + 100).min(self.limit), ()))
///     }
///     fn give_back(&self, _cpu: usize, _grant: (), unused: Range<u64>) {
///         self.unused.fetch_add(unused.end - unused.start, Ordering::Relaxed);
///     }
/// }
///
/// let counter = Counter { next: AtomicU64::new(0), limit: 250, unused: AtomicU64::new(0) };
/// let ids = SubRanges::new(counter, 2);
/// assert_eq!((ids.next(0), ids.next(0)), (Ok(0), Ok(1)));
/// assert_eq!(ids.next(1), Ok(100)); // CPU 1 carved a range of its own
/// ids.give_back_all();
/// assert_eq!(ids.source().unused.load(Ordering::Relaxed), 98 + 99);
/// assert_eq!(ids.next(0), Ok(200));
/// assert_eq!(ids.next(1), Err("exhausted"));
/// ```
pub trait RangeSource {
    /// What backs one range.
    type Grant;
    /// Why no range, or no ID of a range, can be handed out.
    type Error;

    /// A range no other holder has, for `cpu`.
    fn carve(&self, cpu: usize) -> Result<(Range<u64>, Self::Grant), Self::Error>;

    /// Takes back a range carved for `cpu`; `unused` (a tail of it, possibly empty) was never
    /// handed out.
    fn give_back(&self, cpu: usize, grant: Self::Grant, unused: Range<u64>);

    /// Whether IDs of the range backed by `grant` may still be handed out: `Ok(true)` to go on,
    /// `Ok(false)` to give the range back and carve another one, an error to refuse the
    /// allocation. Called before every ID handed out by [`SubRanges`]; the default trusts
    /// every grant.
    fn vouch(&self, grant: &Self::Grant) -> Result<bool, Self::Error> {
        let _ = grant;
        Ok(true)
    }
}

/// One CPU's current range.
struct Held<G> {
    next: u64,
    end: u64,
    grant: G,
}

/// One CPU's slot: its lock and the range it holds, if any.
type Slot<G, L> = CachePadded<Mutex<L, Option<Held<G>>>>;

/// Per-CPU caches of ranges in front of a [`RangeSource`]: an allocation on CPU `c` takes
/// `c`'s lock and the next ID of `c`'s range, and reaches the source only when that range is
/// used up (or its grant is no longer vouched for).
///
/// IDs come out of one range in ascending order; IDs of different CPUs interleave.
///
/// A source that stops vouching for a range (a lease that expired, say) makes the CPU give it
/// back with its unused tail and carve another:
///
/// ```
/// use std::ops::Range;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use idspace::range::{RangeSource, SubRanges};
///
/// /// Ranges of 10, each granted with its start; ranges below `fence` are no longer vouched for.
/// struct Leases {
///     next: AtomicU64,
///     fence: AtomicU64,
///     returned: std::sync::Mutex<Vec<Range<u64>>>,
/// }
///
/// impl RangeSource for Leases {
///     type Grant = u64;
///     type Error = std::convert::Infallible;
///     fn carve(&self, _cpu: usize) -> Result<(Range<u64>, u64), Self::Error> {
///         let start = self.next.fetch_add(10, Ordering::Relaxed);
///         Ok((start..start + 10, start))
///     }
///     fn give_back(&self, _cpu: usize, _grant: u64, unused: Range<u64>) {
///         self.returned.lock().unwrap().push(unused);
///     }
///     fn vouch(&self, grant: &u64) -> Result<bool, Self::Error> {
///         Ok(*grant >= self.fence.load(Ordering::Relaxed))
///     }
/// }
///
/// let leases = Leases {
///     next: AtomicU64::new(0),
///     fence: AtomicU64::new(0),
///     returned: Default::default(),
/// };
/// let ids = SubRanges::new(leases, 1);
/// assert_eq!(ids.cpus(), 1);
/// assert_eq!((ids.next(0), ids.next(0), ids.next(0)), (Ok(0), Ok(1), Ok(2)));
/// // The range 0..10 expires: its tail goes back, the next ID comes from a fresh range.
/// ids.source().fence.store(10, Ordering::Relaxed);
/// assert_eq!(ids.next(0), Ok(10));
/// assert_eq!(*ids.source().returned.lock().unwrap(), [3..10]);
/// // A CPU beyond the slots wraps around.
/// assert_eq!(ids.next(1), Ok(11));
/// ```
pub struct SubRanges<S: RangeSource, L: Locks = DefaultLocks> {
    source: S,
    cpus: Box<[Slot<S::Grant, L>]>,
}

impl<S: RangeSource> SubRanges<S> {
    /// Caches for `cpus` worker slots (at least 1) in front of `source`. A `cpu` argument
    /// beyond the slots wraps around (`cpu % cpus`).
    pub fn new(source: S, cpus: usize) -> SubRanges<S> {
        SubRanges::with_locks(source, cpus)
    }
}

impl<S: RangeSource, L: Locks> SubRanges<S, L> {
    /// Caches for `cpus` worker slots in front of `source`, each slot under a lock of `L` (see
    /// [`lock`](crate::lock)): [`SubRanges::new`] on other locks.
    pub fn with_locks(source: S, cpus: usize) -> Self {
        SubRanges {
            source,
            cpus: (0..cpus.max(1))
                .map(|_| CachePadded::new(crate::lock::mutex::<L, _>(None)))
                .collect(),
        }
    }

    /// The source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Worker slots.
    pub fn cpus(&self) -> usize {
        self.cpus.len()
    }

    /// The next ID for `cpu`.
    pub fn next(&self, cpu: usize) -> Result<u64, S::Error> {
        let cpu = cpu % self.cpus.len();
        let mut slot = self.cpus[cpu].lock();
        loop {
            if let Some(held) = slot.as_mut() {
                if held.next < held.end && self.source.vouch(&held.grant)? {
                    let id = held.next;
                    held.next += 1;
                    return Ok(id);
                }
                if let Some(held) = slot.take() {
                    self.source.give_back(cpu, held.grant, held.next..held.end);
                }
            }
            let (range, grant) = self.source.carve(cpu)?;
            *slot = Some(Held {
                next: range.start,
                end: range.end,
                grant,
            });
        }
    }

    /// Gives every CPU's range back to the source (their unused tails are never handed out).
    pub fn give_back_all(&self) {
        for (cpu, slot) in self.cpus.iter().enumerate() {
            if let Some(held) = slot.lock().take() {
                self.source.give_back(cpu, held.grant, held.next..held.end);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{AtomicU64, Ordering};
    use std::collections::HashSet;

    /// Ranges of 10 from a counter, up to 100; counts IDs given back unused.
    struct Counter {
        next: AtomicU64,
        unused: AtomicU64,
    }

    impl RangeSource for Counter {
        type Grant = ();
        type Error = &'static str;
        fn carve(&self, _cpu: usize) -> Result<(Range<u64>, ()), &'static str> {
            let start = self.next.fetch_add(10, Ordering::Relaxed);
            if start >= 100 {
                return Err("exhausted");
            }
            Ok((start..start + 10, ()))
        }
        fn give_back(&self, _cpu: usize, _grant: (), unused: Range<u64>) {
            self.unused
                .fetch_add(unused.end - unused.start, Ordering::Relaxed);
        }
    }

    #[test]
    fn hands_out_every_id_of_the_source_once_then_its_error() {
        let ranges = SubRanges::new(
            Counter {
                next: AtomicU64::new(0),
                unused: AtomicU64::new(0),
            },
            3,
        );
        let mut seen = HashSet::new();
        // Round robin until every CPU's range and the source are used up.
        let mut errors = 0;
        let mut cpu = 0;
        while errors < 3 {
            match ranges.next(cpu) {
                Ok(id) => {
                    assert!(seen.insert(id), "{id} twice");
                    errors = 0;
                }
                Err(error) => {
                    assert_eq!(error, "exhausted");
                    errors += 1;
                }
            }
            cpu += 1;
        }
        assert_eq!(seen.len(), 100);
        ranges.give_back_all();
        assert_eq!(ranges.source().unused.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_range_no_longer_vouched_for_is_given_back_with_its_tail() {
        struct Fenced(Counter);
        impl RangeSource for Fenced {
            type Grant = u64;
            type Error = &'static str;
            fn carve(&self, cpu: usize) -> Result<(Range<u64>, u64), &'static str> {
                self.0
                    .carve(cpu)
                    .map(|(range, ())| (range.clone(), range.start))
            }
            fn give_back(&self, cpu: usize, _grant: u64, unused: Range<u64>) {
                self.0.give_back(cpu, (), unused)
            }
            fn vouch(&self, grant: &u64) -> Result<bool, &'static str> {
                // The first range is fenced once IDs were handed out of it.
                Ok(*grant != 0 || self.0.unused.load(Ordering::Relaxed) > 0)
            }
        }
        let ranges = SubRanges::new(
            Fenced(Counter {
                next: AtomicU64::new(0),
                unused: AtomicU64::new(0),
            }),
            1,
        );
        // Range 0..10 is carved but not vouched for: given back whole, 10..20 serves.
        assert_eq!(ranges.next(0), Ok(10));
        assert_eq!(ranges.source().0.unused.load(Ordering::Relaxed), 10);
    }
}
