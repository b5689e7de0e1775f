//! Long work over rows: rebuild, replace, scrub and resync, one job at a time per array (the
//! array's job slot), with checkpoints in the superblocks, rate limits and progress callbacks.
//! A job locks bounded batches of rows and never sleeps holding them, so foreground I/O waits
//! at most one small batch for a job.

pub mod rebuild;
pub mod scrub;

use std::time::Duration;

use crate::clock::Instant;

/// Keeps a job at or below `max_rate` bytes per second: work is counted with
/// [`RateLimit::account`], and [`RateLimit::pause`] sleeps off any excess. A job pauses only
/// with no rows locked, so a rate-limited job never makes requests wait for its sleep.
pub(crate) struct RateLimit {
    max_rate: Option<u64>,
    start: Instant,
    bytes: u64,
}

impl RateLimit {
    pub(crate) fn new(max_rate: Option<u64>) -> RateLimit {
        RateLimit {
            max_rate: max_rate.filter(|&r| r > 0),
            start: Instant::now(),
            bytes: 0,
        }
    }

    /// Whether a rate is set (jobs then work one batch at a time, pausing between batches).
    pub(crate) fn limited(&self) -> bool {
        self.max_rate.is_some()
    }

    pub(crate) fn account(&mut self, bytes: u64) {
        self.bytes += bytes;
    }

    /// Sleeps until the bytes accounted so far fit the rate. Call with no rows locked.
    pub(crate) fn pause(&self) {
        if let Some(rate) = self.max_rate {
            let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
            let spent = self.start.elapsed();
            if due > spent {
                crate::clock::sleep(due - spent);
            }
        }
    }
}

/// Rows per job batch at most: 2 MiB of each member (a request waits for at most one batch,
/// whatever the chunk size).
pub(crate) fn batch_rows(chunk: u64, wanted_bytes: u64) -> u64 {
    (wanted_bytes.min(MAX_BATCH_BYTES) / chunk).max(1)
}

/// Bytes per member in one job batch, at most.
pub(crate) const MAX_BATCH_BYTES: u64 = 2 << 20;
