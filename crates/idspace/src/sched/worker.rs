//! A worker: the runtime's CPU. Its run queue under its own lock, its wakelist, its idle word,
//! and the loop that runs tasks and idles (`schedule()` and `do_idle()` in one).

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use super::balance;
use super::hooks::{Exit, Hooks};
#[cfg(not(loom))]
use super::idle;
use super::idle::{Idle, Notice, PollGovernor};
#[cfg(not(loom))]
use super::io::{Reactor, IO_PASSES};
use super::join::JoinError;
use super::placement::{Local, Placement, MAX_NEXT_POLLS};
use super::rescue;
use super::runtime::{RuntimeState, TaskRef};
use super::stats::Counters;
use super::task::{Polled, TaskCell};
use super::time::Expired;
use super::wakelist::{Mark, Wakelist};
// The runtime's state, type-erased elsewhere (see `runtime`).
use crate::sync::unmodeled::Arc;
use crate::sync::{self, AtomicUsize, Mutex, Ordering};
use crossbeam_utils::CachePadded;

/// The run queue proper (`struct rq`'s task list), guarded by the worker's lock.
pub(crate) struct RunQueue<H: Hooks> {
    tasks: VecDeque<TaskRef<H>>,
    /// Set at shutdown: nothing may be queued any more.
    closed: bool,
}

/// The wakelist and the count of wakeups pushed but not yet moved to the run queue
/// (`rq->ttwu_pending`, kept as a count). They share a line: a waker touches both.
pub(crate) struct Inbox<H: Hooks> {
    list: Wakelist<TaskCell<Arc<RuntimeState<H>>>>,
    pending: AtomicUsize,
}

/// A worker's wakelist head as seen at one moment.
pub(crate) type WakelistMark<H> = Mark<TaskCell<Arc<RuntimeState<H>>>>;

/// One worker's shared state. Fields written by other workers sit on their own cache lines.
pub(crate) struct Worker<H: Hooks> {
    /// The run queue and its lock (`rq->lock`).
    queue: CachePadded<Mutex<RunQueue<H>>>,
    /// Tasks in `queue` (`rq->nr_running` minus the current task), readable without the lock.
    queued: CachePadded<AtomicUsize>,
    /// The wakelist side.
    inbox: CachePadded<Inbox<H>>,
    /// The idle word.
    pub(crate) idle: CachePadded<Idle>,
    /// Counters of wakeups made *by* tasks running on this worker.
    pub(crate) counters: CachePadded<Counters>,
    /// The next slot and the running task's waker record: this worker's thread only.
    pub(crate) local: CachePadded<Local<H>>,
    /// The worker's poller: its own, or the runtime's shared one (whichever worker holds it
    /// polls it; anyone registers and wakes).
    #[cfg(not(loom))]
    pub(crate) reactor: Arc<CachePadded<Reactor>>,
}

impl<H: Hooks> Worker<H> {
    /// A worker with empty queues polling `reactor` (its own, or the runtime's shared one).
    pub(crate) fn new(#[cfg(not(loom))] reactor: Arc<CachePadded<Reactor>>) -> Self {
        Worker {
            queue: CachePadded::new(Mutex::new(RunQueue {
                tasks: VecDeque::new(),
                closed: false,
            })),
            queued: CachePadded::new(AtomicUsize::new(0)),
            inbox: CachePadded::new(Inbox {
                list: Wakelist::new(),
                pending: AtomicUsize::new(0),
            }),
            idle: CachePadded::new(Idle::new()),
            counters: CachePadded::new(Counters::default()),
            local: CachePadded::new(Local::new()),
            #[cfg(not(loom))]
            reactor,
        }
    }

    /// Tasks queued on the run queue (a hint, read without the lock).
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Wakeups pushed onto the wakelist and not yet taken (a hint, read without the lock).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.inbox.pending.load(Ordering::Relaxed)
    }

    /// Whether this worker counts as idle for choosing a wakeup target (`idle_cpu()`): not
    /// running, nothing queued, and no wakeups pending on its wakelist. Pending wakelist entries
    /// count as load, or several wakers would pick the same idle worker and stack their tasks on
    /// it (the bug fixed by d6962c4fe8f9).
    pub(crate) fn is_idle(&self) -> bool {
        !self.idle.is_busy()
            && self.queued.load(Ordering::Relaxed) == 0
            && self.inbox.pending.load(Ordering::Relaxed) == 0
    }

    /// Whether nothing runs or waits on this worker's run queue: the kernel's
    /// `!cpu_rq(cpu)->nr_running`, the test by which `ttwu_queue_cond` sends a wakeup through
    /// the wakelist. It holds for an idle worker and for one that is *about to be* idle: its
    /// last task's poll returned and it is looking for more (newidle balance, the recheck),
    /// where [`is_idle`](Self::is_idle) still sees it running. Wakeups pending on the wakelist
    /// do not count, as `nr_running` does not count `ttwu_pending`: a second waker may batch
    /// onto the same list (choosing the *target* is where pending entries count as load).
    pub(crate) fn nothing_running(&self) -> bool {
        !self.idle.has_current() && self.queued.load(Ordering::Relaxed) == 0
    }

    /// Tasks waiting on this worker, queued or still on its wakelist (a hint, read without the
    /// lock).
    pub(crate) fn load(&self) -> usize {
        self.queued.load(Ordering::Relaxed) + self.inbox.pending.load(Ordering::Relaxed)
    }

    /// Whether work is waiting. After [`Idle::start_polling`]'s fence, this is the recheck of
    /// the protocol's handshake; Relaxed loads suffice there (the fence orders them).
    pub(super) fn has_work(&self) -> bool {
        self.queued.load(Ordering::Relaxed) != 0 || !self.inbox.list.is_empty()
    }

    /// Queues `task` under the run-queue lock, or hands it back if the runtime shut down.
    pub(crate) fn enqueue(&self, task: TaskRef<H>) -> Result<(), TaskRef<H>> {
        let mut queue = sync::lock(&self.queue);
        if queue.closed {
            return Err(task);
        }
        queue.tasks.push_back(task);
        // The published work of the handshake: `notify`'s fence orders it before the read of
        // the idle word (the lock's release alone would not).
        self.queued.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Pushes `task` onto the wakelist. Returns whether the list was empty (so the worker must
    /// be notified), or hands the task back if the runtime shut down.
    pub(crate) fn push_wakelist(&self, task: TaskRef<H>) -> Result<bool, TaskRef<H>> {
        let Inbox { list, pending } = &*self.inbox;
        // Counted before the push, so that the worker looks busy to the next waker choosing a
        // target. Relaxed: a placement hint; the list itself carries the task.
        pending.fetch_add(1, Ordering::Relaxed);
        list.push(task).inspect_err(|_| {
            pending.fetch_sub(1, Ordering::Relaxed);
        })
    }

    /// The wakelist's head while wakeups wait on it, as a mark for
    /// [`take_stalled`](Self::take_stalled).
    pub(crate) fn wakelist_mark(&self) -> Option<WakelistMark<H>> {
        self.inbox.list.mark()
    }

    /// Takes every wakeup on the wakelist into `into` if its head is still `mark` (a worker
    /// that did not take them itself, see `rescue.rs`), and returns how many. They no longer
    /// count as pending here: the caller queues them on its own run queue.
    pub(crate) fn take_stalled(&self, mark: WakelistMark<H>, into: &mut Vec<TaskRef<H>>) -> usize {
        let batch = self.inbox.list.take_from(mark);
        let count = batch.len();
        if count > 0 {
            into.extend(batch);
            // Relaxed: a placement hint, as in `take_queue`.
            self.inbox.pending.fetch_sub(count, Ordering::Relaxed);
        }
        count
    }

    /// The next task to run: the task in the next slot while fewer than [`MAX_NEXT_POLLS`]
    /// ran from it in a row (`next_polls` counts them), else the front of the run queue. Before
    /// the queue is served, everything on the wakelist moves to its back, under one lock hold
    /// per batch (`sched_ttwu_pending`), with the slot's task behind it when the cap sent it
    /// there; the front is taken in the same hold. The pending count drops only after the batch
    /// is queued.
    pub(crate) fn next_task(&self, next_polls: &mut u32) -> Option<TaskRef<H>> {
        let slot = self.local.take_next();
        if let Some(task) = slot {
            if *next_polls < MAX_NEXT_POLLS {
                *next_polls += 1;
                return Some(task);
            }
            self.counters.capped.add(1);
            // The cap: the slot's task waits its turn behind the queue (below).
            *next_polls = 0;
            return self.take_queue(Some(task));
        }
        *next_polls = 0;
        self.take_queue(None)
    }

    /// The front of the run queue once the wakelist's batch, then `behind`, joined its back.
    ///
    /// A batch of one onto an empty queue, with nothing behind it, would be the front at once:
    /// the worker takes it straight from the batch, without its run-queue lock. That is the
    /// common case of a wakeup onto an idle worker (the wakelist policy's own case), which then
    /// costs no run-queue lock on either side: the waker pushed with one CAS, the worker took
    /// it with one swap.
    fn take_queue(&self, behind: Option<TaskRef<H>>) -> Option<TaskRef<H>> {
        let Inbox { list, pending } = &*self.inbox;
        let mut batch = list.take_all();
        let count = batch.len();
        if count == 0 && behind.is_none() {
            return self.pop();
        }
        if count > 0 {
            self.counters.batches.add(1);
        }
        // Relaxed: a task a concurrent waker queues meanwhile is simply run after this one, as
        // if it had come second; nothing waits on the order of two concurrent wakeups.
        if count == 1 && behind.is_none() && self.queued.load(Ordering::Relaxed) == 0 {
            let task = batch.next();
            // Relaxed, and with the task in hand: the worker is running and never looks idle
            // in between (as below).
            pending.fetch_sub(1, Ordering::Relaxed);
            return task;
        }
        let added = count + usize::from(behind.is_some());
        let task = {
            let mut queue = sync::lock(&self.queue);
            queue.tasks.extend(batch);
            queue.tasks.extend(behind);
            let task = queue.tasks.pop_front();
            // Relaxed: the worker is awake and finds its own work; wakers read the count only
            // as a load hint. At least one task was added, so one was taken.
            self.queued.fetch_add(added - 1, Ordering::Relaxed);
            task
        };
        if count > 0 {
            // Relaxed, and after the enqueue: the worker never looks idle in between.
            pending.fetch_sub(count, Ordering::Relaxed);
        }
        task
    }

    fn pop(&self) -> Option<TaskRef<H>> {
        if self.queued.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut queue = sync::lock(&self.queue);
        let task = queue.tasks.pop_front()?;
        self.queued.fetch_sub(1, Ordering::Relaxed);
        Some(task)
    }

    /// Moves the back half of the run queue, rounded up, to the end of `into` and returns how
    /// many tasks moved (the kernel's `detach_tasks`, for a stealing worker). The back holds
    /// the tasks that would wait longest here.
    pub(crate) fn steal_half(&self, into: &mut Vec<TaskRef<H>>) -> usize {
        if self.queued.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let mut queue = sync::lock(&self.queue);
        let len = queue.tasks.len();
        let take = balance::steal_count(len);
        into.extend(queue.tasks.drain(len - take..));
        // Relaxed, under the lock like every change of the queue: a load hint.
        self.queued.fetch_sub(take, Ordering::Relaxed);
        take
    }

    /// Moves all of `tasks` to the back of the run queue, in order; leaves them in `tasks` if
    /// the runtime shut down.
    pub(crate) fn enqueue_all(&self, tasks: &mut Vec<TaskRef<H>>) -> bool {
        if tasks.is_empty() {
            return true;
        }
        let mut queue = sync::lock(&self.queue);
        if queue.closed {
            return false;
        }
        let count = tasks.len();
        queue.tasks.extend(tasks.drain(..));
        // Relaxed: only the worker itself queues this way, and it is awake (no handshake).
        self.queued.fetch_add(count, Ordering::Relaxed);
        true
    }

    /// Closes the run queue and the wakelist and returns every task left on them and in the
    /// next slot. Call only once the worker's thread has ended (the slot is its own).
    pub(crate) fn close(&self) -> Vec<TaskRef<H>> {
        let mut left: Vec<TaskRef<H>> = self.inbox.list.close().collect();
        left.extend(self.local.take_next());
        let mut queue = sync::lock(&self.queue);
        queue.closed = true;
        left.extend(queue.tasks.drain(..));
        self.queued.store(0, Ordering::Relaxed);
        left
    }

    /// Notifies this worker that work was published for it, and counts how.
    pub(crate) fn notify(&self, counters: &Counters) {
        match self.idle.notify() {
            Notice::NotNeeded => {}
            Notice::Polling => counters.notify_polling.add(1),
            Notice::Woken => counters.notify_futex.add(1),
            Notice::WakePoller => {
                #[cfg(not(loom))]
                self.reactor.wake();
                counters.notify_poller.add(1);
            }
        }
    }
}

#[cfg(not(loom))]
sync::thread_local! {
    /// The runtime (its address) and worker index of the current thread, if it is a worker.
    static CURRENT: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

// loom's `thread_local!` takes no `const` initialisers.
#[cfg(loom)]
sync::thread_local! {
    static CURRENT: std::cell::Cell<(usize, usize)> = std::cell::Cell::new((0, 0));
}

/// The index of the current thread's worker, if it is a worker of `shared`.
pub(crate) fn current<H: Hooks>(shared: &RuntimeState<H>) -> Option<usize> {
    let (runtime, worker) = CURRENT.with(|current| current.get());
    (runtime == shared as *const RuntimeState<H> as usize).then_some(worker)
}

/// Whether the current thread is a worker of any runtime: there, blocking the thread would
/// stop the tasks and timers it runs (see `Runtime::block_on` and `JoinHandle::join`).
pub(crate) fn on_worker() -> bool {
    CURRENT.with(|current| current.get().0 != 0)
}

/// How long a worker polls before it parks. Under loom, where time does not pass, a non-zero
/// budget is one look.
#[derive(Clone, Copy)]
pub(crate) struct PollBudget(pub(crate) Duration);

/// A busy worker looks at its timers every this many passes of its loop (tokio: every 61
/// polls). Lateness on a busy worker grows by at most this many polls.
const TIMER_PASSES: u32 = 4;

/// The worker thread's body.
pub(crate) fn run<H: Hooks>(shared: Arc<RuntimeState<H>>, index: usize) {
    CURRENT.with(|current| current.set((Arc::as_ptr(&shared) as usize, index)));
    let entered = super::runtime::enter(Arc::clone(&shared));
    // A hook's panic was printed by the panic hook; the worker goes on without it.
    let _ = panic::catch_unwind(AssertUnwindSafe(|| shared.hooks().worker_started(index)));
    let worker = shared.worker(index);
    let mut expired = Expired::default();
    let mut governor = PollGovernor::new(shared.poll_budget().0);
    let mut passes = 0u32;
    let mut next_polls = 0u32;
    // Forced-remote placement moves no task but by its wakeups: a steal would pull a wakee
    // back to its waker's worker and undo the crossing it exists to measure.
    let balancing = shared.placement() == Placement::Kernel;
    // Stolen tasks pass through here; its capacity stays, so steals stop allocating early on.
    let mut stolen = Vec::new();
    loop {
        if shared.is_shutting_down() {
            break;
        }
        // The timer "interrupt": due timers fire between polls, their tasks queued first. A
        // busy worker looks every few passes (a clock read costs as much as a short poll); an
        // idle one looks before it sleeps.
        passes = passes.wrapping_add(1);
        if passes % TIMER_PASSES == 0 {
            shared.timers().expire(index, &mut expired);
        }
        // The busy worker's look at its poller, so that a long run queue does not starve I/O.
        #[cfg(not(loom))]
        if passes % IO_PASSES == 0 && worker.reactor.sources() > 0 {
            let events = worker.reactor.poll_now();
            worker.counters.io_events.add(events as u64);
        }
        if balancing && passes % balance::BALANCE_PASSES == 0 {
            balance::kick_idle(shared.workers(), index);
        }
        let task = worker.next_task(&mut next_polls).or_else(|| {
            // Nothing left here: the worker is about to be idle (`nr_running == 0`), and says
            // so before it looks further, as the kernel's count drops before newidle balance.
            worker.idle.set_current(false);
            // First pull work from the busiest worker (newidle balance).
            let stolen = balancing.then(|| balance::newidle(&shared, index, &mut stolen));
            stolen.flatten()
        });
        if let Some(task) = task {
            // A store only when the worker had none: back-to-back tasks write nothing.
            if !worker.idle.has_current() {
                worker.idle.set_current(true);
            }
            run_task(&shared, worker, index, task);
            continue;
        }
        let rescue = balancing.then_some(&mut stolen);
        idle(&shared, worker, index, &mut expired, &mut governor, rescue);
    }
    // Shut down from one of its own polls, this worker was not waited for: a task woken into
    // its next slot after the queues closed is cancelled here, as shutdown cancels the rest.
    if shared.is_detached(index) {
        if let Some(task) = worker.local.take_next() {
            shared.cancel(task, Some(index));
        }
    }
    let _ = panic::catch_unwind(AssertUnwindSafe(|| shared.hooks().worker_stopped(index)));
    drop(entered);
    CURRENT.with(|current| current.set((0, 0)));
}

fn run_task<H: Hooks>(
    shared: &RuntimeState<H>,
    worker: &Worker<H>,
    index: usize,
    task: TaskRef<H>,
) {
    let hooks = shared.hooks();
    // A hook that panics ends its task there, with the panic as the task's outcome; the
    // worker goes on.
    let switched_in = || hooks.switched_in(task.id(), task.data(), index);
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(switched_in)) {
        TaskCell::fail(&task, JoinError::hook_panicked("switched_in", payload));
        shared.exited(&task, Some(index), Exit::Panicked);
        return;
    }
    worker.local.switch_in(task.wakees());
    let switched_out = |task: &TaskCell<_>| {
        let hook = || hooks.switched_out(task.id(), task.data(), index);
        panic::catch_unwind(AssertUnwindSafe(hook))
            .err()
            .map(|payload| JoinError::hook_panicked("switched_out", payload))
    };
    let leave = |task: &TaskCell<_>| task.set_wakees(worker.local.switch_out());
    let polled = TaskCell::run(task, index, switched_out, leave);
    match polled {
        // A task that shut its own runtime down (dropped it) is asleep now, after the shutdown
        // drained the registry of sleepers: it is cancelled here, as the drain would have (the
        // claim leaves it alone if a waker queued it meanwhile, onto a closed queue).
        Polled::Sleeping(task) => {
            if shared.is_detached(index) && task.claim_wakeup() {
                shared.cancel(task, Some(index));
            }
        }
        Polled::Requeue(task) => {
            // Woken during its own poll: it goes to the back of this worker's queue, as a
            // yielding task would. The queue may be closed (shutdown): then it is cancelled.
            if let Err(task) = worker.enqueue(task) {
                shared.cancel(task, Some(index));
            }
        }
        Polled::Exited(task, how) => shared.exited(&task, Some(index), how),
    }
}

/// The idle loop: announce, recheck, poll for a bounded while (as long as `governor` says, and
/// only while polling can pay), rescue the wakeups a stalled worker left waiting (given a
/// buffer for them: `rescue.rs`), then sleep until notified or until the worker's next timer.
fn idle<H: Hooks>(
    shared: &RuntimeState<H>,
    worker: &Worker<H>,
    index: usize,
    expired: &mut Expired,
    governor: &mut PollGovernor,
    rescue: Option<&mut Vec<TaskRef<H>>>,
) {
    worker.idle.start_polling();
    // The recheck after the fenced announcement: a waker that published before it is seen here;
    // one that publishes after it sees POLLING and notifies. The next expiry is read after the
    // fence too: an arm from another thread that moves it earlier either is seen here or sees
    // POLLING (or PARKED) and notifies (its fence is the one in `Idle::notify`).
    if worker.has_work() || shared.is_shutting_down() {
        worker.idle.stop_idling();
        return;
    }
    let timer = shared.timers().next_deadline(index);
    let since = Instant::now();
    if timer.is_none_or(|timer| timer > since)
        && !poll(
            shared,
            worker,
            index,
            spin_budget(shared, index, governor, timer),
            timer,
        )
        && !rescue.is_some_and(|buffer| rescue::stalled_wakelists(shared, index, buffer))
        && park(worker, timer)
    {
        worker.counters.parks.add(1);
        let now = Instant::now();
        governor.parked(now - since, timer.is_some_and(|timer| now >= timer));
    }
    // Timers due now fire while the worker still counts as idle, so that the first task they
    // wake comes to this worker, its last one, with no notification, instead of to another
    // worker that must be woken: the kernel's timer interrupt on an idle CPU, whose wakeups
    // find the CPU idle. Further wakeups of the pass find it loaded and spread as usual.
    shared.timers().expire(index, expired);
    worker.idle.stop_idling();
}

/// Parks the idle worker until notified or until `timer`: in `epoll_wait` when resources are
/// registered with its poller (read after the fence of `start_polling`, like the queues: a
/// registration from another thread publishes the count and notifies) and it holds the poller
/// (a shared poller is held by one parked worker at a time: the others sleep on their
/// futexes, see the protocol, section 9), else on its futex. Returns whether it slept.
///
/// `epoll_wait` counts in whole milliseconds: the wait is rounded *down* to them, and a timer
/// due within the next millisecond is waited for on the futex, so that timers keep their
/// resolution; I/O then waits at most that millisecond.
fn park<H: Hooks>(worker: &Worker<H>, timer: Option<Instant>) -> bool {
    #[cfg(not(loom))]
    {
        let wait = timer.map(|timer| {
            let left = timer.saturating_duration_since(Instant::now());
            Duration::from_millis(left.as_millis() as u64)
        });
        if worker.reactor.sources() > 0 && wait.is_none_or(|wait| !wait.is_zero()) {
            if let Some(mut held) = worker.reactor.hold() {
                // Let go only after the word left PARKED_POLLER: a notification that finds it
                // there writes the eventfd of the poller this worker still holds.
                return match worker.idle.park_in_poller(|| held.turn(wait)) {
                    Some(events) => {
                        worker.counters.io_events.add(events as u64);
                        true
                    }
                    None => false,
                };
            }
        }
    }
    worker.idle.park(timer)
}

/// Whether polling can pay for worker `index` now ([`idle::worth_spinning`]), judged by the
/// idle words of the next few workers after it (all of them on a runtime of up to 17 workers):
/// a bounded look, as the poll repeats it.
#[cfg(not(loom))]
fn worth_spinning<H: Hooks>(shared: &RuntimeState<H>, index: usize) -> bool {
    const LOOK_AT: usize = 16;
    let n = shared.worker_count();
    idle::worth_spinning(
        (1..n.min(LOOK_AT + 1)).map(|step| &*shared.worker((index + step) % n).idle),
    )
}

/// How long this idle period may poll: the governor's limit, or nothing when polling cannot
/// pay ([`worth_spinning`]) or the worker's CPU is wanted by another thread
/// ([`PollGovernor::contended`]: one `getrusage` call, made only when a poll would follow).
/// A `timer` due within the limit is polled for regardless, as [`poll`] does.
#[cfg(not(loom))]
fn spin_budget<H: Hooks>(
    shared: &RuntimeState<H>,
    index: usize,
    governor: &mut PollGovernor,
    timer: Option<Instant>,
) -> PollBudget {
    let limit = governor.limit();
    if limit.is_zero() || timer.is_some_and(|timer| timer <= Instant::now() + limit) {
        return PollBudget(limit);
    }
    if !worth_spinning(shared, index)
        || governor.contended(crate::sys::rusage::involuntary_switches())
    {
        return PollBudget(Duration::ZERO);
    }
    PollBudget(limit)
}

/// Under loom no thread is ever preempted: the governor's limit.
#[cfg(loom)]
fn spin_budget<H: Hooks>(
    _shared: &RuntimeState<H>,
    _index: usize,
    governor: &mut PollGovernor,
    _timer: Option<Instant>,
) -> PollBudget {
    PollBudget(governor.limit())
}

/// Spins until work or a notification arrives, the next timer is due or the budget runs out,
/// or, unless the timer is due within the budget, until no other worker runs
/// ([`worth_spinning`]); returns whether it ended early (then the worker does not park).
#[cfg(not(loom))]
fn poll<H: Hooks>(
    shared: &RuntimeState<H>,
    worker: &Worker<H>,
    index: usize,
    budget: PollBudget,
    timer: Option<Instant>,
) -> bool {
    if budget.0.is_zero() {
        return false;
    }
    let deadline = Instant::now() + budget.0;
    // Waiting for a timer due within the budget pays whatever the others do: a futex sleep
    // that short would oversleep by the kernel's timer slack.
    let for_timer = timer.is_some_and(|timer| timer <= deadline);
    loop {
        if !for_timer && !worth_spinning(shared, index) {
            return false;
        }
        for _ in 0..32 {
            if worker.idle.is_notified() || worker.has_work() {
                return true;
            }
            sync::cpu_relax();
        }
        // The poller, too: an event's wakeup comes to this idle worker as local work.
        if worker.reactor.sources() > 0 {
            let events = worker.reactor.poll_now();
            if events > 0 {
                worker.counters.io_events.add(events as u64);
                return true;
            }
        }
        let now = Instant::now();
        if timer.is_some_and(|timer| now >= timer) {
            return true;
        }
        if shared.is_shutting_down() || now >= deadline {
            return shared.is_shutting_down();
        }
    }
}

#[cfg(loom)]
fn poll<H: Hooks>(
    shared: &RuntimeState<H>,
    worker: &Worker<H>,
    _index: usize,
    budget: PollBudget,
    _timer: Option<Instant>,
) -> bool {
    // As in the real loop, no budget means no look at all; otherwise one look, so that models
    // cover a waker that finds the worker polling without unbounded spinning.
    if budget.0.is_zero() {
        return false;
    }
    sync::cpu_relax();
    worker.idle.is_notified() || worker.has_work() || shared.is_shutting_down()
}
