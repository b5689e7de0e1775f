//! Bad input: each case gets a clear error naming the member and the problem, a non-zero exit
//! code, and every member stays byte-identical.

use std::path::PathBuf;
use std::process::Command;

use crate::util::*;

/// Creates an array over fresh files in `dir` with `prefix` names.
fn array(dir: &std::path::Path, prefix: &str, level: &str, n: usize) -> Vec<PathBuf> {
    let m: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("{prefix}{i}"))).collect();
    let mut args = vec![
        "create".to_string(),
        "--level".into(),
        level.into(),
        "--size".into(),
        "12M".into(),
    ];
    args.extend(strs(&m));
    raidctl(&args).ok();
    write_at(&m[0], 777, &pattern(prefix, 200_000), dir);
    m
}

/// Runs `args`, expects failure `code` with `needles` in the message, and checks `watch` unchanged.
fn refused(args: &[String], code: i32, needles: &[&str], watch: &[PathBuf]) {
    let before = hashes(watch);
    raidctl(args).fails(code, needles);
    assert_eq!(
        hashes(watch),
        before,
        "a refused command changed a member: {args:?}"
    );
}

fn args(v: &[&str], paths: &[PathBuf]) -> Vec<String> {
    let mut a: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    a.extend(strs(paths));
    a
}

#[test]
fn corrupt_superblock_in_both_copies() {
    let dir = tempdir();
    let m = array(dir.path(), "m", "5", 3);
    let mut img = std::fs::read(&m[0]).unwrap();
    img[4096 + 300] ^= 0xff;
    img[8192 + 300] ^= 0xff;
    std::fs::write(&m[0], &img).unwrap();
    let target = m[0].display().to_string();
    refused(
        &args(&["status"], &m[..1]),
        3,
        &[&target, "both superblock copies are invalid", "checksum"],
        &m,
    );
    refused(
        &args(&["write", "--input", "/dev/null"], &m[..1]),
        3,
        &[&target, "invalid"],
        &m,
    );
    refused(
        &args(&["examine"], &m[..1]),
        3,
        &[&target, "no valid superblock"],
        &m,
    );
    // One good copy is enough: the array still assembles from a sibling and m0 counts as missing.
    status_run(["status", &m[1].display().to_string()]);
}

#[test]
fn member_of_another_array() {
    let dir = tempdir();
    let a = array(dir.path(), "a", "5", 3);
    let b = array(dir.path(), "b", "1", 2);
    let fresh: Vec<PathBuf> = (0..2).map(|i| dir.path().join(format!("new{i}"))).collect();
    for f in &fresh {
        sparse_file(f, 12 << 20);
    }
    let mut watch = a.clone();
    watch.extend(fresh.clone());
    let victim = a[1].display().to_string();
    refused(
        &args(
            &["create", "--level", "5"],
            &[fresh[0].clone(), a[1].clone(), fresh[1].clone()],
        ),
        4,
        &[&victim, "holds slot 1 of raidctl array", "--force"],
        &watch,
    );
    // Members of mixed arrays: refused as well, naming the first foreign member.
    let mut all = a.clone();
    all.extend(b.clone());
    refused(
        &args(
            &["create", "--level", "6"],
            &[a[0].clone(), b[0].clone(), a[2].clone(), b[1].clone()],
        ),
        4,
        &["holds slot 0"],
        &all,
    );
}

#[test]
fn foreign_member_at_a_sibling_path_is_never_written() {
    let dir = tempdir();
    let a = array(dir.path(), "a", "5", 3);
    let other = tempdir();
    let b = array(other.path(), "b", "5", 3);
    // Put array b's member where a's slot 2 used to be.
    std::fs::remove_file(&a[2]).unwrap();
    std::fs::copy(&b[2], &a[2]).unwrap();
    let before = hashes(&a[2..3]);
    let st = status_run(["status", "--json", &a[0].display().to_string()]);
    assert!(
        st.stderr.contains("belongs to another array"),
        "{}",
        st.stderr
    );
    assert_eq!(st.json()["state"], "degraded");
    write_at(&a[0], 5, &pattern("x", 100_000), dir.path());
    assert_eq!(hashes(&a[2..3]), before, "the foreign member was written");
    assert!(read_at(&a[0], 5, 100_000).ok().stdout == pattern("x", 100_000));
}

#[test]
fn scan_picks_the_right_array_among_mixed_members() {
    let dir = tempdir();
    let a = array(dir.path(), "a", "6", 4);
    let _b = array(dir.path(), "b", "6", 4);
    // Hints are useless once the files move; scanning the new directory finds a's members only.
    let moved = tempdir();
    for p in std::fs::read_dir(dir.path()).unwrap().flatten() {
        std::fs::rename(p.path(), moved.path().join(p.file_name())).unwrap();
    }
    let a0 = moved.path().join("a0");
    let st = status_run(["status", "--json", &a0.display().to_string()]).json();
    assert_eq!(st["state"], "clean", "{st}");
    let _ = a;
    let got = read_at(&a0, 777, 200_000).ok().stdout;
    assert!(got == pattern("a", 200_000));
}

#[test]
fn truncated_member() {
    let dir = tempdir();
    let m = array(dir.path(), "m", "6", 4);
    let f = std::fs::OpenOptions::new().write(true).open(&m[3]).unwrap();
    f.set_len(5 << 20).unwrap();
    drop(f);
    let name = m[3].display().to_string();
    refused(&args(&["status"], &m[3..4]), 3, &[&name, "truncated"], &m);
    refused(
        &args(&["read", "--length", "10"], &m[3..4]),
        3,
        &[&name, "truncated"],
        &m,
    );
    let ex = raidctl(["examine", "--json", &name]).ok().json();
    assert_eq!(ex["truncated"], true);
}

#[test]
fn wrong_member_counts_and_flags() {
    let dir = tempdir();
    let files: Vec<PathBuf> = (0..6).map(|i| dir.path().join(format!("f{i}"))).collect();
    for f in &files {
        // Non-zero content past the first blocks, so any write would show.
        let mut data = vec![0u8; 4 << 20];
        data[1 << 20..].copy_from_slice(&pattern("f", 3 << 20));
        std::fs::write(f, data).unwrap();
    }
    let f = &files;
    refused(
        &args(&["create", "--level", "6"], &f[..3]),
        2,
        &["raid6 needs at least 4 members, got 3"],
        f,
    );
    refused(
        &args(&["create", "--level", "5", "--checksum", "sha1"], &f[..3]),
        2,
        &[
            "invalid value 'sha1' for '--checksum <HASH>'",
            "possible values: xxh3, blake3",
        ],
        f,
    );
    refused(
        &args(
            &[
                "create",
                "--level",
                "5",
                "--checksum",
                "blake3",
                "--no-checksums",
            ],
            &f[..3],
        ),
        2,
        &["'--checksum <HASH>' cannot be used with '--no-checksums'"],
        f,
    );
    refused(
        &args(&["create", "--level", "5"], &f[..2]),
        2,
        &["raid5 needs at least 3 members, got 2"],
        f,
    );
    refused(
        &args(&["create", "--level", "1"], &f[..1]),
        2,
        &["raid1 needs at least 2 members, got 1"],
        f,
    );
    refused(
        &args(
            &["create", "--level", "5"],
            &[f[0].clone(), f[1].clone(), f[0].clone()],
        ),
        2,
        &["given twice", &f[0].display().to_string()],
        f,
    );
    refused(
        &args(&["create", "--level", "7"], &f[..4]),
        2,
        &["unknown RAID level", "7"],
        f,
    );
    refused(
        &args(&["create", "--level", "5", "--chunk", "48K"], &f[..4]),
        2,
        &["49152", "not a power of two"],
        f,
    );
    refused(
        &args(&["create", "--level", "5", "--chunk", "1K"], &f[..4]),
        2,
        &["not a power of two between"],
        f,
    );
    refused(
        &args(&["create", "--level", "f1", "--skew", "2,1,1"], &f[..4]),
        2,
        &["3 parity weights given for 4 members"],
        f,
    );
    refused(
        &args(&["create", "--level", "f1", "--skew", "0,0,0,0"], &f[..4]),
        2,
        &["sum to 0"],
        f,
    );
    refused(
        &args(&["create", "--level", "5", "--skew", "2,1,1,1"], &f[..4]),
        2,
        &["--level f1"],
        f,
    );
    refused(
        &args(&["create", "--level", "f1", "--parity-heavy", "9"], &f[..4]),
        2,
        &["--parity-heavy 9"],
        f,
    );
    refused(
        &args(&["create", "--level", "10", "--copies", "5"], &f[..4]),
        2,
        &["copies must be between 2 and"],
        f,
    );
    refused(
        &args(&["create", "--level", "5", "--endurance", "1,2"], &f[..4]),
        2,
        &["--endurance has 2 values for 4 members"],
        f,
    );
    refused(
        &args(&["create", "--level", "5", "--bogus"], &f[..4]),
        2,
        &["--bogus"],
        f,
    );
    refused(
        &args(&["create", "--level", "5", "--size", "12Q"], &f[..4]),
        2,
        &["12Q"],
        f,
    );
    // Too many: one more than the supported maximum.
    let many: Vec<PathBuf> = (0..65)
        .map(|i| dir.path().join(format!("many{i}")))
        .collect();
    refused(
        &args(&["create", "--level", "0", "--size", "4M"], &many),
        2,
        &["at most 64 members"],
        f,
    );
    assert!(
        !many[0].exists(),
        "no member file may be created when the flags are refused"
    );
    // A missing member without --size.
    refused(
        &args(
            &["create", "--level", "5"],
            &[f[0].clone(), f[1].clone(), dir.path().join("nope")],
        ),
        2,
        &["nope", "does not exist"],
        f,
    );
}

#[test]
fn file_system_is_refused_without_force() {
    let dir = tempdir();
    let m: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("m{i}"))).collect();
    for f in &m {
        sparse_file(f, 16 << 20);
    }
    let ok = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&m[1])
        .status()
        .expect("mkfs.ext4 (e2fsprogs) is needed");
    assert!(ok.success());
    refused(
        &args(&["create", "--level", "5"], &m),
        4,
        &[
            &m[1].display().to_string(),
            "ext2/3/4 file system",
            "--force",
        ],
        &m,
    );
    raidctl(args(&["create", "--level", "5", "--force"], &m)).ok();
}

#[test]
fn mounted_or_busy_device_is_refused_even_with_force() {
    let dir = tempdir();
    let backing = dir.path().join("fs.img");
    sparse_file(&backing, 32 << 20);
    assert!(Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&backing)
        .status()
        .unwrap()
        .success());
    let lo = LoopDev::attach(&backing);
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    assert!(
        Command::new("mount")
            .arg(&lo.dev)
            .arg(&mnt)
            .status()
            .unwrap()
            .success(),
        "mount"
    );
    let others: Vec<PathBuf> = (0..2).map(|i| dir.path().join(format!("o{i}"))).collect();
    for f in &others {
        sparse_file(f, 32 << 20);
    }
    let mut members = vec![lo.dev.clone()];
    members.extend(others.clone());
    let res = raidctl(args(&["create", "--level", "5", "--force"], &members));
    let _ = Command::new("umount").arg(&mnt).status();
    res.fails(
        4,
        &[
            &lo.dev.display().to_string(),
            "mounted",
            "not even with --force",
        ],
    );
    // The backing file of an attached loop device is in use as well.
    let mut members = vec![backing.clone()];
    members.extend(others.clone());
    refused(
        &args(&["create", "--level", "5", "--force"], &members),
        4,
        &["attached to /dev/loop"],
        &members,
    );
}

#[test]
fn second_process_cannot_open_an_array_for_writing() {
    use std::io::Write;
    let dir = tempdir();
    let m = array(dir.path(), "m", "1", 2);
    // A writer fed from a pipe holds the array open while it stages its input (it writes
    // only once the pipe ends, so that input too long changes nothing). A second writer
    // (of nothing) succeeds until the first has the array open, then is refused.
    let mut child = Command::new(BIN)
        .args(["write", &m[0].display().to_string()])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&pattern("first", 4 << 20)).unwrap();
    let mut second = None;
    for _ in 0..500 {
        let r = raidctl(["write", "--input", "/dev/null", &m[1].display().to_string()]);
        if r.code != 0 {
            second = Some(r);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    second
        .expect("the second writer was never refused")
        .fails(4, &["locked by another raidctl process"]);
    // What the first wrote is there.
    let back = raidctl(["read", "--length", "4M", &m[1].display().to_string()]).ok();
    assert!(back.stdout == pattern("first", 4 << 20));
}

/// Issue 29, item 6: `write` from stdin longer than the array wrote the first 41 MB, then
/// exited 2. A pipe is staged first (in memory, or past 64 MiB in a temporary file): input
/// that does not fit is refused with the array unchanged, at both sizes.
#[test]
fn oversize_stdin_leaves_the_array_unchanged() {
    use std::io::Write;
    let dir = tempdir();
    for (name, size) in [("small", "8M"), ("large", "40M")] {
        let m: Vec<PathBuf> = (0..3)
            .map(|i| dir.path().join(format!("{name}{i}")))
            .collect();
        raidctl(args(&["create", "--level", "5", "--size", size], &m)).ok();
        let m0 = m[0].display().to_string();
        let before = raidctl(["read", &m0]).ok().stdout;
        let len = before.len() + 1;
        let mut child = Command::new(BIN)
            .args(["write", &m0])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // Written from a thread: the writer stops reading once it has seen too much.
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(&pattern("too long", len));
        });
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("nothing was written"), "{err}");
        assert!(
            raidctl(["read", &m0]).ok().stdout == before,
            "{name}: the array changed"
        );
    }
}

/// Issue 15 bug 10: a `create` refused part-way left the member files it had made, and a typo
/// under /dev (`/dev/lop3` with `--size`) made a regular file on devtmpfs a member.
#[test]
fn failed_create_leaves_nothing_behind_and_dev_typos_are_refused() {
    let dir = tempdir();
    let m: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("m{i}"))).collect();
    // An existing, shorter file is extended by --size and put back to its length on failure.
    std::fs::write(&m[0], vec![7u8; 8192]).unwrap();
    // Too small for the metadata: refused after the files were made.
    let r = raidctl(args(&["create", "--level", "5", "--size", "64K"], &m));
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(!m[1].exists() && !m[2].exists(), "member files left behind");
    assert_eq!(std::fs::read(&m[0]).unwrap(), vec![7u8; 8192]);
    // A mistyped device name under /dev is never turned into a member file.
    let typo = PathBuf::from("/dev/raidctl-test-lop3");
    let _ = std::fs::remove_file(&typo);
    let r = raidctl(args(
        &["create", "--level", "1", "--size", "16M"],
        &[typo.clone(), m[1].clone()],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("devtmpfs"), "{}", r.stderr);
    assert!(!typo.exists() && !m[1].exists());
}

/// The data of extension record `tag` (the test fails if there is none).
fn ext(sb: &mut raidcore::format::Superblock, tag: u32) -> &mut Vec<u8> {
    &mut sb
        .extensions
        .iter_mut()
        .find(|e| e.tag == tag)
        .unwrap()
        .data
}

/// Rewrites both superblock copies of `member` with `f` applied to the body, bypassing every
/// check the encoder makes (an attacker's or a bit flip's superblock: hashes are valid).
fn forge(member: &std::path::Path, f: impl Fn(&mut raidcore::format::Superblock)) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(member)
        .unwrap();
    for off in [4096u64, 8192] {
        let mut raw = vec![0u8; 4096];
        file.read_exact_at(&mut raw, off).unwrap();
        let (mut sb, _) = raidcore::format::Superblock::decode(&raw).unwrap();
        f(&mut sb);
        let body = postcard::to_stdvec(&sb).unwrap();
        raw[24..28].copy_from_slice(&(body.len() as u32).to_le_bytes());
        raw[32..64].copy_from_slice(blake3::hash(&body).as_bytes());
        let hh = *blake3::hash(&raw[..64]).as_bytes();
        raw[64..96].copy_from_slice(&hh);
        raw[128..].fill(0);
        raw[128..128 + body.len()].copy_from_slice(&body);
        file.write_all_at(&raw, off).unwrap();
    }
}

/// Issue 15 bug 6: a crafted extension record (a bitmap length near 2^64) passed validation
/// and panicked `raidctl status` (exit 101); a missing or malformed checksum record under
/// incompat feature 1 opened the array without checksums. Each is now a corrupt superblock:
/// exit 3 naming the record, never a panic, never an array opened without what the bit demands.
#[test]
fn crafted_extension_records_are_refused_as_corrupt() {
    use raidcore::format::feature;
    type Craft = fn(&mut raidcore::format::Superblock);
    let cases: &[(&str, Craft, &str)] = &[
        (
            "bitmap length near 2^64",
            |sb| {
                ext(sb, feature::TAG_BITMAP)[8..16]
                    .copy_from_slice(&(u64::MAX - 4095).to_le_bytes());
            },
            "write-intent bitmap record",
        ),
        (
            "checksum record missing",
            |sb| sb.extensions.retain(|e| e.tag != feature::TAG_CSUM),
            "checksum area record",
        ),
        (
            "checksum record truncated",
            |sb| {
                ext(sb, feature::TAG_CSUM).truncate(23);
            },
            "checksum area record",
        ),
        (
            "checksum table past the data offset",
            |sb| {
                ext(sb, feature::TAG_CSUM)[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
            },
            "checksum area record",
        ),
        (
            "journal offset wrapping around",
            |sb| {
                ext(sb, feature::TAG_JOURNAL)[0..8]
                    .copy_from_slice(&(u64::MAX - 4095).to_le_bytes());
            },
            "write-hole journal record",
        ),
    ];
    for (what, craft, needle) in cases {
        let dir = tempdir();
        let m = array(dir.path(), "x", "5", 3);
        for p in &m {
            forge(p, *craft);
        }
        for cmd in ["status", "examine", "read"] {
            let mut a = vec![cmd.to_string(), m[0].display().to_string()];
            if cmd == "read" {
                a.extend(["--length".to_string(), "4096".to_string()]);
            }
            let before = hashes(&m);
            let r = raidctl(&a);
            assert_eq!(r.code, 3, "{what}: {cmd}: {}", r.stderr);
            assert!(r.stderr.contains(needle), "{what}: {cmd}: {}", r.stderr);
            assert_eq!(hashes(&m), before, "{what}: {cmd} wrote");
        }
    }
}

/// Issue 15 bug 3: a full copy of an array's member files (`cp -r A B`), assembled from B/m0,
/// was B/m0 + A/m1 + A/m2 through the absolute path hints: writes to the copy landed in the
/// original. Two copies of a member are now refused, naming both; with the original set moved
/// away the copy assembles from its own directory and the original stays byte-identical.
#[test]
fn a_copy_of_an_arrays_files_never_reaches_into_the_original() {
    let root = tempdir();
    let a_dir = root.path().join("A");
    std::fs::create_dir(&a_dir).unwrap();
    let a = array(&a_dir, "m", "5", 3);
    let b_dir = root.path().join("B");
    assert!(Command::new("cp")
        .args([
            "-r",
            &a_dir.display().to_string(),
            &b_dir.display().to_string()
        ])
        .status()
        .unwrap()
        .success());
    let b: Vec<PathBuf> = (0..3).map(|i| b_dir.join(format!("m{i}"))).collect();
    let before = hashes(&a);
    let w = raidctl(args(
        &["write", "--offset", "0", "--input", "/etc/hostname"],
        &b[..1],
    ));
    assert_eq!(w.code, 3, "{}", w.stderr);
    assert!(
        w.stderr.contains("copies of one member")
            && w.stderr.contains(&b_dir.display().to_string())
            && w.stderr.contains(&a_dir.display().to_string()),
        "{}",
        w.stderr
    );
    assert_eq!(hashes(&a), before, "the original changed");
    // The original set moved away: the copy is an array of its own files.
    let c_dir = root.path().join("C");
    std::fs::rename(&a_dir, &c_dir).unwrap();
    let c: Vec<PathBuf> = (0..3).map(|i| c_dir.join(format!("m{i}"))).collect();
    write_at(&b[0], 4096, &pattern("copy", 100_000), root.path());
    assert_eq!(hashes(&c), before, "the original changed");
    let st = status_run(["status", "--json", &b[1].display().to_string()]).json();
    for (i, m) in st["members"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            m["path"].as_str().unwrap(),
            b[i].display().to_string(),
            "{st}"
        );
    }
    assert_eq!(
        read_at(&b[2], 4096, 100_000).ok().stdout,
        pattern("copy", 100_000)
    );
}

/// Issue 15 bug 2: an old copy of a member (a backup taken before later writes, same event
/// count) put back in place was accepted as current: reads mixed old and new data with exit
/// 0, and `scrub --repair` made the stale data permanent. Every member now records every
/// member's superblock generation; one found more than one update behind is an older copy:
/// refused when named, left out (to be rebuilt) otherwise.
#[test]
fn a_restored_old_copy_of_a_member_is_never_trusted() {
    let dir = tempdir();
    let m = array(dir.path(), "g", "5", 3);
    let old = pattern("old", 300_000);
    let new = pattern("new", 300_000);
    write_at(&m[0], 0, &old, dir.path());
    // (Kept elsewhere: next to the members, an identical copy is refused as a second copy.)
    let elsewhere = tempdir();
    let backup = elsewhere.path().join("backup-of-g1");
    std::fs::copy(&m[1], &backup).unwrap();
    write_at(&m[0], 0, &new, dir.path());
    // The old copy goes back in place of the member.
    std::fs::copy(&backup, &m[1]).unwrap();
    std::fs::remove_file(&backup).unwrap();
    // Named itself: refused.
    let r = raidctl(["read", &m[1].display().to_string(), "--length", "4096"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("older copy"), "{}", r.stderr);
    // Through a current member: the old copy is left out, reads are the newest data.
    assert_eq!(read_at(&m[0], 0, new.len()).ok().stdout, new);
    let st = status_run(["status", "--json", &m[2].display().to_string()]).json();
    assert_ne!(st["members"][1]["state"], "active", "{st}");
    // A scrub --repair must not turn the old copy's blocks into the array's data.
    let _ = raidctl(["scrub", "--repair", &m[0].display().to_string()]);
    assert_eq!(read_at(&m[2], 0, new.len()).ok().stdout, new);
}

/// Issue 15 bug 9: ENOSPC on two members during a write left them failed one after the other;
/// the array was refused even read-only and nothing could bring it up. `--force-assemble`
/// takes back the most recently failed member present (as mdadm --assemble --force), with a
/// loud warning, and the data flushed before the storm reads back.
#[test]
fn two_members_out_of_space_then_force_assemble_reads_the_flushed_data() {
    let dir = tempdir();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    assert!(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=24M", "tmpfs"])
        .arg(&small)
        .status()
        .unwrap()
        .success());
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _mnt = Unmount(small.clone());
    let m = vec![dir.path().join("m0"), small.join("m1"), small.join("m2")];
    // Sparse members larger than the small file system: the data flushed first lies in the
    // first write-intent region, the storm in a later one (so only the storm's rows are
    // suspect when the members fail).
    raidctl(args(
        &["create", "--level", "5", "--size", "200M", "--no-checksums"],
        &m,
    ))
    .ok();
    let keep = pattern("before-the-storm", 1 << 20);
    write_at(&m[0], 0, &keep, dir.path());
    // Fills the small file system: both members on it run out of space, one after the other.
    let big = dir.path().join("big");
    std::fs::write(&big, pattern("storm", 200 << 20)).unwrap();
    let faulty = || {
        let st = raidctl(["status", "--json", &m[0].display().to_string()]).json();
        st["members"]
            .as_array()
            .map(|v| v.iter().filter(|x| x["state"] == "faulty").count())
            .unwrap_or(0)
    };
    // Until both members on the small file system are out (a run can stop after the first).
    for _ in 0..3 {
        if faulty() >= 2 {
            break;
        }
        let w = raidctl([
            "write",
            &m[0].display().to_string(),
            "--offset",
            "157286400",
            "--input",
            &big.display().to_string(),
        ]);
        assert_ne!(w.code, 0, "the storm wrote everything: {}", w.stderr);
    }
    assert_eq!(
        faulty(),
        2,
        "the storm did not fail both members on the small file system"
    );
    let r = read_at(&m[0], 0, keep.len());
    assert_eq!(r.code, 5, "{}", r.stderr);
    let r = raidctl([
        "read",
        &m[0].display().to_string(),
        "--length",
        &keep.len().to_string(),
        "--force-assemble",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("FORCED"), "{}", r.stderr);
    assert!(
        r.stdout == keep,
        "the data flushed before the storm does not read back"
    );
}
