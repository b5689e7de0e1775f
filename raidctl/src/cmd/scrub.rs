//! `raidctl scrub`: check every row's parity and mirror copies, name each problem by row, slot,
//! offset and kind, and repair with --repair.

use std::process::ExitCode;

use clap::Args;
use raidcore::jobs::scrub::{self, Mode};
use raidcore::{Array, Result};
use serde_json::{json, Value};

use crate::cli::ArrayArgs;
use crate::units::parse_size;

/// Check parity and mirror copies of every row (exit 1 when unrepaired problems remain)
#[derive(Args, Debug)]
pub struct ScrubArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Rewrite what is wrong where the right content can be decided
    #[arg(long)]
    pub repair: bool,
    /// Read at most this many bytes per second
    #[arg(long, value_name = "BYTES/S", value_parser = parse_size)]
    pub max_rate: Option<u64>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// Runs a scrub over the whole array and returns its report as JSON.
pub fn scrub_json(array: &Array, repair: bool, max_rate: Option<u64>) -> Result<Value> {
    let json_out = false;
    let mut bar = crate::progress::Progress::new("scrub", json_out);
    let rep = scrub::run(
        array,
        std::slice::from_ref(&(0..array.rows())),
        Mode::Scrub { repair },
        max_rate,
        &mut |d, t| bar.update(d, t, None),
    )?;
    bar.finish();
    Ok(json!({
        "rows_checked": rep.rows_checked,
        "rows_skipped": rep.rows_skipped,
        "bytes_read": rep.bytes_read,
        "bytes_written": rep.bytes_written,
        "seconds": rep.seconds,
        "problems": rep.problems,
        "unrepaired": rep.unrepaired(),
    }))
}

pub fn run(a: ScrubArgs) -> Result<ExitCode> {
    let r = match crate::control::daemon_for(&a.array.array) {
        Some(c) => crate::control::call(
            c,
            json!({"cmd": "scrub", "repair": a.repair, "max_rate": a.max_rate}),
        )?,
        None => {
            let array = super::assemble(&a.array, true)?;
            let r = scrub_json(&array, a.repair, a.max_rate)?;
            array.close()?;
            r
        }
    };
    if a.json {
        crate::output::print_json(&r);
    } else {
        println!(
            "scrub: {} rows checked, {} skipped (members unavailable), {} problems, {} unrepaired",
            r["rows_checked"],
            r["rows_skipped"],
            r["problems"].as_array().map(|p| p.len()).unwrap_or(0),
            r["unrepaired"]
        );
        for p in r["problems"].as_array().into_iter().flatten() {
            println!(
                "  row {} slot {} {}{}: {}{}",
                p["row"],
                p["slot"],
                p["kind"].as_str().unwrap_or(""),
                p["logical_offset"]
                    .as_u64()
                    .map(|o| format!(" (array offset {o})"))
                    .unwrap_or_default(),
                p["note"].as_str().unwrap_or(""),
                if p["repaired"] == true {
                    " [repaired]"
                } else {
                    ""
                }
            );
        }
    }
    Ok(if r["unrepaired"].as_u64().unwrap_or(0) > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
