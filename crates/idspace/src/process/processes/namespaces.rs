//! Namespaces: creating them, their `pid_max`, and refusing what comes into a freed one.

use super::{Namespace, Processes, State};
use crate::pid::{NsId, MAX_LEVEL, PID_MAX_LIMIT, PID_MAX_MIN};
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

    /// A fork into freed namespace `ns`, refused as one into a dead namespace: the kernel's
    /// `alloc_pid` takes an ID at every level before it sees that the namespace is dead, so
    /// the living ancestors' cursors move (and a full one answers `Full`). The freed levels
    /// are empty and can refuse nothing, so an allocation in the nearest living ancestor,
    /// given back at once, has exactly those effects. (Were it to take some level's ID 1,
    /// freeing it would kill that level; but a level with a freed descendant has allocated
    /// before, so its ID 1 is free only if its init is gone and it is dead already.)
    pub(super) fn refuse_freed(&self, state: &State<C>, ns: NsId, cpu: usize) -> ProcessError {
        let mut up = ns;
        while let Some(&parent) = state.freed.get(&up) {
            up = parent;
        }
        match self.pids.alloc(up, &[], cpu) {
            Ok(pid) => {
                let _ = self.pids.free(pid.ns(), pid.ids()[0], cpu);
                ProcessError::NsDead
            }
            Err(error) => match ProcessError::from_pid(error) {
                ProcessError::Full => ProcessError::Full,
                _ => ProcessError::NsDead,
            },
        }
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
            },
        );
        if let Some(up) = state.namespaces.get_mut(&parent) {
            up.children += 1;
        }
        Ok(ns)
    }

    /// Sets a namespace's `pid_max`.
    ///
    /// # Errors
    /// [`ProcessError::Invalid`] outside `301..=4194304`, [`ProcessError::UnknownNs`].
    pub fn set_pid_max(&self, ns: NsId, max: u32) -> Result<(), ProcessError> {
        let state = sync::lock(&self.state);
        if state.freed.contains_key(&ns) {
            // As on a dead namespace: accepted, and it changes nothing anyone can see.
            return if (PID_MAX_MIN..=PID_MAX_LIMIT).contains(&max) {
                Ok(())
            } else {
                Err(ProcessError::Invalid)
            };
        }
        self.pids
            .set_pid_max(ns, max)
            .map_err(ProcessError::from_pid)
    }

    /// Whether the model still keeps `ns` (created, and not freed).
    pub fn ns_exists(&self, ns: NsId) -> bool {
        sync::lock(&self.state).namespaces.contains_key(&ns)
    }
}
