//! `raidctl read`: copy a range of the array to a file or stdout.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::{Error, ErrorKind, Result};

use crate::cli::ArrayArgs;
use crate::units::parse_size;

/// Read bytes from an array (to stdout by default)
#[derive(Args, Debug)]
pub struct ReadArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    #[command(flatten)]
    pub drill: crate::inject::InjectArgs,
    /// Byte offset in the array (K/M/G suffixes allowed)
    #[arg(long, short = 'o', default_value = "0", value_parser = parse_size)]
    pub offset: u64,
    /// Bytes to read (default: to the end of the array)
    #[arg(long, short = 'n', value_parser = parse_size)]
    pub length: Option<u64>,
    /// Write to this file instead of stdout
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Transfer size of read and write: whole rows, a few MiB.
pub fn io_block(array: &raidcore::Array) -> usize {
    let l = array.layout();
    let row = l.chunk() as usize * l.data_per_row().max(1);
    (4 << 20) / row * row + if row > 4 << 20 { row } else { 0 }
}

/// Refuses an --offset past the end of the array.
pub fn check_offset(offset: u64, size: u64) -> Result<()> {
    if offset > size {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("--offset {offset} is past the end of the array ({size} bytes)"),
        ));
    }
    Ok(())
}

pub fn run(a: ReadArgs) -> Result<ExitCode> {
    // The drill lives as long as the array: its watchdog and its end-of-run report.
    let (_drill, array) = a.drill.assemble(&a.array, false)?;
    let size = array.size();
    check_offset(a.offset, size)?;
    let length = a.length.unwrap_or(size - a.offset);
    if a.offset.checked_add(length).is_none_or(|e| e > size) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "--offset {} --length {length} goes past the end of the array ({size} bytes)",
                a.offset
            ),
        ));
    }
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(
            File::create(p).map_err(|e| Error::io(e, "create", &p.display().to_string(), 0))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let out_name = a
        .output
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "stdout".into());
    let block = io_block(&array);
    let mut buf = raidcore::buf::AlignedBuf::zeroed(block);
    let mut pos = a.offset;
    let end = a.offset + length;
    while pos < end {
        let n = ((end - pos) as usize).min(block);
        array.read(&mut buf[..n], pos)?;
        out.write_all(&buf[..n])
            .map_err(|e| Error::io(e, "write", &out_name, pos - a.offset))?;
        pos += n as u64;
    }
    out.flush()
        .map_err(|e| Error::io(e, "flush", &out_name, 0))?;
    Ok(ExitCode::SUCCESS)
}
