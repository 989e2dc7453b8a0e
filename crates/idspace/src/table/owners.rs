//! The owner registry: from an owner's number to its per-owner state.
//!
//! The kernel reaches a process's timer state through `current->signal` at no cost. User space
//! names owners by number, so every table keeps this registry. It is sharded 64 ways by owner,
//! each shard a read-write lock over a map, each on its own cache lines: operations on owners
//! that fall in different shards share nothing, and operations on one owner take its shard only
//! for reading. Writers (creating an owner's state, dropping it) are rare.
//!
//! Per-owner state is allocated on its own, so that growing a shard's map moves pointers, not
//! states, and counted ([`Shared`]), so that a caller can keep a state it uses often and reach
//! it without the registry, as the kernel reaches `current->signal` (the hash designs' owner
//! handles). A state someone keeps is never dropped as idle.

use crate::prelude::*;
use core::ptr::NonNull;
use hashbrown::HashMap;

use super::Owner;
use crate::lock::{Locks, RwLock};
use crate::sync::{fence, AtomicUsize, Ordering};
use crate::util::hash::{mix, BuildIntHasher};

/// A state whose pointers are counted in a field of its own (for [`Shared`]), so that the count
/// takes room the state has anyway (the hash designs' state has a cache line's padding) rather
/// than a header that its alignment would round up to a whole line.
pub(crate) trait Counted {
    /// The count of pointers to the state; 1 in a fresh state (the registry's pointer).
    fn pointers(&self) -> &AtomicUsize;
}

/// How the registry holds its states: boxed, or counted ([`Shared`]) for states it hands out.
pub(crate) trait Holder<S>: core::ops::Deref<Target = S> + Sized {
    /// `state`, held; or `state` back if there is no memory for it.
    fn try_new(state: S) -> Result<Self, S>;
    /// Whether anyone besides the registry holds the state.
    fn is_kept(&self) -> bool;
}

impl<S> Holder<S> for Box<S> {
    fn try_new(state: S) -> Result<Self, S> {
        crate::util::fallible::try_box(state)
    }

    fn is_kept(&self) -> bool {
        false
    }
}

/// A counted pointer to an owner's state: `Arc`'s shape, made here because stable Rust has no
/// fallible `Arc` constructor and a new owner's state reports a lack of memory (see the table
/// module docs). The count lives in the state ([`Counted`]).
pub(crate) struct Shared<S: Counted>(NonNull<S>);

// SAFETY: a `Shared<S>` hands out `&S` to any thread and drops `S` on whichever thread lets go
// last, as `Arc<S>` does.
unsafe impl<S: Counted + Send + Sync> Send for Shared<S> {}
// SAFETY: as for `Send`.
unsafe impl<S: Counted + Send + Sync> Sync for Shared<S> {}

impl<S: Counted> Holder<S> for Shared<S> {
    fn try_new(state: S) -> Result<Self, S> {
        debug_assert_eq!(
            state.pointers().load(Ordering::Relaxed),
            1,
            "a fresh state counts its first pointer"
        );
        let state = crate::util::fallible::try_box(state)?;
        Ok(Shared(NonNull::from(Box::leak(state))))
    }

    /// A pointer dropped on another thread happens before a `false` answer: Acquire pairs with
    /// the Release decrement in `drop`, so whatever its holder did to the state is visible.
    fn is_kept(&self) -> bool {
        self.pointers().load(Ordering::Acquire) != 1
    }
}

impl<S: Counted> Clone for Shared<S> {
    fn clone(&self) -> Self {
        // Relaxed, as `Arc::clone`: a new pointer is made from one its holder already has, so
        // the count cannot reach zero meanwhile, and nothing else is published by it.
        self.pointers().fetch_add(1, Ordering::Relaxed);
        Shared(self.0)
    }
}

impl<S: Counted> core::ops::Deref for Shared<S> {
    type Target = S;

    #[inline]
    fn deref(&self) -> &S {
        // SAFETY: the allocation lives while any `Shared` of it does, and this one does.
        unsafe { self.0.as_ref() }
    }
}

impl<S: Counted> Drop for Shared<S> {
    fn drop(&mut self) {
        // Release pairs with the Acquire fence below (of whichever thread lets go last) and
        // with the Acquire load in `is_kept`: this holder's uses of the state happen before
        // the state is dropped or found unshared.
        if self.pointers().fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        // SAFETY: the count was one, so this was the last pointer: the allocation, made by
        // `try_box` in `try_new`, is ours to free.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

// Under loom every lock is a modelled object: keep the registry small there.
#[cfg(not(loom))]
const SHARD_BITS: u32 = 6;
#[cfg(loom)]
const SHARD_BITS: u32 = 1;
const SHARDS: usize = 1 << SHARD_BITS;

/// One shard: the states of the owners that hash to it.
pub(crate) type Shard<H> = HashMap<Owner, H, BuildIntHasher>;

/// A shard's lock and map on one cache line of their own. A line, not `CachePadded`'s pair of
/// lines: the adjacent-line prefetcher's sharing costs little for locks taken for reading, and
/// the registry stays at 4 KiB, which a table with few entries notices (2048 sparse IDs take
/// about 100 KB in all).
#[repr(align(64))]
struct ShardLine<H, L: Locks>(RwLock<L, Shard<H>>);

pub(crate) struct Owners<S, L: Locks, H = Box<S>> {
    shards: Box<[ShardLine<H, L>]>,
    _states: core::marker::PhantomData<fn() -> S>,
}

/// Gives a shard's memory back once it is mostly empty: maps never shrink by themselves, and
/// a registry that once knew many owners would keep their room. A quarter keeps a map that
/// hovers around one size from reallocating on every change.
fn shrink<H>(map: &mut Shard<H>) {
    if map.len() <= map.capacity() / 4 {
        map.shrink_to_fit();
    }
}

impl<S: Default, L: Locks, H: Holder<S>> Owners<S, L, H> {
    pub(crate) fn new() -> Self {
        let shards = (0..SHARDS)
            .map(|_| ShardLine(crate::lock::rwlock::<L, _>(Shard::default())))
            .collect();
        Owners {
            shards,
            _states: core::marker::PhantomData,
        }
    }

    #[inline]
    fn shard(&self, owner: Owner) -> &RwLock<L, Shard<H>> {
        // The top bits of the mix: independent of the low bits the tables address with.
        &self.shards[(mix(owner, 0) >> (64 - SHARD_BITS)) as usize].0
    }

    /// Runs `f` on the owner's state, creating a default state first if the owner has none.
    /// `f` runs with the shard held for reading, so the state cannot be removed under it. The
    /// state's allocation is infallible: the callers (restore mode, cursors) have no error to
    /// report it with.
    pub(crate) fn with<R>(&self, owner: Owner, f: impl FnOnce(&S) -> R) -> R {
        let shard = self.shard(owner);
        loop {
            let map = shard.read();
            if let Some(state) = map.get(&owner) {
                return f(state);
            }
            drop(map);
            // A concurrent `remove` may drop the state again before we re-read: loop.
            shard.write().entry(owner).or_insert_with(|| {
                H::try_new(S::default()).unwrap_or_else(|_| {
                    alloc::alloc::handle_alloc_error(alloc::alloc::Layout::new::<S>())
                })
            });
        }
    }

    /// [`Owners::with`] for the creates, which report a lack of memory: runs `f(state, arg)`,
    /// or `no_memory(arg)` if there is no memory for a new state.
    pub(crate) fn try_with<A, R>(
        &self,
        owner: Owner,
        arg: A,
        f: impl FnOnce(&S, A) -> R,
        no_memory: impl FnOnce(A) -> R,
    ) -> R {
        self.try_with_shared(owner, arg, |state, arg| f(state, arg), no_memory)
    }

    /// [`Owners::try_with`] with the state's counted pointer.
    fn try_with_shared<A, R>(
        &self,
        owner: Owner,
        arg: A,
        f: impl FnOnce(&H, A) -> R,
        no_memory: impl FnOnce(A) -> R,
    ) -> R {
        let shard = self.shard(owner);
        loop {
            let map = shard.read();
            if let Some(state) = map.get(&owner) {
                return f(state, arg);
            }
            drop(map);
            // A concurrent `remove` may drop the state again before we re-read: loop.
            let mut map = shard.write();
            if map.contains_key(&owner) {
                continue;
            }
            let Ok(state) = H::try_new(S::default()) else {
                return no_memory(arg);
            };
            if map.try_reserve(1).is_err() {
                return no_memory(arg);
            }
            map.insert(owner, state);
        }
    }

    /// Runs `f` on the owner's state if the owner has one.
    pub(crate) fn with_existing<R>(&self, owner: Owner, f: impl FnOnce(&S) -> R) -> Option<R> {
        self.shard(owner).read().get(&owner).map(|state| f(state))
    }

    /// Runs `f(state, arg)` if the owner has a state, else `missing(arg)`: for operations that
    /// must hand a value back when the owner is unknown.
    pub(crate) fn with_existing_or<A, R>(
        &self,
        owner: Owner,
        arg: A,
        f: impl FnOnce(&S, A) -> R,
        missing: impl FnOnce(A) -> R,
    ) -> R {
        match self.shard(owner).read().get(&owner) {
            Some(state) => f(state, arg),
            None => missing(arg),
        }
    }

    /// Detaches the owner's state. Once this returns, no other thread can reach the state
    /// through the registry: every other access runs under the shard's read lock, which this
    /// write lock excluded. Holders of a [`Shared`] pointer (from [`Owners::share`]) still
    /// reach it: the caller must stop their uses by a protocol of its own.
    pub(crate) fn remove(&self, owner: Owner) -> Option<H> {
        let mut map = self.shard(owner).write();
        let state = map.remove(&owner);
        shrink(&mut map);
        state
    }

    /// Drops the owner's state if `idle` holds for it, deciding under the shard's write lock
    /// so that no other thread can change the state in between. True if it was dropped. A
    /// state someone keeps (see [`Owners::share`]) is never idle: its holder may use it
    /// without the registry at any time, and no new holder appears while the write lock is
    /// held (holders are made under the read lock, or from another holder).
    pub(crate) fn remove_if(&self, owner: Owner, idle: impl FnOnce(&S) -> bool) -> bool {
        let mut map = self.shard(owner).write();
        if map
            .get(&owner)
            .is_some_and(|state| !state.is_kept() && idle(state))
        {
            map.remove(&owner);
            shrink(&mut map);
            true
        } else {
            false
        }
    }

    /// Drops the state of every owner for which `idle` holds, one shard at a time; returns how
    /// many were dropped.
    pub(crate) fn remove_all_if(&self, idle: impl Fn(&S) -> bool) -> usize {
        let mut dropped = 0;
        for ShardLine(shard) in self.shards.iter() {
            let mut map = shard.write();
            let before = map.len();
            // A kept state is never idle (see `remove_if`).
            map.retain(|_, state| state.is_kept() || !idle(state));
            dropped += before - map.len();
            shrink(&mut map);
        }
        dropped
    }

    /// Every owner that has a state, ascending. Each shard is read in turn, so an owner added or
    /// dropped meanwhile may or may not be listed.
    pub(crate) fn owners(&self) -> Vec<Owner> {
        let mut owners: Vec<Owner> = self
            .shards
            .iter()
            .flat_map(|ShardLine(shard)| shard.read().keys().copied().collect::<Vec<_>>())
            .collect();
        owners.sort_unstable();
        owners
    }

    /// The sum of `count` over every owner's state, one shard at a time.
    pub(crate) fn sum(&self, count: impl Fn(&S) -> usize) -> usize {
        self.shards
            .iter()
            .map(|ShardLine(shard)| {
                shard
                    .read()
                    .values()
                    .map(|state| count(state))
                    .sum::<usize>()
            })
            .sum()
    }

    /// Bytes held by the registry: the shards, their maps, and each state (`extra` adds what a
    /// state owns on the heap).
    pub(crate) fn memory_bytes(&self, extra: impl Fn(&S) -> usize) -> usize {
        let mut bytes = self.shards.len() * core::mem::size_of::<ShardLine<H, L>>();
        for ShardLine(shard) in self.shards.iter() {
            let map = shard.read();
            // hashbrown: one slot and one control byte per bucket of capacity.
            bytes += map.capacity() * (core::mem::size_of::<(Owner, H)>() + 1);
            for state in map.values() {
                bytes += core::mem::size_of::<S>() + extra(state);
            }
        }
        bytes
    }
}

impl<S: Default + Counted, L: Locks> Owners<S, L, Shared<S>> {
    /// The owner's state, made (fallibly) if the owner has none, for a caller that keeps it
    /// and reaches it without the registry; `None` if there is no memory for a new state.
    /// While it is kept, the state is not dropped as idle.
    pub(crate) fn share(&self, owner: Owner) -> Option<Shared<S>> {
        self.try_with_shared(owner, (), |state, ()| Some(state.clone()), |()| None)
    }
}
