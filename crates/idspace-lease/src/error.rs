//! The crate's one error type.

use std::fmt;

/// Why a lease, a space or an ID could not be had.
///
/// Connecting tells a URL the client cannot read from a server it cannot reach:
///
/// ```
/// use idspace_lease::{LeaseError, Store};
///
/// let no_host = Store::connect("postgresql:///orders").err();
/// assert!(matches!(no_host, Some(LeaseError::BadUrl(_))), "{no_host:?}");
/// // A socket directory where no server listens: nothing to connect to.
/// let nobody = Store::connect("host=/nonexistent-idspace-dir user=app dbname=app").err();
/// assert!(matches!(nobody, Some(LeaseError::Connection(_))), "{nobody:?}");
/// let exhausted = LeaseError::Exhausted("orders".into());
/// assert_eq!(exhausted.to_string(), "space \"orders\" is exhausted");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseError {
    /// The connection URL is not one PostgreSQL's client understands.
    BadUrl(String),
    /// No space has this name.
    UnknownSpace(String),
    /// A space of this name exists already.
    SpaceExists(String),
    /// A space's definition is refused (bounds, name, step), with the reason.
    InvalidSpace(String),
    /// Every ID of the space is leased (monotonic), or leased and not yet returned (cyclic).
    Exhausted(String),
    /// The server refused the credentials at connection: a wrong password (SQLSTATE 28P01),
    /// a role that `pg_hba.conf` does not let in or whose peer or ident check failed (28000),
    /// or a password the server asks for and the URL does not give.
    Authentication(String),
    /// The role may not do what was asked (SQLSTATE 42501): creating or migrating the schema
    /// needs `CREATE` on the role's schema, leasing needs the rights on the crate's tables.
    PermissionDenied(String),
    /// No connection could be made to the server when one was first needed (no server at the
    /// address, connection refused or timed out, no such database).
    Connection(String),
    /// The store cannot be reached (or failed) after the node started, and no ID is left in
    /// the leases held.
    StoreUnreachable(String),
    /// An ID given back to a cyclic space is not one this node handed out, or was already
    /// freed.
    NotIssued(u64),
    /// Freeing IDs is for cyclic spaces; monotonic spaces never reuse an ID.
    NotCyclic(String),
    /// The node was shut down.
    Closed,
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::BadUrl(why) => write!(f, "bad connection URL: {why}"),
            LeaseError::UnknownSpace(name) => write!(f, "unknown space \"{name}\""),
            LeaseError::SpaceExists(name) => write!(f, "space \"{name}\" exists already"),
            LeaseError::InvalidSpace(why) => write!(f, "invalid space: {why}"),
            LeaseError::Exhausted(name) => write!(f, "space \"{name}\" is exhausted"),
            LeaseError::Authentication(why) => write!(f, "authentication failed: {why}"),
            LeaseError::PermissionDenied(why) => write!(f, "permission denied: {why}"),
            LeaseError::Connection(why) => write!(f, "cannot connect to the store: {why}"),
            LeaseError::StoreUnreachable(why) => {
                write!(f, "store unreachable and no leased ID left: {why}")
            }
            LeaseError::NotIssued(id) => write!(f, "ID {id} was not handed out by this node"),
            LeaseError::NotCyclic(name) => {
                write!(f, "space \"{name}\" is monotonic: its IDs are never freed")
            }
            LeaseError::Closed => write!(f, "the node was shut down"),
        }
    }
}

impl std::error::Error for LeaseError {}
