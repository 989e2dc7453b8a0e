//! [`AdminStore`]: the service's own connection to the store, for what requests ask of it
//! directly (creating a space, the health check, reclaiming a crashed identity's leases), and
//! the helpers that run such calls off the workers.
//!
//! The connection is lent to one call at a time, outside any lock: the call connects (if the
//! last one failed) and runs its statement with the connection to itself. A later call waits
//! for the connection to come back, but only for its own limit. So a call stuck on a server
//! that accepts and never answers (frozen, or cut off under an open connection) holds the
//! others up for that limit, not for ever. Each of them fails with `store_unreachable` and
//! its thread ends, where a lock held across the statement left one more thread blocked behind
//! it at every health check for as long as the server stayed frozen.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use idspace_lease::{LeaseError, Store};

use crate::error::ApiError;

/// Locks `mutex`, taking over a lock whose holder panicked: every value behind the crate's
/// locks stays consistent between statements.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A `store_unreachable` error with `why` as its whole message.
fn unreachable(why: String) -> ApiError {
    let mut error = ApiError::from(LeaseError::StoreUnreachable(String::new()));
    error.message = format!("store unreachable: {why}");
    error
}

/// The connection and whether a call has it.
struct Slot {
    store: Option<Store>,
    lent: bool,
}

/// A connection to the store lent to one call at a time (see the module docs).
pub(crate) struct AdminStore {
    url: String,
    slot: Mutex<Slot>,
    returned: Condvar,
}

/// The connection while a call has it; given back on drop.
struct Lent<'a> {
    owner: &'a AdminStore,
    store: Option<Store>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let mut slot = lock(&self.owner.slot);
        slot.store = self.store.take();
        slot.lent = false;
        drop(slot);
        self.owner.returned.notify_one();
    }
}

impl AdminStore {
    /// A store at `url`, connected at the first call.
    pub(crate) fn new(url: &str) -> AdminStore {
        AdminStore {
            url: url.to_string(),
            slot: Mutex::new(Slot {
                store: None,
                lent: false,
            }),
            returned: Condvar::new(),
        }
    }

    /// Runs `f` on the connection, connecting first if there is none; a failure to reach the
    /// store drops the connection. Waits at most `limit` for an earlier call to give the
    /// connection back.
    pub(crate) fn with<T>(
        &self,
        limit: Duration,
        f: impl FnOnce(&mut Store) -> Result<T, LeaseError>,
    ) -> Result<T, ApiError> {
        let mut lent = self.borrow(limit)?;
        if lent.store.is_none() {
            lent.store = Some(Store::connect(&self.url)?);
        }
        let Some(connected) = lent.store.as_mut() else {
            return Err(ApiError::from(LeaseError::Closed));
        };
        match f(connected) {
            Err(LeaseError::StoreUnreachable(why)) => {
                lent.store = None;
                // Said of the store alone: the lease error's own text ("no leased ID left")
                // speaks of a node's leases, which this connection does not serve.
                Err(unreachable(why))
            }
            result => Ok(result?),
        }
    }

    /// The connection, once no other call has it; `store_unreachable` if it is not back
    /// within `limit`.
    fn borrow(&self, limit: Duration) -> Result<Lent<'_>, ApiError> {
        let deadline = Instant::now() + limit;
        let mut slot = lock(&self.slot);
        while slot.lent {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(unreachable(format!(
                    "an earlier call has waited for the store's answer for over {} s",
                    limit.as_secs_f64()
                )));
            }
            slot = self
                .returned
                .wait_timeout(slot, left)
                .map_or_else(|poisoned| poisoned.into_inner().0, |(slot, _)| slot);
        }
        slot.lent = true;
        let store = slot.store.take();
        Ok(Lent { owner: self, store })
    }
}

/// [`off_thread`], but `store_unreachable` once `limit` has passed without a result (`f` runs
/// on meanwhile: a blocked call cannot be taken back). The limit is kept by a thread of its
/// own, which works on any runtime.
pub(crate) async fn off_thread_within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    // Whoever comes first, the result or the limit, answers.
    let sender = Arc::new(Mutex::new(Some(sender)));
    let late = sender.clone();
    std::thread::Builder::new()
        .name("idspace-serve-store".into())
        .spawn(move || {
            let result = f();
            if let Some(sender) = lock(&sender).take() {
                let _ = sender.send(Some(result));
            }
        })
        .map_err(|e| unreachable(format!("no thread: {e}")))?;
    std::thread::Builder::new()
        .name("idspace-serve-wait".into())
        .spawn(move || {
            std::thread::sleep(limit);
            if let Some(sender) = lock(&late).take() {
                let _ = sender.send(None);
            }
        })
        .map_err(|e| unreachable(format!("no thread: {e}")))?;
    match receiver.await {
        Ok(Some(result)) => Ok(result),
        Ok(None) => Err(unreachable(format!(
            "no answer within {} s",
            limit.as_secs_f64()
        ))),
        Err(_) => Err(unreachable("the store thread failed".into())),
    }
}

/// Runs `f` on a thread of its own and awaits its result, on any runtime.
pub(crate) async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("idspace-serve-store".into())
        .spawn(move || {
            let _ = sender.send(f());
        })
        .map_err(|e| unreachable(format!("no thread: {e}")))?;
    receiver
        .await
        .map_err(|_| unreachable("the store thread failed".into()))
}
