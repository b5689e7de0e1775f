//! Golden member images (fixtures/golden, made by an earlier version and never regenerated
//! silently) assemble and read back their known content.
//!
//! To add images for a new format version, run
//! `RAIDCTL_REGEN_GOLDEN=1 cargo test --test tests golden::regenerate -- --ignored`
//! and commit the new directory; existing ones must keep passing unchanged.

use std::io::{Read, Write};
use std::path::Path;

use crate::util::*;

const CASES: &[(&str, usize, &[&str])] = &[
    ("raid0", 3, &["--level", "0"]),
    ("raid1", 2, &["--level", "1"]),
    ("raid10", 4, &["--level", "10"]),
    ("raid5", 4, &["--level", "5"]),
    ("f1", 4, &["--level", "f1"]),
    ("raid6", 5, &["--level", "6"]),
];

/// Images with blake3 block checksums, made before xxh3 became the default hash: they must
/// keep verifying with blake3.
const CSUM_CASES: &[(&str, usize)] = &[("raid1", 2), ("raid5", 4)];

fn golden_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/v1")
}

/// Unpacks image set `set` of `name` into a fresh directory; returns it and member 0's path.
fn unpack(set: &str, name: &str, n: usize) -> (tempfile::TempDir, String) {
    let dir = tempdir();
    for i in 0..n {
        let gz = golden_dir()
            .with_file_name(set)
            .join(name)
            .join(format!("m{i}.img.gz"));
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(
            std::fs::File::open(&gz).unwrap_or_else(|e| panic!("{}: {e}", gz.display())),
        )
        .read_to_end(&mut raw)
        .unwrap();
        std::fs::write(dir.path().join(format!("m{i}")), raw).unwrap();
    }
    let m0 = dir.path().join("m0").display().to_string();
    (dir, m0)
}

/// The known content: (offset, bytes) pairs, derived from the level name.
fn content(name: &str, size: u64) -> Vec<(u64, Vec<u8>)> {
    vec![
        (1000, pattern(&format!("golden-{name}-1"), 150_000)),
        (size - 70_001, pattern(&format!("golden-{name}-2"), 70_000)),
    ]
}

#[test]
fn golden_images_assemble_and_read_back() {
    for (name, n, _) in CASES {
        let (dir, m0) = unpack("v1", name, *n);
        let st = status_run(["status", "--json", &m0]).json();
        assert_eq!(st["level"], *name);
        assert_eq!(st["state"], "clean", "{name}: {st}");
        let size = st["size_bytes"].as_u64().unwrap();
        for (off, data) in content(name, size) {
            let got = read_at(Path::new(&m0), off, data.len()).ok().stdout;
            assert!(got == data, "{name}: golden content at {off} differs");
        }
        // Degraded reads of golden images work too (drop the last member when redundant).
        if st["tolerance"].as_u64().unwrap() > 0 {
            std::fs::remove_file(dir.path().join(format!("m{}", n - 1))).unwrap();
            let (off, data) = &content(name, size)[0];
            assert!(
                read_at(Path::new(&m0), *off, data.len()).ok().stdout == *data,
                "{name}: degraded golden read"
            );
        }
    }
}

#[test]
fn golden_blake3_checksummed_images_verify_with_blake3() {
    for (name, n) in CSUM_CASES {
        let (_dir, m0) = unpack("v1-blake3", name, *n);
        let st = status_run(["status", "--json", &m0]).json();
        assert_eq!(st["checksum_hash"], "blake3", "{name}: {st}");
        let size = st["size_bytes"].as_u64().unwrap();
        for (off, data) in content(name, size) {
            let got = read_at(Path::new(&m0), off, data.len()).ok().stdout;
            assert!(got == data, "{name}: golden content at {off} differs");
        }
        // Every block of every member matches its entry under blake3 (with another hash every
        // written block would count as a checksum error).
        let r = raidctl(["scrub", "--json", &m0]);
        assert_eq!(r.code, 0, "{name}: {}", r.stdout_str());
        let rep = r.json();
        assert_eq!(
            rep["problems"].as_array().map(Vec::len),
            Some(0),
            "{name}: {rep}"
        );
        let st = status_run(["status", "--json", &m0]).json();
        for m in st["members"].as_array().unwrap() {
            assert_eq!(m["checksum_errors"], 0, "{name}: {st}");
        }
    }
}

#[test]
#[ignore = "writes fixtures; run explicitly with RAIDCTL_REGEN_GOLDEN=1"]
fn regenerate() {
    if std::env::var("RAIDCTL_REGEN_GOLDEN").as_deref() != Ok("1") {
        panic!("set RAIDCTL_REGEN_GOLDEN=1 to regenerate golden images");
    }
    for (name, n, level) in CASES {
        let dir = tempdir();
        let m = members(dir.path(), *n);
        let mut args: Vec<String> = vec![
            "create".into(),
            "--name".into(),
            format!("golden-{name}"),
            "--chunk".into(),
            "16K".into(),
            "--size".into(),
            "3M".into(),
            "--json".into(),
        ];
        args.extend(level.iter().map(|s| s.to_string()));
        args.extend(strs(&m));
        let size = raidctl(&args).ok().json()["size_bytes"].as_u64().unwrap();
        for (off, data) in content(name, size) {
            write_at(&m[0], off, &data, dir.path());
        }
        let out = golden_dir().join(name);
        std::fs::create_dir_all(&out).unwrap();
        for (i, p) in m.iter().enumerate() {
            let mut enc = flate2::write::GzEncoder::new(
                std::fs::File::create(out.join(format!("m{i}.img.gz"))).unwrap(),
                flate2::Compression::best(),
            );
            enc.write_all(&std::fs::read(p).unwrap()).unwrap();
            enc.finish().unwrap();
        }
    }
}
