//! The serving daemon: owns an assembled array, exports it over NBD (Unix socket, or TCP when
//! asked), answers the control socket, runs rebuilds in the background (a hot spare starts as
//! soon as a member fails), and on SIGTERM or SIGINT stops accepting, finishes in-flight
//! requests, flushes and marks the array clean. With --nbd-device it also attaches the export
//! to the kernel's nbd driver (crate::nbd_device), with --ublk it runs a ublk device
//! (crate::ublk); both are taken down first on stop.

use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::protocol::{Line, Request};
use raidcore::jobs::rebuild::{self, RebuildOptions};
use raidcore::{Array, Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::nbd::{self, Conn, Export};
use crate::nbd_device::KernelNbd;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Turns SIGTERM and SIGINT into a stop request ([`stop_requested`]); SIGPIPE is ignored.
pub(crate) fn install_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe; SIGPIPE is
    // ignored so a vanished client is an EPIPE error, not a dead server.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Blocks SIGTERM and SIGINT in the calling thread (and the threads it starts), so they reach
/// the daemon's own threads and never interrupt a kernel wait that must not be cut short.
pub(crate) fn block_stop_signals() {
    // SAFETY: sigset_t is plain data initialised by sigemptyset before use, and
    // pthread_sigmask only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// True once SIGTERM or SIGINT arrived (after [`install_signals`]).
pub(crate) fn stop_requested() -> bool {
    STOP.load(Ordering::Acquire)
}

/// Slot, path and state of every member: what needs no lock a member request holds (no
/// superblock), so it answers while a request hangs in a member.
fn member_list(a: &Array) -> Vec<Value> {
    a.members()
        .into_iter()
        // Absolute: a client in another directory compares them with its own paths (a
        // daemon started as `serve m0` named its members relative to where it started).
        // Shown lossily where a path is not UTF-8 (JSON carries text): `id` (device and
        // inode) is what names the member exactly (control.rs `daemon_for`).
        .map(|m| {
            let path = m.path.map(|p| std::path::absolute(&p).unwrap_or(p));
            let id = path.as_deref().and_then(crate::control::identity);
            json!({"slot": m.slot, "path": path.map(|p| p.display().to_string()), "id": id, "state": m.state.name()})
        })
        .collect()
}

/// Where the daemon of an array keeps its sockets.
pub fn run_dir() -> PathBuf {
    std::env::var_os("RAIDCTL_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/raidctl"))
}

/// The control socket of the array with this uuid.
pub fn control_path(uuid: &str) -> PathBuf {
    run_dir().join(format!("{uuid}.ctl"))
}

/// Held partial-row writes older than this are written out by the serving daemon.
const WRITE_BACK_AGE: Duration = Duration::from_secs(1);

/// What the daemon was asked to do.
pub struct ServeConfig {
    pub socket: Option<PathBuf>,
    pub listen: Option<String>,
    pub export: String,
    pub readonly: bool,
    pub rebuild_rate: Option<u64>,
    /// `serve --min-rate` (None: the default; 0: jobs never yield).
    pub rebuild_min_rate: Option<u64>,
    pub keep_roles: bool,
    /// Fault injection (`raidctl inject`) and the member timeout; every member goes through it.
    pub drill: crate::inject::Drill,
    /// Attach the export to this kernel's nbd driver as this device.
    pub nbd_device: Option<PathBuf>,
    /// Serve the export as a ublk device too.
    pub ublk: Option<crate::ublk::UblkOptions>,
    /// What `status` says of the hardening (crate::harden), when it was asked for.
    pub hardening: Option<Value>,
}

struct Daemon {
    array: Arc<Array>,
    export: Arc<Export>,
    /// How to end each live client's request stream, by connection number.
    conns: Mutex<std::collections::HashMap<u64, Box<dyn Fn() + Send>>>,
    next_conn: std::sync::atomic::AtomicU64,
    rebuild_wanted: AtomicBool,
    /// The `--max-rate` of the add, replace or rebuild that asked for the next job, if any
    /// (else `serve --max-rate`).
    job_rate: Mutex<Option<u64>>,
    /// Its `--min-rate`, likewise (else `serve --min-rate`).
    job_min_rate: Mutex<Option<u64>>,
    config: ServeConfig,
    /// What `status` says about this daemon: pid, control socket, NBD addresses.
    served_by: Value,
    /// When the running rebuild or replace began and its progress then (for the ETA).
    job_clock: Mutex<Option<(std::time::Instant, f64)>>,
}

fn bind_unix(path: &Path) -> Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(e, "mkdir", &dir.display().to_string(), 0))?;
    }
    if let Ok(md) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        // Only a socket is ever replaced: a member, or any other file, is left alone.
        if !md.file_type().is_socket() {
            return Err(Error::new(
                ErrorKind::InUse,
                format!(
                    "{} exists and is not a socket; refusing to replace it (choose another --socket path)",
                    path.display()
                ),
            ));
        }
        // A live daemon answers; a stale socket file from a crash does not and is replaced.
        if UnixStream::connect(path).is_ok() {
            return Err(Error::new(
                ErrorKind::Busy,
                format!("{} is in use by a running server", path.display()),
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    let l = UnixListener::bind(path)
        .map_err(|e| Error::io(e, "bind", &path.display().to_string(), 0))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io(e, "chmod", &path.display().to_string(), 0))?;
    l.set_nonblocking(true)
        .map_err(|e| Error::io(e, "nonblock", &path.display().to_string(), 0))?;
    Ok(l)
}

/// A typed answer as the control protocol carries it.
fn answer(v: &impl serde::Serialize) -> std::result::Result<Value, Error> {
    Ok(serde_json::to_value(v).expect("an answer encodes"))
}

impl Daemon {
    /// Serves one connection in a thread of its own: a client (handshake first), or with
    /// `handshake` false the kernel's nbd driver, which was given size and flags by ioctl.
    fn spawn_client(
        self: &Arc<Self>,
        conn: Box<dyn Conn>,
        shutdown: Box<dyn Fn() + Send>,
        handshake: bool,
    ) {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        self.conns.lock().expect("conns lock").insert(id, shutdown);
        let export = self.export.clone();
        let me = self.clone();
        std::thread::spawn(move || {
            let r = if handshake {
                nbd::serve_client(conn, export)
            } else {
                nbd::serve_transmission(conn, export)
            };
            if let Err(e) = r {
                if e.kind() != std::io::ErrorKind::UnexpectedEof
                    && e.kind() != std::io::ErrorKind::BrokenPipe
                {
                    eprintln!("raidctl serve: client: {e}");
                }
            }
            me.conns.lock().expect("conns lock").remove(&id);
        });
    }

    fn control(self: &Arc<Self>, req: Request) -> std::result::Result<Value, Error> {
        let a = &self.array;
        let rates = |max: Option<u64>, min: Option<u64>| {
            *self.job_rate.lock().expect("job rate lock") = max;
            *self.job_min_rate.lock().expect("job rate lock") = min;
        };
        match req {
            Request::Status {} => {
                let mut r = crate::cmd::status::report(a);
                r["served_by"] = self.served_by.clone();
                // No offline command holds a served array: the daemon does.
                r["in_use_by"] = Value::Null;
                r["injected"] = self.config.drill.json();
                // The daemon runs every pending rebuild and replace itself.
                r["job"] = crate::cmd::status::job_json(&r, true);
                if let (Some(p), Some((t0, p0))) = (
                    r["job"]["progress"].as_f64(),
                    *self.job_clock.lock().expect("job clock lock"),
                ) {
                    let secs = t0.elapsed().as_secs_f64();
                    if p > p0 && secs >= 1.0 {
                        r["job"]["eta_seconds"] = json!(((1.0 - p) * secs / (p - p0)).round());
                    }
                }
                Ok(r)
            }
            Request::Fail {
                member,
                max_rate,
                min_rate,
            } => {
                let m = raidcore::array::MemberRef::parse_resolved(&member);
                // The rates first: the supervisor may start the hot spare's rebuild at once.
                rates(max_rate, min_rate);
                let slot = a.fail(&m)?;
                self.rebuild_wanted.store(true, Ordering::Release);
                answer(&crate::protocol::Failed::of(a, slot))
            }
            Request::Remove { member } => {
                a.remove(&raidcore::array::MemberRef::parse_resolved(&member))?;
                answer(&crate::protocol::Removed {
                    state: a.state().name().to_string(),
                })
            }
            Request::Add {
                ref new,
                force,
                endurance_bytes,
                max_rate,
                min_rate,
            } => {
                let member = self.joining(new, force)?;
                // The rates before the target exists: the supervisor may start its job at once.
                rates(max_rate, min_rate);
                let slot = a.add(member, new, endurance_bytes)?;
                self.rebuild_wanted.store(true, Ordering::Release);
                answer(&crate::protocol::Added::of(a, slot))
            }
            Request::Replace {
                ref old,
                ref new,
                force,
                endurance_bytes,
                keep_roles,
                max_rate,
                min_rate,
            } => {
                let member = self.joining(new, force)?;
                rates(max_rate, min_rate);
                let keep = keep_roles.unwrap_or(self.config.keep_roles);
                let old = raidcore::array::MemberRef::parse_resolved(old);
                let change = a.replace(&old, member, new, endurance_bytes, keep)?;
                self.rebuild_wanted.store(true, Ordering::Release);
                answer(&crate::protocol::Replacing {
                    role_change: change.map(|c| c.description),
                })
            }
            Request::Inject {
                member,
                faults,
                clear,
                return_,
            } => self.inject(member.as_deref(), &faults, clear, return_),
            Request::Members {} => Ok(json!({"members": member_list(a)})),
            Request::Rebuild { max_rate, min_rate } => {
                rates(max_rate, min_rate);
                self.rebuild_wanted.store(true, Ordering::Release);
                answer(&crate::protocol::RebuildStarted::of(a))
            }
            Request::Scrub {
                repair,
                max_rate,
                min_rate,
                include_empty,
            } => crate::cmd::scrub::scrub_json(
                a,
                repair,
                max_rate,
                min_rate.or(self.config.rebuild_min_rate),
                include_empty,
            ),
            Request::Wear(w) => {
                let opts = crate::cmd::wear::WearOpts::from_request(&w);
                opts.validate()?;
                crate::cmd::wear::report_json(a, &opts, w.collision_days)
            }
            Request::WearRecord(w) => {
                let opts = crate::cmd::wear::WearOpts::from_request(&w);
                opts.validate()?;
                crate::cmd::wear::record_json(a, &opts, w.collision_days)
            }
            Request::Clear { member } => {
                let m = member.map(|m| raidcore::array::MemberRef::parse_resolved(&m));
                answer(&crate::protocol::Cleared::from(a.clear_errors(m.as_ref())?))
            }
            Request::SetEndurance {
                member,
                endurance_bytes,
            } => {
                let m = raidcore::array::MemberRef::parse_resolved(&member);
                a.set_endurance(&m, endurance_bytes)?;
                answer(&crate::protocol::EnduranceSet { endurance_bytes })
            }
        }
    }

    /// The device `add` or `replace` brings in: a member of this array taken back, or a new
    /// device (checked as create checks it) put behind the drill table.
    fn joining(
        &self,
        new: &std::path::Path,
        force: bool,
    ) -> std::result::Result<Arc<dyn raidcore::device::Member>, Error> {
        let a = &self.array;
        // Added back: a member the timeout gave up on is answered again.
        if let Some(st) = self.config.drill.table.get(new) {
            st.forgive();
        }
        // A member taken back is the one the array had, already behind the drill table; a new
        // device is put behind it here.
        Ok(match a.take_failed(new) {
            Some(m) => m,
            None => self.config.drill.table.wrap(
                new,
                crate::cmd::add::open_new(a, &new.to_path_buf(), force)?,
            ),
        })
    }

    /// `raidctl inject`: sets, adds to or clears a member's faults; `return` brings a vanished
    /// member back, and adds it again when the array failed it meanwhile (it is stale: rebuilt).
    /// It reads only what no member request holds (member paths and states, not the
    /// superblock): a request hung in a member may hold the superblock's lock, and `--clear`
    /// is what releases it.
    fn inject(
        &self,
        member: Option<&str>,
        add: &raidcore::device::inject::Faults,
        clear: bool,
        return_: bool,
    ) -> std::result::Result<Value, Error> {
        let a = &self.array;
        let table = &self.config.drill.table;
        let members = member_list(a);
        // A member, or any path the table holds (a member the array no longer lists, such as
        // one failed out by the timeout and taken out to be re-added, can still be cleared).
        let path = match member {
            None => None,
            Some(spec) => Some(
                crate::inject::member_path(&members, spec)
                    .or_else(|| {
                        table
                            .get(std::path::Path::new(spec))
                            .map(|s| s.path().to_path_buf())
                    })
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::InvalidInput,
                            format!("{spec} is not a member of this array (give its path or slot)"),
                        )
                    })?,
            ),
        };
        if clear {
            match &path {
                Some(p) => table.state(p).clear(),
                None => table.all().iter().for_each(|s| s.clear()),
            }
            let path = path.map(|p| p.display().to_string());
            return Ok(json!({"cleared": path, "injected": crate::inject::table_json(table)}));
        }
        let Some(path) = path else {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "name the member to inject into (its path or slot)",
            ));
        };
        let st = table.state(&path);
        let mut f = st.faults();
        crate::inject::merge(&mut f, add);
        f.validate()
            .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("bad fault: {e}")))?;
        // A range that lies below the data area drills the metadata only.
        let data_offset = a.data_offset_of();
        let mut notes = Vec::new();
        for (what, w) in [
            ("read errors", add.read_errors),
            ("write errors", add.write_errors),
        ] {
            if let Some(raidcore::device::inject::Where::Range { end, .. }) = w {
                if end <= data_offset {
                    notes.push(format!(
                        "the {what} range ends before the data area (member offset {data_offset}): it hits metadata only"
                    ));
                }
            }
        }
        let mut re_added = None;
        // The listed member that is this path: by device and inode (a member reached through
        // a symlink, as /dev/disk/by-id names are, is listed by the link).
        let me = crate::control::identity(&path);
        let same = |m: &Value| {
            me.is_some()
                && m["id"][0].as_u64() == me.map(|x| x.0)
                && m["id"][1].as_u64() == me.map(|x| x.1)
        };
        if return_ {
            f.vanished = false;
            st.set(f.clone());
            if members.iter().any(|m| same(m) && m["state"] == "faulty") {
                if let Some(m) = a.take_failed(&path) {
                    st.forgive();
                    let slot = a.add(m, &path, None)?;
                    self.rebuild_wanted.store(true, Ordering::Release);
                    re_added = slot;
                }
            }
        } else {
            st.set(f.clone());
        }
        let slot = members
            .iter()
            .find(|m| same(m))
            .and_then(|m| m["slot"].as_u64())
            .map(|s| s as usize);
        let detail = format!(
            "{}: {}{}",
            path.display(),
            crate::inject::describe(&serde_json::to_value(&f).unwrap_or_default()),
            if re_added.is_some() {
                "; returned and added back (stale: rebuilt)"
            } else {
                ""
            }
        );
        // Raised from its own thread: an event reads the superblock's name, whose lock a hung
        // member request may hold until the member timeout; the answer does not wait for it.
        let array = self.array.clone();
        std::thread::spawn(move || array.raise("drill", slot, detail));
        Ok(
            json!({"member": path.display().to_string(), "faults": f, "re_added_slot": re_added, "notes": notes, "injected": crate::inject::table_json(table)}),
        )
    }

    fn serve_control(self: &Arc<Self>, stream: UnixStream) {
        let _ = stream.set_nonblocking(false);
        let mut reader = BufReader::new(match stream.try_clone() {
            Ok(s) => s,
            Err(_) => return,
        });
        let mut stream = stream;
        loop {
            let answer = match crate::protocol::read_request(&mut reader) {
                Line::End => return,
                Line::Request(req) => match self.control(req) {
                    Ok(v) => json!({"ok": true, "result": v}),
                    Err(e) => {
                        json!({"ok": false, "error": e.to_string(), "exit": crate::exit::code_for(e.kind())})
                    }
                },
                Line::Bad(e) => json!({"ok": false, "error": e, "exit": crate::exit::USAGE}),
                Line::TooLong => {
                    let e = format!(
                        "bad request: longer than {} bytes; closing the connection",
                        crate::protocol::MAX_LINE
                    );
                    let _ = writeln!(
                        stream,
                        "{}",
                        json!({"ok": false, "error": e, "exit": crate::exit::USAGE})
                    );
                    return;
                }
            };
            if writeln!(stream, "{answer}").is_err() {
                return;
            }
        }
    }

    /// Raises an event for every member whose read or checksum error counters grew since the
    /// last look (`seen`: per member uuid, the counters then).
    fn error_events(&self, seen: &mut std::collections::HashMap<[u8; 16], (u64, u64)>) {
        for m in self.array.members() {
            let now = (m.read_errors, m.checksum_errors);
            let before = seen.insert(m.uuid, now).unwrap_or(now);
            if now.0 > before.0 || now.1 > before.1 {
                self.array.raise(
                    "member-errors",
                    m.slot,
                    format!(
                        "{} new read errors and {} new checksum errors (repaired from redundancy where it allowed; totals {} and {}); the last: {}",
                        now.0 - before.0,
                        now.1 - before.1,
                        now.0,
                        now.1,
                        m.last_error.as_deref().unwrap_or("unknown")
                    ),
                );
            }
        }
    }

    /// Runs pending rebuilds (and promotes spares) whenever there is work, until stopped.
    fn supervise(self: &Arc<Self>) {
        let stop = Arc::new(AtomicBool::new(false));
        let mut counters = std::collections::HashMap::new();
        while !STOP.load(Ordering::Acquire) {
            self.error_events(&mut counters);
            let work = self.rebuild_wanted.swap(false, Ordering::AcqRel)
                || !self.array.pending_targets().is_empty()
                || self.array.promote_spares().is_ok_and(|slots| {
                    for &s in &slots {
                        if let Some(note) = self.array.heavy_role_note(s) {
                            eprintln!("raidctl serve: {note}");
                        }
                    }
                    !slots.is_empty()
                });
            if work {
                let start = self
                    .array
                    .members()
                    .iter()
                    .find_map(|m| m.progress)
                    .unwrap_or(0.0);
                *self.job_clock.lock().expect("job clock lock") =
                    Some((std::time::Instant::now(), start));
                let opts = RebuildOptions {
                    max_rate: self
                        .job_rate
                        .lock()
                        .expect("job rate lock")
                        .take()
                        .or(self.config.rebuild_rate),
                    min_rate: crate::cmd::rebuild::min_rate(
                        self.job_min_rate
                            .lock()
                            .expect("job rate lock")
                            .take()
                            .or(self.config.rebuild_min_rate),
                    ),
                    stop: Some(stop.clone()),
                    ..RebuildOptions::default()
                };
                let watcher = {
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        while !STOP.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        stop.store(true, Ordering::Release);
                    })
                };
                match rebuild::run(&self.array, &opts, &mut |_, _, _| {}) {
                    Ok(reports) => {
                        for r in reports {
                            eprintln!(
                                "raidctl serve: {} of slot(s) {:?} done ({} bytes in {:.1} s)",
                                r.kind, r.slots, r.bytes_written, r.seconds
                            );
                        }
                    }
                    Err(e) => eprintln!("raidctl serve: rebuild: {e}"),
                }
                *self.job_clock.lock().expect("job clock lock") = None;
                let stopped_by_signal = STOP.load(Ordering::Acquire);
                stop.store(true, Ordering::Release);
                let _ = watcher.join();
                stop.store(false, Ordering::Release);
                if stopped_by_signal {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Serves until SIGTERM or SIGINT; returns once the array is flushed and marked clean.
pub fn serve(array: Array, config: ServeConfig, ready: impl FnOnce(&[String])) -> Result<()> {
    install_signals();
    let uuid = crate::output::uuid(&array.superblock().array_uuid);
    let array = Arc::new(array);
    let stopping = Arc::new(AtomicBool::new(false));
    let export = Arc::new(Export {
        name: config.export.clone(),
        description: format!(
            "raidctl {} array {}",
            array.layout().level().name(),
            array.superblock().name
        ),
        array: array.clone(),
        readonly: config.readonly,
        stopping: stopping.clone(),
        sessions: Default::default(),
    });
    let unix_path = match (&config.socket, &config.listen) {
        (Some(p), _) => Some(p.clone()),
        (None, None) => Some(run_dir().join(format!("{uuid}.sock"))),
        (None, Some(_)) => None,
    };
    let unix = unix_path.as_deref().map(bind_unix).transpose()?;
    let tcp = match &config.listen {
        Some(addr) => {
            let l = TcpListener::bind(addr).map_err(|e| Error::io(e, "listen", addr, 0))?;
            l.set_nonblocking(true)
                .map_err(|e| Error::io(e, "nonblock", addr, 0))?;
            Some(l)
        }
        None => None,
    };
    let ctl_path = control_path(&uuid);
    let ctl = bind_unix(&ctl_path)?;
    let mut where_ = Vec::new();
    if let Some(p) = &unix_path {
        where_.push(format!(
            "nbd+unix:///{}?socket={}",
            config.export,
            p.display()
        ));
    }
    if let Some(t) = &tcp {
        where_.push(format!(
            "nbd://{}/{}",
            t.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            config.export
        ));
    }
    // The kernel's nbd driver, attached last: every socket above is bound, so a failure
    // here leaves nothing attached.
    let kernel_nbd = match &config.nbd_device {
        Some(dev) => match KernelNbd::attach(dev, array.size(), export.flags()) {
            Ok(k) => Some(k),
            Err(e) => {
                if let Some(p) = &unix_path {
                    let _ = std::fs::remove_file(p);
                }
                let _ = std::fs::remove_file(&ctl_path);
                return Err(e);
            }
        },
        None => None,
    };
    if let Some((k, _)) = &kernel_nbd {
        where_.push(k.path().display().to_string());
    }
    let ublk = match &config.ublk {
        Some(opts) => match crate::ublk::Ublk::start(export.clone(), opts) {
            Ok(u) => Some(u),
            Err(e) => {
                if let Some((k, _)) = kernel_nbd {
                    let _ = k.detach();
                }
                if let Some(p) = &unix_path {
                    let _ = std::fs::remove_file(p);
                }
                let _ = std::fs::remove_file(&ctl_path);
                return Err(e);
            }
        },
        None => None,
    };
    if let Some(u) = &ublk {
        where_.push(u.device.clone());
    }
    let mut served_by = json!({
        "pid": std::process::id(),
        "control": ctl_path.display().to_string(),
        "nbd": where_.clone(),
    });
    if let Some(dev) = &config.nbd_device {
        served_by["nbd_device"] = json!(dev.display().to_string());
    }
    if let Some(u) = &ublk {
        served_by["ublk"] = json!({"id": u.id, "device": u.device, "recovered": u.recovered});
    }
    if let Some(h) = &config.hardening {
        served_by["hardening"] = h.clone();
    }
    where_.push(format!("control {}", ctl_path.display()));
    let daemon = Arc::new(Daemon {
        array: array.clone(),
        export,
        conns: Mutex::new(Default::default()),
        next_conn: Default::default(),
        rebuild_wanted: AtomicBool::new(true),
        job_rate: Mutex::new(None),
        job_min_rate: Mutex::new(None),
        config,
        served_by,
        job_clock: Mutex::new(None),
    });
    let kernel_nbd = kernel_nbd.map(|(k, sock)| {
        let c = sock.try_clone().ok();
        daemon.spawn_client(
            Box::new(sock),
            Box::new(move || {
                if let Some(c) = &c {
                    let _ = c.shutdown(std::net::Shutdown::Read);
                }
            }),
            false,
        );
        k
    });
    ready(&where_);
    let supervisor = {
        let d = daemon.clone();
        std::thread::spawn(move || d.supervise())
    };
    // Partial-row writes the stripe cache holds reach the members within about a second even
    // when no client flushes.
    let writer = {
        let a = array.clone();
        std::thread::spawn(move || {
            while !STOP.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(250));
                if let Err(e) = a.write_back(Some(WRITE_BACK_AGE)) {
                    eprintln!("raidctl serve: writing held blocks: {e}");
                }
            }
        })
    };
    while !STOP.load(Ordering::Acquire) {
        let mut idle = true;
        if let Some(l) = &unix {
            if let Ok((s, _)) = l.accept() {
                idle = false;
                let _ = s.set_nonblocking(false);
                if let Ok(c) = s.try_clone() {
                    daemon.spawn_client(
                        Box::new(s),
                        Box::new(move || drop(c.shutdown(std::net::Shutdown::Read))),
                        true,
                    );
                }
            }
        }
        if let Some(l) = &tcp {
            if let Ok((s, _)) = l.accept() {
                idle = false;
                let _ = s.set_nonblocking(false);
                let _ = s.set_nodelay(true);
                if let Ok(c) = s.try_clone() {
                    daemon.spawn_client(
                        Box::new(s),
                        Box::new(move || drop(c.shutdown(std::net::Shutdown::Read))),
                        true,
                    );
                }
            }
        }
        if let Ok((s, _)) = ctl.accept() {
            idle = false;
            let d = daemon.clone();
            std::thread::spawn(move || d.serve_control(s));
        }
        if idle {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    crate::notify::notify("STOPPING=1");
    // Stop: detach the kernel's nbd device first (the driver sends what it has queued, then
    // NBD_CMD_DISC, while the export still serves); refuse new requests, end the clients'
    // request streams (in-flight requests still complete and are answered), let the rebuild
    // reach its next checkpoint, then close clean.
    if let Some(k) = kernel_nbd {
        let path = k.path().display().to_string();
        match k.detach() {
            Ok(()) => eprintln!("raidctl serve: detached {path}"),
            Err(e) => eprintln!("raidctl serve: detaching {path}: {e}"),
        }
    }
    if let Some(u) = ublk {
        let device = u.device.clone();
        u.stop();
        eprintln!("raidctl serve: removed {device}");
    }
    stopping.store(true, Ordering::Release);
    drop(unix);
    drop(tcp);
    drop(ctl);
    for (_, shut) in daemon.conns.lock().expect("conns lock").drain() {
        shut();
    }
    let _ = supervisor.join();
    let _ = writer.join();
    // Client threads hold the export until their in-flight work is answered. A client that
    // stops reading its replies keeps its thread blocked in a send: it is not waited for past
    // 30 s. Its requests are done (only their replies are stuck), so closing clean below, which
    // waits for every request still running, keeps every acknowledged write.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while Arc::strong_count(&daemon.export) > 1 {
        if std::time::Instant::now() > deadline {
            eprintln!(
                "raidctl serve: {} client connection(s) did not take their replies within 30 s; closing without them",
                Arc::strong_count(&daemon.export) - 1
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(p) = &unix_path {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_file(&ctl_path);
    array.mark_clean()
}
