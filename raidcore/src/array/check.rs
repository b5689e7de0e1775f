//! Scrub and resync of rows, the engine side: read rows in batches (members in parallel), check
//! every 4 KiB block against its checksum, parity (RAID5/F1/6) and mirror copies (RAID1/10),
//! report each problem with its member, member offset, logical offset and kind, and repair
//! from good redundancy, through the row executor (`row.rs`). The drivers in `jobs/scrub.rs`
//! (checkpoints, the scrub record, events) call it through the job API (`job.rs`).
//!
//! its checksum, parity (RAID5/F1/6) and mirror copies (RAID1/10), report each problem with its
//! member, member offset, logical offset and kind, and repair from good redundancy. Checksums
//! decide which copy is bad; without them RAID6 locates a single bad chunk from the syndromes,
//! three or more mirror copies take the majority, RAID5 takes the data as right, and otherwise
//! the scrub says the good copy cannot be decided. Resync (after an unclean stop) verifies
//! before it trusts: no byte is written and no checksum entry recorded from data that was read
//! but not verified. Parity is recomputed from data blocks that match their entries; a row
//! consistent as read has its lagging entries recorded (entries are logged after their data,
//! and rot in one block would break the parity); a block failing its entry is rebuilt from the
//! others (`plan::recover`) when the result matches its entry and the other parity, and
//! rewritten; mirror copies are taken from one that verifies, or from all copies agreeing (or
//! a majority). What nothing decides in a parity row is reported and nothing read there is
//! trusted: its data blocks go on the bad-block list (durably, before anything else), so reads
//! of them fail until written rather than return bytes nothing verified (`list_undecided`).
//! Without checksums the data wins, as in md, except a RAID6 data block both syndromes name.
//! A full scrub keeps its checkpoint and result in the superblocks and resumes when interrupted.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;

use super::csum::{self, Digest, Expect, BLOCK};
use super::pace::{self, RateLimit};
use super::{Array, TargetKind, Verified, WriteKind};
use crate::buf::AlignedBuf;
use crate::error::Result;
use crate::layout::{Level, Redundancy};
use crate::plan::{self, Cell, CopyChoice, Recovered};

/// How a resync or repair step vouches for bytes it writes or records (a [`Verified`]
/// constructor).
type Vouch = for<'a> fn(&'a [u8]) -> Verified<'a>;

const B: usize = BLOCK as usize;
/// What to do with inconsistencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// After an unclean stop: data wins, parity and later copies are rewritten, checksums
    /// recomputed.
    Resync,
    /// Check; with `repair`, fix what can be decided.
    Scrub { repair: bool },
}

/// One problem: a run of 4 KiB blocks of one member.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    pub row: u64,
    pub slot: usize,
    /// The member device (path), if present.
    pub member: Option<String>,
    /// Byte offset on the member.
    pub member_offset: u64,
    pub bytes: u64,
    /// Logical byte offset in the array, for data blocks and mirror copies.
    pub logical_offset: Option<u64>,
    /// "data checksum", "data", "parity", "q-parity", "mirror", "checksum" (the checksum
    /// area itself), "unreadable" or "lost" (a range on the bad-block list).
    pub kind: &'static str,
    pub repaired: bool,
    pub note: String,
}

/// What a scrub or resync found and did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScrubReport {
    pub rows_checked: u64,
    /// Rows that could not be fully checked because a member is unavailable.
    pub rows_skipped: u64,
    pub problems: Vec<Problem>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub seconds: f64,
    /// Row a resumed scrub started from.
    pub resumed_from_row: Option<u64>,
    /// The run was asked to stop before the end (its checkpoint is recorded).
    pub stopped: bool,
    /// (slot, member offset) of blocks whose table entry is unknown and which nothing
    /// confirmed: a repaired table page must not vouch for them.
    #[serde(skip)]
    pub(crate) unconfirmed: Vec<(usize, u64)>,
    /// Data blocks a resync could not decide and put on the bad-block list.
    pub listed: u64,
    /// Rows the data map showed empty (never written since create): not read.
    pub empty_rows: u64,
    /// Blocks of the current batch a resync could not decide: (member row, 4 KiB block within
    /// the chunk, what the row has left to check it). Listed after the batch.
    #[serde(skip)]
    undecided: Vec<(u64, usize, Left)>,
}

impl ScrubReport {
    pub fn unrepaired(&self) -> usize {
        self.problems.iter().filter(|p| !p.repaired).count()
    }

    pub fn repaired(&self) -> usize {
        self.problems.iter().filter(|p| p.repaired).count()
    }
}

/// Options of a scrub run.
#[derive(Clone, Debug)]
pub struct ScrubOptions {
    /// Bytes per second read, at most.
    pub max_rate: Option<u64>,
    /// Bytes per second read while users' requests are being served (the run yields to them
    /// down to this; None: it never yields).
    pub min_rate: Option<u64>,
    /// When set, the run stops at the next batch (its checkpoint recorded).
    pub stop: Option<Arc<AtomicBool>>,
    /// Check the regions the data map shows empty too (skipped otherwise: they hold zeros on
    /// every member unless something rotted there, which no read of the array's data would
    /// notice without checksums).
    pub include_empty: bool,
}

impl Default for ScrubOptions {
    fn default() -> Self {
        ScrubOptions {
            max_rate: None,
            min_rate: Some(pace::DEFAULT_MIN_RATE),
            stop: None,
            include_empty: false,
        }
    }
}

/// Whether a run is to stop at its next batch: asked to (`opts.stop`), or a scrub that another
/// job waits for (a rebuild; the scrub resumes from its checkpoint next time).
pub(crate) fn halted(array: &Array, mode: Mode, opts: &ScrubOptions) -> bool {
    opts.stop
        .as_ref()
        .is_some_and(|s| s.load(Ordering::Acquire))
        || (matches!(mode, Mode::Scrub { .. }) && array.job_waiting())
}

/// Blocks on the bad-block list are data the array lost (a member gone with writes in flight
/// at a crash): no scrub can repair them and a read of them fails, so every full scrub reports
/// them as unrepaired problems, a range each (before, scrub said 0 problems while they were
/// unreadable: issue 31).
pub(crate) fn report_listed_losses(array: &Array, rep: &mut ScrubReport) {
    let c = array.layout().chunk();
    let off = array.data_offset_of();
    for (slot, r) in array.lost_data_ranges() {
        let row = r.start * BLOCK / c;
        rep.problems.push(Problem {
            row,
            slot,
            member: member_path(array, slot, row),
            member_offset: off + r.start * BLOCK,
            bytes: (r.end - r.start) * BLOCK,
            logical_offset: None,
            kind: "lost",
            repaired: false,
            note: "not repairable: on the bad-block list (lost at a crash, or listed because nothing could verify it: an unreadable or rotten block, or one whose checksum entry is unknown, with no redundancy left); reads of it fail until it is written again".into(),
        });
    }
}

/// Reads every member's checksum table from the device; pages failing their own hash are
/// treated as unknown for the rows that follow and repaired at the end. Every page, those of
/// empty regions too: a damaged one left there is met by the region's first write, and a fold
/// then seals it with its other entries unknown, which no later scrub settles (an outside
/// attack on reading only the pages of rows holding data). Holes of sparse member files are
/// skipped (zeros: pages never written), so 1 TiB members cost what their tables hold.
pub(crate) fn check_tables(array: &Array) -> Result<Vec<(usize, u64)>> {
    let mut bad = Vec::new();
    for slot in 0..array.layout().members() {
        let Some(d) = array.source(slot, 0) else {
            continue;
        };
        if let Some(s) = array.csum_of(&d) {
            for p in s.verify_table(d.member.as_ref())? {
                bad.push((slot, p));
            }
        }
    }
    Ok(bad)
}

/// Repairs the damaged table pages found at the start of a run that checked rows from
/// `checked_from` on. A page whose blocks reach into rows this run did not check (a resumed
/// scrub) is left damaged for the next full run: rewriting it would vouch for blocks nothing
/// confirmed.
pub(crate) fn repair_tables(
    array: &Array,
    mode: Mode,
    bad: &[(usize, u64)],
    checked_from: u64,
    rep: &mut ScrubReport,
) -> Result<()> {
    let repair = mode == Mode::Scrub { repair: true };
    let chunk = array.layout().chunk();
    let n = array.layout().members();
    for &(slot, page) in bad {
        let Some(d) = array.source(slot, 0) else {
            continue;
        };
        let Some(s) = array.csum_of(&d) else {
            continue;
        };
        let geo = s.geo;
        let first_block = page * csum::PER_PAGE;
        let last_block = first_block + csum::PER_PAGE;
        let first_row = first_block * BLOCK / chunk;
        if repair && first_row < checked_from {
            rep.problems.push(Problem {
                row: first_row,
                slot,
                member: Some(d.path.display().to_string()),
                member_offset: geo.page_offset(page),
                bytes: BLOCK,
                logical_offset: None,
                kind: "checksum",
                repaired: false,
                note: format!(
                    "checksum table page {page} fails its own hash; this scrub resumed at row {checked_from} and did not check all the rows it covers, so it is left for the next full scrub (its blocks are checked against redundancy meanwhile)"
                ),
            });
            continue;
        }
        if repair {
            d.csum_errors.fetch_add(1, Ordering::Relaxed);
        }
        if repair {
            // Blocks of this page the scrub could not confirm get the unknown entry rather than
            // have the page vouch for what is on them now.
            let data_start = array.cell_offset(0, 0);
            // Rows with a member missing could not be checked: their blocks are unconfirmed.
            let incomplete = (first_block..last_block).filter(|&b| {
                let row = b * BLOCK / chunk;
                row < array.rows() && (0..n).any(|x| array.source(x, row).is_none())
            });
            let unconfirmed: Vec<u64> = rep
                .problems
                .iter()
                .filter(|p| p.slot == slot && !p.repaired && p.member_offset >= data_start)
                .flat_map(|p| {
                    let first = s.block_of(p.member_offset);
                    first..first + p.bytes.div_ceil(BLOCK)
                })
                .chain(
                    rep.unconfirmed
                        .iter()
                        .filter(|u| u.0 == slot)
                        .map(|u| s.block_of(u.1)),
                )
                .filter(|b| (first_block..last_block).contains(b))
                .chain(incomplete)
                .collect();
            let (first, count) = s.page_blocks(page);
            let mut data = AlignedBuf::zeroed((count * BLOCK) as usize);
            array.member_read_data(&d, first * BLOCK, &mut data)?;
            // Blocks in rows the data map shows empty were not read by this scrub: they are
            // zeros by that map, whatever the member holds there now.
            for (i, block) in data.chunks_mut(BLOCK as usize).enumerate() {
                let row = (first + i as u64) * BLOCK / chunk;
                if !array.rows_hold_data(row..row + 1) {
                    block.fill(0);
                }
            }
            // Checked against redundancy by this scrub, but for `unconfirmed`.
            let data = Verified::agreed(&data);
            let written = s.repair_page(d.member.as_ref(), page, data, &unconfirmed)?;
            d.count(WriteKind::Metadata, written);
            rep.bytes_written += written;
        }
        rep.problems.push(Problem {
            row: first_block * BLOCK / array.layout().chunk(),
            slot,
            member: Some(d.path.display().to_string()),
            member_offset: geo.page_offset(page),
            bytes: BLOCK,
            logical_offset: None,
            kind: "checksum",
            repaired: repair,
            note: format!(
                "checksum table page {page} fails its own hash; {}",
                if repair {
                    "rewritten from the blocks it covers, which redundancy confirmed"
                } else {
                    "its blocks were checked against redundancy instead"
                }
            ),
        });
    }
    Ok(())
}

/// One member's part of a batch.
struct Cells {
    buf: AlignedBuf,
    /// Per block: the digest of what was read, and what the table says (empty without checksums).
    actual: Vec<Digest>,
    expect: Vec<Expect>,
    /// End of the rows read (from the batch's first read row): short of the batch's end for a
    /// rebuild target whose checkpoint falls inside a mirror batch.
    held_end: u64,
}

impl Cells {
    fn block(&self, rel_row: u64, c: u64, b: usize) -> &[u8] {
        let o = (rel_row * c) as usize + b * B;
        &self.buf[o..o + B]
    }

    /// What the table says block `b` of relative row `rel_row` should hash to, when known.
    fn wanted(&self, rel_row: u64, c: u64, b: usize) -> Option<Digest> {
        match self.expect.get((rel_row * c) as usize / B + b) {
            Some(Expect::Known(d)) => Some(*d),
            _ => None,
        }
    }

    /// True when block `b` of relative row `rel_row` is known to differ from its checksum.
    fn bad(&self, rel_row: u64, c: u64, b: usize) -> bool {
        let i = (rel_row * c) as usize / B + b;
        self.wanted(rel_row, c, b)
            .is_some_and(|d| d != self.actual[i])
    }

    fn unknown(&self, rel_row: u64, c: u64, b: usize) -> bool {
        self.wanted(rel_row, c, b).is_none()
    }
}

/// Batch buffers reused from one batch to the next (fresh ones cost page faults).
type Pool = crate::sync::Mutex<Vec<AlignedBuf>>;

/// Reads member rows `rows` of one slot. None when its device is unavailable for the whole
/// batch; Err when the read failed (the member is failed by then).
fn read_one(
    array: &Array,
    slot: usize,
    rows: Range<u64>,
    pool: &Pool,
    heal: bool,
) -> Result<Option<Cells>> {
    let Some(a) = array.source(slot, rows.start) else {
        return Ok(None);
    };
    let whole = array
        .source(slot, rows.end - 1)
        .is_some_and(|b| Arc::ptr_eq(&a, &b));
    let held_end = if whole {
        rows.end
    } else {
        // A mirror batch may straddle a rebuild target's checkpoint (its read rows reach one
        // row past its rows, so `plan` cannot keep it from doing so): the target's rows below
        // the checkpoint are read and checked (a resync must reach them: after a crash they
        // may be torn against the other copies), the rest counts as unavailable. Parity
        // batches never straddle a checkpoint (`plan`).
        let cp = array
            .slot_target(slot)
            .filter(|t| t.kind == TargetKind::Rebuild && Arc::ptr_eq(&t.dev, &a))
            .map(|t| t.checkpoint.load(Ordering::Acquire));
        match cp {
            Some(cp)
                if matches!(array.layout().redundancy(), Redundancy::Mirror { .. })
                    && rows.start < cp
                    && cp < rows.end =>
            {
                cp
            }
            _ => return Ok(None),
        }
    };
    let len = ((rows.end - rows.start) * array.layout().chunk()) as usize;
    let held = ((held_end - rows.start) * array.layout().chunk()) as usize;
    let mut buf = pool
        .lock()
        .expect("pool lock")
        .pop()
        .filter(|b| b.len() >= len)
        .unwrap_or_else(|| AlignedBuf::zeroed(len));
    buf[held..len].fill(0);
    let read = if heal {
        // Resync and scrub --repair: unreadable blocks are rebuilt from redundancy and
        // rewritten, then checked like the rest.
        array.read_rows_or_rebuild(slot, &mut buf[..held], rows.start..held_end)
    } else {
        array.member_read(slot, &mut buf[..held], rows.start, 0)
    };
    if let Err(e) = read {
        pool.lock().expect("pool lock").push(buf);
        return Err(e);
    }
    Ok(Some(Cells {
        buf,
        actual: Vec::new(),
        expect: Vec::new(),
        held_end,
    }))
}

/// What one batch covers: the rows it checks, and the member rows it reads and holds locked
/// while it is checked.
#[derive(Clone)]
struct Plan {
    rows: Range<u64>,
    /// Rows read and locked.
    read_rows: Range<u64>,
}

fn plan(array: &Array, rows: Range<u64>) -> Plan {
    let l = array.layout();
    match l.redundancy() {
        Redundancy::Parity { .. } => {
            // A batch never straddles a rebuild target's checkpoint: `read_one` reads a slot
            // only when one device holds all of the batch's rows, so a straddling batch would
            // treat the rows the target already holds as degraded (resync then skips their
            // parity and their target's checksums, and a torn full-row write stays torn).
            // The checkpoints do not move during the job (one job at a time).
            let end = (0..l.members())
                .filter(|&s| !array.slot_usable(s))
                .filter_map(|s| array.slot_target(s))
                .filter(|t| t.kind == TargetKind::Rebuild)
                .map(|t| t.checkpoint.load(Ordering::Acquire))
                .filter(|&cp| rows.start < cp && cp < rows.end)
                .min()
                .unwrap_or(rows.end);
            let rows = rows.start..end;
            Plan {
                read_rows: rows.clone(),
                rows,
            }
        }
        Redundancy::Mirror { .. } => {
            // The chunks whose first copy sits in these rows; their later copies may sit in
            // the next row, which is read and locked too (a job's batches may overlap).
            Plan {
                read_rows: rows.start..(rows.end + 1).min(array.rows()),
                rows,
            }
        }
    }
}

type BatchCells = Vec<Result<Option<Cells>>>;

/// Batches read ahead of the one being checked.
const READ_AHEAD: usize = 2;

/// Checks `rows` batch by batch. A reader thread per member streams its rows two batches
/// ahead (those batches' rows locked) while the current batch is hashed and checked, so every
/// member keeps reading.
pub(crate) fn run_rows<'a>(
    array: &'a Array,
    rows: Range<u64>,
    mode: Mode,
    opts: &ScrubOptions,
    rep: &mut ScrubReport,
    progress: &mut dyn FnMut(u64),
    checkpoint: &mut dyn FnMut(&ScrubReport, u64) -> Result<()>,
) -> Result<()> {
    use std::collections::VecDeque;
    use std::sync::mpsc;
    let layout = array.layout().clone();
    if rows.is_empty() {
        return Ok(());
    }
    if layout.level() == Level::Raid0 && !array.has_checksums() {
        rep.rows_checked += rows.end - rows.start; // nothing to compare
        progress(rows.end);
        return checkpoint(rep, rows.end);
    }
    let c = layout.chunk();
    // 2 MiB per member per batch, two batches ahead: the best of the sizes and depths measured
    // on the development machine's virtual disk (docs/NOTES.md).
    let per = pace::batch_rows(c, 2 << 20);
    let mut rate = RateLimit::new(opts.max_rate, opts.min_rate);
    let pool = Pool::default();
    let heal = array.is_writable() && matches!(mode, Mode::Resync | Mode::Scrub { repair: true });
    let stop = || halted(array, mode, opts);
    // Inside the simulator every read happens on the calling thread (an actor's, where the
    // scheduler sees it, or the runner's between epochs), never on helper threads.
    let inline = crate::sim::sched::in_simulation();
    std::thread::scope(|sc| -> Result<()> {
        let pool = &pool;
        let mut cmd = Vec::new();
        let mut results = Vec::new();
        for slot in 0..layout.members() {
            if inline {
                break;
            }
            let (ctx, crx) = mpsc::channel::<Range<u64>>();
            let (htx, hrx) = mpsc::channel::<(Range<u64>, Result<Option<Cells>>)>();
            let (rtx, rrx) = mpsc::channel::<Result<Option<Cells>>>();
            // The reader only reads; a second thread hashes what it read, so the member is
            // never idle while its blocks are hashed.
            sc.spawn(move || {
                for rr in crx {
                    let r = read_one(array, slot, rr.clone(), pool, heal);
                    if htx.send((rr, r)).is_err() {
                        break;
                    }
                }
            });
            sc.spawn(move || {
                for (rr, mut r) in hrx {
                    // Resync verifies what it reads as scrub does.
                    if let Ok(Some(cl)) = &mut r {
                        hash_cell(array, slot, &rr, cl);
                    }
                    if rtx.send(r).is_err() {
                        break;
                    }
                }
            });
            cmd.push(ctx);
            results.push(rrx);
        }
        let locks = array.row_locks();
        let owner = locks.job_owner();
        let mut inflight: VecDeque<(Plan, crate::array::RowGuard<'a>)> = VecDeque::new();
        let mut read_inline: VecDeque<BatchCells> = VecDeque::new();
        let mut next_row = rows.start;
        let issue = |inflight: &mut VecDeque<(Plan, crate::array::RowGuard<'a>)>,
                     read_inline: &mut VecDeque<BatchCells>,
                     next_row: &mut u64| {
            let p = plan(array, *next_row..(*next_row + per).min(rows.end));
            *next_row = p.rows.end;
            let idx = locks.batch(p.read_rows.clone(), owner);
            if inline {
                let raw: BatchCells = (0..layout.members())
                    .map(|slot| {
                        let mut r = read_one(array, slot, p.read_rows.clone(), pool, heal);
                        if let Ok(Some(cl)) = &mut r {
                            hash_cell(array, slot, &p.read_rows, cl);
                        }
                        r
                    })
                    .collect();
                read_inline.push_back(raw);
            }
            for tx in &cmd {
                let _ = tx.send(p.read_rows.clone());
            }
            inflight.push_back((p, idx));
        };
        // Rate-limited, one batch at a time: the pause between batches holds no rows.
        let ahead = if rate.limited() { 0 } else { READ_AHEAD };
        for _ in 0..ahead.max(1) {
            if next_row < rows.end {
                issue(&mut inflight, &mut read_inline, &mut next_row);
            }
        }
        while let Some((cur, cur_guard)) = inflight.pop_front() {
            let raw: BatchCells = if inline {
                read_inline.pop_front().expect("read with its batch")
            } else {
                results
                    .iter()
                    .map(|rx| rx.recv().expect("scrub reader gone"))
                    .collect()
            };
            // While users' requests are served: no read-ahead (its batches hold their rows),
            // one batch at a time at the minimum rate.
            let yielding = rate.yielding(array.requests_served());
            while ahead > 0 && !yielding && inflight.len() < ahead && next_row < rows.end && !stop()
            {
                issue(&mut inflight, &mut read_inline, &mut next_row);
            }
            let before = rep.bytes_read;
            let r = match layout.redundancy() {
                Redundancy::Parity { parity } => {
                    parity_batch(array, &cur, parity, mode, rep, pool, raw)
                }
                Redundancy::Mirror { copies } => {
                    mirror_batch(array, &cur, copies, mode, rep, pool, raw)
                }
            };
            if heal && r.is_ok() {
                // Still under the batch's rows: restored entries of a process crash there
                // count as settled from now on (csum.rs, epochs).
                array.settle_restored_rows(cur.rows.clone());
            }
            drop(cur_guard);
            r?;
            progress(cur.rows.end);
            checkpoint(rep, cur.rows.end)?;
            rate.account(rep.bytes_read - before);
            if (ahead == 0 || yielding) && inflight.is_empty() {
                rate.pause(&stop);
                if next_row < rows.end && !stop() {
                    issue(&mut inflight, &mut read_inline, &mut next_row);
                }
            }
            if inflight.is_empty() && cur.rows.end < rows.end {
                rep.stopped = true;
            }
        }
        drop(cmd);
        Ok(())
    })
}

/// Adds a problem, merging it into the previous one when it continues it.
fn push(rep: &mut ScrubReport, p: Problem) {
    if let Some(last) = rep.problems.last_mut() {
        if last.slot == p.slot
            && last.kind == p.kind
            && last.repaired == p.repaired
            && last.note == p.note
            && last.member_offset + last.bytes == p.member_offset
            && last.row == p.row
        {
            last.bytes += p.bytes;
            return;
        }
    }
    rep.problems.push(p);
}

/// A block found failing its checksum counts in its device's checksum errors, as on reads,
/// once: when it is repaired (or found beyond repair) by `scrub --repair`. A check-only scrub
/// reports it and leaves the count to the repair that follows, which would otherwise count
/// the same block a second time.
fn count_checksum_error(array: &Array, slot: usize, row: u64, repair: bool) {
    if !repair {
        return;
    }
    if let Some(d) = array.source(slot, row) {
        d.csum_error(1, array.cell_offset(row, 0));
    }
}

fn member_path(array: &Array, slot: usize, row: u64) -> Option<String> {
    array
        .source(slot, row)
        .map(|d| d.path.display().to_string())
}

fn unreadable(array: &Array, slot: usize, rows: &Range<u64>, e: &crate::Error) -> Problem {
    Problem {
        row: rows.start,
        slot,
        member: None,
        member_offset: array.cell_offset(rows.start, 0),
        bytes: (rows.end - rows.start) * array.layout().chunk(),
        logical_offset: None,
        kind: "unreadable",
        repaired: false,
        note: if array.slot_usable(slot) {
            // A block neither readable nor rebuilt with certainty (nothing left to verify the
            // rebuild): the member is still in service (simulator seed 19004808 said failed).
            format!("{e}; these rows of the member could not be read or rebuilt with certainty")
        } else {
            format!("{e}; the member is failed: replace or re-add it and rebuild")
        },
    }
}

fn parity_batch(
    array: &Array,
    plan: &Plan,
    parity: usize,
    mode: Mode,
    rep: &mut ScrubReport,
    pool: &Pool,
    raw: BatchCells,
) -> Result<()> {
    let c = array.layout().chunk();
    let rows = plan.rows.clone();
    let cells = collect_cells(array, plan, raw, rep);
    rep.bytes_read += cells.iter().flatten().count() as u64 * (rows.end - rows.start) * c;
    for row in rows.clone() {
        let slots = array.row_slots(row, parity);
        let rel = row - rows.start;
        match mode {
            Mode::Resync => resync_parity_row(array, row, rel, parity, &slots, &cells, rep)?,
            Mode::Scrub { repair } => {
                check_parity_row(array, row, rel, parity, &slots, &cells, repair, rep)?
            }
        }
    }
    list_undecided(array, &rows, parity, &cells, rep)?;
    give_back(pool, cells);
    Ok(())
}

/// A batch's cells by slot; members that failed the read are reported and left out.
fn collect_cells(
    array: &Array,
    plan: &Plan,
    raw: BatchCells,
    rep: &mut ScrubReport,
) -> Vec<Option<Cells>> {
    raw.into_iter()
        .enumerate()
        .map(|(slot, r)| match r {
            Ok(x) => x,
            Err(e) => {
                rep.problems
                    .push(unreadable(array, slot, &plan.read_rows, &e));
                None
            }
        })
        .collect()
}

/// Digests of every block read from `slot` and what its table says.
fn hash_cell(array: &Array, slot: usize, rows: &Range<u64>, cl: &mut Cells) {
    let len = ((cl.held_end - rows.start) * array.layout().chunk()) as usize;
    let Some(dev) = array.source(slot, rows.start) else {
        return;
    };
    if let Some(s) = array.csum_of(&dev) {
        cl.actual = s.geo.algo.digests(&cl.buf[..len]);
        let first = s.block_of(array.cell_offset(rows.start, 0));
        cl.expect = s.expected(dev.member.as_ref(), first, cl.actual.len());
    }
}

fn give_back(pool: &Pool, cells: Vec<Option<Cells>>) {
    let mut p = pool.lock().expect("pool lock");
    p.extend(cells.into_iter().flatten().map(|c| c.buf));
}

/// True when a full row has no block failing its checksum and its parity matches its data:
/// the common case, checked a chunk at a time.
fn row_is_clean(
    array: &Array,
    rel: u64,
    parity: usize,
    slots: &[usize],
    cells: &[Option<Cells>],
) -> bool {
    thread_local! {
        static SCRATCH: std::cell::RefCell<(AlignedBuf, AlignedBuf)> =
            std::cell::RefCell::new((AlignedBuf::zeroed(0), AlignedBuf::zeroed(0)));
    }
    let c = array.layout().chunk();
    let cu = c as usize;
    let d = slots.len() - parity;
    let Some(row): Option<Vec<&Cells>> = slots.iter().map(|&s| cells[s].as_ref()).collect() else {
        return false;
    };
    let (first, n) = ((rel * c) as usize / B, cu / B);
    let no_bad = row.iter().all(|cl| {
        cl.expect.is_empty()
            || (first..first + n)
                .all(|k| !matches!(cl.expect[k], Expect::Known(w) if w != cl.actual[k]))
    });
    if !no_bad {
        return false;
    }
    let chunk = |i: usize| &row[i].buf[(rel * c) as usize..((rel + 1) * c) as usize];
    SCRATCH.with(|s| {
        let (p, q) = &mut *s.borrow_mut();
        if p.len() != cu {
            *p = AlignedBuf::zeroed(cu);
            *q = AlignedBuf::zeroed(cu);
        }
        let data: Vec<&[u8]> = (0..d).map(chunk).collect();
        (array.kernel().gen_pq)(&data, p, (parity == 2).then_some(&mut q[..]));
        p[..] == *chunk(d) && (parity == 1 || q[..] == *chunk(d + 1))
    })
}

fn resync_parity_row(
    array: &Array,
    row: u64,
    rel: u64,
    parity: usize,
    slots: &[usize],
    cells: &[Option<Cells>],
    rep: &mut ScrubReport,
) -> Result<()> {
    let c = array.layout().chunk();
    let cu = c as usize;
    if slots.iter().any(|&s| cells[s].is_none()) {
        // RAID6 with one member missing: the write-hole journal only covers writes that began
        // degraded. A write that began healthy and saw a member fail mid-way (its parity
        // written after the failure's superblock flush) can leave the surviving parity stale
        // after a crash, so make it agree with the data present ("data wins", as below).
        let missing: Vec<usize> = (0..slots.len())
            .filter(|&i| cells[slots[i]].is_none())
            .collect();
        if parity == 2 && missing.len() == 1 {
            rep.rows_checked += 1;
            for b in 0..cu / B {
                resync_degraded_block(array, row, rel, slots, cells, missing[0], b, rep)?;
            }
            return Ok(());
        }
        // Degraded past what parity can check (the journal covers these rows): nothing
        // verifies the blocks present, so nothing is written or recorded from them. A block
        // failing its entry (rot, or a write the crash cut before its entry was logged; read
        // again first, so a glitch of one read is not taken for either) is undecided
        // (list_undecided): a data block is listed as lost, and so are the missing members'
        // data blocks of its column, which could only be rebuilt from the rest of the column
        // (a failing parity block among it). Reads of them fail until they are written. A
        // failing parity block's entry is marked unknown, so that writes to the column can
        // still read it to update it.
        let d = slots.len() - parity;
        for b in (0..cu / B).filter(|_| array.has_checksums()) {
            let failing = |i: usize| {
                cells[slots[i]].as_ref().is_some_and(|cl| cl.bad(rel, c, b))
                    && still_failing(array, slots[i], row, (b * B) as u64)
            };
            let parity_failing: Vec<usize> = (d..slots.len()).filter(|&i| failing(i)).collect();
            if (0..d).any(failing) || !parity_failing.is_empty() {
                rep.undecided.push((row, b, Left::Nothing));
            }
            for i in parity_failing {
                unvouch(array, slots[i], row, (b * B) as u64);
            }
        }
        rep.rows_skipped += 1;
        return Ok(());
    }
    rep.rows_checked += 1;
    let has_unknown = slots.iter().any(|&s| {
        let cl = cells[s].as_ref().expect("present");
        let first = (rel * c) as usize / B;
        cl.expect
            .get(first..first + cu / B)
            .is_some_and(|e| e.iter().any(|x| matches!(x, Expect::Unknown)))
    });
    if !has_unknown && row_is_clean(array, rel, parity, slots, cells) {
        // Every block matches its entry (or the array keeps none) and parity agrees.
        return Ok(());
    }
    for b in 0..cu / B {
        resync_parity_block(array, row, rel, parity, slots, cells, b, rep)?;
    }
    Ok(())
}

/// Resync of block `b` of a full parity row (every cell read). Nothing read is trusted until
/// it is verified:
/// - every data block matches its checksum entry: parity is recomputed from them and
///   rewritten where it differs (a write the crash cut between data and parity);
/// - the row agrees with its parity as read: blocks whose entries differ are a completed
///   write whose entries the crash lost (the entries are logged after the data is written,
///   csum.rs), and their entries are recorded: rot in one block would have broken the parity;
/// - otherwise the row recovery routine (`plan::recover`, as scrub and reads use it) rebuilds
///   the blocks failing their entries from the others when those verify (or when the rebuilt
///   bytes match the failing block's own entry), and they are rewritten: rot, or a write cut
///   before its parity, rolled back to the bytes its entry and the parity agree on;
/// - what nothing decides is reported and left as it is: old entries kept, parity untouched,
///   so reads of it keep failing its checksum instead of returning the unverified bytes.
///
/// Without checksums the data wins, as in md, except that RAID6 rewrites a single data block
/// both syndromes name.
#[allow(clippy::too_many_arguments)]
fn resync_parity_block(
    array: &Array,
    row: u64,
    rel: u64,
    parity: usize,
    slots: &[usize],
    cells: &[Option<Cells>],
    b: usize,
    rep: &mut ScrubReport,
) -> Result<()> {
    let c = array.layout().chunk();
    let d = slots.len() - parity;
    let total = slots.len();
    let within = (b * B) as u64;
    let cell = |i: usize| cells[slots[i]].as_ref().expect("present");
    let block = |i: usize| cell(i).block(rel, c, b);
    let checksums = array.has_checksums();
    let states: Vec<Cell> = (0..total)
        .map(|i| {
            if !checksums {
                Cell::Good
            } else if cell(i).bad(rel, c, b) {
                Cell::Bad
            } else if cell(i).unknown(rel, c, b) {
                Cell::Unchecked
            } else {
                Cell::Good
            }
        })
        .collect();
    let fresh_parity = |data: &[&[u8]]| {
        let mut p = vec![0u8; B];
        let mut q = vec![0u8; B];
        (array.kernel().gen_pq)(data, &mut p, (parity == 2).then_some(&mut q[..]));
        [p, q]
    };
    let data: Vec<&[u8]> = (0..d).map(block).collect();
    let pq = fresh_parity(&data);
    let differs: Vec<usize> = (d..total).filter(|&i| pq[i - d] != block(i)).collect();
    let problem = |i: usize, kind: &'static str, repaired: bool, note: String| Problem {
        row,
        slot: slots[i],
        member: member_path(array, slots[i], row),
        member_offset: array.cell_offset(row, within),
        bytes: BLOCK,
        logical_offset: (i < d).then(|| (row * d as u64 + i as u64) * c + within),
        kind,
        repaired,
        note,
    };
    // Records the entry of block `i` as read, for the reason `why` states.
    let record = |i: usize, why: Vouch| {
        if let Some(dev) = array.source(slots[i], row) {
            array.csum_record(&dev, array.cell_offset(row, within), why(block(i)));
        }
    };
    // Writes the parity blocks computed from `data` where they differ from the member; records
    // the entries of those that already match. `why`: what the data they were computed from is.
    let settle = |rep: &mut ScrubReport,
                  pq: &[Vec<u8>; 2],
                  on_disk: &dyn Fn(usize) -> bool,
                  why: Vouch,
                  note: &str|
     -> Result<()> {
        for i in d..total {
            let fresh = &pq[i - d];
            if on_disk(i) {
                // What the member holds now (a parity block the rebuild just rewrote included).
                if states[i] != Cell::Good {
                    if let Some(dev) = array.source(slots[i], row) {
                        array.csum_record(&dev, array.cell_offset(row, within), why(fresh));
                    }
                }
                continue;
            }
            array.repair_write(slots[i], why(fresh), row, within, WriteKind::Parity)?;
            rep.bytes_written += BLOCK;
            push(rep, problem(i, cell_kind(i, d, false), true, note.into()));
        }
        Ok(())
    };
    // Block `i` rebuilt as `bytes`: written back where the member differs (a problem, its
    // note the first of `notes` for a block failing its entry, the second for one whose entry
    // is unknown), its entry recorded where it already holds them.
    let restore = |rep: &mut ScrubReport, i: usize, bytes: &[u8], notes: [&str; 2]| -> Result<()> {
        if bytes == block(i) {
            record(i, Verified::rebuilt);
            return Ok(());
        }
        array.repair_write(
            slots[i],
            Verified::rebuilt(bytes),
            row,
            within,
            WriteKind::of_cell(i, d),
        )?;
        rep.bytes_written += BLOCK;
        let bad = states[i] == Cell::Bad;
        push(
            rep,
            problem(
                i,
                cell_kind(i, d, bad),
                true,
                notes[usize::from(!bad)].into(),
            ),
        );
        Ok(())
    };
    if !checksums {
        if parity == 2 && differs.len() == 2 {
            let pd: Vec<u8> = pq[0].iter().zip(block(d)).map(|(a, b)| a ^ b).collect();
            let qd: Vec<u8> = pq[1].iter().zip(block(d + 1)).map(|(a, b)| a ^ b).collect();
            if let Some(z) = plan::locate(&pd, &qd).filter(|&z| z < d) {
                let fixed: Vec<u8> = block(z).iter().zip(&pd).map(|(a, b)| a ^ b).collect();
                // P and Q agree on the one block they name: independent redundancy.
                array.repair_write(
                    slots[z],
                    Verified::agreed(&fixed),
                    row,
                    within,
                    WriteKind::Data,
                )?;
                rep.bytes_written += BLOCK;
                push(
                    rep,
                    problem(
                        z,
                        "data",
                        true,
                        "disagrees with both P and Q, whose syndromes name it; rewritten from them after an unclean stop".into(),
                    ),
                );
                return Ok(());
            }
        }
        // Without checksums nothing can tell rot from a torn write here: parity follows the
        // data as md's resync does, and the bytes are counted as unchecked.
        return settle(
            rep,
            &pq,
            &|i| !differs.contains(&i),
            Verified::unchecked,
            "parity recomputed from data after an unclean stop",
        );
    }
    if states[..d].iter().all(|&s| s == Cell::Good) {
        return settle(
            rep,
            &pq,
            &|i| !differs.contains(&i),
            Verified::parity,
            "parity recomputed after an unclean stop from data that matches its checksums",
        );
    }
    if differs.is_empty() {
        // Consistent as read: the entries that differ lag a completed write.
        let unknown = states.iter().filter(|&&s| s == Cell::Unchecked).count();
        for (i, &st) in states.iter().enumerate() {
            if st == Cell::Bad || (st == Cell::Unchecked && unknown <= parity) {
                record(i, Verified::agreed);
            }
        }
        return Ok(());
    }
    // RAID6 with both parities matching their entries and at most two data blocks failing
    // theirs (none unknown): when the blocks rebuilt from P and Q each match their own entry,
    // that is the row, whatever one parity agrees with (two blocks rotten alike cancel in P:
    // simulator seed 11003878, where the rule below took P's agreement, recomputed Q from the
    // rot and recorded entries for it).
    let rebuild_from_both_verifies = || {
        let failing: Vec<usize> = (0..d).filter(|&i| states[i] != Cell::Good).collect();
        if parity != 2
            || failing.len() > 2
            || failing.iter().any(|&i| states[i] != Cell::Bad)
            || states[d..].iter().any(|&s| s != Cell::Good)
        {
            return false;
        }
        let mut blocks: Vec<Vec<u8>> = (0..total).map(|i| block(i).to_vec()).collect();
        let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(|x| &mut x[..]).collect();
        let mut cells = states.clone();
        for &i in &failing {
            cells[i] = Cell::Unreadable;
        }
        match plan::recover(array.kernel(), &mut refs, &cells, parity, true, |_, _| {
            Vec::new()
        }) {
            Recovered::Rebuilt { rebuilt, .. } => {
                drop(refs);
                failing.iter().all(|i| rebuilt.contains(i))
                    && failing
                        .iter()
                        .all(|&i| cell(i).wanted(rel, c, b) == Some(array.csum_digest(&blocks[i])))
            }
            _ => false,
        }
    };
    // After a stop that was not a power cut no entry lags a completed write (pending.rs):
    // data failing their entries are rot, whatever a parity agrees with (an outside attack:
    // rot alike in two blocks, Q failing its entry or missing, read back after kill -9).
    let entries_lag_possible = !array
        .entries_current
        .load(std::sync::atomic::Ordering::Acquire);
    if parity == 2
        && entries_lag_possible
        && (d..total).any(|i| states[i] == Cell::Good && !differs.contains(&i))
        && !rebuild_from_both_verifies()
    {
        // One parity matches its own entry and agrees with the data as read: every data
        // block is the bytes that parity was computed from (rot in one would break the
        // agreement), so those failing their entries lag a write, and the other parity is
        // stale (RAID6: a write the crash cut between P and Q).
        for i in (0..d).filter(|&i| states[i] != Cell::Good) {
            record(i, Verified::agreed);
        }
        return settle(
            rep,
            &pq,
            &|i| !differs.contains(&i),
            Verified::parity,
            "parity recomputed after an unclean stop from data the other parity verifies",
        );
    }
    let mut blocks: Vec<Vec<u8>> = (0..total).map(|i| block(i).to_vec()).collect();
    let outcome = {
        let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(|x| &mut x[..]).collect();
        plan::recover(
            array.kernel(),
            &mut refs,
            &states,
            parity,
            true,
            |i, bytes| match cell(i).wanted(rel, c, b) {
                Some(w) if array.csum_digest(bytes) != w => vec![0],
                _ => Vec::new(),
            },
        )
    };
    // After a crash the cells that match their entries need not agree with each other (each
    // may hold a different write's bytes), so a rebuild is trusted only when every rebuilt
    // block matches its own entry and the parity it did not use agrees with it.
    let outcome = match outcome {
        Recovered::Rebuilt {
            rebuilt,
            rewrite,
            vouched,
            unchecked,
        } => {
            let data: Vec<&[u8]> = blocks[..d].iter().map(|x| &x[..]).collect();
            let pq = fresh_parity(&data);
            let kept: Vec<usize> = (d..total)
                .filter(|i| !rebuilt.contains(i) && states[*i] == Cell::Good)
                .collect();
            let parity_agrees = kept.iter().all(|&i| pq[i - d] == blocks[i]);
            // A parity left over after the rebuild (more parity cells matching their entries
            // than data cells rebuilt: RAID6 with one) checks the result independently. A
            // rebuilt block with no entry (a damaged table page) is vouched for only by such a
            // parity: cells that each match their entries may hold different writes' bytes.
            // A parity whose own entry is unknown checks it as well when it agrees as it was
            // read: rot in it cannot agree, and cells of different writes give a row no parity
            // agrees with
            // (simulator seed 19009195, RAID6: a rotten data block with an unknown entry, Q's
            // entry unknown too, was listed though P, Q and the other data agreed on its
            // rebuild).
            // (As read: the recovery may have rebuilt it too.)
            let agreeing_unchecked = (d..total)
                .filter(|&i| states[i] == Cell::Unchecked && pq[i - d] == block(i))
                .count();
            let independent =
                kept.len() + agreeing_unchecked > rebuilt.iter().filter(|&&i| i < d).count();
            let entries_agree = rewrite.iter().all(|&i| match cell(i).wanted(rel, c, b) {
                Some(w) => array.csum_digest(&blocks[i]) == w,
                None => independent,
            });
            if entries_agree && parity_agrees {
                Recovered::Rebuilt {
                    rebuilt,
                    rewrite,
                    vouched,
                    unchecked,
                }
            } else {
                Recovered::Contradicted {
                    cell: rewrite.first().copied().unwrap_or(0),
                    block: 0,
                }
            }
        }
        other => other,
    };
    match outcome {
        Recovered::Rebuilt { rewrite, .. } => {
            for &i in &rewrite {
                restore(
                    rep,
                    i,
                    &blocks[i],
                    [
                        "fails its checksum after an unclean stop; restored from the other members",
                        "its checksum page is damaged and it disagrees with the other members after an unclean stop; restored from them",
                    ],
                )?;
            }
            // Parity left that the rebuild did not use (RAID6 rebuilding one block from P).
            let data: Vec<&[u8]> = blocks[..d].iter().map(|x| &x[..]).collect();
            let pq = fresh_parity(&data);
            settle(
                rep,
                &pq,
                &|i| pq[i - d] == blocks[i],
                Verified::parity,
                "parity recomputed after an unclean stop from data restored from the other members",
            )?;
        }
        Recovered::Intact => {}
        Recovered::Inconsistent { unchecked } if !states.contains(&Cell::Bad) => {
            // Only blocks whose entries are unknown disagree with the parity, more of them
            // than it can locate: rot in one cannot be told from a write the crash cut. Left as
            // it was, the parity may be stale beside a verified block the cut write reached,
            // and P and Q stale together agree on that block's old bytes: when its member
            // failed, a read rebuilt the old data with no error (simulator seed 34000065).
            // So the data blocks nothing verifies are listed (reads of them fail until they
            // are written, as they failed unverified before) and parity is recomputed over
            // them, as for any undecided whole row (list_undecided): the verified blocks stay
            // recoverable, and writes to the row work again.
            rep.undecided.push((row, b, Left::Whole));
            for i in unchecked {
                push(
                    rep,
                    problem(
                        i,
                        cell_kind(i, d, false),
                        false,
                        if i < d {
                            "after an unclean stop this row disagrees with its parity, and more of its blocks have unknown checksum entries (damaged table pages) than parity can check: rot cannot be told from a write the crash cut, so the block is listed as lost (reads of it fail until it is written) and parity is recomputed over it"
                        } else {
                            "after an unclean stop this row disagrees with its parity, and more of its blocks have unknown checksum entries (damaged table pages) than parity can check: recomputed over the data, whose unverified blocks are listed as lost"
                        }
                        .into(),
                    ),
                );
            }
        }
        Recovered::Lost { .. }
        | Recovered::Contradicted { .. }
        | Recovered::Inconsistent { .. }
            if let Some((erased, fixed)) = one_rebuild_matching_its_entry(
                array,
                parity,
                &states,
                &(0..total).map(block).collect::<Vec<_>>(),
                |i, bytes| cell(i).wanted(rel, c, b) == Some(array.csum_digest(bytes)),
            ) =>
        {
            // Taking the other blocks that fail their entries as a completed write whose
            // entries lag, one way of rebuilding a failing block from the rest matches its own
            // entry: that checksum vouches for the rebuild and for every cell it used. The
            // blocks rebuilt are restored, the others' entries recorded, parity made to agree.
            for &i in &erased {
                restore(
                    rep,
                    i,
                    &fixed[i],
                    [
                        "fails its checksum after an unclean stop, next to blocks whose entries lag a write; restored from the other members, matching its checksum",
                        "its checksum page is damaged and it disagrees with the other members after an unclean stop; restored from them, with a block that matches its checksum",
                    ],
                )?;
            }
            for i in (0..d).filter(|&i| !erased.contains(&i) && states[i] != Cell::Good) {
                record(i, Verified::rebuilt);
            }
            let data: Vec<&[u8]> = fixed[..d].iter().map(|x| &x[..]).collect();
            let pq = fresh_parity(&data);
            settle(
                rep,
                &pq,
                &|i| erased.contains(&i) || pq[i - d] == block(i),
                Verified::parity,
                "parity recomputed after an unclean stop from data restored from the other members",
            )?;
        }
        Recovered::Lost { .. }
        | Recovered::Contradicted { .. }
        | Recovered::Inconsistent { .. }
            if parity == 2
                && differs.len() == 1
                && (0..d).all(|i| states[i] != Cell::Bad)
                && (0..d).filter(|&i| states[i] == Cell::Unchecked).count() <= 1 =>
        {
            // RAID6: the data as read agrees with one parity and not the other, no data block
            // fails its entry, at most one has none. A write the crash cut between P and Q
            // (the parity that agrees new next to its lagging entry, the other old): the
            // parity that agrees was computed from these very data bytes, so it vouches for
            // the one block no entry checks (rot there would have to be matched by rot in
            // that parity), and the other parity is recomputed. Simulator seed 18003145:
            // listed as lost though the data was whole.
            for i in (0..d).filter(|&i| states[i] == Cell::Unchecked) {
                record(i, Verified::agreed);
            }
            settle(
                rep,
                &pq,
                &|i| pq[i - d] == block(i),
                Verified::parity,
                "parity recomputed after an unclean stop from data that the other parity agrees with",
            )?;
        }
        Recovered::Lost { .. }
        | Recovered::Contradicted { .. }
        | Recovered::Inconsistent { .. }
            if parity == 2
                && let Some((x, fixed)) = one_unchecked_block_both_parities_locate(
                    array, row, within, slots, &states, &block,
                ) =>
        {
            // RAID6, no block failing its entry, P and Q matching entries a returned flush made
            // durable beside settled data, several data blocks with unknown entries: exactly one
            // of them, rebuilt from P, makes Q agree. No cut write explains that (one that
            // reached a data block and not P or Q leaves that block the one located, and
            // rolling it back is allowed: it was never flushed); rot of that block does. Before,
            // both unchecked blocks were listed though the row had one error (simulator seed
            // 37000313: a needless loss, no write in the row).
            restore(
                rep,
                x,
                &fixed,
                [
                    "fails its checksum after an unclean stop; located by P and Q and restored",
                    "its checksum page is damaged and it disagrees with P and Q after an unclean stop; located by them and restored",
                ],
            )?;
            for i in (0..d).filter(|&i| i != x && states[i] == Cell::Unchecked) {
                record(i, Verified::rebuilt);
            }
        }
        Recovered::Lost { .. }
        | Recovered::Contradicted { .. }
        | Recovered::Inconsistent { .. } => {
            // More blocks fail their entries than parity can check: a write the crash cut
            // across several blocks (their entries not logged yet) looks exactly like rot in
            // one of them next to such a write. Nothing verifies either, so nothing is written
            // or recorded: the old entries and the parity stay as they are, and reads of the
            // blocks failing their entries fail (an error, never the unverified bytes) until a
            // write covers them. Bytes of a write the crash cut were never durable; rot in a
            // block the crash did not touch is what parity could not restore next to it.
            rep.undecided.push((row, b, Left::Whole));
            for i in (0..d).filter(|&i| states[i] != Cell::Good) {
                push(
                    rep,
                    problem(
                        i,
                        cell_kind(i, d, states[i] == Cell::Bad),
                        false,
                        UNDECIDED.into(),
                    ),
                );
            }
        }
    }
    Ok(())
}

/// Whether the entry of the 4 KiB block at byte `within` of `slot`'s cell in `row` was made
/// durable by a flush that returned (`epoch`: [`Array::settled_epoch`]): no write the crash
/// cut can have changed the block since.
fn block_settled(array: &Array, slot: usize, row: u64, within: u64, epoch: Option<u64>) -> bool {
    array.source(slot, row).is_some_and(|dev| {
        array
            .csum_of(&dev)
            .is_some_and(|s| s.entry_settled(s.block_of(array.cell_offset(row, within)), epoch))
    })
}

/// A RAID6 row block (cells in row order, `states` their verdicts) with no cell failing its
/// entry, P and Q matching entries a returned flush made durable, every data block that
/// matches its entry settled too, and two or more data blocks with unknown entries: each of
/// those is tried as the one wrong, rebuilt from P and the rest as read; where exactly one
/// trial makes Q agree, returns its index and bytes. A cut write that reached one data block
/// and neither parity is located and rolled back (never flushed); one that reached several
/// makes no trial agree, unless its bytes were chosen to (an outside attack crafted a
/// two-block write whose change looks like one error in a third block: with three unknown
/// entries, `plan::check_unchecked` takes such a row first, an open weakness of locating).
fn one_unchecked_block_both_parities_locate<'a>(
    array: &Array,
    row: u64,
    within: u64,
    slots: &[usize],
    states: &[Cell],
    block: &dyn Fn(usize) -> &'a [u8],
) -> Option<(usize, Vec<u8>)> {
    let total = slots.len();
    let d = total - 2;
    let unchecked: Vec<usize> = (0..d).filter(|&i| states[i] == Cell::Unchecked).collect();
    if states.contains(&Cell::Bad) || unchecked.len() < 2 || !array.has_checksums() {
        return None;
    }
    let epoch = array.settled_epoch();
    let settled = |i: usize| block_settled(array, slots[i], row, within, epoch);
    if !(0..total).filter(|&i| states[i] == Cell::Good).all(settled)
        || states[d] != Cell::Good
        || states[d + 1] != Cell::Good
    {
        return None;
    }
    let mut found = None;
    for &x in &unchecked {
        let mut fixed = block(d).to_vec();
        for i in (0..d).filter(|&i| i != x) {
            for (f, b) in fixed.iter_mut().zip(block(i)) {
                *f ^= b;
            }
        }
        let data: Vec<&[u8]> = (0..d)
            .map(|i| if i == x { &fixed[..] } else { block(i) })
            .collect();
        let mut p = vec![0u8; B];
        let mut q = vec![0u8; B];
        (array.kernel().gen_pq)(&data, &mut p, Some(&mut q[..]));
        if q == block(d + 1) {
            if found.is_some() {
                return None;
            }
            found = Some((x, fixed));
        }
    }
    found
}

/// For a row block that more cells fail than parity can locate: each cell failing its entry
/// (`Cell::Bad`) is tried as the wrong one, rebuilt from the rest (RAID6: also together with
/// a parity or another cell not matching its entry, rebuilt from what is left), the cells
/// not rebuilt taken as read (those failing their entries as entries lagging a completed
/// write). A trial is verified when every block it rebuilt that has an entry matches it
/// (`matches`): a checksum the cells used could not have produced by chance. Returns the cells
/// of the one verified trial and the row it gives; None when none verifies, or several give
/// different rows and not exactly one of them leaves every data block not rebuilt matching
/// its own entry.
///
/// Several verify where a write the crash cut left a data block old next to its new entry
/// and its parity new next to the parity's old entry (the device kept the log page and the
/// parity write but lost the data write, all unsynced): the data block rebuilt from the new
/// parity matches its entry, and so does the parity recomputed from the old data block. Only
/// the first leaves the data verified (every data block matching its entry, the parity, never
/// read as data, the only cell taken against its entry); the second would keep a data block
/// that fails its own checksum. Simulator seed 16001076 (F1, a FUA write of part of a row cut
/// by a power cut): the block was listed as lost though its new version was whole.
///
/// RAID6 pairs: a write cut between P and Q leaves one parity new next to the other old; when
/// the new one's entry is unknown (a damaged table page) or lags, the block rebuilt from the
/// old one, with the new one recomputed, is what matches the entries (simulator seeds
/// 18000319 and 18003145: listed as lost though the old version verified).
fn one_rebuild_matching_its_entry(
    array: &Array,
    parity: usize,
    states: &[Cell],
    blocks: &[&[u8]],
    matches: impl Fn(usize, &[u8]) -> bool,
) -> Option<(Vec<usize>, Vec<Vec<u8>>)> {
    let total = blocks.len();
    let d = total - parity;
    let mut trials: Vec<Vec<usize>> = Vec::new();
    for x in (0..total).filter(|&i| states[i] == Cell::Bad) {
        trials.push(vec![x]);
        if parity == 2 {
            for y in (0..total).filter(|&y| y != x && (y >= d || states[y] != Cell::Good)) {
                trials.push(vec![x.min(y), x.max(y)]);
            }
        }
    }
    trials.sort_unstable();
    trials.dedup();
    let mut found: Vec<(Vec<usize>, Vec<Vec<u8>>)> = Vec::new();
    for erased in trials {
        let mut row: Vec<Vec<u8>> = blocks.iter().map(|b| b.to_vec()).collect();
        {
            let mut refs: Vec<&mut [u8]> = row.iter_mut().map(|b| &mut b[..]).collect();
            if array.kernel().recover(&mut refs, parity, &erased).is_err() {
                continue;
            }
        }
        let verified = erased
            .iter()
            .all(|&i| states[i] == Cell::Unchecked || matches(i, &row[i]));
        // Trials that differ only in parity give the same data (the parity is recomputed
        // from it): one result (an outside attack: RAID6, a data block rebuilt from P alone
        // and with Q recomputed both verified, and counted as two).
        if verified && !found.iter().any(|(_, r)| r[..d] == row[..d]) {
            found.push((erased, row));
        }
    }
    if found.len() > 1 {
        found.retain(|(erased, _)| (0..d).all(|i| erased.contains(&i) || states[i] == Cell::Good));
    }
    match found.len() {
        1 => found.pop(),
        _ => None,
    }
}

/// Resync of block `b` of a RAID6 row with one member (`m`, row index) missing: one
/// redundancy is left to check the rest. Nothing read is trusted until verified:
/// - the row agrees with itself (the missing block rebuilt from P, Q recomputed, or the other
///   way round): blocks whose entries differ lag a completed write, and are recorded;
/// - otherwise a block failing its entry is rebuilt, with the missing one, from the others,
///   and rewritten when the rebuilt bytes match its own entry (rot, found by its checksum
///   and corrected by both parities); when exactly one such block verifies it is the one;
/// - when every data block present matches its entry, the parities are stale: the missing
///   block is rebuilt from the data and a parity that matches its entry, the other rewritten;
/// - what nothing decides is listed as lost (`list_undecided`), with the missing member's
///   data of the column.
///
/// Without checksums the data wins, as in md: the parity not used is recomputed.
#[allow(clippy::too_many_arguments)]
fn resync_degraded_block(
    array: &Array,
    row: u64,
    rel: u64,
    slots: &[usize],
    cells: &[Option<Cells>],
    m: usize,
    b: usize,
    rep: &mut ScrubReport,
) -> Result<()> {
    let c = array.layout().chunk();
    let parity = 2;
    let total = slots.len();
    let d = total - parity;
    let within = (b * B) as u64;
    let checksums = array.has_checksums();
    let cell = |i: usize| cells[slots[i]].as_ref();
    let read = column_blocks(slots, cells, rel, c, b);
    let states: Vec<Cell> = (0..total)
        .map(|i| match cell(i) {
            None => Cell::Absent,
            Some(_) if !checksums => Cell::Good,
            Some(cl) if cl.bad(rel, c, b) => Cell::Bad,
            Some(cl) if cl.unknown(rel, c, b) => Cell::Unchecked,
            Some(_) => Cell::Good,
        })
        .collect();
    let matches_entry = |i: usize, bytes: &[u8]| {
        cell(i)
            .and_then(|cl| cl.wanted(rel, c, b))
            .is_some_and(|w| array.csum_digest(bytes) == w)
    };
    // The row with `lost` rebuilt from the rest.
    let rebuild = |lost: &[usize]| -> Result<Vec<Vec<u8>>> {
        let mut bufs = read.clone();
        let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|x| &mut x[..]).collect();
        array.kernel().recover(&mut refs, parity, lost)?;
        Ok(bufs)
    };
    let record = |i: usize, bytes: Verified| {
        if let Some(dev) = array.source(slots[i], row) {
            array.csum_record(&dev, array.cell_offset(row, within), bytes);
        }
    };
    let problem = |i: usize, kind: &'static str, repaired: bool, note: &str| Problem {
        row,
        slot: slots[i],
        member: member_path(array, slots[i], row),
        member_offset: array.cell_offset(row, within),
        bytes: BLOCK,
        logical_offset: (i < d).then(|| (row * d as u64 + i as u64) * c + within),
        kind,
        repaired,
        note: note.into(),
    };
    // Writes the blocks of `fixed` that differ from what was read (their entries recorded by
    // the write); records the entries of the others in `vouch`. `why`: what `fixed` is.
    let apply =
        |rep: &mut ScrubReport, fixed: &[Vec<u8>], vouch: &[usize], why: Vouch, note: &str| {
            for i in (0..total).filter(|&i| i != m) {
                if fixed[i] != read[i] {
                    array.repair_write(
                        slots[i],
                        why(&fixed[i]),
                        row,
                        within,
                        WriteKind::of_cell(i, d),
                    )?;
                    rep.bytes_written += BLOCK;
                    push(
                        rep,
                        problem(i, cell_kind(i, d, states[i] == Cell::Bad), true, note),
                    );
                } else if vouch.contains(&i) && states[i] != Cell::Good {
                    record(i, why(&fixed[i]));
                }
            }
            Ok::<(), crate::Error>(())
        };
    // The parity rebuilt with the missing block: Q, unless Q is the missing one.
    let other = parity_left_to_check(m, d);
    let by_p = rebuild(&[m, other])?;
    if by_p[other] == read[other] {
        // Consistent as read (or no checksums to doubt it): entries that differ lag.
        let unknown = states.iter().filter(|&&s| s == Cell::Unchecked).count();
        for i in (0..total).filter(|&i| i != m) {
            if states[i] == Cell::Bad || (states[i] == Cell::Unchecked && unknown <= 1) {
                record(i, Verified::agreed(&read[i]));
            }
        }
        return Ok(());
    }
    if !checksums {
        return apply(
            rep,
            &by_p,
            &[],
            Verified::unchecked,
            "parity of a degraded row recomputed from data after an unclean stop",
        );
    }
    // One block failing its entry, rebuilt with the missing one, matches its entry.
    let verified: Vec<(usize, Vec<Vec<u8>>)> = (0..total)
        .filter(|&i| i != m && states[i] == Cell::Bad)
        .filter_map(|x| {
            let row_bytes = rebuild(&[m, x]).ok()?;
            matches_entry(x, &row_bytes[x]).then_some((x, row_bytes))
        })
        .collect();
    if let [(_, fixed)] = &verified[..] {
        let vouch: Vec<usize> = (0..total).collect();
        return apply(
            rep,
            fixed,
            &vouch,
            Verified::rebuilt,
            "fails its checksum after an unclean stop with a member missing; restored from both parities, matching its checksum",
        );
    }
    // Whether every data block present that matches its entry has an entry a flush that
    // returned made durable: none of them is then a cut write's, newer than a parity beside
    // it. Otherwise a parity that matches its own entry may still be stale (a cut write
    // reached the data block and not the parity), and nothing may be rebuilt from it.
    let settled_epoch = array.settled_epoch();
    let settled = |i: usize| block_settled(array, slots[i], row, within, settled_epoch);
    let data_settled = (0..d)
        .filter(|&i| i != m && states[i] == Cell::Good)
        .all(settled);
    // The data verifies: a parity is stale.
    if verified.is_empty() && (0..d).all(|i| i == m || states[i] == Cell::Good) {
        // With a parity missing, the data decides: the parity left is recomputed from it. (It
        // used to be kept, when it matched its own entry, and only the missing parity was
        // "recomputed": nothing was written, and a write the crash cut after its data block
        // left P stale beside it; a later read with a data member gone rebuilt that block
        // from the stale P: simulator seed 29006602.)
        if m >= d {
            return apply(
                rep,
                &by_p,
                &[],
                Verified::parity,
                "parity of a degraded row recomputed after an unclean stop from data that matches its checksums",
            );
        }
        // With a data block missing: the parity to keep is one matching its entry (P first)
        // that a returned flush made durable, beside data that is as the last flush left it;
        // the parities then disagree over the missing block alone (a write into it cut
        // between P and Q), and the kept one gives a version of it: the missing block is
        // rebuilt from it and the other parity recomputed.
        let keep = [d, d + 1]
            .into_iter()
            .find(|&p| data_settled && states[p] == Cell::Good && settled(p));
        if let Some(keep) = keep {
            let redo = if keep == d { d + 1 } else { d };
            let fixed = rebuild(&[m, redo])?;
            return apply(
                rep,
                &fixed,
                &[],
                Verified::parity,
                "parity of a degraded row recomputed after an unclean stop from data that matches its checksums",
            );
        }
        // Otherwise, where a parity matches its entry: a cut write may have reached the data
        // and not the parities (P kept because it matched its own old entry, the missing block
        // rebuilt from it beside the new data: an outside attack), or that parity and not the
        // data (the parity restored from the pending store kept, the missing block rebuilt from
        // it beside the old data: a second one). Which is current cannot be told: the missing
        // block is listed (reads of it fail until it is written). With no parity verifying
        // itself, rot in either cannot be told from the other gone stale (simulator seed
        // 7001917: P rotten, Q recomputed from it, the missing block read back as the rot):
        // left as it is below.
        if [d, d + 1].iter().any(|&p| states[p] == Cell::Good) {
            rep.undecided.push((row, b, Left::Unverified));
            push(
                rep,
                problem(
                    m,
                    "data",
                    false,
                    "after an unclean stop P and Q of this degraded row disagree over the missing member's block, and a cut write may have reached one of them or the data: which is current cannot be told, so the block is listed as lost (reads of it fail until it is written)",
                ),
            );
            return Ok(());
        }
    }
    // No block fails its entry: only blocks whose entries are unknown (damaged table pages)
    // can be wrong. One such block is rebuilt, with the missing one, from the others, which
    // vouch for themselves. More than one: rot in one cannot be told from a write the crash
    // cut, and parity made to agree would vouch for whichever it is, so the row is reported
    // and left as it is (reads of it fail rather than guess).
    if !(0..total).any(|i| i != m && states[i] == Cell::Bad) {
        let unchecked: Vec<usize> = (0..total)
            .filter(|&i| i != m && states[i] == Cell::Unchecked)
            .collect();
        // (Only where every block it rests on that verifies is as the last flush left it:
        // beside a data block a cut write may have reached, the parity may be stale, and the
        // rebuild would overwrite a right block with a wrong one; and with a data block
        // missing it rests on P and Q both, which a cut write that reached one of them left
        // of two versions (P's entry restored, Q's old): two outside attacks.)
        let rest_settled = |x: usize| {
            (0..total)
                .filter(|&i| i != m && i != x && states[i] == Cell::Good)
                .all(settled)
        };
        if let ([x], true) = (
            &unchecked[..],
            unchecked.len() == 1 && rest_settled(unchecked[0]),
        ) {
            let x = *x;
            let fixed = rebuild(&[m, x])?;
            let vouch: Vec<usize> = (0..total).collect();
            return apply(
                rep,
                &fixed,
                &vouch,
                Verified::rebuilt,
                "its checksum entry is unknown and it disagrees with the rest of a degraded row after an unclean stop; rebuilt from the members that verify",
            );
        }
        // Beside data a cut write may have reached, an unchecked data block left as it is
        // would be "repaired" by the next read from the parity that may be stale: listed, with
        // the missing member's data block of the column (reads fail until they are written).
        if unchecked.iter().any(|&i| i < d) && unchecked.iter().any(|&x| !rest_settled(x)) {
            rep.undecided.push((row, b, Left::Unverified));
            for i in (0..d).filter(|&i| i == m || states[i] == Cell::Unchecked) {
                push(
                    rep,
                    problem(
                        i,
                        "data",
                        false,
                        "after an unclean stop this degraded row disagrees with its parity beside data a cut write may have reached, and this block's checksum entry is unknown (a damaged table page) or its member is missing: rot cannot be told from a stale parity, so the block is listed as lost (reads of it fail until it is written)",
                    ),
                );
            }
            return Ok(());
        }
        for i in unchecked {
            push(
                rep,
                problem(
                    i,
                    cell_kind(i, d, false),
                    false,
                    "after an unclean stop this degraded row disagrees with its parity, and more of its blocks have unknown checksum entries (damaged table pages) than parity can check: left as it is, unverified",
                ),
            );
        }
        return Ok(());
    }
    // Nothing decides: listed after the batch (list_undecided), as for a full row.
    rep.undecided.push((row, b, Left::Degraded));
    for i in (0..d).filter(|&i| i != m && states[i] != Cell::Good) {
        push(rep, problem(i, cell_kind(i, d, true), false, UNDECIDED));
    }
    Ok(())
}

/// Block `b` of every cell of a row's column (`slots` in row order, their batch reads in
/// `cells`, relative row `rel`, chunk `c`): zeros where the member is missing.
fn column_blocks(
    slots: &[usize],
    cells: &[Option<Cells>],
    rel: u64,
    c: u64,
    b: usize,
) -> Vec<Vec<u8>> {
    slots
        .iter()
        .map(|&s| {
            cells[s]
                .as_ref()
                .map_or_else(|| vec![0u8; B], |cl| cl.block(rel, c, b).to_vec())
        })
        .collect()
}

/// A RAID6 row with cell `m` missing (`d` data cells): the parity rebuilt with it so that the
/// one left can be checked against what was read: Q, unless Q is the missing one.
fn parity_left_to_check(m: usize, d: usize) -> usize {
    if m == d + 1 {
        d
    } else {
        d + 1
    }
}

/// Whether block `within` of `slot`'s cell in `row`, found failing its checksum entry in a
/// batch read, fails it again when read on its own: a transient glitch of the first read
/// (a bus or controller error) is not taken for rot or a torn write. An unreadable block
/// counts as failing.
fn still_failing(array: &Array, slot: usize, row: u64, within: u64) -> bool {
    let mut buf = AlignedBuf::zeroed(B);
    array
        .member_read_blocks(slot, &mut buf, row, within, false)
        .map_or(true, |(bad, _)| !bad.is_empty())
}

/// Marks the checksum entry of one 4 KiB block unknown: what the resync writes for mirror copies
/// and parity blocks it keeps but cannot verify, so no entry vouches for them.
fn unvouch(array: &Array, slot: usize, row: u64, within: u64) {
    if let Some(dev) = array.source(slot, row) {
        if let Some(s) = array.csum_of(&dev) {
            let block = s.block_of(array.cell_offset(row, within));
            s.record_digests(block, &[csum::UNKNOWN_ENTRY]);
        }
    }
}

/// What a row the resync cannot decide has left to check it by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Left {
    /// Every cell: parity is made to agree over the listed blocks.
    Whole,
    /// A member missing, one parity left (RAID6).
    Degraded,
    /// Nothing: the missing members' data could only be rebuilt from the listed blocks.
    Nothing,
    /// A member missing (RAID6) and a parity that may be stale beside data a cut write may have
    /// reached: the column's data blocks that nothing verifies (missing, or their entries
    /// unknown) are listed.
    Unverified,
}

/// What a resync reports of a data block it leaves undecided.
const UNDECIDED: &str = "after an unclean stop this row disagrees with its parity and more of its blocks fail their checksums than the parity left can check: rot cannot be told from a write the crash cut, so nothing is written and the block is listed as lost (reads of it fail until it is written)";

/// After a resync batch: the data blocks it could not decide (rot cannot be told from a write
/// the crash cut) go on the bad-block list, which is made durable first; reads of them fail
/// until a write covers them, instead of returning bytes nothing verified or a reconstruction
/// from cells of different writes. Then, the list holding them, in rows with every data cell
/// present, their entries are made to match them as they lie and parity is recomputed over
/// them: the row's verified cells stay recoverable if their member fails, and writes to the row
/// work again. With a data cell missing their entries stay as they were (no placeholder the
/// parity agrees with).
fn list_undecided(
    array: &Array,
    rows: &Range<u64>,
    parity: usize,
    cells: &[Option<Cells>],
    rep: &mut ScrubReport,
) -> Result<()> {
    let undecided = std::mem::take(&mut rep.undecided);
    if undecided.is_empty() {
        return Ok(());
    }
    if !array.has_checksums() {
        return Ok(());
    }
    let c = array.layout().chunk();
    // Data cells (row index) of a block that do not verify: they are the ones listed. In a
    // degraded row only those failing their entries (one whose entry is unknown, a damaged
    // table page, is no more doubtful than before the crash there), and the missing members'
    // data cells of the column too: they could only be rebuilt from the listed blocks (listed
    // blocks count as sources consistent with the row, row.rs `judge_blocks`), which would XOR
    // rot into them (outside attacks, RAID5 and RAID6). A journaled write's cells cannot be
    // what fails there: the journal's clear makes their entries durable first (journal.rs).
    let doubtful = |row: u64, b: usize, left: Left| -> Vec<(usize, usize)> {
        let slots = array.row_slots(row, parity);
        let rel = row - rows.start;
        let d = slots.len() - parity;
        if left == Left::Unverified {
            return (0..d)
                .filter(|&i| {
                    cells[slots[i]]
                        .as_ref()
                        .is_none_or(|cl| cl.unknown(rel, c, b))
                })
                .map(|i| (i, slots[i]))
                .collect();
        }
        let whole = left == Left::Whole;
        // Blocks whose entries are unknown go with the failing ones in degraded rows too:
        // left off, a read of one was checked against the parity left and the listed block's
        // placeholder, and returned wrong data (an outside attack: a cut write, rot, and a
        // damaged table page in one degraded RAID6 row).
        let unknown_counts = whole || left == Left::Degraded;
        let failing = |i: usize| {
            cells[slots[i]]
                .as_ref()
                .is_some_and(|cl| cl.bad(rel, c, b) || (unknown_counts && cl.unknown(rel, c, b)))
        };
        // In a row with nothing left to check it, a failing parity block condemns the
        // missing members' data of its column as well.
        let any = (0..d).any(failing)
            || (left == Left::Nothing
                && (d..slots.len())
                    .any(|i| cells[slots[i]].as_ref().is_some_and(|cl| cl.bad(rel, c, b))));
        (0..d)
            .filter(|&i| failing(i) || (left != Left::Whole && any && cells[slots[i]].is_none()))
            .map(|i| (i, slots[i]))
            .collect()
    };
    for &(row, b, left) in &undecided {
        for (_, slot) in doubtful(row, b, left) {
            if array.mark_lost_block(slot, row * c + (b * B) as u64) {
                rep.listed += 1;
            }
        }
    }
    array.persist()?;
    for &(row, b, left) in &undecided {
        let slots = array.row_slots(row, parity);
        let rel = row - rows.start;
        let listed: Vec<usize> = doubtful(row, b, left).into_iter().map(|(i, _)| i).collect();
        // Every data cell present (a whole row, or a parity missing): the parity left is made
        // to agree too. Kept as it was, it may be stale beside a verified block a cut write
        // reached, and rebuild that block's old bytes once its member fails (a degraded RAID6
        // row, P missing: the degraded form of simulator seed 34000065).
        let d = slots.len() - parity;
        // With a data cell missing, parity cannot be made to agree with the listed blocks, so
        // they are no placeholders consistent with the row, and their entries stay as they
        // were (failing or unknown): recorded as they lay, they verified, and a later resync
        // rebuilt a neighbour from a listed block's rot (simulator seed 36001070).
        if (0..d).all(|i| cells[slots[i]].is_some()) {
            rep.bytes_written += freeze_listed(array, row, rel, b, parity, &slots, cells, &listed)?;
        } else if parity == 2 && left == Left::Unverified {
            rep.bytes_written += freeze_over_missing(array, row, rel, b, &slots, cells, &listed)?;
        }
    }
    Ok(())
}

/// [`freeze_listed`] for a degraded RAID6 row whose one missing member's data block is listed
/// (`Left::Unverified`: P and Q disagree over it after an unclean stop): the parity that
/// verifies is kept, the missing block's placeholder is what it implies, and the other parity
/// is recomputed over the data and that placeholder, so P and Q agree again. Left disagreeing,
/// a read with a second member gone rebuilt that member's block from both parities and the
/// listed block's unknown value, and returned wrong data with exit 0 (simulator seed 42002891,
/// a power cut with rot and a member dying with it). The placeholder is never read as data
/// (the block stays listed); reads of the others, rebuilt from P and Q, are right. Returns
/// the bytes written.
fn freeze_over_missing(
    array: &Array,
    row: u64,
    rel: u64,
    b: usize,
    slots: &[usize],
    cells: &[Option<Cells>],
    listed: &[usize],
) -> Result<u64> {
    let c = array.layout().chunk();
    let d = slots.len() - 2;
    let missing: Vec<usize> = (0..slots.len())
        .filter(|&i| cells[slots[i]].is_none())
        .collect();
    let [m] = missing[..] else {
        return Ok(0);
    };
    if m >= d || !listed.contains(&m) {
        return Ok(0);
    }
    let present = |i: usize| cells[slots[i]].as_ref().expect("one member missing");
    let verifies = |i: usize| !present(i).bad(rel, c, b) && !present(i).unknown(rel, c, b);
    let Some(keep) = [d, d + 1].into_iter().find(|&p| verifies(p)) else {
        return Ok(0);
    };
    let redo = if keep == d { d + 1 } else { d };
    let mut blocks: Vec<Vec<u8>> = (0..slots.len())
        .map(|i| {
            if i == m || i == redo {
                vec![0u8; B]
            } else {
                present(i).block(rel, c, b).to_vec()
            }
        })
        .collect();
    {
        let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(|x| &mut x[..]).collect();
        let mut erased = [m, redo];
        erased.sort_unstable();
        array.kernel().recover(&mut refs, 2, &erased)?;
    }
    record_listed(array, row, rel, b, slots, cells, listed);
    let fresh = Verified::listed(&blocks[redo]);
    if blocks[redo][..] == *present(redo).block(rel, c, b) {
        if !verifies(redo) {
            if let Some(dev) = array.source(slots[redo], row) {
                array.csum_record(&dev, array.cell_offset(row, (b * B) as u64), fresh);
            }
        }
        return Ok(0);
    }
    array.repair_write(slots[redo], fresh, row, (b * B) as u64, WriteKind::Parity)?;
    Ok(BLOCK)
}

/// Makes the entries of the listed data cells (row indexes) of block `b` that are present and
/// do not verify match them as they lie (they are on the bad-block list, durably).
fn record_listed(
    array: &Array,
    row: u64,
    rel: u64,
    b: usize,
    slots: &[usize],
    cells: &[Option<Cells>],
    listed: &[usize],
) {
    let c = array.layout().chunk();
    let at = array.cell_offset(row, (b * B) as u64);
    for &i in listed {
        let Some(cl) = cells[slots[i]].as_ref() else {
            continue;
        };
        if cl.bad(rel, c, b) || cl.unknown(rel, c, b) {
            if let Some(dev) = array.source(slots[i], row) {
                array.csum_record(&dev, at, Verified::listed(cl.block(rel, c, b)));
            }
        }
    }
}

/// Block `b` of a parity row with every data cell present whose data cells `listed` (row
/// indexes) are on the bad-block list, durably: their entries are made to match them as they
/// lie and the parity present is recomputed over the data, so that the row's other cells,
/// which verify, stay recoverable when their member fails, and writes to the row find it
/// consistent. The listed bytes are
/// never read as data: reads of them fail until a write covers them. Returns the bytes
/// written.
#[allow(clippy::too_many_arguments)]
fn freeze_listed(
    array: &Array,
    row: u64,
    rel: u64,
    b: usize,
    parity: usize,
    slots: &[usize],
    cells: &[Option<Cells>],
    listed: &[usize],
) -> Result<u64> {
    let c = array.layout().chunk();
    let d = slots.len() - parity;
    let at = array.cell_offset(row, (b * B) as u64);
    let cell = |i: usize| cells[slots[i]].as_ref().expect("data cells present");
    let doubtful = |i: usize| cell(i).bad(rel, c, b) || cell(i).unknown(rel, c, b);
    record_listed(array, row, rel, b, slots, cells, listed);
    let data: Vec<&[u8]> = (0..d).map(|i| cell(i).block(rel, c, b)).collect();
    let mut pq = [vec![0u8; B], vec![0u8; B]];
    {
        let [p, q] = &mut pq;
        (array.kernel().gen_pq)(&data, p, (parity == 2).then_some(&mut q[..]));
    }
    let mut written = 0;
    for i in (d..slots.len()).filter(|&i| cells[slots[i]].is_some()) {
        let fresh = Verified::listed(&pq[i - d]);
        if pq[i - d] == cell(i).block(rel, c, b) {
            if doubtful(i) {
                if let Some(dev) = array.source(slots[i], row) {
                    array.csum_record(&dev, at, fresh);
                }
            }
            continue;
        }
        array.repair_write(slots[i], fresh, row, (b * B) as u64, WriteKind::Parity)?;
        written += BLOCK;
    }
    Ok(written)
}

/// Kind of row index `i` of a parity row with `d` data chunks.
fn cell_kind(i: usize, d: usize, by_checksum: bool) -> &'static str {
    match (i.cmp(&d), by_checksum) {
        (std::cmp::Ordering::Less, true) => "data checksum",
        (std::cmp::Ordering::Less, false) => "data",
        (std::cmp::Ordering::Equal, _) => "parity",
        _ => "q-parity",
    }
}

#[allow(clippy::too_many_arguments)]
fn check_parity_row(
    array: &Array,
    row: u64,
    rel: u64,
    parity: usize,
    slots: &[usize],
    cells: &[Option<Cells>],
    repair: bool,
    rep: &mut ScrubReport,
) -> Result<()> {
    let c = array.layout().chunk();
    let d = slots.len() - parity;
    let total = slots.len();
    let missing: Vec<usize> = (0..total).filter(|&i| cells[slots[i]].is_none()).collect();
    if missing.is_empty() {
        rep.rows_checked += 1;
    } else {
        rep.rows_skipped += 1;
    }
    let unverifiable = array.row_unverifiable(row);
    if missing.is_empty() && !unverifiable && row_is_clean(array, rel, parity, slots, cells) {
        return Ok(());
    }
    let logical =
        |i: usize, b: usize| (i < d).then(|| (row * d as u64 + i as u64) * c + (b * B) as u64);
    let cell = |i: usize| cells[slots[i]].as_ref();
    for b in 0..(c as usize / B) {
        let avail: Vec<usize> = (0..total).filter(|i| !missing.contains(i)).collect();
        let block = |i: usize| cell(i).expect("available").block(rel, c, b);
        let bad: Vec<usize> = if unverifiable {
            Vec::new()
        } else {
            avail
                .iter()
                .copied()
                .filter(|&i| cell(i).expect("available").bad(rel, c, b))
                .collect()
        };
        let unknown: Vec<usize> = avail
            .iter()
            .copied()
            .filter(|&i| unverifiable || cell(i).expect("available").unknown(rel, c, b))
            .collect();
        // Parity recomputed from the data blocks (full rows only).
        let (p_bad, q_bad, pd, qd) = if missing.is_empty() {
            let data: Vec<&[u8]> = (0..d).map(block).collect();
            let mut p = [0u8; B];
            let mut q = [0u8; B];
            (array.kernel().gen_pq)(&data, &mut p, (parity == 2).then_some(&mut q[..]));
            let pd: Vec<u8> = p.iter().zip(block(d)).map(|(a, b)| a ^ b).collect();
            let qd: Vec<u8> = if parity == 2 {
                q.iter().zip(block(d + 1)).map(|(a, b)| a ^ b).collect()
            } else {
                Vec::new()
            };
            (
                pd.iter().any(|&x| x != 0),
                qd.iter().any(|&x| x != 0),
                pd,
                qd,
            )
        } else {
            (false, false, Vec::new(), Vec::new())
        };
        let consistent = missing.is_empty() && !p_bad && !q_bad;
        let problem = |i: usize, kind: &'static str, repaired: bool, note: String| Problem {
            row,
            slot: slots[i],
            member: member_path(array, slots[i], row),
            member_offset: array.cell_offset(row, (b * B) as u64),
            bytes: BLOCK,
            logical_offset: logical(i, b),
            kind,
            repaired,
            note,
        };
        // Data blocks on the bad-block list are lost (reads of them fail until written; a full
        // scrub reports them as such): their bytes are checked by nothing. Where every other
        // data cell of the column verifies, the repair makes the row agree over them (entries
        // of the listed blocks as they lie, parity recomputed from the data), so the cells
        // that verify stay recoverable.
        let listed: Vec<usize> = if missing.is_empty() && !unverifiable && array.has_checksums() {
            (0..d)
                .filter(|&i| array.is_lost_block(slots[i], row * c + (b * B) as u64))
                .collect()
        } else {
            Vec::new()
        };
        if !listed.is_empty()
            && (0..d)
                .filter(|i| !listed.contains(i))
                .all(|i| !bad.contains(&i) && !unknown.contains(&i))
        {
            let frozen = listed
                .iter()
                .all(|i| !bad.contains(i) && !unknown.contains(i));
            if consistent && frozen {
                continue;
            }
            let note = "the row disagrees with its parity over data blocks on the bad-block list";
            if repair {
                rep.bytes_written +=
                    freeze_listed(array, row, rel, b, parity, slots, cells, &listed)?;
            }
            for i in d..total {
                push(
                    rep,
                    problem(
                        i,
                        cell_kind(i, d, false),
                        repair,
                        if repair {
                            format!("{note}: recomputed over them, so the blocks that verify stay recoverable")
                        } else {
                            format!("{note}: scrub --repair recomputes it, so the blocks that verify stay recoverable")
                        },
                    ),
                );
            }
            continue;
        }
        if consistent && bad.is_empty() {
            // Blocks whose entries are unknown (a damaged page, or a fold that found one) are
            // confirmed by the rest of the row when parity covers them: record their entries.
            if repair && !unverifiable && !unknown.is_empty() && unknown.len() <= parity {
                for &i in &unknown {
                    if let Some(dev) = array.source(slots[i], row) {
                        let agreed = Verified::agreed(block(i));
                        array.csum_record(&dev, array.cell_offset(row, (b * B) as u64), agreed);
                    }
                }
            }
            continue;
        }
        // Nothing known bad: with every entry known no checksum decides, and the syndromes
        // (RAID6) or the data (RAID5) do. Blocks whose entries are unknown go to the row
        // recovery, which rebuilds them when parity covers them and otherwise checks them
        // against the parity: located by the syndromes (RAID6) or reported unrepaired, never
        // taken as right (parity recomputed from them would vouch for rot).
        if bad.is_empty() {
            if !missing.is_empty() {
                // RAID6 with one member missing keeps one parity equation: checked. Otherwise
                // parity cannot be checked.
                if let ([m], true) = (&missing[..], parity == 2 && unknown.is_empty()) {
                    check_degraded_raid6_block(array, row, rel, slots, cells, *m, b, repair, rep)?;
                }
                continue;
            }
            if unknown.is_empty() {
                legacy_block(
                    array,
                    row,
                    parity,
                    slots,
                    b,
                    (&pd, &qd),
                    (p_bad, q_bad),
                    repair,
                    &|i| problem(i, "", false, String::new()),
                    rep,
                )?;
                continue;
            }
        }
        let by_checksum = !bad.is_empty();
        for &i in &bad {
            count_checksum_error(array, slots[i], row, repair);
        }
        // The one row-recovery routine decides (plan::recover), as for reads and rebuilds.
        let states: Vec<Cell> = (0..total)
            .map(|i| {
                if missing.contains(&i) {
                    Cell::Absent
                } else if bad.contains(&i) {
                    Cell::Bad
                } else if unknown.contains(&i) {
                    Cell::Unchecked
                } else {
                    Cell::Good
                }
            })
            .collect();
        let mut blocks: Vec<Vec<u8>> = (0..total)
            .map(|i| {
                if missing.contains(&i) {
                    vec![0u8; B]
                } else {
                    block(i).to_vec()
                }
            })
            .collect();
        let outcome = {
            let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(|x| &mut x[..]).collect();
            plan::recover(
                array.kernel(),
                &mut refs,
                &states,
                parity,
                array.checksum_algo().is_some(),
                |i, bytes| match cell(i).and_then(|cl| cl.wanted(rel, c, b)) {
                    Some(w) if !unverifiable && array.csum_digest(bytes) != w => vec![0],
                    _ => Vec::new(),
                },
            )
        };
        let suspects: Vec<usize> = (0..total)
            .filter(|&i| matches!(states[i], Cell::Bad | Cell::Unchecked))
            .collect();
        match outcome {
            Recovered::Intact => {}
            Recovered::Rebuilt {
                rewrite, vouched, ..
            } => {
                for i in rewrite {
                    let fresh = &blocks[i];
                    let on_disk = block(i);
                    // Vouched: rebuilt from cells that matched their entries. Otherwise
                    // plan::recover accepted it only where it matches its own entry (written
                    // below) or equals what was read (the row agreed with its parity as read).
                    let why = if vouched {
                        array.judged_good(fresh)
                    } else if &fresh[..] == on_disk {
                        Verified::agreed(fresh)
                    } else {
                        Verified::rebuilt(fresh)
                    };
                    let dev = array.source(slots[i], row);
                    let at = array.cell_offset(row, (b * B) as u64);
                    if &fresh[..] == on_disk {
                        // Redundancy agrees with the block: only its checksum entry is wrong
                        // (or unknown), and recording it again is the repair.
                        if repair {
                            if let Some(dev) = &dev {
                                array.csum_record(dev, at, why);
                            }
                        }
                        if states[i] == Cell::Bad {
                            push(
                                rep,
                                problem(
                                    i,
                                    "checksum",
                                    repair,
                                    "the block agrees with redundancy but not with its checksum entry"
                                        .into(),
                                ),
                            );
                        }
                        continue;
                    }
                    if repair {
                        array.repair_write(
                            slots[i],
                            why,
                            row,
                            (b * B) as u64,
                            WriteKind::of_cell(i, d),
                        )?;
                        rep.bytes_written += BLOCK;
                    }
                    let note = if states[i] == Cell::Bad {
                        "fails its checksum; reconstructed from the other members".to_string()
                    } else {
                        "differs from redundancy and its checksum page is damaged; reconstructed"
                            .to_string()
                    };
                    push(
                        rep,
                        problem(i, cell_kind(i, d, states[i] == Cell::Bad), repair, note),
                    );
                }
            }
            Recovered::Lost { lost, .. } => {
                for i in suspects {
                    push(
                        rep,
                        problem(
                            i,
                            cell_kind(i, d, by_checksum),
                            false,
                            format!(
                                "{} blocks of this row are bad or missing and parity covers {parity}: the data cannot be restored",
                                lost.len()
                            ),
                        ),
                    );
                }
            }
            Recovered::Inconsistent { unchecked } => {
                for i in unchecked {
                    push(
                        rep,
                        problem(
                            i,
                            cell_kind(i, d, false),
                            false,
                            if array.has_checksums() {
                                "its checksum page is damaged, as are others of this row, and the row's parity disagrees with them: which is wrong cannot be told"
                            } else {
                                "the row's parity disagrees with its data and, without checksums, which block is wrong cannot be told"
                            }
                            .into(),
                        ),
                    );
                }
            }
            Recovered::Contradicted { .. } => {
                // A listed block's entry matches nothing (a rebuild could not rebuild it): it
                // is lost, not a checksum failure, and a full scrub reports it so
                // (`report_listed_losses`; simulator seed 42001957 found it reported twice,
                // and unrepairable to every scrub after).
                let listed = |i: usize| array.is_lost_block(slots[i], row * c + (b * B) as u64);
                for i in suspects
                    .into_iter()
                    .filter(|&i| states[i] == Cell::Bad && !listed(i))
                {
                    push(
                        rep,
                        problem(
                            i,
                            cell_kind(i, d, true),
                            false,
                            "fails its checksum and the reconstruction does not match it either"
                                .into(),
                        ),
                    );
                }
            }
        }
    }
    Ok(())
}

/// Block `b` of a RAID6 row with member `m` (row position) missing and every block present
/// matching its entry (or no checksums): the one parity equation left is checked. With a
/// parity missing, the data decides: the parity left is recomputed from it on repair (a
/// scrub used to skip the row, and a parity a crash left stale beside verified data stayed
/// stale until a read rebuilt a second missing member's block from it: simulator seed
/// 29006602). With a data block missing, P and Q disagree over it and nothing tells which is
/// stale: reported, left as it is.
#[allow(clippy::too_many_arguments)]
fn check_degraded_raid6_block(
    array: &Array,
    row: u64,
    rel: u64,
    slots: &[usize],
    cells: &[Option<Cells>],
    m: usize,
    b: usize,
    repair: bool,
    rep: &mut ScrubReport,
) -> Result<()> {
    let c = array.layout().chunk();
    let d = slots.len() - 2;
    let mut bufs = column_blocks(slots, cells, rel, c, b);
    // The missing cell and the parity it leaves to be checked, rebuilt from the rest.
    let other = parity_left_to_check(m, d);
    let read = bufs[other].clone();
    {
        let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|x| &mut x[..]).collect();
        array.kernel().recover(&mut refs, 2, &[m, other])?;
    }
    if bufs[other] == read {
        return Ok(());
    }
    let within = (b * B) as u64;
    let problem = |i: usize, repaired: bool, note: &str| Problem {
        row,
        slot: slots[i],
        member: member_path(array, slots[i], row),
        member_offset: array.cell_offset(row, within),
        bytes: BLOCK,
        logical_offset: None,
        kind: cell_kind(i, d, false),
        repaired,
        note: note.into(),
    };
    if m < d {
        for i in [d, d + 1] {
            push(
                rep,
                problem(
                    i,
                    false,
                    "P and Q of this degraded row disagree over the missing member's data block: which is stale cannot be told, so neither is rewritten",
                ),
            );
        }
        return Ok(());
    }
    if repair {
        array.repair_write(
            slots[other],
            Verified::parity(&bufs[other]),
            row,
            within,
            WriteKind::of_cell(other, d),
        )?;
        rep.bytes_written += BLOCK;
    }
    let note = if repair {
        "the parity left in this degraded row disagrees with the data, which verifies: recomputed from it"
    } else {
        "the parity left in this degraded row disagrees with the data, which verifies: scrub --repair recomputes it"
    };
    push(rep, problem(other, repair, note));
    Ok(())
}

/// A parity-inconsistent block with no checksum to decide: RAID6 locates a single bad data
/// block from the syndromes; otherwise the data is taken as right (RAID5) or the parity that
/// disagrees alone is rewritten (RAID6).
#[allow(clippy::too_many_arguments)]
fn legacy_block(
    array: &Array,
    row: u64,
    parity: usize,
    slots: &[usize],
    b: usize,
    (pd, qd): (&[u8], &[u8]),
    (p_bad, q_bad): (bool, bool),
    repair: bool,
    base: &dyn Fn(usize) -> Problem,
    rep: &mut ScrubReport,
) -> Result<()> {
    let d = slots.len() - parity;
    let within = (b * B) as u64;
    let read = |i: usize| -> Result<Vec<u8>> {
        let mut x = AlignedBuf::zeroed(B);
        array.member_read(slots[i], &mut x, row, within)?;
        Ok(x.to_vec())
    };
    if parity == 2 && p_bad && q_bad {
        if let Some(z) = plan::locate(pd, qd).filter(|&z| z < d) {
            let fixed: Vec<u8> = read(z)?.iter().zip(pd).map(|(a, b)| a ^ b).collect();
            if repair {
                // P and Q agree on the one block they name: independent redundancy.
                let fixed = Verified::agreed(&fixed);
                array.repair_write(slots[z], fixed, row, within, WriteKind::Data)?;
                rep.bytes_written += BLOCK;
            }
            push(
                rep,
                Problem {
                    kind: "data",
                    repaired: repair,
                    note: "located from the P and Q syndromes".into(),
                    ..base(z)
                },
            );
            return Ok(());
        }
    }
    let decidable = parity == 1 || p_bad != q_bad;
    for (bad, idx, kind) in [(p_bad, d, "parity"), (q_bad, d + 1, "q-parity")] {
        if !bad {
            continue;
        }
        let fix = repair && decidable;
        if fix {
            let data: Vec<Vec<u8>> = (0..d).map(read).collect::<Result<_>>()?;
            let refs: Vec<&[u8]> = data.iter().map(|x| &x[..]).collect();
            let mut p = [0u8; B];
            let mut q = [0u8; B];
            (array.kernel().gen_pq)(&refs, &mut p, (parity == 2).then_some(&mut q[..]));
            let fresh = if idx == d { &p } else { &q };
            // RAID6: the other parity agrees with the data. RAID5 without checksums has
            // nothing to check the data by: it is taken as right, as md does.
            let fresh = if parity == 2 {
                Verified::agreed(fresh)
            } else {
                Verified::unchecked(fresh)
            };
            array.repair_write(slots[idx], fresh, row, within, WriteKind::Parity)?;
            rep.bytes_written += BLOCK;
        }
        push(
            rep,
            Problem {
                kind,
                repaired: fix,
                note: if parity == 1 {
                    "parity does not match the data and no checksum says which is wrong: the data is taken as right".into()
                } else if decidable {
                    "the other parity agrees with the data".into()
                } else {
                    "both parities disagree with the data and the syndromes name no single block"
                        .into()
                },
                ..base(idx)
            },
        );
    }
    Ok(())
}

fn mirror_batch(
    array: &Array,
    plan: &Plan,
    copies: usize,
    mode: Mode,
    rep: &mut ScrubReport,
    pool: &Pool,
    raw: BatchCells,
) -> Result<()> {
    let l = array.layout().clone();
    let c = l.chunk();
    let rows = plan.rows.clone();
    let read_rows = plan.read_rows.clone();
    // Logical chunks whose first copy sits in these rows (copy 0 of chunk x is at x*K).
    let (n, k) = (l.members() as u64, copies as u64);
    let first = (rows.start * n).div_ceil(k);
    let last = (rows.end * n)
        .div_ceil(k)
        .min(l.logical_chunks(array.rows()))
        .max(first);
    let cells = collect_cells(array, plan, raw, rep);
    rep.bytes_read += cells.iter().flatten().count() as u64 * (read_rows.end - read_rows.start) * c;
    rep.rows_checked += rows.end - rows.start;
    let mut undecided: Vec<MirrorUndecided> = Vec::new();
    for chunk in first..last {
        let avail: Vec<(usize, u64)> = (0..copies)
            .map(|i| l.mirror_cell(chunk, i))
            .filter(|&(s, r)| {
                r < read_rows.end && cells[s].as_ref().is_some_and(|cl| r < cl.held_end)
            })
            .collect();
        let cell = |s: usize| cells[s].as_ref().expect("available");
        for b in 0..(c as usize / B) {
            let block = |(s, r): (usize, u64)| cell(s).block(r - read_rows.start, c, b);
            let problem = |(s, r): (usize, u64), kind, repaired, note: String| Problem {
                row: r,
                slot: s,
                member: member_path(array, s, r),
                member_offset: array.cell_offset(r, (b * B) as u64),
                bytes: BLOCK,
                logical_offset: Some(chunk * c + (b * B) as u64),
                kind,
                repaired,
                note,
            };
            if mode == Mode::Resync {
                resync_mirror_block(
                    array,
                    &avail,
                    &|x| block(x),
                    &|x| cell(x.0).bad(x.1 - read_rows.start, c, b),
                    &|x| cell(x.0).unknown(x.1 - read_rows.start, c, b),
                    &|x| cell(x.0).wanted(x.1 - read_rows.start, c, b),
                    (b * B) as u64,
                    chunk,
                    rep,
                    &problem,
                    &mut undecided,
                )?;
                continue;
            }
            let repair = mode == Mode::Scrub { repair: true };
            // Copy `x` is wrong and `data` is right: rewritten when repairing, reported always.
            // `data` is a copy that matches its own checksum entry (or a bad copy's).
            let rewrite = |rep: &mut ScrubReport,
                           x: (usize, u64),
                           data: &[u8],
                           kind: &'static str,
                           note: &str|
             -> Result<()> {
                if repair {
                    let data = Verified::rebuilt(data);
                    array.repair_write(x.0, data, x.1, (b * B) as u64, WriteKind::Data)?;
                    rep.bytes_written += BLOCK;
                }
                push(rep, problem(x, kind, repair, note.into()));
                Ok(())
            };
            let unverifiable = |x: (usize, u64)| array.row_unverifiable(x.1);
            let bad: Vec<(usize, u64)> = avail
                .iter()
                .copied()
                .filter(|&x| !unverifiable(x) && cell(x.0).bad(x.1 - read_rows.start, c, b))
                .collect();
            let good: Vec<(usize, u64)> = avail
                .iter()
                .copied()
                .filter(|&x| {
                    !bad.contains(&x)
                        && !unverifiable(x)
                        && !cell(x.0).unknown(x.1 - read_rows.start, c, b)
                })
                .collect();
            for &x in &bad {
                count_checksum_error(array, x.0, x.1, mode == Mode::Scrub { repair: true });
            }
            if !bad.is_empty() {
                // A good copy: one matching its own checksum, or (its own entry unknown) one
                // matching the entry of a bad copy.
                let wanted: Vec<Digest> = bad
                    .iter()
                    .filter_map(|x| cell(x.0).wanted(x.1 - read_rows.start, c, b))
                    .collect();
                let source = good.first().copied().or_else(|| {
                    avail
                        .iter()
                        .copied()
                        .filter(|x| !bad.contains(x))
                        .find(|&x| wanted.contains(&array.csum_digest(block(x))))
                });
                if let Some(g) = source {
                    let data = block(g).to_vec();
                    for &x in &bad {
                        rewrite(
                            rep,
                            x,
                            &data,
                            "data checksum",
                            "fails its checksum; rewritten from a copy that matches its own",
                        )?;
                    }
                } else if avail.len() >= 2
                    && bad.len() == avail.len()
                    && avail.iter().all(|&x| block(x) == block(avail[0]))
                {
                    // Copies are written from one buffer, so their agreeing confirms nothing:
                    // the same corruption on every copy and a damaged entry look alike here.
                    // Never bless the data by rewriting the entries (reads keep failing it).
                    // Entries lagging their blocks after a crash are the resync's business.
                    for &x in &bad {
                        push(
                            rep,
                            problem(
                                x,
                                "data checksum",
                                false,
                                "every copy agrees but none with its checksum entry: the block is damaged alike on every copy, or its entries are; left as it is (reads of it fail until it is written again)".into(),
                            ),
                        );
                    }
                } else {
                    for &x in &bad {
                        push(
                            rep,
                            problem(
                                x,
                                "data checksum",
                                false,
                                if copies == 1 {
                                    "fails its checksum; RAID0 keeps no redundancy to restore it"
                                        .into()
                                } else {
                                    "fails its checksum and no copy matches its own".into()
                                },
                            ),
                        );
                    }
                    // The copies left, their entries unknown, are confirmed by nothing: a table
                    // page repaired over them must not vouch for them (an outside attack: a
                    // rebuild poisoned its target where the one copy left was unchecked, and a
                    // scrub --repair then rewrote the source's damaged page as it lay, rot
                    // included, which the next read returned and copied onto the target).
                    for &x in avail.iter().filter(|x| !bad.contains(x)) {
                        if cell(x.0).unknown(x.1 - read_rows.start, c, b) {
                            rep.unconfirmed
                                .push((x.0, array.cell_offset(x.1, (b * B) as u64)));
                        }
                    }
                }
                continue;
            }
            if avail.len() < 2 {
                continue;
            }
            if avail.iter().all(|&x| block(x) == block(avail[0])) {
                // Copies whose entries are unknown (a damaged table page, a refill from copies
                // that were) are confirmed by the others agreeing, as reads and the resync take
                // them: record their entries, or the last copy left after a member goes reads
                // as an error (simulator seed 47002557).
                if repair {
                    for &x in avail.iter().filter(|&&x| !unverifiable(x)) {
                        if cell(x.0).unknown(x.1 - read_rows.start, c, b) {
                            if let Some(dev) = array.source(x.0, x.1) {
                                let agreed = Verified::agreed(block(x));
                                array.csum_record(
                                    &dev,
                                    array.cell_offset(x.1, (b * B) as u64),
                                    agreed,
                                );
                            }
                        }
                    }
                }
                continue;
            }
            if let Some(&g) = good.first() {
                if good.iter().all(|&y| block(y) == block(g)) && good.len() < avail.len() {
                    // The copies that vouch for themselves agree; the others' entries are
                    // unknown (a damaged table page): the checked copies decide.
                    let data = block(g).to_vec();
                    for &x in avail.iter().filter(|&&x| block(x) != &data[..]) {
                        rewrite(
                            rep,
                            x,
                            &data,
                            "mirror",
                            "differs from a copy that matches its own checksum (its own entry is unknown: a damaged table page)",
                        )?;
                    }
                    continue;
                }
            }
            // Copies differ and no checksum decides: a strict majority does, if there is one.
            let majority = avail
                .iter()
                .map(|&x| block(x))
                .find(|cand| avail.iter().filter(|&&y| block(y) == *cand).count() * 2 > avail.len())
                .map(|x| x.to_vec());
            if majority.is_none() {
                for &x in &avail {
                    if cell(x.0).unknown(x.1 - read_rows.start, c, b) {
                        rep.unconfirmed
                            .push((x.0, array.cell_offset(x.1, (b * B) as u64)));
                    }
                }
            }
            for &x in &avail {
                let differs = majority
                    .as_ref()
                    .map(|g| &g[..] != block(x))
                    .unwrap_or(true);
                if !differs || majority.is_none() && x == avail[0] {
                    continue;
                }
                let fix = repair && majority.is_some();
                if fix {
                    let g = Verified::agreed(majority.as_ref().expect("decided"));
                    array.repair_write(x.0, g, x.1, (b * B) as u64, WriteKind::Data)?;
                    rep.bytes_written += BLOCK;
                }
                push(
                    rep,
                    problem(
                        x,
                        "mirror",
                        fix,
                        if majority.is_some() {
                            "differs from the majority of the copies".into()
                        } else {
                            "copies differ and no checksum or majority says which is right".into()
                        },
                    ),
                );
            }
        }
    }
    list_mirror_undecided(array, undecided, rep)?;
    give_back(pool, cells);
    Ok(())
}

/// A block of a mirrored chunk that the resync could not decide: its copies (slot, row) as
/// read, the bytes of the copy kept, and the logical chunk it belongs to (it is listed on its
/// first copy's cell).
struct MirrorUndecided {
    avail: Vec<(usize, u64)>,
    differs: Vec<bool>,
    kept: Vec<u8>,
    within: u64,
    chunk: u64,
}

/// Lists the blocks the resync of a batch could not decide on the bad-block list, durably
/// (one superblock write for the batch), then makes their copies agree and their entries
/// match them as they lie, as [`list_undecided`] does for parity rows: reads of them fail
/// until a write covers them, scrub finds the copies consistent, and nothing read there was
/// vouched for.
fn list_mirror_undecided(
    array: &Array,
    undecided: Vec<MirrorUndecided>,
    rep: &mut ScrubReport,
) -> Result<()> {
    if undecided.is_empty() {
        return Ok(());
    }
    for u in &undecided {
        if array.mark_lost_copy_block(u.chunk, u.within) {
            rep.listed += 1;
        }
    }
    array.persist()?;
    for u in &undecided {
        for (i, &(slot, row)) in u.avail.iter().enumerate() {
            if u.differs[i] {
                array.repair_write(
                    slot,
                    Verified::listed(&u.kept),
                    row,
                    u.within,
                    WriteKind::Data,
                )?;
                rep.bytes_written += BLOCK;
            } else if let Some(dev) = array.source(slot, row) {
                array.csum_record(
                    &dev,
                    array.cell_offset(row, u.within),
                    Verified::listed(&u.kept),
                );
            }
        }
    }
    Ok(())
}

/// Resync of one block of a mirrored chunk, whose copies `avail` (slot, row) were read. The
/// copy used is one that verifies ([`plan::choose_copy`]: the first matching its own checksum
/// entry); without one, copies that all agree (two or more: a completed write whose entries
/// the crash lost, as rot on one copy would make them differ) or a strict majority of them.
/// A copy whose own entry is unknown (a damaged table page) verifies too when it matches the
/// known entry of a copy that fails it: copies hold the same data, so one entry vouches for
/// every copy. The other copies are rewritten from it where they differ and get their entries
/// recorded where they agree. When nothing decides (copies differ and none verifies, or a lone
/// copy fails its entry or has none) the block is reported and goes to `undecided`, to be
/// listed ([`list_mirror_undecided`]); on RAID0 (one copy) a lone copy is
/// taken as it lies, there being nothing to tell it by.
#[allow(clippy::too_many_arguments)]
fn resync_mirror_block<'a>(
    array: &Array,
    avail: &[(usize, u64)],
    block: &dyn Fn((usize, u64)) -> &'a [u8],
    bad: &dyn Fn((usize, u64)) -> bool,
    unknown: &dyn Fn((usize, u64)) -> bool,
    wanted: &dyn Fn((usize, u64)) -> Option<Digest>,
    within: u64,
    chunk: u64,
    rep: &mut ScrubReport,
    problem: &dyn Fn((usize, u64), &'static str, bool, String) -> Problem,
    undecided: &mut Vec<MirrorUndecided>,
) -> Result<()> {
    // A copy whose entry is the lost marker holds a placeholder a rebuild or re-add wrote where
    // nothing could be verified (mirror targets are poisoned by their entry, not listed): it is
    // no version of the data, so it takes no part, however many copies agree on it (simulator
    // seed 45002228: a re-add and two rebuilds left the same zero placeholder with the lost
    // marker on all three copies; after a power cut they agreed, failing their entries, and were
    // recorded as a write whose entries lagged: the zeros read back as data).
    let kept: Vec<(usize, u64)> = avail
        .iter()
        .copied()
        .filter(|&x| wanted(x) != Some(super::csum::LOST_ENTRY))
        .collect();
    let avail = &kept[..];
    if avail.is_empty() {
        return Ok(());
    }
    let checksums = array.has_checksums();
    let states: Vec<Cell> = avail
        .iter()
        .map(|&x| {
            if !checksums {
                Cell::Unchecked
            } else if bad(x) {
                Cell::Bad
            } else if unknown(x) {
                Cell::Unchecked
            } else {
                Cell::Good
            }
        })
        .collect();
    let agree = |i: usize, j: usize| block(avail[i]) == block(avail[j]);
    let all_agree = (1..avail.len()).all(|j| agree(0, j));
    // Without checksums a copy "matches" nothing: copying it is unchecked, as in md.
    let matched: Vouch = if checksums {
        Verified::rebuilt
    } else {
        Verified::unchecked
    };
    // The entries of the copies that fail theirs: what was written last, by their account.
    let wanted_digests: Vec<Digest> = (0..avail.len())
        .filter(|&i| states[i] == Cell::Bad)
        .filter_map(|i| wanted(avail[i]))
        .collect();
    // After a stop that was not a power cut every completed write's entries are known
    // (pending.rs): bytes a copy holds while failing its entry are rot, however many copies
    // agree on them (two copies rotten alike after kill -9 were recorded as agreed: an outside
    // attack). After a power cut an entry can lag a completed write, and agreement decides.
    let current = checksums
        && array
            .entries_current
            .load(std::sync::atomic::Ordering::Acquire);
    // A copy whose bytes another copy's entry names: a whole version a write put there. After
    // a power cut that holds for a copy failing its own entry too: each copy's data write and
    // log page land or not on their own, so a cut write can leave one copy old next to its
    // new entry and the other new next to its old one (simulator seed 12001369, RAID10); an
    // entry on a member is never older than the last flush, so neither version is either.
    let vouched_by_another = (0..avail.len()).find(|&i| {
        let digest = array.csum_digest(block(avail[i]));
        match states[i] {
            Cell::Unchecked => wanted_digests.contains(&digest),
            Cell::Bad if !current => (0..avail.len())
                .any(|j| j != i && states[j] == Cell::Bad && wanted(avail[j]) == Some(digest)),
            _ => false,
        }
    });
    let rotten =
        |i: usize| current && (0..avail.len()).any(|j| states[j] == Cell::Bad && agree(i, j));
    let source: Option<(usize, Vouch, &str)> = match plan::choose_copy(&states, true, agree) {
        CopyChoice::Use { copy, .. } => Some((copy, matched, "differs from a copy that matches its checksum after an unclean stop; rewritten from it")),
        _ if vouched_by_another.is_some() => vouched_by_another.map(|i| (i, Verified::rebuilt as Vouch, "differs from a copy that matches the checksum entry of another copy (its own entry is unknown, a damaged table page, or lags the write a power cut tore) after an unclean stop; rewritten from it")),
        _ if avail.len() >= 2 && all_agree && !rotten(0) => Some((0, Verified::agreed, "")),
        _ if !checksums && avail.len() == 1 => Some((0, Verified::unchecked, "")),
        // RAID0: a lone copy failing its entry after a power cut is rot or an entry the cut
        // left behind (a lost log page), and nothing can tell which: taken as it lies.
        _ if array.layout().copies() == 1 && !rotten(0) => Some((0, Verified::agreed as Vouch, "")),
        // A strict majority of two or more (a lone copy is no majority: it agrees only with
        // itself, and its rot was recorded as agreed, simulator seed 11001781).
        _ => (0..avail.len())
            .find(|&i| {
                let n = (0..avail.len()).filter(|&j| agree(i, j)).count();
                !rotten(i) && n >= 2 && n * 2 > avail.len()
            })
            .map(|i| (i, Verified::agreed as Vouch, "differs from the majority of the copies after an unclean stop; rewritten from it"))
            .or_else(|| (!checksums).then_some((0, Verified::unchecked as Vouch, "copies differ after an unclean stop and no checksum or majority decides: copied from the first copy, as md does"))),
    };
    let Some((g, why, note)) = source else {
        // Nothing decides (copies differ and none verifies, matches another's entry or has a
        // majority; or a lone copy fails its entry or has none): a write the crash cut looks
        // exactly like rot here. Nothing read is vouched for: the block is listed (durably,
        // first), then one copy is kept (the first that does not fail its own entry) and
        // copied where the others differ, and the entries are made to match it as it lies,
        // as for parity rows. Reads of it fail until a write covers it. (Until 2026-12-06 the
        // first copy was kept and copied, as md does, with every entry marked unknown, and a
        // lone copy counted as a majority of one: rot then read back with exit 0, simulator
        // seeds 777000900, 11001781, 11004236, 12001369, 12002612.)
        let keep = (0..avail.len())
            .find(|&i| states[i] != Cell::Bad)
            .unwrap_or(0);
        let kept = block(avail[keep]).to_vec();
        for (i, &x) in avail.iter().enumerate() {
            if states[i] != Cell::Good || block(x) != &kept[..] {
                push(
                    rep,
                    problem(
                        x,
                        if states[i] == Cell::Bad {
                            "data checksum"
                        } else {
                            "mirror"
                        },
                        false,
                        if array.layout().copies() == 1 {
                            "after an unclean stop this block fails its checksum and no copy is kept to restore it: left as it is (reads of it fail until it is written again)".into()
                        } else {
                            "after an unclean stop no copy of this block verifies and the copies do not agree: rot cannot be told from a write the crash cut, so it is listed as lost (reads of it fail until it is written again)".into()
                        },
                    ),
                );
            }
        }
        if array.layout().copies() == 1 {
            // RAID0 lists nothing: the block keeps its entry, and reads of it fail.
            return Ok(());
        }
        undecided.push(MirrorUndecided {
            avail: avail.to_vec(),
            differs: avail.iter().map(|&x| block(x) != &kept[..]).collect(),
            kept,
            within,
            chunk,
        });
        return Ok(());
    };
    let good = block(avail[g]).to_vec();
    for (i, &x) in avail.iter().enumerate() {
        if block(x) == &good[..] {
            if checksums && states[i] != Cell::Good {
                if let Some(dev) = array.source(x.0, x.1) {
                    array.csum_record(&dev, array.cell_offset(x.1, within), why(&good));
                }
            }
            continue;
        }
        array.repair_write(x.0, why(&good), x.1, within, WriteKind::Data)?;
        rep.bytes_written += BLOCK;
        push(
            rep,
            problem(
                x,
                if states[i] == Cell::Bad {
                    "data checksum"
                } else {
                    "mirror"
                },
                true,
                if states[i] == Cell::Bad {
                    "fails its checksum after an unclean stop; rewritten from a copy that verifies"
                        .into()
                } else {
                    note.into()
                },
            ),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parity::gf;

    #[test]
    fn syndromes_locate_one_bad_data_chunk() {
        // Corrupt data chunk 2 of 4 by e: Pd = e, Qd = g^2 * e.
        let e = [0x13u8, 0, 0xff, 7];
        let qd: Vec<u8> = e.iter().map(|&x| gf::mul(gf::pow2(2), x)).collect();
        assert_eq!(plan::locate(&e, &qd), Some(2));
        assert_eq!(plan::locate(&e, &[1, 0, 1, 1]), None);
    }
}
