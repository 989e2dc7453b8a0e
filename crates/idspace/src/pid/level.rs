//! What every design shares: a space's kernel state (`pid_max`, cursor, init, death) and the
//! kernel's choice of an ID at one level (`alloc_pid` + `idr_alloc_cyclic`), written once over
//! any structure that can say which IDs are taken.

use super::{PidError, PID_MAX_DEFAULT, RESERVED_PIDS};

/// One space's allocation state.
#[derive(Debug, Clone)]
pub(crate) struct SpaceCore {
    pub(crate) pid_max: u32,
    /// The next ID the cyclic search starts from (`idr_next`).
    pub(crate) cursor: u32,
    /// Whether ID 1 (the space's init) has been handed out: `set_tid` entries other than 1
    /// need it (the kernel's `child_reaper` check).
    pub(crate) init_seen: bool,
    /// ID 1 was freed: allocations fail with `NamespaceDead`.
    pub(crate) dead: bool,
}

impl SpaceCore {
    /// The last step of a failed allocation into this space, after its IDs were released
    /// (`alloc_pid`'s `out_free`): a space that is alive and holds no object (the kernel's
    /// `pid_allocated == PIDNS_ADDING`) gets its cursor back at 0, so that its next object
    /// takes ID 1 and becomes its init. Every other cursor stays where the allocation moved it.
    pub(crate) fn after_failed_alloc(&mut self, holds_objects: bool) {
        if !self.dead && !holds_objects {
            self.cursor = 0;
        }
    }
}

impl Default for SpaceCore {
    fn default() -> Self {
        SpaceCore {
            pid_max: PID_MAX_DEFAULT,
            cursor: 0,
            init_seen: false,
            dead: false,
        }
    }
}

/// A structure that records which IDs of one space are taken.
pub(crate) trait IdSpace {
    fn is_taken(&self, id: u32) -> bool;
    /// The first free ID in `from..end`.
    fn first_free(&self, from: u32, end: u32) -> Option<u32>;
    /// Marks `id` taken (it is free).
    fn reserve(&mut self, id: u32);
    /// Marks `id` free again.
    fn release(&mut self, id: u32);
    /// Whether a published object has an ID here (the kernel's `pid_allocated` count is not
    /// 0); IDs reserved by an allocation still in flight do not count.
    fn holds_objects(&self) -> bool;
}

/// Chooses and reserves the ID at one level, as `alloc_pid` does: `exact` is this level's
/// `set_tid` entry, if any.
pub(crate) fn alloc_level<S: IdSpace>(
    core: &mut SpaceCore,
    space: &mut S,
    exact: Option<u32>,
) -> Result<u32, PidError> {
    if let Some(tid) = exact {
        if tid < 1 || tid >= core.pid_max || (tid != 1 && !core.init_seen) {
            return Err(PidError::Invalid);
        }
        if space.is_taken(tid) {
            return Err(PidError::Exists);
        }
        space.reserve(tid);
        // Exact IDs do not move the cursor.
        return Ok(tid);
    }
    let lo = if core.cursor > RESERVED_PIDS {
        RESERVED_PIDS
    } else {
        1
    };
    let id = space
        .first_free(core.cursor.max(lo), core.pid_max)
        .or_else(|| space.first_free(lo, core.pid_max))
        .ok_or(PidError::Full)?;
    space.reserve(id);
    core.cursor = id + 1;
    Ok(id)
}

/// Checks a `set_tid` array against the depth of the target space (`level` below the root).
pub(crate) fn check_set_tid(set_tid: &[u32], level: u32) -> Result<(), PidError> {
    if set_tid.len() > level as usize + 1 {
        Err(PidError::Invalid)
    } else {
        Ok(())
    }
}

/// Checks a `pid_max` value (`pid_max_min..=PID_MAX_LIMIT`).
pub(crate) fn check_pid_max(max: u32) -> Result<(), PidError> {
    if (super::PID_MAX_MIN..=super::PID_MAX_LIMIT).contains(&max) {
        Ok(())
    } else {
        Err(PidError::Invalid)
    }
}
