//! `raidctl loop`: create backing files and attach loop devices for failure simulations, and
//! detach them again.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use raidcore::{Error, ErrorKind, Result};
use serde_json::json;

use crate::loopdev;
use crate::units::parse_size;

/// Loop devices for simulations
#[derive(Args, Debug)]
#[command(disable_help_subcommand = true)]
pub struct LoopArgs {
    #[command(subcommand)]
    pub command: LoopCommand,
}

#[derive(Subcommand, Debug)]
pub enum LoopCommand {
    /// Create COUNT sparse backing files in DIR and attach a loop device to each
    Create {
        /// Directory for the backing files (created if missing)
        #[arg(long)]
        dir: PathBuf,
        /// Number of devices
        #[arg(long, default_value_t = 4)]
        count: usize,
        /// Size of each backing file
        #[arg(long, value_parser = parse_size)]
        size: u64,
        /// Backing file name prefix
        #[arg(long, default_value = "disk")]
        prefix: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Detach loop devices, given by path or by the directory holding their backing files
    Detach {
        /// Loop devices to detach
        #[arg(value_name = "DEVICE")]
        devices: Vec<PathBuf>,
        /// Detach every loop device whose backing file is in this directory
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Also detach devices a raidctl process holds (a served array's members): the
        /// array loses them
        #[arg(long)]
        force: bool,
    },
}

pub fn run(a: LoopArgs) -> Result<ExitCode> {
    match a.command {
        LoopCommand::Create {
            dir,
            count,
            size,
            prefix,
            json: as_json,
        } => {
            if count == 0 || count > 64 {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("--count {count} is not between 1 and 64"),
                ));
            }
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::io(e, "mkdir", &dir.display().to_string(), 0))?;
            let mut made = Vec::new();
            for i in 0..count {
                let file = dir.join(format!("{prefix}{i}.img"));
                if file.exists() {
                    return Err(Error::new(
                        ErrorKind::InUse,
                        format!(
                            "{} exists; choose another --dir or --prefix",
                            file.display()
                        ),
                    ));
                }
                let f = std::fs::File::create(&file)
                    .map_err(|e| Error::io(e, "create", &file.display().to_string(), 0))?;
                f.set_len(size)
                    .map_err(|e| Error::io(e, "extend", &file.display().to_string(), size))?;
                let dev = loopdev::attach(&file)?;
                made.push((dev, file));
            }
            if as_json {
                let v: Vec<_> = made
                    .iter()
                    .map(|(d, f)| json!({"device": d, "file": f}))
                    .collect();
                crate::output::print_json(&json!(v));
            } else {
                for (d, _) in &made {
                    println!("{}", d.display());
                }
            }
        }
        LoopCommand::Detach {
            mut devices,
            dir,
            force,
        } => {
            if let Some(dir) = dir {
                devices.extend(loopdev::devices_backed_in(&dir).into_iter().map(|(d, _)| d));
            }
            if devices.is_empty() {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    "no loop devices to detach",
                ));
            }
            // A member of a running array (raidctl holds its lock) is not pulled from under
            // it without --force; checked for all before any is detached.
            if !force {
                for d in &devices {
                    if let Some((pid, cmd)) = raidcore::device::probe::lock_holder(d) {
                        return Err(Error::new(
                            ErrorKind::InUse,
                            format!(
                                "{} is held by raidctl process {pid} ({cmd}): a member of a running array; stop it first, or give --force to detach anyway",
                                d.display()
                            ),
                        ));
                    }
                }
            }
            for d in devices {
                loopdev::detach(&d)?;
                println!("{}", d.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
