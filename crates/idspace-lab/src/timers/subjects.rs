//! What the timer experiment measures: our three designs, two concurrent maps a user might
//! pick instead, and the kernel's own POSIX timers, all behind one small interface.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use crossbeam_utils::CachePadded;
use dashmap::DashMap;
use foldhash::fast::FixedState;
use idspace::table::{GlobalHash, IdTable, OwnerHandle, Radix, ScaledHash, MAX_ID};

use super::kernel::KernelTimers;

/// The value every design stores: a stand-in for a timer handle, pointer-sized like the
/// kernel's `struct k_itimer *`.
pub type Handle = NonZeroU64;

fn handle(owner: u64, id: u32) -> Handle {
    NonZeroU64::new((owner << 32) | u64::from(id) | (1 << 63)).unwrap_or(NonZeroU64::MIN)
}

/// One thing under test. Owners are small integers (`0..MAX_OWNERS`).
pub trait Subject: Sync {
    /// Creates an entry for `owner`; its ID, or `None` if the subject refused.
    fn create(&self, owner: u64) -> Option<u32>;
    /// Looks (owner, id) up; whether it was found.
    fn lookup(&self, owner: u64, id: u32) -> bool;
    /// Deletes (owner, id); whether it was there.
    fn delete(&self, owner: u64, id: u32) -> bool;
    /// Creates exactly `id` (restore mode); whether it worked. Only for the memory test.
    fn create_exact(&self, owner: u64, id: u32) -> bool;
    /// Bytes the structure reports holding, if it can say.
    fn memory_bytes(&self) -> Option<usize> {
        None
    }
}

/// Owners the peers keep cursors for (threads in the largest test).
pub const MAX_OWNERS: usize = 128;

/// Where a candidate comes from: it decides how the "owner per thread" tests run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An in-process structure: owners are numbers.
    InProcess,
    /// The kernel: an owner is a process, so "owner per thread" forks.
    Kernel,
}

/// A named way to make a fresh subject.
pub struct Candidate {
    /// Column heading.
    pub name: &'static str,
    /// In-process or the kernel.
    pub kind: Kind,
    /// Makes a fresh, empty subject.
    pub make: fn() -> Box<dyn Subject>,
}

impl crate::measure::Candidate for Candidate {
    fn name(&self) -> &str {
        self.name
    }
}

/// Every candidate, in column order. `scaled` is the reference column for ratios.
pub fn candidates() -> Vec<Candidate> {
    vec![
        Candidate {
            name: "global",
            kind: Kind::InProcess,
            make: || Box::new(Ours(GlobalHash::new())),
        },
        Candidate {
            name: "scaled",
            kind: Kind::InProcess,
            make: || Box::new(Handled::new(ScaledHash::new())),
        },
        Candidate {
            name: "scaled-fixed",
            kind: Kind::InProcess,
            make: || Box::new(Handled::new(ScaledHash::kernel_sized())),
        },
        Candidate {
            name: "radix",
            kind: Kind::InProcess,
            make: || Box::new(Ours(Radix::new())),
        },
        Candidate {
            name: "dashmap",
            kind: Kind::InProcess,
            make: || Box::new(Dash::default()),
        },
        Candidate {
            name: "scc",
            kind: Kind::InProcess,
            make: || Box::new(Scc::default()),
        },
        Candidate {
            name: "kernel",
            kind: Kind::Kernel,
            make: || Box::new(KernelTimers),
        },
    ]
}

/// One of our designs.
pub struct Ours<D>(pub D);

impl<D: IdTable<Handle>> Subject for Ours<D> {
    #[inline]
    fn create(&self, owner: u64) -> Option<u32> {
        self.0.create(owner, handle(owner, 0)).ok()
    }
    #[inline]
    fn lookup(&self, owner: u64, id: u32) -> bool {
        // `contains`, as the scc column's lookup: whether the entry is there, without taking
        // a reference to it.
        self.0.contains(owner, id)
    }
    #[inline]
    fn delete(&self, owner: u64, id: u32) -> bool {
        self.0.remove(owner, id).is_ok()
    }
    fn create_exact(&self, owner: u64, id: u32) -> bool {
        self.0.set_restore(owner, true);
        self.0.create_at(owner, id, handle(owner, id)).is_ok()
    }
    fn memory_bytes(&self) -> Option<usize> {
        Some(self.0.memory_bytes())
    }
}

/// Our hash table as a process uses it: each owner's handle is made on its first create and
/// kept, as a process keeps its own state (the kernel's `current->signal`), so that a create
/// takes no lock of the owner registry. The handles are found by index, as the peers' cursors
/// are. Everything but the create is [`Ours`].
pub struct Handled {
    table: Ours<ScaledHash<Handle>>,
    handles: Box<[OnceLock<OwnerHandle>]>,
}

impl Handled {
    fn new(table: ScaledHash<Handle>) -> Self {
        Handled {
            table: Ours(table),
            handles: (0..MAX_OWNERS).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The owner's handle, made on first use; `None` for an owner beyond the slots, or if
    /// there is no memory for its state.
    #[inline]
    fn handle(&self, owner: u64) -> Option<&OwnerHandle> {
        let slot = self.handles.get(usize::try_from(owner).ok()?)?;
        if slot.get().is_none() {
            // A racing first create may set it first: either handle is the owner's.
            let _ = slot.set(self.table.0.owner_handle(owner).ok()?);
        }
        slot.get()
    }

    /// The owner's handle if a create made it.
    #[inline]
    fn kept(&self, owner: u64) -> Option<&OwnerHandle> {
        self.handles.get(usize::try_from(owner).ok()?)?.get()
    }
}

impl Subject for Handled {
    #[inline]
    fn create(&self, owner: u64) -> Option<u32> {
        match self.handle(owner) {
            Some(kept) => self.table.0.create_in(kept, handle(owner, 0)).ok(),
            None => self.table.create(owner),
        }
    }
    #[inline]
    fn lookup(&self, owner: u64, id: u32) -> bool {
        self.table.lookup(owner, id)
    }
    #[inline]
    fn delete(&self, owner: u64, id: u32) -> bool {
        match self.kept(owner) {
            Some(kept) => self.table.0.remove_in(kept, id).is_ok(),
            None => self.table.delete(owner, id),
        }
    }
    fn create_exact(&self, owner: u64, id: u32) -> bool {
        self.table.create_exact(owner, id)
    }
    fn memory_bytes(&self) -> Option<usize> {
        self.table.memory_bytes()
    }
}

/// Per-owner cursors for the peers: an atomic increment, like the kernel's
/// `next_posix_timer_id`, so the peers pay no owner registry.
struct Cursors(Box<[CachePadded<AtomicU32>]>);

impl Default for Cursors {
    fn default() -> Self {
        Cursors(
            (0..MAX_OWNERS)
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect(),
        )
    }
}

impl Cursors {
    #[inline]
    fn next(&self, owner: u64) -> u32 {
        // Relaxed: the map's insert decides uniqueness; the cursor only spreads the probes.
        self.0[owner as usize % MAX_OWNERS].fetch_add(1, Ordering::Relaxed) & MAX_ID
    }
}

/// `dashmap::DashMap` keyed by (owner, id), with foldhash's fast integer hasher.
#[derive(Default)]
pub struct Dash {
    map: DashMap<(u64, u32), Handle, FixedState>,
    cursors: Cursors,
}

impl Subject for Dash {
    #[inline]
    fn create(&self, owner: u64) -> Option<u32> {
        for _ in 0..=MAX_ID {
            let id = self.cursors.next(owner);
            if let dashmap::Entry::Vacant(slot) = self.map.entry((owner, id)) {
                slot.insert(handle(owner, id));
                return Some(id);
            }
        }
        None
    }
    #[inline]
    fn lookup(&self, owner: u64, id: u32) -> bool {
        self.map.get(&(owner, id)).is_some()
    }
    #[inline]
    fn delete(&self, owner: u64, id: u32) -> bool {
        self.map.remove(&(owner, id)).is_some()
    }
    fn create_exact(&self, owner: u64, id: u32) -> bool {
        self.map.insert((owner, id), handle(owner, id)).is_none()
    }
}

/// `scc::HashMap` keyed by (owner, id), with foldhash's fast integer hasher.
#[derive(Default)]
pub struct Scc {
    map: scc::HashMap<(u64, u32), Handle, FixedState>,
    cursors: Cursors,
}

impl Subject for Scc {
    #[inline]
    fn create(&self, owner: u64) -> Option<u32> {
        for _ in 0..=MAX_ID {
            let id = self.cursors.next(owner);
            if self.map.insert((owner, id), handle(owner, id)).is_ok() {
                return Some(id);
            }
        }
        None
    }
    #[inline]
    fn lookup(&self, owner: u64, id: u32) -> bool {
        self.map.contains(&(owner, id))
    }
    #[inline]
    fn delete(&self, owner: u64, id: u32) -> bool {
        self.map.remove(&(owner, id)).is_some()
    }
    fn create_exact(&self, owner: u64, id: u32) -> bool {
        self.map.insert((owner, id), handle(owner, id)).is_ok()
    }
}
