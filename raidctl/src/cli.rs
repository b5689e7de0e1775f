//! The clap definitions of the whole command line: the single source of --help, the man pages
//! and the shell completions. Each subcommand's arguments live beside its code in cmd/.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::cmd;

#[derive(Parser, Debug)]
#[command(
    name = "raidctl",
    version,
    about = "SSD-aware software RAID: RAID 0/1/5/6/10 and skewed-parity F1 over files and block devices",
    long_about = "raidctl creates and runs software RAID arrays over block devices, loop devices or plain \
files. Besides RAID 0, 1, 5, 6 and 10 it offers F1: RAID 5 whose parity is skewed onto one member so \
that SSDs wear out one at a time instead of together. An array is named on the command line by the path \
of any of its members; raidctl finds the others from the path hints in the superblock, the member's \
directory and --scan locations.",
    after_long_help = crate::exit::EXIT_STATUS,
    propagate_version = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    Create(cmd::create::CreateArgs),
    Status(cmd::status::StatusArgs),
    List(cmd::list::ListArgs),
    Assemble(cmd::assemble::AssembleArgs),
    Monitor(cmd::monitor::MonitorArgs),
    Clear(cmd::admin::ClearArgs),
    Set(cmd::admin::SetArgs),
    Wipe(cmd::admin::WipeArgs),
    Examine(cmd::examine::ExamineArgs),
    Read(cmd::read::ReadArgs),
    Write(cmd::write::WriteArgs),
    Fail(cmd::fail::FailArgs),
    Remove(cmd::remove::RemoveArgs),
    Add(cmd::add::AddArgs),
    Replace(cmd::replace::ReplaceArgs),
    Rebuild(cmd::rebuild::RebuildArgs),
    Loop(cmd::loops::LoopArgs),
    Wear(cmd::wear::WearArgs),
    Simulate(cmd::simulate::SimulateArgs),
    Inspect(cmd::inspect::InspectArgs),
    Inject(cmd::inject::InjectArgs),
    Drill(cmd::drill::DrillArgs),
    Serve(cmd::serve::ServeArgs),
    Scrub(cmd::scrub::ScrubArgs),
    Bench(cmd::bench::BenchArgs),
    Profile(cmd::profile::ProfileArgs),
    Completions(cmd::generate::CompletionsArgs),
    #[command(hide = true)]
    Generate(cmd::generate::GenerateArgs),
}

/// How to find an array's members.
#[derive(Args, Debug, Clone)]
pub struct ArrayArgs {
    /// Path of any member of the array (file, loop or block device), or UUID=<array uuid>
    /// for the array whose members are on block devices (found by uuid, as at boot)
    #[arg(value_name = "ARRAY", value_parser = parse_array)]
    pub array: PathBuf,
    /// Also look for members here: a directory (every file and block device in it) or a path;
    /// repeatable, e.g. --scan /srv/raid or --scan /dev/loop3
    #[arg(long, value_name = "DIR")]
    pub scan: Vec<PathBuf>,
    /// Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky
    /// cable) failed more members than it tolerates: take back the most recently failed
    /// members that are present until it runs (as mdadm --assemble --force). Writes they missed
    /// after failing are lost; a writable open resyncs every row. Also keeps the named half of
    /// a split brain (members each assembled without the other): the other half's own writes
    /// are lost when it is added back
    #[arg(long)]
    pub force_assemble: bool,
}

/// ARRAY: a member path as given, or `UUID=<uuid>`: a member of that array found on any
/// block device (every one is looked at, as assembly does), one the newest superblock counts
/// as active (not a disk failed or replaced out of it and left in the box).
fn parse_array(s: &str) -> Result<PathBuf, String> {
    let Some(u) = s.strip_prefix("UUID=").or_else(|| s.strip_prefix("uuid=")) else {
        return Ok(PathBuf::from(s));
    };
    let want = uuid::Uuid::parse_str(u).map_err(|e| format!("{u} is not a uuid: {e}"))?;
    let found = raidcore::array::discover(&raidcore::array::Files, &[]);
    raidcore::array::member_to_assemble(&found, want.as_bytes())
        .ok_or_else(|| format!("no member of array {want} on any block device"))
}
