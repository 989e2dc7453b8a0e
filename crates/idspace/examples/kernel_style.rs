//! A toy kernel's scheduler loop on idspace's families, with the kernel's own spinlock and its
//! own notion of the current CPU and the clock: the way a `no_std` kernel, hypervisor or
//! sandbox uses them.
//!
//! The `kernel` module below touches only `core`, `alloc` and idspace's families, which build
//! without `std`; run it against the `no_std` build of the library with
//!
//! ```text
//! cargo run -p idspace --no-default-features --example kernel_style
//! ```
//!
//! (the program around the module prints its summary with `std`, as a host's test harness
//! would). The kernel boots two CPUs, installs its host (CPU count, current CPU, tick clock),
//! restores a container whose init keeps PID 1 inside with `set_tid`, forks processes into it,
//! runs a round-robin scheduler loop that switches their tasks' CIDs on both CPUs, gives each
//! process POSIX-timer IDs (one of them restored at its exact ID), counts the switches per CID
//! in per-CID slots it indexes itself (`percid::PerIndex`), then reaps everything.

mod kernel {
    extern crate alloc;

    use alloc::vec::Vec;
    use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    use idspace::cid::{CidAllocator, Rework, Task};
    use idspace::host::{self, Host};
    use idspace::lock::MutexOnly;
    use idspace::percid::PerIndex;
    use idspace::pid::{PerCpu, Pid, PidAllocator, PidError, ROOT};
    use idspace::table::{IdTable, ScaledHash, Sizing, MAX_ID};

    /// The kernel's spinlock: one flag, and a count of the CPUs spinning, which a real kernel
    /// would pair with disabling preemption or interrupts.
    pub struct KernelSpin {
        held: AtomicBool,
    }

    /// How many times any kernel spinlock was taken (the lock is the kernel's, so it can count).
    pub static ACQUIRED: AtomicUsize = AtomicUsize::new(0);

    // SAFETY: `try_lock` returns true only to the caller that moved the flag from false to
    // true, and `unlock` (called by that holder only, per the trait) clears it.
    unsafe impl lock_api::RawMutex for KernelSpin {
        #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern.
        const INIT: KernelSpin = KernelSpin {
            held: AtomicBool::new(false),
        };
        type GuardMarker = lock_api::GuardSend;

        fn lock(&self) {
            while !self.try_lock() {
                core::hint::spin_loop();
            }
        }

        fn try_lock(&self) -> bool {
            // Acquire pairs with the Release in `unlock`: the last holder's writes are seen.
            let won = self
                .held
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
            if won {
                ACQUIRED.fetch_add(1, Ordering::Relaxed);
            }
            won
        }

        unsafe fn unlock(&self) {
            // Release pairs with the Acquire in `try_lock`.
            self.held.store(false, Ordering::Release);
        }
    }

    /// Every idspace structure of this kernel takes the kernel's spinlock.
    type Locks = MutexOnly<KernelSpin>;

    /// The machine: two CPUs, the one "running" now, and a tick counter as the clock.
    pub struct Machine {
        current: AtomicUsize,
        ticks: AtomicU64,
    }

    impl Host for Machine {
        fn cpus(&self) -> usize {
            CPUS
        }
        fn slot_hint(&self) -> usize {
            self.current.load(Ordering::Relaxed)
        }
        fn now_ns(&self) -> u64 {
            // A 1 ms tick.
            self.ticks.load(Ordering::Relaxed) * 1_000_000
        }
    }

    pub static MACHINE: Machine = Machine {
        current: AtomicUsize::new(0),
        ticks: AtomicU64::new(0),
    };

    const CPUS: usize = 2;

    /// A process: its PID object, its task (one thread) and its timer IDs.
    struct Process {
        pid: Pid,
        task: Task,
        timers: Vec<u32>,
    }

    /// What the run did, for the summary.
    #[derive(Debug, Default)]
    pub struct Summary {
        /// The container init's PIDs, innermost first.
        pub init_ids: Vec<u32>,
        /// The other processes' PIDs inside the container.
        pub container_pids: Vec<u32>,
        /// Context switches made.
        pub switches: usize,
        /// The largest CID any task saw (below the CPU count: CIDs are compact).
        pub max_cid: u32,
        /// Context switches per CID, counted in per-CID slots.
        pub switches_per_cid: Vec<u64>,
        /// Timer IDs handed out, over every process.
        pub timers: usize,
        /// The exact timer ID a restored timer got back.
        pub restored_timer: u32,
    }

    /// An error of any family, as the kernel's syscall layer would turn it into an errno.
    #[derive(Debug)]
    pub struct KernelError(pub &'static str);

    impl From<PidError> for KernelError {
        fn from(error: PidError) -> Self {
            KernelError(error.as_str())
        }
    }

    impl From<idspace::cid::CidError> for KernelError {
        fn from(error: idspace::cid::CidError) -> Self {
            KernelError(error.as_str())
        }
    }

    /// Boots, runs `rounds` scheduler rounds, and reaps everything.
    pub fn run(rounds: usize) -> Result<Summary, KernelError> {
        // A second boot in one program keeps the first host: same machine.
        let _ = host::install(&MACHINE);
        let pids = PerCpu::<Locks>::with_locks(CPUS)?;
        let cids = Rework::<Locks>::with_locks(CPUS)?;
        let timers = ScaledHash::<u64, Locks>::with_locks_and_sizing(Sizing::growing(), MAX_ID)
            .map_err(|_| KernelError("sizing"))?;
        // Per-CID data, one slot per CID the space can give (CIDs stay below the CPU count).
        let per_cid =
            PerIndex::new(CPUS, |_| AtomicU64::new(0)).map_err(|_| KernelError("cpus"))?;
        let mut summary = Summary::default();

        // The root's init, then a container restored with its init at PID 1 inside.
        let root_init = pids.alloc(ROOT, &[], 0)?;
        let container = pids.new_ns(ROOT)?;
        let init = pids.alloc(container, &[1], 0)?;
        summary.init_ids = init.ids();
        let mut processes = Vec::new();
        processes.push(spawn(&cids, init)?);
        for cpu in 0..4 {
            let pid = pids.alloc(container, &[], cpu % CPUS)?;
            summary
                .container_pids
                .push(pid.id_in(container).unwrap_or(0));
            processes.push(spawn(&cids, pid)?);
        }

        // The scheduler loop: each tick, each CPU switches in the next process round-robin,
        // which arms a timer.
        for round in 0..rounds {
            MACHINE.ticks.fetch_add(1, Ordering::Relaxed);
            for cpu in 0..CPUS {
                MACHINE.current.store(cpu, Ordering::Relaxed);
                let count = processes.len();
                let next = &mut processes[(round * CPUS + cpu) % count];
                let cid = cids.switch(cpu, Some(&next.task))?.unwrap_or(0);
                summary.max_cid = summary.max_cid.max(cid);
                let slot = per_cid
                    .get(cid as usize)
                    .ok_or(KernelError("a CID past the CPUs"))?;
                // Relaxed: a statistic, read after the loop by this thread.
                slot.fetch_add(1, Ordering::Relaxed);
                summary.switches += 1;
                let owner = u64::from(next.pid.ids()[0]);
                match timers.create(owner, round as u64) {
                    Ok(id) => next.timers.push(id),
                    Err(rejected) => return Err(KernelError(rejected.error.as_str())),
                }
            }
        }

        // Checkpoint/restore of one timer: drop it, then take it back at its exact ID.
        let owner = u64::from(processes[1].pid.ids()[0]);
        let id = processes[1].timers[0];
        timers
            .remove(owner, id)
            .map_err(|error| KernelError(error.as_str()))?;
        timers.set_restore(owner, true);
        summary.restored_timer = timers
            .create_at(owner, id, 0)
            .map_err(|rejected| KernelError(rejected.error.as_str()))?;
        timers.set_restore(owner, false);
        summary.timers = timers.len();
        summary.switches_per_cid = per_cid.iter().map(|n| n.load(Ordering::Relaxed)).collect();
        reap(&pids, &cids, &timers, processes, root_init)?;
        Ok(summary)
    }

    /// Every CPU goes idle, every process exits, its timers and PIDs go back.
    fn reap(
        pids: &PerCpu<Locks>,
        cids: &Rework<Locks>,
        timers: &ScaledHash<u64, Locks>,
        processes: Vec<Process>,
        root_init: Pid,
    ) -> Result<(), KernelError> {
        for cpu in 0..CPUS {
            cids.switch(cpu, None)?;
        }
        for process in processes.into_iter().rev() {
            cids.exit(&process.task)?;
            timers.remove_owner(u64::from(process.pid.ids()[0]));
            // Freeing by the innermost level releases the IDs at every level.
            pids.free(process.pid.ns(), process.pid.ids()[0], 0)?;
        }
        pids.free(root_init.ns(), root_init.ids()[0], 0)?;
        Ok(())
    }

    fn spawn(cids: &Rework<Locks>, pid: Pid) -> Result<Process, KernelError> {
        Ok(Process {
            pid,
            task: cids.fork((1 << CPUS) - 1)?,
            timers: Vec::new(),
        })
    }
}

fn main() {
    match kernel::run(16) {
        Ok(summary) => {
            println!(
                "container init: PIDs {:?} (innermost first)",
                summary.init_ids
            );
            println!("container processes: {:?}", summary.container_pids);
            println!(
                "{} context switches, CIDs below {} on 2 CPUs",
                summary.switches,
                summary.max_cid + 1
            );
            println!("switches per CID: {:?}", summary.switches_per_cid);
            assert_eq!(
                summary.switches_per_cid.iter().sum::<u64>(),
                summary.switches as u64,
                "every switch counted in its CID's slot"
            );
            println!(
                "{} timers, one restored at its exact ID {}",
                summary.timers, summary.restored_timer
            );
            println!(
                "kernel spinlock taken {} times",
                kernel::ACQUIRED.load(std::sync::atomic::Ordering::Relaxed)
            );
            assert_eq!(
                summary.init_ids[0], 1,
                "the container's init is PID 1 inside"
            );
            assert!(summary.max_cid < 2, "CIDs stay below the CPU count");
        }
        Err(error) => {
            eprintln!("kernel_style: {}", error.0);
            std::process::exit(1);
        }
    }
}
