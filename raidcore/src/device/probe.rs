//! Device probing before we write: signatures of file systems, partition tables and other
//! arrays, and whether a device is mounted or used by something else.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Member;

/// Known signatures: (name, byte offset, magic bytes).
const SIGNATURES: &[(&str, u64, &[u8])] = &[
    ("ext2/3/4 file system", 1080, &[0x53, 0xef]),
    ("XFS file system", 0, b"XFSB"),
    ("btrfs file system", 65600, b"_BHRfS_M"),
    ("LUKS volume", 0, b"LUKS\xba\xbe"),
    ("LVM2 physical volume", 536, b"LVM2 001"),
    ("GPT partition table", 512, b"EFI PART"),
    ("Linux md superblock (1.1)", 0, &[0xfc, 0x4e, 0x2b, 0xa9]),
    ("Linux md superblock (1.2)", 4096, &[0xfc, 0x4e, 0x2b, 0xa9]),
    ("swap space", 4086, b"SWAPSPACE2"),
    ("ISO 9660 file system", 32769, b"CD001"),
    ("FAT file system", 82, b"FAT32   "),
    ("FAT file system", 54, b"FAT16   "),
    ("FAT file system", 54, b"FAT12   "),
    ("NTFS file system", 3, b"NTFS    "),
    (
        "bcache device",
        4120,
        &[0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca],
    ),
];

/// Names of the foreign signatures found on a member (not raidctl's own superblock).
/// Uses the built-in table and, when installed, `blkid -p` for everything else it knows.
pub fn foreign_signatures(member: &dyn Member, path: Option<&Path>) -> Vec<String> {
    let mut found = Vec::new();
    let head_len = member.len().min(70_000) as usize;
    let mut head = vec![0u8; head_len];
    if member.read_at(&mut head, 0).is_ok() {
        for (name, off, magic) in SIGNATURES {
            let (o, e) = (*off as usize, *off as usize + magic.len());
            if e <= head.len() && &head[o..e] == *magic && !found.iter().any(|f| f == name) {
                found.push(name.to_string());
            }
        }
        if head.len() >= 512 && head[510] == 0x55 && head[511] == 0xaa && found.is_empty() {
            found.push("DOS/MBR boot sector or partition table".to_string());
        }
    }
    if let Some(p) = path {
        if let Some(t) = blkid_type(p) {
            if t != "raidctl"
                && !found
                    .iter()
                    .any(|f| f.to_lowercase().contains(&t.to_lowercase()))
            {
                found.push(format!("{t} (blkid)"));
            }
        }
    }
    found
}

fn blkid_type(path: &Path) -> Option<String> {
    let out = Command::new("blkid")
        .args(["-p", "-o", "export"])
        .arg(path)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("TYPE=")
                .or_else(|| l.strip_prefix("PTTYPE="))
        })
        .map(|s| s.to_string())
}

/// Why a device cannot be used at all (mounted, attached to a loop device, held by another
/// device), or None. Such a device is refused even with --force.
pub fn in_use(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.file_type().is_block_device() {
        let rdev = meta.rdev();
        let (maj, min) = (libc::major(rdev), libc::minor(rdev));
        if let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") {
            for line in info.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() > 4 && f[2] == format!("{maj}:{min}") {
                    return Some(format!("{} is mounted on {}", path.display(), f[4]));
                }
            }
        }
        if let Ok(swaps) = std::fs::read_to_string("/proc/swaps") {
            let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            if swaps
                .lines()
                .skip(1)
                .any(|l| l.split_whitespace().next() == Some(&canon.display().to_string()))
            {
                return Some(format!("{} is in use as swap", path.display()));
            }
        }
        let holders = PathBuf::from(format!("/sys/dev/block/{maj}:{min}/holders"));
        if let Ok(mut d) = std::fs::read_dir(&holders) {
            if let Some(Ok(h)) = d.next() {
                return Some(format!(
                    "{} is held by {}",
                    path.display(),
                    h.file_name().to_string_lossy()
                ));
            }
        }
    } else if meta.file_type().is_file() {
        if let Some(dev) = loop_device_backed_by(path) {
            return Some(format!("{} is attached to {dev}", path.display()));
        }
    }
    None
}

/// The loop device whose backing file is `path`, if any.
pub fn loop_device_backed_by(path: &Path) -> Option<String> {
    let canon = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&canon).ok()?;
    for entry in std::fs::read_dir("/sys/block").ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.starts_with("loop") {
            continue;
        }
        let backing = entry.path().join("loop/backing_file");
        if let Ok(b) = std::fs::read_to_string(&backing) {
            let b = b.trim_end();
            let b = b.strip_suffix(" (deleted)").unwrap_or(b);
            if let Ok(bm) = std::fs::metadata(b) {
                if bm.ino() == meta.ino() && bm.dev() == meta.dev() {
                    return Some(format!("/dev/{name}"));
                }
            }
        }
    }
    None
}
