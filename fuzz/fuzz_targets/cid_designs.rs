//! One arbitrary sequence of CID operations (fork, exit, context switches, affinity changes,
//! deferred work) applied to `Rework`, `BitmapCids` and `LazyCids`, each checked against the
//! invariants every design keeps: no CID seen by two running tasks at once, every CID below
//! the CPU count, the users counted, the taken CIDs within the CPU count, and the errors the
//! arguments call for.

#![no_main]

use arbitrary::Arbitrary;
use idspace::cid::{BitmapCids, CidAllocator, CidError, LazyCids, Rework, ScanPlacement, Task};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    Fork(u8),
    Exit(u8),
    /// Switches task `pick` (or, past the live tasks, none) in on a CPU.
    Switch(u8, u8),
    Affinity(u8, u8),
    RunDeferred,
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// CPUs: 1 to 8.
    cpus: u8,
    ops: Vec<Op>,
}

fn mask(bits: u8, cpus: usize) -> u64 {
    u64::from(bits) & ((1u64 << cpus) - 1)
}

/// Checks a design after one operation: distinct CIDs below the CPU count for the running
/// tasks, each running task live and on a CPU its affinity allows.
fn check(space: &dyn CidAllocator, tasks: &[(Task, u64)], at: &str) {
    let cpus = space.cpus() as u32;
    let state = space.state();
    assert_eq!(state.users as usize, tasks.len(), "{at}: users");
    assert!(state.running.len() <= cpus as usize, "{at}: {state:?}");
    let mut cids: Vec<u32> = state.running.iter().map(|&(_, cid)| cid).collect();
    assert!(
        cids.iter().all(|&cid| cid < cpus),
        "{at}: a CID out of range: {state:?}"
    );
    cids.sort_unstable();
    assert!(
        cids.windows(2).all(|pair| pair[0] != pair[1]),
        "{at}: two running tasks with one CID: {state:?}"
    );
    for (id, _) in &state.running {
        assert!(
            tasks.iter().any(|(task, _)| task.id() == *id),
            "{at}: {id} runs, not live"
        );
    }
    assert!(
        space.cids_in_use() <= cpus,
        "{at}: {} CIDs taken",
        space.cids_in_use()
    );
}

fn run(space: &dyn CidAllocator, ops: &[Op]) {
    let cpus = space.cpus();
    // Live tasks with their affinity, and which task each CPU runs.
    let mut tasks: Vec<(Task, u64)> = Vec::new();
    let mut on_cpu: Vec<Option<u64>> = vec![None; cpus];
    for (step, op) in ops.iter().enumerate() {
        let at = format!("{}, step {step}: {op:?}", space.name());
        match *op {
            Op::Fork(bits) => {
                let affinity = mask(bits, cpus);
                match space.fork(affinity) {
                    Ok(task) => tasks.push((task, affinity)),
                    Err(e) => assert_eq!((e, affinity), (CidError::BadCpu, 0), "{at}"),
                }
            }
            Op::Exit(pick) if !tasks.is_empty() => {
                let (task, _) = tasks.remove(usize::from(pick) % tasks.len());
                space.exit(&task).unwrap_or_else(|e| panic!("{at}: {e}"));
                on_cpu
                    .iter_mut()
                    .filter(|t| **t == Some(task.id()))
                    .for_each(|t| *t = None);
                assert_eq!(space.exit(&task), Err(CidError::UnknownTask), "{at}: again");
            }
            Op::Exit(_) => {}
            Op::Switch(cpu, pick) => {
                let cpu = usize::from(cpu) % (cpus + 1);
                let next = tasks.get(usize::from(pick) % (tasks.len() + 1));
                let got = space.switch(cpu, next.map(|(task, _)| task));
                let want = if cpu >= cpus {
                    Err(CidError::BadCpu)
                } else {
                    match next {
                        Some((task, _))
                            if on_cpu
                                .iter()
                                .enumerate()
                                .any(|(c, t)| c != cpu && *t == Some(task.id())) =>
                        {
                            Err(CidError::RunningElsewhere)
                        }
                        Some((_, affinity)) if affinity & (1 << cpu) == 0 => {
                            Err(CidError::NotAllowed)
                        }
                        _ => Ok(next.is_some()),
                    }
                };
                assert_eq!(got.map(|cid| cid.is_some()), want, "{at}");
                if got.is_ok() {
                    on_cpu[cpu] = next.map(|(task, _)| task.id());
                    if let (Some((task, _)), Ok(Some(cid))) = (next, got) {
                        let running = space.state().running;
                        assert!(running.contains(&(task.id(), cid)), "{at}: {running:?}");
                    }
                }
            }
            Op::Affinity(pick, bits) if !tasks.is_empty() => {
                let index = usize::from(pick) % tasks.len();
                let affinity = mask(bits, cpus);
                match space.set_affinity(&tasks[index].0, affinity) {
                    Ok(()) => tasks[index].1 = affinity,
                    Err(e) => assert_eq!((e, affinity), (CidError::BadCpu, 0), "{at}"),
                }
            }
            Op::Affinity(..) => {}
            Op::RunDeferred => space.run_deferred(),
        }
        check(space, &tasks, &at);
    }
}

fuzz_target!(|input: Input| {
    let cpus = usize::from(input.cpus % 8) + 1;
    let designs: [Box<dyn CidAllocator>; 3] = [
        Box::new(Rework::new(cpus).expect("1 to 8 CPUs")),
        Box::new(BitmapCids::new(cpus).expect("1 to 8 CPUs")),
        Box::new(LazyCids::with_scan(cpus, ScanPlacement::OnDemand).expect("1 to 8 CPUs")),
    ];
    for space in &designs {
        run(space.as_ref(), &input.ops);
    }
});
