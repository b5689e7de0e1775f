//! Scrub and resync runs: the drivers. `run` checks (and per mode repairs or resyncs) ranges of
//! rows; `scrub_array` is a full scrub with its record, which resumes an interrupted run from
//! its checkpoint. The row work (reads, checks, repairs, what a resync may trust) is the
//! engine's (`array/check.rs`), reached through its job API (`array/job.rs`).

use std::ops::Range;
use std::time::Duration;

use crate::array::job::{self, ScrubRecord};
pub use crate::array::job::{Mode, Problem, ScrubOptions, ScrubReport};
use crate::array::Array;
use crate::clock::Instant;
use crate::error::Result;

/// How often a full scrub records its checkpoint.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(5);

/// Checks (and per `mode` repairs) every row in `ranges`. `progress(rows done, rows total)`.
pub fn run(
    array: &Array,
    ranges: &[Range<u64>],
    mode: Mode,
    max_rate: Option<u64>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScrubReport> {
    let opts = ScrubOptions {
        max_rate,
        ..Default::default()
    };
    let _job = array.job_slot();
    let mut rep = ScrubReport::default();
    let start = Instant::now();
    let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    let mut done = 0;
    for r in ranges {
        job::scrub_rows(
            array,
            r.clone(),
            mode,
            &opts,
            &mut rep,
            &mut |row| progress(done + row - r.start, total),
            &mut |_, _| Ok(()),
        )?;
        done += r.end - r.start;
    }
    if mode == Mode::Resync {
        // Replace targets are written alongside their slot's member but never read, so the
        // resync does not see them: copy the resynced rows they already hold again.
        job::refresh_replace_targets(array, ranges)?;
        array.resync_settled(ranges);
        if rep.listed > 0 {
            array.event(
                "bad-blocks",
                None,
                format!(
                    "the resync after an unclean stop could not decide {} data blocks (rot cannot be told from a write the crash cut): they read as errors until written again",
                    rep.listed
                ),
            );
        }
    }
    progress(total, total);
    rep.seconds = start.elapsed().as_secs_f64();
    Ok(rep)
}

/// A full scrub with its record: resumes an interrupted run from its checkpoint, records the
/// checkpoint every few seconds and the result at the end (on a writable array), and checks
/// the checksum tables themselves.
pub fn scrub_array(
    array: &Array,
    repair: bool,
    opts: &ScrubOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScrubReport> {
    let _job = array.job_slot();
    let start = Instant::now();
    let rows = array.rows();
    let prev = array.scrub_record();
    let resume = prev.in_progress() && prev.next_row < rows;
    let mut rec = if resume {
        prev.clone()
    } else {
        ScrubRecord {
            started: job::now_secs(),
            ..Default::default()
        }
    };
    rec.repair = repair;
    let mode = Mode::Scrub { repair };
    let mut rep = ScrubReport::default();
    rep.resumed_from_row = resume.then_some(rec.next_row);
    let base = (rec.rows_checked, rec.problems, rec.repaired, rec.unrepaired);
    let save = |rep: &ScrubReport, next: u64, rec: &mut ScrubRecord| -> Result<()> {
        rec.next_row = next;
        rec.rows_checked = base.0 + rep.rows_checked;
        rec.problems = base.1 + rep.problems.len() as u64;
        rec.repaired = base.2 + rep.repaired() as u64;
        rec.unrepaired = base.3 + rep.unrepaired() as u64;
        array.set_scrub_record(rec.clone());
        if array.is_writable() {
            array.persist()?;
        }
        Ok(())
    };
    save(&rep, rec.next_row, &mut rec)?;
    let bad_pages = job::check_tables(array)?;
    let first = rec.next_row;
    let mut last_save = Instant::now();
    let mut next = first;
    let mut r = Ok(());
    // Run by run of rows holding data: the regions the data map shows empty hold zeros on
    // every member (nothing to check; their table entries say zeros).
    while next < rows && !rep.stopped && r.is_ok() {
        let empty = if opts.include_empty {
            next
        } else {
            array.empty_rows_from(next, rows - next)
        };
        if empty > next {
            rep.empty_rows += empty - next;
            next = empty;
            progress(next, rows);
            continue;
        }
        let end = if opts.include_empty {
            rows
        } else {
            array.data_rows_from(next, rows - next)
        };
        r = job::scrub_rows(
            array,
            next..end,
            mode,
            opts,
            &mut rep,
            &mut |row| progress(row, rows),
            &mut |rep, row| {
                next = row;
                if last_save.elapsed() >= CHECKPOINT_EVERY {
                    last_save = Instant::now();
                    save(rep, row, &mut rec.clone())?;
                }
                Ok(())
            },
        );
        if job::scrub_halted(array, mode, opts) && next < rows {
            rep.stopped = true;
        }
    }
    if let Err(e) = r {
        save(&rep, next, &mut rec)?;
        return Err(e);
    }
    if rep.stopped {
        save(&rep, next, &mut rec)?;
        rep.seconds = start.elapsed().as_secs_f64();
        return Ok(rep);
    }
    job::repair_tables(array, mode, &bad_pages, first, &mut rep)?;
    job::report_listed_losses(array, &mut rep);
    progress(rows, rows);
    rec.finished = Some(job::now_secs());
    save(&rep, rows, &mut rec)?;
    if array.is_writable() && rep.bytes_written > 0 {
        array.flush()?;
    }
    rep.seconds = start.elapsed().as_secs_f64();
    array.event(
        if rep.problems.is_empty() {
            "scrub-finished"
        } else {
            "scrub-problems"
        },
        None,
        format!(
            "{}: {} rows checked, {} problems, {} repaired, {} left unrepaired",
            if repair { "scrub --repair" } else { "scrub" },
            rec.rows_checked,
            rec.problems,
            rec.repaired,
            rec.unrepaired
        ),
    );
    Ok(rep)
}
