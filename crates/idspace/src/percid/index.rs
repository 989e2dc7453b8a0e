//! The indexes a per-CID structure has slots for, and the fallback index: compact per-thread
//! IDs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
// Statics: loom's primitives cannot be created in one.
use crate::sync::unmodeled::{Mutex, MutexGuard, OnceLock};

/// How many slots a structure needs: one for every index the kernel can give, which is at most
/// the highest possible CPU plus one (mm_cid is below the number of possible CPUs, cpu_id at
/// most the highest possible CPU); where `/sys` cannot be read, the CPUs available to us.
pub(crate) fn slot_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        possible_cpu_bound().unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    })
}

/// One more than the highest CPU number in `/sys/devices/system/cpu/possible` (a list such as
/// `0-3,8-11`).
fn possible_cpu_bound() -> Option<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok()?;
    parse_cpu_list_bound(&text)
}

/// One more than the highest CPU of a kernel CPU list; `None` if it is not one.
fn parse_cpu_list_bound(text: &str) -> Option<usize> {
    let mut bound = 0;
    for part in text.trim().split(',') {
        let (low, high) = part.split_once('-').unwrap_or((part, part));
        let (low, high): (usize, usize) = (low.parse().ok()?, high.parse().ok()?);
        if high < low {
            return None;
        }
        bound = bound.max(high.checked_add(1)?);
    }
    Some(bound)
}

/// The compact IDs of live threads: the smallest free one is handed out, so IDs stay below the
/// number of threads alive at once.
struct Registry {
    next: usize,
    free: BinaryHeap<Reverse<usize>>,
}

// A process-wide table outside any model: std's lock, not the facade's (loom cannot have a
// static lock, and no loom model reaches this table).
static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    next: 0,
    free: BinaryHeap::new(),
});

fn registry() -> MutexGuard<'static, Registry> {
    // Nothing panics with the lock held, so a poisoned lock still holds a consistent table.
    REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A thread's ID, returned to the registry when the thread exits.
struct ThreadId(usize);

impl ThreadId {
    fn acquire() -> ThreadId {
        let mut registry = registry();
        if let Some(Reverse(id)) = registry.free.pop() {
            return ThreadId(id);
        }
        registry.next += 1;
        ThreadId(registry.next - 1)
    }
}

impl Drop for ThreadId {
    fn drop(&mut self) {
        registry().free.push(Reverse(self.0));
    }
}

std::thread_local! {
    static THREAD_ID: ThreadId = ThreadId::acquire();
}

/// The calling thread's compact ID. During thread teardown, after the ID went back, 0: the
/// callers only use it to spread work over slots that are safe to share.
pub(crate) fn thread_id() -> usize {
    THREAD_ID.try_with(|id| id.0).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_give_the_highest_cpu_plus_one() {
        assert_eq!(parse_cpu_list_bound("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list_bound("0"), Some(1));
        assert_eq!(parse_cpu_list_bound("0-3,8-11"), Some(12));
        assert_eq!(parse_cpu_list_bound("3-1"), None);
        assert_eq!(parse_cpu_list_bound("x"), None);
        assert_eq!(parse_cpu_list_bound(""), None);
    }

    /// Threads alive at once hold distinct IDs, and IDs are compact: after the threads exit,
    /// a new set gets IDs below the number of threads ever alive at once (plus the other
    /// tests' threads, which may take IDs meanwhile).
    #[test]
    fn live_threads_hold_distinct_compact_ids() {
        let ids = |count: usize| {
            let barrier = crate::sync::unmodeled::Barrier::new(count);
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..count)
                    .map(|_| {
                        scope.spawn(|| {
                            let id = thread_id();
                            // Everyone holds its ID until all have one.
                            barrier.wait();
                            id
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<Vec<_>>()
            })
        };
        for round in 0..2 {
            let mut got = ids(8);
            got.sort_unstable();
            got.dedup();
            assert_eq!(got.len(), 8, "round {round}: two live threads shared an ID");
            assert!(
                got.iter().all(|&id| id < 8 + 64),
                "round {round}: IDs not compact: {got:?}"
            );
        }
    }
}
