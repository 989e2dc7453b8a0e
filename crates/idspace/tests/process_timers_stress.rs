//! POSIX timers on real workers: thousands of timers across many processes, armed from the
//! processes' own tasks and fired by the runtime's timer wheel. Each one-shot fires exactly
//! once, no deleted timer fires after its deletion, interval timers account for every
//! expiration (delivered notifications plus their overruns match the deadline the timer has
//! reached), waiting tasks get every notification, and a checkpoint/restore carries armed
//! timers that go on firing. No assertion is about timing: waits for expiries are bounded by a
//! generous guard only so that a lost expiry fails instead of hanging.

#![cfg(feature = "std")]
#![cfg(not(loom))]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use idspace::pid::ROOT;
use idspace::process::{
    clock_gettime, Clock, ITimerSpec, Notify, NotifyKind, ProcessHooks, Processes, TimeSpec,
    TimerEvent, When, NSEC_PER_SEC,
};
use idspace::sched::{Builder, Runtime};

/// How long a test waits for an expiry before calling it lost.
const GUARD: Duration = Duration::from_secs(60);

const MS: i64 = 1_000_000;

fn runtime(workers: usize) -> (Runtime<ProcessHooks>, Arc<Processes>) {
    let hooks = ProcessHooks::for_workers(workers).unwrap();
    let model = Arc::clone(hooks.model());
    let runtime = Builder::new()
        .workers(workers)
        .hooks(Arc::new(hooks))
        .build()
        .unwrap();
    model.attach_wheel(runtime.handle()).unwrap();
    // The root namespace's init, so that other processes' exits do not end it.
    model.fork(ROOT, 0).unwrap();
    (runtime, model)
}

/// A new process (its leader has no task, so it lives until killed) with a thread running
/// `task(pid)` on the workers.
fn in_process<F, R>(
    runtime: &Runtime<ProcessHooks>,
    model: &Processes,
    task: impl FnOnce(u32) -> F,
) -> (u32, idspace::sched::JoinHandle<R>)
where
    F: std::future::Future<Output = R> + Send + 'static,
    R: Send + 'static,
{
    let pid = model.fork(ROOT, 0).unwrap().tid();
    let join = runtime.handle().spawn_thread_of(pid, task(pid)).unwrap();
    (pid, join)
}

fn nanos(time: TimeSpec) -> i128 {
    time.sec as i128 * NSEC_PER_SEC as i128 + time.nsec as i128
}

fn after(nanoseconds: i64) -> TimeSpec {
    TimeSpec::from_nanos(nanoseconds as u64)
}

fn recv(rx: &Receiver<TimerEvent>) -> TimerEvent {
    match rx.recv_timeout(GUARD) {
        Ok(event) => event,
        Err(RecvTimeoutError::Timeout) => panic!("no expiry within {GUARD:?}: one was lost"),
        Err(RecvTimeoutError::Disconnected) => panic!("every sender is gone"),
    }
}

/// What a process's leader did: its PID, its one-shot timers left armed, those it deleted,
/// and the events it took before and right after each deletion.
struct Armed {
    pid: u32,
    rx: Receiver<TimerEvent>,
    live: BTreeSet<u32>,
    deleted: BTreeSet<u32>,
    seen: BTreeMap<u32, usize>,
}

#[test]
fn one_shots_fire_once_and_deleted_timers_never_fire() {
    const PROCESSES: usize = 24;
    const TIMERS: u32 = 200;
    let (runtime, model) = runtime(2);
    let mut joins = Vec::new();
    for p in 0..PROCESSES {
        let m = Arc::clone(&model);
        let (_, join) = in_process(&runtime, &model, |me| async move {
            let (tx, rx) = mpsc::channel();
            let mut armed = Armed {
                pid: me,
                rx,
                live: BTreeSet::new(),
                deleted: BTreeSet::new(),
                seen: BTreeMap::new(),
            };
            for i in 0..TIMERS {
                let clock = if i % 2 == 0 {
                    Clock::Monotonic
                } else {
                    Clock::Realtime
                };
                let id = m
                    .timer_create_with(me, clock, Notify::Channel(tx.clone()))
                    .unwrap();
                // 1 to 20 ms, spread over the processes and timers.
                let delay = (1 + (p as i64 * 7 + i as i64 * 13) % 20) * MS;
                m.timer_settime(me, id, When::Relative, ITimerSpec::once(after(delay)))
                    .unwrap();
                if i % 4 == 3 {
                    m.timer_delete(me, id).unwrap();
                    armed.deleted.insert(id);
                    // Anything it sent came before the deletion: take it now.
                    while let Ok(event) = armed.rx.try_recv() {
                        *armed.seen.entry(event.timer()).or_default() += 1;
                    }
                } else {
                    armed.live.insert(id);
                }
            }
            armed
        });
        joins.push(join);
    }
    let mut total = 0;
    for join in joins {
        let mut armed = join.join().unwrap();
        assert!(armed.seen.values().all(|&n| n == 1));
        // Until every live one-shot has fired once.
        while armed.live.iter().any(|id| !armed.seen.contains_key(id)) {
            let event = recv(&armed.rx);
            assert_eq!(event.pid(), armed.pid);
            assert!(
                !armed.deleted.contains(&event.timer()),
                "timer {} of process {} fired after its deletion",
                event.timer(),
                armed.pid
            );
            *armed.seen.entry(event.timer()).or_default() += 1;
            assert_eq!(event.accept(), Some(0), "a one-shot has no overruns");
        }
        total += armed.live.len();
        // A last timer, later than all the others: once it fired, any second firing of an
        // earlier one-shot would have come before it.
        let (tx, rx) = mpsc::channel();
        let last = model
            .timer_create_with(armed.pid, Clock::Monotonic, Notify::Channel(tx))
            .unwrap();
        model
            .timer_settime(
                armed.pid,
                last,
                When::Relative,
                ITimerSpec::once(after(30 * MS)),
            )
            .unwrap();
        assert_eq!(recv(&rx).timer(), last);
        if let Ok(event) = armed.rx.try_recv() {
            panic!(
                "timer {} of process {} fired twice or after its deletion",
                event.timer(),
                armed.pid
            );
        }
        for id in &armed.live {
            assert_eq!(armed.seen[id], 1);
            let left = model.timer_gettime(armed.pid, *id).unwrap();
            assert_eq!(left, ITimerSpec::DISARMED, "a fired one-shot is disarmed");
        }
    }
    assert_eq!(total, PROCESSES * (TIMERS as usize * 3 / 4));
}

/// Checks one interval timer's books: `delivered` expirations taken by its receiver, then a
/// checkpoint between `before` and `after` (monotonic nanoseconds) saw it with `pending`
/// (`overrun` more) and `remaining` to its next expiry. The next expiry is the first plus a
/// period per expiration counted.
#[allow(clippy::too_many_arguments)]
fn books_balance(
    first: i128,
    period: i128,
    delivered: u64,
    pending: bool,
    overrun: u64,
    remaining: u64,
    before: i128,
    after: i128,
) {
    let counted = delivered + if pending { 1 + overrun } else { 0 };
    let next = first + counted as i128 * period;
    if remaining > 0 {
        let checkpoint = next - remaining as i128;
        assert!(
            (before..=after).contains(&checkpoint),
            "{counted} expirations counted, but the next one is {remaining} ns after {checkpoint}, \
             outside the checkpoint's {before}..={after}"
        );
    } else {
        assert!(
            next <= after,
            "{counted} expirations counted, next at {next} > {after}"
        );
    }
}

/// An interval timer's ID, first expiry and period (monotonic nanoseconds).
type IntervalTimer = (u32, i128, i128);

#[test]
fn interval_timers_count_every_expiration() {
    const PROCESSES: usize = 8;
    const TIMERS: usize = 100;
    let (runtime, model) = runtime(2);
    let (tx, rx) = mpsc::channel::<TimerEvent>();
    let stop = Arc::new(AtomicBool::new(false));
    // The receiver takes events every 2 ms, so that expirations pile up as overruns; it stops
    // when told, before the checkpoints, keeping the channel open.
    let receiver = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut delivered: BTreeMap<(u32, u32), u64> = BTreeMap::new();
            while !stop.load(Ordering::SeqCst) {
                while let Ok(event) = rx.try_recv() {
                    let key = (event.pid(), event.timer());
                    let overrun = event.accept().expect("no timer is set again");
                    *delivered.entry(key).or_default() += 1 + u64::from(overrun);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            (delivered, rx)
        })
    };
    let mut armed = Vec::new();
    for p in 0..PROCESSES {
        let m = Arc::clone(&model);
        let tx = tx.clone();
        let (_, join) = in_process(&runtime, &model, |me| async move {
            let mut timers = Vec::new();
            for i in 0..TIMERS {
                let id = m
                    .timer_create_with(me, Clock::Monotonic, Notify::Channel(tx.clone()))
                    .unwrap();
                let period = (1 + (p + i) % 4) as i128 * MS as i128;
                let first = nanos(clock_gettime(Clock::Monotonic)) + period;
                let setting = ITimerSpec::every(
                    TimeSpec::from_nanos(first as u64),
                    TimeSpec::from_nanos(period as u64),
                );
                m.timer_settime(me, id, When::Absolute, setting).unwrap();
                timers.push((id, first, period));
            }
            (me, timers)
        });
        armed.push(join);
    }
    drop(tx);
    let armed: Vec<(u32, Vec<IntervalTimer>)> =
        armed.into_iter().map(|join| join.join().unwrap()).collect();
    // Tens of periods, then the receiver stops taking notifications.
    std::thread::sleep(Duration::from_millis(60));
    stop.store(true, Ordering::SeqCst);
    let (delivered, _rx) = receiver.join().unwrap();
    let mut overruns = 0;
    for (pid, timers) in &armed {
        let before = nanos(clock_gettime(Clock::Monotonic));
        let image = model.checkpoint(*pid).unwrap();
        let after = nanos(clock_gettime(Clock::Monotonic));
        for &(id, first, period) in timers {
            let state = image
                .timer_states
                .iter()
                .find(|t| t.id == id)
                .unwrap()
                .state;
            assert_eq!(state.interval as i128, period);
            let taken = delivered.get(&(*pid, id)).copied().unwrap_or(0);
            overruns += taken;
            books_balance(
                first,
                period,
                taken,
                state.pending,
                state.overrun,
                state.remaining.unwrap(),
                before,
                after,
            );
        }
        model.kill(*pid, 0).unwrap();
    }
    // Far more expirations than notifications taken: overruns were counted.
    assert!(overruns > 0);
}

#[test]
fn waiting_tasks_take_every_notification() {
    const PROCESSES: usize = 16;
    const WAITS: u32 = 20;
    let (runtime, model) = runtime(2);
    let mut joins = Vec::new();
    for p in 0..PROCESSES {
        let m = Arc::clone(&model);
        let (pid, join) = in_process(&runtime, &model, |me| async move {
            let id = m
                .timer_create_with(me, Clock::Monotonic, Notify::Wake)
                .unwrap();
            let period = after((1 + p as i64 % 3) * MS);
            m.timer_settime(me, id, When::Relative, ITimerSpec::every(period, period))
                .unwrap();
            let mut expirations = 0u64;
            for _ in 0..WAITS {
                let overrun = m.timer_wait(me, id).unwrap().await.unwrap();
                assert_eq!(m.timer_getoverrun(me, id), Ok(overrun));
                expirations += 1 + u64::from(overrun);
            }
            m.timer_settime(me, id, When::Relative, ITimerSpec::DISARMED)
                .unwrap();
            (id, expirations)
        });
        joins.push((pid, join));
    }
    for (pid, join) in joins {
        let (id, expirations) = join.join().unwrap();
        assert!(expirations >= u64::from(WAITS));
        assert_eq!(model.timer_gettime(pid, id), Ok(ITimerSpec::DISARMED));
        // A waiter on a timer deleted meanwhile is told so.
        let wait = model.timer_wait(pid, id).unwrap();
        let waiting = runtime.spawn(wait);
        model.kill(pid, 0).unwrap();
        assert_eq!(
            waiting.join().unwrap(),
            Err(idspace::process::ProcessError::NotFound)
        );
    }
}

#[test]
fn ended_processes_fire_nothing_and_restored_timers_fire_on_time() {
    const PROCESSES: usize = 32;
    const TIMERS: u32 = 64;
    let (runtime, model) = runtime(2);
    let (tx, rx) = mpsc::channel();
    let mut pids = Vec::new();
    for _ in 0..PROCESSES {
        let m = Arc::clone(&model);
        let tx = tx.clone();
        let (pid, join) = in_process(&runtime, &model, |me| async move {
            for i in 0..TIMERS {
                let id = m
                    .timer_create_with(me, Clock::Monotonic, Notify::Channel(tx.clone()))
                    .unwrap();
                // Half far away, half within a few milliseconds.
                let delay = if i % 2 == 0 {
                    3_600_000
                } else {
                    5 + i64::from(i % 10)
                };
                m.timer_settime(me, id, When::Relative, ITimerSpec::once(after(delay * MS)))
                    .unwrap();
            }
        });
        join.join().unwrap();
        pids.push(pid);
    }
    drop(tx);
    for &pid in &pids {
        assert_eq!(model.timer_count(pid), Ok(TIMERS as usize));
        model.kill(pid, 0).unwrap();
    }
    // Every sender went with its timer: the channel disconnects once the events sent before
    // the exits are out, and those are stale.
    loop {
        match rx.recv_timeout(GUARD) {
            Ok(event) => assert_eq!(event.accept(), None),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("an ended process's timer is still held"),
        }
    }

    // A process with armed timers is checkpointed, ended and restored: the restored timers
    // fire, each once, with their IDs.
    let leader = model.fork(ROOT, 0).unwrap().tid();
    let (tx, rx) = mpsc::channel();
    let mut ids = BTreeSet::new();
    for i in 0..TIMERS {
        let id = model
            .timer_create_with(leader, Clock::Realtime, Notify::Channel(tx.clone()))
            .unwrap();
        let delay = 20 + i64::from(i % 8);
        model
            .timer_settime(
                leader,
                id,
                When::Relative,
                ITimerSpec::once(after(delay * MS)),
            )
            .unwrap();
        ids.insert(id);
    }
    drop(tx);
    let image = model.checkpoint(leader).unwrap();
    assert!(image
        .timer_states
        .iter()
        .all(|t| t.notify == NotifyKind::Channel));
    model.kill(leader, 0).unwrap();
    let (tx, restored_rx) = mpsc::channel();
    let restored = model
        .restore_with(ROOT, &image, 0, |_, _| Some(Notify::Channel(tx.clone())))
        .unwrap();
    drop(tx);
    let pid = restored.leader.tid();
    let mut fired = BTreeSet::new();
    while fired.len() < ids.len() {
        let event = recv(&restored_rx);
        assert_eq!(event.pid(), pid);
        assert!(fired.insert(event.timer()), "fired twice");
        assert_eq!(event.accept(), Some(0));
    }
    assert_eq!(fired, ids);
    // The original's timers died with it: what they sent before (on a slow machine some
    // fire before the checkpoint, and the restore sends their pending notification again) is
    // stale, and then the channel disconnects.
    loop {
        match rx.recv_timeout(GUARD) {
            Ok(event) => assert_eq!(event.accept(), None),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("the original's timers are still held"),
        }
    }
    model.kill(pid, 0).unwrap();
    drop(runtime);
}
