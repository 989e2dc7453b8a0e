//! One arbitrary sequence of PID operations applied to every design. `IdrRelock`, `IdrOnce` and
//! `BitmapHash` must answer alike, call for call (IDs and errors). `PerCpu`, which picks other
//! IDs, is checked against the test suite's reference model in its relaxed mode: every ID in
//! range and unique at its level, `set_tid` honoured, a space's first object ID 1, and the
//! errors the model gives (`invalid`, `exists`, `ns_dead`, `full`, ...). Spaces are small
//! (`pid_max` down to 301, and `Fill` allocates until a space is full) and few.

#![no_main]

#[path = "../../crates/idspace/tests/pid_model/mod.rs"]
mod pid_model;

use arbitrary::Arbitrary;
use idspace::pid::{BitmapHash, IdrOnce, IdrRelock, NsId, PerCpu, PidAllocator, PID_MAX_MIN};
use libfuzzer_sys::fuzz_target;
use pid_model::Model;

/// CPUs of the `PerCpu` allocator (the others ignore the slot).
const CPUS: usize = 3;

#[derive(Arbitrary, Debug)]
enum Op {
    NewNs(u8),
    PidMax(u8, Max),
    Alloc(u8, Vec<SetTid>, u8),
    /// Lowers a space's `pid_max` to the least and allocates in it until an allocation fails.
    Fill(u8, u8),
    /// Frees a space's ID 1, its init, if taken: the space dies.
    KillInit(u8, u8),
    Free(u8, SetTid, u8),
    /// Frees a live object, picked among all.
    FreeLive(u16, u8),
    Lookup(u8, SetTid),
}

/// A `pid_max`: the edges of the valid range, and beyond them.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Max {
    Least,
    Small(u8),
    Default,
    Largest,
    TooSmall,
    TooLarge,
}

impl Max {
    fn value(self) -> u32 {
        match self {
            Max::Least => PID_MAX_MIN,
            Max::Small(extra) => PID_MAX_MIN + u32::from(extra),
            Max::Default => idspace::pid::PID_MAX_DEFAULT,
            Max::Largest => idspace::pid::PID_MAX_LIMIT,
            Max::TooSmall => PID_MAX_MIN - 1,
            Max::TooLarge => idspace::pid::PID_MAX_LIMIT + 1,
        }
    }
}

/// An ID asked for: small ones, those around the 300 floor and `pid_max`, and any.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum SetTid {
    Low(u8),
    Floor(u8),
    Any(u32),
}

impl SetTid {
    fn value(self) -> u32 {
        match self {
            SetTid::Low(id) => u32::from(id % 12),
            SetTid::Floor(id) => 295 + u32::from(id % 16),
            SetTid::Any(id) => id,
        }
    }
}

/// The exact designs, run side by side.
struct Exact {
    designs: [Box<dyn PidAllocator>; 3],
}

impl Exact {
    /// `call` on every design; the answers must agree. Returns the first.
    fn call<T: PartialEq + std::fmt::Debug>(
        &self,
        at: &str,
        call: impl Fn(&dyn PidAllocator) -> T,
    ) -> T {
        let [first, rest @ ..] = &self.designs;
        let want = call(first.as_ref());
        for design in rest {
            let got = call(design.as_ref());
            assert_eq!(
                got,
                want,
                "{at}: {} against {}",
                design.name(),
                first.name()
            );
        }
        want
    }

    /// `call` on every design, as [`call`](Self::call), for the check alone.
    fn same<T: PartialEq + std::fmt::Debug>(
        &self,
        at: &str,
        call: impl Fn(&dyn PidAllocator) -> T,
    ) {
        self.call(at, call);
    }
}

/// `PerCpu` and the model that adopts its IDs.
struct Relaxed {
    pids: PerCpu,
    model: Model,
}

impl Relaxed {
    fn alloc(&mut self, ns: NsId, set_tid: &[u32], cpu: usize, at: &str) -> bool {
        let got = self.pids.alloc(ns, set_tid, cpu).map(|pid| pid.ids());
        let want = self
            .model
            .alloc(ns, set_tid, got.as_ref().ok().map(Vec::as_slice));
        assert_eq!(got, want, "percpu, {at}");
        got.is_ok()
    }

    fn free(&mut self, ns: NsId, id: u32, cpu: usize, at: &str) {
        assert_eq!(
            self.pids.free(ns, id, cpu),
            self.model.free(ns, id),
            "percpu, {at}"
        );
    }
}

/// The exact designs' state the operations pick from: the spaces made, and the objects
/// allocated (by their ID in their own space; some may be freed since).
#[derive(Default)]
struct Made {
    spaces: usize,
    objects: Vec<(NsId, u32)>,
}

fn exact_step(exact: &Exact, made: &mut Made, op: &Op, at: &str) {
    // Every space, and one number past them (unknown).
    let spaces = made.spaces + 1;
    let ns = |pick: u8| (usize::from(pick) % (spaces + 1)) as NsId;
    let alloc = |made: &mut Made, ns: NsId, set_tid: &[u32]| {
        let got = exact.call(at, |d| d.alloc(ns, set_tid, 0).map(|pid| pid.ids()));
        if let Ok(ids) = &got {
            made.objects.push((ns, ids[0]));
        }
        got.is_ok()
    };
    match op {
        Op::NewNs(parent) => {
            if let Ok(new) = exact.call(at, |d| d.new_ns(ns(*parent))) {
                made.spaces = new as usize;
            }
        }
        Op::PidMax(space, max) => exact.same(at, |d| d.set_pid_max(ns(*space), max.value())),
        Op::Alloc(space, set_tid, _) => {
            let set_tid: Vec<u32> = set_tid.iter().map(|id| id.value()).collect();
            alloc(made, ns(*space), &set_tid);
        }
        Op::Fill(space, _) => {
            exact
                .call(at, |d| d.set_pid_max(ns(*space), PID_MAX_MIN))
                .ok();
            for _ in 0..PID_MAX_MIN {
                if !alloc(made, ns(*space), &[]) {
                    break;
                }
            }
        }
        Op::KillInit(space, _) => exact.same(at, |d| d.free(ns(*space), 1, 0)),
        Op::Free(space, id, _) => exact.same(at, |d| d.free(ns(*space), id.value(), 0)),
        Op::FreeLive(pick, _) => {
            let objects = made.objects.len();
            if let Some(&(ns, id)) = made.objects.get(usize::from(*pick) % objects.max(1)) {
                exact.same(at, |d| d.free(ns, id, 0));
            }
        }
        Op::Lookup(space, id) => exact.same(at, |d| {
            d.lookup(ns(*space), id.value())
                .map(|pid| pid.map(|p| p.ids()))
        }),
    }
}

fn relaxed_step(relaxed: &mut Relaxed, op: &Op, at: &str) {
    let spaces = relaxed.model.spaces.len();
    let ns = |pick: u8| (usize::from(pick) % (spaces + 1)) as NsId;
    let cpu = |slot: u8| usize::from(slot) % CPUS;
    match op {
        Op::NewNs(parent) => {
            let got = relaxed.pids.new_ns(ns(*parent));
            assert_eq!(got, relaxed.model.new_ns(ns(*parent)), "percpu, {at}");
        }
        Op::PidMax(space, max) => {
            let got = relaxed.pids.set_pid_max(ns(*space), max.value());
            assert_eq!(
                got,
                relaxed.model.set_pid_max(ns(*space), max.value()),
                "percpu, {at}"
            );
        }
        Op::Alloc(space, set_tid, slot) => {
            let set_tid: Vec<u32> = set_tid.iter().map(|id| id.value()).collect();
            relaxed.alloc(ns(*space), &set_tid, cpu(*slot), at);
        }
        Op::Fill(space, slot) => {
            let got = relaxed.pids.set_pid_max(ns(*space), PID_MAX_MIN);
            assert_eq!(
                got,
                relaxed.model.set_pid_max(ns(*space), PID_MAX_MIN),
                "percpu, {at}"
            );
            for _ in 0..PID_MAX_MIN {
                if !relaxed.alloc(ns(*space), &[], cpu(*slot), at) {
                    break;
                }
            }
        }
        Op::KillInit(space, slot) => relaxed.free(ns(*space), 1, cpu(*slot), at),
        Op::Free(space, id, slot) => relaxed.free(ns(*space), id.value(), cpu(*slot), at),
        Op::FreeLive(pick, slot) => {
            let live: Vec<(NsId, u32)> = (relaxed.model.spaces.iter().enumerate())
                .flat_map(|(ns, s)| s.ids.keys().map(move |&id| (ns as NsId, id)))
                .collect();
            if let Some(&(ns, id)) = live.get(usize::from(*pick) % live.len().max(1)) {
                relaxed.free(ns, id, cpu(*slot), at);
            }
        }
        Op::Lookup(space, id) => {
            let got = relaxed.pids.lookup(ns(*space), id.value());
            let got = got.map(|pid| pid.map(|p| p.ids()));
            assert_eq!(
                got,
                relaxed.model.lookup(ns(*space), id.value()),
                "percpu, {at}"
            );
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let exact = Exact {
        designs: [
            Box::new(IdrOnce::new()),
            Box::new(IdrRelock::new()),
            Box::new(BitmapHash::new()),
        ],
    };
    let mut relaxed = Relaxed {
        pids: PerCpu::new(CPUS).expect("CPUS is within PerCpu's range"),
        model: Model::new(false),
    };
    let mut made = Made::default();
    for (step, op) in ops.iter().take(200).enumerate() {
        let at = format!("step {step}: {op:?}");
        exact_step(&exact, &mut made, op, &at);
        relaxed_step(&mut relaxed, op, &at);
    }
});
