//! The owner registry: from an owner's number to its per-owner state.
//!
//! The kernel reaches a process's timer state through `current->signal` at no cost. User space
//! names owners by number, so every table keeps this registry. It is sharded 64 ways by owner,
//! each shard a read-write lock over a map, each on its own cache lines: operations on owners
//! that fall in different shards share nothing, and operations on one owner take its shard only
//! for reading. Writers (creating an owner's state, dropping it) are rare.
//!
//! Per-owner state is boxed so that its address is stable while a shard's read lock is held;
//! [`Owners::read_shard`] relies on that to hand out references that live as long as the guard.

use std::collections::HashMap;

use super::Owner;
use crate::sync::{read, write, RwLock, RwLockReadGuard};
use crate::util::hash::{mix, BuildIntHasher};
use crossbeam_utils::CachePadded;

// Under loom every lock is a modelled object: keep the registry small there.
#[cfg(not(loom))]
const SHARD_BITS: u32 = 6;
#[cfg(loom)]
const SHARD_BITS: u32 = 1;
const SHARDS: usize = 1 << SHARD_BITS;

/// One shard: the states of the owners that hash to it.
pub(crate) type Shard<S> = HashMap<Owner, Box<S>, BuildIntHasher>;

pub(crate) struct Owners<S> {
    shards: Box<[CachePadded<RwLock<Shard<S>>>]>,
}

impl<S: Default> Owners<S> {
    pub(crate) fn new() -> Self {
        let shards = (0..SHARDS)
            .map(|_| CachePadded::new(RwLock::new(Shard::default())))
            .collect();
        Owners { shards }
    }

    #[inline]
    fn shard(&self, owner: Owner) -> &RwLock<Shard<S>> {
        // The top bits of the mix: independent of the low bits the tables address with.
        &self.shards[(mix(owner, 0) >> (64 - SHARD_BITS)) as usize]
    }

    /// Runs `f` on the owner's state, creating a default state first if the owner has none.
    /// `f` runs with the shard held for reading, so the state cannot be removed under it.
    pub(crate) fn with<R>(&self, owner: Owner, f: impl FnOnce(&S) -> R) -> R {
        let shard = self.shard(owner);
        loop {
            let map = read(shard);
            if let Some(state) = map.get(&owner) {
                return f(state);
            }
            drop(map);
            // A concurrent `remove` may drop the state again before we re-read: loop.
            write(shard).entry(owner).or_default();
        }
    }

    /// Runs `f` on the owner's state if the owner has one.
    pub(crate) fn with_existing<R>(&self, owner: Owner, f: impl FnOnce(&S) -> R) -> Option<R> {
        read(self.shard(owner)).get(&owner).map(|state| f(state))
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
        match read(self.shard(owner)).get(&owner) {
            Some(state) => f(state, arg),
            None => missing(arg),
        }
    }

    /// Detaches the owner's state. Once this returns, no other thread can reach the state:
    /// every other access runs under the shard's read lock, which this write lock excluded.
    pub(crate) fn remove(&self, owner: Owner) -> Option<Box<S>> {
        write(self.shard(owner)).remove(&owner)
    }

    /// The owner's shard, held for reading.
    pub(crate) fn read_shard(&self, owner: Owner) -> RwLockReadGuard<'_, Shard<S>> {
        read(self.shard(owner))
    }

    /// Bytes held by the registry: the shards, their maps, and each state (`extra` adds what a
    /// state owns on the heap).
    pub(crate) fn memory_bytes(&self, extra: impl Fn(&S) -> usize) -> usize {
        let mut bytes = self.shards.len() * core::mem::size_of::<CachePadded<RwLock<Shard<S>>>>();
        for shard in self.shards.iter() {
            let map = read(shard);
            // hashbrown: one slot and one control byte per bucket of capacity.
            bytes += map.capacity() * (core::mem::size_of::<(Owner, Box<S>)>() + 1);
            for state in map.values() {
                bytes += core::mem::size_of::<S>() + extra(state);
            }
        }
        bytes
    }
}
