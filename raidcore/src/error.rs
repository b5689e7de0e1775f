//! The one error type of `raidcore`: a small stable kind, the context (member, offset, operation) and the source.

use std::fmt;
use std::io;

/// Stable classification of failures; `raidctl` maps these to exit codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller asked for something invalid (bad flag value, out-of-range offset, wrong member count).
    InvalidInput,
    /// A superblock or other on-disk structure failed validation.
    Corrupt,
    /// A member belongs to another array, is stale, or does not match what the array expects.
    Mismatch,
    /// A device holds data we refuse to overwrite (file system, another array) without `--force`.
    InUse,
    /// A device is mounted, open exclusively elsewhere or locked by another process: never overridden.
    Busy,
    /// More members are missing or failed than the level tolerates.
    ArrayFailed,
    /// An I/O error from a member or a file.
    Io,
    /// Data fails its checksum and redundancy cannot restore it.
    Checksum,
    /// The operation is not supported on this level or device.
    Unsupported,
    /// The data is on the array's bad-block list: its contents were lost (a member lost in a
    /// crash); an error rather than a guess, until the block is written again.
    BadBlock,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::Corrupt => "corrupt metadata",
            ErrorKind::Checksum => "checksum error",
            ErrorKind::Mismatch => "member mismatch",
            ErrorKind::InUse => "device holds data",
            ErrorKind::Busy => "device busy",
            ErrorKind::ArrayFailed => "array failed",
            ErrorKind::Io => "I/O error",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::BadBlock => "bad block",
        }
    }
}

/// An error with context. Display prints the context chain, most specific last.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    context: Vec<String>,
    source: Option<io::Error>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            context: Vec::new(),
            source: None,
        }
    }

    /// An I/O error on `what` (a member path or slot) during `op` at byte `offset` of that device.
    pub fn io(source: io::Error, op: &str, what: &str, offset: u64) -> Self {
        Error {
            kind: ErrorKind::Io,
            message: format!("{op} {what} at offset {offset}"),
            context: Vec::new(),
            source: Some(source),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The OS error number of the underlying I/O error, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.as_ref().and_then(|e| e.raw_os_error())
    }

    /// Adds an outer context line ("opening array /dev/loop3").
    pub fn context(mut self, ctx: impl Into<String>) -> Self {
        self.context.push(ctx.into());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.context.iter().rev() {
            write!(f, "{c}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Shorthand for `Err(Error::new(kind, format!(...)))`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::Error::new($crate::ErrorKind::$kind, format!($($arg)*)))
    };
}
