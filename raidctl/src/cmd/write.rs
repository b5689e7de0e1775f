//! `raidctl write`: copy a file or stdin into the array at an offset, then flush.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::{Error, ErrorKind, Result};

use crate::cli::ArrayArgs;
use crate::units::parse_size;

/// Write bytes into an array (from stdin by default); flushed before it returns
#[derive(Args, Debug)]
pub struct WriteArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    #[command(flatten)]
    pub drill: crate::inject::InjectArgs,
    /// Byte offset in the array (K/M/G suffixes allowed)
    #[arg(long, short = 'o', default_value = "0", value_parser = parse_size)]
    pub offset: u64,
    /// Read from this file instead of stdin
    #[arg(long, short = 'i', value_name = "FILE")]
    pub input: Option<PathBuf>,
}

pub fn run(a: WriteArgs) -> Result<ExitCode> {
    let (mut input, in_name, in_len): (Box<dyn Read>, String, Option<u64>) = match &a.input {
        Some(p) => {
            let f = File::open(p).map_err(|e| Error::io(e, "open", &p.display().to_string(), 0))?;
            let len = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
            (Box::new(f), p.display().to_string(), len)
        }
        None => (Box::new(std::io::stdin().lock()), "stdin".into(), None),
    };
    // The drill lives as long as the array: its watchdog and its end-of-run report.
    let (_drill, array) = a.drill.assemble(&a.array, true)?;
    let size = array.size();
    let room = size.saturating_sub(a.offset);
    super::read::check_offset(a.offset, size)?;
    if let Some(len) = in_len {
        if len > room {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("{in_name} has {len} bytes but only {room} fit between offset {} and the end of the array", a.offset),
            ));
        }
    }
    let block = super::read::io_block(&array);
    let mut buf = raidcore::buf::AlignedBuf::zeroed(block);
    let mut pos = a.offset;
    loop {
        // Fill the buffer completely (pipes deliver short reads) so writes cover whole rows.
        let mut n = 0;
        while n < block {
            match input.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(e, "read", &in_name, pos - a.offset)),
            }
        }
        if n == 0 {
            break;
        }
        if pos + n as u64 > size {
            array.flush()?;
            array.close()?;
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{in_name} is larger than the {room} bytes between offset {} and the end of the array; the first {} bytes were written",
                    a.offset,
                    pos - a.offset
                ),
            ));
        }
        if let Err(e) = array.write(&buf[..n], pos) {
            // What was written stays: flushed, and the array closed clean when it still runs
            // (a member failed by the error is recorded; the rows it caught are settled).
            if array.flush().is_ok() {
                let _ = array.close();
            }
            return Err(e);
        }
        pos += n as u64;
        if n < block {
            break;
        }
    }
    // A hot spare promoted when the array was opened is rebuilt now, without being asked.
    if array.pending_targets().iter().any(|&(_, rebuild)| rebuild) {
        array.flush()?;
        return super::rebuild::after_change(array, &super::rebuild::RebuildFlags::quiet());
    }
    array.close()?;
    Ok(ExitCode::SUCCESS)
}
