//! Structures shared by the families, kept out of any one family's module so that none of them
//! reaches into another's internals:
//!
//! * [`radix`]: a radix tree of 64-slot nodes, the shape of the kernel's xarray (the
//!   `table::Radix` design and the `pid` IDR designs store their entries in it);
//! * [`fallible`]: boxes whose allocation failure is reported, for the paths where the kernel
//!   returns `-ENOMEM`;
//! * [`hash`]: the locality-preserving (owner, id) hash that places buckets, locks and shards,
//!   and the plain hasher of every integer-keyed map;
//! * [`readers`]: read-side sections and grace periods on reader slots, the stand-in for RCU
//!   under which the hash tables' and `PerCpu`'s lookups run without locks;
//! * [`idset`]: a set of IDs as sorted 16-bit offsets or bitmaps per 65,536-ID group (an
//!   owner's live IDs in the hash tables).

pub(crate) mod fallible;
pub(crate) mod hash;
pub(crate) mod idset;
pub(crate) mod radix;
pub(crate) mod readers;
