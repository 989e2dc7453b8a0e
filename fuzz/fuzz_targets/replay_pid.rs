//! `idspace replay pid` over arbitrary bytes, in every design: one JSON answer per line and no
//! panic; the three exact designs answer alike, line for line (`percpu` picks other IDs).

#![no_main]

use idspace_cli::replay::pid::{PidDesign, PidReplay};
use idspace_fuzz::{agree, replay};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let once = replay(&mut PidReplay::new(PidDesign::IdrOnce), input);
    let relock = replay(&mut PidReplay::new(PidDesign::IdrRelock), input);
    let bitmap = replay(&mut PidReplay::new(PidDesign::BitmapHash), input);
    replay(&mut PidReplay::new(PidDesign::Percpu), input);
    agree(("idr-once", &once), ("idr-relock", &relock));
    agree(("idr-once", &once), ("bitmap-hash", &bitmap));
});
