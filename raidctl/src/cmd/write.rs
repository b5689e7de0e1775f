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

/// Input up to this size is staged in memory; beyond it, in an unnamed file in $TMPDIR.
const STAGE_IN_MEMORY: usize = 64 << 20;

/// The length of what is left to read from stdin when it is a regular file (`< file`).
fn stdin_file_len() -> Option<u64> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin();
    let f = fd.as_fd().try_clone_to_owned().ok().map(File::from)?;
    let m = f.metadata().ok().filter(|m| m.is_file())?;
    let mut f = f;
    let pos = std::io::Seek::stream_position(&mut f).ok()?;
    Some(m.len().saturating_sub(pos))
}

/// Reads a pipe whole before anything is written, so that input longer than `room` is
/// refused with the array unchanged (issue 29: it wrote 41 MB, then said it did not fit).
/// Up to [`STAGE_IN_MEMORY`] in memory, the rest in an unnamed temporary file. Errors when
/// the input holds more than `room` bytes.
fn stage(mut input: impl Read, room: u64, name: &str) -> Result<(Box<dyn Read>, u64)> {
    let too_long = |at: u64| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("{name} holds more than the {room} bytes that fit between the offset and the end of the array ({at} read); nothing was written"),
        )
    };
    let limit = room.saturating_add(1);
    let mut mem = Vec::new();
    (&mut input)
        .take(limit.min(STAGE_IN_MEMORY as u64 + 1))
        .read_to_end(&mut mem)
        .map_err(|e| Error::io(e, "read", name, 0))?;
    if mem.len() as u64 > room {
        return Err(too_long(mem.len() as u64));
    }
    if mem.len() <= STAGE_IN_MEMORY {
        let n = mem.len() as u64;
        return Ok((Box::new(std::io::Cursor::new(mem)), n));
    }
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir();
    let mut spool = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(&dir)
        .map_err(|e| Error::io(e, "create a staging file in", &dir.display().to_string(), 0))?;
    let staging = |e: std::io::Error| Error::io(e, "stage stdin in", &dir.display().to_string(), 0);
    std::io::Write::write_all(&mut spool, &mem).map_err(staging)?;
    let rest = std::io::copy(&mut (&mut input).take(limit - mem.len() as u64), &mut spool)
        .map_err(staging)?;
    let n = mem.len() as u64 + rest;
    if n > room {
        return Err(too_long(n));
    }
    std::io::Seek::rewind(&mut spool).map_err(staging)?;
    Ok((Box::new(spool), n))
}

pub fn run(a: WriteArgs) -> Result<ExitCode> {
    let (input, in_name, in_len): (Box<dyn Read>, String, Option<u64>) = match &a.input {
        Some(p) => {
            let f = File::open(p).map_err(|e| Error::io(e, "open", &p.display().to_string(), 0))?;
            // A regular file's size, unless 0: /proc and /sys files say 0 whatever they hold,
            // and are staged like a pipe.
            let len = f
                .metadata()
                .ok()
                .filter(|m| m.is_file() && m.len() > 0)
                .map(|m| m.len());
            (Box::new(f), p.display().to_string(), len)
        }
        None => (
            Box::new(std::io::stdin().lock()),
            "stdin".into(),
            stdin_file_len(),
        ),
    };
    // The drill lives as long as the array: its watchdog and its end-of-run report.
    let (_drill, array) = a.drill.assemble(&a.array, true)?;
    let size = array.size();
    let room = size.saturating_sub(a.offset);
    super::read::check_offset(a.offset, size)?;
    // A pipe's length is known only once read: staged first, so nothing is written when it
    // does not fit.
    let (mut input, in_len) = match in_len {
        Some(len) => (input, Some(len)),
        None => match stage(input, room, &in_name) {
            Ok((staged, n)) => (staged, Some(n)),
            Err(e) => {
                array.close()?;
                return Err(e);
            }
        },
    };
    if let Some(len) = in_len {
        if len > room {
            array.close()?;
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
