//! The stripe cache of parity levels: partial-row writes are held per row until the row is
//! complete, so small and unaligned sequential writes reach the members as full rows whose
//! parity needs no reads; a row whose data the cache knows entirely is written at once with
//! parity computed from the cache (a read-modify-write without the reads).
//!
//! Rules that keep it safe:
//! - An entry is only touched under its row's write lock (reads of the row take the read lock
//!   and see the held blocks), so it is always the newest content of the row.
//! - Blocks are 4 KiB; only whole-block pieces are held. A piece that cannot be held finds the
//!   row's held blocks written first.
//! - Held blocks are acknowledged but volatile, like a disk's write cache: `flush` writes them
//!   out before it flushes the members (and `mark_clean` before it marks the array clean), a
//!   background writer of the serving daemon writes out blocks older than a second, and a full
//!   cache writes out its least recently used row.
//! - Degraded rows are never held (their writes go through the write-hole journal at once).
//! - Before held blocks are written, their region's write-intent bit is made durable again.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::sync::Mutex;
use std::time::Duration;

use crate::clock::Instant;

use super::csum::BLOCK;
use super::{Array, Verified, WriteKind};
use crate::buf::AlignedBuf;
use crate::error::Result;
use crate::layout::Redundancy;

/// Default memory for held rows.
pub const DEFAULT_STRIPE_CACHE: usize = 16 << 20;

/// One bit per 4 KiB block of a row's data.
#[derive(Clone)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(blocks: usize) -> Bits {
        Bits(vec![0; blocks.div_ceil(64)])
    }

    fn get(&self, b: usize) -> bool {
        self.0[b / 64] & (1 << (b % 64)) != 0
    }

    fn set(&mut self, blocks: Range<usize>) {
        for b in blocks {
            self.0[b / 64] |= 1 << (b % 64);
        }
    }

    fn clear(&mut self) {
        self.0.iter_mut().for_each(|w| *w = 0);
    }

    fn any(&self) -> bool {
        self.0.iter().any(|&w| w != 0)
    }

    fn all(&self, blocks: Range<usize>) -> bool {
        blocks.into_iter().all(|b| self.get(b))
    }

    /// Maximal runs of set bits within `blocks`.
    fn runs(&self, blocks: Range<usize>) -> Vec<Range<usize>> {
        let mut out: Vec<Range<usize>> = Vec::new();
        for b in blocks {
            if self.get(b) {
                match out.last_mut() {
                    Some(r) if r.end == b => r.end = b + 1,
                    _ => out.push(b..b + 1),
                }
            }
        }
        out
    }
}

/// A row's cached data.
struct Stripe {
    /// The row's logical data, chunk after chunk.
    data: AlignedBuf,
    /// Blocks whose bytes in `data` are the row's current content.
    known: Bits,
    /// Known blocks not yet on the members.
    dirty: Bits,
}

struct Entry {
    stripe: Arc<Mutex<Stripe>>,
    last_use: u64,
    /// When the oldest held block came in; None when nothing is held.
    dirty_since: Option<Instant>,
}

#[derive(Default)]
struct Map {
    entries: HashMap<u64, Entry>,
    tick: u64,
    /// Row buffers kept for reuse (fresh ones cost page faults).
    free: Vec<AlignedBuf>,
}

/// The array's stripe cache (empty and unused for mirror levels).
pub(crate) struct StripeCache {
    map: Mutex<Map>,
    /// Rows the cache may hold; 0 disables it.
    cap: AtomicUsize,
    /// Entries in the map, for a lock-free check on the read path.
    len: AtomicUsize,
}

impl StripeCache {
    pub(crate) fn new() -> StripeCache {
        StripeCache {
            map: Mutex::new(Map::default()),
            cap: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Map> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, row: u64) -> Option<Arc<Mutex<Stripe>>> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut m = self.lock();
        m.tick += 1;
        let tick = m.tick;
        m.entries.get_mut(&row).map(|e| {
            e.last_use = tick;
            e.stripe.clone()
        })
    }

    fn remove(&self, row: u64) -> Option<Arc<Mutex<Stripe>>> {
        let mut m = self.lock();
        let e = m.entries.remove(&row)?;
        self.len.store(m.entries.len(), Ordering::Release);
        Some(e.stripe)
    }

    /// Returns a removed entry's buffer for reuse.
    fn recycle(&self, s: Arc<Mutex<Stripe>>) {
        if let Ok(m) = Arc::try_unwrap(s) {
            let s = m.into_inner().unwrap_or_else(|e| e.into_inner());
            let mut map = self.lock();
            if map.free.len() < 4 {
                map.free.push(s.data);
            }
        }
    }

    fn set_dirty(&self, row: u64, dirty: bool) {
        let mut m = self.lock();
        if let Some(e) = m.entries.get_mut(&row) {
            e.dirty_since = match (dirty, e.dirty_since) {
                (false, _) => None,
                (true, Some(t)) => Some(t),
                (true, None) => Some(Instant::now()),
            };
        }
    }
}

fn lock(s: &Mutex<Stripe>) -> std::sync::MutexGuard<'_, Stripe> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

impl Array {
    /// Sets the memory the stripe cache may use (0 turns it off, after writing out what it
    /// holds). Rows larger than half of it are not cached.
    pub fn set_stripe_cache(&self, bytes: usize) -> Result<()> {
        let rows = match self.layout.redundancy() {
            Redundancy::Parity { .. } if self.writable => bytes / self.row_bytes(),
            _ => 0,
        };
        let rows = if rows < 2 { 0 } else { rows };
        self.stripes.cap.store(rows, Ordering::Release);
        // Shared, as a request's: a destage never straddles a role change (`write_back`).
        let _cfg = self.config.read().unwrap_or_else(|e| e.into_inner());
        self.stripe_evict()
    }

    /// Rows the stripe cache may hold (0: off).
    pub fn stripe_cache_rows(&self) -> usize {
        self.stripes.cap.load(Ordering::Acquire)
    }

    fn row_bytes(&self) -> usize {
        (self.layout.chunk() * self.layout.data_per_row() as u64) as usize
    }

    /// Offers one piece of a parity-level write to the cache, under the row's write lock.
    /// Ok(true): the cache took it (held, or written out with parity from the cache). Ok(false):
    /// the caller writes it; any blocks the cache held for the row were written first.
    pub(super) fn stripe_write(
        &self,
        row: u64,
        parity: usize,
        range: &Range<u64>,
        src: &[u8],
    ) -> Result<bool> {
        let existing = self.stripes.get(row);
        let row_bytes = self.row_bytes() as u64;
        let full = *range == (0..row_bytes);
        let aligned = range.start.is_multiple_of(BLOCK) && range.end.is_multiple_of(BLOCK);
        let cap = self.stripes.cap.load(Ordering::Acquire);
        let wanted = existing.is_some() || range.start == 0 || range.end == row_bytes;
        if full || !aligned || cap == 0 || !wanted || self.row_needs_journal(row, parity) {
            if let Some(s) = existing {
                // A full row replaces everything held; anything else goes after it.
                self.stripe_forget(row, parity, s, !full)?;
            }
            return Ok(false);
        }
        let s = match existing {
            Some(s) => s,
            None => {
                let mut m = self.stripes.lock();
                let data = m
                    .free
                    .pop()
                    .unwrap_or_else(|| AlignedBuf::zeroed(row_bytes as usize));
                let blocks = (row_bytes / BLOCK) as usize;
                let s = Arc::new(Mutex::new(Stripe {
                    data,
                    known: Bits::new(blocks),
                    dirty: Bits::new(blocks),
                }));
                m.tick += 1;
                let last_use = m.tick;
                m.entries.insert(
                    row,
                    Entry {
                        stripe: s.clone(),
                        last_use,
                        dirty_since: None,
                    },
                );
                self.stripes.len.store(m.entries.len(), Ordering::Release);
                s
            }
        };
        let mut st = lock(&s);
        st.data[range.start as usize..range.end as usize].copy_from_slice(src);
        let blocks = (range.start / BLOCK) as usize..(range.end / BLOCK) as usize;
        st.known.set(blocks.clone());
        st.dirty.set(blocks);
        self.stripes.set_dirty(row, true);
        // When the cache knows every block parity needs, write now: no reads are needed.
        if self.parity_span_known(&st).is_some() {
            self.stripe_destage(row, parity, &mut st)?;
        }
        Ok(true)
    }

    /// The chunk-relative block range covering every held block, when the cache knows all
    /// data blocks over it (parity over it can then be computed without reads).
    fn parity_span_known(&self, st: &Stripe) -> Option<Range<usize>> {
        let per_chunk = (self.layout.chunk() / BLOCK) as usize;
        let d_count = self.layout.data_per_row();
        let (mut lo, mut hi) = (usize::MAX, 0);
        for d in 0..d_count {
            for r in st.dirty.runs(d * per_chunk..(d + 1) * per_chunk) {
                lo = lo.min(r.start - d * per_chunk);
                hi = hi.max(r.end - d * per_chunk);
            }
        }
        if lo >= hi {
            return None;
        }
        (0..d_count)
            .all(|d| st.known.all(d * per_chunk + lo..d * per_chunk + hi))
            .then_some(lo..hi)
    }

    /// Writes a row's held blocks to the members, under the row's write lock: with parity from
    /// the cache when it knows enough and the row is whole, else as ordinary partial-row
    /// writes (which read what they need, and journal when degraded).
    fn stripe_destage(&self, row: u64, parity: usize, st: &mut Stripe) -> Result<()> {
        if !st.dirty.any() {
            return Ok(());
        }
        let chunk = self.layout.chunk() as usize;
        let per_chunk = chunk / BLOCK as usize;
        let d_count = self.layout.data_per_row();
        // The columns the held blocks cover in any cell: what the destage may change.
        let base = self.row_blocks(row..row + 1).start;
        let mut cols: Vec<Range<u64>> = Vec::new();
        for r in st.dirty.runs(0..d_count * per_chunk) {
            let (a, b) = (r.start % per_chunk, (r.end - 1) % per_chunk + 1);
            if r.end - r.start >= per_chunk || b <= a {
                cols.clear();
                cols.push(0..per_chunk as u64);
                break;
            }
            cols.push(a as u64..b as u64);
        }
        let blocks = cols
            .into_iter()
            .map(|c| base + c.start..base + c.end)
            .collect();
        let hold = self.begin_destage(row..row + 1, blocks)?;
        let span = self.parity_span_known(st);
        match span {
            Some(span) if !self.row_needs_journal(row, parity) => {
                let slots = self.row_slots(row, parity);
                let bytes = span.start * BLOCK as usize..span.end * BLOCK as usize;
                let data: Vec<&[u8]> = (0..d_count)
                    .map(|d| &st.data[d * chunk + bytes.start..d * chunk + bytes.end])
                    .collect();
                let mut p = AlignedBuf::zeroed(bytes.len());
                let mut q = AlignedBuf::zeroed(if parity == 2 { bytes.len() } else { 0 });
                (self.kernel.gen_pq)(&data, &mut p, (parity == 2).then_some(&mut q[..]));
                let mut writes: Vec<(usize, Verified, u64, WriteKind)> = Vec::new();
                let mut chunks = 0;
                for (d, &slot) in slots.iter().enumerate().take(d_count) {
                    let runs = st.dirty.runs(d * per_chunk..(d + 1) * per_chunk);
                    chunks += usize::from(!runs.is_empty());
                    for r in runs {
                        let within = ((r.start - d * per_chunk) as u64) * BLOCK;
                        let b = r.start * BLOCK as usize..r.end * BLOCK as usize;
                        writes.push((slot, Verified::client(&st.data[b]), within, WriteKind::Data));
                    }
                }
                let full = st.dirty.all(0..d_count * per_chunk);
                writes.push((
                    slots[d_count],
                    Verified::parity(&p[..]),
                    bytes.start as u64,
                    WriteKind::Parity,
                ));
                if parity == 2 {
                    writes.push((
                        slots[d_count + 1],
                        Verified::parity(&q[..]),
                        bytes.start as u64,
                        WriteKind::Parity,
                    ));
                }
                self.count_row_write(chunks, full);
                self.on_members(writes, |(slot, buf, within, kind)| {
                    self.member_write(slot, buf, row, within, kind)
                })?;
                self.check_alive()?;
            }
            _ => {
                for r in st.dirty.runs(0..d_count * per_chunk) {
                    let b = r.start * BLOCK as usize..r.end * BLOCK as usize;
                    let range = b.start as u64..b.end as u64;
                    self.write_parity_row(row, parity, &range, &st.data[b], &hold)?;
                }
            }
        }
        st.dirty.clear();
        self.stripes.set_dirty(row, false);
        Ok(())
    }

    /// Copies the blocks the cache holds for `row` over `out`, which was read from the members
    /// for row-relative `range` (under the row's lock). Returns true when every block of the
    /// range is held, so the member read may be skipped (call with `dry` to ask first).
    pub(super) fn stripe_overlay(
        &self,
        row: u64,
        range: &Range<u64>,
        out: &mut [u8],
        dry: bool,
    ) -> bool {
        let Some(s) = self.stripes.get(row) else {
            return false;
        };
        let st = lock(&s);
        let first = (range.start / BLOCK) as usize;
        let last = range.end.div_ceil(BLOCK) as usize;
        let whole = st.dirty.all(first..last);
        if dry && !whole {
            return false;
        }
        for r in st.dirty.runs(first..last) {
            let lo = (r.start as u64 * BLOCK).max(range.start);
            let hi = (r.end as u64 * BLOCK).min(range.end);
            out[(lo - range.start) as usize..(hi - range.start) as usize]
                .copy_from_slice(&st.data[lo as usize..hi as usize]);
        }
        whole
    }

    /// Writes out held blocks before something else changes the row (under its write lock)
    /// and forgets the row.
    pub(super) fn stripe_take(&self, row: u64) -> Result<()> {
        let Redundancy::Parity { parity } = self.layout.redundancy() else {
            return Ok(());
        };
        match self.stripes.get(row) {
            Some(s) => self.stripe_forget(row, parity, s, true),
            None => Ok(()),
        }
    }

    /// Drops a row's entry (under its write lock), writing out its held blocks first unless
    /// the caller overwrites the whole row.
    fn stripe_forget(
        &self,
        row: u64,
        parity: usize,
        s: Arc<Mutex<Stripe>>,
        write_out: bool,
    ) -> Result<()> {
        if write_out {
            self.stripe_destage(row, parity, &mut lock(&s))?;
        }
        self.stripes.remove(row);
        self.stripes.recycle(s);
        Ok(())
    }

    /// Writes out held blocks: all of them, or those held longer than `older_than`. Holds the
    /// config lock shared, as every request does, so that no role change (a finished rebuild
    /// or replace swapping a slot's member) happens between a destage's member writes: one
    /// begun before the swap and landing after it reached only the leaving member, and a flushed
    /// write read back old (an outside attack on the daemon's write-back thread).
    pub fn write_back(&self, older_than: Option<Duration>) -> Result<()> {
        let _cfg = self.config.read().unwrap_or_else(|e| e.into_inner());
        self.write_back_held(older_than)
    }

    /// [`Array::write_back`] for a caller that holds the config lock already.
    pub(crate) fn write_back_held(&self, older_than: Option<Duration>) -> Result<()> {
        self.write_back_where(|_, since| older_than.is_none_or(|age| since.elapsed() >= age))
    }

    /// Writes out the rows of `rows` held dirty (a FUA write's: [`Array::flush_range`]).
    pub(crate) fn write_back_rows(&self, rows: Range<u64>) -> Result<()> {
        self.write_back_where(|row, _| rows.contains(&row))
    }

    /// Writes out the dirty rows `pick` chooses (by row and the time it became dirty).
    fn write_back_where(&self, pick: impl Fn(u64, Instant) -> bool) -> Result<()> {
        let Redundancy::Parity { parity } = self.layout.redundancy() else {
            return Ok(());
        };
        if self.stripes.len.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        let mut rows: Vec<u64> = {
            let m = self.stripes.lock();
            m.entries
                .iter()
                .filter(|(&r, e)| e.dirty_since.is_some_and(|t| pick(r, t)))
                .map(|(&r, _)| r)
                .collect()
        };
        rows.sort_unstable();
        for row in rows {
            let _g = self.locks.write(row..row + 1);
            if let Some(s) = self.stripes.get(row) {
                self.stripe_destage(row, parity, &mut lock(&s))?;
            }
        }
        Ok(())
    }

    /// Brings the cache back within its size: least recently used rows are written out and
    /// forgotten. Called with no row lock held.
    pub(super) fn stripe_evict(&self) -> Result<()> {
        let Redundancy::Parity { parity } = self.layout.redundancy() else {
            return Ok(());
        };
        loop {
            let cap = self.stripes.cap.load(Ordering::Acquire);
            let victim = {
                let m = self.stripes.lock();
                if m.entries.len() <= cap {
                    return Ok(());
                }
                m.entries
                    .iter()
                    .min_by_key(|(_, e)| e.last_use)
                    .map(|(&r, _)| r)
            };
            let Some(row) = victim else { return Ok(()) };
            let _g = self.locks.write(row..row + 1);
            // Written out while still in the cache, and removed after: a flush running meanwhile
            // finds the row and waits on its lock for the member writes. Removed first, a FLUSH
            // or FUA write could find nothing to wait for and return before they were done (an
            // outside attack: `a_flush_waits_for_a_row_the_cache_is_writing_out`).
            if let Some(s) = self.stripes.get(row) {
                let r = self.stripe_destage(row, parity, &mut lock(&s));
                drop(s);
                if let Some(s) = self.stripes.remove(row) {
                    self.stripes.recycle(s);
                }
                r?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Bits;

    #[test]
    fn bit_runs() {
        let mut b = Bits::new(130);
        b.set(3..5);
        b.set(63..66);
        b.set(129..130);
        assert_eq!(b.runs(0..130), vec![3..5, 63..66, 129..130]);
        assert_eq!(b.runs(4..64), vec![4..5, 63..64]);
        assert!(b.all(63..66) && !b.all(62..66));
        assert!(b.any());
        b.clear();
        assert!(!b.any());
    }
}
