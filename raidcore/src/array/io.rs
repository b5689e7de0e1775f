//! Read and write paths. Mirror levels (RAID0/1/10) work chunk by chunk over the copies; parity
//! levels (RAID5/F1/6) work row by row: full rows compute parity from the new data without reads,
//! partial rows pick read-modify-write or reconstruct-write by bytes read, and degraded rows
//! reconstruct the missing chunks, merge the new data and rewrite parity so every missing
//! member stays reconstructable.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::sync::Arc;

use crate::sync::Mutex;

use super::csum::{Expect, BLOCK};
use super::row::{Known, Verdict, Verified};
use super::{Array, Dev, TargetKind, WriteKind};
use crate::buf::AlignedBuf;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::Redundancy;
use crate::parity::gf;
use crate::plan::{self, Cell, CopyChoice, Method, Recovered, RowShape, WritePlan};

/// A block [`Array::read_rows_verified`] could neither verify nor recover: left as it is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeptAsIs {
    /// Its offset in the caller's buffer (4 KiB aligned).
    pub at: usize,
    /// The entry the old member has for it, which a copy keeps; None when it could not be read
    /// at all (lost: the copy lists it bad).
    pub entry: Option<Expect>,
}

/// What a write's reconstruction rested on that nothing verified: `moot`, the row positions the
/// write replaces whole over its span (its parity, the data cells it covers); `found`, the
/// other positions and their byte ranges in the span buffers.
struct Unverified {
    moot: Vec<usize>,
    found: Vec<(usize, Range<usize>)>,
    /// Present cells the reconstruction replaced (failing their entries, or unchecked ones it
    /// rebuilt), to be rewritten as the placeholders the new parity assumes once the write
    /// has listed them (entries unknown).
    placeholders: Vec<(usize, Range<usize>)>,
}

impl Unverified {
    /// A write takes a column run of cells nothing verifies (a row whose parity disagrees with
    /// them, or more of them lost than parity covers): each not verified and not replaced whole
    /// by the write is listed, present ones failing their entries or unreadable rewritten as
    /// the placeholders the write's new parity assumes.
    fn take_unverifiable(&mut self, cells: &[Cell], run: &Range<usize>) {
        for (i, &cell) in cells.iter().enumerate() {
            if cell == Cell::Good || self.moot.contains(&i) {
                continue;
            }
            self.found.push((i, run.clone()));
            if matches!(cell, Cell::Bad | Cell::Unreadable) {
                self.placeholders.push((i, run.clone()));
            }
        }
    }
}

/// Counts a request in flight for as long as it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(a: &'a Array) -> InFlight<'a> {
        a.served.fetch_add(1, Ordering::Relaxed);
        a.requests.fetch_add(1, Ordering::Relaxed);
        InFlight(&a.requests)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The part of one row (or chunk) a request touches.
struct Piece {
    /// Row (parity levels) or logical chunk (mirror levels).
    unit: u64,
    /// Byte range within the unit's logical data.
    range: Range<u64>,
    /// Where this piece sits in the caller's buffer.
    buf_off: usize,
}

/// Splits [offset, offset+len) into per-unit pieces of `unit_bytes` each.
fn pieces(offset: u64, len: usize, unit_bytes: u64) -> impl Iterator<Item = Piece> {
    let end = offset + len as u64;
    let mut pos = offset;
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let unit = pos / unit_bytes;
        let start = pos - unit * unit_bytes;
        let stop = (end - unit * unit_bytes).min(unit_bytes);
        let p = Piece {
            unit,
            range: start..stop,
            buf_off: (pos - offset) as usize,
        };
        pos = unit * unit_bytes + stop;
        Some(p)
    })
}

/// The caller's new data for one row, addressed by data chunk.
struct NewData<'a> {
    src: &'a [u8],
    row_start: u64,
    chunk: u64,
}

impl<'a> NewData<'a> {
    /// New bytes for range `r` of data chunk `d`.
    fn get(&self, d: usize, r: &Range<u64>) -> &'a [u8] {
        let o = (d as u64 * self.chunk + r.start - self.row_start) as usize;
        &self.src[o..o + (r.end - r.start) as usize]
    }
}

/// Touched byte range inside data chunk `d` of a row, for a row-relative range.
fn chunk_range(range: &Range<u64>, d: usize, chunk: u64) -> Option<Range<u64>> {
    let cs = d as u64 * chunk;
    let lo = range.start.max(cs);
    let hi = range.end.min(cs + chunk);
    (lo < hi).then(|| lo - cs..hi - cs)
}

impl Array {
    fn check_bounds(&self, op: &str, offset: u64, len: usize) -> Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(Error::new(
                ErrorKind::InvalidInput,
                format!("{op} of {len} bytes at offset {offset} goes past the end of the array ({} bytes)", self.size),
            )),
        }
    }

    pub(crate) fn cell_offset(&self, row: u64, within: u64) -> u64 {
        self.data_offset + row * self.layout.chunk() + within
    }

    /// The device holding cell (slot, row) right now: the slot's usable member, or a rebuild
    /// target for rows it already holds.
    pub(crate) fn source(&self, slot: usize, row: u64) -> Option<Arc<Dev>> {
        let s = &self.slots[slot];
        if let Some(d) = s.usable() {
            return Some(d);
        }
        s.target()
            .filter(|t| t.kind == TargetKind::Rebuild && row < t.checkpoint.load(Ordering::Acquire))
            .map(|t| t.dev.clone())
    }

    /// Whether a partial write of a parity row must go through the write-hole journal: when a
    /// member of the row is missing, and also when a rebuild target holds the row but not yet
    /// durably (between its durable and its in-memory checkpoint): after a crash the target
    /// falls back to its durable checkpoint, the row is degraded, and a torn write would leave
    /// the missing chunk unreconstructable.
    pub(crate) fn row_needs_journal(&self, row: u64, parity: usize) -> bool {
        self.row_slots(row, parity).iter().any(|&s| {
            self.source(s, row).is_none()
                || self.slots[s].target().is_some_and(|t| {
                    t.kind == TargetKind::Rebuild
                        && t.durable.load(Ordering::Acquire) <= row
                        && row < t.checkpoint.load(Ordering::Acquire)
                })
        })
    }

    /// The member rows a lock unit occupies: a parity row itself, or the rows holding the
    /// copies of a mirror level's logical chunk.
    pub(crate) fn unit_rows(&self, unit: u64) -> Range<u64> {
        match self.layout.redundancy() {
            Redundancy::Parity { .. } => unit..unit + 1,
            Redundancy::Mirror { copies } => {
                let r0 = self.layout.mirror_cell(unit, 0).1;
                let r1 = self.layout.mirror_cell(unit, copies - 1).1;
                r0.min(r1)..r0.max(r1) + 1
            }
        }
    }

    /// Member rows a logical byte range touches (a superset for mirror levels).
    pub(crate) fn rows_of(&self, offset: u64, len: u64) -> Range<u64> {
        let chunk = self.layout.chunk();
        let last = offset + len.max(1) - 1;
        match self.layout.redundancy() {
            Redundancy::Parity { .. } => {
                let rb = chunk * self.layout.data_per_row() as u64;
                offset / rb..last / rb + 1
            }
            Redundancy::Mirror { copies } => {
                let (c0, c1) = (offset / chunk, last / chunk);
                let r0 = self.layout.mirror_cell(c0, 0).1;
                let r1 = self.layout.mirror_cell(c1, copies - 1).1;
                r0..r1 + 1
            }
        }
    }

    /// The member blocks (4 KiB, numbered as the bad-block list numbers them: row x blocks per
    /// chunk + block within the chunk) of every member of `rows`.
    pub(crate) fn row_blocks(&self, rows: Range<u64>) -> Range<u64> {
        let per_row = self.layout.chunk() / BLOCK;
        rows.start * per_row..rows.end * per_row
    }

    /// The member blocks a write of logical `offset..offset + len` may change, as
    /// [`Array::row_blocks`] numbers them: on a parity level, in each row the columns of its
    /// parity span (the data cells it covers there, and the parity over them; a row covered in
    /// more than one cell counts whole), at most three ranges; on a mirror level its rows.
    pub(crate) fn write_blocks(&self, offset: u64, len: u64) -> Vec<Range<u64>> {
        let rows = self.rows_of(offset, len);
        let Redundancy::Parity { .. } = self.layout.redundancy() else {
            return vec![self.row_blocks(rows)];
        };
        let chunk = self.layout.chunk();
        let rb = chunk * self.layout.data_per_row() as u64;
        let end = offset + len.max(1);
        // The columns of one row's part `a..b` (row-relative bytes).
        let cols = |row: u64, a: u64, b: u64| {
            let base = self.row_blocks(row..row + 1).start;
            if a / chunk == (b - 1) / chunk {
                base + (a % chunk) / BLOCK..base + ((b - 1) % chunk) / BLOCK + 1
            } else {
                self.row_blocks(row..row + 1)
            }
        };
        let (r0, r1) = (rows.start, rows.end - 1);
        let mut out = Vec::with_capacity(3);
        if r0 == r1 {
            out.push(cols(r0, offset - r0 * rb, end - r0 * rb));
            return out;
        }
        out.push(cols(r0, offset - r0 * rb, rb));
        if r1 > r0 + 1 {
            out.push(self.row_blocks(r0 + 1..r1));
        }
        out.push(cols(r1, 0, end - r1 * rb));
        out
    }

    /// Reads `buf.len()` bytes at logical `offset`.
    pub fn read(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let _req = InFlight::new(self);
        let _cfg = self.config.read().unwrap_or_else(|e| e.into_inner());
        self.check_bounds("read", offset, buf.len())?;
        self.check_alive()?;
        if self.csum_geo.is_some()
            && (!offset.is_multiple_of(BLOCK) || !(buf.len() as u64).is_multiple_of(BLOCK))
        {
            // Checksums cover whole 4 KiB blocks: read those and copy out the part asked for.
            let lo = offset / BLOCK * BLOCK;
            let hi = (offset + buf.len() as u64).div_ceil(BLOCK) * BLOCK;
            let mut whole = AlignedBuf::zeroed((hi - lo) as usize);
            drop(_cfg);
            self.read(&mut whole, lo)?;
            let o = (offset - lo) as usize;
            buf.copy_from_slice(&whole[o..o + buf.len()]);
            return Ok(());
        }
        let chunk = self.layout.chunk();
        match self.layout.redundancy() {
            Redundancy::Mirror { copies } => {
                for p in pieces(offset, buf.len(), chunk) {
                    let _g = self.locks.read(self.unit_rows(p.unit));
                    let out =
                        &mut buf[p.buf_off..p.buf_off + (p.range.end - p.range.start) as usize];
                    // Blocks the resync could not decide are listed (badblocks.rs).
                    self.check_bad(p.unit * chunk + p.range.start, out.len() as u64)
                        .and_then(|()| self.read_mirror_chunk(p.unit, copies, out, p.range.start))
                        .map_err(|e| {
                            e.context(format!(
                                "reading array offset {}",
                                offset + p.buf_off as u64
                            ))
                        })?;
                }
            }
            Redundancy::Parity { parity } => {
                let row_bytes = chunk * self.layout.data_per_row() as u64;
                for p in pieces(offset, buf.len(), row_bytes) {
                    let _g = self.locks.read(self.unit_rows(p.unit));
                    let out =
                        &mut buf[p.buf_off..p.buf_off + (p.range.end - p.range.start) as usize];
                    self.read_row(p.unit, parity, &p.range, out).map_err(|e| {
                        e.context(format!(
                            "reading array offset {}",
                            offset + p.buf_off as u64
                        ))
                    })?;
                }
            }
        }
        Ok(())
    }

    fn read_mirror_chunk(&self, c: u64, copies: usize, out: &mut [u8], within: u64) -> Result<()> {
        // Spread reads over the copies; try the next copy on an error or a checksum mismatch
        // until one vouches for itself, then let plan::choose_copy decide among those tried
        // (the first vouching copy, if any, is the one read last and is in `out`).
        let first = (c % copies as u64) as usize;
        let copy = |i: usize| (first + i) % copies;
        // States and, for unchecked copies (entries unknown: a damaged table page), bytes of
        // the copies tried, in the order tried; filled only once the first copy tried does
        // not vouch for itself, so the common read allocates nothing here.
        let mut cells: Vec<Cell> = Vec::new();
        let mut held: Vec<Option<Vec<u8>>> = Vec::new();
        let mut last_err = None;
        for i in 0..copies {
            let (slot, row) = self.layout.mirror_cell(c, copy(i));
            if self.source(slot, row).is_none() {
                cells.push(Cell::Absent);
                held.push(None);
                continue;
            }
            let (cell, bytes) = match self.member_read_verified(slot, out, row, within) {
                Ok(Verdict::Good) => (Cell::Good, None),
                Ok(Verdict::Unknown) => (Cell::Unchecked, Some(out.to_vec())),
                // Held where the region may hold a write whose entries lag (below).
                Ok(Verdict::Bad) => (Cell::Bad, self.row_unverifiable(row).then(|| out.to_vec())),
                Err(e) => {
                    last_err = Some(e);
                    (Cell::Unreadable, None)
                }
            };
            if cell == Cell::Good && cells.is_empty() {
                return Ok(());
            }
            cells.push(cell);
            held.push(bytes);
            if cell == Cell::Good {
                break;
            }
        }
        let at = |i: usize| {
            let (slot, row) = self.layout.mirror_cell(c, copy(i));
            (slot, row, self.cell_offset(row, within))
        };
        match plan::choose_copy(&cells, copies >= 2, |i, j| held[i] == held[j]) {
            CopyChoice::Use { rewrite, .. } => {
                if self.writable {
                    // Copies that failed their checksums or could not be read are rewritten
                    // from the good one (an SSD remaps a bad sector on write), and so are
                    // copies nothing vouched for (which records their entries).
                    for i in rewrite {
                        let (slot, row, _) = at(i);
                        self.repair_write(
                            slot,
                            self.judged_good(out),
                            row,
                            within,
                            WriteKind::Data,
                        )?;
                    }
                }
                Ok(())
            }
            // No copy vouches for itself, none contradicts its checksums, the unchecked ones
            // agree: the best there is, as on an array without checksums.
            CopyChoice::Unverified { copy } => {
                out.copy_from_slice(held[copy].as_ref().expect("an unchecked copy is held"));
                Ok(())
            }
            CopyChoice::Unconfirmed { copy } => {
                let (slot, _, off) = at(copy);
                Err(Error::new(
                    ErrorKind::Checksum,
                    format!(
                        "logical chunk {c}: the one copy left to read, at member offset {off} of {}, has no checksum entry to vouch for it (its table page is damaged) and no other copy confirms it: rot cannot be told from its data",
                        self.slot_name(slot)
                    ),
                ))
            }
            CopyChoice::Disagree { copies } => {
                let (slot, _, off) = at(copies[0]);
                Err(Error::new(
                    ErrorKind::Checksum,
                    format!(
                        "logical chunk {c}: copies differ at member offset {off} of {} and the others, and no checksum entry says which is right (their table pages are damaged; scrub names them)",
                        self.slot_name(slot)
                    ),
                ))
            }
            // A read-only open of an array not stopped cleanly, in a region the bitmap marks:
            // the entries may lag a write that completed before the crash (they reach the
            // table at the next flush, and the pending store is restored only by a writable
            // open). Two or more copies agreeing are that write, as a parity row agreeing with
            // its parity is (rot in one copy would break the agreement); copies that differ
            // fail (an outside attack: `raidctl read` after kill -9 failed on blocks written
            // just before it, in 21 of 35 mirror trials).
            CopyChoice::Corrupt { .. }
                if held.iter().flatten().count() >= 2
                    && cells.iter().zip(&held).all(|(&cell, h)| {
                        matches!(cell, Cell::Absent | Cell::Unreadable) || h.is_some()
                    })
                    && held
                        .iter()
                        .flatten()
                        .all(|h| Some(h) == held.iter().flatten().next()) =>
            {
                out.copy_from_slice(held.iter().flatten().next().expect("two held"));
                Ok(())
            }
            CopyChoice::Corrupt { copies } => {
                let (slot, _, off) = at(copies[0]);
                Err(Error::new(
                    ErrorKind::Checksum,
                    format!(
                        "logical chunk {c}: {} fails its checksum at member offset {off} and no other copy holds good data",
                        self.slot_name(slot)
                    ),
                ))
            }
            CopyChoice::Unavailable => Err(last_err.unwrap_or_else(|| {
                Error::new(
                    ErrorKind::ArrayFailed,
                    format!("logical chunk {c}: no copy is on an available member"),
                )
            })),
        }
    }

    /// Reads row-relative `range` of a row: blocks the stripe cache holds come from it (all of
    /// them without a member read when it holds the whole range).
    fn read_row(&self, row: u64, parity: usize, range: &Range<u64>, out: &mut [u8]) -> Result<()> {
        if self.stripe_overlay(row, range, out, true) {
            return Ok(());
        }
        let row_bytes = self.layout.chunk() * self.layout.data_per_row() as u64;
        self.check_bad(row * row_bytes + range.start, range.end - range.start)?;
        self.read_parity_row(row, parity, range, out)?;
        self.stripe_overlay(row, range, out, false);
        Ok(())
    }

    fn read_parity_row(
        &self,
        row: u64,
        parity: usize,
        range: &Range<u64>,
        out: &mut [u8],
    ) -> Result<()> {
        let chunk = self.layout.chunk();
        let d_count = self.layout.data_per_row();
        // Each touched data chunk's part of `out`, in order (they are consecutive).
        let mut reads: Vec<(usize, &mut [u8], u64)> = Vec::new();
        let mut rest = &mut out[..];
        for d in 0..d_count {
            let Some(cr) = chunk_range(range, d, chunk) else {
                continue;
            };
            let (dst, tail) = rest.split_at_mut((cr.end - cr.start) as usize);
            rest = tail;
            reads.push((d, dst, cr.start));
        }
        // (d, what its read said; None when it was unavailable)
        let outcome = Mutex::new(Vec::new());
        self.on_members(reads, |(d, dst, within)| {
            let slot = self.layout.data_slot(row, d);
            let r = self
                .source(slot, row)
                .map(|_| self.member_read_verified(slot, dst, row, within));
            outcome.lock().expect("outcome lock").push((d, r));
            Ok(())
        })?;
        let mut need: Vec<usize> = Vec::new();
        let mut known: Vec<(usize, Known)> = Vec::new();
        let mut unknown: Vec<usize> = Vec::new();
        for (d, r) in outcome.into_inner().expect("outcome lock") {
            match r {
                Some(Ok(Verdict::Good)) => {}
                Some(Ok(Verdict::Unknown)) => unknown.push(d),
                Some(Ok(Verdict::Bad)) => {
                    need.push(d);
                    known.push((d, Known::Judged));
                }
                Some(Err(_)) => {
                    need.push(d);
                    known.push((d, Known::Unreadable));
                }
                None => need.push(d),
            }
        }
        // Chunks with unknown entries are checked against the rest of the row (a degraded
        // RAID6 row included, with the parity it has left): reconstruct_span rebuilds them
        // from the other members when those vouch for themselves, checks them against the
        // parity left over otherwise, and fails where the parity disagrees. Only a row with
        // no redundancy left keeps them as read.
        need.extend(&unknown);
        need.sort_unstable();
        if need.is_empty() {
            return Ok(());
        }
        // Reconstruct the chunks that could not be read, over the union of their ranges.
        let lo = need
            .iter()
            .map(|&d| chunk_range(range, d, chunk).expect("touched").start)
            .min()
            .expect("non-empty");
        let hi = need
            .iter()
            .map(|&d| chunk_range(range, d, chunk).expect("touched").end)
            .max()
            .expect("non-empty");
        // A failed read is not repeated; a judged chunk is read again over the span (which
        // may be wider than its part of the read), and its failing blocks were counted.
        let bufs = self.reconstruct_span(row, parity, lo..hi, &known, None)?;
        for &d in &need {
            let cr = chunk_range(range, d, chunk).expect("touched");
            let o = (d as u64 * chunk + cr.start - range.start) as usize;
            let src = &bufs[d][(cr.start - lo) as usize..(cr.end - lo) as usize];
            out[o..o + src.len()].copy_from_slice(src);
        }
        Ok(())
    }

    /// Slots of a parity row in buffer order: data 0..D, then P, then Q.
    pub(crate) fn row_slots(&self, row: u64, parity: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.layout.data_per_row())
            .map(|d| self.layout.data_slot(row, d))
            .collect();
        v.push(self.layout.p_slot(row));
        if parity == 2 {
            v.push(self.layout.q_slot(row));
        }
        v
    }

    /// Reads span `within` of every available chunk of a row (data, P, Q) and recovers the
    /// rest with [`plan::recover`]: chunks that are unavailable, unreadable or fail their
    /// checksums are rebuilt from the others, checked, and on a writable array rewritten.
    /// With checksums the states are per 4 KiB block, and each run of block columns whose
    /// cells are in the same states is recovered on its own (two blocks failing in different
    /// chunks of a RAID5 row are both recovered). `known`: row positions the caller already
    /// read over this span, and what it found (a failed read is not repeated; a range read
    /// before is not counted again). A reconstruction that rests on cells nothing could verify
    /// (entries unknown, no redundancy left) fails, unless the caller is a write that takes it
    /// (`unverified`: the cells it replaces whole, and the ones it does not, collected so that
    /// it lists them). Returns buffers in row order.
    fn reconstruct_span(
        &self,
        row: u64,
        parity: usize,
        within: Range<u64>,
        known: &[(usize, Known)],
        mut unverified: Option<&mut Unverified>,
    ) -> Result<Vec<AlignedBuf>> {
        let slots = self.row_slots(row, parity);
        let len = (within.end - within.start) as usize;
        let mut bufs: Vec<AlignedBuf> = slots.iter().map(|_| AlignedBuf::zeroed(len)).collect();
        // Block columns: 4 KiB each with checksums (reads are whole blocks then), else one.
        let per_block = self.csum_geo.is_some()
            && within.start.is_multiple_of(BLOCK)
            && (len as u64).is_multiple_of(BLOCK);
        let cols = if per_block { len / BLOCK as usize } else { 1 };
        let mut states: Vec<Vec<Cell>> = Vec::with_capacity(slots.len());
        for (i, &slot) in slots.iter().enumerate() {
            let seen = known.iter().find(|(k, _)| *k == i).map(|(_, s)| *s);
            let whole = |c: Cell| vec![c; cols];
            let st = if self.source(slot, row).is_none() {
                whole(Cell::Absent)
            } else if seen == Some(Known::Unreadable) {
                // Not read again (an unreadable sector would count a second error): no bytes
                // to go by, as for a read that failed.
                whole(Cell::Unreadable)
            } else {
                let count = seen.is_none();
                match self.member_read_blocks(slot, &mut bufs[i], row, within.start, count) {
                    Err(_) => whole(Cell::Unreadable),
                    Ok((bad, unknown)) => {
                        // (Both empty without per-block checksums.)
                        let mut st = whole(Cell::Good);
                        for u in unknown {
                            st[u.min(cols - 1)] = Cell::Unchecked;
                        }
                        for b in bad {
                            st[b.min(cols - 1)] = Cell::Bad;
                        }
                        st
                    }
                }
            };
            states.push(st);
        }
        let off = self.cell_offset(row, within.start);
        let col_bytes = len / cols;
        let name = |i: usize| format!("{} at member offset {off}", self.slot_name(slots[i]));
        // Runs of columns whose cells are in the same states: one recovery each.
        let mut c0 = 0;
        let mut rewrites: Vec<(usize, Range<usize>)> = Vec::new();
        while c0 < cols {
            let cells: Vec<Cell> = states.iter().map(|st| st[c0]).collect();
            let mut c1 = c0 + 1;
            while c1 < cols && states.iter().all(|st| st[c1] == st[c0]) {
                c1 += 1;
            }
            let run = c0 * col_bytes..c1 * col_bytes;
            let outcome = {
                let mut refs: Vec<&mut [u8]> =
                    bufs.iter_mut().map(|b| &mut b[run.clone()]).collect();
                plan::recover(
                    self.kernel,
                    &mut refs,
                    &cells,
                    parity,
                    self.csum_geo.is_some(),
                    |i, bytes| {
                        self.source(slots[i], row)
                            .map(|d| self.csum_mismatches(&d, row, off + run.start as u64, bytes))
                            .unwrap_or_default()
                    },
                )
            };
            match outcome {
                Recovered::Intact => {}
                // No redundancy left to check cells whose entries are unknown: what they hold,
                // and what is rebuilt from them, may be rot (simulator seed 1322: RAID6 with two
                // members missing read a missing block rebuilt from a rotten one). An error,
                // never a guess; they read again once redundancy can check them.
                Recovered::Rebuilt {
                    unchecked,
                    rebuilt,
                    rewrite,
                    ..
                } if !unchecked.is_empty() && unverified.is_some() => {
                    // A write: what it leaves standing on the guess is listed by the caller,
                    // which then rewrites the cells replaced here as the placeholders its new
                    // parity assumes.
                    let u = unverified.as_deref_mut().expect("checked");
                    for i in unchecked.into_iter().chain(rebuilt) {
                        if !u.moot.contains(&i) {
                            u.found.push((i, run.clone()));
                        }
                    }
                    u.placeholders
                        .extend(rewrite.into_iter().map(|i| (i, run.clone())));
                }
                Recovered::Rebuilt { unchecked, .. } if !unchecked.is_empty() => {
                    self.check_alive()?;
                    bail!(
                        Checksum,
                        "row {row}: no redundancy is left to check {}, whose checksum entries are unknown (damaged table pages): the data there cannot be verified",
                        unchecked
                            .iter()
                            .map(|&i| name(i))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
                Recovered::Rebuilt { rewrite, .. } => {
                    rewrites.extend(rewrite.into_iter().map(|i| (i, run.clone())));
                }
                Recovered::Lost { .. }
                    if self.row_unverifiable(row)
                        && cells.iter().all(|c| matches!(c, Cell::Good | Cell::Bad))
                        && self.consistent_as_read(&bufs, run.clone(), parity) =>
                {
                    // A read-only open of an array not stopped cleanly, in a region the bitmap
                    // marks: the cells' entries may lag a write that completed before the crash
                    // (the resync records them at the next writable open). A row that agrees
                    // with its parity as read is that write (rot in a cell would break the
                    // agreement); anything else fails rather than guess.
                }
                // The same for a write into a row with more cells lost than its parity covers,
                // some of them only unverifiable (a member gone and another's entries unknown or
                // failing): none of them could be read before the write either. Refusing it
                // left the acknowledged write of a stripe-cache row unwritable, and every flush
                // and the clean stop failing for good (simulator seeds 19000863, 19006384).
                Recovered::Lost { damaged: true, .. }
                    if unverified.is_some() && self.check_alive().is_ok() =>
                {
                    let u = unverified.as_deref_mut().expect("checked");
                    u.take_unverifiable(&cells, &run);
                }
                Recovered::Lost { lost, damaged } => {
                    self.check_alive()?;
                    if damaged {
                        bail!(
                            Checksum,
                            "row {row}: {} chunks fail their checksums, are unreadable or unavailable at member offset {}, parity covers {parity} ({})",
                            lost.len(),
                            off + run.start as u64,
                            lost.iter()
                                .filter(|&&i| cells[i] != Cell::Absent)
                                .map(|&i| name(i))
                                .collect::<Vec<_>>()
                                .join(", ")
                        );
                    }
                    bail!(
                        ArrayFailed,
                        "row {row}: {} chunks unavailable, parity covers {parity}",
                        lost.len()
                    )
                }
                // A write into a row whose parity disagrees with cells nothing verifies, and
                // which of them is wrong cannot be told: none of those cells can be read again
                // whatever the write does (reads fail there as here). Refusing the write left
                // the client's data unwritable for good (simulator seed 9001270 and its class);
                // instead what nothing verifies goes the way of a write resting on unverified
                // data: listed, durably before the write, unless the write replaces it whole,
                // present cells that were rebuilt rewritten as the placeholders its new parity
                // assumes. Cells that verify keep their data and stay recoverable.
                Recovered::Inconsistent { .. } if unverified.is_some() => {
                    let u = unverified.as_deref_mut().expect("checked");
                    u.take_unverifiable(&cells, &run);
                }
                Recovered::Inconsistent { unchecked } => bail!(
                    Checksum,
                    "row {row}: the parity disagrees at member offset {} with chunks whose checksum entries are unknown (damaged table pages), and which is wrong cannot be told ({})",
                    off + run.start as u64,
                    unchecked
                        .iter()
                        .map(|&i| name(i))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Recovered::Contradicted { cell, block } => bail!(
                    Checksum,
                    "row {row}: {} fails its checksum at member offset {} and the reconstruction from the other members does not match it either",
                    self.slot_name(slots[cell]),
                    off + run.start as u64 + (block as u64) * BLOCK
                ),
            }
            c0 = c1;
        }
        if self.writable {
            let d_count = slots.len() - parity;
            for (i, run) in rewrites {
                self.repair_write(
                    slots[i],
                    self.judged_good(&bufs[i][run.clone()]),
                    row,
                    within.start + run.start as u64,
                    WriteKind::of_cell(i, d_count),
                )?;
            }
        }
        Ok(bufs)
    }

    /// Reads rows `rows` of `slot`'s member into `buf` (whole chunks), where the member
    /// cannot be read rebuilding the cells from redundancy, a row at a time, and rewriting
    /// them on the member (which remaps a bad sector on an SSD). The caller holds the rows'
    /// lock. Used by jobs that read a member's rows in bulk (replace, scrub --repair).
    pub(crate) fn read_rows_or_rebuild(
        &self,
        slot: usize,
        buf: &mut [u8],
        rows: Range<u64>,
    ) -> Result<()> {
        if self.member_read(slot, buf, rows.start, 0).is_ok() {
            return Ok(());
        }
        let c = self.layout.chunk();
        for (k, row) in rows.enumerate() {
            let cell = &mut buf[k * c as usize..(k + 1) * c as usize];
            if self.member_read(slot, cell, row, 0).is_ok() {
                continue;
            }
            match self.layout.redundancy() {
                Redundancy::Parity { parity } => {
                    self.rebuild_cell(slot, row, parity, Known::Unreadable, cell)?
                }
                Redundancy::Mirror { copies } => {
                    let Some((chunk, _)) = self.layout.mirror_chunk_at(self.data_rows, slot, row)
                    else {
                        // A cell no chunk uses: zeros, rewritten too (the unreadable sector is
                        // remapped, and the next plain read of these rows succeeds).
                        cell.fill(0);
                        if self.writable {
                            self.repair_write(
                                slot,
                                Verified::zeros(cell),
                                row,
                                0,
                                WriteKind::Data,
                            )?;
                        }
                        continue;
                    };
                    self.read_mirror_chunk(chunk, copies, cell, 0)?;
                    if self.writable {
                        self.repair_write(slot, self.judged_good(cell), row, 0, WriteKind::Data)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Rebuilds `slot`'s whole cell of parity row `row` into `cell` from the rest of the row
    /// (`reconstruct_span`, which checks and rewrites what it rebuilds), given what the caller
    /// already found reading it.
    fn rebuild_cell(
        &self,
        slot: usize,
        row: u64,
        parity: usize,
        known: Known,
        cell: &mut [u8],
    ) -> Result<()> {
        let i = self
            .row_slots(row, parity)
            .iter()
            .position(|&s| s == slot)
            .expect("every slot is in every row");
        let bufs = self.reconstruct_span(row, parity, 0..cell.len() as u64, &[(i, known)], None)?;
        cell.copy_from_slice(&bufs[i]);
        Ok(())
    }

    /// Reads rows `rows` of `slot`'s member into `buf` for a copy elsewhere with fresh checksum
    /// entries (replace), so that nothing in `buf` is vouched for unless it was verified: every
    /// 4 KiB block read from the member is checked against its checksum entry, and a cell with
    /// blocks that fail it (or whose entries are unknown) is recovered from the rest of its row
    /// or its other copies, which vouch for themselves, and rewritten on the member.
    ///
    /// A block nothing can verify or recover (the row disagrees with its parity where entries
    /// are unknown, mirror copies differ with no entry to decide, a reconstruction contradicts
    /// the entry) is left as it is: its bytes as read, and in the returned list with the entry
    /// the old member has for it, which the copy must keep (so it reads on the new member
    /// exactly as on the old: an error, or checked by redundancy; never vouched for). A block
    /// that cannot be read at all and that nothing rebuilds is returned with no entry: lost,
    /// to be listed bad on the copy. Fails only when the array or the slot's member fails.
    /// The caller holds the rows' lock. With a `budget`, rows after the one that used it up are
    /// not read; the second value is the end of the rows read (`rows.end` without a budget).
    pub(crate) fn read_rows_verified(
        &self,
        slot: usize,
        buf: &mut [u8],
        rows: Range<u64>,
        budget: Option<std::time::Duration>,
    ) -> Result<(Vec<KeptAsIs>, u64)> {
        let c = self.layout.chunk() as usize;
        let mut kept = Vec::new();
        let began = crate::clock::Instant::now();
        let end = rows.end;
        let whole = self.member_read(slot, buf, rows.start, 0).is_ok();
        for (k, row) in rows.enumerate() {
            // Rows that take the slow path hold every request into the batch: with a budget,
            // the read stops after the row that used it up (the caller takes the rows read).
            if k > 0 && budget.is_some_and(|b| began.elapsed() > b) {
                return Ok((kept, row));
            }
            let cell = &mut buf[k * c..(k + 1) * c];
            if !whole && self.member_read(slot, cell, row, 0).is_err() {
                self.slot_still_usable(slot)?;
                // Unreadable: rebuilt from redundancy (and rewritten, which remaps a bad
                // sector), block by block where the whole cell cannot be.
                if self
                    .recover_cell(slot, row, cell, Known::Unreadable)
                    .is_err()
                {
                    let blocks: Vec<usize> = (0..c / BLOCK as usize).collect();
                    self.recover_blocks(slot, row, cell, &blocks, k * c, &mut kept)?;
                }
                continue;
            }
            if self.csum_geo.is_none() {
                continue;
            }
            let (bad, unknown) = self.judge_blocks(slot, cell, row, 0, true);
            if bad.is_empty() && unknown.is_empty() {
                continue;
            }
            // The failing blocks were counted: the recovery reads the cell again without
            // counting them, rebuilds them and rewrites them. (A recovery that fails may have
            // left anything in the cell: the blocks as read are put back first.)
            let as_read = cell.to_vec();
            if self.recover_cell(slot, row, cell, Known::Judged).is_ok() {
                // A mirror read stops at the first good copy without trying this one: this
                // slot's failing blocks are rewritten here. (Only unknown entries: the read's
                // own choice of what to rewrite.)
                if self.writable
                    && !bad.is_empty()
                    && matches!(self.layout.redundancy(), Redundancy::Mirror { .. })
                {
                    self.repair_write(slot, self.judged_good(cell), row, 0, WriteKind::Data)?;
                }
                continue;
            }
            self.check_alive()?;
            cell.copy_from_slice(&as_read);
            let mut blocks = [bad, unknown].concat();
            blocks.sort_unstable();
            blocks.dedup();
            self.recover_blocks(slot, row, cell, &blocks, k * c, &mut kept)?;
        }
        Ok((kept, end))
    }

    /// Recovers `slot`'s whole cell of `row` from the rest of its row or its other copies
    /// (checked by the recovery, and rewritten on the member where it differed).
    fn recover_cell(&self, slot: usize, row: u64, cell: &mut [u8], known: Known) -> Result<()> {
        match self.layout.redundancy() {
            Redundancy::Parity { parity } => self.rebuild_cell(slot, row, parity, known, cell),
            Redundancy::Mirror { copies } => {
                match self.layout.mirror_chunk_at(self.data_rows, slot, row) {
                    Some((chunk, _)) => self.read_mirror_chunk(chunk, copies, cell, 0)?,
                    // A cell no chunk uses: zeros.
                    None => cell.fill(0),
                }
                if known == Known::Unreadable && self.writable {
                    self.repair_write(slot, self.judged_good(cell), row, 0, WriteKind::Data)?;
                }
                Ok(())
            }
        }
    }

    /// [`Array::read_rows_verified`] for the 4 KiB `blocks` of a cell its recovery could not
    /// give whole: each is recovered on its own where it can be, else kept as read (with its
    /// old entry) or, unreadable, returned as lost. `at`: the cell's offset in the caller's
    /// buffer.
    fn recover_blocks(
        &self,
        slot: usize,
        row: u64,
        cell: &mut [u8],
        blocks: &[usize],
        at: usize,
        kept: &mut Vec<KeptAsIs>,
    ) -> Result<()> {
        let b = BLOCK as usize;
        for &i in blocks {
            let within = (i * b) as u64;
            let blk = &mut cell[i * b..(i + 1) * b];
            let recovered = match self.layout.redundancy() {
                Redundancy::Parity { parity } => {
                    let pos = self
                        .row_slots(row, parity)
                        .iter()
                        .position(|&s| s == slot)
                        .expect("every slot is in every row");
                    self.reconstruct_span(
                        row,
                        parity,
                        within..within + BLOCK,
                        &[(pos, Known::Judged)],
                        None,
                    )
                    .map(|bufs| blk.copy_from_slice(&bufs[pos]))
                }
                Redundancy::Mirror { copies } => {
                    match self.layout.mirror_chunk_at(self.data_rows, slot, row) {
                        Some((chunk, _)) => self.read_mirror_chunk(chunk, copies, blk, within),
                        None => {
                            blk.fill(0);
                            Ok(())
                        }
                    }
                }
            };
            if recovered.is_ok() {
                continue;
            }
            self.check_alive()?;
            self.slot_still_usable(slot)?;
            let entry = match self.member_read(slot, blk, row, within) {
                Ok(()) => Some(self.old_entry(slot, row, within)),
                Err(_) => {
                    self.slot_still_usable(slot)?;
                    // Lost, and listed on the copy: it holds the placeholder its row's parity
                    // assumes, as a rebuild's target does, never zeros (reads count listed
                    // blocks as consistent with their row: zeros there made a read rebuild
                    // another block wrong and write it, simulator seed 13002991).
                    self.placeholder_block(slot, row, within, blk);
                    None
                }
            };
            kept.push(KeptAsIs {
                at: at + i * b,
                entry,
            });
        }
        Ok(())
    }

    /// The bytes block (`row`, `within`) of `slot` must hold for its row's P to agree: the
    /// XOR of the row's other data blocks and P as they lie, unverified (a placeholder for a
    /// block that is listed, never read as data). Zeros on mirror levels, for Q, and where
    /// another block cannot be read.
    fn placeholder_block(&self, slot: usize, row: u64, within: u64, blk: &mut [u8]) {
        blk.fill(0);
        let Redundancy::Parity { parity } = self.layout.redundancy() else {
            return;
        };
        let slots = self.row_slots(row, parity);
        let d = slots.len() - parity;
        let Some(me) = slots.iter().position(|&s| s == slot) else {
            return;
        };
        if me > d {
            return;
        }
        // Aligned: members may be opened O_DIRECT.
        let mut other = crate::buf::AlignedBuf::zeroed(blk.len());
        for (i, &s) in slots.iter().enumerate().take(d + 1) {
            if i == me {
                continue;
            }
            if self.member_read(s, &mut other, row, within).is_err() {
                blk.fill(0);
                return;
            }
            blk.iter_mut().zip(other.iter()).for_each(|(x, y)| *x ^= y);
        }
    }

    /// An error when `slot`'s member was failed (a read error past the limit, a device gone).
    fn slot_still_usable(&self, slot: usize) -> Result<()> {
        if self.slot_usable(slot) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Io,
                format!("{} failed", self.slot_name(slot)),
            ))
        }
    }

    /// The checksum entry `slot`'s device has for the block at (`row`, `within`).
    pub(crate) fn old_entry(&self, slot: usize, row: u64, within: u64) -> Expect {
        self.source(slot, row)
            .and_then(|d| {
                let s = self.csum_of(&d)?;
                let off = self.cell_offset(row, within);
                s.expected(d.member.as_ref(), s.block_of(off), 1).pop()
            })
            .unwrap_or(Expect::Unknown)
    }

    /// Writes `data` at logical `offset`.
    pub fn write(&self, data: &[u8], offset: u64) -> Result<()> {
        let _req = InFlight::new(self);
        let _cfg = self.config.read().unwrap_or_else(|e| e.into_inner());
        if !self.writable {
            bail!(InvalidInput, "array is open read-only");
        }
        self.check_bounds("write", offset, data.len())?;
        self.check_alive()?;
        if data.is_empty() {
            return Ok(());
        }
        self.mark_dirty()?;
        let len = data.len() as u64;
        let hold = self.begin_write(self.rows_of(offset, len), self.write_blocks(offset, len))?;
        let chunk = self.layout.chunk();
        match self.layout.redundancy() {
            Redundancy::Mirror { copies } => {
                for p in pieces(offset, data.len(), chunk) {
                    let _g = self.locks.write(self.unit_rows(p.unit));
                    let src = &data[p.buf_off..p.buf_off + (p.range.end - p.range.start) as usize];
                    // The rest of a partly written block is read first: a listed block's rest is
                    // not known, so such a write is refused and changes nothing (an outside
                    // attack: it went in and then read as an error).
                    let widened = self.widen(src, &p.range, |b, w| {
                        self.check_bad(p.unit * chunk + w.start, w.end - w.start)
                            .and_then(|()| self.read_mirror_chunk(p.unit, copies, b, w.start))
                    })?;
                    let (src, range) = match &widened {
                        Some((b, r)) => (&b[..], r.clone()),
                        None => (src, p.range.clone()),
                    };
                    let cells: Vec<(usize, u64, &[u8])> = (0..copies)
                        .map(|k| {
                            let (slot, row) = self.layout.mirror_cell(p.unit, k);
                            (slot, row, src)
                        })
                        .collect();
                    self.on_members(cells, |(slot, row, src)| {
                        self.member_write(
                            slot,
                            Verified::client(src),
                            row,
                            range.start,
                            WriteKind::Data,
                        )
                    })?;
                    self.count_row_write(1, p.range.end - p.range.start == chunk);
                    self.check_alive().map_err(|e| {
                        e.context(format!(
                            "writing array offset {}",
                            offset + p.buf_off as u64
                        ))
                    })?;
                }
            }
            Redundancy::Parity { parity } => {
                let row_bytes = chunk * self.layout.data_per_row() as u64;
                for p in pieces(offset, data.len(), row_bytes) {
                    let _g = self.locks.write(self.unit_rows(p.unit));
                    let src = &data[p.buf_off..p.buf_off + (p.range.end - p.range.start) as usize];
                    let widened =
                        self.widen(src, &p.range, |b, w| self.read_row(p.unit, parity, w, b))?;
                    let (src, range) = match &widened {
                        Some((b, r)) => (&b[..], r.clone()),
                        None => (src, p.range.clone()),
                    };
                    let held = self.stripe_write(p.unit, parity, &range, src);
                    match held {
                        Ok(true) => Ok(()),
                        Ok(false) => self.write_parity_row(p.unit, parity, &range, src, &hold),
                        Err(e) => Err(e),
                    }
                    .map_err(|e| {
                        e.context(format!(
                            "writing array offset {}",
                            offset + p.buf_off as u64
                        ))
                    })?;
                }
                self.stripe_evict()?;
            }
        }
        self.rewrote(offset, data.len() as u64);
        self.maybe_persist()
    }

    /// With checksums, a write must cover whole 4 KiB blocks: for a piece that does not, reads
    /// the blocks it touches (`read(buf, widened range)`, under the caller's row lock) and
    /// merges the new bytes in. None when the piece is already whole blocks.
    fn widen(
        &self,
        src: &[u8],
        range: &Range<u64>,
        mut read: impl FnMut(&mut [u8], &Range<u64>) -> Result<()>,
    ) -> Result<Option<(AlignedBuf, Range<u64>)>> {
        if self.csum_geo.is_none()
            || (range.start.is_multiple_of(BLOCK) && range.end.is_multiple_of(BLOCK))
        {
            return Ok(None);
        }
        let w = range.start / BLOCK * BLOCK..range.end.div_ceil(BLOCK) * BLOCK;
        let mut b = AlignedBuf::zeroed((w.end - w.start) as usize);
        // Only the partly written first and last blocks are read: the blocks between are
        // replaced whole (read, a listed one among them refused a write that restores it:
        // simulator seed 38002895).
        let head = w.start..w.start + BLOCK;
        let tail = w.end - BLOCK..w.end;
        if !range.start.is_multiple_of(BLOCK) {
            read(&mut b[..BLOCK as usize], &head)?;
        }
        if !range.end.is_multiple_of(BLOCK) && (tail != head || range.start.is_multiple_of(BLOCK)) {
            let n = b.len();
            read(&mut b[n - BLOCK as usize..], &tail)?;
        }
        let o = (range.start - w.start) as usize;
        b[o..o + src.len()].copy_from_slice(src);
        Ok(Some((b, w)))
    }

    /// Discards a range: every whole row (parity levels) or whole chunk (mirror levels) inside
    /// it is unmapped on all of its members at once, so data and parity all read back as
    /// zeros and stay consistent. Partial rows and chunks are left as they are, as are rows on
    /// devices that cannot unmap with guaranteed zeros, and degraded rows. Returns the bytes
    /// discarded.
    pub fn trim(&self, offset: u64, len: u64) -> Result<u64> {
        self.served.fetch_add(1, Ordering::Relaxed);
        if !self.writable {
            bail!(InvalidInput, "array is open read-only");
        }
        self.check_bounds("trim", offset, len as usize)?;
        let _cfg = self.config.read().unwrap_or_else(|e| e.into_inner());
        let chunk = self.layout.chunk();
        let unit_bytes = match self.layout.redundancy() {
            Redundancy::Mirror { .. } => chunk,
            Redundancy::Parity { .. } => chunk * self.layout.data_per_row() as u64,
        };
        let first = offset.div_ceil(unit_bytes);
        let end = (offset + len) / unit_bytes;
        if first >= end {
            return Ok(0);
        }
        self.mark_dirty()?;
        let rows = self.rows_of(first * unit_bytes, (end - first) * unit_bytes);
        let _inflight = self.begin_trim(rows.clone())?;
        // Regions this trim may return to empty (data map), and the runs of units it zeroed.
        let begun = self.bitmap_trim_begin(&rows);
        let mut zeroed: Vec<Range<u64>> = Vec::new();
        let mut done = 0;
        for unit in first..end {
            let _g = self.locks.write(self.unit_rows(unit));
            // Held writes go first: the unit is left as it is if it cannot be unmapped.
            self.stripe_take(unit)?;
            let cells = self.unit_cells(unit);
            // Only when every cell's device is present: a missing member would keep old data.
            let devs: Option<Vec<(Arc<Dev>, u64)>> = cells
                .iter()
                .map(|&(s, r)| self.source(s, r).map(|d| (d, r)))
                .collect();
            let Some(mut devs) = devs else { continue };
            // A replace target holding these rows already gets the unmap too, or it would keep
            // the old data and hand it back once it takes over the slot.
            for &(s, r) in &cells {
                if let Some(t) = self.slots[s].target().filter(|t| {
                    t.kind != TargetKind::Rebuild && r < t.checkpoint.load(Ordering::Acquire)
                }) {
                    devs.push((t.dev.clone(), r));
                }
            }
            let unmapped = devs
                .iter()
                .take_while(|(d, r)| {
                    let off = self.cell_offset(*r, 0);
                    self.csum_note_zero(d, off, chunk);
                    let ok = d.member.unmap_zeroes(off, chunk).is_ok();
                    if ok {
                        self.csum_record_zero(d, off, chunk, false);
                    }
                    ok
                })
                .count();
            if unmapped == 0 {
                continue; // the device cannot unmap: leave the unit as it is
            }
            if unmapped < devs.len() {
                // Some cells are zero now and others not: restore consistency by writing zeros.
                let zeros = AlignedBuf::zeroed(chunk as usize);
                for &(s, r) in &cells {
                    self.member_write(s, Verified::zeros(&zeros), r, 0, WriteKind::Data)?;
                }
            }
            if matches!(self.layout.redundancy(), Redundancy::Parity { .. }) {
                self.rewrote_rows(unit..unit + 1);
            }
            done += unit_bytes;
            match zeroed.last_mut() {
                Some(z) if z.end == unit => z.end = unit + 1,
                _ => zeroed.push(unit..unit + 1),
            }
        }
        if !begun.is_empty() {
            let zeroed_rows: Vec<Range<u64>> = zeroed.iter().map(|u| self.rows_zeroed(u)).collect();
            self.bitmap_trimmed(&begun, &zeroed_rows);
        }
        Ok(done)
    }

    /// The member rows every cell of which belongs to the units `units` (a mirror chunk may
    /// share its first and last rows with the chunks beside it).
    fn rows_zeroed(&self, units: &Range<u64>) -> Range<u64> {
        let mut rows = self.unit_rows(units.start).start..self.unit_rows(units.end - 1).end;
        if units.start > 0 {
            rows.start = rows.start.max(self.unit_rows(units.start - 1).end);
        }
        let total = match self.layout.redundancy() {
            Redundancy::Parity { .. } => self.data_rows,
            Redundancy::Mirror { .. } => self.layout.logical_chunks(self.data_rows),
        };
        if units.end < total {
            rows.end = rows.end.min(self.unit_rows(units.end).start);
        }
        rows.start..rows.end.max(rows.start)
    }

    /// Every (slot, row) cell of a row (parity levels) or of a logical chunk (mirror levels).
    fn unit_cells(&self, unit: u64) -> Vec<(usize, u64)> {
        match self.layout.redundancy() {
            Redundancy::Mirror { copies } => (0..copies)
                .map(|k| self.layout.mirror_cell(unit, k))
                .collect(),
            Redundancy::Parity { parity } => self
                .row_slots(unit, parity)
                .into_iter()
                .map(|s| (s, unit))
                .collect(),
        }
    }

    /// Writes row-relative `range` of a row (the caller holds the row's lock). A write that
    /// crosses a chunk boundary touches the end of one chunk and the start of the next: their
    /// parity byte ranges are disjoint, so it is written as two pieces, each updating only its
    /// own parity range; as one piece it rewrote the parity of everything in between (an 8 KiB
    /// write straddling two 64 KiB chunks wrote 64 KiB of parity). Each piece is a write of its
    /// own blocks, as a device may tear any multi-block write.
    pub(super) fn write_parity_row(
        &self,
        row: u64,
        parity: usize,
        range: &Range<u64>,
        src: &[u8],
        hold: &super::WriteHold,
    ) -> Result<()> {
        let chunk = self.layout.chunk();
        let (first, last) = (range.start / chunk, (range.end - 1) / chunk);
        if last == first + 1 && range.end - last * chunk < range.start % chunk {
            let mid = last * chunk;
            self.count_row_write(2, false);
            let (a, b) = src.split_at((mid - range.start) as usize);
            self.write_parity_span(row, parity, &(range.start..mid), a, false, hold)?;
            return self.write_parity_span(row, parity, &(mid..range.end), b, false, hold);
        }
        self.write_parity_span(row, parity, range, src, true, hold)
    }

    /// As [`Array::write_parity_row`], for a range whose parity is updated as one span;
    /// `count`: add it to the write mix (the caller did when it split the write).
    fn write_parity_span(
        &self,
        row: u64,
        parity: usize,
        range: &Range<u64>,
        src: &[u8],
        count: bool,
        hold: &super::WriteHold,
    ) -> Result<()> {
        let chunk = self.layout.chunk();
        let d_count = self.layout.data_per_row();
        let slots = self.row_slots(row, parity);
        let shape = RowShape {
            data: d_count,
            parity,
            chunk,
        };
        let first = plan::plan_write(shape, range, false);
        let touched = &first.touched;
        let span = first.span.clone();
        let new = NewData {
            src,
            row_start: range.start,
            chunk,
        };
        let new_of = |d: usize, r: &Range<u64>| new.get(d, r);
        let span_len = (span.end - span.start) as usize;
        let full_row = first.method == Method::FullRow;
        if count {
            self.count_row_write(touched.len(), full_row);
        }

        // Set when a read-modify-write or reconstruct-write read a block failing its checksum:
        // the next attempt reconstructs (and repairs) the span first. From the start in a row
        // an unclean stop may have torn and no resync has gone over yet: its parity may not
        // match data whose every block matches its entry, and adding a change into it would
        // carry the tear on under new entries (`Array::unsynced`).
        let mut verify_all = !full_row && self.row_unsynced(row);
        // Cells a read-modify-write or reconstruct-write read found failing (for the
        // reconstruction that follows: not read or counted again).
        let mut found: Vec<(usize, Known)> = Vec::new();
        for _attempt in 0..=parity + 1 {
            let mut journaled = false;
            let mut journal_guard = None;
            let degraded = self.row_needs_journal(row, parity);
            let reconstruct;
            let plan = if degraded || verify_all {
                reconstruct = plan::plan_write(shape, range, true);
                &reconstruct
            } else {
                &first
            };
            let par: Vec<AlignedBuf> = if plan.method == Method::FullRow {
                // Full row: parity straight from the new data, no reads.
                let data: Vec<&[u8]> = (0..d_count).map(|d| new_of(d, &(0..chunk))).collect();
                let mut p = AlignedBuf::zeroed(chunk as usize);
                let mut q = AlignedBuf::zeroed(if parity == 2 { chunk as usize } else { 0 });
                (self.kernel.gen_pq)(&data, &mut p, (parity == 2).then_some(&mut q[..]));
                if parity == 2 {
                    vec![p, q]
                } else {
                    vec![p]
                }
            } else if plan.method == Method::Reconstruct {
                // Reconstruct whatever is missing over the span, merge, and regenerate parity.
                // A cell the failed attempt could not read is taken as unreadable over the
                // span; one it judged is read again over the span, its failures not counted
                // again.
                // What the write replaces whole: the parity, and data cells it covers over
                // the whole span (an unchecked cell's bytes matter only where they reach the
                // new parity).
                let mut unverified = Unverified {
                    moot: touched
                        .iter()
                        .filter(|(_, r)| *r == span)
                        .map(|(d, _)| *d)
                        .chain(d_count..d_count + parity)
                        .collect(),
                    found: Vec::new(),
                    placeholders: Vec::new(),
                };
                let mut bufs = match self.reconstruct_span(
                    row,
                    parity,
                    span.clone(),
                    &found,
                    Some(&mut unverified),
                ) {
                    Ok(b) => b,
                    Err(e) if e.kind() == ErrorKind::Checksum => return Err(e),
                    Err(_) => {
                        self.check_alive()?;
                        continue;
                    }
                };
                for (d, r) in touched {
                    let o = (r.start - span.start) as usize;
                    bufs[*d][o..o + (r.end - r.start) as usize].copy_from_slice(new_of(*d, r));
                }
                // Data the new parity takes as it was read though nothing verified it (entries
                // unknown, no redundancy left): parity made from it would vouch for it, rot
                // included (simulator seed 1322). Listed, durably before the write, so reads of
                // it fail until it is written whole; the client's data goes in.
                // Never the write's own whole blocks: its data goes in there, verified (through
                // the stripe cache this runs at the destage, after the write's end took its
                // blocks off the list: listed here, the client's data read as an error,
                // simulator seed 11003132).
                let mut listed = false;
                let mut listed_blocks = Vec::new();
                let own = |i: usize, b: u64| {
                    touched
                        .iter()
                        .any(|(d, r)| *d == i && r.start <= b && b + BLOCK <= r.end)
                };
                for (i, run) in unverified.found.iter().filter(|(i, _)| *i < d_count) {
                    let from = span.start + run.start as u64;
                    for b in (from / BLOCK..(span.start + run.end as u64).div_ceil(BLOCK))
                        .map(|b| b * BLOCK)
                        .filter(|&b| !own(*i, b))
                    {
                        listed |= self.mark_lost_block(slots[*i], row * chunk + b);
                        listed_blocks.push((*i, b));
                    }
                }
                if listed {
                    self.event(
                        "bad-blocks",
                        None,
                        format!(
                            "row {row}: a write rests on data whose checksum entries are unknown (damaged table pages) with no redundancy left to check it; listed as lost"
                        ),
                    );
                    self.persist()?;
                }
                for (i, run) in &unverified.placeholders {
                    if *i < d_count {
                        self.repair_write(
                            slots[*i],
                            Verified::unchecked(&bufs[*i][run.clone()]),
                            row,
                            span.start + run.start as u64,
                            WriteKind::Data,
                        )?;
                    }
                }
                // The list holding them durably, each listed block's entry is made to match
                // the placeholder the new parity assumes, where the span holds all of it (an
                // outside attack: a listed block whose entry stayed unknown rotted, and a
                // neighbour rebuilt from it read back wrong). Elsewhere its entry stays as it
                // was, failing or unknown: reconstructions then count it missing.
                for (i, b) in listed_blocks {
                    if b < span.start
                        || b + BLOCK > span.end
                        || !self.is_lost_block(slots[i], row * chunk + b)
                    {
                        continue;
                    }
                    if let Some(dev) = self.source(slots[i], row) {
                        let o = (b - span.start) as usize;
                        self.csum_record(
                            &dev,
                            self.cell_offset(row, b),
                            Verified::listed(&bufs[i][o..o + BLOCK as usize]),
                        );
                    }
                }
                let (data, pq) = bufs.split_at_mut(d_count);
                let data: Vec<&[u8]> = data.iter().map(|b| &b[..]).collect();
                let (p, q) = pq.split_at_mut(1);
                (self.kernel.gen_pq)(&data, &mut p[0], q.first_mut().map(|b| &mut b[..]));
                // Close the write hole: log the final cells before touching any of them.
                if degraded {
                    let cells: Vec<(usize, Vec<u8>)> = touched
                        .iter()
                        .map(|(d, _)| *d)
                        .chain(d_count..d_count + parity)
                        .filter(|&i| self.source(slots[i], row).is_some())
                        .map(|i| (slots[i], bufs[i].to_vec()))
                        .collect();
                    journal_guard = Some(self.journal_lock.lock().expect("journal lock"));
                    journaled = self.journal_write(row, span.start, cells)?;
                }
                bufs.split_off(d_count)
            } else {
                // Partial row: read-modify-write or reconstruct-write, as planned (whichever
                // reads fewer bytes).
                let res = if plan.method == Method::ReadModifyWrite {
                    self.rmw_parity(row, parity, &slots, plan, &new, &mut found)
                } else {
                    self.rcw_parity(row, parity, &slots, plan, &new, &mut found)
                };
                match res {
                    Ok(p) => p,
                    // A block failing its checksum or unreadable: the next attempt rebuilds
                    // the span from redundancy (and rewrites the bad blocks) first.
                    Err(_) => {
                        self.check_alive()?;
                        verify_all = true;
                        continue;
                    }
                }
            };
            // Data and parity go to their members at once (one thread per member for large
            // cells). A member failing here is failed and recorded; the row stays consistent
            // for the survivors because parity was computed from the new data.
            let (p_within, p_len) = if plan.method == Method::FullRow {
                (0, chunk as usize)
            } else {
                (span.start, span_len)
            };
            let mut writes: Vec<(usize, Verified, u64, WriteKind)> = touched
                .iter()
                .map(|(d, r)| {
                    (
                        slots[*d],
                        Verified::client(new_of(*d, r)),
                        r.start,
                        WriteKind::Data,
                    )
                })
                .collect();
            for (i, buf) in par.iter().enumerate() {
                writes.push((
                    slots[d_count + i],
                    Verified::parity(&buf[..p_len]),
                    p_within,
                    WriteKind::Parity,
                ));
            }
            self.on_members(writes, |(slot, buf, within, kind)| {
                self.member_write(slot, buf, row, within, kind)
            })?;
            if journaled {
                self.journal_clear()?;
                self.journaled(hold, row)?;
            }
            drop(journal_guard);
            return self.check_alive();
        }
        self.check_alive()?;
        bail!(Io, "row {row}: members kept failing during the write")
    }

    /// Row `row` of the write `hold` went through the journal: it is all new on every member,
    /// durably (the clear flushed them first), so a crash can no longer tear it. When that
    /// takes it off a member failure's suspect rows, the record on the members follows at
    /// once: a crash before the next flush would list the failed member's data there.
    fn journaled(&self, hold: &super::WriteHold, row: u64) -> Result<()> {
        if !hold.journaled(self.row_blocks(row..row + 1)) {
            return Ok(());
        }
        let lists = self.unflushed.suspects(self.slots.len());
        if self.bad.lock().expect("bad-block lock").set_suspect(lists) {
            self.persist()?;
        }
        Ok(())
    }

    /// A read whose bytes feed new parity (row position `pos`): a checksum mismatch is an
    /// error of kind Checksum, so the caller reconstructs and repairs the span instead of
    /// spreading the damage. A block whose entry is unknown counts as failing (the
    /// reconstruction checks it against the row). What failed is noted in `found`.
    #[allow(clippy::too_many_arguments)]
    fn read_for_update(
        &self,
        slots: &[usize],
        pos: usize,
        buf: &mut [u8],
        row: u64,
        within: u64,
        found: &mut Vec<(usize, Known)>,
    ) -> Result<()> {
        let slot = slots[pos];
        let ok = match self.member_read_verified(slot, buf, row, within) {
            Ok(Verdict::Good) => true,
            // Checked against the rest of the row by the caller's reconstruction.
            Ok(Verdict::Unknown) => false,
            Ok(Verdict::Bad) => false,
            Err(e) => {
                found.push((pos, Known::Unreadable));
                return Err(e);
            }
        };
        if ok {
            Ok(())
        } else {
            found.push((pos, Known::Judged));
            bail!(
                Checksum,
                "row {row}: {} fails its checksum",
                self.slot_name(slot)
            )
        }
    }

    /// Read-modify-write: new parity = old parity ^ contribution of (old data ^ new data),
    /// from the plan's reads (old parity over the span, old data over each touched range).
    fn rmw_parity(
        &self,
        row: u64,
        parity: usize,
        slots: &[usize],
        plan: &WritePlan,
        new: &NewData<'_>,
        found: &mut Vec<(usize, Known)>,
    ) -> Result<Vec<AlignedBuf>> {
        let d_count = slots.len() - parity;
        let span = &plan.span;
        let span_len = (span.end - span.start) as usize;
        let mut par: Vec<AlignedBuf> = (0..parity).map(|_| AlignedBuf::zeroed(span_len)).collect();
        // The plan reads the old parity first, then each touched cell's old data.
        for (pos, r) in &plan.reads {
            if *pos >= d_count {
                self.read_for_update(slots, *pos, &mut par[*pos - d_count], row, r.start, found)?;
                continue;
            }
            let mut delta = AlignedBuf::zeroed((r.end - r.start) as usize);
            self.read_for_update(slots, *pos, &mut delta, row, r.start, found)?;
            (self.kernel.xor_into)(&mut delta, new.get(*pos, r));
            let o = (r.start - span.start) as usize;
            (self.kernel.xor_into)(&mut par[0][o..o + delta.len()], &delta);
            if parity == 2 {
                (self.kernel.mul_xor)(&mut par[1][o..o + delta.len()], &delta, gf::pow2(*pos));
            }
        }
        Ok(par)
    }

    /// Reconstruct-write: the plan's reads (the untouched data over the span), merged with
    /// the new data, generate parity.
    fn rcw_parity(
        &self,
        row: u64,
        parity: usize,
        slots: &[usize],
        plan: &WritePlan,
        new: &NewData<'_>,
        found: &mut Vec<(usize, Known)>,
    ) -> Result<Vec<AlignedBuf>> {
        let d_count = slots.len() - parity;
        let span = &plan.span;
        let span_len = (span.end - span.start) as usize;
        let mut bufs: Vec<AlignedBuf> =
            (0..d_count).map(|_| AlignedBuf::zeroed(span_len)).collect();
        for (pos, r) in &plan.reads {
            self.read_for_update(slots, *pos, &mut bufs[*pos], row, r.start, found)?;
        }
        for (d, r) in &plan.touched {
            let o = (r.start - span.start) as usize;
            bufs[*d][o..o + (r.end - r.start) as usize].copy_from_slice(new.get(*d, r));
        }
        let data: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
        let mut p = AlignedBuf::zeroed(span_len);
        let mut q = AlignedBuf::zeroed(if parity == 2 { span_len } else { 0 });
        (self.kernel.gen_pq)(&data, &mut p, (parity == 2).then_some(&mut q[..]));
        Ok(if parity == 2 { vec![p, q] } else { vec![p] })
    }
}

impl Array {
    /// Whether the cells `bufs` (one per row position, data then parity) agree with their
    /// parity over byte range `run`, as read.
    fn consistent_as_read(&self, bufs: &[AlignedBuf], run: Range<usize>, parity: usize) -> bool {
        let d = bufs.len() - parity;
        let data: Vec<&[u8]> = bufs[..d].iter().map(|b| &b[run.clone()]).collect();
        let mut p = vec![0u8; run.len()];
        let mut q = vec![0u8; if parity == 2 { run.len() } else { 0 }];
        (self.kernel.gen_pq)(&data, &mut p, (parity == 2).then_some(&mut q[..]));
        p[..] == bufs[d][run.clone()] && (parity < 2 || q[..] == bufs[d + 1][run])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_range_exactly() {
        let v: Vec<(u64, Range<u64>, usize)> = pieces(100, 300, 128)
            .map(|p| (p.unit, p.range, p.buf_off))
            .collect();
        assert_eq!(
            v,
            vec![
                (0, 100..128, 0),
                (1, 0..128, 28),
                (2, 0..128, 156),
                (3, 0..16, 284)
            ]
        );
    }
}
