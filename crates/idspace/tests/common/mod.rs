//! Helpers shared by the integration tests.

#![allow(dead_code)]

/// `n` natively; a twentieth of it (at least 1) under Miri, whose interpreter runs the same
/// test about a thousand times slower. The tests check the same properties at either size.
pub const fn miri_scaled(n: usize) -> usize {
    if cfg!(miri) {
        if n / 20 > 0 {
            n / 20
        } else {
            1
        }
    } else {
        n
    }
}

use idspace::table::{GlobalHash, Id, IdTable, Radix, ScaledHash, Sizing};

/// Every table design, in configurations that exercise their machinery: the growing scaled
/// hash starts tiny so that it splits constantly.
pub fn table_designs(max_id: Id) -> Vec<Box<dyn IdTable<u64>>> {
    vec![
        Box::new(GlobalHash::with_max_id(max_id)),
        Box::new(
            ScaledHash::with_sizing_and_max_id(
                Sizing::Growing {
                    initial: 1,
                    max_load: 1,
                },
                max_id,
            )
            .expect("a valid sizing"),
        ),
        Box::new(
            ScaledHash::with_sizing_and_max_id(Sizing::Fixed { buckets: 64 }, max_id)
                .expect("a valid sizing"),
        ),
        Box::new(
            ScaledHash::with_sizing_and_max_id(Sizing::growing(), max_id).expect("a valid sizing"),
        ),
        Box::new(Radix::with_max_id(max_id)),
    ]
}

/// A label for assertion messages.
pub fn label(table: &dyn IdTable<u64>, index: usize) -> String {
    format!("design #{index} ({})", table.name())
}

use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, PerCpu, PidAllocator};

/// Every PID design; `PerCpu` with four worker slots.
pub fn pid_designs() -> Vec<Box<dyn PidAllocator>> {
    vec![
        Box::new(IdrRelock::new()),
        Box::new(IdrOnce::new()),
        Box::new(BitmapHash::new()),
        Box::new(PerCpu::new(4).unwrap()),
    ]
}

/// Runs `body` on a thread of its own and fails the test if it has not finished within a
/// minute: a test of deadlock freedom then fails fast instead of hanging the suite. Miri reports
/// a deadlock by itself (and its clock runs slow), so there the body simply runs.
pub fn without_deadlock(what: &str, body: impl FnOnce() + Send + 'static) {
    if cfg!(miri) {
        let _ = what;
        return body();
    }
    use std::sync::mpsc;
    use std::time::Duration;
    let (done, finished) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => worker.join().expect("the body finished"),
        // The body panicked: the sender dropped without a message; report its panic.
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still running after a minute, deadlocked")
        }
    }
}
