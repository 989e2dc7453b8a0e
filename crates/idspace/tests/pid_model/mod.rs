//! A reference model of the kernel's PID semantics, for the PID tests.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

use idspace::pid::{
    PidError, MAX_LEVEL, PID_MAX_DEFAULT, PID_MAX_LIMIT, PID_MAX_MIN, RESERVED_PIDS,
};

pub struct Space {
    pub parent: Option<u32>,
    pub level: u32,
    pub pid_max: u32,
    pub cursor: u32,
    pub init_seen: bool,
    pub dead: bool,
    /// ID to object number.
    pub ids: BTreeMap<u32, usize>,
}

/// The model. In `kernel` mode it chooses IDs as the kernel does; otherwise (for `PerCpu`) it
/// accepts the ID the design chose if that ID is valid and free, and has no 300 floor, but
/// requires ID 1 wherever the kernel's cursor is at the start of an empty space (the space's
/// first object is its init, also after a failed first allocation).
pub struct Model {
    pub spaces: Vec<Space>,
    pub objects: HashMap<usize, Vec<(u32, u32)>>,
    next_object: usize,
    kernel: bool,
}

impl Model {
    pub fn new(kernel: bool) -> Model {
        Model {
            spaces: vec![Space {
                parent: None,
                level: 0,
                pid_max: PID_MAX_DEFAULT,
                cursor: 0,
                init_seen: false,
                dead: false,
                ids: BTreeMap::new(),
            }],
            objects: HashMap::new(),
            next_object: 0,
            kernel,
        }
    }

    pub fn new_ns(&mut self, parent: u32) -> Result<u32, PidError> {
        let level = self
            .spaces
            .get(parent as usize)
            .ok_or(PidError::UnknownNs)?
            .level
            + 1;
        if level > MAX_LEVEL {
            return Err(PidError::TooDeep);
        }
        self.spaces.push(Space {
            parent: Some(parent),
            level,
            pid_max: PID_MAX_DEFAULT,
            cursor: 0,
            init_seen: false,
            dead: false,
            ids: BTreeMap::new(),
        });
        Ok(self.spaces.len() as u32 - 1)
    }

    pub fn set_pid_max(&mut self, ns: u32, max: u32) -> Result<(), PidError> {
        if !(PID_MAX_MIN..=PID_MAX_LIMIT).contains(&max) {
            return Err(PidError::Invalid);
        }
        self.spaces
            .get_mut(ns as usize)
            .ok_or(PidError::UnknownNs)?
            .pid_max = max;
        Ok(())
    }

    fn first_free(space: &Space, from: u32, end: u32) -> Option<u32> {
        (from..end).find(|id| !space.ids.contains_key(id))
    }

    /// Allocates in `ns`; `chosen` is the design's answer (relaxed mode checks and adopts it).
    pub fn alloc(
        &mut self,
        ns: u32,
        set_tid: &[u32],
        chosen: Option<&[u32]>,
    ) -> Result<Vec<u32>, PidError> {
        let space = self.spaces.get(ns as usize).ok_or(PidError::UnknownNs)?;
        if set_tid.len() > space.level as usize + 1 {
            return Err(PidError::Invalid);
        }
        let mut chain = vec![ns];
        while let Some(parent) = self.spaces[*chain.last().unwrap() as usize].parent {
            chain.push(parent);
        }
        let object = self.next_object;
        let mut taken: Vec<(u32, u32)> = Vec::new();
        let mut failure = None;
        for (level, &space_ns) in chain.iter().enumerate() {
            let space = &mut self.spaces[space_ns as usize];
            let outcome = if let Some(&tid) = set_tid.get(level) {
                if tid < 1 || tid >= space.pid_max || (tid != 1 && !space.init_seen) {
                    Err(PidError::Invalid)
                } else if space.ids.contains_key(&tid) {
                    Err(PidError::Exists)
                } else {
                    Ok(tid)
                }
            } else if self.kernel {
                let lo = if space.cursor > RESERVED_PIDS {
                    RESERVED_PIDS
                } else {
                    1
                };
                let found = Self::first_free(space, space.cursor.max(lo), space.pid_max)
                    .or_else(|| Self::first_free(space, lo, space.pid_max));
                match found {
                    Some(id) => {
                        space.cursor = id + 1;
                        Ok(id)
                    }
                    None => Err(PidError::Full),
                }
            } else if Self::first_free(space, 1, space.pid_max).is_none() {
                Err(PidError::Full)
            } else {
                let id = match chosen.and_then(|ids| ids.get(level)) {
                    Some(&id) => {
                        assert!(
                            id >= 1 && id < space.pid_max,
                            "ID {id} out of range at level {level}"
                        );
                        assert!(
                            !space.ids.contains_key(&id),
                            "ID {id} handed out twice in space {space_ns}"
                        );
                        // Where the kernel's cursor is at the start (a new space, or one reset
                        // by a failed first allocation), the first object is the init.
                        assert!(
                            id == 1 || space.cursor != 0 || !space.ids.is_empty(),
                            "ID {id} where the kernel gives 1 (the init) in space {space_ns}"
                        );
                        id
                    }
                    // The design failed where the model has a free ID: report the model's
                    // view (success) with a placeholder the comparison will reject.
                    None => 0,
                };
                // The cursor is followed only as far as "at the start or not".
                space.cursor = id + 1;
                Ok(id)
            };
            match outcome {
                Ok(id) => {
                    space.ids.insert(id, object);
                    taken.push((space_ns, id));
                }
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        if failure.is_none() && self.spaces[ns as usize].dead {
            failure = Some(PidError::NamespaceDead);
        }
        if let Some(error) = failure {
            for (space_ns, id) in taken {
                self.spaces[space_ns as usize].ids.remove(&id);
            }
            // `alloc_pid`'s `out_free`: a target that is alive and holds no object
            // (`pid_allocated == PIDNS_ADDING`) gets its cursor back at 0, so its next object
            // is its init; the cursors moved at the other levels stay moved.
            let target = &mut self.spaces[ns as usize];
            if !target.dead && target.ids.is_empty() {
                target.cursor = 0;
            }
            return Err(error);
        }
        for &(space_ns, id) in &taken {
            if id == 1 {
                self.spaces[space_ns as usize].init_seen = true;
            }
        }
        self.next_object += 1;
        let ids = taken.iter().map(|&(_, id)| id).collect();
        self.objects.insert(object, taken);
        Ok(ids)
    }

    pub fn free(&mut self, ns: u32, id: u32) -> Result<(), PidError> {
        let space = self.spaces.get(ns as usize).ok_or(PidError::UnknownNs)?;
        let object = *space.ids.get(&id).ok_or(PidError::NotFound)?;
        for (space_ns, number) in self.objects.remove(&object).unwrap() {
            let space = &mut self.spaces[space_ns as usize];
            space.ids.remove(&number);
            if number == 1 {
                space.dead = true;
            }
        }
        Ok(())
    }

    /// The IDs of the object with `id` in `ns`, innermost first.
    pub fn lookup(&self, ns: u32, id: u32) -> Result<Option<Vec<u32>>, PidError> {
        let space = self.spaces.get(ns as usize).ok_or(PidError::UnknownNs)?;
        Ok(space
            .ids
            .get(&id)
            .map(|object| self.objects[object].iter().map(|&(_, id)| id).collect()))
    }
}
