//! The control protocol between the subcommands and the serving daemon: one typed request per
//! line (JSON, tagged by `cmd`), decoded whole or refused. Every field the daemon reads is named
//! here with its type: a request with a misspelt or extra field, a field of the wrong type or
//! an unknown command is answered "bad request" (exit 2) instead of running with a default in
//! its place, as the untyped protocol did (`req["cmd"].as_str()` and `as_u64()` per field).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A request to the daemon. Member names are resolved by the client ([`crate::control::member_arg`]:
/// absolute paths, or slot numbers), never in the daemon's directory.
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
        keep_roles: Option<bool>,
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
            keep_roles: None,
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
