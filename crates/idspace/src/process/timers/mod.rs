//! POSIX timers of a process: each timer's [`PosixTimer`] state behind its own lock (the
//! kernel's `it_lock`), its notification target, and its entry in the runtime's timer wheel.
//!
//! # The kernel design
//!
//! `timer_create` allocates a `k_itimer`, takes an ID from the process's cursor in the global
//! hash (Linux 6.15's per-CPU-scaled one) and links the timer into `signal_struct::posix_timers`. `timer_settime`
//! and friends find the timer by (process, ID) in the hash and work under its `it_lock`; the
//! hrtimer's callback takes the same lock, queues the preallocated signal and, for an
//! interval timer, forwards the expiry. `exit_itimers` deletes every timer of an exiting
//! process, cancelling each hrtimer. A notification is a signal (`SIGEV_SIGNAL`,
//! `SIGEV_THREAD_ID`) or nothing (`SIGEV_NONE`).
//!
//! # Here
//!
//! The ID still comes from the process's owner in the table design; the timer itself lives
//! in the process's map from ID to timer (the table holds no values the model could reach
//! without the model's lock). Every timer operation but create and delete takes only the
//! map's lock for a lookup and then the timer's own lock, never the model's. Expiry comes
//! from the runtime's timer wheel (attached with
//! [`Processes::attach_wheel`]); without one, timers keep
//! their settings and times but never fire.
//!
//! Notifications ([`Notify`]) take the place of signals:
//!
//! * [`Notify::None`] is `SIGEV_NONE`: expirations are counted, nothing is sent.
//! * [`Notify::Wake`] wakes the tasks waiting in
//!   [`timer_wait`], as `sigwaitinfo` would: the first to run
//!   takes the notification and its overrun count.
//! * [`Notify::Channel`] sends a [`TimerEvent`] on a channel. The event is the queued signal:
//!   the notification stays pending, and later expirations count as its overruns, until the
//!   receiver [accepts](TimerEvent::accept) or drops it. An event whose receiver is gone is
//!   lost and its notification stays pending (overruns keep counting) until the next
//!   `timer_settime`.
//!
//! # Expiry on the wheel
//!
//! An armed timer has one entry on the runtime's wheel ([`Armed`]), holding an `Arming`: the
//! timer and the number of this arming. `timer_settime` replaces the entry (dropping the old
//! [`Armed`] cancels it), `timer_delete` and exit drop it. The wheel calls
//! [`Fire::fire`](crate::sched::time::Fire) with the time of its pass; the timer counts its
//! expirations up to then ([`PosixTimer::expire`]), notifies, and gives back the next
//! deadline of an interval timer, which re-arms the same entry. A cancel that comes while the
//! entry is firing does not wait for it: that `fire` then finds a newer arming number (or the
//! timer deleted) and changes nothing, so every expiration is counted by exactly one arming.
//! Deadlines are the wheel's, rounded up to its [`RESOLUTION`](crate::sched::time::RESOLUTION)
//! (100 µs): a timer never fires early, and a restored timer fires when the original would
//! have, to that resolution. The model holds its runtime weakly: the runtime's hooks hold the
//! model.
//!
//! Where we differ from the kernel: each arming allocates its small `Arming` (the kernel embeds
//! the hrtimer in the `k_itimer`); the wheel's low-level API takes its target as an
//! `Arc<dyn Fire>`, and a fresh one per arming is what tells a stale `fire` from a current one.
//!
//! # Files
//!
//! * `clock`: the clocks timers read, and the conversion between the wheel's [`Instant`]s and
//!   a timer's monotonic nanoseconds.
//! * `cell`: one timer under its lock, its arming on the wheel, and its notifications: the
//!   targets ([`Notify`]) and the event a channel receives ([`TimerEvent`]).
//! * `map`: a process's timers by ID.
//! * `wait`: the future of `timer_wait` ([`TimerWait`]).
//! * `wheel`: the model's weak link to the runtime whose wheel its timers arm on.
//!
//! [`Instant`]: std::time::Instant
//! [`PosixTimer`]: crate::process::PosixTimer
//! [`PosixTimer::expire`]: crate::process::PosixTimer::expire
//! [`Processes::attach_wheel`]: crate::process::Processes::attach_wheel
//! [`timer_wait`]: crate::process::Processes::timer_wait
//! [`Armed`]: crate::sched::time::Armed

mod cell;
mod clock;
mod map;
mod wait;
mod wheel;

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;

pub(crate) use cell::TimerCell;
pub use cell::{Notify, TimerEvent};
pub use clock::clock_gettime;
pub(crate) use clock::{mono_of, now};
pub(crate) use map::ProcessTimers;
pub use wait::TimerWait;
pub(crate) use wheel::WheelLink;
