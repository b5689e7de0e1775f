//! `raidctl add`: add a device as the rebuild target of a missing slot, or as a hot spare.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use raidcore::array::preflight;
use raidcore::device::{probe, FileMember, Member, OpenMode};
use raidcore::format::{self, Probe};
use raidcore::{Error, ErrorKind, Result};

use crate::cli::ArrayArgs;
use crate::protocol::Added;

/// Add a member: it rebuilds a missing slot, or waits as a hot spare
#[derive(Args, Debug)]
pub struct AddArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// The device or file to add
    #[arg(value_name = "NEWMEMBER")]
    pub new: PathBuf,
    #[command(flatten)]
    pub join: JoinFlags,
    #[command(flatten)]
    pub rebuild: super::rebuild::RebuildFlags,
}

/// Flags of a device joining an array (add, replace).
#[derive(Args, Debug, Clone)]
pub struct JoinFlags {
    /// Overwrite a device that holds a file system or another array (never a mounted one)
    #[arg(long, short = 'f')]
    pub force: bool,
    /// Rated endurance of the new member in terabytes written
    #[arg(long, value_name = "TBW")]
    pub endurance: Option<f64>,
}

/// Opens a device joining `array`: a member of this same array (stale or failed) is taken back
/// without --force; anything else goes through the same checks as create.
pub fn open_new(array: &raidcore::Array, path: &PathBuf, force: bool) -> Result<Arc<dyn Member>> {
    if let Some(m) = array.take_failed(path) {
        return Ok(m);
    }
    // One of this array's own members in service: say so before the lock this process holds
    // on it is taken for another process's (outside attack: "locked by another raidctl
    // process (pid <its own>)").
    let same =
        |p: &std::path::Path| std::fs::canonicalize(p).ok() == std::fs::canonicalize(path).ok();
    if array
        .members()
        .iter()
        .any(|m| m.path.as_deref().is_some_and(same) && m.state.name() != "faulty")
    {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{} is already in use by this array", path.display()),
        ));
    }
    if let Some(why) = probe::in_use(path) {
        return Err(Error::new(
            ErrorKind::Busy,
            format!("{why}; refusing to use it (not even with --force)"),
        ));
    }
    let ours = {
        let m = FileMember::open(path, OpenMode::Peek)?;
        matches!(format::probe(&m)?, Probe::Valid(l) if l.sb.array_uuid == array.superblock().array_uuid)
    };
    if !ours {
        preflight(std::slice::from_ref(path), force)?;
    }
    Ok(Arc::new(FileMember::open(path, OpenMode::Write)?))
}

pub fn endurance_bytes(tbw: Option<f64>) -> Result<Option<u64>> {
    match tbw {
        None => Ok(None),
        Some(t) if t > 0.0 && t < 1e6 => Ok(Some((t * 1e12) as u64)),
        Some(t) => Err(Error::new(
            ErrorKind::InvalidInput,
            format!("--endurance {t} is not a positive number of terabytes"),
        )),
    }
}

pub fn run(a: AddArgs) -> Result<ExitCode> {
    let endurance = endurance_bytes(a.join.endurance)?;
    if let Some(c) = crate::control::daemon_for(&a.array.array)? {
        a.rebuild.served()?;
        let new = crate::control::absolute(&a.new);
        let r: Added = crate::control::call_as(
            c,
            &crate::protocol::Request::Add {
                new,
                force: a.join.force,
                endurance_bytes: endurance,
                max_rate: a.rebuild.max_rate,
                min_rate: a.rebuild.min_rate,
            },
        )?;
        let name = a.new.display().to_string();
        crate::control::report(&r, a.rebuild.json, &r.say(&name, true));
        return Ok(ExitCode::SUCCESS);
    }
    let array = super::assemble(&a.array, true)?;
    let member = open_new(&array, &a.new, a.join.force)?;
    let slot = array.add(member, &a.new, endurance)?;
    let r = Added::of(&array, slot);
    let name = a.new.display().to_string();
    crate::control::report(&r, a.rebuild.json, &r.say(&name, false));
    super::rebuild::after_change(array, &a.rebuild)
}
