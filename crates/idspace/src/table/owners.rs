//! The owner registry: from an owner's number to its per-owner state.
//!
//! The kernel reaches a process's timer state through `current->signal` at no cost. User space
//! names owners by number, so every table keeps this registry. It is sharded 64 ways by owner,
//! each shard a read-write lock over a map, each on its own cache lines: operations on owners
//! that fall in different shards share nothing, and operations on one owner take its shard only
//! for reading. Writers (creating an owner's state, dropping it) are rare.
//!
//! Per-owner state is boxed so that growing a shard's map moves pointers, not states.

use crate::prelude::*;
use hashbrown::HashMap;

use super::Owner;
use crate::lock::{Locks, RwLock};
use crate::util::hash::{mix, BuildIntHasher};

// Under loom every lock is a modelled object: keep the registry small there.
#[cfg(not(loom))]
const SHARD_BITS: u32 = 6;
#[cfg(loom)]
const SHARD_BITS: u32 = 1;
const SHARDS: usize = 1 << SHARD_BITS;

/// One shard: the states of the owners that hash to it.
pub(crate) type Shard<S> = HashMap<Owner, Box<S>, BuildIntHasher>;

/// A shard's lock and map on one cache line of their own. A line, not `CachePadded`'s pair of
/// lines: the adjacent-line prefetcher's sharing costs little for locks taken for reading, and
/// the registry stays at 4 KiB, which a table with few entries notices (2048 sparse IDs take
/// about 100 KB in all).
#[repr(align(64))]
struct ShardLine<S, L: Locks>(RwLock<L, Shard<S>>);

pub(crate) struct Owners<S, L: Locks> {
    shards: Box<[ShardLine<S, L>]>,
}

/// Gives a shard's memory back once it is mostly empty: maps never shrink by themselves, and
/// a registry that once knew many owners would keep their room. A quarter keeps a map that
/// hovers around one size from reallocating on every change.
fn shrink<S>(map: &mut Shard<S>) {
    if map.len() <= map.capacity() / 4 {
        map.shrink_to_fit();
    }
}

impl<S: Default, L: Locks> Owners<S, L> {
    pub(crate) fn new() -> Self {
        let shards = (0..SHARDS)
            .map(|_| ShardLine(crate::lock::rwlock::<L, _>(Shard::default())))
            .collect();
        Owners { shards }
    }

    #[inline]
    fn shard(&self, owner: Owner) -> &RwLock<L, Shard<S>> {
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
            shard.write().entry(owner).or_default();
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
            let Ok(state) = crate::util::fallible::try_box(S::default()) else {
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

    /// Detaches the owner's state. Once this returns, no other thread can reach the state:
    /// every other access runs under the shard's read lock, which this write lock excluded.
    pub(crate) fn remove(&self, owner: Owner) -> Option<Box<S>> {
        let mut map = self.shard(owner).write();
        let state = map.remove(&owner);
        shrink(&mut map);
        state
    }

    /// Drops the owner's state if `idle` holds for it, deciding under the shard's write lock
    /// so that no other thread can change the state in between. True if it was dropped.
    pub(crate) fn remove_if(&self, owner: Owner, idle: impl FnOnce(&S) -> bool) -> bool {
        let mut map = self.shard(owner).write();
        if map.get(&owner).is_some_and(|state| idle(state)) {
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
            map.retain(|_, state| !idle(state));
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
        let mut bytes = self.shards.len() * core::mem::size_of::<ShardLine<S, L>>();
        for ShardLine(shard) in self.shards.iter() {
            let map = shard.read();
            // hashbrown: one slot and one control byte per bucket of capacity.
            bytes += map.capacity() * (core::mem::size_of::<(Owner, Box<S>)>() + 1);
            for state in map.values() {
                bytes += core::mem::size_of::<S>() + extra(state);
            }
        }
        bytes
    }
}
