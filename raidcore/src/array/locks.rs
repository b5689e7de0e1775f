//! Row locks: a fixed table of reader-writer locks hashed by row (parity levels) or logical
//! chunk (mirror levels). Writers of one row exclude each other and its readers; different rows
//! mostly proceed in parallel.

use std::sync::{RwLockReadGuard, RwLockWriteGuard};

use crate::sync::RwLock;

const SLOTS: usize = 1024;

pub(crate) struct RowLocks {
    table: Vec<RwLock<()>>,
}

/// A held row lock. Inside the simulator it records which actor holds which slot, so a
/// deadlock report can name the holder.
pub(crate) struct RowGuard<'a> {
    _g: Guard<'a>,
    index: usize,
}

enum Guard<'a> {
    // Held for their drop only.
    #[allow(dead_code)]
    Read(RwLockReadGuard<'a, ()>),
    #[allow(dead_code)]
    Write(RwLockWriteGuard<'a, ()>),
}

impl Drop for RowGuard<'_> {
    fn drop(&mut self) {
        crate::sim::sched::note_lock(self.index, false);
    }
}

fn guard(g: Guard<'_>, index: usize) -> RowGuard<'_> {
    crate::sim::sched::note_lock(index, true);
    RowGuard { _g: g, index }
}

impl RowLocks {
    pub(crate) fn new() -> RowLocks {
        RowLocks {
            table: (0..SLOTS).map(|_| RwLock::new(())).collect(),
        }
    }

    fn index(row: u64) -> usize {
        (row.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize % SLOTS
    }

    pub(crate) fn read(&self, row: u64) -> RowGuard<'_> {
        let i = Self::index(row);
        crate::sim::sched::note_wait(i);
        let g = self.table[i].read().unwrap_or_else(|e| e.into_inner());
        guard(Guard::Read(g), i)
    }

    /// Lock-table indices covering a range of rows, sorted, each once.
    pub(crate) fn indices(&self, rows: std::ops::Range<u64>) -> Vec<usize> {
        let mut idx: Vec<usize> = if rows.end - rows.start >= SLOTS as u64 {
            (0..SLOTS).collect()
        } else {
            rows.map(Self::index).collect()
        };
        idx.sort_unstable();
        idx.dedup();
        idx
    }

    pub(crate) fn write_index(&self, i: usize) -> RowGuard<'_> {
        crate::sim::sched::note_wait(i);
        let g = self.table[i].write().unwrap_or_else(|e| e.into_inner());
        guard(Guard::Write(g), i)
    }

    pub(crate) fn write(&self, row: u64) -> RowGuard<'_> {
        self.write_index(Self::index(row))
    }
}

/// Row locks held by a job across batches: a job may hold two consecutive batches at once (one
/// being written while the next is read), so indices shared by both are taken once. Requests
/// hold at most one lock and never wait while holding it, so a job holding many cannot deadlock
/// with them.
pub(crate) struct HeldLocks<'a> {
    locks: &'a RowLocks,
    held: std::collections::BTreeMap<usize, RowGuard<'a>>,
}

impl<'a> HeldLocks<'a> {
    pub(crate) fn new(locks: &'a RowLocks) -> HeldLocks<'a> {
        HeldLocks {
            locks,
            held: Default::default(),
        }
    }

    /// Locks `rows`, returning the indices to pass to [`HeldLocks::release`] later.
    pub(crate) fn acquire(&mut self, rows: std::ops::Range<u64>) -> Vec<usize> {
        let idx = self.locks.indices(rows);
        for &i in &idx {
            if !self.held.contains_key(&i) {
                let g = self.locks.write_index(i);
                self.held.insert(i, g);
            }
        }
        idx
    }

    /// Releases `old` except the indices in `keep`.
    pub(crate) fn release(&mut self, old: &[usize], keep: &[usize]) {
        for i in old {
            if keep.binary_search(i).is_err() {
                self.held.remove(i);
            }
        }
    }
}
