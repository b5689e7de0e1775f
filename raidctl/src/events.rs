//! The event log: what happened to each array (a member failed, the array degraded, a rebuild
//! started or finished, a scrub found problems, blocks went on the bad-block list, wear passed
//! a threshold), appended as one JSON object per line to `STATE_DIR/events/UUID.jsonl` by every
//! raidctl process that runs the array (the daemon and offline commands), and printed to
//! stderr by the daemon (the journal, under systemd). `raidctl monitor` reads the logs. A log
//! is bounded: past 1 MiB it becomes `UUID.jsonl.1` (replacing the previous one).

use std::io::Write;
use std::path::PathBuf;

use serde_json::{json, Value};

/// Bytes a log grows to before it is rotated.
const MAX_LOG: u64 = 1 << 20;

/// Where raidctl keeps state that outlives a process (event logs, the monitor's position):
/// `RAIDCTL_STATE_DIR`, or /var/lib/raidctl.
pub fn state_dir() -> PathBuf {
    std::env::var_os("RAIDCTL_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/raidctl"))
}

pub fn events_dir() -> PathBuf {
    state_dir().join("events")
}

/// Whether this process is the serving daemon (its events also go to stderr).
static DAEMON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sends every array event of this process to the log (called once at start).
pub fn install(daemon: bool) {
    DAEMON.store(daemon, std::sync::atomic::Ordering::Relaxed);
    raidcore::array::events::set_sink(|e| {
        record(
            &crate::output::uuid(&e.array_uuid),
            &e.array_name,
            e.kind,
            e.slot,
            e.member.as_deref(),
            &e.detail,
        )
    });
}

/// Appends one event to its array's log. Failing to log never fails the operation: the
/// state directory may be read-only or absent (a warning says so, once).
pub fn record(
    uuid: &str,
    name: &str,
    kind: &str,
    slot: Option<usize>,
    member: Option<&str>,
    detail: &str,
) {
    let now = raidcore::array::now_secs();
    let daemon = DAEMON.load(std::sync::atomic::Ordering::Relaxed);
    let v = json!({
        "time": crate::output::time(now),
        "unix": now,
        "array_uuid": uuid,
        "array_name": name,
        "event": kind,
        "slot": slot,
        "member": member,
        "detail": detail,
        "source": if daemon { "serve" } else { "command" },
        "pid": std::process::id(),
    });
    if daemon {
        eprintln!(
            "raidctl serve: event {kind}{}{}: {detail}",
            slot.map(|s| format!(" slot {s}")).unwrap_or_default(),
            member.map(|m| format!(" ({m})")).unwrap_or_default()
        );
    }
    if let Err(e) = append(uuid, &v) {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "raidctl: warning: cannot write the event log under {}: {e}",
                events_dir().display()
            )
        });
    }
}

fn append(uuid: &str, v: &Value) -> std::io::Result<()> {
    let dir = events_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{uuid}.jsonl"));
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_LOG) {
        std::fs::rename(&path, dir.join(format!("{uuid}.jsonl.1")))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    // One write per line: O_APPEND keeps lines of concurrent writers whole.
    let mut line = v.to_string();
    line.push('\n');
    f.write_all(line.as_bytes())
}
