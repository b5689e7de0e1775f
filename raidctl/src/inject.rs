//! Failure drills from the command line: fault specs (`1M-2M`, `5%`, `5ms,2ms`) parsed into
//! raidcore's injected faults, the `--inject MEMBER:KIND[=VALUE]` and `--member-timeout` flags
//! of offline commands, the member timeout (a member with a request older than it is given up
//! on: its requests fail, and the engine fails the member as it does on any I/O error), and the
//! injected state as JSON for `status`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use raidcore::array::InjectingFiles;
use raidcore::device::inject::{Faults, InjectTable, Where};
use raidcore::{Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::units::parse_size;

/// `--read-errors` and `--write-errors`: `START-END` or `START+LEN` (member bytes, with size
/// suffixes), or a share of requests (`5%`).
pub fn parse_where(s: &str) -> std::result::Result<Where, String> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        return match p.trim().parse::<f64>() {
            Ok(v) if (0.0..=100.0).contains(&v) && v > 0.0 => Ok(Where::Rate(v / 100.0)),
            _ => Err(format!("{s:?} is not a percentage between 0 and 100")),
        };
    }
    let (start, end) = if let Some((a, b)) = t.split_once('+') {
        let a = parse_size(a)?;
        (a, a.saturating_add(parse_size(b)?))
    } else if let Some((a, b)) = t.split_once('-') {
        (parse_size(a)?, parse_size(b)?)
    } else {
        return Err(format!(
            "{s:?} is neither a byte range (START-END or START+LEN, e.g. 1M-2M) nor a percentage (e.g. 5%)"
        ));
    };
    if end <= start {
        return Err(format!("{s:?} is an empty range"));
    }
    Ok(Where::Range { start, end })
}

/// A short duration in microseconds: "200us", "5ms", "1.5s", "2" (seconds).
pub fn parse_micros(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e6)
    } else {
        (t, 1e6)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if (0.0..=600.0 * 1e6).contains(&(v * mult)) => Ok((v * mult) as u64),
        _ => Err(format!(
            "{s:?} is not a duration up to 10 minutes (e.g. 200us, 5ms, 1.5s)"
        )),
    }
}

/// `--latency DUR[,JITTER]`.
pub fn parse_latency(s: &str) -> std::result::Result<(u64, u64), String> {
    match s.split_once(',') {
        Some((d, j)) => Ok((parse_micros(d)?, parse_micros(j)?)),
        None => Ok((parse_micros(s)?, 0)),
    }
}

/// A percentage in 0..=100 as a fraction.
pub fn parse_pct(s: &str) -> std::result::Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 100.0 => Ok(v / 100.0),
        _ => Err(format!("{s:?} is not a percentage above 0, up to 100")),
    }
}

/// `--corrupt-on-read PCT[@RANGE]`: a share of blocks, optionally of a byte range only.
pub fn parse_rot(s: &str) -> std::result::Result<(f64, Option<(u64, u64)>), String> {
    match s.split_once('@') {
        None => Ok((parse_pct(s)?, None)),
        Some((p, r)) => match parse_where(r)? {
            Where::Range { start, end } => Ok((parse_pct(p)?, Some((start, end)))),
            Where::Rate(_) => Err(format!("{s:?}: after @ comes a byte range (START-END)")),
        },
    }
}

/// Adds one `KIND[=VALUE]` of `--inject` to `f`.
fn apply_kind<'a>(
    f: &mut Faults,
    kind: &str,
    value: Option<&'a str>,
) -> std::result::Result<(), String> {
    let need = |v: Option<&'a str>| v.ok_or_else(|| format!("{kind} needs a value ({kind}=...)"));
    let none = |v: Option<&str>| match v {
        None => Ok(()),
        Some(_) => Err(format!("{kind} takes no value")),
    };
    match kind {
        "read-errors" => f.read_errors = Some(parse_where(need(value)?)?),
        "write-errors" => f.write_errors = Some(parse_where(need(value)?)?),
        "latency" => {
            let (d, j) = parse_latency(need(value)?)?;
            f.latency_us = Some(d);
            f.latency_jitter_us = j;
        }
        "timeout-after" => {
            f.hang_after = Some(
                need(value)?
                    .parse()
                    .map_err(|_| format!("timeout-after={} is not a count", value.unwrap_or("")))?,
            )
        }
        "corrupt-on-read" => {
            let (p, r) = parse_rot(need(value)?)?;
            f.corrupt_on_read = Some(p);
            f.corrupt_in = r;
        }
        "vanish" => {
            none(value)?;
            f.vanished = true;
        }
        "full" => {
            none(value)?;
            f.full = true;
        }
        other => {
            return Err(format!(
                "unknown fault {other:?} (read-errors, write-errors, latency, timeout-after, corrupt-on-read, vanish, full)"
            ))
        }
    }
    Ok(())
}

/// Parses `MEMBER:KIND[=VALUE][,KIND[=VALUE]..]`... one kind per flag: `m1:read-errors=5%`.
pub fn parse_inject(s: &str) -> std::result::Result<(PathBuf, Faults), String> {
    let (member, spec) = s.rsplit_once(':').ok_or_else(|| {
        format!("--inject {s:?} is not MEMBER:KIND[=VALUE] (e.g. /dev/loop1:read-errors=5%)")
    })?;
    let (kind, value) = match spec.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (spec, None),
    };
    let mut f = Faults::default();
    apply_kind(&mut f, kind, value).map_err(|e| format!("--inject {s:?}: {e}"))?;
    Ok((PathBuf::from(member), f))
}

/// Merges the faults set in `add` into `into` (each kind `add` sets replaces the old one).
pub fn merge(into: &mut Faults, add: &Faults) {
    if add.read_errors.is_some() {
        into.read_errors = add.read_errors;
    }
    if add.write_errors.is_some() {
        into.write_errors = add.write_errors;
    }
    if add.latency_us.is_some() {
        into.latency_us = add.latency_us;
        into.latency_jitter_us = add.latency_jitter_us;
    }
    if add.hang_after.is_some() {
        into.hang_after = add.hang_after;
    }
    if add.corrupt_on_read.is_some() {
        into.corrupt_on_read = add.corrupt_on_read;
        into.corrupt_in = add.corrupt_in;
    }
    into.vanished |= add.vanished;
    into.full |= add.full;
}

/// Fault injection and the member timeout of one process: the table every member goes
/// through, and the watchdog thread (stopped on drop).
pub struct Drill {
    pub table: Arc<InjectTable>,
    /// `--inject` was given: say at the end what was injected.
    announce: bool,
    stop: Arc<AtomicBool>,
    watchdog: Option<std::thread::JoinHandle<()>>,
}

impl Drill {
    /// A table with no faults, and a watchdog that gives up on a member whose oldest request
    /// is older than `timeout_secs` (0: never).
    pub fn new(timeout_secs: u64) -> Drill {
        let table = Arc::new(InjectTable::new());
        table.set_tracking(timeout_secs > 0);
        let stop = Arc::new(AtomicBool::new(false));
        let watchdog = (timeout_secs > 0).then(|| {
            let (t, s) = (table.clone(), stop.clone());
            let limit = Duration::from_secs(timeout_secs);
            std::thread::spawn(move || {
                while !s.load(Ordering::Acquire) {
                    for st in t.all() {
                        if let Some(o) = st.oldest() {
                            if !st.given_up() && o.started.elapsed() >= limit {
                                eprintln!(
                                    "raidctl: {}: a {} at offset {} has had no answer for {} s (the member timeout): giving up on the member",
                                    st.path().display(),
                                    o.op,
                                    o.offset,
                                    limit.as_secs()
                                );
                                st.give_up();
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        });
        Drill {
            table,
            announce: false,
            stop,
            watchdog,
        }
    }

    /// The member source that puts every claimed member through the table.
    pub fn source(&self) -> InjectingFiles {
        InjectingFiles(self.table.clone())
    }

    /// Sets `--inject` specs before the array is assembled.
    pub fn preset(&self, specs: &[String]) -> Result<()> {
        for s in specs {
            let (path, f) = parse_inject(s).map_err(|e| Error::new(ErrorKind::InvalidInput, e))?;
            if !path.exists() {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("--inject {s:?}: {} does not exist", path.display()),
                ));
            }
            let st = self.table.state(&path);
            let mut cur = st.faults();
            merge(&mut cur, &f);
            st.set(cur);
        }
        Ok(())
    }

    /// After assembly: every `--inject` path must be a member of `array` (a typo or another
    /// array's member would drill nothing; the array is closed again and the error returned),
    /// and each preset is an event in the array's log.
    pub fn check_members(&self, array: raidcore::Array) -> Result<raidcore::Array> {
        match self.checked(&array) {
            Ok(()) => Ok(array),
            Err(e) => {
                let _ = array.close();
                Err(e)
            }
        }
    }

    fn checked(&self, array: &raidcore::Array) -> Result<()> {
        // (slot, canonical path) of every member, once.
        let members: Vec<(Option<usize>, PathBuf)> = array
            .members()
            .into_iter()
            .filter_map(|m| {
                let p = m.path?;
                Some((m.slot, std::fs::canonicalize(&p).unwrap_or(p)))
            })
            .collect();
        for s in self.table.all() {
            if s.faults().is_none() {
                continue;
            }
            let Some(&(slot, _)) = members.iter().find(|(_, p)| p == s.path()) else {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!(
                        "--inject names {}, which is not a member of this array",
                        s.path().display()
                    ),
                ));
            };
            array.raise(
                "drill",
                slot,
                format!(
                    "{}: {} (--inject, this run only)",
                    s.path().display(),
                    describe(&serde_json::to_value(s.faults()).unwrap_or_default())
                ),
            );
        }
        Ok(())
    }

    /// Every member with faults set or injected, for `status`.
    pub fn json(&self) -> Value {
        table_json(&self.table)
    }
}

impl Drop for Drill {
    fn drop(&mut self) {
        if self.announce {
            for s in self.table.all() {
                let i = s.injections();
                if s.faults().is_none() && i == Default::default() && !s.given_up() {
                    continue;
                }
                eprintln!(
                    "raidctl: drill: {}: {}; injected {} read errors, {} write errors, {} delays, {} hangs, {} rotten blocks, {} vanished and {} full requests{}",
                    s.path().display(),
                    describe(&serde_json::to_value(s.faults()).unwrap_or_default()),
                    i.read_errors, i.write_errors, i.delayed, i.hung, i.corrupted_blocks, i.vanished, i.full,
                    if s.given_up() { "; given up on by the member timeout" } else { "" }
                );
            }
        }
        self.stop.store(true, Ordering::Release);
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
    }
}

/// `--inject` given for an array a daemon serves.
pub fn served_error() -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        "the array is served by `raidctl serve`: inject faults into it with `raidctl inject` (--inject is for offline commands)",
    )
}

/// The faults and injection counts of every member that has any.
pub fn table_json(t: &InjectTable) -> Value {
    Value::Array(
        t.all()
            .iter()
            .filter(|s| {
                !s.faults().is_none() || s.given_up() || s.injections() != Default::default()
            })
            .map(|s| {
                json!({
                    "path": s.path().display().to_string(),
                    "faults": s.faults(),
                    "injected": s.injections(),
                    "timed_out": s.given_up(),
                })
            })
            .collect(),
    )
}

/// A fraction as a percentage without float noise: 0.07 is "7%", 0.0125 "1.25%".
fn pct_text(f: f64) -> String {
    let s = format!("{:.4}", f * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// One line describing a member's faults, for `status`.
pub fn describe(f: &Value) -> String {
    let mut parts = Vec::new();
    let w = |v: &Value| -> String {
        if let Some(r) = v["rate"].as_f64() {
            format!("{} of requests", pct_text(r))
        } else {
            format!(
                "bytes {}-{}",
                v["range"]["start"].as_u64().unwrap_or(0),
                v["range"]["end"].as_u64().unwrap_or(0)
            )
        }
    };
    if !f["read_errors"].is_null() {
        parts.push(format!("read errors on {}", w(&f["read_errors"])));
    }
    if !f["write_errors"].is_null() {
        parts.push(format!("write errors on {}", w(&f["write_errors"])));
    }
    if let Some(us) = f["latency_us"].as_u64() {
        parts.push(format!(
            "latency {} us (+ up to {} us)",
            us,
            f["latency_jitter_us"].as_u64().unwrap_or(0)
        ));
    }
    if let Some(n) = f["hang_after"].as_u64() {
        parts.push(format!("hangs after {n} more requests"));
    }
    if let Some(p) = f["corrupt_on_read"].as_f64() {
        let r = &f["corrupt_in"];
        parts.push(format!(
            "bit rot in {} of blocks{}",
            pct_text(p),
            match (r[0].as_u64(), r[1].as_u64()) {
                (Some(a), Some(b)) => format!(" of bytes {a}-{b}"),
                _ => String::new(),
            }
        ));
    }
    if f["vanished"] == true {
        parts.push("vanished".into());
    }
    if f["full"] == true {
        parts.push("full (ENOSPC)".into());
    }
    if parts.is_empty() {
        "no faults now".into()
    } else {
        parts.join(", ")
    }
}

/// `--inject` and `--member-timeout` of offline commands.
#[derive(Args, Debug, Clone)]
pub struct InjectArgs {
    /// Failure drill: inject a fault into a member for this run only, MEMBER:KIND[=VALUE];
    /// kinds: read-errors=RANGE|PCT, write-errors=RANGE|PCT, latency=DUR[,JITTER],
    /// timeout-after=N, corrupt-on-read=PCT[@RANGE], vanish, full (repeatable; see raidctl-inject(8))
    #[arg(long, value_name = "MEMBER:KIND[=VALUE]")]
    pub inject: Vec<String>,
    /// Give up on a member that has not answered a request for this long, and fail it (as the
    /// SCSI layer's command timeout does); 0 never gives up
    #[arg(long, value_name = "DURATION", default_value = "30", value_parser = crate::units::parse_duration_or_zero)]
    pub member_timeout: u64,
}

impl InjectArgs {
    /// Assembles the array named by `args` through this run's drill: every member behind the
    /// fault table (and the member timeout), the `--inject` paths checked against the members.
    pub fn assemble(
        &self,
        args: &crate::cli::ArrayArgs,
        writable: bool,
    ) -> Result<(Drill, raidcore::Array)> {
        let drill = self.drill()?;
        let array = crate::cmd::assemble_from(args, writable, false, &drill.source())?;
        let array = drill.check_members(array)?;
        Ok((drill, array))
    }

    /// The drill of this run, with the `--inject` faults set.
    pub fn drill(&self) -> Result<Drill> {
        let mut d = Drill::new(self.member_timeout);
        d.preset(&self.inject)?;
        d.announce = !self.inject.is_empty();
        Ok(d)
    }
}

/// The path of the member `spec` names (a path, or a slot number) in `members` (the `members`
/// array of a status report).
pub fn member_path(members: &[Value], spec: &str) -> Option<PathBuf> {
    if let Ok(slot) = spec.parse::<u64>() {
        return members
            .iter()
            .find(|m| m["slot"].as_u64() == Some(slot))
            .and_then(|m| m["path"].as_str())
            .map(PathBuf::from);
    }
    let want = std::fs::canonicalize(spec).unwrap_or_else(|_| PathBuf::from(spec));
    members
        .iter()
        .filter_map(|m| m["path"].as_str())
        .map(Path::new)
        .find(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()) == want)
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(parse_where("5%").unwrap(), Where::Rate(0.05));
        assert_eq!(
            parse_where("1M-2M").unwrap(),
            Where::Range {
                start: 1 << 20,
                end: 2 << 20
            }
        );
        assert_eq!(
            parse_where("4096+8K").unwrap(),
            Where::Range {
                start: 4096,
                end: 4096 + 8192
            }
        );
        assert!(parse_where("2M-1M").is_err());
        assert!(parse_where("101%").is_err());
        assert!(parse_where("lots").is_err());
        assert_eq!(parse_latency("5ms,2ms").unwrap(), (5000, 2000));
        assert_eq!(parse_latency("200us").unwrap(), (200, 0));
        assert_eq!(parse_micros("1.5s").unwrap(), 1_500_000);
        assert!(parse_micros("-1ms").is_err());
        let (p, f) = parse_inject("/dev/loop1:read-errors=5%").unwrap();
        assert_eq!(p, PathBuf::from("/dev/loop1"));
        assert_eq!(f.read_errors, Some(Where::Rate(0.05)));
        assert!(parse_inject("m1:vanish").unwrap().1.vanished);
        assert!(parse_inject("m1:vanish=1").is_err());
        assert!(parse_inject("m1:latency").is_err());
        assert!(parse_inject("m1:melt")
            .unwrap_err()
            .contains("unknown fault"));
        assert!(parse_inject("nothing").is_err());
    }

    #[test]
    fn merging_keeps_what_the_new_faults_do_not_set() {
        let mut f = Faults {
            latency_us: Some(5),
            ..Default::default()
        };
        merge(
            &mut f,
            &Faults {
                full: true,
                ..Default::default()
            },
        );
        assert_eq!((f.latency_us, f.full), (Some(5), true));
    }
}
