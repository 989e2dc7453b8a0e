//! [`IdSet`]: an owner's set of IDs, as a map from 64-ID groups to bitmap words.
//!
//! Owners allocate IDs in sequence from their cursor, so their IDs cluster: 64 consecutive IDs
//! share one word, and a set of 100,000 sequential IDs is ~1,600 map entries that stay in cache,
//! where a hash set of the IDs themselves would scatter every insert over half a megabyte.
//! Sparse IDs (restore mode) cost one word each.

use std::collections::HashMap;

use super::hash::BuildIntHasher;

/// An ID, as the handle tables number them ([`crate::table::Id`]).
type Id = u32;

const WORD_BITS: u32 = 64;

/// A set of IDs.
#[derive(Default)]
pub(crate) struct IdSet {
    words: HashMap<Id, u64, BuildIntHasher>,
    len: usize,
}

#[inline]
fn split(id: Id) -> (Id, u64) {
    (id / WORD_BITS, 1u64 << (id % WORD_BITS))
}

impl IdSet {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Adds `id`; false if it was already there.
    #[inline]
    pub(crate) fn insert(&mut self, id: Id) -> bool {
        let (group, bit) = split(id);
        let word = self.words.entry(group).or_insert(0);
        let added = *word & bit == 0;
        *word |= bit;
        self.len += usize::from(added);
        added
    }

    /// Removes `id`; false if it was not there.
    #[inline]
    pub(crate) fn remove(&mut self, id: Id) -> bool {
        let (group, bit) = split(id);
        let Some(word) = self.words.get_mut(&group) else {
            return false;
        };
        if *word & bit == 0 {
            return false;
        }
        *word &= !bit;
        if *word == 0 {
            self.words.remove(&group);
        }
        self.len -= 1;
        true
    }

    /// The IDs in ascending order.
    pub(crate) fn ascending(&self) -> Vec<Id> {
        let mut groups: Vec<(Id, u64)> = self.words.iter().map(|(&g, &w)| (g, w)).collect();
        groups.sort_unstable_by_key(|&(group, _)| group);
        let mut ids = Vec::with_capacity(self.len);
        for (group, mut word) in groups {
            while word != 0 {
                ids.push(group * WORD_BITS + word.trailing_zeros());
                word &= word - 1;
            }
        }
        ids
    }

    /// Heap bytes held (hashbrown: a slot and a control byte per bucket of capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.capacity() * (core::mem::size_of::<(Id, u64)>() + 1)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_set() {
        let mut set = IdSet::default();
        for id in [5, 64, 63, 0, Id::MAX, 1 << 20] {
            assert!(set.insert(id));
        }
        assert!(!set.insert(63));
        assert_eq!(set.len(), 6);
        assert_eq!(set.ascending(), vec![0, 5, 63, 64, 1 << 20, Id::MAX]);
        assert!(set.remove(63));
        assert!(!set.remove(63));
        assert!(!set.remove(62));
        assert!(set.remove(Id::MAX));
        assert_eq!(set.ascending(), vec![0, 5, 64, 1 << 20]);
        assert_eq!(set.len(), 4);
    }

    #[test]
    fn sequential_ids_share_words() {
        let mut set = IdSet::default();
        for id in 0..6400 {
            set.insert(id);
        }
        assert_eq!(set.words.len(), 100);
        for id in 0..64 {
            set.remove(id);
        }
        assert_eq!(set.words.len(), 99, "an empty word is dropped");
    }
}
