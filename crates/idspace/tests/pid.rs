//! The PID suite: every design must pass every test here.

#![cfg(not(loom))]

mod common;

use common::{miri_scaled, pid_designs};
use idspace::pid::{PerCpu, PidAllocator, PidError, RANGE, ROOT};

fn each(test: impl Fn(&dyn PidAllocator, &str)) {
    for design in pid_designs() {
        let name = design.name();
        test(design.as_ref(), name);
    }
}

fn sequential(test: impl Fn(&dyn PidAllocator, &str)) {
    for design in pid_designs().into_iter().filter(|d| d.name() != "percpu") {
        let name = design.name();
        test(design.as_ref(), name);
    }
}

#[test]
fn nested_allocations_get_an_id_per_level_and_init_is_one() {
    each(|d, name| {
        assert_eq!(d.alloc(ROOT, &[], 0).unwrap().ids(), vec![1], "{name}");
        let child = d.new_ns(ROOT).unwrap();
        let grandchild = d.new_ns(child).unwrap();
        let pid = d.alloc(grandchild, &[], 0).unwrap();
        let ids = pid.ids();
        assert_eq!(ids.len(), 3, "{name}");
        assert_eq!(ids[0], 1, "{name}: init of the new space");
        assert_eq!(ids[1], 1, "{name}: the child space's first ID");
        assert_eq!(pid.ns(), grandchild, "{name}");
        assert_eq!(pid.id_in(ROOT), Some(ids[2]), "{name}");
        for (ns, id) in [(grandchild, ids[0]), (child, ids[1]), (ROOT, ids[2])] {
            assert!(
                d.lookup(ns, id).unwrap().unwrap().same(&pid),
                "{name}: ({ns}, {id})"
            );
        }
        d.free(child, ids[1], 1).unwrap();
        for (ns, id) in [(grandchild, ids[0]), (child, ids[1]), (ROOT, ids[2])] {
            assert!(
                d.lookup(ns, id).unwrap().is_none(),
                "{name}: freed at every level"
            );
        }
        assert_eq!(d.free(child, ids[1], 0), Err(PidError::NotFound), "{name}");
    });
}

#[test]
fn the_kernel_sequence_cursor_floor_and_wrap() {
    sequential(|d, name| {
        d.set_pid_max(ROOT, 310).unwrap();
        let mut ids: Vec<u32> = (0..309)
            .map(|_| d.alloc(ROOT, &[], 0).unwrap().ids()[0])
            .collect();
        assert_eq!(ids, (1..310).collect::<Vec<_>>(), "{name}");
        assert_eq!(d.alloc(ROOT, &[], 0).unwrap_err(), PidError::Full, "{name}");
        // Free 5 and 305: the cursor is past 300, so the search wraps to 300, not 1.
        d.free(ROOT, 5, 0).unwrap();
        assert_eq!(
            d.alloc(ROOT, &[], 0).unwrap_err(),
            PidError::Full,
            "{name}: 5 is below the floor"
        );
        d.free(ROOT, 305, 0).unwrap();
        assert_eq!(d.alloc(ROOT, &[], 0).unwrap().ids(), vec![305], "{name}");
        ids.retain(|&id| id != 5);
        assert_eq!(
            d.alloc(ROOT, &[5], 0).unwrap().ids(),
            vec![5],
            "{name}: set_tid reaches below"
        );
    });
}

#[test]
fn set_tid_rules() {
    each(|d, name| {
        d.alloc(ROOT, &[], 0).unwrap(); // the root's init
        let child = d.new_ns(ROOT).unwrap();
        assert_eq!(
            d.alloc(child, &[5], 0).unwrap_err(),
            PidError::Invalid,
            "{name}: no init yet"
        );
        assert_eq!(
            d.alloc(child, &[1, 1, 1], 0).unwrap_err(),
            PidError::Invalid,
            "{name}: too long"
        );
        assert_eq!(
            d.alloc(child, &[0], 0).unwrap_err(),
            PidError::Invalid,
            "{name}"
        );
        assert_eq!(
            d.alloc(child, &[32768], 0).unwrap_err(),
            PidError::Invalid,
            "{name}: pid_max"
        );
        let init = d.alloc(child, &[1, 4000], 2).unwrap();
        assert_eq!(init.ids(), vec![1, 4000], "{name}");
        assert_eq!(
            d.alloc(child, &[1], 0).unwrap_err(),
            PidError::Exists,
            "{name}"
        );
        assert_eq!(
            d.alloc(child, &[7, 4000], 1).unwrap_err(),
            PidError::Exists,
            "{name}: outer"
        );
        assert!(
            d.lookup(child, 7).unwrap().is_none(),
            "{name}: the inner level was released"
        );
        let seven = d.alloc(child, &[7], 3).unwrap();
        assert_eq!(seven.ids()[0], 7, "{name}");
        assert_ne!(seven.ids()[1], 4000, "{name}");
    });
}

#[test]
fn a_space_dies_with_its_init() {
    each(|d, name| {
        d.alloc(ROOT, &[], 0).unwrap(); // the root's init
        let child = d.new_ns(ROOT).unwrap();
        let init = d.alloc(child, &[], 0).unwrap();
        let other = d.alloc(child, &[], 1).unwrap();
        d.free(ROOT, init.id_in(ROOT).unwrap(), 0).unwrap();
        assert_eq!(
            d.alloc(child, &[], 0).unwrap_err(),
            PidError::NamespaceDead,
            "{name}"
        );
        // Errors come level by level; death only after every level.
        assert_eq!(
            d.alloc(child, &[1], 0).unwrap_err(),
            PidError::NamespaceDead,
            "{name}"
        );
        assert_eq!(
            d.alloc(child, &[other.ids()[0]], 0).unwrap_err(),
            PidError::Exists,
            "{name}"
        );
        assert!(
            d.lookup(child, other.ids()[0]).unwrap().is_some(),
            "{name}: others live on"
        );
        assert!(d.alloc(ROOT, &[], 0).is_ok(), "{name}: the parent is alive");
    });
}

#[test]
fn failures_at_an_outer_level_release_inner_ids() {
    sequential(|d, name| {
        d.set_pid_max(ROOT, 301).unwrap();
        for _ in 1..301 {
            d.alloc(ROOT, &[], 0).unwrap();
        }
        let child = d.new_ns(ROOT).unwrap();
        assert_eq!(
            d.alloc(child, &[], 0).unwrap_err(),
            PidError::Full,
            "{name}"
        );
        assert!(
            d.lookup(child, 1).unwrap().is_none(),
            "{name}: inner ID released"
        );
        d.free(ROOT, 42, 0).unwrap();
        // 42 is below the 300 floor the root's cursor has passed: still full.
        assert_eq!(
            d.alloc(child, &[], 0).unwrap_err(),
            PidError::Full,
            "{name}"
        );
        d.free(ROOT, 300, 0).unwrap();
        // The child holds no object, so each failure put its cursor back at the start: its
        // first object is its init.
        assert_eq!(
            d.alloc(child, &[], 0).unwrap().ids(),
            vec![1, 300],
            "{name}"
        );
    });
}

/// A space whose first allocation fails is left at its start (`alloc_pid` resets the cursor
/// of a namespace with no PID allocated yet): its next object takes ID 1 and becomes its
/// init, whichever worker slot allocates it.
#[test]
fn a_failed_first_allocation_leaves_the_space_at_its_start() {
    each(|d, name| {
        d.set_pid_max(ROOT, 301).unwrap();
        for _ in 1..301 {
            d.alloc(ROOT, &[], 0).unwrap();
        }
        let child = d.new_ns(ROOT).unwrap();
        assert_eq!(
            d.alloc(child, &[], 1).unwrap_err(),
            PidError::Full,
            "{name}"
        );
        d.free(ROOT, 300, 2).unwrap();
        let init = d.alloc(child, &[], 3).unwrap();
        assert_eq!(init.ids(), vec![1, 300], "{name}");
        // It is the space's init: exact IDs other than 1 are accepted now, and freeing it
        // ends the space.
        d.free(ROOT, 300, 0).unwrap();
        assert_eq!(
            d.alloc(child, &[], 0).unwrap_err(),
            PidError::NamespaceDead,
            "{name}"
        );
    });
}

/// The reset is the target space's alone: the outer levels' cursors, moved by the failed
/// allocation, stay moved, as they do in the kernel.
#[test]
fn only_the_target_space_is_reset() {
    sequential(|d, name| {
        d.set_pid_max(ROOT, 303).unwrap();
        for _ in 1..303 {
            d.alloc(ROOT, &[], 0).unwrap();
        }
        let middle = d.new_ns(ROOT).unwrap();
        let inner = d.new_ns(middle).unwrap();
        // Takes 1 in `inner` and 1 in `middle`, then finds the root full.
        assert_eq!(
            d.alloc(inner, &[], 0).unwrap_err(),
            PidError::Full,
            "{name}"
        );
        d.free(ROOT, 301, 0).unwrap();
        d.free(ROOT, 302, 0).unwrap();
        assert_eq!(
            d.alloc(inner, &[], 0).unwrap().ids(),
            vec![1, 2, 301],
            "{name}: the middle level's cursor stayed moved"
        );
        assert_eq!(
            d.alloc(middle, &[], 0).unwrap().ids(),
            vec![3, 302],
            "{name}"
        );
    });
}

/// Every failure of an allocation into a space without an object resets it, one that moved no
/// cursor (an invalid `set_tid`) included; a space that holds an object keeps its cursor.
#[test]
fn the_reset_needs_a_live_space_without_objects() {
    sequential(|d, name| {
        d.set_pid_max(ROOT, 303).unwrap();
        let kept = d.new_ns(ROOT).unwrap();
        assert_eq!(d.alloc(kept, &[], 0).unwrap().ids(), vec![1, 1], "{name}");
        for _ in 2..303 {
            d.alloc(ROOT, &[], 0).unwrap();
        }
        let middle = d.new_ns(ROOT).unwrap();
        let inner = d.new_ns(middle).unwrap();
        assert_eq!(
            d.alloc(inner, &[], 0).unwrap_err(),
            PidError::Full,
            "{name}"
        );
        // `middle`'s cursor is at 2 now; a refused exact ID puts it back at the start.
        assert_eq!(
            d.alloc(middle, &[7], 0).unwrap_err(),
            PidError::Invalid,
            "{name}"
        );
        // `kept` holds its init: its failure leaves its cursor past the 2 it took.
        assert_eq!(d.alloc(kept, &[], 0).unwrap_err(), PidError::Full, "{name}");
        d.free(ROOT, 301, 0).unwrap();
        d.free(ROOT, 302, 0).unwrap();
        assert_eq!(
            d.alloc(middle, &[], 0).unwrap().ids(),
            vec![1, 301],
            "{name}"
        );
        assert_eq!(d.alloc(kept, &[], 0).unwrap().ids(), vec![3, 302], "{name}");
    });
}

#[test]
fn depth_limits_and_unknown_spaces() {
    each(|d, name| {
        let mut ns = ROOT;
        for _ in 0..32 {
            ns = d.new_ns(ns).unwrap();
        }
        assert_eq!(d.new_ns(ns), Err(PidError::TooDeep), "{name}");
        let pid = d.alloc(ns, &[], 0).unwrap();
        assert_eq!(pid.ids().len(), 33, "{name}");
        assert_eq!(d.new_ns(9999), Err(PidError::UnknownNs), "{name}");
        assert_eq!(
            d.alloc(9999, &[], 0).unwrap_err(),
            PidError::UnknownNs,
            "{name}"
        );
        assert_eq!(
            d.lookup(9999, 1).unwrap_err(),
            PidError::UnknownNs,
            "{name}"
        );
        assert_eq!(d.free(9999, 1, 0), Err(PidError::UnknownNs), "{name}");
        assert_eq!(d.set_pid_max(ROOT, 300), Err(PidError::Invalid), "{name}");
        assert_eq!(
            d.set_pid_max(ROOT, 4_194_305),
            Err(PidError::Invalid),
            "{name}"
        );
        assert_eq!(
            d.set_pid_max(9999, 1000),
            Err(PidError::UnknownNs),
            "{name}"
        );
    });
}

#[test]
fn memory_returns_to_its_start_after_everything_is_freed() {
    each(|d, name| {
        let child = d.new_ns(ROOT).unwrap();
        d.alloc(child, &[], 0).unwrap(); // the child's init stays
        let start = d.memory_bytes();
        let pids: Vec<_> = (0..miri_scaled(3000))
            .map(|i| d.alloc(child, &[], i % 4).unwrap())
            .collect();
        assert!(d.memory_bytes() > start, "{name}");
        for (i, pid) in pids.iter().enumerate() {
            d.free(ROOT, pid.id_in(ROOT).unwrap(), (i + 1) % 4).unwrap();
        }
        // Containers keep their capacity; nothing else may remain.
        let end = d.memory_bytes();
        assert!(end <= start + 64 * 1024, "{name}: {start} -> {end}");
    });
}

/// The deferred-reuse guarantee of `PerCpu`: a freed ID comes back only after at least
/// `RANGE × (F − 1)` allocations, F being the ranges not held when it was freed.
#[test]
fn percpu_defers_reuse() {
    let d = PerCpu::new(2).unwrap();
    // A smaller space under Miri: the same number of wraps, fewer ranges.
    let pid_max: u32 = if cfg!(miri) { 1024 } else { 32768 };
    d.set_pid_max(ROOT, pid_max).unwrap();
    d.alloc(ROOT, &[], 0).unwrap(); // the root's init stays
    let ranges = pid_max / RANGE;
    let mut freed_at: std::collections::HashMap<u32, usize> = Default::default();
    let mut min_gap = usize::MAX;
    for step in 0..(3 * pid_max as usize) {
        let pid = d.alloc(ROOT, &[], step % 2).unwrap();
        let id = pid.ids()[0];
        if let Some(&when) = freed_at.get(&id) {
            min_gap = min_gap.min(step - when);
        }
        d.free(ROOT, id, (step + 1) % 2).unwrap();
        freed_at.insert(id, step);
    }
    // At most two ranges (one current per CPU) are held at any time.
    let bound = (RANGE * (ranges - 2 - 1)) as usize;
    assert!(
        min_gap >= bound,
        "an ID came back after {min_gap} allocations (< {bound})"
    );
}
