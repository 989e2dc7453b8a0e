//! Namespaces: creating them, their `pid_max`, and refusing what comes into a freed one.

use super::{Namespace, Processes, State};
use crate::pid::{NsId, MAX_LEVEL, PID_MAX_DEFAULT, PID_MAX_LIMIT, PID_MAX_MIN};
use crate::process::design::{CidDesign, PidDesign, TableDesign};
use crate::process::error::ProcessError;
use crate::sync;

impl<P: PidDesign, C: CidDesign, T: TableDesign> Processes<P, C, T> {
    /// Why `ns`, which the model no longer keeps, refuses: freed (dead) or never created.
    pub(super) fn gone(state: &State<C>, ns: NsId) -> ProcessError {
        if state.freed.contains_key(&ns) {
            ProcessError::NsDead
        } else {
            ProcessError::UnknownNs
        }
    }

    /// An allocation into freed namespace `ns` with `set_tid` (innermost first; empty for a
    /// fork), refused as one into a dead namespace is by the kernel's `alloc_pid`: level by
    /// level, innermost first, a `set_tid` entry outside the level's `1..pid_max` is
    /// [`ProcessError::Invalid`]; the freed levels hold no IDs and had an init, so they refuse
    /// nothing else; the living ancestors then take their IDs (moving their cursors, refusing a
    /// taken entry or a full space) before the dead target is seen. The PID design does that
    /// part ([`PidAllocator::alloc_refused`](crate::pid::PidAllocator::alloc_refused)): it
    /// takes and gives back the nearest living ancestor's levels without publishing anything,
    /// so no ancestor gains an init, dies, or has its cursor reset.
    pub(super) fn refuse_freed(
        &self,
        state: &State<C>,
        ns: NsId,
        set_tid: &[u32],
        cpu: usize,
    ) -> ProcessError {
        let mut up = ns;
        let mut level = 0;
        while let Some(freed) = state.freed.get(&up) {
            if set_tid
                .get(level)
                .is_some_and(|&tid| tid < 1 || tid >= freed.pid_max)
            {
                return ProcessError::Invalid;
            }
            up = freed.parent;
            level += 1;
        }
        let rest = set_tid.get(level..).unwrap_or_default();
        ProcessError::from_pid(self.pids.alloc_refused(up, rest, cpu))
    }

    /// How many levels an allocation into freed namespace `ns` spans: its freed levels and
    /// those of its nearest living ancestor.
    pub(super) fn freed_depth(state: &State<C>, ns: NsId) -> usize {
        let mut up = ns;
        let mut freed_levels = 0;
        while let Some(freed) = state.freed.get(&up) {
            up = freed.parent;
            freed_levels += 1;
        }
        let living = state.namespaces.get(&up).map_or(0, |space| space.level + 1);
        freed_levels + living as usize
    }

    /// Creates a namespace below `parent`.
    ///
    /// # Errors
    /// [`ProcessError::UnknownNs`], [`ProcessError::NsDead`] (the parent's init ended),
    /// [`ProcessError::TooDeep`] past 32 levels, [`ProcessError::TooManyNamespaces`].
    pub fn ns_new(&self, parent: NsId) -> Result<NsId, ProcessError> {
        let mut state = sync::lock(&self.state);
        let Some(up) = state.namespaces.get(&parent) else {
            return Err(Self::gone(&state, parent));
        };
        if up.dead {
            return Err(ProcessError::NsDead);
        }
        let level = up.level + 1;
        if level > MAX_LEVEL {
            return Err(ProcessError::TooDeep);
        }
        let ns = self.pids.new_ns(parent).map_err(ProcessError::from_pid)?;
        state.namespaces.insert(
            ns,
            Namespace {
                parent: Some(parent),
                level,
                children: 0,
                held: 0,
                dead: false,
                pid_max: PID_MAX_DEFAULT,
            },
        );
        if let Some(up) = state.namespaces.get_mut(&parent) {
            up.children += 1;
        }
        Ok(ns)
    }

    /// Sets a namespace's `pid_max`. A freed namespace keeps it too: it allocates nothing, but
    /// a restore's `set_tid` entry at its level is checked against it, as the kernel checks one
    /// for a dead namespace.
    ///
    /// # Errors
    /// [`ProcessError::Invalid`] outside `301..=4194304`, [`ProcessError::UnknownNs`].
    pub fn set_pid_max(&self, ns: NsId, max: u32) -> Result<(), ProcessError> {
        let mut state = sync::lock(&self.state);
        if let Some(freed) = state.freed.get_mut(&ns) {
            if !(PID_MAX_MIN..=PID_MAX_LIMIT).contains(&max) {
                return Err(ProcessError::Invalid);
            }
            freed.pid_max = max;
            return Ok(());
        }
        self.pids
            .set_pid_max(ns, max)
            .map_err(ProcessError::from_pid)?;
        if let Some(space) = state.namespaces.get_mut(&ns) {
            space.pid_max = max;
        }
        Ok(())
    }

    /// Whether the model still keeps `ns` (created, and not freed).
    pub fn ns_exists(&self, ns: NsId) -> bool {
        sync::lock(&self.state).namespaces.contains_key(&ns)
    }
}
