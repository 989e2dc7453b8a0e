//! Runtimes whose tasks are threads of processes, for the tests that run processes on real
//! workers.

#![allow(dead_code)]

use std::sync::Arc;

use idspace::process::ProcessHooks;
use idspace::sched::{Builder, Policy, Runtime};

/// Workers of every process runtime in these tests: more than this machine's 2 CPUs, so that
/// tasks of one process run on several workers at once.
pub const WORKERS: usize = 3;

/// A runtime of [`WORKERS`] workers with the default process designs, waking by `policy`, whose
/// model holds the root namespace's init (PID 1, as [`ProcessHooks::for_workers`] makes it): it
/// lives for the whole test, since its end would end every process.
pub fn runtime(policy: Policy) -> Runtime<ProcessHooks> {
    let hooks = ProcessHooks::for_workers(WORKERS).unwrap();
    Builder::new()
        .workers(WORKERS)
        .policy(policy)
        .hooks(Arc::new(hooks))
        .build()
        .unwrap()
}
