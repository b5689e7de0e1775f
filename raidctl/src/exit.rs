//! Exit codes (documented in raidctl(8) under EXIT STATUS) and their mapping from error kinds.

use std::process::ExitCode;

use raidcore::{Error, ErrorKind};

pub const OK: u8 = 0;
pub const FAILURE: u8 = 1;
pub const USAGE: u8 = 2;
pub const METADATA: u8 = 3;
pub const REFUSED: u8 = 4;
pub const ARRAY_FAILED: u8 = 5;

/// The text of the EXIT STATUS section, shared by --help and the man page.
pub const EXIT_STATUS: &str = "\
EXIT STATUS:
  0  success
  1  I/O error, data failing its checksum beyond repair, data on the bad-block list, scrub problems left unrepaired, an interrupted profile, or other failure
  2  usage error: bad flag, value, member count or range
  3  metadata problem: no or corrupt superblock, member of another array, truncated or stale member
  4  refused: the device holds a file system or another array (use --force), or is mounted or in use (never overridden)
  5  the array has failed: more members missing or faulty than the level tolerates";

pub fn code_for(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::InvalidInput | ErrorKind::Unsupported => USAGE,
        ErrorKind::Corrupt | ErrorKind::Mismatch => METADATA,
        ErrorKind::InUse | ErrorKind::Busy => REFUSED,
        ErrorKind::ArrayFailed => ARRAY_FAILED,
        ErrorKind::Io | ErrorKind::Checksum | ErrorKind::BadBlock => FAILURE,
    }
}

pub fn for_error(e: &Error) -> ExitCode {
    ExitCode::from(code_for(e.kind()))
}

#[allow(dead_code)]
pub fn ok() -> ExitCode {
    ExitCode::from(OK)
}
