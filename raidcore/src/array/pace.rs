//! Pacing of the row jobs: batch sizes that adapt to how long a batch holds its rows, and the
//! rate limit that keeps a job at or below its maximum rate and yields to users' requests down
//! to its minimum rate (md's sync_speed_min/max). The engine's job API (`job.rs`) hands these
//! to the drivers in `jobs/`.

use std::time::Duration;

use crate::clock::Instant;

/// What a job does at most while users' requests are being served, unless told otherwise
/// (`--min-rate`): bytes per second (written to targets by a rebuild, read by a scrub).
pub const DEFAULT_MIN_RATE: u64 = 32 << 20;

/// Keeps a job at or below `max_rate` bytes per second, and at `min_rate` while users'
/// requests are being served: work is counted with [`RateLimit::account`], requests seen with
/// [`RateLimit::yielding`], and [`RateLimit::pause`] sleeps off any excess. A job pauses only
/// with no rows locked, so a rate-limited job never makes requests wait for its sleep.
pub(crate) struct RateLimit {
    max_rate: Option<u64>,
    min_rate: Option<u64>,
    start: Instant,
    bytes: u64,
    /// The array's request count at the last look.
    seen: Option<u64>,
    /// Since when requests have been seen at every look, and the bytes counted then.
    busy: Option<(Instant, u64)>,
}

impl RateLimit {
    /// `min_rate`: the rate while requests are served (None or 0: the job never yields).
    pub(crate) fn new(max_rate: Option<u64>, min_rate: Option<u64>) -> RateLimit {
        RateLimit {
            max_rate: max_rate.filter(|&r| r > 0),
            min_rate: min_rate.filter(|&r| r > 0),
            start: Instant::now(),
            bytes: 0,
            seen: None,
            busy: None,
        }
    }

    /// Looks at the array's request count (`served`, [`crate::array::Array::requests_served`])
    /// between batches: true when requests were served since the last look, and the job is to
    /// work one batch at a time, pausing ([`RateLimit::pause`]) to its minimum rate. The first
    /// look only takes the count.
    pub(crate) fn yielding(&mut self, served: u64) -> bool {
        if self.min_rate.is_none() {
            return false;
        }
        let busy = self.seen.is_some_and(|s| s != served);
        self.seen = Some(served);
        if !busy {
            self.busy = None;
        } else if self.busy.is_none() {
            self.busy = Some((Instant::now(), self.bytes));
        }
        busy
    }

    /// Whether a rate is set (jobs then work one batch at a time, pausing between batches).
    pub(crate) fn limited(&self) -> bool {
        self.max_rate.is_some()
    }

    pub(crate) fn account(&mut self, bytes: u64) {
        self.bytes += bytes;
    }

    /// Sleeps until the bytes accounted so far fit the rate, and while requests are being
    /// served the bytes since they began fit the minimum rate; returns early once `stop()`
    /// says so (checked every 100 ms: a stop request, a shutdown, is not kept waiting for a
    /// long sleep of a slow rate; an outside attack waited 195 s for `serve` to stop). Call
    /// with no rows locked.
    pub(crate) fn pause(&self, stop: &dyn Fn() -> bool) {
        let mut wait = self.yield_for();
        if let Some(rate) = self.max_rate {
            let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
            wait = wait.max(due.saturating_sub(self.start.elapsed()));
        }
        let slice = Duration::from_millis(100);
        while !wait.is_zero() && !stop() {
            let step = wait.min(slice);
            crate::clock::sleep(step);
            wait -= step;
        }
    }

    /// How long the job is to wait for the bytes since requests began to be seen to fit the
    /// minimum rate (zero when the array is idle or the job never yields).
    fn yield_for(&self) -> Duration {
        let (Some(rate), Some((since, at))) = (self.min_rate, self.busy) else {
            return Duration::ZERO;
        };
        let due = Duration::from_secs_f64((self.bytes - at) as f64 / rate as f64);
        due.saturating_sub(since.elapsed())
    }
}

/// Rows per job batch at most: 2 MiB of each member (a request waits for at most one batch,
/// whatever the chunk size).
pub(crate) fn batch_rows(chunk: u64, wanted_bytes: u64) -> u64 {
    (wanted_bytes.min(MAX_BATCH_BYTES) / chunk).max(1)
}

/// Bytes per member in one job batch, at most.
pub(crate) const MAX_BATCH_BYTES: u64 = 2 << 20;

/// How long a batch may hold its rows before the next ones are made smaller (and a replace's
/// read stops early, [`crate::array::Array::read_rows_verified`]).
pub(crate) const SLOW_BATCH: Duration = Duration::from_millis(200);

/// Rows per job batch, adapted to how long a batch holds its rows: every request into them
/// waits that long. A batch whose rows take the slow path (a damaged checksum table page makes
/// each row's cells unknown, so each is checked against its row and rebuilt block by block;
/// bad sectors read one block at a time) held 512 rows for thousands of small reads, and a
/// client waited behind it (simulator seed 10004158: 23 s of virtual time). After a slow batch
/// the next is a quarter of it; after a quick one, twice it, up to the most asked for.
pub(crate) struct BatchPace {
    pub(crate) rows: u64,
    max: u64,
}

impl BatchPace {
    /// Starts small (16 rows) and doubles while batches are quick: a pass that resumes in the
    /// middle of slow rows does not hold a whole batch of them first.
    pub(crate) fn new(max: u64) -> BatchPace {
        BatchPace {
            rows: max.min(16),
            max,
        }
    }

    /// The end of the batch from row `r0` (of `rows`): at the next multiple of the batch size,
    /// so that batches of a size that changes still end on the boundaries of the runs the jobs
    /// skip (bitmap regions: a batch past one rewrote rows a re-added member holds).
    pub(crate) fn end(&self, r0: u64, rows: u64) -> u64 {
        ((r0 / self.rows + 1) * self.rows).min(rows)
    }

    /// A batch held its rows for `took`.
    pub(crate) fn after(&mut self, took: Duration) {
        if took > SLOW_BATCH {
            self.rows = (self.rows / 4).max(1);
        } else if took < SLOW_BATCH / 4 {
            self.rows = (self.rows * 2).min(self.max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch that held its rows long makes the next ones smaller, down to one row, and
    /// quick ones make them larger again, up to the most asked for.
    #[test]
    fn batches_shrink_after_a_slow_one_and_grow_back() {
        let mut p = BatchPace::new(512);
        assert_eq!(p.rows, 16, "starts small");
        for _ in 0..5 {
            p.after(Duration::from_millis(1));
        }
        assert_eq!(p.rows, 512);
        p.after(Duration::from_secs(3));
        assert_eq!(p.rows, 128);
        for _ in 0..10 {
            p.after(Duration::from_secs(3));
        }
        assert_eq!(p.rows, 1);
        p.after(Duration::from_millis(100));
        assert_eq!(p.rows, 1, "neither slow nor quick: as it is");
        for _ in 0..20 {
            p.after(Duration::from_millis(1));
        }
        assert_eq!(p.rows, 512);
    }

    /// Issue 30 (jobs yield to users): a job that sees requests served between its batches
    /// paces itself to its minimum rate from then on, and runs unpaced again once a look finds
    /// none; without a minimum rate it never yields.
    #[test]
    fn a_job_yields_to_its_minimum_rate_while_requests_are_served() {
        let mut r = RateLimit::new(None, Some(1 << 20));
        assert!(!r.yielding(0), "the first look only takes the count");
        r.account(8 << 20);
        assert!(!r.yielding(0), "no request since");
        assert_eq!(r.yield_for(), Duration::ZERO);
        assert!(r.yielding(3), "requests were served");
        r.account(2 << 20);
        assert!(
            r.yield_for() > Duration::from_millis(1500),
            "2 MiB at 1 MiB/s"
        );
        assert!(r.yielding(4));
        r.account(2 << 20);
        assert!(
            r.yield_for() > Duration::from_millis(3500),
            "4 MiB since they began"
        );
        assert!(!r.yielding(4), "idle again");
        assert_eq!(r.yield_for(), Duration::ZERO);
        let mut never = RateLimit::new(None, None);
        assert!(!never.yielding(1) && !never.yielding(2));
        let mut zero = RateLimit::new(None, Some(0));
        assert!(
            !zero.yielding(1) && !zero.yielding(2),
            "0 means never yield"
        );
    }
}
