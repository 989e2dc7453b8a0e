//! The accept loop's resilience: running out of descriptors does not end it.

use std::io;
use std::time::Duration;

use mio::event::Source;

use crate::sched::io::readiness::Direction;
use crate::sched::io::IoSource;

/// The first backoff after an accept ran out of resources.
pub(crate) const MIN_BACKOFF: Duration = Duration::from_millis(1);
/// The longest backoff.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Whether an accept error means the process or the system ran out of something that a
/// closing connection gives back (descriptors, buffers, memory): worth a retry, not an end.
pub(crate) fn out_of_resources(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Accepts with `accept` until it succeeds or fails for good. Out of resources, it writes the
/// error to standard error and backs off (doubling from [`MIN_BACKOFF`] to [`MAX_BACKOFF`]) on
/// the listener's runtime's timers; the pending connection waits in the kernel's backlog. A
/// connection the peer aborted before it was taken (`ECONNABORTED`) is skipped.
pub(crate) async fn accept_with_backoff<S: Source, T, A>(
    io: &IoSource<S>,
    name: impl Fn() -> String,
    mut accept: impl FnMut(&S) -> io::Result<(T, A)>,
) -> io::Result<(T, A)> {
    let mut backoff = MIN_BACKOFF;
    loop {
        match io.io(Direction::Read, &mut accept).await {
            Err(error) if out_of_resources(&error) => {
                eprintln!(
                    "idspace: accept on {} failed: {error}; the listener retries in {backoff:?}",
                    name()
                );
                let mut sleep = io.sleep(backoff);
                std::future::poll_fn(|cx| sleep.poll_checked(cx))
                    .await
                    .map_err(|_| crate::sched::io::readiness::shut_down_error())?;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(error) if error.raw_os_error() == Some(libc::ECONNABORTED) => {}
            accepted => return accepted,
        }
    }
}
