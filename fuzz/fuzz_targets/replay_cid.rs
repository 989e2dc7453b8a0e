//! `idspace replay cid` over arbitrary bytes, in every design and at two CPU counts: one JSON
//! answer per line and no panic. The designs differ in the CIDs they give, by design.

#![no_main]

use idspace_cli::replay::cid::{CidDesign, CidReplay};
use idspace_fuzz::replay;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    for design in [CidDesign::Rework, CidDesign::Bitmap, CidDesign::Lazy] {
        for cpus in [1, 4] {
            let mut replayer = CidReplay::new(design, cpus).expect("1 and 4 CPUs are in range");
            replay(&mut replayer, input);
        }
    }
});
