//! The resync after an unclean stop (issue 31, item 1): it must verify what it reads before it
//! writes parity or mirror copies and records checksum entries from it. Rot in the data blocks
//! of one member (on the medium, or only in what the resync reads) is restored from
//! redundancy, never made consistent and blessed.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;

const B: usize = 4096;
/// Bytes of the pattern written from array offset 0.
const WRITTEN: usize = 4 << 20;

struct Level {
    args: &'static [&'static str],
    members: usize,
}

const LEVELS: [Level; 5] = [
    Level {
        args: &["--level", "raid5"],
        members: 4,
    },
    Level {
        args: &["--level", "f1"],
        members: 4,
    },
    Level {
        args: &["--level", "raid6"],
        members: 5,
    },
    Level {
        args: &["--level", "raid1"],
        members: 2,
    },
    Level {
        args: &["--level", "raid10"],
        members: 4,
    },
];

fn examine(member: &str) -> serde_json::Value {
    raidctl(["examine", "--json", member]).ok().json()
}

/// An array of `level` with `data` written from offset 0 and cleanly stopped, then left dirty
/// (write-intent bits set) by kill -9 of a `raidctl write` writing the same bytes again: every
/// block still holds what its checksum entry says, and the next writable open resyncs.
fn dirty_array(dir: &Path, level: &Level, data: &[u8]) -> Vec<String> {
    let m: Vec<PathBuf> = (0..level.members)
        .map(|i| dir.join(format!("m{i}")))
        .collect();
    let ms = strs(&m);
    let mut args = vec!["create", "--size", "16M", "--chunk", "16K"];
    args.extend(level.args);
    args.extend(ms.iter().map(|s| s.as_str()));
    raidctl(&args).ok();
    let ex = examine(&ms[1]);
    assert_eq!(
        ex["areas"]["checksums"]["block_bytes"], 4096,
        "checksums are on by default: {ex}"
    );
    write_at(Path::new(&ms[0]), 0, data, dir);
    assert_eq!(examine(&ms[1])["clean"], true);
    let input = dir.join("again");
    std::fs::write(&input, data).unwrap();
    // Slow member writes, so the kill lands while the write is under way; the delay adapts
    // as in crash.rs (a loaded machine may take long to start the writer).
    let slow = format!("{}:latency=3ms", ms[0]);
    let mut delay = 150u64;
    for _ in 0..40 {
        let mut w = Command::new(BIN)
            .args([
                "write", &ms[0], "--offset", "0", "--inject", &slow, "--input",
            ])
            .arg(&input)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let finished = w.try_wait().unwrap().is_some();
        let _ = w.kill();
        let _ = w.wait();
        let ex = examine(&ms[1]);
        let bm = &ex["areas"]["bitmap"];
        let mut bits = vec![0u8; bm["bytes"].as_u64().unwrap() as usize];
        std::fs::File::open(&m[1])
            .unwrap()
            .read_exact_at(&mut bits, bm["offset"].as_u64().unwrap())
            .unwrap();
        if !ex["clean"].as_bool().unwrap() && bits.iter().any(|&x| x != 0) {
            // One region covers every row of these small members.
            let rows = ex["data_rows"].as_u64().unwrap();
            assert!(bm["rows_per_region"].as_u64().unwrap() >= rows, "{ex}");
            assert_eq!(bits[0] & 1, 1, "{ex}");
            std::fs::remove_file(&input).unwrap();
            return ms;
        }
        // A writer killed before it began leaves the array clean: wait longer next time.
        delay = if finished {
            (delay / 2).max(5)
        } else {
            delay * 3 / 2
        };
    }
    panic!("no kill in 40 tries left the array dirty with write-intent bits set");
}

/// Member offsets (with their array offsets) of 8 blocks of `member` that hold data blocks of
/// `data`, spread over its data area: found by content, whatever the layout.
fn data_blocks(member: &str, data: &[u8]) -> Vec<(u64, u64)> {
    let ex = examine(member);
    let data_off = ex["areas"]["data"]["offset"].as_u64().unwrap();
    let by_content: HashMap<&[u8], u64> = data
        .chunks(B)
        .enumerate()
        .map(|(i, b)| (b, (i * B) as u64))
        .collect();
    let mut area = vec![0u8; WRITTEN];
    std::fs::File::open(member)
        .unwrap()
        .read_exact_at(&mut area, data_off)
        .unwrap();
    let found: Vec<(u64, u64)> = area
        .chunks(B)
        .enumerate()
        .filter_map(|(i, b)| by_content.get(b).map(|&l| (data_off + (i * B) as u64, l)))
        .collect();
    assert!(found.len() >= 40, "{member}: {} data blocks", found.len());
    found
        .iter()
        .step_by(found.len() / 8)
        .take(8)
        .copied()
        .collect()
}

/// Flips 16 bytes of the block at member offset `off`.
fn rot(member: &str, off: u64) {
    rot_bytes(member, off + 1000);
}

fn read_block(member: &str, off: u64) -> Vec<u8> {
    let mut b = vec![0u8; B];
    std::fs::File::open(member)
        .unwrap()
        .read_exact_at(&mut b, off)
        .unwrap();
    b
}

/// Runs `check` for every level and reports every level that failed, not only the first.
fn each_level(check: impl Fn(&Level) + std::panic::RefUnwindSafe) {
    let failed: Vec<String> = LEVELS
        .iter()
        .filter_map(|level| {
            std::panic::catch_unwind(|| check(level)).err().map(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            })
        })
        .collect();
    assert!(failed.is_empty(), "failing levels:\n{}", failed.join("\n"));
}

/// Every byte written reads back as written, and a scrub finds nothing left.
fn assert_intact(ms: &[String], data: &[u8], what: &str) {
    let r = read_at(Path::new(&ms[0]), 0, WRITTEN);
    assert_eq!(r.code, 0, "{what}: read after the resync: {}", r.stderr);
    let wrong: Vec<usize> = (0..WRITTEN / B)
        .filter(|&i| r.stdout[i * B..(i + 1) * B] != data[i * B..(i + 1) * B])
        .collect();
    assert!(
        wrong.is_empty(),
        "{what}: {} blocks read back wrong with exit 0 (array offsets {:?})",
        wrong.len(),
        wrong.iter().map(|i| i * B).collect::<Vec<_>>()
    );
    let s = raidctl(["scrub", "--json", &ms[0]]);
    assert_eq!(s.code, 0, "{what}: scrub: {}", s.stderr);
    let v = s.json();
    assert_eq!(
        v["problems"].as_array().unwrap().len(),
        0,
        "{what}: scrub after the resync: {v}"
    );
}

#[test]
fn resync_after_kill_does_not_launder_rotted_data_blocks() {
    each_level(|level| {
        let name = level.args[1];
        let dir = tempdir();
        let data = pattern(&format!("resync-rot-{name}"), WRITTEN);
        let ms = dirty_array(dir.path(), level, &data);
        // 16 bytes rotted in 8 data blocks of one member while the array was down (slot 0: it
        // holds data at every level, and the first copy of mirrored chunks).
        let victims = data_blocks(&ms[0], &data);
        for &(off, _) in &victims {
            rot(&ms[0], off);
        }
        // The next writable open resyncs: the rot is found and restored from redundancy.
        let r = raidctl(["scrub", "--json", &ms[0]]);
        assert!(r.stderr.contains("resynced"), "{name}: {}", r.stderr);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        let scrubbed = r.json();
        let got = read_at(Path::new(&ms[0]), 0, WRITTEN);
        for &(off, logical) in &victims {
            let l = logical as usize;
            assert!(
                got.code != 0 || got.stdout[l..l + B] == data[l..l + B],
                "{name}: rotted block at array offset {logical} reads back wrong with exit 0"
            );
            assert!(
                read_block(&ms[0], off) == data[l..l + B],
                "{name}: rotted block at member offset {off} (array offset {logical}) not restored"
            );
        }
        assert_eq!(
            scrubbed["problems"].as_array().unwrap().len(),
            0,
            "{name}: scrub right after the resync: {scrubbed}"
        );
        assert!(
            r.stderr.contains("failing their checksums"),
            "{name}: the resync reports the rot: {}",
            r.stderr
        );
        assert_intact(&ms, &data, name);
    });
}

/// The same, with the rot only in what the resync reads (a member returning rotten reads,
/// `--inject MEMBER:corrupt-on-read`): nothing it read wrong may end up in parity, copies or
/// checksum entries.
#[test]
fn resync_after_kill_does_not_launder_rotten_reads() {
    each_level(|level| {
        let name = level.args[1];
        let dir = tempdir();
        let data = pattern(&format!("resync-rotten-reads-{name}"), WRITTEN);
        let ms = dirty_array(dir.path(), level, &data);
        let ex = examine(&ms[0]);
        let data_off = ex["areas"]["data"]["offset"].as_u64().unwrap();
        let data_bytes = ex["areas"]["data"]["bytes"].as_u64().unwrap();
        // Slot 0 holds data at every level, and the first copy of mirrored chunks.
        let spec = format!(
            "{}:corrupt-on-read=3%@{}-{}",
            ms[0],
            data_off,
            data_off + data_bytes
        );
        // The next writable open (a write of the same first block) resyncs under the rot.
        let input = dir.path().join("first");
        std::fs::write(&input, &data[..B]).unwrap();
        let r = raidctl([
            "write",
            &ms[0],
            "--offset",
            "0",
            "--inject",
            &spec,
            "--input",
            input.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert!(r.stderr.contains("resynced"), "{name}: {}", r.stderr);
        assert!(
            r.stderr.contains("rotten blocks") && !r.stderr.contains(" 0 rotten blocks"),
            "{name}: the drill rotted reads: {}",
            r.stderr
        );
        assert_intact(&ms, &data, name);
    });
}
