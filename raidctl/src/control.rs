//! Client side of the control socket: while `raidctl serve` owns an array, the other
//! subcommands send it one JSON request per line and print its answer.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use raidcore::device::{FileMember, OpenMode};
use raidcore::format::{self, Probe};
use raidcore::{Error, ErrorKind, Result};
use serde_json::Value;

/// The control connection of the daemon serving the array `member` belongs to, if one runs.
pub fn daemon_for(member: &Path) -> Result<Option<UnixStream>> {
    let Ok(m) = FileMember::open(member, OpenMode::Peek) else {
        return Ok(None);
    };
    let Ok(Probe::Valid(l)) = format::probe(&m) else {
        return Ok(None);
    };
    let path = crate::daemon::control_path(&crate::output::uuid(&l.sb.array_uuid));
    match UnixStream::connect(&path) {
        Ok(s) => Ok(Some(s)),
        // A daemon serves the array, and its members are locked by it: say what stops us,
        // rather than "locked by another process" from the members.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(Error::new(
            ErrorKind::Busy,
            format!(
                "the array is served by `raidctl serve`, and its control socket {} refused the connection: permission denied (run as root)",
                path.display()
            ),
        )),
        Err(_) => Ok(None),
    }
}

/// Sends one request and returns the result, or the daemon's error with its exit code's kind.
pub fn call(mut stream: UnixStream, req: Value) -> Result<Value> {
    let io = |e: std::io::Error| Error::io(e, "talk to", "the serving daemon", 0);
    writeln!(stream, "{req}").map_err(io)?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).map_err(io)?;
    let answer: Value = serde_json::from_str(&line).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("bad answer from the serving daemon: {e}"),
        )
    })?;
    if answer["ok"] == true {
        return Ok(answer["result"].clone());
    }
    let kind = match answer["exit"].as_u64().map(|c| c as u8) {
        Some(crate::exit::USAGE) => ErrorKind::InvalidInput,
        Some(crate::exit::METADATA) => ErrorKind::Corrupt,
        Some(crate::exit::REFUSED) => ErrorKind::Busy,
        Some(crate::exit::ARRAY_FAILED) => ErrorKind::ArrayFailed,
        _ => ErrorKind::Io,
    };
    Err(Error::new(
        kind,
        answer["error"]
            .as_str()
            .unwrap_or("the serving daemon failed")
            .to_string(),
    )
    .context("serving daemon"))
}
