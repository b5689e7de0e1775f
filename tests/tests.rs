//! Integration tests: one binary, one module per area. They drive the real `raidctl` binary
//! over plain files and real loop devices.

mod util;

mod bad_input;
mod crash;
mod docs;
mod drills;
mod golden;
mod levels;
mod lifecycle;
mod loopdev;
mod ops;
mod profile;
mod resync;
mod scrub;
mod serve;
mod vm;
mod wear;
