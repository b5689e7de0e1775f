//! Rebuild and replace: fill every target with its slot's contents, row batch by row batch.
//! Survivors are read sequentially in large I/Os and the target is written sequentially; the
//! rows of a batch are locked while it is reconstructed and written, and the target's
//! checkpoint moves past them before they unlock (so later writes to those rows go to the
//! target too). Every few seconds the targets are flushed and the checkpoint recorded in the
//! superblocks; a rebuild killed at any moment resumes from there.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Instant;

use super::RateLimit;
use crate::array::csum::{Digest, Expect, LOST_ENTRY, UNKNOWN_ENTRY};
use crate::array::{Array, KeptAsIs, RowGuard, Target, TargetKind, Verified, WriteKind};
use crate::buf::AlignedBuf;
use crate::error::Result;
use crate::layout::{Level, Redundancy};
use crate::plan::{self, Cell, CopyChoice, Recovered};

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
            min_rate: Some(super::DEFAULT_MIN_RATE),
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
        super::batch_rows(self.array.layout().chunk(), self.opts.batch_bytes)
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
            for (slot, t) in &self.targets {
                // A target that fails here is failed; the pass notices at its next batch.
                array.target_zero(*slot, t, r0..end)?;
            }
            self.report.empty_rows += end - r0;
        }
        self.advance(end, 0, progress)?;
        Ok(end)
    }

    fn make_durable(&mut self) -> Result<()> {
        for (slot, t) in &self.targets {
            // The target's checksum records go to its log before the flush that makes the
            // checkpoint durable.
            if let Err(e) = self
                .array
                .csum_sync_dev(&t.dev)
                .and_then(|()| t.dev.member.flush())
            {
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
    let mut pace = super::BatchPace::new(step);
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
    let readd = pass.targets.iter().all(|(_, t)| t.readd);
    // Pipelined: the target write of one batch overlaps the reads and reconstruction of the
    // next. Both batches stay locked until the earlier one is written and its checkpoint moved.
    // Rate-limited, one batch at a time: the pause between batches holds no rows.
    let one_at_a_time = pass.rate.limited();
    std::thread::scope(|scope| -> Result<()> {
        let mut inflight: Option<InFlight<'_, '_>> = None;
        while r0 < rows {
            if !pass.targets_alive() {
                crate::bail!(Io, "a rebuild target failed; see status");
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
            let damage = fill_batch(
                array,
                &pass.targets,
                r0,
                r1,
                &mut ins,
                &mut scratch,
                &mut outs,
            )?;
            pace.after(began.elapsed());
            pass.report.checksum_repaired += damage.repaired;
            pass.report.unrecoverable_blocks += damage.poisoned.len() as u64;
            land(inflight.take(), &mut spare_outs, &mut pass, progress)?;
            let mine = std::mem::replace(&mut outs, spare_outs.take().expect("two buffer sets"));
            let targets = pass.targets.clone();
            let marks = damage.marks(targets.len());
            let write = move || {
                let mut written = 0;
                for (ti, (slot, t)) in targets.iter().enumerate() {
                    match array.target_write(
                        *slot,
                        &t.dev,
                        Verified::rebuilt_batch(&mine[ti][..b * c]),
                        r0,
                        &marks[ti],
                    ) {
                        Ok(true) => written += (b * c) as u64,
                        Ok(false) => {}
                        Err(e) => return (mine, Err(e)),
                    }
                }
                (mine, Ok(written))
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
    poison(
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

/// What a batch found wrong on the survivors.
/// A checksummed block: the unit a mirror rebuild falls back to when no copy reads whole.
const BLK: usize = crate::array::csum::BLOCK as usize;

#[derive(Default)]
struct Damage {
    /// Survivor blocks repaired.
    repaired: u64,
    /// (target index, byte offset in the batch) of target blocks rebuilt from data nothing
    /// vouched for (unchecked survivor blocks where no redundancy was left to check them):
    /// their entries are set unknown, so they never vouch for what they hold.
    unverified: Vec<(usize, usize)>,
    /// (target index, byte offset in the batch) of target blocks that could not be rebuilt.
    poisoned: Vec<(usize, usize)>,
    /// (slot, byte offset in the batch) of survivor blocks lost with them (unreadable or
    /// failing their checksums where parity no longer covers the column).
    lost: Vec<(usize, usize)>,
    /// The bytes of those of them that fail their entries or have none, as read (slot, byte
    /// offset in the batch, bytes): once the list holds them, durably, their entries are made
    /// to match them, so that a later change of the placeholder (rot) is seen (row.rs
    /// `judge_blocks`).
    relisted: Vec<(usize, usize, Vec<u8>)>,
    /// Byte offsets in the batch of the columns among them whose placeholders (the targets'
    /// blocks and the survivors' as read) agree with every parity of the row: only there are
    /// the listed blocks' entries made to match them. Elsewhere (RAID6 with a survivor
    /// rotten: the target rebuilt from P disagrees with Q) a placeholder that verified would
    /// feed a reconstruction through the other parity (simulator seed 38000292).
    consistent: Vec<usize>,
}

impl Damage {
    /// Per target, the entries its write gives the blocks nothing verified (unknown) and the
    /// ones it could not rebuild (matching nothing): noted and recorded with the write itself,
    /// never the digests of what the blocks hold. (Recorded after the write, as before, a
    /// crash between left the noted digest to the next open, which took it for a completed
    /// write and vouched for the block.)
    fn marks(&self, targets: usize) -> Vec<Vec<(usize, Digest)>> {
        let mut marks = vec![Vec::new(); targets];
        for &(ti, at) in &self.unverified {
            marks[ti].push((at, UNKNOWN_ENTRY));
        }
        for &(ti, at) in &self.poisoned {
            marks[ti].push((at, LOST_ENTRY));
        }
        marks
    }
}

/// Fills `outs` (one buffer per target) with the target slots' contents for rows [r0, r1).
/// Survivors' blocks are checked against their checksums: a bad one is treated as missing
/// (and repaired) when parity covers it, and otherwise the target block is marked so that it
/// reads as an error.
#[allow(clippy::too_many_arguments)]
fn fill_batch(
    array: &Array,
    targets: &[(usize, Arc<Target>)],
    r0: u64,
    r1: u64,
    ins: &mut [AlignedBuf],
    scratch: &mut [AlignedBuf],
    outs: &mut [AlignedBuf],
) -> Result<Damage> {
    let mut damage = Damage::default();
    let layout = array.layout();
    let n = layout.members();
    let c = layout.chunk() as usize;
    let rows = array.rows();
    let per_row = c / BLK;
    let b = (r1 - r0) as usize;
    array.check_alive()?;
    let lost = array.lost();
    match layout.redundancy() {
        Redundancy::Parity { parity } => {
            // One sequential read per survivor for the whole batch, all survivors at once.
            // Per survivor, the blocks (indices in the batch) that are not plainly good; None
            // when the member is gone.
            let read_one = |slot: usize, buf: &mut AlignedBuf| -> Option<Survivor> {
                let mut unreadable = Vec::new();
                if array.member_read(slot, &mut buf[..b * c], r0, 0).is_err() {
                    // A few bad sectors must not cost the member: read block by block and
                    // treat the unreadable ones like blocks failing their checksums (rebuilt
                    // from the others where parity allows, and rewritten).
                    for blk in 0..b * per_row {
                        let (row, within) = (r0 + (blk / per_row) as u64, (blk % per_row) * BLK);
                        // None when failed now (dead, or past its error limit).
                        array.source(slot, row)?;
                        let dst = &mut buf[blk * BLK..(blk + 1) * BLK];
                        if array.member_read(slot, dst, row, within as u64).is_err() {
                            dst.fill(0);
                            unreadable.push(blk);
                        }
                    }
                }
                let d = array.source(slot, r0)?;
                let (mut bad, mut unknown) =
                    array.csum_blocks(&d, r0, array.cell_offset(r0, 0), &buf[..b * c]);
                // Blocks on the bad-block list are judged by their entries, as reads judge them
                // (row.rs `judge_blocks`): every listing makes a placeholder's entry match it
                // where the row agrees with it, so one failing it rotted since, and rebuilt
                // from, it would carry the rot into the target.
                bad.retain(|x| unreadable.binary_search(x).is_err());
                unknown.retain(|x| unreadable.binary_search(x).is_err());
                Some(Survivor {
                    bad,
                    unreadable,
                    unknown,
                })
            };
            let read: Vec<Option<Survivor>> = if crate::sim::sched::in_simulation() {
                // In the simulator, on the calling thread (an actor's or the runner's).
                ins.iter_mut()
                    .zip(&lost)
                    .enumerate()
                    .map(|(slot, (buf, &gone))| if gone { None } else { read_one(slot, buf) })
                    .collect()
            } else {
                std::thread::scope(|scope| {
                    let read_one = &read_one;
                    let handles: Vec<_> = ins
                        .iter_mut()
                        .zip(&lost)
                        .enumerate()
                        .map(|(slot, (buf, &gone))| {
                            (!gone).then(|| scope.spawn(move || read_one(slot, buf)))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.and_then(|h| h.join().expect("reader thread")))
                        .collect()
                })
            };
            if read.iter().filter(|x| x.is_none()).count() > parity {
                array.check_alive()?;
                crate::bail!(
                    ArrayFailed,
                    "rows {r0}..{r1}: too many members unreadable to rebuild"
                );
            }
            // Blocks failing their checksums count as checksum errors on their members.
            for (slot, x) in read.iter().enumerate() {
                let Some(x) = x else { continue };
                if let Some(&blk) = x.bad.first() {
                    let row = r0 + (blk / per_row) as u64;
                    if let Some(d) = array.source(slot, row) {
                        d.csum_error(
                            x.bad.len() as u64,
                            array.cell_offset(row, 0) + ((blk % per_row) * BLK) as u64,
                        );
                    }
                }
            }
            let target_of: Vec<Option<usize>> = (0..n)
                .map(|slot| targets.iter().position(|(s, _)| *s == slot))
                .collect();
            let state = |slot: usize, blk: usize| -> Cell {
                match &read[slot] {
                    None => Cell::Absent,
                    Some(x) if x.unreadable.binary_search(&blk).is_ok() => Cell::Unreadable,
                    Some(x) if x.bad.binary_search(&blk).is_ok() => Cell::Bad,
                    Some(x) if x.unknown.binary_search(&blk).is_ok() => Cell::Unchecked,
                    Some(_) => Cell::Good,
                }
            };
            // Block columns (indices in the batch) where some survivor's block is not plainly
            // good: recovered block by block below, after the whole-chunk pass.
            let mut damaged: Vec<usize> = read
                .iter()
                .flatten()
                .flat_map(|x| x.bad.iter().chain(&x.unreadable).chain(&x.unknown))
                .copied()
                .collect();
            damaged.sort_unstable();
            damaged.dedup();
            for r in r0..r1 {
                let k = (r - r0) as usize;
                let cell = k * c..(k + 1) * c;
                // Reconstruct in place: survivors' slices are read, targets' slices receive
                // their chunk, any other missing chunk lands in scratch.
                let mut per_slot: Vec<Option<&mut [u8]>> = (0..n).map(|_| None).collect();
                let mut outs_it: Vec<Option<&mut [u8]>> = outs
                    .iter_mut()
                    .map(|o| Some(&mut o[cell.clone()]))
                    .collect();
                let mut scratch_it = scratch.iter_mut();
                for (slot, buf) in ins.iter_mut().enumerate() {
                    per_slot[slot] = if read[slot].is_some() {
                        Some(&mut buf[cell.clone()])
                    } else {
                        match target_of[slot] {
                            Some(ti) => outs_it[ti].take(),
                            None => scratch_it.next().map(|s| &mut s[..]),
                        }
                    };
                }
                let order = array.row_slots(r, parity);
                let cells: Vec<Cell> = order
                    .iter()
                    .map(|&slot| {
                        if read[slot].is_some() {
                            Cell::Good
                        } else {
                            Cell::Absent
                        }
                    })
                    .collect();
                let mut refs: Vec<&mut [u8]> = order
                    .iter()
                    .map(|&slot| per_slot[slot].take().expect("every slot has a buffer"))
                    .collect();
                // Columns with damage are redone below; here every survivor counts as good.
                plan::recover(array.kernel(), &mut refs, &cells, parity, false, |_, _| {
                    Vec::new()
                });
            }
            for blk in damaged {
                recover_block(
                    array,
                    (r0, blk),
                    parity,
                    &state,
                    &target_of,
                    ins,
                    outs,
                    &mut damage,
                )?;
            }
        }
        Redundancy::Mirror { copies } => {
            for (ti, (slot, _)) in targets.iter().enumerate() {
                for r in r0..r1 {
                    let k = (r - r0) as usize;
                    let Some((chunk, copy)) = layout.mirror_chunk_at(rows, *slot, r) else {
                        outs[ti][k * c..(k + 1) * c].fill(0); // a cell no chunk uses
                        continue;
                    };
                    let others: Vec<(usize, u64)> = (0..copies)
                        .filter(|&o| o != copy)
                        .map(|o| layout.mirror_cell(chunk, o))
                        .filter(|&(s2, _)| !lost[s2])
                        .collect();
                    if others.is_empty() {
                        array.check_alive()?;
                        crate::bail!(
                            ArrayFailed,
                            "logical chunk {chunk}: no copy left to rebuild slot {slot} from"
                        );
                    }
                    // The common case: the first other copy reads whole and vouches for every
                    // block.
                    let out = &mut outs[ti][k * c..(k + 1) * c];
                    let (s2, row2) = others[0];
                    let whole = array.member_read(s2, out, row2, 0).is_ok();
                    if whole
                        && array.source(s2, row2).is_some_and(|d| {
                            let (bad, unknown) =
                                array.csum_blocks(&d, row2, array.cell_offset(row2, 0), out);
                            bad.is_empty() && unknown.is_empty()
                        })
                    {
                        continue;
                    }
                    mirror_blocks(array, chunk, &others, whole, out, (ti, k * c), &mut damage)?;
                }
            }
        }
    }
    Ok(damage)
}

/// A survivor's blocks in a rebuild batch that are not plainly good (indices in the batch,
/// ascending).
struct Survivor {
    /// Failing their checksums.
    bad: Vec<usize>,
    /// Unreadable (zeros in the buffer).
    unreadable: Vec<usize>,
    /// Entries unknown (a damaged table page).
    unknown: Vec<usize>,
}

/// Recovers block `blk` (index in the batch from row `r0`) of every cell of its row with
/// [`plan::recover`], from each survivor's state there: targets get the block, survivors
/// whose block was bad, unreadable or unchecked are rewritten; where the row's redundancy
/// cannot settle it, the targets' blocks are poisoned and the survivors' damaged blocks lost.
#[allow(clippy::too_many_arguments)]
fn recover_block(
    array: &Array,
    (r0, blk): (u64, usize),
    parity: usize,
    state: &dyn Fn(usize, usize) -> Cell,
    target_of: &[Option<usize>],
    ins: &[AlignedBuf],
    outs: &mut [AlignedBuf],
    damage: &mut Damage,
) -> Result<()> {
    let c = array.layout().chunk() as usize;
    let per_row = c / BLK;
    let (k, j) = (blk / per_row, blk % per_row);
    let r = r0 + k as u64;
    let at = k * c + j * BLK;
    let order = array.row_slots(r, parity);
    let cells: Vec<Cell> = order.iter().map(|&s| state(s, blk)).collect();
    let mut blocks: Vec<Vec<u8>> = order
        .iter()
        .zip(&cells)
        .map(|(&s, cell)| {
            if cell.present() {
                ins[s][at..at + BLK].to_vec()
            } else {
                vec![0u8; BLK]
            }
        })
        .collect();
    let off = array.cell_offset(r, (j * BLK) as u64);
    let outcome = {
        let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(|x| &mut x[..]).collect();
        plan::recover(
            array.kernel(),
            &mut refs,
            &cells,
            parity,
            array.checksum_algo().is_some(),
            |pos, bytes| {
                array
                    .source(order[pos], r)
                    .map(|d| array.csum_mismatches(&d, r, off, bytes))
                    .unwrap_or_default()
            },
        )
    };
    // Cells nothing could verify (entries unknown, no redundancy left to check them): a
    // target rebuilt from them would agree with them, rot included, and then vouch for them
    // (simulator seed 1322). Settled as a row the recovery could not settle (they are listed
    // with it, below).
    let unverifiable: Vec<usize> = match &outcome {
        Recovered::Rebuilt { unchecked, .. } => unchecked.clone(),
        _ => Vec::new(),
    };
    let outcome = if unverifiable.is_empty() {
        outcome
    } else {
        Recovered::Inconsistent {
            unchecked: unverifiable.clone(),
        }
    };
    match outcome {
        Recovered::Intact => {}
        Recovered::Rebuilt {
            rewrite, vouched, ..
        } => {
            if !vouched && array.checksum_algo().is_some() {
                damage
                    .unverified
                    .extend(target_of.iter().flatten().map(|&ti| (ti, at)));
            }
            let d_count = order.len() - parity;
            for (pos, &s) in order.iter().enumerate() {
                if let Some(ti) = target_of[s] {
                    outs[ti][at..at + BLK].copy_from_slice(&blocks[pos]);
                } else if rewrite.contains(&pos) {
                    // Vouched: rebuilt from cells that matched their entries; otherwise the
                    // row agreed with its parity as read (plan::recover accepts nothing else).
                    let cell = if vouched {
                        array.judged_good(&blocks[pos])
                    } else {
                        Verified::agreed(&blocks[pos])
                    };
                    array.repair_write(
                        s,
                        cell,
                        r,
                        (j * BLK) as u64,
                        WriteKind::of_cell(pos, d_count),
                    )?;
                    if cells[pos] != Cell::Unchecked {
                        damage.repaired += 1;
                    }
                }
            }
        }
        Recovered::Lost { .. }
        | Recovered::Contradicted { .. }
        | Recovered::Inconsistent { .. } => {
            for ti in target_of.iter().flatten() {
                damage.poisoned.push((*ti, at));
            }
            // The survivors' blocks nothing verified go with them: the targets' blocks, kept
            // as placeholders consistent with the row, were computed from them and would
            // confirm them to every later check (an outside attack: RAID5, one survivor
            // rotten with its entry unknown, another failing its entry; the rot then read back
            // as data with the array whole).
            // So do the missing members' data blocks of the column that no target takes now:
            // anything rebuilt for them later rests on the same cells (a second outside attack:
            // RAID6 with two members out, the second rebuild rebuilt the other missing block
            // from the listed one, and it read back wrong). Only data blocks that verify
            // themselves stay readable. (Parity blocks are never listed.)
            damage.lost.extend(
                order
                    .iter()
                    .zip(&cells)
                    .filter(|(&s, cell)| {
                        matches!(cell, Cell::Bad | Cell::Unreadable | Cell::Unchecked)
                            || (**cell == Cell::Absent && target_of[s].is_none())
                    })
                    .map(|(&s, _)| (s, at)),
            );
            damage.relisted.extend(
                order
                    .iter()
                    .zip(&cells)
                    .filter(|(_, cell)| matches!(cell, Cell::Bad | Cell::Unchecked))
                    .map(|(&s, _)| (s, at, ins[s][at..at + BLK].to_vec())),
            );
            let column: Option<Vec<&[u8]>> = order
                .iter()
                .zip(&cells)
                .map(|(&s, cell)| match target_of[s] {
                    Some(ti) => Some(&outs[ti][at..at + BLK]),
                    None if cell.present() => Some(&ins[s][at..at + BLK]),
                    None => None,
                })
                .collect();
            if let Some(col) = column {
                let d_count = col.len() - parity;
                let mut pq = [vec![0u8; BLK], vec![0u8; BLK]];
                {
                    let [p, q] = &mut pq;
                    (array.kernel().gen_pq)(
                        &col[..d_count],
                        p,
                        (parity == 2).then_some(&mut q[..]),
                    );
                }
                if (d_count..col.len()).all(|i| pq[i - d_count] == col[i]) {
                    damage.consistent.push(at);
                }
            }
        }
    }
    Ok(())
}

/// Rebuilds one mirror chunk into `out` block by block, when its first other copy did not read
/// whole or does not vouch for every block: every other copy (`others`: slot, row) is read,
/// and plan::choose_copy picks each block's source, as reads do. The first copy's whole read
/// is not repeated: `first_whole` says whether it succeeded (its bytes are then in `out`);
/// after a failed one its blocks are read one by one, so a bad sector counts one error per
/// read that hit it, as before. Copies found bad or
/// unreadable are rewritten from the chosen one; a block no copy settles is poisoned on the
/// target (`at`: target index, byte offset in the batch), so it reads as an error. Without
/// checksums a lost block cannot be marked on a mirror: the rebuild stops instead.
#[allow(clippy::too_many_arguments)]
fn mirror_blocks(
    array: &Array,
    chunk: u64,
    others: &[(usize, u64)],
    first_whole: bool,
    out: &mut [u8],
    (ti, at): (usize, usize),
    damage: &mut Damage,
) -> Result<()> {
    let c = out.len();
    // Per other copy: its bytes, and the state of each of its blocks.
    let mut bytes: Vec<AlignedBuf> = others.iter().map(|_| AlignedBuf::zeroed(c)).collect();
    let mut states: Vec<Vec<Cell>> = Vec::with_capacity(others.len());
    for (o, &(s2, row2)) in others.iter().enumerate() {
        let buf = &mut bytes[o];
        let mut st = vec![Cell::Good; c / BLK];
        let whole = if o == 0 {
            if first_whole {
                buf.copy_from_slice(out);
            }
            first_whole
        } else {
            array.member_read(s2, buf, row2, 0).is_ok()
        };
        if !whole {
            for (b, cell) in st.iter_mut().enumerate() {
                let blk = &mut buf[b * BLK..(b + 1) * BLK];
                if array.source(s2, row2).is_none() {
                    *cell = Cell::Absent;
                } else if array.member_read(s2, blk, row2, (b * BLK) as u64).is_err() {
                    *cell = Cell::Unreadable;
                }
            }
        }
        if let Some(d) = array.source(s2, row2) {
            let (mut bad, mut unknown) =
                array.csum_blocks(&d, row2, array.cell_offset(row2, 0), buf);
            // Unreadable blocks (zeros here) are read errors already, not checksum errors.
            bad.retain(|&i| st[i] == Cell::Good);
            unknown.retain(|&i| st[i] == Cell::Good);
            if let Some(&i) = bad.first() {
                d.csum_error(
                    bad.len() as u64,
                    array.cell_offset(row2, 0) + (i * BLK) as u64,
                );
            }
            for i in bad {
                st[i] = Cell::Bad;
            }
            for i in unknown {
                st[i] = Cell::Unchecked;
            }
        } else {
            st.iter_mut().for_each(|x| *x = Cell::Absent);
        }
        states.push(st);
    }
    for b in 0..c / BLK {
        let blk = b * BLK..(b + 1) * BLK;
        let mut cells: Vec<Cell> = states.iter().map(|st| st[b]).collect();
        // Copies hold the same data: the known entry of a copy failing it vouches for an
        // unchecked copy (its own entry unknown, a damaged or unreadable table page) that
        // matches it, as in the resync.
        if cells.contains(&Cell::Bad) && cells.contains(&Cell::Unchecked) {
            let wanted: Vec<Digest> = (0..others.len())
                .filter(|&o| cells[o] == Cell::Bad)
                .filter_map(|o| {
                    let (s2, row2) = others[o];
                    match array.old_entry(s2, row2, blk.start as u64) {
                        Expect::Known(d) => Some(d),
                        Expect::Unknown => None,
                    }
                })
                .collect();
            for o in 0..others.len() {
                if cells[o] == Cell::Unchecked
                    && wanted.contains(&array.csum_digest(&bytes[o][blk.clone()]))
                {
                    cells[o] = Cell::Good;
                }
            }
        }
        let redundant = array.layout().copies() >= 2;
        let choice = plan::choose_copy(&cells, redundant, |i, j| {
            bytes[i][blk.clone()] == bytes[j][blk.clone()]
        });
        let from = match choice {
            CopyChoice::Use { copy, rewrite } => {
                for o in rewrite {
                    let (s2, row2) = others[o];
                    let good = bytes[copy][blk.clone()].to_vec();
                    let good = array.judged_good(&good);
                    array.repair_write(s2, good, row2, blk.start as u64, WriteKind::Data)?;
                    if cells[o] != Cell::Unchecked {
                        damage.repaired += 1;
                    }
                }
                Some(copy)
            }
            // Unchecked copies that agree (two or more: independent redundancy) are copied
            // with the target's entry unknown.
            CopyChoice::Unverified { copy } => {
                damage.unverified.push((ti, at + b * BLK));
                Some(copy)
            }
            // A lone unchecked copy is no majority: copied, the target would agree with it and
            // the two would read as confirmed by each other, rot included (simulator seed
            // 30000869: a re-add resumed after a power cut copied a rotten block whose table
            // page was damaged, and it read back with no error). The target is poisoned, so
            // the block reads as an error until it is written, as it did before the rebuild.
            // (Poisoning was tried before and dropped on seed 15001394, when the target's
            // entries were recorded after its write and a cut could keep one without the
            // other; the lost entry is now recorded with the write itself.)
            CopyChoice::Unconfirmed { .. }
            | CopyChoice::Disagree { .. }
            | CopyChoice::Corrupt { .. }
            | CopyChoice::Unavailable => None,
        };
        match from {
            Some(o) => out[blk.clone()].copy_from_slice(&bytes[o][blk]),
            None if array.checksum_algo().is_none() => {
                array.check_alive()?;
                crate::bail!(
                    ArrayFailed,
                    "logical chunk {chunk}: no readable copy of block {b} to rebuild from"
                );
            }
            None => {
                // Lost: poisoned on the target (its checksum entry can match nothing), so it
                // reads as an error, never as zeros, until it is written again.
                out[blk].fill(0);
                damage.poisoned.push((ti, at + b * BLK));
            }
        }
    }
    Ok(())
}

/// Lists target blocks that could not be rebuilt, and the survivor blocks lost with them, so
/// they read as errors: on the bad-block list (parity levels, with or without checksums).
/// The targets' write gave them entries that can never match any content, or unknown ones
/// ([`Damage::marks`]). Once the list holding them is durable, every listed block's entry is
/// made to match its placeholder (the bytes the target's write put there, `written`, one
/// buffer per target; the survivors' as read), so that rot of a placeholder is seen and never
/// feeds the reconstruction of another block (row.rs `judge_blocks`; an outside attack: a
/// poisoned target block rotted and a neighbour rebuilt from it read back wrong).
fn poison(
    array: &Array,
    targets: &[(usize, Arc<Target>)],
    r0: u64,
    damage: &Damage,
    written: Option<&[AlignedBuf]>,
) -> Result<()> {
    let c = array.layout().chunk();
    for &(ti, at) in &damage.poisoned {
        array.mark_lost_block(targets[ti].0, r0 * c + at as u64);
    }
    for &(slot, at) in &damage.lost {
        array.mark_lost_block(slot, r0 * c + at as u64);
    }
    let listed = |slot: usize, at: usize| array.is_lost_block(slot, r0 * c + at as u64);
    let target_listed: Vec<(usize, usize)> = match written {
        Some(_) if array.has_checksums() => damage
            .poisoned
            .iter()
            .chain(&damage.unverified)
            .copied()
            .filter(|&(ti, at)| listed(targets[ti].0, at) && damage.consistent.contains(&at))
            .collect(),
        _ => Vec::new(),
    };
    if !damage.relisted.is_empty() || !target_listed.is_empty() {
        // The list holding them durably first: a crash between the two must not leave an
        // unlisted block whose entry matches its rot.
        array.persist()?;
        for (ti, at) in target_listed {
            let bufs = written.expect("written");
            let (row, within) = (r0 + (at as u64) / c, (at as u64) % c);
            array.csum_record(
                &targets[ti].1.dev,
                array.cell_offset(row, within),
                Verified::listed(&bufs[ti][at..at + BLK]),
            );
        }
        // (Data blocks only: a parity block is never listed, and is judged by its entry.)
        for (slot, at, bytes) in &damage.relisted {
            let (row, within) = (r0 + (*at as u64) / c, (*at as u64) % c);
            if !listed(*slot, *at) || !damage.consistent.contains(at) {
                continue;
            }
            if let Some(dev) = array.source(*slot, row) {
                array.csum_record(
                    &dev,
                    array.cell_offset(row, within),
                    Verified::listed(bytes),
                );
            }
        }
    }
    if !damage.poisoned.is_empty() {
        array.event(
            "bad-blocks",
            targets.first().map(|t| t.0),
            format!(
                "{} blocks could not be rebuilt in rows from {r0} (unreadable or corrupt on a survivor where no redundancy was left): they read as errors until written again",
                damage.poisoned.len()
            ),
        );
    }
    Ok(())
}

/// The entries a replace batch's target write gives the blocks the read could neither verify
/// nor recover (byte offset in the batch, entry): the entry they had on the old member (a
/// fresh digest would vouch for them), or, for the ones it could not read at all, an entry
/// matching nothing. Noted and recorded with the write itself ([`Damage::marks`]).
fn kept_marks(kept: &[KeptAsIs]) -> Vec<(usize, Digest)> {
    kept.iter()
        .map(|k| {
            let entry = match k.entry {
                Some(Expect::Known(d)) => d,
                Some(Expect::Unknown) => UNKNOWN_ENTRY,
                None => LOST_ENTRY,
            };
            (k.at, entry)
        })
        .collect()
}

/// After a replace batch from row `r0` was written to the target `dev` with [`kept_marks`]
/// (`written`: the batch's bytes): lists the blocks the read could not read at all as lost,
/// and says what was kept. Once the list holding them is durable, their entries on the target
/// are made to match the placeholders written there (as [`poison`] does). Returns how many
/// were lost.
fn list_kept(
    array: &Array,
    (slot, dev): (usize, &crate::array::Dev),
    r0: u64,
    kept: &[KeptAsIs],
    written: &[u8],
) -> Result<u64> {
    if kept.is_empty() {
        return Ok(0);
    }
    let c = array.layout().chunk();
    let mut lost = 0;
    let mut listed = Vec::new();
    for k in kept.iter().filter(|k| k.entry.is_none()) {
        lost += 1;
        if array.mark_lost_block(slot, r0 * c + k.at as u64)
            || array.is_lost_block(slot, r0 * c + k.at as u64)
        {
            listed.push(k.at);
        }
    }
    if !listed.is_empty() && array.has_checksums() {
        array.persist()?;
        for at in listed {
            let (row, within) = (r0 + at as u64 / c, at as u64 % c);
            array.csum_record(
                dev,
                array.cell_offset(row, within),
                Verified::listed(&written[at..at + BLK]),
            );
        }
    }
    array.event(
        "bad-blocks",
        Some(slot),
        format!(
            "replace from row {r0}: {} blocks could be neither verified nor rebuilt and were copied as they are, keeping the old member's checksum entries (they read as before: an error, or checked by redundancy), {lost} of them unreadable and listed bad",
            kept.len()
        ),
    );
    Ok(lost)
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
    let mut pace = super::BatchPace::new(step);
    let mut r0 = pass.report.resumed_from_row;
    let (_, t) = pass.targets[0].clone();
    debug_assert!(matches!(t.kind, TargetKind::Replace { .. }));
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
        let read = if array.slot_usable(slot) {
            // Unreadable blocks on the source are rebuilt from redundancy (and rewritten).
            array.read_rows_verified(slot, &mut buf[..len], r0..r1, Some(super::SLOW_BATCH))
        } else {
            Err(crate::Error::new(
                crate::ErrorKind::Io,
                "source member failed",
            ))
        };
        if read.is_err() && !array.slot_usable(slot) {
            // The member is failed now: the replace becomes a rebuild (the next pass).
            drop(guard);
            array.replace_source_lost(slot)?;
            pass.make_durable()?;
            pass.report.seconds = pass.start.elapsed().as_secs_f64();
            return Ok(pass.report);
        }
        // The array failed: the replace stops with the error.
        let (kept, r1) =
            read.map_err(|e| e.context(format!("replacing slot {slot}, rows {r0}..{r1}")))?;
        // (A read that took the slow path for long stopped early, at row r1.)
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
        let good = array.judged_good(&buf[..len]);
        let ok = array.target_write(slot, &t.dev, good, r0, &kept_marks(&kept))?;
        if ok {
            pass.report.unrecoverable_blocks +=
                list_kept(array, (slot, &t.dev), r0, &kept, &buf[..len])?;
        }
        pass.advance(r1, if ok { len as u64 } else { 0 }, progress)?;
        drop(guard);
        pace.after(began.elapsed());
        pass.rate.yielding(array.requests_served());
        pass.rate.pause(&|| opts.stop_requested());
        r0 = r1;
    }
    pass.finish()
}

/// After a resync of `ranges` (an unclean stop): rows a replace target already holds may be
/// torn between the slot's member and the target. Copies them from the (resynced) member
/// again, batch by batch under the rows' locks. Called with the job slot held.
pub(crate) fn refresh_replace_targets(
    array: &Array,
    ranges: &[std::ops::Range<u64>],
) -> Result<()> {
    let c = array.layout().chunk();
    let step = super::batch_rows(c, super::MAX_BATCH_BYTES);
    let locks = array.row_locks();
    let owner = locks.job_owner();
    let mut buf = AlignedBuf::zeroed((step * c) as usize);
    for slot in 0..array.layout().members() {
        let Some(t) = array.slot_target(slot) else {
            continue;
        };
        if t.kind == TargetKind::Rebuild {
            continue;
        }
        for r in ranges {
            let mut r0 = r.start;
            while r0 < r.end.min(t.checkpoint.load(Ordering::Acquire)) {
                let r1 = (r0 + step).min(r.end);
                let _g = locks.batch(r0..r1, owner);
                let r1 = r1.min(t.checkpoint.load(Ordering::Acquire)).max(r0);
                let len = ((r1 - r0) * c) as usize;
                if len > 0 {
                    // From the slot's member, or from redundancy where it cannot be read: the
                    // member being replaced may have died since (the resync before this
                    // settled the rows, so they can be rebuilt).
                    let (kept, _) =
                        array.read_rows_verified(slot, &mut buf[..len], r0..r1, None)?;
                    let good = array.judged_good(&buf[..len]);
                    if array.target_write(slot, &t.dev, good, r0, &kept_marks(&kept))? {
                        list_kept(array, (slot, &t.dev), r0, &kept, &buf[..len])?;
                    }
                }
                r0 = r1.max(r0 + 1);
            }
        }
    }
    Ok(())
}
