//! Long work over rows: rebuild, replace, scrub and resync, one job at a time per array (the
//! array's job slot), with checkpoints in the superblocks, rate limits and progress callbacks.
//! A job locks bounded batches of rows and never sleeps holding them, so foreground I/O waits
//! at most one small batch for a job. Jobs yield to users: while requests are being served they
//! work one batch at a time at their minimum rate (md's sync_speed_min), and at full speed (or
//! their maximum rate) when the array is idle.

pub mod rebuild;
pub mod scrub;

pub use crate::array::job::DEFAULT_MIN_RATE;
