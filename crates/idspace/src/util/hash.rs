//! Hashing of (owner, id) keys for bucket addressing, and the hasher of integer-keyed maps.

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

/// The hasher of every integer-keyed map in the crate (owner registries, ID sets, PID
/// stripes, per-CPU ranges, the rework's task map): foldhash's fast variant with its fixed seed.
///
/// Keys here are owners, IDs and CPU numbers chosen by the caller, not by an attacker on a
/// network, so the flooding resistance of SipHash buys nothing and costs time on every
/// operation. The fixed seed (rather than foldhash's per-map random one) keeps runs
/// reproducible and maps cheap to create. Bucket placement that must keep neighbouring IDs
/// together uses [`mix`] instead; this hasher only has to spread keys over a `HashMap`.
pub(crate) type BuildIntHasher = foldhash::fast::FixedState;

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
