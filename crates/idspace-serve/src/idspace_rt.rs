//! The service on idspace's own runtime (`idspace::sched`): its sockets (`idspace::net`, a
//! poller per worker) and hyper's traits over them (`idspace::hyper_rt`); the accept loop and
//! the API are the same code as on tokio.
//!
//! # Every request runs in a task that holds a CID
//!
//! The runtime is built with [`ProcessHooks`]: the service is one process of the runtime's
//! process model (made without a task of its own, as a daemon's main thread would be idle), and
//! every accepted connection is spawned as a new thread of that process
//! ([`Handle::spawn_thread_of`](idspace::sched::Handle)). At every switch-in its task takes a
//! CID from the process's CID space (the kernel's `mm_cid` design, [`idspace::cid::Rework`];
//! CIDs below the worker count) and gives it back at switch-out. A request's handler runs
//! inside its connection's task: hyper's HTTP/1.1 connection reads one request, polls its
//! handler's future inline in its own poll, writes the answer and only then reads the next, so
//! every poll of a handler is a poll of the connection's task, switched in with its CID held.
//! A task of its own per request would add a spawn, a join wakeup and a second switch to every
//! request, for no concurrency HTTP/1.1 has. The handler reads the CID
//! ([`idspace::process::current`]) to pick its lease node's per-CPU sub-range, and the
//! service's counters are per-CID ([`idspace::percid`]).
//!
//! A thread lives as long as its connection. The PID space is raised to the kernel's largest
//! `pid_max` (`PID_MAX_LIMIT`), far above any descriptor limit; should the model still refuse
//! a thread, that connection is closed at once (logged once), as an `accept` out of
//! descriptors would be.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use idspace::hyper_rt::{HyperIo, HyperTimer};
use idspace::net::{TcpListener, TcpStream};
use idspace::pid::ROOT;
use idspace::process::ProcessHooks;
use idspace::sched::{Builder, Handle, Runtime};
use tokio::sync::watch;

use crate::api::Service;
use crate::server::{serve, Listener, Task};

struct IdspaceListener(TcpListener);

impl Listener for IdspaceListener {
    type Io = HyperIo<TcpStream>;

    async fn accept(&self) -> io::Result<Self::Io> {
        let (stream, _) = self.0.accept().await?;
        stream.set_nodelay(true)?;
        Ok(HyperIo::new(stream))
    }
}

/// The runtime: `workers` workers with process hooks, and the PID of the service's process
/// (made without a task: its threads are the connections).
fn build(workers: usize) -> io::Result<(Runtime<ProcessHooks>, u32)> {
    let hooks: ProcessHooks = ProcessHooks::for_workers(workers)
        .map_err(|e| io::Error::other(format!("{workers} workers: {e}")))?;
    let threads = idspace::pid::PID_MAX_LIMIT;
    hooks
        .model()
        .set_pid_max(ROOT, threads)
        .map_err(|e| io::Error::other(format!("pid_max {threads}: {e}")))?;
    let pid = hooks
        .model()
        .fork(ROOT, 0)
        .map_err(|e| io::Error::other(format!("the service's process: {e}")))?
        .tid();
    let runtime = Builder::new()
        .workers(workers)
        .hooks(Arc::new(hooks))
        .build()
        .map_err(io::Error::other)?;
    Ok((runtime, pid))
}

/// Spawns a connection's task as a new thread of process `pid`; if the model refuses one, the
/// connection is closed (the task dropped) and that is logged once (`refused`).
fn spawn_connection(handle: &Handle<ProcessHooks>, pid: u32, task: Task, refused: &AtomicBool) {
    match handle.spawn_thread_of(pid, task) {
        // The join handle is dropped: the task is detached and runs to its end.
        Ok(thread) => drop(thread),
        Err(error) => {
            // Relaxed: only whether to log.
            if !refused.swap(true, Ordering::Relaxed) {
                crate::log(&format!(
                    "a connection was closed: no thread for it (logged once): {error}"
                ));
            }
        }
    }
}

/// Serves on an idspace runtime of `workers` workers until `stop` turns true.
pub(crate) fn run(
    workers: usize,
    listener: std::net::TcpListener,
    service: Arc<Service>,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let (mut runtime, pid) = build(workers)?;
    let handle = runtime.handle().clone();
    let refused = AtomicBool::new(false);
    let served = runtime.block_on(async move {
        let listener = IdspaceListener(TcpListener::from_std(listener)?);
        let timer = HyperTimer::new(&handle);
        let spawn = |task| spawn_connection(&handle, pid, task, &refused);
        serve(listener, spawn, timer, service, stop).await;
        Ok::<(), io::Error>(())
    });
    runtime.shutdown();
    served.map_err(io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_task_holds_a_cid_of_the_service_process() {
        let (runtime, pid) = build(2).unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        let refused = AtomicBool::new(false);
        for _ in 0..4 {
            let sender = sender.clone();
            let task: Task = Box::pin(async move {
                let _ = sender.send(idspace::process::current());
            });
            spawn_connection(runtime.handle(), pid, task, &refused);
        }
        for _ in 0..4 {
            let me = receiver
                .recv_timeout(std::time::Duration::from_secs(10))
                .unwrap()
                .expect("a task of a process");
            assert_eq!(me.root_pid, pid);
            assert!(me.cid.is_some_and(|cid| cid < 2), "{me:?}");
        }
        assert!(!refused.load(Ordering::Relaxed));
        drop(runtime);
    }
}
