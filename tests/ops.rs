//! Day-two operations through the binary: `list` of served and offline arrays, `status` exit
//! codes by health, reports that answer while an offline job holds the array, and an
//! interrupted rebuild shown as such.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// A raidctl child process, killed (SIGKILL) on drop if still running.
struct Bg(Child);

impl Bg {
    fn start(args: &[&str]) -> Bg {
        Bg(Command::new(BIN)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap())
    }

    fn running(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until `cond` holds (at most 20 s).
/// Writes an executable shell script (a fake alert program or sendmail).
fn script(path: &Path, body: String) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn list_shows_a_served_and_an_offline_array_with_the_serving_pid() {
    let dir = tempdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let ma = members_created(&a, "5", 3, "16M");
    let mb = members_created(&b, "1", 2, "16M");
    let ua = status_run(["status", "--json", &ma[0]]).json()["uuid"].clone();
    let ub = status_run(["status", "--json", &mb[0]]).json()["uuid"].clone();
    let server = Server::start(&mb[0], &dir.path().join("b.sock"));
    let pid = server.child.as_ref().unwrap().id();
    let l = raidctl([
        "list",
        "--json",
        "--scan",
        &a.display().to_string(),
        "--scan",
        &b.display().to_string(),
    ])
    .ok()
    .json();
    let find = |u: &serde_json::Value| {
        l["arrays"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["uuid"] == *u)
            .unwrap_or_else(|| panic!("{u} not listed: {l}"))
            .clone()
    };
    let (ea, eb) = (find(&ua), find(&ub));
    assert_eq!(ea["level"], "raid5", "{ea}");
    assert_eq!(ea["state"], "clean", "{ea}");
    assert_eq!(
        (
            ea["members_active"].as_u64(),
            ea["members_expected"].as_u64()
        ),
        (Some(3), Some(3))
    );
    assert!(ea["served_by"].is_null(), "{ea}");
    assert_eq!(eb["level"], "raid1", "{eb}");
    assert_eq!(eb["served_by"]["pid"].as_u64(), Some(pid as u64), "{eb}");
    // The table says the same.
    let t = raidctl(["list", "--scan", &a.display().to_string()]).ok();
    let out = t.stdout_str();
    assert!(out.contains(&format!("served by pid {pid}")), "{out}");
    assert!(out.contains(ua.as_str().unwrap()), "{out}");
    // status says who serves it.
    let st = status_run(["status", &mb[1]]).stdout_str();
    assert!(st.contains(&format!("served   by pid {pid}")), "{st}");
}

#[test]
fn status_exit_codes_follow_health() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "16M");
    assert_eq!(raidctl(["status", &m[0]]).code, 0, "healthy");
    raidctl(["fail", "--no-rebuild", &m[0], "2"]).ok();
    let r = raidctl(["status", "--json", &m[0]]);
    assert_eq!(r.code, 1, "degraded: {}", r.stderr);
    assert_eq!(r.json()["state"], "degraded");
    // One more member gone: failed, and still reported.
    std::fs::rename(&m[1], dir.path().join("away")).unwrap();
    let away = tempdir();
    std::fs::rename(dir.path().join("away"), away.path().join("m1")).unwrap();
    let r = raidctl(["status", "--json", &m[0]]);
    assert_eq!(r.code, 5, "failed: {}", r.stderr);
    assert_eq!(r.json()["state"], "failed");
}

#[test]
fn status_and_wear_answer_during_an_offline_scrub() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 4, "64M");
    fill(&m[0], dir.path());
    let mut scrub = Bg::start(&["scrub", "--max-rate", "4M", &m[0]]);
    // Once the scrub holds the members' locks, status names it, and a fail is refused,
    // naming it too.
    let pid = scrub.0.id() as u64;
    wait_for("the scrub to take the array", || {
        raidctl(["status", "--json", &m[0]]).json()["in_use_by"]["pid"].as_u64() == Some(pid)
    });
    let refused = raidctl(["fail", "--no-rebuild", &m[0], "1"]);
    assert!(
        refused.stderr.contains(&format!("pid {}", scrub.0.id()))
            && refused.stderr.contains("scrub"),
        "{}",
        refused.stderr
    );
    let st = raidctl(["status", "--json", &m[0]]);
    assert_eq!(st.code, 0, "{}", st.stderr);
    let st = st.json();
    assert_eq!(
        st["in_use_by"]["pid"].as_u64(),
        Some(scrub.0.id() as u64),
        "{st}"
    );
    let w = raidctl(["wear", "--json", &m[0]]);
    assert_eq!(w.code, 0, "{}", w.stderr);
    assert_eq!(w.json()["members"].as_array().unwrap().len(), 4);
    assert!(scrub.running(), "the scrub ended before the reports ran");
}

#[test]
fn an_interrupted_rebuild_shows_as_interrupted() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "64M");
    fill(&m[0], dir.path());
    raidctl(["fail", "--no-rebuild", &m[0], "2"]).ok();
    // A write while it is out: the member is re-added, and what it missed (the one region of
    // these small members, all of it) is copied.
    write_at(Path::new(&m[0]), 0, &pattern("while out", 4096), dir.path());
    raidctl(["add", "--no-rebuild", "--force", &m[0], &m[2]]).ok();
    let mut job = Bg::start(&["rebuild", "--max-rate", "2M", &m[0]]);
    wait_for("the rebuild to start", || {
        raidctl(["status", "--json", &m[0]]).json()["job"]["state"] == "running"
    });
    assert!(job.running());
    let _ = job.0.kill();
    let _ = job.0.wait();
    let st = raidctl(["status", "--json", &m[0]]);
    assert_eq!(st.code, 1, "rebuilding is not healthy: {}", st.stderr);
    let v = st.json();
    assert_eq!(v["job"]["kind"], "rebuild", "{v}");
    assert_eq!(v["job"]["state"], "interrupted", "{v}");
    let human = raidctl(["status", &m[0]]).stdout_str();
    assert!(human.contains("rebuild interrupted"), "{human}");
    // It resumes and completes.
    raidctl(["rebuild", &m[0]]).ok();
    let v = status_run(["status", "--json", &m[0]]).json();
    assert_eq!(v["state"], "clean", "{v}");
    assert!(v["job"].is_null(), "{v}");
}

/// A rebuild whose target fails says which device failed and why (the operation, the member
/// offset, the error): before, it said only "a rebuild target failed; see status", and status,
/// reopened, called the failed device stale.
#[test]
fn a_rebuild_whose_target_fails_names_it_and_why() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "64M");
    fill(&m[0], dir.path());
    raidctl(["fail", "--no-rebuild", &m[0], "2"]).ok();
    raidctl(["remove", &m[0], &m[2]]).ok();
    let new = dir.path().join("new");
    sized_like(&new, Path::new(&m[2]));
    raidctl(["add", "--no-rebuild", &m[0], new.to_str().unwrap()]).ok();
    let fault = format!("{}:write-errors=40000000-40100000", new.display());
    let r = raidctl(["rebuild", &m[0], "--inject", &fault]);
    assert_ne!(r.code, 0, "the target failed: {}", r.stderr);
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("rebuild target failed"))
        .unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(
        line.contains(new.to_str().unwrap()),
        "names the target: {line}"
    );
    assert!(line.contains("write"), "names the operation: {line}");
}

#[test]
fn monitor_runs_the_program_when_a_member_fails_through_the_daemon_and_a_rebuild_finishes() {
    let dir = tempdir();
    let (state, run) = (dir.path().join("state"), dir.path().join("run"));
    std::fs::create_dir_all(&run).unwrap();
    let env = [
        ("RAIDCTL_STATE_DIR", state.as_path()),
        ("RAIDCTL_RUN_DIR", run.as_path()),
    ];
    let m = members_created(dir.path(), "5", 3, "32M");
    let got = dir.path().join("got");
    let prog = dir.path().join("prog.sh");
    script(
        &prog,
        format!(
            "#!/bin/sh\necho \"$1 $2 [$3] slot=$RAIDCTL_SLOT name=$RAIDCTL_ARRAY_NAME\" >> {}\n",
            got.display()
        ),
    );
    let spawn = |args: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        for (k, v) in &env {
            c.env(k, v);
        }
        Bg(c.spawn().unwrap())
    };
    let mut monitor = spawn(&[
        "monitor",
        "--program",
        &prog.display().to_string(),
        "--interval",
        "0.1",
    ]);
    // The monitor records where it starts before it watches.
    wait_for("the monitor to start", || {
        state.join("monitor.pos").exists()
    });
    let mut serve = spawn(&[
        "serve",
        "--socket",
        &dir.path().join("s.sock").display().to_string(),
        &m[0],
    ]);
    let uuid = raidctl(["examine", "--json", &m[1]]).ok().json()["array_uuid"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_default();
    wait_for("the daemon", || run.join(format!("{uuid}.ctl")).exists());
    let read = || std::fs::read_to_string(&got).unwrap_or_default();
    raidctl_env(&env, &["fail", &m[0], "2"]).ok();
    // Each event runs the program in turn: wait for both (the second can trail the first).
    wait_for("member-failed and degraded to reach the program", || {
        read().contains("member-failed") && read().contains("degraded")
    });
    let lines = read();
    let line = lines
        .lines()
        .find(|l| l.starts_with("member-failed"))
        .unwrap();
    assert!(
        line.contains(&uuid) && line.contains("slot=2") && line.contains("m2"),
        "{lines}"
    );
    assert!(lines.contains("degraded"), "{lines}");
    raidctl_env(&env, &["add", "--force", &m[0], &m[2]]).ok();
    wait_for("rebuild-finished to reach the program", || {
        read().contains("rebuild-finished")
    });
    assert!(read().contains("rebuild-started"), "{}", read());
    assert!(monitor.running() && serve.running());
    // --oneshot after a restart repeats nothing already handled (once the monitor has
    // recorded its position past the last event: it records after handling each).
    let log = state.join("events").join(format!("{uuid}.jsonl"));
    wait_for("the monitor to record its position", || {
        let len = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let pos: serde_json::Value =
            serde_json::from_slice(&std::fs::read(state.join("monitor.pos")).unwrap_or_default())
                .unwrap_or_default();
        pos[format!("{uuid}.jsonl")].as_u64() == Some(len)
    });
    drop(monitor);
    let once = raidctl_env(
        &env,
        &[
            "monitor",
            "--oneshot",
            "--program",
            &prog.display().to_string(),
        ],
    );
    assert_eq!(once.code, 0, "{}", once.stderr);
    // Other tests' arrays on loop devices may be reported (the monitor watches every block
    // device); none of this array's events is repeated.
    assert!(!once.stdout_str().contains(&uuid), "{}", once.stdout_str());
}

/// Parses Prometheus text with the reference Python client's parser and returns
/// `name{labels} value` lines, sorted labels, for assertions.
fn parse_prometheus(text: &str) -> Vec<String> {
    let script = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        print(f"{s.name}{{{labels}}} {s.value}")
"#;
    let mut c = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 with python3-prometheus-client (apt)");
    use std::io::Write;
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "the Prometheus parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn prometheus_output_parses_and_carries_member_state() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "16M");
    raidctl(["fail", "--no-rebuild", &m[0], "2"]).ok();
    let member2 = raidctl(["status", "--json", &m[0]]).json()["members"][2]["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    let st = raidctl(["status", "--prometheus", &m[0]]);
    assert_eq!(st.code, 1, "degraded: {}", st.stderr);
    let samples = parse_prometheus(&st.stdout_str());
    let has = |needle: &str| samples.iter().any(|s| s.contains(needle));
    let faulty = samples
        .iter()
        .find(|s| {
            s.starts_with("raidctl_member_state{")
                && s.contains(&format!("member_uuid=\"{member2}\""))
                && s.contains("state=\"faulty\"")
        })
        .unwrap_or_else(|| panic!("no faulty series for slot 2: {samples:?}"));
    assert!(
        faulty.ends_with(" 1.0") && faulty.contains("slot=\"2\""),
        "{faulty}"
    );
    assert!(
        has("raidctl_array_state{")
            && samples.iter().any(|s| s.starts_with("raidctl_array_state{")
                && s.contains("state=\"degraded\"")
                && s.ends_with(" 1.0")),
        "{samples:?}"
    );
    assert!(has("raidctl_member_errors_total{"), "{samples:?}");
    assert!(has("raidctl_array_disks{"), "{samples:?}");
    // Labels never carry the typed path: the same series from another spelling of it.
    let other = raidctl([
        "status",
        "--prometheus",
        &format!("{}/./m0", dir.path().display()),
    ]);
    assert_eq!(parse_prometheus(&other.stdout_str()), samples);
    // list and wear speak the same format.
    let l = raidctl([
        "list",
        "--prometheus",
        "--scan",
        &dir.path().display().to_string(),
    ])
    .ok();
    assert!(parse_prometheus(&l.stdout_str())
        .iter()
        .any(|s| s.contains(&member2)));
    // One counter, one name, one place (issue 29, item 8: status said written_bytes, wear
    // bytes_written; then both said bytes_written_total, and the two outputs together, one
    // textfile as node_exporter takes them, were refused for the family given twice). Together
    // they parse and pass promtool's lint (base units: seconds, bytes per second).
    let st = status_run(["status", "--prometheus", &m[0]]).stdout_str();
    let w = raidctl(["wear", "--prometheus", &m[0]]).stdout_str();
    assert!(parse_prometheus(&st)
        .iter()
        .any(|s| s.starts_with("raidctl_member_bytes_written_total")));
    assert!(!w.contains("raidctl_member_bytes_written_total"), "{w}");
    let both = format!("{st}{w}");
    assert!(!parse_prometheus(&both).is_empty());
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; .ci/run installs it)");
    {
        use std::io::Write;
        lint.stdin
            .take()
            .unwrap()
            .write_all(both.as_bytes())
            .unwrap();
    }
    let out = lint.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The demo of the README's first command: its degraded read runs with a member really
/// missing (a member renamed beside the others was found again by its uuid, so the "degraded"
/// read was not degraded), and the whole demo succeeds.
#[test]
fn the_demo_runs_and_its_degraded_read_is_degraded() {
    let dir = tempdir();
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo.sh"))
        .arg(dir.path().join("demo"))
        .env("RAIDCTL", BIN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let degraded = stdout
        .split("== lose a member")
        .nth(1)
        .and_then(|s| s.split("==").next())
        .unwrap_or("");
    assert!(degraded.contains("state    degraded"), "{degraded}");
    assert!(degraded.contains("degraded read identical"), "{degraded}");
    assert!(
        stdout.contains("read back identical after repair"),
        "{stdout}"
    );
}

/// Issue #18 small mistakes: the rotational-disk warning printed once per member; --skew said
/// it implied f1 but was refused with -l 5 without saying what to use.
#[test]
fn create_warns_once_per_disk_and_skew_says_it_needs_f1() {
    let dir = tempdir();
    let m: Vec<PathBuf> = (0..4).map(|i| dir.path().join(format!("m{i}"))).collect();
    let ms = strs(&m);
    let mut args = vec!["create", "--level", "5", "--size", "16M"];
    args.extend(ms.iter().map(|s| s.as_str()));
    let r = raidctl(&args).ok();
    let warnings = r
        .stderr
        .lines()
        .filter(|l| l.contains("rotational"))
        .count();
    assert!(warnings <= 1, "{}", r.stderr);
    let other = tempdir();
    let m2: Vec<String> = (0..3)
        .map(|i| other.path().join(format!("s{i}")).display().to_string())
        .collect();
    let mut args = vec!["create", "--level", "5", "--skew", "2,1,1", "--size", "16M"];
    args.extend(m2.iter().map(|s| s.as_str()));
    raidctl(&args).fails(2, &["--level f1"]);
    assert!(
        m2.iter().all(|p| !Path::new(p).exists()),
        "a refused create left files"
    );
    let help = raidctl(["create", "--help"]).ok().stdout_str();
    assert!(!help.contains("implies"), "{help}");
    // serve never goes to the background: --foreground is documented as ignored.
    let help = raidctl(["serve", "--help"]).ok().stdout_str();
    assert!(
        help.contains("ignored: serve always runs in the foreground"),
        "{help}"
    );
}

#[test]
fn clear_set_and_wipe() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "16M");
    // A checksum error, counted on the member whose block was corrupted.
    let data = pattern("clear", 1 << 20);
    write_at(Path::new(&m[0]), 0, &data, dir.path());
    let off = raidctl(["examine", "--json", &m[1]]).ok().json()["areas"]["data"]["offset"]
        .as_u64()
        .unwrap();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&m[1]).unwrap();
        f.write_all_at(b"corruption!", off + 100).unwrap();
    }
    // scrub --repair finds it, repairs it and records the count.
    raidctl(["scrub", "--repair", &m[0]]).ok();
    let errs = |slot: usize| {
        raidctl(["status", "--json", &m[0]]).json()["members"][slot]["checksum_errors"]
            .as_u64()
            .unwrap()
    };
    assert!(errs(1) >= 1);
    raidctl(["clear", &m[0]]).ok();
    assert_eq!(errs(1), 0, "cleared counters persist");
    // Endurance after the fact.
    raidctl(["set", &m[0], "2", "--endurance", "600"]).ok();
    let st = raidctl(["status", "--json", &m[0]]).json();
    assert_eq!(
        st["members"][2]["endurance_bytes"].as_u64(),
        Some(600_000_000_000_000)
    );
    raidctl(["set", &m[0], "2", "--endurance", "-1"]).fails(2, &["--endurance"]);
    // Wipe: refused for a member in service, and while a daemon holds it.
    {
        let _s = Server::start(&m[0], &dir.path().join("w.sock"));
        raidctl(["wipe", "--force", &m[2]]).fails(4, &["raidctl serve"]);
    }
    let before = hashes(&[PathBuf::from(&m[2])]);
    raidctl(["wipe", &m[2]]).fails(4, &["counts on it"]);
    assert_eq!(
        hashes(&[PathBuf::from(&m[2])]),
        before,
        "a refused wipe wrote"
    );
    raidctl(["wipe", "--force", &m[2]]).ok();
    raidctl(["examine", &m[2]]).fails(3, &["not a raidctl member"]);
    raidctl(["wipe", &m[2]]).fails(3, &["nothing written"]);
    // The array runs degraded without it, and takes it back as a new member.
    assert_eq!(raidctl(["status", &m[0]]).code, 1);
    raidctl(["add", &m[0], &m[2]]).ok();
    assert_eq!(raidctl(["status", &m[0]]).code, 0);
    assert!(read_at(Path::new(&m[0]), 0, data.len()).ok().stdout == data);
}

/// Issue #18: progress bars opened full at "0 B/0 B" (drawn before the total was known). Run
/// on a pseudo-terminal (util-linux `script`), the bar's first frame knows the total.
#[test]
fn progress_bar_never_shows_an_empty_total() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "64M");
    raidctl(["fail", "--no-rebuild", &m[0], "2"]).ok();
    raidctl(["add", "--no-rebuild", "--force", &m[0], &m[2]]).ok();
    let o = Command::new("script")
        .args([
            "-qefc",
            &format!("{BIN} rebuild --max-rate 40M {}", m[0]),
            "/dev/null",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("rebuild ["),
        "no bar drawn on a terminal: {out}"
    );
    assert!(!out.contains("0 B/0 B"), "{out}");
}

/// The monitor checks array states every --poll seconds: a member file taken away while
/// nothing runs the array (so no raidctl process raises an event) is reported, once.
#[test]
fn monitor_polls_offline_arrays_and_reports_one_turning_degraded() {
    let dir = tempdir();
    let (state, run, arr) = (
        dir.path().join("state"),
        dir.path().join("run"),
        dir.path().join("arr"),
    );
    std::fs::create_dir_all(&run).unwrap();
    std::fs::create_dir_all(&arr).unwrap();
    let m = members_created(&arr, "5", 3, "16M");
    let uuid = raidctl(["examine", "--json", &m[1]]).ok().json()["array_uuid"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_default();
    // Lines about this array: the monitor also watches every block device, where other tests
    // keep arrays on loop devices.
    let ours = |text: &str| -> usize {
        text.lines()
            .filter(|l| l.contains("degraded-array") && l.contains(&uuid))
            .count()
    };
    let out = dir.path().join("out");
    let mut c = Command::new(BIN);
    c.args(["monitor", "--poll", "0.3", "--interval", "0.1", "--scan"])
        .arg(&arr)
        .env("RAIDCTL_STATE_DIR", &state)
        .env("RAIDCTL_RUN_DIR", &run)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null());
    let mut monitor = Bg(c.spawn().unwrap());
    wait_for("the monitor to start", || {
        state.join("monitor.pos").exists()
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        ours(&std::fs::read_to_string(&out).unwrap()),
        0,
        "a healthy array reported"
    );
    std::fs::rename(&m[2], dir.path().join("m2.away")).unwrap();
    wait_for("degraded-array", || {
        ours(&std::fs::read_to_string(&out).unwrap()) > 0
    });
    std::thread::sleep(Duration::from_millis(1000));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(ours(&text), 1, "{text}");
    assert!(monitor.running());
}

/// Events go to syslog(3) too, from offline commands as from the daemon. /dev/log is bound to
/// a listener of the test's own inside a private mount namespace (unshare), so nothing reaches
/// the host's log.
#[test]
fn events_reach_syslog() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "16M");
    let got = dir.path().join("syslog.txt");
    let script = format!(
        r#"set -e
mount -t tmpfs none /dev
mknod -m 666 /dev/null c 1 3
/usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
s.settimeout(10)
open("{got}", "w").close()
with open("{got}", "ab") as f:
    try:
        while True:
            f.write(s.recv(65536) + b"\n"); f.flush()
    except socket.timeout:
        pass
' &
i=0
while [ ! -S /dev/log ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
RAIDCTL_STATE_DIR={state} {bin} fail --no-rebuild {m0} 2
sleep 0.5
kill $! || true
wait || true
"#,
        got = got.display(),
        state = dir.path().join("state").display(),
        bin = BIN,
        m0 = m[0]
    );
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = std::fs::read_to_string(&got).unwrap_or_default();
    assert!(
        log.contains("raidctl") && log.contains("event member-failed") && log.contains("slot 2"),
        "{log}"
    );
}

/// Issue 29, item 5: an array name holding "\nBcc: ..." went into the monitor's Subject
/// unescaped, with sendmail -t reading recipients from the headers; create took names with
/// newlines and status printed escapes raw. Names with control characters are refused; the
/// mail names its recipient on sendmail's command line and keeps every header one line; a
/// monitor asked to mail without a sendmail refuses to start.
#[test]
fn a_hostile_array_name_neither_adds_a_mail_recipient_nor_reaches_a_terminal_raw() {
    let dir = tempdir();
    let m: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("m{i}"))).collect();
    let mut args = vec![
        "create".to_string(),
        "--level".into(),
        "5".into(),
        "--size".into(),
        "16M".into(),
        "--name".into(),
        "nas\nBcc: evil@example.com".into(),
    ];
    args.extend(strs(&m));
    let r = raidctl(&args);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("control"), "{}", r.stderr);
    // Nor a bidirectional override, nor only spaces (outside attack on issue 29).
    for name in ["nas\u{202e}evil", "   "] {
        args[6] = name.into();
        let r = raidctl(&args);
        assert_eq!(r.code, 2, "{name:?}: {}", r.stderr);
    }
    assert!(!m[0].exists() || std::fs::metadata(&m[0]).unwrap().len() == 0);
    // An event naming such an array (a superblock from elsewhere, or an older raidctl).
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("events")).unwrap();
    std::fs::write(state.join("monitor.pos"), "{}").unwrap();
    let ev = serde_json::json!({
        "event": "member-failed",
        "array_name": "nas\nBcc: evil@example.com\u{1b}[2J",
        "array_uuid": "00000000-0000-0000-0000-000000000001",
        "detail": "slot 1 failed",
    });
    std::fs::write(
        state
            .join("events")
            .join("00000000-0000-0000-0000-000000000001.jsonl"),
        format!("{ev}\n"),
    )
    .unwrap();
    let out = dir.path().join("mail");
    let fake = dir.path().join("sendmail");
    script(
        &fake,
        format!(
            "#!/bin/sh\necho \"ARGS: $*\" >> {o}\ncat >> {o}\necho '--END--' >> {o}\n",
            o = out.display()
        ),
    );
    let run = |sendmail: &Path| {
        Command::new(BIN)
            .args(["monitor", "--oneshot", "--mail", "admin@example.com"])
            .env("RAIDCTL_STATE_DIR", &state)
            .env("RAIDCTL_RUN_DIR", dir.path())
            .env("RAIDCTL_SENDMAIL", sendmail)
            .output()
            .unwrap()
    };
    let o = run(&fake);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mail = std::fs::read_to_string(&out).unwrap();
    let ours = mail
        .split("--END--")
        .find(|m| m.contains("00000000-0000-0000-0000-000000000001"))
        .unwrap_or_else(|| panic!("no mail for the event: {mail}"));
    assert!(ours.contains("ARGS: -i -- admin@example.com"), "{ours}");
    assert!(!ours.contains(" -t"), "{ours}");
    let headers: Vec<&str> = ours
        .trim_start()
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(headers.len(), 2, "To and Subject only: {headers:?}");
    assert!(headers.iter().all(|h| !h.starts_with("Bcc")), "{headers:?}");
    assert!(!ours.contains('\u{1b}'), "{ours}");
    // No sendmail: refused, not a monitor that drops every alert.
    let o = run(&dir.path().join("no-such-sendmail"));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs a sendmail"));
}

/// Issue 29, item 7: through the daemon, `fail` of a hot spare said "slot
/// 18446744073709551615 marked faulty" and `add` of a spare "(slot null); it rebuilds";
/// offline they said what happened. Both ways now agree.
#[test]
fn a_spare_added_and_failed_reads_the_same_served_or_not() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "16M");
    let spare = |n: &str| {
        let p = dir.path().join(n);
        std::fs::File::create(&p)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        p.display().to_string()
    };
    let m0 = m[0].clone();
    let (s1, s2) = (spare("s1"), spare("s2"));
    let off_add = raidctl(["add", &m0, &s1]).ok().stderr;
    assert!(off_add.contains("added as a hot spare"), "{off_add}");
    let off_fail = raidctl(["fail", &m0, &s1]).ok().stderr;
    assert!(
        off_fail.contains("spare") && off_fail.contains("removed"),
        "{off_fail}"
    );
    let sock = dir.path().join("s.sock");
    let mut server = Server::start(&m0, &sock);
    let on_add = raidctl(["add", &m0, &s2]).ok().stderr;
    assert!(on_add.contains("as a hot spare"), "{on_add}");
    assert!(
        !on_add.contains("null") && !on_add.contains("rebuilds"),
        "{on_add}"
    );
    let on_fail = raidctl(["fail", &m0, &s2]).ok().stderr;
    assert!(
        on_fail.contains("spare") && on_fail.contains("removed"),
        "{on_fail}"
    );
    assert!(!on_fail.contains("18446744073709551615"), "{on_fail}");
    let st = raidctl(["status", "--json", &m0]).ok().json();
    assert_eq!(st["state"], "clean", "{st}");
    assert!(server.stop().success());
}

/// Issue 29, item 4: two bit-rot episodes gave 210 member-errors events, several a second,
/// and `monitor --mail` mailed every one. Bursts of one member's member-errors (or
/// bad-blocks) are coalesced: the first at once, then one summary with the count; a member
/// failing in the middle still goes out at once.
#[test]
fn two_hundred_error_events_make_a_handful_of_mails_and_program_runs() {
    let dir = tempdir();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("events")).unwrap();
    std::fs::write(state.join("monitor.pos"), "{}").unwrap();
    let uuid = "00000000-0000-0000-0000-0000000000a2";
    let mut log = String::new();
    for i in 0..200 {
        let slot = i % 2;
        log.push_str(&format!(
            "{}\n",
            serde_json::json!({"event": "member-errors", "array_name": "nas", "array_uuid": uuid,
                "slot": slot, "detail": format!("1 new checksum error ({i})")})
        ));
        if i == 100 {
            log.push_str(&format!(
                "{}\n",
                serde_json::json!({"event": "member-failed", "array_name": "nas",
                    "array_uuid": uuid, "slot": 1, "detail": "write error"})
            ));
        }
    }
    std::fs::write(state.join("events").join(format!("{uuid}.jsonl")), log).unwrap();
    let (mail, runs) = (dir.path().join("mail"), dir.path().join("runs"));
    let fake = dir.path().join("sendmail");
    script(
        &fake,
        format!(
            "#!/bin/sh\ncat >> {m}\necho '--END--' >> {m}\n",
            m = mail.display()
        ),
    );
    let prog = dir.path().join("prog");
    script(
        &prog,
        format!(
            "#!/bin/sh\necho \"$1 $2 $RAIDCTL_SLOT\" >> {}\n",
            runs.display()
        ),
    );
    // Two runs from a timer (the state between them kept in STATE_DIR/monitor.hold): the
    // second, after the 600-s window, sends the summaries.
    let oneshot = |at: u64| {
        let o = Command::new(BIN)
            .args(["monitor", "--oneshot", "--mail", "root", "--program"])
            .arg(&prog)
            .env("RAIDCTL_STATE_DIR", &state)
            .env("RAIDCTL_RUN_DIR", dir.path())
            .env("RAIDCTL_SENDMAIL", &fake)
            .env("RAIDCTL_NOW", at.to_string())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o
    };
    let o = oneshot(1_800_000_000);
    let mails_now = |s: &str| s.split("--END--").filter(|m| m.contains(uuid)).count();
    assert_eq!(mails_now(&std::fs::read_to_string(&mail).unwrap()), 3);
    oneshot(1_800_000_000 + 601);
    // Every event is still printed.
    let printed = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        printed.lines().filter(|l| l.contains(uuid)).count(),
        201,
        "{printed}"
    );
    let mails = std::fs::read_to_string(&mail).unwrap();
    let ours: Vec<&str> = mails
        .split("--END--")
        .filter(|m| m.contains(uuid))
        .collect();
    // Per slot: the first error and one summary; and the failure.
    assert_eq!(ours.len(), 5, "{mails}");
    assert_eq!(
        ours.iter().filter(|m| m.contains("member-failed")).count(),
        1
    );
    assert_eq!(
        ours.iter()
            .filter(|m| m.contains("99 more member-errors events"))
            .count(),
        2,
        "{mails}"
    );
    let runs = std::fs::read_to_string(&runs).unwrap();
    assert_eq!(
        runs.lines().filter(|l| l.contains(uuid)).count(),
        5,
        "{runs}"
    );
}

/// Issue 29, item 7: through the daemon, a relative member path was resolved in the
/// daemon's directory ("m1 is not a member"). fail, replace and remove name members
/// relative to where the command runs, as offline.
#[test]
fn relative_member_paths_mean_the_same_to_a_served_array() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "16M");
    std::fs::File::create(dir.path().join("n2"))
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let sock = dir.path().join("s.sock");
    let mut server = Server::start(&m[0], &sock);
    let here = |args: &[&str]| {
        let r = raidctl_in(dir.path(), args);
        (Some(r.code), r.stderr)
    };
    let (code, err) = here(&["replace", "m0", "m2", "n2"]);
    assert_eq!(code, Some(0), "{err}");
    wait_for("the replace to finish", || {
        raidctl(["status", "--json", &m[0]]).json()["state"] == "clean"
            && raidctl(["status", "--json", &m[0]]).json()["job"].is_null()
    });
    let (code, err) = here(&["fail", "m0", "m1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("slot 1"), "{err}");
    let (code, err) = here(&["remove", "m0", "m1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(server.stop().success());
}

/// Outside attack on issue 29: a monitor that stopped at offset P, while the log filled,
/// rotated and the new log grew past P, read the new log from P: the rest of the old log and
/// the start of the new one (a member-failed, a degraded) were never handled. Rotation is
/// told by the log's inode, not its size.
#[test]
fn a_monitor_behind_a_rotated_log_handles_every_event_once() {
    let dir = tempdir();
    let state = dir.path().join("state");
    let events = state.join("events");
    std::fs::create_dir_all(&events).unwrap();
    std::fs::write(state.join("monitor.pos"), "{}").unwrap();
    let uuid = "00000000-0000-0000-0000-0000000000c3";
    let log = events.join(format!("{uuid}.jsonl"));
    let line = |kind: &str, i: usize| {
        format!(
            "{}\n",
            serde_json::json!({"event": kind, "array_name": "nas", "array_uuid": uuid,
                "slot": 1, "detail": format!("#{i}")})
        )
    };
    let run = || {
        let o = Command::new(BIN)
            .args(["monitor", "--oneshot", "--json", "--coalesce", "0"])
            .env("RAIDCTL_STATE_DIR", &state)
            .env("RAIDCTL_RUN_DIR", dir.path())
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains(uuid))
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["detail"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    std::fs::write(&log, line("scrub-finished", 0)).unwrap();
    assert_eq!(run(), vec!["#0"]);
    // The log gets more, is rotated, and the new one grows past the old position.
    let mut old = std::fs::read_to_string(&log).unwrap();
    old.push_str(&line("member-failed", 1));
    std::fs::write(&log, &old).unwrap();
    std::fs::rename(&log, events.join(format!("{uuid}.jsonl.1"))).unwrap();
    let mut new = line("degraded", 2);
    for i in 3..6 {
        new.push_str(&line("member-errors", i));
    }
    std::fs::write(&log, new).unwrap();
    assert_eq!(run(), vec!["#1", "#2", "#3", "#4", "#5"]);
    assert!(run().is_empty(), "nothing is repeated");
}

/// Issue 29: alert rules and a Grafana dashboard for the metrics, checked the way Prometheus
/// checks them (`promtool check rules`, and `promtool test rules`: each alert fires on its
/// series and stays quiet before), and against what raidctl really exports: every metric they
/// name is one `status --prometheus` or `wear --prometheus` writes, and the dashboard shows
/// every one of those (a renamed metric breaks this test, not a user's alerting).
#[test]
fn the_alert_rules_and_the_dashboard_name_only_and_all_the_metrics_raidctl_exports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let prom = root.join("contrib/prometheus");
    let promtool = |args: &[&str]| {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(&prom)
            .output()
            .expect("promtool (Debian's prometheus package; .ci/run installs it)");
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    promtool(&["check", "rules", "raidctl.rules.yml"]);
    promtool(&["test", "rules", "raidctl.rules.test.yml"]);

    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "64M");
    let mut exported = std::collections::BTreeSet::new();
    for report in ["status", "wear"] {
        let out = raidctl([report, "--prometheus", &m[0]]).ok().stdout_str();
        for l in out.lines() {
            if let Some(rest) = l.strip_prefix("# HELP ") {
                exported.insert(rest.split(' ').next().unwrap().to_string());
            }
        }
    }
    assert!(exported.len() >= 15, "{exported:?}");
    let names = |text: &str| -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        let b = text.as_bytes();
        let mut i = 0;
        while let Some(at) = text[i..].find("raidctl_") {
            let s = i + at;
            let mut e = s;
            while e < b.len() && (b[e].is_ascii_lowercase() || b[e] == b'_') {
                e += 1;
            }
            out.insert(text[s..e].to_string());
            i = e;
        }
        out
    };
    let rules = std::fs::read_to_string(prom.join("raidctl.rules.yml")).unwrap();
    let exprs: String = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr:"))
        .collect::<Vec<_>>()
        .join("\n");
    for n in names(&exprs) {
        assert!(
            exported.contains(&n),
            "the rules name {n}, which raidctl does not export"
        );
    }
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("contrib/grafana/raidctl-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut queries = String::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            queries.push_str(t["expr"].as_str().unwrap());
            queries.push('\n');
        }
    }
    for v in dash["templating"]["list"].as_array().unwrap() {
        queries.push_str(v["query"]["query"].as_str().unwrap());
        queries.push('\n');
    }
    let shown = names(&queries);
    for n in &shown {
        assert!(
            exported.contains(n),
            "the dashboard names {n}, which raidctl does not export"
        );
    }
    for n in &exported {
        assert!(
            shown.contains(n),
            "raidctl exports {n}, which the dashboard does not show"
        );
    }
}

/// Issue 29, item 7: the control protocol was untyped JSON matched by string, each field read
/// with a default: a misspelt field (`repiar`) or one of the wrong type ran the command with the
/// default in its place. Requests are typed now: the daemon refuses them as bad requests
/// (exit 2) and does nothing.
#[test]
fn the_daemon_refuses_malformed_control_requests_and_runs_nothing() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "32M");
    let sock = dir.path().join("c.sock");
    let mut server = Server::start(&m[0], &sock);
    let st = raidctl(["status", "--json", &m[0]]).ok().json();
    let control = st["served_by"]["control"].as_str().unwrap().to_string();
    let ask = |line: &[u8]| -> serde_json::Value {
        let mut s = std::os::unix::net::UnixStream::connect(&control).unwrap();
        s.write_all(line).unwrap();
        s.write_all(b"\n").unwrap();
        let mut answer = String::new();
        BufReader::new(&s).read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    };
    for (bad, why) in [
        (r#"{"cmd":"scrub","repiar":true}"#, "unknown field `repiar`"),
        (r#"{"cmd":"scrub","repair":"yes"}"#, "invalid type"),
        (r#"{"cmd":"fail"}"#, "missing field `member`"),
        (r#"{"cmd":"fail","member":1}"#, "invalid type"),
        (
            r#"{"cmd":"set-endurance","member":"1"}"#,
            "missing field `endurance_bytes`",
        ),
        (
            r#"{"cmd":"wipe-everything"}"#,
            "unknown variant `wipe-everything`",
        ),
        ("not json", "bad request"),
        // Second outside attack: unit commands took extra fields, and a misspelt fault was
        // run as no fault.
        (r#"{"cmd":"status","x":1}"#, "unknown field `x`"),
        (
            r#"{"cmd":"inject","member":"1","faults":{"latncy_us":1000}}"#,
            "unknown field `latncy_us`",
        ),
    ] {
        let a = ask(bad.as_bytes());
        assert_eq!(a["ok"], false, "{bad}: {a}");
        assert_eq!(a["exit"], 2, "{bad}: {a}");
        let e = a["error"].as_str().unwrap();
        assert!(e.contains("bad request") && e.contains(why), "{bad}: {e}");
    }
    // A line that is not UTF-8 got no answer at all (the connection closed).
    let a = ask(b"\xff\xfe{\"cmd\":\"status\"}");
    assert_eq!(a["exit"], 2, "{a}");
    assert!(a["error"].as_str().unwrap().contains("bad request"), "{a}");
    // Nothing ran: no member failed, no scrub recorded, no fault injected.
    let st = raidctl(["status", "--json", &m[0]]).ok().json();
    assert_eq!(st["state"], "clean", "{st}");
    assert_eq!(st["scrub"]["state"], "never", "{st}");
    assert_eq!(st["injected"].as_array().map_or(0, |v| v.len()), 0, "{st}");
    let a = ask(br#"{"cmd":"members"}"#);
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(a["result"]["members"].as_array().unwrap().len(), 3, "{a}");
    assert!(server.stop().success());
}

/// `v` with what differs by nature between two arrays and two processes made equal: uuids,
/// directories (paths keep their file name), times, durations and speeds, the serving or
/// holding process, and metadata bytes (every offline command opens and closes the array:
/// superblock writes a daemon does once) with the totals and wear windows they are part of.
/// Each such value keeps only its type (null or not).
/// A report field that is a time or an age (wear's sample times, projected dates).
fn is_time_key(k: &str) -> bool {
    k.ends_with("_unix")
        || k.starts_with("projected_wearout")
        || [
            "generated",
            "newest_sample_age_days",
            "observed_since",
            "smart_recorded",
        ]
        .contains(&k)
}

fn comparable(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    const VOLATILE: &[&str] = &[
        "uuid",
        "array_uuid",
        "created",
        "started",
        "finished",
        "seconds",
        "eta_seconds",
        "updated",
        "rate_bytes_per_sec",
        "read_bytes_per_second",
        "metadata",
        "total",
        "bytes_written",
        "one_off_bytes_in_window",
    ];
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    (k, Value::Number(_) | Value::String(_)) if VOLATILE.contains(&k) => {
                        (k.to_string(), Value::String("(volatile)".into()))
                    }
                    // Times and ages: the twins are written and sampled seconds apart, so
                    // only whether a time is stated is compared.
                    (k, v) if is_time_key(k) && !v.is_null() => {
                        (k.to_string(), Value::String("(time)".into()))
                    }
                    // Who holds the array: the daemon, or nothing (present either way).
                    (k, _) if ["served_by", "in_use_by"].contains(&k) => {
                        (k.to_string(), Value::String("(volatile)".into()))
                    }
                    // The daemon remembers why it failed a member; an offline open reads
                    // only that the superblock records it faulty.
                    ("reason", Value::String(r)) if r == "failed by request" => {
                        (k.clone(), Value::String("recorded faulty".into()))
                    }
                    _ => (k.clone(), comparable(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(comparable).collect()),
        Value::String(s) if s.starts_with('/') => Value::String(
            Path::new(s)
                .file_name()
                .map_or(s.clone(), |n| n.to_string_lossy().into_owned()),
        ),
        v => v.clone(),
    }
}

/// The differences between two JSON values, as "path: left != right" lines.
fn json_diff(at: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let (l, r) = (&x.get(k), &y.get(k));
                match (l, r) {
                    (Some(l), Some(r)) => json_diff(&format!("{at}.{k}"), l, r, out),
                    _ => out.push(format!("{at}.{k}: {l:?} != {r:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (l, r)) in x.iter().zip(y).enumerate() {
                json_diff(&format!("{at}[{i}]"), l, r, out);
            }
        }
        (l, r) if l != r => out.push(format!("{at}: {l} != {r}")),
        _ => {}
    }
}

/// Issue 29, item 7: every control command, run on a served array and on an offline twin
/// (same level, geometry, data and history; members named relative to where the command
/// runs), exits with the same code and prints the same JSON, and leaves the same `status
/// --json` behind. The daemon's answers are the typed outcomes the offline commands print.
#[test]
fn every_control_command_reads_the_same_served_or_not() {
    let root = tempdir();
    let (off, on) = (root.path().join("off"), root.path().join("on"));
    let data = pattern("both ways", 3 << 20);
    for d in [&off, &on] {
        std::fs::create_dir(d).unwrap();
        let m = members_created_with(d, "5", 3, "16M", &["--name", "twin"]);
        for n in ["s1", "n1"] {
            std::fs::File::create(d.join(n))
                .unwrap()
                .set_len(16 << 20)
                .unwrap();
        }
        write_at(Path::new(&m[0]), 1 << 20, &data, d);
    }
    let sock = root.path().join("s.sock");
    let mut server = Server::start_in(Some(&on), "m0", &sock, &[]);
    let run = |dir: &Path, args: &[&str]| {
        let r = raidctl_in(dir, args);
        (Some(r.code), r.stdout_str(), r.stderr)
    };
    // The first JSON value a command printed (a line, or a pretty object).
    let first_json = |out: &str| -> serde_json::Value {
        serde_json::Deserializer::from_str(out)
            .into_iter::<serde_json::Value>()
            .next()
            .map_or(serde_json::Value::Null, |v| v.unwrap())
    };
    let settled = |dir: &Path| {
        wait_for("the served array's job to finish", || {
            let st = raidctl(["status", "--json", &dir.join("m0").display().to_string()]).json();
            st["job"].is_null()
        })
    };
    let mut diffs = Vec::new();
    let steps: &[&[&str]] = &[
        &["status", "--json", "m0"],
        &["set", "--json", "m0", "1", "--endurance", "600"],
        &["add", "--json", "m0", "s1"],
        &["fail", "--json", "m0", "s1"],
        &["fail", "--json", "m0", "m2"],
        &["add", "--json", "m0", "m2"],
        &["replace", "--json", "m0", "m1", "n1"],
        &["scrub", "--json", "m0"],
        &["rebuild", "--json", "m0"],
        &["wear", "--json", "m0"],
        &["clear", "--json", "m0"],
        &["clear", "--json", "m0", "2"],
        &["fail", "--json", "m0", "2"],
        &["remove", "--json", "m0", "2"],
        &["status", "--json", "m0"],
    ];
    for args in steps {
        let (c_off, o_off, e_off) = run(&off, args);
        let (c_on, o_on, e_on) = run(&on, args);
        let what = args.join(" ");
        if c_off != c_on {
            diffs.push(format!(
                "{what}: exit {c_off:?} offline, {c_on:?} served ({e_off} | {e_on})"
            ));
            continue;
        }
        // Equal, and not refused: status exits 1 once the array is degraded.
        assert!(matches!(c_off, Some(0 | 1)), "{what}: {e_off}");
        json_diff(
            &what,
            &comparable(&first_json(&o_off)),
            &comparable(&first_json(&o_on)),
            &mut diffs,
        );
        settled(&on);
        let status = |d: &Path| {
            comparable(&raidctl(["status", "--json", &d.join("m0").display().to_string()]).json())
        };
        json_diff(
            &format!("status after {what}"),
            &status(&off),
            &status(&on),
            &mut diffs,
        );
    }
    // Faults are injected into a served array only (never persisted); offline, the command
    // says where the offline form is.
    let (c_off, _, e_off) = run(&off, &["inject", "--json", "m0", "0", "--latency", "1ms"]);
    assert_eq!(c_off, Some(2), "{e_off}");
    assert!(e_off.contains("--inject MEMBER:KIND"), "{e_off}");
    let (c_on, o_on, e_on) = run(&on, &["inject", "--json", "m0", "0", "--latency", "1ms"]);
    assert_eq!(c_on, Some(0), "{e_on}");
    assert_eq!(first_json(&o_on)["faults"]["latency_us"], 1000, "{o_on}");
    assert!(server.stop().success());
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// Outside attack on issue 29's typed protocol: a member name that does not exist where the
/// command runs was sent as typed, and the daemon looked it up in its own directory (it failed
/// the daemon's `m1`, and `add` wrote a superblock onto a file the user never named); a file
/// named `1` here was a path offline and slot 1 served; `--no-rebuild` was ignored served; a
/// latency of 2^64 us hung the daemon. Each now means the same both ways or is refused.
#[test]
fn names_mean_what_they_mean_offline_and_nonsense_is_refused_served() {
    let root = tempdir();
    let (srv, other) = (root.path().join("s"), root.path().join("other"));
    std::fs::create_dir(&srv).unwrap();
    std::fs::create_dir(&other).unwrap();
    let m = members_created(&srv, "5", 3, "16M");
    std::fs::File::create(srv.join("victim"))
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let sock = root.path().join("s.sock");
    let mut server = Server::start_in(Some(&srv), "m0", &sock, &[]);
    let here = |args: &[&str]| {
        let r = raidctl_in(&other, args);
        (Some(r.code), r.stderr)
    };
    let (code, err) = here(&["fail", "../s/m0", "m1"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = here(&["add", "../s/m0", "victim"]);
    assert_ne!(code, Some(0), "{err}");
    let st = raidctl(["status", "--json", &m[0]]).json();
    assert_eq!(st["state"], "clean", "{st}");
    assert_eq!(st["members"].as_array().unwrap().len(), 3, "{st}");
    // A file named 1 here: a path, as offline (not a member: refused).
    std::fs::write(other.join("1"), b"x").unwrap();
    let (code, err) = here(&["fail", "../s/m0", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        raidctl(["status", "--json", &m[0]]).json()["state"],
        "clean"
    );
    let (code, err) = here(&["fail", "--no-rebuild", "../s/m0", "2"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--no-rebuild"), "{err}");
    assert_eq!(
        raidctl(["status", "--json", &m[0]]).json()["state"],
        "clean"
    );
    let (code, err) = here(&["inject", "../s/m0", "1", "--latency", "100000000s"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        raidctl(["status", "--json", &m[0]]).json()["state"],
        "clean"
    );
    // A failed member names no array, served as offline (it was accepted served).
    let (code, err) = here(&["fail", "../s/m0", "2"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = here(&["add", "../s/m2", "../s/m2"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("failed out"), "{err}");
    assert!(server.stop().success());
    let (code, err) = here(&["status", "../s/m2"]);
    assert_eq!(code, Some(3), "offline: {err}");
}

/// Outside attack on issue 29's typed protocol: a member path that is not UTF-8 made every
/// control command abort the daemon (a panic encoding its members as JSON), which left the
/// array unclean and served by no one. Such paths are carried lossily for display, members
/// are matched by device and inode, and the daemon answers.
#[test]
fn a_member_path_that_is_not_utf8_never_takes_the_daemon_down() {
    use std::os::unix::ffi::OsStrExt;
    let root = tempdir();
    let dir = root.path().join(std::ffi::OsStr::from_bytes(b"u\xffdir"));
    std::fs::create_dir(&dir).unwrap();
    let run = |args: &[&str]| {
        let r = raidctl_in(&dir, args);
        (Some(r.code), r.stdout_str(), r.stderr)
    };
    let (code, _, err) = run(&["create", "--level", "5", "--size", "16M", "m0", "m1", "m2"]);
    assert_eq!(code, Some(0), "{err}");
    let sock = root.path().join("s.sock");
    let mut server = Server::start_in(Some(&dir), "m0", &sock, &[]);
    let (code, out, err) = run(&["status", "--json", "m0"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("\"served_by\": {"),
        "not through the daemon: {out}"
    );
    let (code, out, err) = run(&["fail", "--json", "m0", "1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"slot\":1"), "{out}");
    let (code, out, err) = run(&["status", "--json", "m0"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("\"served_by\": {"), "the daemon died: {out}");
    assert!(server.stop().success());
}

/// Outside attack on issue 29, item 8: `fail` of F1's parity-heavy member with a hot spare
/// waiting said nothing of where the role goes; the note came only from a later open that
/// promoted the spare. `fail` says it, served or not, and `--json` carries it.
#[test]
fn failing_the_heavy_member_with_a_spare_says_where_the_role_stays() {
    let dir = tempdir();
    let m = members_created(dir.path(), "f1", 4, "16M");
    let spare = dir.path().join("sp");
    std::fs::File::create(&spare)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let sp = spare.display().to_string();
    raidctl(["add", &m[1], &sp]).ok();
    let st = raidctl(["status", "--json", &m[1]]).json();
    assert_eq!(st["parity_weights"][0], 2, "{st}");
    let r = raidctl(["fail", "--json", &m[1], "0"]).ok();
    let out: serde_json::Value =
        serde_json::from_str(r.stdout_str().lines().next().unwrap()).unwrap();
    let note = out["role_note"].as_str().unwrap_or_default();
    assert!(
        note.contains("parity-heavy") && note.contains("most-worn"),
        "{out}"
    );
    assert!(r.stderr.contains("parity-heavy"), "{}", r.stderr);
    let st = raidctl(["status", "--json", &m[1]]).json();
    assert_eq!(
        st["state"], "clean",
        "one pass rebuilt the heavy slot: {st}"
    );
    assert_eq!(st["members"][0]["path"], sp.as_str(), "{st}");
}

/// Outside attack on issue 29: `inject --return` of a member reached through a symlink (as
/// /dev/disk/by-id names are) did not add it back: the daemon compared the member's resolved
/// path with the listed link. Members are matched by device and inode.
#[test]
fn a_vanished_member_behind_a_symlink_is_added_back_on_return() {
    let root = tempdir();
    let (real, links) = (root.path().join("d"), root.path().join("arr"));
    std::fs::create_dir(&real).unwrap();
    std::fs::create_dir(&links).unwrap();
    let mut l = Vec::new();
    for i in 0..3 {
        let f = real.join(format!("d{i}"));
        std::fs::File::create(&f)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        let link = links.join(format!("l{i}"));
        std::os::unix::fs::symlink(&f, &link).unwrap();
        l.push(link.display().to_string());
    }
    raidctl([
        "create", "--level", "5", "--size", "8M", &l[0], &l[1], &l[2],
    ])
    .ok();
    let sock = root.path().join("s.sock");
    let mut server = Server::start(&l[0], &sock);
    raidctl(["inject", &l[0], &l[1], "--vanish"]).ok();
    let src = root.path().join("src.img");
    std::fs::write(&src, pattern("away", 1 << 20)).unwrap();
    cmd("nbdcopy", &[src.to_str().unwrap(), &server.uri()]);
    assert_eq!(
        raidctl(["status", "--json", &l[0]]).json()["members"][1]["state"],
        "faulty"
    );
    let r = raidctl(["inject", "--json", &l[0], &l[1], "--return"])
        .ok()
        .json();
    assert_eq!(r["re_added_slot"], 1, "{r}");
    wait_for("the returned member to be rebuilt", || {
        raidctl(["status", "--json", &l[0]]).json()["state"] == "clean"
    });
    assert!(server.stop().success());
}
