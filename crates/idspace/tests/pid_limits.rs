//! `PerCpu` holds a bounded number of PID spaces: the first one beyond is refused with a named
//! error (it used to be `Invalid`, "an argument is out of range"). Slot counts and `pid_max`
//! values out of range are refused by every design, before anything is allocated.

#![cfg(not(loom))]

use idspace::pid::{
    BitmapHash, IdrOnce, IdrRelock, PerCpu, PidAllocator, PidError, PID_MAX_LIMIT, PID_MAX_MIN,
    ROOT,
};
#[cfg(feature = "std")]
use idspace::process::PidDesign;

#[test]
fn percpu_refuses_the_space_beyond_its_capacity_by_name() {
    let pids = PerCpu::new(2).unwrap();
    // The root is the first space.
    for _ in 1..PerCpu::MAX_NAMESPACES {
        pids.new_ns(ROOT).unwrap();
    }
    assert_eq!(pids.new_ns(ROOT), Err(PidError::TooManyNamespaces));
    assert_eq!(
        PidError::TooManyNamespaces.to_string(),
        "the allocator holds no more spaces"
    );
    // The spaces it holds still work.
    let last = (PerCpu::MAX_NAMESPACES - 1) as u32;
    let pid = pids.alloc(last, &[], 0).unwrap();
    assert_eq!(pid.levels().len(), 2);
}

#[test]
fn percpu_refuses_a_slot_count_outside_its_range_before_allocating() {
    // `usize::MAX` used to panic with "capacity overflow", and 0 was taken as 1.
    for cpus in [0, usize::MAX, 1 << 40, PerCpu::MAX_CPUS + 1] {
        assert_eq!(
            PerCpu::new(cpus).err(),
            Some(PidError::BadCpuCount { cpus })
        );
    }
    assert_eq!(
        PidError::BadCpuCount { cpus: 0 }.to_string(),
        format!(
            "an allocator has 1 to {} worker slots, not 0",
            PerCpu::MAX_CPUS
        )
    );
    assert_eq!(PidError::BadCpuCount { cpus: 0 }.as_str(), "bad_cpu_count");
    for cpus in [1, PerCpu::MAX_CPUS] {
        assert_eq!(PerCpu::new(cpus).unwrap().cpus(), cpus);
    }
}

// `PidDesign` is the process layer's, a `std` build's only.
#[cfg(feature = "std")]
#[test]
fn every_pid_design_refuses_zero_slots_the_same_way() {
    fn refused<P: PidDesign>(cpus: usize) -> Option<PidError> {
        P::with_cpus(cpus).err()
    }
    let zero = Some(PidError::BadCpuCount { cpus: 0 });
    assert_eq!(refused::<PerCpu>(0), zero);
    assert_eq!(refused::<IdrOnce>(0), zero);
    assert_eq!(refused::<IdrRelock>(0), zero);
    assert_eq!(refused::<BitmapHash>(0), zero);
    let huge = usize::MAX;
    assert_eq!(
        refused::<PerCpu>(huge),
        Some(PidError::BadCpuCount { cpus: huge })
    );
    // The designs without per-CPU state take any other count: `cpu` arguments are hints.
    assert_eq!(refused::<IdrOnce>(huge), None);
}

#[test]
fn every_pid_design_refuses_an_absurd_pid_max() {
    let designs: Vec<Box<dyn PidAllocator>> = vec![
        Box::new(IdrRelock::new()),
        Box::new(IdrOnce::new()),
        Box::new(BitmapHash::new()),
        Box::new(PerCpu::new(2).unwrap()),
    ];
    for pids in &designs {
        for max in [0, PID_MAX_MIN - 1, PID_MAX_LIMIT + 1, u32::MAX] {
            assert_eq!(
                pids.set_pid_max(ROOT, max),
                Err(PidError::Invalid),
                "{} {max}",
                pids.name()
            );
        }
        assert_eq!(
            pids.set_pid_max(ROOT, PID_MAX_LIMIT),
            Ok(()),
            "{}",
            pids.name()
        );
    }
}
