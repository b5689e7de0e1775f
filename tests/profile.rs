//! `raidctl profile` through the binary: short profiles of files and loop devices, what it
//! refuses, an interrupted profile, and `create --overprovision auto` applying saved profiles.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;

/// Flags of a short profile: rounds of one second, a steady-state window's worth per level.
const SHORT: [&str; 4] = ["--round", "1", "--time-per-level", "5"];

fn profile(state: &Path, dev: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["profile", dev.to_str().unwrap()];
    args.extend_from_slice(&SHORT);
    args.extend_from_slice(extra);
    raidctl_env(&[("RAIDCTL_STATE_DIR", state)], &args)
}

fn saved_profiles(state: &Path) -> Vec<serde_json::Value> {
    let Ok(d) = std::fs::read_dir(state.join("profiles")) else {
        return Vec::new();
    };
    d.flatten()
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap())
        .collect()
}

#[test]
fn a_short_profile_of_a_loop_device_measures_every_level_plots_and_saves_it() {
    let dir = tempdir();
    let state = dir.path().join("state");
    let backing = dir.path().join("ssd.img");
    sparse_file(&backing, 48 << 20);
    let lo = LoopDev::attach(&backing);
    let svg = dir.path().join("curve.svg");
    let r = profile(
        &state,
        &lo.dev,
        &[
            "--levels",
            "50,0,20",
            "--json",
            "--plot",
            svg.to_str().unwrap(),
        ],
    )
    .ok();
    let v = r.json();
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(v["flash_translation_layer"], false, "{v}");
    let levels = v["levels"].as_array().unwrap();
    let pcts: Vec<f64> = levels
        .iter()
        .map(|l| l["overprovision_pct"].as_f64().unwrap())
        .collect();
    assert_eq!(
        pcts,
        vec![0.0, 20.0, 50.0],
        "levels are measured in ascending order"
    );
    for l in levels {
        let rounds = l["rounds"].as_array().unwrap();
        assert!(
            (1..=5).contains(&rounds.len()),
            "a level runs at most --time-per-level / --round rounds: {l}"
        );
        assert!(l["iops"].as_f64().unwrap() > 0.0, "{l}");
        let lat = &l["latency_us"];
        assert!(
            lat["p50"].as_f64().unwrap() <= lat["p99"].as_f64().unwrap()
                && lat["p99"].as_f64().unwrap() <= lat["max"].as_f64().unwrap(),
            "{lat}"
        );
        if l["steady"] == true {
            assert_eq!(l["steady_at_round"], rounds.len(), "{l}");
            assert!(l["window"]["range"].as_f64().unwrap() <= 0.2, "{l}");
        }
    }
    // A loop device has no flash translation layer: the smallest level, and it says why.
    assert_eq!(v["recommendation"]["basis"], "no-flash", "{v}");
    assert_eq!(v["recommendation"]["overprovision_pct"], 0.0, "{v}");
    assert!(
        v["notes"][0]
            .as_str()
            .unwrap()
            .contains("no flash translation layer"),
        "{v}"
    );
    // The last level TRIMmed its reserve (the top half): the backing file's blocks there are
    // gone, while the sequential fills had allocated all of it.
    let allocated = std::fs::metadata(&backing).unwrap().blocks() * 512;
    assert!(
        allocated <= (48 << 20) * 52 / 100,
        "{allocated} bytes still allocated after TRIM of the 50 % reserve"
    );
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&svg_text).unwrap();
    let text: String = doc
        .descendants()
        .filter(|n| n.is_text())
        .map(|n| n.text().unwrap())
        .collect();
    assert!(text.contains("over-provisioning"), "{text}");
    assert!(text.contains("IOPS"), "{text}");
    let saved = saved_profiles(&state);
    assert_eq!(saved.len(), 1);
    assert_eq!(
        saved[0]["identity"]["key"],
        format!(
            "file:{}",
            std::fs::canonicalize(&backing).unwrap().display()
        ),
        "a loop device is named by its backing file"
    );
    assert_eq!(saved[0]["levels"], v["levels"]);
}

#[test]
fn profile_refuses_a_device_holding_ext4_unless_forced() {
    let dir = tempdir();
    let state = dir.path().join("state");
    let img = dir.path().join("fs.img");
    sparse_file(&img, 24 << 20);
    assert!(Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&img)
        .status()
        .expect("mkfs.ext4 (e2fsprogs) is needed")
        .success());
    let lo = LoopDev::attach(&img);
    let dev = lo.dev.clone();
    let before = hashes(std::slice::from_ref(&img));
    profile(&state, &dev, &["--levels", "0"]).fails(
        4,
        &[dev.to_str().unwrap(), "ext2/3/4 file system", "--force"],
    );
    assert_eq!(
        hashes(std::slice::from_ref(&img)),
        before,
        "nothing written"
    );
    assert!(saved_profiles(&state).is_empty());
    let r = profile(
        &state,
        &dev,
        &["--levels", "0", "--force", "--no-precondition", "--no-save"],
    )
    .ok();
    let out = r.stdout_str();
    assert!(
        out.contains("IOPS") && out.contains("recommended: 0 %"),
        "{out}"
    );
    assert!(
        r.stderr.contains("no flash translation layer"),
        "{}",
        r.stderr
    );
    assert!(saved_profiles(&state).is_empty(), "--no-save saves nothing");
    assert_ne!(
        hashes(std::slice::from_ref(&img)),
        before,
        "--force profiled it"
    );
}

#[test]
fn profile_refuses_bad_flags_and_array_members_and_writes_nothing() {
    let dir = tempdir();
    let state = dir.path().join("state");
    let m = members_created(dir.path(), "1", 2, "16M");
    let member = Path::new(&m[0]);
    let before = hashes(&[member.to_path_buf()]);
    profile(&state, member, &["--levels", "0"]).fails(4, &["holds slot 0", "--force"]);
    let spare = dir.path().join("spare");
    sparse_file(&spare, 16 << 20);
    for (flags, needle) in [
        (&["--levels", "95"][..], "--levels 95"),
        (&["--max-rounds", "3"][..], "--max-rounds 3"),
        (&["--queue-depth", "0"][..], "--queue-depth 0"),
        (&["--target-iops", "0"][..], "--target-iops"),
        (
            &["--time-per-level", "1", "--round", "2"][..],
            "--time-per-level",
        ),
        (
            &["--time-per-level", "4", "--round", "1"][..],
            "steady-state window",
        ),
    ] {
        // Without the SHORT flags: each case sets only what it tests.
        let mut args = vec!["profile", spare.to_str().unwrap()];
        args.extend_from_slice(flags);
        let r = raidctl_env(&[("RAIDCTL_STATE_DIR", &state)], &args).fails(2, &[needle]);
        assert!(
            !r.stderr.contains("cannot be used multiple times"),
            "{}",
            r.stderr
        );
    }
    assert_eq!(hashes(&[member.to_path_buf()]), before);
    assert_eq!(
        std::fs::metadata(&spare).unwrap().blocks(),
        0,
        "refused flags write nothing"
    );
}

/// A profile of `levels` with rounds of a second, stopped by SIGINT after `ms`.
fn interrupted(state: &Path, dev: &Path, levels: &str, ms: u64) -> std::process::Output {
    let child = Command::new(BIN)
        .args(["profile", dev.to_str().unwrap(), "--levels", levels])
        .args([
            "--round",
            "1",
            "--time-per-level",
            "60",
            "--no-precondition",
        ])
        .env("RAIDCTL_STATE_DIR", state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(ms));
    // SAFETY: signalling our own child by its PID.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    child.wait_with_output().unwrap()
}

#[test]
fn an_interrupted_profile_says_how_far_it_got_and_auto_will_not_use_it() {
    let dir = tempdir();
    let state = dir.path().join("state");
    let dev = dir.path().join("ssd.img");
    sparse_file(&dev, 16 << 20);
    let o = interrupted(&state, &dev, "0,30", 3500);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("profile interrupted during round") && err.contains("of the 0 % level"),
        "{err}"
    );
    assert!(err.contains("saved as incomplete"), "{err}");
    let saved = saved_profiles(&state);
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0]["complete"], false);
    assert!(
        !saved[0]["levels"][0]["rounds"]
            .as_array()
            .unwrap()
            .is_empty(),
        "the rounds done are kept: {}",
        saved[0]
    );
    let other = dir.path().join("other.img");
    sparse_file(&other, 16 << 20);
    let auto = || {
        raidctl_env(
            &[("RAIDCTL_STATE_DIR", &state)],
            &[
                "create",
                "--level",
                "1",
                "--overprovision",
                "auto",
                dev.to_str().unwrap(),
                other.to_str().unwrap(),
            ],
        )
    };
    auto().fails(2, &["profile of", "was interrupted"]);
    // A complete profile, then a newer interrupted one: the complete one is what counts.
    profile(&state, &dev, &["--levels", "0", "--no-precondition"]).ok();
    assert_eq!(interrupted(&state, &dev, "0", 2500).status.code(), Some(1));
    assert_eq!(saved_profiles(&state).len(), 3);
    auto().fails(2, &[other.to_str().unwrap(), "no saved profile"]);
}

#[test]
fn a_write_error_stops_the_profile_and_names_device_and_offset() {
    let dir = tempdir();
    let state = dir.path().join("state");
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    assert!(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap()
        .success());
    // A 32 MiB sparse file on 8 MiB of memory: random writes run out of room.
    let dev = mnt.join("ssd.img");
    sparse_file(&dev, 32 << 20);
    let r = profile(&state, &dev, &["--levels", "0", "--no-precondition"]);
    let _ = std::fs::remove_file(&dev);
    assert!(Command::new("umount").arg(&mnt).status().unwrap().success());
    let r = r.fails(
        1,
        &[
            "profile failed during round 1 of the 0 % level",
            "random 4 KiB write",
            dev.to_str().unwrap(),
            "at offset",
            "No space left on device",
        ],
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

#[test]
fn create_overprovision_auto_applies_each_members_saved_profile() {
    let dir = tempdir();
    let state = dir.path().join("state");
    let env = [("RAIDCTL_STATE_DIR", state.as_path())];
    let m: Vec<_> = (0..3).map(|i| dir.path().join(format!("ssd{i}"))).collect();
    for f in &m {
        sparse_file(f, 32 << 20);
    }
    let s = strs(&m);
    let create_auto = |members: &[&str], extra: &[&str]| {
        let mut args = vec!["create", "--level", "1", "--overprovision", "auto"];
        args.extend_from_slice(extra);
        args.extend_from_slice(members);
        raidctl_env(&env, &args)
    };
    // Without profiles: refused, naming the member, and nothing written.
    let before = hashes(&m[..2]);
    create_auto(&[&s[0], &s[1]], &[]).fails(2, &[&s[0], "no saved profile", "raidctl profile"]);
    assert_eq!(hashes(&m[..2]), before);
    for f in &m[..2] {
        profile(&state, f, &["--levels", "0,10", "--no-precondition"]).ok();
    }
    // A file's own profile recommends the smallest level (it has no flash translation layer).
    // Give member 1 what an SSD's profile could: 25 %.
    let key1 = format!("file:{}", std::fs::canonicalize(&m[1]).unwrap().display());
    let p1 = std::fs::read_dir(state.join("profiles"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| std::fs::read_to_string(p).unwrap().contains(&key1))
        .expect("profile of ssd1");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p1).unwrap()).unwrap();
    assert_eq!(doc["recommendation"]["overprovision_pct"], 0.0);
    doc["recommendation"]["overprovision_pct"] = 25.0.into();
    std::fs::write(&p1, doc.to_string()).unwrap();
    // Member 2 has no profile: still refused.
    create_auto(&[&s[0], &s[2]], &[]).fails(2, &[&s[2], "no saved profile"]);
    let r = create_auto(&[&s[0], &s[1]], &["--json"]).ok();
    assert!(
        r.stderr.contains("recommends 25 %") && r.stderr.contains("recommends 0 %"),
        "{}",
        r.stderr
    );
    let auto_size = r.json()["size_bytes"].as_u64().unwrap();
    // The same as 25 % given by hand on members of the same size: the array reserves on every
    // member at least its own recommendation.
    let manual: Vec<_> = (0..2)
        .map(|i| dir.path().join(format!("hand{i}")))
        .collect();
    for f in &manual {
        sparse_file(f, 32 << 20);
    }
    let mut args = vec!["create", "--level", "1", "--overprovision", "25", "--json"];
    let hs = strs(&manual);
    args.extend(hs.iter().map(|s| s.as_str()));
    let hand = raidctl(&args).ok().json()["size_bytes"].as_u64().unwrap();
    assert_eq!(auto_size, hand);
    let full = raidctl_env(&env, &["status", "--json", &s[0]]).json();
    assert!(auto_size < (32 << 20) * 3 / 4, "{full}");
    // A member that changed size since it was profiled is refused.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&m[2])
        .unwrap()
        .set_len(40 << 20)
        .unwrap();
    profile(&state, &m[2], &["--levels", "0", "--no-precondition"]).ok();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&m[2])
        .unwrap()
        .set_len(48 << 20)
        .unwrap();
    let other = dir.path().join("ssd3");
    sparse_file(&other, 32 << 20);
    create_auto(&[&s[2], other.to_str().unwrap()], &[]).fails(
        2,
        &[
            &s[2],
            "is 50331648 bytes now",
            "measured 41943040",
            "profile it again",
        ],
    );
}
