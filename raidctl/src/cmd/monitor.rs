//! `raidctl monitor`: follows every array's event log (written by the daemon and by offline
//! commands, see events.rs) and acts on each new event as `mdadm --monitor` does: prints it,
//! runs a program with the event in its arguments and environment, mails it. At start, every
//! `--poll` seconds and with `--oneshot`, it also checks every array's state and reports each
//! one that turned degraded or failed. Where it
//! got to is kept in STATE_DIR/monitor.pos, so a restarted monitor misses nothing and repeats
//! nothing.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use raidcore::{Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::events::{events_dir, state_dir};

/// Watch every array's events: print them, run a program, send mail (as mdadm --monitor)
///
/// Events: member-failed, degraded, array-failed, rebuild-started, rebuild-finished,
/// rebuild-interrupted, rebuild-failed (and replace-...), scrub-finished, scrub-problems,
/// member-errors, bad-blocks, wear-warning, wear-critical; and, for arrays found unhealthy at
/// start or by --oneshot, degraded-array and failed-array.
#[derive(Args, Debug)]
pub struct MonitorArgs {
    /// Run PROGRAM for each event as `PROGRAM EVENT ARRAY-UUID MEMBER` (MEMBER empty when the
    /// event is about the whole array), with RAIDCTL_EVENT, RAIDCTL_ARRAY_UUID,
    /// RAIDCTL_ARRAY_NAME, RAIDCTL_SLOT, RAIDCTL_MEMBER, RAIDCTL_DETAIL, RAIDCTL_TIME and
    /// RAIDCTL_EVENT_JSON in its environment. It is given 60 s, then killed
    #[arg(long, value_name = "PATH")]
    pub program: Option<PathBuf>,
    /// Mail each event to ADDR through sendmail (/usr/sbin/sendmail, or RAIDCTL_SENDMAIL);
    /// refused when there is none
    #[arg(long, value_name = "ADDR")]
    pub mail: Option<String>,
    /// Handle the events logged since the last run and report arrays unhealthy now, then exit
    /// (for a timer or cron job)
    #[arg(long)]
    pub oneshot: bool,
    /// Seconds between looks at the event logs
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub interval: f64,
    /// Also look for offline arrays' members here when checking which arrays are unhealthy
    /// (repeatable; block devices are always looked at)
    #[arg(long, value_name = "DIR")]
    pub scan: Vec<PathBuf>,
    /// Seconds between checks of every array's state (a member file gone while nothing runs
    /// the array raises no event of its own); an array is reported when it turns unhealthy
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub poll: f64,
    /// Print each event as one JSON object per line
    #[arg(long)]
    pub json: bool,
    /// Seconds over which repeated member-errors and bad-blocks events of one member are
    /// coalesced for the program and mail: the first at once, then one summary with the
    /// count per window (0: every event)
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    pub coalesce: f64,
    /// Most mails an hour for member-errors and bad-blocks; those past it are counted and
    /// named in the next mail (state changes are always mailed)
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub mail_per_hour: u32,
}

/// Event kinds that come in bursts (one per error seen): coalesced. Every other kind (a
/// member failed, degraded, a rebuild) is a state change and always goes out at once.
const NOISY: [&str; 2] = ["member-errors", "bad-blocks"];

/// Repeats of one noisy event kind of one member within a window.
#[derive(serde::Serialize, serde::Deserialize)]
struct Burst {
    /// When the window opened (the event that went out), Unix seconds.
    since: u64,
    /// Events held since, and the last of them.
    held: u64,
    last: Value,
}

/// What the monitor holds back: bursts by (array, member or slot, kind), and the mail rate.
/// Kept in STATE_DIR/monitor.hold between runs, so that `--oneshot` from a timer coalesces
/// and limits across runs as a running monitor does.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Hold {
    bursts: Vec<((String, String, String), Burst)>,
    /// Times of the mails sent in the last hour (Unix seconds), and events not mailed for the
    /// limit.
    mails: std::collections::VecDeque<u64>,
    unmailed: u64,
}

fn hold_path() -> PathBuf {
    state_dir().join("monitor.hold")
}

impl Hold {
    fn load() -> Hold {
        std::fs::read(hold_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Writes the state when it differs from `saved` (what was last written), which it
    /// updates: a monitor polling every second rewrites nothing while nothing happens.
    fn save(&self, saved: &mut Vec<u8>) {
        if let Ok(b) = serde_json::to_vec(self) {
            if b == *saved {
                return;
            }
            *saved = b.clone();
            let tmp = hold_path().with_extension("hold.tmp");
            if std::fs::write(&tmp, b).is_ok() {
                let _ = std::fs::rename(&tmp, hold_path());
            }
        }
    }

    fn burst(&mut self, key: &(String, String, String)) -> Option<&mut Burst> {
        self.bursts
            .iter_mut()
            .find(|b| b.0 == *key)
            .map(|b| &mut b.1)
    }
}

/// Seconds since the epoch (RAIDCTL_NOW overrides, for tests of the windows).
fn now() -> u64 {
    raidcore::array::now_secs()
}

/// How far each log has been handled: file name to byte offset.
type Positions = BTreeMap<String, u64>;

fn pos_path() -> PathBuf {
    state_dir().join("monitor.pos")
}

fn load_positions() -> Option<Positions> {
    let raw = std::fs::read(pos_path()).ok()?;
    serde_json::from_slice(&raw).ok()
}

fn save_positions(p: &Positions) {
    let path = pos_path();
    let tmp = path.with_extension("pos.tmp");
    let ok = std::fs::create_dir_all(state_dir()).is_ok()
        && std::fs::write(&tmp, serde_json::to_vec(p).unwrap_or_default()).is_ok()
        && std::fs::rename(&tmp, &path).is_ok();
    if !ok {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "raidctl monitor: warning: cannot save {}; a restart repeats events",
                path.display()
            )
        });
    }
}

/// The current logs (not their rotated `.1` copies), by file name.
fn logs() -> Vec<(String, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(events_dir()) else {
        return Vec::new();
    };
    let mut v: Vec<(String, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.ends_with(".jsonl").then(|| (name, e.path()))
        })
        .collect();
    v.sort();
    v
}

/// New complete lines of `path` from `pos` on, each with the offset just past it, and the
/// log's inode now. The log was rotated when its inode is not `ino` (the one `pos` was read
/// in), or, without a recorded inode, when it is shorter than `pos`: then the rest of the
/// rotated copy (`.1`, when it is that file) comes first (with offsets of 0, so the position
/// moves to the new log), then the new log from its start. By size alone a new log that had
/// grown past `pos` was read from `pos`: the rest of the old one and the start of the new
/// one were skipped, member-failed events among them.
fn new_lines(path: &Path, mut pos: u64, ino: Option<u64>) -> (Vec<(Value, u64)>, Option<u64>) {
    use std::os::unix::fs::MetadataExt;
    let Ok(mut f) = std::fs::File::open(path) else {
        return (Vec::new(), ino);
    };
    let meta = f.metadata().ok();
    let (len, cur) = (
        meta.as_ref().map_or(0, |m| m.len()),
        meta.as_ref().map(|m| m.ino()),
    );
    let rotated = match (ino, cur) {
        (Some(was), Some(now)) => was != now,
        _ => len < pos,
    };
    let mut out = Vec::new();
    if rotated {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        if let Ok(mut of) = std::fs::File::open(Path::new(&old)) {
            let same = of.metadata().ok().map(|m| m.ino());
            if ino.is_none() || same == ino {
                out = read_lines(&mut of, pos)
                    .into_iter()
                    .map(|(v, _)| (v, 0))
                    .collect();
            }
        }
        pos = 0;
    }
    out.extend(read_lines(&mut f, pos));
    (out, cur)
}

/// Complete lines of `f` from `pos` on (at most 4 MiB at a time), each with the offset just
/// past it.
fn read_lines(f: &mut std::fs::File, pos: u64) -> Vec<(Value, u64)> {
    if f.seek(SeekFrom::Start(pos)).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    // Bounded: a huge backlog is taken 4 MiB at a time.
    if f.take(4 << 20).read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(n) = buf[at..].iter().position(|&b| b == b'\n') {
        let line = &buf[at..at + n];
        at += n + 1;
        // A line that does not parse (a torn write of a crashed writer) is passed over.
        let v = serde_json::from_slice(line).unwrap_or(Value::Null);
        out.push((v, pos + at as u64));
    }
    // 4 MiB without a line end is no event: passed over, not waited on for good.
    if at == 0 && buf.len() == 4 << 20 {
        out.push((Value::Null, pos + buf.len() as u64));
    }
    out
}

/// Every array found unhealthy now, as events.
fn unhealthy(scan: &[PathBuf]) -> Vec<Value> {
    let now = raidcore::array::now_secs();
    super::list::collect(scan)
        .into_iter()
        .filter(|e| e["state"] != "clean")
        .map(|e| {
            let failed = e["state"] == "failed";
            json!({
                "time": crate::output::time(now),
                "unix": now,
                "array_uuid": e["uuid"],
                "array_name": e["name"],
                "event": if failed { "failed-array" } else { "degraded-array" },
                "slot": null,
                "member": null,
                "detail": format!(
                    "state {}, {}/{} members active{}",
                    e["state"].as_str().unwrap_or("?"),
                    e["members_active"],
                    e["members_expected"],
                    e["error"].as_str().map(|x| format!(": {x}")).unwrap_or_default()
                ),
                "source": "monitor",
            })
        })
        .collect()
}

/// The mail program: RAIDCTL_SENDMAIL, else sendmail where Debian's MTAs put it.
fn sendmail() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RAIDCTL_SENDMAIL") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    ["/usr/sbin/sendmail", "/usr/lib/sendmail"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

struct Actions<'a> {
    args: &'a MonitorArgs,
    sendmail: Option<PathBuf>,
    hold: std::cell::RefCell<Hold>,
}

impl Actions<'_> {
    /// Prints `ev`; runs the program and mails it unless it repeats a burst (then it is
    /// counted, and [`Actions::flush_bursts`] sends the summary).
    fn handle(&self, ev: &Value) {
        self.print(ev);
        let s = |k: &str| ev[k].as_str().unwrap_or("").to_string();
        if self.args.coalesce > 0.0 && NOISY.contains(&s("event").as_str()) {
            let who = ev["slot"]
                .as_u64()
                .map(|x| x.to_string())
                .unwrap_or_else(|| s("member"));
            let key = (s("array_uuid"), who, s("event"));
            let mut hold = self.hold.borrow_mut();
            if let Some(b) = hold.burst(&key) {
                if (now().saturating_sub(b.since) as f64) < self.args.coalesce {
                    b.held += 1;
                    b.last = ev.clone();
                    return;
                }
            }
            hold.bursts.retain(|b| b.0 != key);
            hold.bursts.push((
                key,
                Burst {
                    since: now(),
                    held: 0,
                    last: ev.clone(),
                },
            ));
        }
        self.deliver(ev);
    }

    /// Sends the summary of every burst whose window ended, and forgets quiet ones.
    fn flush_bursts(&self) {
        let due: Vec<Value> = {
            let mut hold = self.hold.borrow_mut();
            let window = self.args.coalesce;
            let mut out = Vec::new();
            let t = now();
            hold.bursts.retain_mut(|(_, b)| {
                if (t.saturating_sub(b.since) as f64) < window {
                    return true;
                }
                if b.held == 0 {
                    return false;
                }
                let mut ev = b.last.clone();
                ev["coalesced"] = json!(b.held);
                ev["detail"] = json!(format!(
                    "{} more {} events in {:.0} s; the last: {}",
                    b.held,
                    ev["event"].as_str().unwrap_or(""),
                    t.saturating_sub(b.since),
                    ev["detail"].as_str().unwrap_or("")
                ));
                out.push(ev);
                // A new window: the next repeat is held again.
                b.since = t;
                b.held = 0;
                true
            });
            out
        };
        for ev in &due {
            self.deliver(ev);
        }
    }

    /// The program and the mail (within the hourly limit).
    fn deliver(&self, ev: &Value) {
        if let Some(p) = &self.args.program {
            self.run_program(p, ev);
        }
        if let (Some(addr), Some(sm)) = (&self.args.mail, &self.sendmail) {
            let unmailed = {
                let mut hold = self.hold.borrow_mut();
                let t = now();
                while hold
                    .mails
                    .front()
                    .is_some_and(|&m| t.saturating_sub(m) > 3600)
                {
                    hold.mails.pop_front();
                }
                // State changes (a member failed, an array degraded) are mailed whatever
                // the count; only bursts wait.
                let noisy = NOISY.contains(&ev["event"].as_str().unwrap_or(""));
                if noisy && hold.mails.len() as u32 >= self.args.mail_per_hour {
                    hold.unmailed += 1;
                    if hold.unmailed == 1 {
                        eprintln!(
                            "raidctl monitor: {} mails in the last hour: further events are counted, and named in the next mail",
                            self.args.mail_per_hour
                        );
                    }
                    return;
                }
                hold.mails.push_back(t);
                std::mem::take(&mut hold.unmailed)
            };
            self.mail(sm, addr, ev, unmailed);
        }
    }

    fn print(&self, ev: &Value) {
        // Escaped: names, paths and details come from superblocks and file names.
        let s = |k: &str| crate::output::printable(ev[k].as_str().unwrap_or(""));
        if self.args.json {
            println!("{ev}");
        } else {
            println!(
                "{} {} {} ({}){}: {}",
                s("time"),
                s("event"),
                s("array_name"),
                s("array_uuid"),
                match (ev["slot"].as_u64(), ev["member"].as_str()) {
                    (Some(slot), Some(m)) =>
                        format!(" slot {slot} {}", crate::output::printable(m)),
                    (Some(slot), None) => format!(" slot {slot}"),
                    _ => String::new(),
                },
                s("detail")
            );
        }
        let _ = std::io::stdout().flush();
    }

    fn run_program(&self, p: &Path, ev: &Value) {
        let s = |k: &str| ev[k].as_str().unwrap_or("").to_string();
        let child = std::process::Command::new(p)
            .args([s("event"), s("array_uuid"), s("member")])
            .env("RAIDCTL_EVENT", s("event"))
            .env("RAIDCTL_ARRAY_UUID", s("array_uuid"))
            .env("RAIDCTL_ARRAY_NAME", s("array_name"))
            .env(
                "RAIDCTL_SLOT",
                ev["slot"]
                    .as_u64()
                    .map(|x| x.to_string())
                    .unwrap_or_default(),
            )
            .env("RAIDCTL_MEMBER", s("member"))
            .env("RAIDCTL_DETAIL", s("detail"))
            .env("RAIDCTL_TIME", s("time"))
            .env("RAIDCTL_EVENT_JSON", ev.to_string())
            .stdin(Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                eprintln!("raidctl monitor: cannot run {}: {e}", p.display());
                return;
            }
        };
        wait_or_kill(&mut child, p, "");
    }

    fn mail(&self, sm: &Path, addr: &str, ev: &Value, unmailed: u64) {
        let s = |k: &str| ev[k].as_str().unwrap_or("").to_string();
        let skipped = if unmailed > 0 {
            format!("\n\n({unmailed} earlier events were not mailed: the limit is {} mails an hour; `raidctl monitor` printed them, and the event logs hold them)", self.args.mail_per_hour)
        } else {
            String::new()
        };
        let msg = mail_text(
            addr,
            &format!(
                "raidctl: {} on {} ({})",
                s("event"),
                s("array_name"),
                s("array_uuid")
            ),
            &format!(
                "{}{skipped}\n\n{}\n",
                s("detail"),
                serde_json::to_string_pretty(ev).unwrap_or_default()
            ),
        );
        // The recipient on the command line, not taken from the headers (-t): whatever a
        // header holds, it adds no recipient.
        let child = std::process::Command::new(sm)
            .args(["-i", "--", addr])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn();
        match child {
            Ok(mut c) => {
                if let Some(mut i) = c.stdin.take() {
                    let _ = i.write_all(msg.as_bytes());
                }
                // As the program: a hung MTA must not stop the monitor.
                wait_or_kill(&mut c, sm, ": the mail may not have gone");
            }
            Err(e) => eprintln!("raidctl monitor: sendmail: {e}"),
        }
    }
}

/// Waits up to 60 s for a program the monitor ran (the alert program, sendmail), then kills
/// it; says when it failed (with `failed_note` after the status) or was killed.
fn wait_or_kill(child: &mut std::process::Child, p: &Path, failed_note: &str) {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                if !st.success() {
                    eprintln!(
                        "raidctl monitor: {} exited with {st}{failed_note}",
                        p.display()
                    );
                }
                return;
            }
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("raidctl monitor: {} took over 60 s; killed", p.display());
                return;
            }
        }
    }
}

/// A mail message for sendmail: header values with control characters replaced (a name
/// holding "\nBcc: someone" must stay one Subject line) and folded at no point, then the body.
fn mail_text(to: &str, subject: &str, body: &str) -> String {
    let clean = |v: &str| -> String {
        v.chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .take(200)
            .collect()
    };
    format!("To: {}\nSubject: {}\n\n{body}", clean(to), clean(subject))
}

pub fn run(a: MonitorArgs) -> Result<ExitCode> {
    if !(a.poll > 0.0 && a.poll <= 86_400.0) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "--poll {} must be above 0 and at most 86400 seconds",
                a.poll
            ),
        ));
    }
    if !(a.interval > 0.0 && a.interval <= 3600.0) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "--interval {} must be above 0 and at most 3600 seconds",
                a.interval
            ),
        ));
    }
    let sendmail = sendmail();
    if let Some(addr) = &a.mail {
        // As mdadm: a monitor that cannot deliver what it is asked to is refused, not run.
        if sendmail.is_none() {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "--mail needs a sendmail program (/usr/sbin/sendmail, from any MTA: apt install msmtp-mta, or RAIDCTL_SENDMAIL=PATH); none found",
            ));
        }
        if addr.is_empty()
            || addr.starts_with('-')
            || addr.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("--mail {addr:?} is not a mail address"),
            ));
        }
    }
    if !(a.coalesce >= 0.0 && a.coalesce <= 86_400.0) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("--coalesce {} must be 0 to 86400 seconds", a.coalesce),
        ));
    }
    let act = Actions {
        args: &a,
        sendmail,
        hold: std::cell::RefCell::new(Hold::load()),
    };
    let mut saved = serde_json::to_vec(&*act.hold.borrow()).unwrap_or_default();
    // The first run ever starts at the end of the logs: their history is not news.
    let mut pos = load_positions().unwrap_or_else(|| {
        logs()
            .into_iter()
            .map(|(n, p)| (n, std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)))
            .collect()
    });
    save_positions(&pos);
    // Arrays reported unhealthy, by uuid: reported again only after they were healthy.
    let mut reported = std::collections::BTreeSet::new();
    let mut poll_state = |act: &Actions<'_>| {
        let now: Vec<Value> = unhealthy(&a.scan);
        let uuids: std::collections::BTreeSet<String> = now
            .iter()
            .filter_map(|e| e["array_uuid"].as_str().map(str::to_string))
            .collect();
        for ev in &now {
            if let Some(u) = ev["array_uuid"].as_str() {
                if !reported.contains(u) {
                    act.handle(ev);
                }
            }
        }
        reported = uuids;
    };
    poll_state(&act);
    let mut last_poll = Instant::now();
    loop {
        if !a.oneshot && last_poll.elapsed().as_secs_f64() >= a.poll {
            last_poll = Instant::now();
            poll_state(&act);
        }
        for (name, path) in logs() {
            let from = *pos.entry(name.clone()).or_insert(0);
            let ino_key = format!("{name}.inode");
            let (lines, ino) = new_lines(&path, from, pos.get(&ino_key).copied());
            if let Some(i) = ino {
                if pos.get(&ino_key) != Some(&i) {
                    pos.insert(ino_key.clone(), i);
                    if lines.is_empty() {
                        save_positions(&pos);
                    }
                }
            }
            for (ev, end) in lines {
                if !ev.is_null() {
                    act.handle(&ev);
                }
                // Recorded after each event: a monitor stopped now repeats none it handled.
                pos.insert(name.clone(), end);
                save_positions(&pos);
            }
        }
        act.flush_bursts();
        act.hold.borrow().save(&mut saved);
        if a.oneshot {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_secs_f64(a.interval));
    }
}
