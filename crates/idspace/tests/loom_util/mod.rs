//! The one way every loom test file runs a model.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Model-checks `model` over every interleaving loom explores (bounded by the `LOOM_*`
/// environment variables, e.g. `LOOM_MAX_PREEMPTIONS`, which loom's builder reads), then prints
/// how many it ran under `name`. The count is this model's own, even when the test harness runs
/// several models at once.
pub fn run_model(name: &str, model: impl Fn() + Sync + Send + 'static) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    loom::model::Builder::new().check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        model();
    });
    println!("{name}: {} interleavings", runs.load(Ordering::Relaxed));
}
