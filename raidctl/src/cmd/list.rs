//! `raidctl list`: every array found on this machine (what /proc/mdstat and `zpool list` give):
//! the arrays served by a daemon, and those whose members sit on block devices or in the
//! directories given, found the way assembly finds members.

use std::collections::BTreeMap;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::{AssembleOptions, Result};
use serde_json::{json, Value};

use crate::output::uuid;
use crate::units::human;

/// List every array found: served ones, and those on block devices or in --scan directories
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Also look for members here: a directory (every file and block device in it) or a path;
    /// repeatable. Block devices are always looked at; member files only where named here
    #[arg(long, value_name = "DIR")]
    pub scan: Vec<PathBuf>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// Print Prometheus text of every array and member (for node_exporter's textfile
    /// collector): state, disks by state, sync progress, errors, bytes written, bad blocks
    #[arg(long, conflicts_with = "json")]
    pub prometheus: bool,
}

/// The status of every array a daemon serves, by uuid.
fn served() -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(crate::daemon::run_dir()) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "ctl") {
            continue;
        }
        // A stale socket (its daemon is gone) refuses the connection: nothing serves it.
        let Ok(s) = UnixStream::connect(&p) else {
            continue;
        };
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        if let Ok(r) = crate::control::call(s, &crate::protocol::Request::Status {}) {
            if let Some(u) = r["uuid"].as_str() {
                out.insert(u.to_string(), r);
            }
        }
    }
    out
}

/// One line of the list, from a status report.
fn entry(r: &Value) -> Value {
    if r["error"].is_string() {
        return r.clone();
    }
    let members = r["members"].as_array().cloned().unwrap_or_default();
    let present = members
        .iter()
        .filter(|m| m["slot"].is_number() && m["state"] == "active")
        .count();
    json!({
        "uuid": r["uuid"],
        "name": r["name"],
        "level": r["level"],
        "size_bytes": r["size_bytes"],
        "state": r["state"],
        "members_active": present,
        "members_expected": r["members_count"],
        "members": members.iter().filter_map(|m| m["path"].as_str()).collect::<Vec<_>>(),
        "served_by": r["served_by"],
        "in_use_by": r["in_use_by"],
        "job": r["job"],
        "scrub": r["scrub"]["state"],
    })
}

pub fn run(a: ListArgs) -> Result<ExitCode> {
    let reports = reports(&a.scan);
    if a.prometheus {
        let ok: Vec<Value> = reports
            .into_iter()
            .filter(|r| r["members_count"].is_number())
            .collect();
        print!("{}", crate::prom::render(&ok));
        return Ok(ExitCode::SUCCESS);
    }
    let list: Vec<Value> = reports.iter().map(entry).collect();
    if a.json {
        crate::output::print_json(&json!({ "arrays": list }));
    } else {
        print_human(&list);
    }
    Ok(ExitCode::SUCCESS)
}

/// Every array found, one list entry each.
pub fn collect(scan: &[PathBuf]) -> Vec<Value> {
    reports(scan).iter().map(entry).collect()
}

/// The status report of every array found: served ones (from their daemons) and those with
/// members on block devices or under `scan` (assembled read-only, without locks). An array
/// that does not assemble is an object with its uuid, members and the error.
fn reports(scan: &[PathBuf]) -> Vec<Value> {
    let mut arrays: BTreeMap<String, Value> = served();
    // Members found on block devices and in the directories given, grouped by array.
    let mut groups: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let found = raidcore::array::discover(&raidcore::array::Files, scan);
    for d in &found {
        groups
            .entry(uuid(&d.array_uuid))
            .or_default()
            .push(d.path.clone());
    }
    for (u, mut paths) in groups {
        // Assembled from a member the newest superblock counts as active, not from a disk
        // failed or replaced out of the array (it reported the array as unassembled).
        let first = found
            .iter()
            .find(|d| uuid(&d.array_uuid) == u)
            .and_then(|d| raidcore::array::member_to_assemble(&found, &d.array_uuid));
        if let Some(i) = first.and_then(|f| paths.iter().position(|p| *p == f)) {
            paths.swap(0, i);
        }
        if arrays.contains_key(&u) {
            continue;
        }
        let opts = AssembleOptions {
            writable: false,
            scan: paths.clone(),
            allow_failed: true,
            force: false,
            unlocked: true,
        };
        let e = match raidcore::Array::open(&paths[0], &opts) {
            Ok(array) => super::status::offline(&array),
            Err(e) => json!({
                "uuid": u,
                "state": "unassembled",
                "members": paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "error": e.to_string(),
            }),
        };
        arrays.insert(u, e);
    }
    arrays.into_values().collect()
}

fn print_human(list: &[Value]) {
    if list.is_empty() {
        println!("no arrays found (member files are found only under --scan DIR)");
        return;
    }
    let s = |v: &Value| crate::output::printable(v.as_str().unwrap_or("-"));
    println!(
        "{:<36}  {:<12} {:<6} {:>10} {:<11} {:>7}  where",
        "uuid", "name", "level", "size", "state", "members"
    );
    for e in list {
        let members = match (e["members_active"].as_u64(), e["members_expected"].as_u64()) {
            (Some(p), Some(n)) => format!("{p}/{n}"),
            _ => "-".into(),
        };
        let mut where_ = if let Some(pid) = e["served_by"]["pid"].as_u64() {
            format!("served by pid {pid}")
        } else if let Some(pid) = e["in_use_by"]["pid"].as_u64() {
            format!("in use by pid {pid}")
        } else {
            "offline".to_string()
        };
        if let Some(kind) = e["job"]["kind"].as_str() {
            where_.push_str(&format!(
                ", {kind} {} {:.0}%{}",
                s(&e["job"]["state"]),
                e["job"]["progress"].as_f64().unwrap_or(0.0) * 100.0,
                e["job"]["eta_seconds"]
                    .as_f64()
                    .map(|x| format!(" ETA {}", crate::units::human_duration(x)))
                    .unwrap_or_default()
            ));
        }
        if let Some(err) = e["error"].as_str() {
            // Errors name member paths: escaped like every other field.
            where_ = crate::output::printable(err);
        }
        println!(
            "{:<36}  {:<12} {:<6} {:>10} {:<11} {:>7}  {where_}",
            s(&e["uuid"]),
            s(&e["name"]),
            s(&e["level"]),
            e["size_bytes"]
                .as_u64()
                .map(human)
                .unwrap_or_else(|| "-".into()),
            s(&e["state"]),
            members,
        );
    }
}
