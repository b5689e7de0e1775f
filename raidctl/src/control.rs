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
        Ok(s) => {
            // The socket is named by the array's uuid, which a copy of its members shares:
            // make sure the daemon serves this very member before acting through it.
            // "members" reads only member paths and states: it answers while a request hung
            // in a member holds the superblock (status would wait for it).
            let served = call(s, &crate::protocol::Request::Members {})?;
            let me = identity(member);
            let listed = served["members"].as_array().cloned().unwrap_or_default();
            let paths: Vec<&str> = listed.iter().filter_map(|m| m["path"].as_str()).collect();
            let id_of = |m: &Value| -> Option<(u64, u64)> {
                Some((m["id"][0].as_u64()?, m["id"][1].as_u64()?))
            };
            // As offline (assembly refuses to start from such a member).
            if let Some(m) = listed
                .iter()
                .find(|m| me.is_some() && id_of(m) == me && m["state"] == "faulty")
            {
                return Err(Error::new(
                    ErrorKind::Mismatch,
                    format!(
                        "{} was failed out of its array (slot {}); name another member, and re-add it with `raidctl add` to rebuild it",
                        member.display(),
                        m["slot"]
                    ),
                ));
            }
            if me.is_some() && !listed.iter().any(|m| id_of(m) == me) {
                return Err(Error::new(
                    ErrorKind::Mismatch,
                    format!(
                        "{} is not in service in the array `raidctl serve` serves under this uuid ({}): it was failed out or replaced, or it is a copy of a member; name a member in service (or stop that server to use this set)",
                        member.display(),
                        paths.join(", ")
                    ),
                ));
            }
            Ok(Some(UnixStream::connect(&path).map_err(|e| {
                Error::io(e, "connect", &path.display().to_string(), 0)
            })?))
        }
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

/// What a path is, whatever it is called: (device, inode) of a file, the device number of a
/// block device.
pub fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(p).ok()?;
    if m.file_type().is_block_device() {
        // A loop device is the file behind it.
        if let Some(b) = raidcore::device::probe::loop_backing_file(p) {
            return identity(&b);
        }
    }
    Some(if m.file_type().is_block_device() {
        (m.rdev(), 0)
    } else {
        (m.dev(), m.ino())
    })
}

/// Sends one request and returns the result, or the daemon's error with its exit code's kind.
pub fn call(mut stream: UnixStream, req: &crate::protocol::Request) -> Result<Value> {
    let io = |e: std::io::Error| Error::io(e, "talk to", "the serving daemon", 0);
    // Only a path that is not UTF-8 fails to encode (JSON carries text).
    let line = serde_json::to_string(req).map_err(|e| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("cannot name this to the serving daemon: {e} (the control protocol carries paths as UTF-8 text; rename it, or stop the server and run the command offline)"),
        )
    })?;
    writeln!(stream, "{line}").map_err(io)?;
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

/// Sends one request whose answer is typed ([`crate::protocol`]'s outcomes).
pub fn call_as<T: serde::de::DeserializeOwned>(
    stream: UnixStream,
    req: &crate::protocol::Request,
) -> Result<T> {
    serde_json::from_value(call(stream, req)?).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("bad answer from the serving daemon: {e}"),
        )
    })
}

/// Prints an outcome: its lines on stderr, and with `--json` one JSON line on stdout (the
/// rebuild's lines may follow).
pub fn report<T: serde::Serialize>(outcome: &T, json: bool, lines: &[String]) {
    for l in lines {
        eprintln!("raidctl: {l}");
    }
    if json {
        println!(
            "{}",
            serde_json::to_string(outcome).expect("an outcome encodes")
        );
    }
}

/// A member as named on the command line, for the daemon, meaning what it means offline
/// ([`raidcore::array::MemberRef::parse`]): a number is a slot unless a file of that name sits
/// in this directory; anything else is a path, made absolute here whether or not it exists
/// (the daemon never looks a name up in its own directory).
pub fn member_arg(s: &str) -> String {
    match raidcore::array::MemberRef::parse(s) {
        raidcore::array::MemberRef::Slot(n) => n.to_string(),
        raidcore::array::MemberRef::Path(p) => absolute(&p).display().to_string(),
    }
}

/// `p` absolute: its real path where it exists, else joined to this directory.
pub fn absolute(p: &Path) -> std::path::PathBuf {
    std::fs::canonicalize(p)
        .or_else(|_| std::path::absolute(p))
        .unwrap_or_else(|_| p.to_path_buf())
}
