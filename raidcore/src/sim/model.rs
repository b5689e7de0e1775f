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

/// Expected contents of the array.
pub struct Model {
    acked: Vec<u8>,
    durable: Vec<u8>,
    /// Written since it was last durable (or in flight): after a crash it may hold anything.
    unsure: Vec<bool>,
    /// Value not known (a write failed or was cut off): the next read tells.
    unknown: Vec<bool>,
    /// On the array's bad-block list after a crash (a member lost with it): a read must fail
    /// until a write succeeds.
    lost: Vec<bool>,
    /// Was lost at some crash (the array may keep a block of it on the list after a write that
    /// covered only part of the block).
    was_lost: Vec<bool>,
    /// Completion number of the last write to each byte.
    last_seq: Vec<u32>,
    inflight: Vec<u16>,
    seq: u32,
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
        let n = size as usize;
        Model {
            acked: vec![0; n],
            durable: vec![0; n],
            unsure: vec![false; n],
            unknown: vec![false; n],
            lost: vec![false; n],
            was_lost: vec![false; n],
            last_seq: vec![0; n],
            inflight: vec![0; n],
            seq: 0,
        }
    }

    pub fn size(&self) -> u64 {
        self.acked.len() as u64
    }

    pub fn begin_write(&mut self, off: u64, len: usize) {
        let r = off as usize..off as usize + len;
        self.inflight[r.clone()].iter_mut().for_each(|x| *x += 1);
        self.unsure[r].iter_mut().for_each(|x| *x = true);
    }

    /// A write finished: `ok` when it was acknowledged (and the power was still on).
    pub fn end_write(&mut self, off: u64, data: &[u8], ok: bool) {
        let r = off as usize..off as usize + data.len();
        self.inflight[r.clone()].iter_mut().for_each(|x| *x -= 1);
        if ok {
            self.seq += 1;
            self.acked[r.clone()].copy_from_slice(data);
            self.last_seq[r.clone()]
                .iter_mut()
                .for_each(|x| *x = self.seq);
            self.unknown[r.clone()].iter_mut().for_each(|x| *x = false);
            self.lost[r].iter_mut().for_each(|x| *x = false);
            // Whole 4 KiB blocks written since a crash lost them are data again.
            let (a, b) = (
                off.div_ceil(4096) * 4096,
                (off + data.len() as u64) / 4096 * 4096,
            );
            if a < b {
                self.was_lost[a as usize..b as usize]
                    .iter_mut()
                    .for_each(|x| *x = false);
            }
        } else {
            // Whatever it left (a trim may have zeroed rows, clearing their bad blocks) is
            // unknown, not lost: the next read tells.
            self.unknown[r.clone()].iter_mut().for_each(|x| *x = true);
            self.lost[r].iter_mut().for_each(|x| *x = false);
        }
    }

    /// A trim finished: every byte of the range reads as before or as zero; `got` is what a read
    /// right after it returned.
    pub fn end_trim(&mut self, off: u64, got: &[u8]) -> Result<(), String> {
        let o = off as usize;
        for (i, &g) in got.iter().enumerate() {
            let b = o + i;
            if !self.unknown[b] && g != self.acked[b] && g != 0 {
                return Err(diff("after a trim", off, i, self.acked[b], g));
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
        for b in 0..self.acked.len() {
            if self.unsure[b]
                && self.inflight[b] == 0
                && !self.unknown[b]
                && self.last_seq[b] <= seq0
            {
                self.durable[b] = self.acked[b];
                self.unsure[b] = false;
            }
        }
    }

    /// A FUA write at `off` completed, its flush having begun at `seq0`: the write itself and
    /// the writes completed before that flush began are durable.
    pub fn flush_end_with(&mut self, seq0: u32, off: u64, len: usize) {
        self.flush_end(seq0);
        for b in off as usize..off as usize + len {
            if self.unsure[b] && self.inflight[b] == 0 && !self.unknown[b] {
                self.durable[b] = self.acked[b];
                self.unsure[b] = false;
            }
        }
    }

    /// A read of `got` at `off` while the power is on.
    pub fn check_read(&mut self, off: u64, got: &[u8]) -> Result<(), String> {
        let o = off as usize;
        for (i, &g) in got.iter().enumerate() {
            let b = o + i;
            if self.lost[b] {
                return Err(format!(
                    "array byte {} (4 KiB block {}) was lost in a crash (on the bad-block list) and reads back without an error (as {g:#04x})",
                    b,
                    b / 4096
                ));
            }
            if self.unknown[b] {
                continue;
            }
            if g != self.acked[b] {
                return Err(diff("read", off, i, self.acked[b], g));
            }
        }
        for (i, &g) in got.iter().enumerate() {
            let b = o + i;
            if self.unknown[b] && self.inflight[b] == 0 {
                self.acked[b] = g;
                self.unknown[b] = false;
            }
        }
        Ok(())
    }

    /// Whether some byte of the range was lost at a crash: only then may the array refuse to
    /// read it as a bad block.
    pub fn was_lost(&self, off: u64, len: usize) -> bool {
        self.was_lost[off as usize..off as usize + len]
            .iter()
            .any(|&x| x)
    }

    /// Whether some byte of the range is on the bad-block list since a crash and not written
    /// since.
    pub fn is_lost(&self, off: u64, len: usize) -> bool {
        self.lost[off as usize..off as usize + len]
            .iter()
            .any(|&x| x)
    }

    /// Array offsets of the 4 KiB blocks holding a byte that is unsure now (written since it
    /// was last durable, in flight, or of unknown value): what a power cut now may tear.
    pub fn unsure_blocks(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for (i, c) in self.unsure.chunks(4096).enumerate() {
            let base = i * 4096;
            if c.iter().any(|&x| x)
                || self.inflight[base..base + c.len()].iter().any(|&x| x > 0)
                || self.unknown[base..base + c.len()].iter().any(|&x| x)
            {
                out.push(base as u64);
            }
        }
        out
    }

    /// After a power cut and restart: `got` is the whole array as read back, except the 4 KiB
    /// blocks at `bad` (on the bad-block list: any value was possible, none is known now).
    pub fn after_crash(&mut self, got: &[u8], bad: &[u64]) -> Result<(), String> {
        let mut is_bad = vec![false; got.len()];
        for &o in bad {
            let r = o as usize..(o as usize + 4096).min(got.len());
            is_bad[r].iter_mut().for_each(|x| *x = true);
        }
        for (b, &g) in got.iter().enumerate() {
            if !is_bad[b] && !self.unsure[b] && !self.unknown[b] && g != self.durable[b] {
                return Err(diff(
                    "after the power cut (durable data)",
                    0,
                    b,
                    self.durable[b],
                    g,
                ));
            }
        }
        self.acked.copy_from_slice(got);
        self.durable.copy_from_slice(got);
        self.unsure.iter_mut().for_each(|x| *x = false);
        self.unknown.iter_mut().for_each(|x| *x = false);
        for (w, &b) in self.was_lost.iter_mut().zip(&is_bad) {
            *w |= b;
        }
        self.lost.copy_from_slice(&is_bad);
        self.inflight.iter_mut().for_each(|x| *x = 0);
        Ok(())
    }

    /// After a clean stop: everything acknowledged is durable.
    pub fn clean_stop(&mut self) {
        let s = self.seq;
        self.flush_end(s);
    }
}
