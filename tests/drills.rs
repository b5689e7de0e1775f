//! Failure drills through the binary: every kind of `raidctl inject` against a served array
//! with an NBD client (nbdcopy) doing the I/O, the member timeout, and `--inject` on offline
//! commands. Each checks the data, the counters and what `status` names.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::*;

/// A served array of `level` over `n` members of 32 MiB holding 8 MiB of known data.
struct Drill {
    dir: tempfile::TempDir,
    ms: Vec<String>,
    srv: Server,
    data: Vec<u8>,
    /// Where the data area starts on every member.
    data_offset: u64,
}

impl Drill {
    fn new(level: &str, n: usize, serve: &[&str]) -> Drill {
        let dir = tempdir();
        let ms = members_created(dir.path(), level, n, "32M");
        let data = pattern(&format!("drill-{level}"), 8 << 20);
        write_at(Path::new(&ms[0]), 0, &data, dir.path());
        let data_offset = raidctl(["examine", "--json", &ms[0]]).ok().json()["data_offset"]
            .as_u64()
            .unwrap();
        let mut args = if serve.contains(&"--member-timeout") {
            vec![]
        } else {
            vec!["--member-timeout", "2"]
        };
        args.extend_from_slice(serve);
        let srv = Server::start_with(&ms[0], &dir.path().join("nbd.sock"), &args);
        Drill {
            dir,
            ms,
            srv,
            data,
            data_offset,
        }
    }

    fn inject(&self, args: &[&str]) -> Run {
        let mut a = vec!["inject", self.ms[0].as_str()];
        a.extend_from_slice(args);
        raidctl(&a).ok()
    }

    fn status(&self) -> Value {
        status_run(["status", "--json", &self.ms[0]]).json()
    }

    fn member(&self, slot: usize) -> Value {
        self.status()["members"][slot].clone()
    }

    /// Reads the data back through NBD.
    fn read_back(&self) -> Vec<u8> {
        let out = self.dir.path().join("back.img");
        cmd("nbdcopy", &[&self.srv.uri(), out.to_str().unwrap()]);
        let mut got = std::fs::read(&out).unwrap();
        std::fs::remove_file(&out).unwrap();
        got.truncate(self.data.len());
        got
    }

    fn assert_data(&self, what: &str) {
        assert!(self.read_back() == self.data, "{what}: data differs");
    }

    /// Writes new data through NBD (it becomes the data checked from then on).
    fn write_new(&mut self, seed: &str) {
        self.data = pattern(seed, 8 << 20);
        let src = self.dir.path().join("src.img");
        std::fs::write(&src, &self.data).unwrap();
        cmd("nbdcopy", &[src.to_str().unwrap(), &self.srv.uri()]);
        std::fs::remove_file(&src).unwrap();
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let v = self.status();
            if ok(&v) {
                return v;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{what} never happened: {v}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A member byte range inside the data area, as `START+LEN`.
    fn data_range(&self, len: &str) -> String {
        format!("{}+{len}", self.data_offset + (1 << 20))
    }
}

#[test]
fn injected_read_errors_are_repaired_from_redundancy_and_named_by_member_and_offset() {
    let d = Drill::new("5", 3, &[]);
    // Three chunks: at least two of them are data on slot 1 (reads skip parity).
    let range = d.data_range("192K");
    let r = d.inject(&["1", "--read-errors", &range]);
    assert!(r.stderr.contains("read errors on bytes"), "{}", r.stderr);
    d.assert_data("reads with bad sectors on slot 1");
    let m = d.member(1);
    assert_eq!(
        m["state"], "active",
        "a few bad sectors do not fail a member: {m}"
    );
    let errors = m["read_errors"].as_u64().unwrap();
    assert!(errors > 0, "{m}");
    let last = m["last_error"].as_str().unwrap();
    assert!(
        last.contains("read at member offset") && last.contains("injected") && last.contains("/m1"),
        "{last}"
    );
    let v = d.status();
    assert_eq!(
        v["injected"][0]["path"].as_str().unwrap(),
        std::fs::canonicalize(&d.ms[1]).unwrap().to_str().unwrap()
    );
    assert!(
        v["injected"][0]["injected"]["read_errors"]
            .as_u64()
            .unwrap()
            > 0,
        "{v}"
    );
    let human = raidctl(["status", &d.ms[0]]).ok().stdout_str();
    assert!(
        human.contains("drill") && human.contains("read errors on bytes"),
        "{human}"
    );
    // The blocks were rewritten from redundancy, which heals them (an SSD remaps on write):
    // a second pass meets no new errors.
    d.assert_data("second read");
    assert_eq!(d.member(1)["read_errors"].as_u64().unwrap(), errors);
    d.inject(&["--clear"]);
    assert_eq!(
        d.status()["injected"][0]["faults"]["read_errors"],
        Value::Null
    );
}

#[test]
fn injected_write_errors_fail_the_member_and_writes_go_on_degraded() {
    let mut d = Drill::new("6", 4, &[]);
    d.inject(&["2", "--write-errors", "100%"]);
    d.write_new("after-write-errors");
    let m = d.member(2);
    assert_eq!(m["state"], "faulty", "{m}");
    // The first write to fail may be data, parity or metadata (the write-intent bitmap).
    let reason = m["reason"].as_str().unwrap();
    assert!(
        reason.contains("write (injected)") && reason.contains("/m2 at offset"),
        "{reason}"
    );
    assert!(m["write_errors"].as_u64().unwrap() > 0, "{m}");
    assert!(
        m["last_error"]
            .as_str()
            .unwrap()
            .contains("write (injected)"),
        "{m}"
    );
    d.assert_data("RAID6 with a member failed by write errors");
    // --clear restores the member's service; added back, it is rebuilt.
    d.inject(&["--clear"]);
    raidctl(["add", &d.ms[0], &d.ms[2]]).ok();
    d.wait_for("the rebuild", |v| v["state"] == "clean");
    d.assert_data("after the rebuild");
}

#[test]
fn a_hung_member_is_failed_after_the_member_timeout_and_io_resumes() {
    let mut d = Drill::new("5", 3, &[]);
    d.inject(&["1", "--timeout-after", "0"]);
    // Reads and writes that reach it hang until the 2 s member timeout gives up on it.
    d.assert_data("reads with a hung member");
    let v = d.wait_for("the member failing", |v| {
        v["members"][1]["state"] == "faulty"
    });
    let reason = v["members"][1]["reason"].as_str().unwrap();
    assert!(
        reason.contains("no answer within the member timeout"),
        "{reason}"
    );
    assert_eq!(v["injected"][0]["timed_out"], true, "{v}");
    assert!(
        v["injected"][0]["injected"]["hung"].as_u64().unwrap() > 0,
        "{v}"
    );
    d.write_new("after-the-hang");
    d.assert_data("degraded after the hang");
    let human = raidctl(["status", &d.ms[0]]).stdout_str();
    assert!(
        human.contains("given up on by the member timeout"),
        "{human}"
    );
}

#[test]
fn latency_slows_a_member_without_changing_data_and_clear_stops_it() {
    let mut d = Drill::new("1", 2, &[]);
    d.inject(&["0", "--latency", "2ms,1ms"]);
    d.assert_data("reads with a slow member");
    d.write_new("with-latency");
    d.assert_data("after writes with a slow member");
    let v = d.status();
    assert_eq!(v["state"], "clean", "latency alone fails nothing: {v}");
    let delayed = v["injected"][0]["injected"]["delayed"].as_u64().unwrap();
    assert!(delayed > 0, "{v}");
    assert_eq!(v["injected"][0]["faults"]["latency_us"], 2000);
    d.inject(&["--clear"]);
    d.assert_data("after --clear");
    let v = d.status();
    assert_eq!(
        v["injected"][0]["injected"]["delayed"].as_u64().unwrap(),
        delayed,
        "no request is delayed after --clear: {v}"
    );
}

#[test]
fn bit_rot_is_caught_by_the_checksums_and_repaired_by_scrub() {
    let d = Drill::new("5", 3, &[]);
    // 5 % of the blocks of the first 8 MiB of slot 2's data area rot.
    let range = format!("{}-{}", d.data_offset, d.data_offset + (8 << 20));
    d.inject(&["2", "--corrupt-on-read", &format!("5@{range}")]);
    let r = raidctl(["scrub", "--repair", "--json", &d.ms[0]]);
    let v = r.json();
    let problems = v["problems"].as_array().unwrap();
    assert!(!problems.is_empty(), "scrub found no rot: {v}");
    assert_eq!(v["unrepaired"], 0, "{v}");
    assert!(
        problems.iter().all(|p| p["slot"] == 2),
        "only slot 2 rotted: {v}"
    );
    let m = d.member(2);
    assert!(m["checksum_errors"].as_u64().unwrap() > 0, "{m}");
    assert!(
        m["last_error"]
            .as_str()
            .unwrap()
            .contains("checksum mismatch at member offset"),
        "{m}"
    );
    // Repaired blocks were rewritten: a second scrub finds nothing, and reads are right.
    let v = raidctl(["scrub", "--json", &d.ms[0]]).ok().json();
    assert_eq!(v["problems"].as_array().unwrap().len(), 0, "{v}");
    d.assert_data("after the scrub");
}

#[test]
fn a_vanished_member_returns_stale_and_is_rebuilt() {
    let mut d = Drill::new("5", 3, &[]);
    d.inject(&["2", "--vanish"]);
    d.write_new("while-vanished");
    let m = d.member(2);
    assert_eq!(m["state"], "faulty", "{m}");
    assert!(
        m["reason"].as_str().unwrap().contains("No such device"),
        "{m}"
    );
    d.assert_data("degraded while vanished");
    let r = d.inject(&["2", "--return"]);
    assert!(
        r.stderr.contains("added back to slot 2 (stale: rebuilt)"),
        "{}",
        r.stderr
    );
    let v = d.wait_for("the rebuild of the returned member", |v| {
        v["state"] == "clean"
    });
    assert_eq!(v["members"][2]["state"], "active", "{v}");
    d.assert_data("after the returned member was rebuilt");
    // And the rebuilt member carries the data on its own: fail another one.
    raidctl(["fail", &d.ms[0], &d.ms[1]]).ok();
    d.assert_data("with the rebuilt member standing in");
}

#[test]
fn a_full_member_fails_on_write_and_reads_go_on() {
    let mut d = Drill::new("10", 4, &[]);
    d.inject(&["3", "--full"]);
    d.assert_data("reads from a full member");
    assert_eq!(d.member(3)["state"], "active", "reads do not fill it");
    d.write_new("onto-a-full-member");
    let m = d.member(3);
    assert_eq!(m["state"], "faulty", "{m}");
    assert!(
        m["reason"]
            .as_str()
            .unwrap()
            .contains("No space left on device"),
        "{m}"
    );
    d.assert_data("RAID10 with a full member failed");
}

#[test]
fn inject_refuses_what_it_cannot_do_and_status_forgets_faults_at_restart() {
    let mut d = Drill::new("5", 3, &[]);
    let r = raidctl(["inject", &d.ms[0], "--latency", "1ms"]);
    r.fails(2, &["name the member"]);
    raidctl(["inject", &d.ms[0], "7", "--full"]).fails(2, &["7 is not a member"]);
    raidctl(["inject", &d.ms[0], "1"]).fails(2, &["give a fault"]);
    raidctl(["inject", &d.ms[0], "1", "--read-errors", "lots"]).fails(2, &["lots"]);
    d.inject(&["1", "--latency", "1ms"]);
    assert!(d.srv.stop().success());
    // Not served: inject says how to drill offline, and status shows no faults.
    raidctl(["inject", &d.ms[0], "1", "--full"]).fails(2, &["not served", "--inject"]);
    d.srv = Server::start(&d.ms[0], &d.dir.path().join("nbd.sock"));
    let v = d.status();
    assert_eq!(v["injected"], serde_json::json!([]), "{v}");
    d.assert_data("after the restart");
}

#[test]
fn offline_commands_take_inject_for_drills_without_a_server() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "5", 3, "32M");
    let data = pattern("offline-drill", 4 << 20);
    write_at(Path::new(&ms[0]), 0, &data, dir.path());
    let spec = format!("{}:read-errors=100%", ms[1]);
    let r = raidctl(["read", &ms[0], "--length", "4M", "--inject", &spec]).ok();
    assert!(
        r.stdout == data,
        "a read around a member whose every read fails"
    );
    assert!(
        r.stderr.contains("raidctl: drill:") && r.stderr.contains("read errors"),
        "{}",
        r.stderr
    );
    // Offline, nothing stays: a plain read afterwards meets no faults.
    let r = raidctl(["read", &ms[0], "--length", "4M"]).ok();
    assert!(r.stdout == data && !r.stderr.contains("drill"));
    // Bit rot found and repaired by an offline scrub.
    let rot = format!("{}:corrupt-on-read=10@2M-6M", ms[2]);
    let v = raidctl(["scrub", "--repair", "--json", &ms[0], "--inject", &rot]).json();
    assert!(!v["problems"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["unrepaired"], 0, "{v}");
    // A hung member during an offline write: failed after the member timeout, the write done.
    let hang = format!("{}:timeout-after=0", ms[2]);
    let input = dir.path().join("new");
    let new = pattern("offline-new", 1 << 20);
    std::fs::write(&input, &new).unwrap();
    let r = raidctl([
        "write",
        &ms[0],
        "--input",
        input.to_str().unwrap(),
        "--inject",
        &hang,
        "--member-timeout",
        "1",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("the member timeout"), "{}", r.stderr);
    let v = status_run(["status", "--json", &ms[0]]).json();
    assert_eq!(v["members"][2]["state"], "faulty", "{v}");
    assert!(raidctl(["read", &ms[0], "--length", "1M"]).ok().stdout == new);
    // The member the hang failed is rebuilt under a slow survivor.
    raidctl(["add", "--no-rebuild", &ms[0], &ms[2]]).ok();
    let slow = format!("{}:latency=200us", ms[1]);
    let r = raidctl(["rebuild", &ms[0], "--inject", &slow]).ok();
    assert!(
        r.stderr.contains("drill:") && r.stderr.contains("delays"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains(" 0 delays"), "{}", r.stderr);
    assert_eq!(
        status_run(["status", "--json", &ms[0]]).json()["state"],
        "clean"
    );
    assert!(raidctl(["read", &ms[0], "--length", "1M"]).ok().stdout == new);
    // Bad specs are refused before anything is opened.
    raidctl(["read", &ms[0], "--inject", "nothing"]).fails(2, &["MEMBER:KIND"]);
    raidctl(["read", &ms[0], "--inject", &format!("{}:melt", ms[1])]).fails(2, &["unknown fault"]);
}

/// Runs `raidctl drill --json` and returns its report, asserting that it passed.
fn drill_passes(member: &str, scenario: &str, extra: &[&str]) -> Value {
    let mut args = vec!["drill", member, scenario, "--size", "8M", "--json"];
    args.extend_from_slice(extra);
    let r = raidctl(&args);
    let v = r.json();
    assert_eq!(r.code, 0, "{scenario} failed: {v}\n{}", r.stderr);
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(v["scenario"], scenario);
    assert_eq!(v["status_after"]["state"], "clean", "{v}");
    assert!(!v["timeline"].as_array().unwrap().is_empty(), "{v}");
    v
}

#[test]
fn every_drill_scenario_passes_at_small_size_on_raid6() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "6", 4, "24M");
    let data = pattern("kept-through-drills", 8 << 20);
    write_at(Path::new(&ms[0]), 0, &data, dir.path());
    let v = drill_passes(&ms[0], "bad-sectors-during-rebuild", &[]);
    assert_eq!(
        v["facts"]["unrecoverable_blocks"], 0,
        "RAID 6 loses nothing: {v}"
    );
    let v = drill_passes(&ms[0], "second-failure-during-rebuild", &[]);
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "member-failed"),
        "the second failure is an event: {v}"
    );
    let v = drill_passes(&ms[0], "bit-rot", &[]);
    assert!(v["facts"]["problems_found"].as_u64().unwrap() > 0, "{v}");
    drill_passes(&ms[0], "slow-member", &[]);
    drill_passes(&ms[0], "vanish-and-return", &[]);
    let spare = dir.path().join("spare");
    sparse_file(&spare, 24 << 20);
    let v = drill_passes(
        &ms[0],
        "smart-replacement",
        &["--spare", spare.to_str().unwrap()],
    );
    let slot = v["facts"]["replaced_slot"].as_u64().unwrap() as usize;
    assert!(
        v["facts"]["replaced_because"]
            .as_str()
            .unwrap()
            .contains("bytes written"),
        "files have no SMART: {v}"
    );
    // The replaced member is no longer in the array: name it by the spare.
    let st = status_run(["status", "--json", spare.to_str().unwrap()]).json();
    assert_eq!(
        st["members"][slot]["path"]
            .as_str()
            .map(|p| std::fs::canonicalize(p).unwrap()),
        Some(std::fs::canonicalize(&spare).unwrap())
    );
    // Every drill put the region back: the data written before them is there.
    let r = raidctl(["read", spare.to_str().unwrap(), "--length", "8M"]).ok();
    assert!(
        r.stdout == data,
        "the drills left the array's data as it was"
    );
}

#[test]
fn bad_sectors_during_a_raid5_rebuild_lose_only_their_rows_as_errors() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "5", 3, "24M");
    let v = drill_passes(&ms[0], "bad-sectors-during-rebuild", &[]);
    let lost = v["facts"]["blocks_lost"].as_u64().unwrap();
    assert!(
        (1..=16).contains(&lost),
        "one redundancy, used by the rebuild: the bad sectors' rows are lost, as errors: {v}"
    );
    assert!(
        v["facts"]["unrecoverable_blocks"].as_u64().unwrap() > 0,
        "{v}"
    );
    let human = raidctl(["drill", &ms[0], "slow-member", "--size", "4M"])
        .ok()
        .stdout_str();
    assert!(human.contains("the array behaved as documented"), "{human}");
    raidctl(["drill", &ms[0], "second-failure-during-rebuild"])
        .fails(2, &["survives 2 lost members", "raid5 survives 1"]);
    raidctl(["drill", &ms[0], "smart-replacement"]).fails(2, &["--spare"]);
    let mut srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    raidctl(["drill", &ms[0], "bit-rot"]).fails(2, &["served", "raidctl inject"]);
    assert!(srv.stop().success());
}

#[test]
fn clear_releases_a_hung_write_even_without_a_member_timeout() {
    // With --member-timeout 0 nothing gives up on a hung member: --clear is the way out, and
    // it must answer while a request hangs holding the superblock's lock.
    let d = Drill::new("5", 3, &["--member-timeout", "0"]);
    d.inject(&["1", "--timeout-after", "0"]);
    let src = d.dir.path().join("src.img");
    std::fs::write(&src, pattern("hung-write", 4 << 20)).unwrap();
    let mut copy = std::process::Command::new("nbdcopy")
        .args([src.to_str().unwrap(), &d.srv.uri()])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    let r = raidctl(["inject", &d.ms[0], "--clear"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "--clear waited {:?}",
        t.elapsed()
    );
    let start = Instant::now();
    let status = loop {
        if let Some(s) = copy.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the write stayed hung after --clear"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    let v = d.status();
    assert_eq!(v["members"][1]["state"], "active", "nothing failed: {v}");
    let back = d.dir.path().join("back.img");
    cmd("nbdcopy", &[&d.srv.uri(), back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap()[..4 << 20] == pattern("hung-write", 4 << 20)[..]);
}

#[test]
fn drills_refuse_what_they_cannot_do_and_leave_no_trace_of_their_faults() {
    let dir = tempdir();
    let ms = members_created_with(dir.path(), "5", 3, "24M", &["--no-checksums"]);
    raidctl(["drill", &ms[0], "bit-rot"]).fails(2, &["needs per-block checksums"]);
    std::fs::create_dir_all(dir.path().join("other")).unwrap();
    std::fs::create_dir_all(dir.path().join("r10")).unwrap();
    let other = members_created(&dir.path().join("other"), "1", 2, "16M");
    raidctl([
        "read",
        &ms[0],
        "--length",
        "4K",
        "--inject",
        &format!("{}:full", other[0]),
    ])
    .fails(2, &["not a member of this array"]);
    // Bad sectors during a RAID10 rebuild land on the failed slot's copy partner.
    let r10 = members_created(&dir.path().join("r10"), "10", 4, "24M");
    let v = drill_passes(&r10[0], "bad-sectors-during-rebuild", &[]);
    assert!(
        v["facts"]["blocks_lost"].as_u64().unwrap() > 0,
        "RAID10 K=2 loses the partner's bad rows: {v}"
    );
    // The injected errors are not left in the members' counters.
    let st = status_run(["status", "--json", &r10[0]]).json();
    for m in st["members"].as_array().unwrap() {
        assert_eq!(m["read_errors"], 0, "{m}");
    }
    // Events mark the drill's start and end.
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "drill" && e["detail"].as_str().unwrap().contains("started")),
        "{v}"
    );
}

#[test]
fn an_interrupted_drill_puts_the_region_back_and_a_killed_one_can_be_restored() {
    let dir = tempdir();
    let state = dir.path().join("state");
    let env = [("RAIDCTL_STATE_DIR", state.as_path())];
    let ms = members_created(dir.path(), "5", 3, "32M");
    let data = pattern("users-data", 16 << 20);
    write_at(Path::new(&ms[0]), 0, &data, dir.path());
    let start = |sig: i32, ms_wait: u64| {
        let child = std::process::Command::new(BIN)
            .args(["drill", &ms[0], "slow-member", "--size", "16M"])
            .env("RAIDCTL_STATE_DIR", &state)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(ms_wait));
        // SAFETY: signalling our own child by its PID.
        unsafe { libc::kill(child.id() as i32, sig) };
        child.wait_with_output().unwrap()
    };
    // SIGTERM: the drill stops at its next step and puts the region back itself.
    let o = start(libc::SIGTERM, 700);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        raidctl(["read", &ms[0], "--length", "16M"]).ok().stdout == data,
        "SIGTERM lost the region"
    );
    assert!(!state
        .join("drills")
        .read_dir()
        .map(|mut d| d.next().is_some())
        .unwrap_or(false));
    // SIGKILL: nothing runs at the end, but the region was saved first.
    let _ = start(libc::SIGKILL, 700);
    raidctl_env(&env, &["drill", &ms[0], "slow-member"]).fails(4, &["--restore"]);
    raidctl_env(&env, &["drill", &ms[0], "--restore"]).ok();
    assert!(
        raidctl(["read", &ms[0], "--length", "16M"]).ok().stdout == data,
        "--restore put the region back"
    );
    raidctl_env(&env, &["drill", &ms[0], "--restore"]).fails(2, &["no interrupted drill"]);
}

/// A RAID10 rebuild whose only source copy has unreadable sectors used to fail as a whole
/// ("no readable copy to rebuild slot 3 from"), leaving the array degraded; the RAID 5 path
/// already lost only those blocks. Now the mirror rebuild goes on block by block: the blocks
/// no copy can read read as errors afterwards, everything else is rebuilt.
#[test]
fn a_raid10_rebuild_over_an_unreadable_copy_loses_only_those_blocks_as_errors() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "10", 4, "24M");
    let data = pattern("r10-rebuild", 8 << 20);
    write_at(Path::new(&ms[0]), 0, &data, dir.path());
    raidctl(["fail", "--no-rebuild", &ms[0], &ms[3]]).ok();
    // A new device (the failed member itself would be re-added: nothing written since it
    // left, so nothing to rebuild).
    let new = dir.path().join("new");
    std::fs::File::create(&new)
        .unwrap()
        .set_len(24 << 20)
        .unwrap();
    raidctl(["add", "--no-rebuild", &ms[0], new.to_str().unwrap()]).ok();
    // Slot 2 is slot 3's copy partner; 32 KiB of it unreadable, inside the data.
    let off = raidctl(["examine", "--json", &ms[0]]).ok().json()["data_offset"]
        .as_u64()
        .unwrap()
        + (1 << 20);
    let bad = format!("{}:read-errors={off}+32K", ms[2]);
    let r = raidctl(["rebuild", &ms[0], "--inject", &bad]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("could not be restored"), "{}", r.stderr);
    let v = status_run(["status", "--json", &ms[0]]).json();
    assert_eq!(v["state"], "clean", "{v}");
    // The bad sectors were injected for the rebuild only: now slot 2 reads again, and the
    // rebuilt member's poisoned blocks (their checksums match nothing) are read from it and
    // repaired. Every byte reads right.
    let r = raidctl(["read", &ms[0], "--length", "8M"]).ok();
    assert!(r.stdout == data, "no wrong data");
    // Scrub finds the poisoned blocks on the rebuilt member and rewrites them from slot 2.
    let v = raidctl(["scrub", "--repair", "--json", &ms[0]]).json();
    assert_eq!(v["unrepaired"], 0, "{v}");
    assert!(
        v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["slot"] == 3),
        "{v}"
    );
    let v = raidctl(["scrub", "--json", &ms[0]]).ok().json();
    assert_eq!(v["problems"].as_array().unwrap().len(), 0, "{v}");
}

/// Issue 31 bug 4: `drill vanish-and-return` killed with -9 a few seconds in, then
/// `drill --restore` as documented, left 10 of 42 MiB of user data the drill never wrote
/// unreadable for good: the member the drill took away was failed with the drill's writes in
/// flight, and every row of the bitmap's dirty regions went on the bad-block list at the next
/// open (the mechanism of bug 3). The region is put back and nothing outside it is lost.
#[test]
fn a_killed_vanish_and_return_drill_loses_no_user_data_outside_its_region() {
    let dir = tempdir();
    let state = dir.path().join("state");
    let env = [("RAIDCTL_STATE_DIR", state.as_path())];
    let ms = members_created(dir.path(), "5", 4, "32M");
    let size = 42 << 20;
    let data = pattern("users-data-42", size);
    write_at(Path::new(&ms[0]), 0, &data, dir.path());
    let mut killed = 0;
    for wait in [300u64, 500, 800, 1200] {
        let child = std::process::Command::new(BIN)
            .args(["drill", &ms[0], "vanish-and-return"])
            .env("RAIDCTL_STATE_DIR", &state)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(wait));
        // SAFETY: signalling our own child by its PID.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let o = child.wait_with_output().unwrap();
        if o.status.code() == Some(0) {
            continue; // finished before the kill: nothing to restore
        }
        killed += 1;
        let r = raidctl_env(&env, &["drill", &ms[0], "--restore"]);
        assert!(
            r.code == 0 || r.stderr.contains("no interrupted drill"),
            "{}",
            r.stderr
        );
        let st = status_run(["status", "--json", &ms[0]]).json();
        let listed = listed_bad_blocks(&st);
        assert_eq!(
            listed, 0,
            "after a kill at {wait} ms: blocks listed as lost: {st}"
        );
        let r = raidctl(["read", &ms[0], "--length", &size.to_string()]);
        assert_eq!(r.code, 0, "after a kill at {wait} ms: {}", r.stderr);
        assert!(
            r.stdout == data,
            "after a kill at {wait} ms: user data changed"
        );
        // Let any rebuild the drill left to do finish before the next trial.
        if status_run(["status", "--json", &ms[0]]).json()["state"] != "clean" {
            let r = raidctl(["rebuild", &ms[0]]);
            assert_eq!(r.code, 0, "{}", r.stderr);
        }
    }
    assert!(killed > 0, "every drill finished before its kill");
}

/// An array of `level` over `n` members of 16 MiB, every byte of it written with a known
/// pattern: (members, the data, a new file for slot 1 as large as a member).
fn full_array(dir: &Path, level: &str, n: usize) -> (Vec<String>, Vec<u8>, std::path::PathBuf) {
    let ms = members_created(dir, level, n, "16M");
    let size = raidctl(["examine", "--json", &ms[0]]).ok().json()["array_bytes"]
        .as_u64()
        .unwrap();
    let data = pattern(&format!("rot-{level}"), size as usize);
    write_at(Path::new(&ms[0]), 0, &data, dir);
    let new = dir.join("new");
    sized_like(&new, Path::new(&ms[1]));
    (ms, data, new)
}

/// What is wrong with the array of `ms` read back with no fault, against `data`: wrong
/// blocks read with exit 0, a failed read, problems a scrub finds. Empty when nothing is.
fn rot_left(ms: &[String], data: &[u8]) -> Vec<String> {
    let mut wrong = Vec::new();
    let r = read_at(Path::new(&ms[0]), 0, data.len());
    if r.code != 0 {
        wrong.push(format!("the read failed (exit {}): {}", r.code, r.stderr));
    } else {
        let bad = r
            .stdout
            .chunks(4096)
            .zip(data.chunks(4096))
            .filter(|(a, b)| a != b)
            .count();
        if r.stdout.len() != data.len() || bad > 0 {
            wrong.push(format!(
                "{bad} blocks of {} read back wrong with exit 0",
                data.len() / 4096
            ));
        }
    }
    let v = raidctl(["scrub", "--json", &ms[0]]).json();
    let problems = v["problems"].as_array().map_or(0, |p| p.len());
    if problems > 0 {
        wrong.push(format!("scrub finds {problems} problems"));
    }
    wrong
}

/// The levels a replace is checked on: (level, members).
const REPLACE_LEVELS: [(&str, usize); 5] = [("5", 3), ("f1", 3), ("6", 4), ("1", 2), ("10", 4)];

#[test]
fn online_replace_of_a_member_returning_rotten_reads_copies_no_rot() {
    let mut failed = Vec::new();
    for (level, n) in REPLACE_LEVELS {
        let dir = tempdir();
        let (ms, data, new) = full_array(dir.path(), level, n);
        let rot = format!("{}:corrupt-on-read=3%", ms[1]);
        let mut srv = Server::start_with(&ms[0], &dir.path().join("nbd.sock"), &["--inject", &rot]);
        raidctl(["replace", &ms[0], &ms[1], new.to_str().unwrap()]).ok();
        let start = Instant::now();
        let v = loop {
            let v = status_run(["status", "--json", &ms[0]]).json();
            if v["state"] == "clean" && v["members"][1]["path"] == new.to_str().unwrap() {
                break v;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "raid{level}: the replace never finished: {v}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let rotten = v["injected"][0]["injected"]["corrupted_blocks"]
            .as_u64()
            .unwrap_or(0);
        assert!(
            rotten > 0,
            "raid{level}: the old member returned no rot: {v}"
        );
        assert!(srv.stop().success(), "raid{level}: serve stopped uncleanly");
        let wrong = rot_left(&ms, &data);
        if !wrong.is_empty() {
            failed.push(format!("raid{level}: {}", wrong.join("; ")));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn offline_replace_of_a_member_returning_rotten_reads_copies_no_rot() {
    let mut failed = Vec::new();
    for (level, n) in REPLACE_LEVELS {
        let dir = tempdir();
        let (ms, data, new) = full_array(dir.path(), level, n);
        raidctl([
            "replace",
            "--no-rebuild",
            &ms[0],
            &ms[1],
            new.to_str().unwrap(),
        ])
        .ok();
        let rot = format!("{}:corrupt-on-read=3%", ms[1]);
        let r = raidctl(["rebuild", &ms[0], "--inject", &rot]);
        assert!(
            r.stderr.contains("rotten blocks") && !r.stderr.contains(" 0 rotten blocks"),
            "raid{level}: the old member returned no rot: {}",
            r.stderr
        );
        if r.code != 0 {
            failed.push(format!("raid{level}: the replace failed: {}", r.stderr));
            continue;
        }
        let v = status_run(["status", "--json", &ms[0]]).json();
        assert_eq!(v["state"], "clean", "raid{level}: {v}");
        let wrong = rot_left(&ms, &data);
        if !wrong.is_empty() {
            failed.push(format!("raid{level}: {}", wrong.join("; ")));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// A replace that meets a block nothing can verify or rebuild (here: the same row rotted on
/// two of a RAID5's three members, more than its parity covers) used to stop with the error
/// at that row, every time it was run: a failing disk could never be replaced. It now copies
/// such a block as it is, keeping the old member's checksum entry, and completes: the rotten
/// blocks read as errors on the new member, exactly as before, never as data, and every other
/// block reads back right.
#[test]
fn a_replace_over_a_block_nothing_can_rebuild_completes_and_never_serves_it() {
    let dir = tempdir();
    let (ms, data, new) = full_array(dir.path(), "5", 3);
    let data_off = raidctl(["examine", "--json", &ms[0]]).ok().json()["data_offset"]
        .as_u64()
        .unwrap();
    // Row 40 (chunk 64 KiB): the same block rots on slots 0 and 1.
    let off = data_off + 40 * (64 << 10) + 8192 + 1000;
    for m in &ms[..2] {
        rot_bytes(m, off);
    }
    let r = raidctl(["replace", &ms[1], &ms[0], new.to_str().unwrap()]);
    assert_eq!(r.code, 0, "the replace stopped: {}", r.stderr);
    let v = status_run(["status", "--json", &ms[1]]).json();
    assert_eq!(v["state"], "clean", "{v}");
    assert!(
        v["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["path"].as_str().is_some_and(|p| p.ends_with("new"))),
        "the new member is in: {v}"
    );
    // Every block reads back right, or fails: the row's two rotten blocks (in row 40's data
    // chunks), never wrong data with exit 0.
    let array = Path::new(&ms[1]);
    let row = 2 * (64 << 10);
    for (from, to) in [(0, 40 * row), (41 * row, data.len())] {
        let r = read_at(array, from as u64, to - from);
        assert_eq!(r.code, 0, "read {from}..{to}: {}", r.stderr);
        assert!(r.stdout == data[from..to], "{from}..{to} read back wrong");
    }
    let mut failed = Vec::new();
    for i in 40 * row / 4096..41 * row / 4096 {
        let r = read_at(array, (i * 4096) as u64, 4096);
        if r.code != 0 {
            failed.push(i);
        } else {
            assert!(
                r.stdout == data[i * 4096..(i + 1) * 4096],
                "block {i} wrong with exit 0"
            );
        }
    }
    assert!(
        !failed.is_empty() && failed.len() <= 2,
        "only the rotten blocks of row 40 may fail: {failed:?}"
    );
}

/// A rebuild from survivors returning rotten reads, where redundancy is left to tell (RAID6
/// with one survivor rotting, and a three-way mirror missing one member with both survivors
/// rotting in different places): no rot reaches the new member.
#[test]
fn a_rebuild_over_a_survivor_returning_rotten_reads_copies_no_rot() {
    let mut failed = Vec::new();
    for (level, n) in [("6", 4), ("1", 3)] {
        let dir = tempdir();
        let (ms, data, new) = full_array(dir.path(), level, n);
        raidctl(["fail", &ms[0], &ms[1]]).ok();
        raidctl(["remove", &ms[0], &ms[1]]).ok();
        raidctl(["add", "--no-rebuild", &ms[0], new.to_str().unwrap()]).ok();
        // A mirror rebuild reads whichever surviving copy it chooses: both survivors rot, in
        // disjoint member ranges, so every block still has one good copy and the copy read
        // returns rot either way (with rot on one survivor only, a rebuild that read the
        // other one proved nothing and the test failed its own precondition).
        let rot = format!("{}:corrupt-on-read=3@0-10M", ms[2]);
        let rot0 = format!("{}:corrupt-on-read=3@10M-16M", ms[0]);
        let mut args = vec!["rebuild", ms[0].as_str(), "--inject", rot.as_str()];
        if level == "1" {
            args.extend(["--inject", rot0.as_str()]);
        }
        let r = raidctl(&args);
        assert!(
            r.stderr
                .lines()
                .any(|l| l.contains("rotten blocks") && !l.contains(" 0 rotten blocks")),
            "raid{level}: no survivor returned rot: {}",
            r.stderr
        );
        if r.code != 0 {
            failed.push(format!("raid{level}: the rebuild failed: {}", r.stderr));
            continue;
        }
        let wrong = rot_left(&ms, &data);
        if !wrong.is_empty() {
            failed.push(format!("raid{level}: {}", wrong.join("; ")));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Without checksums a RAID6 replace checks every block it reads from the old member against
/// both parities of its row: a block the syndromes name (the old member's reads come back
/// rotten) is rebuilt from the rest of the row, never copied as read. Before, every rotten read
/// reached the new member and read back wrong with exit 0.
#[test]
fn a_raid6_replace_without_checksums_never_copies_blocks_the_syndromes_name() {
    for n in [4, 6] {
        let dir = tempdir();
        let (ms, data) = plain_array_replacing_slot_1(dir.path(), "6", n);
        replace_under_rot(&ms, &format!("raid6 n={n}"));
        let v = status_run(["status", "--json", &ms[0]]).json();
        let new = dir.path().join("new");
        assert_eq!(v["members"][1]["path"], new.to_str().unwrap(), "{v}");
        // Every byte reads back right and scrub finds nothing.
        let wrong = rot_left(&ms, &data);
        assert!(wrong.is_empty(), "raid6 n={n}: {wrong:?}");
    }
}

/// Without checksums a replace on a mirror of three or more copies checks every block it reads
/// from the old member against the chunk's other copies: where a strict majority holds other
/// bytes (the old member's reads come back rotten), those are copied. Before, every rotten read
/// reached the new member.
#[test]
fn a_three_copy_mirror_replace_without_checksums_copies_what_the_majority_holds() {
    for (level, n) in [("1", 3), ("10", 4)] {
        let dir = tempdir();
        let copies: &[&str] = if level == "10" {
            &["--copies", "3"]
        } else {
            &[]
        };
        let (ms, data) = plain_array_replacing_slot_1_with(dir.path(), level, n, copies);
        let new = dir.path().join("new");
        replace_under_rot(&ms, &format!("raid{level}"));
        let v = status_run(["status", "--json", &ms[0]]).json();
        assert_eq!(v["members"][1]["path"], new.to_str().unwrap(), "{v}");
        // Every byte reads back right and scrub finds nothing.
        let wrong = rot_left(&ms, &data);
        assert!(wrong.is_empty(), "raid{level}: {wrong:?}");
    }
}

/// Without checksums RAID5 cannot tell which block of a row that disagrees with its parity is
/// wrong: a replace could list the old member's block as lost rather than copy it as read.
#[test]
#[ignore = "a RAID5 replace without checksums copies what it reads, as md does and as scrub takes RAID5 data as right without checksums: nothing tells which block of a disagreeing row is wrong (README Limits)"]
fn a_raid5_replace_without_checksums_copies_only_blocks_parity_agrees_with() {
    let dir = tempdir();
    let (ms, data) = plain_array_replacing_slot_1(dir.path(), "5", 3);
    replace_under_rot(&ms, "raid5");
    // Every MiB reads right or fails; some fail (the rotten data blocks).
    let (mut failed, mut wrong) = (0, 0);
    for (i, want) in data.chunks(1 << 20).enumerate() {
        let r = read_at(Path::new(&ms[0]), (i << 20) as u64, want.len());
        if r.code != 0 {
            failed += 1;
        } else if r.stdout != want {
            wrong += 1;
        }
    }
    assert_eq!(wrong, 0, "MiB read back wrong with exit 0");
    assert!(failed > 0, "the rotten blocks read as errors");
    let v = status_run(["status", "--json", &ms[0]]).json();
    assert!(
        v["members"][1]["bad_blocks"].as_u64().unwrap_or(0) > 0,
        "the lost blocks are listed: {v}"
    );
}

/// Without checksums a mirror replace copies the old member's block only where the other copy
/// agrees: a 2-way RAID1 whose old member returns rot stops the replace with the error (the
/// old member keeps serving, nothing rotten reaches the new one); with no rot it completes.
#[test]
#[ignore = "a mirror replace without checksums copies the old member's copy as read, as md does (README Limits): the fix (commits 3645c7e..45fa066, reachable from merge 82510dd) made simulator seed 958 fail and was not kept (issue 31)"]
fn a_mirror_replace_without_checksums_copies_only_blocks_the_copies_agree_on() {
    let dir = tempdir();
    let (ms, data) = plain_array_replacing_slot_1(dir.path(), "1", 2);
    let rot = format!("{}:corrupt-on-read=3%", ms[1]);
    let r = raidctl(["rebuild", &ms[0], "--inject", &rot]);
    assert_ne!(r.code, 0, "the replace copied blocks nothing verifies");
    assert!(r.stderr.contains("differ"), "{}", r.stderr);
    let v = status_run(["status", "--json", &ms[0]]).json();
    assert_eq!(v["members"][1]["path"], ms[1].as_str(), "{v}");
    assert!(read_at(Path::new(&ms[0]), 0, data.len()).ok().stdout == data);
    // Without the rot the copies agree and the replace completes.
    raidctl(["rebuild", &ms[0]]).ok();
    let v = status_run(["status", "--json", &ms[0]]).json();
    assert_eq!(v["state"], "clean", "{v}");
    let new = dir.path().join("new");
    assert_eq!(v["members"][1]["path"], new.to_str().unwrap(), "{v}");
    assert!(rot_left(&ms, &data).is_empty());
}

/// Runs the replace registered on `ms` (slot 1's member by a new one) while the old member's
/// reads come back rotten (3 % of blocks): it completes, and some reads were rotten.
fn replace_under_rot(ms: &[String], what: &str) {
    let rot = format!("{}:corrupt-on-read=3%", ms[1]);
    let r = raidctl(["rebuild", "--json", &ms[0], "--inject", &rot]);
    assert_eq!(r.code, 0, "{what}: {}", r.stderr);
    assert!(
        !r.stderr.contains(" 0 rotten blocks"),
        "{what}: {}",
        r.stderr
    );
}

/// An array of `level` over `n` members of 16 MiB without checksums, every byte written with a
/// known pattern, and a replace of slot 1 by a new file registered but not yet run: (members,
/// the data).
fn plain_array_replacing_slot_1(dir: &Path, level: &str, n: usize) -> (Vec<String>, Vec<u8>) {
    plain_array_replacing_slot_1_with(dir, level, n, &[])
}

/// [`plain_array_replacing_slot_1`] with more `create` flags.
fn plain_array_replacing_slot_1_with(
    dir: &Path,
    level: &str,
    n: usize,
    extra: &[&str],
) -> (Vec<String>, Vec<u8>) {
    let flags: Vec<&str> = ["--no-checksums"].iter().chain(extra).copied().collect();
    let ms = members_created_with(dir, level, n, "16M", &flags);
    let size = raidctl(["examine", "--json", &ms[0]]).ok().json()["array_bytes"]
        .as_u64()
        .unwrap() as usize;
    let data = pattern(&format!("plain-{level}"), size);
    write_at(Path::new(&ms[0]), 0, &data, dir);
    let new = dir.join("new");
    sized_like(&new, Path::new(&ms[1]));
    raidctl([
        "replace",
        "--no-rebuild",
        &ms[0],
        &ms[1],
        new.to_str().unwrap(),
    ])
    .ok();
    (ms, data)
}
