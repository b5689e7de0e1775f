//! Subcommands, one file each, and the dispatcher.

pub mod add;
pub mod admin;
pub mod assemble;
pub mod bench;
pub mod bench_array;
pub mod create;
pub mod drill;
pub mod examine;
pub mod fail;
pub mod generate;
pub mod inject;
pub mod inspect;
pub mod list;
pub mod loops;
pub mod monitor;
pub mod profile;
pub mod read;
pub mod rebuild;
pub mod remove;
pub mod replace;
pub mod scrub;
pub mod serve;
pub mod simulate;
pub mod status;
pub mod wear;
pub mod wear_plot;
pub mod write;

use std::process::ExitCode;

use raidcore::{Array, AssembleOptions, Result};

use crate::cli::{ArrayArgs, Cli, Command};

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Create(a) => create::run(a),
        Command::Status(a) => status::run(a),
        Command::List(a) => list::run(a),
        Command::Assemble(a) => assemble::run(a),
        Command::Clear(a) => admin::clear(a),
        Command::Set(a) => admin::set(a),
        Command::Wipe(a) => admin::wipe(a),
        Command::Monitor(a) => monitor::run(a),
        Command::Examine(a) => examine::run(a),
        Command::Read(a) => read::run(a),
        Command::Write(a) => write::run(a),
        Command::Fail(a) => fail::run(a),
        Command::Remove(a) => remove::run(a),
        Command::Add(a) => add::run(a),
        Command::Replace(a) => replace::run(a),
        Command::Rebuild(a) => rebuild::run(a),
        Command::Loop(a) => loops::run(a),
        Command::Wear(a) => wear::run(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Inject(a) => inject::run(a),
        Command::Drill(a) => drill::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Scrub(a) => scrub::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Profile(a) => profile::run(a),
        Command::Completions(a) => generate::completions(a),
        Command::Generate(a) => generate::run(a),
    }
}

/// Assembles the array named by `args`, printing a warning for every unavailable member.
pub fn assemble(args: &ArrayArgs, writable: bool) -> Result<Array> {
    assemble_with(args, writable, false)
}

/// As [`assemble`]; `report` assembles read-only for a report: a failed array too, and
/// without locks, so it answers while another process holds the members.
pub fn assemble_with(args: &ArrayArgs, writable: bool, report: bool) -> Result<Array> {
    assemble_from(args, writable, report, &raidcore::array::Files)
}

/// As [`assemble_with`], finding and opening members through `src` (a failure drill's
/// [`crate::inject::Drill::source`]).
pub fn assemble_from(
    args: &ArrayArgs,
    writable: bool,
    report: bool,
    src: &dyn raidcore::array::MemberSource,
) -> Result<Array> {
    // Absolute, as the array's own path becomes (Array::open_from): members found there are
    // reported, and a daemon's paths mean the same to a client in another directory.
    let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let opts = AssembleOptions {
        writable,
        scan: args.scan.iter().map(|d| absolute(d)).collect(),
        allow_failed: report,
        force: args.force_assemble,
        unlocked: report && !writable,
    };
    let mut tries = 0;
    let array = loop {
        match Array::open_from(src, &args.array, &opts) {
            // Unlocked, a report can meet another process updating the superblocks between
            // its two reads of a member: look again.
            Err(e)
                if opts.unlocked
                    && tries < 20
                    && e.to_string()
                        .contains("changed while the array was being assembled") =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            r => break r.map_err(|e| e.context(format!("array {}", args.array.display())))?,
        }
    };
    use raidcore::array::MemberState;
    for m in array.members() {
        if matches!(m.state, MemberState::Faulty | MemberState::Missing) {
            eprintln!(
                "raidctl: warning: slot {} {}: {}",
                m.slot.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
                m.state.name(),
                m.reason.as_deref().unwrap_or("unavailable")
            );
        }
    }
    for note in array.notes() {
        eprintln!("raidctl: warning: {note}");
    }
    if writable {
        after_writable_open(&array)?;
    } else if !array.superblock().clean && !report {
        eprintln!("raidctl: warning: the array was not stopped cleanly; the next writable command resyncs it");
        // The pending entries of writes a killed process completed are not restored here:
        // before the resync a parity beside such a block may be stale, and a read rebuilding
        // a damaged or missing block from it would return neither version (an outside attack
        // on doing so). Those blocks read as their old data until a writable open.
    }
    // Hot spares go to work at the first writable open after a member failed.
    for slot in array.promote_spares()? {
        eprintln!("raidctl: a hot spare now rebuilds slot {slot}");
        if let Some(note) = array.heavy_role_note(slot) {
            eprintln!("raidctl: {note}");
        }
    }
    Ok(array)
}

/// What every writable open does before its command: restores the checksum entries of writes a
/// crashed process cut off (pending.rs) and, after an unclean stop, resyncs.
pub fn after_writable_open(array: &Array) -> Result<()> {
    // Before the resync: it judges the blocks a crash cut off by the entries restored here.
    match array.keep_pending_entries(&crate::daemon::run_dir()) {
        Ok(r) if r.restored > 0 => eprintln!(
            "raidctl: restored the checksum entries of {} blocks that writes cut off by a crash had completed",
            r.restored
        ),
        Ok(_) => {}
        Err(e) => eprintln!("raidctl: warning: {e}; a crash of this process can leave rows the resync cannot decide"),
    }
    if !array.superblock().clean {
        resync(array)?;
    }
    Ok(())
}

/// After an unclean stop: makes parity (and mirror copies) consistent again in the regions the
/// write-intent bitmap marks (everywhere without a bitmap), with progress on a terminal.
pub fn resync(array: &Array) -> Result<raidcore::jobs::scrub::ScrubReport> {
    use raidcore::jobs::scrub::{self, Mode};
    let ranges = array.dirty_rows();
    let mut bar = crate::progress::Progress::new("resync", false);
    // Rows, shown as the member bytes they cover.
    let per_row = array.layout().chunk() * array.layout().members() as u64;
    let rep = scrub::run(array, &ranges, Mode::Resync, None, &mut |d, t| {
        bar.update(d * per_row, t * per_row, None)
    })?;
    bar.finish();
    eprintln!(
        "raidctl: the array was not stopped cleanly: resynced {} of {} rows (the regions the write-intent bitmap marked), {} inconsistencies repaired",
        rep.rows_checked,
        array.rows(),
        rep.problems.iter().filter(|p| p.repaired).count()
    );
    let restored: u64 = rep
        .problems
        .iter()
        .filter(|p| p.repaired && matches!(p.kind, "data checksum" | "data"))
        .map(|p| p.bytes / 4096)
        .sum();
    if restored > 0 {
        eprintln!(
            "raidctl: resync: {restored} data blocks failing their checksums (or named by the RAID 6 syndromes) were restored from redundancy"
        );
    }
    for p in rep.problems.iter().filter(|p| !p.repaired) {
        eprintln!(
            "raidctl: warning: resync: {} bytes at member offset {} of {} ({}): {}",
            p.bytes,
            p.member_offset,
            p.member.as_deref().unwrap_or("a missing member"),
            p.kind,
            p.note
        );
    }
    if rep.listed > 0 {
        eprintln!(
            "raidctl: warning: resync: {} data blocks could not be verified (rot cannot be told from a write the crash cut): they are on the bad-block list and read as errors until written again (raidctl status lists them)",
            rep.listed
        );
    }
    if rep.rows_skipped > 0 {
        eprintln!("raidctl: warning: {} rows could not be resynced because members are missing (degraded write hole)", rep.rows_skipped);
    }
    Ok(rep)
}
