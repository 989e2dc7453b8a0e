//! Hashing of (owner, id) keys, and a fast hasher for integer-keyed maps (the tables' internal
//! maps, and the lab's peers, so that every design hashes at the same cost).

use core::hash::{BuildHasherDefault, Hasher};

/// IDs per locality group: consecutive IDs of one owner in one group hash to one block of
/// `GROUP` neighbouring buckets.
pub(crate) const GROUP_BITS: u32 = 6;
const GROUP_MASK: u64 = (1 << GROUP_BITS) - 1;

/// Mixes (owner, id) into 64 bits for bucket addressing, keeping neighbouring IDs together.
///
/// The owner and the ID's group (`id >> 6`) are spread by a Fibonacci multiply and the
/// splitmix64 finaliser, so every group of every owner lands on a random, independent block of
/// 64 buckets (bits 6 and up). Within the block the ID's low bits pick the bucket, rotated by
/// bits of the group's mix: the 64 IDs of a group fill the 64 buckets of their block one each,
/// in ascending order with one wrap (which hardware prefetchers follow), and IDs that share
/// their low bits (restore mode's IDs 512 apart) still scatter, because their groups differ.
///
/// Why: owners create IDs in sequence from their cursor, and look them up in bursts. With a
/// plain random hash every operation on a large table is a cache miss; with this one a
/// sequence of IDs walks one 4 KiB block of buckets at a time, like the radix tree's leaves,
/// and the per-operation cost stays flat as the table outgrows the CPU caches. The
/// distribution of chain lengths is that of a random hash over blocks instead of buckets.
/// Linear hashing splits on bits above the block (`h & (m-1)` with `m ≥ 64`), so it is not
/// affected.
#[inline]
pub(crate) fn mix(owner: u64, id: u32) -> u64 {
    let group = finalize(owner.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(id >> GROUP_BITS));
    (group & !GROUP_MASK) | (u64::from(id).wrapping_add(group) & GROUP_MASK)
}

#[inline]
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A [`Hasher`] for integer keys: one multiply-and-finalise per word, no per-map random state.
///
/// Keys here are owners and IDs chosen by the caller, not by an attacker on a network, so the
/// flooding resistance of SipHash buys nothing and costs time on every operation.
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    #[inline]
    fn finish(&self) -> u64 {
        finalize(self.0)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01B3);
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// Builds [`IntHasher`]s; usable as the `S` of a `HashMap` or `HashSet`.
pub type BuildIntHasher = BuildHasherDefault<IntHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_fills_its_block_one_bucket_each() {
        let block = mix(7, 128) >> GROUP_BITS;
        let mut slots: Vec<u64> = (128..192).map(|id| mix(7, id) & GROUP_MASK).collect();
        assert!((128..192).all(|id| mix(7, id) >> GROUP_BITS == block));
        slots.sort_unstable();
        assert_eq!(slots, (0..64).collect::<Vec<_>>());
    }

    #[test]
    fn sparse_ids_scatter_over_blocks_and_slots() {
        let buckets = 1024u64;
        let mut used = std::collections::HashSet::new();
        for i in 0..2048u32 {
            used.insert(mix(1, i * 512) % buckets);
        }
        // A random hash of 2048 keys into 1024 buckets reaches ~86% of them.
        assert!(used.len() > 800, "only {} buckets used", used.len());
    }
}
