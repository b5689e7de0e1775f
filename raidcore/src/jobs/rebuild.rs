//! Rebuild and replace: fill every target with its slot's contents, row batch by row batch.
//! Survivors are read sequentially in large I/Os and the target is written sequentially; the
//! rows of a batch are locked while it is reconstructed and written, and the target's
//! checkpoint moves past them before they unlock (so later writes to those rows go to the
//! target too). Every few seconds the targets are flushed and the checkpoint recorded in the
//! superblocks; a rebuild killed at any moment resumes from there.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::RateLimit;
use crate::array::{Array, Dev, Target, TargetKind, WriteKind};
use crate::buf::AlignedBuf;
use crate::error::Result;
use crate::layout::{Level, Redundancy};

/// Options of a rebuild run.
#[derive(Clone, Debug)]
pub struct RebuildOptions {
    /// Bytes per second written to targets, at most.
    pub max_rate: Option<u64>,
    /// Do not move the parity-heavy role when spares are promoted.
    pub keep_roles: bool,
    /// How often the checkpoint is flushed and recorded.
    pub checkpoint_every: Duration,
    /// Bytes per member in one batch (rounded to whole rows).
    pub batch_bytes: u64,
}

impl Default for RebuildOptions {
    fn default() -> Self {
        RebuildOptions {
            max_rate: None,
            keep_roles: false,
            checkpoint_every: Duration::from_secs(2),
            batch_bytes: 8 << 20,
        }
    }
}

/// What one pass did.
#[derive(Clone, Debug, Default)]
pub struct PassReport {
    /// Slots filled by this pass.
    pub slots: Vec<usize>,
    /// "rebuild" or "replace".
    pub kind: &'static str,
    /// Row the pass started at (non-zero when it resumed from a checkpoint).
    pub resumed_from_row: u64,
    pub rows: u64,
    pub bytes_written: u64,
    pub seconds: f64,
}

/// Progress: (bytes done, bytes total) of the current pass, and its slots.
pub type ProgressFn<'a> = dyn FnMut(&PassReport, u64, u64) + 'a;

/// Runs every pending rebuild and replace until none is left (spares are promoted first).
pub fn run(
    array: &Array,
    opts: &RebuildOptions,
    progress: &mut ProgressFn<'_>,
) -> Result<Vec<PassReport>> {
    let mut reports = Vec::new();
    array.promote_spares(opts.keep_roles)?;
    loop {
        let pending = array.pending_targets();
        if pending.is_empty() {
            break;
        }
        let rebuilds: Vec<usize> = pending
            .iter()
            .filter(|(_, r)| *r)
            .map(|(s, _)| *s)
            .collect();
        let report = if !rebuilds.is_empty() {
            rebuild_pass(array, &rebuilds, opts, progress)?
        } else {
            replace_pass(array, pending[0].0, opts, progress)?
        };
        reports.push(report);
        array.promote_spares(opts.keep_roles)?;
    }
    Ok(reports)
}

struct Pass<'a> {
    array: &'a Array,
    opts: &'a RebuildOptions,
    targets: Vec<(usize, Arc<Target>)>,
    report: PassReport,
    rate: RateLimit,
    last_checkpoint: Instant,
    start: Instant,
}

impl Pass<'_> {
    fn batch_rows(&self) -> u64 {
        (self.opts.batch_bytes / self.array.layout().chunk()).max(1)
    }

    /// After a batch: move checkpoints, account, and now and then make them durable.
    fn advance(&mut self, r1: u64, written: u64, progress: &mut ProgressFn<'_>) -> Result<()> {
        for (_, t) in &self.targets {
            if t.checkpoint.load(Ordering::Acquire) < r1 {
                t.checkpoint.store(r1, Ordering::Release);
            }
        }
        self.report.rows = r1 - self.report.resumed_from_row;
        self.report.bytes_written += written;
        let rows = self.array.rows();
        let c = self.array.layout().chunk();
        progress(
            &self.report,
            r1 * c * self.targets.len() as u64,
            rows * c * self.targets.len() as u64,
        );
        if self.last_checkpoint.elapsed() >= self.opts.checkpoint_every || r1 == rows {
            self.make_durable()?;
        }
        self.rate.account(written);
        Ok(())
    }

    fn make_durable(&mut self) -> Result<()> {
        for (slot, t) in &self.targets {
            if let Err(e) = t.dev.member.flush() {
                self.array
                    .fail_target(*slot, &format!("flush failed: {e}"))?;
                continue;
            }
            t.durable
                .store(t.checkpoint.load(Ordering::Acquire), Ordering::Release);
        }
        self.array.persist()?;
        self.last_checkpoint = Instant::now();
        Ok(())
    }

    /// True while every target of the pass is still attached to its slot.
    fn targets_alive(&self) -> bool {
        self.targets.iter().all(|(s, t)| {
            self.array
                .slot_target(*s)
                .is_some_and(|x| Arc::ptr_eq(&x, t))
        })
    }

    fn finish(mut self) -> Result<PassReport> {
        self.make_durable()?;
        for (slot, _) in &self.targets {
            self.array.complete_target(*slot)?;
        }
        self.report.seconds = self.start.elapsed().as_secs_f64();
        Ok(self.report)
    }
}

fn write_target(array: &Array, slot: usize, dev: &Dev, buf: &[u8], row: u64) -> Result<bool> {
    let off = array.cell_offset(row, 0);
    match dev.member.write_at(buf, off) {
        Ok(()) => {
            dev.count(WriteKind::Rebuild, buf.len() as u64);
            Ok(true)
        }
        Err(e) => {
            dev.write_errors.fetch_add(1, Ordering::Relaxed);
            array.fail_target(slot, &format!("write error at member offset {off}: {e}"))?;
            Ok(false)
        }
    }
}

fn new_pass<'a>(
    array: &'a Array,
    slots: &[usize],
    kind: &'static str,
    opts: &'a RebuildOptions,
) -> Pass<'a> {
    let targets: Vec<(usize, Arc<Target>)> = slots
        .iter()
        .filter_map(|&s| array.slot_target(s).map(|t| (s, t)))
        .collect();
    let start_row = targets
        .iter()
        .map(|(_, t)| t.durable.load(Ordering::Acquire))
        .min()
        .unwrap_or(0);
    for (_, t) in &targets {
        // Rows between the durable and the in-memory checkpoint are redone.
        t.checkpoint
            .store(t.durable.load(Ordering::Acquire), Ordering::Release);
    }
    Pass {
        array,
        opts,
        report: PassReport {
            slots: targets.iter().map(|(s, _)| *s).collect(),
            kind,
            resumed_from_row: start_row,
            ..Default::default()
        },
        targets,
        rate: RateLimit::new(opts.max_rate),
        last_checkpoint: Instant::now(),
        start: Instant::now(),
    }
}

/// Reconstructs the slots in `slots` (all without a usable member) onto their targets.
fn rebuild_pass(
    array: &Array,
    slots: &[usize],
    opts: &RebuildOptions,
    progress: &mut ProgressFn<'_>,
) -> Result<PassReport> {
    let mut pass = new_pass(array, slots, "rebuild", opts);
    let layout = array.layout().clone();
    if layout.level() == Level::Raid0 {
        crate::bail!(ArrayFailed, "raid0 has no redundancy to rebuild from");
    }
    let n = layout.members();
    let c = layout.chunk() as usize;
    let rows = array.rows();
    let step = pass.batch_rows();
    let mut r0 = pass.report.resumed_from_row;
    while r0 < rows {
        if !pass.targets_alive() {
            crate::bail!(Io, "a rebuild target failed; see status");
        }
        let r1 = (r0 + step).min(rows);
        let b = (r1 - r0) as usize;
        let _guards = array.lock_rows(r0..r1);
        array.check_alive()?;
        let lost = array.lost();
        let mut outs: Vec<AlignedBuf> = pass
            .targets
            .iter()
            .map(|_| AlignedBuf::zeroed(b * c))
            .collect();
        match layout.redundancy() {
            Redundancy::Parity { parity } => {
                // One sequential read per survivor for the whole batch.
                let mut bufs: Vec<Option<AlignedBuf>> = Vec::with_capacity(n);
                for (slot, &gone) in lost.iter().enumerate() {
                    if gone {
                        bufs.push(None);
                        continue;
                    }
                    let mut buf = AlignedBuf::zeroed(b * c);
                    match array.member_read(slot, &mut buf, r0, 0) {
                        Ok(()) => bufs.push(Some(buf)),
                        Err(_) => bufs.push(None), // failed now; recovered below if tolerated
                    }
                }
                if bufs.iter().filter(|b| b.is_none()).count() > parity {
                    array.check_alive()?;
                    crate::bail!(
                        ArrayFailed,
                        "rows {r0}..{r1}: too many members unreadable to rebuild"
                    );
                }
                let mut row_bufs: Vec<AlignedBuf> = (0..n).map(|_| AlignedBuf::zeroed(c)).collect();
                for r in r0..r1 {
                    let k = (r - r0) as usize;
                    let order = array.row_slots(r, parity);
                    let mut missing = Vec::new();
                    for (pos, &slot) in order.iter().enumerate() {
                        match &bufs[slot] {
                            Some(src) => row_bufs[pos].copy_from_slice(&src[k * c..(k + 1) * c]),
                            None => missing.push(pos),
                        }
                    }
                    let mut refs: Vec<&mut [u8]> =
                        row_bufs.iter_mut().map(|b| &mut b[..]).collect();
                    array.kernel().recover(&mut refs, parity, &missing)?;
                    for (ti, (slot, _)) in pass.targets.iter().enumerate() {
                        let pos = order.iter().position(|s| s == slot).expect("slot in row");
                        outs[ti][k * c..(k + 1) * c].copy_from_slice(&row_bufs[pos]);
                    }
                }
            }
            Redundancy::Mirror { copies } => {
                for (ti, (slot, _)) in pass.targets.iter().enumerate() {
                    for r in r0..r1 {
                        let k = (r - r0) as usize;
                        let Some((chunk, copy)) = mirror_inverse(&layout, array.rows(), *slot, r)
                        else {
                            continue;
                        };
                        let mut done = false;
                        for other in (0..copies).filter(|&o| o != copy) {
                            let (s2, row2) = layout.mirror_cell(chunk, other);
                            if lost[s2] {
                                continue;
                            }
                            if array
                                .member_read(s2, &mut outs[ti][k * c..(k + 1) * c], row2, 0)
                                .is_ok()
                            {
                                done = true;
                                break;
                            }
                        }
                        if !done {
                            array.check_alive()?;
                            crate::bail!(ArrayFailed, "logical chunk {chunk}: no readable copy to rebuild slot {slot} from");
                        }
                    }
                }
            }
        }
        let mut written = 0;
        for (ti, (slot, t)) in pass.targets.iter().enumerate() {
            if write_target(array, *slot, &t.dev, &outs[ti], r0)? {
                written += outs[ti].len() as u64;
            }
        }
        pass.advance(r1, written, progress)?;
        drop(_guards);
        r0 = r1;
    }
    pass.finish()
}

/// Copies slot `slot`'s live member onto its replace target.
fn replace_pass(
    array: &Array,
    slot: usize,
    opts: &RebuildOptions,
    progress: &mut ProgressFn<'_>,
) -> Result<PassReport> {
    let mut pass = new_pass(array, &[slot], "replace", opts);
    let c = array.layout().chunk() as usize;
    let rows = array.rows();
    let step = pass.batch_rows();
    let mut r0 = pass.report.resumed_from_row;
    let (_, t) = pass.targets[0].clone();
    debug_assert!(matches!(t.kind, TargetKind::Replace { .. }));
    while r0 < rows {
        let r1 = (r0 + step).min(rows);
        let _guards = array.lock_rows(r0..r1);
        if !pass.targets_alive() {
            // The old member failed (the target now rebuilds) or the target failed.
            pass.make_durable()?;
            pass.report.seconds = pass.start.elapsed().as_secs_f64();
            return Ok(pass.report);
        }
        let mut buf = AlignedBuf::zeroed((r1 - r0) as usize * c);
        if array.member_read(slot, &mut buf, r0, 0).is_err() {
            continue; // the slot is failed now and the replace became a rebuild
        }
        let ok = write_target(array, slot, &t.dev, &buf, r0)?;
        pass.advance(r1, if ok { buf.len() as u64 } else { 0 }, progress)?;
        drop(_guards);
        r0 = r1;
    }
    pass.finish()
}

/// For mirror levels: which (logical chunk, copy) cell (slot, row) holds, if any.
fn mirror_inverse(
    layout: &crate::layout::Layout,
    rows: u64,
    slot: usize,
    row: u64,
) -> Option<(u64, usize)> {
    let chunks = layout.logical_chunks(rows);
    let (c, k) = match layout.level() {
        Level::Raid1 => (row, slot),
        Level::Raid10 => {
            let x = row * layout.members() as u64 + slot as u64;
            (
                x / layout.copies() as u64,
                (x % layout.copies() as u64) as usize,
            )
        }
        _ => return None,
    };
    (c < chunks).then_some((c, k))
}
