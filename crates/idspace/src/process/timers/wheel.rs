//! The link from a model to the runtime whose timer wheel its timers arm on.

// std's `Arc` and `Weak`: the runtime hands out its driver as std's `Arc<dyn Driver>` (an
// unsized coercion, which loom's `Arc` lacks, and loom has no `Weak`); `OnceLock`: set once
// at attach, never on a path the loom models check, and loom has none.
use std::sync::{Arc, OnceLock, Weak};

use crate::sched::time::Driver;

/// The runtime a model's timers arm on, held weakly, since the runtime's hooks may hold the
/// model (a strong reference would make a cycle that keeps both alive).
#[derive(Default)]
pub(crate) struct WheelLink {
    driver: OnceLock<Weak<dyn Driver>>,
}

impl WheelLink {
    /// The runtime, if one is attached and still exists.
    pub(crate) fn driver(&self) -> Option<Arc<dyn Driver>> {
        self.driver.get()?.upgrade()
    }

    /// Attaches `driver`: `Some(true)` if it was not attached before, `Some(false)` if it
    /// was, `None` if another runtime is.
    pub(crate) fn attach(&self, driver: &Arc<dyn Driver>) -> Option<bool> {
        let weak = Arc::downgrade(driver);
        let mut new = false;
        let attached = self.driver.get_or_init(|| {
            new = true;
            weak.clone()
        });
        Weak::ptr_eq(attached, &weak).then_some(new)
    }
}
