//! The per-CID structures under real threads, far more of them than CPUs, with the kernel
//! doing its worst: signal and `sched_yield` storms (which must abort critical sections, and
//! the aborts are counted to prove it), affinity changes, threads exiting mid-run, a forked
//! child that keeps counting, and a run with glibc's rseq registration turned off.

#![cfg(feature = "std")]
#![cfg(not(any(loom, miri)))]

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use idspace::percid::{
    kernel_aborts_on_this_thread, rseq_registration, IndexSource, PerCidCounter, PerCidPool,
    Registration,
};

/// The rseq sources this thread can use (the stress is about sections; the thread-ID fallback
/// is checked too where cheap).
fn rseq_sources() -> Vec<IndexSource> {
    let sources: Vec<_> = [IndexSource::MmCid, IndexSource::CpuId]
        .into_iter()
        .filter(|source| source.available())
        .collect();
    if sources.is_empty() {
        eprintln!("no rseq on this machine: only the thread-ID fallback is stressed");
    }
    sources
}

fn all_sources() -> Vec<IndexSource> {
    let mut sources = rseq_sources();
    sources.push(IndexSource::ThreadIds);
    sources
}

#[test]
fn totals_are_exact_with_256_threads() {
    for source in all_sources() {
        let counter = PerCidCounter::with_source(source).unwrap();
        let adds = 2_000u64;
        thread::scope(|scope| {
            for thread in 0..256u64 {
                let counter = &counter;
                scope.spawn(move || {
                    for i in 0..adds {
                        counter.add(1 + (thread + i) % 3);
                    }
                });
            }
        });
        let expected: u64 = (0..256u64)
            .map(|t| (0..adds).map(|i| 1 + (t + i) % 3).sum::<u64>())
            .sum();
        assert_eq!(counter.sum(), expected, "{source:?}");
    }
}

/// Held by each test that sends signals: the handler is process-wide, so two storms at once
/// would feed each other's counters (and one could free a counter the other's handler uses).
static STORMS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The counter the signal handler adds to, and how often it ran.
static HANDLER_COUNTER: AtomicUsize = AtomicUsize::new(0);
static HANDLER_CALLS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_in_handler(_signal: libc::c_int) {
    let counter = HANDLER_COUNTER.load(Ordering::Acquire) as *const PerCidCounter;
    if !counter.is_null() {
        // A section inside the handler, interrupting (and aborting) one of the thread's own.
        // SAFETY: the counter outlives every thread the signal is sent to (see below).
        unsafe { (*counter).add(1) };
        HANDLER_CALLS.fetch_add(1, Ordering::Relaxed);
    }
}

fn install_handler() {
    // SAFETY: a zeroed sigaction with a plain handler and an empty mask is valid; the handler
    // only does async-signal-safe work (a section and an atomic add).
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = count_in_handler as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, core::ptr::null_mut()),
            0
        );
    }
}

/// Runs `work(worker, stop)` on `workers` threads while this thread sends them SIGUSR1 (and
/// half of them yield in their loops, as `work` decides), until the kernel has aborted sections
/// on the workers themselves and at least 2000 signals went out (or 20 s passed). Returns the
/// aborts counted on the workers.
fn storm(workers: usize, work: &(dyn Fn(usize, &AtomicBool) + Sync)) -> u64 {
    install_handler();
    let stop = AtomicBool::new(false);
    let aborts: Vec<AtomicU64> = (0..workers).map(|_| AtomicU64::new(0)).collect();
    let pthreads = std::sync::Mutex::new(Vec::new());
    // Long enough for a machine far busier than its CPUs: the loop ends as soon as an abort was seen.
    let deadline = Instant::now() + Duration::from_secs(60);
    thread::scope(|scope| {
        for worker in 0..workers {
            let (stop, aborts, pthreads) = (&stop, &aborts, &pthreads);
            scope.spawn(move || {
                // SAFETY: pthread_self has no preconditions.
                pthreads
                    .lock()
                    .unwrap()
                    .push(unsafe { libc::pthread_self() });
                let before = kernel_aborts_on_this_thread();
                while !stop.load(Ordering::Relaxed) {
                    work(worker, stop);
                    aborts[worker]
                        .store(kernel_aborts_on_this_thread() - before, Ordering::Relaxed);
                }
            });
        }
        while pthreads.lock().unwrap().len() < workers {
            thread::yield_now();
        }
        let pthreads = pthreads.lock().unwrap().clone();
        let seen = || {
            aborts
                .iter()
                .map(|a| a.load(Ordering::Relaxed))
                .sum::<u64>()
        };
        let mut sent = 0u64;
        while (seen() == 0 || sent < 2_000) && Instant::now() < deadline {
            for &thread in &pthreads {
                // SAFETY: the threads run until `stop` is raised, after the last signal.
                unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
                sent += 1;
            }
            thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
    });
    aborts.iter().map(|a| a.load(Ordering::Relaxed)).sum()
}

/// Threads count while one thread sends them signals (whose handler counts too, with sections
/// of its own) and half of them yield: sections on the counting threads are aborted, and still
/// every add, the handlers' too, is counted exactly once.
#[test]
fn signal_and_yield_storms_abort_sections_and_lose_nothing() {
    let _storm = STORMS.lock().unwrap_or_else(|p| p.into_inner());
    for source in rseq_sources() {
        // Signals go only to the workers, which have all exited when the counter is dropped.
        let counter = &PerCidCounter::with_source(source).unwrap();
        HANDLER_CALLS.store(0, Ordering::Relaxed);
        HANDLER_COUNTER.store(counter as *const _ as usize, Ordering::Release);
        let adds = AtomicU64::new(0);
        let aborts = storm(8, &|worker, _| {
            for _ in 0..64 {
                counter.add(1);
            }
            adds.fetch_add(64, Ordering::Relaxed);
            if worker % 2 == 0 {
                thread::yield_now();
            }
        });
        HANDLER_COUNTER.store(0, Ordering::Release);
        eprintln!(
            "{source:?}: {aborts} sections aborted on the counting threads, {} signals handled",
            HANDLER_CALLS.load(Ordering::Relaxed)
        );
        assert!(aborts > 0, "{source:?}: no section was ever aborted");
        assert_eq!(
            counter.sum(),
            adds.load(Ordering::Relaxed) + HANDLER_CALLS.load(Ordering::Relaxed),
            "{source:?}"
        );
    }
}

/// The pool's push and pop sections under the same storm: aborted, and still every object is
/// held by one holder at a time and none is lost.
#[test]
fn pool_sections_abort_under_signals_and_keep_every_object_once() {
    let _storm = STORMS.lock().unwrap_or_else(|p| p.into_inner());
    for source in rseq_sources() {
        let pool = PerCidPool::<usize>::with_source(source, 4).unwrap();
        let objects = 64;
        let held: Vec<AtomicBool> = (0..objects).map(|_| AtomicBool::new(false)).collect();
        for id in 0..objects {
            pool.give(Box::new(id));
        }
        let aborts = storm(8, &|worker, _| {
            let mut mine = Vec::new();
            for _ in 0..3 {
                if let Some(object) = pool.take() {
                    assert!(
                        !held[*object].swap(true, Ordering::Relaxed),
                        "object {} twice",
                        *object
                    );
                    mine.push(object);
                }
            }
            for object in mine {
                held[*object].store(false, Ordering::Relaxed);
                pool.give(object);
            }
            if worker % 2 == 0 {
                thread::yield_now();
            }
        });
        eprintln!("{source:?}: {aborts} pool sections aborted");
        assert!(aborts > 0, "{source:?}: no pool section was ever aborted");
        assert_eq!(pool.held(), objects, "{source:?}: objects lost");
    }
}

/// The CPUs this thread may run on (at most 8 of them).
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: a valid set of the size passed, for the calling thread.
    let got = unsafe { libc::sched_getaffinity(0, core::mem::size_of_val(&set), &mut set) };
    assert_eq!(got, 0, "sched_getaffinity failed");
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .take(8)
        .collect()
}

/// Moves the calling thread onto `cpus` (a subset of the allowed ones).
fn set_affinity(cpus: &[usize]) {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: `cpu` came from `allowed_cpus`, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: a valid set of the size passed, for the calling thread.
    let done = unsafe { libc::sched_setaffinity(0, core::mem::size_of_val(&set), &set) };
    assert_eq!(done, 0, "sched_setaffinity({cpus:?}) failed");
}

/// Threads pin themselves to one CPU after another (each move a migration the sections must
/// notice) while short-lived threads come and go: the total is exact.
#[test]
fn affinity_changes_and_exiting_threads_lose_nothing() {
    let cpus = allowed_cpus();
    for source in all_sources() {
        let counter = PerCidCounter::with_source(source).unwrap();
        let expected = AtomicU64::new(0);
        thread::scope(|scope| {
            for mover in 0..4 {
                let (counter, expected, cpus) = (&counter, &expected, &cpus);
                scope.spawn(move || {
                    for round in 0..200 {
                        set_affinity(&[cpus[(mover + round) % cpus.len()]]);
                        for _ in 0..100 {
                            counter.add(2);
                        }
                        expected.fetch_add(200, Ordering::Relaxed);
                    }
                    set_affinity(cpus);
                });
            }
            for wave in 0..20u64 {
                let short_lived: Vec<_> = (0..16)
                    .map(|_| {
                        let (counter, expected) = (&counter, &expected);
                        scope.spawn(move || {
                            for _ in 0..(50 + wave) {
                                counter.add(1);
                            }
                            expected.fetch_add(50 + wave, Ordering::Relaxed);
                        })
                    })
                    .collect();
                for thread in short_lived {
                    thread.join().unwrap();
                }
            }
        });
        assert_eq!(
            counter.sum(),
            expected.load(Ordering::Relaxed),
            "{source:?}"
        );
    }
}

/// A child forked mid-run keeps counting on its copy of the counter (the kernel carries the
/// forking thread's registration into the child): its total is the parent's at the fork plus
/// its own adds, while the parent's counter does not see the child's.
#[test]
fn a_forked_child_keeps_counting() {
    for source in all_sources() {
        let counter = PerCidCounter::with_source(source).unwrap();
        thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| (0..1_000).for_each(|_| counter.add(1)));
            }
        });
        let at_fork = counter.sum();
        // SAFETY: the child runs only async-signal-safe code (sections, atomic loads) and
        // leaves with `_exit`, never returning into the test harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            for _ in 0..10_000 {
                counter.add(3);
            }
            let ok = counter.sum() == at_fork + 30_000;
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        counter.add(1);
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out-pointer.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{source:?}: the child's total was wrong (status {status})"
        );
        assert_eq!(counter.sum(), at_fork + 1, "{source:?}");
    }
}

/// Threads take and give objects, marking each one held while they hold it: an object taken
/// while marked is one handed to two holders. At the end every object made is accounted for.
#[test]
fn the_pool_never_hands_one_object_to_two_holders_and_loses_none() {
    for source in all_sources() {
        let pool = PerCidPool::<usize>::with_source(source, 8).unwrap();
        let objects = 256;
        let held: Vec<AtomicBool> = (0..objects).map(|_| AtomicBool::new(false)).collect();
        for id in 0..objects {
            pool.give(Box::new(id));
        }
        let taken = AtomicU64::new(0);
        thread::scope(|scope| {
            for worker in 0..32 {
                let (pool, held, taken) = (&pool, &held, &taken);
                scope.spawn(move || {
                    let mut mine = Vec::new();
                    for round in 0..2_000usize {
                        if (round + worker) % 3 != 2 || mine.is_empty() {
                            // None: other lists may hold the objects; `held` counts them below.
                            if let Some(object) = pool.take() {
                                let was = held[*object].swap(true, Ordering::Relaxed);
                                assert!(!was, "object {} handed to two holders", *object);
                                taken.fetch_add(1, Ordering::Relaxed);
                                mine.push(object);
                            }
                        } else if let Some(object) = mine.pop() {
                            held[*object].store(false, Ordering::Relaxed);
                            pool.give(object);
                        }
                        if round % 512 == 0 {
                            thread::yield_now();
                        }
                    }
                    for object in mine {
                        held[*object].store(false, Ordering::Relaxed);
                        pool.give(object);
                    }
                });
            }
        });
        assert!(taken.load(Ordering::Relaxed) > 0);
        assert_eq!(pool.held(), objects, "{source:?}: objects lost");
        let mut seen = vec![false; objects];
        while let Some(object) = pool.take() {
            assert!(
                !seen[*object],
                "{source:?}: object {} twice in the pool",
                *object
            );
            seen[*object] = true;
        }
        // From one thread, `take` finds only its own list and the shared one; the rest sit on
        // other lists and were counted by `held` above.
    }
}

/// The environment variable that makes the fallback test's body run (in a child process).
const CHILD: &str = "IDSPACE_PERCID_FALLBACK_CHILD";

/// With glibc's rseq registration turned off by its tunable, the structures still work: the
/// crate registers areas of its own (when the kernel has rseq), and the totals stay exact. Runs
/// the test binary again as a child with the tunable set.
#[test]
fn with_glibc_rseq_off_the_crate_registers_its_own_areas() {
    let exe = std::env::current_exe().unwrap();
    let output = Command::new(exe)
        .args([
            "--exact",
            "fallback_child_body",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("GLIBC_TUNABLES", "glibc.pthread.rseq=0")
        .env(
            CHILD,
            if rseq_registration().is_some() {
                "rseq"
            } else {
                "none"
            },
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("fallback child done") || stderr.contains("fallback child done"),
        "the child did not run the body:\n{stdout}\n{stderr}"
    );
}

/// The child's half of the test above; does nothing unless run as that child.
#[test]
fn fallback_child_body() {
    let Ok(parent_had) = std::env::var(CHILD) else {
        return;
    };
    if parent_had == "rseq" {
        assert_eq!(
            rseq_registration(),
            Some(Registration::Own),
            "glibc's tunable was ignored?"
        );
        assert!(IndexSource::CpuId.available());
    }
    let counter = PerCidCounter::new();
    thread::scope(|scope| {
        for _ in 0..64 {
            scope.spawn(|| {
                // Each new thread registers its own area on first use.
                if parent_had == "rseq" {
                    assert_eq!(rseq_registration(), Some(Registration::Own));
                }
                (0..1_000).for_each(|_| counter.add(1));
            });
        }
    });
    assert_eq!(counter.sum(), 64_000, "{:?}", counter.source());
    let pool = PerCidPool::new();
    pool.give(Box::new(7u32));
    assert_eq!(pool.take().as_deref(), Some(&7));
    eprintln!("fallback child done on {:?}", counter.source());
}

/// Retiring counters under fire: workers add to the counter of the generation they read, with
/// `add_if` guarded by that generation, while a retirer moves the generation on, restarts every
/// section in flight, and snapshots the retired counter. No add may land after the snapshot,
/// and every add that reported success must be in it.
#[test]
fn no_guarded_add_commits_after_the_guard_changed_and_sections_restarted() {
    use std::sync::atomic::AtomicU32;

    const ROUNDS: usize = 300;
    for source in rseq_sources() {
        let counters: Vec<PerCidCounter> = (0..ROUNDS + 1)
            .map(|_| PerCidCounter::with_source(source).unwrap())
            .collect();
        let generation = AtomicU32::new(0);
        let done = AtomicBool::new(false);
        let mut snapshots = vec![0u64; ROUNDS];
        let reported: Vec<Vec<u64>> = thread::scope(|scope| {
            let workers: Vec<_> = (0..6)
                .map(|_| {
                    let (counters, generation, done) = (&counters, &generation, &done);
                    scope.spawn(move || {
                        let mut mine = vec![0u64; ROUNDS + 1];
                        while !done.load(Ordering::Relaxed) {
                            let round = generation.load(Ordering::Relaxed);
                            let added = counters[round as usize].add_if(1, generation, round);
                            if added.expect("an rseq counter on a thread with an area") {
                                mine[round as usize] += 1;
                            }
                        }
                        mine
                    })
                })
                .collect();
            for (round, snapshot) in snapshots.iter_mut().enumerate() {
                thread::sleep(Duration::from_micros(200));
                generation.store(round as u32 + 1, Ordering::Relaxed);
                if !idspace::percid::restart_sections() {
                    eprintln!("no membarrier RSEQ command: the retirement is not checked");
                    break;
                }
                *snapshot = counters[round].sum();
            }
            done.store(true, Ordering::Relaxed);
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let retired = generation.load(Ordering::Relaxed) as usize;
        for round in 0..retired {
            let successes: u64 = reported.iter().map(|mine| mine[round]).sum();
            assert_eq!(
                counters[round].sum(),
                snapshots[round],
                "{source:?}: an add landed in round {round}'s counter after its retirement"
            );
            assert_eq!(successes, snapshots[round], "{source:?}: round {round}");
        }
    }
}
