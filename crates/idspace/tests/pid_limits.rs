//! `PerCpu` holds a bounded number of PID spaces: the first one beyond is refused with a named
//! error (it used to be `Invalid`, "an argument is out of range").

#![cfg(not(loom))]

use idspace::pid::{PerCpu, PidAllocator, PidError, ROOT};

#[test]
fn percpu_refuses_the_space_beyond_its_capacity_by_name() {
    let pids = PerCpu::new(2);
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
