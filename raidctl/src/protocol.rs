//! The control protocol between the subcommands and the serving daemon: one typed request per
//! line (JSON, tagged by `cmd`), decoded whole or refused. Every field the daemon reads is named
//! here with its type: a request with a misspelt or extra field, a field of the wrong type or
//! an unknown command is answered "bad request" (exit 2) instead of running with a default in
//! its place, as the untyped protocol did (`req["cmd"].as_str()` and `as_u64()` per field).

use std::io::{BufRead, Read};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The longest request line the daemon reads. Requests are a few hundred bytes; a wear request
/// names one SMART source per member.
pub const MAX_LINE: usize = 64 << 10;

/// One line read from a control connection.
#[derive(Debug)]
pub enum Line {
    Request(Request),
    /// Not a request: answered "bad request" (exit 2), nothing run.
    Bad(String),
    /// Longer than [`MAX_LINE`]: answered, then the connection is closed (the rest of the line
    /// is not read).
    TooLong,
    /// The client closed the connection.
    End,
}

/// Reads and decodes the next request line, reading at most [`MAX_LINE`] + 1 bytes.
pub fn read_request(r: &mut impl BufRead) -> Line {
    let mut line = Vec::new();
    match Read::take(&mut *r, MAX_LINE as u64 + 1).read_until(b'\n', &mut line) {
        Ok(0) | Err(_) => Line::End,
        Ok(_) if line.len() > MAX_LINE => Line::TooLong,
        Ok(_) => match decode(&line) {
            Ok(req) => Line::Request(req),
            Err(e) => Line::Bad(e),
        },
    }
}

/// Decodes one request line: bytes, not a string (a line that is not UTF-8 is a bad request
/// like any other, not a connection closed without an answer).
pub fn decode(line: &[u8]) -> Result<Request, String> {
    serde_json::from_slice::<Request>(line).map_err(|e| format!("bad request: {e}"))
}

/// A request to the daemon. Member names are resolved by the client (raidctl's
/// `control::member_arg`: absolute paths, or slot numbers), never in the daemon's directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// `status --json`, with the daemon's own fields (served_by, injected, job). (Empty
    /// struct variants, not unit ones: serde refuses unknown fields only in those.)
    Status {},
    /// Member paths and states only (answers while a hung member request holds the superblock).
    Members {},
    Fail {
        member: String,
        #[serde(default)]
        max_rate: Option<u64>,
        #[serde(default)]
        min_rate: Option<u64>,
    },
    Remove {
        member: String,
    },
    Add {
        new: PathBuf,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        endurance_bytes: Option<u64>,
        #[serde(default)]
        max_rate: Option<u64>,
        #[serde(default)]
        min_rate: Option<u64>,
    },
    Replace {
        old: String,
        new: PathBuf,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        endurance_bytes: Option<u64>,
        #[serde(default)]
        keep_roles: Option<bool>,
        #[serde(default)]
        max_rate: Option<u64>,
        #[serde(default)]
        min_rate: Option<u64>,
    },
    Inject {
        #[serde(default)]
        member: Option<String>,
        #[serde(default)]
        faults: raidcore::device::inject::Faults,
        #[serde(default)]
        clear: bool,
        #[serde(default, rename = "return")]
        return_: bool,
    },
    Rebuild {
        #[serde(default)]
        max_rate: Option<u64>,
        #[serde(default)]
        min_rate: Option<u64>,
    },
    Scrub {
        #[serde(default)]
        repair: bool,
        #[serde(default)]
        max_rate: Option<u64>,
        #[serde(default)]
        min_rate: Option<u64>,
        #[serde(default)]
        include_empty: bool,
    },
    Wear(WearRequest),
    WearRecord(WearRequest),
    Clear {
        #[serde(default)]
        member: Option<String>,
    },
    SetEndurance {
        member: String,
        endurance_bytes: u64,
    },
}

/// The wear report's options as the daemon gets them (SMART sources named from its point of
/// view).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WearRequest {
    pub smart: Vec<String>,
    pub window: f64,
    pub rebuild_rate: u64,
    pub horizon: f64,
    pub endurance_spread: f64,
    #[serde(default)]
    pub collision_days: Option<f64>,
}

/// What `fail` did: the daemon's answer, and what `fail --json` prints served or not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failed {
    /// The slot marked faulty; none when the member was a hot spare (removed).
    pub slot: Option<usize>,
    pub spare_removed: bool,
    /// The array's state afterwards.
    pub state: String,
    /// The parity-heavy slot of a skewed array failed with a hot spare waiting: the spare
    /// rebuilds it in place and the role stays ([`raidcore::Array::heavy_role_note`]).
    pub role_note: Option<String>,
}

impl Failed {
    /// `slot` as [`raidcore::Array::fail`] returns it (`usize::MAX`: a spare, removed).
    pub fn of(a: &raidcore::Array, slot: usize) -> Failed {
        let slot = (slot != usize::MAX).then_some(slot);
        let spare_waits = a.members().iter().any(|m| m.state.name() == "spare");
        Failed {
            slot,
            spare_removed: slot.is_none(),
            state: a.state().name().to_string(),
            role_note: slot
                .filter(|_| spare_waits)
                .and_then(|s| a.heavy_role_note(s)),
        }
    }

    /// The lines printed for it, with the member as the user named it.
    pub fn say(&self, member: &str, served: bool) -> Vec<String> {
        let array = if served {
            "the served array"
        } else {
            "the array"
        };
        let s = match self.slot {
            Some(slot) => {
                format!(
                    "slot {slot} marked faulty ({member}); {array} is {}",
                    self.state
                )
            }
            None => format!("spare {member} removed from {array}"),
        };
        std::iter::once(s).chain(self.role_note.clone()).collect()
    }
}

/// What `remove` did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Removed {
    /// The array's state afterwards.
    pub state: String,
}

/// What `add` did: the slot the device rebuilds (or re-adds, copying only what changed while
/// it was away), or none for a hot spare; for the parity-heavy slot of a skewed array, where
/// the role stays ([`raidcore::Array::heavy_role_note`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Added {
    pub slot: Option<usize>,
    pub spare: bool,
    pub readd: bool,
    pub role_note: Option<String>,
}

impl Added {
    pub fn of(a: &raidcore::Array, slot: Option<usize>) -> Added {
        let readd = slot.is_some_and(|s| a.slot_readding(s));
        Added {
            slot,
            spare: slot.is_none(),
            readd,
            role_note: slot.filter(|_| !readd).and_then(|s| a.heavy_role_note(s)),
        }
    }

    /// The lines printed for it (without the `raidctl: ` prefix).
    pub fn say(&self, new: &str, served: bool) -> Vec<String> {
        let (of, then) = if served {
            (" of the served array", ", in the background")
        } else {
            ("", "")
        };
        let s = match self.slot {
            Some(s) if self.readd => format!(
                "{new} re-added to slot {s}{of}: only what changed since it left is copied{then}"
            ),
            Some(s) => format!("{new} added to rebuild slot {s}{of}{then}"),
            None => format!("{new} added as a hot spare"),
        };
        std::iter::once(s).chain(self.role_note.clone()).collect()
    }
}

/// What `replace` started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Replacing {
    pub role_change: Option<String>,
}

/// What `rebuild` started: the slots with a target (hot spares promoted first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RebuildStarted {
    pub started: bool,
    pub pending: usize,
}

impl RebuildStarted {
    /// The rebuilds and replaces `a` has to run.
    pub fn of(a: &raidcore::Array) -> RebuildStarted {
        RebuildStarted {
            started: true,
            pending: a.pending_targets().len(),
        }
    }
}

/// What `clear` reset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cleared {
    pub read: u64,
    pub write: u64,
    pub checksum: u64,
}

impl From<(u64, u64, u64)> for Cleared {
    /// The counts as [`raidcore::Array::clear_errors`] returns them.
    fn from((read, write, checksum): (u64, u64, u64)) -> Cleared {
        Cleared {
            read,
            write,
            checksum,
        }
    }
}

/// What `set` recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnduranceSet {
    pub endurance_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire form is the one the daemon has always read (a daemon and a client of one build
    /// agree; the names are what scripts talking to the socket see).
    #[test]
    fn requests_round_trip_and_keep_their_wire_names() {
        let r = Request::Add {
            new: "/d/m3".into(),
            force: false,
            endurance_bytes: Some(600),
            max_rate: None,
            min_rate: Some(1 << 20),
        };
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.starts_with(r#"{"cmd":"add","new":"/d/m3""#), "{s}");
        assert_eq!(serde_json::from_str::<Request>(&s).unwrap(), r);
        let r = Request::SetEndurance {
            member: "2".into(),
            endurance_bytes: 7,
        };
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.contains(r#""cmd":"set-endurance""#), "{s}");
        assert_eq!(
            serde_json::to_string(&Request::Status {}).unwrap(),
            r#"{"cmd":"status"}"#
        );
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"cmd":"members"}"#).unwrap(),
            Request::Members {}
        );
        let r = Request::Inject {
            member: Some("1".into()),
            faults: Default::default(),
            clear: false,
            return_: true,
        };
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.contains(r#""return":true"#), "{s}");
        assert_eq!(serde_json::from_str::<Request>(&s).unwrap(), r);
        let w = Request::WearRecord(WearRequest {
            smart: vec!["auto".into()],
            window: 30.0,
            rebuild_rate: 1,
            horizon: 2.0,
            endurance_spread: 3.0,
            collision_days: None,
        });
        let s = serde_json::to_string(&w).unwrap();
        assert!(s.contains(r#""cmd":"wear-record","smart":["auto"]"#), "{s}");
        assert_eq!(serde_json::from_str::<Request>(&s).unwrap(), w);
    }

    /// A line is read whole only up to MAX_LINE: a client that never sends a newline cannot
    /// make the daemon buffer without end.
    #[test]
    fn request_lines_are_read_bounded() {
        let mut r = std::io::Cursor::new(b"{\"cmd\":\"status\"}\n\xff\n".to_vec());
        assert!(matches!(
            read_request(&mut r),
            Line::Request(Request::Status {})
        ));
        assert!(matches!(read_request(&mut r), Line::Bad(e) if e.starts_with("bad request")));
        assert!(matches!(read_request(&mut r), Line::End));
        let mut long = vec![b' '; 10 * MAX_LINE];
        long.extend_from_slice(b"{\"cmd\":\"status\"}\n");
        let mut r = std::io::Cursor::new(long);
        assert!(matches!(read_request(&mut r), Line::TooLong));
        assert_eq!(r.position(), MAX_LINE as u64 + 1, "read past the bound");
        // Exactly MAX_LINE bytes with its newline is a line like any other.
        let mut line = vec![b' '; MAX_LINE - 17];
        line.extend_from_slice(b"{\"cmd\":\"status\"}\n");
        assert_eq!(line.len(), MAX_LINE);
        let mut r = std::io::Cursor::new(line);
        assert!(matches!(
            read_request(&mut r),
            Line::Request(Request::Status {})
        ));
    }

    /// What the untyped protocol ran with defaults in place of what was meant is refused.
    #[test]
    fn malformed_requests_are_refused_not_defaulted() {
        for bad in [
            r#"{"cmd":"scrub","repiar":true}"#,
            r#"{"cmd":"scrub","repair":"yes"}"#,
            r#"{"cmd":"fail"}"#,
            r#"{"cmd":"fail","member":2}"#,
            r#"{"cmd":"set-endurance","member":"1"}"#,
            r#"{"cmd":"set-endurance","member":"1","endurance_bytes":-5}"#,
            r#"{"cmd":"format-everything"}"#,
            r#"{"member":"1"}"#,
            r#"{"cmd":"add","new":"/d/x","force":1}"#,
            r#"[]"#,
            r#"{"cmd":"wear","smart":[],"window":1,"rebuild_rate":1,"horizon":1,"endurance_spread":1,"windoww":3}"#,
            r#"{"cmd":"status","x":1}"#,
            r#"{"cmd":"members","remove_everything":true}"#,
            r#"{"cmd":"inject","member":"1","faults":{"latncy_us":1000}}"#,
            r#"{"cmd":"inject","member":"1","faults":{"read_errors":{"range":{"start":0,"end":1,"x":2}}}}"#,
        ] {
            assert!(
                serde_json::from_str::<Request>(bad).is_err(),
                "{bad} was accepted"
            );
        }
    }
}
