//! The event log: what happened to each array (a member failed, the array degraded, a rebuild
//! started or finished, a scrub found problems, blocks went on the bad-block list, wear passed
//! a threshold), appended as one JSON object per line to `STATE_DIR/events/UUID.jsonl` by every
//! raidctl process that runs the array (the daemon and offline commands), sent to syslog(3)
//! (the journal, where systemd runs) by every one, and printed to stderr by the daemon. `raidctl monitor` reads the logs. A log
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
    let text = format!(
        "event {kind} array {name} ({uuid}){}{}: {detail}",
        slot.map(|s| format!(" slot {s}")).unwrap_or_default(),
        member.map(|m| format!(" ({m})")).unwrap_or_default()
    );
    if daemon {
        eprintln!("raidctl serve: {text}");
    }
    syslog(kind, &text);
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

/// Sends the event to syslog(3) (the journal, where systemd runs), from every raidctl process:
/// warnings for what needs an admin, notices for the rest.
fn syslog(kind: &str, text: &str) {
    let level = match kind {
        "member-failed" | "degraded" | "array-failed" | "bad-blocks" | "scrub-problems"
        | "rebuild-failed" | "replace-failed" | "member-errors" | "wear-warning"
        | "wear-critical" => libc::LOG_WARNING,
        _ => libc::LOG_NOTICE,
    };
    let Ok(msg) = std::ffi::CString::new(text.replace('\0', " ")) else {
        return;
    };
    static IDENT: &std::ffi::CStr = c"raidctl";
    // SAFETY: openlog keeps the pointer to IDENT, a 'static C string; syslog gets a "%s"
    // format and one NUL-terminated argument that outlives the call.
    unsafe {
        libc::openlog(IDENT.as_ptr(), libc::LOG_PID, libc::LOG_DAEMON);
        libc::syslog(level, c"%s".as_ptr(), msg.as_ptr());
    }
}

fn append(uuid: &str, v: &Value) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dir = events_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{uuid}.jsonl"));
    let mut line = v.to_string();
    line.push('\n');
    for _ in 0..8 {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        // Writers of one log (the daemon, offline commands, concurrent jobs) take turns, so a
        // rotation never moves another writer's fresh log over the rotated one.
        let mut f = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| std::io::Error::from_raw_os_error(e as i32))?;
        let here = f.metadata()?;
        if std::fs::metadata(&path).map(|m| m.ino()).ok() != Some(here.ino()) {
            continue; // rotated while we waited: write to the new log
        }
        if here.len() > MAX_LOG {
            std::fs::rename(&path, dir.join(format!("{uuid}.jsonl.1")))?;
            continue;
        }
        // One write per line: O_APPEND keeps lines of concurrent writers whole.
        return f.write_all(line.as_bytes());
    }
    Err(std::io::Error::other("the event log kept being rotated"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writers racing at a rotation: exactly one rotates, the rest append to the new log (two
    /// rotating at once moved a fresh log over the rotated one, losing lines).
    #[test]
    fn concurrent_writers_at_a_rotation_lose_no_line() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: this test binary's only user of RAIDCTL_STATE_DIR.
        unsafe { std::env::set_var("RAIDCTL_STATE_DIR", dir.path()) };
        std::fs::create_dir_all(events_dir()).unwrap();
        let log = events_dir().join("u.jsonl");
        std::fs::write(&log, vec![b'x'; MAX_LOG as usize + 1]).unwrap();
        std::thread::scope(|s| {
            for t in 0..8 {
                s.spawn(move || {
                    for i in 0..50 {
                        append("u", &json!({"t": t, "i": i})).unwrap();
                    }
                });
            }
        });
        let new = std::fs::read_to_string(&log).unwrap();
        assert_eq!(new.lines().count(), 400);
        let old = std::fs::metadata(events_dir().join("u.jsonl.1")).unwrap();
        assert_eq!(old.len(), MAX_LOG + 1, "the rotated log was replaced");
    }
}
