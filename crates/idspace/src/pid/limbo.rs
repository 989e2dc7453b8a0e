//! [`Limbo`]: what a writer unlinked, kept until every read-side section that might still read
//! it has ended, then freed (dropped) by a later call that never waits: the user-space
//! `call_rcu` of `PerCpu`'s hot paths, which may not wait for a lookup. The sections and grace
//! periods are [`Readers`]'; `free_ns`, which may wait, takes everything and waits for one
//! grace period instead ([`Readers::synchronize`]).

use crate::prelude::*;
use crate::util::readers::{Readers, Snapshot};

/// Unlinked values waiting for their grace period, freed (dropped) by later calls without ever
/// waiting: `next` collects what is retired now; `waiting` holds an earlier batch together with
/// the snapshot taken after its last member was unlinked.
pub(crate) struct Limbo<T> {
    next: Vec<T>,
    waiting: Vec<T>,
    snapshot: Option<Snapshot>,
    /// Items `next` gathers before a retirement looks at the grace period (each look reads
    /// the reader slots).
    batch: usize,
}

impl<T> Limbo<T> {
    /// An empty limbo that looks at the grace period every `batch` retirements.
    pub(crate) fn new(batch: usize) -> Self {
        Limbo {
            next: Vec::new(),
            waiting: Vec::new(),
            snapshot: None,
            batch: batch.max(1),
        }
    }

    /// Keeps `item`, already unlinked, until a grace period has passed; frees earlier items
    /// whose grace period has.
    #[inline]
    pub(crate) fn retire(&mut self, item: T, readers: &Readers) {
        self.next.push(item);
        if self.next.len() % self.batch == 0 {
            self.collect(readers);
        }
    }

    /// Frees the waiting batch if its grace period has passed, then starts one for what was
    /// retired since.
    pub(crate) fn collect(&mut self, readers: &Readers) {
        if let Some(snapshot) = &self.snapshot {
            if !readers.passed(snapshot) {
                return;
            }
            self.waiting.clear();
            self.snapshot = None;
        }
        if !self.next.is_empty() {
            core::mem::swap(&mut self.next, &mut self.waiting);
            self.snapshot = Some(readers.snapshot());
        }
    }

    /// Everything kept, for a caller that will wait for a grace period and then drop it; the
    /// limbo is left empty, without capacity.
    pub(crate) fn take_all(&mut self) -> Vec<T> {
        self.snapshot = None;
        let mut all = core::mem::take(&mut self.waiting);
        all.append(&mut self.next);
        self.next = Vec::new();
        all
    }

    /// Items kept, and the room of the two batches in items.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (
            self.next.len() + self.waiting.len(),
            self.next.capacity() + self.waiting.capacity(),
        )
    }
}
