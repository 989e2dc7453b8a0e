//! PID namespaces with `set_tid`.
//!
//! Builds the kernel's nesting, root → container → nested container, starts each namespace's
//! init, and then restores a process as checkpoint/restore does with `clone3`'s `set_tid`:
//! exact IDs at the inner levels, whatever is free at the outer ones. It shows the errors of a
//! taken ID, of an over-long `set_tid` and of a namespace whose init has exited, and runs the
//! same scenario on the recommended [`PerCpu`] and on [`IdrOnce`], which hands out the kernel's
//! exact sequence of numbers.
//!
//! Run with `cargo run -p idspace --example pid_namespaces`.

use idspace::pid::{IdrOnce, NsId, PerCpu, Pid, PidAllocator, PidError, ROOT};

/// "ns 2: 5, ns 1: 1000, ns 0: 37": a process's number at each level, innermost first.
fn describe(pid: &Pid) -> String {
    pid.levels()
        .iter()
        .map(|(ns, id)| format!("ns {ns}: {id}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn scenario(pids: &dyn PidAllocator) -> Result<(), PidError> {
    println!("== {} ==", pids.name());
    // Some processes in the root, so that the inner namespaces' processes get higher numbers.
    let mut root_processes = Vec::new();
    for _ in 0..3 {
        root_processes.push(pids.alloc(ROOT, &[], 0)?);
    }
    let container: NsId = pids.new_ns(ROOT)?;
    let nested: NsId = pids.new_ns(container)?;

    // Each namespace's first process is its init, 1 there.
    let container_init = pids.alloc(container, &[], 1)?;
    let nested_init = pids.alloc(nested, &[], 1)?;
    println!("container init: {}", describe(&container_init));
    println!("nested init:    {}", describe(&nested_init));

    // Restore a process: 5 in the nested namespace and 1000 in the container; the root
    // number is whatever is free.
    let restored = pids.alloc(nested, &[5, 1000], 2)?;
    println!("restored:       {}", describe(&restored));
    assert_eq!(restored.id_in(nested), Some(5));
    assert_eq!(restored.id_in(container), Some(1000));

    // 5 is taken in the nested namespace now.
    assert_eq!(pids.alloc(nested, &[5], 3).err(), Some(PidError::Exists));
    // Three levels, four entries.
    let too_long = pids.alloc(nested, &[6, 1001, 2000, 3000], 3).err();
    assert_eq!(too_long, Some(PidError::Invalid));
    println!("set_tid [5] again: exists; four entries for three levels: invalid");

    // Freeing a process by its number in any namespace that sees it frees every level.
    let in_root = restored
        .id_in(ROOT)
        .expect("every process has a root number");
    pids.free(ROOT, in_root, 0)?;
    assert!(pids.lookup(nested, 5)?.is_none());
    assert!(pids.lookup(container, 1000)?.is_none());

    // Once the nested init exits, its namespace accepts no new process.
    pids.free(nested, 1, 0)?;
    assert_eq!(
        pids.alloc(nested, &[], 0).err(),
        Some(PidError::NamespaceDead)
    );
    println!("after the nested init exited: {}", PidError::NamespaceDead);
    Ok(())
}

fn main() -> Result<(), PidError> {
    scenario(&PerCpu::new(4)?)?;
    scenario(&IdrOnce::new())?;
    Ok(())
}
