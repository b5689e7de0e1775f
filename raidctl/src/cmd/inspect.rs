//! `raidctl inspect`: what kind of device a member is (rotational, zoned, discard, block sizes).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::device::probe;
use raidcore::{Error, Result};
use serde_json::json;

/// Show device facts that matter for an SSD array
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// Devices or files
    #[arg(required = true, value_name = "DEVICE")]
    pub devices: Vec<PathBuf>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map(|x| x.to_string())
        .unwrap_or_else(|| "unknown".into())
}

pub fn run(a: InspectArgs) -> Result<ExitCode> {
    let mut all = Vec::new();
    for d in &a.devices {
        all.push(
            probe::inspect(d).map_err(|e| Error::io(e, "inspect", &d.display().to_string(), 0))?,
        );
    }
    if a.json {
        crate::output::print_json(&json!(all));
        return Ok(ExitCode::SUCCESS);
    }
    for i in &all {
        println!(
            "{} ({}, {})",
            i.path,
            i.kind,
            crate::units::human(i.size_bytes)
        );
        println!("  rotational      {}", opt(&i.rotational));
        println!(
            "  zoned           {}{}",
            opt(&i.zoned),
            if i.is_smr() { " (SMR)" } else { "" }
        );
        println!(
            "  discard         {} (granularity {}, max {})",
            opt(&i.supports_discard()),
            opt(&i.discard_granularity),
            opt(&i.discard_max_bytes)
        );
        println!(
            "  block size      logical {} physical {}",
            opt(&i.logical_block_size),
            opt(&i.physical_block_size)
        );
        println!("  optimal I/O     {}", opt(&i.optimal_io_size));
    }
    Ok(ExitCode::SUCCESS)
}
