//! A writing end many tasks share, over a runtime that keeps one writer waker per source.
//!
//! Our runtime's sources have one waker slot per direction (a reader and a writer, as the
//! split halves use them): a second task waiting to write on the same source replaces the
//! first one's waker, and the first is never woken. hackbench has 20 senders writing into
//! one receiver's socket, so the lab hands the runtime one waker for all of them, [`Fanout`]'s,
//! which wakes every sender parked on it, as tokio's waiter list does inside its runtime.
//!
//! No wakeup is lost: a sender reads the fan-out's generation before it tries the write, and
//! checks it again under the lock where it parks its waker; a wakeup in between (which bumps
//! the generation under that lock) makes it retry instead of park.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// The senders parked on one shared writing end.
#[derive(Default)]
struct Parked {
    wakers: Mutex<Vec<Waker>>,
    /// Bumped, under the lock, by every wakeup.
    generation: AtomicU64,
}

impl Wake for Parked {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let woken = {
            let mut wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
            // Relaxed: read and written under the lock (see `Fanout::poll_write`), besides
            // the unlocked first read, which the locked check corrects.
            self.generation.fetch_add(1, Ordering::Relaxed);
            std::mem::take(&mut *wakers)
        };
        woken.into_iter().for_each(Waker::wake);
    }
}

/// A writing end shared by many tasks.
pub(crate) struct Fanout<T> {
    inner: T,
    parked: Arc<Parked>,
    /// The one waker the runtime is given: it wakes every parked sender.
    waker: Waker,
}

impl<T> Fanout<T>
where
    for<'a> &'a T: futures_io::AsyncWrite,
{
    pub(crate) fn new(inner: T) -> Fanout<T> {
        let parked = Arc::new(Parked::default());
        Fanout {
            inner,
            waker: Waker::from(Arc::clone(&parked)),
            parked,
        }
    }

    /// Writes some of `buf`, or parks the calling task until the end is writable.
    pub(crate) fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let seen = self.parked.generation.load(Ordering::Relaxed);
        let mut shared = Context::from_waker(&self.waker);
        let written =
            futures_io::AsyncWrite::poll_write(Pin::new(&mut &self.inner), &mut shared, buf);
        if written.is_ready() {
            return written;
        }
        let mut wakers = self.parked.wakers.lock().unwrap_or_else(|e| e.into_inner());
        if self.parked.generation.load(Ordering::Relaxed) != seen {
            // Woken since the try: the end may have room now.
            drop(wakers);
            cx.waker().wake_by_ref();
        } else if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idspace::sched::{Builder, Placement, Policy};

    #[test]
    fn every_sender_parked_on_a_full_pipe_is_woken() {
        const SENDERS: usize = 8;
        const WRITES: usize = 1_000;
        let runtime = Builder::new()
            .workers(2)
            .policy(Policy::Wakelist)
            .placement(Placement::Remote)
            .build()
            .unwrap();
        let (tx, rx) = runtime
            .block_on(async { idspace::pipe::pipe() })
            .unwrap()
            .unwrap();
        let tx = Arc::new(Fanout::new(tx));
        // Each sender alone writes more than the pipe holds (64 KiB), so all of them park.
        let senders: Vec<_> = (0..SENDERS)
            .map(|_| {
                let tx = Arc::clone(&tx);
                runtime.spawn(async move {
                    for _ in 0..WRITES {
                        let mut rest: &[u8] = &[7; 100];
                        while !rest.is_empty() {
                            let n = std::future::poll_fn(|cx| tx.poll_write(cx, rest)).await?;
                            rest = &rest[n..];
                        }
                    }
                    Ok::<_, io::Error>(())
                })
            })
            .collect();
        drop(tx);
        let read = runtime.spawn(async move {
            let mut total = 0;
            let mut buf = [0u8; 4096];
            while total < SENDERS * WRITES * 100 {
                total += rx.read(&mut buf).await?;
            }
            Ok::<_, io::Error>(total)
        });
        for sender in senders {
            sender.join().unwrap().unwrap();
        }
        assert_eq!(read.join().unwrap().unwrap(), SENDERS * WRITES * 100);
    }
}
