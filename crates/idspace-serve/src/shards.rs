//! [`Shards`]: a read-mostly map with one copy per concurrency ID, so that the lookup every
//! request makes (its space's node) writes no cache line another worker reads.
//!
//! A `RwLock` read takes and releases the lock with two atomic read-modify-writes on one
//! word: shared by every worker, that line would move between the CPUs at every request. Here
//! each copy sits behind a lock of its own, in a slot of a [`PerCid`] (cache-padded, chosen by
//! the caller's kernel concurrency ID), so a reader locks the copy of the CPU it runs on, a
//! line no other running thread touches. A write (a space's node started, the stop) updates
//! every copy: the kernel's percpu reader-writer semaphore, in the shape of a map.
//!
//! The maps hash with foldhash rather than std's SipHash: a space name is hashed at every
//! request, and SipHash costs several times as much on short keys. Flooding a map with
//! colliding names is not open to clients: a name enters the maps only once its space's node
//! has started, which takes a space created in the store.
//!
//! Correctness does not depend on which slot a caller gets: every copy is locked by itself,
//! and every write changes all of them, one after the other, under `Shards::write`'s own lock.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock, RwLockReadGuard};

use idspace::percid::PerCid;

/// A map of one copy.
type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// A map from names to `V`, copied per concurrency ID.
pub(crate) struct Shards<V> {
    copies: PerCid<RwLock<Map<V>>>,
    /// Serialises writers, so that all copies change in the same order.
    write: Mutex<()>,
}

fn read<V>(copy: &RwLock<Map<V>>) -> RwLockReadGuard<'_, Map<V>> {
    copy.read().unwrap_or_else(|p| p.into_inner())
}

impl<V: Clone> Shards<V> {
    pub(crate) fn new() -> Shards<V> {
        Shards {
            copies: PerCid::new(|_| RwLock::new(Map::default())),
            write: Mutex::new(()),
        }
    }

    /// `f` of `key`'s value, looked up in the caller's copy; `None` if it has none.
    pub(crate) fn with<R>(&self, key: &str, f: impl FnOnce(&V) -> R) -> Option<R> {
        read(self.copies.current()).get(key).map(f)
    }

    /// The whole map (the caller's copy; all are equal outside a write).
    pub(crate) fn all(&self) -> RwLockReadGuard<'_, Map<V>> {
        read(self.copies.current())
    }

    /// Applies `change` to every copy.
    fn write(&self, mut change: impl FnMut(&mut Map<V>)) {
        let _writer = self.write.lock().unwrap_or_else(|p| p.into_inner());
        for copy in self.copies.iter() {
            change(&mut copy.write().unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// Sets `key` to `value` in every copy.
    pub(crate) fn insert(&self, key: &str, value: V) {
        self.write(|map| {
            map.insert(key.to_string(), value.clone());
        });
    }

    /// Empties every copy and returns the entries (no copy holds a clone of them any more).
    pub(crate) fn take_all(&self) -> Map<V> {
        let mut taken = None;
        self.write(|map| {
            let entries = std::mem::take(map);
            taken.get_or_insert(entries);
        });
        taken.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_copy_sees_every_write() {
        let shards = Shards::new();
        assert_eq!(shards.with("a", |v: &u32| *v), None);
        shards.insert("a", 1);
        shards.insert("b", 2);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| assert_eq!(shards.with("b", |v| *v), Some(2)));
            }
        });
        assert_eq!(shards.all().len(), 2);
        let taken = shards.take_all();
        assert_eq!(taken.len(), 2);
        assert!(shards.copies.iter().all(|copy| read(copy).is_empty()));
    }
}
