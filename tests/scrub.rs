//! Scrub through the binary: for every redundant level, random bytes corrupted in a member's
//! data area, in a parity chunk and in the checksum area (found from `examine --json`) are each
//! named with the right member and offset; `--repair` restores the array, the data reads back
//! identical and a second scrub is clean. RAID0 corruption is an error, never data. An
//! interrupted scrub resumes from its checkpoint.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::util::*;

/// Flips `len` bytes of `path` at `offset`.
fn corrupt(path: &Path, offset: u64, len: usize) {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = vec![0u8; len];
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.read_exact(&mut b).unwrap();
    for x in b.iter_mut() {
        *x ^= 0x5a;
    }
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(&b).unwrap();
    f.sync_all().unwrap();
}

fn examine(member: &Path) -> serde_json::Value {
    raidctl(["examine", "--json", &member.display().to_string()])
        .ok()
        .json()
}

fn scrub(array: &Path, repair: bool) -> (i32, serde_json::Value) {
    let mut args = vec!["scrub".to_string(), "--json".into()];
    if repair {
        args.push("--repair".into());
    }
    args.push(array.display().to_string());
    let r = raidctl(&args);
    let code = r.code;
    (code, r.json())
}

/// The problem naming `member` at a range holding member offset `off`.
fn find<'a>(rep: &'a serde_json::Value, member: &Path, off: u64) -> Option<&'a serde_json::Value> {
    let name = std::fs::canonicalize(member).unwrap().display().to_string();
    rep["problems"].as_array().unwrap().iter().find(|p| {
        let o = p["member_offset"].as_u64().unwrap();
        p["member"].as_str() == Some(name.as_str())
            && o <= off
            && off < o + p["bytes"].as_u64().unwrap()
    })
}

/// Simple deterministic choice in 0..n from a seed string.
fn pick(seed: &str, n: u64) -> u64 {
    let b = pattern(seed, 8);
    u64::from_le_bytes(b.try_into().unwrap()) % n
}

struct Case {
    args: &'static [&'static str],
    members: usize,
    /// Slot holding row 0's parity (None for mirrors).
    parity_slot: Option<usize>,
}

#[test]
fn scrub_names_and_repairs_corruption_at_every_redundant_level() {
    let cases = [
        Case {
            args: &["--level", "raid1"],
            members: 2,
            parity_slot: None,
        },
        Case {
            args: &["--level", "raid10", "--checksum", "blake3"],
            members: 4,
            parity_slot: None,
        },
        Case {
            args: &["--level", "raid5"],
            members: 4,
            parity_slot: Some(3),
        },
        Case {
            args: &["--level", "f1"],
            members: 4,
            parity_slot: Some(0),
        },
        Case {
            args: &["--level", "raid6", "--checksum", "blake3"],
            members: 5,
            parity_slot: Some(4),
        },
    ];
    for case in &cases {
        let dir = tempdir();
        let ms = members(dir.path(), case.members);
        let mut args: Vec<String> = vec!["create".into(), "--size".into(), "24M".into()];
        args.extend(["--chunk".into(), "16K".into()]);
        args.extend(case.args.iter().map(|s| s.to_string()));
        args.extend(strs(&ms));
        raidctl(&args).ok();
        let array = ms[0].clone();
        let data = pattern(case.args[1], 3 << 20);
        write_at(&array, 0, &data, dir.path());
        let ex = examine(&ms[1]);
        assert_eq!(ex["areas"]["checksums"]["block_bytes"], 4096, "{ex}");
        // Both hashes are exercised: the default, and blake3 where the case asks for it.
        let hash = if case.args.contains(&"blake3") {
            "blake3"
        } else {
            "xxh3"
        };
        assert_eq!(ex["areas"]["checksums"]["hash"], hash, "{ex}");
        let data_off = ex["areas"]["data"]["offset"].as_u64().unwrap();
        let table_off = ex["areas"]["checksums"]["table_offset"].as_u64().unwrap();
        let table_bytes = ex["areas"]["checksums"]["table_bytes"].as_u64().unwrap();
        // Row 0 and row 1 hold written data on every member (3 MiB written, 16 KiB chunks).
        let level = case.args[1];
        let mut injected: Vec<(PathBuf, u64, &str)> = Vec::new();
        // 1. Random bytes in a member's data area (row 2 onwards, written).
        let m_data = &ms[pick(&format!("{level}m"), case.members as u64) as usize];
        let off_data = data_off + 2 * 16384 + pick(&format!("{level}o"), 20 * 16384);
        corrupt(m_data, off_data, 7);
        injected.push((m_data.clone(), off_data, "data"));
        // 2. The parity chunk of row 0.
        if let Some(ps) = case.parity_slot {
            let off = data_off + pick(&format!("{level}p"), 16384 - 8);
            corrupt(&ms[ps], off, 5);
            injected.push((ms[ps].clone(), off, "parity"));
        }
        // 3. The checksum table of another member.
        let m_sum = &ms[(pick(&format!("{level}m"), case.members as u64) as usize + 1) % ms.len()];
        let off_sum = table_off + pick(&format!("{level}s"), table_bytes - 8);
        corrupt(m_sum, off_sum, 3);
        injected.push((m_sum.clone(), off_sum, "checksum"));

        let (code, rep) = scrub(&array, false);
        assert_eq!(code, 1, "{level}: unrepaired problems exit 1: {rep}");
        for (m, off, what) in &injected {
            let p = find(&rep, m, *off).unwrap_or_else(|| {
                panic!(
                    "{level}: {what} corruption at {off} on {} not named: {rep}",
                    m.display()
                )
            });
            let kind = p["kind"].as_str().unwrap();
            match *what {
                "checksum" => assert_eq!(kind, "checksum", "{level}: {p}"),
                "parity" => assert!(kind == "parity", "{level}: {p}"),
                _ => assert!(
                    ["data checksum", "parity", "q-parity"].contains(&kind),
                    "{level}: {p}"
                ),
            }
            assert_eq!(p["repaired"], false);
        }
        let (code, rep) = scrub(&array, true);
        assert_eq!(code, 0, "{level}: repair: {rep}");
        assert_eq!(rep["unrepaired"], 0);
        assert!(
            rep["repaired"].as_u64().unwrap() >= injected.len() as u64,
            "{rep}"
        );
        let (code, rep) = scrub(&array, false);
        assert_eq!(code, 0, "{level}: second scrub: {rep}");
        assert!(
            rep["problems"].as_array().unwrap().is_empty(),
            "{level}: {rep}"
        );
        let got = read_at(&array, 0, data.len()).ok().stdout;
        assert!(got == data, "{level}: data differs after repair");
        // The counters and the last scrub are recorded.
        let st = status_run(["status", "--json", &array.display().to_string()]).json();
        assert_eq!(st["scrub"]["state"], "finished", "{st}");
        assert_eq!(st["scrub"]["problems"], 0, "{st}");
        let errs: u64 = st["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["checksum_errors"].as_u64().unwrap())
            .sum();
        assert!(errs >= 2, "{level}: checksum errors counted: {st}");
        let human = status_run(["status", &array.display().to_string()]).stdout_str();
        assert!(
            human.contains("cksum") && human.contains("scrub    check"),
            "{human}"
        );
    }
}

#[test]
fn raid0_corruption_is_reported_unrecoverable_and_never_read_back() {
    let dir = tempdir();
    let ms = members(dir.path(), 3);
    let mut args: Vec<String> = vec!["create".into(), "--level".into(), "raid0".into()];
    args.extend(["--size".into(), "16M".into()]);
    args.extend(strs(&ms));
    raidctl(&args).ok();
    let data = pattern("r0", 1 << 20);
    write_at(&ms[0], 0, &data, dir.path());
    let data_off = examine(&ms[0])["areas"]["data"]["offset"].as_u64().unwrap();
    // Logical offset 0 is the first chunk of slot 0.
    corrupt(&ms[0], data_off + 1000, 4);
    read_at(&ms[0], 0, 8192).fails(1, &["checksum", &format!("member offset {data_off}")]);
    // The rest still reads.
    assert!(read_at(&ms[0], 8192, 4096).ok().stdout == data[8192..12288]);
    let (code, rep) = scrub(&ms[0], true);
    assert_eq!(code, 1, "{rep}");
    let p = find(&rep, &ms[0], data_off + 1000).expect("named");
    assert_eq!(
        (p["kind"].as_str(), p["repaired"].as_bool()),
        (Some("data checksum"), Some(false))
    );
    assert!(p["note"].as_str().unwrap().contains("RAID0"), "{p}");
}

#[test]
fn an_interrupted_scrub_resumes_from_its_checkpoint() {
    let dir = tempdir();
    let ms = members(dir.path(), 3);
    let mut args: Vec<String> = vec!["create".into(), "--level".into(), "raid5".into()];
    args.extend(["--size".into(), "80M".into()]);
    args.extend(strs(&ms));
    raidctl(&args).ok();
    fill(&ms[0].display().to_string(), dir.path());
    // A slow scrub (rate-limited), killed after its first checkpoint is recorded.
    let mut child = std::process::Command::new(BIN)
        .args(["scrub", "--max-rate", "4M", &ms[0].display().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let next_row = loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        // examine reads the superblock without taking the member's lock.
        let sb = examine(&ms[1]);
        if let Some(r) = sb["scrub"]["next_row"].as_u64().filter(|&r| r > 0) {
            break r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint recorded"
        );
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let st = status_run(["status", "--json", &ms[0].display().to_string()]).json();
    assert_eq!(st["scrub"]["state"], "interrupted", "{st}");
    let (code, rep) = scrub(&ms[0], false);
    assert_eq!(code, 0, "{rep}");
    let resumed = rep["resumed_from_row"].as_u64().expect("resumed");
    assert!(resumed >= next_row, "{rep}");
    assert!(rep["rows_checked"].as_u64().unwrap() < st["scrub"]["rows"].as_u64().unwrap());
    let st = status_run(["status", "--json", &ms[0].display().to_string()]).json();
    assert_eq!(st["scrub"]["state"], "finished", "{st}");
}

/// Issue 15 bug 7 (first part): RAID1 with the same corruption on both copies. Reads fail, as
/// they should; then `scrub --repair` "repaired" it by rewriting the checksum entries to match
/// the corrupt bytes, and reads returned the corruption with scrub clean. Agreeing copies
/// confirm nothing (they are written from one buffer): the block stays an error.
#[test]
fn raid1_identical_corruption_stays_an_error_after_scrub_repair() {
    let dir = tempdir();
    let m = members(dir.path(), 2);
    let mut args = vec!["create", "--level", "1", "--size", "16M"];
    let ms = strs(&m);
    args.extend(ms.iter().map(|s| s.as_str()));
    raidctl(&args).ok();
    let data = pattern("both", 65536);
    write_at(&m[0], 0, &data, dir.path());
    let off = examine(&m[0])["data_offset"].as_u64().unwrap() + 8192;
    for p in &m {
        corrupt(p, off, 16);
    }
    assert_ne!(
        read_at(&m[0], 0, data.len()).code,
        0,
        "corrupt data read without error"
    );
    let (code, rep) = scrub(&m[0], true);
    assert_eq!(code, 1, "scrub --repair claims success: {rep}");
    let r = read_at(&m[0], 0, data.len());
    assert_ne!(
        r.code, 0,
        "after scrub --repair the corruption reads as data"
    );
    let (code, _) = scrub(&m[0], false);
    assert_eq!(code, 1, "a second scrub is clean over corrupt data");
}

/// Overwrites `len` bytes of `path` at `offset` with zeros.
fn zero(path: &Path, offset: u64, len: usize) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&vec![0u8; len], offset).unwrap();
    f.sync_all().unwrap();
}

/// An array over `n` files, 64 KiB chunks, 1 MiB written and closed cleanly (the checksum
/// table holds the entries): (dir, members, data, data offset, table offset).
fn with_table(level: &str, n: usize) -> (tempfile::TempDir, Vec<PathBuf>, Vec<u8>, u64, u64) {
    let dir = tempdir();
    let m = members(dir.path(), n);
    let mut args = vec![
        "create", "--level", level, "--chunk", "64K", "--size", "16M",
    ];
    let ms = strs(&m);
    args.extend(ms.iter().map(|s| s.as_str()));
    raidctl(&args).ok();
    let data = pattern("table", 1 << 20);
    write_at(&m[0], 0, &data, dir.path());
    let ex = examine(&m[1]);
    let data_off = ex["areas"]["data"]["offset"].as_u64().unwrap();
    let table_off = ex["areas"]["checksums"]["table_offset"].as_u64().unwrap();
    (dir, m, data, data_off, table_off)
}

/// Issue #15 bug 7 (table pages): a damaged checksum table page over a corrupt data block read
/// the corrupt block back as data (its entries unknown, nothing checked it). A block whose
/// entry is unknown is now checked against the rest of its row, whose members vouch for
/// themselves, and rebuilt from them when it disagrees.
#[test]
fn corrupt_table_page_over_corrupt_data_never_reads_the_corruption() {
    // RAID5: row 0 holds data on slot 1 (parity on slot 3). RAID1: slot 1 holds a copy of
    // everything. Corrupt slot 1's block 1 and the table page that covers it.
    for (level, n) in [("5", 4), ("1", 2)] {
        let (_dir, m, data, data_off, table_off) = with_table(level, n);
        corrupt(&m[1], data_off + 4096, 64);
        corrupt(&m[1], table_off + 100, 8);
        for _ in 0..2 {
            let r = read_at(&m[0], 0, data.len());
            assert!(
                r.code == 0 && r.stdout == data,
                "raid{level}: the corrupt block read back as data, or an error"
            );
        }
        let (code, rep) = scrub(&m[0], true);
        assert_eq!(code, 0, "raid{level}: scrub --repair: {rep}");
        assert!(read_at(&m[0], 0, data.len()).ok().stdout == data);
        let (code, rep) = scrub(&m[0], false);
        assert_eq!(code, 0, "raid{level}: a second scrub finds problems: {rep}");
    }
}

/// Issue #15 bug 7 (table pages): a zeroed table page (valid: it says "every block is zero")
/// made good data permanently unreadable although parity and the other members verify it.
/// When the other members of the row, each matching its own checksums, rebuild exactly the
/// bytes on the member, the entry is what is wrong: the read succeeds and the entry is fixed.
#[test]
fn zeroed_table_page_leaves_verified_data_readable() {
    let (_dir, m, data, data_off, table_off) = with_table("5", 4);
    zero(&m[1], table_off, 4096);
    // A scrub names the member's checksum entries, and repairs them.
    let (code, rep) = scrub(&m[0], false);
    assert_eq!(code, 1, "scrub finds nothing: {rep}");
    let p = find(&rep, &m[1], data_off).unwrap_or_else(|| panic!("m1 not named: {rep}"));
    assert_eq!(p["kind"], "checksum", "{p}");
    let (code, rep) = scrub(&m[0], true);
    assert_eq!(code, 0, "scrub --repair: {rep}");
    let (code, rep) = scrub(&m[0], false);
    assert_eq!(code, 0, "a second scrub finds problems: {rep}");
    assert!(read_at(&m[0], 0, data.len()).ok().stdout == data);
    // Zeroed again, a read alone succeeds (the other members vouch for the data) and fixes
    // the entries it used.
    zero(&m[1], table_off, 4096);
    assert!(read_at(&m[0], 0, data.len()).ok().stdout == data);
}

/// Both copies' table pages damaged and the copies differing: nothing says which copy is
/// right, so the block reads as an error (never a guess), before and after scrub --repair,
/// which must not let the rewritten pages vouch for either copy.
#[test]
fn raid1_differing_copies_under_damaged_pages_read_as_errors() {
    let (_dir, m, data, data_off, table_off) = with_table("1", 2);
    corrupt(&m[0], data_off + 4096, 64);
    for p in &m {
        corrupt(p, table_off + 100, 8);
    }
    let check = |when: &str| {
        let r = read_at(&m[0], 0, data.len());
        assert!(
            r.code != 0 || r.stdout == data,
            "{when}: the corrupt copy read back as data"
        );
        assert!(read_at(&m[0], 0, 4096).ok().stdout == data[..4096]);
        assert!(read_at(&m[0], 8192, 4096).ok().stdout == data[8192..12288]);
    };
    check("before scrub");
    let (code, rep) = scrub(&m[0], true);
    assert_eq!(code, 1, "scrub --repair decided what it cannot know: {rep}");
    check("after scrub --repair");
    // Writing the block again makes it good on both copies.
    let dir = m[0].parent().unwrap();
    write_at(&m[0], 4096, &data[4096..8192], dir);
    assert!(read_at(&m[0], 0, data.len()).ok().stdout == data);
}

/// Issue #18: a bad block found by a check-only scrub and then repaired by `scrub --repair`
/// was counted twice in its member's checksum errors.
#[test]
fn check_then_repair_counts_a_bad_block_once() {
    let (_dir, m, _data, data_off, _table_off) = with_table("5", 4);
    corrupt(&m[1], data_off + 4096, 16);
    let (code, rep) = scrub(&m[0], false);
    assert_eq!(code, 1, "{rep}");
    let (code, rep) = scrub(&m[0], true);
    assert_eq!(code, 0, "{rep}");
    let st = raidctl(["status", "--json", &m[0].display().to_string()]).json();
    let counts: Vec<u64> = st["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["checksum_errors"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, vec![0, 1, 0, 0], "{st}");
}

/// Issue 14 (one row-recovery routine): a rebuild took a survivor's block whose checksum
/// table page was damaged as read, though its bytes were corrupt and the row had redundancy
/// left to check it (RAID6, one member rebuilt). The rebuilt member's chunk was computed from
/// the corruption and got fresh checksum entries, so it read back wrong with no error. The
/// rebuild now decides with the routine reads use: the unchecked block is rebuilt from the
/// members that vouch for themselves and rewritten, and the new member gets the right data.
#[test]
fn raid6_rebuild_over_an_unchecked_corrupt_block_never_spreads_it() {
    let (dir, m, data, data_off, table_off) = with_table("6", 5);
    let chunk = 64 << 10;
    // Block 1 of slot 1 in every row written (data, P and Q in turn), and the table page
    // that covers them.
    for row in 0..6u64 {
        corrupt(&m[1], data_off + row * chunk + 4096, 64);
    }
    corrupt(&m[1], table_off + 100, 8);
    let ms = strs(&m);
    fail_and_rebuild_onto_a_spare(dir.path(), &ms[0], &ms[2]);
    let r = read_at(&m[0], 0, data.len());
    assert!(
        r.code == 0 && r.stdout == data,
        "after the rebuild the array reads back wrong data, or an error (code {})",
        r.code
    );
    let (code, rep) = scrub(&m[0], true);
    assert_eq!(code, 0, "scrub --repair: {rep}");
    let (code, rep) = scrub(&m[0], false);
    assert_eq!(code, 0, "a second scrub finds problems: {rep}");
    assert!(read_at(&m[0], 0, data.len()).ok().stdout == data);
}

/// Issue 14 (one row-recovery routine): a corrupt block under a zeroed checksum table page
/// (a valid page that says every block is zero) read back right, since the rest of its row
/// vouches for the reconstruction, but `scrub --repair` called the same block unrepairable
/// ("the reconstruction does not match it either"): scrub and reads judged rows by different
/// rules. Scrub now uses the reads' routine and repairs it.
#[test]
fn scrub_repairs_what_reads_recover_under_a_zeroed_table_page() {
    let (_dir, m, data, data_off, table_off) = with_table("5", 4);
    corrupt(&m[1], data_off + 4096, 64);
    zero(&m[1], table_off, 4096);
    let (code, rep) = scrub(&m[0], true);
    assert_eq!(
        code, 0,
        "scrub --repair left problems that reads recover: {rep}"
    );
    let (code, rep) = scrub(&m[0], false);
    assert_eq!(code, 0, "a second scrub finds problems: {rep}");
    assert!(read_at(&m[0], 0, data.len()).ok().stdout == data);
}

/// Issue 14 (one recovery rule for mirrors): a mirror rebuild copied the first other copy
/// that read whole and had no failing entry, even when its table page was damaged and its
/// bytes corrupt while a third copy vouched for itself. The rebuilt copy got fresh entries
/// over the corruption, and reads that reached it returned wrong data with no error. The
/// rebuild now chooses copies block by block with the reads' rule (plan::choose_copy): a copy
/// that vouches for itself first, and the unchecked one is rewritten from it.
#[test]
fn mirror_rebuild_never_copies_an_unchecked_corrupt_copy_over_a_vouching_one() {
    let (dir, m, data, data_off, table_off) = with_table("1", 3);
    let chunk = 64 << 10;
    for c in 0..16u64 {
        corrupt(&m[0], data_off + c * chunk + 4096, 64);
    }
    corrupt(&m[0], table_off + 100, 8);
    let ms = strs(&m);
    fail_and_rebuild_onto_a_spare(dir.path(), &ms[1], &ms[2]);
    // Reads start at a different copy per chunk, so some reach the rebuilt copy first.
    for _ in 0..2 {
        let r = read_at(&m[1], 0, data.len());
        assert!(
            r.code == 0 && r.stdout == data,
            "after the rebuild the array reads back wrong data, or an error (code {})",
            r.code
        );
    }
    let (code, rep) = scrub(&m[1], true);
    assert_eq!(code, 0, "scrub --repair: {rep}");
    let (code, rep) = scrub(&m[1], false);
    assert_eq!(code, 0, "a second scrub finds problems: {rep}");
}

/// Fails `failed` in the array `via` names, adds a new member file of the same size (which
/// rebuilds onto it), and checks the array is clean again.
fn fail_and_rebuild_onto_a_spare(dir: &Path, via: &str, failed: &str) {
    raidctl(["fail", "--no-rebuild", via, failed]).ok();
    let spare = dir.join("spare");
    sized_like(&spare, Path::new(failed));
    raidctl(["add", via, &spare.display().to_string()]).ok();
    let st = raidctl(["status", "--json", via]).json();
    assert_eq!(st["state"], "clean", "{st}");
}

/// Scrub skips the regions the data map shows never written (they hold zeros); rot planted in
/// one is not seen by a plain scrub, and `--include-empty` finds it (outside attack on the data
/// map: scrub said 0 problems while a degraded read returned the rot with exit 0).
#[test]
fn scrub_include_empty_finds_rot_in_regions_never_written() {
    let dir = tempdir();
    let ms = members_created_with(dir.path(), "5", 3, "256M", &["--no-checksums"]);
    write_at(
        Path::new(&ms[0]),
        0,
        &pattern("window", 1 << 20),
        dir.path(),
    );
    let data_offset = raidctl(["examine", "--json", &ms[1]]).ok().json()["data_offset"]
        .as_u64()
        .unwrap();
    rot_bytes(&ms[1], data_offset + (100 << 20));
    let plain = raidctl(["scrub", "--json", &ms[0]]).ok().json();
    assert_eq!(plain["problems"].as_array().unwrap().len(), 0, "{plain}");
    assert!(plain["rows_empty"].as_u64().unwrap() > 0, "{plain}");
    let r = raidctl(["scrub", "--include-empty", "--json", &ms[0]]);
    assert_ne!(r.code, 0, "a problem found is not exit 0");
    let full = r.json();
    assert_eq!(full["rows_empty"], 0, "{full}");
    // Without checksums the row's parity disagrees and which cell is wrong cannot be told: every
    // cell of row 1600 (100 MiB of 64 KiB chunks) is named.
    let problems = full["problems"].as_array().unwrap();
    assert!(!problems.is_empty(), "{full}");
    assert!(problems.iter().all(|p| p["row"] == 1600), "{full}");
    assert!(
        problems
            .iter()
            .all(|p| p["note"].as_str().unwrap().contains("without checksums")),
        "{full}"
    );
}
