//! Every live task of a runtime, so that shutdown can cancel the ones asleep: a sleeping task
//! is on no queue, and its wakers may outlive the runtime (held by a timer, a channel, or a
//! thread that will never wake it), which would leave its join handle waiting forever.
//!
//! The registry holds weak references: it never keeps a task alive, so a task whose wakers are
//! all dropped is still cancelled at once. A task enters at spawn and leaves when it ends
//! (spawn and exit take one shard's lock; switches never touch the registry). Under loom the
//! facade's `Arc` has no weak references and the registry is compiled out: the models cover the
//! wake/park protocol, and a sleeping task cancelled at shutdown goes through that protocol's
//! own path (a claimed wakeup that finds the queues closed).

#[cfg(not(loom))]
mod imp {
    use std::collections::HashMap;
    // Weak references, which loom's `Arc` lacks (this half does not exist under loom).
    use crate::sync::unmodeled::{Arc, Weak};

    use crossbeam_utils::CachePadded;

    use crate::sched::hooks::{Hooks, TaskId};
    use crate::sched::runtime::{RuntimeState, TaskRef};
    use crate::sched::task::TaskCell;
    use crate::sync::{self, Mutex};

    /// Shards, so that spawns and exits on different workers rarely meet on one lock.
    const SHARDS: usize = 16;

    /// Live tasks by ID, as weak references.
    type Tasks<H> = HashMap<u64, Weak<TaskCell<Arc<RuntimeState<H>>>>>;
    type Shard<H> = CachePadded<Mutex<Tasks<H>>>;

    pub(crate) struct Registry<H: Hooks> {
        shards: Box<[Shard<H>]>,
    }

    impl<H: Hooks> Registry<H> {
        pub(crate) fn new() -> Self {
            Registry {
                shards: (0..SHARDS)
                    .map(|_| CachePadded::new(Mutex::new(HashMap::new())))
                    .collect(),
            }
        }

        fn shard(&self, id: TaskId) -> &Mutex<Tasks<H>> {
            &self.shards[(id.0 % SHARDS as u64) as usize]
        }

        pub(crate) fn insert(&self, task: &TaskRef<H>) {
            sync::lock(self.shard(task.id())).insert(task.id().0, Arc::downgrade(task));
        }

        pub(crate) fn remove(&self, id: TaskId) {
            sync::lock(self.shard(id)).remove(&id.0);
        }

        /// Empties the registry and returns the tasks still alive. The references are taken
        /// under the shard locks but returned (and so dropped) outside them: dropping a task's
        /// last reference may call back into [`remove`](Self::remove).
        pub(crate) fn drain(&self) -> Vec<TaskRef<H>> {
            let mut live = Vec::new();
            for shard in self.shards.iter() {
                let tasks = std::mem::take(&mut *sync::lock(shard));
                live.extend(tasks.into_values().filter_map(|task| task.upgrade()));
            }
            live
        }
    }
}

#[cfg(loom)]
mod imp {
    use crate::sched::hooks::{Hooks, TaskId};
    use crate::sched::runtime::TaskRef;

    pub(crate) struct Registry<H: Hooks>(std::marker::PhantomData<H>);

    impl<H: Hooks> Registry<H> {
        pub(crate) fn new() -> Self {
            Registry(std::marker::PhantomData)
        }

        pub(crate) fn insert(&self, _task: &TaskRef<H>) {}

        pub(crate) fn remove(&self, _id: TaskId) {}

        pub(crate) fn drain(&self) -> Vec<TaskRef<H>> {
            Vec::new()
        }
    }
}

pub(crate) use imp::Registry;
