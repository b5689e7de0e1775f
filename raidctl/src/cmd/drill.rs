//! `raidctl drill`: canned failure scenarios run offline on an array of loop devices or files.
//! Each writes known data over a region, injects a fault at a chosen moment (bad sectors during
//! a rebuild, a second failure mid-rebuild, bit rot, a slow member, a member that vanishes and
//! returns, replacement of the most worn member), lets the array react, verifies every byte,
//! and judges what happened against the documented behaviour (docs/drills.md). The region's
//! contents are put back at the end.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, ValueEnum};
use raidcore::array::MemberRef;
use raidcore::device::inject::{Faults, Where};
use raidcore::jobs::rebuild::{self, RebuildOptions};
use raidcore::jobs::scrub::{self, Mode};
use raidcore::layout::Redundancy;
use raidcore::{Array, Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::cli::ArrayArgs;
use crate::units::parse_size;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// A member fails; while it is rebuilt, a survivor has unreadable sectors
    BadSectorsDuringRebuild,
    /// A member fails; halfway through its rebuild a second one vanishes (RAID 6, or
    /// mirrors with three or more copies)
    SecondFailureDuringRebuild,
    /// 1 % of one member's blocks rot; scrub --repair must find and fix every one
    BitRot,
    /// One member answers 5 ms (+ up to 5 ms) late; nothing may fail
    SlowMember,
    /// A member vanishes under writes and returns: stale, it is added back and rebuilt
    VanishAndReturn,
    /// The most worn member (SMART wear, else bytes written) is replaced by --spare
    SmartReplacement,
}

/// Rehearse a failure offline and report what the array did (writes a region, then restores it)
#[derive(Args, Debug)]
#[command(
    after_help = "The array must not be served, and must be clean. Examples:\n  \
    raidctl drill /srv/raid/m0 bit-rot\n  \
    raidctl drill /dev/loop0 second-failure-during-rebuild --json\n  \
    raidctl drill /srv/raid/m0 smart-replacement --spare /srv/raid/new\n\
Exit status 0: the array behaved as docs/drills.md says; 1: it did not (the report says where)."
)]
pub struct DrillArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// The scenario
    #[arg(
        value_enum,
        value_name = "SCENARIO",
        required_unless_present = "restore"
    )]
    pub scenario: Option<Scenario>,
    /// Put back the region an interrupted drill saved (in STATE_DIR/drills), and nothing else
    #[arg(long, conflicts_with = "scenario")]
    pub restore: bool,
    /// Give up on (and fail) a member that has not answered for this long
    #[arg(long, value_name = "DURATION", default_value = "30", value_parser = crate::units::parse_duration_or_zero)]
    pub member_timeout: u64,
    /// Size of the region at the start of the array the workload writes (saved first and put
    /// back at the end)
    #[arg(long, default_value = "32M", value_parser = parse_size)]
    pub size: u64,
    /// smart-replacement: the device that replaces the most worn member (it stays in the
    /// array; the worn one leaves it)
    #[arg(long, value_name = "DEVICE")]
    pub spare: Option<PathBuf>,
    /// smart-replacement: overwrite a spare that holds a file system or another array
    #[arg(long)]
    pub force: bool,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

const IO: usize = 1 << 20;

/// A scenario's name on the command line.
fn name(s: Scenario) -> String {
    s.to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

fn invalid(msg: String) -> Error {
    Error::new(ErrorKind::InvalidInput, msg)
}

/// What happened, in order, with checks against the documented behaviour.
struct Report {
    start: Instant,
    timeline: Vec<(f64, String)>,
    checks: Vec<(String, bool, String)>,
    facts: serde_json::Map<String, Value>,
    /// Slots the scenario itself failed (only these are added back at the end).
    failed: Vec<usize>,
}

impl Report {
    fn new() -> Report {
        Report {
            start: Instant::now(),
            timeline: Vec::new(),
            checks: Vec::new(),
            facts: serde_json::Map::new(),
            failed: Vec::new(),
        }
    }

    fn at(&mut self, what: impl Into<String>) {
        self.timeline
            .push((self.start.elapsed().as_secs_f64(), what.into()));
    }

    fn check(&mut self, name: &str, ok: bool, detail: impl Into<String>) {
        self.checks.push((name.into(), ok, detail.into()));
    }

    fn fact(&mut self, k: &str, v: Value) {
        self.facts.insert(k.into(), v);
    }

    fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.1)
    }
}

/// The known data of one pass of the workload.
fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    raidcore::rng::SplitMix64(seed).fill(&mut v);
    v
}

/// Stops the scenario at a step when SIGINT or SIGTERM arrived; the region is put back.
fn interrupted() -> Result<()> {
    if crate::daemon::stop_requested() {
        return Err(Error::new(
            ErrorKind::Io,
            "interrupted by a signal: the scenario stops, the array is brought back and the region put back",
        ));
    }
    Ok(())
}

/// A workload write of the scenario: interruptible between its 1 MiB writes.
fn write_work(array: &Array, buf: &[u8]) -> Result<()> {
    write_chunks(array, buf, true)
}

/// Writes `buf` at the start of the array (putting a region back: not interruptible).
fn write_all(array: &Array, buf: &[u8]) -> Result<()> {
    write_chunks(array, buf, false)
}

fn write_chunks(array: &Array, buf: &[u8], interruptible: bool) -> Result<()> {
    for (i, c) in buf.chunks(IO).enumerate() {
        if interruptible {
            interrupted()?;
        }
        array
            .write(c, (i * IO) as u64)
            .map_err(|e| e.context(format!("drill: workload write at array offset {}", i * IO)))?;
    }
    array.flush()
}

/// Reads the region back: (4 KiB blocks that differ, blocks that read as errors).
fn verify(array: &Array, want: &[u8]) -> (u64, u64, Option<String>) {
    let (mut wrong, mut errors, mut first_error) = (0, 0, None);
    let mut buf = raidcore::buf::AlignedBuf::zeroed(IO);
    for (i, c) in want.chunks(IO).enumerate() {
        let off = (i * IO) as u64;
        match array.read(&mut buf[..c.len()], off) {
            Ok(()) => {
                wrong += buf[..c.len()]
                    .chunks(4096)
                    .zip(c.chunks(4096))
                    .filter(|(a, b)| a != b)
                    .count() as u64
            }
            Err(_) => {
                // Block by block, to count exactly what is lost.
                for (j, b) in c.chunks(4096).enumerate() {
                    let o = off + (j * 4096) as u64;
                    match array.read(&mut buf[..b.len()], o) {
                        Ok(()) if &buf[..b.len()] == b => {}
                        Ok(()) => wrong += 1,
                        Err(e) => {
                            errors += 1;
                            first_error.get_or_insert_with(|| format!("array offset {o}: {e}"));
                        }
                    }
                }
            }
        }
    }
    (wrong, errors, first_error)
}

fn rebuild_now(array: &Array, progress: &mut dyn FnMut(u64, u64)) -> Result<(f64, u64)> {
    let opts = RebuildOptions {
        checkpoint_every: std::time::Duration::from_secs(2),
        ..RebuildOptions::default()
    };
    let t = Instant::now();
    let reports = rebuild::run(array, &opts, &mut |_, d, t| progress(d, t))?;
    Ok((
        t.elapsed().as_secs_f64(),
        reports.iter().map(|r| r.unrecoverable_blocks).sum(),
    ))
}

/// Scrubs the rows of the region (with `repair`, fixing what can be decided).
fn scrub_region(array: &Array, size: usize, repair: bool) -> Result<scrub::ScrubReport> {
    interrupted()?;
    scrub::run(
        array,
        std::slice::from_ref(&(0..region_rows(array, size as u64))),
        Mode::Scrub { repair },
        None,
        &mut |_, _| {},
    )
}

fn slot_path(array: &Array, slot: usize) -> Result<PathBuf> {
    array
        .members()
        .into_iter()
        .find(|m| m.slot == Some(slot) && m.path.is_some())
        .and_then(|m| m.path)
        .ok_or_else(|| Error::new(ErrorKind::Io, format!("slot {slot} has no device")))
}

/// Takes a failed member back and rebuilds it.
fn re_add(array: &Array, slot: usize, r: &mut Report) -> Result<(f64, u64)> {
    let path = slot_path(array, slot)?;
    let m = array.take_failed(&path).ok_or_else(|| {
        Error::new(
            ErrorKind::Io,
            format!("slot {slot} ({}) is not failed", path.display()),
        )
    })?;
    array.add(m, &path, None)?;
    r.at(format!("slot {slot} added back (stale: rebuilt in full)"));
    let out = rebuild_now(array, &mut |_, _| {})?;
    r.at(format!("slot {slot} rebuilt in {:.2} s", out.0));
    Ok(out)
}

fn redundancy(array: &Array) -> usize {
    match array.layout().redundancy() {
        Redundancy::Parity { parity } => parity,
        Redundancy::Mirror { copies } => copies - 1,
    }
}

fn member_state(array: &Array, slot: usize) -> (String, Option<String>) {
    array
        .members()
        .into_iter()
        .find(|m| m.slot == Some(slot))
        .map(|m| (m.state.name().to_string(), m.reason))
        .unwrap_or(("missing".into(), None))
}

/// The rows that hold the first `len` bytes of the array.
fn region_rows(array: &Array, len: u64) -> u64 {
    let layout = array.layout();
    let chunks = len.div_ceil(layout.chunk());
    let (mut lo, mut hi) = (0u64, array.rows());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if layout.logical_chunks(mid) >= chunks {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo.max(1)
}

/// Member bytes of the rows that hold the first `len` bytes of the array: the same on every
/// member.
fn member_span(array: &Array, len: u64) -> (u64, u64) {
    let start = array.data_offset_of();
    (
        start,
        start + region_rows(array, len) * array.layout().chunk(),
    )
}

/// Where a drill keeps the region it overwrites until it has put it back: a crash or a signal
/// mid-drill leaves it there for `raidctl drill ARRAY --restore`.
fn saved_paths(uuid: &str) -> (PathBuf, PathBuf) {
    let d = crate::events::state_dir().join("drills");
    (
        d.join(format!("{uuid}.region")),
        d.join(format!("{uuid}.json")),
    )
}

fn save_region(uuid: &str, data: &[u8], scenario: &str) -> Result<()> {
    use std::io::Write;
    let (region, marker) = saved_paths(uuid);
    let dir = region.parent().expect("a state directory");
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(e, "create directory", &dir.display().to_string(), 0))?;
    let io = |e, what: &str, p: &std::path::Path| Error::io(e, what, &p.display().to_string(), 0);
    let mut f = std::fs::File::create(&region).map_err(|e| io(e, "create", &region))?;
    f.write_all(data).map_err(|e| io(e, "write", &region))?;
    f.sync_all().map_err(|e| io(e, "fsync", &region))?;
    // The marker last: with it, the region file is complete.
    let doc = json!({"bytes": data.len(), "scenario": scenario, "started": crate::output::time(raidcore::array::now_secs())});
    std::fs::write(&marker, doc.to_string()).map_err(|e| io(e, "write", &marker))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(e, "fsync", dir))
}

fn forget_region(uuid: &str) {
    let (region, marker) = saved_paths(uuid);
    let _ = std::fs::remove_file(marker);
    let _ = std::fs::remove_file(region);
}

/// `--restore`: puts back the region an interrupted drill left saved.
fn restore(a: &DrillArgs) -> Result<ExitCode> {
    let array = super::assemble(&a.array, true)?;
    let uuid = crate::output::uuid(&array.superblock().array_uuid);
    let (region, marker) = saved_paths(&uuid);
    if !marker.exists() {
        array.close()?;
        return Err(invalid(format!(
            "no interrupted drill of this array to restore ({} does not exist)",
            marker.display()
        )));
    }
    let data = std::fs::read(&region)
        .map_err(|e| Error::io(e, "read", &region.display().to_string(), 0))?;
    write_all(&array, &data)?;
    array.close()?;
    forget_region(&uuid);
    eprintln!(
        "raidctl: the {} the interrupted drill had saved are back at the start of the array",
        crate::units::human(data.len() as u64)
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run(a: DrillArgs) -> Result<ExitCode> {
    if a.restore {
        return restore(&a);
    }
    let scenario = a.scenario.expect("required without --restore");
    if crate::control::daemon_for(&a.array.array)?.is_some() {
        return Err(invalid(
            "the array is served by `raidctl serve`: drills run offline (stop the server, or drill by hand with `raidctl inject`)".into(),
        ));
    }
    if scenario == Scenario::SmartReplacement && a.spare.is_none() {
        return Err(invalid(
            "smart-replacement needs --spare DEVICE to replace the most worn member with".into(),
        ));
    }
    let drill = crate::inject::Drill::new(a.member_timeout);
    let array = super::assemble_from(&a.array, true, false, &drill.source())?;
    let uuid = crate::output::uuid(&array.superblock().array_uuid);
    if saved_paths(&uuid).1.exists() {
        array.close()?;
        return Err(Error::new(
            ErrorKind::InUse,
            "an earlier drill of this array was interrupted and its region is still saved: `raidctl drill ARRAY --restore` puts it back",
        ));
    }
    if scenario == Scenario::BitRot && array.checksum_algo().is_none() {
        array.close()?;
        return Err(invalid(
            "bit-rot needs per-block checksums (this array was created with --no-checksums): without them a rotten block cannot be told from its good copy".into(),
        ));
    }
    if array.state().name() != "clean" {
        return Err(invalid(format!(
            "the array is {}: drills start from a clean array (rebuild or repair it first)",
            array.state().name()
        )));
    }
    let size = (a.size.min(array.size()) / IO as u64 * IO as u64).max(IO as u64);
    if size > array.size() {
        return Err(invalid("the array is smaller than 1 MiB".into()));
    }
    let need = match scenario {
        Scenario::SecondFailureDuringRebuild => 2,
        Scenario::BitRot | Scenario::SlowMember => 0,
        _ => 1,
    };
    if redundancy(&array) < need {
        return Err(invalid(format!(
            "{} needs an array that survives {need} lost members; this {} survives {}",
            name(scenario),
            array.layout().level().name(),
            redundancy(&array)
        )));
    }
    // The region's contents, put back at the end.
    let mut saved = vec![0u8; size as usize];
    for (i, c) in saved.chunks_mut(IO).enumerate() {
        array
            .read(c, (i * IO) as u64)
            .map_err(|e| e.context("drill: saving the region"))?;
    }
    save_region(&uuid, &saved, &name(scenario))?;
    crate::daemon::install_signals();
    let before = crate::cmd::status::report(&array);
    let events_from = events_len(&before);
    array.raise(
        "drill",
        None,
        format!(
            "drill {} started: it overwrites the first {} of the array and puts them back",
            name(scenario),
            crate::units::human(size)
        ),
    );
    let mut r = Report::new();
    r.fact("scenario", json!(name(scenario)));
    r.fact("level", json!(array.layout().level().name()));
    r.fact("region_bytes", json!(size));
    let outcome = run_scenario(&a, scenario, &array, &drill, size as usize, &mut r);
    for s in drill.table.all() {
        s.clear();
    }
    if let Err(e) = &outcome {
        r.check("scenario ran to its end", false, e.to_string());
    }
    // Whatever happened, the array is brought back: members the scenario failed are rebuilt
    // (smart-replacement leaves the spare in), then the region is put back. A member that
    // failed for a reason the drill did not cause is left as it is, and said.
    let faulty: Vec<(usize, Option<String>)> = array
        .members()
        .into_iter()
        .filter(|m| m.state.name() == "faulty")
        .filter_map(|m| Some((m.slot?, m.reason)))
        .collect();
    for (s, why) in faulty {
        if r.failed.contains(&s) {
            if let Err(e) = re_add(&array, s, &mut r) {
                r.check("array restored", false, format!("slot {s}: {e}"));
            }
        } else {
            r.check(
                "no member failed for a reason the drill did not cause",
                false,
                format!("slot {s}: {} (left failed)", why.unwrap_or_default()),
            );
        }
    }
    if !array.pending_targets().is_empty() {
        let _ = rebuild_now(&array, &mut |_, _| {});
    }
    match write_all(&array, &saved) {
        Ok(()) => {
            forget_region(&uuid);
            r.at("region put back")
        }
        Err(e) => r.check(
            "region put back",
            false,
            format!("{e}; it stays saved for `raidctl drill ARRAY --restore`"),
        ),
    }
    // Error counters the drill raised on members that had none are reset: injected faults
    // are not the drive's history. Members that had errors before keep them all.
    let mut reset = Vec::new();
    for (m, b) in array
        .members()
        .iter()
        .zip(before["members"].as_array().into_iter().flatten())
    {
        let had = ["read_errors", "write_errors", "checksum_errors"]
            .iter()
            .any(|k| b[*k].as_u64().unwrap_or(0) > 0);
        let now = m.read_errors + m.write_errors + m.checksum_errors;
        if let (false, true, Some(slot)) = (had, now > 0, m.slot) {
            if array
                .clear_errors(Some(&MemberRef::parse(&slot.to_string())))
                .is_ok()
            {
                reset.push(slot);
            }
        }
    }
    if !reset.is_empty() {
        r.at(format!(
            "error counters the drill raised were reset on slots {reset:?} (they were zero before)"
        ));
    }
    array.raise(
        "drill",
        None,
        format!(
            "drill {} finished: {}",
            name(scenario),
            if r.passed() {
                "the array behaved as documented"
            } else {
                "the array did NOT behave as documented"
            }
        ),
    );
    let after = crate::cmd::status::report(&array);
    r.check(
        "array clean at the end",
        after["state"] == "clean",
        format!("state {}", after["state"]),
    );
    let events = new_events(&after, events_from);
    let doc = json!({
        "scenario": r.facts["scenario"],
        "passed": r.passed(),
        "facts": r.facts,
        "timeline": r.timeline.iter().map(|(t, w)| json!({"seconds": (t * 1000.0).round() / 1000.0, "what": w})).collect::<Vec<_>>(),
        "checks": r.checks.iter().map(|(n, ok, d)| json!({"check": n, "passed": ok, "detail": d})).collect::<Vec<_>>(),
        "events": events,
        "status_after": after,
        "bytes_written_by_member": after["members"].as_array().into_iter().flatten().map(|m| json!({
            "slot": m["slot"], "path": m["path"],
            "bytes": m["bytes_written"].as_u64().unwrap_or(0)
                .saturating_sub(before["members"].as_array().into_iter().flatten()
                    .find(|b| b["uuid"] == m["uuid"]).and_then(|b| b["bytes_written"].as_u64()).unwrap_or(0)),
        })).collect::<Vec<_>>(),
    });
    let closed = array.close();
    if a.json {
        crate::output::print_json(&doc);
    } else {
        print_human(&doc);
    }
    closed?;
    Ok(if r.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::FAILURE)
    })
}

fn events_file(status: &Value) -> PathBuf {
    crate::events::events_dir().join(format!("{}.jsonl", status["uuid"].as_str().unwrap_or("")))
}

fn events_len(status: &Value) -> u64 {
    std::fs::metadata(events_file(status)).map_or(0, |m| m.len())
}

/// The events the drill raised (appended to the array's log since `from`).
fn new_events(status: &Value, from: u64) -> Vec<Value> {
    let Ok(text) = std::fs::read(events_file(status)) else {
        return Vec::new();
    };
    let tail = text.get(from as usize..).unwrap_or(&[]);
    String::from_utf8_lossy(tail)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn print_human(doc: &Value) {
    println!(
        "drill {} on a {} array, {} region",
        doc["scenario"].as_str().unwrap_or(""),
        doc["facts"]["level"].as_str().unwrap_or(""),
        crate::units::human(doc["facts"]["region_bytes"].as_u64().unwrap_or(0))
    );
    for t in doc["timeline"].as_array().into_iter().flatten() {
        println!(
            "  {:>8.3} s  {}",
            t["seconds"].as_f64().unwrap_or(0.0),
            t["what"].as_str().unwrap_or("")
        );
    }
    for e in doc["events"].as_array().into_iter().flatten() {
        println!(
            "  event     {} {}",
            e["event"].as_str().unwrap_or(""),
            e["detail"].as_str().unwrap_or("")
        );
    }
    for c in doc["checks"].as_array().into_iter().flatten() {
        println!(
            "  {} {}: {}",
            if c["passed"] == true { "ok  " } else { "FAIL" },
            c["check"].as_str().unwrap_or(""),
            c["detail"].as_str().unwrap_or("")
        );
    }
    println!(
        "{}",
        if doc["passed"] == true {
            "the array behaved as documented"
        } else {
            "the array did NOT behave as documented (see FAIL above)"
        }
    );
}

fn run_scenario(
    a: &DrillArgs,
    scenario: Scenario,
    array: &Array,
    drill: &crate::inject::Drill,
    size: usize,
    r: &mut Report,
) -> Result<()> {
    let n = array.layout().members();
    let last = n - 1;
    let state = |slot: usize| -> Result<std::sync::Arc<raidcore::device::inject::FaultState>> {
        Ok(drill.table.state(&slot_path(array, slot)?))
    };
    let want = data(0xd1e1, size);
    write_work(array, &want)?;
    r.at(format!(
        "wrote {} of known data",
        crate::units::human(size as u64)
    ));
    let intact = |r: &mut Report, what: &str, allowed_errors: bool| {
        let (wrong, errors, first) = verify(array, &want);
        r.check(
            &format!("{what}: no wrong data"),
            wrong == 0,
            format!("{wrong} blocks of 4 KiB differ"),
        );
        let detail = match first {
            Some(f) => format!("{errors} blocks read as errors (first at {f})"),
            None => "every block read".into(),
        };
        if allowed_errors {
            r.at(format!("{what}: {detail}"));
        } else {
            r.check(&format!("{what}: no read errors"), errors == 0, detail);
        }
        (wrong, errors)
    };
    match scenario {
        Scenario::BadSectorsDuringRebuild => {
            // The bad sectors go on a member the rebuild reads: the slot before the failed one
            // (a mirror's copy partner in the near layout, any survivor for parity).
            let src = last - 1;
            let (lo, hi) = member_span(array, size as u64);
            let bad = (lo + (hi - lo) / 2) / 4096 * 4096;
            array.fail(&MemberRef::parse(&last.to_string()))?;
            r.failed.push(last);
            r.at(format!("slot {last} failed"));
            let errors_before = array.members()[src].read_errors;
            state(src)?.set(Faults {
                read_errors: Some(Where::Range {
                    start: bad,
                    end: bad + 32 * 1024,
                }),
                ..Default::default()
            });
            r.at(format!(
                "slot {src} has 32 KiB of unreadable sectors at member offset {bad}"
            ));
            interrupted()?;
            let (secs, lost) = re_add(array, last, r)?;
            let during = array.members()[src].read_errors - errors_before;
            r.fact("rebuild_seconds", json!(secs));
            r.fact("unrecoverable_blocks", json!(lost));
            let single = redundancy(array) == 1;
            let (_, errors) = intact(r, "after the rebuild", single);
            if single {
                r.check(
                    "what could not be rebuilt reads as errors, never wrong data, and stays within the bad sectors' rows",
                    errors <= 2 * 8,
                    format!("{errors} blocks lost (at most the 8 unreadable blocks and their partners on the rebuilt member)"),
                );
            }
            r.fact("blocks_lost", json!(errors));
            r.check(
                &format!("the rebuild met the bad sectors, counted on slot {src}"),
                during > 0,
                format!("{during} read errors during the rebuild"),
            );
        }
        Scenario::SecondFailureDuringRebuild => {
            let second = last.saturating_sub(1);
            array.fail(&MemberRef::parse(&last.to_string()))?;
            r.failed.extend([last, second]);
            r.at(format!("slot {last} failed"));
            let victim = state(second)?;
            let path = slot_path(array, last)?;
            let m = array
                .take_failed(&path)
                .ok_or_else(|| Error::new(ErrorKind::Io, "slot not failed"))?;
            array.add(m, &path, None)?;
            r.at(format!("slot {last} added back: rebuild starts"));
            let mut hit = false;
            let t0 = Instant::now();
            let mut when = 0.0;
            let (secs, _) = rebuild_now(array, &mut |d, t| {
                if !hit && t > 0 && d * 2 >= t {
                    hit = true;
                    when = t0.elapsed().as_secs_f64();
                    victim.set(Faults {
                        vanished: true,
                        ..Default::default()
                    });
                }
            })?;
            r.at(format!(
                "slot {second} vanished {when:.2} s into the rebuild, at half of it"
            ));
            r.at(format!("rebuild of slot {last} finished in {secs:.2} s"));
            r.fact("rebuild_seconds", json!(secs));
            let (st, why) = member_state(array, second);
            let _ = write_work(array, &want);
            let (st2, why2) = member_state(array, second);
            r.check(
                "the second member was failed once it was used",
                st == "faulty" || st2 == "faulty",
                format!("slot {second}: {}", why.or(why2).unwrap_or(st2)),
            );
            let (st, _) = member_state(array, last);
            r.check(
                "the rebuild finished despite the second failure",
                st == "active",
                format!("slot {last} is {st}"),
            );
            intact(r, "with two members lost and one rebuilt", false);
            victim.clear();
        }
        Scenario::BitRot => {
            let (lo, hi) = member_span(array, size as u64);
            state(last)?.set(Faults {
                corrupt_on_read: Some(0.01),
                corrupt_in: Some((lo, hi)),
                ..Default::default()
            });
            r.at(format!(
                "1 % of slot {last}'s blocks in member bytes {lo}-{hi} rotted"
            ));
            let t = Instant::now();
            let rep = scrub_region(array, size, true)?;
            let found = rep.problems.len();
            r.at(format!(
                "scrub --repair: {found} problems, {} repaired, in {:.2} s",
                rep.repaired(),
                t.elapsed().as_secs_f64()
            ));
            r.fact("problems_found", json!(found));
            r.fact("repaired", json!(rep.repaired()));
            r.check("scrub found rot", found > 0, format!("{found} problems"));
            r.check(
                "every problem was on the rotten member and repaired",
                rep.unrepaired() == 0 && rep.problems.iter().all(|p| p.slot == last),
                format!("{} unrepaired", rep.unrepaired()),
            );
            let again = scrub_region(array, size, false)?;
            r.check(
                "a second scrub is clean",
                again.problems.is_empty(),
                format!("{} problems", again.problems.len()),
            );
            intact(r, "after the repair", false);
        }
        Scenario::SlowMember => {
            let t = Instant::now();
            write_work(array, &want)?;
            let _ = verify(array, &want);
            let base = t.elapsed().as_secs_f64();
            state(0)?.set(Faults {
                latency_us: Some(5000),
                latency_jitter_us: 5000,
                ..Default::default()
            });
            r.at("slot 0 answers 5 ms (+ up to 5 ms) late");
            let t = Instant::now();
            write_work(array, &want)?;
            intact(r, "with a slow member", false);
            let slow = t.elapsed().as_secs_f64();
            r.at(format!(
                "write and read back: {base:.2} s before, {slow:.2} s with the slow member"
            ));
            r.fact("seconds_before", json!(base));
            r.fact("seconds_slow", json!(slow));
            r.check(
                "nothing failed",
                array.members().iter().all(|m| m.state.name() == "active"),
                "every member active".to_string(),
            );
        }
        Scenario::VanishAndReturn => {
            state(last)?.set(Faults {
                vanished: true,
                ..Default::default()
            });
            r.failed.push(last);
            r.at(format!("slot {last} vanished"));
            let second = data(0xd1e2, size);
            write_work(array, &second)?;
            let (st, why) = member_state(array, last);
            r.check(
                "the vanished member was failed at its first write",
                st == "faulty",
                format!("slot {last}: {}", why.unwrap_or(st.clone())),
            );
            state(last)?.clear();
            r.at(format!("slot {last} returned"));
            let (secs, _) = re_add(array, last, r)?;
            r.fact("rebuild_seconds", json!(secs));
            let (wrong, errors, _) = verify(array, &second);
            r.check(
                "after the rebuild: the writes it missed are there",
                wrong == 0 && errors == 0,
                format!("{wrong} wrong and {errors} unreadable blocks"),
            );
            let rep = scrub_region(array, size, false)?;
            r.check(
                "the returned member holds what it missed (scrub is clean)",
                rep.problems.is_empty(),
                format!("{} problems", rep.problems.len()),
            );
        }
        Scenario::SmartReplacement => {
            let spare = a.spare.as_ref().expect("checked");
            let wear = crate::cmd::wear::report_json(
                array,
                &crate::cmd::wear::WearOpts::smart_auto(),
                None,
            )?;
            let members = wear["members"].as_array().cloned().unwrap_or_default();
            let by_smart = members
                .iter()
                .filter(|m| m["wear_percent"].as_f64().is_some())
                .max_by(|x, y| {
                    let w = |m: &Value| m["wear_percent"].as_f64().unwrap_or(0.0);
                    w(x).total_cmp(&w(y))
                });
            let (worn, basis) = match by_smart {
                Some(m) => (
                    m,
                    format!(
                        "{:.1} % of its endurance used ({})",
                        m["wear_percent"].as_f64().unwrap_or(0.0),
                        m["wear_source"].as_str().unwrap_or("?")
                    ),
                ),
                None => {
                    let m = members
                        .iter()
                        .max_by_key(|m| m["bytes_written"]["total"].as_u64().unwrap_or(0))
                        .ok_or_else(|| Error::new(ErrorKind::Io, "no members"))?;
                    (
                        m,
                        format!(
                            "no SMART wear figure on any member: the most bytes written ({})",
                            crate::units::human(m["bytes_written"]["total"].as_u64().unwrap_or(0))
                        ),
                    )
                }
            };
            let slot = worn["slot"].as_u64().unwrap_or(0) as usize;
            r.at(format!("slot {slot} is the most worn: {basis}"));
            r.fact("replaced_slot", json!(slot));
            r.fact("replaced_because", json!(basis));
            let member = super::add::open_new(array, spare, a.force)?;
            let member = drill.table.wrap(spare, member);
            array.replace(
                &MemberRef::parse(&slot.to_string()),
                member,
                spare,
                None,
                false,
            )?;
            r.at(format!("replacing slot {slot} with {}", spare.display()));
            let (secs, _) = rebuild_now(array, &mut |_, _| {})?;
            r.at(format!("replace finished in {secs:.2} s"));
            r.fact("replace_seconds", json!(secs));
            let now = slot_path(array, slot)?;
            r.check(
                "the spare now serves the slot",
                std::fs::canonicalize(&now).ok() == std::fs::canonicalize(spare).ok(),
                format!("slot {slot}: {}", now.display()),
            );
            intact(r, "after the replacement", false);
        }
    }
    Ok(())
}
