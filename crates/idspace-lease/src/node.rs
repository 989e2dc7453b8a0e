//! [`Node`]: one process's share of a space, served through per-CPU sub-ranges of leases.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use idspace::range::{RangeSource, SubRanges};

use crate::error::LeaseError;
use crate::store::{parse_url, Grant, Store};

/// Locks `mutex`, recovering the guard if a thread panicked while holding it: no code of ours
/// panics with these locks held, so the state behind them is whole.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The most worker slots a node has.
pub const MAX_CPUS: usize = 4096;

/// The longest an allocation waits for the background thread's round trip to the store (a
/// lease fetched, a renewal confirmed) before it fails with [`LeaseError::StoreUnreachable`]:
/// a server that accepts and never answers (frozen, or cut off under an open connection)
/// must fail the caller, as a server that is down does, not hang it.
const STORE_WAIT: Duration = Duration::from_secs(5);

/// Waits on `done` until `waiting` turns false, at most [`STORE_WAIT`]: the guard, and
/// whether the wait ran out with `waiting` still true.
fn wait_for_store<'a>(
    done: &Condvar,
    mut state: MutexGuard<'a, State>,
    mut waiting: impl FnMut(&State) -> bool,
) -> (MutexGuard<'a, State>, bool) {
    let since = Instant::now();
    while waiting(&state) {
        let left = STORE_WAIT.saturating_sub(since.elapsed());
        if left.is_zero() {
            return (state, true);
        }
        state = done
            .wait_timeout(state, left)
            .map_or_else(|poisoned| poisoned.into_inner().0, |(state, _)| state);
    }
    (state, false)
}

/// The error of an allocation whose wait for the store ran out.
fn no_answer() -> LeaseError {
    LeaseError::StoreUnreachable(format!(
        "no answer from the store within {} s",
        STORE_WAIT.as_secs()
    ))
}

/// The largest lease of a cyclic space (its bitmap of freed IDs is 2 MiB).
pub const CYCLIC_MAX_STEP: u64 = 1 << 24;

/// How a [`Node`] leases: built with [`Node::builder`] (see [`Node`] for one started).
///
/// The builder is a value: one configuration, cloned for each node of a process pool. Its
/// settings are taken when the node starts, which first connects:
///
/// ```
/// use std::time::Duration;
///
/// use idspace_lease::{LeaseError, Node, NodeBuilder};
///
/// let pool: NodeBuilder = Node::builder("host=/nonexistent-idspace-dir dbname=app", "orders")
///     .step(10_000, 1 << 22)
///     .ttl(Duration::from_secs(30))
///     .cpus(8)
///     .sub_range(256);
/// let web_1 = pool.clone().node_id("web-1");
/// // No server listens in that directory.
/// assert!(matches!(web_1.start(), Err(LeaseError::Connection(_))));
/// ```
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    url: String,
    space: String,
    node: String,
    min_step: u64,
    max_step: u64,
    ttl: Duration,
    target_life: Duration,
    cpus: usize,
    sub_range: u64,
}

impl NodeBuilder {
    /// This node's identity, recorded on its leases (default: host name and process ID).
    pub fn node_id(mut self, id: impl Into<String>) -> Self {
        self.node = id.into();
        self
    }

    /// Bounds of the lease size (IDs per lease): it starts at `min` and adapts within
    /// `[min, max]` (defaults 1000 and 1,048,576). Zero is taken as 1; `max` below `min` as
    /// `min`; in cyclic spaces both at most [`CYCLIC_MAX_STEP`].
    pub fn step(mut self, min: u64, max: u64) -> Self {
        // IDs are PostgreSQL bigints: no lease is larger than 2^63-1.
        let largest = i64::MAX as u64;
        self.min_step = min.clamp(1, largest);
        self.max_step = max.clamp(self.min_step, largest);
        self
    }

    /// How long a lease lasts without renewal (default 10 s; taken as at least 100 ms and at
    /// most a day).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.clamp(Duration::from_millis(100), Duration::from_secs(86_400));
        self
    }

    /// How long one lease should last at the current rate (default 2 s): a lease used up in
    /// less than half of it doubles the step, one lasting more than twice it halves the step.
    pub fn target_lease_life(mut self, life: Duration) -> Self {
        self.target_life = life;
        self
    }

    /// Worker slots of the per-CPU caches (default: this machine's CPUs; 1 to
    /// [`MAX_CPUS`]).
    pub fn cpus(mut self, cpus: usize) -> Self {
        self.cpus = cpus.clamp(1, MAX_CPUS);
        self
    }

    /// IDs a CPU takes from the lease at once (default 64; at least 1).
    pub fn sub_range(mut self, ids: u64) -> Self {
        self.sub_range = ids.max(1);
        self
    }

    /// Connects, migrates the schema, takes the first lease and starts the background thread
    /// that prefetches and renews leases.
    ///
    /// # Errors
    /// [`LeaseError::BadUrl`], [`LeaseError::Authentication`] or [`LeaseError::Connection`]
    /// from connecting (see [`Store::connect`]), [`LeaseError::UnknownSpace`] or
    /// [`LeaseError::Exhausted`] for the space. Once started, a lost store shows as
    /// [`LeaseError::StoreUnreachable`] when the leases held run out.
    pub fn start(self) -> Result<Node, LeaseError> {
        Node::start(self)
    }
}

/// A lease held by this node, and (cyclic spaces) which of its IDs are free again.
pub(crate) struct Lease {
    id: i64,
    epoch: i64,
    first: u64,
    last: u64,
    /// Until when (nanoseconds since the node's origin) IDs of it may be served without
    /// asking the store.
    deadline: AtomicU64,
    /// Taken over by another node: never served again.
    fenced: AtomicBool,
    /// Cyclic spaces: the IDs freed or never handed out, one bit each.
    book: Option<Mutex<Book>>,
}

/// Which IDs of a cyclic lease are free again.
struct Book {
    bits: Vec<u64>,
    free: u64,
}

impl Lease {
    fn len(&self) -> u64 {
        self.last - self.first + 1
    }

    /// Marks `ids` free; `Err(id)` for the first already free (nothing after it is marked).
    /// Returns whether the whole lease is free now.
    fn mark_free(&self, ids: Range<u64>) -> Result<bool, u64> {
        let Some(book) = &self.book else {
            return Ok(false);
        };
        let mut book = lock(book);
        for id in ids {
            let offset = (id - self.first) as usize;
            let (word, bit) = (offset / 64, 1u64 << (offset % 64));
            if book.bits[word] & bit != 0 {
                return Err(id);
            }
            book.bits[word] |= bit;
            book.free += 1;
        }
        Ok(book.free == self.len())
    }
}

/// The lease bookkeeping, under one lock.
struct State {
    /// The lease CPUs carve from, and the next ID to carve.
    current: Option<(Arc<Lease>, u64)>,
    /// The prefetched lease (the double buffer's second half).
    next: Option<Arc<Lease>>,
    /// Every lease that must be renewed, by first ID.
    held: BTreeMap<u64, Arc<Lease>>,
    /// Leases of a cyclic space whose every ID is free, to return.
    to_return: Vec<Arc<Lease>>,
    /// A monotonic lease used up, to drop with the next lease request.
    retire: Option<i64>,
    want_next: bool,
    renew_now: bool,
    /// Bumped after every attempt to fetch a lease, and after every renewal attempt.
    fetches: u64,
    renewals: u64,
    last_error: Option<LeaseError>,
    step: u64,
    last_grant: Instant,
}

/// Counters of a node's traffic with the store, read by [`Node::stats`] (see [`Node`] for
/// counters of a running node).
///
/// A health check on them:
///
/// ```
/// use std::time::Duration;
///
/// use idspace_lease::NodeStats;
///
/// /// Whether the node serves from a lease that is not about to expire.
/// fn healthy(stats: &NodeStats) -> bool {
///     stats.lease_expires_in.is_some_and(|left| left > Duration::from_secs(1))
/// }
///
/// let serving = NodeStats {
///     leases: 2,
///     ids_leased: 3000,
///     step: 2000,
///     left_current: 1200,
///     lease_expires_in: Some(Duration::from_secs(8)),
///     ..NodeStats::default()
/// };
/// assert!(healthy(&serving));
/// assert!(!healthy(&NodeStats::default()), "no lease held");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeStats {
    /// Statements sent to PostgreSQL (connections count one each).
    pub round_trips: u64,
    /// Leases granted.
    pub leases: u64,
    /// IDs granted by those leases.
    pub ids_leased: u64,
    /// The lease size now.
    pub step: u64,
    /// Leases found taken over (fenced).
    pub fenced: u64,
    /// Time spent waiting for the store's answers to lease requests, in all.
    pub lease_wait: Duration,
    /// IDs of the current lease not yet carved by a CPU.
    pub left_current: u64,
    /// IDs of the prefetched lease (0 if none is held yet).
    pub left_next: u64,
    /// How long until the lease served from (the current one, else the prefetched one)
    /// expires unless renewed: zero once it has; `None` while the node holds no lease.
    pub lease_expires_in: Option<Duration>,
}

/// What the node and its background thread share.
struct NodeShared {
    config: NodeBuilder,
    cyclic: bool,
    origin: Instant,
    state: Mutex<State>,
    /// Wakes the background thread.
    wake: Condvar,
    /// Wakes allocations waiting for a lease or a renewal.
    done: Condvar,
    closed: AtomicBool,
    round_trips: AtomicU64,
    leases: AtomicU64,
    ids_leased: AtomicU64,
    fenced: AtomicU64,
    /// Monotonic spaces: IDs carved by a CPU and given back unused (gaps).
    discarded: AtomicU64,
    /// Nanoseconds spent waiting for lease grants.
    lease_wait_ns: AtomicU64,
}

impl NodeShared {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// The deadline of a lease granted or renewed by a request sent at `sent`: the TTL
    /// shortened by a tenth, so that a node clock up to 10% slower than the server's still
    /// stops serving before the server lets the lease go.
    fn deadline(&self, sent: Instant) -> u64 {
        let since = sent.duration_since(self.origin);
        (since + self.config.ttl.mul_f64(0.9)).as_nanos() as u64
    }

    fn install(&self, state: &mut State, grant: Grant, sent: Instant) -> Arc<Lease> {
        let len = grant.last - grant.first + 1;
        let lease = Arc::new(Lease {
            id: grant.lease,
            epoch: grant.epoch,
            first: grant.first,
            last: grant.last,
            deadline: AtomicU64::new(self.deadline(sent)),
            fenced: AtomicBool::new(false),
            book: self.cyclic.then(|| {
                Mutex::new(Book {
                    bits: vec![0; len.div_ceil(64) as usize],
                    free: 0,
                })
            }),
        });
        if let Some(old) = state.held.insert(grant.first, lease.clone()) {
            // Our own expired lease, taken over by ourselves: the old copy is dead.
            // Release pairs with the Acquire load in `vouch`.
            old.fenced.store(true, Ordering::Release);
        }
        self.leases.fetch_add(1, Ordering::Relaxed);
        self.ids_leased.fetch_add(len, Ordering::Relaxed);
        lease
    }

    /// Lets the part `unused` of `lease` go: in a cyclic space it counts as free, and a lease
    /// wholly free is queued for return.
    fn release(&self, state: &mut State, lease: &Arc<Lease>, unused: Range<u64>) {
        if unused.is_empty() || lease.book.is_none() {
            return;
        }
        if let Ok(true) = lease.mark_free(unused) {
            self.queue_return(state, lease);
        }
    }

    fn queue_return(&self, state: &mut State, lease: &Arc<Lease>) {
        if state
            .held
            .get(&lease.first)
            .is_some_and(|held| Arc::ptr_eq(held, lease))
        {
            state.held.remove(&lease.first);
            state.to_return.push(lease.clone());
            self.wake.notify_one();
        }
    }
}

/// The lease source of the per-CPU caches.
struct Leases(Arc<NodeShared>);

impl RangeSource for Leases {
    type Grant = Arc<Lease>;
    type Error = LeaseError;

    fn carve(&self, _cpu: usize) -> Result<(Range<u64>, Arc<Lease>), LeaseError> {
        let shared = &self.0;
        let mut state = lock(&shared.state);
        loop {
            if shared.closed.load(Ordering::Relaxed) {
                return Err(LeaseError::Closed);
            }
            if let Some((lease, cursor)) = &mut state.current {
                // Acquire pairs with the Release stores of `fenced`.
                if *cursor <= lease.last && !lease.fenced.load(Ordering::Acquire) {
                    let start = *cursor;
                    let end = lease
                        .last
                        .min(start.saturating_add(shared.config.sub_range - 1));
                    *cursor = end + 1;
                    let lease = lease.clone();
                    // The double buffer: ask for the next lease once a tenth of this is used.
                    if state.next.is_none()
                        && !state.want_next
                        && (end - lease.first + 1).saturating_mul(10) >= lease.len()
                    {
                        state.want_next = true;
                        shared.wake.notify_one();
                    }
                    return Ok((start..end + 1, lease));
                }
                // Used up (or fenced): the tail never carved is let go.
                if let Some((lease, cursor)) = state.current.take() {
                    if !lease.fenced.load(Ordering::Acquire) {
                        shared.release(&mut state, &lease, cursor..lease.last + 1);
                        if !shared.cyclic {
                            state.held.remove(&lease.first);
                            state.retire = Some(lease.id);
                        }
                    }
                }
            }
            if let Some(next) = state.next.take() {
                let first = next.first;
                state.current = Some((next, first));
                continue;
            }
            // Both halves empty: wait for the background thread's next attempt.
            let attempt = state.fetches;
            state.want_next = true;
            shared.wake.notify_one();
            let (guard, ran_out) = wait_for_store(&shared.done, state, |state| {
                state.fetches == attempt
                    && state.next.is_none()
                    && !shared.closed.load(Ordering::Relaxed)
            });
            state = guard;
            if ran_out {
                return Err(no_answer());
            }
            if state.next.is_none() {
                if let Some(error) = state.last_error.clone() {
                    return Err(error);
                }
            }
        }
    }

    fn give_back(&self, _cpu: usize, lease: Arc<Lease>, unused: Range<u64>) {
        if !self.0.cyclic {
            let count = unused.end.saturating_sub(unused.start);
            self.0.discarded.fetch_add(count, Ordering::Relaxed);
        }
        let mut state = lock(&self.0.state);
        self.0.release(&mut state, &lease, unused);
    }

    fn vouch(&self, lease: &Arc<Lease>) -> Result<bool, LeaseError> {
        let shared = &self.0;
        // Acquire pairs with the Release stores of `fenced` and `deadline`.
        if lease.fenced.load(Ordering::Acquire) {
            return Ok(false);
        }
        if shared.now_ns() < lease.deadline.load(Ordering::Acquire) {
            return Ok(true);
        }
        let mut state = lock(&shared.state);
        if !shared.cyclic && !state.held.contains_key(&lease.first) {
            // A monotonic lease used up and retired while a CPU still serves its last
            // sub-range: it is no longer renewed (its row goes with the next grant), and a
            // monotonic range is never leased again, by anyone, so there is nothing for the
            // store to confirm. (A monotonic lease leaves `held` only when it is retired or
            // fenced, and a fenced one was refused above.)
            return Ok(true);
        }
        // Past the deadline: the store must confirm the epoch before anything more is served.
        let attempt = state.renewals;
        state.renew_now = true;
        shared.wake.notify_one();
        let (state, ran_out) = wait_for_store(&shared.done, state, |state| {
            state.renewals == attempt && !shared.closed.load(Ordering::Relaxed)
        });
        if ran_out {
            // Nothing is served from the lease: the store has not confirmed it.
            return Err(no_answer());
        }
        if lease.fenced.load(Ordering::Acquire) {
            return Ok(false);
        }
        if shared.now_ns() < lease.deadline.load(Ordering::Acquire) {
            return Ok(true);
        }
        Err(match &state.last_error {
            Some(error) => error.clone(),
            None => LeaseError::Closed,
        })
    }
}

/// One process's share of a space: IDs served through per-CPU sub-ranges of leases taken
/// from PostgreSQL, with the next lease prefetched and leases renewed in the background.
///
/// See the crate documentation for the guarantees, the clock assumption and what a pause
/// does.
///
/// Two CPUs serving from one lease, then a graceful stop and a restart of the same identity:
///
/// ```
/// use idspace_lease::server::{Durability, Throwaway};
/// use idspace_lease::{Node, NodeStats, Store};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = Throwaway::start(Durability { fsync: false })?;
/// Store::connect(&server.url())?.create_space("orders", 1, 1_000_000, false)?;
/// let builder = Node::builder(&server.url(), "orders")
///     .node_id("web-1")
///     .step(100, 100)
///     .cpus(2)
///     .sub_range(10);
/// let node = builder.clone().start()?;
/// // Each CPU carves its own sub-range of the lease 1..=100.
/// assert_eq!((node.next_id_on(0)?, node.next_id_on(1)?), (1, 11));
/// assert_eq!(node.next_id_on(0)?, 2);
/// let stats: NodeStats = node.stats();
/// assert!(stats.leases >= 1 && stats.round_trips >= 4);
/// assert_eq!(stats.left_current, 80, "IDs 21..=100 are not carved yet");
///
/// // A graceful stop parks the uncarved tail; the carved, unissued IDs are gaps.
/// let stopped = node.shutdown()?;
/// assert_eq!(stopped.discarded, 8 + 9);
/// assert!(stopped.parked >= 80);
/// let again = builder.start()?;
/// assert_eq!(again.next_id_on(0)?, 21, "the restart goes on from the parked tail");
/// # Ok(())
/// # }
/// ```
pub struct Node {
    ranges: SubRanges<Leases>,
    background: Option<JoinHandle<()>>,
}

impl Node {
    /// How to lease from `space` on the server at `url`; [`NodeBuilder::start`] starts it.
    pub fn builder(url: &str, space: &str) -> NodeBuilder {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().to_string())
            .unwrap_or_else(|_| "node".to_string());
        NodeBuilder {
            url: url.to_string(),
            space: space.to_string(),
            node: format!("{host}:{}", std::process::id()),
            min_step: 1000,
            max_step: 1 << 20,
            ttl: Duration::from_secs(10),
            target_life: Duration::from_secs(2),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_CPUS)),
            sub_range: 64,
        }
    }

    fn start(mut config: NodeBuilder) -> Result<Node, LeaseError> {
        let parsed = parse_url(&config.url)?;
        let mut store = Store::connect_with(&parsed)?;
        let info = store.space(&config.space)?;
        if info.cyclic {
            // A cyclic lease keeps one bit per ID: bound it.
            config.max_step = config.max_step.min(CYCLIC_MAX_STEP);
            config.min_step = config.min_step.min(config.max_step);
        }
        let origin = Instant::now();
        let sent = Instant::now();
        let grant = store.lease(
            &config.space,
            &config.node,
            config.min_step,
            config.ttl,
            None,
        )?;
        let cpus = config.cpus;
        let shared = Arc::new(NodeShared {
            cyclic: info.cyclic,
            origin,
            state: Mutex::new(State {
                current: None,
                next: None,
                held: BTreeMap::new(),
                to_return: Vec::new(),
                retire: None,
                want_next: false,
                renew_now: false,
                fetches: 0,
                renewals: 0,
                last_error: None,
                step: config.min_step,
                last_grant: Instant::now(),
            }),
            config,
            wake: Condvar::new(),
            done: Condvar::new(),
            closed: AtomicBool::new(false),
            // Connect, migrate (a transaction of a few statements), space, lease.
            round_trips: AtomicU64::new(4),
            leases: AtomicU64::new(0),
            ids_leased: AtomicU64::new(0),
            fenced: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            lease_wait_ns: AtomicU64::new(0),
        });
        {
            let mut state = lock(&shared.state);
            let lease = shared.install(&mut state, grant, sent);
            let first = lease.first;
            state.current = Some((lease, first));
        }
        let background = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("idspace-lease".into())
                .spawn(move || background(shared, parsed, Some(store)))
                .map_err(|e| LeaseError::StoreUnreachable(format!("no background thread: {e}")))?
        };
        Ok(Node {
            ranges: SubRanges::new(Leases(shared), cpus),
            background: Some(background),
        })
    }

    /// The next ID, from the calling thread's CPU's sub-range.
    pub fn next_id(&self) -> Result<u64, LeaseError> {
        self.ranges.next(current_cpu())
    }

    /// The next ID from worker slot `cpu`'s sub-range (`cpu % cpus`).
    pub fn next_id_on(&self, cpu: usize) -> Result<u64, LeaseError> {
        self.ranges.next(cpu)
    }

    /// Frees `id` in a cyclic space; once every ID of a lease is free (handed out and freed,
    /// or never handed out) the lease goes back to the store, to be leased again.
    pub fn free(&self, id: u64) -> Result<(), LeaseError> {
        let shared = &self.ranges.source().0;
        if !shared.cyclic {
            return Err(LeaseError::NotCyclic(shared.config.space.clone()));
        }
        let mut state = lock(&shared.state);
        let lease = state
            .held
            .range(..=id)
            .next_back()
            .map(|(_, lease)| lease.clone())
            .filter(|lease| id <= lease.last)
            .ok_or(LeaseError::NotIssued(id))?;
        match lease.mark_free(id..id + 1) {
            Ok(true) => shared.queue_return(&mut state, &lease),
            Ok(false) => {}
            Err(id) => return Err(LeaseError::NotIssued(id)),
        }
        Ok(())
    }

    /// Counters of the node's traffic with the store.
    pub fn stats(&self) -> NodeStats {
        let shared = &self.ranges.source().0;
        let state = lock(&shared.state);
        let left_current = state.current.as_ref().map_or(0, |(lease, cursor)| {
            (lease.last + 1).saturating_sub(*cursor)
        });
        let serving = state
            .current
            .as_ref()
            .map(|(lease, _)| lease)
            .or(state.next.as_ref());
        // Relaxed: read for display; renewals only move it later.
        let lease_expires_in = serving.map(|lease| {
            let deadline = lease.deadline.load(Ordering::Relaxed);
            Duration::from_nanos(deadline.saturating_sub(shared.now_ns()))
        });
        NodeStats {
            lease_expires_in,
            round_trips: shared.round_trips.load(Ordering::Relaxed),
            leases: shared.leases.load(Ordering::Relaxed),
            ids_leased: shared.ids_leased.load(Ordering::Relaxed),
            step: state.step,
            fenced: shared.fenced.load(Ordering::Relaxed),
            lease_wait: Duration::from_nanos(shared.lease_wait_ns.load(Ordering::Relaxed)),
            left_current,
            left_next: state.next.as_ref().map_or(0, |lease| lease.len()),
        }
    }

    /// Worker slots.
    pub fn cpus(&self) -> usize {
        self.ranges.cpus()
    }
}

/// What a graceful stop ([`Node::shutdown`]) left behind.
///
/// ```
/// let stopped = idspace_lease::Shutdown { parked: 970, discarded: 5 };
/// // Parked IDs are served by the next start of the same node identity; discarded ones are
/// // gaps.
/// assert_eq!(stopped.parked + stopped.discarded, 975);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shutdown {
    /// IDs parked for the next start of the same node identity ([`NodeBuilder::node_id`]).
    pub parked: u64,
    /// IDs carved by the CPUs and never issued: gaps (at most the sub-range size per CPU,
    /// for each CPU that served).
    pub discarded: u64,
}

impl Node {
    /// Stops the node gracefully: the CPUs' carved sub-ranges are dropped, the background
    /// thread ends, and in a monotonic space the unused tails of the current and prefetched
    /// leases are parked in the store under this node's identity, to be leased first when a
    /// node of the same identity asks next (see [`NodeBuilder::node_id`]). A cyclic space
    /// parks nothing: its leases go back as they always do, or are taken over once expired.
    ///
    /// # Errors
    /// [`LeaseError::StoreUnreachable`] if the store cannot be reached to park the tails
    /// (they are then gaps, as after a crash).
    ///
    /// ```no_run
    /// # let url = "host=/var/run/postgresql user=app dbname=app";
    /// let node = idspace_lease::Node::builder(url, "orders").node_id("web-1").start()?;
    /// let first = node.next_id()?;
    /// let stopped = node.shutdown()?;
    /// // The next start of "web-1" goes on from the parked tail.
    /// let again = idspace_lease::Node::builder(url, "orders").node_id("web-1").start()?;
    /// assert!(stopped.parked == 0 || again.next_id()? > first);
    /// # Ok::<(), idspace_lease::LeaseError>(())
    /// ```
    pub fn shutdown(mut self) -> Result<Shutdown, LeaseError> {
        self.ranges.give_back_all();
        self.close();
        let shared = self.ranges.source().0.clone();
        let discarded = shared.discarded.load(Ordering::Relaxed);
        if shared.cyclic {
            return Ok(Shutdown {
                parked: 0,
                discarded,
            });
        }
        let tails: Vec<(i64, i64, u64)> = {
            let state = lock(&shared.state);
            let current = state.current.iter().map(|(lease, cursor)| (lease, *cursor));
            let next = state.next.iter().map(|lease| (lease, lease.first));
            current
                .chain(next)
                // Acquire pairs with the Release stores of `fenced`.
                .filter(|(lease, _)| !lease.fenced.load(Ordering::Acquire))
                .map(|(lease, first)| (lease.id, lease.epoch, first))
                .collect()
        };
        let unreachable = |error: LeaseError| match error {
            LeaseError::Authentication(why) | LeaseError::Connection(why) => {
                LeaseError::StoreUnreachable(why)
            }
            other => other,
        };
        let config = parse_url(&shared.config.url)?;
        let mut store = Store::connect_with(&config).map_err(unreachable)?;
        let parked = store
            .park(&shared.config.space, &shared.config.node, &tails)
            .map_err(unreachable)?;
        Ok(Shutdown { parked, discarded })
    }

    /// Closes the node: allocations fail with [`LeaseError::Closed`] and the background
    /// thread ends.
    fn close(&mut self) {
        let shared = &self.ranges.source().0;
        shared.closed.store(true, Ordering::Relaxed);
        {
            // Under the lock, so that no waiter misses the wakeup between its check and wait.
            let _state = lock(&shared.state);
            shared.wake.notify_all();
            shared.done.notify_all();
        }
        if let Some(background) = self.background.take() {
            let _ = background.join();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.close();
    }
}

/// The calling thread's CPU (0 if the kernel does not say).
fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's CPU.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).unwrap_or(0)
}

/// What the background thread is to do in one round.
struct Work {
    fetch: Option<(u64, Option<i64>)>,
    renew: Vec<Arc<Lease>>,
    returns: Vec<Arc<Lease>>,
}

/// The background thread: fetches the next lease, renews the leases held, returns freed ones.
fn background(shared: Arc<NodeShared>, config: postgres::Config, mut store: Option<Store>) {
    let tick = shared.config.ttl / 10;
    let mut backoff = Duration::ZERO;
    loop {
        let work = {
            let mut state = lock(&shared.state);
            loop {
                if shared.closed.load(Ordering::Relaxed) {
                    return;
                }
                let now = shared.now_ns();
                // Renew once a third of the TTL has passed since the last renewal.
                let renew_at = shared.config.ttl.mul_f64(0.9 - 1.0 / 3.0).as_nanos() as u64;
                let renew_due = state.renew_now
                    || state
                        .held
                        .values()
                        .any(|lease| lease.deadline.load(Ordering::Relaxed) < now + renew_at);
                let fetch_due = state.want_next && state.next.is_none();
                if fetch_due || renew_due || !state.to_return.is_empty() {
                    let fetch = fetch_due.then(|| (state.step, state.retire));
                    break Work {
                        fetch,
                        renew: if renew_due {
                            state.held.values().cloned().collect()
                        } else {
                            Vec::new()
                        },
                        returns: std::mem::take(&mut state.to_return),
                    };
                }
                state = shared
                    .wake
                    .wait_timeout(state, tick)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
        };
        if !backoff.is_zero() {
            std::thread::sleep(backoff);
        }
        let failed = round(&shared, &config, &mut store, work);
        backoff = if failed {
            (backoff * 2).clamp(Duration::from_millis(10), Duration::from_millis(200))
        } else {
            Duration::ZERO
        };
    }
}

/// One round of the background thread's work; `true` if the store failed.
fn round(
    shared: &NodeShared,
    config: &postgres::Config,
    store: &mut Option<Store>,
    work: Work,
) -> bool {
    let Work {
        fetch,
        renew,
        returns,
    } = work;
    let connected = match store {
        Some(store) => Ok(store),
        None => {
            shared.round_trips.fetch_add(2, Ordering::Relaxed);
            // Once started, a node that cannot connect is one cut off from its store, whatever
            // the reason: its callers see that when the leases held run out.
            Store::connect_with(config)
                .map(|connected| store.insert(connected))
                .map_err(|error| match error {
                    LeaseError::Authentication(why) | LeaseError::Connection(why) => {
                        LeaseError::StoreUnreachable(why)
                    }
                    other => other,
                })
        }
    };
    let replies = match connected {
        // Nothing was sent: the returns wait for the next round, like a failed one.
        Err(e) => Replies {
            error: Some(e),
            unreturned: returns,
            ..Replies::default()
        },
        Ok(client) => exchange(shared, client, returns, fetch, &renew),
    };
    let mut state = lock(&shared.state);
    let granted = replies.fetched.is_some();
    if let Some((grant, sent, retire)) = replies.fetched {
        install_next(shared, &mut state, grant, sent, retire);
    }
    if fetch.is_some() {
        state.fetches += 1;
    }
    if let Some((rows, sent)) = replies.renewed {
        apply_renewal(shared, &mut state, &renew, &rows, sent);
    }
    if !renew.is_empty() {
        state.renew_now = false;
        state.renewals += 1;
    }
    state.to_return.extend(replies.unreturned);
    let failed = replies.error.is_some();
    if let Some(error) = replies.error {
        if matches!(error, LeaseError::StoreUnreachable(_)) {
            *store = None;
        }
        state.last_error = Some(error);
    } else if granted || !renew.is_empty() {
        state.last_error = None;
    }
    shared.done.notify_all();
    failed
}

/// What the store answered in one round, applied to the node's state under its lock.
#[derive(Default)]
struct Replies {
    /// The lease fetched, when its request was sent, and the used-up lease it retired.
    fetched: Option<(Grant, Instant, Option<i64>)>,
    /// The IDs of the leases the store renewed, and when the renewal was sent.
    renewed: Option<(Vec<i64>, Instant)>,
    /// Leases whose return failed, to return in a later round.
    unreturned: Vec<Arc<Lease>>,
    /// The round's last failure.
    error: Option<LeaseError>,
}

/// Sends one round's statements: the returns first (a fetch in this round may need their
/// range), then the fetch and the renewal, each skipped once the store is unreachable.
fn exchange(
    shared: &NodeShared,
    client: &mut Store,
    returns: Vec<Arc<Lease>>,
    fetch: Option<(u64, Option<i64>)>,
    renew: &[Arc<Lease>],
) -> Replies {
    let mut replies = Replies::default();
    for lease in returns {
        if replies.error.is_some() {
            replies.unreturned.push(lease);
            continue;
        }
        shared.round_trips.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = client.give_back(lease.id, lease.epoch) {
            replies.error = Some(e);
            replies.unreturned.push(lease);
        }
    }
    let reachable =
        |error: &Option<LeaseError>| !matches!(error, Some(LeaseError::StoreUnreachable(_)));
    if let Some((step, retire)) = fetch.filter(|_| reachable(&replies.error)) {
        shared.round_trips.fetch_add(1, Ordering::Relaxed);
        let sent = Instant::now();
        let config = &shared.config;
        let answer = client.lease(&config.space, &config.node, step, config.ttl, retire);
        let waited = sent.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        shared.lease_wait_ns.fetch_add(waited, Ordering::Relaxed);
        match answer {
            Ok(grant) => replies.fetched = Some((grant, sent, retire)),
            Err(e) => replies.error = Some(e),
        }
    }
    if !renew.is_empty() && reachable(&replies.error) {
        shared.round_trips.fetch_add(1, Ordering::Relaxed);
        let sent = Instant::now();
        let ids: Vec<(i64, i64)> = renew.iter().map(|l| (l.id, l.epoch)).collect();
        match client.renew(&ids, shared.config.ttl) {
            Ok(rows) => replies.renewed = Some((rows, sent)),
            Err(e) => replies.error = Some(e),
        }
    }
    replies
}

/// Installs a fetched lease as the next one, after adapting the step to how long the
/// previous lease lasted; `retire` is the used-up lease the request retired.
fn install_next(
    shared: &NodeShared,
    state: &mut State,
    grant: Grant,
    sent: Instant,
    retire: Option<i64>,
) {
    let life = state.last_grant.elapsed();
    let target = shared.config.target_life;
    if life < target / 2 {
        state.step = state.step.saturating_mul(2).min(shared.config.max_step);
    } else if target.checked_mul(2).is_some_and(|twice| life > twice) {
        state.step = (state.step / 2).max(shared.config.min_step);
    }
    state.last_grant = Instant::now();
    if state.retire == retire {
        state.retire = None;
    }
    let lease = shared.install(state, grant, sent);
    state.next = Some(lease);
    state.want_next = false;
}

/// Applies a renewal sent at `sent` for `renew`: the leases in `rows` get a later deadline;
/// the others were taken over after they expired and are fenced for good.
fn apply_renewal(
    shared: &NodeShared,
    state: &mut State,
    renew: &[Arc<Lease>],
    rows: &[i64],
    sent: Instant,
) {
    let deadline = shared.deadline(sent);
    for lease in renew {
        if rows.contains(&lease.id) {
            // Release pairs with the Acquire load in `vouch`.
            lease.deadline.fetch_max(deadline, Ordering::Release);
        } else if !lease.fenced.swap(true, Ordering::Release) {
            // Taken over after it expired: never served again.
            shared.fenced.fetch_add(1, Ordering::Relaxed);
            if state
                .held
                .get(&lease.first)
                .is_some_and(|held| Arc::ptr_eq(held, lease))
            {
                state.held.remove(&lease.first);
            }
        }
    }
}
