//! The CID bitmap: one bit per CID, changed only with atomic operations (the kernel's
//! `mm_cidmask`, which no lock protects).

use crate::prelude::*;
use crate::sync::{spin_wait, AtomicU64, Ordering};

pub(crate) struct CidMask {
    words: Box<[AtomicU64]>,
    bits: u32,
}

impl CidMask {
    pub(crate) fn new(bits: u32) -> Self {
        CidMask {
            words: (0..bits.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            bits,
        }
    }

    /// Takes the lowest free CID below `max` (`__mm_get_cid`): find the first zero bit, then
    /// set it atomically; `None` if none is free (or every race for one was lost).
    pub(crate) fn try_get(&self, max: u32) -> Option<u32> {
        let max = max.min(self.bits);
        for (index, word) in self.words.iter().enumerate() {
            let base = index as u32 * 64;
            if base >= max {
                break;
            }
            // Acquire pairs with the Release `fetch_and` in `put`: whoever frees a CID is done
            // with it before we take it.
            let mut current = word.load(Ordering::Acquire);
            loop {
                let free = !current;
                if free == 0 {
                    break;
                }
                let bit = free.trailing_zeros();
                if base + bit >= max {
                    break;
                }
                // AcqRel: Acquire as above; Release orders our prior use of the bitmap word.
                let previous = word.fetch_or(1 << bit, Ordering::AcqRel);
                if previous & (1 << bit) == 0 {
                    return Some(base + bit);
                }
                current = previous | (1 << bit);
            }
        }
        None
    }

    /// Takes a CID, preferring one below `preferred`, spinning until one is free
    /// (`mm_get_cid`). The callers' invariants guarantee that one becomes free.
    pub(crate) fn get(&self, preferred: u32) -> u32 {
        loop {
            if let Some(cid) = self.try_get(preferred).or_else(|| self.try_get(self.bits)) {
                return cid;
            }
            spin_wait();
        }
    }

    /// The lowest free CID, or the mask's size if every CID is taken (`cpumask_first_zero`).
    /// Only a hint: another thread may take it before the caller does.
    pub(crate) fn first_free(&self) -> u32 {
        for (index, word) in self.words.iter().enumerate() {
            // Acquire pairs with the Release `fetch_and` in `put`, as in `try_get`.
            let free = !word.load(Ordering::Acquire);
            if free != 0 {
                return (index as u32 * 64 + free.trailing_zeros()).min(self.bits);
            }
        }
        self.bits
    }

    /// Takes `cid` if it is free (`cpumask_test_and_set_cpu`); false if it was taken (a race
    /// lost, for a caller that found it free) or is beyond the mask.
    pub(crate) fn try_take(&self, cid: u32) -> bool {
        if cid >= self.bits {
            return false;
        }
        let bit = 1u64 << (cid % 64);
        // AcqRel, as in `try_get`: Acquire pairs with the Release `fetch_and` in `put`.
        self.words[cid as usize / 64].fetch_or(bit, Ordering::AcqRel) & bit == 0
    }

    /// Frees `cid` (`mm_drop_cid`).
    pub(crate) fn put(&self, cid: u32) {
        if cid < self.bits {
            // Release pairs with the Acquire loads in `try_get`.
            self.words[cid as usize / 64].fetch_and(!(1 << (cid % 64)), Ordering::Release);
        }
    }

    /// CIDs currently taken.
    pub(crate) fn count(&self) -> u32 {
        self.words
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones())
            .sum()
    }
}
