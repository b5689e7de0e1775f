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
//! Order of the engine's locks, outermost first (docs/locking.md, "Order"): job slot, config
//! (role changes exclusive, requests shared), row ranges, stripe cache map then a stripe,
//! journal, bitmap state and the dirtying lock, meta, a slot's dev/target and a device's
//! sb_state, spares/notes/reason, a member's checksum store, the bad-block list and the
//! unflushed-rows tracker (leaves).

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
    /// Lockers waiting in this shard: a release wakes them only when there are some (a
    /// wake-up is a system call, and most releases have nobody waiting).
    waiters: usize,
}

/// One shard of the table: the ranges registered here cover at least one row hashing to it.
#[derive(Default)]
struct Shard {
    st: Mutex<State>,
    cv: Condvar,
}

/// Shards of the table. A one-row request touches one, so requests to different rows rarely
/// meet on a mutex (one table-wide mutex cost a third of the 4 KiB random-write IOPS).
const SHARDS: usize = 64;

pub(crate) struct RowLocks {
    shards: Vec<Shard>,
    next: std::sync::atomic::AtomicU64,
}

/// A held range of rows; released on drop.
pub(crate) struct RowGuard<'a> {
    locks: &'a RowLocks,
    id: u64,
    rows: Range<u64>,
    shards: Vec<usize>,
}

impl Drop for RowGuard<'_> {
    fn drop(&mut self) {
        crate::sim::sched::note_rows(&self.rows, false);
        for &i in &self.shards {
            self.locks.release(i, self.id);
        }
    }
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

fn shard_of(row: u64) -> usize {
    (row.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % SHARDS
}

/// The shards a range registers in, ascending (every one for long ranges).
fn shards_of(rows: &Range<u64>) -> Vec<usize> {
    if rows.end - rows.start >= SHARDS as u64 {
        return (0..SHARDS).collect();
    }
    let mut v: Vec<usize> = rows.clone().map(shard_of).collect();
    v.sort_unstable();
    v.dedup();
    v
}

impl State {
    fn conflicts(&self, rows: &Range<u64>, exclusive: bool, owner: Option<u64>) -> bool {
        self.held.iter().any(|h| {
            overlaps(&h.rows, rows)
                && (exclusive || h.exclusive)
                && (owner.is_none() || h.owner != owner)
        })
    }
}

impl RowLocks {
    pub(crate) fn new() -> RowLocks {
        RowLocks {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            next: std::sync::atomic::AtomicU64::new(1),
        }
    }

    fn release(&self, shard: usize, id: u64) {
        let sh = &self.shards[shard];
        let mut st = sh.st.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = st.held.iter().position(|h| h.id == id) {
            st.held.swap_remove(p);
        }
        let wake = st.waiters > 0;
        drop(st);
        if wake {
            sh.cv.notify_all();
        }
    }

    /// Takes the range in every shard it touches, in ascending order. Where one conflicts,
    /// everything taken so far is let go before waiting (rule 1: wait while holding nothing of
    /// this range), then it starts over.
    fn lock(&self, rows: Range<u64>, exclusive: bool, owner: Option<u64>) -> RowGuard<'_> {
        debug_assert!(rows.start < rows.end);
        crate::sim::sched::note_wait(&rows);
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let shards = shards_of(&rows);
        'again: loop {
            for (k, &i) in shards.iter().enumerate() {
                let sh = &self.shards[i];
                let mut st = sh.st.lock().unwrap_or_else(|e| e.into_inner());
                if st.conflicts(&rows, exclusive, owner) {
                    drop(st);
                    for &j in &shards[..k] {
                        self.release(j, id);
                    }
                    let mut st = sh.st.lock().unwrap_or_else(|e| e.into_inner());
                    while st.conflicts(&rows, exclusive, owner) {
                        st.waiters += 1;
                        st = sh.cv.wait(st, &sh.st).unwrap_or_else(|e| e.into_inner());
                        st.waiters -= 1;
                    }
                    continue 'again;
                }
                st.held.push(Held {
                    id,
                    rows: rows.clone(),
                    exclusive,
                    owner,
                });
            }
            break;
        }
        crate::sim::sched::note_rows(&rows, true);
        RowGuard {
            locks: self,
            id,
            rows,
            shards,
        }
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
        self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
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
        let held = |l: &RowLocks| -> usize {
            let mut ids: Vec<u64> = l
                .shards
                .iter()
                .flat_map(|s| {
                    s.st.lock()
                        .unwrap()
                        .held
                        .iter()
                        .map(|h| h.id)
                        .collect::<Vec<_>>()
                })
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len()
        };
        assert_eq!(held(&l), 3);
        drop((a, b, c));
        assert_eq!(held(&l), 0);
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
