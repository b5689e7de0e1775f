//! The simulator's oracle: what every byte of the array must read back as. A read returns the
//! last acknowledged write (reads and writes of one range come from one actor, so there is no
//! ambiguity while the power is on). After a power cut, a byte must hold its durable value,
//! the last value of a write completed before a completed flush (or with FUA), unless it was
//! written since: then any value is allowed (the write was not durable), as it is for bytes
//! whose write failed.
//!
//! Errors are not "any error the array returns". The model keeps which bytes were *unsure* at
//! a power cut (written since they were last durable, or in flight): [`Model::unsure_blocks`]
//! gives the run the torn 4 KiB blocks, from which it bounds what a crash may put on the
//! bad-block list (see `run::crash_bound`). A block the array lost at a crash must fail to read
//! until a write covers it ([`Model::is_lost`]); a block written whole since is no longer
//! excused ([`Model::was_lost`] only keeps blocks a write covered in part: the array cannot
//! merge a partial write with bytes it lost).
//!
//! The model is sparse: its state lives in 4 KiB pages, made when a write first touches them;
//! a page never written reads as zeros, durable, sure and never lost. So the model of an array
//! of 1 TiB members costs what the clients wrote (runs with large members write a few windows).
//! After a power cut the run reads back only some ranges of the array ([`Model::after_crash`]
//! takes them as segments): every page the clients touched must lie in them.

use std::collections::BTreeMap;

const P: usize = 4096;

/// The state of one 4 KiB page of the array, byte by byte.
#[derive(Clone)]
struct Page {
    acked: [u8; P],
    durable: [u8; P],
    /// Written since it was last durable (or in flight): after a crash it may hold anything.
    unsure: [bool; P],
    /// Value not known (a write failed or was cut off): the next read tells.
    unknown: [bool; P],
    /// Written more than once since it was last durable: after a crash a member may hold any
    /// of those versions, its parity (or another copy) another one.
    multi: [bool; P],
    /// On the array's bad-block list after a crash (a member lost with it): a read must fail
    /// until a write succeeds.
    lost: [bool; P],
    /// Was lost at some crash (the array may keep a block of it on the list after a write that
    /// covered only part of the block).
    was_lost: [bool; P],
    /// Completion number of the last write to each byte.
    last_seq: [u32; P],
    inflight: [u16; P],
}

impl Page {
    fn new() -> Box<Page> {
        Box::new(Page {
            acked: [0; P],
            durable: [0; P],
            unsure: [false; P],
            unknown: [false; P],
            multi: [false; P],
            lost: [false; P],
            was_lost: [false; P],
            last_seq: [0; P],
            inflight: [0; P],
        })
    }
}

/// The page pieces of `off..off + len`: (page index, offset in page, offset in range, length).
fn pieces(off: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if pos >= len {
            return None;
        }
        let abs = off + pos as u64;
        let (pg, w) = (abs / P as u64, (abs % P as u64) as usize);
        let n = (P - w).min(len - pos);
        let out = (pg, w, pos, n);
        pos += n;
        Some(out)
    })
}

/// Expected contents of the array.
pub struct Model {
    size: u64,
    pages: BTreeMap<u64, Box<Page>>,
    seq: u32,
    /// Pages a write (or trim) began on since the last clean stop: where the array may have
    /// write-intent bits set from client I/O.
    touched: std::collections::BTreeSet<u64>,
}

/// Describes a difference for a failure report.
fn diff(what: &str, off: u64, i: usize, want: u8, got: u8) -> String {
    format!(
        "{what}: array byte {} (4 KiB block {}) reads {got:#04x}, expected {want:#04x}",
        off + i as u64,
        (off + i as u64) / 4096
    )
}

impl Model {
    pub fn new(size: u64) -> Model {
        Model {
            size,
            pages: BTreeMap::new(),
            seq: 0,
            touched: Default::default(),
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Pages of state held (memory use, about 48 KiB each).
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    fn page_mut(&mut self, pg: u64) -> &mut Page {
        self.pages.entry(pg).or_insert_with(Page::new)
    }

    pub fn begin_write(&mut self, off: u64, len: usize) {
        for (pg, w, _, n) in pieces(off, len) {
            self.touched.insert(pg);
            let p = self.page_mut(pg);
            p.inflight[w..w + n].iter_mut().for_each(|x| *x += 1);
            for b in w..w + n {
                p.multi[b] |= p.unsure[b];
            }
            p.unsure[w..w + n].iter_mut().for_each(|x| *x = true);
        }
    }

    /// A write finished: `ok` when it was acknowledged (and the power was still on).
    pub fn end_write(&mut self, off: u64, data: &[u8], ok: bool) {
        if ok {
            self.seq += 1;
        }
        let seq = self.seq;
        for (pg, w, pos, n) in pieces(off, data.len()) {
            let p = self.page_mut(pg);
            let r = w..w + n;
            p.inflight[r.clone()].iter_mut().for_each(|x| *x -= 1);
            if ok {
                p.acked[r.clone()].copy_from_slice(&data[pos..pos + n]);
                p.last_seq[r.clone()].iter_mut().for_each(|x| *x = seq);
                p.unknown[r.clone()].iter_mut().for_each(|x| *x = false);
                p.lost[r].iter_mut().for_each(|x| *x = false);
                // Whole 4 KiB blocks written since a crash lost them are data again.
                if n == P {
                    p.was_lost.iter_mut().for_each(|x| *x = false);
                }
            } else {
                // Whatever it left (a trim may have zeroed rows, clearing their bad blocks) is
                // unknown, not lost: the next read tells.
                p.unknown[r.clone()].iter_mut().for_each(|x| *x = true);
                p.lost[r].iter_mut().for_each(|x| *x = false);
            }
        }
    }

    /// A trim finished: every byte of the range reads as before or as zero; `got` is what a read
    /// right after it returned.
    pub fn end_trim(&mut self, off: u64, got: &[u8]) -> Result<(), String> {
        for (pg, w, pos, n) in pieces(off, got.len()) {
            let Some(p) = self.pages.get(&pg) else {
                continue; // never written: zeros, which a trim leaves zeros
            };
            for i in 0..n {
                let g = got[pos + i];
                if !p.unknown[w + i] && g != p.acked[w + i] && g != 0 {
                    return Err(diff("after a trim", off, pos + i, p.acked[w + i], g));
                }
            }
        }
        self.end_write(off, got, true);
        Ok(())
    }

    pub fn flush_begin(&self) -> u32 {
        self.seq
    }

    /// A flush that began at `seq0` completed: writes completed before it are durable.
    pub fn flush_end(&mut self, seq0: u32) {
        for p in self.pages.values_mut() {
            for b in 0..P {
                if p.unsure[b] && p.inflight[b] == 0 && !p.unknown[b] && p.last_seq[b] <= seq0 {
                    p.durable[b] = p.acked[b];
                    p.unsure[b] = false;
                    p.multi[b] = false;
                }
            }
        }
    }

    /// A FUA write at `off` completed: the write itself is durable (its own cells only: other
    /// writes completed before it are durable only where a flush made them so).
    pub fn fua_end(&mut self, off: u64, len: usize) {
        for (pg, w, _, n) in pieces(off, len) {
            let p = self.page_mut(pg);
            for b in w..w + n {
                if p.unsure[b] && p.inflight[b] == 0 && !p.unknown[b] {
                    p.durable[b] = p.acked[b];
                    p.unsure[b] = false;
                    p.multi[b] = false;
                }
            }
        }
    }

    /// A read of `got` at `off` while the power is on.
    pub fn check_read(&mut self, off: u64, got: &[u8]) -> Result<(), String> {
        for (pg, w, pos, n) in pieces(off, got.len()) {
            let Some(p) = self.pages.get(&pg) else {
                // Never written: zeros.
                if let Some(i) = got[pos..pos + n].iter().position(|&g| g != 0) {
                    return Err(diff("read", off, pos + i, 0, got[pos + i]));
                }
                continue;
            };
            for i in 0..n {
                let (b, g) = (w + i, got[pos + i]);
                if p.lost[b] {
                    let a = off + (pos + i) as u64;
                    return Err(format!(
                        "array byte {a} (4 KiB block {}) was lost in a crash (on the bad-block list) and reads back without an error (as {g:#04x})",
                        a / 4096
                    ));
                }
                if p.unknown[b] {
                    continue;
                }
                if g != p.acked[b] {
                    return Err(diff("read", off, pos + i, p.acked[b], g));
                }
            }
        }
        for (pg, w, pos, n) in pieces(off, got.len()) {
            if let Some(p) = self.pages.get_mut(&pg) {
                for i in 0..n {
                    let b = w + i;
                    if p.unknown[b] && p.inflight[b] == 0 {
                        p.acked[b] = got[pos + i];
                        p.unknown[b] = false;
                    }
                }
            }
        }
        Ok(())
    }

    fn any(&self, off: u64, len: usize, f: impl Fn(&Page, usize) -> bool) -> bool {
        pieces(off, len).any(|(pg, w, _, n)| {
            self.pages
                .get(&pg)
                .is_some_and(|p| (w..w + n).any(|b| f(p, b)))
        })
    }

    /// Whether some byte of the range was lost at a crash: only then may the array refuse to
    /// read it as a bad block.
    pub fn was_lost(&self, off: u64, len: usize) -> bool {
        self.any(off, len, |p, b| p.was_lost[b])
    }

    /// The 4 KiB blocks of `range` lie in a cell the run's faults left in doubt in a row they
    /// made unrecoverable (a write into the row may list them: nothing verifies them): each may
    /// fail to read, as a block lost at a crash may, until written whole. Blocks `written`
    /// covers whole (the write that found the row so) are left as they are.
    pub fn mark_was_lost(&mut self, range: std::ops::Range<u64>, written: std::ops::Range<u64>) {
        for b in range.step_by(P) {
            if !(written.start <= b && b + P as u64 <= written.end) {
                self.page_mut(b / P as u64).was_lost = [true; P];
            }
        }
    }

    /// Whether some byte of the range is on the bad-block list since a crash and not written
    /// since.
    pub fn is_lost(&self, off: u64, len: usize) -> bool {
        self.any(off, len, |p, b| p.lost[b])
    }

    /// Array offsets of the 4 KiB blocks holding a byte that was lost at some crash
    /// ([`Model::was_lost`]), in order.
    pub fn was_lost_blocks(&self) -> Vec<u64> {
        self.blocks_where(|p| p.was_lost.iter().any(|&x| x))
    }

    /// Array offsets of the 4 KiB blocks holding a byte that is unsure now (written since it
    /// was last durable, in flight, or of unknown value): what a power cut now may tear.
    pub fn unsure_blocks(&self) -> Vec<u64> {
        self.blocks_where(|p| {
            p.unsure.iter().any(|&x| x)
                || p.inflight.iter().any(|&x| x > 0)
                || p.unknown.iter().any(|&x| x)
        })
    }

    /// The durable bytes of the 4 KiB block at array offset `off` (a multiple of 4096), and
    /// which of them are of unknown value (a failed write): what a read after a power cut
    /// returns unless a later write reached the block.
    pub fn durable_block(&self, off: u64) -> ([u8; P], [bool; P]) {
        match self.pages.get(&(off / P as u64)) {
            Some(p) => (p.durable, p.unknown),
            None => ([0; P], [false; P]),
        }
    }

    /// Array offsets of the pages `f` holds for, in order.
    fn blocks_where(&self, f: impl Fn(&Page) -> bool) -> Vec<u64> {
        self.pages
            .iter()
            .filter(|(_, p)| f(p))
            .map(|(&pg, _)| pg * P as u64)
            .collect()
    }

    /// Array offsets of the 4 KiB blocks holding a byte written more than once since it was
    /// last durable (a subset of [`Model::unsure_blocks`]).
    pub fn multi_blocks(&self) -> Vec<u64> {
        self.blocks_where(|p| p.multi.iter().any(|&x| x))
    }

    /// After a power cut and restart: `segs` are the ranges of the array read back (offset,
    /// bytes; in order, 4 KiB aligned), except the 4 KiB blocks at `bad` (on the bad-block
    /// list: any value was possible, none is known now). Of those, `unverified` failed only
    /// because nothing could verify them then (not listed): not lost, they may read again once
    /// redundancy returns, as what was durable (or, where a write was unsure, as the next read
    /// tells); they may also keep failing, as a block lost at a crash may ([`Model::was_lost`]). Every page the clients touched must lie in a segment (elsewhere the array holds
    /// what it held: zeros never written).
    pub fn after_crash(
        &mut self,
        segs: &[(u64, Vec<u8>)],
        bad: &[u64],
        unverified: &[u64],
    ) -> Result<(), String> {
        let bad: std::collections::BTreeSet<u64> = bad.iter().map(|&o| o / P as u64).collect();
        let unverified: std::collections::BTreeSet<u64> =
            unverified.iter().map(|&o| o / P as u64).collect();
        for (off, got) in segs {
            for (pg, w, pos, n) in pieces(*off, got.len()) {
                if bad.contains(&pg) {
                    continue;
                }
                let g = &got[pos..pos + n];
                match self.pages.get(&pg) {
                    None => {
                        if let Some(i) = g.iter().position(|&x| x != 0) {
                            return Err(diff(
                                "after the power cut (durable data)",
                                *off,
                                pos + i,
                                0,
                                g[i],
                            ));
                        }
                    }
                    Some(p) => {
                        for (i, &x) in g.iter().enumerate() {
                            let b = w + i;
                            if !p.unsure[b] && !p.unknown[b] && x != p.durable[b] {
                                return Err(diff(
                                    "after the power cut (durable data)",
                                    *off,
                                    pos + i,
                                    p.durable[b],
                                    x,
                                ));
                            }
                        }
                    }
                }
            }
        }
        let mut read = std::collections::BTreeSet::new();
        for (off, got) in segs {
            for (pg, w, pos, n) in pieces(*off, got.len()) {
                read.insert(pg);
                if unverified.contains(&pg) {
                    continue;
                }
                if self.pages.contains_key(&pg) || bad.contains(&pg) {
                    let p = self.page_mut(pg);
                    p.acked[w..w + n].copy_from_slice(&got[pos..pos + n]);
                    p.durable[w..w + n].copy_from_slice(&got[pos..pos + n]);
                }
            }
        }
        for (pg, p) in self.pages.iter_mut() {
            let unsettled = p.unsure.iter().any(|&x| x)
                || p.inflight.iter().any(|&x| x > 0)
                || p.unknown.iter().any(|&x| x);
            if unsettled && !read.contains(pg) {
                return Err(format!(
                    "simulator: 4 KiB block {pg} was written but is not in the ranges read back after the power cut"
                ));
            }
            if unverified.contains(pg) {
                // Read nothing: what was durable stands, and what a cut write left unsure is
                // unknown until a read tells.
                for b in 0..P {
                    if p.unsure[b] || p.unknown[b] {
                        p.unknown[b] = true;
                    } else {
                        p.acked[b] = p.durable[b];
                    }
                }
                p.unsure = [false; P];
                p.multi = [false; P];
                p.inflight = [0; P];
                // Not lost (a read may succeed once redundancy returns), but it may keep
                // failing until written whole, as a block lost at a crash may.
                p.lost = [false; P];
                p.was_lost = [true; P];
                continue;
            }
            p.unsure = [false; P];
            p.multi = [false; P];
            p.unknown = [false; P];
            p.inflight = [0; P];
            let is_bad = bad.contains(pg);
            p.lost = [is_bad; P];
            if is_bad {
                p.was_lost = [true; P];
            }
        }
        Ok(())
    }

    /// Array offsets of the 4 KiB blocks a write or trim began on since the last clean stop.
    pub fn touched_blocks(&self) -> Vec<u64> {
        self.touched.iter().map(|&pg| pg * P as u64).collect()
    }

    /// After a clean stop: everything acknowledged is durable.
    pub fn clean_stop(&mut self) {
        self.touched.clear();
        let s = self.seq;
        self.flush_end(s);
    }
}
