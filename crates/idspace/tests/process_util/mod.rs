//! Runtimes whose tasks are threads of processes, for the tests that run processes on real
//! workers.

#![allow(dead_code)]

use std::sync::Arc;

use idspace::pid::ROOT;
use idspace::process::ProcessHooks;
use idspace::sched::{Builder, Policy, Runtime};

/// Workers of every process runtime in these tests: more than this machine's 2 CPUs, so that
/// tasks of one process run on several workers at once.
pub const WORKERS: usize = 3;

/// A runtime of [`WORKERS`] workers with the default process designs, waking by `policy`, whose
/// model already holds the root namespace's PID 1: it lives for the whole test, since its end
/// would end every process.
pub fn runtime(policy: Policy) -> Runtime<ProcessHooks> {
    let hooks = ProcessHooks::for_workers(WORKERS).unwrap();
    hooks.model().fork(ROOT, 0).unwrap();
    Builder::new()
        .workers(WORKERS)
        .policy(policy)
        .hooks(Arc::new(hooks))
        .build()
        .unwrap()
}
