//! Time for the engine: a monotonic [`Instant`] and [`sleep`] that follow the real clock, or
//! the simulator's virtual clock on threads taking part in a simulation (so time-based rules,
//! such as when a write-intent bit clears or when a rebuild records its checkpoint, replay
//! exactly with the seed).

use std::time::Duration;

use crate::sim::sched;

/// A point in monotonic time (real, or virtual inside a simulation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant(Duration);

fn real_now() -> Duration {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(std::time::Instant::now).elapsed()
}

impl Instant {
    pub fn now() -> Instant {
        Instant(sched::virtual_now().unwrap_or_else(real_now))
    }

    pub fn elapsed(&self) -> Duration {
        Instant::now().0.saturating_sub(self.0)
    }

    /// Nanoseconds since the clock's start (for atomics).
    pub fn nanos(&self) -> u64 {
        self.0.as_nanos() as u64
    }

    pub fn from_nanos(n: u64) -> Instant {
        Instant(Duration::from_nanos(n))
    }

    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl std::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d)
    }
}

impl std::ops::Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d))
    }
}

/// Sleeps for `d` (virtual time inside a simulation).
pub fn sleep(d: Duration) {
    if !sched::sleep(d) {
        std::thread::sleep(d);
    }
}

/// Unix seconds: the wall clock, or the simulation's virtual one.
pub fn unix_secs() -> Option<u64> {
    sched::virtual_now().map(|d| sched::EPOCH_SECS + d.as_secs())
}
