//! # idspace-lease
//!
//! IDs unique across a cluster, allocated per CPU: each node leases ranges of a named ID space
//! from PostgreSQL and hands sub-ranges of them to its CPUs, the design of
//! [`idspace::pid::PerCpu`] one level up (the lease is the range source of
//! [`idspace::range::SubRanges`]).
//!
//! ```no_run
//! use idspace_lease::{Node, Store};
//!
//! let url = "host=/var/run/postgresql user=app dbname=app";
//! // Once: a space of IDs 1..=10^12 (the schema is created on the first connection).
//! Store::connect(url)?.create_space("orders", 1, 1_000_000_000_000, false)?;
//! // On every node:
//! let node = Node::builder(url, "orders").start()?;
//! let id = node.next_id()?;
//! # Ok::<(), idspace_lease::LeaseError>(())
//! ```
//!
//! # Spaces and leases
//!
//! A space is a row of `idspace_space`: `[min, max]` (0 ≤ min ≤ max ≤ 2⁶³−1), monotonic or
//! cyclic, and the last ID ever leased. A lease is granted by one call of the SQL function
//! `idspace_lease`, one statement, so one transaction and one round trip: it locks the space's
//! row, takes the next range, and records the lease (`idspace_lease`: node identity, epoch,
//! range, expiry). The space's epoch is bumped by every grant and takeover; a lease is the
//! node's while its row carries the epoch it was granted with.
//!
//! A [`Node`] serves IDs from per-CPU sub-ranges (64 IDs by default) carved from its current
//! lease. Once a tenth of the lease is carved, its background thread fetches the next one (a
//! double buffer, as Meituan's Leaf does), so allocations do not wait for the store while it is
//! healthy. The lease size adapts: a lease used up in less than half the target life (2 s by
//! default) doubles the step, one lasting more than twice that halves it, within the
//! configured bounds (1000 to 2²⁰ by default). Serialisation failures and deadlocks are
//! retried with a spread back-off (under the default READ COMMITTED isolation the lease path
//! waits on the space's row lock instead; under SERIALIZABLE, concurrent leases of one space
//! fail with serialisation failures, and the retries absorb them).
//!
//! # Monotonic spaces (the default)
//!
//! IDs are never handed out twice, by any node, ever. They increase within one CPU's
//! sub-range, not across CPUs or nodes. IDs of a lease that were never handed out (a node
//! stopped or crashed; sub-ranges cut short) are never handed out later: they are gaps. The
//! store knows how far the space was leased ([`SpaceInfo::leased_through`]); the gaps are that
//! count minus the IDs issued.
//!
//! # Cyclic spaces
//!
//! A node [frees](Node::free) IDs; once every ID of a lease is free (handed out and freed, or
//! never handed out) the node returns the lease's range, and returned ranges are leased again,
//! oldest returned first, before any fresh range. When no fresh range is left, the lease that
//! expired first is taken over: its epoch changes, so its old holder's renewal fails and that
//! node stops serving from it. **Guarantee:** while a node holds a lease (renews it in time)
//! no other node is handed any of its IDs; an ID comes back only after its node freed it and
//! the whole range was returned, or after its node lost the lease by not renewing it for the
//! TTL (the node is presumed dead, and with it the objects named by its IDs). A node that
//! keeps objects named by IDs across a lost lease must not rely on their uniqueness.
//!
//! # Fencing, the clock assumption and pauses
//!
//! Every ID handed out is checked against its lease's deadline, measured on the node's
//! monotonic clock from the moment the lease (or its last renewal) was *requested*, for 90%
//! of the TTL. The store lets a lease go (for takeover) when its own clock passes the grant
//! time plus the TTL. **Clock assumption:** the node's monotonic clock runs at least 90% as
//! fast as the server's over one TTL; no agreement on absolute time is needed. Renewals go out
//! every third of the TTL.
//!
//! **A node paused** (stopped, swapped, starved) past its deadline serves nothing from the
//! lease on resuming until the store confirmed the lease's epoch: the allocation waits for a
//! renewal; if the lease was taken over, its IDs are dropped (counted in
//! [`NodeStats::fenced`]) and a new lease is fetched (or [`LeaseError::Exhausted`] names the
//! space if none is left); if the store cannot be
//! reached, the allocation fails with [`LeaseError::StoreUnreachable`]. An ID checked just
//! before a pause and returned just after it cannot be told apart from one returned before
//! the pause: that is the limit of any lease.
//!
//! # When PostgreSQL is down
//!
//! Allocation goes on from the leases held (the current and the prefetched one) until their
//! IDs run out or their deadline passes; then it fails with [`LeaseError::StoreUnreachable`],
//! never with a duplicate. The background thread reconnects, with a back-off of at most
//! 200 ms, and allocation resumes once a lease is granted. A server that accepts and never
//! answers (frozen, or cut off under an open connection) counts as down too: an allocation
//! that needs the store (a lease fetched, a renewal confirmed) waits at most 5 s for it, and
//! a connection waits for the server's answer at most 5 s past its socket's connect timeout
//! (`connect_timeout` in the URL, 3 s by default).
//!
//! # Graceful stops and crashes
//!
//! [`Node::shutdown`] parks the unused tails of a monotonic node's leases under its identity
//! ([`NodeBuilder::node_id`]); the next node of that identity leases them before anything
//! fresh, so a restart discards only the IDs its CPUs had carved (at most the sub-range size per
//! CPU). A crash leaves its leases' rows behind: [`Store::reclaim`], called before the node of
//! that identity starts again, drops them and says how many IDs they held, the most the crash
//! can have left unissued. Node identities must be unique among running nodes.
//!
//! # Running against your own server
//!
//! Pass a libpq-style URL (`postgresql://user:password@host:port/db`) or key-value string
//! (`host=/var/run/postgresql user=app dbname=app`). The schema (`idspace_schema`,
//! `idspace_space`, `idspace_lease`, `idspace_returned`, `idspace_parked`, and the functions
//! `idspace_lease`, `idspace_return` and `idspace_park`) is created or migrated on the first connection, under an advisory lock.
//! TLS is not supported: use a Unix socket or a trusted network.
//!
//! Connecting tells the failures apart: credentials the server refuses (a wrong or missing
//! password, a role `pg_hba.conf` rejects) are [`LeaseError::Authentication`], no server or
//! no such database [`LeaseError::Connection`], a role without the rights on the schema
//! [`LeaseError::PermissionDenied`]. [`LeaseError::StoreUnreachable`] is for a store lost
//! once a node has started. `examples/lease.rs` runs two nodes against a throwaway server, or
//! against the one `IDSPACE_URL` names.

#![warn(missing_docs)]

mod error;
mod node;
mod schema;
pub mod server;
mod store;

pub use error::LeaseError;
pub use node::{Node, NodeBuilder, NodeStats, Shutdown, CYCLIC_MAX_STEP, MAX_CPUS};
pub use store::{parse_url, Grant, SpaceInfo, Store};
