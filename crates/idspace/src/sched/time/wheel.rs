//! The hierarchical timing wheel itself: levels of 64 slots over a slab of entries, in ticks,
//! with no clock, no lock and no knowledge of what an entry is for.
//!
//! # Layout
//!
//! Level `L` has 64 slots of `64^L` ticks each, so it spans `64^(L+1)` ticks; six levels span
//! `2^36` ticks (about 79.5 days at the runtime's 100 µs resolution). An entry due at tick `t`
//! sits on the level of the highest 6-bit digit in which `t` differs from the wheel's current
//! time `elapsed`, in the slot given by `t`'s digit there. Every entry of a level therefore shares
//! all higher digits with `elapsed` and sits in a slot *after* `elapsed`'s own digit on that
//! level: the lowest non-empty level holds the earliest slot, and finding the next expiry is one
//! `trailing_zeros` of a 64-bit occupancy mask per level looked at.
//!
//! When `elapsed` reaches the start of a slot, the slot is emptied: entries that are due leave
//! the wheel (they are *detached*, see below), the others go down to the level their deadline
//! now belongs to (the cascade). Entries due beyond the top level's span are parked in the top
//! level's slot for their digit, taken modulo the span, and are looked at again once per top
//! rotation until they are close enough: they are never fired early, only re-placed.
//!
//! # Entries
//!
//! Entries live in a slab (a `Vec` that only grows) threaded by a free list, and each slot is an
//! intrusive doubly linked list of slab indices, so arming and cancelling are O(1) and allocate
//! nothing once the slab has grown to the peak number of live entries. An entry is named by a
//! [`Key`]: its index and a generation that changes each time the index is freed, so a stale key
//! (its entry fired or was cancelled, and the index perhaps reused) is recognised and refused.
//! The generation is 32 bits: a key held across 2^32 reuses of its index would be taken for
//! the newest entry there, which no caller comes near (a future or `Armed` holds its key only
//! while its timer may be pending, or, kept by hyper's timer after its entry fired, until its
//! connection's next request).
//! Cancelling unlinks and frees the entry at once: nothing is left behind until its deadline.
//!
//! An entry that expires is *detached*: unlinked, its value handed to the caller, its index kept.
//! The caller then either re-links it with a new deadline ([`Wheel::rearm`], interval timers) or
//! frees it ([`Wheel::release`]); a [`Wheel::cancel`] in between frees it at once, which makes a
//! later `rearm` fail. This is how "cancel racing expiry" is decided exactly once, under the lock
//! the caller holds around the wheel.

/// Bits of a level's digit: 64 slots per level.
const BITS: u32 = 6;
/// Slots per level.
const SLOTS: usize = 1 << BITS;
/// Levels of the wheel.
pub(crate) const LEVELS: usize = 6;
/// Ticks spanned by the whole wheel (`64^LEVELS`).
pub(crate) const SPAN: u64 = 1 << (BITS as usize * LEVELS);
/// The end of a list, and an entry linked nowhere.
const NIL: u32 = u32::MAX;

/// The name of an entry: slab index and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    index: u32,
    generation: u32,
}

/// Where an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// On the free list.
    Free,
    /// Linked into a slot of a level.
    Slot { level: u8, slot: u8 },
    /// Expired and handed out, waiting for [`Wheel::rearm`] or [`Wheel::release`].
    Detached,
}

/// What a live key's entry is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Waiting in the wheel for its tick.
    Pending(u64),
    /// Expired; its value is with whoever is firing it.
    Detached,
}

/// What a [`Wheel::cancel`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Cancelled<T> {
    /// The entry was pending: it will never fire. Its value is handed back.
    Pending(T),
    /// The entry had expired and was being fired: it is freed now, so it will not be re-armed.
    Detached,
    /// The key is stale: the entry fired and was released, or was cancelled, already.
    Stale,
}

struct Entry<T> {
    /// The tick the entry is due at.
    tick: u64,
    prev: u32,
    /// The next entry of the slot's list, or of the free list.
    next: u32,
    generation: u32,
    place: Place,
    value: Option<T>,
}

/// One level: which slots hold entries, and the head of each slot's list.
struct Level {
    occupied: u64,
    heads: [u32; SLOTS],
}

/// A hierarchical timing wheel of entries carrying a `T`.
pub(crate) struct Wheel<T> {
    /// The wheel's current tick: every slot starting at or before it has been processed.
    elapsed: u64,
    levels: [Level; LEVELS],
    entries: Vec<Entry<T>>,
    /// Head of the free list of slab indices.
    free: u32,
    /// Entries pending in slots.
    pending: usize,
}

impl<T> Default for Wheel<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Wheel<T> {
    /// An empty wheel at tick 0.
    pub(crate) fn new() -> Self {
        Wheel {
            elapsed: 0,
            levels: std::array::from_fn(|_| Level {
                occupied: 0,
                heads: [NIL; SLOTS],
            }),
            entries: Vec::new(),
            free: NIL,
            pending: 0,
        }
    }

    /// The wheel's current tick: every tick up to it has been processed.
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// Entries waiting in the wheel (not counting detached ones).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending
    }

    /// Slab entries allocated so far (live or free): the wheel's memory high-water mark.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Arms an entry due at `tick` carrying `value`. A tick at or before [`elapsed`](Self::elapsed)
    /// is due at the next [`advance`](Self::advance).
    pub(crate) fn insert(&mut self, tick: u64, value: T) -> Key {
        let index = match self.free {
            NIL => {
                let index = u32::try_from(self.entries.len())
                    .ok()
                    .filter(|&index| index != NIL)
                    .expect("a timer wheel holds fewer than 2^32 - 1 entries");
                self.entries.push(Entry {
                    tick,
                    prev: NIL,
                    next: NIL,
                    generation: 0,
                    place: Place::Free,
                    value: None,
                });
                index
            }
            index => {
                self.free = self.entries[index as usize].next;
                index
            }
        };
        let entry = &mut self.entries[index as usize];
        entry.tick = tick;
        entry.value = Some(value);
        let generation = entry.generation;
        self.link(index);
        Key { index, generation }
    }

    /// The entry of `key`, if the key is live.
    fn live(&self, key: Key) -> Option<&Entry<T>> {
        self.entries
            .get(key.index as usize)
            .filter(|entry| entry.generation == key.generation && entry.place != Place::Free)
    }

    /// What the entry of `key` is doing, or `None` for a stale key.
    pub(crate) fn state(&self, key: Key) -> Option<State> {
        self.live(key).map(|entry| match entry.place {
            Place::Slot { .. } => State::Pending(entry.tick),
            _ => State::Detached,
        })
    }

    /// The value of a pending entry, to change it in place (a sleeping future's waker).
    pub(crate) fn value_mut(&mut self, key: Key) -> Option<&mut T> {
        self.live(key)?;
        self.entries[key.index as usize].value.as_mut()
    }

    /// Cancels the entry of `key`, freeing it at once.
    pub(crate) fn cancel(&mut self, key: Key) -> Cancelled<T> {
        let Some(entry) = self.live(key) else {
            return Cancelled::Stale;
        };
        match entry.place {
            Place::Slot { .. } => {
                self.unlink(key.index);
                let value = self.free_entry(key.index);
                Cancelled::Pending(value.expect("a pending entry carries its value"))
            }
            _ => {
                self.free_entry(key.index);
                Cancelled::Detached
            }
        }
    }

    /// Links a detached entry again, due at `tick` with `value` (an interval timer's next
    /// period). Hands `value` back if the key is stale or the entry is not detached (it was
    /// cancelled while it fired).
    pub(crate) fn rearm(&mut self, key: Key, tick: u64, value: T) -> Result<(), T> {
        match self.live(key) {
            Some(entry) if entry.place == Place::Detached => {
                let entry = &mut self.entries[key.index as usize];
                entry.tick = tick;
                entry.value = Some(value);
                self.link(key.index);
                Ok(())
            }
            _ => Err(value),
        }
    }

    /// Frees a detached entry that is not re-armed. Returns false if the key is stale or the
    /// entry not detached (it was cancelled while it fired, and freed then).
    pub(crate) fn release(&mut self, key: Key) -> bool {
        match self.live(key) {
            Some(entry) if entry.place == Place::Detached => {
                self.free_entry(key.index);
                true
            }
            _ => false,
        }
    }

    /// The start of the earliest non-empty slot, the tick at which [`advance`](Self::advance)
    /// has work: at or before the earliest deadline (equal for entries on level 0, earlier for
    /// entries still to be cascaded). `None` when no entry is pending.
    pub(crate) fn next_expiry(&self) -> Option<u64> {
        self.next_slot().map(|(_, _, start)| start)
    }

    /// Moves the wheel to tick `now` (never backwards): every entry due at or before `now` is
    /// detached and pushed onto `expired` with its value, the others are cascaded as needed.
    pub(crate) fn advance(&mut self, now: u64, expired: &mut Vec<(Key, T)>) {
        while let Some((level, slot, start)) = self.next_slot() {
            if start > now {
                break;
            }
            // Slots are processed in time order, so this never moves the wheel backwards.
            self.elapsed = self.elapsed.max(start);
            let mut index = self.take_slot(level, slot);
            while index != NIL {
                let next = self.entries[index as usize].next;
                let entry = &mut self.entries[index as usize];
                if entry.tick <= now {
                    entry.place = Place::Detached;
                    entry.prev = NIL;
                    entry.next = NIL;
                    self.pending -= 1;
                    let key = Key {
                        index,
                        generation: entry.generation,
                    };
                    let value = entry
                        .value
                        .take()
                        .expect("a pending entry carries its value");
                    expired.push((key, value));
                } else {
                    // Still in the future: down to the level its deadline now belongs to.
                    self.pending -= 1;
                    self.link(index);
                }
                index = next;
            }
        }
        self.elapsed = self.elapsed.max(now);
    }

    /// Removes every entry, pending or detached, and returns the pending ones' values.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut values = Vec::with_capacity(self.pending);
        for index in 0..self.entries.len() {
            let index = index as u32;
            let place = self.entries[index as usize].place;
            if place != Place::Free {
                if matches!(place, Place::Slot { .. }) {
                    self.unlink(index);
                }
                values.extend(self.free_entry(index));
            }
        }
        values
    }

    /// The level and slot an entry due at `tick` goes to, seen from `elapsed`.
    fn place_for(&self, tick: u64) -> (usize, usize) {
        // A deadline already passed is due in the current slot of level 0.
        let tick = tick.max(self.elapsed);
        let differs = (tick ^ self.elapsed) | (SLOTS as u64 - 1);
        let level = if differs >= SPAN {
            // Beyond the top level's span: parked on the top level, re-placed when its slot
            // comes round (see `next_slot` for how a slot equal to the current digit is read).
            LEVELS - 1
        } else {
            ((63 - differs.leading_zeros()) / BITS) as usize
        };
        let slot = ((tick >> (BITS as usize * level)) as usize) & (SLOTS - 1);
        (level, slot)
    }

    /// Links the entry at `index` (its tick set) into the slot for its tick.
    fn link(&mut self, index: u32) {
        let (level, slot) = self.place_for(self.entries[index as usize].tick);
        let head = self.levels[level].heads[slot];
        if head != NIL {
            self.entries[head as usize].prev = index;
        }
        let entry = &mut self.entries[index as usize];
        entry.prev = NIL;
        entry.next = head;
        entry.place = Place::Slot {
            level: level as u8,
            slot: slot as u8,
        };
        self.levels[level].heads[slot] = index;
        self.levels[level].occupied |= 1 << slot;
        self.pending += 1;
    }

    /// Unlinks a pending entry from its slot's list.
    fn unlink(&mut self, index: u32) {
        let entry = &self.entries[index as usize];
        let Place::Slot { level, slot } = entry.place else {
            unreachable!("only linked entries are unlinked");
        };
        let (prev, next) = (entry.prev, entry.next);
        let (level, slot) = (level as usize, slot as usize);
        if prev == NIL {
            self.levels[level].heads[slot] = next;
            if next == NIL {
                self.levels[level].occupied &= !(1 << slot);
            }
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
        let entry = &mut self.entries[index as usize];
        entry.place = Place::Detached;
        entry.prev = NIL;
        entry.next = NIL;
        self.pending -= 1;
    }

    /// Puts an unlinked entry on the free list, bumping its generation, and returns its value.
    fn free_entry(&mut self, index: u32) -> Option<T> {
        let free = self.free;
        let entry = &mut self.entries[index as usize];
        entry.generation = entry.generation.wrapping_add(1);
        entry.place = Place::Free;
        entry.prev = NIL;
        entry.next = free;
        self.free = index;
        entry.value.take()
    }

    /// Empties a slot and returns the head of its list (the entries keep their `next` links;
    /// their places are rewritten by the caller).
    fn take_slot(&mut self, level: usize, slot: usize) -> u32 {
        let head = std::mem::replace(&mut self.levels[level].heads[slot], NIL);
        self.levels[level].occupied &= !(1 << slot);
        head
    }

    /// The earliest non-empty slot: its level, index and start tick.
    fn next_slot(&self) -> Option<(usize, usize, u64)> {
        // Entries of level L all start after every entry of the levels below (they differ from
        // `elapsed` in a higher digit), so the lowest non-empty level has the earliest slot.
        let level = self.levels.iter().position(|level| level.occupied != 0)?;
        let shift = BITS as usize * level;
        let digit = ((self.elapsed >> shift) as usize) & (SLOTS - 1);
        let occupied = self.levels[level].occupied;
        // The ticks a slot of this level spans, and the start of this level's current rotation.
        let slot_ticks = 1u64 << shift;
        let rotation_ticks = slot_ticks << BITS;
        let rotation = self.elapsed & !(rotation_ticks - 1);
        let (slot, start) = if level == LEVELS - 1 {
            // The top level also holds entries parked beyond its span, so a slot at or before
            // the current digit means the next rotation: searching starts after the digit.
            let from = (digit + 1) % SLOTS;
            let slot =
                (from + occupied.rotate_right(from as u32).trailing_zeros() as usize) % SLOTS;
            let start = if slot > digit {
                rotation + slot as u64 * slot_ticks
            } else {
                rotation
                    .saturating_add(rotation_ticks)
                    .saturating_add(slot as u64 * slot_ticks)
            };
            (slot, start)
        } else {
            // Below the top every entry sits at or after the current digit.
            debug_assert_eq!(occupied & ((1u64 << digit) - 1), 0, "slot before the digit");
            let slot = digit + (occupied >> digit).trailing_zeros() as usize;
            (slot, rotation + slot as u64 * slot_ticks)
        };
        Some((level, slot, start))
    }
}

#[cfg(test)]
mod tests;
