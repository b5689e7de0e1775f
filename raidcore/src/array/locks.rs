//! Row locks: a fixed table of reader-writer locks hashed by row (parity levels) or logical
//! chunk (mirror levels). Writers of one row exclude each other and its readers; different rows
//! mostly proceed in parallel.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

const SLOTS: usize = 1024;

pub(crate) struct RowLocks {
    table: Vec<RwLock<()>>,
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

    pub(crate) fn read(&self, row: u64) -> RwLockReadGuard<'_, ()> {
        self.table[Self::index(row)]
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Write-locks every row of a range, each lock once, in table order (a request holds at
    /// most one lock, so this cannot deadlock with them).
    pub(crate) fn write_many(&self, rows: std::ops::Range<u64>) -> Vec<RwLockWriteGuard<'_, ()>> {
        let mut idx: Vec<usize> = if rows.end - rows.start >= SLOTS as u64 {
            (0..SLOTS).collect()
        } else {
            rows.map(Self::index).collect()
        };
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter()
            .map(|i| self.table[i].write().unwrap_or_else(|e| e.into_inner()))
            .collect()
    }

    pub(crate) fn write(&self, row: u64) -> RwLockWriteGuard<'_, ()> {
        self.table[Self::index(row)]
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }
}
