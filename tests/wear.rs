//! Wear reports through the real binary: skew expected next to observed, projections from a
//! recorded history (clock set with RAIDCTL_NOW), SMART files, --check, --prometheus, the
//! planner, the simulator and its SVG, and inspect.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

fn raidctl_at(now: u64, args: &[&str]) -> Run {
    let o = Command::new(BIN)
        .args(args)
        .env("RAIDCTL_NOW", now.to_string())
        .output()
        .unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: o.stdout,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn array(dir: &Path, level: &str, extra: &[&str]) -> Vec<String> {
    let m: Vec<PathBuf> = (0..4).map(|i| dir.join(format!("m{i}"))).collect();
    let ms = strs(&m);
    let mut args = vec!["create", "--level", level, "--size", "40M"];
    args.extend_from_slice(extra);
    args.extend(ms.iter().map(|s| s.as_str()));
    raidctl(&args).ok();
    ms
}

/// `n` members of `size` in `dir` (m0, m1, ...), created at `level` with rated endurance
/// `endurance` TB at Unix time `t0` (the first history sample): their paths.
fn rated_at(
    dir: &Path,
    t0: u64,
    level: &str,
    n: usize,
    size: &str,
    endurance: &str,
) -> Vec<String> {
    let m: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("m{i}"))).collect();
    let ms = strs(&m);
    let mut args = vec![
        "create",
        "--level",
        level,
        "--size",
        size,
        "--endurance",
        endurance,
    ];
    args.extend(ms.iter().map(|s| s.as_str()));
    raidctl_at(t0, &args).ok();
    ms
}

fn random_4k_writes(member: &str, count: usize, dir: &Path) {
    let size = status_run(["status", "--json", member]).json()["size_bytes"]
        .as_u64()
        .unwrap();
    let mut x: u64 = 12345;
    for i in 0..count {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let off = (x >> 20) % (size / 4096) * 4096;
        write_at(
            Path::new(member),
            off,
            &pattern(&format!("w{i}"), 4096),
            dir,
        );
    }
}

fn shares(report: &serde_json::Value, key: &str) -> Vec<f64> {
    report["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m[key].as_f64().unwrap())
        .collect()
}

#[test]
fn wear_shows_expected_next_to_observed_skew() {
    let dir = tempdir();
    let f1 = array(
        &dir.path().join("f1").tap_mkdir(),
        "f1",
        &["--skew", "3,1,1,1"],
    );
    let r5 = array(&dir.path().join("r5").tap_mkdir(), "5", &[]);
    random_4k_writes(&f1[0], 150, dir.path());
    random_4k_writes(&r5[0], 150, dir.path());
    let w = raidctl(["wear", "--json", &f1[0]]).ok().json();
    assert_eq!(w["write_mix"]["chunks_per_row_write"], 1.0);
    assert!(
        w["write_mix"]["note"]
            .as_str()
            .unwrap()
            .contains("partial-row"),
        "{w}"
    );
    let (exp, obs) = (shares(&w, "expected_share"), shares(&w, "observed_share"));
    assert!(
        exp[0] > 0.33 && obs[0] > 0.30,
        "f1 slot 0 carries the parity: {exp:?} {obs:?}"
    );
    for i in 0..4 {
        assert!(
            (exp[i] - obs[i]).abs() < 0.05,
            "slot {i}: expected {exp:?} observed {obs:?}"
        );
    }
    let w5 = raidctl(["wear", "--json", &r5[0]]).ok().json();
    for s in shares(&w5, "expected_share") {
        assert!((s - 0.25).abs() < 1e-9);
    }
    for s in shares(&w5, "observed_share") {
        assert!((s - 0.25).abs() < 0.05, "raid5 observed {s}");
    }
    // Full-row writes: no skew for either, and wear says why.
    let f1b = array(
        &dir.path().join("f1b").tap_mkdir(),
        "f1",
        &["--skew", "3,1,1,1"],
    );
    write_at(
        Path::new(&f1b[0]),
        0,
        &pattern("rows", 3 * 65536 * 100),
        dir.path(),
    );
    let wb = raidctl(["wear", "--json", &f1b[0]]).ok().json();
    assert!(
        wb["write_mix"]["note"]
            .as_str()
            .unwrap()
            .contains("full-row writes"),
        "{wb}"
    );
    for s in shares(&wb, "observed_share") {
        assert!((s - 0.25).abs() < 0.01, "full rows are even: {s}");
    }
}

trait TapMkdir {
    fn tap_mkdir(self) -> PathBuf;
}
impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> PathBuf {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

#[test]
fn projection_from_recorded_history_and_collision_window() {
    let dir = tempdir();
    let t0: u64 = 1_800_000_000;
    let ms = rated_at(dir.path(), t0, "f1", 4, "40M", "0.001");
    raidctl_at(t0, &["wear", "--record", &ms[0]]).ok();
    random_4k_writes(&ms[0], 20, dir.path());
    // One interval gives a rate but no error on it: no range is claimed.
    let t_mid = t0 + 5 * 86_400;
    let w = raidctl_at(t_mid, &["wear", "--json", &ms[0]]).ok().json();
    for m in w["members"].as_array().unwrap() {
        assert!(m["projected_wearout_unix"].as_f64().is_some(), "{m}");
        assert!(m["projected_wearout_range_unix"].is_null(), "{m}");
    }
    assert_eq!(w["collision_risk"]["rate_errors_measured"], false, "{w}");
    raidctl_at(t_mid, &["wear", "--record", &ms[0]]).ok();
    random_4k_writes(&ms[0], 20, dir.path());
    let t1 = t0 + 10 * 86_400;
    raidctl_at(t1, &["wear", "--record", &ms[0]]).ok();
    let w = raidctl_at(t1, &["wear", "--json", &ms[0]]).ok().json();
    for m in w["members"].as_array().unwrap() {
        assert_eq!(
            m["history_samples"].as_u64().unwrap(),
            3 + 1,
            "create, three records: {m}"
        );
        let rate = m["rate_bytes_per_day"]
            .as_f64()
            .expect("a rate from 10 days of history");
        let total = m["bytes_written"]["total"].as_f64().unwrap();
        // Hand computation: remaining endurance (1 GB rated) over the fitted rate.
        let days = (1e9 - total) / rate;
        let when = m["projected_wearout_unix"].as_f64().unwrap();
        assert!((when - (t1 as f64 + days * 86_400.0)).abs() < 2.0, "{m}");
        assert!(m["projection_method"]
            .as_str()
            .unwrap()
            .starts_with("bytes over time"));
    }
    let c = w["collision_window_days"].as_f64().unwrap();
    let mut outs: Vec<f64> = shares(&w, "projected_wearout_unix");
    outs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert!((c - (outs[1] - outs[0]) / 86_400.0).abs() < 1e-6);
    // Every projection is a range around its date, and the collision risk is counted over
    // all the members that have one.
    for m in w["members"].as_array().unwrap() {
        let r = m["projected_wearout_range_unix"]
            .as_array()
            .expect("a range");
        let (lo, hi) = (r[0].as_f64().unwrap(), r[1].as_f64().unwrap());
        let at = m["projected_wearout_unix"].as_f64().unwrap();
        assert!(lo <= at && at <= hi, "{m}");
    }
    let cr = &w["collision_risk"];
    assert_eq!(
        cr["members_counted"].as_u64(),
        Some(ms.len() as u64),
        "{cr}"
    );
    let p = cr["probability"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&p), "{cr}");
    let human = raidctl_at(t1, &["wear", &ms[0]]).ok().stdout_str();
    assert!(
        human.contains("collision risk:") && human.contains("wear-out between"),
        "{human}"
    );
    // What the weights buy: the gap now against the same members at an even rate.
    let sep = &w["separation"];
    let (d, e, b) = (
        sep["days"].as_f64().unwrap(),
        sep["raid5_days"].as_f64().unwrap(),
        sep["bought_days"].as_f64().unwrap(),
    );
    assert!((d - c).abs() < 1e-6 && (b - (d - e)).abs() < 1e-6, "{sep}");
    assert!(human.contains("the weights buy"), "{human}");
    // The simulator takes the same measured mix from the array.
    let sim = raidctl([
        "simulate",
        "--level",
        "f1",
        "--members",
        "4",
        "--endurance",
        "600",
        "--rate",
        "400",
        "--years",
        "3",
        "--mix-of",
        &ms[0],
        "--json",
    ])
    .ok()
    .json();
    assert!(
        sim.to_string().contains(&format!("measured on {}", ms[0])),
        "{sim}"
    );
    // With a threshold above the window, --check warns (exit 1) and says why, when the
    // wear-outs fall within the horizon (these are years out: the horizon is widened).
    let chk = raidctl_at(
        t1,
        &[
            "wear",
            "--check",
            "--collision-days",
            &format!("{}", c + 1000.0),
            "--horizon",
            "100000",
            &ms[0],
        ],
    );
    assert_eq!(chk.code, 1, "{}", chk.stderr);
    assert!(
        chk.stderr.contains("two earliest wear-outs"),
        "{}",
        chk.stderr
    );
    // The planner sees the measured single-chunk mix and suggests weights (or says none can).
    let plan = raidctl_at(t1, &["wear", "plan", "--json", "--target-gap", "5", &ms[0]]);
    let pj = plan.json();
    // Single 4 KiB writes: one parity byte per data byte, the mix the planner models.
    assert_eq!(pj["write_mix"]["data_bytes_per_parity_byte"], 1.0, "{pj}");
    assert!(pj["rate_source"].as_str().unwrap().starts_with("measured"));
    assert!(pj["message"].as_str().unwrap().len() > 10);
}

/// Issue 28, item 6: a drive with a rating whose SMART gives no wear (the P3: 7,344 power-on
/// hours, no usable wear attribute, no host bytes) was shown as 3.6e-07 % worn, from this
/// array's few bytes alone. Its wear is unknown, with this array's share as a lower bound.
#[test]
fn a_rated_drive_without_smart_wear_is_not_shown_as_new() {
    let dir = tempdir();
    let ms = array(dir.path(), "5", &["--endurance", "600"]);
    random_4k_writes(&ms[0], 10, dir.path());
    let fx = |n: &str| format!("{}/fixtures/smart/{n}.json", env!("CARGO_MANIFEST_DIR"));
    let mut args: Vec<String> = vec![
        "wear".into(),
        "--json".into(),
        ms[0].clone(),
        "--smart".into(),
    ];
    args.extend(["sata-p3-2tb"; 4].iter().map(|n| fx(n)));
    let j = raidctl(&args).ok().json();
    for m in j["members"].as_array().unwrap() {
        assert!(m["wear_percent"].is_null(), "{m}");
        assert!(
            m["wear_source"].as_str().unwrap().starts_with("unknown:")
                && m["wear_source"].as_str().unwrap().contains("7344 hours"),
            "{m}"
        );
        let least = m["wear_at_least_percent"].as_f64().unwrap();
        assert!(least > 0.0 && least < 1e-3, "{m}");
        assert!(m["projected_wearout"].is_null(), "{m}");
    }
    // Without SMART (plain files), the array's bytes are all there is: a figure, as before.
    let j = raidctl(["wear", "--json", &ms[0]]).ok().json();
    assert!(j["members"][0]["wear_percent"].as_f64().is_some(), "{j}");
}

#[test]
fn smart_files_check_and_prometheus() {
    let dir = tempdir();
    let ms = array(dir.path(), "5", &[]);
    random_4k_writes(&ms[0], 10, dir.path());
    let fx = |n: &str| format!("{}/fixtures/smart/{n}.json", env!("CARGO_MANIFEST_DIR"));
    let healthy = [
        fx("nvme-samsung-pm9a1"),
        fx("nvme-intel-660p"),
        fx("sata-micron-5300"),
        fx("sata-p3-2tb"),
    ];
    let mut args: Vec<String> = vec![
        "wear".into(),
        "--json".into(),
        "--check".into(),
        ms[0].clone(),
        "--smart".into(),
    ];
    args.extend(healthy.iter().cloned());
    let r = raidctl(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["members"][0]["wear_percent"], 16.0);
    assert_eq!(j["members"][2]["wear_percent"], 1.0);
    assert!(
        j["members"][3]["wear_percent"].is_null(),
        "unknown drive: wear unknown"
    );
    assert_eq!(j["members"][3]["wear_source"], "unknown");
    // Endurance inferred from SMART host bytes / percent used for the PM9A1.
    assert_eq!(
        j["members"][0]["endurance_bytes"].as_f64().unwrap(),
        (113_662_783u64 * 512_000) as f64 / 0.16
    );
    // Media errors: warning.
    let mut warn = args.clone();
    warn[5] = fx("nvme-samsung-970evo");
    let r = raidctl(&warn);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("media errors"));
    // A drive at 97 %: critical.
    let worn = dir.path().join("worn.json");
    let text = std::fs::read_to_string(fx("nvme-intel-p4510"))
        .unwrap()
        .replace("\"percentage_used\": 73", "\"percentage_used\": 97");
    assert!(text.contains("97"));
    std::fs::write(&worn, text).unwrap();
    let mut crit = args.clone();
    crit[5] = worn.display().to_string();
    let r = raidctl(&crit);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("97% of endurance used"), "{}", r.stderr);
    // Wrong number of SMART files: usage error.
    raidctl(["wear", &ms[0], "--smart", &healthy[0]])
        .fails(2, &["one smartctl -j file per member"]);

    // Prometheus text: counters match status, every sample line is name{labels} value.
    let prom = raidctl(["wear", "--prometheus", &ms[0]]).ok().stdout_str();
    let st = status_run(["status", "--json", &ms[0]]).json();
    for line in prom.lines().filter(|l| !l.starts_with('#')) {
        let (metric, value) = line.rsplit_once(' ').unwrap();
        assert!(
            metric.starts_with("raidctl_") && metric.ends_with('}'),
            "{line}"
        );
        value.parse::<f64>().unwrap();
    }
    // The byte counters, from status (wear leaves them to it): labelled by member uuid, not
    // by the typed path, and equal to status --json's.
    let counters = raidctl(["status", "--prometheus", &ms[0]])
        .ok()
        .stdout_str();
    for (i, m) in st["members"].as_array().unwrap().iter().enumerate() {
        let want = format!(
            "slot=\"{i}\",member_uuid=\"{}\",kind=\"parity\"}} {}",
            m["uuid"].as_str().unwrap(),
            m["bytes_written_by_kind"]["parity"]
        );
        assert!(counters.contains(&want), "missing {want}\n{counters}");
    }
    // The byte counters are status's (one family, one place).
    assert!(!prom.contains("raidctl_member_bytes_written_total"));
    assert!(prom.contains("raidctl_array_wear_status{"));
}

#[test]
fn simulator_separates_f1_wear_outs_and_draws_svg() {
    let dir = tempdir();
    let svg = dir.path().join("wear.svg");
    let out = raidctl([
        "simulate",
        "--level",
        "f1",
        "--members",
        "4",
        "--skew",
        "4,1,1,1",
        "--endurance",
        "600",
        "--rate",
        "400",
        "--years",
        "12",
        "--json",
        "--plot",
        &svg.display().to_string(),
    ])
    .ok()
    .json();
    let f1 = &out["simulation"];
    let r5 = &out["raid5_baseline"];
    let f1_gap = f1["first_gap_days"].as_f64().unwrap();
    let r5_gap = r5["first_gap_days"].as_f64().unwrap();
    assert!(
        f1_gap > 365.0 && r5_gap < 60.0,
        "f1 {f1_gap} raid5 {r5_gap}"
    );
    assert!(f1["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "reshuffle"));
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let lines = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "polyline")
        .count();
    assert!(lines >= 4, "one line per member, found {lines}");
    assert!(text.contains("member 0"));
    raidctl([
        "simulate",
        "--level",
        "f1",
        "--members",
        "4",
        "--endurance",
        "600",
        "--rate",
        "1",
        "--workload",
        "bursty",
    ])
    .fails(2, &["bursty"]);
}

#[test]
fn inspect_reports_device_facts() {
    let dir = tempdir();
    let f = dir.path().join("disk.img");
    sparse_file(&f, 32 << 20);
    let lo = LoopDev::attach(&f);
    let j = raidctl([
        "inspect",
        "--json",
        &f.display().to_string(),
        &lo.dev.display().to_string(),
    ])
    .ok()
    .json();
    assert_eq!(j[0]["size_bytes"], 32 << 20);
    assert!(j[0]["kind"].as_str().unwrap().starts_with("file on"));
    assert_eq!(j[1]["kind"], "block device");
    assert_eq!(j[1]["size_bytes"], 32 << 20);
    assert!(j[1]["logical_block_size"].as_u64().unwrap() >= 512);
    assert!(j[1]["zoned"].is_string());
    // A device this process may not open (issue 29, item 8: a mounted system disk showed
    // 0 B): its size comes from sysfs. Run as nobody, the loop device (root, 0600) is one.
    // The binary is linked (or copied) where nobody can run it, whatever the checkout's
    // directory allows.
    use std::os::unix::fs::PermissionsExt;
    let open = std::env::temp_dir().join(format!("raidctl-inspect-{}", std::process::id()));
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = open.join("raidctl");
    let _ = std::fs::remove_file(&bin);
    if std::fs::hard_link(BIN, &bin).is_err() {
        std::fs::copy(BIN, &bin).unwrap();
    }
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["inspect", "--json"])
        .arg(&lo.dev)
        .output()
        .expect("setpriv (util-linux)");
    let _ = std::fs::remove_dir_all(&open);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(j[0]["size_bytes"], 32 << 20, "{j}");
}

/// Issue #15 bug 5 through the binary: the superblock body grew with every wear sample until
/// it could not be written (RAID6 over 16 members with long paths failed after 29 daily
/// samples, and the array with it). Two years of daily samples on such an array: every record
/// succeeds, the array stays clean and readable, and the history keeps spanning the period.
#[test]
fn two_years_of_daily_samples_on_sixteen_members_with_long_paths() {
    let dir = tempdir();
    // Paths near the longest hint kept (200 bytes).
    let mut deep = dir.path().to_path_buf();
    while deep.as_os_str().len() + 2 * 29 + 10 < 200 {
        deep.push("a-rather-long-directory-name");
    }
    deep.push("x".repeat(200 - 11 - deep.as_os_str().len()));
    std::fs::create_dir_all(&deep).unwrap();
    let m: Vec<PathBuf> = (0..16)
        .map(|i| deep.join(format!("member-{i:02}")))
        .collect();
    let ms = strs(&m);
    let t0: u64 = 1_800_000_000;
    let mut args = vec![
        "create",
        "--level",
        "6",
        "--size",
        "8M",
        "--name",
        "long-history",
    ];
    args.extend(ms.iter().map(|s| s.as_str()));
    raidctl_at(t0, &args).ok();
    let data = pattern("history", 65536);
    write_at(&m[0], 0, &data, dir.path());
    let days = 730u64;
    for day in 1..=days {
        let r = raidctl_at(t0 + day * 86_400, &["wear", "--record", &ms[0]]);
        assert_eq!(r.code, 0, "day {day}: {}", r.stderr);
    }
    let t1 = t0 + days * 86_400;
    let st = raidctl_at(t1, &["status", "--json", &ms[0]]).ok().json();
    assert_eq!(st["state"], "clean", "{st}");
    assert!(read_at(&m[0], 0, data.len()).ok().stdout == data);
    let w = raidctl_at(t1, &["wear", "--json", &ms[0]]).ok().json();
    for mm in w["members"].as_array().unwrap() {
        let n = mm["history_samples"].as_u64().unwrap();
        assert!(n >= 32, "history thinned to nothing: {mm}");
    }
    let first = w["members"][0]["history_first_unix"].as_u64();
    if let Some(first) = first {
        assert!(
            first <= t0 + 86_400 * 30,
            "the history lost its start: {first}"
        );
    }
}

/// Issue #16: a small write crossing a chunk boundary rewrote the whole parity chunk (an
/// 8 KiB write straddling two 64 KiB chunks cost 64 KiB of parity). Its parity is updated
/// over the two ranges it touches: 8 KiB.
#[test]
fn an_8k_write_across_a_chunk_boundary_writes_8k_of_parity() {
    let dir = tempdir();
    let ms = members_created_with(dir.path(), "5", 4, "16M", &["--chunk", "64K"]);
    let m: Vec<PathBuf> = ms.iter().map(PathBuf::from).collect();
    let parity = || -> u64 {
        raidctl(["status", "--json", &ms[0]]).ok().json()["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["bytes_written_by_kind"]["parity"].as_u64().unwrap())
            .sum()
    };
    let data_of = || -> u64 {
        raidctl(["status", "--json", &ms[0]]).ok().json()["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["bytes_written_by_kind"]["data"].as_u64().unwrap())
            .sum()
    };
    let (p0, d0) = (parity(), data_of());
    let blob = pattern("straddle", 8192);
    // 4 KiB before and 4 KiB after the boundary between the first two chunks of row 0.
    write_at(&m[0], 64 * 1024 - 4096, &blob, dir.path());
    assert_eq!(data_of() - d0, 8192, "data bytes");
    assert_eq!(
        parity() - p0,
        8192,
        "parity bytes for an 8 KiB straddling write"
    );
    assert!(read_at(&m[0], 64 * 1024 - 4096, 8192).ok().stdout == blob);
}

/// Issue #16 item 1: the expected share used "data chunks per row write" against byte shares:
/// off by up to 24 points for writes crossing a chunk boundary. From the measured byte mix
/// (data bytes per parity byte), expected and observed agree within 1 point for mixed-size
/// random writes, boundary-crossing writes and full-row writes alike.
#[test]
fn expected_skew_matches_observed_for_mixed_crossing_and_full_row_writes() {
    // F1 over 4 members, 16 KiB chunks: a row holds 48 KiB of data.
    let chunk = 16384u64;
    type Draw = Box<dyn Fn(&mut u64) -> (u64, u64)>;
    let workloads: [(&str, Draw); 3] = [
        (
            "mixed-size random",
            Box::new(|r: &mut u64| {
                let sizes = [4096u64, 8192, 16384, 32768, 49152];
                (next(r) % 7000 * 4096, sizes[(next(r) % 5) as usize])
            }),
        ),
        (
            "chunk-boundary crossing",
            Box::new(move |r: &mut u64| ((1 + next(r) % 1500) * chunk - 4096, 8192)),
        ),
        (
            "full-row",
            Box::new(move |r: &mut u64| (next(r) % 600 * 3 * chunk, 3 * chunk)),
        ),
    ];
    for (name, draw) in workloads {
        let dir = tempdir();
        let ms = members_created_with(dir.path(), "f1", 4, "32M", &["--chunk", "16K"]);
        // Many writes through one NBD client (qemu-io), without the stripe cache, so each
        // write reaches the members as it was issued.
        let sock = dir.path().join("s.sock");
        let mut server = Server::start_with(&ms[0], &sock, &["--stripe-cache", "0"]);
        let mut r = 0x5eed_u64;
        let mut qargs: Vec<String> = vec!["-f".into(), "raw".into()];
        for _ in 0..1500 {
            let (off, len) = draw(&mut r);
            qargs.push("-c".into());
            qargs.push(format!("write -P 0x5a {off} {len}"));
        }
        qargs.push("-c".into());
        qargs.push("flush".into());
        qargs.push(server.uri());
        let o = std::process::Command::new("qemu-io")
            .args(&qargs)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(server.stop().success());
        let w = raidctl(["wear", "--json", &ms[0]]).ok().json();
        let d = w["skew"]["max_abs_difference"].as_f64().unwrap();
        assert!(
            d < 0.01,
            "{name}: expected vs observed differ by {:.2} points: {}",
            d * 100.0,
            w["skew"]
        );
    }
}

/// splitmix64: deterministic draws for workloads.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Issue #16 item 8: the wear table's columns sat 3 characters left of their headers (a JSON
/// slot number ignored the column width), and far wear-out dates were cut (`147552-09-`).
#[test]
fn wear_table_columns_line_up_and_dates_past_9999_are_stated_and_not_warned_of() {
    let dir = tempdir();
    let t0: u64 = 1_800_000_000;
    let ms = rated_at(dir.path(), t0, "f1", 4, "16M", "9000");
    raidctl_at(t0, &["wear", "--record", &ms[0]]).ok();
    write_at(Path::new(&ms[0]), 0, &pattern("far", 4096), dir.path());
    let t1 = t0 + 10 * 86_400;
    raidctl_at(t1, &["wear", "--record", &ms[0]]).ok();
    let out = raidctl_at(t1, &["wear", &ms[0]]).ok().stdout_str();
    let lines: Vec<&str> = out.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("slot "))
        .expect("a header");
    let header = lines[head];
    let rows: Vec<&str> = lines[head + 1..]
        .iter()
        .take_while(|l| !l.is_empty())
        .copied()
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    for col in [
        "slot", "written", "parity", "rate/day", "wear", "share", "expect",
    ] {
        let end = header
            .find(&format!("{col} "))
            .unwrap_or_else(|| panic!("{col}: {header}"))
            + col.len();
        for r in &rows {
            let b = r.as_bytes();
            assert!(
                b[end - 1] != b' ' && b[end] == b' ',
                "column {col} does not end under its header:\n{header}\n{r}"
            );
        }
    }
    let path_at = header.find("path").unwrap();
    let out_at = header.find("wear-out").unwrap();
    for r in &rows {
        assert!(
            r[path_at..].ends_with(&format!("m{}", &r[..4].trim())),
            "{header}\n{r}"
        );
        // Billions of years out: no date RFC 3339 could write (issue 28, item 5: it printed year
        // 508656), and the column says so whole.
        let date = r[out_at..path_at].trim();
        assert_eq!(date, "beyond 9999", "{header}\n{r}");
    }
    // JSON: null dates and a field saying why, never a year past 9999.
    let w = raidctl_at(t1, &["wear", "--json", &ms[0]]).ok().json();
    for m in w["members"].as_array().unwrap() {
        assert!(m["projected_wearout"].is_null(), "{m}");
        assert_eq!(m["projected_wearout_beyond_9999"], true, "{m}");
        let range = &m["projected_wearout_range"];
        assert!(range[0].is_null() && range[1].is_null(), "{m}");
    }
    // Identical members wear out "together", billions of years out: no warning, since nothing
    // happens within the horizon (it warned of a collision 800,000 years away).
    let check = raidctl_at(t1, &["wear", "--check", &ms[0]]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert_eq!(
        w["collision_risk"]["probability"], 0.0,
        "{}",
        w["collision_risk"]
    );
}

/// Issue #16 item 4: under file-copy traffic (full-row writes) F1 barely separates wear, and
/// nothing told the user. `wear` says so plainly when the weights buy less than 2 % extra
/// writes on the heavy member, and stays quiet when partial-row writes make them work.
#[test]
fn wear_says_when_f1_separates_almost_nothing() {
    let note = "separate almost nothing";
    for (level, sequential, want) in [("f1", true, true), ("f1", false, false), ("5", true, false)]
    {
        let dir = tempdir();
        let ms = members_created(dir.path(), level, 4, "16M");
        let m: Vec<PathBuf> = ms.iter().map(PathBuf::from).collect();
        if sequential {
            write_at(&m[0], 0, &pattern("copy", 4 << 20), dir.path());
        } else {
            let b = pattern("small", 4096);
            for i in 0..24u64 {
                write_at(&m[0], i * 7 * 65536 + 8192, &b, dir.path());
            }
        }
        let w = raidctl(["wear", "--json", &ms[0]]).ok().json();
        let said = w["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains(note));
        assert_eq!(
            said, want,
            "{level} sequential={sequential}: {}",
            w["notes"]
        );
        if want {
            let human = raidctl(["wear", &ms[0]]).ok().stdout_str();
            assert!(human.contains(note), "{human}");
        }
    }
}

/// Issue #16 item 5: the simulator's RAID 5 gap of a few days was sampling noise (where the
/// random writes landed); equal members under an even layout wear out the same day: gap 0.
#[test]
fn a_simulated_raid5_has_gap_zero() {
    let r = raidctl([
        "simulate",
        "--level",
        "5",
        "--members",
        "4",
        "--endurance",
        "100",
        "--rate",
        "400",
        "--years",
        "8",
        "--json",
    ])
    .ok()
    .json();
    let s = &r["simulation"];
    assert_eq!(s["first_gap_days"].as_f64(), Some(0.0), "{s}");
    let shares: Vec<f64> = s["write_shares_per_user_byte"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert!(shares.iter().all(|&x| x == shares[0]), "{shares:?}");
}

/// Issue #16 item 3: `wear plan` promised gaps its weights could not deliver under mixed
/// traffic (10 % random: 568 days promised, 130 replayed). On a 10 %-random mix written through
/// the binary it must say weights cannot reach 300 days, give a replacement schedule that
/// does, and the simulator replaying that schedule on the same mix must agree within 10 %.
#[test]
fn wear_plan_on_a_ten_percent_random_mix_schedules_what_weights_cannot() {
    let dir = tempdir();
    let ms = members_created_with(dir.path(), "f1", 4, "16M", &["--endurance", "1"]);
    let m0 = Path::new(&ms[0]);
    // 90 % of bytes as sequential 1 MiB writes (3 of them: the row alignment repeats every
    // 3 MiB with 192 KiB rows), 10 % as random 4 KiB writes (85 x 4 KiB = 9.97 %).
    for i in 0..3u64 {
        write_at(
            m0,
            i << 20,
            &pattern(&format!("seq{i}"), 1 << 20),
            dir.path(),
        );
    }
    random_4k_writes(&ms[0], 85, dir.path());
    // Without history there is no measured rate: the planner says to give --rate.
    let no_rate = raidctl(["wear", "plan", "--target-gap", "300", &ms[0]]);
    assert_ne!(no_rate.code, 0);
    assert!(no_rate.stderr.contains("--rate"), "{}", no_rate.stderr);
    // 1 TB members, 2.5 GB a day: about 1120 days of life.
    let args = [
        "wear",
        "plan",
        "--target-gap",
        "300",
        "--rate",
        "2500MB",
        &ms[0],
    ];
    let human = raidctl(args).ok().stdout_str();
    eprintln!("{human}");
    assert!(
        human.contains("no parity weights reach a 300-day gap"),
        "{human}"
    );
    assert!(human.contains("replacement schedule"), "{human}");
    let mut json_args = args.to_vec();
    json_args.insert(2, "--json");
    let plan = raidctl(&json_args).ok();
    let pj = plan.json();
    let k = pj["write_mix"]["data_bytes_per_parity_byte"]
        .as_f64()
        .unwrap();
    assert!((2.0..2.6).contains(&k), "mix {k}");
    let wa = &pj["weights_analysis"];
    assert_eq!(wa["reachable"], false, "{wa}");
    let best = wa["best_gap_days"].as_f64().unwrap();
    let current = wa["current_gap_days"].as_f64().unwrap();
    assert!(current < best && best < 300.0, "{wa}");
    // The bound, by hand: all parity on one member writes 1/k bytes per user byte, every other
    // member 1/3, so with equal members the gap is (3 - k) x endurance / rate (less the few MB
    // already written).
    let hand = (3.0 - k) * 1e12 / 2.5e9;
    assert!((best - hand).abs() < 1.0, "best {best} by hand {hand}");
    let s = &pj["schedule"];
    assert_eq!(s["holds"], true, "{s}");
    let reps = s["replacements"].as_array().unwrap();
    assert!(reps.len() >= 4, "{s}");
    assert!(reps[0]["days_early"].as_f64().unwrap() > 0.0, "{s}");
    let days: Vec<f64> = reps.iter().map(|r| r["day"].as_f64().unwrap()).collect();
    for p in days.windows(2) {
        assert!(p[1] - p[0] >= 300.0 - 1e-3, "{days:?}");
    }
    let promised = s["min_gap_days"].as_f64().unwrap();
    assert!(promised >= 300.0 - 1e-3);
    // F1's heavy role moves with the first replacement of slot 0.
    assert!(reps.iter().any(|r| r["role_move"].is_object()), "{s}");
    // Replay through the simulator, on the same mix measured through the engine.
    let file = dir.path().join("plan.json");
    std::fs::write(&file, &plan.stdout).unwrap();
    let svg = dir.path().join("replay.svg");
    let file_s = file.display().to_string();
    let svg_s = svg.display().to_string();
    let r = raidctl([
        "simulate",
        "--plan",
        &file_s,
        "--workload",
        "mix:10",
        "--json",
        "--plot",
        &svg_s,
    ])
    .ok()
    .json();
    let replay = &r["replay"];
    eprintln!("replay: {replay}");
    let got = replay["replayed_min_gap_days"].as_f64().unwrap();
    assert!(
        (got - promised).abs() <= 0.1 * promised,
        "replayed {got} promised {promised}: {r}"
    );
    assert_eq!(replay["within_10_percent"], true);
    let kinds: Vec<&str> = r["simulation"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"replacement") && kinds.contains(&"reshuffle"),
        "{kinds:?}"
    );
    assert!(r["raid5_baseline"].is_object());
    // The plot: markers drawn, RAID 5 on it, and the legend below the plotting area (the
    // plot is the top 540 pixels), so it covers no line.
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    assert!(doc.descendants().any(|n| n.tag_name().name() == "circle"));
    let legend: Vec<f64> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "text")
        .filter(|n| {
            let t = n.text().unwrap_or("").trim();
            t.starts_with("member ") || t.starts_with("RAID 5") || t.contains("replacement")
        })
        .map(|n| n.attribute("y").unwrap().parse::<f64>().unwrap())
        .collect();
    assert!(legend.len() >= 6, "{legend:?}");
    assert!(
        legend.iter().all(|&y| y > 540.0),
        "legend inside the plot: {legend:?}"
    );
}

/// Issue 28, item 8: the README's daily `wear --record` failed on an always-served NAS
/// ("stop it first"), as did `clear` and `set --endurance`. They go through the daemon, which
/// owns the superblocks; what they record is there after it stops.
#[test]
fn wear_record_clear_and_set_work_on_a_served_array() {
    let dir = tempdir();
    let ms = array(dir.path(), "5", &[]);
    let sock = dir.path().join("s.sock");
    let mut server = Server::start(&ms[0], &sock);
    let samples = |w: &serde_json::Value| w["members"][0]["history_samples"].as_u64().unwrap();
    let before = samples(&raidctl(["wear", "--json", &ms[0]]).ok().json());
    let fx = format!(
        "{}/fixtures/smart/nvme-samsung-pm9a1.json",
        env!("CARGO_MANIFEST_DIR")
    );
    // SMART files named relative to this process's directory reach the daemon whole.
    let rel = std::path::Path::new(&fx)
        .strip_prefix(std::env::current_dir().unwrap())
        .map(|p| p.display().to_string())
        .unwrap_or(fx.clone());
    let mut args = vec!["wear", "--record", "--json", &ms[0], "--smart"];
    args.extend([rel.as_str(); 4]);
    let r = raidctl(&args).ok().json();
    assert_eq!(r["members"][0]["wear_percent"], 16.0, "{r}");
    let w = raidctl(["wear", "--json", &ms[0]]).ok().json();
    assert_eq!(samples(&w), before + 1, "{w}");
    raidctl(["set", &ms[0], &ms[2], "--endurance", "600"]).ok();
    raidctl(["set", &ms[0], "1", "--endurance", "300"]).ok();
    raidctl(["clear", &ms[0]]).ok();
    let w = raidctl(["wear", "--json", &ms[0]]).ok().json();
    assert_eq!(
        w["members"][2]["endurance_bytes"], 600_000_000_000_000u64,
        "{w}"
    );
    assert_eq!(
        w["members"][1]["endurance_bytes"], 300_000_000_000_000u64,
        "{w}"
    );
    assert!(server.stop().success());
    let w = raidctl(["wear", "--json", &ms[0]]).ok().json();
    assert_eq!(samples(&w), before + 1, "{w}");
    assert_eq!(
        w["members"][2]["endurance_bytes"], 600_000_000_000_000u64,
        "{w}"
    );
}

/// Issue 28, items 3 and 4: the plan's schedule keeps a margin against the measured rate's
/// error (it replaced the last member at exactly 100 %, and replayed with the measured rates
/// its last gap collapsed), and a --rate of user bytes gets the array's metadata added.
#[test]
fn wear_plan_keeps_a_margin_against_the_measured_rate() {
    let dir = tempdir();
    let t0: u64 = 1_800_000_000;
    let ms = rated_at(dir.path(), t0, "f1", 4, "40M", "0.0002");
    // Seven days of uneven writes, a sample each day.
    for (d, n) in [12usize, 30, 6, 24, 10, 36, 18].into_iter().enumerate() {
        random_4k_writes(&ms[0], n, dir.path());
        raidctl_at(t0 + (d as u64 + 1) * 86_400, &["wear", "--record", &ms[0]]).ok();
    }
    let now = t0 + 7 * 86_400;
    let plan = raidctl_at(
        now,
        &["wear", "plan", "--json", "--target-gap", "5", &ms[0]],
    )
    .json();
    let margin = &plan["schedule"]["margin"];
    let rel = margin["rate_relative_error"].as_f64().unwrap();
    assert!(rel > 0.0, "{margin}");
    assert!(
        margin["standard_errors"].as_f64().unwrap() > 0.0,
        "{margin}"
    );
    assert!(
        margin["planned_user_bytes_per_day"].as_f64().unwrap()
            > plan["user_bytes_per_day"].as_f64().unwrap(),
        "{margin}"
    );
    if plan["schedule"]["holds"] == true {
        assert!(
            margin["holds_probability"].as_f64().unwrap() >= 0.9,
            "{margin}"
        );
    }
    // The simulator replays the plan at the rate it was planned for (reproducing it: the
    // outside check saw +11.5 % when it replayed the measured rate against a plan made with
    // margin), and 500 times with the rate drawn from its measured error.
    let file = dir.path().join("plan.json");
    std::fs::write(&file, plan.to_string()).unwrap();
    let r = raidctl(["simulate", "--plan", &file.display().to_string(), "--json"])
        .ok()
        .json();
    let replay = &r["replay"];
    if replay["promised_min_gap_days"].is_number() {
        assert_eq!(replay["within_10_percent"], true, "{replay}");
    }
    eprintln!(
        "plan holds: {}; replay: {replay}",
        plan["schedule"]["holds"]
    );
    let model = &replay["model"];
    assert_eq!(model["replays"], 500, "{replay}");
    assert_eq!(model["rate_relative_error"].as_f64(), Some(rel), "{replay}");
    let (p5, p95) = (
        model["min_gap_days_p5"].as_f64().unwrap(),
        model["min_gap_days_p95"].as_f64().unwrap(),
    );
    assert!(p5 < p95, "a drawn rate spreads the gaps: {replay}");
    if plan["schedule"]["holds"] == true {
        // What the plan claims (90 %), less the replays' sampling noise.
        let h = model["holds_fraction"].as_f64().unwrap();
        assert!(h >= 0.85, "{replay}");
    }
    // A --rate is exact (no margin), with the measured metadata share added to it.
    let given = raidctl_at(
        now,
        &[
            "wear",
            "plan",
            "--json",
            "--target-gap",
            "5",
            "--rate",
            "1G",
            &ms[0],
        ],
    )
    .json();
    assert_eq!(given["schedule"]["margin"]["standard_errors"], 0.0);
    let rate = given["user_bytes_per_day"].as_f64().unwrap();
    assert!(rate > 1e9, "{rate}");
    assert!(
        given["rate_source"].as_str().unwrap().contains("metadata"),
        "{given}"
    );
}

/// Issue 28, item 9: `wear --plot` draws a real array's history and forecast. Every member
/// gets its line, its legend entry and its wear-out; mirrors, whose lines are the same, are
/// named as coinciding rather than drawn as one line that hides the others.
#[test]
fn wear_plot_draws_every_member_and_names_the_ones_that_coincide() {
    let dir = tempdir();
    let t0: u64 = 1_800_000_000;
    let ms = rated_at(dir.path(), t0, "1", 3, "20M", "0.0001");
    for d in 1..=4u64 {
        random_4k_writes(&ms[0], 30, dir.path());
        raidctl_at(t0 + d * 86_400, &["wear", "--record", &ms[0]]).ok();
    }
    let now = t0 + 4 * 86_400;
    let svg = dir.path().join("wear.svg");
    let svg_s = svg.display().to_string();
    let run = raidctl_at(now, &["wear", "--json", "--plot", &svg_s, &ms[0]]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let j = run.json();
    for m in j["members"].as_array().unwrap() {
        // Create and four records: five points of history, each a wear figure.
        let h = m["history_wear_percent"].as_array().unwrap();
        assert_eq!(h.len(), 5, "{m}");
        assert!(m["projected_wearout_unix"].as_f64().is_some(), "{m}");
    }
    assert!(
        run.stderr.contains("members 0, 1 and 2 coincide"),
        "{}",
        run.stderr
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "text")
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    for s in 0..3 {
        assert!(texts.contains(&format!("slot {s}")), "{texts:?}");
    }
    assert!(texts.iter().any(|t| t.contains("coincide")), "{texts:?}");
    // Each member's markers in its own colour: three colours of circle.
    let colours: std::collections::BTreeSet<&str> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "circle")
        .filter_map(|n| n.attribute("fill"))
        .filter(|f| *f != "none")
        .collect();
    assert!(colours.len() >= 3, "{colours:?}");
    // An array with no endurance and no SMART has nothing to draw: said, not an empty chart.
    let dir2 = tempdir();
    let bare = array(dir2.path(), "5", &[]);
    let none = dir2.path().join("none.svg");
    let r = raidctl(["wear", "--plot", &none.display().to_string(), &bare[0]]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("nothing to plot"), "{}", r.stderr);
}

/// Issue 28, item 8: after a member was rebuilt, the "share" column compared its writes since
/// it joined with the others' since creation (93 % against 28 % expected) and said "ok".
/// Shares are counted from when the newest member joined, and one far from its expected value
/// is a warning.
#[test]
fn shares_after_a_rebuild_are_counted_from_when_the_member_joined() {
    let dir = tempdir();
    let ms = array(dir.path(), "f1", &[]);
    random_4k_writes(&ms[0], 150, dir.path());
    raidctl(["fail", &ms[0], "1"]).ok();
    raidctl(["remove", &ms[0], "1"]).ok();
    let new = dir.path().join("n1");
    std::fs::File::create(&new)
        .unwrap()
        .set_len(40 << 20)
        .unwrap();
    let new_s = new.display().to_string();
    raidctl(["add", &ms[0], &new_s]).ok();
    random_4k_writes(&ms[0], 200, dir.path());
    let w = raidctl(["wear", "--json", &ms[0]]).ok().json();
    let skew = &w["skew"];
    assert_eq!(skew["observed_since_creation"], false, "{skew}");
    let d = skew["max_abs_difference"].as_f64().unwrap();
    assert!(d < 0.05, "shares since the rebuild differ by {d}: {skew}");
    assert_eq!(w["status"], "ok", "{w}");
    let text = raidctl(["wear", &ms[0]]).ok().stdout_str();
    assert!(text.contains("when the newest member joined"), "{text}");
}

/// A smartctl -j report (the PM9A1 fixture) with its percentage used set to `pct`.
fn smart_at(dir: &Path, name: &str, pct: u64) -> String {
    let fx = format!(
        "{}/fixtures/smart/nvme-samsung-pm9a1.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fx).unwrap()).unwrap();
    doc["nvme_smart_health_information_log"]["percentage_used"] = pct.into();
    let f = dir.join(name);
    std::fs::write(&f, doc.to_string()).unwrap();
    f.display().to_string()
}

/// Three days of history (a sample a day) on four rated 1 GB drives at `level`; returns the
/// members and the time of the last sample.
fn three_days(dir: &Path, level: &str) -> (Vec<String>, u64) {
    let t0: u64 = 1_800_000_000;
    let ms = rated_at(dir, t0, level, 4, "40M", "0.001");
    for d in 1..=3u64 {
        random_4k_writes(&ms[0], 20, dir);
        raidctl_at(t0 + d * 86_400, &["wear", "--record", &ms[0]]).ok();
    }
    (ms, t0 + 3 * 86_400)
}

/// Outside attack on issue 28: one member at 40 % and three at 3 % gave "collision risk
/// 100 %", three wear-outs on one day, and status ok: only the first two wear-outs were
/// compared. Every adjacent pair is, and a risk of one half or more is a warning.
#[test]
fn three_members_wearing_out_together_behind_an_early_one_are_warned_of() {
    let dir = tempdir();
    // Mirrors: every member takes the same writes, so the three at 3 % go together.
    let (ms, now) = three_days(dir.path(), "1");
    let p40 = smart_at(dir.path(), "p40.json", 40);
    let p3 = smart_at(dir.path(), "p3.json", 3);
    let check = raidctl_at(
        now,
        &[
            "wear",
            "--check",
            "--horizon",
            "1000000",
            &ms[0],
            "--smart",
            &p40,
            &p3,
            &p3,
            &p3,
        ],
    );
    assert_eq!(
        check.code,
        1,
        "{}{}",
        check.stderr,
        String::from_utf8_lossy(&check.stdout)
    );
    assert!(
        check.stderr.contains("projected to wear out") && check.stderr.contains("days apart"),
        "{}",
        check.stderr
    );
    assert!(check.stderr.contains("collision risk"), "{}", check.stderr);
    let prom = raidctl_at(
        now,
        &[
            "wear",
            "--prometheus",
            "--horizon",
            "1000000",
            &ms[0],
            "--smart",
            &p40,
            &p3,
            &p3,
            &p3,
        ],
    )
    .ok()
    .stdout_str();
    assert!(prom.contains("raidctl_array_collision_risk{"), "{prom}");
    assert!(
        prom.contains("raidctl_array_wear_status{") && prom.contains("} 1\n"),
        "{prom}"
    );
}

/// Outside attack on issue 28: SMART wear recorded with `wear --record --smart` (73 %) was
/// dropped when `wear` ran without --smart (0.38 %, wear-out years later), and `--check`
/// passed a drive recorded at 96 %.
#[test]
fn recorded_smart_wear_is_used_when_wear_runs_without_smart() {
    let dir = tempdir();
    let (ms, now) = three_days(dir.path(), "5");
    let p73 = smart_at(dir.path(), "p73.json", 73);
    let mut args = vec!["wear", "--record", &ms[0], "--smart"];
    args.extend([p73.as_str(); 4]);
    raidctl_at(now + 86_400, &args).ok();
    let w = raidctl_at(now + 86_400, &["wear", "--json", &ms[0]])
        .ok()
        .json();
    for m in w["members"].as_array().unwrap() {
        let pct = m["wear_percent"].as_f64().unwrap();
        assert!((73.0..73.5).contains(&pct), "{m}");
        assert!(m["smart_recorded"].is_string(), "{m}");
        assert!(
            m["wear_source"]
                .as_str()
                .unwrap()
                .contains("as last recorded"),
            "{m}"
        );
    }
    let p96 = smart_at(dir.path(), "p96.json", 96);
    let mut args = vec!["wear", "--record", &ms[0], "--smart"];
    args.extend([p96.as_str(); 4]);
    raidctl_at(now + 2 * 86_400, &args).ok();
    let check = raidctl_at(now + 2 * 86_400, &["wear", "--check", &ms[0]]);
    assert_eq!(check.code, 2, "{}", check.stderr);
    assert!(
        check.stderr.contains("96% of endurance used"),
        "{}",
        check.stderr
    );
}

/// Outside attack on issue 28: `wear --check` exited 1 ("warning") for a missing array and 2
/// ("critical") for a bad flag. Whatever stops it from assessing wear is 3, unknown; a bad
/// --plot path fails before a sample is recorded; a clock set back records nothing.
#[test]
fn wear_check_says_unknown_when_it_cannot_assess_and_bad_input_records_nothing() {
    let dir = tempdir();
    let (ms, now) = three_days(dir.path(), "5");
    let missing = dir.path().join("nothing-here").display().to_string();
    for args in [
        vec!["wear", "--check", missing.as_str()],
        vec!["wear", "--check", "--no-such-flag", &ms[0]],
        vec!["wear", "--check", "--collision-days", "NaN", &ms[0]],
        vec![
            "wear", "--check", "--smart", &missing, &missing, &missing, &missing, &ms[0],
        ],
    ] {
        let r = raidctl_at(now, &args);
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
    }
    let samples = |w: &serde_json::Value| w["members"][0]["history_samples"].as_u64().unwrap();
    let before = samples(&raidctl_at(now, &["wear", "--json", &ms[0]]).ok().json());
    let bad = dir
        .path()
        .join("no-dir")
        .join("w.svg")
        .display()
        .to_string();
    let r = raidctl_at(now + 86_400, &["wear", "--record", "--plot", &bad, &ms[0]]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("--plot"), "{}", r.stderr);
    let r = raidctl_at(now - 86_400, &["wear", "--record", &ms[0]]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("earlier than"), "{}", r.stderr);
    let after = samples(&raidctl_at(now, &["wear", "--json", &ms[0]]).ok().json());
    assert_eq!(before, after);
}

/// Outside attack on issue 28: a daemon started as `serve m0` in the members' directory named
/// its members relatively, and every command from elsewhere, absolute paths included, was
/// refused as "a copy" of the array.
#[test]
fn a_daemon_started_with_a_relative_path_serves_commands_from_anywhere() {
    let dir = tempdir();
    let ms = array(dir.path(), "5", &[]);
    let sock = dir.path().join("s.sock");
    let mut server = Server::start_in(Some(dir.path()), "m0", &sock, &[]);
    let r = raidctl(["wear", "--record", &ms[0]]);
    let s = raidctl(["status", &ms[0]]);
    assert!(server.stop().success());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.code, 0, "{}", s.stderr);
}
