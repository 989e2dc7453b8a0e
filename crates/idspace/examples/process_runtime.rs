//! The process layer on the runtime: fork, threads, POSIX timers, kill, checkpoint and
//! restore into a second runtime.
//!
//! With [`ProcessHooks`], every task of a [`Runtime`](idspace::sched::Runtime) is a thread of a
//! process: [`spawn_process`](idspace::sched::Handle::spawn_process) forks one (a PID at every
//! namespace level), [`process::spawn_thread`] adds a thread to the caller's process, and
//! [`process::current`] tells a task its IDs and the CID it took at this switch-in. The
//! process's POSIX timers fire on the runtime's timer wheel: here a periodic one that a thread
//! waits on, and a one-hour one that stays armed. The process is checkpointed, killed, and its
//! image restored into a second runtime's model with the same PID and timer IDs, the hour
//! timer still armed; the restored timers fire on the second runtime's wheel once it is
//! attached, and a new thread of the restored process runs there.
//!
//! Run with `cargo run -p idspace --example process_runtime`.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use idspace::pid::ROOT;
use idspace::process::{self, Clock, ITimerSpec, Notify, ProcessHooks, TimeSpec, When};
use idspace::sched::{Builder, Runtime};

const WORKERS: usize = 2;
const MS: i64 = 1_000_000;

/// A runtime whose tasks are threads; its model starts with the root namespace's init (PID 1,
/// [`ProcessHooks::for_workers`]), which lives as long as the runtime, since its end would end
/// every process.
fn process_runtime() -> Result<Runtime<ProcessHooks>, Box<dyn std::error::Error>> {
    let hooks: ProcessHooks = ProcessHooks::for_workers(WORKERS)?;
    Ok(Builder::new()
        .workers(WORKERS)
        .hooks(Arc::new(hooks))
        .build()?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let first = process_runtime()?;
    let model = Arc::clone(first.handle().hooks().model());

    // A process whose leader starts two threads, runs a periodic timer, and arms an hour-long
    // one before telling the main thread it is ready for a checkpoint.
    let (ready, is_ready) = mpsc::channel();
    let leader = {
        let model = Arc::clone(&model);
        first.handle().spawn_process(ROOT, async move {
            let me = process::current().expect("a task of a process");
            println!("leader: pid {} tid {} cid {:?}", me.pid, me.tid, me.cid);
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    process::spawn_thread(async {
                        let me = process::current().expect("a thread of the process");
                        (me.tid, me.cid)
                    })
                    .expect("the process is alive")
                })
                .collect();
            for thread in threads {
                let (tid, cid) = thread.await.expect("the thread completed");
                println!("  thread tid {tid} ran with cid {cid:?}");
            }
            let tick = model.timer_create_with(me.pid, Clock::Monotonic, Notify::Wake)?;
            let every_ms = ITimerSpec::every(TimeSpec::new(0, MS), TimeSpec::new(0, MS));
            model.timer_settime(me.pid, tick, When::Relative, every_ms)?;
            for _ in 0..3 {
                let overrun = model.timer_wait(me.pid, tick)?.await?;
                println!("  timer {tick} fired (overrun {overrun})");
            }
            model.timer_settime(me.pid, tick, When::Relative, ITimerSpec::DISARMED)?;
            let hour = model.timer_create_with(me.pid, Clock::Monotonic, Notify::Wake)?;
            let in_an_hour = ITimerSpec::once(TimeSpec::new(3600, 0));
            model.timer_settime(me.pid, hour, When::Relative, in_an_hour)?;
            ready.send((me.pid, hour)).expect("main waits");
            // Waits for the hour timer: the process's end (the kill) ends the wait.
            model.timer_wait(me.pid, hour)?.await.map(|_| ())
        })?
    };
    let (pid, hour) = is_ready.recv_timeout(Duration::from_secs(30))?;

    // Checkpoint the live process, then kill it.
    let image = model.checkpoint(pid)?;
    println!(
        "checkpoint of {pid}: threads {:?}, timers {:?}",
        image
            .threads
            .iter()
            .map(|t| t.ids.clone())
            .collect::<Vec<_>>(),
        image.timers
    );
    let live = model.kill(pid, 0)?;
    println!(
        "killed {pid}: {live} live thread(s); the leader's task ended with {:?}",
        leader.join()
    );
    assert!(model.thread(pid).is_none(), "the process is gone");
    drop(first);

    // Restore into a second runtime: same PID, same timer IDs, the hour timer still armed.
    let second = process_runtime()?;
    let model = Arc::clone(second.handle().hooks().model());
    let restored = model.restore(ROOT, &image, 0)?;
    assert_eq!(restored.leader.tid(), pid);
    assert_eq!(model.timers(pid)?, image.timers);
    let left = model.timer_gettime(pid, hour)?;
    println!(
        "restored {pid} with timers {:?}; the hour timer has {} s left",
        model.timers(pid)?,
        left.value.sec
    );
    assert!(left.value.sec > 3500);
    // Restored timers fire on a runtime's wheel once it is attached.
    model.attach_wheel(second.handle())?;
    let thread = {
        let model = Arc::clone(&model);
        second.handle().spawn_thread_of(pid, async move {
            let me = process::current().expect("a thread of the restored process");
            let soon = ITimerSpec::once(TimeSpec::new(0, 2 * MS));
            model.timer_settime(pid, hour, When::Relative, soon)?;
            let overrun = model.timer_wait(pid, hour)?.await?;
            Ok::<_, idspace::process::ProcessError>((me.root_pid, me.tid, overrun))
        })?
    };
    let (root_pid, tid, overrun) = thread.join()??;
    println!("a new thread {tid} of restored process {root_pid} saw timer {hour} fire (overrun {overrun})");
    assert_eq!(root_pid, pid);
    Ok(())
}
