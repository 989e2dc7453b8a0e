//! Cache-line padding for data that different CPUs write.

use core::ops::{Deref, DerefMut};

/// Aligns and pads `T` to 128 bytes, so that two values never share a cache line.
///
/// 128 rather than 64 because Intel's spatial prefetcher pulls cache lines in adjacent pairs:
/// two hot values 64 bytes apart still bounce between cores (the same reasoning as
/// crossbeam's `CachePadded`).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for CachePadded<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}
