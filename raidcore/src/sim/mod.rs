//! The deterministic simulator: seeded runs of client I/O, member failures and returns, jobs
//! (rebuild, replace, scrub, resync) and power cuts over every level, with a scheduler that
//! decides every interleaving and a model of acknowledged and durable data as the oracle. One
//! seed replays one run exactly. Used by the test suite (a fixed seed set), by
//! `scripts/soak.sh` (new seeds for as long as asked) and by regression tests of failing seeds.

pub mod member;
pub mod model;
pub mod run;
pub mod sched;
pub use run::{run, run_as_named, run_many, Failure, Report, Spec};
