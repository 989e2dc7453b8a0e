//! The one way every loom test file runs a model.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Model-checks `model` over every interleaving loom explores (bounded by the `LOOM_*`
/// environment variables, e.g. `LOOM_MAX_PREEMPTIONS`, which loom's builder reads), then prints
/// how many it ran under `name`. The count is this model's own, even when the test harness runs
/// several models at once.
pub fn run_model(name: &str, model: impl Fn() + Sync + Send + 'static) {
    run_with(name, loom::model::Builder::new(), model);
}

/// [`run_model`] with loom's preemption bound capped at `bound`, for the models of a whole
/// runtime (two real workers, their parks, a task's whole life), whose interleavings at a bound
/// of 2 take many minutes: the protocol's pieces in them (the wakelist, the bell, the idle
/// word, the poller's park) have focused models that run at the full bound.
#[allow(dead_code, reason = "only the whole-runtime models use it")]
pub fn run_model_capped(name: &str, bound: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(builder.preemption_bound.map_or(bound, |b| b.min(bound)));
    run_with(name, builder, model);
}

fn run_with(name: &str, builder: loom::model::Builder, model: impl Fn() + Sync + Send + 'static) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    builder.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        model();
    });
    println!("{name}: {} interleavings", runs.load(Ordering::Relaxed));
}
