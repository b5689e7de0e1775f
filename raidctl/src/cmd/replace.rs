//! `raidctl replace`: copy a live member onto a new device, then retire it; redundancy is
//! never reduced meanwhile.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::array::MemberRef;
use raidcore::Result;

use crate::cli::ArrayArgs;

/// Replace a member with a new device while it keeps serving
#[derive(Args, Debug)]
pub struct ReplaceArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// The member to replace: its path or its slot number
    #[arg(value_name = "OLD")]
    pub old: String,
    /// The new device or file
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    #[command(flatten)]
    pub join: super::add::JoinFlags,
    #[command(flatten)]
    pub rebuild: super::rebuild::RebuildFlags,
}

pub fn run(a: ReplaceArgs) -> Result<ExitCode> {
    let endurance = super::add::endurance_bytes(a.join.endurance)?;
    if let Some(c) = crate::control::daemon_for(&a.array.array)? {
        let new = std::fs::canonicalize(&a.new).unwrap_or(a.new.clone());
        let r = crate::control::call(
            c,
            &crate::protocol::Request::Replace {
                old: crate::control::member_arg(&a.old),
                new,
                force: a.join.force,
                endurance_bytes: endurance,
                keep_roles: Some(a.rebuild.keep_roles),
                max_rate: a.rebuild.max_rate,
                min_rate: a.rebuild.min_rate,
            },
        )?;
        eprintln!(
            "raidctl: replacing {} with {} in the served array, in the background",
            a.old,
            a.new.display()
        );
        if let Some(c) = r["role_change"].as_str() {
            eprintln!("raidctl: {c}");
        }
        eprintln!("raidctl: {WIPE_NOTE}");
        return Ok(ExitCode::SUCCESS);
    }
    let array = super::assemble(&a.array, true)?;
    let member = super::add::open_new(&array, &a.new, a.join.force)?;
    let change = array.replace(
        &MemberRef::parse(&a.old),
        member,
        &a.new,
        endurance,
        a.rebuild.keep_roles,
    )?;
    eprintln!("raidctl: replacing {} with {}", a.old, a.new.display());
    if let Some(c) = change {
        eprintln!("raidctl: {}", c.description);
    }
    let code = super::rebuild::after_change(array, &a.rebuild)?;
    eprintln!("raidctl: {WIPE_NOTE}");
    Ok(code)
}

/// What to do with the disk a replace takes out: it keeps a superblock of the array.
const WIPE_NOTE: &str = "the old member keeps this array's superblock (marked faulty) once the replace is done: run `raidctl wipe` on it before reusing it (assembly by UUID= passes over it, but other tools will see a raidctl member)";
