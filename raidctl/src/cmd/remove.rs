//! `raidctl remove`: drop a faulty, missing or spare member (or a rebuild/replace target).

use std::process::ExitCode;

use clap::Args;
use raidcore::array::MemberRef;
use raidcore::Result;

use crate::cli::ArrayArgs;

/// Remove a faulty or spare member from an array
#[derive(Args, Debug)]
pub struct RemoveArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// The member to remove: its path or its slot number
    #[arg(value_name = "MEMBER")]
    pub member: String,
}

pub fn run(a: RemoveArgs) -> Result<ExitCode> {
    if let Some(c) = crate::control::daemon_for(&a.array.array)? {
        crate::control::call(
            c,
            &crate::protocol::Request::Remove {
                member: crate::control::member_arg(&a.member),
            },
        )?;
        eprintln!("raidctl: removed {} from the served array", a.member);
        return Ok(ExitCode::SUCCESS);
    }
    let array = super::assemble(&a.array, true)?;
    array.remove(&MemberRef::parse(&a.member))?;
    eprintln!("raidctl: removed {}", a.member);
    array.close()?;
    Ok(ExitCode::SUCCESS)
}
