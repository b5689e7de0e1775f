//! `raidctl fail`: mark a member faulty (refused when the array would not survive it).

use std::process::ExitCode;

use clap::Args;
use raidcore::array::MemberRef;
use raidcore::Result;

use crate::cli::ArrayArgs;

/// Mark a member faulty; a hot spare then takes its place
#[derive(Args, Debug)]
pub struct FailArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// The member to fail: its path or its slot number
    #[arg(value_name = "MEMBER")]
    pub member: String,
    #[command(flatten)]
    pub rebuild: super::rebuild::RebuildFlags,
}

pub fn run(a: FailArgs) -> Result<ExitCode> {
    if let Some(c) = crate::control::daemon_for(&a.array.array)? {
        let r = crate::control::call(
            c,
            &crate::protocol::Request::Fail {
                member: crate::control::member_arg(&a.member),
                max_rate: a.rebuild.max_rate,
                min_rate: a.rebuild.min_rate,
            },
        )?;
        match r["slot"].as_u64() {
            Some(slot) => eprintln!(
                "raidctl: slot {slot} marked faulty ({}) in the served array; it is {}",
                a.member,
                r["state"].as_str().unwrap_or("")
            ),
            None => eprintln!("raidctl: spare {} removed from the served array", a.member),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let array = super::assemble(&a.array, true)?;
    let slot = array.fail(&MemberRef::parse(&a.member))?;
    if slot != usize::MAX {
        eprintln!(
            "raidctl: slot {slot} marked faulty ({}); the array is {}",
            a.member,
            array.state().name()
        );
    } else {
        eprintln!("raidctl: spare {} removed", a.member);
    }
    super::rebuild::after_change(array, &a.rebuild)
}
