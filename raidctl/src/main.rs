//! raidctl: the command line. Parses arguments, runs one subcommand, maps errors to the
//! documented exit codes.

#![deny(clippy::undocumented_unsafe_blocks)]

mod cli;
mod cmd;
mod control;
mod daemon;
mod events;
mod exit;
mod harden;
mod inject;
mod loopdev;
mod nbd_device;
mod notify;
mod output;
mod plot;
mod profile;
mod progress;
mod prom;
mod ublk;
mod units;

use std::process::ExitCode;

use clap::Parser;
// The decoders of what comes from outside (the library, which the fuzz targets link too).
use raidctl::{nbd, protocol};

fn main() -> ExitCode {
    // SAFETY: restoring the default SIGPIPE action before any thread exists; a closed stdout
    // (`raidctl status | head`) then ends the program quietly as it does for other tools.
    // `serve` ignores SIGPIPE again for its sockets.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // `wear --check` speaks to a monitoring system: a bad flag is "unknown" (3), not
            // the usage error's 2, which it would read as "critical".
            // args_os: an argument that is not UTF-8 is the usage error clap just printed,
            // not a panic.
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
            let check = args.iter().any(|a| a == "wear") && args.iter().any(|a| a == "--check");
            return match (e.use_stderr(), check) {
                (true, true) => ExitCode::from(cmd::wear::CHECK_UNKNOWN),
                _ => ExitCode::from(e.exit_code() as u8),
            };
        }
    };
    events::install(matches!(cli.command, cli::Command::Serve(_)));
    match cmd::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("raidctl: {e}");
            exit::for_error(&e)
        }
    }
}
