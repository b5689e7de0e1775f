//! `raidctl fail`: mark a member faulty (refused when the array would not survive it).

use std::process::ExitCode;

use clap::Args;
use raidcore::array::MemberRef;
use raidcore::Result;

use crate::cli::ArrayArgs;
use crate::protocol::Failed;

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
        a.rebuild.served()?;
        let r: Failed = crate::control::call_as(
            c,
            &crate::protocol::Request::Fail {
                member: crate::control::member_arg(&a.member),
                max_rate: a.rebuild.max_rate,
                min_rate: a.rebuild.min_rate,
            },
        )?;
        crate::control::report(&r, a.rebuild.json, &r.say(&a.member, true));
        return Ok(ExitCode::SUCCESS);
    }
    let array = super::assemble(&a.array, true)?;
    let r = Failed::of(&array, array.fail(&MemberRef::parse(&a.member))?);
    crate::control::report(&r, a.rebuild.json, &r.say(&a.member, false));
    super::rebuild::after_change(array, &a.rebuild)
}
