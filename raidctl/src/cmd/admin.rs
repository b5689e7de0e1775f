//! Small administration commands: `clear` (error counters, as `zpool clear`), `set` (a
//! member's rated endurance after the fact) and `wipe` (a member's superblocks and metadata
//! area, as `mdadm --zero-superblock`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::array::MemberRef;
use raidcore::device::{FileMember, Member, OpenMode};
use raidcore::format::{self, Probe, SlotState};
use raidcore::{Error, ErrorKind, Result};

use crate::cli::ArrayArgs;
use crate::protocol::{Cleared, EnduranceSet};

/// Reset members' read, write and checksum error counters (as zpool clear)
///
/// After the cause of errors was dealt with (a cable reseated, a scrub repaired them), new
/// errors stand out again. Bad blocks stay listed: their contents are still lost.
#[derive(Args, Debug)]
pub struct ClearArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Only this member (path or slot); every member by default
    #[arg(value_name = "MEMBER")]
    pub member: Option<String>,
    /// What was done as JSON on stdout
    #[arg(long)]
    pub json: bool,
}

/// Change a member's settings: its rated endurance
#[derive(Args, Debug)]
pub struct SetArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// The member: its path or its slot number
    #[arg(value_name = "MEMBER")]
    pub member: String,
    /// Rated endurance in terabytes written (TBW from the data sheet)
    #[arg(long, value_name = "TBW")]
    pub endurance: f64,
    /// What was done as JSON on stdout
    #[arg(long)]
    pub json: bool,
}

/// Erase a member's raidctl superblocks and metadata area (as mdadm --zero-superblock)
///
/// Refused while any process holds the member (a serving daemon, an offline command), and,
/// without --force, when the member is in service in its array (wiping it degrades the array).
/// The data area is left as it is.
#[derive(Args, Debug)]
pub struct WipeArgs {
    /// The member device or file
    #[arg(value_name = "MEMBER")]
    pub member: PathBuf,
    /// Wipe a member that its array still counts on, or whose superblocks are corrupt
    #[arg(long)]
    pub force: bool,
}

pub fn clear(a: ClearArgs) -> Result<ExitCode> {
    let r: Cleared = if let Some(conn) = crate::control::daemon_for(&a.array.array)? {
        // A served array: the daemon owns the superblocks and clears them itself.
        crate::control::call_as(
            conn,
            &crate::protocol::Request::Clear {
                member: a.member.as_deref().map(crate::control::member_arg),
            },
        )?
    } else {
        let array = super::assemble(&a.array, true)?;
        let m = a.member.as_deref().map(MemberRef::parse);
        let counts = array.clear_errors(m.as_ref())?;
        array.close()?;
        counts.into()
    };
    let say = format!(
        "cleared {} read, {} write and {} checksum errors ({})",
        r.read,
        r.write,
        r.checksum,
        a.member.as_deref().unwrap_or("every member")
    );
    crate::control::report(&r, a.json, &[say]);
    Ok(ExitCode::SUCCESS)
}

pub fn set(a: SetArgs) -> Result<ExitCode> {
    if !(a.endurance > 0.0 && a.endurance < 1e6) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "--endurance {} is not terabytes written (greater than 0)",
                a.endurance
            ),
        ));
    }
    let bytes = (a.endurance * 1e12) as u64;
    let r: EnduranceSet = if let Some(conn) = crate::control::daemon_for(&a.array.array)? {
        // A served array: the daemon owns the superblocks and records it itself.
        crate::control::call_as(
            conn,
            &crate::protocol::Request::SetEndurance {
                member: crate::control::member_arg(&a.member),
                endurance_bytes: bytes,
            },
        )?
    } else {
        let array = super::assemble(&a.array, true)?;
        array.set_endurance(&MemberRef::parse(&a.member), bytes)?;
        array.close()?;
        EnduranceSet {
            endurance_bytes: bytes,
        }
    };
    let say = format!(
        "{}: rated endurance set to {} TB written",
        a.member, a.endurance
    );
    crate::control::report(&r, a.json, &[say]);
    Ok(ExitCode::SUCCESS)
}

pub fn wipe(a: WipeArgs) -> Result<ExitCode> {
    let name = a.member.display().to_string();
    // The exclusive lock: refused while a daemon or another command holds the member.
    let m = FileMember::open(&a.member, OpenMode::Write)?;
    let end = match format::probe(&m)? {
        Probe::NotMember => {
            return Err(Error::new(
                ErrorKind::Mismatch,
                format!("{name} holds no raidctl superblock; nothing written"),
            ))
        }
        Probe::Corrupt(why) if !a.force => {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "{name}: both superblock copies are invalid ({why}); --force wipes them anyway"
                ),
            ))
        }
        // Only the superblock copies: the geometry of the rest is unknown.
        Probe::Corrupt(_) => format::METADATA_OFFSET,
        Probe::Valid(l) => {
            let sb = &l.sb;
            let in_service = sb.slots.get(sb.slot as usize).is_some_and(|e| {
                e.member_uuid == sb.member_uuid
                    && matches!(
                        e.state,
                        SlotState::Active
                            | SlotState::Rebuilding { .. }
                            | SlotState::Replacing { .. }
                    )
            });
            if in_service && !a.force {
                return Err(Error::new(
                    ErrorKind::InUse,
                    format!(
                        "{name} is slot {} of array \"{}\" ({}), which counts on it: wiping it degrades the array (or fails it); `raidctl remove` it first, or use --force",
                        sb.slot,
                        sb.name,
                        crate::output::uuid(&sb.array_uuid)
                    ),
                ));
            }
            sb.data_offset.min(m.len())
        }
    };
    m.write_zeroes(0, end)
        .and_then(|()| m.flush())
        .map_err(|e| e.context(format!("wiping {name}")))?;
    eprintln!("raidctl: {name}: raidctl superblocks and metadata area erased ({end} bytes); the data area is untouched");
    Ok(ExitCode::SUCCESS)
}
