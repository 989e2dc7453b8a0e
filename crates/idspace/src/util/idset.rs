//! [`IdSet`]: an owner's set of IDs, in groups of 65,536 IDs, each a sorted array of 16-bit
//! offsets while it is sparse and a bitmap once it is dense (the container layout of Roaring
//! bitmaps).
//!
//! Owners allocate IDs in sequence from their cursor, so their IDs cluster: 100,000 sequential
//! IDs are two 8 KiB bitmaps. Restored owners hold sparse IDs: 2048 IDs 512 apart are 16 arrays
//! of 128 offsets, 2 bytes an ID, where a map from 64-ID words to bitmap words paid a map slot
//! (about 26 bytes with its spare capacity) for every one of them.
//!
//! Inserting and removing cost a binary search in the group's array and a move of the offsets
//! on the shorter side of it, at most 4 KiB: the array is a ring (`VecDeque`), so sequential
//! IDs append at the back and the oldest IDs, which owners tend to remove first, leave from the
//! front without moving the others (a `Vec` moved every offset on each such remove: 20,000
//! IDs removed in creation order moved 5 KB per remove). A group turns into a bitmap above
//! [`TO_BITMAP`] IDs and back into an array at [`TO_ARRAY`]: the gap keeps a count that hovers
//! around one size from converting on every change.
//!
//! An owner's next ID usually goes to its newest group as an append or a bit: [`IdSet::insert`]
//! does that inline and leaves the rest (a search, a new group, a larger array, a conversion)
//! to a function out of line. With it all in one function, every insert paid that function's
//! call, its saving and restoring of registers and its general path: the set's share of a
//! one-owner create in the scaled hash table fell from about 75 instructions to about 35 (15
//! of them the arrays' growth and the conversion to a bitmap, spread over the inserts).

use crate::prelude::*;
use alloc::collections::VecDeque;

/// An ID, as the handle tables number them ([`crate::table::Id`]).
type Id = u32;

/// IDs a group covers: the low 16 bits of an ID are its offset in the group.
const GROUP_BITS: u32 = 16;
/// An array group above this many IDs becomes a bitmap: 4096 offsets are 8 KiB, the bitmap's
/// size.
const TO_BITMAP: usize = 4096;
/// A bitmap group at or below this many IDs becomes an array again.
const TO_ARRAY: usize = TO_BITMAP / 2;
/// Words of a bitmap group.
const WORDS: usize = (1 << GROUP_BITS) / 64;

/// The IDs of one group, as offsets.
enum Group {
    /// Ascending offsets.
    Sparse(VecDeque<u16>),
    /// One bit per offset, and how many are set.
    Dense { bits: Box<[u64; WORDS]>, len: usize },
}

/// Sets `offset`'s bit in a dense group's `bits`, counting it in `len`; false if it was set.
#[inline]
fn set_bit(bits: &mut [u64; WORDS], len: &mut usize, offset: u16) -> bool {
    let (word, bit) = split(offset);
    let added = bits[word] & bit == 0;
    bits[word] |= bit;
    *len += usize::from(added);
    added
}

impl Group {
    fn len(&self) -> usize {
        match self {
            Group::Sparse(offsets) => offsets.len(),
            Group::Dense { len, .. } => *len,
        }
    }

    /// Adds `offset` if that is cheap: set a bitmap's bit, or append to an array that has room
    /// and stays below [`TO_BITMAP`] (the usual case, an owner's next ID); whether it was
    /// added, or `None` to go through [`Group::insert`].
    #[inline]
    fn insert_cheap(&mut self, offset: u16) -> Option<bool> {
        match self {
            Group::Sparse(offsets) => {
                // An empty array (the newest group's, kept by `IdSet::remove`) takes any offset.
                let appends = offsets.back().is_none_or(|&last| last < offset);
                if appends && offsets.len() < offsets.capacity() && offsets.len() < TO_BITMAP {
                    offsets.push_back(offset);
                    Some(true)
                } else {
                    None
                }
            }
            Group::Dense { bits, len } => Some(set_bit(bits, len, offset)),
        }
    }

    /// Adds `offset`; false if it was already there.
    fn insert(&mut self, offset: u16) -> bool {
        match self {
            Group::Sparse(offsets) => {
                // Sequential IDs append: check the end before searching.
                let at = match offsets.back() {
                    Some(&last) if last < offset => offsets.len(),
                    _ => match offsets.binary_search(&offset) {
                        Ok(_) => return false,
                        Err(at) => at,
                    },
                };
                if at == offsets.len() {
                    offsets.push_back(offset);
                } else {
                    offsets.insert(at, offset);
                }
                if offsets.len() > TO_BITMAP {
                    *self = Group::dense(offsets.iter());
                }
                true
            }
            Group::Dense { bits, len } => set_bit(bits, len, offset),
        }
    }

    /// Removes `offset`; false if it was not there. Inline, as `IdSet::insert`'s common case
    /// is: an owner's usual remove is its oldest ID from an array; the rest is out of line.
    #[inline]
    fn remove(&mut self, offset: u16) -> bool {
        match self {
            // The oldest ID leaves first more often than any other: check the front before
            // searching.
            Group::Sparse(offsets) if offsets.front() == Some(&offset) => {
                offsets.pop_front();
                shrink_sparse(offsets);
                true
            }
            _ => self.remove_slow(offset),
        }
    }

    /// [`Group::remove`] beyond its inline case.
    #[cold]
    #[inline(never)]
    fn remove_slow(&mut self, offset: u16) -> bool {
        match self {
            Group::Sparse(offsets) => {
                let Ok(at) = offsets.binary_search(&offset) else {
                    return false;
                };
                offsets.remove(at);
                shrink_sparse(offsets);
                true
            }
            Group::Dense { bits, len } => {
                let (word, bit) = split(offset);
                if bits[word] & bit == 0 {
                    return false;
                }
                bits[word] &= !bit;
                *len -= 1;
                if *len <= TO_ARRAY {
                    *self = Group::Sparse(offsets_of(bits, *len).into());
                }
                true
            }
        }
    }

    fn dense<'a>(offsets: impl ExactSizeIterator<Item = &'a u16>) -> Group {
        let mut bits = Box::new([0u64; WORDS]);
        let len = offsets.len();
        for &offset in offsets {
            let (word, bit) = split(offset);
            bits[word] |= bit;
        }
        Group::Dense { bits, len }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Group::Sparse(offsets) => offsets.capacity() * core::mem::size_of::<u16>(),
            Group::Dense { .. } => core::mem::size_of::<[u64; WORDS]>(),
        }
    }
}

/// Gives back what an array that shrank no longer needs (vectors never shrink by
/// themselves); a quarter keeps a steady size from reallocating.
#[inline]
fn shrink_sparse(offsets: &mut VecDeque<u16>) {
    if offsets.capacity() > 16 && offsets.len() <= offsets.capacity() / 4 {
        offsets.shrink_to(offsets.len() * 2);
    }
}

#[inline]
fn split(offset: u16) -> (usize, u64) {
    (usize::from(offset) / 64, 1u64 << (offset % 64))
}

/// The offsets set in `bits`, ascending (`len` of them).
fn offsets_of(bits: &[u64; WORDS], len: usize) -> Vec<u16> {
    let mut offsets = Vec::with_capacity(len);
    for (index, &word) in bits.iter().enumerate() {
        let mut word = word;
        while word != 0 {
            offsets.push((index * 64) as u16 + word.trailing_zeros() as u16);
            word &= word - 1;
        }
    }
    offsets
}

/// The largest array an emptied group leaves behind for the next new group.
const SPARE_CAPACITY: usize = 16;

/// A set of IDs.
///
/// An owner that creates and removes one ID at a time (the create+delete loop, or a process
/// with one timer it re-arms by re-creating) empties its newest group on every remove. Taking
/// the group out of the list and making it again on the next insert cost about 70 of the 1,150
/// instructions of a one-owner create+lookup+remove cycle in the scaled hash table (the group
/// list's entry moved out and in, the array parked as `spare` and taken back, the out-of-line
/// insert and remove); the newest group therefore stays in the list when it empties, its array in place,
/// exactly when that array would otherwise have become the spare, and the next insert of the
/// same group is the inline append. Every other change first puts such a group back where it
/// would have been (`settle`), so that what the set holds, and its heap bytes, are as if it
/// had been taken out.
#[derive(Default)]
pub(crate) struct IdSet {
    /// Groups by the high 16 bits of their IDs, ascending; none is empty except perhaps the
    /// last (see the type's docs), and then `spare` has no room.
    groups: Vec<(u16, Group)>,
    len: usize,
    /// The empty array of the last small group that emptied, reused by the next new group: an
    /// owner that creates and removes one ID at a time (the create+delete loop) would otherwise
    /// allocate and free a group's array on every ID, as its cursor moves on.
    spare: VecDeque<u16>,
}

#[inline]
fn high_low(id: Id) -> (u16, u16) {
    ((id >> GROUP_BITS) as u16, id as u16)
}

impl IdSet {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Where group `high` is, or would go.
    #[inline]
    fn find(&self, high: u16) -> Result<usize, usize> {
        // An owner's IDs are mostly in its newest group: check the last before searching.
        match self.groups.last() {
            Some(&(last, _)) if last == high => Ok(self.groups.len() - 1),
            Some(&(last, _)) if last < high => Err(self.groups.len()),
            _ => self.groups.binary_search_by_key(&high, |&(h, _)| h),
        }
    }

    /// Adds `id`; false if it was already there.
    #[inline]
    pub(crate) fn insert(&mut self, id: Id) -> bool {
        let (high, low) = high_low(id);
        // An owner's next ID goes to its newest group, and usually is an append or a bit: that
        // case is inlined here, everything else (a search, a move, a new group, a conversion,
        // a larger array) is out of line, so that the common case pays for none of it.
        if let Some((last, group)) = self.groups.last_mut() {
            if *last == high {
                if let Some(added) = group.insert_cheap(low) {
                    self.len += usize::from(added);
                    return added;
                }
            }
        }
        self.insert_slow(high, low)
    }

    /// [`IdSet::insert`] beyond its cheap cases.
    #[cold]
    #[inline(never)]
    fn insert_slow(&mut self, high: u16, low: u16) -> bool {
        self.settle();
        let added = match self.find(high) {
            Ok(at) => self.groups[at].1.insert(low),
            Err(at) => {
                let mut offsets = core::mem::take(&mut self.spare);
                offsets.push_back(low);
                self.groups.insert(at, (high, Group::Sparse(offsets)));
                true
            }
        };
        self.len += usize::from(added);
        added
    }

    /// Removes `id`; false if it was not there.
    #[inline]
    pub(crate) fn remove(&mut self, id: Id) -> bool {
        let (high, low) = high_low(id);
        let Ok(at) = self.find(high) else {
            return false;
        };
        let group = &mut self.groups[at].1;
        if !group.remove(low) {
            return false;
        }
        self.len -= 1;
        if group.len() == 0 {
            if at + 1 == self.groups.len() {
                if self.keeps_emptied_last() {
                    return true; // stays, for the next insert (see the type's docs)
                }
            } else {
                // A kept group after this one goes back to being the spare first.
                self.settle();
            }
            if let (_, Group::Sparse(mut offsets)) = self.groups.remove(at) {
                if offsets.capacity() <= SPARE_CAPACITY && self.spare.capacity() == 0 {
                    offsets.clear();
                    self.spare = offsets;
                }
            }
            if self.groups.capacity() > 4 && self.groups.len() <= self.groups.capacity() / 4 {
                self.groups.shrink_to(self.groups.len() * 2);
            }
        }
        true
    }

    /// Whether the last group, just emptied, may stay in the list: only when taking it out
    /// would have made its array the spare and left the group list's room as it is, so that
    /// keeping it changes no heap byte.
    #[inline]
    fn keeps_emptied_last(&self) -> bool {
        let Some((_, Group::Sparse(offsets))) = self.groups.last() else {
            return false;
        };
        let (len, capacity) = (self.groups.len() - 1, self.groups.capacity());
        offsets.capacity() <= SPARE_CAPACITY
            && self.spare.capacity() == 0
            && !(capacity > 4 && len <= capacity / 4)
    }

    /// Takes a kept empty last group out of the list, its array becoming the spare: the set
    /// as it would be had the group been taken out when it emptied.
    fn settle(&mut self) {
        if self
            .groups
            .last()
            .is_some_and(|(_, group)| group.len() == 0)
        {
            if let Some((_, Group::Sparse(offsets))) = self.groups.pop() {
                self.spare = offsets;
            }
        }
    }

    /// The IDs in ascending order.
    pub(crate) fn ascending(&self) -> Vec<Id> {
        let mut ids = Vec::with_capacity(self.len);
        for (high, group) in &self.groups {
            let base = Id::from(*high) << GROUP_BITS;
            match group {
                Group::Sparse(offsets) => {
                    ids.extend(offsets.iter().map(|&offset| base | Id::from(offset)))
                }
                Group::Dense { bits, len } => ids.extend(
                    offsets_of(bits, *len)
                        .into_iter()
                        .map(|offset| base | Id::from(offset)),
                ),
            }
        }
        ids
    }

    /// Heap bytes held: the group list, every group's array or bitmap, and the spare array.
    pub(crate) fn heap_bytes(&self) -> usize {
        (self.groups.capacity() * core::mem::size_of::<(u16, Group)>())
            + self.spare.capacity() * core::mem::size_of::<u16>()
            + self
                .groups
                .iter()
                .map(|(_, group)| group.heap_bytes())
                .sum::<usize>()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

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
    fn a_group_turns_dense_and_sparse_again_with_a_gap_between() {
        let mut set = IdSet::default();
        for id in 0..=TO_BITMAP as Id {
            set.insert(id);
        }
        assert!(matches!(set.groups[0].1, Group::Dense { .. }));
        assert_eq!(
            set.heap_bytes(),
            8192 + core::mem::size_of::<(u16, Group)>() * set.groups.capacity()
        );
        // Down to one above the array threshold: still a bitmap.
        for id in (TO_ARRAY as Id + 1)..=TO_BITMAP as Id {
            assert!(set.remove(id));
        }
        assert!(matches!(set.groups[0].1, Group::Dense { .. }));
        assert!(set.remove(TO_ARRAY as Id));
        assert!(matches!(set.groups[0].1, Group::Sparse(_)));
        assert_eq!(set.ascending(), (0..TO_ARRAY as Id).collect::<Vec<_>>());
    }

    #[test]
    fn sparse_ids_cost_two_bytes_each() {
        let mut set = IdSet::default();
        for i in 0..2048 {
            set.insert(i * 512);
        }
        // 16 groups of 128 offsets.
        assert_eq!(set.groups.len(), 16);
        assert!(
            set.heap_bytes() <= 2048 * 2 + 16 * 2 * 32,
            "{}",
            set.heap_bytes()
        );
        for i in 0..2048 {
            assert!(set.remove(i * 512));
        }
        assert_eq!(set.len(), 0);
        assert!(set.groups.is_empty());
    }

    #[test]
    fn one_id_at_a_time_across_groups_keeps_a_constant_footprint() {
        let mut set = IdSet::default();
        set.insert(0);
        set.remove(0);
        let bytes = set.heap_bytes();
        // The cursor moves on: every ID in a new group, the last one's array reused.
        for id in (1..100).map(|i| i << GROUP_BITS) {
            assert!(set.insert(id));
            assert_eq!(set.ascending(), [id]);
            assert!(set.remove(id));
            assert_eq!(set.heap_bytes(), bytes, "after ID {id}");
        }
        assert_eq!(set.len(), 0);
        assert!(set.ascending().is_empty());
    }

    #[test]
    fn one_id_at_a_time_in_one_group_keeps_the_group_in_place() {
        let mut set = IdSet::default();
        assert!(set.insert(0));
        assert!(set.remove(0));
        let bytes = set.heap_bytes();
        for id in 1..100 {
            assert!(set.insert(id));
            assert!(!set.insert(id));
            assert_eq!(set.ascending(), [id]);
            assert!(set.remove(id));
            assert!(!set.remove(id));
            // The emptied group stays, holding the array the spare would hold.
            assert_eq!((set.groups.len(), set.spare.capacity()), (1, 0));
            assert_eq!((set.len(), set.heap_bytes()), (0, bytes), "after ID {id}");
        }
        // A remove elsewhere, or an insert into another group, puts it back as the spare.
        assert!(set.insert(5 << GROUP_BITS));
        assert_eq!(set.groups.len(), 1);
        assert_eq!(set.ascending(), [5 << GROUP_BITS]);
    }

    proptest! {
        /// Heap bytes are those of a set that takes an emptied group out at once (kept
        /// groups change no byte), checked against a replay of the same operations that
        /// settles after every one.
        #[test]
        fn kept_groups_change_no_heap_byte(ops in proptest::collection::vec(
            (any::<bool>(), 0u32..6, 0u32..40), 1..400)
        ) {
            let (mut set, mut settled) = (IdSet::default(), IdSet::default());
            for (insert, group, offset) in ops {
                let id = (group << GROUP_BITS) | offset;
                if insert {
                    prop_assert_eq!(set.insert(id), settled.insert(id));
                } else {
                    prop_assert_eq!(set.remove(id), settled.remove(id));
                }
                settled.settle();
                prop_assert_eq!(set.heap_bytes(), settled.heap_bytes());
                prop_assert_eq!(set.ascending(), settled.ascending());
            }
        }

        /// Against a `BTreeSet`, with IDs drawn from a few groups so that groups fill past
        /// the bitmap threshold and empty again.
        #[test]
        fn matches_a_btreeset(ops in proptest::collection::vec(
            (any::<bool>(), 0u32..3, 0u32..6000), 1..3000)
        ) {
            let mut set = IdSet::default();
            let mut model = BTreeSet::new();
            for (insert, group, offset) in ops {
                // Group 2 is the last one of the ID space.
                let high = if group == 2 { Id::MAX >> GROUP_BITS } else { group };
                let id = (high << GROUP_BITS) | offset;
                if insert {
                    prop_assert_eq!(set.insert(id), model.insert(id));
                } else {
                    prop_assert_eq!(set.remove(id), model.remove(&id));
                }
                prop_assert_eq!(set.len(), model.len());
            }
            prop_assert_eq!(set.ascending(), model.into_iter().collect::<Vec<_>>());
        }

        /// Filling a group densely and emptying it goes through both conversions.
        #[test]
        fn dense_fill_and_drain(order in Just((0u32..5000).collect::<Vec<_>>()).prop_shuffle()) {
            let mut set = IdSet::default();
            for &id in &order {
                prop_assert!(set.insert(id));
            }
            let dense = matches!(set.groups[0].1, Group::Dense { len: 5000, .. });
            prop_assert!(dense);
            prop_assert_eq!(set.ascending(), (0..5000).collect::<Vec<_>>());
            for &id in order.iter().rev() {
                prop_assert!(set.remove(id));
            }
            prop_assert_eq!(set.len(), 0);
            // Nothing left but the group list and at most a small spare array (perhaps kept
            // in the emptied group).
            set.settle();
            prop_assert!(set.groups.is_empty());
            prop_assert!(set.spare.capacity() <= SPARE_CAPACITY);
            prop_assert_eq!(
                set.heap_bytes(),
                set.groups.capacity() * core::mem::size_of::<(u16, Group)>()
                    + set.spare.capacity() * core::mem::size_of::<u16>()
            );
        }
    }
}
