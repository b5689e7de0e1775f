//! `raidctl assemble --scan`: serve every array found (as `mdadm --assemble --scan` and
//! `zpool import -a`), or those a config file lists, each by a `raidctl serve` daemon of its
//! own; one boot unit for all arrays (contrib/raidctl-assemble.service).

use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use raidcore::{Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::output::uuid;

/// The config file read when it exists and --config is not given.
const DEFAULT_CONFIG: &str = "/etc/raidctl.conf";

/// Serve every array found on block devices (and --dir locations) that nothing serves yet
///
/// With a config file (/etc/raidctl.conf, or --config), only the arrays it lists, one per
/// line as `ARRAY <uuid> [serve flags]` (e.g. `ARRAY 3f0c... --ublk --ublk-id 0`); `#`
/// starts a comment. Each array gets a `raidctl serve` daemon of its own, started in a new
/// session with its output in RUN_DIR/UUID.log; an array a daemon already serves is left as
/// it is. A member the array failed or replaced out (its superblock still names the array) is
/// passed over.
#[derive(Args, Debug)]
pub struct AssembleArgs {
    /// Look for arrays (required: the only mode so far)
    #[arg(long, required = true)]
    pub scan: bool,
    /// Also look for members here: a directory or a path (repeatable); block devices are
    /// always looked at
    #[arg(long, value_name = "DIR")]
    pub dir: Vec<PathBuf>,
    /// Serve only the arrays this file lists (default /etc/raidctl.conf, when it exists)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Say what would be served; start nothing. Each array is assembled read-only to check it:
    /// one whose assembly would be refused (a split brain, only stale members) is reported as
    /// would-fail, with the reason
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds to wait for each daemon to answer (assembly may resync first)
    #[arg(long, value_name = "SECS", default_value_t = 120.0)]
    pub timeout: f64,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// One array a config file names, with the flags its daemon gets.
#[derive(Debug, PartialEq)]
struct Listed {
    uuid: [u8; 16],
    flags: Vec<String>,
}

/// Parses a config file: `ARRAY <uuid> [serve flags]` lines, `#` comments, blank lines.
fn parse_config(text: &str, name: &str) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: String| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("{name}, line {}: {why}", i + 1),
            )
        };
        let mut words = line.split_whitespace();
        match words.next() {
            Some("ARRAY") => {}
            Some(w) => return Err(bad(format!("{w:?}: lines start with ARRAY"))),
            None => continue,
        }
        let u = words
            .next()
            .ok_or_else(|| bad("ARRAY needs the array's uuid".into()))?;
        let u = uuid::Uuid::parse_str(u.strip_prefix("UUID=").unwrap_or(u))
            .map_err(|e| bad(format!("{u} is not a uuid: {e}")))?;
        let flags: Vec<String> = words.map(str::to_string).collect();
        if let Some(f) = flags
            .iter()
            .find(|f| !f.starts_with("--") && f.contains('/'))
        {
            // A member path among the flags would be taken as the array to serve.
            return Err(bad(format!(
                "{f}: give serve flags only (the array is named by its uuid)"
            )));
        }
        if out.iter().any(|l: &Listed| l.uuid == *u.as_bytes()) {
            return Err(bad(format!("array {u} is listed twice")));
        }
        out.push(Listed {
            uuid: *u.as_bytes(),
            flags,
        });
    }
    Ok(out)
}

/// Checks that `serve FLAGS MEMBER` parses as a serve of `member` and nothing else: a
/// config line's "flags" once named another array (`UUID=...`) and started a daemon for it.
fn check_flags(flags: &[String], member: &Path) -> Result<()> {
    use clap::Parser;
    let mut argv = vec!["raidctl".to_string(), "serve".into()];
    argv.extend(flags.iter().cloned());
    argv.push(member.display().to_string());
    let bad = |why: String| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("serve flags {:?}: {why}", flags.join(" ")),
        )
    };
    match crate::cli::Cli::try_parse_from(&argv) {
        Ok(cli) => match cli.command {
            crate::cli::Command::Serve(s) if s.array.array == member => Ok(()),
            _ => Err(bad(format!(
                "they name an array other than {} (give serve flags only)",
                member.display()
            ))),
        },
        Err(e) => Err(bad(e
            .to_string()
            .lines()
            .next()
            .unwrap_or("not serve flags")
            .trim_start_matches("error: ")
            .to_string())),
    }
}

/// Whether a daemon answers on the array's control socket.
fn served(u: &str) -> bool {
    UnixStream::connect(crate::daemon::control_path(u)).is_ok()
}

/// Starts `raidctl serve MEMBER FLAGS` in a session of its own and waits for its control
/// socket (or its exit). Returns its pid, or why it did not start.
fn start(member: &Path, u: &str, flags: &[String], timeout: f64) -> Result<u32> {
    let run = crate::daemon::run_dir();
    std::fs::create_dir_all(&run)
        .map_err(|e| Error::io(e, "create", &run.display().to_string(), 0))?;
    let log_path = run.join(format!("{u}.log"));
    let log = std::fs::File::create(&log_path)
        .map_err(|e| Error::io(e, "create", &log_path.display().to_string(), 0))?;
    let exe = std::env::current_exe().map_err(|e| Error::io(e, "find", "raidctl", 0))?;
    let mut cmd = Command::new(exe);
    cmd.arg("serve")
        .args(flags)
        .arg(member)
        .stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|e| Error::io(e, "dup", &log_path.display().to_string(), 0))?,
        )
        .stderr(log);
    // SAFETY: setsid(2) only, between fork and exec: async-signal-safe, touches no memory
    // of the parent. The daemon outlives this command and its terminal.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io(e, "start", "raidctl serve", 0))?;
    let end = Instant::now() + Duration::from_secs_f64(timeout);
    loop {
        if served(u) {
            return Ok(child.id());
        }
        if let Ok(Some(st)) = child.try_wait() {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "raidctl serve exited ({st}): {last} (whole output in {})",
                    log_path.display()
                ),
            ));
        }
        if Instant::now() >= end {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "raidctl serve (pid {}) did not answer within {timeout} s; it goes on (assembly may be resyncing): see {}",
                    child.id(),
                    log_path.display()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn run(a: AssembleArgs) -> Result<ExitCode> {
    if !(a.timeout > 0.0 && a.timeout <= 86_400.0) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "--timeout {} must be above 0 and at most 86400 seconds",
                a.timeout
            ),
        ));
    }
    let config = match &a.config {
        Some(p) => Some(p.clone()),
        None => Some(PathBuf::from(DEFAULT_CONFIG)).filter(|p| p.exists()),
    };
    let listed = match &config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::io(e, "read", &p.display().to_string(), 0))?;
            Some(parse_config(&text, &p.display().to_string())?)
        }
        None => None,
    };
    // One assemble at a time: two would both start a daemon for the same array.
    let run = crate::daemon::run_dir();
    std::fs::create_dir_all(&run)
        .map_err(|e| Error::io(e, "create", &run.display().to_string(), 0))?;
    let lock_path = run.join("assemble.lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| Error::io(e, "create", &lock_path.display().to_string(), 0))?;
    // Held until this command ends.
    let _lock =
        nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| {
            Error::io(
                std::io::Error::from_raw_os_error(e as i32),
                "lock",
                &lock_path.display().to_string(),
                0,
            )
        })?;
    let found = raidcore::array::discover(&raidcore::array::Files, &a.dir);
    // The arrays to serve, in the order found (or listed), each with its flags.
    let mut wanted: Vec<([u8; 16], Vec<String>)> = Vec::new();
    match &listed {
        Some(l) => wanted.extend(l.iter().map(|x| (x.uuid, x.flags.clone()))),
        None => {
            for d in &found {
                if !wanted.iter().any(|w| w.0 == d.array_uuid) {
                    wanted.push((d.array_uuid, Vec::new()));
                }
            }
        }
    }
    let mut report = Vec::new();
    let mut failed = 0;
    let mut pids = Vec::new();
    for (au, flags) in &wanted {
        let u = uuid(au);
        let name = found
            .iter()
            .find(|d| d.array_uuid == *au)
            .map(|d| d.name.clone());
        let member = raidcore::array::member_to_assemble(&found, au);
        let checked = member.as_deref().map(|m| check_flags(flags, m));
        let (action, detail) = match (&member, served(&u)) {
            (Some(_), _) if matches!(checked, Some(Err(_))) => {
                failed += 1;
                let e = checked.and_then(|c| c.err()).map(|e| e.to_string());
                ("failed", e.unwrap_or_default())
            }
            (None, _) => {
                failed += 1;
                (
                    "not-found",
                    "no member of it on any block device or --dir location".to_string(),
                )
            }
            (Some(_), true) => (
                "already-served",
                "a daemon answers on its control socket".into(),
            ),
            // A dry run assembles read-only, without locks, so that what serve would refuse
            // (a split brain, only stale members) says so instead of "would-serve".
            (Some(m), false) if a.dry_run => match raidcore::Array::open(
                m,
                &raidcore::array::AssembleOptions {
                    writable: false,
                    scan: a.dir.clone(),
                    allow_failed: false,
                    force: flags.iter().any(|f| f == "--force-assemble"),
                    unlocked: true,
                },
            ) {
                Ok(_) => (
                    "would-serve",
                    format!("raidctl serve {} {}", flags.join(" "), m.display()),
                ),
                Err(e) => {
                    failed += 1;
                    ("would-fail", e.to_string())
                }
            },
            (Some(m), false) => match start(m, &u, flags, a.timeout) {
                Ok(pid) => {
                    pids.push((u.clone(), pid));
                    (
                        "served",
                        format!("raidctl serve pid {pid} from {}", m.display()),
                    )
                }
                Err(e) => {
                    failed += 1;
                    ("failed", e.to_string())
                }
            },
        };
        report.push(json!({
            "uuid": u,
            "name": name,
            "member": member.map(|m| m.display().to_string()),
            "flags": flags,
            "action": action,
            "detail": detail,
            "pid": pids.iter().find(|p| p.0 == u).map(|p| p.1),
        }));
    }
    let v = json!({
        "config": config.map(|p| p.display().to_string()),
        "arrays": report,
    });
    if a.json {
        crate::output::print_json(&v);
    } else if report_is_empty(&v) {
        println!("no arrays found");
    } else {
        for r in v["arrays"].as_array().into_iter().flatten() {
            println!(
                "{} {} ({}): {}",
                r["action"].as_str().unwrap_or(""),
                crate::output::printable(r["name"].as_str().unwrap_or("?")),
                r["uuid"].as_str().unwrap_or(""),
                crate::output::printable(r["detail"].as_str().unwrap_or(""))
            );
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(crate::exit::FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}

fn report_is_empty(v: &Value) -> bool {
    v["arrays"].as_array().is_none_or(|a| a.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_lists_arrays_with_their_flags_and_names_bad_lines() {
        let text = "# boot arrays\n\nARRAY 3f0c2a1e-0000-4000-8000-000000000001 --ublk --ublk-id 0\nARRAY UUID=3f0c2a1e-0000-4000-8000-000000000002 # socket\n";
        let l = parse_config(text, "c").unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].flags, vec!["--ublk", "--ublk-id", "0"]);
        assert!(l[1].flags.is_empty());
        let e = parse_config("ARRAY nope\n", "c").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("not a uuid"), "{e}");
        let e = parse_config("DEVICE /dev/sdb\n", "c")
            .unwrap_err()
            .to_string();
        assert!(e.contains("start with ARRAY"), "{e}");
        let e = parse_config("ARRAY 3f0c2a1e-0000-4000-8000-000000000001 /dev/sdb\n", "c")
            .unwrap_err()
            .to_string();
        assert!(e.contains("serve flags only"), "{e}");
    }
}
