//! `raidctl status`: the state of an array and each of its members, as a table or JSON.

use std::process::ExitCode;

use clap::Args;
use raidcore::{Array, Result};
use serde_json::{json, Value};

use crate::cli::ArrayArgs;
use crate::output::{time, uuid};
use crate::units::human;

/// Show an array's state and its members
#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// The status report (also printed by `create --json`).
pub fn report(a: &Array) -> Value {
    let sb = a.superblock();
    let l = a.layout();
    let members: Vec<Value> = a
        .members()
        .into_iter()
        .map(|m| {
            json!({
                "slot": m.slot,
                "path": m.path.as_ref().map(|p| p.display().to_string()),
                "uuid": uuid(&m.uuid),
                "state": m.state.name(),
                "reason": m.reason,
                "bytes_written": m.wear.total(),
                "bytes_written_by_kind": {
                    "data": m.wear.data_bytes,
                    "parity": m.wear.parity_bytes,
                    "metadata": m.wear.metadata_bytes,
                    "rebuild": m.wear.rebuild_bytes,
                },
                "endurance_bytes": m.wear.endurance_bytes,
                "progress": m.progress,
                "read_errors": m.read_errors,
                "write_errors": m.write_errors,
            })
        })
        .collect();
    let mut v = json!({
        "name": sb.name,
        "uuid": uuid(&sb.array_uuid),
        "level": l.level().name(),
        "chunk_bytes": l.chunk(),
        "size_bytes": a.size(),
        "state": a.state().name(),
        "members_count": l.members(),
        "tolerance": l.tolerance(),
        "events": sb.events,
        "clean": sb.clean,
        "data_offset": sb.data_offset,
        "created": time(sb.created),
        "updated": time(sb.updated),
        "members": members,
    });
    if l.parity_count() == 1 {
        v["parity_weights"] = json!(l.weights());
    }
    if l.level() == raidcore::Level::Raid6 {
        v["parity_weights"] = json!(vec![1; l.members()]);
    }
    if l.level() == raidcore::Level::Raid10 {
        v["copies"] = json!(l.copies());
    }
    v
}

pub fn run(a: StatusArgs) -> Result<ExitCode> {
    // A failed array is still reported (state "failed"), like mdadm --detail does.
    let array = super::assemble_with(&a.array, false, true)?;
    let r = report(&array);
    if a.json {
        crate::output::print_json(&r);
        return Ok(ExitCode::SUCCESS);
    }
    let l = array.layout();
    let weights = if l.parity_count() == 1 {
        format!(
            ", parity weights {}",
            l.weights()
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    } else if l.level() == raidcore::Level::Raid10 {
        format!(", {} copies", l.copies())
    } else {
        String::new()
    };
    println!(
        "array    {} ({})",
        r["name"].as_str().unwrap_or(""),
        r["uuid"].as_str().unwrap_or("")
    );
    println!(
        "level    {}, {} members, chunk {}{weights}",
        l.level().name(),
        l.members(),
        human(l.chunk())
    );
    println!("size     {} ({} bytes)", human(array.size()), array.size());
    println!(
        "state    {}{}, events {}",
        array.state().name(),
        if r["clean"] == true {
            ""
        } else {
            " (dirty: not stopped cleanly or open)"
        },
        r["events"]
    );
    println!("created  {}", r["created"].as_str().unwrap_or(""));
    println!();
    println!(
        "{:>4}  {:<15} {:>10} {:>10} {:>10}  path",
        "slot", "state", "written", "data", "parity"
    );
    for m in array.members() {
        let state = match m.progress {
            Some(p) => format!("{} {:.0}%", m.state.name(), p * 100.0),
            None => m.state.name().to_string(),
        };
        println!(
            "{:>4}  {:<15} {:>10} {:>10} {:>10}  {}{}",
            m.slot.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            state,
            human(m.wear.total()),
            human(m.wear.data_bytes),
            human(m.wear.parity_bytes),
            m.path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "-".into()),
            m.reason.map(|r| format!("  ({r})")).unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}
