//! `raidctl replace`: copy a live member onto a new device, then retire it; redundancy is
//! never reduced meanwhile.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::array::MemberRef;
use raidcore::Result;

use crate::cli::ArrayArgs;
use crate::protocol::Replacing;

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
    /// Skewed arrays: replacing the parity-heavy member does not move the role to the
    /// most-worn member (by default it does: the new device takes over that member's slot,
    /// which then takes over the heavy slot, with redundancy kept throughout)
    #[arg(long)]
    pub keep_roles: bool,
    #[command(flatten)]
    pub rebuild: super::rebuild::RebuildFlags,
}

pub fn run(a: ReplaceArgs) -> Result<ExitCode> {
    let endurance = super::add::endurance_bytes(a.join.endurance)?;
    if let Some(c) = crate::control::daemon_for(&a.array.array)? {
        a.rebuild.served()?;
        let new = crate::control::absolute(&a.new);
        let r: Replacing = crate::control::call_as(
            c,
            &crate::protocol::Request::Replace {
                old: crate::control::member_arg(&a.old),
                new,
                force: a.join.force,
                endurance_bytes: endurance,
                keep_roles: Some(a.keep_roles),
                max_rate: a.rebuild.max_rate,
                min_rate: a.rebuild.min_rate,
            },
        )?;
        crate::control::report(&r, a.rebuild.json, &said(&a, &r, true));
        return Ok(ExitCode::SUCCESS);
    }
    let array = super::assemble(&a.array, true)?;
    let member = super::add::open_new(&array, &a.new, a.join.force)?;
    let change = array.replace(
        &MemberRef::parse(&a.old),
        member,
        &a.new,
        endurance,
        a.keep_roles,
    )?;
    let r = Replacing {
        role_change: change.map(|c| c.description),
    };
    crate::control::report(&r, a.rebuild.json, &said(&a, &r, false));
    super::rebuild::after_change(array, &a.rebuild)
}

/// The lines a replace prints, served or not.
fn said(a: &ReplaceArgs, r: &Replacing, served: bool) -> Vec<String> {
    let mut lines = vec![format!(
        "replacing {} with {}{}",
        a.old,
        a.new.display(),
        if served {
            " in the served array, in the background"
        } else {
            ""
        }
    )];
    lines.extend(r.role_change.clone());
    lines.push(WIPE_NOTE.to_string());
    lines
}

/// What to do with the disk a replace takes out: it keeps a superblock of the array.
const WIPE_NOTE: &str = "the old member keeps this array's superblock (marked faulty) once the replace is done: run `raidctl wipe` on it before reusing it (assembly by UUID= passes over it, but other tools will see a raidctl member)";
