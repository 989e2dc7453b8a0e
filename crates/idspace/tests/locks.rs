//! A user's own lock plugs into every family with one `lock_api::RawMutex` implementation
//! (`MutexOnly`), and is the lock the structures then take: a counting spinlock sees every
//! design's operations.

#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use idspace::cid::{BitmapCids, CidAllocator, LazyCids, Rework, ScanPlacement};
use idspace::lock::MutexOnly;
use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, PerCpu, PidAllocator, ROOT};
use idspace::range::{RangeSource, SubRanges};
use idspace::table::{GlobalHash, IdTable, Radix, ScaledHash, Sizing, MAX_ID};

/// Times any `Counting` lock was taken, by this test binary's threads.
static TAKEN: AtomicUsize = AtomicUsize::new(0);

/// A test-and-set spinlock that counts its acquisitions.
struct Counting(AtomicBool);

// SAFETY: `try_lock` succeeds only for the caller that moves the flag from false to true, and
// `unlock` is called by that holder only (the trait's contract).
unsafe impl lock_api::RawMutex for Counting {
    #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern.
    const INIT: Counting = Counting(AtomicBool::new(false));
    type GuardMarker = lock_api::GuardSend;

    fn lock(&self) {
        while !self.try_lock() {
            std::hint::spin_loop();
        }
    }

    fn try_lock(&self) -> bool {
        // Acquire pairs with the Release in `unlock`.
        let won = self
            .0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        if won {
            TAKEN.fetch_add(1, Ordering::Relaxed);
        }
        won
    }

    unsafe fn unlock(&self) {
        // Release pairs with the Acquire in `try_lock`.
        self.0.store(false, Ordering::Release);
    }
}

type Mine = MutexOnly<Counting>;

/// How many times `f` took a `Counting` lock (the tests of this file run one at a time: see
/// `every_family_takes_the_users_lock`).
fn taken_by(f: impl FnOnce()) -> usize {
    let before = TAKEN.load(Ordering::Relaxed);
    f();
    TAKEN.load(Ordering::Relaxed) - before
}

fn tables() {
    let tables: [Box<dyn IdTable<u32>>; 3] = [
        Box::new(
            ScaledHash::<u32, Mine>::with_locks_and_sizing(Sizing::growing(), MAX_ID).unwrap(),
        ),
        Box::new(GlobalHash::<u32, Mine>::with_locks()),
        Box::new(Radix::<u32, Mine>::with_locks()),
    ];
    for table in &tables {
        let taken = taken_by(|| {
            let id = table.create(1, 10).expect("room");
            assert_eq!(table.remove(1, id).as_deref(), Ok(&10));
        });
        assert!(taken > 0, "{} took no lock of the user's", table.name());
    }
}

fn pids() {
    let designs: [Box<dyn PidAllocator>; 4] = [
        Box::new(PerCpu::<Mine>::with_locks(2).unwrap()),
        Box::new(IdrOnce::<Mine>::with_locks()),
        Box::new(IdrRelock::<Mine>::with_locks()),
        Box::new(BitmapHash::<Mine>::with_locks()),
    ];
    for pids in &designs {
        let taken = taken_by(|| {
            let container = pids.new_ns(ROOT).unwrap();
            let init = pids.alloc(container, &[1], 1).unwrap();
            assert_eq!(init.id_in(container), Some(1));
            pids.free(container, 1, 1).unwrap();
        });
        assert!(taken > 0, "{} took no lock of the user's", pids.name());
    }
}

fn cids() {
    let designs: [Box<dyn CidAllocator>; 3] = [
        Box::new(Rework::<Mine>::with_locks(2).unwrap()),
        Box::new(BitmapCids::<Mine>::with_locks(2).unwrap()),
        Box::new(LazyCids::<Mine>::with_locks(2, ScanPlacement::OnDemand).unwrap()),
    ];
    for cids in &designs {
        let taken = taken_by(|| {
            let task = cids.fork(0b11).unwrap();
            assert!(cids.switch(0, Some(&task)).unwrap().is_some());
            cids.exit(&task).unwrap();
        });
        assert!(taken > 0, "{} took no lock of the user's", cids.name());
    }
}

/// Ranges of 4 from a counter.
struct Counter(AtomicUsize);

impl RangeSource for Counter {
    type Grant = ();
    type Error = std::convert::Infallible;
    fn carve(&self, _cpu: usize) -> Result<(std::ops::Range<u64>, ()), Self::Error> {
        let start = self.0.fetch_add(4, Ordering::Relaxed) as u64;
        Ok((start..start + 4, ()))
    }
    fn give_back(&self, _cpu: usize, _grant: (), _unused: std::ops::Range<u64>) {}
}

fn ranges() {
    let ids = SubRanges::<Counter, Mine>::with_locks(Counter(AtomicUsize::new(0)), 2);
    let taken = taken_by(|| assert_eq!(ids.next(1), Ok(0)));
    assert!(taken > 0, "SubRanges took no lock of the user's");
}

/// One test, so that no other test's locks are counted meanwhile.
#[test]
fn every_family_takes_the_users_lock() {
    tables();
    pids();
    cids();
    ranges();
}
