//! Hashing of (owner, id) keys, and a fast hasher for the crate's internal maps.

use core::hash::{BuildHasherDefault, Hasher};

/// Mixes (owner, id) into 64 well-distributed bits.
///
/// The owner is spread by a Fibonacci multiply, the ID is folded in, and the splitmix64
/// finaliser makes every input bit affect every output bit. All bits are good, so tables may
/// take low bits (linear hashing does) or high bits alike. IDs that differ by a power of two
/// (restore mode's sparse IDs) still land in different buckets.
#[inline]
pub(crate) fn mix(owner: u64, id: u32) -> u64 {
    finalize(owner.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(id))
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
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// Builds [`IntHasher`]s; usable as the `S` of a `HashMap` or `HashSet`.
pub type BuildIntHasher = BuildHasherDefault<IntHasher>;
