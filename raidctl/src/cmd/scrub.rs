//! `raidctl scrub`: check every block's checksum, every row's parity and mirror copies, name
//! each problem by member, member offset, logical offset and kind, and repair with --repair.
//! An interrupted scrub resumes from its checkpoint.

use std::process::ExitCode;

use clap::Args;
use raidcore::jobs::scrub;
use raidcore::{Array, Result};
use serde_json::{json, Value};

use crate::cli::ArrayArgs;
use crate::units::parse_size;

/// Check every block's checksum, parity and mirror copies (exit 1 when unrepaired problems remain)
#[derive(Args, Debug)]
pub struct ScrubArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    #[command(flatten)]
    pub drill: crate::inject::InjectArgs,
    /// Rewrite what is wrong where the right content can be decided
    #[arg(long)]
    pub repair: bool,
    /// Read at most this many bytes per second
    #[arg(long, value_name = "BYTES/S", value_parser = parse_size)]
    pub max_rate: Option<u64>,
    /// While clients' requests are served, read at this many bytes per second (the scrub
    /// yields to them; full speed, or --max-rate, when they are idle; 0: never yield). Default
    /// 32M
    #[arg(long, value_name = "BYTES/S", value_parser = parse_size)]
    pub min_rate: Option<u64>,
    /// Also check the regions never written since create (or trimmed whole), which a scrub
    /// skips: they should hold zeros on every member, and this finds rot there
    #[arg(long)]
    pub include_empty: bool,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// Runs a full scrub (resuming an interrupted one) and returns its report as JSON.
pub fn scrub_json(
    array: &Array,
    repair: bool,
    max_rate: Option<u64>,
    min_rate: Option<u64>,
    include_empty: bool,
) -> Result<Value> {
    let mut bar = crate::progress::Progress::new("scrub", false);
    // Progress in bytes read from the members, so the rate is the scrub's read rate.
    let per_row = array.layout().chunk() * array.layout().members() as u64;
    let rep = scrub::scrub_array(
        array,
        repair,
        &scrub::ScrubOptions {
            max_rate,
            min_rate: crate::cmd::rebuild::min_rate(min_rate),
            stop: None,
            include_empty,
        },
        &mut |d, t| bar.update(d * per_row, t * per_row, None),
    )?;
    bar.finish();
    Ok(json!({
        "rows_checked": rep.rows_checked,
        "rows_skipped": rep.rows_skipped,
        "rows_empty": rep.empty_rows,
        "resumed_from_row": rep.resumed_from_row,
        "stopped": rep.stopped,
        "bytes_read": rep.bytes_read,
        "bytes_written": rep.bytes_written,
        "seconds": rep.seconds,
        "read_bytes_per_second": if rep.seconds > 0.0 { (rep.bytes_read as f64 / rep.seconds) as u64 } else { 0 },
        "checksums": array.has_checksums(),
        "problems": rep.problems,
        "repaired": rep.repaired(),
        "unrepaired": rep.unrepaired(),
    }))
}

pub fn run(a: ScrubArgs) -> Result<ExitCode> {
    let r = match crate::control::daemon_for(&a.array.array)? {
        Some(_) if !a.drill.inject.is_empty() => return Err(crate::inject::served_error()),
        Some(c) => crate::control::call(
            c,
            &crate::protocol::Request::Scrub {
                repair: a.repair,
                max_rate: a.max_rate,
                min_rate: a.min_rate,
                include_empty: a.include_empty,
            },
        )?,
        None => {
            // The drill lives as long as the array: its watchdog and its end-of-run report.
            let (_drill, array) = a.drill.assemble(&a.array, true)?;
            let r = scrub_json(&array, a.repair, a.max_rate, a.min_rate, a.include_empty)?;
            array.close()?;
            r
        }
    };
    if a.json {
        crate::output::print_json(&r);
    } else {
        if let Some(row) = r["resumed_from_row"].as_u64() {
            println!("scrub: resumed an interrupted scrub at row {row}");
        }
        if r["stopped"] == true {
            println!("scrub: stopped before the end to let a rebuild run; the next scrub resumes where this one stopped");
        }
        println!(
            "scrub: {} rows checked, {} skipped (members unavailable), {} empty (never written: not read), {} problems, {} repaired, {} unrepaired{}",
            r["rows_checked"],
            r["rows_skipped"],
            r["rows_empty"].as_u64().unwrap_or(0),
            r["problems"].as_array().map(|p| p.len()).unwrap_or(0),
            r["repaired"],
            r["unrepaired"],
            if r["checksums"] == false { " (no checksums: parity and copies only)" } else { "" }
        );
        for p in r["problems"].as_array().into_iter().flatten() {
            println!(
                "  {}: slot {} {} member offset {} ({} bytes){}: {}{}",
                p["kind"].as_str().unwrap_or(""),
                p["slot"],
                p["member"].as_str().unwrap_or("(unavailable)"),
                p["member_offset"],
                p["bytes"],
                p["logical_offset"]
                    .as_u64()
                    .map(|o| format!(", array offset {o}"))
                    .unwrap_or_default(),
                p["note"].as_str().unwrap_or(""),
                if p["repaired"] == true {
                    " [repaired]"
                } else {
                    " [not repaired]"
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
