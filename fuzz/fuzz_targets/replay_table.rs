//! `idspace replay table` over arbitrary bytes, in every design: one JSON answer per line and no
//! panic, and the three designs (all exact) answer alike, line for line.

#![no_main]

use idspace_cli::replay::table::{TableDesign, TableReplay};
use idspace_fuzz::{agree, replay};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let scaled = replay(&mut TableReplay::new(TableDesign::Scaled), input);
    let global = replay(&mut TableReplay::new(TableDesign::Global), input);
    let radix = replay(&mut TableReplay::new(TableDesign::Radix), input);
    agree(("scaled", &scaled), ("global", &global));
    agree(("scaled", &scaled), ("radix", &radix));
});
