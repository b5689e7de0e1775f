//! `raidctl rebuild`: run (or resume) every pending rebuild and replace, with progress.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use raidcore::jobs::rebuild::{self, RebuildOptions};
use raidcore::{Array, Result};
use serde_json::json;

use crate::cli::ArrayArgs;
use crate::protocol::RebuildStarted;
use crate::units::parse_size;

/// Flags shared by the commands that start a rebuild.
#[derive(Args, Debug, Clone)]
pub struct RebuildFlags {
    /// Rebuild at most this many bytes per second (K/M/G suffixes)
    #[arg(long, value_name = "BYTES/S", value_parser = parse_size)]
    pub max_rate: Option<u64>,
    /// While clients' requests are served, rebuild at this many bytes per second (it yields to
    /// them; full speed, or --max-rate, when they are idle; 0: never yield). Default 32M
    #[arg(long, value_name = "BYTES/S", value_parser = parse_size)]
    pub min_rate: Option<u64>,
    /// Only record the change; run the rebuild later with `raidctl rebuild` (arrays no daemon
    /// serves: `raidctl serve` runs rebuilds itself, and refuses this)
    #[arg(long)]
    pub no_rebuild: bool,
    /// Progress as one JSON object per line on stdout, and a JSON summary
    #[arg(long)]
    pub json: bool,
}

impl RebuildFlags {
    /// Refuses what a served array cannot honour: the daemon runs every rebuild and replace
    /// itself, so `--no-rebuild` (only record the change) would be ignored there.
    pub fn served(&self) -> raidcore::Result<()> {
        if self.no_rebuild {
            return Err(raidcore::Error::new(
                raidcore::ErrorKind::InvalidInput,
                "--no-rebuild applies to arrays no daemon serves: `raidctl serve` runs rebuilds and replaces itself as soon as they are recorded (--max-rate slows one); nothing changed",
            ));
        }
        Ok(())
    }

    /// Defaults: no rate limit, rebuild now, human progress.
    pub fn quiet() -> RebuildFlags {
        RebuildFlags {
            max_rate: None,
            min_rate: None,
            no_rebuild: false,
            json: false,
        }
    }
}

/// Rebuild (or resume the rebuild of) every slot that has a target; promote hot spares first
#[derive(Args, Debug)]
pub struct RebuildArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    #[command(flatten)]
    pub drill: crate::inject::InjectArgs,
    #[command(flatten)]
    pub flags: RebuildFlags,
}

/// A job's rate while clients are served, from `--min-rate` (unset: the default; 0: the job
/// never yields).
pub fn min_rate(flag: Option<u64>) -> Option<u64> {
    match flag {
        None => Some(raidcore::jobs::DEFAULT_MIN_RATE),
        Some(0) => None,
        Some(r) => Some(r),
    }
}

/// Runs the pending work after a change, unless --no-rebuild; then closes the array.
pub fn after_change(array: Array, f: &RebuildFlags) -> Result<ExitCode> {
    finish(array, f, true)
}

fn finish(array: Array, f: &RebuildFlags, quiet_if_idle: bool) -> Result<ExitCode> {
    if f.no_rebuild {
        array.close()?;
        return Ok(ExitCode::SUCCESS);
    }
    let out = work(&array, f, quiet_if_idle);
    let closed = array.close();
    out?;
    closed?;
    Ok(ExitCode::SUCCESS)
}

fn work(array: &Array, f: &RebuildFlags, quiet_if_idle: bool) -> Result<()> {
    let opts = RebuildOptions {
        max_rate: f.max_rate,
        min_rate: min_rate(f.min_rate),
        checkpoint_every: Duration::from_secs(2),
        ..RebuildOptions::default()
    };
    if f.json && !quiet_if_idle {
        // `rebuild --json` starts with what it starts, served or not.
        crate::control::report(&RebuildStarted::of(array), true, &[]);
    }
    let mut bar = crate::progress::Progress::new("rebuild", f.json);
    let reports = rebuild::run(array, &opts, &mut |pass, done, total| {
        bar.update(done, total, Some(pass.kind))
    })?;
    bar.finish();
    for r in &reports {
        let rate = r.bytes_written as f64 / r.seconds.max(1e-6);
        if f.json {
            println!(
                "{}",
                json!({"done": r.kind, "slots": r.slots, "resumed_from_row": r.resumed_from_row, "rows": r.rows,
                       "bytes_written": r.bytes_written, "seconds": r.seconds, "rate_bytes_per_sec": rate as u64,
                       "checksum_repaired": r.checksum_repaired, "unrecoverable_blocks": r.unrecoverable_blocks,
                       "rows_empty": r.empty_rows, "rows_held": r.held_rows})
            );
        } else {
            eprintln!(
                "raidctl: {} of slot(s) {:?} done: {} written in {:.1} s ({}/s){}",
                r.kind,
                r.slots,
                crate::units::human(r.bytes_written),
                r.seconds,
                crate::units::human(rate as u64),
                if r.resumed_from_row > 0 {
                    format!(", resumed at row {}", r.resumed_from_row)
                } else {
                    String::new()
                }
            );
            if r.held_rows > 0 {
                eprintln!(
                    "raidctl: {} of {} rows were unchanged since the member left (re-add map): kept as they are, not read or written",
                    r.held_rows, r.rows
                );
            }
            if r.empty_rows > 0 {
                eprintln!(
                    "raidctl: {} of {} rows were never written since create (data map): zeroed on the new member, not read",
                    r.empty_rows, r.rows
                );
            }
            if r.checksum_repaired > 0 {
                eprintln!(
                    "raidctl: {} survivor blocks failed their checksums and were repaired from parity",
                    r.checksum_repaired
                );
            }
            if r.unrecoverable_blocks > 0 {
                eprintln!(
                    "raidctl: warning: {} rebuilt blocks could not be restored (survivor blocks failed their checksums beyond what redundancy covers); they read as errors: run `raidctl scrub` to list them",
                    r.unrecoverable_blocks
                );
            }
        }
    }
    if reports.is_empty() && !f.json && !quiet_if_idle {
        eprintln!(
            "raidctl: nothing to rebuild; the array is {}",
            array.state().name()
        );
    }
    Ok(())
}

pub fn run(a: RebuildArgs) -> Result<ExitCode> {
    if let Some(c) = crate::control::daemon_for(&a.array.array)? {
        if !a.drill.inject.is_empty() {
            return Err(crate::inject::served_error());
        }
        let r: RebuildStarted = crate::control::call_as(
            c,
            &crate::protocol::Request::Rebuild {
                max_rate: a.flags.max_rate,
                min_rate: a.flags.min_rate,
            },
        )?;
        let say = if r.pending == 0 {
            "nothing to rebuild (the serving daemon starts any rebuild itself); see raidctl status"
                .to_string()
        } else {
            format!(
                "the serving daemon runs the rebuild ({} pending); see raidctl status",
                r.pending
            )
        };
        crate::control::report(&r, a.flags.json, &[say]);
        return Ok(ExitCode::SUCCESS);
    }
    // The drill lives as long as the array: its watchdog and its end-of-run report.
    let (_drill, array) = a.drill.assemble(&a.array, true)?;
    finish(
        array,
        &RebuildFlags {
            no_rebuild: false,
            ..a.flags
        },
        false,
    )
}
