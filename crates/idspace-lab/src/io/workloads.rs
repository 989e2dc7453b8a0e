//! The two messaging workloads as futures over any [`Channel`], so that our runtime and tokio
//! run the very same code: hackbench's groups, and UnixBench's pipe-based context switching.
//!
//! A task that meets an I/O error records it in the workload's [`Failed`] slot and ends; its
//! ends of the channels close with it, so the tasks talking to it get an error too (a broken
//! pipe, an end of stream) and end as well instead of waiting forever.

use std::sync::{Arc, OnceLock};

use super::channel::{read_exact, write_all, Channel};
use crate::wake::workloads::BoxedTask;

/// The size of one hackbench message.
pub(crate) const MESSAGE: usize = 100;

/// Senders and receivers per hackbench group (hackbench's `-f`, 20 by default).
pub(crate) const SIDE: usize = 20;

/// The first error a task of a workload met, if any.
pub(crate) type Failed = Arc<OnceLock<String>>;

/// A workload's tasks, and where they report a failure.
pub(crate) struct Workload {
    pub tasks: Vec<BoxedTask>,
    pub failed: Failed,
}

/// Runs `body`; an error lands in `failed` (the first one is kept), named by `what`.
async fn reporting(
    failed: Failed,
    what: &'static str,
    body: impl std::future::Future<Output = std::io::Result<()>>,
) {
    if let Err(error) = body.await {
        let _ = failed.set(format!("{what}: {error}"));
    }
}

/// hackbench's shape: `groups` groups of [`SIDE`] senders and [`SIDE`] receivers; each receiver
/// owns one channel that all the senders of its group write into, and each sender writes
/// `loops` messages of [`MESSAGE`] bytes to every receiver of its group, round-robin. A
/// receiver reads until it has all `SIDE × loops` messages.
pub(crate) fn hackbench<C: Channel>(groups: usize, loops: usize) -> std::io::Result<Workload> {
    let failed = Failed::default();
    let mut tasks: Vec<BoxedTask> = Vec::with_capacity(groups * 2 * SIDE);
    for group in 0..groups {
        let mut writers = Vec::with_capacity(SIDE);
        for _ in 0..SIDE {
            let (mut rx, tx) = C::open()?;
            writers.push(Arc::new(tx));
            let failed = failed.clone();
            tasks.push(Box::pin(reporting(failed, "receiver", async move {
                let mut message = [0u8; MESSAGE];
                for _ in 0..SIDE * loops {
                    read_exact::<C>(&mut rx, &mut message).await?;
                }
                Ok(())
            })));
        }
        for sender in 0..SIDE {
            let writers = writers.clone();
            let message = [(group * SIDE + sender) as u8; MESSAGE];
            tasks.push(Box::pin(reporting(failed.clone(), "sender", async move {
                for _ in 0..loops {
                    for tx in &writers {
                        write_all::<C>(tx, &message).await?;
                    }
                }
                Ok(())
            })));
        }
    }
    Ok(Workload { tasks, failed })
}

/// UnixBench's pipe-based context switching (`context1`): two tasks pass a counter back and
/// forth through two channels, `rounds` round trips, each checking that the counter it reads is
/// the one it expects.
pub(crate) fn switch<C: Channel>(rounds: u64) -> std::io::Result<Workload> {
    let failed = Failed::default();
    let (mut there_rx, there_tx) = C::open()?;
    let (mut back_rx, back_tx) = C::open()?;
    let first: BoxedTask = Box::pin(reporting(failed.clone(), "first task", async move {
        let mut word = [0u8; 8];
        for round in 0..rounds {
            write_all::<C>(&there_tx, &round.to_ne_bytes()).await?;
            read_exact::<C>(&mut back_rx, &mut word).await?;
            expect(round, word)?;
        }
        Ok(())
    }));
    let second: BoxedTask = Box::pin(reporting(failed.clone(), "second task", async move {
        let mut word = [0u8; 8];
        for round in 0..rounds {
            read_exact::<C>(&mut there_rx, &mut word).await?;
            expect(round, word)?;
            write_all::<C>(&back_tx, &word).await?;
        }
        Ok(())
    }));
    Ok(Workload {
        tasks: vec![first, second],
        failed,
    })
}

/// An error unless `word` holds `round`.
pub(crate) fn expect(round: u64, word: [u8; 8]) -> std::io::Result<()> {
    let got = u64::from_ne_bytes(word);
    if got == round {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "the counter read {got}, expected {round}"
        )))
    }
}
