//! `idspace replay process` over arbitrary bytes: one JSON answer per line and no panic, in
//! every PID design; the exact PID designs answer alike, line for line, whichever table holds
//! the timers (all table designs are exact too).

#![no_main]

use idspace_cli::replay::pid::PidDesign;
use idspace_cli::replay::process::ProcessReplay;
use idspace_cli::replay::table::TableDesign;
use idspace_fuzz::{agree, replay};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let kernel = replay(
        &mut ProcessReplay::new(PidDesign::IdrOnce, TableDesign::Scaled),
        input,
    );
    for (pids, table, name) in [
        (
            PidDesign::IdrRelock,
            TableDesign::Global,
            "idr-relock + global",
        ),
        (
            PidDesign::BitmapHash,
            TableDesign::Radix,
            "bitmap-hash + radix",
        ),
    ] {
        let answers = replay(&mut ProcessReplay::new(pids, table), input);
        agree(("idr-once + scaled", &kernel), (name, &answers));
    }
    replay(
        &mut ProcessReplay::new(PidDesign::Percpu, TableDesign::Scaled),
        input,
    );
});
