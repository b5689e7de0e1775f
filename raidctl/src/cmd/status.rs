//! `raidctl status`: the state of an array and each of its members, as a table or JSON.

use std::process::ExitCode;

use clap::Args;
use raidcore::{Array, Result};
use serde_json::{json, Value};

use crate::cli::ArrayArgs;
use crate::output::{time, uuid};
use crate::units::human;

/// Show an array's state and its members
///
/// Answers while another raidctl process holds the array (an offline scrub, rebuild or write:
/// no lock is taken), and through the daemon while `raidctl serve` runs it. Says which process
/// serves or holds the array, and whether a pending rebuild runs or was interrupted.
#[derive(Args, Debug)]
#[command(after_help = "EXIT STATUS (status):
  0  healthy: every member active, no rebuild pending
  1  degraded, or rebuilding (a member missing, faulty or not yet in sync)
  5  failed: more members unavailable than the level tolerates
  other codes as for every command (3: no or corrupt superblock, ...)")]
pub struct StatusArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// Print Prometheus text: array state, disks by state, sync progress, member state,
    /// errors, bytes written and bad blocks (labels: array name and uuid, member uuid, slot)
    #[arg(long, conflicts_with = "json")]
    pub prometheus: bool,
}

/// The status report (also printed by `create --json`).
pub fn report(a: &Array) -> Value {
    let sb = a.superblock();
    let l = a.layout();
    let bad = a.bad_block_counts();
    let bad_ranges = a.bad_blocks();
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
                "checksum_errors": m.checksum_errors,
                "last_error": m.last_error,
                "bad_blocks": m.slot.filter(|_| m.state.name() != "spare").and_then(|s| bad.get(s)).copied().unwrap_or(0),
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
        "checksums": a.has_checksums(),
        "checksum_hash": a.checksum_algo().map(|h| h.name()),
        // Member data per write-intent bit (None: no bitmap).
        "bitmap_chunk_bytes": a.bitmap_region_rows().map(|r| r * l.chunk()),
        "scrub": scrub_json(&a.scrub_record(), a.rows()),
        // Data blocks lost (the listed ranges may also cover parity cells, which are rebuilt).
        "lost_bytes": bad.iter().sum::<u64>() * 4096,
        "bad_block_ranges": bad_ranges
            .iter()
            .map(|r| json!({
                "slot": r.slot,
                "member_offset": sb.data_offset + r.start * 4096,
                "bytes": r.blocks * 4096,
            }))
            .collect::<Vec<_>>(),
        // At the cap the nearest ranges of a slot merge: the blocks between them are listed too.
        "bad_block_list_full": a.bad_block_list_full(),
    });
    // Capacity in regions written since create (rebuild and scrub skip the rest); absent on
    // arrays created before the data map.
    if let Some((used, size)) = a.data_map_usage() {
        v["data_map"] = json!({"bytes_holding_data": used, "bytes": size});
    }
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

/// The last scrub's time and result, or the unfinished one's checkpoint.
fn scrub_json(r: &raidcore::array::health::ScrubRecord, rows: u64) -> Value {
    if r.started == 0 {
        return json!({"state": "never"});
    }
    json!({
        "state": if r.in_progress() { "interrupted" } else { "finished" },
        "started": time(r.started),
        "finished": r.finished.map(time),
        "repair": r.repair,
        "next_row": r.in_progress().then_some(r.next_row),
        "rows": rows,
        "rows_checked": r.rows_checked,
        "problems": r.problems,
        "repaired": r.repaired,
        "unrepaired": r.unrepaired,
    })
}

pub fn run(a: StatusArgs) -> Result<ExitCode> {
    let r = match crate::control::daemon_for(&a.array.array)? {
        Some(c) => crate::control::call(c, &crate::protocol::Request::Status {})?,
        // A failed array is still reported (state "failed"), like mdadm --detail does. No
        // lock is taken: status answers while an offline job holds the members.
        None => offline(&super::assemble_with(&a.array, false, true)?),
    };
    if a.prometheus {
        print!("{}", crate::prom::render(std::slice::from_ref(&r)));
    } else if a.json {
        crate::output::print_json(&r);
    } else {
        print_human(&r);
    }
    Ok(ExitCode::from(health_code(&r)))
}

/// The exit code of a status report: 0 healthy, 1 degraded or rebuilding, 5 failed.
pub fn health_code(r: &Value) -> u8 {
    match r["state"].as_str() {
        Some("clean") => crate::exit::OK,
        Some("failed") => crate::exit::ARRAY_FAILED,
        _ => crate::exit::FAILURE,
    }
}

/// The report of an array no daemon serves, with the process holding it (an offline write,
/// scrub or rebuild, from the members' locks) and whether a pending job runs or was cut short.
pub fn offline(a: &Array) -> Value {
    let mut r = report(a);
    let members = a.members();
    let paths: Vec<&std::path::Path> = members.iter().filter_map(|m| m.path.as_deref()).collect();
    let holder = raidcore::device::probe::lock_holder_of(&paths)
        .filter(|(pid, _)| *pid != std::process::id());
    r["in_use_by"] = match &holder {
        Some((pid, cmd)) => json!({"pid": pid, "command": cmd}),
        None => Value::Null,
    };
    let cmd = holder.map(|(_, c)| c).unwrap_or_default();
    let runs = |words: &[&str]| {
        cmd.split_whitespace()
            .skip(1)
            .take(1)
            .any(|w| words.contains(&w))
    };
    r["job"] = job_json(&r, runs(&["rebuild", "add", "replace", "fail"]));
    // Faults are injected into served arrays only (never persisted).
    r["injected"] = json!([]);
    r["served_by"] = Value::Null;
    if r["scrub"]["state"] == "interrupted" && runs(&["scrub"]) {
        r["scrub"]["state"] = json!("running");
    }
    r
}

/// The rebuild or replace of the report's members, if one is pending: running (by the daemon
/// or the process holding the array) or interrupted (it resumes at the next `raidctl rebuild`,
/// `serve`, or writable command that runs it).
pub fn job_json(r: &Value, running: bool) -> Value {
    let pending: Vec<&Value> = r["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["progress"].is_number())
        .collect();
    let Some(m) = pending.first() else {
        return Value::Null;
    };
    json!({
        "kind": if m["state"] == "replacing" { "replace" } else { "rebuild" },
        "state": if running { "running" } else { "interrupted" },
        "progress": m["progress"],
        "slots": pending.iter().map(|m| m["slot"].clone()).collect::<Vec<_>>(),
    })
}

fn print_human(r: &Value) {
    let s = |v: &Value| crate::output::printable(v.as_str().unwrap_or(""));
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let extra = if let Some(w) = r["parity_weights"]
        .as_array()
        .filter(|_| r["level"] != "raid6")
    {
        format!(
            ", parity weights {}",
            w.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    } else if let Some(k) = r["copies"].as_u64() {
        format!(", {k} copies")
    } else {
        String::new()
    };
    println!("array    {} ({})", s(&r["name"]), s(&r["uuid"]));
    println!(
        "level    {}, {} members, chunk {}{extra}",
        s(&r["level"]),
        n(&r["members_count"]),
        human(n(&r["chunk_bytes"]))
    );
    println!(
        "size     {} ({} bytes)",
        human(n(&r["size_bytes"])),
        n(&r["size_bytes"])
    );
    if let Some(b) = r["bitmap_chunk_bytes"].as_u64() {
        println!("bitmap   one bit per {} of each member", human(b));
    }
    let held = r["served_by"]["pid"]
        .as_u64()
        .or_else(|| r["in_use_by"]["pid"].as_u64());
    let dirty = match (r["clean"] == true, held) {
        (true, _) => String::new(),
        (false, Some(pid)) => format!("; open for writing by pid {pid}"),
        (false, None) => "; not stopped cleanly (the next writable command resyncs it)".to_string(),
    };
    println!("state    {}{dirty}, events {}", s(&r["state"]), r["events"]);
    if n(&r["lost_bytes"]) > 0 {
        println!(
            "LOST     {} of data on the bad-block list: reads of it fail until it is written again (see below)",
            human(n(&r["lost_bytes"]))
        );
    }
    if let Some(pid) = r["served_by"]["pid"].as_u64() {
        println!(
            "served   by pid {pid} (`raidctl serve`), control socket {}{}",
            s(&r["served_by"]["control"]),
            r["served_by"]["nbd"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|u| u.as_str())
                .map(|u| format!(", {u}"))
                .collect::<String>()
        );
    } else if let Some(pid) = r["in_use_by"]["pid"].as_u64() {
        println!("in use   by pid {pid}: {}", s(&r["in_use_by"]["command"]));
    }
    for i in r["injected"].as_array().into_iter().flatten() {
        let n = &i["injected"];
        let total: u64 = n
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, v)| v.as_u64())
            .sum();
        println!(
            "drill    {}: {}{}; {total} faults injected so far (not persisted: a restart clears them)",
            s(&i["path"]),
            crate::inject::describe(&i["faults"]),
            if i["timed_out"] == true {
                ", given up on by the member timeout"
            } else {
                ""
            }
        );
    }
    let job = &r["job"];
    if let Some(kind) = job["kind"].as_str() {
        let pct = job["progress"].as_f64().unwrap_or(0.0) * 100.0;
        if job["state"] == "running" {
            let eta = job["eta_seconds"]
                .as_f64()
                .map(|s| format!(", about {} left", crate::units::human_duration(s)))
                .unwrap_or_default();
            println!("job      {kind} running, {pct:.0}% done{eta}");
        } else {
            println!(
                "job      {kind} interrupted at {pct:.0}%; it resumes from there at the next `raidctl rebuild` (or `raidctl serve`)"
            );
        }
    }
    println!("created  {}", s(&r["created"]));
    if r["data_map"].is_object() {
        let used = n(&r["data_map"]["bytes_holding_data"]);
        let size = n(&r["data_map"]["bytes"]).max(1);
        println!(
            "written  {} of {} in regions written since create ({:.0}%); rebuild and scrub skip the rest",
            human(used),
            human(size),
            used as f64 * 100.0 / size as f64
        );
    }
    let sc = &r["scrub"];
    match sc["state"].as_str() {
        Some("finished") => println!(
            "scrub    {} {}: {} problems, {} repaired, {} unrepaired",
            if sc["repair"] == true {
                "repair"
            } else {
                "check"
            },
            s(&sc["finished"]),
            n(&sc["problems"]),
            n(&sc["repaired"]),
            n(&sc["unrepaired"])
        ),
        Some("running") => println!(
            "scrub    running (row {} of {}, started {})",
            n(&sc["next_row"]),
            n(&sc["rows"]),
            s(&sc["started"])
        ),
        Some("interrupted") => println!(
            "scrub    interrupted at row {} of {} (started {}); `raidctl scrub` resumes it",
            n(&sc["next_row"]),
            n(&sc["rows"]),
            s(&sc["started"])
        ),
        _ => println!("scrub    never run"),
    }
    match r["checksum_hash"].as_str() {
        Some(h) => println!("checksums {h}, every 4 KiB block"),
        None => println!("checksums off (created with --no-checksums)"),
    }
    println!();
    println!(
        "{:>4}  {:<15} {:>10} {:>10} {:>10} {:>5} {:>5} {:>5} {:>5}  path",
        "slot", "state", "written", "data", "parity", "read", "write", "cksum", "bad"
    );
    for m in r["members"].as_array().into_iter().flatten() {
        let state = match m["progress"].as_f64() {
            Some(p) => format!("{} {:.0}%", s(&m["state"]), p * 100.0),
            None => s(&m["state"]),
        };
        println!(
            "{:>4}  {:<15} {:>10} {:>10} {:>10} {:>5} {:>5} {:>5} {:>5}  {}{}",
            m["slot"]
                .as_u64()
                .map(|x| x.to_string())
                .unwrap_or_else(|| "-".into()),
            state,
            human(n(&m["bytes_written"])),
            human(n(&m["bytes_written_by_kind"]["data"])),
            human(n(&m["bytes_written_by_kind"]["parity"])),
            n(&m["read_errors"]),
            n(&m["write_errors"]),
            n(&m["checksum_errors"]),
            n(&m["bad_blocks"]),
            crate::output::printable(m["path"].as_str().unwrap_or("-")),
            m["reason"]
                .as_str()
                .map(|r| format!("  ({r})"))
                .unwrap_or_default()
        );
    }
    let ranges = r["bad_block_ranges"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !ranges.is_empty() {
        println!();
        println!("bad blocks (lost; reads fail until written again):");
        for b in ranges.iter().take(8) {
            println!(
                "  slot {} member offset {} length {}",
                n(&b["slot"]),
                n(&b["member_offset"]),
                human(n(&b["bytes"]))
            );
        }
        if ranges.len() > 8 {
            println!("  ... {} more ranges (--json lists all)", ranges.len() - 8);
        }
        if r["bad_block_list_full"] == true {
            println!(
                "  the list is full ({} ranges): the nearest ranges were merged, so intact blocks between them are listed too and read as errors until written",
                ranges.len()
            );
        }
    }
}
