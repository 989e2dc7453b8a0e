//! The CID API's refusals, each a defect a new user hit: a task used in a space that did not
//! fork it, CPU counts a space cannot have, and affinity lists naming CPUs a mask cannot hold.
//! Every design must refuse with a named error and change nothing.

#![cfg(not(loom))]

use idspace::cid::{
    affinity_mask, BitmapCids, CidAllocator, CidError, CidState, LazyCids, Rework, MAX_CPUS,
};

/// Fresh spaces of every design, `cpus` CPUs each.
fn designs(cpus: usize) -> Vec<Box<dyn CidAllocator>> {
    vec![
        Box::new(Rework::new(cpus).unwrap()),
        Box::new(BitmapCids::new(cpus).unwrap()),
        Box::new(LazyCids::new(cpus).unwrap()),
    ]
}

/// Everything a space shows: the snapshot and the CIDs taken from its bitmap.
fn observe(space: &dyn CidAllocator) -> (CidState, u32) {
    (space.state(), space.cids_in_use())
}

#[test]
fn a_task_forked_by_another_space_is_refused_everywhere() {
    for (a, b) in designs(4).into_iter().zip(designs(4)) {
        let name = a.name();
        let all = (1 << 4) - 1;
        let ta = a.fork(all).unwrap();
        let tb = b.fork(all).unwrap();
        assert_eq!(a.switch(0, Some(&ta)), Ok(Some(0)), "{name}");
        let before = (observe(a.as_ref()), observe(b.as_ref()));

        // The user's case: both tasks would run with CID 0 in space `a`.
        assert_eq!(
            a.switch(1, Some(&tb)),
            Err(CidError::ForeignTask),
            "{name}: switch"
        );
        assert_eq!(a.exit(&tb), Err(CidError::ForeignTask), "{name}: exit");
        assert_eq!(
            a.set_affinity(&tb, 1),
            Err(CidError::ForeignTask),
            "{name}: set_affinity"
        );
        // And the other way round, with a task that runs in its own space.
        assert_eq!(
            b.switch(0, Some(&ta)),
            Err(CidError::ForeignTask),
            "{name}: switch in b"
        );
        assert_eq!(b.exit(&ta), Err(CidError::ForeignTask), "{name}: exit in b");
        assert_eq!(
            (observe(a.as_ref()), observe(b.as_ref())),
            before,
            "{name}: a refused call changed a space"
        );

        // Each space still serves its own task.
        assert_eq!(b.switch(1, Some(&tb)), Ok(Some(0)), "{name}");
        b.exit(&tb).unwrap();
        a.exit(&ta).unwrap();
        assert_eq!((a.state().users, b.state().users), (0, 0), "{name}");
    }
}

#[test]
fn the_foreign_task_error_says_what_is_wrong() {
    assert_eq!(
        CidError::ForeignTask.to_string(),
        "the task belongs to another CID space"
    );
    assert_eq!(CidError::ForeignTask.as_str(), "foreign_task");
}

#[test]
fn spaces_have_one_to_max_cpus_cpus() {
    for cpus in [0, MAX_CPUS + 1, 1000, 1 << 40, usize::MAX] {
        let refused = Some(CidError::BadCpuCount { cpus });
        assert_eq!(Rework::new(cpus).err(), refused, "rework, {cpus} CPUs");
        assert_eq!(BitmapCids::new(cpus).err(), refused, "bitmap, {cpus}");
        assert_eq!(LazyCids::new(cpus).err(), refused, "lazy, {cpus}");
    }
    for cpus in [1, MAX_CPUS] {
        for space in designs(cpus) {
            assert_eq!(space.cpus(), cpus, "{}", space.name());
        }
    }
    let message = Rework::new(1000).err().unwrap().to_string();
    assert!(
        message.contains("1000") && message.contains("64"),
        "{message}"
    );
}

#[test]
fn scan_periods_of_zero_or_above_the_maximum_are_refused() {
    use std::time::Duration;

    use idspace::cid::{ScanPlacement, MAX_SCAN_PERIOD};

    // The worker placement is a thread: a `std` build's only.
    let places: &[fn(Duration) -> ScanPlacement] = &[
        |period| ScanPlacement::Tick { period },
        #[cfg(feature = "std")]
        |period| ScanPlacement::Worker { period },
    ];
    for place in places {
        for period in [
            Duration::ZERO,
            MAX_SCAN_PERIOD + Duration::from_nanos(1),
            Duration::MAX,
        ] {
            assert_eq!(
                LazyCids::with_scan(2, place(period)).err(),
                Some(CidError::BadScanPeriod),
                "{period:?}"
            );
        }
        assert!(LazyCids::with_scan(2, place(MAX_SCAN_PERIOD)).is_ok());
    }
}

#[test]
fn affinity_lists_name_only_cpus_a_mask_holds() {
    assert_eq!(affinity_mask(&[70], 128), Err(CidError::BadCpu));
    assert_eq!(affinity_mask(&[64], 65), Err(CidError::BadCpu));
    assert_eq!(affinity_mask(&[63], 128), Ok(1 << 63));
    assert_eq!(affinity_mask(&[0, 3], 4), Ok(0b1001));
    assert_eq!(affinity_mask(&[4], 4), Err(CidError::BadCpu));
    assert_eq!(affinity_mask(&[], 4), Err(CidError::BadCpu));
}
