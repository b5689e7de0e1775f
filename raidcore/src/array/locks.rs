//! Row locks: the one lock manager of the engine. The unit is the member row (a stripe) at every
//! level: a parity-level request locks the rows it touches, a mirror-level request the rows its
//! chunk's copies occupy, a job (rebuild, replace, scrub, resync) the rows of its batch. A lock
//! is a range of rows taken at once, shared (reads) or exclusive (writes, jobs).
//!
//! Rules (docs/locking.md):
//! 1. A request holds at most one range and waits for a range only while it holds none.
//! 2. Only one job runs at a time (the array's job slot); it holds at most three consecutive
//!    batches of bounded size (one being checked or written while the next are read), takes
//!    them in row order, and waits only for the newest.
//! 3. Nobody waits for a row range while holding another engine lock (meta, bitmap,
//!    journal, checksum, stripe cache), and no such lock is held across a wait for rows.
//!    So a waiter for rows never blocks a holder of rows: no cycle, no deadlock.
//! 4. A job never sleeps (rate limit) while holding a range.
//!
//! Order of the engine's locks, outermost first: job slot, config (role changes exclusive,
//! requests shared), row ranges, journal, bitmap, meta, a slot's dev/target, sb_state,
//! spares, checksum store, stripe cache map, a stripe.

use std::ops::Range;

use crate::sync::{Condvar, Mutex};

/// One held range.
struct Held {
    id: u64,
    rows: Range<u64>,
    exclusive: bool,
    /// The job holding it (its batches may overlap each other), or None for a request.
    owner: Option<u64>,
}

#[derive(Default)]
struct State {
    held: Vec<Held>,
    next: u64,
}

pub(crate) struct RowLocks {
    st: Mutex<State>,
    cv: Condvar,
}

/// A held range of rows; released on drop.
pub(crate) struct RowGuard<'a> {
    locks: &'a RowLocks,
    id: u64,
}

impl Drop for RowGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.locks.st.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = st.held.iter().position(|h| h.id == self.id) {
            let h = st.held.swap_remove(p);
            crate::sim::sched::note_rows(&h.rows, false);
        }
        drop(st);
        self.locks.cv.notify_all();
    }
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

impl RowLocks {
    pub(crate) fn new() -> RowLocks {
        RowLocks {
            st: Mutex::new(State::default()),
            cv: Condvar::new(),
        }
    }

    fn lock(&self, rows: Range<u64>, exclusive: bool, owner: Option<u64>) -> RowGuard<'_> {
        debug_assert!(rows.start < rows.end);
        crate::sim::sched::note_wait(&rows);
        let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        while st.held.iter().any(|h| {
            overlaps(&h.rows, &rows)
                && (exclusive || h.exclusive)
                && (owner.is_none() || h.owner != owner)
        }) {
            st = self
                .cv
                .wait(st, &self.st)
                .unwrap_or_else(|e| e.into_inner());
        }
        let id = st.next;
        st.next += 1;
        crate::sim::sched::note_rows(&rows, true);
        st.held.push(Held {
            id,
            rows,
            exclusive,
            owner,
        });
        RowGuard { locks: self, id }
    }

    /// Shared lock of `rows` (reads).
    pub(crate) fn read(&self, rows: Range<u64>) -> RowGuard<'_> {
        self.lock(rows, false, None)
    }

    /// Exclusive lock of `rows` (writes, trims).
    pub(crate) fn write(&self, rows: Range<u64>) -> RowGuard<'_> {
        self.lock(rows, true, None)
    }

    /// A job's identity: the batches one job holds may overlap each other (a mirror chunk's
    /// copies can reach into the next batch's first row).
    pub(crate) fn job_owner(&self) -> u64 {
        let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        st.next += 1;
        st.next
    }

    /// Exclusive lock of a job's batch `rows`.
    pub(crate) fn batch(&self, rows: Range<u64>, owner: u64) -> RowGuard<'_> {
        self.lock(rows, true, Some(owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_writers_exclude_disjoint_ranges_proceed() {
        let l = RowLocks::new();
        let a = l.read(0..4);
        let b = l.read(2..6);
        let c = l.write(6..8);
        let st = l.st.lock().unwrap();
        assert_eq!(st.held.len(), 3);
        drop(st);
        drop((a, b, c));
        assert!(l.st.lock().unwrap().held.is_empty());
        // An exclusive range waits for an overlapping shared one.
        let r = l.read(3..4);
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                let _w = l.write(0..10);
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!h.is_finished());
            drop(r);
            h.join().unwrap();
        });
    }
}
