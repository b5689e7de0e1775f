//! raidctl: the command line. Parses arguments, runs one subcommand, maps errors to the
//! documented exit codes.

mod cli;
mod cmd;
mod exit;
mod loopdev;
mod output;
mod progress;
mod units;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cmd::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("raidctl: {e}");
            exit::for_error(&e)
        }
    }
}
