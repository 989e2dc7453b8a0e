//! POSIX timers of `idspace::process`: IDs from the process's cursor, settime/gettime/
//! getoverrun through the model, refusals that change nothing, deletion by exit, and
//! checkpoint/restore of armed timers (times long enough that none fires during a test).

#![cfg(feature = "std")]
#![cfg(not(loom))]

use std::sync::mpsc;

use idspace::pid::ROOT;
use idspace::process::{
    clock_gettime, Clock, ITimerSpec, Image, Notify, NotifyKind, ProcessError, Processes, TimeSpec,
    TimerError, When, NSEC_PER_SEC,
};

const HOUR: i64 = 3600;

fn secs(sec: i64) -> TimeSpec {
    TimeSpec::new(sec, 0)
}

fn nanos(time: TimeSpec) -> i128 {
    time.sec as i128 * NSEC_PER_SEC as i128 + time.nsec as i128
}

/// `left` is what remains of `set` after a short while: at most `set`, and less than a minute
/// below it (a bound for correctness, not timing: any test run is far shorter).
fn assert_left(left: TimeSpec, set: TimeSpec) {
    let (left, set) = (nanos(left), nanos(set));
    assert!(
        left <= set && left > set - 60 * NSEC_PER_SEC as i128,
        "{left} of {set}"
    );
}

#[test]
fn timer_ids_come_from_the_process_cursor_whatever_the_kind() {
    let system = Processes::new(2).unwrap();
    let pid = system.fork(ROOT, 0).unwrap().tid();
    let (tx, _rx) = mpsc::channel();
    assert_eq!(system.timer_create(pid), Ok(0));
    assert_eq!(
        system.timer_create_with(pid, Clock::Realtime, Notify::Wake),
        Ok(1)
    );
    assert_eq!(
        system.timer_create_with(pid, Clock::Monotonic, Notify::Channel(tx)),
        Ok(2)
    );
    system.timer_delete(pid, 1).unwrap();
    // The cursor moves on: a deleted ID is not handed out again before the wrap.
    assert_eq!(system.timer_create(pid), Ok(3));
    assert_eq!(system.timers(pid).unwrap(), [0, 2, 3]);
    assert_eq!(system.timer_count(pid), Ok(3));
    let other = system.fork(ROOT, 0).unwrap().tid();
    assert_eq!(system.timer_create(other), Ok(0), "IDs are per process");
}

#[test]
fn settime_gettime_and_disarm() {
    let system = Processes::new(1).unwrap();
    let pid = system.fork(ROOT, 0).unwrap().tid();
    let timer = system
        .timer_create_with(pid, Clock::Monotonic, Notify::Wake)
        .unwrap();
    assert_eq!(system.timer_gettime(pid, timer), Ok(ITimerSpec::DISARMED));
    let setting = ITimerSpec::every(secs(HOUR), secs(10));
    let old = system
        .timer_settime(pid, timer, When::Relative, setting)
        .unwrap();
    assert_eq!(old, ITimerSpec::DISARMED);
    let now = system.timer_gettime(pid, timer).unwrap();
    assert_left(now.value, secs(HOUR));
    assert_eq!(now.interval, secs(10));
    let old = system
        .timer_settime(pid, timer, When::Relative, ITimerSpec::DISARMED)
        .unwrap();
    assert_left(old.value, secs(HOUR));
    assert_eq!(old.interval, secs(10));
    assert_eq!(system.timer_gettime(pid, timer), Ok(ITimerSpec::DISARMED));
    assert_eq!(system.timer_getoverrun(pid, timer), Ok(0));
}

#[test]
fn a_realtime_absolute_time_converts_with_the_current_offset() {
    let system = Processes::new(1).unwrap();
    let pid = system.fork(ROOT, 0).unwrap().tid();
    let timer = system
        .timer_create_with(pid, Clock::Realtime, Notify::None)
        .unwrap();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let at = TimeSpec::new(wall.as_secs() as i64 + HOUR, 0);
    system
        .timer_settime(pid, timer, When::Absolute, ITimerSpec::once(at))
        .unwrap();
    assert_left(system.timer_gettime(pid, timer).unwrap().value, secs(HOUR));
}

#[test]
fn a_monotonic_absolute_time_is_a_reading_of_clock_gettime() {
    let system = Processes::new(1).unwrap();
    let pid = system.fork(ROOT, 0).unwrap().tid();
    let timer = system.timer_create(pid).unwrap();
    let now = clock_gettime(Clock::Monotonic);
    let at = TimeSpec::new(now.sec + HOUR, now.nsec);
    system
        .timer_settime(pid, timer, When::Absolute, ITimerSpec::once(at))
        .unwrap();
    assert_left(system.timer_gettime(pid, timer).unwrap().value, secs(HOUR));
    // A time already past expires at once: armed, with the least time left.
    system
        .timer_settime(pid, timer, When::Absolute, ITimerSpec::once(now))
        .unwrap();
    let left = system.timer_gettime(pid, timer).unwrap().value;
    assert_eq!(left, TimeSpec::new(0, 1));
    let real = clock_gettime(Clock::Realtime);
    assert!(real.sec > 1_600_000_000 && (0..NSEC_PER_SEC).contains(&real.nsec));
}

#[test]
fn bad_arguments_are_refused_and_change_nothing() {
    let system = Processes::new(1).unwrap();
    let pid = system.fork(ROOT, 0).unwrap().tid();
    let timer = system.timer_create(pid).unwrap();
    system
        .timer_settime(pid, timer, When::Relative, ITimerSpec::once(secs(HOUR)))
        .unwrap();
    let before = system.checkpoint(pid).unwrap();
    let bad = [
        (ITimerSpec::once(TimeSpec::new(-1, 0)), "negative"),
        (ITimerSpec::once(TimeSpec::new(1, -1)), "negative"),
        (
            ITimerSpec::once(TimeSpec::new(1, NSEC_PER_SEC)),
            "unnormalised",
        ),
        (
            ITimerSpec::every(secs(1), TimeSpec::new(0, 2 * NSEC_PER_SEC)),
            "unnormalised",
        ),
        (ITimerSpec::every(TimeSpec::ZERO, secs(-2)), "negative"),
    ];
    for (setting, name) in bad {
        let error = system
            .timer_settime(pid, timer, When::Absolute, setting)
            .unwrap_err();
        assert!(matches!(error, ProcessError::Timer(_)), "{error:?}");
        assert_eq!(error.name(), name);
        assert!(error.to_string().contains("bad timer argument"));
    }
    let setting = ITimerSpec::once(secs(1));
    assert_eq!(
        system.timer_settime(pid + 1, timer, When::Relative, setting),
        Err(ProcessError::UnknownProcess)
    );
    assert_eq!(
        system.timer_settime(pid, timer + 1, When::Relative, setting),
        Err(ProcessError::NotFound)
    );
    assert_eq!(system.timer_gettime(pid, 77), Err(ProcessError::NotFound));
    assert_eq!(
        system.timer_getoverrun(pid, 77),
        Err(ProcessError::NotFound)
    );
    assert_eq!(Clock::from_clockid(5), Err(TimerError::BadClock(5)));
    // Nothing changed but the remaining time, which the clock moves.
    let after = system.checkpoint(pid).unwrap();
    assert_eq!(after.timers, before.timers);
    assert_eq!(after.timer_cursor, before.timer_cursor);
    assert_eq!(after.timer_states.len(), 1);
    let (b, a) = (&before.timer_states[0], &after.timer_states[0]);
    assert_eq!(
        (a.id, a.notify, a.state.interval),
        (b.id, b.notify, b.state.interval)
    );
    assert!(a.state.remaining.unwrap() <= b.state.remaining.unwrap());
    // A deleted timer refuses everything.
    system.timer_delete(pid, timer).unwrap();
    assert_eq!(
        system.timer_settime(pid, timer, When::Relative, setting),
        Err(ProcessError::NotFound)
    );
    assert_eq!(
        system.timer_gettime(pid, timer),
        Err(ProcessError::NotFound)
    );
    assert_eq!(system.timer_delete(pid, timer), Err(ProcessError::NotFound));
    assert!(system.timer_wait(pid, timer).is_err());
}

#[test]
fn wait_refuses_a_timer_that_does_not_wake() {
    let system = Processes::new(1).unwrap();
    let pid = system.fork(ROOT, 0).unwrap().tid();
    let timer = system.timer_create(pid).unwrap();
    let wait = system.timer_wait(pid, timer).unwrap();
    let runtime = idspace::sched::Runtime::new(1, idspace::sched::Policy::Wakelist).unwrap();
    assert_eq!(
        runtime.block_on(wait).unwrap(),
        Err(ProcessError::NotWaitable)
    );
}

#[test]
fn exit_deletes_every_timer_and_wakes_waiters() {
    let system = Processes::new(1).unwrap();
    let leader = system.fork(ROOT, 0).unwrap();
    let pid = leader.tid();
    let timer = system
        .timer_create_with(pid, Clock::Monotonic, Notify::Wake)
        .unwrap();
    for _ in 0..10 {
        let id = system.timer_create(pid).unwrap();
        system
            .timer_settime(pid, id, When::Relative, ITimerSpec::once(secs(HOUR)))
            .unwrap();
    }
    let wait = system.timer_wait(pid, timer).unwrap();
    let runtime = idspace::sched::Runtime::new(1, idspace::sched::Policy::Wakelist).unwrap();
    let waiting = runtime.spawn(wait);
    assert!(system.exit(pid, 0).unwrap().process_exited);
    assert_eq!(
        runtime.block_on(waiting).unwrap().unwrap(),
        Err(ProcessError::NotFound)
    );
    assert_eq!(system.timer_count(pid), Err(ProcessError::UnknownProcess));
    assert_eq!(
        system.timer_gettime(pid, timer),
        Err(ProcessError::UnknownProcess)
    );
}

#[test]
fn checkpoint_and_restore_keep_armed_timers() {
    let system = Processes::new(2).unwrap();
    let init = system.fork(ROOT, 0).unwrap().tid();
    let pid = system.fork(ROOT, 0).unwrap().tid();
    let (tx, _rx) = mpsc::channel();
    let plain = system.timer_create(pid).unwrap();
    let mono = system
        .timer_create_with(pid, Clock::Monotonic, Notify::Wake)
        .unwrap();
    let real = system
        .timer_create_with(pid, Clock::Realtime, Notify::Channel(tx))
        .unwrap();
    let gone = system.timer_create(pid).unwrap();
    system.timer_delete(pid, gone).unwrap();
    system
        .timer_settime(
            pid,
            mono,
            When::Relative,
            ITimerSpec::every(secs(HOUR), secs(7)),
        )
        .unwrap();
    system
        .timer_settime(pid, real, When::Relative, ITimerSpec::once(secs(2 * HOUR)))
        .unwrap();
    let image = system.checkpoint(pid).unwrap();
    assert_eq!(image.timers, [plain, mono, real]);
    assert_eq!(image.timer_cursor, gone + 1);
    let kinds: Vec<(u32, NotifyKind, Clock)> = image
        .timer_states
        .iter()
        .map(|t| (t.id, t.notify, t.state.clock))
        .collect();
    assert_eq!(
        kinds,
        [
            (mono, NotifyKind::Wake, Clock::Monotonic),
            (real, NotifyKind::Channel, Clock::Realtime)
        ]
    );
    // Through serde, as a caller keeps it.
    let image: Image = serde_json::from_str(&serde_json::to_string(&image).unwrap()).unwrap();
    assert_eq!(system.kill(pid, 0), Ok(1));

    // A channel timer needs its channel.
    match system.restore(ROOT, &image, 0) {
        Err(ProcessError::BadImage(why)) => assert!(why.contains("no target"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(system.process_ids(), [init], "the refusal made nothing");

    let (tx, _rx) = mpsc::channel();
    let mut tx = Some(tx);
    let restored = system
        .restore_with(ROOT, &image, 0, |id, kind| match kind {
            NotifyKind::Channel => {
                assert_eq!(id, real);
                tx.take().map(Notify::Channel)
            }
            NotifyKind::Wake => Some(Notify::Wake),
            NotifyKind::None => Some(Notify::None),
            other => panic!("a kind this image does not hold: {other:?}"),
        })
        .unwrap();
    let pid = restored.leader.tid();
    assert_eq!(system.timers(pid).unwrap(), [plain, mono, real]);
    let back = system.timer_gettime(pid, mono).unwrap();
    assert_left(back.value, secs(HOUR));
    assert_eq!(back.interval, secs(7));
    assert_left(
        system.timer_gettime(pid, real).unwrap().value,
        secs(2 * HOUR),
    );
    assert_eq!(system.timer_gettime(pid, plain), Ok(ITimerSpec::DISARMED));
    // The cursor came back too: the next ID follows the deleted one.
    assert_eq!(system.timer_create(pid), Ok(gone + 1));
    let again = system.checkpoint(pid).unwrap();
    assert_eq!(again.timer_states.len(), 2);
    for (a, b) in again.timer_states.iter().zip(&image.timer_states) {
        assert_eq!(
            (a.id, a.notify, a.state.clock),
            (b.id, b.notify, b.state.clock)
        );
        assert!(a.state.remaining <= b.state.remaining);
    }
}

#[test]
fn a_refused_restore_leaves_no_timers() {
    let system = Processes::new(1).unwrap();
    let init = system.fork(ROOT, 0).unwrap().tid();
    let pid = system.fork(ROOT, 0).unwrap().tid();
    let timer = system
        .timer_create_with(pid, Clock::Monotonic, Notify::Wake)
        .unwrap();
    system
        .timer_settime(pid, timer, When::Relative, ITimerSpec::once(secs(HOUR)))
        .unwrap();
    let image = system.checkpoint(pid).unwrap();
    // The process still holds the image's PID: the restore is refused.
    assert_eq!(
        system.restore(ROOT, &image, 0).err(),
        Some(ProcessError::Exists)
    );
    assert_eq!(system.process_ids(), [init, pid]);
    assert_eq!(system.timer_count(pid), Ok(1));
    // Bad timer states are refused before anything is made.
    system.kill(pid, 0).unwrap();
    let mut bad = image.clone();
    bad.timer_states[0].id = 99;
    let mut pending = image.clone();
    pending.timer_states[0].state.overrun = 3;
    let mut order = image.clone();
    order.timer_states.push(order.timer_states[0]);
    for (image, why) in [
        (bad, "no timer"),
        (pending, "without a pending"),
        (order, "ascending"),
    ] {
        match system.restore(ROOT, &image, 0) {
            Err(ProcessError::BadImage(text)) => assert!(text.contains(why), "{text}"),
            other => panic!("{why}: {other:?}"),
        }
        assert_eq!(system.process_ids(), [init]);
    }
}

#[test]
fn images_without_timer_states_read_as_before() {
    let json = r#"{"threads":[{"ids":[5],"zombie":false}],"timers":[0,4],"timer_cursor":5}"#;
    let image: Image = serde_json::from_str(json).unwrap();
    assert!(image.timer_states.is_empty());
    assert_eq!(serde_json::to_string(&image).unwrap(), json);
}
