//! Rebuild and replace: fill every target with its slot's contents, row batch by row batch.
//! Survivors are read sequentially in large I/Os and the target is written sequentially; the
//! rows of a batch are locked while it is reconstructed and written, and the target's
//! checkpoint moves past them before they unlock (so later writes to those rows go to the
//! target too). Every few seconds the targets are flushed and the checkpoint recorded in the
//! superblocks; a rebuild killed at any moment resumes from there. This is the driver: the
//! row work (what each batch reads, verifies, rebuilds, writes and lists) is the engine's
//! (`array/refill.rs`), reached through its job API (`array/job.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::array::job::{self, Damage, RateLimit, RowGuard, Target, TargetKind};
use crate::array::Array;
use crate::buf::AlignedBuf;
use crate::clock::Instant;
use crate::error::Result;
use crate::layout::{Level, Redundancy};

/// Options of a rebuild run.
#[derive(Clone, Debug)]
pub struct RebuildOptions {
    /// Bytes per second written to targets, at most.
    pub max_rate: Option<u64>,
    /// Bytes per second written to targets while users' requests are being served (the job
    /// yields to them down to this; None: it never yields).
    pub min_rate: Option<u64>,
    /// How often the checkpoint is flushed and recorded.
    pub checkpoint_every: Duration,
    /// Bytes per member in one batch (rounded to whole rows).
    pub batch_bytes: u64,
    /// When set, the job stops at the next batch boundary (checkpoint recorded) and returns.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl RebuildOptions {
    /// Whether the job was asked to stop (`stop` set).
    pub(crate) fn stop_requested(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Acquire))
    }
}

impl Default for RebuildOptions {
    fn default() -> Self {
        RebuildOptions {
            max_rate: None,
            min_rate: Some(job::DEFAULT_MIN_RATE),
            checkpoint_every: Duration::from_secs(2),
            batch_bytes: 8 << 20,
            stop: None,
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
    /// Survivor blocks that failed their checksums and were repaired from the others.
    pub checksum_repaired: u64,
    /// Blocks of the targets that could not be rebuilt because survivors' blocks failed their
    /// checksums beyond what parity covers: they read as errors, never as wrong data.
    pub unrecoverable_blocks: u64,
    /// Rows the data map showed empty: the targets got zeros there (a hole, or the device's
    /// write-zeroes) without the survivors being read. Included in `rows`, not in
    /// `bytes_written`.
    pub empty_rows: u64,
    /// Rows a re-added member held as they are (nothing was written there since it left, by
    /// the re-add map): neither read nor written. Included in `rows`.
    pub held_rows: u64,
}

/// Rows of the data map's empty regions one skip covers at most (4 GiB of each member at
/// 64 KiB chunks): their row locks are held only while the targets are zeroed there.
const EMPTY_RUN_BYTES: u64 = 4 << 30;

/// Progress: (bytes done, bytes total) of the current pass, and its slots. It is called while
/// the pass holds row locks: it must not do I/O on the array itself.
pub type ProgressFn<'a> = dyn FnMut(&PassReport, u64, u64) + 'a;

/// Event names of a rebuild and of a replace pass: started, finished, interrupted, failed.
const JOB_EVENTS: [[&str; 4]; 2] = [
    [
        "rebuild-started",
        "rebuild-finished",
        "rebuild-interrupted",
        "rebuild-failed",
    ],
    [
        "replace-started",
        "replace-finished",
        "replace-interrupted",
        "replace-failed",
    ],
];

/// Runs every pending rebuild and replace until none is left (spares are promoted first).
pub fn run(
    array: &Array,
    opts: &RebuildOptions,
    progress: &mut ProgressFn<'_>,
) -> Result<Vec<PassReport>> {
    let _job = array.job_slot();
    let mut reports = Vec::new();
    array.promote_spares()?;
    let stopped = || opts.stop_requested();
    // A pass that ends without progress and without changing what is pending would repeat
    // forever: stop after a few.
    let mut idle_passes = 0;
    loop {
        let pending = array.pending_targets();
        if pending.is_empty() || stopped() {
            break;
        }
        if idle_passes >= 3 {
            crate::bail!(
                Io,
                "rebuild makes no progress on slots {:?}; see status",
                pending.iter().map(|p| p.0).collect::<Vec<_>>()
            );
        }
        let mut rebuilds: Vec<usize> = pending
            .iter()
            .filter(|(_, r)| *r)
            .map(|(s, _)| *s)
            .collect();
        // Members come back (re-add) in a pass of their own: a pass skips the rows its
        // targets hold only when every target holds them, and a re-added member beside a new
        // device would be rewritten in full, with zero entries for every empty row.
        let readds: Vec<usize> = rebuilds
            .iter()
            .copied()
            .filter(|&s| array.slot_readding(s))
            .collect();
        if !readds.is_empty() {
            rebuilds = readds;
        }
        let (slots, names) = if !rebuilds.is_empty() {
            (rebuilds.clone(), JOB_EVENTS[0])
        } else {
            (vec![pending[0].0], JOB_EVENTS[1])
        };
        let first = slots.first().copied();
        array.event(
            names[0],
            first,
            format!("slots {slots:?}, from the last checkpoint"),
        );
        let report = if !rebuilds.is_empty() {
            rebuild_pass(array, &rebuilds, opts, progress)
        } else {
            replace_pass(array, pending[0].0, opts, progress)
        };
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                array.event(names[3], first, format!("slots {slots:?}: {e}"));
                return Err(e);
            }
        };
        let left = array.pending_targets();
        if slots.iter().any(|s| left.iter().any(|(x, _)| x == s)) {
            array.event(
                names[2],
                first,
                format!(
                    "slots {slots:?} stopped after {} rows ({} bytes written); the next rebuild resumes from the checkpoint",
                    report.rows, report.bytes_written
                ),
            );
        } else {
            array.event(
                names[1],
                first,
                format!(
                    "slots {slots:?}: {} bytes written in {:.1} s{}",
                    report.bytes_written,
                    report.seconds,
                    if report.unrecoverable_blocks > 0 {
                        format!(
                            ", {} blocks could not be rebuilt (bad-block list)",
                            report.unrecoverable_blocks
                        )
                    } else {
                        String::new()
                    }
                ),
            );
        }
        let progressed = report.rows > 0 || left != pending;
        idle_passes = if progressed { 0 } else { idle_passes + 1 };
        reports.push(report);
        array.promote_spares()?;
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
        job::batch_rows(self.array.layout().chunk(), self.opts.batch_bytes)
    }

    /// After a batch: move checkpoints, account, and now and then make them durable.
    fn advance(&mut self, r1: u64, written: u64, progress: &mut ProgressFn<'_>) -> Result<()> {
        for (_, t) in &self.targets {
            t.move_checkpoint(r1);
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

    /// Skips the rows from `r0` that the data map shows empty (they hold zeros on every
    /// member: the targets get zeros there) or, with `held`, that every target holds already
    /// (re-added members, by the re-add map: nothing is written). Under their row locks,
    /// checked again there (a write marks its rows before it takes their locks), the
    /// checkpoints move past them. Returns the row reached: `r0` when row `r0` is not such.
    fn skip(
        &mut self,
        r0: u64,
        owner: u64,
        held: bool,
        progress: &mut ProgressFn<'_>,
    ) -> Result<u64> {
        let array = self.array;
        let run = |from: u64, max: u64| {
            if held {
                array.held_rows_from(from, max)
            } else {
                array.empty_rows_from(from, max)
            }
        };
        let max = (EMPTY_RUN_BYTES / array.layout().chunk()).max(1);
        let end = run(r0, max);
        if end == r0 {
            return Ok(r0);
        }
        let locks = array.row_locks();
        let _guard = locks.batch(r0..end, owner);
        let end = run(r0, end - r0);
        if end == r0 {
            return Ok(r0);
        }
        if held {
            self.report.held_rows += end - r0;
        } else {
            job::zero_targets(array, &self.targets, r0..end)?;
            self.report.empty_rows += end - r0;
        }
        self.advance(end, 0, progress)?;
        Ok(end)
    }

    fn make_durable(&mut self) -> Result<()> {
        job::make_targets_durable(self.array, &self.targets)?;
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
        for (slot, t) in &self.targets {
            // Only the target this pass filled: one that was swapped (a replace turned into a
            // rebuild) or dropped meanwhile is left to the next pass.
            if self
                .array
                .slot_target(*slot)
                .is_some_and(|x| Arc::ptr_eq(&x, t))
            {
                self.array.complete_target(*slot)?;
            }
        }
        self.report.seconds = self.start.elapsed().as_secs_f64();
        Ok(self.report)
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
    let start_row = targets.iter().map(|(_, t)| t.durable()).min().unwrap_or(0);
    for (_, t) in &targets {
        // Rows between the durable and the in-memory checkpoint are redone.
        t.redo_from_durable();
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
        rate: RateLimit::new(opts.max_rate, opts.min_rate),
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
    let mut pace = job::BatchPace::new(step);
    let mut r0 = pass.report.resumed_from_row;
    // Buffers live for the whole pass: fresh multi-MiB buffers per batch cost more in page
    // faults than the I/O itself.
    let full = step as usize * c;
    let mut outs: Vec<AlignedBuf> = pass
        .targets
        .iter()
        .map(|_| AlignedBuf::zeroed(full))
        .collect();
    let mut ins: Vec<AlignedBuf> = Vec::new();
    let mut scratch: Vec<AlignedBuf> = Vec::new();
    if let Redundancy::Parity { parity } = layout.redundancy() {
        ins = (0..n).map(|_| AlignedBuf::zeroed(full)).collect();
        scratch = (0..parity).map(|_| AlignedBuf::zeroed(c)).collect();
    }
    let mut spare_outs = Some(
        pass.targets
            .iter()
            .map(|_| AlignedBuf::zeroed(full))
            .collect::<Vec<_>>(),
    );
    let locks = array.row_locks();
    let owner = locks.job_owner();
    // Every target is its slot's own member come back: it keeps what nothing changed since.
    let readd = pass.targets.iter().all(|(_, t)| t.is_readd());
    // Pipelined: the target write of one batch overlaps the reads and reconstruction of the
    // next. Both batches stay locked until the earlier one is written and its checkpoint moved.
    // Rate-limited, one batch at a time: the pause between batches holds no rows.
    let one_at_a_time = pass.rate.limited();
    std::thread::scope(|scope| -> Result<()> {
        let mut inflight: Option<InFlight<'_, '_>> = None;
        while r0 < rows {
            if !pass.targets_alive() {
                let slots: Vec<usize> = pass.targets.iter().map(|(s, _)| *s).collect();
                crate::bail!(
                    Io,
                    "a rebuild target failed: {}",
                    array.target_failure(&slots)
                );
            }
            if opts.stop_requested() {
                break;
            }
            // Rows every target holds (re-added members), then rows the data map shows empty.
            let mut skipped = false;
            for held in [true, false] {
                if held && !readd {
                    continue;
                }
                let from = if held {
                    array.held_rows_from(r0, 1)
                } else {
                    array.empty_rows_from(r0, 1)
                };
                if from > r0 {
                    // The batch in flight first: checkpoints move in row order.
                    land(inflight.take(), &mut spare_outs, &mut pass, progress)?;
                    let end = pass.skip(r0, owner, held, progress)?;
                    if end > r0 {
                        r0 = end;
                        skipped = true;
                        break;
                    }
                }
            }
            if skipped {
                continue;
            }
            // The batch ends where the run it copies does (a region the data map shows empty,
            // or one every re-added target holds): with bitmap chunks smaller than a batch
            // (`create --bitmap-chunk`) it would copy those too.
            let mut r1 = array.data_rows_from(r0, pace.end(r0, rows) - r0);
            if readd {
                r1 = array.missed_rows_from(r0, r1 - r0);
            }
            if r1 == r0 {
                // The run ended since the skip looked (a trim emptied the region, a clear
                // cleared its bits): the next turn skips it.
                continue;
            }
            let b = (r1 - r0) as usize;
            let guard = locks.batch(r0..r1, owner);
            let began = Instant::now();
            let damage = job::rebuild_batch(
                array,
                &pass.targets,
                r0,
                r1,
                &mut ins,
                &mut scratch,
                &mut outs,
            )?;
            pace.after(began.elapsed());
            pass.report.checksum_repaired += damage.repaired();
            pass.report.unrecoverable_blocks += damage.unrecoverable();
            land(inflight.take(), &mut spare_outs, &mut pass, progress)?;
            let mine = std::mem::replace(&mut outs, spare_outs.take().expect("two buffer sets"));
            let targets = pass.targets.clone();
            let marks = damage.marks(targets.len());
            let write = move || {
                let written = job::write_rebuilt(array, &targets, r0, &mine, b * c, &marks);
                (mine, written)
            };
            // Inside the simulator the write runs on the calling thread (an actor's, where the
            // scheduler sees it, or the runner's); otherwise it overlaps the next batch's reads.
            let writer = if crate::sim::sched::in_simulation() {
                Writer::Done(Some(write()))
            } else {
                Writer::Thread(scope.spawn(write))
            };
            inflight = Some((writer, r0, r1, guard, damage));
            r0 = r1;
            // While users' requests are served, one batch at a time at the minimum rate.
            if pass.rate.yielding(array.requests_served()) || one_at_a_time {
                land(inflight.take(), &mut spare_outs, &mut pass, progress)?;
                pass.rate.pause(&|| opts.stop_requested());
            }
        }
        land(inflight.take(), &mut spare_outs, &mut pass, progress)?;
        Ok(())
    })?;
    if r0 < rows {
        // Stopped early: the checkpoint is recorded and the next run resumes there.
        pass.make_durable()?;
        pass.report.seconds = pass.start.elapsed().as_secs_f64();
        return Ok(pass.report);
    }
    pass.finish()
}

/// A batch whose target write is in flight: the writer, its rows, their locks, what it found.
type InFlight<'s, 'a> = (Writer<'s>, u64, u64, RowGuard<'a>, Damage);

/// Lands the batch in flight, if any: joins its write (its buffers come back to `spare`),
/// marks what it could not rebuild, moves the checkpoints past it and only then unlocks its
/// rows.
fn land(
    batch: Option<InFlight<'_, '_>>,
    spare: &mut Option<Vec<AlignedBuf>>,
    pass: &mut Pass<'_>,
    progress: &mut ProgressFn<'_>,
) -> Result<()> {
    let Some((h, r0, r1, guard, damage)) = batch else {
        return Ok(());
    };
    let (bufs, written) = h.join().expect("writer thread");
    let wrote = written.as_ref().is_ok_and(|&n| n > 0);
    job::settle_rebuilt(
        pass.array,
        &pass.targets,
        r0,
        &damage,
        wrote.then_some(&bufs[..]),
    )?;
    *spare = Some(bufs);
    pass.advance(r1, written?, progress)?;
    drop(guard);
    Ok(())
}

/// A target write in flight (or done, in the simulator): gives back its buffers and the bytes
/// written.
enum Writer<'s> {
    Thread(std::thread::ScopedJoinHandle<'s, (Vec<AlignedBuf>, Result<u64>)>),
    Done(Option<(Vec<AlignedBuf>, Result<u64>)>),
}

impl Writer<'_> {
    fn join(self) -> std::thread::Result<(Vec<AlignedBuf>, Result<u64>)> {
        match self {
            Writer::Thread(h) => h.join(),
            Writer::Done(r) => Ok(r.expect("ran")),
        }
    }
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
    let mut pace = job::BatchPace::new(step);
    let mut r0 = pass.report.resumed_from_row;
    let (_, t) = pass.targets[0].clone();
    debug_assert!(matches!(t.kind(), TargetKind::Replace { .. }));
    let mut buf = AlignedBuf::zeroed(step as usize * c);
    let locks = array.row_locks();
    let owner = locks.job_owner();
    while r0 < rows {
        if opts.stop_requested() {
            pass.make_durable()?;
            pass.report.seconds = pass.start.elapsed().as_secs_f64();
            return Ok(pass.report);
        }
        if !pass.targets_alive() {
            // The old member failed (the target now rebuilds) or the target failed.
            pass.make_durable()?;
            pass.report.seconds = pass.start.elapsed().as_secs_f64();
            return Ok(pass.report);
        }
        let end = pass.skip(r0, owner, false, progress)?;
        if end > r0 {
            r0 = end;
            continue;
        }
        // Ends where the run of rows that may hold data does (see the rebuild's loop).
        let r1 = array.data_rows_from(r0, pace.end(r0, rows) - r0);
        if r1 == r0 {
            continue; // emptied since the skip looked: the next turn skips it
        }
        let guard = locks.batch(r0..r1, owner);
        let began = Instant::now();
        if !pass.targets_alive() {
            // The old member failed (the target now rebuilds) or the target failed.
            pass.make_durable()?;
            pass.report.seconds = pass.start.elapsed().as_secs_f64();
            return Ok(pass.report);
        }
        let len = (r1 - r0) as usize * c;
        let read =
            job::read_for_replace(array, slot, &mut buf[..len], r0, r1, Some(job::SLOW_BATCH))?;
        let Some(read) = read else {
            // The member is failed now: the replace becomes a rebuild (the next pass).
            drop(guard);
            array.replace_source_lost(slot)?;
            pass.make_durable()?;
            pass.report.seconds = pass.start.elapsed().as_secs_f64();
            return Ok(pass.report);
        };
        // (A read that took the slow path for long stopped early.)
        let r1 = read.end;
        let len = (r1 - r0) as usize * c;
        if !pass.targets_alive() {
            // The source failed during the read (its blocks came from redundancy): the replace
            // is a rebuild of a new target now, whose checkpoint this pass does not move.
            // Writing and advancing here would move only the old target's checkpoint, and
            // writes to these rows would skip the device that then completes the slot.
            drop(guard);
            pass.make_durable()?;
            pass.report.seconds = pass.start.elapsed().as_secs_f64();
            return Ok(pass.report);
        }
        let (written, lost) = job::write_replace_batch(array, slot, &t, r0, &read, &buf[..len])?;
        pass.report.unrecoverable_blocks += lost;
        pass.advance(r1, written, progress)?;
        drop(guard);
        pace.after(began.elapsed());
        pass.rate.yielding(array.requests_served());
        pass.rate.pause(&|| opts.stop_requested());
        r0 = r1;
    }
    pass.finish()
}
