//! The per-CID structures' contracts, on every index source this thread can use (under Miri,
//! thread IDs only): counters sum exactly, slots cover every index, and the pool, against a
//! model, never hands out an object twice and never loses one.

#![cfg(feature = "std")]
#![cfg(not(loom))]

mod common;

use std::collections::HashSet;

use idspace::percid::{IndexSource, PerCid, PerCidCounter, PerCidError, PerCidPool};
use proptest::prelude::*;

use common::miri_scaled;

fn sources() -> Vec<IndexSource> {
    [
        IndexSource::MmCid,
        IndexSource::CpuId,
        IndexSource::ThreadIds,
    ]
    .into_iter()
    .filter(|source| source.available())
    .collect()
}

#[test]
fn thread_ids_are_always_available_and_the_best_source_is_one_that_is() {
    assert!(IndexSource::ThreadIds.available());
    assert!(IndexSource::best().available());
    if cfg!(miri) {
        assert_eq!(IndexSource::best(), IndexSource::ThreadIds);
        assert_eq!(
            PerCidCounter::with_source(IndexSource::MmCid).err(),
            Some(PerCidError::Unavailable(IndexSource::MmCid))
        );
    }
}

#[test]
fn counters_sum_every_add_of_every_thread() {
    for source in sources() {
        let counter = PerCidCounter::with_source(source).unwrap();
        assert_eq!(counter.source(), source);
        let adds = miri_scaled(2_000) as u64;
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let counter = &counter;
                scope.spawn(move || (0..adds).for_each(|_| counter.add(thread + 1)));
            }
        });
        assert_eq!(counter.sum(), adds * (1 + 2 + 3 + 4), "{source:?}");
        counter.add(u64::MAX);
        assert_eq!(counter.sum(), adds * 10 - 1, "adds wrap, {source:?}");
    }
}

#[test]
fn memory_follows_cpus_not_threads() {
    let counter = PerCidCounter::new();
    let before = counter.slots();
    std::thread::scope(|scope| {
        for _ in 0..miri_scaled(64) {
            scope.spawn(|| counter.add(1));
        }
    });
    assert_eq!(counter.slots(), before);
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(counter.slots() >= cpus, "fewer slots than CPUs");
    assert!(counter.slot_bytes() >= counter.slots() * 8);
}

#[test]
fn slots_cover_every_index_and_the_current_one_is_among_them() {
    for source in sources() {
        let slots = PerCid::with_source(source, |index| index).unwrap();
        assert_eq!(
            slots.iter().copied().collect::<Vec<_>>(),
            (0..slots.len()).collect::<Vec<_>>()
        );
        assert!(*slots.current() < slots.len());
        assert_eq!(slots.get(slots.len()), None);
        assert_eq!(slots.source(), source);
    }
}

#[test]
fn a_pool_of_zero_capacity_is_refused() {
    assert_eq!(
        PerCidPool::<u8>::with_source(IndexSource::ThreadIds, 0).err(),
        Some(PerCidError::ZeroCapacity)
    );
}

#[test]
fn an_absurd_pool_capacity_is_refused_before_any_allocation() {
    // `usize::MAX` used to panic with "capacity overflow", `1 << 40` to abort out of memory.
    for capacity in [usize::MAX, 1 << 40, PerCidPool::<u8>::MAX_CAPACITY + 1] {
        for source in sources() {
            assert_eq!(
                PerCidPool::<u8>::with_source(source, capacity).err(),
                Some(PerCidError::CapacityTooLarge { capacity }),
                "{source:?}"
            );
        }
    }
    let largest = PerCidPool::<u8>::MAX_CAPACITY;
    let pool = PerCidPool::<u8>::with_source(IndexSource::ThreadIds, largest).unwrap();
    assert_eq!(pool.capacity(), largest);
}

#[derive(Debug, Clone)]
enum Op {
    Take,
    Give(usize),
    New,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            Just(Op::Take),
            (0..8usize).prop_map(Op::Give),
            Just(Op::New)
        ],
        0..200,
    )
}

proptest! {
    /// Against a model (which objects exist, which the test holds): a take returns an object
    /// the pool holds, never one the test holds; gives and takes keep every object in exactly
    /// one place; each list stays within its capacity; dropping the pool drops the rest.
    #[test]
    fn the_pool_hands_out_each_object_once_and_loses_none(ops in ops(), capacity in 1..6usize) {
        for source in sources() {
            let pool = PerCidPool::with_source(source, capacity).unwrap();
            let mut held: Vec<Box<usize>> = Vec::new();
            let mut in_pool: HashSet<usize> = HashSet::new();
            let mut next = 0;
            for op in &ops {
                match op {
                    Op::New => {
                        held.push(Box::new(next));
                        next += 1;
                    }
                    Op::Give(at) if !held.is_empty() => {
                        let object = held.swap_remove(at % held.len());
                        prop_assert!(in_pool.insert(*object));
                        pool.give(object);
                    }
                    Op::Give(_) => {}
                    Op::Take => {
                        if let Some(object) = pool.take() {
                            prop_assert!(in_pool.remove(&*object), "took {} not in the pool", object);
                            held.push(object);
                        } else {
                            // One thread, one index: the pool has nothing at hand only if it
                            // has nothing at all (the thread may move, but then its old list
                            // is another slot's, so only check when nothing can be elsewhere).
                            if source == IndexSource::ThreadIds {
                                prop_assert!(in_pool.is_empty());
                            }
                        }
                    }
                }
                prop_assert_eq!(pool.held(), in_pool.len());
            }
        }
    }
}

/// Objects left in the pool are dropped with it, once each.
#[test]
fn dropping_the_pool_drops_what_it_holds() {
    use std::rc::Rc;
    // Rc is not Send, but a pool of Rc is still a pool on one thread.
    let tracker = Rc::new(());
    {
        let pool = PerCidPool::with_source(IndexSource::ThreadIds, 2).unwrap();
        for _ in 0..7 {
            pool.give(Box::new(Rc::clone(&tracker)));
        }
        drop(pool.take());
        assert_eq!(Rc::strong_count(&tracker), 7);
    }
    assert_eq!(Rc::strong_count(&tracker), 1);
}
