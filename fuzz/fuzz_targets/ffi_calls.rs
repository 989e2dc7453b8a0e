//! Arbitrary calls of libidspace's exported C functions, with arbitrary arguments: handles that
//! are live, destroyed, zeroed, made up or of another kind; null and valid out-pointers; sizes
//! of 0, in range, past the buffer's bound and `SIZE_MAX`; `set_tid` arrays of any length.
//! Every call must answer 0 or a documented negative errno (never crash, hang or leak), a stale
//! handle must answer `-EBADF`, a counter's sum must be the model's exactly, and a pool must
//! hand back only objects given to it and each to one taker.

#![no_main]

use std::collections::HashSet;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

use arbitrary::Arbitrary;
use idspace_ffi::*;
use libfuzzer_sys::fuzz_target;

/// Objects a pool may be given (their addresses are the objects).
const OBJECTS: usize = 16;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Handle {
    /// One of this run's handles of the kind (live or destroyed).
    Slot(u8),
    Zero,
    Raw(u64),
    /// A handle of another kind, reinterpreted.
    OtherKind(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Size {
    InRange(u8),
    Huge,
}

#[derive(Arbitrary, Debug)]
enum Call {
    TableNew(u32),
    TableDestroy(Handle),
    TableCreate(Handle, u8, u64, bool),
    TableCreateAt(Handle, u8, u32, u64),
    TableSetRestore(Handle, u8, bool),
    TableLookup(Handle, u8, u32, bool),
    TableLookupWith(Handle, u8, u32),
    TableRemove(Handle, u8, u32, bool),
    TableRemoveOwner(Handle, u8),
    TableIds(Handle, u8, Size, bool),
    TableCursor(Handle, u8, bool),
    TableSetCursor(Handle, u8, u32),
    PidsNew(u32),
    PidsDestroy(Handle),
    PidNsNew(Handle, u8, u32),
    PidNsDestroy(Handle, u8),
    PidAlloc(Handle, u8, Vec<u32>, Size, bool),
    PidFree(Handle, u8, u32),
    PidLookup(Handle, u8, u32, u8),
    CidsNew(u32, Size),
    CidsDestroy(Handle),
    CidFork(Handle, u64),
    CidExit(Handle, u8),
    CidSwitchIn(Handle, Size, u8),
    CidSwitchOut(Handle, Size),
    CounterNew,
    CounterDestroy(Handle),
    CounterAdd(Handle, u64),
    CounterSum(Handle),
    PoolNew(Size),
    PoolDestroy(Handle),
    PoolGive(Handle, u8),
    PoolTake(Handle),
    MmCid,
    Strerror(i32),
}

/// The codes the header documents.
const CODES: &[i32] = &[
    0,
    libc::EINVAL,
    libc::EAGAIN,
    libc::EEXIST,
    libc::ENOMEM,
    libc::ESRCH,
    libc::EBADF,
    libc::EPERM,
    libc::ENOSPC,
    libc::EBUSY,
    libc::ERANGE,
    libc::EDEADLK,
    libc::EOPNOTSUPP,
];

fn check(code: i32) -> i32 {
    assert!(
        code <= 0 && CODES.contains(&-code),
        "undocumented answer {code}"
    );
    code
}

/// A kind's handles: raw values, and whether each is still live.
#[derive(Default)]
struct Kind {
    raw: Vec<u64>,
    live: Vec<bool>,
}

impl Kind {
    fn pick(&self, handle: Handle, other: &Kind) -> (u64, Option<usize>) {
        let slot =
            |kind: &Kind, n: u8| (!kind.raw.is_empty()).then(|| usize::from(n) % kind.raw.len());
        match handle {
            Handle::Slot(n) => match slot(self, n) {
                Some(at) => (self.raw[at], Some(at)),
                None => (0, None),
            },
            Handle::Zero => (0, None),
            // A made-up value may hit one of this run's handles: then it is that handle.
            Handle::Raw(raw) => (raw, self.raw.iter().position(|&known| known == raw)),
            Handle::OtherKind(n) => (slot(other, n).map_or(0, |at| other.raw[at]), None),
        }
    }

    fn add(&mut self, code: i32, raw: u64) {
        if code == 0 {
            self.raw.push(raw);
            self.live.push(true);
        }
    }

    /// Checks what a call on a picked handle answered, and records a destroy.
    fn answered(&mut self, picked: (u64, Option<usize>), code: i32, destroys: bool) {
        match picked.1 {
            Some(at) if !self.live[at] => {
                assert_eq!(code, -libc::EBADF, "a stale handle was accepted")
            }
            Some(at) if destroys => {
                assert_eq!(code, 0, "destroying a live handle failed");
                self.live[at] = false;
            }
            _ => {}
        }
    }
}

fn size(size: Size, bound: usize) -> usize {
    match size {
        Size::InRange(n) => usize::from(n) % (bound + 1),
        Size::Huge => usize::MAX,
    }
}

unsafe extern "C" fn visit(value: u64, ctx: *mut c_void) {
    // SAFETY: the target passes a pointer to a live u64.
    unsafe { *ctx.cast::<u64>() = value };
}

#[derive(Default)]
struct World {
    tables: Kind,
    pids: Kind,
    cids: Kind,
    counters: Kind,
    pools: Kind,
    /// The model of each counter's sum.
    sums: Vec<u64>,
    /// Objects each pool holds (by pool slot), as far as this run gave them.
    pool_objects: Vec<HashSet<usize>>,
    /// Tasks forked, in any space.
    tasks: Vec<u64>,
    objects: [u8; OBJECTS],
}

impl World {
    fn object(&self, n: u8) -> *mut c_void {
        (&self.objects[usize::from(n) % OBJECTS] as *const u8)
            .cast_mut()
            .cast()
    }

    fn object_index(&self, object: *mut c_void) -> usize {
        let base = self.objects.as_ptr() as usize;
        let at = (object as usize).wrapping_sub(base);
        assert!(
            at < OBJECTS,
            "a pool handed back an object it was never given"
        );
        at
    }

    // SAFETY (for the calls below): every out-pointer is null or points to a live local, every
    // array is a live local at least as long as the size passed, unless the size is one the
    // library refuses before reading (above its documented bound).
    fn call(&mut self, call: &Call) {
        match *call {
            Call::TableNew(design) => {
                let mut out = IdspaceTable { raw: 0 };
                let code = check(unsafe { idspace_table_new(design % 4, &mut out) });
                self.tables.add(code, out.raw);
            }
            Call::TableDestroy(h) => {
                let picked = self.tables.pick(h, &self.pids);
                let code = check(idspace_table_destroy(IdspaceTable { raw: picked.0 }));
                self.tables.answered(picked, code, true);
            }
            Call::TableCreate(h, owner, value, null_out) => {
                let picked = self.tables.pick(h, &self.pids);
                let mut id = 0u32;
                let out = if null_out {
                    null_mut()
                } else {
                    &mut id as *mut u32
                };
                let code = check(unsafe {
                    idspace_table_create(
                        IdspaceTable { raw: picked.0 },
                        u64::from(owner),
                        value,
                        out,
                    )
                });
                if !null_out {
                    self.tables.answered(picked, code, false);
                }
            }
            Call::TableCreateAt(h, owner, id, value) => {
                let picked = self.tables.pick(h, &self.pids);
                let code = check(idspace_table_create_at(
                    IdspaceTable { raw: picked.0 },
                    u64::from(owner),
                    id,
                    value,
                ));
                self.tables.answered(picked, code, false);
            }
            Call::TableSetRestore(h, owner, on) => {
                let picked = self.tables.pick(h, &self.pids);
                let code = check(idspace_table_set_restore(
                    IdspaceTable { raw: picked.0 },
                    u64::from(owner),
                    i32::from(on),
                ));
                self.tables.answered(picked, code, false);
            }
            Call::TableLookup(h, owner, id, null_out) => {
                let picked = self.tables.pick(h, &self.pids);
                let mut value = 0u64;
                let out = if null_out {
                    null_mut()
                } else {
                    &mut value as *mut u64
                };
                let code = check(unsafe {
                    idspace_table_lookup(IdspaceTable { raw: picked.0 }, u64::from(owner), id, out)
                });
                if !null_out {
                    self.tables.answered(picked, code, false);
                }
            }
            Call::TableLookupWith(h, owner, id) => {
                let picked = self.tables.pick(h, &self.pids);
                let mut value = 0u64;
                let code = check(unsafe {
                    idspace_table_lookup_with(
                        IdspaceTable { raw: picked.0 },
                        u64::from(owner),
                        id,
                        Some(visit),
                        (&mut value as *mut u64).cast(),
                    )
                });
                self.tables.answered(picked, code, false);
            }
            Call::TableRemove(h, owner, id, null_out) => {
                let picked = self.tables.pick(h, &self.pids);
                let mut value = 0u64;
                let out = if null_out {
                    null_mut()
                } else {
                    &mut value as *mut u64
                };
                let code = check(unsafe {
                    idspace_table_remove(IdspaceTable { raw: picked.0 }, u64::from(owner), id, out)
                });
                self.tables.answered(picked, code, false);
            }
            Call::TableRemoveOwner(h, owner) => {
                let picked = self.tables.pick(h, &self.pids);
                let mut removed = 0usize;
                let code = check(unsafe {
                    idspace_table_remove_owner(
                        IdspaceTable { raw: picked.0 },
                        u64::from(owner),
                        &mut removed,
                    )
                });
                self.tables.answered(picked, code, false);
            }
            Call::TableIds(h, owner, capacity, null_ids) => {
                let picked = self.tables.pick(h, &self.pids);
                let mut ids = [0u32; 64];
                let mut count = 0usize;
                let buffer = if null_ids {
                    null_mut()
                } else {
                    ids.as_mut_ptr()
                };
                let code = check(unsafe {
                    idspace_table_ids(
                        IdspaceTable { raw: picked.0 },
                        u64::from(owner),
                        buffer,
                        size(capacity, ids.len()),
                        &mut count,
                    )
                });
                if code == 0 {
                    assert!(
                        ids[..count].windows(2).all(|w| w[0] < w[1]),
                        "IDs not ascending"
                    );
                }
            }
            Call::TableCursor(h, owner, null_out) => {
                let picked = self.tables.pick(h, &self.pids);
                let mut cursor = 0u32;
                let out = if null_out {
                    null_mut()
                } else {
                    &mut cursor as *mut u32
                };
                check(unsafe {
                    idspace_table_cursor(IdspaceTable { raw: picked.0 }, u64::from(owner), out)
                });
            }
            Call::TableSetCursor(h, owner, cursor) => {
                let picked = self.tables.pick(h, &self.pids);
                let code = check(idspace_table_set_cursor(
                    IdspaceTable { raw: picked.0 },
                    u64::from(owner),
                    cursor,
                ));
                self.tables.answered(picked, code, false);
            }
            Call::PidsNew(design) => {
                let mut out = IdspacePids { raw: 0 };
                let code = check(unsafe { idspace_pids_new(design % 5, &mut out) });
                self.pids.add(code, out.raw);
            }
            Call::PidsDestroy(h) => {
                let picked = self.pids.pick(h, &self.tables);
                let code = check(idspace_pids_destroy(IdspacePids { raw: picked.0 }));
                self.pids.answered(picked, code, true);
            }
            Call::PidNsNew(h, parent, pid_max) => {
                let picked = self.pids.pick(h, &self.tables);
                let mut ns = 0u32;
                let code = check(unsafe {
                    idspace_pid_ns_new(
                        IdspacePids { raw: picked.0 },
                        u32::from(parent % 8),
                        pid_max % 5000,
                        &mut ns,
                    )
                });
                // A pid_max out of range is refused before the handle is looked at.
                if pid_max % 5000 == 0 || pid_max % 5000 > 300 {
                    self.pids.answered(picked, code, false);
                }
            }
            Call::PidNsDestroy(h, ns) => {
                let picked = self.pids.pick(h, &self.tables);
                let code = check(idspace_pid_ns_destroy(
                    IdspacePids { raw: picked.0 },
                    u32::from(ns % 8),
                ));
                self.pids.answered(picked, code, false);
            }
            Call::PidAlloc(h, ns, ref set_tid, len, null_out) => {
                let picked = self.pids.pick(h, &self.tables);
                let mut pid = 0u32;
                let out = if null_out {
                    null_mut()
                } else {
                    &mut pid as *mut u32
                };
                let len = match len {
                    Size::InRange(n) => usize::from(n) % (set_tid.len() + 1),
                    Size::Huge => usize::MAX,
                };
                let array = if set_tid.is_empty() {
                    null()
                } else {
                    set_tid.as_ptr()
                };
                let code = check(unsafe {
                    idspace_pid_alloc(
                        IdspacePids { raw: picked.0 },
                        u32::from(ns % 8),
                        array,
                        len,
                        out,
                    )
                });
                // An impossible set_tid length is refused before the handle is looked at.
                if !null_out && len <= 33 {
                    self.pids.answered(picked, code, false);
                }
            }
            Call::PidFree(h, ns, nr) => {
                let picked = self.pids.pick(h, &self.tables);
                let code = check(idspace_pid_free(
                    IdspacePids { raw: picked.0 },
                    u32::from(ns % 8),
                    nr % 1000,
                ));
                self.pids.answered(picked, code, false);
            }
            Call::PidLookup(h, ns, nr, in_ns) => {
                let picked = self.pids.pick(h, &self.tables);
                let mut there = 0u32;
                let code = check(unsafe {
                    idspace_pid_lookup(
                        IdspacePids { raw: picked.0 },
                        u32::from(ns % 8),
                        nr % 1000,
                        u32::from(in_ns % 8),
                        &mut there,
                    )
                });
                self.pids.answered(picked, code, false);
            }
            Call::CidsNew(design, cpus) => {
                let mut out = IdspaceCids { raw: 0 };
                let code = check(unsafe { idspace_cids_new(design % 4, size(cpus, 80), &mut out) });
                self.cids.add(code, out.raw);
            }
            Call::CidsDestroy(h) => {
                let picked = self.cids.pick(h, &self.tables);
                let code = check(idspace_cids_destroy(IdspaceCids { raw: picked.0 }));
                self.cids.answered(picked, code, true);
            }
            Call::CidFork(h, affinity) => {
                let picked = self.cids.pick(h, &self.tables);
                let mut task = 0u64;
                let code = check(unsafe {
                    idspace_cid_fork(IdspaceCids { raw: picked.0 }, affinity, &mut task)
                });
                self.cids.answered(picked, code, false);
                if code == 0 {
                    self.tasks.push(task);
                }
            }
            Call::CidExit(h, task) => {
                let picked = self.cids.pick(h, &self.tables);
                let task = self
                    .tasks
                    .get(usize::from(task))
                    .copied()
                    .unwrap_or(u64::from(task));
                let code = check(idspace_cid_exit(IdspaceCids { raw: picked.0 }, task));
                self.cids.answered(picked, code, false);
            }
            Call::CidSwitchIn(h, cpu, task) => {
                let picked = self.cids.pick(h, &self.tables);
                let task = self
                    .tasks
                    .get(usize::from(task))
                    .copied()
                    .unwrap_or(u64::from(task));
                let mut cid = 0u32;
                let code = check(unsafe {
                    idspace_cid_switch_in(
                        IdspaceCids { raw: picked.0 },
                        size(cpu, 70),
                        task,
                        &mut cid,
                    )
                });
                self.cids.answered(picked, code, false);
                if code == 0 {
                    assert!(cid < 64, "a CID past the space's CPUs");
                }
            }
            Call::CidSwitchOut(h, cpu) => {
                let picked = self.cids.pick(h, &self.tables);
                let code = check(idspace_cid_switch_out(
                    IdspaceCids { raw: picked.0 },
                    size(cpu, 70),
                ));
                self.cids.answered(picked, code, false);
            }
            Call::CounterNew => {
                let mut out = IdspaceCounter { raw: 0 };
                let code = check(unsafe { idspace_counter_new(&mut out) });
                self.counters.add(code, out.raw);
                if code == 0 {
                    self.sums.push(0);
                }
            }
            Call::CounterDestroy(h) => {
                let picked = self.counters.pick(h, &self.pools);
                let code = check(idspace_counter_destroy(IdspaceCounter { raw: picked.0 }));
                self.counters.answered(picked, code, true);
            }
            Call::CounterAdd(h, n) => {
                let picked = self.counters.pick(h, &self.pools);
                let code = check(idspace_counter_add(IdspaceCounter { raw: picked.0 }, n));
                self.counters.answered(picked, code, false);
                if let (0, Some(at)) = (code, picked.1) {
                    self.sums[at] = self.sums[at].wrapping_add(n);
                }
            }
            Call::CounterSum(h) => {
                let picked = self.counters.pick(h, &self.pools);
                let mut sum = 0u64;
                let code = check(unsafe {
                    idspace_counter_sum(IdspaceCounter { raw: picked.0 }, &mut sum)
                });
                self.counters.answered(picked, code, false);
                if let (0, Some(at)) = (code, picked.1) {
                    assert_eq!(sum, self.sums[at], "a counter lost or invented adds");
                }
            }
            Call::PoolNew(capacity) => {
                let mut out = IdspacePool { raw: 0 };
                let code = check(unsafe { idspace_pool_new(size(capacity, 8), &mut out) });
                self.pools.add(code, out.raw);
                if code == 0 {
                    self.pool_objects.push(HashSet::new());
                }
            }
            Call::PoolDestroy(h) => {
                let picked = self.pools.pick(h, &self.counters);
                let code = check(unsafe {
                    idspace_pool_destroy(IdspacePool { raw: picked.0 }, None, null_mut())
                });
                self.pools.answered(picked, code, true);
                if let (0, Some(at)) = (code, picked.1) {
                    self.pool_objects[at].clear();
                }
            }
            Call::PoolGive(h, n) => {
                let picked = self.pools.pick(h, &self.counters);
                let object = self.object(n);
                let index = self.object_index(object);
                // Only objects no pool of this run holds: each object has one holder.
                if self.pool_objects.iter().any(|held| held.contains(&index)) {
                    return;
                }
                let code =
                    check(unsafe { idspace_pool_give(IdspacePool { raw: picked.0 }, object) });
                self.pools.answered(picked, code, false);
                if let (0, Some(at)) = (code, picked.1) {
                    self.pool_objects[at].insert(index);
                }
            }
            Call::PoolTake(h) => {
                let picked = self.pools.pick(h, &self.counters);
                let mut object = null_mut();
                let code =
                    check(unsafe { idspace_pool_take(IdspacePool { raw: picked.0 }, &mut object) });
                self.pools.answered(picked, code, false);
                if let (0, Some(at)) = (code, picked.1) {
                    let index = self.object_index(object);
                    assert!(
                        self.pool_objects[at].remove(&index),
                        "a pool handed out an object it did not hold"
                    );
                }
            }
            Call::MmCid => {
                let cid = idspace_mm_cid();
                assert!(cid >= 0 || cid == -libc::EOPNOTSUPP);
            }
            Call::Strerror(code) => {
                // SAFETY: the library returns a static NUL-terminated string.
                let text = unsafe { std::ffi::CStr::from_ptr(idspace_strerror(code)) };
                assert!(!text.to_bytes().is_empty());
            }
        }
    }

    /// Destroys every live handle, so that a run leaks nothing.
    fn finish(self) {
        for (raw, live) in self.tables.raw.iter().zip(&self.tables.live) {
            if *live {
                assert_eq!(idspace_table_destroy(IdspaceTable { raw: *raw }), 0);
            }
        }
        for (raw, live) in self.pids.raw.iter().zip(&self.pids.live) {
            if *live {
                assert_eq!(idspace_pids_destroy(IdspacePids { raw: *raw }), 0);
            }
        }
        for (raw, live) in self.cids.raw.iter().zip(&self.cids.live) {
            if *live {
                assert_eq!(idspace_cids_destroy(IdspaceCids { raw: *raw }), 0);
            }
        }
        for (raw, live) in self.counters.raw.iter().zip(&self.counters.live) {
            if *live {
                assert_eq!(idspace_counter_destroy(IdspaceCounter { raw: *raw }), 0);
            }
        }
        for (raw, live) in self.pools.raw.iter().zip(&self.pools.live) {
            if *live {
                // SAFETY: no release function, so no pointer is dereferenced.
                assert_eq!(
                    unsafe { idspace_pool_destroy(IdspacePool { raw: *raw }, None, null_mut()) },
                    0
                );
            }
        }
    }
}

fuzz_target!(|calls: Vec<Call>| {
    let mut world = World::default();
    for call in calls.iter().take(256) {
        world.call(call);
    }
    world.finish();
});
