//! kill -9 of a process writing through raidctl, many times: the next writable command resyncs
//! only the regions the write-intent bitmap marked, scrub then finds every row consistent, and
//! data written and flushed before is intact.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;

/// Runs `count` trials; returns how many left the array dirty (killed mid-write).
fn trials(level: &str, n: usize, count: usize) -> usize {
    let dir = tempdir();
    let m: Vec<PathBuf> = (0..n).map(|i| dir.path().join(format!("m{i}"))).collect();
    let ms = strs(&m);
    let mut args = vec![
        "create", "--level", level, "--chunk", "16K", "--size", "160M",
    ];
    args.extend(ms.iter().map(|s| s.as_str()));
    raidctl(&args).ok();
    let a = Path::new(&ms[0]);
    // Flushed before any crash: must survive every trial.
    let keep = pattern(&format!("keep-{level}"), 3 << 20);
    write_at(a, 12345, &keep, dir.path());
    let big = dir.path().join("big");
    std::fs::write(&big, pattern("big", 24 << 20)).unwrap();
    let rows_total = raidctl(["examine", "--json", &ms[0]]).ok().json()["data_rows"]
        .as_u64()
        .unwrap();
    let mut x: u64 = 0x1234_5678;
    let mut dirty = 0;
    for t in 0..count {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let offset = (4 << 20) + (x >> 40) % (8 << 20);
        let mut w = Command::new(BIN)
            .args([
                "write",
                &ms[0],
                "--offset",
                &offset.to_string(),
                "--input",
                &big.display().to_string(),
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis((x >> 20) % 40));
        let _ = w.kill();
        let _ = w.wait();
        let r = raidctl(["scrub", "--json", &ms[1]]);
        assert_eq!(r.code, 0, "trial {t}: {}", r.stderr);
        let rep = r.json();
        assert_eq!(
            rep["problems"].as_array().unwrap().len(),
            0,
            "trial {t}: scrub after resync: {rep}"
        );
        if let Some(line) = r.stderr.lines().find(|l| l.contains("resynced")) {
            dirty += 1;
            // "resynced N of M rows": only the marked regions, not the whole array.
            let n: u64 = line
                .split("resynced ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                n < rows_total,
                "trial {t}: resync covered the whole array ({line})"
            );
        }
        let got = read_at(a, 12345, keep.len()).ok().stdout;
        assert!(got == keep, "trial {t}: flushed data lost");
    }
    dirty
}

#[test]
fn kill_9_during_writes_then_resync_and_scrub_clean() {
    let dirty = trials("5", 4, 50) + trials("6", 5, 50);
    eprintln!("kill -9 trials: 100, of which {dirty} killed the writer mid-write (resynced)");
    assert!(
        dirty >= 10,
        "too few trials hit a write in progress: {dirty}"
    );
}
