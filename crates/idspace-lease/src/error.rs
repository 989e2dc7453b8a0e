//! The crate's one error type.

use std::fmt;

/// Why a lease, a space or an ID could not be had.
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
    /// The store cannot be reached (or failed), and no ID is left in the leases held.
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
