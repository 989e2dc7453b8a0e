//! One arbitrary sequence of process operations (namespaces, fork, clone, exit, kill, timers,
//! checkpoint, restore) applied to four models: three with exact PID designs (`IdrOnce`,
//! `IdrRelock`, `BitmapHash`, each with another CID and table design) must answer alike, call
//! for call; all four, `PerCpu` too, must keep the invariants after every call: no ID held twice
//! at any level, every held ID found by a lookup, a restored process equal to its image, and a
//! dead namespace (its init ended) holding and allocating nothing. Namespaces are few and
//! `pid_max` can drop to its least, so that spaces fill up.

#![no_main]

use std::collections::{BTreeSet, HashMap};

use arbitrary::Arbitrary;
use idspace::cid::{BitmapCids, LazyCids, Rework};
use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, NsId, PerCpu, PID_MAX_MIN, ROOT};
use idspace::process::{CidDesign, Image, PidDesign, Processes, TableDesign};
use idspace::table::{GlobalHash, Radix, ScaledHash};
use libfuzzer_sys::fuzz_target;

/// CPUs of every model.
const CPUS: usize = 2;
/// Images a model keeps from checkpoints, to restore later.
const IMAGES: usize = 4;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    NsNew(u8),
    /// Lowers a namespace's `pid_max` to the least (or sets the default back).
    PidMax(u8, bool),
    Fork(u8),
    /// Forks into a namespace until it refuses (at most `PID_MAX_MIN` times).
    Fill(u8),
    Clone(u8),
    Exit(u8),
    Kill(u8),
    TimerCreate(u8),
    TimerDelete(u8, u8),
    Checkpoint(u8),
    Restore(u8, u8),
    /// Checkpoints a process, kills it and restores it into its own namespace or the root.
    RoundTrip(u8, bool),
    Lookup(u8, u16),
}

/// A model with the bookkeeping the operations pick from and the invariants need.
struct World<P: PidDesign, C: CidDesign, T: TableDesign> {
    model: Processes<P, C, T>,
    /// Namespaces made, the root included.
    namespaces: Vec<NsId>,
    images: Vec<Image>,
    /// Namespaces that have had their init (ID 1), and those whose init has ended since.
    inited: BTreeSet<NsId>,
    dead: BTreeSet<NsId>,
}

/// A model behind one interface, whatever its designs.
trait Model {
    fn name(&self) -> &'static str;
    /// Carries `op` out; the answer, as text (memory counts left out).
    fn apply(&mut self, op: Op, at: &str) -> String;
    /// Checks the invariants.
    fn check(&mut self, at: &str);
}

fn pick<T: Copy>(items: &[T], pick: u8) -> Option<T> {
    (!items.is_empty()).then(|| items[usize::from(pick) % items.len()])
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> World<P, C, T> {
    fn new() -> Self {
        World {
            model: Processes::with_designs(CPUS).expect("2 CPUs are in range"),
            namespaces: vec![ROOT],
            images: Vec::new(),
            inited: BTreeSet::new(),
            dead: BTreeSet::new(),
        }
    }

    /// A namespace: one made, or one past them (unknown).
    fn ns(&self, choice: u8) -> NsId {
        let known = self.namespaces.len();
        match usize::from(choice) % (known + 1) {
            past if past == known => self.namespaces.last().map_or(0, |&ns| ns + 1),
            index => self.namespaces[index],
        }
    }

    fn process(&self, choice: u8) -> u32 {
        pick(&self.model.process_ids(), choice).unwrap_or(u32::MAX)
    }

    fn threads(&self) -> Vec<u32> {
        let pids = self.model.process_ids();
        let tids = pids
            .iter()
            .flat_map(|&pid| self.model.threads(pid).unwrap_or_default());
        tids.collect()
    }

    /// Restores `image` into `ns`; on success, checks the process against its image.
    fn restore(&self, ns: NsId, image: &Image, at: &str) -> String {
        match self.model.restore(ns, image, 0) {
            Ok(restored) => {
                let again = self.model.checkpoint(restored.leader.tid());
                let again = again.unwrap_or_else(|e| panic!("{at}: the restored process: {e}"));
                assert_same_process(image, &again, at);
                format!("restored {:?}", restored.leader.ids())
            }
            Err(e) => format!("{e:?}"),
        }
    }

    fn fork(&mut self, ns: NsId) -> Result<Vec<u32>, String> {
        self.model
            .fork(ns, 0)
            .map(|leader| leader.ids())
            .map_err(|e| format!("{e:?}"))
    }
}

/// A restored process is its image: as many threads, the same zombie leader, the same IDs at
/// the levels the image gave (the innermost, as deep as both go), the same timers and cursor.
fn assert_same_process(image: &Image, restored: &Image, at: &str) {
    let depth = image.threads[0]
        .ids
        .len()
        .min(restored.threads[0].ids.len());
    let inner = |image: &Image| {
        let mut threads: Vec<(bool, Vec<u32>)> = (image.threads.iter())
            .map(|thread| (thread.zombie, thread.ids[..depth].to_vec()))
            .collect();
        threads[1..].sort();
        threads
    };
    assert_eq!(inner(restored), inner(image), "{at}: restored threads");
    assert_eq!(
        (
            &restored.timers,
            restored.timer_cursor,
            &restored.timer_states
        ),
        (&image.timers, image.timer_cursor, &image.timer_states),
        "{at}: restored timers"
    );
}

impl<P: PidDesign, C: CidDesign, T: TableDesign> Model for World<P, C, T> {
    fn name(&self) -> &'static str {
        self.model.pids().name()
    }

    fn apply(&mut self, op: Op, at: &str) -> String {
        let model = &self.model;
        let shown = |result: Result<String, idspace::process::ProcessError>| match result {
            Ok(answer) => answer,
            Err(e) => format!("{e:?}"),
        };
        match op {
            Op::NsNew(parent) => {
                let made = model.ns_new(self.ns(parent));
                if let Ok(ns) = made {
                    self.namespaces.push(ns);
                }
                format!("{made:?}")
            }
            Op::PidMax(ns, least) => {
                let max = if least {
                    PID_MAX_MIN
                } else {
                    idspace::pid::PID_MAX_DEFAULT
                };
                format!("{:?}", model.set_pid_max(self.ns(ns), max))
            }
            Op::Fork(ns) => format!("{:?}", self.fork(self.ns(ns))),
            Op::Fill(ns) => {
                let ns = self.ns(ns);
                let mut forks = Vec::new();
                for _ in 0..PID_MAX_MIN {
                    let fork = self.fork(ns);
                    let refused = fork.is_err();
                    forks.push(fork);
                    if refused {
                        break;
                    }
                }
                format!("{forks:?}")
            }
            Op::Clone(pid) => shown(
                (model.clone_thread(self.process(pid), 1))
                    .map(|thread| format!("{:?}", thread.ids())),
            ),
            Op::Exit(tid) => {
                let tid = pick(&self.threads(), tid).unwrap_or(u32::MAX);
                format!("{:?}", model.exit(tid, 1))
            }
            Op::Kill(pid) => format!("{:?}", model.kill(self.process(pid), 0)),
            Op::TimerCreate(pid) => format!("{:?}", model.timer_create(self.process(pid))),
            Op::TimerDelete(pid, timer) => {
                let pid = self.process(pid);
                let timer = pick(&model.timers(pid).unwrap_or_default(), timer).unwrap_or(7);
                format!("{:?}", model.timer_delete(pid, timer))
            }
            Op::Checkpoint(pid) => {
                let image = model.checkpoint(self.process(pid));
                if let Ok(image) = &image {
                    if self.images.len() == IMAGES {
                        self.images.remove(0);
                    }
                    self.images.push(image.clone());
                }
                format!("{image:?}")
            }
            Op::Restore(image, ns) => {
                if self.images.is_empty() {
                    return "no image".to_string();
                }
                let image = self.images[usize::from(image) % self.images.len()].clone();
                self.restore(self.ns(ns), &image, at)
            }
            Op::RoundTrip(pid, into_root) => {
                let pid = self.process(pid);
                let Ok(image) = model.checkpoint(pid) else {
                    return "no process".to_string();
                };
                let ns = if into_root {
                    ROOT
                } else {
                    model
                        .thread(pid)
                        .map_or(ROOT, |leader| leader.process().ns())
                };
                let killed = model.kill(pid, 0);
                format!("{killed:?} {}", self.restore(ns, &image, at))
            }
            Op::Lookup(ns, id) => format!("{:?}", model.lookup(self.ns(ns), u32::from(id % 320))),
        }
    }

    fn check(&mut self, at: &str) {
        let name = self.name();
        for &ns in &self.namespaces {
            match self.model.lookup(ns, 1) {
                Ok(Some(_)) => assert!(
                    !self.dead.contains(&ns),
                    "{name}, {at}: dead namespace {ns} has an ID 1 again"
                ),
                _ if self.inited.contains(&ns) => drop(self.dead.insert(ns)),
                _ => {}
            }
            if matches!(self.model.lookup(ns, 1), Ok(Some(_))) {
                self.inited.insert(ns);
            }
        }
        // Every ID held, at every level: held once, found by a lookup, in no dead namespace.
        let mut held: HashMap<(NsId, u32), u32> = HashMap::new();
        for tid in self.threads() {
            let Some(thread) = self.model.thread(tid) else {
                panic!("{name}, {at}: thread {tid} is listed but not found");
            };
            for &(ns, id) in thread.pid().levels() {
                if let Some(other) = held.insert((ns, id), tid) {
                    panic!("{name}, {at}: ID {id} of namespace {ns} held by {other} and {tid}");
                }
                assert!(
                    !self.dead.contains(&ns),
                    "{name}, {at}: thread {tid} holds ID {id} in dead namespace {ns}"
                );
                let found = self.model.lookup(ns, id).map(|found| found.map(|(_, t)| t));
                assert_eq!(found, Ok(Some(tid)), "{name}, {at}: lookup of {id} in {ns}");
            }
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut exact: [Box<dyn Model>; 3] = [
        Box::new(World::<IdrOnce, Rework, ScaledHash<()>>::new()),
        Box::new(World::<IdrRelock, BitmapCids, GlobalHash<()>>::new()),
        Box::new(World::<BitmapHash, LazyCids, Radix<()>>::new()),
    ];
    let mut percpu = World::<PerCpu, Rework, ScaledHash<()>>::new();
    for (step, &op) in ops.iter().take(64).enumerate() {
        let at = format!("step {step}: {op:?}");
        let [first, rest @ ..] = &mut exact;
        let want = first.apply(op, &at);
        first.check(&at);
        for model in rest {
            assert_eq!(
                model.apply(op, &at),
                want,
                "{at}: {} against {}",
                model.name(),
                first.name()
            );
            model.check(&at);
        }
        percpu.apply(op, &at);
        percpu.check(&at);
    }
});
