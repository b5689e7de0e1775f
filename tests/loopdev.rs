//! Every level over real loop devices; a member is removed by detaching its loop device.

use crate::levels::scenario;
use std::path::Path;

use crate::util::*;

fn over_loops(level_args: &[&str], n: usize) {
    let dir = tempdir();
    let mut loops: Vec<LoopDev> = (0..n)
        .map(|i| {
            let f = dir.path().join(format!("backing{i}"));
            sparse_file(&f, 24 << 20);
            LoopDev::attach(&f)
        })
        .collect();
    let devs: Vec<_> = loops.iter().map(|l| l.dev.clone()).collect();
    let mut remove = |slot: usize| loops[slot].detach();
    scenario(level_args, &devs, &mut remove, dir.path());
}

macro_rules! loop_tests {
    ($($name:ident: $n:expr, [$($arg:expr),*];)*) => {
        $(#[test] fn $name() { over_loops(&[$($arg),*], $n); })*
    };
}

loop_tests! {
    raid0_loop: 2, ["--level", "0"];
    raid1_loop: 2, ["--level", "1"];
    raid10_loop: 4, ["--level", "10"];
    raid5_loop: 3, ["--level", "5"];
    f1_loop: 4, ["--level", "f1"];
    raid6_loop: 4, ["--level", "6"];
}

/// Issue 15 bug 1: a renamed disk became stale. Members on block devices were found only at
/// their stored path and with `--scan`; after a member's loop device came back under another
/// number the array assembled degraded and the healthy member needed a full rebuild. Members
/// are now found by uuid on every block device.
#[test]
fn a_renamed_loop_device_is_found_and_not_rebuilt() {
    let dir = tempdir();
    let files: Vec<_> = (0..3).map(|i| dir.path().join(format!("b{i}"))).collect();
    for f in &files {
        sparse_file(f, 24 << 20);
    }
    let mut loops: Vec<LoopDev> = files.iter().map(|f| LoopDev::attach(f)).collect();
    let devs: Vec<String> = loops.iter().map(|l| l.dev.display().to_string()).collect();
    let mut args = vec!["create", "--level", "5"];
    args.extend(devs.iter().map(|s| s.as_str()));
    raidctl(&args).ok();
    let data = pattern("renamed", 200_000);
    write_at(Path::new(&devs[0]), 0, &data, dir.path());
    // Member 1 comes back under another number (its old one taken by something else).
    loops[1].detach();
    let filler = dir.path().join("filler");
    sparse_file(&filler, 1 << 20);
    let _taken = LoopDev::attach(&filler);
    let moved = LoopDev::attach(&files[1]);
    assert_ne!(
        moved.dev.display().to_string(),
        devs[1],
        "the device was not renamed"
    );
    let st = status_run(["status", "--json", &devs[0]]).json();
    assert_eq!(st["state"], "clean", "{st}");
    let paths: Vec<&str> = st["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&moved.dev.to_str().unwrap()), "{st}");
    assert_eq!(
        read_at(Path::new(&devs[2]), 0, data.len()).ok().stdout,
        data
    );
    // The next writable open records where it is now.
    write_at(Path::new(&devs[0]), 0, &data, dir.path());
    let st = status_run(["status", "--json", &devs[2]]).json();
    assert_eq!(st["state"], "clean", "{st}");
    drop(moved);
    loops.clear();
}

/// ARRAY may be given as UUID=<array uuid> (how a boot-time unit names an array): the first
/// member of that array on any block device is used; an unknown uuid is a usage error.
#[test]
fn an_array_is_named_by_uuid() {
    let dir = tempdir();
    let loops: Vec<LoopDev> = (0..2)
        .map(|i| {
            let f = dir.path().join(format!("u{i}"));
            sparse_file(&f, 24 << 20);
            LoopDev::attach(&f)
        })
        .collect();
    let devs: Vec<String> = loops.iter().map(|l| l.dev.display().to_string()).collect();
    raidctl(["create", "--level", "1", &devs[0], &devs[1]]).ok();
    let data = pattern("by-uuid", 100_000);
    write_at(Path::new(&devs[0]), 0, &data, dir.path());
    let uuid = raidctl(["examine", "--json", &devs[1]]).ok().json()["array_uuid"]
        .as_str()
        .unwrap()
        .to_string();
    let st = status_run(["status", "--json", &format!("UUID={uuid}")]).json();
    assert_eq!(st["uuid"], uuid.as_str(), "{st}");
    assert_eq!(st["state"], "clean", "{st}");
    let got = raidctl(["read", "--length", "100000", &format!("UUID={uuid}")]).ok();
    assert_eq!(got.stdout, data);
    raidctl(["status", "UUID=00000000-0000-4000-8000-000000000000"]).fails(
        2,
        &["no member of array 00000000-0000-4000-8000-000000000000"],
    );
    raidctl(["status", "UUID=nonsense"]).fails(2, &["is not a uuid"]);
}
