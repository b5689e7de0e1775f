//! `raidctl remove`: drop a faulty, missing or spare member (or a rebuild/replace target).

use std::process::ExitCode;

use clap::Args;
use raidcore::array::MemberRef;
use raidcore::Result;

use crate::cli::ArrayArgs;
use crate::protocol::Removed;

/// Remove a faulty or spare member from an array
#[derive(Args, Debug)]
pub struct RemoveArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// The member to remove: its path or its slot number
    #[arg(value_name = "MEMBER")]
    pub member: String,
    /// What was done as JSON on stdout
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: RemoveArgs) -> Result<ExitCode> {
    let (r, served) = if let Some(c) = crate::control::daemon_for(&a.array.array)? {
        let r: Removed = crate::control::call_as(
            c,
            &crate::protocol::Request::Remove {
                member: crate::control::member_arg(&a.member),
            },
        )?;
        (r, true)
    } else {
        let array = super::assemble(&a.array, true)?;
        array.remove(&MemberRef::parse(&a.member))?;
        let r = Removed {
            state: array.state().name().to_string(),
        };
        array.close()?;
        (r, false)
    };
    if a.json {
        crate::output::print_json(&serde_json::to_value(&r).expect("an outcome encodes"));
    } else {
        eprintln!(
            "raidctl: removed {} from {}; it is {}",
            a.member,
            if served {
                "the served array"
            } else {
                "the array"
            },
            r.state
        );
    }
    Ok(ExitCode::SUCCESS)
}
