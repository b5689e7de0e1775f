//! The deterministic simulator: seeded runs of client I/O, member failures and returns, jobs
//! (rebuild, replace, scrub, resync), silent rot (persistent on the medium, and transient
//! flipped reads) and power cuts over every level, with a scheduler that decides every
//! interleaving and a model of acknowledged and durable data as the oracle. One seed replays
//! one run exactly. Most runs use small arrays (tens of rows); one seed in 8 runs on 1 TiB
//! sparse members whose clients write a few windows (the bitmap's regions, the checksum
//! tables' pages and jobs over ranges of rows then meet real sizes; see `run`).
//!
//! The oracle bounds errors as well as data: a read returns the newest durable data or a
//! later write, and fails only where the run can show the data unrecoverable (more cells of a
//! row out of service or rotten than the level corrects, or, after a power cut, a torn block
//! on a slot lost with the crash; see `run::crash_bound`). Needless loss fails a run like wrong
//! data; so do scrub findings that no injected fault or crash explains. Used by the test suite (a fixed seed set), by
//! `scripts/soak.sh` (new seeds for as long as asked) and by regression tests of failing seeds.

pub mod member;
pub mod model;
pub mod run;
pub mod sched;
pub use run::{run, run_as_named, run_many, run_power_cuts_only, run_small, Failure, Report, Spec};
