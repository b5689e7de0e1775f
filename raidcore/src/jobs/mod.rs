//! Long work over rows: rebuild and replace (and later scrub and resync), with checkpoints in
//! the superblocks, rate limits and progress callbacks. Foreground I/O waits at most one batch
//! of rows for a job.

pub mod rebuild;
pub mod scrub;

use std::time::Duration;

use crate::clock::Instant;

/// Keeps a job at or below `max_rate` bytes per second by sleeping between batches.
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

    pub(crate) fn account(&mut self, bytes: u64) {
        self.bytes += bytes;
        if let Some(rate) = self.max_rate {
            let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
            let spent = self.start.elapsed();
            if due > spent {
                crate::clock::sleep(due - spent);
            }
        }
    }
}
