//! `idspace::process` scenarios: zombies, the init cascade, namespace freeing with memory back
//! to its start, checkpoint/restore through 4 levels with 2048 timers, refusals that change
//! nothing, and threads racing on one model.

#![cfg(feature = "std")]
#![cfg(not(loom))]

use std::sync::Arc;

use idspace::cid::{BitmapCids, CidAllocator, LazyCids, Rework};
use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, PerCpu, ROOT};
use idspace::process::{
    CidDesign, Image, PidDesign, ProcessError, Processes, TableDesign, ThreadImage, FREED_NS_BYTES,
};
use idspace::table::{GlobalHash, Radix, ScaledHash};

#[test]
fn a_zombie_leader_holds_its_ids_until_the_group_ends() {
    let system = Processes::new(2).unwrap();
    let init = system.fork(ROOT, 0).unwrap();
    assert_eq!(init.ids(), [1]);
    let p = system.fork(ROOT, 1).unwrap();
    let pid = p.tid();
    let t = system.clone_thread(pid, 0).unwrap();
    assert!(!system.exit(pid, 0).unwrap().process_exited);
    // The zombie is no live thread, but its IDs are held.
    assert_eq!(system.exit(pid, 0), Err(ProcessError::UnknownThread));
    let mut both = vec![pid, t.tid()];
    both.sort_unstable();
    assert_eq!(system.threads(pid).unwrap(), both);
    assert_eq!(system.lookup(ROOT, pid).unwrap(), Some((pid, pid)));
    let timer = system.timer_create(pid).unwrap();
    assert_eq!(system.timers(pid).unwrap(), [timer]);
    // The last live thread ends the process: timers gone, IDs freed.
    assert!(system.exit(t.tid(), 1).unwrap().process_exited);
    assert_eq!(system.timers(pid), Err(ProcessError::UnknownProcess));
    assert_eq!(system.lookup(ROOT, pid).unwrap(), None);
    assert_eq!(system.lookup(ROOT, t.tid()).unwrap(), None);
}

/// Four nested namespaces, each with an init, three more threads and ten timers, below the
/// root; the outer init ends and takes them all.
fn nested_round<P: PidDesign, C: CidDesign, T: TableDesign>(
    system: &Processes<P, C, T>,
    root_init: u32,
) {
    let mut nses = Vec::new();
    let mut parent = ROOT;
    for _ in 0..4 {
        parent = system.ns_new(parent).unwrap();
        nses.push(parent);
        let init = system.fork(parent, 0).unwrap();
        assert_eq!(init.ids()[0], 1, "{}", system.pids().name());
        for _ in 0..3 {
            system.clone_thread(init.tid(), 1).unwrap();
        }
        for _ in 0..10 {
            system.timer_create(init.tid()).unwrap();
        }
    }
    let outer_init = system.lookup(nses[0], 1).unwrap().unwrap().0;
    // The outer init ends: every process with an ID in its namespace goes with it.
    assert_eq!(system.kill(outer_init, 0), Ok(4));
    assert_eq!(system.process_ids(), [root_init]);
    for &ns in &nses {
        assert!(!system.ns_exists(ns), "namespace {ns} kept");
        assert_eq!(system.fork(ns, 0).err(), Some(ProcessError::NsDead));
        assert_eq!(system.ns_new(ns), Err(ProcessError::NsDead));
        assert_eq!(system.lookup(ns, 1), Ok(None));
    }
}

fn cascade_and_memory<P: PidDesign, C: CidDesign, T: TableDesign>() {
    let system: Processes<P, C, T> = Processes::with_designs(2).unwrap();
    let root_init = system.fork(ROOT, 0).unwrap().tid();
    // A first round warms up what the root keeps per CPU (`PerCpu`'s current ranges, the
    // root's radix leaf or bitmap word): the second one's namespaces, freed, give back
    // everything they took.
    nested_round(&system, root_init);
    let start = (system.model_bytes(), system.memory_bytes());
    nested_round(&system, root_init);
    let name = system.pids().name();
    // The model keeps each freed namespace's number and parent (its number answers as a dead
    // namespace for good), and nothing else.
    let kept = 4 * FREED_NS_BYTES;
    assert_eq!(
        system.model_bytes(),
        start.0 + kept,
        "{name}: the model's memory back"
    );
    assert_eq!(
        system.memory_bytes(),
        start.1 + kept,
        "{name}: all memory back"
    );
}

#[test]
fn an_init_takes_its_namespace_with_it_and_memory_returns() {
    cascade_and_memory::<PerCpu, Rework, ScaledHash<()>>();
    cascade_and_memory::<IdrOnce, Rework, Radix<()>>();
    cascade_and_memory::<IdrRelock, BitmapCids, GlobalHash<()>>();
    cascade_and_memory::<BitmapHash, LazyCids, ScaledHash<()>>();
}

#[test]
fn four_levels_and_2048_timers_survive_checkpoint_and_restore() {
    let system = Processes::new(2).unwrap();
    system.fork(ROOT, 0).unwrap();
    let mut ns = ROOT;
    for _ in 0..4 {
        ns = system.ns_new(ns).unwrap();
        system.fork(ns, 0).unwrap(); // each level's init
    }
    let leader = system.fork(ns, 1).unwrap();
    let pid = leader.tid();
    for _ in 0..63 {
        system.clone_thread(pid, 0).unwrap();
    }
    // 2048 timers 512 apart: create, delete the ones between.
    let mut kept = Vec::new();
    for i in 0..2048 * 512u32 {
        let id = system.timer_create(pid).unwrap();
        assert_eq!(id, i);
        if i % 512 == 0 {
            kept.push(id);
        } else {
            system.timer_delete(pid, id).unwrap();
        }
    }
    system.exit(pid, 0).unwrap(); // a zombie leader
    let image = system.checkpoint(pid).unwrap();
    assert!(image.threads[0].zombie);
    assert_eq!(image.threads.len(), 64);
    assert_eq!(image.timers, kept);
    let threads_before = system.threads(pid).unwrap();
    let ids_before: Vec<Vec<u32>> = threads_before
        .iter()
        .map(|&tid| system.thread(tid).unwrap().ids())
        .collect();
    // Restoring over the live process is refused and changes nothing.
    let memory = system.memory_bytes();
    assert_eq!(
        system.restore(ns, &image, 0).err(),
        Some(ProcessError::Exists)
    );
    assert_eq!(system.memory_bytes(), memory);
    system.kill(pid, 0).unwrap();
    let restored = system.restore(ns, &image, 1).unwrap();
    assert!(restored.zombie_leader);
    assert_eq!(restored.leader.tid(), pid);
    assert_eq!(system.threads(pid).unwrap(), threads_before);
    let ids_after: Vec<Vec<u32>> = threads_before
        .iter()
        .map(|&tid| system.thread(tid).unwrap().ids())
        .collect();
    assert_eq!(ids_after, ids_before);
    assert_eq!(system.timers(pid).unwrap(), kept);
    // The cursor came back too: the next timer is where it would have been.
    assert_eq!(system.timer_create(pid), Ok(2048 * 512));
    // The restored zombie cannot exit again; the last thread ends the process.
    assert_eq!(system.exit(pid, 0), Err(ProcessError::UnknownThread));
}

#[test]
fn bad_images_are_refused_by_name() {
    let system = Processes::new(1).unwrap();
    let thread = |ids: &[u32], zombie| ThreadImage {
        ids: ids.to_vec(),
        zombie,
    };
    let cases = [
        (vec![], vec![], "no threads"),
        (vec![thread(&[], false)], vec![], "without IDs"),
        (vec![thread(&[5], true)], vec![], "zombie leader without"),
        (
            vec![thread(&[5], false), thread(&[6, 7], false)],
            vec![],
            "depths",
        ),
        (vec![thread(&[5], false)], vec![3, 3], "ascending"),
        (vec![thread(&[0], false)], vec![], "ID of 0"),
    ];
    for (threads, timers, why) in cases {
        let image = Image {
            threads,
            timers,
            timer_cursor: 0,
            timer_states: Vec::new(),
        };
        match system.restore(ROOT, &image, 0) {
            Err(ProcessError::BadImage(text)) => assert!(text.contains(why), "{text}"),
            other => panic!("{why}: {other:?}"),
        }
    }
    let image = Image {
        threads: vec![thread(&[1], false)],
        timers: vec![],
        timer_cursor: 0,
        timer_states: Vec::new(),
    };
    assert_eq!(
        system.restore(7, &image, 0).err(),
        Some(ProcessError::UnknownNs)
    );
    assert!(matches!(
        Processes::new(0),
        Err(ProcessError::BadCpuCount(0))
    ));
    assert!(matches!(
        Processes::new(65),
        Err(ProcessError::BadCpuCount(65))
    ));
}

#[test]
fn threads_racing_keep_every_id_unique_and_release_everything() {
    const WORKERS: usize = 4;
    let system = Arc::new(Processes::new(WORKERS).unwrap());
    system.fork(ROOT, 0).unwrap();
    let ns = system.ns_new(ROOT).unwrap();
    let init = system.fork(ns, 0).unwrap();
    let start = system.model_bytes();
    std::thread::scope(|scope| {
        for cpu in 0..WORKERS {
            let system = Arc::clone(&system);
            scope.spawn(move || {
                for round in 0..200 {
                    let leader = system
                        .fork(if round % 2 == 0 { ROOT } else { ns }, cpu)
                        .unwrap();
                    let pid = leader.tid();
                    let threads: Vec<_> = (0..4)
                        .map(|_| system.clone_thread(pid, cpu).unwrap())
                        .collect();
                    // Run each thread on this CPU: a CID below the CPU count.
                    for thread in &threads {
                        let cid = thread.switch_in(cpu).expect("a CID while running");
                        assert!((cid as usize) < WORKERS);
                        thread.switch_out(cpu);
                    }
                    system.timer_create(pid).unwrap();
                    if round % 3 == 0 {
                        system.exit(pid, cpu).unwrap(); // a zombie for a while
                    }
                    for thread in &threads {
                        system.exit(thread.tid(), cpu).unwrap();
                    }
                    if round % 3 != 0 {
                        assert!(system.exit(pid, cpu).unwrap().process_exited);
                    }
                    assert_eq!(system.timers(pid), Err(ProcessError::UnknownProcess));
                }
            });
        }
    });
    assert_eq!(system.process_ids().len(), 2);
    assert_eq!(system.threads(init.tid()).unwrap(), [init.tid()]);
    assert_eq!(system.model_bytes(), start);
    assert_eq!(init.process().cids().state().users, 1);
}

// The kernel's `alloc_pid` in restores and failed first forks. In each case the sequential
// PID designs must give the kernel's IDs; `PerCpu` the same errors (and the same IDs where
// no free ID is left to pick).

/// An image of threads with `ids` (leader first), without timers.
fn image_of(ids: &[&[u32]]) -> Image {
    Image {
        threads: ids
            .iter()
            .map(|ids| ThreadImage {
                ids: ids.to_vec(),
                zombie: false,
            })
            .collect(),
        timers: Vec::new(),
        timer_cursor: 0,
        timer_states: Vec::new(),
    }
}

/// A fork's IDs, innermost first.
fn fork_ids<P: PidDesign>(system: &Processes<P>, ns: u32) -> Result<Vec<u32>, ProcessError> {
    system.fork(ns, 0).map(|thread| thread.ids())
}

fn restore_ids<P: PidDesign>(
    system: &Processes<P>,
    ns: u32,
    image: &Image,
) -> Result<Vec<u32>, ProcessError> {
    system.restore(ns, image, 0).map(|r| r.leader.ids())
}

/// Whether `P` picks the kernel's IDs (not `PerCpu`).
fn exact<P: PidDesign>(system: &Processes<P>) -> bool {
    system.pids().name() != "percpu"
}

fn restore_into_freed_ns_checks_levels_before_dead<P: PidDesign>() {
    let system: Processes<P> = Processes::with_designs(1).unwrap();
    fork_ids(&system, ROOT).unwrap();
    assert_eq!(system.ns_new(ROOT), Ok(1));
    assert_eq!(system.ns_new(ROOT), Ok(2));
    let init1 = system.fork(1, 0).unwrap();
    let init2 = system.fork(2, 0).unwrap();
    let image = system.checkpoint(init2.tid()).unwrap();
    system.kill(init1.tid(), 0).unwrap();
    assert!(!system.ns_exists(1));
    // Namespace 1's level takes ID 1; the root's ID is taken: exists, before dead.
    assert_eq!(
        restore_ids(&system, 1, &image),
        Err(ProcessError::Exists),
        "{}",
        system.pids().name()
    );
    // A free root ID: the restore is refused only once every level allocated.
    let free = image_of(&[&[1, 9]]);
    assert_eq!(restore_ids(&system, 1, &free), Err(ProcessError::NsDead));
    // Beyond the freed level's pid_max (the default): invalid first.
    let beyond = image_of(&[&[40_000, 3]]);
    assert_eq!(restore_ids(&system, 1, &beyond), Err(ProcessError::Invalid));
}

fn pid_max_on_a_freed_ns_bounds_set_tid<P: PidDesign>() {
    let system: Processes<P> = Processes::with_designs(1).unwrap();
    let mut last = 0;
    for _ in 0..302 {
        last = system.fork(ROOT, 0).unwrap().tid();
    }
    let image = system.checkpoint(last).unwrap();
    let ns = system.ns_new(ROOT).unwrap();
    let init = system.fork(ns, 0).unwrap();
    system.kill(init.tid(), 0).unwrap();
    assert!(!system.ns_exists(ns));
    // Its set_tid (302) is below the default pid_max: the root takes an ID, then dead.
    assert_eq!(restore_ids(&system, ns, &image), Err(ProcessError::NsDead));
    assert_eq!(system.set_pid_max(ns, 300), Err(ProcessError::Invalid));
    assert_eq!(system.set_pid_max(ns, 301), Ok(()));
    assert_eq!(
        restore_ids(&system, ns, &image),
        Err(ProcessError::Invalid),
        "{}",
        system.pids().name()
    );
    assert_eq!(system.set_pid_max(ns, 303), Ok(()));
    assert_eq!(restore_ids(&system, ns, &image), Err(ProcessError::NsDead));
}

fn inner_invalid_before_outer_exists<P: PidDesign>() {
    let system: Processes<P> = Processes::with_designs(1).unwrap();
    let ns = system.ns_new(ROOT).unwrap();
    fork_ids(&system, ns).unwrap();
    let second = system.fork(ns, 0).unwrap();
    let image = system.checkpoint(second.tid()).unwrap();
    let fresh = system.ns_new(ROOT).unwrap();
    assert_eq!(
        restore_ids(&system, fresh, &image),
        Err(ProcessError::Invalid),
        "{}",
        system.pids().name()
    );
    // The refusal took nothing: the fresh namespace's first process is its init.
    assert_eq!(fork_ids(&system, fresh).map(|ids| ids[0]), Ok(1));
}

fn leaders_ns_dead_before_a_threads_exists<P: PidDesign>() {
    let system: Processes<P> = Processes::with_designs(1).unwrap();
    let leader = system.fork(ROOT, 0).unwrap();
    system.clone_thread(leader.tid(), 0).unwrap();
    let image = system.checkpoint(leader.tid()).unwrap();
    let ns = system.ns_new(ROOT).unwrap();
    let init = system.fork(ns, 0).unwrap();
    let child = system.ns_new(ns).unwrap();
    system.kill(init.tid(), 0).unwrap();
    assert!(system.ns_exists(ns), "dead, kept for its child");
    // The living child still allocates in its dead parent, there the thread's ID (2) too.
    let in_child = fork_ids(&system, child).unwrap();
    if exact(&system) {
        assert_eq!(in_child, [1, 2, 4]);
    }
    // The leader's allocation fails first, as dead: the thread is never tried.
    assert_eq!(
        restore_ids(&system, ns, &image),
        Err(ProcessError::NsDead),
        "{}",
        system.pids().name()
    );
}

fn freed_ns_refusal_moves_outer_cursors<P: PidDesign>() {
    let system: Processes<P> = Processes::with_designs(1).unwrap();
    fork_ids(&system, ROOT).unwrap();
    let ns = system.ns_new(ROOT).unwrap();
    let init = system.fork(ns, 0).unwrap();
    let root_proc = system.fork(ROOT, 0).unwrap();
    let image = system.checkpoint(root_proc.tid()).unwrap();
    system.kill(init.tid(), 0).unwrap();
    assert!(!system.ns_exists(ns));
    assert_eq!(restore_ids(&system, ns, &image), Err(ProcessError::NsDead));
    let next = fork_ids(&system, ROOT);
    if exact(&system) {
        // The refused restore took root ID 4 before it saw the dead namespace.
        assert_eq!(next, Ok(vec![5]), "{}", system.pids().name());
    } else {
        assert!(next.is_ok_and(|ids| ids[0] != root_proc.tid()));
    }
}

fn later_threads_exists_keeps_leaders_cursor_moves<P: PidDesign>() {
    let system: Processes<P> = Processes::with_designs(1).unwrap();
    fork_ids(&system, ROOT).unwrap();
    let ns = system.ns_new(ROOT).unwrap();
    let leader = system.fork(ROOT, 0).unwrap();
    system.clone_thread(leader.tid(), 0).unwrap();
    for _ in 0..3 {
        fork_ids(&system, ns).unwrap();
    }
    // The leader's namespace ID (2) is free again; the thread's (3) is taken.
    if let Some((pid, _)) = system.lookup(ns, 2).unwrap() {
        system.kill(pid, 0).unwrap();
    }
    let thread_taken = system.lookup(ns, 3).unwrap().is_some();
    let got = restore_ids(&system, ns, &image_of(&[&[2], &[3]]));
    if exact(&system) {
        assert_eq!(got, Err(ProcessError::Exists), "{}", system.pids().name());
        // The leader's allocation took root ID 7, and freeing it did not move the cursor.
        assert_eq!(
            fork_ids(&system, ROOT),
            Ok(vec![8]),
            "{}",
            system.pids().name()
        );
    } else if thread_taken {
        assert_eq!(got, Err(ProcessError::Exists));
    }
    assert_eq!(
        system.lookup(ns, 2),
        Ok(None),
        "the refusal left no process"
    );
}

fn failed_first_fork_resets_the_cursor<P: PidDesign>() {
    let system: Processes<P> = Processes::with_designs(1).unwrap();
    system.set_pid_max(ROOT, 301).unwrap();
    for _ in 0..300 {
        fork_ids(&system, ROOT).unwrap();
    }
    let ns = system.ns_new(ROOT).unwrap();
    assert_eq!(fork_ids(&system, ns), Err(ProcessError::Full));
    system.kill(300, 0).unwrap();
    // The namespace's first process is its init, with the root's only free ID.
    assert_eq!(
        fork_ids(&system, ns),
        Ok(vec![1, 300]),
        "{}",
        system.pids().name()
    );
}

fn dead_ns_refusal_leaves_the_cursor_moved<P: PidDesign>() {
    let system: Processes<P> = Processes::with_designs(1).unwrap();
    fork_ids(&system, ROOT).unwrap();
    let ns = system.ns_new(ROOT).unwrap();
    system.ns_new(ns).unwrap();
    let init = system.fork(ns, 0).unwrap();
    let root_proc = system.fork(ROOT, 0).unwrap();
    let image = system.checkpoint(root_proc.tid()).unwrap();
    system.kill(init.tid(), 0).unwrap();
    assert!(system.ns_exists(ns), "dead, kept for its child");
    assert_eq!(restore_ids(&system, ns, &image), Err(ProcessError::NsDead));
    if exact(&system) {
        assert_eq!(fork_ids(&system, ROOT), Ok(vec![5]));
    }
}

fn the_kernels_cases<P: PidDesign>() {
    restore_into_freed_ns_checks_levels_before_dead::<P>();
    pid_max_on_a_freed_ns_bounds_set_tid::<P>();
    inner_invalid_before_outer_exists::<P>();
    leaders_ns_dead_before_a_threads_exists::<P>();
    freed_ns_refusal_moves_outer_cursors::<P>();
    later_threads_exists_keeps_leaders_cursor_moves::<P>();
    failed_first_fork_resets_the_cursor::<P>();
    dead_ns_refusal_leaves_the_cursor_moved::<P>();
}

#[test]
fn restores_and_first_forks_follow_the_kernels_alloc_pid() {
    the_kernels_cases::<IdrRelock>();
    the_kernels_cases::<IdrOnce>();
    the_kernels_cases::<BitmapHash>();
    the_kernels_cases::<PerCpu>();
}

#[test]
fn a_refused_restore_that_took_an_id_1_leaves_that_namespace_dead() {
    let system: Processes<IdrOnce> = Processes::with_designs(1).unwrap();
    fork_ids(&system, ROOT).unwrap();
    let fresh = system.ns_new(ROOT).unwrap();
    let below = system.ns_new(fresh).unwrap();
    // The leader takes the fresh namespace's ID 1 and root ID 50; the thread's root ID 1 is
    // the root's init's.
    let image = image_of(&[&[1, 50], &[2, 1]]);
    assert_eq!(
        restore_ids(&system, fresh, &image),
        Err(ProcessError::Exists)
    );
    // The restore had made the namespace's init; ending it ended the namespace, kept for its
    // child; the child, with no process, is alive.
    assert!(system.ns_exists(fresh));
    assert_eq!(fork_ids(&system, fresh), Err(ProcessError::NsDead));
    assert_eq!(system.ns_new(fresh), Err(ProcessError::NsDead));
    assert_eq!(system.lookup(ROOT, 50), Ok(None));
    assert_eq!(fork_ids(&system, below).map(|ids| ids[0]), Ok(1));
    // Without a child, the dead and empty namespace is freed.
    let lone = system.ns_new(ROOT).unwrap();
    assert_eq!(
        restore_ids(&system, lone, &image),
        Err(ProcessError::Exists)
    );
    assert!(!system.ns_exists(lone), "dead and empty: freed");
    assert_eq!(fork_ids(&system, lone), Err(ProcessError::NsDead));
}
