//! The runtime's clock: a hierarchical timer wheel per worker, fired by the workers themselves.
//!
//! # The kernel design
//!
//! `kernel/time/timer.c` keeps one `timer_base` per CPU: a wheel of levels of 64 buckets, each
//! level 8 times coarser than the one below (since 4.8; before, the classic cascading wheel of
//! 256 + 4×64 buckets). `add_timer` puts a timer on the base of the CPU that arms it, under that
//! base's lock, in O(1); `del_timer` unlinks it in O(1) from whichever base holds it. The CPU
//! runs its own expired timers from the timer softirq, and an idle CPU programs its clock event
//! device for the base's next expiry (`get_next_timer_interrupt`, NOHZ idle) instead of taking
//! every tick. A timer armed from another CPU onto an idle one that would sleep past it kicks
//! that CPU (`trigger_dyntick_cpu`).
//!
//! # This module
//!
//! * **Where the wheel lives: one per worker** (`bases.rs`), for the kernel's reasons: a task
//!   arms and cancels its timeouts on the worker it runs on, which takes that worker's lock
//!   only, uncontended in the common case and on the worker's own cache lines; expiry is a
//!   local affair between polls; and each idle worker sleeps until its own next expiry, so no
//!   timer thread is needed and no worker is woken for another's timers. A shared wheel would
//!   put every arm and cancel of every worker on one lock and one set of lines: the pattern the
//!   lab's timeout churn measures. An arm from a thread that is not a worker goes to a worker
//!   chosen round-robin and notifies it if it must now wake earlier (the kick). Cancelling
//!   locks the base that holds the entry, wherever the caller runs.
//! * **The wheel** (`wheel.rs`): six levels of 64 slots over a slab of entries, O(1) arm and
//!   cancel, no allocation per arm once the slab has grown, and cancelling frees the entry at
//!   once (no tombstone waits for the deadline). Deadlines beyond the top level's span (79.5
//!   days) are parked and re-placed, never fired early.
//! * **Resolution: [`RESOLUTION`], 100 µs.** Deadlines are rounded up to a tick, so a timer
//!   never fires early and, on an idle worker, at most a tick plus a futex wakeup late. Tokio
//!   and the kernel's `jiffies` use a millisecond or more; 100 µs keeps lateness well under a
//!   millisecond for a little more cascading of long timers.
//! * **Firing**: a busy worker looks at its base's next expiry every few passes of its loop
//!   (one relaxed load; a clock read only when something is armed), an idle one before it
//!   sleeps; when it has passed, the due entries are detached under the lock, then their tasks
//!   are woken and their [`Fire`] targets called with no lock held. An idle worker polls until
//!   its next expiry at most, then parks on its idle word with a futex wait bounded by that
//!   expiry, and fires what woke it while it still counts as idle: like a timer interrupt on an
//!   idle CPU, the first task it wakes comes to it, its last worker, with no notification,
//!   instead of being sent to another worker that would have to be woken too.
//! * **Costs on the hot path** (a timeout armed and cancelled): no allocation once the slab has
//!   grown, two uncontended lock holds on the worker's own base, one clock read (the deadline's
//!   `now + duration`; the first poll reads none: a deadline the wheel has already seen pass
//!   completes at once, one that passed since is fired at the worker's next look), and no
//!   reference count of the runtime taken (an armed entry holds its base's own count).
//!
//! # The API
//!
//! * For tasks: [`sleep`], [`sleep_until`], [`timeout`] (failing with [`Elapsed`]) and
//!   [`interval`]. They find their runtime when first polled, from a task or a
//!   [`Runtime::block_on`](super::Runtime::block_on); polled anywhere else they panic with a
//!   message saying so. [`Handle::sleep`](super::Handle::sleep) and its siblings are bound to a
//!   runtime and work from any thread and any executor. Dropping a future cancels its entry.
//! * Low level, for timers that are not futures (the POSIX timers of the process layer):
//!   [`Handle::arm`](super::Handle::arm) arms an `Arc<dyn `[`Fire`]`>` at an instant and returns
//!   an [`Armed`], which cancels (saying whether the timer was still pending) and reports the
//!   pending deadline; dropping it cancels. [`Fire::fire`] may ask to be re-armed.
//!
//! ```
//! use std::time::Duration;
//! use idspace::sched::time::{interval, sleep, timeout};
//! use idspace::sched::{spawn, Policy, Runtime};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::new(2, Policy::Wakelist)?;
//! let period = runtime.block_on(async {
//!     // A task that sleeps, then answers.
//!     let answer = spawn(async {
//!         sleep(Duration::from_millis(2)).await;
//!         42
//!     })
//!     .expect("inside the runtime's block_on");
//!     // Waited for with a deadline long enough, then with one too short.
//!     let answer = timeout(Duration::from_secs(10), answer).await;
//!     assert_eq!(answer.expect("in time").expect("completed"), 42);
//!     assert!(timeout(Duration::from_millis(1), std::future::pending::<()>()).await.is_err());
//!     // Ticks stay on their schedule: whole periods apart.
//!     let mut ticks = interval(Duration::from_millis(1)).expect("a period");
//!     let first = ticks.tick().await;
//!     let second = ticks.tick().await;
//!     second - first
//! })?;
//! assert!(period >= Duration::from_millis(1));
//! assert_eq!(period.as_micros() % 1000, 0);
//! # Ok(())
//! # }
//! ```
//!
//! # Cancel racing expiry
//!
//! An expiring entry is *detached* under its base's lock before anything runs: unlinked, but its
//! slab index and generation kept. A cancel that takes the lock first finds it pending, frees it
//! and reports true: it never fires. A cancel that comes second finds it detached (or already
//! freed), frees it if still detached and reports false: the worker's re-arm, attempted under the
//! lock after `fire` returns, then finds the entry gone and drops the target. A sleeping
//! future's entry is freed in the same hold that detaches it, and its future sees the stale key
//! at its next poll and completes. The loom models in `tests/loom_time.rs` check both this race
//! and an arm from outside reaching a worker that is going to sleep.
//!
//! # Where we differ from the kernel
//!
//! * The wheel is tokio's shape more than today's `timer.c`: the kernel's levels are coarser
//!   by 8 and it never cascades, accepting up to 12.5% early-or-late slack per level
//!   (timers are "timeouts that rarely fire"); here every entry is re-placed as its slot comes
//!   round, so it fires within one tick of its deadline at any distance.
//! * No timer migration: a worker busy in a long poll delays its own timers (the kernel moves
//!   idle CPUs' timers to busy ones, `tmigr`, and a CPU is never stuck in one task's poll).
//! * The "interrupt" is the worker's own loop: there is no preemption, so a timer fires between
//!   polls, not in the middle of one.

mod arm;
mod bases;
mod clock;
mod interval;
mod sleep;
mod timeout;
mod wheel;

pub use arm::{Armed, Fire};
pub use clock::RESOLUTION;
pub use interval::{interval, interval_at, Interval, ZeroPeriod};
pub use sleep::{sleep, sleep_until, Sleep};
pub use timeout::{timeout, timeout_at, Elapsed, Timeout};

pub(crate) use arm::Driver;
pub(crate) use bases::{Expired, Timers};
#[cfg(not(loom))]
pub(crate) use sleep::deadline_after;
